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
	return emuArgsMaps(fn, info, args, nil, nil)
}

// emuArgsMaps is emuArgs for a twin with tensor maps, and a kernel whose parameters go on
// after the twin's (a user's epilogue hook): a jit.TensorMap field, which only a jit device
// encodes, is left zero and takes the next of maps; rest fills the parameters after the
// twin's.
func emuArgsMaps(fn *ptx.Func, info []dsl.ParamInfo, args any, maps []emu.TensorMap, rest []any) ([]any, error) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("kernel %s: arguments %T are not a struct", fn.Name, args)
	}
	t := v.Type()
	if t.NumField()+len(rest) != len(fn.Params) {
		return nil, fmt.Errorf("kernel %s: %s has %d fields and %d more arguments for %d parameters", fn.Name, t, t.NumField(), len(rest), len(fn.Params))
	}
	out := make([]any, 0, len(fn.Params))
	for i, p := range fn.Params[:t.NumField()] {
		f := t.Field(i)
		if name := naming.Param(f); name != p.Name {
			return nil, fmt.Errorf("kernel %s: field %s fills parameter %s, but parameter %d is %s", fn.Name, f.Name, name, i, p.Name)
		}
		var decl *dsl.ParamInfo
		if info != nil {
			decl = &info[i]
		}
		scalar := func(bytes int) error {
			if decl != nil && (decl.Pointer || decl.TensorMap || decl.Type.Bytes() != bytes) {
				return fmt.Errorf("kernel %s: field %s is a %s, but parameter %s is declared %s", fn.Name, f.Name, f.Type, p.Name, decl.Type)
			}
			return nil
		}
		switch x := v.Field(i).Interface().(type) {
		case jit.AnyPtr:
			if decl != nil && (!decl.Pointer || decl.Type != x.Elem) {
				return nil, fmt.Errorf("kernel %s: field %s is a pointer to %s, but parameter %s is declared %s (pointer %v)", fn.Name, f.Name, x.Elem, p.Name, decl.Type, decl.Pointer)
			}
			out = append(out, uint64(x.Addr))
		case jit.TensorMap:
			switch {
			case x != jit.TensorMap{}:
				return nil, fmt.Errorf("kernel %s: field %s holds a jit device's tensor map: leave it zero and pass an emu.TensorMap", fn.Name, f.Name)
			case len(maps) == 0:
				return nil, fmt.Errorf("kernel %s: no emu.TensorMap left for field %s", fn.Name, f.Name)
			case decl != nil && !decl.TensorMap:
				return nil, fmt.Errorf("kernel %s: field %s is a tensor map, but parameter %s is declared %s", fn.Name, f.Name, p.Name, decl.Type)
			}
			out, maps = append(out, maps[0]), maps[1:]
		case float32:
			if err := scalar(4); err != nil {
				return nil, err
			}
			if decl != nil && decl.Type != dsl.F32 {
				return nil, fmt.Errorf("kernel %s: field %s is a float32, but parameter %s is declared %s", fn.Name, f.Name, p.Name, decl.Type)
			}
			out = append(out, x)
		case uint32:
			if err := scalar(4); err != nil {
				return nil, err
			}
			out = append(out, x)
		case uint64:
			if err := scalar(8); err != nil {
				return nil, err
			}
			out = append(out, x)
		default:
			return nil, fmt.Errorf("kernel %s: field %s has type %s (want jit.AnyPtr, jit.TensorMap, float32, uint32 or uint64)", fn.Name, f.Name, f.Type)
		}
	}
	if len(maps) > 0 {
		return nil, fmt.Errorf("kernel %s: %d tensor maps left over (%s has fewer jit.TensorMap fields)", fn.Name, len(maps), t)
	}
	return append(out, rest...), nil
}

// anyPtr is address a as a pointer to t.
func anyPtr(a uint64, t dsl.Type) jit.AnyPtr { return jit.AnyPtr{Addr: jit.DevicePtr(a), Elem: t} }

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
