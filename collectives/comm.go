package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// Op is the reduction of AllReduce and ReduceScatter.
type Op = dsl.ReduceOp

// The reductions.
const (
	Sum = dsl.Sum
	Min = dsl.Min
	Max = dsl.Max
)

// Defaults of the algorithm choice (message sizes in bytes per GPU). Without multicast the
// Lamport and one-shot limits come from the measured table of tuning.go, per GPU count;
// DefaultOneShotMaxBytes is the multimem one-shot's limit. On 4 x H100 the two-shot kernel
// took 346.7 us at 64 MiB (bf16) on 64 blocks, 331.4 on 128, 329.0 on 256, and the same
// (91.7-92.8) at 16 MiB: 128 blocks. The push all-reduce's threshold (PushMinBytes) comes
// from the table too.
const (
	DefaultOneShotMaxBytes = 16 << 10
	DefaultMaxBlocks       = 128
)

// MaxLamportBytes bounds Options.LamportMaxBytes: the Lamport buffers it sizes (3 x 8 x
// LamportMaxBytes per element size, 384 MiB at the bound) stay allocatable and their
// element counts far from overflowing. Lamport wins only for small all-reduces (up to
// 256 KiB measured).
const MaxLamportBytes = 16 << 20

// MaxOverlapRounds bounds Options.OverlapRounds: a round holds at least one row per GPU,
// and M is below 2^31, so more rounds never divide M (and rounds x GPUs could overflow).
const MaxOverlapRounds = 1 << 20

