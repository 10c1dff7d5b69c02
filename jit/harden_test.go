package jit

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// wantErr fails unless err holds every fragment.
func wantErr(t *testing.T, what string, err error, frags ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one holding %q", what, frags)
		return
	}
	for _, f := range frags {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q, want it to hold %q", what, err, f)
		}
	}
}

// TestAbsurdAllocs checks that sizes that overflow or exceed the device's memory are errors
// quoting the size asked for, before anything is allocated.
func TestAbsurdAllocs(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := Alloc[float32](d, 1<<62+4)
	wantErr(t, "Alloc[float32](1<<62+4)", err, "4611686018427387908", "overflow")
	if b != nil {
		t.Errorf("Alloc[float32](1<<62+4) returned a buffer of Len %d", b.Len())
	}
	_, err = Alloc[float32](d, 1<<62)
	wantErr(t, "Alloc[float32](1<<62)", err, "4611686018427387904")
	_, err = Alloc[float64](d, -1)
	wantErr(t, "Alloc[float64](-1)", err, "must be positive")
	_, err = d.Alloc(1 << 50)
	wantErr(t, "Alloc(1<<50)", err, "1125899906842624 bytes", "more than the")
	_, err = Alloc[float32](d, 1<<40)
	wantErr(t, "Alloc[float32](1<<40)", err, "4398046511104 bytes", "more than the")
	m, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	_, err = BufferOf[float32](m, 1<<62+4)
	wantErr(t, "BufferOf(1<<62+4)", err, "do not fit")
	_, err = BufferOf[float32](m, -1)
	wantErr(t, "BufferOf(-1)", err, "do not fit")
	if err := m.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestSymAllocAbsurd checks symmetric allocations beyond memory fail on every rank with an
// error, and that the heap still works after.
func TestSymAllocAbsurd(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		if _, err := SymAlloc[float32](r.NVSHMEM, 1<<37); err == nil || !strings.Contains(err.Error(), "549755813888 bytes") {
			return errors.New("SymAlloc[float32](1<<37): " + errString(err))
		}
		if _, err := SymAlloc[float32](r.NVSHMEM, 1<<62+4); err == nil || !strings.Contains(err.Error(), "overflow") {
			return errors.New("SymAlloc[float32](1<<62+4): " + errString(err))
		}
		b, err := SymAlloc[float32](r.NVSHMEM, 16)
		if err != nil {
			return err
		}
		return b.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestClosedDevice checks that a closed Device refuses work, saying closed.
func TestClosedDevice(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc(16)
	wantErr(t, "Alloc", err, "Alloc", "closed")
	_, err = Alloc[float32](d, 4)
	wantErr(t, "Alloc[float32]", err, "closed")
	_, err = d.Load(Source{Module: mod})
	wantErr(t, "Load", err, "Load", "closed")
	_, err = d.NewStream()
	wantErr(t, "NewStream", err, "NewStream", "closed")
	_, err = d.NewEvent()
	wantErr(t, "NewEvent", err, "NewEvent", "closed")
	wantErr(t, "CopyHtoD", d.CopyHtoD(0, []byte{1}), "closed")
	wantErr(t, "Synchronize", d.Synchronize(), "closed")
	if !errors.Is(d.Synchronize(), ErrClosed) {
		t.Error("the error is not ErrClosed")
	}
	if err := d.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestNilReceivers checks that nil receivers and arguments are errors, not panics.
func TestNilReceivers(t *testing.T) {
	t.Run("every method", nilMethods)
	var d *Device
	wantErr(t, "nil Device.Close", d.Close(), "nil *Device")
	_, err := d.Alloc(4)
	wantErr(t, "nil Device.Alloc", err, "nil *Device")
	_, err = Alloc[float32](d, 4)
	wantErr(t, "Alloc[float32] on a nil Device", err, "nil *Device")
	_, err = d.Load(Source{})
	wantErr(t, "nil Device.Load", err, "nil *Device")
	var f *Function
	wantErr(t, "nil Function.Launch", f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}), "nil *Function")
	wantErr(t, "nil Function.LaunchArgs", f.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(1)}, struct{}{}), "nil *Function")
	var b *Buffer[float32]
	wantErr(t, "nil Buffer.Free", b.Free(), "nil *Buffer")
	var m *Memory
	wantErr(t, "nil Memory.Free", m.Free(), "nil *Memory")
	_, err = BufferOf[float32](nil, 1)
	wantErr(t, "BufferOf(nil)", err, "nil *Memory")
	var s *Stream
	wantErr(t, "nil Stream.Synchronize", s.Synchronize(), "nil *Stream")
	wantErr(t, "nil Stream.Close", s.Close(), "nil *Stream")
	var e *Event
	wantErr(t, "nil Event.Close", e.Close(), "nil *Event")
	_, err = EncodeArgs(nil, []any{1})
	wantErr(t, "EncodeArgs(nil)", err, "nil")

	dev, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ev, err := dev.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Record(nil); err != nil {
		t.Fatal(err)
	}
	_, err = ev.Elapsed(nil)
	wantErr(t, "Event.Elapsed(nil)", err, "non-nil")
}

