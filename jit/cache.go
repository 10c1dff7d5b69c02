package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kgen-dev/kgen/internal/cachefile"
)

// Cache is a disk cache of linked cubins, keyed by CacheKey. It is safe for concurrent use by
// goroutines and by processes sharing the folder: an entry is written to a temporary file and
// renamed into place, and every read checks the entry's key and checksum, so a reader sees a
// whole entry or none.
//
// The default folder is $KGEN_CACHE_DIR, else $XDG_CACHE_HOME/kgen/jit (~/.cache/kgen/jit).
// KGEN_CACHE=off disables the default cache; ClearCache (or deleting the folder) clears it.
//
// The folder must be private: a checksum proves an entry whole, not who wrote it, so anyone
// who can write the folder could make kgen load their code. A folder (or entry) writable by
// group or others, or owned by another user, is refused (see Check). Only regular files are
// read (a FIFO, device or symlink at an entry's path is a miss), never past the length their
// header states.
type Cache struct {
	dir      string
	disabled bool
}

// CacheKey identifies a linked cubin.
type CacheKey struct {
	PTX    [32]byte // sha256 of the kernel PTX
	DevLib [32]byte // sha256 over the device library (PTX, archive, version); zero when none
	Arch   string   // "sm_90"
	Driver int      // the driver's CUDA version, cuDriverGetVersion
	// Compiler is the ptxas that compiled the PTX (its --version line; PtxasEnv), empty for
	// the driver's JIT compiler.
	Compiler string
}

// String is the key as a file name: a sha256 over all fields, in hex.
func (k CacheKey) String() string {
	h := sha256.New()
	fmt.Fprintf(h, "kgen-jit-cubin v1\nptx %x\ndevlib %x\narch %s\ndriver %d\n", k.PTX, k.DevLib, k.Arch, k.Driver)
	if k.Compiler != "" {
		fmt.Fprintf(h, "compiler %s\n", k.Compiler)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NewCache returns a cache in dir (created on first Put).
func NewCache(dir string) *Cache { return &Cache{dir: dir} }

// DefaultCacheDir returns the default cache folder (see Cache).
func DefaultCacheDir() string {
	if d := os.Getenv("KGEN_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kgen", "jit")
	}
	return filepath.Join(os.TempDir(), "kgen-jit-cache")
}

// CacheDisabled reports whether KGEN_CACHE turns the default cache off ("off", "0", "false",
// "no"; see cachefile.Disabled).
func CacheDisabled() bool { return cachefile.Disabled() }

// cacheEnvErr reports a KGEN_CACHE that is neither an off switch (CacheDisabled) nor an on
// one (1, true, yes, on): a typo such as "of" kept the cache on, silently.
func cacheEnvErr() error { return cachefile.EnvErr("jit", "no cubin cache") }

// DefaultCache returns the cache in DefaultCacheDir, disabled when KGEN_CACHE=off.
func DefaultCache() *Cache {
	return &Cache{dir: DefaultCacheDir(), disabled: CacheDisabled()}
}

// ClearCache deletes every entry of the default cache folder.
func ClearCache() error { return NewCache(DefaultCacheDir()).Clear() }

// Dir returns the cache's folder.
func (c *Cache) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Enabled reports whether the cache stores anything.
func (c *Cache) Enabled() bool { return c != nil && !c.disabled && c.dir != "" }

const cacheMagic = "KGENCUBIN1\n"

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key[:2], key+".cubin") }

// Get returns the entry for k, or false when there is none (or it is damaged, is not a
// regular file, or the folder fails Check).
func (c *Cache) Get(k CacheKey) ([]byte, bool) {
	if !c.Enabled() {
		return nil, false
	}
	key := k.String()
	p := c.path(key)
	if c.checkPath(p) != nil {
		return nil, false
	}
	b, err := cachefile.Read(p, maxEntry, entryHeadMax, entryLen)
	if err != nil {
		return nil, false
	}
	data, ok := decodeEntry(key, b)
	return data, ok
}

// entryFits refuses data that Get would never serve (an entry over maxEntry with its header).
func entryFits(n int) error {
	if n > maxEntry-entryHeadMax {
		return fmt.Errorf("jit cache: a %d-byte cubin is over the cache's %d-byte entry limit; not stored", n, maxEntry-entryHeadMax)
	}
	return nil
}

