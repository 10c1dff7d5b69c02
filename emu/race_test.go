package emu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Data races on global memory (emu/race.go), on DSL-built kernels: the report names both
// threads, both instructions and both Go lines.

// incrementKernel: every thread adds 1 to *c with a plain load and store (racy), or with
// an atomic add.
func incrementKernel(t *testing.T, atomic bool) (*ptx.Module, ptx.Pos, ptx.Pos) {
	k := dsl.New("incr")
	c := k.PtrParam("c", dsl.U32)
	var ld, st ptx.Pos
	if atomic {
		st = at(func() { k.Atomic(dsl.AtomAdd, c, uint32(1)) })
	} else {
		v := k.Var(dsl.U32, 0)
		ld = at(func() { k.Set(v, k.Load(c)) })
		st = at(func() { k.Store(c, v.Add(1)) })
	}
	return buildDSL(t, k), ld, st
}

func wantOther(t *testing.T, e *emu.Error, who, op string, pos ptx.Pos) {
	t.Helper()
	if len(e.Related) != 1 {
		t.Fatalf("report %v: want the other access in Related", e)
	}
	if !strings.Contains(e.Msg, who) || !strings.Contains(e.Msg, posStr(pos)) || !strings.HasPrefix(e.Related[0].Instr, op) || e.Related[0].Pos != pos {
		t.Fatalf("report %q does not name the other access: %s with %s... at %s (related %+v)", e.Msg, who, op, posStr(pos), e.Related[0])
	}
}

