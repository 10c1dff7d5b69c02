package kernels

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// AttentionConfig selects one forward-attention kernel (FlashAttention-2's algorithm on
// mma.sync, sm_80+): O = softmax(scale * Q K^T [+ causal mask]) V per (batch, head), with
// In elements (f16 or bf16) and f32 accumulation. A block takes BM query rows of one
// (batch, head) on Warps warps (16 rows per warp per step, atoms interleaved: BM must be a
// multiple of 16*Warps), holds its Q tile in registers and walks the keys in tiles of BN
// rows, Stages tiles of K and V in flight through cp.async. Causal masks key j from query
// i unless j <= i + seqK - seqQ (aligned bottom-right, as FlashAttention does).
type AttentionConfig struct {
	In      dsl.Type
	HeadDim int // 64, 128 or 256
	BM, BN  int
	Warps   int
	Stages  int
	Causal  bool
}

// DefaultAttentionConfig is the registry's attention: 128 query rows on 8 warps (16 rows
// each: Q, O and S of a warp stay in registers), 64 keys per step, 2 stages (double
// buffering); at head dim 256, 64 query rows on 4 warps (the same per-warp registers).
func DefaultAttentionConfig(dt dsl.Type, headDim int, causal bool) AttentionConfig {
	c := AttentionConfig{In: dt, HeadDim: headDim, BM: 128, BN: 64, Warps: 8, Stages: 2, Causal: causal}
	if headDim > 128 {
		c.BM, c.Warps = 64, 4
	}
	return c
}

// Name is the kernel's entry name: attention_<in>_d<HeadDim>_<BM>x<BN>_<Warps>w<Stages>s{_causal}.
func (c AttentionConfig) Name() string {
	s := fmt.Sprintf("attention_%s_d%d_%dx%d_%dw%ds", c.In, c.HeadDim, c.BM, c.BN, c.Warps, c.Stages)
	if c.Causal {
		s += "_causal"
	}
	return s
}

// Threads returns the block size.
func (c AttentionConfig) Threads() int { return 32 * c.Warps }

// SharedBytes returns the dynamic shared memory a block needs: the Q tile and Stages tiles
// of K and of V.
func (c AttentionConfig) SharedBytes() int {
	return (c.BM + 2*c.Stages*c.BN) * c.HeadDim * c.In.Bytes()
}

// Grid returns the number of blocks (a 1-D grid: query tiles fastest, then heads, then
// batches); 0 for an empty problem, math.MaxInt where the count overflows int (CheckShape
// refuses such shapes).
func (c AttentionConfig) Grid(batch, heads, seqQ int) int {
	if batch <= 0 || heads <= 0 || seqQ <= 0 || c.BM <= 0 {
		return 0
	}
	return satInt(ceilDiv(seqQ, c.BM), heads, batch)
}

// Check reports a configuration the kernel cannot build.
func (c AttentionConfig) Check() error {
	pow2 := func(x int) bool { return x > 0 && x&(x-1) == 0 }
	switch {
	case c.In != dsl.F16 && c.In != dsl.BF16:
		return fmt.Errorf("attention: input type %s (want f16 or bf16)", typeName(c.In))
	case c.HeadDim != 64 && c.HeadDim != 128 && c.HeadDim != 256:
		return fmt.Errorf("attention: head dim %d (want 64, 128 or 256)", c.HeadDim)
	case c.Warps <= 0 || c.Warps > 16 || !pow2(c.Warps):
		return fmt.Errorf("attention: %d warps (want a power of two, 1..16)", c.Warps)
	case !pow2(c.BM) || c.BM%(16*c.Warps) != 0:
		return fmt.Errorf("attention: BM %d: want a power of two and a multiple of 16*Warps = %d", c.BM, 16*c.Warps)
	case !pow2(c.BN) || c.BN < 16 || c.BN > 256:
		return fmt.Errorf("attention: BN %d: want a power of two in 16..256", c.BN)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Errorf("attention: %d stages (want 2..8)", c.Stages)
	}
	// The 16-byte copies: threads lie along a row's HeadDim/8 chunks, whole rows at a time.
	if rows := c.Threads() / min(c.HeadDim/8, c.Threads()); c.BN%rows != 0 || c.BM%rows != 0 {
		return fmt.Errorf("attention: %d threads copy %d rows at a time, which do not tile %d x %d", c.Threads(), rows, c.BM, c.BN)
	}
	if c.BM > 1024 { // bounded before SharedBytes, whose product would overflow
		return fmt.Errorf("attention: BM %d: want at most 1024 query rows (their tiles must fit an H100's 227 KiB of shared memory)", c.BM)
	}
	if c.SharedBytes() > 227*1024 {
		return fmt.Errorf("attention: %d bytes of shared memory (more than an H100's 227 KiB)", c.SharedBytes())
	}
	return nil
}

