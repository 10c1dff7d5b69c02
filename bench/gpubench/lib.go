package main

// gpubench lib: every single-GPU library kernel at the shapes of docs/bench.md, each launched
// with the shape the host uses (kernels.StreamShape, SoftmaxShape, RowSumShape,
// SplitRowShape co-resident, the tiled copy's and transpose's grids), its output checked
// against a host reference once, then timed: CUDA events around each launch, the median of
// -reps launches after 3 warm-ups. At the long-row shapes both kernels of a row family run
// (softmax and softmax_split, row_sum and row_sum_split). It prints tab-separated lines
//
//	kgen    KERNEL DTYPE SHAPE LAUNCH US BYTES CHOICE (a kernel at its default launch)
//	sweep   KERNEL DTYPE SHAPE LAUNCH US BYTES        (-sweep: the same kernel at other launches)
//	memcpy  copy   u8    BYTES -      US BYTES        (cuMemcpyDtoD of 64 MiB .. 1 GiB; 1 GiB gives
//	                                                  the copy bandwidth)
//
// SHAPE is n or RxC, LAUNCH GRIDxBLOCK (GRIDxBLOCK/PARTS for a split-row kernel: PARTS
// blocks a row), BYTES what the kernel must read plus write, CHOICE for a row kernel
// "chosen" when kernels.ChooseRowKernel picks it for this shape on this GPU, else "other"
// ("-" for the other kernels).
// bench/gpubench/torch_lib.py reads these lines, times PyTorch's equivalent of each kgen
// line in the same process order on the same GPU, and prints the table of docs/bench.md.

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// libCase is one kernel, element type and shape: n, or rows and cols (m and n for transpose).
type libCase struct {
	kernel string
	dt     dsl.Type
	dims   []int
}

func (c libCase) shape() string {
	if len(c.dims) == 1 {
		return fmt.Sprint(c.dims[0])
	}
	return fmt.Sprintf("%dx%d", c.dims[0], c.dims[1])
}

// libCases are the benchmark's cases (issue 20's shapes).
func libCases() []libCase {
	var cs []libCase
	for _, dt := range []dsl.Type{dsl.F32, dsl.F16} {
		cs = append(cs, libCase{"tiled_copy", dt, []int{1 << 28}})
	}
	for _, dt := range []dsl.Type{dsl.F32, dsl.F16} {
		cs = append(cs, libCase{"transpose", dt, []int{8192, 8192}})
	}
	for _, k := range []string{"vector_add", "axpy"} {
		for _, dt := range []dsl.Type{dsl.F32, dsl.F16} {
			cs = append(cs, libCase{k, dt, []int{1 << 28}})
		}
	}
	for _, k := range []string{"softmax", "row_sum"} {
		for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.BF16} {
			for _, rc := range [][]int{{8192, 4096}, {4096, 32768}, {32768, 1024}} {
				cs = append(cs, libCase{k, dt, rc})
			}
		}
	}
	// Long rows (2^24 elements each): both kernels of each family, whichever the host
	// picks (the line's CHOICE field says which).
	for _, k := range []string{"softmax", "row_sum"} {
		for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.BF16} {
			for _, rc := range [][]int{{256, 65536}, {64, 262144}, {16, 1 << 20}, {8, 1 << 21}} {
				cs = append(cs, libCase{k, dt, rc}, libCase{k + "_split", dt, slices.Clone(rc)})
			}
		}
	}
	return cs
}

// scaled divides the case's elements by div (at least one left): n, or the rows and, once
// one row is left, the columns.
func (c libCase) scaled(div int) libCase {
	d := slices.Clone(c.dims)
	if len(d) == 2 && d[0] < div && c.kernel != "transpose" {
		d[1] = max(1, d[1]/(div/max(d[0], 1)))
	}
	d[0] = max(1, d[0]/div)
	return libCase{c.kernel, c.dt, d}
}

func runLib(args []string) error { return lib(os.Stdout, args) }

