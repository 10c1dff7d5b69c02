package ops

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// The per-device cache. A device's state holds its loaded kernels (one module per kernel
// name and target, built and loaded by the first call that needs it while later callers wait for it),
// its plans (a kernel and its launch per op, dtypes, shape and strides: a call that repeats
// its shapes does no more than a map lookup before the launch), its encoded tensor maps and
// the split-row kernels' scratch. A call that finds the device closed forgets its state.

// devices maps *jit.Device to its *devState.
var devices sync.Map

// devState is one device's cache.
type devState struct {
	d       *jit.Device
	target  ptx.Target // deviceTarget(d)
	gemm    ptx.Target // Matmul's default target: sm_90a on compute capability 9.0, else target
	mu      sync.Mutex
	fns     map[fnKey]*built
	plans   map[planKey]*plan
	tmaps   map[tmapKey]any // jit.TensorMap, boxed once for Launch's ...any
	scratch map[scratchKey]*jit.Buffer[uint32]
}

// built is one kernel's module, loaded once; done closes when fn or err is set.
type built struct {
	done chan struct{}
	mod  *jit.Module
	fn   *jit.Function
	err  error
}

// fnKey names a loaded kernel: its name and the target it was built for (one name may be
// built for several: MatmulOptions.Target).
type fnKey struct {
	name   string
	target ptx.Target
}

// planKey is everything that decides an op's kernel and launch.
type planKey struct {
	op      string
	in, out ptx.Type
	dims    [3]int
	lds     [4]int
	flags   uint32
	target  ptx.Target
	epi     kernels.Epilogue // Matmul's epilogue options
}

// plan is a chosen kernel and its launch.
type plan struct {
	fn          *jit.Function
	name        string
	grid, block int
	shared      int
	cluster     int
	coResident  bool
	split       kernels.SplitShape // the split-row kernels' (coResident)
	sm90        kernels.GemmSM90Launch
	attn        kernels.AttentionSM90Launch
	kind        int                  // which argument list the op passes (per op)
	rows, cols  int                  // the row kernels' matrix
	lse         *jit.Buffer[float32] // Attention's LSE for calls that pass none

	last atomic.Pointer[callArgs] // the encoded arguments of the last call
}

// callArgs is a call's kernel arguments, checked and encoded once (jit.Function.Encode), and
// the operands they were made from.
type callArgs struct {
	key  argKey
	args *jit.Args
}

// argKey is what an op's kernel arguments are made from beyond its plan's key: the
// operands' addresses, the allocations of those the arguments encode a tensor map of (a
// map refers to its allocation), the scalars' bits and the stream (whose scratch the split
// kernels take). Two calls with one argKey pass the same arguments.
type argKey struct {
	ptr    [8]jit.DevicePtr
	mem    [3]*jit.Memory
	scalar [2]uint64
	s      *jit.Stream
}

// cached returns the encoded arguments of the plan's last call when it had key k, else nil.
func (p *plan) cached(k *argKey) *jit.Args {
	if c := p.last.Load(); c != nil && c.key == *k {
		return c.args
	}
	return nil
}

// first launches the plan's kernel for a call whose key k has no encoded arguments yet:
// it encodes args (checking them as jit's Launch does), keeps them as key k's and launches.
func (p *plan) first(op string, d *jit.Device, lc jit.LaunchConfig, k *argKey, args []any) error {
	enc, err := p.fn.Encode(args...)
	if err != nil {
		return closedErr(op, d, err)
	}
	p.last.Store(&callArgs{key: *k, args: enc})
	return launch(op, d, p.fn, lc, enc)
}

// tmapKey is an encoded tensor map: its spec, the address it starts at and the allocation
// it lies in (a map refers to its allocation: one freed and another at the same address
// takes a new map).
type tmapKey struct {
	spec kernels.TMASpec
	at   jit.DevicePtr
	mem  *jit.Memory
}

// scratchKey is one stream's scratch of a size.
type scratchKey struct {
	s     *jit.Stream
	words int
}

