package layout

// This file holds CuTe's layout algebra: coalesce, filter, composition,
// complement and the inverses. Internals report failures with fail; the
// exported functions turn them into errors.

import "fmt"

// makeLayout concatenates layouts as modes of a new layout (CuTe's
// make_layout(L0, L1, ...)).
func makeLayout(ls ...Layout) Layout {
	s, d := pair(len(ls))
	for i, l := range ls {
		s[i], d[i] = l.shape, l.stride
	}
	return mk(tup(s), tup(d))
}

// MakeLayoutOf returns the layout whose modes are the given layouts (CuTe's
// make_layout(a, b, ...)); the error says when a mode is not a layout New would make or the
// result's size or cosize does not fit (the layout is returned either way).
func MakeLayoutOf(modes ...Layout) (Layout, error) {
	l := makeLayout(modes...)
	return l, catch(func() { l.validate() })
}

// flatInts returns the leaves of shape and stride.
func (l Layout) flatInts() ([]int, []int) {
	return l.shape.appendInts(nil), l.stride.appendInts(nil)
}

// pair returns two slices of length n sharing one allocation.
func pair(n int) ([]IntTuple, []IntTuple) {
	b := make([]IntTuple, 2*n)
	return b[:n:n], b[n:]
}

func fromFlat(s, d []int) Layout {
	if len(s) == 1 {
		return mk(Int(s[0]), Int(d[0]))
	}
	ss, dd := pair(len(s))
	for i := range s {
		ss[i], dd[i] = Int(s[i]), Int(d[i])
	}
	return mk(tup(ss), tup(dd))
}

// bwCoalesce is CuTe's detail::bw_coalesce: walk the flat modes os/od from
// index i down to 0 onto the front of the result, which starts as the
// integral mode ns:nd.
func bwCoalesce(os, od []int, i int, ns, nd int) Layout {
	var bs, bd [16]int
	rs, rd := bwCoalesceFlat(os, od, i, ns, nd, bs[:0], bd[:0])
	return fromFlat(rs, rd)
}

// bwCoalesceFlat is bwCoalesce returning the flat modes (front to back) in
// the given buffers; one mode means an integral layout.
func bwCoalesceFlat(os, od []int, i int, ns, nd int, rs, rd []int) ([]int, []int) {
	// rs/rd hold the result modes back to front: the front is the last entry.
	rs, rd = append(rs[:0], ns), append(rd[:0], nd)
	isTuple := false
	for ; i >= 0; i-- {
		s, d := os[i], od[i]
		if s == 1 {
			continue
		}
		if !isTuple && rs[0] == 1 {
			rs[0], rd[0] = s, d
			continue
		}
		f := len(rs) - 1
		if mul(s, d) == rd[f] {
			rs[f], rd[f] = mul(s, rs[f]), d
			continue
		}
		rs, rd = append(rs, s), append(rd, d)
		isTuple = true
	}
	if !isTuple {
		if rs[0] == 1 {
			rd[0] = 0
		}
		return rs, rd
	}
	for x, y := 0, len(rs)-1; x < y; x, y = x+1, y-1 {
		rs[x], rs[y] = rs[y], rs[x]
		rd[x], rd[y] = rd[y], rd[x]
	}
	return rs, rd
}

func coalesce(l Layout) Layout {
	var bs, bd [16]int
	s, d := l.shape.appendInts(bs[:0]), l.stride.appendInts(bd[:0])
	n := len(s)
	if n == 0 {
		return mk(Int(1), Int(0))
	}
	return bwCoalesce(s, d, n-2, s[n-1], d[n-1])
}

// coalesceXFlat is coalesceX returning flat modes in the given buffers.
func coalesceXFlat(l Layout, rs, rd []int) ([]int, []int) {
	var bs, bd [16]int
	s, d := l.shape.appendInts(bs[:0]), l.stride.appendInts(bd[:0])
	n := len(s)
	if n == 0 {
		fail(ErrInvalid, "empty layout %v", l)
	}
	if s[n-1] == 1 {
		return bwCoalesceFlat(s, d, n-2, 2, d[n-1], rs, rd)
	}
	return bwCoalesceFlat(s, d, n-2, s[n-1], d[n-1], rs, rd)
}

