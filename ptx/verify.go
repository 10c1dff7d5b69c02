package ptx

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Error is a verification failure of one instruction or declaration.
type Error struct {
	Func  string // function name, "" at module scope
	Instr string // the instruction as printed, "" for declarations
	Pos   Pos    // the Go source that built it, when known
	Msg   string
}

// Bounds of what a verification error quotes: a function name, an instruction and a message
// are excerpts past these many bytes (a 100 KB name gives a short error). An instruction is
// quoted whole up to 2 KB: the longest real one, a wgmma with 128 accumulators, is about 1.1.
const (
	maxErrFunc  = 128
	maxErrInstr = 2048
	maxErrMsg   = 1024
)

// maxVerifyErrors is the most problems Verify lists; a count stands for the rest.
const maxVerifyErrors = 64

// Error formats the failure as "ptx: file:line: func: "instr": message", each part an
// excerpt when it is long.
func (e *Error) Error() string {
	if e == nil {
		return "ptx: a nil *Error"
	}
	var b strings.Builder
	b.WriteString("ptx: ")
	if e.Pos.File != "" {
		fmt.Fprintf(&b, "%s:%d: ", e.Pos.File, e.Pos.Line)
	}
	if e.Func != "" {
		b.WriteString(excerpt.Cut(e.Func, maxErrFunc) + ": ")
	}
	if e.Instr != "" {
		b.WriteString("\"" + excerpt.Cut(e.Instr, maxErrInstr) + "\": ")
	}
	b.WriteString(excerpt.Cut(e.Msg, maxErrMsg))
	return b.String()
}

// nilParts names the first nil function, variable or instruction of m (a module built by
// hand), which Verify refuses and Print cannot print; nil when there is none.
func nilParts(m *Module) error {
	for i, v := range m.Vars {
		if v == nil {
			return &Error{Msg: fmt.Sprintf("Module.Vars[%d] is nil", i)}
		}
	}
	for i, f := range m.Funcs {
		if f == nil {
			return &Error{Msg: fmt.Sprintf("Module.Funcs[%d] is nil", i)}
		}
		for j, v := range f.Vars {
			if v == nil {
				return &Error{Func: f.Name, Msg: fmt.Sprintf("Module.Funcs[%d].Vars[%d] is nil", i, j)}
			}
		}
		for j, in := range f.Body {
			if in == nil {
				return &Error{Func: f.Name, Msg: fmt.Sprintf("Module.Funcs[%d].Body[%d] is nil", i, j)}
			}
		}
	}
	return nil
}

// errName is a name for an error message: an excerpt past maxErrFunc bytes.
func errName(name string) string { return excerpt.Cut(name, maxErrFunc) }

// need is a requirement an instruction form places on the module: a PTX ISA version and a
// target, with the rule's wording for the error.
type need struct {
	ptx  Version
	sm   int
	arch bool // needs an architecture-specific ("a") target
	// archSMs, when set, lists the compute capabilities whose architecture-specific targets
	// have the feature (for example 100 and 103 for "sm_100a-class").
	archSMs []int
	// ptxBySM, when it has the target's SM, replaces ptx for that target (a feature that
	// came to an older SM in a later PTX version).
	ptxBySM map[int]Version
	why     string
}

// version returns the PTX version the requirement needs on target t.
func (n need) version(t Target) Version {
	if v, ok := n.ptxBySM[t.SM()]; ok {
		return v
	}
	return n.ptx
}

// ok reports whether target t meets the requirement (the PTX version is checked apart).
func (n need) ok(t Target) bool {
	if t.SM() < n.sm || (n.arch && !t.ArchSpecific()) {
		return false
	}
	if n.archSMs != nil && (!t.ArchSpecific() || !slices.Contains(n.archSMs, t.SM())) {
		return false
	}
	return true
}

