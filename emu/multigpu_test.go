package emu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/internal/fp"
)

// ring: every GPU writes n values into the next GPU's copy of data through a peer address,
// publishes a flag there, waits for its own flag, and then reads what the previous GPU wrote.
const ringSrc = `
.visible .entry ring(.param .u64 data, .param .u64 peerdata, .param .u64 flag, .param .u64 peerflag,
	.param .u64 out, .param .u32 rank, .param .u32 n)
{
	.reg .u64 %rd<12>;
	.reg .u32 %r<12>;
	.reg .pred %p<4>;
	ld.param.u64 %rd0, [data];
	ld.param.u64 %rd1, [peerdata];
	ld.param.u64 %rd2, [flag];
	ld.param.u64 %rd3, [peerflag];
	ld.param.u64 %rd4, [out];
	ld.param.u32 %r0, [rank];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %tid.x;
	mov.u32 %r11, %ntid.x;
	mov.u32 %r3, %r2;
PUT:
	setp.ge.u32 %p0, %r3, %r1;
	@%p0 bra PUTDONE;
	mad.lo.u32 %r4, %r0, 1000, %r3;
	mul.wide.u32 %rd5, %r3, 4;
	add.u64 %rd6, %rd1, %rd5;
	STORE [%rd6], %r4;
	add.u32 %r3, %r3, %r11;
	bra.uni PUT;
PUTDONE:
	bar.sync 0;
	setp.eq.u32 %p1, %r2, 0;
	@!%p1 bra WAIT;
	FENCE
	FLAGSTORE [%rd3], 1;
WAIT:
	@!%p1 bra GO;
SPIN:
	ld.acquire.sys.global.u32 %r5, [%rd2];
	setp.ne.u32 %p2, %r5, 1;
	@%p2 bra SPIN;
GO:
	bar.sync 0;
	mov.u32 %r3, %r2;
GET:
	setp.ge.u32 %p0, %r3, %r1;
	@%p0 bra END;
	mul.wide.u32 %rd5, %r3, 4;
	add.u64 %rd6, %rd0, %rd5;
	ld.global.u32 %r6, [%rd6];
	add.u64 %rd7, %rd4, %rd5;
	st.global.u32 [%rd7], %r6;
	add.u32 %r3, %r3, %r11;
	bra.uni GET;
END:
	ret;
}`

type ringVariant struct{ store, fence, flag string }

var (
	ringCorrect   = ringVariant{"st.global.u32", "", "st.release.sys.global.u32"}
	ringFenced    = ringVariant{"st.relaxed.sys.global.u32", "fence.acq_rel.sys;", "st.relaxed.sys.global.u32"}
	ringNoFence   = ringVariant{"st.relaxed.sys.global.u32", "", "st.relaxed.sys.global.u32"}
	ringWeakNoFen = ringVariant{"st.global.u32", "", "st.volatile.global.u32"}
)

func ringModule(t *testing.T, v ringVariant) string {
	s := replace(ringSrc, "FLAGSTORE", v.flag)
	s = replace(s, "FENCE", v.fence)
	return replace(s, "STORE", v.store)
}

// runRing returns the number of wrong output values.
func runRing(t *testing.T, ngpu, n int, v ringVariant, opt Options) (int, error) {
	return runRingMode(t, ngpu, n, v, opt, false)
}

// runRingMode with pull set: every GPU writes its own copy of data and its own flag; the
// next GPU polls that flag and reads the data through peer addresses.
func runRingMode(t *testing.T, ngpu, n int, v ringVariant, opt Options, pull bool) (int, error) {
	t.Helper()
	m := asm(t, ringModule(t, v))
	s := newSys(t, ngpu)
	data, err := s.MallocSymmetric(4 * n)
	must(t, err)
	flag, err := s.MallocSymmetric(4)
	must(t, err)
	outs := make([]uint64, ngpu)
	for g := range outs {
		outs[g] = mustMalloc(t, s, g, 4*n)
	}
	err = s.Launch(Launch{Module: m, Entry: "ring", GPUs: s.All(), Grid: D1(1), Block: D1(128), Options: opt,
		ArgsFor: func(g int) []any {
			next, prev := (g+1)%ngpu, (g+ngpu-1)%ngpu
			if pull {
				return []any{data.On(prev), data.On(g), flag.On(prev), flag.On(g), outs[g], uint32(g), uint32(n)}
			}
			return []any{data.On(g), data.On(next), flag.On(g), flag.On(next), outs[g], uint32(g), uint32(n)}
		}})
	if err != nil {
		return 0, err
	}
	bad := 0
	for g := 0; g < ngpu; g++ {
		prev := (g + ngpu - 1) % ngpu
		got := readU32(t, s, outs[g], n)
		for i, x := range got {
			if x != uint32(prev*1000+i) {
				bad++
			}
		}
	}
	return bad, nil
}

