/* test_ir.c - Tile IR: text round trip, verifier, each generic pass, and the interpreter on
 * hand-written IR (the front end's own tests cover lowering from .tile source). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "eval.h"
#include "fp16.h"
#include "interp.h"
#include "ir.h"
#include "passes.h"
#include "test_seed.h"
#include "testfiles.h"

#include "fixture.h"

static struct ir_func *parse_one(struct fixture *fx, const char *text) {
  struct ir_module m;
  bool ok = ir_parse("test.ir", text, strlen(text), &fx->a, &fx->s, &m, &fx->err);
  cr_assert(ok, "parse failed: %s", sb_str(&fx->err));
  cr_assert_eq(m.funcs.n, 1);
  return m.funcs.v[0];
}

static const char *print(struct fixture *fx, struct ir_func *f) {
  struct strbuf sb;
  sb_init(&sb, &fx->a);
  ir_print_func(&sb, f, 0);
  return sb_str(&sb);
}


Test(ir, round_trip_simple) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, TEST_VADD_IR);
  cr_assert(ir_verify(f, NULL, &fx.err), "%s", sb_str(&fx.err));
  cr_assert_str_eq(print(&fx, f), TEST_VADD_IR);
  arena_free(&fx.a);
}

static const char *LOOP =
    "kernel @rowsum(%A: tensor<f16[%M, %K]>, %O: out tensor<f32[%M]>) warps=8 {\n"
    "grid:\n"
    "  %0 = const 1 : i32\n"
    "  grid %M, %0, %0\n"
    "body:\n"
    "  %1 = program_id {axis=0} : i32\n"
    "  %2 = const 0.0 : tile<32xf32>\n"
    "  %3 = const 0 : i32\n"
    "  %4 = const 32 : i32\n"
    "  %5 = for %6 = %3 to %K step %4 iter(%7 = %2) {stages=2} -> (tile<32xf32>) {\n"
    "    %8 = load %A[%1, %6] {mask=2} : tile<32xf16>\n"
    "    %9 = cast %8 : tile<32xf32>\n"
    "    %10 = add %7, %9 : tile<32xf32>\n"
    "    yield %10\n"
    "  }\n"
    "  %11 = reduce_sum %5 {axis=0} : f32\n"
    "  %12 = const 0.0 : f32\n"
    "  %13 = gt %11, %12 : bool\n"
    "  %14 = if %13 -> (f32) {\n"
    "    yield %11\n"
    "  } else {\n"
    "    %15 = neg %11 : f32\n"
    "    yield %15\n"
    "  }\n"
    "  store %O[%1], %14 {mask=0}\n"
    "}\n";

Test(ir, round_trip_control_flow) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, LOOP);
  cr_assert(ir_verify(f, NULL, &fx.err), "%s", sb_str(&fx.err));
  const char *once = print(&fx, f);
  cr_assert_str_eq(once, LOOP);
  /* and a clone prints the same */
  struct ir_func *g = ir_func_clone(f, &fx.a);
  cr_assert_str_eq(print(&fx, g), LOOP);
  arena_free(&fx.a);
}

static void expect_parse_error(const char *text, const char *needle) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_module m;
  bool ok = ir_parse("bad.ir", text, strlen(text), &fx.a, &fx.s, &m, &fx.err);
  cr_assert(!ok, "expected a parse error for:\n%s", text);
  cr_assert(strstr(sb_str(&fx.err), needle), "error '%s' lacks '%s'", sb_str(&fx.err), needle);
  cr_assert(strstr(sb_str(&fx.err), "bad.ir:"), "error lacks the location: %s", sb_str(&fx.err));
  arena_free(&fx.a);
}

