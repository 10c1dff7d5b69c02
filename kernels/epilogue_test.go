package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestEpilogueNames: the options name the kernel (so caches tell kernels apart), the zero
// value leaves the name as it was, and ParseEpilogue reads String's form back.
func TestEpilogueNames(t *testing.T) {
	seen := map[string]Epilogue{}
	for _, e := range []Epilogue{{}, {Bias: true}, {Bias: true, Act: SiLU}, {Act: SiLU}, {Act: GELU}, {Act: ReLU, Residual: true}, {Scales: true, Bias: true, Act: GELU, Residual: true}} {
		c := DefaultGemmSM90Config(dsl.E4M3)
		c.Epilogue = e
		if o, ok := seen[c.Name()]; ok {
			t.Errorf("%v and %v share the name %s", o, e, c.Name())
		}
		seen[c.Name()] = e
		g := DefaultGemmConfig(dsl.BF16)
		g.Epilogue = e
		if e.IsZero() != !strings.Contains(g.Name(), "_ep_") || e.IsZero() != !strings.Contains(c.Name(), "_ep_") {
			t.Errorf("%v: names %s, %s", e, g.Name(), c.Name())
		}
		back, err := ParseEpilogue(e.String())
		if err != nil || back != e {
			t.Errorf("ParseEpilogue(%q) = %v, %v; want %v", e.String(), back, err, e)
		}
	}
	if c := DefaultGemmSM90Config(dsl.BF16); c.Name() != "gemm_sm90_bf16_bf16_128x256x64_3s" {
		t.Errorf("zero epilogue: name %s", c.Name())
	}
	if e, err := ParseEpilogue("bias,silu"); err != nil || e != (Epilogue{Bias: true, Act: SiLU}) {
		t.Errorf("ParseEpilogue(bias,silu) = %v, %v", e, err)
	}
	for _, s := range []string{"bias+tanh", "relu+silu", "none+bias+x", "+", ",,", "gelu,", "+bias", "bias,,silu", "bias+bias", "res+residual", "silu+silu"} {
		if _, err := ParseEpilogue(s); err == nil {
			t.Errorf("ParseEpilogue(%q): no error", s)
		}
	}
}

