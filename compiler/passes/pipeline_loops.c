/* pipeline_loops.c - software pipelining of a loop's tile copies over S stages, in one of
 * two forms.
 *
 * Needs: smem_stage's form, in which each staged tile of a loop body is
 *   barrier; async_copy %buf, %slot0, %T[idx...]; async_commit; async_wait 0; barrier
 * followed by its readers (local_load or wgmma of %buf, %slot0). Applies to for loops with
 * stages=S >= 2 whose copy indices are computed from the induction variable by pure ops
 * (and by loads of tensors the function does not write); a loop with stages=0 (no
 * `stages=` in the source) gets a depth from auto_stages (the shared memory it would
 * take), recorded in its attribute. Every buffer gets S slots. The loop's `depth`
 * attribute records how many wgmma groups of
 * earlier iterations may still be reading when a slot is refilled (the wgmma-async pass
 * makes that many in flight).
 *
 * Ring form (TMA + mbarriers): when the target has TMA, the schedule allows it, every copy
 * is TMA-eligible (16-byte aligned base and strides, contiguous rows, a buffer layout that
 * is one of TMA's swizzles, boxes of at most 256) and the buffers are read by wgmma only.
 * Two arrays of S mbarriers: full[s] completes when slot s has landed (one arrival with the
 * expected bytes, plus the TMA bytes), empty[s] when every warpgroup has released it (one
 * arrival per warpgroup). A prologue fills slots 0..S-2; iteration i waits on full, computes,
 * releases its slot and refills the slot of iteration i-1 with iteration i+S-1 once that is
 * released everywhere. No CTA-wide barrier remains in the loop; fills past the end are
 * skipped (a TMA still in flight when the program exits would write freed memory).
 *
 *   for %k ... {                              %full = mbar_alloc {count=1}; %empty = ...
 *     <copy group into slot 0>                barrier; %d = tma_desc %A ...
 *     %a = wgmma %buf, %0, ...        =>      if %lb < %ub { mbar_expect_tx %full, 0; tma_load ... }
 *   }                                         for %k ... iter(.., %rd, %ph, %wr, %wph) {
 *                                               mbar_wait %full, %rd, %ph
 *                                               %a = wgmma %buf, %rd, ...
 *                                               mbar_arrive %empty, %rd {per=128}
 *                                               if %k + 2*%s < %ub { mbar_wait %empty, %wr, %wph^1
 *                                                 mbar_expect_tx %full, %wr; tma_load ... }
 *                                               yield .., next(%rd, %ph), next(%wr, %wph) }
 *
 * cp.async form (otherwise): a prologue issues the copies of iterations 0..D-1 (D = S-1 -
 * depth) into slots 0..D-1, one commit group each; iteration i waits for its group
 * (async_wait D-1), meets the other threads (barrier: its data is visible, and everybody
 * is done with the slot about to be refilled), issues the copies of iteration i+D, and
 * computes on slot i mod S. Copies past the end read nothing (cp.async zero-fills).
 *
 *   for %k = %lb to %ub step %s {             copies for %lb, %lb+%s, ... (D groups)
 *     <copy group into slot 0>         =>     for %k ... iter(%rd = 0, %wr = D) {
 *     %a = local_load %buf, %0                  async_wait {pending=D-1}; barrier
 *     ...                                       copies for %k + D*%s into slot %wr
 *   }                                           %a = local_load %buf, %rd ...
 *                                               yield ..., (%rd+1) mod S, (%wr+1) mod S }
 *                                             async_wait {pending=0}                      */
#include <math.h>
#include <string.h>

#include "layout.h"
#include "passes.h"

enum { MAX_COPIES = 16, MAX_CHAIN = 128 };

struct chain {
  uint32_t ops[MAX_CHAIN]; /* body ops computing copy indices from the induction variable, in order */
  uint32_t n;
};

/* Adds the ops that compute v inside the body (from the induction variable and values
 * defined outside) to the chain. False if v depends on anything else. Pure ops, and loads
 * and gathers of tensors the function never writes (a paged cache's block table: reading
 * it iterations ahead sees the same values). */
static bool collect(struct ir_func *f, uint32_t body, ir_val iv, ir_val v, struct chain *c) {
  if (v == iv || !ir_defined_within(f, v, body)) return true;
  uint32_t d = ir_def_op(f, v);
  if (!d || f->ops.v[d].block != body) return false;
  const struct ir_op *op = &f->ops.v[d];
  if ((!(ir_ops[op->code].flags & OPF_PURE) && !ir_reads_unwritten(f, d, IR_BODY_BLOCK)) || op->nregions) return false;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->ops[i] == d) return true;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!collect(f, body, iv, op->args[k], c)) return false;
  if (c->n == MAX_CHAIN) return false;
  c->ops[c->n++] = d;
  return true;
}

/* Emits the chain with the induction variable replaced by `iv_value` into m; ops whose
 * result m already maps (loads done ahead) are not emitted. */
static void emit_chain(struct ir_builder *b, const struct chain *c, ir_val iv, ir_val iv_value, struct ir_valmap *m) {
  ir_map_set(m, iv, iv_value);
  for (uint32_t i = 0; i < c->n; i++) {
    const struct ir_op *op = &b->f->ops.v[c->ops[i]];
    if (op->nres == 1 && ir_mapped(m, op->res) != op->res) continue;
    ir_clone_op(b, c->ops[i], m);
  }
}

/* The chain, then the copies of one iteration as async_copy into `slot` and a commit. The
 * results of the chain's loads lds[0..nld) are given (pre[j]) when nld > 0. */
static void emit_copies(struct ir_builder *b, const struct chain *c, ir_val iv, ir_val iv_value,
                        const uint32_t *copies, uint32_t ncopies, ir_val slot, const uint32_t *lds,
                        const ir_val *pre, uint32_t nld) {
  struct ir_func *f = b->f;
  struct ir_valmap m;
  ir_valmap_init(&m, f, f->arena);
  for (uint32_t j = 0; j < nld; j++) ir_map_set(&m, f->ops.v[lds[j]].res, pre[j]);
  emit_chain(b, c, iv, iv_value, &m);
  for (uint32_t i = 0; i < ncopies; i++) {
    struct ir_op src = f->ops.v[copies[i]];
    ir_val args[3 + IR_MAX_RANK];
    args[0] = src.args[0];
    args[1] = slot;
    for (uint32_t k = 2; k < src.nargs; k++) args[k] = ir_mapped(&m, src.args[k]);
    uint32_t op = ir_build(b, IR_ASYNC_COPY, args, src.nargs, NULL, 0);
    f->ops.v[op].i[0] = src.i[0];
  }
  ir_build(b, IR_ASYNC_COMMIT, NULL, 0, NULL, 0);
}

