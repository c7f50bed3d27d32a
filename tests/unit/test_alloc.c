/* test_alloc.c - the allocation hook (tile_context_options.alloc) and allocation failures.
 *
 * A counting hook checks that every block the library takes from it is given back by
 * tile_context_destroy (and by tile_free / tile_tune_result_free for what the caller
 * holds), with the size it was allocated with. The sweeps fail the 1st, 2nd, 3rd, ...
 * allocation of an operation until a run completes without reaching the failure; each
 * failure must come back as TILE_NOMEM with a message (never a crash, an abort or a silent
 * success), leave nothing allocated once the context is destroyed, and leave the context
 * usable: the same operation run again without failures succeeds and gives the right
 * answer. Paths swept, every allocation of each:
 *   compile   context creation + tile_compile_string of lib/gemm.tile, attention.tile and
 *             layernorm.tile (CPU), of a source with errors (diagnostics), and
 *             tile_compile_file (the read)
 *   emit      tile_emit of softmax's PTX (the GPU passes and codegen without a driver)
 *   cuda      context creation + compile + tile_kernel_prepare of lib/softmax.tile on the
 *             fake driver (tests/cli/fake_libcuda.c): the GPU passes, codegen to PTX, the
 *             driver load (LLVM's own allocations are not hooked)
 *   launch    tile_launch (and tile_bench) of a GEMM with bias and scaling on the CPU
 *             interpreter
 *   tune      tile_tune of a small kernel on the CPU (4 configurations, compile threads
 *             off so that the order of allocations is the same in every run; and with two
 *             compile threads, where it is not)
 *   cache     the CUDA path with the on-disk cache on: a store that runs out of memory is
 *             best effort (counted in tile_cache_stats.store_failed), everything else fails
 * The number of allocation points of each path is printed (stderr). SWEEP_TRACE=1 prints
 * each run's number and the stack of the allocation made to fail (addr2line -e tile_tests
 * turns the offsets into lines).                                                          */
#include <criterion/criterion.h>
#include <execinfo.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "ref.h"
#include "rt.h"
#include "testfiles.h"
#include "tile.h"

/* ---- the hook ---- */

struct hook {
  pthread_mutex_t mu;
  long calls;      /* allocations and resizes attempted while armed */
  long fail_at;    /* the attempt to fail (1-based); 0 = none */
  bool armed;      /* count (and fail) only while armed */
  bool failed;     /* the failure was injected */
  long live;       /* blocks outstanding */
  long total;      /* blocks ever allocated */
  long bad;        /* frees or resizes with a wrong size or of a block not ours */
};

static struct hook H = {.mu = PTHREAD_MUTEX_INITIALIZER};

enum { MAGIC = 0x7a11c0de };
struct header { /* 16 bytes: keeps malloc's alignment */
  uint32_t magic;
  uint32_t pad;
  uint64_t size;
};

static void *hook_fn(void *ud, void *p, size_t old, size_t n) {
  struct hook *h = ud;
  struct header *b = p ? (struct header *)p - 1 : NULL;
  pthread_mutex_lock(&h->mu);
  if (b && (b->magic != MAGIC || b->size != old)) h->bad++;
  if (n == 0) { /* free */
    if (b) {
      h->live--;
      b->magic = 0;
    }
    pthread_mutex_unlock(&h->mu);
    free(b);
    return NULL;
  }
  bool fail = false;
  if (h->armed) {
    h->calls++;
    if (h->calls == h->fail_at) fail = h->failed = true;
  }
  pthread_mutex_unlock(&h->mu);
  if (fail && getenv("SWEEP_TRACE")) {
    void *bt[32];
    int nb = backtrace(bt, 32);
    backtrace_symbols_fd(bt, nb, 2);
  }
  if (fail) return NULL;
  struct header *q = realloc(b, sizeof *q + n);
  if (!q) return NULL;
  q->magic = MAGIC;
  q->size = n;
  pthread_mutex_lock(&h->mu);
  if (!b) {
    h->live++;
    h->total++;
  }
  pthread_mutex_unlock(&h->mu);
  return q + 1;
}

