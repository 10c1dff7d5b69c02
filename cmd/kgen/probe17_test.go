package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbe17GenFolderNotAPattern: kgen gen reads the -o folder's Go files by listing it, not
// by a glob of its name. Before: a folder named a[b] (a pattern matching the folder ab) or
// a[ (a bad pattern: no files) hid a file of another package there, so kgen gen wrote a
// package that did not compile ("found packages other and vadd"), and a file of another
// package in ab refused a[b]; --pkg main into c[m] holding a command was refused (probe 17).
func TestProbe17GenFolderNotAPattern(t *testing.T) {
	base := t.TempDir()
	write := func(dir, file, src string) string {
		d := filepath.Join(base, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if file != "" {
			if err := os.WriteFile(filepath.Join(d, file), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	write("xy", "other.go", "package other\n")
	for _, c := range []struct {
		dir, file, src, pkg string
		code                int
		want                string
	}{
		{"a[b]", "other.go", "package other\n", "vadd", 2, "other.go is package other"},
		{"a[", "other.go", "package other\n", "vadd", 2, "other.go is package other"},
		{"x[y]", "", "", "vadd", 0, "wrote 1 kernels"},
		{"c[m]", "main.go", "package main\n\nfunc main() {}\n", "main", 0, "wrote 1 kernels"},
	} {
		d := write(c.dir, c.file, c.src)
		code, _, errs := kgen("gen", "vector_add", "--pkg", c.pkg, "-o", d, "--dtype", "f32", "--targets", "sm_90")
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("-o %s (holding %q) --pkg %s: exit %d: %s; want exit %d and %q", c.dir, c.file, c.pkg, code, errs, c.code, c.want)
		}
	}
}
