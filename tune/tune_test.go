package tune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/internal/cachefile"
)

// testKey is a key for the fake kernel.
func testKey(shape string) Key {
	return Key{Device: Device{Backend: "gpu", Name: "Fake GPU", Arch: "sm_90", SMs: 132, Driver: 13000},
		Kernel: "fake", DTypes: "bf16->bf16", Shape: shape}
}

// fakeCands are candidates whose config is their true time in microseconds.
func fakeCands() []Candidate[int] {
	return []Candidate[int]{{"slow", 300}, {"fast", 100}, {"middle", 200}, {"close", 104}}
}

// fakeTimer returns each candidate's time with a spread of +-10% that moves from call to
// call (the median stays at the true time), counting its calls.
func fakeTimer(calls *atomic.Int64) Timer[int] {
	var mu sync.Mutex
	n := map[string]int{}
	return func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		calls.Add(1)
		mu.Lock()
		i := n[c.Name]
		n[c.Name]++
		mu.Unlock()
		jitter := []int{0, 10, -10, 5, -5}[i%5] // percent
		return time.Duration(c.Config*(100+jitter)) * time.Microsecond / 100, nil
	}
}

// failTimer fails the test when called: the cache must answer.
func failTimer(t *testing.T) Timer[int] {
	return func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		t.Errorf("timer called for %s: the cache should have answered", c.Name)
		return 0, errors.New("must not be timed")
	}
}

func newTuner(t *testing.T, dir string) *Tuner {
	t.Helper()
	tu, err := New(dir, Schedule{Warmup: 1, Reps: 5})
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// TestTunePicksFastest: under a fake timer the fastest candidate wins, every candidate is
// timed Warmup+Reps times with its median reported, and the winner is cached.
func TestTunePicksFastest(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	var calls atomic.Int64
	k := testKey("128x4096x4096")
	res, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if res.Winner.Name != "fast" || res.Cached {
		t.Fatalf("winner %s (cached %v), want fast timed", res.Winner.Name, res.Cached)
	}
	if got, want := calls.Load(), int64(4*(1+5)); got != want {
		t.Errorf("%d timer calls, want %d", got, want)
	}
	for i, tm := range res.Times {
		c := fakeCands()[i]
		if tm.Name != c.Name || len(tm.Samples) != 5 || tm.Err != nil {
			t.Errorf("timing %d: %+v", i, tm)
		}
		// the samples are the true time with jitter 10, -10, 5, -5, 0 (after one warmup call)
		if want := time.Duration(c.Config) * time.Microsecond; tm.Median != want {
			t.Errorf("%s: median %v, want %v", c.Name, tm.Median, want)
		}
	}
	if name, ok := tu.Cached(k); !ok || name != "fast" {
		t.Fatalf("Cached = %q, %v; want fast", name, ok)
	}
	if _, ok := tu.Cached(testKey("128x4096x4097")); ok {
		t.Error("another shape's key hit the cache")
	}
	// Retune times again.
	calls.Store(0)
	res, err = Retune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
	if err != nil || res.Cached || calls.Load() == 0 || res.Winner.Name != "fast" {
		t.Fatalf("Retune: %v, cached %v, %d calls, winner %s", err, res.Cached, calls.Load(), res.Winner.Name)
	}
	if err := tu.Forget(k); err != nil {
		t.Fatal(err)
	}
	if _, ok := tu.Cached(k); ok {
		t.Error("Forget left the winner")
	}
	if err := tu.Forget(k); err != nil {
		t.Errorf("Forget of no entry: %v", err)
	}
}

// TestSecondTunerUsesCache: a new Tuner on the same folder, in this process and in a new
// one, returns the winner without calling its timer.
func TestSecondTunerUsesCache(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int64
	k := testKey("1024x14336x4096")
	if _, err := Tune(context.Background(), newTuner(t, dir), k, fakeCands(), fakeTimer(&calls)); err != nil {
		t.Fatal(err)
	}
	res, err := Tune(context.Background(), newTuner(t, dir), k, fakeCands(), failTimer(t))
	if err != nil || !res.Cached || res.Winner.Name != "fast" || res.Winner.Config != 100 || len(res.Times) != 0 {
		t.Fatalf("second tuner: %+v, %v", res, err)
	}
	if c, ok := Lookup(newTuner(t, dir), k, fakeCands()); !ok || c.Name != "fast" {
		t.Fatalf("Lookup = %v, %v", c, ok)
	}
	// A candidate list without the winner is a miss (the candidates changed).
	if _, ok := Lookup(newTuner(t, dir), k, fakeCands()[2:]); ok {
		t.Error("Lookup found a winner that is no candidate")
	}
	// A fresh process: its timer fails if called.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSecondProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "KGEN_TUNE_HELPER=1", DirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "winner fast cached") {
		t.Fatalf("second process: %v\n%s", err, out)
	}
}

