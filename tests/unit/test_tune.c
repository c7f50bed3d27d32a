/* test_tune.c - the autotuner (tile_tune) on the CPU device: the search space from the
 * candidate sets minus pinned parameters, pruning by `where` constraints, compile failures
 * and wrong answers skipped with their reasons, timing, the stored result reused by a fresh
 * context without timing anything (from the on-disk cache), outputs restored afterwards,
 * parameters fixed by the arguments, the parallel compile of PTX on host threads (no GPU
 * needed), and argument errors.                                                          */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "testfiles.h"
#include "tile.h"

/* BM=64 violates the constraint (pruned), BM=24 is not a power of two (fails to compile),
 * BM=16 with NW=2 computes something else (wrong); the other three are timed. */
static const char *const tiny_src =
    "kernel scale<BM: 16 | 24 | 32 | 64 = 32, NW: 1 | 2 = 1, K: int = 2>\n"
    "    (X: f32[N], Y: out f32[N])\n"
    "  grid(cdiv(N, BM))\n"
    "  warps(NW)\n"
    "  where BM <= 32\n"
    "{\n"
    "  let o = program_id(0) * BM;\n"
    "  if BM == 16 && NW == 2 { Y[o : +BM] = X[o : +BM] * 3.0; } else { Y[o : +BM] = X[o : +BM] * 2.0; }\n"
    "}\n";

static char *make_dir(void) {
  char tmpl[] = "/tmp/tile_tune_test_XXXXXX";
  char *d = mkdtemp(tmpl);
  cr_assert_not_null(d);
  return strdup(d);
}

static void remove_dir(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

static tile_context *ctx_in(const char *dir) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cpu_threads = 1, .cache_dir = dir};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  return ctx;
}

enum { N = 1000 };

struct bufs {
  _Alignas(16) float x[N];
  _Alignas(16) float y[N];
  tile_arg args[2];
};

static void setup(struct bufs *b) {
  for (int i = 0; i < N; i++) {
    b->x[i] = (float)(i % 17) - 8.0f;
    b->y[i] = 12345.0f;
  }
  int64_t shape[1] = {N};
  b->args[0] = tile_arg_tensor(b->x, TILE_F32, 1, shape, NULL);
  b->args[1] = tile_arg_tensor(b->y, TILE_F32, 1, shape, NULL);
}

static const tile_tune_config *row_of(const tile_tune_result *r, const char *config) {
  for (unsigned i = 0; i < r->nconfigs; i++)
    if (strcmp(r->configs[i].config, config) == 0) return &r->configs[i];
  return NULL;
}

static int progress_calls;
static void on_progress(void *ud, const tile_tune_progress *p) {
  (void)ud;
  cr_expect(p->index >= 1 && p->index <= p->total);
  cr_expect_not_null(p->config);
  progress_calls++;
}

