package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe13ZeroComm: the methods of a Comm that New did not make (Comm{}) return an error
// saying so (Barrier and Alloc panicked: nil pointer; NewMoE complained of its configuration, Capture
// that the Comm was not capture-safe, BufferOf of the memory, and Close returned nil and
// marked it closed, after which every call read 'the Comm is closed'); a nil *Comm still
// reads "nil *Comm" (probe 13).
func TestProbe13ZeroComm(t *testing.T) {
	ctx := context.Background()
	var c *Comm
	calls := map[string]func() error{
		"Barrier":   func() error { return c.Barrier(ctx) },
		"AllReduce": func() error { return c.AllReduce(ctx, nil, Sum) },
		"Alloc":     func() error { _, err := c.Alloc(dsl.F32, 8); return err },
		"BufferOf":  func() error { _, err := c.BufferOf(nil); return err },
		"NewMoE":    func() error { _, err := c.NewMoE(ctx, MoEConfig{}); return err },
		"Capture":   func() error { _, err := c.Capture(ctx, func() error { return nil }); return err },
		"Close":     func() error { return c.Close() },
	}
	for name, call := range calls {
		c = &Comm{}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s of a zero Comm panicked: %v", name, r)
				}
			}()
			if err := call(); err == nil || !strings.Contains(err.Error(), "zero Comm") || !strings.Contains(err.Error(), name) {
				t.Errorf("%s of a zero Comm: %v; want an error naming the call and the zero Comm", name, err)
			}
		}()
	}
	c = nil
	if err := c.Barrier(ctx); err == nil || !strings.Contains(err.Error(), "nil *Comm") {
		t.Errorf("Barrier of a nil *Comm: %v", err)
	}
}

// TestProbe13AllocZeroType: Alloc of the zero Type names it (the message read 'element type
// is not supported', the type printing as nothing; probe 13).
func TestProbe13AllocZeroType(t *testing.T) {
	runRanks(t, 1, false, false, 1, Options{}, func(e *rankEnv) error {
		b, err := e.c.Alloc(0, 8)
		if err == nil {
			b.Free()
			return fmt.Errorf("Alloc of the zero Type made a buffer")
		}
		if !strings.Contains(err.Error(), "element type (the zero Type) is not supported") {
			return fmt.Errorf("Alloc of the zero Type: %v; want it named", err)
		}
		return nil
	})
}

// TestProbe13TargetNamed: an Options.Target kgen does not know is refused naming the field
// and the known targets, quoting an excerpt of a long value (it read 'collectives: unknown
// target "sm_99"', naming no field, and quoted a 10 KB value whole; probe 13).
func TestProbe13TargetNamed(t *testing.T) {
	runRanks(t, 1, false, false, 1, Options{}, func(e *rankEnv) error {
		for _, tgt := range []string{"sm_99", strings.Repeat("s", 10000)} {
			o := Options{Target: ptx.Target(tgt), Logger: e.c.o.Logger}
			c, err := New(context.Background(), e.r, o)
			if err == nil {
				c.Close()
				return fmt.Errorf("Target %.20q: a Comm", tgt)
			}
			if msg := err.Error(); !strings.Contains(msg, "Options.Target") || !strings.Contains(msg, "sm_90a") || len(msg) > 500 {
				return fmt.Errorf("Target %.20q: %.300v (%d bytes); want the field and the known targets named, briefly", tgt, err, len(msg))
			}
		}
		return nil
	})
}
