// Package gen generates, ahead of time, the PTX of a Go package's kernels and a Go file that
// embeds it with typed launchers, in the shape of avo (a generator program run by
// go generate) and cilium/ebpf's bpf2go (an embedded artefact with typed wrappers).
//
// A package keeps its kernels in a generator program excluded from the build by a build tag
// of its own (not "ignore": go mod tidy skips ignore-tagged files, and would leave gen's
// dependencies out of go.sum, so that go generate fails in a module other than kgen's):
//
//	//go:build generate
//
//	package main
//
//	func main() {
//		err := gen.Generate(gen.Package{
//			Name:    "vadd",
//			Kernels: []gen.Kernel{{Name: "vector_add_f32", Build: func(k *dsl.Kernel) { ... }}},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// and a `//go:generate go run gen.go` line in one of its files. Generate writes one PTX file
// per kernel and target and one Go file, <package>_kgen.go, with `Load(*jit.Device)`,
// `Close()`, and per kernel an argument struct (<Kernel>Args: one field per parameter, pointers
// as jit.Ptr[T] of their element type, so a buffer of another element type does not compile)
// and a launcher whose Launch(cfg, args) runs it. The output is byte-identical on every run.
package gen

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/cachefile"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/internal/naming"
	"github.com/kgen-dev/kgen/ptx"
)

// Kernel is one kernel of a generated package.
type Kernel struct {
	// Name is the PTX entry name ("vector_add_f32"); the Go launcher is its CamelCase
	// ("VectorAddF32"). It is a PTX identifier without $ (the go command refuses the PTX
	// file's name) whose Go names clash with nothing else the generated file declares, and
	// that differs from the other kernels' names in more than case (the go command refuses
	// files whose names differ only in case).
	Name string
	// Doc is a sentence for the launcher's doc comment (optional): one line of printable text.
	Doc string
	// Build writes the kernel into k. It is called once per target (k.Target()) and must
	// declare the same parameters for each: one launcher serves them all.
	Build func(k *dsl.Kernel)
}

// Package describes a generated package.
type Package struct {
	Name      string       // the Go package name of the output
	Dir       string       // the output directory (default ".")
	Targets   []ptx.Target // the targets to build for (default sm_80 and sm_90)
	Kernels   []Kernel
	Generator string // how to regenerate, for the header (default "go generate"); one line of printable text
	// DevLib builds NVSHMEM's device library for the kernels that call NVSHMEM: the devlib
	// PTX defining funcs for target, and the NVSHMEM version it came from (MAJOR.MINOR.PATCH,
	// as NVSHMEM reports its own: "3.4.5"). Nil means
	// nvshmem/devlib with the NVSHMEM that toolchain finds ($NVSHMEM_HOME, the project's
	// .tools); it needs LLVM 19. Unused when no kernel calls NVSHMEM.
	DevLib func(target ptx.Target, funcs []string) (ptxText []byte, version string, err error)
}

const runtimePkg = "github.com/kgen-dev/kgen/gen/genrt"

// Generate builds every kernel for every target and writes the PTX files and the Go file.
// It returns the first problem: a kernel that fails to build (with the DSL's file:line
// errors), a bad name or an unknown target. Nothing is written unless everything builds,
// and unless whatever already sits at the output paths is a regular file (a FIFO, device,
// folder or symbolic link there is refused naming it; files are replaced by renaming, not
// written through).
func Generate(p Package) error {
	files, err := Files(p)
	if err != nil {
		return err
	}
	dir := p.Dir
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	for _, f := range files { // every path first: a FIFO at the last one leaves none written
		if _, err := existingFile(filepath.Join(dir, f.Name)); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := writeIfChanged(filepath.Join(dir, f.Name), f.Data); err != nil {
			return err
		}
	}
	return nil
}

// File is one generated file.
type File struct {
	Name string // base name
	Data []byte
}

