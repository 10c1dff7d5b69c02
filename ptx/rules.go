package ptx

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// slot is one position in an opcode's qualifier sequence. Qualifiers must appear in slot
// order; at most one value per slot.
type slot struct {
	name     string
	values   []string
	required bool
}

// argKind says what an operand position accepts.
type argKind uint8

const (
	argDst    argKind = iota // a register, a vector of registers, or "_"
	argSrc                   // a register, an immediate or a special register
	argAddr                  // a memory operand [base+off]
	argLabel                 // a label (Sym)
	argSym                   // a function or variable name (Sym)
	argAny                   // anything (checked by the rule's check function)
	argImm                   // an integer immediate (one of imms when set)
	argPair                  // a destination pair a|b: typ for a, typ2 for b
	argPred                  // a predicate source, possibly negated (!p), or an immediate 0/1
	argReg                   // a register (no immediate)
	argSink                  // the sink "_"
	argTensor                // a tensor operand [tensorMap, {coords}]: vec coordinates of typ
)

// arg is the expected shape and type of one operand.
type arg struct {
	kind argKind
	typ  Type    // NoType: any type
	vec  int     // >0: a vector operand of vec elements (1: a one-element vector {r})
	wide bool    // a register at least as wide as typ is accepted (sub-word ld/st/cvt)
	typ2 Type    // argPair: the second destination's type
	imms []int64 // argImm: the legal values; nil for any
	mult int64   // argSrc: an immediate must be a positive multiple of mult
	lim  int64   // argSrc, argImm: when >0, an immediate must lie in [0, lim]
	// exact: the register must be declared with typ itself (ptxas refuses the other
	// registers Compatible allows, as mma does for its .b32 multiplicands).
	exact bool
}

// rule is the table entry of one opcode.
type rule struct {
	slots []slot
	// types lists the legal type suffixes per suffix position; nil for an untyped opcode.
	types [][]Type
	// args returns the expected operands of a well-formed instruction; nil means any.
	args func(in *Instr) []arg
	// shapes, when set, returns every legal operand list of the form (optional operands);
	// it takes precedence over args.
	shapes func(in *Instr) [][]arg
	// check applies the rules that tie qualifiers, types and operands together; it returns
	// "" or what is wrong. It looks at Q and Types only (Args may be nil).
	check func(in *Instr) string
	// need returns the version/target requirements of the form.
	need func(in *Instr) []need
	// excl lists qualifier combinations the ISA forbids; the enumeration prunes with them as
	// soon as both slots are decided.
	excl []excl
	// extra returns forms the slot×type enumeration cannot reach (operands that are not
	// registers, such as special registers); the oracle assembles them too.
	extra func() []*Instr
	// extraOnly says the enumeration takes the rule's forms from extra only (operand lists
	// the shapes do not describe, such as call's).
	extraOnly bool
	// typesOptional says a form may also have no type suffix at all (ldmatrix names its
	// packed formats with qualifiers instead); check decides which forms need one.
	typesOptional bool

	cexclOnce sync.Once // kernels are built from several goroutines at once
	cexcl     []compiledExcl
}

// excl forbids the combination of two slot conditions. A condition is "slot" (the slot has a
// value), "-slot" (it has none) or "slot=v1|v2" (it has one of the values).
type excl struct {
	a, b string
	why  string
}

// x builds an excl.
func x(a, b, why string) excl { return excl{a, b, why} }

// exclAll forbids a with each of bs, with one reason.
func exclAll(a, why string, bs ...string) []excl {
	out := make([]excl, len(bs))
	for i, b := range bs {
		out[i] = excl{a, b, why}
	}
	return out
}

// cond is a parsed excl condition.
type cond struct {
	slot   int
	absent bool
	values []string // nil: any value
}

func (r *rule) parseCond(c string) cond {
	var out cond
	if strings.HasPrefix(c, "-") {
		out.absent = true
		c = c[1:]
	}
	name, vals, _ := strings.Cut(c, "=")
	out.slot = -1
	for i, s := range r.slots {
		if s.name == name {
			out.slot = i
		}
	}
	if out.slot < 0 {
		panic("ptx: rule has no slot " + name)
	}
	if vals != "" {
		out.values = strings.Split(vals, "|")
	}
	return out
}

