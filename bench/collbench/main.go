// Command collbench times kgen's collectives on every rank of a multi-GPU program: each
// all-reduce algorithm (lamport, oneshot, twoshot, push, push8, and auto: the Comm's own choice),
// reduce-scatter and all-gather, in f32, bf16 or f16, three ways:
//
//   - loop: warm-up calls, then -iters calls back to back between one pair of CUDA events
//     on the Comm's stream, no host synchronisation between them (nccl-tests' method); the
//     mean per call.
//   - call: an event pair around each of -iters calls, synchronised after each; the median.
//   - graph: N calls (-graph-calls, -graph-calls-big above -big-bytes) captured into one
//     CUDA graph through Comm.Capture on a CaptureSafe Comm, the graph replayed -graph-reps
//     times, each replay between an event pair; the median replay / N. Push has no graph
//     variant without multicast: it prints a "skipped" line.
//
// push is the push all-reduce as p2p_allreduce_push4 (built for at most 4 GPUs, two blocks
// an SM; Options.Push4MinBytes -1: at every type and size) on up to 4 GPUs,
// p2p_allreduce_push above; push8 is always p2p_allreduce_push (Options.DisablePush4), so
// that -ops push,push8 times both in one run; auto takes the Comm's own choice (push4 for
// 16-bit types from DefaultPush4MinBytes). -push4=false sets Options.DisablePush4 on every
// Comm (auto and push included).
//
// Every (operation, type, Comm, size) is checked once before it is timed: the inputs are
// (rank+1)*(i%5+1) (small integers: exact in bf16 and f16), the outputs compared with the
// exact sums bit for bit. A failed check is recorded in the result's "check" field (every
// rank still makes the same calls, so no rank waits for another that gave up).
//
// Sizes are bytes of the larger buffer, as in nccl-tests: the all-reduce buffer, the
// reduce-scatter input (NumGPUs parts) and the all-gather output (NumGPUs parts).
// All-reduces run out of place (AllReduceTo(dst, src)) unless -inplace: out of place, the
// one-shot kernel needs no staging copy and runs inside graphs, and a result stays
// checkable after any number of calls.
//
// -soak N replaces the timing: per size N calls back to back (-soak-big above
// -soak-big-bytes), in loop mode (direct calls, one synchronisation at the end) and graph
// mode (a graph of up to 100 calls replayed until N calls ran), then one check. Rank 0
// prints a progress line to stderr before each step, so that when a call hangs (and
// `kgen launch --timeout` or `timeout` ends the ranks) the last line names it.
//
// Start it with `kgen launch -n N -- collbench` or torchrun on GPUs (cuda-tagged build), or
// with `kgen launch -n N --backend emu` on the emulator. Every rank prints one JSON object
// per measurement; the slowest rank's time is the result (scripts/bench/coll_join.py,
// join.py).
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
)

// result is one measurement, in the shape nccl_allreduce.py and coll_anchors.py print.
type result struct {
	Impl   string  `json:"impl"`
	Op     string  `json:"op"`
	DType  string  `json:"dtype"`
	GPUs   int     `json:"gpus"`
	Rank   int     `json:"rank"`
	Bytes  int     `json:"bytes"`
	Mode   string  `json:"mode,omitempty"`
	TimeUS float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbps"`
	BusBW  float64 `json:"busbw_gbps,omitempty"`
	// HostUS is the host's time to issue one call (loop timing only): when it is close to
	// TimeUS, the host, not the GPU, sets the pace.
	HostUS  float64 `json:"host_us,omitempty"`
	Kernel  string  `json:"kernel,omitempty"`
	Calls   int     `json:"calls,omitempty"`
	InPlace bool    `json:"inplace,omitempty"`
	Check   string  `json:"check,omitempty"`
}

// soakResult is one soak step.
type soakResult struct {
	Soak   bool    `json:"soak"`
	Impl   string  `json:"impl"`
	Op     string  `json:"op"`
	DType  string  `json:"dtype"`
	GPUs   int     `json:"gpus"`
	Rank   int     `json:"rank"`
	Bytes  int     `json:"bytes"`
	Mode   string  `json:"mode"`
	Calls  int     `json:"calls"`
	Kernel string  `json:"kernel,omitempty"`
	OK     bool    `json:"ok"`
	Check  string  `json:"check"`
	Secs   float64 `json:"secs"`
}