static void arm(long fail_at) {
  pthread_mutex_lock(&H.mu);
  H.calls = 0;
  H.fail_at = fail_at;
  H.failed = false;
  H.armed = true;
  pthread_mutex_unlock(&H.mu);
}

static void disarm(void) {
  pthread_mutex_lock(&H.mu);
  H.armed = false;
  pthread_mutex_unlock(&H.mu);
}

/* The chunk size of the arenas of the contexts made by new_ctx (0: the library's, 64 KiB).
 * Small chunks make the arenas call the hook far more often, so that failures land inside
 * every phase of a compile, not only where a 64 KiB chunk happens to run out. */
static size_t chunk_size;

static tile_status new_ctx(tile_context **ctx, const char *cache_dir) {
  tile_context_options o = {.cache_dir = cache_dir, .cpu_threads = 1, .alloc = hook_fn, .alloc_ud = &H};
  *ctx = NULL;
  tile_status st = tile_context_create(&o, ctx);
  if (!st) (*ctx)->alloc.chunk = chunk_size; /* (internal: rt.h) */
  return st;
}

static char *read_lib(const char *file, size_t *len) {
  char path[1024];
  test_lib_path(path, sizeof path, file);
  char *src = test_read_file(path, len);
  cr_assert_not_null(src, "%s", path);
  return src;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the hook sees everything, and gets everything back ---- */

static const char *const tiny_src = "kernel scale<BM: 16 | 32 = 32, NW: 1 | 2 = 1>\n"
                                    "    (X: f32[N], Y: out f32[N])\n"
                                    "  grid(cdiv(N, BM))\n"
                                    "  warps(NW)\n"
                                    "{\n"
                                    "  let o = program_id(0) * BM;\n"
                                    "  Y[o : +BM] = X[o : +BM] * 2.0;\n"
                                    "}\n";

Test(alloc, hook_gets_every_block_back) {
  tile_context *ctx;
  long before = H.total;
  cr_assert_eq(new_ctx(&ctx, ""), TILE_OK);
  cr_expect_gt(H.total, before, "the context itself comes from the hook");
  tile_kernel *k = NULL;
  size_t len;
  char *src = read_lib("gemm.tile", &len);
  tile_compile_options co = {.kernel = "gemm"};
  cr_assert_eq(tile_compile_string(ctx, "gemm.tile", src, len, &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  char path[1024];
  test_lib_path(path, sizeof path, "softmax.tile");
  tile_kernel *k2 = NULL;
  cr_assert_eq(tile_compile_file(ctx, path, NULL, &k2), TILE_OK, "%s", tile_errmsg(ctx));
  /* what the caller holds: tile_emit's text, tile_mem_alloc's host memory, a tune result */
  char *text = NULL;
  tile_emit_options eo = {.what = TILE_EMIT_IR};
  cr_assert_eq(tile_emit(ctx, "gemm.tile", src, len, &co, &eo, &text, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  long held = H.live;
  void *x = NULL, *y = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 400, &x), TILE_OK);
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 400, &y), TILE_OK);
  cr_expect_eq((uintptr_t)x % 256, 0, "tile_mem_alloc's host blocks are 256-byte aligned");
  cr_expect_eq(H.live, held + 2);
  memset(x, 0, 400);
  int64_t n = 100;
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 1, &n, NULL), tile_arg_tensor(y, TILE_F32, 1, &n, NULL)};
  tile_tune_options to = {.reps = 3, .warmup = 1, .threads = 2};
  tile_tune_result r;
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), NULL, args, 2, &to, &r), TILE_OK, "%s",
               tile_errmsg(ctx));
  cr_expect_eq(r.nconfigs, 4);
  tile_mem_free(ctx, TILE_DEVICE_CPU, x);
  tile_mem_free(ctx, TILE_DEVICE_CPU, y);
  tile_kernel_release(k);
  tile_kernel_release(k2);
  tile_context_destroy(ctx);
  cr_expect_gt(H.live, 0, "the caller's text and result are still held");
  tile_free(text); /* after the context: they carry their hook */
  tile_tune_result_free(&r);
  cr_expect_eq(H.live, 0, "%ld blocks never given back", H.live);
  cr_expect_eq(H.bad, 0, "%ld frees or resizes with a wrong size", H.bad);
  free(src);
}

