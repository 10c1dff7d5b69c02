package emu

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// System is a set of simulated GPUs with their memories, the symmetric heap that spans them,
// the extern functions kernels may call, and the decoded modules. A System is not safe for
// concurrent use; one launch runs at a time.
type System struct {
	gpus    []*gpuMem
	symNext uint64
	syms    map[uint64]*Symmetric // by offset
	externs map[string]ExternFunc
	progs   map[*ptx.Module]*program
	modVars map[*ptx.Module]map[string]uint64 // module-scope .global/.const variables: symmetric offsets
	stats   Stats
	// warpPool keeps finished warps per program for reuse by later blocks and launches.
	warpPool  map[*program][]*warp
	poolBytes int
	// recPool keeps the missing-fence detector's record arena (emptied) for the next
	// weak-mode launch.
	recPool []wrec
	limits  Limits
	used    int64 // bytes of global memory allocated, over every GPU
	// the race detector (race.go): its stamp and the bytes of its shadow records
	clk         uint32
	shadowBytes int64
	trace       *raceTrace // the last launch, when the next may overlap it
	nodeSize    int        // GPUs per node (topology.go); 0: one node
	net         *Network   // nil: DefaultNetwork
	// logical time and scheduled actions (timers.go)
	clock   int64 // the time at the end of the last launch
	timers  timerHeap
	tseq    uint64
	cur     *engine // the engine running (Launch, Run)
	eng     *engine // the stream engine: kernels started with Start
	engines int     // stream engines made (each stretch of work from idle)
}

// New returns a System of n simulated GPUs (1 <= n <= MaxGPUs).
func New(n int) (*System, error) {
	if n < 1 || n > MaxGPUs {
		return nil, fmt.Errorf("emu: %d GPUs: want 1 to %d", n, MaxGPUs)
	}
	s := &System{
		symNext:  symBase,
		syms:     map[uint64]*Symmetric{},
		externs:  map[string]ExternFunc{},
		progs:    map[*ptx.Module]*program{},
		modVars:  map[*ptx.Module]map[string]uint64{},
		warpPool: map[*program][]*warp{},
		limits:   DefaultLimits,
	}
	for i := 0; i < n; i++ {
		s.gpus = append(s.gpus, &gpuMem{idx: i, next: privateBase})
	}
	return s, nil
}

// NumGPUs returns the number of simulated GPUs (0 for a nil *System).
func (s *System) NumGPUs() int {
	if s == nil {
		return 0
	}
	return len(s.gpus)
}

func roundUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// Malloc allocates size bytes of zeroed global memory on one GPU and returns its address
// (256-byte aligned). Every GPU can reach it (peer access is always on).
func (s *System) Malloc(gpu int, size int) (uint64, error) {
	if s == nil {
		return 0, errNilSystem("Malloc")
	}
	s.hostSync()
	if gpu < 0 || gpu >= len(s.gpus) {
		return 0, fmt.Errorf("emu: Malloc on GPU %d: the system has %d GPUs", gpu, len(s.gpus))
	}
	if size <= 0 {
		return 0, fmt.Errorf("emu: Malloc of %d bytes: size must be positive", size)
	}
	g := s.gpus[gpu]
	if uint64(size) >= symBase-privateBase || g.next+uint64(size) >= symBase {
		return 0, fmt.Errorf("emu: Malloc of %d bytes on GPU %d: out of memory (GPU %d's private address space is full)", size, gpu, gpu)
	}
	if err := s.reserve(fmt.Sprintf("Malloc of %d bytes on GPU %d", size, gpu), int64(size)); err != nil {
		return 0, err
	}
	a := &alloc{gpu: gpu, base: globalAddr(gpu, g.next), size: uint64(size), data: make([]byte, size), what: "Malloc"}
	g.next = roundUp(g.next+uint64(size)+redZone, allocAlign)
	g.insert(a)
	return a.base, nil
}

// Symmetric is one allocation of the symmetric heap: the same offset and size on every GPU.
type Symmetric struct {
	Off  uint64 // the offset in each GPU's global region
	Size int
}

// On returns the address of GPU gpu's copy. A nil *Symmetric's address (of On, Multicast,
// NodeMulticast) is 0, the null address: every access through it is an error.
func (m *Symmetric) On(gpu int) uint64 {
	if m == nil {
		return 0
	}
	return globalAddr(gpu, m.Off)
}

// Multicast returns the multicast address of the allocation: multimem.ld_reduce reduces over
// every GPU's copy, multimem.st writes all copies, multimem.red updates all copies.
func (m *Symmetric) Multicast() uint64 {
	if m == nil {
		return 0
	}
	return uint64(regionMulticast)<<regionShift | m.Off
}

