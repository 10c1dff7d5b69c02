package ref

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() { registerOwn("attention_sm90", oneGPU, attentionSM90Harness) }

// attentionSM90Harness runs `kgen run attention_sm90`: the registry's kernel (head dim 128,
// not causal) on 2 batches of 2 heads sharing a K/V head, seqQ 33 and seqK 141 (neither a
// tile multiple; --size sets seqK), through the rank-3 tensor maps of
// AttentionSM90Config.Launch, against AttentionRef.
func attentionSM90Harness(r *run) error {
	cfg := kernels.DefaultAttentionSM90Config(r.p.DType, 128, false)
	B, H, HK, SQ, SK, D := 2, 2, 1, 33, r.size(141), cfg.HeadDim
	r.res.Kernel, r.res.Shape = cfg.Name(), fmt.Sprintf("b%d h%d/%d sq%d sk%d d%d", B, H, HK, SQ, SK, D)
	if n := satMul(B, H, SQ, SK); n > MaxEmuAttention {
		return fmt.Errorf("attention %s: %s scores; the emulator harness takes at most %d (MaxEmuAttention)", r.res.Shape, satText(n), MaxEmuAttention)
	}
	// The registry's kernel is persistent: 3 "SMs", so that a block walks two of the 4 tiles.
	l, err := cfg.LaunchPersistent(B, H, HK, SQ, SK, 3)
	if err != nil {
		return err
	}
	scale := 1 / math.Sqrt(float64(D))
	q, kk, v := r.random(cfg.In, B*SQ*H*D, -1, 1), r.random(cfg.In, B*SK*HK*D, -1, 1), r.random(cfg.In, B*SK*HK*D, -1, 1)
	var ptrs [5]uint64
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{cfg.In, q}, {cfg.In, kk}, {cfg.In, v}, {cfg.In, make([]float64, B*SQ*H*D)}, {dsl.F32, make([]float64, B*H*SQ)}} {
		addr, err := r.sys.Malloc(0, max(len(x.v)*x.dt.Bytes(), 1))
		if err != nil {
			return err
		}
		if err := write(r.sys, addr, x.dt, x.v); err != nil {
			return err
		}
		ptrs[i] = addr
	}
	tmap := func(addr uint64, s kernels.AttentionTMASpec) emu.TensorMap {
		return emu.TensorMap{Elem: ptx.Type(s.Elem), Rank: 3, Global: addr, Dims: [5]uint64{s.Dims[0], s.Dims[1], s.Dims[2]},
			Strides: [5]uint64{0, s.Strides[0], s.Strides[1]}, Box: [5]uint32{s.Box[0], s.Box[1], s.Box[2]}, Swizzle: s.Swizzle}
	}
	err = r.sys.Launch(emu.Launch{Module: r.mod, Entry: r.built.Entry, Grid: emu.D1(l.Grid), Block: emu.D1(l.Block), SharedBytes: l.SharedBytes,
		Args: []any{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], uint32(B), uint32(H), uint32(HK), uint32(SQ), uint32(SK), float32(scale),
			tmap(ptrs[0], l.Q), tmap(ptrs[1], l.K), tmap(ptrs[2], l.V)},
		Options: emu.Options{Seed: r.p.Seed}})
	if err != nil {
		return err
	}
	gotO, err := read(r.sys, ptrs[3], cfg.In, B*SQ*H*D)
	if err != nil {
		return err
	}
	gotL, err := read(r.sys, ptrs[4], dsl.F32, B*H*SQ)
	if err != nil {
		return err
	}
	return checkAttention(&r.res, cfg.Name(), cfg.In, AttentionRef(q, kk, v, B, H, HK, SQ, SK, D, scale, false), gotO, gotL, B, H, SQ, D)
}
