package dsl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Type is a value type: ptx's fundamental types, named as the DSL uses them.
type Type = ptx.Type

// The DSL's value types.
const (
	Bool   = ptx.Pred
	I8     = ptx.S8
	I16    = ptx.S16
	I32    = ptx.S32
	I64    = ptx.S64
	U8     = ptx.U8
	U16    = ptx.U16
	U32    = ptx.U32
	U64    = ptx.U64
	F16    = ptx.F16
	BF16   = ptx.BF16
	F32    = ptx.F32
	F64    = ptx.F64
	F16x2  = ptx.F16x2
	BF16x2 = ptx.BF16x2
	E4M3   = ptx.E4M3
	E5M2   = ptx.E5M2
	E4M3x2 = ptx.E4M3x2
	E5M2x2 = ptx.E5M2x2
	E4M3x4 = ptx.E4M3x4 // four e4m3 in a 32-bit word (fp8 multimem)
	E5M2x4 = ptx.E5M2x4 // four e5m2 in a 32-bit word (fp8 multimem)
)

// Error is one recorded misuse, with the Go source position of the call that caused it.
type Error struct {
	Pos ptx.Pos
	Msg string
}

// Error returns the position and the message (an excerpt past maxErrMsg bytes: names are
// the caller's, and a 100 KB one gives a short error).
func (e *Error) Error() string {
	if e == nil {
		return "dsl: a nil *Error"
	}
	msg := excerpt.Cut(e.Msg, maxErrMsg)
	if e.Pos.File == "" {
		return "dsl: " + msg
	}
	return fmt.Sprintf("%s:%d: %s", e.Pos.File, e.Pos.Line, msg)
}

// maxErrMsg bounds an error's message, maxErrName a name it quotes.
const (
	maxErrMsg  = 1024
	maxErrName = 128
)

// errName is a kernel or function name for an error message: an excerpt past maxErrName.
func errName(name string) string { return excerpt.Cut(name, maxErrName) }

// Option configures a Kernel.
type Option func(*Kernel)

// WithTarget sets the GPU target (default sm_90).
func WithTarget(t ptx.Target) Option { return func(k *Kernel) { k.target = t } }

// WithoutLoc omits .loc source lines.
func WithoutLoc() Option { return func(k *Kernel) { k.noLoc = true } }

// WithShiftDivision makes integer Div and Rem by a constant emit shifts, masks and a
// multiply-high where those are exact (see divconst.go): ptxas compiles div and rem by an
// immediate to its general sequence of about 30 instructions. Off by default: on an H200 it
// was not faster everywhere (docs/dsl.md, "Division by a constant").
func WithShiftDivision() Option { return func(k *Kernel) { k.shiftDiv = true } }

// SetShiftDivision turns WithShiftDivision on or off for the Div and Rem built from here on:
// a library kernel whose configuration measured faster with it (GemmSM90Config.ShiftDivision)
// turns it on in its body.
func (k *Kernel) SetShiftDivision(on bool) {
	if !k.live() {
		return
	}
	k.shiftDiv = on
}

// Kernel builds one PTX kernel (.entry) and the module around it; make one with New. On a
// nil Kernel every method is a no-op returning zeros, and Build and Err report it. A zero
// Kernel (not made by New) is made usable on first use, and Build reports the misuse.
type Kernel struct {
	name   string
	target ptx.Target
	noLoc  bool
	// shiftDiv strength-reduces Div and Rem by constants (WithShiftDivision).
	shiftDiv bool
	fn       *ptx.Func
	mod      *ptx.Module
	nreg     [256]int // registers made so far, by register type (any ptx.Type indexes it)
	nlabel   int
	errs     []error
	built    bool
	params   map[string]bool
	// boundsAt is where LaunchBounds declared the kernel's bounds (zero: not declared).
	boundsAt ptx.Pos
	divs     map[ptx.Reg]int64 // known divisors of runtime values (Assume)
	// memos holds the pure computations done so far (common subexpressions), visible in the
	// scope of runtime control flow that made them and the scopes nested in it; nested lists
	// the keys made inside runtime control flow, innermost scope last, and scopes where each
	// open nesting level's keys start in it: they leave memos when their level ends.
	memos     map[memoKey]Value
	nested    []memoKey
	scopes    []int
	mutable   regSet // the registers of variables (Var)
	externs   map[string]*Func
	held      int // nesting depth of hold
	paramInfo []ParamInfo
	heldPos   ptx.Pos // the position instructions carry while held
	// Runtime scopes (If, Else, For, While bodies): scopeIDs is the stack of open ones (0: the
	// kernel's top level), scopePos where each was opened, ended which have closed; regScope
	// holds, per register type, the scope each register was made in. A register made in a
	// scope that has ended is not set on every path after it (see checkScope).
	scopeIDs []int32
	scopePos []ptx.Pos
	ended    []bool
	regScope [256][]int32
	stale    regSet     // registers already reported by checkScope
	smem     int64      // bytes of static shared memory (SharedArray) so far
	bars     *namedBars // barrier ids by name and used directly (NamedBarrierFor)
	div      divState   // open Ifs on the thread index (SyncThreads inside them)
	opSlab   []opBox    // instructions not yet used by op
	nslab    int        // the length of the last slab
}

