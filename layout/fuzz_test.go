package layout

import "testing"

func FuzzParse(f *testing.F) {
	for _, s := range []string{"8:1", "(4,(2,3)):(1,(4,8))", "(4,8)", "((2,2),(3,_)):((1,2),(4,8))", "()", "(-3,2):(1,-1)", "_", "(((1)))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tu, err := ParseIntTuple(s); err == nil {
			u, err := ParseIntTuple(tu.String())
			if err != nil || !u.Equal(tu) {
				t.Fatalf("ParseIntTuple round trip: %q -> %v -> %v, %v", s, tu, u, err)
			}
		}
		l, err := Parse(s)
		if err != nil {
			return
		}
		m, err := Parse(l.String())
		if err != nil || !m.Equal(l) {
			t.Fatalf("Parse round trip: %q -> %v -> %v, %v", s, l, m, err)
		}
		if l.Size() < 1 || l.Cosize() < 1 {
			t.Fatalf("%v: size %d cosize %d", l, l.Size(), l.Cosize())
		}
		// Exercise the algebra on anything that parses: no panics.
		Coalesce(l)
		Filter(l)
		Complement(l)
		RightInverse(l)
		LeftInverse(l)
		l.Flatten()
		if l.Size() <= 1<<12 {
			_ = valuesOf(l)
		}
	})
}

// small reports whether l is small enough to check value by value.
func small(l Layout) bool { return l.Size() <= 1<<12 && l.Cosize() <= 1<<20 }

func FuzzCompositionComplement(f *testing.F) {
	seeds := [][2]string{
		{"(128,64):(64,1)", "(32,8):(1,128)"},
		{"(4,(2,3)):(1,(4,8))", "(4,2):(2,1)"},
		{"(6,2):(8,2)", "(4,3):(3,1)"},
		{"((4,2),8):((2,16),1)", "8:2"},
		{"(2,4):(3,7)", "3:1"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], 64)
	}
	f.Fuzz(func(t *testing.T, as, bs string, cot int) {
		a, err := Parse(as)
		if err != nil || !small(a) {
			return
		}
		b, err := Parse(bs)
		if err != nil || !small(b) {
			return
		}
		if c, err := Composition(a, b); err == nil {
			if c.Size() != b.Size() {
				t.Fatalf("%v o %v = %v: size", a, b, c)
			}
			// Function composition is promised on the domain of a only.
			if admissible(a, b) {
				for i := 0; i < b.Size(); i++ {
					if c.Value(i) != a.Value(b.Value(i)) {
						t.Fatalf("%v o %v = %v differs at %d", a, b, c, i)
					}
				}
			}
		}
		LogicalDivide(a, b)
		ZippedDivide(a, b)
		LogicalProduct(a, b)
		BlockedProduct(a, b)
		RakedProduct(a, b)
		if cot < 1 || cot > 1<<20 {
			cot = a.Cosize()
		}
		c, err := ComplementTo(a, Int(cot))
		if err != nil || !small(c) {
			return
		}
		img := map[int]bool{}
		for i := 0; i < a.Size(); i++ {
			img[a.Value(i)] = true
		}
		for i := 1; i < c.Size(); i++ {
			if c.Value(i) <= c.Value(i-1) {
				t.Fatalf("complement(%v, %d) = %v not ordered", a, cot, c)
			}
			if img[c.Value(i)] {
				t.Fatalf("complement(%v, %d) = %v meets the layout", a, cot, c)
			}
		}
	})
}
