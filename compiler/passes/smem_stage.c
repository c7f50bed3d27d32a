/* smem_stage.c - Tensor Core operands through shared memory.
 *
 * Needs: layouts assigned (layout pass), loop invariants hoisted (licm). Guarantees: every
 * convert_layout into a dot operand layout that moves data between threads goes through a
 * swizzled shared-memory buffer and comes out with local_load (ldmatrix in codegen):
 *
 *   - a tile loaded from a tensor inside a loop, at a position that changes with the loop
 *     (a GEMM's A and B blocks, attention's K and V blocks), is copied asynchronously from
 *     global to shared memory (async_copy = cp.async, out-of-bounds elements zero-filled)
 *     into a buffer allocated before the loop; the pipeline pass then multi-buffers it;
 *   - so is a 2-d gather that moves with its loop (paged attention's K and V rows, at
 *     per-element indices): async_copy's gather form, indexed by the gather's index tiles;
 *   - anything else (attention's Q, loaded once) is stored from registers (local_store).
 *
 * A transpose feeding the conversion (q @ k.T) is absorbed: the buffer keeps the loaded
 * orientation and local_load reads it transposed. Conversions that are register renamings
 * (attention's P, whose accumulator layout is the next dot's A layout) are left alone.
 *
 *   %k = load %K[..] : tile<64x64xf16, #blocked>       %buf = local_alloc : tile<64x64xf16, #shared>
 *   %t = trans %k                                       for ... {
 *   %b = convert_layout %t : tile<64x64xf16, #dot_op>     barrier
 *                                              =>         async_copy %buf, %0, %K[..]
 *                                                         async_commit; async_wait {pending=0}
 *                                                         barrier
 *                                                         %b = local_load %buf, %0 {trans=1}   */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "passes.h"

static const struct ir_type *T(struct ir_func *f, ir_val v) { return ir_vtype(f, v); }

/* The swizzled shared layout for a 2-d tile whose last dimension is contiguous, chosen so
 * that ldmatrix's eight 16-byte rows fall in eight different bank groups; rows longer than
 * `panel_bytes` (128, or 64 for a buffer read as an MN-major wgmma operand 32 columns at a
 * time) are stored as panels of that width, one after another. */
static uint16_t shared_layout(struct ir_func *f, const struct ir_type *t, int panel_bytes) {
  int eb = ir_dtype_bytes(t->dtype);
  int row_bytes = t->dims[1] * eb;
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_SHARED;
  l.rank = 2;
  l.vec = (uint8_t)(16 / eb);
  if (row_bytes > panel_bytes) { /* panels, one after another (wgmma's canonical form) */
    l.panel = (uint16_t)(panel_bytes / eb);
    row_bytes = panel_bytes;
  }
  l.per_phase = (uint8_t)(row_bytes >= 128 ? 1 : 128 / row_bytes);
  l.max_phase = (uint8_t)(8 / l.per_phase > 1 ? 8 / l.per_phase : 1);
  if (row_bytes < 16) l.vec = (uint8_t)t->dims[1], l.max_phase = 1;
  l.order[0] = 1;
  l.order[1] = 0;
  return ir_layout_intern(f, &l);
}

uint16_t pass_shared_layout(struct ir_func *f, const struct ir_type *t) { return shared_layout(f, t, 128); }

/* True when convert op `id` only renames registers (no data crosses threads). */
static bool register_renaming(struct ir_func *f, uint32_t id) {
  const struct ir_op *op = &f->ops.v[id];
  struct ll ls, ld;
  if (!ll_of_type(f, T(f, op->args[0]), f->warps, &ls) || !ll_of_type(f, T(f, op->res), f->warps, &ld)) return false;
  /* per call, not static: compiles run concurrently (the autotuner's threads); from the
   * function's arena, whose recovery point reports an allocation failure */
  uint32_t *map = ARENA_NEWN(f->arena, uint32_t, ll_num_regs(&ld));
  return ll_register_map(&ld, &ls, map);
}

struct staged {
  ir_val buf, slot;
  int trans;         /* the buffer holds the operand transposed */
  ir_val root;       /* the tile stored in the buffer */
};

/* The root tile of a conversion into an operand layout: a load, possibly under a
 * transpose (q @ k.T keeps K's loaded orientation in the buffer). */
static void find_root(struct ir_func *f, uint32_t conv, struct staged *st) {
  ir_val root = f->ops.v[conv].args[0];
  uint32_t d = ir_def_op(f, root);
  st->trans = 0;
  if (d && f->ops.v[d].code == IR_TRANS) {
    st->trans = 1;
    root = f->ops.v[d].args[0];
  }
  st->root = root;
}

