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
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// gemmEpi is -epilogue: the options benchGemm also times, beside the plain gemm (zero: none).
var gemmEpi kernels.Epilogue

// setGemmEpi reads -epilogue; gpubench times bias, the activations and the residual on
// 16-bit inputs (the fp8 scales are checked on the emulator only).
func setGemmEpi(s, dtype string) error {
	e, err := kernels.ParseEpilogue(s)
	if err != nil {
		return fmt.Errorf("-epilogue: %w", err)
	}
	if e.Scales {
		return fmt.Errorf("-epilogue %q: gpubench does not time the fp8 scales (kernels/ref tests them on the emulator)", s)
	}
	if !e.IsZero() && dtype == "e4m3" {
		return fmt.Errorf("-epilogue %q with -dtype e4m3: gpubench times epilogues on bf16 and f16 inputs only", s)
	}
	gemmEpi = e
	return nil
}

// epiRecord is what torch_gemm.py reads back for the epilogue (epi.json beside kgen.json).
type epiRecord struct {
	Epilogue  string
	Kernel    string
	PlainUS   float64 // the plain gemm, this call
	EpiUS     float64 // the gemm with the epilogue
	SampleErr float64
}

// benchGemmEpi times the gemm of cfg (the mma.sync one) or hp (gemm_sm90, when not nil)
// with gemmEpi's options on the inputs ha (M x K) and hb (K x N), 16-bit words read by back,
// beside the plain gemm's time plainUS from the same call: bias f32 (values of the input
// type, so that torch's bias in that type is the same), residual of Out in [-1, 1], alpha 1,
// beta 0. It checks a sample of D against the float64 reference of the epilogue and, with
// dir, writes bias.bin, res.bin, depi.bin and epi.json for torch_gemm.py.
func benchGemmEpi(d *jit.Device, s *jit.Stream, cfg kernels.GemmConfig, hp *kernels.GemmSM90Config, m, n, k, reps int, dir string,
	ha, hb []uint16, plainUS float64, conv func(float32) uint16, back func(uint16) float64) error {
	e := gemmEpi
	cfg.Epilogue = e
	target := ptx.Target(d.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	name, out := cfg.Name(), cfg.Out
	var h kernels.GemmSM90Config
	if hp != nil {
		h = *hp
		h.Epilogue = e
		if gemmEpiPick {
			h = hp.WithEpilogue(e) // as ops.Matmul runs the pick with an epilogue
		}
		name, out, target = h.Name(), h.Out, ptx.SM90a
	}
	kb := dsl.New(name, dsl.WithTarget(target))
	if hp != nil {
		kernels.GemmSM90(kb, h)
	} else {
		kernels.Gemm(kb, cfg)
	}
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
	rng := rand.New(rand.NewSource(int64(m*13 + n*5 + k)))
	hbias := make([]float32, n)
	for i := range hbias {
		hbias[i] = float32(back(conv(2*rng.Float32() - 1)))
	}
	hres := make([]uint16, m*n)
	for i := range hres {
		hres[i] = conv(2*rng.Float32() - 1)
	}
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	bias, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	frees = append(frees, func() { bias.Free() })
	if err := bias.CopyFromHost(hbias); err != nil {
		return err
	}
	pres := jit.AnyPtr{Elem: out}
	if e.Residual {
		res, err := jit.Alloc[uint16](d, m*n)
		if err != nil {
			return err
		}
		frees = append(frees, func() { res.Free() })
		if err := res.CopyFromHost(hres); err != nil {
			return err
		}
		pres.Addr = res.DevPtr()
	}
	pbias := jit.AnyPtr{Elem: dsl.F32}
	if e.Bias {
		pbias.Addr = bias.DevPtr()
	}
	null := jit.AnyPtr{Elem: dsl.F32}
	epiArgs := []any{pbias, null, null, pres}

	dbuf, err := jit.Alloc[uint16](d, m*n)
	if err != nil {
		return err
	}
	frees = append(frees, func() { dbuf.Free() })
	readD := dbuf.CopyToHost
	po := jit.AnyPtr{Addr: dbuf.DevPtr(), Elem: out}
	var launch func() error
	if hp == nil {
		if m%8 != 0 || n%8 != 0 || k%8 != 0 {
			cfg.Aligned = false
		}
		pa, pb := jit.AnyPtr{Addr: 0, Elem: cfg.In}, jit.AnyPtr{Addr: 0, Elem: cfg.In}
		a, err := jit.Alloc[uint16](d, m*k)
		if err != nil {
			return err
		}
		frees = append(frees, func() { a.Free() })
		b, err := jit.Alloc[uint16](d, k*n)
		if err != nil {
			return err
		}
		frees = append(frees, func() { b.Free() })
		if err := a.CopyFromHost(ha); err != nil {
			return err
		}
		if err := b.CopyFromHost(hb); err != nil {
			return err
		}
		pa.Addr, pb.Addr = a.DevPtr(), b.DevPtr()
		lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(m, n)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: s}
		args := append([]any{pa, pb, uint32(m), uint32(n), uint32(k), float32(1), float32(0), po, po}, epiArgs...)
		launch = func() error { return fn.Launch(lc, args...) }
	} else {
		var tmA, tmB jit.TensorMap
		var free func()
		lc, l, err := sm90Launch(d, h, m, n, k, s)
		if err != nil {
			return err
		}
		if h.In == dsl.F16 {
			tmA, tmB, free, err = sm90Maps[fp.F16](d, l, ha, hb)
		} else {
			tmA, tmB, free, err = sm90Maps[fp.BF16](d, l, ha, hb)
		}
		if err != nil {
			return err
		}
		frees = append(frees, free)
		args := []any{tmA, tmB, uint32(m), uint32(n), uint32(k), float32(1), float32(0), po, po}
		if h.TMAStore {
			var ob jit.AnyPtr
			var tmD jit.TensorMap
			var freeD func()
			if h.Out == dsl.F16 {
				ob, tmD, readD, freeD, err = sm90OutMap[fp.F16](d, l)
			} else {
				ob, tmD, readD, freeD, err = sm90OutMap[fp.BF16](d, l)
			}
			if err != nil {
				return err
			}
			frees = append(frees, freeD)
			args = append(args[:7], ob, ob, tmD)
		}
		args = append(args, epiArgs...)
		launch = func() error { return fn.Launch(lc, args...) }
	}
	t, err := timeIt(d, s, reps, launch)
	if err != nil {
		return err
	}
	hd := make([]uint16, m*n)
	if err := readD(hd); err != nil {
		return err
	}
	// A sample of D against the float64 epilogue of float64 sums.
	worst := 0.0
	for i := 0; i < 256; i++ {
		r, c := rng.Intn(m), rng.Intn(n)
		sum, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := back(ha[r*k+l]) * back(hb[l*n+c])
			sum += x
			abs += math.Abs(x)
		}
		v := sum
		if e.Bias {
			v += float64(hbias[c])
			abs += math.Abs(float64(hbias[c]))
		}
		want := ref.ActRef(e.Act, v)
		if e.Residual {
			want += back(hres[r*n+c])
		}
		// tanh.approx (SiLU, GELU) errs by up to 2^-12*|v| (kernels.SiLU)
		tol := 1.2*float64(k+6)*0x1p-23*abs + 0x1p-7*math.Abs(want) + 0x1p-12*math.Abs(v) + 1e-30
		worst = math.Max(worst, math.Abs(back(hd[r*n+c])-want)/tol)
	}
	us := float64(t.Nanoseconds()) / 1e3
	tflops := 2 * float64(m) * float64(n) * float64(k) / t.Seconds() / 1e12
	fmt.Printf("gemm %dx%dx%d %s +%s: kgen %9.1f us %7.1f TFLOP/s (median of %d); plain %9.1f us: plain/epilogue speed %.3f; sampled error %.3g of tolerance\n",
		m, n, k, cfg.In, e, us, tflops, reps, plainUS, plainUS/us, worst)
	fmt.Printf("  kernel %s\n", name)
	if worst > 1 {
		return fmt.Errorf("epilogue %s: sampled D differs from the float64 reference (%.3g x tolerance)", e, worst)
	}
	if dir == "" {
		return nil
	}
	sub := filepath.Join(dir, fmt.Sprintf("%dx%dx%d", m, n, k))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"bias.bin": unsafe.Slice((*byte)(unsafe.Pointer(&hbias[0])), 4*len(hbias)),
		"res.bin":  unsafe.Slice((*byte)(unsafe.Pointer(&hres[0])), 2*len(hres)),
		"depi.bin": unsafe.Slice((*byte)(unsafe.Pointer(&hd[0])), 2*len(hd)),
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(sub, f), b, 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(epiRecord{Epilogue: e.String(), Kernel: name, PlainUS: plainUS, EpiUS: us, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "epi.json"), rec, 0o644)
}
