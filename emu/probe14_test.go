package emu

import (
	"reflect"
	"strings"
	"testing"
)

// callNil calls every exported method of v (a nil or zero pointer) with zero arguments,
// failing on a panic, and returns each method's error result (nil: no error result or a nil
// error) by name.
func callNil(t *testing.T, label string, v any) map[string]error {
	t.Helper()
	errs := map[string]error{}
	rv := reflect.ValueOf(v)
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for i := 0; i < rv.Type().NumMethod(); i++ {
		m := rv.Type().Method(i)
		args := []reflect.Value{rv}
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s.%s panicked: %v", label, m.Name, r)
				}
			}()
			for _, o := range m.Func.Call(args) {
				if o.Type() == errType {
					errs[m.Name], _ = o.Interface().(error)
				}
			}
		}()
	}
	return errs
}

// TestProbe14NilSystem: every exported method of a nil *System returns an error naming it
// (or, a getter, a zero value) instead of a nil-pointer panic (Malloc, Write, Launch of a
// real module, SetLimits... all panicked); so do the typed helpers. Probe 14.
func TestProbe14NilSystem(t *testing.T) {
	var s *System
	errs := callNil(t, "(*System)(nil)", s)
	for name, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "nil *System") {
			t.Errorf("(*System)(nil).%s = %v; want an error naming the nil *System", name, err)
		}
	}
	if len(errs) < 23 {
		t.Errorf("only %d methods of *System return an error: %v", len(errs), errs)
	}
	// A launch of a real module, and the typed helpers.
	m := asm(t, `
.visible .entry k(.param .u64 a)
{
	ret;
}`)
	for what, err := range map[string]error{
		"Launch":     s.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1), Args: []any{uint64(0)}}),
		"Load":       s.Load(m),
		"WriteSlice": WriteSlice(s, 1<<40, []uint32{1}),
		"WriteF16":   WriteF16(s, 1<<40, []float32{1}),
	} {
		if err == nil || !strings.Contains(err.Error(), "nil *System") {
			t.Errorf("%s on a nil *System = %v", what, err)
		}
	}
	if _, err := ReadBF16(s, 1<<40, 4); err == nil || !strings.Contains(err.Error(), "nil *System") {
		t.Errorf("ReadBF16 on a nil *System = %v", err)
	}
	if r, err := s.Start(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1)}); r != nil || err == nil {
		t.Errorf("Start on a nil *System = %v, %v", r, err)
	}
	if s.NumGPUs() != 0 || s.InFlight() != 0 || s.Compatible(Options{}) || s.Nodes() != 0 || s.All() != nil {
		t.Error("a nil *System's getters are not zero")
	}
}

// TestProbe14NilHandles: the other pointer types a caller may hold as nil (or zero) answer
// with errors or zero values: *Symmetric's addresses are 0 (null), a nil *TensorMap fails
// Validate, a nil or zero ExternCall or Delivery (and a nil update function) is an error, a
// nil *Error prints, a zero Running is done with an error, and a zero System's topology is
// no nodes (Nodes, NodeOf and SameNode divided by zero). All panicked before; probe 14.
func TestProbe14NilHandles(t *testing.T) {
	for label, v := range map[string]any{
		"(*ExternCall)(nil)": (*ExternCall)(nil),
		"&ExternCall{}":      &ExternCall{},
		"(*Delivery)(nil)":   (*Delivery)(nil),
		"&Delivery{}":        &Delivery{},
	} {
		errs := callNil(t, label, v)
		for name, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "nil or zero") {
				t.Errorf("%s.%s = %v; want an error naming the nil or zero value", label, name, err)
			}
		}
	}
	callNil(t, "(*Symmetric)(nil)", (*Symmetric)(nil))
	var sym *Symmetric
	if sym.On(1) != 0 || sym.Multicast() != 0 || sym.NodeMulticast() != 0 {
		t.Error("a nil *Symmetric's addresses are not null")
	}
	errs := callNil(t, "(*TensorMap)(nil)", (*TensorMap)(nil))
	if err := errs["Validate"]; err == nil || !strings.Contains(err.Error(), "nil *TensorMap") {
		t.Errorf("nil TensorMap.Validate = %v", err)
	}
	var tm *TensorMap
	b := tm.Encode()
	if _, err := DecodeTensorMap(b[:]); err == nil {
		t.Error("a nil *TensorMap's encoding decodes")
	}
	var e *Error
	if got := e.Error(); !strings.Contains(got, "nil *Error") {
		t.Errorf("nil *Error prints %q", got)
	}
	r := &Running{}
	if !r.Done() || r.Err() == nil {
		t.Errorf("a zero Running: Done %v, Err %v; want done with an error (a wait for it never ended)", r.Done(), r.Err())
	}
	z := &System{}
	callNil(t, "&System{}", z)
	if z.Nodes() != 0 || z.NodeOf(3) != 0 || !z.SameNode(0, 1) {
		t.Errorf("zero System: Nodes %d NodeOf %d", z.Nodes(), z.NodeOf(3))
	}
	// Within a launch, a nil update function is an error, not an "emulator bug".
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 8)
	var got error
	s.At(0, func(d *Delivery) error { _, got = d.Atomic(a, 4, nil); return nil })
	must(t, s.RunScheduled())
	if got == nil || !strings.Contains(got.Error(), "f is nil") {
		t.Errorf("Delivery.Atomic with a nil f = %v", got)
	}
}

// TestProbe14LongNamesInReports: a kernel of a 100 KB name calling an extern function of a
// 100 KB name gives short reports: a missing handler, a deadlock in a Launch, and Abort of a
// stalled kernel quote excerpts of the names and instructions (they quoted them whole,
// several times: hundreds of KB); probe 14.
func TestProbe14LongNamesInReports(t *testing.T) {
	kname := "k" + strings.Repeat("x", 100000)
	ename := "e" + strings.Repeat("y", 100000)
	m := asmUnverified(t, `
.extern .func (.param .u32 v) `+ename+`(.param .u32 a);
.visible .entry `+kname+`()
{
	.reg .u32 %r<2>;
	call (%r1), `+ename+`, (%r0);
	ret;
}`)
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 4000 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: %d bytes (want < 4000, holding %q): %.300v", what, n, want, err)
		}
	}
	k := Launch{Module: m, Entry: kname, Grid: D1(1), Block: D1(1)}
	s := newSys(t, 1)
	check("no handler", s.Launch(k), "has no handler")
	s.RegisterExtern(ename, func(c *ExternCall) error { return c.Wait("never") })
	check("deadlock", s.Launch(k), "deadlock")
	s2 := newSys(t, 1)
	s2.RegisterExtern(ename, func(c *ExternCall) error { return c.Wait("never") })
	if _, err := s2.Start(k); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && !s2.Run(1000).Stalled; i++ {
	}
	_, err := s2.Abort("")
	check("Abort", err, "in flight")
}

// TestProbe14ZeroSystemLoad: a zero System loads (verifies and decodes) a module, and a
// launch on it is an error saying it has no GPUs (Load panicked: assignment to entry in nil
// map; Launch said the emulator's limit is 0 threads); probe 14.
func TestProbe14ZeroSystemLoad(t *testing.T) {
	m := asm(t, `
.visible .entry k()
{
	ret;
}`)
	s := &System{}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Load on a zero System panicked: %v", r)
			}
		}()
		must(t, s.Load(m))
	}()
	err := s.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1)})
	if err == nil || !strings.Contains(err.Error(), "no GPUs") {
		t.Errorf("Launch on a zero System: %v; want an error saying it has no GPUs (it said its limit is 0 threads)", err)
	}
}
