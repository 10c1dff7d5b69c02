package jit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// safely runs f, turning a panic into an error.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// TestProbeNVSHMEMHostile calls the NVSHMEM host API (emulator) with hostile inputs: each is
// an error naming the rule, never a panic or a misleading reason (before: PeerPtr and
// MulticastPtr of nil panicked, of memory off the symmetric heap blamed peer access or
// multicast; MallocContext of an ended context entered the collective and failed every rank).
func TestProbeNVSHMEMHostile(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		s := r.NVSHMEM
		sym, err := SymAlloc[float32](s, 16)
		if err != nil {
			return err
		}
		plain, err := Alloc[float32](r.Device, 16)
		if err != nil {
			return err
		}
		defer plain.Free()
		var nilMem *Memory
		var nilBuf *Buffer[float32]
		var nilCtx context.Context // the misuse tested
		var errs []string
		for _, tc := range []struct {
			name string
			f    func() error
			want string
		}{
			{"Malloc 0", func() error { _, err := s.Malloc(0); return err }, "size must be positive"},
			{"Malloc -1", func() error { _, err := s.Malloc(-1); return err }, "size must be positive"},
			{"Malloc huge", func() error { _, err := s.Malloc(math.MaxInt64); return err }, "bytes"},
			{"SymAlloc 0", func() error { _, err := SymAlloc[float32](s, 0); return err }, "length must be positive"},
			{"SymAlloc overflow", func() error { _, err := SymAlloc[float64](s, math.MaxInt64/4); return err }, "overflow"},
			{"PeerPtr -1", func() error { _, err := s.PeerPtr(sym, -1); return err }, "out of range"},
			{"PeerPtr 2", func() error { _, err := s.PeerPtr(sym, 2); return err }, "out of range"},
			{"PeerPtr nil", func() error { _, err := s.PeerPtr(nil, 0); return err }, "symmetric"},
			{"PeerPtr nil Memory", func() error { _, err := s.PeerPtr(nilMem, 0); return err }, "symmetric"},
			{"PeerPtr nil Buffer", func() error { _, err := s.PeerPtr(nilBuf, 0); return err }, "symmetric"},
			{"PeerPtr private", func() error { _, err := s.PeerPtr(plain, 1-r.Rank); return err }, "symmetric"},
			{"PeerPtr raw", func() error { _, err := s.PeerPtr(DevicePtr(12345), 1-r.Rank); return err }, "symmetric"},
			{"MulticastPtr nil", func() error { _, err := s.MulticastPtr(nil); return err }, "symmetric"},
			{"MulticastPtr private", func() error { _, err := s.MulticastPtr(plain); return err }, "symmetric"},
			{"BarrierAllContext nil", func() error { return s.BarrierAllContext(nilCtx) }, "nil context"},
			{"MallocContext nil", func() error { _, err := s.MallocContext(nilCtx, 16); return err }, "nil context"},
			{"MallocContext ended", func() error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_, err := s.MallocContext(ctx, 16)
				return err
			}, "canceled"},
		} {
			err := safely(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				errs = append(errs, fmt.Sprintf("%s: %v; want an error containing %q", tc.name, err, tc.want))
			}
		}
		if r.Rank == 0 && len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProbeLaunchHostile launches vector_add (emulator) with hostile arguments and shapes:
