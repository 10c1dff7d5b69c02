package jit

import (
	"strings"
	"testing"
)

// rendezvousEnv is every variable RendezvousFromEnv reads.
var rendezvousEnv = []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "KGEN_BOOTSTRAP_PORT", "TORCHELASTIC_USE_AGENT_STORE"}

// TestRendezvousTwoNodes reads the environment of rank 9 of 16 (GPU 1 of the second node of
// two 8-GPU nodes) as torchrun and the Slurm line of docs/jit.md give it.
func TestRendezvousTwoNodes(t *testing.T) {
	for name, env := range map[string]map[string]string{
		// torchrun --nnodes=2 --nproc-per-node=8 --node-rank=1 --master-addr=node0 --master-port=29500
		"torchrun": {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8",
			"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True"},
		// srun with RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
		// LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE, MASTER_ADDR and MASTER_PORT exported.
		"slurm": {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8",
			"MASTER_ADDR": "node0", "MASTER_PORT": "29500"},
		// No LOCAL_RANK: the block layout gives it from LOCAL_WORLD_SIZE.
		"no LOCAL_RANK": {"RANK": "9", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
			"MASTER_ADDR": "node0", "MASTER_PORT": "29500"},
	} {
		for _, k := range rendezvousEnv {
			t.Setenv(k, env[k])
		}
		rv, err := RendezvousFromEnv()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		port := "29500"
		if name == "torchrun" {
			port = "29501" // the agent's store holds MASTER_PORT
		}
		want := Rendezvous{Rank: 9, WorldSize: 16, LocalRank: 1, Addr: "node0:" + port}
		if rv != want {
			t.Errorf("%s: got %+v, want %+v", name, rv, want)
		}
	}
}

// TestRendezvousRefuses: a local rank that does not fit its node, and a node larger than
// the world, are errors naming the variables.
func TestRendezvousRefuses(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "8", "LOCAL_WORLD_SIZE": "8"}, "LOCAL_RANK=8 is not below LOCAL_WORLD_SIZE=8"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "4"}, "LOCAL_WORLD_SIZE=4: want 1 to WORLD_SIZE=2"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE=0"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "x"}, `LOCAL_WORLD_SIZE="x" is not a non-negative integer`},
	} {
		for _, k := range rendezvousEnv {
			t.Setenv(k, c.env[k])
		}
		t.Setenv("MASTER_ADDR", "node0")
		t.Setenv("MASTER_PORT", "29500")
		if rv, err := RendezvousFromEnv(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %+v, %v; want an error containing %q", c.env, rv, err, c.want)
		}
	}
}
