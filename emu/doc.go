// Package emu runs ptx modules on the CPU over several simulated GPUs: every block of every
// GPU resident at once under a cooperative scheduler, per-GPU global memory, a symmetric heap
// with peer and multicast addresses, a weak-memory mode and a sanitizer. It is how kgen proves
// multi-GPU kernels correct without GPUs.
package emu