Test(tune, cpu_search_store_and_reuse) {
  char *dir = make_dir();
  tile_context *ctx = ctx_in(dir);
  struct bufs b;
  setup(&b);
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  tile_tune_options to = {.reps = 3, .warmup = 1, .threads = 2, .progress = on_progress};
  tile_tune_result r;
  progress_calls = 0;
  tile_status st = tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r);
  cr_assert_eq(st, TILE_OK, "%s: %s", tile_status_name(st), tile_errmsg(ctx));
  cr_expect_eq(r.from_cache, 0);
  cr_expect_eq(r.nconfigs, 8, "every configuration of BM x NW is listed (got %u)", r.nconfigs);
  cr_expect_str_eq(r.configs[0].config, "BM=32,NW=1", "the default is tried first");
  cr_expect_eq(r.timed, 3);
  cr_expect_eq(r.pruned, 2);
  cr_expect_eq(r.failed, 2);
  cr_expect_eq(r.wrong, 1);
  cr_expect_eq(r.skipped, 0);
  cr_expect_eq(progress_calls, 8);

  const tile_tune_config *c;
  c = row_of(&r, "BM=64,NW=1");
  cr_assert_not_null(c);
  cr_expect_eq(c->outcome, TILE_TUNE_PRUNED);
  cr_expect(c->reason && strstr(c->reason, "constraint"), "%s", c->reason ? c->reason : "(null)");
  c = row_of(&r, "BM=24,NW=2");
  cr_assert_not_null(c);
  cr_expect_eq(c->outcome, TILE_TUNE_FAILED, "a configuration that does not compile is skipped");
  cr_expect(c->reason && strstr(c->reason, "power of two"), "%s", c->reason ? c->reason : "(null)");
  c = row_of(&r, "BM=16,NW=2");
  cr_assert_not_null(c);
  cr_expect_eq(c->outcome, TILE_TUNE_WRONG);
  cr_expect(c->reason && strstr(c->reason, "differs from the reference"), "%s", c->reason ? c->reason : "(null)");
  cr_expect(c->rel_err > 0.1);
  c = row_of(&r, "BM=16,NW=1");
  cr_assert_not_null(c);
  cr_expect_eq(c->outcome, TILE_TUNE_TIMED);
  cr_expect(c->median_ms > 0);
  cr_expect(c->rel_err == 0);

  cr_assert_not_null(r.best);
  const tile_tune_config *best = row_of(&r, r.best);
  cr_assert_not_null(best);
  cr_expect_eq(best->outcome, TILE_TUNE_TIMED);
  for (unsigned i = 0; i < r.nconfigs; i++)
    if (r.configs[i].outcome == TILE_TUNE_TIMED) cr_expect(r.best_ms <= r.configs[i].median_ms);
  cr_expect_eq(r.ndefines, 2, "the tuned values (nothing pinned)");
  cr_expect_eq(strlen(r.key), 64);
  /* the outputs are restored: the caller's contents, not a tuning run's */
  for (int i = 0; i < N; i++) cr_assert_eq(b.y[i], 12345.0f);

  /* the defines compile to the winning configuration */
  tile_compile_options cb = {.device = TILE_DEVICE_CPU, .defines = r.defines, .ndefines = r.ndefines};
  tile_kernel *k = NULL;
  cr_assert_eq(tile_compile_string(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &cb, &k), TILE_OK, "%s",
               tile_errmsg(ctx));
  char want[64];
  snprintf(want, sizeof want, "%s,K=2", r.best);
  cr_expect_str_eq(tile_kernel_config(k), want);
  tile_kernel_release(k);

  /* the same context: from memory */
  tile_tune_result r2;
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r2), TILE_OK);
  cr_expect_eq(r2.from_cache, 1);
  cr_expect_eq(r2.timed, 0);
  cr_expect_str_eq(r2.best, r.best);
  tile_tune_result_free(&r2);
  tile_context_destroy(ctx);

  /* a fresh context (as a later process): from the disk, nothing timed */
  tile_context *ctx2 = ctx_in(dir);
  tile_tune_result r3;
  cr_assert_eq(tile_tune(ctx2, "other-name.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r3), TILE_OK,
               "%s", tile_errmsg(ctx2));
  cr_expect_eq(r3.from_cache, 2);
  cr_expect_eq(r3.timed, 0, "a stored result is reused without timing");
  cr_expect_str_eq(r3.best, r.best);
  cr_expect_str_eq(r3.key, r.key);
  cr_assert_eq(r3.nconfigs, 1);
  cr_expect_eq(r3.configs[0].outcome, TILE_TUNE_CACHED);
  cr_expect_eq(r3.ndefines, r.ndefines);
  tile_tune_result_free(&r3);

  /* another size bucket is another key: tuned again */
  struct bufs b2;
  setup(&b2);
  b2.args[0].u.tensor.shape[0] = b2.args[1].u.tensor.shape[0] = 100; /* < 128: exact sizes */
  tile_tune_result r4;
  cr_assert_eq(tile_tune(ctx2, "tiny.tile", tiny_src, strlen(tiny_src), &co, b2.args, 2, &to, &r4), TILE_OK);
  cr_expect_eq(r4.from_cache, 0);
  cr_expect_gt(r4.timed, 0);
  cr_expect_str_neq(r4.key, r.key);
  tile_tune_result_free(&r4);
  /* 1000 and 1020 share a bucket (1024) and are not multiples of 16 */
  b2.args[0].u.tensor.shape[0] = b2.args[1].u.tensor.shape[0] = 1020;
  cr_assert_eq(tile_tune(ctx2, "tiny.tile", tiny_src, strlen(tiny_src), &co, b2.args, 2, &to, &r4), TILE_OK);
  cr_expect_eq(r4.from_cache, 1, "the same key (memory: ctx2 read it from the disk before)");
  cr_expect_eq(r4.timed, 0);
  tile_tune_result_free(&r4);

  /* TILE_TUNE_FORCE tunes again */
  to.flags = TILE_TUNE_FORCE;
  cr_assert_eq(tile_tune(ctx2, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r4), TILE_OK);
  cr_expect_eq(r4.from_cache, 0);
  cr_expect_eq(r4.timed, 3);
  tile_tune_result_free(&r4);

  /* the cache lists one tune entry per key */
  tile_tune_result_free(&r);
  tile_context_destroy(ctx2);
  remove_dir(dir);
  free(dir);
}

