package ops

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestStridedKernelsAssemble assembles the strided row kernels ops builds (they have no
// golden files) with ptxas, for every dtype, on sm_80 and sm_90, with the .maxntid ops
// gives them.
func TestStridedKernelsAssemble(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	dir := t.TempDir()
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.BF16} {
			for name, write := range map[string]func(*dsl.Kernel, dsl.Type){"softmax_strided": kernels.SoftmaxStrided, "row_sum_strided": kernels.RowSumStrided} {
				k := dsl.New(name, dsl.WithTarget(target))
				write(k, dt)
				k.LaunchBounds(1024, 0)
				m, err := k.Build()
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, name+"_"+dt.String()+"_"+string(target)+".ptx")
				var src bytes.Buffer
				if err := ptx.Print(&src, m); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, src.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(ptxas, "-arch="+string(target), f, "-o", f+".cubin").CombinedOutput(); err != nil {
					t.Errorf("ptxas rejects %s for %s: %v\n%s", name, target, err, out)
				}
			}
		}
	}
}
