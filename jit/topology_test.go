package jit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRunRanksNodes: 2 nodes x 2 ranks: every rank learns its node, its local rank and its
// node's PEs; peer addresses reach the node only, and multicast the node only.
func TestRunRanksNodes(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *Rank) error {
		if r.Node != r.Rank/2 || r.LocalRank != r.Rank%2 {
			return fmt.Errorf("rank %d: node %d local rank %d, want %d, %d", r.Rank, r.Node, r.LocalRank, r.Rank/2, r.Rank%2)
		}
		if got, want := r.NVSHMEM.NodePEs(), []int{r.Node * 2, r.Node*2 + 1}; !slices.Equal(got, want) {
			return fmt.Errorf("rank %d: NodePEs %v, want %v", r.Rank, got, want)
		}
		buf, err := SymAlloc[float32](r.NVSHMEM, 16)
		if err != nil {
			return err
		}
		for pe := 0; pe < r.World; pe++ {
			p, err := r.NVSHMEM.PeerPtr(buf, pe)
			if pe/2 == r.Node {
				if err != nil || p == 0 {
					return fmt.Errorf("rank %d: PeerPtr(PE %d of its node): %#x, %v", r.Rank, pe, uint64(p), err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "another node") {
				return fmt.Errorf("rank %d: PeerPtr(PE %d of the other node): %#x, %v; want an error naming the node", r.Rank, pe, uint64(p), err)
			}
		}
		_, err = r.NVSHMEM.MulticastPtr(buf)
		var me *MulticastError
		if !errors.As(err, &me) || !strings.Contains(me.Reason, "span several nodes") {
			return fmt.Errorf("rank %d: MulticastPtr on 2 nodes: %v; want a *MulticastError saying the world spans nodes", r.Rank, err)
		}
		if p, err := r.NVSHMEM.NodeMulticastPtr(buf); err != nil || p == 0 {
			return fmt.Errorf("rank %d: NodeMulticastPtr: %#x, %v", r.Rank, uint64(p), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRanksOneNode: without Nodes every rank is on node 0 and every pointer works.
func TestRunRanksOneNode(t *testing.T) {
	t.Setenv(EmuNodesEnv, "")
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		if r.Node != 0 || r.LocalRank != r.Rank || len(r.NVSHMEM.NodePEs()) != 3 {
			return fmt.Errorf("rank %d: node %d local %d node PEs %v", r.Rank, r.Node, r.LocalRank, r.NVSHMEM.NodePEs())
		}
		buf, err := SymAlloc[float32](r.NVSHMEM, 4)
		if err != nil {
			return err
		}
		if _, err := r.NVSHMEM.MulticastPtr(buf); err != nil {
			return err
		}
		_, err = r.NVSHMEM.PeerPtr(buf, (r.Rank+1)%3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRanksNodesEnv: KGEN_EMU_NODES gives the nodes when RanksOptions.Nodes is 0, and
// a world that does not split evenly is refused naming both numbers.
func TestRunRanksNodesEnv(t *testing.T) {
	t.Setenv(EmuNodesEnv, "3")
	err := RunRanks(RanksOptions{Backend: Emulator, World: 6}, func(r *Rank) error {
		if r.Node != r.Rank/2 || r.LocalRank != r.Rank%2 {
			return fmt.Errorf("rank %d: node %d local %d", r.Rank, r.Node, r.LocalRank)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = RunRanks(RanksOptions{Backend: Emulator, World: 6, Nodes: 4}, func(*Rank) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "6 ranks") || !strings.Contains(err.Error(), "4 nodes") {
		t.Errorf("6 ranks on 4 nodes: %v", err)
	}
	t.Setenv(EmuNodesEnv, "two")
	if err := RunRanks(RanksOptions{Backend: Emulator, World: 2}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), EmuNodesEnv) {
		t.Errorf("%s=two: %v", EmuNodesEnv, err)
	}
}
