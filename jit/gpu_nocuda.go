//go:build !cuda || !cgo

package jit

// cudaBuilt reports whether the GPU backend is compiled in (build tag cuda, with cgo).
const cudaBuilt = false

func openGPU(ordinal int) (device, error) { return nil, ErrNoCUDA }

func probeGPU() error { return ErrNoCUDA }
