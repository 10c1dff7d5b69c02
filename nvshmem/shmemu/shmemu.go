// Package shmemu emulates NVSHMEM 3.x's device library on the emulator (package emu): every
// device function package nvshmem's operations call (abi.Functions) is an extern of the
// emulated machine, so kernels that call NVSHMEM run and are checked without GPUs. It imports
// no builder: package jit's emulator backend and the tests use it.
package shmemu

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/nvshmem/abi"
	"github.com/kgen-dev/kgen/ptx"
)

// Emulator implements NVSHMEM's device API on the emulator (package emu), through its extern
// hook: the PEs are the simulated GPUs, the symmetric heap is emu's symmetric allocations.
//
// Semantics:
//   - Between PEs of one node: blocking puts, gets, p, g, abi.AMOs and signal operations take
//     effect when called; put with signal writes the data, then updates the signal.
//   - Between PEs of different nodes, operations travel over the System's emu.Network and
//     arrive late, in order per pair of PEs (network.go).
//   - Non-blocking puts within a node (put_nbi, put_signal_nbi) copy their source when
//     issued and are delivered later, in issue order per PE, with the signal after its
//     data: at the issuing PE's quiet, fence, barrier or barrier_all, or whenever some
//     NVSHMEM call of any PE has to wait (the progress NVSHMEM guarantees); Quiet on the
//     host delivers what a kernel left. get_nbi completes when called.
//   - abi.Warp and block operations wait until every thread of the warp or block has called them
//     (as their NVSHMEM forms synchronise the group), run once, and release the group.
//   - barrier_all, sync_all, barrier, team_sync and the collectives (reduce, reducescatter, fcollect,
//     broadcast, alltoall) are matched in call order per team: the k-th collective call of
//     each PE of a team meets the k-th of the others. A PE calls each collective once (from
//     one thread, warp or block). Waits block cooperatively; a missing partner is reported
//     by the emulator as a deadlock naming the waiting threads.
//   - Teams: world holds every PE; shared and node hold the PEs of the calling PE's node
//     (emu.System.SetNodes; one node by default). nvshmem_ptr returns the peer address of
//     a PE's copy on the same node and NULL for a PE of another node; nvshmemx_mc_ptr
//     returns the node's multicast address (emu.Symmetric.NodeMulticast) for the node and
//     shared teams, the world's for the world team when it is one node; NULL otherwise, or
//     when NoMulticast is set (as on a machine with NVSHMEM_DISABLE_NVLS=1). Puts, gets,
//     signals and atomics reach every PE.
//
// A launch that fails can leave collectives half matched; call Reset before the next.
type Emulator struct {
	sys  *emu.System
	npes int
	// NoMulticast makes nvshmemx_mc_ptr return NULL.
	NoMulticast bool

	pending []*pendingPut
	seq     map[teamKey][]int // per team: collectives entered per PE (by its number in the team)
	colls   map[collKey]*coll

	// operations between nodes (network.go)
	inflight []int            // per PE: its puts, signals and AMOs to other nodes not delivered yet
	link     map[[2]int]int64 // per (from, to) PE pair: when the link is next free
}

// Emulate registers every function of abi.Functions() on sys and returns the emulator that
// implements them.
func Emulate(sys *emu.System) (*Emulator, error) {
	if sys == nil {
		return nil, fmt.Errorf("nvshmem: Emulate: nil system")
	}
	e := &Emulator{sys: sys, npes: sys.NumGPUs()}
	e.Reset()
	hs := e.handlers()
	for _, name := range abi.Functions() {
		h, ok := hs[name]
		if !ok {
			return nil, fmt.Errorf("nvshmem: Emulate: no emulation of %s", name)
		}
		sys.RegisterExtern(name, h)
	}
	return e, nil
}

// Reset forgets undelivered non-blocking puts and half-matched collectives.
func (e *Emulator) Reset() {
	e.pending = nil
	e.seq = map[teamKey][]int{}
	e.colls = map[collKey]*coll{}
	if e.inflight != nil || len(e.link) > 0 {
		e.sys.CancelScheduled()
	}
	e.inflight = make([]int, e.npes)
	e.link = map[[2]int]int64{}
}

// Pending returns the number of puts (non-blocking ones, and any to another node), signals
// and AMOs to another node not delivered yet.
func (e *Emulator) Pending() int {
	n := len(e.pending)
	for _, x := range e.inflight {
		n += x
	}
	return n
}

// Quiet delivers, from the host, every put a kernel left undelivered (as
// nvshmemx_quiet_on_stream would after the kernel), those in flight between nodes included.
func (e *Emulator) Quiet() error {
	if err := e.quietLocal(); err != nil {
		return err
	}
	return e.sys.RunScheduled()
}

