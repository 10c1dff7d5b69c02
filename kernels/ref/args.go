package ref

import (
	"fmt"
	"reflect"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/naming"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// emuArgs encodes a kernel's host twin (a struct of package kernels/launch) as the
// emulator's argument list for fn, checking every field against the parameter it fills: its
// name and order, and, when the builder's declaration info is given, a pointer's element
// type and a scalar's type; the errors name the field.
func emuArgs(fn *ptx.Func, info []dsl.ParamInfo, args any) ([]any, error) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("kernel %s: arguments %T are not a struct", fn.Name, args)
	}
	t := v.Type()
	if t.NumField() != len(fn.Params) {
		return nil, fmt.Errorf("kernel %s: %s has %d fields for %d parameters", fn.Name, t, t.NumField(), len(fn.Params))
	}
	out := make([]any, len(fn.Params))
	for i, p := range fn.Params {
		f := t.Field(i)
		if name := naming.Param(f); name != p.Name {
			return nil, fmt.Errorf("kernel %s: field %s fills parameter %s, but parameter %d is %s", fn.Name, f.Name, name, i, p.Name)
		}
		var decl *dsl.ParamInfo
		if info != nil {
			decl = &info[i]
		}
		switch x := v.Field(i).Interface().(type) {
		case jit.AnyPtr:
			if decl != nil && (!decl.Pointer || decl.Type != x.Elem) {
				return nil, fmt.Errorf("kernel %s: field %s is a pointer to %s, but parameter %s is declared %s (pointer %v)", fn.Name, f.Name, x.Elem, p.Name, decl.Type, decl.Pointer)
			}
			out[i] = uint64(x.Addr)
		case uint32:
			if decl != nil && (decl.Pointer || decl.Type.Bytes() != 4) {
				return nil, fmt.Errorf("kernel %s: field %s is a uint32, but parameter %s is declared %s", fn.Name, f.Name, p.Name, decl.Type)
			}
			out[i] = x
		case uint64:
			if decl != nil && (decl.Pointer || decl.Type.Bytes() != 8) {
				return nil, fmt.Errorf("kernel %s: field %s is a uint64, but parameter %s is declared %s", fn.Name, f.Name, p.Name, decl.Type)
			}
			out[i] = x
		default:
			return nil, fmt.Errorf("kernel %s: field %s has type %s (want jit.AnyPtr, uint32 or uint64)", fn.Name, f.Name, f.Type)
		}
	}
	return out, nil
}

// on is GPU g's copy of s as a pointer to t.
func on(s *emu.Symmetric, g int, t dsl.Type) jit.AnyPtr {
	return jit.AnyPtr{Addr: jit.DevicePtr(s.On(g)), Elem: t}
}

// mc is the multicast address of s as a pointer to t.
func mc(s *emu.Symmetric, t dsl.Type) jit.AnyPtr {
	return jit.AnyPtr{Addr: jit.DevicePtr(s.Multicast()), Elem: t}
}

// table is GPU g's copy of a peer table (u64 addresses).
func table(s *emu.Symmetric, g int) jit.AnyPtr { return on(s, g, dsl.U64) }

// entry finds kernel entry in m.
func entry(m *ptx.Module, name string) (*ptx.Func, error) {
	for _, f := range m.Funcs {
		if f.Entry && f.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("module has no kernel %s", name)
}