static void remove_if(struct ir_func *f, uint32_t blk, int pos, ir_opcode code) {
  struct ir_block *b = &f->blocks.v[blk];
  if (pos < 0 || (uint32_t)pos >= b->ops.n) return;
  uint32_t id = b->ops.v[pos];
  if (f->ops.v[id].code == code) ir_op_remove(f, id);
}

/* An `if cond { }` with empty branches (both end in yield); returns the then block. */
static uint32_t build_if_then(struct ir_builder *b, ir_val cond) {
  uint32_t op = ir_build_if(b, cond, NULL, 0);
  for (int side = 0; side < 2; side++) {
    struct ir_builder y;
    ir_builder_at_end(&y, b->f, b->f->ops.v[op].region + (uint32_t)side);
    ir_build(&y, IR_YIELD, NULL, 0, NULL, 0);
  }
  return b->f->ops.v[op].region;
}

/* Advances a ring position: slot' = slot + 1 wrapping at S, phase' flips on the wrap. */
static void ring_next(struct ir_builder *b, ir_val slot, ir_val phase, int S, ir_val *nslot, ir_val *nphase) {
  ir_type_id i32 = ir_type_scalar(b->f, DT_I32);
  ir_val s1 = ir_binary(b, IR_ADD, slot, ir_const_int(b, i32, 1));
  ir_val wrap = ir_binary(b, IR_EQ, s1, ir_const_int(b, i32, S));
  ir_val a[3] = {wrap, ir_const_int(b, i32, 0), s1};
  *nslot = ir_build1(b, IR_SELECT, i32, a, 3);
  if (phase) {
    ir_val a2[3] = {wrap, ir_binary(b, IR_XOR, phase, ir_const_int(b, i32, 1)), phase};
    *nphase = ir_build1(b, IR_SELECT, i32, a2, 3);
  }
}

/* ---- TMA eligibility ---- */

/* The box of a TMA copy of the slice `mask` of tensor parameter t into a single-slot buffer
 * of type bt: tensor rank dims, 1 on dropped dimensions, the buffer's rows and panel width
 * on the sliced ones, in the buffer's shared layout. False when TMA cannot do this copy. */
bool pass_tma_box(struct ir_func *f, ir_val t, uint64_t mask, const struct ir_type *bt, struct ir_type *box) {
  const struct ir_param *p = ir_param_of(f, t);
  const struct ir_type *tt = ir_vtype(f, t);
  if (!p || tt->kind != IR_TY_TENSOR || bt->rank != 2 || !bt->layout) return false;
  const struct ir_layout *l = &f->layouts.v[bt->layout];
  int rank = tt->rank, eb = ir_dtype_bytes((ir_dtype)tt->dtype);
  if (l->kind != IR_LAYOUT_SHARED || tt->dtype != bt->dtype) return false;
  if (__builtin_popcountll(mask) != 2 || !(mask >> (rank - 1) & 1) || mask >> rank) return false;
  if (eb != 1 && eb != 2 && eb != 4) return false;
  /* 16-byte aligned base, contiguous rows, 16-byte multiple strides */
  if (!ir_facts_allow_vector(p, tt, rank - 1, 16)) return false;
  int rows = bt->dims[0], cols = bt->dims[1], inner = l->panel ? l->panel : cols;
  int row_bytes = inner * eb;
  if (rows > 256 || inner > 256 || row_bytes % 16 || cols % inner) return false;
  if (l->max_phase > 1) { /* one of TMA's swizzles: 16-byte units, XOR with the row's phase */
    if (l->vec * eb != 16) return false;
    bool sw128 = row_bytes == 128 && l->per_phase == 1 && l->max_phase == 8;
    bool sw64 = row_bytes == 64 && l->per_phase == 2 && l->max_phase == 4;
    bool sw32 = row_bytes == 32 && l->per_phase == 4 && l->max_phase == 2;
    if (!sw128 && !sw64 && !sw32) return false;
  }
  memset(box, 0, sizeof *box);
  box->kind = IR_TY_TILE;
  box->dtype = tt->dtype;
  box->rank = (uint8_t)rank;
  box->layout = bt->layout;
  int seen = 0;
  for (int d = 0; d < rank; d++)
    box->dims[d] = !(mask >> d & 1) ? 1 : seen++ == 0 ? rows : inner;
  return true;
}

/* The box of a TMA copy for async_copy op `cp` (its buffer still single-slot). */
static bool tma_box(struct ir_func *f, uint32_t cp, struct ir_type *box) {
  const struct ir_op *op = &f->ops.v[cp];
  return pass_tma_box(f, op->args[2], (uint64_t)op->i[0], ir_vtype(f, op->args[0]), box);
}

/* Whether every reader of the copied buffers in block blk (and nested blocks) is a wgmma
 * (whose release of a slot the ring form can place); *any is set when there is one. */
static bool readers_are_wgmma(struct ir_func *f, uint32_t blk, const uint32_t *copies, uint32_t ncopies, bool *any) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs && op->code != IR_ASYNC_COPY; k++)
      for (uint32_t c = 0; c < ncopies; c++) {
        if (op->args[k] != f->ops.v[copies[c]].args[0]) continue;
        if (op->code != IR_WGMMA) return false;
        *any = true;
      }
    for (uint32_t r = 0; r < op->nregions; r++)
      if (!readers_are_wgmma(f, op->region + r, copies, ncopies, any)) return false;
  }
  return true;
}

/* ---- the two forms ---- */

struct loop_info {
  uint32_t loop, body;
  ir_val iv;
  int S;
  uint32_t copies[MAX_COPIES], ncopies;
  uint8_t flat[MAX_COPIES]; /* the copy's tensor map is flat (ring_small_loads) */
  struct chain c;
};

/* Gives every copied buffer S slots. */
static void multi_buffer(struct ir_func *f, const struct loop_info *L) {
  for (uint32_t i = 0; i < L->ncopies; i++) {
    ir_val buf = f->ops.v[L->copies[i]].args[0];
    struct ir_type t = *ir_vtype(f, buf);
    if (t.rank == 2) {
      t.dims[2] = t.dims[1];
      t.dims[1] = t.dims[0];
      t.dims[0] = L->S;
      t.rank = 3;
      f->values.v[buf].type = ir_type_intern(f, &t);
    }
  }
}

