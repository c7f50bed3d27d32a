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

/* The producer's loop for ring r: every iteration's fill, in its own ring position. */
static void build_producer_loop(struct pass_ctx *pc, struct ir_builder *pb, const struct ring *r) {
  struct ir_func *f = pc->f;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  const struct ir_op *lp = &f->ops.v[r->loop];
  int S = (int)lp->i[0];
  ir_val zero = ir_const_int(pb, i32, 0);
  ir_val inits[2] = {zero, zero};
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
}

enum { MAX_RINGS = 8 };

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
  int creg = f->sched.consumer_regs > 0 ? f->sched.consumer_regs
                                        : (int)((f->target->regs_per_sm - 32u * pw * preg) / (32u * f->warps)) / 8 * 8;
  if (creg > 240) creg = 240;
  if (32 * (f->warps + pw) > (int)f->target->max_threads || creg < 24) return false;

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
  for (uint32_t r = 0; r < nr; r++) build_producer_loop(pc, &pb, &rings[r]);
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
    if (is_bar) since_barrier = false;
    else if ((ir_ops[f->ops.v[id].code].flags & (OPF_READ | OPF_WRITE)) || f->ops.v[id].nregions) since_barrier = true;
    const struct ir_op *op = &f->ops.v[id];
    for (uint32_t r = 0; r < op->nres; r++) moved[op->res + r] = 1;
    ir_op_move(&cb, id);
  }
  ir_build(&cb, IR_YIELD, NULL, 0, NULL, 0);
  name_barriers(f, cons, 1, 32 * f->warps);
  f->threads = 32 * (f->warps + pw);
  return true;
}

void pass_warp_specialize(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_has(f->target, TL_FEAT_SETMAXNREG) || !tl_sched_get(f->sched.ws, 1) || f->warps % 4) return;
  if (specialize(pc)) pc->changed = true;
}
