/* layout.c - building linear layouts from encodings (see layout.h).
 *
 * BLOCKED follows Triton's definition: registers enumerate the size_per_thread block
 * (fastest dimension of `order` first), then lanes and warps tile the CTA tile in `order`;
 * a shape larger than the CTA tile gets more register bases (the tile repeats), and bases
 * that fall outside a smaller shape become zero (lanes and warps then replicate; register
 * bases that would only duplicate are dropped). SLICE builds its parent for the shape with
 * a size-1 dimension inserted and removes that dimension. MMA and DOT_OP give the
 * mma.sync m16n8k16 fragments (gpu-facts.md section 2) tiled over warps and repeated over
 * the shape.                                                                            */
#include "layout.h"

#include <string.h>

static void set_basis(int32_t *v, int rank, int dim, int32_t value) {
  memset(v, 0, sizeof(int32_t) * IR_MAX_RANK);
  (void)rank;
  v[dim] = value;
}

static bool add_reg(struct ll *l, int dim, int32_t value) {
  if (l->nreg == LL_MAX_REG_BITS) return false;
  set_basis(l->reg[l->nreg++], l->rank, dim, value);
  return true;
}

/* Zeroes basis components that reach beyond the shape; drops register bases that become
 * all-zero (they would only duplicate registers). */
static void clamp_to_shape(struct ll *l) {
  int32_t (*sets[3])[IR_MAX_RANK] = {l->reg, l->lane, l->warp};
  int counts[3] = {l->nreg, l->nlane, l->nwarp};
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < counts[s]; i++)
      for (int d = 0; d < l->rank; d++)
        if (sets[s][i][d] >= l->shape[d]) sets[s][i][d] = 0;
  int n = 0;
  for (int i = 0; i < l->nreg; i++) {
    bool zero = true;
    for (int d = 0; d < l->rank; d++) zero &= l->reg[i][d] == 0;
    if (!zero) memcpy(l->reg[n++], l->reg[i], sizeof l->reg[i]);
  }
  l->nreg = n;
}

/* Extends with register bases so that every dimension covers the shape: `covered[d]` is
 * the extent already spanned in dimension d; dimensions are extended in `order`. */
static bool repeat_to_shape(struct ll *l, const int32_t *covered, const uint8_t *order) {
  for (int oi = 0; oi < l->rank; oi++) {
    int d = order[oi];
    for (int32_t c = covered[d]; c < l->shape[d]; c *= 2)
      if (!add_reg(l, d, c)) return false;
  }
  return true;
}

static bool build_blocked(const struct ir_layout *e, struct ll *l, int warps) {
  int32_t ext[IR_MAX_RANK] = {0};
  int r = l->rank;
  if (e->rank != r) return false;
  unsigned seen = 0; /* the order must be a permutation of the dimensions (textual IR may say anything) */
  for (int oi = 0; oi < r; oi++) {
    unsigned d = e->order[oi];
    if (d >= (unsigned)r || (seen >> d & 1)) return false;
    seen |= 1u << d;
  }
  for (int d = 0; d < r; d++) ext[d] = 1;
  int tpw = 1, wpc = 1;
  for (int oi = 0; oi < r; oi++) {
    int d = e->order[oi];
    for (int b = 1; b < e->size_per_thread[d]; b *= 2)
      if (!add_reg(l, d, ext[d] * b)) return false;
    ext[d] *= e->size_per_thread[d];
  }
  for (int oi = 0; oi < r; oi++) {
    int d = e->order[oi];
    for (int b = 1; b < e->threads_per_warp[d]; b *= 2) {
      if (l->nlane == LL_LANE_BITS) return false;
      set_basis(l->lane[l->nlane++], r, d, ext[d] * b);
    }
    ext[d] *= e->threads_per_warp[d];
    tpw *= e->threads_per_warp[d];
  }
  for (int oi = 0; oi < r; oi++) {
    int d = e->order[oi];
    for (int b = 1; b < e->warps_per_cta[d]; b *= 2) {
      if (l->nwarp == LL_MAX_WARP_BITS) return false;
      set_basis(l->warp[l->nwarp++], r, d, ext[d] * b);
    }
    ext[d] *= e->warps_per_cta[d];
    wpc *= e->warps_per_cta[d];
  }
  if (tpw != 32 || wpc != warps) return false;
  if (!repeat_to_shape(l, ext, e->order)) return false;
  clamp_to_shape(l);
  return true;
}

