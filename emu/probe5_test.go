package emu

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestProbeSymmetricHostile calls the emulator's memory API with hostile sizes, GPUs and
// addresses: each an error naming the problem, never a panic or a host allocation of the
// requested size.
func TestProbeSymmetricHostile(t *testing.T) {
	s, err := New(2)
	if err != nil {
		t.Fatal(err)
	}
	sym, err := s.MallocSymmetric(64)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := s.Malloc(0, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"MallocSymmetric 0", func() error { _, err := s.MallocSymmetric(0); return err }, "size"},
		{"MallocSymmetric -1", func() error { _, err := s.MallocSymmetric(-1); return err }, "size"},
		{"MallocSymmetric huge", func() error { _, err := s.MallocSymmetric(math.MaxInt); return err }, ""},
		{"Malloc huge", func() error { _, err := s.Malloc(0, math.MaxInt); return err }, ""},
		{"Malloc gpu 2", func() error { _, err := s.Malloc(2, 8); return err }, "GPU 2"},
		{"Malloc gpu -1", func() error { _, err := s.Malloc(-1, 8); return err }, "GPU -1"},
		{"Peer gpu 2", func() error { _, err := s.Peer(sym.On(0), 2); return err }, "2"},
		{"Peer gpu -1", func() error { _, err := s.Peer(sym.On(0), -1); return err }, "-1"},
		{"Peer private", func() error { _, err := s.Peer(priv, 1); return err }, "symmetric"},
		{"Peer zero", func() error { _, err := s.Peer(0, 1); return err }, "symmetric"},
		{"SymmetricAt private", func() error { _, err := s.SymmetricAt(priv); return err }, "symmetric"},
		{"MulticastOf private", func() error { _, err := s.MulticastOf(priv); return err }, "symmetric"},
		{"FreeSymmetric nil", func() error { return s.FreeSymmetric(nil) }, "nil"},
		{"Free 0", func() error { return s.Free(0) }, ""},
		{"Free inside", func() error { return s.Free(priv + 8) }, ""},
		{"Write huge", func() error { return s.Write(priv, make([]byte, 65)) }, ""},
		{"Read past", func() error { return s.Read(priv+60, make([]byte, 8)) }, ""},
		{"Memset negative", func() error { return s.Memset(priv, 0, -1) }, ""},
		{"Memset huge", func() error { return s.Memset(priv, 0, math.MaxInt) }, ""},
		{"Copy negative", func() error { return s.Copy(priv, priv, -1) }, ""},
		{"Copy overlap past", func() error { return s.Copy(priv, priv+32, 64) }, ""},
	} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = tc.f()
		}()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.HasPrefix(err.Error(), "panic") {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
