/* smem_alloc.c - shared-memory allocation: byte offsets for every buffer and mbarrier
 * array, and the barriers that reusing memory needs.
 *
 * Needs: GPU IR after the last pass that creates or deletes allocations. Guarantees: every
 * local_alloc and mbar_alloc has an `offset` (the stage becomes `allocated`); allocations
 * whose lifetimes overlap (smem.h: a use inside a loop keeps a buffer alive to the loop's
 * end) never share bytes; buffers are 1024-byte aligned (swizzle atoms, TMA boxes) and
 * mbarriers 8-byte aligned; the first write into memory that an earlier allocation used is
 * preceded by a barrier of the threads running it (every thread, or the role's named
 * barrier), so that nobody still reads the old contents. Placement is first-fit in program
 * order. Scratch of layout changes, reductions and staged stores is placed by codegen above
 * what is live at each op (ir_smem_live_top), so it never overlaps a live allocation.
 *
 *   %b = local_alloc : tile<3x128x64xf16, #s>       %b = local_alloc {offset=0} : ...
 *   %f = mbar_alloc {count=1} : tile<3xi64>     =>  %f = mbar_alloc {count=1, offset=147456} : ...
 *   %q = local_alloc : tile<128x64xf16, #s>         %q = local_alloc {offset=0} : ...   (after %b died)
 *   local_store %q, %0, %x                          barrier; local_store %q, %0, %x            */
#include "passes.h"
#include "smem.h"

static void insert_barrier_before(struct ir_func *f, uint32_t op) {
  struct ir_block *b = &f->blocks.v[f->ops.v[op].block];
  for (uint32_t i = 1; i < b->ops.n; i++)
    if (b->ops.v[i] == op && f->ops.v[b->ops.v[i - 1]].code == IR_BARRIER) return; /* already there */
  int id, threads;
  ir_role_barrier(f, f->ops.v[op].block, &id, &threads);
  struct ir_builder bld;
  ir_builder_before(&bld, f, op);
  uint32_t bar = ir_build(&bld, IR_BARRIER, NULL, 0, NULL, 0);
  f->ops.v[bar].i[0] = id;
  f->ops.v[bar].i[1] = threads;
}

void pass_smem_alloc(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->stage < IR_STAGE_GPU) return;
  struct ir_smem_plan p;
  ir_smem_liveness(f, pc->scratch, &p);
  uint32_t *first_write = ARENA_NEWN(pc->scratch, uint32_t, p.n + 1);
  for (uint32_t j = 0; j < p.n; j++) {
    const struct ir_op *a = &f->ops.v[p.iv[j].op];
    if (a->code == IR_MBAR_ALLOC) {
      first_write[j] = p.iv[j].op; /* initialized where it is allocated */
      continue;
    }
    for (uint32_t u = 1; u < f->ops.n; u++)
      if (f->ops.v[u].block && ir_smem_writes(f, u, a->res) && (!first_write[j] || p.pos[u] < p.pos[first_write[j]]))
        first_write[j] = u;
  }
  for (uint32_t j = 0; j < p.n; j++) {
    struct ir_smem_interval *x = &p.iv[j];
    unsigned off = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t k = 0; k < j; k++) {
        bool live = !(p.iv[k].end < x->start || x->end < p.iv[k].start);
        bool overlap = off < p.iv[k].offset + p.iv[k].bytes && p.iv[k].offset < off + x->bytes;
        if (live && overlap) {
          off = (p.iv[k].offset + p.iv[k].bytes + x->align - 1) & ~(x->align - 1);
          moved = true;
        }
      }
    }
    x->offset = off;
    struct ir_op *a = &f->ops.v[x->op];
    if (a->code == IR_MBAR_ALLOC) a->i[1] = off;
    else a->i[0] = off;
    bool reused = false;
    for (uint32_t k = 0; k < j; k++)
      if (off < p.iv[k].offset + p.iv[k].bytes && p.iv[k].offset < off + x->bytes) reused = true;
    if (reused && first_write[j]) insert_barrier_before(f, first_write[j]);
  }
  f->stage = IR_STAGE_ALLOCATED;
  pc->changed = true;
}
