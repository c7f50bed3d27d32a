/* bench_compile - how long it takes to compile the library's GEMM and attention kernels.
 *
 *   bench_compile [--reps=N] [--arch=sm_XX] [--lib=DIR] [--require-gpu] [--verbose]
 *
 * For each kernel configuration it prints, in milliseconds (median of N runs, default 5):
 *
 *   emit     tile_emit to PTX text: front end, generic and GPU passes, LLVM. No GPU needed;
 *            the target is --arch, else the GPU's, else sm_90a.
 *   front    tile_compile_file for CUDA in a fresh context: parse, checks, IR generation and
 *            the generic passes.
 *   backend  tile_kernel_stats.compile_ms of the first tile_kernel_prepare: GPU passes, LLVM,
 *            and the driver's JIT of the PTX and module load.
 *   cold     wall time of that tile_compile_file + tile_kernel_prepare: the first use of a
 *            kernel in a process.
 *   cached   the same two calls again in the same context: an in-memory cache hit ("hit"
 *            says both the kernel and its specialization came from the cache).
 *
 * The driver's start-up (cuInit, the primary context) happens before the timed calls and is
 * reported on its own; one-time process set-up (LLVM's target registration, done by the
 * emit runs) is not in "cold" either. The driver also caches JIT results on disk, which would hide the JIT
 * from "cold"; this tool sets CUDA_CACHE_DISABLE=1 unless the environment already sets it.
 * Without a GPU only the emit column is measured and the GPU columns are marked skipped
 * (exit status 0, or 77 with --require-gpu). Exit status 1 when a compile fails or the
 * second compile was not a cache hit.
 *
 * lib/ is found with --lib, $TILE_LIB_DIR, ./lib, or <this program's folder>/../lib.      */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, setenv, readlink */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tile.h"
#include "bench_util.h"

enum { MAX_REPS = 100, MAX_DEFS = 16, MAX_PARAMS = 32 };

/* The configurations measured: a lib file, a kernel, its -D values and the sizes used for
 * the specialization that tile_kernel_prepare compiles. */
static const struct bench_case {
  const char *file, *kernel, *defines, *sizes;
} cases[] = {
    {"gemm.tile", "gemm", "T=f16", "M=1024,N=1024,K=1024"},
    {"gemm.tile", "gemm", "T=bf16,ACT=gelu,HAS_BIAS=true", "M=1024,N=1024,K=1024"},
    {"attention.tile", "attention", "T=f16,D=64", "B=1,H=8,HKV=8,N=1024,NK=1024"},
    {"attention.tile", "attention", "T=f16,D=128,CAUSAL=true,HAS_LSE=true", "B=1,H=8,HKV=8,N=1024,NK=1024"},
};

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
      *len = fread(buf, 1, (size_t)n, f);
      buf[*len] = 0;
    }
  }
  fclose(f);
  return buf;
}

/* "A=1,B=x" into defines pointing into `store` (modified). */
static unsigned split_defines(char *store, tile_define *d) {
  unsigned n = 0;
  for (char *tok = strtok(store, ","); tok && n < MAX_DEFS; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    d[n].name = tok;
    d[n++].value = eq + 1;
  }
  return n;
}

static long long size_of(const char *sizes, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = sizes; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, nl) == 0 && p[nl] == '=') return atoll(p + nl + 1);
  return -1;
}

/* Device buffers and arguments for one configuration, allocated once in the long-lived
 * context: device pointers are valid in every context (all use the primary context). */
struct bench_args {
  tile_arg args[MAX_PARAMS];
  void *bufs[MAX_PARAMS];
  unsigned n;
};

static tile_status make_args(tile_context *ctx, tile_kernel *k, const char *sizes, struct bench_args *ba) {
  memset(ba, 0, sizeof *ba);
  ba->n = tile_kernel_param_count(k);
  if (ba->n > MAX_PARAMS) return TILE_UNSUPPORTED;
  for (unsigned i = 0; i < ba->n; i++) {
    tile_param_info pi;
    tile_kernel_param(k, i, &pi);
    if (!pi.is_tensor) {
      bool is_float = pi.dtype == TILE_F32 || pi.dtype == TILE_F16 || pi.dtype == TILE_BF16 ||
                      pi.dtype == TILE_F64;
      ba->args[i] = is_float ? tile_arg_float(1.0) : tile_arg_int(1); /* any value will do */
      continue;
    }
    int64_t shape[TILE_MAX_RANK];
    size_t elems = 1;
    for (unsigned d = 0; d < pi.rank; d++) {
      shape[d] = pi.dim_symbol[d] ? size_of(sizes, pi.dim_symbol[d]) : pi.dim_size[d];
      if (shape[d] < 0) {
        fprintf(stderr, "bench_compile: no size for %s of %s\n", pi.dim_symbol[d], pi.name);
        return TILE_INVALID_ARGUMENT;
      }
      elems *= (size_t)shape[d];
    }
    if (pi.is_used) {
      tile_status st = tile_mem_alloc(ctx, TILE_DEVICE_CUDA, elems * tile_dtype_size(pi.dtype), &ba->bufs[i]);
      if (st) return st;
    }
    ba->args[i] = tile_arg_tensor(ba->bufs[i], pi.dtype, pi.rank, shape, NULL);
  }
  return TILE_OK;
}

