/* cg_smem.c - shared-memory buffers: allocation, swizzled addressing, register stores,
 * cp.async copies from global memory, and ldmatrix loads of Tensor Core fragments.
 *
 * Buffers (local_alloc) are laid out one after another at the start of dynamic shared
 * memory, each aligned to 128 bytes; the scratch area of layout changes and reductions
 * follows them, so the two never overlap. A buffer is [slots,] rows x cols with the last
 * dimension contiguous; its SHARED layout XORs the 16-byte chunk index of an element with
 * its row's phase: chunk' = chunk ^ ((row / per_phase) % max_phase), which spreads the
 * eight row addresses of one ldmatrix phase over eight different bank groups
 * (gpu-facts.md section 3).
 *
 * cp.async copies 16-byte chunks; a chunk that crosses the end of a row copies only its
 * valid bytes and zero-fills the rest (src-size), and a chunk outside the tensor copies
 * nothing and reads from the tensor base, which is always a valid address. When the
 * alignment facts do not allow 16-byte chunks (a 4095-wide matrix), the copy goes through
 * registers instead, with the same result in shared memory: short rows of 16-bit elements
 * (A tiles) as 16-byte chunks cut out of aligned blocks, other rows element by element.
 * Those register copies load at the copy and store later (cg_defer_store), at the next
 * barrier, wait or loop end, so that the loads' latency overlaps the matrix work.       */
#include <stdio.h>
#include <string.h>

#include "cg_internal.h"

struct sbuf {
  LLVMValueRef base; /* i32 byte offset of the buffer */
  int slots, rows, cols, eb;
  int vec, per_phase, max_phase;
  int panel;         /* elements per panel along the columns (cols when unpanelled) */
};

static void buffer_info(struct cg *g, ir_val buf, struct sbuf *s) {
  const struct ir_type *t = ir_vtype(g->f, buf);
  const struct ir_layout *l = &g->f->layouts.v[t->layout];
  s->base = cg_val(g, buf)->r[0];
  s->slots = t->rank == 3 ? t->dims[0] : 1;
  s->rows = t->dims[t->rank - 2];
  s->cols = t->dims[t->rank - 1];
  s->eb = ir_dtype_bytes((ir_dtype)t->dtype);
  s->vec = l->vec ? l->vec : 1;
  s->per_phase = l->per_phase ? l->per_phase : 1;
  s->max_phase = l->max_phase ? l->max_phase : 1;
  s->panel = l->panel ? l->panel : s->cols;
}

/* Byte offset (i32) of element (row, col) within one slot, before the buffer's base; row
 * and col are i32 values. Panels of `panel` columns are stored one after another, each
 * rows x panel. */
static LLVMValueRef swizzle_off(struct cg *g, const struct sbuf *s, LLVMValueRef row, LLVMValueRef col) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef pidx = NULL;
  if (s->panel != s->cols) {
    pidx = LLVMBuildUDiv(b, col, cg_i32(g, s->panel), "");
    col = LLVMBuildURem(b, col, cg_i32(g, s->panel), "");
  }
  LLVMValueRef phase = LLVMBuildURem(b, LLVMBuildUDiv(b, row, cg_i32(g, s->per_phase), ""), cg_i32(g, s->max_phase), "");
  LLVMValueRef chunk = LLVMBuildXor(b, LLVMBuildUDiv(b, col, cg_i32(g, s->vec), ""), phase, "");
  LLVMValueRef within = LLVMBuildURem(b, col, cg_i32(g, s->vec), "");
  LLVMValueRef e = LLVMBuildAdd(b, LLVMBuildMul(b, row, cg_i32(g, s->panel), ""),
                                LLVMBuildAdd(b, LLVMBuildMul(b, chunk, cg_i32(g, s->vec), ""), within, ""), "");
  if (pidx) e = LLVMBuildAdd(b, e, LLVMBuildMul(b, pidx, cg_i32(g, s->rows * s->panel), ""), "");
  return LLVMBuildMul(b, e, cg_i32(g, s->eb), "");
}

/* Byte offset (i32) of slot `slot` (NULL: the only one) of the buffer. */
static LLVMValueRef slot_base(struct cg *g, const struct sbuf *s, LLVMValueRef slot) {
  if (!slot || s->slots == 1) return s->base;
  return LLVMBuildAdd(g->b, s->base, LLVMBuildMul(g->b, slot, cg_i32(g, s->rows * s->cols * s->eb), ""), "");
}

/* Byte offset (i32) of element (row, col) of slot `slot`. */
static LLVMValueRef swizzled(struct cg *g, const struct sbuf *s, LLVMValueRef slot, LLVMValueRef row,
                             LLVMValueRef col) {
  return LLVMBuildAdd(g->b, slot_base(g, s, slot), swizzle_off(g, s, row, col), "");
}

/* Shared-memory pointer to byte `off` of slot `slot` (slot_ptr), or to its element (row,
 * col) (swizzled_ptr), formed as the slot's address (the same in every thread) plus the
 * thread's offset. Kept apart, the two stay an add that
 * ptxas folds into the access ([R + UR]) and the thread part stays loop invariant; summed
 * first, LLVM turns the add of disjoint bits into an or, and every access in a pipelined
 * loop recomputes its address (3-4 instructions per ldmatrix, PERF.md entry 13). */
static LLVMValueRef slot_ptr(struct cg *g, const struct sbuf *s, LLVMValueRef slot, LLVMValueRef off) {
  return LLVMBuildGEP2(g->b, g->i8, cg_smem_at(g, slot_base(g, s, slot)), &off, 1, "");
}

static LLVMValueRef swizzled_ptr(struct cg *g, const struct sbuf *s, LLVMValueRef slot, LLVMValueRef row,
                                 LLVMValueRef col) {
  return slot_ptr(g, s, slot, swizzle_off(g, s, row, col));
}

/* ---- allocation ----
 * The smem-alloc pass placed every buffer and mbarrier array (their `offset` attributes);
 * codegen reads the offsets and places the scratch of layout changes and reductions above
 * the allocations live at each op (cg_scratch_at). */

void cg_plan_smem(struct cg *g) {
  struct ir_func *f = g->f;
  ir_smem_liveness(f, g->arena, &g->smem_plan);
  unsigned top = ir_smem_top(&g->smem_plan);
  g->smem_scratch = (top + 127) & ~127u;
  g->smem_bytes = top;
}

void cg_defer_store(struct cg *g, LLVMValueRef ptr, LLVMValueRef value, LLVMValueRef pred, unsigned align) {
  struct pending_store ps = {ptr, value, pred, NULL, NULL, align};
  VEC_PUSH(g->arena, g->pending, ps);
}

/* The 16 bytes that start `shift` (even, 0..14) bytes into the 32 of blocks lo, hi
 * (<4 x i32> each): two rounds of selects by 8 and by 4 bytes, then a funnel shift by 2. */
static LLVMValueRef realign(struct cg *g, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef shift) {
  LLVMBuilderRef b = g->b;
  LLVMTypeRef i32 = g->i32;
  LLVMValueRef w[8], x[6], y[5];
  for (int k = 0; k < 4; k++) {
    w[k] = LLVMBuildExtractElement(b, lo, cg_i32(g, k), "");
    w[4 + k] = LLVMBuildExtractElement(b, hi, cg_i32(g, k), "");
  }
  LLVMValueRef by8 = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, shift, cg_i32(g, 8), ""), cg_i32(g, 0), "");
  LLVMValueRef by4 = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, shift, cg_i32(g, 4), ""), cg_i32(g, 0), "");
  LLVMValueRef bits = LLVMBuildMul(b, LLVMBuildAnd(b, shift, cg_i32(g, 2), ""), cg_i32(g, 8), ""); /* 0 or 16 */
  for (int k = 0; k < 6; k++) x[k] = LLVMBuildSelect(b, by8, w[k + 2], w[k], "");
  for (int k = 0; k < 5; k++) y[k] = LLVMBuildSelect(b, by4, x[k + 1], x[k], "");
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(i32, 4));
  for (int j = 0; j < 4; j++) {
    LLVMValueRef fa[3] = {y[j + 1], y[j], bits};
    v = LLVMBuildInsertElement(b, v, cg_intrinsic(g, "llvm.fshr", &i32, 1, fa, 3), cg_i32(g, j), "");
  }
  return v;
}

void cg_flush_stores(struct cg *g) {
  for (uint32_t i = 0; i < g->pending.n; i++) {
    struct pending_store *ps = &g->pending.v[i];
    if (ps->next) ps->value = realign(g, ps->value, ps->next, ps->shift);
    if (ps->pred) {
      LLVMBasicBlockRef doit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "st.deferred");
      LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "st.cont");
      LLVMBuildCondBr(g->b, ps->pred, doit, cont);
      LLVMPositionBuilderAtEnd(g->b, doit);
      LLVMSetAlignment(LLVMBuildStore(g->b, ps->value, ps->ptr), ps->align);
      LLVMBuildBr(g->b, cont);
      LLVMPositionBuilderAtEnd(g->b, cont);
    } else {
      LLVMSetAlignment(LLVMBuildStore(g->b, ps->value, ps->ptr), ps->align);
    }
  }
  if (g->pending.n && g->async_reads) cg_intrinsic(g, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
  g->pending.n = 0;
}

/* Scratch for a layout change or reduction at op `id` may overlap every allocation that is
 * dead there: it starts after the highest byte of those still live. */
void cg_scratch_at(struct cg *g, uint32_t id) {
  g->smem_scratch = (ir_smem_live_top(&g->smem_plan, id) + 127) & ~127u;
}

void cg_gen_local_alloc(struct cg *g, const struct ir_op *op) {
  cg_new_val(g, op->res, 1)->r[0] = cg_i32(g, op->i[0]);
}