// holds reports whether the condition holds for the slot's value v ("" when absent).
func (c cond) holds(v string) bool {
	switch {
	case c.absent:
		return v == ""
	case v == "":
		return false
	case c.values == nil:
		return true
	}
	return slices.Contains(c.values, v)
}

// compiledExcl is an excl with parsed conditions.
type compiledExcl struct {
	a, b cond
	why  string
}

// compiled returns r's excls parsed (once: safe for concurrent use).
func (r *rule) compiled() []compiledExcl {
	r.cexclOnce.Do(func() {
		for _, e := range r.excl {
			r.cexcl = append(r.cexcl, compiledExcl{r.parseCond(e.a), r.parseCond(e.b), e.why})
		}
	})
	return r.cexcl
}

// slotValues sets vals (len(r.slots) empty strings) to the value of each slot ("" when
// absent) of an instruction whose qualifiers are in order, and returns it.
func (r *rule) slotValues(vals []string, in *Instr) []string {
	si := 0
	for _, q := range in.Q {
		for si < len(r.slots) {
			s := r.slots[si]
			si++
			if slices.Contains(s.values, q) {
				vals[si-1] = q
				break
			}
		}
	}
	return vals
}

// exclCheck returns the reason of the first forbidden combination in vals, considering
// only constraints whose slots are all below upto; "" when none.
func (r *rule) exclCheck(vals []string, upto int, newest int) string {
	for _, e := range r.compiled() {
		if e.a.slot >= upto || e.b.slot >= upto {
			continue
		}
		if newest >= 0 && e.a.slot != newest && e.b.slot != newest {
			continue
		}
		if e.a.holds(vals[e.a.slot]) && e.b.holds(vals[e.b.slot]) {
			return e.why
		}
	}
	return ""
}

var rules = map[string]*rule{}

func (r *rule) needs(in *Instr) []need {
	if r.need == nil {
		return nil
	}
	return r.need(in)
}

// q returns the value the instruction has in the named slot, or "".
func (r *rule) q(in *Instr, name string) string {
	// Walk the qualifiers in slot order, as verify does, so that slots sharing values (a
	// destination and a source space) each get their own.
	si := 0
	for _, x := range in.Q {
		for si < len(r.slots) {
			s := &r.slots[si]
			si++
			if slices.Contains(s.values, x) {
				if s.name == name {
					return x
				}
				break
			}
		}
	}
	return ""
}

func (r *rule) verify(in *Instr) string {
	for _, q := range in.Q {
		if !r.knows(q) {
			return fmt.Sprintf("%s does not take qualifier .%s", in.Op, q)
		}
	}
	// Qualifiers, in slot order.
	si := 0
	for _, q := range in.Q {
		found := false
		for si < len(r.slots) {
			s := r.slots[si]
			si++
			if slices.Contains(s.values, q) {
				found = true
				break
			}
			if s.required {
				return fmt.Sprintf("missing .%s qualifier (one of %s) before .%s", s.name, dotted(s.values), q)
			}
		}
		if !found {
			if r.knows(q) {
				return fmt.Sprintf("qualifier .%s is out of order or repeated", q)
			}
			return fmt.Sprintf("%s does not take qualifier .%s", in.Op, q)
		}
	}
	for ; si < len(r.slots); si++ {
		if r.slots[si].required {
			return fmt.Sprintf("missing .%s qualifier (one of %s)", r.slots[si].name, dotted(r.slots[si].values))
		}
	}
	if len(r.excl) > 0 {
		var buf [16]string // most rules have fewer slots: no allocation
		var vals []string
		if len(r.slots) <= len(buf) {
			vals = buf[:len(r.slots)]
		} else {
			vals = make([]string, len(r.slots))
		}
		if msg := r.exclCheck(r.slotValues(vals, in), len(r.slots), -1); msg != "" {
			return msg
		}
	}
	// Types.
	if len(in.Types) != len(r.types) && !(r.typesOptional && len(in.Types) == 0) {
		if len(r.types) == 0 {
			return fmt.Sprintf("%s takes no type suffix", in.Op)
		}
		return fmt.Sprintf("%s takes %d type suffix(es), got %d", in.Op, len(r.types), len(in.Types))
	}
	for i, t := range in.Types {
		if !slices.Contains(r.types[i], t) {
			return fmt.Sprintf("type .%s is not allowed here (allowed: %s)", t, dottedTypes(r.types[i]))
		}
	}
	if r.check != nil {
		if msg := r.check(in); msg != "" {
			return msg
		}
	}
	return r.verifyArgs(in)
}

