package jit

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/internal/naming"
	"github.com/kgen-dev/kgen/ptx"
)

// Ptr is a device pointer to T values: *Buffer[T] and TypedPtr[T] implement it. Its
// unexported method mentions T, so a pointer to other elements does not fit a Ptr[T]
// field: passing a *Buffer[float32] where a Ptr[fp.F16] is wanted does not compile.
type Ptr[T Elem] interface {
	Pointer
	elem() T
}

func (b *Buffer[T]) elem() (z T)         { return z }
func (b *Buffer[T]) elemType() ptx.Type  { return ElemType[T]() }
func (p TypedPtr[T]) elem() (z T)        { return z }
func (p TypedPtr[T]) elemType() ptx.Type { return ElemType[T]() }

// DevPtr returns the address.
func (p TypedPtr[T]) DevPtr() DevicePtr { return DevicePtr(p) }

// At returns the address of element i, 0 <= i <= Len() (Len() is the end, as a
// slice's bound); outside that range, or for a nil or freed buffer, it returns 0,
// the null address, never an address in another allocation.
func (b *Buffer[T]) At(i int) TypedPtr[T] {
	if b.DevPtr() == 0 || b.isFreed() || i < 0 || i > b.n {
		return 0
	}
	return TypedPtr[T](b.DevPtr()).Add(i)
}

// Ptr returns the address of the first element (0 for a nil buffer).
func (b *Buffer[T]) Ptr() TypedPtr[T] { return TypedPtr[T](b.DevPtr()) }

// Add returns the address n elements after p (before it for n < 0); it does not
// check bounds: p carries none.
func (p TypedPtr[T]) Add(n int) TypedPtr[T] {
	return p + TypedPtr[T](int64(n)*int64(sizeOf(*new(T))))
}

// TypedPtr is a device address of T values that is not a whole Buffer: an element of one
// (Buffer.At), or an address from elsewhere, converted: jit.TypedPtr[float32](addr).
type TypedPtr[T Elem] DevicePtr

// AnyPtr is a device pointer whose element type is known only at run time (a dtype chosen by
// the caller). A struct launch checks Elem against the kernel parameter's element type and
// names the field when they differ.
type AnyPtr struct {
	Addr DevicePtr
	Elem ptx.Type
}

// DevPtr returns the address.
func (p AnyPtr) DevPtr() DevicePtr { return p.Addr }

// AnyOf forgets p's static element type, keeping it for the launch's check.
func AnyOf[T Elem](p Ptr[T]) AnyPtr { return AnyPtr{Addr: p.DevPtr(), Elem: ElemType[T]()} }

// ElemType is the PTX type of a host element type: float32 is f32, fp.F16 is f16, uint32 is
// u32, int8 is s8, and so on (a type defined over another takes its underlying type's, except
// the fp types).
func ElemType[T Elem]() ptx.Type {
	t, _ := hostType(reflect.TypeFor[T]())
	return t
}

var (
	f16Type  = reflect.TypeFor[fp.F16]()
	bf16Type = reflect.TypeFor[fp.BF16]()
	e4m3Type = reflect.TypeFor[fp.E4M3]()
	e5m2Type = reflect.TypeFor[fp.E5M2]()
)

// hostType maps a Go scalar type to the PTX type it carries.
func hostType(t reflect.Type) (ptx.Type, bool) {
	switch t {
	case f16Type:
		return ptx.F16, true
	case bf16Type:
		return ptx.BF16, true
	case e4m3Type:
		return ptx.E4M3, true
	case e5m2Type:
		return ptx.E5M2, true
	}
	switch t.Kind() {
	case reflect.Int8:
		return ptx.S8, true
	case reflect.Int16:
		return ptx.S16, true
	case reflect.Int32:
		return ptx.S32, true
	case reflect.Int64:
		return ptx.S64, true
	case reflect.Uint8:
		return ptx.U8, true
	case reflect.Uint16:
		return ptx.U16, true
	case reflect.Uint32:
		return ptx.U32, true
	case reflect.Uint64:
		return ptx.U64, true
	case reflect.Float32:
		return ptx.F32, true
	case reflect.Float64:
		return ptx.F64, true
	}
	return ptx.NoType, false
}

// ParamInfo is what a kernel's builder knows of a parameter beyond its PTX type (the fields
// of dsl.ParamInfo): launches check pointers' element types and scalars' types against it.
type ParamInfo struct {
	Name      string
	Type      ptx.Type // the scalar's type, the pointee type of a pointer, a tensor map's element type
	Pointer   bool
	TensorMap bool // a 128-byte tensor map passed by value (a TensorMap argument)
}

