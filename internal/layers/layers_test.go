package layers

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// moduleGraph lists the module's packages and their imports with the go command (default
// build tags, CGO_ENABLED=0: the build CI runs).
func moduleGraph(t *testing.T) Graph {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the go command is not on PATH")
		}
		t.Skip("the go command is not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := Graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	return g
}

// TestModuleLayers checks the module's import graph against Rules. A pending rule must still
// be broken; once its change lands the test fails until Pending is removed.
func TestModuleLayers(t *testing.T) {
	g := moduleGraph(t)
	vs, err := Check(g, Rules)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range Rules {
		switch v := vs[i]; {
		case v != nil && r.Pending == "":
			t.Errorf("%v", v)
		case v == nil && r.Pending != "":
			t.Errorf("rule %s must not import %v now holds: remove its Pending (%s)", r.Pkg, r.Not, r.Pending)
		case v != nil:
			t.Logf("pending (%s): %v", r.Pending, v)
		}
	}
	// The same graph with one forbidden import added breaks its rule.
	g[Module+"/fp"] = append(g[Module+"/fp"], Module+"/kernels")
	vs, err = Check(g, Rules)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range vs {
		found = found || v != nil && v.Rule.Pkg == "fp" && strings.HasPrefix(chain(v.Path), "fp -> kernels -> ")
	}
	if !found {
		t.Error("fp importing kernels (and so dsl) was not reported")
	}
}

// The checker finds a forbidden import added to a graph, with its chain, and only then.
func TestCheckFindsForbiddenImports(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	g := Graph{
		m("jit"):       {m("ptx"), m("emu"), "fmt"},
		m("emu"):       {m("ptx")},
		m("ptx"):       {"fmt"},
		m("dsl"):       {m("ptx"), m("layout")},
		m("layout"):    nil,
		m("gen/genrt"): {m("jit")},
		"fmt":          nil,
	}
	rules := []Rule{
		{Pkg: "jit", Not: []string{"dsl", "layout"}, Why: "runtime"},
		{Pkg: "gen/genrt", Not: []string{"dsl", "layout"}, Why: "runtime"},
	}
	vs, err := Check(g, rules)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0] != nil || vs[1] != nil {
		t.Fatalf("clean graph: %v %v", vs[0], vs[1])
	}
	g[m("emu")] = append(g[m("emu")], m("dsl")) // the forbidden import, two levels down
	vs, err = Check(g, rules)
	if err != nil {
		t.Fatal(err)
	}
	want := "gen/genrt must not import dsl (runtime): gen/genrt -> jit -> emu -> dsl"
	if vs[1] == nil || vs[1].String() != want {
		t.Fatalf("got %v, want %s", vs[1], want)
	}
	if vs[0] == nil || vs[0].String() != "jit must not import dsl (runtime): jit -> emu -> dsl" {
		t.Fatalf("jit: got %v", vs[0])
	}
	if _, err := Check(g, []Rule{{Pkg: "nosuch", Not: []string{"dsl"}}}); err == nil {
		t.Fatal("a rule for a package not in the graph was accepted")
	}
}

// A Direct rule sees only the package's own imports.
func TestCheckDirect(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	g := Graph{
		m("collectives"): {m("jit")},
		m("jit"):         {m("emu")},
		m("emu"):         nil,
	}
	rules := []Rule{{Pkg: "collectives", Not: []string{"emu"}, Why: "on jit alone", Direct: true}}
	vs, err := Check(g, rules)
	if err != nil || vs[0] != nil {
		t.Fatalf("through jit: %v %v", vs[0], err)
	}
	g[m("collectives")] = append(g[m("collectives")], m("emu"))
	vs, err = Check(g, rules)
	if err != nil || vs[0] == nil || vs[0].String() != "collectives must not import emu (on jit alone): collectives -> emu" {
		t.Fatalf("direct import: %v %v", vs[0], err)
	}
}
