/* warp_specialize.c - a producer warpgroup for a ring loop: one warp issues the TMA fills,
 * the program's own warps only wait, compute and release.
 *
 * Needs: the ring form of the pipeline pass (after wgmma-async): one top-level loop whose
 * body refills a stage inside `if %k + (S-1)*%s < %ub { mbar_wait %empty ...; tma_load ... }`
 * and prologue fills of the first stages in top-level ifs before it. The target has
 * setmaxnreg, the schedule allows warp specialization and the warps form warpgroups.
 * Guarantees: a warp_specialize op at the loop's place with
 *   - a producer region: a loop over the same iterations that, for each, waits for its
 *     stage to be empty, announces the bytes and issues the copies (the refill, cloned with
 *     the iteration's own index and its own ring position);
 *   - a consumer region: the loop without fills, everything after it, and the tile values
 *     computed before it (a role numbers its warps from 0, so tiles must be computed
 *     inside it);
 * allocations, tensor maps, the barrier publishing the mbarriers' initialization and the
 * scalar computations before the loop stay outside, shared by both roles. The kernel gets
 * 4 more warps (`threads`); barriers in the consumer become named barriers of its threads;
 * register budgets: the producer keeps 40 (it holds a few scalars), the consumers share
 * the rest of the multiprocessor's registers (232 with two consumer warpgroups).
 * Also (sections below): consecutive ring loops of the same copies share one ring, and a
 * tile stored once into a wgmma operand buffer in front of the rings (attention's Q) is
 * copied by the producer too, on a one-slot barrier of its own (schedule `once`).
 *
 *   %f, %e = mbar_alloc ...; barrier; %d = tma_desc %A
 *   if %0 < %K { fill slot 0 }                     warp_specialize {producer_warps=4, ...}
 *   %z = const 0.0 : tile<..>                      producer {
 *   for %k ... iter(%acc = %z, ...) {                for %j = 0 to %K step 64 iter(%s = 0, %p = 0) {
 *     mbar_wait %f, %rd, %ph              =>           mbar_wait %e, %s, %p ^ 1; mbar_expect_tx %f, %s
 *     %a = wgmma ... {async=1} ...                     tma_load ... %j ... ; yield next(%s, %p) } }
 *     if %k + 128 < %K { refill }                    consumer {
 *   }                                                  %z = const 0.0 ...; for %k ... { no refill }
 *   epilogue                                           epilogue } */
#include <string.h>

#include "passes.h"

static bool is_fill_if(const struct ir_func *f, uint32_t op) {
  const struct ir_op *o = &f->ops.v[op];
  static const uint16_t tma[1] = {IR_TMA_LOAD};
  return o->code == IR_IF && o->nres == 0 && ir_block_has_op(f, o->region, tma, 1);
}

static void name_barriers(struct ir_func *f, uint32_t blk, int id, int threads) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_BARRIER) op->i[0] = id, op->i[1] = threads;
    for (uint32_t r = 0; r < op->nregions; r++) name_barriers(f, op->region + r, id, threads);
  }
}

/* An op that may run in front of both roles: an allocation, a tensor map or a pure scalar
 * computation (what its operands are is the callers' question). */
static bool outside_kind(const struct ir_func *f, const struct ir_op *op) {
  if (op->code == IR_LOCAL_ALLOC || op->code == IR_MBAR_ALLOC || op->code == IR_TMA_DESC) return true;
  return (ir_ops[op->code].flags & OPF_PURE) && !op->nregions && op->nres == 1 && ir_type_is_scalar(ir_vtype(f, op->res));
}

/* An op that both roles may share from outside: one of outside_kind's whose operands the
 * consumers do not compute, or the CTA barrier publishing the mbarrier initialization. */
static bool shared_outside(const struct ir_func *f, uint32_t id, const uint8_t *moved) {
  const struct ir_op *op = &f->ops.v[id];
  if (op->code == IR_BARRIER) return true;
  if (!outside_kind(f, op)) return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (moved[op->args[k]]) return false;
  return true;
}

/* A ring loop at the top level: its refill and the carried values the refill names. */
struct ring {
  uint32_t loop, refill;
  ir_val ahead, wr, wph; /* the refill's iteration, stage and (pre-xor) phase */
};

/* Whether value v can be computed outside both roles: a parameter, or a top-level
 * allocation, tensor map or pure scalar whose operands can be too. */
static bool outside_ok(const struct ir_func *f, ir_val v, int depth) {
  uint32_t d = ir_def_op(f, v);
  if (!d) return f->values.v[v].kind != IR_VAL_BLOCKARG || f->values.v[v].def == IR_BODY_BLOCK;
  const struct ir_op *op = &f->ops.v[d];
  if (op->block != IR_BODY_BLOCK || depth > 32 || !outside_kind(f, op)) return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!outside_ok(f, op->args[k], depth + 1)) return false;
  return true;
}