func (e *Emulator) quietLocal() error {
	for len(e.pending) > 0 {
		p := e.pending[0]
		e.pending = e.pending[1:]
		if err := e.sys.Write(p.dst, p.data); len(p.data) > 0 && err != nil {
			return err
		}
		if p.hasSig {
			var b [8]byte
			if err := e.sys.Read(p.sig, b[:]); err != nil {
				return err
			}
			v := sigApply(binary.LittleEndian.Uint64(b[:]), p.sigVal, p.sigOp)
			binary.LittleEndian.PutUint64(b[:], v)
			if err := e.sys.Write(p.sig, b[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// pendingPut is an undelivered non-blocking put (with its signal).
type pendingPut struct {
	from   int
	dst    uint64 // the target copy's address
	data   []byte
	hasSig bool
	sig    uint64
	sigVal uint64
	sigOp  int32
}

func sigApply(old, v uint64, op int32) uint64 {
	if op == int32(abi.SignalAdd) {
		return old + v
	}
	return v
}

// deliver delivers the pending puts of PE from (all PEs when from < 0) through c.
func (e *Emulator) deliver(c *emu.ExternCall, from int) error {
	rest := e.pending[:0]
	var todo []*pendingPut
	for _, p := range e.pending {
		if from < 0 || p.from == from {
			todo = append(todo, p)
		} else {
			rest = append(rest, p)
		}
	}
	e.pending = rest
	for _, p := range todo {
		if err := deliverPut(c, p); err != nil {
			return err
		}
	}
	return nil
}

// wait delivers every pending put (progress) and blocks the call.
func (e *Emulator) wait(c *emu.ExternCall, reason string) error {
	if err := e.deliver(c, -1); err != nil {
		return err
	}
	return c.Wait(reason)
}

// ---- groups: warp and block scope ----

// group is one warp- or block-scope call: its threads arrive, one of them runs the action
// (possibly over several tries), all leave with its result.
type group struct {
	size, arrived, left int
	done                bool
	err                 error
	ret                 uint64
	st                  any // the action's state across tries
	key                 string
}

// action does the work of a call once its group is complete: it returns done=false to wait
// (with a reason) and is called again later.
type action func(c *emu.ExternCall, g *group) (done bool, reason string, err error)

func threadIndex(c *emu.ExternCall) int {
	bd := c.BlockDim
	return c.Thread[0] + max(bd.X, 1)*(c.Thread[1]+max(bd.Y, 1)*c.Thread[2])
}

func (e *Emulator) run(c *emu.ExternCall, s abi.Scope, act action) error {
	g, _ := c.State.(*group)
	if g == nil {
		c.Fence()
		switch s {
		case abi.Thread:
			g = &group{size: 1}
		default:
			bl := c.BlockLocal()
			seqs, _ := bl["nvshmem.seq"].(map[int]int)
			if seqs == nil {
				seqs = map[int]int{}
				bl["nvshmem.seq"] = seqs
			}
			bd := c.BlockDim
			nthreads := max(bd.X, 1) * max(bd.Y, 1) * max(bd.Z, 1)
			tid := threadIndex(c)
			size, grp := nthreads, 0
			if s == abi.Warp {
				size, grp = min(32, nthreads-c.Warp*32), c.Warp
			}
			sk := tid*4 + int(s)
			n := seqs[sk]
			seqs[sk] = n + 1
			key := fmt.Sprintf("nvshmem.%d.%d.%d", s, grp, n)
			g, _ = bl[key].(*group)
			if g == nil {
				g = &group{size: size, key: key}
				bl[key] = g
			}
		}
		g.arrived++
		c.State = g
	}
	if !g.done && g.arrived == g.size {
		done, reason, err := act(c, g)
		if err != nil {
			g.done, g.err = true, err
		} else if done {
			g.done = true
		} else {
			return e.wait(c, reason)
		}
	}
	if !g.done {
		return e.wait(c, fmt.Sprintf("%s: %d of %d threads of the %s have called it", c.Name, g.arrived, g.size, s))
	}
	g.left++
	if g.left == g.size && g.key != "" {
		delete(c.BlockLocal(), g.key)
	}
	if len(c.Rets) > 0 {
		c.Rets[0] = g.ret
	}
	return g.err
}

// now wraps an action that never waits.
func now(f func(c *emu.ExternCall, g *group) error) action {
	return func(c *emu.ExternCall, g *group) (bool, string, error) { return true, "", f(c, g) }
}

// ---- argument helpers ----

func argInt(c *emu.ExternCall, i int) int32 { return int32(uint32(c.Args[i])) }

func (e *Emulator) checkPE(pe int32) error {
	if pe < 0 || int(pe) >= e.npes {
		return fmt.Errorf("PE %d out of range [0, %d)", pe, e.npes)
	}
	return nil
}

// remote returns PE pe's address of the symmetric object at addr.
func (e *Emulator) remote(addr uint64, pe int32, arg string) (uint64, error) {
	if err := e.checkPE(pe); err != nil {
		return 0, err
	}
	a, err := e.sys.Peer(addr, int(pe))
	if err != nil {
		return 0, fmt.Errorf("%s %#x is not in the symmetric heap", arg, addr)
	}
	return a, nil
}

func (e *Emulator) checkTeam(t int32) error {
	if t < 0 || t > int32(abi.TeamNode) {
		return fmt.Errorf("team %d is not a team the emulator knows (world 0, shared 1, node 2)", t)
	}
	return nil
}

// teamOf returns the PEs of team t as seen from PE pe: the first (a PE number) and how many.
// The world team is every PE; shared and node are pe's node.
func (e *Emulator) teamOf(t int32, pe int) (first, n int) {
	if t == int32(abi.TeamWorld) {
		return 0, e.npes
	}
	ns := e.sys.NodeSize()
	return pe / ns * ns, ns
}

// elemInfo is an element type as the emulator computes with it.
type elemInfo struct {
	t    ptx.Type
	size int
}

// ---- the handlers ----

func (e *Emulator) handlers() map[string]emu.ExternFunc {
	hs := map[string]emu.ExternFunc{}
	thread := func(f func(c *emu.ExternCall) error) emu.ExternFunc {
		return func(c *emu.ExternCall) error {
			return e.run(c, abi.Thread, now(func(c *emu.ExternCall, g *group) error {
				err := f(c)
				if len(c.Rets) > 0 {
					g.ret = c.Rets[0]
				}
				return err
			}))
		}
	}
	setRet := func(c *emu.ExternCall, v uint64) {
		if len(c.Rets) > 0 {
			c.Rets[0] = v
		}
	}
	hs["nvshmem_my_pe"] = func(c *emu.ExternCall) error { setRet(c, uint64(uint32(c.GPU))); return nil }
	hs["nvshmem_n_pes"] = func(c *emu.ExternCall) error { setRet(c, uint64(uint32(e.npes))); return nil }
	hs["nvshmem_team_my_pe"] = func(c *emu.ExternCall) error {
		t := argInt(c, 0)
		if e.checkTeam(t) != nil {
			setRet(c, uint64(math.MaxUint32)) // -1
			return nil
		}
		first, _ := e.teamOf(t, c.GPU)
		setRet(c, uint64(uint32(c.GPU-first)))
		return nil
	}
	hs["nvshmem_team_n_pes"] = func(c *emu.ExternCall) error {
		t := argInt(c, 0)
		if e.checkTeam(t) != nil {
			setRet(c, uint64(math.MaxUint32))
			return nil
		}
		_, n := e.teamOf(t, c.GPU)
		setRet(c, uint64(uint32(n)))
		return nil
	}
	hs["nvshmem_team_translate_pe"] = func(c *emu.ExternCall) error {
		src, pe, dst := argInt(c, 0), argInt(c, 1), argInt(c, 2)
		if e.checkTeam(src) != nil || e.checkTeam(dst) != nil {
			setRet(c, uint64(math.MaxUint32))
			return nil
		}
		sf, sn := e.teamOf(src, c.GPU)
		df, dn := e.teamOf(dst, c.GPU)
		if pe < 0 || int(pe) >= sn || int(pe)+sf < df || int(pe)+sf >= df+dn {
			setRet(c, uint64(math.MaxUint32)) // not in the source team, or not in the destination team
			return nil
		}
		setRet(c, uint64(uint32(int(pe)+sf-df)))
		return nil
	}
	hs["nvshmem_ptr"] = func(c *emu.ExternCall) error {
		pe := argInt(c, 1)
		if e.checkPE(pe) != nil || !e.sys.SameNode(c.GPU, int(pe)) {
			setRet(c, 0) // out of range, or on another node: no load/store path
			return nil
		}
		a, err := e.sys.Peer(c.Args[0], int(pe))
		if err != nil {
			a = 0
		}
		setRet(c, a)
		return nil
	}
	hs["nvshmemx_mc_ptr"] = func(c *emu.ExternCall) error {
		t := argInt(c, 0)
		if e.NoMulticast || e.checkTeam(t) != nil || t == int32(abi.TeamWorld) && e.sys.Nodes() > 1 {
			setRet(c, 0)
			return nil
		}
		mc := e.sys.MulticastOf
		if t != int32(abi.TeamWorld) {
			mc = e.sys.NodeMulticastOf // reaches the caller's node
		}
		a, err := mc(c.Args[1])
		if err != nil {
			a = 0
		}
		setRet(c, a)
		return nil
	}
	hs["nvshmem_quiet"] = func(c *emu.ExternCall) error {
		return e.run(c, abi.Thread, func(c *emu.ExternCall, g *group) (bool, string, error) {
			if err := e.deliver(c, c.GPU); err != nil {
				return false, "", err
			}
			if n := e.inflight[c.GPU]; n > 0 {
				return false, fmt.Sprintf("nvshmem_quiet: %d operations to other nodes in flight", n), nil
			}
			return true, "", nil
		})
	}
	hs["nvshmem_fence"] = thread(func(c *emu.ExternCall) error { return e.deliver(c, c.GPU) })
	hs["nvshmemx_signal_op"] = thread(func(c *emu.ExternCall) error {
		a, err := e.remote(c.Args[0], argInt(c, 3), "sig_addr")
		if err != nil {
			return err
		}
		v, op := c.Args[1], argInt(c, 2)
		if op != int32(abi.SignalSet) && op != int32(abi.SignalAdd) {
			return fmt.Errorf("unknown signal operation %d", op)
		}
		if pe := int(argInt(c, 3)); e.crossNode(c.GPU, pe) {
			e.send(c.GPU, pe, 8, func(d *emu.Delivery) error {
				_, err := d.Atomic(a, 8, func(old uint64) uint64 { return sigApply(old, v, op) })
				return err
			})
			return nil
		}
		_, err = c.Atomic(a, 8, func(old uint64) uint64 { return sigApply(old, v, op) })
		return err
	})
	hs["nvshmem_signal_fetch"] = thread(func(c *emu.ExternCall) error {
		v, err := c.Load64(c.Args[0])
		setRet(c, v)
		return err
	})
	hs["nvshmem_signal_wait_until"] = func(c *emu.ExternCall) error {
		cmp, want := argInt(c, 1), c.Args[2]
		if cmp < int32(abi.CmpEQ) || cmp > int32(abi.CmpGE) {
			return fmt.Errorf("unknown comparison %d", cmp)
		}
		return e.run(c, abi.Thread, func(c *emu.ExternCall, g *group) (bool, string, error) {
			v, err := c.Load64(c.Args[0])
			if err != nil {
				return false, "", err
			}
			if compare(v, abi.Cmp(cmp), want) {
				g.ret = v
				return true, "", nil
			}
			return false, fmt.Sprintf("nvshmem_signal_wait_until: signal at %#x is %d, waiting for %s %d", c.Args[0], v, cmpName(abi.Cmp(cmp)), want), nil
		})
	}
	for _, s := range []abi.Scope{abi.Thread, abi.Warp, abi.Block} {
		s := s
		for _, base := range []string{"barrier_all", "sync_all", "barrier", "team_sync"} {
			quiet := strings.HasPrefix(base, "barrier")
			takesTeam := base == "barrier" || base == "team_sync"
			hs[s.Func(base)] = func(c *emu.ExternCall) error {
				team := int32(abi.TeamWorld)
				if takesTeam {
					team = argInt(c, 0)
				}
				return e.run(c, s, e.collective(team, quiet, nil, nil))
			}
		}
	}
	for _, t := range abi.ScalarTypes() {
		t := t
		size := t.Bytes()
		hs["nvshmem_"+typeName(t)+"_p"] = thread(func(c *emu.ExternCall) error {
			pe := argInt(c, 2)
			a, err := e.remote(c.Args[0], pe, "dest")
			if err != nil {
				return err
			}
			b := make([]byte, 8)
			binary.LittleEndian.PutUint64(b, c.Args[1])
			if e.crossNode(c.GPU, int(pe)) {
				e.send(c.GPU, int(pe), size, func(d *emu.Delivery) error { return d.Store(a, b[:size]) })
				return nil
			}
			return c.Store(a, b[:size])
		})
		hs["nvshmem_"+typeName(t)+"_g"] = func(c *emu.ExternCall) error {
			return e.run(c, abi.Thread, e.fetch(argInt(c, 1), size, func(c *emu.ExternCall, m remoteIO) ([]byte, error) {
				a, err := e.remote(c.Args[0], argInt(c, 1), "source")
				if err != nil {
					return nil, err
				}
				b := make([]byte, 8)
				return b, m.Load(a, b[:size])
			}, func(c *emu.ExternCall, g *group, b []byte) error {
				v := binary.LittleEndian.Uint64(b)
				if t.Kind() == ptx.KindSigned && size < 4 { // sign-extend narrow signed integers to the int return
					v = uint64(uint32(int32(int64(v<<(64-8*size)) >> (64 - 8*size))))
				}
				g.ret = v
				return nil
			}))
		}
	}
	for _, t := range abi.Types() {
		tn, el := typeName(t), elemInfo{t: t, size: t.Bytes()}
		for _, s := range []abi.Scope{abi.Thread, abi.Warp, abi.Block} {
			s := s
			hs[s.Func(tn+"_put")] = e.rmaHandler(s, el, "put")
			hs[s.Func(tn+"_put_nbi")] = e.rmaHandler(s, el, "put_nbi")
			hs[s.Func(tn+"_get")] = e.rmaHandler(s, el, "get")
			hs[s.Func(tn+"_get_nbi")] = e.rmaHandler(s, el, "get")
			hs[s.Func(tn+"_put_signal")] = e.rmaHandler(s, el, "put_signal")
			hs[s.Func(tn+"_put_signal_nbi")] = e.rmaHandler(s, el, "put_signal_nbi")
			for _, op := range abi.ReduceOps() {
				if abi.ReduceDefined(op, t) {
					hs[s.Func(tn+"_"+string(op)+"_reduce")] = e.collHandler(s, el, string(op))
					hs[s.Func(tn+"_"+string(op)+"_reducescatter")] = e.collHandler(s, el, "reducescatter:"+string(op))
				}
			}
			for _, op := range []string{"fcollect", "broadcast", "alltoall"} {
				hs[s.Func(tn+"_"+op)] = e.collHandler(s, el, op)
			}
		}
		for _, op := range abi.AMOs() {
			if name, ok := abi.AMOName(op, t); ok {
				hs[name] = e.amo(op, el)
			}
		}
	}
	return hs
}

func compare(v uint64, cmp abi.Cmp, w uint64) bool {
	switch cmp {
	case abi.CmpEQ:
		return v == w
	case abi.CmpNE:
		return v != w
	case abi.CmpGT:
		return v > w
	case abi.CmpLE:
		return v <= w
	case abi.CmpLT:
		return v < w
	}
	return v >= w
}

func cmpName(c abi.Cmp) string {
	return [...]string{"==", "!=", ">", "<=", "<", ">="}[c]
}

// rmaHandler implements put, put_nbi, get (and get_nbi), put_signal and put_signal_nbi.
func (e *Emulator) rmaHandler(s abi.Scope, el elemInfo, op string) emu.ExternFunc {
	return func(c *emu.ExternCall) error {
		dst, src, n := c.Args[0], c.Args[1], c.Args[2]
		signal := strings.HasPrefix(op, "put_signal")
		peArg := 3
		if signal {
			peArg = 6
		}
		pe := argInt(c, peArg)
		if n > 1<<32 {
			return e.run(c, s, now(func(*emu.ExternCall, *group) error { return fmt.Errorf("%d elements", n) }))
		}
		bytes := int(n) * el.size
		if bytes == 0 && !signal {
			return e.run(c, s, now(func(*emu.ExternCall, *group) error { return e.checkPE(pe) }))
		}
		if op == "get" {
			return e.run(c, s, e.fetch(pe, bytes, func(c *emu.ExternCall, m remoteIO) ([]byte, error) {
				ra, err := e.remote(src, pe, "source")
				if err != nil {
					return nil, err
				}
				if err := checkSpans(c, bytes, src, dst); err != nil { // before the buffer
					return nil, err
				}
				buf := make([]byte, bytes)
				return buf, m.Load(ra, buf)
			}, func(c *emu.ExternCall, g *group, buf []byte) error { return c.Store(dst, buf) }))
		}
		return e.run(c, s, now(func(c *emu.ExternCall, g *group) error {
			ra, err := e.remote(dst, pe, "dest")
			if err != nil {
				return err
			}
			if err := checkSpans(c, bytes, src, dst); err != nil { // before the buffer
				return err
			}
			buf := make([]byte, bytes)
			if bytes > 0 {
				if err := c.Load(src, buf); err != nil {
					return err
				}
			}
			p := &pendingPut{from: c.GPU, dst: ra, data: buf}
			if signal {
				sa, err := e.remote(c.Args[3], pe, "sig_addr")
				if err != nil {
					return err
				}
				sop := argInt(c, 5)
				if sop != int32(abi.SignalSet) && sop != int32(abi.SignalAdd) {
					return fmt.Errorf("unknown signal operation %d", sop)
				}
				p.hasSig, p.sig, p.sigVal, p.sigOp = true, sa, c.Args[4], sop
			}
			if e.crossNode(c.GPU, int(pe)) {
				size := bytes
				if signal {
					size += 8
				}
				e.send(c.GPU, int(pe), size, func(d *emu.Delivery) error { return deliverPut(d, p) })
				return nil
			}
			e.pending = append(e.pending, p)
			if strings.HasSuffix(op, "_nbi") {
				return nil
			}
			// A blocking put completes its own data (and signal) now; earlier nbi puts of the
			// PE stay pending unless they precede it in the queue, which keeps per-PE order.
			return e.deliverThrough(c, p)
		}))
	}
}

// checkSpans checks that bytes bytes at each address are there (as the calling thread sees
// them; a symmetric address's copy on this GPU has the size of every other's), so that a
// count from a kernel is refused before a buffer of that size is allocated: a put of 2^32
// floats allocated 16 GiB before the access faulted.
func checkSpans(c *emu.ExternCall, bytes int, addrs ...uint64) error {
	for _, a := range addrs {
		if err := c.Check(a, bytes); err != nil {
			return err
		}
	}
	return nil
}

// deliverPut writes a put's data, then applies its signal.
func deliverPut(m remoteIO, p *pendingPut) error {
	if len(p.data) > 0 {
		if err := m.Store(p.dst, p.data); err != nil {
			return err
		}
	}
	if p.hasSig {
		if _, err := m.Atomic(p.sig, 8, func(old uint64) uint64 { return sigApply(old, p.sigVal, p.sigOp) }); err != nil {
			return err
		}
	}
	return nil
}

// deliverThrough delivers the pending puts of p's PE up to and including p.
func (e *Emulator) deliverThrough(c *emu.ExternCall, last *pendingPut) error {
	rest := e.pending[:0]
	var todo []*pendingPut
	found := false
	for _, p := range e.pending {
		if !found && p.from == last.from {
			todo = append(todo, p)
			found = p == last
			continue
		}
		rest = append(rest, p)
	}
	e.pending = rest
	for _, p := range todo {
		if err := deliverPut(c, p); err != nil {
			return err
		}
	}
	return nil
}

// amo implements one atomic memory operation on one type.
func (e *Emulator) amo(op abi.AMO, el elemInfo) emu.ExternFunc {
	info, _ := abi.AMOSpec(op)
	return func(c *emu.ExternCall) error {
		i := 1
		var cond, val uint64
		if info.TakesCond {
			cond = c.Args[i]
			i++
		}
		if info.TakesValue {
			val = c.Args[i]
			i++
		}
		pe := argInt(c, i)
		mask := uint64(math.MaxUint64)
		if el.size == 4 {
			mask = math.MaxUint32
		}
		cond &= mask
		val &= mask
		update := func(old uint64) uint64 {
			switch op {
			case abi.AtomicFetchOp:
				return old
			case abi.AtomicSetOp, abi.AtomicSwapOp:
				return val
			case abi.AtomicCompareSwapOp:
				if old == cond {
					return val
				}
				return old
			case abi.AtomicIncOp, abi.AtomicFetchIncOp:
				return (old + 1) & mask
			case abi.AtomicAddOp, abi.AtomicFetchAddOp:
				return (old + val) & mask
			case abi.AtomicAndOp, abi.AtomicFetchAndOp:
				return old & val
			case abi.AtomicOrOp, abi.AtomicFetchOrOp:
				return old | val
			}
			return old ^ val // xor
		}
		if !info.Fetches && e.crossNode(c.GPU, int(pe)) { // delivered late, like a put
			return e.run(c, abi.Thread, now(func(c *emu.ExternCall, g *group) error {
				a, err := e.remote(c.Args[0], pe, "dest")
				if err != nil {
					return err
				}
				e.send(c.GPU, int(pe), el.size, func(d *emu.Delivery) error {
					_, err := d.Atomic(a, el.size, update)
					return err
				})
				return nil
			}))
		}
		return e.run(c, abi.Thread, e.fetch(pe, el.size, func(c *emu.ExternCall, m remoteIO) ([]byte, error) {
			a, err := e.remote(c.Args[0], pe, "dest")
			if err != nil {
				return nil, err
			}
			old, err := m.Atomic(a, el.size, update)
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], old)
			return b[:], err
		}, func(c *emu.ExternCall, g *group, b []byte) error {
			g.ret = binary.LittleEndian.Uint64(b)
			return nil
		}))
	}
}

// ---- collectives across PEs ----

// teamKey names one team: a node team of a multi-node machine is one per node.
type teamKey struct {
	team  int32
	first int // the team's first PE
}

type collKey struct {
	teamKey
	seq int
}

// coll is one collective call matched across the PEs of a team.
type coll struct {
	kind    string
	arrived int
	taken   int
	contrib map[int][]byte
}

// collState is a PE's part in a collective across its tries.
type collState struct {
	key collKey
	c   *coll
}

// contribFn returns what the PE brings to a collective (nil: nothing) and checks its
// arguments; apply writes the PE's result once every PE has arrived.
type (
	contribFn func(c *emu.ExternCall, cl *coll) ([]byte, error)
	applyFn   func(c *emu.ExternCall, cl *coll) error
)

// collective returns the action of a collective over team: quiet first (barriers), then
// arrive with a contribution, wait for every PE, apply.
func (e *Emulator) collective(team int32, quiet bool, contrib contribFn, apply applyFn) action {
	return func(c *emu.ExternCall, g *group) (bool, string, error) {
		st, _ := g.st.(*collState)
		if st == nil {
			if err := e.checkTeam(team); err != nil {
				return false, "", err
			}
			if quiet {
				if err := e.deliver(c, c.GPU); err != nil {
					return false, "", err
				}
				if n := e.inflight[c.GPU]; n > 0 { // a barrier completes the PE's operations first
					return false, fmt.Sprintf("%s: %d operations to other nodes in flight", c.Name, n), nil
				}
			}
			first, n := e.teamOf(team, c.GPU)
			tk := teamKey{team, first}
			seqs := e.seq[tk]
			if seqs == nil {
				seqs = make([]int, n)
				e.seq[tk] = seqs
			}
			key := collKey{tk, seqs[c.GPU-first]}
			seqs[c.GPU-first]++
			cl := e.colls[key]
			if cl == nil {
				cl = &coll{kind: c.Name, contrib: map[int][]byte{}}
				e.colls[key] = cl
			}
			if base(cl.kind) != base(c.Name) {
				return false, "", fmt.Errorf("collective mismatch on team %d: PE %d calls %s where another PE called %s", team, c.GPU, c.Name, cl.kind)
			}
			if contrib != nil {
				b, err := contrib(c, cl)
				if err != nil {
					return false, "", err
				}
				if b != nil {
					cl.contrib[c.GPU] = b
				}
			}
			cl.arrived++
			st = &collState{key: key, c: cl}
			g.st = st
		}
		_, n := e.teamOf(team, c.GPU)
		if st.c.arrived < n {
			return false, fmt.Sprintf("%s: %d of %d PEs of team %d have arrived", c.Name, st.c.arrived, n, team), nil
		}
		if apply != nil {
			if err := apply(c, st.c); err != nil {
				return false, "", err
			}
		}
		st.c.taken++
		if st.c.taken == n {
			delete(e.colls, st.key)
		}
		return true, "", nil
	}
}

// base strips the scope suffix and nvshmemx prefix, so that a block barrier on one PE
// matches a thread barrier on another (NVSHMEM only requires the same collective).
func base(name string) string {
	name = strings.TrimSuffix(strings.TrimSuffix(name, "_block"), "_warp")
	name = strings.TrimPrefix(name, "nvshmemx_")
	return strings.TrimPrefix(name, "nvshmem_")
}

// collHandler implements reduce (op is the reduction), fcollect, broadcast and alltoall.
func (e *Emulator) collHandler(s abi.Scope, el elemInfo, op string) emu.ExternFunc {
	return func(c *emu.ExternCall) error {
		team, dst, src, n := argInt(c, 0), c.Args[1], c.Args[2], int(c.Args[3])
		if c.Args[3] > 1<<32 {
			return fmt.Errorf("%d elements", c.Args[3])
		}
		size := el.size
		first, tn := e.teamOf(team, c.GPU) // the team's PEs: first .. first+tn-1
		load := func(addr uint64, nbytes int) ([]byte, error) {
			if err := c.Check(addr, nbytes); err != nil { // before the buffer
				return nil, err
			}
			b := make([]byte, nbytes)
			return b, c.Load(addr, b)
		}
		var contrib contribFn
		var apply applyFn
		switch op {
		case "fcollect":
			contrib = func(c *emu.ExternCall, cl *coll) ([]byte, error) { return load(src, n*size) }
			apply = func(c *emu.ExternCall, cl *coll) error {
				for i := 0; i < tn; i++ {
					if err := c.Store(dst+uint64(i*n*size), cl.contrib[first+i]); err != nil {
						return err
					}
				}
				return nil
			}
		case "broadcast":
			root := argInt(c, 4)
			contrib = func(c *emu.ExternCall, cl *coll) ([]byte, error) {
				if root < 0 || int(root) >= tn {
					return nil, fmt.Errorf("root: PE %d out of range [0, %d) of team %d", root, tn, team)
				}
				if c.GPU != first+int(root) {
					return nil, nil
				}
				return load(src, n*size)
			}
			apply = func(c *emu.ExternCall, cl *coll) error {
				b, ok := cl.contrib[first+int(root)]
				if !ok {
					return fmt.Errorf("root %d contributed nothing (PEs disagree on the root)", root)
				}
				return c.Store(dst, b[:min(len(b), n*size)])
			}
		case "alltoall":
			contrib = func(c *emu.ExternCall, cl *coll) ([]byte, error) { return load(src, tn*n*size) }
			apply = func(c *emu.ExternCall, cl *coll) error {
				blk := n * size
				me := c.GPU - first
				for i := 0; i < tn; i++ {
					if err := c.Store(dst+uint64(i*blk), cl.contrib[first+i][me*blk:(me+1)*blk]); err != nil {
						return err
					}
				}
				return nil
			}
		default: // a reduction, or "reducescatter:<op>"
			rop, scatter := strings.CutPrefix(op, "reducescatter:")
			total := n
			if scatter {
				total = n * tn
			}
			contrib = func(c *emu.ExternCall, cl *coll) ([]byte, error) { return load(src, total*size) }
			apply = func(c *emu.ExternCall, cl *coll) error {
				lens := make([]int, tn)
				for i := range lens {
					lens[i] = len(cl.contrib[first+i])
				}
				if d := oddOnes(lens); d != "" {
					return fmt.Errorf("the PEs of team %d reduce different sizes: %s", team, d)
				}
				out := make([]byte, total*size)
				copy(out, cl.contrib[first])
				for i := 1; i < tn; i++ {
					b := cl.contrib[first+i]
					for i := 0; i < total; i++ {
						o := out[i*size : (i+1)*size]
						combine(abi.ReduceOp(rop), el.t, o, b[i*size:(i+1)*size])
					}
				}
				if scatter {
					me := c.GPU - first
					out = out[me*n*size : (me+1)*n*size]
				}
				if len(out) == 0 {
					return nil
				}
				return c.Store(dst, out)
			}
		}
		return e.run(c, s, e.collective(team, false, contrib, apply))
	}
}

// combine sets acc = acc op x for one element of type t (little-endian bytes).
func combine(op abi.ReduceOp, t ptx.Type, acc, x []byte) {
	size := len(acc)
	get := func(b []byte) uint64 {
		var v uint64
		for i := size - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	put := func(v uint64) {
		for i := 0; i < size; i++ {
			acc[i] = byte(v >> (8 * i))
		}
	}
	a, b := get(acc), get(x)
	if t.IsFloat() {
		toF := func(v uint64) float64 {
			switch t {
			case ptx.F16:
				return float64(fp.F16ToF32(uint16(v)))
			case ptx.BF16:
				return float64(fp.BF16ToF32(uint16(v)))
			case ptx.F32:
				return float64(math.Float32frombits(uint32(v)))
			}
			return math.Float64frombits(v)
		}
		fromF := func(f float64) uint64 {
			switch t {
			case ptx.F16:
				return uint64(fp.F32ToF16(float32(f)))
			case ptx.BF16:
				return uint64(fp.F32ToBF16(float32(f)))
			case ptx.F32:
				return uint64(math.Float32bits(float32(f)))
			}
			return math.Float64bits(f)
		}
		fa, fb := toF(a), toF(b)
		var r float64
		switch op {
		case abi.Sum:
			r = fa + fb
		case abi.Prod:
			r = fa * fb
		case abi.Min:
			r = math.Min(fa, fb)
		case abi.Max:
			r = math.Max(fa, fb)
		}
		put(fromF(r))
		return
	}
	shift := uint(64 - 8*size)
	signed := t.Kind() == ptx.KindSigned
	sa, sb := int64(a<<shift)>>shift, int64(b<<shift)>>shift
	var r uint64
	switch op {
	case abi.Sum:
		r = a + b
	case abi.Prod:
		r = a * b
	case abi.Min:
		if signed && sa <= sb || !signed && a <= b {
			r = a
		} else {
			r = b
		}
	case abi.Max:
		if signed && sa >= sb || !signed && a >= b {
			r = a
		} else {
			r = b
		}
	case abi.And:
		r = a & b
	case abi.Or:
		r = a | b
	case abi.Xor:
		r = a ^ b
	}
	put(r)
}

func typeName(t ptx.Type) string {
	n, _ := abi.TypeName(t)
	return n
}

// oddOnes describes how the byte counts of the PEs (indexed by PE) differ, naming the PEs
// that differ from the most common count first: "PE 0 reduces 8 bytes where PEs 1, 2
// reduce 4". It returns "" when all are equal.
func oddOnes(n []int) string {
	count := map[int]int{}
	for _, x := range n {
		count[x]++
	}
	if len(count) < 2 {
		return ""
	}
	common := n[0]
	for _, x := range n { // the most common count; ties go to the lowest PE's
		if count[x] > count[common] {
			common = x
		}
	}
	var odd, same []string
	for pe, x := range n {
		if x == common {
			same = append(same, fmt.Sprint(pe))
		} else {
			odd = append(odd, fmt.Sprintf("PE %d reduces %d bytes", pe, x))
		}
	}
	if len(same) == 1 {
		return fmt.Sprintf("%s where PE %s reduces %d", strings.Join(odd, ", "), same[0], common)
	}
	return fmt.Sprintf("%s where PEs %s reduce %d", strings.Join(odd, ", "), strings.Join(same, ", "), common)
}
