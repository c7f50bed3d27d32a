/* cg_data.c - moving tile data between threads: layout changes (broadcast, expand_dims,
 * trans, convert_layout), reductions, scans, and the FMA dot.
 *
 * When the source and destination hold every element in the same lane and warp, a layout
 * change is a renaming of registers (ll_register_map) and costs nothing. Otherwise the
 * tile goes through shared memory: a barrier (earlier readers of the scratch are done),
 * every thread stores its registers at the elements' row-major positions, a barrier, and
 * every thread loads the elements its destination registers need. Replicated registers
 * store the same value to the same place, which is harmless.
 *
 * Reductions combine in three steps: registers of a thread that map to the same result
 * element; lanes, with butterfly shuffles over the lane bits that move along the reduced
 * axis; warps, through shared memory, when warp bits move along the axis. The butterfly
 * leaves the result in every lane, as the slice layout expects.                        */
#include <string.h>

#include "cg_internal.h"

LLVMValueRef cg_smem_at(struct cg *g, LLVMValueRef byte_offset) {
  return LLVMBuildGEP2(g->b, g->i8, g->smem, &byte_offset, 1, "");
}

LLVMValueRef cg_smem_ptr(struct cg *g, LLVMValueRef byte_offset) {
  if (g->smem_scratch) byte_offset = LLVMBuildAdd(g->b, byte_offset, cg_i32(g, g->smem_scratch), "");
  return cg_smem_at(g, byte_offset);
}

void cg_smem_reserve(struct cg *g, unsigned bytes) {
  if (g->smem_scratch + bytes > g->smem_bytes) g->smem_bytes = g->smem_scratch + bytes;
}

int cg_smem_elem_bytes(ir_dtype dt) { return dt == DT_BOOL ? 1 : ir_dtype_bytes(dt); }

void cg_smem_store_elem(struct cg *g, LLVMValueRef v, ir_dtype dt, LLVMValueRef elem_index, int64_t base) {
  int eb = cg_smem_elem_bytes(dt);
  LLVMValueRef off = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, elem_index, cg_i32(g, eb), ""), cg_i32(g, base), "");
  if (dt == DT_BOOL) v = LLVMBuildZExt(g->b, v, g->i8, "");
  LLVMValueRef st = LLVMBuildStore(g->b, v, cg_smem_ptr(g, off));
  LLVMSetAlignment(st, (unsigned)eb);
}

LLVMValueRef cg_smem_load_elem(struct cg *g, ir_dtype dt, LLVMValueRef elem_index, int64_t base) {
  int eb = cg_smem_elem_bytes(dt);
  LLVMValueRef off = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, elem_index, cg_i32(g, eb), ""), cg_i32(g, base), "");
  LLVMTypeRef t = dt == DT_BOOL ? g->i8 : cg_reg_type(g, dt);
  LLVMValueRef v = LLVMBuildLoad2(g->b, t, cg_smem_ptr(g, off), "");
  LLVMSetAlignment(v, (unsigned)eb);
  if (dt == DT_BOOL) v = LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->i8, 0, 0), "");
  return v;
}

/* Row-major linear index of coordinates within a shape (i32 arithmetic). */
LLVMValueRef cg_linear_index(struct cg *g, const LLVMValueRef *c, const int32_t *shape, int rank) {
  LLVMValueRef idx = cg_i32(g, 0);
  for (int d = 0; d < rank; d++) {
    idx = LLVMBuildMul(g->b, idx, cg_i32(g, shape[d]), "");
    idx = LLVMBuildAdd(g->b, idx, c[d], "");
  }
  return idx;
}

/* A view of layout `src` as if the op had not changed its shape: the destination's
 * coordinates are mapped back onto the source for trans and expand_dims. */
static void source_view(const struct ir_op *op, const struct ll *src, struct ll *view) {
  *view = *src;
  if (op->code == IR_TRANS) {
    int32_t (*sets[3])[IR_MAX_RANK] = {view->reg, view->lane, view->warp};
    int counts[3] = {view->nreg, view->nlane, view->nwarp};
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++) {
        int32_t t = sets[s][i][0];
        sets[s][i][0] = sets[s][i][1];
        sets[s][i][1] = t;
      }
    view->shape[0] = src->shape[1];
    view->shape[1] = src->shape[0];
  } else if (op->code == IR_EXPAND_DIMS) {
    int axis = (int)op->i[0];
    int32_t (*sets[3])[IR_MAX_RANK] = {view->reg, view->lane, view->warp};
    int counts[3] = {view->nreg, view->nlane, view->nwarp};
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++) {
        for (int d = src->rank; d > axis; d--) sets[s][i][d] = sets[s][i][d - 1];
        sets[s][i][axis] = 0;
      }
    for (int d = src->rank; d > axis; d--) view->shape[d] = src->shape[d - 1];
    view->shape[axis] = 1;
    view->rank = src->rank + 1;
  }
}

