package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestGemmSM90LaunchMatchesCallers checks Launch against the wiring kernels/ref/gemm_sm90.go
// (RunGemmSM90) and bench/gpubench/gemm.go (sm90Launch, sm90Maps, sm90OutMap, benchGemmFP8)
// write by hand today, for every candidate of every input type, with clusters and the
// TMA-store epilogue.
func TestGemmSM90LaunchMatchesCallers(t *testing.T) {
	shapes := [][3]int{{257, 136, 304}, {1, 8, 16}, {8192, 4096, 4096}, {129, 264, 4112}}
	for _, io := range [][2]dsl.Type{{dsl.BF16, dsl.BF16}, {dsl.F16, dsl.F16}, {dsl.E4M3, dsl.BF16}, {dsl.BF16, dsl.F32}} {
		var cfgs []GemmSM90Config
		for _, c := range GemmSM90Candidates(io[0], io[1]) {
			c2 := c
			c2.ClusterM = 2
			c3 := c
			c3.TMAStore = !c.TMAStore
			cfgs = append(cfgs, c, c2, c3)
		}
		for _, cfg := range cfgs {
			if cfg.Check() != nil {
				continue
			}
			for _, s := range shapes {
				m, n, k := s[0], s[1], s[2]
				for _, sms := range []int{1, 16, 132} {
					l, err := cfg.Launch(m, n, k, sms)
					if err != nil {
						t.Fatalf("%s %dx%dx%d on %d SMs: %v", cfg.Name(), m, n, k, sms, err)
					}
					// bench/gpubench/gemm.go's sm90Launch
					if l.Grid != cfg.Grid(m, n, sms) || l.Block != cfg.Threads() || l.SharedBytes != cfg.SharedBytes() || l.Cluster != cfg.Cluster() {
						t.Errorf("%s: launch %+v; want grid %d, block %d, shared %d, cluster %d", cfg.Name(), l, cfg.Grid(m, n, sms), cfg.Threads(), cfg.SharedBytes(), cfg.Cluster())
					}
					// kernels/ref/gemm_sm90.go's tmap: dims (inner, outer), stride inner*size
					es := uint64(cfg.In.Bytes())
					wantA := TMASpec{Elem: cfg.In, Dims: [2]uint64{uint64(k), uint64(m)}, Strides: [1]uint64{uint64(k) * es},
						Box: [2]uint32{uint32(cfg.TMABoxA()[0]), uint32(cfg.TMABoxA()[1])}, Swizzle: 128}
					db := cfg.TMADimsB(n, k)
					wantB := TMASpec{Elem: cfg.In, Dims: [2]uint64{uint64(db[0]), uint64(db[1])}, Strides: [1]uint64{uint64(db[0]) * es},
						Box: [2]uint32{uint32(cfg.TMABoxB()[0]), uint32(cfg.TMABoxB()[1])}, Swizzle: 128}
					if l.A != wantA || l.B != wantB {
						t.Errorf("%s %dx%dx%d: A %+v B %+v; want %+v and %+v", cfg.Name(), m, n, k, l.A, l.B, wantA, wantB)
					}
					if cfg.FP8() && (l.B.Dims != [2]uint64{uint64(k), uint64(n)}) {
						t.Errorf("%s: fp8 B's map %v; want (K, N) of an N x K B", cfg.Name(), l.B.Dims)
					}
					if l.HasD != cfg.TMAStore {
						t.Errorf("%s: HasD %v, TMAStore %v", cfg.Name(), l.HasD, cfg.TMAStore)
					}
					if cfg.TMAStore {
						os := uint64(cfg.Out.Bytes())
						wantD := TMASpec{Elem: cfg.Out, Dims: [2]uint64{uint64(n), uint64(m)}, Strides: [1]uint64{uint64(n) * os},
							Box: [2]uint32{uint32(cfg.TMABoxD()[0]), uint32(cfg.TMABoxD()[1])}, Swizzle: 128}
						if l.D != wantD {
							t.Errorf("%s: D %+v; want %+v", cfg.Name(), l.D, wantD)
						}
					} else if l.D != (TMASpec{}) {
						t.Errorf("%s: D %+v without TMAStore; want none", cfg.Name(), l.D)
					}
				}
			}
		}
	}
}

// TestGemmSM90LaunchRefuses checks that Launch refuses what the kernel cannot run, naming the
// rule.
func TestGemmSM90LaunchRefuses(t *testing.T) {
	ok := DefaultGemmSM90Config(dsl.BF16)
	bad := ok
	bad.BN = 96
	fp8 := DefaultGemmSM90Config(dsl.E4M3)
	for _, tc := range []struct {
		cfg     GemmSM90Config
		m, n, k int
		sms     int
		want    string
	}{
		{bad, 128, 128, 128, 132, "BN 96"},
		{ok, 0, 128, 128, 132, "positive"},
		{ok, 128, 100, 128, 132, "multiples of 8"},
		{ok, 128, 128, 36, 132, "multiples of 8"},
		{fp8, 128, 128, 24, 132, "multiple of 16"},
		{ok, 128, 128, 128, 0, "multiprocessors"},
	} {
		_, err := tc.cfg.Launch(tc.m, tc.n, tc.k, tc.sms)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s Launch(%d, %d, %d, %d): %v; want an error containing %q", tc.cfg.Name(), tc.m, tc.n, tc.k, tc.sms, err, tc.want)
		}
	}
}
