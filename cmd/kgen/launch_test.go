package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

func TestLaunchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "-n", "2"}, "no program"},
		{[]string{"launch", "-n", "0", "--", "true"}, "at least 1"},
		{[]string{"launch", "--backend", "tpu", "--", "true"}, "cuda or emu"},
		{[]string{"launch", "--master-port", "70000", "--", "true"}, "65535"},
		{[]string{"launch", "--bogus", "--", "true"}, "bogus"},
		{[]string{"launch", "-n", "65", "--backend", "emu", "--", "true"}, "at most 64"},
		{[]string{"launch", "--backend", "emu", "--master-addr", "x", "--", "true"}, "--master-addr"},
		{[]string{"launch", "--backend", "emu", "--master-port", "1234", "--", "true"}, "--master-port"},
	} {
		code, _, errs := kgen(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := kgen("launch", "--help"); code != 0 || !strings.Contains(errs, "WORLD_SIZE") {
		t.Errorf("--help: exit %d: %s", code, errs)
	}
	if code, _, errs := kgen("launch", "-n", "1", "--", "/nonexistent/prog"); code != 1 || !strings.Contains(errs, "/nonexistent/prog") {
		t.Errorf("missing program: exit %d: %s", code, errs)
	}
}

// rankProg builds jit/testdata/rankprog, the multi-rank test program.
func rankProg(t *testing.T) string {
	t.Helper()
	goTool := tooltest.Go(t)
	bin := filepath.Join(t.TempDir(), "rankprog")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/kgen-dev/kgen/jit/testdata/rankprog")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build rankprog: %v\n%s", err, out)
	}
	return bin
}

func TestLaunchEmu(t *testing.T) {
	bin := rankProg(t)
	t.Setenv("RANK", "7") // kgen launch --backend emu must not pass these on
	t.Setenv("KGEN_BACKEND", "cuda")
	code, out, errs := kgen("launch", "-n", "4", "--backend", "emu", "--", bin)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, r := range []string{"rank 0 of 4 ok on emu", "rank 1 of 4 ok", "rank 2 of 4 ok", "rank 3 of 4 ok"} {
		if !strings.Contains(out, r) {
			t.Errorf("output lacks %q:\n%s", r, out)
		}
	}
	// --startup: every rank reports its time to the first launch.
	code, _, errs = kgen("launch", "-n", "2", "--backend", "emu", "--startup", "--", bin)
	if code != 0 || !strings.Contains(errs, "kgen: rank 0: first launch ") || !strings.Contains(errs, "kgen: rank 1: first launch ") || !strings.Contains(errs, "NVSHMEM init") {
		t.Fatalf("--startup: exit %d\n%s", code, errs)
	}
	code, _, errs = kgen("launch", "-n", "2", "--backend", "cuda", "--startup", "--", "sh", "-c", `test "$KGEN_STARTUP" = 1`)
	if code != 0 {
		t.Fatalf("--startup does not reach the cuda ranks: exit %d\n%s", code, errs)
	}
	t.Setenv("RANKPROG_FAIL", "2")
	code, _, errs = kgen("launch", "-n", "4", "--backend", "emu", bin)
	if code != 3 || !strings.Contains(errs, "rank 2 failed") || !strings.Contains(errs, "exit code 3") {
		t.Fatalf("a failing rank: exit %d\n%s", code, errs)
	}
	// --nodes: the emulator's ranks on 2 nodes; rankprog's ring reaches the next rank by a
	// peer pointer, which the other node's rank does not have.
	t.Setenv("RANKPROG_FAIL", "")
	code, _, errs = kgen("launch", "-n", "4", "--nodes", "2", "--backend", "emu", "--", "sh", "-c", `test "$KGEN_EMU_NODES" = 2 && test "$LOCAL_WORLD_SIZE" = 2 && test "$WORLD_SIZE" = 4`)
	if code != 0 {
		t.Fatalf("--nodes 2: the environment: exit %d\n%s", code, errs)
	}
	code, _, errs = kgen("launch", "-n", "4", "--nodes", "2", "--backend", "emu", "--", bin)
	if code == 0 || !strings.Contains(errs, "another node") {
		t.Fatalf("--nodes 2: rankprog's peer-pointer ring across nodes: exit %d, want a failure naming the other node\n%s", code, errs)
	}
	// KGEN_BACKEND picks the backend when --backend is not given.
	t.Setenv("RANKPROG_FAIL", "")
	t.Setenv("KGEN_BACKEND", "emu")
	if code, out, errs := kgen("launch", "-n", "2", "--", bin); code != 0 || !strings.Contains(out, "rank 1 of 2 ok") {
		t.Fatalf("KGEN_BACKEND=emu: exit %d\n%s%s", code, out, errs)
	}
}

// TestLaunchCUDAProcesses: the cuda backend starts N processes with torchrun's environment
// and passes on the first failure's exit status; no GPU is needed for that.
func TestLaunchCUDAProcesses(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	code, out, errs := kgen("launch", "-n", "2", "--backend", "cuda", "--", "sh", "-c", `echo "r=$RANK w=$WORLD_SIZE b=$KGEN_BACKEND"`)
	if code != 0 || !strings.Contains(out, "[rank 1] r=1 w=2 b=cuda") || !strings.Contains(out, "[rank 0] r=0 w=2") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = kgen("launch", "-n", "2", "--backend", "cuda", "--grace", "1s", "--", "sh", "-c", `test "$RANK" = 1 && exit 3; sleep 20`)
	if code != 3 || !strings.Contains(errs, "rank 1 failed") {
		t.Fatalf("exit %d, want 3\n%s", code, errs)
	}
}
