package jit

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kgen-dev/kgen/emu"
)

// NVSHMEM on the emulator. The PEs are the ranks of the machine's world (GPU r is PE r). The
// host calls that NVSHMEM makes collective (init, malloc, free, barrier_all, finalize) are
// collective here too: every rank's k-th collective call meets the others' k-th (world.join),
// and the last to arrive does the work once. Symmetric memory is emu's symmetric heap; peer
// pointers are emu.System.Peer; multicast addresses are emu's (the emulator has multicast:
// multimem instructions on them reduce over and write to every GPU's copy), unless
// NVSHMEM_DISABLE_NVLS is set, which makes MulticastPtr fail as it does on a machine without
// NVLS. The device API (the kernels' nvshmem_* calls) is package nvshmem's emulation,
// registered on the machine's emu.System at init.

// emuShmemDevice is NVSHMEM's device-API emulation on one emu.System.
type emuShmemDevice interface {
	// Reset forgets half-done operations after a failed launch.
	Reset()
	// Quiet delivers the non-blocking puts kernels left undelivered.
	Quiet() error
}

// emulateNVSHMEM installs NVSHMEM's device API on sys (nil when this binary has no
// emulation of it; then modules that call NVSHMEM cannot load on the emulator).
var emulateNVSHMEM func(sys *emu.System, noMulticast bool) (emuShmemDevice, error)

type emuShmem struct {
	dev  emuShmemDevice // nil without device emulation
	noMC string         // the NVSHMEM_DISABLE_NVLS value that turned multicast off, or ""
}

func nvlsDisabled() string {
	if v := os.Getenv("NVSHMEM_DISABLE_NVLS"); v != "" && v != "0" {
		return v
	}
	return ""
}

// collective makes rank's collective NVSHMEM call: a scheduling point, then (syncing: after
// the rank's streams have finished their work, as nvshmem_barrier_all and nvshmem_free wait
// for it) a wait for the other ranks' calls (world.join), during which the scheduler runs
// the kernels in flight without this rank.
func (m *emuMachine) collective(d *emuDevice, ctx context.Context, syncing bool, kind, desc string, part any, run func(parts []any) (any, error)) (any, error) {
	unlock := d.lock()
	if syncing {
		if err := d.syncAll(ctx, desc); err != nil {
			d.errSeen = true
			unlock()
			return nil, err
		}
	}
	unlock()
	m.park(d.gpu)
	defer m.unpark(d.gpu)
	return m.w.join(ctx, d.gpu, kind, desc, part, run)
}

func (d *emuDevice) nvshmemHost(string) (shmemHost, error) { return &emuShmemHost{d: d}, nil }

type emuShmemHost struct{ d *emuDevice }

func (h *emuShmemHost) uniqueID() ([]byte, error) { return nil, nil }
func (h *emuShmemHost) version() string           { return "emulator" }
func (h *emuShmemHost) path() string              { return "" }

