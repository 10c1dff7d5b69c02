package emu

import (
	"strings"
	"testing"
)

// cpKernels: thread 0 copies 16-byte chunks of src into the shared array with cp.async;
// out receives what the threads read back, at the points each entry names.
const cpKernels = `.shared .align 16 .b8 sm[64];
.visible .entry early(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	cp.async.cg.shared.global [%rd2], [%rd0], 16;
	ld.shared.u32 %u0, [%rd2];
	cp.async.commit_group;
	cp.async.wait_group 0;
	ld.shared.u32 %u1, [%rd2];
	st.global.u32 [%rd1], %u0;
	st.global.u32 [%rd1+4], %u1;
	ret;
}
.visible .entry groups(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	cp.async.ca.shared.global [%rd2], [%rd0], 16;
	cp.async.commit_group;
	cp.async.ca.shared.global [%rd2+16], [%rd0+16], 16;
	cp.async.commit_group;
	cp.async.ca.shared.global [%rd2+32], [%rd0+32], 16;
	cp.async.commit_group;
	cp.async.wait_group 1;
	ld.shared.u32 %u0, [%rd2+16];
	ld.shared.u32 %u1, [%rd2+32];
	st.global.u32 [%rd1], %u0;
	st.global.u32 [%rd1+4], %u1;
	ret;
}
.visible .entry emptygroup(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	cp.async.ca.shared.global [%rd2], [%rd0], 16;
	cp.async.commit_group;
	cp.async.commit_group;
	cp.async.wait_group 1;
	ld.shared.u32 %u0, [%rd2];
	st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry noemptygroup(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	cp.async.ca.shared.global [%rd2], [%rd0], 16;
	cp.async.commit_group;
	cp.async.wait_group 1;
	ld.shared.u32 %u0, [%rd2];
	st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry sync(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	mov.u32 %u2, %tid.x;
	setp.eq.u32 %p0, %u2, 0;
	@%p0 cp.async.ca.shared.global [%rd2], [%rd0], 16;
	cp.async.wait_all;
	bar.sync 0;
	ld.shared.u32 %u0, [%rd2+4];
	setp.eq.u32 %p1, %u2, 33;
	@%p1 st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry waitafterbar(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	mov.u32 %u2, %tid.x;
	setp.eq.u32 %p0, %u2, 0;
	@%p0 cp.async.ca.shared.global [%rd2], [%rd0], 16;
	bar.sync 0;
	cp.async.wait_all;
	ld.shared.u32 %u0, [%rd2+4];
	@!%p0 st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry nobar(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	mov.u32 %u2, %tid.x;
	setp.eq.u32 %p0, %u2, 0;
	@%p0 cp.async.ca.shared.global [%rd2], [%rd0], 16;
	cp.async.wait_all;
	ld.shared.u32 %u0, [%rd2+4];
	@!%p0 st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry write(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	ld.param.u64 %rd0, [src];
	mov.u64 %rd2, sm;
	mov.u32 %u0, 7;
	cp.async.ca.shared.global [%rd2+16], [%rd0], 8;
	cp.async.commit_group;
	st.shared.u32 [%rd2+20], %u0;
	cp.async.wait_group 0;
	ret;
}
.shared .align 8 .b64 mbar;
.visible .entry arrive(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u64 %rd2, sm;
	mov.u64 %rd3, mbar;
	mbarrier.init.shared.b64 [%rd3], 1;
	cp.async.ca.shared.global [%rd2], [%rd0], 4;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%rd3];
WAIT:
	mbarrier.test_wait.parity.shared.b64 %p0, [%rd3], 0;
	@!%p0 bra WAIT;
	ld.shared.u32 %u0, [%rd2];
	st.global.u32 [%rd1], %u0;
	ret;
}
.visible .entry zfill(.param .u64 src, .param .u64 out, .param .u32 n)
{
	.reg .u64 %rd<8>;
	.reg .u32 %u<4>;
	.reg .b32 %v<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	ld.param.u32 %u0, [n];
	mov.u64 %rd2, sm;
	setp.ne.u32 %p0, %u0, 7;
	cp.async.ca.shared.global [%rd2], [%rd0], 16, %u0;
	cp.async.ca.shared.global [%rd2+16], [%rd0], 16, %p0;
	cp.async.ca.shared.global [%rd2+32], [%rd0], 16, !%p0;
	add.u64 %rd3, %rd0, 1048576;
	cp.async.ca.shared.global [%rd2+48], [%rd3], 16, 0;
	cp.async.wait_all;
	ld.shared.v4.b32 {%v0, %v1, %v2, %v3}, [%rd2];
	st.global.v4.b32 [%rd1], {%v0, %v1, %v2, %v3};
	ld.shared.v4.b32 {%v0, %v1, %v2, %v3}, [%rd2+16];
	st.global.v4.b32 [%rd1+16], {%v0, %v1, %v2, %v3};
	ld.shared.v4.b32 {%v0, %v1, %v2, %v3}, [%rd2+32];
	st.global.v4.b32 [%rd1+32], {%v0, %v1, %v2, %v3};
	ld.shared.v4.b32 {%v0, %v1, %v2, %v3}, [%rd2+48];
	st.global.v4.b32 [%rd1+48], {%v0, %v1, %v2, %v3};
	ret;
}
`

func cpSetup(t *testing.T) (*System, uint64, uint64) {
	s := newSys(t, 1)
	src, out := mustMalloc(t, s, 0, 64), mustMalloc(t, s, 0, 64)
	b := make([]byte, 64)
	for i := range b {
		b[i] = byte(i + 1)
	}
	must(t, s.Write(src, b))
	return s, src, out
}

