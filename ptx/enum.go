package ptx

import (
	"slices"
	"sort"
	"sync"
)

// This file enumerates every instruction form the tables describe: the product of the
// slots (each absent or one of its values) and the type positions, kept where the rule's
// check accepts it, with operands generated from the rule's argument shapes. The oracle
// test assembles the result with ptxas; nothing here is a hand-written list.

// Well-known names the generated operands refer to. A module that holds generated forms
// must declare them (see formsModule in the tests): a .func with a return parameter
// formRet and a parameter formParam (both .b8 arrays of 256 bytes aligned to 16), a .const
// array formConst, a label formLabel and a callable .func formCallee.
const (
	formParam  = "fparam"
	formRet    = "fret"
	formConst  = "cvar"
	formLabel  = "Lform"
	formCallee = "fcallee"
)

var (
	allFormsOnce sync.Once
	allFormsList []*Instr
)

// enumDropped, when set (by tests), hears of generated forms Verify refuses: a table whose
// check accepts qualifiers and types but whose operand shapes cannot be met.
var enumDropped func(in *Instr, msg string)

// allForms returns every instruction form in the tables, opcode by opcode in sorted order.
// The list is built once; callers must not modify it.
func allForms() []*Instr {
	allFormsOnce.Do(func() { allFormsList = buildForms() })
	return allFormsList
}