Test(ir, parse_errors) {
  expect_parse_error("kernel @k() warps=4 {\ngrid:\n  %0 = bogus : i32\n", "unknown op 'bogus'");
  expect_parse_error("kernel @k() warps=4 {\ngrid:\n  %0 = add %1, %2 : i32\n", "undefined value");
  expect_parse_error("kernel @k() warps=4 {\ngrid:\n  %0 = const 1 : q32\n", "unknown element type");
  expect_parse_error("kernel @k(%A: tensor<f32[%N]>) warps=3x {\n", "expected");
  expect_parse_error("kernel @k() warps=4 {\ngrid:\n  %0 = const 1 : i32\n  %0 = const 2 : i32\n",
                     "defined twice");
  expect_parse_error("kernel @k() warps=4 {\ngrid:\n  %0 = program_id {bogus=1} : i32\n", "no attribute");
}

static void expect_verify_error(const char *text, const char *needle) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, text);
  bool ok = ir_verify(f, "testpass", &fx.err);
  cr_assert(!ok, "verifier accepted:\n%s", text);
  cr_assert(strstr(sb_str(&fx.err), needle), "'%s' lacks '%s'", sb_str(&fx.err), needle);
  cr_assert(strstr(sb_str(&fx.err), "after pass testpass"), "message lacks the pass: %s", sb_str(&fx.err));
  arena_free(&fx.a);
}

#define HDR "kernel @k(%A: tensor<f32[%N]>, %B: out tensor<f32[%N]>) warps=4 {\ngrid:\n  %0 = const 1 : i32\n  grid %0, %0, %0\nbody:\n"

Test(ir, verifier_catches) {
  expect_verify_error(HDR "  %1 = const 1.0 : f32\n  %2 = const 1 : i32\n  %3 = add %1, %2 : f32\n}\n",
                      "element type");
  expect_verify_error(HDR "  %1 = const 0 : i32\n  %2 = load %A[%1] {mask=1} : tile<64xf16>\n}\n",
                      "element type differs");
  expect_verify_error(HDR "  %1 = const 0 : i32\n  %2 = load %A[%1] {mask=1} : tile<64xf32>\n"
                          "  store %A[%1], %2 {mask=1}\n}\n",
                      "not 'out'");
  expect_verify_error(HDR "  %1 = const 0 : i32\n  %2 = load %A[%1] {mask=0} : tile<64xf32>\n}\n",
                      "rank");
  expect_verify_error(HDR "  %1 = const 1.0 : tile<16x32xf32>\n  %2 = const 1.0 : tile<16x32xf32>\n"
                          "  %3 = dot %1, %2, %1 : tile<16x32xf32>\n}\n",
                      "chain");
  expect_verify_error(HDR "  %1 = const 1.0 : tile<4xf32>\n  %2 = reduce_sum %1 {axis=1} : f32\n}\n",
                      "bad reduction");
  expect_verify_error(HDR "  %1 = const 0 : i32\n  %2 = const 4 : i32\n"
                          "  %3 = for %4 = %1 to %2 step %2 iter(%5 = %1) -> (i32) {\n    yield\n  }\n}\n",
                      "yields 0 values");
  expect_verify_error(HDR "  %1 = const 1.0 : f32\n  %2 = exp %1 : f32\n  %3 = const 1 : i32\n"
                          "  %4 = exp %3 : i32\n}\n",
                      "float operand");
}

/* Verifier messages about parsed IR start "file:line:col: error: " at the op that broke
 * the rule (issue 19: they named only an op number, which the text does not show). */
static const char *verify_message(struct fixture *fx, const char *text) {
  struct ir_func *f = parse_one(fx, text);
  cr_assert(!ir_verify(f, NULL, &fx->err), "the IR verified");
  return sb_str(&fx->err);
}

