// Package devlib builds NVSHMEM's device library for kernels that kgen emits.
//
// NVSHMEM's public device API (nvshmemx_putmem_block, nvshmem_quiet, nvshmem_ptr, ...) is
// header-inline CUDA C++; the only place it exists as callable functions is the LLVM bitcode
// lib/libnvshmem_device.bc, which CUDA's libNVVM cannot read (it was produced by LLVM 18).
// The device archive lib/libnvshmem_device.a holds the device state (nvshmemi_device_state_d)
// and helpers, but none of the public API. So a kernel that calls NVSHMEM is linked from three
// inputs:
//
//  1. the kernel PTX, which declares each NVSHMEM function it calls as `.extern .func` and
//     calls it with `call.uni`;
//  2. the devlib PTX this package builds: the called functions and everything they call,
//     extracted from the bitcode (`llvm-extract --recursive --keep-const-init --func=F ...`),
//     with every other definition made internal and the unused ones dropped
//     (`opt -passes=internalize,globaldce`), compiled by LLVM 19
//     (`llc -march=nvptx64 -mcpu=sm_XX -mattr=+ptxNN`);
//  3. libnvshmem_device.a, added to the CUDA JIT linker as CU_JIT_INPUT_LIBRARY (or to
//     nvlink as an input).
//
// [Open] finds an NVSHMEM installation and reads its version; [Library.Build] produces the
// devlib PTX for a target and a set of functions and caches it on disk; [Library.Signatures]
// reads the PTX call ABI of every public function from the bitcode ([Library.SignaturesOf]
// reads a few, quickly) so that kgen's NVSHMEM operations can be checked against it
// ([ParseDecls], [CheckDecls]; testdata/api_3.4.5.txt is the whole table of NVSHMEM 3.4.5, so
// the check needs no tools); [LinkOffline] links a kernel with ptxas and nvlink, without a
// GPU; [Run] is what `kgen devlib` calls.
//
// The devlib PTX is tied to the NVSHMEM version it was built from (the layout of
// nvshmemi_device_state_d changes between versions). Every built PTX starts with a comment
// header recording that version ([ParseHeader]); [CheckVersion] and [CheckPTX] refuse to pair
// it with another NVSHMEM host library.
//
// The cache folder ([DefaultCacheDir]) must be private: a folder (or entry) writable by group
// or others, or owned by another user, is refused with an error naming it, since whoever can
// write it could substitute the code kernels link. Only regular files are read from it (a
// FIFO, device or symlink at an entry's path is a miss), never past their length.
//
// The external tools (llvm-extract, opt, llc, llvm-nm and llvm-dis of LLVM 19) are found by
// package internal/toolchain.
package devlib
