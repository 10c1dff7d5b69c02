package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbeConfigsHostile passes hostile fields to the library's configurations' Check:
// each is an error naming the field's rule, never a panic or an acceptance of a kernel that
// cannot launch (more than 1024 threads, more shared memory than a block has, sizes whose
// arithmetic overflows).
func TestProbeConfigsHostile(t *testing.T) {
	g := DefaultGemmConfig(dsl.BF16)
	s := DefaultGemmSM90Config(dsl.BF16)
	a := DefaultAttentionConfig(dsl.BF16, 128, false)
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"gemm 2048 threads", func() error { c := g; c.WarpsM, c.WarpsN = 8, 8; return c.Check() }, "threads"},
		{"gemm warps overflow", func() error { c := g; c.WarpsM, c.BM = 1<<59, 1<<62; return c.Check() }, "warps"},
		{"gemm huge tiles", func() error { c := g; c.BM, c.BN = 1<<20, 1<<20; return c.Check() }, "shared memory"},
		{"gemm tiles overflow", func() error { c := g; c.BM, c.BN = 1<<40, 1<<40; return c.Check() }, "shared memory"},
		{"gemm stages huge", func() error { c := g; c.Stages = 1 << 40; return c.Check() }, "stages"},
		{"gemm negative IssueAfter", func() error { c := g; c.IssueAfter = -1; return c.Check() }, "IssueAfter"},
		{"fused 2048 threads", func() error { c := g; c.WarpsM, c.WarpsN = 8, 8; return FusedCheck(c) }, "threads"},
		{"sm90 zero", func() error { return GemmSM90Config{}.Check() }, "input type"},
		{"sm90 stages overflow", func() error { c := s; c.Stages = 1 << 61; return c.Check() }, "stages"},
		{"attention BM overflow", func() error { c := a; c.BM = 1 << 62; return c.Check() }, "BM"},
		{"attention BM 2^30", func() error { c := a; c.BM = 1 << 30; return c.Check() }, "shared memory"},
		{"attention zero", func() error { return AttentionConfig{}.Check() }, "input type"},
		{"attention shape overflow", func() error { return a.CheckShape(1<<40, 1<<40, 1, 1, 1) }, "2^31"},
		{"attention kv heads 0", func() error { return a.CheckShape(1, 8, 0, 1, 1) }, "positive"},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = tc.f()
		}()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
