package emu

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// tmaLoadSrc: thread 0 arms the mbarrier with expect_tx(pexp bytes) and issues the tensor
// load of the box at (px, py, pz); every thread waits for phase 0 and copies the box from
// shared memory to pout, word by word.
const tmaLoadSrc = `
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 pout, .param .u32 px, .param .u32 py, .param .u32 pz, .param .u32 pexp, .param .u32 pwords)
{
	.shared .align 1024 .b8 box[8192];
	.shared .align 8 .b64 full;
	.reg .u32 %r<10>;
	.reg .u64 %rd<10>;
	.reg .pred %p<4>;
	.reg .u64 %tm<8>;
	mov.u64 %tm0, tmap;
	cvta.param.u64 %tm1, %tm0;
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	mov.u64 %rd0, full;
	mov.u64 %rd1, box;
	@%p0 mbarrier.init.shared.b64 [%rd0], 1;
	bar.sync 0;
	ld.param.u32 %r1, [px];
	ld.param.u32 %r2, [py];
	ld.param.u32 %r3, [pz];
	ld.param.u32 %r4, [pexp];
	@%p0 mbarrier.arrive.expect_tx.shared.b64 %rd2, [%rd0], %r4;
	@%p0 cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%tm1, {%r1, %r2, %r3}], [%rd0];
LWAIT:
	mbarrier.try_wait.parity.shared.b64 %p1, [%rd0], 0;
	@!%p1 bra LWAIT;
	ld.param.u64 %rd3, [pout];
	ld.param.u32 %r5, [pwords];
	mov.u32 %r6, %r0;
LCOPY:
	setp.ge.u32 %p2, %r6, %r5;
	@%p2 bra LDONE;
	mul.wide.u32 %rd4, %r6, 4;
	add.u64 %rd5, %rd1, %rd4;
	ld.shared.u32 %r7, [%rd5];
	add.u64 %rd6, %rd3, %rd4;
	st.global.u32 [%rd6], %r7;
	add.u32 %r6, %r6, 32;
	bra LCOPY;
LDONE:
	ret;
}
`

// tmaCase is a 3-D tensor of 16-bit elements (value = its linear index + 1) and a box.
type tmaCase struct {
	dims  [3]int
	box   [3]int
	es    [3]int // element strides (0: 1)
	at    [3]int32
	swz   int
	pitch int // bytes between rows (dimension 1); 0: dims[0]*2 rounded up to 16
}

func (c tmaCase) String() string {
	return fmt.Sprintf("dims %v box %v strides %v at %v swizzle %d", c.dims, c.box, c.es, c.at, c.swz)
}

func runTMALoad(t *testing.T, c tmaCase, wrongTx int) error {
	t.Helper()
	return runTMALoadIn(t, c, wrongTx, tmaLoadSrc, 0)
}

