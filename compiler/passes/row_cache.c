/* row_cache.c - a row that a later loop reads again is kept in shared memory.
 *
 * A row kernel written the obvious way reads its row twice when the row does not fit in one
 * tile: softmax a pass for the running maximum and sum, then one that writes the output;
 * rmsnorm the sum of squares, then the output. When the rows in flight on the device are
 * larger than L2 (4096 x 50257 f16: 100 KB per row), the second read goes to DRAM again and
 * the kernel moves three rows for one (PERF.md 46, 52).
 *
 * Needs: layouts assigned, loop invariants hoisted and common ops merged (licm, cse): the
 * loops' bounds and the loads' indices are then the same values. The loops' trip count,
 * known only at launch, is a specialization fact: the runtime evaluates the bounds of the
 * loop ir_row_cache_find names and records the count in f->cache_trips (0: unknown).
 *
 * Guarantees: for a loop L1 followed in the same block by loops over the same range that
 * load the same slices of a tensor (same indices, with the loop variable in the same
 * places; same mask and fill) which nothing in the block writes, when cache_trips chunks
 * fit in the shared-memory budget (half the target's), a fill loop in front of L1 copies the
 * row into a buffer of cache_trips slots, slot (iv - lb) / step per chunk, and L1 and the
 * later loops read it from there. The fill loads U chunks before it stores any (about 32 KB
 * of the row in flight per program, at most 128 registers of each thread holding them):
 * with two programs per multiprocessor that is what keeps DRAM busy. A slot outside the
 * buffer (a trip count other than the launch's) is read from the tensor as before, so the
 * result never depends on the fact being right. A barrier separates the fill from the
 * reads (they may be in other layouts), and one in front of it the previous row's reads
 * when the loops sit in a loop or a branch.
 *
 *                                           %buf = local_alloc : tile<T x 1 x BN, #shared>
 *                                           for %f = %lb to %ub step U * %s {
 *                                             %x0 = load %X[%row, %f] ... %xU-1 = load %X[%row, %f + (U-1) * %s]
 *   for %c = %lb to %ub step %s {             if (%f - %lb) / %s < T { local_store %buf, (%f - %lb) / %s, %x0 } ...
 *     %x = load %X[%row, %c]                }
 *     ...                              =>   barrier
 *   }                                       for %c = %lb to %ub step %s {
 *   for %c2 = %lb to %ub step %s {            %x = if (%c - %lb) / %s < T { local_load %buf, .. } else { load .. }
 *     %y = load %X[%row, %c2]                 ...
 *     ...                                   }
 *   }                                       for %c2 ... { %y = likewise }
 */
#include <string.h>

#include "passes.h"

enum { MAX_CACHED = 4, EQUIV_DEPTH = 8 };

/* Whether a (in the loop body ba) and b (in the loop body bb) compute the same value: the
 * same value defined outside both loops, the loops' variables, or the same pure op of
 * equivalent operands inside each loop. */
static bool equiv(const struct ir_func *f, ir_val a, ir_val b, uint32_t ba, uint32_t bb, int depth) {
  if (a == b) return !ir_defined_within(f, a, ba) && !ir_defined_within(f, b, bb);
  if (a == f->blocks.v[ba].args && b == f->blocks.v[bb].args) return true;
  if (depth == 0) return false;
  uint32_t da = ir_def_op(f, a), db = ir_def_op(f, b);
  if (!da || !db) return false;
  const struct ir_op *x = &f->ops.v[da], *y = &f->ops.v[db];
  if (x->code != y->code || !(ir_ops[x->code].flags & OPF_PURE) || x->nregions || x->nres != 1 ||
      x->nargs != y->nargs || memcmp(x->i, y->i, sizeof x->i) != 0 || memcmp(&x->f, &y->f, sizeof x->f) != 0 ||
      f->values.v[a].type != f->values.v[b].type)
    return false;
  for (uint32_t k = 0; k < x->nargs; k++)
    if (!equiv(f, x->args[k], y->args[k], ba, bb, depth - 1)) return false;
  return true;
}

/* The load in the body of loop `loop` equivalent to load `ld` of loop `first`, or 0. */
static uint32_t same_load(const struct ir_func *f, uint32_t first, uint32_t ld, uint32_t loop) {
  const struct ir_op *a = &f->ops.v[ld];
  uint32_t ba = f->ops.v[first].region, bb = f->ops.v[loop].region;
  const struct ir_block *body = &f->blocks.v[bb];
  for (uint32_t i = 0; i < body->ops.n; i++) {
    const struct ir_op *b = &f->ops.v[body->ops.v[i]];
    if (b->code != IR_LOAD || b->nargs != a->nargs || b->args[0] != a->args[0] || b->i[0] != a->i[0] ||
        memcmp(&b->f, &a->f, sizeof a->f) != 0 || f->values.v[b->res].type != f->values.v[a->res].type)
      continue;
    bool same = true;
    for (uint32_t k = 1; k < a->nargs && same; k++) same = equiv(f, a->args[k], b->args[k], ba, bb, EQUIV_DEPTH);
    if (same) return body->ops.v[i];
  }
  return 0;
}