/* mma.sync m16n8k16 accumulator: per warp a 16x8 tile; c0/c1 adjacent columns, c2/c3 eight
 * rows down; lane = 4*g + t holds row g, columns 2t, 2t+1. Register bits after the first
 * two repeat the tile along N, then along M; warps tile M first, then N. */
/* An mma layout's warp tiling must cover exactly the function's warps, in powers of two
 * (textual IR may say anything; the warp bases would overrun otherwise). */
static bool mma_warps_ok(const struct ir_layout *e, int warps) {
  int wm = e->warps_per_cta[0], wn = e->warps_per_cta[1];
  return wm > 0 && wn > 0 && !(wm & (wm - 1)) && !(wn & (wn - 1)) && wm * wn == warps;
}

/* The column step between warps along N: mma.sync's 8; a wgmma layout whose warpgroups
 * split N (wpc [4 * gm, gn], gn > 1) gives each warpgroup instr[1] whole columns. */
static int warp_n_step(const struct ir_layout *e) {
  return e->instr[0] == 64 && e->warps_per_cta[1] > 1 && e->instr[1] ? e->instr[1] : 8;
}

static bool build_mma(const struct ir_layout *e, struct ll *l, int warps) {
  int wm = e->warps_per_cta[0], wn = e->warps_per_cta[1], ns = warp_n_step(e);
  if (l->rank != 2 || !mma_warps_ok(e, warps)) return false;
  add_reg(l, 1, 1);
  add_reg(l, 0, 8);
  for (int c = 8; c < ns; c *= 2) /* a warpgroup's columns before the next warpgroup's */
    if (!add_reg(l, 1, c)) return false;
  const int32_t lanes[5][2] = {{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}};
  for (int i = 0; i < 5; i++) {
    l->lane[i][0] = lanes[i][0];
    l->lane[i][1] = lanes[i][1];
  }
  l->nlane = 5;
  for (int b = 1; b < wm; b *= 2) set_basis(l->warp[l->nwarp++], 2, 0, 16 * b);
  for (int b = 1; b < wn; b *= 2) set_basis(l->warp[l->nwarp++], 2, 1, ns * b);
  int32_t ext[2] = {16 * wm, ns * wn};
  const uint8_t order[2] = {1, 0};
  if (!repeat_to_shape(l, ext, order)) return false;
  clamp_to_shape(l);
  return true;
}

/* mma.sync operands. 16-bit elements (m16n8k16): A (16x16): a0 (g, 2t..2t+1), a1 (g+8, ..),
 * a2 (g, 2t+8..), a3 (g+8, 2t+8..): register bits k+1, row+8, k+8; lanes k+2, k+4, row+1,
 * row+2, row+4. B (16x8): b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g): register bits k+1,
 * k+8; lanes k+2, k+4, n+1, n+2, n+4. Repeats along k come first, then along M (A) or N
 * (B); warps follow the parent accumulator, replicated along the other dimension.
 * 32-bit elements (tf32, m16n8k8; k_width 1): A (16x8) a0 (g, t), a1 (g+8, t), a2 (g, t+4),
 * a3 (g+8, t+4); B (8x8) b0 (k t, n g), b1 (k t+4, n g). */
