package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// gemmMain is `gpubench gemm`: times kgen's gemm (row-major A, B, D; out = in) at each size,
// checks a sample of D against a float64 reference, and with -dir writes the inputs, the
// output and the timing for torch_gemm.py, which times cuBLAS (torch.matmul) on the same
// inputs in the same device call and compares the whole output.
// runGemm times the gemm kernel against cuBLAS (through torch_gemm.py) per problem size.
func runGemm(args []string) error {
	fs := flag.NewFlagSet("gemm", flag.ExitOnError)
	sizes := fs.String("sizes", "4096,8192", "problems: N (N^3) or MxNxK, comma-separated")
	dtype := fs.String("dtype", "bf16", "input and output type: bf16 or f16")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	dir := fs.String("dir", "", "write a, b, d and kgen.json per problem here for torch_gemm.py")
	cfg := kernels.DefaultGemmConfig(dsl.BF16)
	fs.IntVar(&cfg.BM, "bm", cfg.BM, "block tile M")
	fs.IntVar(&cfg.BN, "bn", cfg.BN, "block tile N")
	fs.IntVar(&cfg.BK, "bk", cfg.BK, "block tile K")
	fs.IntVar(&cfg.WarpsM, "wm", cfg.WarpsM, "warps along M")
	fs.IntVar(&cfg.WarpsN, "wn", cfg.WarpsN, "warps along N")
	fs.IntVar(&cfg.Stages, "stages", cfg.Stages, "cp.async stages")
	fs.IntVar(&cfg.IssueAfter, "issue", cfg.IssueAfter, "the K block before which a step issues the next tile's loads")
	fs.BoolVar(&cfg.DoubleBuffer, "db", cfg.DoubleBuffer, "double-buffer the fragments (load one K block ahead)")
	fs.IntVar(&cfg.MinBlocks, "minblocks", cfg.MinBlocks, "blocks per SM that ptxas must fit (.minnctapersm; 0: its choice)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *dtype {
	case "bf16":
	case "f16":
		cfg.In, cfg.Out = dsl.F16, dsl.F16
	default:
		return fmt.Errorf("-dtype %q: want bf16 or f16", *dtype)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("device: %s (%s); kernel %s, %d threads, %d B shared\n", d.Info().Name, d.Info().Arch, cfg.Name(), cfg.Threads(), cfg.SharedBytes())
	for _, s := range strings.Split(*sizes, ",") {
		m, n, k, err := parseSize(s)
		if err != nil {
			return err
		}
		if err := benchGemm(d, cfg, m, n, k, *reps, *dir); err != nil {
			return fmt.Errorf("%dx%dx%d: %w", m, n, k, err)
		}
	}
	return nil
}

func parseSize(s string) (m, n, k int, err error) {
	parts := strings.Split(strings.TrimSpace(s), "x")
	var v []int
	for _, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x <= 0 {
			return 0, 0, 0, fmt.Errorf("bad size %q (want N or MxNxK)", s)
		}
		v = append(v, x)
	}
	switch len(v) {
	case 1:
		return v[0], v[0], v[0], nil
	case 3:
		return v[0], v[1], v[2], nil
	}
	return 0, 0, 0, fmt.Errorf("bad size %q (want N or MxNxK)", s)
}

// gemmRecord is what torch_gemm.py reads back.
type gemmRecord struct {
	M, N, K   int
	DType     string
	Kernel    string
	KgenUS    float64
	SampleErr float64 // the largest sampled |D - ref| / tolerance
}

func benchGemm(d *jit.Device, cfg kernels.GemmConfig, m, n, k, reps int, dir string) error {
	if m%8 != 0 || n%8 != 0 || k%8 != 0 {
		cfg.Aligned = false
	}
	target := ptx.Target(d.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	kb := dsl.New(cfg.Name(), dsl.WithTarget(target))
	kernels.Gemm(kb, cfg)
	mod, err := kb.Build()
	if err != nil {
		return err
	}
	jm, err := d.Load(jit.Source{Module: mod})
	if err != nil {
		return err
	}
	defer jm.Close()
	fn, err := jm.Function(cfg.Name())
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(int64(m*31 + n*7 + k)))
	conv := func(x float32) uint16 {
		if cfg.In == dsl.F16 {
			return uint16(fp.F16Of(x))
		}
		return uint16(fp.BF16Of(x))
	}
	back := func(h uint16) float64 {
		if cfg.In == dsl.F16 {
			return float64(fp.F16(h).Float32())
		}
		return float64(fp.BF16(h).Float32())
	}
	host := func(len int) []uint16 {
		v := make([]uint16, len)
		for i := range v {
			v[i] = conv(2*rng.Float32() - 1)
		}
		return v
	}
	ha, hb := host(m*k), host(k*n)
	a, err := jit.Alloc[uint16](d, m*k)
	if err != nil {
		return err
	}
	defer a.Free()
	b, err := jit.Alloc[uint16](d, k*n)
	if err != nil {
		return err
	}
	defer b.Free()
	out, err := jit.Alloc[uint16](d, m*n)
	if err != nil {
		return err
	}
	defer out.Free()
	if err := a.CopyFromHost(ha); err != nil {
		return err
	}
	if err := b.CopyFromHost(hb); err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(m, n)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: s}
	t, err := timeIt(d, s, reps, func() error {
		return fn.Launch(lc, a, b, uint32(m), uint32(n), uint32(k), float32(1), float32(0), out, out)
	})
	if err != nil {
		return err
	}
	hd := make([]uint16, m*n)
	if err := out.CopyToHost(hd); err != nil {
		return err
	}
	// A sample of D against float64 sums.
	worst := 0.0
	for i := 0; i < 256; i++ {
		r, c := rng.Intn(m), rng.Intn(n)
		sum, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := back(ha[r*k+l]) * back(hb[l*n+c])
			sum += x
			abs += math.Abs(x)
		}
		tol := float64(k+4)*0x1p-23*abs + 0x1p-7*math.Abs(sum) + 1e-30
		worst = math.Max(worst, math.Abs(back(hd[r*n+c])-sum)/tol)
	}
	tflops := 2 * float64(m) * float64(n) * float64(k) / t.Seconds() / 1e12
	fmt.Printf("gemm %dx%dx%d %s: kgen %9.1f us %7.1f TFLOP/s (median of %d), sampled error %.3g of tolerance\n",
		m, n, k, cfg.In, float64(t.Nanoseconds())/1e3, tflops, reps, worst)
	if worst > 1 {
		return fmt.Errorf("sampled D differs from the float64 reference (%.3g x tolerance)", worst)
	}
	if dir == "" {
		return nil
	}
	sub := filepath.Join(dir, fmt.Sprintf("%dx%dx%d", m, n, k))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	for name, v := range map[string][]uint16{"a.bin": ha, "b.bin": hb, "d.bin": hd} {
		if err := os.WriteFile(filepath.Join(sub, name), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v)), 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(gemmRecord{M: m, N: n, K: k, DType: cfg.In.String(), Kernel: cfg.Name(),
		KgenUS: float64(t.Nanoseconds()) / 1e3, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "kgen.json"), rec, 0o644)
}
