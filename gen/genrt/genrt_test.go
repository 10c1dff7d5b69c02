package genrt

import (
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

func TestPickTarget(t *testing.T) {
	have := []ptx.Target{ptx.SM80, ptx.SM90, ptx.SM90a, ptx.SM100a}
	for arch, want := range map[string]ptx.Target{
		"sm_80": ptx.SM80, "sm_86": ptx.SM80, "sm_89": ptx.SM80, "sm_90": ptx.SM90,
		"sm_90a": ptx.SM90a, "sm_100": ptx.SM90, "sm_100a": ptx.SM100a, "sm_120": ptx.SM90,
	} {
		got, err := PickTarget(arch, have)
		if err != nil || got != want {
			t.Errorf("PickTarget(%s) = %s, %v; want %s", arch, got, err, want)
		}
	}
	if _, err := PickTarget("sm_75", have); err == nil {
		t.Error("sm_75 got a target")
	}
}
