//go:build !cuda

package main

import "fmt"

func runRank(dir string) error {
	_ = dir
	return fmt.Errorf("built without the cuda tag; rebuild with -tags cuda (scripts/gpu-nvshmem.sh)")
}
