package collectives

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// TestBufferOf checks the lookup package ops/dist makes tensors' memory into Buffers with:
// a live buffer's memory gives it back, other memory, a freed buffer's and a closed
// Comm's do not.
func TestBufferOf(t *testing.T) {
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		b, err := e.c.Alloc(dsl.BF16, 40)
		if err != nil {
			return err
		}
		m := b.Memory()
		if m == nil || m.DevPtr() != b.DevPtr() || m.Size() < int64(b.Bytes()) {
			return fmt.Errorf("Memory() = %v; want the %d-byte allocation at %#x", m, b.Bytes(), b.DevPtr())
		}
		if got, err := e.c.BufferOf(m); got != b || err != nil {
			return fmt.Errorf("BufferOf(its memory) = %p, %v; want the buffer", got, err)
		}
		plain, err := e.r.Device.Alloc(64)
		if err != nil {
			return err
		}
		defer plain.Free()
		for _, x := range []*jit.Memory{plain, nil} {
			if _, err := e.c.BufferOf(x); err == nil || !strings.Contains(err.Error(), "no live Buffer of this Comm") {
				return fmt.Errorf("BufferOf(other memory): %v", err)
			}
		}
		if err := b.Free(); err != nil {
			return err
		}
		if b.Memory() != nil {
			return fmt.Errorf("a freed buffer's Memory() is not nil")
		}
		if _, err := e.c.BufferOf(m); err == nil {
			return fmt.Errorf("BufferOf(a freed buffer's memory) succeeded")
		}
		return nil
	})
}