/* Whether loops a and b run over the same range (the same bound values). */
static bool same_range(const struct ir_func *f, uint32_t a, uint32_t b) {
  const struct ir_op *x = &f->ops.v[a], *y = &f->ops.v[b];
  return x->args[0] == y->args[0] && x->args[1] == y->args[1] && x->args[2] == y->args[2];
}

/* A slice that moves with its loop: one of its indices is computed in the loop. */
static bool moves_with(const struct ir_func *f, uint32_t ld, uint32_t body) {
  const struct ir_op *op = &f->ops.v[ld];
  for (uint32_t k = 1; k < op->nargs; k++)
    if (ir_defined_within(f, op->args[k], body)) return true;
  return false;
}

static uint32_t find_in(const struct ir_func *f, uint32_t blk, uint32_t *loads, uint32_t *nloads) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    for (uint32_t r = 0; r < op->nregions; r++) {
      uint32_t l = find_in(f, op->region + r, loads, nloads);
      if (l) return l;
    }
    if (op->code != IR_FOR || op->i[0] > 1) continue; /* pipelined loops: their copies are async */
    const struct ir_block *body = &f->blocks.v[op->region];
    uint32_t n = 0;
    for (uint32_t j = 0; j < body->ops.n && n < MAX_CACHED; j++) {
      uint32_t ld = body->ops.v[j];
      const struct ir_op *lo = &f->ops.v[ld];
      if (lo->code != IR_LOAD || !moves_with(f, ld, op->region) || ir_block_writes_tensor(f, blk, lo->args[0]))
        continue;
      const struct ir_type *t = ir_vtype(f, lo->res);
      if (t->layout && f->layouts.v[t->layout].kind != IR_LAYOUT_BLOCKED) continue;
      bool later = false;
      for (uint32_t k = i + 1; k < b->ops.n && !later; k++) {
        uint32_t l2 = b->ops.v[k];
        later = f->ops.v[l2].code == IR_FOR && same_range(f, id, l2) && same_load(f, id, ld, l2);
      }
      if (later && loads) loads[n] = ld;
      n += later;
    }
    if (n) {
      *nloads = n;
      return id;
    }
  }
  return 0;
}

uint32_t ir_row_cache_find(const struct ir_func *f, uint32_t *loads, uint32_t *nloads) {
  *nloads = 0;
  return find_in(f, IR_BODY_BLOCK, loads, nloads);
}

/* (iv - lb) / step and whether it is below T, in front of op `at` (0: at the end of block
 * blk), for loop `loop` and its variable iv. */
static ir_val slot_of(struct ir_func *f, uint32_t loop, ir_val iv, uint32_t blk, uint32_t at, int64_t T, ir_val *inside) {
  struct ir_builder b;
  if (at) ir_builder_before(&b, f, at);
  else ir_builder_at_end(&b, f, blk);
  b.loc = f->ops.v[loop].loc;
  const struct ir_op *lp = &f->ops.v[loop];
  ir_val lb = lp->args[0], step = lp->args[2];
  ir_val i = ir_binary(&b, IR_DIV, ir_binary(&b, IR_SUB, iv, lb), step);
  *inside = ir_binary(&b, IR_LT, i, ir_const_int(&b, f->values.v[i].type, T));
  return i;
}

/* Load ld2 of loop l2 reads slot (iv - lb) / step of buf where the buffer has it, the tensor
 * otherwise. A TMA-filled buffer (bar != 0) holds the slices as copied: in the first loop
 * each slot is waited for (phase 0 of its barrier), and a slice not wholly inside the
 * tensor selects the load's fill where the copy ran past the tensor's bounds. */
struct reader {
  ir_val bar, shift; /* the TMA fill's barriers (0: the threads' fill) and the chunks' shift */
  ir_val base, phase; /* rows per program: this row's first slot and its barriers' phase */
};

