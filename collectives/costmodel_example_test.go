package collectives_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/collectives"
)

// The cost model picks the flat kernels inside one node and the hierarchical algorithm
// across nodes; Predict prices any algorithm that can run on a topology.
func ExampleCostModel_Choose() {
	m := collectives.H100CostModel()
	for _, t := range []collectives.Topology{{Nodes: 1, GPUsPerNode: 8}, {Nodes: 2, GPUsPerNode: 8}} {
		a, d := m.Choose(collectives.AllReduceCollective, t, 1<<20)
		fmt.Printf("all-reduce of 1 MiB on %v: %s, %v\n", t, a, d)
	}
	_, err := m.Predict(collectives.AllReduceCollective, collectives.AlgFlat, collectives.Topology{Nodes: 2, GPUsPerNode: 8}, 1<<20)
	fmt.Println(err)
	// Output:
	// all-reduce of 1 MiB on 1x8: flat, 16.734µs
	// all-reduce of 1 MiB on 2x8: hierarchical, 25.523µs
	// collectives: cost model: flat all_reduce cannot run on 2x8: the flat kernels need every GPU in one NVLink domain
}
