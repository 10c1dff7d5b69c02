package jit

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

// MaxArgBytes is the widest kernel parameter a launch accepts: gorgonia.org/cu's
// Function.Launch copies exactly 8 bytes per argument.
const MaxArgBytes = 8

// paramBytes is the size of a kernel parameter in bytes.
func paramBytes(p ptx.Param) int {
	if p.Array > 0 {
		return p.Array * p.Type.Bytes()
	}
	return p.Type.Bytes()
}

func paramDecl(p ptx.Param) string {
	if p.Array > 0 {
		return fmt.Sprintf(".%s %s[%d]", p.Type, p.Name, p.Array)
	}
	return fmt.Sprintf(".%s %s", p.Type, p.Name)
}

// Signature renders a kernel's parameter list: "vector_add_f32(.u64 a, .u64 b, .u64 c, .u32 n)".
func Signature(f *ptx.Func) string {
	ps := make([]string, len(f.Params))
	for i, p := range f.Params {
		ps[i] = paramDecl(p)
	}
	return f.Name + "(" + strings.Join(ps, ", ") + ")"
}

// EncodeArgs checks args against kernel f's parameters and returns one 8-byte slot per
// parameter, the value in its low bytes (little-endian). The errors name the kernel, the
// parameter, what it wants and what was given.
func EncodeArgs(f *ptx.Func, args []any) ([]uint64, error) {
	if f == nil {
		return nil, fmt.Errorf("jit: EncodeArgs: the kernel (*ptx.Func) is nil")
	}
	if len(args) != len(f.Params) {
		return nil, fmt.Errorf("jit: kernel %s takes %d arguments, got %d: %s", f.Name, len(f.Params), len(args), Signature(f))
	}
	slots := make([]uint64, len(args))
	for i, p := range f.Params {
		v, err := encodeArg(p, args[i])
		if err != nil {
			return nil, fmt.Errorf("jit: kernel %s, argument %d (%s): %w; signature %s", f.Name, i, paramDecl(p), err, Signature(f))
		}
		slots[i] = v
	}
	return slots, nil
}

func encodeArg(p ptx.Param, a any) (uint64, error) {
	size := paramBytes(p)
	if size > MaxArgBytes {
		return 0, fmt.Errorf("the parameter is %d bytes, but gorgonia.org/cu's Launch copies exactly %d bytes per argument, so parameters must be pointers or scalars of at most %d bytes (pass a pointer to device memory instead)", size, MaxArgBytes, MaxArgBytes)
	}
	if size == 0 {
		return 0, fmt.Errorf("parameter of type %s has no size", p.Type)
	}
	kind := p.Type.Kind()
	if p.Array > 0 {
		kind = ptx.KindBits
	}
	intOK := kind == ptx.KindBits || kind == ptx.KindSigned || kind == ptx.KindUnsigned
	half := p.Array == 0 && (p.Type == ptx.F16 || p.Type == ptx.BF16 || p.Type == ptx.E4M3x2 || p.Type == ptx.E5M2x2 ||
		p.Type == ptx.F16x2 || p.Type == ptx.BF16x2 || p.Type == ptx.E4M3 || p.Type == ptx.E5M2)
	want := func(gosize int, what string, isFloat bool) error {
		if gosize != size {
			return fmt.Errorf("got %s (%d bytes), the parameter is %d bytes", what, gosize, size)
		}
		if isFloat && !(kind == ptx.KindFloat && !half || kind == ptx.KindBits) {
			return fmt.Errorf("got %s for a .%s parameter", what, p.Type)
		}
		if !isFloat && !intOK && !half {
			return fmt.Errorf("got %s for a .%s parameter (pass float32/float64)", what, p.Type)
		}
		return nil
	}
	switch v := a.(type) {
	case nil:
		return 0, fmt.Errorf("got nil")
	case Pointer:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return 0, fmt.Errorf("got a nil %T", v)
		}
		if f, ok := v.(interface{ isFreed() bool }); ok && f.isFreed() {
			return 0, fmt.Errorf("got a %T that was freed", v)
		}
		if size != 8 || !intOK {
			return 0, fmt.Errorf("got a device pointer, the parameter is not a 64-bit integer (.u64/.b64/.s64)")
		}
		return uint64(v.DevPtr()), nil
	case int8:
		return uint64(uint8(v)), want(1, "int8", false)
	case uint8:
		return uint64(v), want(1, "uint8", false)
	case int16:
		return uint64(uint16(v)), want(2, "int16", false)
	case uint16:
		return uint64(v), want(2, "uint16", false)
	case int32:
		return uint64(uint32(v)), want(4, "int32", false)
	case uint32:
		return uint64(v), want(4, "uint32", false)
	case int64:
		return uint64(v), want(8, "int64", false)
	case uint64:
		return v, want(8, "uint64", false)
	case float32:
		return uint64(math.Float32bits(v)), want(4, "float32", true)
	case float64:
		return math.Float64bits(v), want(8, "float64", true)
	case int, uint, uintptr:
		return 0, fmt.Errorf("got %T, whose size depends on the platform; convert it to an explicitly sized type (int32, uint32, int64, ...)", v)
	case bool:
		return 0, fmt.Errorf("got bool; kernels take flags as uint8/uint32")
	}
	return 0, fmt.Errorf("got %T; pass a DevicePtr, *Memory, *Buffer[T], or a sized Go number", a)
}