static void read_back(struct ir_func *f, uint32_t l2, uint32_t ld2, ir_val buf, int64_t T, const struct reader *r,
                      bool first) {
  ir_val in2, bar = r->bar, shift = r->shift;
  ir_val slot = slot_of(f, l2, f->blocks.v[f->ops.v[l2].region].args, 0, ld2, T, &in2);
  struct ir_builder b, tb;
  ir_builder_before(&b, f, ld2);
  b.loc = f->ops.v[ld2].loc;
  ir_type_id rt = f->values.v[f->ops.v[ld2].res].type;
  uint32_t sel = ir_build_if(&b, in2, &rt, 1);
  ir_builder_at_end(&tb, f, ir_region(f, sel, 0));
  tb.loc = b.loc;
  if (r->base) slot = ir_binary(&tb, IR_ADD, r->base, slot);
  if (bar && first) { /* a shifted chunk ends in the next slot */
    ir_type_id i32 = ir_type_scalar(f, DT_I32);
    ir_val wa[3] = {bar, slot, r->phase ? r->phase : ir_const_int(&tb, i32, 0)};
    ir_build(&tb, IR_MBAR_WAIT, wa, 3, NULL, 0);
    if (shift) {
      wa[1] = ir_binary(&tb, IR_ADD, slot, ir_const_int(&tb, f->values.v[slot].type, 1));
      ir_build(&tb, IR_MBAR_WAIT, wa, 3, NULL, 0);
    }
  }
  ir_val la[3] = {buf, slot, shift};
  ir_val v = ir_build1(&tb, IR_LOCAL_LOAD, rt, la, shift ? 3 : 2);
  if (bar) {
    const struct ir_op *ld = &f->ops.v[ld2];
    ir_val whole, idx[IR_MAX_RANK], t = ld->args[0];
    double fill = ld->f;
    for (uint32_t k = 1; k < ld->nargs; k++) idx[k - 1] = ld->args[k];
    int n = ir_type(f, rt)->dims[0];
    pass_row_inside(&tb, t, idx, n, 0, &whole);
    uint32_t w = ir_build_if(&tb, whole, &rt, 1);
    struct ir_builder wb;
    ir_builder_at_end(&wb, f, ir_region(f, w, 0));
    ir_build(&wb, IR_YIELD, &v, 1, NULL, 0);
    ir_builder_at_end(&wb, f, ir_region(f, w, 1));
    wb.loc = b.loc;
    ir_val fv = ir_dtype_is_float((ir_dtype)ir_type(f, rt)->dtype) ? ir_const_float(&wb, rt, fill)
                                                                   : ir_const_int(&wb, rt, (int64_t)fill);
    ir_val sa[3] = {pass_row_inside(&wb, t, idx, n, rt, NULL), v, fv};
    ir_val s = ir_build1(&wb, IR_SELECT, rt, sa, 3);
    ir_build(&wb, IR_YIELD, &s, 1, NULL, 0);
    v = f->ops.v[w].res;
  }
  ir_build(&tb, IR_YIELD, &v, 1, NULL, 0);
  ir_builder_at_end(&tb, f, ir_region(f, sel, 1));
  ir_replace_uses(f, f->ops.v[ld2].res, f->ops.v[sel].res);
  ir_op_move(&tb, ld2);
  ir_val lv = f->ops.v[ld2].res;
  ir_build(&tb, IR_YIELD, &lv, 1, NULL, 0);
}

/* min(ub, lb + T * step): where the T cached chunks of the range end. */
static ir_val cached_end(struct ir_builder *b, ir_val lb, ir_val ub, ir_val step, int64_t T) {
  ir_type_id t = b->f->values.v[step].type;
  return ir_binary(b, IR_MIN, ub, ir_binary(b, IR_ADD, lb, ir_binary(b, IR_MUL, step, ir_const_int(b, t, T))));
}

/* Marks in need[] the ops of loop `loop`'s body that load `ld` depends on (its index
 * arithmetic) and ld itself, and with outer (the body of a loop around `loop`: rows per
 * program) the ops of that body they depend on in turn. False when one of the latter is
 * not pure (it could not be computed again for another row). */
static bool mark_chain(struct ir_func *f, uint32_t loop, uint32_t ld, uint32_t outer, uint8_t *need) {
  uint32_t body = f->ops.v[loop].region;
  need[ld] = 1;
  uint32_t blocks[2] = {body, outer};
  for (int j = 0; j < 2 && blocks[j]; j++) {
    const struct ir_block *bb = &f->blocks.v[blocks[j]];
    for (uint32_t i = bb->ops.n; i-- > 0;) { /* operands come before their users */
      uint32_t id = bb->ops.v[i];
      if (!need[id]) continue;
      const struct ir_op *op = &f->ops.v[id];
      if (j == 1 && (!(ir_ops[op->code].flags & OPF_PURE) || op->nregions)) return false;
      for (uint32_t k = 0; k < op->nargs; k++) {
        uint32_t d = ir_def_op(f, op->args[k]);
        if (d && (f->ops.v[d].block == body || (outer && f->ops.v[d].block == outer))) need[d] = 1;
      }
    }
  }
  return true;
}