Test(tune, pins_budget_and_params) {
  tile_context *ctx = ctx_in("");
  struct bufs b;
  setup(&b);
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  tile_tune_result r;
  /* a pinned parameter is not tuned */
  tile_define pin[] = {{"NW", "2"}};
  co.defines = pin;
  co.ndefines = 1;
  tile_tune_options to = {.reps = 2, .warmup = 1, .threads = 1};
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK, "%s",
               tile_errmsg(ctx));
  cr_expect_eq(r.nconfigs, 4, "BM only");
  cr_expect_str_eq(r.configs[0].config, "BM=32");
  cr_expect_eq(r.ndefines, 2);
  cr_expect_str_eq(r.defines[0].name, "NW");
  cr_expect_str_eq(r.defines[0].value, "2");
  tile_tune_result_free(&r);

  /* max_configs: the default and one more; the rest are counted as skipped */
  co.defines = NULL;
  co.ndefines = 0;
  to.max_configs = 2;
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK);
  cr_expect_eq(r.nconfigs, 2);
  cr_expect_eq(r.skipped, 6);
  tile_tune_result_free(&r);

  /* a budget already spent: only the default is evaluated */
  to.max_configs = 0;
  to.budget_ms = 1e-6;
  to.flags = TILE_TUNE_FORCE;
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK);
  cr_expect_eq(r.nconfigs, 1);
  cr_expect_eq(r.timed, 1);
  cr_expect_str_eq(r.best, "BM=32,NW=1");
  cr_expect_eq(r.skipped, 7);
  tile_tune_result_free(&r);

  /* params names what to tune; a pinned or unknown name is an error */
  to.budget_ms = 0;
  to.params = "NW";
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK);
  cr_expect_eq(r.nconfigs, 2);
  tile_tune_result_free(&r);
  to.params = "NOPE";
  cr_expect_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_NOT_FOUND);
  cr_expect(strstr(tile_errmsg(ctx), "NOPE"), "%s", tile_errmsg(ctx));
  co.defines = pin;
  co.ndefines = 1;
  to.params = "NW";
  cr_expect_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_INVALID_ARGUMENT);
  tile_context_destroy(ctx);
}

