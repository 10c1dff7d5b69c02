package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbe8Gen: hostile `kgen gen` command lines. Refused with exit 2, one line naming the
// flag or operand, nothing written: a flag given twice (before: the last won silently, so
// `--pkg a ... --pkg b` wrote package b), --dtype that one of several kernels lacks (before:
// that kernel was left out silently), an empty --targets item, package names that are not Go
// identifiers (a combining accent, a space, a newline). Exit 1 naming the path: an output
// path that is a file or cannot be made (/proc). Accepted: a Unicode package name Go takes
// (π), written as π_kgen.go.
func TestProbe8Gen(t *testing.T) {
	o := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"gen", "-o", o, "axpy", "--pkg", "a", "--pkg", "b"}, []string{"-pkg given twice", `"a"`, `"b"`}},
		{[]string{"gen", "-o", o, "axpy", "--pkg=a", "--dtype", "f32", "-pkg", "a"}, []string{"-pkg given twice"}},
		{[]string{"gen", "-o", o, "--pkg", "v", "axpy", "-o", o + "2"}, []string{"-o given twice"}},
		{[]string{"gen", "-o", o, "--pkg", "v", "--targets", "sm_80", "axpy", "gemm", "--dtype", "f32"}, []string{`--dtype "f32"`, "gemm", "bf16, f16"}},
		{[]string{"gen", "-o", o, "--pkg", "v", "--targets", "sm_80,", "axpy"}, []string{"--targets", `""`}},
		{[]string{"gen", "-o", o, "axpy", "--pkg", "e\u0301"}, []string{"not a Go identifier"}},
		{[]string{"gen", "-o", o, "axpy", "--pkg", "a b"}, []string{`"a b"`, "not a Go identifier"}},
		{[]string{"gen", "-o", o, "axpy", "--pkg", "a\nb"}, []string{`"a\nb"`, "not a Go identifier"}},
		{[]string{"gen", "-o", o, "--pkg", "v", "--", "--dtype"}, []string{`"--dtype"`}},
	} {
		code, out, errs := kgen(c.args...)
		if _, err := os.Stat(o); err == nil {
			t.Errorf("%q: gen wrote %s", c.args, o)
			os.RemoveAll(o)
		}
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line", c.args, code, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%q: error %q does not mention %q", c.args, errs, w)
			}
		}
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, "/proc/kgen-probe8"} {
		code, _, errs := kgen("gen", "axpy", "--pkg", "v", "--dtype", "f32", "--targets", "sm_80", "-o", dir)
		if code != 1 || !strings.HasPrefix(errs, "kgen gen: ") || !strings.Contains(errs, dir) {
			t.Errorf("-o %s: exit %d, %q; want exit 1 naming the path", dir, code, errs)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("-o FILE changed the file: %q, %v", b, err)
	}

	d := filepath.Join(t.TempDir(), "pi")
	if code, _, errs := kgen("gen", "axpy", "--pkg", "π", "--dtype", "f32", "--targets", "sm_80", "-o", d); code != 0 {
		t.Fatalf("--pkg π: exit %d: %s", code, errs)
	}
	src, err := os.ReadFile(filepath.Join(d, "π_kgen.go"))
	if err != nil || !strings.Contains(string(src), "package π\n") {
		t.Errorf("--pkg π: π_kgen.go: %v, %.200q", err, src)
	}
}
