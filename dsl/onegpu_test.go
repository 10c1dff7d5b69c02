package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// onOneGPU builds k and returns its module with a one-GPU emulator to run it on.
func onOneGPU(t *testing.T, k *dsl.Kernel) (*ptx.Module, *emu.System) {
	t.Helper()
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	return m, sys
}
