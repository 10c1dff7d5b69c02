package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/tune"
)

// kgenWithin runs kgen with args, failing the test on a panic or after limit.
func kgenWithin(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type res struct {
		code      int
		out, errs string
		panicked  any
	}
	done := make(chan res, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- res{panicked: p}
			}
		}()
		code, out, errs := kgen(args...)
		done <- res{code: code, out: out, errs: errs}
	}()
	select {
	case r := <-done:
		if r.panicked != nil {
			t.Fatalf("kgen %s: panic %v", strings.Join(args, " "), r.panicked)
		}
		return r.code, r.out, r.errs
	case <-time.After(limit):
		t.Fatalf("kgen %s: no answer in %v", strings.Join(args, " "), limit)
		return 0, "", ""
	}
}

// TestProbe9Flags: absurd counts and networks are usage errors naming the flag and its
// range. Before: tune -reps 2^40 (or -warmup) ran for ever keeping a sample a rep, and
// held the tuning lock of its shape so that every later tune of it waited; run --network
// 1000000h,1e9 overflowed the emulator's clock and reported wrong values ("1984 of 8000
// values differ").
func TestProbe9Flags(t *testing.T) {
	t.Setenv(tune.DirEnv, t.TempDir())
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "emu", "-reps", "1099511627776"}, []string{"-reps 1099511627776", fmt.Sprint(tune.MaxCount)}},
		{[]string{"tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "emu", "-warmup", "1099511627776"}, []string{"-warmup 1099511627776", fmt.Sprint(tune.MaxCount)}},
		{[]string{"run", "nvshmem_allgather_ring", "--ranks", "8", "--nodes", "4", "--network", "1000000h,1e9"}, []string{`latency "1000000h"`, "at most 1h"}},
		{[]string{"run", "nvshmem_allgather_ring", "--ranks", "8", "--nodes", "4", "--network", "1us,1e-300"}, []string{`bandwidth "1e-300"`, "at least 1"}},
		{[]string{"run", "hier_allreduce_sum", "--ranks", "8", "--nodes", "1099511627776"}, []string{"--nodes 1099511627776"}},
		{[]string{"launch", "-n", "2", "--nodes", "1099511627776", "--backend", "emu", "--", "true"}, []string{"--nodes 1099511627776"}},
		{[]string{"launch", "-n", "2", "--backend", "emu", "--", ""}, []string{"no program given"}},
		{[]string{"tune", "gemm", "-shapes", "64x64x64,", "--backend", "emu"}, []string{`"" is not MxNxK`}},
		{[]string{"tune", "gemm", "-shapes", "+64x64x64", "--backend", "emu"}, []string{`"+64" is not a positive extent`}},
		{[]string{"tune", "gemm", "-shapes", "9223372036854775807x64x64", "--backend", "emu"}, []string{"at most 2^31-1"}},
	} {
		code, out, errs := kgenWithin(t, time.Minute, c.args...)
		ok := code == 2 && out == "" && strings.Count(errs, "\n") == 1
		for _, w := range c.want {
			ok = ok && strings.Contains(errs, w)
		}
		if !ok {
			t.Errorf("kgen %s: exit %d, stdout %q, stderr %q; want 2 and one line containing %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
	// The network's bounds themselves run and pass.
	if code, out, errs := kgenWithin(t, time.Minute, "run", "nvshmem_allgather_ring", "--ranks", "4", "--nodes", "2", "--network", "1h,1"); code != 0 || !strings.Contains(out, "ok:") {
		t.Errorf("run --network 1h,1: exit %d, %s %s", code, out, errs)
	}
}

// TestProbe9CheckFiles: kgen check of binary junk, an empty file, a 3 MB comment line, a
// byte-order mark, CRLF line ends, a folder named .ptx, /dev/null and one file twice
// answers promptly with a row per file, a bounded message, and exit 0, 1 or 2 as the doc
// says (nothing found).
func TestProbe9CheckFiles(t *testing.T) {
	tooltest.Ptxas(t)
	dir := t.TempDir()
	junk := make([]byte, 5000)
	for i := range junk {
		junk[i] = byte(i*131 + i/7)
	}
	head := ".version 8.4\n.target sm_90\n.address_size 64\n"
	entry := ".visible .entry k()\n{\n\tret;\n}\n"
	files := map[string]string{
		"junk.ptx":  string(junk),
		"empty.ptx": "",
		"long.ptx":  head + "// " + strings.Repeat("x", 3<<20) + "\n",
		"bom.ptx":   "\ufeff" + head,
		"crlf.ptx":  strings.ReplaceAll(head+entry, "\n", "\r\n"),
		"ok.ptx":    head + entry,
		"nul.ptx":   head + entry + "\x00\x00",
		"long2.ptx": head + strings.Repeat("\tret;", 1<<18) + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.ptx"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file  string
		codes []int
	}{
		{"junk.ptx", []int{1}}, {"empty.ptx", []int{1}}, {"long.ptx", []int{0, 1}}, {"bom.ptx", []int{1}},
		{"crlf.ptx", []int{0, 1}}, {"nul.ptx", []int{1}}, {"long2.ptx", []int{1}}, {"folder.ptx", []int{2}},
	} {
		p := filepath.Join(dir, c.file)
		code, out, errs := kgenWithin(t, time.Minute, "check", p)
		good := false
		for _, want := range c.codes {
			good = good || code == want
		}
		if !good || len(out)+len(errs) > 4000 {
			t.Errorf("check %s: exit %d (want %v), %d bytes of output: %.300q %.300q", c.file, code, c.codes, len(out)+len(errs), out, errs)
		}
		if code == 1 && !strings.Contains(errs, p) {
			t.Errorf("check %s: failure does not name the file: %.300q", c.file, errs)
		}
	}
	if code, _, errs := kgenWithin(t, time.Minute, "check", "/dev/null"); code != 2 || !strings.Contains(errs, "not a regular file") {
		t.Errorf("check /dev/null: exit %d, %q", code, errs)
	}
}