// TestHelperSecondProcess is TestSecondTunerUsesCache's second process.
func TestHelperSecondProcess(t *testing.T) {
	if os.Getenv("KGEN_TUNE_HELPER") != "1" {
		t.Skip("run by TestSecondTunerUsesCache")
	}
	tu, err := New("", Schedule{}) // DefaultDir: $KGEN_TUNE_DIR
	if err != nil {
		t.Fatal(err)
	}
	res, err := Tune(context.Background(), tu, testKey("1024x14336x4096"), fakeCands(), failTimer(t))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("winner %s cached %v\n", res.Winner.Name, res.Cached)
}

// TestFailingCandidates: candidates whose timer fails are skipped and reported; none working
// is an error naming each failure.
func TestFailingCandidates(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	var calls atomic.Int64
	good := fakeTimer(&calls)
	timer := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		switch c.Name {
		case "fast":
			return 0, errors.New("ptxas: too many registers")
		case "close":
			if calls.Load() > 8 { // fails in the rounds, after its warmup
				return 0, errors.New("launch failed")
			}
		case "slow":
			return -time.Second, nil
		}
		return good(ctx, c)
	}
	res, err := Tune(context.Background(), tu, testKey("a"), fakeCands(), timer)
	if err != nil {
		t.Fatal(err)
	}
	if res.Winner.Name != "middle" {
		t.Errorf("winner %s, want middle", res.Winner.Name)
	}
	for _, tm := range res.Times {
		failed := tm.Name != "middle"
		if (tm.Err != nil) != failed || failed && tm.Samples != nil {
			t.Errorf("%s: %+v", tm.Name, tm)
		}
	}
	if !strings.Contains(res.Times[0].Err.Error(), "positive") || !strings.Contains(res.Times[1].Err.Error(), "ptxas") {
		t.Errorf("errors: %v; %v", res.Times[0].Err, res.Times[1].Err)
	}
	all := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		return 0, fmt.Errorf("build of %s failed", c.Name)
	}
	_, err = Tune(context.Background(), tu, testKey("b"), fakeCands(), all)
	if err == nil || !strings.Contains(err.Error(), "no candidate works") || !strings.Contains(err.Error(), "build of close failed") {
		t.Fatalf("all failing: %v", err)
	}
	if _, ok := tu.Cached(testKey("b")); ok {
		t.Error("a winner was cached when none worked")
	}
}

// TestAbort: a timer failing with Abort stops the tuning with its error, caching nothing,
// where a plain failure skips the candidate.
func TestAbort(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	var calls atomic.Int64
	good := fakeTimer(&calls)
	fault := errors.New("CUDA_ERROR_ILLEGAL_ADDRESS")
	timer := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		if c.Name == "middle" {
			return 0, Abort(fault)
		}
		return good(ctx, c)
	}
	_, err := Tune(context.Background(), tu, testKey("abort"), fakeCands(), timer)
	if !errors.Is(err, fault) || !strings.Contains(err.Error(), "timing middle") {
		t.Fatalf("Tune: %v, want the fault while timing middle", err)
	}
	if got := calls.Load(); got != 2 { // the warm-up of slow and fast, then middle's abort
		t.Errorf("%d calls after the abort started, want 2", got)
	}
	if _, ok := tu.Cached(testKey("abort")); ok {
		t.Error("an aborted run cached a winner")
	}
	if Abort(nil) != nil {
		t.Error("Abort(nil) is not nil")
	}
}

