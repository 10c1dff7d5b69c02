package emu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

type regKey struct {
	f int
	t ptx.Type
	n int
}

type symKind uint8

const (
	symNone symKind = iota
	symLocal
	symShared
	symKParam
	symGlobal
)

type symInfo struct {
	kind symKind
	off  int64
	name string
	size int
}

type decoder struct {
	p        *program
	regs     map[regKey]int32
	consts   map[uint64]int32
	specials map[string]int32
	gvarSlot map[string]int32
	shared   map[string]int64 // "fi:name" or ":name" (module scope)
	dynamic  []string         // keys of extern (dynamic) shared arrays
	locals   map[string]int64 // "fi:name"
	scopes   []map[string]symInfo
	fi       int
	df       *dfunc
	labels   map[string]int32
	sink     int32
	zero     int32
}

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

func decode(m *ptx.Module) *program {
	p := &program{mod: m, funcs: map[string]*dfunc{}}
	d := &decoder{p: p, regs: map[regKey]int32{}, consts: map[uint64]int32{}, specials: map[string]int32{},
		gvarSlot: map[string]int32{}, shared: map[string]int64{}, locals: map[string]int64{}}
	p.decodeErr = d.run()
	return p
}

func varSize(v *ptx.Var) int {
	return satSize(v.Array, v.Type.Bytes())
}

func varAlign(v *ptx.Var) int {
	if v.Align > 0 {
		return v.Align
	}
	return max(v.Type.Bytes(), 1)
}

func paramAlign(q ptx.Param) int {
	if q.Align > 0 {
		return q.Align
	}
	return max(q.Type.Bytes(), 1)
}

func paramSize(q ptx.Param) int {
	return satSize(q.Array, q.Type.Bytes())
}

func (d *decoder) allocLocal(size, align int) int64 {
	off := int64(roundUp(uint64(d.p.localSize), uint64(max(align, 1))))
	d.p.localSize = min(int(off)+size, sizeCap) // launches refuse sizes near the cap
	return off
}

func (d *decoder) run() error {
	p, m := d.p, d.p.mod
	d.sink = d.newSlots(1)
	d.zero = d.constSlot(0)
	dynAlign := 16
	addShared := func(key string, v *ptx.Var) {
		if v.Extern || v.Array < 0 {
			d.dynamic = append(d.dynamic, key)
			dynAlign = max(dynAlign, varAlign(v))
			return
		}
		off := roundUp(uint64(p.sharedSize), uint64(varAlign(v)))
		d.shared[key] = int64(off)
		p.sharedSize = min(int(off)+varSize(v), sizeCap)
		p.sharedVars = append(p.sharedVars, sharedVar{name: v.Name, off: int64(off), size: int64(varSize(v))})
	}
	for _, v := range m.Vars {
		switch v.Space {
		case ptx.SpaceShared:
			addShared(":"+v.Name, v)
		case ptx.SpaceGlobal, ptx.SpaceConst:
			p.gvars = append(p.gvars, v)
			s := d.newSlots(1)
			d.gvarSlot[v.Name] = s
			p.inits = append(p.inits, initSlot{slot: s, kind: isGlobalVar, name: v.Name})
		}
	}
	for i, f := range m.Funcs {
		if old, ok := p.funcs[f.Name]; ok && !old.extern && f.Extern {
			continue
		}
		df := &dfunc{f: f, idx: i, extern: f.Extern || len(f.Body) == 0 && !f.Entry}
		p.funcs[f.Name] = df
		p.flist = append(p.flist, df)
	}
	for _, df := range p.flist {
		if df.extern {
			continue
		}
		f := df.f
		for _, v := range f.Vars {
			key := fmt.Sprintf("%d:%s", df.idx, v.Name)
			switch v.Space {
			case ptx.SpaceShared:
				addShared(key, v)
			case ptx.SpaceLocal, ptx.SpaceParam:
				d.locals[key] = d.allocLocal(varSize(v), varAlign(v))
			}
		}
		if f.Entry {
			off := 0
			for _, q := range f.Params {
				a := paramAlign(q)
				off = int(roundUp(uint64(off), uint64(a)))
				df.kparams = append(df.kparams, kparam{name: q.Name, off: off, size: paramSize(q), align: a, t: q.Type, array: q.Array})
				off += paramSize(q)
			}
			df.psize = off
		} else {
			for _, q := range f.Params {
				o := d.allocLocal(paramSize(q), paramAlign(q))
				df.params = append(df.params, callArg{slot: -1, local: int32(o), size: int32(paramSize(q))})
				d.locals[fmt.Sprintf("%d:%s", df.idx, q.Name)] = o
			}
			for _, q := range f.Rets {
				o := d.allocLocal(paramSize(q), paramAlign(q))
				df.rets = append(df.rets, callArg{slot: -1, local: int32(o), size: int32(paramSize(q))})
				d.locals[fmt.Sprintf("%d:%s", df.idx, q.Name)] = o
			}
		}
	}
	dyn := int64(roundUp(uint64(p.sharedSize), uint64(dynAlign)))
	for _, k := range d.dynamic {
		d.shared[k] = dyn
	}
	if len(d.dynamic) > 0 && int(dyn) > p.sharedSize {
		p.sharedSize = int(dyn)
	}
	// Entry points first so that pcs are stable; then bodies.
	for _, df := range p.flist {
		if df.extern {
			continue
		}
		df.entry = int32(len(p.code))
		pc := df.entry
		for _, in := range df.f.Body {
			if in.Op == "" || in.Op == "{" || in.Op == "}" {
				continue
			}
			pc++
		}
		df.end = pc + 1 // the implicit ret
		p.code = append(p.code, make([]dinst, df.end-df.entry)...)
	}
	var errs []error
	for _, df := range p.flist {
		if df.extern {
			continue
		}
		if err := d.function(df); err != nil {
			errs = append(errs, err)
		}
	}
	if !noCompact {
		d.compact()
	}
	return errors.Join(errs...)
}