/* Every operand used in block blk (recursively) other than `ok` and values defined inside
 * blk can be computed outside the roles. */
static bool refill_outside(const struct ir_func *f, uint32_t blk, const ir_val *ok, uint32_t nok) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val a = op->args[k];
      bool allowed = ir_defined_within(f, a, blk) || outside_ok(f, a, 0);
      for (uint32_t j = 0; j < nok; j++) allowed |= a == ok[j];
      if (!allowed) return false;
    }
    for (uint32_t r = 0; r < op->nregions; r++)
      if (!refill_outside(f, op->region + r, ok, nok)) return false;
  }
  return true;
}

/* Recognizes loop `id` as a ring loop whose fills the producer can issue: one refill,
 * guarded by lt(ahead, ub), with its stage and phase carried by the loop, using nothing
 * the consumers compute. Returns 0 (not a ring loop), 1 (one), -1 (a ring loop that
 * cannot be specialized). */
static int find_ring(const struct ir_func *f, uint32_t id, struct ring *r) {
  const struct ir_op *lp = &f->ops.v[id];
  if (lp->code != IR_FOR) return 0;
  const struct ir_block *lb = &f->blocks.v[lp->region];
  r->loop = id;
  r->refill = 0;
  for (uint32_t j = 0; j < lb->ops.n; j++)
    if (is_fill_if(f, lb->ops.v[j])) {
      if (r->refill) return -1;
      r->refill = lb->ops.v[j];
    }
  if (!r->refill) return 0;
  uint32_t cd = ir_def_op(f, f->ops.v[r->refill].args[0]);
  if (!cd || f->ops.v[cd].code != IR_LT || f->ops.v[cd].args[1] != lp->args[1]) return -1;
  r->ahead = f->ops.v[cd].args[0];
  r->wr = r->wph = 0;
  const struct ir_block *tb = &f->blocks.v[f->ops.v[r->refill].region];
  for (uint32_t i = 0; i < tb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[tb->ops.v[i]];
    if (op->code == IR_MBAR_EXPECT_TX) r->wr = op->args[1];
    if (op->code == IR_MBAR_WAIT) {
      uint32_t x = ir_def_op(f, op->args[2]);
      if (x && f->ops.v[x].code == IR_XOR) r->wph = f->ops.v[x].args[0];
    }
  }
  ir_val ok[3] = {r->ahead, r->wr, r->wph};
  if (!r->wr || !r->wph || !refill_outside(f, f->ops.v[r->refill].region, ok, 3)) return -1;
  for (int k = 0; k < 3; k++)
    if (!outside_ok(f, lp->args[k], 0)) return -1;
  return 1;
}

/* Marks the top-level scalar computation of v (what a producer loop needs). */
static void mark_needed(const struct ir_func *f, ir_val v, uint8_t *needed) {
  uint32_t d = ir_def_op(f, v);
  if (!d || needed[v] || f->ops.v[d].block != IR_BODY_BLOCK) return;
  needed[v] = 1;
  const struct ir_op *op = &f->ops.v[d];
  for (uint32_t k = 0; k < op->nargs; k++) mark_needed(f, op->args[k], needed);
}

static void mark_block_needed(const struct ir_func *f, uint32_t blk, uint8_t *needed) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++) mark_needed(f, op->args[k], needed);
    for (uint32_t r = 0; r < op->nregions; r++) mark_block_needed(f, op->region + r, needed);
  }
}

/* The producer's loop for ring r: every iteration's fill, in its own ring position, from
 * (slot, phase) `from` (NULL: 0, 0, a fresh ring). Returns the loop. */
