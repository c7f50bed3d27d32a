/* cluster_rows.c - a row too long for one CTA's registers is split across a cluster.
 *
 * A row kernel written the obvious way holds its row in one tile: `let x = X[row, 0 : +BN]`
 * with BN the row length rounded up, reductions of it, elementwise work, a store. The row
 * is then read once, which is what reaching the copy bandwidth needs; but a vocabulary row
 * (50257 f16, BN = 65536) would take 128 f32 registers per thread of even 16 warps, and
 * the looped form that fits instead reads the row twice (PERF.md 100-102). On targets with
 * thread-block clusters (sm_90) the program can run as C CTAs of one cluster instead, each
 * holding BN / C of the row's elements, and combine the reductions through distributed
 * shared memory: the row is read once and held in registers across C multiprocessors.
 *
 * Needs: generic IR (before layout), after row-align and row-reverse.
 *
 * Guarantees: on a target with clusters, when every tile of the function is 1-d and BN
 * long (one row), the ops that touch tiles are constants, splats, aranges, elementwise ops,
 * loads and stores of 1-d slices (`T[..., s : +BN]`), full reductions of 32-bit elements
 * (sum, max, min: reduce_* to a scalar) outside loops, loops and ifs; nothing is written
 * but plain stores (no atomics: a scalar the C CTAs all hold is stored C times, which a
 * plain store of one value allows and an atomic does not); and no num_programs along x;
 * and a tile would hold more than 64 elements per thread (more than the occupancy pass
 * lets four programs of a multiprocessor keep), or the schedule asks for cluster=C:
 *   - f->cluster = C, the smallest power of two (at most 8, the portable cluster size)
 *     that brings the tiles to 16 elements per thread or fewer (cluster=C in the schedule
 *     forces C; cluster=1 turns the pass off);
 *   - every tile becomes BN / C long: the CTA of rank r (cluster_rank) holds elements
 *     r * BN / C .. (r + 1) * BN / C - 1 of each, so a slice `T[..., s : +BN]` becomes
 *     `T[..., s + r * BN / C : +BN / C]` (alignment kept: BN / C elements are a multiple of
 *     16 bytes) and `arange(BN)` becomes `r * BN / C + arange(BN / C)`;
 *   - each reduction is followed by `cluster_reduce` of its (now partial) result, which
 *     combines the C CTAs' values, so every scalar is again the same in every CTA;
 *   - program_id along x stays the program's index: codegen reads the cluster's index,
 *     and the runtime launches C CTAs per program (grid x times C, cluster dims C x 1 x 1).
 * Masking is by element position, as before: the elements past the row's end in the
 * last CTAs read `fill` and are not written. */
#include <string.h>

#include "passes.h"

enum { MAX_CLUSTER = 8, SPLIT_ABOVE = 64, SPLIT_TO = 16 };

struct rows {
  int64_t bn;  /* the row tiles' length */
  bool ok;
};

/* Whether value v's type is acceptable (a scalar, a tensor, or a 1-d tile BN long). */
static void check_type(const struct ir_func *f, ir_val v, struct rows *R) {
  const struct ir_type *t = ir_vtype(f, v);
  if (t->kind != IR_TY_TILE || t->rank == 0) return;
  if (t->rank != 1) {
    R->ok = false;
    return;
  }
  if (!R->bn) R->bn = t->dims[0];
  if (t->dims[0] != R->bn) R->ok = false;
}

/* Whether the function's body qualifies (see the top); R->bn is its row length. */
static bool qualifies(const struct ir_func *f, struct rows *R) {
  R->bn = 0, R->ok = true;
  for (uint32_t i = 1; i < f->ops.n && R->ok; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->block == IR_GRID_BLOCK) continue;
    for (uint32_t k = 0; k < op->nargs; k++) check_type(f, op->args[k], R);
    for (uint32_t k = 0; k < op->nres; k++) check_type(f, op->res + k, R);
    uint16_t c = op->code;
    if (c == IR_NUM_PROGRAMS && op->i[0] == 0) return false;
    if ((ir_ops[c].flags & (OPF_WRITE | OPF_GPU)) && c != IR_STORE) return false;
    if (c == IR_REDUCE_SUM || c == IR_REDUCE_MAX || c == IR_REDUCE_MIN) {
      const struct ir_type *r = ir_vtype(f, op->res);
      if (!ir_type_is_scalar(r) || (r->dtype != DT_F32 && r->dtype != DT_I32 && r->dtype != DT_U32) ||
          ir_op_in_loop(f, i))
        return false;
      continue;
    }
    if (c == IR_LOAD || c == IR_STORE) {
      if (!ir_op_has_tile(f, op)) continue; /* a scalar access: each CTA makes it */
      if (__builtin_popcountll((uint64_t)op->i[0]) != 1) return false;
      continue;
    }
    if (!ir_op_has_tile(f, op)) continue;
    if (!row_body_op(c) && c != IR_FOR && c != IR_IF && c != IR_YIELD) return false;
  }
  /* block arguments (loop-carried tiles) have their inits' types */
  return R->ok && R->bn > 0;
}