func (d *decoder) function(df *dfunc) error {
	p := d.p
	d.fi, d.df = df.idx, df
	d.scopes = []map[string]symInfo{{}}
	d.labels = map[string]int32{}
	pc := df.entry
	for _, in := range df.f.Body {
		switch {
		case in.Op == "" && in.Label != "":
			d.labels[in.Label] = pc
		case in.Op == "" || in.Op == "{" || in.Op == "}":
		default:
			pc++
		}
	}
	pc = df.entry
	var last *ptx.Instr
	for _, in := range df.f.Body {
		switch {
		case in.Op == "{":
			d.scopes = append(d.scopes, map[string]symInfo{})
			continue
		case in.Op == "}":
			if len(d.scopes) > 1 {
				d.scopes = d.scopes[:len(d.scopes)-1]
			}
			continue
		case in.Op == "":
			if v := instrDecl(in); v != nil {
				switch v.Space {
				case ptx.SpaceParam, ptx.SpaceLocal:
					off := d.allocLocal(varSize(v), varAlign(v))
					d.scopes[len(d.scopes)-1][v.Name] = symInfo{kind: symLocal, off: off, name: v.Name, size: varSize(v)}
				case ptx.SpaceShared:
					return fmt.Errorf("emu: %s: block-scoped .shared declarations are not supported", df.f.Name)
				}
			}
			continue
		}
		di := d.instr(in, pc)
		p.code[pc] = di
		pc++
		last = in
	}
	// The implicit return at the end of the body.
	p.code[pc] = dinst{kind: ctlRet, guard: -1, d: -1, a: -1, b: -1, c: -1, e: -1, d2: -1, pc: pc, fidx: int32(df.idx),
		src: &ptx.Instr{Op: "ret", Pos: posOf(last)}}
	return nil
}

func posOf(in *ptx.Instr) ptx.Pos {
	if in == nil {
		return ptx.Pos{}
	}
	return in.Pos
}

// instr decodes one instruction; forms it does not know decode to ctlUnsupported, which
// fails when executed.
func (d *decoder) instr(in *ptx.Instr, pc int32) dinst {
	di := dinst{guard: -1, d: -1, a: -1, b: -1, c: -1, e: -1, d2: -1, pc: pc, src: in, fidx: int32(d.fi), vec: 1}
	if in.Guard != nil {
		di.guard = d.reg(*in.Guard)
		di.gneg = in.GuardNeg
	}
	if err := d.decodeSafe(&di, in); err != nil {
		di.kind = ctlUnsupported
		di.exec = nil
		di.extern = err.Error()
	}
	return di
}

// decodeSafe turns a decoder panic on a malformed instruction into an error.
func (d *decoder) decodeSafe(di *dinst, in *ptx.Instr) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed instruction: %v", r)
		}
	}()
	return d.decodeOp(di, in)
}