static uint32_t build_producer_loop(struct pass_ctx *pc, struct ir_builder *pb, const struct ring *r, const ir_val *from) {
  struct ir_func *f = pc->f;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  const struct ir_op *lp = &f->ops.v[r->loop];
  int S = (int)lp->i[0];
  ir_val zero = ir_const_int(pb, i32, 0);
  ir_val inits[2] = {from ? from[0] : zero, from ? from[1] : zero};
  lp = &f->ops.v[r->loop];
  uint32_t pl = ir_build_for(pb, lp->args[0], lp->args[1], lp->args[2], inits, 2);
  f->ops.v[pl].loc = f->ops.v[r->loop].loc;
  uint32_t plb = f->ops.v[pl].region;
  ir_val piv = f->blocks.v[plb].args, ps = piv + 1, pp = piv + 2;
  struct ir_builder lbld;
  ir_builder_at_end(&lbld, f, plb);
  lbld.loc = pb->loc;
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  ir_map_set(&m, r->ahead, piv);
  ir_map_set(&m, r->wr, ps);
  ir_map_set(&m, r->wph, pp);
  const struct ir_block *tb = &f->blocks.v[f->ops.v[r->refill].region];
  for (uint32_t i = 0; i + 1 < tb->ops.n; i++) ir_clone_op(&lbld, tb->ops.v[i], &m); /* all but the yield */
  ir_val s1 = ir_binary(&lbld, IR_ADD, ps, ir_const_int(&lbld, i32, 1));
  ir_val wrap = ir_binary(&lbld, IR_EQ, s1, ir_const_int(&lbld, i32, S));
  ir_val sa[3] = {wrap, ir_const_int(&lbld, i32, 0), s1};
  ir_val ns = ir_build1(&lbld, IR_SELECT, i32, sa, 3);
  ir_val pa[3] = {wrap, ir_binary(&lbld, IR_XOR, pp, ir_const_int(&lbld, i32, 1)), pp};
  ir_val np = ir_build1(&lbld, IR_SELECT, i32, pa, 3);
  ir_val ya[2] = {ns, np};
  ir_build(&lbld, IR_YIELD, ya, 2, NULL, 0);
  return pl;
}

/* ---- one ring for consecutive loops of the same copies ----
 * Attention's two key loops (the unmasked blocks, then the masked ones) copy K and V in
 * tiles of the same shape when BNM == BN: the second loop then takes the first one's ring
 * (buffers, barriers, tensor maps) and continues its position, in both roles, instead of a
 * ring of its own. That halves the rings' shared memory (hd128 can afford the diagonal in
 * one 128-key block, or a third stage), and the producer runs from the first loop's blocks
 * into the second's without a ring to fill from empty. */
enum { MAX_RING_COPIES = 8 };

struct ring_res {
  ir_val full, empty;
  int64_t bytes;
  uint32_t n;
  ir_val buf[MAX_RING_COPIES], desc[MAX_RING_COPIES];
};

/* A ring's barriers, buffers and tensor maps, as its refill names them. */
static bool ring_resources(const struct ir_func *f, const struct ring *r, struct ring_res *o) {
  memset(o, 0, sizeof *o);
  const struct ir_block *tb = &f->blocks.v[f->ops.v[r->refill].region];
  for (uint32_t i = 0; i < tb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[tb->ops.v[i]];
    if (op->code == IR_MBAR_WAIT) o->empty = op->args[0];
    else if (op->code == IR_MBAR_EXPECT_TX) o->full = op->args[0], o->bytes = op->i[0];
    else if (op->code == IR_TMA_LOAD) {
      if (o->n == MAX_RING_COPIES) return false;
      o->buf[o->n] = op->args[0];
      o->desc[o->n++] = op->args[4];
    } else if (op->code != IR_YIELD && op->nregions) {
      return false;
    }
  }
  return o->full && o->empty && o->n;
}

/* Whether two rings' resources are interchangeable: the same barrier and buffer types,
 * arrival counts and bytes, copies of the same tensors through maps of the same boxes. */
static bool same_ring(const struct ir_func *f, const struct ring *a, const struct ring_res *ra, const struct ring *b,
                      const struct ring_res *rb) {
  if (f->ops.v[a->loop].i[0] != f->ops.v[b->loop].i[0] || ra->n != rb->n || ra->bytes != rb->bytes) return false;
  const ir_val bars[2][2] = {{ra->full, rb->full}, {ra->empty, rb->empty}};
  for (int k = 0; k < 2; k++) {
    uint32_t da = ir_def_op(f, bars[k][0]), db = ir_def_op(f, bars[k][1]);
    if (!da || !db || f->ops.v[da].code != IR_MBAR_ALLOC || f->ops.v[db].code != IR_MBAR_ALLOC ||
        f->ops.v[da].i[0] != f->ops.v[db].i[0] || f->values.v[bars[k][0]].type != f->values.v[bars[k][1]].type)
      return false;
  }
  for (uint32_t c = 0; c < ra->n; c++) {
    uint32_t da = ir_def_op(f, ra->desc[c]), db = ir_def_op(f, rb->desc[c]);
    uint32_t ba = ir_def_op(f, ra->buf[c]), bb = ir_def_op(f, rb->buf[c]);
    if (!da || !db || !ba || !bb || f->ops.v[ba].code != IR_LOCAL_ALLOC || f->ops.v[bb].code != IR_LOCAL_ALLOC ||
        f->ops.v[da].args[0] != f->ops.v[db].args[0] || f->values.v[ra->desc[c]].type != f->values.v[rb->desc[c]].type ||
        f->values.v[ra->buf[c]].type != f->values.v[rb->buf[c]].type)
      return false;
  }
  return true;
}

