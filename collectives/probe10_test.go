package collectives

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe10MoELowLatency: hostile calls on low-latency MoEs at 2 ranks. n below 0 and
// buffers of the wrong type or too short for n are errors naming the operand; two MoEs on
// one Comm with their dispatches and combines interleaved (A, B, A, B) both combine right;
// every call after the Comm's Close is refused naming the closed Comm.
func TestProbe10MoELowLatency(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, true, 10, testOpts, func(e *rankEnv) error {
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 4, LowLatency: true}
		c, err := New(ctx, e.r, testOpts)
		if err != nil {
			return err
		}
		ma, err := c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		mb, err := c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		env := &rankEnv{r: e.r, c: c}
		g := c.NumGPUs()
		rng := rand.New(rand.NewSource(10))
		ina, inb := moeInputs(rng, g, ma.Config(), 0), moeInputs(rng, g, mb.Config(), 1)
		ba, err := moeLLInputs(env, ma.Config(), ina[c.Rank()])
		if err != nil {
			return err
		}
		bb, err := moeLLInputs(env, mb.Config(), inb[c.Rank()])
		if err != nil {
			return err
		}
		f32, _ := c.Alloc(dsl.F32, cfg.Tokens*cfg.Hidden)
		short, _ := c.Alloc(dsl.I32, 3)
		for _, x := range []struct {
			name string
			err  error
			want string
		}{
			{"n -1", ma.DispatchTokens(ctx, ba.x, ba.ids, -1), "n -1"},
			{"x f32", ma.DispatchTokens(ctx, f32, ba.ids, 2), "x holds"},
			{"ids short for n", ma.DispatchTokens(ctx, ba.x, short, 2), "ids holds 3 s32, want at least 4"},
			{"ids as x", ma.DispatchTokens(ctx, ba.ids, ba.ids, 1), "x holds"},
			{"Recv as x", ma.DispatchTokens(ctx, ma.Recv(), ba.ids, 1), "own buffers"},
		} {
			if x.err == nil || !strings.Contains(x.err.Error(), x.want) {
				return fmt.Errorf("%s: %v (want %q)", x.name, x.err, x.want)
			}
		}
		n := []int{3, 2}
		if err := ma.DispatchTokens(ctx, ba.x, ba.ids, n[c.Rank()]); err != nil {
			return err
		}
		if err := mb.DispatchTokens(ctx, bb.x, bb.ids, n[1-c.Rank()]); err != nil {
			return err
		}
		if err := ma.Combine(ctx, ma.Recv(), short, ba.out); err == nil || !strings.Contains(err.Error(), "weights holds") {
			return fmt.Errorf("weights i32: %v", err)
		}
		if err := ma.Combine(ctx, ma.Recv(), ba.w, ba.out); err != nil {
			return err
		}
		if err := mb.Combine(ctx, mb.Recv(), bb.w, bb.out); err != nil {
			return err
		}
		id := func(x float32, _ int) float32 { return x }
		if err := moeLLCheckOut(env, cfg, ina, n, ba.out, id); err != nil {
			return fmt.Errorf("MoE A: %w", err)
		}
		if err := moeLLCheckOut(env, cfg, inb, []int{n[1], n[0]}, bb.out, id); err != nil {
			return fmt.Errorf("MoE B: %w", err)
		}
		if err := errors.Join(ma.Check(ctx), mb.Check(ctx)); err != nil {
			return err
		}
		if err := c.Close(); err != nil {
			return err
		}
		for _, x := range []struct {
			name string
			err  error
		}{
			{"DispatchTokens", ma.DispatchTokens(ctx, ba.x, ba.ids, 1)},
			{"Dispatch", ma.Dispatch(ctx, ba.x, ba.ids)},
			{"Combine", ma.Combine(ctx, ma.Recv(), ba.w, ba.out)},
			{"Check", ma.Check(ctx)},
		} {
			if x.err == nil || !strings.Contains(x.err.Error(), "closed") {
				return fmt.Errorf("%s after Close: %v (want the closed Comm)", x.name, x.err)
			}
		}
		if _, err := c.NewMoE(ctx, cfg); err == nil || !strings.Contains(err.Error(), "closed") {
			return fmt.Errorf("NewMoE after Close: %v", err)
		}
		return nil
	})
}
