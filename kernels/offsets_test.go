package kernels

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

var (
	ptxReg   = regexp.MustCompile(`%[a-z]+[0-9]+`)
	ptxInstr = regexp.MustCompile(`^\s*(@!?%p[0-9]+\s+)?([a-z][a-z0-9_.:]*)\s+(.*);\s*$`)
)

// narrowLdProducts returns, for each global load or store of C or D (the c and d
// parameters) in the kernel's PTX, the 32-bit products (mul.lo / mad.lo: any .s32; .u32 or
// .b32 of two registers) of the ld parameter (or a copy of it: mov, cvt) that its address depends on: an element offset row*ld computed in 32 bits, which
// wraps (or turns negative) once a matrix holds 2^32 (2^31) elements. The slice over-
// approximates: every definition of a register counts.
func narrowLdProducts(t *testing.T, text, ld string) []string {
	t.Helper()
	return narrowProducts(t, text, func(op, args string) bool {
		return op == "ld.param.u32" && strings.HasSuffix(args, "["+ld+"]")
	}, "c", "d")
}

// narrowProducts is narrowLdProducts for the registers root picks (an instruction's
// opcode and operands; their copies count too) and the global accesses through the
// pointer parameters outs.
func narrowProducts(t *testing.T, text string, root func(op, args string) bool, outs ...string) []string {
	defs := map[string][]string{} // register -> the instructions defining it
	ldRegs := map[string]bool{}
	var access []string
	for _, line := range strings.Split(text, "\n") {
		m := ptxInstr.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		op, args := m[2], m[3]
		if root(op, args) {
			ldRegs[ptxReg.FindString(args)] = true
		}
		if strings.HasPrefix(op, "ld.global") || strings.HasPrefix(op, "st.global") {
			access = append(access, strings.TrimSpace(line))
		}
		if strings.HasPrefix(op, "st.") || strings.HasPrefix(op, "bra") || strings.HasPrefix(op, "cp.") {
			continue
		}
		regs := ptxReg.FindAllString(args, -1)
		if len(regs) > 0 {
			defs[regs[0]] = append(defs[regs[0]], strings.TrimSpace(line))
		}
	}
	if len(ldRegs) == 0 {
		t.Fatalf("no root register in the PTX")
	}
	// Copies of the parameter.
	for changed := true; changed; {
		changed = false
		for r, ds := range defs {
			for _, d := range ds {
				m := ptxInstr.FindStringSubmatch(d)
				regs := ptxReg.FindAllString(m[3], -1)
				if (strings.HasPrefix(m[2], "mov.") || strings.HasPrefix(m[2], "cvt.")) && len(regs) == 2 && ldRegs[regs[1]] && !ldRegs[r] {
					ldRegs[r], changed = true, true
				}
			}
		}
	}
	// A signed 32-bit product turns negative at 2^31; an unsigned one of two registers (row
	// times a runtime extent) wraps at 2^32. (An unsigned product by a constant, such as a
	// tile index times the tile, stays below the u32 extent it indexes.)
	narrow := func(op, args string) bool {
		if !strings.HasPrefix(op, "mul.lo.") && !strings.HasPrefix(op, "mad.lo.") {
			return false
		}
		return strings.HasSuffix(op, ".s32") || strings.HasSuffix(op, "32") && len(ptxReg.FindAllString(args, -1)) >= 3
	}
	var bad []string
	seenBad := map[string]bool{}
	for _, a := range access {
		m := ptxInstr.FindStringSubmatch(a)
		addr := m[3][strings.Index(m[3], "[")+1 : strings.Index(m[3], "]")]
		work := ptxReg.FindAllString(addr, -1)
		seen := map[string]bool{}
		var found []string
		onOut := false // the address is C's or D's
		for len(work) > 0 {
			r := work[len(work)-1]
			work = work[:len(work)-1]
			if seen[r] {
				continue
			}
			seen[r] = true
			for _, d := range defs[r] {
				dm := ptxInstr.FindStringSubmatch(d)
				srcs := ptxReg.FindAllString(dm[3], -1)[1:]
				for _, o := range outs {
					if dm[2] == "ld.param.u64" && strings.HasSuffix(dm[3], "["+o+"]") {
						onOut = true
					}
				}
				if narrow(dm[2], dm[3]) {
					for _, s := range srcs {
						if ldRegs[s] {
							found = append(found, d)
						}
					}
				}
				work = append(work, srcs...)
			}
		}
		for _, d := range found {
			if onOut && !seenBad[d] {
				seenBad[d] = true
				bad = append(bad, d+"  (feeds "+a+")")
			}
		}
	}
	return bad
}

