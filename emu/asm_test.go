package emu

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// asm is a small PTX reader for tests: enough of the syntax to write kernels by hand.
// Registers are declared with ".reg .TYPE %prefix<N>;" inside bodies. Every instruction gets
// as Pos its Go line: where the text's first line is in the calling test file (or another
// test file of the package, for a constant defined there), plus its line in the text; the
// asm call's line plus its line in the text when the text is not found there (built at run
// time).
func asm(t testing.TB, src string) *ptx.Module {
	t.Helper()
	return asmFrom(t, 2, src)
}

// asmFrom is asm with the call to place skip frames up.
func asmFrom(t testing.TB, skip int, src string) *ptx.Module {
	t.Helper()
	_, file, line, _ := runtime.Caller(skip)
	file, line = srcLine(file, line, src)
	if i := strings.LastIndex(file, "/emu/"); i >= 0 {
		file = file[i+1:]
	}
	a := &asmReader{src: src, file: file, line0: line, m: &ptx.Module{Target: ptx.SM90a}}
	if err := a.module(); err != nil {
		t.Fatalf("asm: %v", err)
	}
	return canonical(t, a.m)
}

// unverified holds the modules asmUnverified made: the emulator runs them although they fail
// ptx.Verify.
var unverified sync.Map

func init() {
	verifyExempt = func(m *ptx.Module) bool { _, ok := unverified.Load(m); return ok }
}

// asmUnverified is asm for a test of the emulator's semantics written in PTX that ptx.Verify
// refuses (a form of the test reader, an instruction the tables lack, a target or version
// it needs): System.Launch runs it anyway. Every other module the emulator gets is verified.
func asmUnverified(t testing.TB, src string) *ptx.Module {
	t.Helper()
	m := asmFrom(t, 2, src)
	unverified.Store(m, true)
	return m
}

// canonical returns m as ptx.Parse reads its printed text (the IR the DSL and jit give the
// emulator, which System.Launch verifies), with m's Go positions, or m itself when the text
// does not parse (a test of what the emulator does with a module that fails ptx.Verify).
func canonical(t testing.TB, m *ptx.Module) *ptx.Module {
	t.Helper()
	p, err := ptx.Parse(m.String())
	if err != nil || len(p.Funcs) != len(m.Funcs) {
		return m
	}
	for i, f := range p.Funcs {
		if len(f.Body) != len(m.Funcs[i].Body) {
			return m
		}
		for j, in := range f.Body {
			in.Pos = m.Funcs[i].Body[j].Pos
		}
	}
	return p
}

// srcLine finds the Go file and line where the PTX text src starts (so that line0 plus a
// line's index in src is its Go line): its first non-blank line, looked for in file and then
// in the other test files of its directory. It returns file and line unchanged when the text
// is nowhere (or more than once in one file).
func srcLine(file string, line int, src string) (string, int) {
	lines := strings.Split(src, "\n")
	first := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return file, line
	}
	want := strings.TrimSpace(lines[first])
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "*_test.go"))
	for _, f := range append([]string{file}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		at := -1
		for i, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(strings.TrimSpace(l), want) {
				if at >= 0 {
					at = -2 // ambiguous
					break
				}
				at = i + 1
			}
		}
		if at > 0 {
			return f, at - first
		}
	}
	return file, line
}

type asmReader struct {
	src   string
	pos   int
	file  string
	line0 int
	m     *ptx.Module
	regs  map[string]ptx.Type
	rbase map[string]int // register prefixes of one type get disjoint numbers
}

var (
	reFuncHead = regexp.MustCompile(`^(\.extern\s+|\.visible\s+)*\.(entry|func)\s*(\([^)]*\))?\s*([A-Za-z_$][\w$]*)\s*(\([^)]*\))?`)
	reReg      = regexp.MustCompile(`^(%[A-Za-z_]+)(\d+)$`)
	reLabel    = regexp.MustCompile(`^\s*([A-Za-z_$][\w$]*)\s*:`)
	reVar      = regexp.MustCompile(`^\.(global|shared|const|local|param)\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([A-Za-z_$][\w$]*)\s*(?:\[(\d*)\])?\s*(?:=\s*\{?([^}]*)\}?)?$`)
	reRegDecl  = regexp.MustCompile(`^\.reg\s+\.(\w+)\s+(%[A-Za-z_]+)<(\d+)>$`)
)

