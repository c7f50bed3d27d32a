/* test_scale.c - compile time grows linearly with the size of a kernel (issue 19).
 *
 * CSE compared every op with every op available before it, and the front end looked names
 * up by scanning every symbol in scope: a kernel of 100k statements took minutes to reach
 * Tile IR. This test generates such a kernel, compiles it to IR on the CPU (front end and
 * generic passes), prints the time of each stage, checks what CSE did, and fails only when
 * the whole compile takes longer than a generous bound (machines vary; the quadratic
 * versions took over a minute). */
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

static void report(void *ud, const char *title, const char *text) {
  (void)ud;
  fprintf(stderr, "scale: %s\n%s", title, text);
}

static size_t count(const char *text, const char *what) {
  size_t k = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) k++;
  return k;
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
