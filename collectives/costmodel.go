package collectives

import (
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"math"
	"time"
)

// Topology is how a Comm's GPUs are spread over NVLink domains (nodes).
type Topology struct {
	Nodes, GPUsPerNode int
	Multicast          bool // NVLink SHARP multicast inside a node
}

// String writes t as "2x8", with "+multicast" when Multicast is set.
func (t Topology) String() string {
	s := fmt.Sprintf("%dx%d", t.Nodes, t.GPUsPerNode)
	if t.Multicast {
		s += "+multicast"
	}
	return s
}

// Link is one kind of link's cost for a GPU: bytes per second in one direction, and the
// latency of one message/step.
type Link struct {
	Bandwidth float64
	Latency   time.Duration
}

// CostModel prices collective algorithms (docs/collectives.md "Cost model").
type CostModel struct {
	NVLink, Multicast, Network Link
	Launch                     time.Duration // one kernel launch / grid-wide step
}

// H100CostModel is an H100 SXM node: NVLink4 through NVSwitch, and 8 x 400 Gb/s
// ConnectX-7 NICs per node (one per GPU). The sources of each number are in
// docs/collectives.md "Cost model".
func H100CostModel() CostModel {
	return CostModel{
		NVLink:    Link{Bandwidth: 320e9, Latency: 2 * time.Microsecond},
		Multicast: Link{Bandwidth: 309e9, Latency: 2 * time.Microsecond},
		Network:   Link{Bandwidth: 47e9, Latency: 4 * time.Microsecond},
		Launch:    5 * time.Microsecond,
	}
}

// Collective names a collective operation the cost model prices.
type Collective string

// The collectives the cost model prices.
const (
	AllReduceCollective     Collective = "all_reduce"
	ReduceScatterCollective Collective = "reduce_scatter"
	AllGatherCollective     Collective = "all_gather"
)

// Algorithm names a way of running a collective over a Topology.
type Algorithm string

// The algorithms the cost model prices.
const (
	// AlgFlat is today's single-node kernels (peer pointers / multimem).
	AlgFlat Algorithm = "flat"
	// AlgHierarchical is an in-node reduce-scatter, a per-GPU-index exchange between
	// nodes by NVSHMEM put_signal, and an in-node all-gather.
	AlgHierarchical Algorithm = "hierarchical"
	// AlgNVSHMEMRing is one ring over every PE through NVSHMEM (the existing
	// nvshmem_*_ring kernels).
	AlgNVSHMEMRing Algorithm = "nvshmem_ring"
)

// algorithms is every Algorithm in Choose's order of preference on a tie.
var algorithms = []Algorithm{AlgFlat, AlgHierarchical, AlgNVSHMEMRing}

// maxGPUs bounds Nodes x GPUsPerNode, so that no product overflows.
const maxGPUs = 1 << 24

// Predict returns the model's time for c by a on t moving bytes (the per-GPU buffer: the
// all-reduce buffer, the reduce-scatter input, the all-gather output); an error when a
// cannot run on t (AlgFlat with Nodes > 1, AlgHierarchical with one node) or when t, bytes
// or the model are invalid.
func (m CostModel) Predict(c Collective, a Algorithm, t Topology, bytes int64) (time.Duration, error) {
	if err := checkInputs(c, t, bytes); err != nil {
		return 0, err
	}
	if err := m.check(a, t); err != nil {
		return 0, err
	}
	var s float64
	switch a {
	case AlgFlat:
		if t.Nodes > 1 {
			return 0, fmt.Errorf("collectives: cost model: %s %s cannot run on %v: the flat kernels need every GPU in one NVLink domain", a, c, t)
		}
		s = m.flat(c, t.GPUsPerNode, t.Multicast, float64(bytes))
	case AlgHierarchical:
		if t.Nodes < 2 {
			return 0, fmt.Errorf("collectives: cost model: %s %s cannot run on %v: it needs at least 2 nodes (on one node it is the flat algorithm)", a, c, t)
		}
		s = m.hierarchical(c, t, float64(bytes))
	case AlgNVSHMEMRing:
		s = m.ring(c, t, float64(bytes))
	default:
		return 0, fmt.Errorf("collectives: cost model: unknown algorithm %s (want %q, %q or %q)", excerpt.Quote(string(a)), AlgFlat, AlgHierarchical, AlgNVSHMEMRing)
	}
	return toDuration(s, c, a, t, bytes)
}

