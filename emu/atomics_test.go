package emu

import (
	"math"
	"testing"

	"github.com/kgen-dev/kgen/internal/fp"
)

const atomicsSrc = `
.visible .entry atoms(.param .u64 buf)
{
	.reg .u64 %rd<8>;
	.reg .u32 %r<12>;
	.reg .b32 %b<8>;
	.reg .s32 %s<4>;
	.reg .f32 %f<2>;
	.reg .f64 %fd<2>;
	.reg .pred %p<4>;
	.shared .align 4 .u32 scount;
	ld.param.u64 %rd0, [buf];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r11, %ntid.x;
	mad.lo.u32 %r2, %r1, %r11, %r0;
	atom.global.add.u32 %r3, [%rd0], 1;
	red.global.add.u32 [%rd0+4], 2;
	sub.s32 %s0, %r2, 100;
	atom.global.max.s32 %s1, [%rd0+8], %s0;
	add.u32 %r4, %r2, 5;
	atom.global.min.u32 %r5, [%rd0+12], %r4;
	atom.global.add.f32 %f0, [%rd0+16], 0f3F000000;
	mov.b32 %b0, 0x40003C00;
	atom.global.add.noftz.f16x2 %b1, [%rd0+20], %b0;
	atom.global.inc.u32 %r6, [%rd0+24], 9;
	atom.global.exch.b32 %b2, [%rd0+28], %r2;
	and.b32 %b3, %r2, 31;
	shl.b32 %b4, 1, %b3;
	atom.global.or.b32 %b5, [%rd0+32], %b4;
	// a spin lock around a plain read-modify-write (needs independent thread scheduling)
LOCK:
	atom.global.cas.b32 %b6, [%rd0+36], 0, 1;
	setp.ne.u32 %p0, %b6, 0;
	@%p0 bra LOCK;
	ld.volatile.global.u32 %r7, [%rd0+40];
	add.u32 %r7, %r7, 1;
	st.volatile.global.u32 [%rd0+40], %r7;
	atom.release.gpu.global.exch.b32 %b7, [%rd0+36], 0;
	// shared atomics, then one global add per block
	mov.u64 %rd1, scount;
	setp.eq.u32 %p1, %r0, 0;
	@%p1 st.shared.u32 [%rd1], 0;
	bar.sync 0;
	atom.shared.add.u32 %r8, [%rd1], 1;
	bar.sync 0;
	@!%p1 bra DONE;
	ld.shared.u32 %r9, [%rd1];
	red.global.add.u32 [%rd0+44], %r9;
DONE:
	atom.global.add.f64 %fd0, [%rd0+48], 0d3FD0000000000000;
	ret;
}`

func TestAtomics(t *testing.T) {
	m := asm(t, atomicsSrc)
	for _, seed := range []int64{0, 5} {
		s := newSys(t, 1)
		buf := mustMalloc(t, s, 0, 64)
		must(t, WriteSlice(s, buf+8, []int32{-1000}))
		must(t, WriteSlice(s, buf+12, []uint32{1 << 30}))
		const grid, block = 3, 80
		must(t, s.Launch(Launch{Module: m, Entry: "atoms", Grid: D1(grid), Block: D1(block), Args: []any{buf}, Options: Options{Seed: seed}}))
		n := uint32(grid * block)
		g := readU32(t, s, buf, 12)
		f16x2 := uint32(fp.F32ToF16(float32(2*n)))<<16 | uint32(fp.F32ToF16(float32(n)))
		want := []uint32{n, 2 * n, n - 1 - 100, 5, math.Float32bits(float32(n) / 2), f16x2, n % 10, 0, 0xffffffff, 0, n, n}
		for i, w := range want {
			if i == 7 {
				if g[7] >= n {
					t.Fatalf("exch: got %d, want a thread index", g[7])
				}
				continue
			}
			if g[i] != w {
				t.Fatalf("seed %d word %d: got %#x want %#x", seed, i, g[i], w)
			}
		}
		d, err := ReadSlice[float64](s, buf+48, 1)
		must(t, err)
		if d[0] != float64(n)/4 {
			t.Fatalf("f64 add: got %v", d[0])
		}
	}
}

const callSrc = `
.func (.param .u32 r) twice(.param .u32 x, .param .u32 y)
{
	.reg .u32 %r<4>;
	ld.param.u32 %r0, [x];
	ld.param.u32 %r1, [y];
	mad.lo.u32 %r2, %r0, 2, %r1;
	st.param.u32 [r], %r2;
	ret;
}
.extern .func (.param .u32 v) wait_until_ge(.param .u64 addr, .param .u32 val);
.visible .entry calls(.param .u64 out, .param .u64 flag)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<8>;
	.reg .pred %p<2>;
	.param .u32 a0;
	.param .u32 a1;
	.param .u32 r0;
	ld.param.u64 %rd0, [out];
	ld.param.u64 %rd1, [flag];
	mov.u32 %r0, %tid.x;
	st.param.u32 [a0], %r0;
	st.param.u32 [a1], 7;
	call (r0), twice, (a0, a1);
	ld.param.u32 %r1, [r0];
	mul.wide.u32 %rd2, %r0, 4;
	add.u64 %rd3, %rd0, %rd2;
	st.global.u32 [%rd3], %r1;
	// warp 0 waits (through the extern) until warp 1 has published the flag
	setp.ge.u32 %p0, %r0, 32;
	@%p0 bra PRODUCER;
	call (%r2), wait_until_ge, (%rd1, 1);
	add.u32 %r3, %r2, %r1;
	st.global.u32 [%rd3], %r3;
	bra.uni END;
PRODUCER:
	setp.eq.u32 %p1, %r0, 32;
	@%p1 st.release.gpu.global.u32 [%rd1], 5;
END:
	ret;
}`

func TestCallsAndExtern(t *testing.T) {
	m := asmUnverified(t, callSrc)
	s := newSys(t, 1)
	waits := 0
	s.RegisterExtern("wait_until_ge", func(c *ExternCall) error {
		v, err := c.Load32(c.Args[0])
		if err != nil {
			return err
		}
		if v < uint32(c.Args[1]) {
			waits++
			return c.Wait("flag below " + "1")
		}
		c.Rets[0] = uint64(v)
		return nil
	})
	out, flag := mustMalloc(t, s, 0, 4*64), mustMalloc(t, s, 0, 4)
	// Warp 0 runs first in the deterministic schedule, so it waits for warp 1.
	must(t, launch1(s, m, "calls", 1, 64, out, flag))
	got := readU32(t, s, out, 64)
	for i, g := range got {
		want := uint32(2*i + 7)
		if i < 32 {
			want += 5
		}
		if g != want {
			t.Fatalf("thread %d: got %d want %d", i, g, want)
		}
	}
	if waits == 0 {
		t.Fatal("the extern never waited")
	}

	// A wait that can never end is a deadlock that names the extern and the reason.
	s2 := newSys(t, 1)
	s2.RegisterExtern("wait_until_ge", func(c *ExternCall) error { return c.Wait("flag never set") })
	out2, flag2 := mustMalloc(t, s2, 0, 4*64), mustMalloc(t, s2, 0, 4)
	err := launch1(s2, m, "calls", 1, 64, out2, flag2)
	wantErr(t, err, KindDeadlock, "blocked in extern wait_until_ge", "flag never set")

	// A missing handler is an error naming the function.
	s3 := newSys(t, 1)
	err = launch1(s3, m, "calls", 1, 64, mustMalloc(t, s3, 0, 256), mustMalloc(t, s3, 0, 4))
	wantErr(t, err, KindExtern, "wait_until_ge has no handler")
}