/* Clones into the builder's block the ops of loop `loop`'s body that load `ld` depends on
 * (its index arithmetic), and ld itself, with the loop variable replaced by iv; with outer
 * (mark_chain's), also the outer body's ops they depend on, with that loop's variable
 * replaced by rv (another row). */
static ir_val clone_row_load(struct pass_ctx *pc, struct ir_builder *b, uint32_t loop, uint32_t ld, ir_val iv,
                             uint32_t outer, ir_val rv) {
  struct ir_func *f = pc->f;
  uint32_t body = f->ops.v[loop].region;
  uint8_t *need = ARENA_NEWN(pc->scratch, uint8_t, f->ops.n + 1);
  mark_chain(f, loop, ld, outer, need);
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  ir_map_set(&m, f->blocks.v[body].args, iv);
  uint32_t blocks[2] = {outer, body};
  if (outer) ir_map_set(&m, f->blocks.v[outer].args, rv);
  for (int j = 0; j < 2; j++) { /* the clones may go into the outer body: a copy of its list */
    if (!blocks[j]) continue;
    uint32_t n = f->blocks.v[blocks[j]].ops.n;
    uint32_t *ids = ARENA_NEWN(pc->scratch, uint32_t, n + 1);
    memcpy(ids, f->blocks.v[blocks[j]].ops.v, sizeof *ids * n);
    for (uint32_t i = 0; i < n; i++)
      if (need[ids[i]]) ir_clone_op(b, ids[i], &m);
  }
  return ir_mapped(&m, f->ops.v[ld].res);
}

static ir_val clone_load(struct pass_ctx *pc, struct ir_builder *b, uint32_t loop, uint32_t ld, ir_val iv) {
  return clone_row_load(pc, b, loop, ld, iv, 0, 0);
}

/* Whether TMA can fill load ld's slots: a 1-d slice along the tensor's unit-stride last
 * dimension at the loop variable of `first`, in boxes of 1 x inner (at most 256 elements,
 * 16-byte rows). TMA copies start at 16-byte boundaries only (elsewhere the copy is an
 * illegal instruction): on a tensor of 16-byte strides the range must start at one and
 * step by whole 16 bytes; a tensor whose other strides are not 16-byte multiples (rows of
 * 50257 elements) is copied through a flat map (1-d over its elements: a 16-byte aligned
 * base and the span31 fact) from the boundary in front of the row (shifted: *flat). The box
 * takes the layout lay. */
static bool tma_fill_box(struct ir_func *f, uint32_t first, uint32_t ld, uint16_t lay, struct ir_type *box, bool *flat) {
  if (!tl_has(f->target, TL_FEAT_TMA) || !tl_sched_get(f->sched.tma, 1) || !tl_sched_get(f->sched.rowtma, 0)) return false;
  const struct ir_op *op = &f->ops.v[ld], *lp = &f->ops.v[first];
  const struct ir_type *rt = ir_vtype(f, op->res), *tt = ir_vtype(f, op->args[0]);
  const struct ir_param *p = ir_param_of(f, op->args[0]);
  int rank = tt->rank, eb = ir_dtype_bytes((ir_dtype)rt->dtype);
  if (!p || rt->rank != 1 || (uint64_t)op->i[0] != 1ull << (rank - 1) || (eb != 1 && eb != 2 && eb != 4) ||
      op->args[rank] != f->blocks.v[lp->region].args)
    return false;
  int n = rt->dims[0], inner = n;
  while (inner > 256 && inner % 2 == 0) inner /= 2;
  int64_t lb, step;
  if (inner > 256 || inner * eb % 16 || !ir_value_const_int(f, lp->args[2], &step) || step * eb % 16) return false;
  *flat = !ir_facts_allow_vector(p, tt, rank - 1, 16);
  if (*flat && (!p->facts.stride1[rank - 1] || p->facts.align < 16 || !p->facts.span31)) return false;
  if (!*flat && (!ir_value_const_int(f, lp->args[0], &lb) || lb * eb % 16)) return false;
  memset(box, 0, sizeof *box);
  box->kind = IR_TY_TILE;
  box->dtype = rt->dtype;
  box->rank = (uint8_t)rank;
  box->layout = lay;
  for (int d = 0; d < rank; d++) box->dims[d] = d == rank - 1 ? inner : 1;
  return true;
}

/* tma_load of buf's slot from load clone cl's slice, its last index less shift (when not 0),
 * completing on bar[slot]; the clone dropped. */