// Choose returns the cheapest algorithm that can run on t, and its predicted time. On a
// tie the earlier of AlgFlat, AlgHierarchical, AlgNVSHMEMRing wins. When none can run (an
// invalid collective, topology, size or model) it returns "" and 0; Predict says why.
func (m CostModel) Choose(c Collective, t Topology, bytes int64) (Algorithm, time.Duration) {
	var best Algorithm
	var bestT time.Duration
	for _, a := range algorithms {
		d, err := m.Predict(c, a, t, bytes)
		if err != nil {
			continue
		}
		if best == "" || d < bestT {
			best, bestT = a, d
		}
	}
	return best, bestT
}

// checkInputs refuses an unknown collective, a topology with no GPUs and a size that is
// not positive.
func checkInputs(c Collective, t Topology, bytes int64) error {
	switch c {
	case AllReduceCollective, ReduceScatterCollective, AllGatherCollective:
	default:
		return fmt.Errorf("collectives: cost model: unknown collective %s (want %q, %q or %q)", excerpt.Quote(string(c)), AllReduceCollective, ReduceScatterCollective, AllGatherCollective)
	}
	if t.Nodes < 1 || t.GPUsPerNode < 1 {
		return fmt.Errorf("collectives: cost model: topology %v: Nodes and GPUsPerNode must be at least 1", t)
	}
	if t.Nodes > maxGPUs/t.GPUsPerNode {
		return fmt.Errorf("collectives: cost model: topology %v: more than %d GPUs", t, maxGPUs)
	}
	if bytes <= 0 {
		return fmt.Errorf("collectives: cost model: %s of %d bytes: the size must be positive", c, bytes)
	}
	return nil
}

// Check reports the first field of the model that is not a usable number, named by its
// path (field Network.Bandwidth): every link's bandwidth must be a positive finite number of
// bytes per second, and latencies and Launch must not be negative. collectives.New refuses
// an Options.CostModel that fails it.
func (m CostModel) Check() error {
	if m.Launch < 0 {
		return fmt.Errorf("field Launch: %v is negative", m.Launch)
	}
	for _, k := range []struct {
		name string
		l    Link
	}{{"NVLink", m.NVLink}, {"Multicast", m.Multicast}, {"Network", m.Network}} {
		if b := k.l.Bandwidth; math.IsNaN(b) || math.IsInf(b, 0) || b <= 0 {
			return fmt.Errorf("field %s.Bandwidth: %v is not a positive finite number of bytes per second", k.name, b)
		}
		if k.l.Latency < 0 {
			return fmt.Errorf("field %s.Latency: %v is negative", k.name, k.l.Latency)
		}
	}
	return nil
}

// check refuses a model whose links that a on t uses are not usable numbers.
func (m CostModel) check(a Algorithm, t Topology) error {
	if m.Launch < 0 {
		return fmt.Errorf("collectives: cost model: Launch %v is negative", m.Launch)
	}
	links := []struct {
		name string
		l    Link
		used bool
	}{
		{"NVLink", m.NVLink, t.GPUsPerNode > 1},
		{"Multicast", m.Multicast, t.GPUsPerNode > 1 && t.Multicast && a == AlgFlat},
		{"Network", m.Network, t.Nodes > 1},
	}
	for _, k := range links {
		if !k.used {
			continue
		}
		if b := k.l.Bandwidth; math.IsNaN(b) || math.IsInf(b, 0) || b <= 0 {
			return fmt.Errorf("collectives: cost model: %s.Bandwidth %v is not a positive finite number of bytes per second", k.name, b)
		}
		if k.l.Latency < 0 {
			return fmt.Errorf("collectives: cost model: %s.Latency %v is negative", k.name, k.l.Latency)
		}
	}
	return nil
}

// toDuration converts seconds to a Duration, refusing what a Duration cannot hold.
func toDuration(s float64, c Collective, a Algorithm, t Topology, bytes int64) (time.Duration, error) {
	ns := s * 1e9
	if math.IsNaN(ns) || ns < 0 || ns >= math.MaxInt64 {
		return 0, fmt.Errorf("collectives: cost model: %s %s on %v of %d bytes: the predicted time (%g s) is out of range", a, c, t, bytes, s)
	}
	return time.Duration(math.Round(ns)), nil
}

// sec is d in seconds.
func sec(d time.Duration) float64 { return d.Seconds() }

// xfer is the time b bytes take at l's bandwidth (its latency apart).
func xfer(l Link, b float64) float64 { return b / l.Bandwidth }

