package jit

import "os"

// NVSHMEM returns the NVSHMEM running on d (InitNVSHMEM), or nil when none is; a finalized
// one is nil too.
func (d *Device) NVSHMEM() *NVSHMEM {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shmem == nil || d.shmem.finalized() {
		return nil
	}
	return d.shmem
}

// EmulatedNVSHMEMVersionEnv names the variable that makes the emulator's NVSHMEM report a
// version ("3.4.5") instead of "emulator", so that version checks (a generated package
// built for one NVSHMEM, loaded against another) can be exercised without GPUs.
const EmulatedNVSHMEMVersionEnv = "KGEN_EMU_NVSHMEM_VERSION"

// emulatedVersion is the version NVSHMEM reports on d: the host library's, or on the
// emulator $KGEN_EMU_NVSHMEM_VERSION when set.
func emulatedVersion(d *Device, v string) string {
	if d.info.Backend == Emulator {
		if e := os.Getenv(EmulatedNVSHMEMVersionEnv); e != "" {
			return e
		}
	}
	return v
}
