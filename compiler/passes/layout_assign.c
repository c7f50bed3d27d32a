/* layout_assign.c - give every tile value a layout (which thread holds which element) and
 * insert convert_layout where a value must change hands.
 *
 * Needs: generic IR (after the machine-independent pipeline). Guarantees: every tile of
 * rank >= 1 has a layout encoding in its type; elementwise operands share their result's
 * layout; loop-carried values and if results have one layout on every path; constants and
 * splats are re-created in whatever layout a user needs instead of being converted.
 *
 * Two phases. The analysis computes a wanted layout for every value, forward in program
 * order, iterating to a fixed point because a loop-carried value initialised by a constant
 * takes the layout its loop body produces (acc = zeros; acc += a @ b gives acc the dot's
 * layout, not the constant's default). Then the rewrite sets the types and inserts the
 * conversions that the wanted layouts imply.
 *
 * Anchors: loads, gathers and constants get the default blocked layout of their shape (16-byte
 * vectors along the contiguous last dimension); dots get the accumulator layout of the
 * dot tier (blocked for FMA); reductions give slices of their input; expand_dims of a slice
 * gives back the slice's parent, so `x - max(x, axis=1)[:, None]` needs no conversion.
 * The indices and predicate of a gather, scatter or atomic, and a store's predicate, are
 * put in the data's layout (index arithmetic is rematerialized there, not converted).
 * Scans keep their operand's layout, whatever it is (codegen scans any linear layout
 * along any axis), so a running sum of a dot's accumulator stays in registers.
 *
 *   %3 = load %A[..] : tile<64x64xf16>               %3 = load ... : tile<64x64xf16, #1>
 *   %4 = reduce_max %3 {axis=1} : tile<64xf16>  =>    %4 = reduce_max ... : tile<64xf16, #2>
 *   %5 = expand_dims %4 {axis=1} : tile<64x1xf16>    %5 = expand_dims ... : tile<64x1xf16, #1>
 *   with #2 = slice<dim=1, parent=#1>                                                       */
#include <string.h>

#include "layout.h"
#include "passes.h"

struct assign {
  struct ir_func *f;
  uint16_t *want;    /* value -> wanted layout (0: none / scalar) */
  uint8_t *dot_in;   /* value -> 1 when a dot operand comes from it (mark_dot_inputs) */
  uint16_t *opreq;   /* op -> required layout of operand 0 (expand_dims, trans, dot), 0 = as is */
  uint16_t *opreq1;  /* op -> required layout of operand 1 (dot) */
  uint32_t nops;     /* size of the op maps (ops created by the rewrite have none) */
  bool changed;
  /* the last load or gather re-issued for each value (sink), in which layout and block:
   * a second use in the same layout and block reads the same one (K and V of a paged
   * cache index their rows with one block-table row) */
  ir_val *sunk;
  uint16_t *sunk_layout;
  uint32_t *sunk_block;
  uint32_t nsunk;
};

static const struct ir_type *T(struct assign *A, ir_val v) { return ir_vtype(A->f, v); }
static bool is_tile(struct assign *A, ir_val v) {
  const struct ir_type *t = T(A, v);
  return t->kind == IR_TY_TILE && t->rank > 0;
}

static uint16_t default_layout(struct assign *A, const struct ir_type *t) {
  struct ir_layout l = ll_default_blocked(t->rank, t->dims, A->f->warps, ir_dtype_bytes(t->dtype));
  return ir_layout_intern(A->f, &l);
}

/* Loads whose elements can only move one at a time (cg_mem.c finds no vector width: the
 * last dimension is not contiguous, or the base or another stride is off 16 bytes, as in a
 * 4095-wide f16 matrix) get one element per thread along the last dimension, so that a
 * warp's access covers consecutive addresses. With the default layout's eight elements per
 * thread, each of a warp's eight scalar loads would touch 16-byte-strided addresses over
 * 512 bytes, and the eight miss in L1 together. Dot operands keep the default (their
 * staging into shared memory has its own copy paths). */
static bool scalar_only(struct assign *A, const struct ir_op *op) {
  const struct ir_param *p = ir_param_of(A->f, op->args[0]);
  if (!p || op->i[1] >= 16) return false; /* align: placed at a 16-byte boundary (row-align) */
  const struct ir_type *tt = T(A, op->args[0]);
  int D = -1; /* the tile's last dimension in the tensor: the highest sliced one */
  for (int d = 0; d < tt->rank; d++)
    if ((uint64_t)op->i[0] >> d & 1) D = d;
  return D >= 0 && !ir_facts_allow_vector(p, tt, D, 2 * ir_dtype_bytes(tt->dtype));
}

