/* wgmma_async.c - asynchronous wgmma in pipelined loops: the Tensor Cores keep working on
 * iteration i while iteration i+1 waits for its data and issues.
 *
 * Needs: the pipeline pass's output, whose loops record in `depth` how many iterations'
 * wgmma groups a refill leaves room for (1: the copies of iteration i do not overwrite the
 * stage iteration i-1 reads). Guarantees, for a loop with depth d > 0 whose body issues n
 * wgmma ops at its top level, each result used only as the accumulator of a later wgmma or
 * carried by the loop:
 *   - the wgmma are async (issue + commit, no wait);
 *   - after the last one, wgmma_wait {pending = n * d} on the accumulators the iteration
 *     produces: the groups of iteration i-d are complete, those of i and later in flight;
 *   - in the ring form, the release of a stage (mbar_arrive on the empty barrier) moves
 *     after that wait and names the stage of the previous iteration (a carried value),
 *     predicated off in the first iteration; after the loop the last stage is released;
 *   - after the loop, wgmma_wait {pending=0} makes the carried accumulators ordinary values
 *     for their uses there.
 * Loops whose accumulators are read inside the body (besides the wgmma chain) stay
 * synchronous.
 *
 *   for ... iter(%acc, %rd, ...) {               for ... iter(%acc, %rd, ..., %prev = 0) {
 *     mbar_wait %full, %rd, %ph                    mbar_wait %full, %rd, %ph
 *     %a = wgmma ..., %acc                 =>      %a = wgmma ..., %acc {async=1}
 *     mbar_arrive %empty, %rd                      %w = wgmma_wait %a {pending=1}
 *     ...                                          mbar_arrive %empty, %prev, %k != %lb
 *     yield %a, ...                                yield %w, ..., %rd }
 *   }                                            %r = wgmma_wait %res {pending=0}
 *                                                mbar_arrive %empty, %res_prev, %lb < %ub
 * (The releases are predicated, not branched around: ptxas serializes wgmma groups when
 * branches surround their waits, C7515.) */
#include <string.h>

#include "passes.h"

enum { MAX_WGMMA = 16 };

/* wgmma_wait {pending} on vals[0..n) at b; every later use of them reads the wait's results. */
static uint32_t wait_and_redirect(struct ir_builder *b, const ir_val *vals, uint32_t n, int64_t pending) {
  struct ir_func *f = b->f;
  ir_type_id types[MAX_WGMMA] = {0};
  for (uint32_t j = 0; j < n; j++) types[j] = f->values.v[vals[j]].type;
  uint32_t w = ir_build(b, IR_WGMMA_WAIT, vals, n, types, n);
  f->ops.v[w].i[0] = pending;
  for (uint32_t j = 0; j < n; j++) {
    ir_replace_uses(f, vals[j], f->ops.v[w].res + j);
    f->ops.v[w].args[j] = vals[j]; /* replace_uses rewrote the wait's own operand */
  }
  return w;
}

static bool used_only_by(struct ir_func *f, uint32_t body, ir_val v, const uint32_t *wg, uint32_t n) {
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++) {
      if (op->args[k] != v) continue;
      bool ok = false;
      if (op->code == IR_YIELD && op->block == body) ok = true;
      for (uint32_t j = 0; j < n; j++)
        if (i == wg[j] && k == 4) ok = true;
      if (!ok) return false;
    }
  }
  return true;
}

/* Whether a wgmma lies in a region nested in block `body` (an inner loop's own chain). */
static bool nested_wgmma(const struct ir_func *f, uint32_t body) {
  static const uint16_t wgmma = IR_WGMMA;
  const struct ir_block *b = &f->blocks.v[body];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t r = 0; r < op->nregions; r++)
      if (ir_block_has_op(f, op->region + r, &wgmma, 1)) return true;
  }
  return false;
}

