package main

import (
	"strings"
	"testing"
)

// TestHostileFlags6: flag values that were silently taken, exited 1 for a usage error or
// said a word twice are usage errors (exit 2) naming the flag and the rule. Before:
// run --nodes 0 ran on one node (KGEN_EMU_NODES=0 was refused), --nodes -1 and launch
// --nodes 0 said "do not split into -1 nodes", devlib --list --signatures exited 1 naming
// Go fields (List, Signatures), an overflowing layout said "bad layout layout:" without
// the layout, and -shapes 8x8x8,llm called llm "not MxNxK".
func TestHostileFlags6(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"run", "axpy", "--nodes", "0"}, []string{"--nodes 0: want at least 1 node"}, ""},
		{[]string{"run", "hier_allreduce_sum", "--ranks", "4", "--nodes", "-1"}, []string{"--nodes -1: want at least 1 node"}, "split"},
		{[]string{"launch", "-n", "2", "--backend", "emu", "--nodes", "0", "--", "true"}, []string{"--nodes 0: want at least 1 node"}, "split"},
		{[]string{"devlib", "--list", "--signatures"}, []string{"--list or --signatures"}, "List ("},
		{[]string{"layout", "(2147483647,2147483647,2147483647):(1,1,1)"}, []string{`bad layout "(2147483647,2147483647,2147483647):(1,1,1)": `, "overflows"}, "layout layout"},
		{[]string{"tune", "gemm", "-shapes", "8x8x8,llm"}, []string{"llm stands alone"}, "not MxNxK"},
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
