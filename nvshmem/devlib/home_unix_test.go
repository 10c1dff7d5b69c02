//go:build unix

package devlib

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenHostileHome: a FIFO or device where NVSHMEM's bitcode or version header should be is
// an error naming it, not a hash or a read that blocks for ever (probe 11's leftover).
func TestOpenHostileHome(t *testing.T) {
	home := func(t *testing.T) (dir, lib, hdr string) {
		dir = t.TempDir()
		lib = filepath.Join(dir, "lib")
		inc := filepath.Join(dir, "include", "non_abi")
		for _, d := range []string{lib, inc} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(lib, "libnvshmem_device.bc"), []byte("BC"), 0o644)
		os.WriteFile(filepath.Join(lib, "libnvshmem_device.a"), []byte("!<arch>\n"), 0o644)
		return dir, lib, filepath.Join(inc, "nvshmem_version.h")
	}
	open := func(t *testing.T, dir string) error {
		done := make(chan error, 1)
		go func() { _, err := Open(dir); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Open blocked on a FIFO")
			return nil
		}
	}
	t.Run("bitcode FIFO", func(t *testing.T) {
		dir, lib, _ := home(t)
		bc := filepath.Join(lib, "libnvshmem_device.bc")
		os.Remove(bc)
		if err := syscall.Mkfifo(bc, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		if err := open(t, dir); err == nil || !strings.Contains(err.Error(), "libnvshmem_device.bc is not a regular file") {
			t.Errorf("Open = %v, want an error naming the bitcode", err)
		}
	})
	t.Run("bitcode device", func(t *testing.T) {
		dir, lib, _ := home(t)
		bc := filepath.Join(lib, "libnvshmem_device.bc")
		os.Remove(bc)
		if err := os.Symlink("/dev/zero", bc); err != nil {
			t.Skipf("symlink: %v", err)
		}
		if err := open(t, dir); err == nil || !strings.Contains(err.Error(), "libnvshmem_device.bc is not a regular file") {
			t.Errorf("Open = %v, want an error naming the bitcode", err)
		}
	})
	t.Run("header FIFO", func(t *testing.T) {
		dir, _, hdr := home(t)
		if err := syscall.Mkfifo(hdr, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		if err := open(t, dir); err == nil || !strings.Contains(err.Error(), "nvshmem_version.h is not a regular file") {
			t.Errorf("Open = %v, want an error naming the header", err)
		}
	})
}
