package jit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe13FunctionZero: the exported Function methods on nil and on a zero Function
// return errors naming the misuse, never panic; LaunchEncoded of nil arguments says they
// are nil (not "encoded for another kernel").
func TestProbe13FunctionZero(t *testing.T) {
	try := func(what string, call func() error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		if err := call(); err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	for _, f := range []*Function{nil, {}} {
		try("ResidentBlocks", func() error { _, err := f.ResidentBlocks(D1(32), 0); return err })
		try("Launch", func() error { return f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}) })
		try("LaunchArgs", func() error { return f.LaunchArgs(LaunchConfig{Grid: D1(1), Block: D1(1)}, struct{}{}) })
		try("Encode", func() error { _, err := f.Encode(); return err })
		try("LaunchEncoded", func() error { return f.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(1)}, &Args{}) })
	}
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, fn := loadFunc(t, d, bumpKernel(t), "bump")
	err = fn.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, nil)
	wantErr(t, "LaunchEncoded(nil)", err, "nil")
	if err != nil && strings.Contains(err.Error(), "another kernel") {
		t.Errorf("LaunchEncoded(nil): %v; the arguments are nil, not another kernel's", err)
	}
	b, _ := Alloc[uint32](d, 64)
	a, err := fn.Encode(b, uint32(64), uint32(1))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	err = fn.LaunchEncoded(LaunchConfig{Grid: D1(1), Block: D1(32)}, a)
	wantErr(t, "LaunchEncoded after Device.Close", err, "closed")
	_, err = fn.ResidentBlocks(D1(32), 0)
	wantErr(t, "ResidentBlocks after Device.Close", err, "closed")
}

// TestProbe13ZeroValues: the methods of jit's handles made as zero values (Device{},
// Stream{}, Event{}, Module{}, Graph{}, GraphExec{}, NVSHMEM{}) instead of by their
// constructors return an error naming the zero value and its constructor. Before, most
// panicked (nil pointer): Device's Synchronize, Alloc, CopyHtoD, NewStream, NewEvent and
// Close; Stream.Close; Event's Record, Synchronize, Elapsed and Close; GraphExec's Launch
// and Close; Graph.Instantiate; NVSHMEM's Malloc, BarrierAll, PeerPtr, MyPE and Finalize;
// Module.Close (probe 13).
func TestProbe13ZeroValues(t *testing.T) {
	calls := []struct {
		name, want string
		call       func() error
	}{
		{"Device.Synchronize", "zero Device", func() error { return (&Device{}).Synchronize() }},
		{"Device.SynchronizeContext", "zero Device", func() error { return (&Device{}).SynchronizeContext(context.Background()) }},
		{"Device.Alloc", "zero Device", func() error { _, err := (&Device{}).Alloc(8); return err }},
		{"Device.CopyHtoD", "zero Device", func() error { return (&Device{}).CopyHtoD(0, []byte{1}) }},
		{"Device.NewStream", "zero Device", func() error { _, err := (&Device{}).NewStream(); return err }},
		{"Device.NewEvent", "zero Device", func() error { _, err := (&Device{}).NewEvent(); return err }},
		{"Device.Load", "zero Device", func() error { _, err := (&Device{}).Load(Source{}); return err }},
		{"Device.Close", "zero Device", func() error { return (&Device{}).Close() }},
		{"Stream.Synchronize", "zero Stream", func() error { return (&Stream{}).Synchronize() }},
		{"Stream.CopyDtoH", "zero Stream", func() error { return (&Stream{}).CopyDtoH(make([]byte, 4), 8) }},
		{"Stream.Close", "zero Stream", func() error { return (&Stream{}).Close() }},
		{"Event.Record", "zero Event", func() error { return (&Event{}).Record(nil) }},
		{"Event.Synchronize", "zero Event", func() error { return (&Event{}).Synchronize() }},
		{"Event.Elapsed", "zero Event", func() error { _, err := (&Event{}).Elapsed(&Event{}); return err }},
		{"Event.Close", "zero Event", func() error { return (&Event{}).Close() }},
		{"Stream.WaitEvent", "zero Event", func() error { return (&Stream{}).WaitEvent(&Event{}) }},
		{"Module.Function", "zero Module", func() error { _, err := (&Module{}).Function("k"); return err }},
		{"Module.Close", "zero Module", func() error { return (&Module{}).Close() }},
		{"Graph.Instantiate", "zero Graph", func() error { _, err := (&Graph{}).Instantiate(); return err }},
		{"Graph.Close", "zero Graph", func() error { return (&Graph{}).Close() }},
		{"GraphExec.Launch", "zero GraphExec", func() error { return (&GraphExec{}).Launch(nil) }},
		{"GraphExec.SetArgs", "zero GraphExec", func() error { return (&GraphExec{}).SetArgs(0) }},
		{"GraphExec.Close", "zero GraphExec", func() error { return (&GraphExec{}).Close() }},
		{"NVSHMEM.Malloc", "zero NVSHMEM", func() error { _, err := (&NVSHMEM{}).Malloc(8); return err }},
		{"NVSHMEM.BarrierAll", "zero NVSHMEM", func() error { return (&NVSHMEM{}).BarrierAll() }},
		{"NVSHMEM.PeerPtr", "zero NVSHMEM", func() error { _, err := (&NVSHMEM{}).PeerPtr(DevicePtr(8), 0); return err }},
		{"NVSHMEM.Finalize", "zero NVSHMEM", func() error { return (&NVSHMEM{}).Finalize() }},
	}
	for _, c := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s of a zero value panicked: %v", c.name, r)
				}
			}()
			if err := c.call(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want an error naming the %s", c.name, err, c.want)
			}
		}()
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("NVSHMEM.MyPE/NPEs of a zero value panicked: %v", r)
			}
		}()
		if pe, n := (&NVSHMEM{}).MyPE(), (&NVSHMEM{}).NPEs(); pe != 0 || n != 0 {
			t.Errorf("zero NVSHMEM: MyPE %d, NPEs %d; want 0, 0", pe, n)
		}
	}()
}

