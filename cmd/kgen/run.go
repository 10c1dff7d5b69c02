package main

import (
	"flag"
	"fmt"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run a library kernel on the emulator and check it against a Go reference",
		usage:   "KERNEL [--ranks N [--nodes K] [--network LAT,BW]] [--size BYTES | --rows R] [--cols C] [--exact] [--dtype T] [--target sm_90] [--seed S] [--weak]   (at most 256 MiB: the emulator runs on the CPU; softmax and row_sum with --cols run the kernel the host picks, the split one for long rows)",
		run:     runRun,
	})
}

// maxRunSize is the largest --size kgen run takes: emulating a kernel over 256 MiB takes
// minutes and several times that much host memory.
const maxRunSize = 256 << 20

func runRun(e *env, args []string) error {
	c := commands["run"]
	fs := flags(e, c)
	ranks := fs.Int("ranks", 1, "simulated GPUs (1..8), for the multi-GPU kernels (a single-GPU kernel runs on one)")
	size := fs.Int("size", 0, "input size in bytes (default: the kernel's own small size)")
	dtype := fs.String("dtype", "", "element type (default: the kernel's first)")
	target := fs.String("target", "", "GPU target ("+targetNames()+"; default sm_90, or the kernel's first target without sm_90)")
	seed := fs.Int64("seed", 0, "seed of the inputs and, when non-zero, of the emulator's schedule")
	weak := fs.Bool("weak", false, "weak-memory mode (multi-GPU kernels): unfenced remote stores become visible late")
	cols := fs.Int("cols", 0, "row kernels: the row length; the rows: --rows, or --size / the row's bytes, or one")
	rows := fs.Int("rows", 0, "row kernels, with --cols: the number of rows (in place of --size)")
	exact := fs.Bool("exact", false, "run KERNEL itself, not the kernel the host would pick (row kernels: for the shape; gemm: gemm_sm90 on sm_90a)")
	nodes := fs.Int("nodes", 0, "split the simulated GPUs into this many nodes: peer and multicast addresses reach one node, NVSHMEM operations between nodes arrive late (default $"+jit.EmuNodesEnv+", else 1)")
	network := fs.String("network", "", "with --nodes: the network between nodes, LATENCY,BYTES_PER_SECOND (default $"+jit.EmuNetworkEnv+", else "+emuNetDefault()+")")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *target == "" {
		*target = kernelTarget(pos)
	}
	spec, t, dt, err := variant(pos, *target, *dtype)
	if err != nil {
		return err
	}
	if *ranks < 1 || *ranks > 8 {
		return usagef("--ranks %d: want 1..8", *ranks)
	}
	nodesFrom := fmt.Sprintf("--nodes %d", *nodes) // where the node count came from, for messages
	nodesSet := false
	fs.Visit(func(f *flag.Flag) { nodesSet = nodesSet || f.Name == "nodes" })
	if nodesSet && *nodes < 1 { // 0 is the flag's default only when left out
		return usagef("--nodes %d: want at least 1 node (leave --nodes out for $%s, else 1)", *nodes, jit.EmuNodesEnv)
	}
	if *nodes == 0 { // the environment's, as jit.RunRanks takes it
		if *nodes, err = jit.EmuNodes(); err != nil {
			return &usageError{err.Error()}
		}
		nodesFrom = fmt.Sprintf("%s=%d", jit.EmuNodesEnv, *nodes)
	}
	if *nodes < 1 || *ranks%*nodes != 0 {
		return usagef("%s: --ranks %d do not split into %d nodes of equal size", nodesFrom, *ranks, *nodes)
	}
	var net *emu.Network
	if *network != "" {
		if *nodes == 1 {
			return usagef("--network %s: without --nodes there is no network between nodes", *network)
		}
		if net, err = jit.ParseNetwork(*network); err != nil {
			return usagef("--network %q: %v", *network, err)
		}
	} else if *nodes > 1 {
		if net, err = jit.EmuNetwork(); err != nil {
			return &usageError{err.Error()}
		}
	}
	if *size < 0 || *size > maxRunSize {
		return usagef("--size %d: want 0 (the kernel's own size) to %d bytes (256 MiB: the emulator runs every thread on the CPU)", *size, maxRunSize)
	}
	if *size%dt.Bytes() != 0 {
		return usagef("--size %d is not a multiple of the %d-byte %s element", *size, dt.Bytes(), dt)
	}
	n := *size / dt.Bytes()
	if *cols != 0 || *rows != 0 {
		if !rowKernels[spec.Family] {
			return usagef("--cols and --rows apply to the row kernels (softmax, row_sum, softmax_split, row_sum_split), not %s", spec.Name)
		}
		if *cols < 1 || *rows < 0 {
			return usagef("--rows %d --cols %d: want --cols >= 1 and --rows >= 0", *rows, *cols)
		}
		// Each extent alone first, so that the products below cannot overflow.
		if *cols > maxRunSize/dt.Bytes() || *rows > maxRunSize {
			return usagef("--rows %d --cols %d of %s is over %d bytes (256 MiB: the emulator runs every thread on the CPU)", *rows, *cols, dt, maxRunSize)
		}
		if *rows > 0 && *size > 0 {
			return usagef("--rows %d and --size %d: give one of them", *rows, *size)
		}
		if *rows > 0 {
			if int64(*rows)*int64(*cols)*int64(dt.Bytes()) > maxRunSize {
				return usagef("--rows %d --cols %d of %s is over %d bytes (256 MiB: the emulator runs every thread on the CPU)", *rows, *cols, dt, maxRunSize)
			}
			n = *rows * *cols
		} else if n == 0 {
			n = *cols // one row
		} else if n%*cols != 0 {
			return usagef("--size %d is not a whole number of rows of --cols %d %s elements (%d bytes each)", *size, *cols, dt, *cols*dt.Bytes())
		}
	}
	if err := multiGPUFlags(spec.Name, *ranks, *nodes, *weak); err != nil { // before the chooser prints
		return err
	}
	name := spec.Name
	if *cols > 0 && !*exact && (spec.Family == kernels.FamilySoftmax || spec.Family == kernels.FamilyRowSum) {
		if name, err = chooseRow(e, spec.Family, dt, n / *cols, *cols); err != nil {
			return err
		}
	}
	// gemm: the host's choice for the target (kernels.UseSM90); the emulator's gemm_sm90
	// shapes have N and K multiples of 8.
	picked := "" // why the host's gemm was picked, said once the flags are known good
	if spec.Name == string(kernels.FamilyGemm) && !*exact {
		if ok, why := kernels.UseSM90(t, 8, 8); ok {
			name = string(kernels.FamilyGemmSM90)
			picked = fmt.Sprintf("kgen run: gemm on %s runs %s (%s); --exact runs gemm itself\n", t, name, why)
		}
	}
	if ok, why := ref.SpansNodes(name); !ok && *nodes > 1 {
		return usagef("%s: %s is %s, so no node boundary would be exercised; --nodes applies to the collective kernels", nodesFrom, name, why)
	}
	if err := multiGPUFlags(name, *ranks, *nodes, *weak); err != nil {
		return err
	}
	fmt.Fprint(e.stderr, picked)
	res, err := ref.Run(ref.Problem{Kernel: name, DType: dt, Target: t, Size: n, Cols: *cols,
		Ranks: *ranks, Nodes: *nodes, Network: net, Seed: *seed, Weak: *weak})
	if err != nil {
		return err
	}
	if *nodes > 1 {
		fmt.Fprintf(e.stdout, "ok: %v on %d simulated GPU(s) in %d nodes\n", res, *ranks, *nodes)
		return nil
	}
	fmt.Fprintf(e.stdout, "ok: %v on %d simulated GPU(s)\n", res, *ranks)
	return nil
}

