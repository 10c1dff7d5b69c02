package ops

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/kernels"
)

// TestProbe12GroupedConfigPartial: a GroupedMatmulOptions.Config set in part, its BN left
// zero, is refused naming the field (before: BN 0 meant "no Config", so the fields set,
// stages or a band order, were dropped without a word and the library's pick ran); a
// masked Stride below 1 names GroupedMatmulOptions.Stride.
func TestProbe12GroupedConfigPartial(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	mk := func(shape ...int) Tensor[fp.BF16] { return zerosBF16(t, d, shape...) }
	offs, err := New(uploadInts(t, d, []int32{0, 8, 16}), 3)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := New(uploadInts(t, d, []int32{8, 8}), 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b, out := mk(16, 32), mk(2, 32, 16), mk(16, 16)
	part := func(f func(c *kernels.GemmSM90GroupedConfig)) *GroupedMatmulOptions[fp.BF16] {
		o := &GroupedMatmulOptions[fp.BF16]{Alpha: 1}
		f(&o.Config)
		return o
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"stages only", GroupedMatmul(ctx, nil, out, a, b, offs, part(func(c *kernels.GemmSM90GroupedConfig) { c.Stages = 3 })), "GroupedMatmulOptions.Config"},
		{"band only", GroupedMatmul(ctx, nil, out, a, b, offs, part(func(c *kernels.GemmSM90GroupedConfig) { c.BandM = 4 })), "GroupedMatmulOptions.Config"},
		{"types only", GroupedMatmul(ctx, nil, out, a, b, offs, part(func(c *kernels.GemmSM90GroupedConfig) { c.In, c.Out = dsl.BF16, dsl.BF16 })), "GroupedMatmulOptions.Config"},
		{"stride 0", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, &GroupedMatmulOptions[fp.BF16]{Alpha: 1, Counts: counts}), "GroupedMatmulOptions.Stride 0"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestProbe12MaskedStrideWrap: a masked Stride whose product with the group count wraps 64
// bits is refused naming the stride (Stride 2^62 x 2 groups is 2^63, negative: it fit any
// rows and reached the kernels cut to 32 bits, stride 0: every group's rows at row 0).
func TestProbe12MaskedStrideWrap(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	mk := func(shape ...int) Tensor[fp.BF16] { return zerosBF16(t, d, shape...) }
	counts, err := New(uploadInts(t, d, []int32{8, 8}), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, stride := range []int{1 << 62, 1<<63 - 1} {
		err := GroupedMatmul(ctx, nil, mk(16, 16), mk(16, 32), mk(2, 32, 16), Tensor[int32]{}, &GroupedMatmulOptions[fp.BF16]{Alpha: 1, Counts: counts, Stride: stride})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("Stride %d", stride)) {
			t.Errorf("GroupedMatmul stride %d: %v; want an error naming the stride", stride, err)
		}
		err = SwiGLU(ctx, nil, mk(16, 16), mk(16, 32), &SwiGLUOptions{Counts: counts, Stride: stride})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("Stride %d", stride)) {
			t.Errorf("SwiGLU stride %d: %v; want an error naming the stride", stride, err)
		}
	}
}
