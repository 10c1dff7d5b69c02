package emu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

const clusterRegsSrc = `
.visible .entry k(.param .u64 pout)
{
	.reg .u32 %r<20>;
	.reg .u64 %rd<4>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra LEND;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ctaid.y;
	mov.u32 %r3, %nctaid.x;
	mad.lo.u32 %r4, %r2, %r3, %r1;
	mul.wide.u32 %rd0, %r4, 64;
	ld.param.u64 %rd1, [pout];
	add.u64 %rd1, %rd1, %rd0;
	mov.u32 %r5, %clusterid.x;
	mov.u32 %r6, %clusterid.y;
	mov.u32 %r7, %nclusterid.x;
	mov.u32 %r8, %nclusterid.y;
	mov.u32 %r9, %cluster_ctaid.x;
	mov.u32 %r10, %cluster_ctaid.y;
	mov.u32 %r11, %cluster_nctaid.x;
	mov.u32 %r12, %cluster_nctaid.y;
	mov.u32 %r13, %cluster_ctarank;
	mov.u32 %r14, %cluster_nctarank;
	mov.pred %p1, %is_explicit_cluster;
	selp.u32 %r15, 1, 0, %p1;
	st.global.u32 [%rd1], %r5;
	st.global.u32 [%rd1+4], %r6;
	st.global.u32 [%rd1+8], %r7;
	st.global.u32 [%rd1+12], %r8;
	st.global.u32 [%rd1+16], %r9;
	st.global.u32 [%rd1+20], %r10;
	st.global.u32 [%rd1+24], %r11;
	st.global.u32 [%rd1+28], %r12;
	st.global.u32 [%rd1+32], %r13;
	st.global.u32 [%rd1+36], %r14;
	st.global.u32 [%rd1+40], %r15;
LEND:
	ret;
}
`

// TestClusterRegisters: the cluster special registers of a (4,2) grid in (2,2) clusters, and
// of a launch without clusters (every block a cluster of one, not explicit).
func TestClusterRegisters(t *testing.T) {
	for _, cd := range []Dim3{{2, 2, 1}, {}} {
		sys := newSys(t, 1)
		out := mustMalloc(t, sys, 0, 8*64)
		m := asm(t, clusterRegsSrc)
		must(t, sys.Launch(Launch{Module: m, Entry: "k", Grid: Dim3{4, 2, 1}, Block: D1(32), Cluster: cd, Args: []any{out}}))
		got := readU32(t, sys, out, 8*16)
		c := cd.norm()
		explicit := uint32(1)
		if cd == (Dim3{}) {
			c, explicit = Dim3{1, 1, 1}, 0
		}
		for y := 0; y < 2; y++ {
			for x := 0; x < 4; x++ {
				cx, cy := x%c.X, y%c.Y
				want := []uint32{uint32(x / c.X), uint32(y / c.Y), uint32(4 / c.X), uint32(2 / c.Y), uint32(cx), uint32(cy),
					uint32(c.X), uint32(c.Y), uint32(cx + cy*c.X), uint32(c.X * c.Y), explicit}
				b := (y*4 + x) * 16
				if fmt.Sprint(got[b:b+11]) != fmt.Sprint(want) {
					t.Errorf("cluster %v block (%d,%d): %v, want %v", cd, x, y, got[b:b+11], want)
				}
			}
		}
	}
}

// clusterDSMEMSrc: each block of a 1-D cluster writes 100 + its rank into its shared word,
// passes a cluster barrier, reads its right neighbour's word through mapa and
// ld.shared::cluster (and getctarank of that address), and passes a second barrier before
// exiting (so that no block leaves while a neighbour reads its memory).
const clusterDSMEMSrc = `
.visible .entry k(.param .u64 pout)
{
	.shared .align 4 .b32 word;
	.reg .u32 %r<12>;
	.reg .u64 %rd<8>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %cluster_ctarank;
	mov.u32 %r2, %cluster_nctarank;
	setp.eq.u32 %p0, %r0, 0;
	add.u32 %r3, %r1, 100;
	mov.u32 %r10, word;
	@%p0 st.shared.u32 [%r10], %r3;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	add.u32 %r4, %r1, 1;
	rem.u32 %r4, %r4, %r2;
	mapa.shared::cluster.u32 %r5, %r10, %r4;
	ld.shared::cluster.u32 %r6, [%r5];
	getctarank.shared::cluster.u32 %r7, %r5;
	mov.u32 %r8, %ctaid.x;
	mul.wide.u32 %rd0, %r8, 8;
	ld.param.u64 %rd1, [pout];
	add.u64 %rd1, %rd1, %rd0;
	@%p0 st.global.u32 [%rd1], %r6;
	@%p0 st.global.u32 [%rd1+4], %r7;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ret;
}
`