func (a *asmReader) lineAt(p int) int { return strings.Count(a.src[:p], "\n") }

func stripComments(s string) string {
	var b strings.Builder
	for _, ln := range strings.Split(s, "\n") {
		if i := strings.Index(ln, "//"); i >= 0 {
			ln = ln[:i]
		}
		b.WriteString(ln)
		b.WriteString("\n")
	}
	return b.String()
}

func (a *asmReader) module() error {
	a.src = stripComments(a.src)
	for {
		rest := a.src[a.pos:]
		trim := strings.TrimLeft(rest, " \t\n\r")
		a.pos += len(rest) - len(trim)
		if trim == "" {
			return nil
		}
		if h := reFuncHead.FindStringSubmatch(trim); h != nil {
			if err := a.function(h, trim); err != nil {
				return err
			}
			continue
		}
		end := strings.IndexByte(trim, ';')
		if end < 0 {
			return fmt.Errorf("unterminated statement %q", trim)
		}
		stmt := strings.TrimSpace(trim[:end])
		a.pos += end + 1
		v, err := parseVar(stmt)
		if err != nil {
			return err
		}
		a.m.Vars = append(a.m.Vars, v)
	}
}

func parseVar(stmt string) (*ptx.Var, error) {
	ext := false
	if strings.HasPrefix(stmt, ".extern ") {
		ext = true
		stmt = strings.TrimSpace(stmt[len(".extern "):])
	}
	g := reVar.FindStringSubmatch(stmt)
	if g == nil {
		return nil, fmt.Errorf("cannot read declaration %q", stmt)
	}
	sp := map[string]ptx.Space{"global": ptx.SpaceGlobal, "shared": ptx.SpaceShared, "const": ptx.SpaceConst, "local": ptx.SpaceLocal, "param": ptx.SpaceParam}[g[1]]
	ty, ok := ptx.ParseType(g[3])
	if !ok {
		return nil, fmt.Errorf("type %q", g[3])
	}
	v := &ptx.Var{Space: sp, Name: g[4], Type: ty, Extern: ext}
	if g[2] != "" {
		v.Align, _ = strconv.Atoi(g[2])
	}
	if strings.Contains(stmt, "[") {
		if g[5] == "" {
			v.Array = -1
		} else {
			v.Array, _ = strconv.Atoi(g[5])
		}
	}
	if g[6] != "" {
		for _, x := range strings.Split(g[6], ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(x), 0, 64)
			if err != nil {
				return nil, fmt.Errorf("initializer %q", x)
			}
			v.Init = append(v.Init, n)
		}
	}
	return v, nil
}

func parseParams(s string) ([]ptx.Param, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "("), ")"))
	if s == "" {
		return nil, nil
	}
	var out []ptx.Param
	for _, p := range strings.Split(s, ",") {
		f := strings.Fields(strings.TrimSpace(p))
		if len(f) < 3 || f[0] != ".param" {
			return nil, fmt.Errorf("parameter %q", p)
		}
		q := ptx.Param{}
		i := 1
		if f[i] == ".align" {
			q.Align, _ = strconv.Atoi(f[i+1])
			i += 2
		}
		ty, ok := ptx.ParseType(strings.TrimPrefix(f[i], "."))
		if !ok {
			return nil, fmt.Errorf("parameter type %q", f[i])
		}
		q.Type = ty
		name := f[i+1]
		if j := strings.IndexByte(name, '['); j >= 0 {
			q.Array, _ = strconv.Atoi(strings.TrimSuffix(name[j+1:], "]"))
			name = name[:j]
		}
		q.Name = name
		out = append(out, q)
	}
	return out, nil
}

