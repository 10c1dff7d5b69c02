package jit

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// CUDA graphs: the launches made on a stream between BeginCapture and EndCapture become a
// Graph; Instantiate turns it into a GraphExec that Launch replays with one call. On the GPU
// this is the driver's stream capture (cuStreamBeginCapture ... cuGraphLaunch); on the
// emulator the front end records the same sequence and a replay runs it launch by launch.

// Graph is a captured sequence of kernel launches (and, on the GPU, the copies and event
// records made on the stream while it was capturing).
type Graph struct {
	d      *Device
	impl   graphImpl
	nodes  []graphNode
	mu     sync.Mutex
	closed bool
}

// GraphExec is an instantiated Graph: Launch replays it on a stream; SetArgs changes the
// arguments of one of its kernel launches for later replays.
type GraphExec struct {
	g      *Graph
	impl   graphExecImpl
	mu     sync.Mutex
	nodes  []graphNode // this executable's launches, with their current arguments
	closed bool
}

// GraphKernel describes one captured kernel launch (Graph.Kernels).
type GraphKernel struct {
	Name        string
	Grid, Block Dim3
	SharedMem   int
}

// graphNode is one captured kernel launch.
type graphNode struct {
	fn   *Function
	cfg  LaunchConfig // as launched, without the stream
	g, b Dim3         // normalised
	args []uint64
	ref  any // the backend's node handle (GPU: CUgraphNode); nil on the emulator
}

// capture is a stream's capture in progress.
type capture struct {
	mu    sync.Mutex
	nodes []graphNode
	err   error // the first failure while capturing; EndCapture returns it
}

// The backend side of graphs (both backends implement it).
type graphDevice interface {
	beginCapture(s stream) error
	// captured returns the backend's handle of the launch just captured on s.
	captured(s stream) (any, error)
	endCapture(s stream) (graphImpl, error)
}

type graphImpl interface {
	instantiate() (graphExecImpl, error)
	destroy() error
}

type graphExecImpl interface {
	// launch replays the graph on s; nodes are the executable's launches (the emulator runs
	// them; the GPU has them already).
	launch(s stream, nodes []graphNode) error
	// setArgs changes node i's arguments to n.args.
	setArgs(i int, n *graphNode) error
	destroy() error
}

// capturing returns s's capture in progress, or nil.
func (s *Stream) capturing() *capture {
	if s == nil {
		return nil
	}
	return s.capt.Load()
}

// BeginCapture starts capturing the work enqueued on s into a graph: kernel launches whose
// LaunchConfig.Stream is s are recorded (on the emulator they do not run) until EndCapture.
// On the GPU, copies and event records on s are captured too; the emulator captures kernel
// launches only and refuses other work on a capturing stream. The default (nil) stream
// cannot capture.
func (s *Stream) BeginCapture() error {
	if s == nil {
		return errors.New("jit: BeginCapture: the default stream cannot be captured; use a stream from Device.NewStream")
	}
	if _, err := s.use("BeginCapture"); err != nil {
		return err
	}
	gd, ok := s.d.impl.(graphDevice)
	if !ok {
		return fmt.Errorf("jit: BeginCapture: the %s backend has no graphs", s.d.info.Backend)
	}
	c := &capture{}
	if !s.capt.CompareAndSwap(nil, c) {
		return errors.New("jit: BeginCapture: the stream is already capturing")
	}
	if err := gd.beginCapture(s.impl); err != nil {
		s.capt.Store(nil)
		return fmt.Errorf("jit: BeginCapture: %w", err)
	}
	return nil
}

