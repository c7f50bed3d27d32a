/* bulk_writer.c - the producer warp issues the consumers' TMA reduce-adds (FlashAttention-3's
 * dQ writer), so the consumer warpgroups neither meet to hand a staged tile to one thread
 * nor wait in that thread for TMA to read it.
 *
 * Needs: the warp-specialized form (warp_specialize), before persistent. A consumer ring
 * loop with, at its top level, bulk-reduce's staging of a tile added into a tensor:
 *
 *   bulk_wait %buf {pending=0}          (anywhere before the store; another after the loop)
 *   local_store %buf, 0, %v
 *   barrier                             (the consumers' own)
 *   tma_reduce %buf, 0, %d, %i...       (indices from the loop's variable and values
 *                                        computed outside the roles)
 *
 * and the producer's loop over the same iterations (warp_specialize's), each with its ring
 * position (stage s, phase p) carried. The schedule asks for it (writer=1; off by default:
 * measured 4% slower on an H100, PERF.md 118).
 *
 * Guarantees: %buf gets one slot per ring stage and two barrier arrays, `full` (one arrival
 * per consumer thread) and `empty` (one), indexed by the ring's stage and waited for with
 * its phase, so that the tile loop of persistent carries nothing new. The consumers, at
 * iteration i with position (s, p):
 *
 *   mbar_wait %empty, %s, %p ^ 1        the producer's reduce of slot s (iteration i - S) has
 *   local_store %buf, %s, %v            read it (codegen fences the store for the async proxy)
 *   mbar_arrive %full, %s {per=1}       every thread: each arrival releases its own stores
 *
 * and the producer, in its iteration i after the fills (so the wait for the consumers'
 * tile never holds up a fill), the reduce of iteration i - 1, and after the loop that of
 * the last one:
 *
 *   if %k != %lb {                      (after the loop: if %lb < %ub, at the last iteration)
 *     mbar_wait %full, %s', %p'         (s', p') = the ring position before (s, p)
 *     tma_reduce %buf, %s', %d, %i'...  the indices cloned at %k - step
 *     bulk_wait %buf {pending=0}
 *     mbar_arrive %empty, %s' {per=32}  (the producer warp's lane 0)
 *   }
 *
 * The consumers' bulk_waits go (the producer's thread alone issues and waits). The barrier
 * that ordered the store before the issue goes too; barrier-elide, later, keeps whatever
 * barrier the loop's other buffers still need. */
#include <string.h>

#include "passes.h"

enum { MAX_CLONE = 64 };

struct writer {
  uint32_t ws, prod, cons;   /* the warp_specialize op and its two regions */
  uint32_t loop, ploop;      /* the consumer's ring loop and the producer's */
  uint32_t store, bar, red;  /* the staging store, the barrier after it, the reduce */
  ir_val buf, cs, cp;        /* the buffer; the consumer loop's carried stage and phase */
  int64_t stages;
};

/* The ws op at the top level of the body (0: none). */
static uint32_t find_ws(const struct ir_func *f) {
  const struct ir_block *b = &f->blocks.v[IR_BODY_BLOCK];
  for (uint32_t i = 0; i < b->ops.n; i++)
    if (f->ops.v[b->ops.v[i]].code == IR_WARP_SPECIALIZE) return b->ops.v[i];
  return 0;
}

/* Whether v is computed outside the roles of ws (a parameter or a top-level value). */
static bool outside(const struct ir_func *f, const struct writer *w, ir_val v) {
  return !ir_defined_within(f, v, w->prod) && !ir_defined_within(f, v, w->cons);
}

/* Whether v can be recomputed in the producer: the loop's variable, a value from outside
 * the roles, or a pure scalar op of the consumer loop's body over such values. */
