package gen

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestTensorMapLauncher: a tensor-map parameter becomes a jit.TensorMap field and a
// ParamInfo marked TensorMap in the generated launcher.
func TestTensorMapLauncher(t *testing.T) {
	p := Package{Name: "tmap", Generator: "go run gen.go", Targets: []ptx.Target{ptx.SM90},
		Kernels: []Kernel{{Name: "peek", Build: func(k *dsl.Kernel) {
			m := k.TensorMapParam("src", dsl.BF16)
			out := k.PtrParam("out", dsl.U64)
			k.Store(out.At(0), k.Load(k.PtrFrom(m.Addr(), dsl.U64, ptx.SpaceGeneric).At(0)))
		}}}}
	files, err := Files(p)
	if err != nil {
		t.Fatal(err)
	}
	src := string(files[len(files)-1].Data)
	for _, want := range []string{
		"Src jit.TensorMap   // src (tensor map over bf16)",
		`{Name: "src", Type: ptx.BF16, TensorMap: true},`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("missing %q in\n%s", want, src)
		}
	}
}
