package ops

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// AttentionDecodeOptions are AttentionDecode's less common settings. A nil
// *AttentionDecodeOptions means Scale 1/sqrt(head dim), no LSE and splits chosen for
// contexts up to the block table's capacity.
type AttentionDecodeOptions struct {
	// Scale multiplies Q K^T; 0 means 1/sqrt(head dim). It must be positive and finite (a
	// negative one turned the masked keys' -Inf into +Inf: NaN), and the scaled scores
	// must stay well below 2^31 in magnitude (the online softmax's exp2 of f32 products).
	Scale float32
	// LSE, when set, receives each query's log-sum-exp: [batch, heads, qLen] f32,
	// contiguous (the natural log of the softmax denominator including the scale; -Inf for
	// a query that sees no key). The zero Tensor is unset.
	LSE Tensor[float32]
	// MaxSeqLen bounds the call's context lengths (vLLM's max_seq_len); with the SM count it
	// chooses the splits. 0 means maxPages*pageSize. A longer context is still right, only
	// split less well.
	MaxSeqLen int
	// Splits, when non-zero, forces the number of splits of each sequence's keys
	// (1..kernels.MaxDecodeSplits; 1 runs no combine kernel).
	Splits int
	// Config, when set, forces the decode kernel's configuration (a benchmark's or a
	// tuner's candidate) in place of AttentionDecodeConfigFor's: its In, HeadDim and
	// PageSize must be the operands', and it must pass Check and fit the device's shared
	// memory.
	Config *kernels.AttentionDecodeConfig
}

