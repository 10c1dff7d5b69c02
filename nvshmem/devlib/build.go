package devlib

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/ptx"
)

// cacheFormat versions the cache entries and the PTX header.
const cacheFormat = "v2"

// Result is a built device library: the second input of a link (see the package doc).
type Result struct {
	// PTX is the devlib PTX. It starts with the comment header ParseHeader reads.
	PTX []byte
	// Version is the NVSHMEM version it was built from, "3.4.5".
	Version string
	// Target is the requested target, ptx.SM90.
	Target ptx.Target
	// PTXTarget and PTXVersion are the PTX's .target and .version (see Plan).
	PTXTarget, PTXVersion string
	// Funcs are the requested functions, sorted, without duplicates. The PTX also defines
	// every function they call.
	Funcs []string
	// Archive is libnvshmem_device.a: pass it to the CUDA JIT linker as CU_JIT_INPUT_LIBRARY.
	Archive string
	// BitcodeHash is the sha256 (hex) of the bitcode it was built from.
	BitcodeHash string
	// Cached says the PTX came from the cache; CachePath is the entry ("" without a cache).
	Cached    bool
	CachePath string
	// Elapsed is how long Build took.
	Elapsed time.Duration
}

// DefaultCacheDir returns the folder Build caches in when Library.CacheDir is "":
// $KGEN_DEVLIB_CACHE, else os.UserCacheDir()/kgen/devlib (~/.cache/kgen/devlib), else
// os.TempDir()/kgen-devlib. (KGEN_CACHE=off, which turns package jit's cache off, turns this
// one off too; see CacheDisabled.)
func DefaultCacheDir() string {
	if d := os.Getenv("KGEN_DEVLIB_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kgen", "devlib")
	}
	return filepath.Join(os.TempDir(), "kgen-devlib")
}

// CacheDisabled reports whether $KGEN_CACHE turns kgen's caches off ("off", "0", "false",
// "no"; in any case, spaces around it ignored, as package jit reads it: cachefile.Disabled).
func CacheDisabled() bool { return cachefile.Disabled() }

// cacheEnvErr reports a $KGEN_CACHE that is neither an off switch (CacheDisabled) nor an on
// one (1, true, yes, on), as jit.Open does: a typo such as "of" kept this cache on, silently.
func cacheEnvErr() error { return cachefile.EnvErr("devlib cache", "no cache") }

func (l *Library) cacheDir() string {
	if l.NoCache || (l.CacheDir == "" && CacheDisabled()) {
		return ""
	}
	if l.CacheDir != "" {
		return l.CacheDir
	}
	return DefaultCacheDir()
}

// checkCache refuses a cache folder that others may write (see cachefile.CheckDir): a
// checksum proves an entry whole, not who wrote it; and, for the default cache, a
// $KGEN_CACHE of no known form (cacheEnvErr).
func (l *Library) checkCache() error {
	if !l.NoCache && l.CacheDir == "" {
		if err := cacheEnvErr(); err != nil {
			return err
		}
	}
	dir := l.cacheDir()
	if dir == "" {
		return nil
	}
	if err := cachefile.CheckDir(dir); err != nil {
		return fmt.Errorf("devlib cache: %w (KGEN_DEVLIB_CACHE, or KGEN_CACHE=off)", err)
	}
	return nil
}

// maxCacheEntry bounds a cache entry (the PTX of every public function is a few MB).
const maxCacheEntry = 1 << 30

// readCached reads a cache entry when it is a private regular file in a private folder
// (anything else is an error, which callers treat as a miss). size, when not nil, gives the
// entry's whole length from its first headLen bytes (see cachefile.Read).
func readCached(path string, headLen int, size func([]byte) (int64, bool)) ([]byte, error) {
	if err := cachefile.CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if err := cachefile.CheckFile(path, fi); err != nil {
			return nil, err
		}
	}
	return cachefile.Read(path, maxCacheEntry, headLen, size)
}

var identRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// NormalizeFuncs trims, sorts and deduplicates function names and rejects an empty list and
// names that are not PTX identifiers. It splits entries at commas, so
// NormalizeFuncs([]string{"a,b", "c"}) is [a b c].
func NormalizeFuncs(funcs []string) ([]string, error) {
	set := map[string]bool{}
	var bad []string
	for _, f := range funcs {
		for _, n := range strings.Split(f, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !identRE.MatchString(n) {
				bad = append(bad, excerpt.Quote(n))
				continue
			}
			set[n] = true
		}
	}
	if len(bad) > 0 {
		more := ""
		if len(bad) > 5 {
			bad, more = bad[:5], fmt.Sprintf(" and %d more", len(bad)-5)
		}
		return nil, fmt.Errorf("devlib: not function names: %s%s", strings.Join(bad, ", "), more)
	}
	if len(set) == 0 {
		return nil, errors.New("devlib: no functions to build (name at least one NVSHMEM device function, for example nvshmem_quiet)")
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// llcVersion returns the first line of `llc --version` that names the version; it is part
// of the cache key.
func (l *Library) llcVersion(ctx context.Context, llc string) (string, error) {
	l.mu.Lock()
	v := l.llcVer
	l.mu.Unlock()
	if v != "" {
		return v, nil
	}
	out, err := runTool(ctx, nil, llc, "--version")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "version") {
			v = strings.TrimSpace(line)
			break
		}
	}
	if v == "" {
		v = "unknown"
	}
	l.mu.Lock()
	l.llcVer = v
	l.mu.Unlock()
	return v, nil
}

func (l *Library) logf(format string, args ...any) {
	if l.Log != nil {
		fmt.Fprintf(l.Log, "devlib: "+format+"\n", args...)
	}
}

