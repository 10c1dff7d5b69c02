package layout

import (
	"math/rand"
	"testing"
)

// randShape draws a shape of depth <= 2 with extents 1..6 and size <= 256.
func randShape(r *rand.Rand) IntTuple {
	for {
		s := randShapeRec(r, r.Intn(3), true)
		if p, _ := Product(s); p <= 256 {
			return s
		}
	}
}

func randShapeRec(r *rand.Rand, depth int, top bool) IntTuple {
	if depth == 0 || (!top && r.Intn(3) == 0) {
		return Int(1 + r.Intn(6))
	}
	n := 1 + r.Intn(3)
	e := make([]IntTuple, n)
	for i := range e {
		e[i] = randShapeRec(r, depth-1, false)
	}
	return Tuple(e...)
}

// randLayout draws a layout; injective layouts when inj is set (compact,
// permuted or padded strides), anything otherwise.
func randLayout(r *rand.Rand, inj bool) Layout {
	s := randShape(r)
	flat := s.Leaves()
	st := make([]int, len(flat))
	kind := r.Intn(4)
	if inj {
		kind = r.Intn(3)
	}
	switch kind {
	case 0, 1, 2: // compact, permuted, padded
		order := r.Perm(len(flat))
		if kind == 0 {
			for i := range order {
				order[i] = i
			}
		}
		cur := 1
		for _, i := range order {
			st[i] = cur
			cur *= flat[i]
			if kind == 2 {
				cur *= 1 + r.Intn(2)
			}
		}
	default:
		for i := range st {
			st[i] = r.Intn(9)
		}
	}
	k := 0
	return Must(New(s, unflattenLike(s, st, &k)))
}

func unflattenLike(s IntTuple, flat []int, k *int) IntTuple {
	if !s.IsTuple() {
		v := flat[*k]
		*k++
		return Int(v)
	}
	e := make([]IntTuple, s.Len())
	for i := range e {
		e[i] = unflattenLike(s.At(i), flat, k)
	}
	return Tuple(e...)
}

const propertyRounds = 3000

func TestPropertyCoalesce(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, false)
		c, err := Coalesce(a)
		if err != nil {
			t.Fatalf("coalesce(%v): %v", a, err)
		}
		if c.Size() != a.Size() || c.Depth() > 1 {
			t.Fatalf("coalesce(%v) = %v: size or depth", a, c)
		}
		for i := 0; i < a.Size(); i++ {
			if c.Value(i) != a.Value(i) {
				t.Fatalf("coalesce(%v) = %v differs at %d", a, c, i)
			}
		}
		f, err := Filter(a)
		if err != nil {
			t.Fatal(err)
		}
		if f.Cosize() != a.Cosize() && a.Size() > 1 {
			t.Fatalf("filter(%v) = %v changes the cosize", a, f)
		}
	}
}

func TestPropertyComposition(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ok, checked := 0, 0
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, r.Intn(2) == 0)
		b := randLayout(r, r.Intn(2) == 0)
		c, err := Composition(a, b)
		if err != nil {
			continue
		}
		ok++
		if c.Size() != b.Size() || (b.Shape().IsTuple() && c.Rank() != b.Rank()) {
			t.Fatalf("%v o %v = %v: not compatible with the rhs", a, b, c)
		}
		if !admissible(a, b) {
			continue // C++ checks only weak conditions; no promise then
		}
		checked++
		for i := 0; i < b.Size(); i++ {
			if c.Value(i) != a.Value(b.Value(i)) {
				t.Fatalf("%v o %v = %v: differs at %d (%d != %d)", a, b, c, i, c.Value(i), a.Value(b.Value(i)))
			}
		}
	}
	if ok < propertyRounds/10 || checked < propertyRounds/20 {
		t.Errorf("only %d compositions accepted, %d checked", ok, checked)
	}
	t.Logf("%d compositions accepted, %d admissible ones checked value by value", ok, checked)
}

// admissible reports whether b is an admissible right argument of
// composition with a, so that CuTe promises a∘b(c) == a(b(c)): b is
// injective, stays in a's domain, and every mode of b walks the coalesced
// extents of a with the strong divisibility conditions (at each extent one of
// stride and extent divides the other, and so do the remaining and available
// extents). C++ CuTe only checks weak conditions, under which an accepted
// result need not be the function composition.
func admissible(a, b Layout) bool {
	if b.Cosize() > a.Size() || b.Size() > 1<<14 {
		return false
	}
	seen := map[int]bool{}
	for _, v := range valuesOf(b) {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	ext := coalesceX(a).FlatShape()
	shapes, strides := b.FlatShape(), b.FlatStride()
	for k, d := range strides {
		restShape, restStride := shapes[k], abs(d)
		if restStride == 0 {
			continue
		}
		for _, e := range ext[:len(ext)-1] {
			if restStride%e != 0 && e%restStride != 0 {
				return false
			}
			nextShape := (e + restStride - 1) / restStride
			nextStride := (restStride + e - 1) / e
			if nextShape == 1 || restShape == 1 {
				restStride = nextStride
				continue
			}
			if nextShape%restShape != 0 && restShape%nextShape != 0 {
				return false
			}
			restShape /= min(nextShape, restShape)
			restStride = nextStride
		}
	}
	return true
}

func TestPropertyComplement(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, true)
		cot := a.Cosize() + r.Intn(2*a.Cosize()+1)
		c, err := ComplementTo(a, Int(cot))
		if err != nil {
			t.Fatalf("complement(%v, %d): %v", a, cot, err)
		}
		img := map[int]bool{}
		for i := 0; i < a.Size(); i++ {
			img[a.Value(i)] = true
		}
		for i := 1; i < c.Size(); i++ {
			if c.Value(i) <= c.Value(i-1) {
				t.Fatalf("complement(%v, %d) = %v is not ordered", a, cot, c)
			}
			if img[c.Value(i)] {
				t.Fatalf("complement(%v, %d) = %v meets the layout at %d", a, cot, c, c.Value(i))
			}
		}
		fa := Must(Filter(a))
		if fa.Size()*c.Size() < cot {
			t.Fatalf("complement(%v, %d) = %v is too small", a, cot, c)
		}
		// (A, A*) is injective: its left inverse exists.
		if _, err := LeftInverse(Must(MakeLayoutOf(a, c))); err != nil {
			t.Fatalf("(A, complement) = (%v, %v) not injective: %v", a, c, err)
		}
	}
}