// maxEntry bounds an entry (the NVSHMEM acceptance module's cubin is 8.7 MB); entryHeadMax
// bounds its header: the magic, a 64-digit key and checksum, and a decimal length.
const (
	maxEntry     = 1 << 30
	entryHeadMax = len(cacheMagic) + 64 + 1 + 64 + 1 + 20 + 1
)

// entryLen reads the whole length of an entry from its header.
func entryLen(head []byte) (int64, bool) {
	if !bytes.HasPrefix(head, []byte(cacheMagic)) {
		return 0, false
	}
	rest := head[len(cacheMagic):]
	for i := 0; i < 2; i++ {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return 0, false
		}
		rest = rest[j+1:]
	}
	j := bytes.IndexByte(rest, '\n')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil || n < 0 || n > maxEntry {
		return 0, false
	}
	return int64(len(head)-len(rest)+j+1) + n, true
}

// Check returns an error when the cache's folder exists and is writable by group or others,
// or is owned by another user: such a cache is refused (a load through it fails with this
// error), since whoever can write it could substitute the code kernels run.
func (c *Cache) Check() error {
	if !c.Enabled() {
		return nil
	}
	if err := cachefile.CheckDir(c.dir); err != nil {
		return fmt.Errorf("jit cache: %w (KGEN_CACHE_DIR, or KGEN_CACHE=off)", err)
	}
	return nil
}

// checkPath checks the folder, the entry's subfolder and (when present) the entry.
func (c *Cache) checkPath(p string) error {
	if err := c.Check(); err != nil {
		return err
	}
	if err := cachefile.CheckDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("jit cache: %w", err)
	}
	if fi, err := os.Lstat(p); err == nil {
		if err := cachefile.CheckFile(p, fi); err != nil {
			return fmt.Errorf("jit cache: %w", err)
		}
	}
	return nil
}

func encodeEntry(key string, data []byte) []byte {
	sum := sha256.Sum256(data)
	var b bytes.Buffer
	b.WriteString(cacheMagic)
	b.WriteString(key)
	b.WriteByte('\n')
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteByte('\n')
	b.WriteString(strconv.Itoa(len(data)))
	b.WriteByte('\n')
	b.Write(data)
	return b.Bytes()
}

func decodeEntry(key string, b []byte) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(cacheMagic)) {
		return nil, false
	}
	b = b[len(cacheMagic):]
	var fields [3]string
	for i := range fields {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			return nil, false
		}
		fields[i], b = string(b[:j]), b[j+1:]
	}
	n, err := strconv.Atoi(fields[2])
	if fields[0] != key || err != nil || n != len(b) {
		return nil, false
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != fields[1] {
		return nil, false
	}
	return b, true
}