/* The layout of a 2-d gather that smem-stage will copy into shared memory with cp.async
 * (a dot operand, gather=1): the default layout's lanes run along a row first (16 per
 * row for 256-byte rows), so each thread's chunks lie in many rows and each chunk pays its
 * row's index work (a block-table entry, a bounds check, a 64-bit address). Here the lanes
 * of a row cover one 128-byte line per warp access (8 lanes for 16-byte chunks) and the
 * rest go down the rows; a thread's chunks repeat along its rows, 128 bytes apart, so a
 * row's index work is shared by its chunks. Fewer lanes per row (32 bytes: each row's
 * index once per thread) issue fewer instructions but split a warp's access over 16 lines,
 * and measured slower (PERF.md 75: decode's split kernel 87 us at 32 bytes, 80 at 64, 71.3
 * at 128, 73 with the default layout). */
static uint16_t gather_rows_layout(struct assign *A, const struct ir_type *t) {
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_BLOCKED;
  l.rank = 2;
  l.order[0] = 1;
  l.order[1] = 0;
  int R = t->dims[0], C = t->dims[1], eb = ir_dtype_bytes(t->dtype);
  int vec = 16 / (eb > 0 ? eb : 4);
  while (vec > 1 && vec > C) vec /= 2;
  int tc = 1, tr = 1;
  while (tc * vec * eb < 128 && tc * 2 * vec <= C) tc *= 2;
  while (tc * tr < 32 && tr * 2 <= R) tr *= 2;
  while (tc * tr < 32 && tc * 2 * vec <= C) tc *= 2;
  tr *= 32 / (tc * tr); /* lanes left over replicate down the rows */
  int wr = 1, wc = 1, w = A->f->warps;
  while (w > 1 && wr * 2 * tr <= R) wr *= 2, w /= 2;
  while (w > 1 && wc * 2 * tc * vec <= C) wc *= 2, w /= 2;
  wr *= w;
  l.size_per_thread[0] = 1;
  l.size_per_thread[1] = (uint8_t)vec;
  l.threads_per_warp[0] = (uint8_t)tr;
  l.threads_per_warp[1] = (uint8_t)tc;
  l.warps_per_cta[0] = (uint8_t)wr;
  l.warps_per_cta[1] = (uint8_t)wc;
  return ir_layout_intern(A->f, &l);
}

/* Marks the values that dot operands come from (through casts and transposes). */
static void mark_dot_inputs(struct assign *A) {
  struct ir_func *f = A->f;
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_DOT || !op->block) continue;
    for (int a = 0; a < 2; a++) A->dot_in[ir_view_source(f, op->args[a])] = 1;
  }
}

static bool rematerializable(struct assign *A, ir_val v) {
  uint32_t d = ir_def_op(A->f, v);
  if (!d) return false;
  uint16_t c = A->f->ops.v[d].code;
  return c == IR_CONST || c == IR_SPLAT;
}

static void set_want(struct assign *A, ir_val v, uint16_t l) {
  if (A->want[v] != l) {
    A->want[v] = l;
    A->changed = true;
  }
}

static uint16_t slice_of(struct assign *A, uint16_t parent, int dim) {
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_SLICE;
  l.dim = (int8_t)dim;
  l.parent = parent;
  l.rank = (uint8_t)(A->f->layouts.v[parent].rank - 1);
  return ir_layout_intern(A->f, &l);
}

static void analyze_block(struct assign *A, uint32_t blk);

static bool is_scan(uint16_t code) {
  return code == IR_SCAN_SUM || code == IR_SCAN_PROD || code == IR_SCAN_MAX || code == IR_SCAN_MIN;
}

/* Which operand's layout an elementwise op adopts: Tensor Core layouts win over blocked
 * ones (converting an accumulator costs a round trip through shared memory, while the
 * other operands are usually masks and scalars that can be re-created in any layout). */
static int priority(struct assign *A, uint16_t l) {
  const struct ir_layout *e = &A->f->layouts.v[l];
  if (e->kind == IR_LAYOUT_SLICE) e = &A->f->layouts.v[e->parent];
  return e->kind == IR_LAYOUT_MMA ? 2 : 1;
}

static bool cheap(struct assign *A, ir_val v, int depth);

/* The layout an elementwise op takes from its operands: the highest-priority one among those
 * that hold data; index arithmetic and masks (cheap: re-created in any layout) decide only
 * when nothing else does, so `where(arange(BN) < N, x, 0.0)` keeps x's 16-byte vectors
 * instead of the i32 mask's 4-element ones (which would re-issue x's load narrower). */
static uint16_t elementwise_want(struct assign *A, const struct ir_op *op) {
  uint16_t best = 0;
  for (int pass = 0; pass < 2 && !best; pass++)
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val a = op->args[k];
      if (!is_tile(A, a) || rematerializable(A, a) || !A->want[a] || (pass == 0 && cheap(A, a, 0))) continue;
      if (!best || priority(A, A->want[a]) > priority(A, best)) best = A->want[a];
    }
  return best;
}

/* ---- Tensor Core (mma.sync) selection ---- */

