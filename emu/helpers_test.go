package emu

import (
	"errors"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

func newSys(t testing.TB, n int) *System {
	t.Helper()
	s, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustMalloc(t testing.TB, s *System, gpu, n int) uint64 {
	t.Helper()
	a, err := s.Malloc(gpu, n)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readU32(t testing.TB, s *System, addr uint64, n int) []uint32 {
	t.Helper()
	v, err := ReadSlice[uint32](s, addr, n)
	must(t, err)
	return v
}

func readF32(t testing.TB, s *System, addr uint64, n int) []float32 {
	t.Helper()
	v, err := ReadSlice[float32](s, addr, n)
	must(t, err)
	return v
}

func launch1(s *System, m *ptx.Module, entry string, grid, block int, args ...any) error {
	return s.Launch(Launch{Module: m, Entry: entry, Grid: D1(grid), Block: D1(block), Args: args})
}

// wantErr checks that err is an *Error of kind k whose text contains every fragment.
func wantErr(t testing.TB, err error, k Kind, frags ...string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %s error, got %v", k, err)
	}
	if e.Kind != k {
		t.Fatalf("want a %s error, got %s: %v", k, e.Kind, err)
	}
	msg := err.Error()
	for _, f := range frags {
		if !strings.Contains(msg, f) {
			t.Fatalf("error %q does not mention %q", msg, f)
		}
	}
	return e
}
