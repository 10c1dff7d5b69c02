package collectives

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestMoEHostileRouting: ids far outside [-1, Experts) (2^31-1, -2^31, -2, Experts) with
// NaN weights, -1 ids with Inf weights, and two MoEs of different shapes alternating on
// one Comm: out is the reference over the sent pairs (the weights of pairs not sent never
// reach it), and Check reports the bad ids on every rank.
func TestMoEHostileRouting(t *testing.T) {
	ctx := context.Background()
	const g = 2
	cfgs := []MoEConfig{{Tokens: 5, TopK: 3, Hidden: 8, Experts: 4}, {Tokens: 2, TopK: 1, Hidden: 24, Experts: 2}}
	runRanks(t, g, false, false, 1, testOpts, func(e *rankEnv) error {
		var ms []*MoE
		for _, cfg := range cfgs {
			m, err := e.c.NewMoE(ctx, cfg)
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
		r := e.c.Rank()
		for round := 0; round < 4; round++ {
			m := ms[round%2]
			cfg := m.Config()
			in := moeInputs(rand.New(rand.NewSource(int64(round))), g, cfg, 0)
			bad := 0
			for s := range in {
				for i := range in[s].ids {
					switch (i + round) % 4 {
					case 0:
						in[s].ids[i] = []int32{math.MaxInt32, math.MinInt32, -2, int32(cfg.Experts)}[(i/4)%4]
						in[s].w[i] = float32(math.NaN())
						if s == 0 {
							bad++
						}
					case 1:
						in[s].ids[i] = -1
						in[s].w[i] = float32(math.Inf(1))
					}
				}
			}
			x, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
			ids, _ := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
			w, _ := e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
			out, err := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
			if err != nil {
				return err
			}
			idb := make([]byte, 4*len(in[r].ids))
			for i, id := range in[r].ids {
				idb[4*i], idb[4*i+1], idb[4*i+2], idb[4*i+3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
			}
			for _, err := range []error{x.WriteF32(in[r].x), ids.Write(idb), w.WriteF32(in[r].w)} {
				if err != nil {
					return err
				}
			}
			if err := m.Dispatch(ctx, x, ids); err != nil {
				return err
			}
			if err := m.Combine(ctx, m.Recv(), w, out); err != nil {
				return err
			}
			cerr := m.Check(ctx)
			if (bad > 0) != (cerr != nil) || bad > 0 && !strings.Contains(cerr.Error(), fmt.Sprintf("%d expert ids outside [-1, %d)", g*bad, cfg.Experts)) {
				return fmt.Errorf("round %d: Check = %v with %d bad ids a rank", round, cerr, bad)
			}
			got, err := out.ReadF32()
			if err != nil {
				return err
			}
			want := moeWantCombine(in, cfg, g, r, func(x float32, _ int) float32 { return x })
			for j := range want {
				if got[j] != want[j] && !(math.IsNaN(float64(got[j])) && math.IsNaN(float64(want[j]))) {
					return fmt.Errorf("round %d GPU %d token %d col %d = %v, want %v", round, r, j/cfg.Hidden, j%cfg.Hidden, got[j], want[j])
				}
			}
			for _, b := range []*Buffer{x, ids, w, out} {
				b.Free()
			}
		}
		return nil
	})
}
