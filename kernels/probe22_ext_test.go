package kernels_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe22ExtraBlocks: tiled_copy and transpose given more blocks than their documented
// grids (ceil(n/TiledCopyElems), (ceil(n/32), ceil(m/32))) computed the extra blocks'
// extents as n - start in u32, which wrapped to a whole tile past the end: they read and
// wrote outside the buffers (the emulator reported a data race on the next allocation, and
// an out-of-bounds access). Now a block past the end has an empty tile and the result is
// right for any grid. The attention and decode kernels' blocks past Grid took batches past
// Batch and read outside Q and SeqLens; now they return at once (TestProbe22ExtraBlocks
// Attention). Probe 22.
func TestProbe22ExtraBlocks(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fn := func(name string, f func(*dsl.Kernel)) *jit.Function { return loadSM90(t, d, name, f) }
	run := func(what string, f *jit.Function, lc jit.LaunchConfig, args ...any) {
		t.Helper()
		err := f.Launch(lc, args...)
		if err == nil {
			err = d.Synchronize()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	alloc := func(n int, f func(i int) float32) *jit.Buffer[float32] {
		b, err := jit.Alloc[float32](d, n)
		if err != nil {
			t.Fatal(err)
		}
		h := make([]float32, n)
		for i := range h {
			h[i] = f(i)
		}
		if err := b.CopyFromHost(h); err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func(b *jit.Buffer[float32]) []float32 {
		h := make([]float32, b.Len())
		if err := b.CopyToHost(h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	// tiled_copy: 1.5 tiles (the last partial), 3 blocks more than the 2 needed.
	tile := kernels.TiledCopyElems(dsl.F32)
	n := tile + tile/2
	src := alloc(n, func(i int) float32 { return float32(i) })
	dst := alloc(n, func(int) float32 { return -1 })
	guard := alloc(4*tile, func(int) float32 { return 7 }) // the allocation after dst
	run("tiled_copy on 5 blocks", fn("tiled_copy", func(k *dsl.Kernel) { kernels.TiledCopy(k, dsl.F32) }),
		jit.LaunchConfig{Grid: jit.D1(5), Block: jit.D1(256)}, src, dst, uint32(n))
	for i, v := range read(dst) {
		if v != float32(i) {
			t.Fatalf("tiled_copy: dst[%d] = %v; want %d", i, v, i)
		}
	}
	for i, v := range read(guard) {
		if v != 7 {
			t.Fatalf("tiled_copy: the next allocation's element %d = %v; want 7 (untouched)", i, v)
		}
	}

	// transpose: 40 x 50 (2 x 2 tiles) on a grid of 4 x 3.
	m, c := 40, 50
	in := alloc(m*c, func(i int) float32 { return float32(i) })
	out := alloc(m*c, func(int) float32 { return -1 })
	guard = alloc(4096, func(int) float32 { return 7 })
	run("transpose on a 4 x 3 grid", fn("transpose", func(k *dsl.Kernel) { kernels.Transpose(k, dsl.F32) }),
		jit.LaunchConfig{Grid: jit.Dim3{X: 4, Y: 3, Z: 1}, Block: jit.D1(256)}, in, out, uint32(m), uint32(c))
	o := read(out)
	for i := 0; i < m; i++ {
		for j := 0; j < c; j++ {
			if got := o[j*m+i]; got != float32(i*c+j) {
				t.Fatalf("transpose: out[%d, %d] = %v; want %d", j, i, got, i*c+j)
			}
		}
	}
	for i, v := range read(guard) {
		if v != 7 {
			t.Fatalf("transpose: the next allocation's element %d = %v; want 7 (untouched)", i, v)
		}
	}
}

// TestProbe22ExtraBlocksAttention: attention (FlashAttention-2) and attention_decode on
// more blocks than their Grid: the blocks past it mapped to batches past Batch and read
// outside Q (cp.async) and SeqLens (the emulator's out-of-bounds access); now they return at
// once, and the outputs and the allocations after them are those of the exact grid. Probe 22.
func TestProbe22ExtraBlocksAttention(t *testing.T) {
	for _, extra := range []int{0, 7} {
		d, err := jit.OpenBackend(jit.Emulator, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		load := func(name string, f func(*dsl.Kernel)) *jit.Function { return loadSM90(t, d, name, f) }
		u16 := func(n int, seed uint16) *jit.Buffer[uint16] {
			b, err := jit.Alloc[uint16](d, n)
			if err != nil {
				t.Fatal(err)
			}
			h := make([]uint16, n)
			for i := range h {
				h[i] = 0x3c00 + uint16(i*7+int(seed))%256 // bf16 values in [0.5, 1)
			}
			if err := b.CopyFromHost(h); err != nil {
				t.Fatal(err)
			}
			return b
		}
		f32 := func(n int) *jit.Buffer[float32] {
			b, err := jit.Alloc[float32](d, n)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		read16 := func(b *jit.Buffer[uint16]) []uint16 {
			h := make([]uint16, b.Len())
			if err := b.CopyToHost(h); err != nil {
				t.Fatal(err)
			}
			return h
		}
		launch := func(what string, fn *jit.Function, lc jit.LaunchConfig, args ...any) {
			err := fn.Launch(lc, args...)
			if err == nil {
				err = d.Synchronize()
			}
			if err != nil {
				t.Fatalf("%s with %d extra blocks: %v", what, extra, err)
			}
		}

		ac := kernels.DefaultAttentionConfig(dsl.BF16, 64, false)
		B, H, SQ, SK := 1, 2, 70, 33
		q, k, v := u16(B*SQ*H*64, 1), u16(B*SK*H*64, 2), u16(B*SK*H*64, 3)
		o, lse := u16(B*SQ*H*64, 0), f32(B*H*SQ)
		guard := u16(4096, 9)
		launch("attention", load(ac.Name(), func(kk *dsl.Kernel) { kernels.Attention(kk, ac) }),
			jit.LaunchConfig{Grid: jit.D1(ac.Grid(B, H, SQ) + extra), Block: jit.D1(ac.Threads()), SharedMem: ac.SharedBytes()},
			q, k, v, o, lse, uint32(B), uint32(H), uint32(H), uint32(SQ), uint32(SK), float32(0.125))
		out := read16(o)

		dc := kernels.DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 1)
		DB, QL, DH, HK, NP, MP := 2, 1, 2, 1, 4, 2
		dq, kc, vc := u16(DB*QL*DH*128, 4), u16(NP*16*HK*128, 5), u16(NP*16*HK*128, 6)
		do, dl := u16(DB*QL*DH*128, 0), f32(DB*DH*QL)
		bt, err := jit.Alloc[int32](d, DB*MP)
		if err != nil {
			t.Fatal(err)
		}
		if err := bt.CopyFromHost([]int32{0, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		sl, err := jit.Alloc[int32](d, DB)
		if err != nil {
			t.Fatal(err)
		}
		if err := sl.CopyFromHost([]int32{20, 32}); err != nil {
			t.Fatal(err)
		}
		launch("attention_decode", load(dc.Name(), func(kk *dsl.Kernel) { kernels.AttentionDecode(kk, dc) }),
			jit.LaunchConfig{Grid: jit.D1(dc.Grid(DB, QL, DH, HK, 1) + extra), Block: jit.D1(dc.Threads()), SharedMem: dc.SharedBytes()},
			dq, kc, vc, do, dl, jit.AnyPtr{Elem: ptx.F32}, jit.AnyPtr{Elem: ptx.F32}, bt, sl, uint32(DB), uint32(QL), uint32(DH), uint32(HK), uint32(MP), uint32(1), float32(0.125))
		dout := read16(do)
		for i, g := range read16(guard) {
			if want := 0x3c00 + uint16(i*7+9)%256; g != want {
				t.Fatalf("%d extra blocks: the allocation after attention's operands changed at %d", extra, i)
			}
		}
		if extra == 0 {
			probe22Want = [2][]uint16{out, dout}
			continue
		}
		for i := range out {
			if out[i] != probe22Want[0][i] {
				t.Fatalf("attention: O[%d] = %#x with %d extra blocks, %#x on the exact grid", i, out[i], extra, probe22Want[0][i])
			}
		}
		for i := range dout {
			if dout[i] != probe22Want[1][i] {
				t.Fatalf("attention_decode: O[%d] = %#x with %d extra blocks, %#x on the exact grid", i, dout[i], extra, probe22Want[1][i])
			}
		}
	}
}

// probe22Want holds the exact grid's outputs for TestProbe22ExtraBlocksAttention.
var probe22Want [2][]uint16

// loadSM90 builds kernel name (written by f) for sm_90 and loads it on d.
func loadSM90(t *testing.T, d *jit.Device, name string, f func(*dsl.Kernel)) *jit.Function {
	t.Helper()
	k := dsl.New(name, dsl.WithTarget(ptx.SM90))
	f(k)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(jit.Source{Module: m})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return fn
}