// TestProbe13LongNamesBounded: a kernel of 300 parameters with 1 KB names and a 100 KB name
// gives short errors: a wrong argument count quotes an excerpt of the name and of the
// signature, and Function of a missing name an excerpt of it and of the kernel list.
// Before: 547593 and 300045 bytes (the whole signature, name and list; probe 13).
func TestProbe13LongNamesBounded(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	name := "k" + strings.Repeat("x", 100000)
	k := dsl.New(name, dsl.WithTarget(ptx.SM90))
	for i := 0; i < 300; i++ {
		k.Param(fmt.Sprintf("p%s%d", strings.Repeat("y", 1000), i), dsl.U32)
	}
	mod, err := k.Build()
	if err != nil {
		t.Fatalf("%.300v", err)
	}
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		t.Fatalf("%.300v", err)
	}
	f, err := m.Function(name)
	if err != nil {
		t.Fatalf("%.300v", err)
	}
	err = f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, uint32(1))
	if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "takes 300 arguments, got 1") {
		t.Errorf("Launch with 1 argument of 300: %d bytes: %.300v", len(err.Error()), err)
	}
	args := make([]any, 300)
	for i := range args {
		args[i] = uint32(1)
	}
	args[7] = int32(-1)
	err = f.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, args...)
	if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "argument 7") {
		t.Errorf("Launch with a bad argument 7: %d bytes: %.300v", len(err.Error()), err)
	}
	_, err = m.Function(name + "q")
	if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "has no kernel") {
		t.Errorf("Function of a missing name: %d bytes: %.300v", len(err.Error()), err)
	}
}