static bool make_async(struct pass_ctx *pc, uint32_t loop) {
  struct ir_func *f = pc->f;
  int depth = (int)f->ops.v[loop].i[1];
  if (depth <= 0) return false;
  uint32_t body = f->ops.v[loop].region;
  const struct ir_block *bb = &f->blocks.v[body];
  uint32_t wg[MAX_WGMMA], n = 0, release = 0;
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[bb->ops.v[i]];
    if (op->code == IR_WGMMA && !op->i[1]) {
      if (n == MAX_WGMMA) return false;
      wg[n++] = bb->ops.v[i];
    }
    if (op->code == IR_MBAR_ARRIVE && n) release = bb->ops.v[i];
  }
  if (!n) return false;
  /* a product left in flight across the back edge would overlap the next iteration's
   * nested products (an inner loop's own chain, whose accumulator is set up and read
   * there): ptxas then serializes every wgmma of the kernel (C7514, C7515: a back-to-back
   * GEMM, tests/kernels/mlp2.tile). Such a loop's own products stay synchronous. */
  if (nested_wgmma(f, body)) return false;
  /* the accumulators that leave the iteration: results no later wgmma of it consumes */
  ir_val live[MAX_WGMMA];
  uint32_t nlive = 0;
  for (uint32_t j = 0; j < n; j++) {
    ir_val r = f->ops.v[wg[j]].res;
    if (!used_only_by(f, body, r, wg, n)) return false;
    bool chained = false;
    for (uint32_t k = 0; k < n; k++) chained |= f->ops.v[wg[k]].args[4] == r;
    if (!chained) live[nlive++] = r;
  }
  /* the carried accumulators must come back only through these wgmma: a carried value read
   * in the body (attention's acc * alpha with no product before it to wait on) would be
   * read in flight */
  const struct ir_op *yo = &f->ops.v[VEC_LAST(bb->ops)];
  for (uint32_t k = 0; k < yo->nargs; k++)
    for (uint32_t j = 0; j < nlive; j++)
      if (yo->args[k] == live[j] && !used_only_by(f, body, bb->args + 1 + k, wg, n)) return false;
  for (uint32_t j = 0; j < n; j++) f->ops.v[wg[j]].i[1] = 1;
  struct ir_builder b;
  ir_builder_before(&b, f, wg[n - 1]);
  /* after the last wgmma */
  const struct ir_block *blk = &f->blocks.v[body];
  uint32_t next = 0;
  for (uint32_t i = 0; i + 1 < blk->ops.n; i++)
    if (blk->ops.v[i] == wg[n - 1]) next = blk->ops.v[i + 1];
  ir_builder_before(&b, f, next);
  ir_type_id types[MAX_WGMMA];
  for (uint32_t j = 0; j < nlive; j++) types[j] = f->values.v[live[j]].type;
  uint32_t w = ir_build(&b, IR_WGMMA_WAIT, live, nlive, types, nlive);
  f->ops.v[w].i[0] = (int64_t)n * depth;
  /* the yield carries the waited values (still pending: the same registers) */
  uint32_t yid = VEC_LAST(f->blocks.v[body].ops);
  struct ir_op *y = &f->ops.v[yid];
  for (uint32_t k = 0; k < y->nargs; k++)
    for (uint32_t j = 0; j < nlive; j++)
      if (y->args[k] == live[j]) y->args[k] = f->ops.v[w].res + j;
  /* the ring's release: the previous iteration's stage, after the wait */
  ir_val prev_res = 0, empty = 0;
  int64_t per = 128;
  if (release) {
    ir_type_id i32 = ir_type_scalar(f, DT_I32);
    ir_builder_before(&b, f, loop);
    ir_val zero = ir_const_int(&b, i32, 0);
    loop = ir_for_add_carried(f, loop, &zero, 1);
    body = f->ops.v[loop].region;
    uint32_t nc = f->ops.v[loop].nres - 1;
    ir_val prev = f->blocks.v[body].args + 1 + nc;
    ir_val rd = f->ops.v[release].args[1];
    empty = f->ops.v[release].args[0];
    per = f->ops.v[release].i[0];
    ir_op_remove(f, release);
    /* after the wait: if this is not the first iteration, release the previous stage */
    blk = &f->blocks.v[body];
    for (uint32_t i = 0; i + 1 < blk->ops.n; i++)
      if (blk->ops.v[i] == w) next = blk->ops.v[i + 1];
    ir_builder_before(&b, f, next);
    ir_val iv = f->blocks.v[body].args, lb = f->ops.v[loop].args[0];
    ir_val ra[3] = {empty, prev, ir_binary(&b, IR_NE, iv, lb)};
    uint32_t arr = ir_build(&b, IR_MBAR_ARRIVE, ra, 3, NULL, 0);
    f->ops.v[arr].i[0] = per;
    /* carry this iteration's stage */
    yid = VEC_LAST(f->blocks.v[body].ops);
    y = &f->ops.v[yid];
    ir_val *ya = ARENA_NEWN(f->arena, ir_val, y->nargs + 2);
    memcpy(ya, y->args, sizeof(ir_val) * y->nargs);
    ya[y->nargs] = rd;
    ir_op_set_args(f, yid, ya, y->nargs + 1);
    prev_res = f->ops.v[loop].res + nc;
  }
  /* after the loop: wait for everything, then the results are ordinary values */
  const struct ir_block *outer = &f->blocks.v[f->ops.v[loop].block];
  uint32_t after = 0;
  for (uint32_t i = 0; i + 1 < outer->ops.n; i++)
    if (outer->ops.v[i] == loop) after = outer->ops.v[i + 1];
  if (after) ir_builder_before(&b, f, after);
  else ir_builder_at_end(&b, f, f->ops.v[loop].block);
  /* which loop results are pending: those whose yielded value is a wait result */
  y = &f->ops.v[VEC_LAST(f->blocks.v[body].ops)];
  ir_val pend[MAX_WGMMA];
  uint32_t np = 0;
  for (uint32_t k = 0; k < y->nargs && np < MAX_WGMMA; k++)
    if (ir_def_op(f, y->args[k]) == w) pend[np++] = f->ops.v[loop].res + k;
  wait_and_redirect(&b, pend, np, 0);
  if (release) { /* the last stage, if the loop ran at all */
    const struct ir_op *lp = &f->ops.v[loop];
    ir_val ra[3] = {empty, prev_res, ir_binary(&b, IR_LT, lp->args[0], lp->args[1])};
    uint32_t arr = ir_build(&b, IR_MBAR_ARRIVE, ra, 3, NULL, 0);
    f->ops.v[arr].i[0] = per;
  }
  return true;
}

