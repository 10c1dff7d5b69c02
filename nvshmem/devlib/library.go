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
	"sync"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/internal/toolchain"
)

// Library is one NVSHMEM installation's device library.
//
// Its methods are safe for concurrent use; the exported fields may be set after Open and
// before the first Build.
type Library struct {
	// Home is the NVSHMEM installation (the folder holding lib/ and include/).
	Home string
	// Path is the bitcode, Home/lib/libnvshmem_device.bc.
	Path string
	// Archive is Home/lib/libnvshmem_device.a, the third link input: give it to the CUDA JIT
	// linker as CU_JIT_INPUT_LIBRARY, or to nvlink after the devlib cubin.
	Archive string
	// Version is the NVSHMEM version, "3.4.5".
	Version string
	// Hash is the sha256 of the bitcode, in hex.
	Hash string
	// CacheDir is where built PTX and signature tables are kept; "" means DefaultCacheDir().
	CacheDir string
	// NoCache makes Build and Signatures neither read nor write the cache.
	NoCache bool
	// Log, when set, receives progress lines from long builds.
	Log io.Writer

	sigMu    sync.Mutex      // held while Signatures reads the bitcode
	mu       sync.Mutex      // guards the fields below
	defined  map[string]byte // llvm-nm symbol type of every defined function
	sigs     map[string]Signature
	llcVer   string
	bcVerErr error
	bcVerOK  bool
}

// Open finds the device library of the NVSHMEM installation at home (or, when home is "",
// where toolchain.NVSHMEMHome says), hashes the bitcode and reads the version.
//
// The version comes from include/non_abi/nvshmem_version.h (NVSHMEM_VENDOR_{MAJOR,MINOR,
// PATCH}_VERSION). Without that header it is read from the bitcode's own version global,
// nvshmemi_device_lib_version_d, which needs llvm-extract and llvm-dis. Build checks that the
// two agree before it builds anything.
func Open(home string) (*Library, error) {
	if home == "" {
		h, err := toolchain.NVSHMEMHome()
		if err != nil {
			return nil, err
		}
		home = h
	}
	l := &Library{
		Home:    home,
		Path:    filepath.Join(home, "lib", "libnvshmem_device.bc"),
		Archive: filepath.Join(home, "lib", "libnvshmem_device.a"),
	}
	for _, p := range []string{l.Path, l.Archive} {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("devlib: %s is not an NVSHMEM 3 installation: %w", home, err)
		}
		if !fi.Mode().IsRegular() { // a FIFO would block the hash below, a device never end it
			return nil, fmt.Errorf("devlib: %s is not a regular file (%s)", p, fi.Mode().Type())
		}
	}
	h, err := hashFile(l.Path)
	if err != nil {
		return nil, fmt.Errorf("devlib: %w", err)
	}
	l.Hash = h
	v, err := headerVersion(home)
	switch {
	case err == nil:
		l.Version = v
	case errors.Is(err, os.ErrNotExist):
		if l.Version, err = l.BitcodeVersion(context.Background()); err != nil {
			return nil, fmt.Errorf("devlib: %s has no include/non_abi/nvshmem_version.h and the bitcode's version could not be read: %w", home, err)
		}
	default:
		return nil, err
	}
	// The version names cache folders (units/<version>/...): a header's 100000-digit
	// define gave paths no file system takes, found only when building.
	if _, err := ParseVersion(l.Version); err != nil {
		return nil, fmt.Errorf("devlib: %s: %s", home, strings.TrimPrefix(err.Error(), "devlib: "))
	}
	return l, nil
}

