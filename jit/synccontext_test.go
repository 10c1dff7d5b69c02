package jit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/ptx"
)

// TestSynchronizeContext: Device.SynchronizeContext and Stream.SynchronizeContext return
// at ctx's deadline while a kernel that never ends runs (its launch has a context of its
// own, which Close ends afterwards), and refuse a nil or ended context.
func TestSynchronizeContext(t *testing.T) {
	m, err := ptx.Parse(spinStore)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(Source{Module: m})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("k")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Alloc[uint32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithCancel(context.Background())
	if err := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1), Stream: s, Context: lctx}, b); err != nil {
		t.Fatal(err)
	}
	for name, wait := range map[string]func(context.Context) error{
		"device": d.SynchronizeContext,
		"stream": s.SynchronizeContext,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- wait(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: SynchronizeContext = %v; want the deadline", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: SynchronizeContext still waits 20 s after its deadline", name)
		}
		cancel()
		var nilCtx context.Context // the misuse tested
		if err := wait(nilCtx); err == nil {
			t.Errorf("%s: SynchronizeContext(nil) = nil; want an error", name)
		}
		if err := wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: SynchronizeContext(ended) = %v; want the deadline", name, err)
		}
	}
	lcancel()
	if err := d.Close(); err == nil {
		t.Error("Close = nil; want it to say it ended the kernel")
	}
	if err := d.SynchronizeContext(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("SynchronizeContext after Close = %v; want ErrClosed", err)
	}
}

// TestWaitContext: the GPU backend's fallback returns at ctx's end while the wait goes on.
func TestWaitContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	err := waitContext(ctx, "test wait", func() error { <-release; return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitContext = %v; want the deadline", err)
	}
	if err := waitContext(context.Background(), "test wait", func() error { return errors.New("x") }); err == nil || err.Error() != "x" {
		t.Fatalf("waitContext(Background) = %v; want the wait's error", err)
	}
}