// coalesceX is CuTe's detail::coalesce_x: like coalesce but it preserves the
// function outside the domain too.
func coalesceX(l Layout) Layout {
	var bs, bd [16]int
	s, d := l.shape.appendInts(bs[:0]), l.stride.appendInts(bd[:0])
	n := len(s)
	if n == 0 {
		fail(ErrInvalid, "empty layout %v", l)
	}
	if s[n-1] == 1 {
		return bwCoalesce(s, d, n-2, 2, d[n-1])
	}
	return bwCoalesce(s, d, n-2, s[n-1], d[n-1])
}

// byProfile applies f to the first len(profile) modes of l (with the
// matching profile element) and keeps the remaining modes (CuTe's
// transform_layout over a tuple profile).
func byProfile(l Layout, profile IntTuple, f func(Layout, IntTuple) Layout) Layout {
	n := len(profile.elems)
	if n > l.Rank() {
		fail(ErrRank, "profile %v has more modes than %v", profile, l)
	}
	r := l.Rank()
	modes := make([]Layout, r)
	for i := 0; i < r; i++ {
		if i < n {
			modes[i] = f(l.mode(i), profile.elems[i])
		} else {
			modes[i] = l.mode(i)
		}
	}
	return makeLayout(modes...)
}

func coalesceProfile(l Layout, profile IntTuple) Layout {
	if profile.kind == kindTuple {
		return byProfile(l, profile, coalesceProfile)
	}
	return coalesce(l)
}

// Coalesce simplifies l by flattening it and merging modes that can be
// merged, keeping the function on the domain and the size. The result has
// depth <= 1; 1:0 when everything has extent 1.
func Coalesce(l Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return coalesce(l), nil
}

// CoalesceProfile coalesces l by mode: a tuple profile applies to the first
// modes of l (recursively), the remaining modes are kept; an integer
// profile coalesces the whole layout.
func CoalesceProfile(l Layout, profile IntTuple) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return coalesceProfile(l, profile), nil
}

func filterZeros(l Layout) Layout {
	var f func(s, d IntTuple) IntTuple
	f = func(s, d IntTuple) IntTuple {
		if s.kind != kindTuple {
			if d.val == 0 {
				return Int(1)
			}
			return s
		}
		out := make([]IntTuple, len(s.elems))
		for i := range s.elems {
			out[i] = f(s.elems[i], d.elems[i])
		}
		return tup(out)
	}
	return mk(f(l.shape, l.stride), l.stride)
}

func filter(l Layout) Layout { return coalesce(filterZeros(l)) }

func filterProfile(l Layout, profile IntTuple) Layout {
	if profile.kind == kindTuple {
		return byProfile(l, profile, filterProfile)
	}
	return filter(l)
}

// Filter removes the stride-0 and extent-1 modes of l and coalesces it.
func Filter(l Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return filter(l), nil
}

// FilterProfile filters l by mode, like CoalesceProfile.
func FilterProfile(l Layout, profile IntTuple) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return filterProfile(l, profile), nil
}

// composeWith is CuTe's composition(a, rs:rd) for a layout right-hand side.
func composeWith(a Layout, rs, rd IntTuple) Layout {
	var bs, bd [16]int
	ls, ld := coalesceXFlat(a, bs[:0], bd[:0])
	return compositionImpl(ls, ld, rs, rd)
}

