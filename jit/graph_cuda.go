//go:build cuda && cgo

package jit

// #include <cuda.h>
// // kgen_graph_launch makes ctx current and replays exec on stream: one cgo call per replay.
// static CUresult kgen_graph_launch(void *ctx, void *exec, void *stream) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) r = cuGraphLaunch((CUgraphExec)exec, (CUstream)stream);
//   return r;
// }
// static CUresult kgen_begin_capture(void *ctx, void *stream) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   // Relaxed: jit's calls may run on any OS thread, so thread-local or global capture
//   // modes would trip over jit's own bookkeeping calls on other threads.
//   if (r == CUDA_SUCCESS) r = cuStreamBeginCapture_v2((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED);
//   return r;
// }
// // kgen_captured returns the node the last operation on the capturing stream added.
// static CUresult kgen_captured(void *ctx, void *stream, void **node) {
//   CUstreamCaptureStatus st;
//   cuuint64_t id;
//   CUgraph g;
//   const CUgraphNode *deps = 0;
//   size_t n = 0;
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) r = cuStreamGetCaptureInfo_v2((CUstream)stream, &st, &id, &g, &deps, &n);
//   if (r != CUDA_SUCCESS) return r;
//   if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
//   if (n != 1) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
//   *node = deps[0];
//   return CUDA_SUCCESS;
// }
// static CUresult kgen_end_capture(void *ctx, void *stream, void **graph) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) r = cuStreamEndCapture((CUstream)stream, (CUgraph *)graph);
//   return r;
// }
// // kgen_instantiate instantiates graph and uploads it (cuGraphUpload on the legacy default
// // stream), so that the first replay does not pay for the upload.
// static CUresult kgen_instantiate(void *ctx, void *graph, void **exec) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) r = cuGraphInstantiateWithFlags((CUgraphExec *)exec, (CUgraph)graph, 0);
//   if (r == CUDA_SUCCESS) {
//     r = cuGraphUpload((CUgraphExec)*exec, 0);
//     if (r != CUDA_SUCCESS) cuGraphExecDestroy((CUgraphExec)*exec);
//   }
//   return r;
// }
// static CUresult kgen_graph_set_args(void *ctx, void *exec, void *node, void *fn,
//     unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
//     unsigned shared, unsigned long long *args, const int *offs, int n) {
//   void *params[256];
//   if (n > 256) return CUDA_ERROR_INVALID_VALUE;
//   for (int i = 0; i < n; i++) params[i] = &args[offs ? offs[i] : i];
//   CUDA_KERNEL_NODE_PARAMS p = {0};
//   p.func = (CUfunction)fn;
//   p.gridDimX = gx; p.gridDimY = gy; p.gridDimZ = gz;
//   p.blockDimX = bx; p.blockDimY = by; p.blockDimZ = bz;
//   p.sharedMemBytes = shared;
//   p.kernelParams = params;
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) r = cuGraphExecKernelNodeSetParams_v2((CUgraphExec)exec, (CUgraphNode)node, &p);
//   return r;
// }
// static CUresult kgen_graph_destroy(void *g) { return cuGraphDestroy((CUgraph)g); }
// static CUresult kgen_graph_exec_destroy(void *x) { return cuGraphExecDestroy((CUgraphExec)x); }
// static const char *kgen_graph_error_name(CUresult r) {
//   const char *s = 0;
//   if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "unknown CUresult";
//   return s;
// }
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// The GPU's graphs: the driver's stream capture. Node handles come from
// cuStreamGetCaptureInfo right after each captured launch, so SetArgs can address them.

func cuErr(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (CUresult %d)", op, C.GoString(C.kgen_graph_error_name(r)), int(r))
}

func rawStream(s stream) (unsafe.Pointer, error) {
	cs, ok := s.(*cudaStream)
	if !ok || cs == nil {
		return nil, errors.New("not a stream of the GPU backend")
	}
	return cs.raw(), nil
}

func (d *cudaDevice) beginCapture(s stream) error {
	sp, err := rawStream(s)
	if err != nil {
		return err
	}
	return cuErr("cuStreamBeginCapture", C.kgen_begin_capture(d.rawCtx(), sp))
}

func (d *cudaDevice) captured(s stream) (any, error) {
	sp, err := rawStream(s)
	if err != nil {
		return nil, err
	}
	var node unsafe.Pointer
	if err := cuErr("cuStreamGetCaptureInfo", C.kgen_captured(d.rawCtx(), sp, &node)); err != nil {
		return nil, err
	}
	return node, nil
}

func (d *cudaDevice) endCapture(s stream) (graphImpl, error) {
	sp, err := rawStream(s)
	if err != nil {
		return nil, err
	}
	var g unsafe.Pointer
	if err := cuErr("cuStreamEndCapture", C.kgen_end_capture(d.rawCtx(), sp, &g)); err != nil {
		return nil, err
	}
	return &cudaGraph{d: d, g: g}, nil
}

type cudaGraph struct {
	d *cudaDevice
	g unsafe.Pointer // CUgraph
}

func (g *cudaGraph) instantiate() (graphExecImpl, error) {
	var x unsafe.Pointer
	if err := cuErr("cuGraphInstantiate + cuGraphUpload", C.kgen_instantiate(g.d.rawCtx(), g.g, &x)); err != nil {
		return nil, err
	}
	return &cudaGraphExec{d: g.d, x: x}, nil
}

func (g *cudaGraph) destroy() error {
	return g.d.do(func() error { return cuErr("cuGraphDestroy", C.kgen_graph_destroy(g.g)) })
}

type cudaGraphExec struct {
	d *cudaDevice
	x unsafe.Pointer // CUgraphExec
}

func (x *cudaGraphExec) launch(s stream, _ []graphNode) error {
	var sp unsafe.Pointer
	if s != nil {
		sp = s.(*cudaStream).raw()
	}
	return cuErr("cuGraphLaunch", C.kgen_graph_launch(x.d.rawCtx(), x.x, sp))
}

func (x *cudaGraphExec) setArgs(_ int, n *graphNode) error {
	node, _ := n.ref.(unsafe.Pointer)
	fn, ok := n.fn.impl.(*cudaFunc)
	if node == nil || !ok {
		return errors.New("the node has no GPU kernel handle")
	}
	var argp *C.ulonglong
	if len(n.args) > 0 {
		argp = (*C.ulonglong)(unsafe.Pointer(&n.args[0]))
	}
	var offs *C.int
	np := C.int(len(n.args))
	if fn.offs != nil {
		offs, np = (*C.int)(unsafe.Pointer(&fn.offs[0])), C.int(fn.nparams)
	}
	r := C.kgen_graph_set_args(x.d.rawCtx(), x.x, node, *(*unsafe.Pointer)(unsafe.Pointer(&fn.fn)),
		C.uint(n.g.X), C.uint(n.g.Y), C.uint(n.g.Z), C.uint(n.b.X), C.uint(n.b.Y), C.uint(n.b.Z),
		C.uint(n.cfg.SharedMem), argp, offs, np)
	runtime.KeepAlive(n.args)
	runtime.KeepAlive(fn)
	return cuErr("cuGraphExecKernelNodeSetParams", r)
}

func (x *cudaGraphExec) destroy() error {
	return x.d.do(func() error { return cuErr("cuGraphExecDestroy", C.kgen_graph_exec_destroy(x.x)) })
}
