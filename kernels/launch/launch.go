// Package launch holds the host twins of the library kernels' parameter structs: for each
// family's kernels.XxxArgs (read by dsl.Params) a struct of the same fields in the same order,
// for jit.Function.LaunchArgs. They are generated from the Args declarations (gen.go, run by
// go generate; `make gen-check` fails when launch_kgen.go is stale), so a twin cannot drift
// from its kernel. A kernel whose parameters are several Args structs in order (the gemms:
// GemmArgs or GemmSM90Args, GemmOut, GemmSM90StoreArgs with the TMA store, GemmEpilogueArgs
// with epilogue options; the fused kernels: their Args and output) has one flat twin of them
// all (Gemm, GemmEpi, GemmSM90, GemmSM90Store, GemmSM90Epi, GemmSM90StoreEpi, AGGemm...),
// with jit.AnyPtr pointers, since input and output types differ.
//
// The single-GPU kernels' twins are generic: pointers are jit.Ptr[T] of the variant's element
// type T (float32, fp.F16, fp.BF16, uint8...), so a buffer of another type does not compile.
// A collective's element type is chosen at run time, so its pointers are jit.AnyPtr: the
// launch checks each one's element type against what the kernel declared (load the module
// with jit.Source.Params) and names the field when they differ. Tables of peer addresses
// (dsl.PeerTable) point to u64; the barrier pads and flags to u32.
//
// It imports no builder (dsl, layout): programs that only launch need jit and this package.
package launch

//go:generate go run gen.go
