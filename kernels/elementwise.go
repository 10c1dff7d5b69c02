package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// Streaming geometry: blocks of streamThreads threads, each thread moving up to
// streamUnroll 128-bit vectors of every operand per loop step.
const (
	streamThreads = 256
	streamUnroll  = 4
)

func init() {
	register(&Spec{
		Name:   "vector_add",
		Doc:    "c[i] = a[i] + b[i] for i < n; 128-bit vectors, grid-stride loop (any grid; StreamShape: a thread per vector)",
		DTypes: []dsl.Type{dsl.F32, dsl.F16},
		New:    VectorAdd,
	})
	register(&Spec{
		Name:   "axpy",
		Doc:    "y[i] = alpha*x[i] + y[i] for i < n, fused multiply-add; 128-bit vectors, grid-stride loop (any grid; StreamShape: a thread per vector)",
		DTypes: []dsl.Type{dsl.F32, dsl.F16},
		New:    Axpy,
	})
}

// StreamShape is the launch shape of vector_add and axpy over n elements of dt: blocks of
// 256 threads, a thread per 128-bit vector. The kernels are correct with any launch (their
// grid-stride loops cover the rest); measured on an H100 at n = 2^28 (docs/bench.md), this
// one ran 1-2% faster than blocks moving 4 vectors per thread and 6% faster than a grid of 4
// resident blocks per multiprocessor looping over n (the blocks that finish early idle while
// the others end). A type of no size (the zero Type) counts as one byte.
func StreamShape(n int, dt dsl.Type) Shape {
	return Shape{Grid: max(1, ceilDiv(n, streamThreads*16/max(dt.Bytes(), 1))), Block: streamThreads}
}

// VectorAddArgs are vector_add's parameters (launch.VectorAdd on the host).
type VectorAddArgs struct {
	A, B, C dsl.Ptr   // c = a + b, of dt
	N       dsl.Value `kgen:"u32"`
}

// VectorAdd writes c[i] = a[i] + b[i] for every i < n (see streamMap: 128-bit vectors over a
// grid-stride loop, any launch covers any n; StreamShape is the fast one).
func VectorAdd(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[VectorAddArgs](k, dt)
	streamMap(k, dt, a.N, a.C, []dsl.Ptr{a.A, a.B}, func(x []dsl.Value) dsl.Value { return x[0].Add(x[1]) })
}

// AxpyArgs are axpy's parameters (launch.Axpy on the host).
type AxpyArgs struct {
	Alpha dsl.Value // of dt
	X, Y  dsl.Ptr   // of dt
	N     dsl.Value `kgen:"u32"`
}

// Axpy computes y[i] = alpha*x[i] + y[i] (one rounding: fma) for every i < n (see streamMap;
// any launch covers any n; StreamShape is the fast one).
func Axpy(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[AxpyArgs](k, dt)
	streamMap(k, dt, a.N, a.Y, []dsl.Ptr{a.X, a.Y}, func(v []dsl.Value) dsl.Value { return k.FMA(a.Alpha, v[0], v[1]) })
}

// streamMap writes out[i] = f(ins[0][i], ins[1][i], ...) for every i < n, over 128-bit
// vectors of 16/size(dt) elements in a grid-stride loop: each step a thread loads
// streamUnroll vectors of every input (a grid stride apart, so a warp's accesses are
// contiguous) before it computes and stores them; the vectors left when fewer than
// streamUnroll remain go one at a time, and the n mod 16/size(dt) last elements one per
// thread. Pointers are 16-byte aligned (kernel parameters are). Vector indices are 64-bit, so
// any n and any grid work.
func streamMap(k *dsl.Kernel, dt dsl.Type, n dsl.Value, out dsl.Ptr, ins []dsl.Ptr, f func(x []dsl.Value) dsl.Value) {
	v := 16 / max(dt.Bytes(), 1)
	vec := layout.Must(layout.MakeLayout(layout.Int(v)))
	// at views the vector at vector index q of p (a static tensor: one unpredicated access).
	at := func(p dsl.Ptr, q dsl.Value) dsl.Tensor {
		return k.MakeTensor(p.At(k.Assume(q.Mul(uint64(v)), v)), vec)
	}
	step := func(qs []dsl.Value) {
		frags := make([][]dsl.Tensor, len(qs))
		for j, q := range qs {
			for _, p := range ins {
				t := at(p, q)
				fr := k.Fragment(dt, t)
				k.Copy(t, fr)
				frags[j] = append(frags[j], fr)
			}
		}
		for j, q := range qs {
			res := k.Fragment(dt, frags[j][0])
			for e := 0; e < v; e++ {
				x := make([]dsl.Value, len(ins))
				for i := range ins {
					x[i] = frags[j][i].Get(e)
				}
				res.Set(e, f(x))
			}
			k.Copy(res, at(out, q))
		}
	}
	gid := k.GlobalThreadIdx(dsl.X)
	nv := n.Shr(uint32(log2(v))).To(dsl.U64) // whole vectors
	gs := k.GridStride(dsl.X).To(dsl.U64)
	q := k.Var(dsl.U64, gid.To(dsl.U64))
	span := gs.Mul(uint64(streamUnroll - 1))
	lim := k.Select(nv.Gt(span), nv.Sub(span), uint64(0)) // q < lim: all streamUnroll vectors exist
	k.While(func() dsl.Value { return q.Lt(lim) }, func() {
		qs := []dsl.Value{q}
		for j := 1; j < streamUnroll; j++ {
			qs = append(qs, q.Add(gs.Mul(uint64(j))))
		}
		step(qs)
		k.Set(q, q.Add(gs.Mul(uint64(streamUnroll))))
	})
	k.While(func() dsl.Value { return q.Lt(nv) }, func() {
		step([]dsl.Value{q})
		k.Set(q, q.Add(gs))
	})
	whole := n.And(^uint32(v - 1))
	k.If(gid.Lt(n.Sub(whole)), func() {
		i := whole.Add(gid)
		x := make([]dsl.Value, len(ins))
		for j, p := range ins {
			x[j] = k.Load(p.At(i))
		}
		k.Store(out.At(i), f(x))
	})
}

// log2 returns the base-2 logarithm of a power of two.
func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// ceilDiv returns ceil(a / b) for b > 0, 0 for b <= 0.
func ceilDiv(a, b int) int {
	if b <= 0 {
		return 0 // a configuration with an empty tile (its Check refuses it): no tiles, no panic
	}
	if a > 0 {
		return (a-1)/b + 1 // a+b-1 would wrap for a near math.MaxInt
	}
	return (a + b - 1) / b
}

// perGPU is m/ngpus, the rows of one GPU's slice; 0 for a GPU count below 1 (no panic: the
// host's checks refuse the count).
func perGPU(m, ngpus int) int {
	if ngpus < 1 {
		return 0
	}
	return m / ngpus
}
