package dsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestNamedBarrierFor: names get the lowest free ids from 1, a name reused gets its id back,
// ids used directly are skipped.
func TestNamedBarrierFor(t *testing.T) {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	k.NamedBarrier(1, 128) // a direct id: names skip it
	a := k.NamedBarrierFor("epilogue", 128)
	b := k.NamedBarrierFor("producer", 256)
	a2 := k.NamedBarrierFor("epilogue", 128)
	if a.ID != 2 || b.ID != 3 || a2.ID != a.ID || a2.Threads != 128 || b.Name != "producer" {
		t.Fatalf("ids %d %d %d; want 2 3 2", a.ID, b.ID, a2.ID)
	}
	a.Sync()
	b.Arrive()
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	text := m.String()
	for _, want := range []string{"barrier.sync 1, 128;", "barrier.sync 2, 128;", "barrier.arrive 3, 256;"} {
		if !strings.Contains(text, want) {
			t.Errorf("PTX lacks %q:\n%s", want, text)
		}
	}
}

// TestNamedBarrierForMisuse: conflicting uses are build errors naming both.
func TestNamedBarrierForMisuse(t *testing.T) {
	var first int
	cases := []misuse{
		{"thread counts differ", "", func(k *dsl.Kernel) int {
			first = at(func() { k.NamedBarrierFor("epi", 128) })
			return at(func() { k.NamedBarrierFor("epi", 256) })
		}},
		{"sixteen names", "no barrier id left (ids 1..15; 0 is SyncThreads')", func(k *dsl.Kernel) int {
			for i := 0; i < 15; i++ {
				k.NamedBarrierFor(fmt.Sprint("b", i), 32)
			}
			return at(func() { k.NamedBarrierFor("one too many", 32) })
		}},
		{"a named id used directly", `barrier id 1 is the named barrier "epi" with 128 threads at dsl/namedbar_test.go:`, func(k *dsl.Kernel) int {
			k.NamedBarrierFor("epi", 128)
			return at(func() { k.NamedBarrier(1, 128) })
		}},
		{"bad thread count", `NamedBarrierFor("x"): 100 threads`, func(k *dsl.Kernel) int {
			return at(func() { k.NamedBarrierFor("x", 100) })
		}},
	}
	// The first case names the first use's line, known only once it ran.
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	line := cases[0].f(k)
	_, err := k.Build()
	want := fmt.Sprintf(`dsl/namedbar_test.go:%d: NamedBarrierFor("epi"): 256 threads; the barrier is "epi" with 128 threads at dsl/namedbar_test.go:%d`, line, first)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant it to contain %q", err, want)
	}
	checkMisuses(t, "dsl/namedbar_test.go", cases[1:], dsl.WithTarget(ptx.SM90a))
}

// TestNamedBarrierForEmu: warpgroup 0 writes shared memory and arrives at "full"; warpgroup
// 1 syncs there (256 threads) and reads it; then both meet at "done" and warpgroup 0 reads
// what warpgroup 1 wrote. Without the barriers the race detector would report the reads.
func TestNamedBarrierForEmu(t *testing.T) {
	k := dsl.New("nb", dsl.WithTarget(ptx.SM90a))
	out := k.PtrParam("out", dsl.U32)
	s := k.SharedArray(dsl.U32, 256)
	tid := k.ThreadIdx(dsl.X)
	full, done := k.NamedBarrierFor("full", 256), k.NamedBarrierFor("done", 256)
	k.If(tid.Lt(uint32(128)), func() {
		k.Store(s.At(tid), tid.Mul(uint32(3)))
		full.Arrive()
		done.Sync()
		k.Store(out.At(tid), k.Load(s.At(tid.Add(uint32(128)))))
	}).Else(func() {
		full.Sync()
		me := tid.Sub(uint32(128))
		k.Store(s.At(tid), k.Load(s.At(k.Const(dsl.U32, 127).Sub(me))).Add(uint32(1)))
		done.Sync()
	})
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	p, err := sys.Malloc(0, 4*128)
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "nb", Grid: emu.D1(1), Block: emu.D1(256), Args: []any{p}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[uint32](sys, p, 128)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if want := uint32(3*(127-i) + 1); g != want {
			t.Fatalf("out[%d] = %d, want %d", i, g, want)
		}
	}
}