// TestLongErrors: candidates failing with long messages still leave a stored entry under
// MaxEntry (their errors cut to "failed"), and a winner.
func TestLongErrors(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	var calls atomic.Int64
	good := fakeTimer(&calls)
	var cands []Candidate[int]
	for i := 0; i < 20; i++ {
		cands = append(cands, Candidate[int]{fmt.Sprintf("c%d", i), 100 + i})
	}
	timer := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		if c.Config > 100 {
			return 0, errors.New(strings.Repeat("ptxas error; ", 1000))
		}
		return good(ctx, c)
	}
	res, err := Tune(context.Background(), tu, testKey("long"), cands, timer)
	if err != nil || res.Winner.Name != "c0" {
		t.Fatalf("%v, winner %q", err, res.Winner.Name)
	}
	b, err := os.ReadFile(res.Path)
	// Each failed candidate's error is kept, cut to maxErrText bytes.
	if err != nil || len(b) > MaxEntry || !strings.Contains(string(b), `"c19": "ptxas error; `) || !strings.Contains(string(b), `... (13000 bytes)`) {
		t.Fatalf("entry of %d bytes: %v\n%.300s", len(b), err, b)
	}
	if name, ok := tu.Cached(testKey("long")); !ok || name != "c0" {
		t.Errorf("Cached = %q %v", name, ok)
	}
}

// TestBadInput: invalid keys, candidate lists and schedules are errors naming the field.
func TestBadInput(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	var calls atomic.Int64
	bad := testKey("x")
	bad.Kernel = ""
	ctl := testKey("x\n")
	for _, c := range []struct {
		k     Key
		cands []Candidate[int]
		want  string
	}{
		{bad, fakeCands(), "key field Kernel: empty"},
		{ctl, fakeCands(), "key field Shape"},
		{testKey("x"), nil, "no candidates"},
		{testKey("x"), []Candidate[int]{{"a", 1}, {"a", 2}}, "two candidates are named"},
		{testKey("x"), []Candidate[int]{{"", 1}}, "candidate 0's name: empty"},
	} {
		if _, err := Tune(context.Background(), tu, c.k, c.cands, fakeTimer(&calls)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.k, err, c.want)
		}
	}
	if calls.Load() != 0 {
		t.Error("bad input was timed")
	}
	if _, err := New(t.TempDir(), Schedule{Reps: -1}); err == nil || !strings.Contains(err.Error(), "Reps -1") {
		t.Errorf("negative reps: %v", err)
	}
	if _, err := Tune[int](context.Background(), nil, testKey("x"), fakeCands(), fakeTimer(&calls)); err == nil {
		t.Error("nil tuner")
	}
	var none *Tuner
	if _, ok := none.Cached(testKey("x")); ok {
		t.Error("a nil tuner has a winner")
	}
	if _, ok := Lookup(none, testKey("x"), fakeCands()); ok {
		t.Error("a nil tuner has a winner")
	}
	if none.Forget(testKey("x")) == nil {
		t.Error("Forget on a nil tuner")
	}
	if _, err := Measure[int](context.Background(), Schedule{}, fakeCands(), nil); err == nil {
		t.Error("nil timer")
	}
}

