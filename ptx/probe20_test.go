package ptx_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe20TrailingComments: a // comment after code on a line, as other tools write it,
// was refused with messages that named something else ("ret; // done": no ';' at the end
// of the instruction; ".entry k() // entry": bad directive //: "entry" is not a positive
// integer; "{ // body": unexpected before the body). It is a comment; a "//" inside a
// quoted .file name is not. Probe 20.
func TestProbe20TrailingComments(t *testing.T) {
	hdr := ".version 8.0 // ptx\n.target sm_90 // hopper\n.address_size 64\n"
	src := hdr + ".file 1 \"a//b.cu\" // the source\n.visible .entry k(.param .u64 p) // entry\n{ // body\n\t.reg .b32 %r<2>; // regs\n\tmov.b32 %r0, 1; // set\n\tret; // done\n} // end\n"
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatalf("trailing comments: %v", err)
	}
	plain, err := ptx.Parse(hdr[:strings.Index(hdr, " //")] + "\n.target sm_90\n.address_size 64\n.file 1 \"a//b.cu\"\n.visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<2>;\n\tmov.b32 %r0, 1;\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.String() != plain.String() {
		t.Errorf("with trailing comments:\n%s\nwithout:\n%s", m, plain)
	}
}