void cg_gen_relayout(struct cg *g, const struct ir_op *op) {
  struct ll dst, src, view;
  const struct ir_type *rt = ir_vtype(g->f, op->res);
  const struct ir_type *at = ir_vtype(g->f, op->args[0]);
  struct cgval *a = cg_val(g, op->args[0]);
  if (g->failed) return;
  if (rt->rank == 0) { /* scalar to scalar (expand of a scalar cannot occur; kept safe) */
    cg_new_val(g, op->res, 1)->r[0] = a->r[0];
    return;
  }
  if (!cg_layout_of(g, op->res, &dst)) return;
  if (at->rank == 0) {
    uint32_t n = ll_num_regs(&dst);
    struct cgval *out = cg_new_val(g, op->res, n);
    for (uint32_t r = 0; r < n; r++) out->r[r] = a->r[0];
    return;
  }
  if (!cg_layout_of(g, op->args[0], &src)) return;
  source_view(op, &src, &view);
  uint32_t n = ll_num_regs(&dst);
  struct cgval *out = cg_new_val(g, op->res, n);
  uint32_t *map = ARENA_NEWN(g->arena, uint32_t, n);
  if (ll_register_map(&dst, &view, map)) {
    for (uint32_t r = 0; r < n; r++) out->r[r] = a->r[map[r]];
    return;
  }
  /* through shared memory, in the source's own shape */
  ir_dtype dt = (ir_dtype)at->dtype;
  int64_t numel = ir_type_numel(at);
  cg_smem_reserve(g, (unsigned)(numel * cg_smem_elem_bytes(dt)));
  cg_barrier(g);
  for (uint32_t r = 0; r < a->n; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, &src, r, c);
    cg_smem_store_elem(g, a->r[r], dt, cg_linear_index(g, c, src.shape, src.rank), 0);
  }
  cg_barrier(g);
  for (uint32_t r = 0; r < n; r++) {
    LLVMValueRef c[IR_MAX_RANK], sc[IR_MAX_RANK];
    cg_coords(g, &dst, r, c);
    if (op->code == IR_TRANS) {
      sc[0] = c[1];
      sc[1] = c[0];
    } else if (op->code == IR_EXPAND_DIMS) {
      for (int d = 0, j = 0; d < dst.rank; d++)
        if (d != op->i[0]) sc[j++] = c[d];
    } else {
      for (int d = 0; d < dst.rank; d++) sc[d] = at->dims[d] == 1 ? cg_i32(g, 0) : c[d];
    }
    out->r[r] = cg_smem_load_elem(g, dt, cg_linear_index(g, sc, src.shape, src.rank), 0);
  }
}

/* reshape, permute, join, split: the layout pass chose a result layout that is the
 * operand's relabeled (ll_shape_view), converting the operand first where needed, so each
 * result register is one of the operand's registers in the same thread: a renaming, no
 * instruction. A layout pair that would need data movement is a layout-pass bug. */
void cg_gen_shape_op(struct cg *g, const struct ir_op *op) {
  struct ll src, dst, view;
  const struct ir_type *rt = ir_vtype(g->f, op->res);
  struct cgval *a = cg_val(g, op->args[0]);
  struct cgval *b = op->code == IR_JOIN ? cg_val(g, op->args[1]) : NULL;
  if (g->failed || !cg_layout_of(g, op->args[0], &src) || !cg_layout_of(g, op->res, &dst)) return;
  uint32_t n = ll_num_regs(&src), nd = ll_num_regs(&dst);
  uint32_t *src_reg = ARENA_NEWN(g->arena, uint32_t, 2 * n), *map = ARENA_NEWN(g->arena, uint32_t, nd);
  if (a->n != n || (b && b->n != n) ||
      !ll_shape_view(op->code, op->i[0], &src, rt->rank, rt->dims, &view, src_reg) ||
      !ll_register_map(&dst, &view, map)) {
    cg_fail(g, "%s: the result's layout is not the operand's relabeled (the layout pass converts the operand)",
            ir_ops[op->code].name);
    return;
  }
  struct cgval *out = cg_new_val(g, op->res, nd);
  for (uint32_t r = 0; r < nd; r++) {
    uint32_t k = src_reg[map[r]];
    out->r[r] = k < n ? a->r[k] : b->r[k - n];
  }
}

/* ---- reductions ---- */

static LLVMValueRef combine(struct cg *g, ir_opcode code, ir_dtype dt, LLVMValueRef a, LLVMValueRef b) {
  ir_opcode e = code == IR_REDUCE_SUM ? IR_ADD : code == IR_REDUCE_MAX ? IR_MAX : IR_MIN;
  return cg_elem(g, e, dt, a, b);
}

