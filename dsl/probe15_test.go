package dsl_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// callAll calls every exported method of recv (made afresh by mk for each method) with
// zero-valued arguments (an empty slice for a variadic one) under recover, and returns the
// methods that panicked, with the panics. after, when not nil, runs on the receiver after
// the call (for Build's error).
func callAll(mk func() reflect.Value, after func(name string, recv reflect.Value)) []string {
	var bad []string
	typ := mk().Type()
	for i := 0; i < typ.NumMethod(); i++ {
		m := typ.Method(i)
		recv := mk()
		if recv.Kind() == reflect.Pointer && recv.IsNil() {
			if _, ok := typ.Elem().MethodByName(m.Name); ok {
				continue // a value method through a nil pointer: Go's own panic
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					bad = append(bad, fmt.Sprintf("%s.%s: %v", typ, m.Name, r))
				}
			}()
			callZero(recv.Method(i))
			if after != nil {
				after(m.Name, recv)
			}
		}()
	}
	sort.Strings(bad)
	return bad
}

// kernelArg, when not nil, makes the *Kernel arguments of callZero (else they are nil).
var kernelArg func() *dsl.Kernel

// realArg, when not nil, gives some arguments of callZero by type (else they are zero).
var realArg func(reflect.Type) (reflect.Value, bool)

// callZero calls f with zero-valued arguments.
func callZero(f reflect.Value) []reflect.Value {
	ft := f.Type()
	args := make([]reflect.Value, ft.NumIn())
	for j := range args {
		args[j] = reflect.Zero(ft.In(j))
		if kernelArg != nil && ft.In(j) == reflect.TypeOf((*dsl.Kernel)(nil)) {
			args[j] = reflect.ValueOf(kernelArg())
		}
		if realArg != nil {
			if v, ok := realArg(ft.In(j)); ok {
				args[j] = v
			}
		}
	}
	if ft.IsVariadic() {
		return f.CallSlice(args)
	}
	return f.Call(args)
}

// zeroHandles are the zero values of the DSL's exported types with methods (for a pointer
// type, both the nil pointer and a pointer to the zero struct).
func zeroHandles() []func() reflect.Value {
	vals := []any{
		dsl.Value{}, dsl.Tensor{}, dsl.ThrMMA{}, dsl.AccView{}, dsl.TiledGMMA{}, dsl.Ptr{},
		dsl.Mbarrier{}, dsl.Mbarriers{}, dsl.TiledMMA{}, dsl.ThrCopy{}, dsl.SharedTile{},
		dsl.PeerTable{}, dsl.MMAAtom{}, dsl.GMMAAtom{}, dsl.TileScheduler{}, dsl.TensorMap{},
		dsl.PipelineState{}, dsl.NamedBar{}, dsl.TiledCopy{}, dsl.TensorMapRef{}, dsl.ReduceOp(0),
		dsl.Operand(0), dsl.GMMAMajor(0), dsl.GMMADesc{}, dsl.GMMAOperand{}, dsl.CopyAtom{},
		dsl.Error{}, dsl.Func{}, dsl.IfStmt{}, dsl.Pipeline{}, dsl.TMAPipeline{}, dsl.TMACopy{},
		dsl.Order{}, dsl.ParamInfo{},
	}
	var mks []func() reflect.Value
	for _, v := range vals {
		t := reflect.TypeOf(v)
		mks = append(mks,
			func() reflect.Value { return reflect.Zero(t) },
			func() reflect.Value { return reflect.Zero(reflect.PointerTo(t)) },
			func() reflect.Value { return reflect.New(t) })
	}
	return mks
}

// TestProbe15NilKernel: every exported method of a nil *Kernel returns (zeros) without
// panicking, and Build says the Kernel is nil; they all panicked (nil dereference); probe 15.
func TestProbe15NilKernel(t *testing.T) {
	var nilK *dsl.Kernel
	bad := callAll(func() reflect.Value { return reflect.ValueOf(nilK) }, nil)
	for _, b := range bad {
		t.Error(b)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Build of a nil Kernel: panic: %v", r)
			}
		}()
		mod, err := nilK.Build()
		if mod != nil || err == nil || !strings.Contains(err.Error(), "nil") || !strings.Contains(err.Error(), "dsl.New") {
			t.Errorf("Build of a nil Kernel: %v, %v; want an error naming nil and dsl.New", mod, err)
		}
		if nilK.Err() == nil {
			t.Error("Err of a nil Kernel: nil")
		}
		_ = dsl.Params[struct{ A dsl.Value }](nilK, dsl.F32)
	}()
}

