package jit

import (
	"os"
	"path/filepath"

	"github.com/kgen-dev/kgen/internal/toolchain"
)

// NVSHMEMHostLib is the file name of NVSHMEM 3's host library (it has no unversioned link).
const NVSHMEMHostLib = "libnvshmem_host.so.3"

// NVSHMEMHostCandidates lists where InitNVSHMEM looks for the host library, in order:
// explicit (when not empty), $NVSHMEM_HOME/lib, the project's tool folder (the
// nvidia-nvshmem-cu13 wheel that scripts/tools.sh installs), the PyPI wheel's folder in the
// Python environments of the GPU machines (/opt/*/.venv/lib/python3*/site-packages/nvidia/
// nvshmem/lib) and the system's site-packages, and last the bare name, which the dynamic
// loader resolves through LD_LIBRARY_PATH and ldconfig.
func NVSHMEMHostCandidates(explicit string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	add(explicit)
	if h := os.Getenv("NVSHMEM_HOME"); h != "" {
		add(filepath.Join(h, "lib", NVSHMEMHostLib))
	}
	if d := toolchain.ToolsDir(); d != "" {
		add(filepath.Join(d, "py", "nvidia", "nvshmem", "lib", NVSHMEMHostLib))
	}
	add(filepath.Join("/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem/lib", NVSHMEMHostLib))
	for _, pat := range []string{
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/nvshmem/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/nvshmem/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/nvshmem/lib",
		"/usr/lib/python3/dist-packages/nvidia/nvshmem/lib",
	} {
		ms, _ := filepath.Glob(pat)
		for _, m := range ms {
			add(filepath.Join(m, NVSHMEMHostLib))
		}
	}
	add(NVSHMEMHostLib)
	return out
}
