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

// halfArgs is the test kernel's declaration: an f16 input, an f32 output, a length.
type halfArgs struct {
	X   dsl.Ptr
	Out dsl.Ptr   `kgen:"f32"`
	N   dsl.Value `kgen:"u32"`
}

// TestGeneratedLaunchersAreTyped generates a package into a directory of this module and
// builds two programs against it with the go command: one passing a *jit.Buffer[fp.F16] to
// the f16 pointer field (it must build) and one passing a *jit.Buffer[float32] (it must not,
// and the compiler must say why).
func TestGeneratedLaunchersAreTyped(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the go command is not on PATH")
		}
		t.Skip("the go command is not on PATH")
	}
	// Inside the module (so that its imports resolve offline); "_" keeps it out of ./...
	dir, err := os.MkdirTemp(".", "_compiletest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	err = Generate(Package{
		Name: "main", Dir: dir, Targets: []ptx.Target{ptx.SM90},
		Kernels: []Kernel{{Name: "widen", Build: func(k *dsl.Kernel) {
			a := dsl.Params[halfArgs](k, dsl.F16)
			i := k.GlobalThreadIdx(dsl.X)
			k.If(i.Lt(a.N), func() { k.Store(a.Out.At(i), k.Load(a.X.At(i)).To(dsl.F32)) })
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	program := func(elem string) string {
		return `package main

import (
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

var _ fp.F16

func main() {
	d, err := jit.Open(0)
	if err != nil {
		panic(err)
	}
	k, err := Load(d)
	if err != nil {
		panic(err)
	}
	x, _ := jit.Alloc[` + elem + `](d, 4)
	out, _ := jit.Alloc[float32](d, 4)
	if err := k.Widen.Launch(jit.LaunchConfig{}, WidenArgs{X: x, Out: out, N: 4}); err != nil {
		panic(err)
	}
}
`
	}
	build := func(elem string) (string, error) {
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program(elem)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(gobin, "build", "-o", os.DevNull, "./"+filepath.Base(dir))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build("fp.F16"); err != nil {
		t.Fatalf("the correct program does not build: %v\n%s", err, out)
	}
	out, err := build("float32")
	if err == nil {
		t.Fatal("a *jit.Buffer[float32] passed to an f16 pointer field compiled")
	}
	for _, want := range []string{"main.go:21:", "cannot use x (variable of type *jit.Buffer[float32])", "does not implement jit.Ptr[", `fp".F16]`} {
		if !strings.Contains(out, want) {
			t.Errorf("the compiler's error lacks %q:\n%s", want, out)
		}
	}
}
