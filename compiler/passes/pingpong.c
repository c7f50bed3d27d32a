/* pingpong.c - the consumer warpgroups take turns at the Tensor Cores (FlashAttention-3's
 * ping-pong scheduling).
 *
 * Needs: warp specialization with two or more consumer warpgroups (warps >= 8); a loop of
 * the consumer role whose body (no nested regions, no barriers) issues two or more wgmma
 * with elementwise work between them (attention: the scores, the softmax, the output
 * product). Guarantees: the warpgroups issue their products one after the other, so that
 * one warpgroup's elementwise work runs while the next one's products hold the Tensor
 * Cores. Only where that elementwise work holds a reduction (the forward's row maximum and
 * sum: a chain of shuffles the warpgroup waits on, which the other's products fill): where
 * it is elementwise alone (the backward's P and dS) the warpgroups interleave by themselves
 * and the turns' waits only cost, measured 5-20% on attention_bwd_dq and 5% over
 * attention_bwd_dkdv's shapes (PERF.md 78); schedule pingpong=1 adds turns there too,
 * pingpong=0 nowhere. The body, seen as a cycle, is cut at its longest stretch of work
 * between two wgmma (E, the elementwise part); the rest, from the wgmma after E round to the
 * wgmma before it (the products), is the warpgroup's turn:
 *
 *                                 turn_pass {who=1}; turn_wait     (warpgroup 0 goes first)
 *   for ... {                     for ... {
 *     W1; E; W2          =>         W1 {async}; turn_pass; wgmma_wait W1 {pending=0}; E; turn_wait; W2
 *   }                             }
 *                                 turn_pass {who=2}                (the last turns)
 *
 * The turn is handed on once its last product (W1) is issued, not once it completes
 * (schedule handoff=1, the default; FlashAttention-3 does the same): the next warpgroup's
 * W2 then queues behind W1 on the Tensor Cores instead of starting after W1's completion
 * has been waited for and signalled (PERF.md 55: +2-15%). Also leaving W2 in flight into
 * the next iteration (released behind the next W1) measured slower: a stage is released
 * later, and ptxas does not follow group counts across the back edge (a pending=1 wait
 * for the carried product made it serialize every wgmma, C7514).
 * The rotated loop of wgmma-overlap (W1; W2; E) gets turn_wait before W1 and turn_pass
 * after W2, as in FlashAttention-3; its turn lies inside the body, so in front of the loop
 * only the first pass goes, and after it one more round of turns closes them. Without turns both warpgroups, released by the same
 * stage barrier, tend to run their softmax at the same time while the Tensor Cores idle.
 * Every loop gets its turns closed after it (each wait has its pass: the verifier checks
 * the balance per block), so loops in sequence and the persistent tile loop reuse the same
 * named barriers. */
#include "passes.h"

enum { TURN_BARRIER = 3 }; /* named barriers 1 and 2 are the roles' own (codegen) */

/* Work between two issues: ops that compute tiles (the elementwise part), not the scalar
 * bookkeeping of stages and phases. */
static int weight(const struct ir_func *f, uint32_t id) {
  const struct ir_op *op = &f->ops.v[id];
  return op->nres && !ir_type_is_scalar(ir_vtype(f, op->res)) ? 1 : 0;
}

/* `w = wgmma_wait x {pending=0}` in front of op `at`; the uses of x read w's result. */
static void wait_for(struct ir_func *f, uint32_t at, ir_val x) {
  struct ir_builder b;
  ir_builder_before(&b, f, at);
  b.loc = f->ops.v[at].loc;
  ir_type_id t = f->values.v[x].type;
  uint32_t w = ir_build(&b, IR_WGMMA_WAIT, &x, 1, &t, 1);
  f->ops.v[w].i[0] = 0;
  ir_replace_uses(f, x, f->ops.v[w].res);
  ir_op_set_args(f, w, &x, 1);
}

/* Does the stretch of body ops from index `from` (exclusive) round to `to` (exclusive) hold a
 * reduction or a scan? */
static bool stretch_reduces(const struct ir_func *f, const struct ir_block *bb, uint32_t from, uint32_t to) {
  for (uint32_t i = (from + 1) % bb->ops.n; i != to; i = (i + 1) % bb->ops.n)
    switch (f->ops.v[bb->ops.v[i]].code) {
    case IR_REDUCE_SUM: case IR_REDUCE_MAX: case IR_REDUCE_MIN:
    case IR_SCAN_SUM: case IR_SCAN_PROD: case IR_SCAN_MAX: case IR_SCAN_MIN: return true;
    default: break;
    }
  return false;
}

