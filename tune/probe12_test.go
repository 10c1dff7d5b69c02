package tune

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockPathEndedContext: with the lock free, an ended context takes it; the error "waiting
// for another tuner" is reserved for a lock another tuner holds (with -timeout 1ns the tuner
// reported such a wait with no other tuner, about half the time: select picks at random
// between a free lock and a done context; probe 12).
func TestLockPathEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := filepath.Join(t.TempDir(), "entry")
	for i := 0; i < 200; i++ {
		unlock, err := lockPath(ctx, p)
		if err != nil {
			t.Fatalf("try %d: %v; the lock was free", i, err)
		}
		unlock()
	}
	unlock, err := lockPath(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := lockPath(ctx, p); err == nil || !strings.Contains(err.Error(), "waiting for another tuner") {
		t.Errorf("a held lock and an ended context: %v; want the wait's error", err)
	}
}
