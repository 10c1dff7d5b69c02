package ptx

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
)

// The oracle: every instruction form the tables describe is assembled by ptxas for every
// target that allows it, at the lowest PTX version Verify says it needs.

const oracleBatch = 2000 // forms per PTX file

// formsModule returns a module holding forms in one function, with the names generated
// operands refer to (see enum.go).
func formsModule(t Target, v Version, forms []*Instr) *Module {
	callee := &Func{Name: formCallee, Rets: []Param{{Name: "r", Type: B32}}, Params: []Param{{Name: "a", Type: B64}}}
	callee.Body = []*Instr{
		{Op: "st", Q: []string{"param"}, Types: []Type{B32}, Args: []Operand{Addr{Base: Sym("r")}, IntImm(B32, 0)}},
		{Op: "ret"},
	}
	f := &Func{Name: "fforms", Visible: true,
		Rets:   []Param{{Name: formRet, Type: B8, Array: 256, Align: 16}},
		Params: []Param{{Name: formParam, Type: B8, Array: 256, Align: 16}},
	}
	f.Body = append(f.Body, forms...)
	f.Body = append(f.Body, &Instr{Label: formLabel}, &Instr{Op: "ret"})
	return &Module{Target: t, Version: v,
		Vars:  []*Var{{Space: SpaceConst, Name: formConst, Type: B8, Array: 256, Align: 16}},
		Funcs: []*Func{callee, f}}
}

// formVersion returns the PTX version a form needs on t, and whether t allows it at all.
func formVersion(in *Instr, t Target) (Version, bool) {
	v := t.MinVersion()
	for _, n := range rules[in.Op].needs(in) {
		if !n.ok(t) {
			return 0, false
		}
		if nv := n.version(t); nv > v {
			v = nv
		}
	}
	return v, true
}

type ptxasRunner struct {
	path string
	dir  string
	seq  atomic.Int64
	sem  chan struct{}
}

func newPtxas(t *testing.T) *ptxasRunner {
	return &ptxasRunner{path: tooltest.Ptxas(t), dir: t.TempDir(), sem: make(chan struct{}, max(runtime.NumCPU(), 2))}
}

// assemble runs ptxas on the module text; it returns the combined output and whether it
// succeeded.
func (p *ptxasRunner) assemble(t Target, src string) (string, bool) {
	return p.assembleArgs(t, src)
}

// assembleArgs is assemble with extra ptxas flags.
func (p *ptxasRunner) assembleArgs(t Target, src string, flags ...string) (string, bool) {
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	n := p.seq.Add(1)
	fn := filepath.Join(p.dir, "b"+strconv.FormatInt(n, 10)+".ptx")
	if err := os.WriteFile(fn, []byte(src), 0o644); err != nil {
		return err.Error(), false
	}
	defer os.Remove(fn)
	opt := "-O0" // parsing and checking are what the oracle is after; KGEN_PTXAS_OPT overrides
	if o := os.Getenv("KGEN_PTXAS_OPT"); o != "" {
		opt = o
	}
	args := append([]string{opt, "-arch=" + string(t)}, flags...)
	out, err := exec.Command(p.path, append(args, fn, "-o", fn+".o")...).CombinedOutput()
	os.Remove(fn + ".o")
	return string(out), err == nil
}

// oracleNoLines makes check ignore ptxas's line numbers (to test bisection).
var oracleNoLines bool

var ptxasLineRE = regexp.MustCompile(`line (\d+); (?:error|warning)\s*:\s*(.*)`)

// failure is a form ptxas rejected.
type failure struct {
	in  *Instr
	msg string
}

