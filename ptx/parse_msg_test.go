package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// Parse errors quote a bounded excerpt of the line (a 10 MB line gives a short error) and
// say when an immediate is out of range rather than passing on strconv's whole-input text.
func TestParseErrorsBounded(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	body := func(s string) string { return hdr + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n" + s + "\n}\n" }
	for _, c := range []struct{ src, want string }{
		{hdr + huge + "\n", "(10485760 bytes) at module scope"},
		{body("mov.b32 %r0, " + huge + "!;"), "bad operand"},
		{body("mov.b32 %r0, 0x" + strings.Repeat("f", 1<<20) + ";"), "out of range"},
		{body("mov.b32 %r0, 1" + strings.Repeat("9", 30) + ";"), `immediate "1999999999999999999999999999999" out of range`},
		{body(huge + ";"), "unknown instruction"},
		{hdr + ".global .b32 " + huge + "[" + huge + "];\n", "bytes"},
	} {
		_, err := ptx.Parse(c.src)
		if err == nil {
			t.Errorf("%.40q...: accepted", c.src)
			continue
		}
		if msg := err.Error(); len(msg) > 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%.40q...: a %d-byte error %.300s, want < 400 bytes holding %q", c.src, len(msg), msg, c.want)
		}
	}
}

// TestParseStatementsOnOneLine checks that two instructions on one line (legal PTX, not
// the subset Parse reads) are refused as such; the error named an undeclared register
// "%f2; mov.b32 %r4".
func TestParseStatementsOnOneLine(t *testing.T) {
	src := ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n\t.reg .f32 %f<4>;\n\t.reg .b32 %r<2>;\n\tadd.f32 %f3, %f1, %f2; mov.b32 %r1, %f3;\n\tret;\n}\n"
	_, err := ptx.Parse(src)
	if err == nil || !strings.Contains(err.Error(), "2 statements on one line") || !strings.Contains(err.Error(), "line 9") {
		t.Fatalf("Parse: %v; want an error naming line 9's 2 statements", err)
	}
}
