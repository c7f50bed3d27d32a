/* cg_control.c - structured control flow: for loops and if branches become LLVM blocks
 * with phi nodes for every register of every loop-carried value or branch result.
 *
 * Loop bounds are scalars, identical in every thread, so control flow is uniform across
 * the program instance. The induction variable runs in 64 bits so that iv + step cannot
 * wrap around near the end of the i32 range (the interpreter stops there too); the loop
 * follows Python's range: step > 0 counts up while iv < ub, step < 0 counts down while
 * iv > ub, step == 0 runs no iteration.                                                 */
#include <llvm-c/DebugInfo.h>

#include "cg_internal.h"

static bool f_parent_is_role(struct cg *g, uint32_t blk) {
  uint32_t parent = g->f->blocks.v[blk].parent;
  return parent && g->f->ops.v[parent].code == IR_WARP_SPECIALIZE;
}

/* Whether the body's yield passes on, as carried value k, runs loaded shifted: a shifted
 * load of the body, or a carried value raw[] carries so (a prefetch's rotation). */
static bool yields_shifted(struct cg *g, const struct ir_op *op, uint32_t k, const struct raw_runs **raw) {
  const struct ir_block *body = &g->f->blocks.v[op->region];
  ir_val v = g->f->ops.v[VEC_LAST(body->ops)].args[k];
  if (v > body->args && v < body->args + body->nargs) return raw[v - body->args - 1] != NULL;
  uint32_t d = ir_def_op(g->f, v);
  return d && g->f->ops.v[d].code == IR_LOAD && g->f->ops.v[d].i[2] >= 2 && g->f->ops.v[d].block == op->region;
}

/* The carried values that go around the loop as shifted runs (struct raw_runs) rather than
 * as registers: those that enter as such runs and are yielded as such (a prefetched shifted
 * load; PERF.md 120). Funnelled at the yield instead, the words of the load issued for the
 * next iteration would be waited for there. */
static const struct raw_runs **raw_carried(struct cg *g, const struct ir_op *op, struct cgval **init, uint32_t nc) {
  const struct raw_runs **raw = ARENA_NEWN(g->arena, const struct raw_runs *, nc + 1);
  for (uint32_t k = 0; k < nc; k++) {
    raw[k] = cg_raw_runs(g, op->args[3 + k]);
    if (raw[k] && init[k]->n != raw[k]->n * (uint32_t)raw[k]->vec) raw[k] = NULL;
  }
  for (bool changed = true; changed;) { /* (a rotation's value drops with the one it takes) */
    changed = false;
    for (uint32_t k = 0; k < nc; k++)
      if (raw[k] && !yields_shifted(g, op, k, raw)) raw[k] = NULL, changed = true;
  }
  return raw;
}

/* A raw-carried value's phis (words and offsets) in the current block, shaped like rr. */
static struct raw_runs raw_phis(struct cg *g, const struct raw_runs *rr) {
  struct raw_runs p = *rr;
  uint32_t nw = rr->n * (uint32_t)rr->per;
  p.words = ARENA_NEWN(g->arena, LLVMValueRef, nw);
  p.s32 = ARENA_NEWN(g->arena, LLVMValueRef, rr->n);
  for (uint32_t i = 0; i < nw; i++) p.words[i] = LLVMBuildPhi(g->b, g->i32, "");
  for (uint32_t i = 0; i < rr->n; i++) p.s32[i] = LLVMBuildPhi(g->b, g->i32, "");
  return p;
}

/* What the latch passes to raw-carried phis p from the yielded value v: its runs, or its
 * registers packed at offset 0 when it was not loaded shifted after all. */
static bool raw_incoming(struct cg *g, const struct raw_runs *p, ir_val v, struct raw_runs *in) {
  const struct raw_runs *rv = cg_raw_runs(g, v);
  if (rv && rv->n == p->n && rv->per == p->per && rv->exact == p->exact) {
    *in = *rv;
    return true;
  }
  struct cgval *yv = cg_val(g, v);
  if (g->failed || yv->n != p->n * (uint32_t)p->vec) return false;
  *in = *p;
  in->words = ARENA_NEWN(g->arena, LLVMValueRef, p->n * (uint32_t)p->per);
  in->s32 = ARENA_NEWN(g->arena, LLVMValueRef, p->n);
  cg_raw_pack(g, p, yv->r, in->words, in->s32);
  return true;
}

