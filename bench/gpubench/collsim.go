package main

// gpubench collsim: the p2p collectives with N simulated ranks on ONE GPU. Each rank's
// buffers, signal pads, Lamport buffer and scratch are separate allocations on the device,
// the peer tables point at them, and each rank's launch goes on its own stream, so the N
// grids run at once and wait on each other as on N GPUs (a peer access is then a local one:
// this measures the kernels' instruction and synchronization cost, not NVLink). Every grid
// is at most -maxblocks blocks and N grids together fit in the GPU's SMs at one block each,
// so all are resident at once (checked before launching).
//
// It times each kernel as built now against the same kernel's PTX from another commit (-old:
// a folder laid out as golden/testdata, <kernel>/f32.sm_90.ptx, same parameters), checking
// both versions' results against a host reference before and after timing. Per case it
// prints a tab-separated line
//
//	collsim KERNEL RANKS BYTES BLOCKS NEW_US OLD_US NEW/OLD
//
// US is the median over -rounds rounds (new and old alternate) of the time per collective
// launch (every rank's), from an event before the round to the last stream's end event,
// divided by -reps.
//
// Built without the cuda tag it runs on the emulator with -ranks 1 only: the emulator runs
// one launch at a time, so ranks on concurrent streams that wait on each other deadlock
// (reported as such).

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// simFamilies are the kernels collsim runs (f32 sum); the multimem ones need multicast, which
// one GPU without a fabric cannot give (and the lent machines must never create).
var simFamilies = []kernels.Family{
	kernels.FamilyP2PAllReduce1Shot,
	kernels.FamilyP2PAllReduce2Shot,
	kernels.FamilyP2PAllReduceLamport,
	kernels.FamilyP2PReduceScatter,
}

func runCollsim(args []string) error {
	fs := flag.NewFlagSet("collsim", flag.ExitOnError)
	ranks := fs.String("ranks", "2,4", "comma-separated rank counts")
	sizes := fs.String("bytes", "65536,1048576,16777216", "comma-separated sizes: each rank's input bytes")
	reps := fs.Int("reps", 20, "collective launches per timed round")
	rounds := fs.Int("rounds", 5, "timed rounds per version (new and old alternate)")
	maxBlocks := fs.Int("maxblocks", 32, "the most blocks of one rank's grid")
	old := fs.String("old", "", "folder of the old PTX (<kernel>/f32.sm_90.ptx); empty: time only the current kernels")
	only := fs.String("only", "", "comma-separated families to run (default: all four)")
	fs.Parse(args)
	fams := simFamilies
	if *only != "" {
		fams = nil
		for _, name := range strings.Split(*only, ",") {
			f := kernels.Family(strings.TrimSpace(name))
			if !slices.Contains(simFamilies, f) {
				return fmt.Errorf("-only %s: want some of %v", name, simFamilies)
			}
			fams = append(fams, f)
		}
	}
	rs, err := intList(*ranks)
	if err != nil {
		return fmt.Errorf("-ranks: %w", err)
	}
	bs, err := intList(*sizes)
	if err != nil {
		return fmt.Errorf("-bytes: %w", err)
	}
	for _, r := range rs {
		if r < 1 || r > kernels.CollMaxGPUs {
			return fmt.Errorf("-ranks %d: want 1..%d", r, kernels.CollMaxGPUs)
		}
	}
	if *reps < 1 || *rounds < 1 || *maxBlocks < 1 || *maxBlocks > kernels.CollMaxBlocks {
		return fmt.Errorf("-reps %d, -rounds %d, -maxblocks %d: want positive, maxblocks <= %d", *reps, *rounds, *maxBlocks, kernels.CollMaxBlocks)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	info := d.Info()
	fmt.Printf("# device: %s (%s, %d SMs); f32 sum; median of %d rounds of %d launches\n", info.Name, info.Arch, info.Multiproc, *rounds, *reps)
	for _, f := range fams {
		for _, n := range rs {
			for _, b := range bs {
				if err := collsimCase(d, f, n, b, *maxBlocks, *reps, *rounds, *old); err != nil {
					return fmt.Errorf("%s ranks=%d bytes=%d: %w", f, n, b, err)
				}
			}
		}
	}
	return nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// simFn is one version of a kernel, loaded.
type simFn struct {
	name string
	fn   *jit.Function
	done func() error
}

// loadSim loads the current build of id and, when dir is set, the old PTX of the same entry
// (the same declared parameters, so the same host twin launches both).
func loadSim(d *jit.Device, id kernels.ID, dir string) ([]simFn, error) {
	spec, err := kernels.Find(id)
	if err != nil {
		return nil, err
	}
	b, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: id.DType})
	if err != nil {
		return nil, err
	}
	params := map[string][]jit.ParamInfo{b.Entry: jit.ParamInfos(b.Params)}
	srcs := []jit.Source{{Module: b.Module, Params: params}}
	names := []string{"new"}
	if dir != "" {
		path := filepath.Join(dir, spec.Name, id.DType.String()+".sm_90.ptx")
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := ptx.Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		srcs = append(srcs, jit.Source{Module: m, PTX: text, Params: params, Name: b.Entry + "_old"})
		names = append(names, "old")
	}
	var out []simFn
	for i, src := range srcs {
		m, err := d.Load(src)
		if err != nil {
			return out, err
		}
		fn, err := m.Function(b.Entry)
		if err != nil {
			return out, errors.Join(err, m.Close())
		}
		out = append(out, simFn{names[i], fn, m.Close})
	}
	return out, nil
}