Test(ir, verifier_points_at_the_op) {
  struct fixture fx;
  fx_init(&fx);
  /* HDR is five lines: line 8, column 3 is the op that adds an i32 to an f32 */
  const char *m = verify_message(&fx, HDR "  %1 = const 1.0 : f32\n  %2 = const 1 : i32\n  %3 = add %1, %2 : f32\n}\n");
  cr_expect(strncmp(m, "test.ir:8:3: error: ir verifier: @k: op ", 40) == 0, "%s", m);
  cr_expect(strstr(m, "'add': operand 1 element type i32 differs"), "%s", m);
  /* an op inside a loop body, indented: line 10, column 5 */
  sb_init(&fx.err, &fx.a);
  m = verify_message(&fx, HDR "  %1 = const 0 : i32\n  %2 = const 4 : i32\n"
                              "  %3 = for %4 = %1 to %2 step %2 iter(%5 = %1) -> (i32) {\n"
                              "    %6 = const 1 : i32\n    %7 = exp %6 : i32\n    yield %5\n  }\n}\n");
  cr_expect(strncmp(m, "test.ir:10:5: error: ir verifier: @k: op ", 41) == 0, "%s", m);
  cr_expect(strstr(m, "'exp': needs a float operand"), "%s", m);
  /* a rule of the whole kernel: at its header */
  sb_init(&fx.err, &fx.a);
  m = verify_message(&fx, "kernel @k(%A: tensor<f32[%N]>) warps=3 {\ngrid:\n  %0 = const 1 : i32\n"
                          "  grid %0, %0, %0\nbody:\n}\n");
  cr_expect(strncmp(m, "test.ir:1:1: error: ir verifier: @k: warps=3", 44) == 0, "%s", m);
  arena_free(&fx.a);
}

Test(ir, verifier_points_at_the_tile_source) {
  /* IR from the front end carries .tile positions: an op that a pass broke is reported at
   * the statement it came from, with the pass named */
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, HDR "  %1 = const 1.0 : f32\n  %2 = exp %1 : f32\n}\n");
  f->file = "k.tile";
  const struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  struct ir_op *op = &f->ops.v[body->ops.v[body->ops.n - 1]];
  cr_assert_eq(op->code, IR_EXP);
  op->loc = (struct ir_loc){12, 9};
  f->values.v[op->res].type = ir_type_scalar(f, DT_I32); /* exp of an f32 giving an i32 */
  cr_assert(!ir_verify(f, "testpass", &fx.err));
  cr_expect(strncmp(sb_str(&fx.err), "k.tile:12:9: error: ir verifier (after pass testpass): @k: op ", 62) == 0,
            "%s", sb_str(&fx.err));
  arena_free(&fx.a);
}

/* ---- passes ---- */

static const char *run_passes(struct fixture *fx, const char *text, const char *passes) {
  struct ir_func *f = parse_one(fx, text);
  struct pass_options po = {.verify_each = true};
  bool ok = pass_run_list(passes, f, &po, &fx->err);
  cr_assert(ok, "passes failed: %s", sb_str(&fx->err));
  return print(fx, f);
}

