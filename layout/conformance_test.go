package layout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestConformance checks every case of every *.json vector file in
// $LAYOUT_VECTORS (default testdata/conformance). See
// ../shared/testdata/layout/README.md for the schema.
func TestConformance(t *testing.T) {
	dir := vectorDir(os.Getenv("LAYOUT_VECTORS"))
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vector files in %s", dir)
	}
	sort.Strings(files)
	total, failures := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Op    string `json:"op"`
			Cases []struct {
				Args   []any `json:"args"`
				Result any   `json:"result"`
				Error  any   `json:"error"`
			} `json:"cases"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		op, ok := conformanceOps[file.Op]
		if !ok {
			t.Errorf("%s: unknown op %q", filepath.Base(f), file.Op)
			failures++
			continue
		}
		before := failures
		for i, c := range file.Cases {
			total++
			got, err := runCase(op, c.Args)
			switch {
			case c.Error != nil:
				if err == nil {
					failures++
					t.Errorf("%s case %d: args %s: want error (%v), got %s", file.Op, i, js(c.Args), c.Error, js(got))
				}
			case err != nil:
				failures++
				t.Errorf("%s case %d: args %s: unexpected error %v", file.Op, i, js(c.Args), err)
			default:
				if js(got) != js(c.Result) {
					failures++
					t.Errorf("%s case %d: args %s:\n  want %s\n  got  %s", file.Op, i, js(c.Args), js(c.Result), js(got))
				}
			}
		}
		t.Logf("%s (%s): %d cases, %d failures", filepath.Base(f), file.Op, len(file.Cases), failures-before)
	}
	t.Logf("conformance: %d cases, %d failures", total, failures)
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// runCase converts a failure panic raised by a decoder into an error.
func runCase(op func(args []any) any, args []any) (got any, err error) {
	err = catch(func() { got = op(args) })
	return got, err
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(&Error{ErrInvalid, err.Error()})
	}
	return v
}

func argc(args []any, n ...int) {
	for _, k := range n {
		if len(args) == k {
			return
		}
	}
	fail(ErrInvalid, "bad argument count %d", len(args))
}

func jInt(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		fail(ErrInvalid, "want an integer, got %v", v)
	}
	i, err := n.Int64()
	if err != nil {
		fail(ErrInvalid, "bad integer %v", v)
	}
	return int(i)
}

func jTuple(v any) IntTuple {
	switch v := v.(type) {
	case nil:
		return Hole
	case json.Number:
		return Int(jInt(v))
	case []any:
		e := make([]IntTuple, len(v))
		for i, x := range v {
			e[i] = jTuple(x)
		}
		return tup(e)
	}
	fail(ErrInvalid, "not an IntTuple: %v", v)
	return IntTuple{}
}

func jLayout(v any) Layout {
	m, ok := v.(map[string]any)
	if !ok {
		fail(ErrInvalid, "not a layout: %v", v)
	}
	return must(New(jTuple(m["shape"]), jTuple(m["stride"])))
}

func jTiler(v any) Tiler {
	switch v := v.(type) {
	case nil:
		return nil
	case json.Number:
		return Tile(jInt(v))
	case []any:
		m := make(Modes, len(v))
		for i, x := range v {
			m[i] = jTiler(x)
		}
		return m
	case map[string]any:
		return jLayout(v)
	}
	fail(ErrInvalid, "not a tiler: %v", v)
	return nil
}

func jSwizzle(v any) Swizzle {
	m, ok := v.(map[string]any)
	if !ok {
		fail(ErrInvalid, "not a swizzle: %v", v)
	}
	a, ok := m["swizzle"].([]any)
	if !ok || len(a) != 3 {
		fail(ErrInvalid, "not a swizzle: %v", v)
	}
	return must(NewSwizzle(jInt(a[0]), jInt(a[1]), jInt(a[2])))
}

func tupleJSON(t IntTuple) any {
	switch t.kind {
	case kindInt:
		return t.val
	case kindHole:
		return nil
	}
	out := make([]any, len(t.elems))
	for i, e := range t.elems {
		out[i] = tupleJSON(e)
	}
	return out
}

func layoutJSON(l Layout) any {
	return map[string]any{"shape": tupleJSON(l.shape), "stride": tupleJSON(l.stride)}
}

func layoutOp(f func(Layout) (Layout, error)) func([]any) any {
	return func(a []any) any {
		argc(a, 1)
		return layoutJSON(must(f(jLayout(a[0]))))
	}
}

func tilerOp(f func(Layout, Tiler) (Layout, error)) func([]any) any {
	return func(a []any) any {
		argc(a, 2)
		return layoutJSON(must(f(jLayout(a[0]), jTiler(a[1]))))
	}
}

func pairOp(f func(Layout, Layout) (Layout, error)) func([]any) any {
	return func(a []any) any {
		argc(a, 2)
		return layoutJSON(must(f(jLayout(a[0]), jLayout(a[1]))))
	}
}

func profileOp(f func(Layout) (Layout, error), g func(Layout, IntTuple) (Layout, error)) func([]any) any {
	return func(a []any) any {
		argc(a, 1, 2)
		if len(a) == 1 {
			return layoutJSON(must(f(jLayout(a[0]))))
		}
		return layoutJSON(must(g(jLayout(a[0]), jTuple(a[1]))))
	}
}

var conformanceOps = map[string]func([]any) any{
	"size":   func(a []any) any { argc(a, 1); return jLayout(a[0]).Size() },
	"cosize": func(a []any) any { argc(a, 1); return jLayout(a[0]).Cosize() },
	"rank":   func(a []any) any { argc(a, 1); return jLayout(a[0]).Rank() },
	"depth":  func(a []any) any { argc(a, 1); return jLayout(a[0]).Depth() },
	"flatten_layout": func(a []any) any {
		argc(a, 1)
		return layoutJSON(jLayout(a[0]).Flatten())
	},
	"layout_values": func(a []any) any { argc(a, 1); return valuesOf(jLayout(a[0])) },
	"product":       func(a []any) any { argc(a, 1); return must(Product(jTuple(a[0]))) },
	"tuple_max":     func(a []any) any { argc(a, 1); return must(Max(jTuple(a[0]))) },
	"inner_product": func(a []any) any { argc(a, 2); return must(InnerProduct(jTuple(a[0]), jTuple(a[1]))) },
	"shape_div": func(a []any) any {
		argc(a, 2)
		return tupleJSON(must(ShapeDiv(jTuple(a[0]), jTuple(a[1]))))
	},
	"prefix_product": func(a []any) any {
		argc(a, 1, 2)
		var init []IntTuple
		if len(a) == 2 {
			init = append(init, jTuple(a[1]))
		}
		return tupleJSON(must(PrefixProduct(jTuple(a[0]), init...)))
	},
	"crd2idx": func(a []any) any {
		argc(a, 2, 3)
		var st *IntTuple
		if len(a) == 3 {
			s := jTuple(a[2])
			st = &s
		}
		return must(Crd2Idx(jTuple(a[0]), jTuple(a[1]), st))
	},
	"idx2crd": func(a []any) any {
		argc(a, 2, 3)
		var st *IntTuple
		if len(a) == 3 {
			s := jTuple(a[2])
			st = &s
		}
		return tupleJSON(must(Idx2Crd(jTuple(a[0]), jTuple(a[1]), st)))
	},
	"slice_": func(a []any) any { argc(a, 2); return tupleJSON(must(Slice(jTuple(a[0]), jTuple(a[1])))) },
	"slice_and_offset": func(a []any) any {
		argc(a, 2)
		l, off, err := SliceAndOffset(jTuple(a[0]), jLayout(a[1]))
		must(0, err)
		return []any{layoutJSON(l), off}
	},
	"coalesce":    profileOp(Coalesce, CoalesceProfile),
	"filter":      profileOp(Filter, FilterProfile),
	"composition": tilerOp(Composition),
	"complement": func(a []any) any {
		argc(a, 1, 2)
		if len(a) == 1 {
			return layoutJSON(must(Complement(jLayout(a[0]))))
		}
		return layoutJSON(must(ComplementTo(jLayout(a[0]), jTuple(a[1]))))
	},
	"right_inverse":   layoutOp(RightInverse),
	"left_inverse":    layoutOp(LeftInverse),
	"logical_divide":  tilerOp(LogicalDivide),
	"zipped_divide":   tilerOp(ZippedDivide),
	"tiled_divide":    tilerOp(TiledDivide),
	"flat_divide":     tilerOp(FlatDivide),
	"logical_product": tilerOp(LogicalProduct),
	"zipped_product":  tilerOp(ZippedProduct),
	"tiled_product":   tilerOp(TiledProduct),
	"flat_product":    tilerOp(FlatProduct),
	"blocked_product": pairOp(BlockedProduct),
	"raked_product":   pairOp(RakedProduct),
	"max_common_vector": func(a []any) any {
		argc(a, 2)
		return must(MaxCommonVector(jLayout(a[0]), jLayout(a[1])))
	},
	"tile_to_shape": func(a []any) any {
		argc(a, 2)
		return layoutJSON(must(TileToShape(jLayout(a[0]), jTuple(a[1]))))
	},
	"swizzle": func(a []any) any {
		argc(a, 2)
		return jSwizzle(a[0]).Apply(jInt(a[1]))
	},
	"composed_layout": func(a []any) any {
		argc(a, 2)
		m, ok := a[0].(map[string]any)
		if !ok {
			fail(ErrInvalid, "not a composed layout")
		}
		var outer IndexFunc
		if o, ok := m["outer"].(map[string]any); ok {
			if _, ok := o["swizzle"]; ok {
				outer = jSwizzle(o)
			} else {
				outer = jLayout(o)
			}
		} else {
			fail(ErrInvalid, "bad outer")
		}
		c := ComposedLayout{Outer: outer, Offset: jInt(m["offset"]), Inner: jLayout(m["inner"])}
		return must(c.Eval(jTuple(a[1])))
	},
}

// vectorDir resolves $LAYOUT_VECTORS: empty means the package's own vectors; a relative
// path is taken from the module root, where `go test ./layout` is typed (go test itself
// runs in the package directory), unless it exists from the package directory.
func vectorDir(env string) string {
	switch {
	case env == "":
		return filepath.Join("testdata", "conformance")
	case filepath.IsAbs(env):
		return env
	}
	if _, err := os.Stat(env); err == nil {
		return env
	}
	return filepath.Join("..", env)
}
