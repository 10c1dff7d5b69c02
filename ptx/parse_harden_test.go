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
		// Extents left out are 1, as Print writes them (so the module prints and parses back).
		if got := m.Funcs[0].ReqNTID; got != [3]int{16, 1, 1} {
			t.Errorf("%q: ReqNTID %v, want [16 1 1]", src, got)
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

// TestParseStrict: malformed PTX is refused with an error naming the line and what is wrong
// (these were accepted, printed as text Parse refused, or surfaced "slice bounds out of
// range"): names follow the identifier grammar, targets are known, parameters are typed.
func TestParseStrict(t *testing.T) {
	k := func(body string) string {
		return hdr + ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<4>;\n\t.reg .pred %p<2>;\n" + body + "\n}\n"
	}
	for _, c := range []struct{ src, want string }{
		{hdr + ".visible .entry )(.param .u64 p)\n{\nret;\n}\n", `function name ")" is not a PTX identifier`},
		{hdr + ".visible .entry )(\n{\nret;\n}\n", ""},
		{hdr + ".visible .entry 1k()\n{\nret;\n}\n", `function name "1k" is not a PTX identifier`},
		{hdr + ".visible .entry k(.param p)\n{\nret;\n}\n", "no type"},
		{hdr + ".visible .entry k(.param .u64)\n{\nret;\n}\n", "bad declaration"},
		{hdr + ".visible .entry k(.param .u64 p,)\n{\nret;\n}\n", "empty parameter"},
		{hdr + ".visible .entry k(.u64 p)\n{\nret;\n}\n", "no state space"},
		{hdr + ".visible .entry k(.param .u64 .u32 p)\n{\nret;\n}\n", "two types"},
		{".version 8.4\n.target _0\n.address_size 64\n", `unknown target "_0"`},
		{".version 8.4\n.target sm_90, debug\n.address_size 64\n", "target options"},
		{".version 8.4x\n.target sm_90\n.address_size 64\n", "bad .version"},
		{".version 8.10\n.target sm_90\n.address_size 64\n", "bad .version"},
		{k(":\n\tret;"), ""},
		{k("1L:\n\tret;"), `label "1L" is not a PTX identifier`},
		{k("\tmov.b32 %r1, 0"), "no ';'"},
		{k("\tmov.b32 %r9, 0;"), "beyond the 4 declared"},
		{k("\tmov.b32 %r01, 0;"), "bad register"},
		{k("\tmov.b32 %r1, 4294967296;"), "out of range for .b32"},
		{k("\tmov.b32 %r1, 1_0;"), "bad immediate"},
		{k("\tmov.b32 %r1, %r2,;"), "empty operand"},
		{k("\tmov.b32 {%r1}, %r2};"), "unbalanced"},
		{k("\tld.global.b32 %r1, [p+4+];"), "bad address"},
		{k("\t@%p1"), "no ';'"},
		{k("\t@%p1;"), "guard without an instruction"},
		{k("\tmov..b32 %r1, 0;"), "bad qualifier"},
		{k("\t.reg .b32 %q<2>;"), "two register prefixes for .b32"},
		{k("\t.reg .b32 %r<2>;"), "declared twice"},
		{k("\t.reg .b32 %r1<2>;"), "ending in a digit"},
		{k("\t.loc 1 2 0"), "no .file 1"},
		{hdr + ".global .b32 a[];\n", "only an .extern array"},
		{hdr + ".global .b32 a[3;\n", "bad array size"},
		{hdr + ".global .u8 a = 300;\n", "out of range for .u8"},
		{hdr + ".global .f32 a = 1;\n", "an integer"},
		{hdr + ".global .b32 a[2] = {1, 2, 3};\n", "3 initial values for 2 elements"},
		{hdr + ".global .align 3 .b32 a;\n", "bad .align"},
		{hdr + ".param .b32 a;\n", "at module scope"},
		{hdr + ".global .b32 a\n", "no ';'"},
		{hdr + ".func f();\n", "must be .extern"},
		{hdr + ".extern .func f()\n{\nret;\n}\n", "has no body"},
		{hdr + ".extern .visible .func f();\n", "one linking directive"},
		{hdr + ".entry (.param .b32 r) k()\n{\nret;\n}\n", "an .entry returns nothing"},
		{hdr + ".visible .entry k() .reqntid 4 .reqntid 8\n{\nret;\n}\n", "given twice"},
		{hdr + ".version 8.4\n", ".version given twice"},
	} {
		_, err := ptx.Parse(c.src)
		if err == nil {
			t.Errorf("%q: accepted", c.src)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "line ") || strings.Contains(msg, "runtime error") || !strings.Contains(msg, c.want) {
			t.Errorf("%q: %v; want an error naming the line, holding %q", c.src, err, c.want)
		}
	}
	// What is accepted prints as text that parses back to the same module.
	m, err := ptx.Parse(hdr + ".global .s8 a[2] = {255, -1};\n.global .f32 b = 1.5;\n.visible .entry k(.param .u64 p) .reqntid 32\n{\n\t.reg .s32 %r<2>;\n\tmov.s32 %r1, 0xFFFFFFFF;\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ptx.Parse(m.String())
	if err != nil || m2.String() != m.String() {
		t.Fatalf("round trip: %v\n%s", err, m.String())
	}
	if got := m.Vars[0].Init; got[0] != got[1] {
		t.Errorf(".s8 255 and -1 are the same bits, got %#x and %#x", got[0], got[1])
	}
}