// CheckPackageName reports why name cannot be the generated package's name: it must be a
// Go identifier that is not a keyword (letters, digits, _; not starting with a digit),
// start with a letter (the go tool ignores files whose names start with _, and the
// generated file is <name>_kgen.go), and not be init (a package named init cannot be
// imported: "init must be a func"). main is a name: the launchers then join a command,
// whose own files must declare func main (kgen gen checks that its output directory holds
// them).
func CheckPackageName(name string) error {
	const rule = "a package name is a Go identifier that starts with a letter (not _: the go tool ignores the file <name>_kgen.go), is not a keyword and is not init (which cannot be imported)"
	switch {
	case name == "":
		return fmt.Errorf("gen: empty package name: %s", rule)
	case !token.IsIdentifier(name):
		return fmt.Errorf("gen: package name %s is not a Go identifier or is a keyword: %s", excerpt.Quote(name), rule)
	case strings.HasPrefix(name, "_"):
		return fmt.Errorf("gen: package name %s starts with _: %s", excerpt.Quote(name), rule)
	case name == "init":
		return fmt.Errorf("gen: package name %s is reserved (a package named init cannot be imported: init must be a func): %s", excerpt.Quote(name), rule)
	}
	return nil
}

// Files returns the files Generate writes, without writing them.
func Files(p Package) ([]File, error) {
	if err := CheckPackageName(p.Name); err != nil {
		return nil, err
	}
	if len(p.Kernels) == 0 {
		return nil, errors.New("gen: no kernels")
	}
	targets := p.Targets
	if len(targets) == 0 {
		targets = []ptx.Target{ptx.SM80, ptx.SM90}
	}
	seenTarget := map[ptx.Target]bool{}
	for _, t := range targets {
		if !t.Valid() {
			_, err := ptx.ParseTarget(string(t))
			return nil, fmt.Errorf("gen: %v", err)
		}
		if seenTarget[t] {
			return nil, fmt.Errorf("gen: target %s listed twice", t)
		}
		seenTarget[t] = true
	}
	gen := p.Generator
	if gen == "" {
		gen = "go generate"
	}
	if i, what := notOneLine(gen); i >= 0 {
		// A line break ended the one-line "// Code generated ... DO NOT EDIT." header (the go
		// tools then no longer see a generated file), and the /* */ block it became was ended
		// by a "*/" in the text: what followed was code of the generated package.
		return nil, fmt.Errorf("gen: Package.Generator %s holds %s at byte %d: the header is one line of printable text (quote the command's arguments)", excerpt.Quote(gen), what, i)
	}
	seen := map[string]bool{}
	decls := map[string]string{"Kernels": "", "Load": "", "Close": "", "NVSHMEMVersion": "", "nvshmemDevLib": ""}
	for _, t := range targets {
		decls[targetVar("devlib", t)] = ""
	}
	var out []File
	var kernels []built
	for _, kd := range p.Kernels {
		if !ptx.ValidIdent(kd.Name) || kd.Build == nil {
			return nil, fmt.Errorf("gen: kernel %s needs a PTX identifier as its name and a Build function", excerpt.Quote(kd.Name))
		}
		if i, what := notOneLine(kd.Doc); i >= 0 {
			// jennifer turned a doc holding a line break into a /* */ block, which a "*/" in
			// the text ended: what followed was code of the generated package.
			return nil, fmt.Errorf("gen: kernel %s: Kernel.Doc %s holds %s at byte %d: the doc is one line of printable text", excerpt.Quote(kd.Name), excerpt.Quote(kd.Doc), what, i)
		}
		if strings.Contains(kd.Name, "$") {
			return nil, fmt.Errorf("gen: kernel %s: a generated package embeds %s.<target>.ptx, and the go command refuses a file name with $ (\"invalid input file name\"): rename the kernel", excerpt.Quote(kd.Name), excerpt.Cut(kd.Name, excerpt.Max))
		}
		goName := camel(kd.Name)
		if !token.IsIdentifier(goName) || !token.IsExported(goName) {
			return nil, fmt.Errorf("gen: kernel %s: its Go name %s is not an exported Go identifier (the name must have a letter after its leading _)", excerpt.Quote(kd.Name), excerpt.Quote(goName))
		}
		if seen[goName] {
			return nil, fmt.Errorf("gen: two kernels are named %s", goName)
		}
		seen[goName] = true
		if err := declare(decls, kd.Name, goName, targets); err != nil {
			return nil, err
		}
		b := built{Kernel: kd, goName: goName}
		for _, t := range targets {
			k := dsl.New(kd.Name, dsl.WithTarget(t))
			kd.Build(k)
			m, err := k.Build()
			if err != nil {
				return nil, fmt.Errorf("gen: kernel %s for %s: %w", kd.Name, t, err)
			}
			// One Args struct and one params literal serve every target: a Build declaring
			// other parameters for another target (an f16 pointer for sm_80, an f32 one for
			// sm_90) got the last target's, and jit checks only the names, so the other
			// target's kernel read the launch's buffers as the wrong type.
			if ps := k.Params(); len(b.files) > 0 && !slices.Equal(ps, b.params) {
				return nil, fmt.Errorf("gen: kernel %s declares other parameters for %s (%s) than for %s (%s): one launcher serves every target, so its Build must declare the same for each", kd.Name, t, paramList(ps), b.files[0].target, paramList(b.params))
			}
			b.params = k.Params()
			b.calls = nvshmemCalls(m)
			file := fmt.Sprintf("%s.%s.ptx", kd.Name, t)
			out = append(out, File{Name: file, Data: []byte(m.String())})
			b.files = append(b.files, targetFile{t, file})
		}
		kernels = append(kernels, b)
	}
	lib, libFiles, err := nvshmemLib(p, targets, kernels)
	if err != nil {
		return nil, err
	}
	out = append(out, libFiles...)
	src, err := goFile(p.Name, gen, kernels, lib)
	if err != nil {
		return nil, err
	}
	out = append(out, File{Name: p.Name + "_kgen.go", Data: src})
	files := map[string]string{} // by the lower-case name
	for _, f := range out {
		if other, ok := files[strings.ToLower(f.Name)]; ok {
			if other == f.Name {
				return nil, fmt.Errorf("gen: two generated files are named %s (a kernel's name clashes with the package's or the device library's files)", f.Name)
			}
			// The go command refuses the package ("case-insensitive file name collision").
			return nil, fmt.Errorf("gen: the generated files %s and %s differ only in case, which the go command refuses (and a case-insensitive file system cannot hold): rename a kernel", other, f.Name)
		}
		files[strings.ToLower(f.Name)] = f.Name
	}
	return out, nil
}