Test(passes, fold_and_dce) {
  struct fixture fx;
  fx_init(&fx);
  const char *in = HDR
      "  %1 = const 2 : i32\n  %2 = const 64 : i32\n  %3 = mul %1, %2 : i32\n"
      "  %4 = const 1.5 : f32\n  %5 = cast %4 : f16\n  %6 = cast %5 : f32\n"
      "  %7 = splat %6 : tile<128xf32>\n"
      "  store %B[%3], %7 {mask=1}\n}\n";
  const char *out = run_passes(&fx, in, "canonicalize,fold,canonicalize,dce");
  cr_assert(strstr(out, "const 128 : i32"), "not folded:\n%s", out);
  cr_assert(strstr(out, "const 1.5 : tile<128xf32>"), "splat of constant not folded:\n%s", out);
  cr_assert(!strstr(out, "mul"), "dead mul left:\n%s", out);
  cr_assert(!strstr(out, "cast"), "dead cast left:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, fold_rounds_like_the_interpreter) {
  struct fixture fx;
  fx_init(&fx);
  /* 1/3 in f16 is 0.333251953125; i32 overflow wraps */
  const char *in = HDR
      "  %1 = const 1.0 : f16\n  %2 = const 3.0 : f16\n  %3 = div %1, %2 : f16\n  %4 = cast %3 : f32\n"
      "  %5 = const 2147483647 : i32\n  %6 = const 1 : i32\n  %7 = add %5, %6 : i32\n"
      "  %8 = splat %4 : tile<4xf32>\n  store %B[%7], %8 {mask=1}\n}\n";
  const char *out = run_passes(&fx, in, "fold,canonicalize,fold,dce");
  cr_assert(strstr(out, "const 0.333251953125 : tile<4xf32>"), "f16 rounding lost:\n%s", out);
  cr_assert(strstr(out, "const -2147483648 : i32"), "no i32 wrap:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, cse_merges_commuted_duplicates) {
  struct fixture fx;
  fx_init(&fx);
  const char *in = HDR
      "  %1 = program_id {axis=0} : i32\n  %2 = program_id {axis=0} : i32\n"
      "  %3 = const 7 : i32\n  %4 = mul %1, %3 : i32\n  %5 = mul %3, %2 : i32\n"
      "  %6 = add %4, %5 : i32\n  %7 = const 1.0 : tile<8xf32>\n  store %B[%6], %7 {mask=1}\n}\n";
  const char *out = run_passes(&fx, in, "canonicalize,cse,dce");
  const char *first = strstr(out, "program_id");
  cr_assert(first && !strstr(first + 1, "program_id"), "program_id not merged:\n%s", out);
  const char *m = strstr(out, "mul");
  cr_assert(m && !strstr(m + 1, "mul"), "mul not merged:\n%s", out);
  cr_assert(strstr(out, "add %4, %4") || strstr(out, "add %3, %3") || strstr(out, "add %2, %2"),
            "add should use one value twice:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, canonicalize_fuses_accumulate_into_dot) {
  struct fixture fx;
  fx_init(&fx);
  const char *in =
      "kernel @k(%A: tensor<f16[%M, %K]>, %C: out tensor<f32[%M, %K]>) warps=4 {\ngrid:\n"
      "  %0 = const 1 : i32\n  grid %0, %0, %0\nbody:\n"
      "  %1 = const 0 : i32\n  %2 = load %A[%1, %1] {mask=3} : tile<16x16xf16>\n"
      "  %3 = const 0.0 : tile<16x16xf32>\n  %4 = const 1.0 : tile<16x16xf32>\n"
      "  %5 = dot %2, %2, %3 : tile<16x16xf32>\n  %6 = add %4, %5 : tile<16x16xf32>\n"
      "  store %C[%1, %1], %6 {mask=3}\n}\n";
  const char *out = run_passes(&fx, in, "canonicalize,dce");
  cr_assert(!strstr(out, " add "), "add not fused:\n%s", out);
  cr_assert(strstr(out, "dot %"), "dot missing:\n%s", out);
  cr_assert(!strstr(out, "const 0.0"), "zero accumulator should be dead:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, dce_keeps_stores_and_removes_dead_loops) {
  struct fixture fx;
  fx_init(&fx);
  const char *in = HDR
      "  %1 = const 0 : i32\n  %2 = const 4 : i32\n  %3 = const 1 : i32\n"
      "  %4 = for %5 = %1 to %2 step %3 iter(%6 = %1) -> (i32) {\n"
      "    %7 = add %6, %5 : i32\n    yield %7\n  }\n"
      "  %8 = const 2.0 : tile<4xf32>\n"
      "  for %10 = %1 to %2 step %3 {\n    store %B[%10], %8 {mask=1}\n    yield\n  }\n}\n";
  const char *out = run_passes(&fx, in, "dce");
  cr_assert(!strstr(out, "iter("), "dead loop kept:\n%s", out);
  cr_assert(strstr(out, "store"), "store removed:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, dce_drops_dead_carried_values) {
  struct fixture fx;
  fx_init(&fx);
  const char *in = HDR
      "  %1 = const 0 : i32\n  %2 = const 4 : i32\n  %3 = const 1 : i32\n"
      "  %4, %5 = for %6 = %1 to %2 step %3 iter(%7 = %1, %8 = %3) -> (i32, i32) {\n"
      "    %9 = add %7, %6 : i32\n    %10 = mul %8, %6 : i32\n    yield %9, %10\n  }\n"
      "  %11 = const 2.0 : tile<4xf32>\n  store %B[%4], %11 {mask=1}\n}\n";
  const char *out = run_passes(&fx, in, "dce");
  cr_assert(!strstr(out, "mul"), "dead carried value kept:\n%s", out);
  cr_assert(strstr(out, "iter(") && strstr(out, "-> (i32)"), "live carried value lost:\n%s", out);
  arena_free(&fx.a);
}

Test(passes, unknown_pass_is_an_error) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, TEST_VADD_IR);
  struct pass_options po = {0};
  cr_assert(!pass_run_list("cse,frobnicate", f, &po, &fx.err));
  cr_assert(strstr(sb_str(&fx.err), "unknown pass 'frobnicate'"));
  arena_free(&fx.a);
}

/* ---- interpreter ---- */

Test(interp, vadd_with_ragged_tail) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, TEST_VADD_IR);
  struct rng r;
  rng_seed(&r, rng_test_seed("interp.vadd"));
  int sizes[] = {1, 7, 33, 64, 100, 257};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si];
    float x[300], y[300], z[300];
    for (int i = 0; i < n; i++) {
      x[i] = rng_uniform(&r, -1, 1);
      y[i] = rng_uniform(&r, -1, 1);
      z[i] = NAN;
    }
    z[n] = 12345.0f; /* past the end: must stay untouched */
    struct interp_arg args[5] = {0};
    /* params: X, Y, N (shape, created at first use), Z, s */
    for (uint32_t i = 0; i < f->params.n; i++) {
      const struct ir_param *p = &f->params.v[i];
      struct interp_arg *a = &args[i];
      if (p->kind == IR_PARAM_SHAPE) {
        a->scalar.i = n;
        continue;
      }
      if (p->kind == IR_PARAM_SCALAR) {
        a->scalar.f = 0.5;
        continue;
      }
      a->tensor.dtype = DT_F32;
      a->tensor.rank = 1;
      a->tensor.shape[0] = n;
      a->tensor.strides[0] = 1;
      a->tensor.data = strcmp(p->name, "X") == 0 ? (void *)x : strcmp(p->name, "Y") == 0 ? (void *)y : (void *)z;
    }
    int64_t grid[3];
    interp_grid(f, args, grid, NULL);
    cr_assert_eq(grid[0], (n + 63) / 64);
    cr_assert(interp_run(f, args, grid, 2, &tl_default_alloc, &fx.err));
    for (int i = 0; i < n; i++) cr_assert_float_eq(z[i], (float)(x[i] * 0.5f + y[i]), 1e-6, "n=%d i=%d", n, i);
    cr_assert_eq(z[n], 12345.0f, "wrote past the end for n=%d", n);
  }
  arena_free(&fx.a);
}

