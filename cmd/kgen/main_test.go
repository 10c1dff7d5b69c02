package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/jit"
)

func kgen(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestPTXIsDeterministicAndAssembles(t *testing.T) {
	code, a, errs := kgen("ptx", "vector_add", "--target", "sm_90")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, b, _ := kgen("ptx", "--target", "sm_90", "vector_add")
	if a != b {
		t.Fatal("output differs between runs")
	}
	ptxas := tooltest.Ptxas(t)
	f := filepath.Join(t.TempDir(), "v.ptx")
	os.WriteFile(f, []byte(a), 0o644)
	if out, err := exec.Command(ptxas, "-arch=sm_90", f, "-o", f+".cubin").CombinedOutput(); err != nil {
		t.Fatalf("ptxas: %v\n%s", err, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"ptx", "nosuch"}, []string{`"nosuch"`, "vector_add", "axpy"}},
		{[]string{"ptx", "vector_add", "--target", "sm_1"}, []string{`"sm_1"`, "sm_80", "sm_90"}},
		{[]string{"ptx", "vector_add", "--dtype", "f99"}, []string{`"f99"`, "f32", "f16"}},
		{[]string{"ptx", "vector_add", "--bogus"}, []string{"bogus"}},
		{[]string{"ptx"}, []string{"KERNEL"}},
		{[]string{"frobnicate"}, []string{`"frobnicate"`, "ptx", "list"}},
	} {
		code, _, errs := kgen(c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
		line := strings.TrimSpace(errs)
		if c.args[len(c.args)-1] != "--bogus" && strings.Contains(line, "\n") {
			t.Errorf("%v: error is not one line: %q", c.args, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: error %q does not mention %q", c.args, errs, w)
			}
		}
	}
}

func TestList(t *testing.T) {
	code, out, _ := kgen("list")
	if code != 0 || !strings.Contains(out, "vector_add") || !strings.Contains(out, "axpy") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestOutputFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "a.ptx")
	if code, _, e := kgen("ptx", "axpy", "--dtype", "f16", "--target", "sm_80", "-o", f); code != 0 {
		t.Fatal(e)
	}
	b, err := os.ReadFile(f)
	if err != nil || !strings.Contains(string(b), ".entry axpy_f16") {
		t.Fatalf("%v %s", err, b)
	}
}

func TestRun(t *testing.T) {
	code, out, errs := kgen("run", "transpose", "--size", "4000", "--dtype", "f32", "--seed", "3")
	if code != 0 || !strings.Contains(out, "match the Go reference") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := kgen("run", "transpose", "--size", "3", "--dtype", "f32"); code != 2 || !strings.Contains(errs, "multiple") {
		t.Fatalf("odd size: exit %d: %s", code, errs)
	}
	if code, _, _ := kgen("run", "transpose", "--ranks", "0"); code != 2 {
		t.Fatalf("ranks 0: exit %d", code)
	}
}

// TestRunNodes: kgen run with a topology: the NVSHMEM ring collectives run across 2 nodes x
// 2 GPUs (and 3 x 2 with a slow network, in weak mode), while a peer-pointer and a
// multimem collective are refused with the emulator's errors naming the Go line.
func TestRunNodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nvshmem_allgather_ring", "--ranks", "4", "--nodes", "2", "--size", "4004"}, "ok: nvshmem_allgather_ring f32 n=1001 gpus=4"},
		{[]string{"nvshmem_reducescatter_ring_sum", "--ranks", "6", "--nodes", "3", "--network", "20us,1e9", "--weak", "--seed", "2", "--dtype", "bf16"}, "ok: nvshmem_reducescatter_ring_sum bf16"},
	} {
		code, out, errs := kgen(append([]string{"run"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "nodes") {
			t.Errorf("kgen run %v: exit %d, want %q in: %s %s", c.args, code, c.want, out, errs)
		}
	}
	// The environment's form, as kgen launch --nodes passes it on.
	t.Setenv(jit.EmuNodesEnv, "2")
	t.Setenv(jit.EmuNetworkEnv, "5us,2e9")
	if code, out, errs := kgen("run", "nvshmem_ring_signal", "--ranks", "4", "--size", "404"); code != 0 || !strings.Contains(out, "in 2 nodes") {
		t.Errorf("%s=2: exit %d: %s %s", jit.EmuNodesEnv, code, out, errs)
	}
	t.Setenv(jit.EmuNetworkEnv, "fast")
	if code, _, errs := kgen("run", "nvshmem_ring_signal", "--ranks", "4"); code != 2 || !strings.Contains(errs, jit.EmuNetworkEnv) {
		t.Errorf("%s=fast: exit %d: %s", jit.EmuNetworkEnv, code, errs)
	}
	// A node count from the environment is named as the environment's, not as --nodes.
	t.Setenv(jit.EmuNetworkEnv, "")
	t.Setenv(jit.EmuNodesEnv, "3")
	if code, _, errs := kgen("run", "nvshmem_ring_signal", "--ranks", "4"); code != 2 || !strings.Contains(errs, jit.EmuNodesEnv+"=3") || strings.Contains(errs, "--nodes 3") {
		t.Errorf("%s=3 with 4 ranks: exit %d: %s", jit.EmuNodesEnv, code, errs)
	}
	t.Setenv(jit.EmuNodesEnv, "")
	t.Setenv(jit.EmuNetworkEnv, "")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"p2p_allreduce_1shot_sum", "--ranks", "4", "--nodes", "2"}, []string{"access to another node's memory", "(node 0)", "(node 1)", "kernels/"}},
		{[]string{"mm_allreduce_1shot_sum", "--ranks", "4", "--nodes", "2"}, []string{"multicast", "span 2 nodes", "kernels/"}},
	} {
		code, _, errs := kgen(append([]string{"run"}, c.args...)...)
		if code == 0 {
			t.Errorf("kgen run %v succeeded across nodes", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("kgen run %v: error does not name %q: %s", c.args, w, errs)
			}
		}
	}
}

