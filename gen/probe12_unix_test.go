//go:build unix

package gen

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadAtMostFIFO: the comparison read of writeIfChanged refuses a FIFO at once (one
// swapped in after existingFile's look blocked the read until a writer came; probe 12).
func TestReadAtMostFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x_kgen.go")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readAtMost(p, 10)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was read as a file")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("readAtMost blocked on a FIFO")
	}
}
