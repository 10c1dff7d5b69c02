package main

import (
	"bytes"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	if f, other := otherPackage(*dir, *pkg); f != "" {
		return usagef("--pkg %s: %s is package %s, so the folder would not compile (found packages %s and %s); give --pkg %s, or -o another folder", *pkg, f, other, other, *pkg, other)
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
	for _, g := range goFiles(dir) {
		if g.pkg == "main" && !strings.HasSuffix(g.path, "_kgen.go") {
			return true
		}
	}
	return false
}

// otherPackage returns a Go file of dir that the go tool builds with the generated file of
// package pkg but that declares another package, and that package's name ("" when there is
// none): the folder would not compile ("found packages a and b"). The generated file of
// another --pkg (an earlier kgen gen into the same folder) counts; pkg's own does not.
func otherPackage(dir, pkg string) (file, name string) {
	for _, g := range goFiles(dir) {
		if g.pkg != pkg && filepath.Base(g.path) != pkg+"_kgen.go" {
			return g.path, g.pkg
		}
	}
	return "", ""
}

// goFile is a Go file of a folder that the go tool builds: its path and package.
type goFile struct{ path, pkg string }

// goFiles returns dir's Go files that the go tool builds for this machine (not tests, not
// excluded by their name or their //go:build line, as a `//go:build ignore` generator is)
// with the packages they declare. The folder is listed, not globbed: a folder named a[b] or
// a[ was a pattern that matched other folders' files or none, so a file of another package
// there went unseen.
func goFiles(dir string) []goFile {
	entries, _ := os.ReadDir(dir)
	var out []goFile
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".go") || strings.HasSuffix(de.Name(), "_test.go") {
			continue
		}
		f := filepath.Join(dir, de.Name())
		pkg, src := packageClause(f)
		if pkg == "" {
			continue
		}
		ctx := build.Default
		ctx.OpenFile = func(string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(src)), nil }
		if ok, err := ctx.MatchFile(filepath.Dir(f), filepath.Base(f)); err != nil || !ok {
			continue
		}
		out = append(out, goFile{f, pkg})
	}
	return out
}

// maxClauseBytes bounds how much of a Go file packageClause reads: the package clause
// follows at most the file's leading comments.
const maxClauseBytes = 1 << 20

// packageClause returns the package name Go file f declares and the bytes read (the first
// maxClauseBytes), or "" when f is not a regular file or declares none there. f is opened
// without blocking and then checked to be regular, so a FIFO put there after a look cannot
// block it.
func packageClause(f string) (string, []byte) {
	h, err := os.OpenFile(f, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", nil
	}
	defer h.Close()
	if fi, err := h.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", nil
	}
	src, err := io.ReadAll(io.LimitReader(h, maxClauseBytes))
	if err != nil {
		return "", nil
	}
	af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly)
	if err != nil {
		return "", nil
	}
	return af.Name.Name, src
}