static void tma_copy_clone(struct ir_builder *b, uint32_t cl, ir_val buf, ir_val slot, ir_val bar, ir_val desc, ir_val shift) {
  struct ir_func *f = b->f;
  const struct ir_op *co = &f->ops.v[cl];
  ir_val args[5 + IR_MAX_RANK];
  uint32_t na = 0;
  args[na++] = buf;
  args[na++] = slot;
  args[na++] = bar;
  args[na++] = slot;
  args[na++] = desc;
  for (uint32_t k = 1; k < co->nargs; k++) args[na++] = co->args[k];
  int64_t mask = co->i[0];
  if (shift) args[na - 1] = ir_binary(b, IR_SUB, args[na - 1], shift);
  uint32_t cp = ir_build(b, IR_TMA_LOAD, args, na, NULL, 0);
  f->ops.v[cp].i[0] = mask;
  ir_op_erase(f, cl);
}

/* A TMA fill's pieces: the loop `first` whose loads[0..n) are cached in bufs, their maps and
 * shifts, the barriers (one per slot) and the bytes of one slot's copies. A shifted (flat)
 * copy starts shift[j] elements in front of its chunk, so chunk i's end lies in slot i + 1:
 * a row then takes T + 1 slots (per = T + any), the last filled after the loop. With
 * outer, the rows' loop around `first` (rows per program): two rows' slots, the next row's
 * copies issued while this one is read. */
struct tma_rows {
  uint32_t first, n, outer;
  const uint32_t *loads;
  const ir_val *bufs;
  const bool *flat;
  ir_val bar, descs[MAX_CACHED];
  int64_t T, per, bytes;
  bool any;
};

/* The barriers and the tensor maps, at b. */
static void tma_setup(struct ir_builder *b, struct tma_rows *R, const struct ir_type *boxes, int halves) {
  struct ir_func *f = b->f;
  R->any = false;
  for (uint32_t j = 0; j < R->n; j++) R->any = R->any || R->flat[j];
  R->per = R->T + R->any;
  int32_t sdim[1] = {(int32_t)(R->per * halves)};
  R->bar = ir_build1(b, IR_MBAR_ALLOC, ir_type_tile(f, DT_I64, 1, sdim), NULL, 0);
  f->ops.v[ir_def_op(f, R->bar)].i[0] = 1;
  ir_build(b, IR_BARRIER, NULL, 0, NULL, 0);
  R->bytes = 0;
  for (uint32_t j = 0; j < R->n; j++) {
    ir_val t = f->ops.v[R->loads[j]].args[0];
    R->descs[j] = ir_build1(b, IR_TMA_DESC, ir_type_intern(f, &boxes[j]), &t, 1);
    f->ops.v[ir_def_op(f, R->descs[j])].i[0] = R->flat[j];
    const struct ir_type *rt = ir_vtype(f, f->ops.v[R->loads[j]].res);
    R->bytes += ir_type_numel(rt) * ir_dtype_bytes((ir_dtype)rt->dtype);
  }
}

/* At b, each flat load's shift for the row whose outer variable is rv (0: the current
 * row): its first element past the 16-byte boundary in front of it (the same for every
 * chunk: the step is whole 16 bytes). */
static void tma_shifts(struct pass_ctx *pc, struct ir_builder *b, const struct tma_rows *R, ir_val rv, ir_val *shift) {
  struct ir_func *f = pc->f;
  for (uint32_t j = 0; j < R->n; j++) {
    shift[j] = 0;
    if (!R->flat[j]) continue;
    ir_val at = clone_row_load(pc, b, R->first, R->loads[j], f->ops.v[R->first].args[0], rv ? R->outer : 0, rv);
    uint32_t cl = ir_def_op(f, at);
    const struct ir_op *co = &f->ops.v[cl];
    ir_val sa[1 + IR_MAX_RANK];
    for (uint32_t k = 0; k < co->nargs; k++) sa[k] = co->args[k];
    shift[j] = ir_build1(b, IR_ALIGN_SHIFT, ir_type_scalar(f, DT_I32), sa, co->nargs);
    f->ops.v[ir_def_op(f, shift[j])].i[0] = 16;
    ir_op_erase(f, cl);
  }
}

/* At b, the copies of one row (outer variable rv; 0: the current row) into the slots from
 * base on (0: from 0): a loop over the range whose leader issues each slot's copies, then
 * slot T; shift[] receives the copies' shifts. */