/* Rebuilds the loop with `nextra` more carried values (inits given), removes the original
 * copy groups from the body and returns the new loop. */
static uint32_t rebuild_loop(struct ir_func *f, const struct loop_info *L, const ir_val *extra, uint32_t nextra) {
  uint32_t nl = ir_for_add_carried(f, L->loop, extra, nextra);
  uint32_t nbody = f->ops.v[nl].region;
  /* drop the original copy groups: barrier, copy, commit, wait, barrier */
  for (uint32_t i = 0; i < L->ncopies; i++) {
    struct ir_block *nb = &f->blocks.v[nbody];
    int pos = 0;
    while ((uint32_t)pos < nb->ops.n && nb->ops.v[pos] != L->copies[i]) pos++;
    remove_if(f, nbody, pos + 3, IR_BARRIER);
    remove_if(f, nbody, pos + 2, IR_ASYNC_WAIT);
    remove_if(f, nbody, pos + 1, IR_ASYNC_COMMIT);
    ir_op_remove(f, L->copies[i]);
    remove_if(f, nbody, pos - 1, IR_BARRIER);
  }
  return nl;
}

/* Readers (local_load, wgmma) of the copied buffers in `body` read slot `rd`; returns the
 * last reader in the body's own op list (0: none at the top level). */
static uint32_t redirect_readers(struct ir_func *f, const struct loop_info *L, uint32_t nbody, ir_val rd) {
  for (uint32_t i = 1; i < f->ops.n; i++) {
    struct ir_op *op = &f->ops.v[i];
    if (!op->block || (op->code != IR_LOCAL_LOAD && op->code != IR_WGMMA) || !ir_defined_within(f, op->res, nbody))
      continue;
    ir_val a[5];
    memcpy(a, op->args, sizeof(ir_val) * op->nargs);
    bool changed = false;
    for (uint32_t k = 0; k < L->ncopies; k++) {
      ir_val buf = f->ops.v[L->copies[k]].args[0];
      if (a[0] == buf) a[1] = rd, changed = true;
      if (op->code == IR_WGMMA && a[2] == buf) a[3] = rd, changed = true;
    }
    if (changed) ir_op_set_args(f, i, a, op->nargs);
  }
  const struct ir_block *nb = &f->blocks.v[nbody];
  uint32_t last = 0;
  for (uint32_t i = 0; i < nb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[nb->ops.v[i]];
    if (op->code == IR_WGMMA || op->code == IR_LOCAL_LOAD)
      for (uint32_t k = 0; k < L->ncopies; k++)
        if (op->args[0] == f->ops.v[L->copies[k]].args[0] || (op->code == IR_WGMMA && op->args[2] == f->ops.v[L->copies[k]].args[0]))
          last = nb->ops.v[i];
  }
  return last;
}

/* One iteration's TMA fill of slot `slot`: the chain at iv_value, the expected bytes on
 * full[slot], one tma_load per copy. */
static void emit_fill(struct ir_builder *b, const struct loop_info *L, ir_val iv_value, const ir_val *descs, ir_val full,
                      ir_val slot, int64_t bytes) {
  struct ir_func *f = b->f;
  struct ir_valmap m;
  ir_valmap_init(&m, f, f->arena);
  emit_chain(b, &L->c, L->iv, iv_value, &m);
  ir_val ea[2] = {full, slot};
  uint32_t e = ir_build(b, IR_MBAR_EXPECT_TX, ea, 2, NULL, 0);
  f->ops.v[e].i[0] = bytes;
  for (uint32_t i = 0; i < L->ncopies; i++) {
    struct ir_op src = f->ops.v[L->copies[i]];
    ir_val args[5 + IR_MAX_RANK];
    args[0] = src.args[0];
    args[1] = slot;
    args[2] = full;
    args[3] = slot;
    args[4] = descs[i];
    for (uint32_t k = 3; k < src.nargs; k++) args[2 + k] = ir_mapped(&m, src.args[k]);
    uint32_t op = ir_build(b, IR_TMA_LOAD, args, src.nargs + 2, NULL, 0);
    f->ops.v[op].i[0] = src.i[0];
  }
}