// lib runs gpubench lib with the given flags, writing its lines to w.
func lib(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("lib", flag.ExitOnError)
	reps := fs.Int("reps", 30, "timed launches per case (after 3 warm-ups)")
	sweep := fs.Bool("sweep", false, "also time other launch shapes (grid sizes, block sizes)")
	only := fs.String("only", "", "comma-separated kernels to run (default: all)")
	div := fs.Int("div", 1, "divide n, rows and the copies' bytes by this (a quick run, e.g. on the emulator)")
	fs.Parse(args)
	if *div < 1 {
		return fmt.Errorf("-div %d: want a positive divisor", *div)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	b := &libBench{w: w, d: d, s: s, reps: *reps, sweep: *sweep, target: ptx.SM90}
	for _, t := range ptx.Targets() {
		if string(t) == d.Info().Arch {
			b.target = t
		}
	}
	fmt.Fprintf(w, "# device: %s (%s, %d SMs), target %s, median of %d launches after 3 warm-ups\n",
		d.Info().Name, d.Info().Arch, d.Info().Multiproc, b.target, *reps)
	for _, n := range []int64{64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30} {
		if err := b.memcpy(max(n/int64(*div), 1<<10)); err != nil {
			return err
		}
	}
	for _, c := range libCases() {
		if *only != "" && !strings.Contains(","+*only+",", ","+c.kernel+",") {
			continue
		}
		c = c.scaled(*div)
		if err := b.run(c); err != nil {
			return fmt.Errorf("%s %s %s: %w", c.kernel, c.dt, c.shape(), err)
		}
	}
	return nil
}

// libBench holds the device, stream and settings of a run.
type libBench struct {
	w      io.Writer
	d      *jit.Device
	s      *jit.Stream
	reps   int
	sweep  bool
	target ptx.Target
}

// launchShape is a kernel launch: a one- or two-dimensional grid of one-dimensional blocks;
// parts > 0: a split-row kernel's co-resident launch with parts blocks a row.
type launchShape struct {
	grid  jit.Dim3
	block int
	parts int
}

func (l launchShape) String() string {
	switch {
	case l.grid.Y > 1:
		return fmt.Sprintf("%dx%dx%d", l.grid.X, l.grid.Y, l.block)
	case l.parts > 0:
		return fmt.Sprintf("%dx%d/%d", l.grid.X, l.block, l.parts)
	}
	return fmt.Sprintf("%dx%d", l.grid.X, l.block)
}

func shapeLaunch(s kernels.Shape) launchShape {
	return launchShape{grid: jit.D1(s.Grid), block: s.Block}
}

// memcpy times cuMemcpyDtoD of n bytes.
func (b *libBench) memcpy(n int64) error {
	src, err := b.d.Alloc(n)
	if err != nil {
		return err
	}
	defer src.Free()
	dst, err := b.d.Alloc(n)
	if err != nil {
		return err
	}
	defer dst.Free()
	t, err := timeIt(b.d, b.s, b.reps, func() error { return b.s.CopyDtoD(dst.DevPtr(), src.DevPtr(), n) })
	if err != nil {
		return err
	}
	fmt.Fprintf(b.w, "memcpy\tcopy\tu8\t%d\t-\t%.1f\t%d\n", n, us(t), 2*n)
	return nil
}

func us(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 }

// devBuf is n values of dt on the device with their host values (as float32, exactly the
// values of dt).
type devBuf struct {
	mem  *jit.Memory
	host []float32
}

func (v devBuf) DevPtr() jit.DevicePtr { return v.mem.DevPtr() }

// pattern returns n values of dt in [lo, hi) from a cheap hash of the index and seed.
func pattern(dt dsl.Type, n int, seed uint32, lo, hi float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		h := (uint32(i)+seed*0x9E3779B9)*2654435761 ^ seed
		h ^= h >> 15
		v[i] = roundTo(dt, lo+(hi-lo)*float32(h%65521)/65521)
	}
	return v
}

func roundTo(dt dsl.Type, x float32) float32 {
	switch dt {
	case dsl.F16:
		return fp.F16ToF32(fp.F32ToF16(x))
	case dsl.BF16:
		return fp.BF16ToF32(fp.F32ToBF16(x))
	}
	return x
}