static bool mma_eligible(struct assign *A, const struct ir_op *op) {
  const struct ir_type *a = T(A, op->args[0]), *c = T(A, op->res);
  if (!tl_has(A->f->target, TL_FEAT_MMA_SYNC)) return false;
  if (c->dtype != DT_F32) return false;
  if (a->dtype == DT_F32 && op->i[0]) /* tf32 when the dot opts in: m16n8k8 */
    return a->dims[0] >= 16 && a->dims[1] >= 8 && c->dims[1] >= 8;
  if (a->dtype != DT_F16 && a->dtype != DT_BF16) return false;
  return a->dims[0] >= 16 && a->dims[1] >= 16 && c->dims[1] >= 8;
}

/* Does value v reach operand 0 (A) of a dot through elementwise ops? */
static bool feeds_dot_a(struct assign *A, ir_val v, int depth) {
  struct ir_func *f = A->f;
  if (depth > 16) return false;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++) {
      if (op->args[k] != v) continue;
      if (op->code == IR_DOT && k == 0) return true;
      if ((ir_ops[op->code].flags & OPF_ELEM) && op->nres == 1 && feeds_dot_a(A, op->res, depth + 1)) return true;
    }
  }
  return false;
}

/* Is value v computed from a dot's result through elementwise ops? */
static bool from_dot(struct assign *A, ir_val v, int depth) {
  struct ir_func *f = A->f;
  uint32_t d = ir_def_op(f, v);
  if (!d || depth > 16) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (op->code == IR_DOT) return true;
  if (!(ir_ops[op->code].flags & OPF_ELEM)) return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (is_tile(A, op->args[k]) && from_dot(A, op->args[k], depth + 1)) return true;
  return false;
}

/* The accumulator layout of a Tensor Core dot: warps split M and N so each warp's tile is
 * as square as possible (fewer shared-memory reads of A and B), except in a chain of dots
 * (attention: P = softmax(Q K^T) feeds P @ V) where all warps go along M, so that the
 * first accumulator is the second dot's A operand register for register. */
static uint16_t mma_layout(struct assign *A, uint32_t id) {
  const struct ir_op *op = &A->f->ops.v[id];
  const struct ir_type *c = T(A, op->res);
  int M = c->dims[0], N = c->dims[1], W = A->f->warps;
  int wm = 1, wn = 1;
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_MMA;
  l.rank = 2;
  l.instr[0] = 16;
  l.instr[1] = 8;
  l.instr[2] = 16;
  /* wgmma (sm_90a): warpgroups of four warps along M, each owning 64-row blocks; the
   * same register layout as mma.sync with all warps along M, so a dot that cannot use
   * wgmma after all (smem-stage decides) still runs correctly with mma.sync */
  bool chain = feeds_dot_a(A, op->res, 0) || from_dot(A, op->args[0], 0);
  /* chains of dots (attention) use wgmma with two or more warpgroups: each warpgroup's
   * softmax then runs while the other's products occupy the Tensor Cores. With one, the
   * synchronous chain leaves them idle during the softmax and mma.sync's register-level
   * schedule wins (PERF.md 16, 39: hd128 302 vs 376 TFLOP/s with 4 warps; 492 with 8) */
  bool tf32 = T(A, op->args[0])->dtype == DT_F32;
  if (tf32) l.instr[2] = 8;
  bool chain_ok = !chain || W >= 8 || A->f->sched.wgmma == 1;
  if (ir_func_wgmma(A->f) && chain_ok && !tf32 && W % 4 == 0 && M % (16 * W) == 0 && N % 8 == 0) {
    l.warps_per_cta[0] = (uint8_t)W;
    l.warps_per_cta[1] = 1;
    l.instr[0] = 64;
    l.instr[1] = (uint8_t)(N > 256 ? 0 : N); /* 256 does not fit a byte: 0 means 256 */
    return ir_layout_intern(A->f, &l);
  }
  /* fewer rows than warpgroups of 64 (attention backward's dQ = dS K: 64 query rows, two
   * warpgroups): the warpgroups split N, each a whole m64nNk16 instruction of N / gn
   * columns (not in a chain, whose first accumulator must be the next dot's A) */
  int G = W / 4;
  if (ir_func_wgmma(A->f) && !chain && !tf32 && W % 4 == 0 && M % 64 == 0 && M < 64 * G) {
    int gm = M / 64, gn = G / gm;
    if (gm * gn == G && N % (8 * gn) == 0 && N / gn <= 128 && N / gn >= 16 && !((N / gn) & (N / gn - 1))) {
      l.warps_per_cta[0] = (uint8_t)(4 * gm);
      l.warps_per_cta[1] = (uint8_t)gn;
      l.instr[0] = 64;
      l.instr[1] = (uint8_t)(N / gn);
      return ir_layout_intern(A->f, &l);
    }
  }
  while (wm * wn < W) {
    if (chain || (M / wm >= N / wn && M / (16 * wm) >= 2))
      wm *= 2;
    else if (N / (8 * wn) >= 2)
      wn *= 2;
    else
      wm *= 2;
  }
  l.warps_per_cta[0] = (uint8_t)wm;
  l.warps_per_cta[1] = (uint8_t)wn;
  return ir_layout_intern(A->f, &l);
}

