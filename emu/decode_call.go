package emu

// Calls: call instructions and their arguments.

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

func (d *decoder) callArgOf(o ptx.Operand, size int32) (callArg, error) {
	if s, ok := o.(ptx.Sym); ok {
		si, ok := d.lookup(string(s))
		if !ok || si.kind != symLocal {
			return callArg{}, fmt.Errorf("call argument %s is not a .param variable", s)
		}
		return callArg{slot: -1, local: int32(si.off), size: size}, nil
	}
	if r, ok := o.(ptx.Reg); ok {
		return callArg{slot: d.reg(r), local: -1, size: size, mask: widthMask(r.Type.Bits())}, nil
	}
	if im, ok := o.(ptx.Imm); ok {
		return callArg{slot: d.constSlot(im.Bits), local: -1, size: size, mask: ^uint64(0)}, nil
	}
	return callArg{}, fmt.Errorf("call operand %T", o)
}

func (d *decoder) decodeCall(di *dinst, in *ptx.Instr) error {
	args := in.Args
	fi := -1
	for i, a := range args {
		if _, ok := a.(ptx.Sym); ok {
			fi = i
			break
		}
	}
	if fi < 0 {
		return errors.New("indirect calls are not supported")
	}
	name := string(args[fi].(ptx.Sym))
	callee := d.p.funcs[name]
	if callee == nil {
		return fmt.Errorf("call of unknown function %s", name)
	}
	var rets, params ptx.Vec
	if fi > 0 {
		rets, _ = args[0].(ptx.Vec)
	}
	if fi+1 < len(args) {
		params, _ = args[fi+1].(ptx.Vec)
	}
	f := callee.f
	if len(params) != len(f.Params) || len(rets) > len(f.Rets) {
		return fmt.Errorf("call of %s with %d arguments and %d results; it takes %d and returns %d", name, len(params), len(rets), len(f.Params), len(f.Rets))
	}
	for i, o := range params {
		a, err := d.callArgOf(o, int32(paramSize(f.Params[i])))
		if err != nil {
			return err
		}
		di.argOps = append(di.argOps, a)
	}
	for i, o := range rets {
		if _, ok := o.(ptx.Sink); ok {
			di.retOps = append(di.retOps, callArg{slot: -1, local: -1})
			continue
		}
		a, err := d.callArgOf(o, int32(paramSize(f.Rets[i])))
		if err != nil {
			return err
		}
		di.retOps = append(di.retOps, a)
	}
	di.callee = callee
	if callee.extern {
		di.kind = ctlExtern
		di.extern = name
		return nil
	}
	di.kind = ctlCall
	return nil
}
