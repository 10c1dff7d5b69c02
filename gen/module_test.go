package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

// TestGenerateFromAnotherModule does what the README tells a user to do in a module of their
// own: examples/vadd's generator and main program are copied into a fresh module that
// requires kgen (a replace to this checkout); `go mod tidy` must record what the generator
// needs (github.com/dave/jennifer, through kgen/gen), `go generate` must write the launcher
// and the PTX, and the program must build and run on the emulator. The generated Go file
// must be the one committed in examples/vadd, and the PTX the same but for the .file path.
func TestGenerateFromAnotherModule(t *testing.T) {
	goTool := tooltest.Go(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ex := filepath.Join(root, "examples", "vadd")
	dir := t.TempDir()
	for _, f := range []string{"gen.go", "main.go"} {
		copyFile(t, filepath.Join(ex, f), filepath.Join(dir, f))
	}
	gomod := "module example.com/vadd\n\ngo 1.24\n\nrequire github.com/kgen-dev/kgen v0.0.0\n\nreplace github.com/kgen-dev/kgen => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// kgen's own checksums: tidy then needs the module proxy at most, not the checksum database.
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))

	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	if sum, _ := os.ReadFile(filepath.Join(dir, "go.sum")); !strings.Contains(string(sum), "github.com/dave/jennifer ") {
		t.Fatalf("go mod tidy left the generator's dependency out of go.sum (is gen.go tagged ignore?):\n%s", sum)
	}
	gocmd("generate", "./...")
	for _, f := range []string{"main_kgen.go", "saxpy.sm_80.ptx", "saxpy.sm_90.ptx"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("go generate wrote no %s: %v", f, err)
		}
		want, err := os.ReadFile(filepath.Join(ex, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".ptx") { // positions are relative to each module's root
			got = fileRE.ReplaceAll(got, []byte(`.file $1 "gen.go"`))
			want = fileRE.ReplaceAll(want, []byte(`.file $1 "gen.go"`))
		}
		if string(got) != string(want) {
			t.Errorf("%s generated in another module differs from examples/vadd/%s", f, f)
		}
	}
	bin := filepath.Join(dir, "vadd")
	gocmd("build", "-o", bin, ".")
	if out, err := exec.Command(bin, "-n", "1000").CombinedOutput(); err != nil {
		t.Fatalf("the generated program failed: %v\n%s", err, out)
	}
}

var fileRE = regexp.MustCompile(`(?m)^\.file (\d+) "[^"]*gen\.go"`)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
