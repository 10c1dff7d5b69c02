package emu_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Deliberately broken kernels built with the DSL, so that every instruction's Go position is
// the statement that made it: each report must name the kernel, GPU, block, thread,
// instruction and that exact Go line (issue 6's acceptance). Here the missing fence;
// broken_test.go has the out-of-bounds access, the missing barrier and the deadlock.

// at runs f, which must be written on the caller's line, and returns that position: the Go
// file:line the DSL records for what f emits.
func at(f func()) ptx.Pos {
	_, file, line, _ := runtime.Caller(1)
	f()
	return ptx.Pos{File: "emu/" + filepath.Base(file), Line: line}
}

func buildDSL(t *testing.T, k *dsl.Kernel) *ptx.Module {
	t.Helper()
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newSystem(t *testing.T, n int) *emu.System {
	t.Helper()
	s, err := emu.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// report checks that err is an *emu.Error of kind k naming kernel, GPU, block, thread, an
// instruction starting with op, and Go position pos.
func report(t *testing.T, err error, k emu.Kind, kernel string, gpu int, block, thread [3]int, op string, pos ptx.Pos) *emu.Error {
	t.Helper()
	var e *emu.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %s error, got %v", k, err)
	}
	t.Log(err)
	if e.Kind != k || e.Kernel != kernel || e.GPU != gpu || e.Block != block || e.Thread != thread {
		t.Fatalf("want %s in kernel %s on GPU %d block %v thread %v, got %s in %s on GPU %d block %v thread %v",
			k, kernel, gpu, block, thread, e.Kind, e.Kernel, e.GPU, e.Block, e.Thread)
	}
	if !strings.HasPrefix(e.Instr, op) {
		t.Fatalf("instruction %q, want %s...", e.Instr, op)
	}
	if e.Pos != pos {
		t.Fatalf("position %v, want %v", e.Pos, pos)
	}
	msg := err.Error()
	for _, f := range []string{fmt.Sprintf("kernel %s", kernel), posStr(pos)} {
		if !strings.Contains(msg, f) {
			t.Fatalf("%q does not mention %q", msg, f)
		}
	}
	if e.Kind != emu.KindDeadlock {
		where := fmt.Sprintf("on GPU %d block (%d,%d,%d) thread (%d,%d,%d)", gpu, block[0], block[1], block[2], thread[0], thread[1], thread[2])
		if !strings.Contains(msg, where) {
			t.Fatalf("%q does not mention %q", msg, where)
		}
	}
	return e
}

func posStr(p ptx.Pos) string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// publishKernel: GPU 0 (the producer) stores n values into GPU 1's data with relaxed stores,
// then raises GPU 1's flag with a relaxed store; GPU 1's thread 0 waits for the flag with an
// acquire load, a barrier passes that on, and thread 5 copies the data out. byBlock: every
// producer thread stores one value and a barrier precedes the flag (else thread 0 stores
// them all). fixed: a fence before the flag (byBlock: the flag is a release store).
type publishLines struct{ store, flag, wait, read ptx.Pos }

func publishKernel(t *testing.T, byBlock, fixed bool, readOpts ...dsl.MemOption) (*ptx.Module, publishLines) {
	var ln publishLines
	k := dsl.New("publish")
	data := k.PtrParam("data", dsl.U32)
	flag := k.PtrParam("flag", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n := k.Param("n", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	k.If(rank.Eq(0), func() {
		if byBlock {
			k.If(tid.Lt(n), func() {
				ln.store = at(func() { k.Store(data.At(tid), tid.Add(1000), dsl.Relaxed(dsl.System)) })
			})
			k.SyncThreads()
			k.If(tid.Eq(0), func() {
				if fixed {
					ln.flag = at(func() { k.Store(flag.At(0), 1, dsl.Release(dsl.System)) })
				} else {
					ln.flag = at(func() { k.Store(flag.At(0), 1, dsl.Relaxed(dsl.System)) }) // not a release
				}
			})
			return
		}
		k.If(tid.Eq(0), func() {
			k.For(0, n, 1, func(i dsl.Value) {
				ln.store = at(func() { k.Store(data.At(i), i.Add(1000), dsl.Relaxed(dsl.System)) })
			})
			if fixed {
				k.Fence(dsl.FenceAcqRel, dsl.System)
			}
			ln.flag = at(func() { k.Store(flag.At(0), 1, dsl.Relaxed(dsl.System)) })
		})
	}).Else(func() {
		k.If(tid.Eq(0), func() {
			ln.wait = at(func() { k.WaitUntil(flag.At(0), dsl.Eq, 1, dsl.Acquire(dsl.System)) })
		})
		k.SyncThreads()
		k.If(tid.Eq(5), func() {
			k.For(0, n, 1, func(i dsl.Value) {
				ln.read = at(func() { k.Store(out.At(i), k.Load(data.At(i), readOpts...)) })
			})
		})
	})
	return buildDSL(t, k), ln
}

func runPublish(t *testing.T, m *ptx.Module, n int, seed int64) ([]uint32, error) {
	t.Helper()
	s := newSystem(t, 2)
	data, err := s.MallocSymmetric(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	flag, err := s.MallocSymmetric(4)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Malloc(1, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Launch(emu.Launch{Module: m, Entry: "publish", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64),
		ArgsFor: func(g int) []any { return []any{data.On(1), flag.On(1), out, uint32(g), uint32(n)} },
		Options: emu.Options{Weak: true, Seed: seed}})
	if err != nil {
		return nil, err
	}
	return emu.ReadSlice[uint32](s, out, n)
}

// TestBrokenMissingFence: the weak mode catches the flag published before the data, in
// both forms (one thread's program order; a block's through bar.sync), and names the reader,
// the store that was not visible, the flag store and the read that saw the flag.
func TestBrokenMissingFence(t *testing.T) {
	const n = 64
	for _, byBlock := range []bool{false, true} {
		m, ln := publishKernel(t, byBlock, false)
		for _, seed := range []int64{1, 2, 3} {
			_, err := runPublish(t, m, n, seed)
			e := report(t, err, emu.KindMissingFence, "publish", 1, [3]int{}, [3]int{5, 0, 0}, "ld.global.u32", ln.read)
			if len(e.Related) != 3 {
				t.Fatalf("related accesses %v", e.Related)
			}
			st, flag, rd := e.Related[0], e.Related[1], e.Related[2]
			// The stale element is one that thread (i,0,0) stored (byBlock) or thread 0 did.
			wantSt := [3]int{}
			if byBlock {
				wantSt = st.Thread
				if st.Thread[0] >= n || st.Thread[1] != 0 {
					t.Fatalf("writer thread %v", st.Thread)
				}
			}
			for _, c := range []struct {
				a      emu.Access
				gpu    int
				thread [3]int
				op     string
				pos    ptx.Pos
			}{
				{st, 0, wantSt, "st.relaxed.sys.global.u32", ln.store},
				{flag, 0, [3]int{}, "st.relaxed.sys.global.u32", ln.flag},
				{rd, 1, [3]int{}, "ld.acquire.sys.global.u32", ln.wait},
			} {
				if c.a.GPU != c.gpu || c.a.Block != [3]int{} || c.a.Thread != c.thread || !strings.HasPrefix(c.a.Instr, c.op) || c.a.Pos != c.pos {
					t.Fatalf("%s: got %+v, want GPU %d block (0,0,0) thread %v %s at %s", c.a.Role, c.a, c.gpu, c.thread, c.op, posStr(c.pos))
				}
				if w := posStr(c.pos); !strings.Contains(e.Msg, w) {
					t.Fatalf("message %q does not mention %q", e.Msg, w)
				}
			}
			if byBlock != strings.Contains(e.Msg, "after a barrier") {
				t.Fatalf("byBlock %v: message %q", byBlock, e.Msg)
			}
		}
		// With the fence (or the release), the same runs pass and copy the right values.
		good, _ := publishKernel(t, byBlock, true)
		for _, seed := range []int64{1, 2, 3} {
			got, err := runPublish(t, good, n, seed)
			if err != nil {
				t.Fatalf("byBlock %v, fixed, seed %d: %v", byBlock, seed, err)
			}
			for i, v := range got {
				if v != uint32(1000+i) {
					t.Fatalf("byBlock %v, fixed, seed %d: out[%d] = %d", byBlock, seed, i, v)
				}
			}
		}
	}
}

// TestBrokenMissingFenceRelaxedRead: the same broken publication read with .relaxed loads
// after the acquire of the flag (the consumer does not poll the data: it acquired a flag
// stored after it) is reported as well; the fixed producer passes.
func TestBrokenMissingFenceRelaxedRead(t *testing.T) {
	const n = 64
	for _, byBlock := range []bool{false, true} {
		m, ln := publishKernel(t, byBlock, false, dsl.Relaxed(dsl.System))
		for _, seed := range []int64{1, 2, 3} {
			_, err := runPublish(t, m, n, seed)
			e := report(t, err, emu.KindMissingFence, "publish", 1, [3]int{}, [3]int{5, 0, 0}, "ld.relaxed.sys.global.u32", ln.read)
			if len(e.Related) != 3 || e.Related[1].Pos != ln.flag || e.Related[2].Pos != ln.wait {
				t.Fatalf("related accesses %+v, want the flag at %v and the wait at %v", e.Related, ln.flag, ln.wait)
			}
		}
		good, _ := publishKernel(t, byBlock, true, dsl.Relaxed(dsl.System))
		for _, seed := range []int64{1, 2, 3} {
			got, err := runPublish(t, good, n, seed)
			if err != nil {
				t.Fatalf("byBlock %v, fixed, seed %d: %v", byBlock, seed, err)
			}
			for i, v := range got {
				if v != uint32(1000+i) {
					t.Fatalf("byBlock %v, fixed, seed %d: out[%d] = %d", byBlock, seed, i, v)
				}
			}
		}
	}
}

// TestMissingFenceNotOnPolling: Lamport-style polling is not a missing fence. GPU 0's thread
// 0 stores n values into GPU 1 with relaxed stores and no fence; GPU 1's thread 5 polls them
// last to first with relaxed loads (so it sees later stores while earlier ones are still
// buffered) until each has arrived, then reads each again with a plain load.
func TestMissingFenceNotOnPolling(t *testing.T) {
	const n = 64
	k := dsl.New("poll")
	data := k.PtrParam("data", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	k.If(rank.Eq(0).And(tid.Eq(0)), func() {
		k.For(0, n, 1, func(i dsl.Value) { k.Store(data.At(i), i.Add(1000), dsl.Relaxed(dsl.System)) })
	})
	k.If(rank.Eq(1).And(tid.Eq(5)), func() {
		k.For(0, n, 1, func(i dsl.Value) {
			j := k.Const(dsl.U32, n-1).Sub(i)
			k.WaitUntil(data.At(j), dsl.Ne, 0, dsl.Relaxed(dsl.System))
			k.Store(out.At(j), k.Load(data.At(j)))
		})
	})
	m := buildDSL(t, k)
	for _, seed := range []int64{1, 2, 3, 4} {
		s := newSystem(t, 2)
		d, err := s.MallocSymmetric(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		o, err := s.Malloc(1, 4*n)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Launch(emu.Launch{Module: m, Entry: "poll", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64),
			ArgsFor: func(g int) []any { return []any{d.On(1), o, uint32(g)} }, Options: emu.Options{Weak: true, Seed: seed}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got, err := emu.ReadSlice[uint32](s, o, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != uint32(1000+i) {
				t.Fatalf("seed %d: out[%d] = %d", seed, i, v)
			}
		}
	}
}

// blockScopePublish builds a kernel in which thread 0 of GPU writer's block stores n words
// into data and publishes them with a block-scope fence (fenced) or a block-scope release
// store of the flag, and thread 32 of GPU reader's block waits for the flag (acquire at
// scope sc) and copies the words to out.
func blockScopePublish(t *testing.T, fenced bool, sc dsl.Scope, n int) *ptx.Module {
	k := dsl.New("publish")
	data := k.PtrParam("data", dsl.U32)
	flag := k.PtrParam("flag", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	writer, reader := k.Param("writer", dsl.U32), k.Param("reader", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	k.If(rank.Eq(writer).And(tid.Eq(0)), func() {
		k.For(0, n, 1, func(i dsl.Value) { k.Store(data.At(i), i.Add(1000), dsl.Relaxed(dsl.CTA)) })
		if fenced {
			k.Fence(dsl.FenceAcqRel, dsl.CTA)
			k.Store(flag.At(0), 1, dsl.Relaxed(dsl.CTA))
		} else {
			k.Store(flag.At(0), 1, dsl.Release(dsl.CTA))
		}
	})
	k.If(rank.Eq(reader).And(tid.Eq(32)), func() {
		k.WaitUntil(flag.At(0), dsl.Eq, 1, dsl.Acquire(sc))
		k.For(0, n, 1, func(i dsl.Value) { k.Store(out.At(i), k.Load(data.At(i))) })
	})
	return buildDSL(t, k)
}

// TestBlockScopeSyncInWeakMode: threads of one block that synchronize at block scope
// (fence.acq_rel.cta or st.release.cta, then ld.acquire.cta) through their GPU's symmetric
// memory are correct, and weak mode must neither report them nor give them stale data; a
// block that publishes to another GPU at block scope is wrong, and weak mode must catch it.
func TestBlockScopeSyncInWeakMode(t *testing.T) {
	const n = 32
	run := func(m *ptx.Module, seed int64, writer, reader, mem int, sc dsl.Scope) (int, error) {
		s := newSystem(t, 2)
		d, err := s.MallocSymmetric(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.MallocSymmetric(16)
		if err != nil {
			t.Fatal(err)
		}
		o, err := s.Malloc(reader, 4*n)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Launch(emu.Launch{Module: m, Entry: "publish", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64),
			ArgsFor: func(g int) []any {
				return []any{d.On(mem), f.On(mem), o, uint32(g), uint32(writer), uint32(reader)}
			}, Options: emu.Options{Weak: true, Seed: seed}})
		if err != nil {
			return 0, err
		}
		got, err := emu.ReadSlice[uint32](s, o, n)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, v := range got {
			if v != uint32(1000+i) {
				bad++
			}
		}
		return bad, nil
	}
	for _, fenced := range []bool{true, false} {
		m := blockScopePublish(t, fenced, dsl.CTA, n)
		for seed := int64(1); seed <= 8; seed++ {
			for g := 0; g < 2; g++ { // the block of GPU g, through GPU g's memory
				if bad, err := run(m, seed, g, g, g, dsl.CTA); err != nil || bad > 0 {
					t.Fatalf("fenced %v, seed %d, GPU %d: %d stale values, err %v", fenced, seed, g, bad, err)
				}
			}
		}
	}
	// GPU 0 publishes into GPU 1's memory at block scope; GPU 1 acquires at system scope.
	caught := 0
	m := blockScopePublish(t, true, dsl.System, n)
	for seed := int64(1); seed <= 8; seed++ {
		if bad, err := run(m, seed, 0, 1, 1, dsl.System); err != nil || bad > 0 {
			caught++
		}
	}
	if caught == 0 {
		t.Error("a block-scope fence publishing to another GPU passed every seed in weak mode")
	}
}
