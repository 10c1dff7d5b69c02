package ptx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
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
// and instructions whose opcode is in the instruction tables; // and /* */ comments read as
// ptxas reads them. Print(Parse(text)) == text for
// any text Print made, and Parse(Print(m)) == m for any m Parse returned (FuzzParse).
//
// It is strict, so that what it accepts means what it says: names (functions, parameters,
// variables, labels, symbols) follow the PTX ISA's identifier grammar, the .target is one
// kgen knows, the .version is MAJOR.MINOR, every parameter and variable has one state space
// and one type, immediates fit their instruction's type, registers are declared (one prefix
// per type, used below its declared count), brackets pair up and instructions end with ';'.
// Errors name the line and quote a bounded excerpt of it.
func Parse(src string) (m *Module, err error) {
	p := &parser{m: &Module{}, files: map[int]string{}}
	src, line, ok := stripBlockComments(src)
	if !ok {
		p.i = line
		return nil, p.errorf("/* comment not closed")
	}
	p.lines = strings.Split(src, "\n")
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
	regs  map[string]regDecl // register prefix -> its declaration
	typed map[Type]string    // register type -> the prefix declared for it
}

// regDecl is a .reg declaration: the registers' type and how many there are.
type regDecl struct {
	t Type
	n int
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

// next returns the next non-empty, non-comment line, trimmed, without a trailing //
// comment (one after code, as other tools write them: "ret; // done" was refused as having
// no ';' at its end, and "{ // body" as an unexpected line).
func (p *parser) next() (string, bool) {
	for p.i < len(p.lines) {
		s := strings.TrimSpace(p.lines[p.i])
		p.i++
		if i := commentAt(s); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			continue
		}
		return s, true
	}
	return "", false
}

// stripBlockComments replaces each /* */ comment of src with a space, as ptxas reads one,
// keeping its line breaks so that errors name the lines of src. A "/*" inside a // comment
// or a double-quoted string starts none. ok is false for a comment not closed, and line
// is then the line (from 1) where it opens.
func stripBlockComments(src string) (out string, line int, ok bool) {
	if !strings.Contains(src, "/*") {
		return src, 0, true
	}
	var b strings.Builder
	b.Grow(len(src))
	ln := 1
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			ln++
		case c == '"': // a string: copy it up to its closing quote or the line's end
			j := i + 1
			for j < len(src) && src[j] != '"' && src[j] != '\n' {
				if src[j] == '\\' && j+1 < len(src) && src[j+1] != '\n' {
					j++
				}
				j++
			}
			if j < len(src) && src[j] == '"' {
				j++
			}
			b.WriteString(src[i:j])
			i = j - 1
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/': // a // comment: copy it to the line's end
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			b.WriteString(src[i : i+j])
			i += j - 1
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return "", ln, false
			}
			body := src[i+2 : i+2+end]
			b.WriteByte(' ')
			n := strings.Count(body, "\n")
			b.WriteString(strings.Repeat("\n", n))
			ln += n
			i += 2 + end + 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), 0, true
}

