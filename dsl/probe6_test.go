package dsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// buildRecover runs f on a new sm_90a kernel and returns Build's error, or f's panic as
// one.
func buildRecover(f func(k *dsl.Kernel)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC: %v", p)
		}
	}()
	k := dsl.New("k", dsl.WithTarget("sm_90a"))
	f(k)
	_, err = k.Build()
	return err
}

// TestWarpSpecializedHostile: hostile uses of the warp-specialized builders (a failed
// pipeline then used, nil pipelines and kernels, zero SharedTiles, Mbarriers and
// schedulers, float stage indices) are Build errors naming the call, or, where no kernel
// is at hand to record one, do nothing; never a panic. Before: every case marked panicked
// with a nil dereference, and a float stage Value was converted silently.
func TestWarpSpecializedHostile(t *testing.T) {
	// want: a fragment of Build's error; "" when there is nothing to report (a zero value
	// used alone: Build succeeds).
	cases := []struct {
		name, want string
		f          func(k *dsl.Kernel)
	}{
		{"pipeline of 0 stages used (panicked)", "0 stages", func(k *dsl.Kernel) {
			_, _, _, cA, cB, _ := hopperParts(k)
			p := k.MakeTMAPipeline(0, 128, cA, cB)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			p.Load(st, cA, 0, 0)
			p.Load(st, cB, 0, 0)
			p.ProducerCommit(st)
			cs := p.ConsumerState()
			p.ConsumerWait(cs)
			p.ConsumerRelease(cs)
			p.Full(0).Wait(k.Var(dsl.U32, 0))
		}},
		{"pipeline of -1 consumers used (panicked)", "-1 consumers", func(k *dsl.Kernel) {
			_, _, _, cA, _, _ := hopperParts(k)
			p := k.MakeTMAPipeline(2, -1, cA)
			p.ConsumerWait(p.ConsumerState())
		}},
		{"pipeline of a nil copy used (panicked)", "copy 0 is not a TMACopy", func(k *dsl.Kernel) {
			p := k.MakeTMAPipeline(2, 1, nil)
			p.ProducerAcquire(p.ProducerState())
			p.Empty(1).Arrive()
		}},
		{"Load of a nil copy (panicked)", "nil TMACopy", func(k *dsl.Kernel) {
			_, _, _, _, _, p := hopperParts(k)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			p.Load(st, nil, 0, 0)
		}},
		{"nil pipeline (panicked)", "", func(k *dsl.Kernel) {
			var p *dsl.TMAPipeline
			st := p.ProducerState()
			p.ProducerAcquire(st)
			p.Load(st, nil, 0, 0)
			p.ProducerCommit(st)
			p.ConsumerWait(p.ConsumerState())
			p.ConsumerRelease(st)
			p.Full(0).Arrive()
			_ = p.Stages() + p.TxBytes() + p.ClusterSize()
		}},
		{"zero SharedTile (panicked)", "", func(k *dsl.Kernel) {
			var s dsl.SharedTile
			s.StageView(1).Stage(0)
			s.Tensor(0)
		}},
		{"zero Mbarriers (panicked)", "", func(k *dsl.Kernel) {
			var b dsl.Mbarriers
			b.At(3).Arrive()
		}},
		{"zero TileScheduler (panicked)", "", func(k *dsl.Kernel) {
			var s dsl.TileScheduler
			s.ForEach(func(m, n dsl.Value) {})
			s.Tile(k.Var(dsl.U32, 0))
		}},
		{"float stage Value (accepted)", "the stage is a f32 Value; want an integer", func(k *dsl.Kernel) {
			_, sA, _, _, _, _ := hopperParts(k)
			sA.StageView(k.Param("x", dsl.F32))
		}},
		{"float barrier index (accepted)", "the index is a f32 Value; want an integer", func(k *dsl.Kernel) {
			k.Mbarriers(2).At(k.Param("x", dsl.F32)).Arrive()
		}},
		{"stage Value of another kernel", "belongs to kernel o", func(k *dsl.Kernel) {
			_, sA, _, _, _, _ := hopperParts(k)
			sA.StageView(dsl.New("o").Param("i", dsl.U32))
		}},
		{"AccToA with a nil kernel (panicked)", "AccToA: nil kernel", func(k *dsl.Kernel) {
			m, _, _, _, _, _ := hopperParts(k)
			m.AccToA(nil, m.Accumulators(k), dsl.BF16)
		}},
		{"GemmRS with a nil kernel (panicked)", "GemmRS: nil kernel", func(k *dsl.Kernel) {
			m, _, sB, _, _, _ := hopperParts(k)
			acc := m.Accumulators(k)
			m.GemmRS(nil, m.AccToA(k, acc, dsl.BF16), sB, 0, acc)
		}},
		{"Gemm with a nil kernel (panicked)", "Gemm: nil kernel", func(k *dsl.Kernel) {
			m, sA, sB, _, _, _ := hopperParts(k)
			m.Gemm(nil, 0, sA, sB, 0, m.Accumulators(k))
		}},
		{"AccView with a nil kernel (panicked)", "AccView: nil kernel", func(k *dsl.Kernel) {
			m, _, _, _, _, _ := hopperParts(k)
			m.AccView(nil, k.ThreadIdx(dsl.X)).Row()
		}},
		{"Accumulators with a nil kernel (panicked)", "", func(k *dsl.Kernel) {
			m, _, _, _, _, _ := hopperParts(k)
			m.Accumulators(nil)
		}},
		{"GemmRS with a zero A", "GemmRS: A must be a fragment of 16 bf16x2 registers", func(k *dsl.Kernel) {
			m, _, sB, _, _, _ := hopperParts(k)
			m.GemmRS(k, dsl.Tensor{}, sB, 0, m.Accumulators(k))
		}},
		{"GemmRS with A of another kernel", "GemmRS: A must be a fragment", func(k *dsl.Kernel) {
			m, _, sB, _, _, _ := hopperParts(k)
			o := dsl.New("o", dsl.WithTarget("sm_90a"))
			m.GemmRS(k, m.AccToA(o, m.Accumulators(o), dsl.BF16), sB, 0, m.Accumulators(k))
		}},
		{"GemmRS stage out of range", "5 is not a stage 0..1", func(k *dsl.Kernel) {
			m, _, sB, _, _, _ := hopperParts(k)
			acc := m.Accumulators(k)
			m.GemmRS(k, m.AccToA(k, acc, dsl.BF16), sB, 5, acc)
		}},
		{"StageView of a StageView", "1 is not a stage 0..0", func(k *dsl.Kernel) {
			_, sA, _, _, _, _ := hopperParts(k)
			sA.StageView(1).StageView(1)
		}},
	}
	for _, c := range cases {
		err := buildRecover(c.f)
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "PANIC"):
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && err != nil:
			t.Errorf("%s: Build = %v; want nil (nothing was emitted)", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Build = %v; want an error containing %q", c.name, err, c.want)
		}
	}
}