// upload allocates n values of dt holding host (nil: uninitialised, host stays nil).
func (b *libBench) upload(dt dsl.Type, n int, host []float32) (devBuf, error) {
	m, err := b.d.Alloc(int64(n) * int64(dt.Bytes()))
	if err != nil {
		return devBuf{}, err
	}
	v := devBuf{mem: m, host: host}
	if host == nil {
		return v, nil
	}
	if dt == dsl.F32 {
		buf, _ := jit.BufferOf[float32](m, n)
		return v, buf.CopyFromHost(host)
	}
	bits := make([]uint16, n)
	for i, x := range host {
		bits[i] = bits16(dt, x)
	}
	buf, _ := jit.BufferOf[uint16](m, n)
	return v, buf.CopyFromHost(bits)
}

func bits16(dt dsl.Type, x float32) uint16 {
	if dt == dsl.BF16 {
		return fp.F32ToBF16(x)
	}
	return fp.F32ToF16(x)
}

// download reads n values of dt from m.
func download(dt dsl.Type, m *jit.Memory, n int) ([]float32, error) {
	out := make([]float32, n)
	if dt == dsl.F32 {
		buf, _ := jit.BufferOf[float32](m, n)
		return out, buf.CopyToHost(out)
	}
	bits := make([]uint16, n)
	buf, _ := jit.BufferOf[uint16](m, n)
	if err := buf.CopyToHost(bits); err != nil {
		return nil, err
	}
	for i, h := range bits {
		if dt == dsl.BF16 {
			out[i] = fp.BF16ToF32(h)
		} else {
			out[i] = fp.F16ToF32(h)
		}
	}
	return out, nil
}

// ulp is a relative tolerance of one unit in the last place of dt.
func ulp(dt dsl.Type) float64 {
	switch dt {
	case dsl.F16:
		return 0x1p-10
	case dsl.BF16:
		return 0x1p-7
	}
	return 0x1p-23
}

