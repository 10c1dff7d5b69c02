//go:build cuda

package jit

const cudaTagged = true