// TestProbe15ZeroKernel: every exported method of a zero Kernel (not made by New) returns
// without panicking, and Build then reports "not made by dsl.New"; 59 of them panicked;
// probe 15.
func TestProbe15ZeroKernel(t *testing.T) {
	bad := callAll(func() reflect.Value { return reflect.ValueOf(&dsl.Kernel{}) }, func(name string, recv reflect.Value) {
		k := recv.Interface().(*dsl.Kernel)
		mod, err := k.Build()
		if mod != nil || err == nil || !strings.Contains(err.Error(), "not made by dsl.New") {
			panic(fmt.Sprintf("then Build: %v, %v; want not made by dsl.New", mod, err))
		}
	})
	for _, b := range bad {
		t.Error(b)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Params of a zero Kernel: panic: %v", r)
			}
		}()
		k := &dsl.Kernel{}
		_ = dsl.Params[struct{ A dsl.Value }](k, dsl.F32)
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "not made by dsl.New") {
			t.Errorf("Build after Params of a zero Kernel: %v", err)
		}
	}()
}

// TestProbe15ZeroValue: every exported method of the zero value of each DSL handle type
// (Value, Tensor, Ptr, Pipeline, ...; nil and zero pointers too) returns without panicking;
// probe 15.
func TestProbe15ZeroValue(t *testing.T) {
	for _, mk := range zeroHandles() {
		for _, b := range callAll(mk, nil) {
			t.Error(b)
		}
	}
	// With a kernel for their *Kernel arguments (TiledGMMA's): a real one, then a zero one.
	defer func() { kernelArg = nil }()
	for _, mkK := range []func() *dsl.Kernel{
		func() *dsl.Kernel { return dsl.New("k", dsl.WithTarget(ptx.SM90a)) },
		func() *dsl.Kernel { return &dsl.Kernel{} },
	} {
		var ks []*dsl.Kernel
		kernelArg = func() *dsl.Kernel { k := mkK(); ks = append(ks, k); return k }
		for _, mk := range zeroHandles() {
			for _, b := range callAll(mk, nil) {
				t.Error("with a kernel argument:", b)
			}
		}
		for _, k := range ks {
			if _, err := k.Build(); err == nil {
				t.Error("a zero handle's method given a kernel: Build passed")
			}
		}
	}
}

// realHandles makes one of each DSL handle in k.
func realHandles(k *dsl.Kernel) []any {
	p := k.PtrParam("p", dsl.F32)
	atom, _ := dsl.LookupMMAAtom("16x8x16_F32BF16BF16F32")
	tm := dsl.MakeTiledMMA(atom, layout.MustParse("(2,2,1)"), nil)
	ga, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
	tg := dsl.MakeTiledGMMA(ga, 1)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 64)
	tile := k.SharedTile(dsl.BF16, l, 2)
	tc := k.MakeTMACopy(k.TensorMapPtrParam("tm"), tile)
	pipe := k.MakeTMAPipeline(2, 1, tc)
	tid := k.ThreadIdx(dsl.X)
	return []any{
		k.Param("a", dsl.U32), p, k.MakeTensor(p, layout.MustParse("(8,8):(8,1)")), k.Mbarriers(2),
		k.Mbarriers(2).At(0), k.NamedBarrierFor("b", 128), k.MakeTileScheduler(4, 4, 2),
		k.TensorMapParam("m", dsl.F32), k.TensorMapPtrParam("r"), tm, tm.Slice(tid),
		dsl.MakeTiledCopy(dsl.UniversalCopy, layout.MustParse("(32,4):(4,1)"), []int{1, 4}),
		dsl.MakeTiledCopy(dsl.UniversalCopy, layout.MustParse("(32,4):(4,1)"), []int{1, 4}).Slice(tid),
		tg, tg.AccView(k, tid), tile, tc, pipe, pipe.ProducerState(),
		k.CpAsyncPipeline(2, k.Param("n", dsl.I32), func(stage, tile dsl.Value) {}), k.Extern("f", nil, dsl.U32),
		k.If(tid.Eq(uint32(0)), func() {}), k.FragmentOf(tid, tid), k.IdentityTensor(4, 4), dsl.MakeTiledCopy(dsl.UniversalCopy, layout.MustParse("(32,4):(4,1)"), []int{1, 4}),
	}
}

// kernelFree are the handles that hold no kernel: their methods with a zero Value (Slice,
// Accumulating's default) have no kernel to record in; what they return reports it when used.
var kernelFree = map[reflect.Type]bool{
	reflect.TypeOf(dsl.TiledMMA{}): true, reflect.TypeOf(dsl.TiledCopy{}): true, reflect.TypeOf(dsl.TiledGMMA{}): true,
}

