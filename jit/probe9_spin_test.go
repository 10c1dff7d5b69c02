package jit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe9SpinCancelled: a kernel that never ends but always makes progress (a store
// every iteration, so the no-progress budget never fires) returns with the context's error
// soon after its LaunchConfig.Context ends (nothing found). Once that wait has returned the
// context's end, another stream's launch and wait, with a live context, succeed while the
// abandoned kernel runs on: they failed at once with context.DeadlineExceeded (the first
// launch's expiry, reported a second time to a caller whose context had not ended).
func TestProbe9SpinCancelled(t *testing.T) {
	k := dsl.New("spin", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	n := k.Param("n", dsl.U32)
	k.For(k.Const(dsl.U32, 0), n, 1, func(i dsl.Value) { // 2^32-1 iterations: for ever on the emulator
		k.Store(p.At(k.ThreadIdx(dsl.X)), i)
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := m.Function("spin")
	spinBuf, err := Alloc[uint32](d, 32)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := Alloc[uint32](d, 32)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := d.NewStream()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Stream: s1, Context: ctx}, spinBuf, uint32(1<<32-1))
	if err == nil {
		err = s1.SynchronizeContext(ctx)
	}
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second {
		t.Fatalf("a spinning launch past its deadline: %v after %v; want context.DeadlineExceeded soon", err, time.Since(start))
	}

	s2, _ := d.NewStream()
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Stream: s2, Context: ctx2}, buf, uint32(3)); err != nil {
		t.Fatalf("a launch on another stream: %v", err)
	}
	if err := s2.SynchronizeContext(ctx2); err != nil {
		t.Fatalf("another stream's wait with a live context while the abandoned kernel runs: %v", err)
	}
	h := make([]uint32, 32)
	if err := buf.CopyToHostAsync(h, s2); err != nil {
		t.Fatal(err)
	}
	if err := s2.SynchronizeContext(ctx2); err != nil {
		t.Fatal(err)
	}
	if h[5] != 2 {
		t.Errorf("the second launch wrote %v, want 2s", h)
	}
}