// TestHostileEntries: an entry that is garbage, of another key or format, too large, a
// symlink, a FIFO or a folder is a miss; Tune then times again and rewrites it (except a
// folder, which it reports after timing).
func TestHostileEntries(t *testing.T) {
	dir := t.TempDir()
	tu := newTuner(t, dir)
	k := testKey("64x64x64")
	var calls atomic.Int64
	if _, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls)); err != nil {
		t.Fatal(err)
	}
	p := tu.Path(k)
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	other := testKey("64x64x65")
	otherPath := tu.Path(other)
	otherEntry := strings.Replace(string(good), `"64x64x64"`, `"64x64x65"`, 1)
	os.WriteFile(otherPath, []byte(otherEntry), 0o644)
	if name, ok := tu.Cached(other); !ok || name != "fast" {
		t.Fatalf("the edited entry does not hold: %q %v", name, ok)
	}
	huge := strings.Replace(string(good), `"format"`, `"format": "`+strings.Repeat("x", MaxEntry)+`", "format"`, 1)
	cases := map[string]func() error{
		"garbage":   func() error { return os.WriteFile(p, []byte("\x00\xffnot json"), 0o644) },
		"truncated": func() error { return os.WriteFile(p, good[:len(good)/2], 0o644) },
		"other key": func() error { return os.WriteFile(p, []byte(otherEntry), 0o644) },
		"format": func() error {
			return os.WriteFile(p, []byte(strings.Replace(string(good), "kgen-tune 1", "kgen-tune 0", 1)), 0o644)
		},
		"extra field": func() error {
			return os.WriteFile(p, []byte(strings.Replace(string(good), `"winner"`, `"evil": 1, "winner"`, 1)), 0o644)
		},
		"two values": func() error { return os.WriteFile(p, append(append([]byte{}, good...), good...), 0o644) },
		"empty name": func() error {
			return os.WriteFile(p, []byte(strings.Replace(string(good), `"winner": "fast"`, `"winner": ""`, 1)), 0o644)
		},
		"huge":        func() error { return os.WriteFile(p, []byte(huge), 0o644) },
		"symlink":     func() error { return os.Symlink(otherPath, p) },
		"world-write": func() error { os.WriteFile(p, good, 0o644); return os.Chmod(p, 0o666) },
	}
	if runtime.GOOS != "windows" {
		cases["fifo"] = func() error { return syscall.Mkfifo(p, 0o644) }
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			os.Remove(p)
			if err := mk(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			var hit bool
			go func() { _, hit = tu.Cached(k); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Cached blocked")
			}
			if hit {
				t.Fatal("a hostile entry was a hit")
			}
			calls.Store(0)
			res, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
			if err != nil || res.Cached || calls.Load() == 0 {
				t.Fatalf("Tune after a hostile entry: %v, cached %v, %d calls", err, res.Cached, calls.Load())
			}
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("not rewritten as a regular file: %v %v", fi, err)
			}
			if name, ok := tu.Cached(k); !ok || name != "fast" {
				t.Fatalf("after the rewrite Cached = %q %v", name, ok)
			}
		})
	}
	// A folder at the entry's path: a miss; the store fails after timing, with the winner.
	os.Remove(p)
	os.Mkdir(p, 0o755)
	os.WriteFile(filepath.Join(p, "x"), nil, 0o644)
	if _, ok := tu.Cached(k); ok {
		t.Fatal("a folder was a hit")
	}
	res, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
	if err == nil || !strings.Contains(err.Error(), "storing the winner") || res.Winner.Name != "fast" {
		t.Fatalf("folder at the entry: %v, winner %q", err, res.Winner.Name)
	}
}

// TestUnsafeDir: a cache folder writable by others is refused by New, missed by Cached and
// refused by Tune before timing.
func TestUnsafeDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	dir := t.TempDir()
	tu := newTuner(t, dir)
	var calls atomic.Int64
	k := testKey("8x8x8")
	if _, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	defer os.Chmod(dir, 0o755)
	var ue *cachefile.UnsafeError
	if _, err := New(dir, Schedule{}); !errors.As(err, &ue) {
		t.Errorf("New on a world-writable folder: %v", err)
	}
	if _, ok := tu.Cached(k); ok {
		t.Error("Cached read a world-writable folder")
	}
	calls.Store(0)
	if _, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls)); !errors.As(err, &ue) || calls.Load() != 0 {
		t.Errorf("Tune on a world-writable folder: %v after %d calls", err, calls.Load())
	}
}

