package emu

// Memory: spaces, semantics, addresses, ld/st, atom/red, multimem and the cp dispatch.

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

func spaceOf(toks tokens) uint8 {
	for _, x := range toks[1:] {
		switch x {
		case "global":
			return spGlobal
		case "shared", "shared::cta", "shared::cluster":
			return spShared
		case "local":
			return spLocal
		case "param", "param::entry", "param::func":
			return spParam
		case "const":
			return spConst
		}
	}
	return spGeneric
}

func semOf(toks tokens) (uint8, uint8) {
	sem := semWeak
	switch toks.any("volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "mmio") {
	case "volatile", "mmio":
		sem = semVolatile
	case "relaxed":
		sem = semRelaxed
	case "acquire":
		sem = semAcquire
	case "release":
		sem = semRelease
	case "acq_rel", "sc":
		sem = semAcqRel
	}
	sc := scNone
	switch toks.any("cta", "cluster", "gpu", "sys") {
	case "cta":
		sc = scCTA
	case "cluster":
		sc = scCluster
	case "gpu":
		sc = scGPU
	case "sys":
		sc = scSys
	}
	if sem == semVolatile {
		sc = scSys
	}
	return sem, sc
}

func vecOf(toks tokens) int {
	switch toks.any("v2", "v4", "v8") {
	case "v2":
		return 2
	case "v4":
		return 4
	case "v8":
		return 8
	}
	return 1
}

// addr decodes a memory operand into di.base/a/off (and may override the space).
func (d *decoder) addr(di *dinst, o ptx.Operand) error {
	a, ok := o.(ptx.Addr)
	if !ok {
		return fmt.Errorf("want a memory operand, got %T", o)
	}
	di.off = a.Off
	switch b := a.Base.(type) {
	case nil:
		di.base = baseAbs
	case ptx.Reg:
		di.base = baseReg
		di.a = d.reg(b)
	case ptx.Sym:
		s, ok := d.lookup(string(b))
		if !ok {
			return fmt.Errorf("unknown name %s", b)
		}
		switch s.kind {
		case symKParam:
			if di.space != spParam && di.space != spGeneric {
				return fmt.Errorf("kernel parameter %s used outside the param space", b)
			}
			di.base = baseParam
			di.off += s.off
		case symLocal:
			di.base = baseLocal
			di.off += s.off
		case symShared:
			di.base = baseShared
			di.off += s.off
		case symGlobal:
			di.base = baseReg
			di.a = int32(s.off)
		}
	default:
		return fmt.Errorf("address base %T", b)
	}
	return nil
}

func (d *decoder) decodeMem(di *dinst, in *ptx.Instr, toks tokens, load bool) error {
	t := in.Type()
	if len(in.Args) != 2 || t == ptx.NoType {
		return errors.New("ld/st take a type and 2 operands")
	}
	di.space = spaceOf(toks)
	di.sem, di.scope = semOf(toks)
	n := vecOf(toks)
	di.vec = uint8(n)
	di.size = uint8(t.Bytes())
	di.align = uint8(n * t.Bytes())
	di.signed = t.Kind() == ptx.KindSigned
	data, mem := in.Args[0], in.Args[1]
	if !load {
		data, mem = in.Args[1], in.Args[0]
	}
	if err := d.addr(di, mem); err != nil {
		return err
	}
	var elems []ptx.Operand
	if v, ok := data.(ptx.Vec); ok {
		elems = v
	} else {
		elems = []ptx.Operand{data}
	}
	if len(elems) != n {
		return fmt.Errorf("vector of %d for .v%d", len(elems), n)
	}
	for _, e := range elems {
		if load {
			s, m, err := d.dst(e)
			if err != nil {
				return err
			}
			di.dv = append(di.dv, s)
			di.dmask = append(di.dmask, m)
		} else {
			s, err := d.src(e, t)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
		}
	}
	if load {
		di.exec = execLd
	} else {
		di.exec = execSt
	}
	return nil
}