// TestRaceIncrement: 256 threads (2 blocks of 128) increment one counter with a plain load
// and store. Without the detector it ends at some small count (each warp's lanes store the
// same value); the report is warp 0's lane 0 storing what lane 31 read, with no barrier. An
// atomic add is no race and counts to 256.
func TestRaceIncrement(t *testing.T) {
	m, ld, st := incrementKernel(t, false)
	for _, seed := range []int64{0, 5} {
		s := newSystem(t, 1)
		c, err := s.Malloc(0, 4)
		check(t, err)
		err = s.Launch(emu.Launch{Module: m, Entry: "incr", Grid: emu.D1(2), Block: emu.D1(128), Args: []any{c}, Options: emu.Options{Seed: seed}})
		var e *emu.Error
		if seed == 0 {
			e = report(t, err, emu.KindDataRace, "incr", 0, [3]int{0, 0, 0}, [3]int{0, 0, 0}, "st.global.u32", st)
		} else if e = asError(t, err, emu.KindDataRace); e.Pos != st || e.Instr[:2] != "st" {
			t.Fatalf("want the report at the store, got %v", err)
		}
		if !strings.Contains(e.Msg, "no barrier between them") {
			t.Fatalf("report %q", e.Msg)
		}
		wantOther(t, e, fmt.Sprintf("GPU 0 block (%d,0,0) thread (", e.Block[0]), "ld.global.u32", ld)
		// Without the sanitizer the increments are lost.
		check(t, s.Memset(c, 0, 4))
		check(t, s.Launch(emu.Launch{Module: m, Entry: "incr", Grid: emu.D1(2), Block: emu.D1(128), Args: []any{c}, Options: emu.Options{Seed: seed, NoSanitizer: true}}))
		if got, _ := emu.ReadSlice[uint32](s, c, 1); got[0] == 256 {
			t.Fatalf("seed %d: the racy increment counted to 256", seed)
		}
	}
	ma, _, _ := incrementKernel(t, true)
	s := newSystem(t, 1)
	c, err := s.Malloc(0, 4)
	check(t, err)
	check(t, s.Launch(emu.Launch{Module: ma, Entry: "incr", Grid: emu.D1(2), Block: emu.D1(128), Args: []any{c}}))
	if got, _ := emu.ReadSlice[uint32](s, c, 1); got[0] != 256 {
		t.Fatalf("atomic increments: %d, want 256", got[0])
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func asError(t *testing.T, err error, k emu.Kind) *emu.Error {
	t.Helper()
	e, ok := err.(*emu.Error)
	if !ok || e.Kind != k {
		t.Fatalf("want a %s error, got %v", k, err)
	}
	t.Log(err)
	return e
}

// TestRaceIncrementAcrossGPUs: one thread on each of 3 GPUs increments a counter in GPU 0's
// memory (a peer access for GPUs 1 and 2) with a plain load and store.
func TestRaceIncrementAcrossGPUs(t *testing.T) {
	m, ld, st := incrementKernel(t, false)
	for _, weak := range []bool{false, true} {
		s := newSystem(t, 3)
		c, err := s.MallocSymmetric(4)
		check(t, err)
		err = s.Launch(emu.Launch{Module: m, Entry: "incr", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(1),
			Args: []any{c.On(0)}, Options: emu.Options{Weak: weak}})
		// GPU 0's block runs first; GPU 1's load meets its store.
		e := report(t, err, emu.KindDataRace, "incr", 1, [3]int{}, [3]int{}, "ld.global.u32", ld)
		wantOther(t, e, "GPU 0 block (0,0,0) thread (0,0,0) wrote", "st.global.u32", st)
		if !strings.Contains(e.Msg, "(GPU 0's memory)") || !strings.Contains(e.Msg, "they run on different GPUs") {
			t.Fatalf("report %q", e.Msg)
		}
	}
}

// waitKernel: GPU 0's threads store n values into GPU 1's data (plain stores), a barrier,
// thread 0 raises GPU 1's flag with a release store; on GPU 1 thread 0 waits for the flag
// (acquire) and every thread reads a value. withBarrier: a SyncThreads after the wait
// passes the acquired view to the block (correct); without it the other threads read early.
func waitKernel(t *testing.T, withBarrier bool) (*ptx.Module, ptx.Pos, ptx.Pos) {
	k := dsl.New("waitread")
	data := k.PtrParam("data", dsl.U32)
	flag := k.PtrParam("flag", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	var st, rd ptx.Pos
	k.If(rank.Eq(0), func() {
		st = at(func() { k.Store(data.At(tid), tid.Add(1000)) })
		k.SyncThreads()
		k.If(tid.Eq(0), func() { k.Store(flag.At(0), 1, dsl.Release(dsl.System)) })
	}).Else(func() {
		k.If(tid.Eq(0), func() { k.WaitUntil(flag.At(0), dsl.Eq, 1, dsl.Acquire(dsl.System)) })
		if withBarrier {
			k.SyncThreads()
		}
		rd = at(func() { k.Store(out.At(tid), k.Load(data.At(tid))) })
	})
	return buildDSL(t, k), st, rd
}

func runWait(t *testing.T, m *ptx.Module, opt emu.Options) ([]uint32, error) {
	s := newSystem(t, 2)
	data, err := s.MallocSymmetric(4 * 64)
	check(t, err)
	flag, err := s.MallocSymmetric(4)
	check(t, err)
	out, err := s.Malloc(1, 4*64)
	check(t, err)
	err = s.Launch(emu.Launch{Module: m, Entry: "waitread", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64), Options: opt,
		ArgsFor: func(g int) []any { return []any{data.On(1), flag.On(1), out, uint32(g)} }})
	if err != nil {
		return nil, err
	}
	return emu.ReadSlice[uint32](s, out, 64)
}

// TestRaceMissingBarrierAfterWait: thread 0 waits for the flag but the block has no barrier
// after the wait, so the other threads read the data unordered with the producer's stores:
// reported whether they read before the stores ran (the store meets their reads) or after.
// With the barrier it is correct under every schedule, strong and weak.
func TestRaceMissingBarrierAfterWait(t *testing.T) {
	bad, st, rd := waitKernel(t, false)
	hinted := 0
	var opts []emu.Options
	for seed := int64(0); seed < 12; seed++ {
		opts = append(opts, emu.Options{Seed: seed}, emu.Options{Seed: seed, Weak: true})
	}
	for _, opt := range opts {
		_, err := runWait(t, bad, opt)
		e := asError(t, err, emu.KindDataRace)
		switch e.Pos {
		case rd: // a consumer's read after the producer's store
			wantOther(t, e, "GPU 0 block (0,0,0) thread (", "st.global.u32", st)
		case st: // the producer's store after a consumer read early
			wantOther(t, e, "GPU 1 block (0,0,0) thread (", "ld.global.u32", rd)
		default:
			t.Fatalf("report at %v, want the read at %v or the store at %v", e.Pos, rd, st)
		}
		if strings.Contains(e.Msg, "SyncThreads after the wait") {
			hinted++
			t.Logf("%+v hinted", opt)
		}
		if e.Thread == [3]int{} && e.Pos == rd {
			t.Fatalf("thread 0 waited: its read is ordered (%v)", err)
		}
	}
	if hinted == 0 {
		t.Errorf("no report suggested the barrier after the wait")
	}
	good, _, _ := waitKernel(t, true)
	for _, opt := range []emu.Options{{}, {Seed: 3}, {Weak: true, Seed: 4}, {Weak: true, Seed: 9}} {
		got, err := runWait(t, good, opt)
		check(t, err)
		for i, x := range got {
			if x != uint32(1000+i) {
				t.Fatalf("%+v: out[%d] = %d", opt, i, x)
			}
		}
	}
}

// TestRaceKernelBoundary: accesses of one launch are ordered before the next launch's, and a
// barrier orders the threads of a block: neither is a race.
func TestRaceKernelBoundary(t *testing.T) {
	k := dsl.New("shift")
	a := k.PtrParam("a", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	v := k.Load(a.At(tid.Add(1).Rem(64))) // another thread's element, written by the last launch
	k.SyncThreads()
	k.Store(a.At(tid), v.Add(1))
	m := buildDSL(t, k)
	s := newSystem(t, 1)
	buf, err := s.Malloc(0, 4*64)
	check(t, err)
	for i := 0; i < 3; i++ {
		check(t, s.Launch(emu.Launch{Module: m, Entry: "shift", Grid: emu.D1(1), Block: emu.D1(64), Args: []any{buf}, Options: emu.Options{Seed: int64(i)}}))
	}
	got, err := emu.ReadSlice[uint32](s, buf, 64)
	check(t, err)
	if got[0] != 3 {
		t.Fatalf("a[0] = %d, want 3", got[0])
	}
}

// pushKernel: each GPU stores its values into its peer's buffer (plain stores), meets the
// peer at a pad barrier (release store of epoch+1 to the peer's pad, acquire spin on its
// own), then copies its own buffer (the peer's values) out. trailing: a second barrier at
// the end, so that no GPU starts the next launch's stores while its peer still reads.
func pushKernel(t *testing.T, trailing bool) (*ptx.Module, ptx.Pos, ptx.Pos) {
	k := dsl.New("push")
	mine := k.PtrParam("mine", dsl.U32)
	peer := k.PtrParam("peer", dsl.U32)
	myPad := k.PtrParam("mypad", dsl.U32)
	peerPad := k.PtrParam("peerpad", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	epoch := k.Param("epoch", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	barrier := func(target dsl.Value) {
		k.SyncThreads()
		k.If(tid.Eq(0), func() {
			k.Store(peerPad, target, dsl.Release(dsl.System))
			k.WaitUntil(myPad, dsl.Ge, target, dsl.Acquire(dsl.System))
		})
		k.SyncThreads()
	}
	var st, rd ptx.Pos
	st = at(func() { k.Store(peer.At(tid), rank.Mul(1000).Add(epoch.Mul(100)).Add(tid)) })
	barrier(epoch.Add(1))
	rd = at(func() { k.Store(out.At(tid), k.Load(mine.At(tid))) })
	if trailing {
		barrier(epoch.Add(2))
	}
	return buildDSL(t, k), st, rd
}

// runPushes launches the push kernel twice on 2 GPUs back to back (hostRead: reading an
// output in between, a host synchronization).
func runPushes(t *testing.T, m *ptx.Module, trailing, hostRead bool, opt emu.Options) error {
	s := newSystem(t, 2)
	buf, err := s.MallocSymmetric(4 * 64)
	check(t, err)
	pad, err := s.MallocSymmetric(4)
	check(t, err)
	out, err := s.MallocSymmetric(4 * 64)
	check(t, err)
	per := uint32(1)
	if trailing {
		per = 2
	}
	for i := uint32(0); i < 2; i++ {
		epoch := i * per
		err := s.Launch(emu.Launch{Module: m, Entry: "push", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64), Options: opt,
			ArgsFor: func(g int) []any {
				return []any{buf.On(g), buf.On(1 - g), pad.On(g), pad.On(1 - g), out.On(g), uint32(g), epoch}
			}})
		if err != nil {
			return err
		}
		if hostRead {
			_, err := emu.ReadSlice[uint32](s, out.On(0), 64)
			check(t, err)
		}
	}
	return nil
}

// TestRaceAcrossLaunches: in weak mode two collective launches back to back overlap (a GPU
// may start the second while its peer still runs the first). Without the trailing barrier
// the second launch's push into the peer's buffer races with the peer's read of it in the
// first launch: reported, naming both launches' lines. The trailing barrier, or a host
// read between the launches, orders them; the strong mode runs launches in lockstep.
func TestRaceAcrossLaunches(t *testing.T) {
	bad, st, rd := pushKernel(t, false)
	for _, seed := range []int64{0, 2, 5} {
		err := runPushes(t, bad, false, false, emu.Options{Weak: true, Seed: seed})
		e := asError(t, err, emu.KindDataRace)
		if e.Pos != st || !strings.HasPrefix(e.Instr, "st.global.u32") {
			t.Fatalf("report at %v, want the push at %v: %v", e.Pos, st, err)
		}
		wantOther(t, e, fmt.Sprintf("GPU %d block (0,0,0) thread (", 1-e.GPU), "ld.global.u32", rd)
		if !strings.Contains(e.Msg, "in the previous launch (of push)") {
			t.Fatalf("report %q does not name the previous launch", e.Msg)
		}
	}
	good, _, _ := pushKernel(t, true)
	for _, seed := range []int64{0, 2, 5} {
		check(t, runPushes(t, good, true, false, emu.Options{Weak: true, Seed: seed}))
		check(t, runPushes(t, bad, false, true, emu.Options{Weak: true, Seed: seed}))
		check(t, runPushes(t, bad, false, false, emu.Options{Seed: seed}))
	}
}