/* The indices of loop id's carried (slot, phase) that its waits on barrier `full` read
 * (the phase directly or through an xor). */
static bool ring_position(const struct ir_func *f, uint32_t id, ir_val full, uint32_t *slot, uint32_t *phase) {
  const struct ir_block *b = &f->blocks.v[f->ops.v[id].region];
  ir_val base = b->args + 1;
  uint32_t nc = f->ops.v[id].nres;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *w = &f->ops.v[b->ops.v[i]];
    if (w->code != IR_MBAR_WAIT || w->args[0] != full) continue;
    ir_val sv = w->args[1], pv = w->args[2];
    uint32_t x = ir_def_op(f, pv);
    if (x && f->ops.v[x].code == IR_XOR) pv = f->ops.v[x].args[0];
    if (sv < base || sv >= base + nc || pv < base || pv >= base + nc) return false;
    *slot = sv - base;
    *phase = pv - base;
    return true;
  }
  return false;
}

/* Ring r takes ring q's resources and continues the consumer loop's position from q's end.
 * Its own allocations, barriers and maps are left without uses (DCE). */
static bool share_ring(struct ir_func *f, const struct ring *q, const struct ring_res *rq, const struct ring *r,
                       const struct ring_res *rr) {
  uint32_t qs, qp, rs, rp;
  if (!ring_position(f, q->loop, rq->full, &qs, &qp) || !ring_position(f, r->loop, rr->full, &rs, &rp)) return false;
  ir_replace_uses(f, rr->full, rq->full);
  ir_replace_uses(f, rr->empty, rq->empty);
  for (uint32_t c = 0; c < rr->n; c++) {
    ir_replace_uses(f, rr->buf[c], rq->buf[c]);
    ir_replace_uses(f, rr->desc[c], rq->desc[c]);
  }
  struct ir_op *rl = &f->ops.v[r->loop];
  rl->args[3 + rs] = f->ops.v[q->loop].res + qs;
  rl->args[3 + rp] = f->ops.v[q->loop].res + qp;
  /* r's own allocations go, and the barrier that published its barriers' initialization */
  uint32_t de = ir_def_op(f, rr->empty), after_empty = ir_op_next(f, de);
  if (after_empty && f->ops.v[after_empty].code == IR_BARRIER) ir_op_erase(f, after_empty);
  ir_op_erase(f, ir_def_op(f, rr->full));
  ir_op_erase(f, de);
  for (uint32_t c = 0; c < rr->n; c++) {
    ir_op_erase(f, ir_def_op(f, rr->buf[c]));
    ir_op_erase(f, ir_def_op(f, rr->desc[c]));
  }
  return true;
}

/* ---- tiles copied once (attention's Q) ----
 * A tile stored once into a wgmma operand buffer in front of the ring loops
 * (`%q = load %T[...]; barrier; local_store %buf, 0, %q; barrier`) is copied by the
 * producer's TMA instead, completing on a one-slot barrier of its own (full); the
 * consumers wait for it where the store was and release the buffer (empty) after their
 * last top-level op that reads it. In a persistent program the producer then copies the
 * next tile's while the consumers finish the current one (persistent carries the phases). */
struct fill1 {
  uint32_t store, load;
  ir_val buf, full, empty, desc, idx[IR_MAX_RANK];
  uint32_t nidx;
  int64_t bytes, mask;
};

/* Whether every use of v in op id (or an op nested in it) is a wgmma's. */
static bool only_wgmma_uses(const struct ir_func *f, uint32_t id, ir_val v) {
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++)
    if (op->args[k] == v && op->code != IR_WGMMA) return false;
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++)
      if (!only_wgmma_uses(f, b->ops.v[i], v)) return false;
  }
  return true;
}

/* Recognizes top-level op `id` as such a store: a plain load (every index a scalar the
 * roles can share, zeros outside the tensor as TMA gives) read only by the store, into
 * slot 0 of a single-slot buffer that only wgmma reads, in a box TMA can copy. */