func (d *decoder) decodeAtom(di *dinst, in *ptx.Instr, toks tokens, red bool) error {
	t := in.Type()
	di.space = spaceOf(toks)
	di.sem, di.scope = semOf(toks)
	opn := toks.any("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")
	if opn == "" || t == ptx.NoType {
		return errUnsupported
	}
	di.op = atomOps[opn]
	if di.op == aAdd && t == ptx.F32 {
		di.op = aAddFTZ
	}
	n := vecOf(toks)
	di.vec = uint8(n)
	di.size = uint8(t.Bytes())
	di.align = uint8(n * t.Bytes())
	args := in.Args
	if !red {
		if len(args) < 3 {
			return errors.New("atom takes at least 3 operands")
		}
		if v, ok := args[0].(ptx.Vec); ok {
			for _, e := range v {
				s, m, err := d.dst(e)
				if err != nil {
					return err
				}
				di.dv = append(di.dv, s)
				di.dmask = append(di.dmask, m)
			}
		} else {
			s, m, err := d.dst(args[0])
			if err != nil {
				return err
			}
			di.d = s
			di.dmask = []uint64{m}
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return errors.New("missing operands")
	}
	if err := d.addr(di, args[0]); err != nil {
		return err
	}
	var elems []ptx.Operand
	if v, ok := args[1].(ptx.Vec); ok {
		elems = v
	} else {
		elems = []ptx.Operand{args[1]}
	}
	if len(elems) != n {
		return fmt.Errorf("vector of %d for .v%d", len(elems), n)
	}
	for _, e := range elems {
		s, err := d.src(e, t)
		if err != nil {
			return err
		}
		di.av = append(di.av, s)
	}
	if di.op == aCas {
		if len(args) < 3 {
			return errors.New("cas needs a new value")
		}
		var err error
		if di.c, err = d.src(args[2], t); err != nil {
			return err
		}
	}
	di.exec = execAtom
	return nil
}

func (d *decoder) decodeMultimem(di *dinst, in *ptx.Instr, toks tokens) error {
	if len(toks) < 2 {
		return errUnsupported
	}
	t := in.Type()
	di.sem, di.scope = semOf(toks)
	n := vecOf(toks)
	di.vec = uint8(n)
	di.size = uint8(t.Bytes())
	di.align = uint8(n * t.Bytes())
	if toks.has("acc::f32") {
		di.flags |= 2
	}
	if toks.has("acc::f16") {
		di.flags |= 4
	}
	if opn := toks.any("add", "min", "max", "and", "or", "xor"); opn != "" {
		di.op = atomOps[opn]
	}
	args := in.Args
	switch toks[1] {
	case "ld_reduce":
		di.flags |= uint16(mmLdReduce) << 8
		if len(args) != 2 {
			return errors.New("multimem.ld_reduce takes 2 operands")
		}
		var elems []ptx.Operand
		if v, ok := args[0].(ptx.Vec); ok {
			elems = v
		} else {
			elems = []ptx.Operand{args[0]}
		}
		for _, e := range elems {
			s, m, err := d.dst(e)
			if err != nil {
				return err
			}
			di.dv = append(di.dv, s)
			di.dmask = append(di.dmask, m)
		}
		if err := d.addr(di, args[1]); err != nil {
			return err
		}
	case "st", "red":
		if toks[1] == "st" {
			di.flags |= uint16(mmSt) << 8
		} else {
			di.flags |= uint16(mmRed) << 8
		}
		if len(args) != 2 {
			return errors.New("multimem.st/red take 2 operands")
		}
		if err := d.addr(di, args[0]); err != nil {
			return err
		}
		var elems []ptx.Operand
		if v, ok := args[1].(ptx.Vec); ok {
			elems = v
		} else {
			elems = []ptx.Operand{args[1]}
		}
		for _, e := range elems {
			s, err := d.src(e, t)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
		}
	default:
		return errUnsupported
	}
	if len(di.dv)+len(di.av) != n {
		return fmt.Errorf("vector of %d for .v%d", len(di.dv)+len(di.av), n)
	}
	di.exec = execMultimem
	return nil
}

// decodeCp decodes cp.async.bulk (async.go) and cp.async (cpasync.go).
func (d *decoder) decodeCp(di *dinst, in *ptx.Instr, toks tokens) error {
	if !toks.has("async") {
		return errUnsupported
	}
	if !toks.has("bulk") {
		return d.decodeCpAsync(di, in, toks)
	}
	switch {
	case toks.has("commit_group"):
		di.op, di.exec = bulkCommit, execBulkGroup
		return nil
	case toks.has("wait_group"):
		im, ok := firstImm(in.Args)
		if !ok || int64(im.Bits) < 0 {
			return errors.New("cp.async.bulk.wait_group takes a non-negative integer immediate")
		}
		di.op, di.imm, di.exec = bulkWait, im.Bits, execBulkGroup
		if toks.has("read") {
			di.op = bulkWaitRead
		}
		return nil
	case toks.has("wait_all") || toks.has("prefetch"):
		di.exec = execNop
		return nil
	}
	if toks.has("tensor") {
		return errUnsupported
	}
	return d.decodeBulk(di, in, toks, false)
}