/* cluster_reduce (cluster-rows): every CTA of the program's cluster holds a partial value
 * x (the same in all its threads); thread 0 of each writes x into slot [rank] of every
 * CTA's slots for this op (distributed shared memory: mapa + st.shared::cluster), and after
 * a cluster barrier (arrive.release / wait.acquire: the writes are visible) each CTA
 * combines slots 0 .. C-1 in that order, so every CTA computes the same bits. A cluster
 * barrier in front makes sure every peer has started (its shared memory exists) before it
 * is written. Each op has its own slots and runs once (not in loops: the pass checks), so
 * no write can overtake a read of the same slot. */
/* barrier.cluster: every thread of every CTA of the cluster (arrive releases, wait acquires) */
static void cluster_sync(struct cg *g) {
  cg_intrinsic(g, "llvm.nvvm.barrier.cluster.arrive.aligned", NULL, 0, NULL, 0);
  cg_intrinsic(g, "llvm.nvvm.barrier.cluster.wait.aligned", NULL, 0, NULL, 0);
}

void cg_gen_cluster_reduce(struct cg *g, const struct ir_op *op) {
  struct cgval *a = cg_val(g, op->args[0]);
  if (g->failed) return;
  int C = g->f->cluster;
  if ((g->ncluster + 1) * 8 > CG_CLUSTER_SLOTS || C < 2 || C > 8) {
    cg_fail(g, "cluster_reduce: more than %d in one function, or cluster=%d", CG_CLUSTER_SLOTS / 8, C);
    return;
  }
  ir_dtype dt = (ir_dtype)ir_vtype(g->f, op->res)->dtype;
  LLVMTypeRef arr = LLVMArrayType2(g->i32, CG_CLUSTER_SLOTS);
  if (!g->cluster_slots) {
    g->cluster_slots = LLVMAddGlobalInAddressSpace(g->mod, arr, "__tile_cluster", 3);
    LLVMSetInitializer(g->cluster_slots, LLVMGetUndef(arr));
    LLVMSetLinkage(g->cluster_slots, LLVMInternalLinkage);
    LLVMSetAlignment(g->cluster_slots, 16);
  }
  int base = g->ncluster++ * 8;
  LLVMValueRef x = a->r[0];
  LLVMValueRef bits = LLVMTypeOf(x) == g->i32 ? x : LLVMBuildBitCast(g->b, x, g->i32, "");
  cluster_sync(g);
  LLVMValueRef rank = cg_intrinsic(g, "llvm.nvvm.read.ptx.sreg.cluster.ctarank", NULL, 0, NULL, 0);
  LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cluster.put");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cluster.done");
  LLVMBuildCondBr(g->b, g->leader, put, done);
  LLVMPositionBuilderAtEnd(g->b, put);
  LLVMValueRef idx[2] = {cg_i32(g, 0), LLVMBuildAdd(g->b, cg_i32(g, base), rank, "")};
  LLVMValueRef mine = LLVMBuildGEP2(g->b, arr, g->cluster_slots, idx, 2, "");
  for (int r = 0; r < C; r++) {
    LLVMValueRef args[2] = {mine, cg_i32(g, r)};
    LLVMValueRef peer = cg_intrinsic(g, "llvm.nvvm.mapa.shared.cluster", NULL, 0, args, 2);
    LLVMBuildStore(g->b, bits, peer);
  }
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  cluster_sync(g);
  ir_opcode e = ir_cluster_combine(op->i[0]);
  LLVMValueRef acc = NULL;
  for (int r = 0; r < C; r++) {
    LLVMValueRef ix[2] = {cg_i32(g, 0), cg_i32(g, base + r)};
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->i32, LLVMBuildGEP2(g->b, arr, g->cluster_slots, ix, 2, ""), "");
    LLVMSetVolatile(v, 1); /* written by other CTAs: not to be merged with anything before the barrier */
    if (LLVMTypeOf(x) != g->i32) v = LLVMBuildBitCast(g->b, v, LLVMTypeOf(x), "");
    acc = acc ? cg_elem(g, e, dt, acc, v) : v;
  }
  cg_new_val(g, op->res, 1)->r[0] = acc;
}