static uint16_t dot_operand(struct assign *A, uint16_t parent, int idx, int k_width) {
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_DOT_OP;
  l.rank = 2;
  l.op_idx = (int8_t)idx;
  l.parent = parent;
  l.k_width = (uint8_t)k_width;
  return ir_layout_intern(A->f, &l);
}

/* ---- shape ops: reshape, permute, join, split ----
 * The result holds the operand's elements at relabeled coordinates, so no data needs to
 * move when the result's layout is the operand's relabeled (ll_shape_view): then codegen
 * renames registers. That relabeling is taken when it is a blocked layout (ll_fit_blocked;
 * a permute of a blocked layout always is). Otherwise the operand is first converted to a
 * layout whose relabeling is blocked: the flat blocked layout (ll_flat_blocked) for
 * reshape, join and split, the default one for permute. That convert_layout is the only
 * data movement, visible in the IR and its shared memory accounted as any conversion's;
 * the op itself never moves data (codegen checks that the layouts allow it).
 *
 *   %2 = load ... : tile<64x64xf32, #1>       #1 = blocked<spt=[1,4], tpw=[2,16], ...>
 *   %3 = reshape %2 : tile<64x32x2xf32, #2>   #2 = blocked<spt=[1,2,2], tpw=[2,16,1], ...>
 *   %4 = split %3 {half=1} : tile<64x32xf32, #3>   #3 = blocked<spt=[1,2], tpw=[2,16], ...> */

static int log2_of(int64_t x) {
  int b = 0;
  while (x > 1) x >>= 1, b++;
  return b;
}

/* Register bits of the fallback flat layout: the default layout's vector width. */
static int flat_reg_bits(struct assign *A, const struct ir_type *t) {
  int64_t per_thread = ir_type_numel(t) / (32 * A->f->warps);
  int vec = 16 / ir_dtype_bytes((ir_dtype)t->dtype);
  return log2_of(TL_MAX(1, TL_MIN(vec, per_thread)));
}

static uint16_t shape_op_layout(struct assign *A, uint32_t id) {
  struct ir_func *f = A->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_type *at = T(A, op->args[0]), *rt = T(A, op->res);
  int W = f->warps;
  uint16_t in = A->want[op->args[0]];
  if (op->code == IR_JOIN && (!in || rematerializable(A, op->args[0])) && A->want[op->args[1]] &&
      !rematerializable(A, op->args[1]))
    in = A->want[op->args[1]]; /* join(x, zeros): x decides */
  if (!in) in = default_layout(A, at);
  const struct ir_layout *il = &f->layouts.v[in];
  struct ir_layout e;
  if (op->code == IR_PERMUTE && il->kind == IR_LAYOUT_BLOCKED) {
    int perm[IR_MAX_RANK];
    if (ir_perm_decode(op->i[0], at->rank, perm)) {
      e = ll_permute_blocked(il, perm);
      A->opreq[id] = in;
      return ir_layout_intern(f, &e);
    }
  }
  struct ll src, view;
  if (ll_build(f, in, at->rank, at->dims, W, &src) &&
      ll_shape_view(op->code, op->i[0], &src, rt->rank, rt->dims, &view, NULL) && ll_fit_blocked(&view, W, &e)) {
    A->opreq[id] = in;
    return ir_layout_intern(f, &e);
  }
  /* the operand moves first, into a layout whose relabeling is blocked by construction */
  struct ir_layout se;
  int bits = flat_reg_bits(A, at);
  switch (op->code) {
  case IR_PERMUTE: {
    int perm[IR_MAX_RANK] = {0, 1, 2, 3};
    ir_perm_decode(op->i[0], at->rank, perm); /* the verifier has checked it */
    se = ll_default_blocked(at->rank, at->dims, W, ir_dtype_bytes((ir_dtype)at->dtype));
    e = ll_permute_blocked(&se, perm);
    break;
  }
  case IR_JOIN:
    se = ll_flat_blocked(at->rank, at->dims, W, bits);
    e = ll_flat_blocked(rt->rank, rt->dims, W, bits + 1);
    break;
  case IR_SPLIT:
    bits = TL_MAX(bits, 1); /* both halves in one thread */
    se = ll_flat_blocked(at->rank, at->dims, W, bits);
    e = ll_flat_blocked(rt->rank, rt->dims, W, bits - 1);
    break;
  default: /* reshape */
    se = ll_flat_blocked(at->rank, at->dims, W, bits);
    e = ll_flat_blocked(rt->rank, rt->dims, W, bits);
    break;
  }
  A->opreq[id] = ir_layout_intern(f, &se);
  return ir_layout_intern(f, &e);
}

