package kernels

import (
	"sync"
	"testing"
)

// TestConcurrentBuilds builds every library kernel variant from several goroutines at once,
// each variant twice: building must be safe concurrently (run with -race) and give the same
// PTX as a build alone.
func TestConcurrentBuilds(t *testing.T) {
	type job struct {
		s *Spec
		c Config
	}
	var jobs []job
	for _, s := range All() {
		for _, dt := range s.DTypes {
			jobs = append(jobs, job{s, Config{Target: s.Targets[len(s.Targets)-1], DType: dt}})
		}
	}
	out := make([][2]string, len(jobs))
	var wg sync.WaitGroup
	for rep := 0; rep < 2; rep++ {
		for i, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := j.s.Build(j.c)
				if err != nil {
					t.Errorf("%s %v: %v", j.s.Name, j.c, err)
					return
				}
				out[i][rep] = m.String()
			}()
		}
	}
	wg.Wait()
	for i, j := range jobs {
		if out[i][0] != out[i][1] {
			t.Errorf("%s %v: two concurrent builds gave different PTX", j.s.Name, j.c)
		}
	}
}
