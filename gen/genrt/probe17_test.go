package genrt

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe17PickTargetHugeArch: an architecture number past an int is newer than every
// target, not a wrapped one (sm_18446744073709551706 was taken for sm_90, and
// sm_18446744073709551696 for sm_80), and a long architecture is quoted bounded (probe 17).
func TestProbe17PickTargetHugeArch(t *testing.T) {
	have := []ptx.Target{ptx.SM80, ptx.SM90, ptx.Target("sm_120a")}
	for _, c := range []struct {
		arch string
		want ptx.Target
	}{
		{"sm_18446744073709551706", ptx.SM90},
		{"sm_18446744073709551696", ptx.SM90},
		{"sm_99999999999999999999999999", ptx.SM90},
		{"sm_90", ptx.SM90},
		{"sm_86", ptx.SM80},
	} {
		if got, err := PickTarget(c.arch, have); err != nil || got != c.want {
			t.Errorf("PickTarget(%s) = %s, %v; want %s", c.arch, got, err, c.want)
		}
	}
	_, err := PickTarget("sm_7"+strings.Repeat("0", 100000), []ptx.Target{ptx.SM80})
	if err != nil {
		t.Errorf("a 100000-digit architecture: %.200v", err)
	}
	_, err = PickTarget("sm_1"+strings.Repeat("x", 100000), []ptx.Target{ptx.SM80})
	if err == nil || !strings.Contains(err.Error(), "no PTX for a sm_1xxx") || len(err.Error()) > 400 {
		t.Errorf("a 100 KB architecture: %.300v; want a short error", err)
	}
}
