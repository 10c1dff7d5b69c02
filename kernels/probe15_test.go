package kernels_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// probe15Args are the parameters of the kernel the probe's real helpers are made in.
type probe15Args struct {
	Signals, Pads      dsl.PeerTable `kgen:"u32"`
	Out                dsl.Ptr       `kgen:"f32"`
	Rank, NGPUs, Epoch dsl.Value     `kgen:"u32"`
}

// probe15Call calls every exported method of recv (made afresh by mk) with arguments from
// arg (zero when it gives none; an empty slice for a variadic one) under recover, then check
// (when not nil); it returns the panics.
func probe15Call(mk func() reflect.Value, arg func(reflect.Type) (reflect.Value, bool), check func(name string)) []string {
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
			f := recv.Method(i)
			ft := f.Type()
			args := make([]reflect.Value, ft.NumIn())
			for j := range args {
				args[j] = reflect.Zero(ft.In(j))
				if arg != nil {
					if v, ok := arg(ft.In(j)); ok {
						args[j] = v
					}
				}
			}
			if ft.IsVariadic() {
				f.CallSlice(args)
			} else {
				f.Call(args)
			}
			if check != nil {
				check(m.Name)
			}
		}()
	}
	return bad
}

// probe15Helpers are the zero values (nil and zero pointers too) of the kernels helpers
// that hold a *dsl.Kernel.
func probe15Helpers() []func() reflect.Value {
	var mks []func() reflect.Value
	for _, v := range []any{kernels.TileSignals{}, kernels.CrossGPUBarrier{}, kernels.EpilogueFrag{}} {
		t := reflect.TypeOf(v)
		mks = append(mks,
			func() reflect.Value { return reflect.Zero(t) },
			func() reflect.Value { return reflect.Zero(reflect.PointerTo(t)) },
			func() reflect.Value { return reflect.New(t) })
	}
	return mks
}

// TestProbe15ZeroHelpers: every method of a zero or nil TileSignals, CrossGPUBarrier and
// EpilogueFrag returns without panicking (they dereferenced their nil kernel); given a
// kernel's Values or pointers for arguments, the misuse is a Build error of that kernel;
// probe 15.
func TestProbe15ZeroHelpers(t *testing.T) {
	for _, mk := range probe15Helpers() {
		for _, b := range probe15Call(mk, nil, nil) {
			t.Error(b)
		}
		var k *dsl.Kernel
		var a probe15Args
		var used bool
		arg := func(t reflect.Type) (reflect.Value, bool) {
			switch t {
			case reflect.TypeOf(dsl.Value{}):
				used = true
				return reflect.ValueOf(a.Rank), true
			case reflect.TypeOf(dsl.Ptr{}):
				used = true
				return reflect.ValueOf(a.Out), true
			case reflect.TypeOf((*any)(nil)).Elem():
				used = true
				return reflect.ValueOf(a.Rank), true
			}
			return reflect.Value{}, false
		}
		mkK := func() reflect.Value {
			k, used = dsl.New("k", dsl.WithTarget(ptx.SM90)), false
			a = dsl.Params[probe15Args](k, dsl.U32)
			return mk()
		}
		for _, b := range probe15Call(mkK, arg, func(name string) {
			if _, err := k.Build(); used && err == nil {
				panic("given a kernel's values: Build passed")
			}
		}) {
			t.Error(b)
		}
	}
}

// TestProbe15RealHelpers: every method of a real TileSignals and CrossGPUBarrier called
// with zero arguments (a nil slot function, zero Values) does not panic and is a Build error
// where it was given a zero Value or a nil function; probe 15.
func TestProbe15RealHelpers(t *testing.T) {
	for _, which := range []string{"TileSignals", "CrossGPUBarrier"} {
		var k *dsl.Kernel
		mk := func() reflect.Value {
			k = dsl.New("k", dsl.WithTarget(ptx.SM90))
			a := dsl.Params[probe15Args](k, dsl.U32)
			if which == "TileSignals" {
				return reflect.ValueOf(kernels.NewTileSignals(k, a.Signals, a.Rank, a.Epoch))
			}
			return reflect.ValueOf(kernels.NewCrossGPUBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch))
		}
		for _, b := range probe15Call(mk, nil, func(name string) {
			_, err := k.Build()
			m, _ := mk().Type().MethodByName(name)
			if m.Type.NumIn() > 1 && err == nil {
				panic("zero arguments: Build passed")
			}
		}) {
			t.Error(b)
		}
	}
	// The real ones, used right, build.
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	a := dsl.Params[probe15Args](k, dsl.U32)
	s := kernels.NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	s.WaitPeers(a.NGPUs, func(g dsl.Value) dsl.Value { return g }, s.Target())
	kernels.NewCrossGPUBarrier(k, a.Pads, a.Rank, a.NGPUs, a.Epoch).Wait()
	if _, err := k.Build(); err != nil {
		t.Error(err)
	}
	// A nil kernel: NewTileSignals and NewCrossGPUBarrier do not panic.
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("New* of a nil kernel: panic: %v", r)
			}
		}()
		kernels.NewTileSignals(nil, dsl.PeerTable{}, dsl.Value{}, dsl.Value{}).Set(0, 0, 0)
		kernels.NewCrossGPUBarrier(nil, dsl.PeerTable{}, dsl.Value{}, dsl.Value{}, dsl.Value{}).Wait()
	}()
	var nilFrag *kernels.EpilogueFrag
	if v := nilFrag.RowOf(dsl.Ptr{}); v.Kernel() != nil || !strings.Contains(fmt.Sprint(v), "invalid") {
		t.Errorf("RowOf of a nil EpilogueFrag: %v", v)
	}
}
