// Command hostpath measures kgen's host path on one GPU (or, without the cuda tag, on the
// emulator): the load of a kernel calling 5 NVSHMEM functions with an empty and a warm
// cache, the cold link of the 169-function NVSHMEM acceptance module, each through the
// devlib PTX (compiled by the JIT linker at every cold link) and through per-function
// relocatable objects (compiled once, cached by nvshmem/devlib), and the host time per
// launch replayed from a CUDA graph against direct launches.
//
//	hostpath -prepare DIR   no GPU: builds the device libraries into DIR (LLVM 19, ptxas)
//	hostpath -devlib DIR    on the GPU (1 PE): measures, checks results, prints TIMING lines
//	hostpath -graph-only    graph replay only (any backend)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/nvshmem/gputest"
	"github.com/kgen-dev/kgen/ptx"
)

func main() {
	prepare := flag.String("prepare", "", "build the device libraries into this folder (no GPU)")
	dir := flag.String("devlib", "", "folder -prepare wrote")
	graphOnly := flag.Bool("graph-only", false, "measure graph replay only")
	replays := flag.Int("replays", 1000, "graph replays")
	flag.Parse()
	var err error
	switch {
	case *prepare != "":
		err = prepareDir(*prepare)
	case *graphOnly:
		err = jit.RunRanks(jit.RanksOptions{}, func(r *jit.Rank) error { return graphBench(r.Device, *replays) })
	case *dir != "":
		var cacheDir string
		if cacheDir, err = os.MkdirTemp("", "hostpath-cache-"); err == nil {
			defer os.RemoveAll(cacheDir)
			opts := jit.RanksOptions{NVSHMEM: true, Open: []jit.Option{jit.WithCache(jit.NewCache(cacheDir))}}
			err = jit.RunRanks(opts, func(r *jit.Rank) error { return measure(r, *dir, *replays) })
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostpath:", err)
		os.Exit(1)
	}
}

// five: every thread of block 0 reads my_pe and n_pes, puts n floats to the next PE
// (nvshmemx_float_put_block), thread 0 stores 1 into flag on the next PE (nvshmem_int_p),
// then nvshmem_quiet: five NVSHMEM functions.
func five() (*ptx.Module, error) {
	k := dsl.New("five_calls", dsl.WithTarget(ptx.SM90))
	dst := k.PtrParam("dst", dsl.F32)
	src := k.PtrParam("src", dsl.F32)
	flag := k.PtrParam("flag", dsl.I32)
	n := k.Param("n", dsl.U32)
	next := nvshmem.MyPE(k).Add(1).Rem(nvshmem.NPEs(k))
	nvshmem.Put(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), next)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() { nvshmem.P(k, flag.At(0), int32(1), next) })
	nvshmem.Quiet(k)
	return k.Build()
}

func calls(m *ptx.Module) []string {
	c := jit.NVSHMEMCalls(m)
	sort.Strings(c)
	return c
}

func prepareDir(dir string) error {
	ctx := context.Background()
	l, err := devlib.Open("")
	if err != nil {
		return err
	}
	l.Log = os.Stderr
	fm, err := five()
	if err != nil {
		return err
	}
	am, err := gputest.Module(ptx.SM90)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		m    *ptx.Module
	}{{"five", fm}, {"accept", am}} {
		funcs := calls(c.m)
		fmt.Printf("%s: %d NVSHMEM functions\n", c.name, len(funcs))
		r, err := l.Build(ctx, ptx.SM90, funcs)
		if err != nil {
			return err
		}
		start := time.Now()
		set, err := l.BuildEach(ctx, ptx.SM90, funcs, devlib.EachOptions{Objects: true, Progress: func(done, total int, u *devlib.Unit) {
			if done%20 == 0 || done == total {
				fmt.Printf("  [%d/%d] %s\n", done, total, u.Func)
			}
		}})
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d units (%d built) in %s\n", c.name, len(set.Units), set.Misses, time.Since(start).Round(time.Millisecond))
		sub := filepath.Join(dir, c.name)
		if err := os.MkdirAll(filepath.Join(sub, "objects"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "devlib.ptx"), r.PTX, 0o644); err != nil {
			return err
		}
		for _, u := range set.Units {
			if err := os.WriteFile(filepath.Join(sub, "objects", u.Func+".o"), u.Object, 0o644); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "version"), []byte(l.Version+"\n"), 0o644)
}

