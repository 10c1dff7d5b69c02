package ref

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// collRuns are the multi-GPU configurations every collective kernel and dtype runs in:
// every GPU count from 1 to 8, sizes that are no multiple of the vector width or the GPU
// count, the strict memory model and the weak one under several random schedules. The min
// and max variants share the sum kernels' code: they run only where minMax is set (2, 3, 4
// and 8 GPUs).
var collRuns = []struct {
	gpus, n int
	seed    int64
	weak    bool
	minMax  bool
}{
	{1, 13, 0, false, false},
	{2, 1001, 0, false, false},
	{2, 29, 6, true, true},
	{3, 37, 1, true, true},
	{4, 1031, 2, true, false},
	{4, 45, 7, false, true},
	{5, 7, 3, false, false},
	{6, 67, 8, true, false},
	{7, 23, 9, false, false},
	{7, 5, 10, true, false},
	{8, 130, 4, true, true},
	{8, 1, 5, true, false},
}

func isColl(name string) bool {
	return strings.HasPrefix(name, "p2p_") || strings.HasPrefix(name, "mm_") ||
		strings.HasPrefix(name, "nvshmem_reducescatter_ring_") || name == "nvshmem_allgather_ring"
}

// TestCollectivesOnTheEmulator runs every collective kernel and dtype on 1..8 simulated
// GPUs (collRuns), each harness launching collLaunches times in a row without resets.
func TestCollectivesOnTheEmulator(t *testing.T) {
	for _, s := range kernels.All() {
		if !isColl(s.Name) {
			continue
		}
		target := DefaultTarget(s)
		for _, dt := range s.DTypes {
			for _, c := range collRuns {
				if (strings.HasSuffix(s.Name, "_min") || strings.HasSuffix(s.Name, "_max")) && !c.minMax {
					continue
				}
				if s.MaxGPUs > 0 && c.gpus > s.MaxGPUs {
					continue // TestKernelsRefuseTooManyGPUs
				}
				mode := "strict"
				if c.weak {
					mode = fmt.Sprintf("weak%d", c.seed)
				}
				t.Run(fmt.Sprintf("%s/%s/g%d/n%d/%s", s.Name, dt, c.gpus, c.n, mode), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Target: target, Size: c.n, Ranks: c.gpus, Seed: c.seed, Weak: c.weak})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}

// TestKernelsRefuseTooManyGPUs checks that Run refuses a kernel built for fewer GPUs than
// CollMaxGPUs (p2p_allreduce_push4) on one GPU more than it handles, and that there is such
// a kernel and its graph variant.
func TestKernelsRefuseTooManyGPUs(t *testing.T) {
	bounded := 0
	for _, s := range kernels.All() {
		if s.MaxGPUs == 0 {
			continue
		}
		bounded++
		_, err := Run(Problem{Kernel: s.Name, Size: 100, Ranks: s.MaxGPUs + 1})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", s.MaxGPUs)) {
			t.Errorf("%s on %d GPUs: %v; want a refusal naming its %d", s.Name, s.MaxGPUs+1, err, s.MaxGPUs)
		}
	}
	if bounded < 2 {
		t.Errorf("%d kernels with MaxGPUs; want p2p_allreduce_push4's and their graph variants", bounded)
	}
}

// TestFP8MultimemPaths runs the fp8 multimem kernels at sizes collRuns misses: whole
// 16-element vectors (every kernel's vector path with no tail) and whole 4-element words
// that are no vectors (reduce-scatter's word path), at 2, 3 and 8 GPUs.
func TestFP8MultimemPaths(t *testing.T) {
	for _, s := range kernels.All() {
		if !strings.HasPrefix(s.Name, "mm_") || !strings.Contains(s.Name, "_fp8_") {
			continue
		}
		for _, dt := range s.DTypes {
			for _, c := range []struct {
				gpus, n int
				seed    int64
				weak    bool
			}{{2, 64, 11, true}, {3, 44, 0, false}, {8, 4100, 12, true}} {
				t.Run(fmt.Sprintf("%s/%s/g%d/n%d", s.Name, dt, c.gpus, c.n), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: c.n, Ranks: c.gpus, Seed: c.seed, Weak: c.weak})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}

// TestWeakModeCatchesMissingRelease is a test of the tests: a reduce-scatter whose
// barriers signal with a relaxed store instead of a release must fail in the weak-memory
// mode (its peer stores can land after the signal, and the local reduction then reads stale
// scratch) with a missing-fence report naming the stale read, the push, the relaxed signal
// and the wait that saw it, while the correct kernel passes the same runs.
func TestWeakModeCatchesMissingRelease(t *testing.T) {
	const entry = "p2p_reducescatter_sum_f32"
	good, bad := buildEntry(t, entry, kernels.P2PReduceScatter), buildEntry(t, entry, kernels.P2PReduceScatterUnordered)
	for seed := int64(1); seed <= 4; seed++ {
		for _, m := range []*ptx.Module{good, bad} {
			sys, err := emu.New(4)
			if err != nil {
				t.Fatal(err)
			}
			r := &run{p: Problem{DType: dsl.F32, Ranks: 4, Seed: seed, Weak: true}, sys: sys, rng: newRng(seed)}
			c := newColl(r)
			err = c.reduceScatter(301, dsl.Sum, m, entry)
			if m == good && err != nil {
				t.Fatalf("seed %d: the correct reduce-scatter failed: %v", seed, err)
			}
			if m == bad {
				wantMissingFence(t, err, entry, 4, c.blocks(301), []string{"k.Store(", "k.Copy("}, "k.Store(remote, target, dsl.Relaxed(dsl.System))", "k.WaitUntil(")
			}
		}
	}
}

// TestWeakModeCatchesMissingMultimemRelease is the same test of the tests for multimem: a
// push all-reduce whose barriers use a relaxed multimem.red (and no fence.proxy.alias) must
// fail in the weak-memory mode with a missing-fence report, while the correct kernel passes
// the same runs.
func TestWeakModeCatchesMissingMultimemRelease(t *testing.T) {
	const entry = "mm_allreduce_push_sum_f32"
	good, bad := buildEntry(t, entry, kernels.MMAllReducePush), buildEntry(t, entry, kernels.MMAllReducePushUnordered)
	for seed := int64(1); seed <= 4; seed++ {
		for _, m := range []*ptx.Module{good, bad} {
			sys, err := emu.New(4)
			if err != nil {
				t.Fatal(err)
			}
			r := &run{p: Problem{DType: dsl.F32, Ranks: 4, Seed: seed, Weak: true}, sys: sys, rng: newRng(seed)}
			c := newColl(r)
			err = c.mmPush(301, dsl.Sum, m, entry)
			if m == good && err != nil {
				t.Fatalf("seed %d: the correct push all-reduce failed: %v", seed, err)
			}
			if m == bad {
				wantMissingFence(t, err, entry, 4, c.blocks(301), []string{"k.MultimemStore("}, "k.MultimemReduce(fmc.At(b), dsl.Sum", "k.WaitUntil(")
			}
		}
	}
}

func buildEntry(t *testing.T, entry string, f func(*dsl.Kernel, dsl.Type, dsl.ReduceOp)) *ptx.Module {
	t.Helper()
	k := dsl.New(entry, dsl.WithTarget(ptx.SM90))
	f(k, dsl.F32, dsl.Sum)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// srcLine returns the trimmed Go source line at pos (a module-relative file).
func srcLine(t *testing.T, pos ptx.Pos) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(pos.File)))
	if err != nil {
		t.Fatalf("position %s:%d: %v", pos.File, pos.Line, err)
	}
	lines := strings.Split(string(b), "\n")
	if pos.Line < 1 || pos.Line > len(lines) {
		t.Fatalf("position %s:%d: the file has %d lines", pos.File, pos.Line, len(lines))
	}
	return strings.TrimSpace(lines[pos.Line-1])
}

// wantMissingFence checks the missing-fence report of a broken collective on gpus GPUs of
// blocks blocks: the kernel, GPU, block and thread of the stale read, a plain load at a Go
// line of the kernel library that loads, and the other three accesses at the Go lines that
// made them: the buffered store (a line holding one of stores), the writer's later store
// (holding flag) and the read that saw it (holding wait), each named in the message too.
func wantMissingFence(t *testing.T, err error, entry string, gpus, blocks int, stores []string, flag, wait string) {
	t.Helper()
	var e *emu.Error
	if errors.As(err, &e) && e.Kind == emu.KindDataRace {
		// The race detector may meet the same bug first: a plain push and a plain read of
		// the same bytes with no release between them.
		t.Log(err)
		if e.Kernel != entry || len(e.Related) != 1 || !strings.Contains(err.Error(), "no release at .sys scope") {
			t.Fatalf("data race report: %v", err)
		}
		rd, st := e.Pos, e.Related[0].Pos
		if strings.HasPrefix(e.Instr, "st.") {
			rd, st = st, rd
		}
		for _, p := range []ptx.Pos{rd, st} {
			if w := fmt.Sprintf("%s:%d", p.File, p.Line); !strings.HasPrefix(p.File, "kernels/") || !strings.Contains(err.Error(), w) {
				t.Fatalf("the report does not name %s in the kernel library: %v", w, err)
			}
		}
		if l := srcLine(t, rd); !strings.Contains(l, "k.Load(") && !strings.Contains(l, "k.Copy(") {
			t.Fatalf("the read is at %q", l)
		}
		if l := srcLine(t, st); !strings.Contains(l, "k.Store(") && !strings.Contains(l, "k.Copy(") {
			t.Fatalf("the push is at %q", l)
		}
		return
	}
	if !errors.As(err, &e) || e.Kind != emu.KindMissingFence {
		t.Fatalf("want a missing-fence report, got %v", err)
	}
	t.Log(err)
	if e.Kernel != entry || e.GPU < 0 || e.GPU >= gpus || e.Block[0] >= blocks || e.Block[1] != 0 || e.Block[2] != 0 ||
		e.Thread[0] >= kernels.CollThreads || e.Thread[1] != 0 || e.Thread[2] != 0 || !strings.HasPrefix(e.Instr, "ld.global.") {
		t.Fatalf("report names the wrong kernel, place or instruction: %v", err)
	}
	msg := err.Error()
	has := func(what string, pos ptx.Pos, any ...string) {
		t.Helper()
		if !strings.HasPrefix(pos.File, "kernels/") {
			t.Fatalf("%s at %s:%d, outside the kernel library: %v", what, pos.File, pos.Line, err)
		}
		if w := fmt.Sprintf("%s:%d", pos.File, pos.Line); !strings.Contains(msg, w) {
			t.Fatalf("the message does not name the %s's line %s: %v", what, w, err)
		}
		line := srcLine(t, pos)
		for _, a := range any {
			if strings.Contains(line, a) {
				return
			}
		}
		t.Fatalf("the %s is at %s:%d, %q, which holds none of %q", what, pos.File, pos.Line, line, any)
	}
	has("stale read", e.Pos, "k.Load(", "k.Copy(")
	if len(e.Related) != 3 {
		t.Fatalf("related accesses %+v", e.Related)
	}
	st, later, rd := e.Related[0], e.Related[1], e.Related[2]
	has("buffered store", st.Pos, stores...)
	has("later store", later.Pos, flag)
	has("read of the later store", rd.Pos, wait)
	if st.GPU == e.GPU && st.Block == e.Block || later.GPU != st.GPU || later.Block != st.Block || rd.GPU != e.GPU || rd.Block != e.Block {
		t.Fatalf("the accesses are in the wrong places: %+v: %v", e.Related, err)
	}
}

// TestCollectivesAcrossEpochWrap runs every p2p and multimem collective (its first dtype) with
// epochs that cross the u32 wrap: the barriers' targets go 0xffffffff, 0, 1 (their waits
// compare serial numbers, dsl.GeWrap; an unsigned >= passes at once when the target wraps to
// 0 and the race detector or the results catch it), and the Lamport all-reduce's epochs cross
// kernels.LamportEpochWrap from each of the three slots (the host's NextLamportEpoch and the
// kernel's previous slot taken from the slot, not from epoch+2, which wraps), strict and weak.
func TestCollectivesAcrossEpochWrap(t *testing.T) {
	for _, s := range kernels.All() {
		if !strings.HasPrefix(s.Name, "p2p_") && !strings.HasPrefix(s.Name, "mm_") {
			continue
		}
		firsts := []uint32{0xfffffffd, 0xfffffffe, 0xffffffff}
		if strings.HasPrefix(string(s.Family), string(kernels.FamilyP2PAllReduceLamport)) { // and its graph variant
			const w = kernels.LamportEpochWrap
			firsts = []uint32{w - 3, w - 2, w - 1}
		}
		dt := s.DTypes[0]
		for _, first := range firsts {
			for _, c := range []struct {
				gpus, n int
				seed    int64
				weak    bool
			}{{2, 1001, 0, false}, {3, 37, 4, true}} {
				t.Run(fmt.Sprintf("%s/%s/g%d/epoch%#x/weak=%v", s.Name, dt, c.gpus, first, c.weak), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Target: DefaultTarget(s), Size: c.n, Ranks: c.gpus, Seed: c.seed, Weak: c.weak, Epoch: first})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}
