package jit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
)

// LaunchOptions configure LaunchRanks, the logic behind `kgen launch`.
type LaunchOptions struct {
	N    int      // number of ranks (processes), >= 1
	Prog string   // the program
	Args []string // its arguments
	// Env is added to this process's environment for every rank (after it, so it wins).
	Env []string
	// Stdout and Stderr receive the ranks' output, each line prefixed "[rank R] "
	// (default os.Stdout, os.Stderr).
	Stdout, Stderr io.Writer
	// MasterAddr and MasterPort are where rank 0 serves the bootstrap (default 127.0.0.1 and
	// a free port).
	MasterAddr string
	MasterPort int
	// Grace is how long the other ranks get between SIGTERM and SIGKILL once one rank has
	// failed (default 5s).
	Grace time.Duration
	// Timeout stops the ranks (as a failure does) when they have not all exited after it;
	// 0 means no limit. The error names the ranks still running; the exit code is 124.
	Timeout time.Duration
}

// MaxLaunchRanks is the most processes LaunchRanks starts: it runs one node's ranks
// (LOCAL_RANK = RANK), one per GPU.
const MaxLaunchRanks = 1024

// SignalError is a cancellation cause saying a signal stopped the launch: LaunchRanks then
// exits 128+signal (143 for SIGTERM), as a shell reports it.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return "stopped by " + e.Signal.String()
}

// timeoutError is the cause of a launch stopped by LaunchOptions.Timeout.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %v", e.d) }

// stopCode is the exit code of a launch that ctx stopped: 124 at LaunchOptions.Timeout
// (timeout(1)'s), 128+signal for a SignalError cause, else 130 (an interrupt).
func stopCode(ctx context.Context) int {
	var se *SignalError
	var te *timeoutError
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &se):
		return 128 + int(se.Signal)
	case errors.As(cause, &te):
		return 124
	}
	return 130
}

// LaunchRanks starts N processes of Prog with RANK, WORLD_SIZE, LOCAL_RANK (= RANK, one
// node), MASTER_ADDR and MASTER_PORT set, prefixes their output with the rank, and waits. When
// a rank fails, the others are sent SIGTERM, then SIGKILL after Grace, so a dead rank never
// leaves the rest hanging. It returns 0 and nil when every rank exits 0, else the first
// failure's exit code (128+signal for a signal) and a *RankError. Cancelling ctx stops all
// ranks the same way.
func LaunchRanks(ctx context.Context, o LaunchOptions) (int, error) {
	if o.N < 1 || o.N > MaxLaunchRanks {
		return 2, fmt.Errorf("launch: %d ranks: want 1 to %d (one node's ranks)", o.N, MaxLaunchRanks)
	}
	if ctx == nil {
		return 2, errors.New("launch: the context is nil")
	}
	if o.Timeout < 0 {
		return 2, fmt.Errorf("launch: negative timeout %v", o.Timeout)
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.Timeout, &timeoutError{o.Timeout})
		defer cancel()
	}
	if o.Prog == "" {
		return 2, errors.New("launch: no program given")
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	if o.MasterAddr == "" {
		o.MasterAddr = "127.0.0.1"
	}
	if strings.IndexFunc(o.MasterAddr, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return 2, fmt.Errorf("launch: MasterAddr %s: a host name or address has no spaces or control characters", excerpt.Quote(o.MasterAddr))
	}
	if o.MasterPort == 0 {
		p, err := freePort(o.MasterAddr)
		if err != nil {
			return 2, fmt.Errorf("launch: finding a free port on %s: %w", excerpt.Quote(o.MasterAddr), err)
		}
		o.MasterPort = p
	}
	var outMu sync.Mutex
	type result struct {
		rank int
		err  error
	}
	done := make(chan result, o.N)
	cmds := make([]*exec.Cmd, o.N)
	exited := make([]atomic.Bool, o.N)
	var writers []*prefixWriter
	started := 0
	var first *RankError
	for r := 0; r < o.N; r++ {
		c := exec.Command(o.Prog, o.Args...)
		c.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(o.N), "LOCAL_RANK="+strconv.Itoa(r),
			"LOCAL_WORLD_SIZE="+strconv.Itoa(o.N),
			"MASTER_ADDR="+o.MasterAddr, "MASTER_PORT="+strconv.Itoa(o.MasterPort))
		c.Env = append(c.Env, o.Env...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		prefix := fmt.Sprintf("[rank %d] ", r)
		wo := &prefixWriter{mu: &outMu, w: o.Stdout, prefix: prefix}
		we := &prefixWriter{mu: &outMu, w: o.Stderr, prefix: prefix}
		writers = append(writers, wo, we)
		c.Stdout, c.Stderr = wo, we
		c.WaitDelay = o.Grace + time.Second
		if err := c.Start(); err != nil {
			first = &RankError{Rank: r, ExitCode: 127, Err: err}
			break
		}
		cmds[r] = c
		started++
	}
	for r := 0; r < started; r++ {
		go func(r int) {
			err := cmds[r].Wait()
			exited[r].Store(true)
			done <- result{r, err}
		}(r)
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			for r := 0; r < started; r++ {
				if !exited[r].Load() {
					syscall.Kill(-cmds[r].Process.Pid, syscall.SIGTERM)
				}
			}
			time.AfterFunc(o.Grace, func() {
				for r := 0; r < started; r++ {
					if !exited[r].Load() {
						syscall.Kill(-cmds[r].Process.Pid, syscall.SIGKILL)
					}
				}
			})
		})
	}
	if first != nil {
		stop()
	}
	ctxDone := ctx.Done()
	for n := 0; n < started; {
		select {
		case res := <-done:
			n++
			if res.err != nil && first == nil {
				first = &RankError{Rank: res.rank, ExitCode: exitCode(res.err), Err: res.err}
				stop()
			}
		case <-ctxDone:
			ctxDone = nil
			if first == nil {
				var running []int
				for r := 0; r < started; r++ {
					if !exited[r].Load() {
						running = append(running, r)
					}
				}
				why := context.Cause(ctx)
				still := joinInts(running)
				if still == "" {
					still = "none"
				}
				first = &RankError{Rank: -1, ExitCode: stopCode(ctx), Err: fmt.Errorf("%w; ranks still running: %s", why, still)}
			}
			stop()
		}
	}
	for _, w := range writers {
		w.flush()
	}
	if first != nil {
		return first.ExitCode, first
	}
	return 0, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if c := ee.ExitCode(); c > 0 {
			return c
		}
	}
	return 1
}

// prefixWriter writes whole lines, each prefixed, to a writer shared under mu.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		io.WriteString(p.w, p.prefix+string(p.buf[:i+1]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		io.WriteString(p.w, p.prefix+string(p.buf)+"\n")
		p.buf = nil
	}
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
