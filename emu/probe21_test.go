package emu

import (
	"strings"
	"testing"
)

// TestProbe21HugeModuleVariable: a .global variable of 2^62 bytes (or 2^61 .u64) was
// reported as "MallocSymmetric of 1099511627776 bytes", the decoder's saturated size, not
// what the module declares. The error names the declared size. Probe 21.
func TestProbe21HugeModuleVariable(t *testing.T) {
	for _, tc := range []struct{ decl, want string }{
		{".global .b8 g[4611686018427387904];", "g: 4611686018427387904 elements of 1 byte(s)"},
		{".global .u64 g[2305843009213693952];", "g: 2305843009213693952 elements of 8 byte(s)"},
	} {
		m := asm(t, tc.decl+`
.visible .entry k()
{
	.reg .u32 %r<2>;
	ld.global.u32 %r0, [g+16];
	ret;
}`)
		s := newSys(t, 1)
		err := launch1(s, m, "k", 1, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "MallocSymmetric of 1099511627776") {
			t.Errorf("%s: %v, want an error naming %q", tc.decl, err, tc.want)
		}
	}
}
