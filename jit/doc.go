// Package jit links, loads and launches kgen modules: one API (Device, Module, Function,
// Buffer, Stream, Event, NVSHMEM) over two backends, real GPUs through the CUDA driver
// (gorgonia.org/cu, build tag cuda) and the emulator (package emu, pure Go, always built in).
// Open and RunRanks pick the backend from $KGEN_BACKEND (cuda or emu), else the GPU when the
// binary has the cuda tag and a GPU is visible, else the emulator (DefaultBackend).
//
// On the GPU a load links the module's PTX, and NVSHMEM's device library when the module
// calls NVSHMEM, with the driver's JIT linker and caches the cubin on disk (Cache;
// KGEN_CACHE=off disables it). On the emulator a load decodes the ptx.Module, and NVSHMEM's
// device API is emulated. Either way a launch checks its arguments against the kernel's
// parameters in the ptx.Module. Function.LaunchArgs takes them as a struct whose pointer
// fields carry their element type (Ptr[T], TypedPtr[T]; AnyPtr when it is chosen at run
// time, checked against the element types the builder declared, Source.Params).
//
// RunRanks runs a multi-GPU program once per rank: on GPUs every rank is a process (started
// by `kgen launch`, which uses LaunchRanks, or by torchrun), on the emulator every rank is a
// goroutine and all share one emulated machine, so the same program runs on N GPUs and on N
// simulated GPUs. InitNVSHMEM starts NVSHMEM's host library (dlopen'ed, no headers) with a
// unique-ID bootstrap over TCP from torchrun's environment, or, on the emulator, across the
// goroutine ranks; the emulator gathers the ranks' launches of kernels that touch symmetric
// memory into one collective launch (LaunchConfig.Collective).
//
// Without the cuda tag the GPU backend reports ErrNoCUDA; with it, a binary also starts on a
// machine without a driver or GPU (package jit/internal/cudrv loads libcuda at run time) and
// Open explains what is missing. Nothing here panics or exits. See docs/jit.md.
package jit