// NodeMulticast returns the allocation's multicast address for one node (SetNodes):
// multimem instructions on it reach the copies of the executing GPU's node (every GPU's
// when the System is one node); host writes to it reach every GPU's copy.
func (m *Symmetric) NodeMulticast() uint64 {
	if m == nil {
		return 0
	}
	return uint64(regionNodeMC)<<regionShift | m.Off
}

// MallocSymmetric allocates size zeroed bytes at the same offset on every GPU (NVSHMEM's
// symmetric heap).
func (s *System) MallocSymmetric(size int) (*Symmetric, error) {
	if s == nil {
		return nil, errNilSystem("MallocSymmetric")
	}
	s.hostSync()
	if size <= 0 {
		return nil, fmt.Errorf("emu: MallocSymmetric of %d bytes: size must be positive", size)
	}
	if len(s.gpus) == 0 {
		return nil, errors.New("emu: MallocSymmetric on a System of no GPUs (the zero System: make one with New)")
	}
	off := s.symNext
	if uint64(size) >= offMask-off-2*allocAlign {
		return nil, fmt.Errorf("emu: MallocSymmetric of %d bytes: out of memory (the symmetric heap's address space is full)", size)
	}
	if err := s.reserve(fmt.Sprintf("MallocSymmetric of %d bytes on each of %d GPUs", size, len(s.gpus)), satMul(int64(size), int64(len(s.gpus)))); err != nil {
		return nil, err
	}
	s.symNext = roundUp(off+uint64(size)+redZone, allocAlign)
	for g, gm := range s.gpus {
		gm.insert(&alloc{gpu: g, base: globalAddr(g, off), size: uint64(size), data: make([]byte, size), sym: true, what: "symmetric"})
	}
	m := &Symmetric{Off: off, Size: size}
	s.syms[off] = m
	return m, nil
}

// Free releases an allocation made by Malloc. A symmetric allocation (MallocSymmetric) is
// an error naming FreeSymmetric, which frees every GPU's copy at once: freeing one address
// of it is almost always a mix-up of private and symmetric buffers.
func (s *System) Free(addr uint64) error {
	return s.free("Free", addr, false)
}

// free releases the allocation starting at addr; a symmetric one (every GPU's copy) only
// when sym is set.
func (s *System) free(what string, addr uint64, sym bool) error {
	if s == nil {
		return errNilSystem(what)
	}
	s.hostSync()
	r := region(addr)
	if r < regionGlobal0 || r >= regionGlobal0+uint64(len(s.gpus)) {
		return fmt.Errorf("emu: %s(%#x): not a global address", what, addr)
	}
	g := s.gpus[r-regionGlobal0]
	a := g.find(addr)
	if a == nil || a.base != addr {
		return fmt.Errorf("emu: %s(%#x): not the start of a live allocation", what, addr)
	}
	if a.sym != sym {
		if a.sym {
			return fmt.Errorf("emu: %s(%#x): a symmetric allocation (GPU %d's copy); free it with FreeSymmetric, which frees every GPU's copy", what, addr, r-regionGlobal0)
		}
		return fmt.Errorf("emu: %s(%#x): a private allocation of GPU %d; free it with Free", what, addr, r-regionGlobal0)
	}
	if !a.sym {
		g.remove(a)
		s.freed(a)
		return nil
	}
	off := addr & offMask
	for gi, gm := range s.gpus {
		if b := gm.find(globalAddr(gi, off)); b != nil {
			gm.remove(b)
			s.freed(b)
		}
	}
	delete(s.syms, off)
	return nil
}

// freed returns a freed allocation's bytes (and its race shadow's) to the limit.
func (s *System) freed(a *alloc) {
	s.used -= int64(a.size)
	if a.shadow != nil {
		s.shadowBytes -= int64(len(a.shadow)) * gshadowBytes
		a.shadow = nil
	}
}

// FreeSymmetric releases a symmetric allocation on every GPU.
func (s *System) FreeSymmetric(m *Symmetric) error {
	if s == nil {
		return errNilSystem("FreeSymmetric")
	}
	if m == nil {
		return fmt.Errorf("emu: FreeSymmetric(nil)")
	}
	if s.syms[m.Off] != m {
		return fmt.Errorf("emu: FreeSymmetric(offset %#x, %d bytes): not a live symmetric allocation (freed already?)", m.Off, m.Size)
	}
	return s.free("FreeSymmetric", m.On(0), true)
}

