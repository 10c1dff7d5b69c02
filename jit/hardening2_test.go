package jit

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestForeignBuffer: a *Buffer or *Memory of another device passed as a launch argument
// (positional, a struct field, a graph's new arguments) or as a copy operand is an error
// naming both devices.
func TestForeignBuffer(t *testing.T) {
	d0, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.Close()
	d1, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	m, err := d0.Load(Source{Module: bumpKernel(t)})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := m.Function("bump")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Alloc[uint32](d0, 64)
	b2, _ := Alloc[uint32](d1, 64)
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}}
	for _, c := range []struct {
		what string
		err  error
	}{
		{"Launch(*Buffer)", fn.Launch(cfg, b2, uint32(64), uint32(1))},
		{"Launch(*Memory)", fn.Launch(cfg, b2.Memory(), uint32(64), uint32(1))},
		{"LaunchArgs(*Buffer)", fn.LaunchArgs(cfg, bumpArgs{P: b2, N: 64, Delta: 1})},
		{"CopyFrom (source)", b.CopyFrom(b2)},
		{"CopyFromAsync (source)", b.CopyFromAsync(b2, nil)},
		{"CopyFrom (destination)", b2.CopyFromAsync(b, nil)},
	} {
		wantErr(t, c.what, c.err, "belongs to another Open of emu device 0")
		if strings.HasPrefix(c.what, "Copy") {
			wantErr(t, c.what, c.err, "the destination to emu device 0")
		} else {
			wantErr(t, c.what, c.err, "the work to emu device 0")
		}
	}
	// A graph's new arguments are checked too.
	s, _ := d0.NewStream()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 64}, Stream: s}, b, uint32(64), uint32(1)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetArgs", x.SetArgs(0, b2, uint32(64), uint32(1)), "belongs to another Open of emu device 0")
	wantErr(t, "SetLaunchArgs", x.SetLaunchArgs(0, bumpArgs{P: b2, N: 64, Delta: 1}), "belongs to another Open of emu device 0")
	// Its own device's buffer still works.
	if err := fn.Launch(cfg, b, uint32(64), uint32(1)); err != nil {
		t.Fatal(err)
	}
	b3, _ := Alloc[uint32](d0, 64)
	if err := b3.CopyFrom(b); err != nil {
		t.Fatal(err)
	}
}

// TestCopyDtoDOverlap: a device-to-device copy between overlapping ranges is an error naming
// both ranges (cuMemcpy is undefined there); adjacent ranges are fine.
func TestCopyDtoDOverlap(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, _ := d.Alloc(256)
	p := m.DevPtr()
	s, _ := d.NewStream()
	wantErr(t, "Device.CopyDtoD", d.CopyDtoD(p.Add(16), p, 64), "overlap")
	wantErr(t, "Device.CopyDtoD", d.CopyDtoD(p.Add(16), p, 64), fmt.Sprintf("[%#x, %#x)", uint64(p), uint64(p)+64))
	wantErr(t, "Stream.CopyDtoD", s.CopyDtoD(p, p.Add(8), 64), "overlap")
	wantErr(t, "Device.CopyDtoD same", d.CopyDtoD(p, p, 1), "overlap")
	if err := d.CopyDtoD(p.Add(64), p, 64); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoD(p, p.Add(64), 64); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyDtoD(p, p, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	b, _ := Alloc[uint32](d, 16)
	if err := b.CopyFrom(b); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("Buffer.CopyFrom itself: %v, want an overlap error", err)
	}
}