// flat prices the single-node kernels on g GPUs: the cheapest of the peer-to-peer kernel
// and, with multicast, the multimem kernel (the Comm's own rules then pick among them).
func (m CostModel) flat(c Collective, g int, mc bool, s float64) float64 {
	if g == 1 {
		return sec(m.Launch) // a copy at most
	}
	t := m.nodeP2P(c, g, s)
	if mc {
		t = math.Min(t, m.nodeMulticast(c, g, s))
	}
	return t
}

// nodeP2P is one peer-to-peer kernel on g GPUs of one node: the all-reduce is two-shot
// (barrier, reduce-scatter, barrier, all-gather, barrier), the reduce-scatter and the
// all-gather take two barriers; each GPU moves (g-1)/g of the buffer per half.
func (m CostModel) nodeP2P(c Collective, g int, s float64) float64 {
	f := float64(g-1) / float64(g)
	switch c {
	case AllReduceCollective:
		return sec(m.Launch) + 3*sec(m.NVLink.Latency) + xfer(m.NVLink, 2*f*s)
	default:
		return sec(m.Launch) + 2*sec(m.NVLink.Latency) + xfer(m.NVLink, f*s)
	}
}

// nodeMulticast is one multimem kernel on g GPUs: the switch reads every GPU's part of
// each slice a GPU ld_reduces (s bytes out of each GPU), and a multimem.st of s/g bytes
// lands on every GPU (s bytes into each).
func (m CostModel) nodeMulticast(c Collective, g int, s float64) float64 {
	switch c {
	case AllReduceCollective:
		return sec(m.Launch) + 3*sec(m.Multicast.Latency) + xfer(m.Multicast, s+s/float64(g))
	default:
		return sec(m.Launch) + 2*sec(m.Multicast.Latency) + xfer(m.Multicast, s)
	}
}

// hierarchical prices the one-launch hierarchical kernels (kernels/coll_hier.go): the
// GPUs of one index on every node form a rail joined by that index's NIC. The all-reduce
// reduces inside the node by peer loads the shards its GPU index owns on every node, puts
// each other node's partial to that node (one rail round), reduces its own shard, puts it to
// every other node (a second round), and stores the node's shards into every GPU of the node;
// an in-node barrier opens and closes the launch. The reduce-scatter is the first half, the
// all-gather the second; each crosses the rail once. Each GPU moves (g-1)/g of the buffer
// over NVLink per half and (n-1)/n of its s/g slice over the network per round.
func (m CostModel) hierarchical(c Collective, t Topology, s float64) float64 {
	n, g := float64(t.Nodes), float64(t.GPUsPerNode)
	half := 0.0 // one in-node half: (g-1)/g of the buffer by peer loads or stores
	barriers := 0.0
	if t.GPUsPerNode > 1 {
		half = xfer(m.NVLink, (g-1)/g*s)
		barriers = 2 * sec(m.NVLink.Latency)
	}
	round := sec(m.Network.Latency) + xfer(m.Network, (n-1)/n*s/g)
	if c == AllReduceCollective {
		return sec(m.Launch) + barriers + 2*half + 2*round
	}
	return sec(m.Launch) + barriers + half + round
}

// ring prices one ring over every PE (consecutive PEs share a node): per launch a
// barrier_all (log2 of the PEs rounds), p-1 hops each moving s/p bytes at the pace of the
// slowest link, and a quiet; the all-reduce is a reduce-scatter then an all-gather.
func (m CostModel) ring(c Collective, t Topology, s float64) float64 {
	launches := 1.0
	if c == AllReduceCollective {
		launches = 2
	}
	p := t.Nodes * t.GPUsPerNode
	if p == 1 {
		return launches * sec(m.Launch)
	}
	bw, lat, hop := m.NVLink.Bandwidth, sec(m.NVLink.Latency), sec(m.NVLink.Latency)
	if t.Nodes > 1 {
		// Exactly Nodes of the ring's p edges cross a node boundary, the others are
		// NVLink; every hop moves at the pace of the slowest edge, and the barrier's
		// rounds and the quiet wait for the slowest latency.
		hop = (float64(t.Nodes)*sec(m.Network.Latency) + float64(p-t.Nodes)*sec(m.NVLink.Latency)) / float64(p)
		if t.GPUsPerNode == 1 || m.Network.Bandwidth < bw {
			bw = m.Network.Bandwidth
		}
		if t.GPUsPerNode == 1 || m.Network.Latency > m.NVLink.Latency {
			lat = sec(m.Network.Latency)
		}
	}
	rounds := math.Ceil(math.Log2(float64(p)))
	hops := float64(p - 1)
	return launches * (sec(m.Launch) + (rounds+1)*lat + hops*(hop+s/float64(p)/bw))
}
