package jit

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
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
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// The emulator backend: package emu behind the device interfaces. One emuMachine is one
// emu.System (a set of simulated GPUs with one symmetric heap); every jit Device of the
// emulator is one GPU of a machine. Devices opened with OpenBackend(Emulator, i) share the
// process's default machine ($KGEN_EMU_GPUS GPUs, default 1); RunRanks makes a machine of
// WORLD_SIZE GPUs whose GPU r is rank r. emu.System is not safe for concurrent use, so every
// use of it holds the machine's lock. Launches enqueue on streams and kernels run
// concurrently (emu_streams.go).

func init() { registerBackend(Emulator, openEmu) }

// EmuArch is the architecture emulated devices report (Info.Arch).
const EmuArch = "sm_90"

// emuMultiproc is the multiprocessor count emulated devices report: modest, so that grids
// sized from it stay quick to emulate.
const emuMultiproc = 16

type emuMachine struct {
	mu    sync.Mutex // guards sys, mods, shm, devs, the streams and sched's state
	sys   *emu.System
	n     int
	w     *world                   // the ranks (GPU r is rank r); nil: devices are not ranks
	mods  map[[32]byte]*ptx.Module // one module per PTX text, so all ranks share its decoding and variables
	shm   *emuShmem                // NVSHMEM, between InitNVSHMEM and Finalize
	devs  []*emuDevice             // the devices opened on the machine (their streams)
	calls map[int]*emuCall         // the ranks' launches with a Call, by number, until all made theirs
	sched *emuSched                // the ranks' scheduler (RunRanks with several ranks), or nil
	// arriving counts the goroutines waiting to take mu (lock): the scheduler lets them in
	// between the slices of kernels it runs.
	arriving atomic.Int32
}

// lock takes the machine's lock from a rank's (or any host) goroutine, which the scheduler
// lets in between its slices.
func (m *emuMachine) lock() {
	m.arriving.Add(1)
	m.mu.Lock()
	m.arriving.Add(-1)
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
		return 0, fmt.Errorf("jit: KGEN_EMU_GPUS=%s: want 1 to %d", excerpt.Quote(v), emu.MaxGPUs)
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
	return newEmuDevice(defaultMachine, ordinal, emu.Options{}), nil // OpenBackend sets its options
}

func newEmuDevice(m *emuMachine, gpu int, opts emu.Options) *emuDevice {
	d := &emuDevice{m: m, gpu: gpu, opts: opts, allocs: map[DevicePtr]bool{}}
	d.defq = &emuQueue{d: d, def: true}
	d.queues = []*emuQueue{d.defq}
	m.lock()
	m.devs = append(m.devs, d)
	m.mu.Unlock()
	return d
}

// emuEnvOptions reads $KGEN_EMU_SEED (a schedule seed, a decimal int64) and
// $KGEN_EMU_WEAK (weak memory: 1, true, yes or on; 0, false, no, off or unset: not). A value
// of another form is an error naming the variable: a mistyped seed or switch would
// otherwise run the default schedule or the strong memory model, silently.
func emuEnvOptions() (emu.Options, error) {
	var o emu.Options
	if v := os.Getenv("KGEN_EMU_SEED"); v != "" {
		s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return o, fmt.Errorf("jit: KGEN_EMU_SEED=%s: want a decimal integer of 64 bits (a schedule seed; 0 or unset: the deterministic schedule)%s", excerpt.Quote(v), rangeNote(err))
		}
		o.Seed = s
	}
	switch v := os.Getenv("KGEN_EMU_WEAK"); strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		o.Weak = true
	case "", "0", "false", "no", "off":
	default:
		return o, fmt.Errorf("jit: KGEN_EMU_WEAK=%s: want 1, true, yes or on (weak memory) or 0, false, no or off", excerpt.Quote(v))
	}
	return o, nil
}

