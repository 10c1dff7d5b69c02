package tune

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
)

// Device identifies the hardware a winner was measured on.
type Device struct {
	Backend string `json:"backend"` // "gpu" or "emu"
	Name    string `json:"name"`    // "NVIDIA H100 80GB HBM3"
	Arch    string `json:"arch"`    // "sm_90"
	SMs     int    `json:"sms"`     // multiprocessors
	Driver  int    `json:"driver"`  // cuDriverGetVersion; 0 on the emulator
}

// DeviceOf returns the identity of the device info describes.
func DeviceOf(info jit.Info) Device {
	return Device{Backend: string(info.Backend), Name: info.Name, Arch: info.Arch, SMs: info.Multiproc, Driver: info.DriverVersion}
}

// Key names what a cached winner holds for.
type Key struct {
	Device Device `json:"device"`
	Kernel string `json:"kernel"` // the kernel family, "gemm_sm90"
	DTypes string `json:"dtypes"` // the element types, "bf16->bf16"
	Shape  string `json:"shape"`  // the shape class: ExactShape, Pow2Shape or the caller's own
}

// String is the key on one line.
func (k Key) String() string {
	d := k.Device
	return fmt.Sprintf("%s %s %s on %s %q (%s, %d SMs, driver %d)", k.Kernel, k.DTypes, k.Shape, d.Backend, d.Name, d.Arch, d.SMs, d.Driver)
}

// Check returns an error naming the first field of k that is empty, too long or holds a
// control character.
func (k Key) Check() error {
	for _, f := range []struct{ name, v string }{
		{"Kernel", k.Kernel}, {"DTypes", k.DTypes}, {"Shape", k.Shape},
		{"Device.Backend", k.Device.Backend}, {"Device.Arch", k.Device.Arch},
	} {
		if err := checkText(f.v, true); err != nil {
			return fmt.Errorf("tune: key field %s: %w", f.name, err)
		}
	}
	if err := checkText(k.Device.Name, false); err != nil {
		return fmt.Errorf("tune: key field Device.Name: %w", err)
	}
	return nil
}

// maxText bounds a key field or candidate name.
const maxText = 200

// checkText checks a key field or a candidate name: at most maxText bytes of printable
// characters, non-empty when need is set.
func checkText(s string, need bool) error {
	switch {
	case need && s == "":
		return errors.New("empty")
	case len(s) > maxText:
		return fmt.Errorf("%d bytes (at most %d)", len(s), maxText)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds a control character", s)
		}
	}
	return nil
}

// ExactShape is the shape class of exactly these extents: "128x4096x4096". Every shape then
// has its own winner.
func ExactShape(dims ...int) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, "x")
}

// Pow2Shape is the class of shapes whose extents round up to the same powers of two:
// "p2:128x4096x16384" holds 100x4096x14336 and 128x3000x9000. Nearby shapes then share a
// winner (one timing serves them all), at the cost of a pick made for another shape.
func Pow2Shape(dims ...int) string {
	r := make([]string, len(dims))
	for i, d := range dims {
		r[i] = ceilPow2(d)
	}
	return "p2:" + strings.Join(r, "x")
}

// ceilPow2 is the power of two at or above d (d itself when at most 1), as text: 2^63 for
// d above 2^62 does not fit an int.
func ceilPow2(d int) string {
	if d <= 1 {
		return strconv.Itoa(d)
	}
	return strconv.FormatUint(1<<bits.Len(uint(d-1)), 10)
}

// Candidate is one configuration to time, under a name that is stable from run to run (the
// cache stores the name).
type Candidate[C any] struct {
	Name   string
	Config C
}

// Timer returns one measurement of c: the time of one run (or the mean of a batch of runs).
// Tune calls it Warmup+Reps times per candidate; the first call may build and load the
// kernel. An error skips the candidate. It should return soon after ctx ends.
type Timer[C any] func(ctx context.Context, c Candidate[C]) (time.Duration, error)

