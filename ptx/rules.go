package ptx

import (
	"fmt"
	"slices"
	"strings"
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
	argDst   argKind = iota // a register, a vector of registers, or "_"
	argSrc                  // a register, an immediate or a special register
	argAddr                 // a memory operand [base+off]
	argLabel                // a label (Sym)
	argSym                  // a function or variable name (Sym)
	argAny                  // anything (checked by the rule's check function)
)

// arg is the expected shape and type of one operand.
type arg struct {
	kind argKind
	typ  Type // NoType: any type
	vec  int  // >1: a vector operand of vec elements
	wide bool // a register at least as wide as typ is accepted (sub-word ld/st/cvt)
}

// rule is the table entry of one opcode.
type rule struct {
	slots []slot
	// types lists the legal type suffixes per suffix position; nil for an untyped opcode.
	types [][]Type
	// args returns the expected operands of a well-formed instruction; nil means any.
	args func(in *Instr) []arg
	// check applies the rules that tie qualifiers, types and operands together; it returns
	// "" or what is wrong.
	check func(in *Instr) string
	// need returns the version/target requirements of the form.
	need func(in *Instr) []need
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
	for _, s := range r.slots {
		if s.name != name {
			continue
		}
		for _, x := range in.Q {
			if slices.Contains(s.values, x) {
				return x
			}
		}
	}
	return ""
}

func (r *rule) verify(in *Instr) string {
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
	// Types.
	if len(in.Types) != len(r.types) {
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
	if r.args == nil {
		return ""
	}
	want := r.args(in)
	if len(in.Args) != len(want) {
		return fmt.Sprintf("takes %d operands, got %d", len(want), len(in.Args))
	}
	for i, w := range want {
		if msg := checkArg(in.Args[i], w); msg != "" {
			return fmt.Sprintf("operand %d: %s", i+1, msg)
		}
	}
	return ""
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
	if w.vec > 1 {
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
	if w.wide && r.Type.Bits() > w.typ.Bits() && (r.Type.Kind() == w.typ.Kind() || r.Type.Kind() == KindBits || w.typ.Kind() == KindBits) && r.Type.Kind() != KindPred {
		return ""
	}
	if !Compatible(w.typ, r.Type) {
		return fmt.Sprintf("register %s is .%s, not compatible with .%s", RegName(r), r.Type, w.typ)
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
	case Sink:
		return "_"
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
	return func(in *Instr) []arg {
		t := in.Type()
		out := make([]arg, n)
		out[0] = arg{kind: argDst, typ: t}
		for i := 1; i < n; i++ {
			out[i] = arg{kind: argSrc, typ: t}
		}
		return out
	}
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
