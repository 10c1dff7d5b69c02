package emu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Dim3 is a grid or block shape. A zero Y or Z counts as 1 (D1 and 2-D shapes); X must be
// positive: a zero X is an error at launch, not a shape of 1.
type Dim3 struct{ X, Y, Z int }

// D1 returns the one-dimensional shape x.
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

func (d Dim3) norm() Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

func (d Dim3) size() int { return d.X * d.Y * d.Z }

// Options control how a launch runs.
type Options struct {
	// Seed 0 runs the deterministic schedule; any other value randomizes the interleaving of
	// blocks and warps, and of kernels running at once (System.Start), and, in weak mode,
	// when buffered stores become visible, from it.
	Seed int64
	// Weak turns on the weak-memory mode: weak and relaxed stores to another GPU's memory or
	// to multicast memory stay invisible to other threads until the storing thread's next
	// release or fence (or a random later point). See docs/emu.md.
	Weak bool
	// StepBudget is how many warp-instructions may run without progress (a store, an atomic,
	// a completed barrier, an exit, a completed extern call) before the launch fails with a
	// no-progress error naming where the warps spin. 0 means 1<<26.
	StepBudget int64
	// NoSanitizer turns off the race (shared and global memory), alignment, warp-sync,
	// barrier-divergence and missing-fence checks (bounds are always checked: there is no
	// memory outside allocations to touch).
	NoSanitizer bool
	// MaxDelay is, in weak mode, the most warp-instructions a buffered store may stay
	// invisible without a fence (0: 20000).
	MaxDelay int
	// Quantum is how many instructions a warp runs before the scheduler moves on (0: 256;
	// at most MaxQuantum, so that the step budget and a host's wait are checked between
	// turns).
	Quantum int
}

// MaxQuantum is the largest Options.Quantum: a warp's turn of more instructions would run
// past the step budget's and the host's checks (a spinning warp given 2^40 ran for hours
// inside one turn, deaf to its no-progress budget and to its launch's context).
const MaxQuantum = 1 << 16

// Check reports an option out of its range, naming the field: a negative StepBudget,
// MaxDelay or Quantum (0 asks for the default; a negative value is no budget, delay or
// quantum the emulator can honour), or a Quantum above MaxQuantum.
func (o Options) Check() error {
	switch {
	case o.StepBudget < 0:
		return fmt.Errorf("Options.StepBudget %d is negative (0 means the default, 1<<26)", o.StepBudget)
	case o.MaxDelay < 0:
		return fmt.Errorf("Options.MaxDelay %d is negative (0 means the default, 20000)", o.MaxDelay)
	case o.Quantum < 0 || o.Quantum > MaxQuantum:
		return fmt.Errorf("Options.Quantum %d is outside 0..%d (0 means the default, 256)", o.Quantum, MaxQuantum)
	}
	return nil
}

// Launch describes one kernel launch: on one GPU, or collectively on several (every GPU's
// blocks resident and running concurrently, so they may wait on each other).
type Launch struct {
	Module *ptx.Module
	Entry  string // the .entry to run
	// GPUs lists the GPUs that run the grid; nil or empty means GPU 0 alone. Use
	// System.All() for a collective launch on every GPU.
	GPUs        []int
	Grid, Block Dim3
	SharedBytes int   // dynamic shared memory per block (the extern .shared array)
	Args        []any // the kernel's arguments, the same for every GPU
	// Cluster, when set, groups the blocks into thread-block clusters of this shape (each
	// dimension dividing the grid's; at most 16 blocks): they start together and share
	// their shared memory (shared::cluster addresses, mapa, barrier.cluster, TMA multicast).
	Cluster Dim3
	// ArgsFor, when set, gives each GPU its own arguments (overrides Args).
	ArgsFor func(gpu int) []any
	Options Options
}

// All returns every GPU index, for collective launches (none for a nil *System).
func (s *System) All() []int {
	if s == nil {
		return nil
	}
	out := make([]int, len(s.gpus))
	for i := range out {
		out[i] = i
	}
	return out
}