// runTMALoadIn is runTMALoad of the kernel src launched with dyn bytes of dynamic shared
// memory.
func runTMALoadIn(t *testing.T, c tmaCase, wrongTx int, src string, dyn int) error {
	t.Helper()
	pitch := c.pitch
	if pitch == 0 {
		pitch = (c.dims[0]*2 + 15) &^ 15
	}
	plane := pitch * c.dims[1]
	sys := newSys(t, 1)
	g := mustMalloc(t, sys, 0, plane*c.dims[2])
	img := make([]uint16, plane*c.dims[2]/2)
	val := func(x, y, z int) uint16 { return uint16(1 + x + c.dims[0]*(y+c.dims[1]*z)) }
	for z := 0; z < c.dims[2]; z++ {
		for y := 0; y < c.dims[1]; y++ {
			for x := 0; x < c.dims[0]; x++ {
				img[(z*plane+y*pitch)/2+x] = val(x, y, z)
			}
		}
	}
	must(t, WriteSlice(sys, g, img))
	tm := TensorMap{Elem: ptx.BF16, Rank: 3, Global: g, Swizzle: c.swz}
	cnt := [3]int{}
	total := 2
	for d := 0; d < 3; d++ {
		tm.Dims[d], tm.Box[d], tm.ElemStrides[d] = uint64(c.dims[d]), uint32(c.box[d]), uint32(c.es[d])
		s := max(c.es[d], 1)
		if d == 0 {
			s = 1 // the driver ignores dimension 0's element stride
		}
		cnt[d] = (c.box[d] + s - 1) / s
		total *= cnt[d]
	}
	tm.Strides[1], tm.Strides[2] = uint64(pitch), uint64(plane)
	out := mustMalloc(t, sys, 0, 8192)
	err := sys.Launch(Launch{Module: asm(t, src), Entry: "k", Grid: D1(1), Block: D1(32), SharedBytes: dyn,
		Args: []any{tm, out, uint32(c.at[0]), uint32(c.at[1]), uint32(c.at[2]), uint32(total + wrongTx), uint32(total / 4)}})
	if err != nil {
		return err
	}
	got, err := ReadSlice[uint16](sys, out, total/2)
	must(t, err)
	// The model: box element (i, j, k) at byte 2*(i + cnt0*(j + cnt1*k)), swizzled; zero
	// outside the tensor.
	bad, first := 0, ""
	for k := 0; k < cnt[2]; k++ {
		for j := 0; j < cnt[1]; j++ {
			for i := 0; i < cnt[0]; i++ {
				x := int(c.at[0]) + i
				y := int(c.at[1]) + j*max(c.es[1], 1)
				z := int(c.at[2]) + k*max(c.es[2], 1)
				want := uint16(0)
				if x >= 0 && y >= 0 && z >= 0 && x < c.dims[0] && y < c.dims[1] && z < c.dims[2] {
					want = val(x, y, z)
				}
				off := swzOff(2*(i+cnt[0]*(j+cnt[1]*k)), c.swz)
				if got[off/2] != want {
					if bad == 0 {
						first = fmt.Sprintf("box element (%d,%d,%d) = %d, want %d", i, j, k, got[off/2], want)
					}
					bad++
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d elements differ; first %s", c, bad, first)
	}
	return nil
}

// TestTMALoad checks box loads inside the tensor and across each edge (zero fill), with
// every swizzle mode and element strides (dimension 0's is ignored, as by the driver),
// against the Go model.
func TestTMALoad(t *testing.T) {
	for _, c := range []tmaCase{
		{dims: [3]int{40, 20, 3}, box: [3]int{64, 8, 1}, at: [3]int32{-8, 16, 2}, swz: 128},
		{dims: [3]int{100, 9, 2}, box: [3]int{32, 4, 2}, at: [3]int32{80, 7, 1}, swz: 64},
		{dims: [3]int{16, 16, 4}, box: [3]int{16, 16, 1}, at: [3]int32{0, 0, 3}, swz: 32},
		{dims: [3]int{24, 5, 5}, box: [3]int{8, 8, 8}, at: [3]int32{-8, -3, -2}},
		{dims: [3]int{64, 8, 1}, box: [3]int{64, 8, 1}, at: [3]int32{0, 0, 0}, swz: 128, pitch: 256},
		{dims: [3]int{50, 12, 2}, box: [3]int{16, 6, 2}, es: [3]int{2, 3, 1}, at: [3]int32{40, 2, 0}},
	} {
		must(t, runTMALoad(t, c, 0))
	}
}

// TestTMALoadMisaligned: a box whose inner coordinate is not a multiple of 16 bytes (here
// -4 and 20 bf16 elements) is a misaligned-access fault naming the coordinate, as an H100
// raises IllegalInstruction for it.
func TestTMALoadMisaligned(t *testing.T) {
	for _, x := range []int32{-4, 20} {
		c := tmaCase{dims: [3]int{24, 5, 5}, box: [3]int{8, 8, 8}, at: [3]int32{x, 0, 0}}
		wantErr(t, runTMALoad(t, c, 0), KindMisaligned, fmt.Sprintf("the box's inner coordinate %d is %d bytes from the tensor's start, not a multiple of 16", x, 2*x),
			"cp.async.bulk.tensor.3d")
	}
}

// TestTMADynamicSharedAlignment: dynamic shared memory is only 16-byte aligned (CUDA's
// guarantee, whatever the extern's .align; the emulator gives exactly 16), so a 128-byte
// swizzled box written at its start is a misaligned-access fault, as on an H100
// (MisalignedAddress); rounding the address up to 1024 at run time, with 1 KiB more
// allocated, loads the box.
func TestTMADynamicSharedAlignment(t *testing.T) {
	dynSrc := strings.Replace(strings.Replace(tmaLoadSrc, "\t.shared .align 1024 .b8 box[8192];\n", "", 1),
		"mov.u64 %rd1, box;", "mov.u64 %rd1, dyn;", 1)
	dynSrc = ".extern .shared .align 1024 .b8 dyn[];\n" + dynSrc
	c := tmaCase{dims: [3]int{64, 8, 1}, box: [3]int{64, 8, 1}, swz: 128}
	wantErr(t, runTMALoadIn(t, c, 0, dynSrc, 8192), KindMisaligned, "is not 1024-byte aligned (a 128-byte swizzle's repeat", "cp.async.bulk.tensor.3d")
	c.swz, c.box[0] = 32, 16
	wantErr(t, runTMALoadIn(t, c, 0, dynSrc, 8192), KindMisaligned, "is not 256-byte aligned (a 32-byte swizzle's repeat")
	aligned := strings.Replace(dynSrc, "mov.u64 %rd1, dyn;", "mov.u64 %rd1, dyn;\n\tadd.u64 %rd1, %rd1, 1023;\n\tand.b64 %rd1, %rd1, -1024;", 1)
	for _, swz := range []int{0, 32, 64, 128} {
		c.swz, c.box[0] = swz, 64
		if swz > 0 {
			c.box[0] = swz / 2 // the box's inner bytes are at most the swizzle's
		}
		must(t, runTMALoadIn(t, c, 0, aligned, 8192+1024))
	}
}

// TestTMAWrongExpectTx: an expect_tx of 16 bytes more than the box leaves the phase open
// forever; the report is a deadlock naming the barrier, its phase, the missing bytes and the
// line that waits.
func TestTMAWrongExpectTx(t *testing.T) {
	c := tmaCase{dims: [3]int{40, 20, 3}, box: [3]int{64, 8, 1}, at: [3]int32{0, 0, 0}, swz: 128}
	err := runTMALoad(t, c, 16)
	e := wantErr(t, err, KindDeadlock, "mbarrier full (shared offset 0x2000) never completes its phase (parity 0)",
		"16 transaction bytes expected and not arrived", "mbarrier.try_wait.parity.shared.b64")
	if !strings.HasSuffix(e.Pos.File, "tma_test.go") || e.Pos.Line != lineOf(t, "tma_test.go", "\tmbarrier.try_wait.parity.shared.b64 %p1, [%rd0], 0;") {
		t.Errorf("the report names %s:%d, not the try_wait's line", e.Pos.File, e.Pos.Line)
	}
}

// lineOf returns the line of the test file holding text (once).
func lineOf(t *testing.T, file, text string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	must(t, err)
	n := 0
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, text) {
			if n != 0 {
				t.Fatalf("%q is on two lines of %s", text, file)
			}
			n = i + 1
		}
	}
	return n
}

// mbPhaseSrc: a barrier for 2 arrivals; thread 0 arrives with expect_tx(64), then
// complete_tx(48): the phase stays open (16 bytes and one arrival missing), then
// complete_tx(16): still open (one arrival); thread 1 arrives: the phase (parity 0)
// completes and the next (parity 1) is open. Each step's test_wait result is stored.
const mbPhaseSrc = `
.visible .entry k(.param .u64 pout)
{
	.shared .align 8 .b64 bar;
	.reg .u32 %r<4>;
	.reg .u64 %rd<6>;
	.reg .pred %p<8>;
	mov.u32 %r0, %tid.x;
	ld.param.u64 %rd0, [pout];
	mov.u64 %rd1, bar;
	setp.eq.u32 %p0, %r0, 0;
	setp.eq.u32 %p1, %r0, 1;
	@%p0 mbarrier.init.shared.b64 [%rd1], 2;
	bar.sync 0;
	@%p0 mbarrier.arrive.expect_tx.shared.b64 %rd2, [%rd1], 64;
	@%p0 mbarrier.complete_tx.shared.b64 [%rd1], 48;
	bar.sync 0;
	mbarrier.test_wait.parity.shared.b64 %p2, [%rd1], 0;
	@%p0 mbarrier.complete_tx.shared.b64 [%rd1], 16;
	bar.sync 0;
	mbarrier.test_wait.parity.shared.b64 %p3, [%rd1], 0;
	bar.sync 0;
	@%p1 mbarrier.arrive.shared.b64 %rd3, [%rd1];
	bar.sync 0;
	mbarrier.test_wait.parity.shared.b64 %p4, [%rd1], 0;
	mbarrier.test_wait.parity.shared.b64 %p5, [%rd1], 1;
	@%p0 selp.u32 %r1, 1, 0, %p2;
	@%p0 st.global.u32 [%rd0], %r1;
	@%p0 selp.u32 %r1, 1, 0, %p3;
	@%p0 st.global.u32 [%rd0+4], %r1;
	@%p0 selp.u32 %r1, 1, 0, %p4;
	@%p0 st.global.u32 [%rd0+8], %r1;
	@%p0 selp.u32 %r1, 1, 0, %p5;
	@%p0 st.global.u32 [%rd0+12], %r1;
	ret;
}
`

// TestMbarrierPhaseTx: the phase completes when both the arrivals and the transaction
// count reach zero, not before.
func TestMbarrierPhaseTx(t *testing.T) {
	sys := newSys(t, 1)
	out := mustMalloc(t, sys, 0, 16)
	must(t, launch1(sys, asm(t, mbPhaseSrc), "k", 1, 32, out))
	got := readU32(t, sys, out, 4)
	if want := []uint32{0, 0, 1, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("phase 0 complete after (48 of 64 bytes, 1 of 2 arrivals), (64 bytes, 1 arrival), (64 bytes, 2 arrivals); phase 1 complete: %v, want %v", got, want)
	}
}

const mbMissingArriveSrc = `
.visible .entry k()
{
	.shared .align 8 .b64 bars[2];
	.reg .u64 %rd<4>;
	.reg .pred %p<2>;
	mov.u64 %rd0, bars;
	add.u64 %rd0, %rd0, 8;
	mbarrier.init.shared.b64 [%rd0], 64;
	mbarrier.arrive.shared.b64 %rd1, [%rd0];
LWAIT:
	mbarrier.try_wait.parity.shared.b64 %p0, [%rd0], 0;
	@!%p0 bra LWAIT;
	ret;
}
`

// TestMbarrierMissingArrive: 32 arrivals on a barrier initialized for 64 never complete
// the phase; the deadlock names bars+8 and the missing arrivals.
func TestMbarrierMissingArrive(t *testing.T) {
	sys := newSys(t, 1)
	err := launch1(sys, asm(t, mbMissingArriveSrc), "k", 1, 32)
	wantErr(t, err, KindDeadlock, "mbarrier bars+8 (shared offset 0x8) never completes its phase (parity 0): 32 of 64 arrivals pending (a missing arrive?)", "tma_test.go:")
}

// tmaStoreSrc: the block fills an 8 x 16 box of shared memory (16-bit elements, value =
// index + 1) in the map's layout (the test passes it unswizzled), then thread 0 stores it
// to the tensor at (px, py) and adds it there with a reduction at (px, py + 2), and waits
// for the bulk group.
const tmaStoreSrc = `
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u32 px, .param .u32 py)
{
	.shared .align 128 .b8 box[256];
	.reg .u32 %r<8>;
	.reg .b16 %h<2>;
	.reg .u64 %rd<4>;
	.reg .pred %p<2>;
	.reg .u64 %tm<8>;
	mov.u64 %tm0, tmap;
	cvta.param.u64 %tm1, %tm0;
	mov.u32 %r0, %tid.x;
	mov.u64 %rd0, box;
	mul.wide.u32 %rd1, %r0, 2;
	add.u64 %rd1, %rd0, %rd1;
	add.u32 %r1, %r0, 1;
	cvt.u16.u32 %h0, %r1;
	st.shared.b16 [%rd1], %h0;
	add.u32 %r2, %r0, 65;
	cvt.u16.u32 %h1, %r2;
	st.shared.b16 [%rd1+128], %h1;
	bar.sync 0;
	setp.eq.u32 %p0, %r0, 0;
	ld.param.u32 %r3, [px];
	ld.param.u32 %r4, [py];
	add.u32 %r5, %r4, 2;
	fence.proxy.async.shared::cta;
	@%p0 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%tm1, {%r3, %r4}], [%rd0];
	@%p0 cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%tm1, {%r3, %r5}], [%rd0];
	@%p0 cp.async.bulk.commit_group;
	@%p0 cp.async.bulk.wait_group 0;
	ret;
}
`

// TestTMAStoreReduce stores a box across the tensor's right and bottom edges (only the
// elements inside are written) and adds one into it.
func TestTMAStoreReduce(t *testing.T) {
	const w, h = 20, 6
	sys := newSys(t, 1)
	g := mustMalloc(t, sys, 0, 48*h)
	init := make([]uint16, 24*h)
	for i := range init {
		init[i] = 1000
	}
	must(t, WriteSlice(sys, g, init))
	tm := TensorMap{Elem: ptx.U16, Rank: 2, Global: g, Dims: [5]uint64{w, h}, Strides: [5]uint64{0, 48}, Box: [5]uint32{16, 8}}
	must(t, launch1(sys, asm(t, tmaStoreSrc), "k", 1, 64, tm, uint32(8), uint32(1)))
	got, err := ReadSlice[uint16](sys, g, 24*h)
	must(t, err)
	for y := 0; y < h; y++ {
		for x := 0; x < 24; x++ {
			want := uint16(1000)
			bx, by := x-8, y-1
			if x < w && bx >= 0 && bx < 16 && by >= 0 && by < 8 {
				want = uint16(by*16 + bx + 1) // the store
			}
			if ry := y - 3; x < w && bx >= 0 && bx < 16 && ry >= 0 && ry < 8 {
				want += uint16(ry*16 + bx + 1) // the reduction, after the store
			}
			if got[y*24+x] != want {
				t.Fatalf("element (%d,%d) = %d, want %d", x, y, got[y*24+x], want)
			}
		}
	}
}

// TestTensorMapEncode round-trips a map and refuses bad ones, naming the field.
func TestTensorMapEncode(t *testing.T) {
	m := TensorMap{Elem: ptx.BF16, Rank: 2, Global: 0x1000, Dims: [5]uint64{100, 50}, Strides: [5]uint64{0, 208},
		Box: [5]uint32{64, 32}, ElemStrides: [5]uint32{1, 1}, Swizzle: 128, OOBNaN: true}
	b := m.Encode()
	got, err := DecodeTensorMap(b[:])
	must(t, err)
	if got != m {
		t.Errorf("round trip: %+v, want %+v", got, m)
	}
	for _, c := range []struct {
		edit func(*TensorMap)
		want string
	}{
		{func(m *TensorMap) { m.Rank = 6 }, "rank 6"},
		{func(m *TensorMap) { m.Global = 0x1008 }, "not 16-byte aligned"},
		{func(m *TensorMap) { m.Strides[1] = 200 }, "stride of dimension 1 is 200 bytes"},
		{func(m *TensorMap) { m.Box[1] = 300 }, "box dimension 1 is 300"},
		{func(m *TensorMap) { m.Box[0] = 128 }, "256 bytes, more than the 128-byte swizzle"},
		{func(m *TensorMap) { m.Box[0] = 4 }, "8 bytes (a multiple of 16)"},
		{func(m *TensorMap) { m.Elem = ptx.U32; m.Box[0] = 32 }, "NaN fill needs a float element type"},
		{func(m *TensorMap) { m.Swizzle = 48 }, "swizzle 48"},
	} {
		bad := m
		c.edit(&bad)
		b := bad.Encode()
		if _, err := DecodeTensorMap(b[:]); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error containing %q, got %v", c.want, err)
		}
	}
	if _, err := DecodeTensorMap(make([]byte, 128)); err == nil || !strings.Contains(err.Error(), "not a tensor map the emulator encoded") {
		t.Errorf("a zero map: %v", err)
	}
}

