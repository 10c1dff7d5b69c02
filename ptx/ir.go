package ptx

import (
	"math"
	"strconv"
)

// Space is a PTX state space.
type Space uint8

// The state spaces. SpaceGeneric is the absence of a space qualifier.
const (
	SpaceGeneric Space = iota
	SpaceReg
	SpaceParam
	SpaceGlobal
	SpaceShared
	SpaceSharedCluster
	SpaceLocal
	SpaceConst
)

var spaceNames = [...]string{"", "reg", "param", "global", "shared", "shared::cluster", "local", "const"}

// String returns the PTX spelling without the dot ("" for SpaceGeneric); a Space out of
// range prints as Space(n).
func (s Space) String() string {
	if int(s) < len(spaceNames) {
		return spaceNames[s]
	}
	return "Space(" + strconv.Itoa(int(s)) + ")"
}

// Pos is the Go source position that built an instruction; printed as a .loc line.
type Pos struct {
	File string
	Line int
}

// Operand is an instruction operand: Reg, Imm, Special, Sym, Addr, Vec, Sink, Pair or Not.
type Operand interface{ operand() }

// Reg is a virtual register. Registers are named by type ("%f3") and declared by the printer.
type Reg struct {
	Type Type
	N    int
}

// Imm is an immediate. Bits holds the value's bit pattern for Type (floats as IEEE bits).
type Imm struct {
	Type Type
	Bits uint64
}

// Special is a special register such as %tid.x.
type Special string

// Sym names a label, a variable or a function.
type Sym string

// Addr is a memory operand [Base+Off]; Base is a Reg, a Sym or nil (an absolute address).
type Addr struct {
	Base Operand
	Off  int64
}

// TensorAddr is the tensor operand "[tensorMap, {c0, c1, ...}]" of cp.async.bulk.tensor and
// cp.reduce.async.bulk.tensor: the generic address of a tensor map (a 64-bit register; Verify
// refuses a parameter's name, as ptxas does) and one .s32 coordinate per dimension.
type TensorAddr struct {
	Map    Operand
	Coords Vec
}

// Vec is a vector operand {a, b, c, d}.
type Vec []Operand

// Sink is the "_" operand that discards a result.
type Sink struct{}

// Pair is a two-destination operand "a|b", as in setp's p|q, shfl.sync's d|p or elect.sync's
// d|p. B may be Sink when only A is wanted; A may be Sink where the ISA allows "_".
type Pair struct {
	A, B Operand
}

// Not is a negated predicate source "!p" (bar.red, vote.sync, and the predicate of setp/selp
// combinations that allow it).
type Not struct {
	P Reg
}

func (Pair) operand()       {}
func (Not) operand()        {}
func (Reg) operand()        {}
func (Imm) operand()        {}
func (Special) operand()    {}
func (Sym) operand()        {}
func (Addr) operand()       {}
func (Vec) operand()        {}
func (TensorAddr) operand() {}
func (Sink) operand()       {}

// IntImm returns an integer immediate of type t.
func IntImm(t Type, v int64) Imm { return Imm{Type: t, Bits: uint64(v)} }

// FloatImm returns a floating-point immediate of type t (F32 or F64).
func FloatImm(t Type, v float64) Imm {
	if t == F32 {
		return Imm{Type: t, Bits: uint64(math.Float32bits(float32(v)))}
	}
	return Imm{Type: t, Bits: math.Float64bits(v)}
}

// Instr is one instruction, or one of three pseudo-instructions:
//   - a label definition, when Op is "" and Label is set ("L1:");
//   - a declaration inside the function body, when Op is "" and Decl is set
//     (".param .b64 param0;"), visible until the enclosing scope closes;
//   - a scope bracket, when Op is "{" or "}" (PTX's nested blocks, used around a call
//     sequence so its .param declarations stay local; see CallSeq).
type Instr struct {
	Label string // a label definition "L1:" (no instruction)
	Decl  *Var   // a block-scoped declaration (Op == "")

	Guard    *Reg // @p
	GuardNeg bool // @!p

	Op    string   // opcode, may hold dots: "ld", "bar.sync", "multimem.ld_reduce"
	Q     []string // qualifiers in PTX order, without dots
	Types []Type   // type suffixes (two for cvt)
	Args  []Operand
	Pos   Pos
}

