// Command kgen generates PTX and typed Go launchers from kgen's kernel library, checks and
// runs kernels, draws layouts, builds NVSHMEM's device library and launches multi-rank
// programs.
//
//	kgen list                          the library's kernels, their element types and what they do
//	kgen ptx KERNEL                    one kernel's PTX for a target and element type
//	kgen check [KERNEL...]             ptxas over kernels x targets: registers, shared memory, spills
//	kgen check FILE.ptx                kgen's PTX rules and ptxas over your own module (- for stdin)
//	kgen run KERNEL                    run a kernel on the emulator, checked against a Go reference
//	kgen gen KERNEL... --pkg NAME      a Go package embedding the PTX, with typed launchers
//	kgen layout LAYOUT                 a layout (plain, swizzled, thread-value) as a grid or SVG
//	kgen devlib --target sm_90         NVSHMEM's device library (bitcode) as PTX
//	kgen launch -n N -- PROG           N ranks of a program, with torchrun's environment
//	kgen tune gemm -m M -n N -k K      time gemm_sm90's candidates on the device, cache the fastest
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
	"strconv"
	"strings"
	"sync"

	"github.com/kgen-dev/kgen/internal/excerpt"
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

// usagef is a usage error. Long pieces of the command line it quotes are cut to excerpts
// when it is printed (clipInputs), not lists of valid values.
func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// message is err's text for "kgen NAME: ...": without a leading "NAME: " a package already
// put there ("kgen gen: gen: ..." said the command twice).
func message(name string, err error) string {
	return strings.TrimPrefix(err.Error(), name+": ")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// outWriter is a command's standard output: it keeps the first write error, so that a
// command whose report was lost (kgen run's "ok: ..." into a full disk or a closed pipe)
// exits 1, not 0 as though it had been read.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil && o.err == nil {
		o.err = err
	}
	return n, err
}

// underlying returns the writer w wraps when it is an *outWriter (kgen launch hands the
// programs it starts kgen's own standard output, not a pipe through it).
func underlying(w io.Writer) io.Writer {
	if o, ok := w.(*outWriter); ok {
		return o.w
	}
	return w
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	out := &outWriter{w: stdout}
	code := runCommand(args, out, stderr)
	if code == 0 && out.err != nil {
		name := "kgen"
		if len(args) > 0 {
			if _, ok := commands[args[0]]; ok {
				name += " " + args[0]
			}
		}
		fmt.Fprintf(stderr, "%s: writing standard output: %v\n", name, out.err)
		return 1
	}
	return code
}

// runCommand executes the command line with stdout already an *outWriter.
func runCommand(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 2 {
			fmt.Fprintf(stderr, "kgen help: want at most one COMMAND, got %s\n", excerpt.Quote(strings.Join(args[1:], " ")))
			return 2
		}
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(stderr, "kgen help: unknown command %s (valid: %s)\n", excerpt.Quote(args[1]), strings.Join(commandNames(), ", "))
				return 2
			}
			fmt.Fprintf(stdout, "usage: kgen %s %s\n", c.name, c.usage)
			return 0
		}
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kgen: unknown command %s (valid: %s)\n", excerpt.Quote(args[0]), strings.Join(commandNames(), ", "))
		return 2
	}
	err := c.run(e, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	var u *usageError
	if errors.As(err, &u) {
		// One line: the value that was wrong and the valid ones; the usage is --help's.
		fmt.Fprintf(stderr, "kgen %s: %s (see kgen help %s)\n", c.name, strings.ReplaceAll(clipInputs(message(c.name, u), args), "\n", "; "), c.name)
		return 2
	}
	fmt.Fprintf(stderr, "kgen %s: %s\n", c.name, clipInputs(message(c.name, err), args))
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

// flags returns a FlagSet for a command that reports errors as usage errors, not exits. The
// flag package's own messages are discarded (the error comes back as one line); --help
// prints the usage and the flags to stderr.
func flags(e *env, c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("kgen "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helps.Store(fs, func() {
		fmt.Fprintf(e.stderr, "usage: kgen %s %s\n", c.name, c.usage)
		fs.SetOutput(e.stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	})
	return fs
}

// helps maps a command's FlagSet to its --help printer.
var helps sync.Map

// parseFlags parses args with fs, turning errors into usage errors and printing the
// command's help for -h and --help. A string flag given explicitly empty (-o "", a path or
// value from an unset variable) is a usage error: it would otherwise mean the default
// silently. The flag package's messages quote whole values; long ones are cut to excerpts.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := onceEach(fs, args); err != nil {
		return err
	}
	err := fs.Parse(args)
	switch {
	case err == nil:
		var empty []string
		fs.Visit(func(f *flag.Flag) {
			if g, ok := f.Value.(flag.Getter); ok {
				if s, ok := g.Get().(string); ok && s == "" {
					empty = append(empty, f.Name)
				}
			}
		})
		if len(empty) > 0 {
			return usagef("-%s \"\": an empty value (give one, or leave the flag out for its default)", empty[0])
		}
		return nil
	case errors.Is(err, flag.ErrHelp):
		if h, ok := helps.Load(fs); ok {
			h.(func())()
		}
		return err
	}
	return &usageError{err.Error()}
}

// onceEach returns a usage error for a flag of fs given twice in args (the flag package
// keeps the last, so `--pkg a ... --pkg b` would mean b silently). It reads args as Parse
// does: a flag that is not boolean and has no =value takes the next argument, -- ends the
// flags, and other arguments are operands between flags.
func onceEach(fs *flag.FlagSet, args []string) error {
	seen := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, v, eq := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !eq && ok && b.IsBoolFlag() {
			v = "true"
		} else if !eq && i+1 < len(args) {
			i++
			v = args[i]
		}
		if first, ok := seen[name]; ok {
			return usagef("-%s given twice (%q, then %q): give it once", name, first, v)
		}
		seen[name] = v
	}
	return nil
}

// clipInputs replaces every long piece of the command line that msg quotes (an argument,
// a flag's name or value, a comma-separated item) by its excerpt, whichever package wrote
// the message: a 10 MB argument gives a short error, not a 10 MB one.
func clipInputs(msg string, args []string) string {
	var long []string
	add := func(s string) {
		if len(s) > excerpt.Max {
			long = append(long, s)
		}
	}
	for _, a := range args {
		add(a)
		add(strings.TrimLeft(a, "-"))
		name, v, eq := strings.Cut(a, "=")
		if eq {
			add(v)
			add(strings.TrimLeft(name, "-"))
		}
		for _, item := range strings.Split(v+","+a, ",") {
			add(strings.TrimSpace(item))
		}
	}
	if len(long) == 0 || len(msg) <= excerpt.Max {
		return msg
	}
	sort.Slice(long, func(i, j int) bool { return len(long[i]) > len(long[j]) })
	for _, l := range long {
		if !strings.Contains(msg, l) {
			continue
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(l), excerpt.Quote(l))
		msg = strings.ReplaceAll(msg, l, excerpt.Quote(l))
	}
	return msg
}

// parse parses flags anywhere among the arguments (flags may follow positional ones) and
// returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
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