static void add_raw_incoming(const struct raw_runs *p, const struct raw_runs *in, LLVMBasicBlockRef from) {
  for (uint32_t i = 0; i < p->n * (uint32_t)p->per; i++) LLVMAddIncoming(p->words[i], &in->words[i], &from, 1);
  for (uint32_t i = 0; i < p->n; i++) LLVMAddIncoming(p->s32[i], &in->s32[i], &from, 1);
}

/* Asks LLVM to unroll the loop whose back edge is `back` `count` times (llvm.loop metadata:
 * a distinct node that names itself, then the count). */
static void unroll_hint(struct cg *g, LLVMValueRef back, int64_t count) {
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(g->ctx, NULL, 0);
  LLVMMetadataRef cnt[2] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.unroll.count", 22),
                            LLVMValueAsMetadata(cg_i32(g, count))};
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(g->ctx, cnt, 2)};
  LLVMMetadataRef loop = LLVMMDNodeInContext2(g->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, loop);
  LLVMSetMetadata(back, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9), LLVMMetadataAsValue(g->ctx, loop));
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
  const struct raw_runs **raw = raw_carried(g, op, init, nc);
  struct raw_runs *rphi = ARENA_NEWN(g->arena, struct raw_runs, nc + 1);
  struct cgval *phis = ARENA_NEWN(g->arena, struct cgval, nc + 1);
  for (uint32_t k = 0; k < nc; k++) {
    if (raw[k]) { /* (its registers: funnelled in the body, cg_raw_pending) */
      rphi[k] = raw_phis(g, raw[k]);
      continue;
    }
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
  for (uint32_t k = 0; k < nc; k++) {
    ir_val a = body_blk->args + 1 + k;
    if (raw[k]) cg_raw_pending(g, &rphi[k], a, op->region, cg_new_val(g, a, init[k]->n)->r);
    else g->vals[a] = phis[k];
  }
  cg_gen_region(g, op->region);
  if (g->failed) return;
  const struct ir_op *y = &g->f->ops.v[VEC_LAST(body_blk->ops)];
  struct raw_runs *rin = ARENA_NEWN(g->arena, struct raw_runs, nc + 1);
  for (uint32_t k = 0; k < nc; k++)
    if (raw[k] && !raw_incoming(g, &rphi[k], y->args[k], &rin[k])) {
      if (!g->failed) cg_fail(g, "for: carried value %u changes its register count", k);
      return;
    }
  /* bounds of 32 bits or less: iv + step stays far inside the 64-bit range (nsw), which lets
   * LLVM see a loop counting down as a recurrence too (row-reverse's loops: otherwise every
   * element of the element form takes its own 64-bit offset) */
  LLVMValueRef next = LLVMGetIntTypeWidth(ivt) <= 32 ? LLVMBuildNSWAdd(g->b, iv, step, "") : LLVMBuildAdd(g->b, iv, step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMValueRef back = LLVMBuildBr(g->b, header);
  if (op->i[2] > 1) unroll_hint(g, back, op->i[2]);
  LLVMAddIncoming(iv, &lb, &pre, 1);
  LLVMAddIncoming(iv, &next, &latch, 1);
  for (uint32_t k = 0; k < nc; k++) {
    if (raw[k]) {
      add_raw_incoming(&rphi[k], raw[k], pre);
      add_raw_incoming(&rphi[k], &rin[k], latch);
      continue;
    }
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
  for (uint32_t k = 0; k < nc; k++) {
    if (raw[k]) cg_raw_pending(g, &rphi[k], op->res + k, op->block, cg_new_val(g, op->res + k, init[k]->n)->r);
    else g->vals[op->res + k] = phis[k];
  }
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
