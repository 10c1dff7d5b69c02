package emu

// Operands: registers, constants, special registers, symbols and immediates as slots.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

func (d *decoder) newSlots(n int) int32 {
	s := int32(d.p.nslots * 32)
	d.p.nslots += n
	return s
}

func (d *decoder) reg(r ptx.Reg) int32 {
	k := regKey{d.fi, r.Type, r.N}
	if s, ok := d.regs[k]; ok {
		return s
	}
	n := 1
	if r.Type == ptx.B128 {
		n = 2
	}
	s := d.newSlots(n)
	d.regs[k] = s
	return s
}

func (d *decoder) constSlot(v uint64) int32 {
	if s, ok := d.consts[v]; ok {
		return s
	}
	s := d.newSlots(1)
	d.consts[v] = s
	d.p.inits = append(d.p.inits, initSlot{slot: s, kind: isConst, val: v})
	return s
}

var specialKinds = map[string]initSlot{
	"%laneid": {kind: isLaneid}, "%warpid": {kind: isWarpid}, "%nwarpid": {kind: isNwarpid},
	"%lanemask_eq": {kind: isLanemaskEq}, "%lanemask_le": {kind: isLanemaskLe}, "%lanemask_lt": {kind: isLanemaskLt},
	"%lanemask_ge": {kind: isLanemaskGe}, "%lanemask_gt": {kind: isLanemaskGt},
	"%smid": {kind: isGPU}, "%nsmid": {kind: isConst, val: 132}, "%gridid": {kind: isZero},
	"%dynamic_smem_size": {kind: isDynSmem}, "%total_smem_size": {kind: isTotalSmem},
	"%cluster_ctarank": {kind: isClusterRank}, "%cluster_nctarank": {kind: isClusterNrank},
	"%is_explicit_cluster": {kind: isExplicitCluster},
}

func (d *decoder) special(s ptx.Special) (int32, error) {
	name := string(s)
	if sl, ok := d.specials[name]; ok {
		return sl, nil
	}
	var is initSlot
	if k, ok := specialKinds[name]; ok {
		is = k
	} else if i := strings.LastIndexByte(name, '.'); i > 0 {
		dim := map[string]uint8{"x": 0, "y": 1, "z": 2}[name[i+1:]]
		if _, ok := map[string]bool{"x": true, "y": true, "z": true}[name[i+1:]]; !ok {
			return 0, fmt.Errorf("special register %s", name)
		}
		switch name[:i] {
		case "%tid":
			is = initSlot{kind: isTid, dim: dim}
		case "%ntid":
			is = initSlot{kind: isNtid, dim: dim}
		case "%ctaid":
			is = initSlot{kind: isCtaid, dim: dim}
		case "%nctaid":
			is = initSlot{kind: isNctaid, dim: dim}
		case "%clusterid":
			is = initSlot{kind: isClusterid, dim: dim}
		case "%nclusterid":
			is = initSlot{kind: isNclusterid, dim: dim}
		case "%cluster_ctaid":
			is = initSlot{kind: isClusterCtaid, dim: dim}
		case "%cluster_nctaid":
			is = initSlot{kind: isClusterNctaid, dim: dim}
		default:
			return 0, fmt.Errorf("special register %s", name)
		}
	} else {
		return 0, fmt.Errorf("special register %s", name)
	}
	sl := d.newSlots(1)
	is.slot = sl
	d.p.inits = append(d.p.inits, is)
	d.specials[name] = sl
	return sl, nil
}

// lookup resolves a variable or parameter name in the current function.
func (d *decoder) lookup(name string) (symInfo, bool) {
	for i := len(d.scopes) - 1; i >= 0; i-- {
		if s, ok := d.scopes[i][name]; ok {
			return s, true
		}
	}
	fk := fmt.Sprintf("%d:%s", d.fi, name)
	if off, ok := d.locals[fk]; ok {
		return symInfo{kind: symLocal, off: off, name: name}, true
	}
	if off, ok := d.shared[fk]; ok {
		return symInfo{kind: symShared, off: off, name: name}, true
	}
	if d.df.f.Entry {
		for _, kp := range d.df.kparams {
			if kp.name == name {
				return symInfo{kind: symKParam, off: int64(kp.off), name: name, size: kp.size}, true
			}
		}
	}
	if off, ok := d.shared[":"+name]; ok {
		return symInfo{kind: symShared, off: off, name: name}, true
	}
	if s, ok := d.gvarSlot[name]; ok {
		return symInfo{kind: symGlobal, off: int64(s), name: name}, true
	}
	return symInfo{}, false
}

