package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe21BlockComments: ptxas takes /* */ comments anywhere a space may stand, over
// lines too (checked with ptxas 13 for sm_90); Parse refused them ("unexpected \"/* header\"
// at module scope"). They read as a space; a "/*" in a // comment or a quoted .file name
// opens none, and one not closed is an error naming its line. Probe 20 noticed.
func TestProbe21BlockComments(t *testing.T) {
	src := "/* header\n   comment */\n.version 8.0\n.target sm_90 /* hopper */\n.address_size 64\n" +
		".file 1 \"a/*b.cu\"\n" +
		".visible .entry k(/* params */ .param .u64 p /* ptr */)\n{\n" +
		"\t.reg .b32 %r<2>; /* regs */\n\t/* a\n\t   ret; */\n" +
		"\tmov.b32 %r0, 1 /* imm */; // a /* b\n" +
		"\t/* c */ /* d */ mov.b32 %r1, 2;\n\tret; /* e // f */\n}\n"
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatalf("block comments: %v", err)
	}
	plain, err := ptx.Parse(".version 8.0\n.target sm_90\n.address_size 64\n.file 1 \"a/*b.cu\"\n" +
		".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<2>;\n\tmov.b32 %r0, 1;\n\tmov.b32 %r1, 2;\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.String() != plain.String() {
		t.Errorf("with block comments:\n%s\nwithout:\n%s", m, plain)
	}
	bad := ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret; /* open\n}\n"
	if _, err := ptx.Parse(bad); err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "not closed") {
		t.Errorf("unclosed comment: %v, want an error naming line 6", err)
	}
	// An error after a multi-line comment names the line of the source.
	late := ".version 8.0\n.target sm_90\n/* 1\n2\n3 */\n.address_size 32\n"
	if _, err := ptx.Parse(late); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("error after a comment: %v, want line 6", err)
	}
}
