package layout

import (
	"strings"
	"testing"
)

// Parse errors quote a bounded excerpt of the input, call an integer too large out of range
// (not "bad"), and show a non-ASCII character as itself, not its first UTF-8 byte.
func TestParseErrorMessages(t *testing.T) {
	big := "(" + strings.Repeat("4,", 5<<20) + "x)"
	for _, c := range []struct {
		in   string
		want []string
		max  int
	}{
		{big, []string{"unexpected 'x'", "(10485763 bytes)"}, 300},
		{"(9223372036854775807,2)", []string{`integer "9223372036854775807" out of range`}, 300},
		{"(99999999999999999999999,2)", []string{`integer "99999999999999999999999" out of range`}, 300},
		{"(4,\uff18)", []string{"unexpected '８'"}, 300},
		{"(4,2):" + strings.Repeat(" ", 1<<20) + "(1,4)x", []string{"unexpected \"x\""}, 300},
		{"(-,2)", []string{"'-' without digits"}, 300},
	} {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%.20q...) accepted", c.in)
			continue
		}
		msg := err.Error()
		if len(msg) > c.max {
			t.Errorf("Parse(%.20q...): a %d-byte error", c.in, len(msg))
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Parse(%.20q...) = %.300s, want it to hold %s", c.in, msg, w)
			}
		}
	}
	for _, in := range []string{"Sw<" + strings.Repeat("1", 1<<20) + ",0,3>", strings.Repeat("Sw<1,2,3> o ", 1<<16)} {
		_, err1 := ParseSwizzle(in)
		_, err2 := ParseComposed(in)
		for _, err := range []error{err1, err2} {
			if err == nil || len(err.Error()) > 300 {
				t.Errorf("swizzle/composed parse of a %d-byte input: %d-byte error", len(in), len(errString(err)))
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
