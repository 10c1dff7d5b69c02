package layout

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime/debug"
	"strings"
	"testing"
)

// deepLayout builds a random layout of small extents (1 often) and strides
// (0 and negatives included), up to 12 modes a level and depth levels.
func deepLayout(r *rand.Rand, depth int) (IntTuple, IntTuple) {
	if depth == 0 || r.Intn(4) == 0 {
		ext := []int{1, 1, 1, 2, 3, 4}[r.Intn(6)]
		str := []int{0, 1, 2, 3, 5, 8, -1, -3}[r.Intn(8)]
		return Int(ext), Int(str)
	}
	n := 1 + r.Intn(12)
	if depth > 3 {
		n = 1 + r.Intn(2) // deep but narrow, so sizes stay small
	}
	var sh, st []IntTuple
	for i := 0; i < n; i++ {
		a, b := deepLayout(r, depth-1)
		sh, st = append(sh, a), append(st, b)
	}
	return Tuple(sh...), Tuple(st...)
}

// TestProbe9DeepLayouts: layouts of rank up to 12, depth up to 10 and
// extents of 1 everywhere print and parse back to the same layout, and the
// algebra's answers are the functions they claim: Coalesce and Filter keep
// the values (Filter the set of nonzero-stride images), Composition(a, b) is
// a after b, a right inverse R has l(R(i)) = i, a left inverse L has
// L(l(i)) = i, a complement's image meets l's only at 0.
func TestProbe9DeepLayouts(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	n := 4000
	if testing.Short() {
		n = 400
	}
	const maxSize = 1 << 12
	checked := 0
	for i := 0; i < n; i++ {
		sh, st := deepLayout(r, 2+r.Intn(9))
		l, err := New(sh, st)
		if err != nil {
			continue
		}
		if l.Size() > maxSize {
			continue
		}
		checked++
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%v: panic %v\n%s", l, p, debug.Stack())
				}
			}()
			probe9Layout(t, l, r)
		}()
	}
	if checked < n/4 {
		t.Fatalf("only %d of %d layouts checked", checked, n)
	}
}

func probe9Layout(t *testing.T, l Layout, r *rand.Rand) {
	t.Helper()
	s := l.String()
	p, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q) of a printed layout: %v", s, err)
	}
	if !p.Equal(l) || p.String() != s {
		t.Fatalf("Parse(%q) = %v, not the layout printed", s, p)
	}
	if it, err := ParseIntTuple(l.Shape().String()); err != nil || !it.Equal(l.Shape()) {
		t.Fatalf("ParseIntTuple(%q) = %v, %v", l.Shape().String(), it, err)
	}
	if d := l.Depth(); d != l.Shape().Depth() {
		t.Fatalf("%v: Depth %d, shape's %d", l, d, l.Shape().Depth())
	}
	vals := valuesOf(l)
	if len(vals) != l.Size() {
		t.Fatalf("%v: %d values, Size %d", l, len(vals), l.Size())
	}
	for i, v := range vals {
		if l.Apply(i) != v || l.Value(i) != v {
			t.Fatalf("%v: Values()[%d] = %d, Apply %d, Value %d", l, i, v, l.Apply(i), l.Value(i))
		}
	}
	if c, err := Coalesce(l); err != nil {
		t.Fatalf("Coalesce(%v): %v", l, err)
	} else {
		sameValues(t, "Coalesce", l, c, vals)
	}
	if f, err := Filter(l); err != nil {
		t.Fatalf("Filter(%v): %v", l, err)
	} else {
		want := map[int]bool{}
		for _, v := range vals {
			want[v] = true
		}
		got := map[int]bool{}
		for _, v := range valuesOf(f) {
			got[v] = true
		}
		if fmt.Sprint(sortedKeys(want)) != fmt.Sprint(sortedKeys(got)) && hasNonNeg(l) {
			t.Fatalf("Filter(%v) = %v: image %v, want %v", l, f, sortedKeys(got), sortedKeys(want))
		}
	}
	// Composition with a random small layout whose image lies in l's domain.
	bsh, bst := deepLayout(r, 2)
	if b, err := New(bsh, bst); err == nil && b.Size() <= 256 && nonNegative(b) && b.Cosize() <= l.Size() {
		c, err := Composition(l, b)
		if err == nil {
			for i := 0; i < b.Size(); i++ {
				if got, want := c.Value(i), l.Value(b.Value(i)); got != want {
					t.Fatalf("Composition(%v, %v) = %v: value %d at %d, a(b(i)) = %d", l, b, c, got, i, want)
				}
			}
		}
	}
	if !nonNegative(l) {
		return
	}
	if ri, err := RightInverse(l); err == nil {
		for i := 0; i < ri.Size(); i++ {
			if got := l.Value(ri.Value(i)); got != i {
				t.Fatalf("RightInverse(%v) = %v: l(R(%d)) = %d", l, ri, i, got)
			}
		}
	}
	if injective(vals) {
		if li, err := LeftInverse(l); err != nil {
			if !errors.Is(err, ErrDivisibility) || errors.Is(err, ErrNotInjective) || !strings.Contains(err.Error(), "is injective but") {
				t.Fatalf("LeftInverse(%v) of an injective layout: %v; want ErrDivisibility saying it is injective", l, err)
			}
		} else {
			for i, v := range vals {
				if got := li.Value(v); got != i {
					t.Fatalf("LeftInverse(%v) = %v: L(l(%d)) = %d", l, li, i, got)
				}
			}
		}
		if co, err := Complement(l); err != nil {
			if errors.Is(err, ErrNotInjective) {
				t.Fatalf("Complement(%v) of an injective layout: %v (ErrNotInjective)", l, err)
			}
		} else {
			img := map[int]bool{}
			for _, v := range vals {
				img[v] = true
			}
			for i := 1; i < co.Size(); i++ {
				if img[co.Value(i)] {
					t.Fatalf("Complement(%v) = %v: its value %d at %d is l's", l, co, co.Value(i), i)
				}
			}
		}
	}
}

