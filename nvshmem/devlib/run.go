package devlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/ptx"
)

// Options are the inputs of `kgen devlib`.
type Options struct {
	// Home is the NVSHMEM installation; "" finds it (toolchain.NVSHMEMHome: $NVSHMEM_HOME,
	// then the project's tool folder).
	Home string
	// Target is the GPU target, ptx.SM90 (required unless List or Signatures is set).
	Target ptx.Target
	// Funcs are the functions to build (entries may be comma-separated lists). Empty means
	// every public function, which takes minutes and makes about 230 MB of PTX.
	Funcs []string
	// Output is the file to write the PTX to; "" or "-" writes it to stdout.
	Output string
	// CacheDir overrides the cache folder (see DefaultCacheDir); NoCache turns it off.
	CacheDir string
	NoCache  bool
	// EachDir, when set, builds one unit per function (BuildEach: cached per function, all
	// cores, a progress line per function) and writes FUNC.ptx, and FUNC.o when Objects,
	// into this folder instead of one PTX to Output.
	EachDir string
	// Objects also writes each unit's relocatable cubin (ptxas -c); with EachDir only.
	Objects bool
	// Jobs bounds the parallel builds of EachDir (0: every core).
	Jobs int
	// List prints the names of the public device functions instead of building.
	List bool
	// Signatures prints the PTX declaration of every public device function (or of Funcs)
	// instead of building.
	Signatures bool
}

// Run does what `kgen devlib` does: it builds the devlib PTX for opts.Target and opts.Funcs
// and writes it to opts.Output (or stdout), or lists the API (opts.List, opts.Signatures).
// Progress and a summary go to stderr. It never exits the process; errors say what to fix.
func Run(ctx context.Context, opts Options, stdout, stderr io.Writer) error {
	if stderr == nil {
		stderr = io.Discard
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if opts.List && opts.Signatures {
		return errors.New("devlib: give either List (--list) or Signatures (--signatures), not both")
	}
	if opts.Output != "" && opts.Output != "-" {
		// Before any build: a folder (or a FIFO, a device) there cannot take the result.
		if fi, err := os.Stat(opts.Output); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("devlib: Output %s is %s: give a file path (a missing file is created)", opts.Output, cachefile.KindOf(fi.Mode()))
		}
	}
	l, err := Open(opts.Home)
	if err != nil {
		return err
	}
	l.CacheDir, l.NoCache, l.Log = opts.CacheDir, opts.NoCache, stderr
	var funcs []string
	if len(opts.Funcs) > 0 {
		if funcs, err = NormalizeFuncs(opts.Funcs); err != nil {
			return err
		}
	}
	switch {
	case opts.List:
		names, err := l.Functions(ctx)
		if err != nil {
			return err
		}
		if funcs != nil {
			if err := l.checkFuncs(ctx, funcs); err != nil {
				return err
			}
			names = funcs
		}
		return writeOut(opts.Output, stdout, []byte(strings.Join(names, "\n")+"\n"))
	case opts.Signatures:
		var sigs map[string]Signature
		if funcs != nil {
			sigs, err = l.SignaturesOf(ctx, funcs)
		} else {
			sigs, err = l.Signatures(ctx)
		}
		if err != nil {
			return err
		}
		var b strings.Builder
		if err := WriteSignatures(&b, l.signatureHeader(len(sigs)), sigs); err != nil {
			return err
		}
		return writeOut(opts.Output, stdout, []byte(b.String()))
	}
	if opts.Target == "" {
		return errors.New("devlib: no target (give --target, for example sm_90)")
	}
	if _, err := PlanTarget(opts.Target); err != nil {
		return err
	}
	if funcs == nil {
		if funcs, err = l.Functions(ctx); err != nil {
			return err
		}
		if opts.EachDir == "" {
			fmt.Fprintf(stderr, "devlib: no functions named: building all %d public functions in one llc run (--each DIR builds them one unit per function, on every core, with progress, cached per function)\n", len(funcs))
		}
	}
	if opts.EachDir != "" {
		return runEach(ctx, l, opts, funcs, stderr)
	}
	if opts.Objects {
		return errors.New("devlib: objects (--objects) are written per function: give a folder with --each")
	}
	res, err := l.Build(ctx, opts.Target, funcs)
	if err != nil {
		return err
	}
	if err := writeOut(opts.Output, stdout, res.PTX); err != nil {
		return err
	}
	how := "built in " + res.Elapsed.Round(1e6).String()
	if res.Cached {
		how = "from the cache " + res.CachePath
	}
	dest := "stdout"
	if opts.Output != "" && opts.Output != "-" {
		dest = opts.Output
	}
	fmt.Fprintf(stderr, "devlib: NVSHMEM %s, %s (.target %s, PTX %s), %d function(s), %d bytes, %s; wrote %s; link it with %s\n",
		res.Version, res.Target, res.PTXTarget, res.PTXVersion, len(res.Funcs), len(res.PTX), how, dest, res.Archive)
	return nil
}

func writeOut(path string, stdout io.Writer, data []byte) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := writeAtomic(path, data); err != nil {
		return fmt.Errorf("devlib: writing %s: %w", path, err)
	}
	return nil
}

// runEach builds funcs one unit per function into opts.EachDir, printing progress.
func runEach(ctx context.Context, l *Library, opts Options, funcs []string, stderr io.Writer) error {
	start := time.Now()
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	fmt.Fprintf(stderr, "devlib: NVSHMEM %s, %s: %d function(s), one unit each, %d at a time\n", l.Version, opts.Target, len(funcs), jobs)
	set, err := l.BuildEach(ctx, opts.Target, funcs, EachOptions{Jobs: jobs, Objects: opts.Objects,
		Progress: func(done, total int, u *Unit) {
			how := "built"
			if u.Cached {
				how = "cached"
			}
			fmt.Fprintf(stderr, "devlib: [%d/%d] %s (%s, %s)\n", done, total, u.Func, how, time.Since(start).Round(time.Millisecond))
		}})
	if err != nil {
		return err
	}
	for _, u := range set.Units {
		if err := writeOut(filepath.Join(opts.EachDir, u.Func+".ptx"), nil, u.PTX); err != nil {
			return err
		}
		if u.Object != nil {
			if err := writeOut(filepath.Join(opts.EachDir, u.Func+".o"), nil, u.Object); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stderr, "devlib: %d unit(s) (%d from the cache, %d built) in %s; wrote %s; link them with %s\n",
		len(set.Units), set.Hits, set.Misses, set.Elapsed.Round(time.Millisecond), opts.EachDir, set.Archive)
	return nil
}
