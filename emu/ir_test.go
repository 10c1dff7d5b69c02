package emu

import (
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestIRForms builds a kernel directly as ptx IR with the forms the text reader does not
// produce: a call sequence with block-scoped .param declarations (ptx.CallSeq) to a module
// function and to an extern, "p|q" destinations (ptx.Pair) and negated predicates (ptx.Not).
func TestIRForms(t *testing.T) {
	u32 := func(n int) ptx.Reg { return ptx.Reg{Type: ptx.U32, N: n} }
	u64 := func(n int) ptx.Reg { return ptx.Reg{Type: ptx.U64, N: n} }
	pr := func(n int) ptx.Reg { return ptx.Reg{Type: ptx.Pred, N: n} }
	imm := func(v int64) ptx.Imm { return ptx.IntImm(ptx.U32, v) }
	pos := ptx.Pos{File: "emu/ir_test.go", Line: 1}
	in := func(op string, q []string, t ptx.Type, args ...ptx.Operand) *ptx.Instr {
		var ts []ptx.Type
		if t != ptx.NoType {
			ts = []ptx.Type{t}
		}
		return &ptx.Instr{Op: op, Q: q, Types: ts, Args: args, Pos: pos}
	}
	callee := &ptx.Func{Name: "mad3", Params: []ptx.Param{{Name: "x", Type: ptx.U32}, {Name: "y", Type: ptx.U32}},
		Rets: []ptx.Param{{Name: "r", Type: ptx.U32}}}
	callee.Body = []*ptx.Instr{
		in("ld", []string{"param"}, ptx.U32, u32(0), ptx.Addr{Base: ptx.Sym("x")}),
		in("ld", []string{"param"}, ptx.U32, u32(1), ptx.Addr{Base: ptx.Sym("y")}),
		in("mad", []string{"lo"}, ptx.U32, u32(2), u32(0), imm(3), u32(1)),
		in("st", []string{"param"}, ptx.U32, ptx.Addr{Base: ptx.Sym("r")}, u32(2)),
		in("ret", nil, ptx.NoType),
	}
	ext := &ptx.Func{Name: "plus_gpu", Extern: true, Params: []ptx.Param{{Name: "v", Type: ptx.U32}},
		Rets: []ptx.Param{{Name: "r", Type: ptx.U32}}}
	k := &ptx.Func{Name: "irk", Entry: true, Visible: true, Params: []ptx.Param{{Name: "out", Type: ptx.U64}}}
	body := []*ptx.Instr{
		in("ld", []string{"param"}, ptx.U64, u64(0), ptx.Addr{Base: ptx.Sym("out")}),
		in("mov", nil, ptx.U32, u32(0), ptx.Special("%tid.x")),
	}
	body = append(body, ptx.CallSeq(callee, []ptx.Reg{u32(1)}, []ptx.Operand{u32(0), imm(5)})...) // r1 = 3*tid + 5
	body = append(body, ptx.CallSeq(ext, []ptx.Reg{u32(2)}, []ptx.Operand{u32(1)})...)            // r2 = r1 + 100*gpu + 1
	body = append(body,
		// p0|p1 = tid < 16 ; p2 = (r2 > 0) and !p0
		in("setp", []string{"lt"}, ptx.U32, ptx.Pair{A: pr(0), B: pr(1)}, u32(0), imm(16)),
		in("setp", []string{"gt", "and"}, ptx.U32, pr(2), u32(2), imm(0), ptx.Not{P: pr(0)}),
		// ballot of !p0 = lanes >= 16
		in("vote.sync", []string{"ballot"}, ptx.B32, u32(3), ptx.Not{P: pr(0)}, ptx.IntImm(ptx.B32, -1)),
		// shfl down 20 with its in-range predicate
		in("shfl.sync", []string{"down"}, ptx.B32, ptx.Pair{A: u32(4), B: pr(3)}, u32(0), imm(20), imm(31), ptx.IntImm(ptx.B32, -1)),
		in("selp", nil, ptx.U32, u32(5), imm(1), imm(0), pr(2)),
		in("selp", nil, ptx.U32, u32(6), imm(1), imm(0), pr(3)),
		in("selp", nil, ptx.U32, u32(7), imm(1), imm(0), pr(1)),
		in("mul", []string{"wide"}, ptx.U32, u64(1), u32(0), imm(32)),
		in("add", nil, ptx.U64, u64(2), u64(0), u64(1)),
		in("st", []string{"global", "v4"}, ptx.U32, ptx.Addr{Base: u64(2)}, ptx.Vec{u32(2), u32(3), u32(4), u32(5)}),
		in("st", []string{"global", "v2"}, ptx.U32, ptx.Addr{Base: u64(2), Off: 16}, ptx.Vec{u32(6), u32(7)}),
		in("ret", nil, ptx.NoType),
	)
	k.Body = body
	m := &ptx.Module{Target: ptx.SM90, Funcs: []*ptx.Func{ext, callee, k}}
	s := newSys(t, 2)
	s.RegisterExtern("plus_gpu", func(c *ExternCall) error {
		c.Rets[0] = c.Args[0] + uint64(100*c.GPU) + 1
		return nil
	})
	outs := []uint64{mustMalloc(t, s, 0, 32*32), mustMalloc(t, s, 1, 32*32)}
	must(t, s.Launch(Launch{Module: m, Entry: "irk", GPUs: s.All(), Grid: D1(1), Block: D1(32),
		ArgsFor: func(g int) []any { return []any{outs[g]} }}))
	for g := 0; g < 2; g++ {
		got := readU32(t, s, outs[g], 32*8)
		for tid := 0; tid < 32; tid++ {
			w := got[tid*8:]
			r2 := uint32(3*tid+5) + uint32(100*g) + 1
			down, inRange := uint32(tid+20), uint32(1)
			if tid+20 > 31 {
				down, inRange = uint32(tid), 0
			}
			lt16 := uint32(0)
			if tid < 16 {
				lt16 = 1
			}
			want := []uint32{r2, 0xffff0000, down, 1 - lt16, inRange, 1 - lt16}
			for i, x := range want {
				if w[i] != x {
					t.Fatalf("GPU %d thread %d word %d: got %#x want %#x", g, tid, i, w[i], x)
				}
			}
		}
	}
}