static bool pipeline_ring(struct pass_ctx *pc, struct loop_info *L, const struct ir_type *boxes, int64_t step) {
  struct ir_func *f = pc->f;
  int S = L->S;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  multi_buffer(f, L);
  int64_t bytes = 0;
  for (uint32_t i = 0; i < L->ncopies; i++) {
    const struct ir_type *bt = ir_vtype(f, f->ops.v[L->copies[i]].args[0]);
    bytes += (int64_t)bt->dims[1] * bt->dims[2] * ir_dtype_bytes((ir_dtype)bt->dtype);
  }
  struct ir_builder b;
  ir_builder_before(&b, f, L->loop);
  b.loc = f->ops.v[L->loop].loc;
  /* the barriers, visible to every thread before first use */
  int32_t sdim[1] = {S};
  ir_type_id bars = ir_type_tile(f, DT_I64, 1, sdim);
  ir_val full = ir_build1(&b, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, full)].i[0] = 1;
  ir_val empty = ir_build1(&b, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, empty)].i[0] = f->warps / 4; /* one arrival per warpgroup */
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val descs[MAX_COPIES];
  for (uint32_t i = 0; i < L->ncopies; i++) {
    ir_type_id bt = ir_type_intern(f, &boxes[i]);
    ir_val t = f->ops.v[L->copies[i]].args[2];
    descs[i] = ir_build1(&b, IR_TMA_DESC, bt, &t, 1);
    f->ops.v[ir_def_op(f, descs[i])].i[0] = L->flat[i];
  }
  /* prologue: slots 0 .. S-2, each only if its iteration exists */
  const struct ir_op *lp = &f->ops.v[L->loop];
  ir_val lb = lp->args[0], ub = lp->args[1], stepv = lp->args[2];
  ir_type_id ivt = f->values.v[lb].type;
  for (int s = 0; s < S - 1; s++) {
    ir_val it = s ? ir_binary(&b, IR_ADD, lb, ir_const_int(&b, ivt, s * step)) : lb;
    uint32_t then = build_if_then(&b, ir_binary(&b, IR_LT, it, ub));
    struct ir_builder tb;
    ir_builder_before(&tb, f, VEC_LAST(f->blocks.v[then].ops));
    emit_fill(&tb, L, it, descs, full, ir_const_int(&tb, i32, s), bytes);
  }
  /* the loop with the ring positions: read slot/phase, refill slot/phase */
  ir_val zero = ir_const_int(&b, i32, 0);
  ir_val extra[4] = {zero, zero, ir_const_int(&b, i32, S - 1), zero};
  uint32_t nl = rebuild_loop(f, L, extra, 4);
  f->ops.v[nl].i[1] = tl_sched_get(f->sched.wait, 1) ? 1 : 0; /* wgmma groups left in flight */
  uint32_t nbody = f->ops.v[nl].region;
  uint32_t nc = f->ops.v[nl].nargs - 3 - 4;
  ir_val niv = f->blocks.v[nbody].args;
  L->iv = niv; /* the moved body (the copies' indices and their chain) now uses it */
  ir_val rd = niv + 1 + nc, ph = rd + 1, wr = rd + 2, wph = rd + 3;
  uint32_t last_reader = redirect_readers(f, L, nbody, rd);
  /* top: wait until the slot has landed */
  ir_builder_before(&b, f, f->blocks.v[nbody].ops.v[0]);
  ir_val wa[3] = {full, rd, ph};
  ir_build(&b, IR_MBAR_WAIT, wa, 3, NULL, 0);
  /* after the last reader: release the slot (one arrival per warpgroup) */
  struct ir_block *nb = &f->blocks.v[nbody];
  uint32_t after = 0;
  for (uint32_t i = 0; i + 1 < nb->ops.n; i++)
    if (nb->ops.v[i] == last_reader) after = nb->ops.v[i + 1];
  if (!after) after = VEC_LAST(nb->ops);
  ir_builder_before(&b, f, after);
  ir_val ra[2] = {empty, rd};
  uint32_t arr = ir_build(&b, IR_MBAR_ARRIVE, ra, 2, NULL, 0);
  f->ops.v[arr].i[0] = 128;
  /* end: refill the slot of the previous iteration with iteration i + S - 1 */
  uint32_t yid = VEC_LAST(f->blocks.v[nbody].ops);
  ir_builder_before(&b, f, yid);
  ir_val ahead = ir_binary(&b, IR_ADD, niv, ir_const_int(&b, ivt, (S - 1) * step));
  uint32_t then = build_if_then(&b, ir_binary(&b, IR_LT, ahead, ub));
  struct ir_builder tb;
  ir_builder_before(&tb, f, VEC_LAST(f->blocks.v[then].ops));
  ir_val par = ir_binary(&tb, IR_XOR, wph, ir_const_int(&tb, i32, 1));
  ir_val ew[3] = {empty, wr, par};
  ir_build(&tb, IR_MBAR_WAIT, ew, 3, NULL, 0);
  emit_fill(&tb, L, ahead, descs, full, wr, bytes);
  /* advance both positions */
  ir_val rdn, phn, wrn, wphn;
  ring_next(&b, rd, ph, S, &rdn, &phn);
  ring_next(&b, wr, wph, S, &wrn, &wphn);
  const struct ir_op *y = &f->ops.v[yid];
  ir_val *yargs = ARENA_NEWN(f->arena, ir_val, y->nargs + 5);
  for (uint32_t k = 0; k < y->nargs; k++) yargs[k] = y->args[k];
  yargs[nc] = rdn, yargs[nc + 1] = phn, yargs[nc + 2] = wrn, yargs[nc + 3] = wphn;
  ir_op_set_args(f, yid, yargs, nc + 4);
  (void)stepv;
  return true;
}

enum { MAX_PREFETCH = 4, PREFETCH_REGS = 32, MAX_AHEAD = 4 };
static int regs_of(struct ir_func *f, ir_val v);

/* The chain's loads (a paged cache's block table read to address the copies), when they
 * take at most PREFETCH_REGS registers per thread together; 0 otherwise. */
static uint32_t chain_loads(struct ir_func *f, const struct chain *c, uint32_t *lds) {
  uint32_t n = 0;
  int regs = 0;
  for (uint32_t i = 0; i < c->n; i++) {
    const struct ir_op *op = &f->ops.v[c->ops[i]];
    if (ir_ops[op->code].flags & OPF_PURE) continue;
    if (n == MAX_PREFETCH || op->nres != 1) return 0;
    regs += regs_of(f, op->res);
    lds[n++] = c->ops[i];
  }
  return regs <= PREFETCH_REGS ? n : 0;
}

/* The results of the chain's loads lds[0..nld) at iteration iv_value, emitted at b. */
static void emit_loads_at(struct ir_builder *b, const struct chain *c, ir_val iv, ir_val iv_value, const uint32_t *lds,
                          uint32_t nld, ir_val *out) {
  struct ir_valmap m;
  ir_valmap_init(&m, b->f, b->f->arena);
  emit_chain(b, c, iv, iv_value, &m);
  for (uint32_t j = 0; j < nld; j++) out[j] = ir_mapped(&m, b->f->ops.v[lds[j]].res);
}

