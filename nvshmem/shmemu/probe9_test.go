package shmemu_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem"
)

// TestProbe9ClockRange: a transfer between nodes that would arrive past the end of the
// emulator's logical clock faults the launch naming it (the arrival time wrapped negative
// and the data was delivered at the wrong time: kgen run nvshmem_allgather_ring --network
// 1000000h,1e9 reported values that differ); the network's bounds are checked, and Steps
// never returns a wrapped time.
func TestProbe9ClockRange(t *testing.T) {
	k := dsl.New("k")
	dst := k.PtrParam("dst", dsl.U32)
	k.If(nvshmem.MyPE(k).Eq(0).And(k.ThreadIdx(dsl.X).Eq(0)), func() {
		nvshmem.P(k, dst.At(0), uint32(7), 1)
		nvshmem.Quiet(k)
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, e := nodeSystem(t, 2, 2)
	if err := s.SetNetwork(emu.Network{Latency: emu.MaxLatency, BytesPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	m, _ := s.MallocSymmetric(4)
	e.BookLink(0, 1, math.MaxInt64-10)
	err = s.Launch(emu.Launch{Module: mod, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(32),
		ArgsFor: func(g int) []any { return []any{m.On(g)} }})
	if err == nil || !strings.Contains(err.Error(), "logical clock ends") || !strings.Contains(err.Error(), "PE 0 to PE 1") {
		t.Fatalf("a put arriving past the clock's range: %v; want a fault naming it", err)
	}

	for _, n := range []emu.Network{
		{Latency: emu.MaxLatency + 1},
		{Latency: -1},
		{BytesPerSecond: 0.5},
		{BytesPerSecond: math.NaN()},
		{BytesPerSecond: -1},
	} {
		if err := s.SetNetwork(n); err == nil {
			t.Errorf("SetNetwork(%v): no error", n)
		}
	}
	for _, n := range []emu.Network{{}, {Latency: emu.MaxLatency, BytesPerSecond: 1}, {Latency: time.Microsecond, BytesPerSecond: math.Inf(1)}} {
		if err := s.SetNetwork(n); err != nil {
			t.Errorf("SetNetwork(%v): %v", n, err)
		}
	}
	if busy, _ := (emu.Network{BytesPerSecond: 1}).Steps(math.MaxInt); busy != math.MaxInt64 {
		t.Errorf("Steps of 2^63 bytes at 1 byte/s: busy %d, want MaxInt64 (not a wrapped time)", busy)
	}
	if busy, _ := (emu.Network{BytesPerSecond: 1e-300}).Steps(1 << 20); busy != math.MaxInt64 {
		t.Errorf("Steps at 1e-300 bytes/s: busy %d, want MaxInt64", busy)
	}
}
