package jit

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// gridBarrier: every block's thread 0 counts itself in, spins until every block of the grid
// has, then marks its block done; it finishes only when the whole grid is resident at once.
func gridBarrier(t *testing.T) *ptx.Module {
	k := dsl.New("grid_barrier", dsl.WithTarget(ptx.SM90))
	cnt, out := k.PtrParam("cnt", dsl.U32), k.PtrParam("out", dsl.U32)
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		k.Reduce(dsl.AtomAdd, cnt, uint32(1), dsl.Release(dsl.GPU))
		n := k.GridDim(dsl.X)
		k.While(func() dsl.Value { return k.Load(cnt, dsl.Acquire(dsl.GPU)).Lt(n) }, func() {})
		k.Store(out.At(k.BlockIdx(dsl.X)), uint32(1))
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadFunc loads mod on d and looks up its kernel name: the module and the function.
func loadFunc(t testing.TB, d *Device, mod *ptx.Module, name string) (*Module, *Function) {
	t.Helper()
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// TestResidentBlocks: Function.ResidentBlocks on the emulator is its per-SM model over its
// 16 SMs (two blocks of 1024 threads, eight of 256 an SM; shared memory caps it too); a
// non-positive block, negative shared memory and a closed module are errors.
func TestResidentBlocks(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, f := loadFunc(t, d, gridBarrier(t), "grid_barrier")
	for _, c := range []struct {
		block  Dim3
		shared int
		want   int
	}{
		{D1(1024), 0, 2 * emuMultiproc},
		{D1(256), 0, 8 * emuMultiproc},
		{Dim3{X: 16, Y: 16}, 0, 8 * emuMultiproc},
		{D1(256), 100 << 10, 2 * emuMultiproc},
	} {
		n, err := f.ResidentBlocks(c.block, c.shared)
		if err != nil || n != c.want {
			t.Errorf("block %v, %d bytes shared: %d, %v; want %d", c.block, c.shared, n, err, c.want)
		}
	}
	for _, c := range []struct {
		block  Dim3
		shared int
	}{{D1(0), 0}, {Dim3{X: 32, Y: -1}, 0}, {D1(32), -1}} {
		if n, err := f.ResidentBlocks(c.block, c.shared); err == nil || !strings.Contains(err.Error(), "want a positive block") {
			t.Errorf("block %v, %d bytes shared: %d, %v; want an error", c.block, c.shared, n, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ResidentBlocks(D1(32), 0); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %d, %v; want an error naming the closed module", n, err)
	}
}