// SymmetricAt returns the symmetric allocation whose copy on some GPU starts at addr (a
// peer address, as Peer returns), for FreeSymmetric.
func (s *System) SymmetricAt(addr uint64) (*Symmetric, error) {
	if s == nil {
		return nil, errNilSystem("SymmetricAt")
	}
	r := region(addr)
	if r < regionGlobal0 || r >= regionGlobal0+uint64(len(s.gpus)) {
		return nil, fmt.Errorf("emu: SymmetricAt(%#x): not a global address", addr)
	}
	m := s.syms[addr&offMask]
	if m == nil {
		return nil, fmt.Errorf("emu: SymmetricAt(%#x): not the start of a live symmetric allocation", addr)
	}
	return m, nil
}

// Peer returns the address through which any GPU reaches GPU gpu's copy of the symmetric
// allocation that addr points into (what nvshmem_ptr returns). A private address is returned
// unchanged when gpu owns it; otherwise it has no peer copy and Peer fails.
func (s *System) Peer(addr uint64, gpu int) (uint64, error) {
	if s == nil {
		return 0, errNilSystem("Peer")
	}
	if gpu < 0 || gpu >= len(s.gpus) {
		return 0, fmt.Errorf("emu: Peer(%#x, %d): the system has %d GPUs", addr, gpu, len(s.gpus))
	}
	off := addr & offMask
	switch r := region(addr); {
	case r == regionMulticast || r == regionNodeMC || r >= regionGlobal0 && r < regionGlobal0+uint64(len(s.gpus)) && off >= symBase:
		return globalAddr(gpu, off), nil
	case r == regionGlobal0+uint64(gpu):
		return addr, nil
	}
	return 0, fmt.Errorf("emu: Peer(%#x, %d): not an address in the symmetric heap", addr, gpu)
}

// MulticastOf returns the multicast address of the symmetric allocation addr points into
// (what nvshmemx_mc_ptr returns).
func (s *System) MulticastOf(addr uint64) (uint64, error) {
	if s == nil {
		return 0, errNilSystem("MulticastOf")
	}
	off := addr & offMask
	r := region(addr)
	if r == regionMulticast || r == regionNodeMC || r >= regionGlobal0 && r < regionGlobal0+uint64(len(s.gpus)) && off >= symBase {
		return uint64(regionMulticast)<<regionShift | off, nil
	}
	return 0, fmt.Errorf("emu: MulticastOf(%#x): not an address in the symmetric heap", addr)
}

// NodeMulticastOf returns the node multicast address (Symmetric.NodeMulticast) of the
// symmetric allocation addr points into (what nvshmemx_mc_ptr of the node team returns).
func (s *System) NodeMulticastOf(addr uint64) (uint64, error) {
	if s == nil {
		return 0, errNilSystem("NodeMulticastOf")
	}
	a, err := s.MulticastOf(addr)
	if err != nil {
		return 0, fmt.Errorf("emu: NodeMulticastOf(%#x): not an address in the symmetric heap", addr)
	}
	return uint64(regionNodeMC)<<regionShift | a&offMask, nil
}

// Write copies p to device memory at addr (any GPU's global address, or a multicast address,
// which writes every GPU's copy).
func (s *System) Write(addr uint64, p []byte) error {
	if s == nil {
		return errNilSystem("Write")
	}
	s.hostSync()
	if len(p) == 0 {
		return nil
	}
	if r := region(addr); r == regionMulticast || r == regionNodeMC {
		spans, _, f := s.multicastSpans(addr, len(p), nil, -1)
		if f != nil {
			return fmt.Errorf("emu: Write: %s", f.msg)
		}
		for _, b := range spans {
			copy(b, p)
		}
		return nil
	}
	b, f := s.globalSpan(addr, len(p))
	if f != nil {
		return fmt.Errorf("emu: Write: %s", f.msg)
	}
	copy(b, p)
	return nil
}

// Read copies len(p) bytes of device memory at addr into p.
func (s *System) Read(addr uint64, p []byte) error {
	if s == nil {
		return errNilSystem("Read")
	}
	s.hostSync()
	if len(p) == 0 {
		return nil
	}
	b, f := s.globalSpan(addr, len(p))
	if f != nil {
		return fmt.Errorf("emu: Read: %s", f.msg)
	}
	copy(p, b)
	return nil
}

