// Package jit links, loads and launches kgen modules: one API (Device, Module, Function,
// Buffer, Stream, Event, NVSHMEM) over two backends, real GPUs through the CUDA driver
// (gorgonia.org/cu, build tag cuda) and the emulator (package emu, always available).
//
// A load links the module's PTX, and NVSHMEM's device library when the module calls NVSHMEM,
// with the driver's JIT linker and caches the cubin on disk (Cache; KGEN_CACHE=off disables
// it). A launch checks its arguments against the kernel's parameters in the ptx.Module.
// InitNVSHMEM starts NVSHMEM's host library (dlopen'ed, no headers) with a unique-ID
// bootstrap over TCP from torchrun's environment, and LaunchRanks starts the ranks the way
// `kgen launch` does.
//
// Without the cuda tag the GPU backend reports ErrNoCUDA; with it, a binary also starts on a
// machine without a driver or GPU (package jit/internal/cudrv loads libcuda at run time) and
// Open explains what is missing. Nothing here panics or exits. See docs/jit.md.
package jit
