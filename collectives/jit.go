package collectives

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// JIT is a Backend over one rank of a jit program (jit.RunRanks with NVSHMEM): a process
// per GPU on the GPU backend, a goroutine per simulated GPU on the emulator. The rank drives
// its own GPU only: every rank makes its own Comm and the same calls in the same order, and
// the kernels meet across GPUs (symmetric memory from NVSHMEM, peer addresses from
// nvshmem_ptr, multicast addresses from nvshmemx_mc_ptr; without NVLS the Comm falls back to
// the peer-to-peer kernels).
type JIT struct {
	// Stream, when set, carries the kernels and the device-to-device copies (staging), so
	// that events recorded on it time them; nil means the default stream.
	Stream *jit.Stream

	r    *jit.Rank
	mods map[*ptx.Module]*jit.Module
}

type jitMem struct{ m *jit.Memory }

func (m jitMem) Bytes() int { return int(m.m.Size()) }

// NewJIT returns the backend of rank r, whose NVSHMEM must be running
// (jit.RanksOptions.NVSHMEM).
func NewJIT(r *jit.Rank) (*JIT, error) {
	if r == nil || r.Device == nil {
		return nil, errors.New("collectives: NewJIT: no rank or device")
	}
	if r.NVSHMEM == nil {
		return nil, errors.New("collectives: NewJIT: rank has no NVSHMEM (set jit.RanksOptions.NVSHMEM): the collectives need symmetric memory")
	}
	return &JIT{r: r, mods: map[*ptx.Module]*jit.Module{}}, nil
}

func (j *JIT) mem(m Mem) (*jit.Memory, error) {
	jm, ok := m.(jitMem)
	if !ok || jm.m == nil {
		return nil, fmt.Errorf("collectives: %T is not an allocation of the jit backend", m)
	}
	return jm.m, nil
}

func (j *JIT) local(gpu int) error {
	if gpu != j.r.Rank {
		return fmt.Errorf("collectives: GPU %d is not this rank's (%d): each rank drives its own GPU", gpu, j.r.Rank)
	}
	return nil
}

// NumGPUs returns the number of ranks.
func (j *JIT) NumGPUs() int { return j.r.World }

// Local returns this rank's GPU.
func (j *JIT) Local() []int { return []int{j.r.Rank} }

// Alloc allocates symmetric memory (nvshmem_malloc; collective) and zeroes this rank's copy.
func (j *JIT) Alloc(bytes int) (Mem, error) {
	m, err := j.r.NVSHMEM.Malloc(int64(bytes))
	if err != nil {
		return nil, err
	}
	if err := j.r.Device.CopyHtoD(m.DevPtr(), make([]byte, bytes)); err != nil {
		return nil, err
	}
	return jitMem{m}, nil
}

// Free releases symmetric memory (collective).
func (j *JIT) Free(m Mem) error {
	jm, err := j.mem(m)
	if err != nil {
		return err
	}
	return jm.Free()
}

// Addr returns this rank's copy, or the peer address of another rank's (nvshmem_ptr).
func (j *JIT) Addr(m Mem, viewer, owner int) (uint64, error) {
	jm, err := j.mem(m)
	if err != nil {
		return 0, err
	}
	if err := j.local(viewer); err != nil {
		return 0, err
	}
	if owner == viewer {
		return uint64(jm.DevPtr()), nil
	}
	p, err := j.r.NVSHMEM.PeerPtr(jm, owner)
	return uint64(p), err
}

// Multicast returns the multicast address (nvshmemx_mc_ptr) or why there is none.
func (j *JIT) Multicast(m Mem, viewer int) (uint64, error) {
	jm, err := j.mem(m)
	if err != nil {
		return 0, err
	}
	if err := j.local(viewer); err != nil {
		return 0, err
	}
	p, err := j.r.NVSHMEM.MulticastPtr(jm)
	return uint64(p), err
}

// Write copies p into this rank's copy.
func (j *JIT) Write(m Mem, gpu, off int, p []byte) error {
	jm, err := j.mem(m)
	if err != nil {
		return err
	}
	if err := j.local(gpu); err != nil {
		return err
	}
	if off < 0 || int64(off+len(p)) > jm.Size() {
		return fmt.Errorf("collectives: write of %d bytes at %d: the allocation has %d", len(p), off, jm.Size())
	}
	return j.r.Device.CopyHtoD(jm.DevPtr().Add(int64(off)), p)
}

// Read copies this rank's copy into p, after the device (and Stream) has finished its work.
func (j *JIT) Read(m Mem, gpu, off int, p []byte) error {
	jm, err := j.mem(m)
	if err != nil {
		return err
	}
	if err := j.local(gpu); err != nil {
		return err
	}
	if off < 0 || int64(off+len(p)) > jm.Size() {
		return fmt.Errorf("collectives: read of %d bytes at %d: the allocation has %d", len(p), off, jm.Size())
	}
	if j.Stream != nil {
		if err := j.Stream.Synchronize(); err != nil {
			return err
		}
	}
	if err := j.r.Device.Synchronize(); err != nil {
		return err
	}
	return j.r.Device.CopyDtoH(p, jm.DevPtr().Add(int64(off)))
}

// Copy copies n bytes on this rank's GPU.
func (j *JIT) Copy(gpu int, dst Mem, dstOff int, src Mem, srcOff int, n int) error {
	d, err := j.mem(dst)
	if err != nil {
		return err
	}
	s, err := j.mem(src)
	if err != nil {
		return err
	}
	if err := j.local(gpu); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	to, from := d.DevPtr().Add(int64(dstOff)), s.DevPtr().Add(int64(srcOff))
	if j.Stream != nil {
		return j.Stream.CopyDtoD(to, from, int64(n))
	}
	return j.r.Device.CopyDtoD(to, from, int64(n))
}

// Launch loads the module (once) and launches this rank's grid as a collective launch.
func (j *JIT) Launch(l Launch) error {
	m, ok := j.mods[l.Module]
	if !ok {
		var err error
		if m, err = j.r.Device.Load(jit.Source{Module: l.Module}); err != nil {
			return err
		}
		j.mods[l.Module] = m
	}
	f, err := m.Function(l.Entry)
	if err != nil {
		return err
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(l.Grid), Block: jit.D1(l.Block), Stream: j.Stream, Collective: jit.CollectiveOn, CoResident: true}
	return f.Launch(cfg, l.Args(j.r.Rank)...)
}
