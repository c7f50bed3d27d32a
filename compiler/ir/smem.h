/* smem.h - shared-memory liveness: an analysis of the allocations of a GPU function, used
 * by the smem-alloc pass (to place them) and by codegen (to place scratch above what is
 * live at an op).
 *
 * Ops are numbered in program order (an op before the ops of its regions). An allocation
 * (local_alloc, mbar_alloc) lives from its definition to its last use, where a use inside a
 * loop counts until the end of that loop, because every iteration needs it. mbarriers live
 * to the end of the kernel: a warp-specialized role may still wait on them after the other
 * role's last use. Offsets are read from the IR (0 before allocation).                  */
#ifndef TL_SMEM_H
#define TL_SMEM_H

#include "ir.h"

struct ir_smem_interval {
  uint32_t op;          /* the local_alloc or mbar_alloc */
  uint32_t start, end;  /* op positions */
  unsigned bytes, align, offset;
};

struct ir_smem_plan {
  uint32_t *pos, *last;          /* op -> position; op -> last position of its regions */
  struct ir_smem_interval *iv;   /* in program order of the allocations */
  uint32_t n;
};

void ir_smem_liveness(const struct ir_func *f, struct arena *a, struct ir_smem_plan *out);
/* The dot that reads local_load `load` itself, or 0: a load of 16-bit elements into an mma
 * operand layout whose only user (uses: ir_use_counts) is a dot in the same block. Codegen
 * may then load the fragments at the dot, one k-slice at a time (cg_plan_lazy_loads), so
 * the buffer lives to the dot, not to the load. */
uint32_t ir_smem_load_at_dot(const struct ir_func *f, uint32_t load, const uint32_t *uses);
/* Whether op writes buffer buf (local_store, async_copy or tma_load into it). */
bool ir_smem_writes(const struct ir_func *f, uint32_t op, ir_val buf);
/* The end of the highest allocation (bytes): the shared memory the allocations need. */
unsigned ir_smem_top(const struct ir_smem_plan *p);
/* The end of the highest allocation live at op (bytes); scratch may start above it. */
unsigned ir_smem_live_top(const struct ir_smem_plan *p, uint32_t op);
/* The offset attribute of an allocation op. */
int64_t ir_smem_offset(const struct ir_func *f, uint32_t op);
/* The named barrier that synchronizes the threads running block blk: {0, 0} (every thread)
 * outside warp_specialize, the consumer barrier {1, 32 * warps} in the consumer role, and
 * {2, 32} in the producer role (one warp). */
void ir_role_barrier(const struct ir_func *f, uint32_t blk, int *id, int *threads);

#endif