// TestConcurrentTuners: tuners of the same key at once (two Tuners on one folder, several
// goroutines each) time the candidates once and agree on the winner; the entry stays whole.
func TestConcurrentTuners(t *testing.T) {
	dir := t.TempDir()
	tus := []*Tuner{newTuner(t, dir), newTuner(t, dir)}
	var calls atomic.Int64
	timer := fakeTimer(&calls)
	k := testKey("4096x4096x4096")
	var wg sync.WaitGroup
	results := make([]Result[int], 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Tune(context.Background(), tus[i%2], k, fakeCands(), timer)
		}()
	}
	wg.Wait()
	timed := 0
	for i, r := range results {
		if errs[i] != nil || r.Winner.Name != "fast" {
			t.Errorf("tuner %d: %v, winner %q", i, errs[i], r.Winner.Name)
		}
		if !r.Cached {
			timed++
		}
	}
	if timed != 1 || calls.Load() != int64(4*6) {
		t.Errorf("%d tuners timed, %d calls; want 1 and %d", timed, calls.Load(), 4*6)
	}
	// Readers while writers replace the entry see a whole one.
	stop := make(chan struct{})
	var bad atomic.Int64
	var rw sync.WaitGroup
	rw.Add(1)
	go func() {
		defer rw.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if name, ok := tus[1].Cached(k); !ok || name != "fast" {
				bad.Add(1)
			}
		}
	}()
	for i := 0; i < 10; i++ {
		if _, err := Retune(context.Background(), tus[0], k, fakeCands(), timer); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	rw.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d reads during rewrites missed", bad.Load())
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestContextCancel: a context ending during the timings stops Tune with the context's
// error after the call in flight, caching nothing; one ending while a tuner waits for
// another of the same key stops the wait.
func TestContextCancel(t *testing.T) {
	tu := newTuner(t, t.TempDir())
	k := testKey("1x1x1")
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	timer := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		if calls.Add(1) == 7 {
			cancel()
			<-ctx.Done() // a timer honouring ctx returns its error
			return 0, ctx.Err()
		}
		return time.Millisecond, nil
	}
	_, err := Tune(ctx, tu, k, fakeCands(), timer)
	if !errors.Is(err, context.Canceled) || calls.Load() != 7 {
		t.Fatalf("cancelled: %v after %d calls (want context.Canceled after 7)", err, calls.Load())
	}
	if _, ok := tu.Cached(k); ok {
		t.Error("a cancelled run cached a winner")
	}
	// A tuner waiting for another of the same key.
	started, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, c Candidate[int]) (time.Duration, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return time.Millisecond, nil
	}
	first := make(chan error)
	go func() { _, err := Tune(context.Background(), tu, k, fakeCands()[:1], slow); first <- err }()
	<-started
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = Tune(ctx2, tu, k, fakeCands()[:1], slow)
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the first tuner: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another tuner") {
		t.Fatalf("waiting: %v", err)
	}
}

func TestShapeClasses(t *testing.T) {
	if s := ExactShape(128, 4096, 14336); s != "128x4096x14336" {
		t.Error(s)
	}
	for _, c := range []struct {
		dims []int
		want string
	}{
		{[]int{100, 4096, 14336}, "p2:128x4096x16384"},
		{[]int{128, 3000, 9000}, "p2:128x4096x16384"},
		{[]int{129, 1, 0}, "p2:256x1x0"},
	} {
		if s := Pow2Shape(c.dims...); s != c.want {
			t.Errorf("Pow2Shape%v = %s, want %s", c.dims, s, c.want)
		}
	}
}
