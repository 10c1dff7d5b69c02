package jit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Rank is one rank of a multi-GPU program run by RunRanks: a process of its own on the GPU
// backend, a goroutine on the emulator.
type Rank struct {
	// Rank is this rank's number, 0 <= Rank < World; LocalRank its number on its node (the
	// GPU it uses); Node the number of its node (its NVLink domain: the ranks whose memory
	// it reaches by load and store), 0 on a single node.
	Rank, World, LocalRank, Node int
	// Backend is the backend the rank runs on.
	Backend Backend
	// Device is the rank's GPU (GPU LOCAL_RANK), or its simulated GPU (GPU Rank of the
	// emulated machine the ranks share).
	Device *Device
	// NVSHMEM is the rank's PE when RanksOptions.NVSHMEM is set (else nil; InitNVSHMEM on
	// Device starts it on either backend).
	NVSHMEM *NVSHMEM
}

// RanksOptions configure RunRanks.
type RanksOptions struct {
	// Backend to run on; "" means DefaultBackend() ($KGEN_BACKEND, else the GPU when there
	// is one and the binary has the cuda tag, else the emulator).
	Backend Backend
	// World is the number of ranks on the emulator; 0 means $WORLD_SIZE, or 1. On the GPU
	// backend the ranks are processes started by `kgen launch` or torchrun, and World, when
	// set, must equal their WORLD_SIZE.
	World int
	// Nodes splits the emulator's World ranks into Nodes nodes of World/Nodes consecutive
	// ranks (2 nodes of 4 for World 8): peer and multicast addresses then reach only the
	// rank's node, and NVSHMEM operations between nodes are delivered late (see Network).
	// 0 means $KGEN_EMU_NODES, or 1. On the GPU backend the nodes are the machines the
	// processes run on; Nodes, when set, must equal WORLD_SIZE/LOCAL_WORLD_SIZE.
	Nodes int
	// Network is how NVSHMEM's operations travel between the emulator's nodes (latency and
	// bandwidth, in the emulator's logical time: see emu.Network). nil means
	// $KGEN_EMU_NETWORK ("LATENCY,BYTES_PER_SECOND", e.g. "2us,50e9"), or
	// emu.DefaultNetwork. Ignored on GPUs.
	Network *emu.Network
	// NVSHMEM initialises NVSHMEM on every rank's device before the function runs
	// (Rank.NVSHMEM) and finalizes it after.
	NVSHMEM bool
	// Init configures InitNVSHMEM on the GPU backend (library path, bootstrap timeout).
	Init InitOptions
	// Open are the options each rank's device is opened with (WithCache, WithEmuOptions).
	Open []Option
	// Context bounds, on the emulator, every wait of a rank for the others in a collective
	// call (InitNVSHMEM, NVSHMEM Malloc/Free/BarrierAll/Finalize) or for kernels (a
	// launch's LaunchConfig.Context bounds it too): when it ends, the waiting ranks fail
	// naming the ranks that never arrived. nil: no bound.
	Context context.Context
}

// RunRanks runs f once per rank of a multi-GPU program, so that the same program runs on N
// GPUs and on N simulated GPUs.
//
// On the GPU backend every rank is a process (started by `kgen launch -n N`, torchrun or
// Slurm with torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT); RunRanks opens GPU LOCAL_RANK, optionally initialises NVSHMEM, and runs f
// once for this process's rank.
//
// On the emulator the ranks are goroutines of this process: RunRanks makes one emulated
// machine of World GPUs and runs f on World goroutines, rank r on GPU r, all sharing the
// machine's memory (symmetric heap, peer and multicast addresses). A process that is itself
// one rank of several (RANK set with WORLD_SIZE > 1) is refused: run the program once with
// `kgen launch --backend emu -n N` or WORLD_SIZE=N. Collective host calls (InitNVSHMEM,
// NVSHMEM.Malloc/Free/BarrierAll/Finalize) meet across the goroutines in call order; kernel
// launches run on each rank's streams on their own, interleaved with the other ranks' work
// by a seeded scheduler (docs/jit.md, "Launches on the emulator"), and a deadlock between
// them fails the waiting ranks instead of hanging. When a rank fails, the ranks waiting in
// such a call stop with an error, and RunRanks returns the first failure.
//
// The error is nil when every rank succeeds, else the first failure: a *RankError naming
// the rank whose function (or NVSHMEM start) failed (a panic in f counts), or an error
// saying how the ranks' collective calls disagreed. A failed rank does not finalize NVSHMEM
// (a collective call the others may never make).
func RunRanks(o RanksOptions, f func(r *Rank) error) error {
	if f == nil {
		return fmt.Errorf("jit: RunRanks: the rank function is nil")
	}
	b := o.Backend
	if b == "" {
		var err error
		if b, err = DefaultBackend(); err != nil {
			return err
		}
	}
	switch b {
	case GPU:
		return runGPURank(o, f)
	case Emulator:
		return runEmuRanks(o, f)
	}
	backendsMu.Lock()
	_, ok := backends[b]
	backendsMu.Unlock()
	if !ok {
		return fmt.Errorf("jit: unknown backend %s (valid: %s, %s)", excerpt.Quote(string(b)), GPU, Emulator)
	}
	return runGPURank(o, f) // a registered test backend: one process-style rank
}