func TestPropertyInverses(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, n%2 == 0)
		ri, err := RightInverse(a)
		if err != nil {
			t.Fatalf("right_inverse(%v): %v", a, err)
		}
		for i := 0; i < ri.Size(); i++ {
			if a.Value(ri.Value(i)) != i {
				t.Fatalf("right_inverse(%v) = %v fails at %d", a, ri, i)
			}
		}
		if n%2 == 0 {
			li, err := LeftInverse(a)
			if err != nil {
				t.Fatalf("left_inverse(%v): %v", a, err)
			}
			for i := 0; i < a.Size(); i++ {
				if li.Value(a.Value(i)) != i {
					t.Fatalf("left_inverse(%v) = %v fails at %d", a, li, i)
				}
			}
		}
	}
}

func TestPropertyDivideProduct(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, r.Intn(2) == 0)
		tl := randLayout(r, true)
		if d, err := LogicalDivide(a, tl); err == nil && admissible(a, tl) {
			tile := d.mode(0)
			if tile.Size() != tl.Size() {
				t.Fatalf("logical_divide(%v, %v) = %v: tile size", a, tl, d)
			}
			for i := 0; i < tl.Size(); i++ {
				if tile.Value(i) != a.Value(tl.Value(i)) {
					t.Fatalf("logical_divide(%v, %v) = %v: tile differs at %d", a, tl, d, i)
				}
			}
			if tl.Cosize() == tl.Size() && coalesce(a).FlatShape()[0]%tl.Size() == 0 && d.Size() != a.Size() {
				t.Fatalf("logical_divide(%v, %v) = %v: size %d != %d", a, tl, d, d.Size(), a.Size())
			}
			z, err := ZippedDivide(a, tl)
			if err != nil || z.Size() != d.Size() {
				t.Fatalf("zipped_divide(%v, %v) = %v, %v", a, tl, z, err)
			}
		}
		if p, err := LogicalProduct(a, tl); err == nil {
			if p.Size() != a.Size()*tl.Size() {
				t.Fatalf("logical_product(%v, %v) = %v: size", a, tl, p)
			}
			for i := 0; i < a.Size(); i++ {
				if p.mode(0).Value(i) != a.Value(i) {
					t.Fatalf("logical_product(%v, %v) = %v: block differs", a, tl, p)
				}
			}
		}
		if b, err := BlockedProduct(a, tl); err == nil && b.Size() != a.Size()*tl.Size() {
			t.Fatalf("blocked_product(%v, %v) = %v: size", a, tl, b)
		}
	}
}

func TestPropertyRoundTrips(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	for n := 0; n < propertyRounds; n++ {
		a := randLayout(r, false)
		p, err := Parse(a.String())
		if err != nil || !p.Equal(a) {
			t.Fatalf("Parse(%q) = %v, %v", a.String(), p, err)
		}
		for i := 0; i < a.Size(); i += 1 + r.Intn(5) {
			c, err := Idx2Crd(Int(i), a.Shape(), nil)
			if err != nil {
				t.Fatal(err)
			}
			j, err := Crd2Idx(c, a.Shape(), nil)
			if err != nil || j != i {
				t.Fatalf("crd2idx(idx2crd(%d, %v)) = %d, %v", i, a.Shape(), j, err)
			}
			v, err := a.Eval(c)
			if err != nil || v != a.Value(i) {
				t.Fatalf("%v: Eval(%v) = %d, Value(%d) = %d", a, c, v, i, a.Value(i))
			}
		}
	}
}

func TestErrorsNotPanics(t *testing.T) {
	bad := []string{"(4,2):(1)", "(4,-2):(1,4)", "(0,2):(1,0)", "(4,2):(1,_)", "((4,2):(1,4)", "4:", ":4", "9999999999999999999:1", "(4,4611686018427387904):(1,1)"}
	for _, s := range bad {
		if l, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, l)
		}
	}
	a := Must(Parse("(4,4):(8,2)"))
	if _, err := Composition(a, Tile(7)); err == nil {
		t.Error("composition with a non-dividing tile accepted")
	}
	if _, err := Complement(Must(Parse("(2,2):(1,1)"))); err == nil {
		t.Error("complement of a non-injective layout accepted")
	}
	if _, err := Composition(a, Modes{Tile(2), Tile(2), Tile(2)}); err == nil {
		t.Error("tiler with too many modes accepted")
	}
	big := Must(Parse("(1048576,1048576):(1,1048576)"))
	if _, err := LogicalProduct(big, big); err == nil {
		t.Error("overflowing product accepted")
	}
	if _, err := NewSwizzle(3, 1, 1); err == nil {
		t.Error("invalid swizzle accepted")
	}
}
