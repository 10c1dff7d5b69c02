package emu

import (
	"math/bits"
	"testing"
)

const blockReduceSrc = `
.visible .entry bred(.param .u64 in, .param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %r<8>;
	.reg .f32 %f<4>;
	.reg .pred %p<2>;
	.shared .align 4 .f32 sm[256];
	ld.param.u64 %rd0, [in];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ctaid.x;
	mad.lo.u32 %r2, %r1, 256, %r0;
	mul.wide.u32 %rd2, %r2, 4;
	add.u64 %rd3, %rd0, %rd2;
	ld.global.f32 %f0, [%rd3];
	mov.u64 %rd4, sm;
	mul.wide.u32 %rd5, %r0, 4;
	add.u64 %rd6, %rd4, %rd5;
	st.shared.f32 [%rd6], %f0;
	bar.sync 0;
	mov.u32 %r3, 128;
LOOP:
	setp.lt.u32 %p0, %r0, %r3;
	@!%p0 bra SKIP;
	mul.wide.u32 %rd5, %r3, 4;
	add.u64 %rd7, %rd6, %rd5;
	ld.shared.f32 %f1, [%rd7];
	ld.shared.f32 %f2, [%rd6];
	add.f32 %f2, %f2, %f1;
	st.shared.f32 [%rd6], %f2;
SKIP:
	BARRIER
	shr.u32 %r3, %r3, 1;
	setp.ne.u32 %p1, %r3, 0;
	@%p1 bra LOOP;
	setp.eq.u32 %p0, %r0, 0;
	@!%p0 bra END;
	ld.shared.f32 %f3, [sm];
	mul.wide.u32 %rd5, %r1, 4;
	add.u64 %rd7, %rd1, %rd5;
	st.global.f32 [%rd7], %f3;
END:
	ret;
}`

func treeSum(v []float32) float32 {
	x := append([]float32(nil), v...)
	for s := len(x) / 2; s > 0; s /= 2 {
		for i := 0; i < s; i++ {
			x[i] += x[i+s]
		}
	}
	return x[0]
}

func TestBlockReduceSharedBarrier(t *testing.T) {
	m := asm(t, replace(blockReduceSrc, "BARRIER", "bar.sync 0;"))
	for _, seed := range []int64{0, 7, 99} {
		s := newSys(t, 1)
		const blocks = 5
		in := make([]float32, 256*blocks)
		for i := range in {
			in[i] = float32(i%97) * 0.25
		}
		a, o := mustMalloc(t, s, 0, 4*len(in)), mustMalloc(t, s, 0, 4*blocks)
		must(t, WriteSlice(s, a, in))
		err := s.Launch(Launch{Module: m, Entry: "bred", Grid: D1(blocks), Block: D1(256), Args: []any{a, o}, Options: Options{Seed: seed}})
		must(t, err)
		got := readF32(t, s, o, blocks)
		for b := 0; b < blocks; b++ {
			if want := treeSum(in[256*b : 256*(b+1)]); got[b] != want {
				t.Fatalf("seed %d block %d: got %v want %v", seed, b, got[b], want)
			}
		}
	}
}

func TestSanitizerSharedRace(t *testing.T) {
	// The barrier inside the loop is missing: thread i reads sm[i+s] while thread i+s may
	// still be writing it.
	m := asm(t, replace(blockReduceSrc, "BARRIER", ""))
	s := newSys(t, 1)
	a, o := mustMalloc(t, s, 0, 4*256), mustMalloc(t, s, 0, 4)
	err := launch1(s, m, "bred", 1, 256, a, o)
	e := wantErr(t, err, KindRace, "bred", "block (0,0,0)", "thread (", "no barrier", "block_test.go:")
	if e.Pos.Line == 0 || e.Instr == "" {
		t.Fatalf("race error lacks the instruction or line: %v", err)
	}
	t.Log(err)
	// Without the sanitizer it runs (and gets some answer).
	must(t, s.Launch(Launch{Module: m, Entry: "bred", Grid: D1(1), Block: D1(256), Args: []any{a, o}, Options: Options{NoSanitizer: true}}))
}

func replace(s, old, new string) string {
	out := ""
	for {
		i := index(s, old)
		if i < 0 {
			return out + s
		}
		out += s[:i] + new
		s = s[i+len(old):]
	}
}

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

