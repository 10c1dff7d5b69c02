//go:build cuda

package main

import (
	"fmt"
	"time"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/nvshmem/gputest"
	"github.com/kgen-dev/kgen/ptx"
)

// gpuMachine is one PE of a GPU job: it owns its own memory; launches are followed by a
// device synchronisation and a host barrier, so that every PE has finished.
type gpuMachine struct {
	d    *jit.Device
	sh   *jit.NVSHMEM
	dl   *jit.DevLib
	me   int
	np   int
	mc   bool
	mods map[*ptx.Module]*jit.Module
}

type gpuSym struct{ p jit.DevicePtr }

func (s gpuSym) Addr(int) uint64 { return uint64(s.p) }

func (g *gpuMachine) NPEs() int       { return g.np }
func (g *gpuMachine) Local() []int    { return []int{g.me} }
func (g *gpuMachine) Multicast() bool { return g.mc }

func (g *gpuMachine) Alloc(size int) (gputest.Sym, error) {
	m, err := g.sh.Malloc(int64(size))
	if err != nil {
		return nil, err
	}
	if err := g.d.CopyHtoD(m.DevPtr(), make([]byte, size)); err != nil {
		return nil, err
	}
	return gpuSym{m.DevPtr()}, nil
}

func (g *gpuMachine) Write(s gputest.Sym, pe int, b []byte) error {
	if pe != g.me {
		return fmt.Errorf("PE %d writes PE %d's memory", g.me, pe)
	}
	return g.d.CopyHtoD(jit.DevicePtr(s.Addr(pe)), b)
}

func (g *gpuMachine) Read(s gputest.Sym, pe int, b []byte) error {
	if pe != g.me {
		return fmt.Errorf("PE %d reads PE %d's memory", g.me, pe)
	}
	return g.d.CopyDtoH(b, jit.DevicePtr(s.Addr(pe)))
}

func (g *gpuMachine) Launch(m *ptx.Module, entry string, block int, args func(pe int) []any) error {
	jm := g.mods[m]
	if jm == nil {
		var err error
		jm, err = g.d.Load(jit.Source{Module: m, DevLib: g.dl})
		if err != nil {
			return err
		}
		g.mods[m] = jm
		st := jm.Stats()
		logf("PE %d: %s loaded: cache hit %v, link %s, load %s, cubin %d bytes", g.me, entry, st.CacheHit, st.Link, st.Load, st.CubinLen)
	}
	fn, err := jm.Function(entry)
	if err != nil {
		return err
	}
	if err := g.sh.BarrierAll(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := fn.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(block)}, args(g.me)...); err != nil {
		return err
	}
	if err := g.d.Synchronize(); err != nil {
		return err
	}
	logf("PE %d: %s ran in %s", g.me, entry, time.Since(t0))
	return g.sh.BarrierAll()
}

func runRank(dir string) error {
	dl, err := loadDevLib(dir)
	if err != nil {
		return err
	}
	rv, err := jit.RendezvousFromEnv()
	if err != nil {
		return err
	}
	d, err := jit.Open(rv.LocalRank)
	if err != nil {
		return err
	}
	defer d.Close()
	sh, err := jit.InitNVSHMEM(d, jit.InitOptions{})
	if err != nil {
		return err
	}
	g := &gpuMachine{d: d, sh: sh, dl: dl, me: sh.MyPE(), np: sh.NPEs(), mods: map[*ptx.Module]*jit.Module{}}
	logf("PE %d of %d on %s (NVSHMEM %s, %s)", g.me, g.np, d.Info().Name, sh.Version(), sh.LibPath())
	probe, err := sh.Malloc(64)
	if err == nil {
		_, mcErr := sh.MulticastPtr(probe)
		g.mc = mcErr == nil
		if mcErr != nil {
			logf("PE %d: multicast off: %v", g.me, mcErr)
		}
	}
	runErr := gputest.RunAll(g, ptx.SM90, func(format string, a ...any) { logf("PE %d: "+format, append([]any{g.me}, a...)...) })
	// Finalize unloads the modules (nvshmemx_cumodule_finalize) and frees symmetric memory.
	if err := sh.Finalize(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
