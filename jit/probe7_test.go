package jit

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestProbe7Hostile (emulator): buffers, struct launches and tensor maps with hostile
// inputs, and a device used after Close: each is an error naming the operand and the
// rule, never a panic or a silent run.
func TestProbe7Hostile(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mod, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Alloc[float32](d, 64)
	b, _ := Alloc[float32](d, 64)
	c, _ := Alloc[float32](d, 64)
	h, _ := Alloc[uint16](d, 64*64)
	lc := LaunchConfig{Grid: D1(1), Block: D1(64)}
	type extraT struct {
		A, B, C *Buffer[float32]
		N       uint32
		Extra   uint32
	}
	type missingT struct {
		A, B, C *Buffer[float32]
	}
	type unexportedT struct {
		A, B, C *Buffer[float32]
		n       uint32
	}
	type anyT struct {
		A, B, C AnyPtr
		N       uint32
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"Alloc -1", func() error { _, err := Alloc[float32](d, -1); return err }, "-1"},
		{"Alloc 0", func() error { _, err := Alloc[float32](d, 0); return err }, "0"},
		{"Alloc overflow", func() error { _, err := Alloc[float64](d, math.MaxInt/4); return err }, "overflow"},
		{"BufferOf -1", func() error { _, err := BufferOf[float32](a.Memory(), -1); return err }, "do not fit"},
		{"BufferOf too many", func() error { _, err := BufferOf[float64](a.Memory(), 33); return err }, "do not fit"},
		{"CopyFromHost longer", func() error { return a.CopyFromHost(make([]float32, 65)) }, "65"},
		{"CopyToHost longer", func() error { return a.CopyToHost(make([]float32, 65)) }, "65"},
		{"struct extra field", func() error { return f.LaunchArgs(lc, extraT{a, b, c, 64, 1}) }, "Extra"},
		{"struct missing field", func() error { return f.LaunchArgs(lc, missingT{a, b, c}) }, "no field for parameter .u32 n"},
		{"struct unexported field", func() error { return f.LaunchArgs(lc, unexportedT{a, b, c, 64}) }, "field n is unexported"},
		{"struct zero AnyPtr", func() error { return f.LaunchArgs(lc, anyT{AnyOf[float32](a), AnyOf[float32](b), AnyPtr{}, 64}) }, "AnyPtr"},
		{"struct AnyPtr of uint16", func() error {
			return f.LaunchArgs(lc, anyT{AnyOf[float32](a), AnyOf[float32](b), AnyOf[uint16](h), 64})
		}, "AnyPtr"},
		{"map dims 2^32+1", func() error {
			_, err := NewTensorMap(h, []uint64{16, 1<<32 + 1}, []uint64{32}, []uint32{16, 1}, SwizzleNone)
			return err
		}, "2^32"},
		{"map stride 2^40", func() error {
			_, err := NewTensorMap(h, []uint64{16, 2}, []uint64{1 << 40}, []uint32{16, 1}, SwizzleNone)
			return err
		}, "strides[0]"},
		{"map offset 2^63", func() error {
			_, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, SwizzleNone, WithOffset(1<<63))
			return err
		}, "offset"},
		{"map offset MaxUint64", func() error {
			_, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, SwizzleNone, WithOffset(math.MaxUint64))
			return err
		}, "offset"},
		{"map l2 -1", func() error {
			_, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, SwizzleNone, WithL2Promotion(-1))
			return err
		}, "-1"},
		{"map interleave -16", func() error {
			_, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, SwizzleNone, WithInterleave(-16))
			return err
		}, "-16"},
		{"map swizzle -1", func() error {
			_, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, Swizzle(-1))
			return err
		}, "-1"},
		{"map box 2^32", func() error {
			_, err := NewTensorMap(h, []uint64{16, 4}, []uint64{32}, []uint32{16, math.MaxUint32}, SwizzleNone)
			return err
		}, "box dimension 1"},
		{"SynchronizeContext ended", func() error { return d.SynchronizeContext(ended) }, "canceled"},
	} {
		err := safely(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := d.Synchronize(); err != nil {
		t.Errorf("Synchronize after refused calls: %v", err)
	}
}

// TestProbe7AfterClose: every buffer, stream, module and map call on a closed device is
// an error saying it is closed.
func TestProbe7AfterClose(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := mod.Function("vector_add_f32")
	a, _ := Alloc[float32](d, 64)
	h, _ := Alloc[uint16](d, 64)
	s, _ := d.NewStream()
	ev, _ := d.NewEvent()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"Alloc", func() error { _, err := Alloc[float32](d, 4); return err }},
		{"CopyFromHost", func() error { return a.CopyFromHost(make([]float32, 4)) }},
		{"CopyToHost", func() error { return a.CopyToHost(make([]float32, 4)) }},
		{"CopyFrom", func() error { return a.CopyFrom(a) }},
		{"Free", func() error { return a.Free() }},
		{"Launch", func() error { return f.Launch(LaunchConfig{Grid: D1(1), Block: D1(64)}, a, a, a, uint32(64)) }},
		{"NewStream", func() error { _, err := d.NewStream(); return err }},
		{"Stream.Synchronize", func() error { return s.Synchronize() }},
		{"Event.Record", func() error { return ev.Record(s) }},
		{"Load", func() error { _, err := d.Load(Source{Module: vectorAdd(t)}); return err }},
		{"Function", func() error { _, err := mod.Function("vector_add_f32"); return err }},
		{"NewTensorMap", func() error { _, err := NewTensorMap(h, []uint64{16}, nil, []uint32{16}, SwizzleNone); return err }},
		{"Synchronize", func() error { return d.Synchronize() }},
	} {
		err := safely(tc.f)
		if err == nil || !(strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "freed")) {
			t.Errorf("%s after Close: %v; want an error saying closed", tc.name, err)
		}
	}
}

// TestProbe7BufferAt: At inside [0, Len()] is the element's address; outside it, or on a
// freed buffer, it is 0 (At(-1) and At(Len()+1) returned addresses in whatever lay beside
// the buffer, which a launch then wrote without a word).
func TestProbe7BufferAt(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := Alloc[float32](d, 16)
	if err != nil {
		t.Fatal(err)
	}
	base := a.DevPtr()
	for i, want := range map[int]DevicePtr{0: base, 5: base + 20, 16: base + 64, -1: 0, 17: 0, math.MaxInt: 0, math.MinInt: 0} {
		if got := a.At(i).DevPtr(); got != want {
			t.Errorf("At(%d) = %#x, want %#x", i, got, want)
		}
	}
	if got := a.Ptr().Add(3).DevPtr(); got != base+12 {
		t.Errorf("Ptr().Add(3) = %#x, want %#x", got, base+12)
	}
	a.Free()
	if got := a.At(0); got != 0 {
		t.Errorf("At(0) of a freed buffer = %#x, want 0", got)
	}
}
