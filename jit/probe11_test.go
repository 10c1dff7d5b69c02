package jit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe11EmuOptions: emulator options out of range, given in code or by the
// environment, fail Open and RunRanks naming the option or variable; within range a
// spinning launch still ends at its context's deadline. Before: WithEmuOptions(Quantum:
// 2^40) gave a spinning kernel turns of 2^40 instructions, so its launch with a 300 ms
// context did not return in 20 s and Device.Close blocked behind it;
// KGEN_EMU_SEED=0x10 ran the deterministic schedule, KGEN_EMU_WEAK=maybe the strong
// memory model and KGEN_CACHE=of kept the cache on, silently.
func TestProbe11EmuOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		env  [2]string
		want string
	}{
		{"Quantum 2^40", []Option{WithEmuOptions(emu.Options{Quantum: 1 << 40})}, [2]string{}, "WithEmuOptions: Options.Quantum 1099511627776"},
		{"StepBudget -1", []Option{WithEmuOptions(emu.Options{StepBudget: -1})}, [2]string{}, "Options.StepBudget -1 is negative"},
		{"KGEN_EMU_SEED hex", nil, [2]string{"KGEN_EMU_SEED", "0x10"}, `KGEN_EMU_SEED="0x10": want a decimal integer`},
		{"KGEN_EMU_SEED past int64", nil, [2]string{"KGEN_EMU_SEED", "99999999999999999999"}, "KGEN_EMU_SEED"},
		{"KGEN_EMU_WEAK maybe", nil, [2]string{"KGEN_EMU_WEAK", "maybe"}, `KGEN_EMU_WEAK="maybe"`},
		{"KGEN_CACHE of", nil, [2]string{"KGEN_CACHE", "of"}, `KGEN_CACHE="of": want off`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			d, err := OpenBackend(Emulator, 0, c.opts...)
			if err == nil {
				d.Close()
				t.Fatalf("OpenBackend: nil; want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenBackend: %v; want it to contain %q", err, c.want)
			}
			ran := false
			err = RunRanks(RanksOptions{Backend: Emulator, World: 2, Open: c.opts}, func(*Rank) error { ran = true; return nil })
			if err == nil || !strings.Contains(err.Error(), c.want) || ran {
				t.Fatalf("RunRanks: %v (ran %v); want an error containing %q before any rank ran", err, ran, c.want)
			}
		})
	}
	// Accepted spellings: the environment's switch in any case, a seed with spaces around.
	t.Setenv("KGEN_EMU_SEED", " 7 ")
	t.Setenv("KGEN_EMU_WEAK", "ON")
	t.Setenv("KGEN_CACHE", " Yes")
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatalf("KGEN_EMU_SEED=' 7 ', KGEN_EMU_WEAK=ON: %v", err)
	}
	if o := d.impl.(*emuDevice).opts; o.Seed != 7 || !o.Weak {
		t.Errorf("options from the environment: %+v; want Seed 7, Weak", o)
	}
	d.Close()

	// The largest quantum: a spinning launch still ends at its context's deadline.
	k := dsl.New("spin", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	n := k.Param("n", dsl.U32)
	k.For(k.Const(dsl.U32, 0), n, 1, func(i dsl.Value) { k.Store(p.At(k.ThreadIdx(dsl.X)), i) })
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err = OpenBackend(Emulator, 0, WithEmuOptions(emu.Options{Quantum: emu.MaxQuantum}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := m.Function("spin")
	buf, err := Alloc[uint32](d, 64)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := d.NewStream()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(64), Stream: s, Context: ctx}, buf, uint32(1<<32-1))
		if err == nil {
			err = s.SynchronizeContext(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a spinning launch at Quantum %d: %v after %v; want context.DeadlineExceeded", emu.MaxQuantum, err, time.Since(start))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a spinning launch at Quantum %d: no answer in 30 s past a 300 ms deadline", emu.MaxQuantum)
	}
}

