package jit

import (
	"context"
	"errors"
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// NVSHMEM is NVSHMEM's host library, initialised on one device for one process (one PE).
// Create it with InitNVSHMEM, finish with Finalize. Its methods are safe for concurrent use,
// but the collective ones (Malloc, Free, BarrierAll, Finalize) must be called by every PE in
// the same order, as NVSHMEM requires.
type NVSHMEM struct {
	d       *Device
	impl    shmemImpl
	rv      Rendezvous
	host    string // host library version, "3.4.5"
	libPath string
	mu      sync.Mutex
	done    bool
	mems    []*Memory // live symmetric allocations, in allocation order
}

// InitOptions configure InitNVSHMEM.
type InitOptions struct {
	// Rendezvous says who this PE is and where rank 0 listens; nil reads torchrun's
	// environment (RendezvousFromEnv).
	Rendezvous *Rendezvous
	// Timeout bounds the unique-ID exchange (default $KGEN_BOOTSTRAP_TIMEOUT or 60s).
	Timeout time.Duration
	// LibPath is libnvshmem_host.so.3 to load; empty searches (see FindNVSHMEMHost).
	LibPath string
}

// MulticastError says why a multicast address is unavailable.
type MulticastError struct{ Reason string }

func (e *MulticastError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return "jit: no NVSHMEM multicast address: " + e.Reason
}

// VersionError reports a device library built from another NVSHMEM than the host library.
type VersionError struct{ DevLib, Host, HostPath string }

func (e *VersionError) Error() string {
	if e == nil {
		return "<nil>"
	}
	c := func(s string) string { return excerpt.Cut(s, 256) } // a DevLib.Version of 1 MB was quoted whole
	return fmt.Sprintf("jit: NVSHMEM device library was built from NVSHMEM %s but the host library %s is %s; rebuild the device library (nvshmem/devlib) from the same NVSHMEM as the host library, or point NVSHMEM_HOME at the matching one", c(e.DevLib), c(e.HostPath), c(e.Host))
}

// InitNVSHMEM initialises NVSHMEM on d with a unique-ID bootstrap: rank 0 asks NVSHMEM for
// the 128-byte unique ID and serves it over TCP at the rendezvous address; every rank then
// calls nvshmemx_set_attr_uniqueid_args and nvshmemx_hostlib_init_attr(WITH_UNIQUEID).
// d should be GPU LOCAL_RANK of its node.
//
// On the emulator the PEs are the ranks of RunRanks (goroutines sharing one emulated
// machine): the rank and world come from d, there is no bootstrap, and the call is collective
// across the ranks. A device opened outside RunRanks is PE 0 of 1.
func InitNVSHMEM(d *Device, o InitOptions) (*NVSHMEM, error) {
	start := time.Now()
	if err := d.usable("InitNVSHMEM"); err != nil {
		return nil, err
	}
	var rv Rendezvous
	ip, inProc := d.impl.(inProcessRanks)
	if inProc {
		var err error
		if rv, err = ip.rendezvous(); err != nil {
			return nil, err
		}
		if o.Rendezvous != nil && (o.Rendezvous.Rank != rv.Rank || o.Rendezvous.WorldSize != rv.WorldSize) {
			return nil, fmt.Errorf("jit: InitNVSHMEM: InitOptions.Rendezvous says rank %d of %d, but this emulated device is rank %d of %d", o.Rendezvous.Rank, o.Rendezvous.WorldSize, rv.Rank, rv.WorldSize)
		}
	} else if o.Rendezvous != nil {
		rv = *o.Rendezvous
	} else {
		var err error
		if rv, err = RendezvousFromEnv(); err != nil {
			return nil, err
		}
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("jit: InitNVSHMEM: InitOptions.Timeout %v is negative (0 means $KGEN_BOOTSTRAP_TIMEOUT or 60s)", o.Timeout)
	}
	if o.Timeout == 0 && !inProc {
		var err error
		if o.Timeout, err = bootstrapTimeout(); err != nil {
			return nil, err
		}
	}
	sd, ok := d.impl.(shmemDevice)
	if !ok {
		return nil, fmt.Errorf("jit: the %s backend has no NVSHMEM host support", d.info.Backend)
	}
	d.mu.Lock()
	if d.shmem != nil && !d.shmem.finalized() {
		d.mu.Unlock()
		return nil, errors.New("jit: NVSHMEM is already initialised on this device")
	}
	d.mu.Unlock()
	host, err := sd.nvshmemHost(o.LibPath)
	if err != nil {
		return nil, err
	}
	var uid []byte
	if rv.Rank == 0 {
		if uid, err = host.uniqueID(); err != nil {
			return nil, err
		}
	}
	if !inProc {
		ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
		defer cancel()
		uid, err = ExchangeUniqueID(ctx, rv, uid)
		if err != nil {
			return nil, err
		}
	}
	impl, err := host.init(rv.Rank, rv.WorldSize, uid)
	if err != nil {
		return nil, err
	}
	s := &NVSHMEM{d: d, impl: impl, rv: rv, host: emulatedVersion(d, host.version()), libPath: host.path()}
	if pe, n := impl.myPE(), impl.nPEs(); pe != rv.Rank || n != rv.WorldSize {
		s.impl.finalize()
		return nil, fmt.Errorf("jit: NVSHMEM started as PE %d of %d, expected rank %d of %d", pe, n, rv.Rank, rv.WorldSize)
	}
	d.mu.Lock()
	d.shmem = s
	d.mu.Unlock()
	d.noteInit(time.Since(start))
	return s, nil
}

// bootstrapTimeout is $KGEN_BOOTSTRAP_TIMEOUT, a positive Go duration ("90s"), or 60s when
// unset. Another value is an error naming the variable: "90" (no unit) or "-1s" would
// otherwise wait the default, silently.
func bootstrapTimeout() (time.Duration, error) {
	v := os.Getenv("KGEN_BOOTSTRAP_TIMEOUT")
	if v == "" {
		return 60 * time.Second, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("jit: KGEN_BOOTSTRAP_TIMEOUT=%s: want a positive duration such as 90s or 5m", excerpt.Quote(v))
	}
	return d, nil
}

func (s *NVSHMEM) finalized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *NVSHMEM) live() error {
	if s == nil {
		return errors.New("jit: a nil *NVSHMEM (Device.NVSHMEM is nil when none runs: InitNVSHMEM)")
	}
	if s.d == nil || s.impl == nil {
		return errors.New("jit: a zero NVSHMEM, not initialised (InitNVSHMEM makes one)")
	}
	if s.finalized() {
		return errors.New("jit: NVSHMEM was finalized")
	}
	return nil
}

