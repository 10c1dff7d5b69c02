package collectives

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/kernels"
)

// node is where this rank sits in the Comm's topology: ranks reach one another by peer
// pointers inside a node (an NVLink domain) and only through NVSHMEM's transports across
// nodes. Nodes are groups of GPUsPerNode consecutive ranks.
type node struct {
	topo   Topology
	index  int   // this rank's node
	local  int   // this rank's index in its node
	remote []int // the ranks of the other nodes, ascending (none on one node)
}

// first is the global rank of this node's GPU 0.
func (n node) first() int { return n.index * n.topo.GPUsPerNode }

// learnTopology finds which ranks this rank reaches with nvshmem_ptr (PeerPtr of p, a
// symmetric allocation) and checks that they form this rank's group of consecutive ranks, of
// a size that splits the world evenly.
func (c *Comm) learnTopology(p *sym) (node, error) {
	var reach, miss []int
	for g := 0; g < c.g; g++ {
		if g == c.rank {
			reach = append(reach, g)
			continue
		}
		if _, err := c.r.NVSHMEM.PeerPtr(p.m, g); err != nil {
			miss = append(miss, g)
		} else {
			reach = append(reach, g)
		}
	}
	return nodeOf(c.rank, c.g, reach, miss)
}

// nodeOf places rank in a world of world ranks from the ranks it reaches by peer pointers
// (reach, itself included) and those it does not (miss), both ascending: its node must be
// an aligned group of consecutive ranks whose size splits the world evenly.
func nodeOf(rank, world int, reach, miss []int) (node, error) {
	l := len(reach)
	first := rank / l * l
	if world%l != 0 || reach[0] != first || reach[l-1] != first+l-1 {
		return node{}, fmt.Errorf("collectives: rank %d reaches ranks %s by peer pointers (nvshmem_ptr), not an aligned group of consecutive ranks splitting the %d ranks evenly (it would be ranks %s); ranks out of reach: %s. Place the ranks of each node consecutively (torchrun and Slurm do)",
			rank, rankList(reach), world, rankList(seq(first, l)), rankList(miss))
	}
	if l > kernels.CollMaxGPUs {
		return node{}, fmt.Errorf("collectives: %d GPUs share rank %d's NVLink domain: the kernels handle 1 to %d per node", l, rank, kernels.CollMaxGPUs)
	}
	if nodes := world / l; nodes > kernels.HierMaxNodes {
		return node{}, fmt.Errorf("collectives: %d nodes of %d GPUs: the hierarchical kernels handle at most %d nodes", nodes, l, kernels.HierMaxNodes)
	}
	return node{topo: Topology{Nodes: world / l, GPUsPerNode: l}, index: rank / l, local: rank % l, remote: miss}, nil
}

// rankList writes ranks as "0-3, 6, 8-9".
func rankList(ranks []int) string {
	if len(ranks) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		s := strconv.Itoa(ranks[i])
		if j > i {
			s += "-" + strconv.Itoa(ranks[j])
		}
		parts = append(parts, s)
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// Topology returns how the Comm's ranks are spread over nodes (NVLink domains), as learnt at
// New, and whether the multimem (NVLink SHARP) kernels are in use.
func (c *Comm) Topology() Topology {
	if c == nil {
		return Topology{}
	}
	return c.node.topo
}

// NodeRank returns this rank's node and its index among the node's GPUs.
func (c *Comm) NodeRank() (node, local int) {
	if c == nil {
		return 0, 0
	}
	return c.node.index, c.node.local
}

// flatCheck refuses a single-node (flat) kernel, or the flat algorithm, on a topology of
// several nodes: it would dereference peer pointers of ranks on other nodes.
func (c *Comm) flatCheck(what, kernel string) error {
	if c.node.topo.Nodes == 1 {
		return nil
	}
	return fmt.Errorf("collectives: %s: %s runs on one node only, but ranks %s are on other nodes than rank %d (topology %v; no peer pointer reaches them); the hierarchical and NVSHMEM ring algorithms run across nodes",
		what, kernel, rankList(c.node.remote), c.rank, c.node.topo)
}

// logTopology logs the topology: at info level across nodes, at debug level on one node.
func (c *Comm) logTopology(ctx context.Context) {
	n := c.node
	attrs := []any{"topology", n.topo.String(), "rank", c.rank, "node", n.index, "local_rank", n.local,
		"node_ranks", rankList(seq(n.first(), n.topo.GPUsPerNode)), "multicast", c.mc}
	if n.topo.Nodes == 1 {
		if c.debug(ctx) {
			c.log.DebugContext(ctx, "collectives: one NVLink domain: every rank is reachable by peer pointers", attrs...)
		}
		return
	}
	c.log.InfoContext(ctx, "collectives: ranks span several NVLink domains (nodes): peer pointers inside a node, NVSHMEM transports between nodes; hierarchical algorithms",
		append(attrs, "remote_ranks", rankList(n.remote))...)
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}
