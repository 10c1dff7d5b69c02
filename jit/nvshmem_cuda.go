//go:build cuda && cgo

package jit

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdint.h>
// #include <stdio.h>
// #include <stdlib.h>
// #include <string.h>
//
// // NVSHMEM 3.4's ABI structs (nvshmem_uniqueid.h, nvshmem_types.h), so no headers are needed.
// typedef struct { int version; char internal[124]; } kg_uid_t;
// typedef struct { int version; kg_uid_t *id; int myrank; int nranks; } kg_uid_args_t;
// typedef struct { int version; kg_uid_args_t uid_args; char content[96]; } kg_init_args_t;
// typedef struct { int version; void *mpi_comm; kg_init_args_t args; } kg_init_attr_t;
// _Static_assert(sizeof(kg_uid_t) == 128, "nvshmemx_uniqueid_t is 128 bytes");
// _Static_assert(sizeof(kg_uid_args_t) == 24, "nvshmemx_uniqueid_args_t is 24 bytes");
// _Static_assert(sizeof(kg_init_args_t) == 128, "nvshmemx_init_args_t is 128 bytes");
// _Static_assert(sizeof(kg_init_attr_t) == 144, "nvshmemx_init_attr_t is 144 bytes");
//
// typedef struct {
//   void *h;
//   int (*hostlib_init_attr)(unsigned int, kg_init_attr_t *);
//   void (*hostlib_finalize)(void);
//   int (*get_uniqueid)(kg_uid_t *);
//   int (*set_attr_uniqueid_args)(int, int, const kg_uid_t *, kg_init_attr_t *);
//   int (*my_pe)(void);
//   int (*n_pes)(void);
//   void *(*malloc_)(size_t);
//   void (*free_)(void *);
//   void *(*ptr)(const void *, int);
//   void *(*mc_ptr)(int, const void *);
//   int (*team_n_pes)(int);
//   int (*team_translate_pe)(int, int, int);
//   void (*barrier_all)(void);
//   void (*barrier_all_on_stream)(void *);
//   int (*cumodule_init)(void *);
//   int (*cumodule_finalize)(void *);
//   void (*vendor_version)(int *, int *, int *);
// } kg_shmem_t;
// static kg_shmem_t kgS;
// static kg_init_attr_t kgA; // nvshmemx_set_attr_uniqueid_args keeps pointers into these
// static kg_uid_t kgU;
// static char kg_err[2048];
//
// static const char *kg_shmem_open(const char *path) {
//   if (kgS.h) return NULL;
//   void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
//   if (!h) { const char *e = dlerror(); snprintf(kg_err, sizeof kg_err, "%s", e ? e : "dlopen failed"); return kg_err; }
//   kg_shmem_t s = {0};
//   s.h = h;
//   #define KG_SYM(field, name) do { *(void **)&s.field = dlsym(h, name); if (!s.field) { \
//       snprintf(kg_err, sizeof kg_err, "%s has no symbol %s (not NVSHMEM 3.x?)", path, name); dlclose(h); return kg_err; } } while (0)
//   KG_SYM(hostlib_init_attr, "nvshmemx_hostlib_init_attr");
//   KG_SYM(hostlib_finalize, "nvshmemx_hostlib_finalize");
//   KG_SYM(get_uniqueid, "nvshmemx_get_uniqueid");
//   KG_SYM(set_attr_uniqueid_args, "nvshmemx_set_attr_uniqueid_args");
//   KG_SYM(my_pe, "nvshmem_my_pe");
//   KG_SYM(n_pes, "nvshmem_n_pes");
//   KG_SYM(malloc_, "nvshmem_malloc");
//   KG_SYM(free_, "nvshmem_free");
//   KG_SYM(ptr, "nvshmem_ptr");
//   KG_SYM(mc_ptr, "nvshmemx_mc_ptr");
//   KG_SYM(team_n_pes, "nvshmem_team_n_pes");
//   KG_SYM(team_translate_pe, "nvshmem_team_translate_pe");
//   KG_SYM(barrier_all, "nvshmem_barrier_all");
//   KG_SYM(barrier_all_on_stream, "nvshmemx_barrier_all_on_stream");
//   KG_SYM(cumodule_init, "nvshmemx_cumodule_init");
//   KG_SYM(cumodule_finalize, "nvshmemx_cumodule_finalize");
//   KG_SYM(vendor_version, "nvshmemx_vendor_get_version_info");
//   #undef KG_SYM
//   kgS = s;
//   return NULL;
// }
// static void kg_version(int *a, int *b, int *c) { kgS.vendor_version(a, b, c); }
// static int kg_get_uid(void *out) {
//   memset(&kgU, 0, sizeof kgU);
//   kgU.version = (1 << 16) + sizeof(kg_uid_t);
//   int r = kgS.get_uniqueid(&kgU);
//   memcpy(out, &kgU, sizeof kgU);
//   return r;
// }
// static int kg_init(int rank, int n, const void *uid) {
//   memset(&kgA, 0, sizeof kgA);
//   kgA.version = (1 << 16) + sizeof(kg_init_attr_t);
//   kgA.args.version = (1 << 16) + sizeof(kg_init_args_t);
//   kgA.args.uid_args.version = (1 << 16) + sizeof(kg_uid_args_t);
//   kgA.args.uid_args.myrank = -1;
//   kgA.args.uid_args.nranks = -1;
//   memcpy(&kgU, uid, sizeof kgU);
//   int r = kgS.set_attr_uniqueid_args(rank, n, &kgU, &kgA);
//   if (r) return 1000000 + r;
//   return kgS.hostlib_init_attr(1 << 3 /* NVSHMEMX_INIT_WITH_UNIQUEID */, &kgA);
// }
// static void kg_finalize(void) { kgS.hostlib_finalize(); }
// static int kg_my_pe(void) { return kgS.my_pe(); }
// static int kg_n_pes(void) { return kgS.n_pes(); }
// static uintptr_t kg_malloc(size_t n) { return (uintptr_t)kgS.malloc_(n); }
// static void kg_free(uintptr_t p) { kgS.free_((void *)p); }
// static uintptr_t kg_ptr(uintptr_t p, int pe) { return (uintptr_t)kgS.ptr((const void *)p, pe); }
// static uintptr_t kg_mc_ptr(uintptr_t p, int team) { return (uintptr_t)kgS.mc_ptr(team, (const void *)p); }
// static int kg_team_n_pes(int team) { return kgS.team_n_pes(team); }
// static int kg_team_translate_pe(int src, int pe, int dst) { return kgS.team_translate_pe(src, pe, dst); }
// static void kg_barrier_all(void) { kgS.barrier_all(); }
// static void kg_barrier_all_on_stream(void *s) { kgS.barrier_all_on_stream(s); }
// static int kg_cumodule_init(void *m) { return kgS.cumodule_init(m); }
// static int kg_cumodule_finalize(void *m) { return kgS.cumodule_finalize(m); }
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