/* ---- the sweeps ---- */

/* One run of a path with the hook failing attempt `fail_at` (0: none). Returns the status of
 * the operation; the run itself checks everything else. */
typedef tile_status (*path_fn)(long fail_at, void *ud);

/* Set by a run whose call succeeded although the injected failure was reached, when that
 * failure was in a best-effort part (a store to the on-disk cache) and was reported so. */
static bool best_effort;

/* Runs path with the 1st, 2nd, ... allocation failing until a run reaches no failure;
 * returns how many allocations that run made. Every failing run must return TILE_NOMEM (or
 * have failed in a best-effort part) and give back every block it took. */
static long sweep_for(const char *name, path_fn path, void *ud, tile_status want) {
  double t0 = now_ms();
  long n;
  for (n = 1;; n++) {
    long base = H.live;
    if (getenv("SWEEP_TRACE")) fprintf(stderr, "%s %ld\n", name, n);
    best_effort = false;
    tile_status st = path(n, ud);
    cr_assert_eq(H.live, base, "%s, allocation %ld failed: %ld blocks leaked", name, n, H.live - base);
    cr_assert_eq(H.bad, 0, "%s, allocation %ld failed: a block freed with a wrong size", name, n);
    if (!H.failed) {
      cr_assert_eq(st, want, "%s: the run without a failure: %s", name, tile_status_name(st));
      break;
    }
    if (st == TILE_OK && best_effort) continue;
    cr_assert_eq(st, TILE_NOMEM, "%s: allocation %ld failed but the call returned %s", name, n, tile_status_name(st));
  }
  fprintf(stderr, "alloc sweep %-14s %4ld allocation points, %.1f s\n", name, n - 1, (now_ms() - t0) / 1e3);
#if defined(__SANITIZE_ADDRESS__)
  /* what the hook cannot see (LLVM's objects, the C library's): LeakSanitizer's report alone
   * would not fail the test */
  cr_expect_eq(__lsan_do_recoverable_leak_check(), 0, "%s: LeakSanitizer found leaks (reported above)", name);
#endif
  return n - 1;
}

static long sweep(const char *name, path_fn path, void *ud) { return sweep_for(name, path, ud, TILE_OK); }

/* ---- compile (CPU) ---- */

struct compile_case {
  const char *file, *kernel;
  char *src;
  size_t len;
  const char *path; /* compile this file with tile_compile_file instead (the read too) */
};

static tile_status compile_one(tile_context *ctx, struct compile_case *c, tile_compile_options *co, tile_kernel **k) {
  return c->path ? tile_compile_file(ctx, c->path, co, k) : tile_compile_string(ctx, c->file, c->src, c->len, co, k);
}

static tile_status compile_path(long fail_at, void *ud) {
  struct compile_case *c = ud;
  tile_context *ctx;
  arm(fail_at);
  tile_status st = new_ctx(&ctx, "");
  tile_kernel *k = NULL;
  tile_compile_options co = {.kernel = c->kernel};
  if (!st) {
    st = compile_one(ctx, c, &co, &k);
    if (st) cr_expect_null(k);
    if (st == TILE_NOMEM) cr_expect(strstr(tile_errmsg(ctx), "out of memory"), "%s", tile_errmsg(ctx));
  }
  disarm();
  if (st == TILE_NOMEM && ctx) { /* the context is still usable */
    tile_status again = compile_one(ctx, c, &co, &k);
    cr_assert(again == TILE_OK || again == TILE_COMPILE, "after allocation %ld: %s", fail_at, tile_errmsg(ctx));
    if (again == TILE_COMPILE) cr_expect_gt(tile_diag_count(ctx), 0);
  }
  if (k) cr_expect_str_eq(tile_kernel_name(k), c->kernel);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return st;
}

