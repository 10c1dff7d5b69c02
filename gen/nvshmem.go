package gen

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/ptx"
)

// Kernels that call NVSHMEM: the generated package carries the device library (devlib PTX
// per target, one file each) built from the functions its kernels call, and the NVSHMEM
// version it was built from; genrt.LoadNVSHMEM refuses another version at load.

// builtLib is a package's NVSHMEM device library.
type builtLib struct {
	version string
	funcs   []string
	files   []targetFile
}

// nvshmemCalls lists the NVSHMEM functions m declares (extern .func nvshmem*), sorted.
func nvshmemCalls(m *ptx.Module) []string {
	var out []string
	for _, f := range m.Funcs {
		if f.Extern && strings.HasPrefix(f.Name, "nvshmem") {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

// nvshmemLib builds the device library of the package's NVSHMEM calls for every target
// (nil when no kernel calls NVSHMEM).
func nvshmemLib(p Package, targets []ptx.Target, kernels []built) (*builtLib, []File, error) {
	set := map[string]bool{}
	for _, k := range kernels {
		for _, c := range k.calls {
			set[c] = true
		}
	}
	if len(set) == 0 {
		return nil, nil, nil
	}
	lib := &builtLib{}
	for c := range set {
		lib.funcs = append(lib.funcs, c)
	}
	sort.Strings(lib.funcs)
	build := p.DevLib
	if build == nil {
		build = defaultDevLib()
	}
	var files []File
	for _, t := range targets {
		text, version, err := build(t, lib.funcs)
		if err != nil {
			return nil, nil, fmt.Errorf("gen: NVSHMEM device library for %s (%s): %w", t, strings.Join(lib.funcs, ", "), err)
		}
		if version == "" {
			return nil, nil, fmt.Errorf("gen: NVSHMEM device library for %s: no version", t)
		}
		// genrt.LoadNVSHMEM compares it with the version NVSHMEM reports, MAJOR.MINOR.PATCH:
		// "v3.4.5", "3.4.5\n" or garbage made a package that loaded against no NVSHMEM.
		if v, err := devlib.ParseVersion(version); err != nil || version != fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) {
			return nil, nil, fmt.Errorf("gen: NVSHMEM device library for %s: version %s is not MAJOR.MINOR.PATCH as NVSHMEM reports its own (like 3.4.5): the package would load against no NVSHMEM", t, excerpt.Quote(version))
		}
		if lib.version != "" && version != lib.version {
			return nil, nil, fmt.Errorf("gen: NVSHMEM device libraries of two versions, %s and %s", lib.version, version)
		}
		lib.version = version
		name := fmt.Sprintf("nvshmem_devlib.%s.ptx", t)
		files = append(files, File{Name: name, Data: text})
		lib.files = append(lib.files, targetFile{t, name})
	}
	return lib, files, nil
}

// defaultDevLib builds with nvshmem/devlib from the NVSHMEM toolchain finds.
func defaultDevLib() func(ptx.Target, []string) ([]byte, string, error) {
	var l *devlib.Library
	return func(t ptx.Target, funcs []string) ([]byte, string, error) {
		if l == nil {
			var err error
			if l, err = devlib.Open(""); err != nil {
				return nil, "", err
			}
		}
		r, err := l.Build(context.Background(), t, funcs)
		if err != nil {
			return nil, "", err
		}
		return r.PTX, r.Version, nil
	}
}

// render writes the embedded device library, NVSHMEMVersion and nvshmemDevLib.
func (lib *builtLib) render(f *jen.File) {
	dict := jen.Dict{}
	for _, tf := range lib.files {
		v := targetVar("devlib", tf.target)
		f.Comment("//go:embed " + tf.file)
		f.Var().Id(v).String()
		dict[jen.Qual(ptxPkg, "Target").Call(jen.Lit(string(tf.target)))] = jen.Id(v)
	}
	f.Line()
	f.Comment("NVSHMEMVersion is the NVSHMEM version this package's device library was built from;")
	f.Comment("loading a kernel that calls NVSHMEM against another version fails.")
	f.Const().Id("NVSHMEMVersion").Op("=").Lit(lib.version)
	funcs := make([]jen.Code, len(lib.funcs))
	for i, n := range lib.funcs {
		funcs[i] = jen.Lit(n)
	}
	f.Comment("nvshmemDevLib is what the kernels that call NVSHMEM link.")
	f.Var().Id("nvshmemDevLib").Op("=").Op("&").Qual(runtimePkg, "DevLib").Values(jen.Dict{
		jen.Id("Version"): jen.Id("NVSHMEMVersion"),
		jen.Id("Funcs"):   jen.Index().String().Values(funcs...),
		jen.Id("PTX"):     jen.Map(jen.Qual(ptxPkg, "Target")).String().Values(dict),
	})
}

// loadCall is the statement loading kernel k in the generated Load.
func loadCall(k built) jen.Code {
	lhs := jen.List(jen.Id("m"), jen.Id("fn"), jen.Err()).Op(":=")
	if len(k.calls) > 0 {
		return lhs.Qual(runtimePkg, "LoadNVSHMEM").Call(jen.Id("d"), jen.Lit(k.Name), jen.Id("ptx"+k.goName), jen.Id("params"+k.goName), jen.Id("nvshmemDevLib"))
	}
	return lhs.Qual(runtimePkg, "Load").Call(jen.Id("d"), jen.Lit(k.Name), jen.Id("ptx"+k.goName), jen.Id("params"+k.goName))
}
