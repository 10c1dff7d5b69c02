package dsl

import (
	"fmt"
	"slices"

	"github.com/kgen-dev/kgen/ptx"
)

// MultimemOption qualifies a multimem operation: a memory ordering (Relaxed, Acquire for
// ld_reduce, Release for st and red, Weak; the default is Relaxed(System)) or an accumulator
// precision (AccF32, AccF16).
type MultimemOption interface{ multimem(*mmOpts) }

type mmOpts struct {
	sem, scope string
	acc        string
}

// Acc is an accumulator precision of multimem.ld_reduce.
type Acc string

func (a Acc) multimem(o *mmOpts) { o.acc = string(a) }

// AccF32 accumulates a multimem.ld_reduce of f16/bf16 in f32 (.acc::f32).
func AccF32() Acc { return "acc::f32" }

// AccF16 accumulates an fp8 multimem.ld_reduce in f16 (.acc::f16, sm_100a-class targets):
// each GPU's fp8 values are widened to f16 and summed in f16, and the sum is rounded back to
// the fp8 type. Without it an fp8 sum accumulates in the fp8 type itself (PTX allows both).
func AccF16() Acc { return "acc::f16" }

var mmOps = map[ReduceOp]string{Sum: "add", Min: "min", Max: "max", BitAnd: "and", BitOr: "or", BitXor: "xor"}

// multimemType maps an element type and vector length to the instruction's type and the
// number of registers: f16 and bf16 travel in pairs (f16x2, bf16x2); fp8 travels in packed
// 32-bit words only (E4M3x4, E5M2x4: a pointer to such words, see Ptr.As), each word one
// element of the operation.
func multimemType(elem Type) (Type, int, bool) {
	switch elem {
	case F16:
		return ptx.F16x2, 2, true
	case BF16:
		return ptx.BF16x2, 2, true
	case F32, F64, U32, I32, U64, I64, ptx.B32, ptx.B64, E4M3x4, E5M2x4:
		return elem, 1, true
	}
	return 0, 0, false
}

// fp8Word returns the packed 32-bit word type of an fp8 element type (E4M3 -> E4M3x4).
func fp8Word(elem Type) (Type, bool) {
	switch elem {
	case E4M3, E4M3x2:
		return E4M3x4, true
	case E5M2, E5M2x2:
		return E5M2x4, true
	}
	return 0, false
}

func (k *Kernel) multimem(what string, p Ptr, n int, opts []MultimemOption, store bool) (q []string, t Type, per int, ok bool) {
	if !k.checkPtr(p, what) {
		return nil, 0, 0, false
	}
	if k.target.SM() < 90 {
		k.errorf("%s: multimem needs sm_90 or later (target is %s)", what, k.target)
		return nil, 0, 0, false
	}
	if p.space != ptx.SpaceGlobal && p.space != ptx.SpaceGeneric {
		k.errorf("%s: multimem addresses are global (a multicast address), not %s", what, spaceName(p.space))
		return nil, 0, 0, false
	}
	t, per, ok = multimemType(p.elem)
	if w, fp8 := fp8Word(p.elem); !ok && fp8 {
		k.errorf("%s: fp8 multimem moves packed 32-bit words: view the %s buffer as %s words (p.As(%s), 4 elements per word)", what, p.elem, w, w)
		return nil, 0, 0, false
	}
	if !ok {
		k.errorf("%s: no multimem form for %s", what, p.elem)
		return nil, 0, 0, false
	}
	if (t == E4M3x4 || t == E5M2x4) && !hasSM100aMultimem(k.target) {
		k.errorf("%s: multimem on fp8 (%s) needs an sm_100a-class target (sm_100a, sm_101a, sm_103a, sm_110a, sm_120a, sm_121a; target is %s)", what, t, k.target)
		return nil, 0, 0, false
	}
	if n%per != 0 {
		k.errorf("%s: %d %s elements do not fill %s words", what, n, p.elem, t)
		return nil, 0, 0, false
	}
	words := n / per
	if t.IsInt() && words != 1 {
		k.errorf("%s: integer multimem operations take one element (no vectors)", what)
		return nil, 0, 0, false
	}
	if words != 1 && words != 2 && words != 4 || words*t.Bits() > 128 {
		k.errorf("%s: %d x %s is not a multimem vector (1, 2 or 4 words, at most 128 bits)", what, words, t)
		return nil, 0, 0, false
	}
	o := mmOpts{sem: "relaxed", scope: "sys"}
	for _, f := range opts {
		if f != nil {
			f.multimem(&o)
		}
	}
	switch {
	case o.sem == "volatile" || o.sem == "acq_rel":
		k.errorf("%s: multimem operations have no %s form (use Relaxed, Acquire, Release or Weak)", what, o.sem)
		return nil, 0, 0, false
	case store && o.sem == "acquire":
		k.errorf("%s: a multimem store or reduction cannot be Acquire (use Release)", what)
		return nil, 0, 0, false
	case !store && o.sem == "release":
		k.errorf("%s: multimem.ld_reduce cannot be Release (use Acquire)", what)
		return nil, 0, 0, false
	}
	if o.sem != "" {
		q = append(q, o.sem)
	}
	if o.scope != "" {
		q = append(q, o.scope)
	}
	q = append(q, "global")
	return q, t, per, true
}

func vecQ(words int) []string {
	if words > 1 {
		return []string{fmt.Sprintf("v%d", words)}
	}
	return nil
}