static bool build_dot_op(const struct ir_func *f, const struct ir_layout *e, struct ll *l, int warps) {
  if (e->parent == 0 || e->parent >= f->layouts.n) return false;
  const struct ir_layout *p = &f->layouts.v[e->parent];
  if (p->kind != IR_LAYOUT_MMA || l->rank != 2 || !mma_warps_ok(p, warps)) return false;
  int wm = p->warps_per_cta[0], wn = p->warps_per_cta[1];
  int32_t ext[2];
  uint8_t order[2];
  if (e->k_width == 1) { /* 32-bit elements (tf32, m16n8k8) */
    const int32_t la[5][2] = {{0, 1}, {0, 2}, {1, 0}, {2, 0}, {4, 0}}, lb[5][2] = {{1, 0}, {2, 0}, {0, 1}, {0, 2}, {0, 4}};
    if (e->op_idx == 0) {
      add_reg(l, 0, 8);
      add_reg(l, 1, 4);
      for (int i = 0; i < 5; i++) l->lane[i][0] = la[i][0], l->lane[i][1] = la[i][1];
      for (int b = 1; b < wm; b *= 2) set_basis(l->warp[l->nwarp++], 2, 0, 16 * b);
      for (int b = 1; b < wn; b *= 2) set_basis(l->warp[l->nwarp++], 2, 0, 0);
      ext[0] = 16 * wm, ext[1] = 8, order[0] = 1, order[1] = 0;
    } else {
      add_reg(l, 0, 4);
      for (int i = 0; i < 5; i++) l->lane[i][0] = lb[i][0], l->lane[i][1] = lb[i][1];
      for (int b = 1; b < wm; b *= 2) set_basis(l->warp[l->nwarp++], 2, 1, 0);
      for (int b = 1; b < wn; b *= 2) set_basis(l->warp[l->nwarp++], 2, 1, 8 * b);
      ext[0] = 8, ext[1] = 8 * wn, order[0] = 0, order[1] = 1;
    }
  } else if (e->op_idx == 0) {
    add_reg(l, 1, 1);
    add_reg(l, 0, 8);
    add_reg(l, 1, 8);
    const int32_t lanes[5][2] = {{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}};
    for (int i = 0; i < 5; i++) l->lane[i][0] = lanes[i][0], l->lane[i][1] = lanes[i][1];
    for (int b = 1; b < wm; b *= 2) set_basis(l->warp[l->nwarp++], 2, 0, 16 * b);
    for (int b = 1; b < wn; b *= 2) set_basis(l->warp[l->nwarp++], 2, 0, 0);
    ext[0] = 16 * wm;
    ext[1] = 16;
    order[0] = 1; /* k repeats first */
    order[1] = 0;
  } else {
    int ns = warp_n_step(p);
    add_reg(l, 0, 1);
    add_reg(l, 0, 8);
    for (int c = 8; c < ns; c *= 2)
      if (!add_reg(l, 1, c)) return false;
    const int32_t lanes[5][2] = {{2, 0}, {4, 0}, {0, 1}, {0, 2}, {0, 4}};
    for (int i = 0; i < 5; i++) l->lane[i][0] = lanes[i][0], l->lane[i][1] = lanes[i][1];
    for (int b = 1; b < wm; b *= 2) set_basis(l->warp[l->nwarp++], 2, 1, 0);
    for (int b = 1; b < wn; b *= 2) set_basis(l->warp[l->nwarp++], 2, 1, ns * b);
    ext[0] = 16;
    ext[1] = ns * wn;
    order[0] = 0;
    order[1] = 1;
  }
  l->nlane = 5;
  if (!repeat_to_shape(l, ext, order)) return false;
  clamp_to_shape(l);
  return true;
}