static LLVMValueRef shuffle_xor(struct cg *g, LLVMValueRef v, ir_dtype dt, int lane_mask) {
  LLVMValueRef args[4];
  args[0] = cg_i32(g, -1);
  args[2] = cg_i32(g, lane_mask);
  args[3] = cg_i32(g, 31);
  LLVMTypeRef t = LLVMTypeOf(v);
  if (t == g->f32) {
    args[1] = v;
    return cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, args, 4);
  }
  if (t == g->i32) {
    args[1] = v;
    return cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
  }
  if (t == g->i64) {
    LLVMValueRef lo = LLVMBuildTrunc(g->b, v, g->i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, v, cg_i64(g, 32), ""), g->i32, "");
    args[1] = lo;
    lo = cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
    args[1] = hi;
    hi = cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
    return LLVMBuildOr(g->b, LLVMBuildZExt(g->b, lo, g->i64, ""),
                       LLVMBuildShl(g->b, LLVMBuildZExt(g->b, hi, g->i64, ""), cg_i64(g, 32), ""), "");
  }
  if (ir_dtype_is_float(dt)) { /* f16, bf16: move the bits */
    LLVMValueRef bits = LLVMBuildZExt(g->b, LLVMBuildBitCast(g->b, v, g->i16, ""), g->i32, "");
    args[1] = bits;
    LLVMValueRef s = cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
    return LLVMBuildBitCast(g->b, LLVMBuildTrunc(g->b, s, g->i16, ""), t, "");
  }
  args[1] = LLVMBuildZExt(g->b, v, g->i32, "");
  LLVMValueRef s = cg_intrinsic(g, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
  return LLVMBuildTrunc(g->b, s, t, "");
}

static bool same_coord(const int32_t *a, const int32_t *b, int rank) {
  for (int d = 0; d < rank; d++)
    if (a[d] != b[d]) return false;
  return true;
}

void cg_gen_reduce(struct cg *g, const struct ir_op *op) {
  const struct ir_type *at = ir_vtype(g->f, op->args[0]);
  const struct ir_type *rt = ir_vtype(g->f, op->res);
  ir_dtype dt = (ir_dtype)at->dtype;
  int axis = (int)op->i[0];
  struct ll src, dst;
  struct cgval *a = cg_val(g, op->args[0]);
  if (g->failed || !cg_layout_of(g, op->args[0], &src)) return;
  if (rt->rank == 0) {
    memset(&dst, 0, sizeof dst);
  } else if (!cg_layout_of(g, op->res, &dst)) {
    return;
  }
  uint32_t n = rt->rank == 0 ? 1 : ll_num_regs(&dst);
  struct cgval *out = cg_new_val(g, op->res, n);
  /* 1. within the thread: each result register's inputs, combined as a balanced tree
   * (a row of 32 values in 5 dependent steps instead of 31, which a warpgroup's softmax
   * waits for between its products) */
  uint32_t *cnt = ARENA_NEWN(g->arena, uint32_t, n), *at_in = ARENA_NEWN(g->arena, uint32_t, a->n);
  for (uint32_t r = 0; r < a->n; r++) {
    int32_t c[IR_MAX_RANK], key[IR_MAX_RANK];
    ll_reg_coord(&src, r, c);
    for (int d = 0, j = 0; d < src.rank; d++)
      if (d != axis) key[j++] = c[d];
    uint32_t target = UINT32_MAX;
    for (uint32_t o = 0; o < n && target == UINT32_MAX; o++) {
      int32_t oc[IR_MAX_RANK];
      ll_reg_coord(&dst, o, oc);
      if (same_coord(oc, key, rt->rank)) target = o;
    }
    if (target == UINT32_MAX) {
      cg_fail(g, "reduction: input register %u has no result register", r);
      return;
    }
    at_in[r] = target;
    cnt[target]++;
  }
  LLVMValueRef *part = ARENA_NEWN(g->arena, LLVMValueRef, a->n);
  for (uint32_t o = 0; o < n; o++) {
    if (!cnt[o]) {
      cg_fail(g, "reduction: result register %u has no input", o);
      return;
    }
    uint32_t m = 0;
    for (uint32_t r = 0; r < a->n; r++)
      if (at_in[r] == o) part[m++] = a->r[r];
    for (; m > 1; m = (m + 1) / 2)
      for (uint32_t i = 0; i < m / 2; i++) {
        part[i] = combine(g, (ir_opcode)op->code, dt, part[2 * i], part[2 * i + 1]);
        if (m % 2 && i + 1 == m / 2) part[i + 1] = part[m - 1]; /* the odd one moves down */
      }
    out->r[o] = part[0];
  }
  /* 2. across lanes */
  for (int k = 0; k < src.nlane; k++)
    if (src.lane[k][axis])
      for (uint32_t o = 0; o < n; o++)
        out->r[o] = combine(g, (ir_opcode)op->code, dt, out->r[o], shuffle_xor(g, out->r[o], dt, 1 << k));
  /* 3. across warps */
  int wbits[LL_MAX_WARP_BITS], nw = 0;
  for (int k = 0; k < src.nwarp; k++)
    if (src.warp[k][axis]) wbits[nw++] = k;
  if (!nw) return;
  int64_t numel = rt->rank == 0 ? 1 : ir_type_numel(rt);
  int64_t groups = 1 << nw;
  cg_smem_reserve(g, (unsigned)(groups * numel * cg_smem_elem_bytes(dt)));
  LLVMValueRef widx = cg_i32(g, 0);
  for (int j = 0; j < nw; j++) {
    LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->warp, cg_i32(g, wbits[j]), ""), cg_i32(g, 1), "");
    widx = LLVMBuildOr(g->b, widx, LLVMBuildShl(g->b, bit, cg_i32(g, j), ""), "");
  }
  LLVMValueRef *lin = ARENA_NEWN(g->arena, LLVMValueRef, n);
  for (uint32_t o = 0; o < n; o++) {
    LLVMValueRef c[IR_MAX_RANK];
    if (rt->rank == 0) {
      lin[o] = cg_i32(g, 0);
    } else {
      cg_coords(g, &dst, o, c);
      lin[o] = cg_linear_index(g, c, dst.shape, dst.rank);
    }
  }
  cg_barrier(g);
  for (uint32_t o = 0; o < n; o++)
    cg_smem_store_elem(g, out->r[o], dt, LLVMBuildAdd(g->b, LLVMBuildMul(g->b, widx, cg_i32(g, numel), ""), lin[o], ""), 0);
  cg_barrier(g);
  for (uint32_t o = 0; o < n; o++) {
    LLVMValueRef acc = cg_smem_load_elem(g, dt, lin[o], 0);
    for (int64_t w = 1; w < groups; w++)
      acc = combine(g, (ir_opcode)op->code, dt, acc,
                    cg_smem_load_elem(g, dt, LLVMBuildAdd(g->b, lin[o], cg_i32(g, w * numel), ""), 0));
    out->r[o] = acc;
  }
}

