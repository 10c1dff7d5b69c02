package devlib

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/ptx"
)

// Per-function builds: each NVSHMEM function's device code is compiled once per (NVSHMEM
// version and bitcode, target, function, tools) and kept in the cache, so that a kernel
// calling five functions links five cached pieces instead of compiling them, and a kernel
// calling a sixth compiles only that one.
//
// A unit is one function's PTX (the function, exported, plus everything it calls, internal
// to the unit) and, when ptxas is found, its relocatable cubin (ptxas -c). Units link side
// by side: their internal helpers are file-local, so two units holding the same helper do
// not collide, and nvshmemi_device_state_d stays an external the archive defines.

// eachFormat versions the unit entries.
const eachFormat = "kgen-devlib-unit v1"

// Unit is one function's device code.
type Unit struct {
	Func string
	// PTX is the unit's devlib PTX, with the header ParseHeader reads (Funcs = [Func]).
	PTX []byte
	// Object is the relocatable cubin ptxas -c made from PTX (nil when Set.Objects is false):
	// the JIT linker takes it as CU_JIT_INPUT_CUBIN, nvlink as an input, with no compile.
	Object []byte
	// Cached says both came from the cache.
	Cached bool
}

// Set is a per-function build (BuildEach).
type Set struct {
	Version string
	Target  ptx.Target
	// Archive is libnvshmem_device.a, the link's last input.
	Archive string
	// Units are the requested functions' units, sorted by name.
	Units []Unit
	// Objects says every unit has its relocatable cubin.
	Objects bool
	// Hits and Misses count the units found in and missing from the cache.
	Hits, Misses int
	// Elapsed is how long BuildEach took.
	Elapsed time.Duration
}

// Funcs lists the set's functions.
func (s *Set) Funcs() []string {
	out := make([]string, len(s.Units))
	for i, u := range s.Units {
		out[i] = u.Func
	}
	return out
}

// PTXs returns the units' PTX in order.
func (s *Set) PTXs() [][]byte {
	out := make([][]byte, len(s.Units))
	for i, u := range s.Units {
		out[i] = u.PTX
	}
	return out
}

// ObjectList returns the units' relocatable cubins in order (nil when Objects is false).
func (s *Set) ObjectList() [][]byte {
	if !s.Objects {
		return nil
	}
	out := make([][]byte, len(s.Units))
	for i, u := range s.Units {
		out[i] = u.Object
	}
	return out
}

// EachOptions tune BuildEach.
type EachOptions struct {
	// Jobs is how many functions compile at once; 0 means runtime.NumCPU().
	Jobs int
	// Objects also assembles every unit into a relocatable cubin with ptxas (found by
	// package internal/toolchain); without ptxas BuildEach fails and says so.
	Objects bool
	// Progress, when set, is called after each unit is ready (from one goroutine at a
	// time): done of total, and the unit.
	Progress func(done, total int, u *Unit)
}

// BuildEach builds (or takes from the cache) one unit per function of funcs for target, in
// parallel. The cache key of a unit holds the NVSHMEM version, the bitcode's sha256, the
// target and PTX version, llc's version (and ptxas's for objects) and the function; an
// entry records its key, length and sha256, so a damaged or foreign entry is rebuilt and
// replaced. An unknown function is an *UnknownFunctionError naming every one, before
// anything builds; a failed build names the function and the tool's message.
func (l *Library) BuildEach(ctx context.Context, target ptx.Target, funcs []string, opts EachOptions) (*Set, error) {
	if err := l.usable(ctx, "BuildEach"); err != nil {
		return nil, err
	}
	start := time.Now()
	plan, err := PlanTarget(target)
	if err != nil {
		return nil, err
	}
	names, err := NormalizeFuncs(funcs)
	if err != nil {
		return nil, err
	}
	if err := l.checkCache(); err != nil {
		return nil, err
	}
	llc, err := toolchain.LLVMTool("llc")
	if err != nil {
		return nil, err
	}
	llcv, err := l.llcVersion(ctx, llc)
	if err != nil {
		return nil, err
	}
	var ptxas, ptxasv string
	if opts.Objects {
		if ptxas, err = toolchain.CUDATool("ptxas"); err != nil {
			return nil, fmt.Errorf("devlib: objects need ptxas: %w", err)
		}
		if ptxasv, err = toolVersion(ctx, ptxas); err != nil {
			return nil, err
		}
	}
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	set := &Set{Version: l.Version, Target: plan.Target, Archive: l.Archive, Objects: opts.Objects, Units: make([]Unit, len(names))}
	dir := l.cacheDir()
	if dir != "" {
		dir = filepath.Join(dir, "units", l.Version, string(plan.Target))
	}
	header := func(f string) Header {
		return Header{Format: cacheFormat, NVSHMEM: l.Version, Target: string(plan.Target), PTXTarget: plan.PTXTarget,
			PTXVersion: plan.PTXVersion, Bitcode: "sha256:" + l.Hash, LLC: llcv, Funcs: []string{f}}
	}
	// Look everything up first, so that the checks below run only when something is missing.
	var missing []int
	for i, f := range names {
		u := &set.Units[i]
		u.Func = f
		if dir == "" {
			missing = append(missing, i)
			continue
		}
		h := header(f)
		var b bytes.Buffer
		h.write(&b)
		pk := unitKey(b.Bytes(), "ptx", "")
		u.PTX = readUnit(filepath.Join(dir, f+".ptx"), pk)
		if u.PTX != nil && opts.Objects {
			u.Object = readUnit(filepath.Join(dir, f+".o"), unitKey(b.Bytes(), "object", ptxasv))
		}
		if u.PTX == nil || opts.Objects && u.Object == nil {
			missing = append(missing, i)
			continue
		}
		u.Cached = true
	}
	set.Hits, set.Misses = len(names)-len(missing), len(missing)
	var done atomic.Int32
	var progMu sync.Mutex
	report := func(u *Unit) {
		n := int(done.Add(1))
		if opts.Progress != nil {
			progMu.Lock()
			opts.Progress(n, len(names), u)
			progMu.Unlock()
		}
	}
	for i := range set.Units {
		if set.Units[i].Cached {
			report(&set.Units[i])
		}
	}
	if len(missing) > 0 {
		if err := l.checkFuncs(ctx, names); err != nil {
			return nil, err
		}
		if err := l.checkBitcodeVersion(ctx); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sem := make(chan struct{}, jobs)
		var wg sync.WaitGroup
		errs := make([]error, len(names))
		for _, i := range missing {
			wg.Add(1)
			go func(u *Unit) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if ctx.Err() != nil {
					errs[indexOf(names, u.Func)] = ctx.Err()
					return
				}
				if err := l.buildUnit(ctx, plan, header(u.Func), u, dir, ptxas, ptxasv); err != nil {
					errs[indexOf(names, u.Func)] = fmt.Errorf("devlib: %s: %w", u.Func, err)
					cancel()
					return
				}
				report(u)
			}(&set.Units[i])
		}
		wg.Wait()
		var failed []error
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				failed = append(failed, e)
			}
		}
		if len(failed) == 0 {
			for _, e := range errs {
				if e != nil {
					failed = append(failed, e)
				}
			}
		}
		if len(failed) > 0 {
			return nil, errors.Join(failed...)
		}
	}
	set.Elapsed = time.Since(start)
	return set, nil
}

