package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// Verify skips the checks of an instruction shaped like one that passed: anything but the
// register numbers that differs must still be checked.
func TestVerifyRepeatedShapes(t *testing.T) {
	f := &ptx.Func{Name: "k", Entry: true, Visible: true}
	s := func(n int) ptx.Reg { return ptx.Reg{Type: ptx.S32, N: n} }
	add := func(args ...ptx.Operand) *ptx.Instr {
		return &ptx.Instr{Op: "add", Types: []ptx.Type{ptx.S32}, Args: args}
	}
	f.Body = []*ptx.Instr{
		add(s(0), s(1), ptx.Imm{Type: ptx.S32, Bits: 5}),
		add(s(2), s(3), ptx.Imm{Type: ptx.S32, Bits: 5}),                         // same shape: passes
		add(s(4), ptx.Reg{Type: ptx.F32, N: 0}, ptx.Imm{Type: ptx.S32, Bits: 5}), // a source of another type
		add(s(5), s(6), ptx.Sym("nowhere")),                                      // a symbol for an immediate
		add(s(7), s(8)),                                                          // an operand short
		{Op: "ret"},
	}
	err := ptx.Verify(&ptx.Module{Target: ptx.SM90, Funcs: []*ptx.Func{f}})
	if err == nil {
		t.Fatal("Verify accepted three bad adds")
	}
	if n := strings.Count(err.Error(), "add.s32"); n != 3 {
		t.Fatalf("%d errors on add.s32, want 3:\n%v", n, err)
	}
}
