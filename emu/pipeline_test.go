package emu

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// pipelineSrc is a warp-specialized Hopper main loop in miniature: warps 0-3 (a warpgroup)
// consume, warp 4 produces. Two stages of A and B tiles (64 x 64 bf16 each, K-major,
// 128-byte swizzle), each with a full barrier (1 arrival + the TMA bytes) and an empty
// barrier (128 consumer arrivals). The producer's lane 0 waits for the stage to be empty
// (parity starting at 1: a fresh barrier passes), arms full with expect_tx and issues both
// TMA loads; the consumers wait for full, run four wgmmas over the stage, wait for them and
// arrive on empty. KT k-tiles of 64; D is 64 x 64 f32, stored as in the wgmma tests.
func pipelineSrc(kt int) string {
	d := make([]string, 32)
	for i := range d {
		d[i] = fmt.Sprintf("%%d%d", i)
	}
	dv := "{" + strings.Join(d, ", ") + "}"
	var b strings.Builder
	fmt.Fprintf(&b, `.visible .entry k(.param .align 64 .b8 tma[128], .param .align 64 .b8 tmb[128], .param .u64 pd)
{
	.shared .align 1024 .b8 sa[16384];
	.shared .align 1024 .b8 sb[16384];
	.shared .align 8 .b64 full[2];
	.shared .align 8 .b64 empty[2];
	.reg .f32 %%d<32>;
	.reg .u32 %%r<20>;
	.reg .u64 %%rd<20>;
	.reg .pred %%p<8>;
	.reg .u64 %%tm<4>;
	mov.u64 %%tm0, tma;
	cvta.param.u64 %%tm1, %%tm0;
	mov.u64 %%tm2, tmb;
	cvta.param.u64 %%tm3, %%tm2;
	mov.u32 %%r0, %%tid.x;
	shr.u32 %%r1, %%r0, 5;
	mov.u64 %%rd0, full;
	mov.u64 %%rd1, empty;
	mov.u64 %%rd2, sa;
	mov.u64 %%rd3, sb;
	setp.eq.u32 %%p0, %%r0, 0;
	@%%p0 mbarrier.init.shared.b64 [%%rd0], 1;
	@%%p0 mbarrier.init.shared.b64 [%%rd0+8], 1;
	@%%p0 mbarrier.init.shared.b64 [%%rd1], 128;
	@%%p0 mbarrier.init.shared.b64 [%%rd1+8], 128;
	bar.sync 0;
	mov.u32 %%r2, 0;
	setp.eq.u32 %%p1, %%r1, 4;
	@%%p1 bra PRODUCER;
	setmaxnreg.inc.sync.aligned.u32 232;
`)
	for i := range d {
		fmt.Fprintf(&b, "\tmov.f32 %%d%d, 0f00000000;\n", i)
	}
	fmt.Fprintf(&b, `CLOOP:
	and.b32 %%r3, %%r2, 1;
	shr.u32 %%r4, %%r2, 1;
	and.b32 %%r4, %%r4, 1;
	mul.wide.u32 %%rd4, %%r3, 8;
	add.u64 %%rd5, %%rd0, %%rd4;
	add.u64 %%rd6, %%rd1, %%rd4;
CWAIT:
	mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %%p2, [%%rd5], %%r4;
	@!%%p2 bra CWAIT;
	mul.wide.u32 %%rd7, %%r3, 8192;
	add.u64 %%rd8, %%rd2, %%rd7;
	shr.u64 %%rd8, %%rd8, 4;
	or.b64 %%rd8, %%rd8, 0x4000004000010000;
	add.u64 %%rd9, %%rd3, %%rd7;
	shr.u64 %%rd9, %%rd9, 4;
	or.b64 %%rd9, %%rd9, 0x4000004000010000;
	wgmma.fence.sync.aligned;
`)
	for s := 0; s < 4; s++ {
		fmt.Fprintf(&b, "\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 %s, %%rd8, %%rd9, 1, 1, 1, 0, 0;\n", dv)
		b.WriteString("\tadd.u64 %rd8, %rd8, 2;\n\tadd.u64 %rd9, %rd9, 2;\n")
	}
	fmt.Fprintf(&b, `	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	mbarrier.arrive.release.cta.shared::cta.b64 %%rd10, [%%rd6];
	add.u32 %%r2, %%r2, 1;
	setp.lt.u32 %%p3, %%r2, %d;
	@%%p3 bra CLOOP;
	ld.param.u64 %%rd11, [pd];
	mul.wide.u32 %%rd12, %%r0, 4;
	add.u64 %%rd11, %%rd11, %%rd12;
`, kt)
	for i := range d {
		fmt.Fprintf(&b, "\tst.global.f32 [%%rd11+%d], %%d%d;\n", i*512, i)
	}
	fmt.Fprintf(&b, `	ret;
PRODUCER:
	setmaxnreg.dec.sync.aligned.u32 40;
	and.b32 %%r5, %%r0, 31;
	setp.ne.u32 %%p4, %%r5, 0;
	@%%p4 bra PDONE;
PLOOP:
	and.b32 %%r3, %%r2, 1;
	shr.u32 %%r4, %%r2, 1;
	and.b32 %%r4, %%r4, 1;
	xor.b32 %%r4, %%r4, 1;
	mul.wide.u32 %%rd4, %%r3, 8;
	add.u64 %%rd5, %%rd0, %%rd4;
	add.u64 %%rd6, %%rd1, %%rd4;
PWAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %%p5, [%%rd6], %%r4;
	@!%%p5 bra PWAIT;
	mbarrier.arrive.expect_tx.shared::cta.b64 %%rd13, [%%rd5], 16384;
	mul.wide.u32 %%rd7, %%r3, 8192;
	add.u64 %%rd8, %%rd2, %%rd7;
	add.u64 %%rd9, %%rd3, %%rd7;
	shl.b32 %%r6, %%r2, 6;
	mov.u32 %%r7, 0;
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%%rd8], [%%tm1, {%%r6, %%r7}], [%%rd5];
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%%rd9], [%%tm3, {%%r6, %%r7}], [%%rd5];
	add.u32 %%r2, %%r2, 1;
	setp.lt.u32 %%p6, %%r2, %d;
	@%%p6 bra PLOOP;
PDONE:
	ret;
}
`, kt)
	return b.String()
}

