// Package kernels is kgen's library of kernels written in the DSL: element-wise kernels now,
// collectives next. Each kernel is a Spec in the registry; All and Lookup find them, and
// Spec.Build makes the PTX module for one configuration (target and element type).
package kernels

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// Config selects one variant of a kernel.
type Config struct {
	Target ptx.Target
	DType  dsl.Type
}

// Spec describes a library kernel.
type Spec struct {
	Name    string
	Doc     string       // one line
	DTypes  []dsl.Type   // the element types it is built for
	Targets []ptx.Target // the targets it supports
	// Golden lists the targets whose PTX is pinned in golden/ (a subset of Targets).
	Golden []ptx.Target
	// New writes the kernel into k for the element type dt.
	New func(k *dsl.Kernel, dt dsl.Type)
}

var registry = map[string]*Spec{}

func register(s *Spec) {
	if _, dup := registry[s.Name]; dup {
		panic("kernels: duplicate kernel " + s.Name) // a programming error in this package
	}
	if s.Targets == nil {
		s.Targets = ptx.Targets()
	}
	if s.Golden == nil {
		s.Golden = []ptx.Target{ptx.SM80, ptx.SM90}
	}
	registry[s.Name] = s
}

// All returns every library kernel, sorted by name.
func All() []*Spec {
	out := make([]*Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the kernel names, sorted.
func Names() []string {
	var n []string
	for _, s := range All() {
		n = append(n, s.Name)
	}
	return n
}

// Lookup finds a kernel by name; the error lists the valid names.
func Lookup(name string) (*Spec, error) {
	if s, ok := registry[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("unknown kernel %q (valid: %s)", name, strings.Join(Names(), ", "))
}

// ParseDType finds one of the kernel's element types by name; the error lists the valid ones.
func (s *Spec) ParseDType(name string) (dsl.Type, error) {
	for _, t := range s.DTypes {
		if t.String() == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("kernel %s has no dtype %q (valid: %s)", s.Name, name, s.dtypeNames())
}

func (s *Spec) dtypeNames() string {
	var n []string
	for _, t := range s.DTypes {
		n = append(n, t.String())
	}
	return strings.Join(n, ", ")
}

// VariantName is the PTX entry name of one variant: "vector_add_f32".
func (s *Spec) VariantName(dt dsl.Type) string { return s.Name + "_" + dt.String() }

// Build makes the verified PTX module of one variant.
func (s *Spec) Build(c Config) (*ptx.Module, error) {
	m, _, err := s.BuildParams(c)
	return m, err
}

// BuildParams makes the verified PTX module of one variant and returns what its builder
// declared of its parameters (element types of pointers), for launches that check them
// (jit.Source.Params).
func (s *Spec) BuildParams(c Config) (*ptx.Module, []dsl.ParamInfo, error) {
	ok := false
	for _, t := range s.DTypes {
		ok = ok || t == c.DType
	}
	if !ok {
		return nil, nil, fmt.Errorf("kernel %s has no dtype %q (valid: %s)", s.Name, c.DType, s.dtypeNames())
	}
	ok = false
	for _, t := range s.Targets {
		ok = ok || t == c.Target
	}
	if !ok {
		return nil, nil, fmt.Errorf("kernel %s does not support target %q", s.Name, c.Target)
	}
	k := dsl.New(s.VariantName(c.DType), dsl.WithTarget(c.Target))
	s.New(k, c.DType)
	m, err := k.Build()
	if err != nil {
		return nil, nil, err
	}
	return m, k.Params(), nil
}
