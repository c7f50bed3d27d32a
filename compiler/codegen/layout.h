/* layout.h - linear layouts: which register of which lane of which warp holds which tile
 * element, derived from a layout encoding (ir.h) for one shape and warp count.
 *
 * A linear layout maps the bits of (register, lane, warp) to coordinates: the coordinate of
 * register r in lane l of warp w is the XOR of the basis vectors of the set bits of r, l
 * and w (Triton's LinearLayout). For the distributed layouts used here every basis vector
 * is zero (replication) or a power of two in one dimension, so XOR equals addition and the
 * register part of a coordinate can be added to the thread part: coord(r, l, w) =
 * reg_coord(r) + thread_coord(l, w). Codegen relies on that split: register coordinates
 * are compile-time constants, thread coordinates are computed once per kernel.          */
#ifndef TL_LAYOUT_H
#define TL_LAYOUT_H

#include "ir.h"

enum { LL_MAX_REG_BITS = 16, LL_LANE_BITS = 5, LL_MAX_WARP_BITS = 5 };

struct ll {
  int rank;
  int32_t shape[IR_MAX_RANK];
  int nreg, nlane, nwarp; /* number of basis vectors (bits) */
  int32_t reg[LL_MAX_REG_BITS][IR_MAX_RANK];
  int32_t lane[LL_LANE_BITS][IR_MAX_RANK];
  int32_t warp[LL_MAX_WARP_BITS][IR_MAX_RANK];
};

/* Builds the linear layout of encoding `layout` (an index into f->layouts) for a tile of
 * the given shape with `warps` warps. Rank-0 tiles (scalars) have no bases: every thread
 * holds the value. Returns false if the encoding cannot describe the shape. */
bool ll_build(const struct ir_func *f, uint32_t layout, int rank, const int32_t *shape, int warps,
              struct ll *out);
/* The same for a value's type. */
bool ll_of_type(const struct ir_func *f, const struct ir_type *t, int warps, struct ll *out);

static inline uint32_t ll_num_regs(const struct ll *l) { return 1u << l->nreg; }

/* Coordinates contributed by register index r alone (lane 0, warp 0). */
void ll_reg_coord(const struct ll *l, uint32_t r, int32_t *coord);
/* Index of the register of a rank-2 layout whose coordinate (register part) is (a, b), or -1. */
int ll_reg_at(const struct ll *l, int32_t a, int32_t b);
/* Linear (row-major) element index of a coordinate within the shape. */
int64_t ll_linear(const struct ll *l, const int32_t *coord);

/* The default blocked encoding for a tile shape: elements contiguous along the last
 * dimension (up to 16 bytes per thread), lanes fastest along the last dimension, warps
 * along the first, so row reductions stay within a warp where possible. */
struct ir_layout ll_default_blocked(int rank, const int32_t *shape, int warps, int elem_bytes);

/* Encoding transformations that keep the element-to-thread assignment compatible:
 * expand_dims inserts a size-1 dimension; trans swaps a 2-d blocked encoding. */
struct ir_layout ll_expand_blocked(const struct ir_layout *l, int axis);
struct ir_layout ll_trans_blocked(const struct ir_layout *l);

/* permute of a blocked encoding: result dimension i takes operand dimension perm[i]'s
 * sizes; the same threads hold the same elements (trans is perm [1, 0]). */
struct ir_layout ll_permute_blocked(const struct ir_layout *l, const int *perm);

/* ---- shape ops: reshape, permute, join, split ----
 * These ops move no data: the result holds the operand's elements at relabeled coordinates
 * (reshape: the same row-major index; permute: permuted coordinates; join: a new last
 * coordinate, 0 for a and 1 for b; split: the last coordinate dropped). */

/* The operand's layout `src` relabeled onto the result shape (rank, shape): every register,
 * lane and warp of `view` holds the element the same register, lane and warp holds in src.
 * join: view registers [n, 2n) (a top register bit) are b's, [0, n) a's; split {half}:
 * the register bit that selects the half is dropped. src_reg (room for 2 * the operand's
 * registers, or NULL): the operand register of each view register (join: n + i for b's
 * register i). False when the op cannot relabel src: a split whose half is selected by a
 * lane or warp bit (the two halves live in different threads), or too many registers. */
bool ll_shape_view(int code, int64_t attr, const struct ll *src, int rank, const int32_t *shape, struct ll *view,
                   uint32_t *src_reg);
/* A blocked encoding whose layout for l's shape and `warps` puts every element in the same
 * lane and warp as l, with the same register coordinates (numbered perhaps differently), if
 * one exists; found by trying each dimension order and where the lanes and warps beyond
 * the shape replicate. */
bool ll_fit_blocked(const struct ll *l, int warps, struct ir_layout *out);
/* The "flat" blocked encoding for a shape: the row-major element index's lowest reg_bits
 * bits select a thread's register, the next 5 its lane, the next log2(warps) its warp and
 * the rest further registers. It depends only on the row-major index, so a reshape of it
 * is the flat encoding of the new shape, a join the flat encoding with reg_bits + 1 and a
 * split (reg_bits >= 1) the one with reg_bits - 1: every shape op has an operand layout
 * that it relabels to a blocked one. */
struct ir_layout ll_flat_blocked(int rank, const int32_t *shape, int warps, int reg_bits);

/* True when two layouts of the same shape hold each element in the same lanes and warps
 * (only the register numbering may differ): converting between them needs no data movement
 * between threads. */
bool ll_same_threads(const struct ll *a, const struct ll *b);

/* For `dst` and `src` of the same thread mapping (up to broadcast along dimensions where
 * src has size 1): map[r] = the src register holding the element of dst register r.
 * Returns false when some element is not in the same thread. */
bool ll_register_map(const struct ll *dst, const struct ll *src, uint32_t *map);

void ll_print(struct strbuf *sb, const struct ll *l);

#endif