// TestLaunchRanksStops checks how LaunchRanks reports a launch it stopped: Timeout exits 124
// naming the ranks still running, a SignalError cause 128+signal, too many ranks and a nil
// context are errors before anything starts.
func TestLaunchRanksStops(t *testing.T) {
	code, err := LaunchRanks(context.Background(), LaunchOptions{N: 2, Prog: "sh", Args: []string{"-c", `test "$RANK" = 0 && exit 0; sleep 30`},
		Timeout: 300 * time.Millisecond, Grace: 300 * time.Millisecond})
	if code != 124 || err == nil || !strings.Contains(err.Error(), "ranks still running: 1") || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("Timeout: code %d, err %v", code, err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(300*time.Millisecond, func() { cancel(&SignalError{Signal: syscall.SIGTERM}) })
	code, err = LaunchRanks(ctx, LaunchOptions{N: 2, Prog: "sleep", Args: []string{"30"}, Grace: 300 * time.Millisecond})
	if code != 143 || err == nil || !strings.Contains(err.Error(), "ranks still running: 0, 1") {
		t.Errorf("SIGTERM: code %d, err %v", code, err)
	}
	if code, err := LaunchRanks(context.Background(), LaunchOptions{N: 9999999999, Prog: "true"}); code != 2 || err == nil || !strings.Contains(err.Error(), "9999999999") {
		t.Errorf("N 9999999999: code %d, err %v", code, err)
	}
	//lint:ignore SA1012 a nil context is the misuse tested
	if code, err := LaunchRanks(nil, LaunchOptions{N: 1, Prog: "true"}); code != 2 || err == nil { //nolint:staticcheck
		t.Errorf("nil context: code %d, err %v", code, err)
	}
}

// TestCoResidentLaunch checks that a launch whose blocks wait on each other (CoResident) is
// refused when the grid cannot be resident at once, naming the limit, and runs when it can.
func TestCoResidentLaunch(t *testing.T) {
	k := dsl.New("coresident", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	k.SharedArray(dsl.U32, 2048) // 8 KiB of static shared memory
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { k.Reduce(dsl.AtomAdd, p, uint32(1)) })
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
	f, err := m.Function("coresident")
	if err != nil {
		t.Fatal(err)
	}
	buf, err := Alloc[uint32](d, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 16 emulated SMs x 8 blocks of 256 threads (2048 threads per SM).
	err = f.Launch(LaunchConfig{Grid: D1(129), Block: D1(256), CoResident: true}, buf)
	wantErr(t, "129 blocks of 256", err, "129 blocks", "at most 128", "16 SMs x 8 blocks", "2048 threads per SM")
	// 8 KiB static + 100 KiB dynamic + 1 KiB reserved: 2 blocks per SM.
	err = f.Launch(LaunchConfig{Grid: D1(33), Block: D1(32), SharedMem: 100 << 10, CoResident: true}, buf)
	wantErr(t, "33 blocks with 108 KiB of shared memory", err, "at most 32", "shared memory per SM")
	if err := f.Launch(LaunchConfig{Grid: D1(33), Block: D1(256)}, buf); err != nil {
		t.Fatalf("without CoResident: %v", err)
	}
	if err := f.Launch(LaunchConfig{Grid: D1(128), Block: D1(256), CoResident: true}, buf); err != nil {
		t.Fatalf("128 co-resident blocks: %v", err)
	}
	got := make([]uint32, 1)
	if err := buf.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 33+128 {
		t.Errorf("the blocks counted %d, want %d", got[0], 33+128)
	}
}
