package emu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const oobSrc = `
.visible .entry oob(.param .u64 a, .param .u32 n)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	ld.param.u64 %rd0, [a];
	ld.param.u32 %r0, [n];
	mov.u32 %r1, %tid.x;
	// forgets the bounds check: every thread of the block stores
	mul.wide.u32 %rd1, %r1, 4;
	add.u64 %rd2, %rd0, %rd1;
	st.global.u32 [%rd2], %r1;
	ret;
}`

func TestSanitizerOutOfBounds(t *testing.T) {
	m := asm(t, oobSrc)
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 4*40)
	err := launch1(s, m, "oob", 1, 64, a, uint32(40))
	e := wantErr(t, err, KindOutOfBounds, "kernel oob", "GPU 0", "block (0,0,0)", "thread (40,0,0)",
		"st.global.u32", "sanitizer_test.go:", "right after the end of a 160-byte", "index 40 of a 40-element array")
	if e.Thread != [3]int{40, 0, 0} {
		t.Fatalf("thread %v", e.Thread)
	}
	// asm gives each instruction the Go line its text is on.
	b, rerr := os.ReadFile(filepath.Base(e.Pos.File))
	must(t, rerr)
	if l := strings.Split(string(b), "\n"); e.Pos.Line < 1 || e.Pos.Line > len(l) || strings.TrimSpace(l[e.Pos.Line-1]) != "st.global.u32 [%rd2], %r1;" {
		t.Fatalf("position %s:%d is not the store's line", e.Pos.File, e.Pos.Line)
	}
	t.Log(err)
}

const misalignedSrc = `
.visible .entry mis(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .f32 %f<4>;
	ld.param.u64 %rd0, [a];
	ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd0+4];
	ret;
}`

func TestSanitizerMisaligned(t *testing.T) {
	m := asm(t, misalignedSrc)
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 64)
	wantErr(t, launch1(s, m, "mis", 1, 1, a), KindMisaligned, "not 16-byte aligned", "ld.global.v4.f32")
}

// A barrier that only some threads reach: the others exit.
const exitBarrierSrc = `
.visible .entry exitbar(.param .u64 a)
{
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	setp.ge.u32 %p0, %r0, 40;
	@%p0 bra OUT;
	bar.sync 0;
OUT:
	ret;
}`

func TestSanitizerBarrierDivergenceExit(t *testing.T) {
	m := asm(t, exitBarrierSrc)
	s := newSys(t, 1)
	err := launch1(s, m, "exitbar", 1, 64, uint64(0))
	wantErr(t, err, KindBarrier, "exitbar", "barrier 0", "sanitizer_test.go:")
	t.Log(err)
}

// Two halves of a block wait at two different barrier instructions.
const twoBarriersSrc = `
.visible .entry twobar(.param .u64 a)
{
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	setp.ge.u32 %p0, %r0, 32;
	@%p0 bra OTHER;
	bar.sync 0;
	bra.uni OUT;
OTHER:
	bar.sync 0;
OUT:
	ret;
}`

func TestSanitizerBarrierDivergenceTwoSites(t *testing.T) {
	m := asm(t, twoBarriersSrc)
	s := newSys(t, 1)
	err := launch1(s, m, "twobar", 1, 64, uint64(0))
	wantErr(t, err, KindBarrier, "different barriers", "bar.sync 0")
	t.Log(err)
	// Without the sanitizer the hardware behaviour (both count at barrier 0) is what runs.
	must(t, s.Launch(Launch{Module: m, Entry: "twobar", Grid: D1(1), Block: D1(64), Args: []any{uint64(0)}, Options: Options{NoSanitizer: true}}))
}

// Deadlock: warp 0 waits at barrier 1 for 64 threads; warp 1 waits at barrier 2.
const deadlockSrc = `
.visible .entry dead(.param .u64 a)
{
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	setp.ge.u32 %p0, %r0, 32;
	@%p0 bra OTHER;
	bar.sync 1, 64;
	bra.uni OUT;
OTHER:
	bar.sync 2, 64;
OUT:
	ret;
}`

func TestDeadlock(t *testing.T) {
	m := asm(t, deadlockSrc)
	s := newSys(t, 1)
	err := launch1(s, m, "dead", 1, 64, uint64(0))
	e := wantErr(t, err, KindDeadlock, "every live warp is blocked", "wait at barrier 1 (32 of 64 threads arrived)",
		"wait at barrier 2 (32 of 64 threads arrived)", "bar.sync 1, 64", "sanitizer_test.go:")
	if len(e.Warps) != 2 {
		t.Fatalf("want 2 warp descriptions, got %v", e.Warps)
	}
	t.Log(err)
}

// A spin on a flag nobody sets: not blocked (it runs), so the step budget catches it.
const spinSrc = `
.visible .entry spin(.param .u64 flag)
{
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [flag];
WAIT:
	ld.acquire.gpu.global.u32 %r0, [%rd0];
	setp.eq.u32 %p0, %r0, 0;
	@%p0 bra WAIT;
	ret;
}`

func TestNoProgressSpin(t *testing.T) {
	m := asm(t, spinSrc)
	s := newSys(t, 2)
	flag, _ := s.MallocSymmetric(4)
	err := s.Launch(Launch{Module: m, Entry: "spin", GPUs: s.All(), Grid: D1(2), Block: D1(64),
		ArgsFor: func(g int) []any { return []any{flag.On(g)} }, Options: Options{StepBudget: 200000}})
	wantErr(t, err, KindNoProgress, "no progress after 200000 steps", "warps spinning at", "sanitizer_test.go:", "running (spinning?)")
	t.Log(err)
}

