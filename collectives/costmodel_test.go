package collectives

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	costTopologies = []Topology{
		{Nodes: 1, GPUsPerNode: 8}, {Nodes: 1, GPUsPerNode: 8, Multicast: true},
		{Nodes: 2, GPUsPerNode: 2}, {Nodes: 2, GPUsPerNode: 4}, {Nodes: 3, GPUsPerNode: 2},
		{Nodes: 4, GPUsPerNode: 2}, {Nodes: 2, GPUsPerNode: 8}, {Nodes: 2, GPUsPerNode: 8, Multicast: true},
		{Nodes: 16, GPUsPerNode: 8},
	}
	costCollectives = []Collective{AllReduceCollective, ReduceScatterCollective, AllGatherCollective}
)

// costSizes is 4 KiB to 1 GiB by factors of 4.
func costSizes() []int64 {
	var s []int64
	for b := int64(4 << 10); b <= 1<<30; b *= 4 {
		s = append(s, b)
	}
	return s
}

// TestCostModelChoose: on every topology and size Choose returns the algorithm of least
// Predict, that is flat on one node and hierarchical across nodes (docs/collectives.md
// "Cost model": no crossover).
func TestCostModelChoose(t *testing.T) {
	m := H100CostModel()
	for _, tp := range costTopologies {
		for _, c := range costCollectives {
			for _, b := range costSizes() {
				a, d := m.Choose(c, tp, b)
				var best Algorithm
				var bestT time.Duration
				for _, alg := range []Algorithm{AlgFlat, AlgHierarchical, AlgNVSHMEMRing} {
					p, err := m.Predict(c, alg, tp, b)
					if err != nil {
						continue
					}
					if best == "" || p < bestT {
						best, bestT = alg, p
					}
				}
				if a != best || d != bestT {
					t.Errorf("%v %s %d: Choose = %s %v, least Predict = %s %v", tp, c, b, a, d, best, bestT)
				}
				want := AlgFlat
				if tp.Nodes > 1 {
					want = AlgHierarchical
				}
				if a != want {
					t.Errorf("%v %s %d: Choose = %s, the doc says %s", tp, c, b, a, want)
				}
			}
		}
	}
}

// TestCostModelNoCrossover: as the doc derives, the ring never beats the hierarchical
// algorithm across nodes, nor the flat one inside a node, at any size from 1 byte to 1 TiB,
// with H100CostModel or with links ten times faster or slower.
func TestCostModelNoCrossover(t *testing.T) {
	models := map[string]CostModel{"H100": H100CostModel()}
	for _, f := range []float64{0.1, 10} {
		m := H100CostModel()
		m.Network.Bandwidth *= f
		models[fmt.Sprintf("network x%g", f)] = m
		m = H100CostModel()
		m.NVLink.Bandwidth *= f
		models[fmt.Sprintf("NVLink x%g", f)] = m
	}
	tps := append([]Topology{{Nodes: 16, GPUsPerNode: 2}, {Nodes: 64, GPUsPerNode: 8}, {Nodes: 8, GPUsPerNode: 1}, {Nodes: 1, GPUsPerNode: 2}}, costTopologies...)
	for name, m := range models {
		for _, tp := range tps {
			other := AlgHierarchical
			if tp.Nodes == 1 {
				other = AlgFlat
			}
			for _, c := range costCollectives {
				for b := int64(1); b <= 1<<40; b *= 2 {
					o, err1 := m.Predict(c, other, tp, b)
					r, err2 := m.Predict(c, AlgNVSHMEMRing, tp, b)
					if err1 != nil || err2 != nil {
						t.Fatalf("%s %v %s %d: %v %v", name, tp, c, b, err1, err2)
					}
					if r < o {
						t.Errorf("%s: %s on %v: the ring (%v) beats %s (%v) at %d bytes", name, c, tp, r, other, o, b)
						break
					}
				}
			}
		}
	}
}

