/* aot_gemm.c - the GPU check of `tilec aot` (tools/gpu_check.sh): a host program around the
 * launcher generated for lib/gemm.tile's gemm (f16, `tilec aot ... -o DIR/gemm_aot`), built
 * with a plain cc, the generated gemm_aot.c and -lcuda. It declares the Driver API calls it
 * makes itself (no cuda.h), uses the device's primary context and the legacy stream.
 *
 *   aot_gemm check M N K     C = A @ B on random f16 inputs; 4096 entries of C (and its
 *                            corners) against a double-precision dot product:
 *                            "check C rel_l2=... max_abs=... nan=N"; exit 1 over 1e-2
 * Built with -DAOT_WITH_JIT (and linked with libtile) it also runs the JIT kernel:
 *   aot_gemm compare M N K   the AOT and JIT results on the same inputs; exit 1 unless they
 *                            agree to rel_l2 <= 1e-6 (the same code: normally bit for bit)
 *   aot_gemm bench M N K     median times of both, alternating, with events:
 *                            "time median A ms (min B ms, R runs), T TFLOP/s, jit median J ms
 *                            (AOT/JIT x)"; exit 1 when the AOT launch is more than 10% slower
 * M, N and K must be multiples of 16 (the aligned code tilec aot generates by default). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_aot.h"
#ifdef AOT_WITH_JIT
#include "tile.h"
#endif

int cuInit(unsigned flags);
int cuDeviceGet(int *dev, int ordinal);
int cuDevicePrimaryCtxRetain(void **ctx, int dev);
int cuCtxSetCurrent(void *ctx);
int cuCtxSynchronize(void);
int cuMemAlloc_v2(uint64_t *p, size_t bytes);
int cuMemFree_v2(uint64_t p);
int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes);
int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes);
int cuEventCreate(void **e, unsigned flags);
int cuEventRecord(void *e, void *stream);
int cuEventSynchronize(void *e);
int cuEventElapsedTime(float *ms, void *start, void *end);

#define CU(call)                                                                                 \
  do {                                                                                           \
    int r_ = (call);                                                                             \
    if (r_) {                                                                                    \
      fprintf(stderr, "aot_gemm: %s failed: CUresult %d\n", #call, r_);                          \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static uint16_t f16_from_float(float f) { /* round to nearest even; inputs are small and finite */
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
  if (exp < 103) return (uint16_t)sign;
  if (exp < 113) { /* subnormal half */
    mant |= 0x800000u;
    uint32_t shift = 126 - exp, h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((exp - 112) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    float f = (float)mant / 16777216.0f; /* 2^-24 */
    return sign ? -f : f;
  }
  u = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static float uniform(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static int launch_aot(uint64_t a, uint64_t b, uint64_t c, int64_t M, int64_t N, int64_t K) {
  tile_aot_tensor A = {(void *)(uintptr_t)a, {M, K}, {0}}, B = {(void *)(uintptr_t)b, {K, N}, {0}},
                  C = {(void *)(uintptr_t)c, {M, N}, {0}};
  int st = gemm_aot_gemm(NULL, &A, &B, &C, NULL, NULL, 1.0f, 0.0f);
  if (st) fprintf(stderr, "aot_gemm: the AOT launch failed (%d): %s\n", st, gemm_aot_errmsg());
  return st;
}

#ifdef AOT_WITH_JIT
static tile_context *jit_ctx;
static tile_kernel *jit_kernel;
static int launch_jit(uint64_t a, uint64_t b, uint64_t c, int64_t M, int64_t N, int64_t K) {
  if (!jit_ctx) {
    const char *dir = getenv("TILE_LIB_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/gemm.tile", dir ? dir : "lib");
    tile_compile_options co = {.kernel = "gemm", .device = TILE_DEVICE_CUDA};
    if (tile_context_create(NULL, &jit_ctx) || tile_compile_file(jit_ctx, path, &co, &jit_kernel)) {
      fprintf(stderr, "aot_gemm: JIT: %s\n", jit_ctx ? tile_errmsg(jit_ctx) : "no context");
      return 1;
    }
  }
  tile_arg args[7] = {tile_arg_tensor((void *)(uintptr_t)a, TILE_F16, 2, (int64_t[]){M, K}, NULL),
                      tile_arg_tensor((void *)(uintptr_t)b, TILE_F16, 2, (int64_t[]){K, N}, NULL),
                      tile_arg_tensor((void *)(uintptr_t)c, TILE_F16, 2, (int64_t[]){M, N}, NULL),
                      tile_arg_tensor(NULL, TILE_F16, 1, (int64_t[]){N}, NULL),
                      tile_arg_tensor(NULL, TILE_F16, 2, (int64_t[]){M, N}, NULL),
                      tile_arg_float(1.0),
                      tile_arg_float(0.0)};
  if (tile_launch(jit_ctx, jit_kernel, args, 7, NULL)) {
    fprintf(stderr, "aot_gemm: the JIT launch failed: %s\n", tile_errmsg(jit_ctx));
    return 1;
  }
  return 0;
}

static int cmp_float(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return a < b ? -1 : a > b;
}
#endif

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: aot_gemm check|compare|bench M N K\n");
    return 2;
  }
  const char *mode = argv[1];
  int64_t M = atoll(argv[2]), N = atoll(argv[3]), K = atoll(argv[4]);
  if (M <= 0 || N <= 0 || K <= 0) {
    fprintf(stderr, "aot_gemm: M, N and K must be positive\n");
    return 2;
  }
  void *ctx;
  int dev;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
  uint16_t *a = malloc(na * 2), *b = malloc(nb * 2), *c = malloc(nc * 2), *c2 = malloc(nc * 2);
  if (!a || !b || !c || !c2) return 1;
  for (size_t i = 0; i < na; i++) a[i] = f16_from_float(uniform());
  for (size_t i = 0; i < nb; i++) b[i] = f16_from_float(uniform());
  uint64_t da, db, dc, dc2;
  CU(cuMemAlloc_v2(&da, na * 2));
  CU(cuMemAlloc_v2(&db, nb * 2));
  CU(cuMemAlloc_v2(&dc, nc * 2));
  CU(cuMemAlloc_v2(&dc2, nc * 2));
  CU(cuMemcpyHtoD_v2(da, a, na * 2));
  CU(cuMemcpyHtoD_v2(db, b, nb * 2));
  if (launch_aot(da, db, dc, M, N, K)) return 1;
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH_v2(c, dc, nc * 2));
  int rc = 0;
  if (strcmp(mode, "check") == 0) {
    double err2 = 0, ref2 = 0, max_abs = 0;
    int nan = 0;
    for (int s = 0; s < 4100; s++) {
      int64_t i = s < 4 ? (s & 1) * (M - 1) : (int64_t)(rng % (uint64_t)M);
      int64_t j = s < 4 ? (s >> 1) * (N - 1) : (int64_t)((rng >> 20) % (uint64_t)N);
      uniform();
      double want = 0;
      for (int64_t p = 0; p < K; p++) want += (double)f16_to_float(a[i * K + p]) * f16_to_float(b[p * N + j]);
      double got = f16_to_float(c[i * N + j]), d = fabs(got - want);
      if (isnan(got)) nan++;
      else err2 += d * d, max_abs = d > max_abs ? d : max_abs;
      ref2 += want * want;
    }
    double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
    printf("check C rel_l2=%.3g max_abs=%.3g nan=%d (4100 entries against double)\n", rel, max_abs, nan);
    rc = rel <= 1e-2 && !nan ? 0 : 1;
#ifdef AOT_WITH_JIT
  } else if (strcmp(mode, "compare") == 0) {
    if (launch_jit(da, db, dc2, M, N, K)) return 1;
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(c2, dc2, nc * 2));
    double err2 = 0, ref2 = 0, max_abs = 0;
    size_t differ = 0, nan = 0;
    for (size_t i = 0; i < nc; i++) {
      double x = f16_to_float(c[i]), y = f16_to_float(c2[i]), d = fabs(x - y);
      differ += c[i] != c2[i];
      if (isnan(x) || isnan(y)) nan++;
      else err2 += d * d, ref2 += y * y, max_abs = d > max_abs ? d : max_abs;
    }
    double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
    printf("check C rel_l2=%.3g max_abs=%.3g nan=%zu (AOT against JIT: %zu of %zu elements differ)\n", rel, max_abs,
           nan, differ, nc);
    rc = rel <= 1e-6 && !nan ? 0 : 1;
  } else if (strcmp(mode, "bench") == 0) {
    enum { WARMUP = 10, REPS = 50 };
    float t_aot[REPS], t_jit[REPS];
    void *e0, *e1;
    CU(cuEventCreate(&e0, 0));
    CU(cuEventCreate(&e1, 0));
    for (int i = 0; i < WARMUP; i++)
      if (launch_aot(da, db, dc, M, N, K) || launch_jit(da, db, dc2, M, N, K)) return 1;
    for (int i = 0; i < REPS; i++)
      for (int which = 0; which < 2; which++) {
        CU(cuEventRecord(e0, NULL));
        if (which ? launch_jit(da, db, dc2, M, N, K) : launch_aot(da, db, dc, M, N, K)) return 1;
        CU(cuEventRecord(e1, NULL));
        CU(cuEventSynchronize(e1));
        CU(cuEventElapsedTime(which ? &t_jit[i] : &t_aot[i], e0, e1));
      }
    qsort(t_aot, REPS, sizeof(float), cmp_float);
    qsort(t_jit, REPS, sizeof(float), cmp_float);
    double med_aot = 0.5 * (t_aot[REPS / 2 - 1] + t_aot[REPS / 2]), med_jit = 0.5 * (t_jit[REPS / 2 - 1] + t_jit[REPS / 2]);
    double tflops = 2.0 * (double)M * (double)N * (double)K / (med_aot * 1e-3) / 1e12;
    printf("time median %.4f ms (min %.4f ms, %d runs), %.1f TFLOP/s, jit median %.4f ms (AOT/JIT %.3f)\n", med_aot,
           (double)t_aot[0], REPS, tflops, med_jit, med_aot / med_jit);
    rc = med_aot <= 1.10 * med_jit ? 0 : 1;
#endif
  } else if (strcmp(mode, "check") != 0) {
    fprintf(stderr, "aot_gemm: unknown mode '%s'%s\n", mode,
#ifdef AOT_WITH_JIT
            ""
#else
            " (compare and bench need the build with -DAOT_WITH_JIT)"
#endif
    );
    return 2;
  }
  return rc;
}
