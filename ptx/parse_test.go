package ptx_test

import (
	"os"
	"path/filepath"
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

// FuzzParse checks that Parse never panics and that what it accepts prints and parses again
// to the same text.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../golden/testdata/*/*.ptx")
	for i, fn := range files {
		if i%7 == 0 {
			b, _ := os.ReadFile(fn)
			f.Add(string(b))
		}
	}
	f.Add(".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n")
	f.Fuzz(func(t *testing.T, src string) {
		m, err := ptx.Parse(src)
		if err != nil {
			return
		}
		text := m.String()
		m2, err := ptx.Parse(text)
		if err != nil {
			t.Fatalf("printed text does not parse: %v\n%s", err, text)
		}
		if m2.String() != text {
			t.Fatalf("print/parse is not stable:\n%s", firstDiff(text, m2.String()))
		}
	})
}

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
