//go:build cuda && cgo

// The CUDA driver, loaded at run time. Every entry point of cuda.h (syms.h) is defined here
// as a one-instruction trampoline that jumps through a table filled by a constructor from
// dlopen("libcuda.so.1"). So a cuda-tagged binary starts on a machine with no driver, and
// cuInit's first call (gorgonia.org/cu's init, which calls os.Exit(1) on failure) always
// succeeds; the real outcome is kept for kgen_cu_status, which package jit reports.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define KGEN_SYM(i, name) #name,
static const char *const kgen_cu_names[] = {
#include "syms.h"
};
#undef KGEN_SYM
#define KGEN_NSYMS (sizeof(kgen_cu_names) / sizeof(kgen_cu_names[0]))

__attribute__((visibility("hidden"), used)) void *kgen_cu_fp[KGEN_NSYMS];

#define KGEN_SYM(i, name)                                                   \
  __asm__(".text\n"                                                         \
          ".globl " #name "\n"                                              \
          ".type " #name ",@function\n"                                     \
          ".p2align 4\n" #name ":\n"                                        \
          "\tjmp *kgen_cu_fp+8*" #i "(%rip)\n"                              \
          ".size " #name ",.-" #name "\n");
#include "syms.h"
#undef KGEN_SYM

enum { kgenStubLibrary = 34 /* CUDA_ERROR_STUB_LIBRARY */, kgenNotFound = 500 /* CUDA_ERROR_NOT_FOUND */ };

static void *kgen_cu_handle;
static char kgen_cu_error[1024];
static char kgen_cu_path[1024];
static int (*kgen_real_cuInit)(unsigned int);
static int kgen_cu_init_calls;
static int kgen_cu_init_result = -1;

static int kgen_cu_no_library(void) { return kgenStubLibrary; }
static int kgen_cu_no_symbol(void) { return kgenNotFound; }

static int kgen_cuInit(unsigned int flags) {
  int r = kgen_real_cuInit ? kgen_real_cuInit(flags) : kgenStubLibrary;
  if (__atomic_fetch_add(&kgen_cu_init_calls, 1, __ATOMIC_SEQ_CST) == 0) {
    kgen_cu_init_result = r;
    return 0; /* the first caller is gorgonia.org/cu's init: never let it exit */
  }
  return r;
}

__attribute__((constructor)) static void kgen_cu_load(void) {
  const char *names[] = {"libcuda.so.1", "libcuda.so"};
  for (size_t i = 0; i < 2 && !kgen_cu_handle; i++) {
    kgen_cu_handle = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!kgen_cu_handle && i == 0) {
      const char *e = dlerror();
      snprintf(kgen_cu_error, sizeof kgen_cu_error, "%s", e ? e : "dlopen libcuda.so.1 failed");
    }
  }
  size_t init = (size_t)-1;
  for (size_t i = 0; i < KGEN_NSYMS; i++) {
    void *p = kgen_cu_handle ? dlsym(kgen_cu_handle, kgen_cu_names[i]) : NULL;
    if (!p) p = kgen_cu_handle ? (void *)kgen_cu_no_symbol : (void *)kgen_cu_no_library;
    kgen_cu_fp[i] = p;
    if (strcmp(kgen_cu_names[i], "cuInit") == 0) init = i;
  }
  if (init != (size_t)-1) {
    if (kgen_cu_handle) kgen_real_cuInit = (int (*)(unsigned int))kgen_cu_fp[init];
    kgen_cu_fp[init] = (void *)kgen_cuInit;
  }
  if (kgen_cu_handle && kgen_real_cuInit) {
    Dl_info info;
    if (dladdr((void *)kgen_real_cuInit, &info) && info.dli_fname)
      snprintf(kgen_cu_path, sizeof kgen_cu_path, "%s", info.dli_fname);
  }
}

/* kgen_cu_status: 0 when the driver loaded and cuInit succeeded; 1 when libcuda could not be
   loaded (*msg says why); 2 when cuInit failed (*code is its CUresult); 3 when cuInit was
   never called. */
int kgen_cu_status(int *code, const char **msg, const char **path) {
  *msg = kgen_cu_error;
  *path = kgen_cu_path;
  *code = kgen_cu_init_result;
  if (!kgen_cu_handle) return 1;
  if (kgen_cu_init_calls == 0) return 3;
  return kgen_cu_init_result == 0 ? 0 : 2;
}