func immBits(im ptx.Imm, t ptx.Type) uint64 {
	v := im.Bits
	imF := im.Type == ptx.F32 || im.Type == ptx.F64
	if imF {
		fv := f64(v)
		if im.Type == ptx.F32 {
			fv = float64(f32(v))
		}
		switch {
		case t == ptx.F32 || t == ptx.F64 || t == ptx.F16 || t == ptx.BF16:
			return fromFloat(t, fv, rndNear)
		case t.Bits() == 32 && im.Type == ptx.F64:
			return bf32(float32(fv))
		case t.Bits() == 16 && im.Type != ptx.NoType && im.Type.Bits() > 16:
			return f2h(fv)
		}
		if t == ptx.NoType || t.Bits() >= im.Type.Bits() {
			return v & widthMask(im.Type.Bits())
		}
	}
	if t == ptx.Pred {
		return v & 1
	}
	if t == ptx.NoType || t.Bits() == 0 {
		return v
	}
	if t.Bits() >= 64 {
		return v
	}
	return v & widthMask(t.Bits())
}

func (d *decoder) symAddr(name string) (int32, error) {
	s, ok := d.lookup(name)
	if !ok {
		return 0, fmt.Errorf("unknown name %s", name)
	}
	switch s.kind {
	case symLocal, symShared:
		return d.constSlot(uint64(s.off)), nil
	case symGlobal:
		return int32(s.off), nil
	case symKParam: // its generic address (cvta.param is the identity)
		return d.constSlot(regionParam<<regionShift | uint64(s.off)), nil
	}
	return 0, fmt.Errorf("the address of kernel parameter %s", name)
}

// src decodes a source operand of type t into a slot base.
func (d *decoder) src(o ptx.Operand, t ptx.Type) (int32, error) {
	if im, ok := o.(ptx.Imm); ok && t == ptx.B128 {
		// Two adjacent constant slots: the low and high halves.
		s := d.newSlots(2)
		d.p.inits = append(d.p.inits, initSlot{slot: s, kind: isConst, val: im.Bits}, initSlot{slot: s + 32, kind: isConst})
		return s, nil
	}
	switch o := o.(type) {
	case ptx.Reg:
		return d.reg(o), nil
	case ptx.Imm:
		return d.constSlot(immBits(o, t)), nil
	case ptx.Special:
		return d.special(o)
	case ptx.Sym:
		return d.symAddr(string(o))
	case nil:
		return 0, errors.New("missing operand")
	}
	return 0, fmt.Errorf("operand %T", o)
}

// pred decodes a predicate source, possibly negated.
func (d *decoder) pred(o ptx.Operand) (int32, bool, error) {
	if r, ok := notOf(o); ok {
		return d.reg(r), true, nil
	}
	s, err := d.src(o, ptx.Pred)
	return s, false, err
}

func (d *decoder) dst(o ptx.Operand) (int32, uint64, error) {
	switch o := o.(type) {
	case ptx.Reg:
		m := widthMask(o.Type.Bits())
		if o.Type == ptx.Pred {
			m = 1
		}
		return d.reg(o), m, nil
	case ptx.Sink:
		return d.sink, ^uint64(0), nil
	case nil:
		return 0, 0, errors.New("missing destination")
	}
	return 0, 0, fmt.Errorf("destination %T", o)
}

// dst2 decodes "a" or "a|b" (a ptx Pair, or two operands a, b from a flattened form).
func (d *decoder) dst2(o ptx.Operand, second ...ptx.Operand) (int32, uint64, int32, error) {
	a, b, ok := pairOf(o)
	if len(second) == 1 {
		a, b, ok = o, second[0], true
	}
	if ok {
		s, m, err := d.dst(a)
		if err != nil {
			return 0, 0, -1, err
		}
		s2 := int32(-1)
		if _, sink := b.(ptx.Sink); !sink && b != nil {
			s2, _, err = d.dst(b)
		}
		return s, m, s2, err
	}
	s, m, err := d.dst(o)
	return s, m, -1, err
}