// TestClusterDSMEM reads a neighbour's shared memory in clusters of 4, under several seeds.
func TestClusterDSMEM(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 3} {
		sys := newSys(t, 1)
		out := mustMalloc(t, sys, 0, 8*8)
		m := asmUnverified(t, clusterDSMEMSrc)
		must(t, sys.Launch(Launch{Module: m, Entry: "k", Grid: D1(8), Block: D1(64), Cluster: D1(4), Args: []any{out}, Options: Options{Seed: seed}}))
		got := readU32(t, sys, out, 16)
		for b := 0; b < 8; b++ {
			n := uint32((b%4 + 1) % 4)
			if got[2*b] != 100+n || got[2*b+1] != n {
				t.Errorf("seed %d block %d: read %d (rank %d), want %d (rank %d)", seed, b, got[2*b], got[2*b+1], 100+n, n)
			}
		}
	}
}

// clusterMulticastSrc: a cluster of 2; each block arms its mbarrier for the box, the cluster
// syncs (both barriers initialised), rank 0 multicasts a 16 x 4 box to both blocks, each
// waits on its own barrier and copies the box to pout + 128*rank.
const clusterMulticastSrc = `
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 pout)
{
	.shared .align 128 .b8 box[128];
	.shared .align 8 .b64 full;
	.reg .u32 %r<10>;
	.reg .b16 %h<2>;
	.reg .u64 %rd<10>;
	.reg .pred %p<4>;
	.reg .u64 %tm<8>;
	mov.u64 %tm0, tmap;
	cvta.param.u64 %tm1, %tm0;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %cluster_ctarank;
	setp.eq.u32 %p0, %r0, 0;
	mov.u64 %rd0, full;
	mov.u64 %rd1, box;
	@%p0 mbarrier.init.shared.b64 [%rd0], 1;
	@%p0 mbarrier.arrive.expect_tx.shared.b64 %rd2, [%rd0], 128;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	setp.eq.u32 %p1, %r1, 0;
	and.pred %p2, %p0, %p1;
	mov.u32 %r2, 0;
	mov.u16 %h0, 3;
	@%p2 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%rd1], [%tm1, {%r2, %r2}], [%rd0], %h0;
LWAIT:
	mbarrier.try_wait.parity.shared.b64 %p3, [%rd0], 0;
	@!%p3 bra LWAIT;
	mul.wide.u32 %rd3, %r1, 128;
	ld.param.u64 %rd4, [pout];
	add.u64 %rd4, %rd4, %rd3;
	mul.wide.u32 %rd5, %r0, 4;
	add.u64 %rd6, %rd1, %rd5;
	ld.shared.u32 %r3, [%rd6];
	add.u64 %rd7, %rd4, %rd5;
	st.global.u32 [%rd7], %r3;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ret;
}
`

// TestClusterMulticast: one TMA load with ctaMask 0b11 fills both blocks' boxes and completes
// both blocks' barriers.
func TestClusterMulticast(t *testing.T) {
	sys := newSys(t, 1)
	g := mustMalloc(t, sys, 0, 32*4)
	src := make([]uint16, 16*4)
	for i := range src {
		src[i] = uint16(7 * (i + 1))
	}
	must(t, WriteSlice(sys, g, src))
	tm := TensorMap{Elem: ptx.U16, Rank: 2, Global: g, Dims: [5]uint64{16, 4}, Strides: [5]uint64{0, 32}, Box: [5]uint32{16, 4}}
	out := mustMalloc(t, sys, 0, 256)
	m := asm(t, clusterMulticastSrc)
	must(t, sys.Launch(Launch{Module: m, Entry: "k", Grid: D1(2), Block: D1(32), Cluster: D1(2), Args: []any{tm, out}}))
	got, err := ReadSlice[uint16](sys, out, 128)
	must(t, err)
	for r := 0; r < 2; r++ {
		for i := range src {
			if got[64*r+i] != src[i] {
				t.Fatalf("block rank %d element %d = %d, want %d", r, i, got[64*r+i], src[i])
			}
		}
	}
}

// TestClusterLaunchErrors: cluster shapes that do not tile the grid, or are too large.
func TestClusterLaunchErrors(t *testing.T) {
	sys := newSys(t, 1)
	m := asm(t, clusterRegsSrc)
	out := mustMalloc(t, sys, 0, 64*64)
	for _, c := range []struct {
		grid, cl Dim3
		want     string
	}{
		{Dim3{6, 1, 1}, D1(4), "grid (6,1,1) is not a whole number of clusters (4,1,1)"},
		{Dim3{32, 1, 1}, D1(32), "at most 16"},
	} {
		err := sys.Launch(Launch{Module: m, Entry: "k", Grid: c.grid, Block: D1(32), Cluster: c.cl, Args: []any{out}})
		wantErr(t, err, KindLaunch, c.want)
	}
}