/* ---- dot with FMA ----
 * Both operands go to shared memory in row-major order; then each thread loops over k,
 * reading the A rows and B columns its accumulator registers need (distinct register
 * offsets only) and accumulating in f32. The k loop is an LLVM loop, not unrolled code,
 * so large tiles stay small in PTX. */

static LLVMValueRef to_f32v(struct cg *g, LLVMValueRef v, ir_dtype dt) {
  return dt == DT_F32 ? v : cg_cast(g, v, dt, DT_F32);
}

void cg_gen_dot(struct cg *g, const struct ir_op *op) {
  if (cg_dot_is_mma(g, op)) {
    cg_gen_mma_dot(g, op);
    return;
  }
  const struct ir_type *at = ir_vtype(g->f, op->args[0]);
  const struct ir_type *bt = ir_vtype(g->f, op->args[1]);
  const struct ir_type *ct = ir_vtype(g->f, op->res);
  int M = at->dims[0], K = at->dims[1], N = bt->dims[1];
  ir_dtype adt = (ir_dtype)at->dtype, cdt = (ir_dtype)ct->dtype;
  struct cgval *A = cg_val(g, op->args[0]), *B = cg_val(g, op->args[1]), *C = cg_val(g, op->args[2]);
  struct ll la, lb, lc;
  if (g->failed || !cg_layout_of(g, op->args[0], &la) || !cg_layout_of(g, op->args[1], &lb) ||
      !cg_layout_of(g, op->res, &lc))
    return;
  int eb = cg_smem_elem_bytes(adt);
  int64_t boff = ((int64_t)M * K * eb + 15) & ~(int64_t)15;
  cg_smem_reserve(g, (unsigned)(boff + (int64_t)K * N * eb));
  cg_barrier(g);
  for (uint32_t r = 0; r < A->n; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, &la, r, c);
    cg_smem_store_elem(g, A->r[r], adt, cg_linear_index(g, c, la.shape, 2), 0);
  }
  for (uint32_t r = 0; r < B->n; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, &lb, r, c);
    cg_smem_store_elem(g, B->r[r], adt, cg_linear_index(g, c, lb.shape, 2), boff);
  }
  cg_barrier(g);

  uint32_t n = ll_num_regs(&lc);
  LLVMValueRef th[IR_MAX_RANK];
  cg_thread_coords(g, &lc, th);
  /* distinct row and column offsets of this thread's accumulator registers */
  int32_t rows[256], cols[256];
  uint32_t nrows = 0, ncols = 0, *ri = ARENA_NEWN(g->arena, uint32_t, n), *ci = ARENA_NEWN(g->arena, uint32_t, n);
  for (uint32_t r = 0; r < n; r++) {
    int32_t c[IR_MAX_RANK];
    ll_reg_coord(&lc, r, c);
    uint32_t i = 0;
    while (i < nrows && rows[i] != c[0]) i++;
    if (i == nrows) {
      if (nrows == 256) {
        cg_fail(g, "dot: too many accumulator rows per thread");
        return;
      }
      rows[nrows++] = c[0];
    }
    ri[r] = i;
    uint32_t j = 0;
    while (j < ncols && cols[j] != c[1]) j++;
    if (j == ncols) {
      if (ncols == 256) {
        cg_fail(g, "dot: too many accumulator columns per thread");
        return;
      }
      cols[ncols++] = c[1];
    }
    ci[r] = j;
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "dot.k");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "dot.done");
  LLVMValueRef *acc0 = ARENA_NEWN(g->arena, LLVMValueRef, n);
  for (uint32_t r = 0; r < n; r++) acc0[r] = to_f32v(g, C->r[r], cdt);
  LLVMBuildBr(g->b, loop);
  LLVMPositionBuilderAtEnd(g->b, loop);
  LLVMValueRef k = LLVMBuildPhi(g->b, g->i32, "k");
  LLVMValueRef *acc = ARENA_NEWN(g->arena, LLVMValueRef, n);
  for (uint32_t r = 0; r < n; r++) acc[r] = LLVMBuildPhi(g->b, g->f32, "");
  LLVMValueRef *av = ARENA_NEWN(g->arena, LLVMValueRef, nrows), *bv = ARENA_NEWN(g->arena, LLVMValueRef, ncols);
  for (uint32_t i = 0; i < nrows; i++) {
    LLVMValueRef m = LLVMBuildOr(g->b, th[0], cg_i32(g, rows[i]), "");
    LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, m, cg_i32(g, K), ""), k, "");
    av[i] = to_f32v(g, cg_smem_load_elem(g, adt, idx, 0), adt);
  }
  for (uint32_t j = 0; j < ncols; j++) {
    LLVMValueRef c = LLVMBuildOr(g->b, th[1], cg_i32(g, cols[j]), "");
    LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, k, cg_i32(g, N), ""), c, "");
    bv[j] = to_f32v(g, cg_smem_load_elem(g, adt, idx, boff), adt);
  }
  LLVMValueRef *nacc = ARENA_NEWN(g->arena, LLVMValueRef, n);
  LLVMTypeRef f32 = g->f32;
  for (uint32_t r = 0; r < n; r++) {
    LLVMValueRef args[3] = {av[ri[r]], bv[ci[r]], acc[r]};
    nacc[r] = cg_intrinsic(g, "llvm.fma", &f32, 1, args, 3);
  }
  LLVMValueRef k1 = LLVMBuildAdd(g->b, k, cg_i32(g, 1), "");
  LLVMValueRef more = LLVMBuildICmp(g->b, LLVMIntSLT, k1, cg_i32(g, K), "");
  LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(g->b);
  LLVMBuildCondBr(g->b, more, loop, done);
  LLVMValueRef zero = cg_i32(g, 0);
  LLVMAddIncoming(k, &zero, &pre, 1);
  LLVMAddIncoming(k, &k1, &loop_end, 1);
  for (uint32_t r = 0; r < n; r++) {
    LLVMAddIncoming(acc[r], &acc0[r], &pre, 1);
    LLVMAddIncoming(acc[r], &nacc[r], &loop_end, 1);
  }
  LLVMPositionBuilderAtEnd(g->b, done);
  struct cgval *out = cg_new_val(g, op->res, n);
  for (uint32_t r = 0; r < n; r++) out->r[r] = cdt == DT_F32 ? nacc[r] : cg_cast(g, nacc[r], DT_F32, cdt);
}