// AttentionDecode computes decode attention over a paged K/V cache (flash-decoding:
// kernels.AttentionDecode, then, with several splits, kernels.AttentionDecodeCombine). q
// and out are [batch, qLen, heads, d] (qLen query tokens a sequence: 1 for plain decoding,
// a few for speculative ones); kCache and vCache are [numPages, pageSize, kvHeads, d]; all
// four contiguous and 16-byte aligned, of fp.BF16 or fp.F16; d is 64, 128 or 256; pageSize
// a power of two in 16..1024; heads a multiple of kvHeads (query head h reads kv head
// h / (heads/kvHeads)). blockTable is [batch, maxPages] int32 page ids and seqLens [batch]
// int32 context lengths, both contiguous: key j of sequence b is slot j % pageSize of page
// blockTable[b, j / pageSize], its keys are 0..seqLens[b]-1, the last qLen of them the
// queries' own, and query i sees keys j < seqLens[b] - qLen + i + 1 (causal, aligned
// bottom-right; a query that sees no key gets O 0 and LSE -Inf).
//
// The table and the lengths live on the device and are not checked: every page id a
// sequence uses must lie in [0, numPages) (on a GPU an id out of range reads other memory;
// the emulator's sanitizer reports it as an out-of-bounds access), and a length beyond
// maxPages*pageSize counts as maxPages*pageSize. out may be q itself; it shares no memory
// with the other operands. With several splits the partials live in a scratch buffer of
// the stream (launches on one stream run in order).
func AttentionDecode[T jit.Elem](ctx context.Context, s *jit.Stream, out, q, kCache, vCache Tensor[T], blockTable, seqLens Tensor[int32], o *AttentionDecodeOptions) error {
	const op = "AttentionDecode"
	dt := jit.ElemType[T]()
	dev, err := attentionOperands(ctx, op, q, out, [2]named[T]{{"kCache", kCache}, {"vCache", vCache}}, [2]named[int32]{{"blockTable", blockTable}, {"seqLens", seqLens}}, 4,
		[4]string{"[batch, qLen, heads, d]", "[numPages, pageSize, kvHeads, d]", "[numPages, pageSize, kvHeads, d]", "[batch, qLen, heads, d] (q's)"})
	if err != nil {
		return err
	}
	batch, qLen, heads, hd := q.shape[0], q.shape[1], q.shape[2], q.shape[3]
	numPages, pageSize, kvHeads := kCache.shape[0], kCache.shape[1], kCache.shape[2]
	if hd != 64 && hd != 128 && hd != 256 {
		return fmt.Errorf("ops: %s: q has head dim %d (shape %v); the kernel takes 64, 128 or 256", op, hd, q.Shape())
	}
	if kCache.shape[3] != hd {
		return fmt.Errorf("ops: %s: kCache has shape %v, q %v: kCache must be [numPages, pageSize, kvHeads, d] with q's head dim %d", op, kCache.Shape(), q.Shape(), hd)
	}
	if pageSize < 16 || pageSize > 1024 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("ops: %s: kCache has %d keys a page (shape %v); the kernel takes a power of two in 16..1024", op, pageSize, kCache.Shape())
	}
	if err := sameShape(op, "vCache", vCache, "kCache", kCache); err != nil {
		return err
	}
	if err := sameShape(op, "out", out, "q", q); err != nil {
		return err
	}
	if heads%kvHeads != 0 {
		return fmt.Errorf("ops: %s: q has %d heads, kCache and vCache %d: heads must be a multiple of kvHeads (GQA shares each K/V head by heads/kvHeads query heads)", op, heads, kvHeads)
	}
	if blockTable.rank != 2 || blockTable.shape[0] != batch {
		return fmt.Errorf("ops: %s: blockTable has shape %v; want [%d, maxPages] ([batch, maxPages] page ids)", op, blockTable.Shape(), batch)
	}
	if seqLens.rank != 1 || seqLens.shape[0] != batch {
		return fmt.Errorf("ops: %s: seqLens has shape %v; want [%d] ([batch] context lengths)", op, seqLens.Shape(), batch)
	}
	maxPages := blockTable.shape[1]
	for _, x := range []struct {
		name string
		t    Tensor[T]
	}{{"q", q}, {"kCache", kCache}, {"vCache", vCache}, {"out", out}} {
		if err := contiguous(op, x.name, "attention_decode", x.t); err != nil {
			return err
		}
		if err := need16(op, x.name, "attention_decode (16-byte cp.async rows)", x.t); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		name string
		t    Tensor[int32]
	}{{"blockTable", blockTable}, {"seqLens", seqLens}} {
		if err := contiguous(op, x.name, "attention_decode", x.t); err != nil {
			return err
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	lse := jit.AnyPtr{Elem: ptx.F32}
	maxSeq, splits := maxPages*pageSize, 0
	var forced *kernels.AttentionDecodeConfig
	if o != nil {
		forced = o.Config
		if math.IsNaN(float64(o.Scale)) || math.IsInf(float64(o.Scale), 0) || o.Scale < 0 {
			return fmt.Errorf("ops: %s: AttentionDecodeOptions.Scale %v: want a positive finite scale (0: 1/sqrt(d))", op, o.Scale)
		}
		if o.Scale != 0 {
			scale = o.Scale
		}
		if o.MaxSeqLen < 0 {
			return fmt.Errorf("ops: %s: AttentionDecodeOptions.MaxSeqLen %d: want a length >= 0 (0: maxPages*pageSize)", op, o.MaxSeqLen)
		}
		if o.MaxSeqLen > 0 {
			maxSeq = min(o.MaxSeqLen, maxSeq)
		}
		if o.Splits < 0 || o.Splits > kernels.MaxDecodeSplits {
			return fmt.Errorf("ops: %s: AttentionDecodeOptions.Splits %d: want 0 (chosen) or 1..%d", op, o.Splits, kernels.MaxDecodeSplits)
		}
		splits = o.Splits
		if o.LSE.buf != nil {
			if err := sameDevice(op, "LSE", dev, o.LSE); err != nil {
				return err
			}
			if o.LSE.rank != 3 || o.LSE.shape[0] != batch || o.LSE.shape[1] != heads || o.LSE.shape[2] != qLen {
				return fmt.Errorf("ops: %s: LSE has shape %v; want [%d %d %d] ([batch, heads, qLen])", op, o.LSE.Shape(), batch, heads, qLen)
			}
			if err := contiguous(op, "LSE", "attention_decode", o.LSE); err != nil {
				return err
			}
			lse = ptrOf(o.LSE)
		}
	}
	if err := streamOn(op, s, dev); err != nil {
		return err
	}
	var lseT Tensor[float32]
	if o != nil {
		lseT = o.LSE
	}
	if err := attentionApart(op, q, out, [2]named[T]{{"kCache", kCache}, {"vCache", vCache}}, [2]named[int32]{{"blockTable", blockTable}, {"seqLens", seqLens}}, lseT); err != nil {
		return err
	}

	st := stateOf(dev)
	info := dev.Info()
	cfg, err := AttentionDecodeConfigFor(info, dt, hd, pageSize, qLen*(heads/kvHeads))
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	if forced != nil {
		if err := forcedDecodeConfig(info, *forced, cfg); err != nil {
			return fmt.Errorf("ops: %s: %w", op, err)
		}
		cfg = *forced
	}
	if splits == 0 {
		splits = cfg.Splits(batch, qLen, heads, kvHeads, maxSeq, info.Multiproc, cfg.BlocksPerSM(kernels.SMLimitsOf(info.SM)))
	}
	key := planKey{op: "attention_decode", in: dt, dims: [3]int{qLen, hd, pageSize}, lds: [4]int{batch, heads, kvHeads, maxPages},
		flags: uint32(splits) | decodeConfigBits(cfg)<<decodeSplitBits, target: st.target}
	p := st.lookup(key)
	if p == nil {
		if p, err = planAttentionDecode(ctx, st, key, cfg, numPages); err != nil {
			if _, ok := err.(refusal); ok {
				return fmt.Errorf("ops: %s: %w", op, err)
			}
			return planFailed(op, dev, err)
		}
	}
	if lse.Addr == 0 {
		lse = jit.AnyPtr{Addr: p.lse.DevPtr(), Elem: ptx.F32}
	}
	rows := batch * qLen * heads
	oPart, lsePart := jit.AnyPtr{Elem: ptx.F32}, jit.AnyPtr{Elem: ptx.F32}
	var comb *plan
	if splits > 1 {
		ckey := planKey{op: "attention_decode_combine", in: dt, dims: [3]int{qLen, hd}, lds: [4]int{batch, heads}, target: st.target}
		if comb = st.lookup(ckey); comb == nil {
			if comb, err = planDecodeCombine(ctx, st, ckey); err != nil {
				return planFailed(op, dev, err)
			}
		}
		sc, err := decodeScratch(dev, s, rows*splits*(hd+1))
		if err != nil {
			return planFailed(op, dev, err)
		}
		oPart = jit.AnyPtr{Addr: sc.DevPtr(), Elem: ptx.F32}
		lsePart = jit.AnyPtr{Addr: sc.DevPtr() + jit.DevicePtr(4*rows*splits*hd), Elem: ptx.F32}
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), SharedMem: p.shared, Stream: s, Context: ctx}
	ak := argKey{ptr: [8]jit.DevicePtr{q.Ptr(), kCache.Ptr(), vCache.Ptr(), out.Ptr(), lse.Addr, oPart.Addr, blockTable.Ptr(), seqLens.Ptr()},
		scalar: [2]uint64{uint64(math.Float32bits(scale))}}
	if enc := p.cached(&ak); enc != nil {
		err = launch(op, dev, p.fn, lc, enc)
	} else {
		err = p.first(op, dev, lc, &ak, []any{ptrOf(q), ptrOf(kCache), ptrOf(vCache), ptrOf(out), lse, oPart, lsePart, ptrOf(blockTable), ptrOf(seqLens),
			uint32(batch), uint32(qLen), uint32(heads), uint32(kvHeads), uint32(maxPages), uint32(splits), scale})
	}
	if err != nil || comb == nil {
		return err
	}
	clc := jit.LaunchConfig{Grid: jit.D1(comb.grid), Block: jit.D1(comb.block), Stream: s, Context: ctx}
	ck := argKey{ptr: [8]jit.DevicePtr{oPart.Addr, out.Ptr(), lse.Addr}, scalar: [2]uint64{uint64(splits)}}
	if enc := comb.cached(&ck); enc != nil {
		return launch(op, dev, comb.fn, clc, enc)
	}
	return comb.first(op, dev, clc, &ck, []any{oPart, lsePart, ptrOf(out), lse, uint32(batch), uint32(qLen), uint32(heads), uint32(splits)})
}