const warpOpsSrc = `
.visible .entry warpops(.param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<20>;
	.reg .b32 %b<20>;
	.reg .pred %p<4>;
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %laneid;
	mad.lo.u32 %r2, %r0, 3, 1;
	mul.wide.u32 %rd1, %r0, 32;
	add.u64 %rd2, %rd0, %rd1;
	// k0: butterfly sum
	mov.u32 %r3, %r2;
	shfl.sync.bfly.b32 %b0, %r3, 16, 31, 0xffffffff;
	add.u32 %r3, %r3, %b0;
	shfl.sync.bfly.b32 %b0, %r3, 8, 31, 0xffffffff;
	add.u32 %r3, %r3, %b0;
	shfl.sync.bfly.b32 %b0, %r3, 4, 31, 0xffffffff;
	add.u32 %r3, %r3, %b0;
	shfl.sync.bfly.b32 %b0, %r3, 2, 31, 0xffffffff;
	add.u32 %r3, %r3, %b0;
	shfl.sync.bfly.b32 %b0, %r3, 1, 31, 0xffffffff;
	add.u32 %r3, %r3, %b0;
	st.global.u32 [%rd2], %r3;
	// k1: up by 1
	shfl.sync.up.b32 %b1, %r2, 1, 0, 0xffffffff;
	st.global.u32 [%rd2+4], %b1;
	// k2: down by 3, with the in-range predicate
	shfl.sync.down.b32 %b2, %p0, %r2, 3, 31, 0xffffffff;
	selp.u32 %r4, %b2, 7777, %p0;
	st.global.u32 [%rd2+8], %r4;
	// k3: broadcast lane 5
	shfl.sync.idx.b32 %b3, %r2, 5, 31, 0xffffffff;
	st.global.u32 [%rd2+12], %b3;
	// k4: ballot of odd lanes
	and.b32 %b4, %r1, 1;
	setp.ne.u32 %p1, %b4, 0;
	vote.sync.ballot.b32 %b5, %p1, 0xffffffff;
	st.global.u32 [%rd2+16], %b5;
	// k5: redux add
	redux.sync.add.u32 %r5, %r2, 0xffffffff;
	st.global.u32 [%rd2+20], %r5;
	// k6: match any on lane%4
	and.b32 %b6, %r1, 3;
	match.sync.any.b32 %b7, %b6, 0xffffffff;
	st.global.u32 [%rd2+24], %b7;
	// k7: odd lanes only: activemask and a shuffle among themselves (broadcast lane 1)
	mov.u32 %r6, 0;
	@!%p1 bra EVEN;
	activemask.b32 %b8;
	shfl.sync.idx.b32 %b9, %r2, 1, 31, 0xaaaaaaaa;
	add.u32 %r6, %b8, %b9;
EVEN:
	st.global.u32 [%rd2+28], %r6;
	ret;
}`

func TestWarpOps(t *testing.T) {
	m := asmUnverified(t, warpOpsSrc)
	for _, seed := range []int64{0, 3} {
		s := newSys(t, 1)
		const n = 64
		out := mustMalloc(t, s, 0, n*32)
		must(t, s.Launch(Launch{Module: m, Entry: "warpops", Grid: D1(1), Block: D1(n), Args: []any{out}, Options: Options{Seed: seed}}))
		got := readU32(t, s, out, n*8)
		v := func(tid int) uint32 { return uint32(tid*3 + 1) }
		for tid := 0; tid < n; tid++ {
			lane, base := tid%32, tid-tid%32
			var sum uint32
			for i := 0; i < 32; i++ {
				sum += v(base + i)
			}
			up := v(tid)
			if lane >= 1 {
				up = v(tid - 1)
			}
			down := uint32(7777)
			if lane+3 <= 31 {
				down = v(tid + 3)
			}
			var match uint32
			for i := 0; i < 32; i++ {
				if i%4 == lane%4 {
					match |= 1 << i
				}
			}
			k7 := uint32(0)
			if lane%2 == 1 {
				k7 = 0xaaaaaaaa + v(base+1)
			}
			want := []uint32{sum, up, down, v(base + 5), 0xaaaaaaaa, sum, match, k7}
			for k, w := range want {
				if g := got[tid*8+k]; g != w {
					t.Fatalf("seed %d thread %d k%d: got %#x want %#x", seed, tid, k, g, w)
				}
			}
		}
	}
	_ = bits.OnesCount32
}
