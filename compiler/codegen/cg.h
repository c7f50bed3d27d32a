/* cg.h - Tile IR (after layout assignment) to LLVM IR through the LLVM C API, then PTX
 * through LLVM's NVPTX backend.
 *
 * Kernel parameter convention (the runtime packs arguments in exactly this order): for
 * each ir_func parameter in table order,
 *   tensor: a global pointer (8 bytes), then one i64 stride per dimension, in elements;
 *   scalar: i32 for bool and i32, i64 for i64, f32 for f16/bf16/f32, f64 for f64;
 *   shape:  i32;
 * then one 128-byte CUtensorMap (byval, 64-byte aligned, grid constant) per tma_desc op,
 * described in cg_result.tmaps.
 * The kernel uses dynamic shared memory only; its size is returned in cg_result.        */
#ifndef TL_CG_H
#define TL_CG_H

#include "ir.h"

enum cg_output { CG_OUT_LLVM, CG_OUT_PTX };

/* A TMA tensor map the kernel takes as a hidden parameter (after the regular ones, in this
 * order): the runtime encodes it for the bound tensor at launch. */
struct cg_tmap {
  uint32_t param;          /* index in ir_func.params of the tensor */
  int rank;
  int dtype;               /* ir_dtype */
  uint32_t box[IR_MAX_RANK]; /* box dims, tensor order (outermost first) */
  int swizzle;             /* bytes: 0 (none), 32, 64 or 128 */
  int flat;                /* 1: a 1-d map over the tensor's elements from its base to its
                            * last (tma_desc {flat=1}), box[rank - 1] wide */
};
enum { CG_MAX_TMAPS = 8 };

/* persistent=2: a walk only for grids of CG_WALK_MIN_WAVES to CG_FEW_WAVES waves (PERF.md
 * 62, 65); with fewer tiles per program the static order cannot even out tiles whose work
 * repeats with a block index (a causal mask's), with more the walk's imbalance grows */
enum { CG_FEW_WAVES = 8, CG_WALK_MIN_WAVES = 4 };
/* ...and only for tiles of at most CG_WALK_MAX_TRIPS steps (the long_tiles fact): the walk
 * saves a tile's fixed cost, which longer tiles amortize themselves, while its static order
 * loses the hardware's dynamic start of each tile (PERF.md 91: attention forward hd128
 * causal at 8 and 16 key blocks per tile gains from the walk, at 32 loses; the fused
 * backward at 32-64 query blocks per tile loses 7-9%) */
enum { CG_WALK_MAX_TRIPS = 16 };

struct cg_result {
  const char *text; /* LLVM IR or PTX, NUL-terminated, in the caller's arena */
  size_t len;
  struct cg_tmap tmaps[CG_MAX_TMAPS];
  unsigned ntmaps;
  uint8_t persistent;    /* the grid is sized by the runtime (ir_func.persistent): 1 as many
                          * programs as fit at once; 2 so only when the tiles are
                          * CG_WALK_MIN_WAVES to CG_FEW_WAVES times that many (or fewer
                          * than that many), one program per tile otherwise */
  bool grid_dep;         /* launched with programmatic stream serialization (grid-dep pass) */
  uint8_t cluster;       /* > 1: each program is a cluster of this many CTAs (ir_func.cluster):
                          * the launch's grid x is the programs times it */
  bool whole_program;    /* must be compiled as a whole program, not linked: setmaxnreg is
                            ignored in relocatable code (ptxas -c, cuLink: C7504) */
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
