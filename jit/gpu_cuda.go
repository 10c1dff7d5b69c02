//go:build cuda && cgo

package jit

// #include <cuda.h>
// #include <stdint.h>
// #include <stdlib.h>
// #include <string.h>
// static CUresult kgen_set_max_dyn_smem(void *fn, int n) {
//   return cuFuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, n);
// }
// static CUresult kgen_param_info(void *fn, size_t i, size_t *off, size_t *size) {
//   return cuFuncGetParamInfo((CUfunction)fn, i, off, size);
// }
// // kgen_launch makes ctx current on this thread and launches fn with its n parameters in
// // the argument words at args (parameter i at word offs[i], or word i when offs is NULL; a
// // byte array wider than 8 bytes fills consecutive words): one cgo call per launch.
// static CUresult kgen_launch(void *ctx, void *fn, unsigned gx, unsigned gy, unsigned gz,
//     unsigned bx, unsigned by, unsigned bz, unsigned shared, void *stream,
//     unsigned long long *args, const int *offs, int n) {
//   void *small[64], **params = small;
//   if (n > 64 && !(params = malloc(n * sizeof(void *)))) return CUDA_ERROR_OUT_OF_MEMORY;
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) {
//     for (int i = 0; i < n; i++) params[i] = &args[offs ? offs[i] : i];
//     r = cuLaunchKernel((CUfunction)fn, gx, gy, gz, bx, by, bz, shared, (CUstream)stream, params, 0);
//   }
//   if (params != small) free(params);
//   return r;
// }
// // kgen_launch_coop is kgen_launch through cuLaunchCooperativeKernel: every block of the
// // grid is resident at once (the driver refuses a grid that does not fit).
// static CUresult kgen_launch_coop(void *ctx, void *fn, unsigned gx, unsigned gy, unsigned gz,
//     unsigned bx, unsigned by, unsigned bz, unsigned shared, void *stream,
//     unsigned long long *args, const int *offs, int n) {
//   void *small[64], **params = small;
//   if (n > 64 && !(params = malloc(n * sizeof(void *)))) return CUDA_ERROR_OUT_OF_MEMORY;
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS) {
//     for (int i = 0; i < n; i++) params[i] = &args[offs ? offs[i] : i];
//     r = cuLaunchCooperativeKernel((CUfunction)fn, gx, gy, gz, bx, by, bz, shared, (CUstream)stream, params);
//   }
//   if (params != small) free(params);
//   return r;
// }
// // kgen_launch_ex is kgen_launch through cuLaunchKernelEx with a cluster shape (cx > 0) and
// // programmatic stream serialization (pdl != 0); nonportable allows clusters beyond 8.
// static CUresult kgen_launch_ex(void *ctx, void *fn, unsigned gx, unsigned gy, unsigned gz,
//     unsigned bx, unsigned by, unsigned bz, unsigned shared, void *stream,
//     unsigned long long *args, const int *offs, int n,
//     unsigned cx, unsigned cy, unsigned cz, int nonportable, int pdl) {
//   void *small[64], **params = small;
//   if (n > 64 && !(params = malloc(n * sizeof(void *)))) return CUDA_ERROR_OUT_OF_MEMORY;
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r == CUDA_SUCCESS && nonportable)
//     r = cuFuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
//   if (r == CUDA_SUCCESS) {
//     for (int i = 0; i < n; i++) params[i] = &args[offs ? offs[i] : i];
//     CUlaunchAttribute attrs[2];
//     memset(attrs, 0, sizeof attrs);
//     unsigned na = 0;
//     if (cx > 0) {
//       attrs[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
//       attrs[na].value.clusterDim.x = cx;
//       attrs[na].value.clusterDim.y = cy;
//       attrs[na].value.clusterDim.z = cz;
//       na++;
//     }
//     if (pdl) {
//       attrs[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
//       attrs[na].value.programmaticStreamSerializationAllowed = 1;
//       na++;
//     }
//     CUlaunchConfig cfg;
//     memset(&cfg, 0, sizeof cfg);
//     cfg.gridDimX = gx; cfg.gridDimY = gy; cfg.gridDimZ = gz;
//     cfg.blockDimX = bx; cfg.blockDimY = by; cfg.blockDimZ = bz;
//     cfg.sharedMemBytes = shared;
//     cfg.hStream = (CUstream)stream;
//     cfg.attrs = attrs;
//     cfg.numAttrs = na;
//     r = cuLaunchKernelEx(&cfg, (CUfunction)fn, params, 0);
//   }
//   if (params != small) free(params);
//   return r;
// }
// // kgen_tmap_encode calls cuTensorMapEncodeTiled into a 64-byte-aligned CUtensorMap and
// // copies its 128 bytes to out.
// static CUresult kgen_tmap_encode(void *ctx, unsigned char *out, int dtype, unsigned rank,
//     unsigned long long addr, const unsigned long long *dims, const unsigned long long *strides,
//     const unsigned *box, const unsigned *estrides, int interleave, int swizzle, int l2, int oob) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r != CUDA_SUCCESS) return r;
//   CUtensorMap m;
//   r = cuTensorMapEncodeTiled(&m, (CUtensorMapDataType)dtype, rank, (void *)(uintptr_t)addr,
//       (const cuuint64_t *)dims, (const cuuint64_t *)strides, (const cuuint32_t *)box,
//       (const cuuint32_t *)estrides, (CUtensorMapInterleave)interleave, (CUtensorMapSwizzle)swizzle,
//       (CUtensorMapL2promotion)l2, (CUtensorMapFloatOOBfill)oob);
//   if (r == CUDA_SUCCESS) memcpy(out, &m, sizeof m);
//   return r;
// }
// // kgen_wait_value32 enqueues cuStreamWaitValue32 (the _v2 entry point) on stream; NOR
// // first checks CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR (*nor = 0 when off).
// static CUresult kgen_wait_value32(void *ctx, void *stream, unsigned long long addr,
//     unsigned value, unsigned flags, int *nor) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r != CUDA_SUCCESS) return r;
//   *nor = 1;
//   if ((flags & 3) == CU_STREAM_WAIT_VALUE_NOR) {
//     CUdevice dev;
//     if ((r = cuCtxGetDevice(&dev)) != CUDA_SUCCESS) return r;
//     if ((r = cuDeviceGetAttribute(nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev)) != CUDA_SUCCESS) return r;
//     if (!*nor) return CUDA_ERROR_NOT_SUPPORTED;
//   }
//   return cuStreamWaitValue32((CUstream)stream, (CUdeviceptr)addr, value, flags);
// }
// static CUresult kgen_write_value32(void *ctx, void *stream, unsigned long long addr, unsigned value) {
//   CUresult r = cuCtxSetCurrent((CUcontext)ctx);
//   if (r != CUDA_SUCCESS) return r;
//   return cuStreamWriteValue32((CUstream)stream, (CUdeviceptr)addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
// }
// static CUresult kgen_occupancy(void *fn, int block, size_t shared, int *n) {
//   return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, (CUfunction)fn, block, shared);
// }
// static const char *kgen_error_name(CUresult r) {
//   const char *s = 0;
//   if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "unknown CUresult";
//   return s;
// }
import "C"

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/kgen-dev/kgen/jit/internal/cudrv"
	"github.com/kgen-dev/kgen/ptx"
	cu "gorgonia.org/cu"
)

