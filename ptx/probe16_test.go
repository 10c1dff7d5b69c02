package ptx

import (
	"strings"
	"testing"
)

// TestProbe16SpaceOutOfRange: a Space out of range prints as Space(n), and Verify's refusal of
// a module variable in one names it so. Before, String panicked (index out of range) and
// Verify's message read ".%!s(PANIC=String method: ...)"; probe 16.
func TestProbe16SpaceOutOfRange(t *testing.T) {
	for _, c := range []struct {
		s    Space
		want string
	}{{SpaceGeneric, ""}, {SpaceConst, "const"}, {Space(8), "Space(8)"}, {Space(255), "Space(255)"}} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Space(%d).String panicked: %v", uint8(c.s), r)
				}
			}()
			if got := c.s.String(); got != c.want {
				t.Errorf("Space(%d).String() = %q; want %q", uint8(c.s), got, c.want)
			}
		}()
	}
	m := &Module{Target: SM90, Vars: []*Var{{Space: Space(99), Name: "g", Type: U32}},
		Funcs: []*Func{{Name: "k", Entry: true, Body: []*Instr{{Op: "ret"}}}}}
	err := Verify(m)
	if err == nil || !strings.Contains(err.Error(), "not .Space(99)") || strings.Contains(err.Error(), "PANIC") {
		t.Errorf("Verify of a module variable in Space(99): %v; want it named as Space(99)", err)
	}
}
