/* persistent.c - persistent programs: one program per multiprocessor slot walks the tiles,
 * so the producer fills the next tile's stages while the consumers run the epilogue of the
 * current one, and no program start or ring set-up is paid per tile.
 *
 * Needs: the warp-specialized form (a warp_specialize op at the top of the body; the ring
 * loops carry their stage and phase) and a schedule that allows it (persistent, on by
 * default). The ring loops' bounds must not depend on the program (every tile does the
 * same work), unless a key block's products are light (make_persistent) or the schedule
 * says persistent=1 explicitly: then tiles of unequal work are walked in snake order (odd
 * rounds backwards). The
 * body must not depend on the program through anything but program_id/num_programs of its
 * scalar prefix (true of every kernel: programs share nothing else).
 * Guarantees:
 *   - the number of tiles (the product of the grid's three sizes) is computed in the body
 *     from the grid block's expressions;
 *   - each role's region becomes a loop `for %t = program_id(0) to %ntiles step
 *     num_programs(0)`, whose body recomputes the scalar prefix that depends on the
 *     program, with program_id(a) / num_programs(a) replaced by the tile's coordinates
 *     (t % gx, t / gx % gy, t / (gx * gy)) and the grid sizes;
 *   - the ring position (stage, phase) of each of a role's ring loops (attention has two,
 *     one per key range) is carried by the tile loop from one tile to the next (the
 *     mbarrier phases continue; they are never reset); both roles have the same rings;
 *   - a one-slot barrier waited for once per tile at a role's top level (attention's Q,
 *     copied once per tile: warp_specialize) has its phase carried too, flipped per tile;
 *   - ops before the roles that cannot be recomputed per tile (with regions, or not
 *     scalars) do not depend on the program, or nothing is done;
 *   - the function is marked persistent: the runtime launches as many programs as fit on
 *     the device at once (at most the number of tiles), along x; persistent=2 (heavy tiles
 *     of unequal work) only when the tiles are 4 to 8 waves of those programs (or at most
 *     one), one program per tile otherwise (each walks one tile); such a kernel whose launch's
 *     longest tile runs many steps (the long_tiles fact, cg.h) is left as it is.
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

enum { MAX_PREFIX = 256, MAX_RING = 4, MAX_LOOPS = 4, MAX_ONCE = 4 };
/* Products per iteration up to which tiles of unequal work are walked persistently (attention
 * at hd64, BM = BN = 128: 2^22) */
enum { LIGHT_FLOPS = 1 << 22 };

/* Whether scalar op `id` depends (through pure operands defined at the top level) on the
 * program's identity. dep[] caches per value. */
static bool depends_on_program(const struct ir_func *f, ir_val v, uint8_t *dep) {
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

/* The ring loops of a role region: the top-level loops whose carried values feed an
 * mbar_wait (the stage and the phase, or the phase through an xor). Fills loops[] and, per
 * loop, idx[] with the indices of those carried values; returns how many (at most
 * MAX_LOOPS; 0 also when a loop waits on something else). */
static uint32_t ring_loops(struct ir_func *f, uint32_t region, uint32_t *loops, uint32_t (*idx)[MAX_RING]) {
  const struct ir_block *rb = &f->blocks.v[region];
  uint32_t nl = 0;
  for (uint32_t i = 0; i < rb->ops.n; i++) {
    uint32_t id = rb->ops.v[i];
    if (f->ops.v[id].code != IR_FOR) continue;
    uint32_t body = f->ops.v[id].region;
    ir_val base = f->blocks.v[body].args + 1;
    uint32_t nc = f->ops.v[id].nres, n = 0;
    bool waits = false;
    const struct ir_block *bb = &f->blocks.v[body];
    for (uint32_t j = 0; j < bb->ops.n; j++) {
      const struct ir_op *w = &f->ops.v[bb->ops.v[j]];
      if (w->code != IR_MBAR_WAIT) continue;
      waits = true;
      for (int a = 1; a <= 2; a++) {
        ir_val v = w->args[a];
        uint32_t x = ir_def_op(f, v);
        if (x && f->ops.v[x].code == IR_XOR) v = f->ops.v[x].args[0];
        if (v >= base && v < base + nc && n < MAX_RING) {
          bool seen = false;
          for (uint32_t q = 0; q < n; q++) seen |= idx[nl][q] == v - base;
          if (!seen) idx[nl][n++] = v - base;
        }
      }
    }
    if (!waits) continue;
    if (n != 2 || nl == MAX_LOOPS) return 0;
    loops[nl++] = id;
  }
  return nl;
}

/* Whether op id (or an op nested in it) waits on barrier bar. */
static uint32_t waits_on(const struct ir_func *f, uint32_t id, ir_val bar) {
  const struct ir_op *op = &f->ops.v[id];
  uint32_t n = op->code == IR_MBAR_WAIT && op->args[0] == bar;
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++) n += waits_on(f, b->ops.v[i], bar);
  }
  return n;
}

