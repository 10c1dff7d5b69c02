package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

const ptxasTestPTX = `.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 p)
{
	.reg .u64 %rd<2>;
	ld.param.u64 %rd1, [p];
	st.global.u32 [%rd1], 7;
	ret;
}
`

// TestPtxasCompiler compiles through the ptxas PtxasEnv names: a cubin (an ELF file) whole
// or relocatable, ptxas's own message for bad PTX, and errors naming the variable for a
// path that is not a ptxas.
func TestPtxasCompiler(t *testing.T) {
	p := tooltest.Ptxas(t)
	t.Setenv(PtxasEnv, p)
	c, err := ptxasFromEnv()
	if err != nil || c == nil {
		t.Fatalf("ptxasFromEnv: %v %v", c, err)
	}
	if !strings.Contains(c.version, "V1") {
		t.Errorf("version line %q: want ptxas's Vxx.y.z", c.version)
	}
	for _, reloc := range []bool{false, true} {
		b, err := c.compile("k", []byte(ptxasTestPTX), "sm_90a", reloc)
		if err != nil {
			t.Fatalf("relocatable %v: %v", reloc, err)
		}
		if !bytes.HasPrefix(b, []byte("\x7fELF")) {
			t.Errorf("relocatable %v: %d bytes, not an ELF cubin", reloc, len(b))
		}
	}
	_, err = c.compile("bad", []byte(strings.Replace(ptxasTestPTX, "st.global.u32", "st.global.u99", 1)), "sm_90a", false)
	if err == nil || !strings.Contains(err.Error(), "module bad") || !strings.Contains(err.Error(), "u99") {
		t.Errorf("bad PTX: %v (want the module and ptxas's message)", err)
	}

	t.Setenv(PtxasEnv, "/nonexistent/ptxas")
	if _, err := ptxasFromEnv(); err == nil || !strings.Contains(err.Error(), PtxasEnv) {
		t.Errorf("missing ptxas: %v (want an error naming %s)", err, PtxasEnv)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho other tool 1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PtxasEnv, other)
	if _, err := ptxasFromEnv(); err == nil || !strings.Contains(err.Error(), "not a ptxas") || !strings.Contains(err.Error(), PtxasEnv) {
		t.Errorf("another tool as ptxas: %v (want \"not a ptxas\" naming %s)", err, PtxasEnv)
	}
	t.Setenv(PtxasEnv, "")
	if c, err := ptxasFromEnv(); c != nil || err != nil {
		t.Errorf("unset: %v %v (want none)", c, err)
	}
}

// TestCacheKeyCompiler keeps cubins of the driver's linker, of the auto mode (which may hold
// wholeProgramEntry) and of a ptxas apart, and the linker's keys as they were.
func TestCacheKeyCompiler(t *testing.T) {
	k := CacheKey{Arch: "sm_90", Driver: 13000}
	pk := k
	pk.Compiler = "Cuda compilation tools, release 13.0, V13.0.88"
	ak := k
	ak.Compiler = autoCompiler
	if k.String() == pk.String() || k.String() == ak.String() || ak.String() == pk.String() {
		t.Fatal("cubins of the driver's linker, of its auto mode and of a ptxas share a cache key")
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("kgen-jit-cubin v1\nptx %x\ndevlib %x\narch sm_90\ndriver 13000\n", k.PTX, k.DevLib)))
	if k.String() != hex.EncodeToString(h[:]) {
		t.Errorf("the driver's key changed: %s", k.String())
	}
}

