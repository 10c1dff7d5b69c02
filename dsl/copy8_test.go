package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// copy8 builds a kernel that copies n 8-bit elements src -> shared memory -> dst with 16
// values per thread (128-bit accesses), through a register fragment on the way out.
// Integers are also written widened to I32 to wide.
func copy8(k *dsl.Kernel, dt dsl.Type) {
	src, dst := k.PtrParam("src", dt), k.PtrParam("dst", dt)
	var wide dsl.Ptr
	if dt.IsInt() {
		wide = k.PtrParam("wide", dsl.I32)
	}
	n := k.Param("n", dsl.U32)
	bid, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)
	thr := layout.MustParse("32:1")
	part := func(t dsl.Tensor) dsl.Tensor { return t.LocalPartition(thr, tid, 16) }
	tS := part(k.MakeTensorDyn(src, []any{n}, []any{1}).LocalTile([]int{512}, bid))
	tD := part(k.MakeTensorDyn(dst, []any{n}, []any{1}).LocalTile([]int{512}, bid))
	sm := part(k.MakeTensor(k.SharedArray(dt, 512), layout.MustParse("512:1")))
	k.Copy(tS, sm)
	k.SyncThreads()
	frag := k.Fragment(dt, sm)
	k.Copy(sm, frag)
	if !dt.IsInt() {
		k.Copy(frag, tD)
		return
	}
	tW := part(k.MakeTensorDyn(wide, []any{n}, []any{1}).LocalTile([]int{512}, bid))
	wf := k.Fragment(dsl.I32, tW)
	for i := 0; i < frag.Size(); i++ {
		wf.Set(i, frag.Get(i).To(dsl.I32))
	}
	k.Copy(wf, tW)
	k.Copy(frag, tD)
}

// TestCopy8BitIs128Bit checks that Copy moves 8-bit elements 16 at a time with
// ld/st.v4.b32, and that ptxas accepts the packing.
func TestCopy8BitIs128Bit(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		for _, dt := range []dsl.Type{dsl.U8, dsl.I8, dsl.E4M3, dsl.E5M2} {
			t.Run(string(target)+"/"+dt.String(), func(t *testing.T) {
				s := build(t, target, func(k *dsl.Kernel) { copy8(k, dt) })
				for _, want := range []string{"ld.global.v4.b32", "st.global.v4.b32", "ld.shared.v4.b32", "st.shared.v4.b32"} {
					if !strings.Contains(s, want) {
						t.Errorf("no %s", want)
					}
				}
			})
		}
	}
}

// TestCopy8BitOnEmulator runs the 128-bit 8-bit copy on the emulator: bytes unpack with
// their sign (I8) or zero (U8) extension, and pack back keeping only the low byte (a
// sign-extended I8 register has ones above it); fp8 bytes pass through a zero-initialised
// fragment unchanged.
func TestCopy8BitOnEmulator(t *testing.T) {
	const n = 2*512 + 37 // two full tiles and a partial one
	for _, dt := range []dsl.Type{dsl.U8, dsl.I8, dsl.E4M3, dsl.E5M2} {
		t.Run(dt.String(), func(t *testing.T) {
			k := dsl.New("copy8")
			copy8(k, dt)
			m, sys := onOneGPU(t, k)
			in := make([]uint8, n)
			for i := range in {
				in[i] = uint8(i*37 + 11)
			}
			ps, _ := sys.Malloc(0, n)
			pd, _ := sys.Malloc(0, n+16) // a canary after the end
			pw, _ := sys.Malloc(0, 4*n)
			if err := emu.WriteSlice(sys, ps, in); err != nil {
				t.Fatal(err)
			}
			args := []any{ps, pd, pw, uint32(n)}
			if !dt.IsInt() {
				args = []any{ps, pd, uint32(n)}
			}
			if err := sys.Launch(emu.Launch{Module: m, Entry: "copy8", Grid: emu.D1(3), Block: emu.D1(32), Args: args}); err != nil {
				t.Fatal(err)
			}
			out, _ := emu.ReadSlice[uint8](sys, pd, n+16)
			wide, _ := emu.ReadSlice[int32](sys, pw, n)
			for i := range in {
				want := int32(in[i])
				if dt == dsl.I8 {
					want = int32(int8(in[i]))
				}
				if !dt.IsInt() { // fp8: bytes only
					want = wide[i]
				}
				if wide[i] != want || out[i] != in[i] {
					t.Fatalf("element %d: got %d and %d, want %d and %d", i, wide[i], out[i], want, in[i])
				}
			}
			for i := n; i < n+16; i++ {
				if out[i] != 0 {
					t.Fatalf("write past the end at %d", i)
				}
			}
		})
	}
}

// TestFP8Fragment copies e4m3 data from global memory into a register fragment and back,
// overwriting some elements with constants (rounded to nearest even, 0 the zero pattern)
// and selecting others, on the emulator; ptxas accepts the kernel.
func TestFP8Fragment(t *testing.T) {
	const n = 3*256 + 40 // whole tiles and a partial one (predicated element-wise)
	kernel := func(k *dsl.Kernel) {
		src, dst := k.PtrParam("src", dsl.E4M3), k.PtrParam("dst", dsl.E4M3)
		n := k.Param("n", dsl.U32)
		tid := k.ThreadIdx(dsl.X)
		part := func(p dsl.Ptr) dsl.Tensor {
			return k.MakeTensorDyn(p, []any{n}, []any{1}).LocalTile([]int{256}, k.BlockIdx(dsl.X)).
				LocalPartition(layout.MustParse("16:1"), tid, 16)
		}
		tS, tD := part(src), part(dst)
		frag := k.Fragment(dsl.E4M3, tS)
		k.Copy(tS, frag)
		frag.Set(1, k.Const(dsl.E4M3, 0.3))  // rounds to 0.3125 = 1.25 * 2^-2 (0x2a)
		frag.Set(2, k.Const(dsl.E4M3, -448)) // 0xfe
		frag.Set(3, k.Select(tid.Eq(0), frag.Get(3), 0.0))
		zero := k.Var(dsl.E4M3, 0)
		frag.Set(4, zero)
		k.Copy(frag, tD)
	}
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		build(t, target, kernel)
	}
	k := dsl.New("fp8frag")
	kernel(k)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	if s := m.String(); !strings.Contains(s, "ld.global.v4.b32") || !strings.Contains(s, "st.global.v4.b32") {
		t.Errorf("no 128-bit accesses:\n%s", s)
	}
	sys, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]uint8, n)
	for i := range in {
		in[i] = uint8(i*73 + 5)
	}
	ps, _ := sys.Malloc(0, n)
	pd, _ := sys.Malloc(0, n+16)
	if err := emu.WriteSlice(sys, ps, in); err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "fp8frag", Grid: emu.D1((n + 255) / 256), Block: emu.D1(16),
		Args: []any{ps, pd, uint32(n)}}); err != nil {
		t.Fatal(err)
	}
	out, _ := emu.ReadSlice[uint8](sys, pd, n+16)
	for i := range in {
		want := in[i]
		switch j, thr := i%16, i%256/16; {
		case j == 1:
			want = 0x2a
		case j == 2:
			want = 0xfe
		case j == 3 && thr != 0, j == 4:
			want = 0
		}
		if out[i] != want {
			t.Fatalf("element %d: got %#02x, want %#02x", i, out[i], want)
		}
	}
	for i := n; i < n+16; i++ {
		if out[i] != 0 {
			t.Fatalf("write past the end at %d", i)
		}
	}
}
