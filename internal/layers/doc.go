// Package layers holds the test that pins kgen's import graph: which layers may import which
// (the runtime imports no builder, NVSHMEM's emulation sits apart from its device API).
package layers
