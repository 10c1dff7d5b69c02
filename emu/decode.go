package emu

// The decoder: its state, module layout, the per-function pass and the opcode dispatch.

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
	addShared := func(key string, v *ptx.Var) {
		if v.Extern || v.Array < 0 {
			d.dynamic = append(d.dynamic, key)
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
	// CUDA guarantees dynamic shared memory only 16-byte alignment, whatever the extern's
	// .align (ptxas places it after the static variables): the emulator gives it exactly 16
	// (an odd multiple), so that a kernel relying on more faults here as on the GPU.
	dyn := int64(roundUp(uint64(p.sharedSize), 16))
	if dyn%32 == 0 {
		dyn += 16
	}
	for _, k := range d.dynamic {
		d.shared[k] = dyn
	}
	if len(d.dynamic) > 0 {
		p.dynPad = int(dyn) - p.sharedSize
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
					return fmt.Errorf("emu: %s: block-scoped .shared declarations are not supported", errName(df.f.Name))
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
		// A signed integer result narrower than its destination register is sign-extended
		// to the register's width, as ld does (PTX's relaxed type-checking rules for
		// destination operands, which cover ld, st and cvt): cvt.s8.s32 of 0x1ff into a
		// .b32 register is 0xffffffff; it was 0x000000ff.
		if dt := in.Types[0]; dt.Kind() == ptx.KindSigned && len(args) > 0 {
			if r, ok := args[0].(ptx.Reg); ok && r.Type.Bits() > dt.Bits() {
				dw, rm, f0 := dt.Bits(), widthMask(r.Type.Bits()), fn
				fn = func(a, b, c, e uint64) uint64 { return uint64(sext(f0(a, b, c, e), dw)) & rm }
			}
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