// EndCapture ends the capture BeginCapture started and returns the captured graph. A launch
// that failed while capturing makes EndCapture fail with that launch's error.
func (s *Stream) EndCapture() (*Graph, error) {
	c := s.capturing()
	if c == nil {
		return nil, errors.New("jit: EndCapture: the stream is not capturing (call BeginCapture first)")
	}
	if _, err := s.use("EndCapture"); err != nil {
		s.capt.Store(nil)
		return nil, err
	}
	g, err := s.d.impl.(graphDevice).endCapture(s.impl)
	s.capt.Store(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		if g != nil {
			g.destroy()
		}
		return nil, fmt.Errorf("jit: EndCapture: a launch failed while capturing: %w", c.err)
	}
	if err != nil {
		return nil, fmt.Errorf("jit: EndCapture: %w", err)
	}
	return &Graph{d: s.d, impl: g, nodes: c.nodes}, nil
}

// record adds a launch to the capture; run says whether the backend must also see the
// launch (the GPU, whose driver captures it) or not (the emulator).
func (c *capture) record(f *Function, cfg LaunchConfig, g, b Dim3, slots []uint64, launch func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := cfg.Stream
	cfg.Stream = nil
	n := graphNode{fn: f, cfg: cfg, g: g, b: b, args: append([]uint64(nil), slots...)}
	err := launch()
	if err == nil {
		n.ref, err = s.d.impl.(graphDevice).captured(s.impl)
	}
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("launch %d (%s): %w", len(c.nodes), errName(f.sig.Name), err)
		}
		return err
	}
	c.nodes = append(c.nodes, n)
	return nil
}

// Kernels lists the graph's kernel launches in capture order; their indices are the node
// numbers GraphExec.SetArgs takes.
func (g *Graph) Kernels() []GraphKernel {
	if g == nil {
		return nil
	}
	out := make([]GraphKernel, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = GraphKernel{Name: n.fn.sig.Name, Grid: n.g, Block: n.b, SharedMem: n.cfg.SharedMem}
	}
	return out
}

// Instantiate makes an executable graph. A Graph may be instantiated several times; each
// GraphExec keeps its own arguments.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if g == nil {
		return nil, errors.New("jit: Instantiate of a nil *Graph")
	}
	if g.d == nil || g.impl == nil {
		return nil, errors.New("jit: Instantiate of a zero Graph, not captured (Stream.EndCapture makes one)")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("jit: Instantiate: the graph was closed")
	}
	x, err := g.impl.instantiate()
	if err != nil {
		return nil, fmt.Errorf("jit: Instantiate: %w", err)
	}
	nodes := make([]graphNode, len(g.nodes))
	for i, n := range g.nodes {
		nodes[i] = n
		nodes[i].args = append([]uint64(nil), n.args...)
	}
	return &GraphExec{g: g, impl: x, nodes: nodes}, nil
}

