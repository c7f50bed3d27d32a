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

static bool has_tma_load(const struct ir_func *f, uint32_t blk) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_TMA_LOAD) return true;
    for (uint32_t r = 0; r < op->nregions; r++)
      if (has_tma_load(f, op->region + r)) return true;
  }
  return false;
}

static bool is_fill_if(const struct ir_func *f, uint32_t op) {
  const struct ir_op *o = &f->ops.v[op];
  return o->code == IR_IF && o->nres == 0 && has_tma_load(f, o->region);
}

/* Every operand used in block blk (recursively) is defined outside `body`, inside blk, or
 * is one of the allowed values. */
static bool uses_only(const struct ir_func *f, uint32_t blk, uint32_t body, const ir_val *ok, uint32_t nok) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val a = op->args[k];
      bool allowed = !ir_defined_within(f, a, body) || ir_defined_within(f, a, blk);
      for (uint32_t j = 0; j < nok; j++) allowed |= a == ok[j];
      if (!allowed) return false;
    }
    for (uint32_t r = 0; r < op->nregions; r++)
      if (!uses_only(f, op->region + r, body, ok, nok)) return false;
  }
  return true;
}

static void name_barriers(struct ir_func *f, uint32_t blk, int id, int threads) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_BARRIER) op->i[0] = id, op->i[1] = threads;
    for (uint32_t r = 0; r < op->nregions; r++) name_barriers(f, op->region + r, id, threads);
  }
}

/* An op that both roles may share from outside: allocations, tensor maps, the CTA barrier
 * publishing the mbarrier initialization, and pure scalar computations. */
static bool shared_outside(const struct ir_func *f, uint32_t id, const uint8_t *moved) {
  const struct ir_op *op = &f->ops.v[id];
  switch (op->code) {
  case IR_LOCAL_ALLOC: case IR_MBAR_ALLOC: case IR_TMA_DESC: case IR_BARRIER:
    return true;
  default:
    break;
  }
  if (!(ir_ops[op->code].flags & OPF_PURE) || op->nregions || op->nres != 1) return false;
  if (!ir_type_is_scalar(ir_vtype(f, op->res))) return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (moved[op->args[k]]) return false;
  return true;
}