Test(alloc_sweep, compile, .timeout = 600) {
  struct compile_case cases[] = {{.file = "gemm.tile", .kernel = "gemm"},
                                 {.file = "attention.tile", .kernel = "attention"},
                                 {.file = "layernorm.tile", .kernel = "layernorm"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cases[i].src = read_lib(cases[i].file, &cases[i].len);
    char name[64];
    snprintf(name, sizeof name, "compile %s", cases[i].kernel);
    cr_expect_gt(sweep(name, compile_path, &cases[i]), 5);
    free(cases[i].src);
  }
}

/* tile_compile_file: the source is read through the hook too. */
Test(alloc_sweep, compile_file, .timeout = 600) {
  char path[1024];
  test_lib_path(path, sizeof path, "softmax.tile");
  struct compile_case c = {.file = "softmax.tile", .kernel = "softmax", .path = path};
  cr_expect_gt(sweep("compile file", compile_path, &c), 3);
}

/* A source with errors: its diagnostics are copied into the context. */
Test(alloc_sweep, compile_errors, .timeout = 600) {
  static const char bad[] = "kernel k(X: f32[N], Y: out f32[N]) grid(1) {\n"
                            "  let a = X[0 : +16] + undefined_name;\n"
                            "  Y[0 : +16] = a @ 3;\n"
                            "  let b: f99 = 1;\n"
                            "}\n";
  struct compile_case c = {.file = "bad.tile", .kernel = "k", .src = (char *)bad, .len = sizeof bad - 1};
  cr_expect_gt(sweep_for("compile errors", compile_path, &c, TILE_COMPILE), 2);
}

/* tile_emit of PTX: the GPU passes and codegen without a driver; the text handed back. */
static tile_status emit_path(long fail_at, void *ud) {
  struct compile_case *c = ud;
  tile_context *ctx;
  arm(0);
  cr_assert_eq(new_ctx(&ctx, ""), TILE_OK);
  tile_define d[] = {{"T", "f16"}, {"BN", "256"}};
  tile_compile_options co = {.defines = d, .ndefines = 2, .arch = "sm_90a"};
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
  char *out = NULL;
  arm(fail_at);
  tile_status st = tile_emit(ctx, c->file, c->src, c->len, &co, &eo, &out, NULL);
  disarm();
  if (st) {
    cr_expect_null(out);
    cr_expect(strstr(tile_errmsg(ctx), "out of memory"), "allocation %ld: %s", fail_at, tile_errmsg(ctx));
    cr_assert_eq(tile_emit(ctx, c->file, c->src, c->len, &co, &eo, &out, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  }
  cr_expect(out && strstr(out, ".entry softmax"));
  tile_free(out);
  tile_context_destroy(ctx);
  return st;
}

Test(alloc_sweep, emit_ptx, .timeout = 600) {
  struct compile_case c = {.file = "softmax.tile", .kernel = "softmax"};
  c.src = read_lib("softmax.tile", &c.len);
  cr_expect_gt(sweep("emit ptx", emit_path, &c), 5);
  free(c.src);
}

/* ---- compile and prepare for CUDA (the fake driver) ---- */

struct cuda_case {
  char *src;
  size_t len;
  const char *cache_dir;
  unsigned store_failed; /* runs that succeeded although a store failed (best effort) */
};

static tile_status cuda_path(long fail_at, void *ud) {
  struct cuda_case *c = ud;
  if (c->cache_dir[0]) { /* every run starts cold */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->cache_dir);
    cr_assert_eq(system(cmd), 0);
  }
  tile_context *ctx;
  /* device memory of the fake driver (host memory, not the hook's) */
  arm(0);
  cr_assert_eq(new_ctx(&ctx, c->cache_dir), TILE_OK);
  void *x = NULL, *y = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 64 * 1000 * 4, &x), TILE_OK, "%s", tile_errmsg(ctx));
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 64 * 1000 * 4, &y), TILE_OK, "%s", tile_errmsg(ctx));
  int64_t shape[2] = {64, 1000};
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 2, shape, NULL), tile_arg_tensor(y, TILE_F32, 2, shape, NULL)};
  tile_define d[2] = {{"T", "f32"}, {"NW", "4"}};
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .defines = d, .ndefines = 2};
  tile_kernel *k = NULL;
  arm(fail_at);
  tile_status st = tile_compile_string(ctx, "softmax.tile", c->src, c->len, &co, &k);
  if (!st) st = tile_kernel_prepare(ctx, k, args, 2);
  disarm();
  tile_cache_stats cs;
  cr_assert_eq(tile_cache_get_stats(ctx, &cs), TILE_OK);
  if (!st && H.failed) { /* only a store may fail without failing the call, and it says so */
    cr_assert_eq(cs.store_failed, 1, "allocation %ld failed, the call succeeded, and no store failed", fail_at);
    cr_expect(strstr(tile_cache_status(ctx), "out of memory"), "%s", tile_cache_status(ctx));
    c->store_failed++;
    best_effort = true;
  }
  if (st) { /* the context is still usable */
    cr_expect(strstr(tile_errmsg(ctx), "out of memory"), "%s", tile_errmsg(ctx));
    if (!k) cr_assert_eq(tile_compile_string(ctx, "softmax.tile", c->src, c->len, &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
    cr_assert_eq(tile_kernel_prepare(ctx, k, args, 2), TILE_OK, "after allocation %ld: %s", fail_at, tile_errmsg(ctx));
  }
  tile_launch_options lo = {0};
  if (k) cr_expect_eq(tile_launch(ctx, k, args, 2, &lo), TILE_OK, "%s", tile_errmsg(ctx));
  tile_kernel_release(k);
  tile_mem_free(ctx, TILE_DEVICE_CUDA, x);
  tile_mem_free(ctx, TILE_DEVICE_CUDA, y);
  tile_context_destroy(ctx);
  return st;
}

static void use_fake_driver(void) {
  setenv("TILE_LIBCUDA", TILE_FAKE_LIBCUDA, 1);
  unsetenv("FAKE_CUDA_LOG");
  unsetenv("FAKE_CUDA_NO_LINK");
}

Test(alloc_sweep, cuda, .init = use_fake_driver, .timeout = 600) {
  struct cuda_case c = {.cache_dir = ""};
  c.src = read_lib("softmax.tile", &c.len);
  long n = sweep("cuda", cuda_path, &c);
  cr_expect_gt(n, 5);
  free(c.src);
}

Test(alloc_sweep, cuda_with_disk_cache, .init = use_fake_driver, .timeout = 600) {
  char dir[64] = "/tmp/tile_alloc_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char cache[96];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  struct cuda_case c = {.cache_dir = cache};
  c.src = read_lib("softmax.tile", &c.len);
  long n = sweep("cache", cuda_path, &c);
  cr_expect_gt(n, 5);
  cr_expect_gt(c.store_failed, 0, "the store's allocations were reached");
  free(c.src);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

/* ---- launch on the CPU interpreter ---- */

enum { LM = 40, LN = 24, LK = 20 };

struct launch_case {
  tile_kernel *k;
  tile_context *ctx;
  float a[LM * LK], b[LK * LN], bias[LN], c0[LM * LN], c[LM * LN], want[LM * LN];
};

static bool bench_instead; /* launch_path: tile_bench (3 launches) instead of tile_launch */

static tile_status launch_path(long fail_at, void *ud) {
  struct launch_case *L = ud;
  memcpy(L->c, L->c0, sizeof L->c);
  int64_t sa[2] = {LM, LK}, sb[2] = {LK, LN}, sc[2] = {LM, LN}, sbias[1] = {LN};
  tile_arg args[7] = {tile_arg_tensor(L->a, TILE_F32, 2, sa, NULL),   tile_arg_tensor(L->b, TILE_F32, 2, sb, NULL),
                      tile_arg_tensor(L->c, TILE_F32, 2, sc, NULL),   tile_arg_tensor(L->bias, TILE_F32, 1, sbias, NULL),
                      tile_arg_tensor(NULL, TILE_F32, 2, sc, NULL),   tile_arg_float(1.5),
                      tile_arg_float(0.5)};
  tile_bench_options bo = {.warmup = 1, .reps = 3};
  tile_bench_result br;
  arm(fail_at);
  tile_status st = bench_instead ? tile_bench(L->ctx, L->k, args, 7, &bo, &br) : tile_launch(L->ctx, L->k, args, 7, NULL);
  disarm();
  if (!st && bench_instead) cr_expect_eq(br.reps, 3);
  if (st || bench_instead) { /* (bench: C was updated by every launch; one launch checks it) */
    if (st) cr_expect(strstr(tile_errmsg(L->ctx), "out of memory"), "%s", tile_errmsg(L->ctx));
    memcpy(L->c, L->c0, sizeof L->c);
    cr_assert_eq(tile_launch(L->ctx, L->k, args, 7, NULL), TILE_OK, "after allocation %ld: %s", fail_at,
                 tile_errmsg(L->ctx));
  }
  struct ref_cmp rc = ref_compare(L->c, L->want, LM * LN, 1e-5, 1e-5);
  cr_assert_eq(rc.n_bad, 0, "allocation %ld failed: wrong output (max_abs %g)", fail_at, rc.max_abs);
  return st;
}

static void launch_sweep(const char *name) {
  static struct launch_case L;
  cr_assert_eq(new_ctx(&L.ctx, ""), TILE_OK);
  size_t len;
  char *src = read_lib("gemm.tile", &len);
  tile_define d[] = {{"T", "f32"}, {"BM", "32"}, {"BN", "32"}, {"BK", "32"}, {"NW", "4"}, {"SCALED", "true"},
                     {"HAS_BIAS", "true"}};
  tile_compile_options co = {.kernel = "gemm", .defines = d, .ndefines = 7};
  cr_assert_eq(tile_compile_string(L.ctx, "gemm.tile", src, len, &co, &L.k), TILE_OK, "%s", tile_errmsg(L.ctx));
  for (int i = 0; i < LM * LK; i++) L.a[i] = (float)((i * 7) % 13) - 6.0f;
  for (int i = 0; i < LK * LN; i++) L.b[i] = (float)((i * 5) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < LN; i++) L.bias[i] = (float)i * 0.125f;
  for (int i = 0; i < LM * LN; i++) L.c0[i] = (float)(i % 9) - 4.0f;
  struct ref_gemm_args g = {.m = LM, .n = LN, .k = LK, .a = L.a, .b = L.b, .c_in = L.c0, .bias = L.bias,
                            .c = L.want, .alpha = 1.5f, .beta = 0.5f, .act = REF_ACT_NONE};
  cr_assert_eq(ref_gemm(&g), 0);
  long n = sweep(name, launch_path, &L);
  cr_expect_gt(n, 0);
  tile_kernel_release(L.k);
  tile_context_destroy(L.ctx);
  cr_expect_eq(H.live, 0);
  free(src);
}

Test(alloc_sweep, launch, .timeout = 600) { launch_sweep("launch"); }

Test(alloc_sweep, bench, .timeout = 600) {
  bench_instead = true;
  launch_sweep("bench");
}

/* ---- tune on the CPU ---- */

enum { TN = 100 };

struct tune_case {
  tile_context *ctx;
  int threads;
  float x[TN], y[TN];
};

static tile_status tune_path(long fail_at, void *ud) {
  struct tune_case *T = ud;
  for (int i = 0; i < TN; i++) T->y[i] = 7.0f;
  int64_t n = TN;
  tile_arg args[2] = {tile_arg_tensor(T->x, TILE_F32, 1, &n, NULL), tile_arg_tensor(T->y, TILE_F32, 1, &n, NULL)};
  /* threads < 0: no compile threads, so every run allocates in the same order; TILE_NO_CACHE:
   * nothing is remembered, so every run tunes afresh */
  tile_tune_options to = {.reps = 3, .warmup = 1, .threads = T->threads};
  tile_compile_options co = {.flags = TILE_NO_CACHE};
  tile_tune_result r;
  arm(fail_at);
  tile_status st = tile_tune(T->ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, args, 2, &to, &r);
  disarm();
  if (st) {
    cr_expect(strstr(tile_errmsg(T->ctx), "out of memory"), "allocation %ld: '%s'", fail_at, tile_errmsg(T->ctx));
    cr_expect_null(r.best);
    cr_expect_eq(r.nconfigs, 0);
    tile_status again = tile_tune(T->ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, args, 2, &to, &r);
    cr_assert_eq(again, TILE_OK, "after allocation %ld: %s", fail_at, tile_errmsg(T->ctx));
  }
  cr_expect_eq(r.nconfigs, 4);
  cr_expect_eq(r.timed, 4);
  cr_expect_not_null(r.best);
  for (int i = 0; i < TN; i++) cr_assert_eq(T->y[i], 7.0f, "the output is restored");
  tile_tune_result_free(&r);
  return st;
}

static void tune_sweep(const char *name, int threads) {
  static struct tune_case T;
  T.threads = threads;
  cr_assert_eq(new_ctx(&T.ctx, ""), TILE_OK);
  for (int i = 0; i < TN; i++) T.x[i] = (float)(i % 7) - 3.0f;
  long n = sweep(name, tune_path, &T);
  cr_expect_gt(n, 10);
  tile_context_destroy(T.ctx);
  cr_expect_eq(H.live, 0);
}

Test(alloc_sweep, tune, .timeout = 600) { tune_sweep("tune", -1); }

/* With compile threads (each with a context of its own, made with the caller's hook): the
 * order of the allocations, and so which one fails, varies from run to run, but every
 * interleaving must end the same way. */
Test(alloc_sweep, tune_threads, .timeout = 600) { tune_sweep("tune threads", 2); }

/* ---- the same with 256-byte arena chunks: nearly every arena allocation of 128 bytes or
 * more calls the hook, so failures land inside every pass, the verifier, codegen (with
 * LLVM's objects alive), the printer and the tuner's bookkeeping ---- */

Test(alloc_sweep, small_chunks_compile, .timeout = 600) {
  chunk_size = 256;
  struct compile_case c = {.file = "gemm.tile", .kernel = "gemm"};
  c.src = read_lib("gemm.tile", &c.len);
  cr_expect_gt(sweep("compile 256", compile_path, &c), 50);
  free(c.src);
}

Test(alloc_sweep, small_chunks_emit_ptx, .timeout = 600) {
  chunk_size = 1024;
  struct compile_case c = {.file = "softmax.tile", .kernel = "softmax"};
  c.src = read_lib("softmax.tile", &c.len);
  cr_expect_gt(sweep("emit ptx 1K", emit_path, &c), 50);
  free(c.src);
}

Test(alloc_sweep, small_chunks_launch, .timeout = 600) {
  chunk_size = 256;
  launch_sweep("launch 256");
}

Test(alloc_sweep, small_chunks_tune, .timeout = 600) {
  chunk_size = 256;
  tune_sweep("tune 256", -1);
}