// TestRunChoosesRowKernel: with --cols, softmax and row_sum run the kernel the host picks
// for the emulated device (16 SMs): the split kernel for 15 rows of 16384 elements, the
// one-block kernel for 16 rows, and the named kernel with --exact.
func TestRunChoosesRowKernel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"softmax", "--rows", "15", "--cols", "16384"}, "ok: softmax_split f32 15x16384"},
		{[]string{"row_sum", "--size", "65536", "--cols", "16384", "--dtype", "bf16"}, "ok: row_sum_split bf16 2x16384"},
		{[]string{"softmax", "--rows", "16", "--cols", "16384"}, "ok: softmax f32 16x16384"},
		{[]string{"row_sum", "--rows", "15", "--cols", "16383"}, "ok: row_sum f32 15x16383"},
		{[]string{"softmax", "--rows", "15", "--cols", "16384", "--exact"}, "ok: softmax f32 15x16384"},
		{[]string{"softmax_split", "--rows", "16", "--cols", "16384"}, "ok: softmax_split f32 16x16384"},
	} {
		code, out, errs := kgen(append([]string{"run"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("kgen run %v: exit %d, want %q in: %s %s", c.args, code, c.want, out, errs)
		}
	}
}

func TestCheck(t *testing.T) {
	tooltest.Ptxas(t)
	code, out, errs := kgen("check", "vector_add", "--target", "sm_90")
	if code != 0 || !strings.Contains(out, "REGISTERS") || !strings.Contains(out, "2 variants, 0 failed") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if !strings.Contains(errs, "2/2 variants assembled") {
		t.Errorf("no progress line: %q", errs)
	}
}

func TestDevlibUsage(t *testing.T) {
	// --target is read as everywhere else (kgen ptx, check, gen): a ptx.Target.
	if code, _, errs := kgen("devlib", "--target", "sm_1"); code != 2 || !strings.Contains(errs, `unknown target "sm_1" (valid: sm_80,`) {
		t.Errorf("devlib --target sm_1: exit %d, stderr %q; want 2, the bad target named and the valid ones", code, errs)
	}
	if code, _, errs := kgen("devlib"); code != 2 || !strings.Contains(errs, "--target is required") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, _, errs := kgen("devlib", "--target", "sm_90", "-o", "x.ptx", "--each", "d"); code != 2 || !strings.Contains(errs, "not both") {
		t.Errorf("-o with --each: exit %d: %s", code, errs)
	}
	if code, _, errs := kgen("devlib", "--target", "sm_90", "--objects"); code != 2 || !strings.Contains(errs, "go with --each") {
		t.Errorf("--objects without --each: exit %d: %s", code, errs)
	}
}

func TestLayout(t *testing.T) {
	f := filepath.Join(t.TempDir(), "l.svg")
	code, out, errs := kgen("layout", "(2,3):(3,1)", "--svg", f)
	if code != 0 || !strings.Contains(out, "5") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "<svg") {
		t.Fatalf("no svg: %v", err)
	}
	code, out, errs = kgen("layout", "--tv", "(2,2):(2,1)", "(1,2):(2,1)")
	if code != 0 || !strings.Contains(out, "T0") || !strings.Contains(out, "V1") {
		t.Fatalf("tv: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := kgen("layout", "(2,3):(1)"); code != 2 || !strings.Contains(errs, "bad layout") {
		t.Fatalf("bad layout: exit %d: %s", code, errs)
	}
	// A swizzled layout, as ComposedLayout.String prints it: row 1 is 8 + (n xor 1).
	sw := "Sw<3,0,3> o 0 o (8,8):(8,1)"
	code, out, errs = kgen("layout", sw, "--svg", f)
	if code != 0 || !strings.HasPrefix(out, sw+"\n") || !strings.Contains(out, " 1  |  9 |  8 | 11 | 10 |") {
		t.Fatalf("%s: exit %d: %s %s", sw, code, out, errs)
	}
	if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), ">63<") {
		t.Fatalf("no svg of the swizzled layout: %v", err)
	}
	if code, _, errs := kgen("layout", "Sw<3,0,1> o 0 o (8,8):(8,1)"); code != 2 || !strings.Contains(errs, "invalid swizzle") {
		t.Fatalf("bad swizzle: exit %d: %s", code, errs)
	}
}

