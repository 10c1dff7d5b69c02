package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/tune"
)

// TestProbe12SingleGPU: kgen run --ranks N (N > 1) or --weak of a single-GPU kernel is a
// usage error saying so, nothing on stdout. Before: `kgen run axpy --ranks 4` printed "ok:
// ... on 4 simulated GPU(s)" for a check that ran on one emulated device, and --weak (which
// delays only stores to another GPU's or multicast memory) was taken and changed nothing.
// The multi-GPU kernels (a collective, a fused GEMM) still take both.
func TestProbe12SingleGPU(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "axpy", "--ranks", "4"}, []string{"--ranks 4", "axpy is a single-GPU kernel"}},
		{[]string{"run", "gemm", "--ranks", "2", "--size", "4096"}, []string{"--ranks 2", "gemm is a single-GPU kernel"}},
		{[]string{"run", "gemm", "--target", "sm_90a", "--ranks", "2"}, []string{"--ranks 2", "single-GPU kernel"}},
		{[]string{"run", "softmax", "--cols", "64", "--ranks", "2"}, []string{"--ranks 2", "softmax is a single-GPU kernel"}},
		{[]string{"run", "attention", "--ranks", "8"}, []string{"--ranks 8"}},
		{[]string{"run", "vector_add", "--weak"}, []string{"--weak", "vector_add is a single-GPU kernel"}},
		{[]string{"run", "transpose", "--weak", "--seed", "3"}, []string{"--weak"}},
	} {
		code, out, errs := kgenWithin(t, time.Minute, c.args...)
		ok := code == 2 && out == "" && strings.Count(errs, "\n") == 1 && !strings.Contains(out, "ok")
		for _, w := range c.want {
			ok = ok && strings.Contains(errs, w)
		}
		if !ok {
			t.Errorf("kgen %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
	// ref.SingleGPU classifies: every kernel whose check does not span the nodes is a
	// single-GPU one or a fused GEMM (which runs on --ranks GPUs).
	for _, k := range ref.Kernels() {
		ok, why := ref.SpansNodes(k)
		if !ok && !ref.SingleGPU(k) && !strings.Contains(why, "fused GEMM") {
			t.Errorf("%s: SpansNodes says %q: neither single-GPU nor a fused GEMM", k, why)
		}
	}
	sg := func(k string) bool { return ref.SingleGPU(k) }
	if !sg("axpy") || !sg("gemm_sm90") || sg("ag_gemm") || sg("p2p_allgather") || sg("hier_allreduce_sum") {
		t.Errorf("SingleGPU: axpy %v, gemm_sm90 %v, ag_gemm %v, p2p_allgather %v, hier_allreduce_sum %v; want true, true, false, false, false",
			sg("axpy"), sg("gemm_sm90"), sg("ag_gemm"), sg("p2p_allgather"), sg("hier_allreduce_sum"))
	}
	if code, out, errs := kgenWithin(t, time.Minute, "run", "p2p_allgather", "--ranks", "2", "--weak"); code != 0 || !strings.Contains(out, "ok:") {
		t.Errorf("run p2p_allgather --ranks 2 --weak: exit %d, %q %q; want ok", code, out, errs)
	}
}

// failWriter fails every write, as standard output on a full disk or a closed pipe does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestProbe12LostOutput: a command whose standard output cannot be written exits 1 saying
// so. Before: kgen run (its "ok: ..." report), kgen help and kgen tune exited 0 with their
// output lost (`kgen run axpy >/dev/full`).
func TestProbe12LostOutput(t *testing.T) {
	for _, args := range [][]string{{"run", "axpy"}, {"help"}, {"-h"}, {"help", "run"}, {"layout", "(2,2):(1,2)"}} {
		var errs strings.Builder
		code := run(args, failWriter{}, &errs)
		if code != 1 || !strings.Contains(errs.String(), "no space left on device") || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("kgen %s into a failing stdout: exit %d, %q; want exit 1 and one line naming the write error", strings.Join(args, " "), code, errs.String())
		}
	}
}

// TestProbe12TuneNotCached: kgen tune whose winner cannot be stored (its -dir cannot be
// made: a path below a regular file) prints the timings and exits 1 saying the winner was
// NOT cached. Before: it printed "NOT cached" and exited 0, though the cache is what tune
// is for (ops.Matmul reads the winners from it).
func TestProbe12TuneNotCached(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tune.DirEnv, t.TempDir())
	code, out, errs := kgenWithin(t, 5*time.Minute, "tune", "gemm", "-m", "64", "-n", "64", "-k", "64", "--backend", "emu", "-reps", "1", "-warmup", "1", "-dir", filepath.Join(file, "sub"))
	if code != 1 || !strings.Contains(out, "NOT cached") || !strings.Contains(errs, "NOT cached") || !strings.Contains(errs, "64x64x64") {
		t.Errorf("tune into an impossible -dir: exit %d, stdout %q, stderr %q; want exit 1 saying the winner was not cached", code, out, errs)
	}
}