// notOneLine returns the byte offset of the first thing in s that cannot stand in a one-line
// Go comment, and what it is: a line break or another character that is not printable, or
// a byte that is not UTF-8 (the Go file then did not format: "illegal UTF-8 encoding",
// quoting the whole generated source). It returns -1 when s is one line of printable text.
func notOneLine(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return i, fmt.Sprintf("the byte %#02x (not UTF-8)", s[i])
		case !unicode.IsPrint(r) && r != ' ':
			return i, fmt.Sprintf("%U", r)
		}
	}
	return -1, ""
}

// paramList writes a kernel's parameters for an error: "x *f16, n u32" (at most 8 of them).
func paramList(ps []dsl.ParamInfo) string {
	var out []string
	for i, p := range ps {
		if i == 8 {
			out = append(out, fmt.Sprintf("and %d more", len(ps)-i))
			break
		}
		t := p.Type.String()
		switch {
		case p.Pointer:
			t = "*" + t
		case p.TensorMap:
			t = "tensor map of " + t
		}
		out = append(out, p.Name+" "+t)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// declare records the package-level Go names the kernel named name (Go name goName)
// declares in the generated file, and says which earlier declaration one clashes with.
func declare(decls map[string]string, name, goName string, targets []ptx.Target) error {
	ids := []string{goName, goName + "Args", "ptx" + goName, "params" + goName}
	for _, t := range targets {
		ids = append(ids, targetVar("ptx"+goName, t))
	}
	for _, id := range ids {
		if by, ok := decls[id]; ok {
			if by == "" {
				return fmt.Errorf("gen: kernel %s would declare %s, which the generated file declares for itself: rename the kernel", excerpt.Quote(name), id)
			}
			return fmt.Errorf("gen: kernels %s and %s would both declare %s in the generated file: rename one", excerpt.Quote(by), excerpt.Quote(name), id)
		}
	}
	for _, id := range ids {
		decls[id] = name
	}
	return nil
}

// targetVar is the name of the variable embedding prefix's PTX for t ("ptxVaddSM90").
func targetVar(prefix string, t ptx.Target) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(string(t), "_", ""))
}

