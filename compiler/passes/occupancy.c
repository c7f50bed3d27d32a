/* occupancy.c - how many programs a multiprocessor should hold, for kernels whose speed is
 * the memory's: registers are capped so that enough of them fit.
 *
 * A row kernel that reads its row once keeps the row in registers (layernorm 8192 wide, 4
 * warps: 64 f32 per thread, 168 registers in all) and each program has one row of loads in
 * flight; how many programs fit on a multiprocessor decides how many bytes are in flight.
 * At 168 registers three fit, and layernorm 8192 x 8192 ran at 85% / 83% (f16 / bf16) of
 * the copy bandwidth; capped at 128 (four programs, 24 bytes spilled) 91% / 90%, at 96
 * (five, 84 bytes spilled) 80%; rmsnorm and softmax, already at four or more, unchanged
 * (PERF.md 73).
 *
 * Needs: GPU IR. Guarantees: when the schedule leaves occupancy to the compiler, the kernel
 * has no Tensor Core product (dot) and no warp roles, its largest tile takes at most
 * TARGET_REGS / 2 registers per thread and the tiles live at once at most 2 x TARGET_REGS
 * (an over-estimate: layernorm 8192's come to about 200 and need 128 with 24 bytes
 * spilled; kernels holding several rows at once keep their registers), then
 * f->sched.occupancy = the programs that make TARGET_WARPS warps per multiprocessor (at
 * least 1), capped by the threads a multiprocessor holds; codegen gives it to ptxas as the
 * minimum programs per multiprocessor (which caps each thread's registers at
 * regs_per_sm / (occupancy x threads)). Otherwise nothing changes. */
#include "passes.h"

/* 16 warps per multiprocessor: 128 registers per thread on every target of the table */
enum { TARGET_WARPS = 16, TARGET_REGS = 128 };

/* 32-bit registers per thread of value v's tile (0 for scalars). */
static int64_t tile_regs(const struct ir_func *f, ir_val v, int threads) {
  const struct ir_type *t = ir_vtype(f, v);
  if (t->kind != IR_TY_TILE || t->rank == 0) return 0;
  if (t->layout && f->layouts.v[t->layout].kind == IR_LAYOUT_SHARED) return 0; /* a buffer (row-cache's) */
  int64_t bytes = ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype);
  return (bytes + 4 * (int64_t)threads - 1) / (4 * (int64_t)threads);
}

/* Numbers the ops of block blk in program order (an op before the ops of its regions);
 * end[op] is the last number within the op's regions. */
static void number(const struct ir_func *f, uint32_t blk, uint32_t *next, uint32_t *pos, uint32_t *end,
                   uint8_t *in_body) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    pos[id] = (*next)++;
    in_body[id] = 1;
    for (uint32_t r = 0; r < f->ops.v[id].nregions; r++) number(f, f->ops.v[id].region + r, next, pos, end, in_body);
    end[id] = *next - 1;
  }
}

/* The most tile registers per thread live at once (a value is live from its definition to
 * its last use; a use inside a loop or branch that does not hold the definition keeps the
 * value live to the end of that region's op). An estimate of the code's pressure: ptxas
 * interleaves loads and math and needs less. */
