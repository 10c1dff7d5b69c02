//go:build cuda && cgo

package jit

import "testing"

// TestGPUTMA runs the emulator's TMA program on GPU 0: boxes of a u16 tensor loaded through
// cuTensorMapEncodeTiled maps with each swizzle (interior and every edge, zero fill), the
// 24-byte array parameter, and the tensor-map launch errors.
func TestGPUTMA(t *testing.T) {
	d := openGPUOrSkip(t, 0, WithCache(NewCache(t.TempDir())))
	defer d.Close()
	if d.Info().SM < 90 {
		t.Skipf("%s is %s; TMA needs sm_90", d.Info().Name, d.Info().Arch)
	}
	if err := tmaProgram(d); err != nil {
		t.Fatal(err)
	}
}

// TestGPUTMAErrors checks NewTensorMap's errors on the GPU (the same rules as the emulator's)
// and that the driver accepts an interleaved map, which the emulator refuses.
func TestGPUTMAErrors(t *testing.T) {
	d := openGPUOrSkip(t, 0)
	defer d.Close()
	if err := tensorMapErrors(d); err != nil {
		t.Fatal(err)
	}
	buf, err := Alloc[uint16](d, 16*4*4)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if _, err := NewTensorMap(buf, []uint64{8, 4, 4}, []uint64{16, 64}, []uint32{8, 4, 4}, SwizzleNone, WithInterleave(16)); err != nil {
		t.Fatalf("interleaved map: %v", err)
	}
}

// TestGPUTMACluster runs the emulator's cluster program on GPU 0: a 4 x 2 grid in 2 x 2
// clusters through cuLaunchKernelEx, a PDL launch after it, the same captured in a graph,
// a 16-block non-portable cluster, and the launch errors.
func TestGPUTMACluster(t *testing.T) {
	d := openGPUOrSkip(t, 0, WithCache(NewCache(t.TempDir())))
	defer d.Close()
	if d.Info().SM < 90 {
		t.Skipf("%s is %s; clusters need sm_90", d.Info().Name, d.Info().Arch)
	}
	if err := clusterProgram(d); err != nil {
		t.Fatal(err)
	}
}
