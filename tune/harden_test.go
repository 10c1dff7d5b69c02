package tune

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/kernels"
)

// TestNilContext: every exported function taking a context returns an error for a nil one,
// never a panic.
func TestNilContext(t *testing.T) {
	var calls atomic.Int64
	timer := fakeTimer(&calls)
	tu := newTuner(t, t.TempDir())
	k := testKey("nilctx")
	d := emuDevice(t)
	p := GemmProblem{In: dsl.BF16, Out: dsl.BF16, M: 64, N: 64, K: 64}
	g, err := NewGemmTimer(d, p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var nilCtx context.Context
	for name, f := range map[string]func() error{
		"Measure": func() error { _, err := Measure(nilCtx, Schedule{}, fakeCands(), timer); return err },
		"Tune":    func() error { _, err := Tune(nilCtx, tu, k, fakeCands(), timer); return err },
		"Retune":  func() error { _, err := Retune(nilCtx, tu, k, fakeCands(), timer); return err },
		"Verify":  func() error { _, err := Verify(nilCtx, Schedule{}, "fast", fakeCands(), timer); return err },
		"TuneGemm": func() error {
			_, err := TuneGemm(nilCtx, tu, d, p, GemmOptions{})
			return err
		},
		"VerifyGemm": func() error {
			_, err := VerifyGemm(nilCtx, d, p, GemmCandidates(p.In, p.Out)[0].Name, Schedule{}, false)
			return err
		},
		"GemmTimer.Time": func() error { _, err := g.Time(nilCtx, GemmCandidates(p.In, p.Out)[0]); return err },
	} {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = errors.New("panic")
					t.Errorf("%s(nil ctx) panicked: %v", name, r)
				}
			}()
			return f()
		}()
		if err == nil || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("%s(nil ctx) = %v; want an error naming the nil context", name, err)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("the timer ran %d times", calls.Load())
	}
}

// TestZeroValues: the zero GemmTimer and the zero Tuner are errors naming their
// constructors, never panics, and the zero Tuner touches no file (not even relative to the
// current folder).
func TestZeroValues(t *testing.T) {
	ctx := context.Background()
	var g GemmTimer
	_, err := func() (d time.Duration, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = errors.New("panic")
				t.Errorf("zero GemmTimer.Time panicked: %v", r)
			}
		}()
		return g.Time(ctx, Candidate[kernels.GemmSM90Config]{Name: "x", Config: kernels.DefaultGemmSM90Config(dsl.BF16)})
	}()
	if err == nil || !strings.Contains(err.Error(), "NewGemmTimer") {
		t.Errorf("zero GemmTimer.Time = %v; want an error naming NewGemmTimer", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("zero GemmTimer.Close = %v", err)
	}

	cwd := t.TempDir()
	old, _ := os.Getwd()
	if err := os.Chdir(cwd); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(old)
	var zt Tuner
	k := testKey("zero")
	var calls atomic.Int64
	if p := zt.Path(k); p != "" {
		t.Errorf("zero Tuner Path = %q; want none", p)
	}
	// A file where a relative path would point: the zero Tuner must neither read nor remove it.
	name := filepath.Base(newTuner(t, ".").Path(k))
	if err := os.WriteFile(name, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Tune(ctx, &zt, k, fakeCands(), fakeTimer(&calls)); err == nil || !strings.Contains(err.Error(), "New") {
		t.Errorf("Tune on the zero Tuner = %v; want an error naming New", err)
	}
	if err := zt.Forget(k); err == nil || !strings.Contains(err.Error(), "New") {
		t.Errorf("Forget on the zero Tuner = %v; want an error naming New", err)
	}
	if _, ok := zt.Cached(k); ok {
		t.Error("the zero Tuner has a cached winner")
	}
	if _, err := os.Stat(name); err != nil {
		t.Errorf("the zero Tuner removed %s: %v", name, err)
	}
	if calls.Load() != 0 {
		t.Errorf("the zero Tuner timed %d calls", calls.Load())
	}
	ents, _ := os.ReadDir(cwd)
	if len(ents) != 1 {
		t.Errorf("the zero Tuner wrote in the current folder: %v", ents)
	}
}

// TestNewGemmTimerHuge: a shape whose matrices cannot be held is an error naming the shape,
// before anything is allocated on the host (no makeslice panic, no fatal out-of-memory).
func TestNewGemmTimerHuge(t *testing.T) {
	d := emuDevice(t)
	for _, p := range []GemmProblem{
		{In: dsl.F16, Out: dsl.F16, M: 1<<31 - 1, N: 8, K: 1<<31 - 8},
		{In: dsl.BF16, Out: dsl.BF16, M: 1 << 20, N: 1 << 20, K: 1 << 20},
	} {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = errors.New("panic")
					t.Errorf("NewGemmTimer(%s) panicked: %v", p, r)
				}
			}()
			g, err := NewGemmTimer(d, p)
			if g != nil {
				g.Close()
			}
			return err
		}()
		if err == nil || !strings.Contains(err.Error(), p.String()) {
			t.Errorf("NewGemmTimer(%s) = %v; want an error naming the shape", p, err)
		}
	}
}