/* The role's one-shot waits: top-level mbar_waits on a one-slot barrier with a constant
 * phase, the only wait on that barrier in the role (a tile copied once per tile, such as
 * attention's Q: warp_specialize). Returns how many (MAX_ONCE + 1: too many, or a one-slot
 * barrier waited for in another way). */
static uint32_t one_shot_waits(const struct ir_func *f, uint32_t region, uint32_t *once) {
  const struct ir_block *rb = &f->blocks.v[region];
  uint32_t n = 0;
  for (uint32_t i = 0; i < rb->ops.n; i++) {
    const struct ir_op *w = &f->ops.v[rb->ops.v[i]];
    int64_t c;
    if (w->code != IR_MBAR_WAIT || ir_vtype(f, w->args[0])->dims[0] != 1) continue;
    if (!ir_value_const_int(f, w->args[2], &c) || (c != 0 && c != 1) || n == MAX_ONCE) return MAX_ONCE + 1;
    uint32_t uses = 0;
    for (uint32_t j = 0; j < rb->ops.n; j++) uses += waits_on(f, rb->ops.v[j], w->args[0]);
    if (uses != 1) return MAX_ONCE + 1;
    once[n++] = rb->ops.v[i];
  }
  return n;
}

/* Whether an op's regions use a program-dependent value or ask for the program's identity. */
static bool region_uses_program(struct ir_func *f, uint32_t id, uint8_t *dep) {
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++) {
      const struct ir_op *u = &f->ops.v[b->ops.v[i]];
      if (u->code == IR_PROGRAM_ID || u->code == IR_NUM_PROGRAMS) return true;
      for (uint32_t k = 0; k < u->nargs; k++)
        if (depends_on_program(f, u->args[k], dep)) return true;
      if (region_uses_program(f, b->ops.v[i], dep)) return true;
    }
  }
  return false;
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
                      uint32_t nprefix, bool snake) {
  struct ir_func *f = pc->f;
  uint32_t loops[MAX_LOOPS], idx[MAX_LOOPS][MAX_RING];
  uint32_t nl = ring_loops(f, region, loops, idx);
  if (!nl) return false;
  /* a loop that continues an earlier loop's ring (warp_specialize: one ring for loops of
   * the same copies) starts from that loop's position: only the first loop of each such
   * chain takes the position from the tile loop, and the chain's last one gives it back */
  uint32_t head[MAX_LOOPS], tail[MAX_LOOPS], nh = 0, ring = loops[0];
  for (uint32_t l = 0; l < nl; l++) {
    uint32_t d = ir_def_op(f, f->ops.v[loops[l]].args[3 + idx[l][0]]), h = nh;
    for (uint32_t g = 0; g < nh; g++)
      if (d && d == tail[g]) h = g;
    if (h == nh) head[nh++] = loops[l];
    tail[h] = loops[l];
  }
  uint32_t nring = 2 * nh; /* each ring: its stage and its phase */
  uint32_t once[MAX_ONCE], no = one_shot_waits(f, region, once);
  if (no > MAX_ONCE) return false;
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
  ir_val inits[2 * MAX_LOOPS + MAX_ONCE];
  for (uint32_t r = 0; r < nring + no; r++) inits[r] = zero;
  uint32_t tl = ir_build_for(&b, pid, ntiles, np, inits, nring + no);
  uint32_t tbody = f->ops.v[tl].region;
  ir_val t = f->blocks.v[tbody].args;
  struct ir_builder tb;
  ir_builder_at_end(&tb, f, tbody);
  tb.loc = b.loc;
  if (snake) {
    /* tiles of unequal work, longest first in each row of the grid: the odd rounds of the
     * walk go backwards, so a program with a long tile in one round gets a short one in the
     * next; a round's tiles stay the same (neighbouring programs still share their data in
     * L2), the last, partial round goes forwards */
    ir_val one = ir_const_int(&tb, i32, 1);
    ir_val round = ir_binary(&tb, IR_DIV, t, np);
    ir_val odd = ir_binary(&tb, IR_EQ, ir_binary(&tb, IR_AND, round, one), one);
    ir_val full = ir_binary(&tb, IR_LE, ir_binary(&tb, IR_MUL, ir_binary(&tb, IR_ADD, round, one), np), ntiles);
    ir_val back = ir_binary(&tb, IR_ADD, ir_binary(&tb, IR_SUB, t, ir_binary(&tb, IR_MUL, pid, ir_const_int(&tb, i32, 2))),
                            ir_binary(&tb, IR_SUB, np, one));
    ir_val sa[3] = {ir_binary(&tb, IR_AND, odd, full), back, t};
    t = ir_build1(&tb, IR_SELECT, i32, sa, 3);
  }
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
  /* each ring's position flows through the tile loop */
  ir_val ya[2 * MAX_LOOPS + MAX_ONCE];
  for (uint32_t g = 0; g < nh; g++) {
    uint32_t lh = 0, lt = 0;
    for (uint32_t l = 0; l < nl; l++) {
      if (loops[l] == head[g]) lh = l;
      if (loops[l] == tail[g]) lt = l;
    }
    for (uint32_t r = 0; r < 2; r++) {
      f->ops.v[head[g]].args[3 + idx[lh][r]] = f->blocks.v[tbody].args + 1 + 2 * g + r;
      ya[2 * g + r] = f->ops.v[tail[g]].res + idx[lt][r];
    }
  }
  /* a barrier waited for once per tile completes one phase per tile: its phase flips */
  for (uint32_t o = 0; o < no; o++) {
    ir_val p = f->blocks.v[tbody].args + 1 + nring + o, one = ir_const_int(&tb, i32, 1);
    ya[nring + o] = ir_binary(&tb, IR_XOR, p, one);
    struct ir_builder wb;
    ir_builder_before(&wb, f, once[o]);
    int64_t c = 0;
    ir_value_const_int(f, f->ops.v[once[o]].args[2], &c);
    f->ops.v[once[o]].args[2] = c ? ir_binary(&wb, IR_XOR, p, ir_const_int(&wb, i32, 1)) : p;
  }
  ir_build(&tb, IR_YIELD, ya, nring + no, NULL, 0);
  return true;
}