// ScopeOpen and ScopeClose are the opcodes of the scope brackets.
const (
	ScopeOpen  = "{"
	ScopeClose = "}"
)

// IsPseudo reports whether in is a label, a declaration or a scope bracket rather than a
// PTX instruction (a nil *Instr is: it is no instruction).
func (in *Instr) IsPseudo() bool {
	return in == nil || in.Op == "" || in.Op == ScopeOpen || in.Op == ScopeClose
}

// HasQ reports whether the instruction carries qualifier q (false for a nil *Instr).
func (in *Instr) HasQ(q string) bool {
	if in == nil {
		return false
	}
	for _, x := range in.Q {
		if x == q {
			return true
		}
	}
	return false
}

// Type returns the first type suffix, or NoType (also for a nil *Instr).
func (in *Instr) Type() Type {
	if in == nil || len(in.Types) == 0 {
		return NoType
	}
	return in.Types[0]
}

// Param is a kernel or function parameter.
type Param struct {
	Name  string
	Type  Type // the scalar type; B8 with Array > 0 for byte arrays
	Array int  // element count for .param .b8 name[N]; 0 for scalars
	Align int  // .align, 0 for the natural alignment
}

// Var is a variable in a state space (module scope, or function scope for .shared/.local).
type Var struct {
	Space  Space
	Name   string
	Type   Type
	Array  int  // element count, 0 for a scalar; -1 for an unsized extern array ([])
	Align  int  // bytes, 0 for natural
	Extern bool // .extern (dynamic shared memory, or an external symbol)
	Init   []uint64
}

// Func is a kernel (.entry) or device function (.func), or an extern declaration.
type Func struct {
	Name    string
	Entry   bool // .entry (a kernel) rather than .func
	Extern  bool // a declaration only (.extern .func)
	Visible bool // .visible
	Params  []Param
	Rets    []Param // .func return parameters
	Vars    []*Var  // function-scope variables
	Body    []*Instr

	MaxNTID  [3]int // .maxntid, zeros when unset
	ReqNTID  [3]int // .reqntid
	MinNCTA  int    // .minnctapersm
	NoReturn bool   // .noreturn
}

// Module is one PTX module.
type Module struct {
	Target  Target
	Version Version // 0: the lowest version the module needs (see RequiredVersion)
	Vars    []*Var  // module-scope variables
	Funcs   []*Func // declarations first, in order
}

// FormatImm returns PTX text for an immediate.
func FormatImm(v Imm) string {
	switch v.Type {
	case F32:
		return "0f" + hex8(uint32(v.Bits))
	case F64:
		return "0d" + hex16(v.Bits)
	}
	if v.Type.Kind() == KindSigned {
		return strconv.FormatInt(signExtend(v.Bits, v.Type.Bits()), 10)
	}
	if v.Type == Pred {
		return strconv.FormatUint(v.Bits&1, 10)
	}
	b := v.Type.Bits()
	if b > 0 && b < 64 {
		return strconv.FormatUint(v.Bits&(1<<b-1), 10)
	}
	return strconv.FormatUint(v.Bits, 10)
}

func signExtend(bits uint64, n int) int64 {
	if n <= 0 || n >= 64 {
		return int64(bits)
	}
	s := 64 - n
	return int64(bits<<s) >> s
}

const hexDigits = "0123456789ABCDEF"

func hex8(x uint32) string {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = hexDigits[x&15]
		x >>= 4
	}
	return string(b[:])
}

func hex16(x uint64) string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[x&15]
		x >>= 4
	}
	return string(b[:])
}
