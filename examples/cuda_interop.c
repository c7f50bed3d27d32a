/* cuda_interop.c - use tile kernels inside a program that manages the GPU with the CUDA runtime.
 *
 * A host program (or framework) that already uses the CUDA runtime owns the buffers and the
 * stream. This example
 *  1. allocates device buffers with cudaMalloc and creates a stream with cudaStreamCreate;
 *  2. queues the input copy on that stream (cudaMemcpyAsync);
 *  3. passes the cudaMalloc pointers and the stream straight to tile_launch: the library
 *     works in the device's primary context, which is the one the runtime uses, so the
 *     pointers are valid for it and a cudaStream_t is a CUstream;
 *  4. queues the copy back on the same stream and waits with cudaStreamSynchronize: no tile
 *     call is needed to order or finish the work;
 *  5. checks the result (RMS normalization, Y = X * W / sqrt(mean(X^2) + eps)) against C.
 *
 * The CUDA runtime is loaded with dlopen, not linked, so this builds where CUDA is not
 * installed (a real program would include cuda_runtime.h and link -lcudart). It looks for
 * $TILE_LIBCUDART, then libcudart.so.13, .so.12, libcudart.so, then the same names in
 * /usr/local/cuda/lib64.
 *
 * Usage: example_cuda_interop [ROWS COLS]     (default 1000 x 777)
 * Exit status: 0 when the result matches, 1 on a failure, 77 (skipped) when there is no
 * CUDA runtime library or no GPU.                                                          */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* dlopen */
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"
#include "example_util.h"

#define EXIT_SKIP 77

/* ---- the few CUDA runtime entry points used, declared as in cuda_runtime_api.h ---- */
typedef int cudaError_t; /* cudaSuccess = 0 */
typedef struct CUstream_st *cudaStream_t;
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };

static struct {
  cudaError_t (*GetDeviceCount)(int *count);
  cudaError_t (*SetDevice)(int device);
  cudaError_t (*Malloc)(void **ptr, size_t bytes);
  cudaError_t (*Free)(void *ptr);
  cudaError_t (*MemcpyAsync)(void *dst, const void *src, size_t bytes, int kind, cudaStream_t s);
  cudaError_t (*StreamCreate)(cudaStream_t *s);
  cudaError_t (*StreamSynchronize)(cudaStream_t s);
  cudaError_t (*StreamDestroy)(cudaStream_t s);
  const char *(*GetErrorString)(cudaError_t e);
} cuda;

/* dlsym returns void *; ISO C has no cast from it to a function pointer, so copy the bits
 * (POSIX guarantees they have the same representation). */
static int resolve(void *lib, const char *name, void *fn_ptr_out) {
  void *p = dlsym(lib, name);
  if (!p) {
    printf("SKIP: the CUDA runtime library has no %s\n", name);
    return 0;
  }
  memcpy(fn_ptr_out, &p, sizeof p);
  return 1;
}

