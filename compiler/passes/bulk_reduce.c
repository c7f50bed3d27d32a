/* bulk_reduce.c - atomic adds of whole tiles through shared memory and TMA.
 *
 * An atomic_add of a [R, C] f32 tile to a tensor slice, element by element, is R * C
 * `red.global.add.f32` (8192 per step of attention backward's dQ += dS K at 64 x 128,
 * about the L2's atomic rate over a whole launch: PERF.md 66). Hopper's TMA adds a tile of
 * shared memory into a tensor in one instruction per box (cp.reduce.async.bulk.tensor
 * .add), the reductions done at L2, out-of-bounds elements skipped as TMA stores skip them.
 *
 * Needs: layouts assigned (the value's layout is what local_store writes from), smem-stage
 * done. Guarantees: each `atomic` with kind add, an f32 2-d value, no predicate and an
 * unused result, whose per-element indices are a plain slice of its tensor (a scalar index
 * or `start + arange(n)` per dimension, the tile's two dimensions in the tensor's order,
 * the last one the tensor's last) and that TMA can copy (pass_tma_box: a contiguous last
 * dimension, 16-byte strides and base), on a target with TMA and unless the schedule says
 * bulkreduce=0 (TL_FEAT_BULK_GROUP: sm_90a), and on a tensor the kernel does not otherwise read, becomes
 *
 *   %d = tma_desc %T : box                    (at the top level, before the op's outermost
 *   %b = local_alloc : tile<RxCxf32, #shared>  enclosing op)
 *   ...
 *   bulk_wait %b {pending=0}                  the previous group has read the buffer
 *   barrier                                   (or an earlier barrier of the block, with the
 *                                              wait moved in front of it)
 *   local_store %b, 0, %v
 *   barrier                                   (local_store's writes fenced for the async proxy)
 *   tma_reduce %b, 0, %d, %i0, ... {mask}     one thread: the boxes, one bulk group
 *   ...
 *   bulk_wait %b {pending=0}                  after the outermost enclosing op: the buffer
 *                                             stays allocated until the last group read it
 *
 * The element order of the additions changes (the tile's sums land as TMA applies them),
 * which f32 atomics never fixed anyway. */
#include "passes.h"

/* An i32 tile index operand of the atomic: a scalar (splat or constant: *pos = -1) or
 * start + arange(n) along tile dimension *pos (expand_dims and broadcast around it); its
 * scalar start (0 when there is none) in *start, built at b when constant. */
static bool index_form(struct ir_builder *b, ir_val v, ir_val *start, int *pos) {
  struct ir_func *f = b->f;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  int64_t c;
  uint32_t d = ir_def_op(f, v);
  if (!d) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (op->code == IR_SPLAT) {
    *start = op->args[0];
    *pos = -1;
    return ir_type_is_scalar(ir_vtype(f, *start)) && ir_vtype(f, *start)->dtype == DT_I32;
  }
  if (op->code == IR_CONST && ir_value_const_int(f, v, &c)) {
    *start = ir_const_int(b, i32, c);
    *pos = -1;
    return true;
  }
  /* the tile dimension the index runs along: the one dimension of the broadcast operand
   * that is not 1 */
  if (op->code != IR_BROADCAST) return false;
  const struct ir_type *pre = ir_vtype(f, op->args[0]);
  int along = -1;
  for (int k = 0; k < pre->rank; k++)
    if (pre->dims[k] != 1) {
      if (along >= 0) return false;
      along = k;
    }
  if (along < 0 || pre->rank != ir_vtype(f, v)->rank) return false;
  ir_val x = op->args[0];
  for (d = ir_def_op(f, x); d && f->ops.v[d].code == IR_EXPAND_DIMS; d = ir_def_op(f, x)) x = f->ops.v[d].args[0];
  if (!d || ir_vtype(f, x)->rank != 1) return false;
  *pos = along;
  if (f->ops.v[d].code == IR_ARANGE) {
    *start = ir_const_int(b, i32, 0);
    return true;
  }
  if (f->ops.v[d].code != IR_ADD) return false;
  for (int k = 0; k < 2; k++) {
    ir_val a = f->ops.v[d].args[k], s = f->ops.v[d].args[1 - k];
    uint32_t ad = ir_def_op(f, a), sd = ir_def_op(f, s);
    if (!ad || f->ops.v[ad].code != IR_ARANGE || !sd) continue;
    if (f->ops.v[sd].code == IR_SPLAT && ir_type_is_scalar(ir_vtype(f, f->ops.v[sd].args[0]))) {
      *start = f->ops.v[sd].args[0];
      return ir_vtype(f, *start)->dtype == DT_I32;
    }
    if (f->ops.v[sd].code == IR_CONST && ir_value_const_int(f, s, &c)) {
      *start = ir_const_int(b, i32, c);
      return true;
    }
  }
  return false;
}

/* Whether any op but the add-only atomics this pass may rewrite uses tensor t. */
static bool only_added(const struct ir_func *f, ir_val t, const uint32_t *uses) {
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || !ir_op_uses(f, id, t) || op->nregions) continue;
    if (op->code != IR_ATOMIC || op->i[0] != 0 || op->args[0] != t || uses[op->res]) return false;
  }
  return true;
}

