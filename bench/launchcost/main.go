// Command launchcost measures the host time of one kernel launch through each of kgen's
// launch paths on one device, with the GPU time of the same series beside it (so a series
// the GPU held back shows as such): jit's plain and co-resident launches, and graphs of 1
// and 8 of each replayed; with the cuda tag also the driver's floors, called from C with no
// jit in between (cuLaunchKernel, cuLaunchCooperativeKernel, cuLaunchKernelEx with the
// cooperative attribute, the occupancy query, cuGraphLaunch of a 1-node graph with and
// without cuGraphUpload). The kernel adds 1 to a counter; every series checks the count.
//
//	launchcost [-n 2000]
//
// It prints one TIMING line per series: host us per launch, GPU us per launch.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

func main() {
	n := flag.Int("n", 2000, "launches (or replays) per series")
	flag.Parse()
	err := jit.RunRanks(jit.RanksOptions{World: 1}, func(r *jit.Rank) error { return run(r.Device, *n) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "launchcost:", err)
		os.Exit(1)
	}
}

// tick adds 1 to p[0] from thread 0 of block 0.
func tick() (*ptx.Module, error) {
	k := dsl.New("tick", dsl.WithTarget(ptx.SM80))
	p := k.PtrParam("p", dsl.U32)
	k.If(k.GlobalThreadIdx(dsl.X).Eq(uint32(0)), func() { k.Store(p.At(0), k.Load(p.At(0)).Add(uint32(1))) })
	return k.Build()
}

// series is one measured loop: host time from the first call to the last return, GPU time
// between events recorded before and after on the same stream.
type series struct {
	name       string
	calls      int // launches per loop iteration
	host, gpu  time.Duration
	iterations int
}

func (s series) print() {
	per := float64(s.iterations * s.calls)
	fmt.Printf("TIMING launchcost %-44s host %7.3f us/launch  gpu %7.3f us/launch  (%d x %d launches, count checked)\n",
		s.name, us(s.host)/per, us(s.gpu)/per, s.iterations, s.calls)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func run(d *jit.Device, n int) error {
	inf := d.Info()
	fmt.Printf("device %s (%s, %d SMs), driver %d, backend %s\n", inf.Name, inf.Arch, inf.Multiproc, inf.DriverVersion, inf.Backend)
	mod, err := tick()
	if err != nil {
		return err
	}
	m, err := d.Load(jit.Source{Module: mod})
	if err != nil {
		return err
	}
	defer m.Close()
	fn, err := m.Function("tick")
	if err != nil {
		return err
	}
	ctr, err := jit.Alloc[uint32](d, 1)
	if err != nil {
		return err
	}
	defer ctr.Free()
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	ev0, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer ev0.Close()
	ev1, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer ev1.Close()
	var want uint32
	if err := ctr.CopyFromHost([]uint32{0}); err != nil {
		return err
	}
	// timed runs iterations of body (calls launches each) between two events and checks the
	// counter afterwards.
	timed := func(name string, calls, iterations int, body func() error) error {
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := ev0.Record(s); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < iterations; i++ {
			if err := body(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		host := time.Since(t0)
		if err := ev1.Record(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		gpu, err := ev0.Elapsed(ev1)
		if err != nil {
			return err
		}
		want += uint32(calls * iterations)
		got := []uint32{0}
		if err := ctr.CopyToHost(got); err != nil {
			return err
		}
		if got[0] != want {
			return fmt.Errorf("%s: counter %d after the series, want %d", name, got[0], want)
		}
		series{name: name, calls: calls, iterations: iterations, host: host, gpu: gpu}.print()
		return nil
	}
	plain := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(256), Stream: s}
	co := plain
	co.CoResident = true
	for _, c := range []struct {
		name string
		cfg  jit.LaunchConfig
	}{{"jit Launch plain", plain}, {"jit Launch CoResident (cooperative)", co}} {
		launch := func() error { return fn.Launch(c.cfg, ctr) }
		if err := timed(c.name+" warm-up", 1, 1, launch); err != nil {
			return err
		}
		if err := timed(c.name, 1, n, launch); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		cfg  jit.LaunchConfig
	}{{"plain", plain}, {"CoResident", co}} {
		for _, per := range []int{1, 8} {
			if err := s.BeginCapture(); err != nil {
				return err
			}
			for i := 0; i < per; i++ {
				if err := fn.Launch(c.cfg, ctr); err != nil {
					return err
				}
			}
			g, err := s.EndCapture()
			if err != nil {
				return err
			}
			t0 := time.Now()
			x, err := g.Instantiate()
			if err != nil {
				return err
			}
			fmt.Printf("TIMING launchcost graph of %d %s: instantiate (+ upload) %.1f us\n", per, c.name, us(time.Since(t0)))
			name := fmt.Sprintf("graph of %d %s", per, c.name)
			replay := func() error { return x.Launch(s) }
			if err := timed(name+", first replay", per, 1, replay); err != nil {
				return err
			}
			if err := timed(name+", replayed", per, n, replay); err != nil {
				return err
			}
			x.Close()
			g.Close()
		}
	}
	if inf.Backend != jit.GPU {
		fmt.Println("driver floors: not measured (the emulator backend)")
		return nil
	}
	return floors(inf.Ordinal, []byte(mod.String()), n)
}
