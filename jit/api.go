package jit

import (
	"context"
	"errors"
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Backend names an implementation of the API.
type Backend string

// The backends.
const (
	// GPU runs on NVIDIA GPUs through the CUDA driver (gorgonia.org/cu). It needs a binary
	// built with -tags cuda (and cgo); without the tag every call reports ErrNoCUDA.
	GPU Backend = "gpu"
	// Emulator runs on the CPU through package emu (always built in).
	Emulator Backend = "emu"
)

// ErrNoCUDA is what the GPU backend reports in a binary built without the cuda tag.
// A binary built with -tags cuda but CGO_ENABLED=0 reports it too.
var ErrNoCUDA = errors.New("jit: GPU backend unavailable: built without the cuda tag; rebuild with -tags cuda and CGO_ENABLED=1 (see docs/jit.md, scripts/cuda-headers.sh)")

// DevicePtr is an address in a device's memory (a CUDA device pointer on the GPU backend).
type DevicePtr uint64

// Pointer is anything that stands for device memory in a kernel argument: DevicePtr,
// *Memory and *Buffer[T].
type Pointer interface{ DevPtr() DevicePtr }

// DevPtr returns p itself.
func (p DevicePtr) DevPtr() DevicePtr { return p }

// Add returns p advanced by n bytes.
func (p DevicePtr) Add(n int64) DevicePtr { return DevicePtr(int64(p) + n) }

// Dim3 is a grid or block shape. A zero Y or Z counts as 1 (D1 and 2-D shapes); X must be
// positive: a zero X is an error at launch, not a shape of 1.
type Dim3 struct{ X, Y, Z int }

// D1 returns the one-dimensional shape (x, 1, 1).
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

func (d Dim3) norm() Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Info describes a device.
type Info struct {
	Backend       Backend
	Ordinal       int
	Name          string
	Arch          string // "sm_90"
	SM            int    // 90
	DriverVersion int    // cuDriverGetVersion: 13000 for CUDA 13.0; 0 on the emulator
	TotalMem      int64  // bytes
	Multiproc     int    // multiprocessor count
}

// Options configure Open.
type Options struct {
	// Cache stores linked cubins; nil means DefaultCache() (which KGEN_CACHE=off disables).
	// The emulator does not link and ignores it.
	Cache *Cache
	// Emu sets the emulator's launch options (schedule seed, weak-memory mode, step budget);
	// nil means the defaults, which $KGEN_EMU_SEED and $KGEN_EMU_WEAK=1 change. Options out
	// of range (emu.Options.Check), and those variables set to something else than a seed
	// or a switch, fail Open on the emulator. The GPU backend ignores it.
	Emu *emu.Options
}

// Option sets an Option.
type Option func(*Options)

// WithCache selects the cubin cache; WithCache(nil) disables caching for this device.
func WithCache(c *Cache) Option {
	return func(o *Options) {
		if c == nil {
			c = &Cache{disabled: true}
		}
		o.Cache = c
	}
}

// WithEmuOptions sets the emulator's launch options for a device (see Options.Emu).
func WithEmuOptions(e emu.Options) Option {
	return func(o *Options) { o.Emu = &e }
}

// Device is one GPU, or one simulated GPU of the emulator. Its methods are safe for
// concurrent use.
type Device struct {
	impl    device
	info    Info
	cache   *Cache
	mu      sync.Mutex
	shmem   *NVSHMEM
	closed  bool
	modules map[*Module]struct{}
	st      startup // time to the first launch (Startup)
}

var (
	backendsMu sync.Mutex
	backends   = map[Backend]func(ordinal int) (device, error){GPU: openGPU}
)

// registerBackend installs the opener of a backend (the emulator adapter and tests use it).
func registerBackend(b Backend, open func(ordinal int) (device, error)) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[b] = open
}

// Open opens device ordinal of the default backend (DefaultBackend: $KGEN_BACKEND, else the
// GPU when the binary has the cuda tag and a GPU is visible, else the emulator). On the GPU
// backend ordinal is a GPU as CUDA_VISIBLE_DEVICES presents them; on the emulator it is a
// simulated GPU of the process's emulated machine ($KGEN_EMU_GPUS GPUs, default 1). Use
// OpenBackend to pick a backend in code.
func Open(ordinal int, opts ...Option) (*Device, error) {
	b, err := DefaultBackend()
	if err != nil {
		return nil, err
	}
	return OpenBackend(b, ordinal, opts...)
}

// OpenBackend opens device ordinal of backend b.
func OpenBackend(b Backend, ordinal int, opts ...Option) (*Device, error) {
	if err := checkOptions("OpenBackend", opts); err != nil {
		return nil, err
	}
	if ordinal < 0 {
		return nil, fmt.Errorf("jit: device ordinal %d is negative", ordinal)
	}
	backendsMu.Lock()
	open := backends[b]
	backendsMu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("jit: unknown backend %s (valid: %s, %s)", excerpt.Quote(string(b)), GPU, Emulator)
	}
	if err := cacheEnvErr(); err != nil {
		return nil, err
	}
	if _, err := startupEnv(); err != nil {
		return nil, err
	}
	var eo emu.Options
	if b == Emulator {
		var err error
		if eo, err = emuOptions(opts); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	impl, err := open(ordinal)
	if err != nil {
		return nil, err
	}
	if ed, ok := impl.(*emuDevice); ok {
		ed.opts = eo
	}
	d := newDevice(impl, opts)
	d.noteOpen(start)
	return d, nil
}

// checkOptions refuses a nil Option (calling it would panic), naming its index.
func checkOptions(op string, opts []Option) error {
	for i, f := range opts {
		if f == nil {
			return fmt.Errorf("jit: %s: option %d (opts[%d]) is nil", op, i, i)
		}
	}
	return nil
}

func newDevice(impl device, opts []Option) *Device {
	o := Options{}
	for _, f := range opts {
		f(&o)
	}
	if o.Cache == nil {
		o.Cache = DefaultCache()
	}
	return &Device{impl: impl, info: impl.info(), cache: o.Cache, modules: map[*Module]struct{}{}}
}

// Info describes the device.
func (d *Device) Info() Info {
	if d == nil {
		return Info{}
	}
	return d.info
}

// ErrClosed is what a closed Device's methods report (wrapped with what was called).
var ErrClosed = errors.New("closed")

