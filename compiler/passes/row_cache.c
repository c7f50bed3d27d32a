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

enum { MAX_CACHED = ROW_CACHE_MAX_LOADS, EQUIV_DEPTH = 8 };

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
 * otherwise. */
static void read_back(struct ir_func *f, uint32_t l2, uint32_t ld2, ir_val buf, int64_t T) {
  ir_val in2;
  ir_val slot = slot_of(f, l2, f->blocks.v[f->ops.v[l2].region].args, 0, ld2, T, &in2);
  struct ir_builder b, tb;
  ir_builder_before(&b, f, ld2);
  b.loc = f->ops.v[ld2].loc;
  ir_type_id rt = f->values.v[f->ops.v[ld2].res].type;
  uint32_t sel = ir_build_if(&b, in2, &rt, 1);
  ir_builder_at_end(&tb, f, ir_region(f, sel, 0));
  ir_val la[2] = {buf, slot};
  ir_val v = ir_build1(&tb, IR_LOCAL_LOAD, rt, la, 2);
  ir_build(&tb, IR_YIELD, &v, 1, NULL, 0);
  ir_builder_at_end(&tb, f, ir_region(f, sel, 1));
  ir_replace_uses(f, f->ops.v[ld2].res, f->ops.v[sel].res);
  ir_op_move(&tb, ld2);
  ir_val lv = f->ops.v[ld2].res;
  ir_build(&tb, IR_YIELD, &lv, 1, NULL, 0);
}

/* Clones into the builder's block the ops of loop `loop`'s body that load `ld` depends on
 * (its index arithmetic), and ld itself, with the loop variable replaced by iv. */
static ir_val clone_load(struct pass_ctx *pc, struct ir_builder *b, uint32_t loop, uint32_t ld, ir_val iv) {
  struct ir_func *f = pc->f;
  uint32_t body = f->ops.v[loop].region;
  uint8_t *need = ARENA_NEWN(pc->scratch, uint8_t, f->ops.n + 1);
  need[ld] = 1;
  const struct ir_block *bb = &f->blocks.v[body];
  for (uint32_t i = bb->ops.n; i-- > 0;) { /* operands come before their users */
    uint32_t id = bb->ops.v[i];
    if (!need[id]) continue;
    const struct ir_op *op = &f->ops.v[id];
    for (uint32_t k = 0; k < op->nargs; k++) {
      uint32_t d = ir_def_op(f, op->args[k]);
      if (d && f->ops.v[d].block == body) need[d] = 1;
    }
  }
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  ir_map_set(&m, f->blocks.v[body].args, iv);
  uint32_t n = f->blocks.v[body].ops.n;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    if (need[id]) ir_clone_op(b, id, &m);
  }
  return ir_mapped(&m, f->ops.v[ld].res);
}

enum { FILL_BYTES = 32768, MAX_UNROLL = 16, MAX_HELD = 128 };

int64_t row_cache_chunk_bytes(const struct ir_func *f, const uint32_t *loads, uint32_t n) {
  int64_t chunk = 0;
  for (uint32_t j = 0; j < n; j++) {
    const struct ir_type *t = ir_vtype(f, f->ops.v[loads[j]].res);
    chunk += ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype);
  }
  return chunk;
}

bool row_cache_fits(const struct tl_target *t, int64_t bytes) {
  /* a share of the target's shared memory, so that ROW_CACHE_PROGRAMS programs still fit
   * on a multiprocessor (with the scratch of reductions beside them) */
  return t && bytes <= (int64_t)t->smem_optin / ROW_CACHE_PROGRAMS - 8192;
}

bool row_cache_crowds(const struct tl_target *t, int64_t bytes) {
  return t && row_cache_fits(t, bytes) && bytes * (ROW_CACHE_PROGRAMS + 1) > (int64_t)t->smem_optin;
}

bool row_cache_applies(const struct ir_func *f) {
  /* on by default (PERF.md 113: with the loads joined as words, softmax 4096 x 50257 f16
   * 68 -> 85% of the copy on an H100, rmsnorm 66 -> 77%, 8192 x 16385 77 -> 90% and 87%) */
  return f->cache_trips > 0 && f->target && tl_sched_get(f->sched.rowcache, 1);
}