Test(interp, loop_reduce_and_branch) {
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_one(&fx, LOOP);
  struct rng r;
  rng_seed(&r, rng_test_seed("interp.loop"));
  enum { M = 5, K = 77 };
  uint16_t a[M * K];
  float out[M], want[M];
  for (int i = 0; i < M; i++) {
    double s = 0;
    for (int k = 0; k < K; k++) {
      a[i * K + k] = tl_f32_to_f16(rng_uniform(&r, -1, 1));
      s += tl_f16_to_f32(a[i * K + k]);
    }
    want[i] = (float)fabs(s);
  }
  struct interp_arg args[4] = {0};
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_SHAPE) {
      args[i].scalar.i = strcmp(p->name, "M") == 0 ? M : K;
    } else if (strcmp(p->name, "A") == 0) {
      args[i].tensor = (struct interp_tensor){a, DT_F16, 2, {M, K}, {K, 1}};
    } else {
      args[i].tensor = (struct interp_tensor){out, DT_F32, 1, {M}, {1}};
    }
  }
  int64_t grid[3];
  interp_grid(f, args, grid, NULL);
  cr_assert_eq(grid[0], M);
  cr_assert(interp_run(f, args, grid, 1, &tl_default_alloc, &fx.err));
  for (int i = 0; i < M; i++) cr_assert_float_eq(out[i], want[i], 1e-4, "row %d", i);
  arena_free(&fx.a);
}

