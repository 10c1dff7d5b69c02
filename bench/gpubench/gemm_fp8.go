package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// benchGemmFP8 times gemm_sm90 with e4m3 inputs (hp.In E4M3, hp.Out BF16): A M x K and B
// N x K, both row-major (K-major, as torch._scaled_mm takes B transposed), alpha 1, and
// checks a sample of D against float64 sums; with dir it writes a.bin, b.bin (bytes), d.bin
// (bf16) and kgen.json (DType "e4m3") for torch_gemm.py.
func benchGemmFP8(d *jit.Device, hp kernels.GemmSM90Config, m, n, k, reps int, dir string) error {
	if hp.In != dsl.E4M3 || hp.Out != dsl.BF16 {
		return fmt.Errorf("gpubench gemm -dtype e4m3 runs e4m3 -> bf16, not %s -> %s", hp.In, hp.Out)
	}
	if err := hp.CheckShape(m, n, k); err != nil {
		return err
	}
	name := hp.Name()
	kb := dsl.New(name, dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(kb, hp)
	mod, err := kb.Build()
	if err != nil {
		return err
	}
	jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(kb.Params())}})
	if err != nil {
		return err
	}
	defer jm.Close()
	fn, err := jm.Function(name)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(int64(m*31 + n*7 + k)))
	host := func(n int) []fp.E4M3 {
		v := make([]fp.E4M3, n)
		for i := range v {
			v[i] = fp.E4M3Of(2*rng.Float32() - 1)
		}
		return v
	}
	ha, hb := host(m*k), host(n*k)
	var bufs []interface{ Free() error }
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	load := func(h []fp.E4M3) (*jit.Buffer[fp.E4M3], error) {
		b, err := jit.Alloc[fp.E4M3](d, len(h))
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		return b, b.CopyFromHost(h)
	}
	a, err := load(ha)
	if err != nil {
		return err
	}
	b, err := load(hb)
	if err != nil {
		return err
	}
	out, err := jit.Alloc[uint16](d, m*n)
	if err != nil {
		return err
	}
	bufs = append(bufs, out)
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	lc, l, err := sm90Launch(d, hp, m, n, k, s)
	if err != nil {
		return err
	}
	tmA, err := tensorMap(a, l.A)
	if err != nil {
		return err
	}
	tmB, err := tensorMap(b, l.B)
	if err != nil {
		return err
	}
	po := jit.AnyPtr{Addr: out.DevPtr(), Elem: hp.Out} // bf16 patterns in a uint16 buffer
	var args any = launch.GemmSM90{TmA: tmA, TmB: tmB, M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1, C: po, D: po}
	readD := out.CopyToHost
	if hp.TMAStore {
		ob, tmD, read, freeD, err := sm90OutMap[fp.BF16](d, l)
		if err != nil {
			return err
		}
		defer freeD()
		args = launch.GemmSM90Store{TmA: tmA, TmB: tmB, M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1, C: ob, D: ob, TmD: tmD}
		readD = read
	}
	t, err := timeIt(d, s, reps, func() error { return fn.LaunchArgs(lc, args) })
	if err != nil {
		return err
	}
	hd := make([]uint16, m*n)
	if err := readD(hd); err != nil {
		return err
	}
	worst := 0.0
	for i := 0; i < 256; i++ {
		r, c := rng.Intn(m), rng.Intn(n)
		sum, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := float64(ha[r*k+l].Float32()) * float64(hb[c*k+l].Float32())
			sum += x
			abs += math.Abs(x)
		}
		tol := float64(k+4)*0x1p-23*abs + 0x1p-7*math.Abs(sum) + 1e-30
		worst = math.Max(worst, math.Abs(float64(fp.BF16(hd[r*n+c]).Float32())-sum)/tol)
	}
	tflops := 2 * float64(m) * float64(n) * float64(k) / t.Seconds() / 1e12
	fmt.Printf("gemm %dx%dx%d e4m3: kgen %9.1f us %7.1f TFLOP/s (median of %d), sampled error %.3g of tolerance\n",
		m, n, k, float64(t.Nanoseconds())/1e3, tflops, reps, worst)
	fmt.Printf("  kernel %s\n", name)
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
	files := map[string][]byte{
		"a.bin": unsafe.Slice((*byte)(unsafe.Pointer(&ha[0])), len(ha)),
		"b.bin": unsafe.Slice((*byte)(unsafe.Pointer(&hb[0])), len(hb)),
		"d.bin": unsafe.Slice((*byte)(unsafe.Pointer(&hd[0])), 2*len(hd)),
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(sub, name), v, 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(gemmRecord{M: m, N: n, K: k, DType: "e4m3", Kernel: name,
		KgenUS: float64(t.Nanoseconds()) / 1e3, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "kgen.json"), rec, 0o644)
}
