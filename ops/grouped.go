package ops

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// GroupedMatmulOptions are GroupedMatmul's less common settings. A nil
// *GroupedMatmulOptions means Alpha 1, Beta 0.
type GroupedMatmulOptions[TO jit.Elem] struct {
	// Alpha and Beta scale the product and C: D = Alpha*A*B[g] + Beta*C on group g's rows
	// (both as given: set Alpha, 0 is a valid scale).
	Alpha, Beta float32
	// C is read when Beta is not 0: [rows, N], contiguous and 16-byte aligned like D (it may
	// be D itself). Only the groups' rows are read.
	C Tensor[TO]
	// ScaleA ([rows] f32) and ScaleB ([groups, N] f32), both or neither, scale the product:
	// D[r, c] = Alpha*(A[r,:]*B[g])[c]*ScaleA[r]*ScaleB[g, c] + Beta*C[r, c] (e4m3's row-wise
	// scales; any input type takes them). Contiguous, 16-byte aligned.
	ScaleA, ScaleB Tensor[float32]
	// Config, when its BN is not 0, is the kernel configuration to run in place of
	// kernels.GemmSM90GroupedFor's pick (tiles, stages, TMAStore, BandM: for timing variants).
	// Its In and Out must be A's and D's element types; its Scales is set from ScaleA and
	// ScaleB, its Masked from Counts. The zero Config is unset; one with BN 0 and another
	// field set is refused.
	Config kernels.GemmSM90GroupedConfig
	// Counts, when set, selects the masked layout (an MoE low-latency dispatch's,
	// collectives.MoEConfig.LowLatency): group g's rows are g*Stride <= r < g*Stride +
	// Counts[g], groups at a fixed stride with a row count each, and the offsets argument
	// must be the zero Tensor. Counts is [groups] int32 on the device (MoE.Counts), read by
	// the kernel (no host round trip: the call can be captured in a graph); only tiles over
	// counted rows are computed, and the other rows of D are not written. Stride is positive
	// and Stride*groups at most A's rows. Device counts are not checked on the host (that
	// would need a synchronization): the kernel clamps each to [0, Stride], so a bad count
	// computes at most its group's slots and never writes outside them.
	Counts Tensor[int32]
	Stride int
}

