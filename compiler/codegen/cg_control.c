/* cg_control.c - structured control flow: for loops and if branches become LLVM blocks
 * with phi nodes for every register of every loop-carried value or branch result.
 *
 * Loop bounds are scalars, identical in every thread, so control flow is uniform across
 * the program instance. The induction variable runs in 64 bits so that iv + step cannot
 * wrap around near the end of the i32 range (the interpreter stops there too); the loop
 * follows Python's range: step > 0 counts up while iv < ub, step < 0 counts down while
 * iv > ub, step == 0 runs no iteration.                                                 */
#include "cg_internal.h"

static bool f_parent_is_role(struct cg *g, uint32_t blk) {
  uint32_t parent = g->f->blocks.v[blk].parent;
  return parent && g->f->ops.v[parent].code == IR_WARP_SPECIALIZE;
}

void cg_gen_for(struct cg *g, uint32_t id) {
  const struct ir_op *op = &g->f->ops.v[id];
  const struct ir_block *body_blk = &g->f->blocks.v[op->region];
  LLVMValueRef lb = cg_val(g, op->args[0])->r[0], ub = cg_val(g, op->args[1])->r[0];
  LLVMValueRef step = cg_val(g, op->args[2])->r[0];
  if (g->failed) return;
  LLVMTypeRef ivt = LLVMTypeOf(lb);
  lb = LLVMBuildSExt(g->b, lb, g->i64, "");
  ub = LLVMBuildSExt(g->b, ub, g->i64, "");
  step = LLVMBuildSExt(g->b, step, g->i64, "");
  uint32_t nc = op->nargs - 3;
  struct cgval **init = ARENA_NEWN(g->arena, struct cgval *, nc + 1);
  for (uint32_t k = 0; k < nc; k++) init[k] = cg_val(g, op->args[3 + k]);
  if (g->failed) return;
  /* Two carried wgmma accumulators starting from one value (CSE merged their zeros) get
   * registers of their own, by opaque moves here: otherwise LLVM copies one of them on the
   * edge that skips the loop, and ptxas serializes the wgmma (C7515; cg.c gen_const). */
  for (uint32_t k = 1; k < nc; k++) {
    const struct ir_type *t = ir_vtype(g->f, op->args[3 + k]);
    const struct ir_layout *l = &g->f->layouts.v[t->layout];
    if (!t->layout || l->kind != IR_LAYOUT_MMA || l->instr[0] != 64 || t->dtype != DT_F32) continue;
    bool dup = false;
    for (uint32_t j = 0; j < k; j++) dup |= op->args[3 + j] == op->args[3 + k];
    if (!dup) continue;
    struct cgval *c = ARENA_NEW(g->arena, struct cgval);
    c->n = init[k]->n;
    c->r = ARENA_NEWN(g->arena, LLVMValueRef, c->n + 1);
    for (uint32_t r = 0; r < c->n; r++) c->r[r] = cg_asm(g, g->f32, "mov.b32 $0, $1;", "=f,f", &init[k]->r[r], 1, true);
    init[k] = c;
  }

  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "for.header");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "for.body");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "for.exit");
  LLVMValueRef enter = LLVMBuildBr(g->b, header);
  /* a top-level loop after another one computes its own thread coordinates */
  if (op->block == IR_BODY_BLOCK && g->top_loops++ > 0) cg_fresh_thread_coords(g, enter);
  LLVMPositionBuilderAtEnd(g->b, header);
  LLVMValueRef iv = LLVMBuildPhi(g->b, g->i64, "iv");
  struct cgval *phis = ARENA_NEWN(g->arena, struct cgval, nc + 1);
  for (uint32_t k = 0; k < nc; k++) {
    phis[k].n = init[k]->n;
    phis[k].r = ARENA_NEWN(g->arena, LLVMValueRef, init[k]->n);
    for (uint32_t r = 0; r < init[k]->n; r++) phis[k].r[r] = LLVMBuildPhi(g->b, LLVMTypeOf(init[k]->r[r]), "");
  }
  LLVMValueRef zero = cg_i64(g, 0);
  LLVMValueRef up = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, step, zero, ""),
                                 LLVMBuildICmp(g->b, LLVMIntSLT, iv, ub, ""), "");
  LLVMValueRef down = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, step, zero, ""),
                                   LLVMBuildICmp(g->b, LLVMIntSGT, iv, ub, ""), "");
  LLVMBuildCondBr(g->b, LLVMBuildOr(g->b, up, down, ""), body, exit);

  LLVMPositionBuilderAtEnd(g->b, body);
  /* The tile loop of a persistent role: thread coordinates are recomputed per tile from a
   * fresh read of the thread index. Computed once outside, LLVM keeps every per-thread
   * address offset of the epilogue live across the whole loop (hoisted as invariant) and
   * ptxas spills them (312 bytes in a 128x256 tile with element stores). */
  bool tile_loop = g->f->persistent && f_parent_is_role(g, op->block);
  if (tile_loop) cg_fresh_thread_coords(g, NULL);
  struct cgval *ivv = cg_new_val(g, body_blk->args, 1);
  ivv->r[0] = LLVMBuildTrunc(g->b, iv, ivt, "");
  if (ivt == g->i64) ivv->r[0] = iv;
  for (uint32_t k = 0; k < nc; k++) g->vals[body_blk->args + 1 + k] = phis[k];
  cg_gen_region(g, op->region);
  if (g->failed) return;
  const struct ir_op *y = &g->f->ops.v[VEC_LAST(body_blk->ops)];
  /* bounds of 32 bits or less: iv + step stays far inside the 64-bit range (nsw), which lets
   * LLVM see a loop counting down as a recurrence too (row-reverse's loops: otherwise every
   * element of the element form takes its own 64-bit offset) */
  LLVMValueRef next = LLVMGetIntTypeWidth(ivt) <= 32 ? LLVMBuildNSWAdd(g->b, iv, step, "") : LLVMBuildAdd(g->b, iv, step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMBuildBr(g->b, header);
  LLVMAddIncoming(iv, &lb, &pre, 1);
  LLVMAddIncoming(iv, &next, &latch, 1);
  for (uint32_t k = 0; k < nc; k++) {
    struct cgval *yv = cg_val(g, y->args[k]);
    if (g->failed) return;
    if (yv->n != phis[k].n) {
      cg_fail(g, "for: carried value %u changes its register count", k);
      return;
    }
    for (uint32_t r = 0; r < phis[k].n; r++) {
      LLVMAddIncoming(phis[k].r[r], &init[k]->r[r], &pre, 1);
      LLVMAddIncoming(phis[k].r[r], &yv->r[r], &latch, 1);
    }
  }
  LLVMPositionBuilderAtEnd(g->b, exit);
  /* (a top-level loop's epilogue gets fresh thread coordinates: gen_block) */
  for (uint32_t k = 0; k < nc; k++) g->vals[op->res + k] = phis[k];
}

