package ptx

import (
	"strings"
	"testing"
)

// TestHopperFormsRoundTrip prints every wgmma and tensor-copy form, parses the text back and
// prints it again: the two texts must be equal, and Verify must accept the parsed forms.
func TestHopperFormsRoundTrip(t *testing.T) {
	var forms []*Instr
	for _, f := range allForms() {
		if strings.HasPrefix(f.Op, "wgmma.") || strings.HasSuffix(f.Op, ".bulk.tensor") {
			forms = append(forms, f)
		}
	}
	if len(forms) < 440 { // 447 when written
		t.Fatalf("only %d Hopper forms enumerated", len(forms))
	}
	text := formsModule(SM90a, 84, forms).String() // mixed .s8/.u8 wgmma needs PTX 8.4
	m, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != text {
		t.Errorf("round trip differs:\n%s", firstDiff(text, got))
	}
	if err := Verify(m); err != nil {
		t.Errorf("Verify of the parsed forms: %v", err)
	}
}

// TestWgmmaShape checks the shape parser and the per-thread accumulator counts.
func TestWgmmaShape(t *testing.T) {
	for _, c := range []struct {
		q    string
		n, k int
		ok   bool
	}{
		{"m64n8k16", 8, 16, true}, {"m64n256k16", 256, 16, true}, {"m64n136k8", 136, 8, true}, {"m64n64k32", 64, 32, true},
		{"m64n12k16", 0, 0, false}, {"m64n264k16", 0, 0, false}, {"m64n0k16", 0, 0, false}, {"m32n64k16", 0, 0, false},
		{"m64n64", 0, 0, false}, {"m64n064k16", 0, 0, false}, {"m64n64k", 0, 0, false},
	} {
		n, k, ok := WgmmaShape(c.q)
		if n != c.n || k != c.k || ok != c.ok {
			t.Errorf("WgmmaShape(%q) = %d, %d, %v; want %d, %d, %v", c.q, n, k, ok, c.n, c.k, c.ok)
		}
	}
	if got := WgmmaAccRegs(256, F32); got != 128 {
		t.Errorf("m64n256 f32 accumulators: %d registers a thread, want 128", got)
	}
	if got := WgmmaAccRegs(8, F16); got != 2 {
		t.Errorf("m64n8 f16 accumulators: %d registers a thread, want 2", got)
	}
	if TensorDim("5d") != 5 || TensorDim("6d") != 0 {
		t.Error("TensorDim: 5d must be 5 and 6d unknown")
	}
}

// TestTensorAddrParse parses tensor operands: the map in a register (the generic address of
// a grid-constant parameter), and named directly, which Verify refuses as ptxas does.
func TestTensorAddrParse(t *testing.T) {
	src := `.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(
	.param .align 64 .b8 tmap[128]
)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<4>;
	mov.b64 %rd2, tmap;
	cvta.param.u64 %rd3, %rd2;
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd0], [%rd3, {%r0, %r1}], [%rd1];
	ret;
}
`
	m, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	in := m.Funcs[0].Body[len(m.Funcs[0].Body)-2]
	ta, ok := in.Args[1].(TensorAddr)
	if !ok || ta.Map != (Reg{Type: B64, N: 3}) || len(ta.Coords) != 2 {
		t.Fatalf("operand 2 parsed as %#v", in.Args[1])
	}
	if err := Verify(m); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if !strings.Contains(m.String(), "[%rd3, {%r0, %r1}]") {
		t.Errorf("printed text lacks the tensor operand:\n%s", m.String())
	}
	named, err := Parse(strings.Replace(src, "[%rd3, {", "[tmap, {", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(named); err == nil || !strings.Contains(err.Error(), "the tensor map must be a generic address in a register") {
		t.Errorf("Verify of a named tensor map: %v", err)
	}
}
