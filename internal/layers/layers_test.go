package layers

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/kgen-dev/kgen/"

// forbidden lists, per package, the packages it must not import, directly or not.
var forbidden = map[string][]string{
	"jit":             {"dsl", "layout", "nvshmem", "kernels"}, // the runtime imports no builder
	"nvshmem/shmemu":  {"dsl", "layout", "nvshmem"},            // the emulation is apart from the device API
	"nvshmem/abi":     {"dsl", "layout", "emu"},
	"kernels":         {"emu", "jit", "nvshmem/shmemu"}, // kernels are built, not run
	"nvshmem":         {"emu", "jit", "nvshmem/shmemu"},
	"dsl":             {"emu", "jit", "nvshmem"},
	"ptx":             {"dsl", "layout", "emu", "jit"},
	"emu":             {"dsl", "layout", "jit", "nvshmem"},
	"gen/genrt":       {"dsl", "layout"},
	"nvshmem/devlib":  {"dsl", "emu", "jit"},
	"internal/layers": {"dsl"},
}

// forbiddenDirect lists, per package, the packages it must not import itself (it may reach
// them through another layer).
var forbiddenDirect = map[string][]string{
	"collectives": {"emu", "nvshmem/shmemu"}, // collectives run on jit alone
}

// violations returns, sorted, "pkg imports bad (via chain)" for every forbidden dependency
// in graph (package -> its direct imports, module-relative names).
func violations(graph map[string][]string, rules map[string][]string) []string {
	var out []string
	for pkg, bad := range rules {
		// breadth-first from pkg, remembering how each package was reached
		via := map[string]string{pkg: ""}
		queue := []string{pkg}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, q := range graph[p] {
				if _, seen := via[q]; !seen {
					via[q] = p
					queue = append(queue, q)
				}
			}
		}
		for _, b := range bad {
			if _, ok := via[b]; !ok {
				continue
			}
			chain := []string{b}
			for p := via[b]; p != ""; p = via[p] {
				chain = append([]string{p}, chain...)
			}
			out = append(out, fmt.Sprintf("%s imports %s (%s)", pkg, b, strings.Join(chain, " -> ")))
		}
	}
	sort.Strings(out)
	return out
}

// moduleGraph lists the module's packages and their direct imports within the module.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "github.com/kgen-dev/kgen/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, mod)
		graph[name] = nil
		for _, q := range p.Imports {
			if strings.HasPrefix(q, mod) {
				graph[name] = append(graph[name], strings.TrimPrefix(q, mod))
			}
		}
	}
	return graph
}

// TestImportGraph checks the module's packages against the rules.
func TestImportGraph(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed to list the packages: %v", err)
	}
	graph := moduleGraph(t)
	for pkg := range forbidden {
		if _, ok := graph[pkg]; !ok {
			t.Errorf("rule for %s, which is not a package of the module", pkg)
		}
	}
	for _, v := range violations(graph, forbidden) {
		t.Error(v)
	}
	for pkg, bad := range forbiddenDirect {
		for _, q := range graph[pkg] {
			for _, b := range bad {
				if q == b {
					t.Errorf("%s imports %s itself", pkg, b)
				}
			}
		}
	}
}

// TestViolationsFound checks that a forbidden import, direct or through another package,
// is reported with its chain.
func TestViolationsFound(t *testing.T) {
	graph := map[string][]string{
		"jit":            {"emu", "nvshmem/shmemu"},
		"nvshmem/shmemu": {"emu", "nvshmem/abi"},
		"emu":            {"ptx"},
	}
	if v := violations(graph, forbidden); len(v) != 0 {
		t.Fatalf("clean graph: %v", v)
	}
	graph["nvshmem/shmemu"] = append(graph["nvshmem/shmemu"], "dsl")
	graph["dsl"] = []string{"layout"}
	got := strings.Join(violations(graph, forbidden), "\n")
	for _, want := range []string{
		"jit imports dsl (jit -> nvshmem/shmemu -> dsl)",
		"jit imports layout (jit -> nvshmem/shmemu -> dsl -> layout)",
		"nvshmem/shmemu imports dsl (nvshmem/shmemu -> dsl)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
