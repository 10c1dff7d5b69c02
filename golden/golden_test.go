package golden

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kgen-dev/kgen/internal/tooltest"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current code")

func TestGolden(t *testing.T) {
	vs := Variants()
	if len(vs) == 0 {
		t.Fatal("no library kernels registered")
	}
	for _, v := range vs {
		t.Run(strings.TrimSuffix(v.Path()[len("testdata/"):], ".ptx"), func(t *testing.T) {
			got, m, err := v.Generate()
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := v.Generate()
			if err != nil || !bytes.Equal(got, again) {
				t.Fatalf("output differs between two builds (err %v)", err)
			}
			if dir := os.Getenv(fullEnv); dir != "" { // for TestGoldenIgnoresLineMoves
				f := filepath.Join(dir, v.Path())
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if *update {
				if err := os.MkdirAll(filepath.Dir(v.Path()), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(v.Path(), got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(v.Path())
			if err != nil {
				t.Fatalf("%v (run `go test ./golden -update` to create it)", err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s differs (-want +got); run `go test ./golden -update` if the change is intended:\n%s", v.Path(), d)
			}
		})
	}
}

// TestNoStaleFiles fails on golden files that no variant produces.
func TestNoStaleFiles(t *testing.T) {
	want := map[string]bool{}
	for _, v := range Variants() {
		want[v.Path()] = true
	}
	files, _ := filepath.Glob("testdata/*/*.ptx")
	for _, f := range files {
		if !want[f] {
			if *update {
				os.Remove(f)
				continue
			}
			t.Errorf("stale golden file %s: no library kernel produces it", f)
		}
	}
}

var versionRE = regexp.MustCompile(`(?m)^\.version (\d+\.\d+)$`)
var targetRE = regexp.MustCompile(`(?m)^\.target (\S+)$`)

// TestPtxasAssembles assembles every golden file with ptxas for its target.
func TestPtxasAssembles(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	files, _ := filepath.Glob("testdata/*/*.ptx")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	var mu sync.Mutex
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Error(err)
				return
			}
			tm := targetRE.FindSubmatch(src)
			if tm == nil || versionRE.Find(src) == nil {
				t.Errorf("%s: no .target or .version line", f)
				return
			}
			out := filepath.Join(dir, strings.ReplaceAll(f, string(filepath.Separator), "_")+".cubin")
			var extra []string
			if bytes.Contains(src, []byte(".extern .func")) {
				extra = []string{"-c"} // calls externs (NVSHMEM): relocatable code
			}
			args := append([]string{"-arch=" + string(tm[1]), f, "-o", out}, extra...)
			b, err := exec.Command(ptxas, args...).CombinedOutput()
			if err != nil {
				mu.Lock()
				t.Errorf("ptxas rejects %s: %v\n%s", f, err, b)
				mu.Unlock()
				return
			}
			// The .version is the lowest that works: one release lower, ptxas refuses the file.
			v := string(versionRE.FindSubmatch(src)[1])
			lower := previousVersion(v)
			if lower == "" {
				return
			}
			low := filepath.Join(dir, strings.ReplaceAll(f, string(filepath.Separator), "_")+".lower.ptx")
			os.WriteFile(low, versionRE.ReplaceAll(src, []byte(".version "+lower)), 0o644)
			if b, err := exec.Command(ptxas, append([]string{"-arch=" + string(tm[1]), low, "-o", low + ".cubin"}, extra...)...).CombinedOutput(); err == nil {
				mu.Lock()
				t.Errorf("%s declares .version %s, but ptxas also accepts it with .version %s:\n%s", f, v, lower, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("ptxas assembled %d golden files, and refused each one PTX release below its .version", len(files))
}

// ptxVersions are the released PTX ISA versions ptxas 13 knows, oldest first.
var ptxVersions = []string{"7.0", "7.1", "7.2", "7.3", "7.4", "7.5", "7.6", "7.7", "7.8", "8.0", "8.1", "8.2", "8.3", "8.4", "8.5", "8.6", "8.7", "8.8", "9.0"}

// previousVersion returns the release before v, or "" for the oldest.
func previousVersion(v string) string {
	for i, x := range ptxVersions {
		if x == v && i > 0 {
			return ptxVersions[i-1]
		}
	}
	return ""
}
