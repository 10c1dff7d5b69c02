//go:build !cuda || !cgo

package jit

func openGPU(ordinal int) (device, error) { return nil, ErrNoCUDA }
