package emu

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestMalformedInstructionsNeverPanic feeds the decoder and the interpreter instructions with
// random operand kinds and counts: every one must end in nil or an *Error that is not an
// internal error (a recovered panic).
func TestMalformedInstructionsNeverPanic(t *testing.T) {
	ops := []string{"mov", "add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "and", "or",
		"xor", "not", "shl", "shr", "setp", "selp", "cvt", "cvta", "ld", "st", "atom", "red", "multimem.ld_reduce",
		"multimem.st", "multimem.red", "bra", "call", "bar.sync", "bar.red", "bar.warp.sync", "shfl.sync", "vote.sync",
		"redux.sync", "match.sync", "elect.sync", "mbarrier.arrive", "mbarrier.try_wait", "cp.async", "cp.async.bulk",
		"lop3", "prmt", "bfe", "bfi", "shf", "dp4a", "slct", "fence", "activemask", "st.async", "testp", "add.cc", "madc"}
	quals := []string{"", "global", "shared", "u32", "lo", "wide", "rn", "v2", "v4", "sync", "up", "add", "cas", "relaxed", "sys", "param", "b64"}
	types := []ptx.Type{ptx.NoType, ptx.U32, ptx.S64, ptx.F32, ptx.F16, ptx.F16x2, ptx.B128, ptx.Pred, ptx.BF16x2, ptx.E4M3x2}
	rng := rand.New(rand.NewSource(1))
	operand := func() ptx.Operand {
		switch rng.Intn(9) {
		case 0:
			return ptx.Reg{Type: types[1+rng.Intn(len(types)-1)], N: rng.Intn(3)}
		case 1:
			return ptx.IntImm(ptx.U32, int64(rng.Intn(5)-1))
		case 2:
			return ptx.Special("%tid.x")
		case 3:
			return ptx.Sym("L")
		case 4:
			return ptx.Addr{Base: ptx.Reg{Type: ptx.U64, N: 0}, Off: int64(rng.Intn(9))}
		case 5:
			return ptx.Vec{ptx.Reg{Type: ptx.U32, N: 1}, ptx.Reg{Type: ptx.U32, N: 2}}
		case 6:
			return ptx.Sink{}
		case 7:
			return ptx.Pair{A: ptx.Reg{Type: ptx.Pred, N: 0}, B: ptx.Sink{}}
		}
		return ptx.Not{P: ptx.Reg{Type: ptx.Pred, N: 1}}
	}
	s := newSys(t, 2)
	buf := mustMalloc(t, s, 0, 4096)
	for i := 0; i < 3000; i++ {
		in := &ptx.Instr{Op: ops[rng.Intn(len(ops))], Pos: ptx.Pos{File: "fuzz", Line: i}}
		for q := rng.Intn(3); q > 0; q-- {
			if x := quals[rng.Intn(len(quals))]; x != "" {
				in.Q = append(in.Q, x)
			}
		}
		for n := rng.Intn(3); n > 0; n-- {
			in.Types = append(in.Types, types[rng.Intn(len(types))])
		}
		for n := rng.Intn(6); n > 0; n-- {
			in.Args = append(in.Args, operand())
		}
		k := &ptx.Func{Name: "f", Entry: true, Params: []ptx.Param{{Name: "p", Type: ptx.U64}}, Body: []*ptx.Instr{
			{Op: "ld", Q: []string{"param"}, Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{ptx.Reg{Type: ptx.U64, N: 0}, ptx.Addr{Base: ptx.Sym("p")}}},
			in,
			{Label: "L"},
			{Op: "ret"},
		}}
		m := &ptx.Module{Target: ptx.SM90a, Funcs: []*ptx.Func{k}}
		err := s.Launch(Launch{Module: m, Entry: "f", Grid: D1(1), Block: D1(33), Args: []any{buf},
			Options: Options{StepBudget: 20000}})
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Kind == KindInternal) {
			t.Fatalf("%s: %v", ptx.FormatInstr(in), err)
		}
	}
}