// maxPlans bounds a device's plans (and, alike, its tensor maps): when full they start over.
const maxPlans = 4096

// stateOf returns d's cache.
func stateOf(d *jit.Device) *devState {
	if st, ok := devices.Load(d); ok {
		return st.(*devState)
	}
	target, gemm := deviceTarget(d), deviceTarget(d)
	if d.Info().SM == 90 {
		gemm = ptx.SM90a
	}
	st, _ := devices.LoadOrStore(d, &devState{d: d, target: target, gemm: gemm, fns: map[fnKey]*built{}, plans: map[planKey]*plan{},
		tmaps: map[tmapKey]any{}, scratch: map[scratchKey]*jit.Buffer[uint32]{}})
	return st.(*devState)
}

// isClosed reports whether d was closed: Alloc(0) names ErrClosed first on a closed device
// and refuses the size on an open one, touching nothing.
func isClosed(d *jit.Device) bool {
	_, err := d.Alloc(0)
	return errors.Is(err, jit.ErrClosed)
}

// forget drops d's cache (its device was closed: its modules went with it).
func forget(d *jit.Device) { devices.Delete(d) }

// closedErr returns op's error for err: one wrapping jit.ErrClosed when d is closed
// (forgetting its cache), else err, each prefixed once with the op.
func closedErr(op string, d *jit.Device, err error) error {
	if isClosed(d) {
		forget(d)
		if !errors.Is(err, jit.ErrClosed) {
			return fmt.Errorf("ops: %s: the device is %w (%v)", op, jit.ErrClosed, err)
		}
	}
	return fmt.Errorf("ops: %s: %w", op, err)
}

// lookup returns the plan of key, if made.
func (st *devState) lookup(key planKey) *plan {
	st.mu.Lock()
	p := st.plans[key]
	st.mu.Unlock()
	return p
}

// store keeps p as key's plan.
func (st *devState) store(key planKey, p *plan) {
	st.mu.Lock()
	if len(st.plans) >= maxPlans {
		st.plans = map[planKey]*plan{}
	}
	st.plans[key] = p
	st.mu.Unlock()
}

// function returns the loaded kernel name, building it with write (into a kernel for target)
// and loading it on first use; concurrent callers of the same name wait for the first one,
// or for ctx. A failed build is not kept: the next call tries again.
func (st *devState) function(ctx context.Context, name string, target ptx.Target, write func(k *dsl.Kernel)) (*jit.Function, error) {
	key := fnKey{name, target}
	st.mu.Lock()
	b, ok := st.fns[key]
	if !ok {
		b = &built{done: make(chan struct{})}
		st.fns[key] = b
	}
	st.mu.Unlock()
	if ok {
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if b.err != nil {
			return nil, b.err
		}
		return b.fn, nil
	}
	b.mod, b.fn, b.err = load(st.d, name, target, write)
	if b.err != nil {
		st.mu.Lock()
		delete(st.fns, key)
		st.mu.Unlock()
	}
	close(b.done)
	return b.fn, b.err
}

// load builds a kernel and loads it on d.
func load(d *jit.Device, name string, target ptx.Target, write func(k *dsl.Kernel)) (*jit.Module, *jit.Function, error) {
	k := dsl.New(name, dsl.WithTarget(target))
	write(k)
	mod, err := k.Build()
	if err != nil {
		return nil, nil, fmt.Errorf("ops: building %s: %w", name, err)
	}
	m, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(k.Params())}})
	if err != nil {
		return nil, nil, err
	}
	fn, err := m.Function(name)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, fn, nil
}

