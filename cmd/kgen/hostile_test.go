package main

import (
	"strings"
	"testing"
)

// TestHostileRunAndLayoutFlags: flag values whose products overflow are usage errors (exit
// 2) naming the flags (before: --rows 4 --cols 2^62 overflowed the size check, reached the
// harness and panicked with --exact; --cols 2^62 exited 1 from the kernel chooser), and a
// composed layout's error says "layout" once and every swizzle rule.
func TestHostileRunAndLayoutFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"run", "softmax", "--rows", "4", "--cols", "4611686018427387904", "--exact"}, []string{"--cols 4611686018427387904", "256 MiB"}, "panic"},
		{[]string{"run", "row_sum", "--rows", "2", "--cols", "4611686018427387904"}, []string{"--cols 4611686018427387904", "256 MiB"}, "negative"},
		{[]string{"run", "softmax", "--cols", "4611686018427387904"}, []string{"--cols 4611686018427387904", "256 MiB"}, "ChooseRowKernel"},
		{[]string{"run", "softmax", "--size", "64", "--cols", "4611686018427387904"}, []string{"--cols 4611686018427387904", "256 MiB"}, "(0 bytes each)"},
		{[]string{"layout", "Sw<30,30,30> o 0 o (8,8):(8,1)"}, []string{"invalid swizzle Sw<30,30,30>", "B+M+|S| <= 62"}, "layout layout"},
		{[]string{"layout", "Sw<3,0,3>o0o(8,8):(8,1)"}, []string{"each o between spaces"}, ""},
	} {
		code, _, stderr := kgen(c.args...)
		ok := code == 2 && (c.not == "" || !strings.Contains(stderr, c.not))
		for _, w := range c.want {
			ok = ok && strings.Contains(stderr, w)
		}
		if !ok {
			t.Errorf("kgen %s: exit %d, %q; want exit 2 and an error containing %q (not %q)", strings.Join(c.args, " "), code, stderr, c.want, c.not)
		}
	}
}
