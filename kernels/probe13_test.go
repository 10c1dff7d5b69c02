package kernels

import (
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe13ModelKeyTiles: AttentionSM90Config.ModelKeyTiles answers nil for a
// configuration Check refuses and for a shape CheckShape refuses, at once. Before: BN -16
// modelled -1088 key tiles on one SM, Schedule 7 and 3 consumers a balanced cost, as if
// they ran; an unchecked 2^20 x 2^20 heads of 2^20 queries walked 2^53 work tiles (it never
// returned); and a huge SM count with 2^34 tiles allocated a slice per SM until the process
// died of it (probe 13).
func TestProbe13ModelKeyTiles(t *testing.T) {
	as := DefaultAttentionSM90Config(dsl.BF16, 128, true)
	within := func(name string, f func() []int) {
		t.Helper()
		got := make(chan []int, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic %v", name, r)
					got <- []int{-1}
				}
			}()
			got <- f()
		}()
		select {
		case sum := <-got:
			if sum != nil {
				t.Errorf("%s: ModelKeyTiles = %v; want nil", name, sum)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: ModelKeyTiles did not return in 5 s", name)
		}
	}
	bad := func(f func(*AttentionSM90Config)) AttentionSM90Config {
		c := as
		f(&c)
		return c
	}
	for name, c := range map[string]AttentionSM90Config{
		"BN 0":           bad(func(c *AttentionSM90Config) { c.BN = 0 }),
		"BN -16":         bad(func(c *AttentionSM90Config) { c.BN = -16 }),
		"schedule 7":     bad(func(c *AttentionSM90Config) { c.Schedule, c.Persistent = 7, true }),
		"consumers 3":    bad(func(c *AttentionSM90Config) { c.Consumers = 3 }),
		"only Consumers": {Consumers: 1},
	} {
		within(name, func() []int { return c.ModelKeyTiles(2, 2, 1024, 1024, 4) })
	}
	within("2^20 batches of 2^20 heads", func() []int { return as.ModelKeyTiles(1<<20, 1<<20, 1<<20, 64, 132) })
	within("seqQ 2^40", func() []int { return as.ModelKeyTiles(1, 1, 1<<40, 64, 132) })
	within("sms 0", func() []int { return as.ModelKeyTiles(2, 2, 1024, 1024, 0) })
	// A shape the kernel runs is modelled: every SM's key tiles, summing to the problem's.
	sum := as.ModelKeyTiles(2, 4, 1024, 1024, 8)
	if len(sum) != 8 {
		t.Fatalf("ModelKeyTiles(2, 4, 1024, 1024, 8) = %v; want 8 SMs' sums", sum)
	}
	total := 0
	for _, s := range sum {
		total += s
	}
	// causal 1024 x 1024, BM 128, BN 128: query tile i walks i+1 key tiles; 8 pairs.
	if want := 8 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8); as.BM() == 128 && as.BN == 128 && total != want {
		t.Errorf("modelled %d key tiles in all, want %d", total, want)
	}
	if total <= 0 {
		t.Errorf("modelled %d key tiles in all", total)
	}
}
