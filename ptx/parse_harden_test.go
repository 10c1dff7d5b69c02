package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

const hdr = ".version 8.4\n.target sm_90a\n.address_size 64\n\n"

// TestParseHeaderDirectives checks that directives written after the parameter list, on the
// header's line, are read (not dropped) and that unknown ones are refused.
func TestParseHeaderDirectives(t *testing.T) {
	for _, src := range []string{
		".visible .entry k(.param .u64 p) .reqntid 16\n{\nret;\n}\n",
		".visible .entry k(.param .u64 p) .reqntid 16 {\nret;\n}\n",
		".visible .entry k(\n.param .u64 p\n) .reqntid 16, 1\n.minnctapersm 2\n{\nret;\n}\n",
		".visible .entry k(.param .u64 p) .maxntid 8 .reqntid 16 .minnctapersm 2\n{\nret;\n}\n",
	} {
		m, err := ptx.Parse(hdr + src)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if got := m.Funcs[0].ReqNTID; got != [3]int{16, 0, 0} && got != [3]int{16, 1, 0} {
			t.Errorf("%q: ReqNTID %v, want 16", src, got)
		}
	}
	for _, c := range []struct{ src, want string }{
		{".visible .entry k(.param .u64 p) .bogus 3\n{\nret;\n}\n", `unknown directive ".bogus"`},
		{".visible .entry k(.param .u64 p) junk\n{\nret;\n}\n", `unknown directive "junk"`},
		{".visible .entry k(.param .u64 p) .reqntid x\n{\nret;\n}\n", "not a positive integer"},
		{".visible .entry k(.param .u64 p) .reqntid 1, 2, 3, 4\n{\nret;\n}\n", "1 to 3 extents"},
		{".visible .entry k(.param .u64 p)\n.reqntid 0\n{\nret;\n}\n", "not a positive integer"},
		{".visible .entry k(.param .u64 p) { ret;\n}\n", "after the body's {"},
	} {
		_, err := ptx.Parse(hdr + c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// TestParseQualifierOrders checks that qualifier orders ptxas accepts (it takes any order)
// parse into the IR's slot order and verify.
func TestParseQualifierOrders(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"multimem.ld_reduce.sys.relaxed.global.add.f32 %f1, [%rd1];", "multimem.ld_reduce.relaxed.sys.global.add.f32"},
		{"multimem.ld_reduce.global.relaxed.sys.add.f32 %f1, [%rd1];", "multimem.ld_reduce.relaxed.sys.global.add.f32"},
		{"ld.global.relaxed.gpu.u32 %r1, [%rd1];", "ld.relaxed.gpu.global.u32"},
		{"atom.gpu.relaxed.global.add.u32 %r1, [%rd1], 1;", "atom.relaxed.gpu.global.add.u32"},
		{"ld.relaxed.gpu.global.u32 %r1, [%rd1];", "ld.relaxed.gpu.global.u32"},
	} {
		src := hdr + ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<3>;\n.reg .f32 %f<3>;\n" +
			"ld.param.u64 %rd1, [p];\n" + c.in + "\nret;\n}\n"
		m, err := ptx.Parse(src)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if err := ptx.Verify(m); err != nil {
			t.Errorf("%s: Verify: %v", c.in, err)
		}
		if out := m.String(); !strings.Contains(out, c.want+" ") {
			t.Errorf("%s: printed\n%s\nwant %s", c.in, out, c.want)
		}
	}
}
