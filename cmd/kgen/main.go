// Command kgen generates PTX and typed Go launchers from kgen's kernel library, checks and
// runs kernels, draws layouts, builds NVSHMEM's device library and launches multi-rank
// programs.
//
//	kgen list                          the library's kernels, their element types and what they do
//	kgen ptx KERNEL                    one kernel's PTX for a target and element type
//	kgen check [KERNEL...]             ptxas over kernels x targets: registers, shared memory, spills
//	kgen run KERNEL                    run a kernel on the emulator, checked against a Go reference
//	kgen gen KERNEL... --pkg NAME      a Go package embedding the PTX, with typed launchers
//	kgen layout LAYOUT                 a layout (plain, swizzled, thread-value) as a grid or SVG
//	kgen devlib --target sm_90         NVSHMEM's device library (bitcode) as PTX
//	kgen launch -n N -- PROG           N ranks of a program, with torchrun's environment
//
// `kgen COMMAND --help` gives a command's flags. Usage errors exit with status 2, other
// failures with status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // after "kgen NAME "
	run     func(env *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// env is what a command may touch: its output streams.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

// usageError marks an error as a usage error (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fmt.Fprintf(stdout, "usage: kgen %s %s\n", c.name, c.usage)
				return 0
			}
		}
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kgen: unknown command %q (valid: %s)\n", args[0], strings.Join(commandNames(), ", "))
		return 2
	}
	err := c.run(e, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "kgen %s: %v\n", c.name, err)
	var u *usageError
	if errors.As(err, &u) {
		return 2
	}
	var x interface{ kgenExitCode() int } // a command passing on a program's exit status (launch)
	if errors.As(err, &x) {
		return x.kgenExitCode()
	}
	return 1
}

func commandNames() []string {
	var n []string
	for k := range commands {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "kgen: GPU kernels in Go\n\nusage: kgen COMMAND [flags] [args]\n\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `kgen COMMAND --help` for a command's flags.")
}

// flags returns a FlagSet for a command that reports errors as usage errors, not exits.
func flags(e *env, c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("kgen "+c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: kgen %s %s\n", c.name, c.usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags anywhere among the arguments (flags may follow positional ones) and
// returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