// readLib reads one prepared library: "ptx" (devlib PTX) or "objects".
func readLib(dir, name, kind, version, archive string) (*jit.DevLib, error) {
	dl := &jit.DevLib{Version: version, Archive: archive}
	sub := filepath.Join(dir, name)
	if kind == "ptx" {
		b, err := os.ReadFile(filepath.Join(sub, "devlib.ptx"))
		dl.PTX = b
		return dl, err
	}
	es, err := os.ReadDir(filepath.Join(sub, "objects"))
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(sub, "objects", e.Name()))
		if err != nil {
			return nil, err
		}
		dl.Objects = append(dl.Objects, b)
	}
	return dl, nil
}

func archivePath(sh *jit.NVSHMEM) (string, error) {
	if p := os.Getenv("KGEN_NVSHMEM_DEVICE_ARCHIVE"); p != "" {
		return p, nil
	}
	p := filepath.Join(filepath.Dir(sh.LibPath()), "libnvshmem_device.a")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("libnvshmem_device.a beside %s: %w", sh.LibPath(), err)
	}
	return p, nil
}

func measure(r *jit.Rank, dir string, replays int) error {
	d := r.Device
	vb, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return err
	}
	version := strings.TrimSpace(string(vb))
	archive := ""
	if d.Info().Backend == jit.GPU {
		if archive, err = archivePath(r.NVSHMEM); err != nil {
			return err
		}
	}
	fmt.Printf("device %s (%s), NVSHMEM %s (%s), devlib built for %s\n", d.Info().Name, d.Info().Arch, r.NVSHMEM.Version(), r.NVSHMEM.LibPath(), version)
	fm, err := five()
	if err != nil {
		return err
	}
	am, err := gputest.Module(ptx.SM90)
	if err != nil {
		return err
	}
	// Graph replay first (cheapest), then the loads; a failing step is reported and the
	// others still run.
	var errs []error
	step := func(name string, f func() error) {
		if err := f(); err != nil {
			fmt.Printf("FAIL %s: %v\n", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	step("graph", func() error { return graphBench(d, replays) })
	for _, kind := range []string{"objects", "ptx"} {
		step("five "+kind, func() error {
			dl, err := readLib(dir, "five", kind, version, archive)
			if err != nil {
				return err
			}
			if err := d.Cache().Clear(); err != nil {
				return err
			}
			for _, round := range []string{"cold", "warm"} {
				t0 := time.Now()
				m, err := d.Load(jit.Source{Module: fm, DevLib: dl})
				if err != nil {
					return fmt.Errorf("five (%s, %s): %w", kind, round, err)
				}
				took := time.Since(t0)
				st := m.Stats()
				fmt.Printf("TIMING five_calls load %s %s: %.2f ms (link %.2f ms, load %.2f ms, hit %v, cubin %d bytes)\n",
					kind, round, ms(took), ms(st.Link), ms(st.Load), st.CacheHit, st.CubinLen)
				if err := runFive(d, m); err != nil {
					return fmt.Errorf("five (%s, %s): %w", kind, round, err)
				}
				m.Close()
			}
			return nil
		})
	}
	fmt.Println("startup:", d.Startup())
	for _, kind := range []string{"objects", "ptx"} {
		if kind == "ptx" && os.Getenv("HOSTPATH_SKIP_PTX_ACCEPT") != "" {
			continue
		}
		step("accept "+kind, func() error {
			dl, err := readLib(dir, "accept", kind, version, archive)
			if err != nil {
				return err
			}
			if err := d.Cache().Clear(); err != nil {
				return err
			}
			t0 := time.Now()
			m, err := d.Load(jit.Source{Module: am, DevLib: dl})
			if err != nil {
				return fmt.Errorf("accept (%s): %w", kind, err)
			}
			st := m.Stats()
			fmt.Printf("TIMING accept(%d functions) load %s cold: %.0f ms (link %.0f ms, load %.2f ms, cubin %d bytes)\n",
				len(calls(am)), kind, ms(time.Since(t0)), ms(st.Link), ms(st.Load), st.CubinLen)
			m.Close()
			return nil
		})
	}
	return errors.Join(errs...)
}

func runFive(d *jit.Device, m *jit.Module) error {
	fn, err := m.Function("five_calls")
	if err != nil {
		return err
	}
	sh := d.NVSHMEM()
	const n = 4096
	dst, err := jit.SymAlloc[float32](sh, n)
	if err != nil {
		return err
	}
	defer dst.Free()
	src, err := jit.SymAlloc[float32](sh, n)
	if err != nil {
		return err
	}
	defer src.Free()
	flag, err := jit.SymAlloc[int32](sh, 1)
	if err != nil {
		return err
	}
	defer flag.Free()
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i) * 0.5
	}
	if err := src.CopyFromHost(xs); err != nil {
		return err
	}
	if err := flag.CopyFromHost([]int32{0}); err != nil {
		return err
	}
	if err := fn.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(256)}, dst, src, flag, uint32(n)); err != nil {
		return err
	}
	if err := d.Synchronize(); err != nil {
		return err
	}
	if err := sh.BarrierAll(); err != nil {
		return err
	}
	got := make([]float32, n)
	if err := dst.CopyToHost(got); err != nil {
		return err
	}
	f := []int32{0}
	if err := flag.CopyToHost(f); err != nil {
		return err
	}
	for i, v := range got {
		if v != xs[i] {
			return fmt.Errorf("dst[%d] = %v, want %v", i, v, xs[i])
		}
	}
	if f[0] != 1 {
		return fmt.Errorf("flag = %d, want 1", f[0])
	}
	return nil
}

