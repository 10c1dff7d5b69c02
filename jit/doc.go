// Package jit links, loads and launches kgen modules: one API over two backends, real GPUs
// through the CUDA driver (build tag cuda) and the emulator (package emu, always available).
// It also keeps the disk cache of linked cubins.
package jit