func sameValues(t *testing.T, what string, l, m Layout, vals []int) {
	t.Helper()
	if m.Size() != l.Size() {
		t.Fatalf("%s(%v) = %v: size %d, want %d", what, l, m, m.Size(), l.Size())
	}
	for i, v := range vals {
		if m.Value(i) != v {
			t.Fatalf("%s(%v) = %v: value %d at %d, want %d", what, l, m, m.Value(i), i, v)
		}
	}
}

func nonNegative(l Layout) bool {
	for _, s := range l.FlatStride() {
		if s < 0 {
			return false
		}
	}
	return true
}

func hasNonNeg(l Layout) bool { return nonNegative(l) }

func injective(vals []int) bool {
	seen := map[int]bool{}
	for _, v := range vals {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func sortedKeys(m map[int]bool) []int {
	var k []int
	for v := range m {
		k = append(k, v)
	}
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[j] < k[i] {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
	return k
}

// TestProbe9InjectiveMessages: a left inverse or complement of an injective
// layout that breaks CuTe's divisibility condition is ErrDivisibility saying
// so (it was ErrNotInjective claiming (4,4):(5,3) is not injective); a truly
// non-injective layout stays ErrNotInjective naming the shared index.
func TestProbe9InjectiveMessages(t *testing.T) {
	for _, c := range []struct {
		l        string
		kind     error
		contains string
	}{
		{"(4,4):(5,3)", ErrDivisibility, "is injective but stride 5"},
		{"(2,2):(2,3)", ErrDivisibility, "is injective but"},
		{"(3,2):(1,2)", ErrNotInjective, "maps two coordinates to 2"},
	} {
		l := MustParse(c.l)
		for name, f := range map[string]func(Layout) (Layout, error){"LeftInverse": LeftInverse, "Complement": Complement} {
			_, err := f(l)
			if err == nil {
				if name == "Complement" && c.kind == ErrDivisibility || name == "LeftInverse" && c.kind == ErrNotInjective {
					continue // a complement may exist where the left inverse does not; LeftInverse of a non-injective layout is a quasi-inverse
				}
				t.Errorf("%s(%s): no error", name, c.l)
				continue
			}
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("%s(%s): %v; want %v containing %q", name, c.l, err, c.kind, c.contains)
			}
		}
	}
}
