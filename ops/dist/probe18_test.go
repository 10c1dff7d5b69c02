package dist

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// retyped views Comm buffer b's memory as a tensor of T (jit.BufferOf and ops.New, not
// dist.Tensor, which checks the type).
func retyped[T jit.Elem](b *collectives.Buffer) (ops.Tensor[T], error) {
	jb, err := jit.BufferOf[T](b.Memory(), b.Len())
	if err != nil {
		return ops.Tensor[T]{}, err
	}
	return ops.New(jb, b.Len())
}

// TestProbe18RetypedBuffer: a tensor of another element type of the same size over a Comm
// buffer (int32 over f32, f16 over bf16) is refused naming both types (the collective ran
// on the buffer's type: AllReduce of an int32 view summed its bits as f32, a silent wrong
// answer); probe 18.
func TestProbe18RetypedBuffer(t *testing.T) {
	runRanks(t, 2, false, func(c *collectives.Comm) error {
		ctx := context.Background()
		f32, err := c.Alloc(dsl.F32, 64)
		if err != nil {
			return err
		}
		defer f32.Free()
		bf, err := c.Alloc(dsl.BF16, 64)
		if err != nil {
			return err
		}
		defer bf.Free()
		i32, err := retyped[int32](f32)
		if err != nil {
			return err
		}
		f16, err := retyped[fp.F16](bf)
		if err != nil {
			return err
		}
		f16b, err := retyped[fp.F16](bf)
		if err != nil {
			return err
		}
		for _, x := range []struct {
			what string
			err  error
			want string
		}{
			{"int32 over f32", AllReduce(ctx, c, i32, collectives.Sum), "dist: AllReduce: dst is a tensor of s32 over a Comm buffer of f32: the element types must match"},
			{"f16 over bf16", AllReduceTo(ctx, c, f16, f16b, collectives.Max), "dist: AllReduce: dst is a tensor of f16 over a Comm buffer of bf16"},
			{"gather", AllGather(ctx, c, f16, f16b), "dist: AllGather: dst is a tensor of f16 over a Comm buffer of bf16"},
		} {
			if x.err == nil || !strings.Contains(x.err.Error(), x.want) {
				return fmt.Errorf("%s: %v; want an error holding %q", x.what, x.err, x.want)
			}
		}
		return nil
	})
}