// emuOptions are the emulator options a device opened with opts runs under: those of
// WithEmuOptions, checked, else those of the environment.
func emuOptions(opts []Option) (emu.Options, error) {
	if err := checkOptions("RanksOptions.Open", opts); err != nil {
		return emu.Options{}, err
	}
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.Emu == nil {
		return emuEnvOptions()
	}
	if err := o.Emu.Check(); err != nil {
		return emu.Options{}, fmt.Errorf("jit: WithEmuOptions: %w", err)
	}
	return *o.Emu, nil
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
	// with the machine's lock:
	defq    *emuQueue   // the default stream
	queues  []*emuQueue // the default stream and the streams made on the device
	err     error       // the first fault of its work (sticky, as on a GPU)
	calls   int         // its launches with a LaunchConfig.Call so far
	errSeen bool        // err was returned by some call
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

// lock takes a turn on the machine (a scheduling point): it returns with the machine's lock
// held, and the returned func gives both back.
func (d *emuDevice) lock() func() { return d.m.turn(d.gpu) }

// sticky returns the device's fault, if any (m.mu held); once a call has returned it, it
// says so: the fault is an earlier one's, not the present call's.
func (d *emuDevice) sticky() error {
	if d.err == nil {
		return nil
	}
	if d.errSeen {
		return fmt.Errorf("jit: emulated GPU %d is unusable after an earlier fault, as a GPU context is: %w", d.gpu, d.err)
	}
	d.errSeen = true
	return d.err
}

func (d *emuDevice) load(req *loadRequest, _ *Cache) (module, LoadStats, error) {
	t0 := time.Now()
	mod := req.mod
	if req.userPTX {
		// The emulator runs a ptx.Module, so hand-written PTX is parsed; its kernels must
		// match the signatures of Source.Module (launches are checked against those).
		pm, err := ptx.Parse(string(req.ptx))
		if err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: the emulator runs a ptx.Module and Source.PTX does not parse (pass the *ptx.Module itself, without PTX): %w", errName(req.name), err)
		}
		if err := sameSignatures(req.mod, pm); err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: %w", errName(req.name), err)
		}
		mod = pm
	}
	if req.shmem && emulateNVSHMEM == nil {
		return nil, LoadStats{}, fmt.Errorf("jit: module %s calls NVSHMEM (%s), but this binary has no NVSHMEM device emulation (package nvshmem/shmemu)", errName(req.name), excerpt.Cut(strings.Join(NVSHMEMCalls(req.mod), ", "), maxErrSignature))
	}
	key := sha256.Sum256(req.ptx)
	defer d.lock()()
	if m, ok := d.m.mods[key]; ok {
		mod = m
	} else {
		if err := d.m.sys.Load(mod); err != nil {
			return nil, LoadStats{}, fmt.Errorf("jit: module %s: emulator: %w", errName(req.name), err)
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
			return fmt.Errorf("Source.PTX has no kernel %s (Source.Module declares %s)", errName(f.Name), errSignature(f))
		}
		if Signature(g) != Signature(f) {
			return fmt.Errorf("kernel %s in Source.PTX is %s, but Source.Module says %s", errName(f.Name), errSignature(g), errSignature(f))
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
	// cudaFree waits for the device's work
	if err := d.m.await(d, context.Background(), "free", d.idle); err != nil {
		return err
	}
	return d.m.sys.Free(uint64(p))
}

// hostCopy runs a copy: on stream s in its order, or (s nil) as CUDA's synchronous copies
// do, after the device's streams' earlier work and before returning.
func (d *emuDevice) hostCopy(s stream, what string, copy func() error) error {
	if err := emuRefuseCaptured(s, what); err != nil {
		return err
	}
	defer d.lock()()
	if err := d.sticky(); err != nil {
		return err
	}
	if s == nil {
		if err := d.syncAll(context.Background(), what); err != nil {
			d.errSeen = true
			return err
		}
		return copy()
	}
	d.m.enqueue(d.queueOf(s), &emuOp{desc: what, fn: copy, call: -1})
	return nil
}

func (d *emuDevice) copyHtoD(dst DevicePtr, src []byte, s stream) error {
	if s != nil {
		src = append([]byte(nil), src...) // the bytes as they are now
	}
	return d.hostCopy(s, "host-to-device copy", func() error { return d.m.sys.Write(uint64(dst), src) })
}

func (d *emuDevice) copyDtoH(dst []byte, src DevicePtr, s stream) error {
	return d.hostCopy(s, "device-to-host copy", func() error { return d.m.sys.Read(uint64(src), dst) })
}

func (d *emuDevice) copyDtoD(dst, src DevicePtr, n int64, s stream) error {
	if err := emuRefuseCaptured(s, "device-to-device copy"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n < 0 || n > math.MaxInt32*int64(64) {
		return fmt.Errorf("jit: emulator: a device-to-device copy of %d bytes (the emulator copies 0 to %d at once)", n, math.MaxInt32*int64(64))
	}
	return d.hostCopy(s, "device-to-device copy", func() error { return d.m.sys.Copy(uint64(dst), uint64(src), int(n)) })
}

func (d *emuDevice) newStream() (stream, error) {
	defer d.lock()()
	q := &emuQueue{d: d}
	d.queues = append(d.queues, q)
	return &emuStream{d: d, q: q}, nil
}

func (d *emuDevice) newEvent() (event, error) { return &emuEvent{d: d}, nil }

func (d *emuDevice) synchronize() error {
	defer d.lock()()
	if err := d.syncAll(context.Background(), "Device.Synchronize"); err != nil {
		d.errSeen = true
		return err
	}
	return nil
}

func (d *emuDevice) close() error {
	unlock := d.lock()
	d.cancelAbandoned()
	err := d.syncAll(context.Background(), "Device.Close")
	if err != nil && d.errSeen && errors.Is(err, d.err) {
		err = nil // reported already
	}
	unlock()
	d.mu.Lock()
	ps := make([]DevicePtr, 0, len(d.allocs))
	for p := range d.allocs {
		ps = append(ps, p)
	}
	d.allocs = map[DevicePtr]bool{}
	d.mu.Unlock()
	defer d.lock()()
	errs := []error{err}
	for _, p := range ps {
		errs = append(errs, d.m.sys.Free(uint64(p)))
	}
	return errors.Join(errs...)
}

// cancelAbandoned ends d's unfinished launches whose LaunchConfig.Context has ended (m.mu
// held): nothing waits for them any more, and Close, which has no context of its own, would
// otherwise wait for a kernel that never finishes (one that spins while storing is never
// reported as stuck). Their error becomes the device's.
func (d *emuDevice) cancelAbandoned() {
	const why = "ended by Device.Close: the launch's LaunchConfig.Context had ended and the kernel had not finished"
	for _, q := range d.queues {
		for _, op := range q.ops {
			if op.done || op.launch == nil || op.ctx == nil || op.ctx.Err() == nil {
				continue
			}
			if op.run == nil { // not started: it never will be
				op.done, op.err = true, fmt.Errorf("jit: %s: not started: %s", op.desc, why)
				continue
			}
			d.m.sys.Cancel(op.run, why)
		}
	}
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
	return nil, fmt.Errorf("jit: module %s has no kernel %s", errName(m.name), excerpt.Quote(name))
}

func (m *emuModule) unload() error { return nil }

type emuFunc struct {
	m   *emuModule
	sig *ptx.Func
}

func (f *emuFunc) launch(g, b Dim3, shared int, s stream, args []uint64) error {
	return f.launchMode(g, b, shared, s, args, &LaunchConfig{})
}

// launchMode enqueues the launch on its stream and returns: the kernel runs when the
// stream reaches it, beside the other streams' kernels (emu_streams.go). A launch the
// emulator refuses (arguments, shape, limits) fails at once; a fault while the kernel runs
// comes back from the rank's next synchronizing call. cfg.Collective no longer matters: every
// launch runs on its own stream.
func (f *emuFunc) launchMode(g, b Dim3, shared int, s stream, slots []uint64, cfg *LaunchConfig) error {
	if es, ok := s.(*emuStream); ok && es.capturing.Load() {
		return nil // recorded by the capture; it runs when the graph is replayed
	}
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
	l := &emu.Launch{Module: f.m.mod, Entry: f.sig.Name, GPUs: []int{d.gpu}, Grid: emuDim(g), Block: emuDim(b),
		SharedBytes: shared, Args: args, Cluster: cluster, Options: d.opts}
	desc := fmt.Sprintf("launch of %s (grid %v, block %v)", errName(f.sig.Name), dimString(g), dimString(b))
	if cfg.Call != "" {
		desc = fmt.Sprintf("%s: %s", cfg.Call, desc)
	}
	defer d.lock()()
	if err := d.sticky(); err != nil {
		return err
	}
	if err := d.m.sys.Check(*l); err != nil {
		return err
	}
	call := -1
	if cfg.Call != "" {
		call = d.m.noteCall(d, cfg.Call)
		if err := d.sticky(); err != nil {
			return err
		}
	}
	d.m.enqueue(d.queueOf(s), &emuOp{desc: desc, launch: l, ctx: cfg.Context, call: call})
	return nil
}

func emuDim(d Dim3) emu.Dim3 { return emu.Dim3{X: d.X, Y: d.Y, Z: d.Z} }

func dimString(d Dim3) string {
	d = d.norm()
	return fmt.Sprintf("%dx%dx%d", d.X, d.Y, d.Z)
}

// emuStream is a stream of an emulated device: a FIFO of its work (emu_streams.go). A
// capturing stream (BeginCapture) records launches instead of enqueuing them.
type emuStream struct {
	d         *emuDevice
	q         *emuQueue
	capturing atomic.Bool
}

func (s *emuStream) synchronize() error {
	if err := emuRefuseCaptured(s, "synchronize"); err != nil {
		return err
	}
	d := s.d
	defer d.lock()()
	if err := d.m.await(d, context.Background(), "Stream.Synchronize", s.q.empty); err != nil {
		return err
	}
	return d.sticky()
}

// waitEvent enqueues on s a no-op that starts only once the event's record (the point it
// marks in its stream) is done, so s's later work waits for the work before it.
func (s *emuStream) waitEvent(e event) error {
	if err := emuRefuseCaptured(s, "event wait"); err != nil {
		return err
	}
	ev, ok := e.(*emuEvent)
	if !ok {
		return errors.New("jit: WaitEvent: the event belongs to another backend")
	}
	d := s.d
	defer d.lock()()
	if err := d.sticky(); err != nil {
		return err
	}
	ev.mu.Lock()
	rec := ev.op
	ev.mu.Unlock()
	op := &emuOp{desc: "event wait", call: -1, fn: func() error { return nil }}
	if rec != nil && !rec.done {
		op.after = append(op.after, rec)
	}
	d.m.enqueue(d.queueOf(s), op)
	return nil
}

// waitValue32 enqueues on s a stream wait: an op that is done once the word at addr
// satisfies cond (polled whenever the machine moves its streams on: after every slice of the
// kernels in flight and every host call). The word is read as memory is visible system-wide
// (emu.System.Load32): a kernel's stores still in the weak-memory buffers are not seen, and a
// release flushes its thread's earlier stores before the released word, so a wait satisfied
// by a released word sees them: an acquire.
func (s *emuStream) waitValue32(addr DevicePtr, value uint32, cond WaitCond) error {
	if err := emuRefuseCaptured(s, "stream wait (WaitValue32)"); err != nil {
		return err
	}
	d := s.d
	defer d.lock()()
	if err := d.sticky(); err != nil {
		return err
	}
	op := &emuOp{call: -1}
	op.poll = func() (bool, error) {
		v, err := d.m.sys.Load32(uint64(addr))
		if err != nil {
			return false, err
		}
		op.desc = fmt.Sprintf("stream wait for the word at %#x to be %s (it is %d)", uint64(addr), cond.describe(value), v)
		return cond.holds(v, value), nil
	}
	op.desc = fmt.Sprintf("stream wait for the word at %#x to be %s", uint64(addr), cond.describe(value))
	d.m.enqueue(d.queueOf(s), op)
	return nil
}

// writeValue32 enqueues on s a write of the word at addr: a release, since the stream's
// earlier work is done (and its stores in memory) when the stream reaches it.
func (s *emuStream) writeValue32(addr DevicePtr, value uint32) error {
	if err := emuRefuseCaptured(s, "stream write (WriteValue32)"); err != nil {
		return err
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], value)
	return s.d.hostCopy(s, fmt.Sprintf("stream write of %d to the word at %#x", value, uint64(addr)), func() error {
		return s.d.m.sys.Write(uint64(addr), b[:])
	})
}

// destroy: the stream's work still runs to its end.
func (*emuStream) destroy() error { return nil }

// emuEvent records the wall-clock time at which its stream reached Record: the time between
// two events is the host time the emulator spent on the work between them (plus the host's
// own work, and the other ranks' work interleaved with it). It measures the emulator, not a
// GPU estimate.
type emuEvent struct {
	d  *emuDevice
	mu sync.Mutex
	t  time.Time
	op *emuOp // the record in its stream
}

func (e *emuEvent) record(s stream) error {
	if err := emuRefuseCaptured(s, "event record"); err != nil {
		return err
	}
	d := e.d
	defer d.lock()()
	if err := d.sticky(); err != nil {
		return err
	}
	op := &emuOp{desc: "event record", call: -1, fn: func() error {
		e.mu.Lock()
		e.t = time.Now()
		e.mu.Unlock()
		return nil
	}}
	e.mu.Lock()
	e.t, e.op = time.Time{}, op
	e.mu.Unlock()
	d.m.enqueue(d.queueOf(s), op)
	return nil
}

func (e *emuEvent) synchronize() error {
	d := e.d
	defer d.lock()()
	e.mu.Lock()
	op := e.op
	e.mu.Unlock()
	if op == nil {
		return nil // never recorded: nothing to wait for (as CUDA)
	}
	if err := d.m.await(d, context.Background(), "Event.Synchronize", func() bool { return op.done }); err != nil {
		return err
	}
	return d.sticky()
}

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
		return 0, errors.New("jit: Elapsed: both events must be recorded and reached first (Event.Synchronize)")
	}
	return t1.Sub(t0), nil
}

func (e *emuEvent) destroy() error { return nil }
