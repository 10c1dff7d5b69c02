package jit

import (
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"math"
	"reflect"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

// MaxArgBytes is the widest scalar kernel parameter: numbers and pointers take one 8-byte
// word. Wider parameters are byte arrays (.param .b8 name[N]) filled by a TensorMap or a
// []byte of their size.
const MaxArgBytes = 8

// MaxParamBytes is the most parameter bytes a kernel takes in all (the PTX ISA's limit for
// sm_70 and newer with CUDA 12.1+ is 32764; the launch path keeps to the classic 4 KiB).
const MaxParamBytes = 4096

// paramWords is how many 8-byte words parameter p takes in an encoded launch.
func paramWords(p ptx.Param) int { return max((paramBytes(p)+7)/8, 1) }

// wordOffsets returns the first word of each parameter in an encoded launch, or nil when
// every parameter takes one word (parameter i is word i).
func wordOffsets(f *ptx.Func) []int {
	wide := false
	for _, p := range f.Params {
		wide = wide || paramWords(p) > 1
	}
	if !wide {
		return nil
	}
	offs := make([]int, len(f.Params))
	n := 0
	for i, p := range f.Params {
		offs[i] = n
		n += paramWords(p)
	}
	return offs
}

// paramBytesOf returns parameter i's bytes from an encoded launch.
func paramBytesOf(f *ptx.Func, offs []int, words []uint64, i int) []byte {
	p := f.Params[i]
	w := i
	if offs != nil {
		w = offs[i]
	}
	out := make([]byte, paramBytes(p))
	for j := range out {
		out[j] = byte(words[w+j/8] >> (8 * (j % 8)))
	}
	return out
}

// paramBytes is the size of a kernel parameter in bytes; an array longer than 2^32 elements
// counts as 2^32, so that the product cannot overflow (checkParamSpace refuses it).
func paramBytes(p ptx.Param) int {
	if p.Array > 0 {
		return min(p.Array, 1<<32) * p.Type.Bytes()
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
// Signature of nil is "".
func Signature(f *ptx.Func) string {
	if f == nil {
		return ""
	}
	ps := make([]string, len(f.Params))
	for i, p := range f.Params {
		ps[i] = paramDecl(p)
	}
	return f.Name + "(" + strings.Join(ps, ", ") + ")"
}

// maxErrSignature bounds a signature quoted in an error, and maxErrName a kernel name: a
// kernel of hundreds of long parameter names (or a huge name) gives a short message.
const (
	maxErrSignature = 512
	maxErrName      = 128
)

// errSignature is Signature(f) for an error message: an excerpt past maxErrSignature bytes.
func errSignature(f *ptx.Func) string { return excerpt.Cut(Signature(f), maxErrSignature) }

// errName is a kernel name for an error message: an excerpt past maxErrName bytes.
func errName(name string) string { return excerpt.Cut(name, maxErrName) }

// EncodeArgs checks args against kernel f's parameters and returns one 8-byte word per
// parameter, the value in its low bytes (little-endian); a byte-array parameter wider than 8
// bytes (a tensor map) takes ceil(size/8) consecutive words holding its bytes. The errors
// name the kernel, the parameter, what it wants and what was given.
func EncodeArgs(f *ptx.Func, args []any) ([]uint64, error) { return encodeArgs(f, args, nil, nil) }

// encodeArgs is EncodeArgs for a launch on dev (nil: any device), which tensor maps must
// have been made on, of a kernel that declared info (nil: unknown).
func encodeArgs(f *ptx.Func, args []any, dev *Device, info []ParamInfo) ([]uint64, error) {
	if f == nil {
		return nil, fmt.Errorf("jit: EncodeArgs: the kernel (*ptx.Func) is nil")
	}
	if len(args) != len(f.Params) {
		return nil, fmt.Errorf("jit: kernel %s takes %d arguments, got %d: %s", errName(f.Name), len(f.Params), len(args), errSignature(f))
	}
	if err := checkParamSpace(f); err != nil {
		return nil, err
	}
	offs := wordOffsets(f)
	if offs == nil {
		slots := make([]uint64, len(args))
		for i, p := range f.Params {
			v, err := encodeArg(p, args[i], dev, infoAt(info, i))
			if err != nil {
				return nil, fmt.Errorf("jit: kernel %s, argument %d (%s): %w; signature %s", errName(f.Name), i, errName(paramDecl(p)), err, errSignature(f))
			}
			slots[i] = v
		}
		return slots, nil
	}
	last := len(f.Params) - 1
	words := make([]uint64, offs[last]+paramWords(f.Params[last]))
	for i, p := range f.Params {
		var err error
		if paramBytes(p) > MaxArgBytes {
			var b []byte
			var pi *ParamInfo
			if info != nil {
				pi = &info[i]
			}
			if b, err = encodeWide(p, args[i], dev, pi); err == nil {
				putBytes(words[offs[i]:], b)
			}
		} else {
			words[offs[i]], err = encodeArg(p, args[i], dev, infoAt(info, i))
		}
		if err != nil {
			return nil, fmt.Errorf("jit: kernel %s, argument %d (%s): %w; signature %s", errName(f.Name), i, errName(paramDecl(p)), err, errSignature(f))
		}
	}
	return words, nil
}

// infoAt is parameter i's declaration, or nil when the kernel declared none.
func infoAt(info []ParamInfo, i int) *ParamInfo {
	if info == nil {
		return nil
	}
	return &info[i]
}

// checkParamSpace refuses a kernel whose parameters exceed MaxParamBytes.
func checkParamSpace(f *ptx.Func) error {
	n := 0
	for i, p := range f.Params {
		if p.Array < 0 {
			return fmt.Errorf("jit: kernel %s, parameter %d (%s): negative array length %d", errName(f.Name), i, errName(p.Name), p.Array)
		}
		n += paramBytes(p)
	}
	if n > MaxParamBytes {
		return fmt.Errorf("jit: kernel %s takes %d bytes of parameters, more than the %d a launch passes; signature %s", errName(f.Name), n, MaxParamBytes, errSignature(f))
	}
	return nil
}

// putBytes stores b little-endian into consecutive words.
func putBytes(words []uint64, b []byte) {
	for j, c := range b {
		words[j/8] |= uint64(c) << (8 * (j % 8))
	}
}

// encodeWide encodes an argument for a parameter wider than 8 bytes: a byte array filled by
// a TensorMap (a 128-byte parameter aligned to 64) or a []byte of its size. info, when
// known, is what the kernel declared.
func encodeWide(p ptx.Param, a any, dev *Device, info *ParamInfo) ([]byte, error) {
	size := paramBytes(p)
	if p.Array == 0 || p.Type.Bytes() != 1 {
		return nil, fmt.Errorf("the parameter is %d bytes and not a byte array (.b8 name[N]); wide parameters are byte arrays", size)
	}
	switch v := a.(type) {
	case TensorMap:
		if err := v.fits(p, dev, info); err != nil {
			return nil, err
		}
		return v.b[:], nil
	case *TensorMap:
		if v == nil {
			return nil, fmt.Errorf("got a nil *TensorMap")
		}
		return encodeWide(p, *v, dev, info)
	case []byte:
		if info != nil && info.TensorMap {
			return nil, fmt.Errorf("got []byte, but the kernel declares a tensor map over %s (pass a jit.TensorMap)", info.Type)
		}
		if len(v) != size {
			return nil, fmt.Errorf("got %d bytes for a %d-byte array", len(v), size)
		}
		return v, nil
	case nil:
		return nil, fmt.Errorf("got nil")
	}
	return nil, fmt.Errorf("got %T for a %d-byte array parameter (pass a jit.TensorMap for a 128-byte tensor map, or a []byte of %d)", a, size, size)
}

// encodeArg encodes a positional argument for parameter p; info, when known, is what the
// kernel declared for it: a pointer's element type and a scalar's type are then checked
// against it as LaunchArgs checks a struct's fields. A scalar's value must also lie in the
// range of the parameter's type (int32(-1) for a .u32 parameter is an error, not 2^32-1).
func encodeArg(p ptx.Param, a any, dev *Device, info *ParamInfo) (uint64, error) {
	size := paramBytes(p)
	if size > MaxArgBytes {
		return 0, fmt.Errorf("the parameter is %d bytes: only byte arrays (.b8 name[N]) are wider than %d", size, MaxArgBytes)
	}
	if size == 0 {
		name := p.Type.String()
		if p.Type == 0 {
			name = "(the zero Type)" // it prints as nothing
		}
		return 0, fmt.Errorf("parameter of type %s has no size", name)
	}
	kind := p.Type.Kind()
	if p.Array > 0 {
		kind = ptx.KindBits
	}
	intOK := kind == ptx.KindBits || kind == ptx.KindSigned || kind == ptx.KindUnsigned
	half := p.Array == 0 && (p.Type == ptx.F16 || p.Type == ptx.BF16 || p.Type == ptx.E4M3x2 || p.Type == ptx.E5M2x2 ||
		p.Type == ptx.F16x2 || p.Type == ptx.BF16x2 || p.Type == ptx.E4M3 || p.Type == ptx.E5M2)
	// want checks a value of gosize bytes (a float or not) against the parameter; what names
	// the value in its errors, formatted only when there is one (the launch path is hot).
	want := func(gosize int, what func() string, isFloat bool) error {
		if gosize != size {
			return fmt.Errorf("got %s (%d bytes), the parameter is %d bytes", what(), gosize, size)
		}
		if isFloat && !(kind == ptx.KindFloat && !half || kind == ptx.KindBits) {
			return fmt.Errorf("got %s for a .%s parameter", what(), p.Type)
		}
		if !isFloat && !intOK && !half {
			return fmt.Errorf("got %s for a .%s parameter (pass float32/float64)", what(), p.Type)
		}
		return nil
	}
	if pv, ok := a.(Pointer); ok {
		return encodePointer(pv, size, intOK, dev, info)
	}
	var (
		w   uint64
		ht  ptx.Type // the Go value's type, as PTX
		neg bool     // a negative signed value
	)
	switch v := a.(type) {
	case nil:
		return 0, fmt.Errorf("got nil")
	case int8:
		w, ht, neg = uint64(uint8(v)), ptx.S8, v < 0
	case uint8:
		w, ht = uint64(v), ptx.U8
	case int16:
		w, ht, neg = uint64(uint16(v)), ptx.S16, v < 0
	case uint16:
		w, ht = uint64(v), ptx.U16
	case int32:
		w, ht, neg = uint64(uint32(v)), ptx.S32, v < 0
	case uint32:
		w, ht = uint64(v), ptx.U32
	case int64:
		w, ht, neg = uint64(v), ptx.S64, v < 0
	case uint64:
		w, ht = v, ptx.U64
	case float32:
		w, ht = uint64(math.Float32bits(v)), ptx.F32
	case float64:
		w, ht = math.Float64bits(v), ptx.F64
	case int, uint, uintptr:
		return 0, fmt.Errorf("got %T, whose size depends on the platform; convert it to an explicitly sized type (int32, uint32, int64, ...)", v)
	case bool:
		return 0, fmt.Errorf("got bool; kernels take flags as uint8/uint32")
	default:
		// The fp types (fp.F16, fp.BF16, fp.E4M3, fp.E5M2) travel as their bits.
		rt := reflect.TypeOf(a)
		t, ok := hostType(rt)
		if !ok || !t.IsFloat() || t.Bytes() > 2 || rt.Kind() != reflect.Uint16 && rt.Kind() != reflect.Uint8 {
			return 0, fmt.Errorf("got %T; pass a DevicePtr, *Memory, *Buffer[T], or a sized Go number", a)
		}
		w, ht = reflect.ValueOf(a).Uint(), t
		if size != t.Bytes() {
			return 0, fmt.Errorf("got %T (%d bytes), the parameter is %d bytes", a, t.Bytes(), size)
		}
		if p.Array == 0 && p.Type != t && p.Type.Kind() != ptx.KindBits {
			return 0, fmt.Errorf("got %T (%s) for a .%s parameter", a, t, p.Type)
		}
	}
	if ht.Bytes() >= 4 || !ht.IsFloat() {
		if err := want(ht.Bytes(), func() string { return goName(a) }, ht.IsFloat()); err != nil {
			return 0, err
		}
	}
	// The type the kernel gave the parameter: the builder's when known, else the PTX's.
	target := p.Type
	if p.Array > 0 {
		target = ptx.B8
	}
	if info != nil {
		if info.Pointer {
			return 0, fmt.Errorf("got %s, but the kernel's parameter is a pointer to %s", goName(a), info.Type)
		}
		sameInt := ht.IsInt() && info.Type.IsInt() && ht.Bytes() == info.Type.Bytes()
		// uint16 (uint8) bits for an f16/bf16 (fp8) scalar, as the positional form documents
		bits := ht.Kind() == ptx.KindUnsigned && info.Type.IsFloat() && info.Type.Bytes() <= 2 && ht.Bytes() == info.Type.Bytes()
		if ht != info.Type && !sameInt && !bits {
			return 0, fmt.Errorf("got %s (%s), but the kernel's parameter is %s", goName(a), ht, info.Type)
		}
		target = info.Type
	}
	if err := inRange(target, ht, neg, w); err != nil {
		return 0, fmt.Errorf("got %s %s: %w", goName(a), fmtValue(a), err)
	}
	return w, nil
}

// goName is a Go value's type as the errors name it.
func goName(a any) string { return fmt.Sprintf("%T", a) }

// fmtValue prints a scalar argument's value.
func fmtValue(a any) string { return fmt.Sprint(a) }

// inRange checks an integer's value (its bits w, of Go type ht; neg: a negative signed
// value) against integer parameter type t: no negative value for an unsigned type, no value
// above the signed maximum for a signed one. Bit types take any bits.
func inRange(t, ht ptx.Type, neg bool, w uint64) error {
	if !ht.IsInt() {
		return nil
	}
	n := t.Bytes()
	switch t.Kind() {
	case ptx.KindUnsigned:
		if neg {
			return fmt.Errorf("out of range for a .%s parameter (0 to %d)", t, uint64(math.MaxUint64)>>(64-8*n))
		}
	case ptx.KindSigned:
		if ht.Kind() == ptx.KindUnsigned && w > uint64(1)<<(8*n-1)-1 {
			return fmt.Errorf("out of range for a .%s parameter (%d to %d)", t, int64(-1)<<(8*n-1), uint64(1)<<(8*n-1)-1)
		}
	}
	return nil
}

// encodePointer encodes a device pointer argument of a launch on dev (nil: any device); info,
// when known, says the parameter is a pointer and to what: a typed pointer (*Buffer[T],
// TypedPtr[T]) or an AnyPtr must point to that element type.
func encodePointer(v Pointer, size int, intOK bool, dev *Device, info *ParamInfo) (uint64, error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return 0, fmt.Errorf("got a nil %T", v)
	}
	if f, ok := v.(interface{ isFreed() bool }); ok && f.isFreed() {
		return 0, fmt.Errorf("got a %T that was freed", v)
	}
	if err := onDevice(v, dev); err != nil {
		return 0, err
	}
	if size != 8 || !intOK {
		return 0, fmt.Errorf("got a device pointer, the parameter is not a 64-bit integer (.u64/.b64/.s64)")
	}
	if info != nil {
		if !info.Pointer {
			return 0, fmt.Errorf("got a device pointer (%T), but the kernel declares a %s scalar", v, info.Type)
		}
		switch tp := v.(type) {
		case typedPointer:
			if e := tp.elemType(); e != info.Type {
				return 0, fmt.Errorf("got a pointer to %s (%T), but the kernel's parameter points to %s", e, v, info.Type)
			}
		case AnyPtr:
			if tp.Elem != info.Type {
				return 0, fmt.Errorf("got an AnyPtr to %s, but the kernel's parameter points to %s", tp.Elem, info.Type)
			}
		}
	}
	return uint64(v.DevPtr()), nil
}
