// Package dsl is kgen's kernel builder: Go code that describes a GPU kernel and lowers it to
// package ptx.
//
// Go control flow is the compile-time metalanguage: a Go for loop unrolls, a Go if
// specialises. Runtime control flow is explicit: k.If, k.For, k.While. Values are typed
// (Bool, integers, F16, BF16, F32, F64); conversions are explicit (Value.To) and operations on
// constants fold at build time.
//
// Builders never return errors mid-chain. Misuse (a type mismatch, a value from another
// kernel, a store to a parameter, ...) is recorded with the caller's file:line and returned,
// all together, by Build. Every instruction carries the Go source line that built it, printed
// as a PTX .loc line.
package dsl