bool ll_build(const struct ir_func *f, uint32_t layout, int rank, const int32_t *shape, int warps,
              struct ll *out) {
  memset(out, 0, sizeof *out);
  out->rank = rank;
  for (int d = 0; d < rank; d++) out->shape[d] = shape[d];
  if (rank == 0) return true;
  if (layout == 0 || layout >= f->layouts.n) return false;
  const struct ir_layout *e = &f->layouts.v[layout];
  switch (e->kind) {
  case IR_LAYOUT_BLOCKED:
    return build_blocked(e, out, warps);
  case IR_LAYOUT_MMA:
    return build_mma(e, out, warps);
  case IR_LAYOUT_DOT_OP:
    return build_dot_op(f, e, out, warps);
  case IR_LAYOUT_SLICE: {
    int32_t pshape[IR_MAX_RANK];
    int dim = e->dim;
    if (dim < 0 || dim > rank || rank + 1 > IR_MAX_RANK) return false;
    for (int d = 0, j = 0; d <= rank; d++) pshape[d] = d == dim ? 1 : shape[j++];
    struct ll parent;
    if (!ll_build(f, e->parent, rank + 1, pshape, warps, &parent)) return false;
    /* drop dimension `dim` from every basis (its components are already zero) */
    out->nreg = parent.nreg;
    out->nlane = parent.nlane;
    out->nwarp = parent.nwarp;
    int32_t (*src[3])[IR_MAX_RANK] = {parent.reg, parent.lane, parent.warp};
    int32_t (*dst[3])[IR_MAX_RANK] = {out->reg, out->lane, out->warp};
    int counts[3] = {parent.nreg, parent.nlane, parent.nwarp};
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++)
        for (int d = 0, j = 0; d <= rank; d++)
          if (d != dim) dst[s][i][j++] = src[s][i][d];
    return true;
  }
  default:
    return false;
  }
}

bool ll_of_type(const struct ir_func *f, const struct ir_type *t, int warps, struct ll *out) {
  return ll_build(f, t->layout, t->rank, t->dims, warps, out);
}

void ll_reg_coord(const struct ll *l, uint32_t r, int32_t *coord) {
  for (int d = 0; d < IR_MAX_RANK; d++) coord[d] = 0;
  for (int b = 0; b < l->nreg; b++)
    if (r >> b & 1)
      for (int d = 0; d < l->rank; d++) coord[d] ^= l->reg[b][d];
}

int ll_reg_at(const struct ll *l, int32_t a, int32_t b) {
  for (uint32_t r = 0; r < ll_num_regs(l); r++) {
    int32_t c[IR_MAX_RANK];
    ll_reg_coord(l, r, c);
    if (c[0] == a && c[1] == b) return (int)r;
  }
  return -1;
}

int64_t ll_linear(const struct ll *l, const int32_t *coord) {
  int64_t idx = 0;
  for (int d = 0; d < l->rank; d++) idx = idx * l->shape[d] + coord[d];
  return idx;
}

struct ir_layout ll_default_blocked(int rank, const int32_t *shape, int warps, int elem_bytes) {
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_BLOCKED;
  l.rank = (uint8_t)rank;
  for (int d = 0; d < rank; d++) {
    l.order[d] = (uint8_t)(rank - 1 - d);
    l.size_per_thread[d] = l.threads_per_warp[d] = l.warps_per_cta[d] = 1;
  }
  if (rank == 0) return l;
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= shape[d];
  int last = rank - 1;
  int64_t per_thread = numel / (32 * warps);
  int vec = 16 / (elem_bytes > 0 ? elem_bytes : 4);
  while (vec > 1 && (vec > shape[last] || vec > per_thread)) vec /= 2;
  l.size_per_thread[last] = (uint8_t)vec;
  /* lanes: fastest dimension first, each up to its remaining extent */
  int lanes = 32;
  for (int oi = 0; oi < rank && lanes > 1; oi++) {
    int d = l.order[oi];
    int room = shape[d] / l.size_per_thread[d];
    while (lanes > 1 && l.threads_per_warp[d] * 2 <= room) {
      l.threads_per_warp[d] *= 2;
      lanes /= 2;
    }
  }
  l.threads_per_warp[l.order[rank - 1]] *= (uint8_t)lanes; /* the rest replicate, slowest dim */
  /* warps: slowest dimension first */
  int w = warps;
  for (int d = 0; d < rank && w > 1; d++) {
    int room = shape[d] / (l.size_per_thread[d] * l.threads_per_warp[d]);
    while (w > 1 && l.warps_per_cta[d] * 2 <= room) {
      l.warps_per_cta[d] *= 2;
      w /= 2;
    }
  }
  l.warps_per_cta[l.order[rank - 1]] *= (uint8_t)w;
  return l;
}