static bool find_fill1(struct ir_func *f, uint32_t id, struct fill1 *q, struct ir_type *box) {
  const struct ir_op *st = &f->ops.v[id];
  int64_t slot = -1;
  if (st->code != IR_LOCAL_STORE || !ir_value_const_int(f, st->args[1], &slot) || slot != 0) return false;
  uint32_t ld = ir_def_op(f, st->args[2]), al = ir_def_op(f, st->args[0]);
  if (!ld || !al || f->ops.v[al].code != IR_LOCAL_ALLOC || f->ops.v[ld].code != IR_LOAD) return false;
  const struct ir_op *lo = &f->ops.v[ld];
  if (lo->block != IR_BODY_BLOCK || lo->f != 0.0 || lo->nargs != 1u + ir_vtype(f, lo->args[0])->rank) return false;
  for (uint32_t k = 1; k < lo->nargs; k++)
    if (!outside_ok(f, lo->args[k], 0)) return false;
  const struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  for (uint32_t i = 0; i < body->ops.n; i++) {
    uint32_t o = body->ops.v[i];
    /* the loaded tile has one use; the buffer's readers are wgmma */
    if (o != id && (ir_op_uses(f, o, lo->res) || !only_wgmma_uses(f, o, st->args[0]))) return false;
  }
  if (!pass_tma_box(f, lo->args[0], (uint64_t)lo->i[0], ir_vtype(f, st->args[0]), box)) return false;
  const struct ir_type *bt = ir_vtype(f, st->args[0]);
  q->store = id;
  q->load = ld;
  q->nidx = lo->nargs - 1;
  for (uint32_t k = 1; k < lo->nargs; k++) q->idx[k - 1] = lo->args[k];
  q->mask = lo->i[0];
  q->buf = st->args[0];
  q->bytes = (int64_t)bt->dims[0] * bt->dims[1] * ir_dtype_bytes((ir_dtype)bt->dtype);
  return true;
}

/* Replaces the store (and its load, and the barriers right around it) by the barriers'
 * allocation, the tensor map and the consumers' wait for the copy. */
static void rewrite_fill1(struct ir_func *f, struct fill1 *q, const struct ir_type *box) {
  uint32_t at = ir_op_index(f, q->store), next = ir_op_next(f, q->store);
  uint32_t prev = at ? f->blocks.v[IR_BODY_BLOCK].ops.v[at - 1] : 0;
  struct ir_builder b;
  ir_builder_before(&b, f, q->store);
  b.loc = f->ops.v[q->store].loc;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  int32_t one[1] = {1};
  ir_type_id bars = ir_type_tile(f, DT_I64, 1, one);
  q->full = ir_build1(&b, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, q->full)].i[0] = 1;
  q->empty = ir_build1(&b, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, q->empty)].i[0] = f->warps / 4; /* one arrival per warpgroup */
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val t = f->ops.v[q->load].args[0];
  q->desc = ir_build1(&b, IR_TMA_DESC, ir_type_intern(f, box), &t, 1);
  ir_val zero = ir_const_int(&b, i32, 0);
  ir_val wa[3] = {q->full, zero, zero};
  ir_build(&b, IR_MBAR_WAIT, wa, 3, NULL, 0);
  if (next && f->ops.v[next].code == IR_BARRIER) ir_op_erase(f, next);
  ir_op_erase(f, q->store);
  ir_op_erase(f, q->load);
  if (prev && f->ops.v[prev].code == IR_BARRIER) ir_op_erase(f, prev);
}

/* The producer's copy: wait for the buffer to be empty, announce the bytes, copy. */
static void build_fill1(struct ir_func *f, struct ir_builder *pb, const struct fill1 *q) {
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val zero = ir_const_int(pb, i32, 0), one = ir_const_int(pb, i32, 1);
  ir_val wa[3] = {q->empty, zero, one};
  ir_build(pb, IR_MBAR_WAIT, wa, 3, NULL, 0);
  ir_val ea[2] = {q->full, zero};
  uint32_t e = ir_build(pb, IR_MBAR_EXPECT_TX, ea, 2, NULL, 0);
  f->ops.v[e].i[0] = q->bytes;
  ir_val args[5 + IR_MAX_RANK];
  args[0] = q->buf;
  args[1] = zero;
  args[2] = q->full;
  args[3] = zero;
  args[4] = q->desc;
  for (uint32_t k = 0; k < q->nidx; k++) args[5 + k] = q->idx[k];
  uint32_t tl = ir_build(pb, IR_TMA_LOAD, args, q->nidx + 5, NULL, 0);
  f->ops.v[tl].i[0] = q->mask;
}

enum { MAX_READ_LOOPS = 4 };

/* Whether v is available in front of position `at` of the consumer block: defined outside
 * it, or by an op before that position. */
static bool avail_before(const struct ir_func *f, uint32_t cons, ir_val v, uint32_t at) {
  uint32_t d = ir_def_op(f, v);
  if (!d || f->ops.v[d].block != cons) return !ir_defined_within(f, v, cons) || f->values.v[v].kind != IR_VAL_BLOCKARG;
  return ir_op_index(f, d) < at;
}

/* `mbar_arrive %empty, 0 [, pred] {per=128}`: one warpgroup's release of the buffer, in
 * front of op `at`, at op `loc`'s source line (pred 0: unconditional). */