// TestProbe12LayoutInput: a layout the drawing refuses (rank above 2, a thread-value
// result of rank 3, a thread layout mapping outside its tile) is a usage error (exit 2)
// like any other bad layout, and --mma with --tv is refused. Before: the first three exited
// 1 as though kgen had failed, and --tv beside --mma was dropped silently.
func TestProbe12LayoutInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"layout", "()"}, "rank-1 or rank-2"},
		{[]string{"layout", "(2,2,2):(1,2,4)"}, "rank-1 or rank-2"},
		{[]string{"layout", "Sw<3,0,3> o 0 o (8,8,8):(64,8,1)"}, "rank-1 or rank-2"},
		{[]string{"layout", "--tv", "(4,8):(8,1)", "(2,2,2):(1,2,4)"}, "rank > 2"},
		{[]string{"layout", "--tv", "(4,8):(0,0)", "(2,2):(1,2)"}, "outside"},
		{[]string{"layout", "--tv", "--mma", "MMA_16x8x16_F32BF16BF16F32"}, "--mma with --tv"},
	} {
		code, out, errs := kgen(c.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("kgen %q: exit %d, stdout %.100q, stderr %q; want exit 2 and one line containing %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestProbe12CheckFiles: kgen check - - is a usage error (standard input is read once; the
// second was checked as an empty module and failed), and a folder is called a folder, not
// "d---------".
func TestProbe12CheckFiles(t *testing.T) {
	stdin = strings.NewReader(".version 8.0\n.target sm_80\n.address_size 64\n")
	defer func() { stdin = os.Stdin }()
	if code, out, errs := kgen("check", "-", "-"); code != 2 || out != "" || !strings.Contains(errs, "- given twice") {
		t.Errorf("check - -: exit %d, %q %q; want exit 2, - given twice", code, out, errs)
	}
	dir := filepath.Join(t.TempDir(), "d.ptx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := kgen("check", dir); code != 2 || !strings.Contains(errs, "(a folder)") {
		t.Errorf("check %s: exit %d, %q; want exit 2 calling it a folder", dir, code, errs)
	}
}

// TestProbe12CheckAssemblesWhatItRead: ptxas assembles kgen check's own copy of the module,
// the text kgen's rules checked, not the path again (which may have been replaced since:
// a FIFO there blocked ptxas, other text was reported as checked). The copy's name never
// shows: ptxas's messages name the file as given.
func TestProbe12CheckAssemblesWhatItRead(t *testing.T) {
	dir := t.TempDir()
	f, err := readPTXFile(filepath.Join(dir, "x.ptx"), t.TempDir(), 0)
	if err == nil || f != nil {
		t.Fatalf("a missing file: %v", err)
	}
	src := filepath.Join(dir, "k.ptx")
	text := ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tbogus_op;\n\tret;\n}\n"
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	f, err = readPTXFile(src, tmp, 3)
	if err != nil {
		t.Fatal(err)
	}
	if f.path == src || filepath.Dir(f.path) != tmp {
		t.Errorf("ptxas would read %s, not kgen's copy in %s", f.path, tmp)
	}
	if b, err := os.ReadFile(f.path); err != nil || string(b) != text {
		t.Errorf("the copy holds %q, %v; want the text read", b, err)
	}
}

// TestProbe12DevlibOutputs: devlib's output flags are checked before the build. --each with
// --list or --signatures is a usage error (before: DIR was ignored and the list printed);
// -o naming a folder and --each naming a file are exit 1 naming the flag, at once. Before:
// -o FOLDER built, then failed with "rename /.tmp.tmpNNN FOLDER: file exists" (a temporary
// file made in the folder's parent); --each FILE failed only after every unit was built.
func TestProbe12DevlibOutputs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"devlib", "--list", "--each", dir}, 2, "--each DIR with --list or --signatures"},
		{[]string{"devlib", "--signatures", "--each", dir, "--funcs", "nvshmem_my_pe"}, 2, "--each DIR with --list or --signatures"},
		{[]string{"devlib", "--target", "sm_90", "--funcs", "nvshmem_my_pe", "-o", dir}, 1, "-o " + dir + " is a folder"},
		{[]string{"devlib", "--target", "sm_90", "--funcs", "nvshmem_my_pe", "--each", file}, 1, "--each " + file + " is not a folder"},
	} {
		code, out, errs := kgenWithin(t, 10*time.Second, c.args...)
		if code != c.code || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("kgen %q: exit %d, stdout %.100q, stderr %q; want exit %d and one line containing %q", c.args, code, out, errs, c.code, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%s: written into: %v", dir, entries)
	}
}