func (s *System) program(m *ptx.Module) (*program, error) {
	if m == nil {
		return nil, &Error{Kind: KindLaunch, Msg: "no module (a nil *ptx.Module)"}
	}
	if p, ok := s.progs[m]; ok {
		return p, p.decodeErr
	}
	if s.progs == nil { // the zero System
		s.progs = map[*ptx.Module]*program{}
	}
	var p *program
	if err := ptx.Verify(m); err != nil && !verifyExempt(m) { // what ptxas would refuse, a GPU would never run
		p = &program{decodeErr: &Error{Kind: KindLaunch, Msg: fmt.Sprintf("the module fails ptx.Verify (ptxas would refuse it): %v", err)}}
	} else {
		p = decode(m)
	}
	s.progs[m] = p
	return p, p.decodeErr
}

// verifyExempt reports modules the emulator runs although they fail ptx.Verify: none, but
// for the package's own tests of hand-written PTX (asmUnverified).
var verifyExempt = func(*ptx.Module) bool { return false }

// Load verifies and decodes a module (once; later launches reuse it) and reports its errors
// early: a module that fails ptx.Verify is refused, as ptxas would refuse it.
// Do not change a module after it has been loaded or launched.
func (s *System) Load(m *ptx.Module) error {
	if s == nil {
		return nilSystemLaunch("Load", "")
	}
	_, err := s.program(m)
	return err
}

func launchErr(entry, format string, a ...any) error {
	return &Error{Kind: KindLaunch, Kernel: entry, Msg: fmt.Sprintf(format, a...)}
}

// Launch runs a kernel to completion (or to the first fault) and returns nil or an *Error.
// It runs alone: kernels started with Start must have finished (Run) first.
func (s *System) Launch(k Launch) (err error) {
	if s == nil {
		return nilSystemLaunch("Launch", k.Entry)
	}
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Kind: KindInternal, Kernel: k.Entry, Msg: fmt.Sprintf("emulator bug: %v", r)}
		}
	}()
	if m := s.reenteredMsg("Launch"); m != "" {
		return launchErr(k.Entry, "%s", m)
	}
	l, err := s.prepare(k)
	if err != nil {
		return err
	}
	if s.eng != nil && len(s.eng.grids) > 0 {
		return launchErr(k.Entry, "%d kernel(s) started with System.Start are still in flight: run them (System.Run) before a Launch", len(s.eng.grids))
	}
	e := s.newEngine(k.Options)
	e.t0, s.cur = s.clock, e
	defer func() { s.clock, s.cur = e.now(), nil }()
	err = e.runAlone(l)
	l.endRace(err)
	s.stats = Stats{WarpInstructions: e.steps, ThreadInstructions: e.threadInstr, Blocks: l.nblocks}
	return err
}