Test(eval, integer_edge_cases_never_trap) {
  ir_scalar a[2], r;
  a[0].i = INT32_MIN;
  a[1].i = -1;
  cr_assert(ir_eval_elem(IR_DIV, DT_I32, a, &r));
  cr_assert_eq(r.i, INT32_MIN);
  a[1].i = 0;
  cr_assert(ir_eval_elem(IR_DIV, DT_I32, a, &r));
  cr_assert_eq(r.i, 0);
  cr_assert(ir_eval_elem(IR_REM, DT_I32, a, &r));
  cr_assert_eq(r.i, 0);
  a[0].i = 1;
  a[1].i = 33;
  cr_assert(ir_eval_elem(IR_SHL, DT_I32, a, &r));
  cr_assert_eq(r.i, 2, "shift counts are taken mod 32");
  ir_scalar x = {.f = 1e10};
  cr_assert_eq(ir_eval_cast(DT_F32, DT_I32, x).i, INT32_MAX);
  x.f = NAN;
  cr_assert_eq(ir_eval_cast(DT_F32, DT_I32, x).i, 0);
  x.f = -2.7;
  cr_assert_eq(ir_eval_cast(DT_F32, DT_I32, x).i, -2);
  x.f = 65520.0;
  cr_assert(isinf(ir_eval_cast(DT_F32, DT_F16, x).f), "65520 rounds to inf in f16");
}

Test(eval, float_min_max_ignore_nan) {
  ir_scalar a[2] = {{.f = NAN}, {.f = 3.0}}, r;
  cr_assert(ir_eval_elem(IR_MAX, DT_F32, a, &r));
  cr_assert_eq(r.f, 3.0);
  cr_assert(ir_eval_elem(IR_MIN, DT_F32, a, &r));
  cr_assert_eq(r.f, 3.0);
}

/* canonicalize's pow2 rule: x / P and x % P for a shape size P with the pow2 fact become
 * shifts and masks (no div or rem left); the interpreter runs both forms on values of both
 * signs for every power of two P up to 64 and must agree with C's truncating / and %. */