func (a *asmReader) function(h []string, trim string) error {
	f := &ptx.Func{Name: h[4], Entry: h[2] == "entry", Extern: strings.Contains(h[1], ".extern"), Visible: strings.Contains(h[1], ".visible")}
	var err error
	if h[2] == "func" && h[5] == "" && h[3] != "" { // .func name(params) without returns
		h[5], h[3] = h[3], ""
	}
	if f.Params, err = parseParams(h[5]); err != nil {
		return err
	}
	if f.Rets, err = parseParams(h[3]); err != nil {
		return err
	}
	a.pos += len(h[0])
	a.m.Funcs = append(a.m.Funcs, f)
	rest := strings.TrimLeft(a.src[a.pos:], " \t\n\r")
	a.pos = len(a.src) - len(rest)
	if strings.HasPrefix(rest, ";") {
		a.pos++
		f.Extern = true
		return nil
	}
	if !strings.HasPrefix(rest, "{") {
		return fmt.Errorf("function %s: want { after the header", f.Name)
	}
	// Find the matching brace.
	depth, end := 0, -1
	for i, c := range rest {
		if c == '{' {
			depth++
		} else if c == '}' {
			depth--
			if depth == 0 {
				end = i
				break
			}
		}
	}
	if end < 0 {
		return fmt.Errorf("function %s: unbalanced braces", f.Name)
	}
	body := rest[1:end]
	bodyStart := a.pos + 1
	a.pos += end + 1
	a.regs = map[string]ptx.Type{}
	a.rbase = map[string]int{}
	off := 0
	for _, stmt := range strings.SplitAfter(body, ";") {
		stmtOff := bodyStart + off
		off += len(stmt)
		s := strings.TrimSpace(strings.TrimSuffix(stmt, ";"))
		for {
			m := reLabel.FindStringSubmatch(s)
			if m == nil || strings.HasPrefix(strings.TrimSpace(s), "@") {
				break
			}
			f.Body = append(f.Body, &ptx.Instr{Label: m[1]})
			s = strings.TrimSpace(s[len(m[0]):])
		}
		if s == "" {
			continue
		}
		line := a.lineAt(stmtOff + strings.Index(stmt, s)) // the instruction's line, after any label
		if g := reRegDecl.FindStringSubmatch(s); g != nil {
			ty, ok := ptx.ParseType(g[1])
			if !ok {
				return fmt.Errorf("register type %q", g[1])
			}
			a.regs[g[2]] = ty
			same := 0
			for q, t := range a.regs {
				if t == ty && q != g[2] {
					same++
				}
			}
			a.rbase[g[2]] = 1000 * same
			continue
		}
		if strings.HasPrefix(s, ".") {
			v, err := parseVar(s)
			if err != nil {
				return err
			}
			f.Vars = append(f.Vars, v)
			continue
		}
		in, err := a.instr(s)
		if err != nil {
			return fmt.Errorf("%s line %d: %v", f.Name, line, err)
		}
		in.Pos = ptx.Pos{File: a.file, Line: a.line0 + line}
		f.Body = append(f.Body, in)
	}
	return nil
}

func splitTop(s string) []string {
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
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

func (a *asmReader) instr(s string) (*ptx.Instr, error) {
	in := &ptx.Instr{}
	if strings.HasPrefix(s, "@") {
		sp := strings.IndexAny(s, " \t")
		g := s[1:sp]
		if strings.HasPrefix(g, "!") {
			in.GuardNeg = true
			g = g[1:]
		}
		r, err := a.operand(g, ptx.Pred)
		if err != nil {
			return nil, err
		}
		reg, ok := r.(ptx.Reg)
		if !ok {
			return nil, fmt.Errorf("guard %q", g)
		}
		in.Guard = &reg
		s = strings.TrimSpace(s[sp:])
	}
	opText, rest := s, ""
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		opText, rest = s[:i], strings.TrimSpace(s[i:])
	}
	toks := strings.Split(opText, ".")
	in.Op = toks[0]
	for _, t := range toks[1:] {
		if ty, ok := ptx.ParseType(t); ok && ty != ptx.Pred || t == "pred" && len(in.Types) == 0 && toks[0] != "mov" && false {
			in.Types = append(in.Types, ty)
			continue
		}
		if t == "pred" {
			in.Types = append(in.Types, ptx.Pred)
			continue
		}
		in.Q = append(in.Q, t)
	}
	typ := in.Type()
	if in.Op == "call" {
		// call (rets), fn, (args)
		for _, part := range splitTop(rest) {
			if strings.HasPrefix(part, "(") {
				var v ptx.Vec
				for _, e := range splitTop(part[1 : len(part)-1]) {
					o, err := a.operand(e, ptx.NoType)
					if err != nil {
						return nil, err
					}
					v = append(v, o)
				}
				in.Args = append(in.Args, v)
				continue
			}
			in.Args = append(in.Args, ptx.Sym(part))
		}
		return in, nil
	}
	for _, part := range splitTop(rest) {
		o, err := a.operand(part, typ)
		if err != nil {
			return nil, err
		}
		in.Args = append(in.Args, o)
	}
	return in, nil
}

