/* persistent.c - persistent programs: one program per multiprocessor slot walks the tiles,
 * so the producer fills the next tile's stages while the consumers run the epilogue of the
 * current one, and no program start or ring set-up is paid per tile.
 *
 * Needs: the warp-specialized form (a warp_specialize op at the top of the body; the ring
 * loops carry their stage and phase) and a schedule that asks for it (persistent=1). The
 * body must not depend on the program through anything but program_id/num_programs of its
 * scalar prefix (true of every kernel: programs share nothing else).
 * Guarantees:
 *   - the number of tiles (the product of the grid's three sizes) is computed in the body
 *     from the grid block's expressions;
 *   - each role's region becomes a loop `for %t = program_id(0) to %ntiles step
 *     num_programs(0)`, whose body recomputes the scalar prefix that depends on the
 *     program, with program_id(a) / num_programs(a) replaced by the tile's coordinates
 *     (t % gx, t / gx % gy, t / (gx * gy)) and the grid sizes;
 *   - the ring position (stage, phase) of each role's ring loop is carried by the tile loop
 *     from one tile to the next (the mbarrier phases continue; they are never reset);
 *   - the function is marked persistent: the runtime launches as many programs as fit on
 *     the device at once (at most the number of tiles), along x.
 *
 *   %pid = program_id {axis=0}                       %nt = <grid sizes multiplied>
 *   %m0 = ... %pid ...                               warp_specialize producer {
 *   warp_specialize producer {                         for %t = program_id(0) to %nt step num_programs(0)
 *     for %k ... iter(%s = 0, %p = 0) { ... %m0 }  =>      iter(%s0 = 0, %p0 = 0) {
 *   } consumer { ... }                                   %m0' = ... %t ...
 *                                                        %s1, %p1 = for %k ... iter(%s = %s0, %p = %p0) {...}
 *                                                        yield %s1, %p1 } } consumer { ...likewise } */
#include <string.h>

#include "passes.h"

enum { MAX_PREFIX = 256, MAX_RING = 4 };

/* Whether scalar op `id` depends (through pure operands defined at the top level) on the
 * program's identity. dep[] caches per value. */
static bool depends_on_program(struct ir_func *f, ir_val v, uint8_t *dep) {
  if (dep[v]) return dep[v] == 2;
  dep[v] = 1;
  uint32_t d = ir_def_op(f, v);
  if (!d || f->ops.v[d].block != IR_BODY_BLOCK) return false;
  const struct ir_op *op = &f->ops.v[d];
  bool r = op->code == IR_PROGRAM_ID || op->code == IR_NUM_PROGRAMS;
  for (uint32_t k = 0; k < op->nargs && !r; k++) r = depends_on_program(f, op->args[k], dep);
  dep[v] = r ? 2 : 1;
  return r;
}

/* The ring loop of a role region: the top-level loop whose carried values feed an mbar_wait
 * (the stage and the phase, or the phase through an xor). Fills idx[] with the indices of
 * those carried values; returns the loop or 0. */
static uint32_t ring_loop(struct ir_func *f, uint32_t region, uint32_t *idx, uint32_t *n) {
  const struct ir_block *rb = &f->blocks.v[region];
  for (uint32_t i = 0; i < rb->ops.n; i++) {
    uint32_t id = rb->ops.v[i];
    if (f->ops.v[id].code != IR_FOR) continue;
    uint32_t body = f->ops.v[id].region;
    ir_val base = f->blocks.v[body].args + 1;
    uint32_t nc = f->ops.v[id].nres;
    *n = 0;
    const struct ir_block *bb = &f->blocks.v[body];
    for (uint32_t j = 0; j < bb->ops.n; j++) {
      const struct ir_op *w = &f->ops.v[bb->ops.v[j]];
      if (w->code != IR_MBAR_WAIT) continue;
      for (int a = 1; a <= 2; a++) {
        ir_val v = w->args[a];
        uint32_t x = ir_def_op(f, v);
        if (x && f->ops.v[x].code == IR_XOR) v = f->ops.v[x].args[0];
        if (v >= base && v < base + nc && *n < MAX_RING) {
          bool seen = false;
          for (uint32_t q = 0; q < *n; q++) seen |= idx[q] == v - base;
          if (!seen) idx[(*n)++] = v - base;
        }
      }
    }
    if (*n == 2) return id;
  }
  return 0;
}

