package layout

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// hostileLayout builds a random layout with extents and strides drawn from
// zero, negatives, powers of two up to 2^62 and MaxInt, nested up to depth 3.
func hostileLayout(r *rand.Rand, depth int) (IntTuple, IntTuple) {
	vals := []int{0, 1, 2, 3, 4, 8, -1, -2, -4, 1 << 20, 1 << 31, 1 << 32, 1 << 62, int(^uint(0) >> 1), -(1 << 62)}
	if depth == 0 || r.Intn(3) == 0 {
		return Int(vals[r.Intn(len(vals))]), Int(vals[r.Intn(len(vals))])
	}
	n := r.Intn(4)
	var sh, st []IntTuple
	for i := 0; i < n; i++ {
		a, b := hostileLayout(r, depth-1)
		sh, st = append(sh, a), append(st, b)
	}
	return Tuple(sh...), Tuple(st...)
}

// TestProbe7HostileAlgebra calls the algebra on random layouts with zero,
// negative and overflowing extents and strides: every call returns within a
// second, nothing panics, and a layout any call returns is valid (extents
// >= 1, size and cosize computable).
func TestProbe7HostileAlgebra(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	n := 3000
	if testing.Short() {
		n = 300
	}
	check := func(what string, a, b Layout, f func() (Layout, error)) {
		done := make(chan string, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			l, err := f()
			if err == nil {
				if msg := validLayout(l); msg != "" {
					done <- "returned an invalid layout " + l.String() + ": " + msg
					return
				}
			} else if len(err.Error()) > 2000 {
				done <- fmt.Sprintf("error of %d bytes", len(err.Error()))
				return
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatalf("%s(%v, %v): %s", what, a, b, msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s(%v, %v): no answer in 5 s", what, a, b)
		}
	}
	for i := 0; i < n; i++ {
		s1, d1 := hostileLayout(r, 3)
		s2, d2 := hostileLayout(r, 2)
		a, errA := New(s1, d1)
		b, errB := New(s2, d2)
		if errA != nil && errB != nil {
			continue
		}
		if errA != nil {
			a = MustParse("(4,8):(8,1)")
		}
		if errB != nil {
			b = MustParse("(2,2):(1,4)")
		}
		check("Coalesce", a, b, func() (Layout, error) { return Coalesce(a) })
		check("Filter", a, b, func() (Layout, error) { return Filter(a) })
		check("Complement", a, b, func() (Layout, error) { return Complement(a) })
		check("ComplementTo", a, b, func() (Layout, error) { return ComplementTo(a, b.Shape()) })
		check("RightInverse", a, b, func() (Layout, error) { return RightInverse(a) })
		check("LeftInverse", a, b, func() (Layout, error) { return LeftInverse(a) })
		check("Composition", a, b, func() (Layout, error) { return Composition(a, b) })
		check("LogicalDivide", a, b, func() (Layout, error) { return LogicalDivide(a, b) })
		check("ZippedDivide", a, b, func() (Layout, error) { return ZippedDivide(a, b) })
		check("TiledDivide", a, b, func() (Layout, error) { return TiledDivide(a, b) })
		check("FlatDivide", a, b, func() (Layout, error) { return FlatDivide(a, b) })
		check("LogicalProduct", a, b, func() (Layout, error) { return LogicalProduct(a, b) })
		check("BlockedProduct", a, b, func() (Layout, error) { return BlockedProduct(a, b) })
		check("RakedProduct", a, b, func() (Layout, error) { return RakedProduct(a, b) })
		check("TileToShape", a, b, func() (Layout, error) { return TileToShape(a, b.Shape()) })
		check("LocalPartition", a, b, func() (Layout, error) { l, _, err := LocalPartition(a, b, 1); return l, err })
		check("MakeLayoutTV", a, b, func() (Layout, error) { _, l, err := MakeLayoutTV(a, b); return l, err })
		check("MaxCommonVector", a, b, func() (Layout, error) { _, err := MaxCommonVector(a, b); return MustParse("1:0"), err })
		check("Eval", a, b, func() (Layout, error) { _, err := a.Eval(b.Shape()); return MustParse("1:0"), err })
	}
}

// validLayout says what is wrong with l, or "".
func validLayout(l Layout) string {
	for _, e := range l.FlatShape() {
		if e < 1 {
			return fmt.Sprintf("extent %d", e)
		}
	}
	if _, err := Product(l.Shape()); err != nil {
		return err.Error()
	}
	return ""
}

// TestProbe7HostileParse: hostile strings (deep nesting, huge numbers, odd
// runes, long inputs) give a bounded error or a layout that prints back,
// within a second.
func TestProbe7HostileParse(t *testing.T) {
	inputs := []string{
		strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000),
		strings.Repeat("(", 1000000),
		"(" + strings.Repeat("2,", 100000) + "2)",
		"(" + strings.Repeat("2,", 100) + "2):(" + strings.Repeat("1,", 100) + "1)",
		"99999999999999999999999999:1", "-9223372036854775808:1", "9223372036854775807:9223372036854775807",
		"(2,2):(9223372036854775807,9223372036854775807)",
		"(4294967296,4294967296):(1,4294967296)",
		"\x00", "8:\x00", "8 : 1", "8:1 ", " 8:1", "8:+1", "8:--1", "8::1", "(8,):(1,)", "(,)", "(8:1)",
		"8:1:1", "((8)):((1))", "(8,(4)):(1,4)", "٣:1", "８:1", "8:1\n", "0x10:1", "1e3:1", "_:_", "(_,_):(_,1)",
		"Sw<3,4,3> o 0 o 8:1", "Sw<99,99,99> o 0 o 8:1", "Sw<-1,0,0> o 0 o 8:1", "Sw<3,0,3> o 99999999999999999999 o (8,8):(8,1)",
		"Sw<3,0,3> o -1 o (8,8):(8,1)", "Sw<3,0,3> o 0 o", "Sw<3,0,3>", "Sw<3,0,3> o 0 o Sw<3,0,3> o 0 o 8:1",
	}
	for _, s := range inputs {
		start := time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Parse(%.40q): panic %v", s, p)
				}
			}()
			for name, f := range map[string]func() (string, error){
				"Parse":         func() (string, error) { l, err := Parse(s); return l.String(), err },
				"ParseIntTuple": func() (string, error) { l, err := ParseIntTuple(s); return l.String(), err },
				"ParseComposed": func() (string, error) { l, err := ParseComposed(s); return l.String(), err },
				"ParseSwizzle":  func() (string, error) { l, err := ParseSwizzle(s); return l.String(), err },
			} {
				out, err := f()
				if err != nil {
					if len(err.Error()) > 400 {
						t.Errorf("%s(%.40q): error of %d bytes", name, s, len(err.Error()))
					}
					continue
				}
				if out == "" {
					t.Errorf("%s(%.40q): accepted, prints empty", name, s)
				}
			}
		}()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Parse(%.40q): %v", s, d)
		}
	}
}

// TestProbe7ResultOverflow: a divide or product whose result's size
// overflows is ErrOverflow (LogicalDivide returned the layout, whose Size
// wrapped); a left inverse of a negative stride is ErrInvalid (it returned
// a layout of extent -4).
func TestProbe7ResultOverflow(t *testing.T) {
	a := MustParse("1:0")
	b := MustParse("((4294967296,2,1048576)):((0,3,2147483648))")
	if l, err := LogicalDivide(a, b); !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), "the result") {
		t.Errorf("LogicalDivide(%v, %v) = %v, %v; want ErrOverflow naming the result", a, b, l, err)
	}
	if l, err := LeftInverse(MustParse("8:-4")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stride -4") {
		t.Errorf("LeftInverse(8:-4) = %v, %v; want ErrInvalid naming the stride", l, err)
	}
}
