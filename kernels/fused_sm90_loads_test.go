package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// fusedSM90PTX builds family f for cfg and returns its PTX.
func fusedSM90PTX(t *testing.T, f Family, cfg GemmSM90Config) string {
	t.Helper()
	k := dsl.New(FusedSM90Name(f, cfg), dsl.WithTarget(ptx.SM90a))
	if err := fusedSM90Build(k, f, cfg); err != nil {
		t.Fatal(err)
	}
	m, err := k.Build()
	if err != nil {
		t.Fatalf("%s %s: %v", f, cfg.Name(), err)
	}
	return m.String()
}

// TestFusedSM90PeerLoadsPerTile: the fused sm_90a epilogues load peer addresses
// (ld.global.u64 from the peer tables) a fixed number of times per tile, not once per
// accumulator pair: the count is the same for 128- and 256-column tiles (32 and 64 pairs a
// thread).
func TestFusedSM90PeerLoadsPerTile(t *testing.T) {
	for _, f := range []Family{FamilyAGGemmSM90, FamilyGemmRSSM90, FamilyGemmARSM90, FamilyGemmARMCSM90} {
		var counts []int
		for _, bn := range []int{128, 256} {
			cfg := GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: bn, Consumers: 2, Stages: 3}
			s := fusedSM90PTX(t, f, cfg)
			n := strings.Count(s, "ld.global.u64")
			t.Logf("%s %s: %d ld.global.u64, %d lines", f, cfg.Name(), n, strings.Count(s, "\n"))
			counts = append(counts, n)
		}
		if counts[0] != counts[1] {
			t.Errorf("%s: %d ld.global.u64 at BN 128, %d at BN 256: a peer address is loaded per accumulator pair", f, counts[0], counts[1])
		}
	}
}
