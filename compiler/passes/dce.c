/* dce.c - dead code elimination.
 *
 * Needs: verified IR. Guarantees: no pure op has unused results; a for or if whose results
 * are unused and whose regions write no memory is deleted with its regions; loop-carried
 * values that feed only themselves are removed from their loop. Afterwards each tensor and
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
  return (ir_ops[op->code].flags & OPF_PURE) != 0;
}

static bool sweep(struct ir_func *f, uint32_t blk, const uint32_t *uses) {
  bool changed = false;
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = b->ops.n; i-- > 0;) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (removable(f, op, uses)) {
      ir_op_remove(f, id);
      changed = true;
      continue;
    }
    for (uint32_t r = 0; r < op->nregions; r++) changed |= sweep(f, op->region + r, uses);
  }
  return changed;
}

/* A carried value k of loop `id` is dead when the loop's result k is unused and the body
 * argument k is used only by the yield, in slot k. Removing it rebuilds the loop op with
 * one fewer carried value; block arguments and results are renumbered by building a new
 * loop and moving the body's ops into it. */
static bool drop_dead_carried(struct ir_func *f, uint32_t id, const uint32_t *uses) {
  struct ir_op *op = &f->ops.v[id];
  uint32_t n = op->nres;
  if (!n) return false;
  struct ir_block *body = &f->blocks.v[op->region];
  struct ir_op *y = &f->ops.v[VEC_LAST(body->ops)];
  bool dead[256] = {0};
  bool any = false;
  for (uint32_t k = 0; k < n && k < 256; k++) {
    ir_val arg = body->args + 1 + k;
    uint32_t self_uses = 0;
    for (uint32_t j = 0; j < y->nargs; j++) self_uses += y->args[j] == arg;
    dead[k] = uses[op->res + k] == 0 && uses[arg] == self_uses && (self_uses == 0 || y->args[k] == arg);
    /* a carried value whose update is computed from other values is dead too if nothing
     * but the yield uses it: the computation feeding the yield becomes dead afterwards */
    if (!dead[k] && uses[op->res + k] == 0 && uses[arg] == 0) dead[k] = true;
    any |= dead[k];
  }
  if (!any || n > 256) return false;
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  ir_val inits[256];
  uint32_t m = 0;
  for (uint32_t k = 0; k < n; k++)
    if (!dead[k]) inits[m++] = op->args[3 + k];
  uint32_t nid = ir_build_for(&b, op->args[0], op->args[1], op->args[2], inits, m);
  op = &f->ops.v[id];
  struct ir_op *nop = &f->ops.v[nid];
  memcpy(nop->i, op->i, sizeof op->i);
  nop->loc = op->loc;
  uint32_t oldb = op->region, newb = nop->region;
  ir_val old_args = f->blocks.v[oldb].args, new_args = f->blocks.v[newb].args;
  ir_replace_uses(f, old_args, new_args);
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (!dead[k]) {
      ir_replace_uses(f, old_args + 1 + k, new_args + 1 + j);
      ir_replace_uses(f, f->ops.v[id].res + k, f->ops.v[nid].res + j);
      j++;
    }
  /* move the body */
  struct ir_block *ob = &f->blocks.v[oldb];
  f->blocks.v[newb].ops = ob->ops;
  for (uint32_t i = 0; i < ob->ops.n; i++) f->ops.v[ob->ops.v[i]].block = newb;
  memset(&f->blocks.v[oldb].ops, 0, sizeof f->blocks.v[oldb].ops);
  struct ir_block *nb = &f->blocks.v[newb];
  uint32_t yid = VEC_LAST(nb->ops);
  ir_val yargs[256];
  for (uint32_t k = 0, j = 0; k < n; k++)
    if (!dead[k]) yargs[j++] = f->ops.v[yid].args[k];
  ir_op_set_args(f, yid, yargs, m);
  ir_op_remove(f, id);
  return true;
}

static bool drop_carried_in(struct ir_func *f, uint32_t blk, const uint32_t *uses) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_FOR && drop_dead_carried(f, id, uses)) return true;
    for (uint32_t r = 0; r < op->nregions; r++)
      if (drop_carried_in(f, op->region + r, uses)) return true;
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
      changed = drop_carried_in(f, IR_BODY_BLOCK, uses);
    }
    if (!changed) break;
    pc->changed = true;
  }
  uint32_t *uses = ir_use_counts(f, pc->scratch);
  for (uint32_t i = 0; i < f->params.n; i++) {
    struct ir_param *p = &f->params.v[i];
    p->used = p->kind == IR_PARAM_SHAPE || uses[p->value] > 0;
  }
}
