package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
)

func init() {
	register(&command{
		name:    "launch",
		summary: "run a multi-rank program on N GPUs (N processes) or N simulated GPUs (one process)",
		usage: `-n N [--backend cuda|emu] [--nodes K] [--timeout D] [--master-addr A] [--master-port P] [--grace D] [--] PROG [ARGS...]

With --backend cuda, starts N processes of PROG with torchrun's environment (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and KGEN_BACKEND=cuda),
prefixes their output with "[rank R] " and waits; when one fails the others are stopped
(SIGTERM, then SIGKILL after --grace).
With --backend emu, runs PROG once with WORLD_SIZE=N and KGEN_BACKEND=emu: its jit.RunRanks
simulates the N ranks as goroutines sharing one emulated machine. --nodes K (emu only)
splits them into K nodes of N/K GPUs (KGEN_EMU_NODES=K, LOCAL_WORLD_SIZE=N/K): peer and
multicast addresses reach one node, and NVSHMEM operations between nodes arrive late.
The default backend is $KGEN_BACKEND, else cuda when this machine has an NVIDIA GPU
(/proc/driver/nvidia/gpus), else emu. The exit status is the first failure's (128+signal
for a signal, 143 when kgen launch itself gets SIGTERM); 124 when --timeout stops the
ranks (the error names those still running); 2 for usage errors.`,
		run: runLaunch,
	})
}

// launchExit carries a program's exit status out of kgen launch.
type launchExit struct {
	code int
	err  error
}

func (e *launchExit) Error() string     { return e.err.Error() }
func (e *launchExit) Unwrap() error     { return e.err }
func (e *launchExit) kgenExitCode() int { return e.code }

func runLaunch(e *env, args []string) error {
	c := commands["launch"]
	fs := flags(e, c)
	n := fs.Int("n", 1, "number of ranks")
	backend := fs.String("backend", "", "cuda (N processes) or emu (one process simulating N ranks); default: $KGEN_BACKEND, else cuda when a GPU is present, else emu")
	addr := fs.String("master-addr", "127.0.0.1", "cuda: where rank 0 serves the bootstrap (MASTER_ADDR)")
	port := fs.Int("master-port", 0, "cuda: MASTER_PORT (default: a free port)")
	startup := fs.Bool("startup", false, "every rank prints, at its first kernel launch, where the time to it went (open, NVSHMEM init, link, load); sets "+jit.StartupEnv+"=1")
	grace := fs.Duration("grace", 5*time.Second, "cuda: time between SIGTERM and SIGKILL for the other ranks once one fails")
	timeout := fs.Duration("timeout", 0, "stop the ranks if they have not all exited after this long (0: no limit)")
	nodes := fs.Int("nodes", 1, "emu: simulate the ranks on this many nodes of n/nodes GPUs (sets "+jit.EmuNodesEnv+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) == 0 || strings.TrimSpace(pos[0]) == "" {
		return usagef("no program given: kgen launch -n N [--backend cuda|emu] -- PROG [ARGS...]")
	}
	if *n < 1 || *n > jit.MaxLaunchRanks {
		return usagef("-n %d: want at least 1 rank and at most %d", *n, jit.MaxLaunchRanks)
	}
	if *timeout < 0 {
		return usagef("--timeout %v: want a positive duration (or 0: no limit)", *timeout)
	}
	if *port < 0 || *port > 65535 {
		return usagef("--master-port %d: want 0 to 65535", *port)
	}
	if *grace <= 0 {
		return usagef("--grace %v: want a positive duration", *grace)
	}
	// A host name or an address is one word of printable characters; a line break in it
	// went into the bootstrap's error unquoted, splitting the message over lines.
	if strings.ContainsFunc(*addr, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return usagef("--master-addr %s: want a host name or an IP address (no spaces or control characters)", excerpt.Quote(*addr))
	}
	b, err := launchBackend(*backend)
	if err != nil {
		return &usageError{err.Error()}
	}
	if b == jit.Emulator && *n > emu.MaxGPUs {
		return usagef("-n %d: the emulator simulates at most %d ranks", *n, emu.MaxGPUs)
	}
	if *nodes < 1 {
		return usagef("--nodes %d: want at least 1 node", *nodes)
	}
	if *n%*nodes != 0 {
		return usagef("--nodes %d: -n %d ranks do not split into %d nodes of equal size", *nodes, *n, *nodes)
	}
	if b == jit.Emulator {
		// The bootstrap flags mean nothing to the emulator's ranks (one process): refuse them
		// rather than ignore them.
		var cudaOnly []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "master-addr" || f.Name == "master-port" {
				cudaOnly = append(cudaOnly, "--"+f.Name)
			}
		})
		if len(cudaOnly) > 0 {
			return usagef("%s with --backend emu: the emulator's ranks share one process and need no bootstrap address (cuda only)", strings.Join(cudaOnly, " and "))
		}
	}
	if *nodes > 1 && b != jit.Emulator {
		return usagef("--nodes %d: only the emulator simulates nodes; on GPUs run one kgen launch (or torchrun) per node", *nodes)
	}
	prog := pos[0]
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("program %s: %w", prog, err)
	}
	ctx, stop := signalContext()
	defer stop()
	var extra []string
	if *startup {
		extra = append(extra, jit.StartupEnv+"=1")
	}
	if b == jit.Emulator {
		return launchEmu(ctx, e, *n, *nodes, prog, pos[1:], *grace, *timeout, extra)
	}
	code, err := jit.LaunchRanks(ctx, jit.LaunchOptions{
		N: *n, Prog: prog, Args: pos[1:], Env: append([]string{"KGEN_BACKEND=cuda"}, extra...),
		Stdout: underlying(e.stdout), Stderr: e.stderr, MasterAddr: *addr, MasterPort: *port, Grace: *grace,
		Timeout: *timeout,
	})
	if err != nil {
		if code == 0 {
			code = 1
		}
		return &launchExit{code: code, err: err}
	}
	return nil
}