func TestPeerStoresAndFlags(t *testing.T) {
	for _, ngpu := range []int{2, 3, 8} {
		for _, weak := range []bool{false, true} {
			for _, seed := range []int64{0, 11} {
				bad, err := runRing(t, ngpu, 300, ringCorrect, Options{Weak: weak, Seed: seed})
				must(t, err)
				if bad != 0 {
					t.Fatalf("%d GPUs weak=%v seed %d: %d wrong values", ngpu, weak, seed, bad)
				}
			}
		}
	}
}

// TestWeakMissingFence: data and flag stored relaxed to the peer with no fence between them.
// The strong (default) mode cannot tell; in the weak mode the consumer sees the flag before
// the data and the sanitizer stops it at the stale read (KindMissingFence); adding the fence
// fixes it. emu/broken_test.go checks the report's every field on DSL-built kernels.
func TestWeakMissingFence(t *testing.T) {
	for _, v := range []ringVariant{ringNoFence, ringWeakNoFen} {
		bad, err := runRing(t, 2, 256, v, Options{})
		if v == ringWeakNoFen {
			// Plain data stores and a volatile flag: a data race, which the strong mode's
			// race detector reports (the load of the data does not follow a release).
			wantErr(t, err, KindDataRace, "kernel ring", "ld.global.u32", "multigpu_test.go:59",
				"that GPU 0 block (0,0,0) thread", "wrote with \"st.global.u32", "multigpu_test.go:36", "no release at .sys scope")
			err, bad = nil, 0
		}
		must(t, err)
		if bad != 0 {
			t.Fatalf("strong mode: %d wrong values", bad)
		}
		for _, seed := range []int64{1, 2, 3} {
			_, err := runRing(t, 2, 256, v, Options{Weak: true, Seed: seed})
			if e, ok := err.(*Error); ok && v == ringWeakNoFen && e.Kind == KindDataRace {
				continue // when the data's store was visible before the read (checked above)
			}
			wantErr(t, err, KindMissingFence, "kernel ring", "ld.global.u32", "multigpu_test.go:",
				"before they hold the store", "later store", "with \"ld.acquire.sys.global.u32")
		}
	}
	for _, seed := range []int64{0, 1, 2, 3} {
		bad, err := runRing(t, 4, 256, ringFenced, Options{Weak: true, Seed: seed})
		must(t, err)
		if bad != 0 {
			t.Fatalf("fenced, seed %d: %d wrong values", seed, bad)
		}
	}
	// The pull form: the producer stores into its own symmetric memory, the consumer reads it
	// through a peer address after seeing the flag.
	for _, seed := range []int64{1, 2} {
		_, err := runRingMode(t, 2, 256, ringNoFence, Options{Weak: true, Seed: seed}, true)
		wantErr(t, err, KindMissingFence, "kernel ring", "ld.global.u32")
		for _, v := range []ringVariant{ringFenced, ringCorrect} {
			bad, err := runRingMode(t, 3, 256, v, Options{Weak: true, Seed: seed}, true)
			must(t, err)
			if bad != 0 {
				t.Fatalf("pull, %v, seed %d: %d wrong values", v, seed, bad)
			}
		}
	}
	// Without the sanitizer the stale data is what the consumer gets.
	bad, err := runRing(t, 2, 256, ringNoFence, Options{Weak: true, Seed: 1, NoSanitizer: true})
	must(t, err)
	if bad == 0 {
		t.Fatal("weak mode without the sanitizer: the missing fence left no wrong value")
	}
}

