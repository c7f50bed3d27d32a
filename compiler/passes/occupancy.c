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
 * has no Tensor Core product (dot) and no warp roles, and its largest tile takes at most
 * TARGET_REGS / 2 registers per thread (so the cap leaves room for the rest), then
 * f->sched.occupancy = the programs that make TARGET_WARPS warps per multiprocessor (at
 * least 1), capped by the threads a multiprocessor holds; codegen gives it to ptxas as the
 * minimum programs per multiprocessor (which caps each thread's registers at
 * regs_per_sm / (occupancy x threads)). Otherwise nothing changes. */
#include "passes.h"

/* 16 warps per multiprocessor: 128 registers per thread on every target of the table */
enum { TARGET_WARPS = 16, TARGET_REGS = 128 };

void pass_occupancy(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->sched.occupancy >= 0 || !f->target) return;
  int threads = ir_func_threads(f);
  int64_t largest = 0; /* 32-bit registers per thread of the largest tile */
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (!op->block) continue;
    if (op->code == IR_DOT || op->code == IR_WARP_SPECIALIZE) return;
    for (uint32_t r = 0; r < op->nres; r++) {
      const struct ir_type *t = ir_vtype(f, op->res + r);
      if (t->kind != IR_TY_TILE) continue;
      int64_t bytes = ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype);
      int64_t regs = (bytes + 4 * (int64_t)threads - 1) / (4 * (int64_t)threads);
      if (regs > largest) largest = regs;
    }
  }
  if (largest > TARGET_REGS / 2) return;
  int programs = TARGET_WARPS * 32 / threads;
  if (programs < 1) programs = 1;
  if (programs * threads > (int)(f->target->regs_per_sm / TARGET_REGS)) programs = (int)(f->target->regs_per_sm / TARGET_REGS) / threads;
  if (programs < 1) return;
  f->sched.occupancy = (signed char)(programs > 32 ? 32 : programs);
  pc->changed = true;
}