// TestProbe15RealHandles: every exported method of a real handle (made in a kernel) called
// with zero arguments records an error or passes, never panics; probe 15.
func TestProbe15RealHandles(t *testing.T) {
	k0 := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	n := len(realHandles(k0))
	if _, err := k0.Build(); err != nil {
		t.Fatalf("the handles' kernel: %v", err)
	}
	for i := 0; i < n; i++ {
		var k *dsl.Kernel
		mk := func() reflect.Value {
			k = dsl.New("k", dsl.WithTarget(ptx.SM90a))
			return reflect.ValueOf(realHandles(k)[i])
		}
		kernelArg = func() *dsl.Kernel { return k }
		for _, b := range callAll(mk, func(name string, recv reflect.Value) {
			_, err := k.Build()
			m, _ := recv.Type().MethodByName(name)
			for j := 1; j < m.Type.NumIn(); j++ {
				if in := m.Type.In(j); err == nil && isHandle(in) && in != reflect.TypeOf((*dsl.Kernel)(nil)) && !kernelFree[recv.Type()] {
					panic(fmt.Sprintf("a zero %s argument: Build passed", in))
				}
			}
		}) {
			t.Error(b)
		}
		kernelArg = nil
	}
}

// isHandle reports a DSL handle type: a struct of package dsl, or a pointer to one.
func isHandle(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t.PkgPath() == "github.com/kgen-dev/kgen/dsl"
}

// TestProbe15ZeroArgs: every exported method of a real Kernel called with zero arguments
// (zero Values, nil functions, nil slices, zero handles) records an error or passes, never
// panics, and Build reports the misuse where a zero handle was passed; probe 15.
func TestProbe15ZeroArgs(t *testing.T) {
	bad := callAll(func() reflect.Value { return reflect.ValueOf(dsl.New("k", dsl.WithTarget(ptx.SM90))) }, func(name string, recv reflect.Value) {
		k := recv.Interface().(*dsl.Kernel)
		_, err := k.Build()
		m, _ := recv.Type().MethodByName(name)
		for j := 1; j < m.Type.NumIn(); j++ {
			if in := m.Type.In(j); err == nil && isHandle(in) {
				panic(fmt.Sprintf("a zero %s argument: Build passed", in))
			}
		}
	})
	for _, b := range bad {
		t.Error(b)
	}
	// A zero Value, a nil function: each is a Build error.
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	k.If(dsl.Value{}, func() {})
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "zero") {
		t.Errorf("If of a zero Value: Build: %v", err)
	}
	for name, f := range map[string]func(k *dsl.Kernel){
		"If":    func(k *dsl.Kernel) { k.If(k.Param("a", dsl.U32).Lt(3), nil) },
		"For":   func(k *dsl.Kernel) { k.For(0, 4, 1, nil) },
		"While": func(k *dsl.Kernel) { k.While(nil, nil) },
	} {
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s with a nil function: panic: %v", name, r)
				}
			}()
			f(k)
		}()
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s with a nil function: Build: %v", name, err)
		}
	}
}

// TestProbe15ZeroReceiver: a method of a zero handle given real handles of a kernel (a Value,
// a Tensor, ...) for arguments, when it returns nothing (its work is what it emits), records
// in that kernel that it did nothing; probe 15.
func TestProbe15ZeroReceiver(t *testing.T) {
	defer func() { realArg = nil }()
	for _, mk := range zeroHandles() {
		var k *dsl.Kernel
		var hs []any
		var used bool
		realArg = func(t reflect.Type) (reflect.Value, bool) {
			if t == reflect.TypeOf((*dsl.Kernel)(nil)) {
				return reflect.Value{}, false
			}
			if hs == nil {
				hs = realHandles(k)
			}
			for _, h := range hs {
				if reflect.TypeOf(h) == t {
					used = true
					return reflect.ValueOf(h), true
				}
			}
			return reflect.Value{}, false
		}
		recv0 := mk()
		for i := 0; i < recv0.Type().NumMethod(); i++ {
			m := recv0.Type().Method(i)
			if m.Type.NumOut() != 0 || (recv0.Kind() == reflect.Pointer && recv0.IsNil()) {
				continue
			}
			k, hs, used = dsl.New("k", dsl.WithTarget(ptx.SM90a)), nil, false
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s.%s: %v", recv0.Type(), m.Name, r)
					}
				}()
				callZero(mk().Method(i))
			}()
			if _, err := k.Build(); used && err == nil {
				t.Errorf("%s.%s of real arguments: Build passed", recv0.Type(), m.Name)
			}
		}
	}
}
