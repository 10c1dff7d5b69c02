package shmemu

import (
	"fmt"

	"github.com/kgen-dev/kgen/emu"
)

// Operations between nodes. On a System split into nodes (emu.System.SetNodes), NVSHMEM's
// operations from a PE to a PE of another node travel over the System's emu.Network: each
// ordered pair of PEs has a link that carries one transfer at a time, in issue order, so a
// transfer of n bytes issued at logical time t arrives at max(t, when the link is free) +
// n/BytesPerSecond + Latency (emu.Network.Steps).
//   - Puts (blocking or not, with or without signal), p, signal_op and the AMOs that return
//     nothing are delivered when they arrive; put_signal writes its data, then its signal.
//     The PE counts them in flight until then: quiet, barrier and barrier_all wait for its
//     own to arrive (the host's Quiet delivers all of them at once).
//   - Gets, g and the fetching AMOs wait until their request arrives, then read (or update)
//     the remote memory at that moment and complete.
//   - Collectives (reductions, fcollect, broadcast, alltoall, sync) are not delayed.
// Between PEs of one node nothing changes: see Emulator.

// remoteIO is the memory access of an operation's target: the calling thread's (same node)
// or a scheduled delivery's (another node).
type remoteIO interface {
	Load(addr uint64, p []byte) error
	Store(addr uint64, p []byte) error
	Atomic(addr uint64, size int, f func(old uint64) uint64) (uint64, error)
}

// crossNode reports whether PEs from and to are on different nodes.
func (e *Emulator) crossNode(from, to int) bool {
	return to >= 0 && to < e.npes && !e.sys.SameNode(from, to)
}

// arrival returns when n bytes sent now from PE from to PE to arrive, and books the link;
// an arrival past the range of times System.At takes (emu.MaxTime) is an error (it would
// arrive early, or wrap to the past).
func (e *Emulator) arrival(from, to, n int) (int64, error) {
	busy, lat := e.sys.Network().Steps(n)
	k := [2]int{from, to}
	start := max(e.sys.Now(), e.link[k])
	if start > emu.MaxTime-busy || start+busy > emu.MaxTime-lat {
		return 0, fmt.Errorf("PE %d to PE %d: %d bytes sent at step %d would arrive after the emulator's logical clock ends (network %s)", from, to, n, start, e.sys.Network())
	}
	e.link[k] = start + busy
	return start + busy + lat, nil
}

// at schedules f when n bytes from PE from reach PE to; a transfer that cannot arrive
// faults now.
func (e *Emulator) at(from, to, n int, f emu.Action) {
	t, err := e.arrival(from, to, n)
	if err != nil {
		e.sys.At(e.sys.Now(), func(*emu.Delivery) error { return err })
		return
	}
	e.sys.At(t, f)
}

// send delivers an operation of n bytes from PE from to PE to of another node: f runs when
// it arrives; until then it counts as in flight for from.
func (e *Emulator) send(from, to, n int, f emu.Action) {
	e.inflight[from]++
	e.at(from, to, n, func(d *emu.Delivery) error {
		e.inflight[from]--
		return f(d)
	})
}

// fetchState is a fetching operation to another node: done when its request has arrived.
type fetchState struct {
	done bool
	res  []byte
	err  error
}

// fetch returns the action of an operation on PE pe's memory that returns a result (get, g,
// fetching AMOs) of n bytes: at does the access on the target's memory and returns the
// result; finish completes the call with it on the calling thread. On the caller's node at
// runs at once; on another node it runs when the request arrives, and the caller waits.
func (e *Emulator) fetch(pe int32, n int, at func(c *emu.ExternCall, m remoteIO) ([]byte, error), finish func(c *emu.ExternCall, g *group, res []byte) error) action {
	return func(c *emu.ExternCall, g *group) (bool, string, error) {
		st, _ := g.st.(*fetchState)
		if st == nil {
			if err := e.checkPE(pe); err != nil {
				return false, "", err
			}
			if !e.crossNode(c.GPU, int(pe)) {
				res, err := at(c, c)
				if err == nil {
					err = finish(c, g, res)
				}
				return true, "", err
			}
			st = &fetchState{}
			g.st = st
			e.at(c.GPU, int(pe), n, func(d *emu.Delivery) error {
				st.res, st.err = at(c, d)
				st.done = true
				return nil
			})
		}
		if !st.done {
			return false, fmt.Sprintf("%s: waiting for PE %d on another node", c.Name, pe), nil
		}
		if st.err != nil {
			return false, "", st.err
		}
		return true, "", finish(c, g, st.res)
	}
}
