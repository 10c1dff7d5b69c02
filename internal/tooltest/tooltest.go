// Package tooltest gives tests the external tools they need: a missing tool skips the test
// on a developer's machine and fails it in CI (CI=true), where every test must run.
package tooltest

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/kgen-dev/kgen/internal/toolchain"
)

// Require returns the path find reports, or ends the test when the tool is missing.
func Require(t testing.TB, find func() (string, error)) string {
	t.Helper()
	p, err := find()
	if err != nil {
		var nf *toolchain.NotFoundError
		if errors.As(err, &nf) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return p
}

// Ptxas returns the path of ptxas (see Require).
func Ptxas(t testing.TB) string {
	t.Helper()
	return Require(t, func() (string, error) { return toolchain.CUDATool("ptxas") })
}

// Go returns the path of the go command (`go test` puts its own first on PATH; see Require).
func Go(t testing.TB) string {
	t.Helper()
	return Require(t, func() (string, error) {
		p, err := exec.LookPath("go")
		if err != nil {
			return "", &toolchain.NotFoundError{Tool: "go", Searched: []string{"PATH"}, Hint: "install Go or put it on PATH"}
		}
		return p, nil
	})
}