// compositionImpl is CuTe's detail::composition_impl. ls:ld is the
// coalesced left-hand side as flat modes (one mode: integral).
func compositionImpl(ls, ld []int, rs, rd IntTuple) Layout {
	if rs.kind == kindTuple {
		if rd.kind != kindTuple || len(rd.elems) != len(rs.elems) {
			fail(ErrRank, "composition: shape %v and stride %v are not congruent", rs, rd)
		}
		n := len(rs.elems)
		ss, dd := pair(n)
		for i := 0; i < n; i++ {
			m := compositionImpl(ls, ld, rs.elems[i], rd.elems[i])
			ss[i], dd[i] = m.shape, m.stride
		}
		return mk(tup(ss), tup(dd))
	}
	if rd.val == 0 {
		return mk(rs, rd)
	}
	if len(ls) == 1 {
		return mk(rs, Int(mul(rd.val, ld[0])))
	}
	R := len(ls)
	restShape, restStride := rs.val, rd.val
	var bufS, bufD [8]int
	resS, resD := bufS[:0], bufD[:0]
	for i := 0; i < R-1; i++ {
		cs, cd := ls[i], ld[i]
		if cs <= 0 || restShape <= 0 {
			fail(ErrInvalid, "composition: non-positive extent")
		}
		if !(restStride%cs == 0 || restStride < cs) {
			fail(ErrDivisibility, "composition: stride %d is not divisible by extent %d (stride divisibility condition)", restStride, cs)
		}
		nextShape := ceilDivInt(cs, abs(restStride))
		nextStride := ceilDivInt(abs(restStride), cs) * signum(restStride)
		if nextShape == 1 || restShape == 1 {
			restStride = nextStride
			continue
		}
		newShape := min(nextShape, restShape)
		if restShape%newShape != 0 {
			fail(ErrDivisibility, "composition: extent %d is not divisible by %d (shape divisibility condition)", restShape, newShape)
		}
		resS = append(resS, newShape)
		resD = append(resD, mul(restStride, cd))
		restShape /= newShape
		restStride = nextStride
	}
	if restShape != 1 || len(resS) == 0 {
		resS = append(resS, restShape)
		resD = append(resD, mul(restStride, ld[R-1]))
	}
	return fromFlat(resS, resD)
}

// Tiler is the second argument of Composition and of the divides and
// products. It is one of:
//   - a Layout;
//   - Tile(n), meaning the layout n:1;
//   - nil (CuTe's "_"): leave this mode alone;
//   - Modes{...}: one tiler per mode of the first argument.
type Tiler interface{ isTiler() }

// Tile(n) is the tiler n:1.
type Tile int

// Modes is a by-mode tiler: element i applies to mode i. A nil element
// leaves its mode alone.
type Modes []Tiler

func (Layout) isTiler() {}
func (Tile) isTiler()   {}
func (Modes) isTiler()  {}

// TilerOf converts an IntTuple to a tiler: an integer n is Tile(n), a tuple
// is Modes of its elements, a hole is nil.
func TilerOf(t IntTuple) Tiler {
	switch t.kind {
	case kindInt:
		return Tile(t.val)
	case kindHole:
		return nil
	}
	m := make(Modes, len(t.elems))
	for i, e := range t.elems {
		m[i] = TilerOf(e)
	}
	return m
}

func tileLayout(n Tile) Layout {
	if n < 1 {
		fail(ErrInvalid, "tile size %d must be >= 1", int(n))
	}
	if n == 1 {
		return mk(Int(1), Int(0))
	}
	return mk(Int(int(n)), Int(1))
}

func composition(a Layout, t Tiler) Layout {
	switch t := t.(type) {
	case nil:
		return a
	case Modes:
		if len(t) > a.Rank() {
			fail(ErrRank, "composition: tiler has %d modes, layout %v has %d", len(t), a, a.Rank())
		}
		modes := make([]Layout, len(t))
		for i := range t {
			modes[i] = composition(a.mode(i), t[i])
		}
		return makeLayout(modes...)
	case Tile:
		if t < 1 {
			fail(ErrInvalid, "tile size %d must be >= 1", int(t))
		}
		return composeWith(a, Int(int(t)), Int(1))
	case Layout:
		return composeWith(a, t.shape, t.stride)
	}
	fail(ErrInvalid, "unknown tiler %T", t)
	return Layout{}
}

// Composition returns a ∘ t (CuTe's composition): for a Layout t,
// R(c) = a(t(c)) for every coordinate c of t, and R has t's shape profile.
// A by-mode tiler composes mode i of a with t[i] and drops the modes of a it
// does not cover (as C++ CuTe does).
//
// R(c) = a(t(c)) holds where each stride of t divides, or is divided by, the
// extents of a it steps across (pycute's divisibility condition), and t is
// injective. Like C++ CuTe, whose answers the conformance vectors pin,
// Composition checks a weaker condition: it also takes a stride below an
// extent that it does not divide, and then R follows a only while t's images
// stay within that extent. (4,5):(3,100) ∘ 4:3 is (2,2):(9,100), whose value
// at 2 is 100 where a(t(2)) = a(6) = 106; pycute refuses it.
func Composition(a Layout, t Tiler) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkArgs(a, t)
	return composition(a, t), nil
}