// TestCpAsyncLandsAtWait: before its wait the destination still holds the old bytes (the
// copy lands no earlier than the latest moment the ISA allows); the sanitizer reports the
// early read with the issuing thread and the cp.async's Go line.
func TestCpAsyncLandsAtWait(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	must(t, s.Launch(Launch{Module: m, Entry: "early", Grid: D1(1), Block: D1(1), Args: []any{src, out}, Options: Options{NoSanitizer: true}}))
	if got := readU32(t, s, out, 2); got[0] != 0 || got[1] != 0x04030201 {
		t.Fatalf("before/after the wait: %#x, %#x; want 0 then 0x04030201", got[0], got[1])
	}
	err := launch1(s, m, "early", 1, 1, src, out)
	e := wantErr(t, err, KindCpAsync, "ld.shared.u32", "overlap the destination of a cp.async that thread (0,0,0) issued with \"cp.async.cg.shared.global", "not even committed")
	if e.Pos.File == "" || !strings.Contains(err.Error(), "cpasync_test.go:") {
		t.Errorf("no Go lines in %v", err)
	}
}

// TestCpAsyncWaitGroup: wait_group 1 completes every group but the newest.
func TestCpAsyncWaitGroup(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	must(t, s.Launch(Launch{Module: m, Entry: "groups", Grid: D1(1), Block: D1(1), Args: []any{src, out}, Options: Options{NoSanitizer: true}}))
	if got := readU32(t, s, out, 2); got[0] != 0x14131211 || got[1] != 0 {
		t.Fatalf("group 1 %#x (want 0x14131211, landed), group 2 %#x (want 0, in flight)", got[0], got[1])
	}
	wantErr(t, launch1(s, m, "groups", 1, 1, src, out), KindCpAsync, "[%ud2+32]", "committed but not waited for")
}

// TestCpAsyncEmptyGroup: a commit_group with no copy since the last makes an empty group that
// counts for wait_group, so with groups G1 (a copy) and G2 (empty), wait_group 1 completes G1
// and the read after it is clean. Without the empty commit the same read is before G1's wait,
// which is what the emulator reported when it did not count empty groups.
func TestCpAsyncEmptyGroup(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	must(t, launch1(s, m, "emptygroup", 1, 1, src, out))
	if got := readU32(t, s, out, 1); got[0] != 0x04030201 {
		t.Fatalf("after wait_group 1 behind an empty group: %#x, want 0x04030201 (G1 landed)", got[0])
	}
	wantErr(t, launch1(s, m, "noemptygroup", 1, 1, src, out), KindCpAsync, "ld.shared.u32", "committed but not waited for")
}

// TestCpAsyncOtherThreads: another thread reads the data after the issuing thread's wait
// and a barrier; without the barrier it is a race; waiting after the barrier is too late.
func TestCpAsyncOtherThreads(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	must(t, launch1(s, m, "sync", 1, 64, src, out))
	if got := readU32(t, s, out, 1); got[0] != 0x08070605 {
		t.Fatalf("thread 33 read %#x, want 0x08070605", got[0])
	}
	wantErr(t, launch1(s, m, "nobar", 1, 64, src, out), KindRace, "cp.async.ca.shared.global", "no barrier")
	wantErr(t, launch1(s, m, "waitafterbar", 1, 64, src, out), KindCpAsync, "thread (32,0,0)", "that thread (0,0,0) issued", "not even committed")
}

// TestCpAsyncZeroFill: src-size n reads n bytes and zero-fills the rest; a true ignore-src
// predicate copies zeros; src-size 0 reads nothing (its source may be out of bounds).
func TestCpAsyncZeroFill(t *testing.T) {
	m := asm(t, cpKernels)
	for _, n := range []uint32{5, 7} {
		s, src, out := cpSetup(t)
		must(t, launch1(s, m, "zfill", 1, 1, src, out, n))
		got := make([]byte, 64)
		must(t, s.Read(out, got))
		for i := 0; i < 16; i++ {
			want := byte(0)
			if i < int(n) {
				want = byte(i + 1)
			}
			if got[i] != want {
				t.Fatalf("n=%d: src-size copy byte %d = %d, want %d", n, i, got[i], want)
			}
			ignored := n != 7 // %p0: n != 7
			want16, want32 := byte(i+1), byte(0)
			if ignored {
				want16, want32 = 0, byte(i+1)
			}
			if got[16+i] != want16 || got[32+i] != want32 || got[48+i] != 0 {
				t.Fatalf("n=%d: ignore-src copies byte %d = %d, %d, src-size 0: %d", n, i, got[16+i], got[32+i], got[48+i])
			}
		}
	}
}

// TestCpAsyncWriteInFlight: a store into a copy's destination before the wait is reported.
func TestCpAsyncWriteInFlight(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	wantErr(t, launch1(s, m, "write", 1, 1, src, out), KindCpAsync, "st.shared.u32 [%ud2+20]", "shared offset 0x14", "committed but not waited for")
}

// TestCpAsyncMbarrierArrive: cp.async.mbarrier.arrive.noinc completes the thread's copies
// before its arrive: after the phase completes the data is there.
func TestCpAsyncMbarrierArrive(t *testing.T) {
	m := asm(t, cpKernels)
	s, src, out := cpSetup(t)
	must(t, launch1(s, m, "arrive", 1, 1, src, out))
	if got := readU32(t, s, out, 1); got[0] != 0x04030201 {
		t.Fatalf("after the mbarrier phase: %#x, want 0x04030201", got[0])
	}
}