// The GPU backend: gorgonia.org/cu over the CUDA driver that cudrv loads at run time. Every
// call runs on a locked OS thread with the device's primary context current (the context
// NVSHMEM, the CUDA runtime and NCCL share).

type cudaDevice struct {
	dev cu.Device
	ctx cu.CUContext
	inf Info
	mu  sync.Mutex
}

func openGPU(ordinal int) (device, error) {
	if err := cudrv.Err(); err != nil {
		return nil, fmt.Errorf("jit: %w", err)
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("jit: cuDeviceGetCount: %v", err)
	}
	if ordinal >= n {
		return nil, fmt.Errorf("jit: no GPU %d: %d visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("jit: cuDeviceGet(%d): %v", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("jit: GPU %d: retaining its primary context: %v", ordinal, err)
	}
	d := &cudaDevice{dev: dev, ctx: ctx}
	attrs, err := dev.Attributes(cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor, cu.MultiprocessorCount)
	if err != nil {
		return nil, fmt.Errorf("jit: GPU %d: attributes: %v", ordinal, err)
	}
	name, _ := dev.Name()
	mem, _ := dev.TotalMem()
	sm := attrs[0]*10 + attrs[1]
	d.inf = Info{Backend: GPU, Ordinal: ordinal, Name: name, Arch: fmt.Sprintf("sm_%d", sm), SM: sm,
		DriverVersion: cu.Version(), TotalMem: mem, Multiproc: attrs[2]}
	return d, nil
}

// do runs f on a locked OS thread with the device's context current.
func (d *cudaDevice) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("cuCtxSetCurrent: %v", err)
	}
	return f()
}

func (d *cudaDevice) info() Info { return d.inf }

// rawCtx returns the device's context as C sees it.
func (d *cudaDevice) rawCtx() unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&d.ctx)) }

