package devlib

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Param is one parameter or return value of a device function as the PTX call ABI passes it.
//
// Scalars are .b32 (every integer of 32 bits or fewer, float) or .b64 (i64, double, pointers);
// aggregates passed by value (__half, __nv_bfloat16) are byte arrays: `.param .align A .b8 x[N]`.
type Param struct {
	// Type is the PTX type: ".b32" or ".b64" for scalars, ".b8" for an aggregate.
	Type string
	// Align is an aggregate's .align; 0 for a scalar.
	Align int
	// Len is an aggregate's size in bytes (the array length); 0 for a scalar.
	Len int
}

// Bits returns the parameter's size in bits.
func (p Param) Bits() int {
	if p.Len > 0 {
		return 8 * p.Len
	}
	n, _ := strconv.Atoi(strings.TrimLeft(p.Type, ".bsuf"))
	return n
}

// String returns the parameter as PTX without a name: ".b64" or ".align 2 .b8[2]".
func (p Param) String() string {
	if p.Len > 0 || p.Align > 0 {
		return fmt.Sprintf(".align %d %s[%d]", p.Align, p.Type, p.Len)
	}
	return p.Type
}

// decl returns the parameter as a PTX .param declaration named name.
func (p Param) decl(name string) string {
	if p.Len > 0 || p.Align > 0 {
		return fmt.Sprintf(".param .align %d %s %s[%d]", p.Align, p.Type, name, p.Len)
	}
	return fmt.Sprintf(".param %s %s", p.Type, name)
}

// sameABI reports whether a caller's declaration q passes what p expects. Scalars of the same
// width match whatever their PTX type letter (.b32, .u32, .s32, .f32); aggregates must agree
// in size and alignment.
func (p Param) sameABI(q Param) bool {
	pa, qa := p.Len > 0 || p.Align > 0, q.Len > 0 || q.Align > 0
	if pa != qa {
		return false
	}
	if pa {
		return p.Len == q.Len && p.Align == q.Align && p.Bits() == q.Bits()
	}
	return p.Bits() == q.Bits()
}

// Signature is the PTX call ABI of one device function.
type Signature struct {
	// Name is the function's symbol, for example "nvshmemx_putmem_block".
	Name string
	// Return is the return value; nil for a void function.
	Return *Param
	// Params are the parameters in order.
	Params []Param
	// LLVM is the LLVM signature it was derived from, for example "void (ptr, ptr, i64, i32)";
	// empty when the signature was read from PTX.
	LLVM string
}

// Decl returns the signature as a PTX declaration, for example
// `.extern .func (.param .b64 ret) nvshmem_ptr(.param .b64 p0, .param .b32 p1);`.
func (s Signature) Decl() string {
	var b strings.Builder
	b.WriteString(".extern .func ")
	if s.Return != nil {
		b.WriteString("(" + s.Return.decl("ret") + ") ")
	}
	b.WriteString(s.Name + "(")
	for i, p := range s.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.decl("p" + strconv.Itoa(i)))
	}
	b.WriteString(");")
	return b.String()
}

// String returns the signature compactly: "nvshmem_ptr(.b64, .b32) .b64".
func (s Signature) String() string {
	ps := make([]string, len(s.Params))
	for i, p := range s.Params {
		ps[i] = p.String()
	}
	r := s.Name + "(" + strings.Join(ps, ", ") + ")"
	if s.Return != nil {
		r += " " + s.Return.String()
	}
	return r
}

// ---- LLVM IR -> Signature ----

// llvmType is the size and ABI alignment of an LLVM type under NVPTX's data layout.
type llvmType struct {
	size, align int
	agg         bool // a struct or array: passed as a .b8 array
	fp          bool
}

// typeTable resolves LLVM types. named holds the bodies of %named types as written.
type typeTable struct {
	named    map[string]string
	memo     map[string]llvmType
	visiting map[string]bool // named types being resolved, to refuse recursive ones
}

func newTypeTable() *typeTable {
	return &typeTable{named: map[string]string{}, memo: map[string]llvmType{}, visiting: map[string]bool{}}
}

// maxTypeSize bounds the size of a type, so absurd input cannot overflow.
const maxTypeSize = 1 << 30

// add records a line `%name = type { ... }`; other lines are ignored.
func (tt *typeTable) add(line string) {
	name, body, ok := strings.Cut(line, " = type ")
	if !ok || !strings.HasPrefix(name, "%") {
		return
	}
	tt.named[name] = strings.TrimSpace(body)
}

