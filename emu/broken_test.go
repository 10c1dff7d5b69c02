package emu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Deliberately broken kernels built with the DSL (helpers in fence_test.go): each report
// names the kernel, GPU, block, thread, instruction and the exact Go line of the statement.

// An out-of-bounds store: no bounds check, 2 blocks of 64 threads over 100 elements on GPU 1.
func TestBrokenOutOfBounds(t *testing.T) {
	k := dsl.New("oob")
	a := k.PtrParam("a", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	pos := at(func() { k.Store(a.At(i), i) }) // forgets `if i < n`
	m := buildDSL(t, k)
	s := newSystem(t, 2)
	buf, err := s.Malloc(1, 4*100)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Launch(emu.Launch{Module: m, Entry: "oob", GPUs: []int{1}, Grid: emu.D1(2), Block: emu.D1(64), Args: []any{buf}})
	e := report(t, err, emu.KindOutOfBounds, "oob", 1, [3]int{1, 0, 0}, [3]int{36, 0, 0}, "st.global.u32", pos)
	if !strings.Contains(e.Msg, "index 100 of a 100-element array") {
		t.Fatalf("message %q", e.Msg)
	}
}

// A missing barrier: threads read a neighbour's shared slot right after writing their own.
// Only warp 1 of block 1 reads another thread's slot, so the report is thread 32 reading what
// thread 48 wrote.
func TestBrokenMissingBarrier(t *testing.T) {
	k := dsl.New("nobar")
	out := k.PtrParam("out", dsl.F32)
	tid := k.ThreadIdx(dsl.X)
	sh := k.SharedArray(dsl.F32, 64)
	src := k.Select(tid.Ge(32).And(k.BlockIdx(dsl.X).Eq(1)), tid.Xor(16), tid)
	wline := at(func() { k.Store(sh.At(tid), tid.To(dsl.F32)) })
	// k.SyncThreads() belongs here
	rline := at(func() { k.Store(out.At(k.GlobalThreadIdx(dsl.X)), k.Load(sh.At(src))) })
	m := buildDSL(t, k)
	s := newSystem(t, 2)
	buf, err := s.Malloc(1, 4*128)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Launch(emu.Launch{Module: m, Entry: "nobar", GPUs: []int{1}, Grid: emu.D1(2), Block: emu.D1(64), Args: []any{buf}})
	e := report(t, err, emu.KindRace, "nobar", 1, [3]int{1, 0, 0}, [3]int{32, 0, 0}, "ld.shared.f32", rline)
	if w := fmt.Sprintf("thread (48,0,0) wrote with \"st.shared.f32 [%%ud"); !strings.Contains(e.Msg, w) {
		t.Fatalf("message %q does not mention %q", e.Msg, w)
	}
	if w := fmt.Sprintf("at %s, with no barrier in between", posStr(wline)); !strings.Contains(e.Msg, w) {
		t.Fatalf("message %q does not mention %q", e.Msg, w)
	}
}

// A deadlock: in block 1 the two warps wait at two different named barriers of 64 threads.
func TestBrokenDeadlock(t *testing.T) {
	k := dsl.New("dead")
	tid := k.ThreadIdx(dsl.X)
	var l1, l2 ptx.Pos
	k.If(k.BlockIdx(dsl.X).Eq(1), func() {
		k.If(tid.Lt(32), func() {
			l1 = at(func() { k.NamedBarrier(1, 64) })
		}).Else(func() {
			l2 = at(func() { k.NamedBarrier(2, 64) })
		})
	})
	m := buildDSL(t, k)
	s := newSystem(t, 2)
	err := s.Launch(emu.Launch{Module: m, Entry: "dead", GPUs: []int{1}, Grid: emu.D1(2), Block: emu.D1(64)})
	e := report(t, err, emu.KindDeadlock, "dead", 1, [3]int{1, 0, 0}, [3]int{0, 0, 0}, "barrier.sync 1, 64", l1)
	want := []string{
		fmt.Sprintf("GPU 1 block (1,0,0) warp 0: lanes 0xffffffff wait at barrier 1 (32 of 64 threads arrived) \"barrier.sync 1, 64;\" at %s", posStr(l1)),
		fmt.Sprintf("GPU 1 block (1,0,0) warp 1: lanes 0xffffffff wait at barrier 2 (32 of 64 threads arrived) \"barrier.sync 2, 64;\" at %s", posStr(l2)),
	}
	if len(e.Warps) != 2 || e.Warps[0] != want[0] || e.Warps[1] != want[1] {
		t.Fatalf("warps %q, want %q", e.Warps, want)
	}
}