func (d *cudaDevice) load(req *loadRequest, cache *Cache) (module, LoadStats, error) {
	var st LoadStats
	key, err := cacheKey(req.ptx, req.devlib, d.inf.Arch, d.inf.DriverVersion)
	if err != nil {
		return nil, st, err
	}
	px, err := ptxasFromEnv()
	if err != nil {
		return nil, st, err
	}
	if px != nil {
		key.Compiler = px.version
	}
	mode, err := jitModeFromEnv()
	if err != nil {
		return nil, st, err
	}
	if mode == jitWhole && req.devlib == nil && px == nil {
		return d.loadWhole(req)
	}
	// Without a device library, auto falls back to a whole-program compile when the
	// relocatable one serialized wgmma instructions (remembered in the cache, under keys of
	// their own: a link-mode load never finds that entry).
	fallback := mode == jitAuto && req.devlib == nil && px == nil
	if fallback {
		key.Compiler = autoCompiler
	}
	if cache.Enabled() {
		st.Key = key.String()
	}
	var linkTime time.Duration
	img, hit, err := cachedLink(cache, key, func() ([]byte, error) {
		t0 := time.Now()
		b, log, err := d.link(req, px, fallback)
		linkTime = time.Since(t0)
		if err == nil && fallback && serializedWGMMA(log, linkInfoLog) {
			return wholeProgramEntry, nil
		}
		return b, err
	})
	if err != nil {
		return nil, st, err
	}
	if bytes.Equal(img, wholeProgramEntry) {
		if !fallback {
			return nil, st, fmt.Errorf("jit: module %s: the cache entry %s says to compile a whole program, which %s=link, %s or a device library rules out; clear the cache (%s)", errName(req.name), key, JITModeEnv, PtxasEnv, DefaultCacheDir())
		}
		w, wst, err := d.loadWhole(req)
		wst.CacheHit, wst.Link, wst.Key = hit, linkTime, st.Key
		return w, wst, err
	}
	st.CacheHit, st.Link, st.CubinLen = hit, linkTime, len(img)
	t0 := time.Now()
	var mod cu.Module
	err = d.do(func() error {
		var e error
		mod, e = cu.LoadData(string(img))
		return e
	})
	st.Load = time.Since(t0)
	if err != nil {
		return nil, st, fmt.Errorf("jit: module %s: cuModuleLoadData of a %d-byte cubin: %v", errName(req.name), len(img), err)
	}
	return &cudaModule{d: d, mod: mod, src: req.mod}, st, nil
}

// loadWhole has the driver compile req's PTX as a whole program (cuModuleLoadDataEx): not
// cached by kgen (the driver keeps its own compute cache); Stats().Load includes the compile.
func (d *cudaDevice) loadWhole(req *loadRequest) (module, LoadStats, error) {
	var st LoadStats
	errLog := make([]byte, 32<<10)
	t0 := time.Now()
	var mod cu.Module
	err := d.do(func() error {
		var e error
		mod, e = cu.LoadDataEx(string(req.ptx)+"\x00", &cu.JITErrorLogBuffer{Buffer: errLog})
		return e
	})
	st.Load = time.Since(t0)
	if err != nil {
		if log := cstr(errLog); log != "" {
			return nil, st, fmt.Errorf("jit: module %s: the driver's compile for %s (cuModuleLoadDataEx): %v:\n%s", errName(req.name), d.inf.Arch, err, log)
		}
		return nil, st, fmt.Errorf("jit: module %s: the driver's compile for %s (cuModuleLoadDataEx): %v", errName(req.name), d.inf.Arch, err)
	}
	return &cudaModule{d: d, mod: mod, src: req.mod}, st, nil
}

// linkInfoLog is the size of the linker's info log buffer.
const linkInfoLog = 64 << 10

