/* interp.h - the CPU interpreter: runs Tile IR as the reference semantics.
 *
 * The interpreter executes the generic IR (after the machine-independent pipeline, before
 * any GPU lowering) one program instance at a time, over the whole grid, splitting the
 * programs across host threads. Arguments are already validated by the launcher.       */
#ifndef TL_INTERP_H
#define TL_INTERP_H

#include "eval.h"
#include "ir.h"

struct interp_tensor {
  void *data;
  ir_dtype dtype;
  int rank;
  int64_t shape[IR_MAX_RANK];
  int64_t strides[IR_MAX_RANK]; /* elements */
};

/* One entry per ir_func parameter (f->params order, shape symbols included). */
struct interp_arg {
  struct interp_tensor tensor; /* IR_PARAM_TENSOR */
  ir_scalar scalar;            /* IR_PARAM_SCALAR and IR_PARAM_SHAPE */
};

/* Evaluates the grid block (values in a buffer from `alloc` when the kernel has more than
 * 256; NULL = libc); false when that allocation fails. Grid sizes below 0 are reported as
 * errors by the caller. */
bool interp_grid(const struct ir_func *f, const struct interp_arg *args, int64_t grid[3],
                 const struct tl_alloc *alloc);

/* Runs every program instance of the grid with up to `threads` host threads (0 = one per
 * core). Returns false only if memory for the interpreter's buffers cannot be obtained
 * (the message goes to err). */
bool interp_run(const struct ir_func *f, const struct interp_arg *args, const int64_t grid[3],
                int threads, const struct tl_alloc *alloc, struct strbuf *err);

/* Reads and writes one tensor element as a double (floats) or int64 (ints, bool). */
ir_scalar interp_load_elem(ir_dtype dt, const void *base, int64_t index);
void interp_store_elem(ir_dtype dt, void *base, int64_t index, ir_scalar v);

#endif