// typedPointer is implemented by *Buffer[T] and TypedPtr[T].
type typedPointer interface{ elemType() ptx.Type }

type argKind int

const (
	argPtr   argKind = iota // a Ptr[T] (interface) field
	argTyped                // a *Buffer[T] or TypedPtr[T] field
	argAny                  // an AnyPtr field
	argInt                  // signed integers
	argUint                 // unsigned integers (and the fp types' bits)
	argF32
	argF64
	argTensorMap // a TensorMap for a 128-byte tensor-map parameter
)

// argField is how one struct field becomes one parameter word.
type argField struct {
	index int
	field string
	param ptx.Param
	kind  argKind
	elem  ptx.Type // a typed pointer's element type
	info  *ParamInfo
	host  ptx.Type // a scalar field's Go type as PTX (int32: s32)
}

// argPlan is a struct type's encoding for one kernel, made once (by reflection) and cached.
type argPlan struct {
	fields []argField
	err    error
}

var (
	pointerIface = reflect.TypeFor[Pointer]()
	anyPtrType   = reflect.TypeFor[AnyPtr]()
	typedIface   = reflect.TypeFor[typedPointer]()
	tmapType     = reflect.TypeFor[TensorMap]()
)

// planFor reads struct type t against f's parameters.
func (f *Function) planFor(t reflect.Type) *argPlan {
	if p, ok := f.plans.Load(t); ok {
		return p.(*argPlan)
	}
	p := &argPlan{}
	p.fields, p.err = f.makePlan(t)
	if p.err != nil {
		p.err = fmt.Errorf("jit: kernel %s, arguments %s: %w; signature %s", errName(f.sig.Name), t, p.err, errSignature(f.sig))
	}
	f.plans.Store(t, p)
	return p
}

