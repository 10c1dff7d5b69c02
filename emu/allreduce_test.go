package emu

import (
	"math/rand"
	"testing"
	"time"
)

// A two-shot all-reduce written by hand with peer loads and stores: every GPU reduces its
// chunk by loading it from every GPU (reduce-scatter), stores the sum into every GPU's
// buffer (all-gather), and then each block signals every GPU with a release reduction and
// waits (acquire) until all GPUs' same-numbered blocks have signalled it.
const allReduceSrc = `
.visible .entry allreduce(.param .u64 bufs, .param .u64 flags, .param .u32 rank, .param .u32 ngpu, .param .u32 n4)
{
	.reg .u64 %rd<12>;
	.reg .u32 %r<16>;
	.reg .f32 %f<8>;
	.reg .pred %p<4>;
	ld.param.u64 %rd0, [bufs];
	ld.param.u64 %rd1, [flags];
	ld.param.u32 %r0, [rank];
	ld.param.u32 %r1, [ngpu];
	ld.param.u32 %r2, [n4];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mov.u32 %r6, %nctaid.x;
	mul.lo.u32 %r7, %r0, %r2;
	mad.lo.u32 %r8, %r3, %r4, %r5;
	mul.lo.u32 %r9, %r4, %r6;
RS:
	setp.ge.u32 %p0, %r8, %r2;
	@%p0 bra RSDONE;
	add.u32 %r10, %r7, %r8;
	mul.wide.u32 %rd2, %r10, 16;
	mov.f32 %f0, 0f00000000;
	mov.f32 %f1, 0f00000000;
	mov.f32 %f2, 0f00000000;
	mov.f32 %f3, 0f00000000;
	mov.u32 %r11, 0;
GATHER:
	mul.wide.u32 %rd3, %r11, 8;
	add.u64 %rd4, %rd0, %rd3;
	ld.global.u64 %rd5, [%rd4];
	add.u64 %rd6, %rd5, %rd2;
	ld.global.v4.f32 {%f4, %f5, %f6, %f7}, [%rd6];
	add.f32 %f0, %f0, %f4;
	add.f32 %f1, %f1, %f5;
	add.f32 %f2, %f2, %f6;
	add.f32 %f3, %f3, %f7;
	add.u32 %r11, %r11, 1;
	setp.lt.u32 %p1, %r11, %r1;
	@%p1 bra GATHER;
	mov.u32 %r11, 0;
SCATTER:
	mul.wide.u32 %rd3, %r11, 8;
	add.u64 %rd4, %rd0, %rd3;
	ld.global.u64 %rd5, [%rd4];
	add.u64 %rd6, %rd5, %rd2;
	st.global.v4.f32 [%rd6], {%f0, %f1, %f2, %f3};
	add.u32 %r11, %r11, 1;
	setp.lt.u32 %p1, %r11, %r1;
	@%p1 bra SCATTER;
	add.u32 %r8, %r8, %r9;
	bra.uni RS;
RSDONE:
	bar.sync 0;
	setp.ne.u32 %p2, %r5, 0;
	@%p2 bra FIN;
	mul.wide.u32 %rd7, %r3, 4;
	mov.u32 %r11, 0;
SIGNAL:
	mul.wide.u32 %rd3, %r11, 8;
	add.u64 %rd4, %rd1, %rd3;
	ld.global.u64 %rd5, [%rd4];
	add.u64 %rd8, %rd5, %rd7;
	red.release.sys.global.add.u32 [%rd8], 1;
	add.u32 %r11, %r11, 1;
	setp.lt.u32 %p1, %r11, %r1;
	@%p1 bra SIGNAL;
	mul.wide.u32 %rd3, %r0, 8;
	add.u64 %rd4, %rd1, %rd3;
	ld.global.u64 %rd5, [%rd4];
	add.u64 %rd8, %rd5, %rd7;
WAIT:
	ld.acquire.sys.global.u32 %r12, [%rd8];
	setp.lt.u32 %p1, %r12, %r1;
	@%p1 bra WAIT;
FIN:
	bar.sync 0;
	ret;
}`

// allReduce runs the kernel on ngpu GPUs over n floats and checks the result.
func allReduce(t testing.TB, ngpu, n, blocks, threads int, opt Options) time.Duration {
	m := asm(t, allReduceSrc)
	s := newSys(t, ngpu)
	buf, err := s.MallocSymmetric(4 * n)
	must(t, err)
	flags, err := s.MallocSymmetric(4 * blocks)
	must(t, err)
	bufTab, err := s.MallocSymmetric(8 * ngpu)
	must(t, err)
	flagTab, err := s.MallocSymmetric(8 * ngpu)
	must(t, err)
	rng := rand.New(rand.NewSource(1))
	in := make([][]float32, ngpu)
	var bt, ft []uint64
	for g := 0; g < ngpu; g++ {
		bt = append(bt, buf.On(g))
		ft = append(ft, flags.On(g))
	}
	for g := 0; g < ngpu; g++ {
		in[g] = make([]float32, n)
		for i := range in[g] {
			in[g][i] = float32(rng.Intn(2000)-1000) / 64
		}
		must(t, WriteSlice(s, buf.On(g), in[g]))
		must(t, WriteSlice(s, bufTab.On(g), bt))
		must(t, WriteSlice(s, flagTab.On(g), ft))
	}
	start := time.Now()
	err = s.Launch(Launch{Module: m, Entry: "allreduce", GPUs: s.All(), Grid: D1(blocks), Block: D1(threads), Options: opt,
		ArgsFor: func(g int) []any {
			return []any{bufTab.On(g), flagTab.On(g), uint32(g), uint32(ngpu), uint32(n / 4 / ngpu)}
		}})
	el := time.Since(start)
	must(t, err)
	for g := 0; g < ngpu; g++ {
		got := readF32(t, s, buf.On(g), n)
		for i, x := range got {
			var want float32
			for k := 0; k < ngpu; k++ {
				want += in[k][i]
			}
			if x != want {
				t.Fatalf("GPU %d element %d: got %v want %v", g, i, x, want)
			}
		}
	}
	return el
}

