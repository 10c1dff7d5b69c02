package layout

import (
	"strings"
	"testing"
)

// TestSwizzleRulesInMessage: a swizzle refused by a rule the message did not state (B <= 30,
// B+M+|S| <= 62) names that rule (before: Sw<30,30,30> was refused "need B >= 0, M >= 0,
// |S| >= B", which it meets); a composed layout without spaces around o says they are needed.
func TestSwizzleRulesInMessage(t *testing.T) {
	for s, want := range map[string]string{
		"Sw<30,30,30>": "B+M+|S| <= 62",
		"Sw<31,0,31>":  "B <= 30",
	} {
		if _, err := ParseSwizzle(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSwizzle(%q) = %v; want an error naming %q", s, err, want)
		}
	}
	if _, err := ParseComposed("Sw<3,0,3>o0o(8,8):(8,1)"); err == nil || !strings.Contains(err.Error(), "each o between spaces") {
		t.Errorf("ParseComposed without spaces = %v; want the spaces named", err)
	}
}