func (tt *typeTable) resolve(t string, depth int) (llvmType, error) {
	t = strings.TrimSpace(t)
	if r, ok := tt.memo[t]; ok {
		return r, nil
	}
	if depth > 32 {
		return llvmType{}, fmt.Errorf("type %s nests too deeply", t)
	}
	var r llvmType
	switch {
	case t == "ptr" || strings.HasPrefix(t, "ptr addrspace("):
		r = llvmType{size: 8, align: 8}
	case t == "half" || t == "bfloat":
		r = llvmType{size: 2, align: 2, fp: true}
	case t == "float":
		r = llvmType{size: 4, align: 4, fp: true}
	case t == "double":
		r = llvmType{size: 8, align: 8, fp: true}
	case len(t) > 1 && t[0] == 'i' && strings.Trim(t[1:], "0123456789") == "":
		bits, err := strconv.Atoi(t[1:])
		if err != nil || bits <= 0 || bits > 1<<16 {
			return llvmType{}, fmt.Errorf("bad integer type %s", t)
		}
		n := (bits + 7) / 8
		sz := 1
		for sz < n {
			sz *= 2
		}
		r = llvmType{size: sz, align: min(sz, 16)}
		if bits == 128 {
			r.agg = true // i128 is passed as .align 16 .b8 [16]
		}
	case strings.HasPrefix(t, "%"):
		body, ok := tt.named[t]
		if !ok {
			return llvmType{}, fmt.Errorf("unknown type %s", t)
		}
		if body == "opaque" {
			return llvmType{}, fmt.Errorf("opaque type %s", t)
		}
		if tt.visiting[t] {
			return llvmType{}, fmt.Errorf("recursive type %s", t)
		}
		tt.visiting[t] = true
		var err error
		r, err = tt.resolve(body, depth+1)
		delete(tt.visiting, t)
		if err != nil {
			return llvmType{}, fmt.Errorf("%s: %w", t, err)
		}
	case strings.HasPrefix(t, "<{") && strings.HasSuffix(t, "}>"):
		fields, err := tt.fields(t[2:len(t)-2], depth)
		if err != nil {
			return llvmType{}, err
		}
		r = llvmType{align: 1, agg: true}
		for _, f := range fields {
			r.size += f.size
			if r.size > maxTypeSize {
				return llvmType{}, fmt.Errorf("type %s is too large", t)
			}
		}
	case strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}"):
		fields, err := tt.fields(t[1:len(t)-1], depth)
		if err != nil {
			return llvmType{}, err
		}
		r = llvmType{align: 1, agg: true}
		for _, f := range fields {
			r.size = roundUp(r.size, f.align) + f.size
			r.align = max(r.align, f.align)
			if r.size > maxTypeSize {
				return llvmType{}, fmt.Errorf("type %s is too large", t)
			}
		}
		r.size = roundUp(r.size, r.align)
	case strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"):
		n, elem, ok := strings.Cut(t[1:len(t)-1], " x ")
		cnt, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil || cnt < 0 || cnt > maxTypeSize {
			return llvmType{}, fmt.Errorf("bad array type %s", t)
		}
		e, err := tt.resolve(elem, depth+1)
		if err != nil {
			return llvmType{}, err
		}
		if e.size > 0 && cnt > maxTypeSize/e.size {
			return llvmType{}, fmt.Errorf("type %s is too large", t)
		}
		r = llvmType{size: cnt * e.size, align: e.align, agg: true}
	default:
		return llvmType{}, fmt.Errorf("unsupported type %s", t)
	}
	tt.memo[t] = r
	return r, nil
}