// MyPE returns this process's PE number.
func (s *NVSHMEM) MyPE() int {
	if s == nil || s.impl == nil {
		return 0
	}
	return s.impl.myPE()
}

// NPEs returns the number of PEs.
func (s *NVSHMEM) NPEs() int {
	if s == nil || s.impl == nil {
		return 0
	}
	return s.impl.nPEs()
}

// Version returns the host library's NVSHMEM version ("3.4.5").
func (s *NVSHMEM) Version() string {
	if s == nil {
		return ""
	}
	return s.host
}

// LibPath returns the host library that was loaded.
func (s *NVSHMEM) LibPath() string {
	if s == nil {
		return ""
	}
	return s.libPath
}

// Device returns the device NVSHMEM runs on.
func (s *NVSHMEM) Device() *Device {
	if s == nil {
		return nil
	}
	return s.d
}

func (s *NVSHMEM) checkDevLib(dl *DevLib) error {
	if s.d.info.Backend == Emulator {
		return nil // the emulator implements the device API itself
	}
	if dl.Version != "" && dl.Version != s.host {
		return &VersionError{DevLib: dl.Version, Host: s.host, HostPath: s.libPath}
	}
	return nil
}

// Malloc allocates n bytes of symmetric memory (collective: nvshmem_malloc).
func (s *NVSHMEM) Malloc(n int64) (*Memory, error) { return s.MallocContext(context.Background(), n) }

// MallocContext is Malloc whose wait for the other ranks ends with ctx (Background: no bound but
// RanksOptions.Context) on the emulator, failing every rank and naming those that never
// called it. On GPUs nvshmem_malloc's own wait cannot be interrupted: an ended ctx is
// refused before the call, as on the emulator.
func (s *NVSHMEM) MallocContext(ctx context.Context, n int64) (*Memory, error) {
	if ctx == nil {
		return nil, errors.New("jit: NVSHMEM.MallocContext: nil context")
	}
	if err := s.live(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("jit: NVSHMEM.Malloc: %w", err)
	}
	if n <= 0 {
		return nil, fmt.Errorf("jit: NVSHMEM.Malloc(%d): size must be positive", n)
	}
	if err := s.d.fits("NVSHMEM.Malloc", n); err != nil {
		return nil, err
	}
	if npe := int64(max(s.NPEs(), 1)); s.d.info.Backend == Emulator && s.d.info.TotalMem > 0 && n > s.d.info.TotalMem/npe {
		return nil, fmt.Errorf("jit: NVSHMEM.Malloc of %d bytes: the emulator holds all %d PEs' copies in the host's %d bytes of memory", n, npe, s.d.info.TotalMem)
	}
	p, err := s.impl.malloc(ctx, n)
	if err != nil {
		return nil, err
	}
	m := &Memory{d: s.d, ptr: p, size: n}
	m.free = func(p DevicePtr) error { return m.freeCtx(context.Background(), p) }
	m.freeCtx = func(ctx context.Context, p DevicePtr) error {
		s.mu.Lock()
		for i, x := range s.mems {
			if x == m {
				s.mems = append(s.mems[:i], s.mems[i+1:]...)
				break
			}
		}
		done := s.done
		s.mu.Unlock()
		if done {
			return nil // freed by Finalize
		}
		return s.impl.free(ctx, p)
	}
	s.mu.Lock()
	s.mems = append(s.mems, m)
	s.mu.Unlock()
	return m, nil
}

