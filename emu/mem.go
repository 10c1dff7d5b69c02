package emu

import (
	"fmt"
	"sort"
)

// Addresses are 64 bits: the top 16 bits name a region, the low 48 bits an offset in it.
//
//	0x0010+g  global memory of GPU g (private allocations below 1<<40, the symmetric heap above)
//	0x0008    multicast: the symmetric-heap offset, reaching every GPU's copy (multimem only)
//	0x0009    node multicast: the same, reaching the copies of the executing GPU's node
//	0x0004    the generic window onto the executing block's shared memory
//	0x0002    the generic window onto the executing thread's local memory
//	0x0001    the generic window onto the kernel's parameters (mov of a kernel parameter's
//	          name, cvta.param: a __grid_constant__ argument such as a TMA tensor map)
//
// Address 0 and everything outside these regions is invalid.
const (
	regionShift     = 48
	offMask         = 1<<regionShift - 1
	regionParam     = 0x1
	regionLocal     = 0x2
	regionShared    = 0x4
	regionMulticast = 0x8
	regionNodeMC    = 0x9
	regionGlobal0   = 0x10
	// MaxGPUs is the largest number of simulated GPUs in one System.
	MaxGPUs = 64
	// symBase is where the symmetric heap starts in every GPU's global region.
	symBase     = 1 << 40
	privateBase = 1 << 20
	allocAlign  = 256
	redZone     = 256 // a gap after every allocation so that overruns hit no other allocation
)

func region(addr uint64) uint64 { return addr >> regionShift }

// GlobalAddr returns the address of offset off in GPU gpu's global memory.
func globalAddr(gpu int, off uint64) uint64 { return uint64(regionGlobal0+gpu)<<regionShift | off }

// alloc is one allocation in one GPU's global memory.
type alloc struct {
	gpu   int
	base  uint64 // full address
	size  uint64
	data  []byte
	sym   bool
	freed bool
	what  string // "malloc", "symmetric", "module variable name"
	// shadow is the race detector's record of the allocation (race.go), made on first use;
	// noShadow: it would have exceeded the memory limit.
	shadow   []gshadow
	noShadow bool
}

type gpuMem struct {
	idx    int
	allocs []*alloc // sorted by base, live only
	freed  []*alloc // the most recent frees, for "use after free" messages
	next   uint64   // next private offset
	last   *alloc
}

func (g *gpuMem) insert(a *alloc) {
	i := sort.Search(len(g.allocs), func(i int) bool { return g.allocs[i].base > a.base })
	g.allocs = append(g.allocs, nil)
	copy(g.allocs[i+1:], g.allocs[i:])
	g.allocs[i] = a
}

func (g *gpuMem) remove(a *alloc) {
	for i, x := range g.allocs {
		if x == a {
			g.allocs = append(g.allocs[:i], g.allocs[i+1:]...)
			break
		}
	}
	if g.last == a {
		g.last = nil
	}
	a.freed = true
	g.freed = append(g.freed, a)
	if len(g.freed) > 64 {
		g.freed = g.freed[1:]
	}
}

func (g *gpuMem) find(addr uint64) *alloc {
	if a := g.last; a != nil && addr-a.base < a.size {
		return a
	}
	i := sort.Search(len(g.allocs), func(i int) bool { return g.allocs[i].base+g.allocs[i].size > addr })
	if i < len(g.allocs) && g.allocs[i].base <= addr {
		g.last = g.allocs[i]
		return g.allocs[i]
	}
	return nil
}

// describeMiss explains why addr (n bytes) is not inside an allocation of g.
func (g *gpuMem) describeMiss(addr uint64, n int) string {
	for _, a := range g.freed {
		if addr-a.base < a.size {
			return fmt.Sprintf("%d bytes at %#x are in a freed %d-byte allocation at %#x (use after free)", n, addr, a.size, a.base)
		}
	}
	// The nearest allocation below.
	i := sort.Search(len(g.allocs), func(i int) bool { return g.allocs[i].base > addr })
	if i > 0 {
		a := g.allocs[i-1]
		if addr-a.base < a.size {
			return fmt.Sprintf("%d bytes at %#x run %d bytes past the end of a %d-byte %s allocation at %#x on GPU %d",
				n, addr, addr+uint64(n)-(a.base+a.size), a.size, a.what, a.base, g.idx)
		}
		if gap := addr - (a.base + a.size); gap == 0 && n > 0 { // n 0: no element size to divide by
			return fmt.Sprintf("%d bytes at %#x start right after the end of a %d-byte %s allocation at %#x on GPU %d (index %d of a %d-element array of %d-byte elements)",
				n, addr, a.size, a.what, a.base, g.idx, a.size/uint64(n), a.size/uint64(n), n)
		} else if gap < 1<<20 {
			return fmt.Sprintf("%d bytes at %#x are %d bytes past the end of a %d-byte %s allocation at %#x on GPU %d",
				n, addr, gap, a.size, a.what, a.base, g.idx)
		}
	}
	if i < len(g.allocs) && g.allocs[i].base-addr < 1<<20 {
		a := g.allocs[i]
		return fmt.Sprintf("%d bytes at %#x are %d bytes before a %d-byte %s allocation at %#x on GPU %d",
			n, addr, a.base-addr, a.size, a.what, a.base, g.idx)
	}
	return fmt.Sprintf("%d bytes at %#x are in no allocation of GPU %d", n, addr, g.idx)
}

