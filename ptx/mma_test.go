package ptx

import (
	"strings"
	"testing"
)

// TestTensorCoreFormsRoundTrip prints every mma, ldmatrix, stmatrix and cp.async form,
// parses the text back and prints it again: the two texts must be equal.
func TestTensorCoreFormsRoundTrip(t *testing.T) {
	var forms []*Instr
	for _, f := range allForms() {
		if f.Op == "mma" || f.Op == "ldmatrix" || f.Op == "stmatrix" || strings.HasPrefix(f.Op, "cp.async") && !strings.HasPrefix(f.Op, "cp.async.bulk") {
			forms = append(forms, f)
		}
	}
	if len(forms) < 300 { // 388 when written
		t.Fatalf("only %d tensor-core forms enumerated", len(forms))
	}
	text := formsModule(SM100a, 90, forms).String()
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

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "want " + al[i] + "\ngot  " + bl[i]
		}
	}
	return "lengths differ"
}

// TestMMARegs checks the per-thread register counts against the PTX ISA's fragment tables.
func TestMMARegs(t *testing.T) {
	for _, c := range []struct {
		shape    string
		in, acc  Type
		a, b, cd int
	}{
		{"m16n8k16", F16, F32, 4, 2, 4},
		{"m16n8k16", F16, F16, 4, 2, 2},
		{"m16n8k8", F16, F16, 2, 1, 2},
		{"m16n8k8", BF16, F32, 2, 1, 4},
		{"m16n8k8", TF32, F32, 4, 2, 4},
		{"m16n8k4", TF32, F32, 2, 1, 4},
		{"m16n8k16", S8, S32, 2, 1, 4},
		{"m16n8k32", U8, S32, 4, 2, 4},
		{"m16n8k32", E4M3, F32, 4, 2, 4},
		{"m16n8k16", E5M2, F16, 2, 1, 2},
	} {
		m, n, k, ok := MMAShape(c.shape)
		if !ok {
			t.Fatalf("MMAShape(%q) unknown", c.shape)
		}
		a, b, cd := MMARegs(m, n, k, c.in, c.acc)
		if a != c.a || b != c.b || cd != c.cd {
			t.Errorf("%s %s->%s: registers A %d B %d C %d, want %d %d %d", c.shape, c.in, c.acc, a, b, cd, c.a, c.b, c.cd)
		}
	}
	if _, _, _, ok := MMAShape("m8n8k4"); ok {
		t.Error("MMAShape accepts m8n8k4, which the tables do not hold")
	}
}
