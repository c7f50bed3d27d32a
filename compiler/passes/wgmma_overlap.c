/* wgmma_overlap.c - in a loop with a chain of two products (attention: the scores
 * S = Q K^T, then O = P V + O * alpha with P computed from S), the elementwise work of one
 * iteration overlaps the second product of the previous one on the Tensor Cores
 * (FlashAttention-3's intra-warpgroup pipelining).
 *
 * Needs: a loop whose body has no fills (the consumer role after warp specialization): it
 * waits for its stage, issues two synchronous wgmma at its top level, W1 then W2, and
 * releases its stage (mbar_arrive) after W2. W2's result is carried by the loop (the
 * accumulator X) and read by nothing else; W2's operands are not X itself; X is read only
 * after W1. Guarantees: the loop is rotated so that W2 of iteration j-1 runs while
 * iteration j's elementwise ops do:
 *
 *   for j ... iter(X = x0, ...) {             if lb < ub {
 *     mbar_wait full[s]                          <iteration lb without W2 and the release>
 *     S = W1(..)                                 for j = lb+step ... iter(..., P', acc', s' = <its operands>) {
 *     P, acc = f(S, X, ...)            =>          mbar_wait full[s]
 *     X' = W2(P, V[s], acc)                        S = W1(..) {async=1}
 *     mbar_arrive empty[s]                         X = W2(P', V[s'], acc') {async=1}
 *     yield X', ...                                S = wgmma_wait S {pending=1}
 *   }                                              ... f's ops up to the first reader of X ...
 *                                                  X = wgmma_wait X {pending=0}; mbar_arrive empty[s']
 *                                                  ... the rest of f; yield ..., P, acc, s }
 *                                                X' = W2(P', V[s'], acc'); mbar_arrive empty[s']
 *                                              } else { the initial values }
 *
 * W1 of iteration j is issued before W2 of iteration j-1 so that waiting for it (pending=1)
 * leaves W2 in flight. W2's operands that the body computes (P, the rescaled accumulator,
 * the stage) are carried one iteration; the stage of iteration j-1 is released once its W2
 * is complete. */
#include <string.h>

#include "passes.h"

enum { MAX_CARRY = 16 };

static int index_of(const ir_val *v, uint32_t n, ir_val x) {
  for (uint32_t i = 0; i < n; i++)
    if (v[i] == x) return (int)i;
  return -1;
}

/* op's operands, each carried one (carry[e]) replaced by to[e]. */
static void remap_args(const struct ir_op *op, const ir_val *carry, uint32_t ne, const ir_val *to, ir_val *out) {
  for (uint32_t k = 0; k < op->nargs; k++) {
    int e = index_of(carry, ne, op->args[k]);
    out[k] = e >= 0 ? to[e] : op->args[k];
  }
}

/* The rotated loop's state after an iteration, through map m: the original loop's carried
 * values but the accumulator (index c2), then the carried operands of W2 and the release. */
static uint32_t next_state(const struct ir_func *f, uint32_t yid, int c2, const ir_val *carry, uint32_t ne,
                           const struct ir_valmap *m, ir_val *out) {
  const struct ir_op *y = &f->ops.v[yid];
  uint32_t n = 0;
  for (uint32_t k = 0; k < y->nargs; k++)
    if ((int)k != c2) out[n++] = ir_mapped(m, y->args[k]);
  for (uint32_t e = 0; e < ne; e++) out[n++] = ir_mapped(m, carry[e]);
  return n;
}

