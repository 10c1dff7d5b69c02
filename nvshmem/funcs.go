package nvshmem

import "github.com/kgen-dev/kgen/nvshmem/abi"

// Functions returns, sorted, the name of every NVSHMEM device function the operations of
// this package can call: the ABI test checks each against the device library, and the
// emulation (package nvshmem/shmemu) implements each.
func Functions() []string { return abi.Functions() }
