package kernels

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
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
	s, err := Lookup("vector_add")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Build(Config{Target: ptx.SM90, DType: ptx.S8}); err == nil {
		t.Fatal("unsupported dtype accepted")
	}
}

// Every kernel is found by its identity, and the identity of what Find returns is the one
// asked for; bad identities say what is valid.
func TestFind(t *testing.T) {
	for _, s := range All() {
		for _, dt := range s.DTypes {
			got, err := Find(s.ID(dt))
			if err != nil || got != s {
				t.Errorf("Find(%v) = %v, %v; want %s", s.ID(dt), got, err, s.Name)
			}
		}
	}
	if s, err := Find(ID{Family: FamilyRowSum, DType: dsl.BF16}); err != nil || s.Name != "row_sum" {
		t.Errorf("row_sum bf16: %v, %v", s, err)
	}
	for _, c := range []struct {
		id   ID
		want string
	}{
		{ID{Family: "nosuch", DType: dsl.F32}, "no kernel nosuch f32 (families: "},
		{ID{Family: FamilyVectorAdd, DType: dsl.BF16}, `kernel vector_add has no dtype "bf16" (valid: f32, f16)`},
		{ID{Family: FamilySoftmax, Op: dsl.Max, DType: dsl.F32}, "kernel family softmax takes no reduction op (got Max)"},
	} {
		if _, err := Find(c.id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Find(%v): %v, want %q", c.id, err, c.want)
		}
	}
}

// BuildVariant gives the entry and the declared parameters with the module.
func TestBuildVariant(t *testing.T) {
	s, err := Find(ID{Family: FamilyRowSum, DType: dsl.F16})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.BuildVariant(Config{Target: ptx.SM80, DType: dsl.F16})
	if err != nil {
		t.Fatal(err)
	}
	want := "[{in f16 true false} {out f32 true false} {rows u32 false false} {cols u32 false false}]"
	if b.Entry != "row_sum_f16" || fmt.Sprint(b.Params) != want || b.Module.Target != ptx.SM80 {
		t.Fatalf("got %s %v %s, want row_sum_f16 %s sm_80", b.Entry, b.Params, b.Module.Target, want)
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

// TestNextLamportEpoch: the Lamport slot (epoch % LamportSlots) advances by one at every
// launch, across the wrap at LamportEpochWrap too.
func TestNextLamportEpoch(t *testing.T) {
	for _, e := range []uint32{0, 1, 2, 3, 1 << 31, LamportEpochWrap - 4, LamportEpochWrap - 3, LamportEpochWrap - 2} {
		for i := 0; i < 6; i++ {
			next := NextLamportEpoch(e)
			if next%LamportSlots != (e%LamportSlots+1)%LamportSlots {
				t.Fatalf("NextLamportEpoch(%#x) = %#x: slot %d after slot %d", e, next, next%LamportSlots, e%LamportSlots)
			}
			if next >= LamportEpochWrap {
				t.Fatalf("NextLamportEpoch(%#x) = %#x, past the wrap", e, next)
			}
			e = next
		}
	}
	if NextLamportEpoch(LamportEpochWrap-1) != 0 {
		t.Fatalf("NextLamportEpoch(%#x) = %#x, want 0", uint32(LamportEpochWrap-1), NextLamportEpoch(LamportEpochWrap-1))
	}
}

// GemmConfig.MinBlocks declares the launch bounds; out-of-range values are refused.
func TestGemmMinBlocks(t *testing.T) {
	c := DefaultGemmConfig(dsl.BF16)
	c.MinBlocks = 3
	k := dsl.New(c.Name(), dsl.WithTarget(ptx.SM90))
	Gemm(k, c)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	if s := m.String(); !strings.Contains(s, ".maxntid 128, 1, 1") || !strings.Contains(s, ".minnctapersm 3") || !strings.HasSuffix(c.Name(), "_b3") {
		t.Fatalf("%s: no launch bounds in the PTX", c.Name())
	}
	c.MinBlocks = 9
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "9 blocks per SM") {
		t.Fatalf("MinBlocks 9: %v", err)
	}
}

// The fused kernels honour GemmConfig.MinBlocks as the gemm does.
func TestFusedMinBlocks(t *testing.T) {
	c := DefaultFusedConfig(dsl.BF16)
	c.MinBlocks = 2
	for f, build := range map[Family]func(*dsl.Kernel, GemmConfig){FamilyAGGemm: AGGemm, FamilyGemmRS: GemmRS, FamilyGemmAR: GemmAR} {
		k := dsl.New(FusedName(f, c), dsl.WithTarget(ptx.SM90))
		build(k, c)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		if s := m.String(); !strings.Contains(s, ".maxntid 128, 1, 1") || !strings.Contains(s, ".minnctapersm 2") {
			t.Fatalf("%s: no launch bounds in the PTX", FusedName(f, c))
		}
	}
}