// simRank is one simulated rank's memory and stream.
type simRank struct {
	in, out, scratch, lbuf *jit.Buffer[float32]
	pads                   *jit.Buffer[uint32]
	ins, outs, padT, scrT  *jit.Buffer[uint64]
	lbufT                  *jit.Buffer[uint64]
	s                      *jit.Stream
}

// simState is one case's ranks and the host's epochs.
type simState struct {
	d             *jit.Device
	f             kernels.Family
	ranks         []*simRank
	n, m          int // elements of each rank's input; reduce-scatter's part
	capacity      int // Lamport region
	blocks        int
	epoch, lepoch uint32
	nprev         int
	host          [][]float32 // every rank's input
	free          []func() error
}

func alloc[T jit.Elem](st *simState, n int) (*jit.Buffer[T], error) {
	b, err := jit.Alloc[T](st.d, max(n, 1))
	if err == nil {
		st.free = append(st.free, b.Free)
	}
	return b, err
}

// table allocates a rank's peer table holding addrs (CollMaxGPUs entries).
func table(st *simState, addrs []uint64) (*jit.Buffer[uint64], error) {
	t, err := alloc[uint64](st, kernels.CollMaxGPUs)
	if err != nil {
		return nil, err
	}
	full := make([]uint64, kernels.CollMaxGPUs)
	copy(full, addrs)
	return t, t.CopyFromHost(full)
}

func newSim(d *jit.Device, f kernels.Family, nranks, n, blocks int) (*simState, error) {
	st := &simState{d: d, f: f, n: n, m: n / nranks, blocks: blocks, capacity: (n + 3) / 4 * 4}
	ok := false
	defer func() {
		if !ok {
			st.close()
		}
	}()
	words := kernels.LamportSlots * kernels.CollMaxGPUs * st.capacity
	var negZero []float32 // the Lamport buffers' initial -0.0
	if f == kernels.FamilyP2PAllReduceLamport {
		negZero = make([]float32, words)
		for i := range negZero {
			negZero[i] = float32(math.Copysign(0, -1))
		}
	}
	for r := 0; r < nranks; r++ {
		rk := &simRank{}
		var err error
		if rk.in, err = alloc[float32](st, n); err != nil {
			return nil, err
		}
		if rk.out, err = alloc[float32](st, n); err != nil {
			return nil, err
		}
		if rk.pads, err = alloc[uint32](st, kernels.PadWords); err != nil {
			return nil, err
		}
		if err := rk.pads.CopyFromHost(make([]uint32, kernels.PadWords)); err != nil {
			return nil, err
		}
		switch f {
		case kernels.FamilyP2PReduceScatter:
			if rk.scratch, err = alloc[float32](st, st.m*kernels.CollMaxGPUs); err != nil {
				return nil, err
			}
		case kernels.FamilyP2PAllReduceLamport:
			if rk.lbuf, err = alloc[float32](st, words); err != nil {
				return nil, err
			}
			if err := rk.lbuf.CopyFromHost(negZero); err != nil {
				return nil, err
			}
		}
		if rk.s, err = d.NewStream(); err != nil {
			return nil, err
		}
		st.free = append(st.free, rk.s.Close)
		st.ranks = append(st.ranks, rk)
	}
	addrs := func(b func(*simRank) jit.DevicePtr) []uint64 {
		var a []uint64
		for _, rk := range st.ranks {
			a = append(a, uint64(b(rk)))
		}
		return a
	}
	for _, rk := range st.ranks {
		var err error
		if rk.ins, err = table(st, addrs(func(x *simRank) jit.DevicePtr { return x.in.DevPtr() })); err != nil {
			return nil, err
		}
		if rk.outs, err = table(st, addrs(func(x *simRank) jit.DevicePtr { return x.out.DevPtr() })); err != nil {
			return nil, err
		}
		if rk.padT, err = table(st, addrs(func(x *simRank) jit.DevicePtr { return x.pads.DevPtr() })); err != nil {
			return nil, err
		}
		if rk.scratch != nil {
			if rk.scrT, err = table(st, addrs(func(x *simRank) jit.DevicePtr { return x.scratch.DevPtr() })); err != nil {
				return nil, err
			}
		}
		if rk.lbuf != nil {
			if rk.lbufT, err = table(st, addrs(func(x *simRank) jit.DevicePtr { return x.lbuf.DevPtr() })); err != nil {
				return nil, err
			}
		}
	}
	// Small integers: every sum is exact in f32.
	for r, rk := range st.ranks {
		h := make([]float32, n)
		for i := range h {
			h[i] = float32((i*7+r*13)%61 - 30)
		}
		if err := rk.in.CopyFromHost(h); err != nil {
			return nil, err
		}
		st.host = append(st.host, h)
	}
	ok = true
	return st, nil
}

