package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

// TestEveryUsageErrorIsOneLine runs every subcommand with bad flags and values: each exits 2
// with one line on stderr naming the bad value (and, where there is a list, the valid ones),
// and nothing on stdout.
func TestEveryUsageErrorIsOneLine(t *testing.T) {
	o := filepath.Join(t.TempDir(), "out") // where a gen that wrongly succeeds writes
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "nosuch"}, []string{`"nosuch"`, "ptx", "launch"}},
		{[]string{"help", "ptx", "gen"}, []string{"at most one"}},
		{[]string{"nosuch"}, []string{`"nosuch"`, "ptx"}},
		{[]string{"list", "--bogus"}, []string{"-bogus"}},
		{[]string{"list", "extra"}, []string{`"extra"`}},
		{[]string{"ptx", "--bogus", "vector_add"}, []string{"-bogus"}},
		{[]string{"ptx", "nosuch"}, []string{`"nosuch"`, "vector_add"}},
		{[]string{"ptx", "vector_add", "--target", "sm_1"}, []string{`"sm_1"`, "sm_90"}},
		{[]string{"ptx", "mm_barrier", "--target", "sm_80"}, []string{"mm_barrier", "sm_80", "sm_90"}},
		{[]string{"ptx", "vector_add", "--dtype", "f99"}, []string{`"f99"`, "f32"}},
		{[]string{"ptx", "vector_add", "--target"}, []string{"-target"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "1bad"}, []string{`"1bad"`, "package name"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "func"}, []string{`"func"`}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "__"}, []string{`"__"`, "starts with _", "ignores the file"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "_x"}, []string{`"_x"`, "starts with _"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "_"}, []string{`"_"`, "starts with _"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "main"}, []string{"--pkg main", "no Go file of package main", "func main"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "init"}, []string{`"init"`, "reserved", "cannot be imported"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "a-b"}, []string{`"a-b"`, "not a Go identifier"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "v", "--targets", "sm_80,sm_80"}, []string{"sm_80 listed twice"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "v", "--targets", "sm_99"}, []string{`"sm_99"`, "sm_90"}},
		{[]string{"gen", "-o", o, "mm_barrier", "--pkg", "v", "--targets", "sm_80"}, []string{"mm_barrier", "sm_80"}},
		{[]string{"gen", "-o", o, "vector_add", "--pkg", "v", "--dtype", "f99"}, []string{`"f99"`, "f32"}},
		{[]string{"gen", "-o", o, "nosuch", "--pkg", "v"}, []string{`"nosuch"`}},
		{[]string{"gen", "-o", o, "vector_add"}, []string{"--pkg"}},
		{[]string{"gen", "-o", o, "--pkg", "v", "--nope"}, []string{"-nope"}},
		{[]string{"check", "--dtype", "f64"}, []string{`"f64"`, "f32"}},
		{[]string{"check", "--target", "sm_1"}, []string{`"sm_1"`}},
		{[]string{"check", "nosuch"}, []string{`"nosuch"`}},
		{[]string{"check", "--bogus"}, []string{"-bogus"}},
		{[]string{"devlib", "--target", "sm_900"}, []string{`"sm_900"`, "sm_90"}},
		{[]string{"devlib", "--target", "sm_1"}, []string{`"sm_1"`}},
		{[]string{"devlib"}, []string{"--target is required"}},
		{[]string{"devlib", "--target", "sm_90", "extra"}, []string{`"extra"`}},
		{[]string{"devlib", "--bogus"}, []string{"-bogus"}},
		{[]string{"layout"}, []string{"LAYOUT"}},
		{[]string{"layout", "(2,3):(1)"}, []string{"bad layout"}},
		{[]string{"layout", "2147483648:1"}, []string{`"2147483648:1"`, "65536"}},
		{[]string{"layout", "(65536,65536):(1,65536)"}, []string{"65536"}},
		{[]string{"layout", "--tv", "256:1", "512:1"}, []string{"256 threads x 512 values"}},
		{[]string{"layout", "--tv", "4:1"}, []string{"two layouts"}},
		{[]string{"layout", "--svg"}, []string{"-svg"}},
		{[]string{"run", "vector_add", "--size", "1099511627776"}, []string{"1099511627776", "256 MiB"}},
		{[]string{"run", "vector_add", "--size", "-4"}, []string{"-4"}},
		{[]string{"run", "vector_add", "--size", "6"}, []string{"multiple"}},
		{[]string{"run", "vector_add", "--ranks", "9"}, []string{"--ranks 9", "1..8"}},
		{[]string{"run", "vector_add", "--ranks", "x"}, []string{`"x"`}},
		{[]string{"run", "nvshmem_allgather_ring", "--ranks", "4", "--nodes", "3"}, []string{"--nodes 3", "--ranks 4"}},
		{[]string{"run", "nvshmem_allgather_ring", "--ranks", "4", "--network", "2us,1e9"}, []string{"--network", "without --nodes"}},
		{[]string{"run", "nvshmem_allgather_ring", "--ranks", "4", "--nodes", "2", "--network", "soon"}, []string{`"soon"`, "LATENCY,BYTES_PER_SECOND"}},
		{[]string{"run", "ag_gemm", "--ranks", "4", "--nodes", "2"}, []string{"--nodes 2", "ag_gemm"}},
		{[]string{"run", "nosuch"}, []string{`"nosuch"`}},
		{[]string{"run", "vector_add", "--dtype", "f99"}, []string{`"f99"`}},
		{[]string{"run", "vector_add", "--cols", "3"}, []string{"row kernels", "vector_add"}},
		{[]string{"run", "softmax", "--rows", "3"}, []string{"--rows 3 --cols 0"}},
		{[]string{"run", "softmax", "--rows", "3", "--cols", "4", "--size", "48"}, []string{"--rows 3", "--size 48", "one of them"}},
		{[]string{"run", "softmax", "--size", "20", "--cols", "4"}, []string{"--size 20", "whole number of rows", "16 bytes"}},
		{[]string{"run", "row_sum", "--rows", "65536", "--cols", "1025"}, []string{"--rows 65536 --cols 1025", "256 MiB"}},
		{[]string{"launch", "-n", "9999999999", "--", "true"}, []string{"9999999999", "1024"}},
		{[]string{"launch", "-n", "0", "--", "true"}, []string{"at least 1"}},
		{[]string{"launch", "-n", "65", "--backend", "emu", "--", "true"}, []string{"at most 64"}},
		{[]string{"launch", "--backend", "tpu", "--", "true"}, []string{`"tpu"`, "cuda or emu"}},
		{[]string{"launch", "--timeout", "-1s", "--", "true"}, []string{"--timeout -1s"}},
		{[]string{"launch", "--timeout", "soon", "--", "true"}, []string{`"soon"`}},
		{[]string{"launch", "--master-port", "70000", "--", "true"}, []string{"70000", "65535"}},
		{[]string{"launch", "--grace", "0s", "--", "true"}, []string{"--grace 0s"}},
		{[]string{"launch", "-n", "2"}, []string{"no program"}},
		{[]string{"launch", "-n", "4", "--nodes", "3", "--backend", "emu", "--", "true"}, []string{"--nodes 3", "-n 4"}},
		{[]string{"launch", "-n", "4", "--nodes", "2", "--backend", "cuda", "--", "true"}, []string{"--nodes 2", "one kgen launch"}},
		{[]string{"gen", "-o", "", "vector_add", "--pkg", "v"}, []string{`-o ""`, "empty value"}},
		{[]string{"gen", "-o", o, "vector_add", "vector_add", "--pkg", "v"}, []string{"vector_add named twice"}},
		{[]string{"ptx", "vector_add", "transpose"}, []string{"exactly one", "ag_gemm, ag_gemm_nvshmem", "transpose, "}},
		{[]string{"ptx", "vector_add", "--dtype", ""}, []string{`-dtype ""`, "empty value"}},
		{[]string{"devlib", "--target", "sm_90", "--each", o, "-j", "0"}, []string{"-j 0", "at least 1"}},
		{[]string{"devlib", "--target", "sm_90", "--each", o, "-j", "-1"}, []string{"-j -1", "at least 1"}},
		{[]string{"devlib", "--target", "sm_90", "--funcs", "../../etc/passwd"}, []string{"--funcs", `"../../etc/passwd"`, "not function names"}},
		{[]string{"layout", "(4,\uff18)"}, []string{"unexpected '８'"}},
		{[]string{"layout", "(9223372036854775807,2)"}, []string{`integer "9223372036854775807" out of range`}},
	} {
		code, out, errs := kgen(c.args...)
		if _, err := os.Stat(o); err == nil {
			t.Fatalf("%v: gen wrote %s", c.args, o)
		}
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errs)
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
		if n := strings.Count(errs, "\n"); n != 1 || !strings.HasSuffix(errs, "\n") {
			t.Errorf("%v: stderr is %d lines, want one: %q", c.args, n, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: error %q does not mention %q", c.args, errs, w)
			}
		}
	}
}

