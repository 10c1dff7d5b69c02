package genrt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// DevLib is what a generated package carries for its kernels that call NVSHMEM: the
// device library built, per target, from the functions they call, and the NVSHMEM version
// it was built from.
type DevLib struct {
	// Version is the NVSHMEM version the package was generated for ("3.4.5").
	Version string
	// Funcs are the NVSHMEM device functions the package's kernels call.
	Funcs []string
	// PTX is the devlib PTX per target (nvshmem/devlib's output).
	PTX map[ptx.Target]string
}

// ArchiveEnv names the variable that points at libnvshmem_device.a when it is not beside
// the host library NVSHMEM loaded (nor in $NVSHMEM_HOME/lib).
const ArchiveEnv = "KGEN_NVSHMEM_DEVICE_ARCHIVE"

// LoadNVSHMEM is Load for a kernel that calls NVSHMEM: NVSHMEM must run on d
// (jit.InitNVSHMEM), and its version must be the one the package was generated for, else
// the error names both. On the GPU the kernel links with the package's devlib PTX for the
// chosen target and libnvshmem_device.a ($KGEN_NVSHMEM_DEVICE_ARCHIVE, else
// $NVSHMEM_HOME/lib, else the folder of the host library NVSHMEM loaded). The emulator
// implements the device API itself and reports version "emulator", which matches any
// (set $KGEN_EMU_NVSHMEM_VERSION to make it report another).
func LoadNVSHMEM(d *jit.Device, entry string, texts map[ptx.Target]string, params []jit.ParamInfo, lib *DevLib) (*jit.Module, *jit.Function, error) {
	if lib == nil {
		return nil, nil, fmt.Errorf("%s calls NVSHMEM but the package carries no device library; regenerate it", entry)
	}
	if d == nil { // not "initialise NVSHMEM on the device first"
		return nil, nil, fmt.Errorf("%s: the *jit.Device is nil (open one with jit.Open, then jit.InitNVSHMEM)", entry)
	}
	sh := d.NVSHMEM()
	if sh == nil {
		return nil, nil, fmt.Errorf("%s calls NVSHMEM (%s): initialise NVSHMEM on the device first (jit.InitNVSHMEM, or jit.RunRanks with NVSHMEM: true)", entry, strings.Join(lib.Funcs, ", "))
	}
	if v := sh.Version(); v != "emulator" && v != lib.Version {
		where := ""
		if p := sh.LibPath(); p != "" {
			where = " (" + shortPath(p) + ")"
		}
		v = excerpt.Cut(v, excerpt.Max) // $KGEN_EMU_NVSHMEM_VERSION of 100 KB was quoted twice
		return nil, nil, fmt.Errorf("%s: the package was generated for NVSHMEM %s, but the NVSHMEM running here%s is %s; regenerate the package against NVSHMEM %s, or run with NVSHMEM %s", entry, excerpt.Cut(lib.Version, excerpt.Max), where, v, v, excerpt.Cut(lib.Version, excerpt.Max))
	}
	t, err := pick(d, entry, texts)
	if err != nil {
		return nil, nil, err
	}
	dl := &jit.DevLib{Version: lib.Version}
	if d.Info().Backend == jit.GPU {
		text, ok := lib.PTX[t]
		if !ok {
			return nil, nil, fmt.Errorf("%s: the package has no NVSHMEM device library for %s; regenerate it", entry, t)
		}
		dl.PTX = []byte(text)
		if dl.Archive, err = deviceArchive(sh.LibPath()); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", entry, err)
		}
	}
	return load(d, entry, t, texts[t], params, dl)
}

// deviceArchive finds libnvshmem_device.a for the host library at hostLib: a regular file
// (or a link to one). A FIFO or device there is no archive (the cache key hashes the whole
// file: a FIFO blocked the load, /dev/zero read without end).
func deviceArchive(hostLib string) (string, error) {
	var tried []string
	try := func(p string) bool {
		tried = append(tried, shortPath(p))
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular()
	}
	if p := os.Getenv(ArchiveEnv); p != "" {
		if try(p) {
			return p, nil
		}
		return "", fmt.Errorf("$%s=%s is not a regular file", ArchiveEnv, shortPath(p))
	}
	if h := os.Getenv("NVSHMEM_HOME"); h != "" && try(filepath.Join(h, "lib", "libnvshmem_device.a")) {
		return filepath.Join(h, "lib", "libnvshmem_device.a"), nil
	}
	if hostLib != "" && try(filepath.Join(filepath.Dir(hostLib), "libnvshmem_device.a")) {
		return filepath.Join(filepath.Dir(hostLib), "libnvshmem_device.a"), nil
	}
	return "", fmt.Errorf("libnvshmem_device.a not found (tried %s); set $%s", strings.Join(tried, ", "), ArchiveEnv)
}

// shortPath is p for a message: whole up to 256 bytes, else a quoted excerpt and its length
// (a 1 MB $KGEN_NVSHMEM_DEVICE_ARCHIVE or $NVSHMEM_HOME was quoted whole).
func shortPath(p string) string {
	if len(p) <= 256 {
		return p
	}
	return excerpt.Quote(p)
}