/* How many top-level loops of a role region wait on mbarriers (ring loops). */
static int count_ring_loops(const struct ir_func *f, uint32_t region) {
  const struct ir_block *rb = &f->blocks.v[region];
  int n = 0;
  for (uint32_t i = 0; i < rb->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[rb->ops.v[i]];
    if (op->code != IR_FOR) continue;
    const struct ir_block *bb = &f->blocks.v[op->region];
    bool waits = false;
    for (uint32_t j = 0; j < bb->ops.n; j++) waits |= f->ops.v[bb->ops.v[j]].code == IR_MBAR_WAIT;
    n += waits;
  }
  return n;
}

static void replace_within(struct ir_func *f, uint32_t blk, ir_val from, ir_val to) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] == from) op->args[k] = to;
    for (uint32_t r = 0; r < op->nregions; r++) replace_within(f, op->region + r, from, to);
  }
}

/* Wraps region `region` of the ws op in the tile loop. `prefix` lists the program-dependent
 * scalar ops of the body (in order) to recompute per tile. */
static bool wrap_role(struct pass_ctx *pc, uint32_t region, ir_val ntiles, const ir_val *gsize, const uint32_t *prefix,
                      uint32_t nprefix) {
  struct ir_func *f = pc->f;
  uint32_t idx[MAX_RING], nring = 0;
  uint32_t ring = ring_loop(f, region, idx, &nring);
  if (!ring) return false;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  /* the region's ops move into the tile loop's body (all but its yield) */
  struct ir_block *rb = &f->blocks.v[region];
  uint32_t nops = rb->ops.n - 1;
  uint32_t *ops = ARENA_NEWN(pc->scratch, uint32_t, nops + 1);
  memcpy(ops, rb->ops.v, sizeof(uint32_t) * nops);
  struct ir_builder b;
  ir_builder_before(&b, f, ops[0]);
  b.loc = f->ops.v[ring].loc;
  ir_val pid = ir_build1(&b, IR_PROGRAM_ID, i32, NULL, 0);
  ir_val np = ir_build1(&b, IR_NUM_PROGRAMS, i32, NULL, 0);
  f->ops.v[ir_def_op(f, pid)].i[0] = 0;
  f->ops.v[ir_def_op(f, np)].i[0] = 0;
  ir_val zero = ir_const_int(&b, i32, 0);
  ir_val inits[MAX_RING] = {zero, zero};
  uint32_t tl = ir_build_for(&b, pid, ntiles, np, inits, nring);
  uint32_t tbody = f->ops.v[tl].region;
  ir_val t = f->blocks.v[tbody].args;
  struct ir_builder tb;
  ir_builder_at_end(&tb, f, tbody);
  tb.loc = b.loc;
  /* the program's coordinates for tile t */
  ir_val coord[3];
  coord[0] = ir_binary(&tb, IR_REM, t, gsize[0]);
  ir_val q = ir_binary(&tb, IR_DIV, t, gsize[0]);
  coord[1] = ir_binary(&tb, IR_REM, q, gsize[1]);
  coord[2] = ir_binary(&tb, IR_DIV, q, gsize[1]);
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  for (uint32_t i = 0; i < nprefix; i++) {
    const struct ir_op *op = &f->ops.v[prefix[i]];
    if (op->code == IR_PROGRAM_ID) ir_map_set(&m, op->res, coord[op->i[0]]);
    else if (op->code == IR_NUM_PROGRAMS) ir_map_set(&m, op->res, gsize[op->i[0]]);
    else ir_clone_op(&tb, prefix[i], &m);
  }
  for (uint32_t i = 0; i < nops; i++) ir_op_move(&tb, ops[i]);
  /* uses of the prefix inside the tile loop read the per-tile copies */
  for (uint32_t i = 0; i < nprefix; i++) {
    ir_val from = f->ops.v[prefix[i]].res, to = ir_mapped(&m, from);
    if (to != from) replace_within(f, tbody, from, to);
  }
  /* the ring position flows through the tile loop */
  struct ir_op *rl = &f->ops.v[ring];
  for (uint32_t r = 0; r < nring; r++) rl->args[3 + idx[r]] = f->blocks.v[tbody].args + 1 + r;
  ir_val ya[MAX_RING];
  for (uint32_t r = 0; r < nring; r++) ya[r] = f->ops.v[ring].res + idx[r];
  ir_build(&tb, IR_YIELD, ya, nring, NULL, 0);
  return true;
}

