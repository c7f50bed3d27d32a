/* barrier_elide.c - barriers in a loop body that separate no conflicting accesses.
 *
 * Needs: GPU IR after the last pass that places barriers or async ops (pingpong), before
 * smem-alloc (which adds the barriers its reuse of memory needs). Guarantees: a barrier
 * at the top level of a loop body is removed only when, for every shared buffer and
 * tensor, the accesses between the previous barrier of the same threads and it (S1) and
 * those between it and the next one (S2) do not conflict (a write on either side, an access
 * on the other). Both neighbours are taken cyclically: the previous iteration's tail runs
 * before this iteration's head. An asynchronous access lasts from its issue to the op that
 * completes it (a wgmma to the wgmma_wait naming its result, a TMA reduce to the next
 * bulk_wait of its buffer, a local_load its dot performs to that dot), so it counts on
 * every side it overlaps; an access whose completion is not found lasts the whole body.
 *
 * The case it is for: smem-stage writes a register tile into a buffer between two
 * barriers; the first protects the previous iteration's readers, which a later barrier of
 * that iteration (the one before the fused backward's reduce-add) already separates:
 *
 *   for ... {                                     for ... {
 *     barrier {id=1}                                local_store %ds, %0, %x
 *     local_store %ds, %0, %x                       barrier {id=1}
 *     barrier {id=1}                          =>    %q = wgmma %ds, ...   (waited below)
 *     %q = wgmma %ds, ...                           ...
 *     %w = wgmma_wait %q                            barrier {id=1}
 *     barrier {id=1}                                tma_reduce ...
 *     tma_reduce ...                              }
 *   }
 *
 * Conservative elsewhere: S2 may write only buffers allocated inside the body, and read
 * others only if nothing outside the body writes them (in the first iteration the code
 * before the loop runs before the barrier), touch no tensor the kernel writes, and hold no
 * mbarrier arrival or warpgroup turn (a release that may count on the barrier). Schedule
 * `elide=0` keeps every barrier. */
#include "passes.h"
#include "smem.h"

#define MAX_ACC 256

struct access {
  ir_val obj;         /* the buffer (local_alloc result) or tensor parameter */
  bool write, global; /* a write; a tensor (not a shared buffer) */
  uint32_t from, to;  /* top-level positions in the body, cyclic (to < from: wraps) */
};

struct body {
  const struct ir_func *f;
  uint32_t blk, n; /* the loop body and its top-level op count */
  struct access acc[MAX_ACC];
  uint32_t nacc;
  bool overflow;
  const uint32_t *uses; /* ir_use_counts */
};

static bool is_buffer(const struct ir_func *f, ir_val v) {
  uint32_t d = ir_def_op(f, v);
  return d && f->ops.v[d].code == IR_LOCAL_ALLOC;
}

static bool is_tensor(const struct ir_func *f, ir_val v) {
  return f->values.v[v].kind == IR_VAL_PARAM && ir_vtype(f, v)->rank > 0;
}

/* The top-level position of op id in the body (its ancestor at the top level), or -1. */
static int top_pos(const struct body *B, uint32_t id) {
  const struct ir_func *f = B->f;
  while (id && f->ops.v[id].block != B->blk) {
    uint32_t parent = f->blocks.v[f->ops.v[id].block].parent;
    if (!parent) return -1;
    id = parent;
  }
  for (uint32_t i = 0; i < B->n; i++)
    if (f->blocks.v[B->blk].ops.v[i] == id) return (int)i;
  return -1;
}

static void add(struct body *B, ir_val obj, bool write, bool global, uint32_t from, uint32_t to) {
  if (B->nacc == MAX_ACC) {
    B->overflow = true;
    return;
  }
  B->acc[B->nacc++] = (struct access){obj, write, global, from, to};
}

