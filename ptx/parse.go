package ptx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Parse reads PTX text as Print writes it back into a Module, so that PTX shipped as text
// (generated packages embed it) can be verified, emulated and launched with checked
// arguments. It reads the subset of PTX that Print produces: the module header, .file
// lines, variables, .extern/.visible .func and .entry with parameters and performance
// directives, .reg declarations, .loc lines, labels, scope blocks with .param declarations,
// and instructions whose opcode is in the instruction tables. Print(Parse(text)) == text for
// any text Print made. Errors name the line.
func Parse(src string) (m *Module, err error) {
	p := &parser{lines: strings.Split(src, "\n"), m: &Module{}, files: map[int]string{}}
	defer func() {
		// A malformed input that slips past the checks must not crash the caller.
		if r := recover(); r != nil {
			m, err = nil, p.errorf("malformed input (%v)", r)
		}
	}()
	if err := p.module(); err != nil {
		return nil, err
	}
	return p.m, nil
}

type parser struct {
	lines []string
	i     int // next line
	m     *Module
	files map[int]string
	regs  map[string]Type // register prefix -> type, from .reg declarations
}

func (p *parser) errorf(format string, a ...any) error {
	return fmt.Errorf("ptx: parse: line %d: %s", p.i, fmt.Sprintf(format, clipArgs(a)...))
}

// errorf is fmt.Errorf with every string argument clipped (see clipArgs).
func errorf(format string, a ...any) error { return fmt.Errorf(format, clipArgs(a)...) }

// clipArgs bounds the input an error quotes: a string argument longer than excerpt.Max
// prints as its first bytes and its length (a 10 MB line gives a short error).
func clipArgs(a []any) []any {
	for i, x := range a {
		if s, ok := x.(string); ok && len(s) > excerpt.Max {
			a[i] = clipped(s)
		}
	}
	return a
}

// clipped is a long input string in an error: %q prints excerpt.Quote, other verbs the
// same without the quotes' escaping.
type clipped string

// Format prints the excerpt.
func (c clipped) Format(f fmt.State, verb rune) { io.WriteString(f, excerpt.Quote(string(c))) }

// next returns the next non-empty, non-comment line, trimmed.
func (p *parser) next() (string, bool) {
	for p.i < len(p.lines) {
		s := strings.TrimSpace(p.lines[p.i])
		p.i++
		if s == "" || strings.HasPrefix(s, "//") {
			continue
		}
		return s, true
	}
	return "", false
}

func (p *parser) module() error {
	for {
		s, ok := p.next()
		if !ok {
			if p.m.Version == 0 || p.m.Target == "" {
				return p.errorf("missing .version or .target")
			}
			return nil
		}
		switch {
		case strings.HasPrefix(s, ".version "):
			v, err := parseVersion(strings.TrimPrefix(s, ".version "))
			if err != nil {
				return p.errorf("%v", err)
			}
			p.m.Version = v
		case strings.HasPrefix(s, ".target "):
			t := strings.TrimSpace(strings.TrimPrefix(s, ".target "))
			if i := strings.IndexByte(t, ','); i >= 0 {
				t = t[:i]
			}
			if !ValidIdent(t) {
				return p.errorf("bad .target %q", t)
			}
			p.m.Target = Target(t)
		case strings.HasPrefix(s, ".address_size "):
			if s != ".address_size 64" {
				return p.errorf("only .address_size 64 is supported")
			}
		case strings.HasPrefix(s, ".file "):
			f := strings.Fields(s)
			if len(f) < 3 {
				return p.errorf("bad .file line")
			}
			n, err := strconv.Atoi(f[1])
			name, err2 := strconv.Unquote(strings.Join(f[2:], " "))
			if err != nil || err2 != nil {
				return p.errorf("bad .file line %q", s)
			}
			p.files[n] = name
		case strings.Contains(s, ".func") || strings.Contains(s, ".entry"):
			if err := p.function(s); err != nil {
				return err
			}
		case strings.HasPrefix(s, ".global") || strings.HasPrefix(s, ".const") || strings.HasPrefix(s, ".shared") || strings.HasPrefix(s, ".extern ."):
			v, err := parseVar(s)
			if err != nil {
				return p.errorf("%v", err)
			}
			p.m.Vars = append(p.m.Vars, v)
		default:
			return p.errorf("unexpected %q at module scope", s)
		}
	}
}

func parseVersion(s string) (Version, error) {
	var maj, min int
	if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d.%d", &maj, &min); err != nil {
		return 0, errorf("bad .version %q", s)
	}
	return Version(maj*10 + min), nil
}