static void analyze_op(struct assign *A, uint32_t id) {
  struct ir_func *f = A->f;
  struct ir_op *op = &f->ops.v[id];
  ir_val r = op->nres ? op->res : 0;
  const struct ir_type *rt = r ? T(A, r) : NULL;
  bool tile_result = r && rt->kind == IR_TY_TILE && rt->rank > 0;
  switch (op->code) {
  case IR_FOR: {
    const struct ir_block *body = &f->blocks.v[op->region];
    const struct ir_op *y = NULL;
    if (body->ops.n) y = &f->ops.v[VEC_LAST(body->ops)];
    for (uint32_t k = 0; k < op->nres; k++) {
      ir_val init = op->args[3 + k];
      if (!is_tile(A, init)) continue;
      uint16_t l = A->want[init];
      /* a rematerializable init (zeros) adopts the layout the body yields; until that is
       * known the carried value keeps what it has (unassigned at first), so that body ops
       * take their layouts from their other operands (the loads and dots inside the loop).
       * So does an init without a layout yet: the block argument of an enclosing loop
       * carrying the same accumulator, which in turn waits for this loop's result (an
       * accumulator through two nested loops: the inner body's dot decides for both) */
      if (rematerializable(A, init) || !l) {
        uint16_t yl = y ? A->want[y->args[k]] : 0;
        l = yl ? yl : A->want[body->args + 1 + k];
      }
      set_want(A, body->args + 1 + k, l);
      set_want(A, op->res + k, l);
    }
    analyze_block(A, op->region);
    return;
  }
  case IR_IF: {
    analyze_block(A, op->region);
    analyze_block(A, op->region + 1);
    const struct ir_block *tb = &f->blocks.v[op->region];
    const struct ir_block *eb = &f->blocks.v[op->region + 1];
    const struct ir_op *ty = &f->ops.v[VEC_LAST(tb->ops)], *ey = &f->ops.v[VEC_LAST(eb->ops)];
    for (uint32_t k = 0; k < op->nres; k++) {
      if (!is_tile(A, op->res + k)) continue;
      uint16_t l = !rematerializable(A, ty->args[k]) ? A->want[ty->args[k]] : A->want[ey->args[k]];
      if (!l) l = default_layout(A, T(A, op->res + k));
      set_want(A, op->res + k, l);
    }
    return;
  }
  default:
    break;
  }
  if (!tile_result) return;
  uint16_t l = 0;
  switch (op->code) {
  case IR_DOT:
    if (mma_eligible(A, op)) {
      l = mma_layout(A, id);
      int kw = T(A, op->args[0])->dtype == DT_F32 ? 1 : 2;
      A->opreq[id] = dot_operand(A, l, 0, kw);
      A->opreq1[id] = dot_operand(A, l, 1, kw);
    } else {
      l = default_layout(A, rt);
    }
    break;
  case IR_LOAD:
    if (!A->dot_in[op->res] && scalar_only(A, op)) {
      struct ir_layout e = ll_default_blocked(rt->rank, rt->dims, A->f->warps, 16);
      l = ir_layout_intern(A->f, &e);
      break;
    }
    l = default_layout(A, rt);
    break;
  case IR_GATHER:
    l = rt->rank == 2 && A->dot_in[op->res] && tl_sched_get(f->sched.gather, 1) && tl_sched_get(f->sched.gatherrows, 1)
            ? gather_rows_layout(A, rt)
            : default_layout(A, rt);
    break;
  case IR_CONST:
  case IR_SPLAT:
  case IR_ARANGE:
    l = default_layout(A, rt);
    break;
  case IR_ATOMIC: /* the old values come back where the new ones were */
    l = A->want[op->args[op->nargs - 1]];
    if (!l) l = default_layout(A, rt);
    break;
  case IR_BROADCAST: {
    /* keep the operand's threads (a row maximum broadcast back over its rows moves
     * nothing), unless that spreads the result over fewer threads than the default layout
     * does: [BM, 1] rows broadcast to [BM, BN] would leave each thread BN elements and
     * whole warps repeating each other's work (index arithmetic such as
     * rows[:, None] * N + cols[None, :]); the operand is then converted, or re-created
     * when it is cheap */
    l = A->want[op->args[0]];
    uint16_t d = default_layout(A, rt);
    struct ll li, ld;
    if (!l || (ll_build(f, l, rt->rank, rt->dims, f->warps, &li) && ll_build(f, d, rt->rank, rt->dims, f->warps, &ld) &&
               li.nreg > ld.nreg))
      l = d;
    break;
  }
  case IR_EXPAND_DIMS: {
    uint16_t in = A->want[op->args[0]];
    int axis = (int)op->i[0];
    const struct ir_layout *il = in ? &f->layouts.v[in] : NULL;
    if (il && il->kind == IR_LAYOUT_SLICE && il->dim == axis) {
      l = il->parent;
      A->opreq[id] = 0;
    } else if (il && il->kind == IR_LAYOUT_BLOCKED) {
      struct ir_layout e = ll_expand_blocked(il, axis);
      l = ir_layout_intern(f, &e);
      A->opreq[id] = 0;
    } else {
      uint16_t d = default_layout(A, T(A, op->args[0]));
      struct ir_layout e = ll_expand_blocked(&f->layouts.v[d], axis);
      l = ir_layout_intern(f, &e);
      A->opreq[id] = d;
    }
    break;
  }
  case IR_TRANS: {
    uint16_t in = A->want[op->args[0]];
    const struct ir_layout *il = in ? &f->layouts.v[in] : NULL;
    uint16_t src = il && il->kind == IR_LAYOUT_BLOCKED ? in : default_layout(A, T(A, op->args[0]));
    struct ir_layout e = ll_trans_blocked(&f->layouts.v[src]);
    l = ir_layout_intern(f, &e);
    A->opreq[id] = src == in ? 0 : src;
    break;
  }
  case IR_RESHAPE:
  case IR_PERMUTE:
  case IR_JOIN:
  case IR_SPLIT:
    l = shape_op_layout(A, id);
    break;
  case IR_REDUCE_SUM:
  case IR_REDUCE_MAX:
  case IR_REDUCE_MIN: {
    uint16_t in = A->want[op->args[0]];
    if (!in) in = default_layout(A, T(A, op->args[0]));
    l = slice_of(A, in, (int)op->i[0]);
    break;
  }
  case IR_SCAN_SUM:
  case IR_SCAN_PROD:
  case IR_SCAN_MAX:
  case IR_SCAN_MIN:
    l = A->want[op->args[0]];
    if (!l) l = default_layout(A, rt);
    break;
  default:
    if (ir_ops[op->code].flags & OPF_ELEM) l = elementwise_want(A, op);
    if (!l) l = default_layout(A, rt);
    break;
  }
  set_want(A, r, l);
}

