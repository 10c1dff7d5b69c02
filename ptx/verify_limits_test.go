package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestVerifyMemoryLimits: Verify refuses what ptxas (CUDA 13) or the GPU refuses: more than
// 48 KiB of static shared memory in a kernel, more than 512 KiB of local memory per thread
// (the driver refuses the launch; the emulator too), and kernel parameters over 4352 bytes
// (PTX before 8.1) or 32764 (8.1 and later); it passes the limits themselves.
func TestVerifyMemoryLimits(t *testing.T) {
	const h80 = ".version 8.0\n.target sm_90\n.address_size 64\n"
	const h81 = ".version 8.1\n.target sm_90\n.address_size 64\n"
	for _, c := range []struct {
		src  string
		want string // "" : valid
	}{
		{h80 + ".visible .entry k()\n{\n.shared .b8 s[49152];\nret;\n}\n", ""},
		{h80 + ".visible .entry k()\n{\n.shared .b8 s[49153];\nret;\n}\n", "static shared"},
		{h80 + ".visible .entry k()\n{\n.shared .b8 s[4294967296];\nret;\n}\n", "static shared"},
		{h80 + ".visible .entry k()\n{\n.shared .b8 s[32768];\n.shared .b32 t[4097];\nret;\n}\n", "static shared"},
		{h80 + ".shared .b8 g[65536];\n.visible .entry k()\n{\nret;\n}\n", "static shared"},
		{h80 + ".visible .entry k()\n{\n.shared .b8 s[32768];\n.extern .shared .b8 d[];\nret;\n}\n", ""},
		{h80 + ".visible .entry k()\n{\n.local .b8 s[524288];\nret;\n}\n", ""},
		{h80 + ".visible .entry k()\n{\n.local .b8 s[1099511627776];\nret;\n}\n", "local memory"},
		{h80 + ".visible .entry k()\n{\n.local .b64 s[65536];\n.local .b8 t[1];\nret;\n}\n", "local memory"},
		{h80 + ".visible .entry k(.param .align 4 .b8 p[4352])\n{\nret;\n}\n", ""},
		{h80 + ".visible .entry k(.param .align 4 .b8 p[4353])\n{\nret;\n}\n", "4352"},
		{h80 + ".visible .entry k(.param .u8 a, .param .align 8 .b8 p[4345])\n{\nret;\n}\n", "4352"}, // 1, 7 of padding, 4345
		{h81 + ".visible .entry k(.param .align 4 .b8 p[32764])\n{\nret;\n}\n", ""},
		{h81 + ".visible .entry k(.param .align 4 .b8 p[32765])\n{\nret;\n}\n", "32764"},
		{h81 + ".visible .entry k(.param .align 8 .b8 p[1099511627776])\n{\nret;\n}\n", "32764"},
	} {
		m, err := ptx.Parse(c.src)
		if err != nil {
			t.Errorf("%q: parse: %v", c.src, err)
			continue
		}
		err = ptx.Verify(m)
		if c.want == "" && err != nil {
			t.Errorf("%q: Verify = %v; want nil", c.src, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: Verify = %v; want an error with %q", c.src, err, c.want)
		}
	}
}