// identRE is the PTX ISA's identifier grammar (section 4.4): a letter then followsyms, or
// _ or $ then at least one followsym (a lone _ or $ is not an identifier; % is for registers).
var identRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_$]*|[_$][A-Za-z0-9_$]+)$`)

// ValidIdent reports whether s is a legal PTX identifier for functions, params and variables.
func ValidIdent(s string) bool { return identRE.MatchString(s) }

// Verify checks the module against the instruction tables and the target; it returns every
// problem found, joined (the first maxVerifyErrors, then how many more). A nil error means
// ptxas is expected to accept the module.
func Verify(m *Module) (err error) {
	if m == nil {
		return &Error{Msg: "Verify of a nil *Module"}
	}
	if err := nilParts(m); err != nil {
		return err
	}
	var errs []error
	more := 0
	add := func(e *Error) {
		if len(errs) < maxVerifyErrors {
			errs = append(errs, e)
		} else {
			more++
		}
	}
	defer func() {
		if more > 0 {
			err = errors.Join(err, fmt.Errorf("ptx: and %d more problem(s)", more))
		}
	}()
	if !m.Target.Valid() {
		_, err := ParseTarget(string(m.Target))
		add(&Error{Msg: err.Error()})
		return errors.Join(errs...)
	}
	if m.Version != 0 && m.Version < m.Target.MinVersion() {
		add(&Error{Msg: fmt.Sprintf("module declares PTX %v but target %s needs PTX %v", m.Version, m.Target, m.Target.MinVersion())})
	}
	names := map[string]bool{}
	var constBytes int64
	for _, v := range m.Vars {
		if v.Space == SpaceConst && !v.Extern {
			constBytes = satAdd(constBytes, varBytes(v)) // no padding: a lower bound of ptxas's count
		}
		if !ValidIdent(v.Name) {
			add(&Error{Msg: fmt.Sprintf("variable name %s is not a PTX identifier", excerpt.Quote(v.Name))})
		}
		if names[v.Name] {
			add(&Error{Msg: fmt.Sprintf("%s is declared twice", excerpt.Quote(v.Name))})
		}
		names[v.Name] = true
		if msg := verifyVar(v, true); msg != "" {
			add(&Error{Msg: fmt.Sprintf("variable %s: %s", errName(v.Name), msg)})
		}
		if v.Space == SpaceShared && !v.Extern && varBytes(v) > MaxStaticShared {
			add(&Error{Msg: fmt.Sprintf("variable %s: %s bytes of static shared memory: a kernel holds at most %d (48 KiB; more is dynamic shared memory), so none can use it", errName(v.Name), sizeText(varBytes(v)), MaxStaticShared)})
		}
	}
	if constBytes > MaxConst {
		add(&Error{Msg: fmt.Sprintf("%s bytes of .const data: ptxas allows at most %d (64 KiB) in a module", sizeText(constBytes), MaxConst)})
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
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter name %s is not a PTX identifier", excerpt.Quote(p.Name))})
		}
		if pnames[p.Name] {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter %s is declared twice", excerpt.Quote(p.Name))})
		}
		pnames[p.Name] = true
		if p.Type == NoType || p.Type == Pred {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter %s has no valid type", excerpt.Quote(p.Name))})
		}
		if msg := checkAlign(p.Align); msg != "" {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("parameter %s: %s", excerpt.Quote(p.Name), msg)})
		}
	}
	verifyDirectives(f, add)
	var shared, local int64
	for _, v := range f.Vars {
		if msg := verifyVar(v, false); msg != "" {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("variable %s: %s", errName(v.Name), msg)})
		}
		switch {
		case v.Space == SpaceShared && !v.Extern:
			shared = satAdd(shared, varBytes(v))
		case v.Space == SpaceLocal:
			local = satAdd(local, varBytes(v))
		}
	}
	if shared > MaxStaticShared {
		add(&Error{Func: f.Name, Msg: fmt.Sprintf("%s bytes of static shared memory (function-scope .shared): ptxas allows at most %d (48 KiB; use dynamic shared memory, .extern .shared, for more)", sizeText(shared), MaxStaticShared)})
	}
	if local > MaxLocal {
		add(&Error{Func: f.Name, Msg: fmt.Sprintf("%s bytes of local memory per thread (.local): a GPU allows at most %d (512 KiB)", sizeText(local), MaxLocal)})
	}
	if f.Entry {
		limit := MaxParamBytes
		if m.Version != 0 && m.Version < 81 {
			limit = MaxParamBytesBefore81
		}
		if n := paramSpace(f.Params); n > int64(limit) {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("%s bytes of kernel parameters: PTX %v allows at most %d (32764 from PTX 8.1 on sm_70 and later, 4352 before)", sizeText(n), m.Version, limit)})
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
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: fmt.Sprintf("label %s is defined twice", errName(in.Label))})
			}
			labels[in.Label] = true
		}
	}
	funcs := map[string]*Func{}
	moduleNames := map[string]bool{}
	vars := map[string]*Var{} // the module's and the function's variables, by name
	for _, g := range m.Funcs {
		funcs[g.Name] = g
		moduleNames[g.Name] = true
	}
	for _, v := range m.Vars {
		moduleNames[v.Name] = true
		vars[v.Name] = v
	}
	for _, v := range f.Vars {
		moduleNames[v.Name] = true
		vars[v.Name] = v
	}
	// scopes holds the names declared in each open block, innermost last.
	scopes := []map[string]*Var{{}}
	inputs := map[*Var]bool{} // the function's input parameters, which no st may write
	for _, q := range f.Params {
		v := &Var{Space: SpaceParam, Name: q.Name, Type: q.Type, Array: q.Array}
		scopes[0][q.Name], inputs[v] = v, true
	}
	for _, q := range f.Rets {
		scopes[0][q.Name] = &Var{Space: SpaceParam, Name: q.Name, Type: q.Type, Array: q.Array}
	}
	lookup := func(name string) *Var {
		for i := len(scopes) - 1; i >= 0; i-- {
			if v, ok := scopes[i][name]; ok {
				return v
			}
		}
		return nil
	}
	passed := newInstrSet(len(f.Body) / 2) // by shapeHash: instructions that passed the rules
	needsMet := newInstrSet(64)            // by formHash: instructions whose needs the target meets
	failAt := func(in *Instr, format string, a ...any) {
		add(&Error{Func: f.Name, Instr: FormatInstr(in), Pos: in.Pos, Msg: fmt.Sprintf(format, a...)})
	}
	for _, in := range f.Body {
		switch {
		case in.Op == "" && in.Decl != nil:
			d := in.Decl
			if !ValidIdent(d.Name) {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: fmt.Sprintf("declared name %s is not a PTX identifier", excerpt.Quote(d.Name))})
			}
			if _, dup := scopes[len(scopes)-1][d.Name]; dup {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: fmt.Sprintf("%s is declared twice in one scope", excerpt.Quote(d.Name))})
			}
			if d.Space != SpaceParam && d.Space != SpaceLocal && d.Space != SpaceShared && d.Space != SpaceReg {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: fmt.Sprintf("a block-scoped declaration cannot be in .%s", d.Space)})
			}
			scopes[len(scopes)-1][d.Name] = d
			continue
		case in.Op == ScopeOpen:
			scopes = append(scopes, map[string]*Var{})
			continue
		case in.Op == ScopeClose:
			if len(scopes) == 1 {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: "\"}\" closes no open scope"})
			} else {
				scopes = scopes[:len(scopes)-1]
			}
			continue
		case in.Op == "":
			if in.Label == "" {
				add(&Error{Func: f.Name, Pos: in.Pos, Msg: "empty instruction"})
			}
			continue
		}
		fail := func(format string, a ...any) { failAt(in, format, a...) }
		if in.Guard != nil && in.Guard.Type != Pred {
			fail("guard %s is not a predicate", RegName(*in.Guard))
		}
		if in.Guard != nil && strings.HasPrefix(in.Op, "multimem.") {
			fail("multimem instructions must not be predicated (a known ptxas problem): branch around them instead")
		}
		r, ok := rules[in.Op]
		if !ok {
			fail("unknown instruction %q", in.Op)
			continue
		}
		// An instruction of the shape of one that passed (the same but for register numbers
		// and address offsets) passes too: the rules look at neither.
		h := shapeHash(in)
		if !passed.has(h, in, sameShape) {
			if msg := r.verify(in); msg != "" {
				fail("%s", msg)
				continue
			}
			ok := true
			fh := formHash(in) // the needs depend on the form only
			if !needsMet.has(fh, in, sameForm) {
				for _, n := range r.needs(in) {
					if !n.ok(m.Target) {
						fail("%s (target is %s)", n.why, m.Target)
						ok = false
					} else if m.Version != 0 && n.version(m.Target) > m.Version {
						fail("%s (module declares PTX %v)", n.why, m.Version)
						ok = false
					}
				}
				if ok {
					needsMet.add(fh, in)
				}
			}
			if ok {
				passed.add(h, in)
			}
		}
		for i, a := range in.Args {
			if s, ok := a.(Sym); ok && in.Op == "bra" && !labels[string(s)] {
				fail("branch to undefined label %s", s)
			}
			// Memory operands and variable addresses name declared variables or parameters.
			var name Sym
			switch a := a.(type) {
			case Addr:
				name, _ = a.Base.(Sym)
			case TensorAddr:
				name, _ = a.Map.(Sym)
			case Sym:
				if in.Op != "bra" && in.Op != "call" {
					name = a
				}
			}
			if name != "" && lookup(string(name)) == nil && !moduleNames[string(name)] {
				fail("%s is not a declared variable or parameter", name)
			}
			if _, ok := a.(Addr); ok && name != "" && in.Op == "st" && inputs[lookup(string(name))] {
				fail("%s is an input parameter of %s: a store to it is illegal (ptxas: \"Illegal to write to function input parameter\"); copy it into a register", name, errName(f.Name))
			}
			if ad, ok := a.(Addr); ok && ad.Base == nil && !slices.Contains(in.Q, "local") {
				fail("absolute address [%d]: ptxas takes one in .local only (\"Immediate addresses allowed only for .local state space\"); address a variable or a register", ad.Off)
			}
			if _, ok := a.(Addr); ok && name != "" {
				v := lookup(string(name))
				if v == nil {
					v = vars[string(name)]
				}
				if sp, ok := addrSpace(in, i); ok && v != nil && !spaceHolds(sp, v.Space) {
					fail("%s is a .%s variable, addressed as .%s (ptxas: \"State space mismatch between instruction and address\")", name, v.Space, sp)
				}
			}
			if sym, ok := a.(Sym); ok && name != "" {
				v := lookup(string(sym))
				if v == nil {
					v = vars[string(sym)]
				}
				if msg := symOperand(in, v); msg != "" {
					fail("%s %s", sym, msg)
				}
			}
			if sp, ok := a.(Special); ok && !specialAllowed(in) {
				fail("special register %s as an operand of %s: ptxas takes one in mov and integer cvt only (\"Special register argument not allowed\"); mov it into a register first", sp, in.Op)
			}
		}
		if in.Op == "call" {
			verifyCall(in, funcs, lookup, inputs, func(format string, a ...any) { failAt(in, format, a...) })
		}
	}
	if len(scopes) > 1 {
		add(&Error{Func: f.Name, Msg: fmt.Sprintf("%d scope(s) left open", len(scopes)-1)})
	}
}

// addrSpace returns the state space in which in reads or writes its operand i, an address,
// for the memory instructions of one state space qualifier (ld, st, atom, red) and
// cp.async (a .shared destination, a .global source); ok is false for a generic address or
// another instruction.
func addrSpace(in *Instr, i int) (Space, bool) {
	switch in.Op {
	case "ld", "st", "atom", "red":
		for _, q := range in.Q {
			switch q {
			case "global", "local", "const", "param", "param::entry", "param::func":
				sp, _ := parseSpace(strings.SplitN(q, "::", 2)[0])
				return sp, true
			case "shared", "shared::cta":
				return SpaceShared, true
			case "shared::cluster":
				return SpaceSharedCluster, true
			}
		}
	case "cp.async":
		switch i {
		case 0:
			return SpaceShared, true
		case 1:
			return SpaceGlobal, true
		}
	}
	return SpaceGeneric, false
}

// spaceHolds reports whether an address of instruction space sp may name a variable of
// space v: the same space, or a CTA's .shared variable in the cluster's shared window.
func spaceHolds(sp, v Space) bool {
	return sp == v || sp == SpaceSharedCluster && v == SpaceShared
}

// symOperand checks a variable's name v as a source operand of in, its address, as ptxas
// 13 does: cvta.to takes a register, not a name ("must be register"); cvta.SPACE a
// variable of SPACE ("State space mismatch"); a .global variable's address takes 64 bits
// ("mov.u32 %r1, gv" is a 32-bit address, which sm_90 has not). v is nil for a function.
func symOperand(in *Instr, v *Var) string {
	switch in.Op {
	case "cvta":
		if slices.Contains(in.Q, "to") {
			return "as the address of cvta.to: pass it in a register (cvta.to converts a generic address; cvta.SPACE d, var takes a variable)"
		}
		if v == nil {
			return ""
		}
		for _, q := range in.Q {
			sp, ok := parseSpace(q)
			if q == "shared::cta" {
				sp, ok = SpaceShared, true
			}
			if ok && !spaceHolds(sp, v.Space) {
				return fmt.Sprintf("is a .%s variable, converted as .%s (ptxas: \"State space mismatch between instruction and address\")", v.Space, sp)
			}
		}
	case "mov":
		if v != nil && v.Space == SpaceGlobal && len(in.Types) == 1 && in.Types[0].Bits() < 64 {
			return fmt.Sprintf("is a .global variable: its address takes 64 bits, not .%s (ptxas: \"Program uses 32-bit address\")", in.Types[0])
		}
	}
	return ""
}

// specialAllowed reports whether in may take a special register (%tid.x, %clock64 ...)
// as an operand: ptxas 13 takes one in mov and in a cvt between integer types only.
func specialAllowed(in *Instr) bool {
	switch in.Op {
	case "mov":
		return true
	case "cvt":
		return len(in.Types) == 2 && in.Types[0].IsInt() && in.Types[1].IsInt()
	}
	return false
}

// verifyVar checks a variable declaration; module reports module scope.
func verifyVar(v *Var, module bool) string {
	switch {
	case module && v.Space != SpaceGlobal && v.Space != SpaceConst && v.Space != SpaceShared:
		return fmt.Sprintf("a module-scope variable is .global, .const or .shared, not .%s", v.Space)
	case v.Type == NoType || v.Type == Pred:
		return "no valid type"
	case checkAlign(v.Align) != "":
		return checkAlign(v.Align)
	case v.Align > 0 && v.Align < v.Type.Bytes():
		return fmt.Sprintf(".align %d is below the natural alignment of .%s", v.Align, v.Type)
	case v.Array < 0 && !(v.Extern && v.Space == SpaceShared):
		return "only .extern .shared arrays may be unsized ([]): dynamic shared memory"
	case v.Extern && len(v.Init) > 0:
		return "an .extern variable has no initializer"
	case len(v.Init) > 0 && v.Space != SpaceGlobal && v.Space != SpaceConst:
		return "only .global and .const variables take initializers"
	case len(v.Init) > max(v.Array, 1):
		return fmt.Sprintf("%d initializers for %d elements", len(v.Init), max(v.Array, 1))
	}
	return ""
}

// MaxAlign is the largest .align ptxas takes (2^32 is a "Constant overflow").
const MaxAlign = 1 << 31

// checkAlign returns what is wrong with an .align value (0: none given), or "".
func checkAlign(a int) string {
	switch {
	case a < 0 || a&(a-1) != 0:
		return fmt.Sprintf(".align %d is not a power of two", a)
	case a > MaxAlign:
		return fmt.Sprintf(".align %d is more than ptxas takes (%d)", a, MaxAlign)
	}
	return ""
}

// verifyDirectives checks a function's performance directives as Print writes them and
// ptxas reads them: extents of 0 (none) or 1 to 2^32-1, an x extent when there is any,
// .minnctapersm likewise, and not both .maxntid and .reqntid.
func verifyDirectives(f *Func, add func(*Error)) {
	dims := func(name string, d [3]int) {
		for _, n := range d {
			if n < 0 || n > math.MaxUint32 {
				add(&Error{Func: f.Name, Msg: fmt.Sprintf("%s %d, %d, %d: each extent is 1 to %d", name, d[0], d[1], d[2], uint32(math.MaxUint32))})
				return
			}
		}
		if d[0] == 0 && (d[1] != 0 || d[2] != 0) {
			add(&Error{Func: f.Name, Msg: fmt.Sprintf("%s 0, %d, %d: the y and z extents without an x extent", name, d[1], d[2])})
		}
	}
	dims(".maxntid", f.MaxNTID)
	dims(".reqntid", f.ReqNTID)
	if f.MinNCTA < 0 || f.MinNCTA > math.MaxUint32 {
		add(&Error{Func: f.Name, Msg: fmt.Sprintf(".minnctapersm %d: want 1 to %d", f.MinNCTA, uint32(math.MaxUint32))})
	}
	if f.MaxNTID[0] > 0 && f.ReqNTID[0] > 0 {
		add(&Error{Func: f.Name, Msg: "both .maxntid and .reqntid: ptxas takes one or the other"})
	}
}

// verifyCall checks a call against the callee's declaration: the callee exists, and the
// return and argument lists have the callee's lengths; .param arguments are declared in the
// call's block (not the caller's own parameters) and match the callee's in size and length.
func verifyCall(in *Instr, funcs map[string]*Func, lookup func(string) *Var, inputs map[*Var]bool, fail func(string, ...any)) {
	var rets, args Vec
	var callee Sym
	for _, a := range in.Args {
		switch a := a.(type) {
		case Sym:
			callee = a
		case Vec:
			if callee == "" {
				rets = a
			} else {
				args = a
			}
		}
	}
	g := funcs[string(callee)]
	if g == nil {
		fail("call of undeclared function %s", errName(string(callee)))
		return
	}
	if g.Entry {
		fail("cannot call kernel %s", errName(string(callee)))
		return
	}
	if len(rets) != len(g.Rets) {
		fail("%s returns %d value(s), call takes %d", errName(string(callee)), len(g.Rets), len(rets))
	}
	if len(args) != len(g.Params) {
		fail("%s takes %d argument(s), call passes %d", errName(string(callee)), len(g.Params), len(args))
	}
	for i, a := range append(append(Vec{}, rets...), args...) {
		s, ok := a.(Sym)
		if !ok {
			continue
		}
		v := lookup(string(s))
		if v == nil || v.Space != SpaceParam {
			fail("call operand %s is not a declared .param variable", s)
			continue
		}
		if inputs[v] {
			fail("call operand %s is a parameter of the calling function: pass a .param declared in the call's block", s)
			continue
		}
		// ptxas matches each .param with the callee's: the same size, a scalar for a scalar
		// and an array of the same length for an array ("Type of argument does not match
		// formal parameter"); the types may differ (.f32 for .b32).
		var q Param
		switch {
		case i < len(rets) && i < len(g.Rets):
			q = g.Rets[i]
		case i >= len(rets) && i-len(rets) < len(g.Params):
			q = g.Params[i-len(rets)]
		default:
			continue
		}
		if v.Type.Bytes() != q.Type.Bytes() || max(v.Array, 0) != max(q.Array, 0) {
			fail("call operand %s is %s, %s's parameter %s is %s: they must match (a .param of the same size and length)", s, paramShape(v.Type, v.Array), errName(string(callee)), errName(q.Name), paramShape(q.Type, q.Array))
		}
	}
}

// paramShape describes a .param's type as declared: ".b32", ".b8[16]".
func paramShape(t Type, n int) string {
	if n > 0 {
		return fmt.Sprintf(".%s[%d]", t, n)
	}
	return "." + t.String()
}

// RequiredVersion returns the lowest PTX ISA version that accepts the module's target and
// every instruction in it (0 for a nil *Module, or one with a nil part: see Verify).
func RequiredVersion(m *Module) Version {
	if m == nil || nilParts(m) != nil {
		return 0
	}
	v := m.Target.MinVersion()
	// Kernels repeat instruction forms: remember each form's version, keyed by a hash of
	// what the need functions look at, checked on a hit.
	memo := map[uint64][]memoEntry{}
	for _, f := range m.Funcs {
		for _, in := range f.Body {
			if in.IsPseudo() {
				continue
			}
			r, ok := rules[in.Op]
			if !ok || r.need == nil {
				continue
			}
			h := formHash(in)
			fv, hit := Version(0), false
			for _, e := range memo[h] {
				if sameForm(e.in, in) {
					fv, hit = e.v, true
					break
				}
			}
			if !hit {
				for _, n := range r.need(in) {
					fv = max(fv, n.version(m.Target))
				}
				memo[h] = append(memo[h], memoEntry{in, fv})
			}
			v = max(v, fv)
		}
	}
	if v == 0 {
		v = 70
	}
	return v
}

type memoEntry struct {
	in *Instr
	v  Version
}

// formHash hashes (FNV-1a) the opcode, qualifiers, types, operand count and special
// registers of an instruction: what the need functions look at.
func formHash(in *Instr) uint64 {
	h := uint64(14695981039346656037)
	str := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	str(in.Op)
	for _, q := range in.Q {
		str(q)
	}
	for _, t := range in.Types {
		h ^= uint64(t)
		h *= 1099511628211
	}
	h ^= uint64(len(in.Args)) << 8
	h *= 1099511628211
	for _, a := range in.Args {
		if s, ok := a.(Special); ok {
			str(string(s))
		}
	}
	return h
}

// shapeHash hashes (FNV-1a) what the rules of an instruction look at: its form (formHash)
// and its operands but for register numbers and address offsets.
// instrSet holds instructions by a hash: the first of each hash in first, any others (hash
// collisions) in more, so that the common case allocates no slice.
type instrSet struct {
	first map[uint64]*Instr
	more  map[uint64][]*Instr
}

func newInstrSet(n int) instrSet { return instrSet{first: make(map[uint64]*Instr, n)} }

// has reports whether the set holds an instruction of hash h that same(it, in) accepts.
func (s *instrSet) has(h uint64, in *Instr, same func(a, b *Instr) bool) bool {
	p, ok := s.first[h]
	if !ok {
		return false
	}
	return same(p, in) || slices.ContainsFunc(s.more[h], func(p *Instr) bool { return same(p, in) })
}

func (s *instrSet) add(h uint64, in *Instr) {
	if _, ok := s.first[h]; !ok {
		s.first[h] = in
		return
	}
	if s.more == nil {
		s.more = map[uint64][]*Instr{}
	}
	s.more[h] = append(s.more[h], in)
}

func shapeHash(in *Instr) uint64 {
	h := formHash(in)
	for _, a := range in.Args {
		h = operandHash(h, a)
	}
	return h
}

func operandHash(h uint64, o Operand) uint64 {
	mix := func(x uint64) {
		h ^= x
		h *= 1099511628211
	}
	str := func(s string) {
		for i := 0; i < len(s); i++ {
			mix(uint64(s[i]))
		}
	}
	switch o := o.(type) {
	case Reg:
		mix(1<<8 | uint64(o.Type))
	case Imm:
		mix(2<<8 | uint64(o.Type))
		mix(o.Bits)
	case Special:
		mix(3 << 8)
		str(string(o))
	case Sym:
		mix(4 << 8)
		str(string(o))
	case Addr: // no rule reads an address's constant offset: [r+8] passes where [r+16] did
		mix(5 << 8)
		if o.Base != nil {
			h = operandHash(h, o.Base)
		}
	case Vec:
		mix(6<<8 | uint64(len(o)))
		for _, x := range o {
			h = operandHash(h, x)
		}
	case Sink:
		mix(7 << 8)
	case Pair:
		mix(8 << 8)
		h = operandHash(operandHash(h, o.A), o.B)
	case Not:
		mix(9<<8 | uint64(o.P.Type))
	default:
		mix(10 << 8)
	}
	return h
}

// sameShape reports whether a and b are the same instruction but for register numbers and
// address offsets (which no rule reads).
func sameShape(a, b *Instr) bool {
	if !sameForm(a, b) {
		return false
	}
	for i := range a.Args {
		if !sameOperandShape(a.Args[i], b.Args[i]) {
			return false
		}
	}
	return true
}

func sameOperandShape(a, b Operand) bool {
	switch a := a.(type) {
	case Reg:
		r, ok := b.(Reg)
		return ok && r.Type == a.Type
	case Not:
		n, ok := b.(Not)
		return ok && n.P.Type == a.P.Type
	case Addr:
		d, ok := b.(Addr)
		return ok && (a.Base == nil) == (d.Base == nil) && (a.Base == nil || sameOperandShape(a.Base, d.Base))
	case Vec:
		v, ok := b.(Vec)
		if !ok || len(v) != len(a) {
			return false
		}
		for i := range a {
			if !sameOperandShape(a[i], v[i]) {
				return false
			}
		}
		return true
	case Pair:
		p, ok := b.(Pair)
		return ok && sameOperandShape(a.A, p.A) && sameOperandShape(a.B, p.B)
	case Imm, Special, Sym, Sink:
		return a == b
	}
	return false
}

func sameForm(a, b *Instr) bool {
	if a.Op != b.Op || !slices.Equal(a.Q, b.Q) || !slices.Equal(a.Types, b.Types) || len(a.Args) != len(b.Args) {
		return false
	}
	for i := range a.Args {
		sa, oka := a.Args[i].(Special)
		sb, okb := b.Args[i].(Special)
		if oka != okb || sa != sb {
			return false
		}
	}
	return true
}

// Memory limits Verify enforces, as ptxas (CUDA 13) and the GPU do; the emulator (package
// emu) enforces the same at launch.
const (
	// MaxStaticShared is the most static shared memory of a kernel (ptxas: 0xc000 bytes).
	MaxStaticShared = 48 << 10
	// MaxLocal is the most local memory per thread (the driver refuses a launch with more).
	MaxLocal = 512 << 10
	// MaxParamBytes is the most bytes of a kernel's parameters from PTX 8.1 on (sm_70 and
	// later); MaxParamBytesBefore81 before it.
	MaxParamBytes         = 32764
	MaxParamBytesBefore81 = 4352
	// MaxConst is the most .const data of a module (ptxas: 0x10000 bytes).
	MaxConst = 64 << 10
)

// sizeCap saturates size arithmetic far above every limit.
const sizeCap = 1 << 50

// varBytes is v's size in bytes (an unsized extern array: 0), saturated at sizeCap.
func varBytes(v *Var) int64 {
	if v.Array < 0 {
		return 0
	}
	return satMul(int64(max(v.Array, 1)), int64(max(v.Type.Bytes(), 1)))
}

// paramSpace is the bytes of a parameter list laid out in order, each parameter at its
// alignment (.align, else its type's), saturated at sizeCap.
func paramSpace(ps []Param) int64 {
	var off int64
	for _, p := range ps {
		al := int64(max(p.Align, p.Type.Bytes(), 1))
		off = satAdd(off, (al-off%al)%al)
		off = satAdd(off, satMul(int64(max(p.Array, 1)), int64(max(p.Type.Bytes(), 1))))
	}
	return off
}

// sizeText prints a saturated size: the number, or "at least 2^50" at sizeCap (where the
// arithmetic stopped counting).
func sizeText(n int64) string {
	if n >= sizeCap {
		return "at least 2^50"
	}
	return strconv.FormatInt(n, 10)
}

func satAdd(a, b int64) int64 { return min(a+b, sizeCap) } // a, b <= sizeCap: no overflow

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > sizeCap/b {
		return sizeCap
	}
	return a * b
}
