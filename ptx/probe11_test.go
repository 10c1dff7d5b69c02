package ptx

import (
	"testing"
)

// TestProbe11CvtF16BF16: a cvt between .f16 and .bf16 (equal widths, either direction losing
// bits) takes a float rounding modifier or none, and refuses an integer one, as ptxas does.
// Before: Verify called it widening and refused .rn, so the DSL's To between F16 and BF16
// on sm_90 (which emits cvt.rn) failed Build with "a widening float cvt takes no rounding
// modifier" though ptxas assembles it.
func TestProbe11CvtF16BF16(t *testing.T) {
	var p *ptxasRunner
	if !testing.Short() {
		p = newPtxas(t)
	}
	for _, types := range [][]Type{{BF16, F16}, {F16, BF16}} {
		for _, rnd := range []string{"", "rn", "rz", "rm", "rp", "rni", "rzi"} {
			in := &Instr{Op: "cvt", Types: types, Args: []Operand{r(B16, 0), r(B16, 1)}}
			if rnd != "" {
				in.Q = []string{rnd}
			}
			m := formsModule(SM90, 90, []*Instr{in})
			err := Verify(m)
			legal := rnd == "" || len(rnd) == 2
			if legal != (err == nil) {
				t.Errorf("%s: Verify: %v; want legal %v", FormatInstr(in), err, legal)
			}
			if p == nil {
				continue
			}
			if out, ok := p.assemble(SM90, m.String()); ok != legal {
				t.Errorf("%s: ptxas assembles it %v (%s); want %v", FormatInstr(in), ok, out, legal)
			}
		}
	}
}

// TestProbe11FileNames: a source file name with non-ASCII letters, a quote, a backslash, a
// percent sign, two spaces or a control character gives a .file line ptxas assembles, and
// Parse reads back the same name. Before: the name was Go-quoted into the .file line, and
// ptxas refused a module built in a folder named données ("Unexpected non-ASCII character")
// or a"b ("Parsing error"), so no kernel built there assembled; Parse turned two spaces into
// one.
func TestProbe11FileNames(t *testing.T) {
	names := []string{"données/k.go", `a"b/k.go`, `a\b.go`, "100%/k.go", "two  spaces.go", "tab\there.go", "日本/k.go", "plain/k.go"}
	srcs := make([]string, len(names))
	for i, name := range names {
		m := formsModule(SM90, 90, nil)
		for _, in := range m.Funcs[len(m.Funcs)-1].Body {
			in.Pos = Pos{File: name, Line: 7}
		}
		srcs[i] = m.String()
		back, err := Parse(srcs[i])
		if err != nil {
			t.Errorf("source file %q: Parse: %v", name, err)
			continue
		}
		got := ""
		for _, in := range back.Funcs[len(back.Funcs)-1].Body {
			if in.Pos.File != "" {
				got = in.Pos.File
				break
			}
		}
		if got != name {
			t.Errorf("source file %q: Parse read back %q", name, got)
		}
	}
	if testing.Short() {
		return
	}
	p := newPtxas(t) // skips here when there is no ptxas
	for i, name := range names {
		if out, ok := p.assemble(SM90, srcs[i]); !ok {
			t.Errorf("source file %q: ptxas: %s", name, out)
		}
	}
}