static void analyze_block(struct assign *A, uint32_t blk) {
  struct ir_block *b = &A->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) analyze_op(A, b->ops.v[i]);
}

/* ---- rewrite ---- */

static ir_type_id with_layout(struct ir_func *f, ir_type_id t, uint16_t l) {
  struct ir_type nt = f->types.v[t];
  nt.layout = l;
  return ir_type_intern(f, &nt);
}

/* Values cheap to compute again in another layout instead of moving them between
 * threads: constants, splats, aranges, and broadcasts, expand_dims and integer or
 * comparison elementwise ops over such values (index arithmetic and masks). */
static bool cheap(struct assign *A, ir_val v, int depth) {
  struct ir_func *f = A->f;
  uint32_t d = ir_def_op(f, v);
  if (!d || depth > 8) return false;
  const struct ir_op *op = &f->ops.v[d];
  switch (op->code) {
  case IR_CONST:
  case IR_SPLAT:
  case IR_ARANGE:
    return true;
  case IR_BROADCAST:
  case IR_EXPAND_DIMS:
    return cheap(A, op->args[0], depth + 1);
  default:
    break;
  }
  if (!(ir_ops[op->code].flags & OPF_ELEM)) return false;
  if (ir_dtype_is_float(T(A, op->res)->dtype)) return false; /* keep float math where it is */
  for (uint32_t k = 0; k < op->nargs; k++)
    if (is_tile(A, op->args[k]) && !cheap(A, op->args[k], depth + 1)) return false;
  return true;
}

static ir_val in_layout(struct assign *A, ir_val v, uint16_t l, uint32_t before);

/* Re-creates the cheap value v in layout l before op `before`. */
static ir_val remat(struct assign *A, ir_val v, uint16_t l, uint32_t before) {
  struct ir_func *f = A->f;
  uint32_t d = ir_def_op(f, v);
  struct ir_op src = f->ops.v[d];
  ir_val args[3] = {0, 0, 0};
  for (uint32_t k = 0; k < src.nargs && k < 3; k++) {
    args[k] = src.args[k];
    if (!is_tile(A, args[k])) continue;
    uint16_t need = l;
    if (src.code == IR_EXPAND_DIMS) need = slice_of(A, l, (int)src.i[0]);
    args[k] = in_layout(A, args[k], need, before);
  }
  struct ir_builder b;
  ir_builder_before(&b, f, before);
  ir_type_id nt = with_layout(f, f->values.v[v].type, l);
  uint32_t c = ir_build(&b, (ir_opcode)src.code, args, src.nargs, &nt, 1);
  f->ops.v[c].i[0] = src.i[0];
  f->ops.v[c].i[1] = src.i[1];
  f->ops.v[c].f = src.f;
  return f->ops.v[c].res;
}

/* Rebuilds op `d` (a broadcast, expand_dims or unary elementwise op, a load or a gather)
 * producing v in layout l, with its tile operands converted instead: converting a bias
 * vector before broadcasting it moves BN elements through shared memory, not BM x BN; a
 * load re-issued in the needed layout moves nothing at all, nor does a gather whose index
 * tiles are re-created there. */
