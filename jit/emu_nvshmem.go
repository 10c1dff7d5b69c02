package jit

import (
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
)

// NVSHMEM's device API on the emulator is package nvshmem/shmemu (its Emulate
// registers every nvshmem_* function on the emu.System as an extern).
func init() {
	emulateNVSHMEM = func(sys *emu.System, noMulticast bool) (emuShmemDevice, error) {
		e, err := shmemu.Emulate(sys)
		if err != nil {
			return nil, err
		}
		e.NoMulticast = noMulticast
		return e, nil
	}
}