static bool make_persistent(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  uint32_t ws = 0;
  for (uint32_t i = 0; i < body->ops.n; i++)
    if (f->ops.v[body->ops.v[i]].code == IR_WARP_SPECIALIZE) ws = body->ops.v[i];
  if (!ws || f->persistent) return false;
  /* both roles must have one ring loop to carry (several: not yet; each ring's position
   * would have to flow through the tile loop) */
  if (count_ring_loops(f, f->ops.v[ws].region) != 1 || count_ring_loops(f, f->ops.v[ws].region + 1) != 1) return false;
  uint32_t idx[MAX_RING], n;
  if (!ring_loop(f, f->ops.v[ws].region, idx, &n) || !ring_loop(f, f->ops.v[ws].region + 1, idx, &n)) return false;
  /* the program-dependent scalar prefix */
  uint8_t *dep = ARENA_NEWN(pc->scratch, uint8_t, f->values.n + 1);
  uint32_t prefix[MAX_PREFIX], np = 0;
  for (uint32_t i = 0; i < body->ops.n && body->ops.v[i] != ws; i++) {
    const struct ir_op *op = &f->ops.v[body->ops.v[i]];
    if (op->nres != 1 || !ir_type_is_scalar(ir_vtype(f, op->res)) || op->nregions) continue;
    if (!depends_on_program(f, op->res, dep)) continue;
    if (!(ir_ops[op->code].flags & OPF_PURE) || np == MAX_PREFIX) return false;
    prefix[np++] = body->ops.v[i];
  }
  /* the grid sizes, from the grid block, computed in the body before the roles */
  struct ir_builder b;
  ir_builder_before(&b, f, ws);
  b.loc = f->ops.v[ws].loc;
  struct ir_valmap m;
  ir_valmap_init(&m, f, pc->scratch);
  const struct ir_block *gb = &f->blocks.v[IR_GRID_BLOCK];
  for (uint32_t i = 0; i + 1 < gb->ops.n; i++) {
    if (f->ops.v[gb->ops.v[i]].nregions) return false; /* (an if in the grid block: keep it simple) */
    ir_clone_op(&b, gb->ops.v[i], &m);
  }
  const struct ir_op *g = &f->ops.v[VEC_LAST(f->blocks.v[IR_GRID_BLOCK].ops)];
  ir_val gsize[3];
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  for (int d = 0; d < 3; d++) {
    gsize[d] = ir_mapped(&m, g->args[d]);
    if (ir_vtype(f, gsize[d])->dtype != DT_I32) {
      ir_val a = gsize[d];
      gsize[d] = ir_build1(&b, IR_CAST, i32, &a, 1);
    }
  }
  ir_val ntiles = ir_binary(&b, IR_MUL, ir_binary(&b, IR_MUL, gsize[0], gsize[1]), gsize[2]);
  if (!wrap_role(pc, f->ops.v[ws].region, ntiles, gsize, prefix, np)) return false;
  if (!wrap_role(pc, f->ops.v[ws].region + 1, ntiles, gsize, prefix, np)) return false;
  f->persistent = 1;
  return true;
}

void pass_persistent(struct pass_ctx *pc) {
  if (!tl_sched_get(pc->f->sched.persistent, 1)) return;
  if (make_persistent(pc)) pc->changed = true;
}
