package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "list",
		summary: "list the library's kernels",
		usage:   "",
		run:     runList,
	})
	register(&command{
		name:    "ptx",
		summary: "print a library kernel's PTX",
		usage:   "KERNEL [--target sm_90] [--dtype f32] [-o FILE] [--no-loc]",
		run:     runPTX,
	})
}

func runList(e *env, args []string) error {
	c := commands["list"]
	fs := flags(e, c)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("list takes no arguments, got %s", excerpt.Quote(strings.Join(pos, " ")))
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tDTYPES\tDESCRIPTION")
	for _, s := range kernels.All() {
		var dts []string
		for _, t := range s.DTypes {
			dts = append(dts, t.String())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, strings.Join(dts, ","), s.Doc)
	}
	return tw.Flush()
}

func runPTX(e *env, args []string) error {
	c := commands["ptx"]
	fs := flags(e, c)
	target := fs.String("target", "", "GPU target ("+targetNames()+"; default sm_90, or the kernel's first target without sm_90)")
	dtype := fs.String("dtype", "", "element type (default: the kernel's first)")
	out := fs.String("o", "", "write to FILE instead of standard output")
	noLoc := fs.Bool("no-loc", false, "omit .file/.loc source lines")
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
	m, err := spec.Build(kernels.Config{Target: t, DType: dt})
	if err != nil {
		return err
	}
	var b strings.Builder
	if err := ptx.PrintWith(&b, m, ptx.PrintOptions{NoLoc: *noLoc}); err != nil {
		return err
	}
	if *out == "" {
		_, err = fmt.Fprint(e.stdout, b.String())
		return err
	}
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}

func joinTargets(ts []ptx.Target) string {
	n := make([]string, len(ts))
	for i, t := range ts {
		n[i] = string(t)
	}
	return strings.Join(n, ", ")
}

// dtypeNames lists the element types of the named kernels (unknown names skipped), sorted.
func dtypeNames(names []string) string {
	var out []string
	for _, name := range names {
		if s, err := kernels.Lookup(name); err == nil {
			for _, t := range s.DTypes {
				if !slices.Contains(out, t.String()) {
					out = append(out, t.String())
				}
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func targetNames() string {
	var n []string
	for _, t := range ptx.Targets() {
		n = append(n, string(t))
	}
	return strings.Join(n, ", ")
}

// variant resolves the KERNEL argument and the --target and --dtype flags of a command that
// works on one kernel variant; its errors are usage errors naming the valid values.
// kernelTarget is the target a command builds KERNEL (pos[0]) for without --target: sm_90,
// or the kernel's first target when it has no sm_90 (gemm_sm90 and the fused sm_90a kernels:
// sm_90a).
func kernelTarget(pos []string) string {
	if len(pos) == 1 {
		if s, err := kernels.Lookup(pos[0]); err == nil {
			return string(ref.DefaultTarget(s))
		}
	}
	return string(ptx.SM90)
}

func variant(pos []string, target, dtype string) (*kernels.Spec, ptx.Target, dsl.Type, error) {
	if len(pos) != 1 {
		return nil, "", 0, usagef("want exactly one KERNEL (valid: %s)", strings.Join(kernels.Names(), ", "))
	}
	spec, err := kernels.Lookup(pos[0])
	if err != nil {
		return nil, "", 0, &usageError{err.Error()}
	}
	t, err := ptx.ParseTarget(target)
	if err != nil {
		return nil, "", 0, &usageError{"--target: " + err.Error()}
	}
	if !slices.Contains(spec.Targets, t) {
		return nil, "", 0, usagef("--target %s: kernel %s does not support it (its targets: %s)", t, spec.Name, joinTargets(spec.Targets))
	}
	dt := spec.DTypes[0]
	if dtype != "" {
		if dt, err = spec.ParseDType(dtype); err != nil {
			return nil, "", 0, &usageError{"--dtype: " + err.Error()}
		}
	}
	return spec, t, dt, nil
}