// TestCostModelMonotone: no algorithm gets cheaper with more bytes, slower links or a
// dearer launch.
func TestCostModelMonotone(t *testing.T) {
	base := H100CostModel()
	slower := []CostModel{base, base, base, base}
	slower[0].NVLink.Bandwidth /= 2
	slower[1].Network.Bandwidth /= 2
	slower[2].Network.Latency *= 2
	slower[3].Launch *= 2
	for _, tp := range costTopologies {
		for _, c := range costCollectives {
			for _, a := range algorithms {
				prev := time.Duration(-1)
				for _, b := range costSizes() {
					d, err := base.Predict(c, a, tp, b)
					if err != nil {
						break
					}
					if d < prev {
						t.Errorf("%s %s on %v: %d bytes take %v, fewer took %v", a, c, tp, b, d, prev)
					}
					prev = d
					for i, s := range slower {
						if ds, err := s.Predict(c, a, tp, b); err != nil || ds < d {
							t.Errorf("%s %s on %v, %d bytes: slower model %d gives %v (%v), base %v", a, c, tp, b, i, ds, err, d)
						}
					}
				}
			}
		}
	}
}

// TestCostModelRefuses: impossible pairs and hostile inputs are errors naming the fault,
// never panics, and Choose then returns no algorithm.
func TestCostModelRefuses(t *testing.T) {
	m := H100CostModel()
	two := Topology{Nodes: 2, GPUsPerNode: 8}
	nan := m
	nan.Network.Bandwidth = math.NaN()
	inf := m
	inf.NVLink.Bandwidth = math.Inf(1)
	zero := m
	zero.Network.Bandwidth = 0
	neg := m
	neg.Network.Latency = -time.Microsecond
	negLaunch := m
	negLaunch.Launch = -1
	tiny := m
	tiny.Network.Bandwidth = 1e-9
	cases := []struct {
		m    CostModel
		c    Collective
		a    Algorithm
		t    Topology
		b    int64
		want string
	}{
		{m, AllReduceCollective, AlgFlat, two, 1 << 20, "flat all_reduce cannot run on 2x8"},
		{m, AllGatherCollective, AlgHierarchical, Topology{Nodes: 1, GPUsPerNode: 8}, 1 << 20, "hierarchical all_gather cannot run on 1x8: it needs at least 2 nodes"},
		{m, AllReduceCollective, "tree", two, 1 << 20, `unknown algorithm "tree"`},
		{m, "broadcast", AlgHierarchical, two, 1 << 20, `unknown collective "broadcast"`},
		{m, AllReduceCollective, AlgNVSHMEMRing, Topology{Nodes: 0, GPUsPerNode: 8}, 1 << 20, "topology 0x8: Nodes and GPUsPerNode must be at least 1"},
		{m, AllReduceCollective, AlgNVSHMEMRing, Topology{Nodes: -2, GPUsPerNode: 8}, 1 << 20, "topology -2x8"},
		{m, AllReduceCollective, AlgNVSHMEMRing, Topology{Nodes: 2, GPUsPerNode: 0}, 1 << 20, "topology 2x0"},
		{m, AllReduceCollective, AlgNVSHMEMRing, Topology{Nodes: 2, GPUsPerNode: -1}, 1 << 20, "topology 2x-1"},
		{m, AllReduceCollective, AlgNVSHMEMRing, Topology{Nodes: math.MaxInt, GPUsPerNode: math.MaxInt}, 1 << 20, "more than 16777216 GPUs"},
		{m, AllReduceCollective, AlgHierarchical, two, 0, "all_reduce of 0 bytes: the size must be positive"},
		{m, ReduceScatterCollective, AlgHierarchical, two, -4096, "reduce_scatter of -4096 bytes"},
		{nan, AllReduceCollective, AlgHierarchical, two, 1 << 20, "Network.Bandwidth NaN is not a positive finite number"},
		{inf, AllReduceCollective, AlgHierarchical, two, 1 << 20, "NVLink.Bandwidth +Inf is not a positive finite number"},
		{zero, AllReduceCollective, AlgNVSHMEMRing, two, 1 << 20, "Network.Bandwidth 0 is not"},
		{neg, AllReduceCollective, AlgHierarchical, two, 1 << 20, "Network.Latency -1µs is negative"},
		{negLaunch, AllGatherCollective, AlgFlat, Topology{Nodes: 1, GPUsPerNode: 8}, 1 << 20, "Launch -1ns is negative"},
		{tiny, AllReduceCollective, AlgHierarchical, two, math.MaxInt64, "is out of range"},
	}
	for _, k := range cases {
		d, err := k.m.Predict(k.c, k.a, k.t, k.b)
		if err == nil || !strings.Contains(err.Error(), k.want) {
			t.Errorf("Predict(%q, %q, %v, %d) = %v, %v; want an error containing %q", k.c, k.a, k.t, k.b, d, err, k.want)
		}
		if k.a == AlgFlat && k.t.Nodes > 1 || k.a == AlgHierarchical && k.t.Nodes == 1 || k.a == "tree" {
			continue // other algorithms can run
		}
		if a, d := k.m.Choose(k.c, k.t, k.b); a != "" || d != 0 {
			t.Errorf("Choose(%q, %v, %d) on a bad input = %s %v; want none", k.c, k.t, k.b, a, d)
		}
	}
	// A link the topology does not use may be anything.
	if a, _ := nan.Choose(AllReduceCollective, Topology{Nodes: 1, GPUsPerNode: 8}, 1<<20); a != AlgFlat {
		t.Errorf("one node with a NaN network: Choose = %q, want flat", a)
	}
	bad := m
	bad.Multicast.Bandwidth = math.NaN()
	if _, err := bad.Predict(AllReduceCollective, AlgFlat, Topology{Nodes: 1, GPUsPerNode: 8, Multicast: true}, 1<<20); err == nil || !strings.Contains(err.Error(), "Multicast.Bandwidth NaN") {
		t.Errorf("multicast with a NaN bandwidth: %v", err)
	}
	if _, err := bad.Predict(AllReduceCollective, AlgFlat, Topology{Nodes: 1, GPUsPerNode: 8}, 1<<20); err != nil {
		t.Errorf("no multicast, so its NaN bandwidth is unused: %v", err)
	}
}