// TestGemmOffsets64 closes the class of 32-bit element offsets into C and D: in every
// library gemm (mma.sync in each layout and output type; gemm_sm90 in every configuration
// GemmSM90For can pick, with and without the TMA-store epilogue, 16-bit and fp8 inputs), no
// global load or store address depends on a 32-bit product of N, so row*N cannot wrap
// (gemm_sm90 at M*N >= 2^32) or turn negative (mma.sync at M*N >= 2^31); the row offset is
// a mul.wide.
func TestGemmOffsets64(t *testing.T) {
	type kern struct {
		name   string
		build  func(k *dsl.Kernel)
		target ptx.Target
	}
	var ks []kern
	for _, dt := range []dsl.Type{dsl.F16, dsl.BF16} {
		for _, out := range []dsl.Type{dt, dsl.F32} {
			for _, aligned := range []bool{true, false} {
				cfg := DefaultGemmConfig(dt)
				cfg.Out, cfg.Aligned = out, aligned
				ks = append(ks, kern{cfg.Name(), func(k *dsl.Kernel) { Gemm(k, cfg) }, ptx.SM80})
			}
		}
	}
	for _, io := range [][2]dsl.Type{{dsl.BF16, dsl.BF16}, {dsl.F16, dsl.F32}, {dsl.E4M3, dsl.BF16}} {
		for _, cfg := range GemmSM90Candidates(io[0], io[1]) {
			ks = append(ks, kern{cfg.Name(), func(k *dsl.Kernel) { GemmSM90(k, cfg) }, ptx.SM90a})
		}
	}
	for _, kk := range ks {
		k := dsl.New(kk.name, dsl.WithTarget(kk.target))
		kk.build(k)
		mod, err := k.Build()
		if err != nil {
			t.Fatalf("%s: %v", kk.name, err)
		}
		text := mod.String()
		if bad := narrowLdProducts(t, text, "n"); len(bad) > 0 {
			t.Errorf("%s: %d global addresses depend on a 32-bit product of N; first: %s", kk.name, len(bad), bad[0])
		}
		if !regexp.MustCompile(`mul\.wide\.u32\s+%ud[0-9]+, %u[0-9]+, %u1;`).MatchString(text) {
			t.Errorf("%s: no mul.wide.u32 of N (%%u1): the row offsets are not 64-bit", kk.name)
		}
	}
}

// TestGemmShapeLimits: the host-side checks accept the shapes whose offsets now fit (M*N
// past 2^31 for mma.sync, past 2^32 for gemm_sm90) and refuse, naming the limit, the ones
// the kernels cannot address (A or B of 2^31 elements for mma.sync, extents of 2^31).
func TestGemmShapeLimits(t *testing.T) {
	for _, c := range []struct {
		t       ptx.Target
		m, n, k int
		want    string // "" accepted
		family  Family
	}{
		{ptx.SM80, 46400, 46400, 64, "", FamilyGemm},        // M*N >= 2^31: D's row offsets are 64-bit
		{ptx.SM90a, 64, 67108872, 64, "", FamilyGemmSM90},   // M*N >= 2^32
		{ptx.SM90a, 46400, 46400, 64, "", FamilyGemmSM90},   // M*N >= 2^31
		{ptx.SM80, 1 << 16, 8, 1 << 15, "A (M x K)", ""},    // A of 2^31 elements
		{ptx.SM80, 8, 1 << 16, 1 << 15, "B (K x N)", ""},    // B of 2^31 elements
		{ptx.SM80, 1 << 31, 8, 8, "2^31-1", ""},             // an extent past int32
		{ptx.SM90a, 8, 1 << 31, 8, "2^31-1", ""},            // TMA coordinates
		{ptx.SM80, 1<<31 - 1, 1<<31 - 1, 1, "1-D grid", ""}, // too many tiles
		{ptx.SM80, 16, 16, 12, "", FamilyGemm},              // unaligned: the general kernel
		{ptx.SM80, 0, 16, 16, "must be positive", ""},       // empty
		{ptx.SM90a, 16, 16, -8, "must be positive", ""},     // negative
	} {
		g, err := ChooseGemm(c.t, dsl.F16, c.m, c.n, c.k, 132)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %dx%dx%d: %v", c.t, c.m, c.n, c.k, err)
		case c.want == "" && g.Family != c.family:
			t.Errorf("%s %dx%dx%d: %s, want %s", c.t, c.m, c.n, c.k, g.Family, c.family)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %dx%dx%d: err %v, want one naming %q", c.t, c.m, c.n, c.k, err, c.want)
		}
	}
	if g, err := ChooseGemm(ptx.SM80, dsl.F16, 16, 16, 12, 132); err == nil && g.Config.Aligned {
		t.Errorf("K = 12: the aligned kernel (needs multiples of 8) was chosen")
	}
}

