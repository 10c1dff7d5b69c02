//go:build cuda && cgo

package main

// #include <cuda.h>
// #include <stdlib.h>
// #include <string.h>
// #include <time.h>
// typedef struct { double host_ns; float gpu_ms; unsigned count, want; int calls, iters; } kgen_series;
// static double kgen_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
// typedef struct {
//   CUstream s; CUevent e0, e1; CUfunction fn; CUdeviceptr ctr; void *params[1];
//   unsigned want;
// } kgen_env;
// enum { K_LAUNCH, K_COOP, K_EX_COOP, K_OCC, K_GRAPH };
// // kgen_one runs one call of kind k (a graph launch of g for K_GRAPH).
// static CUresult kgen_one(kgen_env *v, int k, CUgraphExec g) {
//   switch (k) {
//   case K_LAUNCH: return cuLaunchKernel(v->fn, 1, 1, 1, 256, 1, 1, 0, v->s, v->params, 0);
//   case K_COOP: return cuLaunchCooperativeKernel(v->fn, 1, 1, 1, 256, 1, 1, 0, v->s, v->params);
//   case K_EX_COOP: {
//     CUlaunchAttribute a; memset(&a, 0, sizeof a);
//     a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE; a.value.cooperative = 1;
//     CUlaunchConfig c; memset(&c, 0, sizeof c);
//     c.gridDimX = c.gridDimY = c.gridDimZ = 1; c.blockDimX = 256; c.blockDimY = c.blockDimZ = 1;
//     c.hStream = v->s; c.attrs = &a; c.numAttrs = 1;
//     return cuLaunchKernelEx(&c, v->fn, v->params, 0);
//   }
//   case K_OCC: { int n; return cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, v->fn, 256, 0); }
//   default: return cuGraphLaunch(g, v->s);
//   }
// }
// // kgen_series_run times iters calls of kind k (each launching calls kernels) and reads the
// // counter back.
// static CUresult kgen_series_run(kgen_env *v, int k, CUgraphExec g, int calls, int iters, kgen_series *out) {
//   CUresult r;
//   if ((r = cuStreamSynchronize(v->s)) || (r = cuEventRecord(v->e0, v->s))) return r;
//   double t0 = kgen_now();
//   for (int i = 0; i < iters; i++) if ((r = kgen_one(v, k, g))) return r;
//   out->host_ns = kgen_now() - t0;
//   if ((r = cuEventRecord(v->e1, v->s)) || (r = cuStreamSynchronize(v->s))) return r;
//   if ((r = cuEventElapsedTime(&out->gpu_ms, v->e0, v->e1))) return r;
//   if (k != K_OCC) v->want += calls * iters;
//   out->want = v->want; out->calls = calls; out->iters = iters;
//   return cuMemcpyDtoH(&out->count, v->ctr, 4);
// }
// // kgen_graph makes an executable graph of calls tick nodes in a chain, cooperative ones if
// // coop, uploaded first if upload.
// static CUresult kgen_graph(kgen_env *v, int calls, int coop, int upload, CUgraph *g, CUgraphExec *x) {
//   CUresult r = cuGraphCreate(g, 0);
//   CUgraphNode prev = 0, node;
//   for (int i = 0; r == CUDA_SUCCESS && i < calls; i++) {
//     CUDA_KERNEL_NODE_PARAMS p; memset(&p, 0, sizeof p);
//     p.func = v->fn; p.gridDimX = p.gridDimY = p.gridDimZ = 1; p.blockDimX = 256; p.blockDimY = p.blockDimZ = 1;
//     p.kernelParams = v->params;
//     r = cuGraphAddKernelNode(&node, *g, prev ? &prev : 0, prev ? 1 : 0, &p);
//     if (r == CUDA_SUCCESS && coop) {
//       CUkernelNodeAttrValue a; memset(&a, 0, sizeof a); a.cooperative = 1;
//       r = cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &a);
//     }
//     prev = node;
//   }
//   if (r == CUDA_SUCCESS) r = cuGraphInstantiateWithFlags(x, *g, 0);
//   if (r == CUDA_SUCCESS && upload) r = cuGraphUpload(*x, v->s);
//   return r;
// }
// static const char *kgen_floor_err(CUresult r) { const char *s = 0; cuGetErrorName(r, &s); return s ? s : "unknown CUresult"; }
// // kgen_floors runs every series into out (at most 16) and returns their count, or a
// // negative step number and the CUresult in *res.
// static int kgen_floors(int ordinal, const char *ptx, int n, kgen_series *out, CUresult *res) {
//   kgen_env v; memset(&v, 0, sizeof v);
//   CUdevice dev; CUcontext ctx; CUmodule mod;
//   int step = 0, no = 0;
//   CUresult r;
//   #define TRY(x) do { step++; if ((r = (x)) != CUDA_SUCCESS) { *res = r; return -step; } } while (0)
//   TRY(cuDeviceGet(&dev, ordinal));
//   TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
//   TRY(cuCtxSetCurrent(ctx));
//   TRY(cuModuleLoadData(&mod, ptx));
//   TRY(cuModuleGetFunction(&v.fn, mod, "tick"));
//   TRY(cuMemAlloc(&v.ctr, 4));
//   TRY(cuMemsetD32(v.ctr, 0, 1));
//   TRY(cuStreamCreate(&v.s, 0));
//   TRY(cuEventCreate(&v.e0, 0));
//   TRY(cuEventCreate(&v.e1, 0));
//   v.params[0] = &v.ctr;
//   int kinds[] = {K_LAUNCH, K_COOP, K_EX_COOP, K_OCC};
//   for (int i = 0; i < 4; i++) {
//     TRY(kgen_series_run(&v, kinds[i], 0, 1, 1, &out[no])); // warm-up, not reported
//     TRY(kgen_series_run(&v, kinds[i], 0, 1, n, &out[no++]));
//   }
//   // graphs: {calls, coop, upload}
//   int gs[][3] = {{1, 0, 0}, {1, 0, 1}, {1, 1, 1}, {8, 0, 1}, {8, 1, 1}};
//   for (int i = 0; i < 5; i++) {
//     CUgraph g; CUgraphExec x;
//     TRY(kgen_graph(&v, gs[i][0], gs[i][1], gs[i][2], &g, &x));
//     TRY(kgen_series_run(&v, K_GRAPH, x, gs[i][0], 1, &out[no++])); // first launch
//     TRY(kgen_series_run(&v, K_GRAPH, x, gs[i][0], n, &out[no++]));
//     TRY(cuGraphExecDestroy(x));
//     TRY(cuGraphDestroy(g));
//   }
//   cuEventDestroy(v.e0); cuEventDestroy(v.e1); cuStreamDestroy(v.s); cuMemFree(v.ctr); cuModuleUnload(mod);
//   cuDevicePrimaryCtxRelease(dev);
//   return no;
// }
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// floors measures the driver's own cost of each launch kind, from C (no Go, no jit).
func floors(ordinal int, ptxText []byte, n int) error {
	src := C.CString(string(ptxText))
	defer C.free(unsafe.Pointer(src))
	var out [16]C.kgen_series
	var res C.CUresult
	got := int(C.kgen_floors(C.int(ordinal), src, C.int(n), &out[0], &res))
	if got < 0 {
		return fmt.Errorf("driver floors: step %d failed: %s (CUresult %d)", -got, C.GoString(C.kgen_floor_err(res)), int(res))
	}
	names := []string{"C cuLaunchKernel", "C cuLaunchCooperativeKernel", "C cuLaunchKernelEx COOPERATIVE attr",
		"C cuOccupancyMaxActiveBlocksPerMultiprocessor (no launch)"}
	for _, g := range []string{"1 plain node, not uploaded", "1 plain node, uploaded", "1 cooperative node, uploaded",
		"8 plain nodes, uploaded", "8 cooperative nodes, uploaded"} {
		names = append(names, "C cuGraphLaunch "+g+", first", "C cuGraphLaunch "+g)
	}
	if got != len(names) {
		return fmt.Errorf("driver floors: %d series, want %d", got, len(names))
	}
	for i := 0; i < got; i++ {
		o := out[i]
		if o.count != o.want {
			return fmt.Errorf("%s: counter %d, want %d", names[i], uint32(o.count), uint32(o.want))
		}
		series{name: names[i], calls: max(int(o.calls), 1), iterations: int(o.iters),
			host: time.Duration(float64(o.host_ns)), gpu: time.Duration(float64(o.gpu_ms) * 1e6)}.print()
	}
	return nil
}
