//go:build unix

package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe11HostileOutputs: Generate into a folder whose generated file's path holds a
// FIFO, a symbolic link (to a file, to /dev/zero, dangling), a folder or a device answers
// promptly with an error naming the path and what is there, writes none of the package's
// files and leaves the link's target alone; a regular file is replaced, and one already
// holding the output is left untouched. Before: a FIFO blocked Generate for ever (it read the
// old file to compare), a link to /dev/zero read without end, and a link to a file was
// written through, overwriting the file it pointed at.
func TestProbe11HostileOutputs(t *testing.T) {
	p := Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("x")}}
	gen := func(dir string) error {
		p.Dir = dir
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panic: %v", r)
				}
			}()
			done <- Generate(p)
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("Generate into %s: no answer in 30 s", dir)
			return nil
		}
	}
	precious := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(precious, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, what string
		make       func(path string) error
	}{
		{"FIFO", "a FIFO", func(path string) error { return syscall.Mkfifo(path, 0o644) }},
		{"link to a file", "a symbolic link", func(path string) error { return os.Symlink(precious, path) }},
		{"link to /dev/zero", "a symbolic link", func(path string) error { return os.Symlink("/dev/zero", path) }},
		{"dangling link", "a symbolic link", func(path string) error { return os.Symlink("/nonexistent/kgen-probe11", path) }},
		{"folder", "a folder", func(path string) error { return os.Mkdir(path, 0o755) }},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "p_kgen.go")
		if err := c.make(path); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err := gen(dir)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("%s at %s: %v; want an error naming the path and %q", c.name, path, err, c.what)
		}
		if _, err := os.Lstat(filepath.Join(dir, "x.sm_90.ptx")); err == nil {
			t.Errorf("%s at %s: Generate wrote x.sm_90.ptx before refusing", c.name, path)
		}
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "keep me" {
		t.Errorf("the file a link pointed at: %q, %v; want it untouched", b, err)
	}
	// A device among the PTX files: refused too.
	dir := t.TempDir()
	if err := os.Symlink("/dev/null", filepath.Join(dir, "x.sm_90.ptx")); err != nil {
		t.Fatal(err)
	}
	if err := gen(dir); err == nil || !strings.Contains(err.Error(), "x.sm_90.ptx is a symbolic link") {
		t.Errorf("a link to /dev/null at x.sm_90.ptx: %v; want it refused", err)
	}

	// Regular files: replaced when stale, left alone (not even rewritten) when current.
	dir = t.TempDir()
	path := filepath.Join(dir, "p_kgen.go")
	if err := os.WriteFile(path, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := gen(dir); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := gen(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.ModTime().Equal(old) || fi.Mode().Perm() != 0o644 {
		t.Errorf("regenerated unchanged output: %v, %v; want the file as written (0644), not rewritten", fi, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("the folder holds %d entries; want 2 (no temporary file left)", len(ents))
	}
}