const multimemSrc = `
.visible .entry mm(.param .u64 in, .param .u64 out, .param .u64 cnt, .param .u64 in16, .param .u64 out16,
	.param .u32 rank, .param .u32 ngpu, .param .u32 n)
{
	.reg .u64 %rd<12>;
	.reg .u32 %r<12>;
	.reg .f32 %f<8>;
	.reg .b32 %b<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [in];
	ld.param.u64 %rd1, [out];
	ld.param.u64 %rd2, [cnt];
	ld.param.u64 %rd8, [in16];
	ld.param.u64 %rd9, [out16];
	ld.param.u32 %r0, [rank];
	ld.param.u32 %r1, [ngpu];
	ld.param.u32 %r2, [n];
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r3, %r3, %r1, %r0;
LOOP:
	setp.ge.u32 %p0, %r3, %r2;
	@%p0 bra DONE;
	mul.wide.u32 %rd3, %r3, 16;
	add.u64 %rd4, %rd0, %rd3;
	add.u64 %rd5, %rd1, %rd3;
	multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%f0, %f1, %f2, %f3}, [%rd4];
	multimem.st.relaxed.sys.global.v4.f32 [%rd5], {%f0, %f1, %f2, %f3};
	mul.wide.u32 %rd3, %r3, 4;
	add.u64 %rd6, %rd8, %rd3;
	add.u64 %rd7, %rd9, %rd3;
	multimem.ld_reduce.relaxed.sys.global.add.acc::f32.f16x2 %b0, [%rd6];
	multimem.st.relaxed.sys.global.f16x2 [%rd7], %b0;
	multimem.red.relaxed.sys.global.add.u32 [%rd2], 1;
	mov.u32 %r4, %ntid.x;
	mad.lo.u32 %r3, %r4, %r1, %r3;
	bra.uni LOOP;
DONE:
	ret;
}`

func TestMultimem(t *testing.T) {
	m := asmUnverified(t, multimemSrc)
	const n = 100 // vec4 groups of f32, and f16x2 words
	for ngpu := 1; ngpu <= 8; ngpu++ {
		t.Run(fmt.Sprintf("%dgpu", ngpu), func(t *testing.T) {
			s := newSys(t, ngpu)
			in, _ := s.MallocSymmetric(16 * n)
			out, _ := s.MallocSymmetric(16 * n)
			cnt, _ := s.MallocSymmetric(4)
			in16, _ := s.MallocSymmetric(4 * n)
			out16, _ := s.MallocSymmetric(4 * n)
			vals := func(g, i int) float32 { return float32(g+1)*0.1 + float32(i)*0.37 }
			h := func(g, i int) float32 {
				return float32(fp.F16ToF32(fp.F32ToF16(float32(g)*0.333 + float32(i)*0.01 + 1)))
			}
			for g := 0; g < ngpu; g++ {
				v := make([]float32, 4*n)
				hv := make([]float32, 2*n)
				for i := range v {
					v[i] = vals(g, i)
				}
				for i := range hv {
					hv[i] = h(g, i)
				}
				must(t, WriteSlice(s, in.On(g), v))
				must(t, WriteF16(s, in16.On(g), hv))
			}
			err := s.Launch(Launch{Module: m, Entry: "mm", GPUs: s.All(), Grid: D1(1), Block: D1(32),
				ArgsFor: func(g int) []any {
					return []any{in.Multicast(), out.Multicast(), cnt.Multicast(), in16.Multicast(), out16.Multicast(), uint32(g), uint32(ngpu), uint32(n)}
				}})
			must(t, err)
			for g := 0; g < ngpu; g++ {
				got := readF32(t, s, out.On(g), 4*n)
				for i, x := range got {
					var want float32
					for k := 0; k < ngpu; k++ {
						want += vals(k, i)
					}
					if x != want {
						t.Fatalf("GPU %d f32 element %d: got %v want %v", g, i, x, want)
					}
				}
				got16, err := ReadF16(s, out16.On(g), 2*n)
				must(t, err)
				for i, x := range got16 {
					var acc float32
					for k := 0; k < ngpu; k++ {
						acc += h(k, i)
					}
					want := fp.F16ToF32(fp.F32ToF16(acc))
					if x != want {
						t.Fatalf("GPU %d f16 element %d: got %v want %v", g, i, x, want)
					}
				}
				c := readU32(t, s, cnt.On(g), 1)
				if c[0] != uint32(n) {
					t.Fatalf("GPU %d: multimem.red count %d, want %d", g, c[0], n)
				}
			}
		})
	}
	_ = math.Abs
}

