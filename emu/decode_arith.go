package emu

// Arithmetic: the lane-function ALU forms, mov, setp and carry chains.

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// alu decodes "d, a, b, ..." into a lane function of up to four sources of type st.
func (d *decoder) alu(di *dinst, args []ptx.Operand, fn laneFn, st ptx.Type) error {
	if len(args) < 2 || len(args) > 5 {
		return fmt.Errorf("%d operands", len(args))
	}
	var err error
	if di.d, _, err = d.dst(args[0]); err != nil {
		return err
	}
	srcs := []*int32{&di.a, &di.b, &di.c, &di.e}
	for i, a := range args[1:] {
		t := st
		if di.src != nil && di.src.Op == "mul" || di.src != nil && di.src.Op == "mad" {
			if i == 2 && di.src.HasQ("wide") {
				t = doubleType(st)
			}
		}
		if sh := di.src; sh != nil && (sh.Op == "shl" || sh.Op == "shr") && i == 1 {
			t = ptx.U32
		}
		if sh := di.src; sh != nil && (sh.Op == "bfe" || sh.Op == "bfi") && i >= 1 {
			t = ptx.U32
		}
		if *srcs[i], err = d.src(a, t); err != nil {
			return err
		}
	}
	di.fn = fn
	di.nsrc = uint8(len(args) - 1)
	switch di.nsrc {
	case 1:
		di.exec = execA1
	case 2:
		di.exec = execA2
	case 3:
		di.exec = execA3
	default:
		di.exec = execA4
	}
	return nil
}

func doubleType(t ptx.Type) ptx.Type {
	switch t {
	case ptx.U16:
		return ptx.U32
	case ptx.S16:
		return ptx.S32
	case ptx.U32:
		return ptx.U64
	case ptx.S32:
		return ptx.S64
	}
	return t
}

func (d *decoder) decodeMov(di *dinst, in *ptx.Instr) error {
	args := in.Args
	t := in.Type()
	if len(args) != 2 {
		return errors.New("mov takes 2 operands")
	}
	if v, ok := args[0].(ptx.Vec); ok { // unpack
		var err error
		if di.a, err = d.src(args[1], t); err != nil {
			return err
		}
		di.size = uint8(t.Bits() / 8 / len(v))
		for _, e := range v {
			s := int32(-1)
			if _, sink := e.(ptx.Sink); !sink {
				if s, _, err = d.dst(e); err != nil {
					return err
				}
			}
			di.dv = append(di.dv, s)
		}
		di.exec = execPack
		return nil
	}
	if v, ok := args[1].(ptx.Vec); ok { // pack
		var err error
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		es := t.Bits() / len(v)
		di.size = uint8(es / 8)
		et := ptx.B16
		switch es {
		case 8:
			et = ptx.B8
		case 32:
			et = ptx.B32
		case 64:
			et = ptx.B64
		}
		for _, e := range v {
			s, err := d.src(e, et)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
		}
		di.exec = execPack
		return nil
	}
	var err error
	var mask uint64
	if di.d, mask, err = d.dst(args[0]); err != nil {
		return err
	}
	if sp, ok := args[1].(ptx.Special); ok {
		switch sp {
		case "%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi":
			di.imm = mask
			di.exec = execClock
			return nil
		}
	}
	if di.a, err = d.src(args[1], t); err != nil {
		return err
	}
	if t == ptx.B128 {
		di.exec = execMov128
		return nil
	}
	if t != ptx.NoType {
		mask &= widthMask(t.Bits())
		if t == ptx.Pred {
			mask = 1
		}
	}
	di.imm = mask
	di.exec = execMov
	return nil
}

var cmpNames = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "lo": true, "ls": true,
	"hi": true, "hs": true, "equ": true, "neu": true, "ltu": true, "leu": true, "gtu": true, "geu": true, "num": true, "nan": true}