// registered returns the loaded library kernel id (kernels.Find) for target, built as the
// registry builds it.
func (st *devState) registered(ctx context.Context, id kernels.ID, target ptx.Target) (*jit.Function, string, error) {
	spec, err := kernels.Find(id)
	if err != nil {
		return nil, "", err
	}
	name := spec.VariantName(id.DType)
	key := fnKey{name, target}
	st.mu.Lock()
	b, ok := st.fns[key]
	if !ok {
		b = &built{done: make(chan struct{})}
		st.fns[key] = b
	}
	st.mu.Unlock()
	if ok {
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return b.fn, name, b.err
	}
	b.err = func() error {
		v, err := spec.BuildVariant(kernels.Config{Target: target, DType: id.DType})
		if err != nil {
			return err
		}
		m, err := st.d.Load(jit.Source{Module: v.Module, Params: map[string][]jit.ParamInfo{v.Entry: jit.ParamInfos(v.Params)}})
		if err != nil {
			return err
		}
		b.mod = m
		b.fn, err = m.Function(v.Entry)
		return err
	}()
	if b.err != nil {
		st.mu.Lock()
		delete(st.fns, key)
		st.mu.Unlock()
	}
	close(b.done)
	return b.fn, name, b.err
}

// tensorMap returns the map of spec over buf from element off (encoded once per address),
// as a Launch argument.
func tensorMap[T jit.Elem](st *devState, spec kernels.TMASpec, buf *jit.Buffer[T], off int) (any, error) {
	key := tmapKey{spec, buf.DevPtr().Add(int64(off) * int64(elemBytes[T]())), buf.Memory()}
	st.mu.Lock()
	tm, ok := st.tmaps[key]
	st.mu.Unlock()
	if ok {
		return tm, nil
	}
	return newTensorMap(st, key, spec, buf, off)
}

// newTensorMap encodes and keeps key's map (tensorMap's miss: spec escapes here only).
func newTensorMap[T jit.Elem](st *devState, key tmapKey, spec kernels.TMASpec, buf *jit.Buffer[T], off int) (any, error) {
	var opts []jit.TensorMapOption
	if off > 0 {
		opts = append(opts, jit.WithOffset(uint64(off)))
	}
	m, err := jit.NewTensorMap(buf, spec.Dims[:], spec.Strides[:], spec.Box[:], jit.Swizzle(spec.Swizzle), opts...)
	if err != nil {
		return nil, err
	}
	var tm any = m
	st.mu.Lock()
	if len(st.tmaps) >= maxPlans {
		st.tmaps = map[tmapKey]any{}
	}
	st.tmaps[key] = tm
	st.mu.Unlock()
	return tm, nil
}

// scratchFor returns stream s's zeroed scratch of at least words u32 words (allocated and
// zeroed on first use; the split kernels leave it ready for the next launch). Launches on
// one stream run in order, so they share it safely; each stream has its own. Sizes are
// rounded up to a power of two: a few buffers a stream however many shapes its calls take
// (none is freed: a captured graph may use it).
func (st *devState) scratchFor(s *jit.Stream, words int) (*jit.Buffer[uint32], error) {
	words = ceilPow2(words)
	key := scratchKey{s, words}
	st.mu.Lock()
	b, ok := st.scratch[key]
	st.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := jit.Alloc[uint32](st.d, words)
	if err != nil {
		return nil, err
	}
	if err := b.CopyFromHost(make([]uint32, words)); err != nil {
		b.Free()
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if had, ok := st.scratch[key]; ok { // another call made it meanwhile
		b.Free()
		return had, nil
	}
	st.scratch[key] = b
	return b, nil
}

// ceilPow2 returns the least power of two >= n (n >= 1).
func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// Kernels lists, sorted, the kernels ops has loaded on d (one entry name each): what the
// calls so far chose.
func Kernels(d *jit.Device) []string {
	v, ok := devices.Load(d)
	if !ok {
		return nil
	}
	st := v.(*devState)
	st.mu.Lock()
	names := make([]string, 0, len(st.fns))
	for k, b := range st.fns {
		select {
		case <-b.done:
			if b.err == nil {
				names = append(names, k.name)
			}
		default:
		}
	}
	st.mu.Unlock()
	sort.Strings(names)
	return slices.Compact(names) // a name built for two targets is listed once
}