// Close destroys the graph (its GraphExecs stay usable).
func (g *Graph) Close() error {
	if g == nil {
		return errors.New("jit: Close of a nil *Graph")
	}
	if g.d == nil || g.impl == nil {
		return errors.New("jit: Close of a zero Graph, not captured (Stream.EndCapture makes one)")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.impl.destroy()
}

// Launch replays the graph on s (nil: the default stream). Like a kernel launch it does not
// wait (on the emulator the graph's launches are enqueued on s).
func (x *GraphExec) Launch(s *Stream) error {
	if x == nil {
		return errors.New("jit: Launch of a nil *GraphExec")
	}
	if x.g == nil || x.impl == nil {
		return errors.New("jit: Launch of a zero GraphExec, not instantiated (Graph.Instantiate makes one)")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return errors.New("jit: GraphExec.Launch: the executable graph was closed")
	}
	if s.capturing() != nil {
		return errors.New("jit: GraphExec.Launch: the stream is capturing; graphs inside graphs are not supported")
	}
	for i := range x.nodes {
		if m := x.nodes[i].fn.m; m.isClosed() {
			return fmt.Errorf("jit: GraphExec.Launch: launch %d (%s): its module was closed", i, errName(x.nodes[i].fn.sig.Name))
		}
	}
	st, err := s.useOn("GraphExec.Launch", x.g.d)
	if err != nil {
		return err
	}
	if err := x.impl.launch(st, x.nodes); err != nil {
		return fmt.Errorf("jit: GraphExec.Launch: %w", err)
	}
	x.g.d.noteLaunch()
	return nil
}

// SetArgs changes the arguments of the graph's i-th kernel launch (Graph.Kernels' order)
// for later replays, checked as Function.Launch checks them.
func (x *GraphExec) SetArgs(i int, args ...any) error {
	f, err := x.node(i)
	if err != nil {
		return err
	}
	slots, err := encodeArgs(f.sig, args, f.m.d, f.info)
	if err != nil {
		return fmt.Errorf("jit: SetArgs of launch %d: %w", i, err)
	}
	return x.set(i, slots)
}

// SetLaunchArgs is SetArgs with a struct of the kernel's parameters, checked as
// Function.LaunchArgs checks it.
func (x *GraphExec) SetLaunchArgs(i int, args any) error {
	f, err := x.node(i)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() {
		return fmt.Errorf("jit: SetLaunchArgs of launch %d (%s): no arguments (nil)", i, errName(f.sig.Name))
	}
	slots, err := f.encodeStruct(v)
	if err != nil {
		return fmt.Errorf("jit: SetLaunchArgs of launch %d: %w", i, err)
	}
	return x.set(i, slots)
}

func (x *GraphExec) node(i int) (*Function, error) {
	if x == nil {
		return nil, errors.New("jit: SetArgs of a nil *GraphExec")
	}
	if x.g == nil || x.impl == nil {
		return nil, errors.New("jit: SetArgs of a zero GraphExec, not instantiated (Graph.Instantiate makes one)")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if i < 0 || i >= len(x.nodes) {
		return nil, fmt.Errorf("jit: launch %d of a graph of %d kernel launches", i, len(x.nodes))
	}
	return x.nodes[i].fn, nil
}

func (x *GraphExec) set(i int, slots []uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return errors.New("jit: SetArgs: the executable graph was closed")
	}
	n := x.nodes[i]
	n.args = slots
	if err := x.impl.setArgs(i, &n); err != nil {
		return fmt.Errorf("jit: SetArgs of launch %d (%s): %w", i, errName(n.fn.sig.Name), err)
	}
	x.nodes[i] = n
	return nil
}

// Close destroys the executable graph.
func (x *GraphExec) Close() error {
	if x == nil {
		return errors.New("jit: Close of a nil *GraphExec")
	}
	if x.g == nil || x.impl == nil {
		return errors.New("jit: Close of a zero GraphExec, not instantiated (Graph.Instantiate makes one)")
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	return x.impl.destroy()
}

// The emulator's graphs: the front end's record of the launches, replayed in order.

type emuGraph struct{}

type emuGraphExec struct{}

func (emuGraph) instantiate() (graphExecImpl, error) { return emuGraphExec{}, nil }
func (emuGraph) destroy() error                      { return nil }

func (emuGraphExec) launch(s stream, nodes []graphNode) error {
	for i := range nodes {
		n := &nodes[i]
		if err := n.fn.dispatch(n.g, n.b, s, n.args, &n.cfg); err != nil {
			return fmt.Errorf("launch %d (%s): %w", i, errName(n.fn.sig.Name), err)
		}
	}
	return nil
}

func (emuGraphExec) setArgs(int, *graphNode) error { return nil }
func (emuGraphExec) destroy() error                { return nil }

func (d *emuDevice) beginCapture(s stream) error {
	s.(*emuStream).capturing.Store(true)
	return nil
}

func (d *emuDevice) captured(stream) (any, error) { return nil, nil }

func (d *emuDevice) endCapture(s stream) (graphImpl, error) {
	s.(*emuStream).capturing.Store(false)
	return emuGraph{}, nil
}

// emuRefuseCaptured says why the emulator cannot enqueue op on s while it captures.
func emuRefuseCaptured(s stream, op string) error {
	if es, ok := s.(*emuStream); ok && es.capturing.Load() {
		return fmt.Errorf("emulator: %s on a capturing stream: the emulator captures kernel launches only", op)
	}
	return nil
}

// isClosed reports whether the module was closed.
func (m *Module) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
