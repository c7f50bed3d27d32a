/* cg_mma.c - dots on Tensor Cores with mma.sync.m16n8k16 (f16 or bf16 in, f32 accumulate)
 * and mma.sync.m16n8k8 (tf32 in: f32 operands rounded with cvt.rna.tf32.f32).
 *
 * The operands arrive in the DOT_OP layouts and the accumulator in the MMA layout built
 * from the same warp tiling (layout.c), so every fragment is a fixed set of registers of
 * the thread: for each 16-row block mb and 8-column block nb of the accumulator and each
 * 16-deep slice kb of the reduction,
 *   a0..a3 = A(mb + {0,8}, kb + {0,8} + {0,1}) packed in pairs, b0,b1 = B(kb + {0,8} + {0,1}, nb),
 *   c0..c3 = C(mb + {0,8}, nb + {0,1})
 * (gpu-facts.md section 2). Registers are found by their coordinates, so the order of the
 * repeat bits in the layouts does not matter here.                                       */
#include <stdio.h>
#include <string.h>

#include "cg_internal.h"

bool cg_dot_is_mma(struct cg *g, const struct ir_op *op) {
  const struct ir_type *c = ir_vtype(g->f, op->res);
  return c->layout && g->f->layouts.v[c->layout].kind == IR_LAYOUT_MMA;
}

/* Two 16-bit elements as one 32-bit operand register, element `lo` in the low half. When
 * both halves were just rounded from f32 (attention's P), the pair is rounded together
 * (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: one instruction instead of two plus packing). */
bool cg_rounded_pair(struct cg *g, LLVMValueRef lo, LLVMValueRef hi) {
  return LLVMIsAFPTruncInst(lo) && LLVMIsAFPTruncInst(hi) && LLVMTypeOf(LLVMGetOperand(lo, 0)) == g->f32 &&
         LLVMTypeOf(LLVMGetOperand(hi, 0)) == g->f32;
}

LLVMValueRef cg_pack_pair(struct cg *g, LLVMValueRef lo, LLVMValueRef hi, bool bf16) {
  LLVMTypeRef et = LLVMTypeOf(lo);
  LLVMTypeRef vt = LLVMVectorType(et, 2);
  if (cg_rounded_pair(g, lo, hi)) {
    LLVMValueRef f = LLVMGetUndef(LLVMVectorType(g->f32, 2));
    f = LLVMBuildInsertElement(g->b, f, LLVMGetOperand(lo, 0), cg_i32(g, 0), "");
    f = LLVMBuildInsertElement(g->b, f, LLVMGetOperand(hi, 0), cg_i32(g, 1), "");
    LLVMValueRef v2 = LLVMBuildFPTrunc(g->b, f, vt, "");
    return bf16 ? LLVMBuildBitCast(g->b, v2, g->i32, "") : v2;
  }
  LLVMValueRef v = LLVMGetUndef(vt);
  v = LLVMBuildInsertElement(g->b, v, lo, cg_i32(g, 0), "");
  v = LLVMBuildInsertElement(g->b, v, hi, cg_i32(g, 1), "");
  return bf16 ? LLVMBuildBitCast(g->b, v, g->i32, "") : v;
}

/* An f32 element as a tf32 operand register (rounded to nearest, ties away: cvt.rna). */
static LLVMValueRef to_tf32(struct cg *g, LLVMValueRef x) {
  return cg_intrinsic(g, "llvm.nvvm.f2tf32.rna", NULL, 0, &x, 1);
}

/* One m16n8k8 tf32 instruction for accumulator block (mb, nb) and k-slice kb: a0..a3 =
 * A(mb + {0,8}, kb + {0,4}) (row offset first), b0, b1 = B(kb + {0,4}, nb). Converted
 * operands are cached by register index like the packed 16-bit ones. */
static bool tf32_operands(struct cg *g, struct cgval *A, struct cgval *B, const struct ll *la, const struct ll *lb,
                          LLVMValueRef *afrag, LLVMValueRef *bfrag, int32_t mb, int32_t nb, int kb,
                          struct cgval *out, const int *ci) {
  int ai[4] = {ll_reg_at(la, mb, kb), ll_reg_at(la, mb + 8, kb), ll_reg_at(la, mb, kb + 4), ll_reg_at(la, mb + 8, kb + 4)};
  int bi[2] = {ll_reg_at(lb, kb, nb), ll_reg_at(lb, kb + 4, nb)};
  LLVMValueRef args[10];
  for (int q = 0; q < 4; q++) {
    if (ai[q] < 0 || (q < 2 && bi[q] < 0)) {
      cg_fail(g, "mma: tf32 operand fragment at m=%d n=%d k=%d is not in the thread's registers", mb, nb, kb);
      return false;
    }
    if (!afrag[ai[q]]) afrag[ai[q]] = to_tf32(g, A->r[ai[q]]);
    args[q] = afrag[ai[q]];
  }
  for (int q = 0; q < 2; q++) {
    if (!bfrag[bi[q]]) bfrag[bi[q]] = to_tf32(g, B->r[bi[q]]);
    args[4 + q] = bfrag[bi[q]];
  }
  for (int q = 0; q < 4; q++) args[6 + q] = out->r[ci[q]];
  LLVMValueRef res = cg_intrinsic(g, "llvm.nvvm.mma.m16n8k8.row.col.tf32", NULL, 0, args, 10);
  for (int q = 0; q < 4; q++) out->r[ci[q]] = LLVMBuildExtractValue(g->b, res, (unsigned)q, "");
  return true;
}

