//go:build generate

// The generator of launch_kgen.go: `go generate` runs it. For each library kernel family it
// reads the kernel's Args struct (kernels.XxxArgs, what dsl.Params declares) and writes its
// host twin: the same fields in the same order, dt-typed pointers as jit.Ptr[T] (a type
// parameter T) or jit.AnyPtr (collectives, whose dtype is chosen at run time), fixed-type
// ones (a kgen type tag) as jit.Ptr of their Go type or jit.AnyPtr, scalars as T or their
// Go type. A field's parameter name, when not its snake_case, is carried as a kgen name tag.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"reflect"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/gen"
	"github.com/kgen-dev/kgen/internal/naming"
	"github.com/kgen-dev/kgen/kernels"
)

const jitPkg = "github.com/kgen-dev/kgen/jit"

// twin is one host struct to generate.
type twin struct {
	name    string // the host struct's name
	doc     string // its doc comment
	generic bool   // element type T as a type parameter; else jit.AnyPtr pointers
	args    reflect.Type
	params  func(k *dsl.Kernel, dt dsl.Type)
}

func of[A any](name string, generic bool, doc string) twin {
	return twin{name: name, doc: doc, generic: generic, args: reflect.TypeFor[A](),
		params: func(k *dsl.Kernel, dt dsl.Type) { dsl.Params[A](k, dt) }}
}

var twins = []twin{
	of[kernels.VectorAddArgs]("VectorAdd", true, "VectorAdd launches vector_add: C[i] = A[i] + B[i] for i < N."),
	of[kernels.AxpyArgs]("Axpy", true, "Axpy launches axpy: Y[i] = Alpha*X[i] + Y[i] for i < N."),
	of[kernels.CopyArgs]("Copy", true, "Copy launches tiled_copy: Dst[i] = Src[i] for i < N."),
	of[kernels.TransposeArgs]("Transpose", true, "Transpose launches transpose: Out (N x M) = In (M x N) transposed, row-major."),
	of[kernels.RowSumArgs]("RowSum", true, "RowSum launches row_sum: Out[r] = the f32 sum of row r of In (Rows rows of Cols columns)."),
	of[kernels.SoftmaxArgs]("Softmax", true, "Softmax launches softmax: row r of Out = softmax of row r of In (Rows rows of Cols\ncolumns)."),
	of[kernels.RowSumSplitArgs]("RowSumSplit", true, "RowSumSplit launches row_sum_split (long rows, Parts blocks a row, co-resident):\nOut[r] = the f32 sum of row r of In."),
	of[kernels.SoftmaxSplitArgs]("SoftmaxSplit", true, "SoftmaxSplit launches softmax_split (long rows, Parts blocks a row, co-resident): row r\nof Out = softmax of row r of In."),
	of[kernels.GemmEpilogueArgs]("GemmEpilogue", true, "GemmEpilogue is the parameters a non-zero kernels.Epilogue adds after a gemm's own (gemm and\ngemm_sm90, after TmD with TMAStore), T the output type: Bias, ScaleA, ScaleB (f32) and Residual\n(M x N of T); those the options do not use may be null."),
	of[kernels.P2POneShotArgs]("P2POneShot", false, "P2POneShot launches p2p_allreduce_1shot."),
	of[kernels.P2PTwoShotArgs]("P2PTwoShot", false, "P2PTwoShot launches p2p_allreduce_2shot."),
	of[kernels.P2PLamportArgs]("P2PLamport", false, "P2PLamport launches p2p_allreduce_lamport."),
	of[kernels.P2PReduceScatterArgs]("P2PReduceScatter", false, "P2PReduceScatter launches p2p_reducescatter."),
	of[kernels.P2PReduceScatterPullArgs]("P2PReduceScatterPull", false, "P2PReduceScatterPull launches p2p_reducescatter_pull."),
	of[kernels.P2PAllGatherArgs]("P2PAllGather", false, "P2PAllGather launches p2p_allgather."),
	of[kernels.P2PBroadcastArgs]("P2PBroadcast", false, "P2PBroadcast launches p2p_broadcast."),
	of[kernels.P2PBarrierArgs]("P2PBarrier", false, "P2PBarrier launches p2p_barrier."),
	of[kernels.MMOneShotArgs]("MMOneShot", false, "MMOneShot launches mm_allreduce_1shot (and _fp8)."),
	of[kernels.MMTwoShotArgs]("MMTwoShot", false, "MMTwoShot launches mm_allreduce_2shot (and _fp8)."),
	of[kernels.MMPushArgs]("MMPush", false, "MMPush launches mm_allreduce_push."),
	of[kernels.MMReduceScatterArgs]("MMReduceScatter", false, "MMReduceScatter launches mm_reducescatter (and _fp8)."),
	of[kernels.MMAllGatherArgs]("MMAllGather", false, "MMAllGather launches mm_allgather."),
	of[kernels.MMBroadcastArgs]("MMBroadcast", false, "MMBroadcast launches mm_broadcast."),
	of[kernels.MMBarrierArgs]("MMBarrier", false, "MMBarrier launches mm_barrier."),
	of[kernels.NVSHMEMAllGatherRingArgs]("NVSHMEMAllGatherRing", false, "NVSHMEMAllGatherRing launches nvshmem_allgather_ring."),
	of[kernels.NVSHMEMReduceScatterRingArgs]("NVSHMEMReduceScatterRing", false, "NVSHMEMReduceScatterRing launches nvshmem_reducescatter_ring (Scratch points to b32)."),
	of[kernels.NVSHMEMRingSignalArgs]("NVSHMEMRingSignal", false, "NVSHMEMRingSignal launches nvshmem_ring_signal."),
	of[kernels.HierArgs]("Hier", false, "Hier launches hier_allreduce, hier_reducescatter and hier_allgather."),
	of[kernels.NVSHMEMCopyArgs]("NVSHMEMCopy", false, "NVSHMEMCopy launches nvshmem_alltoall_put and nvshmem_ring_get."),
}

