package jit

import (
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"os"
	"strings"
	"sync"
)

// ParseBackend reads a backend name: "cuda" or "gpu" for GPU, "emu" or "emulator" for
// Emulator (case does not matter).
func ParseBackend(s string) (Backend, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "cuda", "gpu":
		return GPU, nil
	case "emu", "emulator":
		return Emulator, nil
	}
	return "", fmt.Errorf("jit: unknown backend %s (valid: cuda, emu)", excerpt.Quote(s))
}

var (
	probeOnce sync.Once
	probeErr  error
	noticed   sync.Once
)

// gpuUsable reports why the GPU backend cannot run here (nil when it can): the binary was
// built without the cuda tag, the driver is missing, or no GPU is visible.
func gpuUsable() error {
	probeOnce.Do(func() { probeErr = probeGPU() })
	return probeErr
}

// DefaultBackend is the backend Open and RunRanks use: $KGEN_BACKEND when set ("cuda" or
// "emu"); otherwise GPU when the binary was built with the cuda tag and a GPU is visible, and
// Emulator when not. A binary built without the cuda tag runs on the emulator. A cuda-tagged
// binary that finds no GPU prints one line to stderr saying it falls back to the emulator
// (set KGEN_BACKEND=cuda to get the GPU backend's error instead).
func DefaultBackend() (Backend, error) {
	if v := os.Getenv("KGEN_BACKEND"); v != "" {
		b, err := ParseBackend(v)
		if err != nil {
			return "", fmt.Errorf("jit: KGEN_BACKEND=%s: valid values are cuda and emu", excerpt.Quote(v))
		}
		return b, nil
	}
	if !cudaBuilt {
		return Emulator, nil
	}
	if err := gpuUsable(); err != nil {
		noticed.Do(func() {
			fmt.Fprintf(os.Stderr, "kgen: no usable GPU (%v); running on the emulator (set KGEN_BACKEND=cuda to fail instead, KGEN_BACKEND=emu to silence this)\n", err)
		})
		return Emulator, nil
	}
	return GPU, nil
}
