package ops

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// TestDecodeScratchBounded: a decode loop whose batch changes every step keeps a few
// scratch buffers a stream, not one per size, and stays right. Before: 12 batch sizes
// left 12 buffers (device memory that grew with every new batch size until the device
// closed).
func TestDecodeScratchBounded(t *testing.T) {
	d := emuDevice(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for b := 1; b <= 12; b++ {
		lens := make([]int, b)
		for i := range lens {
			lens[i] = 17 + 5*i
		}
		c := decCase{q: 1, h: 2, hk: 1, d: 64, ps: 16, ctx: lens, splits: 2}
		o := newDecode[fp.BF16](t, d, c, int64(b))
		if err := AttentionDecode(ctx, s, o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Splits: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		checkDecode(t, c, o, false)
	}
	n := 0
	decodeBufs.Range(func(k, _ any) bool {
		if k.(decodeKey).s == s {
			n++
		}
		return true
	})
	if n > 4 {
		t.Errorf("12 batch sizes left %d decode scratch buffers on the stream; want at most 4 (sizes rounded up to powers of two)", n)
	}
	for _, x := range [][2]int{{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1 << 20, 1 << 20}, {1<<20 + 1, 1 << 21}} {
		if got := ceilPow2(x[0]); got != x[1] {
			t.Errorf("ceilPow2(%d) = %d; want %d", x[0], got, x[1])
		}
	}
}

// TestDecodeHostileTables: block tables and lengths the device holds, hostile. Page ids
// outside [0, numPages) are reported by the emulator's sanitizer as an out-of-bounds read
// (documented: they are not checked on the host); negative lengths see no key (O 0, LSE
// -Inf) and lengths beyond the table's capacity count as its capacity, as documented.
func TestDecodeHostileTables(t *testing.T) {
	c := decCase{q: 1, h: 2, hk: 1, d: 64, ps: 16, ctx: []int{20, 30}}
	for _, tc := range []struct {
		name  string
		page  int32 // sequence 0's first page id, when not 0
		lens  []int32
		fault bool
	}{
		{name: "page -1", page: -1, fault: true},
		{name: "page 2^30", page: 1 << 30, fault: true},
		{name: "page numPages", page: 5, fault: true},
		{name: "length -5", lens: []int32{-5, 30}},
		{name: "length -2^31", lens: []int32{math.MinInt32, 30}},
		{name: "length 2^31-1", lens: []int32{math.MaxInt32, 30}},
	} {
		for _, splits := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, splits), func(t *testing.T) {
				d := emuDevice(t) // a fault is sticky
				o := newDecode[fp.BF16](t, d, c, 1)
				if tc.page != 0 {
					o.tableH[0] = tc.page
					if err := o.table.Buffer().CopyFromHost(o.tableH); err != nil {
						t.Fatal(err)
					}
				}
				if tc.lens != nil {
					if err := o.lens.Buffer().CopyFromHost(tc.lens); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err := AttentionDecode(ctx, nil, o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Splits: splits, LSE: o.lse})
				if err == nil {
					err = d.SynchronizeContext(ctx)
				}
				if tc.fault {
					if err == nil || !strings.Contains(err.Error(), "out-of-bounds") {
						t.Fatalf("page id %d: %v; want the sanitizer's out-of-bounds report", tc.page, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				cl := c
				cl.ctx = []int{min(max(int(tc.lens[0]), 0), o.width*c.ps), 30} // clamped to the table's capacity
				checkDecode(t, cl, o, true)
			})
		}
	}
}

// TestGroupedHostileOffsets: offsets that leave [0, rows], decrease or do not sum to the
// rows are clamped as documented: D matches the reference over the clamped offsets and
// rows of no group keep their value.
func TestGroupedHostileOffsets(t *testing.T) {
	const rows, n, k = 40, 16, 16
	d := emuDevice(t)
	for _, offs := range [][]int32{
		{-5, 3, 100},
		{0, -3, 8},
		{10, 2, 20, 30},
		{0, 1 << 30, math.MaxInt32},
		{math.MinInt32, math.MinInt32, 5},
		{39, 40, 41},
		{0, 0, 0},
	} {
		t.Run(fmt.Sprint(offs), func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			g := len(offs) - 1
			ah, bh := randoms[fp.BF16](rng, rows*k), randoms[fp.BF16](rng, g*k*n)
			a, _ := New(upload[fp.BF16](t, d, ah), rows, k)
			b, _ := New(upload[fp.BF16](t, d, bh), g, k, n)
			dh := make([]float64, rows*n)
			for i := range dh {
				dh[i] = 7
			}
			db := upload[fp.BF16](t, d, dh)
			dt, _ := New(db, rows, n)
			off, _ := New(uploadInts(t, d, offs), g+1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := GroupedMatmul(ctx, nil, dt, a, b, off, nil)
			if err == nil {
				err = d.SynchronizeContext(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			cl := make([]int32, len(offs))
			for i, o := range offs {
				cl[i] = min(max(o, 0), rows)
			}
			want, scale := ref.GroupedMatmulRef(ah, bh, nil, cl, rows, n, k, 1, 0, nil, nil)
			got := download(t, db)
			for i, w := range want {
				if math.IsNaN(w) {
					w = 7
				}
				if tol := ref.GemmTolerance(ptx.BF16, k, scale[i], w); !(math.Abs(got[i]-w) <= tol) {
					t.Fatalf("D[%d,%d] = %v; want %v", i/n, i%n, got[i], w)
				}
			}
		})
	}
}

// TestDecodeScaleRefused: a negative scale is refused naming the field (before: every
// output was NaN, silently: the masked keys' -Inf times a negative scale is +Inf); a
// large positive one still computes the hard max.
func TestDecodeScaleRefused(t *testing.T) {
	d := emuDevice(t)
	c := decCase{q: 1, h: 2, hk: 1, d: 64, ps: 16, ctx: []int{20, 30}}
	o := newDecode[fp.BF16](t, d, c, 1)
	for _, sc := range []float32{-1, -1e-30, float32(math.Inf(-1))} {
		err := AttentionDecode(context.Background(), nil, o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Scale: sc})
		if err == nil || !strings.Contains(err.Error(), "AttentionDecodeOptions.Scale") || !strings.Contains(err.Error(), "positive finite scale") {
			t.Errorf("Scale %v: %v; want a refusal naming AttentionDecodeOptions.Scale", sc, err)
		}
	}
	c.scale, c.splits = 300, 2
	runDecode[fp.BF16](t, d, c, true)
}
