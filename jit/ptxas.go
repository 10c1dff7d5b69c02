package jit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// PtxasEnv names the environment variable that makes the GPU backend compile PTX with that
// ptxas (a path) instead of the driver's compiler: whole modules straight to a cubin (cached
// by kgen, keyed by the ptxas's version), or, for a module that links NVSHMEM's device
// library, relocatable code for the driver's linker. For a toolkit newer (or older) than the
// driver's, or to pin the compiler.
const PtxasEnv = "KGEN_PTXAS"

// JITModeEnv names the environment variable that picks how the GPU backend compiles a
// module that does not link NVSHMEM (PtxasEnv takes precedence):
//   - unset or "auto": through the driver's linker (cuLink*, cached by kgen), which
//     compiles PTX as relocatable code; when its ptxas reports serialized wgmma
//     instructions there, the driver compiles the module as a whole program instead.
//   - "whole": always as a whole program (cuModuleLoadDataEx; not cached by kgen).
//   - "link": always through the linker.
//
// Relocatable code makes ptxas ignore setmaxnreg; on an H200 that made the sm_90a GEMMs 2-4%
// faster, but it serialized every wgmma of the sm_90a attention (0.4-0.9 times the whole
// program's speed; docs/facts.md).
const JITModeEnv = "KGEN_JIT"

type jitMode int

const (
	jitAuto jitMode = iota
	jitWhole
	jitLink
)

// jitModeFromEnv reads JITModeEnv.
func jitModeFromEnv() (jitMode, error) {
	switch m := os.Getenv(JITModeEnv); m {
	case "", "auto":
		return jitAuto, nil
	case "whole":
		return jitWhole, nil
	case "link":
		return jitLink, nil
	default:
		return 0, fmt.Errorf("jit: %s=%s: want auto, whole or link", JITModeEnv, excerpt.Quote(string(m)))
	}
}

// autoCompiler is CacheKey.Compiler in the auto mode, whose entries may be
// wholeProgramEntry.
const autoCompiler = "driver: linked, or whole where relocatable code serializes wgmma"

// wholeProgramEntry is what the cache holds for a module whose relocatable compile
// serialized its wgmma instructions: the load compiles it as a whole program.
var wholeProgramEntry = []byte("kgen: compile as a whole program\n")

// serializedWGMMA reports whether a ptxas log says it serialized wgmma instructions (C7509,
// C7510: "wgmma.mma_async instructions are serialized due to ..."), or may have said so past
// the end of a log that filled its buffer of size capacity.
func serializedWGMMA(log string, capacity int) bool {
	return strings.Contains(log, "wgmma.mma_async instructions are serialized") || len(log) >= capacity-1
}

// ptxasCompiler is an external ptxas: its path and its version (part of the cache key).
type ptxasCompiler struct {
	path, version string
}

var ptxasVersions sync.Map // absolute path -> version (successes only)

// ptxasFromEnv returns the ptxas PtxasEnv names, nil when unset, or an error naming the
// variable when it is not an executable ptxas.
func ptxasFromEnv() (*ptxasCompiler, error) {
	p := os.Getenv(PtxasEnv)
	if p == "" {
		return nil, nil
	}
	// Resolved once to an absolute path (a bare name through PATH): the version found is the
	// cache key of what compile runs, which a relative path would not stay when the working
	// folder changes.
	abs, err := exec.LookPath(p)
	if err == nil {
		abs, err = filepath.Abs(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("jit: %s=%s: %v", PtxasEnv, p, err)
	}
	p = abs
	if v, ok := ptxasVersions.Load(p); ok {
		return &ptxasCompiler{path: p, version: v.(string)}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &headWriter{max: 4 << 10}
	cmd := exec.CommandContext(ctx, p, "--version")
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = w, w, time.Second
	err = cmd.Run()
	out := w.b
	var res any
	if err != nil {
		res = fmt.Errorf("jit: %s=%s: running it with --version: %v %s", PtxasEnv, p, err, strings.TrimSpace(w.String()))
	} else {
		// The release and build lines: "Cuda compilation tools, release 13.0, V13.0.88; Build ...".
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		res = strings.TrimSpace(strings.Join(lines[max(len(lines)-2, 0):], "; "))
		if !strings.Contains(string(out), "ptxas") {
			res = fmt.Errorf("jit: %s=%s: not a ptxas (its --version says %q)", PtxasEnv, p, res)
		}
	}
	if e, bad := res.(error); bad {
		return nil, e // not remembered: the next load asks again
	}
	ptxasVersions.Store(p, res)
	return &ptxasCompiler{path: p, version: res.(string)}, nil
}

// ptxasTimeout bounds an external ptxas run (Load has no context to honour).
var ptxasTimeout = 10 * time.Minute

// headWriter keeps the first max bytes written to it and counts the rest.
type headWriter struct {
	max     int
	b       []byte
	dropped int64
}

func (w *headWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.max-len(w.b))
	w.b = append(w.b, p[:n]...)
	w.dropped += int64(len(p) - n)
	return len(p), nil
}

func (w *headWriter) String() string {
	if w.dropped > 0 {
		return fmt.Sprintf("%s\n... (%d more bytes)", w.b, w.dropped)
	}
	return string(w.b)
}

// compile runs ptxas over text for arch (the module's .target, e.g. sm_90a), relocatable
// (-c) when the result goes to the driver's linker, and returns the cubin.
func (c *ptxasCompiler) compile(name string, text []byte, arch string, relocatable bool) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kgen-ptxas-")
	if err != nil {
		return nil, fmt.Errorf("jit: module %s: ptxas: %v", name, err)
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "m.ptx"), filepath.Join(dir, "m.cubin")
	if err := os.WriteFile(in, text, 0o600); err != nil {
		return nil, fmt.Errorf("jit: module %s: ptxas: %v", name, err)
	}
	args := []string{"-arch=" + arch, "-O3", in, "-o", out}
	if relocatable {
		args = append([]string{"-c"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ptxasTimeout)
	defer cancel()
	stderr := &headWriter{max: 64 << 10}
	cmd := exec.CommandContext(ctx, c.path, args...)
	// WaitDelay: a child the ptxas left behind holding its output open ends the wait too.
	cmd.Stderr, cmd.Stdout, cmd.WaitDelay = stderr, stderr, time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("killed after %v (jit.Load takes no context; an external ptxas gets this long)", ptxasTimeout)
		}
		return nil, fmt.Errorf("jit: module %s: %s for %s: %v:\n%s", name, c.path, arch, err, strings.TrimSpace(stderr.String()))
	}
	// Only a regular file, no longer than a cache entry (a FIFO would block the read, a link
	// to /dev/zero would never end it).
	b, err := cachefile.Read(out, int64(maxEntry-entryHeadMax), 0, nil)
	switch {
	case errors.Is(err, cachefile.ErrTooLarge):
		return nil, fmt.Errorf("jit: module %s: %s wrote a cubin over the %d-byte limit of a cache entry: %v", name, c.path, maxEntry-entryHeadMax, err)
	case err != nil:
		return nil, fmt.Errorf("jit: module %s: %s's output: %v", name, c.path, err)
	case len(b) == 0:
		return nil, fmt.Errorf("jit: module %s: %s exited 0 but wrote an empty cubin", name, c.path)
	}
	return b, nil
}
