package dsl

// Contiguous reports whether the tensor's elements, in colexicographic order, are
// consecutive in memory (element i at offset i): what a bulk copy of Size() elements from
// its first address reads. Swizzled, identity and register tensors are not.
func (t Tensor) Contiguous() bool {
	if t.swz != nil || t.ident || t.regs != nil || t.k == nil {
		return false
	}
	want := int64(1)
	for _, m := range t.modes {
		for _, l := range m {
			if l.shape == 1 {
				continue
			}
			if !l.stride.static() || l.stride.c != want {
				return false
			}
			want *= int64(l.shape)
		}
	}
	return true
}
