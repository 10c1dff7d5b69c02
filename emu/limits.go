package emu

import "fmt"

// Limits bound what a System emulates, so that an absurd size fails with an error before
// anything is allocated instead of exhausting the host (see docs/emu.md, Limits).
type Limits struct {
	// MaxMemory is the most bytes of emulated memory a System holds at once: global memory
	// over every GPU (Malloc, each GPU's copy of a MallocSymmetric, module variables), and
	// the local memory of a launch's live blocks. Host copies are bounded by the allocations
	// they touch.
	MaxMemory int64
	// MaxThreads is the most threads one launch may run, over all its GPUs (grid × block ×
	// GPUs): the cap on emulated work.
	MaxThreads int64
}

// DefaultLimits are the limits of a new System: 16 GiB of emulated memory and 2^32 threads
// per launch (at the emulator's 10^8 to 10^9 thread-instructions per second, a launch of
// that many threads takes minutes).
var DefaultLimits = Limits{MaxMemory: 16 << 30, MaxThreads: 1 << 32}

// Hardware limits the emulator enforces as a GPU does.
const (
	// MaxGridX is the largest grid x dimension; MaxGridYZ the largest y and z.
	MaxGridX  = 1<<31 - 1
	MaxGridYZ = 65535
	// MaxLocalBytes is the most .local memory per thread (sm_90: 512 KiB).
	MaxLocalBytes = 512 << 10
	// MaxParamBytes is the most bytes of kernel parameters (CUDA 12.1+, Volta and later).
	MaxParamBytes = 32764
	// MaxSharedBytes is the most shared memory per block (sm_90: 227 KiB).
	MaxSharedBytes = 232448
)

// sizeCap saturates the decoder's size arithmetic: declared sizes beyond it (far beyond any
// limit above) are refused at launch instead of overflowing.
const sizeCap = 1 << 40

// satSize is n elements of es bytes (n <= 0: one element), saturated at sizeCap.
func satSize(n, es int) int {
	n, es = max(n, 1), max(es, 1)
	if n > sizeCap/es {
		return sizeCap
	}
	return n * es
}

// SetLimits replaces the System's limits (DefaultLimits for a new System); a zero field keeps
// its default. A negative field is an error naming it, and the limits stay as they were.
// Allocations already made stay.
func (s *System) SetLimits(l Limits) error {
	if s == nil {
		return errNilSystem("SetLimits")
	}
	if l.MaxMemory < 0 {
		return fmt.Errorf("emu: SetLimits: Limits.MaxMemory %d is negative (0 means the default, %d)", l.MaxMemory, DefaultLimits.MaxMemory)
	}
	if l.MaxThreads < 0 {
		return fmt.Errorf("emu: SetLimits: Limits.MaxThreads %d is negative (0 means the default, %d)", l.MaxThreads, DefaultLimits.MaxThreads)
	}
	if l.MaxMemory == 0 {
		l.MaxMemory = DefaultLimits.MaxMemory
	}
	if l.MaxThreads == 0 {
		l.MaxThreads = DefaultLimits.MaxThreads
	}
	s.limits = l
	return nil
}

// Limits returns the System's limits (zero for a nil *System: it runs nothing).
func (s *System) Limits() Limits {
	if s == nil {
		return Limits{}
	}
	return s.limits
}

// reserve accounts n more bytes of emulated memory, or says why it cannot.
func (s *System) reserve(what string, n int64) error {
	if n < 0 || n > s.limits.MaxMemory-s.used {
		return fmt.Errorf("emu: %s: %d bytes of emulated memory with %d in use would exceed the System's limit of %d bytes (Limits.MaxMemory)", what, n, s.used, s.limits.MaxMemory)
	}
	s.used += n
	return nil
}

// checkShape refuses grids and blocks a GPU cannot launch, and more work than the limits
// allow.
func (s *System) checkShape(grid, blk Dim3, ngpus int) error {
	if grid.X < 1 || grid.Y < 1 || grid.Z < 1 || blk.X < 1 || blk.Y < 1 || blk.Z < 1 {
		return fmt.Errorf("grid %v and block %v must be positive", grid, blk)
	}
	if grid.X > MaxGridX || grid.Y > MaxGridYZ || grid.Z > MaxGridYZ {
		return fmt.Errorf("grid %v: a GPU launches at most %d blocks in x and %d in y and z", grid, MaxGridX, MaxGridYZ)
	}
	if blk.X > 1024 || blk.Y > 1024 || blk.Z > 64 || blk.X*blk.Y*blk.Z > 1024 {
		return fmt.Errorf("block %v: at most 1024 threads (x, y <= 1024, z <= 64)", blk)
	}
	// grid.X*grid.Y*grid.Z < 2^63 by the bounds above; blocks <= 1024 threads, GPUs <= 64.
	blocks := int64(grid.X) * int64(grid.Y) * int64(grid.Z)
	if threads := int64(blk.size()); blocks > s.limits.MaxThreads/threads/int64(ngpus) {
		return fmt.Errorf("grid %v of blocks %v on %d GPU(s) runs %d threads; the emulator's limit is %d (Limits.MaxThreads)",
			grid, blk, ngpus, satMul(blocks, threads*int64(ngpus)), s.limits.MaxThreads)
	}
	return nil
}

func satMul(a, b int64) int64 {
	if b != 0 && a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}