static void tma_fill_row(struct pass_ctx *pc, struct ir_builder *b, const struct tma_rows *R, ir_val rv, ir_val base,
                         ir_val *shift) {
  struct ir_func *f = pc->f;
  tma_shifts(pc, b, R, rv, shift);
  const struct ir_op *l1 = &f->ops.v[R->first];
  ir_val lbv = l1->args[0], ubv = l1->args[1], stepv = l1->args[2];
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  uint32_t outer = rv ? R->outer : 0;
  uint32_t fill = ir_build_for(b, lbv, cached_end(b, lbv, ubv, stepv, R->T), stepv, NULL, 0);
  uint32_t fb = f->ops.v[fill].region;
  struct ir_builder lb;
  ir_builder_at_end(&lb, f, fb);
  lb.loc = b->loc;
  ir_val c = f->blocks.v[fb].args, idx[MAX_CACHED];
  for (uint32_t j = 0; j < R->n; j++) idx[j] = clone_row_load(pc, &lb, R->first, R->loads[j], c, outer, rv);
  ir_val inside;
  ir_val slot = slot_of(f, R->first, c, fb, 0, R->T, &inside);
  ir_builder_at_end(&lb, f, fb);
  uint32_t st = ir_build_if(&lb, inside, NULL, 0);
  struct ir_builder tb;
  ir_builder_at_end(&tb, f, ir_region(f, st, 0));
  tb.loc = b->loc;
  if (base) slot = ir_binary(&tb, IR_ADD, base, slot);
  uint32_t ex = ir_build(&tb, IR_MBAR_EXPECT_TX, (ir_val[]){R->bar, slot}, 2, NULL, 0);
  f->ops.v[ex].i[0] = R->bytes;
  for (uint32_t j = 0; j < R->n; j++)
    tma_copy_clone(&tb, ir_def_op(f, idx[j]), R->bufs[j], slot, R->bar, R->descs[j], shift[j]);
  ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
  ir_builder_at_end(&tb, f, ir_region(f, st, 1));
  ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
  ir_builder_at_end(&lb, f, fb);
  ir_build(&lb, IR_YIELD, NULL, 0, NULL, 0);
  if (!R->any) return;
  /* slot T: what follows the last chunk (past the row: the next row's or zeros) */
  ir_val tail = ir_binary(b, IR_ADD, lbv, ir_binary(b, IR_MUL, stepv, ir_const_int(b, f->values.v[stepv].type, R->T)));
  ir_val ts = ir_const_int(b, i32, R->T);
  if (base) ts = ir_binary(b, IR_ADD, base, ts);
  ex = ir_build(b, IR_MBAR_EXPECT_TX, (ir_val[]){R->bar, ts}, 2, NULL, 0);
  f->ops.v[ex].i[0] = R->bytes;
  for (uint32_t j = 0; j < R->n; j++)
    tma_copy_clone(b, ir_def_op(f, clone_row_load(pc, b, R->first, R->loads[j], tail, outer, rv)), R->bufs[j], ts, R->bar,
                   R->descs[j], shift[j]);
}

/* Whether op sits in a loop (its rows then reuse the buffer, and barriers' phases turn). */
static bool in_loop(const struct ir_func *f, uint32_t op) {
  for (uint32_t blk = f->ops.v[op].block; blk && f->blocks.v[blk].parent;) {
    uint32_t owner = f->blocks.v[blk].parent;
    if (f->ops.v[owner].code == IR_FOR) return true;
    blk = f->ops.v[owner].block;
  }
  return false;
}

enum { FILL_BYTES = 32768, MAX_UNROLL = 16, MAX_HELD = 128 };

/* The threads' fill: U chunks loaded per iteration before any is stored, so that about
 * FILL_BYTES of the row are in flight per program (two programs per multiprocessor: enough
 * to keep DRAM busy), at most MAX_HELD registers of each thread holding them; a barrier
 * after it, as the stores of one thread are read by others where layouts differ. */