// clusterRemoteArriveSrc: in a cluster of 2, rank 0's barrier expects 64 arrivals: its own
// 32 threads and rank 1's 32, made through mapa with mbarrier.arrive.shared::cluster. Rank 0
// waits for the phase and writes 1; rank 1 waits at the cluster barrier so that it stays
// until rank 0 is done.
const clusterRemoteArriveSrc = `
.visible .entry k(.param .u64 pout)
{
	.shared .align 8 .b64 bar;
	.reg .u32 %r<8>;
	.reg .u64 %rd<8>;
	.reg .pred %p<4>;
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %cluster_ctarank;
	setp.eq.u32 %p0, %r1, 0;
	mov.u32 %r2, bar;
	setp.eq.u32 %p1, %r0, 0;
	@%p1 mbarrier.init.shared.b64 [%r2], 64;
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	mov.u32 %r3, 0;
	mapa.shared::cluster.u32 %r4, %r2, %r3;
	mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r4];
	@!%p0 bra LDONE;
LWAIT:
	mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r2], 0;
	@!%p2 bra LWAIT;
	ld.param.u64 %rd0, [pout];
	@%p1 st.global.u32 [%rd0], 1;
LDONE:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ret;
}
`

// TestClusterRemoteArrive: arrivals from the other block of the cluster complete rank 0's
// barrier phase; with rank 1's arrivals missing (a cluster of 1 block in a launch of 1) the
// phase never completes and the deadlock names the barrier.
func TestClusterRemoteArrive(t *testing.T) {
	sys := newSys(t, 1)
	out := mustMalloc(t, sys, 0, 4)
	m := asmUnverified(t, clusterRemoteArriveSrc)
	must(t, sys.Launch(Launch{Module: m, Entry: "k", Grid: D1(2), Block: D1(32), Cluster: D1(2), Args: []any{out}}))
	if got := readU32(t, sys, out, 1); got[0] != 1 {
		t.Errorf("rank 0 wrote %d, want 1", got[0])
	}
	err := sys.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(32), Cluster: D1(1), Args: []any{out}})
	wantErr(t, err, KindDeadlock, "mbarrier bar (shared offset 0x0) never completes its phase (parity 0): 32 of 64 arrivals pending (a missing arrive?)")
}

// TestClusterBulkMulticast: cp.async.bulk with .multicast::cluster (ctaMask 0b11) copies 128
// bytes into both blocks of the cluster and completes both blocks' barriers.
func TestClusterBulkMulticast(t *testing.T) {
	src := strings.NewReplacer(
		"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%rd1], [%tm1, {%r2, %r2}], [%rd0], %h0;",
		"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%rd1], [%rd9], 128, [%rd0], %h0;",
		"mov.u32 %r2, 0;", "ld.param.u64 %rd9, [pg];",
		".param .align 64 .b8 tmap[128]", ".param .u64 pg",
		"mov.u64 %tm0, tmap;", "", "cvta.param.u64 %tm1, %tm0;", "").Replace(clusterMulticastSrc)
	sys := newSys(t, 1)
	g := mustMalloc(t, sys, 0, 128)
	want := make([]uint32, 32)
	for i := range want {
		want[i] = uint32(i*i + 3)
	}
	must(t, WriteSlice(sys, g, want))
	out := mustMalloc(t, sys, 0, 256)
	must(t, sys.Launch(Launch{Module: asm(t, src), Entry: "k", Grid: D1(2), Block: D1(32), Cluster: D1(2), Args: []any{g, out}}))
	got := readU32(t, sys, out, 64)
	for i := range got {
		if got[i] != want[i%32] {
			t.Fatalf("block rank %d word %d = %d, want %d", i/32, i%32, got[i], want[i%32])
		}
	}
}

// TestClusterBarrierExited: a block of the cluster exits without arriving; the other's wait is
// a deadlock naming the missing threads, reported at once.
func TestClusterBarrierExited(t *testing.T) {
	src := `
.visible .entry k()
{
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	mov.u32 %r0, %cluster_ctarank;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 exit;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ret;
}
`
	sys := newSys(t, 1)
	err := sys.Launch(Launch{Module: asm(t, src), Entry: "k", Grid: D1(2), Block: D1(64), Cluster: D1(2)})
	wantErr(t, err, KindDeadlock, "barrier.cluster.wait can never complete: 64 thread(s) of the cluster exited without arriving (64 of 128 arrived)")
}
