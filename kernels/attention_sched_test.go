package kernels_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// sm90WithSched is c with schedule s (and Persistent for AttentionDynamic).
func sm90WithSched(c kernels.AttentionSM90Config, s kernels.AttentionSchedule) kernels.AttentionSM90Config {
	c.Schedule = s
	if s == kernels.AttentionDynamic {
		c.Persistent = true
	}
	return c
}

// TestAttentionSM90Schedules checks AttentionLPT and AttentionDynamic on the emulator
// against float64: TestAttentionSM90Persistent's 20 problems and
// TestAttentionSM90VarLenPersistent's 7 under each (grids of 2-5 blocks over 4-18 tiles,
// odd lengths, one token, GQA 4 and 8, causal with seqQ < seqK and seqQ > seqK, every
// overlap combination, head dims 64-256, VarLen tiles past their sequence), and
// AttentionLPT's order without Persistent (a grid of one block a tile).
func TestAttentionSM90Schedules(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range []kernels.AttentionSchedule{kernels.AttentionLPT, kernels.AttentionDynamic} {
		for _, c := range sm90PersistentCases() {
			c.cfg = sm90WithSched(c.cfg, s)
			t.Run(c.String(), func(t *testing.T) { runSM90(t, d, c, 5) })
		}
		for _, c := range sm90VarLenPersistentCases() {
			c.cfg = sm90WithSched(c.cfg, s)
			t.Run(fmt.Sprintf("%s/sms%d", c, c.sms), func(t *testing.T) { runSM90VarLen(t, d, c, 9) })
		}
	}
	bf := dsl.BF16
	lpt := func(c kernels.AttentionSM90Config) kernels.AttentionSM90Config {
		return sm90WithSched(c, kernels.AttentionLPT)
	}
	for _, c := range []sm90Problem{
		{cfg: lpt(sm90Cfg(bf, 64, true, true, false)), b: 2, h: 4, hk: 1, sq: 200, sk: 130},
		{cfg: lpt(sm90Cfg(bf, 128, true, true, true)), b: 3, h: 2, hk: 2, sq: 300, sk: 20},
		{cfg: lpt(sm90Cfg(bf, 64, false, false, false)), b: 2, h: 3, hk: 3, sq: 130, sk: 200},
	} {
		t.Run(c.String(), func(t *testing.T) { runSM90(t, d, c, 5) })
	}
	lq, lk := []int{1, 70, 0, 130}, []int{90, 1, 5, 200}
	c := sm90VarLenProblem{cfg: lpt(sm90VarLenCfg(bf, 64, true, true, false)), h: 4, hk: 1, lensQ: lq, lensK: lk}
	t.Run(c.String(), func(t *testing.T) { runSM90VarLen(t, d, c, 9) })
}

// sm90Skewed are AttentionDynamic problems whose tiles differ most: causal with seqQ far
// above seqK (most tiles see no key) and below it, GQA 4 and 8, one token, head dims 64,
// 128 and 256, not causal, and packed sequences of 0 to 330 queries.
func sm90Skewed() ([]sm90Problem, []sm90VarLenProblem) {
	bf, f16 := dsl.BF16, dsl.F16
	dyn := func(c kernels.AttentionSM90Config) kernels.AttentionSM90Config {
		return sm90WithSched(c, kernels.AttentionDynamic)
	}
	return []sm90Problem{
			{cfg: dyn(sm90Cfg(bf, 64, true, true, false)), b: 3, h: 4, hk: 1, sq: 300, sk: 20, sms: 4},
			{cfg: dyn(sm90Cfg(bf, 128, true, true, true)), b: 1, h: 8, hk: 1, sq: 390, sk: 520, sms: 3},
			{cfg: dyn(sm90Cfg(f16, 64, true, false, false)), b: 5, h: 2, hk: 2, sq: 1, sk: 90, sms: 5},
			{cfg: dyn(sm90Cfg(bf, 256, true, true, false)), b: 2, h: 3, hk: 1, sq: 130, sk: 70, sms: 4},
			{cfg: dyn(sm90Cfg(bf, 64, false, false, true)), b: 2, h: 3, hk: 3, sq: 130, sk: 200, sms: 5},
		}, []sm90VarLenProblem{
			{cfg: dyn(sm90VarLenCfg(bf, 64, true, true, false)), h: 4, hk: 1, lensQ: []int{1, 70, 0, 330}, lensK: []int{90, 1, 5, 400}, sms: 3},
		}
}

