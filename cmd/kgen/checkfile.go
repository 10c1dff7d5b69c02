package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/internal/toolchain"
	"github.com/kgen-dev/kgen/ptx"
)

// stdin is what `kgen check -` reads (a variable, so tests can give their own).
var stdin io.Reader = os.Stdin

// maxCheckFile bounds a PTX file kgen check reads (the largest library module is a few MB).
const maxCheckFile = 256 << 20

// isPTXFile reports whether a check argument names a PTX file (FILE.ptx, a path, or - for
// standard input) rather than a library kernel.
func isPTXFile(arg string) bool {
	return arg == "-" || strings.HasSuffix(arg, ".ptx") || strings.ContainsRune(arg, os.PathSeparator) || strings.ContainsRune(arg, '/')
}

// ptxFile is one user module to check: its name in messages and its text.
type ptxFile struct {
	name string // the path as given, or <stdin>
	path string // kgen's copy of text, which ptxas reads
	text string
}

// readPTXFile reads arg (- for standard input), at most maxCheckFile bytes, and writes a
// copy into dir for ptxas: what ptxas assembles is what kgen's rules checked, even when
// arg is replaced while kgen check runs. The file is opened without blocking and then
// checked to be regular, so a FIFO or device put there after a look would not block or
// be read without end.
func readPTXFile(arg, dir string, i int) (*ptxFile, error) {
	var r io.Reader
	f := &ptxFile{name: arg, path: filepath.Join(dir, fmt.Sprintf("file-%d.ptx", i))}
	if arg == "-" {
		r, f.name = stdin, "<stdin>"
	} else {
		h, err := os.OpenFile(arg, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		fi, err := h.Stat()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file (%s)", arg, cachefile.KindOf(fi.Mode()))
		}
		r = h
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCheckFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	if len(b) > maxCheckFile {
		return nil, fmt.Errorf("%s: more than %d MiB of PTX", f.name, maxCheckFile>>20)
	}
	f.text = string(b)
	if err := os.WriteFile(f.path, b, 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

var parseLineRE = regexp.MustCompile(`^ptx: parse: line (\d+): `)

// checkFiles runs kgen's PTX rules (ptx.Parse, then ptx.Verify) and ptxas over user modules
// and prints what `kgen check` prints for library kernels, one row per entry function.
// Errors name the file and the line.
func checkFiles(e *env, args []string) error {
	dir, err := os.MkdirTemp("", "kgen-check")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var files []*ptxFile
	if n := slices.Index(args, "-"); n >= 0 && slices.Contains(args[n+1:], "-") {
		return usagef("- given twice: standard input can be read once (the second would check an empty module)")
	}
	for i, a := range args {
		f, err := readPTXFile(a, dir, i)
		if err != nil {
			return &usageError{err.Error()}
		}
		files = append(files, f)
	}
	ptxas, ptxasErr := toolchain.CUDATool("ptxas")
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tKERNEL\tTARGET\tREGISTERS\tSHARED\tSPILLS\tSTATUS")
	var problems []string
	rows, failed := 0, 0
	for i, f := range files {
		m, err := ptx.Parse(f.text)
		if err != nil {
			msg := err.Error()
			if sm := parseLineRE.FindStringSubmatch(msg); sm != nil {
				msg = f.name + ":" + sm[1] + ": " + msg[len(sm[0]):]
			} else {
				msg = f.name + ": " + strings.TrimPrefix(msg, "ptx: parse: ")
			}
			problems = append(problems, msg)
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\tFAIL: %s\n", f.name, firstLine(msg))
			rows++
			failed++
			continue
		}
		if err := ptx.Verify(m); err != nil {
			for _, ve := range verifyErrors(err) {
				problems = append(problems, f.locate(ve))
			}
			fmt.Fprintf(tw, "%s\t-\t%s\t-\t-\t-\tFAIL: %d problem(s) by kgen's PTX rules\n", f.name, m.Target, len(verifyErrors(err)))
			rows++
			failed++
			continue
		}
		if ptxasErr != nil {
			return ptxasErr
		}
		res, err := assembleFile(ptxas, dir, i, f, m)
		if err != nil {
			problems = append(problems, err.Error())
			fmt.Fprintf(tw, "%s\t-\t%s\t-\t-\t-\tFAIL: %s\n", f.name, m.Target, firstLine(err.Error()))
			rows++
			failed++
			continue
		}
		for _, r := range res {
			status := "ok"
			if r.err != nil {
				status = "FAIL: " + firstLine(r.err.Error())
				problems = append(problems, f.name+": "+r.err.Error())
				failed++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d B\t%d B\t%s\n", f.name, r.kernel, r.target, r.regs, r.smem, r.spillSt+r.spillLd, status)
			rows++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%d file(s), %d failed\n", len(files), failed)
	for _, p := range problems {
		fmt.Fprintln(e.stderr, p)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d rows failed (the problems are listed above)", failed, rows)
	}
	return nil
}

// verifyErrors splits Verify's joined error into its parts.
func verifyErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// locate turns a Verify error into "FILE:LINE: message": the line of the instruction it
// names (matched by its printed text within its function), else of its function's header,
// else the file alone.
func (f *ptxFile) locate(err error) string {
	var ve *ptx.Error
	msg := strings.TrimPrefix(err.Error(), "ptx: ")
	if !errors.As(err, &ve) {
		return f.name + ": " + msg
	}
	lines := strings.Split(f.text, "\n")
	start, end := 0, len(lines)
	if ve.Func != "" {
		start = -1
		for i, l := range lines {
			if (strings.Contains(l, ".entry") || strings.Contains(l, ".func")) && containsWord(l, ve.Func) {
				start = i
				break
			}
		}
		if start < 0 {
			return f.name + ": " + msg
		}
		for i := start + 1; i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); strings.Contains(t, ".entry") || strings.Contains(t, ".func") {
				end = i
				break
			}
		}
	}
	line := start
	if ve.Instr != "" {
		want := normalizeInstr(ve.Instr)
		for i := start; i < end; i++ {
			if normalizeInstr(lines[i]) == want {
				line = i
				break
			}
		}
	}
	return f.name + ":" + strconv.Itoa(line+1) + ": " + msg
}

// containsWord reports whether name appears in l as a whole identifier.
func containsWord(l, name string) bool {
	for i := 0; ; {
		j := strings.Index(l[i:], name)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isIdentByte(l[j-1])
		after := j+len(name) == len(l) || !isIdentByte(l[j+len(name)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// normalizeInstr compares instructions as text: no ';', single spaces, no space after ','.
func normalizeInstr(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ";")
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, ", ", ",")
}

// assembleFile runs ptxas -v over a user's module for its own target and reads each entry's
// registers, shared memory and spills. ptxas's messages name the file as given.
func assembleFile(ptxas, dir string, i int, f *ptxFile, m *ptx.Module) ([]*checkRow, error) {
	cubin := filepath.Join(dir, fmt.Sprintf("%d.cubin", i))
	args := []string{"-arch=" + string(m.Target), "-v", f.path, "-o", cubin}
	for _, fn := range m.Funcs {
		if fn.Extern {
			args = append(args, "-c")
			break
		}
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(context.Background(), ptxas, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	txt := func() string { return strings.ReplaceAll(strings.TrimSpace(out.String()), f.path, f.name) }
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ptxas: %v: %s", err, txt())
	}
	var rows []*checkRow
	for _, fn := range m.Funcs {
		if !fn.Entry {
			continue
		}
		r := &checkRow{kernel: fn.Name, target: m.Target}
		r.err = r.parseInfo(out.String(), fn.Name)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		rows = append(rows, &checkRow{kernel: "(no entry)", target: m.Target})
	}
	return rows, nil
}
