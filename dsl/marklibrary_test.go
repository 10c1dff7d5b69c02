package dsl_test

import (
	"path/filepath"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/dsl/internal/libtest"
)

// TestMarkLibraryForgetsPositions: instructions a library emits carry the library's lines
// until it calls MarkLibrary, then its caller's, though the frame walk learned the earlier
// answer for the same call sites (every cache of it is cleared).
func TestMarkLibraryForgetsPositions(t *testing.T) {
	addFile := func() string {
		k := dsl.New("marklib")
		x := k.ThreadIdx(dsl.X)
		libtest.Add(x, x)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range m.Funcs[0].Body {
			if in.Op == "add" {
				return filepath.Base(in.Pos.File)
			}
		}
		t.Fatal("no add instruction")
		return ""
	}
	for i := range 2 { // twice: the second build takes the learned walk
		if got := addFile(); got != "libtest.go" {
			t.Fatalf("build %d before MarkLibrary: the add is at %s, want libtest.go", i+1, got)
		}
	}
	libtest.Mark()
	for i := range 2 {
		if got := addFile(); got != "marklibrary_test.go" {
			t.Fatalf("build %d after MarkLibrary: the add is at %s, want marklibrary_test.go (the library's caller)", i+1, got)
		}
	}
}