// New starts a kernel named name.
func New(name string, opts ...Option) *Kernel {
	k := &Kernel{}
	k.setup(name, opts, true)
	return k
}

// setup makes k (a zero Kernel) a kernel named name; checkName also checks the name.
func (k *Kernel) setup(name string, opts []Option, checkName bool) {
	*k = Kernel{name: name, target: ptx.SM90, params: map[string]bool{}, divs: map[ptx.Reg]int64{},
		memos: make(map[memoKey]Value, memoHint), nested: make([]memoKey, 0, 64), externs: map[string]*Func{},
		scopeIDs: []int32{0}, scopePos: []ptx.Pos{{}}, ended: []bool{false}, errs: k.errs}
	var nilOpts []int
	for i, o := range opts {
		if o == nil {
			nilOpts = append(nilOpts, i)
			continue
		}
		o(k)
	}
	// Room for a small kernel: fewer regrowths while emitting.
	k.fn = &ptx.Func{Name: name, Entry: true, Visible: true, Body: make([]*ptx.Instr, 0, 256)}
	k.mod = &ptx.Module{Target: k.target, Funcs: []*ptx.Func{k.fn}}
	if checkName && !ptx.ValidIdent(name) {
		k.errorf("kernel name %s is not a valid PTX identifier", excerpt.Quote(name))
	}
	if !k.target.Valid() {
		_, err := ptx.ParseTarget(string(k.target))
		k.errorf("%v", err)
	}
	for _, i := range nilOpts {
		k.errorf("New(%s): option %d is nil", excerpt.Quote(name), i+1)
	}
}

// errNotNew is the misuse of a zero Kernel.
const errNotNew = "a zero dsl.Kernel, not made by dsl.New (make kernels with dsl.New)"

// live is the guard at the top of every exported method: false for a nil Kernel (the method
// does nothing and returns zeros); a zero Kernel is set up on its first use, with the misuse
// recorded for Build.
func (k *Kernel) live() bool {
	if k == nil {
		return false
	}
	if k.fn == nil {
		k.errorf(errNotNew)
		k.setup("", nil, false)
	}
	return true
}

// errNil is the error of a nil Kernel (Build and Err return it).
func errNil() error {
	return &Error{Pos: callerPos(), Msg: "a nil *dsl.Kernel (make kernels with dsl.New)"}
}

// Name returns the kernel's name.
func (k *Kernel) Name() string {
	if k == nil {
		return ""
	}
	return k.name
}

// Target returns the kernel's GPU target.
func (k *Kernel) Target() ptx.Target {
	if k == nil {
		return ""
	}
	return k.target
}

// Build finishes the kernel and returns its verified module, or every recorded error.
// The module is the caller's: builder calls after Build are errors (Err, or a second Build,
// returns them) and change nothing in it.
func (k *Kernel) Build() (*ptx.Module, error) {
	if !k.live() {
		return nil, errNil()
	}
	if k.built {
		return nil, errors.Join(append([]error{&Error{Pos: callerPos(), Msg: "Build called twice on kernel " + errName(k.name)}}, k.errs...)...)
	}
	k.built = true
	if n := len(k.fn.Body); n == 0 || k.fn.Body[n-1].Op != "ret" {
		k.fn.Body = append(k.fn.Body, &ptx.Instr{Op: "ret"})
	}
	k.checkBarrierBounds(k.fn)
	mod := k.mod
	// Later (wrong) builder calls go to a scratch module, never into the one returned.
	k.fn = &ptx.Func{Name: k.name, Entry: true, Visible: true}
	k.mod = &ptx.Module{Target: k.target, Funcs: []*ptx.Func{k.fn}}
	if len(k.errs) > 0 {
		return nil, errors.Join(k.errs...)
	}
	if err := ptx.Verify(mod); err != nil {
		return nil, fmt.Errorf("kernel %s: %w", errName(k.name), err)
	}
	return mod, nil
}

// afterBuild records an error and reports true when the kernel was already built: what
// calls it would change a module the caller already has.
func (k *Kernel) afterBuild(what string) bool {
	if k.built {
		k.errorf("kernel %s: %s after Build", errName(k.name), what)
	}
	return k.built
}

// errorf records a misuse at the first caller outside this package.
func (k *Kernel) errorf(format string, a ...any) {
	k.errs = append(k.errs, &Error{Pos: callerPos(), Msg: fmt.Sprintf(format, a...)})
}

// Errorf records a misuse at the caller's source position, for libraries built on the DSL
// (see MarkLibrary); Build returns it with the others.
func (k *Kernel) Errorf(format string, a ...any) {
	if k.live() {
		k.errorf(format, a...)
	}
}

// MarkLibrary marks the calling package as a library of DSL operations (like package
// nvshmem): source positions of the instructions it emits and of the errors it records skip
// its frames and point at the code that called it. Call it from an init function.
func MarkLibrary() {
	_, file, _, ok := runtime.Caller(1)
	if !ok {
		return
	}
	libMu.Lock()
	libDirs[filepath.Dir(file)] = true
	libMu.Unlock()
	posCache.Clear() // resolutions made before may have stopped in the library
	walkInfos.Clear()
	clearWalkTable()
}