type targetFile struct {
	target ptx.Target
	file   string
}

type built struct {
	Kernel
	goName string
	params []dsl.ParamInfo
	files  []targetFile
	calls  []string // the NVSHMEM functions it calls
}

// goFile renders the Go file with jennifer.
func goFile(pkg, generator string, kernels []built, lib *builtLib) ([]byte, error) {
	f := jen.NewFile(pkg)
	f.HeaderComment("// Code generated by kgen (" + generator + "). DO NOT EDIT.") // "//": one line, as written
	f.Anon("embed")
	f.ImportName(jitPkg, "jit")
	f.ImportName(fpPkg, "fp")
	f.ImportName("github.com/kgen-dev/kgen/ptx", "ptx")
	f.ImportName(runtimePkg, "genrt")

	for _, k := range kernels {
		dict := jen.Dict{}
		for _, tf := range k.files {
			v := targetVar("ptx"+k.goName, tf.target)
			f.Comment("//go:embed " + tf.file)
			f.Var().Id(v).String()
			dict[jen.Qual("github.com/kgen-dev/kgen/ptx", "Target").Call(jen.Lit(string(tf.target)))] = jen.Id(v)
		}
		f.Line()
		f.Commentf("ptx%s maps each target to %s's PTX.", k.goName, k.Name)
		f.Var().Id("ptx" + k.goName).Op("=").Map(jen.Qual("github.com/kgen-dev/kgen/ptx", "Target")).String().Values(dict)
		f.Commentf("params%s is what %s's builder declared of its parameters.", k.goName, k.Name)
		f.Var().Id("params" + k.goName).Op("=").Add(paramInfo(k.params))
	}

	if lib != nil {
		lib.render(f)
	}
	// Kernels and Load.
	fields := []jen.Code{jen.Id("mods").Index().Op("*").Qual("github.com/kgen-dev/kgen/jit", "Module")}
	for _, k := range kernels {
		fields = append(fields, jen.Comment(fmt.Sprintf("%s launches %s.", k.goName, k.Name)), jen.Id(k.goName).Id(k.goName))
	}
	f.Comment("Kernels are this package's kernels loaded on one device.")
	f.Type().Id("Kernels").Struct(fields...)

	load := []jen.Code{jen.Id("k").Op(":=").Op("&").Id("Kernels").Values()}
	for _, k := range kernels {
		load = append(load, jen.Block(
			loadCall(k),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				jen.Id("k").Dot("Close").Call(),
				jen.Return(jen.Nil(), jen.Err()),
			),
			jen.Id("k").Dot("mods").Op("=").Append(jen.Id("k").Dot("mods"), jen.Id("m")),
			jen.Id("k").Dot(k.goName).Op("=").Id(k.goName).Values(jen.Dict{jen.Id("fn"): jen.Id("fn")}),
		))
	}
	load = append(load, jen.Return(jen.Id("k"), jen.Nil()))
	f.Comment("Load loads every kernel on d, each from the PTX of the newest target d supports.")
	f.Func().Id("Load").Params(jen.Id("d").Op("*").Qual("github.com/kgen-dev/kgen/jit", "Device")).Params(jen.Op("*").Id("Kernels"), jen.Error()).Block(load...)

	f.Comment("Close unloads the kernels' modules.")
	f.Func().Params(jen.Id("k").Op("*").Id("Kernels")).Id("Close").Params().Error().Block(
		jen.Var().Id("first").Error(),
		jen.For(jen.List(jen.Id("_"), jen.Id("m")).Op(":=").Range().Id("k").Dot("mods")).Block(
			jen.If(jen.Err().Op(":=").Id("m").Dot("Close").Call(), jen.Err().Op("!=").Nil().Op("&&").Id("first").Op("==").Nil()).Block(
				jen.Id("first").Op("=").Err(),
			),
		),
		jen.Id("k").Dot("mods").Op("=").Nil(),
		jen.Return(jen.Id("first")),
	)

	for _, k := range kernels {
		if err := launcher(f, k); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("gen: rendering the Go file: %w", err)
	}
	return buf.Bytes(), nil
}

