/* flatten.c - a loop nest whose outer body is only index arithmetic around one inner loop
 * becomes one loop over both ranges.
 *
 * Needs: verified generic IR. Guarantees: the same iterations in the same order. A for
 * loop O is flattened with the loop I in its body when
 *   - O's body is pure scalar ops (P), then I, then a yield of I's results, and I starts
 *     from O's carried values (the accumulators pass straight through: attention backward's
 *     dK and dV over the heads of a group and the query blocks of each);
 *   - I's bounds and step do not depend on O's iteration (computed outside O, or by scalar
 *     ops of O's body from such values: computed again in front of the new loop), both
 *     steps are positive constants;
 *   - I does tile work (a load or a product), so an index division per iteration is noise.
 * The new loop runs t over ni * nj iterations (ni, nj: the two trip counts, 0 for empty
 * ranges) with i = a + (t / nj) * s and j = lb + (t % nj) * st; P is computed in its body.
 *
 * Why: the pipeline, warp specialization and persistence passes work on one loop: a
 * nest drains and refills its copy ring at every outer iteration and keeps the producer
 * warp out (warp_specialize.c wants a top-level ring loop). One loop keeps the ring full
 * across the outer iterations, as a hand-flattened loop does.
 *
 *   for %h = %a to %b step 1 iter(%x = %z) {         %ni = ..., %nj = ...
 *     %q = mul %h, %c                          =>    for %t = 0 to %ni * %nj step 1 iter(%x = %z) {
 *     %r = for %m = %lb to %ub step 64                 %h = %a + %t / %nj; %m = %lb + %t % %nj * 64
 *          iter(%y = %x) { ... }                       %q = mul %h, %c
 *     yield %r                                          ... (I's body, %y = %x) }
 *   }                                                                                  */
#include "passes.h"

static bool pos_const(const struct ir_func *f, ir_val v) {
  int64_t c;
  return ir_value_const_int(f, v, &c) && c > 0;
}

/* Whether scalar v can be computed in front of the outer loop (body ob): defined outside
 * it, or by pure scalar ops of ob's top level from such values (not from the loop's
 * induction variable or carried values). */
static bool invariant(const struct ir_func *f, ir_val v, uint32_t ob, int depth) {
  if (!ir_defined_within(f, v, ob)) return true;
  uint32_t d = ir_def_op(f, v);
  if (!d || depth == 0) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (op->block != ob || !(ir_ops[op->code].flags & OPF_PURE) || op->nregions || op->nres != 1 ||
      !ir_type_is_scalar(ir_vtype(f, v)))
    return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!invariant(f, op->args[k], ob, depth - 1)) return false;
  return true;
}

/* The inner loop of an outer loop that can be flattened with it, or 0. */
static uint32_t flattenable(const struct ir_func *f, uint32_t outer) {
  const struct ir_op *o = &f->ops.v[outer];
  if (o->code != IR_FOR || !o->block) return 0;
  uint32_t ob = o->region;
  const struct ir_block *blk = &f->blocks.v[ob];
  if (blk->ops.n < 2) return 0;
  uint32_t inner = blk->ops.v[blk->ops.n - 2], y = blk->ops.v[blk->ops.n - 1];
  const struct ir_op *in = &f->ops.v[inner], *yo = &f->ops.v[y];
  if (in->code != IR_FOR || yo->code != IR_YIELD) return 0;
  uint32_t nc = o->nargs - 3;
  if (in->nargs - 3 != nc || yo->nargs != nc || in->nres != nc) return 0;
  for (uint32_t k = 0; k < nc; k++)
    if (in->args[3 + k] != blk->args + 1 + k || yo->args[k] != in->res + k) return 0;
  for (uint32_t k = 0; k < 3; k++)
    if (!invariant(f, in->args[k], ob, 8)) return 0;
  if (!pos_const(f, o->args[2]) || !pos_const(f, in->args[2])) return 0;
  for (uint32_t i = 0; i + 2 < blk->ops.n; i++) {
    const struct ir_op *p = &f->ops.v[blk->ops.v[i]];
    if (!(ir_ops[p->code].flags & OPF_PURE) || p->nregions || p->nres != 1 || !ir_type_is_scalar(ir_vtype(f, p->res)))
      return 0;
  }
  static const uint16_t work[] = {IR_LOAD, IR_GATHER, IR_DOT};
  if (!ir_block_has_op(f, in->region, work, 3)) return 0;
  return inner;
}