struct ir_layout ll_expand_blocked(const struct ir_layout *l, int axis) {
  struct ir_layout r = *l;
  int rank = l->rank;
  for (int d = rank; d > axis; d--) {
    r.size_per_thread[d] = l->size_per_thread[d - 1];
    r.threads_per_warp[d] = l->threads_per_warp[d - 1];
    r.warps_per_cta[d] = l->warps_per_cta[d - 1];
  }
  r.size_per_thread[axis] = r.threads_per_warp[axis] = r.warps_per_cta[axis] = 1;
  /* the new dimension is the slowest in the order */
  for (int i = 0; i < rank; i++) r.order[i] = (uint8_t)(l->order[i] >= axis ? l->order[i] + 1 : l->order[i]);
  r.order[rank] = (uint8_t)axis;
  r.rank = (uint8_t)(rank + 1);
  return r;
}

struct ir_layout ll_trans_blocked(const struct ir_layout *l) {
  struct ir_layout r = *l;
  r.size_per_thread[0] = l->size_per_thread[1];
  r.size_per_thread[1] = l->size_per_thread[0];
  r.threads_per_warp[0] = l->threads_per_warp[1];
  r.threads_per_warp[1] = l->threads_per_warp[0];
  r.warps_per_cta[0] = l->warps_per_cta[1];
  r.warps_per_cta[1] = l->warps_per_cta[0];
  r.order[0] = (uint8_t)(1 - l->order[0]);
  r.order[1] = (uint8_t)(1 - l->order[1]);
  return r;
}

static bool same_vec(const int32_t *a, const int32_t *b, int rank) {
  for (int d = 0; d < rank; d++)
    if (a[d] != b[d]) return false;
  return true;
}

bool ll_same_threads(const struct ll *a, const struct ll *b) {
  if (a->rank != b->rank || a->nlane != b->nlane || a->nwarp != b->nwarp) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return false;
  for (int i = 0; i < a->nlane; i++)
    if (!same_vec(a->lane[i], b->lane[i], a->rank)) return false;
  for (int i = 0; i < a->nwarp; i++)
    if (!same_vec(a->warp[i], b->warp[i], a->rank)) return false;
  return true;
}

static void project(const struct ll *src, const int32_t *c, int32_t *out) {
  for (int d = 0; d < IR_MAX_RANK; d++) out[d] = d < src->rank && src->shape[d] == 1 ? 0 : c[d];
}

bool ll_register_map(const struct ll *dst, const struct ll *src, uint32_t *map) {
  if (dst->rank != src->rank) return false;
  for (int d = 0; d < dst->rank; d++)
    if (src->shape[d] != dst->shape[d] && src->shape[d] != 1) return false;
  /* thread parts must agree after projecting src's broadcast dimensions; bases beyond the
   * counts are zero */
  int32_t p[IR_MAX_RANK];
  for (int i = 0; i < LL_LANE_BITS; i++) {
    static const int32_t zero[IR_MAX_RANK] = {0};
    const int32_t *dv = i < dst->nlane ? dst->lane[i] : zero;
    const int32_t *sv = i < src->nlane ? src->lane[i] : zero;
    project(src, dv, p);
    if (!same_vec(p, sv, dst->rank)) return false;
  }
  for (int i = 0; i < LL_MAX_WARP_BITS; i++) {
    static const int32_t zero[IR_MAX_RANK] = {0};
    const int32_t *dv = i < dst->nwarp ? dst->warp[i] : zero;
    const int32_t *sv = i < src->nwarp ? src->warp[i] : zero;
    project(src, dv, p);
    if (!same_vec(p, sv, dst->rank)) return false;
  }
  uint32_t ns = ll_num_regs(src), nd = ll_num_regs(dst);
  int32_t c[IR_MAX_RANK], q[IR_MAX_RANK];
  for (uint32_t r = 0; r < nd; r++) {
    ll_reg_coord(dst, r, c);
    project(src, c, p);
    bool found = false;
    for (uint32_t s = 0; s < ns && !found; s++) {
      ll_reg_coord(src, s, q);
      if (same_vec(p, q, dst->rank)) {
        map[r] = s;
        found = true;
      }
    }
    if (!found) return false;
  }
  return true;
}

