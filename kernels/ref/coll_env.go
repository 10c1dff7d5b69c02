package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// Shared machinery of the collective harnesses (coll_p2p.go, coll_mm.go): symmetric
// buffers, peer tables, collective launches on every simulated GPU, exact references.

// collLaunches is how many times each harness launches its kernel in a row, with no host
// reset of the signal pads, flags or Lamport slots in between (the epochs do the work).
const collLaunches = 3

// coll is the state of one collective check.
type coll struct {
	r     *run
	dt    dsl.Type
	g     int // GPUs
	epoch uint32
}

func newColl(r *run) *coll { return &coll{r: r, dt: r.p.DType, g: r.sys.NumGPUs(), epoch: r.p.Epoch} }

// fill writes v into every word of every GPU's copy of the u32 buffer m of n words.
func (c *coll) fill(m *emu.Symmetric, n int, v uint32) error {
	if v == 0 {
		return nil // fresh symmetric memory is zero
	}
	words := make([]uint32, n)
	for i := range words {
		words[i] = v
	}
	for g := 0; g < c.g; g++ {
		if err := emu.WriteSlice(c.r.sys, m.On(g), words); err != nil {
			return err
		}
	}
	return nil
}

// sym allocates a symmetric buffer of n elements of dt, rounded up to 16 bytes (the
// collectives read whole 128-bit vectors).
func (c *coll) sym(dt dsl.Type, n int) (*emu.Symmetric, error) {
	b := (max(n, 1)*dt.Bytes() + 15) / 16 * 16
	return c.r.sys.MallocSymmetric(b)
}

