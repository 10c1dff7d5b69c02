package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// LaunchBounds puts .maxntid and .minnctapersm on the entry.
func TestLaunchBounds(t *testing.T) {
	k := dsl.New("k")
	k.LaunchBounds(256, 3)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := m.String()
	for _, want := range []string{".maxntid 256, 1, 1", ".minnctapersm 3"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
}

func TestLaunchBoundsMisuse(t *testing.T) {
	checkMisuses(t, "dsl/bounds_test.go", []misuse{
		{"no threads", "LaunchBounds(0, 1): want 1..1024 threads", func(k *dsl.Kernel) int {
			return at(func() { k.LaunchBounds(0, 1) })
		}},
		{"too many threads", "LaunchBounds(2048, 0)", func(k *dsl.Kernel) int {
			return at(func() { k.LaunchBounds(2048, 0) })
		}},
		{"negative blocks", "LaunchBounds(128, -1)", func(k *dsl.Kernel) int {
			return at(func() { k.LaunchBounds(128, -1) })
		}},
	})
}
