//go:build unix

package tune

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProbeCacheFolders: a tuner over a folder that is a file, /dev/null, or holds a huge
// entry, a FIFO or a symlink at the key's path: New refuses the folder naming it, or the
// entry is a miss and Tune times and replaces it; nothing blocks or reads past MaxEntry.
func TestProbeCacheFolders(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{file, "/dev/null"} {
		if _, err := New(d, Schedule{}); err == nil {
			t.Errorf("New(%s) = nil error; want the folder refused", d)
		}
	}
	k := testKey("folders")
	for name, plant := range map[string]func(p string) error{
		"huge": func(p string) error {
			b := append([]byte(`{"format":"kgen-tune 1","winner":"fast",`), make([]byte, MaxEntry)...)
			return os.WriteFile(p, b, 0o644)
		},
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"symlink": func(p string) error { return os.Symlink("/dev/zero", p) },
		"folder":  func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		tu, err := New(t.TempDir(), Schedule{Warmup: 1, Reps: 1})
		if err != nil {
			t.Fatal(err)
		}
		p := tu.Path(k)
		if err := plant(p); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			if _, ok := tu.Cached(k); ok {
				done <- errors.New("a hit")
				return
			}
			var calls atomic.Int64
			_, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
			done <- err
		}()
		select {
		case err := <-done:
			if name == "folder" {
				if err == nil {
					t.Errorf("%s: Tune replaced a folder at the entry's path", name)
				}
			} else if err != nil {
				t.Errorf("%s: %v; want a miss, then the winner stored", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Cached or Tune still blocked after 20 s", name)
		}
	}
}