static LLVMValueRef to_store_bits(struct cg *g, LLVMValueRef v, int eb) {
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeRef it = LLVMIntTypeInContext(g->ctx, (unsigned)(eb * 8));
  if (t == g->i1) return LLVMBuildZExt(g->b, v, it, "");
  if (LLVMGetTypeKind(t) == LLVMIntegerTypeKind) return v;
  return LLVMBuildBitCast(g->b, v, it, "");
}

/* Elements a thread moves to or from a buffer in one access: its runs along the last
 * dimension (16 bytes at most; a run starts at a multiple of its length). In an unswizzled
 * buffer a slot's row is a multiple of 16 bytes long; in a swizzled one a run stays inside
 * its 16-byte chunk (vec elements), whose elements the swizzle keeps in order. 1 for runs
 * under 4 bytes. */
static int access_run(const struct sbuf *s, const struct ll *l, int rank) {
  int run = cg_contiguous_run(l, rank, s->eb);
  if (s->max_phase != 1 || s->panel != s->cols) {
    if (run > s->vec) run = s->vec;
  } else if ((s->cols * s->eb) % 16) {
    return 1;
  }
  return run * s->eb >= 4 ? run : 1;
}

/* swizzle_off on numbers. */
static int64_t swizzle_num(const struct sbuf *s, int64_t row, int64_t col) {
  int64_t pidx = 0;
  if (s->panel != s->cols) {
    pidx = col / s->panel;
    col %= s->panel;
  }
  int64_t chunk = (col / s->vec) ^ (row / s->per_phase % s->max_phase);
  return (row * s->panel + chunk * s->vec + col % s->vec + pidx * s->rows * s->panel) * s->eb;
}

/* Addresses of a thread's registers of layout l in buffer s. Register r's element is the
 * thread's element (its register 0) plus r's register coordinates; where, in every lane
 * and warp, its offset is the thread's offset XOR x[r] plus a[r] (the swizzle folds r's
 * column chunks into the thread's chunk bits: XOR; whole swizzle periods of rows, panels:
 * add), the access is formed from one thread offset per distinct x, with a[r] a constant
 * the access folds ([R + imm]). Formed from each register's coordinates instead, LLVM
 * keeps one loop-invariant address per register (it does not distribute the XOR over the
 * add): 32 64-bit registers for a 64 x 128 f32 tile, spilled by attention_bwd_fused. */
struct reg_access {
  const struct sbuf *s;
  const struct ll *l;
  int rank;
  bool trans;               /* the tile's coordinates swapped (a transposed view) */
  LLVMValueRef base;        /* the thread's offset (register 0) */
  int64_t *x, *a;           /* per register; x[r] < 0: computed from r's coordinates */
};

/* The (row, col) of register r in lane `lane` of warp `warp`, as the buffer sees it. */
static void reg_elem(const struct reg_access *ra, uint32_t r, int lane, int warp, int64_t *row, int64_t *col) {
  int32_t c[IR_MAX_RANK];
  ll_reg_coord(ra->l, r, c);
  for (int k = 0; k < ra->l->nlane; k++)
    if (lane >> k & 1)
      for (int d = 0; d < ra->l->rank; d++) c[d] ^= ra->l->lane[k][d];
  for (int k = 0; k < ra->l->nwarp; k++)
    if (warp >> k & 1)
      for (int d = 0; d < ra->l->rank; d++) c[d] ^= ra->l->warp[k][d];
  if (ra->rank == 1) c[1] = c[0], c[0] = 0;
  *row = ra->trans ? c[1] : c[0];
  *col = ra->trans ? c[0] : c[1];
}

static void reg_access_init(struct cg *g, struct reg_access *ra, const struct sbuf *s, const struct ll *l, int rank,
                            bool trans) {
  ra->s = s, ra->l = l, ra->rank = rank, ra->trans = trans, ra->base = NULL;
  uint32_t n = ll_num_regs(l);
  ra->x = ARENA_NEWN(g->arena, int64_t, n);
  ra->a = ARENA_NEWN(g->arena, int64_t, n);
  int lanes = 1 << l->nlane, warps = 1 << l->nwarp;
  int64_t tmask = 0, row, col;
  for (int w = 0; w < warps; w++)
    for (int ln = 0; ln < lanes; ln++) {
      reg_elem(ra, 0, ln, w, &row, &col);
      tmask |= swizzle_num(s, row, col);
    }
  for (uint32_t r = 0; r < n; r++) {
    reg_elem(ra, r, 0, 0, &row, &col);
    int64_t o = swizzle_num(s, row, col), x = o & tmask, a = o & ~tmask; /* element (0, 0) is at 0 */
    bool ok = true;
    for (int w = 0; w < warps && ok; w++)
      for (int ln = 0; ln < lanes && ok; ln++) {
        int64_t r0, c0;
        reg_elem(ra, 0, ln, w, &r0, &c0);
        reg_elem(ra, r, ln, w, &row, &col);
        ok = swizzle_num(s, row, col) == ((swizzle_num(s, r0, c0) ^ x) + a);
      }
    ra->x[r] = ok ? x : -1;
    ra->a[r] = a;
  }
}

/* Byte offset of register r's element, from its coordinates. */
static LLVMValueRef reg_off(struct cg *g, const struct reg_access *ra, uint32_t r) {
  LLVMValueRef c[IR_MAX_RANK];
  cg_coords(g, ra->l, r, c);
  if (ra->rank == 1) c[1] = c[0], c[0] = cg_i32(g, 0);
  return swizzle_off(g, ra->s, ra->trans ? c[1] : c[0], ra->trans ? c[0] : c[1]);
}

/* Shared-memory pointer to register r's element in slot `slot`. */
static LLVMValueRef reg_access_ptr(struct cg *g, struct reg_access *ra, LLVMValueRef slot, uint32_t r) {
  if (ra->x[r] < 0) return slot_ptr(g, ra->s, slot, reg_off(g, ra, r));
  if (!ra->base) ra->base = reg_off(g, ra, 0);
  LLVMValueRef off = ra->x[r] ? LLVMBuildXor(g->b, ra->base, cg_i32(g, (int32_t)ra->x[r]), "") : ra->base;
  LLVMValueRef p = slot_ptr(g, ra->s, slot, off);
  if (!ra->a[r]) return p;
  LLVMValueRef k = cg_i32(g, (int32_t)ra->a[r]);
  return LLVMBuildGEP2(g->b, g->i8, p, &k, 1, "");
}

void cg_gen_local_store(struct cg *g, const struct ir_op *op) {
  struct sbuf s;
  buffer_info(g, op->args[0], &s);
  LLVMValueRef slot = cg_scalar_i32(g, op->args[1]);
  struct cgval *v = cg_val(g, op->args[2]);
  struct ll l;
  if (g->failed || !cg_layout_of(g, op->args[2], &l)) return;
  int rank = ir_vtype(g->f, op->args[2])->rank; /* a 1-d tile: row 0 of the buffer (row-cache) */
  int run = access_run(&s, &l, rank);
  LLVMTypeRef it = LLVMIntTypeInContext(g->ctx, (unsigned)(s.eb * 8));
  struct reg_access ra;
  reg_access_init(g, &ra, &s, &l, rank, false);
  for (uint32_t r = 0; r < v->n; r += (uint32_t)run) {
    LLVMValueRef x = to_store_bits(g, v->r[r], s.eb);
    if (run > 1) { /* the run as one vector store */
      x = LLVMGetUndef(LLVMVectorType(it, (unsigned)run));
      for (int e = 0; e < run; e++)
        x = LLVMBuildInsertElement(g->b, x, to_store_bits(g, v->r[r + (uint32_t)e], s.eb), cg_i32(g, e), "");
    }
    LLVMValueRef st = LLVMBuildStore(g->b, x, reg_access_ptr(g, &ra, slot, r));
    LLVMSetAlignment(st, (unsigned)(s.eb * run));
  }
  /* ordinary stores read by wgmma (the async proxy) need a proxy fence before the barrier */
  if (g->async_reads) cg_intrinsic(g, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
}

/* ---- ldmatrix ---- */

/* The warp part of a layout's coordinates (lane bases excluded). */
static void warp_coords(struct cg *g, const struct ll *l, LLVMValueRef *coord) {
  for (int d = 0; d < l->rank; d++) {
    LLVMValueRef acc = cg_i32(g, 0);
    for (int k = 0; k < l->nwarp; k++)
      if (l->warp[k][d]) {
        LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->warp, cg_i32(g, k), ""), cg_i32(g, 1), "");
        acc = LLVMBuildOr(g->b, acc, LLVMBuildMul(g->b, bit, cg_i32(g, l->warp[k][d]), ""), "");
      }
    coord[d] = acc;
  }
}

static LLVMValueRef ldmatrix(struct cg *g, int n, bool trans, LLVMValueRef ptr) {
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16", n, trans ? ".trans" : "");
  LLVMTypeRef ovl = g->sptr;
  return cg_intrinsic(g, name, &ovl, 1, &ptr, 1);
}

/* Splits a 32-bit ldmatrix result into its two 16-bit elements (low half first). */
static void unpack2(struct cg *g, LLVMValueRef w, LLVMTypeRef et, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l16 = LLVMBuildTrunc(g->b, w, g->i16, "");
  LLVMValueRef h16 = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, w, cg_i32(g, 16), ""), g->i16, "");
  *lo = LLVMBuildBitCast(g->b, l16, et, "");
  *hi = LLVMBuildBitCast(g->b, h16, et, "");
}


/* The lane's part of an ldmatrix address in operand coordinates (d0, d1): lane L supplies
 * row L % 8 of matrix L / 8, matrices in the order of gen_ldmatrix. */
static void ldmatrix_lane(int lane, bool view_trans, int *d0, int *d1) {
  int li = lane & 7, j_lo = lane >> 3 & 1, j_hi = lane >> 4;
  *d0 = view_trans ? 8 * j_lo : li + 8 * j_lo;
  *d1 = view_trans ? li + 8 * j_hi : 8 * j_hi;
}

