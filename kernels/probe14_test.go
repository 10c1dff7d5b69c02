package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe14TypeOfNoSize: every registry kernel built for an element type of no size (the
// zero Type, .pred, a Type out of range) records a Build error instead of panicking:
// integer divide by zero in streamMap, RowSum, SwiGLU, TiledCopy, the collectives' vector
// width and dsl's copies (AttentionDecodeCombine, HierAllGather, MoECombine...). A
// MatrixLayout out of range prints as a number (FusedName of a config with Layout -1
// panicked: index out of range); probe 14.
func TestProbe14TypeOfNoSize(t *testing.T) {
	for _, s := range All() {
		for _, dt := range []dsl.Type{ptx.NoType, ptx.Pred, ptx.Type(255)} {
			k := dsl.New("k", dsl.WithTarget(ptx.SM90))
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s for %s panicked: %v", s.Name, dt, r)
					}
				}()
				s.New(k, dt)
				m, err := k.Build()
				if err == nil && !typeFree(s, m) {
					t.Errorf("%s for %s built", s.Name, dt)
				}
			}()
		}
	}
	cfg := DefaultGemmConfig(dsl.F16)
	cfg.A, cfg.B = -1, 7
	if got := MatrixLayout(-1).String(); got != "MatrixLayout(-1)" {
		t.Errorf("MatrixLayout(-1) prints %q", got)
	}
	_ = FusedName(FamilyGemmAR, cfg) // it panicked
	if err := FusedCheck(cfg); err == nil || !strings.Contains(err.Error(), "MatrixLayout(-1)") {
		t.Errorf("FusedCheck with layouts -1 and 7: %v", err)
	}
}

// typeFree reports whether s's kernel takes no element type (a barrier, MoE's routing):
// built for a real one, it prints the same PTX as m.
func typeFree(s *Spec, m *ptx.Module) bool {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	s.New(k, s.DTypes[0])
	m2, err := k.Build()
	return err == nil && m.String() == m2.String()
}
