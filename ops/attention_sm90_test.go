package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestAttentionSM90ConfigFor: the sm_90a attention is compute capability 9.0's only, one
// consumer warpgroup for short query sequences, two otherwise; the intra-warpgroup overlap
// on and the ping-pong off (the fastest on an H200, docs/attention.md).
func TestAttentionSM90ConfigFor(t *testing.T) {
	if _, err := AttentionSM90ConfigFor(jit.Info{Name: "A100", SM: 80}, ptx.BF16, 128, 1024, 1024, false); err == nil || !strings.Contains(err.Error(), "compute capability 9.0; A100 is 8.0") {
		t.Errorf("on sm_80: %v, want an error naming compute capability 9.0", err)
	}
	for _, c := range []struct {
		sq, consumers int
		pingPong      bool
	}{{1, 1, false}, {64, 1, false}, {65, 2, false}, {4096, 2, false}} {
		cfg, err := AttentionSM90ConfigFor(jit.Info{Name: "H100", SM: 90}, ptx.BF16, 128, c.sq, c.sq, true)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Consumers != c.consumers || cfg.PingPong != c.pingPong || !cfg.Overlap || !cfg.Causal {
			t.Errorf("seqQ %d: %+v; want %d consumers, ping-pong %v, overlap, causal", c.sq, cfg, c.consumers, c.pingPong)
		}
	}
	// Causal: Persistent with AttentionLPT at d 64, AttentionDynamic at d 128 and 256; one
	// block (one consumer warpgroup) at 64 queries.
	for _, c := range []struct {
		d, sq   int
		persist bool
		sched   kernels.AttentionSchedule
	}{{64, 1024, true, kernels.AttentionLPT}, {64, 16384, true, kernels.AttentionDynamic}, {128, 1024, true, kernels.AttentionDynamic},
		{128, 4096, true, kernels.AttentionDynamic}, {128, 16384, true, kernels.AttentionDynamic}, {256, 1024, true, kernels.AttentionDynamic},
		{256, 16384, true, kernels.AttentionDynamic}, {64, 64, false, kernels.AttentionStrided}, {128, 64, false, kernels.AttentionStrided}} {
		cfg, err := AttentionSM90ConfigFor(jit.Info{Name: "H100", SM: 90}, ptx.BF16, c.d, c.sq, c.sq, true)
		if err != nil {
			t.Errorf("causal d %d seqQ %d: %v", c.d, c.sq, err)
			continue
		}
		if cfg.Persistent != c.persist || cfg.Schedule != c.sched {
			t.Errorf("causal d %d seqQ %d: Persistent %v schedule %v, want Persistent %v %v", c.d, c.sq, cfg.Persistent, cfg.Schedule, c.persist, c.sched)
		}
	}
	// Key steps: longer without a mask where keys are many; three consumers at d 64 from 2k
	// queries and keys (4k queries causal); every pick builds (Check).
	for _, c := range []struct {
		d, sq, sk int
		causal    bool
		bn        int
		consumers int
	}{
		{64, 1024, 1024, false, 128, 2}, {64, 1024, 2048, false, 192, 2}, {64, 1024, 16384, false, 224, 2},
		{64, 2048, 2048, false, 128, 3}, {64, 16384, 16384, false, 128, 3}, {64, 2048, 2048, true, 128, 2},
		{64, 4096, 4096, true, 128, 3}, {64, 16384, 16384, true, 128, 3}, {64, 16, 16384, false, 128, 1},
		{128, 2048, 2048, false, 128, 2}, {128, 4096, 4096, false, 160, 2}, {128, 4096, 4096, true, 128, 2},
		{256, 1024, 1024, false, 80, 2}, {256, 16384, 16384, true, 80, 2}, {256, 64, 16384, false, 64, 1},
		{128, 2048, 0, false, 128, 2}, // keys not known (VarLen): the default step
	} {
		cfg, err := AttentionSM90ConfigFor(jit.Info{Name: "H100", SM: 90}, ptx.BF16, c.d, c.sq, c.sk, c.causal)
		if err != nil {
			t.Errorf("d %d seqQ %d seqK %d causal %v: %v", c.d, c.sq, c.sk, c.causal, err)
			continue
		}
		if cfg.BN != c.bn || cfg.Consumers != c.consumers {
			t.Errorf("d %d seqQ %d seqK %d causal %v: BN %d, %d consumers, want %d, %d", c.d, c.sq, c.sk, c.causal, cfg.BN, cfg.Consumers, c.bn, c.consumers)
		}
	}
}

