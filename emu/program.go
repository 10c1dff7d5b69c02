package emu

import (
	"github.com/kgen-dev/kgen/ptx"
)

// ctl says how the scheduler treats a decoded instruction.
type ctl uint8

const (
	ctlPlain       ctl = iota // exec for the active lanes, then the group moves on
	ctlBra                    // branch to target
	ctlCall                   // call a .func of the module
	ctlExtern                 // call an extern function through the hook
	ctlRet                    // return (exit from the kernel's entry)
	ctlExit                   // exit
	ctlBar                    // block barrier: bar.sync, bar.arrive, bar.red
	ctlWarpSync               // a .sync warp operation: its lanes meet first
	ctlTrap                   // trap / brkpt
	ctlUnsupported            // fails when executed
	ctlClusterWait            // barrier.cluster.wait (cluster.go)
)

// spaces of memory instructions
const (
	spGeneric uint8 = iota
	spGlobal
	spShared
	spLocal
	spParam // the kernel's parameter buffer
	spConst
)

// address base kinds
const (
	baseReg    uint8 = iota // a register (or a variable's address in an init slot)
	baseParam               // a kernel parameter: off is the offset in the parameter buffer
	baseAbs                 // an absolute address: off
	baseLocal               // a local/param-frame variable: off is the local offset
	baseShared              // a shared variable: off is the shared offset
)

// memory semantics
const (
	semWeak uint8 = iota
	semVolatile
	semRelaxed
	semAcquire
	semRelease
	semAcqRel
)

// scopes
const (
	scNone uint8 = iota
	scCTA
	scCluster
	scGPU
	scSys
)

type laneFn func(a, b, c, d uint64) uint64

// dinst is a decoded instruction. Register operands are slot bases: slot*32, the index of
// lane 0 of that register in a warp's register file.
type dinst struct {
	exec  func(w *warp, in *dinst, m uint32)
	fn    laneFn
	cmp   func(a, b uint64) bool
	kind  ctl
	nsrc  uint8
	gneg  bool
	guard int32 // predicate slot base, -1 for none
	d     int32
	a     int32
	b     int32
	c     int32
	e     int32
	d2    int32 // a second destination (p of d|p), -1 for none
	dv    []int32
	dmask []uint64 // per destination: the register's width mask
	av    []int32
	sub   []*dinst // extra memory operands (their base register in a)

	t      ptx.Type
	op     uint8 // sub-operation
	flags  uint16
	space  uint8
	sem    uint8
	scope  uint8
	base   uint8
	vec    uint8 // elements per access
	size   uint8 // bytes per element
	align  uint8 // required alignment of the whole access
	signed bool
	off    int64
	imm    uint64
	target int32

	callee  *dfunc
	extern  string
	argOps  []callArg
	retOps  []callArg
	pc      int32
	fidx    int32
	src     *ptx.Instr
	backRef bool // a branch to an earlier instruction
	anyPC   bool // bar.warp.sync: meets the lanes waiting at any bar.warp.sync (sm_70+)
	aligned bool // a .sync.aligned warp-collective (mma, ldmatrix, stmatrix): all 32 lanes
}

// callArg is one argument or result of a call: a register/constant slot, or a param-frame
// variable (local offset).
type callArg struct {
	slot  int32 // slot base, or -1
	local int32 // local offset of a .param variable, or -1
	size  int32
	mask  uint64
}

// dfunc is a decoded function.
type dfunc struct {
	f       *ptx.Func
	idx     int
	entry   int32 // first pc
	end     int32
	params  []callArg // .func: local offsets of the parameters; .entry: parameter-buffer offsets
	rets    []callArg
	kparams []kparam
	psize   int // parameter buffer size of an entry
	extern  bool
}

type kparam struct {
	name  string
	off   int
	size  int
	align int
	t     ptx.Type
	array int
}

// init slot kinds: registers filled when a warp starts
const (
	isConst uint8 = iota
	isTid
	isNtid
	isCtaid
	isNctaid
	isLaneid
	isWarpid
	isNwarpid
	isLanemaskEq
	isLanemaskLe
	isLanemaskLt
	isLanemaskGe
	isLanemaskGt
	isGlobalVar
	isDynSmem
	isTotalSmem
	isZero
	isGPU // %smid and friends: the GPU index stands in
	// cluster special registers (cluster.go)
	isClusterCtaid
	isClusterNctaid
	isClusterid
	isNclusterid
	isClusterRank
	isClusterNrank
	isExplicitCluster
)

type initSlot struct {
	slot int32 // base
	kind uint8
	dim  uint8
	val  uint64
	name string
}

// sharedVar is a static shared variable's place.
type sharedVar struct {
	name      string
	off, size int64
}

// program is a decoded module.
type program struct {
	mod        *ptx.Module
	code       []dinst
	funcs      map[string]*dfunc
	flist      []*dfunc
	nslots     int
	inits      []initSlot
	localSize  int         // per thread
	sharedSize int         // static shared bytes
	dynPad     int         // bytes between the static variables and the dynamic array
	sharedVars []sharedVar // static shared variables, for reports
	gvars      []*ptx.Var  // module-scope .global/.const variables
	decodeErr  error
}