/* Conversions already staged for an earlier wgmma (an operand shared by several products in
 * one loop, as SwiGLU's X): op id -> its staging, so the next product reads the same buffer.
 * The conversions themselves are removed once no dot uses them. And loads already copied
 * asynchronously: value id of the loaded tile -> its buffer, so that a tile feeding two
 * products in two orientations (attention backward's Q in q @ k.T and ds.T @ q) is copied
 * once and read twice (local_load with and without trans). */
struct staged_map {
  struct staged *by_op; /* indexed by convert op id; buf == 0: not staged */
  uint32_t n;
  struct staged *by_root; /* indexed by value id: async copies only */
  uint32_t nroot;
  struct staged *by_reg; /* indexed by value id: register tiles stored at the top level */
  bool *narrow;          /* indexed by value id: a root some wgmma reads as MN-major B in
                          * 32-column slices (64-byte panels) */
};

/* The panel width (bytes) of root's buffer: 64 for a root marked narrow, else 128. */
static int panel_bytes(const struct staged_map *sm, ir_val root) {
  return root < sm->nroot && sm->narrow[root] ? 64 : 128;
}

/* Op a comes before op b in their common block. */
static bool precedes(const struct ir_func *f, uint32_t a, uint32_t b) {
  const struct ir_block *blk = &f->blocks.v[f->ops.v[b].block];
  for (uint32_t i = 0; i < blk->ops.n; i++) {
    if (blk->ops.v[i] == a) return true;
    if (blk->ops.v[i] == b) return false;
  }
  return false;
}

/* Moves the operand of convert op `conv` into a shared buffer: an async copy at the
 * load's position when the load moves with its loop, a register store otherwise.
 * `where` is the op before which the operand is needed. */
static void stage(struct ir_func *f, struct staged_map *sm, uint32_t conv, uint32_t where, struct staged *st) {
  find_root(f, conv, st);
  if (st->root < sm->nroot && sm->by_root[st->root].buf) { /* copied already: same buffer */
    st->buf = sm->by_root[st->root].buf;
    st->slot = sm->by_root[st->root].slot;
    return;
  }
  uint32_t d = ir_def_op(f, st->root);
  const struct ir_type *tt = T(f, st->root);
  struct ir_type bt = *tt;
  bt.layout = shared_layout(f, tt, panel_bytes(sm, st->root));
  ir_type_id buf_type = ir_type_intern(f, &bt);
  uint32_t blk = f->ops.v[conv].block;
  uint32_t loop = f->blocks.v[blk].parent;
  bool in_loop = loop && f->ops.v[loop].code == IR_FOR;
  bool async = false;
  /* a slice load, or a 2-d gather (its copy: one cp.async per row piece, at the gather's
   * per-element indices), that moves with the loop and reads what the loop does not write;
   * zero fill only (cp.async's) */
  bool gather = d && f->ops.v[d].code == IR_GATHER && tt->rank == 2 && tl_sched_get(f->sched.gather, 1);
  if (d && (f->ops.v[d].code == IR_LOAD || gather) && in_loop && f->ops.v[d].block == blk && f->ops.v[d].f == 0 &&
      !signbit(f->ops.v[d].f) && !ir_block_writes_tensor(f, f->ops.v[loop].region, f->ops.v[d].args[0])) {
    const struct ir_op *ld_op = &f->ops.v[d];
    for (uint32_t k = 1; k < ld_op->nargs; k++)
      if (ir_defined_within(f, ld_op->args[k], blk)) async = true;
  }
  struct ir_builder b;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  if (async) {
    ir_builder_before(&b, f, loop);
    st->buf = ir_build1(&b, IR_LOCAL_ALLOC, buf_type, NULL, 0);
    ir_builder_before(&b, f, d);
    st->slot = ir_const_int(&b, i32, 0);
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    const struct ir_op *lo = &f->ops.v[d];
    ir_val args[2 + 1 + IR_MAX_RANK];
    uint32_t n = 0;
    args[n++] = st->buf;
    args[n++] = st->slot;
    for (uint32_t k = 0; k < lo->nargs; k++) args[n++] = lo->args[k];
    uint32_t cp = ir_build(&b, IR_ASYNC_COPY, args, n, NULL, 0);
    f->ops.v[cp].i[0] = gather ? 0 : f->ops.v[d].i[0]; /* mask 0: the gather form */
    ir_build(&b, IR_ASYNC_COMMIT, NULL, 0, NULL, 0);
    uint32_t w = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
    f->ops.v[w].i[0] = 0;
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    /* the copy sits at the load, before every use of it in the loop body: later
     * conversions of the same tile read this buffer */
    if (st->root < sm->nroot) sm->by_root[st->root] = *st;
  } else {
    /* a register tile the enclosing loops do not compute (attention's Q read by wgmma) is
     * stored once, in front of the outermost of them */
    for (;;) {
      uint32_t p = f->blocks.v[f->ops.v[where].block].parent;
      if (!p || f->ops.v[p].code != IR_FOR || ir_defined_within(f, st->root, f->ops.v[p].region)) break;
      where = p;
    }
    /* stored already at the top level, in front of this point: read that buffer */
    if (st->root < sm->nroot && sm->by_reg[st->root].buf && f->ops.v[where].block == IR_BODY_BLOCK &&
        precedes(f, ir_def_op(f, sm->by_reg[st->root].buf), where)) {
      st->buf = sm->by_reg[st->root].buf;
      st->slot = sm->by_reg[st->root].slot;
      return;
    }
    ir_builder_before(&b, f, where);
    st->buf = ir_build1(&b, IR_LOCAL_ALLOC, buf_type, NULL, 0);
    st->slot = ir_const_int(&b, i32, 0);
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    /* from the registers the tile is in: a conversion in front of the store would move it
     * through shared memory twice (local_store writes any layout) */
    ir_val v = st->root;
    for (uint32_t cd = ir_def_op(f, v); cd && f->ops.v[cd].code == IR_CONVERT_LAYOUT; cd = ir_def_op(f, v))
      v = f->ops.v[cd].args[0];
    ir_val sa[3] = {st->buf, st->slot, v};
    ir_build(&b, IR_LOCAL_STORE, sa, 3, NULL, 0);
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    if (f->ops.v[where].block == IR_BODY_BLOCK && st->root < sm->nroot) sm->by_reg[st->root] = *st;
  }
}

