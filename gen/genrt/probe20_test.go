package genrt

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe20NilDeviceAndLongPaths: Load of a nil *jit.Device said "no PTX for a  device:
// the package was generated for sm_90; regenerate it with an older target", LoadNVSHMEM
// told to initialise NVSHMEM on it, a package of no PTX was told to regenerate "for ; ...
// with an older target", and a 1 MB $KGEN_NVSHMEM_DEVICE_ARCHIVE was quoted whole. Probe 20.
func TestProbe20NilDeviceAndLongPaths(t *testing.T) {
	texts := map[ptx.Target]string{ptx.SM90: ".version 8.0\n.target sm_90\n.address_size 64\n"}
	_, _, err := Load(nil, "k", texts, nil)
	if err == nil || !strings.Contains(err.Error(), "k: the *jit.Device is nil") {
		t.Errorf("Load(nil): %v; want an error naming the nil device", err)
	}
	_, _, err = LoadNVSHMEM(nil, "k", texts, nil, &DevLib{Version: "3.4.5"})
	if err == nil || !strings.Contains(err.Error(), "k: the *jit.Device is nil") {
		t.Errorf("LoadNVSHMEM(nil): %v; want an error naming the nil device", err)
	}
	if _, err := PickTarget("sm_90", nil); err == nil || !strings.Contains(err.Error(), "no PTX for any target") {
		t.Errorf("PickTarget of no targets: %v; want an error saying the package holds no PTX", err)
	}
	t.Setenv(ArchiveEnv, "/nonexistent/"+strings.Repeat("x", 1<<20))
	if _, err := deviceArchive(""); err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), ArchiveEnv) {
		t.Errorf("a 1 MB $%s: an error of %d bytes; want a short one naming the variable", ArchiveEnv, len(err.Error()))
	}
}

// TestProbe20LongVersion: a $KGEN_EMU_NVSHMEM_VERSION of 100 KB made LoadNVSHMEM's version
// mismatch a 200 KB error (the version quoted twice), and jit.VersionError quoted a
// DevLib.Version whole. Probe 20.
func TestProbe20LongVersion(t *testing.T) {
	long := strings.Repeat("9", 100000)
	t.Setenv(jit.EmulatedNVSHMEMVersionEnv, long)
	err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
		_, _, err := LoadNVSHMEM(r.Device, "k", map[ptx.Target]string{ptx.SM90: "x"}, nil, &DevLib{Version: "3.4.5", Funcs: []string{"nvshmem_ptr"}})
		if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), "generated for NVSHMEM 3.4.5") {
			t.Errorf("a 100 KB emulated version: an error of %d bytes; want a short one naming both versions", len(err.Error()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ve := &jit.VersionError{DevLib: long, Host: "3.4.5", HostPath: "/x/libnvshmem_host.so"}
	if n := len(ve.Error()); n > 1000 {
		t.Errorf("VersionError of a 100 KB DevLib version: %d bytes", n)
	}
}