/* Whether, in every lane of every warp of layout l, the offset of the ldmatrix block at
 * buffer offset (dr, dc) is the offset of block (0, 0) XOR x, plus a. */
static bool block_by_xor(const struct sbuf *s, const struct ll *l, bool view_trans, int dr, int dc, int64_t x,
                         int64_t a) {
  for (int w = 0; w < 1 << l->nwarp; w++) {
    int wc[2] = {0, 0};
    for (int k = 0; k < l->nwarp; k++)
      if (w >> k & 1) wc[0] |= l->warp[k][0], wc[1] |= l->warp[k][1];
    for (int lane = 0; lane < 32; lane++) {
      int d0, d1;
      ldmatrix_lane(lane, view_trans, &d0, &d1);
      int row = view_trans ? d1 + wc[1] : d0 + wc[0], col = view_trans ? d0 + wc[0] : d1 + wc[1];
      if (((swizzle_num(s, row, col) ^ x) + a) != swizzle_num(s, row + dr, col + dc)) return false;
    }
  }
  return true;
}

/* Loads the fragments of a 16-bit mma operand. For each 16x16 (A) or 16x16 (two n8 tiles
 * of B) block of the thread's registers one ldmatrix.x4 fetches four 8x8 matrices; lane L
 * supplies row L%8 of matrix L/8. `view` maps operand coordinates to buffer coordinates
 * (trans swaps them), and the ldmatrix form is .trans when the operand's fast dimension in
 * registers (k for A, k for B) is not the buffer's contiguous dimension. */
static bool gen_ldmatrix(struct cg *g, const struct ir_op *op, const struct ll *l, const struct sbuf *s,
                         LLVMValueRef slot, int op_idx, struct cgval *out, int kslice) {
  bool view_trans = op->i[0] != 0;
  LLVMTypeRef et = cg_reg_type(g, (ir_dtype)ir_vtype(g->f, op->res)->dtype);
  LLVMValueRef wc[IR_MAX_RANK];
  warp_coords(g, l, wc);
  LLVMValueRef lane = g->lane;
  LLVMValueRef li = LLVMBuildAnd(g->b, lane, cg_i32(g, 7), "");          /* row within matrix */
  LLVMValueRef lj = LLVMBuildLShr(g->b, lane, cg_i32(g, 3), "");         /* matrix 0..3 */
  LLVMValueRef j_lo = LLVMBuildAnd(g->b, lj, cg_i32(g, 1), "");
  LLVMValueRef j_hi = LLVMBuildLShr(g->b, lj, cg_i32(g, 1), "");
  uint32_t n = ll_num_regs(l);
  bool *done = ARENA_NEWN(g->arena, bool, n);
  /* The lane's address of the block at origin (0, 0) in buffer coordinates (lrow + warp
   * part, lcol + warp part; ldmatrix_lane) and its offset xbase. The other blocks' offsets
   * derive from xbase with constants where that holds in every lane (block_by_xor): a
   * column offset of whole 16-byte chunks clear of the thread's chunk bits turns the
   * swizzle (chunk XOR row phase) of the sum into an XOR of the base offset with a
   * constant, and a row offset of whole swizzle periods is an add. Computed from scratch,
   * each block's offset was a loop-invariant register of its own (LLVM does not distribute
   * the XOR over the add): ~20 registers at head dim 128, where attention's BN=64 spilled
   * (PERF.md 17). wc[view_trans] is the warp part of the buffer's rows, wc[!view_trans]
   * of its columns. */
  LLVMValueRef lrow = LLVMBuildAdd(g->b, li, LLVMBuildShl(g->b, view_trans ? j_hi : j_lo, cg_i32(g, 3), ""), "");
  LLVMValueRef lcol = LLVMBuildShl(g->b, view_trans ? j_lo : j_hi, cg_i32(g, 3), "");
  LLVMValueRef xbase = swizzle_off(g, s, LLVMBuildAdd(g->b, lrow, wc[view_trans], ""), LLVMBuildAdd(g->b, lcol, wc[!view_trans], ""));
  for (uint32_t r = 0; r < n; r++) {
    if (done[r]) continue;
    int32_t c[IR_MAX_RANK];
    ll_reg_coord(l, r, c);
    /* block origin: A: (row & ~15, k & ~15); B: (k & ~15, n & ~15) */
    int32_t o0 = c[0] & ~15, o1 = c[1] & ~15;
    if (kslice >= 0 && (op_idx == 0 ? o1 : o0) != kslice) continue; /* another k-slice */
    /* four 8x8 matrices in register order, as (d0, d1) offsets of element pairs */
    /* A: a0 (0,0) a1 (8,0) a2 (0,8) a3 (8,8); B: b0 (0,0) b1 (8,0) of n-tile o1, then of
     * n-tile o1+8 */
    static const int32_t m[4][2] = {{0, 0}, {8, 0}, {0, 8}, {8, 8}};
    int regs[4][2];
    int count = 0;
    for (int q = 0; q < 4; q++) {
      int32_t a = o0 + m[q][0], b = o1 + m[q][1];
      if (op_idx == 0) {
        regs[q][0] = ll_reg_at(l, a, b);
        regs[q][1] = ll_reg_at(l, a, b + 1);
      } else {
        regs[q][0] = ll_reg_at(l, a, b);
        regs[q][1] = ll_reg_at(l, a + 1, b);
      }
      if (regs[q][0] >= 0 && regs[q][1] >= 0) count++;
    }
    /* B blocks may hold only one n8 tile (x2); A blocks are always complete */
    int nmat = count == 4 ? 4 : count == 2 && regs[0][0] >= 0 && regs[1][0] >= 0 ? 2 : 0;
    if (!nmat) return false;
    /* this block's origin in the buffer */
    int32_t dr = view_trans ? o1 : o0, dc = view_trans ? o0 : o1;
    int64_t x = (int64_t)(dc % s->panel / s->vec) * s->vec * s->eb;
    int64_t add = ((int64_t)dr * s->panel + (int64_t)(dc / s->panel) * s->rows * s->panel) * s->eb;
    LLVMValueRef addr;
    if (block_by_xor(s, l, view_trans, dr, dc, x, add))
      addr = slot_ptr(g, s, slot, LLVMBuildAdd(g->b, LLVMBuildXor(g->b, xbase, cg_i32(g, x), ""), cg_i32(g, add), ""));
    else
      addr = swizzled_ptr(g, s, slot, LLVMBuildAdd(g->b, LLVMBuildAdd(g->b, cg_i32(g, dr), lrow, ""), wc[view_trans], ""),
                          LLVMBuildAdd(g->b, LLVMBuildAdd(g->b, cg_i32(g, dc), lcol, ""), wc[!view_trans], ""));
    /* the instruction transposes when registers pair along the buffer's rows */
    bool hw_trans = op_idx == 0 ? view_trans : !view_trans;
    LLVMValueRef res = ldmatrix(g, nmat, hw_trans, addr);
    for (int q = 0; q < nmat; q++) {
      LLVMValueRef w = LLVMBuildExtractValue(g->b, res, (unsigned)q, "");
      LLVMValueRef lo, hi;
      unpack2(g, w, et, &lo, &hi);
      out->r[regs[q][0]] = lo;
      out->r[regs[q][1]] = hi;
      done[regs[q][0]] = done[regs[q][1]] = true;
    }
  }
  return true;
}

void cg_gen_local_load(struct cg *g, const struct ir_op *op) {
  struct sbuf s;
  buffer_info(g, op->args[0], &s);
  LLVMValueRef slot = cg_scalar_i32(g, op->args[1]);
  struct ll l;
  if (g->failed || !cg_layout_of(g, op->res, &l)) return;
  const struct ir_type *rt = ir_vtype(g->f, op->res);
  struct cgval *out = cg_new_val(g, op->res, ll_num_regs(&l));
  const struct ir_layout *e = &g->f->layouts.v[rt->layout];
  if (e->kind == IR_LAYOUT_DOT_OP && g->lazy_load[op->res]) return; /* loaded by the dot */
  if (e->kind == IR_LAYOUT_DOT_OP && ir_dtype_bytes((ir_dtype)rt->dtype) == 2 && s.vec == 8 &&
      gen_ldmatrix(g, op, &l, &s, slot, e->op_idx, out, -1))
    return;
  /* generic: element by element */
  LLVMTypeRef et = cg_reg_type(g, (ir_dtype)rt->dtype);
  LLVMTypeRef it = LLVMIntTypeInContext(g->ctx, (unsigned)(s.eb * 8));
  int run = op->i[0] ? 1 : access_run(&s, &l, rt->rank);
  struct reg_access ra;
  reg_access_init(g, &ra, &s, &l, rt->rank, op->i[0] != 0);
  for (uint32_t r = 0; r < out->n; r += (uint32_t)run) {
    LLVMTypeRef lt = run > 1 ? LLVMVectorType(it, (unsigned)run) : it;
    LLVMValueRef w = LLVMBuildLoad2(g->b, lt, reg_access_ptr(g, &ra, slot, r), "");
    LLVMSetAlignment(w, (unsigned)(s.eb * run));
    for (int k = 0; k < run; k++) {
      LLVMValueRef v = run > 1 ? LLVMBuildExtractElement(g->b, w, cg_i32(g, k), "") : w;
      out->r[r + (uint32_t)k] = et == g->i1 ? LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(it, 0, 0), "")
                                : LLVMGetTypeKind(et) == LLVMIntegerTypeKind ? v : LLVMBuildBitCast(g->b, v, et, "");
    }
  }
}


/* Smallest P such that P rounds of R rows span whole periods of the swizzle phase: round
 * i then stores at the address of round i mod P plus a constant (all rounds compute their
 * own when that P is over 64, which the passes' buffers never need). */
