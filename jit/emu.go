package jit

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// The emulator backend: package emu behind the device interfaces. One emuMachine is one
// emu.System (a set of simulated GPUs with one symmetric heap); every jit Device of the
// emulator is one GPU of a machine. Devices opened with OpenBackend(Emulator, i) share the
// process's default machine ($KGEN_EMU_GPUS GPUs, default 1); RunRanks makes a machine of
// WORLD_SIZE GPUs whose GPU r is rank r. emu.System is not safe for concurrent use, so every
// use of it holds the machine's lock; launches and copies run to completion when called.

func init() { registerBackend(Emulator, openEmu) }

// EmuArch is the architecture emulated devices report (Info.Arch).
const EmuArch = "sm_90"

// emuMultiproc is the multiprocessor count emulated devices report: modest, so that grids
// sized from it stay quick to emulate.
const emuMultiproc = 16

type emuMachine struct {
	mu   sync.Mutex // guards sys, mods, shm
	sys  *emu.System
	n    int
	w    *world                   // the ranks (GPU r is rank r); nil: devices are not ranks
	mods map[[32]byte]*ptx.Module // one module per PTX text, so all ranks share its decoding and variables
	shm  *emuShmem                // NVSHMEM, between InitNVSHMEM and Finalize
}

func newEmuMachine(n int, ranks bool) (*emuMachine, error) {
	sys, err := emu.New(n)
	if err != nil {
		return nil, fmt.Errorf("jit: %w", err)
	}
	m := &emuMachine{sys: sys, n: n, mods: map[[32]byte]*ptx.Module{}}
	if ranks || n == 1 {
		m.w = newWorld(n)
		m.w.ranks = ranks
	}
	return m, nil
}

var (
	defaultMachineMu sync.Mutex
	defaultMachine   *emuMachine
)

// EmuGPUs is the number of simulated GPUs of the process's default emulated machine (the
// one OpenBackend(Emulator, i) opens): $KGEN_EMU_GPUS, default 1.
func EmuGPUs() (int, error) {
	v := os.Getenv("KGEN_EMU_GPUS")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > emu.MaxGPUs {
		return 0, fmt.Errorf("jit: KGEN_EMU_GPUS=%q: want 1 to %d", v, emu.MaxGPUs)
	}
	return n, nil
}

func openEmu(ordinal int) (device, error) {
	defaultMachineMu.Lock()
	defer defaultMachineMu.Unlock()
	if defaultMachine == nil {
		n, err := EmuGPUs()
		if err != nil {
			return nil, err
		}
		if defaultMachine, err = newEmuMachine(n, false); err != nil {
			return nil, err
		}
	}
	if ordinal >= defaultMachine.n {
		return nil, fmt.Errorf("jit: no emulated GPU %d: the emulated machine has %d (set KGEN_EMU_GPUS for more, or run ranks with jit.RunRanks)", ordinal, defaultMachine.n)
	}
	return newEmuDevice(defaultMachine, ordinal), nil
}

func newEmuDevice(m *emuMachine, gpu int) *emuDevice {
	return &emuDevice{m: m, gpu: gpu, opts: emuEnvOptions(), allocs: map[DevicePtr]bool{}}
}

// emuEnvOptions reads $KGEN_EMU_SEED (a schedule seed) and $KGEN_EMU_WEAK=1 (weak memory).
func emuEnvOptions() emu.Options {
	var o emu.Options
	if v := os.Getenv("KGEN_EMU_SEED"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			o.Seed = s
		}
	}
	switch strings.ToLower(os.Getenv("KGEN_EMU_WEAK")) {
	case "1", "true", "yes", "on":
		o.Weak = true
	}
	return o
}

var hostMemOnce = sync.OnceValue(func() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb << 10
		}
	}
	return 0
})

type emuDevice struct {
	m      *emuMachine
	gpu    int
	opts   emu.Options
	mu     sync.Mutex
	allocs map[DevicePtr]bool // private allocations made through this device, freed by close
}

func (d *emuDevice) info() Info {
	return Info{Backend: Emulator, Ordinal: d.gpu, Name: fmt.Sprintf("kgen emulator (GPU %d of %d)", d.gpu, d.m.n),
		Arch: EmuArch, SM: 90, TotalMem: hostMemOnce(), Multiproc: emuMultiproc}
}