/* ---- issue early, wait late: loops with barriers ----
 *
 * A loop that reads its products' results inside the body (attention backward: S and dP
 * feed elementwise work, dQ a store) stays out of the form above, and its wgmma wait as
 * they issue. Where its body also has barriers of all the role's threads (a product's
 * operand staged through shared memory), the warpgroups cannot take turns either (pingpong
 * needs them free to drift), so nothing overlaps the Tensor Cores with the elementwise work.
 * For such loops (unless the schedule says early=0; PERF.md 77 measured it slower while the
 * registers live around the products spilled at hd128, PERF.md 79 faster once they no longer
 * did), every wgmma at the top level of the body is issued asynchronously and
 * waited for only where its result is first read (wgmma_wait {pending = the wgmma issued
 * since}, groups completing in order), or before an op that writes a buffer it reads; a
 * result used only as a later wgmma's accumulator or yielded stays in flight, and before
 * the yield one wait takes whatever is still in flight. The body's mbarrier arrivals (the
 * release of a stage those wgmma read) move after that wait. What overlaps is then decided
 * by the order of the products in the source: a product issued before the elementwise work
 * that does not need it runs beside that work. */
enum { MAX_PEND = MAX_WGMMA };

static bool reads_buffer(const struct ir_op *op, ir_val buf) {
  return op->code == IR_WGMMA && (op->args[0] == buf || op->args[2] == buf);
}

