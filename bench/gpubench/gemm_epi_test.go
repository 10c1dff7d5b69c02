package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// TestGemmEpilogueOnEmulator runs `gpubench gemm -epilogue` on the emulator at odd shapes,
// gemm_sm90 (its pick, and with the TMA store) and the mma.sync gemm: the sampled check of
// the epilogue passes and epi.json names the epilogue's kernel beside the plain one's time.
func TestGemmEpilogueOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	defer func() { gemmEpi = kernels.Epilogue{} }()
	for _, c := range []struct {
		args []string
		size string
		want string
	}{
		{[]string{"-sm90", "-epilogue", "bias,silu"}, "200x136x72", "gemm_sm90_bf16_bf16_"},
		{[]string{"-sm90", "-sm90-tma-store", "-epilogue", "bias+gelu+residual"}, "136x264x64", "_tmastore_ep_bias_gelu_residual"},
		{[]string{"-sm90", "-sm90-bn", "256", "-sm90-consumers", "2", "-sm90-stages", "3", "-sm90-tma-store", "-sm90-pingpong", "-epilogue", "bias,silu"}, "200x264x72", "64x256x64_3s_pingpong_tmastore_ep_bias_silu"},
		{[]string{"-sm90", "-sm90-pingpong", "-epilogue", "residual"}, "200x136x72", "_pingpong_ep_residual"},
		{[]string{"-epilogue", "relu,residual", "-bm", "64", "-bn", "64", "-bk", "32"}, "136x72x40", "gemm_bf16_bf16_rr_64x64x32_2x2w3s_a_ep_relu_residual"},
	} {
		dir := t.TempDir()
		if err := runGemm(append(c.args, "-sizes", c.size, "-reps", "1", "-dir", dir)); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, c.size, "epi.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec epiRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rec.Kernel, c.want) || !strings.Contains(rec.Kernel, "_ep_") || rec.SampleErr > 1 || rec.PlainUS <= 0 || rec.EpiUS <= 0 {
			t.Errorf("%v: record %+v: want kernel %s within tolerance", c.args, rec, c.want)
		}
		for _, f := range []string{"bias.bin", "res.bin", "depi.bin", "kgen.json"} {
			if _, err := os.Stat(filepath.Join(dir, c.size, f)); err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
		}
	}
	for _, bad := range [][]string{{"-epilogue", "bias,tanh"}, {"-epilogue", "scales"}, {"-sm90", "-dtype", "e4m3", "-epilogue", "silu"}} {
		if err := runGemm(append(bad, "-sizes", "64", "-reps", "1")); err == nil || !strings.Contains(err.Error(), "-epilogue") {
			t.Errorf("%v: err %v, want the -epilogue rule", bad, err)
		}
	}
}

// TestMLPOnEmulator runs `gpubench mlp` on the emulator at odd token counts: both GEMMs'
// sampled checks pass.
func TestMLPOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	if err := runMLP([]string{"-tokens", "130,67", "-hidden", "136", "-ff", "264", "-reps", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := runMLP([]string{"-hidden", "12"}); err == nil || !strings.Contains(err.Error(), "multiples of 8") {
		t.Errorf("hidden 12: err %v, want the multiple-of-8 rule", err)
	}
}
