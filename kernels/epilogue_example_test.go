package kernels_test

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// SoftCapArgs are the user epilogue's own parameters, declared after the gemm's.
type SoftCapArgs struct {
	Cap dsl.Value `kgen:"f32"`
}

// softCap is a user-written GEMM epilogue: D = cap * tanh(v / cap) (a logit soft cap),
// cap an f32 kernel parameter. It runs at build time once per run of adjacent accumulators.
func softCap(k *dsl.Kernel, out dsl.Type) kernels.EpilogueFunc {
	a := dsl.Params[SoftCapArgs](k, out)
	inv := a.Cap.RcpApprox() // once per run; the DSL shares equal computations
	return func(f *kernels.EpilogueFrag) []dsl.Value {
		v := make([]dsl.Value, len(f.V))
		for i, x := range f.V {
			v[i] = x.Mul(inv).Tanh().Mul(a.Cap)
		}
		return v
	}
}

// Example (GemmSM90With): the sm_90a gemm with a user-written epilogue; the same hook
// builds into the mma.sync gemm (GemmWith).
func ExampleGemmSM90With() {
	cfg := kernels.DefaultGemmSM90Config(dsl.BF16)
	k := dsl.New("gemm_softcap", dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90With(k, cfg, softCap)
	mod, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, p := range k.Params() {
		names = append(names, p.Name)
	}
	fmt.Println(strings.Join(names, " "))
	fmt.Println("tanh.approx:", strings.Contains(mod.String(), "tanh.approx.f32"))

	k2 := dsl.New("gemm_softcap_mma", dsl.WithTarget(ptx.SM80))
	kernels.GemmWith(k2, kernels.DefaultGemmConfig(dsl.BF16), softCap)
	_, err = k2.Build()
	fmt.Println("mma.sync:", err)
	// Output:
	// tm_a tm_b m n k alpha beta c d cap
	// tanh.approx: true
	// mma.sync: <nil>
}

// Example (Epilogue): the library's options, bias then SiLU, on the sm_90a gemm; the
// options name the kernel and add GemmEpilogueArgs after the gemm's parameters.
func ExampleEpilogue() {
	cfg := kernels.DefaultGemmSM90Config(dsl.BF16)
	cfg.Epilogue = kernels.Epilogue{Bias: true, Act: kernels.SiLU}
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(k, cfg)
	if _, err := k.Build(); err != nil {
		fmt.Println(err)
		return
	}
	ps := k.Params()
	fmt.Println(cfg.Name())
	for _, p := range ps[len(ps)-4:] {
		fmt.Println(p.Name, p.Type)
	}
	// Output:
	// gemm_sm90_bf16_bf16_128x256x64_3s_ep_bias_silu
	// bias f32
	// scale_a f32
	// scale_b f32
	// residual bf16
}