// complementImpl is CuTe's detail::complement on a filtered layout.
func complementImpl(fl Layout, cotarget IntTuple) Layout {
	if fl.stride.kind == kindInt && fl.stride.val == 0 {
		p := product(cotarget)
		if p == 1 {
			return mk(Int(1), Int(0))
		}
		return mk(Int(p), Int(1))
	}
	var b1, b2, b3, b4 [16]int
	shape, stride := fl.shape.appendInts(b1[:0]), fl.stride.appendInts(b2[:0])
	R := len(shape)
	resS := b3[:0]
	resD := append(b4[:0], 1)
	for i := 0; i < R-1; i++ {
		mi := 0
		for k := 1; k < len(stride); k++ {
			if stride[k] < stride[mi] {
				mi = k
			}
		}
		minStride := stride[mi]
		if resD[i] == 0 {
			fail(ErrInvalid, "complement: zero extent in %v", fl)
		}
		newShape := minStride / resD[i]
		newStride := mul(minStride, shape[mi])
		if newShape <= 0 {
			failInjective(fl, "complement", fmt.Sprintf("stride %d is below %d, the span of the smaller strides", minStride, resD[i]))
		}
		shape = append(shape[:mi], shape[mi+1:]...)
		stride = append(stride[:mi], stride[mi+1:]...)
		resS = append(resS, newShape)
		resD = append(resD, newStride)
	}
	if resD[R-1] == 0 {
		fail(ErrInvalid, "complement: zero extent in %v", fl)
	}
	newShape := stride[0] / resD[R-1]
	if newShape <= 0 {
		failInjective(fl, "complement", fmt.Sprintf("stride %d is below %d, the span of the smaller strides", stride[0], resD[R-1]))
	}
	resS = append(resS, newShape)
	newStride := mul(stride[0], shape[0])
	restShape := ceilDivProduct(cotarget, newStride)
	restStride := newStride
	if restShape == 1 {
		restStride = 0
	}
	resS = append(resS, restShape)
	resD = append(resD, restStride)
	return coalesceFlat(resS, resD)
}

// coalesceFlat is coalesce of the flat layout s:d.
func coalesceFlat(s, d []int) Layout {
	n := len(s)
	return bwCoalesce(s, d, n-2, s[n-1], d[n-1])
}

// ceilDivProduct is product(ceil_div(a, b)) without building the tuple.
func ceilDivProduct(a IntTuple, b int) int {
	if a.kind != kindTuple {
		checkInt(a)
		return ceilDivInt(a.val, b)
	}
	p := 1
	for _, e := range a.elems {
		p = mul(p, ceilDivProduct(e, b))
		b = ceilDivInt(b, product(e))
	}
	return p
}

// Complement returns the complement of l with respect to its cosize: the
// ordered layout of the indices "between" the images of l, so that
// (l, Complement(l)) is a bijection onto a range (CuTe's complement).
func Complement(l Layout) (Layout, error) {
	var r Layout
	err := catch(func() {
		checkLayoutArg("layout", l)
		fl := filter(l)
		r = complementImpl(fl, Int(fl.cosize()))
	})
	return r, err
}

// ComplementTo returns the complement of l with respect to the cotarget
// (an integer, or a shape whose extents are covered in order).
func ComplementTo(l Layout, cotarget IntTuple) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	checkLayoutArg("layout", l)
	return complementTo(l, cotarget), nil
}

func complementTo(l Layout, cotarget IntTuple) Layout {
	checkExtents("complement: cotarget", cotarget)
	return complementImpl(filter(l), cotarget)
}

// sortByStride returns the mode indices ordered by stride the way C++ CuTe
// does (an exchange sort on the stride keys).
func sortByStride(stride []int) []int {
	n := len(stride)
	keys := append([]int(nil), stride...)
	vals := make([]int, n)
	for i := range vals {
		vals[i] = i
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
				vals[i], vals[j] = vals[j], vals[i]
			}
		}
	}
	return vals
}

func prefixProducts(shape []int) []int {
	p := make([]int, len(shape)+1)
	p[0] = 1
	for i, s := range shape {
		p[i+1] = mul(p[i], s)
	}
	return p
}

func rightInverse(l Layout) Layout {
	shape, stride := coalesce(l).flatInts()
	pre := prefixProducts(shape)
	resS := []int{1}
	resD := []int{0}
	curr := 1
	for _, i := range sortByStride(stride) {
		if stride[i] == curr {
			resS = append(resS, shape[i])
			resD = append(resD, pre[i])
			curr = mul(shape[i], stride[i])
		}
	}
	return coalesceFlat(resS, resD)
}