// check assembles forms for (t, v); it returns the forms ptxas rejected, each named by the
// ptxas error on its line, or found by bisection when ptxas names no line.
func (p *ptxasRunner) check(t Target, v Version, forms []*Instr) []failure {
	if len(forms) == 0 {
		return nil
	}
	src := formsModule(t, v, forms).String()
	out, ok := p.assemble(t, src)
	if ok && !strings.Contains(out, "warning") {
		return nil
	}
	// A warning fails the form too: kgen prints what ptxas takes without complaint.
	// Map ptxas's line numbers to forms.
	lines := strings.Split(src, "\n")
	lineForm := map[int]int{}
	fi := 0
	for i, l := range lines {
		if fi < len(forms) && strings.TrimSpace(l) == FormatInstr(forms[fi]) {
			lineForm[i+1] = fi
			fi++
		}
	}
	bad := map[int]string{}
	for _, m := range ptxasLineRE.FindAllStringSubmatch(out, -1) {
		if oracleNoLines {
			break
		}
		ln, _ := strconv.Atoi(m[1])
		if k, ok := lineForm[ln]; ok {
			if _, seen := bad[k]; !seen {
				bad[k] = m[2]
			}
		}
	}
	if len(bad) == 0 {
		if len(forms) == 1 {
			return []failure{{forms[0], strings.TrimSpace(out)}}
		}
		h := len(forms) / 2
		var res []failure
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, part := range [][]*Instr{forms[:h], forms[h:]} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := p.check(t, v, part)
				mu.Lock()
				res = append(res, r...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return res
	}
	var res []failure
	var rest []*Instr
	for i, f := range forms {
		if msg, ok := bad[i]; ok {
			res = append(res, failure{f, msg})
		} else {
			rest = append(rest, f)
		}
	}
	return append(res, p.check(t, v, rest)...)
}

type batchKey struct {
	t Target
	v Version
}

// groupForms splits the forms each target allows into batches by the version they need.
func groupForms(forms []*Instr) (map[batchKey][]*Instr, map[Target]int) {
	groups := map[batchKey][]*Instr{}
	count := map[Target]int{}
	for _, t := range Targets() {
		for _, f := range forms {
			v, ok := formVersion(f, t)
			if !ok {
				continue
			}
			k := batchKey{t, v}
			groups[k] = append(groups[k], f)
			count[t]++
		}
	}
	return groups, count
}

func TestOracleForms(t *testing.T) {
	p := newPtxas(t)
	forms := allForms()
	if pre := os.Getenv("KGEN_ORACLE_OPS"); pre != "" { // assemble only the opcodes with these prefixes
		var some []*Instr
		for _, f := range forms {
			for _, p := range strings.Split(pre, ",") {
				if strings.HasPrefix(f.Op, p) {
					some = append(some, f)
					break
				}
			}
		}
		forms = some
	}
	perOp := map[string]int{}
	for _, f := range forms {
		perOp[f.Op]++
	}
	t.Logf("oracle: %d forms in the tables (%d opcodes)", len(forms), len(perOp))
	groups, count := groupForms(forms)
	keys := make([]batchKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].t != keys[j].t {
			return keys[i].t < keys[j].t
		}
		return keys[i].v < keys[j].v
	})
	var mu sync.Mutex
	failed := map[Target]int{}
	var fails []string
	var wg sync.WaitGroup
	for _, k := range keys {
		g := groups[k]
		for i := 0; i < len(g); i += oracleBatch {
			part := g[i:min(i+oracleBatch, len(g))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, f := range p.check(k.t, k.v, part) {
					mu.Lock()
					failed[k.t]++
					fails = append(fails, fmt.Sprintf("%s PTX %v: %s: %s", k.t, k.v, FormatInstr(f.in), f.msg))
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	sort.Strings(fails)
	if fn := os.Getenv("KGEN_ORACLE_FAILS"); fn != "" {
		os.WriteFile(fn, []byte(strings.Join(fails, "\n")+"\n"), 0o644)
	}
	for i, s := range fails {
		if i == 300 {
			t.Errorf("... and %d more", len(fails)-300)
			break
		}
		t.Error(s)
	}
	for _, tg := range Targets() {
		t.Logf("oracle: %s: %d forms assembled (%d rejected)", tg, count[tg]-failed[tg], failed[tg])
	}
	if os.Getenv("KGEN_ORACLE_DUMP") != "" {
		var b bytes.Buffer
		for _, f := range forms {
			b.WriteString(FormatInstr(f) + "\n")
		}
		os.WriteFile(os.Getenv("KGEN_ORACLE_DUMP"), b.Bytes(), 0o644)
	}
}
