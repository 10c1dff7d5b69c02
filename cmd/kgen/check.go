package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "check",
		summary: "assemble library kernels (or your own FILE.ptx) with ptxas; print registers, shared memory, spills",
		usage: `[KERNEL...] [--target sm_90] [--dtype f32]
       kgen check FILE.ptx... (- for standard input)

With FILE.ptx (a name ending in .ptx, a path, or - for standard input), checks your own
module: kgen's PTX rules (ptx.Parse, ptx.Verify), then ptxas for the module's .target;
prints each entry's registers, shared memory and spills. Problems name the file and line.`,
		run: runCheck,
	})
}

// checkRow is one assembled variant.
type checkRow struct {
	kernel, dtype string
	target        ptx.Target
	regs, smem    int
	spillSt       int
	spillLd       int
	err           error
}

var (
	regsRE  = regexp.MustCompile(`Used (\d+) registers`)
	smemRE  = regexp.MustCompile(`(\d+) bytes smem`)
	spillRE = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
)

func runCheck(e *env, args []string) error {
	c := commands["check"]
	fs := flags(e, c)
	target := fs.String("target", "", "only this target (default: every target each kernel supports)")
	dtype := fs.String("dtype", "", "only this element type")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	var files []string
	for _, a := range pos {
		if isPTXFile(a) {
			files = append(files, a)
		}
	}
	if len(files) > 0 {
		if len(files) != len(pos) || *target != "" || *dtype != "" {
			return usagef("check FILE.ptx takes files only (their .target says the target): not library kernels, --target or --dtype")
		}
		return checkFiles(e, files)
	}
	specs := kernels.All()
	if len(pos) > 0 {
		specs = nil
		for _, n := range pos {
			s, err := kernels.Lookup(n)
			if err != nil {
				return &usageError{err.Error()}
			}
			specs = append(specs, s)
		}
	}
	var only ptx.Target
	if *target != "" {
		if only, err = ptx.ParseTarget(*target); err != nil {
			return &usageError{"--target: " + err.Error()}
		}
	}
	if *dtype != "" {
		var names []string
		for _, s := range specs {
			names = append(names, s.Name)
		}
		if valid := dtypeNames(names); !slices.Contains(strings.Split(valid, ", "), *dtype) {
			return usagef("--dtype %q: no kernel checked has it (valid: %s)", *dtype, valid)
		}
	}
	ptxas, err := toolchain.CUDATool("ptxas")
	if err != nil {
		return err
	}
	var jobs []*checkRow
	for _, s := range specs {
		for _, dt := range s.DTypes {
			if *dtype != "" && dt.String() != *dtype {
				continue
			}
			for _, t := range s.Targets {
				if only == "" || t == only {
					jobs = append(jobs, &checkRow{kernel: s.Name, dtype: dt.String(), target: t})
				}
			}
		}
	}
	if len(jobs) == 0 {
		return usagef("no kernel variant matches the filters")
	}
	dir, err := os.MkdirTemp("", "kgen-check")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		sem  = make(chan struct{}, runtime.NumCPU())
	)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			j.err = assembleVariant(ptxas, dir, i, j)
			mu.Lock()
			done++
			fmt.Fprintf(e.stderr, "\rkgen check: %d/%d variants assembled", done, len(jobs))
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Fprintln(e.stderr)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tDTYPE\tTARGET\tREGISTERS\tSHARED\tSPILLS\tSTATUS")
	failed := 0
	for _, j := range jobs {
		status := "ok"
		if j.err != nil {
			status = "FAIL: " + firstLine(j.err.Error())
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d B\t%d B\t%s\n", j.kernel, j.dtype, j.target, j.regs, j.smem, j.spillSt+j.spillLd, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%d variants, %d failed\n", len(jobs), failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d variants failed", failed, len(jobs))
	}
	return nil
}

func assembleVariant(ptxas, dir string, i int, j *checkRow) error {
	s, err := kernels.Lookup(j.kernel)
	if err != nil {
		return err
	}
	dt, err := s.ParseDType(j.dtype)
	if err != nil {
		return err
	}
	m, err := s.Build(kernels.Config{Target: j.target, DType: dt})
	if err != nil {
		return err
	}
	f := filepath.Join(dir, fmt.Sprintf("%d.ptx", i))
	if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
		return err
	}
	args := []string{"-arch=" + string(j.target), "-v", f, "-o", f + ".cubin"}
	for _, fn := range m.Funcs {
		if fn.Extern {
			args = append(args, "-c")
			break
		}
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(context.Background(), ptxas, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ptxas: %v: %s", err, strings.TrimSpace(out.String()))
	}
	entry := ""
	for _, fn := range m.Funcs {
		if fn.Entry {
			entry = fn.Name
		}
	}
	return j.parseInfo(out.String(), entry)
}

// parseInfo reads the entry's registers, shared memory and spills from ptxas -v's report
// (the section that starts at "Compiling entry function 'entry'"); a report it cannot read
// is an error, never a silent 0.
func (j *checkRow) parseInfo(txt, entry string) error {
	start := strings.Index(txt, "Compiling entry function '"+entry+"'")
	if entry == "" || start < 0 {
		return fmt.Errorf("ptxas -v reported no entry function %q: %s", entry, firstLine(strings.TrimSpace(txt)))
	}
	sec := txt[start+1:]
	if end := strings.Index(sec, "Compiling entry function '"); end >= 0 {
		sec = sec[:end]
	}
	regs, spills := regsRE.FindStringSubmatch(sec), spillRE.FindStringSubmatch(sec)
	if regs == nil || spills == nil {
		return fmt.Errorf("ptxas -v: no register or spill counts for %s in %q", entry, strings.TrimSpace(sec))
	}
	j.regs, _ = strconv.Atoi(regs[1])
	j.spillSt, _ = strconv.Atoi(spills[1])
	j.spillLd, _ = strconv.Atoi(spills[2])
	j.smem = 0
	if m := smemRE.FindStringSubmatch(sec); m != nil {
		j.smem, _ = strconv.Atoi(m[1])
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