// table allocates a symmetric table of CollMaxGPUs addresses holding every GPU's copy of m.
func (c *coll) table(m *emu.Symmetric) (*emu.Symmetric, error) {
	t, err := c.r.sys.MallocSymmetric(8 * kernels.CollMaxGPUs)
	if err != nil {
		return nil, err
	}
	addrs := make([]uint64, kernels.CollMaxGPUs)
	for g := 0; g < c.g; g++ {
		addrs[g] = m.On(g)
	}
	for g := 0; g < c.g; g++ {
		if err := emu.WriteSlice(c.r.sys, t.On(g), addrs); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// blocks picks a small grid for n elements: enough to exercise several blocks, few enough
// for the emulator.
func (c *coll) blocks(n int) int {
	return min(max((n+kernels.CollThreads*4-1)/(kernels.CollThreads*4), 1), 3)
}

// launch runs the run's kernel on every GPU, GPU g with the host twin args(g).
func (c *coll) launch(blocks int, args func(g int) any) error {
	return c.launchMod(c.r.mod, c.r.spec.VariantName(c.dt), blocks, args)
}

// launchMod runs entry of m (the run's kernel, or a variant of it built by a test) on every
// GPU with the host twins args(g), checked against the parameters (and, for the run's own
// kernel, the element types its builder declared).
func (c *coll) launchMod(m *ptx.Module, name string, blocks int, args func(g int) any) error {
	return c.launchModShared(m, name, blocks, 0, args)
}

// launchModShared is launchMod with shared bytes of dynamic shared memory per block.
func (c *coll) launchModShared(m *ptx.Module, name string, blocks, shared int, args func(g int) any) error {
	fn, err := entry(m, name)
	if err != nil {
		return err
	}
	var info []dsl.ParamInfo
	if m == c.r.mod && c.r.built != nil {
		info = c.r.built.Params
	}
	all := make([][]any, c.g)
	for g := range all {
		if all[g], err = emuArgs(fn, info, args(g)); err != nil {
			return err
		}
	}
	return c.r.sys.Launch(emu.Launch{
		Module: m, Entry: name, GPUs: c.r.sys.All(), Grid: emu.D1(blocks), Block: emu.D1(kernels.CollThreads), SharedBytes: shared,
		ArgsFor: func(g int) []any { return all[g] }, Options: emu.Options{Seed: c.r.p.Seed, Weak: c.r.p.Weak},
	})
}

// inputs returns one random input per GPU: multiples of 1/8 in [-8, 8] for floats (their
// sums over up to 8 GPUs are exact in f32, so the reference is exact whatever the order),
// full-range values for integers (sums wrap), and for fp8 any finite value of the format up
// to its largest finite value / ngpus (fp8Input: sums round, but never overflow).
func (c *coll) inputs(n int) [][]float64 {
	out := make([][]float64, c.g)
	for g := range out {
		out[g] = make([]float64, n)
		for i := range out[g] {
			if c.dt == dsl.E4M3 || c.dt == dsl.E5M2 {
				out[g][i] = c.fp8Input()
				continue
			}
			if c.dt.IsInt() {
				out[g][i] = float64(int32(c.r.rng.Uint32()))
			} else {
				out[g][i] = float64(c.r.rng.Intn(129)-64) / 8
			}
		}
	}
	return out
}

// fp8Input returns a random finite fp8 value of c.dt (a random bit pattern: every exponent,
// subnormals and both zeros) whose magnitude is at most the format's largest finite value
// divided by the GPU count.
func (c *coll) fp8Input() float64 {
	dec, top := fp.E4M3ToF64, 448.0
	if c.dt == dsl.E5M2 {
		dec, top = fp.E5M2ToF64, 57344.0
	}
	for {
		x := dec(uint8(c.r.rng.Intn(256)))
		if !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) <= top/float64(c.g) {
			return x
		}
	}
}

// roundF16 rounds x to the nearest f16 value, ties to even (±Inf past the largest finite).
func roundF16(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	e := max(math.Ilogb(x), -14) // f16: 10 fraction bits, smallest normal 2^-14
	q := math.Ldexp(1, e-10)
	r := math.RoundToEven(x/q) * q
	if math.Abs(r) > 65504 {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// reduce is the reference: op over the GPUs' inputs, rounded once to dt (integers wrap).
// fp8 sums are multimem's .acc::f16: summed in f16 in GPU order, rounding to nearest even
// at each step, then rounded to the fp8 type.
func (c *coll) reduce(op dsl.ReduceOp, in [][]float64, i int) float64 {
	if (c.dt == dsl.E4M3 || c.dt == dsl.E5M2) && op == dsl.Sum {
		acc := in[0][i]
		for g := 1; g < len(in); g++ {
			acc = roundF16(acc + in[g][i])
		}
		return round(c.dt, acc)
	}
	if c.dt.IsInt() {
		acc := int32(in[0][i])
		for g := 1; g < len(in); g++ {
			x := int32(in[g][i])
			switch op {
			case dsl.Min:
				acc = min(acc, x)
			case dsl.Max:
				acc = max(acc, x)
			default:
				acc += x
			}
		}
		return float64(acc)
	}
	acc := in[0][i]
	for g := 1; g < len(in); g++ {
		switch op {
		case dsl.Min:
			acc = math.Min(acc, in[g][i])
		case dsl.Max:
			acc = math.Max(acc, in[g][i])
		default:
			acc += in[g][i]
		}
	}
	return round(c.dt, acc)
}

func (c *coll) write(addr uint64, v []float64) error {
	if c.dt == dsl.I32 {
		x := make([]int32, len(v))
		for i, f := range v {
			x[i] = int32(f)
		}
		return emu.WriteSlice(c.r.sys, addr, x)
	}
	return write(c.r.sys, addr, c.dt, v)
}

func (c *coll) read(addr uint64, n int) ([]float64, error) {
	if c.dt == dsl.I32 {
		x, err := emu.ReadSlice[int32](c.r.sys, addr, n)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out, err
	}
	return read(c.r.sys, addr, c.dt, n)
}

// expect checks GPU g's n elements at addr against want.
func (c *coll) expect(what string, g int, addr uint64, want []float64) error {
	got, err := c.read(addr, len(want))
	if err != nil {
		return err
	}
	return c.r.check(fmt.Sprintf("epoch %d: GPU %d %s", c.epoch, g, what), got, want, 0, 0)
}

// advance adds to the epoch the barriers a launch of the run's kernel completes (none for
// kernels that are not p2p or multimem collectives).
func (c *coll) advance() {
	if n, _, ok := kernels.CollBarriers(c.r.spec.Family); ok {
		c.epoch += uint32(n)
	}
}

// graph reports whether the run's kernel is a graph variant, which keeps its epoch on the
// device (kernels.IsGraphFamily); tests that launch kernels of their own have no spec.
func (c *coll) graph() bool { return c.r.spec != nil && kernels.IsGraphFamily(c.r.spec.Family) }

// arg is a launch's Epoch argument: the host's epoch, or for a graph variant (which must
// ignore it) the same value on every launch, as a graph's capture freezes it, a quarter of the u32
// circle ahead of the device epoch: a variant that used it would wait for a barrier no
// GPU reaches, and the emulator would report the deadlock.
func (c *coll) arg() uint32 {
	if c.graph() {
		return c.r.p.Epoch + 1<<30
	}
	return c.epoch
}

// graphSet allocates a graph variant's pad or flag set of words u32 words: every slot
// before the epoch words (at epochWord) filled with slot, every epoch word with the epoch.
func (c *coll) graphSet(words, epochWord int, slot uint32) (*emu.Symmetric, error) {
	m, err := c.sym(dsl.U32, words)
	if err != nil {
		return nil, err
	}
	v := make([]uint32, words)
	for i := range v {
		v[i] = slot
		if i >= epochWord {
			v[i] = c.epoch
		}
	}
	for g := 0; g < c.g; g++ {
		if err := emu.WriteSlice(c.r.sys, m.On(g), v); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func newRng(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed + 1)) }