const (
	jitPkg = "github.com/kgen-dev/kgen/jit"
	fpPkg  = "github.com/kgen-dev/kgen/fp"
	ptxPkg = "github.com/kgen-dev/kgen/ptx"
)

// launcher renders a kernel's argument struct, its launcher type and its Launch method.
func launcher(f *jen.File, k built) error {
	var fields []jen.Code
	used := map[string]bool{}
	for _, p := range k.params {
		name := fieldName(p.Name, used)
		used[name] = true
		gt, err := GoType(p.Type)
		if err != nil {
			return fmt.Errorf("gen: kernel %s parameter %s: %w", k.Name, p.Name, err)
		}
		field := jen.Id(name)
		what := p.Type.String()
		switch {
		case p.TensorMap:
			field.Qual(jitPkg, "TensorMap")
			what = "tensor map over " + what
		case p.Pointer:
			field.Qual(jitPkg, "Ptr").Types(gt)
			what = "pointer to " + what
		default:
			field.Add(gt)
		}
		if naming.Snake(name) != p.Name {
			field.Tag(map[string]string{naming.TagKey: "name=" + p.Name})
		}
		fields = append(fields, field.Comment(fmt.Sprintf("%s (%s)", p.Name, what)))
	}
	doc := fmt.Sprintf("%s is the kernel %s.", k.goName, k.Name)
	if k.Doc != "" {
		doc += " " + k.Doc
	}
	args := k.goName + "Args"
	f.Commentf("%s are %s's parameters, in order; pointer fields take a *jit.Buffer or jit.TypedPtr of their element type.", args, k.Name)
	f.Type().Id(args).Struct(fields...)
	f.Comment(doc)
	f.Type().Id(k.goName).Struct(jen.Id("fn").Op("*").Qual(jitPkg, "Function"))
	f.Commentf("Launch runs %s with cfg's grid, block, shared memory and stream; it does not wait.", k.Name)
	f.Func().Params(jen.Id("k").Id(k.goName)).Id("Launch").Params(jen.Id("cfg").Qual(jitPkg, "LaunchConfig"), jen.Id("args").Id(args)).Error().Block(
		jen.Return(jen.Id("k").Dot("fn").Dot("LaunchArgs").Call(jen.Id("cfg"), jen.Id("args"))),
	)
	return nil
}

// paramInfo renders a kernel's declared parameters as a []jit.ParamInfo literal.
func paramInfo(params []dsl.ParamInfo) jen.Code {
	var items []jen.Code
	for _, p := range params {
		fields := []jen.Code{jen.Id("Name").Op(":").Lit(p.Name), jen.Id("Type").Op(":").Qual(ptxPkg, typeConst(p.Type))}
		if p.Pointer {
			fields = append(fields, jen.Id("Pointer").Op(":").True())
		}
		if p.TensorMap {
			fields = append(fields, jen.Id("TensorMap").Op(":").True())
		}
		items = append(items, jen.Line().Values(fields...))
	}
	return jen.Index().Qual(jitPkg, "ParamInfo").Values(append(items, jen.Line())...)
}

