package layout

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintLayout(t *testing.T) {
	var b bytes.Buffer
	if err := PrintLayout(&b, Must(Parse("(2,3):(3,1)"))); err != nil {
		t.Fatal(err)
	}
	want := `(2,3):(3,1)
      0   1   2
    +---+---+---+
 0  | 0 | 1 | 2 |
    +---+---+---+
 1  | 3 | 4 | 5 |
    +---+---+---+
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if err := PrintLayout(&b, Must(Parse("(2,2,2):(1,2,4)"))); err == nil {
		t.Error("rank-3 layout accepted")
	}
}

func TestSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, Must(Parse("(4,8):(8,1)"))); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "<svg") || strings.Count(b.String(), "<rect") != 33 {
		t.Errorf("unexpected SVG:\n%s", b.String())
	}
	thr := Must(Parse("(4,2):(2,1)"))
	val := Must(Parse("(2,2):(1,2)"))
	tiler, tv, err := MakeLayoutTV(thr, val)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTVSVG(&b, tv, tiler); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ">T7<") || !strings.Contains(b.String(), ">V3<") {
		t.Errorf("TV SVG lacks labels:\n%s", b.String())
	}
	b.Reset()
	if err := PrintTV(&b, tv, tiler); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}
