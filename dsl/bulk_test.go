package dsl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// TestBulkMisuse: bulk copies off the 16-byte rule, into the wrong spaces, of types the
// reduction does not take, or on a target before sm_90 are Build errors at the caller's line.
func TestBulkMisuse(t *testing.T) {
	parts := func(k *dsl.Kernel) (g, s dsl.Ptr, bar dsl.Mbarrier) {
		return k.PtrParam("g", dsl.F32), k.SharedArray(dsl.F32, 256), k.Mbarriers(1).At(0)
	}
	cases := []misuse{
		{"size not a multiple of 16", "24 bytes; a bulk copy moves a positive multiple of 16 bytes", func(k *dsl.Kernel) int {
			g, s, bar := parts(k)
			return at(func() { k.BulkLoad(s, g, 24, bar) })
		}},
		{"zero size", "0 bytes; a bulk copy moves a positive multiple of 16", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkStore(g, s, 0) })
		}},
		{"constant Value size", "40 bytes", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkStore(g, s, k.Const(dsl.U32, 40)) })
		}},
		{"size past shared memory", "at most 232448 (BulkMaxBytes)", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkStore(g, s, 256<<10) })
		}},
		{"size of another type", "the size is a s32 Value; want U32", func(k *dsl.Kernel) int {
			g, _, _ := parts(k)
			n := k.Param("n", dsl.I32)
			return at(func() { k.BulkPrefetchL2(g, n) })
		}},
		{"misaligned shared address", "the destination is 8 bytes past a 16-byte boundary", func(k *dsl.Kernel) int {
			g, s, bar := parts(k)
			return at(func() { k.BulkLoad(s.At(2), g, 64, bar) })
		}},
		{"misaligned global address", "the destination is 4 bytes past a 16-byte boundary", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkStore(g.At(1), s, 64) })
		}},
		{"load into global memory", "the destination is a global pointer; want shared", func(k *dsl.Kernel) int {
			g, _, bar := parts(k)
			return at(func() { k.BulkLoad(g, g, 64, bar) })
		}},
		{"store from global memory", "the source is a global pointer; want shared", func(k *dsl.Kernel) int {
			g, _, _ := parts(k)
			return at(func() { k.BulkStore(g, g, 64) })
		}},
		{"reduction of mixed types", "the destination holds f32, the source u32", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkReduce(dsl.Sum, g, s.As(dsl.U32), 64) })
		}},
		{"min of f32", "Min of f32: cp.reduce.async.bulk into global memory takes", func(k *dsl.Kernel) int {
			g, s, _ := parts(k)
			return at(func() { k.BulkReduce(dsl.Min, g, s, 64) })
		}},
		{"sum of s64", "Sum of s64", func(k *dsl.Kernel) int {
			g := k.PtrParam("g", dsl.I64)
			s := k.SharedArray(dsl.I64, 8)
			return at(func() { k.BulkReduce(dsl.Sum, g, s, 64) })
		}},
		{"expect_tx of a U64", "the byte count is a u64 Value; want U32", func(k *dsl.Kernel) int {
			_, _, bar := parts(k)
			n := k.Param("n", dsl.U64)
			return at(func() { bar.ArriveExpectTx(n) })
		}},
	}
	checkMisuses(t, "dsl/bulk_test.go", cases, dsl.WithTarget(ptx.SM90a))
	sm80 := []misuse{
		{"bulk store on sm_80", "BulkStore: bulk copies need sm_90; the kernel targets sm_80", func(k *dsl.Kernel) int {
			g, s := k.PtrParam("g", dsl.F32), k.SharedArray(dsl.F32, 64)
			return at(func() { k.BulkStore(g, s, 64) })
		}},
		{"bulk prefetch on sm_80", "BulkPrefetchL2: bulk copies need sm_90", func(k *dsl.Kernel) int {
			return at(func() { k.BulkPrefetchL2(k.PtrParam("g", dsl.F32), 64) })
		}},
	}
	checkMisuses(t, "dsl/bulk_test.go", sm80, dsl.WithTarget(ptx.SM80))
}

