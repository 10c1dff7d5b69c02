package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestVerifyHugeSizesNotMisstated: a size past the saturated arithmetic's cap is said to be
// "at least 2^50" (before: .shared .b8 s[2^62] was reported as 1125899906842624 bytes, a
// number the program never declared).
func TestVerifyHugeSizesNotMisstated(t *testing.T) {
	const h = ".version 8.1\n.target sm_90\n.address_size 64\n"
	for _, src := range []string{
		h + ".visible .entry k()\n{\n.shared .b8 s[4611686018427387904];\nret;\n}\n",
		h + ".shared .b8 g[4611686018427387904];\n.visible .entry k()\n{\nret;\n}\n",
		h + ".visible .entry k()\n{\n.local .b8 s[4611686018427387904];\nret;\n}\n",
		h + ".visible .entry k(.param .align 8 .b8 p[4611686018427387904])\n{\nret;\n}\n",
	} {
		m, err := ptx.Parse(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		err = ptx.Verify(m)
		if err == nil || !strings.Contains(err.Error(), "at least 2^50 bytes") || strings.Contains(err.Error(), "1125899906842624") {
			t.Errorf("%q: Verify = %v; want the size said as at least 2^50 bytes", src, err)
		}
	}
}
