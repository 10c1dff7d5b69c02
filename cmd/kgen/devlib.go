package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "devlib",
		summary: "build NVSHMEM's device library (bitcode) into PTX to link with kernels",
		usage:   "--target sm_90 [--funcs f1,f2,...] [-o FILE | --each DIR [--objects] [-j N]] [--list | --signatures] [--no-cache] [--nvshmem-home DIR]",
		run:     runDevlib,
	})
}

func runDevlib(e *env, args []string) error {
	c := commands["devlib"]
	fs := flags(e, c)
	var o devlib.Options
	target := fs.String("target", "", "GPU target ("+targetNames()+"; required unless --list or --signatures)")
	funcs := fs.String("funcs", "", "comma-separated NVSHMEM functions to build (default: every public function; takes minutes)")
	fs.StringVar(&o.Output, "o", "", "write the PTX to FILE instead of standard output")
	fs.StringVar(&o.EachDir, "each", "", "build one unit per function (cached per function, every core, progress) into DIR as FUNC.ptx")
	fs.BoolVar(&o.Objects, "objects", false, "with --each: also write FUNC.o, the relocatable cubin (ptxas -c) the JIT links without compiling")
	fs.IntVar(&o.Jobs, "j", 0, "with --each: functions built at once (default: every core)")
	fs.BoolVar(&o.List, "list", false, "list the public device functions instead of building")
	fs.BoolVar(&o.Signatures, "signatures", false, "print each function's PTX declaration instead of building")
	fs.BoolVar(&o.NoCache, "no-cache", false, "do not read or write the build cache")
	fs.StringVar(&o.Home, "nvshmem-home", "", "NVSHMEM installation (default: $NVSHMEM_HOME, then the project's .tools)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("devlib takes no positional arguments, got %q", pos[0])
	}
	if *target == "" && !o.List && !o.Signatures {
		return usagef("--target is required (e.g. --target sm_90)")
	}
	if *target != "" {
		t, err := ptx.ParseTarget(*target)
		if err != nil {
			return usagef("--target: %v", err)
		}
		if _, _, err := devlib.ParseTarget(t); err != nil {
			return usagef("--target: %v", err)
		}
		o.Target = t
	}
	if o.List && o.Signatures {
		return usagef("give either --list or --signatures, not both")
	}
	if o.EachDir != "" && o.Output != "" {
		return usagef("give either -o FILE or --each DIR, not both")
	}
	if o.EachDir != "" && (o.List || o.Signatures) {
		return usagef("--each DIR with --list or --signatures: they print the API and build nothing into DIR (give -o FILE for their output)")
	}
	jobsSet := false
	fs.Visit(func(f *flag.Flag) { jobsSet = jobsSet || f.Name == "j" })
	if (o.Objects || jobsSet) && o.EachDir == "" {
		return usagef("--objects and -j go with --each DIR")
	}
	if jobsSet && o.Jobs < 1 {
		return usagef("-j %d: want at least 1 function at once (leave -j out for one per core)", o.Jobs)
	}
	if *funcs != "" {
		// Names are checked here, so that a path or other non-name is a usage error.
		if _, err := devlib.NormalizeFuncs([]string{*funcs}); err != nil {
			return usagef("--funcs: %s (NVSHMEM device function names, comma-separated, such as nvshmem_quiet,nvshmem_my_pe; --list lists them)", strings.TrimPrefix(err.Error(), "devlib: "))
		}
		o.Funcs = []string{*funcs}
	}
	// The output paths are checked before the build, which can take minutes: a folder
	// given as -o FILE was found only when renaming over it (with a temporary file made
	// in its parent), a file given as --each DIR only after every unit was built.
	if o.Output != "" && o.Output != "-" {
		if fi, err := os.Stat(o.Output); err == nil && fi.IsDir() {
			return fmt.Errorf("-o %s is a folder: give a file to write the PTX to (or --each DIR for one file per function)", o.Output)
		}
	}
	if o.EachDir != "" {
		if fi, err := os.Stat(o.EachDir); err == nil && !fi.IsDir() {
			return fmt.Errorf("--each %s is not a folder: give a folder (made when missing) for FUNC.ptx", o.EachDir)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return devlib.Run(ctx, o, e.stdout, e.stderr)
}