func (st *simState) close() {
	for i := len(st.free) - 1; i >= 0; i-- {
		st.free[i]()
	}
}

// launchAll enqueues one collective launch of fn: every rank's grid on its own stream.
func (st *simState) launchAll(fn *jit.Function) error {
	g := uint32(len(st.ranks))
	any32 := func(b *jit.Buffer[float32]) jit.AnyPtr { return jit.AnyOf[float32](b) }
	any64 := func(b *jit.Buffer[uint64]) jit.AnyPtr { return jit.AnyOf[uint64](b) }
	for r, rk := range st.ranks {
		var args any
		switch st.f {
		case kernels.FamilyP2PAllReduce1Shot:
			args = launch.P2POneShot{Ins: any64(rk.ins), Out: any32(rk.out), Pads: any64(rk.padT), Rank: uint32(r), NGPUs: g, N: uint32(st.n), Epoch: st.epoch}
		case kernels.FamilyP2PAllReduce2Shot:
			args = launch.P2PTwoShot{Ins: any64(rk.ins), Outs: any64(rk.outs), Pads: any64(rk.padT), Rank: uint32(r), NGPUs: g, N: uint32(st.n), Epoch: st.epoch}
		case kernels.FamilyP2PAllReduceLamport:
			args = launch.P2PLamport{In: any32(rk.in), Out: any32(rk.out), Lbufs: any64(rk.lbufT), Cap: uint32(st.capacity), Nclear: uint32(st.nprev),
				Rank: uint32(r), NGPUs: g, N: uint32(st.n), Epoch: st.lepoch}
		case kernels.FamilyP2PReduceScatter:
			args = launch.P2PReduceScatter{In: any32(rk.in), Out: any32(rk.out), Scratch: any64(rk.scrT), Pads: any64(rk.padT), Rank: uint32(r), NGPUs: g, N: uint32(st.m), Epoch: st.epoch}
		default:
			return fmt.Errorf("collsim: no launch for %s", st.f)
		}
		cfg := jit.LaunchConfig{Grid: jit.D1(st.blocks), Block: jit.D1(kernels.CollThreads), Stream: rk.s}
		if err := fn.LaunchArgs(cfg, args); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	if st.f == kernels.FamilyP2PAllReduceLamport {
		st.lepoch = kernels.NextLamportEpoch(st.lepoch)
		st.nprev = st.n
	} else {
		b, _, _ := kernels.CollBarriers(st.f)
		st.epoch += uint32(b)
	}
	return nil
}

func (st *simState) sync() error {
	for _, rk := range st.ranks {
		if err := rk.s.Synchronize(); err != nil {
			return err
		}
	}
	return nil
}

// check compares every rank's output with the host reference.
func (st *simState) check(what string) error {
	got := make([]float32, st.n)
	for r, rk := range st.ranks {
		cnt, base := st.n, 0
		if st.f == kernels.FamilyP2PReduceScatter {
			cnt, base = st.m, r*st.m
		}
		if err := rk.out.CopyToHost(got); err != nil {
			return err
		}
		for i := 0; i < cnt; i++ {
			var want float32
			for _, h := range st.host {
				want += h[base+i]
			}
			if got[i] != want {
				return fmt.Errorf("%s: rank %d out[%d] = %v, want %v", what, r, i, got[i], want)
			}
		}
	}
	return nil
}

// round times reps collective launches of fn: from an event recorded on rank 0's stream
// (the device idle) to the latest of the ranks' end events, per launch.
func (st *simState) round(fn *jit.Function, reps int) (time.Duration, error) {
	if err := st.sync(); err != nil {
		return 0, err
	}
	e0, err := st.d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e0.Close()
	ends := make([]*jit.Event, len(st.ranks))
	for i := range ends {
		if ends[i], err = st.d.NewEvent(); err != nil {
			return 0, err
		}
		defer ends[i].Close()
	}
	if err := e0.Record(st.ranks[0].s); err != nil {
		return 0, err
	}
	for i := 0; i < reps; i++ {
		if err := st.launchAll(fn); err != nil {
			return 0, err
		}
	}
	var worst time.Duration
	for r, rk := range st.ranks {
		if err := ends[r].Record(rk.s); err != nil {
			return 0, err
		}
	}
	for _, e := range ends {
		if err := e.Synchronize(); err != nil {
			return 0, err
		}
		t, err := e0.Elapsed(e)
		if err != nil {
			return 0, err
		}
		worst = max(worst, t)
	}
	return worst / time.Duration(reps), nil
}

func collsimCase(d *jit.Device, f kernels.Family, nranks, nbytes, maxBlocks, reps, rounds int, old string) error {
	n := nbytes / 4
	if n < nranks || n%4 != 0 {
		return fmt.Errorf("-bytes %d: want a multiple of 16 bytes, at least 4 per rank", nbytes)
	}
	// The collectives' host grid rule, capped: one block per 16 vectors per thread.
	vectors := n / 4
	blocks := min(maxBlocks, max(1, (vectors+kernels.CollThreads*16-1)/(kernels.CollThreads*16)))
	if sms := d.Info().Multiproc; sms > 0 && nranks*blocks > sms {
		return fmt.Errorf("%d ranks x %d blocks exceed the %d SMs: the grids might not all be resident", nranks, blocks, sms)
	}
	fns, err := loadSim(d, kernels.ID{Family: f, Op: dsl.Sum, DType: dsl.F32}, old)
	defer func() {
		for _, fn := range fns {
			fn.done()
		}
	}()
	if err != nil {
		return err
	}
	st, err := newSim(d, f, nranks, n, blocks)
	if err != nil {
		return err
	}
	defer st.close()
	times := make([][]time.Duration, len(fns))
	for _, fn := range fns {
		// Check, then warm up.
		if err := st.launchAll(fn.fn); err != nil {
			return err
		}
		if err := st.sync(); err != nil {
			return err
		}
		if err := st.check(fn.name + " before timing"); err != nil {
			return err
		}
		for w := 0; w < 3; w++ {
			if err := st.launchAll(fn.fn); err != nil {
				return err
			}
		}
	}
	for r := 0; r < rounds; r++ {
		for i, fn := range fns {
			t, err := st.round(fn.fn, reps)
			if err != nil {
				return fmt.Errorf("%s: %w", fn.name, err)
			}
			times[i] = append(times[i], t)
			if err := st.check(fn.name + " after timing"); err != nil {
				return err
			}
		}
	}
	us := func(ts []time.Duration) float64 {
		sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
		return float64(ts[len(ts)/2].Nanoseconds()) / 1e3
	}
	line := fmt.Sprintf("collsim\t%s_sum\t%d\t%d\t%d\t%.1f", f, nranks, nbytes, blocks, us(times[0]))
	if len(fns) > 1 {
		line += fmt.Sprintf("\t%.1f\t%.3f", us(times[1]), us(times[0])/us(times[1]))
	}
	fmt.Println(line)
	return nil
}
