/* The trace file (tile_context_options.trace_path, runtime/trace.c): a compile, cache
 * lookups, tuning trials and launches on the stand-in driver (tests/cli/fake_libcuda.c)
 * appear as Chrome trace events named by kernel and configuration, the file is a JSON array
 * that a viewer can read, and a path that cannot be created fails the context. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tile.h"

static const char *const src = "kernel vscale<BN: 64 | 128 = 64>(X: f32[N], Y: out f32[N])\n"
                               "  grid(cdiv(N, BN))\n"
                               "{\n"
                               "  let o = program_id(0) * BN;\n"
                               "  Y[o : +BN] = X[o : +BN] * 2.0;\n"
                               "}\n";

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s not written", path);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p++) n++;
  return n;
}

Test(trace, cuda_compile_cache_tune_and_launch_events) {
  char dir[64] = "/tmp/tile_trace_XXXXXX", path[128], cache[128];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  setenv("TILE_LIBCUDA", TILE_FAKE_LIBCUDA, 1);
  unsetenv("FAKE_CUDA_LOG");
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = cache, .trace_path = path};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = "sm_90a"};
  tile_kernel *k = NULL;
  cr_assert_eq(tile_compile_string(ctx, "vscale.tile", src, strlen(src), &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  void *x = NULL, *y = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 4096, &x), TILE_OK, "%s", tile_errmsg(ctx));
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 4096, &y), TILE_OK, "%s", tile_errmsg(ctx));
  int64_t n = 1000;
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 1, &n, NULL), tile_arg_tensor(y, TILE_F32, 1, &n, NULL)};
  for (int i = 0; i < 3; i++) cr_assert_eq(tile_launch(ctx, k, args, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  tile_tune_options to = {.threads = -1, .reps = 5, .warmup = 1};
  tile_tune_result tr;
  cr_assert_eq(tile_tune(ctx, "vscale.tile", src, strlen(src), &co, args, 2, &to, &tr), TILE_OK, "%s", tile_errmsg(ctx));
  tile_tune_result_free(&tr);
  tile_kernel_release(k);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CUDA, x), TILE_OK);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CUDA, y), TILE_OK);
  tile_context_destroy(ctx);

  const char *t = slurp(path);
  cr_expect(t[0] == '[' && strstr(t, "]\n"), "not a closed JSON array");
  cr_expect(count(t, "\"name\":\"vscale [BN=64] launch\",\"cat\":\"launch\",\"ph\":\"X\"") >= 3,
            "launch events named by kernel and configuration expected:\n%.2000s", t);
  cr_expect(strstr(t, "\"grid\":\"16,1,1\""), "the launch's grid is missing");
  cr_expect(strstr(t, "\"name\":\"vscale [BN=64] compile\",\"cat\":\"compile\""), "no compile event");
  cr_expect(strstr(t, "\"name\":\"vscale [BN=64] GPU passes and LLVM\""), "no code generation event");
  cr_expect(strstr(t, "\"cat\":\"pass\""), "no pass events");
  cr_expect(strstr(t, "cache miss\",\"cat\":\"cache\""), "no cache lookup event");
  cr_expect(count(t, "\"cat\":\"tune\"") >= 2, "tuning trials (BN=64 and BN=128) missing");
  cr_expect(strstr(t, "\"outcome\":\"timed\""), "no timed trial");
  /* every event is one line of balanced braces */
  int depth = 0, lines = 0;
  for (const char *p = t; *p; p++) {
    if (*p == '{') depth++;
    if (*p == '}') depth--;
    if (*p == '\n' && p[1] == '{') lines++;
    cr_assert(depth >= 0);
  }
  cr_expect_eq(depth, 0);
  cr_expect(lines > 10, "only %d events", lines);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

Test(trace, uncreatable_file_fails_the_context) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = "", .trace_path = "/nonexistent-dir/trace.json"};
  cr_expect_eq(tile_context_create(&o, &ctx), TILE_IO);
  cr_expect_null(ctx);
}

Test(trace, off_by_default) {
  unsetenv("TILE_TRACE");
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_context_destroy(ctx);
}

/* The peaks benchmarks compare with: the stand-in driver reports an H200's attributes
 * (132 SMs, 1980 MHz, a 3201 MHz memory clock on a 6144-bit bus) and compute capability
 * 9.0, so sm_90a's row gives 4096 f16 Tensor Core FLOP per SM per clock. */
Test(trace, device_peaks_from_the_target_table) {
  setenv("TILE_LIBCUDA", TILE_FAKE_LIBCUDA, 1);
  unsetenv("FAKE_CUDA_CC");
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_device_info d;
  cr_assert_eq(tile_device_query(ctx, TILE_DEVICE_CUDA, &d), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(d.clock_mhz, 1980);
  double tc = d.sm_count * 1.98 * 4096 / 1000, f32 = d.sm_count * 1.98 * 256 / 1000;
  cr_expect(d.peak_tc_f16_tflops > tc * 0.999 && d.peak_tc_f16_tflops < tc * 1.001, "tc %g vs %g", d.peak_tc_f16_tflops, tc);
  cr_expect(d.peak_f32_tflops > f32 * 0.999 && d.peak_f32_tflops < f32 * 1.001, "f32 %g", d.peak_f32_tflops);
  cr_expect(d.peak_mem_gbps > 4916 && d.peak_mem_gbps < 4918, "memory %g GB/s", d.peak_mem_gbps);
  tile_device_info c;
  cr_assert_eq(tile_device_query(ctx, TILE_DEVICE_CPU, &c), TILE_OK);
  cr_expect(c.peak_tc_f16_tflops == 0 && c.peak_mem_gbps == 0, "the interpreter has no peaks");
  tile_context_destroy(ctx);
}