// ticker logs "still running" every period until stop is called.
func (l *Library) ticker(what string, period time.Duration) (stop func()) {
	if l.Log == nil {
		return func() {}
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.logf("%s: still running (%s)", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}

// Build returns the devlib PTX for target defining funcs (NVSHMEM device functions such as
// "nvshmemx_putmem_block") and everything they call.
//
// It checks the target (a *TargetError) and the names' syntax, then looks in the cache,
// keyed by the bitcode's hash, the target, the PTX version, llc's version and the sorted
// function set. On a miss it checks that the bitcode defines every name as an external
// function (an *UnknownFunctionError lists every one it does not) and that the bitcode's
// version global matches l.Version, runs
//
//	llvm-extract --recursive --keep-const-init --func=F... libnvshmem_device.bc
//	opt -passes=internalize,globaldce -internalize-public-api-list=F,...
//	llc -march=nvptx64 -mcpu=... -mattr=+ptx80
//
// (so the PTX exports exactly the requested functions and holds the constants they use),
// prepends the header and stores the entry atomically (temporary file and rename), so
// concurrent builds, in goroutines or processes, are safe. A few functions take well under a
// second; the whole API takes minutes.
func (l *Library) Build(ctx context.Context, target ptx.Target, funcs []string) (*Result, error) {
	if err := l.usable(ctx, "Build"); err != nil {
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
	h := Header{
		Format: cacheFormat, NVSHMEM: l.Version, Target: string(plan.Target), PTXTarget: plan.PTXTarget,
		PTXVersion: plan.PTXVersion, Bitcode: "sha256:" + l.Hash, LLC: llcv, Funcs: names,
	}
	res := &Result{
		Version: l.Version, Target: plan.Target, PTXTarget: plan.PTXTarget, PTXVersion: plan.PTXVersion,
		Funcs: names, Archive: l.Archive, BitcodeHash: l.Hash,
	}
	dir := l.cacheDir()
	if dir != "" {
		res.CachePath = filepath.Join(dir, h.key()+".ptx")
		if b, err := readCached(res.CachePath, 0, nil); err == nil {
			if got, err := ParseHeader(b); err == nil && got.equal(h) {
				res.PTX, res.Cached, res.Elapsed = b, true, time.Since(start)
				return res, nil
			}
			// a damaged or foreign entry: rebuild and replace it
		}
	}
	if err := l.checkFuncs(ctx, names); err != nil {
		return nil, err
	}
	if err := l.checkBitcodeVersion(ctx); err != nil {
		return nil, err
	}
	l.logf("NVSHMEM %s, %s: extracting %d function(s) and their callees from %s", l.Version, plan.Target, len(names), l.Path)
	out, err := l.compile(ctx, plan, names)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	h.write(&buf)
	buf.Write(out)
	res.PTX = buf.Bytes()
	if res.CachePath != "" {
		if err := writeAtomic(res.CachePath, res.PTX); err != nil {
			// The build is good; only the cache is unusable (a read-only folder, a full disk).
			l.logf("warning: not cached: %v (set KGEN_DEVLIB_CACHE to a writable folder, or KGEN_CACHE=off)", err)
			res.CachePath = ""
		}
	}
	res.Elapsed = time.Since(start)
	l.logf("built %d function(s) for %s in %s (%d bytes of PTX)", len(names), target, res.Elapsed.Round(time.Millisecond), len(res.PTX))
	return res, nil
}

// compile runs llvm-extract, opt and llc over names (checked already) and returns llc's PTX.
func (l *Library) compile(ctx context.Context, plan Plan, names []string) ([]byte, error) {
	llc, err := toolchain.LLVMTool("llc")
	if err != nil {
		return nil, err
	}
	ex, err := toolchain.LLVMTool("llvm-extract")
	if err != nil {
		return nil, err
	}
	// --keep-const-init keeps the initializers of the constants the functions use (assert
	// messages such as @.str1); without it they become undefined externals.
	args := []string{"--recursive", "--keep-const-init"}
	for _, n := range names {
		args = append(args, "--func="+n)
	}
	args = append(args, l.Path, "-o", "-")
	bc, err := runTool(ctx, nil, ex, args...)
	if err != nil {
		return nil, err
	}
	// Every definition but the requested functions becomes internal, so that llc gives the
	// constants valid PTX names (.str1 -> _$_str1) and the helpers are not exported (.func,
	// not .visible .func); globaldce then drops the constants nothing uses (--keep-const-init
	// keeps every one of the bitcode's ~1100 assert strings: 800 KB of PTX for 5 functions,
	// 17 KB without them). The device state (nvshmemi_device_state_d) stays an external
	// declaration: the archive defines it.
	opt, err := toolchain.LLVMTool("opt")
	if err != nil {
		return nil, err
	}
	bc, err = runTool(ctx, bc, opt, "-passes=internalize,globaldce", "-internalize-public-api-list="+strings.Join(names, ","), "-o", "-", "-")
	if err != nil {
		return nil, err
	}
	if len(names) > 100 {
		l.logf("compiling %d functions with llc; the whole API (2208 functions) takes about 3-4 minutes and makes 230 MB of PTX", len(names))
	}
	llcArgs := append(plan.LLCArgs(), "-o", "-", "-")
	stop := l.ticker("llc "+strings.Join(plan.LLCArgs(), " "), 15*time.Second)
	out, err := runTool(ctx, bc, llc, llcArgs...)
	stop()
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(out, []byte(".target "+plan.PTXTarget)) {
		return nil, fmt.Errorf("devlib: llc's output for %s has no .target %s", plan.Target, plan.PTXTarget)
	}
	return out, nil
}

// writeAtomic writes data to path through a temporary file in the same folder and a rename,
// so readers see the old file, the new file or none, never a part.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	return nil
}

// Header is the comment block at the top of every devlib PTX:
//
//	// kgen-devlib: v2
//	// nvshmem: 3.4.5
//	// target: sm_90
//	// ptx-target: sm_90
//	// ptx-version: 8.0
//	// bitcode: sha256:39ed77a2...
//	// llc: LLVM version 19.1.7
//	// func: nvshmem_my_pe
//	// func: nvshmem_quiet
type Header struct {
	Format     string // "v2"
	NVSHMEM    string // the NVSHMEM version the PTX was built from
	Target     string
	PTXTarget  string
	PTXVersion string
	Bitcode    string // "sha256:<hex>" of libnvshmem_device.bc
	LLC        string // llc's version line
	Funcs      []string
}

func (h Header) write(w io.Writer) {
	fmt.Fprintf(w, "// kgen-devlib: %s\n// nvshmem: %s\n// target: %s\n// ptx-target: %s\n// ptx-version: %s\n// bitcode: %s\n// llc: %s\n",
		h.Format, h.NVSHMEM, h.Target, h.PTXTarget, h.PTXVersion, h.Bitcode, h.LLC)
	for _, f := range h.Funcs {
		fmt.Fprintf(w, "// func: %s\n", f)
	}
	fmt.Fprintln(w, "//")
}

func (h Header) equal(o Header) bool {
	return h.Format == o.Format && h.NVSHMEM == o.NVSHMEM && h.Target == o.Target &&
		h.PTXTarget == o.PTXTarget && h.PTXVersion == o.PTXVersion && h.Bitcode == o.Bitcode &&
		h.LLC == o.LLC && strings.Join(h.Funcs, ",") == strings.Join(o.Funcs, ",")
}

// key names the cache entry.
func (h Header) key() string {
	var b bytes.Buffer
	h.write(&b)
	s := sha256.Sum256(b.Bytes())
	return "devlib-" + h.Target + "-" + hex.EncodeToString(s[:16])
}

// ParseHeader reads the header Build puts at the top of devlib PTX. It fails when there is
// none (the PTX was not built by this package) or a field is missing.
func ParseHeader(ptx []byte) (*Header, error) {
	h := &Header{}
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "// ")
		if !ok {
			break
		}
		k, v, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		if first && k != "kgen-devlib" {
			break
		}
		first = false
		switch k {
		case "kgen-devlib":
			h.Format = v
		case "nvshmem":
			h.NVSHMEM = v
		case "target":
			h.Target = v
		case "ptx-target":
			h.PTXTarget = v
		case "ptx-version":
			h.PTXVersion = v
		case "bitcode":
			h.Bitcode = v
		case "llc":
			h.LLC = v
		case "func":
			h.Funcs = append(h.Funcs, v)
		}
	}
	if err := sc.Err(); err != nil {
		// A header line past the scanner's 1 MiB was called no header at all.
		return nil, fmt.Errorf("devlib: reading the PTX's kgen-devlib header: %w (a header line is at most 1 MiB)", err)
	}
	if h.Format == "" {
		return nil, errors.New("devlib: the PTX has no kgen-devlib header (it was not built by kgen's devlib builder, so its NVSHMEM version is unknown)")
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"nvshmem", h.NVSHMEM}, {"target", h.Target},
		{"ptx-target", h.PTXTarget}, {"ptx-version", h.PTXVersion}, {"bitcode", h.Bitcode}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("devlib: the PTX's kgen-devlib header lacks %s", strings.Join(missing, ", "))
	}
	return h, nil
}