var (
	libMu   sync.RWMutex
	libDirs = map[string]bool{}
)

func isLibrary(dir string) bool {
	libMu.RLock()
	defer libMu.RUnlock()
	return libDirs[dir]
}

// Err returns the errors recorded so far (nil when none), or the error of a nil Kernel.
func (k *Kernel) Err() error {
	if !k.live() {
		return errNil()
	}
	return errors.Join(k.errs...)
}

func (k *Kernel) pos() ptx.Pos {
	if k.noLoc {
		return ptx.Pos{}
	}
	if k.held > 0 {
		return k.heldPos
	}
	return callerPos()
}

// hold makes every instruction emitted until the returned release carry the position of the
// current caller: operations that emit many instructions find their caller once, not per
// instruction. Holds nest; the outermost wins.
func (k *Kernel) hold() func() {
	if k.held == 0 && !k.noLoc {
		k.heldPos = callerPos()
	}
	k.held++
	return func() { k.held-- }
}

// emit appends an instruction built at the caller's source position.
func (k *Kernel) emit(in *ptx.Instr) {
	if k.built { // the message is built only when needed
		k.afterBuild("instruction " + in.Op + " emitted")
		return
	}
	in.Pos = k.pos()
	k.fn.Body = append(k.fn.Body, in)
}

func (k *Kernel) reg(t ptx.Type) ptx.Reg {
	rt := t.RegType()
	n := k.nreg[rt]
	k.nreg[rt] = n + 1
	k.regScope[rt] = append(k.regScope[rt], k.scopeIDs[len(k.scopeIDs)-1])
	return ptx.Reg{Type: rt, N: n}
}

func (k *Kernel) label() string {
	k.nlabel++
	return "$L__" + k.name + "_" + strconv.Itoa(k.nlabel)
}

var dslDir, moduleRoot = func() (string, string) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", ""
	}
	d := filepath.Dir(file)
	return d, filepath.Dir(d)
}()

func relPath(file string) string {
	if moduleRoot != "" && strings.HasPrefix(file, moduleRoot+"/") {
		return file[len(moduleRoot)+1:]
	}
	if i := strings.Index(file, "/pkg/mod/"); i >= 0 {
		return file[i+len("/pkg/mod/"):]
	}
	// Code of another module: the path relative to its go.mod, so that generated PTX is the
	// same on every machine.
	if root := moduleOf(filepath.Dir(file)); root != "" {
		if r, err := filepath.Rel(root, file); err == nil {
			return filepath.ToSlash(r)
		}
	}
	return file
}

var modRoots sync.Map // dir -> the enclosing module's root ("" when none)

// moduleOf returns the directory of the nearest go.mod at or above dir.
func moduleOf(dir string) string {
	if r, ok := modRoots.Load(dir); ok {
		return r.(string)
	}
	root := ""
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		root = dir
	} else if parent := filepath.Dir(dir); parent != dir {
		root = moduleOf(parent)
	}
	modRoots.Store(dir, root)
	return root
}

// scoped runs f in a nested scope of runtime control flow: values computed inside are not
// reused after it.
func (k *Kernel) scoped(f func()) {
	k.scopes = append(k.scopes, len(k.nested))
	id := int32(len(k.ended))
	k.ended = append(k.ended, false)
	pos := ptx.Pos{}
	if !k.noLoc {
		pos = callerPos()
	}
	k.scopePos = append(k.scopePos, pos)
	k.scopeIDs = append(k.scopeIDs, id)
	defer func() {
		last := len(k.scopes) - 1
		start := k.scopes[last]
		for _, key := range k.nested[start:] {
			delete(k.memos, key)
		}
		k.nested = k.nested[:start]
		k.scopes = k.scopes[:last]
		k.scopeIDs = k.scopeIDs[:len(k.scopeIDs)-1]
		k.ended[id] = true
	}()
	f()
}

// checkScope reports (once per register) a value made inside runtime control flow that has
// ended: after the If, For or While its register is not set on every path (on a GPU, an
// uninitialised register).
func (k *Kernel) checkScope(v Value) bool {
	r, ok := v.op.(ptx.Reg)
	if !ok {
		return true
	}
	ids := k.regScope[r.Type]
	if r.N < 0 || r.N >= len(ids) || !k.ended[ids[r.N]] {
		return true
	}
	if k.stale.has(r) {
		return false
	}
	k.stale.add(r)
	where := ""
	if p := k.scopePos[ids[r.N]]; p.File != "" {
		where = fmt.Sprintf(" at %s:%d", p.File, p.Line)
	}
	k.errorf("%s was computed inside the runtime If/Else/For/While%s and used after it ended, where it is not set on every path; compute it before, or carry it out in a Var", v, where)
	return false
}

// memoHint sizes the memo table up front: a GEMM holds about 240 at most, and growing the
// table step by step costs more than the one allocation.
const memoHint = 256
