// Package kernels is kgen's library of kernels written in the DSL: element-wise, copy,
// transpose and row kernels, and collectives. Each kernel is a Spec in the registry, found by
// its typed identity (Find, an ID of family, reduction op and element type) or, for the CLI,
// by name (Lookup); Spec.Build makes the PTX module of one configuration (target and element
// type). Each family declares its parameters once as a struct read by dsl.Params (VectorAddArgs,
// ...); package kernels/launch holds their host twins for struct launches.
package kernels

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Config selects one variant of a kernel.
type Config struct {
	Target ptx.Target
	DType  dsl.Type
}

// Family names a kernel family: the kernels of one algorithm, one per reduction op when it
// takes one, each built for several element types.
type Family string

// The single-GPU families.
const (
	FamilyVectorAdd Family = "vector_add"
	FamilyAxpy      Family = "axpy"
	FamilyTiledCopy Family = "tiled_copy"
	FamilyTranspose Family = "transpose"
	FamilyRowSum    Family = "row_sum"
	FamilySoftmax   Family = "softmax"
)

// ID is a library kernel variant's typed identity. Op matters only for families that take a
// reduction op (leave it zero for the others).
type ID struct {
	Family Family
	Op     dsl.ReduceOp
	DType  dsl.Type
}

func (id ID) String() string {
	if s := findSpec(id); s != nil && s.Reduces {
		return fmt.Sprintf("%s %s %s", id.Family, id.Op, id.DType)
	}
	return fmt.Sprintf("%s %s", id.Family, id.DType)
}

// Spec describes a library kernel.
type Spec struct {
	Name string
	// Family is the kernel's family (default: Name); with Op when Reduces, it identifies the
	// kernel (ID).
	Family  Family
	Op      dsl.ReduceOp
	Reduces bool         // the family has one kernel per reduction op
	Doc     string       // one line
	DTypes  []dsl.Type   // the element types it is built for
	Targets []ptx.Target // the targets it supports
	// Golden lists the targets whose PTX is pinned in golden/ (a subset of Targets).
	Golden []ptx.Target
	// MaxThreads, when set, is the largest block the kernel is launched with (.maxntid): ptxas
	// then keeps its registers within what that many threads per block allow.
	MaxThreads int
	// MaxGPUs, when set, is the most GPUs a collective kernel is built for, below its
	// family's limit (CollMaxGPUs in one node): its peer loads and reductions unroll over
	// that many sources, and a launch on more GPUs computes wrong results.
	MaxGPUs int
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
	if s.Family == "" {
		s.Family = Family(s.Name)
	}
	for _, o := range registry {
		if o.Family == s.Family && (!s.Reduces || o.Op == s.Op) {
			panic("kernels: " + s.Name + " and " + o.Name + " have the same identity") // a programming error in this package
		}
	}
	registry[s.Name] = s
}

// findSpec returns the kernel of id's family and op, or nil.
func findSpec(id ID) *Spec {
	for _, s := range registry {
		if s.Family == id.Family && (!s.Reduces || s.Op == id.Op) {
			return s
		}
	}
	return nil
}

// Find returns the kernel identified by id and checks that it is built for id.DType; the
// errors list what is valid.
func Find(id ID) (*Spec, error) {
	s := findSpec(id)
	if s == nil {
		var fams []string
		seen := map[Family]bool{}
		for _, o := range All() {
			if !seen[o.Family] {
				seen[o.Family] = true
				fams = append(fams, string(o.Family))
			}
		}
		return nil, fmt.Errorf("no kernel %s (families: %s)", id, strings.Join(fams, ", "))
	}
	if !s.Reduces && id.Op != 0 {
		return nil, fmt.Errorf("kernel family %s takes no reduction op (got %s)", id.Family, id.Op)
	}
	if !slices.Contains(s.DTypes, id.DType) {
		return nil, fmt.Errorf("kernel %s has no dtype %q (valid: %s)", s.Name, id.DType, s.dtypeNames())
	}
	return s, nil
}

// ID returns the identity of the spec's variant for dt (the zero ID's family and op for a
// nil Spec).
func (s *Spec) ID(dt dsl.Type) ID {
	if s == nil {
		return ID{DType: dt}
	}
	return ID{Family: s.Family, Op: s.Op, DType: dt}
}

// errNilSpec is the error of a nil *Spec's methods (a Spec comes from Lookup, Find or All).
var errNilSpec = errors.New("kernels: a nil *Spec (get one from Lookup, Find or All)")

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
	return nil, fmt.Errorf("unknown kernel %s (valid: %s)", excerpt.Quote(name), strings.Join(Names(), ", "))
}

// ParseDType finds one of the kernel's element types by name; the error lists the valid ones.
func (s *Spec) ParseDType(name string) (dsl.Type, error) {
	if s == nil {
		return 0, errNilSpec
	}
	for _, t := range s.DTypes {
		if t.String() == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("kernel %s has no dtype %s (valid: %s)", s.Name, excerpt.Quote(name), s.dtypeNames())
}

func (s *Spec) dtypeNames() string {
	var n []string
	for _, t := range s.DTypes {
		n = append(n, t.String())
	}
	return strings.Join(n, ", ")
}

// VariantName is the PTX entry name of one variant: "vector_add_f32" ("" for a nil Spec).
func (s *Spec) VariantName(dt dsl.Type) string {
	if s == nil {
		return ""
	}
	return s.Name + "_" + dt.String()
}

// Built is one built variant: its module, its entry's name, and the parameters its builder
// declared (jit.Source.Params wants them, converted by jit.ParamInfos).
type Built struct {
	Module *ptx.Module
	Entry  string
	Params []dsl.ParamInfo
}

// BuildVariant makes the verified PTX module of one variant, with its declared parameters.
func (s *Spec) BuildVariant(c Config) (*Built, error) {
	k, err := s.kernel(c)
	if err != nil {
		return nil, err
	}
	m, err := s.build(k)
	if err != nil {
		return nil, err
	}
	return &Built{Module: m, Entry: k.Name(), Params: k.Params()}, nil
}

// Build makes the verified PTX module of one variant.
func (s *Spec) Build(c Config) (*ptx.Module, error) {
	k, err := s.kernel(c)
	if err != nil {
		return nil, err
	}
	return s.build(k)
}

// build builds k, declaring .maxntid MaxThreads on its entry when set.
func (s *Spec) build(k *dsl.Kernel) (*ptx.Module, error) {
	m, err := k.Build()
	if err != nil || s.MaxThreads == 0 {
		return m, err
	}
	for _, f := range m.Funcs {
		if f.Name == k.Name() {
			f.MaxNTID = [3]int{s.MaxThreads, 1, 1}
		}
	}
	return m, nil
}

// kernel writes one variant into a new kernel.
func (s *Spec) kernel(c Config) (*dsl.Kernel, error) {
	if s == nil {
		return nil, errNilSpec
	}
	ok := false
	for _, t := range s.DTypes {
		ok = ok || t == c.DType
	}
	if !ok {
		return nil, fmt.Errorf("kernel %s has no dtype %q (valid: %s)", s.Name, c.DType, s.dtypeNames())
	}
	ok = false
	for _, t := range s.Targets {
		ok = ok || t == c.Target
	}
	if !ok {
		return nil, fmt.Errorf("kernel %s does not support target %s", s.Name, excerpt.Quote(string(c.Target)))
	}
	k := dsl.New(s.VariantName(c.DType), dsl.WithTarget(c.Target))
	s.New(k, c.DType)
	return k, nil
}
