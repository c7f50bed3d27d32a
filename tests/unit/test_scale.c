/* test_scale.c - compile time grows linearly with the size of a kernel (issue 19).
 *
 * CSE compared every op with every op available before it, and the front end looked names
 * up by scanning every symbol in scope: a kernel of 100k statements took minutes to reach
 * Tile IR. Canonicalize, fold and DCE rescanned the function or the block for every op
 * they rewrote or removed, and DCE followed operand chains by recursion (a stack overflow
 * under AddressSanitizer for a chain of 100k statements). Each test generates such a
 * kernel, compiles it to IR on the CPU (front end and generic passes), prints the time of
 * each stage, checks what the passes did, and fails only when the whole compile takes
 * longer than a generous bound (machines vary; the quadratic versions took minutes). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "tile.h"

enum { TRIPLES = 33334 }; /* three statements each: 100k statements */

/* The kernel: a chain of statements inside a loop, each third one repeating a product of
 * the one before (`a * a`), which CSE must merge, and every first one using the same
 * constant 0.5, which CSE must merge into one. */
static char *big_kernel(size_t *len) {
  size_t cap = (size_t)TRIPLES * 128 + 1024, n = 0;
  char *s = malloc(cap);
  cr_assert_not_null(s);
  n += (size_t)snprintf(s + n, cap - n,
                        "kernel big(X: f32[N], Y: out f32[N]) grid(1) warps(4) {\n"
                        "  let x = X[0 : +16];\n"
                        "  var acc = x;\n"
                        "  for it in range(0, 2) {\n");
  for (int i = 0; i < TRIPLES; i++)
    n += (size_t)snprintf(s + n, cap - n,
                          "    let a%d = acc * 0.5 + x;\n"
                          "    let b%d = a%d * a%d;\n"
                          "    acc = b%d - a%d * a%d + acc;\n",
                          i, i, i, i, i, i, i);
  n += (size_t)snprintf(s + n, cap - n, "  }\n  Y[0 : +16] = acc;\n}\n");
  cr_assert_lt(n, cap);
  *len = n;
  return s;
}

/* A kernel: head, then n statements `before` i `after` (i = 0 .. n-1), then tail. */
static char *many(const char *head, const char *before, const char *after, int n, const char *tail, size_t *len) {
  size_t cap = strlen(head) + strlen(tail) + (size_t)n * (strlen(before) + strlen(after) + 12) + 1, used = 0;
  char *s = malloc(cap);
  cr_assert_not_null(s);
  used += (size_t)snprintf(s + used, cap - used, "%s", head);
  for (int i = 0; i < n; i++) used += (size_t)snprintf(s + used, cap - used, "%s%d%s", before, i, after);
  used += (size_t)snprintf(s + used, cap - used, "%s", tail);
  cr_assert_lt(used, cap);
  *len = used;
  return s;
}

static void report(void *ud, const char *title, const char *text) {
  (void)ud;
  fprintf(stderr, "scale: %s\n%s", title, text);
}

static size_t count(const char *text, const char *what) {
  size_t k = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) k++;
  return k;
}

/* Compiles src (.tile, or IR text with `passes`) to IR within the bound; the IR text. */
static char *to_ir(const char *what, const char *name, const char *src, size_t len, const char *passes) {
  tile_context *ctx = NULL;
  tile_context_options co = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&co, &ctx), TILE_OK);
  tile_emit_options eo = {.what = TILE_EMIT_IR, .time_passes = 1, .report = report};
  eo.input_is_ir = passes != NULL;
  eo.passes = passes;
  char *out = NULL;
  size_t out_len = 0;
  double t0 = tl_now_ms();
  tile_status st = tile_emit(ctx, name, src, len, NULL, &eo, &out, &out_len);
  double ms = tl_now_ms() - t0;
  fprintf(stderr, "scale: %s to Tile IR in %.0f ms\n", what, ms);
  cr_assert_eq(st, TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_lt(ms, 20000.0, "%s took %.0f ms", what, ms);
  tile_context_destroy(ctx);
  char *copy = strdup(out);
  tile_free(out);
  return copy;
}