void pass_row_cache(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  int64_t T = f->cache_trips, held = 0;
  if (!row_cache_applies(f)) return;
  uint32_t loads[MAX_CACHED], n;
  uint32_t first = ir_row_cache_find(f, loads, &n);
  if (!first) return;
  int64_t chunk = row_cache_chunk_bytes(f, loads, n), sv;
  /* the schedule's slots (rowslots=K; a loop counting up by a constant): the fill still
   * walks the whole row, U chunks in flight, and stores the first K; its loads of the
   * others bring them into L2, where the later loops read them one at a time (from DRAM
   * each would be waited for in turn) */
  ir_val step0 = f->ops.v[first].args[2];
  if (f->sched.rowslots > 0 && f->sched.rowslots < T && ir_value_const_int(f, step0, &sv) && sv > 0) T = f->sched.rowslots;
  if (!row_cache_fits(f->target, T * chunk)) return;
  for (uint32_t j = 0; j < n; j++) held += ir_type_numel(ir_vtype(f, f->ops.v[loads[j]].res)) / (32 * f->warps) + 1;
  /* the fill: U chunks loaded per iteration before any is stored, so that about FILL_BYTES
   * of the row are in flight per program (two programs per multiprocessor: enough to keep
   * DRAM busy), at most MAX_HELD registers of each thread holding them */
  int64_t U = FILL_BYTES / chunk;
  if (U > MAX_UNROLL) U = MAX_UNROLL;
  if (U > T) U = T;
  while (U > 1 && U * held > MAX_HELD) U--;
  if (U < 1) U = 1;
  if (f->sched.rowfill > 0) U = f->sched.rowfill < T ? f->sched.rowfill : T; /* the schedule's */
  uint32_t blk = f->ops.v[first].block;
  struct ir_builder b;
  ir_builder_before(&b, f, first);
  b.loc = f->ops.v[first].loc;
  ir_val bufs[MAX_CACHED];
  for (uint32_t j = 0; j < n; j++) {
    const struct ir_type *t = ir_vtype(f, f->ops.v[loads[j]].res);
    /* T slots of the chunk as one row, unswizzled: each thread reads back its own elements */
    struct ir_layout sl = {0};
    sl.kind = IR_LAYOUT_SHARED;
    sl.rank = 2;
    sl.vec = 1;
    sl.per_phase = sl.max_phase = 1;
    sl.order[0] = 1;
    struct ir_type bt = *t;
    bt.rank = 3;
    bt.dims[0] = (int32_t)T;
    bt.dims[1] = t->rank == 2 ? t->dims[0] : 1;
    bt.dims[2] = t->dims[t->rank - 1];
    bt.layout = ir_layout_intern(f, &sl);
    bufs[j] = ir_build1(&b, IR_LOCAL_ALLOC, ir_type_intern(f, &bt), NULL, 0);
  }
  /* for %c = lb to ub step U * step { the U chunks' loads; then their stores } */
  const struct ir_op *l1 = &f->ops.v[first];
  ir_val lb = l1->args[0], ub = l1->args[1], step = l1->args[2];
  /* in a loop (rows per program), threads still reading the previous row come first */
  if (f->blocks.v[blk].parent) ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val ustep = ir_binary(&b, IR_MUL, step, ir_const_int(&b, f->values.v[step].type, U));
  uint32_t fill = ir_build_for(&b, lb, ub, ustep, NULL, 0);
  f->ops.v[fill].i[0] = 1; /* stages=1: its U loads are already in flight together (no prefetch) */
  uint32_t fb = f->ops.v[fill].region;
  struct ir_builder lb_;
  ir_builder_at_end(&lb_, f, fb);
  lb_.loc = b.loc;
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
  /* the stores of one thread are read by others where layouts differ */
  ir_builder_before(&b, f, first);
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  /* every loop over the range, the first included, reads the chunks back */
  for (uint32_t j = 0; j < n; j++) {
    uint32_t ld = loads[j];
    for (uint32_t k = ir_op_index(f, first); k < f->blocks.v[blk].ops.n; k++) {
      uint32_t l2 = f->blocks.v[blk].ops.v[k];
      if (f->ops.v[l2].code != IR_FOR || !same_range(f, first, l2)) continue;
      uint32_t ld2 = l2 == first ? ld : same_load(f, first, ld, l2);
      if (ld2) read_back(f, l2, ld2, bufs[j], T);
    }
  }
  pc->changed = true;
}
