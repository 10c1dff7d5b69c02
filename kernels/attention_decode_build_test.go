package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestAttentionDecodeBuilds builds the default decode kernel of every type, head dim and
// several page sizes and row counts, with and without PrefetchPages, and the combine
// kernel.
func TestAttentionDecodeBuilds(t *testing.T) {
	for _, dt := range []dsl.Type{dsl.F16, dsl.BF16} {
		for _, d := range []int{64, 128, 256} {
			for _, ps := range []int{16, 32, 64, 256} {
				for _, rows := range []int{1, 32} {
					for _, pf := range []bool{false, true} {
						cfg := DefaultAttentionDecodeConfig(dt, d, ps, rows)
						cfg.PrefetchPages = pf
						k := dsl.New(cfg.Name())
						AttentionDecode(k, cfg)
						if _, err := k.Build(); err != nil {
							t.Errorf("%s: %v", cfg.Name(), err)
						}
					}
				}
			}
			k := dsl.New(AttentionDecodeCombineName(dt, d))
			AttentionDecodeCombine(k, dt, d)
			if _, err := k.Build(); err != nil {
				t.Errorf("combine %s d%d: %v", dt, d, err)
			}
		}
	}
}

// TestAttentionDecodeAssembles assembles the default decode kernels (bf16, head dims 64,
// 128 and 256, 16 and 32 rows; at head dim 128 and 16 rows also with 2 stages and with
// PrefetchPages) and the combine kernel with ptxas for sm_80 and sm_90 and requires no
// spills and, for the decode kernels, no more registers than Registers (which BlocksPerSM
// counts); it logs the registers.
func TestAttentionDecodeAssembles(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	dir := t.TempDir()
	spills := regexp.MustCompile(`(\d+) bytes spill stores`)
	regs := regexp.MustCompile(`Used (\d+) registers`)
	type kern struct {
		name  string
		write func(*dsl.Kernel)
		regs  int // the most registers allowed (0: 255)
	}
	var ks []kern
	decode := func(cfg AttentionDecodeConfig) {
		ks = append(ks, kern{cfg.Name(), func(k *dsl.Kernel) { AttentionDecode(k, cfg) }, cfg.Registers()})
	}
	for _, d := range []int{64, 128, 256} {
		for _, rows := range []int{1, 32} {
			decode(DefaultAttentionDecodeConfig(dsl.BF16, d, 16, rows))
		}
		ks = append(ks, kern{AttentionDecodeCombineName(dsl.BF16, d), func(k *dsl.Kernel) { AttentionDecodeCombine(k, dsl.BF16, d) }, 0})
	}
	for _, c := range []struct{ stages, prefetch bool }{{true, false}, {false, true}, {true, true}} {
		cfg := DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 1)
		if c.stages {
			cfg.Stages = 2
		}
		cfg.PrefetchPages = c.prefetch
		decode(cfg)
	}
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		for _, kk := range ks {
			k := dsl.New(kk.name, dsl.WithTarget(target))
			kk.write(k)
			m, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, kk.name+"_"+string(target)+".ptx")
			var src bytes.Buffer
			if err := ptx.Print(&src, m); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, src.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ptxas, "-v", "-arch="+string(target), f, "-o", f+".cubin").CombinedOutput()
			if err != nil {
				t.Errorf("ptxas rejects %s for %s: %v\n%s", kk.name, target, err, out)
				continue
			}
			r, s := regs.FindSubmatch(out), spills.FindSubmatch(out)
			if r == nil || s == nil {
				t.Errorf("%s %s: no register or spill count in ptxas's output:\n%s", kk.name, target, out)
				continue
			}
			t.Logf("%s %s: %s registers, %s bytes of spill stores", kk.name, target, r[1], s[1])
			if string(s[1]) != "0" {
				t.Errorf("%s %s spills %s bytes", kk.name, target, s[1])
			}
			if n, _ := strconv.Atoi(string(r[1])); kk.regs > 0 && n > kk.regs {
				t.Errorf("%s %s uses %d registers; Registers (BlocksPerSM's count) says %d", kk.name, target, n, kk.regs)
			}
		}
	}
}