/* The Tensor Core work of one iteration of loop body bb: 2 * M * N * K per product (dot in
 * generic IR, wgmma in GPU IR) at its top level. */
static int64_t body_flops(const struct ir_func *f, uint32_t bb) {
  const struct ir_block *b = &f->blocks.v[bb];
  int64_t w = 0;
  for (uint32_t j = 0; j < b->ops.n; j++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[j]];
    if (op->code != IR_WGMMA && op->code != IR_DOT) continue;
    const struct ir_type *c = ir_vtype(f, op->res), *a = ir_vtype(f, op->args[0]);
    if (c->rank != 2 || a->rank < 2) continue;
    bool mn_major = op->code == IR_WGMMA && (op->i[0] & 1); /* a's buffer holds [K, M] */
    int64_t k = mn_major ? a->dims[a->rank - 2] : a->dims[a->rank - 1];
    w += 2 * (int64_t)c->dims[0] * c->dims[1] * k;
  }
  return w;
}

/* The Tensor Core work of one iteration of the heaviest top-level loop of a role region. */
static int64_t iteration_flops(const struct ir_func *f, uint32_t region) {
  const struct ir_block *rb = &f->blocks.v[region];
  int64_t most = 0;
  for (uint32_t i = 0; i < rb->ops.n; i++) {
    const struct ir_op *lp = &f->ops.v[rb->ops.v[i]];
    if (lp->code != IR_FOR) continue;
    int64_t w = body_flops(f, lp->region);
    if (w > most) most = w;
  }
  return most;
}

