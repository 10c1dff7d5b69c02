package emu

import (
	"testing"
)

const syncOpsSrc = `
.visible .entry syncops(.param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %r<16>;
	.reg .b32 %b<4>;
	.reg .pred %p<8>;
	.reg .b128 %q<2>;
	.reg .b64 %x<4>;
	.shared .align 16 .u32 box[4];
	.shared .align 16 .b8 stage[1024];
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %laneid;
	mul.wide.u32 %rd1, %r0, 128;
	add.u64 %rd2, %rd0, %rd1;
	rem.u32 %r2, %r0, 3;
	setp.eq.u32 %p0, %r2, 0;
	bar.red.popc.u32 %r3, 0, %p0;
	st.global.u32 [%rd2], %r3;
	setp.lt.u32 %p1, %r0, 1000;
	bar.red.and.pred %p2, 1, %p1;
	selp.u32 %r4, 1, 0, %p2;
	st.global.u32 [%rd2+4], %r4;
	bar.red.or.pred %p3, 2, %p0;
	selp.u32 %r4, 1, 0, %p3;
	st.global.u32 [%rd2+8], %r4;
	vote.sync.all.pred %p4, %p1, 0xffffffff;
	selp.u32 %r5, 1, 0, %p4;
	st.global.u32 [%rd2+12], %r5;
	vote.sync.any.pred %p4, %p0, 0xffffffff;
	selp.u32 %r5, 1, 0, %p4;
	st.global.u32 [%rd2+16], %r5;
	vote.sync.uni.pred %p4, %p0, 0xffffffff;
	selp.u32 %r5, 1, 0, %p4;
	st.global.u32 [%rd2+20], %r5;
	redux.sync.min.u32 %r6, %r0, 0xffffffff;
	st.global.u32 [%rd2+24], %r6;
	redux.sync.max.u32 %r6, %r0, 0xffffffff;
	st.global.u32 [%rd2+28], %r6;
	redux.sync.or.b32 %r6, %r1, 0xffffffff;
	st.global.u32 [%rd2+32], %r6;
	shr.u32 %r9, %r0, 5;
	match.sync.all.b32 %b0, %p5, %r9, 0xffffffff;
	st.global.u32 [%rd2+36], %b0;
	selp.u32 %r5, 1, 0, %p5;
	st.global.u32 [%rd2+40], %r5;
	elect.sync %r10, %p6, 0xffffffff;
	selp.u32 %r5, 100, 0, %p6;
	add.u32 %r10, %r10, %r5;
	st.global.u32 [%rd2+44], %r10;
	// a named producer/consumer barrier: warp 0 arrives, warp 1 waits
	mov.u32 %r11, 0;
	setp.lt.u32 %p7, %r0, 32;
	@!%p7 bra CONS;
	setp.eq.u32 %p6, %r0, 0;
	@%p6 st.shared.u32 [box], 4242;
	bar.arrive 3, 64;
	bra.uni PCDONE;
CONS:
	bar.sync 3, 64;
	ld.shared.u32 %r11, [box];
PCDONE:
	st.global.u32 [%rd2+48], %r11;
	// cp.async 16 bytes of this thread's results into shared memory and read one back
	mov.u64 %rd3, stage;
	mul.wide.u32 %rd4, %r0, 16;
	add.u64 %rd5, %rd3, %rd4;
	cp.async.ca.shared.global [%rd5], [%rd2], 16;
	cp.async.commit_group;
	cp.async.wait_all;
	bar.sync 0;
	ld.shared.u32 %r12, [%rd5+4];
	st.global.u32 [%rd2+52], %r12;
	// b128 load, store, cas, move and unpack
	ld.global.b128 %q0, [%rd2];
	st.global.b128 [%rd2+64], %q0;
	mov.b128 %q1, 0;
	atom.global.cas.b128 %q1, [%rd2+80], %q1, %q0;
	mov.b128 {%x0, %x1}, %q0;
	st.global.b64 [%rd2+96], %x1;
	ret;
}`

func TestSyncOps(t *testing.T) {
	m := asmUnverified(t, syncOpsSrc)
	for _, seed := range []int64{0, 1, 2} {
		s := newSys(t, 1)
		out := mustMalloc(t, s, 0, 64*128)
		must(t, s.Launch(Launch{Module: m, Entry: "syncops", Grid: D1(1), Block: D1(64), Args: []any{out}, Options: Options{Seed: seed}}))
		got := readU32(t, s, out, 64*32)
		for tid := 0; tid < 64; tid++ {
			w := got[tid*32 : tid*32+32]
			base := uint32(tid &^ 31)
			lane := uint32(tid & 31)
			elect := uint32(0)
			if lane == 0 {
				elect = 100
			}
			cons := uint32(0)
			if tid >= 32 {
				cons = 4242
			}
			want := []uint32{22, 1, 1, 1, 1, 0, base, base + 31, 31, 0xffffffff, 1, elect, cons, 1}
			for k, x := range want {
				if w[k] != x {
					t.Fatalf("seed %d thread %d word %d: got %d want %d", seed, tid, k, w[k], x)
				}
			}
			for k := 0; k < 4; k++ {
				if w[16+k] != w[k] || w[20+k] != w[k] {
					t.Fatalf("thread %d: b128 copy/cas word %d: %d %d want %d", tid, k, w[16+k], w[20+k], w[k])
				}
			}
			if w[24] != w[2] || w[25] != w[3] {
				t.Fatalf("thread %d: b128 unpack: %d %d", tid, w[24], w[25])
			}
		}
	}
}

