package jit

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestEncodedArgs: Function.Encode checks arguments as Launch does (the same errors), and
// LaunchEncoded runs the kernel with them; it refuses arguments encoded for another kernel
// and memory freed after encoding, naming the argument.
func TestEncodedArgs(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k := dsl.New("fill", dsl.WithTarget(ptx.SM90))
	out, v := k.PtrParam("out", dsl.U32), k.Param("v", dsl.U32)
	k.Store(out.At(k.ThreadIdx(dsl.X)), v)
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Load(Source{Module: mod, Params: map[string][]ParamInfo{"fill": ParamInfos(k.Params())}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	buf, err := Alloc[uint32](d, 32)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]any{
		{buf},             // too few
		{buf, int32(-1)},  // out of a .u32's range
		{buf, float32(1)}, // a float for an integer
		{AnyPtr{Addr: buf.DevPtr(), Elem: ptx.F32}, uint32(1)}, // a pointer to another element type
	} {
		_, eerr := f.Encode(bad...)
		lerr := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, bad...)
		if eerr == nil || lerr == nil || eerr.Error() != lerr.Error() {
			t.Errorf("args %v: Encode %v, Launch %v; want the same error from both", bad, eerr, lerr)
		}
	}
	a, err := f.Encode(buf, uint32(7))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, a); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 32)
	if err := buf.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		if x != 7 {
			t.Fatalf("out[%d] = %d, want 7", i, x)
		}
	}
	m2, err := d.Load(Source{Module: mod})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m2.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, a); err == nil || !strings.Contains(err.Error(), "another kernel") {
		t.Errorf("arguments of another Function: %v; want a refusal", err)
	}
	if err := f.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, nil); err == nil {
		t.Error("nil arguments launched")
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	if err := f.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, a); err == nil || !strings.Contains(err.Error(), "argument 0") || !strings.Contains(err.Error(), "freed") {
		t.Errorf("after Free: %v; want an error naming argument 0's freed memory", err)
	}
}
