package kernels

import (
	"fmt"
	"io"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestEveryVariantBuilds builds every kernel for every dtype and supported target.
func TestEveryVariantBuilds(t *testing.T) {
	for _, s := range All() {
		for _, dt := range s.DTypes {
			for _, tg := range s.Targets {
				if _, err := s.Build(Config{Target: tg, DType: dt}); err != nil {
					t.Errorf("%s %s %s: %v", s.Name, dt, tg, err)
				}
			}
		}
	}
}

func TestLookupErrors(t *testing.T) {
	if _, err := Lookup("nosuch"); err == nil {
		t.Fatal("unknown kernel accepted")
	}
	s, _ := Lookup("vector_add")
	if _, err := s.Build(Config{Target: ptx.SM90, DType: ptx.S8}); err == nil {
		t.Fatal("unsupported dtype accepted")
	}
}

// BenchmarkBuildAndPrint measures building and printing each library kernel (sm_90, its
// first dtype): the DSL's compile time.
func BenchmarkBuildAndPrint(b *testing.B) {
	for _, s := range All() {
		b.Run(s.Name, func(b *testing.B) {
			c := Config{Target: ptx.SM90, DType: s.DTypes[0]}
			if !contains(s.Targets, ptx.SM90) {
				c.Target = s.Targets[0]
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m, err := s.Build(c)
				if err != nil {
					b.Fatal(err)
				}
				if err := ptx.Print(io.Discard, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func contains(ts []ptx.Target, t ptx.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func ExampleLookup() {
	s, err := Lookup("vector_add")
	if err != nil {
		panic(err)
	}
	m, err := s.Build(Config{Target: ptx.SM90, DType: s.DTypes[0]})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Name, m.Funcs[len(m.Funcs)-1].Name, ptx.RequiredVersion(m))
	// Output: vector_add vector_add_f32 7.8
}