// rendezvous: the device's rank and world for NVSHMEM.
func (d *emuDevice) rendezvous() (Rendezvous, error) {
	if d.m.w == nil {
		return Rendezvous{}, fmt.Errorf("jit: NVSHMEM on the emulator: this device belongs to an emulated machine of %d GPUs opened outside jit.RunRanks; run one rank per GPU with jit.RunRanks (or use KGEN_EMU_GPUS=1)", d.m.n)
	}
	if d.m.w.n == 1 {
		if v := os.Getenv("WORLD_SIZE"); v != "" && v != "1" && !d.m.w.ranks {
			return Rendezvous{}, fmt.Errorf("jit: WORLD_SIZE=%s asks for %s ranks, but on the emulator the ranks are goroutines of one process: start them with jit.RunRanks (this device was opened outside it)", v, v)
		}
	}
	ns := d.m.sys.NodeSize()
	return Rendezvous{Rank: d.gpu, WorldSize: d.m.w.n, LocalRank: d.gpu % ns}, nil
}

func (d *emuDevice) lock() func() {
	d.m.mu.Lock()
	return d.m.mu.Unlock
}

func (d *emuDevice) load(req *loadRequest, _ *Cache) (module, LoadStats, error) {
	t0 := time.Now()
	mod := req.mod
	if req.userPTX {
		// The emulator runs a ptx.Module, so hand-written PTX is parsed; its kernels must
		// match the signatures of Source.Module (launches are checked against those).
		pm, err := ptx.Parse(string(req.ptx))
		if err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: the emulator runs a ptx.Module and Source.PTX does not parse (pass the *ptx.Module itself, without PTX): %w", req.name, err)
		}
		if err := sameSignatures(req.mod, pm); err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: %w", req.name, err)
		}
		mod = pm
	}
	if req.shmem && emulateNVSHMEM == nil {
		return nil, LoadStats{}, fmt.Errorf("jit: module %s calls NVSHMEM (%s), but this binary has no NVSHMEM device emulation (package nvshmem/shmemu)", req.name, strings.Join(NVSHMEMCalls(req.mod), ", "))
	}
	key := sha256.Sum256(req.ptx)
	defer d.lock()()
	if m, ok := d.m.mods[key]; ok {
		mod = m
	} else {
		if err := d.m.sys.Load(mod); err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: emulator: %w", req.name, err)
		}
		d.m.mods[key] = mod
	}
	return &emuModule{d: d, mod: mod, key: key, name: req.name, shmem: req.shmem}, LoadStats{Load: time.Since(t0)}, nil
}

// sameSignatures checks that every kernel of sig exists in m with the same parameters.
func sameSignatures(sig, m *ptx.Module) error {
	got := map[string]*ptx.Func{}
	for _, f := range m.Funcs {
		if f.Entry && !f.Extern {
			got[f.Name] = f
		}
	}
	for _, f := range sig.Funcs {
		if !f.Entry || f.Extern {
			continue
		}
		g := got[f.Name]
		if g == nil {
			return fmt.Errorf("Source.PTX has no kernel %s (Source.Module declares %s)", f.Name, Signature(f))
		}
		if Signature(g) != Signature(f) {
			return fmt.Errorf("kernel %s in Source.PTX is %s, but Source.Module says %s", f.Name, Signature(g), Signature(f))
		}
	}
	return nil
}

func (d *emuDevice) alloc(n int64) (DevicePtr, error) {
	if n > math.MaxInt32*int64(64) {
		return 0, fmt.Errorf("the emulator allocates host memory: %d bytes is too much", n)
	}
	unlock := d.lock()
	a, err := d.m.sys.Malloc(d.gpu, int(n))
	unlock()
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.allocs[DevicePtr(a)] = true
	d.mu.Unlock()
	return DevicePtr(a), nil
}

func (d *emuDevice) free(p DevicePtr) error {
	d.mu.Lock()
	delete(d.allocs, p)
	d.mu.Unlock()
	defer d.lock()()
	return d.m.sys.Free(uint64(p))
}

func (d *emuDevice) copyHtoD(dst DevicePtr, src []byte, s stream) error {
	if err := emuRefuseCaptured(s, "host-to-device copy"); err != nil {
		return err
	}
	defer d.lock()()
	return d.m.sys.Write(uint64(dst), src)
}

func (d *emuDevice) copyDtoH(dst []byte, src DevicePtr, s stream) error {
	if err := emuRefuseCaptured(s, "device-to-host copy"); err != nil {
		return err
	}
	defer d.lock()()
	return d.m.sys.Read(uint64(src), dst)
}