/* always: turns whatever the elementwise work is (schedule pingpong=1); otherwise only where
 * the elementwise stretch holds a reduction (see the file's comment) */
static bool add_turns(struct ir_func *f, uint32_t loop, int groups, int handoff, bool always) {
  const struct ir_block *bb = &f->blocks.v[f->ops.v[loop].region];
  uint32_t pos[16], m = 0, n = bb->ops.n;
  for (uint32_t i = 0; i < n; i++) {
    const struct ir_op *op = &f->ops.v[bb->ops.v[i]];
    if (op->nregions || op->code == IR_BARRIER || op->code == IR_TURN_WAIT || op->code == IR_TURN_PASS) return false;
    if (op->code == IR_WGMMA) {
      if (m == 16) return false;
      pos[m++] = i;
    }
  }
  if (m < 2) return false;
  /* the longest stretch of work between consecutive issues, the back edge included */
  int best = -1;
  uint32_t k = 0;
  for (uint32_t j = 0; j < m; j++) {
    int w = 0;
    for (uint32_t i = (pos[j] + 1) % n; i != pos[(j + 1) % m]; i = (i + 1) % n) w += weight(f, bb->ops.v[i]);
    if (w > best) best = w, k = j;
  }
  if (best < 4) return false; /* products back to back: nothing to run beside them */
  if (!always && !stretch_reduces(f, bb, pos[k], pos[(k + 1) % m])) return false;
  uint32_t before = bb->ops.v[pos[(k + 1) % m]], next = bb->ops.v[pos[k] + 1]; /* (the yield ends the body) */
  uint32_t w1 = bb->ops.v[pos[k]];
  const struct ir_block *ob = &f->blocks.v[f->ops.v[loop].block];
  uint32_t follow = 0;
  for (uint32_t i = 0; i + 1 < ob->ops.n; i++)
    if (ob->ops.v[i] == loop) follow = ob->ops.v[i + 1];
  if (!follow) return false;
  /* the turn spans the back edge (W1; E; W2) unless E does (W1; W2; E: the turn lies inside) */
  bool spans = k != m - 1;
  struct ir_builder b;
  uint32_t ids[5], nids = 0;
  /* in the body: the turn ends after the wgmma in front of E, starts again before the one after it */
  ir_builder_before(&b, f, next);
  ids[nids++] = ir_build(&b, IR_TURN_PASS, NULL, 0, NULL, 0);
  ir_builder_before(&b, f, before);
  ids[nids++] = ir_build(&b, IR_TURN_WAIT, NULL, 0, NULL, 0);
  /* around the loop: the last warpgroup hands warpgroup 0 the first turn; after it the
   * turns are closed: a turn spanning the back edge by the passes of all but the last
   * warpgroup, one inside the body by one more round (warpgroup 0 takes back the last
   * one's final pass, then hands on until the last warpgroup has its turn) */
  ir_builder_before(&b, f, loop);
  ids[nids++] = ir_build(&b, IR_TURN_PASS, NULL, 0, NULL, 0);
  if (spans) ids[nids++] = ir_build(&b, IR_TURN_WAIT, NULL, 0, NULL, 0);
  ir_builder_before(&b, f, follow);
  if (!spans) ids[nids++] = ir_build(&b, IR_TURN_WAIT, NULL, 0, NULL, 0);
  ids[nids++] = ir_build(&b, IR_TURN_PASS, NULL, 0, NULL, 0);
  for (uint32_t i = 0; i < nids; i++) {
    struct ir_op *op = &f->ops.v[ids[i]];
    op->i[0] = TURN_BARRIER;
    op->i[1] = groups;
    op->i[2] = i == 0 ? 0 : i == 2 ? 1 : i + 1 == nids ? 2 : 0;
  }
  /* hand-off on issue: the turn's last product (in front of E) is left in flight across
   * the pass and waited for after it, so the next warpgroup's products queue behind it */
  if (handoff && spans && !f->ops.v[w1].i[1]) {
    f->ops.v[w1].i[1] = 1;
    wait_for(f, ir_op_next(f, ids[0]), f->ops.v[w1].res);
  }
  return true;
}

