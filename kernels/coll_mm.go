package kernels

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// Multimem collectives: NVLink SHARP through multicast addresses (sm_90 and later). One
// multimem.ld_reduce returns the reduction of a 128-bit vector over every GPU's copy (the
// NVSwitch reduces), one multimem.st writes a vector into every GPU's copy. See
// docs/collectives.md for the memory-ordering arguments.
//
// Common parameters: *_mc are multicast addresses of symmetric buffers (nvshmemx_mc_ptr),
// flags_mc and flags_uc the multicast and local (unicast) addresses of the barrier flags
// (FlagWords u32 per GPU, zero once at allocation), rank this GPU's index, ngpus the number
// of GPUs, n the element count, epoch the number of barriers the flag set has completed
// before the launch (the host adds CollBarriers(family) after each launch). Symmetric buffers
// read through a multicast address must be allocated in whole 16-byte units: the last
// vector is read whole, and the 16-bit kernels may write the padding element after an odd n.
// Launch the same grid (at most CollMaxBlocks blocks of CollThreads threads) on every GPU,
// and the same grid for every launch over one flag set: block b's flag counts the barriers
// block b took part in, and the epoch counts them all.

// mmTargets are the targets of the multimem kernels; mmGolden those pinned in golden/.
var (
	mmTargets = []ptx.Target{ptx.SM90, ptx.SM90a, ptx.SM100a}
	mmGolden  = []ptx.Target{ptx.SM90, ptx.SM100a}
)

// mmFP8Targets are the targets of the fp8 multimem kernels: multimem on e4m3x4/e5m2x4 and
// .acc::f16 need PTX 8.6 and an sm_100a-class target.
var mmFP8Targets = []ptx.Target{ptx.SM100a}

// mmFP8DTypes are the fp8 element types of the mm_*_fp8_* kernels.
var mmFP8DTypes = []dsl.Type{dsl.E4M3, dsl.E5M2}

// mmDTypes returns the element types multimem can reduce with op: .min and .max take no
// f32 (PTX allows them on f16, bf16 and integers only).
func mmDTypes(op dsl.ReduceOp) []dsl.Type {
	if op == dsl.Sum {
		return collDTypes
	}
	return []dsl.Type{dsl.F16, dsl.BF16, dsl.I32}
}

