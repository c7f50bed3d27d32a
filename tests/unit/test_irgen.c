/* test_irgen.c - lowering to Tile IR: parameters, the grid block, loads and stores, SSA for
 * vars through for/if, promotion casts, broadcasting, math in f32, and source locations.
 * Every lowered function must also pass ir_verify (lang_lower checks it; so do the tests). */
#include <criterion/criterion.h>
#include <string.h>

#include "lang.h"

struct lowered {
  struct arena a;
  struct strtab st;
  struct lang_ctx *c;
  struct ir_func *f;
  const char *text;
};

static void lower(struct lowered *l, const char *src, const struct lang_define *defs, uint32_t ndefs) {
  arena_init(&l->a, NULL, NULL);
  strtab_init(&l->st, &l->a);
  l->c = lang_ctx_new(&l->a, &l->st);
  struct ast_file *file = lang_parse(l->c, "t.tile", src, strlen(src));
  l->f = lang_lower(l->c, file, NULL, defs, ndefs);
  cr_assert(l->f, "lowering failed:\n%s", lang_diag_text(l->c));
  struct strbuf err;
  sb_init(&err, &l->a);
  cr_assert(ir_verify(l->f, "test", &err), "%s", sb_str(&err));
  struct strbuf sb;
  sb_init(&sb, &l->a);
  ir_print_func(&sb, l->f, 0);
  l->text = sb_str(&sb);
}

static int count_ops(const struct ir_func *f, ir_opcode code) {
  int n = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) n += f->ops.v[i].code == code && f->ops.v[i].block != 0;
  return n;
}

static const char *GEMM =
    "kernel gemm<T: f16 | bf16 = f16, BM: 64 | 128 = 128, BN: 64 | 128 = 64, BK: 32 = 32,\n"
    "            ACT: \"none\" | \"relu\" = \"none\", HAS_BIAS: bool = false>\n"
    "    (A: T[M, K], B: T[K, N], bias: f32[N], C: out T[M, N], alpha: f32)\n"
    "  grid(cdiv(M, BM), cdiv(N, BN)) warps(8)\n"
    "{\n"
    "  let m0 = program_id(0) * BM;\n"
    "  let n0 = program_id(1) * BN;\n"
    "  var acc = zeros([BM, BN], f32);\n"
    "  for k in range(0, K, BK, stages=3) {\n"
    "    acc += A[m0 : +BM, k : +BK] @ B[k : +BK, n0 : +BN];\n"
    "  }\n"
    "  acc = acc * alpha;\n"
    "  if HAS_BIAS { acc += bias[n0 : +BN][None, :]; }\n"
    "  if ACT == \"relu\" { acc = relu(acc); }\n"
    "  C[m0 : +BM, n0 : +BN] = acc;\n"
    "}\n";

Test(irgen, parameters_shapes_and_grid) {
  struct lowered l;
  lower(&l, GEMM, NULL, 0);
  struct ir_func *f = l.f;
  cr_assert_str_eq(f->name, "gemm");
  cr_assert_eq(f->warps, 8);
  cr_assert_eq(f->params.n, 8, "5 user parameters, then M, K, N");
  const char *names[] = {"A", "B", "bias", "C", "alpha", "M", "K", "N"};
  for (int i = 0; i < 8; i++) {
    cr_assert_str_eq(f->params.v[i].name, names[i]);
    cr_assert_eq(f->params.v[i].source_index, i < 5 ? (uint32_t)i : UINT32_MAX);
  }
  cr_assert_eq(f->params.v[0].kind, IR_PARAM_TENSOR);
  cr_assert_eq(f->params.v[3].is_out, 1);
  cr_assert_eq(f->params.v[4].kind, IR_PARAM_SCALAR);
  cr_assert_eq(f->params.v[5].kind, IR_PARAM_SHAPE);
  const struct ir_type *ta = ir_vtype(f, f->params.v[0].value);
  cr_assert_eq(ta->kind, IR_TY_TENSOR);
  cr_assert_eq(ta->dtype, DT_F16);
  cr_assert_eq(ta->dims[0], IR_DIM_SYM(f->params.v[5].value));
  cr_assert_eq(ta->dims[1], IR_DIM_SYM(f->params.v[6].value));
  const struct ir_block *grid = ir_block(f, IR_GRID_BLOCK);
  const struct ir_op *g = ir_op(f, VEC_LAST(grid->ops));
  cr_assert_eq(g->code, IR_GRID);
  int64_t z;
  cr_assert(ir_value_const_int(f, g->args[2], &z) && z == 1, "a missing grid dimension is 1");
  cr_assert(strstr(l.text, "div"), "cdiv lowers to a division:\n%s", l.text);
  arena_free(&l.a);
}

