package kernels_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
)

// RingArgs are the example kernel's parameters.
type RingArgs struct {
	Data                         dsl.PeerTable `kgen:"f32"` // every GPU's inbox
	Signals                      dsl.PeerTable `kgen:"u32"` // every GPU's signal slots
	Pads                         dsl.PeerTable `kgen:"u32"` // every GPU's barrier pads
	Out                          dsl.Ptr       `kgen:"f32"`
	Rank, NGPUs, Epoch, PadEpoch dsl.Value     `kgen:"u32"`
}

// ringKernel: every GPU writes rank+1 into the next GPU's inbox, sets its signal slot 0 with
// a release; every GPU waits for its own slot (acquire), copies its inbox to out, and meets
// the others at a cross-GPU barrier before leaving (so the next launch may overwrite the
// inboxes).
func ringKernel(k *dsl.Kernel) {
	a := dsl.Params[RingArgs](k, dsl.F32)
	sig := kernels.NewTileSignals(k, a.Signals, a.Rank, a.Epoch)
	bar := kernels.NewCrossGPUBarrier(k, a.Pads, a.Rank, a.NGPUs, a.PadEpoch)
	next := a.Rank.Add(uint32(1)).Rem(a.NGPUs)
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Eq(0), func() { k.Store(a.Data.Peer(next), a.Rank.Add(uint32(1)).To(dsl.F32)) })
	sig.Set(next, 0, sig.Target()) // bar.sync, st.release.sys by thread 0
	sig.Wait(0, sig.Target())      // ld.acquire.sys spin by thread 0, bar.sync
	k.If(tid.Eq(0), func() { k.Store(a.Out, k.Load(a.Data.Peer(a.Rank))) })
	bar.Wait()
}

// Example (TileSignals, CrossGPUBarrier): a ring of 3 emulated GPUs, launched twice with no
// reset of the signals or pads (the epochs count the launches), in the weak memory model.
func ExampleTileSignals() {
	k := dsl.New("ring")
	ringKernel(k)
	mod, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	const g = 3
	sys, _ := emu.New(g)
	table := func(bytes int) (*emu.Symmetric, *emu.Symmetric) {
		s, _ := sys.MallocSymmetric(bytes)
		t, _ := sys.MallocSymmetric(8 * kernels.CollMaxGPUs)
		addrs := make([]uint64, kernels.CollMaxGPUs)
		for i := 0; i < g; i++ {
			addrs[i] = s.On(i)
		}
		for i := 0; i < g; i++ {
			_ = emu.WriteSlice(sys, t.On(i), addrs)
		}
		return s, t
	}
	_, data := table(16)
	_, sigs := table(16)
	_, pads := table(4 * kernels.PadWords)
	out, _ := sys.MallocSymmetric(16)
	for launch := uint32(0); launch < 2; launch++ {
		err := sys.Launch(emu.Launch{Module: mod, Entry: "ring", GPUs: sys.All(), Grid: emu.D1(1), Block: emu.D1(32),
			ArgsFor: func(i int) []any {
				return []any{data.On(i), sigs.On(i), pads.On(i), out.On(i), uint32(i), uint32(g), launch, launch}
			}, Options: emu.Options{Weak: true}})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	for i := 0; i < g; i++ {
		v, _ := emu.ReadSlice[float32](sys, out.On(i), 1)
		fmt.Printf("GPU %d received %v\n", i, v[0])
	}
	// Output:
	// GPU 0 received 3
	// GPU 1 received 1
	// GPU 2 received 2
}
