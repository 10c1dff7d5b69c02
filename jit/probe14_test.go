package jit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe14LongKernelNameBounded: a kernel of a 100 KB name gives short errors from
// Launch (a bad grid, nil arguments, a closed module), ResidentBlocks and Load (a module
// that fails ptx.Verify): each quotes an excerpt of the name. Before, they quoted it whole
// (100 KB each); probe 14.
func TestProbe14LongKernelNameBounded(t *testing.T) {
	name := "k" + strings.Repeat("x", 100000)
	k := dsl.New(name, dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	k.Store(p.At(k.GlobalThreadIdx(dsl.X)), k.Const(dsl.U32, 1))
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, f := loadFunc(t, d, mod, name)
	short := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 2000 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: %d bytes (want < 2000, holding %q): %.200v", what, n, want, err)
		}
	}
	short("grid 0", f.Launch(LaunchConfig{Grid: D1(0), Block: D1(1)}, uint64(0)), "must be positive")
	short("LaunchArgs(nil)", f.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(1)}, nil), "no arguments")
	_, err = f.ResidentBlocks(D1(0), 0)
	short("ResidentBlocks", err, "positive block")
	bad := *mod
	bad.Funcs = append([]*ptx.Func(nil), mod.Funcs...)
	bf := *bad.Funcs[0]
	bf.Body = append([]*ptx.Instr{{Op: "bogus"}}, bf.Body...)
	bad.Funcs[0] = &bf
	_, err = d.Load(Source{Module: &bad})
	short("Load of a bad module", err, "ptx.Verify")
	m.Close()
	short("closed", f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, uint64(0)), "closed")
}

// TestProbe14NilFuncInModule: Load of a module holding a nil *ptx.Func is an error naming it
// (it panicked: nil pointer in Load's kernel scan), and NVSHMEMCalls skips it; probe 14.
func TestProbe14NilFuncInModule(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := &ptx.Module{Target: ptx.SM90, Funcs: []*ptx.Func{{Name: "k", Entry: true, Body: []*ptx.Instr{{Op: "ret"}}}, nil}}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Load panicked: %v", r)
			}
		}()
		_, err = d.Load(Source{Module: m})
	}()
	if err == nil || !strings.Contains(err.Error(), "Funcs[1] is nil") {
		t.Errorf("Load: %v; want an error naming Funcs[1]", err)
	}
	if calls := NVSHMEMCalls(m); len(calls) != 0 {
		t.Errorf("NVSHMEMCalls: %v", calls)
	}
}

// TestProbe14RendezvousChecked: ExchangeUniqueID refuses at once a Rendezvous that cannot
// work (a rank outside the world, a negative world, an Addr that is not host:port); before,
// a rank fetched from "" forever (until the context ended: never, for Background). The
// report of missing ranks of a huge world is short and found at once (it listed every one
// of 2^40); probe 14.
func TestProbe14RendezvousChecked(t *testing.T) {
	for _, c := range []struct {
		rv   Rendezvous
		want string
	}{
		{Rendezvous{Rank: 1 << 40, WorldSize: 1 << 40, Addr: "127.0.0.1:1"}, "Rendezvous.Rank"},
		{Rendezvous{Rank: -1, WorldSize: 4, Addr: "127.0.0.1:1"}, "Rendezvous.Rank"},
		{Rendezvous{Rank: 1, WorldSize: 4}, "Rendezvous.Addr"},
		{Rendezvous{Rank: 1, WorldSize: 4, Addr: strings.Repeat("h", 100000)}, "Rendezvous.Addr"},
		{Rendezvous{WorldSize: -3}, "negative"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ExchangeUniqueID(context.Background(), c.rv, []byte("id")); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1000 {
				t.Errorf("%+.80v: %.200v; want a short error naming %s", c.rv, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%+.80v: ExchangeUniqueID still waits after 5 s", c.rv)
		}
	}
	if got := missingRanks(1<<40, map[int]bool{2: true}); len(got) > 200 || !strings.Contains(got, "[1 3 4") || !strings.Contains(got, "more") {
		t.Errorf("missingRanks(2^40): %.200s", got)
	}
}