// Options configure a Comm.
type Options struct {
	// Target is the GPU target the kernels are built for (default: the device's, sm_90a on
	// an H100 or H200, sm_90 on the emulator). Targets before
	// sm_90 have no multimem: the multicast algorithms are then off. sm_90a (an H100 or
	// H200) runs the fused matmuls on the TMA + wgmma kernels (ag_gemm_sm90, ...) when N and
	// K are multiples of 8, the mma.sync ones otherwise and on every other target.
	Target ptx.Target
	// Logger receives the algorithm choices (at debug level) and the multicast fallback
	// (at info level); nil means slog.Default().
	Logger *slog.Logger
	// DisableMulticast uses the peer-to-peer algorithms even when multicast is available.
	DisableMulticast bool
	// DisableLamport skips the Lamport all-reduce (small messages then go one-shot).
	DisableLamport bool
	// OneShotMaxBytes is the largest all-reduce that runs one-shot; larger ones run two-shot.
	// Default: DefaultOneShotMaxBytes with multicast, else the measured table for the GPU
	// count (tuning.go; on 2 and 4 GPUs the peer-to-peer one-shot never won). Negative is
	// refused.
	OneShotMaxBytes int
	// LamportMaxBytes is the largest all-reduce that runs Lamport when there is no multicast
	// (default: the measured table for the GPU count, tuning.go); it also sizes the Lamport
	// buffers (3 x 8 x LamportMaxBytes per element size). At most MaxLamportBytes.
	LamportMaxBytes int
	// PushMinBytes is the smallest peer-to-peer all-reduce that runs as a reduce-scatter
	// by peer stores followed by an all-gather by peer stores (two kernels; NVLink writes
	// only) instead of the two-shot kernel, whose reduce-scatter pulls with peer loads
	// (0: the measured table of tuning.go, 128 MiB on 2 and 4 GPUs; negative: never).
	// On a CaptureSafe Comm the pair runs the two kernels' graph variants.
	PushMinBytes int
	// DisablePush4 runs the push all-reduce as p2p_allreduce_push (built for up to
	// kernels.CollMaxGPUs GPUs, a grid of up to MaxBlocks) on a Comm of at most
	// kernels.Push4MaxGPUs GPUs too, where it otherwise runs p2p_allreduce_push4: the same
	// algorithm built for at most 4 GPUs, half the registers, two blocks per SM and a grid
	// of up to twice MaxBlocks (at most kernels.CollMaxBlocks; see pushBlocks). For A/B
	// timing (collbench's push8 operation, -push4=false).
	DisablePush4 bool
	// Push4MinBytes is where p2p_allreduce_push4 takes over from p2p_allreduce_push for
	// 16-bit element types (bytes; 0: DefaultPush4MinBytes); 32-bit types keep the general
	// kernel. Negative: p2p_allreduce_push4 for every type and size the push all-reduce runs
	// (timing both kernels; tests).
	Push4MinBytes int
	// ReduceScatterPullMinBytes is the smallest peer-to-peer reduce-scatter input (bytes)
	// that runs p2p_reducescatter_pull (peer loads, no scratch) instead of
	// p2p_reducescatter (peer stores into scratch, then a local reduction). 0: the measured
	// table (tuning.go); negative: never.
	ReduceScatterPullMinBytes int
	// MaxBlocks caps the grid of every kernel (1..kernels.CollMaxBlocks; 0: DefaultMaxBlocks;
	// negative is refused) but p2p_allreduce_push4, which fits two blocks an SM and takes up
	// to twice it (DisablePush4); the push kernels' grids stay within the blocks the device
	// holds at once (one an SM for the general kernel). It must be the same on every rank,
	// and on GPUs of different models at most every GPU's cap: kernels that count the
	// peers' blocks (the MoE's low-latency mode, the multimem barriers) wait for as many
	// blocks as their own grid has.
	MaxBlocks int
	// Matmul sets the tiles, warps and stages of the fused matmuls (AllGatherMatmul,
	// MatmulReduceScatter); their types, layouts and alignment come from each call. Zero:
	// kernels.DefaultFusedConfig (BM 0 with other tile fields set is refused).
	Matmul kernels.GemmConfig
	// MatmulSM90 sets the tiles and stages of the sm_90a fused matmuls (Target sm_90a);
	// their types come from each call. Zero: kernels.DefaultGemmSM90Config (BN 0 with other
	// fields set is refused).
	MatmulSM90 kernels.GemmSM90Config
	// Stream, when set, carries the kernels and the device-to-device copies (staging), so
	// that events recorded on it time them; nil means the default stream.
	Stream *jit.Stream
	// CaptureSafe makes every call capturable into a CUDA graph (Comm.Capture): the kernels
	// are the graph variants, which keep their barrier epochs on the device, so a replay
	// advances them with no host argument. Its Lamport all-reduce keeps its slot and clear
	// count on the device too (one grid for every size); it makes no staging copy
	// (in-place all-reduces past Lamport's sizes run two-shot), and has no Broadcast,
	// Barrier or fp8 reductions. See graph.go.
	CaptureSafe bool
	// Matmuls says how AllGatherMatmul, MatmulReduceScatter and MatmulAllReduce run on one
	// node: MatmulAuto (default: the measured choice of tuning.go), MatmulFused (the fused
	// kernels), MatmulSplit (the collective, then the GEMM or the GEMM, then the
	// collective, in stream order) or MatmulOverlap (the communication on the copy engines
	// beside chunked GEMMs, overlap.go). Across nodes they always run split.
	Matmuls MatmulMode
	// OverlapRounds, when positive, is the number of rounds of rows in which MatmulAllReduce
	// runs on the copy engines (each round's all-gather beside the next round's GEMMs) where
	// the overlap runs and M divides into rounds x NumGPUs parts; 0 lets the estimate
	// choose 1, 2 or 4 (arOverlapRounds). Negative, or more than MaxOverlapRounds, is
	// refused.
	OverlapRounds int
	// OverlapSignals makes MatmulReduceScatter, where it runs on the copy engines
	// (MatmulOverlap, or MatmulAuto's choice of it), run one persistent gemm_sm90 with piece
	// signals instead of one GEMM launch per GPU's rows: the GEMM computes the peers'
	// pieces first and bumps a counter per piece, and the side stream waits on each counter
	// (Stream.WaitValue32) and pushes the piece with the copy engines (overlap_signal.go).
	// Where the pieces do not fit the GEMM's tiles (M/NumGPUs not a multiple of 64 rows) it
	// runs the piece launches. AllGatherMatmul and MatmulAllReduce are unchanged. Without
	// it the Comm still runs the signals where the pieces would lose a wave that the whole
	// GEMM keeps (rsSignalsWin); DisableOverlapSignals never runs them (both set is refused).
	OverlapSignals bool
	// DisableOverlapSignals keeps MatmulReduceScatter's copy-engine overlap on one GEMM
	// launch per GPU's rows at every shape (see OverlapSignals).
	DisableOverlapSignals bool
	// CostModel prices the algorithms across nodes (AllReduce, ReduceScatter and AllGather
	// run the cheapest that the topology allows); nil means H100CostModel(). New refuses a
	// model CostModel.Check refuses (a NaN, zero or infinite bandwidth). On one node
	// the flat kernels always run, chosen by the thresholds above.
	CostModel *CostModel
	// Algorithm, when set, replaces the choice of AllReduce, ReduceScatter and AllGather:
	// AlgHierarchical or AlgNVSHMEMRing run those kernels (on one node too), AlgFlat the
	// single-node kernels, which fail across nodes with an error naming the ranks out of
	// reach. "" means the cost model's choice across nodes, the flat kernels on one node.
	Algorithm Algorithm
	// DevLib is NVSHMEM's device library (package nvshmem/devlib), which the kernels that
	// run across nodes (hierarchical, NVSHMEM ring) link against on the GPU backend; it is
	// required there when the ranks span several nodes. The emulator needs none.
	DevLib *jit.DevLib
}

