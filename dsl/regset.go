package dsl

import "github.com/kgen-dev/kgen/ptx"

// regSet is a set of registers: a bit per register number, by register type. Registers come
// only from Kernel.reg, which numbers each type's from 0, so the bits stay dense. The zero
// regSet is empty.
type regSet struct {
	bits [256][]uint64
}

// has reports whether r is in s.
func (s *regSet) has(r ptx.Reg) bool {
	n := uint(r.N)
	b := s.bits[r.Type]
	return n/64 < uint(len(b)) && b[n/64]>>(n%64)&1 != 0
}

// add puts r in s.
func (s *regSet) add(r ptx.Reg) {
	n := uint(r.N)
	b := s.bits[r.Type]
	if w := int(n / 64); w >= len(b) {
		b = append(b, make([]uint64, max(w+1-len(b), len(b)))...)
		s.bits[r.Type] = b
	}
	b[n/64] |= 1 << (n % 64)
}