func indexOf(names []string, f string) int { return sort.SearchStrings(names, f) }

// buildUnit compiles one function (and assembles it when ptxas is given) and caches it.
func (l *Library) buildUnit(ctx context.Context, plan Plan, h Header, u *Unit, dir, ptxas, ptxasv string) error {
	out, err := l.compile(ctx, plan, h.Funcs)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	h.write(&b)
	head := append([]byte(nil), b.Bytes()...)
	b.Write(out)
	u.PTX = b.Bytes()
	if ptxas != "" {
		if u.Object, err = assemble(ctx, ptxas, plan.Target, u.Func, u.PTX); err != nil {
			return err
		}
	}
	if dir == "" {
		return nil
	}
	if err := writeUnit(filepath.Join(dir, u.Func+".ptx"), unitKey(head, "ptx", ""), u.PTX); err != nil {
		l.logf("warning: %s not cached: %v (set KGEN_DEVLIB_CACHE to a writable folder, or KGEN_CACHE=off)", u.Func, err)
		return nil
	}
	if u.Object != nil {
		if err := writeUnit(filepath.Join(dir, u.Func+".o"), unitKey(head, "object", ptxasv), u.Object); err != nil {
			l.logf("warning: %s's object not cached: %v", u.Func, err)
		}
	}
	return nil
}

// assemble runs ptxas -c on one unit's PTX and returns the relocatable cubin.
func assemble(ctx context.Context, ptxas string, target ptx.Target, name string, src []byte) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "kgen-devlib-unit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	in, out := filepath.Join(tmp, name+".ptx"), filepath.Join(tmp, name+".o")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		return nil, err
	}
	if _, err := runTool(ctx, nil, ptxas, "-arch="+string(target), "-c", in, "-o", out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// toolVersion returns the last non-empty line of `tool --version`.
func toolVersion(ctx context.Context, tool string) (string, error) {
	out, err := runTool(ctx, nil, tool, "--version")
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// unitKey is the hex sha256 naming a unit entry's content: its header, its kind and (for
// objects) ptxas's version.
func unitKey(header []byte, kind, tool string) string {
	s := sha256.Sum256([]byte(eachFormat + "\n" + kind + "\n" + tool + "\n" + string(header)))
	return hex.EncodeToString(s[:])
}

// writeUnit stores data under path as "<format> <key> <len> <sha256>\n" + data, atomically.
func writeUnit(path, key string, data []byte) error {
	s := sha256.Sum256(data)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %d %x\n", eachFormat, key, len(data), s)
	b.Write(data)
	return writeAtomic(path, b.Bytes())
}

// unitHeadMax bounds a unit entry's first line: the format, a 64-digit key, a decimal length
// and a 64-digit sha256.
const unitHeadMax = len(eachFormat) + 1 + 64 + 1 + 20 + 1 + 64 + 1

// unitLen reads a unit entry's whole length from its first line.
func unitLen(head []byte) (int64, bool) {
	line, _, ok := bytes.Cut(head, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte(eachFormat+" ")) {
		return 0, false
	}
	f := strings.Fields(string(line[len(eachFormat)+1:]))
	if len(f) != 3 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 || n > maxCacheEntry {
		return 0, false
	}
	return int64(len(line)+1) + n, true
}

// readUnit returns the entry's data when it exists, carries key and is whole (its length
// and sha256 match); nil otherwise.
func readUnit(path, key string) []byte {
	b, err := readCached(path, unitHeadMax, unitLen)
	if err != nil {
		return nil
	}
	line, data, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil
	}
	f := strings.Fields(strings.TrimPrefix(string(line), eachFormat+" "))
	if !bytes.HasPrefix(line, []byte(eachFormat+" ")) || len(f) != 3 || f[0] != key {
		return nil
	}
	if n, err := strconv.Atoi(f[1]); err != nil || n != len(data) {
		return nil
	}
	if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != f[2] {
		return nil
	}
	return data
}
