package shmemu_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
)

func emuKernel(t *testing.T, f func(k *dsl.Kernel)) (*emu.System, *shmemu.Emulator, func(args func(g int) []any) error) {
	t.Helper()
	k := dsl.New("k")
	f(k)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, err := emu.New(2)
	if err != nil {
		t.Fatal(err)
	}
	e, err := shmemu.Emulate(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, e, func(args func(g int) []any) error {
		return s.Launch(emu.Launch{Module: m, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64), ArgsFor: args})
	}
}

// TestEmulatorDeadlock: a barrier only one PE calls is reported as a deadlock that names it.
func TestEmulatorDeadlock(t *testing.T) {
	_, e, launch := emuKernel(t, func(k *dsl.Kernel) {
		k.If(nvshmem.MyPE(k).Eq(0), func() { nvshmem.BarrierAll(k, nvshmem.Block) })
	})
	err := launch(func(int) []any { return nil })
	if err == nil || !strings.Contains(err.Error(), "blocked") && !strings.Contains(err.Error(), "deadlock") {
		t.Fatalf("got %v", err)
	}
	e.Reset()
}

// TestEmulatorNBIPending: a blocking put delivers at once, and first the earlier put_nbi of
// its PE (per-PE order), so nothing is left pending.
func TestEmulatorNBIPending(t *testing.T) {
	var sym *emu.Symmetric
	s, e, launch := emuKernel(t, func(k *dsl.Kernel) {
		p := k.PtrParam("p", dsl.F32)
		k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
			nvshmem.PutNBI(k, nvshmem.Thread, nvshmem.SpanOf(p.At(4), 4), nvshmem.SpanOf(p, 4), nvshmem.MyPE(k).Add(1).Rem(nvshmem.NPEs(k)))
			nvshmem.Put(k, nvshmem.Thread, nvshmem.SpanOf(p.At(8), 4), nvshmem.SpanOf(p, 4), nvshmem.MyPE(k).Add(1).Rem(nvshmem.NPEs(k)))
		})
	})
	sym, _ = s.MallocSymmetric(64)
	for g := 0; g < 2; g++ {
		emu.WriteSlice(s, sym.On(g), []float32{float32(g + 1), 2, 3, 4})
	}
	if err := launch(func(g int) []any { return []any{sym.On(g)} }); err != nil {
		t.Fatal(err)
	}
	// The blocking put delivered the earlier nbi put too (per-PE order).
	got, _ := emu.ReadSlice[float32](s, sym.On(1), 12)
	if got[4] != 1 || got[8] != 1 {
		t.Errorf("PE 1 got %v", got)
	}
	if e.Pending() != 0 {
		t.Errorf("%d pending", e.Pending())
	}
}

// TestEmulatorMulticast: nvshmemx_mc_ptr gives emu's multicast address, or NULL.
func TestEmulatorMulticast(t *testing.T) {
	s, e, launch := emuKernel(t, func(k *dsl.Kernel) {
		p := k.PtrParam("p", dsl.U64)
		k.If(k.ThreadIdx(dsl.X).Eq(0), func() { k.Store(p, k.PtrValue(nvshmem.MulticastPtr(k, nvshmem.TeamWorld, p))) })
	})
	sym, _ := s.MallocSymmetric(8)
	if err := launch(func(g int) []any { return []any{sym.On(g)} }); err != nil {
		t.Fatal(err)
	}
	got, _ := emu.ReadSlice[uint64](s, sym.On(0), 1)
	if got[0] != sym.Multicast() {
		t.Errorf("mc_ptr = %#x, want %#x", got[0], sym.Multicast())
	}
	e.NoMulticast = true
	if err := launch(func(g int) []any { return []any{sym.On(g)} }); err != nil {
		t.Fatal(err)
	}
	got, _ = emu.ReadSlice[uint64](s, sym.On(0), 1)
	if got[0] != 0 {
		t.Errorf("mc_ptr with NoMulticast = %#x", got[0])
	}
}

// TestEmulatorReduceScatter: block i of the reduction lands on PE i, at every scope.
func TestEmulatorReduceScatter(t *testing.T) {
	const n, pes = 5, 3
	for _, s := range []nvshmem.Scope{nvshmem.Thread, nvshmem.Warp, nvshmem.Block} {
		k := dsl.New("k")
		src, dst := k.PtrParam("src", dsl.I32), k.PtrParam("dst", dsl.I32)
		gate := func(f func()) {
			switch s {
			case nvshmem.Thread:
				k.If(k.ThreadIdx(dsl.X).Eq(0), f)
			case nvshmem.Warp:
				k.If(k.ThreadIdx(dsl.X).Lt(32), f)
			default:
				f()
			}
		}
		gate(func() {
			nvshmem.ReduceScatter(k, s, nvshmem.TeamWorld, nvshmem.Sum, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n*pes))
			nvshmem.ReduceScatter(k, s, nvshmem.TeamWorld, nvshmem.Xor, nvshmem.SpanOf(dst.At(n), n), nvshmem.SpanOf(src, n*pes))
		})
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		sys, _ := emu.New(pes)
		if _, err := shmemu.Emulate(sys); err != nil {
			t.Fatal(err)
		}
		in, _ := sys.MallocSymmetric(4 * n * pes)
		out, _ := sys.MallocSymmetric(4 * 2 * n)
		val := func(pe, i int) int32 { return int32(pe*1000 + i*7 + 1) }
		for pe := 0; pe < pes; pe++ {
			v := make([]int32, n*pes)
			for i := range v {
				v[i] = val(pe, i)
			}
			emu.WriteSlice(sys, in.On(pe), v)
		}
		err = sys.Launch(emu.Launch{Module: m, Entry: "k", GPUs: sys.All(), Grid: emu.D1(1), Block: emu.D1(64),
			ArgsFor: func(g int) []any { return []any{in.On(g), out.On(g)} }})
		if err != nil {
			t.Fatal(err)
		}
		for pe := 0; pe < pes; pe++ {
			got, _ := emu.ReadSlice[int32](sys, out.On(pe), 2*n)
			for i := 0; i < n; i++ {
				var sum, x int32
				for q := 0; q < pes; q++ {
					sum += val(q, pe*n+i)
					x ^= val(q, pe*n+i)
				}
				if got[i] != sum || got[n+i] != x {
					t.Fatalf("%v: PE %d element %d: %d, %d; want %d, %d", s, pe, i, got[i], got[n+i], sum, x)
				}
			}
		}
	}
}

// TestEmulateNil checks the emulator's argument check.
func TestEmulateNil(t *testing.T) {
	if _, err := shmemu.Emulate(nil); err == nil {
		t.Error("Emulate(nil) succeeded")
	}
}

// TestOddOnes: a size mismatch names the PE that differs from the others.
func TestOddOnes(t *testing.T) {
	for _, c := range []struct {
		n    []int
		want string
	}{
		{[]int{4, 4, 4}, ""},
		{[]int{8, 4, 4}, "PE 0 reduces 8 bytes where PEs 1, 2 reduce 4"},
		{[]int{4, 4, 12}, "PE 2 reduces 12 bytes where PEs 0, 1 reduce 4"},
	} {
		if got := shmemu.OddOnes(c.n); got != c.want {
			t.Errorf("OddOnes(%v) = %q, want %q", c.n, got, c.want)
		}
	}
}
