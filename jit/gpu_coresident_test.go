//go:build cuda && cgo

package jit

import (
	"strings"
	"testing"
)

// TestGPUCoResident launches a grid barrier over the most blocks the GPU holds at once
// (cooperatively; it completes) and checks a grid one block larger is refused before launch.
func TestGPUCoResident(t *testing.T) {
	d := openGPUOrSkip(t, 0)
	defer d.Close()
	_, f := loadFunc(t, d, gridBarrier(t), "grid_barrier")
	block := D1(1024)
	n, err := f.ResidentBlocks(block, 0)
	if err != nil {
		t.Fatal(err)
	}
	why := f.impl.(coLauncher).residentLimit(block, 0)
	t.Logf("%s: %d blocks of 1024 threads resident at once (%s)", d.Info().Name, n, why)
	if n < d.Info().Multiproc {
		t.Fatalf("%d resident blocks on %d SMs", n, d.Info().Multiproc)
	}
	cnt, err := Alloc[uint32](d, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Alloc[uint32](d, n+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cnt.CopyFromHost([]uint32{0}); err != nil {
		t.Fatal(err)
	}
	if err := out.CopyFromHost(make([]uint32, n+1)); err != nil {
		t.Fatal(err)
	}
	err = f.Launch(LaunchConfig{Grid: D1(n + 1), Block: block, CoResident: true}, cnt, out)
	if err == nil || !strings.Contains(err.Error(), "resident at once") || !strings.Contains(err.Error(), why) {
		t.Fatalf("a grid of %d blocks: %v; want it refused", n+1, err)
	}
	if err := f.Launch(LaunchConfig{Grid: D1(n), Block: block, CoResident: true}, cnt, out); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, n+1)
	if err := out.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got[i] != 1 {
			t.Fatalf("block %d did not pass the grid barrier", i)
		}
	}
	if got[n] != 0 {
		t.Fatal("a block beyond the grid ran")
	}
}

// TestGPUCoResidentLargeShared: a co-resident launch with more than 48 KiB of dynamic shared
// memory counts its resident blocks after raising the function's limit, as the launch does
// (the calculator said 0 before, and every such CoResident launch was refused: the MoE's
// bulk kernels, 150 KiB a block, on an H200).
func TestGPUCoResidentLargeShared(t *testing.T) {
	d := openGPUOrSkip(t, 0)
	defer d.Close()
	_, f := loadFunc(t, d, gridBarrier(t), "grid_barrier")
	const shared = 150 << 10
	n, err := f.impl.(coLauncher).residentBlocks(D1(256), shared)
	if err != nil {
		t.Fatal(err)
	}
	if n != d.Info().Multiproc {
		t.Fatalf("%d blocks of 256 threads and %d bytes of shared memory resident on %d SMs; want one an SM", n, shared, d.Info().Multiproc)
	}
	cnt, err := Alloc[uint32](d, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Alloc[uint32](d, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := cnt.CopyFromHost([]uint32{0}); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(LaunchConfig{Grid: D1(n), Block: D1(256), SharedMem: shared, CoResident: true}, cnt, out); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}
