package jit

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// tmaSrc: tma_box loads the 2-D box at (px, py) of tmap into shared memory (thread 0 arms
// the mbarrier with pexp bytes and issues cp.async.bulk.tensor), every thread waits for
// phase 0, then the block copies the box's pwords words out to pout as they lie in shared
// memory (swizzled). blob_copy copies its 24-byte array parameter to pout (a byte-array
// parameter wider than 8 bytes that is not a tensor map).
const tmaSrc = `
.version 8.0
.target sm_90a
.address_size 64

.visible .entry tma_box(.param .align 64 .b8 tmap[128], .param .u64 pout, .param .s32 px, .param .s32 py, .param .u32 pexp, .param .u32 pwords)
{
	.shared .align 1024 .b8 box[2048];
	.shared .align 8 .b64 full;
	.reg .b32 %r<10>;
	.reg .b64 %rd<10>;
	.reg .pred %p<4>;
	mov.u64 %rd8, tmap;
	cvta.param.u64 %rd9, %rd8;
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	mov.u64 %rd0, full;
	mov.u64 %rd1, box;
	@%p0 mbarrier.init.shared.b64 [%rd0], 1;
	bar.sync 0;
	ld.param.s32 %r1, [px];
	ld.param.s32 %r2, [py];
	ld.param.u32 %r4, [pexp];
	@%p0 mbarrier.arrive.expect_tx.shared.b64 %rd2, [%rd0], %r4;
	@%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%rd9, {%r1, %r2}], [%rd0];
LWAIT:
	mbarrier.try_wait.parity.shared.b64 %p1, [%rd0], 0;
	@!%p1 bra LWAIT;
	ld.param.u64 %rd3, [pout];
	cvta.to.global.u64 %rd3, %rd3;
	ld.param.u32 %r5, [pwords];
	mov.u32 %r6, %r0;
LCOPY:
	setp.ge.u32 %p2, %r6, %r5;
	@%p2 bra LDONE;
	mul.wide.u32 %rd4, %r6, 4;
	add.u64 %rd5, %rd1, %rd4;
	ld.shared.u32 %r7, [%rd5];
	add.u64 %rd6, %rd3, %rd4;
	st.global.u32 [%rd6], %r7;
	add.u32 %r6, %r6, 32;
	bra LCOPY;
LDONE:
	ret;
}

.visible .entry blob_copy(.param .align 8 .b8 blob[24], .param .u64 pout)
{
	.reg .b64 %rd<6>;
	ld.param.u64 %rd0, [pout];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u64 %rd1, [blob];
	ld.param.u64 %rd2, [blob+8];
	ld.param.u64 %rd3, [blob+16];
	st.global.u64 [%rd0], %rd1;
	st.global.u64 [%rd0+8], %rd2;
	st.global.u64 [%rd0+16], %rd3;
	ret;
}
`

// tmaBoxArgs are tma_box's parameters.
type tmaBoxArgs struct {
	Tmap   TensorMap
	Pout   Ptr[uint32]
	Px, Py int32
	Pexp   uint32
	Pwords uint32
}

// tmaParams is what a builder would declare of tmaSrc's kernels.
var tmaParams = map[string][]ParamInfo{
	"tma_box": {{Name: "tmap", Type: ptx.U16, TensorMap: true}, {Name: "pout", Type: ptx.U32, Pointer: true},
		{Name: "px", Type: ptx.S32}, {Name: "py", Type: ptx.S32}, {Name: "pexp", Type: ptx.U32}, {Name: "pwords", Type: ptx.U32}},
}

// swizzled is the shared-memory offset TMA writes a box's byte off to under a swizzle of
// span bytes (CuTe's Swizzle<B,4,3>: the 16-byte chunk bits 4.. XORed with bits 7..).
func swizzled(off int, span Swizzle) int {
	b := map[Swizzle]int{Swizzle32B: 1, Swizzle64B: 2, Swizzle128B: 3}[span]
	return off ^ (off>>7&(1<<b-1))<<4
}

