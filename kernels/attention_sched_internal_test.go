package kernels

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// attnModelShape is one problem of the cost model: FlashAttention-3's benchmark protocol
// (16k tokens: batch = 16384/seqlen, heads*d = 2048), causal.
type attnModelShape struct{ d, seq, heads, batch int }

func attnModelShapes() []attnModelShape {
	var out []attnModelShape
	for _, d := range []int{64, 128, 256} {
		for _, s := range []int{1024, 2048, 4096, 8192, 16384} {
			out = append(out, attnModelShape{d: d, seq: s, heads: 2048 / d, batch: 16384 / s})
		}
	}
	return out
}

// maxOverMean returns max(sum)/mean(sum) and max(sum) - min(sum).
func maxOverMean(sum []int) (float64, int) {
	total := 0
	for _, x := range sum {
		total += x
	}
	return float64(slices.Max(sum)) * float64(len(sum)) / float64(total), slices.Max(sum) - slices.Min(sum)
}

// TestAttentionScheduleCostModel computes, with ModelKeyTiles, each block's summed key tiles
// (a causal tile's cost) for the realistic shapes of attnModelShapes on 132, 114 and 78
// SMs (H100/H200 SXM, H100 PCIe, H20-class), and logs max/mean per schedule: the strided
// walk (the old order), AttentionLPT's snake, AttentionDynamic (a greedy model of the
// counter) and the non-persistent grid (a greedy model of the GPU's block scheduler).
//
// Asserted: (1) AttentionLPT's max - min is at most the longest tile's key tiles at every
// shape. Proof: over a non-increasing cost sequence c (padded with zeros to whole rounds),
// blocks b and b+1 take c[2rG+b] + c[2rG+2G-1-b] and c[2rG+b+1] + c[2rG+2G-2-b] in rounds
// 2r and 2r+1, so their totals differ by at most the sum over r of the larger of the two
// steps c[i]-c[i+1] at 2rG+b and 2rG+2G-2-b, and summing those steps over b telescopes to
// at most c[0]. AttentionDynamic's greedy model keeps Graham's bound max <= mean + c[0]. (2)
// Where every block takes at least 4 tiles (all these shapes), AttentionLPT's max/mean is at
// most 1.10 (the brief's target; the proven bound alone allows 1 + c[0]*G/total, up to 1.26
// at d 256 16k), and below the strided walk's. (3) The strided walk is the imbalance the GPU
// measured: a third slower at d 128 16k on 132 SMs is max/mean >= 1.5 here.
func TestAttentionScheduleCostModel(t *testing.T) {
	var log strings.Builder
	fmt.Fprintf(&log, "max/mean of the blocks' key tiles (causal, bf16, BM 128; BN 128, 64 at d 256)\n")
	fmt.Fprintf(&log, "(lpt-ns: AttentionLPT's order strided without the snake, for comparison; grid: not Persistent)\n")
	fmt.Fprintf(&log, "%4s %5s %6s %5s %6s %7s | %8s %8s %8s %8s %8s\n", "sms", "d", "seq", "heads", "batch", "tiles", "strided", "lpt-ns", "lpt", "dynamic", "grid")
	for _, sms := range []int{132, 114, 78} {
		for _, sh := range attnModelShapes() {
			cfg := DefaultAttentionSM90Config(dsl.BF16, sh.d, true)
			cfg.Persistent = true
			tiles := cfg.Grid(sh.batch, sh.heads, sh.seq)
			cmax := cfg.attnKeyTiles(ceilDiv(sh.seq, cfg.BM())-1, sh.seq, sh.seq)
			ratio := map[AttentionSchedule]float64{}
			for _, s := range []AttentionSchedule{AttentionStrided, AttentionLPT, AttentionDynamic} {
				c := cfg
				c.Schedule = s
				r, spread := maxOverMean(c.ModelKeyTiles(sh.batch, sh.heads, sh.seq, sh.seq, sms))
				ratio[s] = r
				if s != AttentionStrided && spread > cmax {
					t.Errorf("%d SMs %+v: %s max - min = %d key tiles, more than the longest tile's %d", sms, sh, s, spread, cmax)
				}
			}
			grid := cfg
			grid.Persistent = false
			rg, _ := maxOverMean(grid.ModelKeyTiles(sh.batch, sh.heads, sh.seq, sh.seq, sms))
			noSnake := make([]int, min(tiles, sms))
			for tl := range tiles {
				lpt := cfg
				lpt.Schedule = AttentionLPT
				mt, _ := lpt.attnHostTile(tl, ceilDiv(sh.seq, cfg.BM()), sh.batch*sh.heads, sh.batch*sh.heads)
				noSnake[tl%len(noSnake)] += cfg.attnKeyTiles(mt, sh.seq, sh.seq)
			}
			rn, _ := maxOverMean(noSnake)
			fmt.Fprintf(&log, "%4d %5d %6d %5d %6d %7d | %8.3f %8.3f %8.3f %8.3f %8.3f\n", sms, sh.d, sh.seq, sh.heads, sh.batch, tiles,
				ratio[AttentionStrided], rn, ratio[AttentionLPT], ratio[AttentionDynamic], rg)
			if tiles >= 4*sms && ratio[AttentionLPT] > 1.10 {
				t.Errorf("%d SMs %+v: AttentionLPT max/mean %.3f, want <= 1.10", sms, sh, ratio[AttentionLPT])
			}
			if ratio[AttentionLPT] > ratio[AttentionStrided] {
				t.Errorf("%d SMs %+v: AttentionLPT max/mean %.3f above the strided walk's %.3f", sms, sh, ratio[AttentionLPT], ratio[AttentionStrided])
			}
			if sms == 132 && sh.d == 128 && sh.seq == 16384 && ratio[AttentionStrided] < 1.5 {
				t.Errorf("the strided walk at d 128 16k on 132 SMs: max/mean %.3f; the GPU ran it a third slower", ratio[AttentionStrided])
			}
		}
	}
	t.Log(log.String())
}