void cg_gen_if(struct cg *g, uint32_t id) {
  const struct ir_op *op = &g->f->ops.v[id];
  LLVMValueRef cond = cg_val(g, op->args[0])->r[0];
  if (g->failed) return;
  LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.then");
  LLVMBasicBlockRef else_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.else");
  LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.end");
  LLVMBuildCondBr(g->b, cond, then_bb, else_bb);
  struct cgval *yields[2] = {NULL, NULL};
  LLVMBasicBlockRef ends[2];
  LLVMBasicBlockRef starts[2] = {then_bb, else_bb};
  for (int side = 0; side < 2; side++) {
    LLVMPositionBuilderAtEnd(g->b, starts[side]);
    uint32_t blk = op->region + (uint32_t)side;
    cg_gen_region(g, blk);
    if (g->failed) return;
    const struct ir_block *b = &g->f->blocks.v[blk];
    const struct ir_op *y = &g->f->ops.v[VEC_LAST(b->ops)];
    yields[side] = ARENA_NEWN(g->arena, struct cgval, op->nres + 1);
    for (uint32_t k = 0; k < op->nres; k++) yields[side][k] = *cg_val(g, y->args[k]);
    ends[side] = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, merge);
  }
  LLVMPositionBuilderAtEnd(g->b, merge);
  for (uint32_t k = 0; k < op->nres; k++) {
    uint32_t n = yields[0][k].n;
    if (yields[1][k].n != n) {
      cg_fail(g, "if: result %u has different register counts on the two branches", k);
      return;
    }
    struct cgval *out = cg_new_val(g, op->res + k, n);
    for (uint32_t r = 0; r < n; r++) {
      out->r[r] = LLVMBuildPhi(g->b, LLVMTypeOf(yields[0][k].r[r]), "");
      LLVMValueRef vals[2] = {yields[0][k].r[r], yields[1][k].r[r]};
      LLVMAddIncoming(out->r[r], vals, ends, 2);
    }
  }
}