// CheckShape reports a problem the kernel cannot run: positive extents, heads a multiple
// of kvHeads, every per-(batch, head) offset (seq x heads x headDim) below 2^31, LSE's
// batch*heads*seqQ below 2^31 and at most 2^31-1 blocks.
func (c AttentionConfig) CheckShape(batch, heads, kvHeads, seqQ, seqK int) error {
	// Products saturate (satMul): extents near 2^63 must not wrap a product below a limit.
	switch {
	case batch <= 0 || heads <= 0 || kvHeads <= 0 || seqQ <= 0 || seqK <= 0:
		return fmt.Errorf("attention: batch %d, heads %d, kv heads %d, seqQ %d, seqK %d: every extent must be positive", batch, heads, kvHeads, seqQ, seqK)
	case heads%kvHeads != 0:
		return fmt.Errorf("attention: %d heads are not a multiple of %d kv heads (GQA shares each K/V head by heads/kvHeads query heads)", heads, kvHeads)
	case satMul(seqQ, heads, c.HeadDim) >= 1<<31 || satMul(seqK, kvHeads, c.HeadDim) >= 1<<31:
		return fmt.Errorf("attention: seqQ*heads*headDim = %s or seqK*kvHeads*headDim = %s reaches 2^31 (the tile offsets are 32-bit)", satString(seqQ, heads, c.HeadDim), satString(seqK, kvHeads, c.HeadDim))
	case satMul(batch, heads, seqQ) >= 1<<31:
		return fmt.Errorf("attention: batch*heads*seqQ = %s reaches 2^31 (LSE's offsets are 32-bit)", satString(batch, heads, seqQ))
	case satMul(ceilDiv(seqQ, c.BM), heads, batch) > MaxGemmGrid:
		return fmt.Errorf("attention: %s blocks exceed the %d of a 1-D grid", satString(ceilDiv(seqQ, c.BM), heads, batch), MaxGemmGrid)
	}
	return nil
}

// AttentionArgs are the attention kernel's parameters. Q and O are [batch, seqQ, heads,
// headDim], K and V [batch, seqK, kvHeads, headDim], all row-major and contiguous (BSHD,
// FlashAttention's layout) of the In type; LSE is [batch, heads, seqQ] f32, the natural log
// of each row's softmax denominator including the scale (m*scale + ln l; -inf for a row
// that sees no key, whose O is 0). Query head h reads K/V head h / (heads/kvHeads) (GQA;
// MQA with kvHeads 1). Scale multiplies Q K^T (1/sqrt(headDim) for the usual attention).
type AttentionArgs struct {
	Q, K, V, O                        dsl.Ptr
	LSE                               dsl.Ptr   `kgen:"f32"`
	Batch, Heads, KVHeads, SeqQ, SeqK dsl.Value `kgen:"u32"`
	Scale                             dsl.Value `kgen:"f32"`
}

func init() {
	register(&Spec{
		Name:    "attention",
		Doc:     "forward attention (FlashAttention-2 on mma.sync): O = softmax(scale Q K^T) V, BSHD Q/K/V/O, f32 LSE, GQA; head dim 128, 128x64 tiles, 8 warps, 2 cp.async stages",
		DTypes:  []dsl.Type{dsl.F16, dsl.BF16},
		Targets: []ptx.Target{ptx.SM80, ptx.SM86, ptx.SM89, ptx.SM90, ptx.SM90a, ptx.SM100a, ptx.SM120a},
		New:     func(k *dsl.Kernel, dt dsl.Type) { Attention(k, DefaultAttentionConfig(dt, 128, false)) },
	})
}