// usable returns an error naming op when d is nil or closed.
func (d *Device) usable(op string) error {
	if d == nil {
		return fmt.Errorf("jit: %s on a nil *Device", op)
	}
	if d.impl == nil {
		return fmt.Errorf("jit: %s on a zero Device, not opened (open one with Open or OpenBackend)", op)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return fmt.Errorf("jit: %s: %s is %w", op, d.describe(), ErrClosed)
	}
	return nil
}

// Cache returns the cubin cache the device uses.
func (d *Device) Cache() *Cache {
	if d == nil {
		return nil
	}
	return d.cache
}

// Close unloads the device's modules and releases it. Memory still allocated is freed with
// the device's context; NVSHMEM must be finalized first.
func (d *Device) Close() error {
	if d == nil {
		return errors.New("jit: Close of a nil *Device")
	}
	if d.impl == nil {
		return errors.New("jit: Close of a zero Device, not opened (open one with Open or OpenBackend)")
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	if d.shmem != nil && !d.shmem.finalized() {
		d.mu.Unlock()
		return errors.New("jit: Device.Close: NVSHMEM is still initialised on this device; call NVSHMEM.Finalize first")
	}
	mods := make([]*Module, 0, len(d.modules))
	for m := range d.modules {
		mods = append(mods, m)
	}
	d.mu.Unlock()
	var errs []error
	for _, m := range mods {
		errs = append(errs, m.Close())
	}
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	errs = append(errs, d.impl.close())
	return errors.Join(errs...)
}

// Synchronize waits for all work on the device.
func (d *Device) Synchronize() error {
	if err := d.usable("Synchronize"); err != nil {
		return err
	}
	return d.impl.synchronize()
}

// Source is what Load links and loads.
type Source struct {
	// Module is the kernel module; required: launches are checked against its parameters.
	Module *ptx.Module
	// PTX is Module's text; empty means ptx.Print(Module).
	PTX []byte
	// DevLib is NVSHMEM's device library; the GPU backend requires it when Module calls
	// NVSHMEM functions (the emulator implements them itself).
	DevLib *DevLib
	// Name names the module in link logs and errors (default: its first kernel's name).
	Name string
	// Params gives, per kernel, what its builder declared of its parameters
	// (dsl.Kernel.Params): optional; with it, struct launches (LaunchArgs) check pointers'
	// element types and scalars' types, and accept AnyPtr.
	Params map[string][]ParamInfo
}

// DevLib is a built NVSHMEM device library (package nvshmem/devlib makes one).
type DevLib struct {
	PTX     []byte // the device-library PTX (llc output of libnvshmem_device.bc's functions)
	Archive string // the path of libnvshmem_device.a (linked as CU_JIT_INPUT_LIBRARY)
	Version string // the NVSHMEM version both came from, "3.4.5"; checked against the host library
	// Objects are relocatable cubins of the device functions (devlib.Set.ObjectList: one per
	// function, compiled once and cached by nvshmem/devlib), linked as CU_JIT_INPUT_CUBIN
	// beside or instead of PTX, so the link compiles nothing of NVSHMEM.
	Objects [][]byte
}

// LoadStats says how a module was produced.
type LoadStats struct {
	CacheHit bool
	Link     time.Duration // PTX -> cubin (cuLink*); zero on a cache hit
	Load     time.Duration // cuModuleLoadData (+ nvshmemx_cumodule_init)
	CubinLen int
	Key      string // the cache key ("" when the cache is off)
}

// Module is a loaded module.
type Module struct {
	d       *Device
	src     *ptx.Module
	name    string
	impl    module
	stats   LoadStats
	shmem   bool // calls NVSHMEM: nvshmemx_cumodule_init ran
	mu      sync.Mutex
	closed  bool
	entries map[string]*ptx.Func
	params  map[string][]ParamInfo
	funcs   map[string]*Function // looked up once (a GPU lookup checks every parameter)
}

// NVSHMEMCalls lists the NVSHMEM functions a module declares (extern .func nvshmem*), sorted.
func NVSHMEMCalls(m *ptx.Module) []string {
	var out []string
	if m == nil {
		return nil
	}
	for _, f := range m.Funcs {
		if f != nil && f.Extern && !f.Entry && (strings.HasPrefix(f.Name, "nvshmem") || strings.HasPrefix(f.Name, "nvshmemx")) {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Load links src (with NVSHMEM's device library when it calls NVSHMEM) and loads it. A module
// that calls NVSHMEM needs InitNVSHMEM on this device first (its module gets
// nvshmemx_cumodule_init).
func (d *Device) Load(src Source) (*Module, error) {
	if err := d.usable("Load"); err != nil {
		return nil, err
	}
	if src.Module == nil {
		return nil, errors.New("jit: Load: Source.Module is nil; pass the *ptx.Module the PTX came from (launch arguments are checked against it)")
	}
	entries := map[string]*ptx.Func{}
	first := ""
	for i, f := range src.Module.Funcs {
		if f == nil {
			return nil, fmt.Errorf("jit: Load: Source.Module.Funcs[%d] is nil", i)
		}
		if f.Entry && !f.Extern {
			entries[f.Name] = f
			if first == "" {
				first = f.Name
			}
		}
	}
	if len(entries) == 0 {
		return nil, errors.New("jit: Load: the module has no kernel (.entry)")
	}
	name := src.Name
	if name == "" {
		name = first
	}
	ename := errName(name) // the module in errors
	if d.info.Backend == Emulator {
		// The GPU's ptxas refuses a module that breaks PTX's rules; the emulator would run
		// it, making it look good. Refuse it as the GPU would, before it runs.
		if err := ptx.Verify(src.Module); err != nil {
			return nil, fmt.Errorf("jit: Load of %s: the module fails ptx.Verify (ptxas would refuse it): %w", ename, err)
		}
	}
	for entry, info := range src.Params {
		if err := checkParamInfo(entries[entry], entry, info); err != nil {
			return nil, fmt.Errorf("jit: Load of %s: Source.Params: %w", ename, err)
		}
	}
	calls := NVSHMEMCalls(src.Module)
	if len(calls) > 0 {
		if src.DevLib == nil && d.info.Backend == GPU {
			return nil, fmt.Errorf("jit: module %s calls NVSHMEM (%s) but Source.DevLib is nil; build the device library with package nvshmem/devlib and pass it", ename, excerpt.Cut(strings.Join(calls, ", "), maxErrSignature))
		}
		d.mu.Lock()
		sh := d.shmem
		d.mu.Unlock()
		if sh == nil || sh.finalized() {
			return nil, fmt.Errorf("jit: module %s calls NVSHMEM (%s): call jit.InitNVSHMEM on this device before loading it", ename, excerpt.Cut(strings.Join(calls, ", "), maxErrSignature))
		}
		if src.DevLib != nil {
			if err := sh.checkDevLib(src.DevLib); err != nil {
				return nil, err
			}
		}
	}
	text := src.PTX
	if len(text) == 0 {
		var b strings.Builder
		if err := ptx.Print(&b, src.Module); err != nil {
			return nil, fmt.Errorf("jit: module %s: printing PTX: %w", ename, err)
		}
		text = []byte(b.String())
	}
	req := &loadRequest{name: name, ptx: text, userPTX: len(src.PTX) > 0, mod: src.Module, devlib: src.DevLib, shmem: len(calls) > 0}
	if len(calls) > 0 {
		d.mu.Lock()
		req.nvshmem = d.shmem
		d.mu.Unlock()
	}
	impl, stats, err := d.impl.load(req, d.cache)
	if err != nil {
		return nil, err
	}
	if req.shmem {
		t0 := time.Now()
		if err := req.nvshmem.impl.moduleInit(impl); err != nil {
			impl.unload()
			return nil, fmt.Errorf("jit: module %s: %w", ename, err)
		}
		stats.Load += time.Since(t0)
	}
	d.noteLoad(stats)
	m := &Module{d: d, src: src.Module, name: name, impl: impl, stats: stats, shmem: len(calls) > 0, entries: entries, params: src.Params}
	d.mu.Lock()
	d.modules[m] = struct{}{}
	d.mu.Unlock()
	return m, nil
}

// Stats says whether the module came from the cache and how long linking and loading took.
func (m *Module) Stats() LoadStats {
	if m == nil {
		return LoadStats{}
	}
	return m.stats
}

// Source returns the ptx.Module the module was loaded from.
func (m *Module) Source() *ptx.Module {
	if m == nil {
		return nil
	}
	return m.src
}

// Close unloads the module (after nvshmemx_cumodule_finalize when it calls NVSHMEM).
func (m *Module) Close() error {
	if m == nil {
		return errors.New("jit: Close of a nil *Module")
	}
	if m.d == nil || m.impl == nil {
		return errors.New("jit: Close of a zero Module, not loaded (load one with Device.Load)")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.d.mu.Lock()
	delete(m.d.modules, m)
	sh := m.d.shmem
	m.d.mu.Unlock()
	var ferr error
	if m.shmem && sh != nil {
		ferr = sh.impl.moduleFinalize(m.impl)
	}
	return errors.Join(ferr, m.impl.unload())
}

// Function looks up a kernel by name. The first lookup of a name asks the backend (on a GPU,
// cuModuleGetFunction and a check of every parameter); later ones return the same Function.
func (m *Module) Function(name string) (*Function, error) {
	if m == nil {
		return nil, fmt.Errorf("jit: Function(%s) of a nil *Module", excerpt.Quote(name))
	}
	if m.d == nil || m.impl == nil {
		return nil, fmt.Errorf("jit: Function(%s) of a zero Module, not loaded (load one with Device.Load)", excerpt.Quote(name))
	}
	m.mu.Lock()
	f, ok := m.funcs[name]
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("jit: module %s is closed", errName(m.name))
	}
	if ok {
		return f, nil
	}
	f, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.funcs[name]; ok {
		return prev, nil
	}
	if m.funcs == nil {
		m.funcs = map[string]*Function{}
	}
	m.funcs[name] = f
	return f, nil
}

func (m *Module) lookup(name string) (*Function, error) {
	sig, ok := m.entries[name]
	if !ok {
		var names []string
		for n := range m.entries {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("jit: module %s has no kernel %s (kernels: %s)", errName(m.name), excerpt.Quote(name), excerpt.Cut(strings.Join(names, ", "), maxErrSignature))
	}
	f, err := m.impl.function(name)
	if err != nil {
		return nil, err
	}
	return &Function{m: m, sig: sig, impl: f, info: m.params[name], offs: wordOffsets(sig)}, nil
}

// Function is a kernel of a loaded module.
type Function struct {
	m     *Module
	sig   *ptx.Func
	impl  function
	info  []ParamInfo // nil when the loader was not told
	plans plans       // struct launches' encodings, by struct type
	offs  []int       // each parameter's first word in an encoded launch (nil: word i)
}

// Name returns the kernel's name.
func (f *Function) Name() string {
	if f == nil || f.sig == nil {
		return ""
	}
	return f.sig.Name
}

// Params returns the kernel's parameter list.
func (f *Function) Params() []ptx.Param {
	if f == nil || f.sig == nil {
		return nil
	}
	return f.sig.Params
}

// LaunchConfig is a launch's shape.
type LaunchConfig struct {
	Grid, Block Dim3
	SharedMem   int     // dynamic shared memory, bytes
	Stream      *Stream // nil: the default stream
	// Collective is accepted for compatibility and ignored: the emulator once gathered the
	// ranks' launches into one lockstep launch; it now runs every launch on its own stream,
	// beside the other ranks' kernels, as GPUs do (so CollectiveOff on a kernel that waits
	// for other GPUs works). See CollectiveMode.
	Collective CollectiveMode
	// Context bounds, on the emulator, every wait for this launch's kernel (a synchronizing
	// call of the rank while the kernel has not finished; nil: no bound but
	// RanksOptions.Context): when it ends first, the wait fails with its error, naming the
	// ranks that never made the launch's Call.
	Context context.Context
	// Call describes the collective operation this launch is part of (for example
	// "AllReduce of 302 f32 by sum"), which every rank must make alike. On the emulator it
	// names the launch in errors, and once every rank has made its k-th launch with a Call
	// they are compared (nothing waits for that): when they differ, every rank fails (from
	// its next call) naming the ranks that differ. The GPU backend does not compare it (that
	// would cost an exchange between the GPUs on every launch).
	Call string
	// CoResident says the grid's blocks wait on each other (a grid barrier, every
	// collective): all of them must be resident at once, or the grid deadlocks. Launch then
	// refuses a grid larger than the device holds at once, naming the limit; the GPU backend
	// launches it cooperatively (cuLaunchCooperativeKernel), the emulator checks the same
	// limit from its per-SM model (EmuSMThreads, EmuSMBlocks, EmuSMShared).
	CoResident bool
	// Cluster, when set, groups the grid's blocks into thread-block clusters of this shape
	// (sm_90+): each dimension divides the grid's, and a cluster holds at most
	// MaxClusterBlocks blocks (MaxNonPortableClusterBlocks with NonPortableCluster). The
	// blocks of a cluster run at once and share their shared memory (shared::cluster,
	// barrier.cluster, TMA multicast). The GPU launches through cuLaunchKernelEx with
	// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; the emulator through emu.Launch.Cluster.
	Cluster Dim3
	// NonPortableCluster allows clusters of up to 16 blocks (the GPU sets the kernel's
	// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED; H100 runs them).
	NonPortableCluster bool
	// PDL (programmatic dependent launch, sm_90+) lets the GPU start this kernel before the
	// previous kernel in its stream has finished, once every block of that one has executed
	// griddepcontrol.launch_dependents or exited; the kernel must execute
	// griddepcontrol.wait before it reads what the previous one wrote (it waits for that
	// grid's completion and memory flush). The GPU launches through cuLaunchKernelEx with
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; the emulator runs a stream's
	// launches one after the other, which PDL allows.
	PDL bool
}

// MaxClusterBlocks is the largest portable cluster; MaxNonPortableClusterBlocks the largest
// with LaunchConfig.NonPortableCluster (sm_90).
const (
	MaxClusterBlocks            = 8
	MaxNonPortableClusterBlocks = 16
)

// checkCluster checks the launch's cluster and PDL settings against grid g on a device of
// compute capability sm.
func (cfg *LaunchConfig) checkCluster(g Dim3, sm int) error {
	if cfg.Cluster == (Dim3{}) {
		if cfg.NonPortableCluster {
			return fmt.Errorf("NonPortableCluster without a Cluster shape")
		}
	} else {
		c := cfg.Cluster.norm()
		limit, what := MaxClusterBlocks, "the portable limit; set NonPortableCluster for up to 16"
		if cfg.NonPortableCluster {
			limit, what = MaxNonPortableClusterBlocks, "the non-portable limit"
		}
		switch n := c.X * c.Y * c.Z; {
		case c.X < 1 || c.Y < 1 || c.Z < 1:
			return fmt.Errorf("cluster %s must be positive", dimString(cfg.Cluster))
		case sm < 90:
			return fmt.Errorf("cluster %s: thread-block clusters need sm_90 or newer, the device is sm_%d", dimString(c), sm)
		case g.X%c.X != 0 || g.Y%c.Y != 0 || g.Z%c.Z != 0:
			return fmt.Errorf("grid %s is not a whole number of clusters %s (each cluster dimension must divide the grid's)", dimString(g), dimString(c))
		case n > limit:
			return fmt.Errorf("cluster %s has %d blocks, more than %d (%s)", dimString(c), n, limit, what)
		case cfg.CoResident:
			return fmt.Errorf("cluster %s with CoResident: a cooperative launch takes no clusters here", dimString(c))
		}
	}
	if cfg.PDL {
		switch {
		case sm < 90:
			return fmt.Errorf("PDL (programmatic dependent launch) needs sm_90 or newer, the device is sm_%d", sm)
		case cfg.CoResident:
			return fmt.Errorf("PDL with CoResident: a cooperative launch takes no programmatic dependency here")
		}
	}
	return nil
}

// CollectiveMode once said how the emulator gathered a launch with the other ranks'. Both
// backends now accept and ignore it: every launch runs on its stream, beside the other
// ranks' kernels (docs/jit.md, "Launches on the emulator").
type CollectiveMode int

const (
	// CollectiveAuto is the default.
	CollectiveAuto CollectiveMode = iota
	// CollectiveOn marks a launch whose kernel waits for the other ranks' (documentation
	// only: such kernels run beside theirs in every mode).
	CollectiveOn
	// CollectiveOff marks a launch that runs on its GPU alone (documentation only).
	CollectiveOff
)

// exLauncher is a function that launches with clusters and PDL (the GPU: cuLaunchKernelEx).
type exLauncher interface {
	launchEx(grid, block Dim3, shared int, s stream, args []uint64, cfg *LaunchConfig) error
}

// modalLauncher is a function that takes the LaunchConfig's Collective mode (the emulator).
type modalLauncher interface {
	launchMode(grid, block Dim3, shared int, s stream, args []uint64, cfg *LaunchConfig) error
}

// Launch runs the kernel. The arguments are checked against the kernel's parameters: their
// count, and each one's size and kind (pointers for .u64/.b64, Go scalars of the parameter's
// width: float32 for .f32, uint16 bits for .f16/.bf16, int32/uint32 for 32-bit integers...).
// A byte-array parameter wider than 8 bytes takes a TensorMap (a 64-byte-aligned 128-byte
// tensor-map parameter of a map made on this device) or a []byte of its size. A *Buffer or
// *Memory argument must live on the function's device (an error names both); raw addresses
// (DevicePtr, the TypedPtr of Buffer.Ptr and Buffer.At, AnyPtr) carry no device and cannot
// be checked. Launch does not wait.
func (f *Function) Launch(cfg LaunchConfig, args ...any) error {
	if f == nil || f.m == nil || f.sig == nil {
		return errors.New("jit: Launch of a nil *Function (look kernels up with Module.Function)")
	}
	slots, err := encodeArgs(f.sig, args, f.m.d, f.info)
	if err != nil {
		return err
	}
	return f.launch(cfg, slots)
}

// launch runs the kernel with encoded parameter words.
func (f *Function) launch(cfg LaunchConfig, slots []uint64) error {
	var err error
	g, b := cfg.Grid.norm(), cfg.Block.norm()
	if g.X < 1 || g.Y < 1 || g.Z < 1 || b.X < 1 || b.Y < 1 || b.Z < 1 {
		return fmt.Errorf("jit: launch of %s: grid %v and block %v must be positive", errName(f.sig.Name), cfg.Grid, cfg.Block)
	}
	if err := checkDims(g, b); err != nil {
		return fmt.Errorf("jit: launch of %s: %w", errName(f.sig.Name), err)
	}
	if err := checkShared(cfg.SharedMem); err != nil {
		return fmt.Errorf("jit: launch of %s: %w", errName(f.sig.Name), err)
	}
	if err := cfg.checkCluster(g, f.m.d.info.SM); err != nil {
		return fmt.Errorf("jit: launch of %s: %w", errName(f.sig.Name), err)
	}
	f.m.mu.Lock()
	closed := f.m.closed
	f.m.mu.Unlock()
	if closed {
		return fmt.Errorf("jit: launch of %s: its module was closed", errName(f.sig.Name))
	}
	s, err := cfg.Stream.useOn("launch of "+errName(f.sig.Name), f.m.d)
	if err != nil {
		return err
	}
	if cfg.Collective < CollectiveAuto || cfg.Collective > CollectiveOff {
		return fmt.Errorf("jit: launch of %s: unknown Collective mode %d", errName(f.sig.Name), cfg.Collective)
	}
	if cfg.CoResident {
		cl, ok := f.impl.(coLauncher)
		if !ok {
			return fmt.Errorf("jit: launch of %s: the %s backend cannot launch a co-resident grid", errName(f.sig.Name), f.m.d.info.Backend)
		}
		n, rerr := cl.residentBlocks(b, cfg.SharedMem)
		if rerr != nil {
			return fmt.Errorf("jit: launch of %s: %w", errName(f.sig.Name), rerr)
		}
		if blocks := int64(g.X) * int64(g.Y) * int64(g.Z); blocks > int64(n) {
			return fmt.Errorf("jit: launch of %s: grid %dx%dx%d has %d blocks of %dx%dx%d threads, but at most %d can be resident at once on %s (%s); its blocks wait on each other (CoResident), so use a grid of at most %d blocks",
				errName(f.sig.Name), g.X, g.Y, g.Z, blocks, b.X, b.Y, b.Z, n, f.m.d.describe(), cl.residentLimit(b, cfg.SharedMem), n)
		}
	}
	run := func() error { return f.dispatch(g, b, s, slots, &cfg) }
	if c := cfg.Stream.capturing(); c != nil {
		err = c.record(f, cfg, g, b, slots, run)
	} else {
		err = run()
	}
	if err != nil {
		return fmt.Errorf("jit: launch of %s: %w", errName(f.sig.Name), err)
	}
	f.m.d.noteLaunch()
	return nil
}

// ResidentBlocks returns how many blocks of shape block with shared bytes of dynamic
// shared memory can be resident on f's device at once: the largest grid a CoResident launch
// takes (the occupancy calculator's blocks per SM times the SMs on a GPU; the emulator's
// per-SM model there). A backend that cannot launch co-resident grids returns an error.
func (f *Function) ResidentBlocks(block Dim3, shared int) (int, error) {
	if f == nil || f.m == nil || f.sig == nil {
		return 0, errors.New("jit: ResidentBlocks of a nil *Function (look kernels up with Module.Function)")
	}
	cl, ok := f.impl.(coLauncher)
	if !ok {
		return 0, fmt.Errorf("jit: %s: the %s backend cannot launch a co-resident grid", errName(f.sig.Name), f.m.d.info.Backend)
	}
	if b := block.norm(); b.X <= 0 || b.Y <= 0 || b.Z <= 0 || shared < 0 {
		return 0, fmt.Errorf("jit: %s: resident blocks of %dx%dx%d threads with %d bytes of shared memory: want a positive block and non-negative shared memory", errName(f.sig.Name), block.X, block.Y, block.Z, shared)
	}
	if err := checkBlock(block.norm()); err != nil {
		return 0, fmt.Errorf("jit: %s: resident blocks: %w", errName(f.sig.Name), err)
	}
	if err := checkShared(shared); err != nil {
		return 0, fmt.Errorf("jit: %s: resident blocks: %w", errName(f.sig.Name), err)
	}
	f.m.mu.Lock()
	closed := f.m.closed
	f.m.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("jit: %s: its module was closed", errName(f.sig.Name))
	}
	n, err := cl.residentBlocks(block.norm(), shared)
	if err != nil {
		return 0, fmt.Errorf("jit: %s: %w", errName(f.sig.Name), err)
	}
	return n, nil
}

// dispatch hands an encoded launch to the backend: co-resident, with the launch's
// configuration (the emulator), or plain.
func (f *Function) dispatch(g, b Dim3, s stream, slots []uint64, cfg *LaunchConfig) error {
	if cfg.CoResident {
		if cl, ok := f.impl.(coLauncher); ok {
			return cl.launchCoResident(g, b, cfg.SharedMem, s, slots, cfg)
		}
	}
	if ml, ok := f.impl.(modalLauncher); ok {
		return ml.launchMode(g, b, cfg.SharedMem, s, slots, cfg)
	}
	if cfg.Cluster != (Dim3{}) || cfg.PDL {
		xl, ok := f.impl.(exLauncher)
		if !ok {
			return fmt.Errorf("the %s backend cannot launch with clusters or PDL", f.m.d.info.Backend)
		}
		return xl.launchEx(g, b, cfg.SharedMem, s, slots, cfg)
	}
	return f.impl.launch(g, b, cfg.SharedMem, s, slots)
}

// Memory is a device allocation.
type Memory struct {
	d     *Device
	ptr   DevicePtr
	size  int64
	free  func(DevicePtr) error
	mu    sync.Mutex
	freed bool
	// freeCtx, when set, frees with a context (symmetric memory: a collective free).
	freeCtx func(ctx context.Context, p DevicePtr) error
}

// DevPtr returns the allocation's address.
func (m *Memory) DevPtr() DevicePtr {
	if m == nil {
		return 0
	}
	return m.ptr
}

// Size returns the allocation's size in bytes.
func (m *Memory) Size() int64 {
	if m == nil {
		return 0
	}
	return m.size
}

// Device returns the device the memory lives on.
func (m *Memory) Device() *Device {
	if m == nil {
		return nil
	}
	return m.d
}

func (m *Memory) isFreed() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.freed
}

// Free releases the memory (a second Free does nothing). For symmetric memory it is
// collective: FreeContext with no deadline.
func (m *Memory) Free() error { return m.FreeContext(context.Background()) }

// FreeContext is Free bounded by ctx: the free of symmetric memory (NVSHMEM.Malloc) is
// collective, and on the emulator a rank that never frees fails the wait when ctx ends,
// naming the ranks missing; on GPUs nvshmem_free cannot be abandoned once entered (an
// ended ctx is refused before it). Private memory ignores ctx.
func (m *Memory) FreeContext(ctx context.Context) error {
	if m == nil || m.free == nil {
		return errors.New("jit: Free of a nil *Memory or a zero Memory{} (memory comes from Device.Alloc)")
	}
	if ctx == nil {
		return errors.New("jit: FreeContext: nil context")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return nil
	}
	// Device.Close released the memory already: the backend must not see the address again
	// (another Open may have reused it).
	if m.d != nil {
		if err := m.d.usable("Free"); err != nil {
			return err
		}
	}
	if m.freeCtx != nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("jit: Free: %w", err)
		}
		m.freed = true
		return m.freeCtx(ctx, m.ptr)
	}
	m.freed = true
	return m.free(m.ptr)
}

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int64) (*Memory, error) {
	if err := d.usable("Alloc"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("jit: Alloc(%d): size must be positive", n)
	}
	if err := d.fits("Alloc", n); err != nil {
		return nil, err
	}
	p, err := d.impl.alloc(n)
	if err != nil {
		return nil, fmt.Errorf("jit: allocating %d bytes on %s: %w", n, d.describe(), err)
	}
	return &Memory{d: d, ptr: p, size: n, free: d.impl.free}, nil
}

// fits refuses n bytes more than the device's memory, before asking the backend (the
// emulator's memory is host memory; a huge request would end the process).
func (d *Device) fits(op string, n int64) error {
	if d.info.TotalMem > 0 && n > d.info.TotalMem {
		return fmt.Errorf("jit: %s of %d bytes: more than the %d bytes of memory of %s", op, n, d.info.TotalMem, d.describe())
	}
	return nil
}

// bytesFor returns n values of elemSize bytes in bytes, or an error naming op when n is not
// positive or the product overflows.
func bytesFor(op string, n int, elemSize uintptr) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("jit: %s(%d): the length must be positive", op, n)
	}
	if int64(n) > math.MaxInt64/int64(elemSize) {
		return 0, fmt.Errorf("jit: %s(%d): %d values of %d bytes overflow a 64-bit size", op, n, n, elemSize)
	}
	return int64(n) * int64(elemSize), nil
}