// globalSpan returns the n bytes at a global address (any GPU's), or a fault.
func (s *System) globalSpan(addr uint64, n int) ([]byte, *memFault) {
	r := region(addr)
	if r < regionGlobal0 || r >= regionGlobal0+uint64(len(s.gpus)) {
		return nil, s.badAddress(addr, n)
	}
	g := s.gpus[r-regionGlobal0]
	a := g.find(addr)
	if a == nil {
		return nil, &memFault{KindOutOfBounds, g.describeMiss(addr, n)}
	}
	o := addr - a.base
	if o+uint64(n) > a.size {
		return nil, &memFault{KindOutOfBounds, g.describeMiss(addr, n)}
	}
	return a.data[o : o+uint64(n) : o+uint64(n)], nil
}

func (s *System) badAddress(addr uint64, n int) *memFault {
	switch r := region(addr); {
	case addr == 0:
		return faultf(KindBadAddress, "%d-byte access through a null pointer", n)
	case r == regionMulticast || r == regionNodeMC:
		return faultf(KindMulticast, "%d-byte access at %#x: a multicast address is only valid for multimem instructions", n, addr)
	case r == regionShared || r == regionLocal:
		return faultf(KindBadAddress, "%d-byte global access at %#x: a generic shared/local address used as global (missing cvta?)", n, addr)
	case r >= regionGlobal0 && r < regionGlobal0+MaxGPUs:
		return faultf(KindBadAddress, "%d-byte access at %#x: GPU %d does not exist (the system has %d)", n, addr, r-regionGlobal0, len(s.gpus))
	case r == 0:
		return faultf(KindBadAddress, "%d-byte access at %#x: not a global address (a shared, local or param offset used as a pointer?)", n, addr)
	}
	return faultf(KindBadAddress, "%d-byte access at %#x: not a valid address", n, addr)
}

// multicastSpans resolves a multicast address to the n bytes of the copies it reaches from
// GPU from (the host when from < 0): every GPU's for the world's multicast address (which a
// GPU of a System of several nodes cannot use), those of from's node for a node multicast
// address (every GPU's from the host). It returns the spans in GPU order and the first of
// their GPUs.
func (s *System) multicastSpans(addr uint64, n int, out [][]byte, from int) ([][]byte, int, *memFault) {
	r := region(addr)
	if r != regionMulticast && r != regionNodeMC {
		if addr == 0 {
			return nil, 0, faultf(KindMulticast, "multimem on a null pointer")
		}
		return nil, 0, faultf(KindMulticast, "multimem on %#x, which is not a multicast address (get one from System.Multicast)", addr)
	}
	off := addr & offMask
	out = out[:0]
	first, last := 0, len(s.gpus)
	if from >= 0 && s.nodeSize != 0 && s.nodeSize < len(s.gpus) {
		if r == regionMulticast {
			return nil, 0, faultf(KindMulticast, "multimem on %#x, the world's multicast address, but the %d GPUs span %d nodes and multicast reaches one node (NVLink SHARP): use the node's multicast address (nvshmemx_mc_ptr of NVSHMEMX_TEAM_NODE, Symmetric.NodeMulticast)",
				addr, len(s.gpus), s.Nodes())
		}
		first = from / s.nodeSize * s.nodeSize
		last = first + s.nodeSize
	}
	for g := first; g < last; g++ {
		b, f := s.globalSpan(globalAddr(g, off), n)
		if f != nil {
			return nil, 0, faultf(KindOutOfBounds, "multicast %#x on GPU %d: %s", addr, g, f.msg)
		}
		out = append(out, b)
	}
	return out, first, nil
}
