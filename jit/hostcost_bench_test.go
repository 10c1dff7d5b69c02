package jit

import "testing"

// nopFunc launches nothing: it stands in for a backend so that a benchmark measures jit's
// own work per launch (argument encoding, checks, dispatch), not a driver's.
type nopFunc struct{ launches int }

func (f *nopFunc) launch(Dim3, Dim3, int, stream, []uint64) error { f.launches++; return nil }
func (f *nopFunc) residentBlocks(Dim3, int) (int, error)          { return 1 << 20, nil }
func (f *nopFunc) residentLimit(Dim3, int) string                 { return "unlimited" }
func (f *nopFunc) launchCoResident(g, b Dim3, shared int, s stream, args []uint64, _ *LaunchConfig) error {
	return f.launch(g, b, shared, s, args)
}

// BenchmarkLaunchHostCost measures jit's host work per launch without a backend (nopFunc):
// Launch with variadic arguments and LaunchArgs with a struct, plain and CoResident. The
// GPU adds the driver's call (docs/bench.md, "Launch and graph-replay floors").
func BenchmarkLaunchHostCost(b *testing.B) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	m, err := d.Load(Source{Module: bumpKernel(b)})
	if err != nil {
		b.Fatal(err)
	}
	fn, err := m.Function("bump")
	if err != nil {
		b.Fatal(err)
	}
	buf, err := Alloc[uint32](d, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	nop := &nopFunc{}
	fn.impl = nop
	for _, co := range []bool{false, true} {
		cfg := LaunchConfig{Grid: D1(1), Block: D1(256), Stream: s, CoResident: co}
		name := "plain"
		if co {
			name = "coresident"
		}
		b.Run(name+"/args", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := fn.Launch(cfg, buf, uint32(256), uint32(1)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/struct", func(b *testing.B) {
			b.ReportAllocs()
			args := bumpArgs{P: buf, N: 256, Delta: 1}
			for i := 0; i < b.N; i++ {
				if err := fn.LaunchArgs(cfg, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	if nop.launches == 0 {
		b.Fatal("no launch reached the backend")
	}
}