func (h *emuShmemHost) init(rank, n int, _ []byte) (shmemImpl, error) {
	m := h.d.m
	_, err := m.collective(h.d, context.Background(), false, "InitNVSHMEM", "InitNVSHMEM", nil, func([]any) (any, error) {
		m.lock()
		defer m.mu.Unlock()
		if m.shm != nil {
			return nil, errors.New("jit: NVSHMEM is already initialised on this emulated machine")
		}
		s := &emuShmem{noMC: nvlsDisabled()}
		if emulateNVSHMEM != nil {
			dev, err := emulateNVSHMEM(m.sys, s.noMC != "")
			if err != nil {
				return nil, fmt.Errorf("jit: NVSHMEM device emulation: %w", err)
			}
			s.dev = dev
		}
		m.shm = s
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return &emuShmemImpl{d: h.d, rank: rank, n: n}, nil
}

type emuShmemImpl struct {
	d       *emuDevice
	rank, n int
}

func (s *emuShmemImpl) myPE() int { return s.rank }
func (s *emuShmemImpl) nPEs() int { return s.n }

func (s *emuShmemImpl) malloc(ctx context.Context, n int64) (DevicePtr, error) {
	m := s.d.m
	res, err := m.collective(s.d, ctx, false, "NVSHMEM.Malloc", fmt.Sprintf("NVSHMEM.Malloc(%d)", n), n, func(parts []any) (any, error) {
		sizes := make([]string, len(parts))
		for r, p := range parts {
			sizes[r] = fmt.Sprintf("%d bytes", p.(int64))
		}
		if d := disagreement("PE", sizes); d != "" {
			return nil, fmt.Errorf("jit: NVSHMEM.Malloc is collective with the same size on every PE: %s", d)
		}
		if n > 1<<40 {
			return nil, fmt.Errorf("jit: NVSHMEM.Malloc(%d): too large for the emulator", n)
		}
		m.lock()
		defer m.mu.Unlock()
		return m.sys.MallocSymmetric(int(n))
	})
	if err != nil {
		return 0, err
	}
	return DevicePtr(res.(*emu.Symmetric).On(s.rank)), nil
}

func (s *emuShmemImpl) free(ctx context.Context, p DevicePtr) error {
	m := s.d.m
	_, err := m.collective(s.d, ctx, true, "NVSHMEM.Free", fmt.Sprintf("NVSHMEM free of %#x", uint64(p)), p, func(parts []any) (any, error) {
		m.lock()
		defer m.mu.Unlock()
		base, err := m.sys.Peer(uint64(parts[0].(DevicePtr)), 0)
		if err != nil {
			return nil, fmt.Errorf("jit: NVSHMEM free: %w", err)
		}
		for r, q := range parts {
			if b, err := m.sys.Peer(uint64(q.(DevicePtr)), 0); err != nil || b != base {
				return nil, fmt.Errorf("jit: NVSHMEM free is collective: PE 0 frees %#x but PE %d frees %#x, not the same symmetric allocation", uint64(parts[0].(DevicePtr)), r, uint64(q.(DevicePtr)))
			}
		}
		sym, err := m.sys.SymmetricAt(base)
		if err != nil {
			return nil, fmt.Errorf("jit: NVSHMEM free: %w", err)
		}
		return nil, m.sys.FreeSymmetric(sym)
	})
	return err
}

func (s *emuShmemImpl) ptr(p DevicePtr, pe int) DevicePtr {
	defer s.d.lock()()
	if !s.d.m.sys.SameNode(s.rank, pe) {
		return 0 // another node: no load/store path
	}
	if _, err := s.d.m.sys.MulticastOf(uint64(p)); err != nil {
		return 0 // not symmetric: nvshmem_ptr returns NULL
	}
	q, err := s.d.m.sys.Peer(uint64(p), pe)
	if err != nil {
		return 0
	}
	return DevicePtr(q)
}

func (s *emuShmemImpl) mcPtr(p DevicePtr, team int) DevicePtr {
	defer s.d.lock()()
	if s.d.m.shm == nil || s.d.m.shm.noMC != "" || team == teamWorld && s.d.m.sys.Nodes() > 1 {
		return 0
	}
	mc := s.d.m.sys.MulticastOf
	if team != teamWorld {
		mc = s.d.m.sys.NodeMulticastOf
	}
	q, err := mc(uint64(p))
	if err != nil {
		return 0
	}
	return DevicePtr(q)
}

func (s *emuShmemImpl) nodePEs() []int {
	ns := s.d.m.sys.NodeSize()
	first := s.rank / ns * ns
	pes := make([]int, ns)
	for i := range pes {
		pes[i] = first + i
	}
	return pes
}

func (s *emuShmemImpl) barrierAll(ctx context.Context) error {
	m := s.d.m
	_, err := m.collective(s.d, ctx, true, "BarrierAll", "NVSHMEM.BarrierAll", nil, func([]any) (any, error) {
		m.lock()
		defer m.mu.Unlock()
		if m.shm != nil && m.shm.dev != nil {
			return nil, m.shm.dev.Quiet()
		}
		return nil, nil
	})
	return err
}

// barrierAllOnStream: the emulator waits for the rank's streams and meets the other ranks
// from the host, as BarrierAll does.
func (s *emuShmemImpl) barrierAllOnStream(stream) error { return s.barrierAll(context.Background()) }

func (s *emuShmemImpl) moduleInit(module) error     { return nil }
func (s *emuShmemImpl) moduleFinalize(module) error { return nil }

func (s *emuShmemImpl) finalize() error {
	m := s.d.m
	_, err := m.collective(s.d, context.Background(), true, "NVSHMEM.Finalize", "NVSHMEM.Finalize", nil, func([]any) (any, error) {
		m.lock()
		defer m.mu.Unlock()
		var err error
		if m.shm != nil && m.shm.dev != nil {
			err = m.shm.dev.Quiet()
		}
		m.shm = nil
		return nil, err
	})
	return err
}