// gpuNode is the node of a GPU rank: $GROUP_RANK (torchrun's node rank), else
// RANK/LOCAL_WORLD_SIZE, else 0. nodes (RanksOptions.Nodes), when set, must match
// WORLD_SIZE/LOCAL_WORLD_SIZE.
func gpuNode(nodes int, rv Rendezvous) (int, error) {
	if nodes < 0 {
		return 0, fmt.Errorf("jit: RunRanks: RanksOptions.Nodes %d: want the number of nodes (0: not checked)", nodes)
	}
	local := 0
	if v := os.Getenv("LOCAL_WORLD_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("jit: LOCAL_WORLD_SIZE=%s is not a positive integer%s", excerpt.Quote(v), rangeNote(err))
		}
		local = n
	}
	// Divided, not multiplied: a hostile Nodes times LOCAL_WORLD_SIZE wrapped to WORLD_SIZE.
	if nodes > 0 && local > 0 && (rv.WorldSize%local != 0 || nodes != rv.WorldSize/local) {
		return 0, fmt.Errorf("jit: RunRanks wants %d nodes, but WORLD_SIZE=%d with LOCAL_WORLD_SIZE=%d makes %d", nodes, rv.WorldSize, local, rv.WorldSize/local)
	}
	if v := os.Getenv("GROUP_RANK"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("jit: GROUP_RANK=%s is not a non-negative integer%s", excerpt.Quote(v), rangeNote(err))
		}
		return n, nil
	}
	if local > 0 {
		return rv.Rank / local, nil
	}
	return 0, nil
}

func runGPURank(o RanksOptions, f func(r *Rank) error) error {
	rv, err := RendezvousFromEnv()
	if err != nil {
		return err
	}
	if set := os.Getenv("WORLD_SIZE") != ""; o.World > 0 && o.World != rv.WorldSize && (set || o.World > 1) {
		if !set {
			return fmt.Errorf("jit: RunRanks wants %d ranks, but on GPUs every rank is a process: start them with `kgen launch -n %d -- PROG` or torchrun --nproc-per-node=%d", o.World, o.World, o.World)
		}
		return fmt.Errorf("jit: RunRanks wants %d ranks, but WORLD_SIZE=%d", o.World, rv.WorldSize)
	}
	if o.World < 0 {
		return fmt.Errorf("jit: RunRanks: RanksOptions.World %d: want the number of ranks (0: WORLD_SIZE's)", o.World)
	}
	node, err := gpuNode(o.Nodes, rv)
	if err != nil {
		return &RankError{Rank: rv.Rank, ExitCode: 1, Err: err}
	}
	b := o.Backend
	if b == "" {
		b = GPU
	}
	d, err := OpenBackend(b, rv.LocalRank, o.Open...)
	if err != nil {
		return &RankError{Rank: rv.Rank, ExitCode: 1, Err: err}
	}
	r := &Rank{Rank: rv.Rank, World: rv.WorldSize, LocalRank: rv.LocalRank, Node: node, Backend: b, Device: d}
	err = runRank(r, o, f, rv, nil)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &RankError{Rank: rv.Rank, ExitCode: 1, Err: err}
	}
	return nil
}

