/* cg.h - Tile IR (after layout assignment) to LLVM IR through the LLVM C API, then PTX
 * through LLVM's NVPTX backend.
 *
 * Kernel parameter convention (the runtime packs arguments in exactly this order): for
 * each ir_func parameter in table order,
 *   tensor: a global pointer (8 bytes), then one i64 stride per dimension, in elements;
 *   scalar: i32 for bool and i32, i64 for i64, f32 for f16/bf16/f32, f64 for f64;
 *   shape:  i32.
 * The kernel uses dynamic shared memory only; its size is returned in cg_result.        */
#ifndef TL_CG_H
#define TL_CG_H

#include "ir.h"

enum cg_output { CG_OUT_LLVM, CG_OUT_PTX };

struct cg_result {
  const char *text; /* LLVM IR or PTX, NUL-terminated, in the caller's arena */
  size_t len;
  unsigned threads;      /* threads per program instance */
  unsigned smem_bytes;   /* dynamic shared memory per program instance */
  double llvm_ms;        /* building the LLVM module and running O3 */
  double emit_ms;        /* NVPTX instruction selection and PTX printing */
};

/* Compiles one kernel of GPU IR (for f->target). On failure returns false with a message in
 * err (never aborts on user input; an LLVM verifier failure is an internal error). */
bool cg_compile(struct ir_func *f, enum cg_output out, struct arena *a, struct cg_result *res,
                struct strbuf *err);

/* Size in bytes of a scalar parameter as passed to the kernel (see the convention). */
int cg_scalar_param_bytes(ir_dtype dt);

#endif