// parseVar reads "[.extern] .space [.align N] .type name[[N]] [= init];".
func parseVar(s string) (*Var, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), ";")
	v := &Var{}
	init := ""
	if i := strings.Index(s, "="); i >= 0 {
		s, init = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
	}
	f := strings.Fields(s)
	for len(f) > 0 && strings.HasPrefix(f[0], ".") {
		w := f[0][1:]
		f = f[1:]
		switch {
		case w == "extern":
			v.Extern = true
		case w == "align":
			if len(f) == 0 {
				return nil, errorf("bad .align in %q", s)
			}
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return nil, errorf("bad .align in %q", s)
			}
			v.Align, f = n, f[1:]
		default:
			if sp, ok := parseSpace(w); ok && v.Space == SpaceGeneric {
				v.Space = sp
			} else if t, ok := ParseType(w); ok {
				v.Type = t
			} else {
				return nil, errorf("unknown %q in %q", w, s)
			}
		}
	}
	if len(f) != 1 {
		return nil, errorf("bad declaration %q", s)
	}
	name := f[0]
	if i := strings.IndexByte(name, '['); i >= 0 {
		n := strings.TrimSuffix(name[i+1:], "]")
		name = name[:i]
		if n == "" {
			v.Array = -1
		} else {
			c, err := strconv.Atoi(n)
			if err != nil {
				return nil, errorf("bad array size in %q", s)
			}
			v.Array = c
		}
	}
	v.Name = name
	if init != "" {
		for _, x := range strings.Split(strings.Trim(init, "{}"), ",") {
			im, err := parseImm(strings.TrimSpace(x), v.Type)
			if err != nil {
				return nil, err
			}
			v.Init = append(v.Init, im.Bits)
		}
	}
	return v, nil
}

func parseSpace(s string) (Space, bool) {
	for i, n := range spaceNames {
		if n == s && n != "" {
			return Space(i), true
		}
	}
	return SpaceGeneric, false
}

// function reads a function header (possibly spanning lines) and its body.
func (p *parser) function(head string) error {
	// Gather the header up to ";" (a declaration) or the line before "{".
	for headIncomplete(head) {
		s, ok := p.next()
		if !ok {
			return p.errorf("unterminated function header")
		}
		head += " " + s
	}
	f := &Func{}
	decl := strings.HasSuffix(head, ";")
	head = strings.TrimSuffix(head, ";")
	for {
		head = strings.TrimSpace(head)
		switch {
		case strings.HasPrefix(head, ".extern"):
			f.Extern, head = true, head[len(".extern"):]
			continue
		case strings.HasPrefix(head, ".visible"):
			f.Visible, head = true, head[len(".visible"):]
			continue
		case strings.HasPrefix(head, ".entry"):
			f.Entry, head = true, head[len(".entry"):]
		case strings.HasPrefix(head, ".func"):
			head = head[len(".func"):]
		default:
			return p.errorf("bad function header %q", head)
		}
		break
	}
	head = strings.TrimSpace(head)
	if strings.HasPrefix(head, "(") {
		end := strings.IndexByte(head, ')')
		rets, err := parseParams(head[1:end])
		if err != nil {
			return p.errorf("%v", err)
		}
		f.Rets, head = rets, strings.TrimSpace(head[end+1:])
	}
	open := strings.IndexByte(head, '(')
	if open < 0 {
		return p.errorf("no parameter list in %q", head)
	}
	f.Name = strings.TrimSpace(head[:open])
	closeAt := strings.LastIndexByte(head, ')')
	params, err := parseParams(head[open+1 : closeAt])
	if err != nil {
		return p.errorf("%v", err)
	}
	f.Params = params
	p.m.Funcs = append(p.m.Funcs, f)
	// What follows the parameter list on the header's lines: directives, and perhaps the "{".
	tail := strings.TrimSpace(head[closeAt+1:])
	brace := false
	if i := strings.IndexByte(tail, '{'); i >= 0 {
		if decl || strings.TrimSpace(tail[i+1:]) != "" {
			return p.errorf("function %s: unexpected %q after the body's {", f.Name, tail[i+1:])
		}
		brace, tail = true, strings.TrimSpace(tail[:i])
	}
	if err := p.directives(f, tail); err != nil {
		return err
	}
	if decl {
		return nil
	}
	// Directives, then the body.
	for !brace {
		s, ok := p.next()
		if !ok {
			return p.errorf("function %s has no body", f.Name)
		}
		if s == "{" {
			break
		}
		if s == "" || s[0] != '.' {
			return p.errorf("unexpected %q before the body of %s", s, f.Name)
		}
		if err := p.directives(f, s); err != nil {
			return err
		}
	}
	return p.body(f)
}

