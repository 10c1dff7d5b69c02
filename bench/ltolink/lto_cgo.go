//go:build cgo

package main

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdlib.h>
// #include <string.h>
// typedef int (*nvvm_create_t)(void **);
// typedef int (*nvvm_add_t)(void *, const char *, size_t, const char *);
// typedef int (*nvvm_compile_t)(void *, int, const char **);
// typedef int (*nvvm_size_t)(void *, size_t *);
// typedef int (*nvvm_get_t)(void *, char *);
// typedef int (*nvvm_destroy_t)(void **);
// typedef int (*njl_create_t)(void **, unsigned, const char **);
// typedef int (*njl_add_t)(void *, int, const void *, size_t, const char *);
// typedef int (*njl_file_t)(void *, int, const char *);
// typedef int (*njl_complete_t)(void *);
// typedef int (*njl_size_t)(void *, size_t *);
// typedef int (*njl_get_t)(void *, void *);
// typedef int (*njl_destroy_t)(void **);
// static void *kgen_nvvm, *kgen_njl;
// // kgen_lto_open loads libNVVM and nvJitLink; it returns dlerror's message or NULL.
// static const char *kgen_lto_open(const char *nvvm, const char *njl) {
//   if (!(kgen_nvvm = dlopen(nvvm, RTLD_NOW | RTLD_LOCAL))) return dlerror();
//   if (!(kgen_njl = dlopen(njl, RTLD_NOW | RTLD_LOCAL))) return dlerror();
//   return NULL;
// }
// static void *kgen_sym(void *lib, const char *name) { return dlsym(lib, name); }
// // kgen_nvvm_compile compiles one module with opts; *out (malloc'ed) is the result, *log
// // (malloc'ed) the program log. It returns the nvvmResult, or -1 for a missing symbol.
// static int kgen_nvvm_compile(const char *mod, size_t n, const char **opts, int nopts,
//     char **out, size_t *outn, char **log) {
//   nvvm_create_t create = (nvvm_create_t)dlsym(kgen_nvvm, "nvvmCreateProgram");
//   nvvm_add_t add = (nvvm_add_t)dlsym(kgen_nvvm, "nvvmAddModuleToProgram");
//   nvvm_compile_t compile = (nvvm_compile_t)dlsym(kgen_nvvm, "nvvmCompileProgram");
//   nvvm_size_t rsize = (nvvm_size_t)dlsym(kgen_nvvm, "nvvmGetCompiledResultSize");
//   nvvm_get_t rget = (nvvm_get_t)dlsym(kgen_nvvm, "nvvmGetCompiledResult");
//   nvvm_size_t lsize = (nvvm_size_t)dlsym(kgen_nvvm, "nvvmGetProgramLogSize");
//   nvvm_get_t lget = (nvvm_get_t)dlsym(kgen_nvvm, "nvvmGetProgramLog");
//   nvvm_destroy_t destroy = (nvvm_destroy_t)dlsym(kgen_nvvm, "nvvmDestroyProgram");
//   if (!create || !add || !compile || !rsize || !rget || !lsize || !lget || !destroy) return -1;
//   void *p;
//   int r = create(&p);
//   if (r) return r;
//   r = add(p, mod, n, "nvshmem");
//   if (!r) r = compile(p, nopts, opts);
//   size_t ln = 0;
//   if (!lsize(p, &ln) && ln > 0 && (*log = malloc(ln + 1))) { lget(p, *log); (*log)[ln] = 0; }
//   if (!r && !(r = rsize(p, outn)) && (*out = malloc(*outn ? *outn : 1))) r = rget(p, *out);
//   destroy(&p);
//   return r;
// }
// typedef struct { int kind; const void *data; size_t n; const char *name; } kgen_input;
// // kgen_njl_link links inputs (kind 6, a library, takes data as a path) with opts; *cubin
// // and *log are malloc'ed. It returns the nvJitLinkResult, or -1 for a missing symbol.
// static int kgen_njl_link(const char **opts, unsigned nopts, const kgen_input *in, int nin,
//     char **cubin, size_t *n, char **log) {
//   njl_create_t create = (njl_create_t)dlsym(kgen_njl, "__nvJitLinkCreate_13_0");
//   njl_add_t add = (njl_add_t)dlsym(kgen_njl, "__nvJitLinkAddData_13_0");
//   njl_file_t file = (njl_file_t)dlsym(kgen_njl, "__nvJitLinkAddFile_13_0");
//   njl_complete_t complete = (njl_complete_t)dlsym(kgen_njl, "__nvJitLinkComplete_13_0");
//   njl_size_t csize = (njl_size_t)dlsym(kgen_njl, "__nvJitLinkGetLinkedCubinSize_13_0");
//   njl_get_t cget = (njl_get_t)dlsym(kgen_njl, "__nvJitLinkGetLinkedCubin_13_0");
//   njl_size_t lsize = (njl_size_t)dlsym(kgen_njl, "__nvJitLinkGetErrorLogSize_13_0");
//   njl_get_t lget = (njl_get_t)dlsym(kgen_njl, "__nvJitLinkGetErrorLog_13_0");
//   njl_destroy_t destroy = (njl_destroy_t)dlsym(kgen_njl, "__nvJitLinkDestroy_13_0");
//   if (!create || !add || !file || !complete || !csize || !cget || !lsize || !lget || !destroy) return -1;
//   void *h;
//   int r = create(&h, nopts, opts);
//   if (r) return r;
//   for (int i = 0; !r && i < nin; i++)
//     r = in[i].kind == 6 ? file(h, 6, (const char *)in[i].data) : add(h, in[i].kind, in[i].data, in[i].n, in[i].name);
//   if (!r) r = complete(h);
//   size_t ln = 0;
//   if (!lsize(h, &ln) && ln > 0 && (*log = malloc(ln + 1))) { lget(h, *log); (*log)[ln] = 0; }
//   if (!r && !(r = csize(h, n)) && (*cubin = malloc(*n ? *n : 1))) r = cget(h, *cubin);
//   destroy(&h);
//   return r;
// }
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// The nvJitLink input kinds (nvJitLink.h's nvJitLinkInputType).
const (
	inputCubin   = 1
	inputPTX     = 2
	inputLTOIR   = 3
	inputLibrary = 6
)

