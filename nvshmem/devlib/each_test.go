package devlib

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/internal/tooltest"
)

// TestBuildEach builds linkFuncs one unit per function into a fresh cache, then checks hits,
// one added function, a damaged entry, another version, an unknown name and the offline link
// of the cached objects.
func TestBuildEach(t *testing.T) {
	shared := testLib(t)
	tooltest.Ptxas(t)
	lib, err := Open(shared.Home)
	if err != nil {
		t.Fatal(err)
	}
	lib.CacheDir = t.TempDir()
	funcs := linkFuncs[:5]
	var calls []string
	opts := EachOptions{Objects: true, Progress: func(done, total int, u *Unit) {
		if total != len(funcs) || done < 1 || done > total {
			t.Errorf("progress %d of %d", done, total)
		}
		calls = append(calls, u.Func)
	}}
	cold, err := lib.BuildEach(t.Context(), "sm_90", funcs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold: %d units in %s", len(cold.Units), cold.Elapsed.Round(time.Millisecond))
	if cold.Misses != len(funcs) || cold.Hits != 0 || len(calls) != len(funcs) {
		t.Fatalf("cold build: %d misses, %d hits, %d progress calls; want %d misses", cold.Misses, cold.Hits, len(calls), len(funcs))
	}
	for _, u := range cold.Units {
		if u.Cached {
			t.Errorf("%s: cached in a cold build", u.Func)
		}
		if def := definedFuncs(u.PTX); !def[u.Func] {
			t.Errorf("%s: its unit's PTX does not define it", u.Func)
		}
		h, err := ParseHeader(u.PTX)
		if err != nil || h.NVSHMEM != lib.Version || len(h.Funcs) != 1 || h.Funcs[0] != u.Func {
			t.Errorf("%s: header %+v, %v", u.Func, h, err)
		}
		if _, err := elf.NewFile(bytes.NewReader(u.Object)); err != nil {
			t.Errorf("%s: object is not ELF: %v", u.Func, err)
		}
	}
	calls = nil
	warm, err := lib.BuildEach(t.Context(), "sm_90", funcs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm: %s", warm.Elapsed)
	if warm.Hits != len(funcs) || warm.Misses != 0 || len(calls) != len(funcs) {
		t.Fatalf("warm build: %d hits, %d misses, %d progress calls", warm.Hits, warm.Misses, len(calls))
	}
	for i, u := range warm.Units {
		if !u.Cached || !bytes.Equal(u.PTX, cold.Units[i].PTX) || !bytes.Equal(u.Object, cold.Units[i].Object) {
			t.Errorf("%s: warm unit differs from the cold one (cached=%v)", u.Func, u.Cached)
		}
	}
	// One more function: only it is built.
	more, err := lib.BuildEach(t.Context(), "sm_90", linkFuncs[:6], EachOptions{Objects: true, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if more.Hits != 5 || more.Misses != 1 {
		t.Errorf("a sixth function: %d hits, %d misses; want 5, 1", more.Hits, more.Misses)
	}
	// A damaged entry (truncated PTX, a flipped byte in an object) is a miss, rebuilt whole.
	dir := filepath.Join(lib.CacheDir, "units", lib.Version, "sm_90")
	ptxPath := filepath.Join(dir, funcs[0]+".ptx")
	b, err := os.ReadFile(ptxPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(ptxPath, b[:len(b)/2], 0o644)
	objPath := filepath.Join(dir, funcs[1]+".o")
	o, err := os.ReadFile(objPath)
	if err != nil {
		t.Fatal(err)
	}
	o[len(o)-10] ^= 0xff
	os.WriteFile(objPath, o, 0o644)
	fixed, err := lib.BuildEach(t.Context(), "sm_90", funcs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Misses != 2 || fixed.Hits != 3 {
		t.Errorf("after damaging 2 entries: %d misses, %d hits; want 2, 3", fixed.Misses, fixed.Hits)
	}
	if b2, _ := os.ReadFile(ptxPath); !bytes.Equal(b2, b) {
		t.Error("the truncated entry was not replaced by a whole one")
	}
	for i, u := range fixed.Units {
		if !bytes.Equal(u.PTX, cold.Units[i].PTX) || !bytes.Equal(u.Object, cold.Units[i].Object) {
			t.Errorf("%s: rebuilt unit differs", u.Func)
		}
	}
	// The version is part of the key: another version finds nothing, and building for it
	// fails on the bitcode's own version, naming both.
	other, err := Open(shared.Home)
	if err != nil {
		t.Fatal(err)
	}
	other.CacheDir, other.Version = lib.CacheDir, "9.9.9"
	if _, err := other.BuildEach(t.Context(), "sm_90", funcs, opts); err == nil || !strings.Contains(err.Error(), "9.9.9") || !strings.Contains(err.Error(), lib.Version) {
		t.Errorf("another version: %v", err)
	}
	if _, err := lib.BuildEach(t.Context(), "sm_90", []string{"nvshmem_quiet", "nvshmem_no_such"}, opts); err == nil || !strings.Contains(err.Error(), "nvshmem_no_such") {
		t.Errorf("unknown function: %v", err)
	}
	// The cached objects link with the kernel, no NVSHMEM compile.
	tooltest.Require(t, func() (string, error) { return toolchain.CUDATool("nvlink") })
	all, err := lib.BuildEach(t.Context(), "sm_90", linkFuncs, EachOptions{Objects: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cubin, err := LinkOfflineUnits(t.Context(), "sm_90", readTestdata(t, "link_kernel_sm90.ptx"), all)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d units (%d built) in %s; ptxas + nvlink of the cached objects: %s, %d-byte cubin",
		len(all.Units), all.Misses, all.Elapsed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), len(cubin))
	f, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	defined := map[string]bool{}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && strings.Contains(s.Name, "nvshmem") {
			t.Errorf("%s is undefined in the linked cubin", s.Name)
		}
		defined[s.Name] = s.Section != elf.SHN_UNDEF
	}
	for _, want := range append([]string{"kgen_devlib_link_test", "nvshmemi_device_state_d"}, linkFuncs...) {
		if !defined[want] {
			t.Errorf("linked cubin does not define %s", want)
		}
	}
	if _, err := LinkOfflineUnits(t.Context(), "sm_100a", nil, all); err == nil || !strings.Contains(err.Error(), "built for sm_90") {
		t.Errorf("target mismatch: %v", err)
	}
}

func TestRunEach(t *testing.T) {
	l := testLib(t)
	tooltest.Ptxas(t)
	dir := filepath.Join(t.TempDir(), "units")
	var stdout, stderr bytes.Buffer
	opts := Options{Home: l.Home, Target: "sm_90", Funcs: []string{"nvshmem_quiet,nvshmem_my_pe"}, EachDir: dir, Objects: true, CacheDir: l.CacheDir}
	if err := Run(t.Context(), opts, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"nvshmem_my_pe", "nvshmem_quiet"} {
		b, err := os.ReadFile(filepath.Join(dir, f+".ptx"))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPTX(b, l.Version); err != nil {
			t.Error(err)
		}
		if o, err := os.ReadFile(filepath.Join(dir, f+".o")); err != nil || !bytes.HasPrefix(o, []byte("\x7fELF")) {
			t.Errorf("%s.o: %v (not an ELF object)", f, err)
		}
	}
	for _, want := range []string{"[1/2] ", "[2/2] ", "2 unit(s)", "wrote " + dir} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress %q lacks %q", stderr.String(), want)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q", stdout.String())
	}
	opts.EachDir = ""
	if err := Run(t.Context(), opts, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--each") {
		t.Errorf("objects without --each: %v", err)
	}
}
