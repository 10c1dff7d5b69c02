//go:build unix

package genrt

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestProbe11ArchiveEnv: $KGEN_NVSHMEM_DEVICE_ARCHIVE naming a FIFO or a device is refused
// naming the variable (it was taken as the archive, whose hashing for the cache key then
// blocked or read without end).
func TestProbe11ArchiveEnv(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "libnvshmem_device.a")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		t.Setenv(ArchiveEnv, p)
		if got, err := deviceArchive(""); err == nil || !strings.Contains(err.Error(), ArchiveEnv+"="+p+" is not a regular file") {
			t.Errorf("$%s=%s: %q, %v; want it refused", ArchiveEnv, p, got, err)
		}
	}
}
