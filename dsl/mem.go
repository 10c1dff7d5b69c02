package dsl

import (
	"fmt"
	"strconv"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Ptr is a typed pointer into a state space: a 64-bit address plus a constant byte offset.
type Ptr struct {
	k     *Kernel
	addr  Value // U64 (a register, or a constant for absolute addresses)
	off   int64
	elem  Type
	space ptx.Space
	align int // known alignment of addr in bytes (0: unknown)
}

// Elem returns the pointee type.
func (p Ptr) Elem() Type { return p.elem }

// Kernel returns the kernel p belongs to (nil for the zero Ptr).
func (p Ptr) Kernel() *Kernel { return p.k }

// Space returns the state space the pointer points into.
func (p Ptr) Space() ptx.Space { return p.space }

// paramType is the .param type that carries a value of type t.
func paramType(t Type) Type {
	switch t {
	case F16, BF16, E4M3, E5M2:
		return ptx.B16
	case F16x2, BF16x2, E4M3x4, E5M2x4:
		return ptx.B32
	}
	return t
}

// ParamInfo describes a kernel parameter as the DSL declared it: generators of typed
// launchers use it (the PTX parameter alone says .u64 for every pointer).
type ParamInfo struct {
	Name      string
	Type      Type // the value's type, the pointee type for pointers, the tensor's for tensor maps
	Pointer   bool // a pointer to global memory holding Type values
	TensorMap bool // a 128-byte tensor map by value over a tensor of Type values
}

// Params returns the kernel's parameters in order.
func (k *Kernel) Params() []ParamInfo {
	if !k.live() {
		return nil
	}
	return append([]ParamInfo(nil), k.paramInfo...)
}

func (k *Kernel) addParam(name string, t Type) bool {
	return k.addParamDecl(ptx.Param{Name: name, Type: paramType(t)})
}

// addParamDecl appends the parameter p after checking its name; false if it was refused.
func (k *Kernel) addParamDecl(p ptx.Param) bool {
	name := p.Name
	if k.afterBuild("parameter " + name + " declared") {
		return false
	}
	if !ptx.ValidIdent(name) {
		k.errorf("parameter name %s is not a valid PTX identifier", excerpt.Quote(name))
		return false
	}
	if k.params[name] {
		k.errorf("parameter %s declared twice", excerpt.Quote(name))
		return false
	}
	k.params[name] = true
	k.fn.Params = append(k.fn.Params, p)
	return true
}

// Param declares a scalar kernel parameter and returns its value.
func (k *Kernel) Param(name string, t Type) Value {
	if !k.live() {
		return Value{}
	}
	if !hasMem(t) || t == ptx.B128 {
		k.errorf("parameter %s: type %s cannot be a kernel parameter (use U8 or U32 for flags)", excerpt.Quote(name), typeName(t))
		return k.poison(U32)
	}
	if !k.addParam(name, t) {
		return k.poison(t)
	}
	k.paramInfo = append(k.paramInfo, ParamInfo{Name: name, Type: t})
	d := k.reg(t)
	k.op("ld", []string{"param"}, memType(t), d, ptx.Addr{Base: ptx.Sym(name)})
	return Value{k: k, t: t, op: d}
}

// PtrParam declares a kernel parameter that points to global memory holding elem values.
// The pointer is assumed 16-byte aligned (cudaMalloc gives 256), which lets tensors over it
// use 128-bit accesses.
func (k *Kernel) PtrParam(name string, elem Type) Ptr {
	if !k.live() {
		return Ptr{}
	}
	if !hasMem(elem) {
		k.errorf("pointer parameter %s: no memory type %s", excerpt.Quote(name), typeName(elem))
		elem = U8
	}
	if !k.addParam(name, U64) {
		return Ptr{k: k, addr: k.poison(U64), elem: elem, space: ptx.SpaceGlobal}
	}
	k.paramInfo = append(k.paramInfo, ParamInfo{Name: name, Type: elem, Pointer: true})
	g, d := k.reg(U64), k.reg(U64)
	k.op("ld", []string{"param"}, ptx.U64, g, ptx.Addr{Base: ptx.Sym(name)})
	k.emit(&ptx.Instr{Op: "cvta", Q: []string{"to", "global"}, Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{d, g}})
	return Ptr{k: k, addr: Value{k: k, t: U64, op: d}, elem: elem, space: ptx.SpaceGlobal, align: 16}
}

// hasMem reports whether values of t have a memory size: not Bool, the zero Type or a Type
// out of range (whose sizes of 0 would divide by zero).
func hasMem(t Type) bool { return t != Bool && memType(t).Bytes() > 0 }

// memType is the type suffix ld/st use for values of type t (they have no half-float forms).
func memType(t Type) Type {
	switch t {
	case F16, BF16, E4M3x2, E5M2x2:
		return ptx.B16
	case F16x2, BF16x2, E4M3x4, E5M2x4:
		return ptx.B32
	case E4M3, E5M2:
		return ptx.B8
	}
	return t
}

// As returns the same address as a pointer to elem values: a view of the memory with
// another element type, nothing converted (an E4M3 buffer as E4M3x4 words for multimem, or
// as U8 bytes). Indexing then counts elem values. The constant offset must be a multiple of
// elem's size.
func (p Ptr) As(elem Type) Ptr {
	k := p.k
	if k == nil {
		return p
	}
	if elem == Bool || elem == ptx.NoType || elem.Bytes() == 0 {
		k.errorf("Ptr.As: no memory type %s", typeName(elem))
		return p
	}
	if p.off%int64(elem.Bytes()) != 0 {
		k.errorf("Ptr.As: constant offset %d is not a multiple of %s's %d bytes", p.off, elem, elem.Bytes())
		return p
	}
	p.elem = elem
	return p
}

// At returns the pointer i elements further on. i is an integer Value or a Go integer.
func (p Ptr) At(i any) Ptr {
	k := p.k
	if k == nil {
		return p
	}
	size := int64(p.elem.Bytes())
	if size == 0 {
		size = 1
	}
	switch x := i.(type) {
	case Value:
		if !k.own(x, "Ptr.At") {
			return p
		}
		if !isInt(x.t) {
			k.errorf("Ptr.At: index is %s, not an integer", x.t)
			return p
		}
		if x.IsConst() {
			return p.addOff(constInt(x), size)
		}
		var bytes Value
		sz := Value{k: k, t: I64, op: immOp(ptx.S64, uint64(size))} // pre-boxed when small
		switch x.t.Bits() {
		case 64:
			bytes = k.memo("bytes", U64, []Value{x, sz}, func(d ptx.Reg) {
				k.op("mul", qLo, ptx.U64, d, x.op, immOp(ptx.U64, uint64(size)))
			})
		case 32:
			wt := U64
			if x.t.Kind() == ptx.KindSigned {
				wt = I64
			}
			bytes = k.memo("bytes", wt, []Value{x, sz}, func(d ptx.Reg) {
				k.op("mul", qWide, x.t, d, x.op, immOp(x.t, uint64(size)))
			})
		default: // 8 and 16 bits: widen to 32 keeping the sign (mul.wide of 16 bits gives 32)
			if x.t.Kind() == ptx.KindSigned {
				return p.At(x.To(I32))
			}
			return p.At(x.To(U32))
		}
		base := p.addr
		p.addr = k.memo("addr", U64, []Value{base, bytes}, func(d ptx.Reg) {
			k.op("add", nil, ptx.S64, d, base.op, bytes.op)
		})
		p.align = int(gcd(int64(p.align), k.divOf(x)*size))
		return p
	case int, int64, int32, uint32, uint64, uint:
		n, err := constOf(k, I64, x)
		if err != nil {
			k.errorf("Ptr.At: %v", err)
			return p
		}
		return p.addOff(constInt(n), size)
	}
	k.errorf("Ptr.At: index must be an integer Value or Go integer, got %T", i)
	return p
}

// atConst is At for a constant index, without boxing it into an any.
func (p Ptr) atConst(i int64) Ptr {
	if p.k == nil {
		return p
	}
	return p.addOff(i, max(int64(p.elem.Bytes()), 1))
}

// MaxOffset bounds a pointer's constant byte offset (2^48, the GPU's virtual address
// space): a larger one is a mistake, and offsets near 2^63 would wrap.
const MaxOffset = 1 << 48

// addOff returns p advanced by n elements of size bytes, or records an error when the
// constant offset leaves ±MaxOffset.
func (p Ptr) addOff(n, size int64) Ptr {
	if n > MaxOffset || n < -MaxOffset || p.off+n*size > MaxOffset || p.off+n*size < -MaxOffset {
		p.k.errorf("Ptr.At: constant index %d (%d-byte elements) moves the pointer beyond %d bytes (MaxOffset)", n, size, int64(MaxOffset))
		return p
	}
	p.off += n * size
	return p
}

func (p Ptr) addrOperand() ptx.Operand {
	return ptx.Addr{Base: p.addr.op, Off: p.off}
}

func (k *Kernel) checkPtr(p Ptr, what string) bool {
	switch {
	case p.k == nil:
		k.errorf("%s: invalid (zero) Ptr", what)
		return false
	case p.k != k:
		k.errorf("%s: pointer belongs to kernel %s, not %s", what, errName(p.k.name), errName(k.name))
		return false
	}
	return p.addr.k == nil || k.checkScope(p.addr)
}

// Load reads the value p points to.
func (k *Kernel) Load(p Ptr, opts ...MemOption) Value {
	if !k.live() {
		return Value{}
	}
	if !k.checkPtr(p, "Load") {
		return k.poison(p.elem)
	}
	o, ok := k.memOptions("Load", p, opts, false)
	if !ok {
		return k.poison(p.elem)
	}
	d := k.reg(p.elem)
	k.op("ld", o.quals(p.space, 0), memType(p.elem), d, p.addrOperand())
	return Value{k: k, t: p.elem, op: d}
}

// Store writes v to p. v is a Value of p's element type or a Go number.
func (k *Kernel) Store(p Ptr, v any, opts ...MemOption) {
	if !k.live() {
		return
	}
	if !k.checkPtr(p, "Store") {
		return
	}
	x, ok := k.val(v, p.elem, "Store")
	if !ok {
		return
	}
	o, ok := k.memOptions("Store", p, opts, true)
	if !ok {
		return
	}
	k.op("st", o.quals(p.space, 0), memType(p.elem), p.addrOperand(), k.storeOperand(x))
}

// storeOperand returns x as a st source (immediates of half types are materialised).
func (k *Kernel) storeOperand(x Value) ptx.Operand {
	op := k.operand(x)
	if im, ok := op.(ptx.Imm); ok {
		im.Type = memType(x.t)
		if x.t == F32 || x.t == F64 {
			return op
		}
		return im
	}
	return op
}

// LoadVec reads n consecutive elements with one vector access (ld.v2/.v4). The address must
// be aligned to n times the element size; that is the caller's promise.
func (k *Kernel) LoadVec(p Ptr, n int, opts ...MemOption) []Value {
	if !k.live() {
		return nil
	}
	if !k.checkPtr(p, "LoadVec") || !k.checkVec("LoadVec", p, n) {
		return k.poisonValues(p.elem, n)
	}
	out := make([]Value, n)
	o, ok := k.memOptions("LoadVec", p, opts, false)
	if !ok {
		for i := range out {
			out[i] = k.poison(p.elem)
		}
		return out
	}
	vec := make(ptx.Vec, n)
	for i := range out {
		r := k.reg(p.elem)
		vec[i] = r
		out[i] = Value{k: k, t: p.elem, op: r}
	}
	k.op("ld", o.quals(p.space, n), memType(p.elem), vec, p.addrOperand())
	return out
}

// StoreVec writes len(vals) consecutive elements with one vector access.
func (k *Kernel) StoreVec(p Ptr, vals []Value, opts ...MemOption) {
	if !k.live() {
		return
	}
	if !k.checkPtr(p, "StoreVec") || !k.checkVec("StoreVec", p, len(vals)) {
		return
	}
	vec := make(ptx.Vec, len(vals))
	for i, v := range vals {
		x, ok := k.val(v, p.elem, fmt.Sprintf("StoreVec element %d", i))
		if !ok {
			return
		}
		vec[i] = k.storeOperand(x)
	}
	o, ok := k.memOptions("StoreVec", p, opts, true)
	if !ok {
		return
	}
	k.emit(&ptx.Instr{Op: "st", Q: o.quals(p.space, len(vals)), Types: []ptx.Type{memType(p.elem)}, Args: []ptx.Operand{p.addrOperand(), vec}})
}

func (k *Kernel) checkVec(what string, p Ptr, n int) bool {
	if n != 2 && n != 4 {
		k.errorf("%s: vector length %d; PTX vectors have 2 or 4 elements", what, n)
		return false
	}
	if bits := n * memType(p.elem).Bits(); bits > 128 {
		k.errorf("%s: %d x %s is %d bits; vector accesses are at most 128 bits", what, n, p.elem, bits)
		return false
	}
	if p.off%int64(n*p.elem.Bytes()) != 0 {
		k.errorf("%s: constant offset %d is not aligned to the %d-byte vector", what, p.off, n*p.elem.Bytes())
		return false
	}
	return true
}

// MemOption qualifies a load, store, copy or atomic: a memory ordering (Order).
type MemOption interface{ mem(*memOpts) }

type memOpts struct {
	sem   string
	scope string
}

// Scope is a memory-consistency scope.
type Scope string

// The scopes.
const (
	CTA     Scope = "cta"
	Cluster Scope = "cluster"
	GPU     Scope = "gpu"
	System  Scope = "sys"
)

// Order is a memory ordering and its scope. The same orders qualify loads, stores, copies and
// atomics (a MemOption) and multimem operations (a MultimemOption).
type Order struct {
	sem   string
	scope Scope
}

func (o Order) mem(m *memOpts) {
	if o.sem == "weak" { // a plain access is weak
		m.sem, m.scope = "", ""
		return
	}
	m.sem, m.scope = o.sem, string(o.scope)
}

func (o Order) multimem(m *mmOpts) { m.sem, m.scope = o.sem, string(o.scope) }

// Relaxed makes the access .relaxed at scope s.
func Relaxed(s Scope) Order { return Order{"relaxed", s} }

// Acquire makes a load (or multimem.ld_reduce, or a fetching atomic) .acquire at scope s.
func Acquire(s Scope) Order { return Order{"acquire", s} }

// Release makes a store (or multimem.st and multimem.red, or an atomic) .release at scope s.
func Release(s Scope) Order { return Order{"release", s} }

// Weak makes the access .weak: what loads and stores are without an order; multimem
// operations are relaxed.sys unless given Weak or another order.
func Weak() Order { return Order{"weak", ""} }

// Volatile makes a load or store .volatile (not multimem).
func Volatile() Order { return Order{"volatile", ""} }

func (k *Kernel) memOptions(what string, p Ptr, opts []MemOption, store bool) (memOpts, bool) {
	var o memOpts
	for _, f := range opts {
		if f != nil {
			f.mem(&o)
		}
	}
	switch {
	case store && o.sem == "acquire":
		k.errorf("%s: a store cannot be Acquire (use Release)", what)
		return o, false
	case !store && o.sem == "release":
		k.errorf("%s: a load cannot be Release (use Acquire)", what)
		return o, false
	case o.scope != "" && o.scope != "cta" && o.scope != "cluster" && o.scope != "gpu" && o.scope != "sys":
		k.errorf("%s: unknown scope %q", what, o.scope)
		return o, false
	case o.sem != "" && p.space == ptx.SpaceLocal:
		k.errorf("%s: memory ordering does not apply to local memory", what)
		return o, false
	}
	return o, true
}

func (o memOpts) quals(space ptx.Space, vec int) []string {
	q := make([]string, 0, 4) // one allocation for all four
	if o.sem != "" {
		q = append(q, o.sem)
	}
	if o.scope != "" {
		q = append(q, o.scope)
	}
	if s := space.String(); s != "" {
		q = append(q, s)
	}
	if vec > 1 {
		q = append(q, vecQual(vec))
	}
	return q
}

// vecQual returns the vector qualifier "v<n>" without formatting for the common widths.
func vecQual(n int) string {
	switch n {
	case 2:
		return "v2"
	case 4:
		return "v4"
	case 8:
		return "v8"
	}
	return "v" + strconv.Itoa(n)
}

// The memory limits arrays are checked against.
const (
	// MaxStaticSharedBytes is the static shared memory of a block on every target (48 KiB;
	// ptxas refuses more; dynamic shared memory can be larger).
	MaxStaticSharedBytes = 48 << 10
	// MaxLocalBytes is the local memory of a thread (512 KiB, CUDA's limit).
	MaxLocalBytes = 512 << 10
	// MaxSharedBytes is the most shared memory, static and dynamic, a block has on any target
	// (227 KiB: sm_90 and sm_100; others have less). DynamicSharedTile refuses tiles that end
	// past it.
	MaxSharedBytes = 227 << 10
)

// SharedArray allocates n elements of static shared memory for the block (aligned to 16
// bytes) and returns a pointer to the first.
func (k *Kernel) SharedArray(elem Type, n int) Ptr {
	if !k.live() {
		return Ptr{}
	}
	return k.array("SharedArray", ptx.SpaceShared, "smem", elem, n)
}

// LocalArray allocates n elements of per-thread local memory and returns a pointer to the first.
func (k *Kernel) LocalArray(elem Type, n int) Ptr {
	if !k.live() {
		return Ptr{}
	}
	return k.array("LocalArray", ptx.SpaceLocal, "lmem", elem, n)
}

func (k *Kernel) array(what string, space ptx.Space, prefix string, elem Type, n int) Ptr {
	if !hasMem(elem) {
		k.errorf("%s: no memory type %s", what, typeName(elem))
		elem = U8
	}
	limit, per := int64(MaxLocalBytes), "per thread"
	if space == ptx.SpaceShared {
		limit, per = MaxStaticSharedBytes-k.smem, "of static shared memory per block (use DynamicShared for more)"
	}
	size := int64(memType(elem).Bytes())
	switch {
	case n <= 0:
		k.errorf("%s: size %d must be positive", what, n)
		n = 1
	case int64(n) > limit/size:
		k.errorf("%s: %d x %s is more than the %d bytes left %s", what, n, elem, limit, per)
		n = 1
	}
	if space == ptx.SpaceShared {
		k.smem += (int64(n)*size + 15) / 16 * 16
	}
	name := fmt.Sprintf("%s_%d", prefix, len(k.fn.Vars))
	k.fn.Vars = append(k.fn.Vars, &ptx.Var{Space: space, Name: name, Type: memType(elem), Array: n, Align: 16})
	d := k.reg(U64)
	k.op("mov", nil, ptx.U64, d, ptx.Sym(name))
	return Ptr{k: k, addr: Value{k: k, t: U64, op: d}, elem: elem, space: space, align: 16}
}

// Align returns the known alignment of the address in bytes (1 when unknown).
func (p Ptr) Align() int {
	a := int64(p.align)
	if a <= 0 {
		a = 1
	}
	return int(gcd(a, p.off))
}
