package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Cache is a disk cache of linked cubins, keyed by CacheKey. It is safe for concurrent use by
// goroutines and by processes sharing the folder: an entry is written to a temporary file and
// renamed into place, and every read checks the entry's key and checksum, so a reader sees a
// whole entry or none.
//
// The default folder is $KGEN_CACHE_DIR, else $XDG_CACHE_HOME/kgen/jit (~/.cache/kgen/jit).
// KGEN_CACHE=off disables the default cache; ClearCache (or deleting the folder) clears it.
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
}

// String is the key as a file name: a sha256 over all fields, in hex.
func (k CacheKey) String() string {
	h := sha256.New()
	fmt.Fprintf(h, "kgen-jit-cubin v1\nptx %x\ndevlib %x\narch %s\ndriver %d\n", k.PTX, k.DevLib, k.Arch, k.Driver)
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

// CacheDisabled reports whether KGEN_CACHE turns the default cache off ("off", "0", "false").
func CacheDisabled() bool {
	switch strings.ToLower(os.Getenv("KGEN_CACHE")) {
	case "off", "0", "false", "no":
		return true
	}
	return false
}

// DefaultCache returns the cache in DefaultCacheDir, disabled when KGEN_CACHE=off.
func DefaultCache() *Cache {
	return &Cache{dir: DefaultCacheDir(), disabled: CacheDisabled()}
}

// ClearCache deletes every entry of the default cache folder.
func ClearCache() error { return NewCache(DefaultCacheDir()).Clear() }

// Dir returns the cache's folder.
func (c *Cache) Dir() string { return c.dir }

// Enabled reports whether the cache stores anything.
func (c *Cache) Enabled() bool { return c != nil && !c.disabled && c.dir != "" }

const cacheMagic = "KGENCUBIN1\n"

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key[:2], key+".cubin") }

// Get returns the entry for k, or false when there is none (or it is damaged).
func (c *Cache) Get(k CacheKey) ([]byte, bool) {
	if !c.Enabled() {
		return nil, false
	}
	key := k.String()
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, false
	}
	data, ok := decodeEntry(key, b)
	return data, ok
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
	key := k.String()
	p := c.path(key)
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

// Clear deletes every entry (and stray temporary files) in the cache's folder.
func (c *Cache) Clear() error {
	if c == nil || c.dir == "" {
		return nil
	}
	var errs []error
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".cubin") || strings.HasPrefix(d.Name(), ".tmp-")) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// Len counts the entries (for tests and `kgen` diagnostics).
func (c *Cache) Len() int {
	n := 0
	filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".cubin") {
			n++
		}
		return nil
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