// TestAttentionKernelOption: a Kernel outside the enumeration and a negative Scale are errors
// naming the field; each kernel, forced or picked, matches the float64 reference.
func TestAttentionKernelOption(t *testing.T) {
	d := emuDevice(t)
	o := newAttn[fp.BF16](t, d, attnCase{b: 1, h: 2, hk: 1, sq: 5, sk: 9, d: 64}, 1)
	err := Attention(context.Background(), nil, o.out, o.q, o.k, o.v, &AttentionOptions{Kernel: AttentionKernel(7)})
	if err == nil || !strings.Contains(err.Error(), "AttentionOptions.Kernel AttentionKernel(7)") {
		t.Errorf("Kernel 7: %v, want an error naming AttentionOptions.Kernel", err)
	}
	for _, sc := range []float32{-1, -1e-30} { // the masked keys' -Inf would become +Inf: NaN
		err := Attention(context.Background(), nil, o.out, o.q, o.k, o.v, &AttentionOptions{Scale: sc})
		if err == nil || !strings.Contains(err.Error(), "AttentionOptions.Scale") || !strings.Contains(err.Error(), "positive finite scale") {
			t.Errorf("Scale %v: %v; want a refusal naming AttentionOptions.Scale", sc, err)
		}
	}
	for _, k := range []AttentionKernel{AttentionSM90, AttentionFA2, AttentionAuto} {
		if err := Attention(context.Background(), nil, o.out, o.q, o.k, o.v, &AttentionOptions{Kernel: k}); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		checkAttn(t, attnCase{b: 1, h: 2, hk: 1, sq: 5, sk: 9, d: 64}, o, false)
	}
}

// TestAttentionScheduleOption: a Schedule outside the enumeration, or with the FA2 kernel
// forced, is an error naming the field; each schedule, causal and not, matches the float64
// reference with more tiles than the emulator's 16 SMs (Persistent blocks walk several) and
// runs the kernel it names. AttentionScheduleDynamic runs twice back to back on one stream
// and once on another (each stream's own tile counter), each call checked.
func TestAttentionScheduleOption(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	c := attnCase{b: 2, h: 4, hk: 1, sq: 300, sk: 260, d: 64}
	o := newAttn[fp.BF16](t, d, c, 3)
	if err := Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{Schedule: AttentionSchedule(9)}); err == nil || !strings.Contains(err.Error(), "AttentionOptions.Schedule AttentionSchedule(9)") {
		t.Errorf("Schedule 9: %v, want an error naming AttentionOptions.Schedule", err)
	}
	if err := Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{Schedule: AttentionScheduleLPT, Kernel: AttentionFA2}); err == nil || !strings.Contains(err.Error(), "AttentionOptions.Schedule lpt is the sm_90a kernel's") {
		t.Errorf("Schedule lpt with FA2: %v, want an error naming AttentionOptions.Schedule", err)
	}
	s2, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	suffix := map[AttentionSchedule]string{AttentionScheduleGrid: "_ov", AttentionScheduleGridLPT: "_ov_lpt",
		AttentionScheduleStrided: "_ov_persist", AttentionScheduleLPT: "_ov_persist_lpt", AttentionScheduleDynamic: "_ov_persist_dyn"}
	for _, causal := range []bool{false, true} {
		c.causal = causal
		for s := AttentionScheduleAuto; s <= AttentionScheduleDynamic; s++ {
			calls := []*jit.Stream{nil}
			if s == AttentionScheduleDynamic {
				calls = []*jit.Stream{nil, nil, s2}
			}
			for i, st := range calls {
				if err := o.outB.CopyFromHost(make([]fp.BF16, o.outB.Len())); err != nil {
					t.Fatal(err)
				}
				if err := Attention(ctx, st, o.out, o.q, o.k, o.v, &AttentionOptions{Causal: causal, Schedule: s}); err != nil {
					t.Fatalf("causal %v %s call %d: %v", causal, s, i, err)
				}
				if err := d.Synchronize(); err != nil {
					t.Fatal(err)
				}
				checkAttn(t, c, o, false)
			}
			if want := suffix[s]; want != "" {
				// causal d 64 takes 3 K/V stages (kernels.AttentionSM90ConfigForShape)
				name := fmt.Sprintf("attention_sm90_bf16_d64_128x128_%s%s", map[bool]string{false: "2s", true: "3s_causal"}[causal], want)
				if !slices.Contains(Kernels(d), name) {
					t.Errorf("causal %v %s: loaded %v, want %s", causal, s, Kernels(d), name)
				}
			}
		}
	}
}
