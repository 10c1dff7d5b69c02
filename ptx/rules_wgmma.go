package ptx

import (
	"slices"
	"strconv"
)

// Warpgroup-level matrix instructions (sm_90a): wgmma.mma_async and its fence, commit and
// wait.
//
// "wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.<dtype>.<atype>.<btype> d, a, b-desc,
// scale-d{, imm-scale-a, imm-scale-b{, imm-trans-a}{, imm-trans-b}}" with Q = [sync aligned
// shape (satfinite)] and Types = [dtype atype btype]. a is a 64-bit shared-memory matrix
// descriptor or four .b32 registers; the transpose operands exist for .f16 and .bf16 only,
// and imm-trans-a only when A is a descriptor; integer forms (.s32 += .s8/.u8) take scale-d
// alone and may saturate.

// WgmmaK returns the K of a wgmma with multiplicand type t (16 for .f16/.bf16, 8 for .tf32,
// 32 for .e4m3/.e5m2), or 0 for a type wgmma does not take.
func WgmmaK(t Type) int {
	switch t {
	case F16, BF16:
		return 16
	case TF32:
		return 8
	case E4M3, E5M2, S8, U8:
		return 32
	}
	return 0
}

// WgmmaShape parses a wgmma shape qualifier "m64nNkK" into N and K; ok is false for
// anything else (N outside 8..256 step 8, M other than 64).
func WgmmaShape(q string) (n, k int, ok bool) {
	if len(q) < 7 || q[:4] != "m64n" {
		return 0, 0, false
	}
	i := 4
	for i < len(q) && q[i] >= '0' && q[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(q[4:i])
	if err != nil || i >= len(q) || q[i] != 'k' || q[4] == '0' {
		return 0, 0, false
	}
	k, err = strconv.Atoi(q[i+1:])
	if err != nil || q[i+1] == '0' || n < 8 || n > 256 || n%8 != 0 {
		return 0, 0, false
	}
	return n, k, true
}

// WgmmaAccRegs returns how many registers each of the warpgroup's 128 threads holds of the
// m64nN accumulator: N/2 .f32 registers, or N/4 .f16x2 registers.
func WgmmaAccRegs(n int, acc Type) int {
	if acc == F16 {
		return n / 4
	}
	return n / 2
}

// wgmmaShapes lists every shape qualifier, for the slot.
var wgmmaShapes = func() []string {
	var out []string
	for _, k := range []int{8, 16, 32} {
		for n := 8; n <= 256; n += 8 {
			out = append(out, "m64n"+strconv.Itoa(n)+"k"+strconv.Itoa(k))
		}
	}
	return out
}()

var wgmmaIn = []Type{F16, BF16, TF32, E4M3, E5M2, S8, U8}

// wgmmaIntN reports whether N is legal for the integer forms: 8 to 32 in steps of 8, then
// multiples of 16 (ptxas 13.0: "Illegal matrix shape '.m64n40k32'").
func wgmmaIntN(n int) bool { return n <= 32 || n%16 == 0 }

// wgmmaCombo says what is wrong with a shape and type combination, or "".
func wgmmaCombo(shape string, d, a, b Type) string {
	n, k, _ := WgmmaShape(shape)
	name := "." + shape + " ." + a.String() + "x." + b.String() + " -> ." + d.String()
	fp8 := slices.Contains(mmaFP8, a) && slices.Contains(mmaFP8, b)
	ints := slices.Contains(mmaInt8, a) && slices.Contains(mmaInt8, b)
	switch {
	case a != b && !fp8 && !ints:
		return "wgmma multiplicands must be the same type, or both fp8, or both 8-bit integers (" + name + ")"
	case ints != (d == S32):
		return "wgmma accumulates 8-bit integers, and only them, in .s32 (" + name + ")"
	case ints && !wgmmaIntN(n):
		return "integer wgmma takes N = 8, 16, 24, 32 or a multiple of 16 (" + name + ")"
	case WgmmaK(a) != k:
		return "wgmma with ." + a.String() + " takes K = " + strconv.Itoa(WgmmaK(a)) + " (" + name + ")"
	case n%8 != 0:
		return "wgmma N must be a multiple of 8 (" + name + ")"
	case d == F16 && a != F16 && !fp8:
		return "wgmma ." + a.String() + " accumulates in .f32 only (" + name + ")"
	}
	return ""
}

func init() {
	wgNeed := ndArch(80, []int{90}, "wgmma needs sm_90a and PTX 8.0")
	w := &rule{
		slots:     []slot{req("sync", "sync"), req("aligned", "aligned"), req("shape", wgmmaShapes...), one("satfinite")},
		types:     [][]Type{{F16, F32, S32}, wgmmaIn, wgmmaIn},
		extraOnly: true, // the shape x type x operand space is sampled (wgmmaForms)
	}
	w.check = func(in *Instr) string {
		if in.HasQ("satfinite") && in.Types[0] != S32 {
			return ".satfinite applies to integer wgmma (.s32 accumulators) only"
		}
		return wgmmaCombo(w.q(in, "shape"), in.Types[0], in.Types[1], in.Types[2])
	}
	w.need = func(in *Instr) []need {
		ns := []need{wgNeed}
		if in.Types[1] != in.Types[2] && slices.Contains(mmaInt8, in.Types[1]) {
			ns = append(ns, ndArch(84, []int{90}, "wgmma with mixed .s8/.u8 multiplicands needs sm_90a and PTX 8.4"))
		}
		return ns
	}
	w.shapes = func(in *Instr) [][]arg {
		n, _, _ := WgmmaShape(w.q(in, "shape"))
		d := arg{kind: argDst, typ: in.Types[0], vec: WgmmaAccRegs(n, in.Types[0])}
		if in.Types[0] == F16 {
			d = arg{kind: argDst, typ: F16x2, vec: WgmmaAccRegs(n, F16)}
		}
		desc := arg{kind: argSrc, typ: B64}
		aReg := arg{kind: argSrc, typ: B32, vec: 4, exact: true}
		if in.Types[1] == F16 {
			aReg = arg{kind: argSrc, typ: F16x2, vec: 4}
		}
		if in.Types[0] == S32 {
			return [][]arg{{d, desc, desc, {kind: argPred}}, {d, aReg, desc, {kind: argPred}}}
		}
		scale := arg{kind: argImm, typ: S32, imms: []int64{1, -1}}
		trans := imm(0, 1)
		withDesc := []arg{d, desc, desc, {kind: argPred}, scale, scale}
		withReg := []arg{d, aReg, desc, {kind: argPred}, scale, scale}
		if in.Types[1] == F16 || in.Types[1] == BF16 {
			withDesc = append(withDesc, trans, trans)
			withReg = append(withReg, trans)
		}
		return [][]arg{withDesc, withReg}
	}
	w.extra = func() []*Instr { return wgmmaForms(w) }
	rules["wgmma.mma_async"] = w

	sa := []slot{req("sync", "sync"), req("aligned", "aligned")}
	rules["wgmma.fence"] = &rule{slots: sa, args: fixed(), need: needs(wgNeed)}
	rules["wgmma.commit_group"] = &rule{slots: sa, args: fixed(), need: needs(wgNeed)}
	rules["wgmma.wait_group"] = &rule{slots: sa, args: fixed(arg{kind: argImm, typ: U32}), need: needs(wgNeed)}
}

// wgmmaSampledN are the N the oracle assembles for every type combination but one;
// .bf16 -> .f32 is assembled at every N. The integer forms take wgmmaSampledIntN.
var (
	wgmmaSampledN    = []int{8, 16, 64, 136, 256}
	wgmmaSampledIntN = []int{8, 24, 32, 48, 144, 256}
)

// wgmmaForms returns the sampled forms: every N for .f32 += .bf16 x .bf16, the N of
// wgmmaSampledN for the other type combinations, each with A from a descriptor and from
// registers, scale-d as a predicate, a negated predicate and an immediate, and the
// immediate operands at each of their values once.
func wgmmaForms(w *rule) []*Instr {
	var out []*Instr
	combos := [][3]Type{{F32, BF16, BF16}, {F32, F16, F16}, {F16, F16, F16}, {F32, TF32, TF32}}
	for _, d := range []Type{F16, F32} {
		for _, a := range mmaFP8 {
			for _, b := range mmaFP8 {
				combos = append(combos, [3]Type{d, a, b})
			}
		}
	}
	for _, a := range mmaInt8 {
		for _, b := range mmaInt8 {
			combos = append(combos, [3]Type{S32, a, b})
		}
	}
	for ci, c := range combos {
		ns := wgmmaSampledN
		if c[0] == S32 {
			ns = wgmmaSampledIntN
		}
		if ci == 0 {
			ns = nil
			for n := 8; n <= 256; n += 8 {
				ns = append(ns, n)
			}
		}
		for _, n := range ns {
			shape := "m64n" + strconv.Itoa(n) + "k" + strconv.Itoa(WgmmaK(c[1]))
			q := []string{"sync", "aligned", shape}
			if c[0] == S32 && n%32 == 0 {
				q = append(q, "satfinite")
			}
			in := &Instr{Op: "wgmma.mma_async", Q: q, Types: []Type{c[0], c[1], c[2]}}
			for si, sh := range w.shapes(in) {
				args := genArgs(in, sh)[0]
				// Vary the immediates and scale-d over the forms so that each value is
				// assembled: scale-d p, !p or 1; the scales 1 or -1; the transposes 0 or 1.
				v := n/8 + si
				switch v % 3 {
				case 1:
					args[3] = Not{P: args[3].(Reg)}
				case 2:
					args[3] = IntImm(Pred, 1)
				}
				for i := 4; i < len(args); i++ {
					im := args[i].(Imm)
					if i < 6 && v%2 == 1 {
						args[i] = IntImm(im.Type, -1)
					} else if i >= 6 && v%2 == 1 {
						args[i] = IntImm(im.Type, 1)
					}
				}
				out = append(out, &Instr{Op: in.Op, Q: in.Q, Types: in.Types, Args: args})
			}
		}
	}
	return out
}
