package dsl_test

import (
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestFrameWalkPositions builds every library kernel for every dtype with positions from
// runtime.Callers and then twice from the frame-pointer walk (the second time from what
// the first learned): the PTX, .loc lines included, must be the same.
func TestFrameWalkPositions(t *testing.T) {
	for _, s := range kernels.All() {
		for _, dt := range s.DTypes {
			c := kernels.Config{Target: ptx.SM90, DType: dt}
			if len(s.Targets) > 0 && !hasTarget(s.Targets, ptx.SM90) {
				c.Target = s.Targets[0]
			}
			build := func(exact bool) string {
				dsl.SetExactCallers(exact)
				defer dsl.SetExactCallers(false)
				m, err := s.Build(c)
				if err != nil {
					t.Fatalf("%s %s: %v", s.Name, dt, err)
				}
				return m.String()
			}
			want := build(true)
			for i := 0; i < 2; i++ {
				if got := build(false); got != want {
					t.Fatalf("%s %s: the frame walk gave other positions than runtime.Callers (build %d)", s.Name, dt, i+1)
				}
			}
		}
	}
}

func hasTarget(ts []ptx.Target, t ptx.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// TestFrameWalkWhileStacksGrow builds every library kernel variant eight times over from
// new goroutines, each round first descending one frame further, so that goroutine stacks grow at
// every point of a build, the frame walk included, while freed stacks are reused. A walk that
// made a Go call with a stack check could have its stack moved under it and then followed
// freed memory: under -race the walk faulted here before it was made nosplit.
func TestFrameWalkWhileStacksGrow(t *testing.T) {
	type job struct {
		s *kernels.Spec
		c kernels.Config
	}
	var jobs []job
	for _, s := range kernels.All() {
		for _, dt := range s.DTypes {
			jobs = append(jobs, job{s, kernels.Config{Target: s.Targets[len(s.Targets)-1], DType: dt}})
		}
	}
	var wg sync.WaitGroup
	const reps = 8
	errs := make(chan error, reps*len(jobs))
	for rep := range reps {
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- descend(rep, func() error { _, err := j.s.Build(j.c); return err })
			}()
		}
		if rep%2 == 1 {
			wg.Wait() // let the finished goroutines' stacks be reused
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// descend calls f from depth frames further down (a few words of stack each).
//
//go:noinline
func descend(depth int, f func() error) error {
	if depth == 0 {
		return f()
	}
	return descend(depth-1, f)
}