// input is one link input: data, or for inputLibrary a file path.
type input struct {
	kind int
	data []byte
	path string
	name string
}

// openLTO loads libNVVM and nvJitLink from their files.
func openLTO(nvvm, njl string) error {
	cn, cj := C.CString(nvvm), C.CString(njl)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cj))
	if msg := C.kgen_lto_open(cn, cj); msg != nil {
		return fmt.Errorf("loading libNVVM / nvJitLink: %s", C.GoString(msg))
	}
	return nil
}

func cstrings(ss []string) (**C.char, func()) {
	arr := C.malloc(C.size_t(len(ss)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	p := unsafe.Slice((**C.char)(arr), len(ss)+1)
	for i, s := range ss {
		p[i] = C.CString(s)
	}
	return (**C.char)(arr), func() {
		for i := range ss {
			C.free(unsafe.Pointer(p[i]))
		}
		C.free(arr)
	}
}

// nvvmCompile runs libNVVM on one module (bitcode or text) with opts.
func nvvmCompile(mod []byte, opts []string) ([]byte, error) {
	cm := C.CBytes(mod)
	defer C.free(cm)
	co, free := cstrings(opts)
	defer free()
	var out, log *C.char
	var n C.size_t
	r := C.kgen_nvvm_compile((*C.char)(cm), C.size_t(len(mod)), co, C.int(len(opts)), &out, &n, &log)
	msg := ""
	if log != nil {
		msg = strings.TrimSpace(C.GoString(log))
		C.free(unsafe.Pointer(log))
	}
	if r != 0 {
		if out != nil {
			C.free(unsafe.Pointer(out))
		}
		return nil, fmt.Errorf("libNVVM %s: nvvmResult %d: %s", strings.Join(opts, " "), int(r), msg)
	}
	b := C.GoBytes(unsafe.Pointer(out), C.int(n))
	C.free(unsafe.Pointer(out))
	return b, nil
}

// njlLink links inputs with nvJitLink and returns the cubin.
func njlLink(opts []string, ins []input) ([]byte, error) {
	co, free := cstrings(opts)
	defer free()
	cin := (*C.kgen_input)(C.malloc(C.size_t(len(ins)) * C.size_t(unsafe.Sizeof(C.kgen_input{}))))
	defer C.free(unsafe.Pointer(cin))
	cs := unsafe.Slice(cin, len(ins))
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	for i, in := range ins {
		name := C.CString(in.name)
		frees = append(frees, unsafe.Pointer(name))
		cs[i] = C.kgen_input{kind: C.int(in.kind), name: name}
		if in.kind == inputLibrary {
			p := C.CString(in.path)
			frees = append(frees, unsafe.Pointer(p))
			cs[i].data = unsafe.Pointer(p)
		} else {
			d := C.CBytes(in.data)
			frees = append(frees, d)
			cs[i].data, cs[i].n = d, C.size_t(len(in.data))
		}
	}
	var cubin, log *C.char
	var n C.size_t
	r := C.kgen_njl_link(co, C.uint(len(opts)), cin, C.int(len(ins)), &cubin, &n, &log)
	msg := ""
	if log != nil {
		msg = strings.TrimSpace(C.GoString(log))
		C.free(unsafe.Pointer(log))
	}
	if r != 0 {
		if cubin != nil {
			C.free(unsafe.Pointer(cubin))
		}
		return nil, fmt.Errorf("nvJitLink %s: nvJitLinkResult %d: %s", strings.Join(opts, " "), int(r), msg)
	}
	b := C.GoBytes(unsafe.Pointer(cubin), C.int(n))
	C.free(unsafe.Pointer(cubin))
	return b, nil
}
