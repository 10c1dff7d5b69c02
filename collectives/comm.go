package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/kgen-dev/kgen/dsl"
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

// Default thresholds of the algorithm choice (message sizes in bytes per GPU), from the
// 2 and 4 x H200 measurements of docs/bench.md (back-to-back timing, multicast off): Lamport
// wins only the smallest messages, the two-shot kernel everything from about 16 KiB, the
// peer-to-peer one-shot never; 64 blocks saturate the two-shot kernel on 2 GPUs. The push
// all-reduce (PushMinBytes) was slower than the two-shot kernel on 4 GPUs and is off.
const (
	DefaultOneShotMaxBytes = 16 << 10
	DefaultLamportMaxBytes = 8 << 10
	DefaultMaxBlocks       = 64
	DefaultPushMinBytes    = -1
)

// Options configure a Comm.
type Options struct {
	// Target is the GPU target the kernels are built for (default sm_90). Targets before
	// sm_90 have no multimem: the multicast algorithms are then off.
	Target ptx.Target
	// Logger receives the algorithm choices (at debug level) and the multicast fallback
	// (at info level); nil means slog.Default().
	Logger *slog.Logger
	// DisableMulticast uses the peer-to-peer algorithms even when multicast is available.
	DisableMulticast bool
	// DisableLamport skips the Lamport all-reduce (small messages then go one-shot).
	DisableLamport bool
	// OneShotMaxBytes is the largest all-reduce that runs one-shot (default
	// DefaultOneShotMaxBytes); larger ones run two-shot.
	OneShotMaxBytes int
	// LamportMaxBytes is the largest all-reduce that runs Lamport when there is no multicast
	// (default DefaultLamportMaxBytes); it also sizes the Lamport buffers.
	LamportMaxBytes int
	// PushMinBytes is the smallest peer-to-peer all-reduce that runs as a reduce-scatter
	// by peer stores followed by an all-gather by peer stores (two kernels; NVLink writes
	// only) instead of the two-shot kernel, whose reduce-scatter pulls with peer loads
	// (default DefaultPushMinBytes, which is off; negative: never).
	PushMinBytes int
	// MaxBlocks caps the grid of every kernel (1..kernels.CollMaxBlocks, default
	// DefaultMaxBlocks).
	MaxBlocks int
}

// Comm is a group of GPUs that run collectives together. It owns the synchronization state
// the kernels need (signal pads, multicast flags, Lamport slots, staging scratch) and the
// epochs that let them run back to back with no reset. Every process of the group makes
// the same calls in the same order. A Comm is not safe for concurrent use.
type Comm struct {
	b     Backend
	o     Options
	log   *slog.Logger
	g     int
	local []int

	mc    bool  // multimem algorithms in use
	mcWhy error // why not

	pads     Mem // p2p signal pads
	padTab   Mem
	padEpoch uint32

	flags     Mem // multimem barrier flags
	flagEpoch uint32

	scratch    Mem // staging and reduce-scatter scratch
	scratchTab Mem

	lamport map[int]*lamportState // by element size
	parts   map[partKey]*Buffer   // reduce-scatter results of the push all-reduce
	mods    map[string]*ptx.Module
	allocs  []Mem
	last    string
	closed  bool
}

// partKey names a per-GPU part buffer of the push all-reduce.
type partKey struct {
	dt dsl.Type
	n  int
}

type lamportState struct {
	mem, tab Mem
	capacity int // elements per region
	epoch    uint32
	nprev    int
}