static int phase_rounds(const struct sbuf *s, int R, int rounds) {
  int period = s->per_phase * s->max_phase, P = 1;
  while ((P * R) % period != 0) P++;
  return P > rounds || P > 64 ? rounds : P;
}

/* Shared-memory byte address of round i of a register copy (rows `row`, column `col`):
 * rounds below P compute it (and keep it in dst0), later ones add a constant to round
 * i mod P's. */
static LLVMValueRef round_dst(struct cg *g, const struct sbuf *s, LLVMValueRef slot, LLVMValueRef row,
                              LLVMValueRef col, int i, int R, int P, LLVMValueRef *dst0) {
  if (i >= P) return LLVMBuildAdd(g->b, dst0[i % P], cg_i32(g, (int64_t)(i / P) * P * R * s->panel * s->eb), "");
  LLVMValueRef d = swizzled(g, s, slot, row, col);
  if (i < 64) dst0[i] = d;
  return d;
}

/* True when the whole tile lies inside the tensor (and the fixed indices are in range). */
static LLVMValueRef tile_inside(struct cg *g, const struct sbuf *s, LLVMValueRef *start, LLVMValueRef *size,
                                int drow, int dcol, LLVMValueRef fixed_ok) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef in = LLVMBuildAnd(b, fixed_ok, LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, start[drow], cg_i64(g, s->rows), ""), size[drow], ""), "");
  return LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, start[dcol], cg_i64(g, s->cols), ""), size[dcol], ""), "");
}

/* clamp(size - start, 0, n) as i32: how many of a tile's n rows (columns) lie inside */
static LLVMValueRef inside(struct cg *g, LLVMValueRef size, LLVMValueRef start, int n) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef v = LLVMBuildSub(b, size, start, "");
  v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, cg_i64(g, 0), ""), cg_i64(g, 0), v, "");
  v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, v, cg_i64(g, n), ""), cg_i64(g, n), v, "");
  return LLVMBuildTrunc(b, v, g->i32, "");
}

/* Global addresses of the rounds of a copy: ADDR_CHAINS independent chains, round i on
 * chain i % ADDR_CHAINS, each stepping ADDR_CHAINS rounds at a time. One chain made every
 * load wait for the 64-bit add before it (the warps stalled on it, PERF.md entry 13). */
enum { ADDR_CHAINS = 4 };

static LLVMValueRef chain_addr(struct cg *g, LLVMValueRef *chain, int i, LLVMValueRef src, LLVMValueRef step) {
  int c = i % ADDR_CHAINS;
  if (i < ADDR_CHAINS)
    chain[c] = i ? LLVMBuildAdd(g->b, src, LLVMBuildMul(g->b, step, cg_i64(g, i), ""), "") : src;
  else
    chain[c] = LLVMBuildAdd(g->b, chain[c], LLVMBuildMul(g->b, step, cg_i64(g, ADDR_CHAINS), ""), "");
  return chain[c];
}

/* Element copies when a round of `threads` elements covers whole rows (threads % cols ==
 * 0): each thread keeps one column and steps R = threads / cols rows per round, so the
 * column test, the global address and the shared-memory address are computed once and
 * then advanced by constants. The swizzle phase of a row repeats every per_phase *
 * max_phase rows, so round i stores at the address of round i mod P plus a constant,
 * where P rounds span a whole number of phase periods. Per element this leaves one
 * 64-bit add, one row test, the load and the store. */
static void gen_element_rows(struct cg *g, const struct sbuf *s, LLVMValueRef slot, struct cg_tensor *t,
                             LLVMValueRef *start, LLVMValueRef *size, int drow, int dcol, LLVMValueRef fixed_ok,
                             LLVMValueRef fixed_off, LLVMValueRef tid, int threads, const char *text,
                             const char *cons, LLVMTypeRef rt, LLVMTypeRef it) {
  LLVMBuilderRef b = g->b;
  int R = threads / s->cols, rounds = (s->rows + R - 1) / R, eb = s->eb;
  int P = phase_rounds(s, R, rounds);
  LLVMValueRef row0 = LLVMBuildUDiv(b, tid, cg_i32(g, s->cols), "");
  LLVMValueRef col = LLVMBuildURem(b, tid, cg_i32(g, s->cols), "");
  LLVMValueRef gcol = LLVMBuildAdd(b, start[dcol], LLVMBuildZExt(b, col, g->i64, ""), "");
  LLVMValueRef col_ok = LLVMBuildAnd(b, fixed_ok, LLVMBuildICmp(b, LLVMIntULT, gcol, size[dcol], ""), "");
  LLVMValueRef left = inside(g, size[drow], start[drow], s->rows);
  LLVMValueRef grow0 = LLVMBuildAdd(b, start[drow], LLVMBuildZExt(b, row0, g->i64, ""), "");
  LLVMValueRef off = LLVMBuildAdd(b, fixed_off, LLVMBuildAdd(b, LLVMBuildMul(b, grow0, t->stride[drow], ""),
                                                             LLVMBuildMul(b, gcol, t->stride[dcol], ""), ""), "");
  LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildPtrToInt(b, t->ptr, g->i64, ""), LLVMBuildMul(b, off, cg_i64(g, eb), ""), "");
  LLVMValueRef step = LLVMBuildMul(b, t->stride[drow], cg_i64(g, (int64_t)R * eb), "");
  LLVMValueRef dst0[64], chain[ADDR_CHAINS];
  /* A tile wholly inside the tensor (every program but those on the last row or column
   * of tiles) loads without tests or zero fill; the edge tiles take the tested path.
   * Only for R > 1 (a thread walks several short rows, as in an A tile [BM, BK]): with
   * R == 1 (one column over every row, a B tile [BK, BN]) the split measured slower on
   * the H200 (4095^3 f16: 172 vs 209 TFLOP/s, PERF.md entry 11). */
  bool split = R > 1 && s->rows % R == 0;
  LLVMValueRef *vf = arena_alloc(g->arena, sizeof *vf * (size_t)rounds * 2), *vs = vf + rounds;
  LLVMBasicBlockRef fast_end = NULL, slow_end = NULL, join = NULL;
  if (split) {
    LLVMValueRef whole = tile_inside(g, s, start, size, drow, dcol, fixed_ok);
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "el.whole");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "el.edge");
    join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "el.join");
    LLVMBuildCondBr(b, whole, fast, slow);
    LLVMPositionBuilderAtEnd(b, fast);
    for (int i = 0; i < rounds; i++) {
      vf[i] = LLVMBuildLoad2(b, it, LLVMBuildIntToPtr(b, chain_addr(g, chain, i, src, step), g->gptr, ""), "");
      LLVMSetAlignment(vf[i], (unsigned)eb);
    }
    fast_end = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, slow);
  }
  /* rows left below this thread's first: round i is inside when i * R < rem, one 32-bit
   * compare per element (through an opaque copy: LLVM otherwise widens the compares back to
   * 64 bits, two instructions each) */
  LLVMValueRef rem = LLVMBuildSub(b, left, row0, "");
  rem = cg_asm(g, g->i32, "mov.b32 $0, $1;", "=r,r", &rem, 1, false);
  for (int i = 0; i < rounds; i++) {
    LLVMValueRef ok = LLVMBuildAnd(b, col_ok, LLVMBuildICmp(b, LLVMIntSGT, rem, cg_i32(g, i * R), ""), "");
    LLVMValueRef args[2] = {chain_addr(g, chain, i, src, step), LLVMBuildZExt(b, ok, g->i32, "")};
    LLVMValueRef val = cg_asm(g, rt, text, cons, args, 2, true);
    vs[i] = rt != it ? LLVMBuildTrunc(b, val, it, "") : val;
  }
  if (split) {
    slow_end = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, join);
    for (int i = 0; i < rounds; i++) { /* the phis first: they lead the block */
      LLVMValueRef in_v[2] = {vf[i], vs[i]};
      LLVMBasicBlockRef in_b[2] = {fast_end, slow_end};
      vf[i] = LLVMBuildPhi(b, it, "");
      LLVMAddIncoming(vf[i], in_v, in_b, 2);
    }
  } else {
    memcpy(vf, vs, sizeof *vf * (size_t)rounds);
  }
  for (int i = 0; i < rounds; i++) {
    LLVMValueRef row = LLVMBuildAdd(b, row0, cg_i32(g, i * R), ""), val = vf[i];
    LLVMValueRef dst = round_dst(g, s, slot, row, col, i, R, P, dst0);
    /* the last round may run past the tile's rows: store only inside it */
    LLVMValueRef in = (i + 1) * R > s->rows ? LLVMBuildICmp(b, LLVMIntULT, row, cg_i32(g, s->rows), "") : NULL;
    cg_defer_store(g, cg_smem_at(g, dst), val, in, (unsigned)eb);
  }
}

/* 16-bit elements in rows that are only 2-byte aligned (a 4095-wide matrix; the tensor's
 * base is 16-byte aligned): each thread moves 8-element chunks. A chunk's 16 bytes lie in
 * the two aligned 16-byte blocks around it; both are loaded whole and the chunk is cut out
 * with two rounds of selects (by 8 and by 4 bytes) and a funnel shift (by 2), then stored
 * as one 16-byte vector: 2 loads and 1 store per 8 elements instead of 8 and 8 (the
 * element copies are bound by those memory instructions, PERF.md entry 11). Tiles on the
 * tensor's edge load their chunks element by element with tests instead. Needs
 * threads % (cols / 8) == 0 and whole rounds. */
