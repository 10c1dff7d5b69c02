package main

import (
	"strings"
	"testing"
)

// TestProbe18LayoutComposedErrors: a composed layout refused after parsing (an invalid
// swizzle) quotes the input and separates the reason as every other refusal does (it read
// "bad composed layout invalid swizzle Sw<30,30,30> (...)"); probe 18.
func TestProbe18LayoutComposedErrors(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"Sw<30,30,30> o 0 o (8,8):(8,1)", `bad composed layout "Sw<30,30,30> o 0 o (8,8):(8,1)": invalid swizzle Sw<30,30,30> (need`},
		{"Sw<-1,0,1> o 0 o (8,8):(8,1)", `bad composed layout "Sw<-1,0,1> o 0 o (8,8):(8,1)": invalid swizzle`},
		{"Sw<3,0,3> o x o (8,8):(8,1)", `bad composed layout "Sw<3,0,3> o x o (8,8):(8,1)": the offset "x" is not an integer`},
		{"Sw<3,0,3> o 0 o (8,8):(8,1" + strings.Repeat(" ", 1000), `bad composed layout "(8,8):(8,1" at 10: missing )`},
		{"Sw<31,0,31> o 0 o " + strings.Repeat("(1,", 300) + "1" + strings.Repeat(")", 300) + ":1", `bad composed layout "Sw<31,0,31> o 0 o (1,(1,`},
	} {
		code, _, errs := kgen("layout", c.in)
		if code != 2 || !strings.Contains(errs, c.want) || len(errs) > 600 {
			t.Errorf("kgen layout %q: exit %d: %s; want exit 2 and %q (bounded)", c.in, code, errs, c.want)
		}
	}
}