// runRank runs f for r with NVSHMEM around it when asked. A panic in f becomes an error.
// When f fails, failed (if set) hears of it at once, and NVSHMEM is not finalized (that is
// collective, and the other ranks may never get there); it is only marked finished.
func runRank(r *Rank, o RanksOptions, f func(r *Rank) error, rv Rendezvous, failed func(error)) error {
	if o.NVSHMEM {
		io := o.Init
		if r.Backend != Emulator && io.Rendezvous == nil {
			io.Rendezvous = &rv
		}
		sh, err := InitNVSHMEM(r.Device, io)
		if err != nil {
			if failed != nil {
				failed(err)
			}
			return err
		}
		r.NVSHMEM = sh
	}
	if err := callRank(f, r); err != nil {
		if failed != nil {
			failed(err)
		}
		if r.NVSHMEM != nil {
			r.NVSHMEM.mu.Lock()
			r.NVSHMEM.done = true
			r.NVSHMEM.mu.Unlock()
		}
		return err
	}
	if r.NVSHMEM != nil {
		if err := r.NVSHMEM.Finalize(); err != nil {
			if failed != nil {
				failed(err)
			}
			return err
		}
	}
	return nil
}

func callRank(f func(r *Rank) error, r *Rank) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f(r)
}

// EmuWorld is the number of ranks RunRanks simulates on the emulator when
// RanksOptions.World is 0: $WORLD_SIZE, or 1. It refuses an environment in which this
// process is one rank of several (RANK set with WORLD_SIZE > 1).
func EmuWorld() (int, error) {
	v := os.Getenv("WORLD_SIZE")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxEmuRanks {
		return 0, fmt.Errorf("jit: WORLD_SIZE=%s: the emulator simulates 1 to %d ranks", excerpt.Quote(v), maxEmuRanks)
	}
	if r := os.Getenv("RANK"); r != "" && n > 1 {
		return 0, fmt.Errorf("jit: RANK=%s and WORLD_SIZE=%d make this process one rank of several, but on the emulator every rank is a goroutine of one process: run the program once, with `kgen launch --backend emu -n %d -- PROG` (WORLD_SIZE=%d, no RANK)", r, n, n, n)
	}
	return n, nil
}

const maxEmuRanks = emu.MaxGPUs

// EmuNodesEnv names the environment variable from which RunRanks takes the emulator's
// number of nodes when RanksOptions.Nodes is 0 (`kgen launch --backend emu --nodes N` sets it).
const EmuNodesEnv = "KGEN_EMU_NODES"

// EmuNetworkEnv names the environment variable from which RunRanks takes the emulator's
// network between nodes when RanksOptions.Network is nil: "LATENCY,BYTES_PER_SECOND" (a Go
// duration and a number, e.g. "2us,50e9"; 0 bytes/s: unlimited).
const EmuNetworkEnv = "KGEN_EMU_NETWORK"

// EmuNetwork is the network RunRanks gives the emulator's nodes when RanksOptions.Network
// is nil: $KGEN_EMU_NETWORK, or emu.DefaultNetwork.
func EmuNetwork() (*emu.Network, error) {
	v := os.Getenv(EmuNetworkEnv)
	if v == "" {
		n := emu.DefaultNetwork
		return &n, nil
	}
	n, err := ParseNetwork(v)
	if err != nil {
		return nil, fmt.Errorf("jit: %s=%s: %w", EmuNetworkEnv, excerpt.Quote(v), err)
	}
	return n, nil
}