func (d *Device) describe() string {
	return fmt.Sprintf("%s device %d (%s)", d.info.Backend, d.info.Ordinal, d.info.Name)
}

// CopyHtoD copies src to device address dst and waits.
func (d *Device) CopyHtoD(dst DevicePtr, src []byte) error {
	if err := d.usable("CopyHtoD"); err != nil {
		return err
	}
	return d.impl.copyHtoD(dst, src, nil)
}

// CopyDtoH copies len(dst) bytes from device address src and waits.
func (d *Device) CopyDtoH(dst []byte, src DevicePtr) error {
	if err := d.usable("CopyDtoH"); err != nil {
		return err
	}
	return d.impl.copyDtoH(dst, src, nil)
}

// CopyDtoD copies n bytes between device addresses and waits. Overlapping source and
// destination ranges are an error (the copy is undefined there).
func (d *Device) CopyDtoD(dst, src DevicePtr, n int64) error {
	if err := d.usable("CopyDtoD"); err != nil {
		return err
	}
	if err := disjoint("CopyDtoD", dst, src, n); err != nil {
		return err
	}
	return d.impl.copyDtoD(dst, src, n, nil)
}

// disjoint refuses a copy of a negative byte count, and one of n bytes from src to dst whose
// ranges overlap: cuMemcpy's result is undefined there.
func disjoint(op string, dst, src DevicePtr, n int64) error {
	if n < 0 {
		return fmt.Errorf("jit: %s of %d bytes: the byte count is negative", op, n)
	}
	if n == 0 {
		return nil
	}
	gap := uint64(dst) - uint64(src)
	if src > dst {
		gap = uint64(src) - uint64(dst)
	}
	if gap >= uint64(n) {
		return nil
	}
	return fmt.Errorf("jit: %s: the destination [%#x, %#x) and the source [%#x, %#x) overlap (%d bytes each); a device copy between overlapping ranges is undefined: copy through a temporary buffer",
		op, uint64(dst), uint64(dst)+uint64(n), uint64(src), uint64(src)+uint64(n), n)
}