static uint32_t convert_into(struct ir_func *f, ir_val v) {
  uint32_t d = ir_def_op(f, v);
  return d && f->ops.v[d].code == IR_CONVERT_LAYOUT ? d : 0;
}


static void stage_once(struct ir_func *f, struct staged_map *sm, uint32_t conv, uint32_t where, struct staged *st) {
  if (conv < sm->n && sm->by_op[conv].buf) {
    *st = sm->by_op[conv];
    return;
  }
  stage(f, sm, conv, where, st);
  if (conv < sm->n) sm->by_op[conv] = *st;
}

static bool has_uses(struct ir_func *f, ir_val v) {
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] == v) return true;
  }
  return false;
}

/* wgmma reads B (and A unless A is a register renaming of an accumulator) straight from
 * shared memory. Conditions: B's buffer is K-major (from a transposed load) or MN-major
 * with whole 64-element panels; A likewise; the dot is in the warpgroup layout. */
static bool try_wgmma(struct ir_func *f, struct staged_map *sm, uint32_t dot) {
  const struct ir_op *op = &f->ops.v[dot];
  const struct ir_type *ct = T(f, op->res);
  const struct ir_layout *cl = &f->layouts.v[ct->layout];
  if (!ir_func_wgmma(f) || cl->kind != IR_LAYOUT_MMA || cl->instr[0] != 64) return false;
  int M = ct->dims[0], N = ct->dims[1], K = T(f, op->args[0])->dims[1];
  int W = f->warps, wm = cl->warps_per_cta[0], gn = cl->warps_per_cta[1];
  if (wm % 4 || wm * gn != W || M % (16 * wm) || K % 16 || N % (8 * gn)) return false;
  N /= gn; /* the columns of one warpgroup (all of them unless the warpgroups split N) */
  if (N > 256 && N % 256) return false;
  uint32_t cb = convert_into(f, op->args[1]), ca = convert_into(f, op->args[0]);
  if (!cb || register_renaming(f, cb)) return false;
  struct staged sb, sa;
  find_root(f, cb, &sb);
  /* MN-major B needs whole panels of its buffer (2-byte elements: panel_bytes / 2 columns) */
  if (!sb.trans && N % (panel_bytes(sm, sb.root) / 2)) return false;
  bool a_regs = !ca || register_renaming(f, ca);
  if (!a_regs) {
    find_root(f, ca, &sa);
    if (sa.trans && (M / (wm / 4)) % 64) return false;
  }
  /* stage the operands (or reuse an earlier product's staging), then replace the dot */
  stage_once(f, sm, cb, dot, &sb);
  ir_val a = op->args[0], aslot;
  int trans = sb.trans ? 2 : 0;
  struct ir_builder b;
  if (a_regs) {
    ir_builder_before(&b, f, dot);
    aslot = ir_const_int(&b, ir_type_scalar(f, DT_I32), 0);
  } else {
    stage_once(f, sm, ca, dot, &sa);
    a = sa.buf;
    aslot = sa.slot;
    trans |= sa.trans;
  }
  op = &f->ops.v[dot];
  ir_val args[5] = {a, aslot, sb.buf, sb.slot, op->args[2]};
  ir_builder_before(&b, f, dot);
  ir_val r = ir_build1(&b, IR_WGMMA, f->values.v[op->res].type, args, 5);
  f->ops.v[ir_def_op(f, r)].i[0] = trans;
  ir_replace_uses(f, f->ops.v[dot].res, r);
  ir_op_remove(f, dot);
  /* the conversions go when no other product still uses them */
  if (!has_uses(f, f->ops.v[cb].res)) ir_op_remove(f, cb);
  if (!a_regs && ca != cb && !has_uses(f, f->ops.v[ca].res)) ir_op_remove(f, ca);
  return true;
}