// Attention writes the kernel for cfg into k. Launch cfg.Grid(batch, heads, seqQ) blocks
// of cfg.Threads() threads with cfg.SharedBytes() bytes of dynamic shared memory
// (AttentionArgs; cfg.CheckShape says which shapes it takes).
//
// Each block: the BM x D tile of Q (cp.async, swizzled, then ldmatrix into registers);
// for each BN-key tile of K and V (cp.async, Stages in flight): S = Q K^T on mma.sync
// m16n8k16 into f32 accumulators, masked at the sequence end and the causal diagonal;
// the online softmax over the accumulator rows (a thread holds two rows per 16-row atom,
// a row spread over the 4 lanes of a quad: row max and sum reduce with two shuffles;
// exp2 with scale*log2(e) folded in; O rescaled by exp2(m_old - m_new)); P rounded to
// In and packed straight into the A registers of P V (the m16n8 accumulator layout of two
// adjacent n-tiles is the m16n8k16 A layout: FlashAttention-2's register reuse); V read
// with ldmatrix.trans. Finally O /= l, stored from the accumulators, and LSE.
func Attention(k *dsl.Kernel, cfg AttentionConfig) {
	if err := cfg.Check(); err != nil {
		k.Errorf("%v", err)
		return
	}
	a := dsl.Params[AttentionArgs](k, cfg.In)
	D, BM, BN, W := cfg.HeadDim, cfg.BM, cfg.BN, cfg.Warps
	nt := cfg.Threads()
	tid := k.ThreadIdx(dsl.X)

	mt, bh, h, b, hkv := attentionBlock(k, a, BM, cfg.Causal)
	k.If(b.Ge(a.Batch), k.Return) // a block past Grid's (a larger grid): no work
	mIdx := mt.To(dsl.I32)

	// Global views of this (batch, head): seq x D matrices with row strides heads*D and
	// kvHeads*D; the bases are 64-bit.
	ldq := k.Assume(a.Heads.Mul(uint32(D)), 8)
	ldk := k.Assume(a.KVHeads.Mul(uint32(D)), 8)
	qBase := k.Assume(b.MulWide(a.SeqQ).Mul(a.Heads.To(dsl.U64)).Add(h.To(dsl.U64)).Mul(uint64(D)), 8)
	kBase := k.Assume(b.MulWide(a.SeqK).Mul(a.KVHeads.To(dsl.U64)).Add(hkv.To(dsl.U64)).Mul(uint64(D)), 8)
	gQ := k.MakeTensorDyn(a.Q.At(qBase), []any{a.SeqQ, D}, []any{ldq, 1})
	gO := k.MakeTensorDyn(a.O.At(qBase), []any{a.SeqQ, D}, []any{ldq, 1})
	gK := k.MakeTensorDyn(a.K.At(kBase), []any{a.SeqK, D}, []any{ldk, 1})
	gV := k.MakeTensorDyn(a.V.At(kBase), []any{a.SeqK, D}, []any{ldk, 1})

	// Shared memory: Q, then Stages tiles of K, then Stages of V, rows swizzled for
	// ldmatrix; V also seen transposed (D x BN, the N x K view of P V's B operand).
	smem := k.DynamicShared(cfg.In, 128)
	sw := smemSwizzle(D)
	rowMajor := func(rows int) layout.Layout { return layout.Must(layout.New(layout.Ints(rows, D), layout.Ints(D, 1))) }
	sQ := k.MakeSwizzledTensor(smem, sw, rowMajor(BM))
	sK := k.MakeSwizzledTensor(smem.At(BM*D), sw, rowMajor(BN))
	vOff := BM*D + cfg.Stages*BN*D
	sV := k.MakeSwizzledTensor(smem.At(vOff), sw, rowMajor(BN))
	sVt := k.MakeSwizzledTensor(smem.At(vOff), sw, layout.Must(layout.New(layout.Ints(D, BN), layout.Ints(1, D))))
	stageOf := func(t dsl.Tensor, st dsl.Value) dsl.Tensor {
		return t.ShiftBase(k.Assume(st.Mul(int32(BN*D)), BN*D))
	}

	// 16-byte cp.async along the rows; rows past the sequence are zero-filled.
	c := min(D/8, nt)
	cp := dsl.MakeTiledCopy(dsl.CpAsync16, layout.Must(layout.New(layout.Ints(nt/c, c), layout.Ints(c, 1))), []int{1, 8}).Slice(tid)

	// Key tiles: all of them, or (causal) those up to the block's last row's diagonal.
	seqQ, seqK := a.SeqQ.To(dsl.I32), a.SeqK.To(dsl.I32)
	diag := seqK.Sub(seqQ) // query i sees keys j <= i + diag
	nKV := seqK.Add(int32(BN - 1)).Div(int32(BN))
	if cfg.Causal {
		lastKey := mIdx.Add(int32(1)).Mul(int32(BM)).Min(seqQ).Sub(int32(1)).Add(diag)
		nKV = k.Select(lastKey.Lt(int32(0)), k.Const(dsl.I32, 0), nKV.Min(lastKey.Div(int32(BN)).Add(int32(1))))
	}

	cp.Copy(cp.PartitionS(gQ.LocalTile([]int{BM, D}, mIdx, 0)), cp.PartitionD(sQ))
	pipe := k.CpAsyncPipeline(cfg.Stages, nKV, func(st, t dsl.Value) {
		cp.Copy(cp.PartitionS(gK.LocalTile([]int{BN, D}, t, 0)), cp.PartitionD(stageOf(sK, st)))
		cp.Copy(cp.PartitionS(gV.LocalTile([]int{BN, D}, t, 0)), cp.PartitionD(stageOf(sV, st)))
	})
	pipe.Start() // Q rides in the first group

	// One tiled MMA for both products: warps along M, each warp all of N.
	mma := dsl.MakeTiledMMA(gemmAtom(cfg.In), layout.Must(layout.New(layout.Ints(W, 1, 1), layout.Ints(1, W, 0))), nil)
	thr := mma.Slice(tid)
	tQ := thr.PartitionFragmentA(sQ)                       // (4, MM, D/16)
	tK := thr.PartitionFragmentB(sK)                       // (2, BN/8, D/16)
	tV := thr.PartitionFragmentB(sVt)                      // (2, D/8, BN/16)
	tS := thr.PartitionFragmentC(k.IdentityTensor(BM, BN)) // (4, MM, BN/8) f32
	tP := thr.PartitionFragmentA(k.IdentityTensor(BM, BN)) // (4, MM, BN/16) packed In
	tO := thr.PartitionFragmentC(k.IdentityTensor(BM, D))  // (4, MM, D/8) f32
	ldQ := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(tid)
	ldK := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(tid)
	ldV := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(tid)
	tsQ, tsK, tsV := ldQ.PartitionS(sQ), ldK.PartitionS(sK), ldV.PartitionS(sVt)

	MM := BM / (16 * W)                                                     // 16-row atoms per warp
	NS, NO := BN/8, D/8                                                     // n-tiles of S and of O
	rows := 2 * MM                                                          // rows a thread holds: (mm, half)
	sIdx := func(r, n, c int) int { return c + 2*(r%2) + 4*(r/2) + 4*MM*n } // S and O register of row r, n-tile n, column c
	sm := newOnlineSoftmax(k, MM, a.Scale)
	negInf, mRow, lRow, quadSum := sm.negInf, sm.m, sm.l, sm.quadSum

	pipe.Wait(k.Const(dsl.I32, 0)) // Q (and key tile 0) landed
	for kb := 0; kb < D/16; kb++ {
		ldQ.Copy(tsQ.Slice(2, kb), tQ.Slice(2, kb))
	}
	k.For(int32(0), nKV, int32(1), func(t dsl.Value) {
		pipe.Wait(t) // tile t landed; every thread is done with tile t-1's stage
		pipe.Issue(t.Add(int32(cfg.Stages - 1)))
		st := pipe.Stage(t)

		// S = Q K^T.
		for i := range tS.Size() {
			tS.Set(i, float32(0))
		}
		for kb := 0; kb < D/16; kb++ {
			ldK.Copy(stageOf(tsK, st).Slice(2, kb), tK.Slice(2, kb))
			k.Gemm(mma, tQ.Slice(2, kb), tK.Slice(2, kb), tS)
		}

		// Mask keys past seqK and (causal) past the diagonal, only in tiles that have any.
		t1 := t.Add(int32(1)).Mul(int32(BN))
		need := t1.Gt(seqK)
		if cfg.Causal {
			need = need.Or(t1.Sub(int32(1)).Gt(mIdx.Mul(int32(BM)).Add(diag)))
		}
		k.If(need, func() {
			cS := thr.PartitionC(k.IdentityTensor(a.SeqQ, a.SeqK).LocalTile([]int{BM, BN}, mIdx, t))
			for i := range tS.Size() {
				rc := cS.Coord(i)
				ok := rc[1].Lt(seqK)
				if cfg.Causal {
					ok = ok.And(rc[1].Le(rc[0].Add(diag)))
				}
				tS.Set(i, k.Select(ok, tS.Get(i), negInf))
			}
		})

		// Online softmax, row by row; P into the A registers.
		sm.step(tS, tO, NS, NO)
		sm.packP(tP, tS, BN/16, cfg.In)
		// O += P V.
		for kb := 0; kb < BN/16; kb++ {
			ldV.Copy(stageOf(tsV, st).Slice(2, kb), tV.Slice(2, kb))
			k.Gemm(mma, tP.Slice(2, kb), tV.Slice(2, kb), tO)
		}
	})

	// O /= l (0 for a row that saw no key), stored; LSE = m*scale + ln(l) by lane 0 of
	// each quad.
	inv := make([]dsl.Value, rows)
	lse := make([]dsl.Value, rows)
	for r := range rows {
		l := quadSum(lRow[r])
		inv[r] = k.Select(l.Eq(float32(0)), k.Const(dsl.F32, 0.0), l.Rcp())
		lse[r] = k.FMA(mRow[r], a.Scale, l.Log2().Mul(float32(math.Ln2)))
	}
	out := make([]dsl.Value, tO.Size())
	for r := range rows {
		for n := range NO {
			for c := range 2 {
				i := sIdx(r, n, c)
				out[i] = tO.Get(i).Mul(inv[r])
			}
		}
	}
	oFrag := tO.Zip(k.FragmentOf(out...), func(_, v dsl.Value) dsl.Value { return v })
	k.Copy(oFrag.To(cfg.In), thr.PartitionC(gO.LocalTile([]int{BM, D}, mIdx, 0)))

	cO := thr.PartitionC(k.IdentityTensor(a.SeqQ, D).LocalTile([]int{BM, D}, mIdx, 0))
	lseBase := bh.Mul(a.SeqQ) // (b*heads + h) * seqQ
	k.If(tid.And(uint32(3)).Eq(uint32(0)), func() {
		for r := range rows {
			row := cO.Coord(sIdx(r, 0, 0))[0]
			k.If(row.Lt(seqQ), func() {
				k.Store(a.LSE.At(lseBase.Add(row.To(dsl.U32))), lse[r])
			})
		}
	})
}