// Elem is the element types of a Buffer.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Buffer is device memory holding n values of type T (f16/bf16 data as uint16 bits).
type Buffer[T Elem] struct {
	mem *Memory
	n   int
}

// Alloc allocates a buffer of n values of T on d.
func Alloc[T Elem](d *Device, n int) (*Buffer[T], error) {
	var z T
	bytes, err := bytesFor("Alloc", n, unsafe.Sizeof(z))
	if err != nil {
		return nil, err
	}
	m, err := d.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	return &Buffer[T]{mem: m, n: n}, nil
}

// BufferOf views memory as n values of T (n*sizeof(T) must fit).
func BufferOf[T Elem](m *Memory, n int) (*Buffer[T], error) {
	var z T
	if m == nil {
		return nil, errors.New("jit: BufferOf a nil *Memory")
	}
	if n < 0 || int64(n) > m.size/int64(unsafe.Sizeof(z)) {
		return nil, fmt.Errorf("jit: BufferOf: %d values of %d bytes do not fit in %d bytes", n, unsafe.Sizeof(z), m.size)
	}
	return &Buffer[T]{mem: m, n: n}, nil
}

// Len returns the number of values.
func (b *Buffer[T]) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Memory returns the underlying allocation.
func (b *Buffer[T]) Memory() *Memory {
	if b == nil {
		return nil
	}
	return b.mem
}