// signalContext returns a context cancelled by SIGINT or SIGTERM, its cause a
// *jit.SignalError naming the signal (so the exit status is 130 or 143).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&jit.SignalError{Signal: s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// launchBackend picks the backend: the flag, else $KGEN_BACKEND, else cuda when the machine
// has an NVIDIA GPU, else emu.
func launchBackend(flag string) (jit.Backend, error) {
	if flag != "" {
		b, err := jit.ParseBackend(flag)
		if err != nil {
			return "", fmt.Errorf("--backend %s: want cuda or emu", excerpt.Quote(flag))
		}
		return b, nil
	}
	if v := os.Getenv("KGEN_BACKEND"); v != "" {
		b, err := jit.ParseBackend(v)
		if err != nil {
			return "", fmt.Errorf("KGEN_BACKEND=%s: want cuda or emu", excerpt.Quote(v))
		}
		return b, nil
	}
	if gs, err := os.ReadDir("/proc/driver/nvidia/gpus"); err == nil && len(gs) > 0 {
		return jit.GPU, nil
	}
	return jit.Emulator, nil
}

// launchEnv is the emulator's environment for n ranks on nodes nodes: this one without the
// variables that would make the process one rank of several, plus WORLD_SIZE=n,
// LOCAL_WORLD_SIZE=n/nodes, KGEN_EMU_NODES=nodes and KGEN_BACKEND=emu.
func launchEnv(n, nodes int) []string {
	drop := map[string]bool{"RANK": true, "LOCAL_RANK": true, "WORLD_SIZE": true, "LOCAL_WORLD_SIZE": true,
		"KGEN_BACKEND": true, "MASTER_ADDR": true, "MASTER_PORT": true, jit.EmuNodesEnv: true}
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, "WORLD_SIZE="+strconv.Itoa(n), "LOCAL_WORLD_SIZE="+strconv.Itoa(n/nodes),
		jit.EmuNodesEnv+"="+strconv.Itoa(nodes), "KGEN_BACKEND=emu")
}

func launchEmu(ctx context.Context, e *env, n, nodes int, prog string, args []string, grace, timeout time.Duration, extra []string) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(launchEnv(n, nodes), extra...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = underlying(e.stdout), e.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = grace
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// Stopped from here: the status says why (timeout or signal), not how PROG died.
		why := context.Cause(ctx)
		code := 130
		var se *jit.SignalError
		switch {
		case errors.As(why, &se):
			code = 128 + int(se.Signal)
		case errors.Is(why, context.DeadlineExceeded):
			code, why = 124, fmt.Errorf("timed out after %v", timeout)
		}
		return &launchExit{code: code, err: fmt.Errorf("%s (%d emulated ranks in one process) stopped: %v; the process (its ranks are goroutines) was still running", prog, n, why)}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := 1
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else if c := ee.ExitCode(); c > 0 {
			code = c
		}
		return &launchExit{code: code, err: fmt.Errorf("%s (%d emulated ranks) failed (exit code %d): %v", prog, n, code, err)}
	}
	return &launchExit{code: 127, err: fmt.Errorf("starting %s: %w", prog, err)}
}
