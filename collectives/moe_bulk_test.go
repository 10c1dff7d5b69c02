package collectives

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// TestMoEBulkPieces runs dispatch and combine through the bulk kernels (sm_90, the
// emulator's target) with rows split into pieces: small pieces forced on odd hidden sizes
// (several pieces a row, the last one shorter), rows of issue #26's hidden 7168 and of
// 16384 in the default pieces (3 and 6 a row in the dispatch, 4 and 8 in the combine), one and two blocks (each warp's ring wrapping many times), TopK past 32
// (the send's pairs past the lanes, the combine's register fallback), and the register
// kernels of an sm_80 Comm with the same shapes.
func TestMoEBulkPieces(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		gpus                int
		cfg                 MoEConfig
		sendMax, combineMax int // 0: the defaults
		target              string
		weak                bool
	}{
		{3, MoEConfig{Tokens: 9, TopK: 3, Hidden: 296, Experts: 6, Blocks: 1}, 64, 128, "", true},
		{2, MoEConfig{Tokens: 11, TopK: 2, Hidden: 40, Experts: 4, Blocks: 2}, 16, 32, "", false},
		{4, MoEConfig{Tokens: 3, TopK: 2, Hidden: 7168, Experts: 4, Blocks: 2}, 0, 0, "", true},
		{2, MoEConfig{Tokens: 3, TopK: 3, Hidden: 16384, Experts: 4, Blocks: 1}, 0, 0, "", false},
		{2, MoEConfig{Tokens: 4, TopK: 34, Hidden: 24, Experts: 4, Blocks: 1}, 32, 16, "", true},
		{3, MoEConfig{Tokens: 9, TopK: 3, Hidden: 296, Experts: 6, Blocks: 2}, 0, 0, "sm_80", false},
	} {
		name := fmt.Sprintf("g%d/k%d/h%d/b%d/pieces%d,%d/%s", c.gpus, c.cfg.TopK, c.cfg.Hidden, c.cfg.Blocks, c.sendMax, c.combineMax, c.target)
		t.Run(name, func(t *testing.T) {
			o := testOpts
			if c.target != "" {
				o.Target = "sm_80"
			}
			runRanks(t, c.gpus, false, c.weak, 3, o, func(e *rankEnv) error {
				m, err := e.c.NewMoE(ctx, c.cfg)
				if err != nil {
					return err
				}
				switch bulk := kernels.MoEBulk(e.c.o.Target); {
				case bulk != (m.sendPiece > 0):
					return fmt.Errorf("target %s: send piece %d", e.c.o.Target, m.sendPiece)
				case bulk && c.sendMax > 0:
					m.setPieces(c.sendMax, c.combineMax)
				}
				if m.sendPiece > 0 {
					if np := (2*c.cfg.Hidden + m.sendPiece - 1) / m.sendPiece; c.sendMax > 0 && np < 2 {
						return fmt.Errorf("send piece %d: a row of %d bytes is not split", m.sendPiece, 2*c.cfg.Hidden)
					}
				}
				rng := rand.New(rand.NewSource(int64(c.gpus)))
				for round, skew := range []int{0, 2, 0} {
					in := moeInputs(rng, c.gpus, m.Config(), skew)
					if err := moeRound(ctx, e, m, in, round == 1); err != nil {
						return fmt.Errorf("round %d: %w", round, err)
					}
				}
				return nil
			})
		})
	}
}

// TestMoEBlocks: the bulk kernels default to DefaultMoEBlocks capped by MaxBlocks (the
// whole grid),
// MoEConfig.Blocks overrides it, and a Blocks past MaxBlocks is refused.
func TestMoEBlocks(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 3, Options{}, func(e *rankEnv) error {
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 16, Experts: 4}
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		if got := m.rowBlocks(1 << 20); got != DefaultMaxBlocks {
			return fmt.Errorf("default grid %d, want MaxBlocks %d", got, DefaultMaxBlocks)
		}
		cfg.Blocks = 100
		if m, err = e.c.NewMoE(ctx, cfg); err != nil {
			return err
		}
		if got := m.rowBlocks(1); got != 100 {
			return fmt.Errorf("MoEConfig.Blocks 100: grid %d", got)
		}
		cfg.Blocks = DefaultMaxBlocks + 1
		if _, err := e.c.NewMoE(ctx, cfg); err == nil || !strings.Contains(err.Error(), "MoEConfig.Blocks 129") {
			return fmt.Errorf("Blocks past MaxBlocks: %v", err)
		}
		return nil
	})
}

// TestMoEOnLaunch: the hook sees each kernel of Dispatch and Combine after its launch, in
// order; nil removes it.
func TestMoEOnLaunch(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 3, testOpts, func(e *rankEnv) error {
		m, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 2, Hidden: 16, Experts: 4})
		if err != nil {
			return err
		}
		var got []string
		m.OnLaunch(func(k string) error { got = append(got, k); return nil })
		in := moeInputs(rand.New(rand.NewSource(1)), 2, m.Config(), 0)
		if err := moeRound(ctx, e, m, in, true); err != nil {
			return err
		}
		want := "[moe_dispatch_count moe_dispatch_layout moe_dispatch_send moe_dispatch_expand moe_combine]"
		if fmt.Sprint(got) != want {
			return fmt.Errorf("hook saw %v, want %s", got, want)
		}
		m.OnLaunch(nil)
		got = nil
		if err := moeRound(ctx, e, m, in, true); err != nil || got != nil {
			return fmt.Errorf("after OnLaunch(nil): %v, %v", got, err)
		}
		return nil
	})
}