// DevPtr returns the buffer's address.
func (b *Buffer[T]) DevPtr() DevicePtr { return b.Memory().DevPtr() }

// Free releases the buffer's memory.
func (b *Buffer[T]) Free() error {
	if b == nil || b.mem == nil {
		return errors.New("jit: Free of a nil *Buffer or a zero Buffer{} (buffers come from Alloc or BufferOf)")
	}
	return b.mem.Free()
}

func (b *Buffer[T]) isFreed() bool { return b == nil || b.mem == nil || b.mem.isFreed() }

// Freed reports whether the buffer's memory was freed (Free); a nil buffer counts as freed.
func (b *Buffer[T]) Freed() bool { return b.isFreed() }

func sizeOf[T Elem](z T) uintptr { return unsafe.Sizeof(z) }

func bytesOf[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

func (b *Buffer[T]) check(op string, n int) error {
	if b == nil || b.mem == nil {
		return fmt.Errorf("jit: %s of a nil *Buffer or a zero Buffer{} (buffers come from Alloc or BufferOf)", op)
	}
	if b.mem.isFreed() {
		return fmt.Errorf("jit: %s: the buffer was freed", op)
	}
	if err := b.mem.d.usable(op); err != nil {
		return err
	}
	if n > b.n {
		return fmt.Errorf("jit: %s: %d values do not fit in a buffer of %d", op, n, b.n)
	}
	return nil
}

// CopyFromHost copies src into the start of the buffer and waits.
func (b *Buffer[T]) CopyFromHost(src []T) error { return b.CopyFromHostAsync(src, nil) }

// CopyToHost copies the start of the buffer into dst and waits.
func (b *Buffer[T]) CopyToHost(dst []T) error { return b.CopyToHostAsync(dst, nil) }

// CopyFromHostAsync copies src into the buffer in stream order (nil: default stream, and
// waits). src must stay alive and unchanged until the stream reaches the copy.
func (b *Buffer[T]) CopyFromHostAsync(src []T, s *Stream) error {
	if err := b.check("CopyFromHost", len(src)); err != nil {
		return err
	}
	st, err := s.useOn("CopyFromHost", b.mem.d)
	if err != nil {
		return err
	}
	return b.mem.d.impl.copyHtoD(b.mem.ptr, bytesOf(src), st)
}

// CopyToHostAsync copies the buffer into dst in stream order (nil: default stream, and waits).
func (b *Buffer[T]) CopyToHostAsync(dst []T, s *Stream) error {
	if err := b.check("CopyToHost", len(dst)); err != nil {
		return err
	}
	st, err := s.useOn("CopyToHost", b.mem.d)
	if err != nil {
		return err
	}
	return b.mem.d.impl.copyDtoH(bytesOf(dst), b.mem.ptr, st)
}

// CopyFrom copies all of src (device to device) into the buffer and waits.
func (b *Buffer[T]) CopyFrom(src *Buffer[T]) error { return b.CopyFromAsync(src, nil) }

// CopyFromAsync copies src into the buffer in stream order (nil: default stream, and waits).
func (b *Buffer[T]) CopyFromAsync(src *Buffer[T], s *Stream) error {
	if src == nil || src.mem == nil {
		return errors.New("jit: CopyFrom: the source is a nil *Buffer")
	}
	if src.mem.isFreed() {
		return errors.New("jit: CopyFrom: the source buffer was freed")
	}
	if err := b.check("CopyFrom", src.n); err != nil {
		return err
	}
	if sd := src.mem.d; sd != b.mem.d {
		sn, dn := describePair(sd, b.mem.d)
		return fmt.Errorf("jit: CopyFrom: the source buffer belongs to %s, the destination to %s: copy between devices through the host", sn, dn)
	}
	st, err := s.useOn("CopyFrom", b.mem.d)
	if err != nil {
		return err
	}
	var z T
	n := int64(src.n) * int64(unsafe.Sizeof(z))
	if err := disjoint("CopyFrom", b.mem.ptr, src.mem.ptr, n); err != nil {
		return err
	}
	return b.mem.d.impl.copyDtoD(b.mem.ptr, src.mem.ptr, n, st)
}

// Stream is an ordered queue of device work.
type Stream struct {
	d      *Device
	impl   stream
	capt   atomic.Pointer[capture] // the capture in progress (BeginCapture), or nil
	closed atomic.Bool
}

// Device returns the device the stream belongs to (nil for a nil stream).
func (s *Stream) Device() *Device {
	if s == nil {
		return nil
	}
	return s.d
}

// use returns the backend stream for op (nil for the default stream, s == nil), or an error
// naming what is closed: the stream (Stream.Close) or its device (Device.Close).
func (s *Stream) use(op string) (stream, error) {
	if s == nil {
		return nil, nil
	}
	if s.impl == nil {
		return nil, fmt.Errorf("jit: %s: a zero Stream, not made by Device.NewStream", op)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("jit: %s: the stream is %w (Stream.Close was called)", op, ErrClosed)
	}
	if err := s.d.usable(op + " on a stream"); err != nil {
		return nil, err
	}
	return s.impl, nil
}

// useOn is use for work of device d (nil: any): a stream of another device (another Open of
// the same ordinal included) is an error naming both, since the work would be queued on the
// stream's device.
func (s *Stream) useOn(op string, d *Device) (stream, error) {
	st, err := s.use(op)
	if err != nil || s == nil || d == nil || s.d == d {
		return st, err
	}
	sd, wd := describePair(s.d, d)
	return nil, fmt.Errorf("jit: %s: the stream belongs to %s, the work to %s: use a stream of the work's device (or nil, its default stream)", op, sd, wd)
}

// describePair describes two distinct devices, the first as "another Open of" the second
// when both are Opens of one GPU.
func describePair(a, b *Device) (string, string) {
	ad, bd := a.describe(), b.describe()
	if ad == bd {
		ad = "another Open of " + ad
	}
	return ad, bd
}

// owner is the device a *Memory or *Buffer lives on (nil for nil).
func (m *Memory) owner() *Device    { return m.Device() }
func (b *Buffer[T]) owner() *Device { return b.Memory().Device() }

// onDevice returns an error naming both devices when p is memory (*Memory, *Buffer) of a
// device other than d, the launch's (nil: any). Raw addresses carry no device: unchecked.
func onDevice(p any, d *Device) error {
	o, ok := p.(interface{ owner() *Device })
	if !ok || d == nil {
		return nil
	}
	od := o.owner()
	if od == nil || od == d {
		return nil
	}
	md, wd := describePair(od, d)
	return fmt.Errorf("the %T belongs to %s, the work to %s: pass memory of the launching device", p, md, wd)
}

// NewStream creates a stream.
func (d *Device) NewStream() (*Stream, error) {
	if err := d.usable("NewStream"); err != nil {
		return nil, err
	}
	s, err := d.impl.newStream()
	if err != nil {
		return nil, err
	}
	return &Stream{d: d, impl: s}, nil
}

// Synchronize waits for the stream's work. On a closed stream (or device) it returns an
// error wrapping ErrClosed.
func (s *Stream) Synchronize() error {
	if s == nil {
		return errors.New("jit: Synchronize of a nil *Stream")
	}
	st, err := s.use("Stream.Synchronize")
	if err != nil {
		return err
	}
	return st.synchronize()
}

// Close destroys the stream; a second Close does nothing. Every later use of the stream
// (launches, copies, captures, event records) returns an error wrapping ErrClosed.
func (s *Stream) Close() error {
	if s == nil {
		return errors.New("jit: Close of a nil *Stream")
	}
	if s.impl == nil {
		return errors.New("jit: Close of a zero Stream, not made by Device.NewStream")
	}
	if s.closed.Swap(true) {
		return nil
	}
	return s.impl.destroy()
}

// CopyHtoD enqueues a host-to-device copy; src must stay alive until it runs.
func (s *Stream) CopyHtoD(dst DevicePtr, src []byte) error {
	if s == nil {
		return errors.New("jit: CopyHtoD on a nil *Stream")
	}
	st, err := s.use("Stream.CopyHtoD")
	if err != nil {
		return err
	}
	return s.d.impl.copyHtoD(dst, src, st)
}

// CopyDtoH enqueues a device-to-host copy; dst is written when the stream reaches it.
func (s *Stream) CopyDtoH(dst []byte, src DevicePtr) error {
	if s == nil {
		return errors.New("jit: CopyDtoH on a nil *Stream")
	}
	st, err := s.use("Stream.CopyDtoH")
	if err != nil {
		return err
	}
	return s.d.impl.copyDtoH(dst, src, st)
}

// CopyDtoD enqueues a device-to-device copy of n bytes. Overlapping source and destination
// ranges are an error (the copy is undefined there).
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int64) error {
	if s == nil {
		return errors.New("jit: CopyDtoD on a nil *Stream")
	}
	st, err := s.use("Stream.CopyDtoD")
	if err != nil {
		return err
	}
	if err := disjoint("Stream.CopyDtoD", dst, src, n); err != nil {
		return err
	}
	return s.d.impl.copyDtoD(dst, src, n, st)
}