// tmaProgram loads boxes of a 100 x 40 u16 tensor (rows padded to 104 elements) through a
// TensorMap with each swizzle, at an interior corner and across each edge (negative
// coordinates and past the end: zero fill), and checks every element of the shared box as
// copied out; then a byte-array parameter, and the launch errors of tensor-map arguments.
func tmaProgram(d *Device) error {
	mod, err := ptx.Parse(tmaSrc)
	if err != nil {
		return err
	}
	m, err := d.Load(Source{Module: mod, Params: tmaParams})
	if err != nil {
		return err
	}
	defer m.Close()
	box, err := m.Function("tma_box")
	if err != nil {
		return err
	}
	const w, h, pitch = 100, 40, 104
	host := make([]uint16, h*pitch)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			host[y*pitch+x] = uint16(1000*y + x + 1)
		}
	}
	src, err := Alloc[uint16](d, len(host))
	if err != nil {
		return err
	}
	defer src.Free()
	if err := src.CopyFromHost(host); err != nil {
		return err
	}
	out, err := Alloc[uint32](d, 512)
	if err != nil {
		return err
	}
	defer out.Free()
	got := make([]uint32, 512)
	for _, swz := range []Swizzle{SwizzleNone, Swizzle32B, Swizzle64B, Swizzle128B} {
		bx := 64 // elements: 128 bytes without a swizzle, the span with one
		if swz != SwizzleNone {
			bx = int(swz) / 2
		}
		const by = 8
		tm, err := NewTensorMap(src, []uint64{w, h}, []uint64{2 * pitch}, []uint32{uint32(bx), by}, swz, WithL2Promotion(128))
		if err != nil {
			return err
		}
		if tm.Elem() != ptx.U16 {
			return fmt.Errorf("Elem() = %s, want u16", tm.Elem())
		}
		// The inner coordinate's byte offset is a multiple of 16 (8 u16 elements): the GPU
		// faults (IllegalInstruction) on any other; the emulator reports it.
		for ci, c := range [][2]int{{8, 4}, {(w - bx/2) &^ 7, 8}, {0, h - 3}, {-8, -2}, {(w - 3) &^ 7, h - 5}} {
			bytes := bx * by * 2
			a := tmaBoxArgs{Tmap: tm, Pout: out, Px: int32(c[0]), Py: int32(c[1]), Pexp: uint32(bytes), Pwords: uint32(bytes / 4)}
			if ci%2 == 0 {
				err = box.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(32)}, a)
			} else { // positional
				err = box.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, tm, out, a.Px, a.Py, a.Pexp, a.Pwords)
			}
			if err != nil {
				return err
			}
			if err := out.CopyToHost(got); err != nil {
				return err
			}
			sh := make([]byte, bytes)
			for i, v := range got[:bytes/4] {
				sh[4*i], sh[4*i+1], sh[4*i+2], sh[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			for j := 0; j < by; j++ {
				for i := 0; i < bx; i++ {
					x, y := c[0]+i, c[1]+j
					var want uint16
					if x >= 0 && x < w && y >= 0 && y < h {
						want = host[y*pitch+x]
					}
					o := swizzled(2*(j*bx+i), swz)
					if g := uint16(sh[o]) | uint16(sh[o+1])<<8; g != want {
						return fmt.Errorf("swizzle %d, box at (%d, %d): element (%d, %d) at shared byte %d is %d, want %d", swz, c[0], c[1], i, j, o, g, want)
					}
				}
			}
		}
	}

	// NaN fill: an f32 map loaded through a module loaded without Source.Params (so the
	// u16-declared kernel takes it).
	m2, err := d.Load(Source{Module: mod})
	if err != nil {
		return err
	}
	defer m2.Close()
	box2, err := m2.Function("tma_box")
	if err != nil {
		return err
	}
	fhost := make([]float32, 32*32)
	for i := range fhost {
		fhost[i] = float32(i) + 0.5
	}
	fsrc, err := Alloc[float32](d, len(fhost))
	if err != nil {
		return err
	}
	defer fsrc.Free()
	if err := fsrc.CopyFromHost(fhost); err != nil {
		return err
	}
	nanMap, err := NewTensorMap(fsrc, []uint64{32, 32}, []uint64{128}, []uint32{32, 4}, SwizzleNone, WithOOBNaN())
	if err != nil {
		return err
	}
	if err := box2.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, nanMap, out, int32(-8), int32(30), uint32(512), uint32(128)); err != nil {
		return err
	}
	if err := out.CopyToHost(got); err != nil {
		return err
	}
	for j := 0; j < 4; j++ {
		for i := 0; i < 32; i++ {
			x, y := i-8, 30+j
			g, want := math.Float32frombits(got[j*32+i]), float32(math.NaN())
			if x >= 0 && y < 32 {
				want = fhost[y*32+x]
			}
			if g != want && !(math.IsNaN(float64(g)) && math.IsNaN(float64(want))) {
				return fmt.Errorf("NaN fill, box at (-8, 30): element (%d, %d) is %v (bits %#x), want %v", i, j, g, got[j*32+i], want)
			}
		}
	}

	blob, err := m.Function("blob_copy")
	if err != nil {
		return err
	}
	bytes := make([]byte, 24)
	for i := range bytes {
		bytes[i] = byte(3*i + 1)
	}
	if err := blob.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, bytes, out); err != nil {
		return err
	}
	if err := out.CopyToHost(got[:6]); err != nil {
		return err
	}
	for i := 0; i < 6; i++ {
		want := uint32(bytes[4*i]) | uint32(bytes[4*i+1])<<8 | uint32(bytes[4*i+2])<<16 | uint32(bytes[4*i+3])<<24
		if got[i] != want {
			return fmt.Errorf("blob_copy word %d: %#x, want %#x", i, got[i], want)
		}
	}

	// Launch errors name the parameter and what was wrong.
	tm, err := NewTensorMap(src, []uint64{w, h}, []uint64{2 * pitch}, []uint32{64, 8}, SwizzleNone)
	if err != nil {
		return err
	}
	f32buf, err := Alloc[float32](d, 64)
	if err != nil {
		return err
	}
	defer f32buf.Free()
	f32map, err := NewTensorMap(f32buf, []uint64{64}, nil, []uint32{32}, SwizzleNone, WithOOBNaN())
	if err != nil {
		return err
	}
	cfg := LaunchConfig{Grid: D1(1), Block: D1(32)}
	for _, c := range []struct {
		err  error
		want string
	}{
		{box.Launch(cfg, uint64(0), out, int32(0), int32(0), uint32(0), uint32(0)), "argument 0 (.b8 tmap[128]): got uint64 for a 128-byte array parameter"},
		{box.Launch(cfg, bytes, out, int32(0), int32(0), uint32(0), uint32(0)), "got []byte, but the kernel declares a tensor map over u16"},
		{box.Launch(cfg, TensorMap{}, out, int32(0), int32(0), uint32(0), uint32(0)), "a zero TensorMap"},
		{box.LaunchArgs(cfg, tmaBoxArgs{Tmap: f32map, Pout: out}), "field Tmap (parameter tmap): got a TensorMap over f32, but the kernel's tensor map is over u16"},
		{blob.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, tm, out), "a tensor map needs a 64-byte-aligned 128-byte parameter"},
		{blob.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, bytes[:16], out), "got 16 bytes for a 24-byte array"},
		{blob.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(1)}, struct {
			Blob TensorMap
			Pout Ptr[uint32]
		}{tm, out}), "not a 64-byte-aligned 128-byte array"},
		{blob.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(1)}, struct {
			Blob []byte
			Pout Ptr[uint32]
		}{bytes, out}), "the only wide parameters a struct fills are tensor maps"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			return fmt.Errorf("got error %v, want one containing %q", c.err, c.want)
		}
	}
	return nil
}

