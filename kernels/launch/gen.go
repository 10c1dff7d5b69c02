//go:build generate

// The generator of launch_kgen.go: `go generate` runs it. For each library kernel family it
// reads the kernel's Args struct (kernels.XxxArgs, what dsl.Params declares) and writes its
// host twin: the same fields in the same order, dt-typed pointers as jit.Ptr[T] (a type
// parameter T) or jit.AnyPtr (collectives, whose dtype is chosen at run time), fixed-type
// ones (a kgen type tag) as jit.Ptr of their Go type or jit.AnyPtr, scalars as T or their
// Go type. A field's parameter name, when not its snake_case, is carried as a kgen name tag.
// A kernel declaring several Args structs in order (joined) gets one flat twin of them all.
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
	parts   []part // the Args structs the kernel declares, in order
}

// part is one Args struct of a kernel's parameters.
type part struct {
	args   reflect.Type
	params func(k *dsl.Kernel, dt dsl.Type)
}

func partOf[A any]() part {
	return part{args: reflect.TypeFor[A](), params: func(k *dsl.Kernel, dt dsl.Type) { dsl.Params[A](k, dt) }}
}

func of[A any](name string, generic bool, doc string) twin {
	return twin{name: name, doc: doc, generic: generic, parts: []part{partOf[A]()}}
}

// joined is the twin of a kernel whose parameters are several Args structs in order (a gemm's
// arguments, then its output, then its epilogue's): one flat struct of jit.AnyPtr pointers,
// as LaunchArgs takes it.
func joined(name, doc string, parts ...part) twin {
	return twin{name: name, doc: doc, parts: parts}
}

// The gemms' and fused kernels' parts.
var (
	gemmArgs     = partOf[kernels.GemmArgs]()
	gemmOut      = partOf[kernels.GemmOut]()
	gemmEpi      = partOf[kernels.GemmEpilogueArgs]()
	gemmSM90Args = partOf[kernels.GemmSM90Args]()
	gemmSM90TmD  = partOf[kernels.GemmSM90StoreArgs]()
	gemmSM90Pcs  = partOf[kernels.GemmSM90PieceArgs]()
	gemmSM90Mask = partOf[kernels.GemmSM90GroupedMaskArgs]()
	fusedOut     = partOf[kernels.FusedOut]()
	fusedOutMC   = partOf[kernels.FusedOutMC]()
)