// Comm is the collectives of one rank of a group of GPUs (a jit program run by
// jit.RunRanks with NVSHMEM: a process per GPU on GPUs, a goroutine per simulated GPU on the
// emulator). Every rank makes its own Comm and the same calls in the same order; the kernels
// meet across GPUs through NVSHMEM's symmetric memory (peer addresses from nvshmem_ptr,
// multicast addresses from nvshmemx_mc_ptr; without multicast the Comm uses the
// peer-to-peer kernels). It owns the synchronization state the kernels need (signal pads,
// multicast flags, Lamport slots, staging scratch) and the epochs that let them run back to
// back with no reset. A Comm is not safe for concurrent use.
type Comm struct {
	r    *jit.Rank
	o    Options
	log  *slog.Logger
	g    int // GPUs
	rank int
	emu  bool // on the emulator: launches carry their call for the ranks to compare

	inCapture bool // Capture's record function is running

	mc    bool  // multimem algorithms in use
	mcWhy error // why not

	node node // the topology and this rank's place in it
	cost CostModel
	// hierScratch holds the hierarchical kernels' rail slots, apart from scratch: a rail
	// peer may still read its ring slots in scratch when this GPU's next hierarchical
	// launch puts into its slots.
	hierScratch *sym
	hierSig     *sym       // the hierarchical kernels' rail signal words (several nodes only)
	hierEpoch   uint64     // hierarchical launches made on hierSig
	ringSig     *sym       // the NVSHMEM ring kernels' signal word (several nodes only)
	barrierBufs [2]*Buffer // Barrier across nodes: one word in, one per rank out
	ringEpoch   uint64     // ring launches made on ringSig

	pads     *sym // p2p signal pads
	padEpoch uint32

	flags     *sym // multimem barrier flags
	flagEpoch uint32

	scratch *sym // staging and reduce-scatter scratch
	pushes  *sym // p2p_allreduce_push's scratch: no other kernel may use it (the kernel starts without a barrier)

	lamport map[int]*lamportState // by element size
	ovl     *overlapState         // MatmulOverlap's side stream, events and chunk buffers
	thr     thresholds            // the all-reduce's size limits (tuning.go)
	parts   map[partKey]*Buffer   // per-size part buffers (partBuffer)
	fns     map[kernels.ID]*jit.Function
	// fused holds the fused matmul kernels loaded, fusedStates their buffers, signals and
	// epochs (fused.go).
	fused       map[fusedKey]*jit.Function
	fusedStates map[kernels.Family]*fusedState
	tmaps       map[tmapKey]jit.TensorMap // the sm_90a matmuls' tensor maps (fused_sm90.go)
	names       map[kernels.ID]string     // the kernels' registry names, for LastAlgorithm
	mods        []*jit.Module
	allocs      []*jit.Memory
	bufs        map[*jit.Memory]*Buffer // the live Buffers by this GPU's copy (BufferOf)
	last        string
	closed      bool

	// launchFn launches; tests replace it to measure the host's cost alone.
	launchFn func(f *jit.Function, cfg jit.LaunchConfig, args any) error
}

// sym is a symmetric allocation and the addresses the kernels take of it.
type sym struct {
	m   *jit.Memory
	own jit.DevicePtr // this GPU's copy
	tab jit.DevicePtr // a table on this GPU of CollMaxGPUs addresses: entry g reaches GPU g's copy (0: none made)
	mc  jit.DevicePtr // the multicast address (0: no multicast)
	// tabm is the table's own allocation (nil: none made).
	tabm *jit.Memory
}

func (s *sym) bytes() int { return int(s.m.Size()) }

// at is this GPU's copy as a pointer to dt.
func (s *sym) at(dt dsl.Type) jit.AnyPtr { return jit.AnyPtr{Addr: s.own, Elem: dt} }

// table is the table of every GPU's copy.
func (s *sym) table() jit.AnyPtr { return jit.AnyPtr{Addr: s.tab, Elem: ptx.U64} }

// multicast is the multicast address as a pointer to dt.
func (s *sym) multicast(dt dsl.Type) jit.AnyPtr { return jit.AnyPtr{Addr: s.mc, Elem: dt} }

// partKey names a per-GPU part buffer (partBuffer).
type partKey struct {
	dt dsl.Type
	n  int
}

type lamportState struct {
	s        *sym
	capacity int // elements per region
	epoch    uint32
	nprev    int
}