// each is an error naming the problem, never a panic or a silent run.
func TestProbeLaunchHostile(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d2, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	mod, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Alloc[float32](d, 64)
	b, _ := Alloc[float32](d, 64)
	c, _ := Alloc[float32](d, 64)
	other, _ := Alloc[float32](d2, 64)
	s2, _ := d2.NewStream()
	closedS, _ := d.NewStream()
	closedS.Close()
	ev, _ := d.NewEvent()
	var nilBuf *Buffer[float32]
	lc := LaunchConfig{Grid: D1(1), Block: D1(64)}
	type argsT struct {
		A, B, C *Buffer[float32]
		N       uint32
	}
	type wrongT struct {
		A, B, C *Buffer[float32]
		N       float32
	}
	with := func(m func(*LaunchConfig)) LaunchConfig { x := lc; m(&x); return x }
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"too few", func() error { return f.Launch(lc, a, b, c) }, "argument"},
		{"too many", func() error { return f.Launch(lc, a, b, c, uint32(64), uint32(1)) }, "argument"},
		{"float for u32", func() error { return f.Launch(lc, a, b, c, float32(64)) }, "float32"},
		{"int64 for u32", func() error { return f.Launch(lc, a, b, c, int64(64)) }, "int64"},
		{"negative int32 for u32", func() error { return f.Launch(lc, a, b, c, int32(-1)) }, "-1"},
		{"string", func() error { return f.Launch(lc, a, b, "c", uint32(64)) }, "string"},
		{"nil interface", func() error { return f.Launch(lc, a, b, nil, uint32(64)) }, "nil"},
		{"nil *Buffer", func() error { return f.Launch(lc, a, b, nilBuf, uint32(64)) }, "nil"},
		{"freed", func() error {
			x, _ := Alloc[float32](d, 4)
			x.Free()
			return f.Launch(lc, a, b, x, uint32(64))
		}, "freed"},
		{"other device buffer", func() error { return f.Launch(lc, a, b, other, uint32(64)) }, "belongs to"},
		{"other device stream", func() error { return f.Launch(with(func(l *LaunchConfig) { l.Stream = s2 }), a, b, c, uint32(64)) }, "belongs to"},
		{"closed stream", func() error { return f.Launch(with(func(l *LaunchConfig) { l.Stream = closedS }), a, b, c, uint32(64)) }, "closed"},
		{"struct wrong field type", func() error { return f.LaunchArgs(lc, wrongT{a, b, c, 64}) }, "N"},
		{"struct nil", func() error { return f.LaunchArgs(lc, nil) }, "nil"},
		{"struct nil pointer", func() error { var p *argsT; return f.LaunchArgs(lc, p) }, "nil"},
		{"not a struct", func() error { return f.LaunchArgs(lc, 5) }, "struct"},
		{"grid y 70000", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.Grid = Dim3{1, 70000, 1} }), a, b, c, uint32(64))
		}, "65535"},
		{"grid x 2^31", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.Grid = Dim3{1 << 31, 1, 1} }), a, b, c, uint32(64))
		}, "grid"},
		{"block 2048", func() error { return f.Launch(with(func(l *LaunchConfig) { l.Block = D1(2048) }), a, b, c, uint32(64)) }, "1024"},
		{"block z 65", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.Block = Dim3{1, 1, 65} }), a, b, c, uint32(64))
		}, "64"},
		{"shared huge", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.SharedMem = 1 << 40 }), a, b, c, uint32(64))
		}, "shared"},
		{"cluster not dividing", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.Grid = D1(3); l.Cluster = D1(2) }), a, b, c, uint32(64))
		}, "whole number of clusters"},
		{"cluster negative", func() error {
			return f.Launch(with(func(l *LaunchConfig) { l.Grid = D1(4); l.Cluster = Dim3{-2, 1, 1} }), a, b, c, uint32(64))
		}, "positive"},
		{"event on closed stream", func() error { return ev.Record(closedS) }, "closed"},
		{"event on other device's stream", func() error { return ev.Record(s2) }, "belongs to"},
	} {
		err := safely(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := d.Synchronize(); err != nil {
		t.Errorf("Synchronize after refused launches: %v", err)
	}
}

// TestProbeGraphAfterFree replays a captured vector_add after one of its buffers was freed
// (emulator): the replay or the wait after it fails naming the access, never a silent run.
func TestProbeGraphAfterFree(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mod, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Alloc[float32](d, 64)
	b, _ := Alloc[float32](d, 64)
	c, _ := Alloc[float32](d, 64)
	s, _ := d.NewStream()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(64), Stream: s}, a, b, c, uint32(64)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	err = x.Launch(s)
	if err == nil {
		err = s.Synchronize()
	}
	if err == nil {
		t.Fatal("a graph replayed after its output buffer was freed ran without an error")
	}
	t.Logf("replay after free: %v", err)
}

// TestProbeEventsGraphsHostile: events never recorded, closed, or of another device, and
// graph executables driven with bad indices, arguments, streams and after Close: each an
// error naming the problem, never a panic or a made-up time.
func TestProbeEventsGraphsHostile(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d2, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	mod, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Alloc[float32](d, 64)
	s, _ := d.NewStream()
	s2, _ := d2.NewStream()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	eo, _ := d2.NewEvent()
	closedE, _ := d.NewEvent()
	closedE.Close()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(64), Stream: s}, a, a, a, uint32(64)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	closedX, _ := g.Instantiate()
	closedX.Close()
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"Elapsed unrecorded", func() error { _, err := e0.Elapsed(e1); return err }, "record"},
		{"Elapsed other device", func() error { _, err := e0.Elapsed(eo); return err }, "another Open"},
		{"Elapsed closed", func() error { _, err := e0.Elapsed(closedE); return err }, "closed"},
		{"Record closed", func() error { return closedE.Record(s) }, "closed"},
		{"WaitEvent closed", func() error { return s.WaitEvent(closedE) }, "closed"},
		{"SetArgs -1", func() error { return x.SetArgs(-1, a, a, a, uint32(64)) }, "launch -1"},
		{"SetArgs 1", func() error { return x.SetArgs(1, a, a, a, uint32(64)) }, "launch 1 of a graph of 1"},
		{"SetArgs wrong", func() error { return x.SetArgs(0, a, a, a, float32(64)) }, "float32"},
		{"SetArgs closed", func() error { return closedX.SetArgs(0, a, a, a, uint32(64)) }, "closed"},
		{"Launch closed", func() error { return closedX.Launch(s) }, "closed"},
		{"Launch other device stream", func() error { return x.Launch(s2) }, "belongs to"},
		{"EndCapture not capturing", func() error { _, err := s.EndCapture(); return err }, "not capturing"},
		{"BeginCapture default", func() error { var ns *Stream; return ns.BeginCapture() }, "default stream"},
	} {
		err := safely(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
