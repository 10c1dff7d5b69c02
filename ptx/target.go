package ptx

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Version is a PTX ISA version, major*10+minor (78 is PTX 7.8).
type Version int

// String returns "M.m".
func (v Version) String() string { return fmt.Sprintf("%d.%d", int(v)/10, int(v)%10) }

// Target is a GPU architecture as PTX's .target names it: "sm_90", "sm_90a".
type Target string

// The targets kgen supports.
const (
	SM80   Target = "sm_80"
	SM86   Target = "sm_86"
	SM89   Target = "sm_89"
	SM90   Target = "sm_90"
	SM90a  Target = "sm_90a"
	SM100a Target = "sm_100a"
	SM120a Target = "sm_120a"
)

// targetInfo: the compute capability and the lowest PTX ISA version that knows the target.
var targetInfo = map[Target]struct {
	sm     int
	minPTX Version
}{
	SM80:   {80, 70},
	SM86:   {86, 71},
	SM89:   {89, 78},
	SM90:   {90, 78},
	SM90a:  {90, 80},
	SM100a: {100, 86},
	SM120a: {120, 87},
}

// Targets lists the supported targets, oldest first.
func Targets() []Target {
	return []Target{SM80, SM86, SM89, SM90, SM90a, SM100a, SM120a}
}

// ParseTarget validates a target name; the error names the valid ones.
func ParseTarget(s string) (Target, error) {
	t := Target(s)
	if _, ok := targetInfo[t]; ok {
		return t, nil
	}
	names := make([]string, 0, len(targetInfo))
	for _, v := range Targets() {
		names = append(names, string(v))
	}
	return "", fmt.Errorf("unknown target %s (valid: %s)", excerpt.Quote(s), strings.Join(names, ", "))
}

// SM returns the compute capability as an integer (90 for sm_90a).
func (t Target) SM() int { return targetInfo[t].sm }

// ArchSpecific reports whether t is an architecture-specific target (the "a" suffix).
func (t Target) ArchSpecific() bool { return strings.HasSuffix(string(t), "a") }

// MinVersion returns the lowest PTX ISA version that accepts .target t.
func (t Target) MinVersion() Version { return targetInfo[t].minPTX }

// Valid reports whether t is a supported target.
func (t Target) Valid() bool { _, ok := targetInfo[t]; return ok }