static bool specialize(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  /* the ring loop and its refill */
  uint32_t loop = 0, refill = 0;
  for (uint32_t i = 0; i < body->ops.n; i++) {
    uint32_t id = body->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_WARP_SPECIALIZE) return false;
    if (op->code != IR_FOR) continue;
    const struct ir_block *lb = &f->blocks.v[op->region];
    for (uint32_t j = 0; j < lb->ops.n; j++)
      if (is_fill_if(f, lb->ops.v[j])) {
        if (loop && loop != id) return false; /* one ring loop per kernel for now */
        loop = id;
        refill = lb->ops.v[j];
      }
  }
  if (!loop) return false;
  const struct ir_op *lp = &f->ops.v[loop];
  uint32_t lbody = lp->region;
  int S = (int)lp->i[0];
  /* the refill's condition is lt(ahead, ub); its stage and phase are carried by the loop */
  uint32_t cd = ir_def_op(f, f->ops.v[refill].args[0]);
  if (!cd || f->ops.v[cd].code != IR_LT || f->ops.v[cd].args[1] != lp->args[1]) return false;
  ir_val ahead = f->ops.v[cd].args[0];
  uint32_t then = f->ops.v[refill].region;
  ir_val wr = 0, wph = 0;
  const struct ir_block *tb = &f->blocks.v[then];
  for (uint32_t i = 0; i < tb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[tb->ops.v[i]];
    if (op->code == IR_MBAR_EXPECT_TX) wr = op->args[1];
    if (op->code == IR_MBAR_WAIT) {
      uint32_t x = ir_def_op(f, op->args[2]);
      if (x && f->ops.v[x].code == IR_XOR) wph = f->ops.v[x].args[0];
    }
  }
  ir_val ok[3] = {ahead, wr, wph};
  if (!wr || !wph || !uses_only(f, then, lbody, ok, 3)) return false;

  int pw = 4;
  int preg = f->sched.producer_regs > 0 ? f->sched.producer_regs : 40;
  int creg = f->sched.consumer_regs > 0 ? f->sched.consumer_regs
                                        : (int)((f->target->regs_per_sm - 32u * pw * preg) / (32u * f->warps)) / 8 * 8;
  if (creg > 240) creg = 240;
  if (32 * (f->warps + pw) > (int)f->target->max_threads || creg < 24) return false;

  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  struct ir_builder b;
  ir_builder_before(&b, f, loop);
  b.loc = lp->loc;
  uint32_t ws = ir_build(&b, IR_WARP_SPECIALIZE, NULL, 0, NULL, 0);
  f->ops.v[ws].i[0] = pw;
  f->ops.v[ws].i[1] = preg;
  f->ops.v[ws].i[2] = creg;
  f->ops.v[ws].loc = lp->loc;
  uint32_t prod = f->ops.v[ws].region, cons = prod + 1;
  /* producer: every iteration's fill, in its own ring position */
  struct ir_builder pb;
  ir_builder_at_end(&pb, f, prod);
  pb.loc = lp->loc;
  lp = &f->ops.v[loop];
  ir_val zero = ir_const_int(&pb, i32, 0);
  ir_val inits[2] = {zero, zero};
  uint32_t pl = ir_build_for(&pb, lp->args[0], lp->args[1], lp->args[2], inits, 2);
  f->ops.v[pl].loc = lp->loc;
  uint32_t plb = f->ops.v[pl].region;
  ir_val piv = f->blocks.v[plb].args, ps = piv + 1, pp = piv + 2;
  struct ir_builder lbld;
  ir_builder_at_end(&lbld, f, plb);
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  ir_map_set(&m, ahead, piv);
  ir_map_set(&m, wr, ps);
  ir_map_set(&m, wph, pp);
  tb = &f->blocks.v[then];
  for (uint32_t i = 0; i + 1 < tb->ops.n; i++) ir_clone_op(&lbld, tb->ops.v[i], &m); /* all but the yield */
  ir_val s1 = ir_binary(&lbld, IR_ADD, ps, ir_const_int(&lbld, i32, 1));
  ir_val wrap = ir_binary(&lbld, IR_EQ, s1, ir_const_int(&lbld, i32, S));
  ir_val sa[3] = {wrap, ir_const_int(&lbld, i32, 0), s1};
  ir_val ns = ir_build1(&lbld, IR_SELECT, i32, sa, 3);
  ir_val pa[3] = {wrap, ir_binary(&lbld, IR_XOR, pp, ir_const_int(&lbld, i32, 1)), pp};
  ir_val np = ir_build1(&lbld, IR_SELECT, i32, pa, 3);
  ir_val ya[2] = {ns, np};
  ir_build(&lbld, IR_YIELD, ya, 2, NULL, 0);
  ir_build(&pb, IR_YIELD, NULL, 0, NULL, 0);
  /* the consumer loop no longer fills */
  ir_op_erase(f, refill);
  /* partition the body: prologue fills go, shared scalars and allocations stay outside,
   * everything else (in order) moves into the consumer */
  uint8_t *moved = ARENA_NEWN(pc->scratch, uint8_t, f->values.n * 2 + 64);
  body = &f->blocks.v[IR_BODY_BLOCK];
  uint32_t nops = body->ops.n;
  uint32_t *ops = ARENA_NEWN(pc->scratch, uint32_t, nops + 1);
  memcpy(ops, body->ops.v, sizeof(uint32_t) * nops);
  struct ir_builder cb;
  ir_builder_at_end(&cb, f, cons);
  bool after = false;
  for (uint32_t i = 0; i < nops; i++) {
    uint32_t id = ops[i];
    if (id == ws) {
      after = true;
      continue;
    }
    if (!after && is_fill_if(f, id)) {
      ir_op_erase(f, id);
      continue;
    }
    if (!after && shared_outside(f, id, moved)) continue;
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
