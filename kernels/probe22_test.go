package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe22GroupedShiftDivision: GemmSM90GroupedConfig embeds GemmSM90Config's
// ShiftDivision, Check took it, and GemmSM90Grouped ignored it: the kernel kept its div and
// rem by constants and its Name was the option-less one's (ops' plan and function caches,
// keyed by the name, took one for the other). Now the grouped kernel honours it and names it
// "_sdiv", as gemm_sm90 does (ptxas assembles it). Probe 22.
func TestProbe22GroupedShiftDivision(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	divPow2 := regexp.MustCompile(`(div|rem)\.u32 [^,]+, [^,]+, (2|4|8|16|32|64|128|256);`)
	for _, masked := range []bool{false, true} {
		var names [2]string
		var divs [2]int
		for i, on := range []bool{false, true} {
			cfg := DefaultGemmSM90GroupedConfig(dsl.BF16)
			cfg.Masked = masked
			cfg.ShiftDivision = on
			k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
			GemmSM90Grouped(k, cfg)
			m, err := k.Build()
			if err != nil {
				t.Fatalf("masked %v, ShiftDivision %v: %v", masked, on, err)
			}
			names[i] = cfg.Name()
			divs[i] = len(divPow2.FindAllString(m.String(), -1))
			probe22Ptxas(t, ptxas, cfg.Name(), m)
		}
		if names[0] == names[1] || !strings.Contains(names[1], "_sdiv") {
			t.Errorf("masked %v: names %q and %q: want ShiftDivision's own \"_sdiv\"", masked, names[0], names[1])
		}
		if divs[0] == 0 || divs[1] != 0 {
			t.Errorf("masked %v: %d divisions by powers of two without ShiftDivision, %d with: want some, then none", masked, divs[0], divs[1])
		}
	}
}

// TestProbe22FusedShiftDivision: the sm_90a fused kernels (ag_gemm_sm90, gemm_rs_sm90,
// gemm_ar_sm90, gemm_ar_mc_sm90) took a GemmSM90Config with ShiftDivision and ignored it:
// their PTX was the option-less one's while FusedSM90Name named it "_sdiv". Now they honour
// it (their divisions by constant powers of two become shifts). Probe 22.
func TestProbe22FusedShiftDivision(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	divPow2 := regexp.MustCompile(`(div|rem)\.u32 [^,]+, [^,]+, (2|4|8|16|32|64|128|256);`)
	for _, f := range []struct {
		fam   Family
		build func(*dsl.Kernel, GemmSM90Config)
	}{{FamilyAGGemmSM90, AGGemmSM90}, {FamilyGemmRSSM90, GemmRSSM90}, {FamilyGemmARSM90, GemmARSM90}, {FamilyGemmARMCSM90, GemmARMCSM90}} {
		var divs [2]int
		name := ""
		for i, on := range []bool{false, true} {
			cfg := DefaultGemmSM90Config(dsl.BF16)
			cfg.ShiftDivision = on
			name = FusedSM90Name(f.fam, cfg)
			k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
			f.build(k, cfg)
			m, err := k.Build()
			if err != nil {
				t.Fatalf("%s ShiftDivision %v: %v", f.fam, on, err)
			}
			divs[i] = len(divPow2.FindAllString(m.String(), -1))
			probe22Ptxas(t, ptxas, name, m)
		}
		if divs[0] == 0 || divs[1] != 0 {
			t.Errorf("%s: %d divisions by powers of two without ShiftDivision, %d with (named %s): want some, then none", f.fam, divs[0], divs[1], name)
		}
	}
}

// probe22Ptxas assembles m for sm_90a, reporting ptxas's refusal under name.
func probe22Ptxas(t *testing.T, ptxas, name string, m *ptx.Module) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ptxas, "-arch=sm_90a", f, "-o", f+".cubin").CombinedOutput(); err != nil {
		t.Errorf("%s: ptxas: %v: %s", name, err, out)
	}
}

// TestProbe22FusedMinBlocks: ag_gemm_nvshmem took a GemmConfig with MinBlocks and ignored it
// (no .maxntid/.minnctapersm: ptxas's registers were not capped) while FusedName called it
// "_b2"; the other mma.sync gemms declare it. Now every one does. Probe 22.
func TestProbe22FusedMinBlocks(t *testing.T) {
	for _, f := range []struct {
		name  string
		build func(*dsl.Kernel, GemmConfig)
	}{{"gemm", Gemm}, {"ag_gemm", AGGemm}, {"gemm_rs", GemmRS}, {"gemm_ar", GemmAR}, {"gemm_ar_mc", GemmARMC}, {"ag_gemm_nvshmem", AGGemmNVSHMEM}} {
		cfg := DefaultFusedConfig(dsl.BF16)
		cfg.MinBlocks = 2
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		f.build(k, cfg)
		m, err := k.Build()
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if s := m.String(); !strings.Contains(s, ".minnctapersm 2") || !strings.Contains(s, ".maxntid 128") {
			t.Errorf("%s with MinBlocks 2 (named %s): no .maxntid 128 and .minnctapersm 2 in its PTX", f.name, FusedName(Family(f.name), cfg))
		}
	}
}

// TestProbe22GemmLayoutEnum: GemmConfig.Check took an A or B layout that is neither RowMajor
// nor ColMajor (MatrixLayout(2), -1, 7), named the kernel "gemm_..._Mr_..." and Gemm failed
// deep inside with "MakeTensorDyn: 2 extents and 0 strides"; now Check, and so the build,
// names the field and the two layouts. Probe 22.
func TestProbe22GemmLayoutEnum(t *testing.T) {
	for _, l := range []MatrixLayout{2, -1, 7} {
		for _, operand := range []string{"A", "B"} {
			cfg := DefaultGemmConfig(dsl.BF16)
			if operand == "A" {
				cfg.A = l
			} else {
				cfg.B = l
			}
			want := "gemm: " + operand + " layout " + l.String() + ": want RowMajor or ColMajor"
			if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %v: Check = %v; want %q", operand, l, err, want)
			}
			k := dsl.New("k", dsl.WithTarget(ptx.SM90))
			Gemm(k, cfg)
			if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %v: Build = %v; want %q", operand, l, err, want)
			}
		}
	}
}