func (f *Function) makePlan(t reflect.Type) ([]argField, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("not a struct (pass a struct with one field per kernel parameter, in order)")
	}
	params := f.sig.Params
	index := map[string]int{}
	for i, p := range params {
		index[p.Name] = i
	}
	var out []argField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := naming.Param(sf)
		if !sf.IsExported() {
			return nil, fmt.Errorf("field %s is unexported", sf.Name)
		}
		pi, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("field %s: the kernel has no parameter %s", sf.Name, errName(name))
		}
		if pi != i {
			if i >= len(params) {
				return nil, fmt.Errorf("field %s (parameter %s) comes after the kernel's %d parameters", sf.Name, errName(name), len(params))
			}
			return nil, fmt.Errorf("field %s is parameter %s, number %d, but is field number %d (the kernel's parameter %d is %s): order the fields as the parameters", sf.Name, errName(name), pi, i, i, errName(params[i].Name))
		}
		af := argField{index: i, field: sf.Name, param: params[i]}
		if f.info != nil {
			af.info = &f.info[i]
		}
		if err := af.check(sf.Type); err != nil {
			return nil, fmt.Errorf("field %s (parameter %s): %w", sf.Name, errName(paramDecl(params[i])), err)
		}
		out = append(out, af)
	}
	if len(out) < len(params) {
		var missing []string
		for _, p := range params[len(out):] {
			missing = append(missing, paramDecl(p))
		}
		return nil, fmt.Errorf("no field for parameter %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// check decides how a field of Go type ft fills parameter af.param.
func (af *argField) check(ft reflect.Type) error {
	p, info := af.param, af.info
	size := paramBytes(p)
	if ft == tmapType || size > MaxArgBytes {
		if ft != tmapType {
			return fmt.Errorf("type %s for a %d-byte parameter: the only wide parameters a struct fills are tensor maps (jit.TensorMap)", ft, size)
		}
		if size != TensorMapBytes || p.Array == 0 || p.Type.Bytes() != 1 || p.Align < 64 {
			return fmt.Errorf("a TensorMap, but the parameter is not a 64-byte-aligned 128-byte array (.param .align 64 .b8 name[128])")
		}
		if info != nil && !info.TensorMap {
			return fmt.Errorf("a TensorMap, but the kernel declares %s, not a tensor map", info.Type)
		}
		af.kind = argTensorMap
		return nil
	}
	isPtr := true
	switch {
	case ft == anyPtrType:
		af.kind = argAny
		if info == nil {
			return fmt.Errorf("an AnyPtr's element type is checked against the kernel's, which is unknown: load the module with Source.Params, or use a typed pointer")
		}
	case ft.Kind() == reflect.Interface && ft.Implements(pointerIface):
		m, ok := ft.MethodByName("elem")
		if !ok || m.Type.NumOut() != 1 {
			return fmt.Errorf("type %s is an untyped pointer; use jit.Ptr[T] (or AnyPtr when the element type is chosen at run time)", ft)
		}
		af.kind = argPtr
		af.elem, _ = hostType(m.Type.Out(0))
	case ft.Implements(typedIface) && ft.Implements(pointerIface):
		af.kind = argTyped
		af.elem = reflect.Zero(ft).Interface().(typedPointer).elemType()
	case ft.Implements(pointerIface) || reflect.PointerTo(ft).Implements(pointerIface):
		return fmt.Errorf("type %s is an untyped pointer; use jit.Ptr[T] or TypedPtr[T] (or AnyPtr when the element type is chosen at run time)", ft)
	default:
		isPtr = false
	}
	if isPtr {
		kind := p.Type.Kind()
		if p.Array > 0 || size != 8 || !(kind == ptx.KindBits || kind == ptx.KindSigned || kind == ptx.KindUnsigned) {
			return fmt.Errorf("a device pointer, but the parameter is not a 64-bit integer")
		}
		if info != nil {
			if !info.Pointer {
				return fmt.Errorf("a device pointer, but the kernel declares a %s scalar", info.Type)
			}
			if af.kind != argAny && af.elem != info.Type {
				return fmt.Errorf("a pointer to %s, but the kernel's parameter points to %s", af.elem, info.Type)
			}
		}
		return nil
	}
	ht, ok := hostType(ft)
	if !ok {
		if k := ft.Kind(); k == reflect.Int || k == reflect.Uint || k == reflect.Uintptr {
			return fmt.Errorf("type %s has a platform-dependent size; use a sized type (int32, uint32, int64)", ft)
		}
		return fmt.Errorf("type %s is not a parameter type (jit.Ptr[T], AnyPtr, a sized number or an fp type)", ft)
	}
	af.host = ht
	switch {
	case ht.IsFloat() && ht.Bytes() == 4:
		af.kind = argF32
	case ht.IsFloat() && ht.Bytes() == 8:
		af.kind = argF64
	case ht.Kind() == ptx.KindSigned:
		af.kind = argInt
	default:
		af.kind = argUint // unsigned integers and the narrow floats' bits
	}
	if info != nil {
		if info.Pointer {
			return fmt.Errorf("%s, but the kernel's parameter is a pointer to %s", ft, info.Type)
		}
		sameInt := ht.IsInt() && info.Type.IsInt() && ht.Bytes() == info.Type.Bytes()
		if ht != info.Type && !sameInt {
			return fmt.Errorf("%s (%s), but the kernel's parameter is %s", ft, ht, info.Type)
		}
	}
	if ht.Bytes() != size {
		return fmt.Errorf("%s is %d bytes, the parameter %d", ft, ht.Bytes(), size)
	}
	pk := p.Type.Kind()
	if p.Array == 0 && pk != ptx.KindBits {
		narrow := ht == ptx.F16 || ht == ptx.BF16 || ht == ptx.E4M3 || ht == ptx.E5M2
		switch {
		case narrow:
			return fmt.Errorf("%s travels as bits, but the parameter is .%s", ht, p.Type)
		case ht.IsFloat() != (pk == ptx.KindFloat):
			return fmt.Errorf("%s for a .%s parameter", ft, p.Type)
		}
	}
	return nil
}

// LaunchArgs runs the kernel with the parameters in args, a struct with one field per
// parameter in the kernel's order: field InMC fills parameter in_mc (the field's name in
// snake_case, or its `kgen:"name=..."` tag). Pointer fields are Ptr[T] (a *Buffer[T] or a
// TypedPtr[T]) or AnyPtr, scalars are sized Go numbers or fp types, a 128-byte tensor-map
// parameter takes a TensorMap (NewTensorMap) made on the launching device. A field's type is checked
// against the parameter once per struct type and kernel, and against the element types the
// kernel declared when the module was loaded with Source.Params; errors name the field. A
// *Buffer field must live on the function's device; a TypedPtr or AnyPtr is a raw address
// and cannot be checked. LaunchArgs does not wait.
func (f *Function) LaunchArgs(cfg LaunchConfig, args any) error {
	if f == nil || f.m == nil || f.sig == nil {
		return errors.New("jit: LaunchArgs of a nil *Function (look kernels up with Module.Function)")
	}
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return fmt.Errorf("jit: launch of %s: the arguments are a nil %s", errName(f.sig.Name), v.Type())
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return fmt.Errorf("jit: launch of %s: no arguments (nil)", errName(f.sig.Name))
	}
	slots, err := f.encodeStruct(v)
	if err != nil {
		return err
	}
	return f.launch(cfg, slots)
}

// encodeStruct encodes a struct of the kernel's parameters into parameter words.
func (f *Function) encodeStruct(v reflect.Value) ([]uint64, error) {
	plan := f.planFor(v.Type())
	if plan.err != nil {
		return nil, plan.err
	}
	offs := f.offs
	n := len(plan.fields)
	if offs != nil {
		n = offs[n-1] + paramWords(f.sig.Params[n-1])
	}
	slots := make([]uint64, n)
	for i := range plan.fields {
		af := &plan.fields[i]
		fv := v.Field(af.index)
		var err error
		if af.kind == argTensorMap {
			var b []byte
			if b, err = encodeWide(af.param, fv.Interface(), f.m.d, af.info); err == nil {
				putBytes(slots[offs[i]:], b)
			}
		} else {
			w := i
			if offs != nil {
				w = offs[i]
			}
			slots[w], err = af.word(fv, f.m.d)
		}
		if err != nil {
			return nil, fmt.Errorf("jit: kernel %s, field %s (parameter %s): %w", errName(f.sig.Name), af.field, errName(af.param.Name), err)
		}
	}
	return slots, nil
}

// word encodes one field's value for a launch on dev.
func (af *argField) word(fv reflect.Value, dev *Device) (uint64, error) {
	switch af.kind {
	case argInt:
		v := fv.Int()
		if err := inRange(af.target(), af.host, v < 0, uint64(v)); err != nil {
			return 0, fmt.Errorf("%s %d: %w", af.host, v, err)
		}
		return uint64(v) & mask(af.param), nil
	case argUint:
		u := fv.Uint()
		if err := inRange(af.target(), af.host, false, u); err != nil {
			return 0, fmt.Errorf("%s %d: %w", af.host, u, err)
		}
		return u, nil
	case argF32:
		return uint64(math.Float32bits(float32(fv.Float()))), nil
	case argF64:
		return math.Float64bits(fv.Float()), nil
	case argAny:
		if e := ptx.Type(fv.Field(1).Uint()); e != af.info.Type {
			return 0, fmt.Errorf("an AnyPtr to %s, but the kernel's parameter points to %s", e, af.info.Type)
		}
		if fv.Field(0).Uint() == 0 {
			return 0, fmt.Errorf("a null AnyPtr")
		}
		return fv.Field(0).Uint(), nil
	}
	if fv.Kind() == reflect.Interface || fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			return 0, fmt.Errorf("nil")
		}
	}
	p := fv.Interface().(Pointer)
	if fv.Kind() == reflect.Interface {
		if rv := fv.Elem(); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return 0, fmt.Errorf("a nil %s", rv.Type())
		}
	}
	if fr, ok := p.(interface{ isFreed() bool }); ok && fr.isFreed() {
		return 0, fmt.Errorf("a %T that was freed", p)
	}
	if err := onDevice(p, dev); err != nil {
		return 0, err
	}
	return uint64(p.DevPtr()), nil
}