// TestPipelineWarpSpecialized runs the two-stage pipeline over 5 k-tiles (the stages' phases
// flip twice and more) under several seeds and checks D against the Go model.
func TestPipelineWarpSpecialized(t *testing.T) {
	const kt = 5
	rng := rand.New(rand.NewSource(11))
	K := 64 * kt
	a, b := fmatrix(64, K), fmatrix(64, K)
	ab, bb := make([]uint16, 64*K), make([]uint16, 64*K)
	for i := 0; i < 64; i++ {
		for k := 0; k < K; k++ {
			var x, y uint32
			a[i][k], x = randElem(rng, ptx.BF16)
			b[i][k], y = randElem(rng, ptx.BF16)
			ab[i*K+k], bb[i*K+k] = uint16(x), uint16(y)
		}
	}
	m := asm(t, pipelineSrc(kt))
	for _, seed := range []int64{0, 5, 9} {
		sys := newSys(t, 1)
		ga, gb := mustMalloc(t, sys, 0, 2*64*K), mustMalloc(t, sys, 0, 2*64*K)
		must(t, WriteSlice(sys, ga, ab))
		must(t, WriteSlice(sys, gb, bb))
		tmap := func(g uint64) TensorMap {
			return TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{uint64(K), 64}, Strides: [5]uint64{0, uint64(2 * K)}, Box: [5]uint32{64, 64}, Swizzle: 128}
		}
		pd := mustMalloc(t, sys, 0, 32*512)
		err := sys.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(160), Args: []any{tmap(ga), tmap(gb), pd}, Options: Options{Seed: seed}})
		must(t, err)
		out, err := ReadSlice[float32](sys, pd, 32*128)
		must(t, err)
		for tid := 0; tid < 128; tid++ {
			l, wi := tid%32, tid/32
			for i := 0; i < 32; i++ {
				row, col := 16*wi+l/4+8*((i%4)/2), 8*(i/4)+2*(l%4)+i%2
				acc := 0.0
				for s := 0; s < K/16; s++ {
					for k := 16 * s; k < 16*(s+1); k++ {
						acc += a[row][k] * b[col][k]
					}
					acc = float64(float32(acc))
				}
				if got := out[i*128+tid]; got != float32(acc) {
					t.Fatalf("seed %d: D[%d][%d] = %g, want %g", seed, row, col, got, acc)
				}
			}
		}
	}
}

// TestPipelineMissingEmptyArrive: consumers that never release a stage stall the producer
// at the third k-tile; the deadlock report names a barrier of the pipeline and where the
// thread waits.
func TestPipelineMissingEmptyArrive(t *testing.T) {
	src := strings.Replace(pipelineSrc(4), "\tmbarrier.arrive.release.cta.shared::cta.b64 %rd10, [%rd6];\n", "", 1)
	if src == pipelineSrc(4) {
		t.Fatal("the arrive on empty was not removed")
	}
	sys := newSys(t, 1)
	g := mustMalloc(t, sys, 0, 2*64*256)
	tm := TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{256, 64}, Strides: [5]uint64{0, 512}, Box: [5]uint32{64, 64}, Swizzle: 128}
	pd := mustMalloc(t, sys, 0, 32*512)
	err := sys.Launch(Launch{Module: asm(t, src), Entry: "k", Grid: D1(1), Block: D1(160), Args: []any{tm, tm, pd}})
	wantErr(t, err, KindDeadlock, "never completes its phase", "mbarrier.try_wait.parity")
	// The consumers wait for full[0] (parity 1), the producer for empty[0] (parity 0).
	for _, want := range []string{"mbarrier full (shared offset 0x8000) never completes its phase (parity 1): 1 of 1 arrivals pending",
		"also waiting: mbarrier empty (shared offset 0x8010) (parity 0): 128 of 128 arrivals pending (a missing arrive?); block (0,0,0) warp 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the report lacks %q:\n%v", want, err)
		}
	}
}