static bool clonable(const struct ir_func *f, const struct writer *w, ir_val v, int depth) {
  uint32_t body = f->ops.v[w->loop].region;
  if (v == f->blocks.v[body].args || outside(f, w, v)) return true;
  uint32_t d = ir_def_op(f, v);
  if (!d || depth > 16 || f->ops.v[d].block != body) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (!(ir_ops[op->code].flags & OPF_PURE) || op->nregions || op->nres != 1 || !ir_type_is_scalar(ir_vtype(f, v)))
    return false;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!clonable(f, w, op->args[k], depth + 1)) return false;
  return true;
}

/* Recomputes v at b with the loop's variable mapped (m), cloning what it needs in order. */
static ir_val clone_scalar(struct ir_builder *b, const struct writer *w, struct ir_valmap *m, ir_val v) {
  struct ir_func *f = b->f;
  if (ir_mapped(m, v) != v || outside(f, w, v)) return ir_mapped(m, v);
  uint32_t d = ir_def_op(f, v);
  const struct ir_op *op = &f->ops.v[d];
  for (uint32_t k = 0; k < op->nargs; k++) clone_scalar(b, w, m, op->args[k]);
  ir_clone_op(b, d, m);
  return ir_mapped(m, v);
}

/* Recognizes the consumer's staging and the producer's loop. */
static bool find(const struct ir_func *f, struct writer *w) {
  memset(w, 0, sizeof *w);
  w->ws = find_ws(f);
  if (!w->ws) return false;
  w->prod = f->ops.v[w->ws].region, w->cons = w->prod + 1;
  const struct ir_block *cb = &f->blocks.v[w->cons];
  for (uint32_t i = 0; i < cb->ops.n && !w->red; i++) {
    const struct ir_op *lp = &f->ops.v[cb->ops.v[i]];
    if (lp->code != IR_FOR) continue;
    const struct ir_block *lb = &f->blocks.v[lp->region];
    for (uint32_t j = 2; j < lb->ops.n; j++) {
      const struct ir_op *r = &f->ops.v[lb->ops.v[j]];
      if (r->code != IR_TMA_REDUCE) continue;
      if (w->red) return false; /* one reduce per loop */
      w->loop = cb->ops.v[i];
      w->red = lb->ops.v[j], w->bar = lb->ops.v[j - 1], w->store = lb->ops.v[j - 2];
    }
  }
  if (!w->red) return false;
  const struct ir_op *red = &f->ops.v[w->red], *st = &f->ops.v[w->store], *lp = &f->ops.v[w->loop];
  int64_t c;
  w->buf = red->args[0];
  if (f->ops.v[w->bar].code != IR_BARRIER || st->code != IR_LOCAL_STORE || st->args[0] != w->buf ||
      !ir_value_const_int(f, red->args[1], &c) || c != 0 || !outside(f, w, w->buf) || !outside(f, w, red->args[2]) ||
      ir_vtype(f, w->buf)->rank != 2) /* (one slot: bulk-reduce's) */
    return false;
  for (uint32_t k = 3; k < red->nargs; k++)
    if (!clonable(f, w, red->args[k], 0)) return false;
  /* the loop's ring position: the carried stage and phase its first top-level wait reads */
  const struct ir_block *lb = &f->blocks.v[lp->region];
  ir_val base = lb->args + 1;
  for (uint32_t j = 0; j < lb->ops.n && !w->cs; j++) {
    const struct ir_op *wt = &f->ops.v[lb->ops.v[j]];
    if (wt->code != IR_MBAR_WAIT) continue;
    if (wt->args[1] < base || wt->args[1] >= base + lp->nres || wt->args[2] < base || wt->args[2] >= base + lp->nres)
      return false;
    w->cs = wt->args[1], w->cp = wt->args[2];
  }
  w->stages = lp->i[0];
  if (!w->cs || w->stages < 1 || w->stages > 8) return false;
  /* every other use of the buffer in the roles: bulk_waits, in the loop's body or after it */
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->nregions || id == w->red || id == w->store || !ir_op_uses(f, id, w->buf)) continue;
    if (op->code != IR_BULK_WAIT || op->nargs != 1 || (op->block != lp->region && op->block != w->cons)) return false;
  }
  /* the producer's loop over the same iterations, carrying (stage, phase) */
  const struct ir_block *pb = &f->blocks.v[w->prod];
  for (uint32_t i = 0; i < pb->ops.n; i++) {
    const struct ir_op *pl = &f->ops.v[pb->ops.v[i]];
    if (pl->code == IR_FOR && pl->nres == 2 && pl->args[0] == lp->args[0] && pl->args[1] == lp->args[1] &&
        pl->args[2] == lp->args[2]) {
      if (w->ploop) return false;
      w->ploop = pb->ops.v[i];
    }
  }
  return w->ploop && ir_value_const_int(f, lp->args[2], &c) && c > 0;
}