func (tt *typeTable) fields(s string, depth int) ([]llvmType, error) {
	var out []llvmType
	for _, f := range splitTop(s) {
		if strings.TrimSpace(f) == "" {
			continue
		}
		r, err := tt.resolve(f, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func roundUp(n, a int) int {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

// abiParam is how NVPTX (LLVM 19) passes a value of type t; byvalAlign is the align of a byval
// pointer parameter (0 when the parameter is not byval).
func (tt *typeTable) abiParam(t string, byvalAlign int) (Param, error) {
	r, err := tt.resolve(t, 0)
	if err != nil {
		return Param{}, err
	}
	if r.agg || byvalAlign > 0 {
		a := r.align
		if byvalAlign > a {
			a = byvalAlign
		}
		return Param{Type: ".b8", Align: a, Len: r.size}, nil
	}
	switch {
	case r.size <= 4:
		return Param{Type: ".b32"}, nil
	case r.size == 8:
		return Param{Type: ".b64"}, nil
	}
	return Param{}, fmt.Errorf("unsupported scalar type %s", t)
}

// splitTop splits s at commas outside (), {}, [] and <>.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{', '[', '<':
			depth++
		case ')', '}', ']', '>':
			depth--
		case '"':
			if j := strings.IndexByte(s[i+1:], '"'); j >= 0 {
				i += j + 1
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// leadingType returns the type at the start of s (an LLVM parameter such as
// `ptr noundef byval(%struct.__half) align 2 %1`) and the rest.
func leadingType(s string) (typ, rest string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ""
	}
	if c := s[0]; c == '{' || c == '[' || c == '<' {
		depth := 0
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '{', '[', '<':
				depth++
			case '}', ']', '>':
				depth--
				if depth == 0 {
					return s[:i+1], s[i+1:]
				}
			}
		}
		return s, ""
	}
	typ, rest, _ = strings.Cut(s, " ")
	if typ == "ptr" && strings.HasPrefix(rest, "addrspace(") {
		as, r, _ := strings.Cut(rest, ")")
		return typ + " " + as + ")", r
	}
	return typ, rest
}

// trailingType returns the type at the end of s (the text of a define line before @name).
func trailingType(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if c := s[len(s)-1]; c == '}' || c == ']' || c == '>' || c == ')' {
		depth := 0
		for i := len(s) - 1; i >= 0; i-- {
			switch s[i] {
			case '}', ']', '>', ')':
				depth++
			case '{', '[', '<', '(':
				depth--
				if depth == 0 {
					j := i
					// <{ ... }> and ptr addrspace(N)
					if s[i] == '(' {
						j = strings.LastIndexByte(s[:i], ' ') + 1
						if s[j:i] == "addrspace" && j > 0 {
							k := strings.LastIndexByte(s[:j-1], ' ') + 1
							return s[k:]
						}
					}
					return s[j:]
				}
			}
		}
		return s
	}
	return s[strings.LastIndexByte(s, ' ')+1:]
}

// attrAlign returns N from the attribute `align N` of an LLVM parameter, or 0.
func attrAlign(rest string) int {
	f := strings.Fields(rest)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "align" {
			n, err := strconv.Atoi(f[i+1])
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// byvalType returns T from `byval(T)` in an LLVM parameter, or "".
func byvalType(rest string) string {
	i := strings.Index(rest, "byval(")
	if i < 0 {
		return ""
	}
	s := rest[i+len("byval("):]
	depth := 1
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[:j]
			}
		}
	}
	return ""
}

// parseDefine parses an LLVM `define` line into a Signature. ok is false for functions with
// internal or private linkage (not callable from another module).
func (tt *typeTable) parseDefine(line string) (sig Signature, ok bool, err error) {
	head, ok := strings.CutPrefix(line, "define ")
	if !ok {
		return Signature{}, false, fmt.Errorf("not a define line")
	}
	at := strings.Index(head, " @")
	if at < 0 {
		return Signature{}, false, fmt.Errorf("no function name in %q", clip(line))
	}
	prefix := head[:at]
	for _, w := range strings.Fields(prefix) {
		if w == "internal" || w == "private" {
			return Signature{}, false, nil
		}
	}
	rest := head[at+2:]
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return Signature{}, false, fmt.Errorf("no parameter list in %q", clip(line))
	}
	name := strings.Trim(rest[:open], `"`)
	depth, end := 0, -1
	for i := open; i < len(rest) && end < 0; i++ {
		switch rest[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				end = i
			}
		}
	}
	if end < 0 {
		return Signature{}, false, fmt.Errorf("%s: unterminated parameter list", name)
	}
	sig.Name = name
	retType := trailingType(prefix)
	var llvmParams []string
	if retType != "void" {
		p, err := tt.abiParam(retType, 0)
		if err != nil {
			return Signature{}, false, fmt.Errorf("%s: return: %w", name, err)
		}
		sig.Return = &p
	}
	for i, ps := range splitTop(rest[open+1 : end]) {
		if strings.TrimSpace(ps) == "" {
			continue
		}
		if strings.TrimSpace(ps) == "..." {
			return Signature{}, false, fmt.Errorf("%s: variadic functions are not supported", name)
		}
		typ, attrs := leadingType(ps)
		bv := 0
		t := typ
		if bt := byvalType(attrs); bt != "" {
			t = bt
			bv = max(attrAlign(attrs), 1)
		}
		p, err := tt.abiParam(t, bv)
		if err != nil {
			return Signature{}, false, fmt.Errorf("%s: parameter %d: %w", name, i, err)
		}
		sig.Params = append(sig.Params, p)
		if bv > 0 {
			typ = "byval " + t
		}
		llvmParams = append(llvmParams, typ)
	}
	sig.LLVM = retType + " (" + strings.Join(llvmParams, ", ") + ")"
	return sig, true, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// maxShownErrors is how many of its problems ParseLLVM's error lists.
