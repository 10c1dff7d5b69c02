//go:build unix

package jit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbe11DevLibArchive: a DevLib whose Archive is a FIFO, a device or a link to one is
// refused naming the archive, promptly (its hash is part of the cache key). Before: a FIFO
// blocked the load for ever in os.ReadFile, and /dev/zero was read without end.
func TestProbe11DevLibArchive(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "libnvshmem_device.a")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "libnvshmem_device.a")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, ar := range []string{fifo, "/dev/zero", link} {
		done := make(chan error, 1)
		go func() {
			_, err := cacheKey([]byte("x"), &DevLib{PTX: []byte("d"), Archive: ar}, "sm_90", 1)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), ar+" is not a regular file") {
				t.Errorf("archive %s: %v; want an error naming it", ar, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("archive %s: no answer in 30 s", ar)
		}
	}
}
