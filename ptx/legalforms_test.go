package ptx

import (
	"strings"
	"testing"
)

// TestLegalFormsAccepted: forms ptxas 13 assembles that Parse or Verify refused (probes 19
// and 20 noticed them): address offsets written in hexadecimal, octal or binary or with a U
// suffix, absolute addresses likewise, integer immediates with a U suffix or an uppercase 0X
// holding the digit E, cvt.rna{.satfinite}.tf32.f32, cvt.rn/.rz{.relu}.tf32.f32 and
// max/min.relu.s32. Each parses (an address to the offset ptxas reads), prints and parses
// back the same, and verifies; the forms ptxas refuses stay refused (the oracle checks every
// form of the tables against ptxas).
func TestLegalFormsAccepted(t *testing.T) {
	const head = ".version 8.1\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<4>;\n.reg .f32 %f<4>;\n.reg .b64 %rd<4>;\n"
	for _, c := range []struct {
		body string
		off  int64 // the address's offset, for the ld forms
	}{
		{"ld.global.u32 %r1, [%rd1+0x10];", 16},
		{"ld.global.u32 %r1, [%rd1+0X1f];", 31},
		{"ld.global.u32 %r1, [%rd1+010];", 8},
		{"ld.global.u32 %r1, [%rd1+0b101];", 5},
		{"ld.global.u32 %r1, [%rd1+16U];", 16},
		{"ld.global.u32 %r1, [%rd1+0xffffffff];", 0xffffffff},
		{"ld.global.u32 %r1, [%rd1+-0x8];", -8},
		{"ld.local.u32 %r1, [0x100];", 0x100}, // ptxas takes an absolute address in .local only
		{"cvt.rna.tf32.f32 %r1, %f1;", 0},
		{"cvt.rna.satfinite.tf32.f32 %r1, %f1;", 0},
		{"cvt.rn.tf32.f32 %r1, %f1;", 0},
		{"cvt.rz.relu.tf32.f32 %r1, %f1;", 0},
		{"max.relu.s32 %r1, %r2, %r3;", 0},
		{"add.u32 %r1, %r2, 10U;", 0},
		{"add.s32 %r1, %r2, -10U;", 0},
		{"add.u32 %r1, %r2, 0x1eU;", 0},
		{"add.u32 %r1, %r2, 0X1E;", 0},
		{"min.relu.s32 %r1, %r2, %r3;", 0},
	} {
		m, err := Parse(head + c.body + "\nret;\n}\n")
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if err := Verify(m); err != nil {
			t.Errorf("%s: %v", c.body, err)
		}
		in := m.Funcs[0].Body[0]
		if strings.HasPrefix(c.body, "ld") {
			if a, ok := in.Args[1].(Addr); !ok || a.Off != c.off {
				t.Errorf("%s: address %#v, want offset %d", c.body, in.Args[1], c.off)
			}
		}
		again, err := Parse(m.String())
		if err != nil || again.String() != m.String() {
			t.Errorf("%s: printed %q does not parse back the same (%v)", c.body, m.String(), err)
		}
	}
	for _, c := range []struct{ body, want string }{
		{"ld.global.u32 %r1, [%rd1+0o10];", "bad address"},
		{"ld.global.u32 %r1, [%rd1+1_0];", "bad address"},
		{"ld.global.u32 %r1, [%rd1+08];", "bad address"},
		{"ld.global.u32 %r1, [%rd1+0x8000000000000000];", "bad address"},
		{"cvt.rna.relu.tf32.f32 %r1, %f1;", "takes no .relu"},
		{"cvt.rm.tf32.f32 %r1, %f1;", "needs .rna, .rn or .rz"},
		{"cvt.rna.f16.f32 %r1, %f1;", ".rna applies only"},
		{"cvt.rna.tf32.f32 %f2, %f1;", "not compatible with .tf32"},
		{"cvt.rn.satfinite.tf32.f32 %r1, %f1;", "needs sm_100"},
		{"max.relu.u32 %r1, %r2, %r3;", ".relu applies to .s32"},
		{"add.u32 %r1, %r2, 10u;", "bad immediate"},
		{"add.f32 %f1, %f2, 1.0U;", "bad immediate"},
		{"add.u32 %r1, %r2, U;", "not a declared variable"},
	} {
		m, err := Parse(head + c.body + "\nret;\n}\n")
		if err == nil {
			err = Verify(m)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.body, err, c.want)
		}
	}
}
