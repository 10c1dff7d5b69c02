package devlib

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/ptx"
)

// Tests in this file need no external tools.

// A FIFO, a symlink to /dev/zero, a folder or a longer file at a unit entry's path is a miss,
// at once (the FIFO blocked `kgen devlib --each` forever; /dev/zero exhausted memory).
func TestReadUnitReadsOnlyRegularEntries(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "nvshmem_quiet.ptx")
	key := strings.Repeat("ab", 32)
	if err := writeUnit(p, key, []byte("// ptx\n")); err != nil {
		t.Fatal(err)
	}
	if b := readUnit(p, key); string(b) != "// ptx\n" {
		t.Fatalf("readUnit = %q", b)
	}
	whole, _ := os.ReadFile(p)
	for _, tc := range []struct {
		name string
		make func() error
	}{
		{"fifo", func() error { return syscall.Mkfifo(p, 0o644) }},
		{"symlink to /dev/zero", func() error { return os.Symlink("/dev/zero", p) }},
		{"folder", func() error { return os.Mkdir(p, 0o755) }},
		{"trailing bytes", func() error { return os.WriteFile(p, append(bytes.Clone(whole), "x"...), 0o644) }},
	} {
		os.RemoveAll(p)
		if err := tc.make(); err != nil {
			t.Fatal(err)
		}
		done := make(chan []byte, 1)
		go func() { done <- readUnit(p, key) }()
		select {
		case b := <-done:
			if b != nil {
				t.Errorf("%s: readUnit served %d bytes", tc.name, len(b))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: readUnit did not return in 5s", tc.name)
		}
	}
	// A whole-library entry (no length in its header) is read only when regular, too.
	os.RemoveAll(p)
	if err := os.Symlink("/dev/zero", p); err != nil {
		t.Fatal(err)
	}
	if b, err := readCached(p, 0, nil); err == nil {
		t.Errorf("readCached over /dev/zero served %d bytes", len(b))
	}
}

// A cache folder others can write is refused with an error naming it, before any tool runs.
func TestBuildRefusesSharedCache(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	l := &Library{CacheDir: dir, Version: "3.4.5", Hash: strings.Repeat("0", 64)}
	_, err1 := l.Build(t.Context(), ptx.SM90, []string{"nvshmem_quiet"})
	_, err2 := l.BuildEach(t.Context(), ptx.SM90, []string{"nvshmem_quiet"}, EachOptions{})
	_, err3 := l.Signatures(t.Context())
	for i, err := range []error{err1, err2, err3} {
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "writable by group or others") {
			t.Errorf("call %d: err = %v, want one naming %s as writable by group or others", i, err, dir)
		}
	}
}