// ParseNetwork reads "LATENCY,BYTES_PER_SECOND" (e.g. "2us,50e9") within emu.Network.Check's
// bounds.
func ParseNetwork(v string) (*emu.Network, error) {
	lat, bw, ok := strings.Cut(v, ",")
	if !ok {
		return nil, fmt.Errorf("want LATENCY,BYTES_PER_SECOND (e.g. 2us,50e9)")
	}
	d, err := time.ParseDuration(strings.TrimSpace(lat))
	if err != nil || d < 0 {
		return nil, fmt.Errorf("latency %s: want a duration >= 0 (e.g. 2us)", excerpt.Quote(lat))
	}
	b, err := strconv.ParseFloat(strings.TrimSpace(bw), 64)
	if err != nil || b < 0 || b != b {
		return nil, fmt.Errorf("bandwidth %s: want bytes per second >= 0 (e.g. 50e9; 0: unlimited)", excerpt.Quote(bw))
	}
	if d > emu.MaxLatency {
		return nil, fmt.Errorf("latency %s: want at most %v", excerpt.Quote(lat), emu.MaxLatency)
	}
	if b > 0 && b < emu.MinBytesPerSecond {
		return nil, fmt.Errorf("bandwidth %s: want 0 (unlimited) or at least %g bytes per second", excerpt.Quote(bw), emu.MinBytesPerSecond)
	}
	return &emu.Network{Latency: d, BytesPerSecond: b}, nil
}

// EmuNodes is the number of nodes RunRanks splits the emulator's ranks into when
// RanksOptions.Nodes is 0: $KGEN_EMU_NODES, or 1.
func EmuNodes() (int, error) {
	v := os.Getenv(EmuNodesEnv)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxEmuRanks {
		return 0, fmt.Errorf("jit: %s=%s: want 1 to %d nodes", EmuNodesEnv, excerpt.Quote(v), maxEmuRanks)
	}
	return n, nil
}

func runEmuRanks(o RanksOptions, f func(r *Rank) error) error {
	n := o.World
	if n == 0 {
		var err error
		if n, err = EmuWorld(); err != nil {
			return err
		}
	}
	if n < 1 || n > maxEmuRanks {
		return fmt.Errorf("jit: RunRanks: %d ranks; the emulator simulates 1 to %d", n, maxEmuRanks)
	}
	nodes := o.Nodes
	if nodes == 0 {
		var err error
		if nodes, err = EmuNodes(); err != nil {
			return err
		}
	}
	if nodes < 1 || n%nodes != 0 {
		return fmt.Errorf("jit: RunRanks: %d ranks do not split into %d nodes of equal size (RanksOptions.Nodes or %s)", n, nodes, EmuNodesEnv)
	}
	if err := cacheEnvErr(); err != nil {
		return err
	}
	if _, err := startupEnv(); err != nil {
		return err
	}
	eo, err := emuOptions(o.Open)
	if err != nil {
		return err
	}
	m, err := newEmuMachine(n, true)
	if err != nil {
		return err
	}
	if err := m.sys.SetNodes(nodes); err != nil {
		return fmt.Errorf("jit: %w", err)
	}
	net := o.Network
	if net == nil {
		if net, err = EmuNetwork(); err != nil {
			return err
		}
	}
	if err := m.sys.SetNetwork(*net); err != nil {
		return fmt.Errorf("jit: RanksOptions.Network: %w", err)
	}
	size := n / nodes
	w := m.w
	w.ctx = o.Context
	if n > 1 {
		w.onFail = m.signal
		w.onDone = m.unparkAll
		m.startSched(eo.Seed)
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			start := time.Now()
			d := newDevice(newEmuDevice(m, rank, eo), o.Open)
			d.noteOpen(start)
			rk := &Rank{Rank: rank, World: n, LocalRank: rank % size, Node: rank / size, Backend: Emulator, Device: d}
			err := runRank(rk, o, f, Rendezvous{Rank: rank, WorldSize: n, LocalRank: rank % size}, func(err error) { w.failRank(rank, err) })
			if cerr := d.Close(); err == nil && cerr != nil {
				w.failRank(rank, cerr)
			}
			m.exitRank(rank)
			w.exit(rank)
		}(r)
	}
	wg.Wait()
	return w.result()
}

// RankError reports the first rank that failed (Rank -1 when ctx stopped the launch).
type RankError struct {
	Rank     int
	ExitCode int
	Err      error // how it ended (exit status or signal), or why it could not start
}

func (e *RankError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Rank < 0 {
		return fmt.Sprintf("launch stopped (exit code %d): %v", e.ExitCode, e.Err)
	}
	return fmt.Sprintf("rank %d failed (exit code %d): %v", e.Rank, e.ExitCode, e.Err)
}

