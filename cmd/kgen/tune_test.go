package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/tune"
)

// TestTuneGemmCLI tunes a tiny GEMM on the emulator: the first run prints every candidate's
// time, the winner and its cache file; the second prints the cached winner and times
// nothing; -force times again; -verify reports winner/best.
func TestTuneGemmCLI(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tune.DirEnv, dir)
	args := []string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "emu", "-reps", "2", "-check"}
	code, out, errs := kgen(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cands := tune.GemmCandidates(dsl.BF16, dsl.BF16)
	for _, c := range cands {
		if !regexp.MustCompile(regexp.QuoteMeta(c.Name) + ` +[0-9.]+ us`).MatchString(out) {
			t.Errorf("no time for %s in:\n%s", c.Name, out)
		}
	}
	win := regexp.MustCompile(`winner (\S+), cached in (\S+)\n`).FindStringSubmatch(out)
	if win == nil {
		t.Fatalf("no winner line in:\n%s", out)
	}
	if filepath.Dir(win[2]) != dir {
		t.Errorf("cached in %s, want a file in %s", win[2], dir)
	}
	if _, err := os.Stat(win[2]); err != nil {
		t.Error(err)
	}
	code, out, errs = kgen(args...)
	if code != 0 || !strings.Contains(out, "cached winner "+win[1]) || strings.Contains(out, " us ") {
		t.Fatalf("second run (exit %d, %s):\n%s", code, errs, out)
	}
	code, out, errs = kgen(append(args, "-force", "-verify", "-tolerance", "1000")...) // emulator wall times: check the report, not the ratio
	if code != 0 || strings.Contains(out, "cached winner") || !strings.Contains(out, "winner ") {
		t.Fatalf("-force (exit %d, %s):\n%s", code, errs, out)
	}
	if !regexp.MustCompile(`verify 64x64x64: winner \S+ / best \S+ = [0-9.]+: `).MatchString(out) {
		t.Errorf("no verification in:\n%s", out)
	}
	// An epilogue's kernels are tuned as their own: a new winner, named with the options.
	code, out, errs = kgen(append(args, "-epilogue", "bias,silu")...)
	if code != 0 || strings.Contains(out, "cached winner") || !regexp.MustCompile(`winner \S+_ep_bias_silu, cached in`).MatchString(out) {
		t.Fatalf("-epilogue (exit %d, %s):\n%s", code, errs, out)
	}
	// Two shapes, f16 -> f32, bucketed.
	code, out, errs = kgen("tune", "gemm", "-shapes", "64x64x64,72x80x48", "-dtype", "f16", "-out", "f32", "-bucket", "--backend", "emu", "-reps", "1", "-dir", t.TempDir())
	if code != 0 || strings.Count(out, "cached in") != 2 || !strings.Contains(out, "72x80x48 f16->f32") {
		t.Fatalf("-shapes (exit %d, %s):\n%s", code, errs, out)
	}
}

// TestTuneUsageErrors: bad flags and shapes exit 2 with one line naming the problem and
// print nothing on stdout; an unsafe cache folder exits 1.
func TestTuneUsageErrors(t *testing.T) {
	t.Setenv(tune.DirEnv, t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tune"}, "no kernel given"},
		{[]string{"tune", "conv", "-m", "64", "-n", "64", "-k", "64"}, `"conv"`},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64"}, "-k 0"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-dtype", "f32"}, `-dtype "f32"`},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-out", "e4m3"}, `-out "e4m3"`},
		{[]string{"tune", "gemm", "-m", "64", "-n", "60", "-k", "64", "--backend", "emu"}, "multiples of 8"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "40", "-dtype", "e4m3", "--backend", "emu"}, "multiple of 16"},
		{[]string{"tune", "gemm", "-shapes", "64x64"}, `"64x64" is not MxNxK`},
		{[]string{"tune", "gemm", "-shapes", "64x0x64"}, `"0" is not a positive extent`},
		{[]string{"tune", "gemm", "-shapes", "llm", "-m", "8"}, "one or the other"},
		{[]string{"tune", "gemm", "-shapes", "llm", "--backend", "emu"}, "on the emulator"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "tpu"}, `"tpu"`},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-tolerance", "0.1"}, "-tolerance without -verify"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-verify", "-tolerance", "-1"}, "-tolerance -1"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-verify", "-tolerance", "NaN"}, "-tolerance NaN"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-verify", "-tolerance", "+Inf"}, "-tolerance +Inf"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-timeout", "-5s"}, "-timeout -5s"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-reps", "-1"}, "-reps -1"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-device", "-1"}, "-device -1"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-bogus"}, "-bogus"},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-epilogue", "bias,tanh"}, `option "tanh"`},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "-epilogue", "scales", "--backend", "emu"}, "needs fp8 inputs"},
	} {
		code, out, errs := kgen(c.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	code, _, errs := kgen("tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "emu", "-dir", dir)
	if code != 1 || !strings.Contains(errs, "writable by group or others") {
		t.Errorf("unsafe folder: exit %d, %s", code, errs)
	}
}

// TestPrintTimingsBounded: a candidate's long error (a build log) prints bounded, on one line.
func TestPrintTimingsBounded(t *testing.T) {
	var out bytes.Buffer
	huge := errors.New(strings.Repeat("ptxas error\n", 1<<16))
	printTimings(&env{stdout: &out}, []tune.Timing{{Name: "c", Err: huge}}, "", 1)
	if out.Len() > 4<<10 || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), "bytes)") {
		t.Errorf("a %d-byte error printed as %d bytes, %d lines", len(huge.Error()), out.Len(), strings.Count(out.String(), "\n"))
	}
}