static int64_t peak_tile_regs(const struct ir_func *f, int threads, struct arena *a) {
  uint32_t n = f->ops.n, nv = f->values.n, next = 0;
  uint32_t *pos = ARENA_NEWN(a, uint32_t, n), *end = ARENA_NEWN(a, uint32_t, n);
  uint8_t *in_body = ARENA_NEWN(a, uint8_t, n); /* reached from the body (not the grid block, not removed) */
  number(f, IR_BODY_BLOCK, &next, pos, end, in_body);
  uint32_t *defp = ARENA_NEWN(a, uint32_t, nv), *last = ARENA_NEWN(a, uint32_t, nv);
  uint8_t *seen = ARENA_NEWN(a, uint8_t, nv);
  int64_t *delta = ARENA_NEWN(a, int64_t, next + 2);
  for (uint32_t id = 1; id < n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!in_body[id]) continue;
    for (uint32_t r = 0; r < op->nres; r++) defp[op->res + r] = last[op->res + r] = pos[id], seen[op->res + r] = 1;
    for (uint32_t r = 0; r < op->nregions; r++) { /* block arguments: live within the op */
      const struct ir_block *b = &f->blocks.v[op->region + r];
      for (uint32_t k = 0; k < b->nargs; k++) defp[b->args + k] = pos[id], last[b->args + k] = end[id], seen[b->args + k] = 1;
    }
  }
  for (uint32_t id = 1; id < n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!in_body[id]) continue;
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val v = op->args[k];
      if (!seen[v]) continue; /* parameters, constants of the grid block */
      uint32_t at = id, use = pos[id];
      while (f->blocks.v[f->ops.v[at].block].parent) {
        uint32_t up = f->blocks.v[f->ops.v[at].block].parent;
        if (pos[up] <= defp[v] && defp[v] <= end[up]) break;
        at = up;
        use = end[up];
      }
      if (use > last[v]) last[v] = use;
    }
  }
  for (ir_val v = 1; v < nv; v++) {
    if (!seen[v]) continue;
    int64_t r = tile_regs(f, v, threads);
    delta[defp[v]] += r;
    delta[last[v] + 1] -= r;
  }
  int64_t live = 0, peak = 0;
  for (uint32_t p = 0; p <= next; p++) {
    live += delta[p];
    if (live > peak) peak = live;
  }
  return peak;
}

/* Whether block blk (with its regions) has a product or warp roles; *largest grows to the
 * registers per thread of its largest tile. */
static bool scan(const struct ir_func *f, uint32_t blk, int threads, int64_t *largest) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_DOT || op->code == IR_WARP_SPECIALIZE) return true;
    for (uint32_t r = 0; r < op->nres; r++) {
      int64_t regs = tile_regs(f, op->res + r, threads);
      if (regs > *largest) *largest = regs;
    }
    for (uint32_t r = 0; r < op->nregions; r++)
      if (scan(f, op->region + r, threads, largest)) return true;
  }
  return false;
}

/* Whether row-cache keeps a row of f in shared memory (its buffer is allocated). */
static bool holds_row(const struct ir_func *f) {
  if (!row_cache_applies(f)) return false;
  for (uint32_t i = 1; i < f->ops.n; i++)
    if (f->ops.v[i].block && f->ops.v[i].code == IR_LOCAL_ALLOC) return true;
  return false;
}

void pass_occupancy(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->sched.occupancy >= 0 || !f->target) return;
  int threads = ir_func_threads(f);
  int64_t largest = 0; /* 32-bit registers per thread of the largest tile */
  if (scan(f, IR_BODY_BLOCK, threads, &largest)) return;
  int64_t peak = peak_tile_regs(f, threads, pc->scratch);
  if (largest > TARGET_REGS / 2 || peak > 2 * TARGET_REGS) return;
  /* TARGET_WARPS' threads, or fewer where the register file holds fewer at TARGET_REGS */
  int64_t slots = f->target->regs_per_sm / TARGET_REGS;
  if (slots > TARGET_WARPS * 32) slots = TARGET_WARPS * 32;
  int programs = threads > 0 ? (int)(slots / threads) : 0;
  /* a row kept in shared memory (row-cache) is sized for ROW_CACHE_PROGRAMS programs: at
   * 16 warps the rule above gives one, and the second half of the shared memory would
   * stay empty (layernorm 4096 x 50257: 69 registers, one program; 60 without spills at
   * two, PERF.md 115) */
  int64_t cap = threads > 0 ? f->target->regs_per_sm / ((int64_t)ROW_CACHE_PROGRAMS * threads) : 0;
  if (programs < ROW_CACHE_PROGRAMS && holds_row(f) && cap >= 32 && largest <= cap / 2 && peak <= 2 * cap)
    programs = ROW_CACHE_PROGRAMS;
  if (programs < 1) return;
  f->sched.occupancy = (signed char)(programs > 32 ? 32 : programs);
  pc->changed = true;
}
