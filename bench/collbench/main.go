// Command collbench times kgen's all-reduce algorithms on every rank of a multi-GPU program,
// with the method of scripts/bench/nccl_allreduce.py (check once, warm up, time each call
// between CUDA events on the communicator's stream, report the median). Start it with
// `kgen launch -n N -- collbench` or torchrun on GPUs (cuda-tagged build), or with
// `kgen launch -n N --backend emu` on the emulator. Every rank prints one JSON object per
// (algorithm, size); the slowest rank's median is the result (scripts/bench/join.py).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// result is one measurement, in the shape nccl_allreduce.py prints.
type result struct {
	Impl   string  `json:"impl"`
	Op     string  `json:"op"`
	DType  string  `json:"dtype"`
	GPUs   int     `json:"gpus"`
	Rank   int     `json:"rank"`
	Bytes  int     `json:"bytes"`
	TimeUS float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbps"`
	// HostUS is the host's time to issue one call (loop timing only): when it is close to
	// TimeUS, the host, not the GPU, sets the pace.
	HostUS float64 `json:"host_us,omitempty"`
}

// timing holds the flags that shape every measurement.
var timing struct {
	loop bool
	algs map[string]bool
}

// algorithm forces one all-reduce algorithm through the Comm's options.
type algorithm struct {
	name     string
	maxBytes int // the largest size it runs at
	opts     collectives.Options
}

func main() {
	log.SetFlags(0)
	minBytes := flag.Int("min-bytes", 4<<10, "smallest message")
	maxBytes := flag.Int("max-bytes", 256<<20, "largest message")
	iters := flag.Int("iters", 20, "timed iterations per size")
	warmup := flag.Int("warmup", 5, "warm-up iterations per size")
	blocks := flag.Int("blocks", 0, "MaxBlocks of the kernels (0: the default)")
	loop := flag.Bool("loop", false, "time the iterations back to back between one pair of events and report the mean (nccl-tests' method)")
	algs := flag.String("algs", "lamport,oneshot,twoshot,push,auto", "algorithms to time")
	cpuprofile := flag.String("cpuprofile", "", "write rank 0's CPU profile to this file (host-side cost)")
	flag.Parse()
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
	timing.loop = *loop
	timing.algs = map[string]bool{}
	for _, a := range strings.Split(*algs, ",") {
		timing.algs[strings.TrimSpace(a)] = true
	}
	err := jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error {
		return run(r, *minBytes, *maxBytes, *iters, *warmup, *blocks)
	})
	if err != nil {
		log.Fatalf("collbench: %v", err)
	}
}

func run(r *jit.Rank, minBytes, maxBytes, iters, warmup, blocks int) error {
	ctx := context.Background()
	huge := 1 << 40
	algs := []algorithm{
		{"lamport", 4 << 20, collectives.Options{DisableMulticast: true, LamportMaxBytes: 4 << 20, OneShotMaxBytes: huge}},
		{"oneshot", 64 << 20, collectives.Options{DisableMulticast: true, DisableLamport: true, OneShotMaxBytes: huge}},
		{"twoshot", huge, collectives.Options{DisableMulticast: true, DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: -1}},
		{"push", huge, collectives.Options{DisableMulticast: true, DisableLamport: true, OneShotMaxBytes: 1, PushMinBytes: 1}},
		{"auto", huge, collectives.Options{}},
	}
	for _, a := range algs {
		if !timing.algs[a.name] {
			continue
		}
		a.opts.MaxBlocks = blocks
		if err := runAlgorithm(ctx, r, a, minBytes, maxBytes, iters, warmup); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return nil
}

func runAlgorithm(ctx context.Context, r *jit.Rank, a algorithm, minBytes, maxBytes, iters, warmup int) error {
	s, err := r.Device.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	a.opts.Stream = s
	c, err := collectives.New(ctx, r, a.opts)
	if err != nil {
		return err
	}
	defer c.Close()
	e0, err := r.Device.NewEvent()
	if err != nil {
		return err
	}
	defer e0.Close()
	e1, err := r.Device.NewEvent()
	if err != nil {
		return err
	}
	defer e1.Close()
	enc := json.NewEncoder(os.Stdout)
	for bytes := minBytes; bytes <= maxBytes && bytes <= a.maxBytes; bytes *= 4 {
		n := bytes / 4
		buf, err := c.Alloc(dsl.F32, n)
		if err != nil {
			return err
		}
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(r.Rank + 1)
		}
		if err := buf.WriteF32(in); err != nil {
			return err
		}
		if err := c.AllReduce(ctx, buf, collectives.Sum); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		got, err := buf.ReadF32()
		if err != nil {
			return err
		}
		want := float32(r.World * (r.World + 1) / 2)
		for i, x := range got {
			if x != want {
				return fmt.Errorf("%d bytes: element %d = %v, want %v (%s)", bytes, i, x, want, c.LastAlgorithm())
			}
		}
		algo := c.LastAlgorithm()
		var ts []time.Duration
		var host time.Duration
		if timing.loop {
			for i := 0; i < warmup; i++ {
				if err := c.AllReduce(ctx, buf, collectives.Sum); err != nil {
					return err
				}
			}
			if err := e0.Record(s); err != nil {
				return err
			}
			h0 := time.Now()
			for i := 0; i < iters; i++ {
				if err := c.AllReduce(ctx, buf, collectives.Sum); err != nil {
					return err
				}
			}
			host = time.Since(h0) / time.Duration(iters)
			if err := e1.Record(s); err != nil {
				return err
			}
			if err := e1.Synchronize(); err != nil {
				return err
			}
			t, err := e0.Elapsed(e1)
			if err != nil {
				return err
			}
			ts = append(ts, t/time.Duration(iters))
		}
		for i := 0; i < warmup+iters && !timing.loop; i++ {
			if err := e0.Record(s); err != nil {
				return err
			}
			if err := c.AllReduce(ctx, buf, collectives.Sum); err != nil {
				return err
			}
			if err := e1.Record(s); err != nil {
				return err
			}
			if err := e1.Synchronize(); err != nil {
				return err
			}
			t, err := e0.Elapsed(e1)
			if err != nil {
				return err
			}
			if i >= warmup {
				ts = append(ts, t)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		med := ts[len(ts)/2]
		impl := "kgen/" + a.name
		if blocks := a.opts.MaxBlocks; blocks > 0 {
			impl += fmt.Sprintf("@%db", blocks)
		}
		if a.name == "auto" {
			impl = "kgen/auto:" + algo
		}
		if err := enc.Encode(result{Impl: impl, Op: "allreduce", DType: "float32", GPUs: r.World, Rank: r.Rank,
			Bytes: bytes, TimeUS: float64(med.Nanoseconds()) / 1e3, AlgBW: float64(bytes) / med.Seconds() / 1e9,
			HostUS: float64(host.Nanoseconds()) / 1e3}); err != nil {
			return err
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	return nil
}