static void print_set(struct strbuf *sb, const char *name, int32_t (*v)[IR_MAX_RANK], int n, int rank) {
  sb_printf(sb, " %s=[", name);
  for (int i = 0; i < n; i++) {
    sb_puts(sb, i ? ", (" : "(");
    for (int d = 0; d < rank; d++) sb_printf(sb, "%s%d", d ? "," : "", v[i][d]);
    sb_puts(sb, ")");
  }
  sb_puts(sb, "]");
}

void ll_print(struct strbuf *sb, const struct ll *l) {
  sb_puts(sb, "ll<shape=[");
  for (int d = 0; d < l->rank; d++) sb_printf(sb, "%s%d", d ? "," : "", l->shape[d]);
  sb_puts(sb, "]");
  print_set(sb, "reg", (int32_t(*)[IR_MAX_RANK])l->reg, l->nreg, l->rank);
  print_set(sb, "lane", (int32_t(*)[IR_MAX_RANK])l->lane, l->nlane, l->rank);
  print_set(sb, "warp", (int32_t(*)[IR_MAX_RANK])l->warp, l->nwarp, l->rank);
  sb_puts(sb, ">");
}

struct ir_layout ll_permute_blocked(const struct ir_layout *l, const int *perm) {
  struct ir_layout r = *l;
  int inv[IR_MAX_RANK] = {0};
  for (int i = 0; i < l->rank; i++) {
    r.size_per_thread[i] = l->size_per_thread[perm[i]];
    r.threads_per_warp[i] = l->threads_per_warp[perm[i]];
    r.warps_per_cta[i] = l->warps_per_cta[perm[i]];
    inv[perm[i]] = i;
  }
  for (int k = 0; k < l->rank; k++) r.order[k] = (uint8_t)inv[l->order[k]];
  return r;
}

/* ---- shape ops ---- */

static int log2i(int64_t x) {
  int b = 0;
  while (x > 1) x >>= 1, b++;
  return b;
}

/* A basis vector of shape `from` as the vector of shape `to` with the same row-major
 * index. Dimensions are powers of two, so each dimension owns its own bits of the index
 * and the map is XOR-linear: mapping the bases maps every coordinate. */
static void reshape_vec(const int32_t *v, const struct ll *from, int rank, const int32_t *shape, int32_t *out) {
  int64_t flat = 0;
  for (int d = 0; d < from->rank; d++) flat = flat * from->shape[d] + v[d];
  for (int d = rank; d-- > 0;) {
    out[d] = (int32_t)(flat % shape[d]);
    flat /= shape[d];
  }
  for (int d = rank; d < IR_MAX_RANK; d++) out[d] = 0;
}