static ir_val sink(struct assign *A, ir_val v, uint16_t l, uint32_t before) {
  struct ir_func *f = A->f;
  uint32_t d = ir_def_op(f, v);
  struct ir_op src = f->ops.v[d];
  uint32_t blk = f->ops.v[before].block;
  if (v < A->nsunk && A->sunk[v] && A->sunk_layout[v] == l && A->sunk_block[v] == blk)
    return A->sunk[v]; /* re-created earlier in this block (the rewrite inserts in program
                          order); loads only of tensors nothing writes (sinkable) */
  ir_val args[3 + IR_MAX_RANK];
  for (uint32_t k = 0; k < src.nargs; k++) args[k] = src.args[k];
  if (src.code != IR_LOAD) {
    uint16_t need = src.code == IR_EXPAND_DIMS ? slice_of(A, l, (int)src.i[0]) : l;
    for (uint32_t k = 0; k < src.nargs; k++)
      if (is_tile(A, args[k])) args[k] = in_layout(A, args[k], need, before);
  }
  struct ir_builder b;
  ir_builder_before(&b, f, before);
  ir_type_id nt = with_layout(f, f->values.v[v].type, l);
  uint32_t c = ir_build(&b, (ir_opcode)src.code, args, src.nargs, &nt, 1);
  memcpy(f->ops.v[c].i, src.i, sizeof src.i);
  f->ops.v[c].f = src.f;
  if (v < A->nsunk) {
    A->sunk[v] = f->ops.v[c].res;
    A->sunk_layout[v] = l;
    A->sunk_block[v] = blk;
  }
  return f->ops.v[c].res;
}

/* Whether an op from position `from` up to (not including) op `to` of one block, or a block
 * nested in one of them, writes tensor t. */
static bool written_between(struct ir_func *f, uint32_t from, uint32_t to, ir_val t) {
  const struct ir_block *b = &f->blocks.v[f->ops.v[from].block];
  bool in = false;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    if (id == from) in = true;
    if (id == to) return false;
    if (in && ir_op_writes_tensor(f, id, t)) return true;
  }
  return true; /* `to` is not in the block: assume the worst */
}

static bool sinkable(struct assign *A, ir_val v, uint16_t l, uint32_t before) {
  struct ir_func *f = A->f;
  uint32_t d = ir_def_op(f, v);
  if (!d) return false;
  const struct ir_op *op = &f->ops.v[d];
  const struct ir_layout *e = &f->layouts.v[l];
  /* a load re-issued in the needed layout, or a gather with its indices re-created there (a
   * paged cache's block-table row was converted twice per key block), where it is used: only
   * when nothing can have written the tensor in between (nothing in the kernel writes it, or
   * the use is in the load's block with no write between them: GEMM's beta * C) */
  if (op->code == IR_LOAD || op->code == IR_GATHER)
    return e->kind != IR_LAYOUT_DOT_OP && e->kind != IR_LAYOUT_SHARED && /* operands: staged instead */
           (ir_reads_unwritten(f, d, IR_BODY_BLOCK) ||
            (f->ops.v[before].block == op->block && !written_between(f, d, before, op->args[0])));
  if (op->code == IR_BROADCAST || op->code == IR_EXPAND_DIMS) return is_tile(A, op->args[0]);
  if (!(ir_ops[op->code].flags & OPF_ELEM) || e->kind == IR_LAYOUT_DOT_OP) return false;
  /* a narrowing cast: converted after it, half the bytes move (attention backward's dS in
   * f16, not f32), unless its operand gets to the layout without moving */
  if (op->code == IR_CAST && ir_dtype_bytes((ir_dtype)T(A, op->res)->dtype) < ir_dtype_bytes((ir_dtype)T(A, op->args[0])->dtype))
    return cheap(A, op->args[0], 0) || sinkable(A, op->args[0], l, before);
  /* elementwise: worth it when at most one operand has to move (beta * C: the splat of
   * beta is re-created, C is loaded in the needed layout) */
  int moving = 0;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (is_tile(A, op->args[k]) && !cheap(A, op->args[k], 0)) moving++;
  return moving <= 1;
}

/* Returns a value equal to v in layout l, inserted before op `before`. */
static ir_val in_layout(struct assign *A, ir_val v, uint16_t l, uint32_t before) {
  struct ir_func *f = A->f;
  if (!l || T(A, v)->layout == l) return v;
  if (cheap(A, v, 0)) return remat(A, v, l, before);
  if (sinkable(A, v, l, before)) return sink(A, v, l, before);
  struct ir_builder b;
  ir_builder_before(&b, f, before);
  ir_type_id nt = with_layout(f, f->values.v[v].type, l);
  return ir_build1(&b, IR_CONVERT_LAYOUT, nt, &v, 1);
}

static void rewrite_block(struct assign *A, uint32_t blk);