static void register_fill(struct pass_ctx *pc, struct ir_builder *b, uint32_t first, const uint32_t *loads, uint32_t n,
                          const ir_val *bufs, int64_t T, int64_t chunk, int64_t held) {
  struct ir_func *f = pc->f;
  int64_t U = FILL_BYTES / chunk;
  if (U > MAX_UNROLL) U = MAX_UNROLL;
  if (U > T) U = T;
  while (U > 1 && U * held > MAX_HELD) U--;
  if (U < 1) U = 1;
  /* for %c = lb to ub step U * step { the U chunks' loads; then their stores } */
  const struct ir_op *l1 = &f->ops.v[first];
  ir_val lb = l1->args[0], ub = l1->args[1], step = l1->args[2];
  /* in a loop (rows per program), threads still reading the previous row come first */
  if (f->blocks.v[l1->block].parent) ir_build(b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val ustep = ir_binary(b, IR_MUL, step, ir_const_int(b, f->values.v[step].type, U));
  uint32_t fill = ir_build_for(b, lb, cached_end(b, lb, ub, step, T), ustep, NULL, 0);
  uint32_t fb = f->ops.v[fill].region;
  struct ir_builder lb_;
  ir_builder_at_end(&lb_, f, fb);
  lb_.loc = b->loc;
  ir_val c0 = f->blocks.v[fb].args, ivs[MAX_UNROLL], vals[MAX_UNROLL][MAX_CACHED];
  for (int64_t u = 0; u < U; u++) {
    ivs[u] = u ? ir_binary(&lb_, IR_ADD, c0, ir_binary(&lb_, IR_MUL, step, ir_const_int(&lb_, f->values.v[step].type, u)))
               : c0;
    for (uint32_t j = 0; j < n; j++) vals[u][j] = clone_load(pc, &lb_, first, loads[j], ivs[u]);
  }
  for (int64_t u = 0; u < U; u++) {
    ir_val inside;
    ir_val slot = slot_of(f, first, ivs[u], fb, 0, T, &inside);
    ir_builder_at_end(&lb_, f, fb);
    uint32_t st = ir_build_if(&lb_, inside, NULL, 0);
    struct ir_builder tb;
    ir_builder_at_end(&tb, f, ir_region(f, st, 0));
    for (uint32_t j = 0; j < n; j++) {
      ir_val sa[3] = {bufs[j], slot, vals[u][j]};
      ir_build(&tb, IR_LOCAL_STORE, sa, 3, NULL, 0);
    }
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
    ir_builder_at_end(&tb, f, ir_region(f, st, 1));
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
  }
  ir_builder_at_end(&lb_, f, fb);
  ir_build(&lb_, IR_YIELD, NULL, 0, NULL, 0);
  ir_build(b, IR_BARRIER, NULL, 0, NULL, 0);
}

void pass_row_cache(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  int64_t T = f->cache_trips;
  if (T <= 0 || !f->target || !tl_sched_get(f->sched.rowcache, 0)) return;
  uint32_t loads[MAX_CACHED], n;
  uint32_t first = ir_row_cache_find(f, loads, &n);
  if (!first) return;
  /* the budget: half the target's shared memory, so that two programs still fit on a
   * multiprocessor (with the scratch of reductions beside them) */
  int64_t chunk = 0, held = 0;
  for (uint32_t j = 0; j < n; j++) {
    const struct ir_type *t = ir_vtype(f, f->ops.v[loads[j]].res);
    chunk += ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype);
    held += ir_type_numel(t) / (32 * f->warps) + 1;
  }
  /* with rowprogs=N, as many chunks as 1/N of it holds: the later loops read the rest
   * from the tensor again (from L2, when few enough rows are in flight) */
  int progs = tl_sched_get(f->sched.rowprogs, 2);
  int64_t budget = (int64_t)f->target->smem_optin / progs - 8192;
  if (T * chunk > budget) {
    if (f->sched.rowprogs < 0 || budget / chunk < 2) return;
    T = budget / chunk;
  }
  uint32_t blk = f->ops.v[first].block;
  struct ir_builder b;
  ir_builder_before(&b, f, first);
  b.loc = f->ops.v[first].loc;
  /* T slots of a chunk as one row, unswizzled: each thread reads back its own elements */
  struct ir_layout sl = {0};
  sl.kind = IR_LAYOUT_SHARED;
  sl.rank = 2;
  sl.vec = 1;
  sl.per_phase = sl.max_phase = 1;
  sl.order[0] = 1;
  uint16_t lay = ir_layout_intern(f, &sl);
  ir_val bufs[MAX_CACHED];
  struct ir_type boxes[MAX_CACHED];
  bool flat[MAX_CACHED], tma = !in_loop(f, first), any = false;
  for (uint32_t j = 0; j < n && tma; j++) {
    tma = tma_fill_box(f, first, loads[j], lay, &boxes[j], &flat[j]);
    any = any || flat[j];
  }
  /* shifted copies take one slot more */
  if (tma && any && (T + 1) * chunk > budget) {
    if (f->sched.rowprogs < 0 || T < 3) tma = false;
    else T--; /* a partial row: one chunk less */
  }
  /* rows per program (the loops in a loop's body): two rows' slots in one program per
   * multiprocessor, the next row's copies issued while this one is read */
  uint32_t outer = 0, rows = blk && f->blocks.v[blk].parent ? f->blocks.v[blk].parent : 0;
  if (rows && f->ops.v[rows].code == IR_FOR && !in_loop(f, rows) && tma_fill_box(f, first, loads[0], lay, &boxes[0], &flat[0])) {
    bool ok = 2 * (T + 1) * chunk <= (int64_t)f->target->smem_optin - 8192;
    uint8_t *need = ARENA_NEWN(pc->scratch, uint8_t, f->ops.n + 1);
    for (uint32_t j = 0; j < n && ok; j++)
      ok = tma_fill_box(f, first, loads[j], lay, &boxes[j], &flat[j]) && mark_chain(f, first, loads[j], blk, need);
    if (ok) outer = blk, tma = true;
  }
  for (uint32_t j = 0; j < n; j++) any = any || (tma && flat[j]);
  struct tma_rows R = {first, n, outer, loads, bufs, flat, 0, {0}, T, 0, 0, false};
  int halves = outer ? 2 : 1;
  int64_t per = T + (tma && any);
  for (uint32_t j = 0; j < n; j++) {
    const struct ir_type *t = ir_vtype(f, f->ops.v[loads[j]].res);
    struct ir_type bt = *t;
    bt.rank = 3;
    bt.dims[0] = (int32_t)(per * halves);
    bt.dims[1] = t->rank == 2 ? t->dims[0] : 1;
    bt.dims[2] = t->dims[t->rank - 1];
    bt.layout = lay;
    bufs[j] = ir_build1(&b, IR_LOCAL_ALLOC, ir_type_intern(f, &bt), NULL, 0);
  }
  struct reader rd = {0, 0, 0, 0};
  ir_val shift[MAX_CACHED] = {0};
  if (!tma) {
    register_fill(pc, &b, first, loads, n, bufs, T, chunk, held);
  } else if (!outer) { /* the leader's copies land while the first loop already reads */
    tma_setup(&b, &R, boxes, 1);
    tma_fill_row(pc, &b, &R, 0, 0, shift);
  } else {
    const struct ir_op *lp = &f->ops.v[rows];
    ir_val rlb = lp->args[0], rub = lp->args[1], rstep = lp->args[2], rv = f->blocks.v[blk].args;
    ir_type_id it = f->values.v[rlb].type;
    struct ir_builder ob, tb;
    ir_builder_before(&ob, f, rows);
    ob.loc = b.loc;
    /* the buffers go in front of the rows' loop; the first row's copies too */
    for (uint32_t j = 0; j < n; j++) ir_op_move(&ob, ir_def_op(f, bufs[j]));
    tma_setup(&ob, &R, boxes, 2);
    uint32_t pro = ir_build_if(&ob, ir_binary(&ob, IR_LT, rlb, rub), NULL, 0);
    ir_builder_at_end(&tb, f, ir_region(f, pro, 0));
    tb.loc = b.loc;
    tma_fill_row(pc, &tb, &R, rlb, 0, shift);
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
    ir_builder_at_end(&tb, f, ir_region(f, pro, 1));
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
    /* this row: the i-th of the program, in half i % 2, its barriers' phase (i / 2) % 2 */
    ir_val i = ir_binary(&b, IR_DIV, ir_binary(&b, IR_SUB, rv, rlb), rstep), two = ir_const_int(&b, it, 2);
    ir_val perv = ir_const_int(&b, it, per);
    rd.base = ir_binary(&b, IR_MUL, ir_binary(&b, IR_REM, i, two), perv);
    rd.phase = ir_binary(&b, IR_REM, ir_binary(&b, IR_DIV, i, two), two);
    /* every thread is done with the previous row (the other half) before it is refilled */
    ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
    ir_val next = ir_binary(&b, IR_ADD, rv, rstep);
    uint32_t pf = ir_build_if(&b, ir_binary(&b, IR_LT, next, rub), NULL, 0);
    ir_builder_at_end(&tb, f, ir_region(f, pf, 0));
    tb.loc = b.loc;
    ir_val nshift[MAX_CACHED];
    tma_fill_row(pc, &tb, &R, next, ir_binary(&tb, IR_SUB, perv, rd.base), nshift);
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
    ir_builder_at_end(&tb, f, ir_region(f, pf, 1));
    ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
    tma_shifts(pc, &b, &R, 0, shift); /* this row's */
  }
  rd.bar = R.bar;
  /* every loop over the range, the first included, reads the chunks back */
  for (uint32_t j = 0; j < n; j++) {
    uint32_t ld = loads[j];
    rd.shift = shift[j];
    for (uint32_t k = ir_op_index(f, first); k < f->blocks.v[blk].ops.n; k++) {
      uint32_t l2 = f->blocks.v[blk].ops.v[k];
      if (f->ops.v[l2].code != IR_FOR || !same_range(f, first, l2)) continue;
      uint32_t ld2 = l2 == first ? ld : same_load(f, first, ld, l2);
      if (ld2) read_back(f, l2, ld2, bufs[j], T, &rd, l2 == first);
    }
  }
  pc->changed = true;
}
