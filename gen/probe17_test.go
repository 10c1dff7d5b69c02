package gen

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe17KernelDoc: a Kernel.Doc holding a line break or another control character is
// refused naming the kernel and the field, and a Doc or Generator holding a byte that is not
// UTF-8 is refused naming the byte. Before: a Doc of "a\n*/ func init() { panic(1) } /*"
// became a /* */ doc comment that the "*/" ended, putting an init function into the
// generated package, and a stray byte failed the Go file's formatting with an error quoting
// the whole generated source (probe 17).
func TestProbe17KernelDoc(t *testing.T) {
	for _, c := range []struct {
		doc, generator string
		want           string
	}{
		{doc: "a\n*/ func init() { panic(1) } /*", want: `kernel "x": Kernel.Doc "a\n*/ func init() { panic(1) } /*" holds U+000A at byte 1`},
		{doc: "x\ry", want: "Kernel.Doc \"x\\ry\" holds U+000D at byte 1"},
		{doc: "a\xff b", want: `Kernel.Doc "a\xff b" holds the byte 0xff (not UTF-8) at byte 1`},
		{doc: strings.Repeat("d", 100000) + "\n", want: "Kernel.Doc"},
		{generator: "go\xfe run", want: `Package.Generator "go\xfe run" holds the byte 0xfe (not UTF-8) at byte 2`},
	} {
		k := probe7Kernel("x")
		k.Doc = c.doc
		_, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{k}, Generator: c.generator})
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1000 {
			t.Errorf("Doc %.40q Generator %q: %.300v; want an error holding %q", c.doc, c.generator, err, c.want)
		}
	}
	k := probe7Kernel("x")
	k.Doc = "Adds \uFFFD and ü, then */ is text."
	fs, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{k}})
	if err != nil {
		t.Fatal(err)
	}
	if src := string(fs[len(fs)-1].Data); !strings.Contains(src, "// X is the kernel x. Adds \uFFFD and ü, then */ is text.\n") {
		t.Errorf("the doc line is missing from:\n%s", src)
	}
}

// TestProbe17CaseOnlyNames: kernels whose names differ only in case ("aBc" and "abc", whose
// Go names ABc and Abc differ) are refused naming both files; they were written, and the go
// command refused the package: "case-insensitive file name collision: "aBc.sm_90.ptx" and
// "abc.sm_90.ptx"" (probe 17).
func TestProbe17CaseOnlyNames(t *testing.T) {
	_, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("aBc"), probe7Kernel("abc")}})
	if want := "the generated files aBc.sm_90.ptx and abc.sm_90.ptx differ only in case"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("kernels aBc and abc: %v; want an error holding %q", err, want)
	}
	if _, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("abc"), probe7Kernel("abd")}}); err != nil {
		t.Errorf("kernels abc and abd: %v", err)
	}
}

// TestProbe17DevLibVersion: a device library version that is not MAJOR.MINOR.PATCH as NVSHMEM
// reports its own is refused naming it; "v3.4.5", "3.4.5\n", "3.4.5.0" and garbage were
// embedded, and genrt.LoadNVSHMEM, which compares the two as strings, refused every NVSHMEM
// (probe 17).
func TestProbe17DevLibVersion(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"v3.4.5", `version "v3.4.5" is not MAJOR.MINOR.PATCH`},
		{"3.4.5\n", `version "3.4.5\n" is not MAJOR.MINOR.PATCH`},
		{"3.4.5.0", `version "3.4.5.0" is not MAJOR.MINOR.PATCH`},
		{"3.04.5", `version "3.04.5" is not MAJOR.MINOR.PATCH`},
		{"garbage", `version "garbage" is not MAJOR.MINOR.PATCH`},
		{strings.Repeat("3", 100000), `version "333`},
		{"3.4.5", ""},
	} {
		lib := func(ptx.Target, []string) ([]byte, string, error) { return []byte("// devlib\n"), c.version, nil }
		_, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM90}, DevLib: lib,
			Kernels: []Kernel{{Name: "shmem_put", Build: shmemPut}}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("version %q: %v", c.version, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1000):
			t.Errorf("version %.40q: %.300v; want an error holding %q", c.version, err, c.want)
		}
	}
}

// TestProbe17ParamsPerTarget: a Build that declares other parameters for another target is
// refused naming both lists; the launcher took the last target's (an f32 pointer), and jit,
// which checks parameter names only, launched the sm_80 kernel reading f16 with it (probe 17).
func TestProbe17ParamsPerTarget(t *testing.T) {
	for _, c := range []struct {
		build func(k *dsl.Kernel)
		want  string
	}{
		{func(k *dsl.Kernel) {
			dt := dsl.F32
			if k.Target() == ptx.SM80 {
				dt = dsl.F16
			}
			k.PtrParam("x", dt)
		}, "gen: kernel x declares other parameters for sm_90 (x *f32) than for sm_80 (x *f16)"},
		{func(k *dsl.Kernel) {
			k.PtrParam("x", dsl.F32)
			if k.Target() == ptx.SM90 {
				k.Param("n", dsl.U32)
			}
		}, "for sm_90 (x *f32, n u32) than for sm_80 (x *f32)"},
		{func(k *dsl.Kernel) {
			k.PtrParam("x", dsl.F32)
			if k.Target() == ptx.SM80 {
				k.Param("n", dsl.U32)
			}
		}, "for sm_90 (x *f32) than for sm_80 (x *f32, n u32)"},
	} {
		_, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM80, ptx.SM90}, Kernels: []Kernel{{Name: "x", Build: c.build}}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v; want an error holding %q", err, c.want)
		}
	}
	if _, err := Files(Package{Name: "p", Targets: []ptx.Target{ptx.SM80, ptx.SM90}, Kernels: []Kernel{probe7Kernel("x")}}); err != nil {
		t.Error(err)
	}
}
