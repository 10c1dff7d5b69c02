package tune

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// DirEnv names the environment variable that sets DefaultDir.
const DirEnv = "KGEN_TUNE_DIR"

// DefaultDir returns the cache folder: $KGEN_TUNE_DIR, else the user cache folder's
// kgen/tune (~/.cache/kgen/tune), else kgen-tune in the temporary folder.
func DefaultDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kgen", "tune")
	}
	return filepath.Join(os.TempDir(), "kgen-tune")
}

// MaxEntry bounds a cache entry's size in bytes: a larger file is a miss, never read.
const MaxEntry = 64 << 10

// entryFormat is the first field of every entry; another value is a miss.
const entryFormat = "kgen-tune 1"

// entry is one cache file.
type entry struct {
	Format  string            `json:"format"`
	Key     Key               `json:"key"`
	Winner  string            `json:"winner"`
	TimesNS map[string]int64  `json:"times_ns,omitempty"` // each working candidate's median
	Failed  map[string]string `json:"failed,omitempty"`   // each failed candidate's error
	Reps    int               `json:"reps"`
	When    time.Time         `json:"when"`
}

// Tuner times candidates and caches winners in a folder (see the package comment). Its
// methods are safe for concurrent use; tuners of the same key in one process (whatever
// Tuner they use) take turns, so a device times one candidate set at a time and the later
// ones find the earlier's winner. Tuners in other processes may time the same key at once;
// each then writes a whole entry and the last one stays.
//
// The zero Tuner has no folder: its methods return errors (or no entry) naming New.
type Tuner struct {
	dir   string
	sched Schedule
	from  string // where dir came from, for errors: "$KGEN_TUNE_DIR", "" (New's caller)
}

// New returns a tuner caching in dir ("": DefaultDir) with schedule s (zero fields: the
// defaults). It returns an error for an invalid schedule or a folder that exists and is not
// private (*cachefile.UnsafeError).
func New(dir string, s Schedule) (*Tuner, error) {
	from := ""
	if dir == "" {
		dir, from = DefaultDir(), "the default cache folder: set $"+DirEnv+" to use another"
		if os.Getenv(DirEnv) != "" {
			from = "$" + DirEnv
		}
	}
	s, err := s.norm()
	if err != nil {
		return nil, err
	}
	t := &Tuner{dir: dir, sched: s, from: from}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

// Dir returns the tuner's cache folder.
func (t *Tuner) Dir() string {
	if t == nil {
		return ""
	}
	return t.dir
}

// Schedule returns the tuner's schedule, defaults filled in.
func (t *Tuner) Schedule() Schedule {
	if t == nil {
		return Schedule{}
	}
	return t.sched
}

// errZero is the error of a method of the zero (or nil) Tuner.
var errZero = errors.New("tune: a Tuner without a folder (the zero Tuner or nil): make one with New")

// unsafeStakes says what whoever writes a tune cache folder could change.
const unsafeStakes = "which kernel configurations kgen runs (the cached winners)"

// check refuses the zero Tuner and a cache folder others may write.
func (t *Tuner) check() error {
	if t == nil || t.dir == "" {
		return errZero
	}
	if err := cachefile.CheckDir(t.dir); err != nil {
		var ue *cachefile.UnsafeError
		if errors.As(err, &ue) {
			ue.Stakes = unsafeStakes
		}
		if t.from != "" {
			return fmt.Errorf("tune: cache: %w (%s)", err, t.from)
		}
		return fmt.Errorf("tune: cache: %w", err)
	}
	return nil
}

// Path returns the file that holds k's winner: <kernel>-<32 hex digits of a sha256 of k>.json
// in the tuner's folder; "" for the zero Tuner.
func (t *Tuner) Path(k Key) string {
	if t == nil || t.dir == "" {
		return ""
	}
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(append([]byte(entryFormat+"\n"), b...))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k.Kernel)
	if len(name) > 40 {
		name = name[:40]
	}
	return filepath.Join(t.dir, name+"-"+hex.EncodeToString(sum[:16])+".json")
}

// Cached returns the name of k's cached winner, or false when there is none: no entry, or
// one that is not a regular private file, is larger than MaxEntry, does not parse, or names
// another key; a nil Tuner has none. It never times anything.
func (t *Tuner) Cached(k Key) (string, bool) {
	e, ok := t.read(k)
	return e.Winner, ok
}

func (t *Tuner) read(k Key) (entry, bool) {
	if t == nil || k.Check() != nil || t.check() != nil {
		return entry{}, false
	}
	p := t.Path(k)
	f, fi, err := cachefile.Open(p)
	if err != nil {
		return entry{}, false
	}
	f.Close()
	if cachefile.CheckFile(p, fi) != nil {
		return entry{}, false
	}
	b, err := cachefile.Read(p, MaxEntry, 0, nil)
	if err != nil {
		return entry{}, false
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&e) != nil || dec.More() {
		return entry{}, false
	}
	if e.Format != entryFormat || e.Key != k || checkText(e.Winner, true) != nil {
		return entry{}, false
	}
	return e, true
}

// Lookup returns the candidate named by k's cached winner, or false when there is none or
// it names none of cands (the candidates changed since). It never times anything.
func Lookup[C any](t *Tuner, k Key, cands []Candidate[C]) (Candidate[C], bool) {
	name, ok := t.Cached(k)
	if !ok {
		return Candidate[C]{}, false
	}
	for _, c := range cands {
		if c.Name == name {
			return c, true
		}
	}
	return Candidate[C]{}, false
}

