package main

import (
	"errors"
	"testing"
)

// TestDecodeUsageErrors: bad decode flags are usage errors before any device work.
func TestDecodeUsageErrors(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	for _, args := range [][]string{
		{"-b", "0"},
		{"-ctx", "x"},
		{"-q", "0"},
		{"-h", "6", "-hkv", "4"},
		{"-reps", "0"},
		{"-dtype", "f32"},
		{"-d", "96"},
		{"-splits", "-1"},
		{"-bn", "-64"},
		{"-stages", "-1"},
	} {
		if err := runAttentionDecode(args); !errors.As(err, new(usageError)) {
			t.Errorf("gpubench decode %v: %v; want a usage error", args, err)
		}
	}
}