/* ---- scans ----
 * An inclusive scan along one axis, for any linear layout. An element's axis coordinate is
 * a sum of basis bits, each owned by one register, lane or warp bit (layout.h), in whatever
 * order the layout puts them (a blocked layout: registers, lanes, warps, then registers
 * again for a tile larger than the threads cover; an mma accumulator: register, lanes,
 * register, warps). The scan walks those positions from the least significant up, doubling
 * a block of the axis around each element at every step and keeping:
 *   B  the element's inclusive scan within the lowest run of register positions: each
 *      thread's own consecutive elements, scanned in order (step 1);
 *   E  the combination of every element of the current block that comes before that run
 *      in scan order (an exclusive prefix; `has` says whether there is one yet);
 *   T  the total of the current block.
 * Doubling by one position: the half that comes later in scan order takes the other half's
 * T into its E, and both halves' T becomes the pair's total. A register position pairs two
 * registers of the thread; a lane position pairs lanes, whose T a butterfly shuffle
 * (shfl.bfly) exchanges; a run of warp positions goes through shared memory, each warp
 * leaving its T there and reading the others' (one round of two barriers). The result is
 * E op B. B is per register, E per register run (the registers of one bottom run share
 * it), T per block, so shuffles and shared-memory traffic are per block, not per element.
 * Butterflies rather than shfl.up: a lane position's partner is one bit flip away however
 * the layout interleaves lane bits with other dimensions, and both partners compute the
 * same total, so replicated lanes and warps stay identical.
 * reverse: scan order is the reverse of axis order, so at every position the upper half
 * comes first. Float sums and products thus combine each thread's run in order, then the
 * blocks' totals pairwise: rounding differs from a sequential sum. */

