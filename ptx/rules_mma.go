package ptx

import "slices"

// Warp-level matrix instructions: mma.sync (m16n8k4/k8/k16/k32), ldmatrix and stmatrix.
//
// mma: "mma.sync.aligned.<shape>.row.col{.satfinite}.<dtype>.<atype>.<btype>.<ctype> d, a, b, c"
// with Q = [sync aligned shape row col (satfinite)] and Types = [dtype atype btype ctype].
// The combinations follow the PTX ISA's table of warp-level MMA shapes and types, as
// ptxas 13.0 checks them (see docs/ptx.md).

var (
	mmaAcc   = []Type{F16, F32, S32}
	mmaIn    = []Type{F16, BF16, TF32, S8, U8, E4M3, E5M2}
	mmaInt8  = []Type{S8, U8}
	mmaFP8   = []Type{E4M3, E5M2}
	matSM100 = []int{100, 101, 103, 110, 120, 121}
)

// MMAShape returns the (M, N, K) of an mma shape qualifier ("m16n8k16"), and whether it is
// one the tables know.
func MMAShape(q string) (m, n, k int, ok bool) {
	switch q {
	case "m16n8k4":
		return 16, 8, 4, true
	case "m16n8k8":
		return 16, 8, 8, true
	case "m16n8k16":
		return 16, 8, 16, true
	case "m16n8k32":
		return 16, 8, 32, true
	}
	return 0, 0, 0, false
}

// MMARegs returns how many 32-bit registers each thread holds of A, B and C/D for an mma
// of shape (m, n, k) with multiplicand type in and accumulator type acc (a 64-bit type
// counts two registers an element; a type of no size, such as .pred or the zero Type, none).
func MMARegs(m, n, k int, in, acc Type) (a, b, c int) {
	bits := in.Bits() // 32/bits elements per 32-bit register (tf32: 1)
	if bits == 0 {
		return 0, 0, 0
	}
	a = m * k * bits / (32 * 32)
	b = k * n * bits / (32 * 32)
	c = m * n / 32 // f32 and s32: one element per register
	if acc == F16 {
		c /= 2
	}
	return a, b, c
}

// mmaCombo says what is wrong with a shape and type combination, or "".
func mmaCombo(shape string, d, a, b, c Type, sat bool) string {
	switch {
	case d != c:
		return "mma takes the same type for D and C (." + d.String() + " and ." + c.String() + ")"
	case sat && d != S32:
		return ".satfinite applies to integer mma (.s32 accumulators) only"
	}
	name := "." + shape + " ." + a.String() + "x." + b.String() + " -> ." + d.String()
	intIn, fp8In := slices.Contains(mmaInt8, a), slices.Contains(mmaFP8, a)
	if intIn != slices.Contains(mmaInt8, b) || fp8In != slices.Contains(mmaFP8, b) || (!intIn && !fp8In && a != b) {
		return "mma multiplicands must be the same type, or both 8-bit integers, or both fp8 (" + name + ")"
	}
	ok := false
	switch {
	case a == TF32:
		ok = (shape == "m16n8k4" || shape == "m16n8k8") && d == F32
	case a == F16:
		ok = (shape == "m16n8k8" || shape == "m16n8k16") && (d == F16 || d == F32)
	case a == BF16:
		ok = (shape == "m16n8k8" || shape == "m16n8k16") && d == F32
	case intIn:
		ok = (shape == "m16n8k16" || shape == "m16n8k32") && d == S32
	case fp8In:
		ok = (shape == "m16n8k16" || shape == "m16n8k32") && (d == F32 || d == F16)
	}
	if !ok {
		return "mma has no form " + name
	}
	return ""
}