static bool pipeline_cp_async(struct pass_ctx *pc, struct loop_info *L, bool wgmma_readers) {
  struct ir_func *f = pc->f;
  int S = L->S;
  /* wgmma groups of the previous iteration may still read while this one refills: copy one
   * stage less far ahead (needs S >= 3 to keep a stage in flight) */
  int depth = wgmma_readers && tl_sched_get(f->sched.wait, 1) && S >= 3 ? 1 : 0;
  int D = S - 1 - depth;
  struct ir_builder b;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  multi_buffer(f, L);
  /* prologue: iterations 0 .. D-1 */
  const struct ir_op *lp = &f->ops.v[L->loop];
  ir_val lb = lp->args[0], step = lp->args[2];
  ir_type_id ivt = f->values.v[lb].type;
  ir_builder_before(&b, f, L->loop);
  for (int s = 0; s < D; s++) {
    ir_val ivs = lb;
    if (s) {
      ir_val k = ir_const_int(&b, ivt, s);
      ivs = ir_binary(&b, IR_ADD, lb, ir_binary(&b, IR_MUL, k, step));
    }
    emit_copies(&b, &L->c, L->iv, ivs, L->copies, L->ncopies, ir_const_int(&b, i32, s), NULL, NULL, 0);
  }
  /* with prefetch=1, the chain's loads (the copies' addresses: a block table) run one
   * iteration ahead of the copies, so that issuing them does not wait for a load: the loop
   * carries the values for iteration i + D, loaded during iteration i - 1 (first: here).
   * Not measured yet, hence with the schedule option */
  uint32_t lds[MAX_PREFETCH], nld = tl_sched_get(f->sched.prefetch, 0) ? chain_loads(f, &L->c, lds) : 0;
  ir_val extra[2 + MAX_PREFETCH] = {ir_const_int(&b, i32, 0), ir_const_int(&b, i32, D)};
  if (nld) {
    ir_val first = ir_binary(&b, IR_ADD, lb, ir_binary(&b, IR_MUL, ir_const_int(&b, ivt, D), step));
    emit_loads_at(&b, &L->c, L->iv, first, lds, nld, extra + 2);
  }
  /* the loop again, with two more carried values: the slot to read and the slot to fill */
  uint32_t nl = rebuild_loop(f, L, extra, 2 + nld);
  f->ops.v[nl].i[1] = depth;
  uint32_t nbody = f->ops.v[nl].region;
  uint32_t nc = f->ops.v[nl].nargs - 3 - 2 - nld;
  ir_val niv = f->blocks.v[nbody].args;
  L->iv = niv; /* the moved body (the copies' indices and their chain) now uses it */
  ir_val rd = niv + 1 + nc, wr = rd + 1;
  ir_val cur[MAX_PREFETCH], next[MAX_PREFETCH];
  for (uint32_t j = 0; j < nld; j++) cur[j] = wr + 1 + j;
  redirect_readers(f, L, nbody, rd);
  /* top of the body: wait, barrier, issue the copies of iteration i + D */
  ir_builder_before(&b, f, f->blocks.v[nbody].ops.v[0]);
  uint32_t w = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
  f->ops.v[w].i[0] = D - 1;
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val ahead = ir_binary(&b, IR_ADD, niv, ir_binary(&b, IR_MUL, ir_const_int(&b, ivt, D), f->ops.v[nl].args[2]));
  if (nld) emit_loads_at(&b, &L->c, L->iv, ir_binary(&b, IR_ADD, ahead, f->ops.v[nl].args[2]), lds, nld, next);
  emit_copies(&b, &L->c, L->iv, ahead, L->copies, L->ncopies, wr, lds, cur, nld);
  /* yield: advance the slots */
  uint32_t yid = VEC_LAST(f->blocks.v[nbody].ops);
  ir_builder_before(&b, f, yid);
  ir_val rdn, wrn;
  ring_next(&b, rd, 0, S, &rdn, NULL);
  ring_next(&b, wr, 0, S, &wrn, NULL);
  const struct ir_op *y = &f->ops.v[yid];
  ir_val *yargs = ARENA_NEWN(f->arena, ir_val, y->nargs + 3 + nld);
  for (uint32_t k = 0; k < y->nargs; k++) yargs[k] = y->args[k];
  yargs[nc] = rdn;
  yargs[nc + 1] = wrn;
  for (uint32_t j = 0; j < nld; j++) yargs[nc + 2 + j] = next[j];
  ir_op_set_args(f, yid, yargs, nc + 2 + nld);
  /* after the loop: drain */
  struct ir_block *outer = &f->blocks.v[f->ops.v[nl].block];
  uint32_t pos = 0;
  while (outer->ops.v[pos] != nl) pos++;
  if (pos + 1 < outer->ops.n) {
    ir_builder_before(&b, f, outer->ops.v[pos + 1]);
  } else {
    ir_builder_at_end(&b, f, f->ops.v[nl].block);
  }
  uint32_t w0 = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
  f->ops.v[w0].i[0] = 0;
  /* the buffers may be reused by later allocations (smem is allocated by liveness): every
   * thread must be done reading them first */
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  return true;
}

/* ---- register prefetch (loops without asynchronous copies) ----
 *
 * A loop whose loads are not staged (row-wise kernels: softmax's chunks, a norm's rows)
 * waits for each iteration's loads before computing on them. The loads of iteration i + 1
 * are issued at the start of iteration i instead, into values the loop carries, so they
 * are in flight while iteration i computes (one iteration of lookahead, at the cost of
 * their registers: at most PREFETCH_REGS 32-bit registers per thread in all):
 *
 *   for %c = %lb to %ub step %s {          %x0 = load %X[.., %lb]
 *     %x = load %X[.., %c]          =>     for %c ... iter(.., %x = %x0) {
 *     ...uses of %x...                       %xn = load %X[.., %c + %s]
 *     yield ...                              ...uses of %x...
 *   }                                        yield ..., %xn }
 *
 * With prefetch=D the loop carries D iterations' loads and issues those of iteration
 * i + D. Loads only of tensors the kernel never writes, with indices computed from the loop
 * variable like the copies' (collect), in loops without products, and only where every
 * index that moves with the loop is on a dimension the load bounds-checks (its mask): the
 * loads past the last iteration then read nothing out of bounds, and their values are
 * dropped. */
static int regs_of(struct ir_func *f, ir_val v) {
  const struct ir_type *t = ir_vtype(f, v);
  struct ll l;
  if (t->kind != IR_TY_TILE || t->rank == 0 || !ll_of_type(f, t, f->warps, &l)) return 1 << 20;
  return (int)(((int64_t)ll_num_regs(&l) * ir_dtype_bytes((ir_dtype)t->dtype) + 3) / 4);
}

