// Package ref runs the library's kernels on the emulator with random inputs and checks every
// result against a plain Go reference. `kgen run` and the tests use it.
package ref

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// Problem is one run of a library kernel.
type Problem struct {
	Kernel string
	DType  dsl.Type   // zero: the kernel's first dtype
	Target ptx.Target // zero: sm_90, or the kernel's first target when it has no sm_90 (fp8 multimem)
	Size   int        // elements (for matrices: rows*cols, made roughly square), 0: a default
	Cols   int        // row kernels (softmax, row_sum): the row length, rows = max(1, Size/Cols); 0: square-ish
	Grid   int        // streaming and row kernels: launch this many blocks (0: the host's launch shape)
	Ranks  int        // simulated GPUs for multi-GPU kernels (0: 1)
	Nodes  int        // simulated nodes the Ranks split into (emu.System.SetNodes; 0: 1)
	// Network is how NVSHMEM's operations travel between the nodes (nil: emu.DefaultNetwork).
	Network *emu.Network
	Seed    int64 // input data and, when non-zero, the emulator's schedule
	Weak    bool  // the emulator's weak-memory mode
	// Epoch is the first epoch of a collective's launches (0: 0); the signal pads and flags
	// start as the barriers before it left them, so a run from just below 2^32 (or from
	// just below kernels.LamportEpochWrap) checks the collectives across the epoch wrap.
	Epoch uint32
}

// MaxEmuSize bounds Problem.Size and Problem.Cols (2^28 elements, the 256 MiB of `kgen run`
// in 1-byte elements), so that a huge problem is refused before anything is allocated.
const MaxEmuSize = 1 << 28

// Result says what ran and how far the output was from the reference.
type Result struct {
	Kernel   string
	DType    dsl.Type
	Shape    string  // the problem shape, e.g. "n=4099" or "37x65"
	Checked  int     // output elements compared
	MaxError float64 // the largest error relative to the tolerance's scale
	// WarpInstructions is the kernel's warp instructions on the emulator (emu.Stats), where
	// the harness reports them (RunGemmSM90Grouped); 0 elsewhere.
	WarpInstructions int64
}

func (r Result) String() string {
	return fmt.Sprintf("%s %s %s: %d elements match the Go reference (max error %.3g)", r.Kernel, r.DType, r.Shape, r.Checked, r.MaxError)
}

// harness launches one kernel on the system and checks the result.
type harness func(h *run) error

var harnesses = map[string]harness{}

// ownMachine holds, for the harnesses that do not run on Run's system of Ranks GPUs in
// Nodes nodes (single-GPU kernels, and the fused GEMMs, whose checks make a machine of
// their own), why Nodes does not reach them.
var ownMachine = map[string]string{}

// register adds the check of one library kernel (from an init function of the file that
// holds it) that runs on Run's system, so Problem.Nodes splits its GPUs.
func register(name string, h harness) {
	if _, dup := harnesses[name]; dup {
		panic("ref: duplicate harness " + name) // a programming error in this package
	}
	harnesses[name] = h
}

// registerOwn adds a check that runs on a machine of its own (why says which), which
// Problem.Nodes does not reach: Run refuses Nodes > 1 for it.
func registerOwn(name, why string, h harness) {
	register(name, h)
	ownMachine[name] = why
}

// Single-GPU and fused checks: why Problem.Nodes does not reach them.
const (
	oneGPU    = "a single-GPU kernel, run on one emulated device"
	ownFused  = "a fused GEMM, whose check makes a machine of its own (one node of Ranks GPUs)"
	nodesRule = "Nodes applies to the collective kernels, which run on the Ranks GPUs split into Nodes nodes"
)

// SpansNodes reports whether kernel's check runs on the Problem's Ranks GPUs split into
// Problem.Nodes nodes; when not, why says what it runs on (Run refuses Nodes > 1 for it).
func SpansNodes(kernel string) (ok bool, why string) {
	if w, own := ownMachine[kernel]; own {
		return false, w
	}
	return true, ""
}

// SingleGPU reports whether kernel's check runs on one emulated device of its own: Problem's
// Ranks (above 1), Nodes and Weak (which delays only stores to other GPUs) would not be
// exercised, and Run refuses them.
func SingleGPU(kernel string) bool { return ownMachine[kernel] == oneGPU }