// bulkRowsKernel moves rows of rowBytes through shared memory: one elected thread bulk-loads
// a row (completing on an mbarrier), every thread adds 1 to its elements, the elected thread
// bulk-stores it back (after the writers' fence.proxy.async and a barrier). With dynamic,
// the row size is a run-time parameter (row_bytes).
func bulkRowsKernel(t *testing.T, rowBytes int, dynamic bool) *dsl.Kernel {
	k := dsl.New("bulkrows", dsl.WithTarget(ptx.SM90a))
	src, dst := k.PtrParam("src", dsl.F32), k.PtrParam("dst", dsl.F32)
	rows := k.Param("rows", dsl.U32)
	var size any = rowBytes
	epr := k.Const(dsl.U32, rowBytes/4)
	if dynamic {
		n := k.Param("row_bytes", dsl.U32)
		size, epr = n, n.Shr(uint32(2))
	}
	smem := k.DynamicShared(dsl.F32, 16)
	bar := k.Mbarriers(1).At(0)
	tid := k.ThreadIdx(dsl.X)
	issuer := tid.Lt(uint32(32)).And(k.ElectOne()) // one thread of warp 0
	k.If(tid.Eq(uint32(0)), func() { bar.Init(1) })
	k.SyncThreads()
	phase := k.Var(dsl.U32, 0)
	k.For(k.BlockIdx(dsl.X), rows, k.GridDim(dsl.X), func(r dsl.Value) {
		row := r.Mul(epr)
		k.If(issuer, func() {
			bar.ArriveExpectTx(size)
			k.BulkLoad(smem, src.At(row), size, bar)
		})
		bar.Wait(phase)
		k.Set(phase, phase.Xor(uint32(1)))
		k.For(tid, epr, k.BlockDim(dsl.X), func(i dsl.Value) {
			p := smem.At(i)
			k.Store(p, k.Load(p).Add(float32(1)))
		})
		k.FenceProxyAsync() // the threads' writes, before the async proxy reads them
		k.SyncThreads()
		k.If(issuer, func() {
			k.BulkStore(dst.At(row), smem, size)
			k.BulkCommit()
			k.BulkWait(0, true) // the store has read smem: the next load may overwrite it
		})
	})
	k.If(issuer, func() { k.BulkWait(0, false) })
	return k
}

// TestBulkRowsOnEmulator runs bulkRowsKernel at row sizes from 16 bytes to 64 KiB, odd row
// counts and two blocks that take alternate rows, with constant and run-time sizes.
func TestBulkRowsOnEmulator(t *testing.T) {
	for _, rowBytes := range []int{16, 48, 4112, 64 << 10} {
		for _, dynamic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dB/dynamic=%v", rowBytes, dynamic), func(t *testing.T) {
				k := bulkRowsKernel(t, rowBytes, dynamic)
				m, sys := onOneGPU(t, k)
				if rowBytes == 48 {
					assemble(t, m)
				}
				rows := 3
				if rowBytes < 1024 {
					rows = 7
				}
				n := rows * rowBytes / 4
				in := make([]float32, n)
				for i := range in {
					in[i] = float32(i%1000) - 300
				}
				src, _ := sys.Malloc(0, 4*n)
				dst, _ := sys.Malloc(0, 4*n)
				args := []any{src, dst, uint32(rows)}
				if dynamic {
					args = append(args, uint32(rowBytes))
				}
				for _, err := range []error{emu.WriteSlice(sys, src, in),
					sys.Launch(emu.Launch{Module: m, Entry: "bulkrows", Grid: emu.D1(2), Block: emu.D1(128), SharedBytes: rowBytes, Args: args})} {
					if err != nil {
						t.Fatal(err)
					}
				}
				got, err := emu.ReadSlice[float32](sys, dst, n)
				if err != nil {
					t.Fatal(err)
				}
				for i, g := range got {
					if g != in[i]+1 {
						t.Fatalf("dst[%d] = %g, want %g", i, g, in[i]+1)
					}
				}
			})
		}
	}
}

// TestBulkRowsMisalignedAtRunTime: a run-time size that is not a multiple of 16 is the
// emulator's misaligned-access report at the bulk load's Go line.
func TestBulkRowsMisalignedAtRunTime(t *testing.T) {
	m, sys := onOneGPU(t, bulkRowsKernel(t, 0, true))
	src, _ := sys.Malloc(0, 1024)
	dst, _ := sys.Malloc(0, 1024)
	err := sys.Launch(emu.Launch{Module: m, Entry: "bulkrows", Grid: emu.D1(1), Block: emu.D1(32), SharedBytes: 1024,
		Args: []any{src, dst, uint32(1), uint32(40)}})
	var e *emu.Error
	if !errors.As(err, &e) || e.Kind != emu.KindMisaligned || !strings.Contains(e.Msg, "40 bytes: the size must be a multiple of 16") ||
		!strings.HasPrefix(e.Instr, "cp.async.bulk.shared::cluster.global") || !strings.HasSuffix(e.Pos.File, "dsl/bulk_test.go") {
		t.Fatalf("want a misaligned bulk load at dsl/bulk_test.go, got %v", err)
	}
}