static ir_opcode scan_elem(uint16_t code) {
  return code == IR_SCAN_SUM ? IR_ADD : code == IR_SCAN_PROD ? IR_MUL : code == IR_SCAN_MAX ? IR_MAX : IR_MIN;
}

static bool const_true(LLVMValueRef v) { return v && LLVMIsAConstantInt(v) && LLVMConstIntGetZExtValue(v); }

/* Puts `before`, a part of the scan that precedes the prefix (*e, *has), in front of it
 * where `when` holds (NULL: everywhere). *has NULL: no prefix yet. */
static void scan_prepend(struct cg *g, ir_opcode code, ir_dtype dt, LLVMValueRef *e, LLVMValueRef *has,
                         LLVMValueRef before, LLVMValueRef when) {
  LLVMValueRef cand = before;
  if (*has) {
    LLVMValueRef both = cg_elem(g, code, dt, before, *e);
    cand = const_true(*has) ? both : LLVMBuildSelect(g->b, *has, both, before, "");
  }
  if (!when) {
    *e = cand;
    *has = LLVMConstInt(g->i1, 1, 0);
  } else if (!*has) {
    *e = cand; /* meaningful only where `when` holds, which `has` records */
    *has = when;
  } else {
    *e = LLVMBuildSelect(g->b, when, cand, *e, "");
    *has = const_true(*has) ? *has : LLVMBuildOr(g->b, *has, when, "");
  }
}

static int log2i(int64_t v) {
  int k = 0;
  while (((int64_t)1 << k) < v) k++;
  return k;
}

