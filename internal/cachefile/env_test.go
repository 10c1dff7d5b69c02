package cachefile

import (
	"strings"
	"testing"
)

// TestEnv: $KGEN_CACHE's off switches in any case and with spaces, its on forms, and a typo
// refused with the caller's prefix.
func TestEnv(t *testing.T) {
	for _, c := range []struct {
		v        string
		disabled bool
		bad      bool
	}{
		{"", false, false}, {"off", true, false}, {" OFF ", true, false}, {"0", true, false},
		{"No", true, false}, {"on", false, false}, {"1", false, false}, {"yes", false, false},
		{"of", false, true}, {"disable", false, true},
	} {
		t.Setenv("KGEN_CACHE", c.v)
		if got := Disabled(); got != c.disabled {
			t.Errorf("KGEN_CACHE=%q: Disabled() = %v", c.v, got)
		}
		err := EnvErr("pkg", "no cache")
		if (err != nil) != c.bad || err != nil && !strings.HasPrefix(err.Error(), "pkg: KGEN_CACHE=") {
			t.Errorf("KGEN_CACHE=%q: EnvErr = %v", c.v, err)
		}
	}
}