// TestProbe12LaunchMasterAddr: a --master-addr holding a line break or a space is a usage
// error quoting it on one line. Before: it reached the bootstrap, whose error printed the
// line break raw and split the message over two lines.
func TestProbe12LaunchMasterAddr(t *testing.T) {
	for _, a := range []string{"x\ny", "a b", "\x1b[2J"} {
		code, _, errs := kgen("launch", "-n", "2", "--backend", "cuda", "--master-addr", a, "--", "true")
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--master-addr") || strings.Contains(errs, "\x1b") {
			t.Errorf("--master-addr %q: exit %d, %q; want exit 2 and one quoted line", a, code, errs)
		}
	}
}

// TestProbe12GenOtherPackage: kgen gen into a folder whose Go files the go tool builds
// declare another package (a hand-written file, or an earlier kgen gen's output of another
// --pkg) is a usage error naming the file and its package, nothing written. Before: it wrote
// <pkg>_kgen.go beside them and exited 0, leaving a folder that does not compile ("found
// packages v and w"). Tests (package x_test), a `//go:build ignore` generator of package
// main and the generated file of the same --pkg do not count.
func TestProbe12GenOtherPackage(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"gen.go":      "//go:build ignore\n\npackage main\n\nfunc main() {}\n",
		"doc.go":      "// Package v is generated.\npackage v\n",
		"v_x_test.go": "package v_test\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"gen", "axpy", "--dtype", "f32", "--targets", "sm_80", "-o", dir}
	for i := 0; i < 2; i++ { // the second run finds its own v_kgen.go
		if code, _, errs := kgen(append(args, "--pkg", "v")...); code != 0 {
			t.Fatalf("--pkg v into a folder of package v: exit %d, %s", code, errs)
		}
	}
	before, _ := os.ReadDir(dir)
	for _, c := range []struct{ pkg, file, other string }{{"w", "doc.go", "v"}, {"π", "doc.go", "v"}} {
		code, out, errs := kgen(append(args, "--pkg", c.pkg)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, filepath.Join(dir, c.file)+" is package "+c.other) {
			t.Errorf("--pkg %s into a folder of package v: exit %d, %q; want exit 2 naming %s (package %s)", c.pkg, code, errs, c.file, c.other)
		}
	}
	if err := os.Remove(filepath.Join(dir, "doc.go")); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kgen(append(args, "--pkg", "w")...)
	if code != 2 || !strings.Contains(errs, filepath.Join(dir, "v_kgen.go")+" is package v") {
		t.Errorf("--pkg w beside an earlier --pkg v's output: exit %d, %q; want exit 2 naming v_kgen.go", code, errs)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before)-1 {
		t.Errorf("files written by refused runs: before %v, after %v", before, after)
	}
}
