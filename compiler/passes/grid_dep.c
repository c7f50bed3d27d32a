/* grid_dep.c - programmatic dependent launch (Hopper): the next kernel's programs start
 * while this one's last programs still run.
 *
 * Between two kernels in a stream the GPU otherwise idles for the launch of the second
 * (a few microseconds: decode attention's combine after its split kernel, the backward's
 * dQ kernel after dK/dV). With a programmatic dependency the driver schedules the second
 * kernel's programs as soon as every program of the first has signalled
 * (`griddepcontrol.launch_dependents`), and they wait (`griddepcontrol.wait`) until the
 * first has completed and its memory is visible.
 *
 * Needs: a target with griddepcontrol (TL_FEAT_GRID_DEP) and the schedule's pdl not 0.
 * Guarantees: f->grid_dep is set; codegen then starts every program with the wait followed
 * by the signal, before any memory access, so what a program reads was written by every
 * kernel before it and the next kernel may be scheduled as soon as this one's programs
 * have all started; the runtime launches a grid_dep kernel with programmatic stream
 * serialization (cuLaunchKernelEx), other launchers (tilec aot's, cuLaunchKernel) without
 * it, where the wait returns at once. Waiting at the start costs nothing against a plain
 * launch: the first memory access would wait for the previous kernel anyway. */
#include "passes.h"

void pass_grid_dep(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->grid_dep || !tl_has(f->target, TL_FEAT_GRID_DEP) || !tl_sched_get(f->sched.pdl, 1)) return;
  f->grid_dep = 1;
  pc->changed = true;
}