static void rewrite_op(struct assign *A, uint32_t id) {
  struct ir_func *f = A->f;
  struct ir_op *op = &f->ops.v[id];
  /* results take their wanted layouts */
  for (uint32_t k = 0; k < op->nres; k++) {
    ir_val r = op->res + k;
    if (A->want[r]) f->values.v[r].type = with_layout(f, f->values.v[r].type, A->want[r]);
  }
  for (uint32_t r = 0; r < op->nregions; r++) {
    struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t k = 0; k < b->nargs; k++) {
      ir_val a = b->args + k;
      if (A->want[a]) f->values.v[a].type = with_layout(f, f->values.v[a].type, A->want[a]);
    }
  }
  /* operands that must be in a specific layout */
  ir_val args[256];
  uint32_t n = op->nargs < 256 ? op->nargs : 256;
  memcpy(args, op->args, sizeof(ir_val) * n);
  bool changed = false;
  const struct ir_type *rt = op->nres ? T(A, op->res) : NULL;
  for (uint32_t k = 0; k < n; k++) {
    if (!is_tile(A, args[k])) continue;
    uint16_t need = 0;
    if (op->code == IR_FOR && k >= 3)
      need = A->want[op->res + (k - 3)];
    else if ((ir_ops[op->code].flags & OPF_ELEM) || op->code == IR_BROADCAST || is_scan(op->code) ||
             op->code == IR_GATHER || op->code == IR_ATOMIC)
      need = rt->layout; /* gather, atomic: the indices (and predicate) in the data's layout */
    else if ((op->code == IR_SCATTER || op->code == IR_STORE) && k + 1 < n)
      need = T(A, args[n - 1])->layout; /* indices and predicate in the value's */
    else if ((op->code == IR_EXPAND_DIMS || op->code == IR_TRANS || op->code == IR_RESHAPE ||
              op->code == IR_PERMUTE || op->code == IR_JOIN || op->code == IR_SPLIT) &&
             id < A->nops && A->opreq[id])
      need = A->opreq[id];
    else if (op->code == IR_DOT && k < 2 && id < A->nops)
      need = k == 0 ? A->opreq[id] : A->opreq1[id];
    else if (op->code == IR_YIELD) {
      uint32_t parent = f->blocks.v[op->block].parent;
      const struct ir_op *p = &f->ops.v[parent];
      need = p->code == IR_FOR ? A->want[p->res + k] : A->want[p->res + k];
    } else if (op->code == IR_DOT && k == 2)
      need = rt->layout;
    if (need && T(A, args[k])->layout != need) {
      args[k] = in_layout(A, args[k], need, id);
      changed = true;
      op = &f->ops.v[id];
    }
  }
  if (changed) ir_op_set_args(f, id, args, n);
  for (uint32_t r = 0; r < f->ops.v[id].nregions; r++) rewrite_block(A, f->ops.v[id].region + r);
}

static void rewrite_block(struct assign *A, uint32_t blk) {
  /* iterate by op id list snapshot: conversions are inserted before the current op */
  uint32_t i = 0;
  while (i < A->f->blocks.v[blk].ops.n) {
    uint32_t id = A->f->blocks.v[blk].ops.v[i];
    uint32_t before = A->f->blocks.v[blk].ops.n;
    rewrite_op(A, id);
    i += 1 + (A->f->blocks.v[blk].ops.n - before);
  }
}

void pass_layout_assign(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct assign A = {f, NULL, NULL, NULL, NULL, 0, false, NULL, NULL, NULL, 0};
  A.want = ARENA_NEWN(pc->scratch, uint16_t, f->values.n + 1);
  A.opreq = ARENA_NEWN(pc->scratch, uint16_t, f->ops.n + 1);
  A.opreq1 = ARENA_NEWN(pc->scratch, uint16_t, f->ops.n + 1);
  A.nops = f->ops.n;
  A.dot_in = ARENA_NEWN(pc->scratch, uint8_t, f->values.n + 1);
  mark_dot_inputs(&A);
  for (int round = 0; round < 8; round++) {
    A.changed = false;
    analyze_block(&A, IR_BODY_BLOCK);
    if (!A.changed) break;
  }
  /* values still unassigned (a carried value whose body never produced a layout) take
   * the default of their shape, then one more round propagates that */
  bool any = false;
  for (uint32_t v = 1; v < f->values.n; v++) {
    const struct ir_type *t = ir_vtype(f, v);
    if (t->kind == IR_TY_TILE && t->rank > 0 && !A.want[v] && f->values.v[v].kind == IR_VAL_BLOCKARG) {
      A.want[v] = default_layout(&A, t);
      any = true;
    }
  }
  if (any)
    for (int round = 0; round < 8; round++) {
      A.changed = false;
      analyze_block(&A, IR_BODY_BLOCK);
      if (!A.changed) break;
    }
  /* the rewrite creates ops and values: the tables may grow, so size the maps again */
  uint16_t *want = ARENA_NEWN(pc->scratch, uint16_t, f->values.n * 2 + 64);
  memcpy(want, A.want, sizeof(uint16_t) * f->values.n);
  A.want = want;
  A.nsunk = f->values.n;
  A.sunk = ARENA_NEWN(pc->scratch, ir_val, A.nsunk + 1);
  A.sunk_layout = ARENA_NEWN(pc->scratch, uint16_t, A.nsunk + 1);
  A.sunk_block = ARENA_NEWN(pc->scratch, uint32_t, A.nsunk + 1);
  memset(A.sunk, 0, sizeof(ir_val) * (A.nsunk + 1));
  rewrite_block(&A, IR_BODY_BLOCK);
  f->stage = IR_STAGE_GPU; /* every tile has a layout: GPU ops may appear from here on */
  pc->changed = true;
}
