package collectives

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// The sm_90a path of the fused matmuls: ag_gemm_sm90, gemm_rs_sm90, gemm_ar_sm90 and (with
// multicast) gemm_ar_mc_sm90, fed by TMA tensor maps built per call over the buffers.

// matmulSM90 reports whether a fused matmul of shape s runs on the sm_90a kernels
// (kernels.UseSM90: target sm_90a, N and K multiples of 8 for TMA); otherwise it runs on the
// mma.sync kernels, and on sm_90a a debug log says why.
func (c *Comm) matmulSM90(ctx context.Context, what string, s MatmulShape) bool {
	ok, why := kernels.UseSM90(c.o.Target, s.N, s.K)
	if !ok && c.o.Target == ptx.SM90a && c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+what+": the sm_80 kernel on sm_90a", "why", why)
	}
	return ok
}

// matmulSM90Config is the sm_90a fused kernels' configuration for in and out.
func (c *Comm) matmulSM90Config(in, out dsl.Type) kernels.GemmSM90Config {
	cfg := c.o.MatmulSM90
	if cfg.BN == 0 {
		cfg = kernels.DefaultGemmSM90Config(in)
	}
	cfg.In, cfg.Out = in, out
	return cfg
}

// fusedSM90Function builds and loads (once) the sm_90a fused kernel of family f for cfg.
func (c *Comm) fusedSM90Function(f kernels.Family, cfg kernels.GemmSM90Config) (*jit.Function, string, error) {
	key := fusedKey{f, cfg.In, cfg.Out, true}
	name := kernels.FusedSM90Name(f, cfg)
	if fn, ok := c.fused[key]; ok {
		return fn, name, nil
	}
	if err := cfg.Check(); err != nil {
		return nil, "", fmt.Errorf("collectives: Options.MatmulSM90: %w", err)
	}
	k := dsl.New(name, dsl.WithTarget(ptx.SM90a))
	switch f {
	case kernels.FamilyAGGemmSM90:
		kernels.AGGemmSM90(k, cfg)
	case kernels.FamilyGemmRSSM90:
		kernels.GemmRSSM90(k, cfg)
	case kernels.FamilyGemmARSM90:
		kernels.GemmARSM90(k, cfg)
	case kernels.FamilyGemmARMCSM90:
		kernels.GemmARMCSM90(k, cfg)
	default:
		return nil, "", fmt.Errorf("collectives: %s is not an sm_90a fused family", excerpt.Quote(string(f)))
	}
	fn, err := c.loadMatmul(key, name, k)
	return fn, name, err
}

// tensorMap makes a TMA tensor map over the first rows x cols elements (row-major) of s, of
// dt (f16 or bf16), with box and the 128-byte swizzle: (cols, rows), innermost first.
func tensorMap(s *sym, dt dsl.Type, cols, rows int, box [2]int) (jit.TensorMap, error) {
	return tensorMapAt(s, 0, dt, cols, rows, box)
}

// tensorMapAt is tensorMap of the rows x cols elements from element off of s.
func tensorMapAt(s *sym, off int, dt dsl.Type, cols, rows int, box [2]int) (jit.TensorMap, error) {
	dims := []uint64{uint64(cols), uint64(rows)}
	strides := []uint64{uint64(cols * dt.Bytes())}
	b := []uint32{uint32(box[0]), uint32(box[1])}
	n := int(s.m.Size()) / 2
	at := jit.WithOffset(uint64(off))
	switch dt {
	case dsl.BF16:
		buf, err := jit.BufferOf[fp.BF16](s.m, n)
		if err != nil {
			return jit.TensorMap{}, err
		}
		return jit.NewTensorMap(buf, dims, strides, b, jit.Swizzle128B, at)
	case dsl.F16:
		buf, err := jit.BufferOf[fp.F16](s.m, n)
		if err != nil {
			return jit.TensorMap{}, err
		}
		return jit.NewTensorMap(buf, dims, strides, b, jit.Swizzle128B, at)
	}
	return jit.TensorMap{}, fmt.Errorf("collectives: no tensor map over %s (f16 or bf16)", dt)
}

