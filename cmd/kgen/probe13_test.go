package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestProbe13ManyArguments: thousands of short arguments where a command takes none or one
// give a one-line usage error of bounded size (exit 2). Before: kgen list k0 ... k2999
// quoted every argument (16953 bytes; probe 13).
func TestProbe13ManyArguments(t *testing.T) {
	many := make([]string, 3000)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	for _, cmd := range []string{"list", "ptx", "run", "help"} {
		code, out, errs := kgen(append([]string{cmd}, many...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || len(errs) > 4000 {
			t.Errorf("kgen %s k0 ... k2999: exit %d, stdout %.100q, stderr %d bytes: %.200q; want exit 2 and one short line", cmd, code, out, len(errs), errs)
		}
	}
}