func TestLayoutMMA(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mma.svg")
	code, out, errs := kgen("layout", "--mma", "MMA_16x8x16_F32BF16BF16F32", "--svg", f)
	// The PTX ISA's m16n8k16 A fragment: lane 5 (g=1, t=1) holds a0,a1 at row 1, columns 2-3.
	if code != 0 || !strings.Contains(out, "|T00V0|T00V1|T01V0|T01V1|") || !strings.Contains(out, "|T04V0|T04V1|T05V0|T05V1|") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	for _, p := range []string{"A", "B", "C"} {
		if b, err := os.ReadFile(strings.TrimSuffix(f, ".svg") + "_" + p + ".svg"); err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("no svg of %s: %v", p, err)
		}
	}
	if code, _, errs := kgen("layout", "--mma", "MMA_1x1x1"); code != 2 || !strings.Contains(errs, "MMA_16x8x16_F32F16F16F32") {
		t.Fatalf("unknown atom: exit %d: %s", code, errs)
	}
}

func TestGen(t *testing.T) {
	d := t.TempDir()
	code, _, errs := kgen("gen", "vector_add", "--pkg", "vadd", "-o", d, "--dtype", "f32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"vadd_kgen.go", "vector_add_f32.sm_80.ptx", "vector_add_f32.sm_90.ptx"} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			t.Error(err)
		}
	}
	if code, _, _ := kgen("gen", "vector_add"); code != 2 {
		t.Errorf("missing --pkg: exit %d", code)
	}
}

func TestCheckParsesTheEntrysReport(t *testing.T) {
	const report = `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 64 bytes smem
ptxas info    : Function properties for f
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
`
	var j checkRow
	if err := j.parseInfo(report, "k"); err != nil {
		t.Fatal(err)
	}
	if j.regs != 12 || j.smem != 64 || j.spillSt != 8 || j.spillLd != 4 {
		t.Errorf("parsed %+v; want 12 registers, 64 B smem, 8/4 B spills", j)
	}
	if err := j.parseInfo(report, "other"); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("a report without the entry: err = %v", err)
	}
	if err := j.parseInfo("ptxas info    : Compiling entry function 'k' for 'sm_90'\n", "k"); err == nil {
		t.Error("a report without counts parsed")
	}
}

// TestDocListsEveryCommand keeps the package comment's command list in step with the
// registered commands.
func TestDocListsEveryCommand(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src[:strings.Index(string(src), "\npackage main")])
	if len(commands) == 0 {
		t.Fatal("no commands registered")
	}
	for name := range commands {
		if !strings.Contains(doc, "//\tkgen "+name+" ") {
			t.Errorf("the package comment of cmd/kgen does not list `kgen %s`", name)
		}
	}
}

// TestRunPicksTheGemmByTarget: gemm_sm90 and the fused sm_90a kernels run without --target
// (their only target, sm_90a); gemm on sm_90a runs gemm_sm90 (the host's choice) unless
// --exact, and the mma.sync gemm elsewhere; kgen ptx builds gemm_sm90 for sm_90a.
func TestRunPicksTheGemmByTarget(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gemm_sm90", "--size", "4096"}, "ok: gemm_sm90_f16_f16_"},
		{[]string{"gemm", "--target", "sm_90a", "--size", "4096"}, "ok: gemm_sm90_f16_f16_"},
		{[]string{"gemm", "--target", "sm_90a", "--size", "4096", "--exact"}, "ok: gemm_f16_f16_rr_"},
		{[]string{"gemm", "--size", "4096"}, "ok: gemm_f16_f16_rr_"},
		{[]string{"gemm_rs_sm90", "--ranks", "2", "--size", "4096"}, "ok: gemm_rs_sm90_f16_f16_"},
	} {
		code, out, errs := kgen(append([]string{"run"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("kgen run %v: exit %d, want %q in: %s %s", c.args, code, c.want, out, errs)
		}
	}
	code, out, errs := kgen("ptx", "gemm_sm90")
	if code != 0 || !strings.Contains(out, ".target sm_90a") {
		t.Errorf("kgen ptx gemm_sm90: exit %d, %s", code, errs)
	}
}

// TestRunNodesRefused: kgen run --nodes of a kernel that does not span the nodes (a
// single-GPU kernel; a fused GEMM, whose check makes its own machine) is a usage error
// saying so, not "ok ... in 2 nodes".
func TestRunNodesRefused(t *testing.T) {
	for _, k := range []string{"gemm_ar_mc", "ag_gemm_sm90", "gemm_rs_sm90", "gemm_ar_sm90", "gemm_ar_mc_sm90", "ag_gemm", "gemm", "vector_add", "softmax"} {
		code, out, errs := kgen("run", k, "--ranks", "4", "--nodes", "2")
		if code != 2 || !strings.Contains(errs, "--nodes applies to the collective kernels") || strings.Contains(out, "ok") {
			t.Errorf("kgen run %s --ranks 4 --nodes 2: exit %d, out %q, err %q; want a usage error", k, code, out, errs)
		}
	}
}