// TestElemStridesRange: WithElemStrides takes 1 to 8 per dimension; 0 and 9 are errors
// naming the option.
func TestElemStridesRange(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, _ := Alloc[float32](d, 64*64)
	for _, st := range []uint32{0, 9} {
		_, err := NewTensorMap(b, []uint64{64, 64}, []uint64{256}, []uint32{32, 8}, SwizzleNone, WithElemStrides(1, st))
		wantErr(t, fmt.Sprint("WithElemStrides(1, ", st, ")"), err, "WithElemStrides")
		wantErr(t, fmt.Sprint("WithElemStrides(1, ", st, ")"), err, "want 1 to 8")
	}
	if _, err := NewTensorMap(b, []uint64{64, 64}, []uint64{256}, []uint32{32, 8}, SwizzleNone, WithElemStrides(1, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTensorMap(b, []uint64{64, 64}, []uint64{256}, []uint32{32, 8}, SwizzleNone); err != nil {
		t.Fatal(err)
	}
}

// nilMethods (a subtest of TestNilReceivers) calls every exported method with a pointer receiver on a nil receiver: none
// panics; accessors return zero values, methods returning errors return one naming the nil
// (a nil *Cache is a disabled cache, a nil *Stream the default stream).
func nilMethods(t *testing.T) {
	var (
		d  *Device
		mo *Module
		f  *Function
		me *Memory
		b  *Buffer[uint32]
		s  *Stream
		e  *Event
		g  *Graph
		x  *GraphExec
		c  *Cache
		sh *NVSHMEM
	)
	ctx := context.Background()
	cfg := LaunchConfig{Grid: D1(1), Block: D1(1)}
	zero := func(name string, ok bool) {
		if !ok {
			t.Errorf("%s on nil: not the zero value", name)
		}
	}
	errs := map[string]func() error{
		"Device.Close":       d.Close,
		"Device.Synchronize": d.Synchronize,
		"Device.Load":        func() error { _, err := d.Load(Source{}); return err },
		"Device.Alloc":       func() error { _, err := d.Alloc(4); return err },
		"Device.CopyHtoD":    func() error { return d.CopyHtoD(0, nil) },
		"Device.CopyDtoH":    func() error { return d.CopyDtoH(nil, 0) },
		"Device.CopyDtoD":    func() error { return d.CopyDtoD(0, 8, 1) },
		"Device.NewStream":   func() error { _, err := d.NewStream(); return err },
		"Device.NewEvent":    func() error { _, err := d.NewEvent(); return err },
		"Module.Close":       mo.Close,
		"Module.Function":    func() error { _, err := mo.Function("x"); return err },
		"Function.Launch":    func() error { return f.Launch(cfg) },
		"Function.LaunchArgs": func() error {
			return f.LaunchArgs(cfg, struct{}{})
		},
		"Memory.Free":                func() error { return me.Free() },
		"Memory.FreeContext":         func() error { return me.FreeContext(ctx) },
		"Buffer.Free":                b.Free,
		"Buffer.CopyFromHost":        func() error { return b.CopyFromHost(nil) },
		"Buffer.CopyToHost":          func() error { return b.CopyToHost(nil) },
		"Buffer.CopyFromHostAsync":   func() error { return b.CopyFromHostAsync(nil, nil) },
		"Buffer.CopyToHostAsync":     func() error { return b.CopyToHostAsync(nil, nil) },
		"Buffer.CopyFrom":            func() error { return b.CopyFrom(nil) },
		"Buffer.CopyFromAsync":       func() error { return b.CopyFromAsync(nil, nil) },
		"Stream.Synchronize":         s.Synchronize,
		"Stream.Close":               s.Close,
		"Stream.CopyHtoD":            func() error { return s.CopyHtoD(0, nil) },
		"Stream.CopyDtoH":            func() error { return s.CopyDtoH(nil, 0) },
		"Stream.CopyDtoD":            func() error { return s.CopyDtoD(0, 8, 1) },
		"Stream.WaitEvent":           func() error { return s.WaitEvent(nil) },
		"Stream.BeginCapture":        s.BeginCapture,
		"Stream.EndCapture":          func() error { _, err := s.EndCapture(); return err },
		"Event.Record":               func() error { return e.Record(nil) },
		"Event.Synchronize":          e.Synchronize,
		"Event.Elapsed":              func() error { _, err := e.Elapsed(nil); return err },
		"Event.Close":                e.Close,
		"Graph.Instantiate":          func() error { _, err := g.Instantiate(); return err },
		"Graph.Close":                g.Close,
		"GraphExec.Launch":           func() error { return x.Launch(nil) },
		"GraphExec.SetArgs":          func() error { return x.SetArgs(0) },
		"GraphExec.SetLaunchArgs":    func() error { return x.SetLaunchArgs(0, struct{}{}) },
		"GraphExec.Close":            x.Close,
		"NVSHMEM.Malloc":             func() error { _, err := sh.Malloc(8); return err },
		"NVSHMEM.MallocContext":      func() error { _, err := sh.MallocContext(ctx, 8); return err },
		"NVSHMEM.PeerPtr":            func() error { _, err := sh.PeerPtr(DevicePtr(8), 0); return err },
		"NVSHMEM.MulticastPtr":       func() error { _, err := sh.MulticastPtr(DevicePtr(8)); return err },
		"NVSHMEM.NodeMulticastPtr":   func() error { _, err := sh.NodeMulticastPtr(DevicePtr(8)); return err },
		"NVSHMEM.BarrierAll":         sh.BarrierAll,
		"NVSHMEM.BarrierAllContext":  func() error { return sh.BarrierAllContext(ctx) },
		"NVSHMEM.BarrierAllOnStream": func() error { return sh.BarrierAllOnStream(nil) },
		"NVSHMEM.Finalize":           sh.Finalize,
	}
	for name, call := range errs {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on nil panicked: %v", name, r)
				}
			}()
			err := call()
			// A nil *Stream is the default stream: capturing it is refused for that.
			if err != nil && strings.HasPrefix(name, "Stream.") && strings.Contains(err.Error(), "Capture") {
				return
			}
			if err == nil || !strings.Contains(err.Error(), "nil") {
				t.Errorf("%s on nil: %v, want an error naming the nil receiver", name, err)
			}
		}()
	}
	accessors := map[string]func(){
		"Device.Info":        func() { zero("Device.Info", d.Info() == Info{}) },
		"Device.Cache":       func() { zero("Device.Cache", d.Cache() == nil) },
		"Device.NVSHMEM":     func() { zero("Device.NVSHMEM", d.NVSHMEM() == nil) },
		"Device.Startup":     func() { _ = d.Startup() },
		"Module.Stats":       func() { zero("Module.Stats", mo.Stats() == LoadStats{}) },
		"Module.Source":      func() { zero("Module.Source", mo.Source() == nil) },
		"Function.Name":      func() { zero("Function.Name", f.Name() == "") },
		"Function.Params":    func() { zero("Function.Params", f.Params() == nil) },
		"Memory.DevPtr":      func() { zero("Memory.DevPtr", me.DevPtr() == 0) },
		"Memory.Size":        func() { zero("Memory.Size", me.Size() == 0) },
		"Memory.Device":      func() { zero("Memory.Device", me.Device() == nil) },
		"Buffer.Len":         func() { zero("Buffer.Len", b.Len() == 0) },
		"Buffer.Memory":      func() { zero("Buffer.Memory", b.Memory() == nil) },
		"Buffer.DevPtr":      func() { zero("Buffer.DevPtr", b.DevPtr() == 0) },
		"Buffer.Freed":       func() { _ = b.Freed() },
		"Buffer.At":          func() { zero("Buffer.At", b.At(3) == 0) },
		"Buffer.Ptr":         func() { zero("Buffer.Ptr", b.Ptr() == 0) },
		"Stream.Device":      func() { zero("Stream.Device", s.Device() == nil) },
		"Graph.Kernels":      func() { zero("Graph.Kernels", g.Kernels() == nil) },
		"Cache.Dir":          func() { zero("Cache.Dir", c.Dir() == "") },
		"Cache.Enabled":      func() { zero("Cache.Enabled", !c.Enabled()) },
		"Cache.Get":          func() { _, ok := c.Get(CacheKey{}); zero("Cache.Get", !ok) },
		"Cache.Len":          func() { zero("Cache.Len", c.Len() == 0) },
		"Cache.Check":        func() { zero("Cache.Check", c.Check() == nil) },
		"Cache.Put":          func() { zero("Cache.Put", c.Put(CacheKey{}, nil) == nil) },
		"Cache.Clear":        func() { zero("Cache.Clear", c.Clear() == nil) },
		"NVSHMEM.MyPE":       func() { zero("NVSHMEM.MyPE", sh.MyPE() == 0) },
		"NVSHMEM.NPEs":       func() { zero("NVSHMEM.NPEs", sh.NPEs() == 0) },
		"NVSHMEM.Version":    func() { zero("NVSHMEM.Version", sh.Version() == "") },
		"NVSHMEM.LibPath":    func() { zero("NVSHMEM.LibPath", sh.LibPath() == "") },
		"NVSHMEM.Device":     func() { zero("NVSHMEM.Device", sh.Device() == nil) },
		"NVSHMEM.NodePEs":    func() { zero("NVSHMEM.NodePEs", sh.NodePEs() == nil) },
		"SignalError.Error":  func() { _ = (*SignalError)(nil).Error() },
		"MulticastError.Err": func() { _ = (*MulticastError)(nil).Error() },
		"VersionError.Error": func() { _ = (*VersionError)(nil).Error() },
		"RankError.Error":    func() { _ = (*RankError)(nil).Error() },
		"RankError.Unwrap":   func() { zero("RankError.Unwrap", (*RankError)(nil).Unwrap() == nil) },
	}
	for name, call := range accessors {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s on nil panicked: %v", name, r)
				}
			}()
			call()
		}()
	}
}