var twins = []twin{
	of[kernels.VectorAddArgs]("VectorAdd", true, "VectorAdd launches vector_add: C[i] = A[i] + B[i] for i < N."),
	of[kernels.AxpyArgs]("Axpy", true, "Axpy launches axpy: Y[i] = Alpha*X[i] + Y[i] for i < N."),
	of[kernels.SwiGLUArgs]("SwiGLU", true, "SwiGLU launches swiglu: Out[r, c] = silu(GateUp[r, c]) * GateUp[r, F+c] for the first\nRows rows (min(Rows, Count[0]) when HasCount is not 0)."),
	of[kernels.SwiGLUMaskedArgs]("SwiGLUMasked", true, "SwiGLUMasked launches swiglu_masked: SwiGLU's Out on the rows of the masked layout's groups,\ng*Stride + [0, Counts[g]) for g < Groups (kernels.SwiGLUMasked)."),
	of[kernels.CopyArgs]("Copy", true, "Copy launches tiled_copy: Dst[i] = Src[i] for i < N."),
	of[kernels.TransposeArgs]("Transpose", true, "Transpose launches transpose: Out (N x M) = In (M x N) transposed, row-major."),
	of[kernels.RowSumArgs]("RowSum", true, "RowSum launches row_sum: Out[r] = the f32 sum of row r of In (Rows rows of Cols columns)."),
	of[kernels.SoftmaxArgs]("Softmax", true, "Softmax launches softmax: row r of Out = softmax of row r of In (Rows rows of Cols\ncolumns)."),
	of[kernels.RowSumSplitArgs]("RowSumSplit", true, "RowSumSplit launches row_sum_split (long rows, Parts blocks a row, co-resident):\nOut[r] = the f32 sum of row r of In."),
	of[kernels.SoftmaxSplitArgs]("SoftmaxSplit", true, "SoftmaxSplit launches softmax_split (long rows, Parts blocks a row, co-resident): row r\nof Out = softmax of row r of In."),
	of[kernels.RowSumStridedArgs]("RowSumStrided", true, "RowSumStrided launches row_sum_strided: Out[r] = the f32 sum of row r of In (Rows rows of\nCols columns, Ld elements apart)."),
	of[kernels.SoftmaxStridedArgs]("SoftmaxStrided", true, "SoftmaxStrided launches softmax_strided: row r of Out = softmax of row r of In (Rows rows\nof Cols columns, InLd and OutLd elements apart)."),
	of[kernels.AttentionDecodeArgs]("AttentionDecode", true, "AttentionDecode launches attention_decode (kernels.AttentionDecode): paged-KV decode attention of\nQLen queries a sequence, one split of the keys a block; O and LSE with NumSplits 1, else the\nf32 partials OPart and LSEPart for AttentionDecodeCombine."),
	of[kernels.AttentionArgs]("Attention", true, "Attention launches attention (kernels.Attention, FlashAttention-2 on mma.sync): Q, K, V, O of\nthe input type, the f32 LSE, the shapes and the scale."),
	{name: "AttentionSM90", generic: true, doc: "AttentionSM90 launches attention_sm90 (kernels.AttentionSM90): kernels.AttentionArgs, then the\ntensor maps of Q, K and V as kernels.AttentionSM90Config.Launch specifies them.",
		parts: []part{partOf[kernels.AttentionArgs](), partOf[kernels.AttentionSM90Maps]()}},
	{name: "AttentionSM90VarLen", generic: true, doc: "AttentionSM90VarLen launches attention_sm90's VarLen variants: kernels.AttentionArgs, the tensor\nmaps of kernels.AttentionSM90Config.LaunchVarLen, then kernels.AttentionVarLenArgs.",
		parts: []part{partOf[kernels.AttentionArgs](), partOf[kernels.AttentionSM90Maps](), partOf[kernels.AttentionVarLenArgs]()}},
	{name: "AttentionSM90Dynamic", generic: true, doc: "AttentionSM90Dynamic launches attention_sm90 with kernels.AttentionDynamic: AttentionSM90's\nparameters, then kernels.AttentionSchedArgs (the tile counter, zero before the first launch).",
		parts: []part{partOf[kernels.AttentionArgs](), partOf[kernels.AttentionSM90Maps](), partOf[kernels.AttentionSchedArgs]()}},
	{name: "AttentionSM90VarLenDynamic", generic: true, doc: "AttentionSM90VarLenDynamic launches attention_sm90's VarLen variants with\nkernels.AttentionDynamic: AttentionSM90VarLen's parameters, then kernels.AttentionSchedArgs.",
		parts: []part{partOf[kernels.AttentionArgs](), partOf[kernels.AttentionSM90Maps](), partOf[kernels.AttentionVarLenArgs](), partOf[kernels.AttentionSchedArgs]()}},
	of[kernels.AttentionDecodeCombineArgs]("AttentionDecodeCombine", true, "AttentionDecodeCombine launches attention_decode_combine: O and LSE from the decode kernel's\nNumSplits partials."),
	of[kernels.SumSlotsArgs]("SumSlots", false, "SumSlots launches sum_slots: Out[i] = the sum over s < NSlots of Slots[s*N + i]."),
	of[kernels.GemmEpilogueArgs]("GemmEpilogue", true, "GemmEpilogue is the parameters a non-zero kernels.Epilogue adds after a gemm's own (gemm and\ngemm_sm90, after TmD with TMAStore), T the output type: Bias, ScaleA, ScaleB (f32) and Residual\n(M x N of T); those the options do not use may be null."),
	of[kernels.P2POneShotArgs]("P2POneShot", false, "P2POneShot launches p2p_allreduce_1shot."),
	of[kernels.P2PTwoShotArgs]("P2PTwoShot", false, "P2PTwoShot launches p2p_allreduce_2shot."),
	of[kernels.P2PPushArgs]("P2PPush", false, "P2PPush launches p2p_allreduce_push and p2p_allreduce_push4."),
	of[kernels.P2PLamportArgs]("P2PLamport", false, "P2PLamport launches p2p_allreduce_lamport."),
	of[kernels.P2PReduceScatterArgs]("P2PReduceScatter", false, "P2PReduceScatter launches p2p_reducescatter."),
	of[kernels.P2PReduceScatterPullArgs]("P2PReduceScatterPull", false, "P2PReduceScatterPull launches p2p_reducescatter_pull."),
	of[kernels.P2PAllGatherArgs]("P2PAllGather", false, "P2PAllGather launches p2p_allgather."),
	of[kernels.P2PBroadcastArgs]("P2PBroadcast", false, "P2PBroadcast launches p2p_broadcast."),
	of[kernels.P2PBarrierArgs]("P2PBarrier", false, "P2PBarrier launches p2p_barrier."),
	of[kernels.MoEDispatchCountArgs]("MoEDispatchCount", false, "MoEDispatchCount launches moe_dispatch_count."),
	of[kernels.MoEDispatchLayoutArgs]("MoEDispatchLayout", false, "MoEDispatchLayout launches moe_dispatch_layout."),
	of[kernels.MoEDispatchSendArgs]("MoEDispatchSend", false, "MoEDispatchSend launches moe_dispatch_send."),
	of[kernels.MoEDispatchExpandArgs]("MoEDispatchExpand", false, "MoEDispatchExpand launches moe_dispatch_expand."),
	of[kernels.MoECombineArgs]("MoECombine", false, "MoECombine launches moe_combine."),
	of[kernels.MoELLDispatchArgs]("MoELLDispatch", false, "MoELLDispatch launches moe_ll_dispatch."),
	of[kernels.MoELLCombineArgs]("MoELLCombine", false, "MoELLCombine launches moe_ll_combine."),
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
	joined("Gemm", "Gemm launches gemm (kernels.Gemm, zero Epilogue): D = Alpha*A*B + Beta*C; A and B point to\nthe input type, C and D to the output type (kernels.GemmArgs, then kernels.GemmOut).",
		gemmArgs, gemmOut),
	joined("GemmEpi", "GemmEpi launches gemm with a non-zero kernels.Epilogue (kernels.GemmArgs, kernels.GemmOut,\nthen kernels.GemmEpilogueArgs: the operands the options do not use may be null).",
		gemmArgs, gemmOut, gemmEpi),
	joined("GemmSM90", "GemmSM90 launches gemm_sm90 (kernels.GemmSM90, TMAStore off, zero Epilogue): the tensor maps\nof A and B as kernels.GemmSM90Config.Launch specifies them (kernels.GemmSM90Args, then\nkernels.GemmOut).",
		gemmSM90Args, gemmOut),
	joined("GemmSM90Epi", "GemmSM90Epi launches gemm_sm90 with a non-zero kernels.Epilogue, TMAStore off\n(kernels.GemmSM90Args, kernels.GemmOut, then kernels.GemmEpilogueArgs).",
		gemmSM90Args, gemmOut, gemmEpi),
	joined("GemmSM90Store", "GemmSM90Store launches gemm_sm90 with TMAStore, zero Epilogue: D's tensor map last\n(kernels.GemmSM90Args, kernels.GemmOut, then kernels.GemmSM90StoreArgs).",
		gemmSM90Args, gemmOut, gemmSM90TmD),
	joined("GemmSM90Pieces", "GemmSM90Pieces launches gemm_sm90 with Pieces, TMAStore off, zero Epilogue: the per-piece\ncounters and the piece's rows last (kernels.GemmSM90Args, kernels.GemmOut, then\nkernels.GemmSM90PieceArgs).",
		gemmSM90Args, gemmOut, gemmSM90Pcs),
	joined("GemmSM90StorePieces", "GemmSM90StorePieces launches gemm_sm90 with TMAStore and Pieces, zero Epilogue\n(kernels.GemmSM90Args, kernels.GemmOut, kernels.GemmSM90StoreArgs, then\nkernels.GemmSM90PieceArgs).",
		gemmSM90Args, gemmOut, gemmSM90TmD, gemmSM90Pcs),
	joined("GemmSM90StoreEpi", "GemmSM90StoreEpi launches gemm_sm90 with TMAStore and a non-zero kernels.Epilogue\n(kernels.GemmSM90Args, kernels.GemmOut, kernels.GemmSM90StoreArgs, then\nkernels.GemmEpilogueArgs).",
		gemmSM90Args, gemmOut, gemmSM90TmD, gemmEpi),
	joined("GemmSM90Grouped", "GemmSM90Grouped launches gemm_sm90_grouped (kernels.GemmSM90Grouped): the tensor maps of A and\nthe stacked B as kernels.GemmSM90GroupedConfig.Launch specifies them, Offsets the groups+1\nint32 row offsets (kernels.GemmSM90GroupedArgs, then kernels.GemmOut).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut),
	joined("GemmSM90GroupedScaled", "GemmSM90GroupedScaled launches gemm_sm90_grouped with Scales (kernels.GemmSM90GroupedArgs,\nkernels.GemmOut, then kernels.GemmSM90GroupedScaleArgs: ScaleA per row, ScaleB per group and\ncolumn).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, partOf[kernels.GemmSM90GroupedScaleArgs]()),
	joined("GemmSM90GroupedStore", "GemmSM90GroupedStore launches gemm_sm90_grouped with TMAStore: D's tensor map after\nkernels.GemmOut (kernels.GemmSM90GroupedArgs, kernels.GemmOut, then kernels.GemmSM90StoreArgs).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, gemmSM90TmD),
	joined("GemmSM90GroupedScaledStore", "GemmSM90GroupedScaledStore launches gemm_sm90_grouped with TMAStore and Scales\n(kernels.GemmSM90GroupedArgs, kernels.GemmOut, kernels.GemmSM90StoreArgs, then\nkernels.GemmSM90GroupedScaleArgs).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, gemmSM90TmD, partOf[kernels.GemmSM90GroupedScaleArgs]()),
	joined("GemmSM90GroupedMasked", "GemmSM90GroupedMasked launches gemm_sm90_grouped with Masked (kernels.GemmSM90GroupedArgs,\nOffsets not read, kernels.GemmOut, then kernels.GemmSM90GroupedMaskArgs: the groups' row counts\nand their row stride).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, gemmSM90Mask),
	joined("GemmSM90GroupedScaledMasked", "GemmSM90GroupedScaledMasked launches gemm_sm90_grouped with Scales and Masked\n(kernels.GemmSM90GroupedArgs, kernels.GemmOut, kernels.GemmSM90GroupedScaleArgs, then\nkernels.GemmSM90GroupedMaskArgs).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, partOf[kernels.GemmSM90GroupedScaleArgs](), gemmSM90Mask),
	joined("GemmSM90GroupedStoreMasked", "GemmSM90GroupedStoreMasked launches gemm_sm90_grouped with TMAStore and Masked\n(kernels.GemmSM90GroupedArgs, kernels.GemmOut, kernels.GemmSM90StoreArgs, then\nkernels.GemmSM90GroupedMaskArgs).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, gemmSM90TmD, gemmSM90Mask),
	joined("GemmSM90GroupedScaledStoreMasked", "GemmSM90GroupedScaledStoreMasked launches gemm_sm90_grouped with TMAStore, Scales and Masked\n(kernels.GemmSM90GroupedArgs, kernels.GemmOut, kernels.GemmSM90StoreArgs,\nkernels.GemmSM90GroupedScaleArgs, then kernels.GemmSM90GroupedMaskArgs).",
		partOf[kernels.GemmSM90GroupedArgs](), gemmOut, gemmSM90TmD, partOf[kernels.GemmSM90GroupedScaleArgs](), gemmSM90Mask),
	joined("AGGemm", "AGGemm launches ag_gemm (kernels.AGGemmArgs, then kernels.FusedOut).",
		partOf[kernels.AGGemmArgs](), fusedOut),
	joined("GemmRS", "GemmRS launches gemm_rs (kernels.GemmRSArgs, then kernels.FusedOut) and gemm_ar\n(kernels.FusedOutTable: D is then the table of every GPU's D).",
		partOf[kernels.GemmRSArgs](), fusedOut),
	joined("GemmARMC", "GemmARMC launches gemm_ar_mc (kernels.GemmARMCArgs, then kernels.FusedOutMC).",
		partOf[kernels.GemmARMCArgs](), fusedOutMC),
	joined("AGGemmNVSHMEM", "AGGemmNVSHMEM launches ag_gemm_nvshmem (kernels.AGGemmNVSHMEMArgs, then kernels.FusedOut).",
		partOf[kernels.AGGemmNVSHMEMArgs](), fusedOut),
	joined("AGGemmSM90", "AGGemmSM90 launches ag_gemm_sm90 (kernels.AGGemmSM90Args, then kernels.FusedOut).",
		partOf[kernels.AGGemmSM90Args](), fusedOut),
	joined("GemmRSSM90", "GemmRSSM90 launches gemm_rs_sm90 (kernels.GemmRSSM90Args, then kernels.FusedOut) and\ngemm_ar_sm90 (kernels.FusedOutTable: D is then the table of every GPU's D).",
		partOf[kernels.GemmRSSM90Args](), fusedOut),
	joined("GemmARMCSM90", "GemmARMCSM90 launches gemm_ar_mc_sm90 (kernels.GemmARMCSM90Args, then kernels.FusedOutMC).",
		partOf[kernels.GemmARMCSM90Args](), fusedOutMC),
}

// declared returns what dsl.Params declares for t's Args with element type dt.
func declared(t twin, dt dsl.Type) ([]dsl.ParamInfo, error) {
	k := dsl.New("twin")
	for _, p := range t.parts {
		p.params(k, dt)
	}
	if _, err := k.Build(); err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	return k.Params(), nil
}

// structFields returns the fields of t's parts, in order.
func structFields(t twin) []reflect.StructField {
	var out []reflect.StructField
	for _, p := range t.parts {
		for i := 0; i < p.args.NumField(); i++ {
			out = append(out, p.args.Field(i))
		}
	}
	return out
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
	sfs := structFields(t)
	if len(a) != len(sfs) || len(b) != len(a) {
		return nil, fmt.Errorf("%s: %d fields declare %d parameters", t.name, len(sfs), len(a))
	}
	var out []jen.Code
	for i, p := range a {
		sf := sfs[i]
		dtTyped := p.Type != b[i].Type
		var typ jen.Code
		switch {
		case p.TensorMap:
			typ = jen.Qual(jitPkg, "TensorMap")
		case sf.Type == reflect.TypeFor[dsl.PeerTable]() && !t.generic, p.Pointer && !t.generic:
			typ = jen.Qual(jitPkg, "AnyPtr")
		case sf.Type == reflect.TypeFor[dsl.PeerTable]():
			return nil, fmt.Errorf("%s.%s: a peer table in a generic twin (want jit.AnyPtr twins)", t.name, sf.Name)
		case dtTyped && t.generic:
			typ = jen.Id("T")
		case dtTyped:
			return nil, fmt.Errorf("%s.%s: a scalar of the kernel's dtype needs a generic twin", t.name, sf.Name)
		default:
			gt, err := gen.GoType(p.Type)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.name, sf.Name, err)
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