const maxShownErrors = 5

// ParseLLVM reads LLVM IR text (llvm-dis output) and returns the signature of every function
// it defines with external linkage. It reads named type definitions to size aggregates.
func ParseLLVM(r io.Reader) (map[string]Signature, error) {
	tt := newTypeTable()
	sigs := map[string]Signature{}
	var errs []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("%")):
			if bytes.Contains(line, []byte(" = type ")) {
				tt.add(string(line))
			}
		case bytes.HasPrefix(line, []byte("define ")):
			s, ok, err := tt.parseDefine(string(line))
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if ok {
				sigs[s.Name] = s
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("devlib: reading LLVM IR: %w", err)
	}
	if len(errs) > 0 {
		// The first few, each bounded: a file of 20000 bad defines (or one with a 100 KB
		// name or type) gave an error of as many kilobytes.
		shown := errs[:min(len(errs), maxShownErrors)]
		for i, e := range shown {
			shown[i] = excerpt.Cut(e, 300)
		}
		more := ""
		if n := len(errs) - len(shown); n > 0 {
			more = fmt.Sprintf("; and %d more", n)
		}
		return sigs, fmt.Errorf("devlib: %d function signature(s) could not be read: %s%s", len(errs), strings.Join(shown, "; "), more)
	}
	return sigs, nil
}

// ---- PTX declarations ----

// stripComments removes // and /* */ comments from PTX.
func stripComments(src []byte) []byte {
	var out []byte
	for i := 0; i < len(src); i++ {
		switch {
		case src[i] == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			if i < len(src) {
				out = append(out, '\n')
			}
		case src[i] == '/' && i+1 < len(src) && src[i+1] == '*':
			j := bytes.Index(src[i+2:], []byte("*/"))
			if j < 0 {
				return out
			}
			out = append(out, ' ')
			i += j + 3
		default:
			out = append(out, src[i])
		}
	}
	return out
}

// ptxTokens splits comment-free PTX into tokens: identifiers and directives, numbers, and the
// punctuation ( ) [ ] , ; { } as single tokens.
func ptxTokens(src []byte) []string {
	var toks []string
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("()[],;{}", c) >= 0:
			toks = append(toks, string(c))
			i++
		default:
			j := i
			for j < len(src) && strings.IndexByte(" \t\n\r()[],;{}", src[j]) < 0 {
				j++
			}
			toks = append(toks, string(src[i:j]))
			i = j
		}
	}
	return toks
}

// ParseDecls returns every function declared or defined in PTX source (`.extern .func`,
// `.visible .func`, `.weak .func`, `.func`), in order, each name once. Kernels (.entry) are
// skipped. Parameters must be .param (the ABI form); a .reg parameter is an error.
func ParseDecls(src []byte) ([]Signature, error) {
	toks := ptxTokens(stripComments(src))
	var out []Signature
	seen := map[string]int{}
	for i := 0; i < len(toks); i++ {
		if toks[i] != ".func" {
			continue
		}
		s, next, err := parseFunc(toks, i+1)
		if err != nil {
			return nil, fmt.Errorf("devlib: PTX declaration %d: %w", len(out)+1, err)
		}
		if j, ok := seen[s.Name]; ok {
			if !sameSig(out[j], s) {
				return nil, fmt.Errorf("devlib: PTX declares %s twice, differently: %s and %s", excerpt.Cut(s.Name, excerpt.Max), excerpt.Cut(out[j].String(), 200), excerpt.Cut(s.String(), 200))
			}
		} else {
			seen[s.Name] = len(out)
			out = append(out, s)
		}
		i = next - 1
	}
	return out, nil
}