static void free_args(tile_context *ctx, struct bench_args *ba) {
  for (unsigned i = 0; i < ba->n; i++) tile_mem_free(ctx, TILE_DEVICE_CUDA, ba->bufs[i]);
}

static void print_report(void *ud, const char *title, const char *text) {
  (void)ud;
  printf("    -- %s --\n%s", title, text);
}

struct row {
  double emit, front, backend, cold, cold_min, cached;
  bool hit, gpu_ok;
};

/* One cold + cached measurement in a fresh context. */
static tile_status measure_cold(const char *path, const tile_compile_options *co, struct bench_args *ba,
                                double *front, double *backend, double *cold, double *cached, bool *hit) {
  tile_context_options opts = {0};
  opts.cache_dir = ""; /* no on-disk cache: a real cold start */
  tile_context *ctx;
  tile_status st = tile_context_create(&opts, &ctx);
  if (st) return st;
  tile_device_info info;
  tile_kernel *k = NULL, *k2 = NULL;
  tile_kernel_stats ks;
  if ((st = tile_device_query(ctx, TILE_DEVICE_CUDA, &info))) goto out; /* driver start-up: untimed */
  double t0 = tl_now_ms();
  if ((st = tile_compile_file(ctx, path, co, &k))) goto out;
  double t1 = tl_now_ms();
  if ((st = tile_kernel_prepare(ctx, k, ba->args, ba->n))) goto out;
  double t2 = tl_now_ms();
  tile_kernel_get_stats(k, &ks);
  *front = t1 - t0;
  *cold = t2 - t0;
  *backend = ks.compile_ms;
  double t3 = tl_now_ms();
  if ((st = tile_compile_file(ctx, path, co, &k2))) goto out;
  if ((st = tile_kernel_prepare(ctx, k2, ba->args, ba->n))) goto out;
  *cached = tl_now_ms() - t3;
  tile_kernel_get_stats(k2, &ks);
  *hit = k2 == k && ks.cache_hit;
out:
  if (st) fprintf(stderr, "bench_compile: %s: %s\n", tile_status_name(st), tile_errmsg(ctx));
  tile_kernel_release(k2);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return st;
}

static void usage(FILE *f) {
  fputs("usage: bench_compile [--reps=N] [--arch=sm_80|sm_86|sm_89|sm_90|sm_90a] [--lib=DIR]\n"
        "                     [--require-gpu] [--verbose]\n",
        f);
}

