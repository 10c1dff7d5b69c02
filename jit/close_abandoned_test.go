package jit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/ptx"
)

// spinStore is a kernel that never ends but stores on every iteration, so the emulator never
// reports it as stuck.
const spinStore = `.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
.reg .b64 %rd<2>;
.reg .b32 %r<2>;
ld.param.u64 %rd0, [p];
mov.u32 %r0, 0;
L:
add.u32 %r0, %r0, 1;
st.global.u32 [%rd0], %r0;
bra L;
}
`

// TestCloseAfterAbandonedLaunch: Device.Close ends the launches whose LaunchConfig.Context
// has ended instead of waiting for them forever (before: after Synchronize gave up at the
// deadline, Close hung on the never-ending kernel; Close has no context of its own).
func TestCloseAfterAbandonedLaunch(t *testing.T) {
	m, err := ptx.Parse(spinStore)
	if err != nil {
		t.Fatal(err)
	}
	for _, waited := range []bool{true, false} {
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
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if err := f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1), Context: ctx}, b); err != nil {
			t.Fatal(err)
		}
		if waited {
			if err := d.Synchronize(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Synchronize = %v; want the launch's deadline", err)
			}
		} else {
			<-ctx.Done()
		}
		cancel()
		closed := make(chan error, 1)
		go func() { closed <- d.Close() }()
		select {
		case err := <-closed:
			if !waited && (err == nil || !strings.Contains(err.Error(), "ended by Device.Close")) {
				t.Errorf("Close of an unwaited abandoned launch = %v; want it to say it ended the kernel", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("waited %v: Device.Close still waits for a launch whose context ended 20 s ago", waited)
		}
	}
}
