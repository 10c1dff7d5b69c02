package ptx

import "slices"

// cvt among all numeric types, the packed conversions (f16x2, bf16x2 from two f32) and the
// fp8 conversions (e4m3x2, e5m2x2).

var (
	fp8x2      = []Type{E4M3x2, E5M2x2}
	cvtDst     = join(cvtTypes, []Type{F16x2, BF16x2, TF32}, fp8x2)
	cvtSrc     = join(cvtTypes, []Type{F16x2}, fp8x2)
	cvtPackedD = []Type{F16x2, BF16x2}
)

func init() {
	cvt := &rule{
		slots: []slot{
			vals("rnd", append(append([]string{"rna"}, floatRound...), intRound...)...),
			one("ftz"),
			one("sat"),
			one("relu"),
			one("satfinite"),
		},
		types: [][]Type{cvtDst, cvtSrc},
		args: func(in *Instr) []arg {
			d, a := in.Types[0], in.Types[1]
			if a == F32 && (slices.Contains(cvtPackedD, d) || slices.Contains(fp8x2, d)) {
				return []arg{{kind: argDst, typ: d}, src(F32), src(F32)}
			}
			return []arg{{kind: argDst, typ: d, wide: true}, {kind: argSrc, typ: a, wide: true}}
		},
	}
	cvt.check = func(in *Instr) string {
		d, a, rnd := in.Types[0], in.Types[1], cvt.q(in, "rnd")
		relu, satf := cvt.q(in, "relu") != "", cvt.q(in, "satfinite") != ""
		ftz, sat := cvt.q(in, "ftz") != "", cvt.q(in, "sat") != ""
		packed := d.IsPacked() || a.IsPacked()
		if d == TF32 || rnd == "rna" {
			return cvtTF32(d, a, rnd, relu, ftz || sat)
		}
		switch {
		case slices.Contains(fp8x2, d):
			if a != F32 && a != F16x2 {
				return "cvt to ." + d.String() + " converts from .f32 or .f16x2"
			}
			if rnd != "rn" || !satf || ftz || sat {
				return "cvt to ." + d.String() + " needs .rn.satfinite (and optionally .relu)"
			}
			return ""
		case slices.Contains(fp8x2, a):
			if d != F16x2 {
				return "cvt from ." + a.String() + " converts to .f16x2"
			}
			if rnd != "rn" || satf || ftz || sat {
				return "cvt.f16x2 from fp8 needs .rn (and optionally .relu)"
			}
			return ""
		case slices.Contains(cvtPackedD, d):
			if a != F32 {
				return "cvt to ." + d.String() + " converts two .f32 values"
			}
			if rnd != "rn" && rnd != "rz" || ftz || sat {
				return "cvt to ." + d.String() + " needs .rn or .rz (and optionally .relu, .satfinite)"
			}
			return ""
		case packed:
			return "no cvt between ." + d.String() + " and ." + a.String()
		}
		if relu || satf {
			if !((d == F16 || d == BF16) && a == F32 && (rnd == "rn" || rnd == "rz")) {
				return ".relu and .satfinite apply to cvt.rn/.rz to .f16/.bf16 from .f32 and to packed conversions"
			}
			if ftz || sat {
				return ".relu and .satfinite take no .ftz or .sat"
			}
			return ""
		}
		isInt := slices.Contains(intRound, rnd)
		switch {
		case d.IsFloat() && a.IsFloat():
			if d == a {
				if rnd != "" && !isInt || d != F32 && d != F64 && rnd != "" {
					return "a float-to-same-float cvt rounds with .rni .rzi .rmi .rpi only"
				}
			} else if d.Bits() < a.Bits() {
				if rnd == "" || isInt {
					return "a narrowing float cvt needs a rounding modifier (.rn .rz .rm .rp)"
				}
			} else if d.Bits() == a.Bits() { // .f16 <-> .bf16: either loses bits; ptxas takes .rn .rz .rm .rp or none
				if isInt {
					return "a cvt between .f16 and .bf16 rounds with .rn .rz .rm .rp only"
				}
			} else if rnd != "" {
				return "a widening float cvt takes no rounding modifier"
			}
		case d.IsInt() && a.IsFloat():
			if !isInt {
				return "a float-to-integer cvt needs an integer rounding modifier (.rni .rzi .rmi .rpi)"
			}
		case d.IsFloat() && a.IsInt():
			if rnd == "" || isInt {
				return "an integer-to-float cvt needs a rounding modifier (.rn .rz .rm .rp)"
			}
		default:
			if rnd != "" {
				return "an integer-to-integer cvt takes no rounding modifier"
			}
		}
		if ftz && a != F32 && d != F32 {
			return ".ftz applies when the source or destination is .f32"
		}
		if (d == BF16 || a == BF16) && (ftz || sat) {
			return "cvt to or from .bf16 takes no .ftz or .sat"
		}
		if (d == BF16 && a.Bits() == 8) || (a == BF16 && d.Bits() == 8) {
			return "no cvt between .bf16 and 8-bit integers"
		}
		if sat && d.IsInt() && a.IsInt() && intFits(d, a) {
			return "cvt.sat between integer types needs a conversion that can overflow (." + a.String() + " always fits in ." + d.String() + ")"
		}
		return ""
	}
	cvt.need = func(in *Instr) []need {
		d, a := in.Types[0], in.Types[1]
		var ns []need
		switch {
		case slices.Contains(fp8x2, d) || slices.Contains(fp8x2, a):
			n := nd(78, 89, "cvt to or from fp8 (e4m3x2, e5m2x2) needs sm_90 and PTX 7.8, or sm_89 and PTX 8.1")
			n.ptxBySM = map[int]Version{89: 81}
			ns = append(ns, n)
		case d == TF32 && cvt.q(in, "rnd") == "rna":
			ns = append(ns, nd(70, 80, "cvt.rna.tf32.f32 needs sm_80 and PTX 7.0"))
			if in.HasQ("satfinite") {
				ns = append(ns, nd(81, 80, "cvt.rna.satfinite.tf32.f32 needs PTX 8.1"))
			}
			return ns
		case d == TF32:
			ns = append(ns, nd(78, 90, "cvt.rn/.rz.tf32.f32 needs sm_90 and PTX 7.8"))
			if in.HasQ("satfinite") {
				ns = append(ns, nd(86, 100, "cvt.rn/.rz.satfinite.tf32.f32 needs sm_100 and PTX 8.6"))
			}
			return ns
		case slices.Contains(cvtPackedD, d):
			ns = append(ns, nd(70, 80, "cvt."+d.String()+".f32 needs sm_80 and PTX 7.0"))
		case d == BF16 && a == F32:
			ns = append(ns, nd(70, 80, "cvt.bf16.f32 needs sm_80 and PTX 7.0"))
		case d == BF16 || a == BF16:
			ns = append(ns, nd(78, 90, "cvt to or from .bf16 other than from .f32 needs sm_90 and PTX 7.8"))
		}
		if in.HasQ("relu") && !slices.Contains(fp8x2, d) && !slices.Contains(fp8x2, a) {
			ns = append(ns, nd(70, 80, "cvt .relu needs sm_80 and PTX 7.0"))
		}
		if in.HasQ("satfinite") && (d == F16 || d == BF16 || slices.Contains(cvtPackedD, d)) {
			ns = append(ns, nd(81, 80, "cvt .satfinite to f16/bf16 types needs PTX 8.1"))
		}
		return ns
	}
	rules["cvt"] = cvt

	rules["cvta"] = &rule{
		slots: []slot{one("to"), req("space", "global", "shared", "shared::cta", "shared::cluster", "local", "const", "param")},
		types: [][]Type{{U64}},
		args:  same(2),
		need: func(in *Instr) []need {
			var ns []need
			if in.HasQ("shared::cluster") {
				ns = append(ns, nd(78, 90, "cvta .shared::cluster needs sm_90 and PTX 7.8"))
			}
			if in.HasQ("shared::cta") {
				ns = append(ns, nd(78, 0, "cvta .shared::cta needs PTX 7.8"))
			}
			if in.HasQ("param") {
				ns = append(ns, nd(77, 70, "cvta .param needs sm_70 and PTX 7.7"))
			}
			return ns
		},
	}
}

// intFits reports whether every value of integer type a is representable in d.
func intFits(d, a Type) bool {
	ds, as := d.Kind() == KindSigned, a.Kind() == KindSigned
	switch {
	case ds == as:
		return d.Bits() >= a.Bits()
	case ds && !as:
		return d.Bits() > a.Bits()
	}
	return false
}

// cvtTF32 checks a cvt to .tf32 (or one with .rna): cvt.rna{.satfinite}.tf32.f32 and
// cvt.rn/.rz{.relu}{.satfinite}.tf32.f32, as ptxas 13 takes them.
func cvtTF32(d, a Type, rnd string, relu, ftzSat bool) string {
	switch {
	case d != TF32:
		return "rounding .rna applies only to cvt.rna.tf32.f32"
	case a != F32:
		return "cvt to .tf32 converts from .f32"
	case ftzSat:
		return "cvt to .tf32 takes no .ftz or .sat"
	case rnd == "rna" && relu:
		return "cvt.rna.tf32.f32 takes no .relu (cvt.rn and cvt.rz do)"
	case rnd != "rna" && rnd != "rn" && rnd != "rz":
		return "cvt to .tf32 needs .rna, .rn or .rz"
	}
	return ""
}
