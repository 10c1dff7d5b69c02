package jit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestLaunchRanksMasterAddr: a MasterAddr with spaces or control characters is refused with
// the value quoted on one line (it was printed raw inside "finding a free port on ...",
// split over lines; probe 12).
func TestLaunchRanksMasterAddr(t *testing.T) {
	for _, addr := range []string{"x\ny", "a b", "\x1b[31mred", "\t"} {
		code, err := LaunchRanks(context.Background(), LaunchOptions{N: 1, Prog: "true", MasterAddr: addr})
		if code != 2 || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "MasterAddr") {
			t.Errorf("MasterAddr %q: exit %d, %v; want a usage error quoting it", addr, code, err)
		}
	}
}

// TestProbe12BlockOverflow: a block whose extents overflow when multiplied (2^62+1 x 4 is
// 4 threads modulo 2^64), or whose x or y is past 1024, is refused by Launch and by
// ResidentBlocks naming the block, and a dynamic shared memory size past 32 bits is refused
// by both, as by a co-resident launch. Before: Launch's 1024-thread check passed such a
// block on to the backend (the GPU's launch takes 32-bit extents: 2^62+1 became 1, a 1x4x1
// block, silently); ResidentBlocks answered 512 blocks for it, and for 2^63-10 bytes of
// shared memory answered 0 blocks with no error (its model's arithmetic overflowed, and
// the co-resident launch's error quoted -9223372036854774794 bytes per block); a SharedMem
// of 2^32+100 would reach the GPU's 32-bit argument as 100.
func TestProbe12BlockOverflow(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, fn := loadFunc(t, d, bumpKernel(t), "bump")
	b, _ := Alloc[uint32](d, 64)
	for _, blk := range []Dim3{{1<<62 + 1, 4, 1}, {1 << 32, 1 << 32, 1}, {1 << 31, 1 << 31, 4}, {2048, 1, 1}, {1, 1 << 33, 1}} {
		err := fn.Launch(LaunchConfig{Grid: D1(1), Block: blk}, b, uint32(64), uint32(1))
		wantErr(t, fmt.Sprint("Launch with block ", blk), err, "jit: launch of bump: block", "1024")
		n, err := fn.ResidentBlocks(blk, 0)
		wantErr(t, fmt.Sprint("ResidentBlocks of block ", blk, " (answered ", n, ")"), err, "block", "1024")
	}
	for _, shared := range []int{1<<32 + 100, 1<<63 - 10} {
		err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), SharedMem: shared}, b, uint32(64), uint32(1))
		wantErr(t, fmt.Sprint("Launch with SharedMem ", shared), err, "jit: launch of bump", fmt.Sprint(shared), "shared memory")
		err = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), SharedMem: shared, CoResident: true}, b, uint32(64), uint32(1))
		wantErr(t, fmt.Sprint("co-resident Launch with SharedMem ", shared), err, fmt.Sprint(shared), "shared memory")
		if err != nil && strings.Contains(err.Error(), " -") {
			t.Errorf("co-resident Launch with SharedMem %d: %v; a negative size is arithmetic overflow", shared, err)
		}
		n, err := fn.ResidentBlocks(D1(32), shared)
		wantErr(t, fmt.Sprint("ResidentBlocks with shared ", shared, " (answered ", n, ")"), err, fmt.Sprint(shared), "shared memory")
	}
	// Within the limits, all still works.
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: Dim3{8, 8, 16}}, b, uint32(64), uint32(1)); err != nil {
		t.Fatal(err)
	}
	if n, err := fn.ResidentBlocks(Dim3{32, 32, 1}, 1024); err != nil || n <= 0 {
		t.Fatalf("ResidentBlocks(32x32, 1024): %d, %v", n, err)
	}
}

// TestProbe12NilFunc: Signature and NVSHMEMCalls of nil return their zero values (they
// panicked); EncodeArgs of a kernel whose parameter arrays overflow a size (2^62+1 .b32,
// 2^64+4 bytes) or have a negative length is an error naming the parameter (it encoded a
// 4-byte scalar for the first and a 1-byte one for the second, as if valid).
func TestProbe12NilFunc(t *testing.T) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Signature(nil) or NVSHMEMCalls(nil) panicked: %v", r)
			}
		}()
		if s := Signature(nil); s != "" {
			t.Errorf("Signature(nil) = %q", s)
		}
		if c := NVSHMEMCalls(nil); c != nil {
			t.Errorf("NVSHMEMCalls(nil) = %q", c)
		}
	}()
	for _, c := range []struct {
		p   ptx.Param
		arg any
	}{
		{ptx.Param{Name: "a", Type: ptx.B32, Array: 1<<62 + 1}, uint32(3)},
		{ptx.Param{Name: "a", Type: ptx.B8, Array: -5}, uint8(3)},
		{ptx.Param{Name: "a", Type: ptx.B64, Array: 1 << 61}, uint64(3)},
	} {
		f := &ptx.Func{Name: "k", Entry: true, Params: []ptx.Param{c.p}}
		w, err := EncodeArgs(f, []any{c.arg})
		wantErr(t, fmt.Sprintf("EncodeArgs for .%s a[%d] (got %v)", c.p.Type, c.p.Array, w), err, "kernel k", "a")
	}
}