static void build_release(struct ir_func *f, uint32_t at, uint32_t loc, const struct fill1 *q, ir_val pred) {
  struct ir_builder b;
  ir_builder_before(&b, f, at);
  b.loc = f->ops.v[loc].loc;
  ir_val ra[3] = {q->empty, ir_const_int(&b, ir_type_scalar(f, DT_I32), 0), pred};
  uint32_t r = ir_build(&b, IR_MBAR_ARRIVE, ra, pred ? 3 : 2, NULL, 0);
  f->ops.v[r].i[0] = 128;
}

/* The consumers' release. When every top-level reader of the buffer is a loop with a
 * positive constant step whose body reads it with one top-level wgmma, the buffer is
 * released in the last iteration that reads it, right after that wgmma completes: in loop
 * i's last iteration when every later loop has no iteration, or after the loops when
 * none had (attention: Q is free once the last scores are computed, and a persistent
 * producer copies the next tile's during the last softmax, P V and the epilogue).
 * Otherwise after the last top-level op that reads it. */
static void release_fill1(struct ir_func *f, uint32_t cons, const struct fill1 *q) {
  const struct ir_block *cb = &f->blocks.v[cons];
  uint32_t last = 0, loops[MAX_READ_LOOPS], readers[MAX_READ_LOOPS], nl = 0;
  bool per_iteration = true;
  for (uint32_t i = 0; i + 1 < cb->ops.n; i++) {
    uint32_t id = cb->ops.v[i];
    if (!ir_op_uses(f, id, q->buf)) continue;
    last = cb->ops.v[i + 1];
    const struct ir_op *op = &f->ops.v[id];
    int64_t step = 0;
    if (op->code != IR_FOR || nl == MAX_READ_LOOPS || !ir_value_const_int(f, op->args[2], &step) || step <= 0) {
      per_iteration = false;
      continue;
    }
    const struct ir_block *lb = &f->blocks.v[op->region];
    uint32_t r = 0, n = 0;
    for (uint32_t j = 0; j < lb->ops.n; j++) {
      if (!ir_op_uses(f, lb->ops.v[j], q->buf)) continue;
      n++;
      r = lb->ops.v[j];
    }
    if (n != 1 || f->ops.v[r].code != IR_WGMMA) per_iteration = false;
    loops[nl] = id;
    readers[nl++] = r;
  }
  if (!last) return;
  if (per_iteration) /* every loop's bounds known in front of the first loop */
    for (uint32_t l = 0; l < nl; l++)
      for (int k = 0; k < 2; k++) per_iteration &= avail_before(f, cons, f->ops.v[loops[l]].args[k], ir_op_index(f, loops[0]));
  if (!per_iteration) {
    build_release(f, last, last, q, 0);
    return;
  }
  struct ir_builder b;
  /* later[l]: no loop after l iterates */
  ir_builder_before(&b, f, loops[0]);
  b.loc = f->ops.v[loops[0]].loc;
  ir_val later[MAX_READ_LOOPS + 1];
  later[nl - 1] = 0;
  for (uint32_t l = nl - 1; l-- > 0;) {
    ir_val e = ir_binary(&b, IR_GE, f->ops.v[loops[l + 1]].args[0], f->ops.v[loops[l + 1]].args[1]);
    later[l] = later[l + 1] ? ir_binary(&b, IR_AND, e, later[l + 1]) : e;
  }
  ir_val e0 = ir_binary(&b, IR_GE, f->ops.v[loops[0]].args[0], f->ops.v[loops[0]].args[1]);
  ir_val none = later[0] ? ir_binary(&b, IR_AND, e0, later[0]) : e0;
  for (uint32_t l = 0; l < nl; l++) {
    /* after the reader's completion: the wait for its result, or the reader itself */
    uint32_t body = f->ops.v[loops[l]].region, at = readers[l];
    ir_val res = f->ops.v[readers[l]].res;
    const struct ir_block *lb = &f->blocks.v[body];
    for (uint32_t j = 0; j < lb->ops.n; j++) {
      const struct ir_op *w = &f->ops.v[lb->ops.v[j]];
      for (uint32_t k = 0; w->code == IR_WGMMA_WAIT && k < w->nargs; k++)
        if (w->args[k] == res) at = lb->ops.v[j]; /* a wait may name several results */
    }
    uint32_t next = ir_op_next(f, at);
    struct ir_builder lbld;
    ir_builder_before(&lbld, f, next);
    lbld.loc = f->ops.v[at].loc;
    const struct ir_op *lp = &f->ops.v[loops[l]];
    ir_val iv = f->blocks.v[body].args;
    ir_val pred = ir_binary(&lbld, IR_GE, ir_binary(&lbld, IR_ADD, iv, lp->args[2]), lp->args[1]);
    if (later[l]) pred = ir_binary(&lbld, IR_AND, pred, later[l]);
    build_release(f, next, at, q, pred);
  }
  build_release(f, last, last, q, none);
}

