//go:build cuda && cgo && linux && amd64

package cudrv_test

import (
	"os"
	"testing"

	"github.com/kgen-dev/kgen/jit/internal/cudrv"
	cu "gorgonia.org/cu" // its init calls cuInit; it must not exit this test binary
)

// On a machine without a driver this binary starts, gorgonia's init passes, and Err explains.
// With a driver and a GPU, Err is nil and gorgonia works.
func TestErr(t *testing.T) {
	err := cudrv.Err()
	t.Logf("driver %q: %v", cudrv.Path(), err)
	if err != nil {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" {
			t.Fatal(err)
		}
		return
	}
	n, err := cu.NumDevices()
	if err != nil || n < 1 {
		t.Fatalf("driver loaded but NumDevices = %d, %v", n, err)
	}
	v := cu.Version()
	t.Logf("%d devices, driver version %d", n, v)
}