// TestNoProgressLaunchedAlone: the same spin on a symmetric flag launched on GPU 0 alone of
// two (what jit does with a rank's launch it did not gather) says that the kernel waits for
// other GPUs and how to launch it; a spin on private memory does not.
func TestNoProgressLaunchedAlone(t *testing.T) {
	m := asm(t, spinSrc)
	s := newSys(t, 2)
	flag, _ := s.MallocSymmetric(4)
	err := s.Launch(Launch{Module: m, Entry: "spin", GPUs: []int{0}, Grid: D1(1), Block: D1(32),
		Args: []any{flag.On(1)}, Options: Options{StepBudget: 200000}})
	wantErr(t, err, KindNoProgress, "the launch runs on GPU(s) [0] of the System's 2", "spin on symmetric memory", "GPU 1's copy",
		"Launch.GPUs: System.All()", "System.Start", "no progress after 200000 steps")
	t.Log(err)
	priv := mustMalloc(t, s, 0, 4)
	err = s.Launch(Launch{Module: m, Entry: "spin", GPUs: []int{0}, Grid: D1(1), Block: D1(32),
		Args: []any{priv}, Options: Options{StepBudget: 200000}})
	e := wantErr(t, err, KindNoProgress, "no progress after 200000 steps")
	if strings.Contains(e.Msg, "System.Start") {
		t.Fatalf("a spin on private memory: %v", err)
	}
}

// A multi-GPU deadlock through flags is a spin too: every GPU waits for the other's flag
// before setting its own.
func TestMultiGPUFlagCycle(t *testing.T) {
	m := asm(t, `
.visible .entry cyc(.param .u64 mine, .param .u64 theirs)
{
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [mine];
	ld.param.u64 %rd1, [theirs];
WAIT:
	ld.acquire.sys.global.u32 %r0, [%rd0];
	setp.eq.u32 %p0, %r0, 0;
	@%p0 bra WAIT;
	st.release.sys.global.u32 [%rd1], 1;
	ret;
}`)
	s := newSys(t, 2)
	flag, _ := s.MallocSymmetric(4)
	err := s.Launch(Launch{Module: m, Entry: "cyc", GPUs: s.All(), Grid: D1(1), Block: D1(32),
		ArgsFor: func(g int) []any { return []any{flag.On(g), flag.On(1 - g)} },
		Options: Options{StepBudget: 100000}})
	wantErr(t, err, KindNoProgress, "GPU 0", "GPU 1")
}

func TestGenericAddressingAndLocal(t *testing.T) {
	m := asm(t, `
.visible .entry gen(.param .u64 out)
{
	.reg .u64 %rd<12>;
	.reg .u32 %r<8>;
	.reg .pred %p<2>;
	.shared .align 4 .u32 sh[64];
	.local .align 4 .u32 loc[4];
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	mov.u32 %r0, %tid.x;
	mul.wide.u32 %rd1, %r0, 4;
	// shared through a generic pointer
	mov.u64 %rd2, sh;
	cvta.shared.u64 %rd3, %rd2;
	add.u64 %rd4, %rd3, %rd1;
	add.u32 %r1, %r0, 100;
	st.u32 [%rd4], %r1;
	isspacep.shared %p0, %rd4;
	// local through a generic pointer
	mov.u64 %rd5, loc;
	cvta.local.u64 %rd6, %rd5;
	st.u32 [%rd6+8], %r0;
	ld.local.u32 %r2, [loc+8];
	bar.sync 0;
	// read the neighbour's shared slot through the shared window, back from generic
	cvta.to.shared.u64 %rd7, %rd4;
	xor.b32 %r3, %r0, 1;
	mul.wide.u32 %rd8, %r3, 4;
	add.u64 %rd9, %rd2, %rd8;
	ld.shared.u32 %r4, [%rd9];
	add.u32 %r5, %r4, %r2;
	selp.u32 %r6, 1000, 0, %p0;
	add.u32 %r5, %r5, %r6;
	add.u64 %rd10, %rd0, %rd1;
	st.global.u32 [%rd10], %r5;
	ret;
}`)
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 4*64)
	must(t, launch1(s, m, "gen", 1, 64, out))
	got := readU32(t, s, out, 64)
	for i, g := range got {
		if want := uint32((i^1)+100+i) + 1000; g != want {
			t.Fatalf("thread %d: got %d want %d", i, g, want)
		}
	}
}

func TestLaunchArgumentChecks(t *testing.T) {
	m := asm(t, oobSrc)
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 64)
	wantErr(t, launch1(s, m, "oob", 1, 1, a), KindLaunch, "takes 2 arguments (.u64 a, .u32 n), got 1")
	wantErr(t, launch1(s, m, "oob", 1, 1, a, uint64(3)), KindLaunch, "argument 2 (n): Go uint64 is 8 bytes but the parameter is .u32 (4 bytes)")
	wantErr(t, launch1(s, m, "oob", 1, 1, a, "x"), KindLaunch, "unsupported Go type string")
	wantErr(t, launch1(s, m, "oob", 1, 1, a, 1<<40), KindLaunch, "does not fit")
	wantErr(t, launch1(s, m, "nope", 1, 1), KindLaunch, `no kernel "nope"`)
	wantErr(t, launch1(s, m, "oob", 1, 2000, a, 1), KindLaunch, "at most 1024")
	must(t, launch1(s, m, "oob", 1, 16, a, 16))
}

func TestUnsupportedInstruction(t *testing.T) {
	m := asmUnverified(t, `
.visible .entry un(.param .u64 a)
{
	.reg .u32 %r<4>;
	brx.idx %r0, tbl;
	ret;
}`)
	s := newSys(t, 1)
	err := launch1(s, m, "un", 1, 1, uint64(0))
	e := wantErr(t, err, KindUnsupported, "unsupported: brx.idx %u0, tbl; at emu/sanitizer_test.go:")
	_ = e
	t.Log(err)
}