/* canonicalize: x * 1 + 0 on ints, 100k times, is x */
Test(scale, hundred_thousand_identities, .timeout = 600) {
  size_t len;
  char *src = many("kernel k(X: i32[N], Y: out i32[N]) grid(1) warps(4) {\n  var acc = X[0 : +16];\n",
                   "  acc = acc * 1 + 0; // ", "\n", 100000, "  Y[0 : +16] = acc;\n}\n", &len);
  char *ir = to_ir("100000 identities", "identities.tile", src, len, NULL);
  cr_expect_eq(count(ir, " = mul "), 0, "%s", ir);
  cr_expect_eq(count(ir, " = add "), 0, "%s", ir);
  free(ir);
  free(src);
}

/* DCE: 250k statements whose values nobody uses (different constants: CSE cannot merge them;
 * 250k, not 100k: the quadratic DCE took 8 s for 100k, under the bound) */
Test(scale, many_dead_statements, .timeout = 600) {
  enum { N = 250000 };
  size_t cap = (size_t)N * 40 + 512, used = 0;
  char *src = malloc(cap);
  cr_assert_not_null(src);
  used += (size_t)snprintf(src, cap, "kernel k(X: f32[N], Y: out f32[N]) grid(1) warps(4) {\n  let x = X[0 : +16];\n");
  for (int i = 0; i < N; i++) used += (size_t)snprintf(src + used, cap - used, "  let d%d = x * %d.5;\n", i, i);
  used += (size_t)snprintf(src + used, cap - used, "  Y[0 : +16] = x;\n}\n");
  cr_assert_lt(used, cap);
  char *ir = to_ir("250000 dead statements", "dead.tile", src, used, NULL);
  cr_expect_eq(count(ir, " = mul "), 0, "%s", ir);
  free(ir);
  free(src);
}

/* fold: a chain of 100k additions of constants, as IR text, is one constant */
Test(scale, hundred_thousand_constant_folds, .timeout = 600) {
  enum { N = 100000 }; /* each line names two values: written out here */
  size_t cap = (size_t)N * 48 + 512, used = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  used += (size_t)snprintf(text, cap, "kernel @k(%%Y: out tensor<i32[%%N]>) warps=4 {\ngrid:\n  %%g = const 1 : i32\n"
                                      "  grid %%g, %%g, %%g\nbody:\n  %%c = const 1 : i32\n  %%s0 = const 0 : i32\n");
  for (int i = 1; i <= N; i++) used += (size_t)snprintf(text + used, cap - used, "  %%s%d = add %%s%d, %%c : i32\n", i, i - 1);
  used += (size_t)snprintf(text + used, cap - used, "  %%z = const 0 : i32\n  %%v = splat %%s%d : tile<16xi32>\n"
                                                    "  store %%Y[%%z], %%v {mask=1}\n}\n", N);
  cr_assert_lt(used, cap);
  char *ir = to_ir("100000 constant folds", "folds.ir", text, used, "fold,dce");
  cr_expect(strstr(ir, " = const 100000 : i32\n"), "%s", ir);
  cr_expect_eq(count(ir, " = add "), 0, "%s", ir);
  free(ir);
  free(text);
}

Test(scale, hundred_thousand_statements_to_ir, .timeout = 600) {
  size_t len;
  char *src = big_kernel(&len);
  tile_context *ctx = NULL;
  tile_context_options co = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&co, &ctx), TILE_OK);
  tile_emit_options eo = {.what = TILE_EMIT_IR, .time_passes = 1, .report = report};
  char *out = NULL;
  size_t out_len = 0;
  double t0 = tl_now_ms();
  tile_status st = tile_emit(ctx, "big.tile", src, len, NULL, &eo, &out, &out_len);
  double ms = tl_now_ms() - t0;
  fprintf(stderr, "scale: %d statements to Tile IR in %.0f ms\n", 3 * TRIPLES, ms);
  cr_assert_eq(st, TILE_OK, "%s", tile_errmsg(ctx));
  /* per statement triple: acc * 0.5, a * a (once: CSE merged the repeat), one constant */
  cr_expect_eq(count(out, " = mul "), 2 * (size_t)TRIPLES);
  cr_expect_eq(count(out, " = const 0.5 "), 1);
  cr_expect_lt(ms, 20000.0, "compiling %d statements took %.0f ms", 3 * TRIPLES, ms);
  tile_free(out);
  tile_context_destroy(ctx);
  free(src);
}