// commentAt returns where a // comment starts in line s, outside double quotes (a .file
// name may hold "//"; a backslash escapes a quote in one), or -1.
func commentAt(s string) int {
	if !strings.Contains(s, "//") {
		return -1
	}
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '/' && i+1 < len(s) && s[i+1] == '/':
			return i
		}
	}
	return -1
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
		first, _, _ := strings.Cut(s, " ")
		switch {
		case strings.HasPrefix(s, ".version "):
			if p.m.Version != 0 {
				return p.errorf(".version given twice")
			}
			v, err := parseVersion(strings.TrimPrefix(s, ".version "))
			if err != nil {
				return p.errorf("%v", err)
			}
			p.m.Version = v
		case strings.HasPrefix(s, ".target "):
			if p.m.Target != "" {
				return p.errorf(".target given twice")
			}
			t := strings.TrimSpace(strings.TrimPrefix(s, ".target "))
			if i := strings.IndexByte(t, ','); i >= 0 {
				return p.errorf(".target %q: target options (%q) are not supported", t[:i], strings.TrimSpace(t[i+1:]))
			}
			tt, err := ParseTarget(t)
			if err != nil {
				return p.errorf(".target: %v", err)
			}
			p.m.Target = tt
		case strings.HasPrefix(s, ".address_size "):
			if s != ".address_size 64" {
				return p.errorf("only .address_size 64 is supported")
			}
		case strings.HasPrefix(s, ".file "):
			num, quoted, found := strings.Cut(strings.TrimPrefix(s, ".file "), " ")
			if !found {
				return p.errorf("bad .file line")
			}
			n, err := strconv.Atoi(num)
			name, ok := "", len(quoted) >= 2 && quoted[0] == '"' && quoted[len(quoted)-1] == '"'
			if ok && strings.Contains(quoted, `\`) { // another tool's C-style escapes (Print writes none)
				var uerr error
				name, uerr = strconv.Unquote(quoted)
				ok = uerr == nil
			} else if ok {
				name, ok = fileUnescape(quoted[1 : len(quoted)-1])
			}
			if err != nil || !ok || n < 1 || name == "" {
				return p.errorf("bad .file line %q (want .file N \"name\", N from 1)", s)
			}
			if _, dup := p.files[n]; dup {
				return p.errorf(".file %d given twice", n)
			}
			p.files[n] = name
		case isFuncHeader(s):
			if err := p.function(s); err != nil {
				return err
			}
		case first == ".global" || first == ".const" || first == ".shared" || first == ".extern":
			v, err := parseVar(strings.TrimSuffix(s, ";"))
			if err != nil {
				return p.errorf("%v", err)
			}
			if !strings.HasSuffix(s, ";") {
				return p.errorf("variable %s: no ';' at the end", v.Name)
			}
			if v.Space != SpaceGlobal && v.Space != SpaceConst && v.Space != SpaceShared {
				return p.errorf("variable %s: .%s is not a module-scope state space (.global, .const, .shared)", v.Name, v.Space)
			}
			p.m.Vars = append(p.m.Vars, v)
		default:
			return p.errorf("unexpected %q at module scope", s)
		}
	}
}

// isFuncHeader reports whether a module-scope line starts a function: linking directives
// (.visible, .extern, .weak) then .entry or .func, as words.
func isFuncHeader(s string) bool {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '(' }) {
		switch w {
		case ".visible", ".extern", ".weak":
			continue
		case ".entry", ".func":
			return true
		}
		return false
	}
	return false
}

var versionRE = regexp.MustCompile(`^([1-9][0-9]?)\.([0-9])$`)

// parseVersion reads MAJOR.MINOR (one minor digit, as every PTX ISA version has).
func parseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errorf("bad .version %q (want MAJOR.MINOR, such as 8.4)", s)
	}
	maj, _ := strconv.Atoi(m[1])
	min, _ := strconv.Atoi(m[2])
	return Version(maj*10 + min), nil
}

// parseVar reads "[.extern] .space [.align N] .type name[[N]] [= init]": one state space,
// one type, an identifier, a positive array size ("[]" only when .extern), an alignment that
// is a power of two, and an initializer of immediates of the type (braced for an array, at
// most its size). The trailing ';' is the caller's (parameters have none).
func parseVar(s string) (*Var, error) {
	s = strings.TrimSpace(s)
	v := &Var{}
	init, hasInit := "", false
	if i := strings.Index(s, "="); i >= 0 {
		s, init, hasInit = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
	}
	f := strings.Fields(s)
	for len(f) > 0 && strings.HasPrefix(f[0], ".") {
		w := f[0][1:]
		f = f[1:]
		switch {
		case w == "extern":
			if v.Extern {
				return nil, errorf(".extern given twice in %q", s)
			}
			v.Extern = true
		case w == "align":
			if len(f) == 0 {
				return nil, errorf("bad .align in %q", s)
			}
			n, err := strconv.Atoi(f[0])
			if err != nil || n < 1 || n&(n-1) != 0 || v.Align != 0 || f[0][0] == '+' {
				return nil, errorf("bad .align in %q (want one power of two)", s)
			}
			v.Align, f = n, f[1:]
		default:
			if sp, ok := parseSpace(w); ok {
				if v.Space != SpaceGeneric {
					return nil, errorf("two state spaces (.%s, .%s) in %q", v.Space, sp, s)
				}
				v.Space = sp
			} else if t, ok := ParseType(w); ok {
				if v.Type != NoType {
					return nil, errorf("two types (.%s, .%s) in %q", v.Type, t, s)
				}
				v.Type = t
			} else {
				return nil, errorf("unknown %q in %q", w, s)
			}
		}
	}
	switch {
	case v.Space == SpaceGeneric:
		return nil, errorf("no state space in %q (.global, .const, .shared, .local, .param)", s)
	case v.Type == NoType:
		return nil, errorf("no type in %q", s)
	case v.Type == Pred:
		return nil, errorf("a .pred variable in %q (predicates live in registers)", s)
	case len(f) != 1:
		return nil, errorf("bad declaration %q (want [.extern] .space [.align N] .type name)", s)
	}
	name := f[0]
	if i := strings.IndexByte(name, '['); i >= 0 {
		if !strings.HasSuffix(name, "]") {
			return nil, errorf("bad array size in %q", s)
		}
		n := name[i+1 : len(name)-1]
		name = name[:i]
		if n == "" {
			if !v.Extern {
				return nil, errorf("array %s without a size in %q: only an .extern array may have none", name, s)
			}
			v.Array = -1
		} else {
			c, err := strconv.Atoi(n)
			if err != nil || c < 1 || n[0] == '+' || n[0] == '0' {
				return nil, errorf("bad array size in %q (want a positive integer)", s)
			}
			v.Array = c
		}
	}
	if !ValidIdent(name) {
		return nil, errorf("%q is not a PTX identifier (in %q)", name, s)
	}
	v.Name = name
	if hasInit {
		if v.Extern || v.Space != SpaceGlobal && v.Space != SpaceConst {
			return nil, errorf("variable %s: only .global and .const variables (not .extern) take an initializer", name)
		}
		body := init
		if v.Array != 0 {
			if !strings.HasPrefix(init, "{") || !strings.HasSuffix(init, "}") {
				return nil, errorf("variable %s: an array's initializer is braced: {a, b, ...}", name)
			}
			body = init[1 : len(init)-1]
		}
		for _, x := range strings.Split(body, ",") {
			bits, err := initValue(strings.TrimSpace(x), v.Type)
			if err != nil {
				return nil, errorf("variable %s: %v", name, err)
			}
			v.Init = append(v.Init, bits)
		}
		if max(v.Array, 1) < len(v.Init) {
			return nil, errorf("variable %s: %d initial values for %d elements", name, len(v.Init), max(v.Array, 1))
		}
	}
	return v, nil
}

// initValue reads one initial value of a variable of type t as the bits FormatImm prints
// back: a float literal is rounded to an f32 variable's precision; the narrow float types
// take their bits as an integer.
func initValue(s string, t Type) (uint64, error) {
	im, err := parseImm(s, t)
	if err != nil {
		return 0, err
	}
	switch {
	case t == F32 && im.Type == F64:
		return uint64(math.Float32bits(float32(math.Float64frombits(im.Bits)))), nil
	case t == F64 && im.Type == F32:
		return math.Float64bits(float64(math.Float32frombits(uint32(im.Bits)))), nil
	case (t == F32 || t == F64) && !im.Type.IsFloat():
		return 0, errorf("an integer %q for a .%s variable (write a float: 1.0, 0f3F800000)", s, t)
	case t != F32 && t != F64 && im.Type.IsFloat():
		return 0, errorf("a float %q for a .%s variable (write its bits as an integer)", s, t)
	case im.Type != t:
		return 0, errorf("%q does not fit a .%s variable", s, t)
	}
	return im.Bits, nil
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
	weak := false
	for {
		head = strings.TrimSpace(head)
		w, _, _ := strings.Cut(head, " ")
		if i := strings.IndexByte(w, '('); i >= 0 {
			w = w[:i]
		}
		switch w {
		case ".extern":
			if f.Extern || f.Visible || weak {
				return p.errorf("bad function header %q: one linking directive (.extern, .visible or .weak)", head)
			}
			f.Extern, head = true, head[len(".extern"):]
			continue
		case ".visible":
			if f.Extern || f.Visible || weak {
				return p.errorf("bad function header %q: one linking directive (.extern, .visible or .weak)", head)
			}
			f.Visible, head = true, head[len(".visible"):]
			continue
		case ".weak":
			return p.errorf("bad function header %q: .weak functions are not supported", head)
		case ".entry":
			f.Entry, head = true, head[len(".entry"):]
		case ".func":
			head = head[len(".func"):]
		default:
			return p.errorf("bad function header %q", head)
		}
		break
	}
	head = strings.TrimSpace(head)
	if strings.HasPrefix(head, "(") {
		if f.Entry {
			return p.errorf("bad function header: an .entry returns nothing (no return list)")
		}
		end := strings.IndexByte(head, ')')
		if end < 0 {
			return p.errorf("bad function header: the return list has no ')'")
		}
		rets, err := parseParams(head[1:end])
		if err != nil {
			return p.errorf("%v", err)
		}
		if len(rets) == 0 {
			return p.errorf("bad function header: an empty return list")
		}
		f.Rets, head = rets, strings.TrimSpace(head[end+1:])
	}
	open := strings.IndexByte(head, '(')
	if open < 0 {
		return p.errorf("no parameter list in %q", head)
	}
	f.Name = strings.TrimSpace(head[:open])
	if !ValidIdent(f.Name) {
		return p.errorf("function name %q is not a PTX identifier", f.Name)
	}
	closeAt := strings.LastIndexByte(head, ')')
	if closeAt < open || strings.Count(head[open:closeAt+1], "(") != 1 || strings.Count(head[open:closeAt+1], ")") != 1 {
		return p.errorf("function %s: bad parameter list in %q", f.Name, head)
	}
	params, err := parseParams(head[open+1 : closeAt])
	if err != nil {
		return p.errorf("function %s: %v", f.Name, err)
	}
	f.Params = params
	// What follows the parameter list on the header's lines: directives, and perhaps the "{".
	tail := strings.TrimSpace(head[closeAt+1:])
	brace := false
	if i := strings.IndexByte(tail, '{'); i >= 0 {
		if decl || strings.TrimSpace(tail[i+1:]) != "" {
			return p.errorf("function %s: unexpected %q after the body's {", f.Name, tail[i+1:])
		}
		brace, tail = true, strings.TrimSpace(tail[:i])
	}
	if decl != f.Extern {
		if decl {
			return p.errorf("function %s: a declaration without a body must be .extern", f.Name)
		}
		return p.errorf("function %s: an .extern function has no body (end its header with ';')", f.Name)
	}
	if decl && tail != "" {
		return p.errorf("function %s: directives %q on a declaration", f.Name, tail)
	}
	p.m.Funcs = append(p.m.Funcs, f)
	seen := map[string]bool{}
	if err := p.directives(f, tail, seen); err != nil {
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
		if err := p.directives(f, s, seen); err != nil {
			return err
		}
	}
	return p.body(f)
}

// directives reads performance directives (".reqntid 16, 1 .minnctapersm 2") into f; every
// word must belong to one, and none may come twice (seen). Extents left out are 1, as
// Print writes them.
func (p *parser) directives(f *Func, s string, seen map[string]bool) error {
	fs := strings.Fields(strings.ReplaceAll(s, ",", " , "))
	for i := 0; i < len(fs); {
		name, j := fs[i], i+1
		for j < len(fs) && !strings.HasPrefix(fs[j], ".") {
			j++
		}
		var nums []int
		for k, v := range fs[i+1 : j] {
			if k%2 == 1 {
				if v != "," {
					return p.errorf("function %s: bad directive %s: the extents are separated by commas", f.Name, name)
				}
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || v[0] == '+' {
				return p.errorf("function %s: bad directive %s: %q is not a positive integer", f.Name, name, v)
			}
			nums = append(nums, n)
		}
		if j > i+1 && fs[j-1] == "," {
			return p.errorf("function %s: bad directive %s: a trailing comma", f.Name, name)
		}
		if seen[name] {
			return p.errorf("function %s: directive %s given twice", f.Name, name)
		}
		seen[name] = true
		dims := func(d *[3]int) error {
			if len(nums) < 1 || len(nums) > 3 {
				return p.errorf("function %s: %s takes 1 to 3 extents, got %d", f.Name, name, len(nums))
			}
			*d = [3]int{1, 1, 1}
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

// parseParams reads a parameter list: ".param [.align N] .type name[[N]]" each, comma-
// separated, with a type and an identifier (no initializer, no .extern, no "[]").
func parseParams(s string) ([]Param, error) {
	var out []Param
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, errorf("an empty parameter in %q", s)
		}
		if strings.Contains(part, "=") {
			return nil, errorf("parameter %q has an initializer", part)
		}
		v, err := parseVar(part)
		if err != nil {
			return nil, err
		}
		if v.Space != SpaceParam || v.Extern {
			return nil, errorf("parameter %q is not in .param", part)
		}
		if v.Array < 0 {
			return nil, errorf("parameter %q: an array parameter needs a size", part)
		}
		out = append(out, Param{Name: v.Name, Type: v.Type, Array: max(v.Array, 0), Align: v.Align})
	}
	return out, nil
}

// regDeclRE is a register declaration as Print writes it: ".reg .TYPE %PREFIX<N>;", the prefix
// a % then an identifier that does not end in a digit (register names are prefix + number).
var regDeclRE = regexp.MustCompile(`^\.reg\s+\.([a-z0-9]+)\s+(%[A-Za-z_$][A-Za-z0-9_$]*)<([0-9]+)>\s*;$`)

func (p *parser) body(f *Func) error {
	p.regs, p.typed = map[string]regDecl{}, map[Type]string{}
	depth := 0
	pos := Pos{}
	for {
		s, ok := p.next()
		if !ok {
			return p.errorf("function %s: missing }", f.Name)
		}
		first, _, _ := strings.Cut(s, " ")
		switch {
		case s == "}" && depth == 0:
			return nil
		case s == "{":
			depth++
			f.Body = append(f.Body, &Instr{Op: ScopeOpen})
		case s == "}":
			depth--
			f.Body = append(f.Body, &Instr{Op: ScopeClose})
		case first == ".reg":
			if err := p.regDecl(s); err != nil {
				return p.errorf("function %s: %v", f.Name, err)
			}
		case first == ".loc":
			fs := strings.Fields(s)
			if len(fs) != 4 {
				return p.errorf("bad .loc %q (want .loc FILE LINE COLUMN)", s)
			}
			n, err1 := strconv.Atoi(fs[1])
			line, err2 := strconv.Atoi(fs[2])
			col, err3 := strconv.Atoi(fs[3])
			if err1 != nil || err2 != nil || err3 != nil || line < 0 || col < 0 {
				return p.errorf("bad .loc %q (want .loc FILE LINE COLUMN)", s)
			}
			if p.files[n] == "" {
				return p.errorf("bad .loc %q: no .file %d", s, n)
			}
			pos = Pos{File: p.files[n], Line: line}
		case first == ".param" || first == ".local" || first == ".shared" || first == ".extern":
			if !strings.HasSuffix(s, ";") {
				return p.errorf("function %s: no ';' at the end of %q", f.Name, s)
			}
			v, err := parseVar(strings.TrimSuffix(s, ";"))
			if err != nil {
				return p.errorf("%v", err)
			}
			if v.Space != SpaceParam && v.Space != SpaceLocal && v.Space != SpaceShared || v.Extern && v.Space != SpaceShared {
				return p.errorf("function %s: variable %s: .%s is not a function-scope state space (.param, .local, .shared, .extern .shared)", f.Name, v.Name, v.Space)
			}
			if depth > 0 {
				f.Body = append(f.Body, &Instr{Decl: v})
			} else {
				f.Vars = append(f.Vars, v)
			}
		case strings.HasSuffix(s, ":") && !strings.ContainsAny(s, " \t"):
			l := strings.TrimSuffix(s, ":")
			if !ValidIdent(l) {
				return p.errorf("function %s: label %q is not a PTX identifier", f.Name, l)
			}
			f.Body = append(f.Body, &Instr{Label: l})
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

// regDecl reads ".reg .f32 %f<4>;": one prefix per type and one type per prefix (kgen's IR
// numbers registers per type), at least one register.
func (p *parser) regDecl(s string) error {
	m := regDeclRE.FindStringSubmatch(s)
	if m == nil {
		return errorf("bad register declaration %q (want .reg .TYPE %%PREFIX<N>;)", s)
	}
	t, ok := ParseType(m[1])
	if !ok {
		return errorf("bad register declaration %q: unknown type .%s", s, m[1])
	}
	prefix := m[2]
	if c := prefix[len(prefix)-1]; c >= '0' && c <= '9' {
		return errorf("bad register declaration %q: a prefix ending in a digit (%s) makes register names ambiguous", s, prefix)
	}
	if _, special := SpecialType(Special(prefix)); special {
		return errorf("bad register declaration %q: %s is a special register", s, prefix)
	}
	n, err := strconv.Atoi(m[3])
	if err != nil || n < 1 || n > 1<<24 {
		return errorf("bad register declaration %q: the count must be 1 to 2^24", s)
	}
	if _, dup := p.regs[prefix]; dup {
		return errorf("registers %s declared twice", prefix)
	}
	if other, dup := p.typed[t]; dup {
		return errorf("two register prefixes for .%s (%s, %s): declare one per type", t, other, prefix)
	}
	p.regs[prefix] = regDecl{t: t, n: n}
	p.typed[t] = prefix
	return nil
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

// qualRE is one qualifier of an instruction: letters, digits, '_' and "::".
var qualRE = regexp.MustCompile(`^[A-Za-z0-9_]+(::[A-Za-z0-9_]+)*$`)

func (p *parser) instr(s string) (*Instr, error) {
	if !strings.HasSuffix(s, ";") {
		return nil, errorf("%q: no ';' at the end of the instruction", s)
	}
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	if i := strings.IndexByte(s, ';'); i >= 0 {
		return nil, errorf("%q: %d statements on one line; Parse reads one a line, as Print writes them", s+";", strings.Count(s, ";")+1)
	}
	in := &Instr{}
	if strings.HasPrefix(s, "@") {
		sp := strings.IndexAny(s, " \t")
		if sp < 0 {
			return nil, errorf("%q: a guard without an instruction", s)
		}
		g := s[1:sp]
		if strings.HasPrefix(g, "!") {
			in.GuardNeg, g = true, g[1:]
		}
		r, err := p.reg(g)
		if err != nil {
			return nil, errorf("%q: guard: %v", s, err)
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
	for _, q := range parts {
		if !qualRE.MatchString(q) {
			return nil, errorf("%q: bad qualifier %q", word, "."+q)
		}
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
		return nil, errorf("%q: %v", s, err)
	}
	for _, a := range args {
		if in.Op != "call" && strings.HasPrefix(a, "(") {
			return nil, errorf("%q: a parenthesised list %q outside a call (vectors are braced: {a, b})", s, a)
		}
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
	var stack []rune
	start := 0
	closer := map[rune]rune{'{': '}', '[': ']', '(': ')'}
	for i, c := range s {
		switch c {
		case '{', '[', '(':
			stack = append(stack, closer[c])
		case '}', ']', ')':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return nil, errorf("unbalanced brackets in %q", s)
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) == 0 {
				item := strings.TrimSpace(s[start:i])
				if item == "" {
					return nil, errorf("an empty operand in %q", s)
				}
				out = append(out, item)
				start = i + 1
			}
		}
	}
	if len(stack) != 0 {
		return nil, errorf("unbalanced brackets in %q", s)
	}
	rest := strings.TrimSpace(s[start:])
	if rest == "" && len(out) > 0 {
		return nil, errorf("an empty operand in %q", s)
	}
	if rest != "" {
		out = append(out, rest)
	}
	return out, nil
}

func (p *parser) reg(s string) (Reg, error) {
	j := len(s)
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	d, ok := p.regs[s[:j]]
	if !ok || j == len(s) {
		return Reg{}, errorf("undeclared register %s", s)
	}
	num := s[j:]
	n, err := strconv.Atoi(num)
	if err != nil || len(num) > 1 && num[0] == '0' {
		return Reg{}, errorf("bad register %s", s)
	}
	if n >= d.n {
		return Reg{}, errorf("register %s is beyond the %d declared (%s<%d>)", s, d.n, s[:j], d.n)
	}
	return Reg{Type: d.t, N: n}, nil
}

func (p *parser) operand(s string, t Type) (Operand, error) {
	enclosed := func(open, close string) bool {
		return strings.HasPrefix(s, open) && strings.HasSuffix(s, close) && len(s) >= 2
	}
	switch {
	case s == "_":
		return Sink{}, nil
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "("):
		if !enclosed("{", "}") && !enclosed("(", ")") {
			return nil, errorf("bad vector %q", s)
		}
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
			if _, ok := o.(Vec); ok {
				return nil, errorf("a vector inside a vector in %q", s)
			}
			v = append(v, o)
		}
		return v, nil
	case strings.HasPrefix(s, "["):
		if !enclosed("[", "]") {
			return nil, errorf("bad address %q", s)
		}
		in := strings.TrimSpace(s[1 : len(s)-1])
		parts, err := splitArgs(in)
		if err != nil {
			return nil, err
		}
		if len(parts) == 2 { // [tensorMap, {coords}]
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
			switch m.(type) {
			case Reg, Sym:
			default:
				return nil, errorf("bad tensor map %q in %q", parts[0], s)
			}
			return TensorAddr{Map: m, Coords: v}, nil
		}
		a := Addr{}
		base := in
		if i := strings.LastIndexByte(in, '+'); i > 0 {
			off, ok := parseAddrInt(in[i+1:])
			if !ok {
				return nil, errorf("bad address %s", s)
			}
			a.Off, base = off, in[:i]
		}
		if n, ok := parseAddrInt(base); ok {
			if a.Off != 0 || base != in && base == "" {
				return nil, errorf("bad address %s (a number plus an offset)", s)
			}
			a.Off = n
			return a, nil
		}
		b, err := p.operand(base, U64)
		if err != nil {
			return nil, err
		}
		switch b.(type) {
		case Reg, Sym, Special:
		default:
			return nil, errorf("bad address %s (the base is a register or a name)", s)
		}
		a.Base = b
		return a, nil
	case strings.Contains(s, "|"):
		i := strings.IndexByte(s, '|')
		x, err := p.operand(s[:i], t)
		if err != nil {
			return nil, err
		}
		y, err := p.reg(s[i+1:])
		if err != nil {
			return nil, err
		}
		switch x.(type) {
		case Reg, Sink:
		default:
			return nil, errorf("bad register pair %q", s)
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

// parseAddrInt reads an address's integer (an offset, or a whole absolute address) as
// ptxas does: decimal, hexadecimal (0x), octal (a leading 0) or binary (0b), an optional
// minus sign and U suffix, within int64.
func parseAddrInt(s string) (int64, bool) {
	t, neg := strings.CutPrefix(s, "-")
	t = strings.TrimSuffix(t, "U")
	if t == "" || strings.ContainsAny(t, "_+-") || strings.HasPrefix(t, "0o") || strings.HasPrefix(t, "0O") {
		return 0, false
	}
	v, err := strconv.ParseUint(t, 0, 64)
	switch {
	case err != nil:
		return 0, false
	case neg && v <= 1<<63:
		return int64(-v), true
	case !neg && v <= math.MaxInt64:
		return int64(v), true
	}
	return 0, false
}

// parseImm reads an immediate as FormatImm writes it; integers take the type t (or S64/U64
// when t is not an integer type). The error quotes an excerpt of s and says whether it is
// out of range or not a number.
func parseImm(s string, t Type) (Imm, error) {
	// An integer literal may end in U, as ptxas takes it (10U, 0x10U, -10U; not 10u).
	if n, ok := strings.CutSuffix(s, "U"); ok && strings.TrimPrefix(n, "-") != "" && !isFloatLit(n) {
		s = n
	}
	if strings.ContainsAny(s, "_+") || strings.HasPrefix(strings.TrimPrefix(s, "-"), "0o") || strings.HasPrefix(strings.TrimPrefix(s, "-"), "0O") {
		return Imm{}, errorf("bad immediate %q", s)
	}
	im, err := parseImmRaw(s, t)
	switch {
	case err == nil:
	case errors.Is(err, strconv.ErrRange):
		return Imm{}, errorf("immediate %q out of range", s)
	default:
		return Imm{}, errorf("bad immediate %q", s)
	}
	// An integer must fit its type's width; a signed type's bit pattern (0xFFFFFFFF for .s32)
	// is kept sign-extended, as a negative literal is, so that it prints and parses back alike.
	b := im.Type.Bits()
	if im.Type.IsInt() && b < 64 || im.Type.Kind() == KindBits && b < 64 {
		neg := strings.HasPrefix(s, "-")
		switch {
		case im.Type.Kind() == KindSigned && neg:
			if int64(im.Bits) < -(int64(1) << (b - 1)) {
				return Imm{}, errorf("immediate %q out of range for .%s", s, im.Type)
			}
		case im.Bits >= uint64(1)<<b:
			return Imm{}, errorf("immediate %q out of range for .%s", s, im.Type)
		case im.Type.Kind() == KindSigned:
			im.Bits = uint64(signExtend(im.Bits, b))
		}
	}
	return im, nil
}

// isFloatLit reports whether s is written as a float: decimal with a point or an exponent
// (a hexadecimal integer's e is a digit, 0x1e and 0X1E alike).
func isFloatLit(s string) bool {
	u := strings.ToLower(strings.TrimPrefix(s, "-"))
	return strings.HasPrefix(u, "0f") || strings.HasPrefix(u, "0d") || strings.ContainsAny(u, ".e") && !strings.HasPrefix(u, "0x")
}

func parseImmRaw(s string, t Type) (Imm, error) {
	switch {
	// A float's bits in hexadecimal take exactly 8 digits after 0f and 16 after 0d, as
	// ptxas reads them (0f3F80 is a syntax error there, not 0f00003F80).
	case strings.HasPrefix(s, "0f") || strings.HasPrefix(s, "0F"):
		if len(s) != 2+8 {
			return Imm{}, fmt.Errorf("%q: a 0f literal takes exactly 8 hexadecimal digits", s)
		}
		b, err := strconv.ParseUint(s[2:], 16, 32)
		return Imm{Type: F32, Bits: b}, err
	case strings.HasPrefix(s, "0d") || strings.HasPrefix(s, "0D"):
		if len(s) != 2+16 {
			return Imm{}, fmt.Errorf("%q: a 0d literal takes exactly 16 hexadecimal digits", s)
		}
		b, err := strconv.ParseUint(s[2:], 16, 64)
		return Imm{Type: F64, Bits: b}, err
	case isFloatLit(s):
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
