/* aot_host.c - a host program for the launchers tilec aot generates (tests/cli/aot.sh): built
 * with a plain cc from this file, the generated gemm_aot.c and softmax_aot.c, and linked with
 * -lcuda, which the test points at the fake driver (tests/cli/fake_libcuda.c). It declares
 * the few Driver API calls it makes itself, as the generated code does: no cuda.h.
 *
 *   aot_host gemm M N K          one GEMM launch (f16, contiguous, bias and R allocated too)
 *   aot_host bmm BATCH M N K     one batched GEMM launch (f16, contiguous)
 *   aot_host softmax M N [PAD]   one softmax launch (f32; rows PAD elements apart, default N)
 *   aot_host errors              bad arguments, one line each: "NAME: STATUS MESSAGE"
 *   aot_host nocontext           a launch in a thread without a current context
 * Each launch prints "NAME: STATUS MESSAGE" (STATUS 0: launched); exit status 0 unless the
 * setup itself failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_aot.h"
#include "softmax_aot.h"

int cuInit(unsigned flags);
int cuDeviceGet(int *dev, int ordinal);
int cuDevicePrimaryCtxRetain(void **ctx, int dev);
int cuCtxSetCurrent(void *ctx);
int cuMemAlloc_v2(uint64_t *p, size_t bytes);

static void *device_alloc(size_t bytes) {
  uint64_t p = 0;
  if (cuMemAlloc_v2(&p, bytes ? bytes : 1)) {
    fprintf(stderr, "aot_host: cuMemAlloc failed\n");
    exit(1);
  }
  return (void *)(uintptr_t)p;
}

static tile_aot_tensor tensor2(void *data, int64_t rows, int64_t cols) {
  tile_aot_tensor t = {data, {rows, cols, 0, 0}, {0, 0, 0, 0}};
  return t;
}

static void report(const char *name, int status, const char *msg) {
  printf("%s: %d %s\n", name, status, status ? msg : "");
}

/* A GEMM call with A, B and C of the given shapes (all else as in `gemm M N K`). */
static int gemm(const tile_aot_tensor *a, const tile_aot_tensor *b, const tile_aot_tensor *c) {
  return gemm_aot_gemm(NULL, a, b, c, NULL, NULL, 1.0f, 0.0f);
}

