package dsl

import (
	"github.com/kgen-dev/kgen/ptx"
)

// AtomOp is a read-modify-write operation for atomics and reductions.
type AtomOp string

// The atomic operations.
const (
	AtomAdd  AtomOp = "add"
	AtomMin  AtomOp = "min"
	AtomMax  AtomOp = "max"
	AtomInc  AtomOp = "inc" // (old >= v) ? 0 : old+1, u32
	AtomDec  AtomOp = "dec" // (old == 0 || old > v) ? v : old-1, u32
	AtomAnd  AtomOp = "and"
	AtomOr   AtomOp = "or"
	AtomXor  AtomOp = "xor"
	AtomExch AtomOp = "exch"
)

// AcqRel makes an atomic .acq_rel at scope s.
func AcqRel(s Scope) Order { return Order{"acq_rel", s} }

// atomType returns the type suffix of an atomic on t, or "" with the reason.
func atomType(op AtomOp, t Type) (Type, string) {
	switch op {
	case AtomAnd, AtomOr, AtomXor, AtomExch, "cas":
		if t.Bits() == 32 || t.Bits() == 64 {
			if op == AtomExch || op == "cas" {
				if t.Bits() == 16 {
					return ptx.B16, ""
				}
			}
			return t.BitType(), ""
		}
		if (op == AtomExch || op == "cas") && t.Bits() == 16 {
			return ptx.B16, ""
		}
		return 0, "bitwise atomics, exch and cas take 32- or 64-bit values"
	case AtomInc, AtomDec:
		if t == U32 {
			return t, ""
		}
		return 0, "inc and dec take u32"
	case AtomAdd:
		switch t {
		case U32, I32, U64, F32, F64, F16, BF16, F16x2, BF16x2:
			return t, ""
		case I64:
			return U64, "" // two's complement: add.u64 is add.s64
		}
		return 0, "add takes u32, s32, u64, s64, f32, f64, f16, bf16, f16x2, bf16x2"
	case AtomMin, AtomMax:
		switch t {
		case U32, I32, U64, I64:
			return t, ""
		}
		return 0, "min and max take 32- and 64-bit integers"
	}
	return 0, "unknown atomic operation " + string(op)
}

func (k *Kernel) atomic(what string, op AtomOp, p Ptr, vals []any, fetch bool, opts []MemOption) Value {
	if !k.checkPtr(p, what) {
		return k.poison(p.elem)
	}
	if p.space != ptx.SpaceGlobal && p.space != ptx.SpaceShared && p.space != ptx.SpaceGeneric {
		k.errorf("%s: atomics apply to global or shared memory, not %s", what, spaceName(p.space))
		return k.poison(p.elem)
	}
	t, why := atomType(op, p.elem)
	if why != "" {
		k.errorf("%s: %s on %s: %s", what, op, p.elem, why)
		return k.poison(p.elem)
	}
	var o memOpts
	for _, f := range opts {
		if f != nil {
			f.mem(&o)
		}
	}
	if !fetch && op == AtomExch {
		k.errorf("%s: exch has no reduction form (use Atomic)", what)
		return k.poison(p.elem)
	}
	if o.sem == "volatile" || (!fetch && (o.sem == "acquire" || o.sem == "acq_rel")) {
		k.errorf("%s: %s semantics do not apply (use Relaxed%s)", what, o.sem, map[bool]string{true: ", Acquire, Release or AcqRel", false: " or Release"}[fetch])
		return k.poison(p.elem)
	}
	args := []ptx.Operand{p.addrOperand()}
	for _, x := range vals {
		v, ok := k.val(x, p.elem, what)
		if !ok {
			return k.poison(p.elem)
		}
		src := k.operand(v)
		if im, isImm := src.(ptx.Imm); isImm && t.Kind() == ptx.KindBits {
			im.Type = t
			src = im
		}
		args = append(args, src)
	}
	q := o.quals(p.space, 0)
	name := string(op)
	if p.elem == F16 && op == AtomAdd {
		q = append(q, name, "noftz")
	} else {
		q = append(q, name)
	}
	if !fetch {
		k.emit(&ptx.Instr{Op: "red", Q: q, Types: []ptx.Type{t}, Args: args})
		return Value{}
	}
	d := k.reg(p.elem)
	k.emit(&ptx.Instr{Op: "atom", Q: q, Types: []ptx.Type{t}, Args: append([]ptx.Operand{d}, args...)})
	return Value{k: k, t: p.elem, op: d}
}