static void gen_realigned_copy(struct cg *g, const struct sbuf *s, LLVMValueRef slot, struct cg_tensor *t,
                               LLVMValueRef *start, LLVMValueRef *size, int drow, int dcol, LLVMValueRef fixed_ok,
                               LLVMValueRef fixed_off, LLVMValueRef tid, int threads) {
  LLVMBuilderRef b = g->b;
  int cpr = s->cols / 8, R = threads / cpr, rounds = s->rows * cpr / threads;
  LLVMTypeRef i32 = g->i32, v4 = LLVMVectorType(g->i32, 4);
  LLVMValueRef row0 = LLVMBuildUDiv(b, tid, cg_i32(g, cpr), "");
  LLVMValueRef col = LLVMBuildMul(b, LLVMBuildURem(b, tid, cg_i32(g, cpr), ""), cg_i32(g, 8), "");
  LLVMValueRef gcol = LLVMBuildAdd(b, start[dcol], LLVMBuildZExt(b, col, g->i64, ""), "");
  LLVMValueRef grow0 = LLVMBuildAdd(b, start[drow], LLVMBuildZExt(b, row0, g->i64, ""), "");
  LLVMValueRef off = LLVMBuildAdd(b, fixed_off, LLVMBuildAdd(b, LLVMBuildMul(b, grow0, t->stride[drow], ""), gcol, ""), "");
  LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildPtrToInt(b, t->ptr, g->i64, ""), LLVMBuildMul(b, off, cg_i64(g, 2), ""), "");
  LLVMValueRef step = LLVMBuildMul(b, t->stride[drow], cg_i64(g, (int64_t)R * 2), "");
  LLVMValueRef whole = tile_inside(g, s, start, size, drow, dcol, fixed_ok);
  LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rc.whole");
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rc.edge");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rc.join");
  LLVMBuildCondBr(b, whole, fast, slow);
  /* per round: the block at or before the chunk, the next block and the chunk's offset
   * into the first (the edge path assembles its chunk in the first, offset 0) */
  LLVMValueRef *v = arena_alloc(g->arena, sizeof *v * (size_t)rounds * 6);
  LLVMValueRef *lo_f = v, *hi_f = v + rounds, *sh_f = v + 2 * rounds, *lo_s = v + 3 * rounds;
  LLVMValueRef *lo = v + 4 * rounds, *hi = v + 5 * rounds;

  /* interior: two aligned blocks per chunk; the second only when the chunk reaches it.
   * The cut is made when the stores are (after the matrix work is issued), so that the
   * loads' latency is hidden behind it. */
  LLVMPositionBuilderAtEnd(b, fast);
  LLVMTypeRef ts[4] = {i32, i32, i32, i32};
  LLVMTypeRef st4 = LLVMStructTypeInContext(g->ctx, ts, 4, 0);
  LLVMValueRef a = src;
  for (int i = 0; i < rounds; i++, a = LLVMBuildAdd(b, a, step, "")) {
    LLVMValueRef al = LLVMBuildAnd(b, a, cg_i64(g, ~(int64_t)15), "");
    sh_f[i] = LLVMBuildAnd(b, LLVMBuildTrunc(b, a, i32, ""), cg_i32(g, 15), "");
    lo_f[i] = LLVMBuildLoad2(b, v4, LLVMBuildIntToPtr(b, al, g->gptr, ""), "");
    LLVMSetAlignment(lo_f[i], 16);
    LLVMValueRef args[2] = {al, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, sh_f[i], cg_i32(g, 0), ""), i32, "")};
    LLVMValueRef b1 = cg_asm(g, st4, "{\n .reg .pred p;\n setp.ne.b32 p, $5, 0;\n @p ld.global.v4.b32 {$0, $1, $2, $3}, [$4+16];\n}",
                             "=r,=r,=r,=r,l,r", args, 2, false);
    hi_f[i] = LLVMGetUndef(v4);
    for (int k = 0; k < 4; k++) hi_f[i] = LLVMBuildInsertElement(b, hi_f[i], LLVMBuildExtractValue(b, b1, (unsigned)k, ""), cg_i32(g, k), "");
  }
  LLVMBasicBlockRef fast_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, join);

  /* edge: element by element, zeros outside the tensor */
  LLVMPositionBuilderAtEnd(b, slow);
  LLVMValueRef left = inside(g, size[drow], start[drow], s->rows);
  LLVMValueRef nvalid = LLVMBuildSub(b, inside(g, size[dcol], start[dcol], s->cols), col, "");
  nvalid = LLVMBuildSelect(b, fixed_ok, nvalid, cg_i32(g, 0), "");
  a = src;
  for (int i = 0; i < rounds; i++, a = LLVMBuildAdd(b, a, step, "")) {
    LLVMValueRef rowok = LLVMBuildICmp(b, LLVMIntULT, LLVMBuildAdd(b, row0, cg_i32(g, i * R), ""), left, "");
    LLVMValueRef e[8];
    for (int k = 0; k < 8; k++) {
      char text[160];
      snprintf(text, sizeof text, "{\n .reg .pred p;\n setp.ne.b32 p, $2, 0;\n mov.b16 $0, 0;\n @p ld.global.b16 $0, [$1+%d];\n}", 2 * k);
      LLVMValueRef ok = LLVMBuildAnd(b, rowok, LLVMBuildICmp(b, LLVMIntSGT, nvalid, cg_i32(g, k), ""), "");
      LLVMValueRef args[2] = {a, LLVMBuildZExt(b, ok, i32, "")};
      e[k] = LLVMBuildZExt(b, cg_asm(g, g->i16, text, "=h,l,r", args, 2, true), i32, "");
    }
    LLVMValueRef w = LLVMGetUndef(v4);
    for (int j = 0; j < 4; j++)
      w = LLVMBuildInsertElement(b, w, LLVMBuildOr(b, e[2 * j], LLVMBuildShl(b, e[2 * j + 1], cg_i32(g, 16), ""), ""), cg_i32(g, j), "");
    lo_s[i] = w;
  }
  LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, join);

  LLVMPositionBuilderAtEnd(b, join);
  LLVMBasicBlockRef in_b[2] = {fast_end, slow_end};
  for (int i = 0; i < rounds; i++) {
    LLVMValueRef in_lo[2] = {lo_f[i], lo_s[i]}, in_hi[2] = {hi_f[i], LLVMGetUndef(v4)}, in_sh[2] = {sh_f[i], cg_i32(g, 0)};
    lo[i] = LLVMBuildPhi(b, v4, "");
    LLVMAddIncoming(lo[i], in_lo, in_b, 2);
    hi[i] = LLVMBuildPhi(b, v4, "");
    LLVMAddIncoming(hi[i], in_hi, in_b, 2);
    sh_f[i] = LLVMBuildPhi(b, i32, "");
    LLVMAddIncoming(sh_f[i], in_sh, in_b, 2);
  }
  int P = phase_rounds(s, R, rounds);
  LLVMValueRef dst0[64];
  for (int i = 0; i < rounds; i++) {
    LLVMValueRef d = round_dst(g, s, slot, LLVMBuildAdd(b, row0, cg_i32(g, i * R), ""), col, i, R, P, dst0);
    struct pending_store ps = {cg_smem_at(g, d), lo[i], NULL, hi[i], sh_f[i], 16};
    VEC_PUSH(g->arena, g->pending, ps);
  }
}

/* ---- async copies ---- */

/* Global address of the element (row, col) of a slice whose corner is at `corner`. */
static LLVMValueRef element_at(struct cg *g, const struct cg_tensor *t, LLVMValueRef corner, int drow, int dcol,
                               LLVMValueRef row, LLVMValueRef col, int eb) {
  LLVMValueRef off = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, LLVMBuildZExt(g->b, row, g->i64, ""), t->stride[drow], ""),
                                  LLVMBuildMul(g->b, LLVMBuildZExt(g->b, col, g->i64, ""), t->stride[dcol], ""), "");
  off = LLVMBuildMul(g->b, off, cg_i64(g, eb), "");
  return LLVMBuildGEP2(g->b, g->i8, corner, &off, 1, "");
}

struct gather_dst {
  const struct sbuf *s;
  LLVMValueRef slot;
};

static LLVMValueRef gather_dst_at(struct cg *g, void *ud, LLVMValueRef row, LLVMValueRef col) {
  const struct gather_dst *d = ud;
  return swizzled_ptr(g, d->s, d->slot, row, col);
}