static bool rotate(struct pass_ctx *pc, uint32_t loop) {
  struct ir_func *f = pc->f;
  const struct ir_op *lp = &f->ops.v[loop];
  uint32_t body = lp->region, nc = lp->nres;
  /* a loop that still fills its own stages (a copy into shared memory) is not rotated */
  static const uint16_t fills[3] = {IR_TMA_LOAD, IR_ASYNC_COPY, IR_LOCAL_STORE};
  if (nc + MAX_CARRY > 64 || ir_block_has_op(f, body, fills, 3)) return false;
  const struct ir_block *bb = &f->blocks.v[body];
  uint32_t w1 = 0, w2 = 0, rel = 0, yid = VEC_LAST(bb->ops);
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    uint32_t id = bb->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_WGMMA) {
      if (op->i[1] || w2) return false;
      if (w1) w2 = id;
      else w1 = id;
    } else if (op->code == IR_MBAR_ARRIVE && w2) {
      if (rel) return false;
      rel = id;
    } else if ((op->code == IR_MBAR_ARRIVE && !w1) || op->code == IR_WGMMA_WAIT) {
      return false; /* (an arrive after W1, such as attention's Q release, moves with W1) */
    }
  }
  if (!w2 || !rel || f->ops.v[yid].code != IR_YIELD) return false;
  /* W2's result: carried at index c2, read by nothing else */
  ir_val r2 = f->ops.v[w2].res;
  int c2 = -1;
  const struct ir_op *y = &f->ops.v[yid];
  for (uint32_t k = 0; k < y->nargs; k++)
    if (y->args[k] == r2) {
      if (c2 >= 0) return false;
      c2 = (int)k;
    }
  if (c2 < 0) return false;
  ir_val X = bb->args + 1 + (uint32_t)c2;
  bool after_w1 = false;
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    uint32_t id = bb->ops.v[i];
    if (id != yid && ir_op_uses(f, id, r2)) return false;
    if (ir_op_uses(f, id, X) && (!after_w1 || id == w2)) return false;
    if (id == w1) after_w1 = true;
  }
  /* the values of iteration j that W2 and the release need in iteration j+1 */
  ir_val carry[MAX_CARRY];
  uint32_t ne = 0;
  const uint32_t users[2] = {w2, rel};
  for (int u = 0; u < 2; u++) {
    const struct ir_op *op = &f->ops.v[users[u]];
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val a = op->args[k];
      if (!ir_defined_within(f, a, body) || index_of(carry, ne, a) >= 0) continue;
      if (ne == MAX_CARRY) return false;
      carry[ne++] = a;
    }
  }

  if (f->ops.v[rel].nargs > 8) return false;

  /* if lb < ub { prologue; loop; last W2 } else { inits } */
  ir_val lb = lp->args[0], ub = lp->args[1], step = lp->args[2];
  ir_type_id types[64];
  for (uint32_t k = 0; k < nc; k++) types[k] = f->values.v[lp->res + k].type;
  struct ir_builder b;
  ir_builder_before(&b, f, loop);
  b.loc = lp->loc;
  ir_val cond = ir_binary(&b, IR_LT, lb, ub);
  uint32_t iff = ir_build_if(&b, cond, types, nc);
  f->ops.v[iff].loc = f->ops.v[loop].loc;
  uint32_t then = f->ops.v[iff].region, els = then + 1;
  struct ir_builder eb;
  ir_builder_at_end(&eb, f, els);
  ir_build(&eb, IR_YIELD, f->ops.v[loop].args + 3, nc, NULL, 0);

  /* the copy of the op list: building changes f->ops and the block */
  bb = &f->blocks.v[body];
  uint32_t nops = bb->ops.n;
  uint32_t *ops = ARENA_NEWN(pc->scratch, uint32_t, nops + 1);
  memcpy(ops, bb->ops.v, sizeof(uint32_t) * nops);

  /* prologue: iteration lb without W2 and the release */
  struct ir_builder tb;
  ir_builder_at_end(&tb, f, then);
  tb.loc = b.loc;
  struct ir_valmap m0;
  ir_valmap_init(&m0, f, pc->scratch);
  ir_map_set(&m0, f->blocks.v[body].args, lb);
  for (uint32_t k = 0; k < nc; k++) ir_map_set(&m0, f->blocks.v[body].args + 1 + k, f->ops.v[loop].args[3 + k]);
  for (uint32_t i = 0; i < nops; i++)
    if (ops[i] != w2 && ops[i] != rel && ops[i] != yid) ir_clone_op(&tb, ops[i], &m0);

  /* the rotated loop: carried values but X, then the carry */
  ir_val inits[64];
  uint32_t ni = next_state(f, yid, c2, carry, ne, &m0, inits);
  ir_val lb1 = ir_binary(&tb, IR_ADD, lb, step);
  uint32_t nl = ir_build_for(&tb, lb1, ub, step, inits, ni);
  f->ops.v[nl].loc = f->ops.v[loop].loc;
  f->ops.v[nl].i[0] = f->ops.v[loop].i[0];
  f->ops.v[nl].i[1] = f->ops.v[loop].i[1];
  uint32_t nb = f->ops.v[nl].region;
  ir_val nargs0 = f->blocks.v[nb].args;
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  ir_map_set(&m, f->blocks.v[body].args, nargs0);
  for (uint32_t k = 0, j = 0; k < nc; k++)
    if ((int)k != c2) ir_map_set(&m, f->blocks.v[body].args + 1 + k, nargs0 + 1 + j++);
  ir_val prev[MAX_CARRY];
  for (uint32_t e = 0; e < ne; e++) prev[e] = nargs0 + 1 + (nc - 1) + e;
  struct ir_builder lbld;
  ir_builder_at_end(&lbld, f, nb);
  lbld.loc = b.loc;
  ir_val w2args[5], relargs[8];
  uint32_t nrel = f->ops.v[rel].nargs;
  remap_args(&f->ops.v[w2], carry, ne, prev, w2args);
  remap_args(&f->ops.v[rel], carry, ne, prev, relargs);
  ir_type_id xt = f->values.v[r2].type;
  int64_t trans2 = f->ops.v[w2].i[0], per = f->ops.v[rel].i[0];
  ir_val x = 0; /* W2 of the previous iteration, in flight until its wait */
  for (uint32_t i = 0; i <= nops; i++) {
    uint32_t id = i < nops ? ops[i] : 0;
    if (id == w2 || id == rel || id == yid) continue;
    /* before X's first reader (or at the end): wait for W2, release its stage */
    if (x && (!id || ir_op_uses(f, id, X))) {
      uint32_t xw0 = ir_build(&lbld, IR_WGMMA_WAIT, &x, 1, &xt, 1);
      f->ops.v[xw0].i[0] = 0;
      ir_map_set(&m, X, f->ops.v[xw0].res);
      uint32_t ra = ir_build(&lbld, IR_MBAR_ARRIVE, relargs, nrel, NULL, 0);
      f->ops.v[ra].i[0] = per;
      x = 0;
    }
    if (!id) break;
    uint32_t c = ir_clone_op(&lbld, id, &m);
    if (id == w1) { /* W1 async, then W2 of the previous iteration, then wait for W1 */
      f->ops.v[c].i[1] = 1;
      x = ir_build1(&lbld, IR_WGMMA, xt, w2args, 5);
      uint32_t xw = ir_def_op(f, x);
      f->ops.v[xw].i[0] = trans2;
      f->ops.v[xw].i[1] = 1;
      ir_val sres = f->ops.v[c].res;
      ir_type_id st = f->values.v[sres].type;
      uint32_t sw = ir_build(&lbld, IR_WGMMA_WAIT, &sres, 1, &st, 1);
      f->ops.v[sw].i[0] = 1;
      ir_map_set(&m, f->ops.v[w1].res, f->ops.v[sw].res);
    }
  }
  /* the new body's yield */
  ir_val ya[64];
  uint32_t ny = next_state(f, yid, c2, carry, ne, &m, ya);
  ir_build(&lbld, IR_YIELD, ya, ny, NULL, 0);

  /* after the rotated loop: the last W2 and release */
  ir_val last[MAX_CARRY];
  for (uint32_t e = 0; e < ne; e++) last[e] = f->ops.v[nl].res + (nc - 1) + e;
  remap_args(&f->ops.v[w2], carry, ne, last, w2args);
  remap_args(&f->ops.v[rel], carry, ne, last, relargs);
  ir_val xl = ir_build1(&tb, IR_WGMMA, xt, w2args, 5);
  f->ops.v[ir_def_op(f, xl)].i[0] = trans2;
  uint32_t ra2 = ir_build(&tb, IR_MBAR_ARRIVE, relargs, nrel, NULL, 0);
  f->ops.v[ra2].i[0] = per;
  ir_val ty[64];
  for (uint32_t k = 0, j = 0; k < nc; k++) ty[k] = (int)k == c2 ? xl : f->ops.v[nl].res + j++;
  ir_build(&tb, IR_YIELD, ty, nc, NULL, 0);

  for (uint32_t k = 0; k < nc; k++) ir_replace_uses(f, f->ops.v[loop].res + k, f->ops.v[iff].res + k);
  ir_op_erase(f, loop);
  return true;
}

void pass_wgmma_overlap(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!ir_func_wgmma(f) || !tl_sched_get(f->sched.overlap, 0)) return;
  uint32_t loops[64], n = 0;
  ir_block_collect(f, IR_BODY_BLOCK, IR_FOR, loops, &n, 64);
  for (uint32_t i = 0; i < n; i++)
    if (rotate(pc, loops[i])) pc->changed = true;
}
