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
