package scripts_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbe18FuzzScriptUsage: scripts/fuzz.sh given other than its three arguments says how
// to call it and exits 2 (it failed with bash's "line 9: $1: unbound variable", exit 1, or
// ran go test with the extra arguments dropped); probe 18.
func TestProbe18FuzzScriptUsage(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"./ptx"}, {"./ptx", "FuzzX"}, {"./ptx", "FuzzX", "1s", "extra"}} {
		cmd := exec.Command(bash, append([]string{script}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Environ(), "GO=/nonexistent/go")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.HasPrefix(string(out), "usage: scripts/fuzz.sh PKG NAME FUZZTIME") {
			t.Errorf("fuzz.sh %q: %v\n%s; want exit status 2 and the usage line", args, err, out)
		}
	}
}
