package jit

import (
	"errors"
	"testing"
)

// Every use of a closed stream, event or device is an error wrapping ErrClosed that names
// what was closed (they returned nil, or reached a destroyed backend object).
func TestUseAfterClose(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, fn := loadFunc(t, d, bumpKernel(t), "bump")
	buf, err := Alloc[uint32](d, 64)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Stream.Close: %v", err)
	}
	host := make([]uint32, 64)
	closed := func(what string, err error, frag string) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s: err = %v, want ErrClosed", what, err)
		}
		wantErr(t, what, err, frag)
	}
	closed("launch", fn.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}, Stream: s}, buf, uint32(64), uint32(1)), "the stream is closed")
	closed("LaunchArgs", fn.LaunchArgs(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}, Stream: s}, bumpArgs{P: buf.Ptr(), N: 64, Delta: 1}), "the stream is closed")
	closed("Stream.Synchronize", s.Synchronize(), "Stream.Synchronize: the stream is closed")
	closed("Stream.CopyHtoD", s.CopyHtoD(buf.DevPtr(), make([]byte, 4)), "the stream is closed")
	closed("Stream.CopyDtoH", s.CopyDtoH(make([]byte, 4), buf.DevPtr()), "the stream is closed")
	closed("Stream.CopyDtoD", s.CopyDtoD(buf.DevPtr(), buf.DevPtr(), 4), "the stream is closed")
	closed("CopyFromHostAsync", buf.CopyFromHostAsync(host, s), "the stream is closed")
	closed("CopyToHostAsync", buf.CopyToHostAsync(host, s), "the stream is closed")
	closed("CopyFromAsync", buf.CopyFromAsync(buf, s), "the stream is closed")
	closed("BeginCapture", s.BeginCapture(), "BeginCapture: the stream is closed")
	closed("Event.Record on a closed stream", ev.Record(s), "the stream is closed")
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	closed("Event.Record", ev.Record(nil), "Event.Record: the event is closed")
	closed("Event.Synchronize", ev.Synchronize(), "the event is closed")

	// A stream whose device is closed, and a tensor map on a closed device.
	d2, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := d2.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := Alloc[uint16](d2, 64*64)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	closed("Stream.Synchronize after Device.Close", s2.Synchronize(), "is closed")
	closed("CopyFromHost after Device.Close", b2.CopyFromHost(make([]uint16, 4)), "CopyFromHost")
	_, err = NewTensorMap(b2, []uint64{64, 64}, []uint64{128}, []uint32{64, 8}, SwizzleNone)
	closed("NewTensorMap after Device.Close", err, "NewTensorMap")
}

// Copies into, out of or from a freed buffer are errors, not writes to freed memory.
func TestCopyFreedBuffer(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, _ := Alloc[float32](d, 8)
	b, _ := Alloc[float32](d, 8)
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	host := make([]float32, 8)
	wantErr(t, "CopyFromHost into a freed buffer", b.CopyFromHost(host), "freed")
	wantErr(t, "CopyToHost from a freed buffer", b.CopyToHost(host), "freed")
	wantErr(t, "CopyFrom a freed buffer", a.CopyFrom(b), "source buffer was freed")
	wantErr(t, "CopyFrom into a freed buffer", b.CopyFrom(a), "freed")
	wantErr(t, "CopyFrom nil", a.CopyFrom(nil), "nil")
	var nb *Buffer[float32]
	wantErr(t, "CopyFromHost into nil", nb.CopyFromHost(host), "nil *Buffer")
}
