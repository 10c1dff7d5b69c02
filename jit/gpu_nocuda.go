//go:build !cuda

package jit

func openGPU(ordinal int) (device, error) { return nil, ErrNoCUDA }
