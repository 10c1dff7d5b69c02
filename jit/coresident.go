package jit

import (
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// coLauncher is a function that can launch a grid whose blocks wait on each other: it says
// how many blocks of a shape can be resident at once, and launches with that guarantee.
type coLauncher interface {
	// residentBlocks returns how many blocks of shape block fit on the device at once; it
	// runs on every co-resident launch, so it is cheap after the first.
	residentBlocks(block Dim3, shared int) (int, error)
	// residentLimit says what sets that number (for the refusal's message).
	residentLimit(block Dim3, shared int) string
	launchCoResident(grid, block Dim3, shared int, s stream, args []uint64, cfg *LaunchConfig) error
}

// The emulator's per-SM model for co-resident launches (LaunchConfig.CoResident): an H100's
// SM limits (2048 threads, 32 blocks, 228 KiB of shared memory of which each block also
// takes 1 KiB) over the emulated device's Info.Multiproc SMs. Registers are not modelled.
const (
	EmuSMThreads     = 2048
	EmuSMBlocks      = 32
	EmuSMShared      = 228 << 10
	EmuSMBlockShared = 1 << 10 // reserved per resident block
)

// emuResident is the emulator's count of co-resident blocks of shape block with shared
// bytes of (static + dynamic) shared memory on sms SMs.
func emuResident(sms int, block Dim3, shared int) (int, string) {
	threads := block.X * block.Y * block.Z
	warps := (threads + 31) / 32 * 32 // threads are allocated per warp
	byThreads := EmuSMThreads / max(warps, 1)
	perSM, limit := min(byThreads, EmuSMBlocks), fmt.Sprintf("%d threads per SM", EmuSMThreads)
	if EmuSMBlocks < byThreads {
		limit = fmt.Sprintf("%d blocks per SM", EmuSMBlocks)
	}
	if bySmem := EmuSMShared / (shared + EmuSMBlockShared); bySmem < perSM {
		perSM, limit = bySmem, fmt.Sprintf("%d bytes of shared memory per SM, %d per block", EmuSMShared, shared+EmuSMBlockShared)
	}
	return perSM * sms, fmt.Sprintf("%d SMs x %d blocks (%s)", sms, perSM, limit)
}

// staticShared is the static shared memory of kernel f in module m: its own .shared
// variables and the module's (extern, dynamic ones excepted), each aligned.
func staticShared(m *ptx.Module, f *ptx.Func) int {
	n := 0
	add := func(v *ptx.Var) {
		if v.Space != ptx.SpaceShared || v.Extern || v.Array < 0 {
			return
		}
		a := max(v.Align, 1)
		n = (n + a - 1) / a * a
		n += max(v.Array, 1) * max(v.Type.Bytes(), 1)
	}
	if m != nil {
		for _, v := range m.Vars {
			add(v)
		}
	}
	for _, v := range f.Vars {
		add(v)
	}
	return n
}

func (f *emuFunc) residentBlocks(block Dim3, shared int) (int, error) {
	n, _ := emuResident(emuMultiproc, block, shared+staticShared(f.m.mod, f.sig))
	return n, nil
}

func (f *emuFunc) residentLimit(block Dim3, shared int) string {
	_, why := emuResident(emuMultiproc, block, shared+staticShared(f.m.mod, f.sig))
	return why
}

func (f *emuFunc) launchCoResident(g, b Dim3, shared int, s stream, args []uint64, cfg *LaunchConfig) error {
	return f.launchMode(g, b, shared, s, args, cfg)
}