/* Roots of 16-bit B operands that a wgmma over two warpgroups splitting N reads 32 columns
 * per warpgroup, MN-major (the fused attention backward's dQ = dS K at hd64: K's 64 columns
 * over two warpgroups): their buffers take 64-byte panels, the MN-major atom of 32 columns,
 * so each warpgroup's columns are whole panels. Every reader of such a buffer (TMA boxes,
 * K-major wgmma, ldmatrix) addresses panels generically. */
static void mark_narrow(struct ir_func *f, struct staged_map *sm) {
  if (!ir_func_wgmma(f)) return;
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_DOT) continue;
    const struct ir_type *ct = T(f, op->res);
    const struct ir_layout *cl = &f->layouts.v[ct->layout];
    if (cl->kind != IR_LAYOUT_MMA || cl->instr[0] != 64 || cl->warps_per_cta[1] < 2) continue;
    int N = ct->dims[1] / cl->warps_per_cta[1];
    uint32_t cb = convert_into(f, op->args[1]);
    if (!cb || N % 64 == 0 || N % 32 || ir_dtype_bytes((ir_dtype)T(f, op->args[1])->dtype) != 2) continue;
    struct staged sb;
    find_root(f, cb, &sb);
    if (!sb.trans && sb.root < sm->nroot) sm->narrow[sb.root] = true;
  }
}

void pass_smem_stage(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  uint32_t nops = f->ops.n;
  uint32_t nvals = f->values.n;
  struct staged_map sm = {ARENA_NEWN(pc->scratch, struct staged, nops + 1), nops,
                          ARENA_NEWN(pc->scratch, struct staged, nvals + 1), nvals,
                          ARENA_NEWN(pc->scratch, struct staged, nvals + 1), ARENA_NEWN(pc->scratch, bool, nvals + 1)};
  mark_narrow(f, &sm);
  for (uint32_t id = 1; id < nops; id++)
    if (f->ops.v[id].block && f->ops.v[id].code == IR_DOT && try_wgmma(f, &sm, id)) pc->changed = true;
  nops = f->ops.n;
  for (uint32_t id = 1; id < nops; id++) {
    struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_CONVERT_LAYOUT) continue;
    const struct ir_type *rt = T(f, op->res);
    const struct ir_layout *dl = &f->layouts.v[rt->layout];
    if (dl->kind != IR_LAYOUT_DOT_OP || f->layouts.v[dl->parent].kind != IR_LAYOUT_MMA) continue;
    /* only conversions feeding an mma.sync dot; wgmma's buffers are staged above */
    if (register_renaming(f, id)) continue;
    struct staged st;
    stage(f, &sm, id, id, &st);
    struct ir_builder b;
    ir_val la[2] = {st.buf, st.slot};
    ir_type_id ft = f->values.v[f->ops.v[id].res].type;
    /* A large loop-invariant operand (attention's Q at 32 rows per warp and D=128: 64
     * registers) stays in shared memory and is read again at each use inside a loop, as
     * FlashAttention-2 does; holding it in registers across the loop would spill. */
    struct ll lf;
    bool reload = f->blocks.v[f->ops.v[id].block].parent == 0 && ll_of_type(f, rt, f->warps, &lf) &&
                  ll_num_regs(&lf) > 64;
    ir_val res = f->ops.v[id].res;
    bool placed_in_loops = false;
    if (reload) {
      for (uint32_t u = 1; u < f->ops.n; u++) {
        struct ir_op *use = &f->ops.v[u];
        if (!use->block || !f->blocks.v[use->block].parent) continue;
        for (uint32_t k = 0; k < use->nargs; k++)
          if (use->args[k] == res) {
            ir_builder_before(&b, f, u);
            ir_val frag = ir_build1(&b, IR_LOCAL_LOAD, ft, la, 2);
            f->ops.v[ir_def_op(f, frag)].i[0] = st.trans;
            use = &f->ops.v[u];
            use->args[k] = frag;
            placed_in_loops = true;
          }
      }
    }
    ir_builder_before(&b, f, id);
    ir_val frag = ir_build1(&b, IR_LOCAL_LOAD, ft, la, 2);
    f->ops.v[ir_def_op(f, frag)].i[0] = st.trans;
    ir_replace_uses(f, res, frag); /* remaining uses outside loops; dead if none */
    (void)placed_in_loops;
    ir_op_remove(f, id);
    pc->changed = true;
  }
}