/* Whether op's memory accesses outlast it: an async wgmma, a TMA copy or reduce, a cp.async. */
static bool is_async(const struct ir_op *op) {
  return (op->code == IR_WGMMA && op->i[1]) || op->code == IR_TMA_REDUCE || op->code == IR_TMA_LOAD ||
         op->code == IR_ASYNC_COPY;
}

/* Where the asynchronous access of op id (at top position p) ends: the position of the op
 * that completes it, searched cyclically after p; -1 when not found. */
static int completion(const struct body *B, uint32_t id, uint32_t p) {
  const struct ir_func *f = B->f;
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t k = 1; k <= B->n; k++) {
    uint32_t q = (p + k) % B->n;
    const struct ir_op *o = &f->ops.v[f->blocks.v[B->blk].ops.v[q]];
    if (op->code == IR_WGMMA && o->code == IR_WGMMA_WAIT) {
      for (uint32_t a = 0; a < o->nargs; a++)
        if (o->args[a] == op->res) return (int)q;
    }
    if (op->code == IR_TMA_REDUCE && o->code == IR_BULK_WAIT && o->args[0] == op->args[0] && o->i[0] == 0) return (int)q;
  }
  return -1;
}

/* The accesses of op id (nested ops included, at their top-level ancestor's position). */
static void collect_op(struct body *B, uint32_t id, uint32_t p) {
  const struct ir_func *f = B->f;
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *rb = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < rb->ops.n; i++) {
      /* an asynchronous op nested deeper: its completion is not tracked, so it lasts
       * the whole body */
      bool async = is_async(&f->ops.v[rb->ops.v[i]]);
      uint32_t before = B->nacc;
      collect_op(B, rb->ops.v[i], p);
      if (async)
        for (uint32_t a = before; a < B->nacc; a++) B->acc[a].from = (p + 1) % B->n, B->acc[a].to = p;
    }
  }
  uint32_t to = p;
  if (is_async(op)) { /* to the op that completes it (wgmma, TMA reduce); else the whole cycle */
    int c = completion(B, id, p);
    to = c < 0 ? (p + B->n - 1) % B->n : (uint32_t)c;
    if (c < 0) p = (p + 1) % B->n;
  }
  if (op->code == IR_LOCAL_LOAD) {
    uint32_t dot = ir_smem_load_at_dot(f, id, B->uses);
    int dp = dot ? top_pos(B, dot) : -1;
    if (dp >= 0) to = (uint32_t)dp;
  }
  bool writes = (ir_ops[op->code].flags & OPF_WRITE) != 0;
  for (uint32_t k = 0; k < op->nargs; k++) {
    ir_val a = op->args[k];
    uint32_t d = ir_def_op(f, a);
    if (d && f->ops.v[d].code == IR_TMA_DESC) { /* a TMA copy's tensor */
      add(B, f->ops.v[d].args[0], op->code == IR_TMA_REDUCE, true, p, to);
    } else if (is_buffer(f, a)) {
      add(B, a, k == 0 && ir_smem_writes(f, id, a), false, p, to);
    } else if (is_tensor(f, a)) {
      add(B, a, writes && ir_op_writes_tensor(f, id, a), true, p, to);
    }
  }
}

/* Whether cyclic position x lies strictly between a and b (going forward from a). */
static bool between(uint32_t n, uint32_t a, uint32_t b, uint32_t x) {
  uint32_t dx = (x + n - a) % n, db = (b + n - a) % n;
  if (db == 0) db = n;
  return dx > 0 && dx < db;
}

/* Whether the cyclic interval [from, to] meets the open interval (a, b). */
static bool overlaps(uint32_t n, const struct access *x, uint32_t a, uint32_t b) {
  uint32_t len = (x->to + n - x->from) % n;
  for (uint32_t k = 0; k <= len; k++)
    if (between(n, a, b, (x->from + k) % n)) return true;
  return false;
}

static bool same_threads(const struct ir_op *a, const struct ir_op *b) {
  return a->code == IR_BARRIER && b->code == IR_BARRIER && a->i[0] == b->i[0] && a->i[1] == b->i[1];
}