// New makes rank r's Comm (collective: every rank calls it), whose NVSHMEM must be running
// (jit.RanksOptions.NVSHMEM). It allocates the signal pads and, when multicast works, the
// multimem flags; without multicast it logs why and uses the peer-to-peer algorithms. ctx
// bounds the waits for the other ranks.
func New(ctx context.Context, r *jit.Rank, o Options) (*Comm, error) {
	if ctx == nil {
		return nil, errors.New("collectives: New: nil context")
	}
	if r == nil || r.Device == nil {
		return nil, errors.New("collectives: New: no rank or device")
	}
	if r.NVSHMEM == nil {
		return nil, errors.New("collectives: New: the rank has no NVSHMEM (set jit.RanksOptions.NVSHMEM): the collectives need symmetric memory")
	}
	g := r.World
	if g < 1 || g > kernels.CollMaxGPUs*kernels.HierMaxNodes {
		return nil, fmt.Errorf("collectives: %d GPUs: the kernels handle 1 to %d (%d nodes of up to %d)", g, kernels.CollMaxGPUs*kernels.HierMaxNodes, kernels.HierMaxNodes, kernels.CollMaxGPUs)
	}
	if o.Target == "" {
		o.Target = deviceTarget(r.Device.Info())
	}
	if o.Matmuls < MatmulAuto || o.Matmuls > MatmulOverlap {
		return nil, fmt.Errorf("collectives: Options.Matmuls %d: want MatmulAuto, MatmulFused, MatmulSplit or MatmulOverlap", int(o.Matmuls))
	}
	if !o.Target.Valid() {
		return nil, fmt.Errorf("collectives: Options.Target %s is not a target kgen knows (%s)", excerpt.Quote(string(o.Target)), targetList())
	}
	if o.LamportMaxBytes < 0 || o.LamportMaxBytes > MaxLamportBytes {
		return nil, fmt.Errorf("collectives: Options.LamportMaxBytes %d: want 0 (the measured default) to %d (it sizes the Lamport buffers, 3 x 8 times it per element size)", o.LamportMaxBytes, MaxLamportBytes)
	}
	if o.OverlapSignals && o.DisableOverlapSignals {
		return nil, errors.New("collectives: Options.OverlapSignals and DisableOverlapSignals are both set: choose one (neither: the Comm chooses per shape)")
	}
	if o.OverlapRounds < 0 || o.OverlapRounds > MaxOverlapRounds {
		return nil, fmt.Errorf("collectives: Options.OverlapRounds %d: want 0 (chosen) or a positive count of at most %d (a round holds at least one row per GPU)", o.OverlapRounds, MaxOverlapRounds)
	}
	if o.MaxBlocks < 0 || o.MaxBlocks > kernels.CollMaxBlocks {
		return nil, fmt.Errorf("collectives: Options.MaxBlocks %d: want 0 (DefaultMaxBlocks) or 1 to %d", o.MaxBlocks, kernels.CollMaxBlocks)
	}
	if o.MaxBlocks == 0 {
		o.MaxBlocks = DefaultMaxBlocks
	}
	if o.OneShotMaxBytes < 0 {
		return nil, fmt.Errorf("collectives: Options.OneShotMaxBytes %d: want 0 (the default) or a positive size in bytes", o.OneShotMaxBytes)
	}
	if err := partialMatmulConfigs(o); err != nil {
		return nil, err
	}
	if o.CostModel != nil {
		if err := o.CostModel.Check(); err != nil {
			return nil, fmt.Errorf("collectives: Options.CostModel %w (a model that prices nothing would silently run the hierarchical algorithms)", err)
		}
	}
	c := &Comm{r: r, o: o, log: o.Logger, g: g, rank: r.Rank, emu: r.Backend == jit.Emulator,
		lamport: map[int]*lamportState{}, fns: map[kernels.ID]*jit.Function{}, names: map[kernels.ID]string{},
		launchFn: (*jit.Function).LaunchArgs}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.cost = H100CostModel()
	if o.CostModel != nil {
		c.cost = *o.CostModel
	}
	var err error
	padWords, flagWords := kernels.PadWords, kernels.FlagWords
	if o.CaptureSafe {
		padWords, flagWords = kernels.GraphPadWords, kernels.GraphFlagWords
	}
	if c.pads, err = c.alloc(ctx, 4*padWords, false); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if c.node, err = c.learnTopology(c.pads); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if err := c.makeTable(ctx, c.pads); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	switch o.Algorithm {
	case "", AlgFlat, AlgHierarchical, AlgNVSHMEMRing:
	default:
		return nil, errors.Join(fmt.Errorf("collectives: Options.Algorithm %s: want %q, %q, %q or none", excerpt.Quote(string(o.Algorithm)), AlgFlat, AlgHierarchical, AlgNVSHMEMRing), c.Close())
	}
	if c.node.topo.Nodes > 1 || o.Algorithm == AlgHierarchical || o.Algorithm == AlgNVSHMEMRing {
		if err := c.across(ctx); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	switch {
	case c.node.topo.Nodes > 1:
		c.mcWhy = fmt.Errorf("the ranks span %d nodes: multicast reaches one node only", c.node.topo.Nodes)
	case o.DisableMulticast:
		c.mcWhy = errors.New("disabled by Options.DisableMulticast")
	case o.Target.SM() < 90:
		c.mcWhy = fmt.Errorf("target %s has no multimem instructions (sm_90 or later)", o.Target)
	default:
		if c.flags, err = c.alloc(ctx, 4*flagWords, false); err != nil {
			return nil, errors.Join(err, c.Close())
		}
		if c.flags.mc, err = r.NVSHMEM.MulticastPtr(c.flags.m); err != nil {
			c.mcWhy = err
		} else {
			c.mc = true
		}
	}
	c.node.topo.Multicast = c.mc
	c.thr = chooseThresholds(o, g, c.mc)
	c.logTopology(ctx)
	if !c.mc && c.node.topo.Nodes == 1 {
		c.log.InfoContext(ctx, "collectives: NVLink SHARP multicast unavailable; falling back to peer-to-peer kernels (one-shot, Lamport, two-shot all-reduce over peer pointers)",
			"reason", c.mcWhy.Error(), "gpus", g)
	}
	return c, nil
}

// partialMatmulConfigs refuses an Options.Matmul (MatmulSM90) whose BM (BN) is zero while
// other tile fields are set: the zero field selects the default configuration, which would
// drop the fields set without a word. (In, Out, the layouts and Aligned come from each call.)
func partialMatmulConfigs(o Options) error {
	m := o.Matmul
	if m.BM == 0 && (m.BN != 0 || m.BK != 0 || m.WarpsM != 0 || m.WarpsN != 0 || m.Stages != 0 || m.IssueAfter != 0 ||
		m.MinBlocks != 0 || m.DoubleBuffer || m.Atom != nil || !m.Epilogue.IsZero()) {
		return errors.New("collectives: Options.Matmul: BM is 0 but other fields are set: set BM too, or leave the tile fields zero (kernels.DefaultFusedConfig)")
	}
	s := o.MatmulSM90
	if s.BN == 0 && (s.Consumers != 0 || s.Stages != 0 || s.ClusterM != 0 || s.TMAStore || s.PingPong || s.Pieces || !s.Epilogue.IsZero()) {
		return errors.New("collectives: Options.MatmulSM90: BN is 0 but other fields are set: set BN too, or leave the tile fields zero (kernels.DefaultGemmSM90Config)")
	}
	return nil
}

// deviceTarget is the target of the Comm's kernels when Options.Target is unset: sm_90a on
// a compute capability 9.0 GPU (the TMA + wgmma matmuls), else the device's architecture,
// else sm_90 (the emulator reports sm_90: its tests run the sm_80-class kernels unless told).
func deviceTarget(in jit.Info) ptx.Target {
	if in.Backend != jit.Emulator && in.SM == 90 {
		return ptx.SM90a
	}
	if t := ptx.Target(in.Arch); t.Valid() {
		return t
	}
	return ptx.SM90
}

// targetList names the targets kgen knows, for an error.
func targetList() string {
	var ts []string
	for _, t := range ptx.Targets() {
		ts = append(ts, string(t))
	}
	return strings.Join(ts, ", ")
}

// Multicast reports whether the Comm uses the multimem (NVLink SHARP) algorithms, and if not,
// why.
func (c *Comm) Multicast() (bool, error) {
	if c == nil {
		return false, errNilComm
	}
	return c.mc, c.mcWhy
}

// LastAlgorithm returns the kernel the last collective ran ("mm_allreduce_1shot_sum", ...).
func (c *Comm) LastAlgorithm() string {
	if c == nil {
		return ""
	}
	return c.last
}

// NumGPUs returns the group's size.
func (c *Comm) NumGPUs() int {
	if c == nil {
		return 0
	}
	return c.g
}

// Rank returns this GPU's index in the group.
func (c *Comm) Rank() int {
	if c == nil {
		return 0
	}
	return c.rank
}

// Device returns this rank's device (nil for a nil Comm).
func (c *Comm) Device() *jit.Device {
	if c == nil || c.r == nil {
		return nil
	}
	return c.r.Device
}

// Stream returns the stream the Comm's kernels run on (Options.Stream; nil: the device's
// default stream): ops calls that produce or consume its buffers go on it too.
func (c *Comm) Stream() *jit.Stream {
	if c == nil {
		return nil
	}
	return c.o.Stream
}

// Close frees the Comm's memory and modules (collective), its Buffers' included: a Buffer
// cannot be used once its Comm is closed (its methods and every call naming it fail). It is
// CloseContext with no deadline: it waits for every rank to close.
func (c *Comm) Close() error { return c.CloseContext(context.Background()) }

// CloseContext is Close bounded by ctx: the frees of symmetric memory are collective, and a
// rank that never closes fails the wait when ctx ends (on the emulator, naming the ranks
// missing; see jit.Memory.FreeContext for GPUs). The Comm is closed either way.
func (c *Comm) CloseContext(ctx context.Context) error {
	if c == nil {
		return fmt.Errorf("collectives: Close: %w", errNilComm)
	}
	if c.r == nil {
		return fmt.Errorf("collectives: Close: %w", errZeroComm)
	}
	if ctx == nil {
		return errors.New("collectives: CloseContext: nil context")
	}
	if c.closed {
		return nil
	}
	c.closed = true
	errs := []error{c.ovl.close()}
	for _, m := range c.mods {
		errs = append(errs, m.Close())
	}
	for _, m := range c.allocs {
		errs = append(errs, m.FreeContext(ctx))
	}
	c.mods, c.allocs, c.fns, c.fused = nil, nil, nil, nil
	return joinDistinct(errs)
}

// joinDistinct is errors.Join of errs without the repeats of an error already in it: a
// device's sticky error comes back from every free and unload, and is said once, with the
// number of its repeats.
func joinDistinct(errs []error) error {
	var out []error
	seen := map[string]int{}
	for _, err := range errs {
		if err == nil {
			continue
		}
		msg := err.Error()
		if i, ok := seen[msg]; ok {
			out[i] = repeatedError{err: out[i]}.more()
			continue
		}
		seen[msg] = len(out)
		out = append(out, err)
	}
	return errors.Join(out...)
}

// repeatedError is an error that came back n+1 times.
type repeatedError struct {
	err error
	n   int
}

// more returns e (or, for an error that is not yet a repeatedError, a new one) one repeat up.
func (e repeatedError) more() error {
	if r, ok := e.err.(repeatedError); ok {
		r.n++
		return r
	}
	return repeatedError{err: e.err, n: 1}
}

func (e repeatedError) Error() string {
	return fmt.Sprintf("%v (and %d more times)", e.err, e.n)
}
func (e repeatedError) Unwrap() error { return e.err }

// alloc makes a zeroed symmetric allocation of at least bytes (whole 16-byte units) with its
// multicast address when the Comm uses multicast, and its peer table when asked. Collective.
// It returns once every GPU's copy is initialised: see allocFilled.
func (c *Comm) alloc(ctx context.Context, bytes int, table bool) (*sym, error) {
	return c.allocFilled(ctx, bytes, table, nil)
}

// allocFilled is alloc with the copy's first bytes set by fill (nil: all zero). It returns
// only after this GPU's initialisation has completed on the device and every other GPU has
// completed its own (a device synchronize, then an NVSHMEM barrier): nvshmem_malloc returns
// on every PE together, and without the barrier a fast rank's first kernel can write into a
// slow rank's copy before that rank clears it, losing the write (the back-to-back Lamport
// all-reduce hang on 4 GPUs: the slow rank's -0.0 fill wiped a peer's pushed data).
func (c *Comm) allocFilled(ctx context.Context, bytes int, table bool, fill func(p []byte)) (*sym, error) {
	s, err := c.allocLocal(ctx, bytes, table, fill)
	if err != nil {
		return nil, err
	}
	if err := c.settle(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// settle waits until this GPU's initialisation copies have landed and every GPU has reached
// the same point (bounded by ctx).
func (c *Comm) settle(ctx context.Context) error {
	if err := c.r.Device.SynchronizeContext(ctx); err != nil {
		return fmt.Errorf("collectives: initialising symmetric memory: %w", err)
	}
	if err := c.r.NVSHMEM.BarrierAllContext(ctx); err != nil {
		return fmt.Errorf("collectives: barrier after initialising symmetric memory: %w", err)
	}
	return nil
}

// allocLocal is allocFilled without the closing barrier: the copy is initialised here only.
func (c *Comm) allocLocal(ctx context.Context, bytes int, table bool, fill func(p []byte)) (*sym, error) {
	m, err := c.r.NVSHMEM.MallocContext(ctx, int64((max(bytes, 1)+15)/16*16))
	if err != nil {
		return nil, fmt.Errorf("collectives: %w", err)
	}
	c.allocs = append(c.allocs, m)
	init := make([]byte, m.Size())
	if fill != nil {
		fill(init[:bytes])
	}
	if err := c.r.Device.CopyHtoD(m.DevPtr(), init); err != nil {
		return nil, err
	}
	s := &sym{m: m, own: m.DevPtr()}
	if c.mc {
		if s.mc, err = c.r.NVSHMEM.MulticastPtr(m); err != nil {
			return nil, fmt.Errorf("collectives: multicast address: %w", err)
		}
	}
	if table {
		if err := c.makeTable(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// makeTable makes s's table: a symmetric allocation of CollMaxGPUs addresses, entry l the
// address through which this GPU reaches GPU l of its node's copy of s (on one node, GPU
// l's: the node's GPUs are ranks first() to first()+GPUsPerNode-1).
func (c *Comm) makeTable(ctx context.Context, s *sym) error {
	t, err := c.allocLocal(ctx, 8*kernels.CollMaxGPUs, false, nil) // read by this GPU only
	if err != nil {
		return err
	}
	buf := make([]byte, 8*kernels.CollMaxGPUs)
	for l := 0; l < c.node.topo.GPUsPerNode; l++ {
		g := c.node.first() + l
		a := s.own
		if g != c.rank {
			if a, err = c.r.NVSHMEM.PeerPtr(s.m, g); err != nil {
				return fmt.Errorf("collectives: peer address of GPU %d from GPU %d: %w", g, c.rank, err)
			}
		}
		binary.LittleEndian.PutUint64(buf[8*l:], uint64(a))
	}
	if err := c.r.Device.CopyHtoD(t.own, buf); err != nil {
		return err
	}
	s.tab, s.tabm = t.own, t.m
	return nil
}

// function loads (once) the kernel id for the Comm's target.
func (c *Comm) function(id kernels.ID) (*jit.Function, error) {
	if f, ok := c.fns[id]; ok {
		return f, nil
	}
	spec, err := kernels.Find(id)
	if err != nil {
		return nil, fmt.Errorf("collectives: %w", err)
	}
	if spec.MaxGPUs > 0 && c.g > spec.MaxGPUs {
		return nil, fmt.Errorf("collectives: %s is built for at most %d GPUs; the Comm has %d", spec.Name, spec.MaxGPUs, c.g)
	}
	b, err := spec.BuildVariant(kernels.Config{Target: c.o.Target, DType: id.DType})
	if err != nil {
		return nil, fmt.Errorf("collectives: building %s: %w", spec.VariantName(id.DType), err)
	}
	src := jit.Source{Module: b.Module, Params: map[string][]jit.ParamInfo{b.Entry: jit.ParamInfos(b.Params)}}
	if len(jit.NVSHMEMCalls(b.Module)) > 0 {
		src.DevLib = c.o.DevLib
	}
	m, err := c.r.Device.Load(src)
	if err != nil {
		return nil, fmt.Errorf("collectives: loading %s: %w", b.Entry, err)
	}
	c.mods = append(c.mods, m)
	f, err := m.Function(b.Entry)
	if err != nil {
		return nil, err
	}
	c.fns[id] = f
	c.names[id] = spec.Name
	return f, nil
}

// blocks sizes a grid for work 16-byte vectors per GPU.
func (c *Comm) blocks(vectors int) int {
	return min(max((vectors+kernels.CollThreads-1)/kernels.CollThreads, 1), c.o.MaxBlocks)
}

// DefaultPush4MinBytes is Options.Push4MinBytes' default. On 4 x H200 (docs/bench.md, same
// call, loop / graph us) p2p_allreduce_push4 against p2p_allreduce_push: bf16 256 MiB 1180 /
// 1185 against 1194 / 1206, 64 MiB 304.7 / 304.0 against 306.2 / 310.3, 16 MiB 86.3 / 85.1
// against 83.5 / 82.0; f32 slower at every size (256 MiB 1164 against 1159, 16 MiB 84.0
// against 79.2).
const DefaultPush4MinBytes = 64 << 20

// pushFamily is the push all-reduce's kernel family on this Comm for bytes bytes of dt:
// p2p_allreduce_push4 on at most kernels.Push4MaxGPUs GPUs for 16-bit types from
// Options.Push4MinBytes (every type and size when negative; never with
// Options.DisablePush4), else p2p_allreduce_push.
func (c *Comm) pushFamily(dt dsl.Type, bytes int) kernels.Family {
	if c.g > kernels.Push4MaxGPUs || c.o.DisablePush4 {
		return kernels.FamilyP2PAllReducePush
	}
	from := c.o.Push4MinBytes
	if from == 0 {
		from = DefaultPush4MinBytes
	}
	if from < 0 || dt.Bits() == 16 && bytes >= from {
		return kernels.FamilyP2PAllReducePush4
	}
	return kernels.FamilyP2PAllReducePush
}

// pushBlocks is the push all-reduce kernel k's grid for vectors vectors a block index covers
// (a slice's): blocks' for p2p_allreduce_push; for p2p_allreduce_push4, which fits two
// blocks of CollThreads an SM (.minnctapersm 2), up to twice MaxBlocks (at most
// kernels.CollMaxBlocks, the signal pads' slots): with the default 128 on an H200's 132
// SMs, about two blocks an SM where the general kernel has one. Both are capped at the
// blocks the device holds at once (the kernel's blocks wait on each other): on a GPU of
// fewer SMs (an A100's 108) the general kernel's one block an SM is fewer than MaxBlocks.
// The ranks' grids must agree; they do on GPUs of one model (the Comm's GPUs share an
// NVLink domain), and MaxBlocks at or below every GPU's cap makes them agree on mixed ones.
func (c *Comm) pushBlocks(k kernels.ID, vectors int) (int, error) {
	f, err := c.function(k)
	if err != nil {
		return 0, err
	}
	resident, err := f.ResidentBlocks(jit.D1(kernels.CollThreads), 0)
	if err != nil {
		return 0, fmt.Errorf("collectives: %w", err)
	}
	return pushGrid(k.Family, vectors, c.o.MaxBlocks, resident), nil
}

// pushGrid is pushBlocks' rule for a device that holds resident blocks of the kernel at once.
func pushGrid(fam kernels.Family, vectors, maxBlocks, resident int) int {
	limit := maxBlocks
	if fam == kernels.FamilyP2PAllReducePush4 {
		limit = min(2*maxBlocks, kernels.CollMaxBlocks)
	}
	return min(max((vectors+kernels.CollThreads-1)/kernels.CollThreads, 1), limit, max(resident, 1))
}

// launch runs kernel k with args, as part of call, and advances the epoch of the
// synchronization state it used.
func (c *Comm) launch(ctx context.Context, call *call, k kernels.ID, blocks int, args any) error {
	if c.o.CaptureSafe {
		var err error
		if k, err = graphVariant(call, k); err != nil {
			return err
		}
	}
	f, err := c.function(k)
	if err != nil {
		return err
	}
	if !hierFamily(k.Family) {
		if err := c.flatCheck(call.what, string(k.Family)); err != nil {
			return err
		}
	}
	barriers, multimem, ok := kernels.CollBarriers(k.Family)
	if !ok {
		return fmt.Errorf("collectives: %s is not a collective kernel family", k.Family)
	}
	if multimem {
		// Every launch over the multimem flags uses the same grid: a block's flag counts
		// the barriers its block index took part in, which must be all of them.
		blocks = c.o.MaxBlocks
	}
	c.last = c.names[k]
	if c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+call.what, append([]any{"algorithm", c.last, "dtype", k.DType.String(), "gpus", c.g, "multicast", c.mc, "blocks", blocks}, call.attrs()...)...)
	}
	stream := c.o.Stream
	if call.stream != nil {
		stream = call.stream
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(blocks), Block: jit.D1(kernels.CollThreads), SharedMem: call.shared, Stream: stream,
		Collective: jit.CollectiveOn, Context: ctx, CoResident: true}
	if c.emu {
		cfg.Call = call.String()
	}
	if err := c.launchFn(f, cfg, args); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", call.what, f.Name(), err)
	}
	if multimem {
		c.flagEpoch += uint32(barriers)
	} else {
		c.padEpoch += uint32(barriers)
	}
	return nil
}

// debug reports whether the debug log is on: a call builds its log attributes only then
// (they cost allocations on every call otherwise).
func (c *Comm) debug(ctx context.Context) bool { return c.log.Enabled(ctx, slog.LevelDebug) }

// ensureScratch makes the scratch buffer at least bytes long.
func (c *Comm) ensureScratch(ctx context.Context, cl *call, bytes int) error {
	if c.scratch != nil && c.scratch.bytes() >= bytes {
		return nil
	}
	s, err := c.alloc(ctx, max(bytes, 64<<10), true)
	if err != nil {
		return cl.wrap(err)
	}
	c.scratch = s
	return nil
}

// ensurePushScratch makes p2p_allreduce_push's scratch at least bytes long. A larger one
// replaces it; the old one stays allocated until Close, like the other scratch.
func (c *Comm) ensurePushScratch(ctx context.Context, cl *call, bytes int) error {
	if c.pushes != nil && c.pushes.bytes() >= bytes {
		return nil
	}
	s, err := c.alloc(ctx, max(bytes, 64<<10), true)
	if err != nil {
		return cl.wrap(err)
	}
	c.pushes = s
	return nil
}

// stage copies src into the scratch buffer (for the one-shot kernels, whose output must not
// alias the input the peers read).
func (c *Comm) stage(ctx context.Context, cl *call, src *Buffer) error {
	if err := c.ensureScratch(ctx, cl, src.Bytes()); err != nil {
		return err
	}
	if c.o.Stream != nil {
		return c.o.Stream.CopyDtoD(c.scratch.own, src.s.own, int64(src.Bytes()))
	}
	return c.r.Device.CopyDtoD(c.scratch.own, src.s.own, int64(src.Bytes()))
}