// TestProbe13LongEnvQuoted: a 100 KB value of a kgen environment variable, or a backend
// name, is quoted as an excerpt in the error (each was quoted whole: KGEN_EMU_SEED,
// KGEN_EMU_WEAK, KGEN_CACHE, KGEN_BACKEND, KGEN_JIT_MODE ... ; probe 13).
func TestProbe13LongEnvQuoted(t *testing.T) {
	long := strings.Repeat("z", 100000)
	for _, env := range []string{"KGEN_EMU_SEED", "KGEN_EMU_WEAK", "KGEN_CACHE"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, long)
			d, err := OpenBackend(Emulator, 0)
			if err == nil {
				d.Close()
				t.Fatalf("%s of 100 KB: a device", env)
			}
			if msg := err.Error(); len(msg) > 1000 || !strings.Contains(msg, env) {
				t.Errorf("%s of 100 KB: %d bytes: %.200s", env, len(msg), msg)
			}
		})
	}
	if _, err := ParseBackend(long); err == nil || len(err.Error()) > 1000 {
		t.Errorf("ParseBackend of 100 KB: %v", err != nil)
	}
}

// TestProbe13NilOption: a nil Option given to OpenBackend or in RanksOptions.Open is an
// error naming its index (calling it panicked: nil pointer; probe 13).
func TestProbe13NilOption(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	d, err := OpenBackend(Emulator, 0, WithCache(nil), nil)
	if err == nil {
		d.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "option 1 (opts[1]) is nil") {
		t.Errorf("OpenBackend with a nil option: %v", err)
	}
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, Open: []Option{nil}}, func(r *Rank) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "RanksOptions.Open: option 0 (opts[0]) is nil") {
		t.Errorf("RunRanks with a nil option: %v", err)
	}
}

// TestProbe13CopyNegative: Device.CopyDtoD and Stream.CopyDtoD of a negative byte count are
// refused by the front end naming the call (the emulator said only "emulator: copy of -4
// bytes"; the GPU backend passed it to cuMemcpyDtoD, whose size_t read it as 2^64-4), and
// the stream stays usable; probe 13.
func TestProbe13CopyNegative(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Alloc[uint32](d, 16)
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"CopyDtoD":        d.CopyDtoD(b.DevPtr(), b.DevPtr()+32, -4),
		"Stream.CopyDtoD": s.CopyDtoD(b.DevPtr(), b.DevPtr()+32, -4),
	} {
		if err == nil || !strings.Contains(err.Error(), "jit: "+what+" of -4 bytes: the byte count is negative") {
			t.Errorf("%s of -4 bytes: %v", what, err)
		}
	}
	if err := s.CopyDtoD(b.DevPtr(), b.DevPtr()+32, 16); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("the stream after the refused copy: %v", err)
	}
}

// TestProbe13ZeroTypeParam: EncodeArgs of a hand-built kernel whose parameter has the zero
// Type names it (it read "parameter of type  has no size"; probe 13).
func TestProbe13ZeroTypeParam(t *testing.T) {
	_, err := EncodeArgs(&ptx.Func{Name: "k", Params: []ptx.Param{{Name: "p"}}}, []any{uint32(1)})
	if err == nil || !strings.Contains(err.Error(), "parameter of type (the zero Type) has no size") {
		t.Errorf("EncodeArgs of a zero-Type parameter: %v", err)
	}
}

// TestProbe13ZeroBufferNamed: a zero Memory{} or Buffer{} (not made by Device.Alloc, Alloc or
// BufferOf) is refused saying so (before: the error spoke only of a nil pointer).
func TestProbe13ZeroBufferNamed(t *testing.T) {
	var m Memory
	if err := m.Free(); err == nil || !strings.Contains(err.Error(), "zero Memory{}") {
		t.Errorf("Free of a zero Memory: %v", err)
	}
	var b Buffer[float32]
	if err := b.Free(); err == nil || !strings.Contains(err.Error(), "zero Buffer{}") {
		t.Errorf("Free of a zero Buffer: %v", err)
	}
	if err := b.CopyFromHost([]float32{1}); err == nil || !strings.Contains(err.Error(), "zero Buffer{}") {
		t.Errorf("CopyFromHost into a zero Buffer: %v", err)
	}
}