bool ll_shape_view(int code, int64_t attr, const struct ll *src, int rank, const int32_t *shape, struct ll *view,
                   uint32_t *src_reg) {
  memset(view, 0, sizeof *view);
  view->rank = rank;
  for (int d = 0; d < rank; d++) view->shape[d] = shape[d];
  view->nreg = src->nreg;
  view->nlane = src->nlane;
  view->nwarp = src->nwarp;
  const int32_t (*in[3])[IR_MAX_RANK] = {src->reg, src->lane, src->warp};
  int32_t (*out[3])[IR_MAX_RANK] = {view->reg, view->lane, view->warp};
  int counts[3] = {src->nreg, src->nlane, src->nwarp};
  uint32_t n = ll_num_regs(src);
  switch (code) {
  case IR_RESHAPE:
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++) reshape_vec(in[s][i], src, rank, shape, out[s][i]);
    break;
  case IR_PERMUTE: {
    int perm[IR_MAX_RANK];
    if (!ir_perm_decode(attr, src->rank, perm) || rank != src->rank) return false;
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++)
        for (int d = 0; d < rank; d++) out[s][i][d] = in[s][i][perm[d]];
    break;
  }
  case IR_JOIN:
    /* the operand's bases with a 0 in the new dimension, then a register bit selecting b */
    if (rank != src->rank + 1 || src->nreg == LL_MAX_REG_BITS) return false;
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++) {
        memcpy(out[s][i], in[s][i], sizeof(int32_t) * IR_MAX_RANK);
        out[s][i][rank - 1] = 0;
      }
    set_basis(view->reg[view->nreg++], rank, rank - 1, 1);
    n *= 2; /* registers [n, 2n) of the view are b's */
    break;
  case IR_SPLIT: {
    /* exactly one basis may move along the last dimension (of size 2): a register bit
     * with no other component, which the split fixes to `half` */
    int last = src->rank - 1, bit = -1;
    if (rank != src->rank - 1) return false;
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < counts[s]; i++) {
        if (!in[s][i][last]) continue;
        bool unit = s == 0 && bit < 0;
        for (int d = 0; d < last; d++) unit &= in[s][i][d] == 0;
        if (!unit) return false;
        bit = i;
      }
    if (bit < 0) return false; /* the operand's last dimension is not 2 */
    for (int s = 0; s < 3; s++) {
      int k = 0;
      for (int i = 0; i < counts[s]; i++) {
        if (s == 0 && i == bit) continue;
        memcpy(out[s][k], in[s][i], sizeof(int32_t) * IR_MAX_RANK);
        out[s][k++][last] = 0;
      }
    }
    view->nreg--;
    if (src_reg) {
      uint32_t low = (1u << bit) - 1, half = attr ? 1u << bit : 0;
      for (uint32_t v = 0; v < n / 2; v++) src_reg[v] = ((v & ~low) << 1) | half | (v & low);
    }
    return true;
  }
  default:
    return false;
  }
  if (src_reg)
    for (uint32_t v = 0; v < n; v++) src_reg[v] = v;
  return true;
}

static bool same_basis_set(const int32_t (*a)[IR_MAX_RANK], int na, const int32_t (*b)[IR_MAX_RANK], int nb, int rank) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++) {
    bool found = false;
    for (int j = 0; j < nb && !found; j++) found = same_vec(a[i], b[j], rank);
    if (!found) return false;
  }
  return true;
}