// tmapKey is everything a tensor map of tensorMapAt encodes.
type tmapKey struct {
	at         jit.DevicePtr
	dt         dsl.Type
	cols, rows int
	box        [2]int
}

// tensorMap is tensorMap through the Comm's cache: a map encodes only the address, type,
// extents and box, so a cached one stays right for any buffer at that address, and a call
// that repeats its shapes (every training step) encodes none.
func (c *Comm) tensorMap(s *sym, dt dsl.Type, cols, rows int, box [2]int) (jit.TensorMap, error) {
	return c.tensorMapAt(s, 0, dt, cols, rows, box)
}

// tensorMapAt is tensorMapAt through the Comm's cache.
func (c *Comm) tensorMapAt(s *sym, off int, dt dsl.Type, cols, rows int, box [2]int) (jit.TensorMap, error) {
	key := tmapKey{s.own + jit.DevicePtr(off*dt.Bytes()), dt, cols, rows, box}
	if tm, ok := c.tmaps[key]; ok {
		return tm, nil
	}
	tm, err := tensorMapAt(s, off, dt, cols, rows, box)
	if err != nil {
		return tm, err
	}
	if c.tmaps == nil || len(c.tmaps) >= maxTensorMaps {
		c.tmaps = map[tmapKey]jit.TensorMap{}
	}
	c.tmaps[key] = tm
	return tm, nil
}

// maxTensorMaps bounds the Comm's tensor-map cache (128 bytes each); when full it starts over.
const maxTensorMaps = 1024

// TensorMap returns a TMA tensor map over this GPU's copy of b as a row-major rows x cols
// matrix (f16 or bf16: cols, rows innermost first) with box and the 128-byte swizzle, as
// kernels.GemmSM90Config's maps take them (TMABoxA, TMABoxB). The map holds the address: keep
// b alive while kernels use it.
func (b *Buffer) TensorMap(cols, rows int, box [2]int) (jit.TensorMap, error) {
	if err := b.live("TensorMap"); err != nil {
		return jit.TensorMap{}, err
	}
	if cols < 1 || rows < 1 || int64(cols)*int64(rows) > int64(b.n) {
		return jit.TensorMap{}, fmt.Errorf("collectives: Buffer.TensorMap: %d x %d elements, the buffer holds %d", rows, cols, b.n)
	}
	for _, e := range box {
		if e < 1 || e > math.MaxUint32 {
			return jit.TensorMap{}, fmt.Errorf("collectives: Buffer.TensorMap: box %v: each extent must be positive and fit 32 bits (TMA takes at most 256)", box)
		}
	}
	return tensorMap(b.s, b.dt, cols, rows, box)
}