// Messages quote bounded excerpts of inputs (a 1 MB layout, flag value or command name gives
// a short line), name a command once ("kgen gen: gen: ..." said it twice), and a failure
// that is not a usage error still exits 1.
func TestMessagesBoundedAndOnce(t *testing.T) {
	huge := strings.Repeat("4,", 1<<19)
	for _, args := range [][]string{
		{"layout", "(" + huge + "x)"},
		{"layout", "Sw<3,0,3> o " + huge},
		{"ptx", "--dtype", huge, "vector_add"},
		{"ptx", "--" + huge},
		{"ptx", "--dtype=" + huge, "vector_add"},
		{huge},
		{"help", huge},
		{"launch", "--backend", huge, "--", "true"},
		{"devlib", "--target", "sm_90", "--funcs", huge + "/x"},
	} {
		code, _, errs := kgen(args...)
		if code != 2 || len(errs) > 600 {
			t.Errorf("kgen %.30s...: exit %d, a %d-byte error: %.300s", strings.Join(args, " "), code, len(errs), errs)
		}
	}
	bad := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kgen("gen", "vector_add", "--pkg", "v", "--dtype", "f32", "-o", filepath.Join(bad, "sub"))
	if code != 1 || strings.Contains(errs, "gen: gen:") || !strings.HasPrefix(errs, "kgen gen: ") {
		t.Errorf("gen into a file's subfolder: exit %d, %q; want exit 1 and the command named once", code, errs)
	}
}