/* Whether op (or an op nested in it) uses v other than as the accumulator of an async wgmma
 * or a yielded value. */
static bool plain_use(const struct ir_func *f, uint32_t id, ir_val v) {
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++)
    if (op->args[k] == v && !(op->code == IR_WGMMA && op->i[1] && k == 4) && op->code != IR_YIELD) return true;
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++)
      if (plain_use(f, b->ops.v[i], v)) return true;
  }
  return false;
}

/* The shared buffer op writes (local_store, async copies, TMA), 0 if none. */
static ir_val written_buffer(const struct ir_op *op) {
  if (op->code == IR_LOCAL_STORE || op->code == IR_ASYNC_COPY || op->code == IR_TMA_LOAD) return op->args[0];
  return 0;
}

/* A wgmma whose accumulator starts from a computed tile (attention backward's -delta folded
 * into dP's: `d_o @ v.T + (-delta)[:, None]`) computed after the wgmma before it: the ops
 * that compute that tile move in front of the earlier wgmma, so that both groups' starting
 * registers exist before the first is issued (codegen copies a repeated value's registers
 * there; copied after a group is in flight, ptxas waits for the group: C7517). Only ops
 * that are pure, load a tensor the kernel does not write, or read a buffer nothing between
 * writes or guards (no barrier or mbarrier wait between), and that do not read the earlier
 * wgmma's result. */
static void hoist_acc_inits(struct ir_func *f, uint32_t body, struct arena *a) {
  const struct ir_block *bb = &f->blocks.v[body];
  uint8_t *chain = ARENA_NEWN(a, uint8_t, bb->ops.n + 1);
  for (uint32_t wpos = 0, ppos = UINT32_MAX; wpos < f->blocks.v[body].ops.n; wpos++) {
    bb = &f->blocks.v[body];
    const struct ir_op *w = &f->ops.v[bb->ops.v[wpos]];
    if (w->code != IR_WGMMA) continue;
    uint32_t prev = ppos;
    ppos = wpos;
    double c0 = 1.0;
    uint32_t d = ir_def_op(f, w->args[4]);
    if (prev == UINT32_MAX || !d || f->ops.v[d].block != body || ir_op_index(f, d) < prev ||
        (ir_value_const_float(f, w->args[4], &c0) && c0 == 0.0))
      continue;
    /* the chain: ops between the two wgmma that the accumulator depends on */
    memset(chain, 0, bb->ops.n + 1);
    chain[ir_op_index(f, d)] = 1;
    bool ok = true;
    for (uint32_t q = wpos; q-- > prev + 1 && ok;) {
      if (!chain[q]) continue;
      const struct ir_op *op = &f->ops.v[bb->ops.v[q]];
      ok = !op->nregions && ((ir_ops[op->code].flags & OPF_PURE) || op->code == IR_LOCAL_LOAD ||
                             (op->code == IR_LOAD && !ir_block_writes_tensor(f, IR_BODY_BLOCK, op->args[0])));
      for (uint32_t k = 0; k < op->nargs && ok; k++) {
        uint32_t ad = ir_def_op(f, op->args[k]);
        if (!ad || f->ops.v[ad].block != body) continue;
        uint32_t ap = ir_op_index(f, ad);
        if (ap == prev) ok = false; /* the earlier wgmma's result */
        else if (ap > prev) chain[ap] = 1;
      }
      /* a buffer read moves above nothing that writes it or orders it */
      for (uint32_t r = prev + 1; r < q && ok && op->code == IR_LOCAL_LOAD; r++) {
        const struct ir_op *o = &f->ops.v[bb->ops.v[r]];
        ok = !(o->code == IR_BARRIER || o->code == IR_MBAR_WAIT || o->nregions || written_buffer(o) == op->args[0]);
      }
    }
    if (!ok) continue;
    struct ir_builder b;
    ir_builder_before(&b, f, bb->ops.v[prev]);
    uint32_t nmove = 0, *move = ARENA_NEWN(a, uint32_t, wpos - prev);
    for (uint32_t q = prev + 1; q < wpos; q++)
      if (chain[q]) move[nmove++] = bb->ops.v[q];
    for (uint32_t k = 0; k < nmove; k++) ir_op_move(&b, move[k]); /* (wpos stays where it was) */
  }
}