// argShapes returns the legal operand lists of the form; nil when any operands go.
func (r *rule) argShapes(in *Instr) [][]arg {
	switch {
	case r.shapes != nil:
		return r.shapes(in)
	case r.args != nil:
		return [][]arg{r.args(in)}
	}
	return nil
}

func (r *rule) verifyArgs(in *Instr) string {
	if r.shapes == nil && r.args == nil {
		return ""
	}
	var shapes [][]arg
	var single [1][]arg
	if r.shapes != nil {
		shapes = r.shapes(in)
	} else {
		single[0] = r.args(in) // no slice of slices to allocate for the common case
		shapes = single[:]
	}
	first, firstAt := "", -1
	var counts []int
	for _, want := range shapes {
		if len(in.Args) != len(want) {
			if !slices.Contains(counts, len(want)) {
				counts = append(counts, len(want))
			}
			continue
		}
		msg, at := "", 0
		for i, w := range want {
			if m := checkArg(in.Args[i], w); m != "" {
				msg, at = fmt.Sprintf("operand %d: %s", i+1, m), 2*i
				if strings.Contains(m, "not compatible") {
					at++ // the operand has the right shape, only its type is wrong
				}
				break
			}
		}
		if msg == "" {
			return ""
		}
		// Report the shape that matched longest (the closest one).
		if at > firstAt {
			first, firstAt = msg, at
		}
	}
	if first != "" {
		return first
	}
	if len(counts) == 1 {
		return fmt.Sprintf("takes %d operands, got %d", counts[0], len(in.Args))
	}
	slices.Sort(counts)
	cs := make([]string, len(counts))
	for i, c := range counts {
		cs[i] = itoa(c)
	}
	return fmt.Sprintf("takes %s operands, got %d", strings.Join(cs, " or "), len(in.Args))
}

func (r *rule) knows(q string) bool {
	for _, s := range r.slots {
		if slices.Contains(s.values, q) {
			return true
		}
	}
	return false
}

