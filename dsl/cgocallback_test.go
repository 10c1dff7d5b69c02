package dsl_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/internal/tooltest"
)

// TestFrameWalkThroughCgoCallback builds kernels inside a cgo callback whose C caller keeps
// a value in the frame-pointer register: finding the Go line must neither follow it (a fatal
// fault) nor report another line.
func TestFrameWalkThroughCgoCallback(t *testing.T) {
	tooltest.Require(t, func() (string, error) {
		p, err := exec.LookPath("gcc")
		if err != nil {
			return "", &toolchain.NotFoundError{Tool: "gcc", Hint: "a cgo test program needs a C compiler"}
		}
		return p, nil
	})
	src, err := os.ReadFile("testdata/cgocallback/main.go")
	if err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "// MISUSE") {
			line = i + 1
		}
	}
	cmd := exec.Command("go", "run", "./testdata/cgocallback")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := "dsl/testdata/cgocallback/main.go:" + strconv.Itoa(line) + ": "
	got := strings.TrimSpace(out.String())
	if n := strings.Count(got, want); n != 3 || !strings.Contains(got, "type mismatch") {
		t.Fatalf("want 3 type-mismatch errors at %s, got:\n%s", want, got)
	}
}
