package emu

import (
	"errors"
	"strings"
	"testing"
)

// startRing starts the ring kernel on each GPU as a kernel of its own (System.Start), GPU g
// with a block of blocks[g] threads, in the order given.
func startRing(t *testing.T, s *System, v ringVariant, n int, blocks []int, order []int, opt Options) ([]*Running, []uint64) {
	t.Helper()
	ngpu := len(blocks)
	m := asm(t, ringModule(t, v))
	data, err := s.MallocSymmetric(4 * n)
	must(t, err)
	flag, err := s.MallocSymmetric(4)
	must(t, err)
	outs := make([]uint64, ngpu)
	for g := range outs {
		outs[g] = mustMalloc(t, s, g, 4*n)
	}
	runs := make([]*Running, ngpu)
	for _, g := range order {
		next := (g + 1) % ngpu
		r, err := s.Start(Launch{Module: m, Entry: "ring", GPUs: []int{g}, Grid: D1(1), Block: D1(blocks[g]), Options: opt,
			Args: []any{data.On(g), data.On(next), flag.On(g), flag.On(next), outs[g], uint32(g), uint32(n)}})
		must(t, err)
		runs[g] = r
		// Let it run alone for a while: it waits for its predecessor's kernel, not started yet.
		if pr := s.Run(5000); pr.InFlight == 0 {
			t.Fatalf("GPU %d's kernel finished before the GPU it waits for started", g)
		}
	}
	return runs, outs
}

// runAll runs the kernels in flight until they finish or stall.
func runAll(s *System) (fin []*Running, stalled bool) {
	for s.InFlight() > 0 {
		pr := s.Run(1 << 16)
		fin = append(fin, pr.Finished...)
		if pr.Stalled {
			return fin, true
		}
	}
	return fin, false
}

// Kernels of different GPUs and shapes started one by one run at once: each waits for a
// flag that the next-started one sets.
func TestStartConcurrentKernels(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 3} {
		for _, weak := range []bool{false, true} {
			s := newSys(t, 3)
			n := 100
			runs, outs := startRing(t, s, ringCorrect, n, []int{128, 64, 32}, []int{2, 1, 0}, Options{Seed: seed, Weak: weak})
			if _, stalled := runAll(s); stalled {
				t.Fatalf("seed %d weak %v: stalled", seed, weak)
			}
			for _, r := range runs {
				if !r.Done() || r.Err() != nil {
					t.Fatalf("seed %d: %v", seed, r.Err())
				}
			}
			for g := 0; g < 3; g++ {
				prev := (g + 2) % 3
				got := readU32(t, s, outs[g], n)
				for i, v := range got {
					if v != uint32(prev*1000+i) {
						t.Fatalf("seed %d weak %v GPU %d [%d] = %d, want %d", seed, weak, g, i, v, prev*1000+i)
					}
				}
			}
		}
	}
}

// A missing fence between two kernels running at once on different GPUs is reported, as
// within one launch.
func TestStartMissingFenceAcrossKernels(t *testing.T) {
	found := false
	for seed := int64(1); seed <= 8 && !found; seed++ {
		s := newSys(t, 2)
		runs, _ := startRing(t, s, ringNoFence, 200, []int{128, 64}, []int{1, 0}, Options{Seed: seed, Weak: true, MaxDelay: 50000})
		runAll(s)
		for _, r := range runs {
			var e *Error
			if errors.As(r.Err(), &e) && e.Kind == KindMissingFence {
				found = true
				t.Logf("seed %d: %v", seed, e)
				if e.Kernel != "ring" || len(e.Related) == 0 || e.Related[0].GPU == e.GPU {
					t.Fatalf("report: %v (related %v)", e, e.Related)
				}
			}
		}
		s.Abort("")
	}
	if !found {
		t.Fatal("no missing-fence report between kernels running at once in 8 seeds")
	}
}

// Kernels that wait for work nobody starts stall; Abort reports them (kernels, GPUs, Go
// lines) instead of running forever.
func TestStartStallAndAbort(t *testing.T) {
	s := newSys(t, 3)
	runs, _ := startRing(t, s, ringCorrect, 10, []int{32, 32, 32}, []int{0, 1}, Options{StepBudget: 20000})
	_, stalled := runAll(s)
	if !stalled || s.InFlight() != 1 || !runs[1].Done() || runs[1].Err() != nil {
		t.Fatalf("stalled %v, %d in flight", stalled, s.InFlight())
	}
	ended, err := s.Abort("GPU 2 never started its kernel")
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindNoProgress || len(ended) != 1 {
		t.Fatalf("Abort: %v, %d ended", err, len(ended))
	}
	for _, want := range []string{"ring on GPU(s) 0", "GPU 2 never started", "multigpu_test.go:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("report lacks %q:\n%v", want, err)
		}
	}
	if runs[0].Err() != err || s.InFlight() != 0 {
		t.Fatalf("kernel not ended by Abort: %v", runs[0].Err())
	}
	// A Launch after the engine is idle runs as before.
	if _, err := s.Start(Launch{}); err == nil {
		t.Fatal("Start without a module succeeded")
	}
}