// SymAlloc allocates a symmetric buffer of n values of T (collective).
func SymAlloc[T Elem](s *NVSHMEM, n int) (*Buffer[T], error) {
	var z T
	bytes, err := bytesFor("SymAlloc", n, sizeOf(z))
	if err != nil {
		return nil, err
	}
	m, err := s.Malloc(bytes)
	if err != nil {
		return nil, err
	}
	return &Buffer[T]{mem: m, n: n}, nil
}

// NodePEs returns the PEs of this PE's node (NVSHMEM's node team, in order): those whose
// memory PeerPtr reaches. The other PEs are reached only through NVSHMEM's operations (put,
// get, put_signal, atomics). Every PE is on one node unless the job spans several machines
// (on the emulator: RanksOptions.Nodes).
func (s *NVSHMEM) NodePEs() []int {
	if s.live() != nil {
		return nil
	}
	return s.impl.nodePEs()
}

// PeerPtr returns the address through which this PE reaches p's copy on pe with loads and
// stores (nvshmem_ptr); an error when pe's memory is not directly reachable.
func (s *NVSHMEM) PeerPtr(p Pointer, pe int) (DevicePtr, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	if pe < 0 || pe >= s.NPEs() {
		return 0, fmt.Errorf("jit: PeerPtr: PE %d out of range [0, %d)", pe, s.NPEs())
	}
	if err := s.onHeap("PeerPtr", p); err != nil {
		return 0, err
	}
	q := s.impl.ptr(p.DevPtr(), pe)
	if q == 0 {
		if node := s.NodePEs(); !slices.Contains(node, pe) {
			return 0, fmt.Errorf("jit: PE %d's memory is not reachable by load/store from PE %d (nvshmem_ptr returned NULL): PE %d is on another node (PE %d's node holds PEs %s); use NVSHMEM put/get/put_signal between nodes", pe, s.MyPE(), pe, s.MyPE(), joinInts(node))
		}
		return 0, fmt.Errorf("jit: PE %d's memory is not reachable by load/store from PE %d (nvshmem_ptr returned NULL): no peer access between the GPUs; use put/get", pe, s.MyPE())
	}
	return q, nil
}

// onHeap returns an error naming op unless p is an address inside a live allocation of
// this PE's symmetric heap (Malloc, SymAlloc): nvshmem_ptr and nvshmemx_mc_ptr return NULL
// for any other, which is no lack of peer access or multicast.
func (s *NVSHMEM) onHeap(op string, p Pointer) error {
	if p == nil {
		return fmt.Errorf("jit: %s of a nil pointer: pass symmetric memory (NVSHMEM.Malloc, SymAlloc)", op)
	}
	a := p.DevPtr()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mems {
		if a >= m.ptr && uint64(a-m.ptr) < uint64(m.size) {
			return nil
		}
	}
	return fmt.Errorf("jit: %s: address %#x is not in a live allocation of NVSHMEM's symmetric heap (NVSHMEM.Malloc, SymAlloc): only symmetric memory has peer and multicast addresses", op, uint64(a))
}

// MulticastPtr returns the NVLink SHARP multicast address of symmetric memory p for the
// world team (nvshmemx_mc_ptr), or 0 and a *MulticastError saying why there is none (a
// world of several nodes has none: see NodeMulticastPtr).
func (s *NVSHMEM) MulticastPtr(p Pointer) (DevicePtr, error) {
	return s.mcPtr("MulticastPtr", p, teamWorld)
}

// NodeMulticastPtr returns the multicast address of symmetric memory p for this PE's node
// (nvshmemx_mc_ptr of NVSHMEMX_TEAM_NODE): multimem instructions on it reach the copies of
// the node's PEs (NodePEs). 0 and a *MulticastError when there is none.
func (s *NVSHMEM) NodeMulticastPtr(p Pointer) (DevicePtr, error) {
	return s.mcPtr("NodeMulticastPtr", p, teamNode)
}

// NVSHMEM's team handles (nvshmem_team_t).
const (
	teamWorld = 0
	teamNode  = 2 // NVSHMEMX_TEAM_NODE
)