// TestProbe11BootstrapTimeout: $KGEN_BOOTSTRAP_TIMEOUT that is not a positive duration is an
// error naming it, and a negative InitOptions.Timeout is refused naming the field. Before:
// "90" (no unit), "-1s" and "soon" waited the default 60 s, silently, and a negative Timeout
// ended the unique-ID exchange at once with an error blaming the missing ranks.
func TestProbe11BootstrapTimeout(t *testing.T) {
	for _, v := range []string{"90", "-1s", "0s", "soon", "1e400h"} {
		t.Setenv("KGEN_BOOTSTRAP_TIMEOUT", v)
		d, err := bootstrapTimeout()
		if err == nil || !strings.Contains(err.Error(), "KGEN_BOOTSTRAP_TIMEOUT") {
			t.Errorf("KGEN_BOOTSTRAP_TIMEOUT=%q: %v, %v; want an error naming the variable", v, d, err)
		}
	}
	for v, want := range map[string]time.Duration{"": 60 * time.Second, " 90s ": 90 * time.Second, "5m": 5 * time.Minute} {
		t.Setenv("KGEN_BOOTSTRAP_TIMEOUT", v)
		if d, err := bootstrapTimeout(); err != nil || d != want {
			t.Errorf("KGEN_BOOTSTRAP_TIMEOUT=%q: %v, %v; want %v", v, d, err, want)
		}
	}
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s, err := InitNVSHMEM(d, InitOptions{Timeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "InitOptions.Timeout -1s is negative") {
		if err == nil {
			s.Finalize()
		}
		t.Errorf("InitNVSHMEM with Timeout -1s: %v; want an error naming InitOptions.Timeout", err)
	}
}

// TestProbe11BootstrapHostile: the unique-ID exchange with connections that are not kgen
// ranks, and with contexts that end without a deadline. A connection that closes at once,
// sends an HTTP request or stays silent is skipped by rank 0, which serves the real rank
// beside it; rank 0 waiting on a silent connection, and a rank whose server never replies,
// return promptly when their context (with no deadline) is cancelled. Before: rank 0 failed
// the exchange at the first stray connection ("not a kgen rank", "reading a peer's hello:
// EOF"), a silent one held it until the context's deadline, and without a deadline both
// sides blocked for ever in a read, deaf to the cancelled context.
func TestProbe11BootstrapHostile(t *testing.T) {
	addrOf := func() string {
		port, err := freePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	dial := func(addr string) net.Conn {
		for i := 0; i < 200; i++ {
			if c, err := net.Dial("tcp", addr); err == nil {
				return c
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("cannot connect to %s", addr)
		return nil
	}
	within := func(what string, d time.Duration, f func() error) error {
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(d):
			t.Fatalf("%s: no answer in %v", what, d)
			return nil
		}
	}

	// Stray connections before the real rank: skipped.
	for _, stray := range []struct {
		name string
		do   func(c net.Conn)
	}{
		{"closes at once", func(c net.Conn) { c.Close() }},
		{"sends HTTP", func(c net.Conn) { c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); c.Close() }},
		{"stays silent", func(c net.Conn) {}},
	} {
		addr := addrOf()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res := make(chan error, 1)
		go func() {
			_, err := ExchangeUniqueID(ctx, Rendezvous{Rank: 0, WorldSize: 2, Addr: addr}, []byte("uid"))
			res <- err
		}()
		c := dial(addr)
		stray.do(c)
		uid, err := ExchangeUniqueID(ctx, Rendezvous{Rank: 1, WorldSize: 2, Addr: addr}, nil)
		if err != nil || string(uid) != "uid" {
			t.Errorf("a stray connection that %s, then rank 1: rank 1 got %q, %v", stray.name, uid, err)
		}
		if err := within("rank 0", 30*time.Second, func() error { return <-res }); err != nil {
			t.Errorf("a stray connection that %s, then rank 1: rank 0: %v", stray.name, err)
		}
		c.Close()
		cancel()
	}

	// Rank 0 held by a silent connection, its context cancelled (no deadline).
	addr := addrOf()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := ExchangeUniqueID(ctx, Rendezvous{Rank: 0, WorldSize: 2, Addr: addr}, []byte("uid"))
		res <- err
	}()
	c := dial(addr)
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := within("rank 0 with a silent peer, cancelled", 10*time.Second, func() error { return <-res }); err == nil {
		t.Error("rank 0 with a silent peer, cancelled: nil; want an error")
	}

	// A rank whose server accepts and never replies, its context cancelled (no deadline).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel2() }()
	err = within("rank 1 against a mute server, cancelled", 10*time.Second, func() error {
		_, err := ExchangeUniqueID(ctx2, Rendezvous{Rank: 1, WorldSize: 2, Addr: ln.Addr().String()}, nil)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "rank 0 did not serve") {
		t.Errorf("rank 1 against a mute server, cancelled: %v; want the timeout's error", err)
	}
}