// target is the type the kernel gave a scalar parameter: the builder's when known, else the
// PTX's (a byte array takes any bits).
func (af *argField) target() ptx.Type {
	switch {
	case af.info != nil && !af.info.Pointer:
		return af.info.Type
	case af.param.Array > 0:
		return ptx.B8
	}
	return af.param.Type
}

// mask keeps a signed value's bits within the parameter's width.
func mask(p ptx.Param) uint64 {
	if n := paramBytes(p); n < 8 {
		return 1<<(8*n) - 1
	}
	return math.MaxUint64
}

// plans is embedded in Function: the struct types' encodings, by reflect.Type.
type plans = sync.Map

// checkParamInfo checks a kernel's declared parameters against its PTX ones.
func checkParamInfo(f *ptx.Func, entry string, info []ParamInfo) error {
	if f == nil {
		return fmt.Errorf("the module has no kernel %s", errName(entry))
	}
	if len(info) != len(f.Params) {
		return fmt.Errorf("kernel %s: %d parameters declared, the PTX has %d", errName(entry), len(info), len(f.Params))
	}
	for i, p := range f.Params {
		if info[i].Name != p.Name {
			return fmt.Errorf("kernel %s: parameter %d is %s, declared as %s", errName(entry), i, errName(p.Name), errName(info[i].Name))
		}
	}
	return nil
}

// ParamInfos converts a builder's parameter list (dsl.Kernel.Params, kernels.Built.Params:
// structs of the same fields) to what Source.Params takes.
func ParamInfos[P ~struct {
	Name      string
	Type      ptx.Type
	Pointer   bool
	TensorMap bool
}](ps []P) []ParamInfo {
	out := make([]ParamInfo, len(ps))
	for i, p := range ps {
		out[i] = ParamInfo(p)
	}
	return out
}