func (a *asmReader) operand(s string, t ptx.Type) (ptx.Operand, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "_":
		return ptx.Sink{}, nil
	case strings.HasPrefix(s, "!%"): // a negated predicate source
		o, err := a.operand(s[1:], ptx.Pred)
		if r, ok := o.(ptx.Reg); ok && err == nil {
			return ptx.Not{P: r}, nil
		}
		return nil, fmt.Errorf("bad negated predicate %q", s)
	case strings.HasPrefix(s, "{"):
		var v ptx.Vec
		for _, e := range splitTop(s[1 : len(s)-1]) {
			o, err := a.operand(e, t)
			if err != nil {
				return nil, err
			}
			v = append(v, o)
		}
		return v, nil
	case strings.HasPrefix(s, "["):
		inner := strings.TrimSpace(s[1 : len(s)-1])
		if parts := splitTop(inner); len(parts) == 2 { // a tensor operand [tensorMap, {coords}]
			m, err := a.operand(parts[0], ptx.U64)
			if err != nil {
				return nil, err
			}
			c, err := a.operand(parts[1], ptx.S32)
			v, ok := c.(ptx.Vec)
			if err != nil || !ok {
				return nil, fmt.Errorf("tensor coordinates %q", parts[1])
			}
			return ptx.TensorAddr{Map: m, Coords: v}, nil
		}
		ad := ptx.Addr{}
		if i := strings.LastIndexAny(inner, "+-"); i > 0 {
			n, err := strconv.ParseInt(strings.TrimSpace(inner[i:]), 0, 64)
			if err != nil {
				return nil, fmt.Errorf("address offset %q", inner[i:])
			}
			ad.Off = n
			inner = strings.TrimSpace(inner[:i])
		}
		if n, err := strconv.ParseInt(inner, 0, 64); err == nil {
			ad.Off += n
			return ad, nil
		}
		b, err := a.operand(inner, ptx.U64)
		if err != nil {
			return nil, err
		}
		ad.Base = b
		return ad, nil
	case strings.HasPrefix(s, "%"):
		if m := reReg.FindStringSubmatch(s); m != nil {
			if ty, ok := a.regs[m[1]]; ok {
				n, _ := strconv.Atoi(m[2])
				return ptx.Reg{Type: ty, N: a.rbase[m[1]] + n}, nil
			}
		}
		return ptx.Special(s), nil
	case strings.HasPrefix(s, "0f") || strings.HasPrefix(s, "0F"):
		n, err := strconv.ParseUint(s[2:], 16, 32)
		return ptx.Imm{Type: ptx.F32, Bits: n}, err
	case strings.HasPrefix(s, "0d") || strings.HasPrefix(s, "0D"):
		n, err := strconv.ParseUint(s[2:], 16, 64)
		return ptx.Imm{Type: ptx.F64, Bits: n}, err
	}
	if n, err := strconv.ParseInt(s, 0, 64); err == nil {
		return ptx.Imm{Type: ptx.U64, Bits: uint64(n)}, nil
	}
	if n, err := strconv.ParseUint(s, 0, 64); err == nil {
		return ptx.Imm{Type: ptx.U64, Bits: n}, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.Contains(s, ".") {
		return ptx.Imm{Type: ptx.F64, Bits: math.Float64bits(f)}, nil
	}
	return ptx.Sym(s), nil
}

func TestAsmReader(t *testing.T) {
	m := asm(t, `
.global .u32 g[4] = {1, 2, 3, 4};
.visible .entry k(.param .u64 out, .param .u32 n)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %tid.x;
L1:	setp.lt.u32 %p0, %r0, 4;
	@!%p0 bra L2;
	st.global.v2.u32 [%rd0+8], {%r0, %r1};
L2:
	ret;
}`)
	f := m.Funcs[0]
	if f.Name != "k" || len(f.Params) != 2 || len(m.Vars) != 1 || len(m.Vars[0].Init) != 4 {
		t.Fatalf("bad module: %+v", f)
	}
	got := ""
	for _, in := range f.Body {
		got += ptx.FormatInstr(in) + "\n"
	}
	want := "ld.param.u64 %ud0, [out];\nmov.u32 %u0, %tid.x;\nL1:\nsetp.lt.u32 %p0, %u0, 4;\n@!%p0 bra L2;\nst.global.v2.u32 [%ud0+8], {%u0, %u1};\nL2:\nret;\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