// link runs cuLinkCreate -> AddData(kernel PTX) [-> AddData(devlib PTX) -> AddFile(archive,
// CU_JIT_INPUT_LIBRARY)] -> cuLinkComplete and returns the cubin. With px the kernel's PTX is
// compiled by that ptxas: its cubin is the result, or (with a device library) goes to the
// linker in the PTX's place.
func (d *cudaDevice) link(req *loadRequest, px *ptxasCompiler, verbose bool) (cubin []byte, infoLog string, err error) {
	arch := d.inf.Arch
	if req.mod != nil && req.mod.Target != "" {
		arch = string(req.mod.Target)
	}
	var kernelCubin []byte
	if px != nil {
		b, err := px.compile(req.name, req.ptx, arch, req.devlib != nil)
		if err != nil {
			return nil, "", err
		}
		if req.devlib == nil {
			return b, "", nil
		}
		kernelCubin = b
	}
	var out []byte
	errLog := make([]byte, 32<<10)
	info := make([]byte, linkInfoLog)
	err = d.do(func() error {
		lk, err := cu.NewLink(&cu.JITErrorLogBuffer{Buffer: errLog}, &cu.JITInfoLogBuffer{Buffer: info},
			&cu.JITLogVerbose{Enabled: verbose})
		if err != nil {
			return fmt.Errorf("cuLinkCreate: %v", err)
		}
		defer lk.Destroy()
		if kernelCubin != nil {
			if err := lk.AddData(cu.JITInputCUBIN, string(kernelCubin), req.name+".cubin"); err != nil {
				return fmt.Errorf("cuLinkAddData(kernel cubin from %s): %v", px.path, err)
			}
		} else if err := lk.AddData(cu.JITInputPTX, string(req.ptx)+"\x00", req.name+".ptx"); err != nil {
			return fmt.Errorf("cuLinkAddData(kernel PTX): %v", err)
		}
		if req.devlib != nil {
			if len(req.devlib.PTX) > 0 {
				if err := lk.AddData(cu.JITInputPTX, string(req.devlib.PTX)+"\x00", "nvshmem_devlib.ptx"); err != nil {
					return fmt.Errorf("cuLinkAddData(NVSHMEM device-library PTX): %v", err)
				}
			}
			for i, obj := range req.devlib.Objects {
				if len(obj) == 0 {
					return fmt.Errorf("NVSHMEM device object %d is empty", i)
				}
				// A relocatable cubin (ptxas -c) is CU_JIT_INPUT_CUBIN; CU_JIT_INPUT_OBJECT means a
				// host object with embedded device code (the driver answers InvalidImage).
				if err := lk.AddData(cu.JITInputCUBIN, string(obj), fmt.Sprintf("nvshmem_devlib_%d.cubin", i)); err != nil {
					return fmt.Errorf("cuLinkAddData(NVSHMEM device object %d, CU_JIT_INPUT_CUBIN): %v", i, err)
				}
			}
			if req.devlib.Archive != "" {
				if err := lk.AddFile(cu.JITInputLibrary, req.devlib.Archive); err != nil {
					return fmt.Errorf("cuLinkAddFile(%s, CU_JIT_INPUT_LIBRARY): %v", req.devlib.Archive, err)
				}
			}
		}
		img, err := lk.Complete()
		if err != nil {
			return fmt.Errorf("cuLinkComplete: %v", err)
		}
		out = []byte(img)
		return nil
	})
	if err != nil {
		log := cstr(errLog)
		if log == "" {
			log = cstr(info)
		}
		if log != "" {
			return nil, "", fmt.Errorf("jit: linking module %s for %s: %v:\n%s", errName(req.name), d.inf.Arch, err, log)
		}
		return nil, "", fmt.Errorf("jit: linking module %s for %s: %v", errName(req.name), d.inf.Arch, err)
	}
	return out, cstr(info), nil
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.TrimSpace(b))
}

func (d *cudaDevice) alloc(n int64) (DevicePtr, error) {
	var p cu.DevicePtr
	err := d.do(func() error {
		var e error
		p, e = cu.MemAlloc(n)
		return e
	})
	return DevicePtr(p), err
}

func (d *cudaDevice) free(p DevicePtr) error {
	return d.do(func() error { return cu.MemFree(cu.DevicePtr(p)) })
}

func cuStream(s stream) cu.Stream {
	if s == nil {
		return cu.Stream{}
	}
	return s.(*cudaStream).s
}

func (d *cudaDevice) copyHtoD(dst DevicePtr, src []byte, s stream) error {
	if len(src) == 0 {
		return nil
	}
	return d.do(func() error {
		if s == nil {
			return wrap("cuMemcpyHtoD", cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src))))
		}
		return wrap("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), cuStream(s)))
	})
}

func (d *cudaDevice) copyDtoH(dst []byte, src DevicePtr, s stream) error {
	if len(dst) == 0 {
		return nil
	}
	return d.do(func() error {
		if s == nil {
			return wrap("cuMemcpyDtoH", cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst))))
		}
		return wrap("cuMemcpyDtoHAsync", cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), cuStream(s)))
	})
}

func (d *cudaDevice) copyDtoD(dst, src DevicePtr, n int64, s stream) error {
	if n == 0 {
		return nil
	}
	return d.do(func() error {
		if s == nil {
			return wrap("cuMemcpyDtoD", cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), n))
		}
		return wrap("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), n, cuStream(s)))
	})
}

func wrap(op string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %v", op, err)
	}
	return nil
}

func (d *cudaDevice) newStream() (stream, error) {
	var s cu.Stream
	err := d.do(func() error {
		var e error
		s, e = cu.MakeStream(cu.DefaultStream)
		return e
	})
	if err != nil {
		return nil, fmt.Errorf("jit: cuStreamCreate: %v", err)
	}
	return &cudaStream{d: d, s: s}, nil
}