// graphBench: a graph of 1 and of 8 bump launches replayed `replays` times against the same
// launches made directly; host time per launch, results checked.
func graphBench(d *jit.Device, replays int) error {
	k := dsl.New("bump", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() { k.Store(p.At(i), k.Load(p.At(i)).Add(uint32(1))) })
	mod, err := k.Build()
	if err != nil {
		return err
	}
	m, err := d.Load(jit.Source{Module: mod})
	if err != nil {
		return err
	}
	defer m.Close()
	fn, err := m.Function("bump")
	if err != nil {
		return err
	}
	const elems = 256
	buf, err := jit.Alloc[uint32](d, elems)
	if err != nil {
		return err
	}
	defer buf.Free()
	if err := buf.CopyFromHost(make([]uint32, elems)); err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(elems), Stream: s}
	total := uint32(0)
	for _, per := range []int{1, 8} {
		for j := 0; j < per; j++ { // warm-up
			if err := fn.Launch(cfg, buf, uint32(elems)); err != nil {
				return err
			}
		}
		total += uint32(per)
		s.Synchronize()
		t0 := time.Now()
		for r := 0; r < replays; r++ {
			for j := 0; j < per; j++ {
				if err := fn.Launch(cfg, buf, uint32(elems)); err != nil {
					return err
				}
			}
		}
		direct := time.Since(t0)
		s.Synchronize()
		total += uint32(replays * per)
		if err := s.BeginCapture(); err != nil {
			return err
		}
		for j := 0; j < per; j++ {
			if err := fn.Launch(cfg, buf, uint32(elems)); err != nil {
				return err
			}
		}
		g, err := s.EndCapture()
		if err != nil {
			return err
		}
		x, err := g.Instantiate()
		if err != nil {
			return err
		}
		if err := x.Launch(s); err != nil { // warm-up (uploads the graph)
			return err
		}
		s.Synchronize()
		total += uint32(per)
		t0 = time.Now()
		for r := 0; r < replays; r++ {
			if err := x.Launch(s); err != nil {
				return err
			}
		}
		replay := time.Since(t0)
		s.Synchronize()
		total += uint32(replays * per)
		got := make([]uint32, elems)
		if err := buf.CopyToHost(got); err != nil {
			return err
		}
		for i, v := range got {
			if v != total {
				return fmt.Errorf("after the %d-launch graph: p[%d] = %d, want %d", per, i, v, total)
			}
		}
		fmt.Printf("TIMING graph of %d launch(es), %d replays on %s: %.3f us host per launch replayed (%.3f us per graph launch); direct: %.3f us per launch; results checked\n",
			per, replays, d.Info().Backend, us(replay)/float64(replays*per), us(replay)/float64(replays), us(direct)/float64(replays*per))
		x.Close()
		g.Close()
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
