package collectives

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Backend is what the collectives need from a multi-GPU runtime: symmetric memory with peer
// and multicast addresses, host and device copies, and collective launches. The emulator
// implements it (Emu); a GPU runtime (package jit with NVSHMEM) implements the same calls.
//
// A Backend drives the GPUs Local() of a group of NumGPUs(): all of them when one process
// drives every GPU (the emulator), or only its own when every GPU has a process (one rank
// per process, NVSHMEM style). Every process makes the same calls in the same order.
type Backend interface {
	// NumGPUs is the number of GPUs of the group.
	NumGPUs() int
	// Local lists the GPUs this process drives.
	Local() []int
	// Alloc makes a zeroed symmetric allocation of bytes on every GPU (collective).
	Alloc(bytes int) (Mem, error)
	// Free releases a symmetric allocation (collective).
	Free(m Mem) error
	// Addr returns the address through which GPU viewer reaches GPU owner's copy of m (its
	// own copy when viewer == owner; nvshmem_ptr otherwise).
	Addr(m Mem, viewer, owner int) (uint64, error)
	// Multicast returns the multicast address of m as GPU viewer uses it (nvshmemx_mc_ptr),
	// or an error saying why there is none.
	Multicast(m Mem, viewer int) (uint64, error)
	// Write copies p to GPU gpu's copy of m at byte offset off.
	Write(m Mem, gpu, off int, p []byte) error
	// Read copies GPU gpu's copy of m at byte offset off into p.
	Read(m Mem, gpu, off int, p []byte) error
	// Copy copies n bytes between two allocations on one GPU.
	Copy(gpu int, dst Mem, dstOff int, src Mem, srcOff int, n int) error
	// Launch runs a kernel on every local GPU, each with its own arguments, as one
	// collective launch (all GPUs' grids run concurrently: they wait on each other).
	Launch(l Launch) error
}

// Mem is a symmetric allocation of a Backend.
type Mem interface {
	// Bytes is the allocation's size on each GPU.
	Bytes() int
}

// Launch is one collective kernel launch.
type Launch struct {
	Module      *ptx.Module
	Entry       string
	Grid, Block int
	// Args returns GPU gpu's kernel arguments.
	Args func(gpu int) []any
}

// Emu runs the collectives on the emulator: every simulated GPU of one emu.System, driven by
// this process.
type Emu struct {
	// Sys is the emulated machine.
	Sys *emu.System
	// NoMulticast hides the multicast addresses (as on a machine without NVLink SHARP, or
	// with NVSHMEM_DISABLE_NVLS=1), so the collectives fall back to peer-to-peer kernels.
	NoMulticast bool
	// Options are the emulator options of every launch (Weak, Seed, ...).
	Options emu.Options
}

type emuMem struct{ s *emu.Symmetric }

func (m emuMem) Bytes() int { return m.s.Size }

func (e *Emu) mem(m Mem) (*emu.Symmetric, error) {
	em, ok := m.(emuMem)
	if !ok || em.s == nil {
		return nil, fmt.Errorf("collectives: %T is not an allocation of the emulator backend", m)
	}
	return em.s, nil
}

// NumGPUs returns the number of simulated GPUs.
func (e *Emu) NumGPUs() int { return e.Sys.NumGPUs() }

// Local returns every GPU: one process drives them all.
func (e *Emu) Local() []int { return e.Sys.All() }

// Alloc allocates symmetric memory on every simulated GPU.
func (e *Emu) Alloc(bytes int) (Mem, error) {
	s, err := e.Sys.MallocSymmetric(bytes)
	if err != nil {
		return nil, err
	}
	return emuMem{s}, nil
}

// Free releases a symmetric allocation.
func (e *Emu) Free(m Mem) error {
	s, err := e.mem(m)
	if err != nil {
		return err
	}
	return e.Sys.FreeSymmetric(s)
}

// Addr returns owner's copy (every simulated GPU reaches every address).
func (e *Emu) Addr(m Mem, viewer, owner int) (uint64, error) {
	s, err := e.mem(m)
	if err != nil {
		return 0, err
	}
	if owner < 0 || owner >= e.NumGPUs() || viewer < 0 || viewer >= e.NumGPUs() {
		return 0, fmt.Errorf("collectives: GPU %d or %d out of range (%d GPUs)", viewer, owner, e.NumGPUs())
	}
	return s.On(owner), nil
}

// ErrNoMulticast is returned by Emu.Multicast when NoMulticast is set.
var ErrNoMulticast = errors.New("multicast is disabled on this emulated machine (Emu.NoMulticast)")

// Multicast returns the multicast address, unless NoMulticast is set.
func (e *Emu) Multicast(m Mem, viewer int) (uint64, error) {
	s, err := e.mem(m)
	if err != nil {
		return 0, err
	}
	if e.NoMulticast {
		return 0, ErrNoMulticast
	}
	return s.Multicast(), nil
}

// Write copies p into GPU gpu's copy.
func (e *Emu) Write(m Mem, gpu, off int, p []byte) error {
	s, err := e.mem(m)
	if err != nil {
		return err
	}
	if off < 0 || off+len(p) > s.Size {
		return fmt.Errorf("collectives: write of %d bytes at %d: the allocation has %d", len(p), off, s.Size)
	}
	return e.Sys.Write(s.On(gpu)+uint64(off), p)
}

// Read copies GPU gpu's copy into p.
func (e *Emu) Read(m Mem, gpu, off int, p []byte) error {
	s, err := e.mem(m)
	if err != nil {
		return err
	}
	if off < 0 || off+len(p) > s.Size {
		return fmt.Errorf("collectives: read of %d bytes at %d: the allocation has %d", len(p), off, s.Size)
	}
	return e.Sys.Read(s.On(gpu)+uint64(off), p)
}

// Copy copies n bytes on one GPU.
func (e *Emu) Copy(gpu int, dst Mem, dstOff int, src Mem, srcOff int, n int) error {
	d, err := e.mem(dst)
	if err != nil {
		return err
	}
	s, err := e.mem(src)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return e.Sys.Copy(d.On(gpu)+uint64(dstOff), s.On(gpu)+uint64(srcOff), n)
}

// Launch runs the kernel on every simulated GPU at once.
func (e *Emu) Launch(l Launch) error {
	return e.Sys.Launch(emu.Launch{
		Module: l.Module, Entry: l.Entry, GPUs: e.Sys.All(), Grid: emu.D1(l.Grid), Block: emu.D1(l.Block),
		ArgsFor: l.Args, Options: e.Options,
	})
}
