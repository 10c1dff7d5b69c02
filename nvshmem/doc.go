// Package nvshmem gives kernels NVSHMEM's device API and programs its host API.
//
// It owns three things: the device API as DSL operations with NVSHMEM's exact C ABI (calls
// into the functions of libnvshmem_device.bc), the device-library builder (package
// nvshmem/devlib: bitcode to linkable PTX), and the host binding (init, symmetric memory, peer
// and multicast pointers; cgo, build tag cuda).
package nvshmem