// GroupedMatmul computes the grouped (MoE experts') gemm: for each group g, the rows
// offsets[g] <= r < offsets[g+1] of D are Alpha*A[r,:]*B[g] + Beta*C[r,:], with f32
// accumulation. A is [rows, K] (every group's rows stacked, as the MoE dispatch's receive
// buffer holds them, expert after expert), B is [groups, K, N] (each group's K x N weights,
// row-major), C and D are [rows, N]; A and B are f16, bf16 or e4m3, C and D f16, bf16 or
// f32. An e4m3 B is read K-major, as Matmul's: shape [groups, K, N] with strides
// [N*K, 1, K] (each group's N x K row-major matrix; ops.Strided), and K a multiple of 16.
// Offsets holds groups+1 int32 row offsets on the device (the dispatch's Offsets): the
// kernel reads them, so the call needs no host round trip and can be captured in a graph.
// Rows outside every group are not written; offsets outside [0, rows] are clamped to it and
// a decreasing one ends its group empty (the kernel never writes outside D), but groups
// must not overlap for D to be the product. With Options.Counts the groups are in the masked
// layout instead (offsets is then the zero Tensor): group g's rows start at g*Stride, and
// only the first Counts[g] are computed and written.
//
// It runs gemm_sm90_grouped (TMA + wgmma, kernels.GemmSM90Grouped) in the configuration
// kernels.GemmSM90GroupedFor picks for the shape and the device's multiprocessors (or
// Options.Config), so the
// device must be of compute capability 9.0 (sm_90a; the emulator is). Every tensor is
// contiguous and starts on 16 bytes (offsets on 4); N and K are multiples of 8; groups is
// at most kernels.GemmSM90MaxGroups.
func GroupedMatmul[TI, TO jit.Elem](ctx context.Context, s *jit.Stream, d Tensor[TO], a, b Tensor[TI], offsets Tensor[int32], o *GroupedMatmulOptions[TO]) error {
	const op = "GroupedMatmul"
	if err := begin(ctx, op); err != nil {
		return err
	}
	in, out := jit.ElemType[TI](), jit.ElemType[TO]()
	if err := dtypeIn(op, "A", in, ptx.F16, ptx.BF16, ptx.E4M3); err != nil {
		return err
	}
	if err := dtypeIn(op, "D", out, ptx.F16, ptx.BF16, ptx.F32); err != nil {
		return err
	}
	dev, err := deviceOf(op, "D", d)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		t    Tensor[TI]
	}{{"A", a}, {"B", b}} {
		if err := sameDevice(op, x.name, dev, x.t); err != nil {
			return err
		}
	}
	masked := o != nil && o.Counts.buf != nil
	if o != nil && !masked && o.Stride != 0 {
		return fmt.Errorf("ops: %s: GroupedMatmulOptions.Stride %d without Counts: the masked layout takes both (Counts: the groups' row counts)", op, o.Stride)
	}
	if masked {
		if offsets.buf != nil {
			return fmt.Errorf("ops: %s: offsets and GroupedMatmulOptions.Counts are both set: the masked layout (Counts, Stride) takes no offsets; pass the zero Tensor", op)
		}
		if err := sameDevice(op, "Counts", dev, o.Counts); err != nil {
			return err
		}
	} else if err := sameDevice(op, "offsets", dev, offsets); err != nil {
		return err
	}
	rows, k, err := matrix(op, "A", a)
	if err != nil {
		return err
	}
	if b.rank != 3 {
		return fmt.Errorf("ops: %s: B has rank %d (shape %v); want [groups, K, N]", op, b.rank, b.Shape())
	}
	groups, kb, n := b.shape[0], b.shape[1], b.shape[2]
	if kb != k {
		return fmt.Errorf("ops: %s: A is %d x %d, B %v: B's second extent must match A's columns (K)", op, rows, k, b.Shape())
	}
	if _, _, err := matrix(op, "D", d); err != nil {
		return err
	}
	if d.shape[0] != rows || d.shape[1] != n {
		return fmt.Errorf("ops: %s: D is %v; want [%d %d] (A's rows by B's columns)", op, d.Shape(), rows, n)
	}
	// idx is the kernel's group table: the offsets, or the masked layout's counts.
	idx, idxName := offsets, "offsets"
	if masked {
		idx, idxName = o.Counts, "Counts"
		switch {
		case o.Counts.rank != 1 || o.Counts.shape[0] != groups:
			return fmt.Errorf("ops: %s: Counts has shape %v; want [%d] (one row count per group of B)", op, o.Counts.Shape(), groups)
		case o.Stride < 1:
			return fmt.Errorf("ops: %s: GroupedMatmulOptions.Stride %d: want a positive row stride (each group's slots)", op, o.Stride)
		case o.Stride > rows/groups: // Stride*groups > rows, without a product that can wrap
			total := "over 2^63"
			if o.Stride <= math.MaxInt/groups {
				total = fmt.Sprint(o.Stride * groups)
			}
			return fmt.Errorf("ops: %s: GroupedMatmulOptions.Stride %d x %d groups = %s rows: the groups' slots must lie inside A's and D's %d rows", op, o.Stride, groups, total, rows)
		}
	} else if offsets.rank != 1 || offsets.shape[0] != groups+1 {
		return fmt.Errorf("ops: %s: offsets has shape %v; want [%d] (groups+1 row offsets)", op, offsets.Shape(), groups+1)
	}
	if err := contiguous(op, "A", "gemm_sm90_grouped", a); err != nil {
		return err
	}
	if in == ptx.E4M3 {
		if want := [3]int{n * k, 1, k}; (groups > 1 && b.strides[0] != want[0]) || b.strides[1] != 1 || b.strides[2] != k {
			return fmt.Errorf("ops: %s: e4m3 B has strides %v; want %v (each group's N x K row-major matrix: wgmma reads fp8 B K-major)", op, b.Strides(), want[:])
		}
	} else if err := contiguous(op, "B", "gemm_sm90_grouped", b); err != nil {
		return err
	}
	if err := need16(op, "A", "gemm_sm90_grouped", a); err != nil {
		return err
	}
	if err := need16(op, "B", "gemm_sm90_grouped", b); err != nil {
		return err
	}
	if err := contiguous(op, "D", "gemm_sm90_grouped", d); err != nil {
		return err
	}
	if err := need16(op, "D", "gemm_sm90_grouped", d); err != nil {
		return err
	}
	if err := contiguous(op, idxName, "gemm_sm90_grouped", idx); err != nil {
		return err
	}
	alpha, beta := float32(1), float32(0)
	if o != nil {
		alpha, beta = o.Alpha, o.Beta
	}
	c := ptrOf(d)
	if beta != 0 {
		if err := sameDevice(op, "C (Beta is not 0)", dev, o.C); err != nil {
			return err
		}
		if err := sameShape(op, "C", o.C, "D", d); err != nil {
			return err
		}
		if err := contiguous(op, "C", "gemm_sm90_grouped", o.C); err != nil {
			return err
		}
		if err := need16(op, "C", "gemm_sm90_grouped", o.C); err != nil {
			return err
		}
		if err := apart(op, "C", o.C, "D", d, true); err != nil {
			return err
		}
		c = ptrOf(o.C)
	}
	var sa, sb jit.AnyPtr
	scales := o != nil && (o.ScaleA.buf != nil || o.ScaleB.buf != nil)
	if scales {
		if o.ScaleA.buf == nil || o.ScaleB.buf == nil {
			return fmt.Errorf("ops: %s: set both ScaleA ([rows] f32) and ScaleB ([groups, N] f32), or neither", op)
		}
		for _, x := range []struct {
			name  string
			t     Tensor[float32]
			shape []int
		}{{"ScaleA", o.ScaleA, []int{rows}}, {"ScaleB", o.ScaleB, []int{groups, n}}} {
			if err := sameDevice(op, x.name, dev, x.t); err != nil {
				return err
			}
			if fmt.Sprint(x.t.Shape()) != fmt.Sprint(x.shape) {
				return fmt.Errorf("ops: %s: %s has shape %v; want %v", op, x.name, x.t.Shape(), x.shape)
			}
			if err := contiguous(op, x.name, "gemm_sm90_grouped", x.t); err != nil {
				return err
			}
			if err := need16(op, x.name, "gemm_sm90_grouped", x.t); err != nil {
				return err
			}
			if err := apart(op, x.name, x.t, "D", d, false); err != nil {
				return err
			}
		}
		sa, sb = ptrOf(o.ScaleA), ptrOf(o.ScaleB)
	}
	if err := apart(op, "A", a, "D", d, false); err != nil {
		return err
	}
	if err := apart(op, "B", b, "D", d, false); err != nil {
		return err
	}
	if err := apart(op, idxName, idx, "D", d, false); err != nil {
		return err
	}
	if err := streamOn(op, s, dev); err != nil {
		return err
	}
	st := stateOf(dev)
	if st.gemm != ptx.SM90a {
		return fmt.Errorf("ops: %s: gemm_sm90_grouped needs sm_90a (compute capability 9.0); %s is %s", op, dev.Info().Name, st.gemm)
	}
	key := planKey{op: "grouped_matmul", in: in, out: out, dims: [3]int{rows, n, k}, lds: [4]int{groups}, target: ptx.SM90a}
	if scales {
		key.flags |= 1
	}
	if masked {
		key.flags |= 2
		key.lds[1] = o.Stride
	}
	var force *kernels.GemmSM90GroupedConfig
	if o != nil && o.Config.BN == 0 && o.Config != (kernels.GemmSM90GroupedConfig{}) {
		return fmt.Errorf("ops: %s: GroupedMatmulOptions.Config has BN 0 but other fields set (%s): set BN too, or leave the whole Config zero (the library's pick)", op, o.Config.Name())
	}
	if o != nil && o.Config.BN != 0 {
		cfg := o.Config
		if cfg.In != dsl.Type(in) || cfg.Out != dsl.Type(out) {
			return fmt.Errorf("ops: %s: GroupedMatmulOptions.Config is %s -> %s; A and D are %s and %s", op, cfg.In, cfg.Out, in, out)
		}
		cfg.Scales, cfg.Masked = scales, masked
		if err := cfg.CheckShape(rows, n, k, groups); err != nil {
			return fmt.Errorf("ops: %s: GroupedMatmulOptions.Config: %w", op, err)
		}
		force = &cfg
		key.op += "/" + cfg.Name()
	}
	p := st.lookup(key)
	if p == nil {
		if p, err = planGroupedMatmul(ctx, st, key, force); err != nil {
			if _, ok := err.(refusal); ok {
				return fmt.Errorf("ops: %s: %w", op, err)
			}
			return planFailed(op, dev, err)
		}
	}
	if rows == 0 {
		return nil // no row of any group
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), SharedMem: p.shared, Stream: s, Context: ctx}
	ak := argKey{
		ptr:    [8]jit.DevicePtr{a.Ptr(), b.Ptr(), c.Addr, d.Ptr(), idx.Ptr(), sa.Addr, sb.Addr},
		mem:    [3]*jit.Memory{a.buf.Memory(), b.buf.Memory(), d.buf.Memory()},
		scalar: [2]uint64{uint64(math.Float32bits(alpha)), uint64(math.Float32bits(beta))},
	}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, dev, p.fn, lc, enc)
	}
	tmA, err := tensorMap(st, p.sm90.A, a.buf, a.off)
	if err != nil {
		return planFailed(op, dev, fmt.Errorf("operand A's tensor map: %w", err))
	}
	tmB, err := tensorMap(st, p.sm90.B, b.buf, b.off)
	if err != nil {
		return planFailed(op, dev, fmt.Errorf("operand B's tensor map: %w", err))
	}
	offp := jit.AnyPtr{Elem: ptx.S32} // masked: not read, null
	if !masked {
		offp = ptrOf(offsets)
	}
	args := []any{tmA, tmB, uint32(rows), uint32(n), uint32(k), uint32(groups), offp, alpha, beta, c, ptrOf(d)}
	if p.sm90.HasD {
		tmD, err := tensorMap(st, p.sm90.D, d.buf, d.off)
		if err != nil {
			return planFailed(op, dev, fmt.Errorf("operand D's tensor map: %w", err))
		}
		args = append(args, tmD)
	}
	if scales {
		args = append(args, sa, sb)
	}
	if masked {
		args = append(args, ptrOf(o.Counts), uint32(o.Stride))
	}
	return p.first(op, dev, lc, &ak, args)
}