// TestEmuTMA runs tmaProgram on the emulator.
func TestEmuTMA(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := tmaProgram(d); err != nil {
		t.Fatal(err)
	}
}

// TestTensorMapErrors checks that NewTensorMap names the field each bad map gets wrong
// (the rules are the same on both backends: they are checked before encoding).
func TestTensorMapErrors(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := tensorMapErrors(d); err != nil {
		t.Fatal(err)
	}
}

// tensorMapErrors makes bad maps over buffers of d and checks each error.
func tensorMapErrors(d *Device) error {
	buf, err := Alloc[uint16](d, 64*64)
	if err != nil {
		return err
	}
	defer buf.Free()
	f32, err := Alloc[float32](d, 1024)
	if err != nil {
		return err
	}
	defer f32.Free()
	good := func() ([]uint64, []uint64, []uint32) { return []uint64{64, 64}, []uint64{128}, []uint32{64, 8} }
	for _, c := range []struct {
		name string
		edit func(dims, strides []uint64, box []uint32) ([]uint64, []uint64, []uint32)
		swz  Swizzle
		opts []TensorMapOption
		want string
	}{
		{"rank 0", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return nil, nil, nil }, 0, nil, "rank 0 (len(dims)): want 1 to 5"},
		{"rank 6", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) {
			return []uint64{1, 1, 1, 1, 1, 1}, []uint64{16, 16, 16, 16, 16}, []uint32{1, 1, 1, 1, 1, 1}
		}, 0, nil, "rank 6"},
		{"strides count", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return d, nil, b }, 0, nil, "0 strides for rank 2: want 1"},
		{"box count", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return d, s, b[:1] }, 0, nil, "1 box dimensions for rank 2"},
		{"stride alignment", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) {
			return []uint64{60, 64}, []uint64{120}, b
		}, 0, nil, "stride of dimension 1 (strides[0]) is 120 bytes: want a multiple of 16"},
		{"box too big", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return d, s, []uint32{64, 300} }, 0, nil, "box dimension 1 is 300: want 1 to 256"},
		{"box zero", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return d, s, []uint32{64, 0} }, 0, nil, "box dimension 1 is 0"},
		{"inner bytes", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return d, s, []uint32{4, 8} }, 0, nil, "box[0] = 4) is 8 bytes: want a multiple of 16"},
		{"swizzle span", nil, Swizzle64B, nil, "box[0] = 64) is 128 bytes, more than the 64-byte swizzle span"},
		{"swizzle value", nil, 48, nil, "swizzle 48: want 0, 32, 64 or 128"},
		{"dimension zero", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return []uint64{64, 0}, s, b }, 0, nil, "dimension 1 has 0 elements"},
		{"outside the buffer", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) { return []uint64{64, 65}, s, b }, 0, nil, "reach 8320 bytes, more than the buffer's 8192"},
		{"interleave value", nil, 0, []TensorMapOption{WithInterleave(8)}, "interleave 8: want 0, 16 or 32"},
		{"interleave rank", nil, 0, []TensorMapOption{WithInterleave(16)}, "interleave 16 needs rank 3 or more"},
		{"l2", nil, 0, []TensorMapOption{WithL2Promotion(32)}, "L2 promotion 32"},
		{"nan fill", nil, 0, []TensorMapOption{WithOOBNaN()}, "NaN fill needs a float element type"},
		{"element strides count", nil, 0, []TensorMapOption{WithElemStrides(1)}, "1 element strides for rank 2"},
		{"element stride", nil, 0, []TensorMapOption{WithElemStrides(1, 9)}, "element stride 9 of dimension 1: want 1 to 8"},
		{"extent overflows one product", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) {
			return []uint64{64, 1<<25 + 1}, []uint64{1 << 39}, b
		}, 0, nil, "reach past 2^64 bytes (dimension 1: 33554433 elements 549755813888 bytes apart), more than the buffer's 8192"},
		{"extent overflows the sum", func(d, s []uint64, b []uint32) ([]uint64, []uint64, []uint32) {
			return []uint64{64, 1<<24 + 1, 1<<24 + 1}, []uint64{1 << 39, 1 << 39}, []uint32{64, 8, 8}
		}, 0, nil, "reach past 2^64 bytes (dimension 2"},
		{"nil option", nil, 0, []TensorMapOption{WithOOBNaN(), nil}, "option 1 (opts[1]) is nil"},
	} {
		dims, strides, box := good()
		if c.edit != nil {
			dims, strides, box = c.edit(dims, strides, box)
		}
		_, err := NewTensorMap(buf, dims, strides, box, c.swz, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			return fmt.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := NewTensorMap(f32, []uint64{32, 32}, []uint64{128}, []uint32{32, 32}, Swizzle128B, WithOOBNaN(), WithElemStrides(1, 2)); err != nil {
		return fmt.Errorf("a good f32 map: %v", err)
	}
	if _, err := NewTensorMap[uint16](nil, []uint64{1}, nil, []uint32{8}, 0); err == nil || !strings.Contains(err.Error(), "nil") {
		return fmt.Errorf("nil buffer: %v", err)
	}
	return nil
}

// TestEmuTensorMapInterleave: the emulator refuses interleaved maps (the GPU takes them).
func TestEmuTensorMapInterleave(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf, err := Alloc[uint16](d, 16*4*4)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewTensorMap(buf, []uint64{8, 4, 4}, []uint64{16, 64}, []uint32{8, 4, 4}, SwizzleNone, WithInterleave(16))
	if err == nil || !strings.Contains(err.Error(), "the emulator implements no interleave") {
		t.Fatalf("interleave on the emulator: %v", err)
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTensorMap(buf, []uint64{16}, nil, []uint32{16}, SwizzleNone); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Fatalf("a freed buffer: %v", err)
	}
}

// TestTensorMapOffset: WithOffset starts a map inside its buffer; an offset past the buffer,
// a tensor that reaches past it from the offset, and a start that is not 16-byte aligned are
// errors naming the cause.
func TestTensorMapOffset(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf, err := Alloc[uint16](d, 64*64)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	dims, strides, box := []uint64{64, 32}, []uint64{128}, []uint32{64, 8}
	if _, err := NewTensorMap(buf, dims, strides, box, Swizzle128B, WithOffset(32*64)); err != nil {
		t.Errorf("the last 32 of 64 rows: %v", err)
	}
	for _, c := range []struct {
		off  uint64
		want string
	}{{64 * 64, "offset 4096 elements"}, {33 * 64, "more than the buffer"}, {3, "aligned"}} {
		if _, err := NewTensorMap(buf, dims, strides, box, Swizzle128B, WithOffset(c.off)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("offset %d: %v, want an error containing %q", c.off, err, c.want)
		}
	}
}
