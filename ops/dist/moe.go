package dist

import (
	"context"
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
)

// MoELayerConfig is the shape of an expert-parallel MoE feed-forward layer, the same on
// every rank: the dispatch's shape (collectives.MoEConfig: Tokens per GPU, TopK, Hidden,
// Experts, Capacity) and each expert's intermediate size.
type MoELayerConfig struct {
	collectives.MoEConfig
	// FFN is each expert's intermediate size F (a multiple of 8): W13 maps Hidden to 2F
	// (gate, up), W2 maps F back to Hidden.
	FFN int
	// GateUp and Down, when their BN is not 0, are the two grouped GEMMs' kernel
	// configurations in place of kernels.GemmSM90GroupedFor's picks
	// (ops.GroupedMatmulOptions.Config: for timing variants); In and Out are bf16. Zero is
	// the pick; BN 0 with another field set is refused.
	GateUp, Down kernels.GemmSM90GroupedConfig
	// AllSlots, with LowLatency, runs the grouped GEMMs and SwiGLU over every slot of the
	// masked layout (Capacity rows, on the MoE's fixed Offsets), as the layer did before it
	// read the counts, in place of the masked kernels that compute only the rows received:
	// for timing the two (the outputs are the same). NewMoELayer refuses it without
	// LowLatency.
	AllSlots bool
}

// MoELayer is an expert-parallel MoE layer on a Comm (docs/moe.md, "The whole layer"): its
// dispatch and combine (a collectives.MoE), this GPU's experts' weights and the scratch
// between the steps. Forward runs the five steps on the Comm's stream with no host
// synchronization: counts and offsets stay on the device. A MoELayer is used by one
// goroutine at a time.
type MoELayer struct {
	c    *collectives.Comm
	m    *collectives.MoE
	cfg  MoELayerConfig
	el   int
	w13  ops.Tensor[fp.BF16] // [el, H, 2F]
	w2   ops.Tensor[fp.BF16] // [el, F, H]
	recv ops.Tensor[fp.BF16] // [Capacity, H]: the MoE's Recv
	offs ops.Tensor[int32]   // [el+1]: the MoE's Offsets
	rows ops.Tensor[int32]   // [1]: Offsets[el], the rows received
	gu   ops.Tensor[fp.BF16] // [Capacity, 2F]
	h    ops.Tensor[fp.BF16] // [Capacity, F]
	y    ops.Tensor[fp.BF16] // [Capacity, H]: a Comm buffer (the combine reads peers' rows)
	yb   *collectives.Buffer
	// The low-latency mode's masked layout (stride 0: the normal mode, or AllSlots): local
	// expert j's rows start at j*stride, cnts[j] ([el]: the MoE's Counts) of them.
	cnts   ops.Tensor[int32]
	stride int
	// step is the last step run since the last Dispatch (0: none): each step reads the
	// previous one's output.
	step int
}

// The steps of a forward pass, in order.
const (
	stepDispatch = 1 + iota
	stepGateUp
	stepSwiGLU
	stepDown
)

var stepNames = [...]string{"", "Dispatch", "GateUp", "SwiGLU", "Down"}