func init() {
	defer registerMMGraph()
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyMMAllReduce1Shot) + "_" + o.name,
			Family: FamilyMMAllReduce1Shot, Reduces: true, Op: op,
			Doc:     "one-shot multimem all-reduce (" + o.name + "): every GPU ld_reduces the whole buffer through the multicast address and stores its own output; 2 barriers",
			DTypes:  mmDTypes(op),
			Targets: mmTargets,
			Golden:  mmGolden,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMAllReduceOneShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyMMAllReduce2Shot) + "_" + o.name,
			Family: FamilyMMAllReduce2Shot, Reduces: true, Op: op,
			Doc:     "two-shot multimem all-reduce (" + o.name + "): ld_reduce of a 1/N slice (reduce-scatter), multimem.st of the result (all-gather); in place or not; 2 barriers",
			DTypes:  mmDTypes(op),
			Targets: mmTargets,
			Golden:  mmGolden,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMAllReduceTwoShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyMMReduceScatter) + "_" + o.name,
			Family: FamilyMMReduceScatter, Reduces: true, Op: op,
			Doc:     "multimem reduce-scatter (" + o.name + "): GPU r ld_reduces part r of the input through the multicast address into its output; 2 barriers",
			DTypes:  mmDTypes(op),
			Targets: mmTargets,
			Golden:  mmGolden,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMReduceScatter(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyMMAllReducePush) + "_" + o.name,
			Family: FamilyMMAllReducePush, Reduces: true, Op: op,
			Doc:     "push all-reduce (" + o.name + "): every GPU multimem.st's its input into its slot of every GPU's scratch, then reduces the slots locally; any dtype and op (f32 min/max too); 2 barriers",
			DTypes:  collDTypes,
			Targets: mmTargets,
			Golden:  mmGolden,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMAllReducePush(k, dt, op) },
		})
	}
	// fp8: separate kernels because their targets differ (sm_100a only). Sums accumulate
	// in f16 (.acc::f16); min and max compare in the fp8 type (PTX has both on fp8 words).
	for _, o := range collOps {
		op := o.op
		register(&Spec{
			Name:   string(FamilyMMAllReduce1ShotFP8) + "_" + o.name,
			Family: FamilyMMAllReduce1ShotFP8, Reduces: true, Op: op,
			Doc:     "one-shot multimem all-reduce (" + o.name + ") of fp8 (e4m3, e5m2; sm_100a): ld_reduce of packed e4m3x4/e5m2x4 words" + fp8AccDoc(op) + ", stored to this GPU's output; 2 barriers",
			DTypes:  mmFP8DTypes,
			Targets: mmFP8Targets,
			Golden:  mmFP8Targets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMAllReduceOneShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyMMAllReduce2ShotFP8) + "_" + o.name,
			Family: FamilyMMAllReduce2ShotFP8, Reduces: true, Op: op,
			Doc:     "two-shot multimem all-reduce (" + o.name + ") of fp8 (e4m3, e5m2; sm_100a): ld_reduce of a 1/N slice in packed words" + fp8AccDoc(op) + ", multimem.st of the result; 2 barriers",
			DTypes:  mmFP8DTypes,
			Targets: mmFP8Targets,
			Golden:  mmFP8Targets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMAllReduceTwoShot(k, dt, op) },
		})
		register(&Spec{
			Name:   string(FamilyMMReduceScatterFP8) + "_" + o.name,
			Family: FamilyMMReduceScatterFP8, Reduces: true, Op: op,
			Doc:     "multimem reduce-scatter (" + o.name + ") of fp8 (e4m3, e5m2; sm_100a): GPU r ld_reduces part r in packed words" + fp8AccDoc(op) + " into its output; 2 barriers",
			DTypes:  mmFP8DTypes,
			Targets: mmFP8Targets,
			Golden:  mmFP8Targets,
			New:     func(k *dsl.Kernel, dt dsl.Type) { MMReduceScatter(k, dt, op) },
		})
	}
	register(&Spec{
		Name:    string(FamilyMMAllGather),
		Family:  FamilyMMAllGather,
		Doc:     "multimem all-gather of 32-bit words: GPU r multimem.st's its m words to [r*m, r*m+m) of every GPU's output; 2 barriers",
		DTypes:  []dsl.Type{dsl.F32},
		Targets: mmTargets,
		Golden:  mmGolden,
		New:     MMAllGather,
	})
	register(&Spec{
		Name:    string(FamilyMMBroadcast),
		Family:  FamilyMMBroadcast,
		Doc:     "multimem broadcast of 32-bit words: the root multimem.st's its n words into every GPU's output; 2 barriers",
		DTypes:  []dsl.Type{dsl.F32},
		Targets: mmTargets,
		Golden:  mmGolden,
		New:     MMBroadcast,
	})
	register(&Spec{
		Name:    string(FamilyMMBarrier),
		Family:  FamilyMMBarrier,
		Doc:     "cross-GPU barrier: multimem.red.release.sys add on a per-block flag, fence.proxy.alias, ld.acquire.sys spin on the local flag; epoch-based, no reset",
		DTypes:  []dsl.Type{dsl.U32},
		Targets: mmTargets,
		Golden:  mmGolden,
		New:     func(k *dsl.Kernel, _ dsl.Type) { MMBarrier(k) },
	})
}

func fp8AccDoc(op dsl.ReduceOp) string {
	if op == dsl.Sum {
		return " (.acc::f16: summed in f16, rounded to the fp8 type)"
	}
	return ""
}

// isFP8 reports whether dt is an 8-bit float: multimem moves it as packed 32-bit words.
func isFP8(dt dsl.Type) bool { return dt == dsl.E4M3 || dt == dsl.E5M2 }

// fp8Word is the packed word an fp8 type travels in: four elements per .b32.
func fp8Word(dt dsl.Type) dsl.Type {
	if dt == dsl.E5M2 {
		return dsl.E5M2x4
	}
	return dsl.E4M3x4
}

// mmUnit is the smallest multimem access of dt in elements: f16 and bf16 travel in pairs,
// fp8 in words of four.
func mmUnit(dt dsl.Type) int {
	if isFP8(dt) {
		return 4
	}
	if dt.Bytes() == 2 {
		return 2
	}
	return 1
}