// noCompact turns register compaction off (tests compare both).
var noCompact = false

var errUnsupported = errors.New("the emulator does not implement this instruction form")

func splitOp(in *ptx.Instr) tokens {
	t := tokens(strings.Split(in.Op, "."))
	return append(t, in.Q...)
}

func (d *decoder) decodeOp(di *dinst, in *ptx.Instr) error {
	toks := splitOp(in)
	op := toks[0]
	t := in.Type()
	di.t = t
	args := in.Args
	switch op {
	case "mov":
		return d.decodeMov(di, in)
	case "add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "sqrt", "rsqrt", "rcp",
		"ex2", "lg2", "sin", "cos", "tanh", "copysign", "mul24", "mad24", "sad":
		if toks.has("cc") {
			return d.decodeCarry(di, in, toks)
		}
		var fn laneFn
		var err error
		if t.IsFloat() {
			fn, err = floatArith(op, t, toks[1:])
		} else {
			fn, err = intArith(op, t, toks[1:])
		}
		if err != nil {
			return err
		}
		if err := d.alu(di, args, fn, t); err != nil {
			return err
		}
		plain := len(toks) == 1
		switch {
		case op == "add" && t == ptx.F32 && plain:
			di.exec = execAddF32
		case op == "mul" && t == ptx.F32 && plain:
			di.exec = execMulF32
		case (op == "fma" || op == "mad") && t == ptx.F32 && len(toks) == 2 && toks[1] == "rn":
			di.exec = execFmaF32
		case op == "add" && plain && (t == ptx.U32 || t == ptx.S32 || t == ptx.B32):
			di.exec = execAddU32
		case op == "add" && plain && (t == ptx.U64 || t == ptx.S64 || t == ptx.B64):
			di.exec = execAddU64
		}
		return nil
	case "addc", "subc", "madc":
		return d.decodeCarry(di, in, toks)
	case "and", "or", "xor", "not", "cnot", "shl", "shr", "popc", "clz", "brev", "bfind", "bfe", "bfi":
		fn, err := bitArith(op, t, toks[1:])
		if err != nil {
			return err
		}
		return d.alu(di, args, fn, t)
	case "lop3":
		if len(args) != 5 {
			return errUnsupported
		}
		im, ok := args[4].(ptx.Imm)
		if !ok {
			return errors.New("lop3: the lookup table must be an immediate")
		}
		return d.alu(di, args[:4], lop3Fn(im.Bits&0xff), t)
	case "prmt":
		return d.alu(di, args, prmtFn(toks.any("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), ptx.B32)
	case "shf":
		return d.alu(di, args, shfFn(toks.has("l"), toks.has("clamp")), ptx.B32)
	case "testp":
		fn, err := testpFn(toks.any("finite", "infinite", "number", "notanumber", "normal", "subnormal"), t)
		if err != nil {
			return err
		}
		return d.alu(di, args, fn, t)
	case "setp", "set":
		return d.decodeSetp(di, in, toks)
	case "selp":
		if len(args) != 4 {
			return errors.New("selp takes 4 operands")
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
		neg := false
		if di.c, neg, err = d.pred(args[3]); err != nil {
			return err
		}
		x := uint64(0)
		if neg {
			x = 1
		}
		di.fn = func(a, b, c, _ uint64) uint64 {
			if (c^x)&1 != 0 {
				return a
			}
			return b
		}
		di.exec = execA3
		return nil
	case "cvt":
		if len(in.Types) != 2 {
			return errUnsupported
		}
		fn, err := cvtFn(in.Types[0], in.Types[1], toks[1:])
		if err != nil {
			return err
		}
		if err := d.alu(di, args, fn, in.Types[1]); err != nil {
			return err
		}
		return nil
	case "cvta":
		sp := spaceOf(toks)
		return d.alu(di, args, cvtaFn(sp, toks.has("to"), t), t)
	case "isspacep":
		return d.alu(di, args, isspaceFn(spaceOf(toks)), ptx.U64)
	case "ld", "ldu":
		return d.decodeMem(di, in, toks, true)
	case "st":
		if toks.has("async") {
			return d.decodeStAsync(di, in, toks, false)
		}
		return d.decodeMem(di, in, toks, false)
	case "atom", "red":
		if toks.has("async") {
			return d.decodeStAsync(di, in, toks, true)
		}
		return d.decodeAtom(di, in, toks, op == "red")
	case "multimem":
		return d.decodeMultimem(di, in, toks)
	case "bra":
		if len(args) != 1 {
			return errors.New("bra takes a label")
		}
		s, ok := args[0].(ptx.Sym)
		if !ok {
			return errUnsupported
		}
		target, ok := d.labels[string(s)]
		if !ok {
			return fmt.Errorf("unknown label %s", s)
		}
		di.kind = ctlBra
		di.target = target
		di.backRef = target <= di.pc
		return nil
	case "call":
		return d.decodeCall(di, in)
	case "ret":
		di.kind = ctlRet
		return nil
	case "exit":
		di.kind = ctlExit
		return nil
	case "trap", "brkpt":
		di.kind = ctlTrap
		return nil
	case "bar", "barrier":
		return d.decodeBar(di, in, toks)
	case "membar", "fence":
		di.exec = execFence
		di.scope = scSys
		switch {
		case toks.has("cta"):
			di.scope = scCTA
		case toks.has("cluster"):
			di.scope = scCluster
		case toks.has("gl"), toks.has("gpu"):
			di.scope = scGPU
		}
		if toks.has("mbarrier_init") {
			di.exec = execNop
		}
		return nil
	case "shfl", "vote", "redux", "match", "elect":
		return d.decodeWarp(di, in, toks)
	case "activemask":
		var err error
		di.d, _, err = d.dst(args[0])
		di.exec = execActivemask
		return err
	case "nanosleep":
		di.exec = execSleep
		return nil
	case "prefetch", "prefetchu", "discard", "applypriority", "pmevent":
		di.exec = execNop
		return nil
	case "mma":
		return d.decodeMMA(di, in, toks)
	case "wgmma":
		return d.decodeWgmma(di, in, toks)
	case "ldmatrix", "stmatrix":
		return d.decodeMatrix(di, in, toks)
	case "cp":
		if toks.has("bulk") && toks.has("tensor") {
			return d.decodeTensor(di, in, toks, toks[1] == "reduce")
		}
		if len(toks) > 2 && toks[1] == "reduce" && toks.has("bulk") {
			return d.decodeBulk(di, in, toks, true)
		}
		return d.decodeCp(di, in, toks)
	case "mbarrier":
		return d.decodeMbarrier(di, in, toks)
	case "bmsk":
		return d.alu(di, args, bmskFn(toks.has("clamp")), ptx.U32)
	case "szext":
		return d.alu(di, args, szextFn(toks.has("clamp"), t == ptx.S32), t)
	case "dp4a", "dp2a":
		if len(in.Types) != 2 {
			return errUnsupported
		}
		as, bs := in.Types[0] == ptx.S32, in.Types[1] == ptx.S32
		fn := dp4aFn(as, bs)
		if op == "dp2a" {
			fn = dp2aFn(as, bs, toks.has("hi"))
		}
		return d.alu(di, args, fn, ptx.U32)
	case "slct":
		if len(in.Types) != 2 {
			return errUnsupported
		}
		return d.alu(di, args, slctFn(in.Types[1], toks.has("ftz")), t)
	case "mapa": // cluster.go
		return d.alu(di, args, mapaFn(!toks.has("shared::cluster")), t)
	case "getctarank":
		if len(args) != 2 {
			return errors.New("getctarank takes d, a")
		}
		return d.alu(di, []ptx.Operand{args[0], args[1], ptx.Special("%cluster_ctarank")}, getctarankFn, t)
	case "griddepcontrol", "setmaxnreg":
		di.exec = execNop
		return nil
	}
	return errUnsupported
}

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
	f, err := compareFn(cmp, st, toks.has("ftz"))
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

func (d *decoder) decodeBar(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	if toks.has("warp") { // bar.warp.sync membermask
		if len(args) != 1 {
			return errors.New("bar.warp.sync takes a member mask")
		}
		var err error
		if di.e, err = d.src(args[0], ptx.B32); err != nil {
			return err
		}
		di.kind = ctlWarpSync
		di.exec = execWarpBar
		di.anyPC = true
		return nil
	}
	if toks.has("cluster") { // barrier.cluster (cluster.go)
		switch {
		case toks.has("arrive"):
			di.exec = execClusterArrive
		case toks.has("wait"):
			di.kind = ctlClusterWait
		default:
			return errUnsupported
		}
		return nil
	}
	di.kind = ctlBar
	switch {
	case toks.has("arrive"):
		di.op = barArrive
	case toks.has("red"):
		di.op = barRed
	case toks.has("sync") || toks[0] == "bar" && len(toks) == 1:
		di.op = barSync
	default:
		return errUnsupported
	}
	var err error
	if di.op == barRed {
		switch toks.any("popc", "and", "or") {
		case "popc":
			di.imm = uint64(redPopc)
		case "and":
			di.imm = uint64(redAnd)
		case "or":
			di.imm = uint64(redOr)
		default:
			return errUnsupported
		}
		if len(args) < 3 {
			return errors.New("bar.red takes d, a{, b}, {!}c")
		}
		var m uint64
		if di.d, m, err = d.dst(args[0]); err != nil {
			return err
		}
		di.dmask = []uint64{m}
		neg := false
		if di.c, neg, err = d.pred(args[len(args)-1]); err != nil {
			return err
		}
		if neg {
			di.flags |= 1
		}
		args = args[1 : len(args)-1]
	}
	if len(args) < 1 || len(args) > 2 {
		return errors.New("a barrier takes an id and an optional thread count")
	}
	if di.a, err = d.src(args[0], ptx.U32); err != nil {
		return err
	}
	if len(args) == 2 {
		if di.b, err = d.src(args[1], ptx.U32); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) decodeWarp(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	t := in.Type()
	if !toks.has("sync") {
		return errors.New("the non-.sync form (removed for sm_70+)")
	}
	if len(args) < 2 {
		return errors.New("missing operands")
	}
	di.kind = ctlWarpSync
	var err error
	if di.e, err = d.src(args[len(args)-1], ptx.B32); err != nil {
		return err
	}
	switch toks[0] {
	case "shfl":
		var extra []ptx.Operand
		if len(args) == 6 { // d, p, a, b, c, mask
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if len(args) != 5 {
			return errors.New("shfl.sync takes d[|p], a, b, c, membermask")
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], ptx.B32); err != nil {
			return err
		}
		if di.b, err = d.src(args[2], ptx.B32); err != nil {
			return err
		}
		if di.c, err = d.src(args[3], ptx.B32); err != nil {
			return err
		}
		switch toks.any("up", "down", "bfly", "idx") {
		case "up":
			di.op = shflUp
		case "down":
			di.op = shflDown
		case "bfly":
			di.op = shflBfly
		case "idx":
			di.op = shflIdx
		default:
			return errUnsupported
		}
		di.exec = execShfl
	case "vote":
		if len(args) != 3 {
			return errors.New("vote.sync takes d, {!}a, membermask")
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		neg := false
		if di.a, neg, err = d.pred(args[1]); err != nil {
			return err
		}
		if neg {
			di.flags |= 1
		}
		switch toks.any("all", "any", "uni", "ballot") {
		case "all":
			di.op = voteAll
		case "any":
			di.op = voteAny
		case "uni":
			di.op = voteUni
		case "ballot":
			di.op = voteBallot
		default:
			return errUnsupported
		}
		di.exec = execVote
	case "redux":
		if len(args) != 3 {
			return errors.New("redux.sync takes d, a, membermask")
		}
		opn := toks.any("add", "min", "max", "and", "or", "xor")
		if opn == "" {
			return errUnsupported
		}
		di.op = atomOps[opn]
		if toks.has("abs") {
			di.flags |= 4
		}
		if toks.has("NaN") {
			di.flags |= 8
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], t); err != nil {
			return err
		}
		di.exec = execRedux
	case "match":
		var extra []ptx.Operand
		if len(args) == 4 { // d, p, a, mask
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if len(args) != 3 {
			return errors.New("match.sync takes d[|p], a, membermask")
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], t); err != nil {
			return err
		}
		if toks.has("all") {
			di.op = 1
		}
		di.exec = execMatch
	case "elect":
		var extra []ptx.Operand
		if len(args) == 3 {
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		di.exec = execElect
	default:
		return errUnsupported
	}
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
	if toks.any("commit_group", "wait_group", "wait_all") != "" || toks.has("prefetch") {
		di.exec = execNop
		return nil
	}
	if toks.has("tensor") {
		return errUnsupported
	}
	return d.decodeBulk(di, in, toks, false)
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
