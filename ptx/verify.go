package ptx

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Error is a verification failure of one instruction or declaration.
type Error struct {
	Func  string // function name, "" at module scope
	Instr string // the instruction as printed, "" for declarations
	Pos   Pos    // the Go source that built it, when known
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ptx: ")
	if e.Pos.File != "" {
		fmt.Fprintf(&b, "%s:%d: ", e.Pos.File, e.Pos.Line)
	}
	if e.Func != "" {
		b.WriteString(e.Func + ": ")
	}
	if e.Instr != "" {
		b.WriteString("\"" + e.Instr + "\": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// need is a requirement an instruction form places on the module: a PTX ISA version and a
// target, with the rule's wording for the error.
type need struct {
	ptx  Version
	sm   int
	arch bool // needs an architecture-specific ("a") target
	why  string
}

var identRE = regexp.MustCompile(`^[A-Za-z_$%][A-Za-z0-9_$]*$`)

// ValidIdent reports whether s is a legal PTX identifier for functions, params and variables.
func ValidIdent(s string) bool { return identRE.MatchString(s) && !strings.HasPrefix(s, "%") }

// Verify checks the module against the instruction tables and the target; it returns every
// problem found, joined. A nil error means ptxas is expected to accept the module.
func Verify(m *Module) error {
	var errs []error
	add := func(e *Error) { errs = append(errs, e) }
	if !m.Target.Valid() {
		_, err := ParseTarget(string(m.Target))
		add(&Error{Msg: err.Error()})
		return errors.Join(errs...)
	}
	if m.Version != 0 {
		if req := RequiredVersion(m); m.Version < req {
			add(&Error{Msg: fmt.Sprintf("module declares PTX %v but its target and instructions need PTX %v", m.Version, req)})
		}
	}
	names := map[string]bool{}
	for _, v := range m.Vars {
		if !ValidIdent(v.Name) {
			add(&Error{Msg: fmt.Sprintf("variable name %q is not a PTX identifier", v.Name)})
		}
		if names[v.Name] {
			add(&Error{Msg: fmt.Sprintf("%q is declared twice", v.Name)})
		}
		names[v.Name] = true
	}
	for _, f := range m.Funcs {
		if !ValidIdent(f.Name) {
			add(&Error{Func: f.Name, Msg: "function name is not a PTX identifier"})
		}
		if names[f.Name] {
			add(&Error{Func: f.Name, Msg: "function is declared twice"})
		}
		names[f.Name] = true
	}
	for _, f := range m.Funcs {
		verifyFunc(m, f, add)
	}
	return errors.Join(errs...)
}

func verifyFunc(m *Module, f *Func, add func(*Error)) {
	pnames := map[string]bool{}
	for _, p := range append(append([]Param{}, f.Params...), f.Rets...) {
		if !ValidIdent(p.Name) {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter name %q is not a PTX identifier", p.Name)})
		}
		if pnames[p.Name] {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter %q is declared twice", p.Name)})
		}
		pnames[p.Name] = true
		if p.Type == NoType || p.Type == Pred {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter %q has no valid type", p.Name)})
		}
	}
	if f.Extern {
		if len(f.Body) > 0 {
			add(&Error{Func: f.Name, Msg: "an extern declaration has no body"})
		}
		return
	}
	if f.Entry && len(f.Rets) > 0 {
		add(&Error{Func: f.Name, Msg: "a kernel (.entry) cannot return values"})
	}
	labels := map[string]bool{}
	for _, in := range f.Body {
		if in.Op == "" && in.Label != "" {
			if labels[in.Label] {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: fmt.Sprintf("label %s is defined twice", in.Label)})
			}
			labels[in.Label] = true
		}
	}
	for _, in := range f.Body {
		if in.Op == "" {
			if in.Label == "" {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: "empty instruction"})
			}
			continue
		}
		fail := func(format string, a ...any) {
			add(&Error{Func: f.Name, Instr: FormatInstr(in), Pos: in.Pos, Msg: fmt.Sprintf(format, a...)})
		}
		if in.Guard != nil && in.Guard.Type != Pred {
			fail("guard %s is not a predicate", RegName(*in.Guard))
		}
		r, ok := rules[in.Op]
		if !ok {
			fail("unknown instruction %q", in.Op)
			continue
		}
		if msg := r.verify(in); msg != "" {
			fail("%s", msg)
			continue
		}
		for _, n := range r.needs(in) {
			if m.Target.SM() < n.sm || (n.arch && !m.Target.ArchSpecific()) {
				fail("%s (target is %s)", n.why, m.Target)
			}
		}
		for _, a := range in.Args {
			if s, ok := a.(Sym); ok && in.Op == "bra" && !labels[string(s)] {
				fail("branch to undefined label %s", s)
			}
		}
	}
}

// RequiredVersion returns the lowest PTX ISA version that accepts the module's target and
// every instruction in it.
func RequiredVersion(m *Module) Version {
	v := m.Target.MinVersion()
	for _, f := range m.Funcs {
		for _, in := range f.Body {
			r, ok := rules[in.Op]
			if !ok {
				continue
			}
			for _, n := range r.needs(in) {
				if n.ptx > v {
					v = n.ptx
				}
			}
		}
	}
	if v == 0 {
		v = 70
	}
	return v
}