// checkClose compares got[i] with want(i) for the indices idx: |got-want| <= atol+rtol*|want|.
func checkClose(name string, got []float32, idx []int, want func(i int) float64, atol, rtol float64) error {
	for _, i := range idx {
		w := want(i)
		if d := math.Abs(float64(got[i]) - w); !(d <= atol+rtol*math.Abs(w)) {
			return fmt.Errorf("%s[%d] = %v, want %v", name, i, got[i], w)
		}
	}
	return nil
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// sampleRows returns every 61st row and the last.
func sampleRows(rows int) []int {
	var r []int
	for i := 0; i < rows; i += 61 {
		r = append(r, i)
	}
	return append(r, rows-1)
}

// run checks and times one case at its default launch (and, with -sweep, at others).
func (b *libBench) run(c libCase) error {
	spec, err := kernels.Lookup(c.kernel)
	if err != nil {
		return err
	}
	mod, err := spec.Build(kernels.Config{Target: b.target, DType: c.dt})
	if err != nil {
		return err
	}
	m, err := b.d.Load(jit.Source{Module: mod})
	if err != nil {
		return err
	}
	defer m.Close()
	fn, err := m.Function(spec.VariantName(c.dt))
	if err != nil {
		return err
	}
	dt, eb := c.dt, c.dt.Bytes()
	var bufs []devBuf
	defer func() {
		for _, v := range bufs {
			v.mem.Free()
		}
	}()
	alloc := func(n int, host []float32) (devBuf, error) {
		v, err := b.upload(dt, n, host)
		if err == nil {
			bufs = append(bufs, v)
		}
		return v, err
	}
	var (
		args   []any
		def    launchShape
		alts   []launchShape
		bytes  int64
		verify func() error
		choice = "-" // row kernels: "chosen" when kernels.ChooseRowKernel picks this one, else "other"
	)
	sms := b.d.Info().Multiproc
	switch c.kernel {
	case "tiled_copy", "vector_add", "axpy":
		n := c.dims[0]
		if n < 1 || int64(n) > math.MaxUint32 {
			return fmt.Errorf("%s of %d elements: the kernels take n as u32 (1 to 2^32-1)", c.kernel, n)
		}
		x, err := alloc(n, pattern(dt, n, 1, -1, 1))
		if err != nil {
			return err
		}
		y, err := alloc(n, pattern(dt, n, 2, -1, 1))
		if err != nil {
			return err
		}
		switch c.kernel {
		case "tiled_copy":
			tile := kernels.TiledCopyElems(dt)
			args, def, bytes = []any{x, y, uint32(n)}, launchShape{grid: jit.D1((n + tile - 1) / tile), block: 256}, 2*int64(n)*int64(eb)
			verify = func() error {
				got, err := download(dt, y.mem, n)
				if err != nil {
					return err
				}
				return checkClose("dst", got, all(n), func(i int) float64 { return float64(x.host[i]) }, 0, 0)
			}
		case "vector_add":
			out, err := alloc(n, nil)
			if err != nil {
				return err
			}
			args, bytes = []any{x, y, out, uint32(n)}, 3*int64(n)*int64(eb)
			verify = func() error {
				got, err := download(dt, out.mem, n)
				if err != nil {
					return err
				}
				return checkClose("c", got, all(n), func(i int) float64 { return float64(x.host[i] + y.host[i]) }, 0, ulp(dt))
			}
		case "axpy":
			alpha := roundTo(dt, 1.5)
			var a any = alpha
			if dt != dsl.F32 {
				a = bits16(dt, alpha)
			}
			args, bytes = []any{a, x, y, uint32(n)}, 3*int64(n)*int64(eb)
			verify = func() error { // the first launch only: later ones keep adding
				got, err := download(dt, y.mem, n)
				if err != nil {
					return err
				}
				return checkClose("y", got, all(n), func(i int) float64 {
					return math.FMA(float64(alpha), float64(x.host[i]), float64(y.host[i]))
				}, 0, ulp(dt))
			}
		}
		if c.kernel != "tiled_copy" {
			def = shapeLaunch(kernels.StreamShape(n, dt))
			// A resident grid looping over n (4 blocks per SM); 1 and 2 steps of 4 vectors per
			// thread and operand per block.
			alts = append(alts, launchShape{grid: jit.D1(sms * 4), block: 256})
			step := 256 * 4 * 16 / eb
			for _, per := range []int{1, 2} {
				alts = append(alts, launchShape{grid: jit.D1((n + step*per - 1) / (step * per)), block: 256})
			}
		}
	case "transpose":
		rows, cols := c.dims[0], c.dims[1]
		if err := kernels.TransposeCheckShape(rows, cols); err != nil {
			return err
		}
		in, err := alloc(rows*cols, pattern(dt, rows*cols, 3, -8, 8))
		if err != nil {
			return err
		}
		out, err := alloc(rows*cols, nil)
		if err != nil {
			return err
		}
		args, bytes = []any{in, out, uint32(rows), uint32(cols)}, 2*int64(rows*cols)*int64(eb)
		def = launchShape{grid: jit.Dim3{X: (cols + 31) / 32, Y: (rows + 31) / 32, Z: 1}, block: 256}
		verify = func() error {
			got, err := download(dt, out.mem, rows*cols)
			if err != nil {
				return err
			}
			var idx []int
			for i := 0; i < rows*cols; i += 7 {
				idx = append(idx, i)
			}
			return checkClose("out", got, idx, func(o int) float64 {
				j, i := o/rows, o%rows // out is cols x rows
				return float64(in.host[i*cols+j])
			}, 0, 0)
		}
	case "softmax", "row_sum", "softmax_split", "row_sum_split":
		rows, cols := c.dims[0], c.dims[1]
		fam := kernels.Family(strings.TrimSuffix(c.kernel, "_split"))
		split := fam != kernels.Family(c.kernel)
		chosen, err := kernels.ChooseRowKernel(fam, dt, rows, cols, sms)
		if err != nil {
			return err
		}
		choice = "other"
		if chosen.ID.Family == spec.Family {
			choice = "chosen"
		}
		in, err := alloc(rows*cols, pattern(dt, rows*cols, 4, -6, 6))
		if err != nil {
			return err
		}
		outN, outDT, shape := rows*cols, dt, kernels.SoftmaxShape(rows, cols)
		if fam == kernels.FamilyRowSum {
			outN, outDT, shape = rows, dsl.F32, kernels.RowSumShape(rows, cols)
		}
		out, err := b.upload(outDT, outN, nil)
		if err != nil {
			return err
		}
		bufs = append(bufs, out)
		args = []any{in, out, uint32(rows), uint32(cols)}
		bytes = int64(rows*cols)*int64(eb) + int64(outN)*int64(outDT.Bytes())
		def = shapeLaunch(shape)
		if split {
			// Co-resident, on scratch zeroed once: every launch leaves it ready for the next.
			sh := kernels.SplitRowShape(rows, cols, sms)
			scratch, err := b.d.Alloc(int64(sh.ScratchWords) * 4)
			if err != nil {
				return err
			}
			bufs = append(bufs, devBuf{mem: scratch})
			zero, _ := jit.BufferOf[uint32](scratch, sh.ScratchWords)
			if err := zero.CopyFromHost(make([]uint32, sh.ScratchWords)); err != nil {
				return err
			}
			args = []any{in, out, scratch, uint32(rows), uint32(cols), uint32(sh.Parts)}
			def = launchShape{grid: jit.D1(sh.Grid), block: sh.Block, parts: sh.Parts}
		} else {
			// Grids of one and two waves of resident blocks (1024 threads per SM) looping over rows.
			for _, waves := range []int{1, 2} {
				alts = append(alts, launchShape{grid: jit.D1(sms * 1024 / def.block * waves), block: def.block})
			}
			if cols <= 1024 {
				for _, rpb := range []int{4, 16, 32} {
					alts = append(alts, launchShape{grid: jit.D1((rows + rpb - 1) / rpb), block: 32 * rpb})
				}
			} else {
				for bl := 64; bl <= 1024; bl *= 2 {
					if bl != def.block && (fam == kernels.FamilyRowSum || bl*32 >= cols) {
						alts = append(alts, launchShape{grid: jit.D1(rows), block: bl})
					}
				}
			}
		}
		verify = func() error {
			got, err := download(outDT, out.mem, outN)
			if err != nil {
				return err
			}
			for _, r := range sampleRows(rows) {
				row := in.host[r*cols : (r+1)*cols]
				if fam == kernels.FamilyRowSum {
					s := 0.0
					for _, x := range row {
						s += float64(x)
					}
					if err := checkClose("out", got, []int{r}, func(int) float64 { return s }, 1e-6*float64(cols), 1e-5); err != nil {
						return err
					}
					continue
				}
				mx := math.Inf(-1)
				for _, x := range row {
					mx = math.Max(mx, float64(x))
				}
				s := 0.0
				for _, x := range row {
					s += math.Exp(float64(x) - mx)
				}
				idx := make([]int, cols)
				for j := range idx {
					idx[j] = r*cols + j
				}
				err := checkClose("out", got, idx, func(i int) float64 { return math.Exp(float64(in.host[i])-mx) / s },
					1e-7, math.Max(2e-6, ulp(dt)))
				if err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return fmt.Errorf("no benchmark for kernel %s", c.kernel)
	}
	at := func(l launchShape) func() error {
		return func() error {
			return fn.Launch(jit.LaunchConfig{Grid: l.grid, Block: jit.D1(l.block), Stream: b.s, CoResident: l.parts > 0}, args...)
		}
	}
	if err := at(def)(); err != nil {
		return err
	}
	if err := b.s.Synchronize(); err != nil {
		return err
	}
	if err := verify(); err != nil {
		return fmt.Errorf("output differs from the host reference: %w", err)
	}
	t, err := timeIt(b.d, b.s, b.reps, at(def))
	if err != nil {
		return err
	}
	fmt.Fprintf(b.w, "kgen\t%s\t%s\t%s\t%s\t%.1f\t%d\t%s\n", c.kernel, dt, c.shape(), def, us(t), bytes, choice)
	if !b.sweep {
		return nil
	}
	for _, l := range alts {
		t, err := timeIt(b.d, b.s, b.reps, at(l))
		if err != nil {
			return err
		}
		fmt.Fprintf(b.w, "sweep\t%s\t%s\t%s\t%s\t%.1f\t%d\n", c.kernel, dt, c.shape(), l, us(t), bytes)
	}
	return nil
}