const warpRaceSrc = `
.visible .entry wr(.param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	.shared .align 4 .u32 slot[32];
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %laneid;
	mov.u64 %rd1, slot;
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd3, %rd1, %rd2;
	st.shared.u32 [%rd3], %r0;
	SYNC
	xor.b32 %r1, %r0, 1;
	mul.wide.u32 %rd2, %r1, 4;
	add.u64 %rd3, %rd1, %rd2;
	ld.shared.u32 %r2, [%rd3];
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd3, %rd0, %rd2;
	st.global.u32 [%rd3], %r2;
	ret;
}`

func TestWarpSyncOrdersSharedMemory(t *testing.T) {
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 128)
	must(t, launch1(s, asm(t, replace(warpRaceSrc, "SYNC", "bar.warp.sync 0xffffffff;")), "wr", 1, 32, out))
	got := readU32(t, s, out, 32)
	for i, g := range got {
		if g != uint32(i^1) {
			t.Fatalf("lane %d got %d", i, g)
		}
	}
	err := launch1(s, asm(t, replace(warpRaceSrc, "SYNC", "")), "wr", 1, 32, out)
	wantErr(t, err, KindRace, "reads 4 bytes")
}

func TestWarpSyncMaskWithExitedLane(t *testing.T) {
	m := asm(t, `
.visible .entry ws(.param .u64 out)
{
	.reg .u32 %r<4>;
	.reg .pred %p<2>;
	mov.u32 %r0, %laneid;
	setp.eq.u32 %p0, %r0, 5;
	@%p0 bra OUT;
	shfl.sync.idx.b32 %r1, %r0, 0, 31, 0xffffffff;
OUT:
	ret;
}`)
	s := newSys(t, 1)
	err := launch1(s, m, "ws", 1, 32, uint64(0))
	// Lane 5 either exits before the others gather (the member mask names an exited lane) or
	// the others wait for it in vain: either way a sanitizer error, never a hang.
	wantErr(t, err, KindWarpSync, "member mask 0xffffffff", "shfl.sync.idx.b32")
	t.Log(err)
}

const mbarrierSrc = `
.visible .entry mb(.param .u64 src, .param .u64 out)
{
	.reg .u64 %rd<10>;
	.reg .u32 %r<10>;
	.reg .b64 %s<4>;
	.reg .pred %p<4>;
	.shared .align 8 .b64 bar;
	.shared .align 16 .b8 buf[1024];
	ld.param.u64 %rd0, [src];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	mov.u64 %rd2, bar;
	mov.u64 %rd3, buf;
	setp.eq.u32 %p0, %r0, 0;
	@%p0 mbarrier.init.shared.b64 [%rd2], 64;
	bar.sync 0;
	@!%p0 bra OTHERS;
	mbarrier.arrive.expect_tx.shared.b64 %s0, [%rd2], 1024;
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%rd3], [%rd0], 1024, [%rd2];
	bra.uni WAIT;
OTHERS:
	mbarrier.arrive.shared.b64 %s0, [%rd2];
WAIT:
	mbarrier.try_wait.parity.shared.b64 %p1, [%rd2], 0;
	@!%p1 bra WAIT;
	mbarrier.test_wait.shared.b64 %p2, [%rd2], %s0;
	selp.u32 %r2, 1000, 0, %p2;
	mul.wide.u32 %rd4, %r0, 4;
	add.u64 %rd5, %rd3, %rd4;
	ld.shared.u32 %r1, [%rd5];
	add.u32 %r1, %r1, %r2;
	add.u64 %rd6, %rd1, %rd4;
	st.global.u32 [%rd6], %r1;
	ret;
}`

func TestMbarrierAndBulkCopy(t *testing.T) {
	m := asm(t, mbarrierSrc)
	for _, seed := range []int64{0, 1, 2, 3} {
		s := newSys(t, 1)
		src, out := mustMalloc(t, s, 0, 1024), mustMalloc(t, s, 0, 256)
		in := make([]uint32, 256)
		for i := range in {
			in[i] = uint32(i * 7)
		}
		must(t, WriteSlice(s, src, in))
		must(t, s.Launch(Launch{Module: m, Entry: "mb", Grid: D1(1), Block: D1(64), Args: []any{src, out}, Options: Options{Seed: seed}}))
		got := readU32(t, s, out, 64)
		for i, g := range got {
			if g != uint32(i*7)+1000 {
				t.Fatalf("seed %d thread %d: got %d", seed, i, g)
			}
		}
	}
}