Test(irgen, loop_carries_the_accumulator) {
  struct lowered l;
  lower(&l, GEMM, NULL, 0);
  struct ir_func *f = l.f;
  cr_assert_eq(count_ops(f, IR_FOR), 1);
  cr_assert_eq(count_ops(f, IR_DOT), 1);
  cr_assert_eq(count_ops(f, IR_LOAD), 2);
  cr_assert_eq(count_ops(f, IR_STORE), 1);
  cr_assert_eq(count_ops(f, IR_IF), 0, "constant conditions lower only the taken branch");
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (op->code == IR_FOR) {
      cr_assert_eq(op->nres, 1);
      cr_assert_eq(op->i[0], 3, "stages");
      cr_assert_eq(op->loc.line, 9);
    }
    if (op->code == IR_LOAD) cr_assert_eq(op->i[0], 3, "both dimensions sliced");
    if (op->code == IR_DOT) {
      const struct ir_type *t = ir_vtype(f, op->res);
      cr_assert(t->dtype == DT_F32 && t->dims[0] == 128 && t->dims[1] == 64);
      cr_assert_eq(op->loc.line, 10);
      cr_assert_eq(op->loc.col, 33, "the `@` operator");
    }
    if (op->code == IR_STORE) {
      const struct ir_type *v = ir_vtype(f, op->args[op->nargs - 1]);
      cr_assert_eq(v->dtype, DT_F16, "the stored value is cast to the tensor's dtype");
    }
  }
  arena_free(&l.a);
}

Test(irgen, specialization_changes_the_ir) {
  struct lowered l;
  struct lang_define defs[] = {{"T", "bf16"}, {"HAS_BIAS", "true"}, {"ACT", "relu"}, {"BM", "64"}};
  lower(&l, GEMM, defs, 4);
  cr_assert(strstr(l.text, "tensor<bf16[%M, %K]>"), "%s", l.text);
  cr_assert(strstr(l.text, "expand_dims"), "bias[None, :]:\n%s", l.text);
  cr_assert(strstr(l.text, "broadcast"), "%s", l.text);
  cr_assert(strstr(l.text, "max"), "relu is max(x, 0):\n%s", l.text);
  cr_assert_eq(count_ops(l.f, IR_LOAD), 3);
  arena_free(&l.a);
}

Test(irgen, runtime_if_yields_assigned_vars) {
  struct lowered l;
  lower(&l,
        "kernel k(X: out f32[N], n: i32) grid(1) {\n"
        "  var a = zeros([16], f32); var b = 0; var untouched = 1.0;\n"
        "  if n > 0 { a = a + 1.0; } else if n < -5 { b = 2; } \n"
        "  X[0 : +16] = a + f32(b) + untouched;\n"
        "}\n",
        NULL, 0);
  int ifs = 0, results[2] = {0};
  for (uint32_t i = 1; i < l.f->ops.n; i++) {
    const struct ir_op *op = &l.f->ops.v[i];
    if (op->code != IR_IF) continue;
    if (ifs < 2) results[ifs] = op->nres;
    ifs++;
  }
  cr_assert_eq(ifs, 2, "else-if nests an if in the else region:\n%s", l.text);
  cr_assert_eq(results[0], 2, "the outer if yields a and b");
  cr_assert_eq(results[1], 1, "the inner if yields b");
  arena_free(&l.a);
}

