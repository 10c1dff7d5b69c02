package devlib

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// Tests in this file need LLVM 19 and NVSHMEM (and ptxas/nvlink for the link test); they skip
// without them on a developer's machine and fail under CI=true (tooltest.Require).

var update = flag.Bool("update", false, "rewrite testdata/api_<version>.txt from the bitcode")

// testCache is a per-run cache folder shared by the tests, so each build happens once.
var testCache string

func TestMain(m *testing.M) {
	flag.Parse()
	d, err := os.MkdirTemp("", "kgen-devlib-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	testCache = d
	defer os.RemoveAll(d)
	m.Run()
}

var (
	libOnce sync.Once
	libT    *Library
	libErr  error
)

// requireLLVM ends the test when an LLVM tool or NVSHMEM is missing (see tooltest.Require).
func requireLLVM(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"llvm-extract", "opt", "llc", "llvm-nm", "llvm-dis"} {
		tooltest.Require(t, func() (string, error) { return toolchain.LLVMTool(tool) })
	}
	tooltest.Require(t, toolchain.NVSHMEMHome)
}

// testLib returns the shared Library of the provisioned NVSHMEM, caching in testCache.
//
// When testdata/api_<version>.txt was generated from this very bitcode (its header records the
// hash), it is put in the cache as the signature table, so the tests do not each wait for
// llvm-dis; TestAPIFile still reads the whole bitcode with llvm-dis (about 10 s of CPU, started
// here in the background so that it overlaps the other tests) and compares.
func testLib(t *testing.T) *Library {
	t.Helper()
	requireLLVM(t)
	libOnce.Do(func() {
		libT, libErr = Open("")
		if libErr != nil {
			return
		}
		libT.CacheDir = filepath.Join(testCache, "shared")
		if b, err := os.ReadFile(apiFile(libT.Version)); err == nil && bytes.Contains(b, []byte("bitcode sha256:"+libT.Hash+"\n")) {
			if err := writeAtomic(libT.signaturesPath(), b); err != nil {
				libErr = err
				return
			}
		}
		if !testing.Short() || *update {
			go loadFullSigs()
		}
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libT
}

var (
	fullOnce sync.Once
	fullT    map[string]Signature
	fullErr  error
	fullTook time.Duration
)

// loadFullSigs reads every signature from the bitcode with llvm-dis, bypassing the cache.
func loadFullSigs() {
	fullOnce.Do(func() {
		start := time.Now()
		l := &Library{Home: libT.Home, Path: libT.Path, Archive: libT.Archive, Version: libT.Version,
			Hash: libT.Hash, NoCache: true}
		fullT, fullErr = l.Signatures(context.Background())
		fullTook = time.Since(start)
	})
}

// testSigs returns the shared Library's signatures (from the cache seeded by testLib when
// the API file matches the bitcode, else from llvm-dis).
func testSigs(t *testing.T) map[string]Signature {
	t.Helper()
	l := testLib(t)
	sigs, err := l.Signatures(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return sigs
}

// linkFuncs are the functions testdata/link_kernel_sm90.ptx calls.
var linkFuncs = []string{
	"nvshmem_my_pe", "nvshmem_n_pes", "nvshmemx_putmem_block", "nvshmemx_putmem_signal_nbi_block",
	"nvshmemx_signal_op", "nvshmem_signal_wait_until", "nvshmem_quiet", "nvshmem_ptr",
	"nvshmem_int_p", "nvshmem_half_p",
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenVersion(t *testing.T) {
	l := testLib(t)
	bv, err := l.BitcodeVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if bv != l.Version {
		t.Errorf("header says %s, bitcode global says %s", l.Version, bv)
	}
	if _, err := ParseVersion(l.Version); err != nil {
		t.Error(err)
	}
	t.Logf("NVSHMEM %s at %s, bitcode sha256 %s", l.Version, l.Home, l.Hash)
}

func TestFunctions(t *testing.T) {
	l := testLib(t)
	fs, err := l.Functions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) < 1000 {
		t.Errorf("only %d functions", len(fs))
	}
	for _, f := range fs {
		if !strings.HasPrefix(f, "nvshmem_") && !strings.HasPrefix(f, "nvshmemx_") {
			t.Errorf("non-API function %s listed", f)
		}
	}
	set := map[string]bool{}
	for _, f := range fs {
		set[f] = true
	}
	for _, f := range linkFuncs {
		if !set[f] {
			t.Errorf("%s not listed", f)
		}
	}
}

// definedFuncs returns the names of the functions a PTX text defines (has a body for).
func definedFuncs(ptx []byte) map[string]bool {
	re := regexp.MustCompile(`(?m)^\.visible \.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)\(`)
	out := map[string]bool{}
	for _, m := range re.FindAllSubmatch(ptx, -1) {
		out[string(m[1])] = true
	}
	return out
}

func TestBuild(t *testing.T) {
	l := testLib(t)
	res, err := l.Build(t.Context(), "sm_90", linkFuncs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d functions in %s: %d bytes, %d lines", len(res.Funcs), res.Elapsed.Round(time.Millisecond),
		len(res.PTX), bytes.Count(res.PTX, []byte("\n")))
	if res.Version != l.Version || res.Target != "sm_90" || res.PTXTarget != "sm_90" || res.PTXVersion != "8.0" ||
		res.Archive != l.Archive || res.BitcodeHash != l.Hash || len(res.Funcs) != len(linkFuncs) {
		t.Errorf("result fields: %+v", res)
	}
	for _, want := range []string{"\n.version 8.0\n", "\n.target sm_90\n", "\n.address_size 64\n",
		".extern .const .align 8 .b8 nvshmemi_device_state_d["} {
		if !bytes.Contains(res.PTX, []byte(want)) {
			t.Errorf("PTX lacks %q", strings.TrimSpace(want))
		}
	}
	defs := definedFuncs(res.PTX)
	for _, f := range linkFuncs {
		if !defs[f] {
			t.Errorf("PTX does not define %s", f)
		}
	}
	h, err := ParseHeader(res.PTX)
	if err != nil {
		t.Fatal(err)
	}
	if h.NVSHMEM != l.Version || h.Target != "sm_90" || h.Bitcode != "sha256:"+l.Hash || strings.Join(h.Funcs, ",") != strings.Join(res.Funcs, ",") {
		t.Errorf("header %+v", h)
	}
	if err := CheckPTX(res.PTX, l.Version); err != nil {
		t.Error(err)
	}
	if err := CheckPTX(res.PTX, "3.0.0"); err == nil {
		t.Error("CheckPTX accepted another NVSHMEM version")
	}

	// The same request, names in another order with a duplicate: a cache hit, same bytes.
	rev := append([]string{"nvshmem_quiet"}, linkFuncs...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	again, err := l.Build(t.Context(), "sm_90", rev)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || !bytes.Equal(again.PTX, res.PTX) || again.CachePath != res.CachePath {
		t.Errorf("second build: cached=%v same=%v path %s vs %s", again.Cached, bytes.Equal(again.PTX, res.PTX), again.CachePath, res.CachePath)
	}

	// A damaged entry is rebuilt, not trusted.
	if err := os.WriteFile(res.CachePath, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixed, err := l.Build(t.Context(), "sm_90", linkFuncs)
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Cached || !bytes.Equal(fixed.PTX, res.PTX) {
		t.Errorf("damaged entry: cached=%v same=%v", fixed.Cached, bytes.Equal(fixed.PTX, res.PTX))
	}
}

// TestBuildSignaturesMatchLLC checks the LLVM-to-PTX ABI mapping of Signatures against the
// declarations llc itself emits, for functions covering every parameter kind the API uses.
func TestBuildSignaturesMatchLLC(t *testing.T) {
	l := testLib(t)
	sigs := testSigs(t)
	funcs := append([]string{"nvshmem_half_g", "nvshmem_bfloat16_g", "nvshmem_double_p", "nvshmem_double_g",
		"nvshmem_float_p", "nvshmem_float_g", "nvshmem_char_p", "nvshmem_short_g", "nvshmem_uchar_g",
		"nvshmem_int8_g", "nvshmem_ushort_g", "nvshmem_bfloat16_p"}, linkFuncs...)
	res, err := l.Build(t.Context(), "sm_90", funcs)
	if err != nil {
		t.Fatal(err)
	}
	decls, err := ParseDecls(res.PTX)
	if err != nil {
		t.Fatal(err)
	}
	var pub []Signature
	for _, d := range decls {
		if _, ok := sigs[d.Name]; ok {
			pub = append(pub, d)
		}
	}
	if len(pub) < len(funcs) {
		t.Errorf("llc output declares %d public functions, want at least %d", len(pub), len(funcs))
	}
	if err := CheckDecls(pub, sigs, l.Version); err != nil {
		t.Error(err)
	}
	for _, d := range pub {
		if d.String() != sigs[d.Name].String() {
			t.Errorf("%s: llc %s, Signatures %s", d.Name, d, sigs[d.Name])
		}
	}
}

// TestBuildConstants builds a function that uses assert strings (nvshmem_team_translate_pe):
// the strings must be defined in the PTX under valid names, and the PTX must export exactly
// the requested functions.
func TestBuildConstants(t *testing.T) {
	l := testLib(t)
	res, err := l.Build(t.Context(), "sm_90", []string{"nvshmem_team_translate_pe", "nvshmem_quiet"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(res.PTX, []byte(".extern .global")) || bytes.Contains(res.PTX, []byte(" .str")) {
		t.Error("the PTX declares the constants it uses instead of defining them")
	}
	if n := bytes.Count(res.PTX, []byte("\n.global ")); n == 0 || n > 10 {
		t.Errorf("%d .global definitions; want the few assert strings the functions use", n)
	}
	exported := regexp.MustCompile(`(?m)^\.visible \.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)`).FindAllSubmatch(res.PTX, -1)
	var names []string
	for _, m := range exported {
		names = append(names, string(m[1]))
	}
	if got := strings.Join(names, " "); got != "nvshmem_team_translate_pe nvshmem_quiet" && got != "nvshmem_quiet nvshmem_team_translate_pe" {
		t.Errorf("exported functions: %s", got)
	}
	ptxas := tooltest.Ptxas(t)
	p := filepath.Join(t.TempDir(), "devlib.ptx")
	if err := os.WriteFile(p, res.PTX, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runTool(t.Context(), nil, ptxas, "-arch=sm_90", "-c", p, "-o", p+".o"); err != nil {
		t.Fatal(err)
	}
}

func TestBuildTargets(t *testing.T) {
	l := testLib(t)
	for _, c := range []struct {
		target    ptx.Target
		ptxTarget string
	}{{ptx.SM80, "sm_80"}, {ptx.SM90a, "sm_90"}, {ptx.SM100a, "sm_90"}} {
		res, err := l.Build(t.Context(), c.target, []string{"nvshmem_quiet", "nvshmem_my_pe"})
		if err != nil {
			t.Errorf("%s: %v", c.target, err)
			continue
		}
		if !bytes.Contains(res.PTX, []byte("\n.target "+c.ptxTarget+"\n")) || res.PTXTarget != c.ptxTarget || res.Target != c.target {
			t.Errorf("%s: want .target %s; result %+v", c.target, c.ptxTarget, res)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	l := testLib(t)
	_, err := l.Build(t.Context(), "sm_90", []string{"nvshmem_quiet", "nvshmem_frobnicate", "nvshmem_putmem_block",
		"_Z23nvshmemi_transfer_rma_pIcEvPvT_i", "nvshmemi_device_state_d"})
	var ue *UnknownFunctionError
	if !errors.As(err, &ue) {
		t.Fatalf("Build with unknown names = %v, want an *UnknownFunctionError", err)
	}
	msg := err.Error()
	for _, want := range []string{"NVSHMEM " + l.Version, "nvshmem_frobnicate",
		"_Z23nvshmemi_transfer_rma_pIcEvPvT_i (an internal helper, not callable)",
		"nvshmemi_device_state_d (a variable, not a function)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "nvshmem_quiet") {
		t.Errorf("error names a known function: %s", msg)
	}
	if len(ue.Names) != 4 {
		t.Errorf("unknown names %v, want 4", ue.Names)
	}
	// nvshmem_putmem_block does not exist; nvshmemx_putmem_block does.
	if _, err := l.Build(t.Context(), "sm_90", []string{"nvshmem_putmem_block"}); err == nil || !strings.Contains(err.Error(), "did you mean nvshmemx_putmem_block?") {
		t.Errorf("no suggestion: %v", err)
	}
	var te *TargetError
	if _, err := l.Build(t.Context(), "sm_60", []string{"nvshmem_quiet"}); !errors.As(err, &te) {
		t.Errorf("sm_60: %v", err)
	}
	if _, err := l.Build(t.Context(), "sm_90", nil); err == nil || !strings.Contains(err.Error(), "no functions") {
		t.Errorf("no functions: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (&Library{Home: l.Home, Path: l.Path, Archive: l.Archive, Version: l.Version, Hash: l.Hash, NoCache: true}).Build(ctx, "sm_90", []string{"nvshmem_quiet"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled build: %v", err)
	}
}

// TestBuildConcurrent builds the same library from several goroutines and two Library values
// sharing one fresh cache folder: every result is identical and no temporary file is left.
func TestBuildConcurrent(t *testing.T) {
	shared := testLib(t)
	dir := t.TempDir()
	libs := make([]*Library, 2)
	for i := range libs {
		libs[i] = &Library{Home: shared.Home, Path: shared.Path, Archive: shared.Archive,
			Version: shared.Version, Hash: shared.Hash, CacheDir: dir}
	}
	const n = 6
	results := make([]*Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = libs[i%2].Build(t.Context(), "sm_90", []string{"nvshmem_ptr", "nvshmem_my_pe"})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if !bytes.Equal(results[i].PTX, results[0].PTX) {
			t.Errorf("build %d differs", i)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".ptx") || strings.HasPrefix(ents[0].Name(), ".") {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("cache folder holds %v, want one .ptx entry", names)
	}
	b, err := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err != nil || !bytes.Equal(b, results[0].PTX) {
		t.Errorf("cache entry differs from the result (%v)", err)
	}
}

// TestBuildUnwritableCache: a cache folder that cannot be created costs the cache, not the
// build.
func TestBuildUnwritableCache(t *testing.T) {
	shared := testLib(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	l := &Library{Home: shared.Home, Path: shared.Path, Archive: shared.Archive, Version: shared.Version,
		Hash: shared.Hash, CacheDir: filepath.Join(file, "cache"), Log: &log}
	res, err := l.Build(t.Context(), "sm_90", []string{"nvshmem_n_pes"})
	if err != nil {
		t.Fatal(err)
	}
	if res.CachePath != "" || len(res.PTX) == 0 || !strings.Contains(log.String(), "warning: not cached") {
		t.Errorf("CachePath %q, %d bytes, log %q", res.CachePath, len(res.PTX), log.String())
	}
}

// checkDeclsAgainst is the ABI test: the NVSHMEM declarations in ptx (such as those kgen's
// DSL emits) must match the device library's signatures.
func checkDeclsAgainst(t *testing.T, ptx []byte, sigs map[string]Signature, version string) {
	t.Helper()
	decls, err := ParseDecls(ptx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range decls {
		if strings.HasPrefix(d.Name, "nvshmem") {
			n++
		}
	}
	if n == 0 {
		t.Fatal("no NVSHMEM declarations to check")
	}
	if err := CheckDecls(decls, sigs, version); err != nil {
		t.Error(err)
	}
}

// TestABIHandWritten checks hand-written declarations, written from DESIGN.md's ABI rule
// (int, team, sig_op, cmp: .b32; pointers, size_t, uint64_t: .b64), against the bitcode.
func TestABIHandWritten(t *testing.T) {
	sigs := testSigs(t)
	checkDeclsAgainst(t, readTestdata(t, "link_kernel_sm90.ptx"), sigs, testLib(t).Version)
	wrong := []byte(".extern .func nvshmem_int_p(.param .b64 d, .param .b64 v, .param .b32 pe);\n" +
		".extern .func (.param .b32 r) nvshmem_ptr(.param .b64 d, .param .b32 pe);\n")
	decls, _ := ParseDecls(wrong)
	err := CheckDecls(decls, sigs, "")
	var ae *ABIError
	if !errors.As(err, &ae) || len(ae.Problems) != 2 {
		t.Errorf("wrong declarations: %v", err)
	}
}

// apiFile is the generated list of the device API of the provisioned NVSHMEM.
func apiFile(version string) string { return filepath.Join("testdata", "api_"+version+".txt") }

// TestAPIFile keeps testdata/api_<version>.txt, every public function with its PTX call ABI,
// equal to what Signatures reads from the bitcode. go test ./nvshmem/devlib -run TestAPIFile
// -update rewrites it.
func TestAPIFile(t *testing.T) {
	l := testLib(t)
	if testing.Short() && !*update {
		t.Skip("reads the whole bitcode with llvm-dis (about 10 s of CPU); run without -short")
	}
	loadFullSigs()
	if fullErr != nil {
		t.Fatal(fullErr)
	}
	sigs := fullT
	t.Logf("Signatures from the bitcode: %d functions in %s", len(sigs), fullTook.Round(time.Millisecond))
	fs, err := l.Functions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != len(sigs) {
		t.Errorf("llvm-nm lists %d functions, llvm-dis %d", len(fs), len(sigs))
	}
	for _, f := range fs {
		if _, ok := sigs[f]; !ok {
			t.Errorf("%s has no signature", f)
		}
	}
	var b bytes.Buffer
	header := l.signatureHeader(len(sigs)) + "\nGenerated by `go test ./nvshmem/devlib -run TestAPIFile -update`; DO NOT EDIT."
	if err := WriteSignatures(&b, header, sigs); err != nil {
		t.Fatal(err)
	}
	path := apiFile(l.Version)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d functions)", path, len(sigs))
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no %s for NVSHMEM %s; run with -update to write it", path, l.Version)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("%s is stale; run go test ./nvshmem/devlib -run TestAPIFile -update", path)
	}
}

// TestSignaturesOf reads a few signatures straight from the bitcode (no table, no cache) and
// compares them with the full table.
func TestSignaturesOf(t *testing.T) {
	shared := testLib(t)
	sigs := testSigs(t)
	l := &Library{Home: shared.Home, Path: shared.Path, Archive: shared.Archive, Version: shared.Version,
		Hash: shared.Hash, NoCache: true}
	start := time.Now()
	got, err := l.SignaturesOf(t.Context(), append([]string{"nvshmem_half_g", "nvshmem_double_p"}, linkFuncs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SignaturesOf %d functions: %s", len(got), time.Since(start).Round(time.Millisecond))
	if len(got) != len(linkFuncs)+2 {
		t.Errorf("%d signatures, want %d", len(got), len(linkFuncs)+2)
	}
	for n, s := range got {
		if s.Decl() != sigs[n].Decl() || s.LLVM != sigs[n].LLVM {
			t.Errorf("%s: SignaturesOf %s // %s, table %s // %s", n, s.Decl(), s.LLVM, sigs[n].Decl(), sigs[n].LLVM)
		}
	}
	var ue *UnknownFunctionError
	if _, err := l.SignaturesOf(t.Context(), []string{"nvshmem_quiet", "nvshmem_nope"}); !errors.As(err, &ue) || len(ue.Names) != 1 {
		t.Errorf("unknown name: %v", err)
	}
}

// TestABIFromAPIFile runs the ABI check against the committed API file: it needs no tools, so
// later ABI tests (of the DSL's NVSHMEM operations) can work the same way everywhere.
func TestABIFromAPIFile(t *testing.T) {
	b := readTestdata(t, "api_3.4.5.txt")
	sigs, err := ReadSignatures(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 2208 {
		t.Errorf("%d signatures in api_3.4.5.txt, want 2208", len(sigs))
	}
	checkDeclsAgainst(t, readTestdata(t, "link_kernel_sm90.ptx"), sigs, "3.4.5")
	for name, want := range map[string]string{
		"nvshmemx_putmem_block":            "nvshmemx_putmem_block(.b64, .b64, .b64, .b32)",
		"nvshmem_quiet":                    "nvshmem_quiet()",
		"nvshmem_ptr":                      "nvshmem_ptr(.b64, .b32) .b64",
		"nvshmem_int_p":                    "nvshmem_int_p(.b64, .b32, .b32)",
		"nvshmemx_signal_op":               "nvshmemx_signal_op(.b64, .b64, .b32, .b32)",
		"nvshmem_signal_wait_until":        "nvshmem_signal_wait_until(.b64, .b32, .b64) .b64",
		"nvshmem_my_pe":                    "nvshmem_my_pe() .b32",
		"nvshmem_n_pes":                    "nvshmem_n_pes() .b32",
		"nvshmemx_putmem_signal_nbi_block": "nvshmemx_putmem_signal_nbi_block(.b64, .b64, .b64, .b64, .b64, .b32, .b32)",
		"nvshmem_half_p":                   "nvshmem_half_p(.b64, .align 2 .b8[2], .b32)",
	} {
		if got := sigs[name].String(); got != want {
			t.Errorf("%s: got %s, want %s", name, got, want)
		}
	}
}

// TestAPIFileAssembles checks that the API file is valid PTX: every declaration in it is
// accepted by ptxas.
func TestAPIFileAssembles(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	src := append([]byte(".version 8.0\n.target sm_90\n.address_size 64\n"), readTestdata(t, "api_3.4.5.txt")...)
	p := filepath.Join(t.TempDir(), "api.ptx")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runTool(t.Context(), nil, ptxas, "-arch=sm_90", "-c", p, "-o", p+".o"); err != nil {
		t.Fatal(err)
	}
}

// TestLinkOffline is the link test: the hand-written kernel, the devlib PTX built for
// exactly the functions it calls and libnvshmem_device.a link into a cubin that defines the
// kernel and every NVSHMEM function, with nothing left undefined.
func TestLinkOffline(t *testing.T) {
	l := testLib(t)
	tooltest.Ptxas(t)
	tooltest.Require(t, func() (string, error) { return toolchain.CUDATool("nvlink") })
	kernel := readTestdata(t, "link_kernel_sm90.ptx")
	res, err := l.Build(t.Context(), "sm_90", linkFuncs)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cubin, err := LinkOffline(t.Context(), "sm_90", kernel, res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ptxas x2 + nvlink: %s, %d-byte cubin", time.Since(start).Round(time.Millisecond), len(cubin))
	f, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		t.Fatalf("linked cubin is not ELF: %v", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			if strings.Contains(s.Name, "nvshmem") {
				t.Errorf("%s is undefined in the linked cubin", s.Name)
			}
			continue
		}
		defined[s.Name] = true
	}
	for _, want := range append([]string{"kgen_devlib_link_test", "nvshmemi_device_state_d"}, linkFuncs...) {
		if !defined[want] {
			t.Errorf("linked cubin does not define %s", want)
		}
	}
	if f.Section(".nv.info.kgen_devlib_link_test") == nil && f.Section(".text.kgen_devlib_link_test") == nil {
		t.Error("linked cubin has no code section for the kernel")
	}

	// Without the devlib the calls stay unresolved; without the archive, the device state.
	empty := &Result{PTX: []byte(".version 8.0\n.target sm_90\n.address_size 64\n"), Archive: l.Archive}
	if _, err := LinkOffline(t.Context(), "sm_90", kernel, empty); err == nil || !strings.Contains(err.Error(), "Undefined reference to 'nvshmem") {
		t.Errorf("link without devlib: %v", err)
	}
	noArchive := *res
	noArchive.Archive = filepath.Join(t.TempDir(), "empty.a")
	os.WriteFile(noArchive.Archive, []byte("!<arch>\n"), 0o644)
	if _, err := LinkOffline(t.Context(), "sm_90", kernel, &noArchive); err == nil || !strings.Contains(err.Error(), "nvshmemi_device_state_d") {
		t.Errorf("link without libnvshmem_device.a: %v", err)
	}
	// A declaration that disagrees with the library (value of nvshmem_int_p as .b64, the call
	// consistent with it) passes ptxas; nvlink rejects it, and CheckDecls names it first.
	bad := bytes.Replace(kernel, []byte(".extern .func nvshmem_int_p(.param .b64 dest, .param .b32 value,"),
		[]byte(".extern .func nvshmem_int_p(.param .b64 dest, .param .b64 value,"), 1)
	call := bytes.Index(bad, []byte("call.uni nvshmem_int_p"))
	a1 := bytes.LastIndex(bad[:call], []byte(".param .b32 a1;"))
	if call < 0 || a1 < 0 {
		t.Fatal("testdata kernel changed; update the mistyped-declaration case")
	}
	bad = append(append(append([]byte{}, bad[:a1]...), ".param .b64 a1;"...), bad[a1+len(".param .b32 a1;"):]...)
	bad = bytes.Replace(bad, []byte("st.param.b32 [a1], %r1;"), []byte("st.param.b64 [a1], %rd1;"), 1)
	if _, err := LinkOffline(t.Context(), "sm_90", bad, res); err == nil || !strings.Contains(err.Error(), "Prototype doesn't match for 'nvshmem_int_p'") {
		t.Errorf("mistyped declaration: %v", err)
	}
	decls, err := ParseDecls(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckDecls(decls, testSigs(t), l.Version); err == nil || !strings.Contains(err.Error(), "nvshmem_int_p: parameter 1 is .b32, declared .b64") {
		t.Errorf("CheckDecls on the mistyped declaration: %v", err)
	}
}

func TestRun(t *testing.T) {
	l := testLib(t)
	out := filepath.Join(t.TempDir(), "devlib.ptx")
	var stdout, stderr bytes.Buffer
	opts := Options{Home: l.Home, Target: "sm_90", Funcs: []string{"nvshmem_quiet,nvshmem_my_pe"}, Output: out, CacheDir: l.CacheDir}
	if err := Run(t.Context(), opts, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPTX(b, l.Version); err != nil {
		t.Error(err)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "wrote "+out) {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	stdout.Reset()
	opts.Output = ""
	if err := Run(t.Context(), opts, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), b) {
		t.Error("PTX on stdout differs from the file")
	}
	stdout.Reset()
	if err := Run(t.Context(), Options{Home: l.Home, List: true}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stdout.String(), "\n"); n < 1000 || !strings.Contains(stdout.String(), "\nnvshmemx_putmem_block\n") {
		t.Errorf("List printed %d lines", n)
	}
	stdout.Reset()
	if err := Run(t.Context(), Options{Home: l.Home, Signatures: true, Funcs: []string{"nvshmem_ptr"}, CacheDir: l.CacheDir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), ".extern .func (.param .b64 ret) nvshmem_ptr(.param .b64 p0, .param .b32 p1); // ptr (ptr, i32)") {
		t.Errorf("Signatures printed %q", stdout.String())
	}
	for _, c := range []struct {
		o   Options
		why string
	}{
		{Options{Home: l.Home, Funcs: []string{"nvshmem_quiet"}}, "no target"},
		{Options{Home: l.Home, Target: "sm_52", Funcs: []string{"nvshmem_quiet"}}, "unsupported target"},
		{Options{Home: l.Home, Target: "sm_90", Funcs: []string{"nope"}, CacheDir: l.CacheDir}, "does not define nope"},
		{Options{Home: l.Home, List: true, Funcs: []string{"nope"}}, "does not define nope"},
		{Options{Home: l.Home, Target: "sm_90", Funcs: []string{"nvshmem_quiet"}, Output: filepath.Join(out, "x", "y.ptx"), CacheDir: l.CacheDir}, "writing"},
	} {
		if err := Run(t.Context(), c.o, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Run(%+v) = %v, want an error saying %q", c.o, err, c.why)
		}
	}
}