// sm90ReadSched returns the words of sched.
func sm90ReadSched(t *testing.T, sched *jit.Buffer[uint32]) []uint32 {
	t.Helper()
	w := make([]uint32, kernels.AttentionSchedWords)
	if err := sched.CopyToHost(w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestAttentionSM90DynamicBackToBack launches the skewed AttentionDynamic problems back to
// back on one stream, all with one tile counter that the host zeroes once before the first:
// each launch finds it zero only if the one before set it back. Every output is checked
// after the last launch, and the counter is zero again. Three emulator seeds shuffle the
// order in which blocks start and run, so the counter hands the tiles out differently. A
// counter left non-zero (what a missing reset would leave) gives wrong outputs: the test
// would see it.
func TestAttentionSM90DynamicBackToBack(t *testing.T) {
	dense, packed := sm90Skewed()
	for _, seed := range []int64{0, 1, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			d, err := jit.OpenBackend(jit.Emulator, 0, jit.WithEmuOptions(emu.Options{Seed: seed}))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			s, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var rs []sm90Runner
			var names []string
			for _, p := range dense {
				rs, names = append(rs, prepSM90(t, d, p, 5)), append(names, p.String())
			}
			for _, p := range packed {
				rs, names = append(rs, prepSM90VarLen(t, d, p, 9)), append(names, p.String())
			}
			sched := sm90Sched(t, d)
			for _, r := range append(rs, rs...) { // each problem twice: ten launches
				if err := r.launch(s, sched); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if w := sm90ReadSched(t, sched); !slices.Equal(w, []uint32{0, 0}) {
				t.Errorf("the tile counter after %d launches: %v, want [0 0]", 2*len(rs), w)
			}
			for i, r := range rs {
				t.Run(names[i], func(t *testing.T) { r.check(t) })
			}
		})
	}
	// The control: a counter left at 1000 hands every block an index past the last tile
	// after its first, so most tiles are never computed; the last block still zeroes it.
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := prepSM90(t, d, dense[1], 5)
	sched := sm90Sched(t, d)
	if err := sched.CopyFromHost([]uint32{1000, 0}); err != nil {
		t.Fatal(err)
	}
	if err := r.launch(nil, sched); err != nil {
		t.Fatal(err)
	}
	if bad := r.compare(t, false); bad == 0 {
		t.Errorf("%s with the counter at 1000: every value right; the kernel does not take its tiles from the counter", dense[1])
	}
	if w := sm90ReadSched(t, sched); !slices.Equal(w, []uint32{0, 0}) {
		t.Errorf("the tile counter after the control launch: %v, want [0 0]", w)
	}
}

// TestAttentionSM90DynamicGraph captures three skewed AttentionDynamic launches (one
// VarLen) sharing one tile counter in a graph and replays it three times with nothing but
// the outputs reset in between: the kernels' own reset carries the counter from replay to
// replay.
func TestAttentionSM90DynamicGraph(t *testing.T) {
	dense, packed := sm90Skewed()
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs := []sm90Runner{prepSM90(t, d, dense[0], 5), prepSM90VarLen(t, d, packed[0], 9), prepSM90(t, d, dense[1], 5)}
	sched := sm90Sched(t, d)
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := r.launch(s, sched); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := len(g.Kernels()); n != len(rs) || !strings.HasSuffix(g.Kernels()[0].Name, "_dyn") {
		t.Fatalf("captured %v, want the %d launches", g.Kernels(), len(rs))
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	for rep := range 3 {
		for _, r := range rs {
			if err := r.reset(); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if w := sm90ReadSched(t, sched); !slices.Equal(w, []uint32{0, 0}) {
			t.Errorf("replay %d: the tile counter %v, want [0 0]", rep, w)
		}
		for _, r := range rs {
			r.check(t)
		}
	}
}

// TestAttentionScheduleConfig: the schedules' names, their parse, the kernel names'
// suffixes, the launch's counter words, and the default (causal not Persistent).
func TestAttentionScheduleConfig(t *testing.T) {
	for _, s := range []kernels.AttentionSchedule{kernels.AttentionStrided, kernels.AttentionLPT, kernels.AttentionDynamic} {
		if got, err := kernels.ParseAttentionSchedule(s.String()); err != nil || got != s {
			t.Errorf("ParseAttentionSchedule(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := kernels.ParseAttentionSchedule("snake"); err == nil || !strings.Contains(err.Error(), "want strided, lpt or dynamic") {
		t.Errorf("ParseAttentionSchedule(snake) = %v, want an error naming the schedules", err)
	}
	base := kernels.DefaultAttentionSM90Config(dsl.BF16, 128, true)
	if base.Persistent || base.Schedule != kernels.AttentionStrided {
		t.Errorf("the causal default is %s; want one block a tile (the balanced schedules are not timed yet)", base.Name())
	}
	for _, c := range []struct {
		persistent bool
		s          kernels.AttentionSchedule
		suffix     string
		words      int
	}{
		{false, kernels.AttentionStrided, "_causal_ov", 0},
		{false, kernels.AttentionLPT, "_causal_ov_lpt", 0},
		{true, kernels.AttentionStrided, "_causal_ov_persist", 0},
		{true, kernels.AttentionLPT, "_causal_ov_persist_lpt", 0},
		{true, kernels.AttentionDynamic, "_causal_ov_persist_dyn", kernels.AttentionSchedWords},
	} {
		cfg := base
		cfg.Persistent, cfg.Schedule = c.persistent, c.s
		if !strings.HasSuffix(cfg.Name(), c.suffix) {
			t.Errorf("%v %s: name %s, want the suffix %s", c.persistent, c.s, cfg.Name(), c.suffix)
		}
		l, err := cfg.LaunchPersistent(2, 16, 16, 2048, 2048, 132)
		if err != nil || l.SchedWords != c.words {
			t.Errorf("%s: LaunchPersistent SchedWords %d, %v; want %d", cfg.Name(), l.SchedWords, err, c.words)
		}
	}
}