func (d *cudaDevice) newEvent() (event, error) {
	var e cu.Event
	err := d.do(func() error {
		var err error
		e, err = cu.MakeEvent(cu.DefaultEvent)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jit: cuEventCreate: %v", err)
	}
	return &cudaEvent{d: d, e: e}, nil
}

func (d *cudaDevice) synchronize() error {
	return d.do(func() error { return wrap("cuCtxSynchronize", cu.Synchronize()) })
}

func (d *cudaDevice) close() error {
	return wrap("cuDevicePrimaryCtxRelease", d.dev.ReleasePrimaryCtx())
}

type cudaModule struct {
	d   *cudaDevice
	mod cu.Module
	src *ptx.Module
}

func (m *cudaModule) raw() unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m.mod)) }

func (m *cudaModule) function(name string) (function, error) {
	var fn cu.Function
	err := m.d.do(func() error {
		var e error
		fn, e = m.mod.Function(name)
		return e
	})
	if err != nil {
		return nil, fmt.Errorf("jit: cuModuleGetFunction(%s): %v", name, err)
	}
	if err := m.checkParams(name, fn); err != nil {
		return nil, err
	}
	var sig *ptx.Func
	for _, f := range m.src.Funcs {
		if f.Entry && f.Name == name {
			sig = f
		}
	}
	return newCudaFunc(m.d, fn, sig), nil
}