bool ll_fit_blocked(const struct ll *l, int warps, struct ir_layout *out) {
  int rank = l->rank;
  if (rank < 1 || warps < 1) return false;
  /* per dimension, the kind of basis that moves along each bit, lowest bit first: the
   * registers of a thread's block, then lanes, then warps, then repeated registers */
  int spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK], lanes = 0, wbits = 0;
  const int32_t (*sets[3])[IR_MAX_RANK] = {l->reg, l->lane, l->warp};
  int counts[3] = {l->nreg, l->nlane, l->nwarp};
  for (int d = 0; d < rank; d++) {
    int stage = 0, n[3] = {0, 0, 0};
    for (int32_t v = 1; v < l->shape[d]; v *= 2) {
      int kind = -1;
      for (int s = 0; s < 3; s++)
        for (int i = 0; i < counts[s]; i++) {
          bool unit = l->shape[d] > 1 && sets[s][i][d] == v;
          for (int e = 0; e < rank && unit; e++) unit = e == d || sets[s][i][e] == 0;
          if (unit) {
            if (kind >= 0) return false; /* two bases for one bit */
            kind = s;
          }
        }
      if (kind < 0) return false; /* a bit no single basis moves along */
      /* stages: 0 block registers, 1 lanes, 2 warps, 3 repeated registers */
      int want = kind == 0 ? (stage == 0 ? 0 : 3) : kind;
      if (want < stage) return false;
      stage = want;
      if (stage < 3) n[stage]++;
    }
    spt[d] = 1 << n[0];
    tpw[d] = 1 << n[1];
    wpc[d] = 1 << n[2];
    lanes += n[1];
    wbits += n[2];
    if (spt[d] > 128) return false; /* does not fit the encoding's byte */
  }
  int lane_excess = LL_LANE_BITS - lanes, warp_excess = log2i(warps) - wbits;
  if (lane_excess < 0 || warp_excess < 0 || (1 << log2i(warps)) != warps) return false;
  /* dimension orders, the row-major one first: perm k of the dims listed slowest first */
  int fact = 1;
  for (int i = 2; i <= rank; i++) fact *= i;
  for (int k = 0; k < fact; k++) {
    int pool[IR_MAX_RANK], order[IR_MAX_RANK], np = rank, code = k;
    for (int i = 0; i < rank; i++) pool[i] = rank - 1 - i;
    for (int i = 0, f = fact; i < rank; i++) {
      f /= rank - i;
      int pick = code / f;
      code %= f;
      order[i] = pool[pick];
      memmove(pool + pick, pool + pick + 1, sizeof(int) * (size_t)(np - pick - 1));
      np--;
    }
    for (int el = 0; el < rank; el++)
      for (int ew = 0; ew < rank; ew++) {
        struct ir_layout e = {0};
        e.kind = IR_LAYOUT_BLOCKED;
        e.rank = (uint8_t)rank;
        for (int d = 0; d < rank; d++) {
          e.size_per_thread[d] = (uint8_t)spt[d];
          e.threads_per_warp[d] = (uint8_t)(tpw[d] << (d == el ? lane_excess : 0));
          e.warps_per_cta[d] = (uint8_t)(wpc[d] << (d == ew ? warp_excess : 0));
          e.order[d] = (uint8_t)order[d];
        }
        struct ll b;
        memset(&b, 0, sizeof b);
        b.rank = rank;
        memcpy(b.shape, l->shape, sizeof b.shape);
        if (!build_blocked(&e, &b, warps)) continue;
        if (!ll_same_threads(&b, l)) continue;
        if (!same_basis_set((const int32_t(*)[IR_MAX_RANK])b.reg, b.nreg, l->reg, l->nreg, rank)) continue;
        *out = e;
        return true;
      }
  }
  return false;
}

struct ir_layout ll_flat_blocked(int rank, const int32_t *shape, int warps, int reg_bits) {
  struct ir_layout e = {0};
  e.kind = IR_LAYOUT_BLOCKED;
  e.rank = (uint8_t)rank;
  int lo = 0, lane_lo = reg_bits, warp_lo = reg_bits + LL_LANE_BITS, warp_hi = warp_lo + log2i(warps);
  int lanes = 0, wbits = 0;
  for (int d = rank; d-- > 0;) { /* the last dimension owns the lowest bits */
    int hi = lo + log2i(shape[d]);
    int r = TL_MAX(0, TL_MIN(hi, lane_lo) - lo);
    int t = TL_MAX(0, TL_MIN(hi, warp_lo) - TL_MAX(lo, lane_lo));
    int w = TL_MAX(0, TL_MIN(hi, warp_hi) - TL_MAX(lo, warp_lo));
    e.size_per_thread[d] = (uint8_t)(1 << r);
    e.threads_per_warp[d] = (uint8_t)(1 << t);
    e.warps_per_cta[d] = (uint8_t)(1 << w);
    e.order[rank - 1 - d] = (uint8_t)d;
    lanes += t;
    wbits += w;
    lo = hi;
  }
  /* lanes and warps beyond the tile replicate along the slowest dimension, whose bits are
   * the highest: their bases fall outside the shape and become zero, last in the order */
  e.threads_per_warp[0] = (uint8_t)(e.threads_per_warp[0] << (LL_LANE_BITS - lanes));
  e.warps_per_cta[0] = (uint8_t)(e.warps_per_cta[0] << (log2i(warps) - wbits));
  return e;
}