// skipped says that an (operation, mode) pair has no measurement, and why.
type skipped struct {
	Impl    string `json:"impl"`
	Op      string `json:"op"`
	DType   string `json:"dtype"`
	GPUs    int    `json:"gpus"`
	Rank    int    `json:"rank"`
	Mode    string `json:"mode"`
	Skipped string `json:"skipped"`
}

// config holds the flags that shape every measurement.
type config struct {
	minBytes, maxBytes     int
	iters, warmup, blocks  int
	modes                  map[string]bool
	graphCalls, graphBig   int
	graphReps, bigBytes    int
	inPlace                bool
	push4                  bool // -push4: false sets Options.DisablePush4
	soak, soakBig, soakMax int
	sizes                  []int // -sizes, else nil: minBytes..maxBytes by factors of 4
	start                  time.Time
}

// sizeList returns the sizes to run.
func (cfg *config) sizeList() []int {
	if cfg.sizes != nil {
		return cfg.sizes
	}
	var out []int
	for size := cfg.minBytes; size <= cfg.maxBytes; size *= 4 {
		out = append(out, size)
	}
	return out
}

// parseSize reads 4096, 4K, 4KiB, 1M, 1G.
func parseSize(s string) (int, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "b"), "i")
	mul := 1
	switch {
	case strings.HasSuffix(t, "k"):
		mul = 1 << 10
	case strings.HasSuffix(t, "m"):
		mul = 1 << 20
	case strings.HasSuffix(t, "g"):
		mul = 1 << 30
	}
	if mul > 1 {
		t = t[:len(t)-1]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes (4096, 4K, 1M)", s)
	}
	return n * mul, nil
}

// operation is one collective (an all-reduce algorithm forced through the Comm's options,
// or reduce-scatter, or all-gather) with its options for direct calls and for graphs.
type operation struct {
	name     string // lamport, oneshot, twoshot, push, push8, auto, reducescatter, allgather
	op       string // allreduce, reducescatter, allgather
	maxBytes int    // the largest size it runs at
	opts     collectives.Options
	graph    *collectives.Options // nil: no graph variant
	noGraph  string               // why not
}

var (
	out   = json.NewEncoder(os.Stdout)
	outMu sync.Mutex // the emulator's ranks are goroutines of one process
)

func emit(v any) error {
	outMu.Lock()
	defer outMu.Unlock()
	return out.Encode(v)
}

