package jit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// safely runs f, turning a panic into an error.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// TestProbeNVSHMEMHostile calls the NVSHMEM host API (emulator) with hostile inputs: each is
// an error naming the rule, never a panic or a misleading reason (before: PeerPtr and
// MulticastPtr of nil panicked, of memory off the symmetric heap blamed peer access or
// multicast; MallocContext of an ended context entered the collective and failed every rank).
func TestProbeNVSHMEMHostile(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		s := r.NVSHMEM
		sym, err := SymAlloc[float32](s, 16)
		if err != nil {
			return err
		}
		plain, err := Alloc[float32](r.Device, 16)
		if err != nil {
			return err
		}
		defer plain.Free()
		var nilMem *Memory
		var nilBuf *Buffer[float32]
		var nilCtx context.Context // the misuse tested
		var errs []string
		for _, tc := range []struct {
			name string
			f    func() error
			want string
		}{
			{"Malloc 0", func() error { _, err := s.Malloc(0); return err }, "size must be positive"},
			{"Malloc -1", func() error { _, err := s.Malloc(-1); return err }, "size must be positive"},
			{"Malloc huge", func() error { _, err := s.Malloc(math.MaxInt64); return err }, "bytes"},
			{"SymAlloc 0", func() error { _, err := SymAlloc[float32](s, 0); return err }, "length must be positive"},
			{"SymAlloc overflow", func() error { _, err := SymAlloc[float64](s, math.MaxInt64/4); return err }, "overflow"},
			{"PeerPtr -1", func() error { _, err := s.PeerPtr(sym, -1); return err }, "out of range"},
			{"PeerPtr 2", func() error { _, err := s.PeerPtr(sym, 2); return err }, "out of range"},
			{"PeerPtr nil", func() error { _, err := s.PeerPtr(nil, 0); return err }, "symmetric"},
			{"PeerPtr nil Memory", func() error { _, err := s.PeerPtr(nilMem, 0); return err }, "symmetric"},
			{"PeerPtr nil Buffer", func() error { _, err := s.PeerPtr(nilBuf, 0); return err }, "symmetric"},
			{"PeerPtr private", func() error { _, err := s.PeerPtr(plain, 1-r.Rank); return err }, "symmetric"},
			{"PeerPtr raw", func() error { _, err := s.PeerPtr(DevicePtr(12345), 1-r.Rank); return err }, "symmetric"},
			{"MulticastPtr nil", func() error { _, err := s.MulticastPtr(nil); return err }, "symmetric"},
			{"MulticastPtr private", func() error { _, err := s.MulticastPtr(plain); return err }, "symmetric"},
			{"BarrierAllContext nil", func() error { return s.BarrierAllContext(nilCtx) }, "nil context"},
			{"MallocContext nil", func() error { _, err := s.MallocContext(nilCtx, 16); return err }, "nil context"},
			{"MallocContext ended", func() error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_, err := s.MallocContext(ctx, 16)
				return err
			}, "canceled"},
		} {
			err := safely(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				errs = append(errs, fmt.Sprintf("%s: %v; want an error containing %q", tc.name, err, tc.want))
			}
		}
		if r.Rank == 0 && len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