// MultimemLoadReduce loads n consecutive elements at the multicast address p from every GPU
// of the multicast group and returns their reduction by op (multimem.ld_reduce).
func (k *Kernel) MultimemLoadReduce(p Ptr, op ReduceOp, n int, opts ...MultimemOption) []Value {
	if !k.live() {
		return nil
	}
	defer k.hold()()
	q, t, per, ok := k.multimem("MultimemLoadReduce", p, n, opts, false)
	if !ok {
		return k.poisonValues(p.elem, n)
	}
	out := k.poisonValues(p.elem, n) // n is 1 to 16 here
	name, ok := mmOps[op]
	if !ok || (t.IsFloat() && op >= BitAnd) {
		k.errorf("MultimemLoadReduce: %v is not a multimem reduction of %s", op, p.elem)
		return out
	}
	var o mmOpts
	for _, f := range opts {
		if f != nil {
			f.multimem(&o)
		}
	}
	if o.acc != "" && op != Sum {
		k.errorf("MultimemLoadReduce: an accumulator precision (AccF32, AccF16) applies to Sum only")
		return out
	}
	fp8 := t == E4M3x4 || t == E5M2x4
	switch {
	case o.acc == "acc::f32" && t != ptx.F16x2 && t != ptx.BF16x2:
		k.errorf("MultimemLoadReduce: AccF32 applies to f16 and bf16 elements, not %s (fp8 takes AccF16)", p.elem)
		return out
	case o.acc == "acc::f16" && !fp8:
		k.errorf("MultimemLoadReduce: AccF16 applies to fp8 words (E4M3x4, E5M2x4), not %s", p.elem)
		return out
	}
	q = append(q, name)
	if o.acc != "" {
		q = append(q, o.acc)
	}
	q = append(q, vecQ(n/per)...)
	regs := make([]ptx.Operand, n/per)
	for i := range regs {
		regs[i] = k.reg(t)
	}
	var dst ptx.Operand = regs[0]
	if len(regs) > 1 {
		dst = ptx.Vec(regs)
	}
	k.emit(&ptx.Instr{Op: "multimem.ld_reduce", Q: q, Types: []ptx.Type{t}, Args: []ptx.Operand{dst, p.addrOperand()}})
	return k.unpackWords(regs, p.elem, per)
}

// hasSM100aMultimem reports whether t has the fp8 multimem forms (PTX 8.6, sm_100a class).
func hasSM100aMultimem(t ptx.Target) bool {
	return t.ArchSpecific() && slices.Contains([]int{100, 101, 103, 110, 120, 121}, t.SM())
}

// unpackWords splits packed words (f16x2) into elements.
func (k *Kernel) unpackWords(words []ptx.Operand, elem Type, per int) []Value {
	var out []Value
	for _, w := range words {
		if per == 1 {
			out = append(out, Value{k: k, t: elem, op: w})
			continue
		}
		lo, hi := k.reg(elem), k.reg(elem)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{ptx.Vec{lo, hi}, w}})
		out = append(out, Value{k: k, t: elem, op: lo}, Value{k: k, t: elem, op: hi})
	}
	return out
}

// packWords packs elements into words for multimem.st and multimem.red.
func (k *Kernel) packWords(vals []Value, elem, t Type, per int, what string) ([]ptx.Operand, bool) {
	var out []ptx.Operand
	for i := 0; i < len(vals); i += per {
		if per == 1 {
			v, ok := k.val(vals[i], elem, what)
			if !ok {
				return nil, false
			}
			src := k.operand(v)
			if im, isImm := src.(ptx.Imm); isImm {
				r := k.reg(t)
				k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{movType(t)}, Args: []ptx.Operand{r, im}})
				src = r
			}
			out = append(out, src)
			continue
		}
		a, ok1 := k.val(vals[i], elem, what)
		b, ok2 := k.val(vals[i+1], elem, what)
		if !ok1 || !ok2 {
			return nil, false
		}
		w := k.reg(t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{w, ptx.Vec{k.operand(a), k.operand(b)}}})
		out = append(out, w)
	}
	return out, true
}

// MultimemStore writes vals to consecutive elements at the multicast address p on every GPU
// of the group (multimem.st).
func (k *Kernel) MultimemStore(p Ptr, vals []Value, opts ...MultimemOption) {
	if !k.live() {
		return
	}
	defer k.hold()()
	q, t, per, ok := k.multimem("MultimemStore", p, len(vals), opts, true)
	if !ok {
		return
	}
	words, ok := k.packWords(vals, p.elem, t, per, "MultimemStore")
	if !ok {
		return
	}
	q = append(q, vecQ(len(words))...)
	var src ptx.Operand = words[0]
	if len(words) > 1 {
		src = ptx.Vec(words)
	}
	k.emit(&ptx.Instr{Op: "multimem.st", Q: q, Types: []ptx.Type{t}, Args: []ptx.Operand{p.addrOperand(), src}})
}

// MultimemReduce applies op with vals to consecutive elements at the multicast address p on
// every GPU of the group, atomically (multimem.red).
func (k *Kernel) MultimemReduce(p Ptr, op ReduceOp, vals []Value, opts ...MultimemOption) {
	if !k.live() {
		return
	}
	defer k.hold()()
	q, t, per, ok := k.multimem("MultimemReduce", p, len(vals), opts, true)
	if !ok {
		return
	}
	name, ok := mmOps[op]
	if !ok || (t.IsFloat() && op >= BitAnd) {
		k.errorf("MultimemReduce: %v is not a multimem reduction of %s", op, p.elem)
		return
	}
	words, ok := k.packWords(vals, p.elem, t, per, "MultimemReduce")
	if !ok {
		return
	}
	q = append(q, name)
	q = append(q, vecQ(len(words))...)
	var src ptx.Operand = words[0]
	if len(words) > 1 {
		src = ptx.Vec(words)
	}
	k.emit(&ptx.Instr{Op: "multimem.red", Q: q, Types: []ptx.Type{t}, Args: []ptx.Operand{p.addrOperand(), src}})
}