/* Whether an op outside the body writes buffer v. A TMA load issued by another role (the
 * producer warp of warp_specialize) does not count: its writes are ordered with the
 * consumers by mbarriers, which no barrier of theirs takes part in. */
static bool writes_outside(const struct body *B, ir_val v) {
  const struct ir_func *f = B->f;
  int role, threads, wrole;
  ir_role_barrier(f, B->blk, &role, &threads);
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || !ir_smem_writes(f, id, v) || top_pos(B, id) >= 0) continue;
    if (op->code == IR_TMA_LOAD) {
      ir_role_barrier(f, op->block, &wrole, &threads);
      if (wrole != role) continue;
    }
    return true;
  }
  return false;
}

/* Whether the barrier at top position p of the body can go. */
static bool removable(struct body *B, uint32_t p) {
  const struct ir_func *f = B->f;
  const uint32_t *ops = f->blocks.v[B->blk].ops.v;
  const struct ir_op *bar = &f->ops.v[ops[p]];
  int prev = -1, next = -1;
  for (uint32_t k = 1; k < B->n && prev < 0; k++)
    if (same_threads(&f->ops.v[ops[(p + B->n - k) % B->n]], bar)) prev = (int)((p + B->n - k) % B->n);
  for (uint32_t k = 1; k < B->n && next < 0; k++)
    if (same_threads(&f->ops.v[ops[(p + k) % B->n]], bar)) next = (int)((p + k) % B->n);
  if (prev < 0 || next < 0) return false; /* the only barrier of its kind in the body */
  /* S2 may hold no release and no turn, and touch only the body's own buffers */
  for (uint32_t q = (p + 1) % B->n; q != (uint32_t)next; q = (q + 1) % B->n) {
    uint16_t c = f->ops.v[ops[q]].code;
    if (c == IR_MBAR_ARRIVE || c == IR_MBAR_EXPECT_TX || c == IR_TURN_PASS || c == IR_TURN_WAIT) return false;
  }
  for (uint32_t i = 0; i < B->nacc; i++) {
    const struct access *x = &B->acc[i];
    if (!overlaps(B->n, x, p, (uint32_t)next)) continue;
    if (x->global) {
      if (ir_block_writes_tensor(f, IR_BODY_BLOCK, x->obj)) return false;
      continue;
    }
    /* a buffer from outside the body: in the first iteration the code before the loop
     * runs before the barrier, so S2 may only read it, and only if nothing outside the
     * body writes it */
    if (!ir_defined_within(f, x->obj, B->blk) && (x->write || writes_outside(B, x->obj))) return false;
    for (uint32_t j = 0; j < B->nacc; j++) {
      const struct access *y = &B->acc[j];
      if (y->obj != x->obj || (!x->write && !y->write)) continue;
      if (overlaps(B->n, y, (uint32_t)prev, p)) return false;
    }
  }
  return true;
}

static bool elide_body(struct ir_func *f, uint32_t blk, const uint32_t *uses) {
  struct body B = {.f = f, .blk = blk, .uses = uses};
  B.n = f->blocks.v[blk].ops.n;
  for (uint32_t p = 0; p < B.n; p++) collect_op(&B, f->blocks.v[blk].ops.v[p], p);
  if (B.overflow) return false;
  for (uint32_t p = 0; p < B.n; p++) {
    uint32_t id = f->blocks.v[blk].ops.v[p];
    if (f->ops.v[id].code != IR_BARRIER || !removable(&B, p)) continue;
    ir_op_erase(f, id);
    return true; /* positions moved: collect again */
  }
  return false;
}

void pass_barrier_elide(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->stage < IR_STAGE_GPU || !tl_sched_get(f->sched.elide, 1)) return;
  uint32_t *uses = ir_use_counts(f, pc->scratch); /* erasing barriers (no operands) keeps it */
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_FOR || !op->nregions) continue;
    while (elide_body(f, op->region, uses)) pc->changed = true;
  }
}
