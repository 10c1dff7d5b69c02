package main

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestLegacyNVVM: libNVVM's legacy dialect serves every target before sm_100.
func TestLegacyNVVM(t *testing.T) {
	for _, c := range []struct {
		t    ptx.Target
		want bool
	}{{ptx.SM80, true}, {ptx.SM90, true}, {ptx.SM90a, true}, {ptx.SM100a, false}, {ptx.SM120a, false}} {
		if got := legacyNVVM(c.t); got != c.want {
			t.Errorf("legacyNVVM(%s) = %v, want %v", c.t, got, c.want)
		}
	}
}

// TestDottedGlobals: globals with dots are renamed, intrinsics and plain names are not.
func TestDottedGlobals(t *testing.T) {
	in := []byte(`@.str1 = internal constant; @__PRETTY_FUNCTION__.f.2 = internal; call @llvm.nvvm.read.ptx.sreg.tid.x(); @plain_name`)
	got := renameDotted(in)
	want := `@__kgen__str1 = internal constant; @__kgen___PRETTY_FUNCTION___f_2 = internal; call @llvm.nvvm.read.ptx.sreg.tid.x(); @plain_name`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestCheckCubinRefusesNonELF: a link result that is not ELF is an error, not a pass.
func TestCheckCubinRefusesNonELF(t *testing.T) {
	err := checkCubin([]byte("not a cubin"), []string{"k"})
	if err == nil || !strings.Contains(err.Error(), "not ELF") {
		t.Fatalf("checkCubin of garbage: %v", err)
	}
}