// prepare checks a launch and makes its grid (not started).
func (s *System) prepare(k Launch) (*launch, error) {
	if len(s.gpus) == 0 {
		return nil, launchErr(k.Entry, "the System has no GPUs (the zero System: make one with New)")
	}
	if k.Module == nil {
		return nil, launchErr(k.Entry, "no module")
	}
	if err := k.Options.Check(); err != nil {
		return nil, launchErr(k.Entry, "%v", err)
	}
	p, err := s.program(k.Module)
	if err != nil {
		return nil, err
	}
	fn := p.funcs[k.Entry]
	if fn == nil || !fn.f.Entry {
		var names []string
		for _, f := range p.flist {
			if f.f.Entry {
				names = append(names, f.f.Name)
			}
		}
		return nil, launchErr(k.Entry, "module has no kernel %s (kernels: %s)", excerpt.Quote(k.Entry), excerpt.Cut(strings.Join(names, ", "), maxErrList))
	}
	grid, blk := k.Grid.norm(), k.Block.norm()
	if err := s.checkShape(grid, blk, max(len(k.GPUs), 1)); err != nil {
		return nil, launchErr(k.Entry, "%v", err)
	}
	if r := fn.f.ReqNTID; r[0] > 0 && (blk.X != r[0] || blk.Y != max(r[1], 1) || blk.Z != max(r[2], 1)) {
		return nil, launchErr(k.Entry, "block %v does not match the kernel's .reqntid %v", blk, r)
	}
	if r := fn.f.MaxNTID; r[0] > 0 && blk.size() > r[0]*max(r[1], 1)*max(r[2], 1) {
		return nil, launchErr(k.Entry, "block of %d threads exceeds the kernel's .maxntid %v", blk.size(), r)
	}
	if k.SharedBytes < 0 {
		return nil, launchErr(k.Entry, "negative dynamic shared size")
	}
	if total := p.sharedSize + k.SharedBytes; k.SharedBytes > MaxSharedBytes || total > MaxSharedBytes {
		return nil, launchErr(k.Entry, "%d bytes of shared memory per block (static %d + dynamic %d): at most %d", total, p.sharedSize, k.SharedBytes, MaxSharedBytes)
	}
	if p.localSize > MaxLocalBytes {
		return nil, launchErr(k.Entry, "the module's .local arrays and call frames take %d bytes of local memory per thread: a GPU allows at most %d", p.localSize, MaxLocalBytes)
	}
	if fn.psize > MaxParamBytes {
		return nil, launchErr(k.Entry, "%d bytes of kernel parameters: a GPU allows at most %d", fn.psize, MaxParamBytes)
	}
	gpus := k.GPUs
	if len(gpus) == 0 {
		gpus = []int{0}
	}
	seen := map[int]bool{}
	for _, g := range gpus {
		if g < 0 || g >= len(s.gpus) {
			return nil, launchErr(k.Entry, "GPU %d: the system has %d", g, len(s.gpus))
		}
		if seen[g] {
			return nil, launchErr(k.Entry, "GPU %d listed twice", g)
		}
		seen[g] = true
	}
	l := &launch{prog: p, fn: fn, grid: grid, blk: blk, dynShared: k.SharedBytes,
		gpus: gpus, params: map[int][]byte{}, cdim: Dim3{1, 1, 1}, quantum: k.Options.Quantum}
	if l.quantum == 0 {
		l.quantum = 256
	}
	if k.Cluster != (Dim3{}) {
		cd := k.Cluster.norm()
		if msg := checkCluster(grid, cd); msg != "" {
			return nil, launchErr(k.Entry, "%s", msg)
		}
		l.cdim, l.explicitCl = cd, true
	}
	for _, g := range gpus {
		args := k.Args
		if k.ArgsFor != nil {
			args = k.ArgsFor(g)
		}
		buf, err := packParams(fn, args)
		if err != nil {
			return nil, launchErr(k.Entry, "GPU %d: %v", g, err)
		}
		l.params[g] = buf
	}
	if err := s.moduleVars(p); err != nil {
		return nil, launchErr(k.Entry, "%v", err)
	}
	l.gvars = s.modVars[p.mod]
	return l, nil
}

// moduleVars allocates the module's .global and .const variables (once per System) at the
// same offset on every GPU.
func (s *System) moduleVars(p *program) error {
	if _, ok := s.modVars[p.mod]; ok {
		return nil
	}
	vars := map[string]uint64{}
	for _, v := range p.gvars {
		size := varSize(v)
		if n, es := max(v.Array, 1), max(v.Type.Bytes(), 1); n > sizeCap/es { // varSize saturated: name the declared size
			for _, off := range vars {
				_ = s.FreeSymmetric(s.syms[off])
			}
			return fmt.Errorf("module variable %s: %d elements of %d byte(s): more than the emulator allocates (at most %d bytes)", v.Name, n, es, sizeCap)
		}
		m, err := s.MallocSymmetric(size)
		if err != nil {
			for _, off := range vars { // the earlier variables' copies on every GPU
				_ = s.FreeSymmetric(s.syms[off])
			}
			return fmt.Errorf("module variable %s: %w", v.Name, err)
		}
		for g, gm := range s.gpus {
			if a := gm.find(m.On(g)); a != nil {
				a.what = "module variable " + v.Name
				es := max(v.Type.Bytes(), 1)
				for i, x := range v.Init {
					if (i+1)*es <= len(a.data) {
						putN(a.data[i*es:], es, x)
					}
				}
			}
		}
		vars[v.Name] = m.Off
	}
	s.modVars[p.mod] = vars
	return nil
}

