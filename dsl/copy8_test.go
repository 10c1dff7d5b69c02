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
// values per thread (128-bit accesses). Integers go through a register fragment on the way
// out, and are also written widened to I32 to wide. (fp8 has no fragments: no constants.)
func copy8(k *dsl.Kernel, dt dsl.Type) {
	src, dst := k.PtrParam("src", dt), k.PtrParam("dst", dt)
	var wide dsl.Ptr
	if dt.IsInt() {
		wide = k.PtrParam("wide", dsl.I32)
	}
	n := k.Param("n", dsl.U32)
	bid, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)
	thr := layout.Must(layout.Parse("32:1"))
	part := func(t dsl.Tensor) dsl.Tensor { return t.PartitionTV(thr, []int{16}, tid) }
	tS := part(k.MakeTensorDyn(src, []any{n}, []any{1}).LocalTile([]int{512}, bid))
	tD := part(k.MakeTensorDyn(dst, []any{n}, []any{1}).LocalTile([]int{512}, bid))
	sm := part(k.MakeTensor(k.SharedArray(dt, 512), layout.Must(layout.Parse("512:1"))))
	k.Copy(tS, sm)
	k.SyncThreads()
	if !dt.IsInt() {
		k.Copy(sm, tD)
		return
	}
	frag := k.Fragment(dt, sm)
	k.Copy(sm, frag)
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
// sign-extended I8 register has ones above it).
func TestCopy8BitOnEmulator(t *testing.T) {
	const n = 2*512 + 37 // two full tiles and a partial one
	for _, dt := range []dsl.Type{dsl.U8, dsl.I8} {
		t.Run(dt.String(), func(t *testing.T) {
			k := dsl.New("copy8")
			copy8(k, dt)
			m, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			sys, err := emu.New(1)
			if err != nil {
				t.Fatal(err)
			}
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
			err = sys.Launch(emu.Launch{Module: m, Entry: "copy8", Grid: emu.D1(3), Block: emu.D1(32),
				Args: []any{ps, pd, pw, uint32(n)}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := emu.ReadSlice[uint8](sys, pd, n+16)
			wide, _ := emu.ReadSlice[int32](sys, pw, n)
			for i := range in {
				want := int32(in[i])
				if dt == dsl.I8 {
					want = int32(int8(in[i]))
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