int main(int argc, char **argv) {
  int reps = 5;
  const char *arch_opt = NULL, *lib_opt = NULL;
  bool require_gpu = false, verbose = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--reps=", 7) == 0) reps = atoi(a + 7);
    else if (strncmp(a, "--arch=", 7) == 0) arch_opt = a + 7;
    else if (strncmp(a, "--lib=", 6) == 0) lib_opt = a + 6;
    else if (strcmp(a, "--require-gpu") == 0) require_gpu = true;
    else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) verbose = true;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "bench_compile: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS) {
    fprintf(stderr, "bench_compile: --reps must be 1..%d\n", MAX_REPS);
    return 2;
  }
  char lib[4096];
  if (!find_lib(lib_opt, lib, sizeof lib)) {
    fprintf(stderr, "bench_compile: cannot find gemm.tile in '%s' (use --lib=DIR or TILE_LIB_DIR)\n", lib);
    return 2;
  }
  /* before the driver is loaded: make the driver's JIT really run each time */
  setenv("CUDA_CACHE_DISABLE", "1", 0);

  tile_context_options opts = {0};
  opts.cache_dir = "";
  tile_context *ctx;
  if (tile_context_create(&opts, &ctx)) {
    fprintf(stderr, "bench_compile: out of memory\n");
    return 1;
  }
  printf("bench_compile: %s, kernels from %s\n", tile_version(), lib);

  /* The long-lived context: it starts the driver (timed here, once) and keeps the primary
   * context retained, so the fresh contexts below do not pay for creating it again. */
  tile_device_info info;
  double t0 = tl_now_ms();
  bool gpu = tile_device_query(ctx, TILE_DEVICE_CUDA, &info) == TILE_OK;
  double init_ms = tl_now_ms() - t0;
  const char *arch = arch_opt ? arch_opt : gpu ? info.arch : "sm_90a";
  if (gpu) {
    printf("GPU: %s (%s), driver %d.%d, CUDA_CACHE_DISABLE=%s; driver start-up %.1f ms (not counted below)\n",
           info.name, info.arch, info.driver_version / 1000, info.driver_version % 1000 / 10,
           getenv("CUDA_CACHE_DISABLE"), init_ms);
    if (arch_opt && strcmp(arch_opt, info.arch) != 0)
      printf("note: emit targets %s; the GPU columns use the GPU's own target %s\n", arch_opt, info.arch);
  } else {
    printf("no GPU (%s)\nGPU rows skipped: only the emit column (tile_emit to PTX for %s) is measured\n",
           tile_errmsg(ctx), arch);
  }
  printf("times in ms, median of %d run%s\n\n", reps, reps == 1 ? "" : "s");
  printf("%-10s %-36s %9s | %8s %8s %8s %8s | %8s %4s\n", "kernel", "config", "emit PTX", "front", "backend",
         "cold", "(min)", "cached", "hit");

  int rc = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const struct bench_case *bc = &cases[c];
    char path[4200], defstore[256];
    tile_define defs[MAX_DEFS];
    snprintf(path, sizeof path, "%s/%s", lib, bc->file);
    snprintf(defstore, sizeof defstore, "%s", bc->defines);
    unsigned nd = split_defines(defstore, defs);
    size_t len = 0;
    char *src = read_file(path, &len);
    if (!src) {
      fprintf(stderr, "bench_compile: cannot read %s: %s\n", path, strerror(errno));
      rc = 1;
      continue;
    }
    struct row r = {0};
    double t[MAX_REPS], front[MAX_REPS], backend[MAX_REPS], cold[MAX_REPS], cached[MAX_REPS];
    bool ok = true;

    /* emit: the whole compiler up to PTX text, no driver involved */
    tile_compile_options co = {0};
    co.kernel = bc->kernel;
    co.defines = defs;
    co.ndefines = nd;
    co.device = TILE_DEVICE_CUDA;
    co.arch = arch;
    for (int i = 0; i < reps && ok; i++) {
      tile_emit_options eo = {0};
      eo.what = TILE_EMIT_PTX;
      eo.time_passes = verbose && i == 0;
      eo.report = print_report;
      char *out = NULL;
      size_t out_len = 0;
      double e0 = tl_now_ms();
      tile_status st = tile_emit(ctx, path, src, len, &co, &eo, &out, &out_len);
      t[i] = tl_now_ms() - e0;
      if (st) {
        fprintf(stderr, "bench_compile: emit %s %s: %s\n", bc->kernel, bc->defines, tile_errmsg(ctx));
        ok = false;
      }
      tile_free(out);
    }
    if (ok) r.emit = median(t, reps);

    /* cold and cached, on the GPU, for the GPU's own target */
    if (ok && gpu) {
      co.arch = NULL;
      tile_kernel *k = NULL;
      struct bench_args ba = {0};
      tile_status st = tile_compile_file(ctx, path, &co, &k);
      if (!st) st = make_args(ctx, k, bc->sizes, &ba);
      if (st) {
        fprintf(stderr, "bench_compile: %s %s: %s\n", bc->kernel, bc->defines, tile_errmsg(ctx));
        ok = false;
      }
      r.hit = true;
      for (int i = 0; i < reps && ok; i++) {
        bool hit = false;
        ok = measure_cold(path, &co, &ba, &front[i], &backend[i], &cold[i], &cached[i], &hit) == TILE_OK;
        r.hit &= hit;
      }
      if (ok) {
        r.gpu_ok = true;
        r.front = median(front, reps);
        r.backend = median(backend, reps);
        r.cold = median(cold, reps);
        r.cold_min = cold[0]; /* sorted by median() */
        r.cached = median(cached, reps);
      }
      free_args(ctx, &ba);
      tile_kernel_release(k);
    }
    free(src);

    char emit_s[32] = "failed";
    if (ok || r.emit > 0) snprintf(emit_s, sizeof emit_s, "%.1f", r.emit);
    printf("%-10s %-36s %9s | ", bc->kernel, bc->defines, emit_s);
    if (r.gpu_ok)
      printf("%8.1f %8.1f %8.1f %8.1f | %8.3f %4s\n", r.front, r.backend, r.cold, r.cold_min, r.cached,
             r.hit ? "yes" : "NO");
    else
      printf("%8s %8s %8s %8s | %8s %4s\n", "-", "-", "-", "-", "-", gpu ? "FAIL" : "skip");
    if (!ok || (r.gpu_ok && !r.hit)) rc = 1;
  }
  if (gpu)
    printf("\nfront + backend ~ cold; cold - emit ~ the driver's JIT (ptxas) and module load\n");
  tile_context_destroy(ctx);
  if (rc) return rc;
  return !gpu && require_gpu ? 77 : 0;
}
