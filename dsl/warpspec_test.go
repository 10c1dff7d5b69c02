package dsl_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// attnD, attnKV and attnStages are the warp-specialized attention's head dimension, K/V
// tile rows and ring stages.
const attnD, attnKV, attnStages = 64, 64, 2

// attentionKernel is docs/dsl.md's "Warp-specialized kernels on sm_90a": one 64-row Q block
// of FlashAttention's forward pass, O = softmax(Q K^T / 8) V over kvLen keys. Warpgroup 0
// produces (TMA loads of Q once, of K and V tiles through a stage ring), warpgroup 1 consumes
// (S = Q K^T from shared memory, the online softmax over the AccView's rows, O += P V with P
// from registers). O (64 x attnD, f32) is stored row-major.
func attentionKernel(k *dsl.Kernel, kvLen int) {
	tmQ, tmK, tmV := k.TensorMapParam("tmq", dsl.BF16), k.TensorMapParam("tmk", dsl.BF16), k.TensorMapParam("tmv", dsl.BF16)
	out := k.PtrParam("o", dsl.F32)
	tile := func(major dsl.GMMAMajor, mn, kk, stages int) dsl.SharedTile {
		la, _ := dsl.GMMALayoutAtom(dsl.BF16, major, 128)
		l, _ := dsl.TileToShape(la, mn, kk)
		return k.SharedTile(dsl.BF16, l, stages)
	}
	sQ := tile(dsl.KMajor, 64, attnD, 1)
	sK := tile(dsl.KMajor, attnKV, attnD, attnStages)  // K rows: B of S = Q K^T
	sV := tile(dsl.MNMajor, attnD, attnKV, attnStages) // V rows, d contiguous: B of O = P V
	cQ, cK, cV := k.MakeTMACopy(tmQ, sQ), k.MakeTMACopy(tmK, sK), k.MakeTMACopy(tmV, sV)
	atomS, _ := dsl.MakeGMMAAtom(dsl.BF16, attnKV)
	atomO, _ := dsl.MakeGMMAAtom(dsl.BF16, attnD)
	qk, pv := dsl.MakeTiledGMMA(atomS, 1), dsl.MakeTiledGMMA(atomO, 1)
	k.LaunchBounds(256, 1) // registers at entry fixed (65536 / 256), so ptxas honours setmaxnreg
	tid := k.ThreadIdx(dsl.X)
	qBar := k.Mbarriers(1).At(0)
	k.If(tid.Eq(uint32(0)), func() { qBar.Init(1) })
	pipe := k.MakeTMAPipeline(attnStages, 128, cK, cV) // inits its barriers (and qBar's), SyncThreads
	tiles := kvLen / attnKV

	k.If(tid.Lt(uint32(128)), func() { // the producer warpgroup
		k.WarpgroupRegDealloc(40)
		k.If(tid.Lt(uint32(32)).And(k.ElectOne()), func() {
			qBar.ArriveExpectTx(cQ.Bytes)
			cQ.Load(qBar, 0, 0, 0)
			st := pipe.ProducerState()
			k.For(0, tiles, 1, func(j dsl.Value) {
				pipe.ProducerAcquire(st) // the stage is empty; its full barrier expects K's and V's bytes
				pipe.Load(st, cK, j.Mul(int32(attnKV)), 0)
				pipe.Load(st, cV, 0, j.Mul(int32(attnKV)))
				pipe.ProducerCommit(st)
				st.Advance()
			})
		})
	}).Else(func() { // the consumer warpgroup
		k.WarpgroupRegAlloc(232)
		t := tid.And(uint32(127))
		vs, vo := qk.AccView(k, t), pv.AccView(k, t) // rows of S and O: the same two per thread
		rowMax := []dsl.Value{k.Var(dsl.F32, math.Inf(-1)), k.Var(dsl.F32, math.Inf(-1))}
		rowSum := []dsl.Value{k.Var(dsl.F32, 0), k.Var(dsl.F32, 0)}
		accS, accO := qk.Accumulators(k), pv.Accumulators(k)
		qBar.Wait(0)
		st := pipe.ConsumerState()
		k.For(0, tiles, 1, func(j dsl.Value) {
			pipe.ConsumerWait(st)
			qk.Accumulating(k.Const(dsl.Bool, false)).Gemm(k, 0, sQ, sK.StageView(st.Index), 0, accS) // S = Q K^T
			k.WaitGroup(0)
			mx := vs.RowReduce(accS, dsl.Max) // over the 64 columns: registers, then the quad's lanes
			p := make([]dsl.Value, atomS.AccRegs())
			scale := make([]dsl.Value, 2)
			for r, regs := range vs.Rows() {
				m := rowMax[r].Max(mx[r])
				scale[r] = rowMax[r].Sub(m).Mul(float32(0.125)).Exp2() // 0 on the first tile
				for _, i := range regs {
					p[i] = accS.Get(i).Sub(m).Mul(float32(0.125)).Exp2()
				}
				k.Set(rowMax[r], m)
			}
			sum := vs.RowReduce(k.FragmentOf(p...), dsl.Sum)
			for r, regs := range vo.Rows() {
				k.Set(rowSum[r], rowSum[r].Mul(scale[r]).Add(sum[r]))
				for _, i := range regs {
					k.Set(accO.Get(i), accO.Get(i).Mul(scale[r]))
				}
			}
			pA := qk.AccToA(k, k.FragmentOf(p...), dsl.BF16) // P as wgmma's A registers
			pv.GemmRS(k, pA, sV, st.Index, accO)             // O += P V
			k.WaitGroup(0)
			pipe.ConsumerRelease(st)
			st.Advance()
		})
		row, col := vo.Row(), vo.Col()
		for r, regs := range vo.Rows() {
			inv := rowSum[r].Rcp()
			for _, i := range regs {
				at := row.Add(uint32(vo.RowOff[i])).Mul(uint32(attnD)).Add(col.Add(uint32(vo.ColOff[i])))
				k.Store(out.At(at), accO.Get(i).Mul(inv))
			}
		}
	})
}

