package devlib

import (
	"fmt"
	"strings"
	"testing"
)

// TestProbe13UnknownFunctionsBounded: an *UnknownFunctionError of thousands of names (kgen
// devlib --funcs f0,...,f2999) lists the first ten, each long name as an excerpt, and says
// how many more; Names keeps every one. Before: the message listed all 3000 (19949 bytes
// from the CLI; probe 13).
func TestProbe13UnknownFunctionsBounded(t *testing.T) {
	names := make([]string, 3000)
	notes := make([]string, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("f%d", i)
	}
	names[1] = strings.Repeat("x", 5000)
	notes[2] = "did you mean nvshmem_quiet?"
	e := &UnknownFunctionError{Version: "3.4.5", Names: names, Notes: notes}
	msg := e.Error()
	if len(msg) > 600 {
		t.Errorf("the message is %d bytes: %.300s...", len(msg), msg)
	}
	for _, want := range []string{"NVSHMEM 3.4.5", "f0, ", "f2 (did you mean nvshmem_quiet?)", "f9, and 2990 more", "(5000 bytes)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not hold %q", msg, want)
		}
	}
	if strings.Contains(msg, "f10,") || strings.Contains(msg, "f2999") {
		t.Errorf("message %q lists names past the tenth", msg)
	}
	// Few names are all listed, as before; Notes shorter than Names is no panic.
	short := &UnknownFunctionError{Version: "3.4.5", Names: []string{"a", "b"}, Notes: []string{"x"}}
	if got, want := short.Error(), "devlib: NVSHMEM 3.4.5's device library does not define a (x), b"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
