package ptx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestParseRoundTripsGolden parses every golden PTX file and prints it back byte for byte.
func TestParseRoundTripsGolden(t *testing.T) {
	files, _ := filepath.Glob("../golden/testdata/*/*.ptx")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ptx.Parse(string(src))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if got := m.String(); got != string(src) {
			t.Errorf("%s does not round-trip; first difference near:\n%s", f, firstDiff(string(src), got))
		}
		if err := ptx.Verify(m); err != nil {
			t.Errorf("%s: parsed module fails Verify: %v", f, err)
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "want: " + al[i] + "\n got: " + bl[i]
		}
	}
	return "(length differs)"
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{
		".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tfrobnicate.u32 %r1;\n}\n",
		".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1, 0;\n}\n",
		".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(\n",
		".version x\n",
	} {
		if _, err := ptx.Parse(src); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("Parse(%q) = %v, want an error naming the line", src, err)
		}
	}
}

// FuzzParse checks that Parse never panics nor reports an internal error, and the round-trip
// property: what it accepts prints to text that parses back to the same module
// (Parse(Print(m)) == m) and prints the same again. The seeds are small programs, one
// feature each, so the fuzzer runs many inputs per second (the golden files are parsed by
// TestParseRoundTripsGolden).
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := ptx.Parse(src)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") || strings.Contains(err.Error(), "runtime error") {
				t.Fatalf("internal error: %v", err)
			}
			return
		}
		text := m.String()
		m2, err := ptx.Parse(text)
		if err != nil {
			t.Fatalf("printed text does not parse: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("Parse(Print(m)) != m:\n%s\nprinted:\n%s", describeDiff(m, m2), text)
		}
		if m2.String() != text {
			t.Fatalf("print/parse is not stable:\n%s", firstDiff(text, m2.String()))
		}
	})
}

// describeDiff names the first function or variable where two modules differ.
func describeDiff(a, b *ptx.Module) string {
	if a.Target != b.Target || a.Version != b.Version {
		return fmt.Sprintf("header: %s %v vs %s %v", a.Target, a.Version, b.Target, b.Version)
	}
	if !reflect.DeepEqual(a.Vars, b.Vars) {
		return fmt.Sprintf("vars: %+v vs %+v", a.Vars, b.Vars)
	}
	if len(a.Funcs) != len(b.Funcs) {
		return fmt.Sprintf("%d vs %d funcs", len(a.Funcs), len(b.Funcs))
	}
	for i := range a.Funcs {
		fa, fb := *a.Funcs[i], *b.Funcs[i]
		for j := 0; j < len(fa.Body) && j < len(fb.Body); j++ {
			if !reflect.DeepEqual(fa.Body[j], fb.Body[j]) {
				return fmt.Sprintf("func %s, body[%d]: %+v vs %+v", fa.Name, j, *fa.Body[j], *fb.Body[j])
			}
		}
		fa.Body, fb.Body = nil, nil
		if !reflect.DeepEqual(fa, fb) {
			return fmt.Sprintf("func %d: %+v vs %+v", i, fa, fb)
		}
	}
	return "(no difference found)"
}

// parseSeeds are small programs, each exercising a part of the grammar.
var parseSeeds = func() []string {
	h := ".version 8.4\n.target sm_90\n.address_size 64\n"
	k := func(body string) string {
		return h + ".visible .entry k(.param .u64 p, .param .u32 n)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .pred %p<2>;\n\t.reg .f32 %f<4>;\n" + body + "\n}\n"
	}
	return []string{
		h,
		h + ".visible .entry k()\n{\n\tret;\n}\n",
		h + ".extern .func f(.param .b64 a, .param .b32 b);\n",
		h + ".func (.param .b32 r) g(.param .b32 a)\n{\n\tret;\n}\n",
		h + ".global .align 8 .b32 tab[3] = {1, 2, 3};\n",
		h + ".const .f32 c = 0f3F800000;\n",
		h + ".extern .shared .align 16 .b8 smem[];\n",
		h + ".visible .entry k(.param .align 64 .b8 tm[128])\n.reqntid 128, 1, 1\n.minnctapersm 2\n{\n\tret;\n}\n",
		k("\tld.param.u64 %rd1, [p];\n\tld.param.u32 %r1, [n];"),
		k("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 4;\n\t@%p1 bra L1;\n\t@!%p1 add.s32 %r2, %r1, -3;\nL1:\n\tret;"),
		k("\tld.global.v2.f32 {%f1, %f2}, [%rd1+8];\n\tst.global.f32 [%rd1], %f1;"),
		k("\tmov.f32 %f1, 0f3F800000;\n\tadd.rn.f32 %f2, %f1, 1.5;\n\tcvt.rn.f16.f32 %r1, %f2;"),
		k("\t{\n\t\t.reg .b32 %q<2>;\n\t\tmov.b32 %r1, 0x10;\n\t}"),
		h + ".file 1 \"k.go\"\n.visible .entry k()\n{\n\t.loc 1 7 0\n\tret;\n}\n",
		k("\tatom.global.add.u32 %r1, [%rd1], 1;\n\tbar.sync 0;\n\tmembar.gl;"),
		k("\tselp.b32 %r1, %r2, %r3, %p1;\n\tsetp.ne.and.b32 %p1|%p0, %r1, 0, %p1;"),
		h + ".visible .entry k()\n{\n\t.shared .align 4 .b32 s[32];\n\t.local .b32 l[2];\n\tret;\n}\n",
		h + ".extern .func (.param .b32 r) h(.param .b64 a);\n.visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\t{\n\t.param .b64 a0;\n\t.param .b32 r0;\n\tcall.uni (r0), h, (a0);\n\tld.param.b32 %r1, [r0];\n\t}\n\tret;\n}\n",
	}
}()

// TestParseHandWritten reads hand-written PTX in other styles: a parameter list on the
// lines after the name, nvcc-style register names, comments.
func TestParseHandWritten(t *testing.T) {
	src := `//
// a comment
.version 8.0
.target sm_90
.address_size 64

.extern .func nvshmemx_putmem_block
(
	.param .b64 dest,
	.param .b64 source,
	.param .b64 nelems,
	.param .b32 pe
);

.visible .entry put_block(
	.param .u64 dst,
	.param .u32 pe
)
{
	.reg .b64 %rd<4>;
	.reg .b32 %r<2>;

	ld.param.u64 %rd1, [dst];
	ld.param.u32 %r1, [pe];
	{
		.param .b64 param0;
		st.param.b64 [param0], %rd1;
		.param .b64 param1;
		st.param.b64 [param1], %rd1;
		.param .b64 param2;
		st.param.b64 [param2], 1024;
		.param .b32 param3;
		st.param.b32 [param3], %r1;
		call.uni nvshmemx_putmem_block, (param0, param1, param2, param3);
	}
	ret;
}
`
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Funcs) != 2 || len(m.Funcs[0].Params) != 4 || !m.Funcs[0].Extern || m.Funcs[1].Name != "put_block" {
		t.Fatalf("parsed %d funcs: %+v", len(m.Funcs), m.Funcs)
	}
	if err := ptx.Verify(m); err != nil {
		t.Fatal(err)
	}
	if r := m.Funcs[1].Body[0].Args[0].(ptx.Reg); r.Type != ptx.B64 || r.N != 1 {
		t.Fatalf("register %v", r)
	}
}
