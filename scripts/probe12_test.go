package scripts_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoPath matches a repository-relative path in a shell line (scripts/bench/run_nccl.sh,
// ./.gpu/kgen, ./cmd/kgen, $pkg/testdata), which means the working folder must be the root.
var repoPath = regexp.MustCompile(`(^|[\s"'(=])(\./)?(scripts|cmd|kernels|bench|examples|docs|\.gpu|\.tools|\.dev)/|\$pkg/|\$\{?pkg\}?\b`)

// TestProbe12ScriptsFindTheRoot: a shell script that uses a path of the repository relative
// to the working folder finds the root from its own location first (cd "$(dirname "$0")/.."),
// so that it runs from any folder, not only from the root. Before: scripts/fuzz.sh (PKG
// such as ./ptx) and scripts/bench/device_collbench.sh (scripts/bench/run_nccl.sh,
// ./.gpu/kgen) failed when called from another folder.
func TestProbe12ScriptsFindTheRoot(t *testing.T) {
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".sh") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		if strings.Contains(src, `dirname "$0"`) || strings.Contains(src, "BASH_SOURCE") {
			return nil
		}
		for i, line := range strings.Split(src, "\n") {
			if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") && repoPath.MatchString(l) {
				t.Errorf("scripts/%s:%d uses a repository path (%q) without finding the root from $0", p, i+1, strings.TrimSpace(line))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProbe12FuzzScriptFromAnywhere runs scripts/fuzz.sh of a clone from another folder with
// a stand-in go: it runs go in the clone's root, where its PKG (./ptx) lies.
func TestProbe12FuzzScriptFromAnywhere(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	clone := filepath.Join(t.TempDir(), "clone")
	copyTree(t, ".", filepath.Join(clone, "scripts"))
	fake := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\npwd\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, filepath.Join(clone, "scripts", "fuzz.sh"), "./ptx", "FuzzX", "1s")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GO="+fake)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fuzz.sh: %v\n%s", err, out)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != clone {
		t.Errorf("fuzz.sh ran go in %q, want the clone's root %q (output %q)", first, clone, out)
	}
}
