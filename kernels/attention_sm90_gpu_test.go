//go:build cuda

package kernels_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// TestGPUAttentionSM90 runs the sm_90a attention on GPU 0 (an sm_90 part; skipped
// elsewhere, failed with KGEN_REQUIRE_GPU=1 when there is no GPU) at real shapes, every
// FlashAttention-3 overlap combination at head dim 128 and the library's configuration at
// 64 and 256, causal and not, with GQA and lengths off the tiles, against the float64
// reference element by element (the harness of TestAttentionSM90), and the VarLen kernel
// over packed sequences (TestAttentionSM90VarLen's harness); Persistent cases on the device's
// SM count and on 7 blocks, also with AttentionLPT and AttentionDynamic; three consumer
// warpgroups at d 64.
func TestGPUAttentionSM90(t *testing.T) {
	d, err := jit.OpenBackend(jit.GPU, 0)
	if err != nil {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" || (!strings.Contains(err.Error(), "no CUDA driver") && !strings.Contains(err.Error(), "cuInit failed") && !strings.Contains(err.Error(), "no GPU")) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer d.Close()
	if d.Info().SM != 90 {
		t.Skipf("%s is %s; the kernel needs sm_90a", d.Info().Name, d.Info().Arch)
	}
	bf, f16 := dsl.BF16, dsl.F16
	var cases []sm90Problem
	for _, o := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, causal := range []bool{false, true} {
			cases = append(cases, sm90Problem{cfg: sm90Cfg(bf, 128, causal, o[0], o[1]), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024})
		}
	}
	cases = append(cases,
		sm90Problem{cfg: sm90Cfg(bf, 64, false, true, true), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024},
		sm90Problem{cfg: sm90Cfg(bf, 64, true, true, true), b: 2, h: 16, hk: 4, sq: 1000, sk: 1100},
		sm90Problem{cfg: sm90Cfg(bf, 256, false, true, true), b: 1, h: 8, hk: 8, sq: 1024, sk: 1024},
		sm90Problem{cfg: sm90Cfg(bf, 256, true, true, true), b: 1, h: 8, hk: 2, sq: 1024, sk: 1024},
		sm90Problem{cfg: sm90Cfg(f16, 128, true, true, true), b: 3, h: 4, hk: 1, sq: 777, sk: 333},
		sm90Problem{cfg: sm90Cfg(bf, 128, false, true, true), b: 4, h: 2, hk: 2, sq: 1, sk: 4097},
	)
	// Persistent on the device's SMs (and on 7, so that blocks walk many tiles).
	sms := d.Info().Multiproc
	cases = append(cases,
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 128, false, true, false)), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024, sms: sms},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 128, true, true, false)), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024, sms: sms},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 128, true, true, true)), b: 2, h: 16, hk: 4, sq: 1000, sk: 1100, sms: 7},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, true, false, true)), b: 2, h: 16, hk: 4, sq: 1000, sk: 1100, sms: sms},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 256, true, true, false)), b: 1, h: 8, hk: 2, sq: 1024, sk: 1024, sms: sms},
		sm90Problem{cfg: sm90Persist(sm90Cfg(f16, 128, true, true, false)), b: 3, h: 4, hk: 1, sq: 777, sk: 333, sms: 7},
	)
	// The balanced schedules: AttentionLPT (Persistent and as the grid's order) and
	// AttentionDynamic (a tile counter of its own per case), causal.
	for _, s := range []kernels.AttentionSchedule{kernels.AttentionLPT, kernels.AttentionDynamic} {
		cases = append(cases,
			sm90Problem{cfg: sm90WithSched(sm90Persist(sm90Cfg(bf, 128, true, true, false)), s), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024, sms: sms},
			sm90Problem{cfg: sm90WithSched(sm90Persist(sm90Cfg(bf, 64, true, false, true)), s), b: 2, h: 16, hk: 4, sq: 1000, sk: 1100, sms: 7},
			sm90Problem{cfg: sm90WithSched(sm90Persist(sm90Cfg(bf, 256, true, true, false)), s), b: 1, h: 8, hk: 2, sq: 1024, sk: 1024, sms: sms},
		)
	}
	cases = append(cases, sm90Problem{cfg: sm90WithSched(sm90Cfg(bf, 128, true, true, false), kernels.AttentionLPT), b: 2, h: 16, hk: 16, sq: 1024, sk: 1024})
	// Three consumer warpgroups (the library's d 64 pick from 2k tokens), causal with the
	// dynamic schedule's L2 sections, GQA, lengths off the 192-row tiles.
	c3 := kernels.AttentionSM90ConfigForShape(bf, 64, true, 4096, 4096)
	cases = append(cases,
		sm90Problem{cfg: c3, b: 1, h: 8, hk: 2, sq: 2000, sk: 2100, sms: sms},
		sm90Problem{cfg: kernels.AttentionSM90ConfigForShape(bf, 64, false, 2048, 2048), b: 2, h: 8, hk: 8, sq: 2048, sk: 1500, sms: 7},
	)
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runSM90(t, d, c, 11) })
	}
	// VarLen: packed sequences off the tiles, an empty one, one of one key, GQA 4.
	lq, lk := []int{1, 700, 0, 1300, 513}, []int{900, 1, 5, 2000, 513}
	for _, vc := range []sm90VarLenProblem{
		{cfg: sm90VarLenCfg(bf, 128, false, false, true), h: 16, hk: 4, lensQ: lq, lensK: lk},
		{cfg: sm90VarLenCfg(bf, 128, true, false, true), h: 16, hk: 4, lensQ: lq, lensK: lk},
		{cfg: sm90VarLenCfg(f16, 64, true, false, true), h: 8, hk: 2, lensQ: lq, lensK: lk},
		{cfg: sm90VarLenCfg(bf, 256, false, false, true), h: 4, hk: 1, lensQ: lq, lensK: lk},
		{cfg: sm90Persist(sm90VarLenCfg(bf, 128, true, true, false)), h: 16, hk: 4, lensQ: lq, lensK: lk, sms: sms},
		{cfg: sm90Persist(sm90VarLenCfg(bf, 128, false, true, false)), h: 16, hk: 4, lensQ: lq, lensK: lk, sms: 7},
		{cfg: sm90WithSched(sm90VarLenCfg(bf, 128, true, true, false), kernels.AttentionDynamic), h: 16, hk: 4, lensQ: lq, lensK: lk, sms: sms},
		{cfg: sm90WithSched(sm90Persist(sm90VarLenCfg(bf, 128, true, true, false)), kernels.AttentionLPT), h: 16, hk: 4, lensQ: lq, lensK: lk, sms: 7},
		{cfg: sm90Three(sm90VarLenCfg(bf, 64, true, true, false), 3), h: 8, hk: 2, lensQ: lq, lensK: lk},
	} {
		t.Run(vc.String(), func(t *testing.T) { runSM90VarLen(t, d, vc, 11) })
	}
}