/* Bytes of a shared buffer's type. */
static int64_t buffer_bytes(const struct ir_func *f, ir_val buf) {
  const struct ir_type *t = ir_vtype(f, buf);
  int64_t n = ir_dtype_bytes((ir_dtype)t->dtype);
  for (int d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

/* The loads ahead by default: CACHED_AHEAD in a loop that reads back a row-cache buffer so
 * long that no third program fits beside ROW_CACHE_PROGRAMS (16 warps each: the output
 * pass's loads of a norm's weights, from L2, are each waited for with too few warps to
 * cover that), where the loop starts at 0 (row-align did not shift it, so those loads lie
 * on their own 16 bytes). Measured on an H100 (PERF.md 119): 4096 x 50264 f16 layernorm 58
 * -> 76% of the copy, rmsnorm 75 -> 79%; prefetch at rows of 32 KB or 64 KB (four or
 * three programs) lost 2-40 points. 0 elsewhere. */
enum { CACHED_AHEAD = 2 };
static int default_ahead(const struct ir_func *f, const struct loop_info *L) {
  int64_t lb;
  if (!f->target || !row_cache_applies(f) || !ir_value_const_int(f, f->ops.v[L->loop].args[0], &lb) || lb != 0)
    return 0;
  uint32_t reads[4], n = 0;
  ir_block_collect(f, L->body, IR_LOCAL_LOAD, reads, &n, 4);
  for (uint32_t i = 0; i < n; i++) {
    ir_val buf = f->ops.v[reads[i]].args[0];
    uint32_t def = ir_def_op(f, buf);
    if (def && f->ops.v[def].code == IR_LOCAL_ALLOC && row_cache_crowds(f->target, buffer_bytes(f, buf)))
      return CACHED_AHEAD;
  }
  return 0;
}

static bool prefetch_loop(struct ir_func *f, struct loop_info *L) {
  /* off unless the schedule asks (prefetch=D, D iterations ahead) or a long row cache's
   * later loop (default_ahead): measured on the H200, softmax f16 8192^2 +5%, rmsnorm +3%,
   * layernorm -14% (PERF.md 38). Loops with products are register-bound rather than
   * latency-bound (their Tensor Core operands are staged and pipelined as copies; an f32
   * FMA product spilled with its operands prefetched) */
  static const uint16_t products[2] = {IR_DOT, IR_WGMMA};
  int D = tl_sched_get(f->sched.prefetch, default_ahead(f, L));
  if (D <= 0 || ir_block_has_op(f, L->body, products, 2)) return false;
  if (D > MAX_AHEAD) D = MAX_AHEAD;
  const struct ir_block *bb = &f->blocks.v[L->body];
  uint32_t loads[MAX_PREFETCH], n = 0;
  int regs = 0;
  for (uint32_t i = 0; i < bb->ops.n && n < MAX_PREFETCH; i++) {
    uint32_t id = bb->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_LOAD || op->nres != 1 || !ir_reads_unwritten(f, id, IR_BODY_BLOCK)) continue;
    /* every index that moves with the loop on a bounds-checked dimension: the loads past
     * the last iteration then read nothing (a scalar row index is not checked) */
    bool moves = false, checked = true;
    for (uint32_t k = 1; k < op->nargs; k++)
      if (ir_defined_within(f, op->args[k], L->body)) {
        moves = true;
        checked = checked && (op->i[0] >> (k - 1) & 1);
      }
    if (!checked) continue;
    int r = D * regs_of(f, op->res);
    if (!moves || regs + r > PREFETCH_REGS) continue;
    struct chain c = L->c; /* taken only if every index is computable ahead */
    bool ok = true;
    for (uint32_t k = 1; k < op->nargs && ok; k++) ok = collect(f, L->body, L->iv, op->args[k], &c);
    if (!ok) continue;
    L->c = c;
    loads[n++] = id;
    regs += r;
  }
  if (!n) return false;
  const struct ir_op *lp = &f->ops.v[L->loop];
  ir_val lb = lp->args[0], step = lp->args[2];
  ir_type_id ivt = f->values.v[lb].type;
  struct ir_builder b;
  ir_builder_before(&b, f, L->loop);
  b.loc = lp->loc;
  /* the loop carries, per load, the values of iterations i .. i + D - 1 (slot a * n + j:
   * load j of iteration i + a); the prologue loads iterations 0 .. D - 1 */
  ir_val init[MAX_AHEAD * MAX_PREFETCH];
  for (int a = 0; a < D; a++) {
    ir_val at = lb;
    if (a) at = ir_binary(&b, IR_ADD, lb, a == 1 ? step : ir_binary(&b, IR_MUL, ir_const_int(&b, ivt, a), step));
    struct ir_valmap m;
    ir_valmap_init(&m, f, f->arena);
    emit_chain(&b, &L->c, L->iv, at, &m);
    for (uint32_t j = 0; j < n; j++) {
      uint32_t c = ir_clone_op(&b, loads[j], &m); /* (it may move f->ops.v) */
      init[a * n + j] = f->ops.v[c].res;
    }
  }
  uint32_t nc = f->ops.v[L->loop].nargs - 3;
  uint32_t nl = ir_for_add_carried(f, L->loop, init, (uint32_t)D * n);
  /* pfunroll=1: D + 1 copies of the body, so that the D values in flight and the one in use
   * rotate through registers without copies */
  if (tl_sched_get(f->sched.pfunroll, 0)) f->ops.v[nl].i[2] = D + 1;
  uint32_t nbody = f->ops.v[nl].region;
  ir_val niv = f->blocks.v[nbody].args;
  /* iteration i + D's loads, issued first: in flight while this iteration (and the D - 1
   * after it) compute */
  uint32_t yid = VEC_LAST(f->blocks.v[nbody].ops);
  ir_builder_before(&b, f, f->blocks.v[nbody].ops.v[0]);
  struct ir_valmap m;
  ir_valmap_init(&m, f, f->arena);
  ir_val nstep = f->ops.v[nl].args[2];
  ir_val ahead = D == 1 ? nstep : ir_binary(&b, IR_MUL, ir_const_int(&b, ivt, D), nstep);
  emit_chain(&b, &L->c, niv, ir_binary(&b, IR_ADD, niv, ahead), &m);
  ir_val next[MAX_PREFETCH];
  for (uint32_t j = 0; j < n; j++) {
    uint32_t c = ir_clone_op(&b, loads[j], &m);
    next[j] = f->ops.v[c].res;
  }
  /* this iteration's values come from the carried ones */
  for (uint32_t j = 0; j < n; j++) {
    ir_replace_uses(f, f->ops.v[loads[j]].res, niv + 1 + nc + j);
    ir_op_remove(f, loads[j]);
  }
  /* yield: every slot moves one iteration closer, the new loads take the last */
  const struct ir_op *y = &f->ops.v[yid];
  ir_val *yargs = ARENA_NEWN(f->arena, ir_val, y->nargs + (uint32_t)D * n + 1);
  for (uint32_t k = 0; k < y->nargs; k++) yargs[k] = y->args[k];
  for (int a = 0; a + 1 < D; a++)
    for (uint32_t j = 0; j < n; j++) yargs[nc + a * n + j] = niv + 1 + nc + (a + 1) * n + j;
  for (uint32_t j = 0; j < n; j++) yargs[nc + (D - 1) * n + j] = next[j];
  ir_op_set_args(f, yid, yargs, nc + (uint32_t)D * n);
  return true;
}

/* The stage count of a loop that did not ask for one (stages=0 in the IR: the source had no
 * `stages=`): 3 when the function's buffers with the loop's copies in 3 slots, plus the
 * largest layout conversion's scratch, take at most half the target's shared memory (two
 * programs still fit on a multiprocessor), else 2 when that with 2 slots fits, else 1 (no
 * pipelining). Every buffer counts whole, as if none were reused: an upper bound, so a
 * kernel that fitted unpipelined never fails to fit because of the choice. Loops of fewer
 * than 4 iterations known at compile time are not pipelined. */
static int auto_stages(const struct ir_func *f, const struct loop_info *L) {
  /* a short loop of known length (an inner loop over a quantization group: ub = lb + 64)
   * refills its pipeline at every entry for little overlap: left alone */
  const struct ir_op *lp = &f->ops.v[L->loop];
  int64_t lb, ub, step, len = -1;
  uint32_t d = ir_def_op(f, lp->args[1]);
  if (ir_value_const_int(f, lp->args[2], &step) && step > 0) {
    if (ir_value_const_int(f, lp->args[0], &lb) && ir_value_const_int(f, lp->args[1], &ub)) len = ub - lb;
    else if (d && f->ops.v[d].code == IR_ADD && f->ops.v[d].args[0] == lp->args[0] &&
             ir_value_const_int(f, f->ops.v[d].args[1], &ub))
      len = ub;
  }
  if (len >= 0 && (len + step - 1) / step < 4) return 1;
  /* an upper bound of the shared memory: every buffer whole, plus codegen's scratch for
   * the largest layout conversion (which it places above the live buffers) */
  int64_t fixed = 0, ring = 0, scratch = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    if (op->code == IR_LOCAL_ALLOC) fixed += buffer_bytes(f, op->res);
    if (op->code == IR_CONVERT_LAYOUT && buffer_bytes(f, op->res) > scratch) scratch = buffer_bytes(f, op->res);
  }
  for (uint32_t i = 0; i < L->ncopies; i++) ring += buffer_bytes(f, f->ops.v[L->copies[i]].args[0]);
  int64_t cap = f->target ? (int64_t)f->target->smem_optin : 49152;
  if (fixed + 2 * ring + scratch <= cap / 2) return 3;
  if (fixed + ring + scratch + 4096 <= cap) return 2;
  return 1;
}