// fusedSM90 runs family f (FamilyAGGemmSM90, FamilyGemmRSSM90 or FamilyGemmARSM90, which
// becomes FamilyGemmARMCSM90 when the Comm uses multicast) on checked buffers: one
// persistent block per SM at most, on every GPU the same grid.
func (c *Comm) fusedSM90(ctx context.Context, cl *call, f kernels.Family, a, b, out *Buffer, s MatmulShape) error {
	if f == kernels.FamilyGemmARSM90 && c.mc {
		f = kernels.FamilyGemmARMCSM90
	}
	cfg := c.matmulSM90Config(a.dt, out.dt)
	fn, name, err := c.fusedSM90Function(f, cfg)
	if err != nil {
		return err
	}
	sms := max(c.r.Device.Info().Multiproc, 1)
	// The configuration's launch: block, shared memory and the maps' extents and boxes (the
	// fused grid is FusedSM90Grid's, over every GPU's tiles).
	l, err := cfg.Launch(s.M, s.N, s.K, sms)
	if err != nil {
		return fmt.Errorf("collectives: %s: %w", cl.what, err)
	}
	rows := s.M / c.g
	var bufBytes, words int
	switch f {
	case kernels.FamilyAGGemmSM90:
		bufBytes, words = kernels.AGGemmSM90GatheredRows(cfg, s.M, c.g)*s.K*a.dt.Bytes(), kernels.AGGemmSM90SignalWords(cfg, s.M, c.g)
	case kernels.FamilyGemmRSSM90:
		bufBytes, words = s.M*s.N*4, kernels.GemmRSSM90SignalWords(cfg, s.M, s.N, c.g)
	default:
		bufBytes, words = s.M*s.N*4, kernels.GemmARSM90SignalWords(cfg, s.M, s.N, c.g)
	}
	st, err := c.fusedEnsure(ctx, cl, f, bufBytes, words)
	if err != nil {
		return err
	}
	aRows := s.M
	if f == kernels.FamilyAGGemmSM90 {
		aRows = rows
	}
	tmA, err := c.tensorMap(a.s, a.dt, int(l.A.Dims[0]), aRows, specBox(l.A))
	if err != nil {
		return fmt.Errorf("collectives: %s: A's tensor map: %w", cl.what, err)
	}
	tmB, err := c.tensorMap(b.s, b.dt, int(l.B.Dims[0]), int(l.B.Dims[1]), specBox(l.B))
	if err != nil {
		return fmt.Errorf("collectives: %s: B's tensor map: %w", cl.what, err)
	}
	base := [6]uint32{uint32(c.rank), uint32(c.g), uint32(s.M), uint32(s.N), uint32(s.K), st.epoch}
	var args any
	switch f {
	case kernels.FamilyAGGemmSM90:
		tmG, err := c.tensorMap(st.buf, a.dt, int(l.A.Dims[0]), kernels.AGGemmSM90GatheredRows(cfg, s.M, c.g), specBox(l.A))
		if err != nil {
			return fmt.Errorf("collectives: %s: the gathered buffer's tensor map: %w", cl.what, err)
		}
		args = launch.AGGemmSM90{TmA: tmA, TmG: tmG, TmB: tmB, A: a.s.at(a.dt), Gathered: st.buf.table(), Signals: st.sig.table(),
			Rank: base[0], NGPUs: base[1], M: base[2], N: base[3], K: base[4], Epoch: base[5], D: out.s.at(out.dt)}
	case kernels.FamilyGemmRSSM90:
		args = launch.GemmRSSM90{TmA: tmA, TmB: tmB, Scratch: st.buf.table(), Signals: st.sig.table(),
			Rank: base[0], NGPUs: base[1], M: base[2], N: base[3], K: base[4], Epoch: base[5], D: out.s.at(out.dt)}
	case kernels.FamilyGemmARSM90:
		args = launch.GemmRSSM90{TmA: tmA, TmB: tmB, Scratch: st.buf.table(), Signals: st.sig.table(),
			Rank: base[0], NGPUs: base[1], M: base[2], N: base[3], K: base[4], Epoch: base[5], D: out.s.table()}
	default:
		args = launch.GemmARMCSM90{TmA: tmA, TmB: tmB, Scratch: st.buf.at(dsl.F32), ScratchMC: st.buf.multicast(dsl.F32),
			Signals: st.sig.table(), SignalsMC: st.sig.multicast(dsl.U32),
			Rank: base[0], NGPUs: base[1], M: base[2], N: base[3], K: base[4], Epoch: base[5], D: out.s.at(out.dt), DMC: out.s.multicast(out.dt)}
	}
	blocks := kernels.FusedSM90Grid(cfg, s.M, s.N, c.g, sms)
	return c.fusedLaunch(ctx, cl, fn, name, l.Block, l.SharedBytes, blocks, st, args)
}

// specBox is a tensor-map spec's box as tensorMap takes it.
func specBox(s kernels.TMASpec) [2]int { return [2]int{int(s.Box[0]), int(s.Box[1])} }
