/* licm.c - loop-invariant code motion.
 *
 * Needs: verified IR. Guarantees: a pure op without regions in a for body whose operands
 * are all defined outside the loop is moved in front of the loop. After layout assignment
 * this is what takes `convert_layout %q` (the Q tile of attention, a Tensor Core operand
 * staged through shared memory) out of the key loop, so it happens once per program
 * instead of once per key block. A load or gather with invariant operands moves too when
 * nothing in the loop writes its tensor (the layout pass re-issues a load next to a use in
 * another layout, inside the loop: attention backward's log-sum-exp row was read again at
 * every key block); loads are bounds-checked, so one ahead of a loop that runs zero times
 * reads nothing it should not. Runs innermost loops first by recursing before hoisting, so
 * an op can climb several levels in one run.
 *
 *   for %i ... {                          %c = convert_layout %q
 *     %c = convert_layout %q      =>      for %i ... {
 *     %d = dot %c, %k, %acc                 %d = dot %c, %k, %acc                        */
#include <string.h>

#include "passes.h"

struct licm {
  struct pass_ctx *pc;
  uint8_t *inside; /* value defined inside the loop being processed */
};

static void mark_inside(struct ir_func *f, uint32_t blk, uint8_t *inside) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t k = 0; k < b->nargs; k++) inside[b->args + k] = 1;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t r = 0; r < op->nres; r++) inside[op->res + r] = 1;
    for (uint32_t r = 0; r < op->nregions; r++) mark_inside(f, op->region + r, inside);
  }
}

static void hoist_block(struct licm *L, uint32_t blk);

static void hoist_loop(struct licm *L, uint32_t loop) {
  struct ir_func *f = L->pc->f;
  uint32_t body = f->ops.v[loop].region;
  hoist_block(L, body); /* inner loops first */
  memset(L->inside, 0, f->values.n + 1);
  mark_inside(f, body, L->inside);
  uint32_t i = 0;
  while (i < f->blocks.v[body].ops.n) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    bool ok = ((ir_ops[op->code].flags & OPF_PURE) || ir_reads_unwritten(f, id, body)) && !op->nregions && op->nres;
    for (uint32_t k = 0; ok && k < op->nargs; k++) ok = !L->inside[op->args[k]];
    if (!ok) {
      i++;
      continue;
    }
    /* move before the loop */
    ir_op_remove(f, id);
    struct ir_block *outer = &f->blocks.v[f->ops.v[loop].block];
    VEC_RESERVE(f->arena, outer->ops, 1);
    uint32_t pos = 0;
    while (outer->ops.v[pos] != loop) pos++;
    memmove(&outer->ops.v[pos + 1], &outer->ops.v[pos], sizeof(uint32_t) * (outer->ops.n - pos));
    outer->ops.v[pos] = id;
    outer->ops.n++;
    f->ops.v[id].block = f->ops.v[loop].block;
    for (uint32_t r = 0; r < f->ops.v[id].nres; r++) L->inside[f->ops.v[id].res + r] = 0;
    L->pc->changed = true;
  }
}

static void hoist_block(struct licm *L, uint32_t blk) {
  struct ir_func *f = L->pc->f;
  for (uint32_t i = 0; i < f->blocks.v[blk].ops.n; i++) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    if (f->ops.v[id].code == IR_FOR) {
      hoist_loop(L, id);
      /* hoisted ops were inserted before the loop: skip past it again */
      while (f->blocks.v[blk].ops.v[i] != id) i++;
    } else if (f->ops.v[id].code == IR_IF) {
      hoist_block(L, f->ops.v[id].region);
      hoist_block(L, f->ops.v[id].region + 1);
    }
  }
}

void pass_licm(struct pass_ctx *pc) {
  struct licm L = {pc, ARENA_NEWN(pc->scratch, uint8_t, pc->f->values.n + 1)};
  hoist_block(&L, IR_BODY_BLOCK);
}
