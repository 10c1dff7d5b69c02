package emu

import "fmt"

// The topology of a System: its GPUs split into nodes of consecutive GPUs (GPU g is on node
// g / NodeSize). GPUs of one node reach each other's memory by load, store and atomic (peer
// pointers) and share multicast; GPUs of different nodes do not: a kernel's access of
// another node's memory is a KindRemoteNode fault, and a multimem instruction reaches the
// copies of the executing GPU's node only. Data moves between nodes through extern functions
// (ExternCall's Load, Store and Atomic reach every GPU, as NVSHMEM's transports do), which
// may deliver it late (ExternCall.Schedule). Host copies reach every GPU.

// SetNodes splits the GPUs into nodes of NumGPUs()/nodes consecutive GPUs; 1 (the default)
// makes one node of all of them. The number of GPUs must be a multiple of nodes. The
// topology is fixed while kernels run: SetNodes with kernels in flight (Start), or from an
// Action or extern function during a launch, is an error (a kernel reading a peer's memory
// legally faulted as a remote-node access once the split moved the peer to another node).
func (s *System) SetNodes(nodes int) error {
	if s == nil {
		return errNilSystem("SetNodes")
	}
	if err := s.reentered("SetNodes"); err != nil {
		return err
	}
	if n := s.InFlight(); n > 0 {
		return fmt.Errorf("emu: SetNodes(%d) while %d kernel(s) started with Start are in flight: the topology is fixed while kernels run (run them to the end first)", nodes, n)
	}
	n := len(s.gpus)
	if nodes < 1 || nodes > n {
		return fmt.Errorf("emu: %d nodes for %d GPUs: want 1 to %d", nodes, n, n)
	}
	if n%nodes != 0 {
		return fmt.Errorf("emu: %d GPUs do not split into %d nodes of equal size", n, nodes)
	}
	s.nodeSize = n / nodes
	return nil
}

// Nodes returns the number of nodes (1 unless SetNodes split the GPUs; 0 for a System of no
// GPUs: a nil or zero one).
func (s *System) Nodes() int {
	if n := s.NodeSize(); n > 0 {
		return len(s.gpus) / n
	}
	return 0
}

// NodeSize returns the number of GPUs of each node (0 for a nil or zero System).
func (s *System) NodeSize() int {
	if s == nil {
		return 0
	}
	if s.nodeSize == 0 {
		return len(s.gpus)
	}
	return s.nodeSize
}

// NodeOf returns the node of GPU gpu (0 for a System of no GPUs, which has no nodes).
func (s *System) NodeOf(gpu int) int {
	if n := s.NodeSize(); n > 0 {
		return gpu / n
	}
	return 0
}

// SameNode reports whether GPUs a and b are on one node.
func (s *System) SameNode(a, b int) bool { return s.NodeOf(a) == s.NodeOf(b) }

// reach checks that GPU gpu may access global address addr by load, store or atomic: it
// faults when addr is in the memory of a GPU of another node.
func (s *System) reach(gpu int, addr uint64, n int) *memFault {
	if s.nodeSize == 0 {
		return nil
	}
	r := region(addr)
	if r < regionGlobal0 || r >= regionGlobal0+uint64(len(s.gpus)) {
		return nil
	}
	to := int(r - regionGlobal0)
	if to/s.nodeSize == gpu/s.nodeSize {
		return nil
	}
	return faultf(KindRemoteNode, "GPU %d (node %d) accesses %d bytes at %#x in the memory of GPU %d (node %d): GPUs of different nodes share no peer memory; move data between nodes with NVSHMEM (put, get, put_signal, atomics)",
		gpu, gpu/s.nodeSize, n, addr, to, to/s.nodeSize)
}