Test(irgen, math_on_half_precision_computes_in_f32) {
  struct lowered l;
  lower(&l,
        "kernel k(X: f16[N], Y: out f16[N]) grid(1) {\n"
        "  let x = X[0 : +32];\n"
        "  Y[0 : +32] = exp2(x) + sigmoid(x) + abs(x);\n"
        "}\n",
        NULL, 0);
  cr_assert(strstr(l.text, "cast %") && strstr(l.text, "tile<32xf32>"), "%s", l.text);
  cr_assert_eq(count_ops(l.f, IR_EXP2), 1);
  cr_assert_eq(count_ops(l.f, IR_EXP), 1, "sigmoid = 1 / (1 + exp(-x))");
  for (uint32_t i = 1; i < l.f->ops.n; i++) {
    const struct ir_op *op = &l.f->ops.v[i];
    if (op->code == IR_EXP2 || op->code == IR_EXP) cr_assert_eq(ir_vtype(l.f, op->res)->dtype, DT_F32);
    if (op->code == IR_ABS) cr_assert_eq(ir_vtype(l.f, op->res)->dtype, DT_F16);
  }
  arena_free(&l.a);
}

Test(irgen, reductions_and_loads_with_fill) {
  struct lowered l;
  lower(&l,
        "kernel softmax<BN: 1024 = 1024>(X: bf16[M, N], Y: out bf16[M, N]) grid(M) {\n"
        "  let row = program_id(0);\n"
        "  let x = load(X[row, 0 : +BN], fill=-inf);\n"
        "  let e = exp(x - max(x));\n"
        "  Y[row, 0 : +BN] = e / sum(e, axis=0);\n"
        "}\n",
        NULL, 0);
  for (uint32_t i = 1; i < l.f->ops.n; i++) {
    const struct ir_op *op = &l.f->ops.v[i];
    if (op->code == IR_LOAD) {
      cr_assert_eq(op->i[0], 2, "only dimension 1 is sliced");
      cr_assert(op->f < 0 && op->f * 0 != 0, "fill is -inf");
    }
    if (op->code == IR_REDUCE_SUM) cr_assert_eq(ir_vtype(l.f, op->args[0])->dtype, DT_F32, "sum of bf16 is f32");
  }
  cr_assert_eq(count_ops(l.f, IR_REDUCE_MAX), 1);
  arena_free(&l.a);
}

Test(irgen, read_modify_write_store_and_full_slice) {
  struct lowered l;
  lower(&l,
        "kernel k(X: out f32[M, 64]) grid(1) {\n"
        "  X[3, :] += 1.0;\n"
        "}\n",
        NULL, 0);
  cr_assert_eq(count_ops(l.f, IR_LOAD), 1);
  cr_assert_eq(count_ops(l.f, IR_STORE), 1);
  for (uint32_t i = 1; i < l.f->ops.n; i++) {
    const struct ir_op *op = &l.f->ops.v[i];
    if (op->code == IR_LOAD || op->code == IR_STORE) cr_assert_eq(op->i[0], 2);
  }
  arena_free(&l.a);
}

Test(irgen, lowering_twice_gives_independent_functions) {
  struct arena a;
  arena_init(&a, NULL, NULL);
  struct strtab st;
  strtab_init(&st, &a);
  struct lang_ctx *c = lang_ctx_new(&a, &st);
  struct ast_file *file = lang_parse(c, "t.tile", GEMM, strlen(GEMM));
  struct lang_define d64[] = {{"BM", "64"}}, d128[] = {{"BM", "128"}};
  struct ir_func *f1 = lang_lower(c, file, "gemm", d64, 1);
  struct ir_func *f2 = lang_lower(c, file, "gemm", d128, 1);
  cr_assert(f1 && f2 && f1 != f2);
  struct strbuf s1, s2;
  sb_init(&s1, &a);
  sb_init(&s2, &a);
  ir_print_func(&s1, f1, 0);
  ir_print_func(&s2, f2, 0);
  cr_assert(strstr(sb_str(&s1), "tile<64x64xf32>") && !strstr(sb_str(&s1), "tile<128x64xf32>"));
  cr_assert(strstr(sb_str(&s2), "tile<128x64xf32>"));
  arena_free(&a);
}
