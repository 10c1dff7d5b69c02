package jit

import (
	"strings"
	"testing"
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