// mmLoadReduce returns op over every GPU of the w elements at the multicast address p[i]:
// one multimem.ld_reduce of up to 128 bits for floats (f16 and bf16 sums accumulate in f32,
// .acc::f32), one per element for integers (integer forms take no vectors). fp8 comes back
// as w/4 packed words (i a multiple of 4; sums accumulate in f16, .acc::f16).
func mmLoadReduce(k *dsl.Kernel, p dsl.Ptr, dt dsl.Type, op dsl.ReduceOp, i dsl.Value, w int) dsl.Tensor {
	var opts []dsl.MultimemOption
	if op == dsl.Sum && dt.Bytes() == 2 {
		opts = append(opts, dsl.AccF32())
	}
	if isFP8(dt) {
		if op == dsl.Sum {
			opts = append(opts, dsl.AccF16())
		}
		return k.FragmentOf(k.MultimemLoadReduce(p.As(fp8Word(dt)).At(k.Assume(i.Div(4), w/4)), op, w/4, opts...)...)
	}
	if dt.IsInt() {
		out := make([]dsl.Value, w)
		for j := range out {
			out[j] = k.MultimemLoadReduce(p.At(i.Add(uint32(j))), op, 1)[0]
		}
		return k.FragmentOf(out...)
	}
	return k.FragmentOf(k.MultimemLoadReduce(p.At(k.Assume(i, w)), op, w, opts...)...)
}

// mmStore writes the fragment f to the multicast address p[i] on every GPU (multimem.st).
// fp8 fragments hold packed words (mmLoadReduce's), i a multiple of 4.
func mmStore(k *dsl.Kernel, p dsl.Ptr, dt dsl.Type, i dsl.Value, f dsl.Tensor) {
	vals := f.Values()
	if isFP8(dt) {
		k.MultimemStore(p.As(fp8Word(dt)).At(k.Assume(i.Div(4), len(vals))), vals)
		return
	}
	if dt.IsInt() {
		for j, v := range vals {
			k.MultimemStore(p.At(i.Add(uint32(j))), []dsl.Value{v})
		}
		return
	}
	k.MultimemStore(p.At(k.Assume(i, len(vals))), vals)
}

// mmStoreOut stores mmLoadReduce's result for the elements [i, i+w) to this GPU's p, only
// those below hi (storeGuarded). fp8 words go whole when they fill the vector of vec
// elements, byte by byte otherwise (a word that reaches past hi).
func mmStoreOut(k *dsl.Kernel, p dsl.Ptr, dt dsl.Type, i, hi dsl.Value, f dsl.Tensor, vec int) {
	if !isFP8(dt) {
		storeGuarded(k, p, i, hi, f, vec)
		return
	}
	vals := f.Values()
	if len(vals)*4 == vec {
		k.StoreVec(p.As(fp8Word(dt)).At(k.Assume(i.Div(4), len(vals))), vals)
		return
	}
	bytes := p.As(dsl.U8)
	for wi, v := range vals {
		u := v.Bitcast(dsl.U32)
		for j := 0; j < 4; j++ {
			e := i.Add(uint32(4*wi + j))
			b := u
			if j > 0 {
				b = u.Shr(uint32(8 * j))
			}
			k.If(e.Lt(hi), func() { k.Store(bytes.At(e), b.To(dsl.U8)) })
		}
	}
}

// MMOneShotArgs are mm_allreduce_1shot's parameters: in_mc is the input's multicast
// address, flags_mc and flags_uc the barrier flags' multicast and local addresses.
type MMOneShotArgs struct {
	InMC, Out             dsl.Ptr   // of dt
	FlagsMC, FlagsUC      dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value `kgen:"u32"`
}

// MMAllReduceOneShot writes out[0:n] = op over GPUs of in[0:n], reading the whole input
// through its multicast address: a barrier (every GPU's input is ready), each thread
// ld_reduces its 128-bit vectors and stores them to this GPU's out, a barrier (no GPU
// changes its input while another still reads it). out must not alias in: the host API
// stages in-place calls.
func MMAllReduceOneShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	mmAllReduceOneShot(k, dt, op, false)
}

func mmAllReduceOneShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[MMOneShotArgs](k, dt)
	in, out, fmc, fuc, ngpus, n := a.InMC, a.Out, a.FlagsMC, a.FlagsUC, a.NGPUs, a.N
	ew, epoch := mmEpoch(k, graph, fuc, a.Epoch)
	vec := vecOf(dt)
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(1))
	eachVec(k, k.Const(dsl.U32, 0), n, vec, mmUnit(dt), func(i dsl.Value, w int) {
		mmStoreOut(k, out, dt, i, n, mmLoadReduce(k, in, dt, op, i, w), vec)
	})
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(2))
	ew.end(k, epoch.Add(2))
}

