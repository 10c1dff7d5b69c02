package excerpt

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	big := strings.Repeat("é", 5<<20)
	got := Quote(big)
	if len(got) > 200 || !strings.HasSuffix(got, "... (10485760 bytes)") || strings.Contains(got, `\x`) {
		t.Errorf("Quote(10 MB) = %s", got)
	}
	a := Around(strings.Repeat("a", 1000)+"X"+strings.Repeat("b", 1000), 1000)
	if len(a) > 200 || !strings.Contains(a, "X") || !strings.HasPrefix(a, `..."`) {
		t.Errorf("Around = %s", a)
	}
	if r := Rune("1０", 1); r != "'０'" {
		t.Errorf("Rune = %s", r)
	}
	if r := Rune("\xff", 0); r != `'\xff'` {
		t.Errorf("Rune(invalid) = %s", r)
	}
}

func TestCut(t *testing.T) {
	if got := Cut("short", 10); got != "short" {
		t.Errorf("Cut(short) = %q", got)
	}
	if got := Cut("héllo world", 2); got != "h... (12 bytes)" {
		t.Errorf("Cut at a rune boundary = %q", got)
	}
}