// tmaWgmmaSrc: a 64 x 64 x 64 bf16 GEMM tile the way a Hopper kernel feeds it: thread 0
// loads A (64 x 64, K-major) and B (64 x 64, K-major) with two 128-byte-swizzled TMA boxes on
// one mbarrier; the warpgroup waits, then issues four wgmmas (K = 16 each; the
// descriptors' start advancing 32 bytes) and stores D (thread tid, register i at word
// i*128 + tid).
const tmaWgmmaSrc = `
.visible .entry k(.param .align 64 .b8 tma[128], .param .align 64 .b8 tmb[128], .param .u64 pd)
{
	.shared .align 1024 .b8 sa[8192];
	.shared .align 1024 .b8 sb[8192];
	.shared .align 8 .b64 full;
	.reg .f32 %d<32>;
	.reg .u32 %r<4>;
	.reg .u64 %rd<12>;
	.reg .pred %p<4>;
	.reg .u64 %tm<8>;
	mov.u64 %tm0, tma;
	cvta.param.u64 %tm1, %tm0;
	mov.u64 %tm2, tmb;
	cvta.param.u64 %tm3, %tm2;
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	mov.u64 %rd0, full;
	mov.u64 %rd1, sa;
	mov.u64 %rd2, sb;
	mov.u32 %r1, 0;
	@%p0 mbarrier.init.shared.b64 [%rd0], 1;
	bar.sync 0;
	@%p0 mbarrier.arrive.expect_tx.shared.b64 %rd3, [%rd0], 16384;
	@%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%tm1, {%r1, %r1}], [%rd0];
	@%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd2], [%tm3, {%r1, %r1}], [%rd0];
LWAIT:
	mbarrier.try_wait.parity.shared.b64 %p3, [%rd0], 0;
	@!%p3 bra LWAIT;
	shr.u64 %rd4, %rd1, 4;
	or.b64 %rd4, %rd4, 0x4000004000010000;
	shr.u64 %rd5, %rd2, 4;
	or.b64 %rd5, %rd5, 0x4000004000010000;
	setp.ne.u32 %p2, %r0, %r0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7, %d8, %d9, %d10, %d11, %d12, %d13, %d14, %d15, %d16, %d17, %d18, %d19, %d20, %d21, %d22, %d23, %d24, %d25, %d26, %d27, %d28, %d29, %d30, %d31}, %rd4, %rd5, %p2, 1, 1, 0, 0;
	add.u64 %rd4, %rd4, 2;
	add.u64 %rd5, %rd5, 2;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7, %d8, %d9, %d10, %d11, %d12, %d13, %d14, %d15, %d16, %d17, %d18, %d19, %d20, %d21, %d22, %d23, %d24, %d25, %d26, %d27, %d28, %d29, %d30, %d31}, %rd4, %rd5, 1, 1, 1, 0, 0;
	add.u64 %rd4, %rd4, 2;
	add.u64 %rd5, %rd5, 2;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7, %d8, %d9, %d10, %d11, %d12, %d13, %d14, %d15, %d16, %d17, %d18, %d19, %d20, %d21, %d22, %d23, %d24, %d25, %d26, %d27, %d28, %d29, %d30, %d31}, %rd4, %rd5, 1, 1, 1, 0, 0;
	add.u64 %rd4, %rd4, 2;
	add.u64 %rd5, %rd5, 2;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7, %d8, %d9, %d10, %d11, %d12, %d13, %d14, %d15, %d16, %d17, %d18, %d19, %d20, %d21, %d22, %d23, %d24, %d25, %d26, %d27, %d28, %d29, %d30, %d31}, %rd4, %rd5, 1, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	ld.param.u64 %rd6, [pd];
	mul.wide.u32 %rd7, %r0, 4;
	add.u64 %rd6, %rd6, %rd7;
	st.global.f32 [%rd6], %d0;
	st.global.f32 [%rd6+512], %d1;
	st.global.f32 [%rd6+1024], %d2;
	st.global.f32 [%rd6+1536], %d3;
	st.global.f32 [%rd6+2048], %d4;
	st.global.f32 [%rd6+2560], %d5;
	st.global.f32 [%rd6+3072], %d6;
	st.global.f32 [%rd6+3584], %d7;
	st.global.f32 [%rd6+4096], %d8;
	st.global.f32 [%rd6+4608], %d9;
	st.global.f32 [%rd6+5120], %d10;
	st.global.f32 [%rd6+5632], %d11;
	st.global.f32 [%rd6+6144], %d12;
	st.global.f32 [%rd6+6656], %d13;
	st.global.f32 [%rd6+7168], %d14;
	st.global.f32 [%rd6+7680], %d15;
	st.global.f32 [%rd6+8192], %d16;
	st.global.f32 [%rd6+8704], %d17;
	st.global.f32 [%rd6+9216], %d18;
	st.global.f32 [%rd6+9728], %d19;
	st.global.f32 [%rd6+10240], %d20;
	st.global.f32 [%rd6+10752], %d21;
	st.global.f32 [%rd6+11264], %d22;
	st.global.f32 [%rd6+11776], %d23;
	st.global.f32 [%rd6+12288], %d24;
	st.global.f32 [%rd6+12800], %d25;
	st.global.f32 [%rd6+13312], %d26;
	st.global.f32 [%rd6+13824], %d27;
	st.global.f32 [%rd6+14336], %d28;
	st.global.f32 [%rd6+14848], %d29;
	st.global.f32 [%rd6+15360], %d30;
	st.global.f32 [%rd6+15872], %d31;
	ret;
}
`