static void *load_cudart(void) {
  const char *names[] = {getenv("TILE_LIBCUDART"),
                         "libcudart.so.13",
                         "libcudart.so.12",
                         "libcudart.so",
                         "/usr/local/cuda/lib64/libcudart.so.13",
                         "/usr/local/cuda/lib64/libcudart.so.12",
                         "/usr/local/cuda/lib64/libcudart.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (!names[i] || !names[i][0]) continue;
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      printf("CUDA runtime: %s\n", names[i]);
      return lib;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int64_t M = 1000, N = 777;
  if (argc == 3) {
    M = atoll(argv[1]);
    N = atoll(argv[2]);
  }
  if (M <= 0 || N <= 0 || (argc != 1 && argc != 3)) {
    fprintf(stderr, "usage: %s [ROWS COLS]\n", argv[0]);
    return 1;
  }

  /* ---- 1. The CUDA runtime: present, and sees a GPU? Otherwise there is nothing to show. */
  void *lib = load_cudart();
  if (!lib) {
    printf("SKIP: no CUDA runtime library (libcudart.so.13, .so.12 or libcudart.so; set "
           "TILE_LIBCUDART to its path)\n");
    return EXIT_SKIP;
  }
  if (!resolve(lib, "cudaGetDeviceCount", &cuda.GetDeviceCount) ||
      !resolve(lib, "cudaSetDevice", &cuda.SetDevice) || !resolve(lib, "cudaMalloc", &cuda.Malloc) ||
      !resolve(lib, "cudaFree", &cuda.Free) || !resolve(lib, "cudaMemcpyAsync", &cuda.MemcpyAsync) ||
      !resolve(lib, "cudaStreamCreate", &cuda.StreamCreate) ||
      !resolve(lib, "cudaStreamSynchronize", &cuda.StreamSynchronize) ||
      !resolve(lib, "cudaStreamDestroy", &cuda.StreamDestroy) ||
      !resolve(lib, "cudaGetErrorString", &cuda.GetErrorString)) {
    dlclose(lib);
    return EXIT_SKIP;
  }
  int ndev = 0;
  cudaError_t ce = cuda.GetDeviceCount(&ndev);
  if (ce != 0 || ndev == 0) {
    printf("SKIP: the CUDA runtime sees no GPU (%s)\n", ce ? cuda.GetErrorString(ce) : "0 devices");
    dlclose(lib);
    return EXIT_SKIP;
  }

  int ok = 0;
  size_t xbytes = (size_t)(M * N) * sizeof(float);
  float *x = malloc(xbytes), *w = malloc((size_t)N * sizeof(float)), *y = malloc(xbytes);
  float *rstd = malloc((size_t)M * sizeof(float));
  void *d_x = NULL, *d_w = NULL, *d_y = NULL, *d_rstd = NULL;
  cudaStream_t stream = NULL;
  tile_context *ctx = NULL;
  tile_kernel *k = NULL;
  if (!x || !w || !y || !rstd) {
    fprintf(stderr, "out of host memory\n");
    goto done;
  }
  for (int64_t i = 0; i < M * N; i++) x[i] = uniform();
  for (int64_t j = 0; j < N; j++) w[j] = 1.0f + 0.5f * uniform();

/* A failed runtime call: print it and clean up. */
#define CUDA_TRY(call)                                                                         \
  do {                                                                                         \
    if ((ce = (call)) != 0) {                                                                  \
      fprintf(stderr, "%s: %s\n", #call, cuda.GetErrorString(ce));                            \
      goto done;                                                                               \
    }                                                                                          \
  } while (0)

  /* ---- 2. The host program's own buffers and stream, made with the runtime. */
  CUDA_TRY(cuda.SetDevice(0)); /* device 0's primary context: also the tile library's default */
  CUDA_TRY(cuda.StreamCreate(&stream));
  CUDA_TRY(cuda.Malloc(&d_x, xbytes));
  CUDA_TRY(cuda.Malloc(&d_w, (size_t)N * sizeof(float)));
  CUDA_TRY(cuda.Malloc(&d_y, xbytes));
  CUDA_TRY(cuda.Malloc(&d_rstd, (size_t)M * sizeof(float)));
  CUDA_TRY(cuda.MemcpyAsync(d_x, x, xbytes, cudaMemcpyHostToDevice, stream));
  CUDA_TRY(cuda.MemcpyAsync(d_w, w, (size_t)N * sizeof(float), cudaMemcpyHostToDevice, stream));

  /* ---- 3. Compile rmsnorm for the GPU and launch it on the runtime's stream. */
  if (tile_context_create(NULL, &ctx) != TILE_OK) {
    fprintf(stderr, "cannot create a tile context\n");
    goto done;
  }
  char path[1024];
  lib_path(path, sizeof path, "rmsnorm.tile");
  tile_define defines[] = {{"T", "f32"}};
  tile_compile_options co = {0};
  co.defines = defines;
  co.ndefines = 1;
  co.device = TILE_DEVICE_CUDA; /* the tile context opens device 0 (tile_context_options) */
  const float eps = 1e-5f;
  tile_status st = tile_compile_file(ctx, path, &co, &k);
  if (st == TILE_OK) {
    /* (X: T[M, N], W: T[N], Y: out T[M, N], Rstd: out f32[M], eps: f32) */
    tile_arg args[] = {
        tile_arg_tensor(d_x, TILE_F32, 2, (int64_t[]){M, N}, NULL),
        tile_arg_tensor(d_w, TILE_F32, 1, (int64_t[]){N}, NULL),
        tile_arg_tensor(d_y, TILE_F32, 2, (int64_t[]){M, N}, NULL),
        tile_arg_tensor(d_rstd, TILE_F32, 1, (int64_t[]){M}, NULL),
        tile_arg_float(eps),
    };
    tile_launch_options lo = {.stream = stream}; /* a cudaStream_t is a CUstream */
    st = tile_launch(ctx, k, args, sizeof args / sizeof args[0], &lo);
  }
  if (st != TILE_OK) {
    fprintf(stderr, "%s: %s\n", tile_status_name(st), tile_errmsg(ctx));
    goto done;
  }
  printf("launched %s [%s] on a cudaStreamCreate stream with cudaMalloc buffers\n",
         tile_kernel_name(k), tile_kernel_config(k));

  /* ---- 4. Copy back on the same stream and wait, with the runtime alone. */
  CUDA_TRY(cuda.MemcpyAsync(y, d_y, xbytes, cudaMemcpyDeviceToHost, stream));
  CUDA_TRY(cuda.MemcpyAsync(rstd, d_rstd, (size_t)M * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_TRY(cuda.StreamSynchronize(stream));

  /* ---- 5. Check against the definition, in double. */
  double err2 = 0, ref2 = 0, max_abs = 0, rstd_err = 0;
  for (int64_t i = 0; i < M; i++) {
    double ss = 0;
    for (int64_t j = 0; j < N; j++) ss += (double)x[i * N + j] * x[i * N + j];
    double r = 1.0 / sqrt(ss / (double)N + eps);
    rstd_err = fmax(rstd_err, isnan(rstd[i]) ? INFINITY : fabs(rstd[i] - r) / r);
    for (int64_t j = 0; j < N; j++) {
      double want = x[i * N + j] * r * w[j], got = y[i * N + j];
      double d = isnan(got) ? INFINITY : fabs(got - want);
      err2 += d * d;
      ref2 += want * want;
      if (d > max_abs) max_abs = d;
    }
  }
  double rel = sqrt(err2 / ref2);
  const double tol = 1e-4; /* f32 throughout (the GPU's rsqrt is an approximation) */
  ok = rel <= tol && rstd_err <= tol;
  printf("Y[%lld x %lld]: relative L2 error %.3e, max abs error %.3e; Rstd max relative error "
         "%.3e (tolerance %.0e): %s\n",
         (long long)M, (long long)N, rel, max_abs, rstd_err, tol, ok ? "PASS" : "FAIL");

done:
  /* The tile context goes first: it holds the primary context only while it lives, and the
   * runtime keeps its own reference, so the cudaMalloc memory stays valid either way. */
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  if (d_x) cuda.Free(d_x);
  if (d_w) cuda.Free(d_w);
  if (d_y) cuda.Free(d_y);
  if (d_rstd) cuda.Free(d_rstd);
  if (stream) cuda.StreamDestroy(stream);
  free(x);
  free(w);
  free(y);
  free(rstd);
  dlclose(lib);
  return ok ? 0 : 1;
}