// Put stores data under k (atomically: concurrent readers see the old entry, the new one or
// none, never a part).
func (c *Cache) Put(k CacheKey, data []byte) error {
	if !c.Enabled() {
		return nil
	}
	if err := entryFits(len(data)); err != nil {
		return err
	}
	key := k.String()
	p := c.path(key)
	if err := c.Check(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("jit cache: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+key[:8]+"-*")
	if err != nil {
		return fmt.Errorf("jit cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(encodeEntry(key, data))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("jit cache: writing %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("jit cache: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("jit cache: %w", err)
	}
	return nil
}

// Clear deletes the cache's own entries and nothing else: files named <key>.cubin (a key is
// 64 hex digits) in the subfolder named by the key's first two digits, and the temporary files
// Put leaves there (.tmp-<8 hex>-<digits>), each only when it starts with the entry magic (a
// temporary file may also be empty). Nothing deeper, nothing else: the folder may be shared
// ($KGEN_CACHE_DIR=$HOME deletes no file of the user's).
func (c *Cache) Clear() error {
	if c == nil || c.dir == "" {
		return nil
	}
	var errs []error
	err := c.walkOwn(func(p string, entry bool) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	})
	return errors.Join(append(errs, err)...)
}

// walkOwn calls fn for every file of the cache's own layout (see Clear); entry is false for
// a temporary file.
func (c *Cache) walkOwn(fn func(p string, entry bool)) error {
	subs, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, sd := range subs {
		if !sd.IsDir() || len(sd.Name()) != 2 || !isHex(sd.Name()) {
			continue
		}
		sub := filepath.Join(c.dir, sd.Name())
		files, err := os.ReadDir(sub)
		if err != nil {
			continue
		}
		for _, f := range files {
			name := f.Name()
			key, isEntry := strings.CutSuffix(name, ".cubin")
			switch {
			case isEntry && len(key) == 64 && isHex(key) && key[:2] == sd.Name():
			case isTempName(name, sd.Name()):
				isEntry = false
			default:
				continue
			}
			p := filepath.Join(sub, name)
			if !hasMagic(p, !isEntry) {
				continue
			}
			fn(p, isEntry)
		}
	}
	return nil
}

// isTempName matches Put's temporary files in subfolder sub: ".tmp-" + the key's first 8 hex
// digits (which start with sub) + "-" + CreateTemp's digits.
func isTempName(name, sub string) bool {
	rest, ok := strings.CutPrefix(name, ".tmp-")
	if !ok || len(rest) < 10 || rest[8] != '-' || !isHex(rest[:8]) || rest[:2] != sub {
		return false
	}
	for _, r := range rest[9:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return s != ""
}

// hasMagic reports whether p is a regular file starting with the entry magic (or, when
// empty is true, has no bytes at all).
func hasMagic(p string, empty bool) bool {
	f, fi, err := cachefile.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi.Size() == 0 {
		return empty
	}
	b := make([]byte, len(cacheMagic))
	if _, err := io.ReadFull(f, b); err != nil {
		return false
	}
	return string(b) == cacheMagic
}

// Len counts the entries (for tests and `kgen` diagnostics).
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	c.walkOwn(func(_ string, entry bool) {
		if entry {
			n++
		}
	})
	return n
}

// Key computes the cache key of a load.
func cacheKey(ptxText []byte, dl *DevLib, arch string, driver int) (CacheKey, error) {
	k := CacheKey{PTX: sha256.Sum256(ptxText), Arch: arch, Driver: driver}
	if dl != nil {
		h, err := devLibHash(dl)
		if err != nil {
			return k, err
		}
		k.DevLib = h
	}
	return k, nil
}

var archiveHashes sync.Map // path|size|mtime -> [32]byte

func devLibHash(dl *DevLib) ([32]byte, error) {
	h := sha256.New()
	ps := sha256.Sum256(dl.PTX)
	fmt.Fprintf(h, "devlib v1\nptx %x\nversion %s\n", ps, dl.Version)
	for _, o := range dl.Objects {
		fmt.Fprintf(h, "object %x\n", sha256.Sum256(o))
	}
	if dl.Archive != "" {
		fi, err := os.Stat(dl.Archive)
		if err != nil {
			return [32]byte{}, fmt.Errorf("jit: NVSHMEM device archive: %w", err)
		}
		if !fi.Mode().IsRegular() { // a FIFO blocked the read below, /dev/zero never ended it
			return [32]byte{}, fmt.Errorf("jit: NVSHMEM device archive %s is not a regular file (%s)", dl.Archive, fi.Mode().Type())
		}
		memo := fmt.Sprintf("%s|%d|%d", dl.Archive, fi.Size(), fi.ModTime().UnixNano())
		var as [32]byte
		if v, ok := archiveHashes.Load(memo); ok {
			as = v.([32]byte)
		} else {
			b, err := os.ReadFile(dl.Archive)
			if err != nil {
				return [32]byte{}, fmt.Errorf("jit: NVSHMEM device archive: %w", err)
			}
			as = sha256.Sum256(b)
			archiveHashes.Store(memo, as)
		}
		fmt.Fprintf(h, "archive %x\n", as)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// cachedLink returns the cubin for key from the cache, or runs link and stores its result.
func cachedLink(c *Cache, key CacheKey, link func() ([]byte, error)) (cubin []byte, hit bool, err error) {
	if err := c.Check(); err != nil {
		return nil, false, err
	}
	if b, ok := c.Get(key); ok {
		return b, true, nil
	}
	b, err := link()
	if err != nil {
		return nil, false, err
	}
	if err := c.Put(key, b); err != nil {
		// A cache that cannot be written is not fatal; the link succeeded.
		fmt.Fprintf(os.Stderr, "kgen: warning: %v (set KGEN_CACHE=off or KGEN_CACHE_DIR)\n", err)
	}
	return b, false, nil
}