// declared returns what dsl.Params declares for t's Args with element type dt.
func declared(t twin, dt dsl.Type) ([]dsl.ParamInfo, error) {
	k := dsl.New("twin")
	t.params(k, dt)
	if _, err := k.Build(); err != nil {
		return nil, fmt.Errorf("%s: %w", t.args, err)
	}
	return k.Params(), nil
}

// fields renders t's struct fields.
func fields(t twin) ([]jen.Code, error) {
	// Declared twice with two element types: a field whose type follows is dt-typed.
	a, err := declared(t, dsl.F64)
	if err != nil {
		return nil, err
	}
	b, err := declared(t, dsl.I8)
	if err != nil {
		return nil, err
	}
	if len(a) != t.args.NumField() || len(b) != len(a) {
		return nil, fmt.Errorf("%s: %d fields declare %d parameters", t.args, t.args.NumField(), len(a))
	}
	var out []jen.Code
	for i, p := range a {
		sf := t.args.Field(i)
		dtTyped := p.Type != b[i].Type
		var typ jen.Code
		switch {
		case p.TensorMap:
			typ = jen.Qual(jitPkg, "TensorMap")
		case sf.Type == reflect.TypeFor[dsl.PeerTable]() && !t.generic, p.Pointer && !t.generic:
			typ = jen.Qual(jitPkg, "AnyPtr")
		case sf.Type == reflect.TypeFor[dsl.PeerTable]():
			return nil, fmt.Errorf("%s.%s: a peer table in a generic twin (want jit.AnyPtr twins)", t.args, sf.Name)
		case dtTyped && t.generic:
			typ = jen.Id("T")
		case dtTyped:
			return nil, fmt.Errorf("%s.%s: a scalar of the kernel's dtype needs a generic twin", t.args, sf.Name)
		default:
			gt, err := gen.GoType(p.Type)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.args, sf.Name, err)
			}
			typ = gt
		}
		if p.Pointer && t.generic {
			typ = jen.Qual(jitPkg, "Ptr").Types(typ)
		}
		f := jen.Id(sf.Name).Add(typ)
		if naming.Snake(sf.Name) != p.Name {
			f.Tag(map[string]string{naming.TagKey: "name=" + p.Name})
		}
		out = append(out, f)
	}
	return out, nil
}

func main() {
	f := jen.NewFile("launch")
	f.HeaderComment("Code generated by kernels/launch/gen.go (go generate ./kernels/launch). DO NOT EDIT.")
	f.ImportName(jitPkg, "jit")
	for _, t := range twins {
		fs, err := fields(t)
		if err != nil {
			log.Fatalf("kernels/launch: %v", err)
		}
		for _, line := range strings.Split(t.doc, "\n") {
			f.Comment(line)
		}
		decl := f.Type().Id(t.name)
		if t.generic {
			decl.Types(jen.Id("T").Qual(jitPkg, "Elem"))
		}
		decl.Struct(fs...)
	}
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		log.Fatalf("kernels/launch: %v", err)
	}
	if err := os.WriteFile("launch_kgen.go", buf.Bytes(), 0o644); err != nil {
		log.Fatalf("kernels/launch: %v", err)
	}
}