func main() {
	log.SetFlags(0)
	var cfg config
	flag.IntVar(&cfg.minBytes, "min-bytes", 4<<10, "smallest message (bytes of the larger buffer)")
	flag.IntVar(&cfg.maxBytes, "max-bytes", 256<<20, "largest message")
	flag.IntVar(&cfg.iters, "iters", 20, "timed calls per size (loop and call modes)")
	flag.IntVar(&cfg.warmup, "warmup", 5, "warm-up calls per size")
	flag.IntVar(&cfg.blocks, "blocks", 0, "MaxBlocks of the kernels (0: the default)")
	loop := flag.Bool("loop", false, "same as -modes loop (kept for device_collbench.sh)")
	modes := flag.String("modes", "", "timing modes: loop, call, graph (default: call, or loop with -loop)")
	algs := flag.String("algs", "lamport,oneshot,twoshot,push,auto", "all-reduce algorithms to time (when -ops is empty)")
	ops := flag.String("ops", "", "operations: any of lamport,oneshot,twoshot,push,push8,auto (all-reduce), reducescatter, rs_push, allgather; empty: -algs")
	flag.BoolVar(&cfg.push4, "push4", true, "run p2p_allreduce_push4 as the push all-reduce on up to 4 GPUs (false: Options.DisablePush4 on every Comm)")
	dtypes := flag.String("dtypes", "f32", "element types: f32, bf16, f16")
	flag.IntVar(&cfg.graphCalls, "graph-calls", 20, "calls captured per graph (graph mode)")
	flag.IntVar(&cfg.graphBig, "graph-calls-big", 10, "calls captured per graph above -big-bytes")
	flag.IntVar(&cfg.bigBytes, "big-bytes", 4<<20, "where -graph-calls-big starts")
	flag.IntVar(&cfg.graphReps, "graph-reps", 5, "timed replays per graph (median)")
	flag.BoolVar(&cfg.inPlace, "inplace", false, "all-reduce in place (AllReduce(buf)) instead of AllReduceTo(dst, src)")
	flag.IntVar(&cfg.soak, "soak", 0, "soak instead of timing: this many calls per size (0: time)")
	flag.IntVar(&cfg.soakBig, "soak-big", 100, "soak calls per size above -soak-big-bytes")
	flag.IntVar(&cfg.soakMax, "soak-big-bytes", 1<<20, "where -soak-big starts")
	sizes := flag.String("sizes", "", "comma-separated sizes (4K, 1M, 65536, ...) instead of -min-bytes..-max-bytes by factors of 4")
	cpuprofile := flag.String("cpuprofile", "", "write rank 0's CPU profile to this file (host-side cost)")
	flag.Parse()
	cfg.start = time.Now()
	if *cpuprofile != "" && os.Getenv("RANK") == "0" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatalf("collbench: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatalf("collbench: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	for _, x := range split(*sizes) {
		n, err := parseSize(x)
		if err != nil {
			log.Fatalf("collbench: -sizes: %v", err)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	cfg.modes = map[string]bool{}
	switch {
	case *modes != "":
		for _, m := range split(*modes) {
			if m != "loop" && m != "call" && m != "graph" {
				log.Fatalf("collbench: -modes %q: want loop, call, graph", m)
			}
			cfg.modes[m] = true
		}
	case *loop:
		cfg.modes["loop"] = true
	default:
		cfg.modes["call"] = true
	}
	if cfg.soak > 0 && !cfg.modes["graph"] && !cfg.modes["loop"] {
		// call mode means nothing for a soak: soak back to back.
		cfg.modes["loop"] = true
	}
	names := split(*ops)
	if len(names) == 0 {
		names = split(*algs)
	}
	var dts []dsl.Type
	for _, d := range split(*dtypes) {
		dt, ok := map[string]dsl.Type{"f32": dsl.F32, "float32": dsl.F32, "bf16": dsl.BF16, "bfloat16": dsl.BF16, "f16": dsl.F16, "float16": dsl.F16}[d]
		if !ok {
			log.Fatalf("collbench: -dtypes %q: want f32, bf16 or f16", d)
		}
		dts = append(dts, dt)
	}
	err := jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error {
		return run(r, &cfg, names, dts)
	})
	if err != nil {
		log.Fatalf("collbench: %v", err)
	}
}

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// operations returns the operations by name, in the order asked.
func operations(names []string, blocks int, push4 bool) ([]operation, error) {
	huge := 1 << 40
	// Every Comm here runs with multicast off: the lent machines must never create a
	// multicast object (docs/bench.md, "Collectives on 2 and 4 GPUs"), and auto then picks among the
	// peer-to-peer kernels as it does with NVLS off.
	base := collectives.Options{DisableMulticast: true, MaxBlocks: blocks, DisablePush4: !push4}
	with := func(f func(o *collectives.Options)) collectives.Options {
		o := base
		f(&o)
		return o
	}
	graph := func(o collectives.Options) *collectives.Options {
		o.CaptureSafe = true
		return &o
	}
	lamport := with(func(o *collectives.Options) { o.LamportMaxBytes, o.OneShotMaxBytes = 4<<20, huge })
	oneshot := with(func(o *collectives.Options) { o.DisableLamport, o.OneShotMaxBytes = true, huge })
	twoshot := with(func(o *collectives.Options) { o.DisableLamport, o.OneShotMaxBytes, o.PushMinBytes = true, 1, -1 })
	rsPush := with(func(o *collectives.Options) { o.ReduceScatterPullMinBytes = -1 })
	push := with(func(o *collectives.Options) {
		o.DisableLamport, o.OneShotMaxBytes, o.PushMinBytes = true, 1, 1
		if push4 {
			o.Push4MinBytes = -1 // the 4-GPU kernel at every type and size, against push8
		}
	})
	push8 := with(func(o *collectives.Options) {
		o.DisableLamport, o.OneShotMaxBytes, o.PushMinBytes, o.DisablePush4 = true, 1, 1, true
	})
	all := map[string]operation{
		// The graph variants take the same thresholds (graphPlan): Lamport's keeps its
		// epoch and clear count on the device.
		"lamport":       {name: "lamport", op: "allreduce", maxBytes: 4 << 20, opts: lamport, graph: graph(lamport)},
		"oneshot":       {name: "oneshot", op: "allreduce", maxBytes: 64 << 20, opts: oneshot, graph: graph(oneshot)},
		"twoshot":       {name: "twoshot", op: "allreduce", maxBytes: huge, opts: twoshot, graph: graph(twoshot)},
		"push":          {name: "push", op: "allreduce", maxBytes: huge, opts: push, graph: graph(push)},
		"push8":         {name: "push8", op: "allreduce", maxBytes: huge, opts: push8, graph: graph(push8)},
		"auto":          {name: "auto", op: "allreduce", maxBytes: huge, opts: base, graph: graph(base)},
		"reducescatter": {name: "reducescatter", op: "reducescatter", maxBytes: huge, opts: base, graph: graph(base)},
		// The push reduce-scatter (peer stores into scratch, local reduction), which the
		// Comm runs below ReduceScatterPullMinBytes.
		"rs_push":   {name: "rs_push", op: "reducescatter", maxBytes: huge, opts: rsPush, graph: graph(rsPush)},
		"allgather": {name: "allgather", op: "allgather", maxBytes: huge, opts: base, graph: graph(base)},
	}
	var ops []operation
	for _, n := range names {
		o, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown operation %q (want lamport, oneshot, twoshot, push, push8, auto, reducescatter, rs_push, allgather)", n)
		}
		ops = append(ops, o)
	}
	return ops, nil
}

func dtypeName(dt dsl.Type) string {
	switch dt {
	case dsl.F32:
		return "float32"
	case dsl.BF16:
		return "bfloat16"
	case dsl.F16:
		return "float16"
	}
	return dt.String()
}

func run(r *jit.Rank, cfg *config, names []string, dts []dsl.Type) error {
	ops, err := operations(names, cfg.blocks, cfg.push4)
	if err != nil {
		return err
	}
	for _, o := range ops {
		for _, dt := range dts {
			if cfg.modes["loop"] || (cfg.modes["call"] && cfg.soak == 0) {
				if err := runComm(r, cfg, o, o.opts, dt, false); err != nil {
					return fmt.Errorf("%s %s: %w", o.name, dt, err)
				}
			}
			if !cfg.modes["graph"] {
				continue
			}
			if o.graph == nil {
				if r.Rank == 0 {
					progress(cfg, "%s %s graph: skipped (%s)", o.name, dt, o.noGraph)
				}
				if err := emit(skipped{Impl: "kgen/" + o.name, Op: o.op, DType: dtypeName(dt), GPUs: r.World, Rank: r.Rank, Mode: "graph", Skipped: o.noGraph}); err != nil {
					return err
				}
				continue
			}
			if err := runComm(r, cfg, o, *o.graph, dt, true); err != nil {
				return fmt.Errorf("%s %s graph: %w", o.name, dt, err)
			}
		}
	}
	if r.Rank == 0 {
		progress(cfg, "done")
	}
	return nil
}

// progress prints a line to stderr with the seconds since the start.
func progress(cfg *config, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "collbench %6.1fs: %s\n", time.Since(cfg.start).Seconds(), fmt.Sprintf(format, args...))
}