Test(tune, errors) {
  tile_context *ctx = ctx_in("");
  struct bufs b;
  setup(&b);
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  tile_tune_result r;
  /* bad arguments are the caller's error, reported as by a launch */
  cr_expect_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 1, NULL, &r), TILE_BAD_LAUNCH);
  cr_expect(strstr(tile_errmsg(ctx), "takes 2 arguments"), "%s", tile_errmsg(ctx));
  /* a source with errors */
  const char *bad = "kernel k(X: f32[N]) grid(1) { let a = ; }\n";
  cr_expect_eq(tile_tune(ctx, "bad.tile", bad, strlen(bad), &co, b.args, 1, NULL, &r), TILE_COMPILE);
  cr_expect(strstr(tile_errmsg(ctx), "bad.tile:1:"), "%s", tile_errmsg(ctx));
  cr_expect_gt(tile_diag_count(ctx), 0);
  /* a default that does not compile */
  tile_define d[] = {{"BM", "24"}};
  co.defines = d;
  co.ndefines = 1;
  cr_expect_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, NULL, &r), TILE_COMPILE);
  cr_expect_eq(tile_tune(NULL, "x", "", 0, NULL, NULL, 0, NULL, &r), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_tune(ctx, "x", tiny_src, strlen(tiny_src), &co, b.args, 2, NULL, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_tune_file(ctx, "/nonexistent/x.tile", NULL, b.args, 2, NULL, &r), TILE_IO);
  tile_tune_result_free(NULL);
  tile_context_destroy(ctx);
}

/* dtype and fixed-size parameters are taken from the arguments, not tuned */
Test(tune, params_fixed_by_arguments) {
  const char *src = "kernel rows<T: f16 | f32 = f16, D: 16 | 32 | 64 = 16, BM: 1 | 2 | 4 = 1>\n"
                    "    (X: T[M, D], Y: out T[M, D])\n"
                    "  grid(cdiv(M, BM))\n"
                    "{\n"
                    "  let m0 = program_id(0) * BM;\n"
                    "  Y[m0 : +BM, :] = X[m0 : +BM, :] + X[m0 : +BM, :];\n"
                    "}\n";
  tile_context *ctx = ctx_in("");
  float x[40 * 32], y[40 * 32];
  for (int i = 0; i < 40 * 32; i++) x[i] = (float)i * 0.25f;
  int64_t shape[2] = {40, 32};
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 2, shape, NULL), tile_arg_tensor(y, TILE_F32, 2, shape, NULL)};
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  tile_tune_options to = {.reps = 2, .warmup = 1};
  tile_tune_result r;
  cr_assert_eq(tile_tune(ctx, "rows.tile", src, strlen(src), &co, args, 2, &to, &r), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(r.nconfigs, 3, "only BM is tuned");
  cr_expect_eq(r.timed, 3);
  bool has_t = false, has_d = false;
  for (unsigned i = 0; i < r.ndefines; i++) {
    has_t |= !strcmp(r.defines[i].name, "T") && !strcmp(r.defines[i].value, "f32");
    has_d |= !strcmp(r.defines[i].name, "D") && !strcmp(r.defines[i].value, "32");
  }
  cr_expect(has_t && has_d, "T=f32 and D=32 come from the arguments");
  tile_tune_result_free(&r);
  tile_context_destroy(ctx);
}

static char *read_lib_file(const char *name, size_t *len) {
  char path[1024];
  test_lib_path(path, sizeof path, name);
  char *s = test_read_file(path, len);
  cr_assert_not_null(s, "%s", path);
  return s;
}

/* C = A @ B + beta * C reads its output: each check starts from the saved C (otherwise the
 * runs would accumulate and every configuration would differ), and C is restored at the end. */