// New makes a Comm over the backend's GPUs (collective: every process calls it). It
// allocates the signal pads and, when multicast works, the multimem flags; without
// multicast it logs why and uses the peer-to-peer algorithms.
func New(ctx context.Context, b Backend, o Options) (*Comm, error) {
	if b == nil {
		return nil, errors.New("collectives: nil Backend")
	}
	g := b.NumGPUs()
	if g < 1 || g > kernels.CollMaxGPUs {
		return nil, fmt.Errorf("collectives: %d GPUs: the kernels handle 1 to %d", g, kernels.CollMaxGPUs)
	}
	if o.Target == "" {
		o.Target = ptx.SM90
	}
	if !o.Target.Valid() {
		return nil, fmt.Errorf("collectives: unknown target %q", o.Target)
	}
	if o.OneShotMaxBytes <= 0 {
		o.OneShotMaxBytes = DefaultOneShotMaxBytes
	}
	if o.LamportMaxBytes <= 0 {
		o.LamportMaxBytes = DefaultLamportMaxBytes
	}
	if o.PushMinBytes == 0 {
		o.PushMinBytes = DefaultPushMinBytes
	}
	if o.MaxBlocks <= 0 {
		o.MaxBlocks = DefaultMaxBlocks
	}
	if o.MaxBlocks > kernels.CollMaxBlocks {
		return nil, fmt.Errorf("collectives: MaxBlocks %d: at most %d", o.MaxBlocks, kernels.CollMaxBlocks)
	}
	c := &Comm{b: b, o: o, log: o.Logger, g: g, local: b.Local(), lamport: map[int]*lamportState{}, mods: map[string]*ptx.Module{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	var err error
	if c.pads, err = c.alloc(4 * kernels.PadWords); err != nil {
		return nil, err
	}
	if c.padTab, err = c.table(c.pads); err != nil {
		return nil, err
	}
	switch {
	case o.DisableMulticast:
		c.mcWhy = errors.New("disabled by Options.DisableMulticast")
	case o.Target.SM() < 90:
		c.mcWhy = fmt.Errorf("target %s has no multimem instructions (sm_90 or later)", o.Target)
	default:
		if c.flags, err = c.alloc(4 * kernels.FlagWords); err != nil {
			return nil, err
		}
		c.mc = true
		for _, gpu := range c.local {
			if _, err := b.Multicast(c.flags, gpu); err != nil {
				c.mc, c.mcWhy = false, err
				break
			}
		}
	}
	if !c.mc {
		c.log.InfoContext(ctx, "collectives: NVLink SHARP multicast unavailable; falling back to peer-to-peer kernels (one-shot, Lamport, two-shot all-reduce over peer pointers)",
			"reason", c.mcWhy.Error(), "gpus", g)
	}
	return c, nil
}

// Multicast reports whether the Comm uses the multimem (NVLink SHARP) algorithms, and if not,
// why.
func (c *Comm) Multicast() (bool, error) { return c.mc, c.mcWhy }

// LastAlgorithm returns the kernel the last collective ran ("mm_allreduce_1shot_sum", ...).
func (c *Comm) LastAlgorithm() string { return c.last }

// NumGPUs returns the group's size.
func (c *Comm) NumGPUs() int { return c.g }

// Close frees the Comm's memory (collective). Buffers allocated from it stay valid until
// freed.
func (c *Comm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, m := range c.allocs {
		errs = append(errs, c.b.Free(m))
	}
	c.allocs = nil
	return errors.Join(errs...)
}

func (c *Comm) alloc(bytes int) (Mem, error) {
	m, err := c.b.Alloc((max(bytes, 1) + 15) / 16 * 16)
	if err != nil {
		return nil, fmt.Errorf("collectives: %w", err)
	}
	c.allocs = append(c.allocs, m)
	return m, nil
}

// table makes a symmetric table of CollMaxGPUs addresses: on GPU v, entry g is the address
// through which v reaches GPU g's copy of m.
func (c *Comm) table(m Mem) (Mem, error) {
	t, err := c.alloc(8 * kernels.CollMaxGPUs)
	if err != nil {
		return nil, err
	}
	for _, v := range c.local {
		buf := make([]byte, 8*kernels.CollMaxGPUs)
		for g := 0; g < c.g; g++ {
			a, err := c.b.Addr(m, v, g)
			if err != nil {
				return nil, fmt.Errorf("collectives: peer address of GPU %d from GPU %d: %w", g, v, err)
			}
			binary.LittleEndian.PutUint64(buf[8*g:], a)
		}
		if err := c.b.Write(t, v, 0, buf); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// module builds (once) the kernel name for dt.
func (c *Comm) module(name string, dt dsl.Type) (*ptx.Module, string, error) {
	spec, err := kernels.Lookup(name)
	if err != nil {
		return nil, "", err
	}
	entry := spec.VariantName(dt)
	key := entry + "@" + string(c.o.Target)
	if m, ok := c.mods[key]; ok {
		return m, entry, nil
	}
	m, err := spec.Build(kernels.Config{Target: c.o.Target, DType: dt})
	if err != nil {
		return nil, "", fmt.Errorf("collectives: building %s: %w", entry, err)
	}
	c.mods[key] = m
	return m, entry, nil
}

// blocks sizes a grid for work 16-byte vectors per GPU.
func (c *Comm) blocks(vectors int) int {
	return min(max((vectors+kernels.CollThreads-1)/kernels.CollThreads, 1), c.o.MaxBlocks)
}

// launch runs kernel name for dt and advances the epoch of the synchronization state it used.
func (c *Comm) launch(ctx context.Context, what, name string, dt dsl.Type, blocks int, args func(gpu int) []any, attrs ...any) error {
	if c.closed {
		return errors.New("collectives: the Comm is closed")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m, entry, err := c.module(name, dt)
	if err != nil {
		return err
	}
	mm := name[:3] == "mm_"
	if mm {
		// Every launch over the multimem flags uses the same grid: a block's flag counts
		// the barriers its block index took part in, which must be all of them.
		blocks = c.o.MaxBlocks
	}
	c.last = name
	if c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+what, append([]any{"algorithm", name, "dtype", dt.String(), "gpus", c.g, "multicast", c.mc, "blocks", blocks}, attrs...)...)
	}
	if err := c.b.Launch(Launch{Module: m, Entry: entry, Grid: blocks, Block: kernels.CollThreads, Args: args}); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", what, entry, err)
	}
	nb := uint32(kernels.CollBarriers(name))
	if mm {
		c.flagEpoch += nb
	} else {
		c.padEpoch += nb
	}
	return nil
}

// debug reports whether the debug log is on: a call builds its log attributes only then
// (they cost allocations on every call otherwise).
func (c *Comm) debug(ctx context.Context) bool { return c.log.Enabled(ctx, slog.LevelDebug) }

// addr returns GPU gpu's own copy of m; mcast its multicast address.
func (c *Comm) addr(m Mem, gpu int) uint64 {
	a, _ := c.b.Addr(m, gpu, gpu) // checked when the buffer's table was made
	return a
}

func (c *Comm) mcast(m Mem, gpu int) (uint64, error) {
	a, err := c.b.Multicast(m, gpu)
	if err != nil {
		return 0, fmt.Errorf("collectives: multicast address: %w", err)
	}
	return a, nil
}

// ensureScratch makes the scratch buffer at least bytes long.
func (c *Comm) ensureScratch(bytes int) error {
	if c.scratch != nil && c.scratch.Bytes() >= bytes {
		return nil
	}
	m, err := c.alloc(max(bytes, 64<<10))
	if err != nil {
		return err
	}
	t, err := c.table(m)
	if err != nil {
		return err
	}
	c.scratch, c.scratchTab = m, t
	return nil
}

// stage copies src into the scratch buffer on every local GPU (for the one-shot kernels,
// whose output must not alias the input the peers read).
func (c *Comm) stage(src *Buffer) error {
	if err := c.ensureScratch(src.Bytes()); err != nil {
		return err
	}
	for _, g := range c.local {
		if err := c.b.Copy(g, c.scratch, 0, src.m, 0, src.n*src.dt.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