// TestCopyOffsets64: tiled_copy's block offset bid*tile and transpose's tile offsets
// row0*ld are 64-bit (mul.wide), so no global address depends on a 32-bit product of the
// block index: the copy takes any u32 n (2^31 elements and more), the transpose any m, n up
// to MaxTransposeExtent (its in-tile offsets, 32 rows of ld, stay 32-bit).
func TestCopyOffsets64(t *testing.T) {
	ctaid := func(op, args string) bool { return op == "mov.u32" && strings.Contains(args, "%ctaid.") }
	for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.U8} {
		k := dsl.New("tiled_copy", dsl.WithTarget(ptx.SM90))
		TiledCopy(k, dt)
		mod, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		if bad := narrowProducts(t, mod.String(), ctaid, "src", "dst"); len(bad) > 0 {
			t.Errorf("tiled_copy %s: %d addresses depend on a 32-bit product of the block index; first: %s", dt, len(bad), bad[0])
		}
	}
	for _, dt := range []dsl.Type{dsl.F32, dsl.F16} {
		k := dsl.New("transpose", dsl.WithTarget(ptx.SM90))
		Transpose(k, dt)
		mod, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		if bad := narrowProducts(t, mod.String(), ctaid, "in", "out"); len(bad) > 0 {
			t.Errorf("transpose %s: %d addresses depend on a 32-bit product of the block index; first: %s", dt, len(bad), bad[0])
		}
	}
	for _, c := range []struct {
		m, n int
		ok   bool
	}{{1, 1, true}, {MaxTransposeExtent, 4, true}, {4, MaxTransposeExtent, true}, {MaxTransposeExtent + 1, 4, false}, {4, MaxTransposeExtent + 1, false}, {0, 4, false}, {4, -1, false}} {
		err := TransposeCheckShape(c.m, c.n)
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), "transpose") {
			t.Errorf("TransposeCheckShape(%d, %d) = %v, want ok %v", c.m, c.n, err, c.ok)
		}
	}
}

// TestFusedShapeLimit: the fused GEMMs' element offsets are 32-bit signed, so
// FusedCheckShape (which collectives' Comm and the emulator harnesses apply) refuses
// M*max(N,K)*GPUs from 2^31 on, naming the limit; the Comm used to refuse only from 2^32.
func TestFusedShapeLimit(t *testing.T) {
	for _, c := range []struct {
		m, n, k, g int
		ok         bool
	}{
		{1024, 1024, 1024, 8, true},
		{1 << 14, 1 << 14, 64, 7, true},  // 7*2^28 < 2^31
		{1 << 14, 1 << 14, 64, 8, false}, // 2^31: negative offsets
		{1 << 14, 64, 1 << 14, 8, false}, // through K (A's and the gathered A's offsets)
		{1 << 15, 1 << 15, 64, 4, false}, // past 2^32 too
		{0, 8, 8, 2, false},
		{8, 8, 8, 0, false},
	} {
		err := FusedCheckShape(c.m, c.n, c.k, c.g)
		if (err == nil) != c.ok || err != nil && c.m > 0 && c.g > 0 && !strings.Contains(err.Error(), "2^31") {
			t.Errorf("FusedCheckShape(%d, %d, %d, %d GPUs) = %v, want ok %v", c.m, c.n, c.k, c.g, err, c.ok)
		}
	}
}
