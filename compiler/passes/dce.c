/* dce.c - dead code elimination.
 *
 * Needs: verified IR. Guarantees: no pure op has unused results; a for or if whose results
 * are unused and whose regions write no memory is deleted with its regions; loop-carried
 * values that feed only themselves are removed from their loop, and an if's unused results
 * from the if (the transpose pass leaves them). Afterwards each tensor and
 * scalar parameter's `used` flag says whether the kernel still reads it (after
 * specialization an epilogue's bias may be gone; the launcher then accepts NULL for it).
 *
 *   %1 = mul %a, %b : i32     (no uses)   =>   (deleted)                                 */
#include <string.h>

#include "passes.h"

static bool region_has_effects(struct ir_func *f, uint32_t blk) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (ir_ops[op->code].flags & OPF_WRITE) return true;
    for (uint32_t r = 0; r < op->nregions; r++)
      if (region_has_effects(f, op->region + r)) return true;
  }
  return false;
}

static bool removable(struct ir_func *f, const struct ir_op *op, const uint32_t *uses) {
  if (ir_ops[op->code].flags & OPF_TERM) return false;
  for (uint32_t r = 0; r < op->nres; r++)
    if (uses[op->res + r]) return false;
  if (op->nregions) {
    for (uint32_t r = 0; r < op->nregions; r++)
      if (region_has_effects(f, op->region + r)) return false;
    return true;
  }
  /* pure ops, and reads with no other effect (an unused load) */
  unsigned fl = ir_ops[op->code].flags;
  return (fl & OPF_PURE) || ((fl & OPF_READ) && !(fl & OPF_WRITE));
}

/* Unlinks the removable ops of blk (and, recursively, of the regions of the ops it keeps),
 * compacting the block once instead of searching it for each op. */
static bool sweep(struct ir_func *f, uint32_t blk, const uint32_t *uses) {
  bool changed = false;
  for (uint32_t i = f->blocks.v[blk].ops.n; i-- > 0;) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (removable(f, op, uses)) {
      op->block = 0;
      changed = true;
      continue;
    }
    for (uint32_t r = 0; r < op->nregions; r++) changed |= sweep(f, op->region + r, uses);
  }
  struct ir_block *b = &f->blocks.v[blk];
  uint32_t kept = 0;
  for (uint32_t i = 0; i < b->ops.n; i++)
    if (f->ops.v[b->ops.v[i]].block) b->ops.v[kept++] = b->ops.v[i];
  b->ops.n = kept;
  return changed;
}

/* Liveness of loop-carried values. A carried value is live when the loop's result is used
 * after the loop, or when something live inside the body reads it: a memory write, a value
 * feeding a live carried value's yield, a nested op's bounds or condition. mark() follows
 * operands transitively and, conservatively, everything yielded by the regions of any op
 * whose result is live. The marking uses a work list, not recursion along the operand
 * chains: a chain of 100k dependent statements must not exhaust the stack. */
struct live {
  struct ir_func *f;
  uint8_t *val;
  uint32_t loop; /* the loop under analysis: its own arguments are tracked per slot */
  struct arena *scratch;
  VEC(ir_val) work; /* values to mark */
};

/* Queues the operands of op and of the last op (the yield) of each of its regions. The
 * recursion here follows region nesting only. */
static void queue_op(struct live *L, uint32_t id) {
  struct ir_op *op = &L->f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!L->val[op->args[k]]) VEC_PUSH(L->scratch, L->work, op->args[k]);
  for (uint32_t r = 0; r < op->nregions; r++) {
    struct ir_block *b = &L->f->blocks.v[op->region + r];
    if (b->ops.n) queue_op(L, VEC_LAST(b->ops));
  }
}

static void drain(struct live *L) {
  while (L->work.n) {
    ir_val v = L->work.v[--L->work.n];
    if (L->val[v]) continue;
    L->val[v] = 1;
    struct ir_value *val = &L->f->values.v[v];
    if (val->kind == IR_VAL_RESULT) {
      queue_op(L, val->def);
    } else if (val->kind == IR_VAL_BLOCKARG) {
      uint32_t owner = L->f->blocks.v[val->def].parent;
      if (owner && owner != L->loop) queue_op(L, owner);
    }
  }
}

static void mark_op(struct live *L, uint32_t id) {
  queue_op(L, id);
  drain(L);
}

static void mark(struct live *L, ir_val v) {
  VEC_PUSH(L->scratch, L->work, v);
  drain(L);
}

static void mark_effects(struct live *L, uint32_t blk) {
  struct ir_block *b = &L->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    struct ir_op *op = &L->f->ops.v[id];
    if (ir_ops[op->code].flags & OPF_WRITE) mark_op(L, id);
    if (op->nregions && (op->code == IR_IF || op->code == IR_FOR)) {
      bool eff = false;
      for (uint32_t r = 0; r < op->nregions; r++) eff |= region_has_effects(L->f, op->region + r);
      if (eff)
        for (uint32_t k = 0; k < op->nargs && k < (op->code == IR_FOR ? 3u : 1u); k++) mark(L, op->args[k]);
    }
    for (uint32_t r = 0; r < op->nregions; r++) mark_effects(L, op->region + r);
  }
}

/* Removes the dead carried values of loop `id` by rebuilding it with fewer; the body's ops
 * move to the new loop's block. Returns true if it changed anything. */