// TestEpilogueErrors: invalid combinations are refused with the rule, at Check or Build.
func TestEpilogueErrors(t *testing.T) {
	sm := DefaultGemmSM90Config(dsl.BF16)
	sm.Epilogue = Epilogue{Scales: true}
	if err := sm.Check(); err == nil || !strings.Contains(err.Error(), "needs fp8 inputs") {
		t.Errorf("bf16 with scales: Check %v", err)
	}
	mm := DefaultGemmConfig(dsl.BF16)
	mm.Epilogue = Epilogue{Scales: true, Bias: true}
	if err := mm.Check(); err == nil || !strings.Contains(err.Error(), "needs fp8 inputs") {
		t.Errorf("mma.sync gemm with scales: Check %v", err)
	}
	sm.Epilogue = Epilogue{Act: SiLU + 1}
	if err := sm.Check(); err == nil || !strings.Contains(err.Error(), "Epilogue.Act") {
		t.Errorf("unknown activation: Check %v", err)
	}
	ok := DefaultGemmSM90Config(dsl.BF16)
	ok.Epilogue = Epilogue{Bias: true}
	hook := func(k *dsl.Kernel, out dsl.Type) EpilogueFunc {
		return func(f *EpilogueFrag) []dsl.Value { return f.V }
	}
	short := func(k *dsl.Kernel, out dsl.Type) EpilogueFunc {
		return func(f *EpilogueFrag) []dsl.Value { return f.V[:1] }
	}
	wrongType := func(k *dsl.Kernel, out dsl.Type) EpilogueFunc {
		return func(f *EpilogueFrag) []dsl.Value {
			v := append([]dsl.Value(nil), f.V...)
			v[0] = v[0].To(dsl.BF16)
			return v
		}
	}
	zero := func(k *dsl.Kernel, out dsl.Type) EpilogueFunc {
		return func(f *EpilogueFrag) []dsl.Value { return make([]dsl.Value, len(f.V)) }
	}
	for _, c := range []struct {
		name  string
		build func(k *dsl.Kernel)
		want  string
	}{
		{"sm90 hook and options", func(k *dsl.Kernel) { GemmSM90With(k, ok, hook) }, "together"},
		{"sm90 zero values", func(k *dsl.Kernel) { GemmSM90With(k, DefaultGemmSM90Config(dsl.BF16), zero) }, "value 0 is the zero dsl.Value"},
		{"sm90 nil hook", func(k *dsl.Kernel) { GemmSM90With(k, DefaultGemmSM90Config(dsl.BF16), nil) }, "nil EpilogueHook"},
		{"sm90 short", func(k *dsl.Kernel) { GemmSM90With(k, DefaultGemmSM90Config(dsl.BF16), short) }, "returned 1 values for a run of 2"},
		{"sm90 type", func(k *dsl.Kernel) { GemmSM90With(k, DefaultGemmSM90Config(dsl.BF16), wrongType) }, "want f32"},
		{"fused", func(k *dsl.Kernel) { GemmRSSM90(k, ok) }, "only GemmSM90 applies epilogue options"},
		{"mma hook and options", func(k *dsl.Kernel) {
			c := DefaultGemmConfig(dsl.BF16)
			c.Epilogue = Epilogue{Act: ReLU}
			GemmWith(k, c, hook)
		}, "together"},
		{"mma short", func(k *dsl.Kernel) { GemmWith(k, DefaultGemmConfig(dsl.BF16), short) }, "returned 1 values for a run of 8"},
		{"mma fused", func(k *dsl.Kernel) {
			c := DefaultGemmConfig(dsl.BF16)
			c.Epilogue = Epilogue{Act: ReLU}
			GemmRS(k, c)
		}, "only Gemm applies epilogue options"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := ptx.SM90a
			k := dsl.New("epi", dsl.WithTarget(tg))
			c.build(k)
			if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}

// TestEpiloguePtxas assembles gemm_sm90 with epilogue options (register and TMA-store
// epilogues, bf16 and e4m3 with scales) and the mma.sync gemm with them (aligned and not)
// through ptxas: no warnings and no spills, also with the bias loaded at the tile's start
// (the TMA-store bias+silu at 128x256 spilled 12 bytes when it loaded the bias in the
// epilogue), and bias+silu at the tiles GemmSM90For and the tuner pick.
func TestEpiloguePtxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	assemble := func(name, arch string, build func(k *dsl.Kernel), maxSpill int) {
		k := dsl.New(name, dsl.WithTarget(ptx.Target(arch)))
		build(k)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "g.ptx")
		if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch="+arch, "-v", f, "-o", f+".cubin").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: ptxas: %v: %s", name, err, out)
		}
		if strings.Contains(string(out), "warning") {
			t.Errorf("%s: ptxas warns: %s", name, out)
		}
		s := spillRE.FindStringSubmatch(string(out))
		if s == nil {
			t.Fatalf("%s: no spill counts in ptxas -v: %s", name, out)
		}
		if st, _ := strconv.Atoi(s[1]); st > maxSpill {
			t.Errorf("%s spills: %s (at most %d bytes allowed)", name, s[0], maxSpill)
		}
		t.Logf("%s: %s", name, s[0])
	}
	for _, e := range []Epilogue{{Bias: true, Act: SiLU}, {Bias: true, Act: GELU, Residual: true}, {Act: ReLU}, {Residual: true}} {
		for _, base := range []GemmSM90Config{DefaultGemmSM90Config(dsl.BF16), {In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 1, Stages: 8}} {
			for _, store := range []bool{false, true} {
				c := base
				c.Epilogue, c.TMAStore = e, store
				for c.Stages > 2 && c.Check() != nil {
					c.Stages--
				}
				assemble(c.Name(), "sm_90a", func(k *dsl.Kernel) { GemmSM90(k, c) }, 0)
			}
		}
		for _, al := range []bool{true, false} {
			c := DefaultGemmConfig(dsl.BF16)
			c.Epilogue, c.Aligned = e, al
			assemble(c.Name(), "sm_80", func(k *dsl.Kernel) { Gemm(k, c) }, 0)
		}
	}
	c := DefaultGemmSM90Config(dsl.E4M3)
	c.Epilogue = Epilogue{Scales: true, Bias: true, Act: SiLU}
	assemble(c.Name(), "sm_90a", func(k *dsl.Kernel) { GemmSM90(k, c) }, 0)
	c.TMAStore = true
	assemble(c.Name(), "sm_90a", func(k *dsl.Kernel) { GemmSM90(k, c) }, 0)
	for _, t := range [][3]int{{1, 64, 8}, {1, 256, 5}, {2, 128, 7}} {
		c := GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: t[1], Consumers: t[0], Stages: t[2], Epilogue: Epilogue{Bias: true, Act: SiLU}}
		assemble(c.Name(), "sm_90a", func(k *dsl.Kernel) { GemmSM90(k, c) }, 0)
	}
}

// TestEpilogueFragMisuse: a fragment not made by a gemm cannot load; the kernel says why.
func TestEpilogueFragMisuse(t *testing.T) {
	k := dsl.New("frag", dsl.WithTarget(ptx.SM90a))
	p := k.PtrParam("p", dsl.F32)
	f := &EpilogueFrag{K: k, V: []dsl.Value{k.Const(dsl.F32, float32(1))}}
	f.Cols(p)
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "not made by a gemm's epilogue") {
		t.Errorf("err %v", err)
	}
	// Without K the loads still fail the build: through the kernel of its values, or of p.
	for _, f := range []*EpilogueFrag{{V: []dsl.Value{}}, {}} {
		k := dsl.New("frag", dsl.WithTarget(ptx.SM90a))
		p := k.PtrParam("p", dsl.F32)
		if len(f.V) == 0 && f.V != nil {
			f.V = []dsl.Value{k.Const(dsl.F32, float32(1))}
		}
		f.Tile(p)
		f.RowOf(p)
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "EpilogueFrag.Tile: the fragment was not made") {
			t.Errorf("a fragment without K: err %v", err)
		}
	}
}