// WaitEvent makes the work enqueued on s after this call wait until e has happened (the
// work before the point where e was last recorded, on any stream of the device, is done):
// cuStreamWaitEvent. It does not block the host. An event never recorded is already done.
// The event may belong to another device (as CUDA allows); a closed stream, event or device
// is an error wrapping ErrClosed.
func (s *Stream) WaitEvent(e *Event) error {
	if s == nil || e == nil {
		return errors.New("jit: WaitEvent needs a non-nil *Stream and *Event")
	}
	if err := e.use("Stream.WaitEvent"); err != nil {
		return err
	}
	st, err := s.use("Stream.WaitEvent")
	if err != nil {
		return err
	}
	return st.waitEvent(e.impl)
}

// Event marks a point in a stream.
type Event struct {
	d      *Device
	impl   event
	closed atomic.Bool
}

// use returns an error naming what is closed (the event or its device) for op, else nil.
func (e *Event) use(op string) error {
	if e == nil {
		return fmt.Errorf("jit: %s of a nil *Event", op)
	}
	if e.impl == nil {
		return fmt.Errorf("jit: %s of a zero Event, not made by Device.NewEvent", op)
	}
	if e.closed.Load() {
		return fmt.Errorf("jit: %s: the event is %w (Event.Close was called)", op, ErrClosed)
	}
	if e.d != nil {
		return e.d.usable(op + " of an event")
	}
	return nil
}