// Abort wraps err for a Timer to return when its failure spoils every later measurement
// (a kernel fault that leaves the device unusable): Measure then stops with err instead of
// skipping the candidate, and Tune caches nothing.
func Abort(err error) error {
	if err == nil {
		return nil
	}
	return &abortError{err}
}

type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

// Timing is one candidate's measurement.
type Timing struct {
	Name    string
	Median  time.Duration   // of the timed calls; 0 when Err is set
	Samples []time.Duration // the timed calls, in order
	Err     error           // why the candidate was skipped
}

// Schedule says how many times Measure calls a Timer.
type Schedule struct {
	Warmup int // untimed calls per candidate before the rounds (0: DefaultWarmup)
	Reps   int // rounds of one timed call per candidate (0: DefaultReps)
}

// The default schedule, and the largest counts a Schedule may ask for (every rep keeps a
// sample per candidate).
const (
	DefaultWarmup = 2
	DefaultReps   = 15
	MaxCount      = 1 << 20
)

func (s Schedule) norm() (Schedule, error) {
	if s.Warmup < 0 || s.Reps < 0 || s.Warmup > MaxCount || s.Reps > MaxCount {
		return s, fmt.Errorf("tune: schedule Warmup %d, Reps %d: want counts from 0 to %d (0: the defaults %d and %d)", s.Warmup, s.Reps, MaxCount, DefaultWarmup, DefaultReps)
	}
	if s.Warmup == 0 {
		s.Warmup = DefaultWarmup
	}
	if s.Reps == 0 {
		s.Reps = DefaultReps
	}
	return s, nil
}

// checkCandidates checks that there are candidates and that their names are valid and
// distinct.
func checkCandidates[C any](cands []Candidate[C]) error {
	if len(cands) == 0 {
		return errors.New("tune: no candidates")
	}
	seen := map[string]bool{}
	for i, c := range cands {
		if err := checkText(c.Name, true); err != nil {
			return fmt.Errorf("tune: candidate %d's name: %w", i, err)
		}
		if seen[c.Name] {
			return fmt.Errorf("tune: two candidates are named %s (names must be distinct: the cache stores them)", excerpt.Quote(c.Name))
		}
		seen[c.Name] = true
	}
	return nil
}

// Measure times every candidate with timer on schedule s and returns their timings in
// candidate order: s.Warmup untimed calls of each, then s.Reps rounds of one call of each
// candidate still working. A candidate whose call fails, or returns a time that is not
// positive, is dropped from later rounds with its Err set. Measure returns an error for no
// candidates, duplicate or invalid names, a call failing with Abort, or ctx ending (checked
// before every call, and after a failing one: a failure while ctx ends is the context's,
// not the candidate's).
func Measure[C any](ctx context.Context, s Schedule, cands []Candidate[C], timer Timer[C]) ([]Timing, error) {
	if err := checkCtx(ctx, "Measure"); err != nil {
		return nil, err
	}
	if err := checkCandidates(cands); err != nil {
		return nil, err
	}
	if timer == nil {
		return nil, errors.New("tune: Measure: the timer is nil")
	}
	s, err := s.norm()
	if err != nil {
		return nil, err
	}
	ts := make([]Timing, len(cands))
	call := func(i int) (time.Duration, bool, error) {
		if err := ctx.Err(); err != nil {
			return 0, false, fmt.Errorf("tune: %w", err)
		}
		d, err := timer(ctx, cands[i])
		if err != nil && ctx.Err() != nil {
			return 0, false, fmt.Errorf("tune: timing %s: %w", cands[i].Name, ctx.Err())
		}
		var ab *abortError
		if errors.As(err, &ab) {
			return 0, false, bounded("tune: timing "+cands[i].Name+": ", ab.err)
		}
		if err == nil && d <= 0 {
			err = fmt.Errorf("the timer returned %v (want a positive time)", d)
		}
		if err != nil {
			ts[i].Err = err
			return 0, false, nil
		}
		return d, true, nil
	}
	for i := range cands {
		ts[i].Name = cands[i].Name
		for w := 0; w < s.Warmup && ts[i].Err == nil; w++ {
			if _, _, err := call(i); err != nil {
				return nil, err
			}
		}
	}
	for r := 0; r < s.Reps; r++ {
		for i := range cands {
			if ts[i].Err != nil {
				continue
			}
			d, ok, err := call(i)
			if err != nil {
				return nil, err
			}
			if ok {
				ts[i].Samples = append(ts[i].Samples, d)
			}
		}
	}
	for i := range ts {
		if ts[i].Err == nil {
			ts[i].Median = median(ts[i].Samples)
		} else {
			ts[i].Samples = nil
		}
	}
	return ts, nil
}