// TestAttentionScheduleHostModel checks the host model's orders (ModelKeyTiles' tiles) on
// their own: every work tile is one (query tile, batch*heads) pair and every pair one tile
// (AttentionLPT: for sections of 1, 2, 3 and every pair, and longest first within each),
// and a static walk gives each tile to one block, at shapes off the tiles.
func TestAttentionScheduleHostModel(t *testing.T) {
	for _, s := range []AttentionSchedule{AttentionStrided, AttentionLPT} {
		for _, causal := range []bool{false, true} {
			cfg := AttentionSM90Config{Consumers: 2, Causal: causal, Schedule: s, Persistent: true}
			for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {2, 16, 128}, {16, 16, 8}} {
				tilesM, pairs := sh[2], sh[0]*sh[1]
				tiles := tilesM * pairs
				for _, section := range []int{1, 2, 3, pairs} {
					section = min(section, pairs)
					seen := map[[2]int]bool{}
					for tl := range tiles {
						mt, bh := cfg.attnHostTile(tl, tilesM, pairs, section)
						if mt < 0 || mt >= tilesM || bh < 0 || bh >= pairs || seen[[2]int{mt, bh}] {
							t.Fatalf("%s causal %v %v section %d: tile %d -> (%d, %d): out of range or taken twice", s, causal, sh, section, tl, mt, bh)
						}
						seen[[2]int{mt, bh}] = true
						if s == AttentionStrided || tl%(section*tilesM) == 0 {
							continue
						}
						if prev, _ := cfg.attnHostTile(tl-1, tilesM, pairs, section); prev < mt {
							t.Fatalf("%s %v section %d: tile %d -> (%d, %d) after query tile %d: not longest first within its section", s, sh, section, tl, mt, bh, prev)
						}
					}
				}
				for _, grid := range []int{1, 3, 7, tiles} {
					got := make([]int, tiles)
					for b := range grid {
						for _, tl := range cfg.attnHostWalk(b, grid, tiles) {
							got[tl]++
						}
					}
					for tl, n := range got {
						if n != 1 {
							t.Fatalf("%s %v grid %d: tile %d walked %d times", s, sh, grid, tl, n)
						}
					}
				}
			}
		}
	}
}

// attnWalkArgs are the parameters of the test kernel that records a static walk.
type attnWalkArgs struct {
	Out                               dsl.Ptr   `kgen:"u32"`
	Batch, Heads, KVHeads, SeqQ, SeqK dsl.Value `kgen:"u32"`
}

// attnWalkSectionKeys is the walk kernel's section budget in keys: sections of 1 to 5 K/V
// heads at its shapes.
const attnWalkSectionKeys = 700

// attnWalkFields is what the walk kernel stores per work tile.
const attnWalkFields = 8