func (d *decoder) decodeSetp(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	st := in.Type()
	isSet := toks[0] == "set"
	if isSet {
		if len(in.Types) != 2 {
			return errUnsupported
		}
		st = in.Types[1]
	}
	cmp := ""
	for _, x := range toks[1:] {
		if cmpNames[x] {
			cmp = x
			break
		}
	}
	// setp on f16x2/bf16x2 compares the halves: p from the low ones, q from the high ones
	// (the ISA's semantics: p = BoolOp(a[0:15] CmpOp b[0:15], c), q likewise for [16:31]).
	pair := !isSet && (st == ptx.F16x2 || st == ptx.BF16x2)
	cmpT := st
	switch {
	case pair && st == ptx.F16x2:
		cmpT = ptx.F16
	case pair:
		cmpT = ptx.BF16
	}
	f, err := compareFn(cmp, cmpT, toks.has("ftz"))
	if err != nil {
		return err
	}
	switch toks.any("and", "or", "xor") {
	case "and":
		di.op = 1
	case "or":
		di.op = 2
	case "xor":
		di.op = 3
	}
	if len(args) < 3 {
		return errors.New("setp takes at least 3 operands")
	}
	if di.d, _, di.d2, err = d.dst2(args[0]); err != nil {
		return err
	}
	if di.a, err = d.src(args[1], st); err != nil {
		return err
	}
	if di.b, err = d.src(args[2], st); err != nil {
		return err
	}
	if pair && di.d2 < 0 {
		return errors.New("setp on a pair of halves writes p|q")
	}
	if di.op != 0 {
		if len(args) < 4 {
			return errors.New("a boolean setp needs a predicate operand")
		}
		neg := false
		if di.c, neg, err = d.pred(args[3]); err != nil {
			return err
		}
		if neg {
			di.flags |= 1
		}
	}
	di.cmp = f
	di.exec = execSetp
	if pair {
		di.exec = execSetpPair
	}
	if isSet {
		dt := in.Types[0]
		one := uint64(0xffffffff)
		if dt == ptx.F32 {
			one = bf32(1)
		}
		di.imm = one
		di.exec = func(w *warp, in *dinst, m uint32) {
			for x := m; x != 0; x &= x - 1 {
				l := int32(trailing(x))
				v := in.cmp(w.r[in.a+l], w.r[in.b+l])
				if in.op != 0 {
					p := w.r[in.c+l]&1 == 1
					if in.flags&1 != 0 {
						p = !p
					}
					switch in.op {
					case 1:
						v = v && p
					case 2:
						v = v || p
					case 3:
						v = v != p
					}
				}
				if v {
					w.r[in.d+l] = in.imm
				} else {
					w.r[in.d+l] = 0
				}
			}
		}
	}
	return nil
}

func (d *decoder) decodeCarry(di *dinst, in *ptx.Instr, toks tokens) error {
	t := in.Type()
	if !t.IsInt() && t.Kind() != ptx.KindBits || t.Bits() < 32 {
		return errUnsupported
	}
	switch toks[0] {
	case "add":
		di.op = ccAdd
	case "addc":
		di.op, di.flags = ccAdd, 1
	case "sub":
		di.op = ccSub
	case "subc":
		di.op, di.flags = ccSub, 1
	case "mad", "madc":
		di.op = ccMadLo
		if toks.has("hi") {
			di.op = ccMadHi
		}
		if toks[0] == "madc" {
			di.flags = 1
		}
	default:
		return errUnsupported
	}
	if toks.has("cc") {
		di.flags |= 2
	}
	args := in.Args
	want := 3
	if di.op == ccMadLo || di.op == ccMadHi {
		want = 4
	}
	if len(args) != want {
		return fmt.Errorf("%d operands, want %d", len(args), want)
	}
	var err error
	if di.d, _, err = d.dst(args[0]); err != nil {
		return err
	}
	if di.a, err = d.src(args[1], t); err != nil {
		return err
	}
	if di.b, err = d.src(args[2], t); err != nil {
		return err
	}
	if want == 4 {
		if di.c, err = d.src(args[3], t); err != nil {
			return err
		}
	}
	di.exec = execCarry
	return nil
}
