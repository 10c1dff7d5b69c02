package nvshmem

import "sort"

// Functions returns, sorted, the name of every NVSHMEM device function the operations of
// this package can call: the ABI test checks each against the device library, and the
// emulator (Emulate) implements each.
func Functions() []string {
	set := map[string]bool{}
	add := func(n string) { set[n] = true }
	for _, n := range []string{
		"nvshmem_my_pe", "nvshmem_n_pes", "nvshmem_team_my_pe", "nvshmem_team_n_pes", "nvshmem_team_translate_pe",
		"nvshmem_ptr", "nvshmemx_mc_ptr", "nvshmem_quiet", "nvshmem_fence",
		"nvshmemx_signal_op", "nvshmem_signal_wait_until", "nvshmem_signal_fetch",
	} {
		add(n)
	}
	scopes := []Scope{Thread, Warp, Block}
	for _, s := range scopes {
		for _, b := range []string{"barrier_all", "sync_all", "barrier", "team_sync"} {
			add(s.name(b))
		}
	}
	for _, t := range scalarTypes {
		add("nvshmem_" + typeNames[t] + "_p")
		add("nvshmem_" + typeNames[t] + "_g")
	}
	for _, t := range Types() {
		tn := typeNames[t]
		for _, s := range scopes {
			for _, op := range []string{"put", "put_nbi", "get", "get_nbi", "put_signal", "put_signal_nbi", "fcollect", "broadcast", "alltoall"} {
				add(s.name(tn + "_" + op))
			}
			for _, op := range ReduceOps() {
				if reduceDefined(op, t) {
					add(s.name(tn + "_" + string(op) + "_reduce"))
					add(s.name(tn + "_" + string(op) + "_reducescatter"))
				}
			}
		}
		for _, op := range AMOs() {
			if n, ok := AMOName(op, t); ok {
				add(n)
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