// NewEvent creates an event (with timing).
func (d *Device) NewEvent() (*Event, error) {
	if err := d.usable("NewEvent"); err != nil {
		return nil, err
	}
	e, err := d.impl.newEvent()
	if err != nil {
		return nil, err
	}
	return &Event{d: d, impl: e}, nil
}

// Record records the event in s (nil: the default stream). A closed event, stream or device
// is an error wrapping ErrClosed.
func (e *Event) Record(s *Stream) error {
	if err := e.use("Event.Record"); err != nil {
		return err
	}
	st, err := s.useOn("Event.Record", e.d)
	if err != nil {
		return err
	}
	return e.impl.record(st)
}

// Synchronize waits until the event has happened.
func (e *Event) Synchronize() error {
	if err := e.use("Event.Synchronize"); err != nil {
		return err
	}
	return e.impl.synchronize()
}

// Elapsed returns the time between e and a later event end (both recorded and reached).
func (e *Event) Elapsed(end *Event) (time.Duration, error) {
	if e == nil || end == nil {
		return 0, errors.New("jit: Elapsed: both events must be non-nil (made by Device.NewEvent)")
	}
	if err := e.use("Event.Elapsed"); err != nil {
		return 0, err
	}
	if err := end.use("Event.Elapsed (end)"); err != nil {
		return 0, err
	}
	if e.d != end.d { // CUDA times only events of one context
		ed, nd := e.d.describe(), end.d.describe()
		if ed == nd {
			nd = "another Open of " + nd
		}
		return 0, fmt.Errorf("jit: Event.Elapsed: the start event belongs to %s, the end event to %s: time events of one device", ed, nd)
	}
	return e.impl.elapsed(end.impl)
}