// bench is one Comm's state for one operation and type.
type bench struct {
	r      *jit.Rank
	cfg    *config
	o      operation
	dt     dsl.Type
	c      *collectives.Comm
	s      *jit.Stream
	e0, e1 *jit.Event
	graph  bool
}

// runComm makes a Comm with opts (a CaptureSafe one when graph) and runs every size on it:
// loop and call timing (or the loop soak) on a plain Comm, graph timing (or the graph soak)
// on a CaptureSafe one.
func runComm(r *jit.Rank, cfg *config, o operation, opts collectives.Options, dt dsl.Type, graph bool) error {
	ctx := context.Background()
	s, err := r.Device.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	opts.Stream = s
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := collectives.New(ctx, r, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	b := &bench{r: r, cfg: cfg, o: o, dt: dt, c: c, s: s, graph: graph}
	if b.e0, err = r.Device.NewEvent(); err != nil {
		return err
	}
	defer b.e0.Close()
	if b.e1, err = r.Device.NewEvent(); err != nil {
		return err
	}
	defer b.e1.Close()
	esize := dt.Bytes()
	for _, size := range cfg.sizeList() {
		if size > o.maxBytes {
			continue
		}
		n := size / esize
		if o.op != "allreduce" {
			n = n / r.World * r.World // whole parts
		}
		if n < r.World {
			continue
		}
		if err := b.size(ctx, n); err != nil {
			return fmt.Errorf("%d bytes: %w", size, err)
		}
	}
	return nil
}

// value is rank's input element i (before any conversion): small integers, exact in
// every type.
func value(rank, i int) float32 { return float32((rank + 1) * (i%5 + 1)) }

// encode appends x as one element of dt.
func encode(p []byte, dt dsl.Type, x float32) []byte {
	switch dt {
	case dsl.BF16:
		return binary.LittleEndian.AppendUint16(p, uint16(math.Float32bits(x)>>16))
	case dsl.F16:
		return binary.LittleEndian.AppendUint16(p, fp.F32ToF16(x))
	}
	return binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
}

func decode(p []byte, dt dsl.Type, i int) float32 {
	switch dt {
	case dsl.BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(p[2*i:])) << 16)
	case dsl.F16:
		return fp.F16ToF32(binary.LittleEndian.Uint16(p[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
}

// fill returns n elements of dt, element i being f(i), for an f of period 5 (f(i) ==
// f(i%5)): the first five are encoded, then copied over the rest by doubling (a 256 MiB
// buffer in tens of milliseconds, where encoding every element took most of a second).
func fill(dt dsl.Type, n int, f func(i int) float32) []byte {
	es := dt.Bytes()
	p := make([]byte, 0, n*es)
	for i := 0; i < min(n, 5); i++ {
		p = encode(p, dt, f(i))
	}
	p = p[:n*es]
	for done := min(n, 5) * es; done < len(p); done *= 2 {
		copy(p[done:], p[:done])
	}
	return p
}

// buffers are one size's buffers and the calls on them.
type buffers struct {
	src, dst *collectives.Buffer
	want     []byte // dst's expected contents
	call     func() error
}

func (b *bench) buffers(ctx context.Context, n int, inPlace bool) (*buffers, error) {
	g, rank := b.r.World, b.r.Rank
	sum := float32(g * (g + 1) / 2)
	var bs buffers
	var err error
	var in []byte
	switch b.o.op {
	case "allreduce":
		if bs.src, err = b.c.Alloc(b.dt, n); err != nil {
			return nil, err
		}
		bs.dst = bs.src
		if !inPlace {
			if bs.dst, err = b.c.Alloc(b.dt, n); err != nil {
				return nil, err
			}
		}
		in = fill(b.dt, n, func(i int) float32 { return value(rank, i) })
		bs.want = fill(b.dt, n, func(i int) float32 { return sum * float32(i%5+1) })
		bs.call = func() error { return b.c.AllReduceTo(ctx, bs.dst, bs.src, collectives.Sum) }
	case "reducescatter":
		m := n / g
		if bs.src, err = b.c.Alloc(b.dt, n); err != nil {
			return nil, err
		}
		if bs.dst, err = b.c.Alloc(b.dt, m); err != nil {
			return nil, err
		}
		in = fill(b.dt, n, func(i int) float32 { return value(rank, i) })
		bs.want = fill(b.dt, m, func(j int) float32 { return sum * float32((rank*m+j)%5+1) })
		bs.call = func() error { return b.c.ReduceScatter(ctx, bs.dst, bs.src, collectives.Sum) }
	case "allgather":
		m := n / g
		if bs.src, err = b.c.Alloc(b.dt, m); err != nil {
			return nil, err
		}
		if bs.dst, err = b.c.Alloc(b.dt, n); err != nil {
			return nil, err
		}
		in = fill(b.dt, m, func(j int) float32 { return value(rank, j) })
		bs.want = make([]byte, 0, n*b.dt.Bytes())
		for q := 0; q < g; q++ { // part q is GPU q's input
			bs.want = append(bs.want, fill(b.dt, m, func(j int) float32 { return value(q, j) })...)
		}
		bs.call = func() error { return b.c.AllGather(ctx, bs.dst, bs.src) }
	}
	if err := bs.src.Write(in); err != nil {
		return nil, err
	}
	return &bs, nil
}

// free releases the size's buffers (collective: every rank at the same point), so that a
// Comm's memory is one size's, not the sum over sizes. The Comm keeps its scratch.
func (bs *buffers) free() {
	bufs := []*collectives.Buffer{bs.dst}
	if bs.src != bs.dst {
		bufs = append(bufs, bs.src)
	}
	for _, x := range bufs {
		if err := x.Free(); err != nil {
			log.Printf("collbench: freeing a buffer: %v", err)
		}
	}
}

// check reads dst and compares it with want: "ok", or what differs.
func (b *bench) check(bs *buffers) (string, error) {
	got := make([]byte, len(bs.want))
	if err := bs.dst.Read(got); err != nil {
		return "", err
	}
	if bytes.Equal(got, bs.want) {
		return "ok", nil
	}
	es := b.dt.Bytes()
	bad, first := 0, -1
	for i := 0; i < len(got)/es; i++ {
		if !bytes.Equal(got[i*es:(i+1)*es], bs.want[i*es:(i+1)*es]) {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	return fmt.Sprintf("FAIL: %d of %d elements differ, first %d = %v, want %v (%s)", bad, len(got)/es, first,
		decode(got, b.dt, first), decode(bs.want, b.dt, first), b.c.LastAlgorithm()), nil
}

// sync waits for this rank's stream and then for every rank (a host-side NVSHMEM barrier,
// which a CaptureSafe Comm allows, unlike Comm.Barrier).
func (b *bench) sync() error {
	if err := b.s.Synchronize(); err != nil {
		return err
	}
	return b.r.NVSHMEM.BarrierAll()
}

func (b *bench) impl(kernel string) string {
	impl := "kgen/" + b.o.name
	if b.o.name == "auto" {
		impl = "kgen/auto:" + kernel
	}
	if b.o.opts.MaxBlocks > 0 {
		impl += fmt.Sprintf("@%db", b.o.opts.MaxBlocks)
	}
	return impl
}

// size checks and times (or soaks) one size of n elements.
func (b *bench) size(ctx context.Context, n int) error {
	cfg := b.cfg
	bytes := n * b.dt.Bytes()
	inPlace := cfg.inPlace && cfg.soak == 0 && b.o.op == "allreduce"
	mode := "loop+call"
	if cfg.soak > 0 {
		mode = "loop"
	}
	if b.graph {
		mode = "graph"
	}
	if b.r.Rank == 0 {
		what := "time"
		if cfg.soak > 0 {
			what = "soak"
		}
		progress(cfg, "%s %s %s %s %s: start", what, b.o.name, dtypeName(b.dt), mode, human(bytes))
	}
	bs, err := b.buffers(ctx, n, inPlace)
	if err != nil {
		return err
	}
	defer bs.free() // after the graphs of this size are closed (deferred later, run first)
	if err := b.sync(); err != nil {
		return err
	}
	// The check (and the warm-up: the first call loads the kernel).
	if err := bs.call(); err != nil {
		return err
	}
	kernel := b.c.LastAlgorithm()
	check, err := b.check(bs)
	if err != nil {
		return err
	}
	// Every rank has read its result before any rank's next call can write into it.
	if err := b.sync(); err != nil {
		return err
	}
	if cfg.soak > 0 {
		return b.soak(ctx, bs, n, kernel, check)
	}
	for i := 0; i < cfg.warmup; i++ {
		if err := bs.call(); err != nil {
			return err
		}
	}
	res := func(m string, t time.Duration, calls int, host time.Duration) error {
		us := float64(t.Nanoseconds()) / 1e3
		algbw := float64(bytes) / t.Seconds() / 1e9
		g := float64(b.r.World)
		bus := algbw * (g - 1) / g
		if b.o.op == "allreduce" {
			bus *= 2
		}
		return emit(result{Impl: b.impl(kernel), Op: b.o.op, DType: dtypeName(b.dt), GPUs: b.r.World, Rank: b.r.Rank,
			Bytes: bytes, Mode: m, TimeUS: us, AlgBW: algbw, BusBW: bus, HostUS: float64(host.Nanoseconds()) / 1e3,
			Kernel: kernel, Calls: calls, InPlace: inPlace, Check: check})
	}
	if b.graph {
		calls := cfg.graphCalls
		if bytes > cfg.bigBytes {
			calls = cfg.graphBig
		}
		x, err := b.c.Capture(ctx, func() error {
			for i := 0; i < calls; i++ {
				if err := bs.call(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		defer x.Close()
		if err := x.Launch(b.s); err != nil { // warm-up replay
			return err
		}
		if err := b.sync(); err != nil {
			return err
		}
		var ts []time.Duration
		for rep := 0; rep < cfg.graphReps; rep++ {
			if err := b.e0.Record(b.s); err != nil {
				return err
			}
			if err := x.Launch(b.s); err != nil {
				return err
			}
			if err := b.e1.Record(b.s); err != nil {
				return err
			}
			if err := b.e1.Synchronize(); err != nil {
				return err
			}
			t, err := b.e0.Elapsed(b.e1)
			if err != nil {
				return err
			}
			ts = append(ts, t/time.Duration(calls))
		}
		if err := res("graph", median(ts), calls*cfg.graphReps, 0); err != nil {
			return err
		}
		return b.sync()
	}
	if cfg.modes["loop"] {
		if err := b.sync(); err != nil {
			return err
		}
		if err := b.e0.Record(b.s); err != nil {
			return err
		}
		h0 := time.Now()
		for i := 0; i < cfg.iters; i++ {
			if err := bs.call(); err != nil {
				return err
			}
		}
		host := time.Since(h0) / time.Duration(cfg.iters)
		if err := b.e1.Record(b.s); err != nil {
			return err
		}
		if err := b.e1.Synchronize(); err != nil {
			return err
		}
		t, err := b.e0.Elapsed(b.e1)
		if err != nil {
			return err
		}
		if err := res("loop", t/time.Duration(cfg.iters), cfg.iters, host); err != nil {
			return err
		}
	}
	if cfg.modes["call"] {
		if err := b.sync(); err != nil {
			return err
		}
		var ts []time.Duration
		for i := 0; i < cfg.iters; i++ {
			if err := b.e0.Record(b.s); err != nil {
				return err
			}
			if err := bs.call(); err != nil {
				return err
			}
			if err := b.e1.Record(b.s); err != nil {
				return err
			}
			if err := b.e1.Synchronize(); err != nil {
				return err
			}
			t, err := b.e0.Elapsed(b.e1)
			if err != nil {
				return err
			}
			ts = append(ts, t)
		}
		if err := res("call", median(ts), cfg.iters, 0); err != nil {
			return err
		}
	}
	return b.sync()
}

// soak makes the soak's calls at one size (after the first call and its check) and checks
// the result once they have all run.
func (b *bench) soak(ctx context.Context, bs *buffers, n int, kernel, first string) error {
	cfg := b.cfg
	bytes := n * b.dt.Bytes()
	calls := cfg.soak
	if bytes > cfg.soakMax {
		calls = cfg.soakBig
	}
	if err := b.sync(); err != nil {
		return err
	}
	t0 := time.Now()
	mode := "loop"
	if b.graph {
		mode = "graph"
		per := min(calls, 100)
		x, err := b.c.Capture(ctx, func() error {
			for i := 0; i < per; i++ {
				if err := bs.call(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		defer x.Close()
		reps := (calls + per - 1) / per
		calls = reps * per
		for rep := 0; rep < reps; rep++ {
			if err := x.Launch(b.s); err != nil {
				return err
			}
		}
	} else {
		for i := 0; i < calls; i++ {
			if err := bs.call(); err != nil {
				return err
			}
		}
	}
	if err := b.s.Synchronize(); err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	check, err := b.check(bs)
	if err != nil {
		return err
	}
	if first != "ok" {
		check = "before the soak: " + first + "; after: " + check
	}
	if err := emit(soakResult{Soak: true, Impl: b.impl(kernel), Op: b.o.op, DType: dtypeName(b.dt), GPUs: b.r.World,
		Rank: b.r.Rank, Bytes: bytes, Mode: mode, Calls: calls, Kernel: kernel, OK: check == "ok", Check: check, Secs: secs}); err != nil {
		return err
	}
	if b.r.Rank == 0 {
		progress(cfg, "soak %s %s %s %s: %d calls in %.3fs, %s", b.o.name, dtypeName(b.dt), mode, human(bytes), calls, secs, check)
	}
	return b.r.NVSHMEM.BarrierAll()
}

func median(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[len(ts)/2]
}

func human(b int) string {
	for _, u := range []struct {
		name string
		n    int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d %s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d B", b)
}
