package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe10PersistentLaunch: the persistent attention launch with hostile SM counts and
// shapes. 0 or negative SMs is refused naming the SM count, a huge count gives one block a
// tile, a Persistent config through Launch/LaunchVarLen is refused naming the other call,
// and shapes whose tile count overflows int are refused by the launches, while Grid and
// PersistentGrid never return a wrapped (small or negative) count.
func TestProbe10PersistentLaunch(t *testing.T) {
	c := DefaultAttentionSM90Config(dsl.BF16, 128, false)
	c.Persistent = true
	for _, sms := range []int{0, -1, math.MinInt} {
		if _, err := c.LaunchPersistent(1, 8, 8, 1024, 1024, sms); err == nil || !strings.Contains(err.Error(), "SMs") {
			t.Errorf("LaunchPersistent on %d SMs: %v (want an error naming the SM count)", sms, err)
		}
	}
	v := c
	v.VarLen = true
	if _, err := v.LaunchVarLenPersistent(2, 8, 8, 1024, 2048, 2048, 0); err == nil || !strings.Contains(err.Error(), "SMs") {
		t.Errorf("LaunchVarLenPersistent on 0 SMs: %v", err)
	}
	if _, err := c.Launch(1, 8, 8, 1024, 1024); err == nil || !strings.Contains(err.Error(), "LaunchPersistent") {
		t.Errorf("Launch of a Persistent config: %v", err)
	}
	if _, err := v.LaunchVarLen(2, 8, 8, 1024, 2048, 2048); err == nil || !strings.Contains(err.Error(), "LaunchVarLenPersistent") {
		t.Errorf("LaunchVarLen of a Persistent config: %v", err)
	}
	tiles := c.Grid(1, 8, 1024)
	if l, err := c.LaunchPersistent(1, 8, 8, 1024, 1024, math.MaxInt); err != nil || l.Grid != tiles {
		t.Errorf("LaunchPersistent on MaxInt SMs: grid %d, %v (want the %d tiles)", l.Grid, err, tiles)
	}
	if l, err := c.LaunchPersistent(1, 8, 8, 1024, 1024, 3); err != nil || l.Grid != 3 {
		t.Errorf("LaunchPersistent on 3 SMs: grid %d, %v (want 3)", l.Grid, err)
	}
	big := 1 << 40
	if _, err := c.LaunchPersistent(big, big, big, big, big, 132); err == nil {
		t.Error("LaunchPersistent of 2^40 in every extent: accepted")
	}
	if _, err := v.LaunchVarLenPersistent(2, 1<<30, 1<<30, 128, big, big, 132); err == nil {
		t.Error("LaunchVarLenPersistent of 2^40 packed rows of 2^30 heads: accepted")
	}
	if err := (AttentionConfig{HeadDim: 128, BM: 64}).CheckShape(big, big, big, big, big); err == nil || !strings.Contains(err.Error(), "2^31") {
		t.Errorf("AttentionConfig.CheckShape of 2^40 in every extent: %v (want a 2^31 limit)", err)
	}
	for _, x := range [][3]int{{big, big, big}, {1 << 21, 1 << 21, 1 << 30}, {math.MaxInt, 2, 128}, {3, math.MaxInt / 2, math.MaxInt}} {
		g := c.Grid(x[0], x[1], x[2])
		want := new(big_).tiles(x[0], x[1], x[2], c.BM())
		if g <= 0 || (want && g != math.MaxInt) {
			t.Errorf("Grid%v = %d (the tile count overflows int: want math.MaxInt)", x, g)
		}
		if p := c.PersistentGrid(x[0], x[1], x[2], 132); p != 132 {
			t.Errorf("PersistentGrid%v on 132 SMs = %d (want 132)", x, p)
		}
	}
}

type big_ struct{}

// tiles reports whether ceil(seqQ/bm)*heads*batch overflows int.
func (big_) tiles(batch, heads, seqQ, bm int) bool {
	q := (seqQ-1)/bm + 1
	hi, lo := mulOverflows(q, heads)
	if hi {
		return true
	}
	hi, _ = mulOverflows(lo, batch)
	return hi
}

func mulOverflows(a, b int) (bool, int) {
	if a != 0 && b > math.MaxInt/a {
		return true, 0
	}
	return false, a * b
}
