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
		// Outside any checkout: a .tools beside the go.mod above the working folder (CI
		// installs one) would be found under an empty or bad variable.
		isolate(t)
		t.Setenv(v, long)
		if v != "KGEN_TOOLS" && ToolsDir() != "" {
			t.Fatalf("a .tools folder beside a go.mod above the test binary (%s) hides the case; run the test binary from elsewhere", ToolsDir())
		}
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