/* max(ceil((ub - lb) / step), 0) */
static ir_val trips(struct ir_builder *b, ir_val lb, ir_val ub, ir_val step) {
  ir_type_id ty = b->f->values.v[lb].type;
  ir_val one = ir_const_int(b, ty, 1), zero = ir_const_int(b, ty, 0);
  ir_val n = ir_binary(b, IR_SUB, ir_binary(b, IR_ADD, ir_binary(b, IR_SUB, ub, lb), step), one);
  return ir_binary(b, IR_MAX, ir_binary(b, IR_DIV, n, step), zero);
}

/* x * step (x itself for a step of 1) */
static ir_val times(struct ir_builder *b, ir_val x, ir_val step) {
  int64_t c;
  return ir_value_const_int(b->f, step, &c) && c == 1 ? x : ir_binary(b, IR_MUL, x, step);
}

/* v where the builder is: what the outer body computes of it is computed again there */
static ir_val outside(struct ir_builder *b, uint32_t ob, ir_val v, struct ir_valmap *m) {
  if (!ir_defined_within(b->f, v, ob)) return v;
  if (ir_mapped(m, v) != v) return ir_mapped(m, v);
  uint32_t d = ir_def_op(b->f, v);
  for (uint32_t k = 0; k < b->f->ops.v[d].nargs; k++) outside(b, ob, b->f->ops.v[d].args[k], m);
  ir_clone_op(b, d, m);
  return ir_mapped(m, v);
}

static void flatten(struct ir_func *f, uint32_t outer, uint32_t inner, struct arena *scratch) {
  struct ir_builder b;
  ir_builder_before(&b, f, outer);
  b.loc = f->ops.v[inner].loc;
  struct ir_op o = f->ops.v[outer], in = f->ops.v[inner];
  ir_val ia[3];
  struct ir_valmap hoisted;
  ir_valmap_init(&hoisted, f, scratch);
  for (uint32_t k = 0; k < 3; k++) ia[k] = outside(&b, o.region, in.args[k], &hoisted);
  in.args = ia;
  uint32_t nc = o.nargs - 3;
  ir_type_id ty = f->values.v[o.args[0]].type;
  ir_val ni = trips(&b, o.args[0], o.args[1], o.args[2]);
  ir_val nj = trips(&b, in.args[0], in.args[1], in.args[2]);
  ir_val total = ir_binary(&b, IR_MUL, ni, nj);
  ir_val zero = ir_const_int(&b, ty, 0), one = ir_const_int(&b, ty, 1);
  uint32_t nl = ir_build_for(&b, zero, total, one, o.args + 3, nc);
  f->ops.v[nl].i[0] = in.i[0]; /* the inner loop's stages and depth */
  f->ops.v[nl].i[1] = in.i[1];
  uint32_t body = f->ops.v[nl].region;
  ir_val t = f->blocks.v[body].args;
  struct ir_builder bb;
  ir_builder_at_end(&bb, f, body);
  bb.loc = b.loc;
  ir_val i = ir_binary(&bb, IR_ADD, o.args[0], times(&bb, ir_binary(&bb, IR_DIV, t, nj), o.args[2]));
  ir_val j = ir_binary(&bb, IR_ADD, in.args[0], times(&bb, ir_binary(&bb, IR_REM, t, nj), in.args[2]));
  struct ir_valmap m;
  ir_valmap_init(&m, f, scratch);
  uint32_t ob = o.region, ib = in.region;
  ir_map_set(&m, f->blocks.v[ob].args, i);
  ir_map_set(&m, f->blocks.v[ib].args, j);
  for (uint32_t k = 0; k < nc; k++) {
    ir_map_set(&m, f->blocks.v[ob].args + 1 + k, t + 1 + k);
    ir_map_set(&m, f->blocks.v[ib].args + 1 + k, t + 1 + k);
  }
  const struct ir_block *oblk = &f->blocks.v[ob];
  uint32_t np = oblk->ops.n - 2;
  for (uint32_t k = 0; k < np; k++) ir_clone_op(&bb, f->blocks.v[ob].ops.v[k], &m);
  for (uint32_t k = 0; k < f->blocks.v[ib].ops.n; k++) ir_clone_op(&bb, f->blocks.v[ib].ops.v[k], &m);
  for (uint32_t k = 0; k < nc; k++) ir_replace_uses(f, o.res + k, ir_res(f, nl, k));
  ir_op_erase(f, outer);
}

void pass_flatten(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->stage != IR_STAGE_GENERIC) return;
  /* innermost pairs first: a flattened pair may make its enclosing loop flattenable */
  for (int round = 0; round < 8; round++) {
    bool any = false;
    uint32_t nops = f->ops.n;
    for (uint32_t id = nops - 1; id >= 1; id--) {
      uint32_t inner = flattenable(f, id);
      if (!inner) continue;
      flatten(f, id, inner, pc->scratch);
      any = pc->changed = true;
    }
    if (!any) break;
  }
}
