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
			got, _, err := v.Generate()
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := v.Generate()
			if err != nil || !bytes.Equal(got, again) {
				t.Fatalf("output differs between two builds (err %v)", err)
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
			args := []string{"-arch=" + string(tm[1]), f, "-o", out}
			if bytes.Contains(src, []byte(".extern .func")) {
				args = append([]string{"-c"}, args...) // calls externs (NVSHMEM): relocatable code
			}
			b, err := exec.Command(ptxas, args...).CombinedOutput()
			if err != nil {
				mu.Lock()
				t.Errorf("ptxas rejects %s: %v\n%s", f, err, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("ptxas assembled %d golden files", len(files))
}