// AttentionDecodeConfigFor returns the decode kernel AttentionDecode runs on a device
// described by info for inputs of dt (ptx.BF16 or ptx.F16), head dim headDim, pages of
// pageSize keys and rows = qLen * heads/kvHeads query rows a kv head:
// kernels.DefaultAttentionDecodeConfig, with 2 stages, then 32-key steps on 2 warps, where
// the device's shared memory cannot hold its tiles.
func AttentionDecodeConfigFor(info jit.Info, dt ptx.Type, headDim, pageSize, rows int) (kernels.AttentionDecodeConfig, error) {
	if info.SM < attentionMinSM {
		return kernels.AttentionDecodeConfig{}, fmt.Errorf("attention_decode runs mma.sync m16n8k16, cp.async and ldmatrix: compute capability 8.0 or newer; %s is %d.%d", info.Name, info.SM/10, info.SM%10)
	}
	cfg := kernels.DefaultAttentionDecodeConfig(dsl.Type(dt), headDim, pageSize, rows)
	if cfg.SharedBytes() > maxSharedPerBlock(info.SM) {
		cfg.Stages = 2
	}
	if cfg.SharedBytes() > maxSharedPerBlock(info.SM) {
		cfg.BN, cfg.Warps = 32, 2
	}
	if err := cfg.Check(); err != nil {
		return cfg, err
	}
	if cfg.SharedBytes() > maxSharedPerBlock(info.SM) {
		return cfg, fmt.Errorf("attention_decode %s needs %d bytes of shared memory; compute capability %d.%d gives a block %d", cfg.Name(), cfg.SharedBytes(), info.SM/10, info.SM%10, maxSharedPerBlock(info.SM))
	}
	return cfg, nil
}