// TestAllReduce4GPU1MiB: the two-shot all-reduce of 1 MiB of f32 on 4 GPUs (target: < 5 s).
func TestAllReduce4GPU1MiB(t *testing.T) {
	el := allReduce(t, 4, 1<<18, 8, 512, Options{})
	t.Logf("4-GPU two-shot all-reduce of 1 MiB f32: %v", el)
	el = allReduce(t, 4, 1<<16, 8, 512, Options{Weak: true, Seed: 3})
	t.Logf("256 KiB in weak mode with a random schedule: %v", el)
}

func TestAllReduceSmall(t *testing.T) {
	for _, ngpu := range []int{1, 2, 3, 8} {
		for _, seed := range []int64{0, 9} {
			allReduce(t, ngpu, 96*ngpu, 3, 64, Options{Seed: seed, Weak: seed != 0})
		}
	}
}

func BenchmarkAllReduce4GPU1MiB(b *testing.B) {
	for i := 0; i < b.N; i++ {
		allReduce(b, 4, 1<<18, 8, 512, Options{})
	}
}

const arithSrc = `
.visible .entry arith(.param .u64 out, .param .u32 iters)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<8>;
	.reg .f32 %f<12>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [out];
	ld.param.u32 %r0, [iters];
	mov.u32 %r1, %tid.x;
	cvt.rn.f32.u32 %f0, %r1;
	mov.f32 %f1, 0f3F800347;
	mov.f32 %f2, 0f3F000000;
	mov.f32 %f3, %f0;
	mov.f32 %f4, 0f3F800000;
	mov.f32 %f5, 0f00000000;
	mov.u32 %r2, 0;
	mov.u32 %r3, 7;
LOOP:
	fma.rn.f32 %f3, %f3, %f1, %f2;
	mul.f32 %f4, %f4, %f1;
	add.f32 %f5, %f5, %f3;
	fma.rn.f32 %f6, %f4, %f2, %f5;
	sub.f32 %f7, %f6, %f3;
	max.f32 %f8, %f7, %f2;
	add.u32 %r3, %r3, %r1;
	xor.b32 %r4, %r3, %r2;
	shl.b32 %r5, %r4, 1;
	add.u32 %r2, %r2, 1;
	setp.lt.u32 %p0, %r2, %r0;
	@%p0 bra LOOP;
	add.f32 %f9, %f8, %f5;
	mul.wide.u32 %rd1, %r1, 4;
	add.u64 %rd2, %rd0, %rd1;
	st.global.f32 [%rd2], %f9;
	st.global.u32 [%rd2+4096], %r5;
	ret;
}`

// BenchmarkArith measures the interpreter on an arithmetic loop: thread-instructions per
// second on one core (target >= 50 million).
func BenchmarkArith(b *testing.B) {
	m := asm(b, arithSrc)
	s := newSys(b, 1)
	out := mustMalloc(b, s, 0, 8192)
	must(b, s.Load(m))
	b.ResetTimer()
	var ti int64
	for i := 0; i < b.N; i++ {
		must(b, s.Launch(Launch{Module: m, Entry: "arith", Grid: D1(4), Block: D1(256), Args: []any{out, uint32(1000)}}))
		ti += s.LastStats().ThreadInstructions
	}
	b.ReportMetric(float64(ti)/b.Elapsed().Seconds(), "thread-instr/s")
}

// BenchmarkVectorAdd1M runs the library's vector_add over 1M f32 (4096 blocks of 256).
func BenchmarkVectorAdd1M(b *testing.B) {
	m := asm(b, `
.visible .entry vadd(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
	.reg .u64 %rd<12>;
	.reg .u32 %r<6>;
	.reg .f32 %f<3>;
	.reg .pred %p<1>;
	ld.param.u64 %rd0, [a];
	ld.param.u64 %rd2, [b];
	ld.param.u64 %rd4, [c];
	ld.param.u32 %r0, [n];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r1, %r2, %r3;
	setp.lt.u32 %p0, %r4, %r0;
	@!%p0 bra END;
	mul.wide.u32 %rd6, %r4, 4;
	add.s64 %rd7, %rd4, %rd6;
	add.s64 %rd9, %rd0, %rd6;
	ld.global.f32 %f0, [%rd9];
	add.s64 %rd11, %rd2, %rd6;
	ld.global.f32 %f1, [%rd11];
	add.f32 %f2, %f0, %f1;
	st.global.f32 [%rd7], %f2;
END:
	ret;
}`)
	s := newSys(b, 1)
	const n = 1 << 20
	a, bb, c := mustMalloc(b, s, 0, 4*n), mustMalloc(b, s, 0, 4*n), mustMalloc(b, s, 0, 4*n)
	b.ResetTimer()
	var ti int64
	for i := 0; i < b.N; i++ {
		must(b, s.Launch(Launch{Module: m, Entry: "vadd", Grid: D1(n / 256), Block: D1(256), Args: []any{a, bb, c, uint32(n)}}))
		ti += s.LastStats().ThreadInstructions
	}
	b.ReportMetric(float64(ti)/b.Elapsed().Seconds(), "thread-instr/s")
}
