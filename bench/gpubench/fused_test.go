package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestFusedOnEmulator runs gpubench fused (and with -sm90: the sm_90a kernels against
// gemm_sm90) on 1 and 3 emulated ranks at a small problem with a partial row tile and N, K
// odd multiples of 8: every op's fused kernel and unfused pair must pass the sampled check
// (err <= 1) and every rank print one line per implementation.
func TestFusedOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, c := range []struct {
		ranks string
		sm90  bool
	}{{"1", false}, {"3", false}, {"1", true}, {"3", true}} {
		ranks := c.ranks
		t.Run(fmt.Sprintf("%sranks/sm90=%v", ranks, c.sm90), func(t *testing.T) {
			t.Setenv("WORLD_SIZE", ranks)
			var out bytes.Buffer
			args := []string{"-sizes", "150x40x24", "-reps", "1", "-json"}
			if ranks == "3" {
				args = append(args, "-soak", "3") // back to back, checked after the last
			}
			if c.sm90 {
				args = append(args, "-sm90")
			}
			if err := fused(&out, args); err != nil {
				t.Fatal(err)
			}
			n := map[string]int{"1": 1, "3": 3}[ranks]
			seen := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var r fusedResult
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				if r.Err > 1 || r.TimeUS <= 0 || r.M != 150 || r.N != 40 || r.K != 24 || r.GPUs != n {
					t.Errorf("bad result %+v", r)
				}
				if r.Impl == "kgen/fused" && c.sm90 != strings.Contains(r.Kernel, "_sm90_") {
					t.Errorf("%s ran %q (sm_90a kernel wanted: %v)", r.Op, r.Kernel, c.sm90)
				}
				seen[r.Op+" "+r.Impl]++
			}
			for _, op := range []string{"ag_gemm", "gemm_rs", "gemm_ar"} {
				for _, impl := range []string{"kgen/fused", "kgen/unfused", "kgen/gemm"} {
					if seen[op+" "+impl] != n {
						t.Errorf("%s %s: %d lines, want %d", op, impl, seen[op+" "+impl], n)
					}
				}
			}
		})
	}
}

// TestFusedFlags: a bad op or size is an error naming it.
func TestFusedFlags(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, c := range []struct{ args, want string }{
		{"-ops ag_gemm,gemm_xx", `unknown op "gemm_xx"`},
		{"-sizes 12x3", `bad size "12x3"`},
	} {
		var out bytes.Buffer
		if err := fused(&out, strings.Fields(c.args)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestFusedRSSignalOnEmulator: -rs-signal times gemm_rs on a Comm with OverlapSignals (one
// piece-signalling gemm_sm90, stream waits, copy-engine pushes) as kgen/overlap-signal,
// checked like the others; the other ops get no such line.
func TestFusedRSSignalOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	t.Setenv("WORLD_SIZE", "2")
	var out bytes.Buffer
	if err := fused(&out, []string{"-sizes", "256x40x24", "-reps", "1", "-json", "-sm90", "-rs-signal", "-ops", "gemm_rs,gemm_ar"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r fusedResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.Err > 1 || r.TimeUS <= 0 {
			t.Errorf("bad result %+v", r)
		}
		if r.Impl == "kgen/overlap-signal" && !strings.Contains(r.Kernel, "_pieces+copy_engine_reducescatter_signal") {
			t.Errorf("kgen/overlap-signal ran %q", r.Kernel)
		}
		seen[r.Op+" "+r.Impl]++
	}
	if seen["gemm_rs kgen/overlap-signal"] != 2 || seen["gemm_ar kgen/overlap-signal"] != 0 {
		t.Errorf("overlap-signal lines: %v", seen)
	}
}