func init() {
	mma := &rule{
		slots: []slot{req("sync", "sync"), req("aligned", "aligned"), req("shape", "m16n8k4", "m16n8k8", "m16n8k16", "m16n8k32"),
			req("alayout", "row"), req("blayout", "col"), one("satfinite")},
		types: [][]Type{mmaAcc, mmaIn, mmaIn, mmaAcc},
	}
	mma.check = func(in *Instr) string {
		return mmaCombo(mma.q(in, "shape"), in.Types[0], in.Types[1], in.Types[2], in.Types[3], in.HasQ("satfinite"))
	}
	mma.args = func(in *Instr) []arg {
		m, n, k, _ := MMAShape(mma.q(in, "shape"))
		na, nb, nc := MMARegs(m, n, k, in.Types[1], in.Types[0])
		acc := func(t Type) arg {
			switch t {
			case F16:
				return arg{kind: argReg, typ: F16x2, vec: nc} // f16x2 or .b32 registers
			case F32:
				// ptxas takes f32 immediates in C but refuses integer ones: registers only.
				return arg{kind: argReg, typ: t, vec: nc}
			}
			return arg{kind: argSrc, typ: t, vec: nc}
		}
		ab := func(t Type, cnt int) arg {
			if t == F16 {
				return arg{kind: argSrc, typ: F16x2, vec: cnt}
			}
			return arg{kind: argSrc, typ: B32, vec: cnt, exact: true} // ptxas refuses .u32/.s32/.f16x2 here
		}
		d := acc(in.Types[0])
		d.kind = argDst
		return []arg{d, ab(in.Types[1], na), ab(in.Types[2], nb), acc(in.Types[3])}
	}
	mma.need = func(in *Instr) []need {
		ns := []need{nd(70, 80, "mma.sync needs sm_80 and PTX 7.0")}
		if slices.Contains(mmaFP8, in.Types[1]) {
			ns = append(ns, nd(84, 89, "mma with .e4m3/.e5m2 needs sm_89 and PTX 8.4"))
			if mma.q(in, "shape") == "m16n8k16" || in.Types[0] == F16 {
				ns = append(ns, nd(87, 89, "mma .m16n8k16 with fp8, and fp8 with .f16 accumulators, need sm_89 and PTX 8.7"))
			}
		}
		return ns
	}
	rules["mma"] = mma

	shCta := func(in *Instr) []need {
		if in.HasQ("shared::cta") {
			return []need{nd(78, 0, in.Op+".shared::cta needs PTX 7.8")}
		}
		return nil
	}
	b8 := ndArch(86, matSM100, "ldmatrix/stmatrix 8-bit and packed 6/4-bit forms (.m16n16, .m8n16, .m16n8) need sm_100a or sm_120a and PTX 8.6")

	ld := &rule{
		slots: []slot{req("sync", "sync"), req("aligned", "aligned"), req("shape", "m8n8", "m16n16", "m8n16"), req("num", "x1", "x2", "x4"),
			one("trans"), vals("ss", "shared", "shared::cta"), vals("dstfmt", "b8x16"), vals("srcfmt", "b6x16_p32", "b4x16_p64")},
		types:         [][]Type{{B16, B8}},
		typesOptional: true,
		excl: []excl{
			x("dstfmt", "-srcfmt", "ldmatrix .b8x16 needs a source format (.b6x16_p32 or .b4x16_p64)"),
			x("-dstfmt", "srcfmt", "ldmatrix source formats need the .b8x16 destination format"),
			x("shape=m8n8", "dstfmt", "ldmatrix .m8n8 takes .b16 only"),
			x("shape=m16n16", "-trans", "ldmatrix .m16n16 needs .trans"),
			x("shape=m16n16", "num=x4", "ldmatrix .m16n16 takes .x1 or .x2"),
			x("shape=m8n16", "trans", "ldmatrix .m8n16 takes no .trans"),
			x("shape=m8n16", "-dstfmt", "ldmatrix .m8n16 takes the .b8x16 formats only"),
		},
	}
	ld.check = func(in *Instr) string {
		fmtd := ld.q(in, "dstfmt") != ""
		switch {
		case fmtd && len(in.Types) > 0:
			return "ldmatrix takes either a type or the .b8x16 formats, not both"
		case !fmtd && len(in.Types) == 0:
			return "ldmatrix needs a type (.b16 or .b8) or the .b8x16 formats"
		case ld.q(in, "shape") == "m8n8" && in.Type() != B16:
			return "ldmatrix .m8n8 takes .b16 only"
		case ld.q(in, "shape") == "m16n16" && !fmtd && in.Type() != B8:
			return "ldmatrix .m16n16 takes .b8 or the .b8x16 formats"
		}
		return ""
	}
	ld.args = func(in *Instr) []arg {
		n := LdmatrixRegs(ld.q(in, "shape"), ld.q(in, "num"))
		return []arg{{kind: argDst, typ: B32, vec: n}, addr()}
	}
	ld.need = func(in *Instr) []need {
		ns := append(shCta(in), nd(65, 75, "ldmatrix needs sm_75 and PTX 6.5"))
		if ld.q(in, "shape") != "m8n8" {
			ns = append(ns, b8)
		}
		return ns
	}
	rules["ldmatrix"] = ld

	st := &rule{
		slots: []slot{req("sync", "sync"), req("aligned", "aligned"), req("shape", "m8n8", "m16n8"), req("num", "x1", "x2", "x4"),
			one("trans"), vals("ss", "shared", "shared::cta")},
		types: [][]Type{{B16, B8}},
		excl:  []excl{x("shape=m16n8", "-trans", "stmatrix .m16n8 needs .trans")},
	}
	st.check = func(in *Instr) string {
		if (st.q(in, "shape") == "m8n8") != (in.Type() == B16) {
			return "stmatrix .m8n8 takes .b16 and .m16n8 takes .b8"
		}
		return ""
	}
	st.args = func(in *Instr) []arg {
		return []arg{addr(), {kind: argReg, typ: B32, vec: LdmatrixRegs(st.q(in, "shape"), st.q(in, "num"))}}
	}
	st.need = func(in *Instr) []need {
		ns := append(shCta(in), nd(78, 90, "stmatrix needs sm_90 and PTX 7.8"))
		if st.q(in, "shape") == "m16n8" {
			ns = append(ns, b8)
		}
		return ns
	}
	rules["stmatrix"] = st
}

// LdmatrixRegs returns how many 32-bit registers each thread gets (ldmatrix) or gives
// (stmatrix) for a shape ("m8n8", "m16n16", "m8n16", "m16n8") and count ("x1", "x2", "x4").
func LdmatrixRegs(shape, num string) int {
	n := map[string]int{"x1": 1, "x2": 2, "x4": 4}[num]
	if shape == "m16n16" {
		return 2 * n // a 16x16 matrix of bytes is two 32-bit registers a thread
	}
	return n
}