// TestHelp checks that --help and help COMMAND print the usage and exit 0.
func TestHelp(t *testing.T) {
	for name := range commands {
		if code, out, errs := kgen("help", name); code != 0 || !strings.Contains(out, "usage: kgen "+name) {
			t.Errorf("help %s: exit %d: %q %q", name, code, out, errs)
		}
		if code, _, errs := kgen(name, "--help"); code != 0 || !strings.Contains(errs, "usage: kgen "+name) {
			t.Errorf("%s --help: exit %d: %q", name, code, errs)
		}
	}
}

// TestGenIntoNewFolder checks that gen creates its output folder (the README's -o ./vadd on
// a fresh checkout).
func TestGenIntoNewFolder(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "vadd")
	if code, _, errs := kgen("gen", "vector_add", "--pkg", "vadd", "-o", d, "--dtype", "f32"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(d, "vadd_kgen.go")); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchTimeout checks that --timeout stops ranks that run too long, exits 124 and
// names the ranks still running.
func TestLaunchTimeout(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	code, _, errs := kgen("launch", "-n", "3", "--backend", "cuda", "--timeout", "1s", "--grace", "1s", "--",
		"sh", "-c", `test "$RANK" = 1 && exit 0; sleep 30`)
	if code != 124 || !strings.Contains(errs, "timed out after 1s") || !strings.Contains(errs, "ranks still running: 0, 2") {
		t.Fatalf("exit %d, want 124 naming ranks 0 and 2:\n%s", code, errs)
	}
	code, _, errs = kgen("launch", "-n", "2", "--backend", "emu", "--timeout", "1s", "--grace", "1s", "--", "sleep", "30")
	if code != 124 || !strings.Contains(errs, "timed out after 1s") {
		t.Fatalf("emu: exit %d, want 124:\n%s", code, errs)
	}
}

// TestLaunchSIGTERM checks that kgen launch stopped by SIGTERM stops its ranks and exits 143
// (128+15), not 130.
func TestLaunchSIGTERM(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := filepath.Join(t.TempDir(), "kgen")
	build := exec.Command(tooltest.Go(t), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "launch", "-n", "2", "--backend", "cuda", "--grace", "1s", "--", "sh", "-c", "echo up; exec sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for up := 0; up < 2 && sc.Scan(); {
		if strings.Contains(sc.Text(), "up") {
			up++
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit %d, want 143:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "SIGTERM") && !strings.Contains(stderr.String(), "terminated") {
		t.Errorf("stderr does not say the launch was terminated: %s", stderr.String())
	}
}

// TestGenMainJoinsACommand: --pkg main writes the launchers into a command's directory (Go
// files of package main, as examples/vadd's), and is refused for a directory without one
// (the launchers alone would be a package main without func main: no build).
func TestGenMainJoinsACommand(t *testing.T) {
	d := t.TempDir()
	if code, _, errs := kgen("gen", "vector_add", "--pkg", "main", "-o", d, "--dtype", "f32"); code != 2 || !strings.Contains(errs, "no Go file of package main") {
		t.Fatalf("--pkg main into an empty folder: exit %d: %s", code, errs)
	}
	if err := os.WriteFile(filepath.Join(d, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := kgen("gen", "vector_add", "--pkg", "main", "-o", d, "--dtype", "f32"); code != 0 {
		t.Fatalf("--pkg main into a command: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(d, "main_kgen.go")); err != nil {
		t.Fatal(err)
	}
}