// packParams lays out a kernel's arguments in its parameter buffer, checking count and sizes.
func packParams(fn *dfunc, args []any) ([]byte, error) {
	if len(args) != len(fn.kparams) {
		return nil, fmt.Errorf("kernel %s takes %d arguments (%s), got %d", excerpt.Cut(fn.f.Name, maxErrName), len(fn.kparams), excerpt.Cut(paramList(fn), maxErrList), len(args))
	}
	buf := make([]byte, fn.psize)
	for i, kp := range fn.kparams {
		a := args[i]
		var v uint64
		size := 0
		if m, ok := a.(TensorMap); ok { // a tensor map passed by value (a .b8[128] parameter)
			b := m.Encode()
			a = b[:]
		}
		switch x := a.(type) {
		case []byte:
			if len(x) != kp.size {
				return nil, fmt.Errorf("argument %d (%s): %d bytes for a %d-byte parameter", i+1, kp.name, len(x), kp.size)
			}
			copy(buf[kp.off:], x)
			continue
		case uint64:
			v, size = x, 8
		case int64:
			v, size = uint64(x), 8
		case uintptr:
			v, size = uint64(x), 8
		case uint32:
			v, size = uint64(x), 4
		case int32:
			v, size = uint64(uint32(x)), 4
		case uint16:
			v, size = uint64(x), 2
		case int16:
			v, size = uint64(uint16(x)), 2
		case uint8:
			v, size = uint64(x), 1
		case int8:
			v, size = uint64(uint8(x)), 1
		case float32:
			v, size = uint64(math.Float32bits(x)), 4
		case float64:
			v, size = math.Float64bits(x), 8
		case int:
			size = kp.size
			if kp.array > 0 || size > 8 {
				return nil, fmt.Errorf("argument %d (%s): Go int for a %d-byte parameter", i+1, kp.name, kp.size)
			}
			if !intFits(kp.t, size, x) {
				return nil, fmt.Errorf("argument %d (%s): %d does not fit the %d-byte .%s parameter", i+1, kp.name, x, size, kp.t)
			}
			v = uint64(x)
		default:
			return nil, fmt.Errorf("argument %d (%s): unsupported Go type %T (use fixed-size integers, floats, uint64 addresses or []byte)", i+1, kp.name, a)
		}
		if size != kp.size {
			hint := ""
			if kp.size == 2 && size == 4 {
				hint = " (pass a half's bits as uint16: fp.F32ToF16 or fp.F32ToBF16)"
			}
			return nil, fmt.Errorf("argument %d (%s): Go %T is %d bytes but the parameter is .%s (%d bytes)%s", i+1, kp.name, a, size, typeName(kp), kp.size, hint)
		}
		putN(buf[kp.off:], size, v)
	}
	return buf, nil
}

// intFits reports whether a Go int is a value of a size-byte parameter of type t: 0 to
// 2^(8 size)-1 for an unsigned type (no negative value), the signed range for a signed one,
// either for bits and floats (whose bits it then gives).
func intFits(t ptx.Type, size int, x int) bool {
	switch t.Kind() {
	case ptx.KindUnsigned:
		return x >= 0 && (size >= 8 || x < 1<<(8*size))
	case ptx.KindSigned:
		return size >= 8 || x >= -(1<<(8*size-1)) && x < 1<<(8*size-1)
	}
	return size >= 8 || x >= -(1<<(8*size-1)) && x < 1<<(8*size)
}

func typeName(kp kparam) string {
	if kp.array > 0 {
		return fmt.Sprintf("%s[%d]", kp.t, kp.array)
	}
	return kp.t.String()
}

func paramList(fn *dfunc) string {
	s := ""
	for i, kp := range fn.kparams {
		if i > 0 {
			s += ", "
		}
		s += "." + typeName(kp) + " " + kp.name
	}
	return s
}

func putN(b []byte, n int, v uint64) {
	switch n {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, v)
	default:
		for i := 0; i < n && i < 8; i++ {
			b[i] = byte(v >> (8 * i))
		}
	}
}