static void errors(void) {
  const int64_t M = 128, N = 256, K = 64;
  char *a = device_alloc((size_t)(M * K * 2 + 64)), *b = device_alloc((size_t)(K * N * 2)), *c = device_alloc((size_t)(M * N * 2));
  tile_aot_tensor A = tensor2(a, M, K), B = tensor2(b, K, N), C = tensor2(c, M, N);
  report("ok", gemm(&A, &B, &C), gemm_aot_errmsg());
  tile_aot_tensor B2 = tensor2(b, K + 16, N);
  report("k-mismatch", gemm(&A, &B2, &C), gemm_aot_errmsg());
  tile_aot_tensor A0 = tensor2(NULL, M, K);
  report("null-a", gemm(&A0, &B, &C), gemm_aot_errmsg());
  report("null-a-struct", gemm(NULL, &B, &C), gemm_aot_errmsg());
  tile_aot_tensor Am = tensor2(a + 2, M, K);
  report("misaligned", gemm(&Am, &B, &C), gemm_aot_errmsg());
  tile_aot_tensor As = tensor2(a, M, K / 2);
  As.strides[0] = K;
  As.strides[1] = 2;
  tile_aot_tensor Bs = tensor2(b, K / 2, N);
  report("last-stride", gemm(&As, &Bs, &C), gemm_aot_errmsg());
  tile_aot_tensor A100 = tensor2(a, 100, K), C100 = tensor2(c, 100, N);
  report("m-unaligned", gemm(&A100, &B, &C100), gemm_aot_errmsg());
  tile_aot_tensor An = tensor2(a, -1, K);
  report("negative", gemm(&An, &B, &C), gemm_aot_errmsg());
  tile_aot_tensor Ab = tensor2(a, M, K);
  Ab.strides[0] = K + 4; /* 136 bytes apart: not a multiple of 16 */
  Ab.strides[1] = 1;
  report("row-stride", gemm(&Ab, &B, &C), gemm_aot_errmsg());
  tile_aot_tensor Ae = tensor2(a, 0, K), Ce = tensor2(c, 0, N);
  report("empty", gemm(&Ae, &B, &Ce), gemm_aot_errmsg());
  /* softmax was generated with --unaligned=also: any row count and row stride runs */
  float *x = device_alloc(100 * 1001 * 4), *y = device_alloc(100 * 1001 * 4);
  tile_aot_tensor X = tensor2(x, 100, 1000), Y = tensor2(y, 100, 1000);
  X.strides[0] = 1001, X.strides[1] = 1;
  report("softmax-unaligned", softmax_aot_softmax(NULL, &X, &Y), softmax_aot_errmsg());
  tile_aot_tensor Y2 = tensor2(y, 100, 999);
  report("softmax-mismatch", softmax_aot_softmax(NULL, &X, &Y2), softmax_aot_errmsg());
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: aot_host gemm M N K | bmm BATCH M N K | softmax M N [PAD] | errors | nocontext\n");
    return 2;
  }
  if (strcmp(argv[1], "nocontext") == 0) {
    cuInit(0);
    tile_aot_tensor X = tensor2((void *)(uintptr_t)4096, 16, 16), Y = X;
    report("nocontext", softmax_aot_softmax(NULL, &X, &Y), softmax_aot_errmsg());
    return 0;
  }
  void *ctx = NULL;
  int dev = 0;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
    fprintf(stderr, "aot_host: no CUDA context\n");
    return 1;
  }
  if (strcmp(argv[1], "gemm") == 0 && argc == 5) {
    int64_t M = atoll(argv[2]), N = atoll(argv[3]), K = atoll(argv[4]);
    tile_aot_tensor A = tensor2(device_alloc((size_t)(M * K * 2)), M, K), B = tensor2(device_alloc((size_t)(K * N * 2)), K, N),
                    C = tensor2(device_alloc((size_t)(M * N * 2)), M, N), R = tensor2(device_alloc((size_t)(M * N * 2)), M, N);
    tile_aot_tensor bias = {device_alloc((size_t)N * 2), {N, 0, 0, 0}, {0, 0, 0, 0}};
    report("gemm", gemm_aot_gemm(NULL, &A, &B, &C, &bias, &R, 1.0f, 0.0f), gemm_aot_errmsg());
  } else if (strcmp(argv[1], "bmm") == 0 && argc == 6) {
    int64_t Bt = atoll(argv[2]), M = atoll(argv[3]), N = atoll(argv[4]), K = atoll(argv[5]);
    tile_aot_tensor A = {device_alloc((size_t)(Bt * M * K * 2)), {Bt, M, K, 0}, {0, 0, 0, 0}};
    tile_aot_tensor B = {device_alloc((size_t)(Bt * K * N * 2)), {Bt, K, N, 0}, {0, 0, 0, 0}};
    tile_aot_tensor C = {device_alloc((size_t)(Bt * M * N * 2)), {Bt, M, N, 0}, {0, 0, 0, 0}};
    report("bmm", gemm_aot_bmm(NULL, &A, &B, &C), gemm_aot_errmsg());
  } else if (strcmp(argv[1], "softmax") == 0 && (argc == 4 || argc == 5)) {
    int64_t M = atoll(argv[2]), N = atoll(argv[3]), pad = argc == 5 ? atoll(argv[4]) : N;
    tile_aot_tensor X = tensor2(device_alloc((size_t)(M * pad * 4)), M, N), Y = tensor2(device_alloc((size_t)(M * N * 4)), M, N);
    X.strides[0] = pad, X.strides[1] = 1;
    report("softmax", softmax_aot_softmax(NULL, &X, &Y), softmax_aot_errmsg());
  } else if (strcmp(argv[1], "errors") == 0) {
    errors();
  } else {
    fprintf(stderr, "aot_host: unknown command '%s'\n", argv[1]);
    return 2;
  }
  return 0;
}