void cg_gen_async_copy(struct cg *g, const struct ir_op *op) {
  struct ir_func *f = g->f;
  struct sbuf s;
  buffer_info(g, op->args[0], &s);
  LLVMValueRef slot = cg_scalar_i32(g, op->args[1]);
  if (op->i[0] == 0) { /* the gather form: per-element indices (cg_mem.c) */
    struct gather_dst d = {&s, slot};
    cg_gather_to_shared(g, op, s.vec * s.eb, gather_dst_at, &d);
    return;
  }
  ir_val tv = op->args[2];
  const struct ir_value *tval = &f->values.v[tv];
  const struct ir_param *p = &f->params.v[tval->index];
  struct cg_tensor *t = &g->tensors[tval->index];
  const struct ir_type *tt = ir_vtype(f, tv);
  uint64_t mask = (uint64_t)op->i[0];
  int rank = tt->rank, eb = s.eb;
  int drow = -1, dcol = -1;
  LLVMValueRef start[IR_MAX_RANK], size[IR_MAX_RANK];
  LLVMValueRef fixed_ok = LLVMConstInt(g->i1, 1, 0), fixed_off = cg_i64(g, 0);
  for (int d = 0; d < rank; d++) {
    start[d] = LLVMBuildSExt(g->b, cg_val(g, op->args[3 + d])->r[0], g->i64, "");
    if (IR_DIM_IS_SYM(tt->dims[d]))
      size[d] = LLVMBuildSExt(g->b, cg_val(g, IR_DIM_SYM_VALUE(tt->dims[d]))->r[0], g->i64, "");
    else
      size[d] = cg_i64(g, tt->dims[d]);
    if (mask >> d & 1) {
      if (drow < 0) drow = d;
      else dcol = d;
    } else {
      fixed_ok = LLVMBuildAnd(g->b, fixed_ok, LLVMBuildICmp(g->b, LLVMIntULT, start[d], size[d], ""), "");
      fixed_off = LLVMBuildAdd(g->b, fixed_off, LLVMBuildMul(g->b, start[d], t->stride[d], ""), "");
    }
  }
  if (drow < 0 || dcol < 0) {
    cg_fail(g, "async_copy needs a 2-d slice");
    return;
  }
  if (g->failed) return;
  int threads = 32 * f->warps;
  /* 16-byte chunks need: contiguous columns, 16-byte aligned base and row stride, and a
   * column start that is a multiple of the chunk */
  int v = 16 / eb;
  bool wide = p->facts.stride1[dcol] && p->facts.align >= 16 && s.cols % v == 0 &&
              cg_divisibility(g, op->args[3 + dcol]) % v == 0;
  for (int d = 0; d < rank && wide; d++)
    if (d != dcol && !p->facts.div16[d]) wide = false;
  LLVMValueRef tid = LLVMBuildOr(g->b, LLVMBuildShl(g->b, g->warp, cg_i32(g, 5), ""), g->lane, "");
  LLVMValueRef base_int = LLVMBuildPtrToInt(g->b, t->ptr, g->i64, "");
  if (wide) {
    int chunks_per_row = s.cols / v, total = s.rows * chunks_per_row;
    /* The source address is split in a part the same in every thread (the slice's corner,
     * computed once per copy) and the thread's part (loop invariant in a pipelined loop),
     * and the bounds tests compare corner + thread index in 32 bits: with i32 corners and
     * sizes, a sum past INT32_MAX wraps negative and fails the unsigned test, as it must. */
    LLVMValueRef r0 = cg_scalar_i32(g, op->args[3 + drow]), c0 = cg_scalar_i32(g, op->args[3 + dcol]);
    LLVMValueRef rsz = LLVMBuildTrunc(g->b, size[drow], g->i32, ""), csz = LLVMBuildTrunc(g->b, size[dcol], g->i32, "");
    LLVMValueRef corner = LLVMBuildAdd(g->b, fixed_off, LLVMBuildAdd(g->b, LLVMBuildMul(g->b, start[drow], t->stride[drow], ""),
                                                                      LLVMBuildMul(g->b, start[dcol], t->stride[dcol], ""), ""), "");
    LLVMValueRef ubase = LLVMBuildGEP2(g->b, g->i8, t->ptr, (LLVMValueRef[]){LLVMBuildMul(g->b, corner, cg_i64(g, eb), "")}, 1, "");
    /* when every round covers whole rows, a thread keeps one column and its rounds are a
     * uniform row step apart: one 64-bit thread offset per copy, not one per round (the
     * registers matter in attention's loop: PERF.md entry 13) */
    LLVMValueRef p0 = NULL, d0 = NULL, chain[2] = {NULL, NULL}, rstep = NULL;
    if (threads % chunks_per_row == 0) {
      /* the source of round i0 + 2 * threads from that of round i0, in two chains: the step
       * (2 * threads / chunks_per_row rows) is one 64-bit register, where the products of
       * the stride with each round's row offset were one each, all held across a pipelined
       * loop (14 registers of attention's head-dim-128 loop: PERF.md 17) */
      rstep = LLVMBuildMul(g->b, t->stride[drow], cg_i64(g, (int64_t)(2 * threads / chunks_per_row) * eb), "");
      LLVMValueRef row = LLVMBuildUDiv(g->b, tid, cg_i32(g, chunks_per_row), "");
      LLVMValueRef col = LLVMBuildMul(g->b, LLVMBuildURem(g->b, tid, cg_i32(g, chunks_per_row), ""), cg_i32(g, v), "");
      p0 = element_at(g, t, ubase, drow, dcol, row, col, eb);
      /* rounds a whole number of swizzle periods apart keep the thread's swizzle: one
       * shared-memory offset, the rounds at constant distances from it (LLVM does not
       * see through the phase's remainder and kept one offset per round: PERF.md 17) */
      if ((threads / chunks_per_row) % (s.per_phase * s.max_phase) == 0) d0 = swizzle_off(g, &s, row, col);
    }
    for (int i0 = 0; i0 < total; i0 += threads) {
      LLVMValueRef chunk = LLVMBuildAdd(g->b, tid, cg_i32(g, i0), "");
      LLVMValueRef row = LLVMBuildUDiv(g->b, chunk, cg_i32(g, chunks_per_row), "");
      LLVMValueRef col = LLVMBuildMul(g->b, LLVMBuildURem(g->b, chunk, cg_i32(g, chunks_per_row), ""), cg_i32(g, v), "");
      LLVMValueRef grow = LLVMBuildAdd(g->b, r0, row, ""), gcol = LLVMBuildAdd(g->b, c0, col, "");
      LLVMValueRef ok = LLVMBuildAnd(g->b, fixed_ok, LLVMBuildICmp(g->b, LLVMIntULT, grow, rsz, ""), "");
      ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULT, gcol, csz, ""), "");
      /* valid bytes of this chunk: min(v, size - gcol) * eb (clamped before the multiply,
       * which could overflow 32 bits for a row of over 2^29 elements) */
      LLVMValueRef left = LLVMBuildSub(g->b, csz, gcol, "");
      left = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, left, cg_i32(g, v), ""), left, cg_i32(g, v), "");
      LLVMValueRef nbytes = LLVMBuildMul(g->b, left, cg_i32(g, eb), "");
      nbytes = LLVMBuildSelect(g->b, ok, nbytes, cg_i32(g, 0), "");
      /* a masked chunk reads nothing (src-size 0: the 16 bytes are zero filled), so its
       * address need not be valid and is not clamped */
      LLVMValueRef srcp;
      if (p0) { /* round i0 is one row step below round i0 - 2 * threads (two chains) */
        int r = i0 / threads;
        if (r < 2) {
          LLVMValueRef step = LLVMBuildMul(g->b, t->stride[drow], cg_i64(g, (int64_t)(i0 / chunks_per_row) * eb), "");
          chain[r] = LLVMBuildGEP2(g->b, g->i8, p0, &step, 1, "");
        } else {
          chain[r % 2] = LLVMBuildGEP2(g->b, g->i8, chain[r % 2], &rstep, 1, "");
        }
        srcp = chain[r % 2];
      } else {
        srcp = element_at(g, t, ubase, drow, dcol, row, col, eb);
      }
      LLVMValueRef dst;
      if (d0) {
        dst = slot_ptr(g, &s, slot, LLVMBuildAdd(g->b, d0, cg_i32(g, (int64_t)(i0 / chunks_per_row) * s.panel * eb), ""));
      } else {
        dst = swizzled_ptr(g, &s, slot, row, col);
      }
      LLVMValueRef args[3] = {dst, srcp, nbytes};
      LLVMValueRef inrange = total - i0 < threads ? LLVMBuildICmp(g->b, LLVMIntULT, tid, cg_i32(g, total - i0), "") : NULL;
      if (inrange) {
        /* the last round has fewer chunks than threads: guard the copy */
        LLVMBasicBlockRef doit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cp.tail");
        LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cp.cont");
        LLVMBuildCondBr(g->b, inrange, doit, cont);
        LLVMPositionBuilderAtEnd(g->b, doit);
        cg_intrinsic(g, "llvm.nvvm.cp.async.cg.shared.global.16.s", NULL, 0, args, 3);
        LLVMBuildBr(g->b, cont);
        LLVMPositionBuilderAtEnd(g->b, cont);
      } else {
        cg_intrinsic(g, "llvm.nvvm.cp.async.cg.shared.global.16.s", NULL, 0, args, 3);
      }
    }
    return;
  }
  /* 16-bit rows of at most 64 elements (A tiles [BM, BK]) are cut out of aligned blocks;
   * longer rows (B tiles [BK, BN]) measured slower that way on the H200 (B-only unaligned
   * 4095x4095x8192: 228 vs 262 TFLOP/s with element copies, PERF.md entry 11) */
  if (eb == 2 && p->facts.stride1[dcol] && p->facts.align >= 16 && s.cols % 8 == 0 && s.cols <= 64 &&
      threads % (s.cols / 8) == 0 && (s.rows * (s.cols / 8)) % threads == 0) {
    gen_realigned_copy(g, &s, slot, t, start, size, drow, dcol, fixed_ok, fixed_off, tid, threads);
    return;
  }
  /* element by element through registers (unaligned rows) */
  int total = s.rows * s.cols;
  char text[256], cons[32];
  int bits = eb * 8, rbits = bits < 16 ? 16 : bits;
  snprintf(text, sizeof text, "{\n .reg .pred p;\n setp.ne.b32 p, $2, 0;\n mov.b%d $0, 0;\n @p ld.global.%s%d $0, [$1];\n}",
           rbits, bits == 8 ? "u" : "b", bits);
  snprintf(cons, sizeof cons, "=%s,l,r", bits <= 16 ? "h" : bits == 32 ? "r" : "l");
  LLVMTypeRef rt = LLVMIntTypeInContext(g->ctx, (unsigned)rbits);
  LLVMTypeRef it = LLVMIntTypeInContext(g->ctx, (unsigned)bits);
  if (threads % s.cols == 0) {
    gen_element_rows(g, &s, slot, t, start, size, drow, dcol, fixed_ok, fixed_off, tid, threads, text, cons, rt, it);
    return;
  }
  for (int i0 = 0; i0 < total; i0 += threads) {
    LLVMValueRef e = LLVMBuildAdd(g->b, tid, cg_i32(g, i0), "");
    LLVMValueRef row = LLVMBuildUDiv(g->b, e, cg_i32(g, s.cols), "");
    LLVMValueRef col = LLVMBuildURem(g->b, e, cg_i32(g, s.cols), "");
    LLVMValueRef grow = LLVMBuildAdd(g->b, start[drow], LLVMBuildZExt(g->b, row, g->i64, ""), "");
    LLVMValueRef gcol = LLVMBuildAdd(g->b, start[dcol], LLVMBuildZExt(g->b, col, g->i64, ""), "");
    LLVMValueRef ok = LLVMBuildAnd(g->b, fixed_ok, LLVMBuildICmp(g->b, LLVMIntULT, grow, size[drow], ""), "");
    ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULT, gcol, size[dcol], ""), "");
    if (total - i0 < threads) ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULT, tid, cg_i32(g, total - i0), ""), "");
    LLVMValueRef off = LLVMBuildAdd(g->b, fixed_off, LLVMBuildAdd(g->b, LLVMBuildMul(g->b, grow, t->stride[drow], ""),
                                                                   LLVMBuildMul(g->b, gcol, t->stride[dcol], ""), ""), "");
    LLVMValueRef src = LLVMBuildAdd(g->b, base_int, LLVMBuildMul(g->b, off, cg_i64(g, eb), ""), "");
    LLVMValueRef args[2] = {src, LLVMBuildZExt(g->b, ok, g->i32, "")};
    LLVMValueRef val = cg_asm(g, rt, text, cons, args, 2, true);
    if (rt != it) val = LLVMBuildTrunc(g->b, val, it, "");
    LLVMValueRef dst = swizzled_ptr(g, &s, slot, row, col);
    cg_defer_store(g, dst, val, total - i0 < threads ? LLVMBuildICmp(g->b, LLVMIntULT, tid, cg_i32(g, total - i0), "") : NULL,
                   (unsigned)eb);
  }
}