func hashFile(p string) (string, error) {
	f, err := openRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var versionDefine = regexp.MustCompile(`(?m)^\s*#\s*define\s+NVSHMEM_VENDOR_(MAJOR|MINOR|PATCH)_VERSION\s+(\d+)`)

// headerVersion reads the version from NVSHMEM's version header; the error wraps
// os.ErrNotExist when there is no header.
func headerVersion(home string) (string, error) {
	var src []byte
	var err error
	var path string
	for _, p := range []string{
		filepath.Join(home, "include", "non_abi", "nvshmem_version.h"),
		filepath.Join(home, "include", "nvshmem_version.h"),
	} {
		if src, err = readRegular(p, maxHeaderBytes); err == nil {
			path = p
			break
		}
		if !errors.Is(err, os.ErrNotExist) { // there, but not a header: a FIFO, a folder
			return "", err
		}
	}
	if err != nil {
		return "", err
	}
	parts := map[string]string{}
	for _, m := range versionDefine.FindAllSubmatch(src, -1) {
		parts[string(m[1])] = string(m[2])
	}
	if len(parts) != 3 {
		return "", fmt.Errorf("devlib: %s does not define NVSHMEM_VENDOR_MAJOR/MINOR/PATCH_VERSION", path)
	}
	return parts["MAJOR"] + "." + parts["MINOR"] + "." + parts["PATCH"], nil
}

var bcVersionRE = regexp.MustCompile(`@nvshmemi_device_lib_version_d\s*=.*\{\s*i32\s+(\d+),\s*i32\s+(\d+),\s*i32\s+(\d+)\s*\}`)

// BitcodeVersion reads the version the bitcode records in its global
// nvshmemi_device_lib_version_d ({major, minor, patch}), with llvm-extract and llvm-dis.
func (l *Library) BitcodeVersion(ctx context.Context) (string, error) {
	if err := l.usable(ctx, "BitcodeVersion"); err != nil {
		return "", err
	}
	if l.Path == "" {
		return "", errNoBitcode
	}
	ex, err := toolchain.LLVMTool("llvm-extract")
	if err != nil {
		return "", err
	}
	dis, err := toolchain.LLVMTool("llvm-dis")
	if err != nil {
		return "", err
	}
	bc, err := runTool(ctx, nil, ex, "--glob=nvshmemi_device_lib_version_d", l.Path, "-o", "-")
	if err != nil {
		return "", err
	}
	ll, err := runTool(ctx, bc, dis, "-o", "-", "-")
	if err != nil {
		return "", err
	}
	m := bcVersionRE.FindSubmatch(ll)
	if m == nil {
		return "", fmt.Errorf("devlib: %s has no nvshmemi_device_lib_version_d = {i32, i32, i32}", l.Path)
	}
	return fmt.Sprintf("%s.%s.%s", m[1], m[2], m[3]), nil
}

// checkBitcodeVersion checks, once, that the bitcode's version global matches l.Version.
func (l *Library) checkBitcodeVersion(ctx context.Context) error {
	l.mu.Lock()
	done, err := l.bcVerOK, l.bcVerErr
	l.mu.Unlock()
	if done || err != nil {
		return err
	}
	v, err := l.BitcodeVersion(ctx)
	if err == nil {
		err = CheckVersion(v, l.Version)
		if err != nil {
			err = fmt.Errorf("devlib: %s says NVSHMEM %s but its bitcode %s records %s; the installation is inconsistent", l.Home, l.Version, l.Path, v)
		}
	}
	if ctx.Err() != nil {
		return err // do not remember a cancellation
	}
	l.mu.Lock()
	l.bcVerOK, l.bcVerErr = err == nil, err
	l.mu.Unlock()
	return err
}

// ToolError reports a failed external tool, with the tail of what it wrote to stderr.
type ToolError struct {
	Tool   string // the tool's path
	Args   string // a summary of the arguments
	Err    error  // the exit error
	Stderr string // the last few KiB of stderr
}

// Error names the tool, its arguments and its failure, followed by its diagnostic.
func (e *ToolError) Error() string {
	msg := fmt.Sprintf("devlib: %s %s: %v", filepath.Base(e.Tool), e.Args, e.Err)
	if s := cleanStderr(e.Stderr); s != "" {
		msg += "\n" + s
	}
	return msg
}

// cleanStderr drops LLVM's crash boilerplate (the stack dump and the bug-report request)
// from a tool's stderr, keeping the diagnostic.
func cleanStderr(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "PLEASE submit a bug report") || strings.HasPrefix(t, "Stack dump") ||
			(len(t) > 1 && t[0] == '#' && t[1] >= '0' && t[1] <= '9') {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// Unwrap returns the exit error (or the context's error when the build was cancelled).
func (e *ToolError) Unwrap() error { return e.Err }

// runTool runs a tool with stdin and returns its stdout.
func runTool(ctx context.Context, stdin []byte, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, tool, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &tailWriter{max: 8 << 10, buf: &errb}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &ToolError{Tool: tool, Args: summarize(args), Err: err, Stderr: errb.String()}
	}
	return out.Bytes(), nil
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	max int
	buf *bytes.Buffer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if over := w.buf.Len() - w.max; over > 0 {
		w.buf.Next(over)
	}
	return len(p), nil
}

func summarize(args []string) string {
	if len(args) <= 8 {
		return strings.Join(args, " ")
	}
	return strings.Join(args[:6], " ") + fmt.Sprintf(" ... (%d more arguments) ", len(args)-8) + strings.Join(args[len(args)-2:], " ")
}

// usable refuses a call (what) on a nil *Library or with a nil context.
func (l *Library) usable(ctx context.Context, what string) error {
	switch {
	case l == nil:
		return fmt.Errorf("devlib: %s of a nil *Library (make one with Open)", what)
	case ctx == nil:
		return fmt.Errorf("devlib: %s: nil context", what)
	}
	return nil
}

// errNoBitcode is what reading the bitcode of a Library made by hand without one is (Path
// "", where the LLVM tools read their defaults: a.out or stdin). Cached builds need none.
var errNoBitcode = errors.New("devlib: the Library has no bitcode (Path is empty; make one with Open)")

// defineds returns llvm-nm's symbol type for every function and variable the bitcode
// defines: 'T' for an external function, 't' for an internal one, 'D'/'d' for data.
func (l *Library) defineds(ctx context.Context) (map[string]byte, error) {
	l.mu.Lock()
	d := l.defined
	l.mu.Unlock()
	if d != nil {
		return d, nil
	}
	if l.Path == "" {
		return nil, errNoBitcode
	}
	nm, err := toolchain.LLVMTool("llvm-nm")
	if err != nil {
		return nil, err
	}
	out, err := runTool(ctx, nil, nm, "--defined-only", l.Path)
	if err != nil {
		return nil, err
	}
	d = map[string]byte{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || len(f[len(f)-2]) != 1 {
			continue
		}
		d[f[len(f)-1]] = f[len(f)-2][0]
	}
	if len(d) == 0 {
		return nil, fmt.Errorf("devlib: llvm-nm found no symbols in %s", l.Path)
	}
	l.mu.Lock()
	l.defined = d
	l.mu.Unlock()
	return d, nil
}

// Functions returns, sorted, the name of every function the bitcode defines with external
// linkage: NVSHMEM's public device API (every name starts with nvshmem_ or nvshmemx_; in
// 3.4.5 there are 2208). It runs llvm-nm (about 0.1 s).
func (l *Library) Functions(ctx context.Context) ([]string, error) {
	if err := l.usable(ctx, "Functions"); err != nil {
		return nil, err
	}
	d, err := l.defineds(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for n, t := range d {
		if t == 'T' || t == 'W' {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// UnknownFunctionError lists requested functions the bitcode does not define.
type UnknownFunctionError struct {
	Version string
	Names   []string
	Notes   []string // per name: a hint ("internal helper", "did you mean ...") or ""
}

// maxUnknownListed is how many unknown names Error lists (Names holds every one).
const maxUnknownListed = 10

// Error lists the unknown names with their hints: the first maxUnknownListed, each as an
// excerpt, then how many more there are (a --funcs of thousands of names gives a short
// message; Names keeps them all).
func (e *UnknownFunctionError) Error() string {
	parts := make([]string, 0, min(len(e.Names), maxUnknownListed)+1)
	for i, n := range e.Names {
		if i == maxUnknownListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Names)-i))
			break
		}
		p := n
		if len(n) > excerpt.Max {
			p = excerpt.Quote(n)
		}
		if i < len(e.Notes) && e.Notes[i] != "" {
			p += " (" + e.Notes[i] + ")"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("devlib: NVSHMEM %s's device library does not define %s", e.Version, strings.Join(parts, ", "))
}

// checkFuncs returns an *UnknownFunctionError for names that are not external functions of
// the bitcode.
func (l *Library) checkFuncs(ctx context.Context, names []string) error {
	d, err := l.defineds(ctx)
	if err != nil {
		return err
	}
	e := &UnknownFunctionError{Version: l.Version}
	for _, n := range names {
		t, ok := d[n]
		if ok && (t == 'T' || t == 'W') {
			continue
		}
		note := ""
		switch {
		case ok && t == 't':
			note = "an internal helper, not callable"
		case ok:
			note = "a variable, not a function"
		default:
			for _, alt := range alternatives(n) {
				if k, ok := d[alt]; ok && (k == 'T' || k == 'W') {
					note = "did you mean " + alt + "?"
					break
				}
			}
		}
		e.Names = append(e.Names, n)
		e.Notes = append(e.Notes, note)
	}
	if len(e.Names) > 0 {
		return e
	}
	return nil
}

// alternatives are likely intended spellings of an unknown name.
func alternatives(n string) []string {
	var out []string
	if r, ok := strings.CutPrefix(n, "nvshmem_"); ok {
		out = append(out, "nvshmemx_"+r)
	}
	if r, ok := strings.CutPrefix(n, "nvshmemx_"); ok {
		out = append(out, "nvshmem_"+r)
	}
	if !strings.HasPrefix(n, "nvshmem") {
		out = append(out, "nvshmem_"+n, "nvshmemx_"+n)
	}
	return out
}

// maxHeaderBytes bounds the version header's read (NVSHMEM's is under 1 KiB).
const maxHeaderBytes = 1 << 20

// openRegular opens p (symlinks followed: installations link their files) when it is a
// regular file, checked again on the open file; a FIFO, device or folder is an error naming
// it, never a blocked or endless read.
func openRegular(p string) (*os.File, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
		}
		return nil, err
	}
	return f, nil
}

// readRegular reads the regular file p, at most max bytes (a longer one is an error).
func readRegular(p string, max int64) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is longer than %d bytes", p, max)
	}
	return b, nil
}