// bar.warp.sync in both arms of a divergent branch: on sm_70+ the lanes meet across the two
// instructions, and the barrier orders their shared-memory accesses.
func TestWarpBarrierAcrossBranches(t *testing.T) {
	m := asm(t, `
.visible .entry wb(.param .u64 out)
{
	.reg .u64 %rd<6>;
	.reg .u32 %r<6>;
	.reg .pred %p<2>;
	.shared .align 4 .u32 slot[32];
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %laneid;
	mov.u64 %rd1, slot;
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd3, %rd1, %rd2;
	and.b32 %r1, %r0, 1;
	setp.eq.u32 %p0, %r1, 0;
	@%p0 bra EVEN;
	mul.lo.u32 %r2, %r0, 10;
	st.shared.u32 [%rd3], %r2;
	bar.warp.sync 0xffffffff;
	bra.uni JOIN;
EVEN:
	mul.lo.u32 %r2, %r0, 100;
	st.shared.u32 [%rd3], %r2;
	bar.warp.sync 0xffffffff;
JOIN:
	xor.b32 %r3, %r0, 1;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd4, %rd1, %rd2;
	ld.shared.u32 %r4, [%rd4];
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd5, %rd0, %rd2;
	st.global.u32 [%rd5], %r4;
	ret;
}`)
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 128)
	for _, seed := range []int64{0, 1} {
		must(t, s.Launch(Launch{Module: m, Entry: "wb", Grid: D1(1), Block: D1(32), Args: []any{out}, Options: Options{Seed: seed}}))
		got := readU32(t, s, out, 32)
		for i, g := range got {
			j := i ^ 1
			want := uint32(j * 100)
			if j%2 == 1 {
				want = uint32(j * 10)
			}
			if g != want {
				t.Fatalf("lane %d: got %d want %d", i, g, want)
			}
		}
	}
}

// Half of warp 0 waits at a named barrier while its other half keeps running (converged
// among themselves); warp 1 completes the barrier in the middle of that run.
func TestBarrierReleaseWhileWarpRuns(t *testing.T) {
	m := asmUnverified(t, `
.visible .entry half(.param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<6>;
	.reg .pred %p<3>;
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, 0;
	setp.lt.u32 %p0, %r0, 16;
	@!%p0 bra WORK;
	bar.sync 1, 48;
	mov.u32 %r1, 7;
	bra.uni DONE;
WORK:
	setp.lt.u32 %p1, %r0, 32;
	@!%p1 bra WAIT2;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	add.u32 %r1, %r1, 1;
	bra.uni DONE;
WAIT2:
	// spin a little (each iteration yields) so that warp 0 runs meanwhile
	mov.u32 %r3, 0;
SPIN:
	ld.volatile.global.u32 %r4, [%rd0];
	add.u32 %r3, %r3, 1;
	setp.lt.u32 %p2, %r3, 2;
	@%p2 bra SPIN;
	bar.sync 1, 48;
	mov.u32 %r1, 7;
DONE:
	mul.wide.u32 %rd1, %r0, 4;
	add.u64 %rd2, %rd0, %rd1;
	st.global.u32 [%rd2], %r1;
	ret;
}`)
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 256)
	for _, q := range []int{0, 3, 7, 20} {
		must(t, s.Launch(Launch{Module: m, Entry: "half", Grid: D1(1), Block: D1(64), Args: []any{out}, Options: Options{Quantum: q}}))
		got := readU32(t, s, out, 64)
		for i, g := range got {
			want := uint32(7)
			if i >= 16 && i < 32 {
				want = 40
			}
			if g != want {
				t.Fatalf("quantum %d thread %d: got %d want %d", q, i, g, want)
			}
		}
	}
}

// Tiles of 16 lanes: each half of the warp names its own member mask (cooperative groups'
// tiled_partition), in converged code.
func TestWarpTilesWithTheirOwnMasks(t *testing.T) {
	m := asm(t, `
.visible .entry tiles(.param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<8>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %laneid;
	mad.lo.u32 %r1, %r0, 5, 2;
	setp.lt.u32 %p0, %r0, 16;
	selp.u32 %r2, 0x0000ffff, 0xffff0000, %p0;
	shfl.sync.idx.b32 %r3, %r1, 3, 0x101f, %r2;
	redux.sync.add.u32 %r4, %r1, %r2;
	mul.wide.u32 %rd1, %r0, 8;
	add.u64 %rd2, %rd0, %rd1;
	st.global.v2.u32 [%rd2], {%r3, %r4};
	ret;
}`)
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 32*8)
	must(t, launch1(s, m, "tiles", 1, 32, out))
	got := readU32(t, s, out, 64)
	for ln := 0; ln < 32; ln++ {
		base := ln &^ 15
		var sum uint32
		for i := base; i < base+16; i++ {
			sum += uint32(5*i + 2)
		}
		if got[2*ln] != uint32(5*(base+3)+2) || got[2*ln+1] != sum {
			t.Fatalf("lane %d: got %d %d, want %d %d", ln, got[2*ln], got[2*ln+1], 5*(base+3)+2, sum)
		}
	}
}
