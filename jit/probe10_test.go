package jit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// probe10Script writes an executable shell script that answers --version like a ptxas and
// runs body (with $out the -o argument) for a compile.
func probe10Script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-ptxas")
	s := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'; echo 'Cuda compilation tools, release 99.0, V99.0.1'; exit 0; fi\n" +
		"out=''; prev=''; for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n" + body + "\n"
	if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// compileWithin runs c.compile and fails the test when it does not return within d.
func compileWithin(t *testing.T, c *ptxasCompiler, d time.Duration) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := c.compile("probe", []byte(ptxasTestPTX), "sm_90a", false)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(d):
		t.Fatalf("compile did not return within %v", d)
		return nil, nil
	}
}

// TestProbe10PtxasEnvPaths: KGEN_PTXAS naming a folder, a file that is not executable, or
// nothing is an error naming the variable; a relative path is resolved once, to an absolute
// path, so a later change of the working folder does not run another program under the
// first one's version (its cache key).
func TestProbe10PtxasEnvPaths(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("ptxas\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{"folder": dir, "not executable": plain, "missing relative": "no/such/ptxas"} {
		t.Setenv(PtxasEnv, p)
		c, err := ptxasFromEnv()
		if err == nil || c != nil || !strings.Contains(err.Error(), PtxasEnv) {
			t.Errorf("%s (%s): %v %v (want an error naming %s)", name, p, c, err, PtxasEnv)
		}
	}

	script := probe10Script(t, "echo ok > \"$out\"")
	rel, err := filepath.Rel(mustWd(t), script)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(PtxasEnv, rel)
	c, err := ptxasFromEnv()
	if err != nil {
		t.Fatalf("relative %s: %v", rel, err)
	}
	if !filepath.IsAbs(c.path) || c.path != script {
		t.Errorf("relative %s ran as %q; want the absolute %s", rel, c.path, script)
	}
	t.Chdir(t.TempDir())
	if _, err := compileWithin(t, c, time.Minute); err != nil {
		t.Errorf("compile after a change of folder: %v", err)
	}
}

func mustWd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestProbe10PtxasOutput: a ptxas that says it is one but leaves no cubin, an empty one, a
// FIFO, a symlink to /dev/zero or a file over the cache's entry limit fails promptly with an
// error naming the module, never a blocked read or an exhausted memory.
func TestProbe10PtxasOutput(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"no output":  {"exit 0", "module probe"},
		"empty":      {": > \"$out\"", "empty"},
		"fifo":       {"mkfifo \"$out\"", "not a regular file"},
		"/dev/zero":  {"ln -s /dev/zero \"$out\"", "not a regular file"},
		"huge":       {"truncate -s 2G \"$out\"", "limit"},
		"fails":      {"echo bad input >&2; exit 3", "bad input"},
		"prints lot": {"head -c 100000 /dev/zero | tr '\\0' x; echo ok > \"$out\"", ""},
	} {
		t.Run(strings.ReplaceAll(name, "/", ""), func(t *testing.T) {
			t.Setenv(PtxasEnv, probe10Script(t, c.body))
			px, err := ptxasFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			b, err := compileWithin(t, px, time.Minute)
			if c.want == "" {
				if err != nil || string(b) != "ok\n" {
					t.Errorf("%q, %v (want the cubin)", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "module probe") {
				t.Errorf("%d bytes, %v (want an error naming module probe and %q)", len(b), err, c.want)
			}
		})
	}
}

// TestProbe10JITMode: KGEN_JIT takes its three words exactly; another spelling is an error
// naming the variable and the values, not a silent default.
func TestProbe10JITMode(t *testing.T) {
	for _, v := range []string{"WHOLE", " whole", "whole\n", "link,whole", "0", "true"} {
		t.Setenv(JITModeEnv, v)
		if m, err := jitModeFromEnv(); err == nil || !strings.Contains(err.Error(), JITModeEnv) || !strings.Contains(err.Error(), "auto, whole or link") {
			t.Errorf("%s=%q: %v %v (want an error naming %s and the values)", JITModeEnv, v, m, err, JITModeEnv)
		}
	}
	if err := entryFits(0); err != nil {
		t.Errorf("an empty entry: %v", err)
	}
}