var (
	shmemOnce    sync.Mutex
	shmemPath    string
	shmemVersion string
	shmemActive  bool
)

// loadNVSHMEMHost dlopens the first candidate that loads; the error lists every attempt.
func loadNVSHMEMHost(explicit string) (string, string, error) {
	shmemOnce.Lock()
	defer shmemOnce.Unlock()
	if shmemPath != "" {
		return shmemPath, shmemVersion, nil
	}
	var tried []string
	for _, p := range NVSHMEMHostCandidates(explicit) {
		if strings.Contains(p, "/") {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, p+" (absent)")
				continue
			}
		}
		cp := C.CString(p)
		msg := C.kg_shmem_open(cp)
		C.free(unsafe.Pointer(cp))
		if msg != nil {
			tried = append(tried, p+" ("+C.GoString(msg)+")")
			continue
		}
		var a, b, c C.int
		C.kg_version(&a, &b, &c)
		shmemPath, shmemVersion = p, fmt.Sprintf("%d.%d.%d", a, b, c)
		return shmemPath, shmemVersion, nil
	}
	return "", "", fmt.Errorf("jit: NVSHMEM host library %s not found; searched:\n  %s\ninstall NVSHMEM 3 (pip install nvidia-nvshmem-cu13, or `make tools`) and set NVSHMEM_HOME to the folder holding lib/%s",
		NVSHMEMHostLib, strings.Join(tried, "\n  "), NVSHMEMHostLib)
}

func (d *cudaDevice) nvshmemHost(explicit string) (shmemHost, error) {
	p, v, err := loadNVSHMEMHost(explicit)
	if err != nil {
		return nil, err
	}
	return &cudaShmemHost{d: d, p: p, v: v}, nil
}

type cudaShmemHost struct {
	d    *cudaDevice
	p, v string
}

func (h *cudaShmemHost) version() string { return h.v }
func (h *cudaShmemHost) path() string    { return h.p }