// Forget removes k's entry; no entry is no error. A folder at the entry's path is left
// alone (an error); anything else there (a file, a link itself) is removed, as Tune's write
// would replace it.
func (t *Tuner) Forget(k Key) error {
	if t == nil || t.dir == "" {
		return errZero
	}
	p := t.Path(k)
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	if fi.IsDir() {
		return fmt.Errorf("tune: Forget: %s is a folder, not a file: left alone", p)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tune: %w", err)
	}
	return nil
}

// Result is what Tune found.
type Result[C any] struct {
	Key    Key
	Winner Candidate[C]
	Cached bool     // the winner came from the cache and nothing was timed
	Times  []Timing // every candidate's timing, in candidate order (none when Cached)
	Path   string   // the cache entry
}

// Tune returns k's winner among cands: the cached one when it names one of cands (nothing
// is timed), else the fastest under timer (Measure with the tuner's schedule), which is then
// cached. Failed candidates are in Result.Times with their errors. It returns an error for
// an invalid key or candidate list, a cache folder that is not private, no candidate
// working, ctx ending, or the winner not being stored (the Result is then filled in).
func Tune[C any](ctx context.Context, t *Tuner, k Key, cands []Candidate[C], timer Timer[C]) (Result[C], error) {
	return tune(ctx, t, k, cands, timer, false)
}

// Retune is Tune that times the candidates even when a winner is cached, and replaces it.
func Retune[C any](ctx context.Context, t *Tuner, k Key, cands []Candidate[C], timer Timer[C]) (Result[C], error) {
	return tune(ctx, t, k, cands, timer, true)
}

func tune[C any](ctx context.Context, t *Tuner, k Key, cands []Candidate[C], timer Timer[C], force bool) (Result[C], error) {
	res := Result[C]{Key: k}
	if err := checkCtx(ctx, "Tune"); err != nil {
		return res, err
	}
	if t == nil || t.dir == "" {
		return res, errZero
	}
	if err := k.Check(); err != nil {
		return res, err
	}
	if err := checkCandidates(cands); err != nil {
		return res, err
	}
	if err := t.check(); err != nil {
		return res, err
	}
	res.Path = t.Path(k)
	if !force {
		if c, ok := Lookup(t, k, cands); ok {
			res.Winner, res.Cached = c, true
			return res, nil
		}
	}
	unlock, err := lockPath(ctx, res.Path)
	if err != nil {
		return res, err
	}
	defer unlock()
	if !force { // another tuner of this process may have stored it while this one waited
		if c, ok := Lookup(t, k, cands); ok {
			res.Winner, res.Cached = c, true
			return res, nil
		}
	}
	ts, err := Measure(ctx, t.sched, cands, timer)
	if err != nil {
		return res, err
	}
	res.Times = ts
	best, err := Fastest(ts)
	if err != nil {
		return res, fmt.Errorf("%w (%s)", err, k)
	}
	res.Winner = cands[best]
	e := entry{Format: entryFormat, Key: k, Winner: res.Winner.Name, Reps: t.sched.Reps, When: time.Now().UTC()}
	for _, tm := range ts {
		if tm.Err != nil {
			if e.Failed == nil {
				e.Failed = map[string]string{}
			}
			e.Failed[tm.Name] = excerpt.Cut(tm.Err.Error(), maxErrText)
			continue
		}
		if e.TimesNS == nil {
			e.TimesNS = map[string]int64{}
		}
		e.TimesNS[tm.Name] = tm.Median.Nanoseconds()
	}
	if err := t.write(res.Path, e); err != nil {
		return res, err
	}
	return res, nil
}

// write stores e at p: a temporary file in the folder, renamed over p (which replaces
// whatever was at p but a folder).
func (t *Tuner) write(p string, e entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if len(b) > MaxEntry && len(e.Failed) > 0 { // long errors: keep the names only
		for n := range e.Failed {
			e.Failed[n] = "failed"
		}
		b, err = json.MarshalIndent(e, "", "  ")
	}
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	if len(b) > MaxEntry {
		return fmt.Errorf("tune: the entry for %s would be %d bytes, more than %d", e.Key, len(b), MaxEntry)
	}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return fmt.Errorf("tune: cache: %w", err)
	}
	if err := t.check(); err != nil {
		return err
	}
	f, err := os.CreateTemp(t.dir, ".tmp-*.json")
	if err != nil {
		return fmt.Errorf("tune: cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	err = errors.Join(werr, cerr)
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tune: storing the winner of %s: %w", e.Key, err)
	}
	return nil
}

// locks serializes the tuners of one process per cache entry.
var locks sync.Map // path -> chan struct{} (capacity 1)

// lockPath takes p's lock, waiting at most until ctx ends. A free lock is taken whatever
// ctx's state (the tuning's own steps report an ended context), so that the error below is
// only ever about a wait for another tuner.
func lockPath(ctx context.Context, p string) (func(), error) {
	v, _ := locks.LoadOrStore(p, make(chan struct{}, 1))
	ch := v.(chan struct{})
	unlock := func() { <-ch }
	select {
	case ch <- struct{}{}:
		return unlock, nil
	default:
	}
	select {
	case ch <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("tune: waiting for another tuner of the same key in this process: %w", ctx.Err())
	}
}