// mmEpoch returns a multimem kernel's epoch source and base epoch: the argument arg, or
// (graph) this block's word at EpochWordMM of this GPU's flags.
func mmEpoch(k *dsl.Kernel, graph bool, fuc dsl.Ptr, arg dsl.Value) (epochWords, dsl.Value) {
	ew := hostEpoch
	if graph {
		ew = deviceEpoch(k, fuc, EpochWordMM)
	}
	return ew, ew.start(k, arg)
}

// MMTwoShotArgs are mm_allreduce_2shot's parameters.
type MMTwoShotArgs struct {
	InMC, OutMC           dsl.Ptr   // of dt
	FlagsMC, FlagsUC      dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value `kgen:"u32"`
}

// MMAllReduceTwoShot writes out[0:n] = op over GPUs of in[0:n] on every GPU: GPU r
// ld_reduces its slice (1/ngpus of the vectors) through in's multicast address and
// multimem.st's the result through out's, so each element crosses NVLink once each way. A
// barrier first (inputs ready, outputs free) and one last (its release orders this GPU's
// multimem stores before the signal; once every GPU has signalled, every slice has landed
// everywhere). out may equal in (in place).
func MMAllReduceTwoShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	mmAllReduceTwoShot(k, dt, op, false)
}

func mmAllReduceTwoShot(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[MMTwoShotArgs](k, dt)
	in, out, fmc, fuc, rank, ngpus, n := a.InMC, a.OutMC, a.FlagsMC, a.FlagsUC, a.Rank, a.NGPUs, a.N
	vec := vecOf(dt)
	lo, hi := twoShotSlice(k, rank, ngpus, n, vec)
	ew, epoch := mmEpoch(k, graph, fuc, a.Epoch)
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(1))
	eachVec(k, lo, hi, vec, mmUnit(dt), func(i dsl.Value, w int) {
		mmStore(k, out, dt, i, mmLoadReduce(k, in, dt, op, i, w))
	})
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(2))
	ew.end(k, epoch.Add(2))
}

// MMPushArgs are mm_allreduce_push's parameters: scratch_mc and scratch_uc are the scratch
// buffer's multicast and local addresses.
type MMPushArgs struct {
	In, Out, ScratchMC, ScratchUC dsl.Ptr   // of dt
	FlagsMC, FlagsUC              dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, N, Epoch         dsl.Value `kgen:"u32"`
}

// MMAllReducePush writes out[0:n] = op over GPUs of in[0:n] on every GPU without a switch
// reduction, for the reductions multimem.ld_reduce lacks (f32 min and max): a barrier (every
// GPU's scratch is free: its previous local reads are done), then GPU r multimem.st's its
// input into slot r (ld = n rounded up to whole vectors) of every GPU's scratch at once, a
// barrier (its multimem.red.release orders those multicast stores before the signal;
// fence.proxy.alias and the acquire order the unicast reads of scratch after it), then each
// GPU reduces its ngpus slots locally in f32 (s32) and writes out. The switch fans every
// input out once; each GPU receives ngpus inputs. out may equal in. scratch holds
// CollMaxGPUs slots of ld elements.
func MMAllReducePush(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	mmAllReducePush(k, dt, op, true, false)
}

// MMAllReducePushUnordered is MMAllReducePush with its barriers' multimem.red made relaxed
// and without fence.proxy.alias: a deliberately wrong kernel whose local reduction may read
// scratch before the peers' multicast stores land. The weak-memory tests use it to prove
// they catch a missing release on multimem; never use it for data.
func MMAllReducePushUnordered(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	mmAllReducePush(k, dt, op, false, false)
}

