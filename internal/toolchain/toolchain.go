// Package toolchain finds the external tools and libraries kgen drives: ptxas and nvlink
// (CUDA), llc and llvm-extract (LLVM 19) and NVSHMEM's device and host libraries.
//
// Search order for CUDA tools: $CUDA_HOME/bin, the project's tool folder, PATH.
// For LLVM tools: $KGEN_LLVM/bin, NAME-19 on PATH, /usr/lib/llvm-19/bin, the tool folder.
// For NVSHMEM: $NVSHMEM_HOME, the tool folder's wheel. The tool folder is $KGEN_TOOLS, or
// the .tools folder of the nearest enclosing module (scripts/tools.sh fills it). A module
// other than kgen's sets KGEN_TOOLS (or CUDA_HOME, NVSHMEM_HOME, KGEN_LLVM); the errors
// name the variables.
package toolchain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// LLVMVersion is the LLVM major version whose tools read NVSHMEM's bitcode.
const LLVMVersion = "19"

// NotFoundError says which tool was missing and every place that was searched.
type NotFoundError struct {
	Tool     string
	Searched []string
	Hint     string
}

// Error names the tool and the places searched, each cut to 256 bytes (a 100 KB
// $CUDA_HOME, $KGEN_TOOLS or $NVSHMEM_HOME was quoted whole).
func (e *NotFoundError) Error() string {
	where := make([]string, len(e.Searched))
	for i, s := range e.Searched {
		where[i] = excerpt.Cut(s, 256)
	}
	return fmt.Sprintf("toolchain: %s not found (searched %s); %s",
		e.Tool, strings.Join(where, ", "), e.Hint)
}

// noToolsDir stands in the searched list for a tool folder that is not there.
const noToolsDir = "the tool folder ($KGEN_TOOLS unset, no .tools beside an enclosing go.mod)"

// toolsHint says how to get a tool folder.
const toolsHint = "set KGEN_TOOLS to a tool folder filled by kgen's scripts/tools.sh (`make tools` in a kgen checkout fills its .tools)"

// ToolsDir returns the project's tool folder, or "" when there is none.
func ToolsDir() string {
	if d := os.Getenv("KGEN_TOOLS"); d != "" {
		return d
	}
	starts := []string{}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(filepath.Join(d, ".tools")); err == nil && fi.IsDir() {
				if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
					return filepath.Join(d, ".tools")
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

func wheelDir(parts ...string) string {
	d := ToolsDir()
	if d == "" {
		return ""
	}
	return filepath.Join(append([]string{d, "py", "nvidia"}, parts...)...)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// CUDATool finds a CUDA binary such as "ptxas" or "nvlink".
func CUDATool(name string) (string, error) {
	var searched []string
	try := func(dir string) string {
		if dir == "" {
			return ""
		}
		p := filepath.Join(dir, name)
		searched = append(searched, p)
		if isExec(p) {
			return p
		}
		return ""
	}
	if h := os.Getenv("CUDA_HOME"); h != "" {
		if p := try(filepath.Join(h, "bin")); p != "" {
			return p, nil
		}
	} else {
		searched = append(searched, "$CUDA_HOME (unset)")
	}
	if d := wheelDir("cu13", "bin"); d != "" {
		if p := try(d); p != "" {
			return p, nil
		}
	} else {
		searched = append(searched, noToolsDir)
	}
	searched = append(searched, "PATH")
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", &NotFoundError{Tool: name, Searched: searched,
		Hint: "set CUDA_HOME to a CUDA toolkit (" + name + " in $CUDA_HOME/bin), or " + toolsHint}
}

// LLVMTool finds an LLVM 19 binary such as "llc", "llvm-extract" or "llvm-dis".
func LLVMTool(name string) (string, error) {
	var searched []string
	if h := os.Getenv("KGEN_LLVM"); h != "" {
		p := filepath.Join(h, "bin", name)
		searched = append(searched, p)
		if isExec(p) {
			return p, nil
		}
	}
	versioned := name + "-" + LLVMVersion
	searched = append(searched, versioned+" on PATH")
	if p, err := exec.LookPath(versioned); err == nil {
		return p, nil
	}
	dirs := []string{filepath.Join("/usr/lib/llvm-"+LLVMVersion, "bin")}
	if d := ToolsDir(); d != "" {
		dirs = append(dirs, filepath.Join(d, "llvm", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		searched = append(searched, p)
		if isExec(p) {
			return p, nil
		}
	}
	return "", &NotFoundError{Tool: name, Searched: searched,
		Hint: "install LLVM " + LLVMVersion + " (apt-get install llvm-" + LLVMVersion + "), or set KGEN_LLVM to an LLVM " + LLVMVersion + " installation (" + name + " in $KGEN_LLVM/bin)"}
}

// NVSHMEMHome returns the folder holding NVSHMEM's lib/ and include/.
func NVSHMEMHome() (string, error) {
	var searched []string
	for _, d := range []string{os.Getenv("NVSHMEM_HOME"), wheelDir("nvshmem")} {
		if d == "" {
			continue
		}
		searched = append(searched, d)
		if _, err := os.Stat(filepath.Join(d, "lib", "libnvshmem_device.bc")); err == nil {
			return d, nil
		}
	}
	if os.Getenv("NVSHMEM_HOME") == "" {
		searched = append(searched, "$NVSHMEM_HOME (unset)")
	}
	if ToolsDir() == "" {
		searched = append(searched, noToolsDir)
	}
	return "", &NotFoundError{Tool: "NVSHMEM (lib/libnvshmem_device.bc)", Searched: searched,
		Hint: "set NVSHMEM_HOME to an NVSHMEM 3.x installation (the folder holding lib/libnvshmem_device.bc), or " + toolsHint}
}