/* The top-level op that contains op (op itself at the top level). */
static uint32_t outermost(const struct ir_func *f, uint32_t op) {
  while (f->ops.v[op].block != IR_BODY_BLOCK) op = f->blocks.v[f->ops.v[op].block].parent;
  return op;
}

static void barrier_at(struct ir_builder *b) { ir_build(b, IR_BARRIER, NULL, 0, NULL, 0); }

/* A barrier earlier in op's block with only ops without regions between them (every thread
 * that reaches op has passed it in the same iteration); 0 when there is none. */
static uint32_t earlier_barrier(const struct ir_func *f, uint32_t op) {
  const struct ir_block *blk = &f->blocks.v[f->ops.v[op].block];
  uint32_t i = ir_op_index(f, op);
  while (i-- > 0) {
    const struct ir_op *o = &f->ops.v[blk->ops.v[i]];
    if (o->code == IR_BARRIER) return blk->ops.v[i];
    if (o->nregions) return 0;
  }
  return 0;
}

static bool rewrite(struct ir_func *f, uint32_t id) {
  const struct ir_op *op = &f->ops.v[id];
  ir_val t = op->args[0], val = op->args[op->nargs - 1];
  const struct ir_type *tt = ir_vtype(f, t), *vt = ir_vtype(f, val);
  int rank = tt->rank;
  if ((int)op->nargs != rank + 2 || vt->rank != 2 || vt->dtype != DT_F32) return false; /* no predicate */
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  b.loc = op->loc;
  ir_val start[IR_MAX_RANK];
  uint64_t mask = 0;
  int next = 0; /* the tile dimension the next sliced tensor dimension must run along */
  for (int d = 0; d < rank; d++) {
    int pos;
    if (!index_form(&b, f->ops.v[id].args[1 + d], &start[d], &pos)) return false;
    if (pos < 0) continue;
    if (pos != next++) return false;
    mask |= 1ull << d;
  }
  if (next != 2 || !(mask >> (rank - 1) & 1)) return false;
  op = &f->ops.v[id];
  struct ir_type bt = *vt;
  bt.layout = pass_shared_layout(f, vt);
  struct ir_type box;
  if (!pass_tma_box(f, t, mask, &bt, &box)) return false;
  /* the tensor map at the top level, in front of everything that may use it */
  uint32_t top = outermost(f, id);
  struct ir_builder tb;
  ir_builder_before(&tb, f, top);
  tb.loc = op->loc;
  ir_val desc = ir_build1(&tb, IR_TMA_DESC, ir_type_intern(f, &box), &t, 1);
  /* the buffer there too: a group may still read it when the loop around comes back to
   * the atomic's place, so nothing else may take its memory inside the enclosing loops */
  ir_val buf = ir_build1(&tb, IR_LOCAL_ALLOC, ir_type_intern(f, &bt), NULL, 0);
  /* the staging and the reduction, in place of the atomic */
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val zero = ir_const_int(&b, i32, 0);
  /* the wait goes in front of a barrier the block has already before the atomic (the
   * staging of a product's operand): nothing writes the buffer in between, so that barrier
   * orders the wait before every thread's store and saves one */
  uint32_t bar = earlier_barrier(f, id);
  struct ir_builder wb;
  if (bar) ir_builder_before(&wb, f, bar);
  else wb = b;
  wb.loc = f->ops.v[id].loc;
  uint32_t w = ir_build(&wb, IR_BULK_WAIT, &buf, 1, NULL, 0);
  f->ops.v[w].i[0] = 0;
  if (!bar) barrier_at(&b);
  ir_build(&b, IR_LOCAL_STORE, (ir_val[]){buf, zero, val}, 3, NULL, 0);
  barrier_at(&b);
  ir_val args[3 + IR_MAX_RANK] = {buf, zero, desc};
  for (int d = 0; d < rank; d++) args[3 + d] = start[d];
  uint32_t r = ir_build(&b, IR_TMA_REDUCE, args, (uint32_t)(3 + rank), NULL, 0);
  f->ops.v[r].i[0] = (int64_t)mask;
  /* the last group has read the buffer before it is freed */
  uint32_t after = ir_op_next(f, top);
  struct ir_builder eb;
  if (after) ir_builder_before(&eb, f, after);
  else ir_builder_at_end(&eb, f, IR_BODY_BLOCK);
  eb.loc = f->ops.v[id].loc;
  uint32_t fw = ir_build(&eb, IR_BULK_WAIT, &buf, 1, NULL, 0);
  f->ops.v[fw].i[0] = 0;
  ir_op_erase(f, id);
  return true;
}

void pass_bulk_reduce(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->stage < IR_STAGE_GPU || !tl_has(f->target, TL_FEAT_TMA | TL_FEAT_BULK_GROUP) ||
      !tl_sched_get(f->sched.bulkreduce, 1) || !tl_sched_get(f->sched.tma, 1))
    return;
  uint32_t *uses = ir_use_counts(f, pc->scratch);
  uint32_t n = f->ops.n;
  for (uint32_t id = 1; id < n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_ATOMIC || op->i[0] != 0 || uses[op->res]) continue;
    if (!only_added(f, op->args[0], uses)) continue;
    if (rewrite(f, id)) pc->changed = true;
  }
}
