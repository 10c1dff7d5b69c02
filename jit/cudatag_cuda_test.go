//go:build cuda && cgo

package jit

const cudaTagged = true