// Signatures returns the PTX call ABI of every public function of the bitcode (the
// functions Functions lists), keyed by name. The first call per bitcode disassembles it
// with llvm-dis (about 10 s and 260 MB of text, streamed) and caches the table in the cache
// folder, in WriteSignatures' format; later calls read that.
func (l *Library) Signatures(ctx context.Context) (map[string]Signature, error) {
	if err := l.usable(ctx, "Signatures"); err != nil {
		return nil, err
	}
	l.sigMu.Lock() // one llvm-dis at a time; later callers get the first one's table
	defer l.sigMu.Unlock()
	if err := l.checkCache(); err != nil {
		return nil, err
	}
	if s := l.loadedSignatures(); s != nil {
		return s, nil
	}
	path := l.signaturesPath()
	if l.Path == "" {
		return nil, errNoBitcode
	}
	dis, err := toolchain.LLVMTool("llvm-dis")
	if err != nil {
		return nil, err
	}
	l.logf("reading function signatures from %s with llvm-dis (about 10 s, once per NVSHMEM version)", l.Path)
	cmd := exec.CommandContext(ctx, dis, "-o", "-", l.Path)
	var errb bytes.Buffer
	cmd.Stderr = &tailWriter{max: 8 << 10, buf: &errb}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("devlib: llvm-dis: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, &ToolError{Tool: dis, Args: l.Path, Err: err}
	}
	s, perr := ParseLLVM(pipe)
	if perr != nil {
		io.Copy(io.Discard, pipe)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &ToolError{Tool: dis, Args: l.Path, Err: err, Stderr: errb.String()}
	}
	if perr != nil {
		return nil, perr
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("devlib: %s defines no external functions", l.Path)
	}
	if path != "" {
		var b bytes.Buffer
		WriteSignatures(&b, l.signatureHeader(len(s)), s)
		if err := writeAtomic(path, b.Bytes()); err != nil {
			l.logf("warning: could not cache the signatures: %v", err)
		}
	}
	l.mu.Lock()
	l.sigs = s
	l.mu.Unlock()
	return s, nil
}

