// Package gputest is the acceptance test of kgen's NVSHMEM device API: kernels that call
// every operation at every scope, and checks of their results against NVSHMEM's semantics.
//
// The same cases run on two machines: the emulator (EmuMachine, every PE in one process; the
// package's tests) and real GPUs through package jit (cmd/nvshmem-gputest, built with -tags
// cuda, one process per PE; scripts/gpu-nvshmem.sh).
package gputest

import (
	"fmt"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
	"github.com/kgen-dev/kgen/ptx"
)

// Machine runs the cases: it allocates symmetric memory, moves bytes to and from the PEs
// this process owns, and launches a kernel collectively on every PE.
type Machine interface {
	// NPEs returns the number of PEs.
	NPEs() int
	// Local returns the PEs whose memory this process writes and reads.
	Local() []int
	// Alloc allocates size zeroed bytes of symmetric memory.
	Alloc(size int) (Sym, error)
	// Write copies b to PE pe's copy of s (pe is a local PE).
	Write(s Sym, pe int, b []byte) error
	// Read copies PE pe's copy of s into b.
	Read(s Sym, pe int, b []byte) error
	// Launch runs entry of m on every PE, with one block of block threads and the arguments
	// args(pe), and returns when every PE has finished it (and its puts are complete).
	Launch(m *ptx.Module, entry string, block int, args func(pe int) []any) error
	// Multicast reports whether nvshmemx_mc_ptr returns multicast addresses.
	Multicast() bool
}

// Sym is a symmetric allocation.
type Sym interface {
	// Addr returns PE pe's address of the allocation, as a kernel argument.
	Addr(pe int) uint64
}

// EmuMachine runs the cases on the emulator.
type EmuMachine struct {
	Sys *emu.System
	Emu *shmemu.Emulator
	// Options are passed to every launch (a seed, the weak-memory mode).
	Options emu.Options
}

// NewEmuMachine returns an emulator of npes GPUs with NVSHMEM's device API registered.
func NewEmuMachine(npes int) (*EmuMachine, error) {
	s, err := emu.New(npes)
	if err != nil {
		return nil, err
	}
	e, err := shmemu.Emulate(s)
	if err != nil {
		return nil, err
	}
	return &EmuMachine{Sys: s, Emu: e}, nil
}

type emuSym struct{ m *emu.Symmetric }

func (s emuSym) Addr(pe int) uint64 { return s.m.On(pe) }

// NPEs returns the number of simulated GPUs.
func (m *EmuMachine) NPEs() int { return m.Sys.NumGPUs() }

// Local returns every PE: the emulator holds them all.
func (m *EmuMachine) Local() []int { return m.Sys.All() }

// Alloc allocates symmetric memory.
func (m *EmuMachine) Alloc(size int) (Sym, error) {
	s, err := m.Sys.MallocSymmetric(size)
	if err != nil {
		return nil, err
	}
	return emuSym{s}, nil
}

// Write writes PE pe's copy.
func (m *EmuMachine) Write(s Sym, pe int, b []byte) error { return m.Sys.Write(s.Addr(pe), b) }

// Read reads PE pe's copy.
func (m *EmuMachine) Read(s Sym, pe int, b []byte) error { return m.Sys.Read(s.Addr(pe), b) }

// Launch runs one collective launch over every simulated GPU, then delivers what the kernel
// left pending.
func (m *EmuMachine) Launch(mod *ptx.Module, entry string, block int, args func(pe int) []any) error {
	err := m.Sys.Launch(emu.Launch{Module: mod, Entry: entry, GPUs: m.Sys.All(), Grid: emu.D1(1), Block: emu.D1(block),
		ArgsFor: args, Options: m.Options})
	if err != nil {
		m.Emu.Reset()
		return err
	}
	if err := m.Emu.Quiet(); err != nil {
		return fmt.Errorf("delivering pending puts: %w", err)
	}
	return nil
}

// Multicast reports whether the emulator hands out multicast addresses.
func (m *EmuMachine) Multicast() bool { return !m.Emu.NoMulticast }