// forcedDecodeConfig reports a forced configuration (AttentionDecodeOptions.Config) that
// the call cannot run: one for other operands than def's (AttentionDecodeConfigFor's), one
// Check refuses, or one needing more shared memory than the device gives a block.
func forcedDecodeConfig(info jit.Info, c, def kernels.AttentionDecodeConfig) error {
	if c.In != def.In || c.HeadDim != def.HeadDim || c.PageSize != def.PageSize {
		return fmt.Errorf("AttentionDecodeOptions.Config is for %s, head dim %d, %d-key pages; the operands are %s, %d, %d", c.In, c.HeadDim, c.PageSize, def.In, def.HeadDim, def.PageSize)
	}
	if err := c.Check(); err != nil {
		return fmt.Errorf("AttentionDecodeOptions.Config: %w", err)
	}
	if c.SharedBytes() > maxSharedPerBlock(info.SM) {
		return fmt.Errorf("AttentionDecodeOptions.Config %s needs %d bytes of shared memory; compute capability %d.%d gives a block %d", c.Name(), c.SharedBytes(), info.SM/10, info.SM%10, maxSharedPerBlock(info.SM))
	}
	return nil
}

// decodeSplitBits is the low bits of a decode plan key's flags, the split count's
// (1..kernels.MaxDecodeSplits).
const decodeSplitBits = 9

// decodeConfigBits packs the tiling of a decode configuration (which, with the plan key's
// type, head dim and page size, names its kernel) above the split count in the plan key's
// flags: log2 BN (4 bits), log2 Warps (2), Stages (4), BM 32, PrefetchPages and
// ShiftDivision (1 each).
func decodeConfigBits(c kernels.AttentionDecodeConfig) uint32 {
	x := uint32(bits.TrailingZeros(uint(c.BN))) | uint32(bits.TrailingZeros(uint(c.Warps)))<<4 | uint32(c.Stages)<<6
	if c.BM == 32 {
		x |= 1 << 10
	}
	if c.PrefetchPages {
		x |= 1 << 11
	}
	if c.ShiftDivision {
		x |= 1 << 12
	}
	return x
}