func checkArg(o Operand, w arg) string {
	if w.vec > 0 && w.kind != argTensor {
		v, ok := o.(Vec)
		if !ok {
			return fmt.Sprintf("want a vector of %d", w.vec)
		}
		if len(v) != w.vec {
			return fmt.Sprintf("want a vector of %d, got %d elements", w.vec, len(v))
		}
		e := w
		e.vec = 0
		for _, x := range v {
			if msg := checkArg(x, e); msg != "" {
				return msg
			}
		}
		return ""
	}
	switch w.kind {
	case argPair:
		p, ok := o.(Pair)
		if !ok {
			return fmt.Sprintf("want a destination pair a|b, got %s", describe(o))
		}
		if msg := checkArg(p.A, arg{kind: argDst, typ: w.typ}); msg != "" {
			return msg
		}
		return checkArg(p.B, arg{kind: argDst, typ: w.typ2})
	case argPred:
		switch o := o.(type) {
		case Not:
			return checkRegType(o.P, arg{typ: Pred})
		case Reg:
			return checkRegType(o, arg{typ: Pred})
		case Imm:
			return ""
		}
		return fmt.Sprintf("want a predicate, got %s", describe(o))
	case argReg:
		if r, ok := o.(Reg); ok {
			return checkRegType(r, w)
		}
		return fmt.Sprintf("want a register of .%s, got %s", w.typ, describe(o))
	case argSink:
		if _, ok := o.(Sink); !ok {
			return fmt.Sprintf("must be the sink _, got %s", describe(o))
		}
		return ""
	case argImm:
		im, ok := o.(Imm)
		if !ok {
			return fmt.Sprintf("want an integer immediate, got %s", describe(o))
		}
		if w.imms != nil && !slices.Contains(w.imms, int64(im.Bits)) {
			vs := make([]string, len(w.imms))
			for i, v := range w.imms {
				vs[i] = itoa(int(v))
			}
			return fmt.Sprintf("immediate %s is not one of %s", FormatImm(im), strings.Join(vs, ", "))
		}
		if v := int64(im.Bits); w.lim > 0 && (v < 0 || v > w.lim) {
			return fmt.Sprintf("immediate %s must lie in [0, %d]", FormatImm(im), w.lim)
		}
		return ""
	case argDst:
		switch o := o.(type) {
		case Reg:
			return checkRegType(o, w)
		case Sink:
			return ""
		}
		return fmt.Sprintf("destination must be a register, got %s", describe(o))
	case argSrc:
		switch o := o.(type) {
		case Reg:
			return checkRegType(o, w)
		case Imm:
			if w.typ == Pred && o.Type != Pred {
				return "a predicate operand cannot be an immediate"
			}
			if msg := checkImmKind(o, w.typ); msg != "" {
				return msg
			}
			if v := int64(o.Bits); w.mult > 0 && (v <= 0 || v%w.mult != 0) {
				return fmt.Sprintf("immediate %s must be a positive multiple of %d", FormatImm(o), w.mult)
			}
			if v := int64(o.Bits); w.lim > 0 && (v < 0 || v > w.lim) {
				return fmt.Sprintf("immediate %s must lie in [0, %d]", FormatImm(o), w.lim)
			}
			return ""
		case Special:
			st, ok := SpecialType(o)
			if !ok {
				return fmt.Sprintf("unknown special register %s", string(o))
			}
			if w.typ != NoType && !Compatible(w.typ, st) {
				return fmt.Sprintf("%s is .%s, not compatible with .%s", string(o), st, w.typ)
			}
			return ""
		case Sym:
			// The address of a variable (mov.u64 %rd1, smem).
			if w.typ == NoType || w.typ.Bits() == 64 || w.typ.Bits() == 32 {
				return ""
			}
		}
		return fmt.Sprintf("want a register or immediate of .%s, got %s", w.typ, describe(o))
	case argAddr:
		a, ok := o.(Addr)
		if !ok {
			return fmt.Sprintf("want a memory operand [addr], got %s", describe(o))
		}
		switch b := a.Base.(type) {
		case nil, Sym:
		case Reg:
			if b.Type.Bits() != 64 || b.Type.Kind() == KindFloat {
				return fmt.Sprintf("address register %s must be a 64-bit integer", RegName(b))
			}
		default:
			return fmt.Sprintf("bad address base %s", describe(a.Base))
		}
		return ""
	case argTensor:
		ta, ok := o.(TensorAddr)
		if !ok {
			return fmt.Sprintf("want a tensor operand [tensorMap, {coordinates}], got %s", describe(o))
		}
		switch m := ta.Map.(type) {
		case Reg:
			if m.Type.Bits() != 64 || m.Type.Kind() == KindFloat {
				return fmt.Sprintf("tensor map register %s must be a 64-bit integer", RegName(m))
			}
		case Sym:
			// ptxas: "State space mismatch between instruction and address".
			return fmt.Sprintf("the tensor map must be a generic address in a register (mov.u64 %%rd, %s; cvta.param.u64 %%rd, %%rd), not the name", m)
		default:
			return fmt.Sprintf("the tensor map must be a 64-bit register holding its generic address, got %s", describe(ta.Map))
		}
		if len(ta.Coords) != w.vec {
			return fmt.Sprintf("want %d tensor coordinates, got %d", w.vec, len(ta.Coords))
		}
		for _, c := range ta.Coords {
			if msg := checkArg(c, arg{kind: argReg, typ: w.typ}); msg != "" {
				return "tensor coordinate: " + msg
			}
		}
		return ""
	case argLabel, argSym:
		if _, ok := o.(Sym); !ok {
			return fmt.Sprintf("want a name, got %s", describe(o))
		}
		return ""
	}
	return ""
}

