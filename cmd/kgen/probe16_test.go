package main

import (
	"strings"
	"testing"
)

// TestProbe16ShapeOutOfRange: kgen tune -shapes with an extent past int's range says it is too
// large (it read `"99999999999999999999" is not a positive extent`); probe 16.
func TestProbe16ShapeOutOfRange(t *testing.T) {
	for _, c := range []struct {
		shapes, want string
	}{
		{"99999999999999999999x8x8", `"99999999999999999999" is too large (an extent is at most 2^31-1)`},
		{"8x8x99999999999999999999999999", "is too large"},
		{"8x-99999999999999999999x8", `"-99999999999999999999" is not a positive extent`},
		{"8xx8", `"" is not a positive extent`},
	} {
		code, out, errs := kgen("tune", "gemm", "-shapes", c.shapes, "-backend", "emu")
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("kgen tune gemm -shapes %s: exit %d, stdout %.100q, stderr %.300q; want exit 2 and %q", c.shapes, code, out, errs, c.want)
		}
	}
}