// RightInverse returns R such that l(R(i)) == i for all i < size(R), with R
// as large as possible (CuTe's right_inverse).
func RightInverse(l Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return rightInverse(l), nil
}

// failInjective fails op on l, whose strides break op's condition (why):
// ErrNotInjective when l maps two coordinates to one index, else (an
// injective l of another form, such as (4,4):(5,3)) ErrDivisibility.
func failInjective(l Layout, op, why string) {
	const limit = 1 << 16 // layouts checked by enumeration
	if size, err := Product(l.shape); err == nil && size <= limit {
		seen := make(map[int]bool, size)
		for i := 0; i < size; i++ {
			v := l.Apply(i)
			if seen[v] {
				fail(ErrNotInjective, "%s: %v is not injective (it maps two coordinates to %d)", op, l, v)
			}
			seen[v] = true
		}
		fail(ErrDivisibility, "%s: %v is injective but %s (CuTe's divisibility condition)", op, l, why)
	}
	fail(ErrNotInjective, "%s: %v is not injective or %s (CuTe's divisibility condition)", op, l, why)
}

func leftInverse(l Layout) Layout {
	shape, stride := coalesce(l).flatInts()
	pre := prefixProducts(shape)
	order := sortByStride(stride)
	resS := []int{}
	resD := []int{0}
	size := 1
	for _, i := range order {
		if stride[i] == 0 {
			continue
		}
		if stride[i] < 0 {
			fail(ErrInvalid, "left_inverse: %v has stride %d (a left inverse needs strides >= 0)", l, stride[i])
		}
		if stride[i]%size != 0 {
			failInjective(l, "left_inverse", fmt.Sprintf("stride %d is not a multiple of %d, the stride below it", stride[i], size))
		}
		resS = append(resS, stride[i]/size)
		size = mul(size, stride[i]/size)
		resD = append(resD, pre[i])
	}
	resS = append(resS, shape[order[len(order)-1]])
	return coalesceFlat(resS, resD)
}

// LeftInverse returns R such that R(l(i)) == i for all i < size(l) when l
// is injective (CuTe's left_inverse, a quasi-inverse otherwise: modes that
// l never reaches map to 0).
func LeftInverse(l Layout) (result Layout, err error) {
	defer recoverLayout(&result, &err)
	return leftInverse(l), nil
}

// MaxCommonVector returns the largest N such that a and b map the first N
// indices of b's inverse to the same contiguous elements (CuTe's
// max_common_vector); it is at least 1.
func MaxCommonVector(a, b Layout) (int, error) {
	var r int
	err := catch(func() {
		c := coalesce(composition(a, rightInverse(b)))
		r = 1
		if c.stride.At(0).kind == kindInt && c.stride.At(0).val == 1 {
			r = c.shape.At(0).val
		}
	})
	return r, err
}

// checkExtents fails unless every leaf of t is an integer >= 1; what names
// the operand (a target shape, a cotarget, a tiler).
func checkExtents(what string, t IntTuple) {
	var buf [16]int
	if t.hasHole() {
		fail(ErrInvalid, "%s %v contains _ (extents must be integers >= 1)", what, t)
	}
	for _, s := range t.appendInts(buf[:0]) {
		if s < 1 {
			fail(ErrInvalid, "%s %v has extent %d (extents must be >= 1)", what, t, s)
		}
	}
}

// checkLayoutArg fails unless every extent of l is >= 1 (the zero Layout,
// 0:0, is not a layout); what names the operand.
func checkLayoutArg(what string, l Layout) {
	var buf [16]int
	for _, s := range l.shape.appendInts(buf[:0]) {
		if s < 1 {
			fail(ErrInvalid, "%s %v has extent %d (extents must be >= 1)", what, l, s)
		}
	}
}

// checkArgs checks the layout a and the Layouts inside the tiler t (Tile
// sizes are checked where they are used).
func checkArgs(a Layout, t Tiler) {
	checkLayoutArg("layout", a)
	checkTilerArg(t)
}

func checkTilerArg(t Tiler) {
	switch t := t.(type) {
	case Layout:
		checkLayoutArg("tiler", t)
	case Modes:
		for _, m := range t {
			checkTilerArg(m)
		}
	}
}