// TestAttentionScheduleKernelWalk runs the kernel's own walk and tile map (attnStaticWalk,
// attnTileMap: what AttentionSM90 emits) on the emulator and checks them against the host
// model that TestAttentionScheduleCostModel measures: for each work tile the block that
// took it, its place in the block's walk, its query tile, (batch, head), head, batch and
// K/V head, and that it was taken once. AttentionDynamic's tile map (its L2 sections) is
// walked in AttentionLPT's snake here: its counter hands the same numbers out.
func TestAttentionScheduleKernelWalk(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range []AttentionSchedule{AttentionStrided, AttentionLPT, AttentionDynamic} {
		for _, causal := range []bool{false, true} {
			cfg := AttentionSM90Config{Consumers: 2, Causal: causal, Schedule: s, Persistent: true}
			name := fmt.Sprintf("walk_%s_%v", s, causal)
			k := dsl.New(name, dsl.WithTarget(ptx.SM90a))
			p := dsl.Params[attnWalkArgs](k, dsl.U32)
			a := AttentionArgs{Batch: p.Batch, Heads: p.Heads, KVHeads: p.KVHeads, SeqQ: p.SeqQ, SeqK: p.SeqK}
			bm := cfg.BM()
			k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
				tiles := a.SeqQ.Add(uint32(bm - 1)).Div(uint32(bm)).Mul(a.Heads).Mul(a.Batch)
				step := k.Var(dsl.U32, 0)
				attnStaticWalk(k, s, tiles, func(tl dsl.Value) {
					mt, bh, h, b, hkv := attnTileMap(k, a, bm, causal, s, attnWalkSectionKeys, tl)
					o := p.Out.At(tl.Mul(uint32(attnWalkFields)))
					for i, v := range []dsl.Value{k.BlockIdx(dsl.X), step, mt, bh, h, b, hkv} {
						k.Store(o.At(i), v)
					}
					k.Atomic(dsl.AtomAdd, o.At(attnWalkFields-1), uint32(1))
					k.Set(step, step.Add(uint32(1)))
				})
			})
			mod, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(k.Params())}})
			if err != nil {
				t.Fatal(err)
			}
			fn, err := jm.Function(name)
			if err != nil {
				t.Fatal(err)
			}
			// (batch, heads, kvHeads, seqQ, seqK, grid): tiles off the grid, one tile, GQA;
			// sections of 1 (a last one short), 2 (of 4 pairs: GQA 4) and 5 K/V heads, one
			// section of every pair.
			for _, sh := range [][6]int{{1, 1, 1, 1, 1, 1}, {2, 3, 3, 300, 300, 4}, {3, 4, 1, 129, 300, 5}, {2, 8, 2, 1000, 1000, 7}, {1, 2, 2, 640, 2000, 10}, {4, 3, 3, 200, 129, 6}} {
				B, H, HK, SQ, SK, grid := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
				section := B * H
				if s == AttentionDynamic {
					section = attnSectionPairs(B*H, H/HK, SK, attnWalkSectionKeys)
				}
				tilesM := ceilDiv(SQ, bm)
				tiles := tilesM * B * H
				out, err := jit.Alloc[uint32](d, tiles*attnWalkFields)
				if err == nil {
					err = out.CopyFromHost(make([]uint32, tiles*attnWalkFields))
				}
				if err != nil {
					t.Fatal(err)
				}
				err = fn.Launch(jit.LaunchConfig{Grid: jit.D1(grid), Block: jit.D1(32)}, out, uint32(B), uint32(H), uint32(HK), uint32(SQ), uint32(SK))
				got := make([]uint32, tiles*attnWalkFields)
				if err == nil {
					err = out.CopyToHost(got)
				}
				out.Free()
				if err != nil {
					t.Fatal(err)
				}
				want := make([]uint32, tiles*attnWalkFields)
				for b := range grid {
					for i, tl := range cfg.attnHostWalk(b, grid, tiles) {
						mt, bh := cfg.attnHostTile(tl, tilesM, B*H, section)
						h := bh % H
						copy(want[tl*attnWalkFields:], []uint32{uint32(b), uint32(i), uint32(mt), uint32(bh), uint32(h), uint32(bh / H), uint32(h / (H / HK)), 1})
					}
				}
				for tl := range tiles {
					g, w := got[tl*attnWalkFields:][:attnWalkFields], want[tl*attnWalkFields:][:attnWalkFields]
					if !slices.Equal(g, w) {
						t.Errorf("%s causal %v %v: tile %d: kernel (block, step, mt, bh, h, b, hkv, visits) %v, host model %v", s, causal, sh, tl, g, w)
						break
					}
				}
			}
			jm.Close()
		}
	}
}