func (d *emuDevice) copyDtoD(dst, src DevicePtr, n int64, s stream) error {
	if err := emuRefuseCaptured(s, "device-to-device copy"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n < 0 || n > math.MaxInt32*int64(64) {
		return fmt.Errorf("emulator: copy of %d bytes", n)
	}
	defer d.lock()()
	return d.m.sys.Copy(uint64(dst), uint64(src), int(n))
}

func (d *emuDevice) newStream() (stream, error) { return &emuStream{}, nil }
func (d *emuDevice) newEvent() (event, error)   { return &emuEvent{}, nil }
func (d *emuDevice) synchronize() error         { return nil }

func (d *emuDevice) close() error {
	d.mu.Lock()
	ps := make([]DevicePtr, 0, len(d.allocs))
	for p := range d.allocs {
		ps = append(ps, p)
	}
	d.allocs = map[DevicePtr]bool{}
	d.mu.Unlock()
	defer d.lock()()
	var errs []error
	for _, p := range ps {
		errs = append(errs, d.m.sys.Free(uint64(p)))
	}
	return errors.Join(errs...)
}

type emuModule struct {
	d     *emuDevice
	mod   *ptx.Module
	key   [32]byte
	name  string
	shmem bool
}

func (m *emuModule) function(name string) (function, error) {
	for _, f := range m.mod.Funcs {
		if f.Entry && !f.Extern && f.Name == name {
			return &emuFunc{m: m, sig: f}, nil
		}
	}
	return nil, fmt.Errorf("jit: module %s has no kernel %q", m.name, name)
}

func (m *emuModule) unload() error { return nil }

type emuFunc struct {
	m   *emuModule
	sig *ptx.Func
}

func (f *emuFunc) launch(g, b Dim3, shared int, s stream, args []uint64) error {
	return f.launchMode(g, b, shared, s, args, &LaunchConfig{})
}

// emuLaunch is one rank's part of a launch.
type emuLaunch struct {
	f       *emuFunc
	g, b    Dim3
	shared  int
	args    []any
	call    string   // LaunchConfig.Call
	cluster emu.Dim3 // LaunchConfig.Cluster, zero for none
}

func (f *emuFunc) launchMode(g, b Dim3, shared int, s stream, slots []uint64, cfg *LaunchConfig) error {
	if es, ok := s.(*emuStream); ok && es.capturing.Load() {
		return nil // recorded by the capture; it runs when the graph is replayed
	}
	mode := cfg.Collective
	args := make([]any, len(f.sig.Params))
	offs := wordOffsets(f.sig)
	for i := range f.sig.Params {
		args[i] = paramBytesOf(f.sig, offs, slots, i)
	}
	d := f.m.d
	var cluster emu.Dim3
	if cfg.Cluster != (Dim3{}) {
		cluster = emuDim(cfg.Cluster.norm())
	}
	l := &emuLaunch{f: f, g: g, b: b, shared: shared, args: args, call: cfg.Call, cluster: cluster}
	w := d.m.w
	if w == nil || w.n == 1 || mode == CollectiveOff || mode == CollectiveAuto && !f.touchesSymmetric(slots) {
		defer d.lock()()
		return d.m.run(emu.Launch{Module: f.m.mod, Entry: f.sig.Name, GPUs: []int{d.gpu}, Grid: emuDim(g), Block: emuDim(b),
			SharedBytes: shared, Args: args, Cluster: cluster, Options: d.opts})
	}
	desc := fmt.Sprintf("launch of %s (grid %v, block %v)", f.sig.Name, dimString(g), dimString(b))
	if cfg.Call != "" {
		desc = fmt.Sprintf("%s: %s", cfg.Call, desc)
	}
	_, err := w.join(cfg.Context, d.gpu, "launch", desc, l, func(parts []any) (any, error) {
		return nil, d.m.collective(parts)
	})
	return err
}

// touchesSymmetric reports whether the launch must be gathered in CollectiveAuto mode: the
// module calls NVSHMEM, or a 64-bit argument is an address in the symmetric heap (any
// GPU's copy) or a multicast address.
func (f *emuFunc) touchesSymmetric(slots []uint64) bool {
	if f.m.shmem {
		return true
	}
	d := f.m.d
	defer d.lock()()
	offs := wordOffsets(f.sig)
	for i, p := range f.sig.Params {
		w := i
		if offs != nil {
			w = offs[i]
		}
		if p.Array == 0 && p.Type.Bytes() == 8 && p.Type.Kind() != ptx.KindFloat && slots[w] != 0 {
			if _, err := d.m.sys.MulticastOf(slots[w]); err == nil {
				return true
			}
		}
	}
	return false
}

// collective runs the ranks' parts of one gathered launch as one emu launch on every GPU.
func (m *emuMachine) collective(parts []any) error {
	l0 := parts[0].(*emuLaunch)
	calls := make([]string, len(parts))
	for r, p := range parts {
		calls[r] = p.(*emuLaunch).call
	}
	if d := disagreement("rank", calls); d != "" {
		return fmt.Errorf("collective launch of %s: the ranks' calls differ: %s; every rank must make the same collective call", l0.f.sig.Name, d)
	}
	for r, p := range parts {
		l := p.(*emuLaunch)
		switch {
		case l.f.m.key != l0.f.m.key || l.f.sig.Name != l0.f.sig.Name:
			return fmt.Errorf("collective launch: rank 0 launches %s but rank %d launches %s (of another module or another kernel); on the emulator the ranks' k-th gathered launches run as one, so they must be the same kernel (use LaunchConfig.Collective = jit.CollectiveOff for a launch one rank makes alone)", l0.f.sig.Name, r, l.f.sig.Name)
		case l.g != l0.g || l.b != l0.b || l.shared != l0.shared || l.cluster != l0.cluster:
			return fmt.Errorf("collective launch of %s: rank 0 uses grid %s, block %s, %d bytes of shared memory, cluster %s, rank %d grid %s, block %s, %d bytes, cluster %s; the emulator runs one grid shape on every GPU", l0.f.sig.Name,
				dimString(l0.g), dimString(l0.b), l0.shared, clusterString(l0.cluster), r, dimString(l.g), dimString(l.b), l.shared, clusterString(l.cluster))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.run(emu.Launch{Module: l0.f.m.mod, Entry: l0.f.sig.Name, GPUs: m.sys.All(), Grid: emuDim(l0.g), Block: emuDim(l0.b),
		SharedBytes: l0.shared, Cluster: l0.cluster, ArgsFor: func(g int) []any { return parts[g].(*emuLaunch).args }, Options: l0.f.m.d.opts})
}

// run launches with m.mu held; a failed launch resets NVSHMEM's half-done operations.
func (m *emuMachine) run(l emu.Launch) error {
	err := m.sys.Launch(l)
	if err != nil && m.shm != nil && m.shm.dev != nil {
		m.shm.dev.Reset()
	}
	if err != nil && len(l.GPUs) > 1 {
		return fmt.Errorf("collective launch on %d emulated GPUs: %w", len(l.GPUs), err)
	}
	return err
}

// clusterString shows a launch's cluster shape ("none" for none).
func clusterString(c emu.Dim3) string {
	if c == (emu.Dim3{}) {
		return "none"
	}
	return fmt.Sprintf("%dx%dx%d", c.X, c.Y, c.Z)
}

func emuDim(d Dim3) emu.Dim3 { return emu.Dim3{X: d.X, Y: d.Y, Z: d.Z} }

func dimString(d Dim3) string {
	d = d.norm()
	return fmt.Sprintf("%dx%dx%d", d.X, d.Y, d.Z)
}

// emuStream: the emulator runs every operation to completion when it is enqueued, so a
// stream is already synchronised.
// A capturing stream (BeginCapture) records launches instead of running them.
type emuStream struct{ capturing atomic.Bool }

func (s *emuStream) synchronize() error { return emuRefuseCaptured(s, "synchronize") }

// waitEvent: the work before the event is already done (every operation runs when it is
// enqueued).
func (*emuStream) waitEvent(event) error { return nil }
func (*emuStream) destroy() error        { return nil }

// emuEvent records the wall-clock time at Record. Because the emulator finishes each
// operation before the call that enqueues it returns, the time between two events is the
// host time the emulator spent on the work between them (plus the host's own work).
type emuEvent struct {
	mu sync.Mutex
	t  time.Time
}

func (e *emuEvent) record(s stream) error {
	if err := emuRefuseCaptured(s, "event record"); err != nil {
		return err
	}
	e.mu.Lock()
	e.t = time.Now()
	e.mu.Unlock()
	return nil
}

func (e *emuEvent) synchronize() error { return nil }

func (e *emuEvent) when() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.t
}

func (e *emuEvent) elapsed(end event) (time.Duration, error) {
	x, ok := end.(*emuEvent)
	if !ok {
		return 0, errors.New("jit: Elapsed: the events belong to different backends")
	}
	t0, t1 := e.when(), x.when()
	if t0.IsZero() || t1.IsZero() {
		return 0, errors.New("jit: Elapsed: both events must be recorded first")
	}
	return t1.Sub(t0), nil
}

func (e *emuEvent) destroy() error { return nil }