func (h *cudaShmemHost) uniqueID() ([]byte, error) {
	buf := make([]byte, 128)
	var r C.int
	err := h.d.do(func() error {
		r = C.kg_get_uid(unsafe.Pointer(&buf[0]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r != 0 {
		return nil, fmt.Errorf("jit: nvshmemx_get_uniqueid returned %d", int(r))
	}
	return buf, nil
}

func (h *cudaShmemHost) init(rank, n int, uid []byte) (shmemImpl, error) {
	if len(uid) != 128 {
		return nil, fmt.Errorf("jit: NVSHMEM unique ID is %d bytes, want 128", len(uid))
	}
	shmemOnce.Lock()
	if shmemActive {
		shmemOnce.Unlock()
		return nil, errors.New("jit: NVSHMEM is already initialised in this process (one PE per process)")
	}
	shmemOnce.Unlock()
	var r C.int
	err := h.d.do(func() error {
		r = C.kg_init(C.int(rank), C.int(n), unsafe.Pointer(&uid[0]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r >= 1000000 {
		return nil, fmt.Errorf("jit: nvshmemx_set_attr_uniqueid_args(rank %d, %d ranks) returned %d", rank, n, int(r)-1000000)
	}
	if r != 0 {
		return nil, fmt.Errorf("jit: nvshmemx_hostlib_init_attr(WITH_UNIQUEID) returned %d on rank %d of %d (NVSHMEM_DEBUG=INFO says more)", int(r), rank, n)
	}
	shmemOnce.Lock()
	shmemActive = true
	shmemOnce.Unlock()
	return &cudaShmem{d: h.d}, nil
}

type cudaShmem struct{ d *cudaDevice }

func (s *cudaShmem) call(f func()) {
	s.d.do(func() error { f(); return nil })
}

func (s *cudaShmem) myPE() int { return int(C.kg_my_pe()) }
func (s *cudaShmem) nPEs() int { return int(C.kg_n_pes()) }

func (s *cudaShmem) malloc(_ context.Context, n int64) (DevicePtr, error) {
	var p C.uintptr_t
	s.call(func() { p = C.kg_malloc(C.size_t(n)) })
	if p == 0 {
		return 0, fmt.Errorf("jit: nvshmem_malloc(%d) returned NULL (symmetric heap exhausted? raise NVSHMEM_SYMMETRIC_SIZE)", n)
	}
	return DevicePtr(p), nil
}

func (s *cudaShmem) free(_ context.Context, p DevicePtr) error {
	s.call(func() { C.kg_free(C.uintptr_t(p)) })
	return nil
}

func (s *cudaShmem) ptr(p DevicePtr, pe int) DevicePtr {
	var q C.uintptr_t
	s.call(func() { q = C.kg_ptr(C.uintptr_t(p), C.int(pe)) })
	return DevicePtr(q)
}

func (s *cudaShmem) mcPtr(p DevicePtr, team int) DevicePtr {
	var q C.uintptr_t
	s.call(func() { q = C.kg_mc_ptr(C.uintptr_t(p), C.int(team)) })
	return DevicePtr(q)
}

// nodePEs: the world PEs of NVSHMEMX_TEAM_NODE (nvshmem_team_n_pes, team_translate_pe).
func (s *cudaShmem) nodePEs() []int {
	var pes []int
	s.call(func() {
		n := int(C.kg_team_n_pes(teamNode))
		for i := 0; i < n; i++ {
			pes = append(pes, int(C.kg_team_translate_pe(teamNode, C.int(i), teamWorld)))
		}
	})
	return pes
}

func (s *cudaShmem) barrierAll(context.Context) error {
	s.call(func() { C.kg_barrier_all() })
	return nil
}

func (s *cudaShmem) barrierAllOnStream(st stream) error {
	var raw unsafe.Pointer
	if st != nil {
		raw = st.(*cudaStream).raw()
	}
	s.call(func() { C.kg_barrier_all_on_stream(raw) })
	return nil
}

func (s *cudaShmem) moduleInit(m module) error {
	var r C.int
	s.call(func() { r = C.kg_cumodule_init(m.(*cudaModule).raw()) })
	if r != 0 {
		return fmt.Errorf("nvshmemx_cumodule_init returned %d (device library from another NVSHMEM version?)", int(r))
	}
	return nil
}

func (s *cudaShmem) moduleFinalize(m module) error {
	var r C.int
	s.call(func() { r = C.kg_cumodule_finalize(m.(*cudaModule).raw()) })
	if r != 0 {
		return fmt.Errorf("jit: nvshmemx_cumodule_finalize returned %d", int(r))
	}
	return nil
}

func (s *cudaShmem) finalize() error {
	s.call(func() { C.kg_finalize() })
	shmemOnce.Lock()
	shmemActive = false
	shmemOnce.Unlock()
	return nil
}