// Close destroys the event; a second Close does nothing.
func (e *Event) Close() error {
	if e == nil {
		return errors.New("jit: Close of a nil *Event")
	}
	if e.impl == nil {
		return errors.New("jit: Close of a zero Event, not made by Device.NewEvent")
	}
	if e.closed.Swap(true) {
		return nil
	}
	return e.impl.destroy()
}

// The backend interfaces. A backend implements device; the front end above does the checking.

type loadRequest struct {
	name    string
	ptx     []byte
	userPTX bool // ptx came from Source.PTX (not printed from mod)
	mod     *ptx.Module
	devlib  *DevLib
	shmem   bool
	nvshmem *NVSHMEM
}

type device interface {
	info() Info
	// load links and loads req, consulting cache (which may be disabled).
	load(req *loadRequest, cache *Cache) (module, LoadStats, error)
	alloc(n int64) (DevicePtr, error)
	free(p DevicePtr) error
	// copies: a nil stream means the default stream, and the call waits for the copy.
	copyHtoD(dst DevicePtr, src []byte, s stream) error
	copyDtoH(dst []byte, src DevicePtr, s stream) error
	copyDtoD(dst, src DevicePtr, n int64, s stream) error
	newStream() (stream, error)
	newEvent() (event, error)
	synchronize() error
	close() error
}

type module interface {
	function(name string) (function, error)
	unload() error
}

type function interface {
	// launch runs with the encoded parameter words (EncodeArgs: one 8-byte word per parameter,
	// values in the low bytes, little-endian; a wider byte array in consecutive words).
	launch(grid, block Dim3, shared int, s stream, args []uint64) error
}

type stream interface {
	synchronize() error
	waitEvent(e event) error
	// stream memory operations (streammem.go); addr is non-zero and 4-byte aligned
	waitValue32(addr DevicePtr, value uint32, cond WaitCond) error
	writeValue32(addr DevicePtr, value uint32) error
	destroy() error
}

type event interface {
	record(s stream) error
	synchronize() error
	elapsed(end event) (time.Duration, error)
	destroy() error
}