Test(tune, read_write_outputs_are_restored) {
  size_t len;
  char *src = read_lib_file("gemm.tile", &len);
  tile_context *ctx = ctx_in("");
  enum { M = 40, K = 24, NN = 36 };
  static float a[M * K], bm[K * NN], c[M * NN], c0[M * NN];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < K * NN; i++) bm[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < M * NN; i++) c0[i] = c[i] = (float)(i % 9) - 4.0f;
  int64_t sa[2] = {M, K}, sb[2] = {K, NN}, sc[2] = {M, NN}, sbias[1] = {NN};
  tile_arg args[7] = {tile_arg_tensor(a, TILE_F32, 2, sa, NULL), tile_arg_tensor(bm, TILE_F32, 2, sb, NULL),
                      tile_arg_tensor(c, TILE_F32, 2, sc, NULL), tile_arg_tensor(NULL, TILE_F32, 1, sbias, NULL),
                      tile_arg_tensor(NULL, TILE_F32, 2, sc, NULL), tile_arg_float(1.0), tile_arg_float(1.0)};
  tile_define d[] = {{"SCALED", "true"}, {"BN", "32"}, {"BK", "16"}};
  tile_compile_options co = {.kernel = "gemm", .defines = d, .ndefines = 3, .device = TILE_DEVICE_CPU};
  tile_tune_options to = {.reps = 1, .warmup = 1, .params = "BM,GROUP_M"};
  tile_tune_result r;
  cr_assert_eq(tile_tune(ctx, "gemm.tile", src, len, &co, args, 7, &to, &r), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(r.nconfigs, 20);
  cr_expect_eq(r.wrong, 0, "every configuration computes the same C");
  cr_expect_eq(r.timed, 20);
  for (int i = 0; i < M * NN; i++) cr_assert_eq(c[i], c0[i], "C restored (element %d)", i);
  bool t_f32 = false;
  for (unsigned i = 0; i < r.ndefines; i++) t_f32 |= !strcmp(r.defines[i].name, "T") && !strcmp(r.defines[i].value, "f32");
  cr_expect(t_f32, "T comes from the arguments");
  tile_tune_result_free(&r);
  tile_context_destroy(ctx);
  free(src);
}

/* A stored result whose values are not candidates of the parameters (a damaged or planted
 * entry: BM=7, a number that overflows) is not used: the next tune searches again. */
Test(tune, stored_values_outside_the_candidates_are_ignored) {
  char *dir = make_dir();
  struct bufs b;
  setup(&b);
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  tile_tune_options to = {.reps = 2, .warmup = 0, .threads = 1};
  tile_tune_result r;
  tile_context *ctx = ctx_in(dir);
  cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK);
  cr_assert_eq(r.from_cache, 0);
  tile_tune_result_free(&r);
  tile_context_destroy(ctx);
  static const char *const planted[] = {"BM=7,NW=1", "BM=99999999999999999999,NW=1", "BM=16,NW=3", "NW=1,BM=16"};
  for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
    /* overwrite the stored result, keeping its key and framing (what an attacker with
     * write access to the directory could do) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep '^tune-' | head -1", dir);
    FILE *p = popen(cmd, "r");
    char name[256] = "";
    cr_assert(p && fgets(name, sizeof name, p));
    pclose(p);
    name[strcspn(name, "\n")] = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct rt_cache_entry e;
    const char *key;
    size_t key_len;
    cr_assert_eq(rt_cache_read_file(NULL, path, &e, &key, &key_len, NULL, 0), RT_CACHE_HIT);
    char *k = strndup(key, key_len);
    rt_cache_entry_free(&e);
    struct rt_cache_part parts[2] = {{planted[i], strlen(planted[i])}, {"best_ms=0.001", 13}};
    char err[256];
    cr_assert_eq(rt_cache_store(dir, "tune", k, key_len, parts, 2, err, sizeof err), 0, "%s", err);
    free(k);
    ctx = ctx_in(dir);
    cr_assert_eq(tile_tune(ctx, "tiny.tile", tiny_src, strlen(tiny_src), &co, b.args, 2, &to, &r), TILE_OK);
    cr_expect_eq(r.from_cache, 0, "the planted result '%s' was used", planted[i]);
    cr_expect_neq(strcmp(r.best, planted[i]), 0);
    tile_tune_result_free(&r);
    tile_context_destroy(ctx);
  }
  remove_dir(dir);
  free(dir);
}