// multiGPUFlags refuses --ranks above 1 and --weak for a single-GPU kernel (when --nodes
// does not already refuse it): its check runs on one emulated device of its own, so they
// would change nothing, and "ok ... on 4 simulated GPU(s)" would claim what did not run.
func multiGPUFlags(kernel string, ranks, nodes int, weak bool) error {
	if !ref.SingleGPU(kernel) || nodes > 1 {
		return nil
	}
	if ranks > 1 {
		return usagef("--ranks %d: %s is a single-GPU kernel, checked on one emulated device, so the other GPUs would not be exercised; --ranks applies to the multi-GPU kernels", ranks, kernel)
	}
	if weak {
		return usagef("--weak: %s is a single-GPU kernel, which stores to no other GPU's (or multicast) memory, so weak-memory mode would change nothing; --weak applies to the multi-GPU kernels", kernel)
	}
	return nil
}

func emuNetDefault() string {
	n := emu.DefaultNetwork
	return fmt.Sprintf("%v,%g", n.Latency, n.BytesPerSecond)
}

// rowKernels are the families --cols and --rows apply to.
var rowKernels = map[kernels.Family]bool{
	kernels.FamilySoftmax: true, kernels.FamilyRowSum: true,
	kernels.FamilySoftmaxSplit: true, kernels.FamilyRowSumSplit: true,
}

// chooseRow returns the kernel the host runs for family f on a rows x cols matrix on the
// emulated device (kernels.ChooseRowKernel with its multiprocessor count) and says which.
func chooseRow(e *env, f kernels.Family, dt ptx.Type, rows, cols int) (string, error) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		return "", err
	}
	sms := d.Info().Multiproc
	if err := d.Close(); err != nil {
		return "", err
	}
	l, err := kernels.ChooseRowKernel(f, dt, rows, cols, sms)
	if err != nil {
		return "", err
	}
	s, err := kernels.Find(l.ID)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(e.stdout, "%s %dx%d on %d SMs: %s (%s)\n", f, rows, cols, sms, s.Name, l.Why)
	return s.Name, nil
}
