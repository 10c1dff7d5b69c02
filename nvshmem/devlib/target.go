package devlib

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// PTXVersion is the PTX ISA version of every devlib PTX: llc is run with -mattr=+ptx80.
//
// 8.0 is the lowest version that covers every target llc 19 can emit for (sm_90a needs it),
// it is what the end-to-end run on H200s used, and every driver that runs NVSHMEM 3 (CUDA 12.0
// or newer) accepts it. The bitcode itself is tagged +ptx83, but no function in NVSHMEM
// 3.4.5 needs more than 8.0 on sm_90: llc compiles the whole public API with +ptx80 (see
// FACTS.md). A kernel's own PTX may use any newer version; each module in a link has its own.
const PTXVersion = "8.0"

// llcTargets are the sm_XX processors llc 19 knows, without the arch-specific "a" variants,
// newest first.
var llcTargets = []int{90, 89, 87, 86, 80, 75, 72, 70}

// knownSMs are the GPU architectures from sm_70 on that CUDA 12 and 13 name (ptxas 13.0
// --help lists 75 to 121; CUDA 12 also has 70, 72 and 101, which CUDA 13 renamed 110).
var knownSMs = []int{70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121}

func knownSMNames() string {
	n := make([]string, len(knownSMs))
	for i, sm := range knownSMs {
		n[i] = "sm_" + strconv.Itoa(sm)
	}
	return strings.Join(n, ", ")
}

// Plan says how the devlib PTX for a target is produced.
type Plan struct {
	// Target is the requested target, for example ptx.SM90, ptx.SM90a or ptx.SM100a.
	Target ptx.Target
	// PTXTarget is the processor given to llc (-mcpu) and so the PTX's .target: the newest
	// processor llc 19 knows that is not newer than Target, without an "a"/"f" suffix. PTX for
	// .target sm_XY is compiled by ptxas and the CUDA JIT for any sm_MN, sm_MNa, sm_MNf with
	// MN >= XY, so sm_90a and sm_100a kernels link against sm_90 devlib PTX.
	PTXTarget string
	// PTXVersion is the PTX ISA version ("8.0"); llc gets -mattr=+ptx80.
	PTXVersion string
}

// LLCArgs returns llc's target flags: -march=nvptx64 -mcpu=... -mattr=+ptx...
func (p Plan) LLCArgs() []string {
	return []string{"-march=nvptx64", "-mcpu=" + p.PTXTarget,
		"-mattr=+ptx" + strings.ReplaceAll(p.PTXVersion, ".", "")}
}

// TargetError reports a target that is not of the form sm_XX with XX >= 70.
type TargetError struct{ Target, Reason string }

// Error names the target, says why it is refused and what is accepted.
func (e *TargetError) Error() string {
	return fmt.Sprintf("devlib: unsupported target %s: %s (want sm_XX with XX >= 70, optionally with an a or f suffix: sm_80, sm_90, sm_90a, sm_100a)", excerpt.Quote(e.Target), e.Reason)
}

// ParseTarget splits "sm_90a" into 90 and "a". It accepts sm_NN and sm_NNN with NN >= 70,
// the suffix "a" from sm_90 on and "f" from sm_100 on: every ptx.Targets() target, and the
// older and family targets NVSHMEM supports (ptx.Target("sm_75"), ptx.Target("sm_100f")).
func ParseTarget(t ptx.Target) (sm int, suffix string, err error) {
	target := string(t)
	rest, ok := strings.CutPrefix(target, "sm_")
	if !ok {
		if strings.HasPrefix(target, "compute_") {
			return 0, "", &TargetError{target, "a virtual compute_ architecture has no code to link; give the sm_ name"}
		}
		return 0, "", &TargetError{target, "it does not start with sm_"}
	}
	digits := strings.TrimRight(rest, "af")
	suffix = rest[len(digits):]
	if len(suffix) > 1 {
		return 0, "", &TargetError{target, "more than one suffix letter"}
	}
	if len(digits) < 2 || len(digits) > 3 || strings.Trim(digits, "0123456789") != "" || digits[0] == '0' {
		return 0, "", &TargetError{target, "the architecture is not a two- or three-digit number"}
	}
	sm, _ = strconv.Atoi(digits)
	switch {
	case sm < 70:
		return 0, "", &TargetError{target, "NVSHMEM needs sm_70 or newer"}
	case !slices.Contains(knownSMs, sm):
		return 0, "", &TargetError{target, fmt.Sprintf("sm_%d is not a GPU architecture (known from 70 on: %s)", sm, knownSMNames())}
	case suffix == "a" && sm < 90:
		return 0, "", &TargetError{target, "arch-specific (a) targets start at sm_90a"}
	case suffix == "f" && sm < 100:
		return 0, "", &TargetError{target, "family (f) targets start at sm_100f"}
	}
	return sm, suffix, nil
}

// PlanTarget returns how the devlib PTX for target is built, or a *TargetError.
func PlanTarget(target ptx.Target) (Plan, error) {
	sm, _, err := ParseTarget(target)
	if err != nil {
		return Plan{}, err
	}
	cpu := 0
	for _, t := range llcTargets {
		if t <= sm {
			cpu = t
			break
		}
	}
	return Plan{Target: target, PTXTarget: "sm_" + strconv.Itoa(cpu), PTXVersion: PTXVersion}, nil
}
