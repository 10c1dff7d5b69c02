package jit

import (
	"testing"

	"github.com/kgen-dev/kgen/fp"
)

// TestProbe8TensorMap (emulator): NewTensorMap against cuTensorMapEncodeTiled's documented
// rules (CUDA 12.8 cuda.h) at and past each edge. Refused: strides not a multiple of 32 or
// an address not 32-byte aligned under 32-byte interleave, a stride of 2^40, a dimension of
// 2^32+1, box 257, element stride 0 in dimension 0 (the driver ignores its value but
// requires 1 to 8), strides given for rank 1, NaN fill over e4m3/s32, and WithElemStrides()
// with no strides (before: taken as all 1s, silently). Accepted: the edges themselves (a
// stride of 2^40-16, box 256, five dimensions) and strides that are not increasing (a
// [S, H, D] tensor viewed as (D, H, S): the driver documents no order, and attention's maps
// over [B, S, H, D] tensors rely on it).
func TestProbe8TensorMap(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	u8, _ := Alloc[uint8](d, 1<<16)
	h, _ := Alloc[uint16](d, 1<<15)
	e4, _ := Alloc[fp.E4M3](d, 1<<12)
	s32, _ := Alloc[int32](d, 1<<12)
	defer u8.Free()
	defer h.Free()
	defer e4.Free()
	defer s32.Free()

	refused := []struct {
		name string
		err  error
		want []string
	}{}
	refuse := func(name string, err error, want ...string) {
		refused = append(refused, struct {
			name string
			err  error
			want []string
		}{name, err, want})
	}
	_, err = NewTensorMap(h, []uint64{8, 4, 4}, []uint64{16, 64}, []uint32{8, 4, 4}, Swizzle32B, WithInterleave(32))
	refuse("interleave 32, stride 16", err, "strides[0]", "multiple of 32")
	_, err = NewTensorMap(h, []uint64{16, 4, 4}, []uint64{32, 128}, []uint32{16, 4, 4}, Swizzle32B, WithInterleave(32), WithOffset(8))
	refuse("interleave 32, address 16 past a 32-byte boundary", err, "not 32-byte aligned")
	_, err = NewTensorMap(u8, []uint64{16, 1}, []uint64{1 << 40}, []uint32{16, 1}, SwizzleNone)
	refuse("stride 2^40", err, "strides[0]", "below 2^40")
	_, err = NewTensorMap(u8, []uint64{1<<32 + 1}, nil, []uint32{16}, SwizzleNone)
	refuse("dimension 2^32+1", err, "dimension 0 has 4294967297 elements: want 1 to 2^32")
	_, err = NewTensorMap(u8, []uint64{512, 2}, []uint64{512}, []uint32{16, 257}, SwizzleNone)
	refuse("box 257", err, "box dimension 1 is 257: want 1 to 256")
	_, err = NewTensorMap(u8, []uint64{64, 64}, []uint64{64}, []uint32{16, 8}, SwizzleNone, WithElemStrides(0, 1))
	refuse("element stride 0 in dimension 0", err, "element stride 0 of dimension 0: want 1 to 8")
	_, err = NewTensorMap(u8, []uint64{64}, []uint64{64}, []uint32{16}, SwizzleNone)
	refuse("a stride for rank 1", err, "1 strides for rank 1: want 0")
	_, err = NewTensorMap(e4, []uint64{64, 64}, []uint64{64}, []uint32{16, 8}, SwizzleNone, WithOOBNaN())
	refuse("NaN fill over e4m3", err, "NaN fill needs a float element type", "e4m3")
	_, err = NewTensorMap(s32, []uint64{64, 64}, []uint64{256}, []uint32{4, 8}, SwizzleNone, WithOOBNaN())
	refuse("NaN fill over s32", err, "NaN fill needs a float element type", "s32")
	_, err = NewTensorMap(u8, []uint64{64, 64}, []uint64{64}, []uint32{16, 8}, SwizzleNone, WithElemStrides())
	refuse("WithElemStrides with none", err, "WithElemStrides: 0 element strides for rank 2: want 2")
	for _, r := range refused {
		wantErr(t, r.name, r.err, r.want...)
	}

	for _, c := range []struct {
		name string
		mk   func() error
	}{
		{"stride 2^40-16", func() error {
			_, err := NewTensorMap(u8, []uint64{16, 1}, []uint64{1<<40 - 16}, []uint32{16, 1}, SwizzleNone)
			return err
		}},
		{"box 256 of 256 bytes, no swizzle", func() error {
			_, err := NewTensorMap(u8, []uint64{256, 4}, []uint64{256}, []uint32{256, 4}, SwizzleNone)
			return err
		}},
		{"rank 5", func() error {
			_, err := NewTensorMap(h, []uint64{8, 2, 2, 2, 2}, []uint64{16, 32, 64, 128}, []uint32{8, 2, 2, 2, 2}, SwizzleNone)
			return err
		}},
		{"strides not increasing ([S, H, D] as (D, H, S))", func() error {
			const s, hs, dh = 16, 4, 64
			_, err := NewTensorMap(h, []uint64{dh, hs, s}, []uint64{2 * dh, 2 * dh * hs}, []uint32{dh, 1, 8}, Swizzle128B)
			if err != nil {
				return err
			}
			_, err = NewTensorMap(h, []uint64{dh, s, hs}, []uint64{2 * dh * hs, 2 * dh}, []uint32{dh, 8, 1}, Swizzle128B)
			return err
		}},
		{"box past the tensor (filled with zeros)", func() error {
			_, err := NewTensorMap(h, []uint64{8, 3}, []uint64{16}, []uint32{64, 256}, SwizzleNone)
			return err
		}},
	} {
		if err := c.mk(); err != nil {
			t.Errorf("%s: %v, want it accepted", c.name, err)
		}
	}
}
