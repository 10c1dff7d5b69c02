package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
)

// AttentionVarLenArgs are the varlen attention's parameters after AttentionSM90Maps
// (AttentionSM90Config.VarLen): CuQ and CuK are [batch+1] prefix sums of the sequences'
// query and key counts (FlashAttention's cu_seqlens_q and cu_seqlens_k), TotalQ and TotalK
// the packed tensors' rows. The offsets are trusted device data; the kernel clamps them so
// that it never reads or writes outside the tensors: sequence b's queries are rows
// clamp(CuQ[b], 0, TotalQ) up to clamp(CuQ[b+1], that, TotalQ) (a non-monotone pair gives an
// empty sequence), and its keys likewise.
type AttentionVarLenArgs struct {
	CuQ, CuK       dsl.Ptr   `kgen:"s32"`
	TotalQ, TotalK dsl.Value `kgen:"u32"`
}

// attnVarLenSeq is a varlen block's sequence: its first query and key rows in the packed
// tensors and its lengths (I32).
type attnVarLenSeq struct {
	q0, k0, seqQ, seqK dsl.Value
}

// attentionVarLenSeq reads sequence b's offsets (b U32), clamped to the packed tensors.
func attentionVarLenSeq(k *dsl.Kernel, a AttentionVarLenArgs, b dsl.Value) attnVarLenSeq {
	span := func(cu dsl.Ptr, total dsl.Value) (start, n dsl.Value) {
		t := total.To(dsl.I32)
		start = k.Load(cu.At(b)).Max(int32(0)).Min(t)
		end := k.Load(cu.At(b.Add(uint32(1)))).Max(start).Min(t)
		return start, end.Sub(start)
	}
	var s attnVarLenSeq
	s.q0, s.seqQ = span(a.CuQ, a.TotalQ)
	s.k0, s.seqK = span(a.CuK, a.TotalK)
	return s
}

// CheckVarLenShape reports a packed problem the varlen kernel cannot run: batch sequences,
// the longest of maxSeqQ queries, totalQ and totalK packed rows.
func (c AttentionSM90Config) CheckVarLenShape(batch, heads, kvHeads, maxSeqQ, totalQ, totalK int) error {
	switch {
	case !c.VarLen:
		return fmt.Errorf("attention_sm90: %s is not a VarLen configuration", c.Name())
	case totalQ < 0 || totalK < 0:
		return fmt.Errorf("attention_sm90: totalQ %d, totalK %d: the packed rows must not be negative", totalQ, totalK)
	case satMul(totalQ, heads, c.HeadDim) >= 1<<31 || satMul(totalK, kvHeads, c.HeadDim) >= 1<<31:
		return fmt.Errorf("attention_sm90: totalQ*heads*headDim = %s or totalK*kvHeads*headDim = %s reaches 2^31 (the offsets are 32-bit)", satString(totalQ, heads, c.HeadDim), satString(totalK, kvHeads, c.HeadDim))
	}
	// The dense rules over the grid's extents (seqK does not shape the grid).
	return c.CheckShape(batch, heads, kvHeads, maxSeqQ, 1)
}

// LaunchVarLen returns the launch of the VarLen configuration c: Grid(batch, heads,
// maxSeqQ) blocks and the tensor maps of the packed Q [totalQ, heads, d], K and V [totalK,
// kvHeads, d], each viewed as (heads*d, total, 1) (at least one row, so that an empty
// tensor still has a map; no block loads it). The error names the rule broken. A Persistent
// configuration's launch is LaunchVarLenPersistent's.
func (c AttentionSM90Config) LaunchVarLen(batch, heads, kvHeads, maxSeqQ, totalQ, totalK int) (AttentionSM90Launch, error) {
	if c.Persistent {
		return AttentionSM90Launch{}, fmt.Errorf("attention_sm90: %s walks its tiles persistently: its launch is LaunchVarLenPersistent's (the grid depends on the SM count)", c.Name())
	}
	return c.launchVarLen(batch, heads, kvHeads, maxSeqQ, totalQ, totalK, 0)
}

// LaunchVarLenPersistent is LaunchVarLen on a device of sms multiprocessors: the grid is
// PersistentGrid(batch, heads, maxSeqQ, sms). Without Persistent it is LaunchVarLen's.
func (c AttentionSM90Config) LaunchVarLenPersistent(batch, heads, kvHeads, maxSeqQ, totalQ, totalK, sms int) (AttentionSM90Launch, error) {
	if c.Persistent && sms < 1 {
		return AttentionSM90Launch{}, fmt.Errorf("attention_sm90: %s on %d SMs: want the device's multiprocessor count (at least 1)", c.Name(), sms)
	}
	return c.launchVarLen(batch, heads, kvHeads, maxSeqQ, totalQ, totalK, sms)
}

func (c AttentionSM90Config) launchVarLen(batch, heads, kvHeads, maxSeqQ, totalQ, totalK, sms int) (AttentionSM90Launch, error) {
	if err := c.Check(); err != nil {
		return AttentionSM90Launch{}, err
	}
	if err := c.CheckVarLenShape(batch, heads, kvHeads, maxSeqQ, totalQ, totalK); err != nil {
		return AttentionSM90Launch{}, err
	}
	es := uint64(c.In.Bytes())
	bq, bkv := c.TMABox()
	spec := func(h, rows int, box [2]int) AttentionTMASpec {
		cols, n := uint64(h*c.HeadDim), uint64(max(rows, 1))
		return AttentionTMASpec{Elem: c.In, Dims: [3]uint64{cols, n, 1}, Strides: [2]uint64{cols * es, cols * es * n},
			Box: [3]uint32{uint32(box[0]), uint32(box[1]), 1}, Swizzle: 128}
	}
	return AttentionSM90Launch{Grid: c.PersistentGrid(batch, heads, maxSeqQ, sms), Block: c.Threads(), SharedBytes: c.SharedBytes(),
		Q: spec(heads, totalQ, bq), K: spec(kvHeads, totalK, bkv), V: spec(kvHeads, totalK, bkv), SchedWords: c.schedWords()}, nil
}