// Atomic applies op with v to *p atomically and returns the old value (atom). Options set
// the memory semantics (Relaxed, Acquire, Release, AcqRel at a scope; default relaxed.gpu).
func (k *Kernel) Atomic(op AtomOp, p Ptr, v any, opts ...MemOption) Value {
	if !k.live() {
		return Value{}
	}
	return k.atomic("Atomic", op, p, []any{v}, true, opts)
}

// AtomicCAS compares *p with cmp and, if equal, stores v; it returns the old value.
func (k *Kernel) AtomicCAS(p Ptr, cmp, v any, opts ...MemOption) Value {
	if !k.live() {
		return Value{}
	}
	return k.atomic("AtomicCAS", "cas", p, []any{cmp, v}, true, opts)
}

// Reduce applies op with v to *p atomically without returning the old value (red).
func (k *Kernel) Reduce(op AtomOp, p Ptr, v any, opts ...MemOption) {
	if !k.live() {
		return
	}
	k.atomic("Reduce", op, p, []any{v}, false, opts)
}

// FenceSem is the ordering of a fence.
type FenceSem string

// The fence orderings.
const (
	FenceSC     FenceSem = "sc"
	FenceAcqRel FenceSem = "acq_rel"
)

// Fence orders this thread's memory accesses at scope s (fence.sc or fence.acq_rel).
func (k *Kernel) Fence(sem FenceSem, s Scope) {
	if !k.live() {
		return
	}
	if sem != FenceSC && sem != FenceAcqRel {
		k.errorf("Fence: unknown ordering %q (FenceSC or FenceAcqRel)", sem)
		return
	}
	if s != CTA && s != Cluster && s != GPU && s != System {
		k.errorf("Fence: unknown scope %q", s)
		return
	}
	k.emit(&ptx.Instr{Op: "fence", Q: []string{string(sem), string(s)}})
}

// FenceProxyAlias orders accesses made through different virtual aliases of the same memory
// (a multicast address and its unicast copy): emit it after a multimem.red on a multicast
// flag and before polling the unicast flag.
func (k *Kernel) FenceProxyAlias() {
	if !k.live() {
		return
	}
	k.emit(&ptx.Instr{Op: "fence.proxy", Q: []string{"alias"}})
}

// Cmp is a comparison for spin-waits.
type Cmp string

// The comparisons.
const (
	Eq Cmp = "eq"
	Ne Cmp = "ne"
	Lt Cmp = "lt"
	Le Cmp = "le"
	Gt Cmp = "gt"
	Ge Cmp = "ge"
	// GeWrap is Ge for counters that wrap (epochs, sequence numbers): x' >= x as serial
	// numbers, i.e. the difference v-x read as a signed integer of v's width is >= 0
	// (RFC 1982). It stays right across the wrap (target 0 after 0xffffffff) while the two
	// are less than 2^(bits-1) apart; unsigned Ge passes at once when the target wraps to 0.
	// For unsigned integer types only.
	GeWrap Cmp = "ge.wrap"
)

func (v Value) cmp(c Cmp, x any) Value {
	switch c {
	case Eq:
		return v.Eq(x)
	case Ne:
		return v.Ne(x)
	case Lt:
		return v.Lt(x)
	case Le:
		return v.Le(x)
	case Gt:
		return v.Gt(x)
	case Ge:
		return v.Ge(x)
	case GeWrap:
		signed := map[Type]Type{U32: I32, U64: I64}[v.t]
		return v.Sub(x).Bitcast(signed).Ge(v.k.Const(signed, 0))
	}
	if v.k != nil {
		v.k.errorf("unknown comparison %q", c)
	}
	return v.k.poison(Bool)
}

// WaitUntil spins until (*p c x) holds, reading *p with the load options (typically
// Acquire(System) or Acquire(GPU)); it returns the value that satisfied the test. Waits on
// a counter that may wrap (an epoch) compare with GeWrap, not Ge.
func (k *Kernel) WaitUntil(p Ptr, c Cmp, x any, opts ...MemOption) Value {
	if !k.live() {
		return Value{}
	}
	defer k.hold()()
	if !k.checkPtr(p, "WaitUntil") {
		return k.poison(p.elem)
	}
	if c != Eq && c != Ne && c != Lt && c != Le && c != Gt && c != Ge && c != GeWrap {
		k.errorf("WaitUntil: unknown comparison %q", c)
		return k.poison(p.elem)
	}
	if c == GeWrap && p.elem != U32 && p.elem != U64 {
		k.errorf("WaitUntil: GeWrap compares u32 or u64 counters, not %s", p.elem)
		return k.poison(p.elem)
	}
	got := k.Var(p.elem, 0)
	k.While(func() Value {
		k.Set(got, k.Load(p, opts...))
		return got.cmp(c, x).Not()
	}, func() {})
	return got
}
