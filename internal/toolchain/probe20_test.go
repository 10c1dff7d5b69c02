package toolchain

import (
	"strings"
	"testing"
)

// TestProbe20LongSearchedPath: a tool not found under a 100 KB $CUDA_HOME, $KGEN_TOOLS or
// $NVSHMEM_HOME gave an error of 100 KB (`kgen check`, `kgen devlib`): each searched place
// is cut to an excerpt. Probe 20.
func TestProbe20LongSearchedPath(t *testing.T) {
	long := "/nonexistent/" + strings.Repeat("x", 100000)
	for _, v := range []string{"CUDA_HOME", "KGEN_TOOLS", "NVSHMEM_HOME"} {
		t.Setenv("CUDA_HOME", "")
		t.Setenv("KGEN_TOOLS", "")
		t.Setenv("NVSHMEM_HOME", "")
		t.Setenv("PATH", "/nonexistent")
		t.Setenv(v, long)
		_, err := CUDATool("ptxas")
		if v == "NVSHMEM_HOME" {
			_, err = NVSHMEMHome()
		}
		if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "/nonexistent/xxx") {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("$%s of 100 KB: an error of %d bytes; want a short one showing the path's start", v, n)
		}
	}
}
