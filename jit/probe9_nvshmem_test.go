package jit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestProbe9NVSHMEMNodes: on 4 ranks in 2 nodes, the world's multicast pointer (the world
// spans nodes: no multicast), a peer pointer to another node's PE, a raw address inside or
// just past a symmetric allocation, a freed symmetric allocation and calls after Finalize
// are errors naming the rule, or (the node team's multicast, a same-node peer, an interior
// address) a pointer inside the right PE's copy (nothing found).
func TestProbe9NVSHMEMNodes(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *Rank) error {
		s := r.NVSHMEM
		var errs []string
		note := func(format string, a ...any) {
			errs = append(errs, fmt.Sprintf("rank %d: ", r.Rank)+fmt.Sprintf(format, a...))
		}
		sym, err := s.Malloc(256)
		if err != nil {
			return err
		}
		if p, err := safelyPtr(func() (DevicePtr, error) { return s.MulticastPtr(sym) }); err == nil {
			note("MulticastPtr across 2 nodes = %#x, want an error", p)
		}
		if p, err := safelyPtr(func() (DevicePtr, error) { return s.NodeMulticastPtr(sym) }); err != nil && !strings.Contains(err.Error(), "multicast") {
			note("NodeMulticastPtr: %v", err)
		} else if err == nil && p == 0 {
			note("NodeMulticastPtr: 0 without an error")
		}
		nodePEs := s.NodePEs()
		if len(nodePEs) != 2 {
			note("NodePEs = %v, want 2 PEs", nodePEs)
		}
		same := map[int]bool{}
		for _, pe := range nodePEs {
			same[pe] = true
		}
		for pe := 0; pe < 4; pe++ {
			p, err := safelyPtr(func() (DevicePtr, error) { return s.PeerPtr(sym, pe) })
			switch {
			case same[pe] && (err != nil || p == 0):
				note("PeerPtr to PE %d of my node: %#x, %v", pe, p, err)
			case !same[pe] && err == nil:
				note("PeerPtr to PE %d of another node: %#x, want an error", pe, p)
			}
			if err != nil && strings.HasPrefix(err.Error(), "panic") {
				note("PeerPtr(%d): %v", pe, err)
			}
		}
		// An interior address maps to the same offset of the peer's copy.
		base, err1 := s.PeerPtr(sym, r.Rank)
		mid, err2 := s.PeerPtr(sym.DevPtr()+100, r.Rank)
		if err1 != nil || err2 != nil || mid != base+100 {
			note("PeerPtr of base+100 on myself: %#x, %v (base %#x, %v)", mid, err2, base, err1)
		}
		if p, err := safelyPtr(func() (DevicePtr, error) { return s.PeerPtr(sym.DevPtr()+DevicePtr(1<<40), r.Rank) }); err == nil {
			note("PeerPtr 1 TiB past the allocation = %#x, want an error", p)
		}
		if p, err := safelyPtr(func() (DevicePtr, error) { return s.PeerPtr(^DevicePtr(0), r.Rank) }); err == nil {
			note("PeerPtr of 2^64-1 = %#x, want an error", p)
		}
		if err := sym.Free(); err != nil {
			return err
		}
		if p, err := safelyPtr(func() (DevicePtr, error) { return s.PeerPtr(sym, r.Rank) }); err == nil {
			note("PeerPtr of a freed allocation = %#x, want an error", p)
		}
		if err := s.Finalize(); err != nil {
			return err
		}
		if _, err := s.Malloc(64); err == nil {
			note("Malloc after Finalize: no error")
		}
		if err := safely(s.BarrierAll); err == nil {
			note("BarrierAll after Finalize: no error")
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func safelyPtr(f func() (DevicePtr, error)) (p DevicePtr, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
