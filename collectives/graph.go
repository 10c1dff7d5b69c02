package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// Collectives inside CUDA graphs. A graph freezes every kernel argument at capture, so the
// default kernels, whose barrier epochs are host arguments advanced after every call, cannot
// be replayed. A Comm made with Options.CaptureSafe runs the kernels' graph variants
// instead (kernels.GraphFamily): each block reads its epoch from a word of the Comm's pads
// or flags and advances it on the device, so direct calls and replays of captured calls
// mix freely on that Comm. docs/collectives.md ("Collectives inside CUDA graphs") has the
// ordering argument.

// graphVariant returns the graph variant of kernel k (k itself when it is one), or an error
// naming the call that has none.
func graphVariant(cl *call, k kernels.ID) (kernels.ID, error) {
	if kernels.IsGraphFamily(k.Family) {
		return k, nil
	}
	fam, ok := kernels.GraphFamily(k.Family)
	if !ok {
		return k, fmt.Errorf("collectives: %s: %s has no graph variant, so it cannot run on a CaptureSafe Comm (all-reduce, reduce-scatter and all-gather of f32, f16, bf16 and s32 can)", cl, k.Family)
	}
	k.Family = fam
	return k, nil
}

// graphPlan is allReducePlan on a CaptureSafe Comm: the same size thresholds, Lamport's
// graph variant (its epoch and clear count kept in state words after its slots, one grid
// for every launch), p2p_allreduce_push's (or push4's, pushFamily) from PushMinBytes, and no staging (a copy per
// call): an in-place all-reduce past Lamport's sizes runs two-shot, which reads and writes
// the same slice, or the push all-reduce.
func (c *Comm) graphPlan(dt dsl.Type, op Op, n int, inPlace bool) (allReducePlan, error) {
	if isFP8(dt) {
		return allReducePlan{}, fmt.Errorf("collectives: AllReduce of %s: the fp8 kernels have no graph variant (CaptureSafe)", dt)
	}
	oneShot := n*dt.Bytes() <= c.thr.oneShot && !inPlace
	var fam kernels.Family
	switch {
	case c.mc && mmReduces(dt, op) && oneShot:
		fam = kernels.FamilyMMAllReduce1Shot
	case c.mc && mmReduces(dt, op):
		fam = kernels.FamilyMMAllReduce2Shot
	case c.mc && n*dt.Bytes() <= c.thr.oneShot:
		fam = kernels.FamilyMMAllReducePush // out of place or not: scratch, no staging
	case !c.o.DisableLamport && dt.IsFloat() && n*dt.Bytes() <= c.thr.lamport:
		fam = kernels.FamilyP2PAllReduceLamport // in place or not
	case oneShot:
		fam = kernels.FamilyP2PAllReduce1Shot
	case !c.mc && c.thr.push > 0 && n*dt.Bytes() >= c.thr.push:
		fam = c.pushFamily(dt, n*dt.Bytes())
	default:
		fam = kernels.FamilyP2PAllReduce2Shot
	}
	return allReducePlan{k: reduction(fam, op, dt)}, nil
}

// Capture records the collectives that record makes on this Comm into a CUDA graph and
// returns it instantiated: x.Launch(stream) then replays every call, the epochs advancing
// on the device. The Comm needs Options.CaptureSafe and Options.Stream (the stream that
// captures and that replays should use). Every rank captures the same calls. The buffers
// and the scratch a captured call uses must stay allocated while the graph is replayed
// (the Comm keeps its own until Close). Calls that allocate scratch, and the first call
// of each kernel (which loads it), do so while capturing; on the GPU that is legal in
// jit's relaxed capture mode, but a warm-up call of each kind before Capture keeps both
// out of the capture.
func (c *Comm) Capture(ctx context.Context, record func() error) (*jit.GraphExec, error) {
	if err := c.begin(ctx, "Capture"); err != nil {
		return nil, err
	}
	if record == nil {
		return nil, errors.New("collectives: Capture: nil record function")
	}
	if !c.o.CaptureSafe {
		return nil, errors.New("collectives: Capture: the Comm is not capture-safe (set Options.CaptureSafe): its kernels take their epochs from host arguments, which a graph would freeze")
	}
	s := c.o.Stream
	if s == nil {
		return nil, errors.New("collectives: Capture: the Comm has no stream (set Options.Stream): the default stream cannot capture")
	}
	if c.inCapture {
		return nil, errors.New("collectives: Capture: called inside another Capture's record function (the Comm's stream is capturing)")
	}
	if err := s.BeginCapture(); err != nil {
		return nil, fmt.Errorf("collectives: Capture: %w", err)
	}
	ended := false
	defer func() {
		if !ended { // record panicked: end the capture, so that later calls run, not record
			c.inCapture = false
			if g, err := s.EndCapture(); err == nil {
				g.Close()
			}
		}
	}()
	c.inCapture = true
	rerr := record()
	c.inCapture, ended = false, true
	g, err := s.EndCapture()
	if rerr != nil {
		if g != nil {
			err = g.Close()
		}
		if !strings.HasPrefix(rerr.Error(), "collectives: Capture: ") { // a nested Capture's says it
			rerr = fmt.Errorf("collectives: Capture: %w", rerr)
		}
		return nil, errors.Join(rerr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("collectives: Capture: %w", err)
	}
	x, err := g.Instantiate()
	if cerr := g.Close(); err == nil && cerr != nil {
		return nil, errors.Join(cerr, x.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("collectives: Capture: %w", err)
	}
	return x, nil
}