/* The ring position before (s, p) in a ring of S stages: (s - 1, p), or (S - 1, p ^ 1) at 0. */
static void previous(struct ir_builder *b, int64_t S, ir_val s, ir_val p, ir_val *ps, ir_val *pp) {
  ir_type_id i32 = ir_type_scalar(b->f, DT_I32);
  ir_val zero = ir_const_int(b, i32, 0), one = ir_const_int(b, i32, 1);
  ir_val wrap = ir_binary(b, IR_EQ, s, zero);
  ir_val sa[3] = {wrap, ir_const_int(b, i32, S - 1), ir_binary(b, IR_SUB, s, one)};
  *ps = ir_build1(b, IR_SELECT, i32, sa, 3);
  ir_val pa[3] = {wrap, ir_binary(b, IR_XOR, p, one), p};
  *pp = ir_build1(b, IR_SELECT, i32, pa, 3);
}

/* `if %cond { wait for the consumers' tile of iteration %k at position (s, p) before... }`:
 * the reduce of that iteration, its read awaited, the slot released. */
static void build_reduce(struct ir_func *f, const struct writer *w, struct ir_builder *b, ir_val cond, ir_val k,
                         ir_val s, ir_val p, ir_val full, ir_val empty, struct arena *a) {
  uint32_t iff = ir_build_if(b, cond, NULL, 0);
  struct ir_builder tb, eb;
  ir_builder_at_end(&tb, f, f->ops.v[iff].region);
  ir_builder_at_end(&eb, f, f->ops.v[iff].region + 1);
  tb.loc = eb.loc = f->ops.v[w->red].loc;
  ir_val ps, pp;
  previous(&tb, w->stages, s, p, &ps, &pp);
  ir_val wa[3] = {full, ps, pp};
  ir_build(&tb, IR_MBAR_WAIT, wa, 3, NULL, 0);
  struct ir_valmap m;
  ir_valmap_init(&m, f, a);
  ir_map_set(&m, f->blocks.v[f->ops.v[w->loop].region].args, k);
  const struct ir_op *red = &f->ops.v[w->red];
  uint32_t n = red->nargs;
  ir_val *args = ARENA_NEWN(a, ir_val, n + 1);
  memcpy(args, red->args, sizeof *args * n);
  args[1] = ps;
  for (uint32_t i = 3; i < n; i++) args[i] = clone_scalar(&tb, w, &m, args[i]);
  uint32_t r = ir_build(&tb, IR_TMA_REDUCE, args, n, NULL, 0);
  f->ops.v[r].i[0] = f->ops.v[w->red].i[0];
  uint32_t bw = ir_build(&tb, IR_BULK_WAIT, &w->buf, 1, NULL, 0);
  f->ops.v[bw].i[0] = 0;
  ir_val ra[2] = {empty, ps};
  uint32_t ar = ir_build(&tb, IR_MBAR_ARRIVE, ra, 2, NULL, 0);
  f->ops.v[ar].i[0] = 32;
  ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
  ir_build(&eb, IR_YIELD, NULL, 0, NULL, 0);
}