static void pow2_division_case(const char *dt) {
  struct fixture fx;
  fx_init(&fx);
  char text[1024];
  snprintf(text, sizeof text,
           "kernel @k(%%X: tensor<%s[%%N]>, %%T: tensor<f32[%%P]>, %%Q: out tensor<%s[%%N]>,"
           " %%R: out tensor<%s[%%N]>) warps=1 pow2(%%P) {\ngrid:\n  %%0 = const 1 : i32\n  grid %%0, %%0, %%0\n"
           "body:\n  %%1 = const 0 : i32\n  %%2 = load %%X[%%1] {mask=1} : tile<64x%s>\n  %%3 = cast %%P : %s\n"
           "  %%4 = splat %%3 : tile<64x%s>\n  %%5 = div %%2, %%4 : tile<64x%s>\n  %%6 = rem %%2, %%4 : tile<64x%s>\n"
           "  store %%Q[%%1], %%5 {mask=1}\n  store %%R[%%1], %%6 {mask=1}\n}\n",
           dt, dt, dt, dt, dt, dt, dt, dt);
  bool uns = strcmp(dt, "u32") == 0;
  for (int form = 0; form < 2; form++) {
    struct ir_func *f = parse_one(&fx, text);
    if (form) {
      struct pass_options po = {.verify_each = true};
      cr_assert(pass_run_list("canonicalize,fold,canonicalize,cse,dce", f, &po, &fx.err), "%s", sb_str(&fx.err));
      const char *out = print(&fx, f);
      cr_assert(!strstr(out, " div ") && !strstr(out, " rem ") && strstr(out, "ctz"), "%s: not rewritten:\n%s", dt,
                out);
    }
    for (int p = 1; p <= 64; p *= 2) {
      int32_t x[64], q[64], r[64];
      for (int i = 0; i < 64; i++) x[i] = uns ? i * 977 + 3 : (i - 32) * 37 + (i % 5); /* both signs */
      x[0] = uns ? (int32_t)0xfffffff0u : INT32_MIN;
      struct interp_arg args[8] = {0};
      for (uint32_t i = 0; i < f->params.n; i++) {
        const struct ir_param *pp = &f->params.v[i];
        struct interp_arg *a = &args[i];
        if (pp->kind == IR_PARAM_SHAPE) {
          a->scalar.i = strcmp(pp->name, "P") == 0 ? p : 64;
          continue;
        }
        bool t = strcmp(pp->name, "T") == 0;
        a->tensor.dtype = t ? DT_F32 : uns ? DT_U32 : DT_I32;
        a->tensor.rank = 1;
        a->tensor.shape[0] = t ? p : 64;
        a->tensor.strides[0] = 1;
        a->tensor.data = t ? (void *)x : pp->name[0] == 'X' ? (void *)x : pp->name[0] == 'Q' ? (void *)q : (void *)r;
      }
      int64_t grid[3] = {1, 1, 1};
      cr_assert(interp_run(f, args, grid, 1, &tl_default_alloc, &fx.err), "%s", sb_str(&fx.err));
      for (int i = 0; i < 64; i++) {
        int32_t wq = uns ? (int32_t)((uint32_t)x[i] / (uint32_t)p) : x[i] / p;
        int32_t wr = uns ? (int32_t)((uint32_t)x[i] % (uint32_t)p) : x[i] % p;
        cr_assert(q[i] == wq && r[i] == wr, "%s form %d: %d / %d gave %d, %d (want %d, %d)", dt, form, x[i], p, q[i],
                  r[i], wq, wr);
      }
    }
  }
  arena_free(&fx.a);
}

Test(passes, pow2_divisions_become_shifts) {
  pow2_division_case("i32");
  pow2_division_case("u32");
}

/* canonicalize: an f32 tile divided by a splat becomes a multiply by the splat of the
 * scalar's reciprocal (one division per program); an f16 tile keeps its division. */
Test(passes, f32_division_by_a_scalar_becomes_a_reciprocal_multiply) {
  struct fixture fx;
  fx_init(&fx);
  for (int half = 0; half < 2; half++) {
    const char *dt = half ? "f16" : "f32";
    char text[768];
    snprintf(text, sizeof text,
             "kernel @k(%%A: tensor<%s[%%N]>, %%B: out tensor<%s[%%N]>) warps=4 {\ngrid:\n  %%0 = const 1 : i32\n"
             "  grid %%0, %%0, %%0\nbody:\n  %%1 = const 0 : i32\n  %%2 = load %%A[%%1] {mask=1} : tile<128x%s>\n"
             "  %%3 = reduce_sum %%2 {axis=0} : %s\n  %%4 = splat %%3 : tile<128x%s>\n"
             "  %%5 = div %%2, %%4 : tile<128x%s>\n  store %%B[%%1], %%5 {mask=1}\n}\n",
             dt, dt, dt, dt, dt, dt);
    const char *out = run_passes(&fx, text, "canonicalize,fold,canonicalize,cse,dce");
    unsigned tile_divs = 0, scalar_divs = 0; /* division lines by result type */
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
      const char *e = strchr(l, '\n'), *dv = strstr(l, " div ");
      if (!dv || (e && dv > e)) continue;
      const char *t = strstr(l, "tile<");
      if (t && (!e || t < e)) tile_divs++;
      else scalar_divs++;
    }
    if (half) {
      cr_expect(tile_divs == 1 && scalar_divs == 0, "f16: the division should stay:\n%s", out);
    } else {
      cr_expect(tile_divs == 0 && scalar_divs == 1 && strstr(out, " mul "),
                "f32: expected one scalar division and a multiply:\n%s", out);
    }
  }
  arena_free(&fx.a);
}