// directives reads performance directives (".reqntid 16, 1 .minnctapersm 2") into f; every
// word must belong to one.
func (p *parser) directives(f *Func, s string) error {
	fs := strings.Fields(strings.ReplaceAll(s, ",", " "))
	for i := 0; i < len(fs); {
		name, j := fs[i], i+1
		for j < len(fs) && !strings.HasPrefix(fs[j], ".") {
			j++
		}
		vals := fs[i+1 : j]
		nums := make([]int, len(vals))
		for k, v := range vals {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return p.errorf("function %s: bad directive %s: %q is not a positive integer", f.Name, name, v)
			}
			nums[k] = n
		}
		dims := func(d *[3]int) error {
			if len(nums) < 1 || len(nums) > 3 {
				return p.errorf("function %s: %s takes 1 to 3 extents, got %d", f.Name, name, len(nums))
			}
			*d = [3]int{}
			copy(d[:], nums)
			return nil
		}
		switch name {
		case ".maxntid":
			if err := dims(&f.MaxNTID); err != nil {
				return err
			}
		case ".reqntid":
			if err := dims(&f.ReqNTID); err != nil {
				return err
			}
		case ".minnctapersm":
			if len(nums) != 1 {
				return p.errorf("function %s: .minnctapersm takes one number, got %d", f.Name, len(nums))
			}
			f.MinNCTA = nums[0]
		case ".noreturn":
			if len(nums) != 0 {
				return p.errorf("function %s: .noreturn takes no value", f.Name)
			}
			f.NoReturn = true
		default:
			return p.errorf("function %s: unknown directive %q (known: .maxntid, .reqntid, .minnctapersm, .noreturn)", f.Name, name)
		}
		i = j
	}
	return nil
}

// headIncomplete reports whether a function header still lacks the end of its parameter list
// (a header may span lines, its "(" on the line after the name).
func headIncomplete(h string) bool {
	if strings.Count(h, "(") > strings.Count(h, ")") {
		return true
	}
	if strings.HasSuffix(strings.TrimSpace(h), ";") {
		return false
	}
	// After the keywords and an optional return list, the name must be followed by "(".
	rest := h
	if i := strings.Index(rest, ".func"); i >= 0 {
		rest = strings.TrimSpace(rest[i+len(".func"):])
		if strings.HasPrefix(rest, "(") {
			rest = rest[strings.IndexByte(rest, ')')+1:]
		}
	}
	return !strings.Contains(rest, "(")
}

func parseParams(s string) ([]Param, error) {
	var out []Param
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := parseVar(part)
		if err != nil {
			return nil, err
		}
		if v.Space != SpaceParam {
			return nil, errorf("parameter %q is not in .param", part)
		}
		out = append(out, Param{Name: v.Name, Type: v.Type, Array: max(v.Array, 0), Align: v.Align})
	}
	return out, nil
}

func (p *parser) body(f *Func) error {
	p.regs = map[string]Type{}
	depth := 0
	pos := Pos{}
	for {
		s, ok := p.next()
		if !ok {
			return p.errorf("function %s: missing }", f.Name)
		}
		switch {
		case s == "}" && depth == 0:
			return nil
		case s == "{":
			depth++
			f.Body = append(f.Body, &Instr{Op: ScopeOpen})
		case s == "}":
			depth--
			f.Body = append(f.Body, &Instr{Op: ScopeClose})
		case strings.HasPrefix(s, ".reg "):
			// .reg .f32 %f<4>;
			fs := strings.Fields(strings.TrimSuffix(s, ";"))
			if len(fs) != 3 {
				return p.errorf("bad register declaration %q", s)
			}
			t, ok := ParseType(strings.TrimPrefix(fs[1], "."))
			lt := strings.IndexByte(fs[2], '<')
			if !ok || lt < 0 {
				return p.errorf("bad register declaration %q", s)
			}
			p.regs[fs[2][:lt]] = t
		case strings.HasPrefix(s, ".loc "):
			fs := strings.Fields(s)
			if len(fs) < 3 {
				return p.errorf("bad .loc %q", s)
			}
			n, err1 := strconv.Atoi(fs[1])
			line, err2 := strconv.Atoi(fs[2])
			if err1 != nil || err2 != nil || p.files[n] == "" {
				return p.errorf("bad .loc %q", s)
			}
			pos = Pos{File: p.files[n], Line: line}
		case strings.HasPrefix(s, ".param ") || strings.HasPrefix(s, ".local ") || strings.HasPrefix(s, ".shared ") || strings.HasPrefix(s, ".extern ."):
			v, err := parseVar(s)
			if err != nil {
				return p.errorf("%v", err)
			}
			if depth > 0 {
				f.Body = append(f.Body, &Instr{Decl: v})
			} else {
				f.Vars = append(f.Vars, v)
			}
		case strings.HasSuffix(s, ":") && !strings.ContainsAny(s, " \t"):
			f.Body = append(f.Body, &Instr{Label: strings.TrimSuffix(s, ":")})
		default:
			in, err := p.instr(s)
			if err != nil {
				return p.errorf("%v", err)
			}
			in.Pos = pos
			f.Body = append(f.Body, in)
		}
	}
}

