//go:build !amd64

package dsl

// walkFrames finds no frames off amd64: callerPos then always uses runtime.Callers.
func walkFrames(pcs []uintptr, skip int) int { return 0 }

// walkKnown walks no frames off amd64.
func walkKnown(skip int) (walkInfo, int, uintptr) { return walkInfo{}, walkStop, 0 }