func mmAllReducePush(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, ordered, graph bool) {
	a := dsl.Params[MMPushArgs](k, dt)
	in, out, smc, suc, fmc, fuc := a.In, a.Out, a.ScratchMC, a.ScratchUC, a.FlagsMC, a.FlagsUC
	rank, ngpus, n := a.Rank, a.NGPUs, a.N
	vec, unit := vecOf(dt), mmUnit(dt)
	zero := k.Const(dsl.U32, 0)
	ld := k.Assume(n.Add(uint32(vec-1)).Div(uint32(vec)).Mul(uint32(vec)), vec)
	barrier := func(target dsl.Value) {
		if ordered {
			mmBarrier(k, fmc, fuc, ngpus, target)
			return
		}
		tid, b := k.ThreadIdx(dsl.X), k.BlockIdx(dsl.X)
		k.SyncThreads()
		k.If(tid.Eq(0), func() {
			k.MultimemReduce(fmc.At(b), dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}, dsl.Relaxed(dsl.System))
			k.WaitUntil(fuc.At(b), dsl.GeWrap, target.Mul(ngpus), dsl.Relaxed(dsl.System))
		})
		k.SyncThreads()
	}
	ew, epoch := mmEpoch(k, graph, fuc, a.Epoch)
	barrier(epoch.Add(1))
	mine := k.Assume(rank.Mul(ld), vec)
	eachVec(k, zero, n, vec, unit, func(i dsl.Value, w int) {
		mmStore(k, smc, dt, mine.Add(i), loadN(k, in, i, w))
	})
	barrier(epoch.Add(2))
	ew.end(k, epoch.Add(2))
	slot := func(i dsl.Value) func(p int) dsl.Value {
		return func(p int) dsl.Value {
			if p == 0 {
				return i
			}
			return k.Assume(ld.Mul(uint32(p)), vec).Add(i)
		}
	}
	eachVec(k, zero, n, vec, 1, func(i dsl.Value, w int) {
		sum := reducePeers(k, dt, op, ngpus, w, loadFrom(k, func(int) dsl.Ptr { return suc }, slot(i)))
		storeN(k, out, i, sum.To(dt))
	})
}

// MMReduceScatterArgs are mm_reducescatter's parameters: n is the part size m.
type MMReduceScatterArgs struct {
	InMC, Out             dsl.Ptr   // of dt
	FlagsMC, FlagsUC      dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value `kgen:"u32"`
}

// MMReduceScatter writes out[0:m] = op over GPUs of in[rank*m : rank*m+m] (in holds ngpus
// parts of m elements) by ld_reduce through in's multicast address: 128-bit vectors when m
// is a multiple of the vector width, element by element otherwise (16-bit elements through
// the aligned pair that holds them; fp8 through whole words when m is a multiple of 4, else
// through the aligned word that holds the element). A barrier first (inputs ready) and one last (inputs in
// use until every GPU has read its part).
func MMReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp) {
	mmReduceScatter(k, dt, op, false)
}

func mmReduceScatter(k *dsl.Kernel, dt dsl.Type, op dsl.ReduceOp, graph bool) {
	a := dsl.Params[MMReduceScatterArgs](k, dt)
	in, out, fmc, fuc, rank, ngpus, m := a.InMC, a.Out, a.FlagsMC, a.FlagsUC, a.Rank, a.NGPUs, a.N
	vec := vecOf(dt)
	zero := k.Const(dsl.U32, 0)
	base := rank.Mul(m)
	ew, epoch := mmEpoch(k, graph, fuc, a.Epoch)
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(1))
	byElement := func() {
		eachVec(k, zero, m, 1, 1, func(i dsl.Value, _ int) {
			e := base.Add(i)
			switch unit := mmUnit(dt); {
			case unit == 1:
				k.Store(out.At(i), mmLoadReduce(k, in, dt, op, e, 1).Get(0))
			case isFP8(dt):
				// The aligned word that holds element e; its byte e mod 4.
				word := mmLoadReduce(k, in, dt, op, k.Assume(e.And(^uint32(3)), 4), 4).Get(0)
				b := word.Bitcast(dsl.U32).Shr(e.And(3).Mul(8)).To(dsl.U8)
				k.Store(out.As(dsl.U8).At(i), b)
			default:
				pair := mmLoadReduce(k, in, dt, op, e.And(^uint32(1)), 2)
				k.Store(out.At(i), k.Select(e.And(1).Eq(0), pair.Get(0), pair.Get(1)))
			}
		})
	}
	unit := mmUnit(dt)
	if isFP8(dt) {
		unit = vec // m is a multiple of vec here: no tail loop
	}
	k.If(m.Rem(uint32(vec)).Eq(0), func() {
		eachVec(k, zero, m, vec, unit, func(i dsl.Value, w int) {
			mmStoreOut(k, out, dt, i, m, mmLoadReduce(k, in, dt, op, k.Assume(base.Add(i), vec), w), vec)
		})
	}).Else(func() {
		if !isFP8(dt) {
			byElement()
			return
		}
		// fp8: whole words when m is a multiple of 4 (every part starts on a word).
		k.If(m.Rem(4).Eq(0), func() {
			eachVec(k, zero, m, 4, 4, func(i dsl.Value, w int) {
				words := mmLoadReduce(k, in, dt, op, k.Assume(base.Add(i), 4), w)
				k.Store(out.As(fp8Word(dt)).At(i.Div(4)), words.Get(0))
			})
		}).Else(byElement)
	})
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(2))
	ew.end(k, epoch.Add(2))
}