static bool issue_early(struct pass_ctx *pc, uint32_t loop) {
  struct ir_func *f = pc->f;
  uint32_t body = f->ops.v[loop].region;
  static const uint16_t barrier[1] = {IR_BARRIER};
  const struct ir_block *bb = &f->blocks.v[body];
  uint32_t n = 0;
  bool has_barrier = false;
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[bb->ops.v[i]];
    if (op->code == IR_WGMMA && op->i[1]) return false; /* scheduled already */
    if (op->code == IR_WGMMA) n++;
    if (op->code == IR_WGMMA_WAIT) return false;
    has_barrier |= op->code == IR_BARRIER || (op->nregions && ir_block_has_op(f, op->region, barrier, 1));
  }
  if (n < 2 || n > MAX_PEND || !has_barrier || !tl_sched_get(f->sched.early, 1)) return false;
  hoist_acc_inits(f, body, pc->scratch);
  /* walk the body in order, keeping the in-flight wgmma (oldest first) */
  uint32_t pend[MAX_PEND], np = 0;
  uint32_t *arrivals = ARENA_NEWN(pc->scratch, uint32_t, bb->ops.n), na = 0;
  for (uint32_t i = 0; i < f->blocks.v[body].ops.n; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_YIELD) break;
    if (op->code == IR_MBAR_ARRIVE && np) { /* a release: after the final wait */
      arrivals[na++] = id;
      continue;
    }
    /* the oldest in-flight wgmma this op needs complete: its result read, or a buffer it
     * reads written; everything issued before it completes with it */
    int need = -1;
    ir_val wb = written_buffer(op);
    for (uint32_t j = 0; j < np; j++)
      if (plain_use(f, id, f->ops.v[pend[j]].res) || (wb && reads_buffer(&f->ops.v[pend[j]], wb))) need = (int)j;
    if (need >= 0) {
      /* wait for pend[0..need]; the results waited for are those read later (all of them:
       * a wait ties the registers it names, so the ones still read go through it) */
      ir_val vals[MAX_PEND];
      uint32_t nv = 0;
      for (uint32_t j = 0; j <= (uint32_t)need; j++) vals[nv++] = f->ops.v[pend[j]].res;
      struct ir_builder b;
      ir_builder_before(&b, f, id);
      b.loc = f->ops.v[id].loc;
      wait_and_redirect(&b, vals, nv, (int64_t)(np - 1 - (uint32_t)need));
      memmove(pend, pend + need + 1, sizeof pend[0] * (np - 1 - (uint32_t)need));
      np -= (uint32_t)need + 1;
      i++; /* the wait now stands before op */
      op = &f->ops.v[id];
    }
    if (op->code == IR_WGMMA) {
      op->i[1] = 1;
      pend[np++] = id;
    }
  }
  /* before the yield: whatever is still in flight, then the releases */
  uint32_t yid = VEC_LAST(f->blocks.v[body].ops);
  struct ir_builder b;
  ir_builder_before(&b, f, yid);
  if (np) {
    ir_val vals[MAX_PEND];
    for (uint32_t j = 0; j < np; j++) vals[j] = f->ops.v[pend[j]].res;
    wait_and_redirect(&b, vals, np, 0);
  }
  for (uint32_t j = 0; j < na; j++) ir_op_move(&b, arrivals[j]);
  return true;
}

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct pass_ctx *pc = ud;
  if (f->ops.v[id].code == IR_FOR && f->ops.v[id].block && (make_async(pc, id) || issue_early(pc, id))) pc->changed = true;
}

void pass_wgmma_async(struct pass_ctx *pc) {
  if (!ir_func_wgmma(pc->f)) return;
  ir_walk(pc->f, IR_BODY_BLOCK, visit, pc);
}