/* The widest element of the row tiles' loads and stores, in bytes (for the alignment of
 * a CTA's share of a slice). */
static int widest_access(const struct ir_func *f) {
  int eb = 1;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || (op->code != IR_LOAD && op->code != IR_STORE)) continue;
    int b = ir_dtype_bytes((ir_dtype)ir_vtype(f, op->args[0])->dtype);
    if (b > eb) eb = b;
  }
  return eb;
}

/* The cluster size for rows of bn elements over `threads` threads (1: no split). */
static int cluster_size(const struct ir_func *f, int64_t bn, int threads, int eb) {
  int want = f->sched.cluster;
  if (want == 1) return 1;
  if (want > 1) return bn % want == 0 && bn / want >= threads && (bn / want) * eb % 16 == 0 ? want : 1;
  if (bn / threads <= SPLIT_ABOVE) return 1;
  int c = 2;
  while (c < MAX_CLUSTER && bn / ((int64_t)c * threads) > SPLIT_TO) c *= 2;
  return bn % c == 0 && (bn / c) * eb % 16 == 0 ? c : 1;
}

int cluster_rows_size(const struct ir_func *f, int64_t bn) {
  if (!tl_has(f->target, TL_FEAT_CLUSTER)) return 1;
  return cluster_size(f, bn, ir_func_threads(f), widest_access(f));
}

static void split(struct ir_func *f, int64_t bn, int C) {
  int64_t share = bn / C;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  struct ir_builder b;
  const struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  if (body->ops.n) ir_builder_before(&b, f, body->ops.v[0]);
  else ir_builder_at_end(&b, f, IR_BODY_BLOCK);
  b.loc = f->loc;
  ir_val rank = ir_build1(&b, IR_CLUSTER_RANK, i32, NULL, 0);
  ir_val off = ir_binary(&b, IR_MUL, rank, ir_const_int(&b, i32, share));
  uint32_t nops = f->ops.n;
  /* the tiles' new length: every tile-typed value (op results and block arguments) */
  for (uint32_t v = 1; v < f->values.n; v++) {
    const struct ir_type *t = ir_vtype(f, v);
    if (t->kind != IR_TY_TILE || t->rank != 1 || t->dims[0] != bn) continue;
    int32_t d = (int32_t)share;
    f->values.v[v].type = ir_type_tile(f, (ir_dtype)t->dtype, 1, &d);
  }
  for (uint32_t i = 1; i < nops; i++) {
    struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->block == IR_GRID_BLOCK) continue;
    switch (op->code) {
    case IR_ARANGE: {
      struct ir_builder ab;
      ir_builder_after(&ab, f, i);
      ir_val a = f->ops.v[i].res;
      ir_val s = ir_build1(&ab, IR_SPLAT, f->values.v[a].type, &off, 1);
      ir_val moved = ir_binary(&ab, IR_ADD, a, s);
      ir_wrap_uses(f, a, moved);
      break;
    }
    case IR_LOAD:
    case IR_STORE: {
      if (!ir_op_has_tile(f, op)) break;
      int d = __builtin_ctzll((uint64_t)op->i[0]);
      struct ir_builder lb;
      ir_builder_before(&lb, f, i);
      lb.loc = op->loc;
      ir_op_set_arg(f, i, 1u + (uint32_t)d, ir_binary(&lb, IR_ADD, f->ops.v[i].args[1 + d], off));
      break;
    }
    case IR_REDUCE_SUM:
    case IR_REDUCE_MAX:
    case IR_REDUCE_MIN: {
      ir_val part = op->res;
      int kind = op->code == IR_REDUCE_SUM ? 0 : op->code == IR_REDUCE_MAX ? 1 : 2;
      struct ir_builder rb;
      ir_builder_after(&rb, f, i);
      ir_val all = ir_build1(&rb, IR_CLUSTER_REDUCE, f->values.v[part].type, &part, 1);
      f->ops.v[ir_def_op(f, all)].i[0] = kind;
      ir_wrap_uses(f, part, all);
      break;
    }
    default:
      break;
    }
  }
  f->cluster = (uint8_t)C;
}

void pass_cluster_rows(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_has(f->target, TL_FEAT_CLUSTER) || f->cluster > 1) return;
  struct rows R;
  if (!qualifies(f, &R)) return;
  int C = cluster_rows_size(f, R.bn);
  if (C < 2) return;
  split(f, R.bn, C);
  pc->changed = true;
}
