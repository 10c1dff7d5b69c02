package ref

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
)

// nodeRuns are the emulated clusters the NVSHMEM kernels run on (GPUs, nodes), each at an
// odd size, strict and weak, with the default network or a slow one.
var nodeRuns = []struct {
	gpus, nodes, n int
	seed           int64
	weak           bool
	net            *emu.Network
}{
	{4, 2, 1001, 0, false, nil},
	{8, 2, 37, 3, true, nil},
	{6, 3, 13, 5, true, &emu.Network{Latency: 20 * time.Microsecond, BytesPerSecond: 1e9}},
	{8, 4, 130, 0, false, &emu.Network{Latency: 0, BytesPerSecond: 0}},
}

// TestNVSHMEMKernelsAcrossNodes runs every NVSHMEM kernel (the rings, alltoall, get and
// signal ring) on emulated clusters of 2x2, 2x4, 3x2 and 4x2 GPUs, where every operation
// between nodes arrives late (shmemu's network), one dtype per run in turn; and checks
// that the peer-pointer and multimem collectives are refused there with the emulator's
// errors.
func TestNVSHMEMKernelsAcrossNodes(t *testing.T) {
	for _, s := range kernels.All() {
		if !strings.HasPrefix(s.Name, "nvshmem_") {
			continue
		}
		for i, c := range nodeRuns {
			dt := s.DTypes[i%len(s.DTypes)]
			mode := "strict"
			if c.weak {
				mode = fmt.Sprintf("weak-seed%d", c.seed)
			}
			t.Run(fmt.Sprintf("%s/%s/%dx%d/%s", s.Name, dt, c.nodes, c.gpus/c.nodes, mode), func(t *testing.T) {
				res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: c.n, Ranks: c.gpus, Nodes: c.nodes, Network: c.net, Seed: c.seed, Weak: c.weak})
				if err != nil {
					t.Fatal(err)
				}
				if res.Checked == 0 {
					t.Fatalf("nothing checked: %v", res)
				}
			})
		}
	}
	for _, c := range []struct{ kernel, want string }{
		{"p2p_allreduce_2shot_sum", "access to another node's memory"},
		{"p2p_allgather", "access to another node's memory"},
		{"mm_allreduce_2shot_sum", "span 2 nodes"},
	} {
		_, err := Run(Problem{Kernel: c.kernel, Size: 100, Ranks: 4, Nodes: 2})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "kernels/") {
			t.Errorf("%s on 2 nodes: %v; want an error saying %q with the Go line", c.kernel, err, c.want)
		}
	}
}