// Load32 reads the 32-bit little-endian word at addr (any GPU's global address, 4-byte
// aligned) as a stream memory operation does (jit's Stream.WaitValue32): it sees the value
// visible system-wide, so a kernel's store is seen once it is out of the weak-memory buffers
// (a release flushes the thread's earlier stores first: reading the released word acquires
// them). Unlike Read it is not a host synchronization: the kernels in flight go on and the
// race detector's overlap of consecutive launches is kept, since a stream polls it while they
// run.
func (s *System) Load32(addr uint64) (uint32, error) {
	if s == nil {
		return 0, errNilSystem("Load32")
	}
	if addr%4 != 0 {
		return 0, fmt.Errorf("emu: Load32 at %#x: not 4-byte aligned", addr)
	}
	b, f := s.globalSpan(addr, 4)
	if f != nil {
		return 0, fmt.Errorf("emu: Load32: %s", f.msg)
	}
	return binary.LittleEndian.Uint32(b), nil
}

// Memset sets n bytes at addr to v (any GPU's global address, or a multicast address).
func (s *System) Memset(addr uint64, v byte, n int) error {
	if s == nil {
		return errNilSystem("Memset")
	}
	if err := s.checkSpan("Memset", addr, n, true); err != nil || n == 0 {
		return err
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = v
	}
	return s.Write(addr, p)
}

// Copy copies n bytes from device address src to device address dst (any GPUs; dst may be
// a multicast address).
func (s *System) Copy(dst, src uint64, n int) error {
	if s == nil {
		return errNilSystem("Copy")
	}
	if err := s.checkSpan("Copy source", src, n, false); err != nil || n == 0 {
		return err
	}
	if err := s.checkSpan("Copy destination", dst, n, true); err != nil {
		return err
	}
	p := make([]byte, n)
	if err := s.Read(src, p); err != nil {
		return err
	}
	return s.Write(dst, p)
}

// checkSpan checks, before anything is allocated for it, that a host operation's n bytes at
// addr lie in live allocations (of every GPU for a multicast address, when mc allows one).
func (s *System) checkSpan(op string, addr uint64, n int, mc bool) error {
	if s == nil {
		return errNilSystem(op)
	}
	if n < 0 {
		return fmt.Errorf("emu: %s of %d bytes: the length is negative", op, n)
	}
	if n == 0 {
		return nil
	}
	if r := region(addr); mc && (r == regionMulticast || r == regionNodeMC) {
		if _, _, f := s.multicastSpans(addr, n, nil, -1); f != nil {
			return fmt.Errorf("emu: %s: %s", op, f.msg)
		}
		return nil
	}
	if _, f := s.globalSpan(addr, n); f != nil {
		return fmt.Errorf("emu: %s: %s", op, f.msg)
	}
	return nil
}

// Elem is a fixed-size element type the typed copy helpers accept.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// WriteSlice copies a typed slice to device memory (little-endian, as GPUs store it).
func WriteSlice[T Elem](s *System, addr uint64, v []T) error {
	if s == nil {
		return errNilSystem("WriteSlice")
	}
	p, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		return err
	}
	return s.Write(addr, p)
}

// ReadSlice reads n elements of type T from device memory; they must lie in one live
// allocation (checked before anything is allocated).
func ReadSlice[T Elem](s *System, addr uint64, n int) ([]T, error) {
	var z T
	es := binary.Size(z)
	if s == nil {
		return nil, errNilSystem("ReadSlice")
	}
	if n < 0 {
		return nil, fmt.Errorf("emu: ReadSlice of %d elements: the count is negative", n)
	}
	if n > int(offMask)/es {
		return nil, fmt.Errorf("emu: ReadSlice of %d %d-byte elements at %#x: larger than any allocation", n, es, addr)
	}
	if err := s.checkSpan("ReadSlice", addr, n*es, false); err != nil {
		return nil, err
	}
	v := make([]T, n)
	p := make([]byte, n*es)
	if err := s.Read(addr, p); err != nil {
		return nil, err
	}
	_, err := binary.Decode(p, binary.LittleEndian, v)
	return v, err
}

// WriteF16 rounds v to IEEE half precision and writes it.
func WriteF16(s *System, addr uint64, v []float32) error {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = fp.F32ToF16(x)
	}
	return WriteSlice(s, addr, h)
}

// ReadF16 reads n halves and widens them to float32.
func ReadF16(s *System, addr uint64, n int) ([]float32, error) {
	h, err := ReadSlice[uint16](s, addr, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i, x := range h {
		out[i] = fp.F16ToF32(x)
	}
	return out, nil
}

// WriteBF16 rounds v to bfloat16 and writes it.
func WriteBF16(s *System, addr uint64, v []float32) error {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = fp.F32ToBF16(x)
	}
	return WriteSlice(s, addr, h)
}

// ReadBF16 reads n bfloat16 values and widens them to float32.
func ReadBF16(s *System, addr uint64, n int) ([]float32, error) {
	h, err := ReadSlice[uint16](s, addr, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i, x := range h {
		out[i] = fp.BF16ToF32(x)
	}
	return out, nil
}