// TestTMAFeedsWgmma: TMA's 128-byte swizzle and wgmma's K-major 128-byte-swizzle descriptor
// (SBO 1024) agree: the tile product matches the Go model.
func TestTMAFeedsWgmma(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	sys := newSys(t, 1)
	a, b := fmatrix(64, 64), fmatrix(64, 64) // a[m][k], b[n][k]
	ab, bb := make([]uint16, 64*64), make([]uint16, 64*64)
	for i := 0; i < 64; i++ {
		for k := 0; k < 64; k++ {
			var x, y uint32
			a[i][k], x = randElem(rng, ptx.BF16)
			b[i][k], y = randElem(rng, ptx.BF16)
			ab[i*64+k], bb[i*64+k] = uint16(x), uint16(y)
		}
	}
	ga, gb := mustMalloc(t, sys, 0, 8192), mustMalloc(t, sys, 0, 8192)
	must(t, WriteSlice(sys, ga, ab))
	must(t, WriteSlice(sys, gb, bb))
	tmap := func(g uint64) TensorMap {
		return TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{64, 64}, Strides: [5]uint64{0, 128}, Box: [5]uint32{64, 64}, Swizzle: 128}
	}
	pd := mustMalloc(t, sys, 0, 32*512)
	must(t, launch1(sys, asm(t, tmaWgmmaSrc), "k", 1, 128, tmap(ga), tmap(gb), pd))
	out, err := ReadSlice[float32](sys, pd, 32*128)
	must(t, err)
	for tid := 0; tid < 128; tid++ {
		l, wi := tid%32, tid/32
		for i := 0; i < 32; i++ {
			row, col := 16*wi+l/4+8*((i%4)/2), 8*(i/4)+2*(l%4)+i%2
			acc := 0.0
			for s := 0; s < 4; s++ {
				for k := 16 * s; k < 16*(s+1); k++ {
					acc += a[row][k] * b[col][k]
				}
				acc = float64(float32(acc))
			}
			if got := out[i*128+tid]; got != float32(acc) {
				t.Fatalf("D[%d][%d] = %g, want %g", row, col, got, acc)
			}
		}
	}
}