bool pass_long_tiles_matter(const struct ir_func *f, struct arena *scratch) {
  uint8_t *dep = ARENA_NEWN(scratch, uint8_t, f->values.n + 1);
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_FOR || op->nargs < 3) continue;
    if ((depends_on_program(f, op->args[0], dep) || depends_on_program(f, op->args[1], dep)) &&
        body_flops(f, op->region) > LIGHT_FLOPS)
      return true;
  }
  return false;
}

static bool make_persistent(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  uint32_t ws = 0;
  for (uint32_t i = 0; i < body->ops.n; i++)
    if (f->ops.v[body->ops.v[i]].code == IR_WARP_SPECIALIZE) ws = body->ops.v[i];
  if (!ws || f->persistent) return false;
  /* both roles must have the same number of ring loops, whose positions flow through the
   * tile loop */
  uint32_t loops[MAX_LOOPS], idx[MAX_LOOPS][MAX_RING];
  uint32_t nrings = ring_loops(f, f->ops.v[ws].region, loops, idx);
  if (!nrings || ring_loops(f, f->ops.v[ws].region + 1, loops, idx) != nrings) return false;
  uint8_t *dep = ARENA_NEWN(pc->scratch, uint8_t, f->values.n + 1);
  /* tiles of unequal work (a causal mask: the key loop ends at the tile's diagonal) are
   * walked in snake order (wrap_role) when a key block's products are light (at most
   * LIGHT_FLOPS per iteration, attention up to hd64): then a tile's fixed cost (its first
   * fills, the epilogue) weighs more than the static walk's imbalance (PERF.md 57: hd64
   * causal +1-14%). Heavier ones are walked only when the grid is a few waves (persistent=2:
   * the runtime launches one program per tile otherwise, and the hardware's block scheduler
   * starts each when a slot frees up): hd128 causal N=1024, 7.8 waves, 0.83x -> 0.92x of
   * cuDNN for the walk; N=4096, 31 waves, 1.05x -> 0.99x (PERF.md 42, 57, 62); attention
   * backward's dK, dV causal at 2 waves 1.154 ms -> 1.385 (PERF.md 65: two tiles per
   * program cannot even out work that repeats with the key block). The schedule's
   * persistent=1 walks them always. */
  bool unequal = false;
  for (uint32_t l = 0; l < nrings; l++)
    for (int k = 0; k < 2; k++) unequal |= depends_on_program(f, f->ops.v[loops[l]].args[k], dep);
  bool few_waves = unequal && f->sched.persistent != 1 && iteration_flops(f, f->ops.v[ws].region + 1) > LIGHT_FLOPS;
  /* ...and not at all when the launch's longest tile runs many steps (the long_tiles fact,
   * cg.h: CG_WALK_MAX_TRIPS): a plain grid, one program per tile started by the hardware,
   * measured 7-9% faster there than the walk and than persistent code launched one program
   * per tile (PERF.md 91) */
  if (few_waves && f->long_tiles) return false;
  /* the program-dependent scalar prefix */
  uint32_t prefix[MAX_PREFIX], np = 0;
  for (uint32_t i = 0; i < body->ops.n && body->ops.v[i] != ws; i++) {
    const struct ir_op *op = &f->ops.v[body->ops.v[i]];
    if (op->nres != 1 || !ir_type_is_scalar(ir_vtype(f, op->res)) || op->nregions) {
      /* what cannot be recomputed per tile must not depend on the program */
      for (uint32_t r = 0; r < op->nres; r++)
        if (depends_on_program(f, op->res + r, dep)) return false;
      if (op->nregions && region_uses_program(f, body->ops.v[i], dep)) return false;
      continue;
    }
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
  if (!wrap_role(pc, f->ops.v[ws].region, ntiles, gsize, prefix, np, unequal)) return false;
  if (!wrap_role(pc, f->ops.v[ws].region + 1, ntiles, gsize, prefix, np, unequal)) return false;
  f->persistent = few_waves ? 2 : 1;
  return true;
}

void pass_persistent(struct pass_ctx *pc) {
  if (!tl_sched_get(pc->f->sched.persistent, 1)) return;
  if (make_persistent(pc)) pc->changed = true;
}
