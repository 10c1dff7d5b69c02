package golden

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

var (
	fileRE = regexp.MustCompile(`(?m)^\.file (\d+) "([^"]+)"$`)
	locRE  = regexp.MustCompile(`^\t\.loc (\d+) (\d+) 0$`)
)

// locs returns, for each instruction line of PTX text (by its text without indentation), the
// Go file and line of the .loc above it.
func locs(t *testing.T, src string) map[string][]ptx.Pos {
	t.Helper()
	files := map[string]string{}
	for _, m := range fileRE.FindAllStringSubmatch(src, -1) {
		files[m[1]] = m[2]
	}
	out := map[string][]ptx.Pos{}
	var cur ptx.Pos
	for _, l := range strings.Split(src, "\n") {
		if m := locRE.FindStringSubmatch(l); m != nil {
			line, _ := strconv.Atoi(m[2])
			if files[m[1]] == "" {
				t.Fatalf(".loc names file %s, which the .file table lacks", m[1])
			}
			cur = ptx.Pos{File: files[m[1]], Line: line}
			continue
		}
		if cur.File != "" && strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "\t.") {
			s := strings.TrimSpace(l)
			out[s] = append(out[s], cur)
		}
	}
	return out
}

// TestLocPointsAtGoLines builds a kernel here and checks that the .loc above each instruction
// of the full PTX names this file and the line of the DSL call that emitted it.
func TestLocPointsAtGoLines(t *testing.T) {
	k := dsl.New("loc", dsl.WithTarget(ptx.SM90))
	x, y := k.PtrParam("x", dsl.F32), k.PtrParam("y", dsl.F32)
	i := k.ThreadIdx(dsl.X)
	_, file, line, _ := runtime.Caller(0)
	v := k.Load(x.At(i)) // line+1
	w := v.Mul(3)        // line+2
	k.Store(y.At(i), w)  // line+3
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	src := m.String()
	got := locs(t, src)
	want := map[string]int{"ld.global.f32 ": line + 1, "mul.f32 ": line + 2, "st.global.f32 ": line + 3}
	for op, l := range want {
		var ps []ptx.Pos
		for instr, p := range got {
			if strings.HasPrefix(instr, op) {
				ps = append(ps, p...)
			}
		}
		if len(ps) != 1 || ps[0] != (ptx.Pos{File: "golden/loc_test.go", Line: l}) {
			t.Errorf("%s: .loc %v, want golden/loc_test.go:%d\n%s", op, ps, l, src)
		}
	}
	// The lines named hold the calls (a check that the expectations above are right).
	lines := readLines(t, file)
	for l, call := range map[int]string{line + 1: "k.Load(", line + 2: "v.Mul(", line + 3: "k.Store("} {
		if !strings.Contains(lines[l-1], call) {
			t.Errorf("line %d of %s is %q, not the %s call", l, file, lines[l-1], call)
		}
	}
	// Parse reads the .loc lines back.
	back, err := ptx.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if back.String() != src {
		t.Error("PTX with .loc lines does not round-trip through ptx.Parse")
	}
}

// TestLibraryLocLines checks the full PTX of every golden variant: each .loc names a Go file
// of this module and a line of it that holds code (not blank, not a comment), and the text
// parses back the same.
func TestLibraryLocLines(t *testing.T) {
	cache := map[string][]string{}
	for _, v := range Variants() {
		m, err := v.Spec.Build(v.Config)
		if err != nil {
			t.Fatal(err)
		}
		src := m.String()
		n := 0
		for _, ps := range locs(t, src) {
			for _, p := range ps {
				n++
				lines, ok := cache[p.File]
				if !ok {
					lines = readLines(t, filepath.Join("..", filepath.FromSlash(p.File)))
					cache[p.File] = lines
				}
				if p.Line < 1 || p.Line > len(lines) {
					t.Fatalf("%s: .loc %s:%d is past the file's %d lines", v.Path(), p.File, p.Line, len(lines))
				}
				if s := strings.TrimSpace(lines[p.Line-1]); s == "" || strings.HasPrefix(s, "//") {
					t.Fatalf("%s: .loc %s:%d is not a line of code: %q", v.Path(), p.File, p.Line, s)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no .loc lines in the full PTX", v.Path())
		}
		back, err := ptx.Parse(src)
		if err != nil || back.String() != src {
			t.Fatalf("%s: full PTX does not round-trip through ptx.Parse (err %v)", v.Path(), err)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenIgnoresLineMoves runs TestGolden again in a child `go test` whose kernels/*.go
// files each start with one more blank line (go build -overlay): every golden file must come
// out the same, while the child's full PTX (written to $KGEN_GOLDEN_FULL) shows every .loc
// into kernels/ one line lower, which proves the overlay moved the lines.
func TestGoldenIgnoresLineMoves(t *testing.T) {
	goTool := tooltest.Go(t)
	srcs, err := filepath.Glob(filepath.Join("..", "kernels", "*.go"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no kernel sources (%v)", err)
	}
	dir := t.TempDir()
	replace := map[string]string{}
	for _, s := range srcs {
		if strings.HasSuffix(s, "_test.go") {
			continue
		}
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		abs, err := filepath.Abs(s)
		if err != nil {
			t.Fatal(err)
		}
		moved := filepath.Join(dir, filepath.Base(s))
		if err := os.WriteFile(moved, append([]byte("\n"), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[abs] = moved
	}
	ov, _ := json.Marshal(map[string]any{"Replace": replace})
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	cmd := exec.Command(goTool, "test", "-count=1", "-overlay", ovFile, "-run", "^TestGolden$", ".")
	cmd.Env = append(os.Environ(), fullEnv+"="+full, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		if len(out) > 4000 {
			out = append(out[:4000], "\n..."...)
		}
		t.Fatalf("golden files change when kernels/*.go lines move one down: %v\n%s", err, out)
	}
	// The child's full PTX: each .loc into kernels/ is one line below this build's.
	checked := 0
	for _, v := range Variants() {
		b, err := os.ReadFile(filepath.Join(full, v.Path()))
		if err != nil {
			t.Fatalf("the child wrote no full PTX: %v", err)
		}
		m, err := v.Spec.Build(v.Config)
		if err != nil {
			t.Fatal(err)
		}
		here, there := locs(t, m.String()), locs(t, string(b))
		for instr, ps := range here {
			qs := there[instr]
			if len(qs) != len(ps) {
				t.Fatalf("%s: %q has %d positions here and %d in the child", v.Path(), instr, len(ps), len(qs))
			}
			for j, p := range ps {
				if strings.HasPrefix(p.File, "kernels/") {
					p.Line++
				}
				if qs[j] != p {
					t.Fatalf("%s: %q: child's .loc %v, want %v", v.Path(), instr, qs[j], p)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no .loc lines compared")
	}
	t.Logf("golden files unchanged with kernels/*.go moved one line; %d .loc positions moved with them", checked)
}

// fullEnv names a folder where TestGolden also writes each variant's full PTX (.loc included).
const fullEnv = "KGEN_GOLDEN_FULL"