func parseFunc(toks []string, i int) (Signature, int, error) {
	var s Signature
	at := func(k int) string {
		if k < len(toks) {
			return toks[k]
		}
		return ""
	}
	if at(i) == "(" {
		ps, next, err := parseParams(toks, i)
		if err != nil {
			return s, 0, fmt.Errorf("return value: %w", err)
		}
		switch len(ps) {
		case 0:
		case 1:
			s.Return = &ps[0]
		default:
			return s, 0, fmt.Errorf("%d return values", len(ps))
		}
		i = next
	}
	name := at(i)
	if name == "" || strings.IndexByte("()[],;{}.", name[0]) >= 0 {
		return s, 0, fmt.Errorf("want a function name, got %s", excerpt.Quote(name))
	}
	s.Name = name
	i++
	if at(i) == "(" {
		ps, next, err := parseParams(toks, i)
		if err != nil {
			return s, 0, fmt.Errorf("%s: %w", excerpt.Cut(name, excerpt.Max), err)
		}
		s.Params = ps
		i = next
	}
	return s, i, nil
}

// parseParams parses `( .param T a, ... )` starting at the "(" token.
func parseParams(toks []string, i int) ([]Param, int, error) {
	i++ // (
	var ps []Param
	for {
		if i >= len(toks) {
			return nil, i, fmt.Errorf("unterminated parameter list")
		}
		if toks[i] == ")" {
			return ps, i + 1, nil
		}
		if toks[i] == "," {
			i++
			continue
		}
		if toks[i] != ".param" {
			return nil, i, fmt.Errorf("parameter %d: want .param, got %s (the call ABI passes every argument in .param space)", len(ps), excerpt.Quote(toks[i]))
		}
		i++
		var p Param
		for i < len(toks) && toks[i] != "," && toks[i] != ")" {
			t := toks[i]
			switch {
			case t == ".align":
				if i+1 >= len(toks) {
					return nil, i, fmt.Errorf("parameter %d: .align without a value", len(ps))
				}
				n, err := strconv.Atoi(toks[i+1])
				if err != nil || n <= 0 {
					return nil, i, fmt.Errorf("parameter %d: bad .align %s", len(ps), excerpt.Quote(toks[i+1]))
				}
				p.Align = n
				i += 2
				continue
			case t == "[":
				if i+2 >= len(toks) || toks[i+2] != "]" {
					return nil, i, fmt.Errorf("parameter %d: bad array length", len(ps))
				}
				n, err := strconv.Atoi(toks[i+1])
				if err != nil || n <= 0 || n > maxTypeSize/8 {
					return nil, i, fmt.Errorf("parameter %d: bad array length %s", len(ps), excerpt.Quote(toks[i+1]))
				}
				p.Len = n
				i += 3
				continue
			case strings.HasPrefix(t, ".") && p.Type == "":
				if !validPTXType(t) {
					return nil, i, fmt.Errorf("parameter %d: unknown type %s", len(ps), excerpt.Cut(t, excerpt.Max))
				}
				p.Type = t
			case strings.HasPrefix(t, "."):
				return nil, i, fmt.Errorf("parameter %d: unexpected %s", len(ps), excerpt.Cut(t, excerpt.Max))
			}
			// anything else is the parameter's name
			i++
		}
		if p.Type == "" {
			return nil, i, fmt.Errorf("parameter %d: no type", len(ps))
		}
		if p.Len > 0 {
			// an array parameter: express it in bytes
			w, _ := strconv.Atoi(strings.TrimLeft(p.Type, ".bsuf"))
			p.Len *= max(w/8, 1)
			p.Type = ".b8"
			if p.Align == 0 {
				p.Align = 1
			}
		} else {
			p.Align = 0 // .align on a scalar does not change how it is passed
		}
		ps = append(ps, p)
	}
}

func validPTXType(t string) bool {
	switch t {
	case ".b8", ".b16", ".b32", ".b64", ".u8", ".u16", ".u32", ".u64",
		".s8", ".s16", ".s32", ".s64", ".f16", ".f32", ".f64", ".pred":
		return true
	}
	return false
}

func sameSig(a, b Signature) bool {
	if (a.Return == nil) != (b.Return == nil) || len(a.Params) != len(b.Params) {
		return false
	}
	if a.Return != nil && !a.Return.sameABI(*b.Return) {
		return false
	}
	for i := range a.Params {
		if !a.Params[i].sameABI(b.Params[i]) {
			return false
		}
	}
	return true
}

