package tune

import (
	"strings"
	"testing"
)

// TestProbe14LongDirBounded: New of a 200 KB folder name gives a short error, quoting an
// excerpt of the path (the os error quoted it whole, 200 KB); probe 14.
func TestProbe14LongDirBounded(t *testing.T) {
	dir := "/tmp/" + strings.Repeat("d", 200000)
	_, err := New(dir, Schedule{})
	if err == nil {
		t.Fatal("New of a 200 KB path: no error")
	}
	if n := len(err.Error()); n > 2000 || !strings.Contains(err.Error(), "tune: cache") {
		t.Errorf("New of a 200 KB path: %d bytes: %.300v", n, err)
	}
}