// TestWarpSpecializedAttention runs attentionKernel over 256 keys (4 tiles through a 2-stage
// ring) on the emulator against a float64 softmax attention, and assembles it for sm_90a.
func TestWarpSpecializedAttention(t *testing.T) {
	for _, kvLen := range []int{64, 256} {
		t.Run(fmt.Sprint("kv", kvLen), func(t *testing.T) { testAttention(t, kvLen) })
	}
}

func testAttention(t *testing.T, kvLen int) {
	k := dsl.New("attn", dsl.WithTarget(ptx.SM90a))
	attentionKernel(k, kvLen)
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	d := newAttnData(kvLen)
	alloc := func(b []byte) uint64 {
		p, err := sys.Malloc(0, len(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := emu.WriteSlice(sys, p, b); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gq, gk, gv, gout := alloc(d.qb), alloc(d.kb), alloc(d.vb), alloc(make([]byte, 4*64*attnD))
	tmap := func(g uint64, rows int) emu.TensorMap {
		return emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{attnD, uint64(rows)},
			Strides: [5]uint64{0, 2 * attnD}, Box: [5]uint32{64, 64}, Swizzle: 128}
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "attn", Grid: emu.D1(1), Block: emu.D1(256),
		Args: []any{tmap(gq, 64), tmap(gk, kvLen), tmap(gv, kvLen), gout}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[float32](sys, gout, 64*attnD)
	if err != nil {
		t.Fatal(err)
	}
	d.check(t, got)
}

// attnData is attentionKernel's inputs as floats and bf16 bytes, row-major: Q (64 x attnD),
// K and V (kvLen x attnD). Every tensor map is (attnD, rows) innermost first with 64 x 64
// boxes and the 128-byte swizzle: Q and K K-major tiles, V an MN-major one over the same
// row-major storage.
type attnData struct {
	kvLen      int
	qf, kf, vf []float64
	qb, kb, vb []byte
}

func newAttnData(kvLen int) attnData {
	d := attnData{kvLen: kvLen}
	d.qf, d.qb = elems(dsl.BF16, 64*attnD, 1)
	d.kf, d.kb = elems(dsl.BF16, kvLen*attnD, 2)
	d.vf, d.vb = elems(dsl.BF16, kvLen*attnD, 3)
	for i := range d.qf { // smaller scores: a softmax over several keys, not one
		d.qf[i] /= 4
		h := fp.F32ToBF16(float32(d.qf[i]))
		d.qb[2*i], d.qb[2*i+1] = byte(h), byte(h>>8)
	}
	return d
}

// check compares O (64 x attnD, row-major) with a float64 softmax attention.
func (d attnData) check(t *testing.T, got []float32) {
	t.Helper()
	bad := 0
	for i := 0; i < 64; i++ {
		s := make([]float64, d.kvLen)
		mx := math.Inf(-1)
		for j := range s {
			for x := 0; x < attnD; x++ {
				s[j] += d.qf[i*attnD+x] * d.kf[j*attnD+x]
			}
			mx = max(mx, s[j])
		}
		sum := 0.0
		for j := range s {
			s[j] = math.Exp2((s[j] - mx) / 8)
			sum += s[j]
		}
		for c := 0; c < attnD; c++ {
			want, mag := 0.0, 0.0
			for j := range s {
				want += s[j] * d.vf[j*attnD+c]
				mag += math.Abs(s[j] * d.vf[j*attnD+c])
			}
			want, mag = want/sum, mag/sum
			// P is rounded to bf16 (2^-9 relative) before P V.
			if g := float64(got[i*attnD+c]); math.Abs(g-want) > 4e-3*mag+1e-6 {
				if bad < 5 {
					t.Errorf("O[%d][%d] = %g, want %g", i, c, g, want)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements differ", bad, 64*attnD)
	}
}

// TestWarpSpecializedPtxas assembles the attention kernel and the RS chains with ptxas -v:
// no spills and no wgmma performance warning (serialized wgmmas, injected waits, setmaxnreg
// ignored).
func TestWarpSpecializedPtxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	spills := regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
	check := func(name string, k *dsl.Kernel) {
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "k.ptx")
		if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", f, "-o", f+".cubin").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: ptxas: %v: %s", name, err, out)
		}
		for _, w := range []string{"C7508", "C7517", "C7510", "Potential Performance Loss"} {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: ptxas warns: %s", name, out)
				break
			}
		}
		if s := spills.FindStringSubmatch(string(out)); s == nil || s[1] != "0" || s[2] != "0" {
			t.Errorf("%s: spills (or no counts) in ptxas -v: %s", name, out)
		}
	}
	k := dsl.New("attn", dsl.WithTarget(ptx.SM90a))
	attentionKernel(k, 1024)
	check("attention", k)
	for _, c := range attnChains {
		check(c.String(), c.build(t))
	}
}