// ABIError lists the declarations that do not match the device library.
type ABIError struct {
	// Version is the NVSHMEM version checked against ("" when unknown).
	Version string
	// Problems has one line per mismatch, each naming the function.
	Problems []string
}

// Error lists every problem, one a line.
func (e *ABIError) Error() string {
	v := "the device library"
	if e.Version != "" {
		v = "NVSHMEM " + e.Version
	}
	return fmt.Sprintf("devlib: %d declaration(s) disagree with %s:\n\t%s", len(e.Problems), v,
		strings.Join(e.Problems, "\n\t"))
}

// CheckDecls compares PTX function declarations (for example those ParseDecls reads from a
// kernel module) with the device library's signatures and returns an *ABIError listing every
// function that is missing from the library or whose return value or parameters differ in
// width, count or aggregate layout. Declarations whose names do not start with "nvshmem" are
// ignored (they are not NVSHMEM's). version only labels the error.
func CheckDecls(decls []Signature, lib map[string]Signature, version string) error {
	var probs []string
	for _, d := range decls {
		if !strings.HasPrefix(d.Name, "nvshmem") {
			continue
		}
		w, ok := lib[d.Name]
		if !ok {
			probs = append(probs, fmt.Sprintf("%s: not a function of the device library", d.Name))
			continue
		}
		var diffs []string
		switch {
		case w.Return == nil && d.Return != nil:
			diffs = append(diffs, fmt.Sprintf("returns void, declared %s", d.Return))
		case w.Return != nil && d.Return == nil:
			diffs = append(diffs, fmt.Sprintf("returns %s, declared without a return value", w.Return))
		case w.Return != nil && !w.Return.sameABI(*d.Return):
			diffs = append(diffs, fmt.Sprintf("returns %s, declared %s", w.Return, d.Return))
		}
		if len(w.Params) != len(d.Params) {
			diffs = append(diffs, fmt.Sprintf("takes %d parameters, declared %d", len(w.Params), len(d.Params)))
		} else {
			for i := range w.Params {
				if !w.Params[i].sameABI(d.Params[i]) {
					diffs = append(diffs, fmt.Sprintf("parameter %d is %s, declared %s", i, w.Params[i], d.Params[i]))
				}
			}
		}
		if len(diffs) > 0 {
			probs = append(probs, fmt.Sprintf("%s: %s (library: %s)", d.Name, strings.Join(diffs, "; "), w.Decl()))
		}
	}
	if len(probs) > 0 {
		return &ABIError{Version: version, Problems: probs}
	}
	return nil
}

// ---- the signature file ----

// WriteSignatures writes sigs sorted by name, one PTX declaration a line followed by a
// comment with the LLVM signature, under a comment header. ReadSignatures reads it back;
// the file is valid PTX (after a .version/.target preamble).
func WriteSignatures(w io.Writer, header string, sigs map[string]Signature) error {
	names := make([]string, 0, len(sigs))
	for n := range sigs {
		names = append(names, n)
	}
	sort.Strings(names)
	bw := bufio.NewWriter(w)
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if header == "" {
			break
		}
		fmt.Fprintf(bw, "// %s\n", l)
	}
	for _, n := range names {
		s := sigs[n]
		fmt.Fprint(bw, s.Decl())
		if s.LLVM != "" {
			fmt.Fprintf(bw, " // %s", s.LLVM)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// ReadSignatures reads what WriteSignatures wrote (or any PTX declarations) into a table.
// The LLVM comments are kept.
func ReadSignatures(r io.Reader) (map[string]Signature, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("devlib: reading signatures: %w", err)
	}
	decls, err := ParseDecls(src)
	if err != nil {
		return nil, err
	}
	llvm := map[string]string{}
	for _, line := range strings.Split(string(src), "\n") {
		d, c, ok := strings.Cut(line, " // ")
		if !ok || !strings.HasPrefix(d, ".extern .func") {
			continue
		}
		if ds, err := ParseDecls([]byte(d)); err == nil && len(ds) == 1 {
			llvm[ds[0].Name] = strings.TrimSpace(c)
		}
	}
	out := make(map[string]Signature, len(decls))
	for _, d := range decls {
		d.LLVM = llvm[d.Name]
		out[d.Name] = d
	}
	return out, nil
}