// SignaturesOf returns the signatures of the named functions only. Unless the whole table is
// already loaded or cached, it reads just their definitions (llvm-extract without
// --recursive, then llvm-dis): about 0.2 s, where the first Signatures call takes about 10 s.
// A name the bitcode does not define is an *UnknownFunctionError.
func (l *Library) SignaturesOf(ctx context.Context, names []string) (map[string]Signature, error) {
	if err := l.usable(ctx, "SignaturesOf"); err != nil {
		return nil, err
	}
	names, err := NormalizeFuncs(names)
	if err != nil {
		return nil, err
	}
	if err := l.checkFuncs(ctx, names); err != nil {
		return nil, err
	}
	all := l.loadedSignatures()
	if all == nil {
		if l.Path == "" {
			return nil, errNoBitcode
		}
		ex, err := toolchain.LLVMTool("llvm-extract")
		if err != nil {
			return nil, err
		}
		dis, err := toolchain.LLVMTool("llvm-dis")
		if err != nil {
			return nil, err
		}
		args := make([]string, 0, len(names)+3)
		for _, n := range names {
			args = append(args, "--func="+n)
		}
		bc, err := runTool(ctx, nil, ex, append(args, l.Path, "-o", "-")...)
		if err != nil {
			return nil, err
		}
		ll, err := runTool(ctx, bc, dis, "-o", "-", "-")
		if err != nil {
			return nil, err
		}
		if all, err = ParseLLVM(bytes.NewReader(ll)); err != nil {
			return nil, err
		}
	}
	out := make(map[string]Signature, len(names))
	for _, n := range names {
		s, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("devlib: no signature for %s in %s", n, l.Path)
		}
		out[n] = s
	}
	return out, nil
}

// loadedSignatures returns the full table when it is in memory or in the cache, else nil.
func (l *Library) loadedSignatures() map[string]Signature {
	l.mu.Lock()
	s := l.sigs
	l.mu.Unlock()
	if s != nil {
		return s
	}
	if p := l.signaturesPath(); p != "" && l.checkCache() == nil {
		if b, err := readCached(p, 0, nil); err == nil {
			if s, err := ReadSignatures(bytes.NewReader(b)); err == nil && len(s) > 0 {
				l.mu.Lock()
				l.sigs = s
				l.mu.Unlock()
				return s
			}
		}
	}
	return nil
}

// signaturesPath is the cache entry of the signature table ("" without a cache).
func (l *Library) signaturesPath() string {
	dir := l.cacheDir()
	if dir == "" || len(l.Hash) < 32 {
		return ""
	}
	return filepath.Join(dir, "signatures-"+l.Hash[:32]+".ptx")
}

func (l *Library) signatureHeader(n int) string {
	return fmt.Sprintf("NVSHMEM %s device API: the PTX call ABI of the %d functions libnvshmem_device.bc defines.\n"+
		"bitcode sha256:%s\n"+
		"Each line: the declaration a kernel uses to call the function // its LLVM signature.", l.Version, n, l.Hash)
}