// checkParams compares the loaded kernel's parameters (cuFuncGetParamInfo, driver 12.4+)
// with the ptx.Module's, so a PTX text that does not match the signature it came with is
// caught before a launch passes wrong arguments. Drivers without the call skip the check.
func (m *cudaModule) checkParams(name string, fn cu.Function) error {
	var sig *ptx.Func
	for _, f := range m.src.Funcs {
		if f.Entry && f.Name == name {
			sig = f
		}
	}
	if sig == nil {
		return nil
	}
	raw := *(*unsafe.Pointer)(unsafe.Pointer(&fn))
	var off, size C.size_t
	var bad string
	err := m.d.do(func() error {
		for i, p := range sig.Params {
			r := C.kgen_param_info(raw, C.size_t(i), &off, &size)
			if r == 500 || r == 801 { // CUDA_ERROR_NOT_FOUND (no such entry point), NOT_SUPPORTED
				return nil
			}
			if r != 0 {
				bad = fmt.Sprintf("the loaded kernel has %d parameters", i)
				return nil
			}
			if int(size) != paramBytes(p) {
				bad = fmt.Sprintf("its parameter %d is %d bytes, the signature's %s is %d", i, int(size), paramDecl(p), paramBytes(p))
				return nil
			}
		}
		if r := C.kgen_param_info(raw, C.size_t(len(sig.Params)), &off, &size); r == 0 {
			bad = fmt.Sprintf("the loaded kernel has more than %d parameters", len(sig.Params))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if bad != "" {
		return fmt.Errorf("jit: kernel %s does not match the ptx.Module it was loaded with: %s; signature %s (was Source.PTX printed from Source.Module?)", errName(name), bad, errSignature(sig))
	}
	return nil
}

func (m *cudaModule) unload() error {
	return m.d.do(func() error { return wrap("cuModuleUnload", m.mod.Unload()) })
}

type cudaFunc struct {
	d       *cudaDevice
	fn      cu.Function
	offs    []C.int // each parameter's first argument word; nil when parameter i is word i
	nparams int
	mu      sync.Mutex
	maxSmem int
	// perSM caches the occupancy calculator's blocks per SM by block shape (threads) and
	// dynamic shared memory: a co-resident launch checks its grid against it every time,
	// and the query costs about as much as the launch (docs/bench.md, "Host path").
	perSM map[occKey]int
}

// occKey is what a function's occupancy depends on at launch: threads per block and dynamic
// shared memory (the function's registers and static shared memory are fixed once loaded).
type occKey struct{ threads, shared int }

// newCudaFunc records how sig's parameters lie in the argument words.
func newCudaFunc(d *cudaDevice, fn cu.Function, sig *ptx.Func) *cudaFunc {
	f := &cudaFunc{d: d, fn: fn}
	if sig == nil {
		return f
	}
	f.nparams = len(sig.Params)
	if offs := wordOffsets(sig); offs != nil {
		f.offs = make([]C.int, len(offs))
		for i, o := range offs {
			f.offs[i] = C.int(o)
		}
	}
	return f
}

// params returns the word offsets for C (nil when parameter i is word i) and the
// parameter count, for args encoded by EncodeArgs.
func (f *cudaFunc) params(args []uint64) (*C.int, C.int) {
	if f.offs == nil {
		return nil, C.int(len(args))
	}
	return &f.offs[0], C.int(f.nparams)
}

// prepareSmem raises the function's dynamic shared memory limit for launches beyond 48 KiB.
func (f *cudaFunc) prepareSmem(shared int) error {
	if shared <= 48<<10 {
		return nil
	}
	return f.d.do(func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if shared > f.maxSmem {
			raw := *(*unsafe.Pointer)(unsafe.Pointer(&f.fn))
			if r := C.kgen_set_max_dyn_smem(raw, C.int(shared)); r != 0 {
				return fmt.Errorf("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %d): CUresult %d", shared, int(r))
			}
			f.maxSmem = shared
		}
		return nil
	})
}

// prepareLaunch readies a launch's dynamic shared memory and returns the C views of its
// argument words and stream. The hot path is one cgo call (context, parameter pointers and
// launch in C); the argument words hold no Go pointers, so C may read them for the call's
// duration (the caller keeps args alive across it).
func (f *cudaFunc) prepareLaunch(shared int, s stream, args []uint64) (*C.ulonglong, unsafe.Pointer, error) {
	if err := f.prepareSmem(shared); err != nil {
		return nil, nil, err
	}
	var argp *C.ulonglong
	if len(args) > 0 {
		argp = (*C.ulonglong)(unsafe.Pointer(&args[0]))
	}
	var sp unsafe.Pointer
	if s != nil {
		sp = s.(*cudaStream).raw()
	}
	return argp, sp, nil
}

func (f *cudaFunc) launch(g, b Dim3, shared int, s stream, args []uint64) error {
	argp, sp, err := f.prepareLaunch(shared, s, args)
	if err != nil {
		return err
	}
	offs, n := f.params(args)
	r := C.kgen_launch(f.d.rawCtx(), *(*unsafe.Pointer)(unsafe.Pointer(&f.fn)), C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
		C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(shared), sp, argp, offs, n)
	runtime.KeepAlive(args)
	if r != 0 {
		return fmt.Errorf("cuLaunchKernel: %s (CUresult %d)", C.GoString(C.kgen_error_name(r)), int(r))
	}
	return nil
}

// launchEx launches through cuLaunchKernelEx with the configuration's cluster shape and PDL.
func (f *cudaFunc) launchEx(g, b Dim3, shared int, s stream, args []uint64, cfg *LaunchConfig) error {
	argp, sp, err := f.prepareLaunch(shared, s, args)
	if err != nil {
		return err
	}
	var c Dim3
	if cfg.Cluster != (Dim3{}) {
		c = cfg.Cluster.norm()
	}
	pdl, nonportable := 0, 0
	if cfg.PDL {
		pdl = 1
	}
	if cfg.NonPortableCluster {
		nonportable = 1
	}
	offs, n := f.params(args)
	r := C.kgen_launch_ex(f.d.rawCtx(), *(*unsafe.Pointer)(unsafe.Pointer(&f.fn)), C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
		C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(shared), sp, argp, offs, n,
		C.uint(c.X), C.uint(c.Y), C.uint(c.Z), C.int(nonportable), C.int(pdl))
	runtime.KeepAlive(args)
	runtime.KeepAlive(f)
	if r != 0 {
		return fmt.Errorf("cuLaunchKernelEx (cluster %s, PDL %v): %s (CUresult %d)", dimString(cfg.Cluster), cfg.PDL, C.GoString(C.kgen_error_name(r)), int(r))
	}
	return nil
}

// tmapDataType is cuTensorMapEncodeTiled's data type for element type t (fp8 and int8 copy
// as UINT8, int16 as UINT16: TMA moves bytes).
func tmapDataType(t ptx.Type) C.int {
	switch t {
	case ptx.U8, ptx.S8, ptx.E4M3, ptx.E5M2:
		return C.CU_TENSOR_MAP_DATA_TYPE_UINT8
	case ptx.U16, ptx.S16:
		return C.CU_TENSOR_MAP_DATA_TYPE_UINT16
	case ptx.U32:
		return C.CU_TENSOR_MAP_DATA_TYPE_UINT32
	case ptx.S32:
		return C.CU_TENSOR_MAP_DATA_TYPE_INT32
	case ptx.U64:
		return C.CU_TENSOR_MAP_DATA_TYPE_UINT64
	case ptx.S64:
		return C.CU_TENSOR_MAP_DATA_TYPE_INT64
	case ptx.F16:
		return C.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	case ptx.F32:
		return C.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
	case ptx.F64:
		return C.CU_TENSOR_MAP_DATA_TYPE_FLOAT64
	case ptx.BF16:
		return C.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	}
	return -1
}

// encodeTensorMap calls cuTensorMapEncodeTiled (s is validated).
func (d *cudaDevice) encodeTensorMap(s *tensorMapSpec) ([TensorMapBytes]byte, error) {
	var out [TensorMapBytes]byte
	dt := tmapDataType(s.elem)
	if dt < 0 {
		return out, fmt.Errorf("element type %s is not one a tensor map takes", s.elem)
	}
	rank := len(s.dims)
	var dims, strides [5]C.ulonglong
	var box, es [5]C.uint
	for i := 0; i < rank; i++ {
		dims[i], box[i], es[i] = C.ulonglong(s.dims[i]), C.uint(s.box[i]), C.uint(s.elemStrides[i])
		if i > 0 {
			strides[i-1] = C.ulonglong(s.strides[i-1])
		}
	}
	interleave := map[int]C.int{0: C.CU_TENSOR_MAP_INTERLEAVE_NONE, 16: C.CU_TENSOR_MAP_INTERLEAVE_16B, 32: C.CU_TENSOR_MAP_INTERLEAVE_32B}[s.interleave]
	swizzle := map[Swizzle]C.int{SwizzleNone: C.CU_TENSOR_MAP_SWIZZLE_NONE, Swizzle32B: C.CU_TENSOR_MAP_SWIZZLE_32B,
		Swizzle64B: C.CU_TENSOR_MAP_SWIZZLE_64B, Swizzle128B: C.CU_TENSOR_MAP_SWIZZLE_128B}[s.swizzle]
	l2 := map[int]C.int{0: C.CU_TENSOR_MAP_L2_PROMOTION_NONE, 64: C.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
		128: C.CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 256: C.CU_TENSOR_MAP_L2_PROMOTION_L2_256B}[s.l2]
	oob := C.int(C.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
	if s.oobNaN {
		oob = C.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
	}
	err := d.do(func() error {
		r := C.kgen_tmap_encode(d.rawCtx(), (*C.uchar)(unsafe.Pointer(&out[0])), dt, C.uint(rank), C.ulonglong(s.addr),
			&dims[0], &strides[0], &box[0], &es[0], interleave, swizzle, l2, oob)
		if r != 0 {
			return fmt.Errorf("cuTensorMapEncodeTiled: %s (CUresult %d)", C.GoString(C.kgen_error_name(r)), int(r))
		}
		return nil
	})
	return out, err
}

// residentBlocks is the occupancy calculator's blocks per SM times the SM count. The
// calculator runs once per block size and shared memory; later launches read the cached
// answer. Past 48 KiB of dynamic shared memory the function's limit is raised first (as
// the launch does): the calculator counts 0 blocks for a request above the limit.
func (f *cudaFunc) residentBlocks(b Dim3, shared int) (int, error) {
	if err := f.prepareSmem(shared); err != nil {
		return 0, err
	}
	perSM, err := f.occupancy(occKey{b.X * b.Y * b.Z, shared})
	return perSM * f.d.inf.Multiproc, err
}

func (f *cudaFunc) residentLimit(b Dim3, shared int) string {
	perSM, _ := f.occupancy(occKey{b.X * b.Y * b.Z, shared})
	return fmt.Sprintf("%d SMs x %d blocks per SM by cuOccupancyMaxActiveBlocksPerMultiprocessor", f.d.inf.Multiproc, perSM)
}

// occupancy returns cuOccupancyMaxActiveBlocksPerMultiprocessor for k, cached per function.
func (f *cudaFunc) occupancy(k occKey) (int, error) {
	f.mu.Lock()
	n, ok := f.perSM[k]
	f.mu.Unlock()
	if ok {
		return n, nil
	}
	var perSM C.int
	err := f.d.do(func() error {
		raw := *(*unsafe.Pointer)(unsafe.Pointer(&f.fn))
		if r := C.kgen_occupancy(raw, C.int(k.threads), C.size_t(k.shared), &perSM); r != 0 {
			return fmt.Errorf("cuOccupancyMaxActiveBlocksPerMultiprocessor: %s (CUresult %d)", C.GoString(C.kgen_error_name(r)), int(r))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	if f.perSM == nil {
		f.perSM = make(map[occKey]int)
	}
	f.perSM[k] = int(perSM)
	f.mu.Unlock()
	return int(perSM), nil
}

// launchCoResident launches with cuLaunchCooperativeKernel (the GPU runs each rank's grid
// alone: the mode is the emulator's).
func (f *cudaFunc) launchCoResident(g, b Dim3, shared int, s stream, args []uint64, _ *LaunchConfig) error {
	argp, sp, err := f.prepareLaunch(shared, s, args)
	if err != nil {
		return err
	}
	offs, n := f.params(args)
	r := C.kgen_launch_coop(f.d.rawCtx(), *(*unsafe.Pointer)(unsafe.Pointer(&f.fn)), C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
		C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(shared), sp, argp, offs, n)
	runtime.KeepAlive(args)
	if r != 0 {
		return fmt.Errorf("cuLaunchCooperativeKernel: %s (CUresult %d)", C.GoString(C.kgen_error_name(r)), int(r))
	}
	return nil
}

type cudaStream struct {
	d *cudaDevice
	s cu.Stream
}

func (s *cudaStream) raw() unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&s.s)) }

func (s *cudaStream) waitEvent(e event) error {
	ce, ok := e.(*cudaEvent)
	if !ok {
		return fmt.Errorf("jit: WaitEvent: the event belongs to another backend")
	}
	return s.d.do(func() error { return wrap("cuStreamWaitEvent", s.s.Wait(ce.e, 0)) })
}

// waitValue32: cuStreamWaitValue32. The CUDA 12 (v2) stream memory operations need no
// driver option; NOR needs a device attribute, checked first.
func (s *cudaStream) waitValue32(addr DevicePtr, value uint32, cond WaitCond) error {
	flags := map[WaitCond]C.uint{WaitGEQ: C.CU_STREAM_WAIT_VALUE_GEQ, WaitEQ: C.CU_STREAM_WAIT_VALUE_EQ,
		WaitAND: C.CU_STREAM_WAIT_VALUE_AND, WaitNOR: C.CU_STREAM_WAIT_VALUE_NOR}[cond]
	return s.d.do(func() error {
		var nor C.int
		r := C.kgen_wait_value32(s.d.rawCtx(), s.raw(), C.ulonglong(addr), C.uint(value), flags, &nor)
		switch {
		case r == 0:
			return nil
		case nor == 0:
			return fmt.Errorf("jit: Stream.WaitValue32: WaitNOR is not supported on %s (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR is 0); use WaitEQ, WaitGEQ or WaitAND", s.d.inf.Name)
		case r == C.CUDA_ERROR_NOT_SUPPORTED:
			return fmt.Errorf("jit: Stream.WaitValue32: cuStreamWaitValue32: %s (CUresult %d): the driver does not support stream memory operations here (they need CUDA 12's v2 memory operations; check the driver version)", C.GoString(C.kgen_error_name(r)), int(r))
		}
		return fmt.Errorf("jit: Stream.WaitValue32: cuStreamWaitValue32(%#x, %d, %v): %s (CUresult %d)", uint64(addr), value, cond, C.GoString(C.kgen_error_name(r)), int(r))
	})
}

// writeValue32: cuStreamWriteValue32 with its default memory barrier (a release).
func (s *cudaStream) writeValue32(addr DevicePtr, value uint32) error {
	return s.d.do(func() error {
		if r := C.kgen_write_value32(s.d.rawCtx(), s.raw(), C.ulonglong(addr), C.uint(value)); r != 0 {
			return fmt.Errorf("jit: Stream.WriteValue32: cuStreamWriteValue32(%#x, %d): %s (CUresult %d)", uint64(addr), value, C.GoString(C.kgen_error_name(r)), int(r))
		}
		return nil
	})
}

func (s *cudaStream) synchronize() error {
	return s.d.do(func() error { return wrap("cuStreamSynchronize", s.s.Synchronize()) })
}

func (s *cudaStream) destroy() error {
	return s.d.do(func() error { return wrap("cuStreamDestroy", s.s.Destroy()) })
}

type cudaEvent struct {
	d *cudaDevice
	e cu.Event
}

func (e *cudaEvent) record(s stream) error {
	return e.d.do(func() error { return wrap("cuEventRecord", e.e.Record(cuStream(s))) })
}

func (e *cudaEvent) synchronize() error {
	return e.d.do(func() error { return wrap("cuEventSynchronize", e.e.Synchronize()) })
}

func (e *cudaEvent) elapsed(end event) (time.Duration, error) {
	var ms float64
	err := e.d.do(func() error {
		var err error
		ms, err = e.e.Elapsed(end.(*cudaEvent).e)
		return wrap("cuEventElapsedTime", err)
	})
	return time.Duration(ms * float64(time.Millisecond)), err
}

func (e *cudaEvent) destroy() error {
	return e.d.do(func() error { return wrap("cuEventDestroy", cu.DestroyEvent(&e.e)) })
}

func cudrvPath() string { return cudrv.Path() }

func numGPUs() (int, error) { return cu.NumDevices() }

// cudaBuilt reports whether the GPU backend is compiled in (build tag cuda, with cgo).
const cudaBuilt = true

// probeGPU says why no GPU can be used (nil when one can).
func probeGPU() error {
	if err := cudrv.Err(); err != nil {
		return err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("cuDeviceGetCount: %v", err)
	}
	if n == 0 {
		return fmt.Errorf("no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)")
	}
	return nil
}
