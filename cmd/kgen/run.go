package main

import (
	"fmt"

	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run a library kernel on the emulator and check it against a Go reference",
		usage:   "KERNEL [--ranks N] [--size BYTES] [--dtype T] [--target sm_90] [--seed S] [--weak]   (--size at most 256 MiB: the emulator runs on the CPU)",
		run:     runRun,
	})
}

// maxRunSize is the largest --size kgen run takes: emulating a kernel over 256 MiB takes
// minutes and several times that much host memory.
const maxRunSize = 256 << 20

func runRun(e *env, args []string) error {
	c := commands["run"]
	fs := flags(e, c)
	ranks := fs.Int("ranks", 1, "simulated GPUs (1..8)")
	size := fs.Int("size", 0, "input size in bytes (default: the kernel's own small size)")
	dtype := fs.String("dtype", "", "element type (default: the kernel's first)")
	target := fs.String("target", "", "GPU target ("+targetNames()+"; default sm_90, or the kernel's first target without sm_90)")
	seed := fs.Int64("seed", 0, "seed of the inputs and, when non-zero, of the emulator's schedule")
	weak := fs.Bool("weak", false, "weak-memory mode: unfenced remote stores become visible late")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	explicit := *target != ""
	if !explicit {
		*target = string(ptx.SM90)
	}
	spec, t, dt, err := variant(pos, *target, *dtype)
	if err != nil {
		return err
	}
	if !explicit {
		t = ref.DefaultTarget(spec)
	}
	if *ranks < 1 || *ranks > 8 {
		return usagef("--ranks %d: want 1..8", *ranks)
	}
	if *size < 0 || *size > maxRunSize {
		return usagef("--size %d: want 0 (the kernel's own size) to %d bytes (256 MiB: the emulator runs every thread on the CPU)", *size, maxRunSize)
	}
	if *size%dt.Bytes() != 0 {
		return usagef("--size %d is not a multiple of the %d-byte %s element", *size, dt.Bytes(), dt)
	}
	res, err := ref.Run(ref.Problem{Kernel: spec.Name, DType: dt, Target: t, Size: *size / dt.Bytes(),
		Ranks: *ranks, Seed: *seed, Weak: *weak})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "ok: %v on %d simulated GPU(s)\n", res, *ranks)
	return nil
}