// opNames lists the table's opcodes, longest first, for splitting "a.b.c.d" (made on first
// use: the tables are filled by init functions, after package variables).
var opNames = sync.OnceValue(func() []string {
	var out []string
	for op := range rules {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
})

func (p *parser) instr(s string) (*Instr, error) {
	s = strings.TrimSuffix(s, ";")
	in := &Instr{}
	if strings.HasPrefix(s, "@") {
		sp := strings.IndexAny(s, " \t")
		g := s[1:sp]
		if strings.HasPrefix(g, "!") {
			in.GuardNeg, g = true, g[1:]
		}
		r, err := p.reg(g)
		if err != nil {
			return nil, err
		}
		in.Guard = &r
		s = strings.TrimSpace(s[sp:])
	}
	word, rest := s, ""
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		word, rest = s[:i], strings.TrimSpace(s[i:])
	}
	for _, op := range opNames() {
		if word == op || strings.HasPrefix(word, op+".") {
			in.Op = op
			break
		}
	}
	if in.Op == "" {
		return nil, errorf("unknown instruction %q", word)
	}
	var parts []string
	if len(word) > len(in.Op) {
		parts = strings.Split(word[len(in.Op)+1:], ".")
	}
	// Type suffixes are the trailing parts that name types.
	n := len(parts)
	for n > 0 {
		if _, ok := ParseType(parts[n-1]); !ok {
			break
		}
		n--
	}
	in.Q = slotOrder(rules[in.Op], append([]string(nil), parts[:n]...))
	for _, t := range parts[n:] {
		tt, _ := ParseType(t)
		in.Types = append(in.Types, tt)
	}
	if len(in.Q) == 0 {
		in.Q = nil
	}
	t := in.Type()
	args, err := splitArgs(rest)
	if err != nil {
		return nil, err
	}
	for _, a := range args {
		o, err := p.operand(a, t)
		if err != nil {
			return nil, errorf("%q: %v", s, err)
		}
		in.Args = append(in.Args, o)
	}
	return in, nil
}

// slotOrder returns q in the order of r's slots. ptxas takes an instruction's qualifiers in
// any order (multimem.ld_reduce.sys.relaxed, ld.global.relaxed.gpu: measured with ptxas
// 13.0); the IR keeps them in slot order, as the printer writes them. Qualifiers already in
// order stay as written (slots sharing values, a copy's destination and source spaces, keep
// the written order); q is returned unchanged when a qualifier has no slot or one too many,
// for Verify to report.
func slotOrder(r *rule, q []string) []string {
	if r == nil || len(q) < 2 {
		return q
	}
	si, inOrder := 0, true
	for _, x := range q {
		for si < len(r.slots) && !slices.Contains(r.slots[si].values, x) {
			si++
		}
		if si == len(r.slots) {
			inOrder = false
			break
		}
		si++
	}
	if inOrder {
		return q
	}
	at := make([]int, len(q)) // the slot each qualifier takes: the first free one holding it
	used := make([]bool, len(r.slots))
	for i, x := range q {
		at[i] = -1
		for j, s := range r.slots {
			if !used[j] && slices.Contains(s.values, x) {
				at[i], used[j] = j, true
				break
			}
		}
		if at[i] < 0 {
			return q
		}
	}
	idx := make([]int, len(q))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return at[idx[a]] < at[idx[b]] })
	out := make([]string, len(q))
	for i, j := range idx {
		out[i] = q[j]
	}
	return out
}

// splitArgs splits an operand list at top-level commas ({...}, [...], (...) stay whole).
func splitArgs(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, errorf("unbalanced brackets in %q", s)
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out, nil
}

