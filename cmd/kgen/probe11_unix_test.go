//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbe11GenHostileFolder: `kgen gen --pkg main` looks in its output folder for a Go file
// of package main; a FIFO or a link to /dev/zero named *.go there is skipped (it is no
// command's source), promptly, and a real main.go beside them is found. A FIFO at the
// generated file's own path is exit 1 naming it. Before: the FIFO blocked kgen gen for
// ever (the package clause was parsed from the whole file), and /dev/zero was read
// without end.
func TestProbe11GenHostileFolder(t *testing.T) {
	gen := func(args ...string) (int, string) {
		type res struct {
			code int
			errs string
		}
		done := make(chan res, 1)
		go func() {
			code, _, errs := kgen(args...)
			done <- res{code, errs}
		}()
		select {
		case r := <-done:
			return r.code, r.errs
		case <-time.After(60 * time.Second):
			t.Fatalf("%q: no answer in 60 s", args)
			return 0, ""
		}
	}
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "a.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "b.go")); err != nil {
		t.Fatal(err)
	}
	args := []string{"gen", "axpy", "--pkg", "main", "--dtype", "f32", "--targets", "sm_80", "-o", dir}
	if code, errs := gen(args...); code != 2 || !strings.Contains(errs, "holds no Go file of package main") {
		t.Errorf("a folder of a FIFO and a link to /dev/zero: exit %d, %q; want exit 2, no command there", code, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("// A command.\npackage main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, errs := gen(args...); code != 0 {
		t.Errorf("with main.go beside them: exit %d, %q; want 0", code, errs)
	}

	dir = t.TempDir()
	out := filepath.Join(dir, "v_kgen.go")
	if err := syscall.Mkfifo(out, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, errs := gen("gen", "axpy", "--pkg", "v", "--dtype", "f32", "--targets", "sm_80", "-o", dir); code != 1 || !strings.Contains(errs, out+" is a FIFO") {
		t.Errorf("a FIFO at %s: exit %d, %q; want exit 1 naming it", out, code, errs)
	}
}