void cg_gen_mma_dot(struct cg *g, const struct ir_op *op) {
  struct ll la, lb, lc;
  if (!cg_layout_of(g, op->args[0], &la) || !cg_layout_of(g, op->args[1], &lb) || !cg_layout_of(g, op->res, &lc))
    return;
  struct cgval *A = cg_val(g, op->args[0]), *B = cg_val(g, op->args[1]), *C = cg_val(g, op->args[2]);
  if (g->failed) return;
  bool lazy_a = g->lazy_load[op->args[0]] != 0, lazy_b = g->lazy_load[op->args[1]] != 0;
  const struct ir_type *at = ir_vtype(g->f, op->args[0]);
  bool bf16 = at->dtype == DT_BF16, tf32 = at->dtype == DT_F32;
  int K = at->dims[1], kstep = tf32 ? 8 : 16;
  uint32_t n = ll_num_regs(&lc);
  struct cgval *out = cg_new_val(g, op->res, n);
  for (uint32_t r = 0; r < n; r++) out->r[r] = C->r[r];
  const char *name = bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
  /* the accumulator blocks of this thread */
  typedef int32_t pair_t[2];
  typedef int quad_t[4];
  pair_t *blk = ARENA_NEWN(g->arena, pair_t, n);
  quad_t *ci = ARENA_NEWN(g->arena, quad_t, n);
  uint32_t nblk = 0;
  bool *done = ARENA_NEWN(g->arena, bool, n);
  for (uint32_t r = 0; r < n; r++) {
    if (done[r]) continue;
    int32_t c[IR_MAX_RANK];
    ll_reg_coord(&lc, r, c);
    int32_t mb = c[0] & ~15, nb = c[1] & ~7;
    int q4[4] = {ll_reg_at(&lc, mb, nb), ll_reg_at(&lc, mb, nb + 1), ll_reg_at(&lc, mb + 8, nb), ll_reg_at(&lc, mb + 8, nb + 1)};
    for (int q = 0; q < 4; q++) {
      if (q4[q] < 0) {
        cg_fail(g, "mma: accumulator block (%d,%d) is incomplete in the layout", mb, nb);
        return;
      }
      done[q4[q]] = true;
      ci[nblk][q] = q4[q];
    }
    blk[nblk][0] = mb;
    blk[nblk][1] = nb;
    nblk++;
  }
  /* k outermost: consecutive mma instructions update different accumulators, so none
   * waits for the previous one's result (a k-inner order makes a dependent chain) */
  /* packed operands, cached by the index of their first register */
  LLVMValueRef *afrag = ARENA_NEWN(g->arena, LLVMValueRef, 4 * A->n), *bfrag = ARENA_NEWN(g->arena, LLVMValueRef, 2 * B->n);
  for (int kb = 0; kb < K; kb += kstep) {
    if (lazy_a) cg_load_k_slice(g, op->args[0], kb);
    if (lazy_b) cg_load_k_slice(g, op->args[1], kb);
    memset(afrag, 0, sizeof(LLVMValueRef) * 4 * A->n);
    memset(bfrag, 0, sizeof(LLVMValueRef) * 2 * B->n);
    for (uint32_t i = 0; i < nblk; i++) {
      int32_t mb = blk[i][0], nb = blk[i][1];
      if (tf32) {
        if (!tf32_operands(g, A, B, &la, &lb, afrag, bfrag, mb, nb, kb, out, ci[i])) return;
        continue;
      }
      int ai[8] = {ll_reg_at(&la, mb, kb), ll_reg_at(&la, mb, kb + 1), ll_reg_at(&la, mb + 8, kb), ll_reg_at(&la, mb + 8, kb + 1),
                   ll_reg_at(&la, mb, kb + 8), ll_reg_at(&la, mb, kb + 9), ll_reg_at(&la, mb + 8, kb + 8), ll_reg_at(&la, mb + 8, kb + 9)};
      int bi[4] = {ll_reg_at(&lb, kb, nb), ll_reg_at(&lb, kb + 1, nb), ll_reg_at(&lb, kb + 8, nb), ll_reg_at(&lb, kb + 9, nb)};
      for (int q = 0; q < 8; q++)
        if (ai[q] < 0 || (q < 4 && bi[q] < 0)) {
          cg_fail(g, "mma: operand fragment at m=%d n=%d k=%d is not in the thread's registers", mb, nb, kb);
          return;
        }
      /* packed operands are shared by the blocks of one row (A) or column (B) */
      LLVMValueRef args[10];
      for (int q = 0; q < 4; q++) {
        LLVMValueRef *slot = &afrag[4 * (uint32_t)ai[0] + (uint32_t)q];
        if (!*slot) *slot = cg_pack_pair(g, A->r[ai[2 * q]], A->r[ai[2 * q + 1]], bf16);
        args[q] = *slot;
      }
      for (int q = 0; q < 2; q++) {
        LLVMValueRef *slot = &bfrag[2 * (uint32_t)bi[0] + (uint32_t)q];
        if (!*slot) *slot = cg_pack_pair(g, B->r[bi[2 * q]], B->r[bi[2 * q + 1]], bf16);
        args[4 + q] = *slot;
      }
      for (int q = 0; q < 4; q++) args[6 + q] = out->r[ci[i][q]];
      LLVMValueRef res = cg_intrinsic(g, name, NULL, 0, args, 10);
      for (int q = 0; q < 4; q++) out->r[ci[i][q]] = LLVMBuildExtractValue(g->b, res, (unsigned)q, "");
    }
  }
}