func (p *parser) reg(s string) (Reg, error) {
	j := len(s)
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	t, ok := p.regs[s[:j]]
	if !ok || j == len(s) {
		return Reg{}, errorf("undeclared register %s", s)
	}
	n, err := strconv.Atoi(s[j:])
	if err != nil {
		return Reg{}, errorf("bad register %s", s)
	}
	return Reg{Type: t, N: n}, nil
}

func (p *parser) operand(s string, t Type) (Operand, error) {
	switch {
	case s == "_":
		return Sink{}, nil
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "("):
		parts, err := splitArgs(s[1 : len(s)-1])
		if err != nil {
			return nil, err
		}
		v := Vec{}
		for _, e := range parts {
			o, err := p.operand(e, t)
			if err != nil {
				return nil, err
			}
			v = append(v, o)
		}
		return v, nil
	case strings.HasPrefix(s, "["):
		in := strings.TrimSpace(s[1 : len(s)-1])
		if parts, err := splitArgs(in); err == nil && len(parts) == 2 { // [tensorMap, {coords}]
			m, err := p.operand(parts[0], U64)
			if err != nil {
				return nil, err
			}
			c, err := p.operand(parts[1], S32)
			if err != nil {
				return nil, err
			}
			v, ok := c.(Vec)
			if !ok {
				return nil, errorf("tensor coordinates must be a vector {...}, got %s", parts[1])
			}
			return TensorAddr{Map: m, Coords: v}, nil
		}
		a := Addr{}
		base := in
		if i := strings.LastIndexByte(in, '+'); i > 0 {
			off, err := strconv.ParseInt(in[i+1:], 10, 64)
			if err != nil {
				return nil, errorf("bad address %s", s)
			}
			a.Off, base = off, in[:i]
		}
		if n, err := strconv.ParseInt(base, 10, 64); err == nil {
			a.Off = n
			return a, nil
		}
		b, err := p.operand(base, U64)
		if err != nil {
			return nil, err
		}
		a.Base = b
		return a, nil
	case strings.Contains(s, "|"):
		i := strings.IndexByte(s, '|')
		x, err := p.operand(s[:i], t)
		if err != nil {
			return nil, err
		}
		y, err := p.operand(s[i+1:], Pred)
		if err != nil {
			return nil, err
		}
		return Pair{A: x, B: y}, nil
	case strings.HasPrefix(s, "!"):
		r, err := p.reg(s[1:])
		if err != nil {
			return nil, err
		}
		return Not{P: r}, nil
	case strings.HasPrefix(s, "%"):
		if _, ok := SpecialType(Special(s)); ok {
			return Special(s), nil
		}
		return p.reg(s)
	case s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9'):
		return parseImm(s, t)
	}
	if !ValidIdent(s) {
		return nil, errorf("bad operand %q", s)
	}
	return Sym(s), nil
}

// parseImm reads an immediate as FormatImm writes it; integers take the type t (or S64/U64
// when t is not an integer type). The error quotes an excerpt of s and says whether it is
// out of range or not a number.
func parseImm(s string, t Type) (Imm, error) {
	im, err := parseImmRaw(s, t)
	switch {
	case err == nil:
		return im, nil
	case errors.Is(err, strconv.ErrRange):
		return Imm{}, errorf("immediate %q out of range", s)
	}
	return Imm{}, errorf("bad immediate %q", s)
}

func parseImmRaw(s string, t Type) (Imm, error) {
	switch {
	case strings.HasPrefix(s, "0f") || strings.HasPrefix(s, "0F"):
		b, err := strconv.ParseUint(s[2:], 16, 32)
		return Imm{Type: F32, Bits: b}, err
	case strings.HasPrefix(s, "0d") || strings.HasPrefix(s, "0D"):
		b, err := strconv.ParseUint(s[2:], 16, 64)
		return Imm{Type: F64, Bits: b}, err
	case strings.ContainsAny(s, ".eE") && !strings.HasPrefix(s, "0x"):
		f, err := strconv.ParseFloat(s, 64)
		return FloatImm(F64, f), err
	}
	if t == NoType || t.Kind() == KindFloat || t == Pred && s != "0" && s != "1" {
		t = S64
	}
	if strings.HasPrefix(s, "-") {
		v, err := strconv.ParseInt(s, 0, 64)
		if t.Kind() != KindSigned {
			t = S64
		}
		return Imm{Type: t, Bits: uint64(v)}, err
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err == nil && t.Kind() == KindSigned && v > math.MaxInt64 {
		t = U64
	}
	return Imm{Type: t, Bits: v}, err
}
