package emu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Kind classifies an emulator error.
type Kind string

// The error kinds the sanitizer and the scheduler report.
const (
	KindOutOfBounds Kind = "out-of-bounds access"
	KindMisaligned  Kind = "misaligned access"
	KindBadAddress  Kind = "invalid address"
	KindMulticast   Kind = "multicast misuse"
	// KindRemoteNode: a load, store or atomic of a GPU on the memory of a GPU of another
	// node (System.SetNodes), which no peer pointer reaches.
	KindRemoteNode Kind = "access to another node's memory"
	KindRace       Kind = "shared-memory race"
	// KindDataRace: two threads' plain accesses to the same bytes of global memory, at
	// least one a write, with no ordering between them (see docs/emu.md).
	KindDataRace Kind = "data race"
	// KindMissingFence (weak mode): a thread reads a location before a buffered store of
	// another thread reaches it, after seeing a later store of that thread (or of its block,
	// after a barrier): the writer published without a fence or release.
	KindMissingFence Kind = "missing fence"
	KindBarrier      Kind = "barrier divergence"
	KindWarpSync     Kind = "warp-sync misuse"
	KindDeadlock     Kind = "deadlock"
	KindNoProgress   Kind = "no progress"
	KindUnsupported  Kind = "unsupported"
	KindExtern       Kind = "extern call failed"
	KindTrap         Kind = "trap"
	KindLaunch       Kind = "launch error"
	KindInternal     Kind = "internal error"
)

// Error is a fault in a running kernel: what went wrong, and where: the kernel, GPU, block,
// thread, the PTX instruction and the Go source line that built it (ptx.Instr.Pos).
type Error struct {
	Kind   Kind
	Kernel string
	GPU    int
	Block  [3]int
	Thread [3]int
	Instr  string  // the instruction as PTX text ("" when not tied to one)
	Pos    ptx.Pos // the Go source position of the instruction
	Msg    string
	// Warps describes every live warp for deadlock and no-progress errors: where it is and
	// what it waits on.
	Warps []string
	// Related names the other accesses of a missing-fence report: the buffered store that
	// was not visible yet, the writer's later store that was, and the read that saw it.
	Related []Access
}

// Access is one access of another thread that a report involves.
type Access struct {
	Role   string
	GPU    int
	Block  [3]int
	Thread [3]int
	Instr  string
	Pos    ptx.Pos
}

// maxErrName bounds a kernel name an error quotes, maxErrList a list of kernels or
// parameters, maxErrInstr an instruction: a kernel of a 100 KB name or of hundreds of long
// parameter names gives a short message.
const (
	maxErrName  = 128
	maxErrList  = 512
	maxErrInstr = 256
)

// errName is a kernel or function name for an error message: an excerpt past maxErrName.
func errName(name string) string { return excerpt.Cut(name, maxErrName) }

// instrText is an instruction as PTX text for an error message (and Error.Instr): an
// excerpt past maxErrInstr bytes (a call of a function of a long name).
func instrText(in *ptx.Instr) string { return excerpt.Cut(ptx.FormatInstr(in), maxErrInstr) }

// Error writes the fault; the kernel name is an excerpt past maxErrName bytes. A nil *Error
// says it is nil.
func (e *Error) Error() string {
	if e == nil {
		return "emu: a nil *Error"
	}
	var b strings.Builder
	if e.Kind == KindUnsupported && e.Instr != "" {
		fmt.Fprintf(&b, "emu: unsupported: %s at %s", e.Instr, posString(e.Pos))
		if e.Msg != "" {
			b.WriteString(" (" + e.Msg + ")")
		}
		fmt.Fprintf(&b, " in kernel %s on GPU %d block (%d,%d,%d) thread (%d,%d,%d)", excerpt.Cut(e.Kernel, maxErrName), e.GPU,
			e.Block[0], e.Block[1], e.Block[2], e.Thread[0], e.Thread[1], e.Thread[2])
		return b.String()
	}
	b.WriteString("emu: ")
	b.WriteString(string(e.Kind))
	if e.Kernel != "" {
		fmt.Fprintf(&b, " in kernel %s", excerpt.Cut(e.Kernel, maxErrName))
	}
	if e.Instr != "" || e.Kind != KindDeadlock && e.Kind != KindNoProgress && e.Kind != KindLaunch {
		fmt.Fprintf(&b, " on GPU %d block (%d,%d,%d) thread (%d,%d,%d)", e.GPU,
			e.Block[0], e.Block[1], e.Block[2], e.Thread[0], e.Thread[1], e.Thread[2])
	}
	if e.Instr != "" {
		fmt.Fprintf(&b, ": %q", e.Instr)
	}
	if e.Pos.File != "" {
		fmt.Fprintf(&b, " at %s:%d", e.Pos.File, e.Pos.Line)
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	for _, w := range e.Warps {
		b.WriteString("\n\t")
		b.WriteString(w)
	}
	return b.String()
}

// memFault is a memory access failure before it is tied to a thread and an instruction.
type memFault struct {
	kind Kind
	msg  string
}

func (f *memFault) Error() string { return string(f.kind) + ": " + f.msg }

func faultf(k Kind, format string, a ...any) *memFault {
	return &memFault{kind: k, msg: fmt.Sprintf(format, a...)}
}

func posString(p ptx.Pos) string {
	if p.File == "" {
		return "?"
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// errNilSystem is the error of a method of a nil *System: every method that can fail
// returns it (the getters return zero values), instead of a nil-pointer panic.
func errNilSystem(op string) error {
	return fmt.Errorf("emu: System.%s on a nil *System (make one with emu.New)", op)
}

// nilSystemLaunch is errNilSystem as a launch error (*Error) of kernel entry.
func nilSystemLaunch(op, entry string) error {
	return &Error{Kind: KindLaunch, Kernel: entry, Msg: fmt.Sprintf("System.%s on a nil *System (make one with emu.New)", op)}
}

// reentered is the error of a host call made while the System runs kernels (Launch or Run),
// from an Action or an extern function: such a call re-entered the scheduler (an Abort
// there ended the kernels, and the Run around it then reported them completed without an
// error; a nested Launch or RunScheduled ran the clock backwards). nil when none runs.
func (s *System) reentered(op string) error {
	if m := s.reenteredMsg(op); m != "" {
		return errors.New("emu: " + m)
	}
	return nil
}

// reenteredMsg is reentered's message without the package prefix (a launch error carries
// its own), "" when no kernel runs.
func (s *System) reenteredMsg(op string) string {
	if s.cur == nil {
		return ""
	}
	return fmt.Sprintf("System.%s while the System runs kernels (from an Action or an extern function): call it from the host, between Launch or Run calls", op)
}