// Unwrap returns how the rank ended.
func (e *RankError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// ---- the in-process ranks' rendezvous ----

// world coordinates the goroutine ranks of one emulated machine: every rank's k-th
// collective call (join) meets the other ranks' k-th. The calls must be of the same kind
// (a barrier cannot meet a launch); a rank that returns or fails while others wait for it
// stops them with an error instead of a hang.
type world struct {
	n     int
	ranks bool // made by RunRanks
	mu    sync.Mutex
	seq   []int           // the next collective number of each rank
	ops   map[int]*collOp // collectives some rank has entered and not all have
	gone  []bool          // ranks whose function has returned
	fail  error           // the first failure; set once, stops everyone
	stop  chan struct{}   // closed when fail is set
	ctx   context.Context // RanksOptions.Context: bounds every wait (nil: none)
	// onFail, when set, is called (on a goroutine of its own) when the world fails: it wakes
	// the ranks that wait for kernels on the emulated machine.
	onFail func()
	// onDone, when set, is called by the last rank of a collective call after its work: the
	// ranks that waited in it are about to return.
	onDone func()
}

type collOp struct {
	seq     int
	kind    string
	desc    []string
	parts   []any
	in      []bool
	arrived int
	done    chan struct{}
	res     any
	err     error
}

func newWorld(n int) *world {
	return &world{n: n, seq: make([]int, n), ops: map[int]*collOp{}, gone: make([]bool, n), stop: make(chan struct{})}
}

// errStopped marks the error of a rank that stopped because another rank failed.
var errStopped = errors.New("stopped because another rank failed")

type stoppedError struct {
	rank  int
	where string
	cause error
}

func (e *stoppedError) Error() string {
	return fmt.Sprintf("jit: rank %d stopped waiting in %s: %v", e.rank, e.where, e.cause)
}

func (e *stoppedError) Is(t error) bool { return t == errStopped }
func (e *stoppedError) Unwrap() error   { return e.cause }

func (w *world) failLocked(err error) {
	if w.fail == nil {
		w.fail = err
		close(w.stop)
		if w.onFail != nil {
			go w.onFail()
		}
	}
}

// join enters rank's next collective call: kind must match the other ranks' call of the same
// number, part is this rank's contribution, desc describes the call in errors. The last rank
// to arrive runs run with every rank's part (indexed by rank) and all of them return its
// result. The wait ends when ctx (nil: none) or the world's context ends: the call then fails
// on every rank, naming the ranks that never arrived.
func (w *world) join(ctx context.Context, rank int, kind, desc string, part any, run func(parts []any) (any, error)) (any, error) {
	w.mu.Lock()
	if w.fail != nil {
		err := w.fail
		w.mu.Unlock()
		return nil, &stoppedError{rank, desc, err}
	}
	s := w.seq[rank]
	w.seq[rank]++
	op := w.ops[s]
	if op == nil {
		op = &collOp{seq: s, kind: kind, desc: make([]string, w.n), parts: make([]any, w.n), in: make([]bool, w.n), done: make(chan struct{})}
		w.ops[s] = op
	}
	if op.kind != kind {
		first := -1
		for r, in := range op.in {
			if in {
				first = r
				break
			}
		}
		err := fmt.Errorf("jit: ranks disagree on their collective call #%d: rank %d calls %s but rank %d calls %s; every rank must make the same collective calls (InitNVSHMEM, NVSHMEM Malloc/Free/BarrierAll/Finalize) in the same order", s+1, first, op.desc[first], rank, desc)
		w.failLocked(err)
		w.mu.Unlock()
		return nil, err
	}
	op.parts[rank], op.desc[rank], op.in[rank] = part, desc, true
	op.arrived++
	if err := w.checkGoneLocked(op); err != nil {
		w.failLocked(err)
		w.mu.Unlock()
		return nil, err
	}
	if op.arrived == w.n {
		delete(w.ops, s)
		w.mu.Unlock()
		op.res, op.err = run(op.parts)
		if w.onDone != nil {
			w.onDone()
		}
		close(op.done)
		return op.res, op.err
	}
	w.mu.Unlock()
	var ctxDone, worldDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	if w.ctx != nil {
		worldDone = w.ctx.Done()
	}
	select {
	case <-op.done:
		return op.res, op.err
	case <-ctxDone:
		return w.giveUp(op, rank, desc, ctx.Err())
	case <-worldDone:
		return w.giveUp(op, rank, desc, w.ctx.Err())
	case <-w.stop:
		select {
		case <-op.done: // it completed after all
			return op.res, op.err
		default:
		}
		w.mu.Lock()
		err := w.fail
		w.mu.Unlock()
		return nil, &stoppedError{rank, desc, err}
	}
}

// giveUp ends rank's wait in op because its context ended (cause): unless op completed
// meanwhile, the world fails with an error naming the ranks that never arrived, so that
// every waiting rank stops.
func (w *world) giveUp(op *collOp, rank int, desc string, cause error) (any, error) {
	select {
	case <-op.done:
		return op.res, op.err
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return nil, &stoppedError{rank, desc, w.fail}
	}
	var missing, in []int
	for r, ok := range op.in {
		if ok {
			in = append(in, r)
		} else {
			missing = append(missing, r)
		}
	}
	err := fmt.Errorf("jit: rank %d gave up waiting in collective call #%d (%s): %w; %s never made it (%s arrived)",
		rank, op.seq+1, desc, cause, plural("rank", missing), joinInts(in))
	w.failLocked(err)
	return nil, err
}

// plural names a list of ranks: "rank 2", "ranks 1, 3".
func plural(what string, xs []int) string {
	if len(xs) == 1 {
		return what + " " + joinInts(xs)
	}
	return what + "s " + joinInts(xs)
}

// disagreement describes how the values of the ranks (indexed by rank) differ, naming the
// odd ones out: "rank 0 has A where ranks 1, 2 have B". It returns "" when all are equal.
func disagreement(what string, vals []string) string {
	groups := map[string][]int{}
	var order []string
	for r, v := range vals {
		if _, ok := groups[v]; !ok {
			order = append(order, v)
		}
		groups[v] = append(groups[v], r)
	}
	if len(order) < 2 {
		return ""
	}
	// the largest group first (ties: the one of the lowest rank): the others are odd
	sort.SliceStable(order, func(i, j int) bool { return len(groups[order[i]]) > len(groups[order[j]]) })
	parts := make([]string, len(order))
	for i, v := range order {
		verb := "has"
		if len(groups[v]) > 1 {
			verb = "have"
		}
		parts[i] = fmt.Sprintf("%s %s %s", plural(what, groups[v]), verb, v)
	}
	return strings.Join(parts[1:], ", ") + " where " + parts[0]
}

// checkGoneLocked fails op when a rank that has not joined it has returned.
func (w *world) checkGoneLocked(op *collOp) error {
	var missing []int
	for r, g := range w.gone {
		if g && !op.in[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var waiting []string
	for r, in := range op.in {
		if in {
			waiting = append(waiting, strconv.Itoa(r))
		}
	}
	what := op.desc[0]
	for r := range op.in {
		if op.in[r] {
			what = op.desc[r]
			break
		}
	}
	return fmt.Errorf("jit: rank %s returned without making collective call #%d (%s), which ranks %s wait in; every rank must make the same collective calls in the same order", joinInts(missing), op.seq+1, what, strings.Join(waiting, ", "))
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// failRank records that rank failed with err (unless it only stopped because another
// rank failed), stopping the ranks that wait in collective calls.
func (w *world) failRank(rank int, err error) {
	if errors.Is(err, errStopped) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(&RankError{Rank: rank, ExitCode: 1, Err: err})
}

// exit records that rank's function has returned: collective calls it did not make fail.
func (w *world) exit(rank int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone[rank] = true
	if w.fail != nil {
		return
	}
	seqs := make([]int, 0, len(w.ops))
	for s := range w.ops {
		seqs = append(seqs, s)
	}
	sort.Ints(seqs)
	for _, s := range seqs {
		if err := w.checkGoneLocked(w.ops[s]); err != nil {
			w.failLocked(err)
			return
		}
	}
}

// result is RunRanks' error once every rank has returned.
func (w *world) result() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fail
}