// planAttentionDecode builds and loads the decode kernel of key (cfg), with its scratch
// LSE (for calls that pass none).
func planAttentionDecode(ctx context.Context, st *devState, key planKey, cfg kernels.AttentionDecodeConfig, numPages int) (*plan, error) {
	qLen := key.dims[0]
	batch, heads, kvHeads, maxPages := key.lds[0], key.lds[1], key.lds[2], key.lds[3]
	splits := int(key.flags & (1<<decodeSplitBits - 1))
	if err := cfg.CheckShape(batch, qLen, heads, kvHeads, numPages, maxPages, splits); err != nil {
		return nil, refusal{err}
	}
	fn, err := st.function(ctx, cfg.Name(), key.target, func(kb *dsl.Kernel) { kernels.AttentionDecode(kb, cfg) })
	if err != nil {
		return nil, err
	}
	if p := st.lookup(key); p != nil { // a concurrent call planned it meanwhile
		return p, nil
	}
	// The kernels always store an LSE; a call without one gives them this (written, never
	// read).
	lse, err := jit.Alloc[float32](st.d, batch*heads*qLen)
	if err != nil {
		return nil, err
	}
	p := &plan{fn: fn, name: cfg.Name(), grid: cfg.Grid(batch, qLen, heads, kvHeads, splits), block: cfg.Threads(), shared: cfg.SharedBytes(), lse: lse}
	st.store(key, p)
	return p, nil
}

// planDecodeCombine builds and loads the combine kernel of key.
func planDecodeCombine(ctx context.Context, st *devState, key planKey) (*plan, error) {
	qLen, hd := key.dims[0], key.dims[1]
	batch, heads := key.lds[0], key.lds[1]
	name := kernels.AttentionDecodeCombineName(dsl.Type(key.in), hd)
	fn, err := st.function(ctx, name, key.target, func(kb *dsl.Kernel) { kernels.AttentionDecodeCombine(kb, dsl.Type(key.in), hd) })
	if err != nil {
		return nil, err
	}
	if p := st.lookup(key); p != nil {
		return p, nil
	}
	p := &plan{fn: fn, name: name, grid: kernels.AttentionDecodeCombineGrid(batch*qLen*heads, hd), block: kernels.AttentionDecodeCombineThreads}
	st.store(key, p)
	return p, nil
}

// decodeKey is one stream's decode partials of a size.
type decodeKey struct {
	d     *jit.Device
	s     *jit.Stream
	words int
}

// decodeBufs holds the decode partials (decodeKey -> *jit.Buffer[float32]): their own, not
// the split-row kernels' scratch, which must stay zero.
var decodeBufs sync.Map

// decodeScratch returns stream s's f32 scratch of at least words words for the decode
// partials (written before they are read: never zeroed). Launches on one stream run in
// order, so they share it; each stream has its own. Sizes are rounded up to a power of two,
// so that calls whose batch changes every step keep a few buffers a stream, not one per
// size (a captured graph may still use any of them: none is freed). Entries of closed
// devices are dropped when a new one is made.
func decodeScratch(d *jit.Device, s *jit.Stream, words int) (*jit.Buffer[float32], error) {
	key := decodeKey{d, s, ceilPow2(words)}
	words = key.words
	if b, ok := decodeBufs.Load(key); ok {
		return b.(*jit.Buffer[float32]), nil
	}
	decodeBufs.Range(func(k, _ any) bool {
		if isClosed(k.(decodeKey).d) {
			decodeBufs.Delete(k)
		}
		return true
	})
	b, err := jit.Alloc[float32](d, words)
	if err != nil {
		return nil, err
	}
	if had, loaded := decodeBufs.LoadOrStore(key, b); loaded { // another call made it meanwhile
		b.Free()
		return had.(*jit.Buffer[float32]), nil
	}
	return b, nil
}
