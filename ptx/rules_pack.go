package ptx

// Vector forms of mov that pack and unpack: mov.b32 %r, {%h0, %h1}; mov.b32 {%h0, %h1}, %r;
// mov.b64 with two 32-bit or four 16-bit halves. (Added by the DSL's Copy, which packs
// 16-bit elements into 32-bit words for 128-bit accesses.)
func init() {
	base := rules["mov"]
	if base == nil || base.args == nil {
		return
	}
	scalar := base.args
	base.args = func(in *Instr) []arg {
		for i, a := range in.Args {
			v, ok := a.(Vec)
			if !ok {
				continue
			}
			t := in.Type()
			n := len(v)
			if (t != B32 && t != B64) || n < 2 || t.Bits()%n != 0 {
				break
			}
			part := bitsType(t.Bits() / n)
			out := []arg{{kind: argDst, typ: t}, {kind: argSrc, typ: t}}
			out[i] = arg{kind: []argKind{argDst, argSrc}[i], typ: part, vec: n}
			return out
		}
		return scalar(in)
	}
}

func bitsType(bits int) Type {
	switch bits {
	case 8:
		return B8
	case 16:
		return B16
	case 32:
		return B32
	case 64:
		return B64
	}
	return NoType
}