// TestJITMode reads JITModeEnv (another value is an error naming it) and finds ptxas's
// serialized-wgmma report in a log.
func TestJITMode(t *testing.T) {
	for v, want := range map[string]jitMode{"": jitAuto, "auto": jitAuto, "whole": jitWhole, "link": jitLink} {
		t.Setenv(JITModeEnv, v)
		if got, err := jitModeFromEnv(); err != nil || got != want {
			t.Errorf("%s=%q: %v, %v (want %v)", JITModeEnv, v, got, err, want)
		}
	}
	t.Setenv(JITModeEnv, "fast")
	if _, err := jitModeFromEnv(); err == nil || !strings.Contains(err.Error(), JITModeEnv) {
		t.Errorf("bad mode: %v (want an error naming %s)", err, JITModeEnv)
	}
	serial := "ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'k'"
	if !serializedWGMMA("ptxas info    : Used 168 registers\n"+serial, 1<<16) || serializedWGMMA("ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored", 1<<16) {
		t.Error("serializedWGMMA misreads ptxas's log")
	}
	if !serializedWGMMA(strings.Repeat("x", 99), 100) {
		t.Error("a log that filled its buffer may have lost the report: want the whole-program compile")
	}
	if bytes.HasPrefix(wholeProgramEntry, []byte("\x7fELF")) {
		t.Error("the whole-program cache entry reads as a cubin")
	}
}

// TestRelocatableSerializesAttention pins the fact behind auto: compiled as relocatable code
// (what the driver's linker does), the sm_90a attention's wgmma instructions are serialized
// and ptxas says so; compiled whole they are not.
func TestRelocatableSerializesAttention(t *testing.T) {
	p := tooltest.Ptxas(t)
	text, err := os.ReadFile("../golden/testdata/attention_sm90/bf16.sm_90a.ptx")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "a.ptx")
	if err := os.WriteFile(f, text, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, reloc := range []bool{true, false} {
		args := []string{"-arch=sm_90a", "-v", f, "-o", filepath.Join(dir, "a.cubin")}
		if reloc {
			args = append([]string{"-c"}, args...)
		}
		out, err := exec.Command(p, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ptxas: %v %s", err, out)
		}
		if got := serializedWGMMA(string(out), 1<<16); got != reloc {
			t.Errorf("relocatable %v: serialized wgmma reported %v:\n%s", reloc, got, out)
		}
	}
}

// TestCacheEntryLimit: Put refuses data Get would never serve (probe 9: it was stored, then
// every lookup silently missed).
func TestCacheEntryLimit(t *testing.T) {
	if err := entryFits(maxEntry - entryHeadMax); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if err := entryFits(maxEntry - entryHeadMax + 1); err == nil || !strings.Contains(err.Error(), "entry limit") {
		t.Errorf("past the limit: %v (want an error naming the entry limit)", err)
	}
}

// TestPtxasBounded: an external ptxas that hangs is killed after ptxasTimeout, one that
// prints without end is kept to its first 64 KiB in the error, and a failed --version is
// asked again on the next load (not remembered).
func TestPtxasBounded(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'ptxas: fake, V0.0'; exit 0; fi\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	defer func(d time.Duration) { ptxasTimeout = d }(ptxasTimeout)
	ptxasTimeout = 300 * time.Millisecond
	hang := &ptxasCompiler{path: script("hang", "exec sleep 30\n"), version: "fake"}
	t0 := time.Now()
	_, err := hang.compile("k", []byte(ptxasTestPTX), "sm_90a", false)
	if err == nil || !strings.Contains(err.Error(), "killed after") || time.Since(t0) > 10*time.Second {
		t.Errorf("hanging ptxas: %v after %v (want killed after %v)", err, time.Since(t0), ptxasTimeout)
	}
	loud := &ptxasCompiler{path: script("loud", "head -c 3000000 /dev/zero | tr '\\0' x; exit 1\n"), version: "fake"}
	_, err = loud.compile("k", []byte(ptxasTestPTX), "sm_90a", false)
	if err == nil || len(err.Error()) > 70<<10 || !strings.Contains(err.Error(), "more bytes") {
		t.Errorf("3 MB of output: %d-byte error (want at most ~64 KiB and the count of the rest)", len(err.Error()))
	}
	flaky := filepath.Join(dir, "flaky")
	t.Setenv(PtxasEnv, flaky)
	if _, err := ptxasFromEnv(); err == nil {
		t.Fatal("a missing ptxas was accepted")
	}
	if err := os.WriteFile(flaky, []byte("#!/bin/sh\necho 'ptxas: fake, V0.0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if c, err := ptxasFromEnv(); err != nil || c == nil {
		t.Errorf("after the ptxas appeared: %v, %v (a failure was remembered)", c, err)
	}
}