enum { MAX_RINGS = 8, MAX_FILL1 = 4 };

static bool specialize(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  /* the ring loops (attention has two: the unmasked key blocks, then the masked ones) */
  struct ring rings[MAX_RINGS];
  uint32_t nr = 0;
  for (uint32_t i = 0; i < body->ops.n; i++) {
    uint32_t id = body->ops.v[i];
    if (f->ops.v[id].code == IR_WARP_SPECIALIZE) return false;
    struct ring r;
    int k = find_ring(f, id, &r);
    if (k < 0 || (k > 0 && nr == MAX_RINGS)) return false;
    if (k > 0) rings[nr++] = r;
  }
  if (!nr) return false;
  const struct ir_op *lp = &f->ops.v[rings[0].loop];

  int pw = 4;
  int preg = f->sched.producer_regs > 0 ? f->sched.producer_regs : 40;
  /* the consumers take what the block holds beside the producer (tl_block_regs), at most
   * 240; a schedule's regs=P/C asking for more is held to that */
  int most = (int)((tl_block_regs(f->target, 32u * (unsigned)(f->warps + pw)) - 32u * pw * (unsigned)preg) /
                   (32u * (unsigned)f->warps)) / 8 * 8;
  int creg = f->sched.consumer_regs > 0 && f->sched.consumer_regs < most ? f->sched.consumer_regs : most;
  if (creg > 240) creg = 240;
  if (32 * (f->warps + pw) > (int)f->target->max_threads || creg < 24) return false;
  /* consecutive rings of the same copies: one ring */
  bool shared[MAX_RINGS] = {false};
  for (uint32_t r = 1; r < nr; r++) {
    struct ring_res rq, rr;
    if (ring_resources(f, &rings[r - 1], &rq) && ring_resources(f, &rings[r], &rr) &&
        same_ring(f, &rings[r - 1], &rq, &rings[r], &rr))
      shared[r] = share_ring(f, &rings[r - 1], &rq, &rings[r], &rr);
  }
  /* tiles copied once, in front of the first ring loop */
  struct fill1 fills[MAX_FILL1];
  uint32_t nf = 0;
  bool once = tl_sched_get(f->sched.once, 1) && tl_has(f->target, TL_FEAT_TMA);
  for (uint32_t i = 0; once && i < body->ops.n && body->ops.v[i] != rings[0].loop && nf < MAX_FILL1;) {
    struct ir_type box;
    if (!find_fill1(f, body->ops.v[i], &fills[nf], &box)) {
      i++;
      continue;
    }
    rewrite_fill1(f, &fills[nf++], &box);
    body = &f->blocks.v[IR_BODY_BLOCK];
    i = 0; /* (ops were inserted and erased: look again from the start) */
  }
  lp = &f->ops.v[rings[0].loop];

  struct ir_builder b;
  ir_builder_before(&b, f, rings[0].loop);
  b.loc = lp->loc;
  uint32_t ws = ir_build(&b, IR_WARP_SPECIALIZE, NULL, 0, NULL, 0);
  f->ops.v[ws].i[0] = pw;
  f->ops.v[ws].i[1] = preg;
  f->ops.v[ws].i[2] = creg;
  f->ops.v[ws].loc = f->ops.v[rings[0].loop].loc;
  uint32_t prod = f->ops.v[ws].region, cons = prod + 1;
  /* what the later rings' producers use is computed in front of the roles: their
   * allocations, tensor maps and scalars after the first ring loop move before the
   * warp_specialize op */
  uint8_t *moved = ARENA_NEWN(pc->scratch, uint8_t, f->values.n * 2 + 64);
  uint8_t *needed = ARENA_NEWN(pc->scratch, uint8_t, f->values.n + 1);
  for (uint32_t r = 0; r < nr; r++) {
    const struct ir_op *l = &f->ops.v[rings[r].loop];
    for (int k = 0; k < 3; k++) mark_needed(f, l->args[k], needed);
    mark_block_needed(f, f->ops.v[rings[r].refill].region, needed);
  }
  body = &f->blocks.v[IR_BODY_BLOCK];
  uint32_t nops = body->ops.n;
  uint32_t *ops = ARENA_NEWN(pc->scratch, uint32_t, nops + 1);
  memcpy(ops, body->ops.v, sizeof(uint32_t) * nops);
  bool after = false, new_mbar = false;
  for (uint32_t i = 0; i < nops; i++) {
    uint32_t id = ops[i];
    if (id == ws) {
      after = true;
      continue;
    }
    if (is_fill_if(f, id)) continue;
    const struct ir_op *op = &f->ops.v[id];
    if (!after) { /* what stays outside and what the consumers will compute */
      if (!shared_outside(f, id, moved))
        for (uint32_t r = 0; r < op->nres; r++) moved[op->res + r] = 1;
      continue;
    }
    /* what a producer loop needs, and only that: a consumer-only buffer stays behind the
     * first loop, where it may reuse the rings' memory */
    if (op->nres == 1 && needed[op->res] && shared_outside(f, id, moved)) {
      new_mbar |= op->code == IR_MBAR_ALLOC;
      struct ir_builder hb;
      ir_builder_before(&hb, f, ws);
      ir_op_move(&hb, id);
    } else {
      for (uint32_t r = 0; r < op->nres; r++) moved[op->res + r] = 1;
    }
  }
  if (new_mbar) { /* their initialization is published to both roles */
    struct ir_builder hb;
    ir_builder_before(&hb, f, ws);
    ir_build(&hb, IR_BARRIER, NULL, 0, NULL, 0);
  }
  /* the producer: each ring's fills, one loop after another */
  struct ir_builder pb;
  ir_builder_at_end(&pb, f, prod);
  pb.loc = f->ops.v[rings[0].loop].loc;
  for (uint32_t q = 0; q < nf; q++) build_fill1(f, &pb, &fills[q]);
  uint32_t prev = 0;
  for (uint32_t r = 0; r < nr; r++) {
    ir_val from[2] = {f->ops.v[prev].res, f->ops.v[prev].res + 1};
    prev = build_producer_loop(pc, &pb, &rings[r], shared[r] ? from : NULL);
  }
  ir_build(&pb, IR_YIELD, NULL, 0, NULL, 0);
  /* the consumer loops no longer fill */
  for (uint32_t r = 0; r < nr; r++) ir_op_erase(f, rings[r].refill);
  /* partition the body: prologue fills go, shared scalars and allocations stay outside,
   * everything else (in order) moves into the consumer */
  memset(moved, 0, f->values.n * 2 + 64);
  body = &f->blocks.v[IR_BODY_BLOCK];
  nops = body->ops.n;
  ops = ARENA_NEWN(pc->scratch, uint32_t, nops + 1);
  memcpy(ops, body->ops.v, sizeof(uint32_t) * nops);
  struct ir_builder cb;
  ir_builder_at_end(&cb, f, cons);
  after = false;
  bool since_barrier = false; /* a memory op moved into the consumer since the last barrier */
  bool since_mbar = false;     /* an mbarrier initialized outside since the last barrier */
  for (uint32_t i = 0; i < nops; i++) {
    uint32_t id = ops[i];
    if (id == ws) {
      after = true;
      continue;
    }
    if (is_fill_if(f, id)) {
      ir_op_erase(f, id);
      continue;
    }
    /* a barrier behind consumer work (Q stored for wgmma) orders that work: it goes along */
    bool is_bar = f->ops.v[id].code == IR_BARRIER;
    if (!after && is_bar && since_mbar) { /* publishes an initialization: stays outside */
      if (since_barrier) ir_build(&cb, IR_BARRIER, NULL, 0, NULL, 0);
      since_barrier = since_mbar = false;
      continue;
    }
    if (!after && shared_outside(f, id, moved) && !(is_bar && since_barrier)) {
      since_mbar |= f->ops.v[id].code == IR_MBAR_ALLOC;
      continue;
    }
    /* an mbarrier wait needs no barrier behind it: every thread waits for itself (Q's copy
     * by the producer: a barrier here would line the consumer warpgroups up at each tile) */
    if (is_bar) since_barrier = false;
    else if (((ir_ops[f->ops.v[id].code].flags & (OPF_READ | OPF_WRITE)) && f->ops.v[id].code != IR_MBAR_WAIT) ||
             f->ops.v[id].nregions)
      since_barrier = true;
    const struct ir_op *op = &f->ops.v[id];
    for (uint32_t r = 0; r < op->nres; r++) moved[op->res + r] = 1;
    ir_op_move(&cb, id);
  }
  ir_build(&cb, IR_YIELD, NULL, 0, NULL, 0);
  for (uint32_t q = 0; q < nf; q++) release_fill1(f, cons, &fills[q]);
  name_barriers(f, cons, 1, 32 * f->warps);
  f->threads = 32 * (f->warps + pw);
  return true;
}

void pass_warp_specialize(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_has(f->target, TL_FEAT_SETMAXNREG) || !tl_sched_get(f->sched.ws, 1) || f->warps % 4) return;
  if (specialize(pc)) pc->changed = true;
}