func TestMultimemOnUnicastAddress(t *testing.T) {
	m := asmUnverified(t, multimemSrc)
	s := newSys(t, 2)
	in, _ := s.MallocSymmetric(16 * 4)
	err := s.Launch(Launch{Module: m, Entry: "mm", GPUs: s.All(), Grid: D1(1), Block: D1(32),
		ArgsFor: func(g int) []any {
			return []any{in.On(g), in.Multicast(), in.Multicast(), in.Multicast(), in.Multicast(), uint32(g), uint32(2), uint32(4)}
		}})
	wantErr(t, err, KindMulticast, "not a multicast address", "multimem.ld_reduce", "multigpu_test.go:")
}

// TestMultimemOps: the other reductions and types: bf16x2 with and without .acc::f32 (the
// two differ), f16 min, u32 max, s32 min, b32 xor, and multimem.red add on f32 vectors.
func TestMultimemOps(t *testing.T) {
	m := asmUnverified(t, `
.visible .entry mmops(.param .u64 mc, .param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .b32 %b<8>;
	.reg .b16 %h<2>;
	.reg .f32 %f<2>;
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [mc];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra END;
	multimem.ld_reduce.relaxed.sys.global.add.acc::f32.bf16x2 %b0, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.add.bf16x2 %b1, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.min.f16 %h0, [%rd0+4];
	multimem.ld_reduce.relaxed.sys.global.max.u32 %b2, [%rd0+8];
	multimem.ld_reduce.relaxed.sys.global.min.s32 %b3, [%rd0+12];
	multimem.ld_reduce.relaxed.sys.global.xor.b32 %b4, [%rd0+16];
	st.global.v4.b32 [%rd1], {%b0, %b1, %b2, %b3};
	st.global.b32 [%rd1+16], %b4;
	st.global.b16 [%rd1+20], %h0;
	mov.f32 %f0, 0f3F800000;
	multimem.red.release.sys.global.add.v2.f32 [%rd0+32], {%f0, %f0};
END:
	ret;
}`)
	const ngpu = 4
	s := newSys(t, ngpu)
	sym, _ := s.MallocSymmetric(64)
	outs := make([]uint64, ngpu)
	bfv := []float32{1, 0x1p-8, 0x1p-8, 0x1p-8} // the small terms vanish one by one in bf16, not in f32
	for g := 0; g < ngpu; g++ {
		outs[g] = mustMalloc(t, s, g, 32)
		must(t, WriteBF16(s, sym.On(g), []float32{bfv[g], float32(g + 1)}))
		must(t, WriteF16(s, sym.On(g)+4, []float32{float32(3 - g)}))
		must(t, WriteSlice(s, sym.On(g)+8, []uint32{uint32(10 * g), uint32(int32(5 - 3*g)), 1 << g}))
	}
	must(t, s.Launch(Launch{Module: m, Entry: "mmops", GPUs: s.All(), Grid: D1(1), Block: D1(32),
		ArgsFor: func(g int) []any { return []any{sym.Multicast(), outs[g]} }}))
	got := readU32(t, s, outs[2], 6)
	lo32 := func(x uint32) float32 { return fp.BF16ToF32(uint16(x)) }
	hi32 := func(x uint32) float32 { return fp.BF16ToF32(uint16(x >> 16)) }
	if lo32(got[0]) != fp.BF16ToF32(fp.F32ToBF16(1+3*0x1p-8)) || hi32(got[0]) != 10 {
		t.Fatalf("bf16x2 acc::f32: %v %v", lo32(got[0]), hi32(got[0]))
	}
	if lo32(got[1]) != 1 || hi32(got[1]) != 10 {
		t.Fatalf("bf16x2 accumulated in bf16: %v %v", lo32(got[1]), hi32(got[1]))
	}
	if got[2] != 30 || int32(got[3]) != -4 || got[4] != 0xf {
		t.Fatalf("max.u32 %d, min.s32 %d, xor %#x", got[2], int32(got[3]), got[4])
	}
	if h := fp.F16ToF32(uint16(got[5])); h != 0 {
		t.Fatalf("min.f16: %v", h)
	}
	for g := 0; g < ngpu; g++ {
		v := readF32(t, s, sym.On(g)+32, 2)
		if v[0] != ngpu || v[1] != ngpu {
			t.Fatalf("GPU %d: multimem.red add: %v", g, v)
		}
	}
}