// NewMoELayer makes the layer of cfg on c (collective: every rank calls it with the same
// cfg; it allocates the MoE and a Comm buffer). w13 holds this GPU's Experts/NumGPUs
// experts' gate and up weights, [experts, Hidden, 2*FFN] bf16, each expert's columns
// [0, FFN) the gate's and [FFN, 2*FFN) the up's; w2 their down weights, [experts, FFN,
// Hidden] bf16 (row-major, contiguous, 16-byte aligned: ops.GroupedMatmul's B). Expert e
// lives on GPU e/(Experts/NumGPUs) as local expert e mod (Experts/NumGPUs). The layer keeps
// w13 and w2 (not copies): do not free them while it runs. Scratch: 2*Capacity*(3F +
// Hidden) bytes beside the MoE's.
func NewMoELayer(ctx context.Context, c *collectives.Comm, cfg MoELayerConfig, w13, w2 ops.Tensor[fp.BF16]) (*MoELayer, error) {
	const what = "NewMoELayer"
	if ctx == nil {
		return nil, fmt.Errorf("dist: %s: nil context", what)
	}
	if c == nil {
		return nil, fmt.Errorf("dist: %s: nil Comm", what)
	}
	if cfg.FFN < 8 || cfg.FFN%8 != 0 {
		return nil, fmt.Errorf("dist: %s: MoELayerConfig.FFN %d: want a positive multiple of 8 (the grouped GEMM's N and K, SwiGLU's 16-byte vectors)", what, cfg.FFN)
	}
	g := c.NumGPUs()
	if cfg.Experts < 1 || g < 1 || cfg.Experts%g != 0 {
		return nil, fmt.Errorf("dist: %s: MoELayerConfig.Experts %d: want a positive multiple of the %d GPUs", what, cfg.Experts, g)
	}
	if cfg.Hidden < 8 || cfg.Hidden%8 != 0 {
		return nil, fmt.Errorf("dist: %s: MoELayerConfig.Hidden %d: want a positive multiple of 8 (16-byte rows of bf16)", what, cfg.Hidden)
	}
	if cfg.AllSlots && !cfg.LowLatency {
		return nil, fmt.Errorf("dist: %s: MoELayerConfig.AllSlots without LowLatency: only the low-latency mode's masked layout has slots past the rows received", what)
	}
	el, f, hid := cfg.Experts/g, cfg.FFN, cfg.Hidden
	for _, x := range []struct {
		name  string
		t     ops.Tensor[fp.BF16]
		shape [3]int
		rule  string
	}{{"w13", w13, [3]int{el, hid, 2 * f}, "this GPU's experts x Hidden x 2*FFN (gate columns, then up)"},
		{"w2", w2, [3]int{el, f, hid}, "this GPU's experts x FFN x Hidden"}} {
		if x.t.Buffer() == nil || x.t.Rank() == 0 {
			return nil, fmt.Errorf("dist: %s: %s is the zero Tensor", what, x.name)
		}
		if x.t.Buffer().Freed() {
			return nil, fmt.Errorf("dist: %s: %s: its buffer was freed", what, x.name)
		}
		if s := x.t.Shape(); len(s) != 3 || [3]int(s) != x.shape {
			return nil, fmt.Errorf("dist: %s: %s has shape %v; want %v (%s)", what, x.name, s, x.shape, x.rule)
		}
		if !x.t.IsContiguous() {
			return nil, fmt.Errorf("dist: %s: %s (strides %v) is not contiguous; the grouped GEMM takes row-major weights", what, x.name, x.t.Strides())
		}
	}
	// Checked before NewMoE (collective), so that a refused layer allocates nothing. A rank
	// alone refusing still leaves the others in NewMoE until their context ends.
	dev := c.Device()
	if w13.Buffer().Memory().Device() != dev || w2.Buffer().Memory().Device() != dev {
		return nil, fmt.Errorf("dist: %s: w13 and w2 must live on this rank's device (%s)", what, dev.Info().Name)
	}
	// Capacity as NewMoE fills it in (the same on every rank), so that a configuration the
	// real row count breaks is refused here, not at the first Forward.
	capa := cfg.Capacity
	switch {
	case capa == 0 && cfg.LowLatency:
		capa = cfg.Experts * cfg.Tokens // the masked layout: every expert's slots
	case capa == 0:
		capa = c.NumGPUs() * cfg.Tokens * cfg.TopK
	}
	stride := 0 // the masked GEMMs' and SwiGLU's row stride (0: offsets)
	if cfg.LowLatency && !cfg.AllSlots {
		stride = g * cfg.Tokens
	}
	for _, x := range []struct {
		name string
		cfg  kernels.GemmSM90GroupedConfig
		n, k int
	}{{"GateUp", cfg.GateUp, 2 * f, hid}, {"Down", cfg.Down, hid, f}} {
		if x.cfg.BN == 0 {
			if x.cfg != (kernels.GemmSM90GroupedConfig{}) {
				return nil, fmt.Errorf("dist: %s: MoELayerConfig.%s has BN 0 but other fields set (%s): set BN too, or leave it zero (the library's pick)", what, x.name, x.cfg.Name())
			}
			continue
		}
		if x.cfg.In != dsl.BF16 || x.cfg.Out != dsl.BF16 {
			return nil, fmt.Errorf("dist: %s: MoELayerConfig.%s is %s -> %s; want bf16 -> bf16", what, x.name, x.cfg.In, x.cfg.Out)
		}
		err := x.cfg.CheckShape(max(capa, 1), x.n, x.k, el)
		if stride > 0 {
			mc := x.cfg
			mc.Masked = true
			err = mc.CheckMasked(capa, x.n, x.k, el, stride)
		}
		if err != nil {
			return nil, fmt.Errorf("dist: %s: MoELayerConfig.%s: %w", what, x.name, err)
		}
	}
	m, err := c.NewMoE(ctx, cfg.MoEConfig)
	if err != nil {
		return nil, fmt.Errorf("dist: %s: %w", what, err)
	}
	cfg.MoEConfig = m.Config() // Capacity filled in
	if cfg.Capacity != capa {
		return nil, fmt.Errorf("dist: %s: the MoE's Capacity %d is not the %d the layer checked its GEMMs at", what, cfg.Capacity, capa)
	}
	l := &MoELayer{c: c, m: m, cfg: cfg, el: el, w13: w13, w2: w2, stride: stride}
	if l.recv, err = Tensor[fp.BF16](m.Recv(), capa, hid); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", what, err)
	}
	if l.offs, err = Tensor[int32](m.Offsets(), el+1); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", what, err)
	}
	if l.rows, err = l.offs.Narrow(0, el, 1); err != nil {
		return nil, fmt.Errorf("dist: %s: %w", what, err)
	}
	if stride > 0 {
		if l.cnts, err = Tensor[int32](m.Counts(), el); err != nil {
			return nil, fmt.Errorf("dist: %s: %w", what, err)
		}
	}
	if l.y, l.yb, err = Alloc[fp.BF16](ctx, c, capa, hid); err != nil {
		return nil, fmt.Errorf("dist: %s: the experts' output rows: %w", what, err)
	}
	// From here a failure frees only this rank's own scratch (the Comm buffer y, freed
	// collectively, goes with the Comm's Close, as the MoE's buffers do).
	local := func(cols int) (ops.Tensor[fp.BF16], error) {
		b, err := jit.Alloc[fp.BF16](dev, capa*cols)
		if err != nil {
			return ops.Tensor[fp.BF16]{}, err
		}
		return ops.New(b, capa, cols)
	}
	if l.gu, err = local(2 * f); err == nil {
		l.h, err = local(f)
	}
	if err != nil {
		if b := l.gu.Buffer(); b != nil {
			err = errors.Join(err, b.Free())
		}
		return nil, fmt.Errorf("dist: %s: scratch: %w", what, err)
	}
	return l, nil
}