func checkRegType(r Reg, w arg) string {
	if w.typ == NoType {
		return ""
	}
	if w.exact && r.Type != w.typ {
		return fmt.Sprintf("register %s is .%s; want a .%s register", RegName(r), r.Type, w.typ)
	}
	if w.wide && r.Type.Bits() > w.typ.Bits() && (r.Type.Kind() == w.typ.Kind() || r.Type.Kind() == KindBits || w.typ.Kind() == KindBits) && r.Type.Kind() != KindPred {
		return ""
	}
	if !Compatible(w.typ, r.Type) {
		return fmt.Sprintf("register %s is .%s, not compatible with .%s", RegName(r), r.Type, w.typ)
	}
	return ""
}

// checkImmKind checks a float immediate (0f, 0d or decimal: an Imm of F32 or F64) against
// an integer operand and an integer one against a float operand, as ptxas does: an .f32 or
// .f64 operand takes a float of either width (rounded to it), an integer operand none, a
// .bN operand one of its own width (0f for .b32; 0d or decimal for .b64), and an integer
// immediate is no float operand's ("mov.f32 %f1, 1" and "add.s32 %r1, %r2, 1.5" are
// "Arguments mismatch" there; the emulator read the first as the bits 1, the second as 1.5's).
// An operand of another float type (.f16, .bf16, .f16x2, .e4m3 ...) takes no immediate.
func checkImmKind(im Imm, t Type) string {
	float := im.Type == F32 || im.Type == F64
	switch {
	case t == F32 || t == F64:
		if !float {
			return fmt.Sprintf("integer immediate %s for a .%s operand (write a float: 1.0, 0f3F800000)", FormatImm(im), t)
		}
	case t.Kind() == KindFloat: // .f16, .bf16, packed and narrower floats
		return fmt.Sprintf("immediate %s for a .%s operand (ptxas takes none: pass a register)", FormatImm(im), t)
	case !float:
	case t.IsInt() || t == Pred || t.Kind() == KindBits && t.Bits() != im.Type.Bits():
		return fmt.Sprintf("float immediate %s for a .%s operand (an integer operand takes an integer; a .bN operand a float of N bits: 0f for .b32, 0d for .b64)", FormatImm(im), t)
	}
	return ""
}

func describe(o Operand) string {
	switch o := o.(type) {
	case Reg:
		return "register " + RegName(o)
	case Imm:
		return "immediate " + FormatImm(o)
	case Special:
		return "special register " + string(o)
	case Sym:
		return "name " + string(o)
	case Addr:
		return "memory operand"
	case Vec:
		return fmt.Sprintf("vector of %d", len(o))
	case TensorAddr:
		return "tensor operand"
	case Sink:
		return "_"
	case Pair:
		return "pair " + describe(o.A) + "|" + describe(o.B)
	case Not:
		return "negated predicate !" + RegName(o.P)
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", o)
}

func dotted(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "." + v
	}
	return strings.Join(out, " ")
}

func dottedTypes(ts []Type) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = "." + t.String()
	}
	return strings.Join(out, " ")
}

// same returns n operands of the instruction's type: the destination, then sources.
func same(n int) func(in *Instr) []arg {
	return func(in *Instr) []arg { return sameArgs(in.Type(), n) }
}

// specialTypes maps special registers to their types.
var specialTypes = map[string]Type{}

func init() {
	for _, d := range []string{"x", "y", "z"} {
		for _, s := range []string{"tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"} {
			specialTypes["%"+s+"."+d] = U32
		}
	}
	for _, s := range []string{"laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid", "cluster_ctarank", "cluster_nctarank",
		"lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "dynamic_smem_size", "total_smem_size"} {
		specialTypes["%"+s] = U32
	}
	for _, s := range []string{"clock64", "globaltimer"} {
		specialTypes["%"+s] = U64
	}
	specialTypes["%is_explicit_cluster"] = Pred
}

// SpecialType returns the type of a special register, and whether it is known.
func SpecialType(s Special) (Type, bool) {
	t, ok := specialTypes[string(s)]
	return t, ok
}