// median returns the middle of ds (the lower middle of an even count).
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2]
}

// Fastest returns the index of the timing of the smallest median among those without an
// error (the earlier on a tie), or an error joining every candidate's when none worked. A
// median that is not a positive duration (a Timing no measurement made) counts as an error.
func Fastest(ts []Timing) (int, error) {
	best := -1
	var errs []error
	for i, t := range ts {
		if t.Err == nil && t.Median <= 0 {
			t.Err = fmt.Errorf("median %v: not a measured time", t.Median)
		}
		if t.Err != nil {
			errs = append(errs, bounded(t.Name+": ", t.Err))
			continue
		}
		if best < 0 || t.Median < ts[best].Median {
			best = i
		}
	}
	if best < 0 {
		return -1, fmt.Errorf("tune: no candidate works: %w", errors.Join(errs...))
	}
	return best, nil
}

// Verification is a winner's time beside every candidate's, measured together.
type Verification struct {
	Winner string
	Times  []Timing // every candidate's, in candidate order
	Best   int      // the index of the fastest in Times
	Ratio  float64  // the winner's median over the fastest's: 1 when the winner is fastest
}

// Verify measures every candidate (Measure with schedule s) and compares the one named
// winner with the fastest: the check that a cached pick is still the best, within noise. It
// returns an error when winner is not among cands, or fails to run, or Measure fails.
func Verify[C any](ctx context.Context, s Schedule, winner string, cands []Candidate[C], timer Timer[C]) (Verification, error) {
	v := Verification{Winner: winner, Best: -1}
	if err := checkCtx(ctx, "Verify"); err != nil {
		return v, err
	}
	w := -1
	for i, c := range cands {
		if c.Name == winner {
			w = i
		}
	}
	if w < 0 {
		return v, fmt.Errorf("tune: Verify: the winner %s is none of the %d candidates", excerpt.Quote(winner), len(cands))
	}
	ts, err := Measure(ctx, s, cands, timer)
	if err != nil {
		return v, err
	}
	v.Times = ts
	if ts[w].Err != nil {
		return v, bounded("tune: Verify: the winner "+winner+" failed: ", ts[w].Err)
	}
	if v.Best, err = Fastest(ts); err != nil {
		return v, err
	}
	v.Ratio = float64(ts[w].Median) / float64(ts[v.Best].Median)
	return v, nil
}

// checkCtx returns an error naming fn for a nil ctx.
func checkCtx(ctx context.Context, fn string) error {
	if ctx == nil {
		return fmt.Errorf("tune: %s: nil context", fn)
	}
	return nil
}

// maxErrText bounds the text of another's error (a timer's: a build log) that tune's own
// errors quote.
const maxErrText = 1 << 10

// boundedError is err behind prefix, its message cut to maxErrText bytes; it unwraps to err.
type boundedError struct {
	prefix string
	err    error
}

// bounded returns err behind prefix with its message bounded (nil for nil).
func bounded(prefix string, err error) error {
	if err == nil {
		return nil
	}
	return &boundedError{prefix, err}
}

func (e *boundedError) Error() string { return e.prefix + excerpt.Cut(e.err.Error(), maxErrText) }
func (e *boundedError) Unwrap() error { return e.err }