// Config returns the layer's shape (Capacity filled in); the zero MoELayerConfig for a nil
// layer.
func (l *MoELayer) Config() MoELayerConfig {
	if l == nil {
		return MoELayerConfig{}
	}
	return l.cfg
}

// MoE returns the layer's dispatch and combine (its Recv, Counts, Offsets, Src); nil for a
// nil or freed layer.
func (l *MoELayer) MoE() *collectives.MoE {
	if l == nil {
		return nil
	}
	return l.m
}

// Forward computes this GPU's out [Tokens, Hidden] bf16 = sum over k of weights[t, k] *
// expert_{ids[t, k]}(x[t]) for each of its tokens t, each expert being down(silu(gate) *
// up): Dispatch, GateUp, SwiGLU, Down, Combine in stream order (collective; no host
// synchronization: call Check, or read out, to wait). x [Tokens, Hidden] bf16, ids [Tokens,
// TopK] int32 (-1: none), weights [Tokens, TopK] f32 and out are Comm buffers viewed whole
// (Alloc).
func (l *MoELayer) Forward(ctx context.Context, out, x ops.Tensor[fp.BF16], ids ops.Tensor[int32], weights ops.Tensor[float32]) error {
	if err := l.Dispatch(ctx, x, ids); err != nil {
		return err
	}
	if err := l.GateUp(ctx); err != nil {
		return err
	}
	if err := l.SwiGLU(ctx); err != nil {
		return err
	}
	if err := l.Down(ctx); err != nil {
		return err
	}
	return l.Combine(ctx, out, weights)
}

