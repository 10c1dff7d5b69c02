//go:build !cuda

package jit

const cudaTagged = false