// TestPow2ShapeHuge: extents above 2^62 round to 2^63, printed as such (not negative).
func TestPow2ShapeHuge(t *testing.T) {
	if got := Pow2Shape(1<<62+1, 3); got != "p2:9223372036854775808x4" {
		t.Errorf("Pow2Shape(2^62+1, 3) = %q", got)
	}
}

// TestForgetFolder: Forget leaves a folder at the entry's path alone (an error), removing
// only files.
func TestForgetFolder(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	k := testKey("dir")
	if err := os.Mkdir(tu.Path(k), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := tu.Forget(k); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("Forget of a folder entry = %v; want an error", err)
	}
	if fi, err := os.Stat(tu.Path(k)); err != nil || !fi.IsDir() {
		t.Errorf("Forget removed the folder: %v", err)
	}
}

// TestUnsafeDirWording: the refusal of a tuner's folder says what the tune cache holds (not
// jit's code and checksums) and names $KGEN_TUNE_DIR only when the folder came from it.
func TestUnsafeDirWording(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	defer os.Chmod(dir, 0o755)
	var ue *cachefile.UnsafeError
	_, err := New(dir, Schedule{})
	if !errors.As(err, &ue) || strings.Contains(err.Error(), DirEnv) || strings.Contains(err.Error(), "code kgen loads") || !strings.Contains(err.Error(), "winner") {
		t.Errorf("New(dir) on a world-writable folder: %v", err)
	}
	t.Setenv(DirEnv, dir)
	_, err = New("", Schedule{})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "$"+DirEnv) {
		t.Errorf("New(\"\") with $%s on a world-writable folder: %v", DirEnv, err)
	}
}

// TestBoundedErrors: a timer's huge error is quoted bounded in Tune's and Verify's errors
// (still unwrapping to it) and in the cached entry.
func TestBoundedErrors(t *testing.T) {
	huge := errors.New(strings.Repeat("x", 1<<20))
	timer := func(ctx context.Context, c Candidate[int]) (time.Duration, error) { return 0, huge }
	tu := newTuner(t, t.TempDir())
	_, err := Tune(context.Background(), tu, testKey("huge"), fakeCands(), timer)
	if err == nil || len(err.Error()) > 8<<10 || !errors.Is(err, huge) {
		t.Errorf("Tune with a 1 MB timer error: %d bytes, unwraps %v", len(err.Error()), errors.Is(err, huge))
	}
	_, err = Verify(context.Background(), Schedule{Warmup: 1, Reps: 1}, "fast", fakeCands(), timer)
	if err == nil || len(err.Error()) > 8<<10 || !errors.Is(err, huge) {
		t.Errorf("Verify with a 1 MB timer error: %d bytes", len(err.Error()))
	}
	abort := func(ctx context.Context, c Candidate[int]) (time.Duration, error) { return 0, Abort(huge) }
	_, err = Measure(context.Background(), Schedule{}, fakeCands(), abort)
	if err == nil || len(err.Error()) > 8<<10 || !errors.Is(err, huge) {
		t.Errorf("Measure with a 1 MB abort: %d bytes", len(err.Error()))
	}
}