/* ---- wgmma ---- */

/* A shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address
 * >> 4, leading and stride byte offsets >> 4, swizzle mode (1 = 128B, 2 = 64B, 3 = 32B). */
static LLVMValueRef descriptor(struct cg *g, LLVMValueRef addr, int lbo, int sbo, int mode) {
  LLVMValueRef a = LLVMBuildZExt(g->b, LLVMBuildLShr(g->b, LLVMBuildAnd(g->b, addr, cg_i32(g, 0x3FFFF), ""), cg_i32(g, 4), ""), g->i64, "");
  uint64_t hi = ((uint64_t)(lbo >> 4) & 0x3FFF) << 16 | ((uint64_t)(sbo >> 4) & 0x3FFF) << 32 | (uint64_t)mode << 62;
  return LLVMBuildOr(g->b, a, LLVMConstInt(g->i64, hi, 0), "");
}

static int swizzle_mode(int row_bytes) { return row_bytes >= 128 ? 1 : row_bytes == 64 ? 2 : 3; }

/* Byte address of the (unswizzled) corner (r, c) of a buffer for a descriptor start:
 * slot base + panel of c + row r + column within the panel. */
static LLVMValueRef corner(struct cg *g, const struct sbuf *s, LLVMValueRef slot, LLVMValueRef r, int c) {
  int p = c / s->panel, cc = c % s->panel;
  LLVMValueRef e = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, r, cg_i32(g, s->panel), ""), cg_i32(g, (int64_t)p * s->rows * s->panel + cc), "");
  if (s->slots > 1) e = LLVMBuildAdd(g->b, e, LLVMBuildMul(g->b, slot, cg_i32(g, s->rows * s->cols), ""), "");
  LLVMValueRef byte = LLVMBuildAdd(g->b, s->base, LLVMBuildMul(g->b, e, cg_i32(g, s->eb), ""), "");
  /* the descriptor takes the shared-window address of the byte */
  LLVMValueRef ptr = cg_smem_at(g, byte);
  return LLVMBuildTrunc(g->b, LLVMBuildPtrToInt(g->b, ptr, g->i64, ""), g->i32, "");
}

/* Descriptor of the 16-deep k slice `k0` of an operand buffer, for rows/columns starting
 * at `mn0` (A: rows of M; B: columns of N). kmajor: the buffer is [MN, K] with K
 * contiguous; otherwise [K, MN] with MN contiguous in 64-element panels. */
static LLVMValueRef operand_desc(struct cg *g, const struct sbuf *s, LLVMValueRef slot, bool kmajor, LLVMValueRef mn0,
                                 int k0) {
  int row_bytes = s->panel * s->eb;
  if (kmajor) {
    /* rows are M (or N); 8-row swizzle atoms, SBO = 8 rows; k steps move within a row */
    LLVMValueRef addr = corner(g, s, slot, mn0, k0);
    return descriptor(g, addr, 16, 8 * row_bytes, swizzle_mode(row_bytes));
  }
  /* rows are K; MN in 64-element panels: LBO = distance between panels, SBO = 8 rows */
  LLVMValueRef pnl = LLVMBuildUDiv(g->b, mn0, cg_i32(g, s->panel), "");
  LLVMValueRef e = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, pnl, cg_i32(g, s->rows * s->panel), ""), cg_i32(g, (int64_t)k0 * s->panel), "");
  if (s->slots > 1) e = LLVMBuildAdd(g->b, e, LLVMBuildMul(g->b, slot, cg_i32(g, s->rows * s->cols), ""), "");
  LLVMValueRef byte = LLVMBuildAdd(g->b, s->base, LLVMBuildMul(g->b, e, cg_i32(g, s->eb), ""), "");
  LLVMValueRef addr = LLVMBuildTrunc(g->b, LLVMBuildPtrToInt(g->b, cg_smem_at(g, byte), g->i64, ""), g->i32, "");
  return descriptor(g, addr, s->rows * row_bytes, 8 * row_bytes, swizzle_mode(row_bytes));
}


/* An accumulator that starts from a tile of repeated values (a broadcast row or column:
 * attention backward's LSE folded into the scores' accumulator) or of constants: the asm
 * ties each register to an output, so LLVM copies the repeated ones, between the fence and
 * the wgmma, where ptxas then waits for any wgmma in flight first (C7517). Each such
 * register gets its own copy in front of the fence instead, for this wgmma and for the
 * later ones of its block up to the next wait whose accumulators are already computed (the
 * IR computes them before the first: wgmma-async), in place, so that their copies are not
 * made after this wgmma is in flight either. A zero accumulator is not read. */
static void untie_accumulators(struct cg *g, const struct ir_op *op) {
  struct ir_func *f = g->f;
  const struct ir_block *b = &f->blocks.v[op->block];
  for (uint32_t i = ir_op_index(f, (uint32_t)(op - f->ops.v)); i < b->ops.n; i++) {
    const struct ir_op *w = &f->ops.v[b->ops.v[i]];
    if (w->code == IR_WGMMA_WAIT) break;
    if (w->code != IR_WGMMA) continue;
    double c0 = 1.0;
    ir_val acc = w->args[4];
    if ((ir_value_const_float(f, acc, &c0) && c0 == 0.0) || !g->vals[acc].r) continue;
    struct cgval *C = &g->vals[acc];
    bool computed = true; /* (a later wgmma accumulating this one's result: not yet) */
    for (uint32_t r = 0; r < C->n; r++) computed = computed && C->r[r];
    for (uint32_t r = 0; r < C->n && computed; r++) {
      bool copy = LLVMIsConstant(C->r[r]);
      for (uint32_t q = 0; q < r && !copy; q++) copy = C->r[q] == C->r[r];
      if (copy) C->r[r] = cg_asm(g, g->f32, "mov.b32 $0, $1;", "=f,f", &C->r[r], 1, true);
    }
  }
}