// Kernels lists the kernels Run can check.
func Kernels() []string {
	var out []string
	for n := range harnesses {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// run is the state of one check.
type run struct {
	p     Problem
	spec  *kernels.Spec
	mod   *ptx.Module
	built *kernels.Built // mod with its entry and declared parameters
	sys   *emu.System
	rng   *rand.Rand
	res   Result
}

// Run builds the kernel, runs it on the emulator and checks it. The error says what differs.
func Run(p Problem) (Result, error) {
	spec, err := kernels.Lookup(p.Kernel)
	if err != nil {
		return Result{}, err
	}
	h, ok := harnesses[p.Kernel]
	if !ok {
		return Result{}, fmt.Errorf("kernel %s has no emulator check yet (checked: %s)", p.Kernel, strings.Join(Kernels(), ", "))
	}
	if p.DType == 0 {
		p.DType = spec.DTypes[0]
	}
	if p.Target == "" {
		p.Target = DefaultTarget(spec)
	}
	if p.Ranks == 0 {
		p.Ranks = 1
	}
	for _, c := range []struct {
		field string
		v     int
		def   string
	}{{"Ranks", p.Ranks, "1"}, {"Nodes", p.Nodes, "1"}, {"Grid", p.Grid, "the host's launch shape"}} {
		if err := count(p.Kernel, "Problem."+c.field, c.v, c.def); err != nil {
			return Result{}, err
		}
	}
	if p.Size < 0 || p.Size > MaxEmuSize {
		return Result{}, fmt.Errorf("Problem.Size %d: want 0 (the default) to %d elements (MaxEmuSize: the harness keeps float64 copies on the CPU)", p.Size, MaxEmuSize)
	}
	if p.Cols < 0 || p.Cols > MaxEmuSize {
		return Result{}, fmt.Errorf("Problem.Cols %d: want 0 (square-ish) to %d elements (MaxEmuSize)", p.Cols, MaxEmuSize)
	}
	if spec.MaxGPUs > 0 && p.Ranks > spec.MaxGPUs {
		return Result{}, fmt.Errorf("%s on %d GPUs: it is built for at most %d (kernels.Spec.MaxGPUs)", p.Kernel, p.Ranks, spec.MaxGPUs)
	}
	if ok, why := SpansNodes(p.Kernel); !ok && p.Nodes > 1 {
		return Result{}, fmt.Errorf("%s with %d nodes: %s, so the nodes would not be exercised; %s", p.Kernel, p.Nodes, why, nodesRule)
	}
	if SingleGPU(p.Kernel) && (p.Ranks > 1 || p.Weak) {
		what := fmt.Sprintf("Ranks %d", p.Ranks)
		if p.Ranks <= 1 {
			what = "Weak (it delays only stores to other GPUs)"
		}
		return Result{}, fmt.Errorf("%s with %s: %s, so it would not be exercised", p.Kernel, what, oneGPU)
	}
	b, err := spec.BuildVariant(kernels.Config{Target: p.Target, DType: p.DType})
	if err != nil {
		return Result{}, err
	}
	sys, err := emu.New(p.Ranks)
	if err != nil {
		return Result{}, err
	}
	if p.Nodes > 1 {
		if err := sys.SetNodes(p.Nodes); err != nil {
			return Result{}, err
		}
	}
	if p.Network != nil {
		if err := sys.SetNetwork(*p.Network); err != nil {
			return Result{}, err
		}
	}
	r := &run{p: p, spec: spec, mod: b.Module, built: b, sys: sys, rng: rand.New(rand.NewSource(p.Seed + 1)),
		res: Result{Kernel: p.Kernel, DType: p.DType}}
	if err := h(r); err != nil {
		return r.res, fmt.Errorf("%s %s: %w", p.Kernel, p.DType, err)
	}
	if p.Nodes > 1 && sys.LastStats().Blocks == 0 {
		// A harness registered with register that made a machine of its own: its result
		// says nothing about the nodes.
		return r.res, fmt.Errorf("%s %s: the check launched nothing on the %d GPUs in %d nodes, so it says nothing about them (register it with registerOwn)", p.Kernel, p.DType, p.Ranks, p.Nodes)
	}
	return r.res, nil
}

// DefaultTarget is the target a kernel runs for when the problem names none: sm_90, or the
// kernel's first target when it does not support sm_90 (the sm_100a-only fp8 multimem
// kernels); "" for a nil Spec.
func DefaultTarget(s *kernels.Spec) ptx.Target {
	if s == nil {
		return ""
	}
	if slices.Contains(s.Targets, ptx.SM90) || len(s.Targets) == 0 {
		return ptx.SM90
	}
	return s.Targets[0]
}

func (r *run) size(def int) int {
	if r.p.Size > 0 {
		return r.p.Size
	}
	return def
}

// random returns n values exactly representable in the kernel's dtype.
func (r *run) random(dt dsl.Type, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := lo + (hi-lo)*r.rng.Float64()
		if dt == dsl.U8 {
			x = float64(r.rng.Intn(256))
		}
		v[i] = round(dt, x)
	}
	return v
}

func round(dt dsl.Type, v float64) float64 {
	switch dt {
	case dsl.F16:
		return float64(fp.F16ToF32(fp.F32ToF16(float32(v))))
	case dsl.BF16:
		return float64(fp.BF16ToF32(fp.F32ToBF16(float32(v))))
	case dsl.F32:
		return float64(float32(v))
	case dsl.E4M3:
		b, _ := fp.F64ToE4M3(v)
		return fp.E4M3ToF64(b)
	case dsl.E5M2:
		b, _ := fp.F64ToE5M2(v)
		return fp.E5M2ToF64(b)
	}
	return v
}

func write(s *emu.System, addr uint64, dt dsl.Type, v []float64) error {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	switch dt {
	case dsl.F32:
		return emu.WriteSlice(s, addr, f)
	case dsl.F16:
		return emu.WriteF16(s, addr, f)
	case dsl.BF16:
		return emu.WriteBF16(s, addr, f)
	case dsl.U8:
		b := make([]uint8, len(v))
		for i, x := range v {
			b[i] = uint8(x)
		}
		return emu.WriteSlice(s, addr, b)
	case dsl.E4M3, dsl.E5M2:
		b := make([]uint8, len(v))
		for i, x := range v {
			if dt == dsl.E4M3 {
				b[i], _ = fp.F64ToE4M3(x)
			} else {
				b[i], _ = fp.F64ToE5M2(x)
			}
		}
		return emu.WriteSlice(s, addr, b)
	}
	return fmt.Errorf("no host writer for %s", dt)
}

func read(s *emu.System, addr uint64, dt dsl.Type, n int) ([]float64, error) {
	var f []float32
	var err error
	switch dt {
	case dsl.F32:
		f, err = emu.ReadSlice[float32](s, addr, n)
	case dsl.F16:
		f, err = emu.ReadF16(s, addr, n)
	case dsl.BF16:
		f, err = emu.ReadBF16(s, addr, n)
	case dsl.U8, dsl.E4M3, dsl.E5M2:
		b, err := emu.ReadSlice[uint8](s, addr, n)
		out := make([]float64, len(b))
		for i, x := range b {
			switch dt {
			case dsl.E4M3:
				out[i] = fp.E4M3ToF64(x)
			case dsl.E5M2:
				out[i] = fp.E5M2ToF64(x)
			default:
				out[i] = float64(x)
			}
		}
		return out, err
	default:
		return nil, fmt.Errorf("no host reader for %s", dt)
	}
	out := make([]float64, len(f))
	for i, x := range f {
		out[i] = float64(x)
	}
	return out, err
}

// check compares got with want: |got-want| <= atol + rtol*|want| element by element.
func (r *run) check(name string, got, want []float64, atol, rtol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, want %d", name, len(got), len(want))
	}
	bad := 0
	var first string
	for i := range want {
		d := math.Abs(got[i] - want[i])
		tol := atol + rtol*math.Abs(want[i])
		if tol > 0 {
			r.res.MaxError = math.Max(r.res.MaxError, d/tol)
		}
		if !(d <= tol) { // NaN fails too
			if bad == 0 {
				first = fmt.Sprintf("%s[%d] = %v, want %v", name, i, got[i], want[i])
			}
			bad++
		}
	}
	r.res.Checked += len(want)
	if bad > 0 {
		return fmt.Errorf("%d of %d values differ; first: %s", bad, len(want), first)
	}
	return nil
}

// ulpTol returns a relative tolerance of a few units in the last place of dt.
func ulpTol(dt dsl.Type, ulps float64) float64 {
	switch dt {
	case dsl.F16:
		return ulps * 0x1p-10
	case dsl.BF16:
		return ulps * 0x1p-7
	case dsl.F32:
		return ulps * 0x1p-23
	}
	return 0
}

func ceil(a, b int) int { return (a + b - 1) / b }

// matrix picks a rows x cols shape of about size elements that is not a tile multiple.
func matrix(size int) (rows, cols int) {
	rows = int(math.Sqrt(float64(size)))
	if rows < 1 {
		rows = 1
	}
	cols = max(ceil(size, rows), 1)
	return rows, cols
}
