package jit_test

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kgen-dev/kgen/jit"
)

// RunRanks runs a function once per rank. Here, on the emulator, 4 goroutine ranks share one
// emulated machine: each allocates its copy of a symmetric buffer, stores its rank into the
// next rank's copy through the peer address, and reads what the previous rank stored. Under
// `kgen launch -n 4 --backend cuda` the same function runs once in each of 4 processes.
func ExampleRunRanks() {
	var mu sync.Mutex
	var lines []string
	err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 4, NVSHMEM: true}, func(r *jit.Rank) error {
		buf, err := jit.SymAlloc[int32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		next, err := r.NVSHMEM.PeerPtr(buf, (r.Rank+1)%r.World)
		if err != nil {
			return err
		}
		me := []int32{int32(r.Rank)}
		src, err := jit.Alloc[int32](r.Device, 1)
		if err != nil {
			return err
		}
		if err := src.CopyFromHost(me); err != nil {
			return err
		}
		if err := r.Device.CopyDtoD(next, src.DevPtr(), 4); err != nil {
			return err
		}
		if err := r.NVSHMEM.BarrierAll(); err != nil {
			return err
		}
		if err := buf.CopyToHost(me); err != nil {
			return err
		}
		mu.Lock()
		lines = append(lines, fmt.Sprintf("rank %d of %d received %d", r.Rank, r.World, me[0]))
		mu.Unlock()
		return nil
	})
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Println("error:", err)
	// Output:
	// rank 0 of 4 received 3
	// rank 1 of 4 received 0
	// rank 2 of 4 received 1
	// rank 3 of 4 received 2
	// error: <nil>
}

// RanksOptions.Nodes makes the emulator a cluster: here 2 nodes of 2 GPUs. Each rank learns
// its node and the PEs that share it; the next rank's memory is reachable by a peer pointer
// only within the node (across nodes, NVSHMEM's put and get move the data), and the world has
// no multicast address, the node has one.
func ExampleRunRanks_nodes() {
	var mu sync.Mutex
	var lines []string
	err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *jit.Rank) error {
		buf, err := jit.SymAlloc[int32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		next := (r.Rank + 1) % r.World
		_, perr := r.NVSHMEM.PeerPtr(buf, next)
		_, werr := r.NVSHMEM.MulticastPtr(buf)
		_, nerr := r.NVSHMEM.NodeMulticastPtr(buf)
		mu.Lock()
		lines = append(lines, fmt.Sprintf("rank %d: node %d, local rank %d, node PEs %v; peer pointer to rank %d: %t; world multicast: %t, node multicast: %t",
			r.Rank, r.Node, r.LocalRank, r.NVSHMEM.NodePEs(), next, perr == nil, werr == nil, nerr == nil))
		mu.Unlock()
		return nil
	})
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Println("error:", err)
	// Output:
	// rank 0: node 0, local rank 0, node PEs [0 1]; peer pointer to rank 1: true; world multicast: false, node multicast: true
	// rank 1: node 0, local rank 1, node PEs [0 1]; peer pointer to rank 2: false; world multicast: false, node multicast: true
	// rank 2: node 1, local rank 0, node PEs [2 3]; peer pointer to rank 3: true; world multicast: false, node multicast: true
	// rank 3: node 1, local rank 1, node PEs [2 3]; peer pointer to rank 0: false; world multicast: false, node multicast: true
	// error: <nil>
}
