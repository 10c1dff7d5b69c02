package jit

import (
	"errors"
	"testing"
)

// TestForeignStream: a launch, a buffer copy or an event record on a stream of another
// device is an error naming both devices (the work would go to the wrong device's queue).
func TestForeignStream(t *testing.T) {
	// Two Opens of the emulator's GPU 0 are two devices (the process's machine may have one
	// GPU: other tests opened it first).
	d0, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.Close()
	d1, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	m, err := d0.Load(Source{Module: bumpKernel(t)})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := m.Function("bump")
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := Alloc[uint32](d0, 64)
	buf2, _ := Alloc[uint32](d0, 64)
	s1, err := d1.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ev0, _ := d0.NewEvent()
	host := make([]uint32, 64)
	for _, c := range []struct {
		what string
		err  error
	}{
		{"Launch", fn.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}, Stream: s1}, buf, uint32(64), uint32(1))},
		{"LaunchArgs", fn.LaunchArgs(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}, Stream: s1}, bumpArgs{P: buf.Ptr(), N: 64, Delta: 1})},
		{"CopyFromHostAsync", buf.CopyFromHostAsync(host, s1)},
		{"CopyToHostAsync", buf.CopyToHostAsync(host, s1)},
		{"CopyFromAsync", buf.CopyFromAsync(buf2, s1)},
		{"Event.Record", ev0.Record(s1)},
	} {
		wantErr(t, c.what, c.err, "the stream belongs to another Open of emu device 0")
		wantErr(t, c.what, c.err, "the work to emu device 0")
	}
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	// Events of two devices: no elapsed time between them.
	ev1, _ := d1.NewEvent()
	if err := ev1.Record(s1); err != nil {
		t.Fatal(err)
	}
	if err := ev0.Record(nil); err != nil {
		t.Fatal(err)
	}
	if err := ev0.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := ev1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	_, err = ev0.Elapsed(ev1)
	wantErr(t, "Event.Elapsed", err, "the end event to another Open of emu device 0")
}

// TestFreeAfterClose: Memory.Free after Device.Close reports the closed device
// (ErrClosed), never reaching the backend.
func TestFreeAfterClose(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Alloc[float32](d, 64)
	if b.Freed() {
		t.Error("a live buffer reports Freed")
	}
	d.Close()
	if err := b.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("Free after Device.Close = %v; want ErrClosed", err)
	}
	d2, _ := OpenBackend(Emulator, 0)
	defer d2.Close()
	c, _ := Alloc[float32](d2, 64)
	if err := c.Free(); err != nil || !c.Freed() {
		t.Errorf("Free = %v, Freed %v", err, c.Freed())
	}
	var nb *Buffer[float32]
	if !nb.Freed() {
		t.Error("a nil buffer is not Freed")
	}
}

// TestWaitEventClosed: WaitEvent on a closed stream or of a closed event is an error
// wrapping ErrClosed (it reached the destroyed backend objects).
func TestWaitEventClosed(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	ev, _ := d.NewEvent()
	if err := s.WaitEvent(ev); err != nil {
		t.Fatal(err)
	}
	ev.Close()
	if err := s.WaitEvent(ev); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitEvent of a closed event = %v", err)
	}
	ev2, _ := d.NewEvent()
	s.Close()
	if err := s.WaitEvent(ev2); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitEvent on a closed stream = %v", err)
	}
}
