// Package nvshmem gives kernels NVSHMEM's device API.
//
// The device API is a set of DSL operations (functions taking the *dsl.Kernel first, modelled
// on nvshmem4py's device API) that call the functions of NVSHMEM 3.x's device library
// (libnvshmem_device.bc) with their exact C ABI: p/g, put/get and their _nbi forms and
// put-with-signal at thread, warp and block scope, signal operations, quiet and fence, atomic
// memory operations, barriers and team synchronisation, reductions, reduce-scatters, fcollect, broadcast and
// alltoall, PE and team queries, and peer and multicast pointers. Buffers are dsl.Tensors or
// Spans; misuse is a build error at the caller's line. docs/nvshmem.md has the table beside
// nvshmem4py.
//
// Package nvshmem/abi holds the ABI as data (function names, constants, types); package
// nvshmem/shmemu implements every one of those functions on the emulator (package emu), so
// kernels that call NVSHMEM run and are checked without GPUs. Neither imports the builder,
// and this package does not import the emulator.
//
// Package nvshmem/devlib builds the device library (bitcode to linkable PTX) and checks
// declarations against it; the host side (init, symmetric memory, module init) is package
// jit's NVSHMEM binding. Package nvshmem/gputest is the acceptance test, on the emulator and
// on GPUs.
package nvshmem
