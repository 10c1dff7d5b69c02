package jit

import (
	"strings"
	"testing"
)

// The emulator refuses a module that fails ptx.Verify when it is loaded, as ptxas refuses it
// on the GPU (it used to run it).
func TestEmuLoadRefusesInvalidModule(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mod := bumpKernel(t)
	broke := false
	for _, f := range mod.Funcs {
		for _, in := range f.Body {
			if in.Op == "add" && !broke {
				in.Q = append(in.Q, "bogus")
				broke = true
			}
		}
	}
	if !broke {
		t.Fatal("bump has no add")
	}
	_, err = d.Load(Source{Module: mod})
	if err == nil || !strings.Contains(err.Error(), "fails ptx.Verify") || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("Load of an invalid module: %v", err)
	}
}