// Dispatch is Forward's first step: every (token, k) pair's row of x to its expert's GPU,
// into the MoE's Recv (collectives.MoE.Dispatch).
func (l *MoELayer) Dispatch(ctx context.Context, x ops.Tensor[fp.BF16], ids ops.Tensor[int32]) error {
	const what = "MoELayer.Dispatch"
	if err := l.begin(ctx, what, 0); err != nil {
		return err
	}
	cfg := l.cfg
	xb, err := bufferOf(l.c, what, "x", x)
	if err != nil {
		return err
	}
	ib, err := bufferOf(l.c, what, "ids", ids)
	if err != nil {
		return err
	}
	if err := shaped(what, "x", x.Shape(), cfg.Tokens, cfg.Hidden); err != nil {
		return err
	}
	if err := shaped(what, "ids", ids.Shape(), cfg.Tokens, cfg.TopK); err != nil {
		return err
	}
	l.step = 0
	if err := l.m.Dispatch(ctx, xb, ib); err != nil {
		return err
	}
	l.step = stepDispatch
	return nil
}

// GateUp is Forward's second step: the grouped GEMM of the received rows by each local
// expert's W13, [Capacity, Hidden] x [Hidden, 2F] -> [Capacity, 2F] bf16 (ops.GroupedMatmul
// on the device offsets; rows past those received are neither computed nor written). In the
// low-latency mode it runs on the masked layout (ops.GroupedMatmulOptions.Counts: the MoE's
// Counts at a stride of NumGPUs*Tokens rows), so its tiles cover the rows received, not
// every expert's slots (unless AllSlots).
func (l *MoELayer) GateUp(ctx context.Context) error {
	if err := l.begin(ctx, "MoELayer.GateUp", stepDispatch); err != nil {
		return err
	}
	offs, o := l.gemmArgs(l.cfg.GateUp)
	if err := ops.GroupedMatmul(ctx, l.c.Stream(), l.gu, l.recv, l.w13, offs, o); err != nil {
		return err
	}
	l.step = stepGateUp
	return nil
}

// SwiGLU is Forward's third step: silu(gate) * up of the rows received ([Capacity, F]
// bf16; ops.SwiGLU with the dispatch's row count on the device, or in the low-latency mode
// its counts per expert (SwiGLUOptions.Counts, the masked layout), so it costs the rows
// received, not the capacity).
func (l *MoELayer) SwiGLU(ctx context.Context) error {
	if err := l.begin(ctx, "MoELayer.SwiGLU", stepGateUp); err != nil {
		return err
	}
	o := &ops.SwiGLUOptions{Rows: l.rows}
	if l.stride > 0 {
		o = &ops.SwiGLUOptions{Counts: l.cnts, Stride: l.stride}
	}
	if err := ops.SwiGLU(ctx, l.c.Stream(), l.h, l.gu, o); err != nil {
		return err
	}
	l.step = stepSwiGLU
	return nil
}

// Down is Forward's fourth step: the grouped GEMM of SwiGLU's rows by each local expert's
// W2, [Capacity, F] x [F, Hidden] -> [Capacity, Hidden] bf16, into the rows the combine
// reads (masked in the low-latency mode, as GateUp).
func (l *MoELayer) Down(ctx context.Context) error {
	if err := l.begin(ctx, "MoELayer.Down", stepSwiGLU); err != nil {
		return err
	}
	offs, o := l.gemmArgs(l.cfg.Down)
	if err := ops.GroupedMatmul(ctx, l.c.Stream(), l.y, l.h, l.w2, offs, o); err != nil {
		return err
	}
	l.step = stepDown
	return nil
}

