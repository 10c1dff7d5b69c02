// Package golden pins the PTX of every library kernel: one file per kernel, element type and
// target under testdata/, compared byte for byte by the tests and assembled by ptxas.
// `go test ./golden -update` rewrites the files from the current code. The files leave out
// .loc lines and the .file table, so moving Go lines changes none of them.
package golden

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// Variant is one pinned kernel configuration.
type Variant struct {
	Spec   *kernels.Spec
	Config kernels.Config
}

// Path returns the variant's golden file, relative to this package's directory.
func (v Variant) Path() string {
	return filepath.Join("testdata", v.Spec.Name, fmt.Sprintf("%s.%s.ptx", v.Config.DType, v.Config.Target))
}

// Variants lists every pinned configuration of every library kernel.
func Variants() []Variant {
	var out []Variant
	for _, s := range kernels.All() {
		for _, dt := range s.DTypes {
			for _, t := range s.Golden {
				out = append(out, Variant{Spec: s, Config: kernels.Config{Target: t, DType: dt}})
			}
		}
	}
	return out
}

// Generate builds the variant and returns its PTX text without .loc lines (the module keeps
// its positions).
func (v Variant) Generate() ([]byte, *ptx.Module, error) {
	m, err := v.Spec.Build(v.Config)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	if err := ptx.PrintWith(&b, m, ptx.PrintOptions{NoLoc: true}); err != nil {
		return nil, nil, err
	}
	return b.Bytes(), m, nil
}
