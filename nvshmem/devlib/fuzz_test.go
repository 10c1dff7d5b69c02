package devlib

import (
	"bytes"
	"strings"
	"testing"
)

// The parsers read tool output and user files; on any input they return an error or a
// result, never panic or hang.

func FuzzParseLLVM(f *testing.F) {
	f.Add(llvmSample)
	f.Add("%a = type { %a }\ndefine void @f(%a %0) {\n")
	f.Add("%a = type { [4 x %b], %b }\n%b = type { [1000000 x i64] }\ndefine %a @f(ptr byval(%a) align 8 %0) {\n")
	f.Add("define ptr addrspace(1) @g(ptr addrspace(3) noundef %0, <{ i8, i32 }> %1) {\n")
	f.Fuzz(func(t *testing.T, src string) {
		sigs, _ := ParseLLVM(strings.NewReader(src))
		for _, s := range sigs {
			_ = s.Decl()
		}
	})
}

func FuzzParseDecls(f *testing.F) {
	f.Add(".extern .func (.param .b32 ret) nvshmem_my_pe();\n.extern .func nvshmem_half_p(.param .b64 d, .param .align 2 .b8 v[2], .param .b32 pe);")
	f.Add("/* x */ .func f(.param .b32 a // c\n, .param .u64 b[4]) { ret; }")
	f.Add(".func (")
	f.Fuzz(func(t *testing.T, src string) {
		ds, err := ParseDecls([]byte(src))
		if err != nil {
			return
		}
		// What ParseDecls accepts, Decl prints in a form it reads back the same.
		var b bytes.Buffer
		for _, d := range ds {
			b.WriteString(d.Decl() + "\n")
		}
		back, err := ParseDecls(b.Bytes())
		if err != nil {
			t.Fatalf("re-reading %q: %v", b.String(), err)
		}
		if len(back) != len(ds) {
			t.Fatalf("%d declarations back, want %d", len(back), len(ds))
		}
		for i := range ds {
			if !sameSig(ds[i], back[i]) || ds[i].Name != back[i].Name {
				t.Fatalf("round trip: %s became %s", ds[i], back[i])
			}
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	f.Add("// kgen-devlib: v1\n// nvshmem: 3.4.5\n// target: sm_90\n// ptx-target: sm_90\n// ptx-version: 8.0\n// bitcode: sha256:00\n// func: a\n//\n.version 8.0\n")
	f.Fuzz(func(t *testing.T, src string) {
		if h, err := ParseHeader([]byte(src)); err == nil {
			_ = CheckVersion(h.NVSHMEM, "3.4.5")
		}
	})
}
