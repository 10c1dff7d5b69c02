package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: bad flags and absurd sizes are usage errors (exit 2) before any device
// work or host allocation, never a panic.
func TestUsageErrors(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, c := range []struct {
		name string
		run  func([]string) error
		args []string
	}{
		{"mlp", runMLP, []string{"-reps", "0", "-tokens", "8", "-hidden", "8", "-ff", "8"}},
		{"mlp", runMLP, []string{"-reps", "-1", "-tokens", "8", "-hidden", "8", "-ff", "8"}},
		{"mlp", runMLP, []string{"-tokens", "1099511627776", "-hidden", "4096", "-ff", "8"}},
		{"mlp", runMLP, []string{"-tokens", "8", "-hidden", "3037000504", "-ff", "3037000504"}},
		{"mlp", runMLP, []string{"-tokens", "0"}},
		{"fused", runFused, []string{"-soak", "-5"}},
		{"fused", runFused, []string{"-soak", "-1s"}},
		{"fused", runFused, []string{"-ar-rounds", "2,x"}},
		{"fused", runFused, []string{"-ar-rounds", "0"}},
		{"fused", runFused, []string{"-sizes", "bogus"}},
		{"gemm", runGemm, []string{"-epilogue", "bogus"}},
		{"gemm", runGemm, []string{"-epilogue", "bias,", "-sm90"}},
		{"gemm", runGemm, []string{"-sizes", "bogus"}},
	} {
		err := c.run(c.args)
		if !errors.As(err, new(usageError)) {
			t.Errorf("gpubench %s %v: %v; want a usage error", c.name, c.args, err)
		}
	}
}

// TestGroupedUsageErrors: bad grouped flags are usage errors before any device work.
func TestGroupedUsageErrors(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, args := range [][]string{
		{"-groups", "0"},
		{"-groups", "257"},
		{"-counts", "4,x"},
		{"-counts", "4,-1"},
		{"-skew", "2"},
		{"-n", "12"},
		{"-k", "0"},
		{"-reps", "0"},
		{"-rows", "16777216", "-groups", "256"},
		{"-dtype", "f16"},
		{"-dtype", "e4m3", "-k", "24"},
		{"-variants", ""},
		{"-variants", "pick,96x256:3s"},
		{"-variants", "128x256"},
		{"-variants", "128x256:3"},
		{"-variants", "128x256:3s:fast"},
		{"-variants", "128x256:3s:bandx"},
		{"-variants", "128x256:3s:band99"},
		{"-variants", "128x256:5s:tma"},
	} {
		if err := runGrouped(args); !errors.As(err, new(usageError)) {
			t.Errorf("gpubench grouped %v: %v; want a usage error", args, err)
		}
	}
}

// TestGroupedRuns: gpubench grouped runs small bf16 and e4m3 problems on the emulator, its
// sampled outputs within tolerance, and writes kgen.json.
func TestGroupedRuns(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	if err := runGrouped([]string{"-counts", "30,0,45", "-n", "24", "-k", "40", "-reps", "1"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := runGrouped([]string{"-counts", "7,70", "-n", "40", "-k", "48", "-reps", "1", "-dtype", "e4m3", "-dir", dir}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kgen.json")); err != nil || !strings.Contains(string(b), `"DType": "e4m3"`) {
		t.Errorf("kgen.json: %s, %v", b, err)
	}
	// The variants (TMA store, bands) and the dense gemm, each checked, all in kgen.json.
	dir = t.TempDir()
	if err := runGrouped([]string{"-counts", "70,0,45,130", "-n", "72", "-k", "40", "-reps", "1", "-dense", "-dir", dir,
		"-variants", "pick,64x64:2s,64x64:2s:tma,64x64:2s:tma:band2,128x256:3s:tma:band8"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kgen.json"))
	for _, want := range []string{`"Variant": "64x64:2s:tma:band2"`, `"Kernel": "gemm_sm90_grouped_bf16_bf16_128x256x64_3s_tmastore_band8"`, `"Variant": "dense"`} {
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("kgen.json lacks %s: %s, %v", want, b, err)
		}
	}
	if err := runGrouped([]string{"-counts", "7,70", "-n", "40", "-k", "48", "-reps", "1", "-dtype", "e4m3", "-dense", "-variants", "64x64:2s:tma:band3"}); err != nil {
		t.Fatal(err)
	}
}

// TestTimingModes: GPUBENCH_TIMING=queued times the runs back to back (a gemm on the emulator
// gives a positive time and its check), and an unknown mode is a usage error naming the value.
func TestTimingModes(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	t.Setenv("GPUBENCH_TIMING", "queued")
	if err := runGemm([]string{"-sizes", "64x64x64", "-reps", "2", "-dtype", "f16"}); err != nil {
		t.Fatalf("gemm with queued timing: %v", err)
	}
	t.Setenv("GPUBENCH_TIMING", "bogus")
	err := runGemm([]string{"-sizes", "64x64x64", "-reps", "2", "-dtype", "f16"})
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("GPUBENCH_TIMING=bogus: %v; want a usage error naming the value", err)
	}
}
