package emu_test

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// Barrier epochs at the u32 wrap. The library's cross-GPU barriers (kernels/coll_common.go)
// count up forever: the host passes an epoch, a barrier's target is epoch+1 (u32), every GPU
// stores the target into its peers' pads and waits until its own pad reaches it. The
// emulator's u32 arithmetic wraps as the GPU's does (add.u32, red.add.u32 and atom.add.u32
// are modulo 2^32; NVSHMEM's u64 signals modulo 2^64), so a wait written as `pad >= target`
// (unsigned) passes at once when the target wraps to 0 while the pad still holds
// 0xffffffff: the barrier does not wait, and the race detector reports the read of data the
// peer has not written. A wait on the signed difference, int32(pad - target) >= 0, is right
// across the wrap (while the GPUs are fewer than 2^31 epochs apart).

// epochKernel: each GPU stores its values into its peer's buffer (plain stores), meets the
// peer at a barrier of one u32 pad per GPU (st.release.sys to the peer's pad, ld.acquire.sys
// spin on its own), then copies its own buffer (the peer's values) out.
func epochKernel(t *testing.T, wrapSafe bool) (*ptx.Module, ptx.Pos) {
	k := dsl.New("epochbar")
	mine := k.PtrParam("mine", dsl.U32)
	peer := k.PtrParam("peer", dsl.U32)
	myPad := k.PtrParam("mypad", dsl.U32)
	peerPad := k.PtrParam("peerpad", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	epoch := k.Param("epoch", dsl.U32)
	tid := k.ThreadIdx(dsl.X)
	k.Store(peer.At(tid), rank.Mul(1000).Add(epoch.Mul(100)).Add(tid))
	k.SyncThreads()
	target := epoch.Add(1) // wraps to 0 after 0xffffffff
	k.If(tid.Eq(0), func() {
		k.Store(peerPad, target, dsl.Release(dsl.System))
		if wrapSafe {
			k.WaitUntil(myPad, dsl.GeWrap, target, dsl.Acquire(dsl.System)) // int32(pad - target) >= 0
		} else {
			k.WaitUntil(myPad, dsl.Ge, target, dsl.Acquire(dsl.System)) // as kernels/coll_common.go
		}
	})
	k.SyncThreads()
	rd := at(func() { k.Store(out.At(tid), k.Load(mine.At(tid))) })
	return buildDSL(t, k), rd
}

// runEpochs launches the barrier kernel on 2 GPUs with epochs first, first+1, ..., as the
// host's collectives do (one barrier per launch: the epoch advances by one), pads starting
// at what the barrier before first left (first).
func runEpochs(t *testing.T, m *ptx.Module, first uint32, launches int, opt emu.Options) error {
	s := newSystem(t, 2)
	buf, err := s.MallocSymmetric(4 * 64)
	check(t, err)
	pad, err := s.MallocSymmetric(4)
	check(t, err)
	for g := 0; g < 2; g++ {
		check(t, emu.WriteSlice(s, pad.On(g), []uint32{first}))
	}
	outs := []uint64{}
	for g := 0; g < 2; g++ {
		o, err := s.Malloc(g, 4*64)
		check(t, err)
		outs = append(outs, o)
	}
	for i := 0; i < launches; i++ {
		epoch := first + uint32(i)
		err := s.Launch(emu.Launch{Module: m, Entry: "epochbar", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64), Options: opt,
			ArgsFor: func(g int) []any {
				return []any{buf.On(g), buf.On(1 - g), pad.On(g), pad.On(1 - g), outs[g], uint32(g), epoch}
			}})
		if err != nil {
			return fmt.Errorf("epoch %#x: %w", epoch, err)
		}
		for g := 0; g < 2; g++ {
			got, err := emu.ReadSlice[uint32](s, outs[g], 64)
			check(t, err)
			for j, x := range got {
				if want := uint32(1-g)*1000 + epoch*100 + uint32(j); x != want {
					return fmt.Errorf("epoch %#x: GPU %d out[%d] = %d, want %d", epoch, g, j, x, want)
				}
			}
		}
	}
	return nil
}

// TestBarrierEpochWrap: the unsigned wait passes the wrap unsynchronized (reported); the
// wait on the signed difference synchronizes before, at and after the wrap, in the strong and
// the weak mode.
func TestBarrierEpochWrap(t *testing.T) {
	unsigned, rd := epochKernel(t, false)
	check(t, runEpochs(t, unsigned, 0xfffffff0, 3, emu.Options{})) // far from the wrap: correct
	err := runEpochs(t, unsigned, 0xfffffffd, 4, emu.Options{})
	e := asError(t, errorsAs(err), emu.KindDataRace)
	if e.Pos != rd && (len(e.Related) == 0 || e.Related[0].Pos != rd) {
		t.Fatalf("the race does not involve the read after the barrier at %v: %v", rd, err)
	}
	if want := "epoch 0xffffffff: "; err.Error()[:len(want)] != want {
		t.Fatalf("the unsigned wait failed at %v, want at the launch whose target wraps to 0", err)
	}
	safe, _ := epochKernel(t, true)
	for _, opt := range []emu.Options{{}, {Seed: 7}, {Weak: true, Seed: 3}, {Weak: true, Seed: 8}} {
		if err := runEpochs(t, safe, 0xfffffffd, 5, opt); err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
	}
}

// errorsAs unwraps runEpochs' error to the emulator's.
func errorsAs(err error) error {
	for err != nil {
		if _, ok := err.(*emu.Error); ok {
			return err
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
	return nil
}