// planGroupedMatmul chooses (or takes force), builds and loads the grouped gemm of key.
func planGroupedMatmul(ctx context.Context, st *devState, key planKey, force *kernels.GemmSM90GroupedConfig) (*plan, error) {
	rows, n, k, groups := key.dims[0], key.dims[1], key.dims[2], key.lds[0]
	sms := max(st.d.Info().Multiproc, 1)
	var cfg kernels.GemmSM90GroupedConfig
	if force != nil {
		cfg = *force
	} else {
		var err error
		if cfg, err = kernels.GemmSM90GroupedFor(dsl.Type(key.in), dsl.Type(key.out), rows, n, k, groups, sms); err != nil {
			return nil, refusal{err}
		}
	}
	cfg.Scales, cfg.Masked = key.flags&1 != 0, key.flags&2 != 0
	if cfg.Masked {
		if err := cfg.CheckMasked(rows, n, k, groups, key.lds[1]); err != nil {
			return nil, refusal{err}
		}
	}
	l, err := cfg.Launch(rows, n, k, groups, sms)
	if err != nil {
		return nil, refusal{err}
	}
	fn, err := st.function(ctx, cfg.Name(), ptx.SM90a, func(kb *dsl.Kernel) { kernels.GemmSM90Grouped(kb, cfg) })
	if err != nil {
		return nil, err
	}
	p := &plan{fn: fn, name: cfg.Name(), grid: l.Grid, block: l.Block, shared: l.SharedBytes, cluster: 1, sm90: l, kind: gemmSM90}
	st.store(key, p)
	return p, nil
}