// MMAllGatherArgs are mm_allgather's parameters: n is the part size m in words.
type MMAllGatherArgs struct {
	In, OutMC             dsl.Ptr   // of 32-bit words
	FlagsMC, FlagsUC      dsl.Ptr   `kgen:"u32"`
	Rank, NGPUs, N, Epoch dsl.Value `kgen:"u32"`
}

// MMAllGather writes the m 32-bit words of in on GPU r to out[r*m : r*m+m] of every GPU with
// multimem.st through out's multicast address: 128-bit vectors when m is a multiple of 4,
// single words otherwise (any data whose size is a multiple of 4 bytes; the host API sends
// other sizes to p2p_allgather). Barriers first (outputs free) and last (every GPU's stores
// have landed).
func MMAllGather(k *dsl.Kernel, dt dsl.Type) {
	mmAllGather(k, dt, false)
}

func mmAllGather(k *dsl.Kernel, dt dsl.Type, graph bool) {
	a := dsl.Params[MMAllGatherArgs](k, dt)
	in, out, fmc, fuc, rank, ngpus, m := a.In, a.OutMC, a.FlagsMC, a.FlagsUC, a.Rank, a.NGPUs, a.N
	zero := k.Const(dsl.U32, 0)
	base := rank.Mul(m)
	ew, epoch := mmEpoch(k, graph, fuc, a.Epoch)
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(1))
	body := func(i dsl.Value, w int) {
		k.MultimemStore(out.At(k.Assume(base.Add(i), w)), loadN(k, in, i, w).Values())
	}
	k.If(m.Rem(4).Eq(0), func() { eachVec(k, zero, m, 4, 1, body) }).Else(func() { eachVec(k, zero, m, 1, 1, body) })
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(2))
	ew.end(k, epoch.Add(2))
}

// MMBroadcastArgs are mm_broadcast's parameters.
type MMBroadcastArgs struct {
	In, OutMC                   dsl.Ptr   // of 32-bit words
	FlagsMC, FlagsUC            dsl.Ptr   `kgen:"u32"`
	Root, Rank, NGPUs, N, Epoch dsl.Value `kgen:"u32"`
}

// MMBroadcast writes the n 32-bit words of in on GPU root to out[0:n] of every GPU with
// multimem.st (128-bit vectors, single words for the tail); the other GPUs only take part in
// the barriers (first: outputs free; last: the root's stores have landed).
func MMBroadcast(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[MMBroadcastArgs](k, dt)
	in, out, fmc, fuc, root, rank, ngpus, n, epoch := a.In, a.OutMC, a.FlagsMC, a.FlagsUC, a.Root, a.Rank, a.NGPUs, a.N, a.Epoch
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(1))
	k.If(rank.Eq(root), func() {
		eachVec(k, k.Const(dsl.U32, 0), n, 4, 1, func(i dsl.Value, w int) {
			k.MultimemStore(out.At(k.Assume(i, w)), loadN(k, in, i, w).Values())
		})
	})
	mmBarrier(k, fmc, fuc, ngpus, epoch.Add(2))
}

// MMBarrierArgs are mm_barrier's parameters.
type MMBarrierArgs struct {
	FlagsMC, FlagsUC dsl.Ptr   `kgen:"u32"`
	NGPUs, Epoch     dsl.Value `kgen:"u32"`
}

// MMBarrier is a standalone cross-GPU barrier over the flag set (see mmBarrier).
func MMBarrier(k *dsl.Kernel) {
	a := dsl.Params[MMBarrierArgs](k, dsl.U32)
	mmBarrier(k, a.FlagsMC, a.FlagsUC, a.NGPUs, a.Epoch.Add(1))
}

// registerMMGraph registers the graph variants (coll_common.go) of the multimem
// all-reduces, reduce-scatter and all-gather (not the fp8 families).
func registerMMGraph() {
	for _, s := range All() {
		op := s.Op
		switch s.Family {
		case FamilyMMAllReduce1Shot:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { mmAllReduceOneShot(k, dt, op, true) })
		case FamilyMMAllReduce2Shot:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { mmAllReduceTwoShot(k, dt, op, true) })
		case FamilyMMAllReducePush:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { mmAllReducePush(k, dt, op, true, true) })
		case FamilyMMReduceScatter:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { mmReduceScatter(k, dt, op, true) })
		case FamilyMMAllGather:
			registerGraph(s, func(k *dsl.Kernel, dt dsl.Type) { mmAllGather(k, dt, true) })
		}
	}
}
