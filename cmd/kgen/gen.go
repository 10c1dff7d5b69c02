package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/gen"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	register(&command{
		name:    "gen",
		summary: "generate a Go package embedding library kernels' PTX with typed launchers",
		usage:   "KERNEL... --pkg NAME [-o DIR] [--targets sm_80,sm_90] [--dtype T]",
		run:     runGen,
	})
}

func runGen(e *env, args []string) error {
	c := commands["gen"]
	fs := flags(e, c)
	pkg := fs.String("pkg", "", "Go package name of the output (required)")
	dir := fs.String("o", ".", "output directory")
	targets := fs.String("targets", "sm_80,sm_90", "comma-separated targets to build for")
	dtype := fs.String("dtype", "", "only this element type (default: every dtype of each kernel)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *pkg == "" {
		return usagef("--pkg is required")
	}
	if err := gen.CheckPackageName(*pkg); err != nil {
		return usagef("--pkg %q: %v", *pkg, strings.TrimPrefix(err.Error(), "gen: "))
	}
	if *pkg == "main" && !holdsCommand(*dir) {
		return usagef("--pkg main: %s holds no Go file of package main: the launchers alone are no command (package main needs func main), so give -o a command's directory or --pkg an importable name", *dir)
	}
	if len(pos) == 0 {
		return usagef("name at least one KERNEL (valid: %s)", strings.Join(kernels.Names(), ", "))
	}
	for i, name := range pos {
		if slices.Contains(pos[:i], name) {
			return usagef("kernel %s named twice", name)
		}
	}
	p := gen.Package{Name: *pkg, Dir: *dir, Generator: "kgen gen " + quoteArgs(args)}
	for _, t := range strings.Split(*targets, ",") {
		tt, err := ptx.ParseTarget(strings.TrimSpace(t))
		if err != nil {
			return &usageError{"--targets: " + err.Error()}
		}
		if slices.Contains(p.Targets, tt) {
			return usagef("--targets: %s listed twice", tt)
		}
		p.Targets = append(p.Targets, tt)
	}
	for _, name := range pos {
		s, err := kernels.Lookup(name)
		if err != nil {
			return &usageError{err.Error()}
		}
		for _, t := range p.Targets {
			if !slices.Contains(s.Targets, t) {
				return usagef("--targets: kernel %s does not support %s (its targets: %s)", s.Name, t, joinTargets(s.Targets))
			}
		}
		if *dtype != "" && !slices.ContainsFunc(s.DTypes, func(t dsl.Type) bool { return t.String() == *dtype }) {
			return usagef("--dtype %q: kernel %s has no such dtype (its dtypes: %s)", *dtype, s.Name, dtypeNames([]string{name}))
		}
		for _, dt := range s.DTypes {
			if *dtype != "" && dt.String() != *dtype {
				continue
			}
			dt := dt
			p.Kernels = append(p.Kernels, gen.Kernel{Name: s.VariantName(dt), Doc: s.Doc + ".",
				Build: func(k *dsl.Kernel) { s.New(k, dt) }})
		}
	}
	if len(p.Kernels) == 0 {
		return usagef("--dtype %q: no kernel named has it (their dtypes: %s)", *dtype, dtypeNames(pos))
	}
	if err := gen.Generate(p); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "kgen gen: wrote %d kernels x %d targets and %s_kgen.go to %s\n", len(p.Kernels), len(p.Targets), *pkg, *dir)
	return nil
}

// quoteArgs joins a command line for the generated file's one-line header: an argument
// holding anything but letters, digits and _ . / , = : @ + - is Go-quoted, so a line break
// or a "*/" in a folder's name stays text of the comment.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./,=:@+-", r)))
		}) {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

// holdsCommand reports whether dir holds a Go file (other than a generated *_kgen.go) of
// package main: a command the launchers of --pkg main can join. Only regular files (or
// links to them) count, and only their first maxClauseBytes are read: a FIFO named a.go
// blocked kgen gen for ever, and a link to /dev/zero was read without end.
func holdsCommand(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_kgen.go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		if packageClause(f) == "main" {
			return true
		}
	}
	return false
}

// maxClauseBytes bounds how much of a Go file packageClause reads: the package clause
// follows at most the file's leading comments.
const maxClauseBytes = 1 << 20

// packageClause returns the package name Go file f declares, or "" when f is not a regular
// file or declares none within its first maxClauseBytes.
func packageClause(f string) string {
	if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	h, err := os.Open(f)
	if err != nil {
		return ""
	}
	defer h.Close()
	src, err := io.ReadAll(io.LimitReader(h, maxClauseBytes))
	if err != nil {
		return ""
	}
	af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly)
	if err != nil {
		return ""
	}
	return af.Name.Name
}
