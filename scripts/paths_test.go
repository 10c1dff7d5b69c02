// Package scripts_test checks the repository's scripts: copied into a fresh clone-like
// folder, they find every path from their own location, not from the machine they were
// written on.
package scripts_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o755)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScriptsResolvePathsFromThemselves copies scripts/ and go.mod into a temporary clone and
// runs each build script's dry mode there: the root, the output folder and the tool folder
// must all lie in the clone.
func TestScriptsResolvePathsFromThemselves(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	clone := filepath.Join(t.TempDir(), "some", "clone")
	copyTree(t, ".", filepath.Join(clone, "scripts"))
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	for script, dest := range map[string]string{"gpu-hostpath.sh": ".dev/hostpath", "gpu-launchcost.sh": ".dev/launchcost"} {
		cmd := exec.Command(bash, filepath.Join(clone, "scripts", script), "paths")
		cmd.Dir = t.TempDir() // not the clone: the script must not depend on the working folder
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "DEST=") && !strings.HasPrefix(kv, "KGEN_TOOLS=") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s paths: %v\n%s", script, err, out)
		}
		want := map[string]string{"root": clone, "dest": filepath.Join(clone, dest), "KGEN_TOOLS": filepath.Join(clone, ".tools")}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s paths: %s=%q, want %q (output %q)", script, k, got[k], v, out)
			}
		}
	}
}

// TestScriptsNameNoMachinePaths: no script or note under scripts/ names an absolute folder
// of a development machine (a checkout or tool folder under /work, /home or /root).
func TestScriptsNameNoMachinePaths(t *testing.T) {
	abs, _ := filepath.Abs("..")
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, bad := range []string{abs, "/work/", "/home/", "/root/"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("scripts/%s names the machine path %s", p, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
