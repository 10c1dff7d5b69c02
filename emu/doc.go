// Package emu runs ptx modules on the CPU over several simulated GPUs: every block of every
// GPU resident at once under a cooperative scheduler, per-GPU global memory, a symmetric heap
// with peer and multicast addresses, a weak-memory mode and a sanitizer. It is how kgen proves
// multi-GPU kernels correct without GPUs.
//
// A System holds the GPUs and their memory: Malloc/MallocSymmetric, Write/Read and the typed
// WriteSlice/ReadSlice, Peer and MulticastOf for address translation. Launch runs one kernel
// (a *ptx.Module and an entry name) on one GPU or collectively on several, with arguments
// checked against the kernel's parameters and Options for the schedule seed, the weak-memory
// mode, the progress budget and the sanitizer. Faults come back as *Error values that name
// the kernel, GPU, block, thread, PTX instruction and the Go line that built it.
// RegisterExtern implements .extern functions (NVSHMEM's device API is built on it); a
// handler may block cooperatively with ExternCall.Wait. SetNodes splits the GPUs into nodes
// (peer and multicast memory stop at the node); a logical clock (Now, At) lets extern
// functions deliver data late, as NVSHMEM's transfers between nodes arrive.
//
// docs/emu.md describes the execution, memory and weak-memory models, the sanitizer, the
// extern hook and the instruction coverage.
package emu