func getN(b []byte, n int) uint64 {
	switch n {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	var v uint64
	for i := 0; i < n && i < 8; i++ {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// Stats describes the work of the last launch.
type Stats struct {
	WarpInstructions   int64 // instructions issued, counting a warp's group of lanes once
	ThreadInstructions int64 // instructions executed, counting every lane
	Blocks             int   // blocks over all GPUs
}

// LastStats returns the statistics of the most recent launch (zero for a nil *System).
func (s *System) LastStats() Stats {
	if s == nil {
		return Stats{}
	}
	return s.stats
}

func (l *launch) stuck(k Kind, msg string) error {
	e := &Error{Kind: k, Kernel: l.fn.f.Name, Msg: msg}
	lines := map[string]bool{}
	var sites []string
	for _, b := range l.blocks {
		if b.done || !b.started {
			continue
		}
		for _, w := range b.warps {
			if w == nil || w.live == 0 {
				continue
			}
			if len(e.Warps) < 64 {
				e.Warps = append(e.Warps, w.describe())
			}
			// Collect the source lines where running lanes are.
			for ln := 0; ln < 32; ln++ {
				if w.live&(1<<ln) == 0 || w.st[ln] != lsRun {
					continue
				}
				pc := w.pc[ln]
				if w.conv {
					pc = w.cpc
				}
				s := posString(l.prog.code[pc].src.Pos)
				if !lines[s] {
					lines[s] = true
					sites = append(sites, s)
				}
			}
		}
	}
	sort.Strings(sites)
	mbDead := l.mbarrierDeadlock(e) // pipelines waiting on an mbarrier phase: name the barrier
	if k == KindNoProgress && len(sites) > 0 && !mbDead {
		if len(sites) > 8 {
			sites = sites[:8]
		}
		e.Msg += " at " + fmt.Sprint(sites)
	}
	if k == KindNoProgress && !mbDead {
		if hint := l.alonePolling(); hint != "" {
			e.Msg = hint + " (" + e.Msg + ")"
		}
	}
	if k == KindDeadlock && !mbDead {
		l.firstLive(e)
	}
	if n := l.liveWarps() - len(e.Warps); n > 0 {
		e.Warps = append(e.Warps, fmt.Sprintf("... and %d more warps", n))
	}
	l.err = e
	return e
}

// alonePolling explains a spin on symmetric memory by a launch that runs on some of the
// System's GPUs only: what the kernel waits for would come from the others ("" otherwise).
func (l *launch) alonePolling() string {
	if len(l.gpus) == len(l.sys.gpus) || l.streams {
		return ""
	}
	for _, b := range l.blocks {
		if b.done || !b.started {
			continue
		}
		for _, w := range b.warps {
			if w == nil || w.live == 0 || w.poll == 0 || w.poll&offMask < symBase {
				continue
			}
			return fmt.Sprintf("the launch runs on GPU(s) %v of the System's %d, but its warps spin on symmetric memory (%#x, GPU %d's copy) that only a kernel on another GPU would write: "+
				"a kernel that waits for other GPUs must run beside their kernels, in one launch on all of them (Launch.GPUs: System.All()) or started beside theirs (System.Start; jit runs every rank's stream so)",
				l.gpus, len(l.sys.gpus), w.poll, int(region(w.poll)-regionGlobal0))
		}
	}
	return ""
}

// firstLive names the first live thread's position in a deadlock error's summary line.
func (l *launch) firstLive(e *Error) {
	for _, b := range l.blocks {
		if b.done || !b.started {
			continue
		}
		for _, w := range b.warps {
			if w != nil && w.live != 0 {
				ln := bits.TrailingZeros32(w.live)
				in := &l.prog.code[w.pc[ln]]
				e.GPU, e.Block, e.Thread = b.gpu, b.id, w.tid(ln)
				e.Instr, e.Pos = instrText(in.src), in.src.Pos
				return
			}
		}
	}
}

func (l *launch) liveWarps() int {
	n := 0
	for _, b := range l.blocks {
		if b.started && !b.done {
			for _, w := range b.warps {
				if w != nil && w.live != 0 {
					n++
				}
			}
		}
	}
	return n
}

func (l *launch) startBlock(b *block) error {
	p := l.prog
	if l.blockBytes == 0 {
		l.blockBytes = int64(l.lsize)*32*int64(l.nwarps) + int64(p.sharedSize+p.dynPad+l.dynShared)
	}
	if lim := l.sys.limits.MaxMemory - l.sys.used; l.blockBytes > lim-l.liveBytes {
		return &Error{Kind: KindLaunch, Kernel: l.fn.f.Name, GPU: b.gpu, Block: b.id, Msg: fmt.Sprintf(
			"starting this block would hold %d bytes of local and shared memory in %d live blocks (%d bytes each) besides %d bytes of global memory: more than the System's limit of %d bytes (Limits.MaxMemory)",
			l.liveBytes+l.blockBytes, len(l.blocks)+1, l.blockBytes, l.sys.used, l.sys.limits.MaxMemory)}
	}
	l.liveBytes += l.blockBytes
	b.started = true
	b.nthreads = l.nthreads
	b.params = l.params[b.gpu]
	if n := p.sharedSize + p.dynPad + l.dynShared; n > 0 {
		if k := len(l.sharedPool); k > 0 {
			b.shared = l.sharedPool[k-1]
			l.sharedPool = l.sharedPool[:k-1]
			clear(b.shared)
		} else {
			b.shared = make([]byte, n)
		}
		if l.sanitize {
			if k := len(l.shadowPool); k > 0 {
				b.shadow = l.shadowPool[k-1]
				l.shadowPool = l.shadowPool[:k-1]
				clear(b.shadow)
			} else {
				b.shadow = make([]shadowByte, n)
			}
		}
	}
	tmpl := l.template(b.gpu)
	b.warps = make([]*warp, l.nwarps)
	for i := range b.warps {
		var w *warp
		pool := l.sys.warpPool[p]
		if k := len(pool); k > 0 {
			w = pool[k-1]
			l.sys.warpPool[p] = pool[:k-1]
			l.sys.poolBytes -= warpBytes(w)
			r, local, stack := w.r, w.local, w.stack
			*w = warp{r: r, local: local}
			for ln := range stack {
				w.stack[ln] = stack[ln][:0]
			}
			clear(w.local)
		} else {
			w = &warp{r: make([]uint64, p.nslots*32)}
			if l.lsize > 0 {
				w.local = make([]byte, l.lsize*32)
			}
		}
		w.b, w.l, w.idx = b, l, i
		n := min(32, l.nthreads-32*i)
		w.exists = uint32(widthMask(n))
		w.live, w.runm = w.exists, w.exists
		for ln := n; ln < 32; ln++ {
			w.st[ln] = lsExited
		}
		w.conv = true
		w.cpc = l.fn.entry
		w.initSlots(tmpl)
		b.warps[i] = w
	}
	b.liveWarps = l.nwarps
	return nil
}

// maxPoolBytes bounds the memory of the warps a System keeps for reuse.
const maxPoolBytes = 64 << 20

func warpBytes(w *warp) int { return 8*len(w.r) + len(w.local) }

// finishBlock returns a finished block's memory to the pools.
func (l *launch) finishBlock(b *block) {
	b.done = true
	l.liveBytes -= l.blockBytes
	for _, w := range b.warps {
		w.b, w.l = nil, nil
		for ln := range w.ext {
			w.ext[ln] = nil
		}
		// Keep the warp (its register file is the expensive part) for later blocks and
		// launches of the same program, unless a buffered store still refers to it.
		if l.npend == 0 && l.sys.poolBytes+warpBytes(w) <= maxPoolBytes {
			l.sys.warpPool[l.prog] = append(l.sys.warpPool[l.prog], w)
			l.sys.poolBytes += warpBytes(w)
		}
	}
	if b.shared != nil {
		l.sharedPool = append(l.sharedPool, b.shared)
	}
	if b.shadow != nil {
		l.shadowPool = append(l.shadowPool, b.shadow)
	}
	b.warps, b.shared, b.shadow = nil, nil, nil
}

// template returns GPU gpu's initial register file of a warp: constants and every special
// register that does not depend on the block or the warp; registers are zero.
func (l *launch) template(gpu int) []uint64 {
	if t, ok := l.tmpl[gpu]; ok {
		return t
	}
	if l.tmpl == nil {
		l.tmpl = map[int][]uint64{}
	}
	t := make([]uint64, l.prog.nslots*32)
	for _, s := range l.prog.inits {
		r := (*[32]uint64)(t[s.slot:])
		var v uint64
		switch s.kind {
		case isConst:
			v = s.val
		case isNtid:
			v = uint64([3]int{l.blk.X, l.blk.Y, l.blk.Z}[s.dim])
		case isNctaid:
			v = uint64([3]int{l.grid.X, l.grid.Y, l.grid.Z}[s.dim])
		case isNwarpid:
			v = uint64(l.nwarps)
		case isGlobalVar:
			v = globalAddr(gpu, l.gvars[s.name])
		case isDynSmem:
			v = uint64(l.dynShared)
		case isTotalSmem:
			v = uint64(l.prog.sharedSize + l.dynShared)
		case isGPU:
			v = uint64(gpu)
		case isClusterNctaid:
			v = uint64([3]int{l.cdim.X, l.cdim.Y, l.cdim.Z}[s.dim])
		case isNclusterid:
			v = uint64([3]int{l.grid.X / l.cdim.X, l.grid.Y / l.cdim.Y, l.grid.Z / l.cdim.Z}[s.dim])
		case isClusterNrank:
			v = uint64(l.cdim.size())
		case isExplicitCluster:
			if l.explicitCl {
				v = 1
			}
		case isLaneid, isLanemaskEq, isLanemaskLt, isLanemaskLe, isLanemaskGt, isLanemaskGe:
			for ln := 0; ln < 32; ln++ {
				switch s.kind {
				case isLaneid:
					r[ln] = uint64(ln)
				case isLanemaskEq:
					r[ln] = 1 << ln
				case isLanemaskLt:
					r[ln] = 1<<ln - 1
				case isLanemaskLe:
					r[ln] = 1<<(ln+1) - 1
				case isLanemaskGt:
					r[ln] = uint64(^uint32(1<<(ln+1) - 1))
				case isLanemaskGe:
					r[ln] = uint64(^uint32(1<<ln - 1))
				}
			}
			continue
		default:
			continue
		}
		for i := range r {
			r[i] = v
		}
	}
	l.tmpl[gpu] = t
	return t
}

// initSlots fills the constant and special registers: from the GPU's template, or (those
// that depend on the block or the warp) computed. Other registers keep whatever they held
// (PTX leaves registers undefined until written): zero in a new warp, stale in a reused one.
func (w *warp) initSlots(tmpl []uint64) {
	b := w.b
	for _, s := range w.l.prog.inits {
		r := (*[32]uint64)(w.r[s.slot:])
		switch s.kind {
		default:
			copy(r[:], tmpl[s.slot:s.slot+32])
		case isCtaid:
			v := uint64(b.id[s.dim])
			for i := range r {
				r[i] = v
			}
		case isWarpid:
			for i := range r {
				r[i] = uint64(w.idx)
			}
		case isClusterCtaid, isClusterid, isClusterRank:
			v := w.l.clusterSpecial(b, s.kind, s.dim)
			for i := range r {
				r[i] = v
			}
		case isTid:
			for ln := 0; ln < 32; ln++ {
				if w.exists&(1<<ln) != 0 {
					r[ln] = uint64(w.tid(ln)[s.dim])
				}
			}
		}
	}
}

func (l *launch) runBlock(b *block, quantum int) {
	const visitCap = 1 << 16
	total := 0
	nw := len(b.warps)
	first := 0
	if l.opt.Seed != 0 && nw > 1 {
		first = l.rng.Intn(nw) // a random warp goes first in this visit
	}
	for total < visitCap {
		did := false
		for i := 0; i < nw; i++ {
			w := b.warps[(first+i)%nw]
			if w.runm == 0 || w.yielded {
				continue
			}
			n := w.exec(quantum)
			total += n
			if n > 0 {
				did = true
			}
			if l.err != nil {
				return
			}
		}
		if !did {
			break
		}
	}
	for _, w := range b.warps {
		w.yielded = false
	}
	if b.liveWarps == 0 {
		l.finishBlock(b)
	}
}
