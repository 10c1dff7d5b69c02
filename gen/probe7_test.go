package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

func probe7Kernel(name string) Kernel {
	return Kernel{Name: name, Build: func(k *dsl.Kernel) { k.PtrParam("a", dsl.F32) }}
}

// TestProbe7KernelNames: kernel names whose Go names clash with what the generated file
// declares (Load, Kernels, Close), with another kernel's declarations (x's XArgs and
// ptxXSM90), are no Go identifier or hold a $ (the go command refuses the PTX file's name) are refused naming the kernel (each was written and
// did not compile: "Load redeclared", "field and method with the same name Close").
func TestProbe7KernelNames(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"load"}, `kernel "load" would declare Load, which the generated file declares`},
		{[]string{"kernels"}, `kernel "kernels" would declare Kernels`},
		{[]string{"close"}, `kernel "close" would declare Close`},
		{[]string{"_1"}, `kernel "_1": its Go name "1" is not an exported Go identifier`},
		{[]string{"__"}, `kernel "__": its Go name "" is not an exported Go identifier`},
		{[]string{"$y"}, `kernel "$y": a generated package embeds $y.<target>.ptx, and the go command refuses a file name with $`},
		{[]string{"a$b"}, `go command refuses a file name with $`},
		{[]string{"x", "x_args"}, `kernels "x" and "x_args" would both declare XArgs`},
		{[]string{"x", "x_s_m90"}, `kernels "x" and "x_s_m90" would both declare ptxXSM90`},
		{[]string{"x_args", "x"}, `kernels "x_args" and "x" would both declare XArgs`},
	} {
		var ks []Kernel
		for _, n := range c.names {
			ks = append(ks, probe7Kernel(n))
		}
		_, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: ks})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kernels %q: %v; want an error containing %q", c.names, err, c.want)
		}
	}
}

// TestProbe7OddNamesBuild: odd but distinct kernel names (_ doubled and trailing, a name that
// camel-cases like a keyword, one named like an import) generate a package that builds.
func TestProbe7OddNamesBuild(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir, err := os.MkdirTemp(".", "_probe7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var ks []Kernel
	for _, n := range []string{"x", "y_", "a__b_c", "func", "jit", "ptx", "genrt", "close_all", "load2", "Kernels_x"} {
		ks = append(ks, probe7Kernel(n))
	}
	if err := Generate(Package{Name: "odd", Dir: dir, Targets: []ptx.Target{ptx.SM90}, Kernels: ks}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "vet", "./"+filepath.Base(dir))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the generated package does not build: %v\n%s", err, out)
	}
}
