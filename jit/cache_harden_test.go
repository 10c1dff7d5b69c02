package jit

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test when it has not returned after d (a blocked read).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return in %s", what, d)
	}
}

// A FIFO, a symlink to /dev/zero, a folder or an entry longer than its header says at an
// entry's path is a miss, at once and without reading past the header's length.
func TestCacheGetReadsOnlyRegularEntries(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	c := NewCache(t.TempDir())
	k := CacheKey{Arch: "sm_90", Driver: 1}
	if err := c.Put(k, []byte("cubin")); err != nil {
		t.Fatal(err)
	}
	if b, ok := c.Get(k); !ok || string(b) != "cubin" {
		t.Fatalf("Get = %q, %v", b, ok)
	}
	p := c.path(k.String())
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		make func() error
	}{
		{"fifo", func() error { return syscall.Mkfifo(p, 0o644) }},
		{"symlink to /dev/zero", func() error { return os.Symlink("/dev/zero", p) }},
		{"symlink to a good entry", func() error {
			q := filepath.Join(t.TempDir(), "e")
			if err := os.WriteFile(q, whole, 0o644); err != nil {
				return err
			}
			return os.Symlink(q, p)
		}},
		{"folder", func() error { return os.Mkdir(p, 0o755) }},
		{"trailing bytes", func() error { return os.WriteFile(p, append(append([]byte{}, whole...), "more"...), 0o644) }},
		{"huge length", func() error {
			return os.WriteFile(p, []byte(strings.Replace(string(whole), "\n5\n", "\n99999999999999\n", 1)), 0o644)
		}},
	}
	for _, tc := range cases {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := tc.make(); err != nil {
			t.Fatal(err)
		}
		within(t, 5*time.Second, "Get over a "+tc.name, func() {
			if b, ok := c.Get(k); ok {
				t.Errorf("%s: Get served %d bytes", tc.name, len(b))
			}
		})
	}
}

// A cache folder writable by group or others (or an entry so writable) is refused: Get
// misses, Put and a cached link fail naming the folder.
func TestCacheRefusesSharedFolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	dir := t.TempDir()
	c := NewCache(dir)
	k := CacheKey{Arch: "sm_90", Driver: 1}
	if err := c.Put(k, []byte("cubin")); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatalf("a private folder was refused: %v", err)
	}
	// An entry made group-writable is not served.
	p := c.path(k.String())
	if err := os.Chmod(p, 0o664); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(k); ok {
		t.Error("a group-writable entry was served")
	}
	os.Chmod(p, 0o644)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if _, ok := c.Get(k); ok {
		t.Error("Get served an entry from a world-writable folder")
	}
	for what, err := range map[string]error{
		"Check": c.Check(),
		"Put":   c.Put(k, []byte("x")),
		"cachedLink": func() error {
			_, _, err := cachedLink(c, k, func() ([]byte, error) { return []byte("x"), nil })
			return err
		}(),
	} {
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "writable by group or others") {
			t.Errorf("%s: err = %v, want one naming %s as writable by group or others", what, err, dir)
		}
	}
}

// Clear deletes the cache's own entries and temporary files and nothing else, at no depth
// (KGEN_CACHE_DIR=$HOME must not cost the user a file).
func TestCacheClearDeletesOnlyItsOwnEntries(t *testing.T) {
	dir := t.TempDir()
	c := NewCache(dir)
	k := CacheKey{Arch: "sm_90", Driver: 1}
	if err := c.Put(k, []byte("cubin")); err != nil {
		t.Fatal(err)
	}
	key := k.String()
	sub := filepath.Join(dir, key[:2])
	tmp := filepath.Join(sub, ".tmp-"+key[:8]+"-123456")
	if err := os.WriteFile(tmp, []byte(cacheMagic+"partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	keep := map[string]string{
		"thesis.cubin":                          "my own cubin",
		"proj/build/kernel.cubin":               "nvcc output",
		"proj/.tmp-notes":                       "editor file",
		key[:2] + "/notes.cubin":                "not a key",
		key[:2] + "/" + key[:63] + "x.cubin":    "not hex",
		"zz/" + key + ".cubin":                  cacheMagic + "wrong folder",
		key[:2] + "/.tmp-" + key[:8] + "-99":    "no magic",
		"a/b/" + key[:2] + "/" + key + ".cubin": cacheMagic + "too deep",
	}
	// An entry name with foreign content is kept too.
	other := CacheKey{Arch: "sm_80"}.String()
	keep[other[:2]+"/"+other+".cubin"] = "someone else's file"
	for name, text := range keep {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{c.path(key), tmp} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("Clear left %s", p)
		}
	}
	for name := range keep {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("Clear deleted %s: %v", name, err)
		}
	}
	if _, ok := c.Get(k); ok {
		t.Error("the entry survived Clear")
	}
}