func buildForms() []*Instr {
	ops := make([]string, 0, len(rules))
	for op := range rules {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var out []*Instr
	for _, op := range ops {
		out = append(out, ruleForms(op, rules[op])...)
	}
	return out
}

// ruleForms enumerates the forms of one opcode.
func ruleForms(op string, r *rule) []*Instr {
	var out []*Instr
	immSeen := map[immKey]bool{}
	q := make([]string, 0, len(r.slots))
	ts := make([]Type, len(r.types))
	var types func(i int)
	emit := func() {
		in := &Instr{Op: op, Q: slices.Clone(q), Types: slices.Clone(ts)}
		if len(in.Q) == 0 {
			in.Q = nil
		}
		if len(in.Types) == 0 {
			in.Types = nil
		}
		if r.check != nil && r.check(in) != "" {
			return
		}
		if r.extraOnly {
			return
		}
		shapes := r.argShapes(in)
		if shapes == nil {
			shapes = [][]arg{nil}
		}
		for _, sh := range shapes {
			for _, args := range genArgs(in, sh) {
				f := &Instr{Op: in.Op, Q: in.Q, Types: in.Types, Args: args}
				if msg := r.verify(f); msg == "" {
					out = append(out, f)
				} else if enumDropped != nil {
					enumDropped(f, msg)
				}
			}
			// One form per shape and type list also takes an immediate source operand.
			k := immKey{len(sh), typesKey(in.Types)}
			if immSeen[k] {
				continue
			}
			for _, args := range genArgs(in, sh) {
				if i := immSource(sh); i >= 0 {
					args[i] = immFor(sh[i].typ)
					if m := sh[i].mult; m > 0 {
						args[i] = IntImm(immType(sh[i].typ), m)
					}
					f := &Instr{Op: in.Op, Q: in.Q, Types: in.Types, Args: args}
					if r.verify(f) == "" {
						out = append(out, f)
						immSeen[k] = true
					}
				}
				break
			}
		}
	}
	types = func(i int) {
		if i == len(r.types) {
			emit()
			return
		}
		for _, t := range r.types[i] {
			ts[i] = t
			types(i + 1)
		}
	}
	vals := make([]string, len(r.slots))
	var slotsRec func(i int)
	slotsRec = func(i int) {
		if i == len(r.slots) {
			if r.typesOptional {
				full := ts
				ts = ts[:0]
				emit() // the form without type suffixes
				ts = full
			}
			types(0)
			return
		}
		s := r.slots[i]
		if !s.required {
			vals[i] = ""
			if r.exclCheck(vals, i+1, i) == "" {
				slotsRec(i + 1)
			}
		}
		for _, v := range s.values {
			vals[i] = v
			if r.exclCheck(vals, i+1, i) != "" {
				continue
			}
			q = append(q, v)
			slotsRec(i + 1)
			q = q[:len(q)-1]
		}
		vals[i] = ""
	}
	slotsRec(0)
	if r.extra != nil {
		for _, f := range r.extra() {
			if r.verify(f) == "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// genArgs builds operand lists for one shape: registers of the right types, and one list
// per legal value of each immediate that has a short list of legal values.
func genArgs(in *Instr, shape []arg) [][]Operand {
	var n [numTypes]int
	wide := false
	reg := func(t Type) Reg {
		switch {
		case t == NoType:
			t = B32
		case t == E4M3 || t == E5M2:
			// Vectors of single fp8 values (multimem .v4.e4m3) take .b8 registers.
			t = B8
		case t == B8 && !wide:
			// mov packs .b8 registers: mov.b32 %r0, {%rb0, %rb1, %rb2, %rb3}.
		default:
			t = t.RegType()
		}
		r := Reg{Type: t, N: n[t]}
		n[t]++
		return r
	}
	lists := [][]Operand{make([]Operand, 0, len(shape))}
	for _, a := range shape {
		wide = a.wide
		var choices []Operand
		switch a.kind {
		case argDst, argSrc, argReg:
			if a.vec > 0 {
				v := make(Vec, a.vec)
				for i := range v {
					v[i] = reg(a.typ)
				}
				choices = []Operand{v}
			} else {
				choices = []Operand{reg(a.typ)}
			}
		case argPair:
			choices = []Operand{Pair{A: reg(a.typ), B: reg(a.typ2)}}
		case argPred:
			p := reg(Pred)
			choices = []Operand{p, Not{P: p}}
		case argAddr:
			switch {
			case in.HasQ("param") && in.Op == "st":
				choices = []Operand{Addr{Base: Sym(formRet)}}
			case in.HasQ("param"):
				choices = []Operand{Addr{Base: Sym(formParam)}}
			case in.HasQ("const"):
				choices = []Operand{Addr{Base: Sym(formConst)}}
			default:
				choices = []Operand{Addr{Base: reg(B64)}}
			}
		case argSink:
			choices = []Operand{Sink{}}
		case argLabel:
			choices = []Operand{Sym(formLabel)}
		case argSym:
			choices = []Operand{Sym(formCallee)}
		case argImm:
			switch {
			case a.imms == nil && a.typ.IsFloat():
				choices = []Operand{FloatImm(a.typ, 0.5)}
			case a.imms == nil:
				choices = []Operand{IntImm(immType(a.typ), 1)}
			default:
				for _, v := range a.imms {
					choices = append(choices, IntImm(immType(a.typ), v))
				}
			}
		default:
			choices = []Operand{reg(a.typ)}
		}
		var next [][]Operand
		for _, l := range lists {
			for _, c := range choices {
				next = append(next, append(slices.Clone(l), c))
			}
		}
		lists = next
	}
	return lists
}

func immType(t Type) Type {
	if t == NoType {
		return U32
	}
	return t
}

type immKey struct {
	nargs int
	types string
}

func typesKey(ts []Type) string {
	b := make([]byte, len(ts))
	for i, t := range ts {
		b[i] = byte(t)
	}
	return string(b)
}

// immSource returns the index of the last scalar source operand that may be an immediate
// (integer, .f32 or .f64), or -1.
func immSource(sh []arg) int {
	for i := len(sh) - 1; i >= 0; i-- {
		a := sh[i]
		if a.kind == argSrc && a.vec == 0 && immFor(a.typ) != nil {
			return i
		}
	}
	return -1
}

// immFor returns an immediate of type t, or nil when PTX has no immediate of t.
func immFor(t Type) Operand {
	switch {
	case t == F32 || t == F64:
		return FloatImm(t, 1)
	case t.IsInt() || t.Kind() == KindBits && t != B128:
		return IntImm(t, 1)
	}
	return nil
}