// mcPtr is MulticastPtr and NodeMulticastPtr (op: which one, for errors: NodeMulticastPtr's
// said "MulticastPtr").
func (s *NVSHMEM) mcPtr(op string, p Pointer, team int) (DevicePtr, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	if err := s.onHeap(op, p); err != nil {
		return 0, err
	}
	q := s.impl.mcPtr(p.DevPtr(), team)
	if q != 0 {
		return q, nil
	}
	reason := "NVSHMEM has no NVLS multicast for this team (the GPUs or the fabric do not support NVLink SHARP); fall back to a peer-pointer algorithm"
	if v := os.Getenv("NVSHMEM_DISABLE_NVLS"); v != "" && v != "0" {
		reason = "NVLS is disabled (NVSHMEM_DISABLE_NVLS=" + excerpt.Cut(v, excerpt.Max) + "); fall back to a peer-pointer algorithm"
	} else if node := s.NodePEs(); team == teamWorld && len(node) < s.NPEs() {
		reason = fmt.Sprintf("the world's %d PEs span several nodes (PE %d's node holds PEs %s) and multicast reaches one node; use NodeMulticastPtr within the node and NVSHMEM put/put_signal between nodes", s.NPEs(), s.MyPE(), joinInts(node))
	}
	return 0, &MulticastError{Reason: reason}
}

// BarrierAll is nvshmem_barrier_all: it completes this PE's outstanding puts and waits for
// every PE. It is BarrierAllContext with no deadline.
func (s *NVSHMEM) BarrierAll() error { return s.BarrierAllContext(context.Background()) }

// BarrierAllContext is BarrierAll bounded by ctx. On the emulator a rank that never arrives
// fails the wait when ctx ends, naming the ranks missing. On GPUs nvshmem_barrier_all is a
// blocking C call that cannot be abandoned: an ended ctx is refused before the call, and the
// call itself waits for every PE.
func (s *NVSHMEM) BarrierAllContext(ctx context.Context) error {
	if ctx == nil {
		return errors.New("jit: NVSHMEM.BarrierAllContext: nil context")
	}
	if err := s.live(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jit: NVSHMEM.BarrierAll: %w", err)
	}
	return s.impl.barrierAll(ctx)
}

// BarrierAllOnStream enqueues nvshmemx_barrier_all_on_stream on st (nil: default stream).
func (s *NVSHMEM) BarrierAllOnStream(st *Stream) error {
	if err := s.live(); err != nil {
		return err
	}
	bs, err := st.useOn("BarrierAllOnStream", s.d)
	if err != nil {
		return err
	}
	return s.impl.barrierAllOnStream(bs)
}

// Finalize shuts NVSHMEM down in order: wait for the device, finalize and unload the modules
// that call NVSHMEM, free the symmetric memory still allocated (newest first), then
// nvshmemx_hostlib_finalize. Collective.
func (s *NVSHMEM) Finalize() error {
	if s == nil {
		return errors.New("jit: Finalize of a nil *NVSHMEM")
	}
	if s.d == nil || s.impl == nil {
		return errors.New("jit: Finalize of a zero NVSHMEM, not initialised (InitNVSHMEM makes one)")
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	var errs []error
	errs = append(errs, s.d.Synchronize())
	s.d.mu.Lock()
	var mods []*Module
	for m := range s.d.modules {
		if m.shmem {
			mods = append(mods, m)
		}
	}
	s.d.mu.Unlock()
	for _, m := range mods {
		errs = append(errs, m.Close())
	}
	s.mu.Lock()
	mems := s.mems
	s.mems = nil
	s.mu.Unlock()
	for i := len(mems) - 1; i >= 0; i-- {
		mems[i].mu.Lock()
		if !mems[i].freed {
			mems[i].freed = true
			errs = append(errs, s.impl.free(context.Background(), mems[i].ptr))
		}
		mems[i].mu.Unlock()
	}
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	errs = append(errs, s.impl.finalize())
	return errors.Join(errs...)
}

// The backend side of NVSHMEM.

// inProcessRanks is a device whose ranks live in this process (the emulator): NVSHMEM takes
// the rank and world from it and needs no bootstrap.
type inProcessRanks interface {
	rendezvous() (Rendezvous, error)
}

type shmemDevice interface {
	nvshmemHost(libPath string) (shmemHost, error)
}

type shmemHost interface {
	uniqueID() ([]byte, error)
	init(rank, n int, uid []byte) (shmemImpl, error)
	version() string
	path() string
}

type shmemImpl interface {
	myPE() int
	nPEs() int
	malloc(ctx context.Context, n int64) (DevicePtr, error)
	free(ctx context.Context, p DevicePtr) error
	ptr(p DevicePtr, pe int) DevicePtr
	mcPtr(p DevicePtr, team int) DevicePtr
	nodePEs() []int
	barrierAll(ctx context.Context) error
	barrierAllOnStream(s stream) error
	moduleInit(m module) error
	moduleFinalize(m module) error
	finalize() error
}
