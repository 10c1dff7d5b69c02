package tune

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

func emuDevice(t *testing.T) *jit.Device {
	t.Helper()
	d, err := jit.OpenBackend(jit.Emulator, 0, jit.WithCache(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestTuneGemmEmu tunes the sm_90a GEMM on the emulator for a tiny problem, every candidate
// checked against the float64 reference: the winner is the candidate of the smallest
// median, it is cached, a second TuneGemm and GemmConfig return it without timing, and a
// problem never tuned gets kernels.GemmSM90For's estimate.
func TestTuneGemmEmu(t *testing.T) {
	d := emuDevice(t)
	tu, err := New(t.TempDir(), Schedule{Warmup: 1, Reps: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []GemmProblem{
		{In: dsl.BF16, Out: dsl.BF16, M: 72, N: 80, K: 136},
		{In: dsl.E4M3, Out: dsl.BF16, M: 64, N: 64, K: 96},
		// epilogues: kernels of their own, checked through the float64 epilogue
		{In: dsl.BF16, Out: dsl.BF16, M: 72, N: 80, K: 136, Epilogue: kernels.Epilogue{Bias: true, Act: kernels.SiLU, Residual: true}},
		{In: dsl.E4M3, Out: dsl.BF16, M: 64, N: 64, K: 96, Epilogue: kernels.Epilogue{Scales: true, Bias: true, Act: kernels.GELU}},
	} {
		t.Run(p.String(), func(t *testing.T) {
			res, err := TuneGemm(context.Background(), tu, d, p, GemmOptions{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			cands := gemmCandidates(p)
			if !p.Epilogue.IsZero() {
				plain := p
				plain.Epilogue = kernels.Epilogue{}
				if k := GemmKey(d.Info(), p, false); k == GemmKey(d.Info(), plain, false) || !strings.Contains(res.Winner.Name, "_ep_") || res.Winner.Config.Epilogue != p.Epilogue {
					t.Fatalf("key %s, winner %s: want the epilogue's own key and kernels", k, res.Winner.Name)
				}
			}
			if res.Cached || len(res.Times) != len(cands) {
				t.Fatalf("cached %v, %d timings of %d candidates", res.Cached, len(res.Times), len(cands))
			}
			best, err := Fastest(res.Times)
			if err != nil || res.Winner.Name != cands[best].Name || res.Winner.Config != cands[best].Config {
				t.Fatalf("winner %s, fastest %d (%v)", res.Winner.Name, best, err)
			}
			for _, tm := range res.Times {
				if tm.Err != nil || len(tm.Samples) != 3 {
					t.Errorf("%s: %v, %d samples", tm.Name, tm.Err, len(tm.Samples))
				}
			}
			again, err := TuneGemm(context.Background(), tu, d, p, GemmOptions{})
			if err != nil || !again.Cached || again.Winner != res.Winner {
				t.Fatalf("second TuneGemm: %+v, %v", again, err)
			}
			cfg, cached, err := GemmConfig(tu, d.Info(), p)
			if err != nil || !cached || cfg != res.Winner.Config {
				t.Fatalf("GemmConfig = %s, %v, %v; want the cached %s", cfg.Name(), cached, err, res.Winner.Name)
			}
			other := p
			other.M += 8
			cfg, cached, err = GemmConfig(tu, d.Info(), other)
			want, _ := kernels.GemmSM90For(p.In, p.Out, other.M, other.N, other.K, d.Info().Multiproc)
			want = want.WithEpilogue(p.Epilogue)
			if err != nil || cached || cfg != want {
				t.Fatalf("GemmConfig of an untuned shape = %s, %v, %v; want GemmSM90For's %s with its epilogue", cfg.Name(), cached, err, want.Name())
			}
		})
	}
}

// TestTuneGemmBucket: a winner tuned under the Pow2Shape key serves a nearby shape through
// GemmConfig.
func TestTuneGemmBucket(t *testing.T) {
	d := emuDevice(t)
	tu, err := New(t.TempDir(), Schedule{Warmup: 1, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := GemmProblem{In: dsl.F16, Out: dsl.F32, M: 64, N: 64, K: 64}
	res, err := TuneGemm(context.Background(), tu, d, p, GemmOptions{Bucket: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Key.Shape != "p2:64x64x64" {
		t.Errorf("key shape %s", res.Key.Shape)
	}
	near := GemmProblem{In: dsl.F16, Out: dsl.F32, M: 40, N: 56, K: 48}
	if cfg, cached, err := GemmConfig(tu, d.Info(), near); err != nil || !cached || cfg != res.Winner.Config {
		t.Fatalf("GemmConfig of a shape in the bucket: %s %v %v", cfg.Name(), cached, err)
	}
}

// TestGemmTimerCheck: with Check, a candidate whose D differs from the reference fails
// (here the reference's B differs from the device's), naming the element.
func TestGemmTimerCheck(t *testing.T) {
	d := emuDevice(t)
	p := GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 64, K: 64}
	g, err := NewGemmTimer(d, p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Check = true
	c := GemmCandidates(p.In, p.Out)[4]
	if _, err := g.Time(context.Background(), c); err != nil {
		t.Fatalf("a correct candidate failed its check: %v", err)
	}
	g.hb = randomMatrix(p.In, int64(p.K*p.N), 99) // the reference no longer matches the device
	c = GemmCandidates(p.In, p.Out)[3]
	_, err = g.Time(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "wrong D") {
		t.Fatalf("a wrong result passed: %v", err)
	}
	if _, err2 := g.Time(context.Background(), c); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("the failed candidate ran again: %v", err2)
	}
}

// TestGemmBadInput: problems gemm_sm90 cannot run and a cancelled context are errors naming
// the rule, before anything is timed.
func TestGemmBadInput(t *testing.T) {
	d := emuDevice(t)
	tu, err := New(t.TempDir(), Schedule{Warmup: 1, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    GemmProblem
		want string
	}{
		{GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 60, K: 64}, "multiples of 8"},
		{GemmProblem{In: dsl.F32, Out: dsl.F32, M: 64, N: 64, K: 64}, "input type f32"},
		{GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 0, N: 64, K: 64}, "positive"},
		{GemmProblem{In: dsl.E4M3, Out: dsl.BF16, M: 64, N: 64, K: 40}, "multiple of 16"},
	} {
		if _, err := TuneGemm(context.Background(), tu, d, c.p, GemmOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.p, err, c.want)
		}
		if _, _, err := GemmConfig(tu, d.Info(), c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("GemmConfig %s: %v, want %q", c.p, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 64, K: 64}
	if _, err := TuneGemm(ctx, tu, d, p, GemmOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := TuneGemm(context.Background(), nil, d, p, GemmOptions{}); err == nil {
		t.Error("nil tuner")
	}
}

// TestVerifyGemm: the winner's time beside every candidate's; the ratio is its median over
// the fastest's.
func TestVerifyGemm(t *testing.T) {
	d := emuDevice(t)
	p := GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 64, K: 64}
	cands := GemmCandidates(p.In, p.Out)
	v, err := VerifyGemm(context.Background(), d, p, cands[1].Name, Schedule{Warmup: 1, Reps: 3}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Times) != len(cands) || v.Ratio < 1 || v.Ratio != float64(v.Times[1].Median)/float64(v.Times[v.Best].Median) {
		t.Fatalf("verification %+v", v)
	}
	if _, err := VerifyGemm(context.Background(), d, p, "gemm_nope", Schedule{}, false); err == nil || !strings.Contains(err.Error(), "none of the") {
		t.Errorf("unknown winner: %v", err)
	}
}
