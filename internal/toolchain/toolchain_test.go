package toolchain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolate clears every variable the search reads and moves into an empty folder outside any
// module, with an empty PATH: nothing is found.
func isolate(t *testing.T) string {
	t.Helper()
	for _, v := range []string{"KGEN_TOOLS", "CUDA_HOME", "NVSHMEM_HOME", "KGEN_LLVM"} {
		t.Setenv(v, "")
	}
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

// touch makes the file (and its folders); exec makes it executable.
func touch(t *testing.T, path string, exec bool) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	mode := os.FileMode(0o644)
	if exec {
		mode = 0o755
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNotFoundNamesTheVariables: outside any kgen checkout and with nothing set, each
// not-found error says which variable to set.
func TestNotFoundNamesTheVariables(t *testing.T) {
	isolate(t)
	if d := ToolsDir(); d != "" {
		t.Fatalf("a .tools folder beside a go.mod above the test binary (%s) hides the case; run the test binary from elsewhere", d)
	}
	for _, c := range []struct {
		find func() (string, error)
		want []string
	}{
		{func() (string, error) { return CUDATool("ptxas") }, []string{"ptxas not found", "$CUDA_HOME (unset)", "set CUDA_HOME", "KGEN_TOOLS", "scripts/tools.sh"}},
		{NVSHMEMHome, []string{"$NVSHMEM_HOME (unset)", "set NVSHMEM_HOME", "lib/libnvshmem_device.bc", "KGEN_TOOLS"}},
		{func() (string, error) { return LLVMTool("llvm-no-such-tool") }, []string{"llvm-no-such-tool-19 on PATH", "KGEN_LLVM", "llvm-19"}},
	} {
		_, err := c.find()
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("got %v, want a *NotFoundError", err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v\ndoes not say %q", err, w)
			}
		}
		if strings.Contains(err.Error(), "make tools`,") {
			t.Errorf("%v\nasks for make tools, which a module other than kgen's does not have", err)
		}
	}
}

// TestVariablesFindTheTools: each variable, set from a module other than kgen's, finds its
// tool, and CUDA_HOME and NVSHMEM_HOME come before the tool folder.
func TestVariablesFindTheTools(t *testing.T) {
	isolate(t)
	tools := t.TempDir()
	t.Setenv("KGEN_TOOLS", tools)
	ptxas := touch(t, filepath.Join(tools, "py", "nvidia", "cu13", "bin", "ptxas"), true)
	touch(t, filepath.Join(tools, "py", "nvidia", "nvshmem", "lib", "libnvshmem_device.bc"), false)
	if p, err := CUDATool("ptxas"); err != nil || p != ptxas {
		t.Errorf("KGEN_TOOLS: ptxas %q, %v; want %s", p, err, ptxas)
	}
	if h, err := NVSHMEMHome(); err != nil || h != filepath.Join(tools, "py", "nvidia", "nvshmem") {
		t.Errorf("KGEN_TOOLS: NVSHMEM %q, %v", h, err)
	}

	cuda := t.TempDir()
	t.Setenv("CUDA_HOME", cuda)
	own := touch(t, filepath.Join(cuda, "bin", "ptxas"), true)
	if p, err := CUDATool("ptxas"); err != nil || p != own {
		t.Errorf("CUDA_HOME: ptxas %q, %v; want %s", p, err, own)
	}
	nv := t.TempDir()
	t.Setenv("NVSHMEM_HOME", nv)
	touch(t, filepath.Join(nv, "lib", "libnvshmem_device.bc"), false)
	if h, err := NVSHMEMHome(); err != nil || h != nv {
		t.Errorf("NVSHMEM_HOME: %q, %v; want %s", h, err, nv)
	}
	llvm := t.TempDir()
	t.Setenv("KGEN_LLVM", llvm)
	tool := touch(t, filepath.Join(llvm, "bin", "llvm-kgen-test-tool"), true)
	if p, err := LLVMTool("llvm-kgen-test-tool"); err != nil || p != tool {
		t.Errorf("KGEN_LLVM: %q, %v; want %s", p, err, tool)
	}
}

// TestToolsBesideGoMod: without KGEN_TOOLS, the .tools folder beside the go.mod of an
// enclosing module is the tool folder.
func TestToolsBesideGoMod(t *testing.T) {
	dir := isolate(t)
	touch(t, filepath.Join(dir, "go.mod"), false)
	ptxas := touch(t, filepath.Join(dir, ".tools", "py", "nvidia", "cu13", "bin", "ptxas"), true)
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if p, err := CUDATool("ptxas"); err != nil || p != ptxas {
		t.Errorf("ptxas %q, %v; want %s", p, err, ptxas)
	}
}