/* ---- small loads through the ring ----
 *
 * A ring loop's other per-iteration loads (attention backward's LSE and delta rows: 64 f32
 * each) would be the consumers' own global loads, waited for in the middle of each step
 * (~1 us of latency against a step of a few). A 1-d slice load of a tensor nothing writes,
 * along the tensor's contiguous last dimension, whose indices the ring's chain computes from
 * the loop variable, that TMA can copy (16-byte strides, a multiple of 16 bytes and at most
 * 256 elements: an unswizzled box, gpu-facts.md; zero fill) becomes
 * one more copy of the ring: the producer fills a [1, n] buffer with the stage, the
 * consumers read it (local_load) where the load was, and the stage's release waits for it.
 * A tensor whose other strides are not 16-byte multiples (LSE [B, H, N] with N = 2405) is
 * copied through a flat map (tma_desc {flat=1}: 1-d over its elements, which needs a unit
 * last stride, a 16-byte aligned base and the span31 fact); its box runs on past the row's
 * end, so the consumers select the fill where an index lies outside the tensor. Behind
 * flatrows=1: a row that starts off a 16-byte boundary makes the copy an illegal
 * instruction (PERF.md 81, 97).
 *
 *   %l = load %LSE[%b, %h, %m0] {mask=4}     =>   barrier; async_copy %buf, 0, %LSE[..] {mask=4}
 *                                                 async_commit; async_wait; barrier
 *                                                 %l = local_load %buf, 0
 *                                                 [flat: %l' = select %inside, %l, 0]        */

/* After flat-copied local_load `id` (the row of `n` elements of tensor t at idx[0..rank),
 * the last sliced): its uses read `inside ? value : 0`, inside = every index within t. */