static bool drop_dead_carried(struct ir_func *f, uint32_t id, const uint32_t *uses, struct arena *scratch) {
  struct ir_op *op = &f->ops.v[id];
  uint32_t n = op->nres;
  if (!n || n > 256) return false;
  struct live L = {f, ARENA_NEWN(scratch, uint8_t, f->values.n + 1), id, scratch, {0}};
  struct ir_block *body = &f->blocks.v[op->region];
  uint32_t yid = VEC_LAST(body->ops);
  bool live_slot[256] = {0};
  for (uint32_t k = 0; k < n; k++) live_slot[k] = uses[op->res + k] > 0;
  /* the loop's own results must not make the loop live through mark(): treat the loop op
   * as a boundary by pre-marking its results */
  for (uint32_t k = 0; k < n; k++) L.val[op->res + k] = 1;
  mark_effects(&L, op->region);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t k = 0; k < n; k++)
      if (live_slot[k]) mark(&L, f->ops.v[yid].args[k]);
    for (uint32_t k = 0; k < n; k++)
      if (!live_slot[k] && L.val[body->args + 1 + k]) live_slot[k] = changed = true;
  }
  uint32_t m = 0;
  for (uint32_t k = 0; k < n; k++) m += live_slot[k];
  if (m == n) return false;
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  ir_val inits[256];
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (live_slot[k]) inits[j++] = op->args[3 + k];
  uint32_t nid = ir_build_for(&b, op->args[0], op->args[1], op->args[2], inits, m);
  op = &f->ops.v[id];
  struct ir_op *nop = &f->ops.v[nid];
  memcpy(nop->i, op->i, sizeof op->i);
  nop->loc = op->loc;
  uint32_t oldb = op->region, newb = nop->region;
  ir_val old_args = f->blocks.v[oldb].args, new_args = f->blocks.v[newb].args;
  ir_val yargs[256];
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (live_slot[k]) yargs[j++] = f->ops.v[yid].args[k];
  ir_op_set_args(f, yid, yargs, m);
  /* move the body, then rewire arguments and results */
  ir_move_ops(f, oldb, newb);
  ir_replace_uses(f, old_args, new_args);
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (live_slot[k]) {
      ir_replace_uses(f, old_args + 1 + k, new_args + 1 + j);
      ir_replace_uses(f, f->ops.v[id].res + k, f->ops.v[nid].res + j);
      j++;
    }
  ir_op_remove(f, id);
  return true;
}

/* Rebuilds if op `id` without its unused results (some used, some not); its regions move
 * to the new op and their yields lose the dropped values. True if it changed anything. */
static bool drop_dead_results(struct ir_func *f, uint32_t id, const uint32_t *uses) {
  const struct ir_op *op = &f->ops.v[id];
  uint32_t n = op->nres, m = 0;
  if (!n || n > 256 || op->nregions != 2) return false;
  ir_type_id types[256];
  for (uint32_t k = 0; k < n; k++)
    if (uses[op->res + k]) types[m++] = f->values.v[op->res + k].type;
  if (m == n || m == 0) return false; /* none unused, or all (sweep deletes the if) */
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  b.loc = op->loc;
  uint32_t nid = ir_build_if(&b, op->args[0], types, m);
  for (uint32_t r = 0; r < 2; r++) {
    uint32_t nb = f->ops.v[nid].region + r;
    ir_move_ops(f, f->ops.v[id].region + r, nb);
    uint32_t y = VEC_LAST(f->blocks.v[nb].ops);
    ir_val yargs[256];
    for (uint32_t k = 0, j = 0; k < n; k++)
      if (uses[f->ops.v[id].res + k]) yargs[j++] = f->ops.v[y].args[k];
    ir_op_set_args(f, y, yargs, m);
  }
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (uses[f->ops.v[id].res + k]) ir_replace_uses(f, f->ops.v[id].res + k, f->ops.v[nid].res + j++);
  ir_op_remove(f, id);
  return true;
}

static bool drop_carried_in(struct ir_func *f, uint32_t blk, const uint32_t *uses, struct arena *scratch) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_FOR && drop_dead_carried(f, id, uses, scratch)) return true;
    if (op->code == IR_IF && drop_dead_results(f, id, uses)) return true;
    for (uint32_t r = 0; r < op->nregions; r++)
      if (drop_carried_in(f, op->region + r, uses, scratch)) return true;
    b = &f->blocks.v[blk];
  }
  return false;
}

void pass_dce(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  for (int round = 0; round < 64; round++) {
    uint32_t *uses = ir_use_counts(f, pc->scratch);
    bool changed = sweep(f, IR_GRID_BLOCK, uses) | sweep(f, IR_BODY_BLOCK, uses);
    if (!changed) {
      uses = ir_use_counts(f, pc->scratch);
      changed = drop_carried_in(f, IR_BODY_BLOCK, uses, pc->scratch);
    }
    if (!changed) break;
    pc->changed = true;
  }
  uint32_t *uses = ir_use_counts(f, pc->scratch);
  for (uint32_t i = 0; i < f->params.n; i++) {
    struct ir_param *p = &f->params.v[i];
    p->used = p->kind == IR_PARAM_SHAPE || uses[p->value] > 0;
    p->divisor = 0;
  }
  /* shape sizes that an integer / or % divides by: the runtime specializes them on being a
   * power of two (canonicalize's shift form) */
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || (op->code != IR_DIV && op->code != IR_REM)) continue;
    if (ir_dtype_is_float(ir_vtype(f, op->args[1])->dtype)) continue;
    struct ir_param *p = ir_param_of(f, ir_divisor_source(f, op->args[1]));
    if (p && p->kind == IR_PARAM_SHAPE) p->divisor = 1;
  }
}
