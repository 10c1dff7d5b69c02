package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

// kgen check FILE.ptx (and -) runs kgen's PTX rules and ptxas over a user's module and prints
// registers, shared memory and spills per entry; problems name the file and the line.
func TestCheckFile(t *testing.T) {
	tooltest.Ptxas(t)
	_, src, _ := kgen("ptx", "vector_add", "--target", "sm_90", "--dtype", "f32")
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.ptx")
	os.WriteFile(good, []byte(src), 0o644)
	code, out, errs := kgen("check", good)
	if code != 0 || !strings.Contains(out, "vector_add_f32") || !strings.Contains(out, "REGISTERS") || !strings.Contains(out, "1 file(s), 0 failed") {
		t.Fatalf("check %s: exit %d: %s %s", good, code, out, errs)
	}
	// Standard input.
	stdin = strings.NewReader(src)
	defer func() { stdin = os.Stdin }()
	if code, out, errs := kgen("check", "-"); code != 0 || !strings.Contains(out, "<stdin>") || !strings.Contains(out, "vector_add_f32") {
		t.Errorf("check -: exit %d: %s %s", code, out, errs)
	}
	// A rule kgen checks (ptx.Verify), named at its line.
	lines := strings.Split(src, "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "add.u64 ") {
			at = i
			lines[i] = strings.Replace(l, "add.u64", "add.sat.u64", 1)
			break
		}
	}
	if at < 0 {
		t.Fatal("no add.u64 in vector_add's PTX")
	}
	bad := filepath.Join(dir, "bad.ptx")
	os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644)
	code, _, errs = kgen("check", bad)
	if want := fmt.Sprintf("%s:%d: ", bad, at+1); code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, ".sat") {
		t.Errorf("check of a .sat.u64: exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
	// A parse error, named at its line, read from standard input.
	stdin = strings.NewReader(".version 8.4\n.target sm_90\n.address_size 64\n\nbogus;\n")
	if code, _, errs := kgen("check", "-"); code != 1 || !strings.Contains(errs, "<stdin>:5: ") {
		t.Errorf("check - of a bad line: exit %d, stderr %q", code, errs)
	}
	// ptxas's own errors name the file as given.
	stdin = strings.NewReader(strings.Replace(src, ".target sm_90", ".target sm_80", 1))
	if code, out, errs := kgen("check", "-"); code != 0 && !strings.Contains(out+errs, "<stdin>") {
		t.Errorf("check - for sm_80: exit %d: %s %s", code, out, errs)
	}
	// Usage errors: a missing file, files mixed with kernels or filters.
	for _, args := range [][]string{
		{"check", filepath.Join(dir, "nope.ptx")},
		{"check", good, "vector_add"},
		{"check", good, "--target", "sm_90"},
		{"check", dir + "/"},
	} {
		if code, _, errs := kgen(args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line usage error", args, code, errs)
		}
	}
}
