//go:build !(cuda && cgo)

package main

import "errors"

// floors needs the driver from C: only the cuda build has it.
func floors(int, []byte, int) error {
	return errors.New("driver floors: this binary was built without the cuda tag")
}