// TestCostModelSmallWorlds: one GPU, one GPU per node, and a whole node per rank price
// without dividing by zero.
func TestCostModelSmallWorlds(t *testing.T) {
	m := H100CostModel()
	for _, tp := range []Topology{{Nodes: 1, GPUsPerNode: 1}, {Nodes: 4, GPUsPerNode: 1}, {Nodes: 2, GPUsPerNode: 1, Multicast: true}} {
		for _, c := range costCollectives {
			a, d := m.Choose(c, tp, 4096)
			if a == "" || d <= 0 {
				t.Errorf("%v %s: Choose = %q %v", tp, c, a, d)
			}
			if tp.Nodes == 1 && a != AlgFlat {
				t.Errorf("%v %s: Choose = %q, want flat", tp, c, a)
			}
		}
	}
}

func TestTopologyString(t *testing.T) {
	if got := (Topology{Nodes: 2, GPUsPerNode: 8, Multicast: true}).String(); got != "2x8+multicast" {
		t.Errorf("got %q", got)
	}
	if got := (Topology{Nodes: 16, GPUsPerNode: 8}).String(); got != "16x8" {
		t.Errorf("got %q", got)
	}
}

// TestCostModelDocTable recomputes every row of the prediction table in
// docs/collectives.md ("Predictions for 2 x 8 and 16 x 8 H100 nodes") from Predict.
func TestCostModelDocTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/collectives.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "### Predictions for 2 x 8 and 16 x 8 H100 nodes")
	if !ok {
		t.Fatal("docs/collectives.md has no prediction table")
	}
	sec, _, _ = strings.Cut(sec, "\n### ")
	sizes := map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	m := H100CostModel()
	rows := 0
	for _, line := range strings.Split(sec, "\n") {
		f := strings.Split(line, "|")
		if len(f) != 9 || !strings.Contains(f[1], "x") || strings.Contains(f[1], "topology") {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		var tp Topology
		var n int64
		var unit string
		if _, err := fmt.Sscanf(f[1], "%dx%d", &tp.Nodes, &tp.GPUsPerNode); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		if _, err := fmt.Sscanf(f[2], "%d %s", &n, &unit); err != nil || sizes[unit] == 0 {
			t.Fatalf("row %q: size %q", line, f[2])
		}
		b := n * sizes[unit]
		a, d := m.Choose(AllReduceCollective, tp, b)
		r, err := m.Predict(AllReduceCollective, AlgNVSHMEMRing, tp, b)
		if err != nil {
			t.Fatal(err)
		}
		p := float64(tp.Nodes * tp.GPUsPerNode)
		alg := float64(b) / d.Seconds() / 1e9
		us := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3) }
		want := []string{string(a), us(d), fmt.Sprintf("%.1f", alg), fmt.Sprintf("%.1f", alg*2*(p-1)/p), us(r)}
		if got := f[3:8]; !slices.Equal(got, want) {
			t.Errorf("%v %s: the doc says %q, the model %q", tp, f[2], got, want)
		}
		rows++
	}
	if rows != 15 {
		t.Errorf("found %d rows in the doc's prediction table, want 15", rows)
	}
}