static void rewrite(struct pass_ctx *pc, struct writer *w) {
  struct ir_func *f = pc->f;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  /* one slot per stage */
  struct ir_type bt = *ir_vtype(f, w->buf);
  memmove(bt.dims + 1, bt.dims, sizeof bt.dims[0] * (size_t)bt.rank);
  bt.dims[0] = (int32_t)w->stages;
  bt.rank++;
  f->values.v[w->buf].type = ir_type_intern(f, &bt);
  /* the barriers, published to both roles before they split */
  struct ir_builder hb;
  ir_builder_before(&hb, f, w->ws);
  hb.loc = f->ops.v[w->red].loc;
  int32_t S = (int32_t)w->stages;
  ir_type_id bars = ir_type_tile(f, DT_I64, 1, &S);
  ir_val full = ir_build1(&hb, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, full)].i[0] = 32 * f->warps;
  ir_val empty = ir_build1(&hb, IR_MBAR_ALLOC, bars, NULL, 0);
  f->ops.v[ir_def_op(f, empty)].i[0] = 1;
  ir_build(&hb, IR_BARRIER, NULL, 0, NULL, 0);
  /* the consumers: wait for the slot, store into it, arrive */
  struct ir_builder b;
  ir_builder_before(&b, f, w->store);
  b.loc = f->ops.v[w->store].loc;
  ir_val wa[3] = {empty, w->cs, ir_binary(&b, IR_XOR, w->cp, ir_const_int(&b, i32, 1))};
  ir_build(&b, IR_MBAR_WAIT, wa, 3, NULL, 0);
  ir_op_set_arg(f, w->store, 1, w->cs);
  ir_builder_before(&b, f, w->red);
  ir_val aa[2] = {full, w->cs};
  uint32_t ar = ir_build(&b, IR_MBAR_ARRIVE, aa, 2, NULL, 0);
  f->ops.v[ar].i[0] = 1; /* (each thread's stores: local_store fences them for the async proxy) */
  uint32_t lbody = f->ops.v[w->loop].region;
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (op->block && op->code == IR_BULK_WAIT && op->args[0] == w->buf && (op->block == lbody || op->block == w->cons))
      ir_op_erase(f, id);
  }
  ir_op_erase(f, w->bar);
  /* the producer: iteration k reduces k - step; after the loop, the last iteration */
  const struct ir_op *pl = &f->ops.v[w->ploop];
  uint32_t pbody = pl->region;
  ir_val k = f->blocks.v[pbody].args, ps = k + 1, pp = k + 2;
  ir_val lb = pl->args[0], ub = pl->args[1], step = pl->args[2];
  const struct ir_block *pbb = &f->blocks.v[pbody];
  struct ir_builder pb;
  ir_builder_before(&pb, f, pbb->ops.v[pbb->ops.n - 1]); /* before the yield */
  pb.loc = f->ops.v[w->red].loc;
  build_reduce(f, w, &pb, ir_binary(&pb, IR_NE, k, lb), ir_binary(&pb, IR_SUB, k, step), ps, pp, full, empty,
               pc->scratch);
  struct ir_builder ab;
  ir_builder_after(&ab, f, w->ploop);
  ab.loc = f->ops.v[w->red].loc;
  pl = &f->ops.v[w->ploop];
  ir_val one = ir_const_int(&ab, i32, 1);
  /* the last iteration's variable: lb + ((ub - lb - 1) / step) * step */
  ir_val nth = ir_binary(&ab, IR_DIV, ir_binary(&ab, IR_SUB, ir_binary(&ab, IR_SUB, ub, lb), one), step);
  ir_val last = ir_binary(&ab, IR_ADD, lb, ir_binary(&ab, IR_MUL, nth, step));
  build_reduce(f, w, &ab, ir_binary(&ab, IR_LT, lb, ub), last, pl->res, pl->res + 1, full, empty, pc->scratch);
  ir_op_erase(f, w->red);
}

void pass_bulk_writer(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_sched_get(f->sched.writer, 0) || !tl_has(f->target, TL_FEAT_TMA | TL_FEAT_BULK_GROUP)) return;
  struct writer w;
  if (!find(f, &w)) return;
  rewrite(pc, &w);
  pc->changed = true;
}
