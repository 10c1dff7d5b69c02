package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestFusedOnEmulator runs gpubench fused on 1 and 3 emulated ranks at a small problem with a
// partial row tile and N, K odd multiples of 8: every op's fused kernel and unfused pair must
// pass the sampled check (err <= 1) and every rank print one line per implementation.
func TestFusedOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, ranks := range []string{"1", "3"} {
		t.Run(ranks+"ranks", func(t *testing.T) {
			t.Setenv("WORLD_SIZE", ranks)
			var out bytes.Buffer
			if err := fused(&out, []string{"-sizes", "150x40x24", "-reps", "1", "-json"}); err != nil {
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