// TestMultimemFP8: multimem.ld_reduce of packed fp8 over 3 GPUs. With .acc::f16 the values
// are summed in f16 in GPU order and the sum is rounded to the fp8 type once; without it
// every step rounds to the fp8 type; min and max compare. Overflow does not saturate (e4m3
// NaN, e5m2 Inf). Lane by lane, GPU 0, 1, 2:
//
//	e4m3 word: (256, 16, 2^-9) (16, 1, 1) (448, 448, 0) (-1.5, 0.25, -0.5)
//	e5m2 word: (57344, 57344, 0) (1, 2, 4) (-0, -0, -0) (3, -3, 0.5)
func TestMultimemFP8(t *testing.T) {
	m := asmUnverified(t, `
.visible .entry mmfp8(.param .u64 mc, .param .u64 out)
{
	.reg .u64 %rd<4>;
	.reg .b32 %b<8>;
	.reg .b16 %h<2>;
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [mc];
	ld.param.u64 %rd1, [out];
	mov.u32 %r0, %tid.x;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra END;
	multimem.ld_reduce.relaxed.sys.global.add.acc::f16.e4m3x4 %b0, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.add.e4m3x4 %b1, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.min.e4m3x4 %b2, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.max.e4m3x4 %b3, [%rd0];
	multimem.ld_reduce.relaxed.sys.global.add.acc::f16.e5m2x4 %b4, [%rd0+4];
	multimem.ld_reduce.relaxed.sys.global.add.acc::f16.v2.e4m3x2 {%h0, %h1}, [%rd0];
	st.global.v4.b32 [%rd1], {%b0, %b1, %b2, %b3};
	st.global.b32 [%rd1+16], %b4;
	st.global.v2.b16 [%rd1+20], {%h0, %h1};
	multimem.st.relaxed.sys.global.v2.e4m3x4 [%rd0+16], {%b0, %b4};
END:
	ret;
}`)
	e4 := func(x float64) uint8 { b, _ := fp.F64ToE4M3(x); return b }
	e5 := func(x float64) uint8 { b, _ := fp.F64ToE5M2(x); return b }
	in := [3][8]uint8{
		{e4(256), e4(16), e4(448), e4(-1.5), e5(57344), e5(1), e5(math.Copysign(0, -1)), e5(3)},
		{e4(16), e4(1), e4(448), e4(0.25), e5(57344), e5(2), e5(math.Copysign(0, -1)), e5(-3)},
		{e4(0x1p-9), e4(1), e4(0), e4(-0.5), e5(0), e5(4), e5(math.Copysign(0, -1)), e5(0.5)},
	}
	s := newSys(t, 3)
	sym, _ := s.MallocSymmetric(32)
	outs := make([]uint64, 3)
	for g := range outs {
		outs[g] = mustMalloc(t, s, g, 32)
		must(t, WriteSlice(s, sym.On(g), in[g][:]))
	}
	must(t, s.Launch(Launch{Module: m, Entry: "mmfp8", GPUs: s.All(), Grid: D1(1), Block: D1(32),
		ArgsFor: func(g int) []any { return []any{sym.Multicast(), outs[g]} }}))
	word := func(b ...uint8) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	// 256+16 = 272 is exact in f16, 272 + 2^-9 rounds back to 272 (f16 spacing 0.25), and
	// 272 ties to 256 in e4m3 (an exact sum would give 288). 16+1+1 = 18 in f16; step by
	// step in e4m3, 16+1 ties back to 16 twice.
	want := []uint32{
		word(e4(256), e4(18), 0x7f, e4(-1.75)),
		word(e4(256), e4(16), 0x7f, e4(-1.75)),
		word(e4(0x1p-9), e4(1), e4(0), e4(-1.5)),
		word(e4(256), e4(16), e4(448), e4(0.25)),
		word(0x7c, e5(7), 0x80, e5(0.5)),
		word(e4(256), e4(18), 0x7f, e4(-1.75)),
	}
	for g := range outs {
		got := readU32(t, s, outs[g], 6)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("GPU %d word %d = %#08x, want %#08x", g, i, got[i], want[i])
			}
		}
		st := readU32(t, s, sym.On(g)+16, 2)
		if st[0] != want[0] || st[1] != want[4] {
			t.Errorf("GPU %d: multimem.st of e4m3x4 wrote %#08x %#08x, want %#08x %#08x", g, st[0], st[1], want[0], want[4])
		}
	}
}