/* Turns across the tiles of a persistent program's tile loop (schedule tileturns=1; off by
 * default: measured 0-2% slower on attention, PERF.md 61). Each tile opens the turns
 * of its first loop (the last warpgroup passes to warpgroup 0: who=1) and closes those of its
 * last (all but the last pass: who=2), so warpgroup 0 would start a tile's products only
 * when the last warpgroup has finished the previous tile's epilogue. Instead the opening pass
 * goes in front of the tile loop once and the closing pass becomes every warpgroup's (who=0):
 * the last warpgroup hands the next tile's first turn on right behind its last product, and
 * its epilogue runs beside warpgroup 0's next products (FlashAttention-3's schedule). After
 * the tile loop one more round takes the last hand-off back, so every pass has its wait:
 *
 *   for %t ... {                                  turn_pass {who=1}
 *     turn_pass {who=1}; turn_wait                for %t ... {
 *     ...loops...                          =>       turn_wait
 *     turn_pass {who=2}                             ...loops...
 *     epilogue                                      turn_pass {who=0}
 *   }                                               epilogue
 *                                                 }
 *                                                 turn_pass {who=2}; turn_wait
 *
 * Only when the tile body's first turn op is that opening pass and its last is the closing
 * pass with no Tensor Core work after it. */
static bool turns_across_tiles(struct ir_func *f, uint32_t region) {
  uint32_t tl = 0;
  const struct ir_block *rb = &f->blocks.v[region];
  for (uint32_t i = 0; i < rb->ops.n; i++)
    if (f->ops.v[rb->ops.v[i]].code == IR_FOR) tl = rb->ops.v[i];
  if (!tl) return false;
  const struct ir_block *bb = &f->blocks.v[f->ops.v[tl].region];
  uint32_t open = 0, close = 0, at = 0;
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[bb->ops.v[i]];
    if (op->code != IR_TURN_PASS && op->code != IR_TURN_WAIT) continue;
    if (!open) open = bb->ops.v[i];
    close = bb->ops.v[i], at = i;
  }
  if (!open || f->ops.v[open].code != IR_TURN_PASS || f->ops.v[open].i[2] != 1 || close == open ||
      f->ops.v[close].code != IR_TURN_PASS || f->ops.v[close].i[2] != 2)
    return false;
  for (uint32_t i = at + 1; i < bb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[bb->ops.v[i]];
    if (op->nregions || op->code == IR_WGMMA || op->code == IR_WGMMA_WAIT) return false;
  }
  int64_t id = f->ops.v[open].i[0], groups = f->ops.v[open].i[1];
  struct ir_builder b;
  ir_builder_before(&b, f, tl);
  ir_op_move(&b, open);
  f->ops.v[close].i[2] = 0;
  ir_builder_before(&b, f, ir_op_next(f, tl));
  uint32_t p = ir_build(&b, IR_TURN_PASS, NULL, 0, NULL, 0), w = ir_build(&b, IR_TURN_WAIT, NULL, 0, NULL, 0);
  f->ops.v[p].i[0] = f->ops.v[w].i[0] = id;
  f->ops.v[p].i[1] = f->ops.v[w].i[1] = groups;
  f->ops.v[p].i[2] = 2;
  return true;
}

void pass_pingpong(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  int groups = f->warps / 4;
  int mode = tl_sched_get(f->sched.pingpong, 2); /* 0 off, 1 always, 2 (default) where E reduces */
  if (!ir_func_wgmma(f) || !mode || groups < 2 || TURN_BARRIER + groups - 1 > 15) return;
  uint32_t consumer = 0;
  const struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  for (uint32_t i = 0; i < body->ops.n; i++)
    if (f->ops.v[body->ops.v[i]].code == IR_WARP_SPECIALIZE) consumer = f->ops.v[body->ops.v[i]].region + 1;
  if (!consumer) return;
  uint32_t loops[64], n = 0;
  ir_block_collect(f, consumer, IR_FOR, loops, &n, 64);
  for (uint32_t j = 0; j < n; j++)
    if (add_turns(f, loops[j], groups, tl_sched_get(f->sched.handoff, 1), mode == 1)) pc->changed = true;
  if (f->persistent && tl_sched_get(f->sched.tileturns, 0) && turns_across_tiles(f, consumer)) pc->changed = true;
}