static void mask_flat_row(struct ir_func *f, uint32_t id, ir_val t, const ir_val *idx) {
  const struct ir_type *tt = ir_vtype(f, t);
  int rank = tt->rank;
  ir_val l = f->ops.v[id].res;
  struct ir_type vt = *ir_vtype(f, l);
  uint32_t blk = f->ops.v[id].block;
  struct ir_builder b;
  ir_builder_before(&b, f, f->blocks.v[blk].ops.v[ir_op_index(f, id) + 1]);
  b.loc = f->ops.v[id].loc;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val dims[IR_MAX_RANK];
  for (int d = 0; d < rank; d++)
    dims[d] = IR_DIM_IS_SYM(tt->dims[d]) ? IR_DIM_SYM_VALUE(tt->dims[d]) : ir_const_int(&b, i32, tt->dims[d]);
  /* the dropped dimensions' indices: one scalar condition */
  ir_val ok = 0;
  for (int d = 0; d < rank - 1; d++) {
    ir_val c = ir_binary(&b, IR_AND, ir_binary(&b, IR_GE, idx[d], ir_const_int(&b, i32, 0)),
                         ir_binary(&b, IR_LT, idx[d], dims[d]));
    ok = ok ? ir_binary(&b, IR_AND, ok, c) : c;
  }
  /* the row's: start + arange(n) within [0, size) */
  struct ir_type it = vt, bt = vt;
  it.dtype = DT_I32;
  bt.dtype = DT_BOOL;
  ir_type_id iti = ir_type_intern(f, &it), bti = ir_type_intern(f, &bt);
  ir_val col = ir_build1(&b, IR_ARANGE, iti, NULL, 0);
  col = ir_binary(&b, IR_ADD, col, ir_build1(&b, IR_SPLAT, iti, &idx[rank - 1], 1));
  ir_val in = ir_binary(&b, IR_AND, ir_binary(&b, IR_GE, col, ir_const_int(&b, iti, 0)),
                        ir_binary(&b, IR_LT, col, ir_build1(&b, IR_SPLAT, iti, &dims[rank - 1], 1)));
  if (ok) in = ir_binary(&b, IR_AND, in, ir_build1(&b, IR_SPLAT, bti, &ok, 1));
  ir_type_id lt = f->values.v[l].type;
  ir_val zero = ir_dtype_is_float((ir_dtype)vt.dtype) ? ir_const_float(&b, lt, 0.0) : ir_const_int(&b, lt, 0);
  ir_val sa[3] = {in, l, zero};
  ir_val sel = ir_build1(&b, IR_SELECT, lt, sa, 3);
  ir_replace_uses(f, l, sel);
  ir_op_set_args(f, ir_def_op(f, sel), sa, 3); /* the select itself still reads the buffer's row */
}
static void ring_small_loads(struct ir_func *f, struct loop_info *L, struct ir_type *boxes) {
  uint32_t body = L->body;
  for (uint32_t i = 0; i < f->blocks.v[body].ops.n && L->ncopies < MAX_COPIES; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_LOAD || op->f != 0 || signbit(op->f) || !ir_reads_unwritten(f, id, IR_BODY_BLOCK)) continue;
    const struct ir_type *rt = ir_vtype(f, op->res), *tt = ir_vtype(f, op->args[0]);
    uint64_t mask = (uint64_t)op->i[0];
    int rank = tt->rank, eb = ir_dtype_bytes((ir_dtype)rt->dtype), n = rt->dims[0];
    if (rt->rank != 1 || mask != 1ull << (rank - 1) || n * eb % 16 || n > 256) continue;
    const struct ir_param *p = ir_param_of(f, op->args[0]);
    if (!p) continue;
    bool flat = !ir_facts_allow_vector(p, tt, rank - 1, 16);
    if (flat && (!tl_sched_get(f->sched.flatrows, 0) || !p->facts.stride1[rank - 1] || p->facts.align < 16 ||
                 !p->facts.span31))
      continue;
    bool moves = false;
    struct chain c = L->c;
    bool ok = true;
    for (uint32_t k = 1; k < op->nargs && ok; k++) {
      moves = moves || ir_defined_within(f, op->args[k], body);
      ok = collect(f, body, L->iv, op->args[k], &c);
    }
    if (!ok || !moves) continue;
    L->c = c;
    /* the buffer: one unswizzled row */
    struct ir_layout sl = {0};
    sl.kind = IR_LAYOUT_SHARED;
    sl.rank = 2;
    sl.vec = (uint8_t)(16 / eb);
    sl.per_phase = sl.max_phase = 1;
    sl.order[0] = 1;
    sl.order[1] = 0;
    struct ir_type bt = {0};
    bt.kind = IR_TY_TILE;
    bt.dtype = rt->dtype;
    bt.rank = 2;
    bt.dims[0] = 1;
    bt.dims[1] = n;
    bt.layout = ir_layout_intern(f, &sl);
    struct ir_type box = bt;
    box.rank = (uint8_t)rank;
    for (int d = 0; d < rank; d++) box.dims[d] = d == rank - 1 ? n : 1;
    struct ir_builder b;
    ir_builder_before(&b, f, L->loop);
    ir_val buf = ir_build1(&b, IR_LOCAL_ALLOC, ir_type_intern(f, &bt), NULL, 0);
    ir_builder_before(&b, f, id);
    b.loc = f->ops.v[id].loc;
    ir_val slot = ir_const_int(&b, ir_type_scalar(f, DT_I32), 0);
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    op = &f->ops.v[id];
    ir_val args[3 + IR_MAX_RANK];
    uint32_t na = 0;
    args[na++] = buf;
    args[na++] = slot;
    for (uint32_t k = 0; k < op->nargs; k++) args[na++] = op->args[k];
    ir_val tensor = args[2], *idx = args + 3;
    uint32_t cp = ir_build(&b, IR_ASYNC_COPY, args, na, NULL, 0);
    f->ops.v[cp].i[0] = (int64_t)mask;
    ir_build(&b, IR_ASYNC_COMMIT, NULL, 0, NULL, 0);
    uint32_t w = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
    f->ops.v[w].i[0] = 0;
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    ir_op_rewrite(f, id, IR_LOCAL_LOAD, (ir_val[]){buf, slot}, 2); /* the load's value, read from the buffer */
    if (flat) mask_flat_row(f, id, tensor, idx);
    boxes[L->ncopies] = box;
    L->flat[L->ncopies] = flat;
    L->copies[L->ncopies++] = cp;
    i = ir_op_index(f, id); /* past what was inserted in front of it */
  }
}

static bool pipeline_loop(struct pass_ctx *pc, uint32_t loop) {
  struct ir_func *f = pc->f;
  struct loop_info L;
  memset(&L, 0, sizeof L);
  L.loop = loop;
  L.S = (int)f->ops.v[loop].i[0];
  if (L.S == 1) return false;
  L.body = f->ops.v[loop].region;
  L.iv = f->blocks.v[L.body].args;
  struct ir_block *bb = &f->blocks.v[L.body];
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    uint32_t id = bb->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_ASYNC_COPY) continue;
    int64_t slot;
    if (ir_defined_within(f, op->args[0], L.body) || !ir_value_const_int(f, op->args[1], &slot) || slot != 0) return false;
    for (uint32_t k = 3; k < op->nargs; k++)
      if (!collect(f, L.body, L.iv, op->args[k], &L.c)) return false;
    if (L.ncopies == MAX_COPIES) return false;
    L.copies[L.ncopies++] = id;
  }
  if (!L.ncopies) return prefetch_loop(f, &L);
  if (L.S == 0) { /* no stages= in the source: the pass picks, and the loop records it */
    L.S = auto_stages(f, &L);
    f->ops.v[loop].i[0] = L.S;
    if (L.S < 2) return true;
  }
  bool any = false;
  bool wgmma_readers = readers_are_wgmma(f, L.body, L.copies, L.ncopies, &any) && any;
  /* the ring form: TMA for every copy, wgmma readers, a positive constant step */
  int64_t step;
  bool ring = tl_has(f->target, TL_FEAT_TMA) && ir_func_wgmma(f) && tl_sched_get(f->sched.tma, 1) && wgmma_readers &&
              f->warps % 4 == 0 && ir_value_const_int(f, f->ops.v[loop].args[2], &step) && step > 0;
  struct ir_type boxes[MAX_COPIES];
  for (uint32_t i = 0; ring && i < L.ncopies; i++) /* gathers (mask 0) have no TMA box */
    ring = f->ops.v[L.copies[i]].i[0] != 0 && tma_box(f, L.copies[i], &boxes[i]);
  if (ring) {
    ring_small_loads(f, &L, boxes);
    return pipeline_ring(pc, &L, boxes, step);
  }
  return pipeline_cp_async(pc, &L, wgmma_readers);
}

struct walk {
  struct pass_ctx *pc;
  uint32_t nops; /* loops this pass builds (ids from here on) are not visited again */
};

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct walk *w = ud;
  if (id < w->nops && f->ops.v[id].code == IR_FOR && f->ops.v[id].block && pipeline_loop(w->pc, id))
    w->pc->changed = true;
}

void pass_pipeline_loops(struct pass_ctx *pc) {
  struct walk w = {pc, pc->f->ops.n};
  ir_walk(pc->f, IR_BODY_BLOCK, visit, &w);
}