// bulkPeerKernel: each rank writes rows (2 x its source) into one of two shared buffers,
// bulk-stores each row into the peer's receive buffer (a peer pointer) and bulk-reduces it
// into an accumulator (rank 0's, through a peer pointer on rank 1), then signals the peer
// with a release store; the peer acquires the flag and copies what it received to out. Both
// then tell each other they are done reading before exiting. With full, the issuing thread
// waits for its stores to complete (BulkWait(0, false)) before signalling; without, it only
// waits until they have read shared memory (BulkWait(0, true)): a bug.
func bulkPeerKernel(rowBytes int, full bool) *dsl.Kernel {
	k := dsl.New("bulkpeer", dsl.WithTarget(ptx.SM90a))
	src, out := k.PtrParam("src", dsl.F32), k.PtrParam("out", dsl.F32)
	peerData, peerFlag := k.PtrParam("peer_data", dsl.F32), k.PtrParam("peer_flag", dsl.U32)
	data, flag := k.PtrParam("data", dsl.F32), k.PtrParam("flag", dsl.U32)
	acc := k.PtrParam("acc", dsl.F32)
	rows := k.Param("rows", dsl.U32)
	epr := uint32(rowBytes / 4)
	bufs := k.DynamicShared(dsl.F32, 16) // two rows
	tid := k.ThreadIdx(dsl.X)
	issuer := tid.Eq(uint32(0))
	k.For(0, rows, 1, func(r dsl.Value) {
		buf := bufs.At(r.And(uint32(1)).Mul(epr))
		k.If(issuer, func() { k.BulkWait(1, true) }) // the store of row r-2 has read buf
		k.SyncThreads()
		k.For(tid, epr, k.BlockDim(dsl.X), func(i dsl.Value) {
			v := k.Load(src.At(r.Mul(epr).Add(i)))
			k.Store(buf.At(i), v.Add(v))
		})
		k.FenceProxyAsync()
		k.SyncThreads()
		k.If(issuer, func() {
			k.BulkStore(peerData.At(r.Mul(epr)), buf, rowBytes)
			k.BulkReduce(dsl.Sum, acc.At(r.Mul(epr)), buf, rowBytes)
			k.BulkCommit()
		})
	})
	k.If(issuer, func() {
		k.BulkWait(0, !full)
		k.Store(peerFlag, 1, dsl.Release(dsl.System))
		k.WaitUntil(flag, dsl.Eq, 1, dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
	k.For(tid, rows.Mul(epr), k.BlockDim(dsl.X), func(i dsl.Value) {
		k.Store(out.At(i), k.Load(data.At(i)))
	})
	k.SyncThreads()
	k.If(issuer, func() {
		k.Store(peerFlag.At(1), 1, dsl.Release(dsl.System))
		k.WaitUntil(flag.At(1), dsl.Eq, 1, dsl.Acquire(dsl.System))
	})
	return k
}

// runBulkPeer runs bulkPeerKernel on two GPUs; it returns what each rank received and the
// accumulator on GPU 0 (which starts at 1).
func runBulkPeer(t *testing.T, m *ptx.Module, rowBytes, rows int, opts emu.Options) (out [2][]float32, acc []float32, src [2][]float32) {
	t.Helper()
	s, err := emu.New(2)
	if err != nil {
		t.Fatal(err)
	}
	n := rows * rowBytes / 4
	data, err1 := s.MallocSymmetric(4 * n)
	flag, err2 := s.MallocSymmetric(16)
	accs, err3 := s.MallocSymmetric(4 * n)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := emu.WriteSlice(s, accs.On(0), ones); err != nil {
		t.Fatal(err)
	}
	var srcs, outs [2]uint64
	for g := range 2 {
		src[g] = make([]float32, n)
		for i := range src[g] {
			src[g][i] = float32((i*7+g*13)%512) - 100
		}
		srcs[g], _ = s.Malloc(g, 4*n)
		outs[g], _ = s.Malloc(g, 4*n)
		if err := emu.WriteSlice(s, srcs[g], src[g]); err != nil {
			t.Fatal(err)
		}
	}
	err = s.Launch(emu.Launch{Module: m, Entry: "bulkpeer", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(96), SharedBytes: 2 * rowBytes,
		ArgsFor: func(g int) []any {
			p := 1 - g
			return []any{srcs[g], outs[g], data.On(p), flag.On(p), data.On(g), flag.On(g), accs.On(0), uint32(rows)}
		}, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	for g := range 2 {
		if out[g], err = emu.ReadSlice[float32](s, outs[g], n); err != nil {
			t.Fatal(err)
		}
	}
	if acc, err = emu.ReadSlice[float32](s, accs.On(0), n); err != nil {
		t.Fatal(err)
	}
	return out, acc, src
}

// TestBulkPeerStores: two GPUs bulk-store rows into each other's memory through peer
// pointers, double-buffered (BulkWait(1, true) before a buffer is rewritten), and
// bulk-reduce them into GPU 0's accumulator; after BulkWait(0, false) and a release store of
// the flag, the peer that acquires it sees every row (strict and weak memory, several
// seeds), and the accumulator holds 1 + both ranks' rows.
func TestBulkPeerStores(t *testing.T) {
	const rowBytes, rows = 1056, 5
	k := bulkPeerKernel(rowBytes, true)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	assemble(t, m)
	for _, opts := range []emu.Options{{}, {Seed: 3}, {Weak: true, Seed: 1}, {Weak: true, Seed: 7}} {
		out, acc, src := runBulkPeer(t, m, rowBytes, rows, opts)
		for g := range 2 {
			for i, v := range out[g] {
				if want := 2 * src[1-g][i]; v != want {
					t.Fatalf("%+v: GPU %d received [%d] = %g, want %g", opts, g, i, v, want)
				}
			}
		}
		for i, v := range acc {
			if want := 1 + 2*src[0][i] + 2*src[1][i]; v != want {
				t.Fatalf("%+v: acc[%d] = %g, want %g", opts, i, v, want)
			}
		}
	}
}

// TestBulkPeerStoresReadWaitIsNotEnough: BulkWait(0, true) before the release only says
// that the stores have read shared memory; the emulator lands their writes at the full wait
// (here: when the thread exits), so the peer that acquires the flag reads nothing yet.
func TestBulkPeerStoresReadWaitIsNotEnough(t *testing.T) {
	const rowBytes, rows = 256, 3
	m, err := bulkPeerKernel(rowBytes, false).Build()
	if err != nil {
		t.Fatal(err)
	}
	out, acc, src := runBulkPeer(t, m, rowBytes, rows, emu.Options{})
	for g := range 2 {
		for i, v := range out[g] {
			if v != 0 {
				t.Fatalf("GPU %d received [%d] = %g before the stores completed", g, i, v)
			}
		}
	}
	for i, v := range acc { // the writes land at the thread's exit
		if want := 1 + 2*src[0][i] + 2*src[1][i]; v != want {
			t.Fatalf("acc[%d] = %g, want %g", i, v, want)
		}
	}
}

// TestBulkReduceBF16: three blocks bulk-reduce (add, .noftz) the same bf16 vector into one
// global vector.
func TestBulkReduceBF16(t *testing.T) {
	const n = 200 // 400 bytes
	k := dsl.New("bulkred", dsl.WithTarget(ptx.SM90a))
	dst := k.PtrParam("dst", dsl.BF16)
	s := k.SharedArray(dsl.BF16, n)
	tid := k.ThreadIdx(dsl.X)
	k.For(tid, uint32(n), k.BlockDim(dsl.X), func(i dsl.Value) {
		k.Store(s.At(i), i.And(uint32(31)).To(dsl.F32).Sub(float32(16)).To(dsl.BF16))
	})
	k.FenceProxyAsync()
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() {
		k.BulkPrefetchL2(dst, 2*n)
		k.BulkReduce(dsl.Sum, dst, s, 2*n)
		k.BulkCommit()
		k.BulkWait(0, false)
	})
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	g, _ := sys.Malloc(0, 2*n)
	init := make([]uint16, n)
	for i := range init {
		init[i] = fp.F32ToBF16(2)
	}
	for _, err := range []error{emu.WriteSlice(sys, g, init),
		sys.Launch(emu.Launch{Module: m, Entry: "bulkred", Grid: emu.D1(3), Block: emu.D1(64), Args: []any{g}})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := emu.ReadSlice[uint16](sys, g, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if f, want := fp.BF16ToF32(v), 2+3*float32(i%32-16); f != want { // exact in bf16
			t.Fatalf("dst[%d] = %g, want %g", i, f, want)
		}
	}
}

// TestBulkSourceRewrittenInFlight: writing a bulk store's shared source before the issuing
// thread's BulkWait(n, true) is reported at the writer's Go line, naming the bulk store; so
// is a thread that exits before its store read the source.
func TestBulkSourceRewrittenInFlight(t *testing.T) {
	var storeLine, writeLine int
	k := dsl.New("rewrite", dsl.WithTarget(ptx.SM90a))
	dst := k.PtrParam("dst", dsl.U32)
	s := k.SharedArray(dsl.U32, 64)
	tid := k.ThreadIdx(dsl.X)
	k.Store(s.At(tid), tid)
	k.FenceProxyAsync()
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() {
		storeLine = at(func() { k.BulkStore(dst, s, 256) })
		k.BulkCommit()
	})
	k.SyncThreads()
	writeLine = at(func() { k.Store(s.At(tid), tid.Add(uint32(1))) }) // no BulkWait(0, true) first
	m, sys := onOneGPU(t, k)
	g, _ := sys.Malloc(0, 256)
	err := sys.Launch(emu.Launch{Module: m, Entry: "rewrite", Grid: emu.D1(1), Block: emu.D1(64), Args: []any{g}})
	var e *emu.Error
	if !errors.As(err, &e) || e.Kind != emu.KindBulk || e.Pos.Line != writeLine ||
		!strings.Contains(e.Msg, fmt.Sprintf("dsl/bulk_test.go:%d", storeLine)) || !strings.Contains(e.Msg, "that thread (0,0,0) issued") ||
		!strings.Contains(e.Msg, "committed, no cp.async.bulk.wait_group.read") {
		t.Fatalf("want a bulk-copy-in-flight report at line %d naming line %d, got %v", writeLine, storeLine, err)
	}

	k = dsl.New("exit", dsl.WithTarget(ptx.SM90a))
	dst = k.PtrParam("dst", dsl.U32)
	s = k.SharedArray(dsl.U32, 64)
	tid = k.ThreadIdx(dsl.X)
	k.Store(s.At(tid), tid)
	k.FenceProxyAsync()
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() {
		storeLine = at(func() { k.BulkStore(dst, s, 256) }) // never committed nor waited for
	})
	m, sys = onOneGPU(t, k)
	g, _ = sys.Malloc(0, 256)
	err = sys.Launch(emu.Launch{Module: m, Entry: "exit", Grid: emu.D1(1), Block: emu.D1(64), Args: []any{g}})
	if !errors.As(err, &e) || e.Kind != emu.KindBulk || !strings.Contains(e.Msg, "the thread exits while the bulk copy") ||
		!strings.Contains(e.Msg, fmt.Sprintf("dsl/bulk_test.go:%d", storeLine)) || !strings.Contains(e.Msg, "not even committed") {
		t.Fatalf("want a report of the thread exiting with the store at line %d in flight, got %v", storeLine, err)
	}
}

// TestBulkAssembles: every bulk form the DSL emits, with constant and run-time sizes,
// assembles with ptxas for sm_90 and sm_90a.
func TestBulkAssembles(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM90, ptx.SM90a} {
		k := dsl.New("bulkforms", dsl.WithTarget(target))
		g, h := k.PtrParam("g", dsl.BF16), k.PtrParam("h", dsl.U64)
		f := k.PtrParam("f", dsl.F32)
		n := k.Param("n", dsl.U32)
		s := k.DynamicShared(dsl.BF16, 16)
		bar := k.Mbarriers(1).At(0)
		bar.ArriveExpectTx(n)
		k.BulkLoad(s, g.At(8), n, bar)
		bar.ArriveExpectTx(64)
		k.BulkLoad(s.At(64), g, 64, bar)
		k.BulkStore(g, s.At(16), 64)
		k.BulkStore(g.At(n), s, n)
		k.BulkReduce(dsl.Sum, g, s, 128)
		k.BulkReduce(dsl.Max, g, s, 128)
		k.BulkReduce(dsl.Sum, f, s.As(dsl.F32), n)
		k.BulkReduce(dsl.BitXor, h, s.As(dsl.U64), 128)
		k.BulkPrefetchL2(g, n)
		k.BulkPrefetchL2(f, 256)
		k.BulkCommit()
		k.BulkWait(1, true)
		k.BulkWait(0, false)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		assemble(t, m)
	}
}