// TestTMALoad5D loads a 5-D box (4 x 2 x 2 x 2 x 2 of 32-bit elements) at (0, 1, 0, 1, 0)
// of a 4 x 3 x 2 x 2 x 3 tensor: dimension 3 covers 1 and 2, and 2 is outside (zero fill).
func TestTMALoad5D(t *testing.T) {
	// The kernel's coordinates become (px, py, pz, py, pz).
	src := strings.NewReplacer(".3d.", ".5d.", "{%r1, %r2, %r3}", "{%r1, %r2, %r3, %r2, %r3}").Replace(tmaLoadSrc)
	sys := newSys(t, 1)
	dims := [5]uint64{4, 3, 2, 2, 3}
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(1000 + i)
	}
	g := mustMalloc(t, sys, 0, 4*n)
	must(t, WriteSlice(sys, g, vals))
	tm := TensorMap{Elem: ptx.U32, Rank: 5, Global: g, Dims: dims, Box: [5]uint32{4, 2, 2, 2, 2}}
	stride := uint64(4)
	for d := 1; d < 5; d++ {
		stride *= dims[d-1]
		tm.Strides[d] = stride
	}
	out := mustMalloc(t, sys, 0, 256)
	must(t, launch1(sys, asm(t, src), "k", 1, 32, tm, out, uint32(0), uint32(1), uint32(0), uint32(256), uint32(64)))
	got := readU32(t, sys, out, 64)
	for i, v := range got {
		x := [5]int{i % 4, 1 + i/4%2, i / 8 % 2, 1 + i/16%2, i / 32}
		want := uint32(0)
		if x[3] < 2 {
			want = vals[x[0]+4*(x[1]+3*(x[2]+2*(x[3]+2*x[4])))]
		}
		if v != want {
			t.Fatalf("box element %d (tensor %v) = %d, want %d", i, x, v, want)
		}
	}
}
