// Package layers states which kgen packages may depend on which (the import graph's rules)
// and checks a graph against them; its test checks the module's real graph.
package layers

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the import path prefix of kgen's packages.
const Module = "github.com/kgen-dev/kgen"

// Rule forbids Pkg (a path relative to Module) to depend, directly or not, on any of Not.
type Rule struct {
	Pkg string
	Not []string
	Why string
	// Pending, when set, says what must land before the rule holds: until then the check
	// expects it to be broken (and says so when it is not, so that it gets turned on).
	Pending string
	// Direct forbids only Pkg's own imports (it may reach Not through another layer).
	Direct bool
}

// Rules are kgen's layering rules.
var Rules = []Rule{
	{Pkg: "ptx", Not: []string{"layout", "dsl", "emu", "jit", "nvshmem", "kernels"}, Why: "PTX as data knows nothing of its users"},
	{Pkg: "layout", Not: []string{"ptx", "dsl", "emu", "jit"}, Why: "the layout algebra stands alone"},
	{Pkg: "fp", Not: []string{"ptx", "dsl", "layout", "emu", "jit"}, Why: "host number formats for users, no machinery"},
	{Pkg: "dsl", Not: []string{"jit", "emu", "kernels", "nvshmem"}, Why: "the builder emits PTX and runs nothing"},
	{Pkg: "emu", Not: []string{"dsl", "layout", "jit", "kernels"}, Why: "the emulator runs ptx modules, whoever built them"},
	{Pkg: "kernels", Not: []string{"jit"}, Why: "the kernel library is built, not run: runtimes use it, not the reverse"},
	{Pkg: "kernels", Not: []string{"emu"}, Why: "the kernel library does not import the emulator"},
	{Pkg: "jit", Not: []string{"dsl", "layout"}, Why: "the runtime imports no builder"},
	{Pkg: "gen/genrt", Not: []string{"dsl", "layout"}, Why: "generated packages' runtime imports no builder"},
	{Pkg: "kernels/launch", Not: []string{"dsl", "layout"}, Why: "library kernels' host twins import no builder"},
	{Pkg: "examples/vadd", Not: []string{"dsl", "layout", "gen"}, Why: "a program using a generated package imports no builder"},
	{Pkg: "nvshmem/abi", Not: []string{"dsl", "layout", "emu", "jit"}, Why: "NVSHMEM's ABI is data, read by the device API and the emulation"},
	{Pkg: "nvshmem/shmemu", Not: []string{"dsl", "layout", "nvshmem", "jit"}, Why: "NVSHMEM's emulation sits apart from its device API"},
	{Pkg: "nvshmem", Not: []string{"emu", "jit", "nvshmem/shmemu"}, Why: "NVSHMEM's device API is built, not run"},
	{Pkg: "collectives", Not: []string{"emu", "nvshmem/shmemu", "nvshmem"}, Why: "the collectives run on jit alone", Direct: true},
}

// Graph maps each package's import path to its direct imports.
type Graph map[string][]string

// Violation is a broken rule and the import chain that breaks it.
type Violation struct {
	Rule Rule
	Path []string // Pkg ... the forbidden package, import by import (full import paths)
}

func (v Violation) String() string {
	return fmt.Sprintf("%s must not import %s (%s): %s", v.Rule.Pkg, rel(v.Path[len(v.Path)-1]), v.Rule.Why, chain(v.Path))
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, Module), "/") }

func chain(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = rel(p)
	}
	return strings.Join(parts, " -> ")
}

// Check returns, for each rule, the violation found (the shortest chain to the first
// forbidden package, in Not's order), or nil when the rule holds. A rule whose package is
// not in g is an error: the table would silently check nothing.
func Check(g Graph, rules []Rule) ([]*Violation, error) {
	out := make([]*Violation, len(rules))
	for i, r := range rules {
		from := Module + "/" + r.Pkg
		if _, ok := g[from]; !ok {
			return nil, fmt.Errorf("rule for %s: no such package in the graph", r.Pkg)
		}
		prev := map[string]string{from: ""}
		queue := []string{from}
		if r.Direct {
			for _, q := range g[from] {
				prev[q] = from
			}
			queue = nil
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			imps := append([]string(nil), g[p]...)
			sort.Strings(imps)
			for _, q := range imps {
				if _, seen := prev[q]; !seen {
					prev[q] = p
					queue = append(queue, q)
				}
			}
		}
		for _, not := range r.Not {
			target := Module + "/" + not
			if _, reached := prev[target]; !reached {
				continue
			}
			var path []string
			for p := target; p != ""; p = prev[p] {
				path = append([]string{p}, path...)
			}
			out[i] = &Violation{Rule: r, Path: path}
			break
		}
	}
	return out, nil
}