// Combine is Forward's last step: out[t] = the weighted sum of token t's expert rows,
// weights [Tokens, TopK] f32 (collectives.MoE.Combine: per GPU in f32 rounded to bf16, then
// over GPUs in order, rounded once more).
func (l *MoELayer) Combine(ctx context.Context, out ops.Tensor[fp.BF16], weights ops.Tensor[float32]) error {
	const what = "MoELayer.Combine"
	if err := l.begin(ctx, what, stepDown); err != nil {
		return err
	}
	cfg := l.cfg
	ob, err := bufferOf(l.c, what, "out", out)
	if err != nil {
		return err
	}
	wb, err := bufferOf(l.c, what, "weights", weights)
	if err != nil {
		return err
	}
	if err := shaped(what, "out", out.Shape(), cfg.Tokens, cfg.Hidden); err != nil {
		return err
	}
	if err := shaped(what, "weights", weights.Shape(), cfg.Tokens, cfg.TopK); err != nil {
		return err
	}
	return l.m.Combine(ctx, l.yb, wb, ob)
}

// Check waits for this GPU's work and reports what the last dispatch could not send (bad
// ids, rows past Capacity: collectives.MoE.Check), the same on every rank.
func (l *MoELayer) Check(ctx context.Context) error {
	if l == nil || l.m == nil {
		return errors.New("dist: MoELayer.Check of a nil or freed MoELayer")
	}
	return l.m.Check(ctx)
}

// Free releases the layer's scratch (collective: it frees a Comm buffer). The MoE's own
// buffers go with the Comm's Close; the weights are the caller's. A nil or ended ctx is
// an error that leaves the layer as it was (it marked the layer freed, freed its local
// scratch and kept the Comm buffer, which no later Free could release).
func (l *MoELayer) Free(ctx context.Context) error {
	if l == nil || l.m == nil {
		return errors.New("dist: MoELayer.Free of a nil or freed MoELayer")
	}
	if ctx == nil {
		return errors.New("dist: MoELayer.Free: nil context")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dist: MoELayer.Free: %w", err)
	}
	if err := l.yb.FreeContext(ctx); err != nil { // first: the buffer stays when its wait fails
		return fmt.Errorf("dist: MoELayer.Free: %w", err)
	}
	l.m = nil
	return errors.Join(l.gu.Buffer().Free(), l.h.Buffer().Free())
}

// begin checks ctx, that the layer is live and that step after ran since the last
// Dispatch (0: none needed).
func (l *MoELayer) begin(ctx context.Context, what string, after int) error {
	if l == nil || l.m == nil {
		return fmt.Errorf("dist: %s of a nil or freed MoELayer", what)
	}
	if ctx == nil {
		return fmt.Errorf("dist: %s: nil context", what)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dist: %s: %w", what, err)
	}
	if l.step < after {
		return fmt.Errorf("dist: %s: run MoELayer.%s first (each step reads the previous one's output; Forward runs them in order)", what, stepNames[l.step+1])
	}
	return nil
}

// gemmArgs is a grouped GEMM's offsets and options: the MoE's offsets, or in the masked
// layout the zero Tensor and the counts at the layer's stride; cfg in place of the pick
// when its BN is not 0 (nil options: the pick on the offsets).
func (l *MoELayer) gemmArgs(cfg kernels.GemmSM90GroupedConfig) (ops.Tensor[int32], *ops.GroupedMatmulOptions[fp.BF16]) {
	var o *ops.GroupedMatmulOptions[fp.BF16]
	if cfg.BN != 0 || l.stride > 0 {
		o = &ops.GroupedMatmulOptions[fp.BF16]{Alpha: 1, Config: cfg}
	}
	if l.stride > 0 {
		o.Counts, o.Stride = l.cnts, l.stride
		return ops.Tensor[int32]{}, o
	}
	return l.offs, o
}

// shaped checks that an operand is [rows, cols].
func shaped(what, name string, shape []int, rows, cols int) error {
	if len(shape) != 2 || shape[0] != rows || shape[1] != cols {
		return fmt.Errorf("dist: %s: %s has shape %v; want [%d %d]", what, name, shape, rows, cols)
	}
	return nil
}
