package tune_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/tune"
)

// Tune times the candidates once and caches the fastest; a later Tune (here a new Tuner on
// the same folder, as in another process) returns it without calling the timer.
func ExampleTune() {
	dir, _ := os.MkdirTemp("", "tune-example")
	defer os.RemoveAll(dir)
	cands := []tune.Candidate[int]{{Name: "tile64", Config: 64}, {Name: "tile128", Config: 128}, {Name: "tile256", Config: 256}}
	key := tune.Key{Device: tune.Device{Backend: "gpu", Name: "Some GPU", Arch: "sm_90", SMs: 132},
		Kernel: "my_kernel", DTypes: "f32", Shape: tune.ExactShape(4096, 4096)}
	timer := func(ctx context.Context, c tune.Candidate[int]) (time.Duration, error) {
		// A real timer builds c.Config's kernel once and times a launch on the device.
		return time.Duration(1000+(c.Config-128)*(c.Config-128)) * time.Microsecond, nil
	}
	tu, _ := tune.New(dir, tune.Schedule{Warmup: 1, Reps: 3})
	res, err := tune.Tune(context.Background(), tu, key, cands, timer)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range res.Times {
		fmt.Printf("%s %v\n", t.Name, t.Median)
	}
	fmt.Println("winner", res.Winner.Name, "cached", res.Cached)

	again, _ := tune.New(dir, tune.Schedule{})
	res, _ = tune.Tune(context.Background(), again, key, cands, nil) // the timer is not needed
	fmt.Println("winner", res.Winner.Name, "cached", res.Cached)
	// Output:
	// tile64 5.096ms
	// tile128 1ms
	// tile256 17.384ms
	// winner tile128 cached false
	// winner tile128 cached true
}

// GemmConfig is the library's way to a GEMM configuration: the tuned winner when one is
// cached for the device and shape (TuneGemm, `kgen tune gemm`), else GemmSM90For's
// estimate; it never times.
func ExampleGemmConfig() {
	dir, _ := os.MkdirTemp("", "tune-example")
	defer os.RemoveAll(dir)
	dev, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	tu, _ := tune.New(dir, tune.Schedule{Warmup: 1, Reps: 1})
	p := tune.GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 64, K: 64}
	_, cached, _ := tune.GemmConfig(tu, dev.Info(), p)
	fmt.Println("before tuning, cached:", cached)
	res, err := tune.TuneGemm(context.Background(), tu, dev, p, tune.GemmOptions{Check: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, cached, _ := tune.GemmConfig(tu, dev.Info(), p)
	fmt.Println("after tuning, cached:", cached, "the winner:", cfg == res.Winner.Config)
	// Output:
	// before tuning, cached: false
	// after tuning, cached: true the winner: true
}
