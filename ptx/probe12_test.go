package ptx

import (
	"strings"
	"testing"
)

// TestProbe12VerifyGaps: modules ptxas refuses, which Parse and Verify accepted (and the
// emulator then loaded): a barrier number past 15 as an immediate (bar.sync 16, bar.arrive,
// bar.red, barrier.sync; the emulator failed them only when run, calling it "barrier
// divergence"), more than 64 KiB of .const data (ptxas: "too much global constant data"),
// performance directives or an .align past 32 bits ("Constant overflow"), .reqntid with
// .maxntid ("Conflicting directives"), and hexadecimal float literals of the wrong length
// (0f3F80: ptxas reads exactly 8 digits after 0f and 16 after 0d; Parse took 0f3F80 as
// 0f00003F80). Each is now an error naming it; the limits themselves still pass. The
// cases were checked against ptxas 13.0 by hand (running it here takes seconds a case).
func TestProbe12VerifyGaps(t *testing.T) {
	h := ".version 8.4\n.target sm_90\n.address_size 64\n"
	k := func(body string) string {
		return h + ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\t.reg .f64 %fd<2>;\n\t.reg .pred %p<2>;\n" + body + "\n\tret;\n}\n"
	}
	cases := []struct {
		src, want string // want: "" for a legal module
	}{
		{k("\tbar.sync 16;"), "[0, 15]"},
		{k("\tbar.sync 99999999999;"), "[0, 15]"},
		{k("\tbar.sync 16, 64;"), "[0, 15]"},
		{k("\tbar.arrive 16, 32;"), "[0, 15]"},
		{k("\tbarrier.sync 16;"), "[0, 15]"},
		{k("\tbarrier.sync.aligned 31, 32;"), "[0, 15]"},
		{k("\tbarrier.arrive 16, 32;"), "[0, 15]"},
		{k("\tbar.red.popc.u32 %r1, 16, %p1;"), "[0, 15]"},
		{k("\tbar.sync 15;"), ""},
		{k("\tbar.arrive 15, 32;\n\tbar.sync %r1;"), ""},
		{h + ".const .b8 s[65537];\n", "64 KiB"},
		{h + ".const .b64 s[268435456];\n", "64 KiB"},
		{h + ".const .b8 s[65536];\n.const .b8 t[1];\n", "64 KiB"},
		{h + ".const .b8 s[65536];\n", ""},
		{h + ".const .b8 s[32768];\n.const .b32 t[8192];\n", ""},
		{h + ".visible .entry k()\n.reqntid 4294967296, 1, 1\n{\n\tret;\n}\n", ".reqntid"},
		{h + ".visible .entry k()\n.maxntid 64, 4294967296\n{\n\tret;\n}\n", ".maxntid"},
		{h + ".visible .entry k()\n.maxntid 64\n.minnctapersm 4294967296\n{\n\tret;\n}\n", ".minnctapersm"},
		{h + ".visible .entry k()\n.maxntid 64\n.reqntid 64\n{\n\tret;\n}\n", ".maxntid and .reqntid"},
		{h + ".visible .entry k()\n.maxntid 4294967295, 1, 1\n.minnctapersm 2\n{\n\tret;\n}\n", ""},
		{h + ".visible .entry k()\n.reqntid 128, 2\n{\n\tret;\n}\n", ""},
		{h + ".global .align 4294967296 .b32 g;\n", ".align 4294967296"},
		{h + ".global .align 2147483648 .b32 g;\n", ""},
		{h + ".visible .entry k(.param .align 4294967296 .b8 a[128])\n{\n\tret;\n}\n", ".align 4294967296"},
		{h + ".visible .entry k(.param .align 2147483648 .b8 a[128])\n{\n\tret;\n}\n", ""},
		{k("\tmov.b32 %r1, 0f3F80;"), "0f3F80"},
		{k("\tmov.b32 %r1, 0f03F800000;"), "0f03F800000"},
		{k("\tmov.f64 %fd1, 0d3F80;"), "0d3F80"},
		{k("\tmov.f64 %fd1, 0d3FF00000000000000;"), "0d3FF00000000000000"},
		{k("\tmov.b32 %r1, 0f3F800000;\n\tmov.f64 %fd1, 0D3FF0000000000000;"), ""},
	}
	for _, c := range cases {
		m, err := Parse(c.src)
		if err == nil {
			err = Verify(m)
		}
		body := strings.ReplaceAll(strings.TrimPrefix(c.src, h), "\n", " ")

		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want it legal", body, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted; want an error holding %q", body, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v; want it to hold %q", body, err, c.want)
		}
	}
}

// TestProbe12VerifyIR: hand-built IR the printer would not write back as it is, or ptxas
// would refuse: directive extents that are negative or have no x, a negative
// .minnctapersm, a parameter's .align that is not a power of two. Before: Verify passed
// them, and Print wrote .reqntid 4, 1, 1 for ReqNTID {4, -1, 0}, nothing for {0, 8, 1},
// and ".align 3" for a parameter.
func TestProbe12VerifyIR(t *testing.T) {
	for _, c := range []struct {
		what string
		set  func(f *Func)
		want string
	}{
		{"ReqNTID {4, -1, 0}", func(f *Func) { f.ReqNTID = [3]int{4, -1, 0} }, ".reqntid"},
		{"MaxNTID {0, 8, 1}", func(f *Func) { f.MaxNTID = [3]int{0, 8, 1} }, ".maxntid"},
		{"MinNCTA -1", func(f *Func) { f.MinNCTA = -1 }, ".minnctapersm"},
		{"param .align 3", func(f *Func) { f.Params = []Param{{Name: "a", Type: B8, Array: 16, Align: 3}} }, ".align 3"},
		{"param .align -8", func(f *Func) { f.Params = []Param{{Name: "a", Type: B8, Array: 16, Align: -8}} }, ".align -8"},
		{"ReqNTID {4, 0, 0}", func(f *Func) { f.ReqNTID = [3]int{4, 0, 0} }, ""},
		{"param .align 16", func(f *Func) { f.Params = []Param{{Name: "a", Type: B8, Array: 16, Align: 16}} }, ""},
	} {
		f := &Func{Name: "k", Entry: true, Visible: true, Body: []*Instr{{Op: "ret"}}}
		c.set(f)
		err := Verify(&Module{Target: SM90, Version: 84, Funcs: []*Func{f}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want it legal", c.what, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted; want an error holding %q", c.what, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v; want it to hold %q", c.what, err, c.want)
		}
	}
}
