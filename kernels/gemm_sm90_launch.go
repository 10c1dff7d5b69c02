package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
)

// TMASpec describes one rank-2 TMA tensor map as plain data, for the caller to encode (for
// example with jit.NewTensorMap(buf, Dims[:], Strides[:], Box[:], jit.Swizzle(Swizzle))):
// the element type, the extents innermost first, the byte stride of dimension 1 (dimension 0
// is dense), the box copied per TMA operation and the shared-memory swizzle in bytes. It is
// comparable, so it can key a cache of encoded maps (with the buffer's address).
type TMASpec struct {
	Elem    dsl.Type
	Dims    [2]uint64 // extents in elements, innermost first
	Strides [1]uint64 // bytes between consecutive indices of dimension 1
	Box     [2]uint32 // the box, innermost first
	Swizzle int       // bytes: 0, 32, 64 or 128
}

// GemmSM90Launch is everything a launch of one gemm_sm90 configuration needs for one
// problem: a one-dimensional grid of Grid persistent blocks of Block threads, SharedBytes of
// dynamic shared memory, clusters of Cluster blocks along x (1: no clusters), and the tensor
// maps of A and B (and of D when HasD: the TMA-store epilogue), passed in the order of
// GemmSM90Args then GemmOut then GemmSM90StoreArgs.
type GemmSM90Launch struct {
	Grid, Block int
	SharedBytes int
	Cluster     int
	A, B, D     TMASpec
	HasD        bool // D's map is the last parameter (GemmSM90Config.TMAStore)
}

// Launch returns the launch of c for an M x N x K problem of row-major, densely stored
// matrices (A M x K; B K x N, or N x K for fp8; D M x N) on a GPU of sms multiprocessors:
// Grid(m, n, sms) blocks of Threads() threads, SharedBytes() of shared memory, clusters of
// Cluster(), and the maps GemmSM90 documents (A's (K, M) with TMABoxA, B's TMADimsB with
// TMABoxB, D's (N, M) with TMABoxD; the 128-byte swizzle). A caller with a row stride other
// than the row length (a view into a wider matrix) sets the map's Strides itself; TMA needs
// multiples of 16 bytes.
//
// It returns an error, naming the rule, for a configuration Check refuses, a shape
// CheckShape refuses, or sms < 1.
func (c GemmSM90Config) Launch(m, n, k, sms int) (GemmSM90Launch, error) {
	if err := c.Check(); err != nil {
		return GemmSM90Launch{}, err
	}
	if err := c.CheckShape(m, n, k); err != nil {
		return GemmSM90Launch{}, err
	}
	if sms < 1 {
		return GemmSM90Launch{}, fmt.Errorf("gemm_sm90: %d multiprocessors: want a positive count (the device's)", sms)
	}
	in, out := uint64(c.In.Bytes()), uint64(c.Out.Bytes())
	spec := func(dt dsl.Type, dims [2]int, es uint64, box [2]int) TMASpec {
		return TMASpec{Elem: dt, Dims: [2]uint64{uint64(dims[0]), uint64(dims[1])}, Strides: [1]uint64{uint64(dims[0]) * es},
			Box: [2]uint32{uint32(box[0]), uint32(box[1])}, Swizzle: c.SwizzleBytes()}
	}
	l := GemmSM90Launch{Grid: c.Grid(m, n, sms), Block: c.Threads(), SharedBytes: c.SharedBytes(), Cluster: c.Cluster(),
		A: spec(c.In, [2]int{k, m}, in, c.TMABoxA()), B: spec(c.In, c.TMADimsB(n, k), in, c.TMABoxB())}
	if c.TMAStore {
		l.D, l.HasD = spec(c.Out, [2]int{n, m}, out, c.TMABoxD()), true
	}
	return l, nil
}
