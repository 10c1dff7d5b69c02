package ptx

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintSmoke(t *testing.T) {
	ra, rb := Reg{U64, 1}, Reg{U64, 2}
	f := &Func{Name: "k", Entry: true, Visible: true, Params: []Param{{Name: "a", Type: U64}, {Name: "n", Type: U32}}}
	f.Body = []*Instr{
		{Op: "ld", Q: []string{"param"}, Types: []Type{U64}, Args: []Operand{ra, Addr{Base: Sym("a")}}, Pos: Pos{"x.go", 3}},
		{Op: "cvta", Q: []string{"to", "global"}, Types: []Type{U64}, Args: []Operand{rb, ra}},
		{Op: "mov", Types: []Type{U32}, Args: []Operand{Reg{U32, 1}, Special("%tid.x")}},
		{Op: "ld", Q: []string{"global", "v4"}, Types: []Type{F32}, Args: []Operand{Vec{Reg{F32, 0}, Reg{F32, 1}, Reg{F32, 2}, Reg{F32, 3}}, Addr{Base: rb, Off: 16}}},
		{Op: "add", Types: []Type{F32}, Args: []Operand{Reg{F32, 0}, Reg{F32, 0}, FloatImm(F32, 1.5)}},
		{Op: "st", Q: []string{"relaxed", "gpu", "global"}, Types: []Type{F32}, Args: []Operand{Addr{Base: rb}, Reg{F32, 0}}},
		{Op: "ret"},
	}
	m := &Module{Target: SM90, Funcs: []*Func{f}}
	s := m.String()
	if !strings.Contains(s, "ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%ud2+16];") {
		t.Fatalf("unexpected:\n%s", s)
	}
	if p, err := exec.LookPath(os.Getenv("PTXAS")); err == nil {
		d := t.TempDir()
		fn := filepath.Join(d, "k.ptx")
		os.WriteFile(fn, []byte(s), 0o644)
		out, err := exec.Command(p, "-arch=sm_90", fn, "-o", filepath.Join(d, "k.o")).CombinedOutput()
		t.Logf("%s\n%s", s, out)
		if err != nil {
			t.Fatal(err)
		}
	}
}