void cg_gen_wgmma(struct cg *g, const struct ir_op *op) {
  struct ir_func *f = g->f;
  struct ll lc;
  if (!cg_layout_of(g, op->res, &lc)) return;
  const struct ir_type *ct = ir_vtype(f, op->res), *bt = ir_vtype(f, op->args[2]);
  const struct ir_type *at = ir_vtype(f, op->args[0]);
  bool a_smem = at->layout && f->layouts.v[at->layout].kind == IR_LAYOUT_SHARED;
  bool a_trans = op->i[0] & 1, b_kmajor = (op->i[0] & 2) != 0;
  bool bf16 = bt->dtype == DT_BF16;
  int M = ct->dims[0], N = ct->dims[1];
  int K = b_kmajor ? bt->dims[bt->rank - 1] : bt->dims[bt->rank - 2];
  /* warps along M (4 per warpgroup) and warpgroups along N (layout_assign: 1 unless the
   * rows are fewer than the warpgroups' 64 each); each warpgroup takes N / gn columns */
  const struct ir_layout *cl = &f->layouts.v[ct->layout];
  int W = cl->warps_per_cta[0], gn = cl->warps_per_cta[1], gm = W / 4;
  N /= gn;
  int NI = N > 256 ? 256 : N;
  struct sbuf sb, sa;
  buffer_info(g, op->args[2], &sb);
  LLVMValueRef bslot = cg_scalar_i32(g, op->args[3]);
  LLVMValueRef aslot = cg_scalar_i32(g, op->args[1]);
  struct cgval *C = cg_val(g, op->args[4]);
  struct cgval *Areg = NULL;
  struct ll la;
  if (a_smem) {
    buffer_info(g, op->args[0], &sa);
  } else {
    Areg = cg_val(g, op->args[0]);
    if (!cg_layout_of(g, op->args[0], &la)) return;
  }
  if (g->failed) return;
  uint32_t n = ll_num_regs(&lc);
  struct cgval *out = cg_new_val(g, op->res, n);
  LLVMValueRef wg = LLVMBuildLShr(g->b, g->warp, cg_i32(g, 2), ""); /* warpgroup index */
  LLVMValueRef wgn = cg_i32(g, 0);
  if (gn > 1) { /* warpgroup wg covers rows (wg % gm) * 64 and columns (wg / gm) * N */
    wgn = LLVMBuildMul(g->b, LLVMBuildUDiv(g->b, wg, cg_i32(g, gm), ""), cg_i32(g, N), "");
    wg = LLVMBuildURem(g->b, wg, cg_i32(g, gm), "");
  }
  int nacc = NI / 2;
  /* the instruction text */
  char *text = arena_alloc(g->arena, 8192), *cons = arena_alloc(g->arena, 4096);
  const char *ty = bf16 ? "bf16" : "f16";
  int t = 0, cn = 0;
  t += snprintf(text + t, 8192 - (size_t)t, "{\n.reg .pred p;\nsetp.ne.b32 p, $%d, 0;\n", 2 * nacc + (a_smem ? 2 : 5));
  t += snprintf(text + t, 8192 - (size_t)t, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", NI, ty, ty);
  for (int i = 0; i < nacc; i++) t += snprintf(text + t, 8192 - (size_t)t, "%s$%d", i ? ", " : "", i);
  if (a_smem)
    t += snprintf(text + t, 8192 - (size_t)t, "}, $%d, $%d, p, 1, 1, %d, %d;\n}", 2 * nacc, 2 * nacc + 1, a_trans ? 1 : 0,
                  b_kmajor ? 0 : 1);
  else
    t += snprintf(text + t, 8192 - (size_t)t, "}, {$%d, $%d, $%d, $%d}, $%d, p, 1, 1, %d;\n}", 2 * nacc, 2 * nacc + 1,
                  2 * nacc + 2, 2 * nacc + 3, 2 * nacc + 4, b_kmajor ? 0 : 1);
  for (int i = 0; i < nacc; i++) cn += snprintf(cons + cn, 4096 - (size_t)cn, "=f,");
  for (int i = 0; i < nacc; i++) cn += snprintf(cons + cn, 4096 - (size_t)cn, "%d,", i);
  cn += snprintf(cons + cn, 4096 - (size_t)cn, a_smem ? "l,l,r" : "r,r,r,r,l,r");
  LLVMTypeRef *ft = ARENA_NEWN(g->arena, LLVMTypeRef, nacc);
  for (int i = 0; i < nacc; i++) ft[i] = g->f32;
  LLVMTypeRef rt = LLVMStructTypeInContext(g->ctx, ft, (unsigned)nacc, 0);
  LLVMValueRef *args = ARENA_NEWN(g->arena, LLVMValueRef, nacc + 8);
  int *idx = ARENA_NEWN(g->arena, int, nacc);
  int mrep = M / (16 * W);
  double c0 = 1.0;
  bool zero_acc = ir_value_const_float(f, op->args[4], &c0) && c0 == 0.0;
  /* register A fragments (attention's P), packed before the fence: a register written
   * between the fence and the wgmma that reads it makes ptxas fence again (C7519) */
  LLVMValueRef *apack = NULL; /* 4 registers per (repeat, 16-deep k-slice) */
  int kslices = K / 16;
  if (!a_smem) {
    apack = ARENA_NEWN(g->arena, LLVMValueRef, (size_t)(mrep * kslices * 4) + 1);
    for (int mr = 0; mr < mrep; mr++)
      for (int k0 = 0; k0 < K; k0 += 16) {
        int32_t rb = mr * 16 * W;
        /* a0..a3 of the warp's 16 rows: the mma.sync A fragment */
        int ai[8] = {ll_reg_at(&la, rb, k0), ll_reg_at(&la, rb, k0 + 1), ll_reg_at(&la, rb + 8, k0), ll_reg_at(&la, rb + 8, k0 + 1),
                     ll_reg_at(&la, rb, k0 + 8), ll_reg_at(&la, rb, k0 + 9), ll_reg_at(&la, rb + 8, k0 + 8), ll_reg_at(&la, rb + 8, k0 + 9)};
        for (int q = 0; q < 8; q++)
          if (ai[q] < 0) {
            cg_fail(g, "wgmma: A fragment (%d,%d) missing from the register layout", rb, k0);
            return;
          }
        for (int q = 0; q < 4; q++) {
          LLVMValueRef pr = cg_pack_pair(g, Areg->r[ai[2 * q]], Areg->r[ai[2 * q + 1]], bf16);
          apack[(mr * kslices + k0 / 16) * 4 + q] = LLVMTypeOf(pr) == g->i32 ? pr : LLVMBuildBitCast(g->b, pr, g->i32, "");
        }
      }
  }
  untie_accumulators(g, op);
  for (uint32_t r = 0; r < n; r++) out->r[r] = C->r[r];
  cg_intrinsic(g, "llvm.nvvm.wgmma.fence.sync.aligned", NULL, 0, NULL, 0);
  for (int mr = 0; mr < mrep; mr++)
    for (int nc = 0; nc < N; nc += NI) {
      /* accumulator registers of this instruction: d[4j + q] */
      int32_t rb = mr * 16 * W;
      for (int j = 0; j < NI / 8; j++) {
        int q4[4] = {ll_reg_at(&lc, rb, nc + 8 * j), ll_reg_at(&lc, rb, nc + 8 * j + 1), ll_reg_at(&lc, rb + 8, nc + 8 * j),
                     ll_reg_at(&lc, rb + 8, nc + 8 * j + 1)};
        for (int q = 0; q < 4; q++) {
          if (q4[q] < 0) {
            cg_fail(g, "wgmma: accumulator element (%d,%d) missing from the layout", rb, nc + 8 * j);
            return;
          }
          idx[4 * j + q] = q4[q];
        }
      }
      for (int k0 = 0; k0 < K; k0 += 16) {
        /* a zero accumulator (attention's scores) is not read: the first step runs with
         * scale-d = 0 on undefined registers, so no zeros are copied in each iteration */
        bool fresh = zero_acc && k0 == 0;
        for (int i = 0; i < nacc; i++) args[i] = fresh ? LLVMGetUndef(g->f32) : out->r[idx[i]];
        int na = nacc;
        /* A rows of this warpgroup and repeat */
        LLVMValueRef arow = LLVMBuildAdd(g->b, cg_i32(g, rb), LLVMBuildMul(g->b, wg, cg_i32(g, 64), ""), "");
        if (a_smem) {
          args[na++] = operand_desc(g, &sa, aslot, !a_trans, arow, k0);
        } else {
          for (int q = 0; q < 4; q++) args[na++] = apack[(mr * kslices + k0 / 16) * 4 + q];
        }
        args[na++] = operand_desc(g, &sb, bslot, b_kmajor, LLVMBuildAdd(g->b, wgn, cg_i32(g, nc), ""), k0);
        args[na++] = cg_i32(g, fresh ? 0 : 1); /* scale-d: accumulate, or D = A B */
        LLVMValueRef res = cg_asm(g, rt, text, cons, args, (unsigned)na, true);
        for (int i = 0; i < nacc; i++) out->r[idx[i]] = LLVMBuildExtractValue(g->b, res, (unsigned)i, "");
      }
    }
  cg_intrinsic(g, "llvm.nvvm.wgmma.commit_group.sync.aligned", NULL, 0, NULL, 0);
  /* (The deferred stores of synchronous copies are not flushed here, between commit and
   * wait, though that would overlap them with the Tensor Cores: ptxas 12.8 and 12.9, the
   * JIT of CUDA 12 drivers, crash on that PTX for many tile shapes; PERF.md entry 11.) */
  if (op->i[1]) return; /* async: the group stays in flight until a wgmma_wait */
  LLVMValueRef zero = LLVMConstInt(g->i64, 0, 0);
  cg_intrinsic(g, "llvm.nvvm.wgmma.wait_group.sync.aligned", NULL, 0, &zero, 1);
}

/* ---- fragments loaded per k-slice ----
 * A local_load into an mma operand layout whose only user is an mma.sync dot in the same
 * block, with no write to its buffer in between, is not emitted where it stands: the dot
 * loads each 16-deep k-slice right before the mma instructions that use it, so only one
 * slice of fragments is live at a time (FlashAttention-2's schedule). */

void cg_plan_lazy_loads(struct cg *g) {
  struct ir_func *f = g->f;
  g->lazy_load = ARENA_NEWN(g->arena, uint32_t, f->values.n + 1);
  uint32_t *uses = ir_use_counts(f, g->arena);
  for (uint32_t i = 1; i < f->ops.n; i++) {
    /* smem-alloc kept the buffer alive to the dot (smem.h), so no other allocation reuses
     * its bytes in between; a write to the buffer itself still rules the load out */
    uint32_t user = ir_smem_load_at_dot(f, i, uses);
    if (!user) continue;
    const struct ir_op *op = &f->ops.v[i];
    const struct ir_block *b = &f->blocks.v[op->block];
    bool between = false, clobbered = false;
    for (uint32_t k = 0; k < b->ops.n; k++) {
      uint32_t id = b->ops.v[k];
      if (id == i) between = true;
      else if (id == user) break;
      else if (between) {
        const struct ir_op *w = &f->ops.v[id];
        if (ir_smem_writes(f, id, op->args[0])) clobbered = true;
        if (w->nregions) clobbered = true; /* keep it simple: nothing nested in between */
      }
    }
    if (!clobbered) g->lazy_load[op->res] = i;
  }
}

void cg_load_k_slice(struct cg *g, ir_val v, int kb) {
  const struct ir_op *op = &g->f->ops.v[g->lazy_load[v]];
  struct sbuf s;
  buffer_info(g, op->args[0], &s);
  LLVMValueRef slot = cg_scalar_i32(g, op->args[1]);
  struct ll l;
  if (g->failed || !cg_layout_of(g, v, &l)) return;
  struct cgval *out = &g->vals[v];
  const struct ir_layout *e = &g->f->layouts.v[ir_vtype(g->f, v)->layout];
  if (!gen_ldmatrix(g, op, &l, &s, slot, e->op_idx, out, kb)) cg_fail(g, "ldmatrix of a k-slice failed");
}
