// tma_probe: the reference TMA load behind docs/facts.md's inner-coordinate fact (issue 15).
// It loads the 64 x 8 box at (x, y) of a 100 x 40 u16 tensor (row pitch 104) through a
// cuTensorMapEncodeTiled map, with nvcc's own kernel (a const __grid_constant__ CUtensorMap
// parameter; mode "ref") or the tma_box kernel of a PTX file (mode = its path, e.g.
// jit/tensormap_test.go's tmaSrc), checks the box against the tensor (zero outside) and
// prints "RESULT ... PASS", "WRONG" or "FAIL <error>". On a GPU machine:
//   nvcc -arch=sm_90a -o probe jit/testdata/tma_probe.cu -lcuda
//   for x in 8 68 -8 -4; do ./probe ref $x 0; done   # 68 and -4 (u16) fault: IllegalInstruction
// One process per probe: a fault kills the context.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <string>

__global__ void tma_ref(const __grid_constant__ CUtensorMap tmap, unsigned *out, int x, int y, unsigned pexp, unsigned pwords) {
  __shared__ alignas(1024) unsigned char box[2048];
  __shared__ alignas(8) uint64_t full;
  uint32_t bar = (uint32_t)__cvta_generic_to_shared(&full);
  uint32_t dst = (uint32_t)__cvta_generic_to_shared(box);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(bar), "r"(pexp));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      :: "r"(dst), "l"((uint64_t)&tmap), "r"(x), "r"(y), "r"(bar) : "memory");
  }
  uint32_t ok = 0;
  while (!ok) asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }" : "=r"(ok) : "r"(bar));
  for (unsigned i = threadIdx.x; i < pwords; i += blockDim.x) out[i] = ((unsigned *)box)[i];
}

#define CK(e) do { CUresult r_ = (e); if (r_) { const char *s; cuGetErrorName(r_, &s); printf("RESULT %s FAIL %s at %s\n", tag, s, #e); return 1; } } while (0)
#define RK(e) do { cudaError_t r_ = (e); if (r_) { printf("RESULT %s FAIL %s at %s\n", tag, cudaGetErrorName(r_), #e); return 1; } } while (0)

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: probe ref|file.ptx x y\n"); return 2; }
  int x = atoi(argv[2]), y = atoi(argv[3]);
  char tag[256]; snprintf(tag, sizeof tag, "%s (%d,%d)", argv[1], x, y);
  const int w = 100, h = 40, pitch = 104, bx = 64, by = 8;
  std::vector<uint16_t> host(h * pitch);
  for (int j = 0; j < h; j++) for (int i = 0; i < w; i++) host[j * pitch + i] = 1000 * j + i + 1;
  RK(cudaFree(0));
  uint16_t *src; unsigned *out;
  RK(cudaMalloc(&src, host.size() * 2)); RK(cudaMalloc(&out, 4096));
  RK(cudaMemcpy(src, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  RK(cudaMemset(out, 0xff, 4096));
  CUtensorMap m;
  cuuint64_t dims[2] = {w, h}, strides[1] = {2 * pitch};
  cuuint32_t box[2] = {bx, by}, es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, src, dims, strides, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  unsigned pexp = bx * by * 2, pwords = pexp / 4;
  if (std::string(argv[1]) == "ref") {
    tma_ref<<<1, 32>>>(m, out, x, y, pexp, pwords);
    RK(cudaGetLastError());
    RK(cudaDeviceSynchronize());
  } else {
    FILE *f = fopen(argv[1], "rb"); if (!f) { printf("RESULT %s FAIL open\n", tag); return 1; }
    std::vector<char> txt(1 << 20); size_t n = fread(txt.data(), 1, txt.size() - 1, f); txt[n] = 0; fclose(f);
    CUmodule mod; CUfunction fn;
    CK(cuModuleLoadData(&mod, txt.data()));
    CK(cuModuleGetFunction(&fn, mod, "tma_box"));
    unsigned long long pout = (unsigned long long)out;
    void *params[] = {&m, &pout, &x, &y, &pexp, &pwords};
    CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, params, 0));
    CK(cuCtxSynchronize());
  }
  std::vector<uint16_t> got(bx * by);
  RK(cudaMemcpy(got.data(), out, bx * by * 2, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int j = 0; j < by; j++) for (int i = 0; i < bx; i++) {
    int gx = x + i, gy = y + j;
    uint16_t want = (gx >= 0 && gx < w && gy >= 0 && gy < h) ? host[gy * pitch + gx] : 0;
    if (got[j * bx + i] != want && bad++ < 3) printf("  %s: element (%d,%d) = %d, want %d\n", tag, i, j, got[j * bx + i], want);
  }
  printf("RESULT %s %s\n", tag, bad ? "WRONG" : "PASS");
  return bad != 0;
}