void cg_gen_scan(struct cg *g, const struct ir_op *op) {
  const struct ir_type *at = ir_vtype(g->f, op->args[0]);
  ir_dtype dt = (ir_dtype)at->dtype;
  ir_opcode code = scan_elem(op->code);
  int axis = (int)op->i[0];
  bool rev = op->i[1] != 0;
  struct ll l;
  struct cgval *a = cg_val(g, op->args[0]);
  if (g->failed || !cg_layout_of(g, op->args[0], &l)) return;
  uint32_t n = a->n;
  struct cgval *out = cg_new_val(g, op->res, n);
  /* the owner of each axis position: 'r', 'l' or 'w' and its bit */
  int len = at->dims[axis], npos = log2i(len);
  char kind[32] = {0};
  int bit[32];
  int32_t(*sets[3])[IR_MAX_RANK] = {l.reg, l.lane, l.warp};
  int counts[3] = {l.nreg, l.nlane, l.nwarp};
  for (int s = 0; s < 3; s++)
    for (int k = 0; k < counts[s]; k++) {
      int32_t v = sets[s][k][axis];
      if (!v) continue;
      int p = log2i(v);
      if (v != (int32_t)1 << p || p >= npos || kind[p]) {
        cg_fail(g, "scan: basis %d of the layout is not a new power of two along axis %d", v, axis);
        return;
      }
      kind[p] = "rlw"[s];
      bit[p] = k;
    }
  for (int p = 0; p < npos; p++)
    if (!kind[p]) {
      cg_fail(g, "scan: no register, lane or warp moves along position %d of axis %d", p, axis);
      return;
    }
  /* 1. each thread's lowest run of register positions, in scan order */
  int m0 = 0;
  uint32_t rmask = 0;
  while (m0 < npos && kind[m0] == 'r') rmask |= 1u << bit[m0++];
  LLVMValueRef *B = ARENA_NEWN(g->arena, LLVMValueRef, n), *E = ARENA_NEWN(g->arena, LLVMValueRef, n);
  LLVMValueRef *T = ARENA_NEWN(g->arena, LLVMValueRef, n), *has = ARENA_NEWN(g->arena, LLVMValueRef, n);
  LLVMValueRef *X = ARENA_NEWN(g->arena, LLVMValueRef, n);
  for (uint32_t r = 0; r < n; r++) {
    if (r & rmask) continue;
    LLVMValueRef acc = NULL;
    for (uint32_t j = 0; j < 1u << m0; j++) {
      uint32_t jj = rev ? (1u << m0) - 1 - j : j, reg = r;
      for (int p = 0; p < m0; p++)
        if (jj >> p & 1) reg |= 1u << bit[p];
      acc = acc ? cg_elem(g, code, dt, acc, a->r[reg]) : a->r[reg];
      B[reg] = acc;
    }
    T[r] = acc;
  }
  /* 2. the positions above, one block doubling at a time. T is kept for the block's
   * canonical register (its done register bits clear), E for each run's (rmask clear). */
  uint32_t done = rmask;
  for (int p = m0; p < npos;) {
    if (kind[p] == 'r') {
      uint32_t hb = 1u << bit[p];
      for (uint32_t r = 0; r < n; r++) {
        if (r & (rmask | hb)) continue;
        uint32_t first = rev ? r | hb : r, second = rev ? r : r | hb;
        scan_prepend(g, code, dt, &E[second], &has[second], T[first & ~done], NULL);
      }
      for (uint32_t r = 0; r < n; r++)
        if (!(r & (done | hb))) T[r] = cg_elem(g, code, dt, T[r], T[r | hb]);
      done |= hb;
      p++;
    } else if (kind[p] == 'l') {
      LLVMValueRef later = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, g->lane, cg_i32(g, bit[p]), ""), g->i1, "");
      if (rev) later = LLVMBuildNot(g->b, later, "");
      for (uint32_t r = 0; r < n; r++)
        if (!(r & done)) {
          X[r] = shuffle_xor(g, T[r], dt, 1 << bit[p]);
          T[r] = cg_elem(g, code, dt, T[r], X[r]); /* the same in both lanes: the op commutes */
        }
      for (uint32_t r = 0; r < n; r++)
        if (!(r & rmask)) scan_prepend(g, code, dt, &E[r], &has[r], X[r & ~done], later);
      p++;
    } else {
      /* a run of m warp positions p..q-1: the 2^m blocks of a group, ordered in scan order
       * by u, leave their totals in shared memory laid out as the tile with the axis
       * shortened to len >> p (one slot per block) */
      int q = p;
      while (q < npos && kind[q] == 'w') q++;
      int m = q - p, M = 1 << m;
      LLVMValueRef u = cg_i32(g, 0);
      for (int i = 0; i < m; i++) {
        LLVMValueRef b = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->warp, cg_i32(g, bit[p + i]), ""), cg_i32(g, 1), "");
        u = LLVMBuildOr(g->b, u, LLVMBuildShl(g->b, b, cg_i32(g, i), ""), "");
      }
      if (rev) u = LLVMBuildXor(g->b, u, cg_i32(g, M - 1), "");
      int32_t shape[IR_MAX_RANK];
      int64_t stride = 1;
      for (int d = 0; d < at->rank; d++) shape[d] = d == axis ? len >> p : at->dims[d];
      for (int d = axis + 1; d < at->rank; d++) stride *= shape[d];
      cg_smem_reserve(g, (unsigned)((ir_type_numel(at) >> p) * cg_smem_elem_bytes(dt)));
      LLVMValueRef *slot0 = ARENA_NEWN(g->arena, LLVMValueRef, n);
      for (uint32_t r = 0; r < n; r++) {
        if (r & done) continue;
        LLVMValueRef c[IR_MAX_RANK];
        cg_coords(g, &l, r, c);
        c[axis] = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, c[axis], cg_i32(g, p), ""), cg_i32(g, ~(M - 1)), "");
        slot0[r] = cg_linear_index(g, c, shape, at->rank);
      }
      cg_barrier(g); /* earlier readers of the scratch are done */
      for (uint32_t r = 0; r < n; r++)
        if (!(r & done))
          cg_smem_store_elem(g, T[r], dt, LLVMBuildAdd(g->b, slot0[r], LLVMBuildMul(g->b, u, cg_i32(g, stride), ""), ""), 0);
      cg_barrier(g);
      for (uint32_t r = 0; r < n; r++) {
        if (r & done) continue;
        LLVMValueRef run = NULL, excl = NULL;
        for (int v = 0; v < M; v++) {
          LLVMValueRef t = cg_smem_load_elem(g, dt, LLVMBuildAdd(g->b, slot0[r], cg_i32(g, v * stride), ""), 0);
          run = run ? cg_elem(g, code, dt, run, t) : t;
          /* excl: the total of blocks 0 .. u-1 */
          if (v == 0) excl = run;
          else if (v < M - 1) excl = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntUGT, u, cg_i32(g, v), ""), run, excl, "");
        }
        X[r] = excl;
        T[r] = run;
      }
      LLVMValueRef later = LLVMBuildICmp(g->b, LLVMIntNE, u, cg_i32(g, 0), "");
      for (uint32_t r = 0; r < n; r++)
        if (!(r & rmask)) scan_prepend(g, code, dt, &E[r], &has[r], X[r & ~done], later);
      p = q;
    }
  }
  /* 3. the prefix in front of each element's own scan */
  for (uint32_t r = 0; r < n; r++) {
    uint32_t br = r & ~rmask;
    if (!has[br]) {
      out->r[r] = B[r];
      continue;
    }
    LLVMValueRef both = cg_elem(g, code, dt, E[br], B[r]);
    out->r[r] = const_true(has[br]) ? both : LLVMBuildSelect(g->b, has[br], both, B[r], "");
  }
}
