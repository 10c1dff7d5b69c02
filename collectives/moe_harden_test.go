package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// TestMoEHostileConfig: fields whose products overflow, or that the kernels' 32-bit
// arguments would truncate, are refused naming the field (before: Experts 2^62 was accepted
// and truncated to 0 in the kernels, Tokens*TopK overflowing panicked with a division by
// zero, Experts 2^32+2 failed as an allocation "do the ranks' calls differ?").
func TestMoEHostileConfig(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		for _, c := range []struct {
			cfg  MoEConfig
			want string
		}{
			{MoEConfig{Tokens: 1, TopK: 1, Hidden: 8, Experts: 1 << 62}, "Experts 4611686018427387904: want fewer than 2^31"},
			{MoEConfig{Tokens: 1, TopK: 1, Hidden: 8, Experts: 1<<32 + 2}, "Experts 4294967298: want fewer than 2^31"},
			{MoEConfig{Tokens: 1 << 40, TopK: 1 << 40, Hidden: 8, Experts: 2}, "must stay below 2^31"},
			{MoEConfig{Tokens: 1 << 62, TopK: 4, Hidden: 8, Experts: 2}, "must stay below 2^31"},
			{MoEConfig{Tokens: 1, TopK: 1, Hidden: 1 << 40, Experts: 2}, "must stay below 2^31"},
			{MoEConfig{Tokens: 1, TopK: 1, Hidden: 8, Experts: 2, Capacity: 1 << 62}, "must stay below 2^31"},
			{MoEConfig{Tokens: 1 << 16, TopK: 8, Hidden: 8, Experts: 1 << 30}, "count matrix"},
		} {
			m, err := e.c.NewMoE(ctx, c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("NewMoE(%v) = %v, %v; want an error naming %q", c.cfg, m, err, c.want)
			}
		}
		return nil
	})
}

// TestMoEDispatchOwnBuffers: the MoE's own buffers, which the dispatch rewrites, are refused
// as its inputs (before: x = Recv was accepted; peers' rows landed in the rows being read, a
// race the emulator caught and a GPU would not).
func TestMoEDispatchOwnBuffers(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 4}
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		x, err := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		if err != nil {
			return err
		}
		ids, err := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		if err != nil {
			return err
		}
		recv := *m.Recv() // a copy of the handle is the same buffer
		for _, c := range []struct {
			name    string
			x, ids  *Buffer
			operand string
		}{
			{"x=Recv", m.Recv(), ids, "x is one of the MoE's own buffers"},
			{"x=copy of Recv", &recv, ids, "x is one of the MoE's own buffers"},
			{"ids=Src", x, m.Src(), "ids is one of the MoE's own buffers"},
		} {
			if err := m.Dispatch(ctx, c.x, c.ids); err == nil || !strings.Contains(err.Error(), c.operand) {
				return fmt.Errorf("Dispatch(%s) = %v; want an error saying %q", c.name, err, c.operand)
			}
		}
		// The refusals left the MoE usable.
		if err := ids.WriteF32([]float32{0, 1, 2, 3, -1, 0, 1, 2}); err != nil {
			return err
		}
		if err := m.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		return m.Check(ctx)
	})
}

// TestCloseAfterStuckDispatch: a rank whose dispatch waits for a peer that never comes gives
// up at its context's deadline, and its Comm's Close reports the device's sticky error once per
// distinct message, with its repeats counted (before: once per buffer and module, 18 copies, 35 KB).
func TestCloseAfterStuckDispatch(t *testing.T) {
	done := make(chan struct{})
	var closeErr error
	err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}, func(r *jit.Rank) error {
		c, err := New(context.Background(), r, testOpts)
		if err != nil {
			return err
		}
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 4}
		m, err := c.NewMoE(context.Background(), cfg)
		if err != nil {
			return err
		}
		x, err := c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		if err != nil {
			return err
		}
		ids, err := c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		if err != nil {
			return err
		}
		if r.Rank == 1 { // never dispatches; closes once rank 0 is done
			<-done
			c.Close() // its error is rank 0's kernel's, reported there
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		defer func() {
			select {
			case <-done:
			default:
				close(done)
			}
		}()
		if err := m.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		if err := m.Check(ctx); err == nil {
			return errors.New("Check with a peer missing = nil; want the deadline or the deadlock")
		}
		close(done)
		closeErr = c.Close()
		return nil
	})
	// RunRanks reports rank 0's device error (once): what matters here is Close's.
	if err == nil || strings.Count(err.Error(), "no progress in kernel moe_dispatch_count_bf16") > 2 {
		t.Fatalf("RunRanks = %v", err)
	}
	if closeErr == nil {
		t.Fatal("Close after a stuck dispatch = nil; want the device's error")
	}
	msg := closeErr.Error()
	if n := strings.Count(msg, "no progress in kernel moe_dispatch_count_bf16"); n < 1 || n > 2 || len(msg) > 8<<10 || !strings.Contains(msg, "more times") {
		t.Fatalf("Close's error says the stuck kernel %d times in %d bytes; want it once or twice (the deadlock, the launch), with its repeats counted:\n%s", n, len(msg), excerptOf(msg))
	}
}

func excerptOf(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// TestNilMoE: a nil MoE's accessors return zero values and its calls return errors naming
// it, never a panic.
func TestNilMoE(t *testing.T) {
	var m *MoE
	if m.Config() != (MoEConfig{}) || m.Recv() != nil || m.Src() != nil || m.Counts() != nil || m.Offsets() != nil {
		t.Error("a nil MoE's accessors returned something")
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Dispatch": m.Dispatch(ctx, nil, nil),
		"Combine":  m.Combine(ctx, nil, nil, nil),
		"Check":    m.Check(ctx),
	} {
		if err == nil || !strings.Contains(err.Error(), "nil or freed MoE") {
			t.Errorf("%s on a nil MoE: %v", name, err)
		}
	}
}