// typeConst is the name of ptx's constant for t.
func typeConst(t dsl.Type) string {
	s := t.String()
	if s == "" {
		return "NoType"
	}
	return strings.ToUpper(s)
}

// GoType is the Go type (as jennifer code) of a parameter's values of DSL type t, the element
// type for pointers: float32, fp.F16, uint32... Generators of host code share it.
func GoType(t dsl.Type) (jen.Code, error) {
	switch t {
	case dsl.I8:
		return jen.Int8(), nil
	case dsl.U8:
		return jen.Uint8(), nil
	case dsl.I16:
		return jen.Int16(), nil
	case dsl.U16:
		return jen.Uint16(), nil
	case dsl.I32:
		return jen.Int32(), nil
	case dsl.U32:
		return jen.Uint32(), nil
	case dsl.I64:
		return jen.Int64(), nil
	case dsl.U64:
		return jen.Uint64(), nil
	case dsl.F32:
		return jen.Float32(), nil
	case dsl.F64:
		return jen.Float64(), nil
	case dsl.F16:
		return jen.Qual(fpPkg, "F16"), nil
	case dsl.BF16:
		return jen.Qual(fpPkg, "BF16"), nil
	case dsl.E4M3:
		return jen.Qual(fpPkg, "E4M3"), nil
	case dsl.E5M2:
		return jen.Qual(fpPkg, "E5M2"), nil
	}
	return nil, fmt.Errorf("no Go type for %s values", t)
}

// camel turns "vector_add_f32" into "VectorAddF32".
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, c := range s {
		switch {
		case c == '_' || c == '$':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(c)))
			up = false
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// fieldName makes a parameter name a unique exported Go field name: "in_mc" -> "InMc".
func fieldName(s string, used map[string]bool) string {
	s = camel(strings.ReplaceAll(s, "$", "_"))
	if !token.IsIdentifier(s) || !token.IsExported(s) {
		s = "P" + s
	}
	for used[s] {
		s += "_"
	}
	return s
}

// existingFile returns path's file information, nil when nothing is there. Anything there
// must be a regular file: a FIFO, device, folder or symbolic link is an error naming it
// (reading a FIFO to compare blocked for ever, a link to /dev/zero read without end, and a
// link was written through, overwriting whatever it pointed at).
func existingFile(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("gen: %w", err)
	case fi.Mode().IsRegular():
		return fi, nil
	}
	what := "a " + fi.Mode().Type().String()
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case t&fs.ModeDir != 0:
		what = "a folder"
	case t&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case t&fs.ModeDevice != 0:
		what = "a device"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	}
	return nil, fmt.Errorf("gen: %s is %s, not a regular file: remove it to let kgen write the generated file there", path, what)
}

// writeIfChanged writes data to path unless path already holds exactly data; an existing
// path must be a regular file (existingFile). The new contents go to a temporary file in
// the same folder, renamed over path, so a failed write leaves the old file whole.
func writeIfChanged(path string, data []byte) error {
	fi, err := existingFile(path)
	if err != nil {
		return err
	}
	if fi != nil && fi.Size() == int64(len(data)) {
		if old, err := readAtMost(path, len(data)); err == nil && bytes.Equal(old, data) {
			return nil
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("gen: writing %s: %w", path, err)
	}
	return nil
}

// readAtMost reads path's first n+1 bytes at most, when it is a regular file (opened without
// blocking or following a link, and checked again once open: a FIFO swapped in after
// existingFile's look cannot block the read).
func readAtMost(path string, n int) ([]byte, error) {
	f, _, err := cachefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(n)+1))
}
