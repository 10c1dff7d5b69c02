package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGemmSM90OnEmulator runs `gpubench gemm -sm90` on the emulator at an odd shape: the
// sampled check passes and the record for torch_gemm.py names gemm_sm90.
func TestGemmSM90OnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	dir := t.TempDir()
	if err := runGemm([]string{"-sm90", "-sizes", "200x136x72", "-reps", "1", "-dir", dir}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "200x136x72", "kgen.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec gemmRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.Kernel, "gemm_sm90_bf16") || rec.M != 200 || rec.N != 136 || rec.K != 72 || rec.SampleErr > 1 {
		t.Errorf("record %+v: want gemm_sm90_bf16 at 200x136x72 within tolerance", rec)
	}
	// e4m3: B N x K, bf16 out
	if err := runGemm([]string{"-sm90", "-dtype", "e4m3", "-sizes", "200x136x80", "-reps", "1", "-dir", dir}); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "200x136x80", "kgen.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec = gemmRecord{}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.Kernel, "gemm_sm90_e4m3_bf16") || rec.DType != "e4m3" || rec.SampleErr > 1 {
		t.Errorf("record %+v: want gemm_sm90_e4m3_bf16 within tolerance", rec)
	}
	if fi, err := os.Stat(filepath.Join(dir, "200x136x80", "b.bin")); err != nil || fi.Size() != 136*80 {
		t.Errorf("b.bin: %v, want %d bytes (N x K e4m3)", err, 136*80)
	}
	err = runGemm([]string{"-sm90", "-sizes", "64x12x16", "-reps", "1"})
	if err == nil || !strings.Contains(err.Error(), "multiples of 8") {
		t.Errorf("N=12: err %v, want the multiple-of-8 rule", err)
	}
}

// TestGemmSM90OptionsOnEmulator runs `gpubench gemm -sm90` with -sm90-cluster 2 and
// -sm90-tma-store (alone and together), -sm90-pingpong (alone, with the TMA store, with clusters; bf16
// and e4m3) on the emulator at odd shapes: the
// launch passes the cluster dims and D's tensor map, the sampled check passes and the record
// names the option's kernel.
func TestGemmSM90OptionsOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, c := range []struct {
		flags  []string
		suffix string
	}{
		{[]string{"-sm90-cluster", "2"}, "_c2"},
		{[]string{"-sm90-tma-store"}, "_tmastore"},
		{[]string{"-sm90-cluster", "2", "-sm90-tma-store"}, "_c2_tmastore"},
		{[]string{"-sm90-pingpong"}, "_pingpong"},
		{[]string{"-sm90-pingpong", "-sm90-tma-store"}, "_pingpong_tmastore"},
		{[]string{"-sm90-pingpong", "-sm90-cluster", "2"}, "_pingpong_c2"},
	} {
		for _, dt := range []string{"bf16", "e4m3"} {
			dir := t.TempDir()
			size := "264x136x72"
			if dt == "e4m3" {
				size = "264x136x80"
			}
			args := append([]string{"-sm90", "-dtype", dt, "-sizes", size, "-reps", "1", "-dir", dir}, c.flags...)
			if err := runGemm(args); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, size, "kgen.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rec gemmRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(rec.Kernel, "gemm_sm90_"+dt) || !strings.HasSuffix(rec.Kernel, c.suffix) || rec.SampleErr > 1 {
				t.Errorf("%v: record %+v: want a gemm_sm90_%s kernel ending %s within tolerance", args, rec, dt, c.suffix)
			}
		}
	}
}

// TestGemmFullCheck runs `gpubench gemm -full` (the mma.sync gemm and gemm_sm90) on the
// emulator: every element of D checked passes; and fullCheck catches what the sampled check
// cannot: the last 512 elements never written (NaN) with the first 512 overwritten, as
// gemm_sm90's 32-bit epilogue did at M*N = 2^32 + 512.
func TestGemmFullCheck(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, args := range [][]string{{"-dtype", "f16", "-sizes", "136x72x40"}, {"-sm90", "-sizes", "64x136x72"}} {
		if err := runGemm(append(args, "-reps", "1", "-full")); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	const m, n, k = 4, 300, 8
	ha, hb, hd := make([]uint16, m*k), make([]uint16, k*n), make([]uint16, m*n)
	val := map[uint16]float64{0: 0, 0x3c00: 1, 0x4000: 2, 0x4200: 3, 0x4400: 4, 0x4800: 8, 0x4c00: 16, 0x7e00: 0} // f16
	back := func(h uint16) float64 {
		if h == 0x7e00 {
			return math.NaN()
		}
		return val[h]
	}
	for i := range ha {
		ha[i] = 0x3c00 // 1
	}
	for i := range hb {
		hb[i] = 0x4000 // 2: every D element is 16
	}
	for i := range hd {
		hd[i] = 0x4c00
	}
	if bad, _, _ := fullCheck(ha, hb, hd, m, n, k, back); bad != 0 {
		t.Fatalf("correct D: %d bad", bad)
	}
	for i := 0; i < 512; i++ {
		hd[i], hd[m*n-512+i] = 0x4800, 0x7e00
	}
	bad, _, first := fullCheck(ha, hb, hd, m, n, k, back)
	if bad != 1024 || !strings.Contains(first, "D[0,0] = 8, want 16") {
		t.Errorf("wrapped D: %d bad (want 1024), first %q", bad, first)
	}
}