// attentionBlock maps the block to its (query tile mt, batch*heads+head bh, head h, batch
// b, K/V head hkv), query tiles fastest; causal blocks take the longest tiles first.
func attentionBlock(k *dsl.Kernel, a AttentionArgs, bm int, causal bool) (mt, bh, h, b, hkv dsl.Value) {
	return attentionTile(k, a, bm, causal, k.BlockIdx(dsl.X))
}

// attentionTile is attentionBlock's mapping of linear work tile blk (U32), for persistent
// blocks that walk several.
func attentionTile(k *dsl.Kernel, a AttentionArgs, bm int, causal bool, blk dsl.Value) (mt, bh, h, b, hkv dsl.Value) {
	tilesM := a.SeqQ.Add(uint32(bm - 1)).Div(uint32(bm))
	mt = blk.Rem(tilesM)
	if causal {
		mt = tilesM.Sub(uint32(1)).Sub(mt)
	}
	bh = blk.Div(tilesM)
	h, b = bh.Rem(a.Heads), bh.Div(a.Heads)
	return mt, bh, h, b, h.Div(a.Heads.Div(a.KVHeads))
}

// satMul returns the product of non-negative v, or math.MaxInt64 where it overflows int64
// (so that a bound on it cannot be passed by a wrapped product); 0 if any is negative.
func satMul(v ...int) int64 {
	p := int64(1)
	for _, x := range v {
		if x < 0 {
			return 0
		}
		if x != 0 && p > math.MaxInt64/int64(x) {
			p = math.MaxInt64
			continue
		}
		p *= int64(x)
	}
	return p
}

// typeName names t in an error: the zero Type, which prints as nothing, is named as such.
func typeName(t dsl.Type) string {
	if t == 0 {
		return "(the zero Type)"
	}
	return t.String()
}

// satInt is satMul as an int: the product of v saturated at math.MaxInt, 0 when a factor
// is negative (the size and count helpers' products: no wrapped or negative count).
func satInt(v ...int) int { return int(min(satMul(v...), math.MaxInt)) }

// satString prints satMul(v...), "over 2^63" where it saturated.
func satString(v ...int) string {
	if p := satMul(v...); p < math.MaxInt64 {
		return strconv.FormatInt(p, 10)
	}
	return "over 2^63"
}
