/* row_align.c - a loop over a row's chunks starts at the 16-byte boundary in front of the row.
 *
 * A row kernel written the obvious way walks its row in chunks, `for c in range(0, N, BN)`,
 * loading X[row, c : +BN] and storing Y[row, c : +BN]. When the row length is not a multiple
 * of 16 bytes (a vocabulary row of 50257 f16) row r starts r * N elements past the base,
 * off the 16-byte boundary for most rows, so the tensor's facts allow no vector accesses:
 * every element is its own load with its own bounds test (some 8 instructions per element,
 * PERF.md 69 and 71), and the kernel is bound by issue, not by DRAM. The chunks themselves
 * are arbitrary: started p elements earlier, where p is how far the row's first element lies
 * past its 16-byte boundary (align_shift), every chunk is 16-byte aligned. The elements in
 * front of the row are outside the tensor, so they load `fill` and are not written, as the
 * elements past the row's end in its last chunk already do.
 *
 * Needs: generic IR with the tensors' facts (before layout, which then gives the aligned
 * loads 16-byte vectors per thread instead of one element).
 *
 * Guarantees: a loop `for %c = 0 to %U step S` whose body is straight-line elementwise work,
 * reductions and 1-d loads and stores along a tensor's contiguous last dimension, where
 *   - %c appears only as the last index of those accesses, each of a tensor whose last
 *     dimension is %U (so elements before 0 and from %U on are outside every one of them),
 *     with the other indices fixed for the loop and the slice S long, and in column
 *     indices `c + arange(S)` (a mask `c + arange(BN) < N`), whose lanes in front of the
 *     row are given %U in the shifted loop so that they look like those past its end;
 *   - at least one access is of a tensor whose other strides are not known to be 16-byte
 *     multiples (its rows may start off 16 bytes), and every store is;
 *   - either nothing is carried (the iterations are independent: each computes from its
 *     own elements), or nothing is stored and every carried value is a tile whose lanes
 *     are only combined by full reductions after the loop (directly or through elementwise
 *     ops with other such lanes or lane-independent values), and one iteration over
 *     elements that all read `fill` leaves each carried tile at its initial value (checked
 *     by evaluating the body on those constants: softmax's running maximum and sum,
 *     -inf and 0, pass; anything the evaluation cannot decide keeps the loop as it is);
 * becomes
 *     %p = align_shift %X, %row, 0 {bytes=16}        the first such access's row
 *     for %c = 0 - %p to %U step S {
 *       ... the same body; the accesses of that row {align=16}, those of other tensors'
 *       rows {align=16, probe=1}: codegen tests at run time whether their row agrees
 *       (Y's rows with X's, when both are contiguous with one row length: the output of a
 *       row kernel) and takes element accesses where it does not; the other loads at %c
 *       (a norm's weights W[c], now off their boundary by the row's p) {align=16, probe=2}:
 *       codegen reads each run as the two aligned 16-byte blocks around it and shifts
 *     }
 * The lanes of a carried tile see other elements than before (a chunk's lane j holds
 * element c - p + j), which a full reduction does not see, up to the order of a
 * floating-point sum. Loops over the same row get the same start (one value after CSE), so
 * row-cache still finds them. The schedule option rowalign=0 turns the pass off. The other
 * loads at %c are shifted with shift=1 (PERF.md 115), and by default in a loop where they
 * tie with the group's accesses and row-cache will keep a long row (shifts_tie, PERF.md
 * 119); otherwise they go element by element and a loop or one-tile row is aligned only
 * where its accesses of the group outnumber them. */
#include <math.h>
#include <string.h>

#include "eval.h"
#include "passes.h"

enum { MAX_GROUP = 8, MAX_LOOPS = 32, DERIVED_DEPTH = 16, ONE_TILE_MAX = 16 };

/* Whether the other loads at the loop variable are shifted (probe=2; schedule shift=1)
 * rather than left element by element (the default: on an H100 shifted weights took
 * layernorm at 4096 x 50257 from 55 to 65% of the copy but its rows of 16385, 4097 and 2049
 * from 70 / 70 / 56% to 61 / 56 / 42%, and gained rmsnorm nothing; PERF.md 115). */
static bool shifts(const struct ir_func *f) { return tl_sched_get(f->sched.shift, 0); }

/* The probe of a shifted load: 3 (the words it needs only) with shift=2, else 2. */
static int64_t shift_probe(const struct ir_func *f) { return f->sched.shift == 2 ? 3 : 2; }

/* Whether a loop whose group and other loads tie (layernorm's output pass: X and Y against
 * W and B) is aligned with its other loads shifted though the schedule leaves shift unset:
 * where row-cache will keep a row so long (T chunks of S elements of es bytes) that no third
 * program fits beside ROW_CACHE_PROGRAMS. Only aligned does the loop share the first loop's
 * start, so that the cache takes them: layernorm 4096 x 50257 f16 55 -> 64% of the copy on an
 * H100, where its rows of 16385, 4097 and 2049 (shorter caches, more programs) lost 9-14
 * points shifted (PERF.md 115, 119). */
static bool shifts_tie(const struct ir_func *f, int64_t S, int64_t es) {
  return f->sched.shift < 0 && row_cache_applies(f) && row_cache_crowds(f->target, f->cache_trips * S * es);
}

/* The last dimension of op's tensor when op is a 1-d load or store along it at index iv,
 * S elements long, with its other indices defined outside body and the dimension's size ub;
 * -1 otherwise. */
int row_access(const struct ir_func *f, const struct ir_op *op, ir_val iv, ir_val ub, int64_t S, uint32_t body) {
  if (op->code != IR_LOAD && op->code != IR_STORE) return -1;
  const struct ir_param *p = ir_param_of(f, op->args[0]);
  const struct ir_type *tt = ir_vtype(f, op->args[0]);
  if (!p || tt->kind != IR_TY_TENSOR || tt->rank < 1) return -1;
  int D = tt->rank - 1;
  uint32_t want = 1u + (uint32_t)tt->rank + (op->code == IR_STORE);
  if (op->nargs != want || (uint64_t)op->i[0] != 1ull << D || op->args[1 + D] != iv) return -1;
  const struct ir_type *vt = ir_vtype(f, op->code == IR_LOAD ? op->res : op->args[op->nargs - 1]);
  if (vt->rank != 1 || vt->dims[0] != S || !p->facts.stride1[D]) return -1;
  int eb = ir_dtype_bytes((ir_dtype)tt->dtype);
  if (tt->dtype == DT_BOOL || eb > 8 || 16 % eb || (S * eb) % 16) return -1;
  for (int d = 0; d < D; d++)
    if (ir_defined_within(f, op->args[1 + d], body)) return -1;
  int64_t n;
  if (IR_DIM_IS_SYM(tt->dims[D]) ? IR_DIM_SYM_VALUE(tt->dims[D]) != ub
                                 : !ir_value_const_int(f, ub, &n) || n != tt->dims[D])
    return -1;
  return D;
}

bool indexed_by(const struct ir_op *op, ir_val iv) {
  for (uint32_t k = 1; k < op->nargs; k++)
    if (op->args[k] == iv) return true;
  return false;
}

bool row_body_op(uint16_t code) {
  return (ir_ops[code].flags & OPF_ELEM) || code == IR_CONST || code == IR_SPLAT || code == IR_ARANGE ||
         code == IR_REDUCE_SUM || code == IR_REDUCE_MAX || code == IR_REDUCE_MIN;
}

/* Whether op is `add (splat iv), arange` (either order): the chunk's column indices. */
static bool column_index(const struct ir_func *f, const struct ir_op *op, ir_val iv) {
  if (op->code != IR_ADD || op->nargs != 2) return false;
  for (int k = 0; k < 2; k++) {
    uint32_t a = ir_def_op(f, op->args[k]), b = ir_def_op(f, op->args[1 - k]);
    if (a && b && f->ops.v[a].code == IR_SPLAT && f->ops.v[a].args[0] == iv && f->ops.v[b].code == IR_ARANGE)
      return true;
  }
  return false;
}

/* Whether op's rows may start off 16 bytes: its tensor's base is 16-byte aligned but a
 * stride in front of the last dimension is not known to be a multiple of 16 bytes. */
static bool rows_off(const struct ir_func *f, const struct ir_op *op) {
  const struct ir_param *p = ir_param_of(f, op->args[0]);
  const struct ir_type *tt = ir_vtype(f, op->args[0]);
  return p->facts.align >= 16 && tt->rank >= 2 && !ir_facts_allow_vector(p, tt, tt->rank - 1, 16);
}

/* Whether v holds the same value in every lane: a constant or a splat of a scalar. */
static bool lane_uniform(const struct ir_func *f, ir_val v) {
  if (ir_type_is_scalar(ir_vtype(f, v))) return true;
  uint32_t d = ir_def_op(f, v);
  return d && (f->ops.v[d].code == IR_CONST || f->ops.v[d].code == IR_SPLAT);
}

/* Whether tile a's lanes come from `loop`'s carried tiles only: one of its results, or an
 * elementwise op of such lanes and lane-uniform values. */
static bool from_carried(const struct ir_func *f, ir_val a, uint32_t loop, int depth) {
  const struct ir_op *lp = &f->ops.v[loop];
  if (a >= lp->res && a < lp->res + lp->nres) return true;
  if (lane_uniform(f, a)) return true;
  uint32_t d = ir_def_op(f, a);
  if (!d || depth > DERIVED_DEPTH || !(ir_ops[f->ops.v[d].code].flags & OPF_ELEM)) return false;
  const struct ir_op *op = &f->ops.v[d];
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!from_carried(f, op->args[k], loop, depth + 1)) return false;
  return true;
}

/* Whether every use of v (a loop's carried tile, or an elementwise op of such lanes) ends
 * in a full reduction, through elementwise ops whose other tile operands are lane-uniform
 * or themselves such values (`loop`'s results). */
static bool reduced_only(const struct ir_func *f, ir_val v, uint32_t loop, int depth) {
  if (depth > DERIVED_DEPTH) return false;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || i == loop) continue;
    bool uses = false;
    for (uint32_t k = 0; k < op->nargs; k++) uses |= op->args[k] == v;
    if (!uses) continue;
    if ((op->code == IR_REDUCE_SUM || op->code == IR_REDUCE_MAX || op->code == IR_REDUCE_MIN) &&
        ir_vtype(f, op->args[0])->rank == 1)
      continue;
    if (!(ir_ops[op->code].flags & OPF_ELEM) || op->nres != 1) return false;
    for (uint32_t k = 0; k < op->nargs; k++)
      if (!from_carried(f, op->args[k], loop, 0)) return false;
    if (!reduced_only(f, op->res, loop, depth + 1)) return false;
  }
  return true;
}

/* One iteration of loop's body over elements that all read `fill`, from the carried tiles'
 * initial values: true when every carried tile comes out at its initial value and every
 * reduction in the body reduces its identity there. Values the evaluation cannot know
 * (loads elsewhere, scalars computed outside) make it false. */
static bool fill_keeps_carried(struct ir_func *f, uint32_t loop, ir_val iv, ir_val ub, int64_t S, struct arena *a) {
  const struct ir_op *lp = &f->ops.v[loop];
  const struct ir_block *body = &f->blocks.v[lp->region];
  bool *known = ARENA_NEWN(a, bool, f->values.n + 1);
  bool *at_ub = ARENA_NEWN(a, bool, f->values.n + 1); /* the lane holds the loop bound */
  ir_scalar *val = ARENA_NEWN(a, ir_scalar, f->values.n + 1);
  memset(known, 0, sizeof *known * (f->values.n + 1));
  memset(at_ub, 0, sizeof *at_ub * (f->values.n + 1));
  at_ub[ub] = true;
  for (uint32_t k = 0; k < lp->nres; k++) {
    ir_val init = lp->args[3 + k], arg = body->args + 1 + k;
    ir_dtype dt = (ir_dtype)ir_vtype(f, init)->dtype;
    double x;
    int64_t n;
    if (ir_dtype_is_float(dt) && ir_value_const_float(f, init, &x)) val[arg].f = x, known[arg] = true;
    else if (!ir_dtype_is_float(dt) && ir_value_const_int(f, init, &n)) val[arg].i = n, known[arg] = true;
  }
  /* constants defined in front of the loop (hoisted, merged) */
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->code != IR_CONST || ir_defined_within(f, op->res, lp->region)) continue;
    ir_dtype dt = (ir_dtype)ir_vtype(f, op->res)->dtype;
    double x;
    int64_t n;
    if (ir_dtype_is_float(dt) && ir_value_const_float(f, op->res, &x)) val[op->res].f = x, known[op->res] = true;
    else if (!ir_dtype_is_float(dt) && ir_value_const_int(f, op->res, &n)) val[op->res].i = n, known[op->res] = true;
  }
  for (uint32_t i = 0; i < body->ops.n; i++) {
    uint32_t id = body->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    ir_val r = op->nres ? op->res : 0;
    ir_dtype rdt = r ? (ir_dtype)ir_vtype(f, r)->dtype : DT_NONE;
    switch (op->code) {
    case IR_CONST: {
      double x;
      int64_t n;
      if (ir_dtype_is_float(rdt) && ir_value_const_float(f, r, &x)) val[r].f = x, known[r] = true;
      else if (!ir_dtype_is_float(rdt) && ir_value_const_int(f, r, &n)) val[r].i = n, known[r] = true;
      break;
    }
    case IR_SPLAT:
    case IR_BROADCAST:
      if (known[op->args[0]]) val[r] = val[op->args[0]], known[r] = true;
      at_ub[r] = at_ub[op->args[0]];
      break;
    case IR_SELECT:
      if (known[op->args[0]]) {
        ir_val pick = val[op->args[0]].i ? op->args[1] : op->args[2];
        val[r] = val[pick], known[r] = known[pick], at_ub[r] = at_ub[pick];
      }
      break;
    case IR_LT: case IR_LE: case IR_GT: case IR_GE: case IR_EQ: case IR_NE:
      if (at_ub[op->args[0]] && at_ub[op->args[1]]) { /* the bound against itself */
        val[r].i = op->code == IR_LE || op->code == IR_GE || op->code == IR_EQ;
        known[r] = true;
        break;
      }
      goto elementwise;
    case IR_ADD:
      if (column_index(f, op, iv)) { /* row-align clamps the lanes in front of the row to the bound */
        at_ub[r] = true;
        break;
      }
      goto elementwise;
    case IR_LOAD:
      if (row_access(f, op, iv, ub, S, lp->region) >= 0) {
        ir_dtype tdt = (ir_dtype)ir_vtype(f, op->args[0])->dtype;
        if (ir_dtype_is_float(tdt)) val[r].f = ir_round_float(tdt, op->f);
        else val[r].i = ir_wrap_int(tdt, (int64_t)op->f);
        known[r] = true;
      }
      break;
    case IR_REDUCE_SUM:
    case IR_REDUCE_MAX:
    case IR_REDUCE_MIN: {
      ir_val x = op->args[0];
      ir_dtype dt = (ir_dtype)ir_vtype(f, x)->dtype;
      if (!known[x] || !ir_dtype_is_float(dt)) return false;
      double want = op->code == IR_REDUCE_SUM ? 0.0 : op->code == IR_REDUCE_MAX ? -INFINITY : INFINITY;
      if (val[x].f != want) return false;
      break; /* the result (a partial reduction) stays unknown */
    }
    case IR_CAST:
      if (known[op->args[0]]) {
        val[r] = ir_eval_cast((ir_dtype)ir_vtype(f, op->args[0])->dtype, rdt, val[op->args[0]]);
        known[r] = true;
      }
      break;
    default:
    elementwise:
      if ((ir_ops[op->code].flags & OPF_ELEM) && op->nres == 1 && op->nargs <= 2) {
        ir_scalar args[2];
        bool all = true;
        for (uint32_t k = 0; k < op->nargs; k++) all &= known[op->args[k]], args[k] = val[op->args[k]];
        if (all && ir_eval_elem((ir_opcode)op->code, (ir_dtype)ir_vtype(f, op->args[0])->dtype, args, &val[r]))
          known[r] = true;
      }
      break;
    }
  }
  const struct ir_op *y = &f->ops.v[VEC_LAST(body->ops)];
  for (uint32_t k = 0; k < lp->nres; k++) {
    ir_val arg = body->args + 1 + k, out = y->args[k];
    ir_dtype dt = (ir_dtype)ir_vtype(f, arg)->dtype;
    if (!known[arg] || !known[out]) return false;
    if (ir_dtype_is_float(dt) ? !(val[out].f == val[arg].f && signbit(val[out].f) == signbit(val[arg].f))
                              : val[out].i != val[arg].i)
      return false;
  }
  return true;
}

/* Whether loop qualifies (see the top); fills its accesses of rows off 16 bytes. */
static bool qualifies(struct ir_func *f, uint32_t loop, uint32_t *group, uint32_t *ngroup, bool *shift,
                      struct arena *a) {
  const struct ir_op *lp = &f->ops.v[loop];
  int64_t lb, S;
  if (lp->nargs < 3 || !ir_value_const_int(f, lp->args[0], &lb) || lb != 0 ||
      !ir_value_const_int(f, lp->args[2], &S) || S <= 0 || ir_vtype(f, lp->args[0])->dtype != DT_I32)
    return false;
  const struct ir_block *body = &f->blocks.v[lp->region];
  ir_val iv = body->args, ub = lp->args[1];
  bool stores = false;
  uint32_t others = 0; /* loads at iv outside the group */
  *ngroup = 0;
  for (uint32_t i = 0; i < body->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[body->ops.v[i]];
    uint16_t c = op->code;
    if (op->nregions) return false;
    if (c == IR_LOAD || c == IR_STORE) {
      if (indexed_by(op, iv) || c == IR_STORE) {
        if (row_access(f, op, iv, ub, S, lp->region) < 0) return false;
        bool off = rows_off(f, op);
        if (c == IR_STORE && !off) return false; /* it would lose its vectors */
        if (off) {
          if (*ngroup == MAX_GROUP) return false;
          group[(*ngroup)++] = body->ops.v[i];
        } else {
          others += c == IR_LOAD;
        }
        stores |= c == IR_STORE;
      } else {
        for (uint32_t k = 1; k < op->nargs; k++)
          if (ir_defined_within(f, op->args[k], lp->region)) return false;
      }
      continue;
    }
    if (!row_body_op(c) && c != IR_YIELD) return false;
    if (c == IR_SPLAT && op->args[0] == iv) { /* only into column indices (c + arange(BN)) */
      for (uint32_t j = 0; j < body->ops.n; j++) {
        const struct ir_op *u = &f->ops.v[body->ops.v[j]];
        for (uint32_t k = 0; k < u->nargs; k++)
          if (u->args[k] == op->res && !column_index(f, u, iv)) return false;
      }
      continue;
    }
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] == iv) return false;
  }
  /* the loads at the variable outside the group (a norm's weights W[c], on 16 bytes before)
   * start off their boundary in the shifted loop: element by element by default, which
   * makes the loop worth aligning only where it gains more vector accesses than it loses
   * (PERF.md 100); read as shifted vectors with shift=1 (probe=2, PERF.md 115), and by
   * default where they tie with the group beside a long row cache (shifts_tie) */
  if (*ngroup == 0) return false;
  *shift = shifts(f) || (*ngroup == others &&
                         shifts_tie(f, S, ir_dtype_bytes((ir_dtype)ir_vtype(f, f->ops.v[group[0]].args[0])->dtype)));
  if (!*shift && *ngroup <= others) return false;
  if (lp->nres == 0) return true;
  if (stores) return false;
  for (uint32_t k = 0; k < lp->nres; k++)
    if (ir_type_is_scalar(ir_vtype(f, lp->res + k)) || !reduced_only(f, lp->res + k, loop, 0)) return false;
  return fill_keeps_carried(f, loop, iv, ub, S, a);
}

/* align_shift of op's tensor at its row (the last index 0). */
static ir_val shift_of(struct ir_builder *b, const struct ir_op *op, ir_val zero) {
  struct ir_func *f = b->f;
  int rank = ir_vtype(f, op->args[0])->rank;
  ir_val args[1 + IR_MAX_RANK];
  args[0] = op->args[0];
  for (int d = 0; d < rank; d++) args[1 + d] = d == rank - 1 ? zero : op->args[1 + d];
  ir_val s = ir_build1(b, IR_ALIGN_SHIFT, ir_type_scalar(f, DT_I32), args, 1u + (uint32_t)rank);
  f->ops.v[ir_def_op(f, s)].i[0] = 16;
  return s;
}

/* Whether accesses x and y have the same tensor and row indices. */
bool same_row(const struct ir_func *f, const struct ir_op *x, const struct ir_op *y) {
  int rank = ir_vtype(f, x->args[0])->rank;
  if (x->args[0] != y->args[0]) return false;
  for (int d = 0; d < rank - 1; d++)
    if (x->args[1 + d] != y->args[1 + d]) return false;
  return true;
}

/* Whether block blk stores to tensor t. */
static bool stores_to(const struct ir_func *f, uint32_t blk, ir_val t) {
  for (uint32_t i = 0; i < f->blocks.v[blk].ops.n; i++) {
    const struct ir_op *op = &f->ops.v[f->blocks.v[blk].ops.v[i]];
    if (op->code == IR_STORE && op->args[0] == t) return true;
  }
  return false;
}

/* The loads in block body at iv outside the group: their slices now start off 16 bytes by
 * the row's shift, the same in every thread ({align=16, probe=2}, IR.md). They move to the
 * top of the body, together (their indices are iv and values from outside the loop), so
 * that their loads are all issued before any is used: codegen funnels a shifted load's
 * words just before its first use (cg_mem.c), so no thread waits for one at the next
 * one's branch. */
static void shift_others(struct ir_func *f, uint32_t body, ir_val iv, const uint32_t *group, uint32_t ngroup) {
  uint32_t moved[MAX_LOOPS], n = 0;
  for (uint32_t i = 0; i < f->blocks.v[body].ops.n; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    bool grouped = false;
    for (uint32_t g = 0; g < ngroup; g++) grouped |= group[g] == id;
    if (op->code != IR_LOAD || grouped || !indexed_by(op, iv)) continue;
    op->i[1] = 16, op->i[2] = shift_probe(f);
    if (n < MAX_LOOPS && !stores_to(f, body, op->args[0])) moved[n++] = id;
  }
  uint32_t anchor = 0; /* the first op of the body not moved (the yield at the latest) */
  for (uint32_t i = 0; i < f->blocks.v[body].ops.n && !anchor; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    bool m = false;
    for (uint32_t k = 0; k < n; k++) m |= moved[k] == id;
    if (!m) anchor = id;
  }
  if (n == 0 || !anchor) return;
  struct ir_builder b;
  ir_builder_before(&b, f, anchor);
  for (uint32_t k = 0; k < n; k++) ir_op_move(&b, moved[k]);
}

static void align_loop(struct ir_func *f, uint32_t loop, const uint32_t *group, uint32_t ngroup, bool shift) {
  struct ir_builder b;
  ir_builder_before(&b, f, loop);
  b.loc = f->ops.v[loop].loc;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val zero = ir_const_int(&b, i32, 0);
  ir_val lb = ir_binary(&b, IR_SUB, zero, shift_of(&b, &f->ops.v[group[0]], zero));
  const struct ir_op *lp = &f->ops.v[loop];
  ir_val *args = ARENA_NEWN(f->arena, ir_val, lp->nargs + 1);
  memcpy(args, lp->args, sizeof *args * lp->nargs);
  args[0] = lb;
  ir_op_set_args(f, loop, args, lp->nargs);
  for (uint32_t g = 0; g < ngroup; g++) {
    struct ir_op *op = &f->ops.v[group[g]];
    op->i[1] = 16;
    op->i[2] = !same_row(f, &f->ops.v[group[0]], op); /* another row: aligned only if it agrees */
  }
  if (shift) shift_others(f, f->ops.v[loop].region, f->blocks.v[f->ops.v[loop].region].args, group, ngroup);
  /* column indices c + arange(BN): the lanes in front of the row (negative) are given the
   * bound instead, so that they look like the lanes past its end, which the body already
   * masks (`c + arange(BN) < N`); in the loop as written no index is negative */
  uint32_t body = f->ops.v[loop].region;
  ir_val iv = f->blocks.v[body].args, ub = f->ops.v[loop].args[1];
  for (uint32_t i = 0; i < f->blocks.v[body].ops.n; i++) {
    uint32_t id = f->blocks.v[body].ops.v[i];
    if (!column_index(f, &f->ops.v[id], iv)) continue;
    ir_val col = f->ops.v[id].res;
    struct ir_builder cb;
    ir_builder_after(&cb, f, id);
    ir_type_id t = f->values.v[col].type;
    ir_val neg = ir_binary(&cb, IR_LT, col, ir_const_int(&cb, t, 0));
    ir_val sel[3] = {neg, ir_build1(&cb, IR_SPLAT, t, &ub, 1), col};
    ir_val clamped = ir_build1(&cb, IR_SELECT, t, sel, 3);
    ir_replace_uses(f, col, clamped);
    ir_val back[2] = {col, f->ops.v[ir_def_op(f, neg)].args[1]};
    ir_op_set_args(f, ir_def_op(f, neg), back, 2);
    ir_op_set_args(f, ir_def_op(f, clamped), sel, 3);
    i += 4; /* past the ops just made */
  }
}

/* ---- one-tile rows (PERF.md 105) ----
 * A row held in one tile, `X[row, 0 : +S]` with S >= N (softmax's, the norms' first branch),
 * is shifted the same way: the tile covers [-p, S - p), so its 16-byte runs are aligned.
 * The lanes in front of the row then read `fill`, as the lanes past its end (from N to S)
 * already do, and are not written; the column indices `arange(S)` are moved by p with those
 * lanes given N, so they compare as lanes past the end do. Lanes past the end exist whenever
 * lanes in front do (N + p <= S with p > 0 means N < S), so nothing the tile computes can
 * tell the new lanes from lanes the form as written already has, as long as the column
 * indices only meet the bound in `arange < N` or `arange >= N` (what every lane from N on
 * answers alike). The shifted tile must still reach the row's end (N + p <= S): the region
 * is kept as written behind a branch on that, uniform in the program. */

/* Whether every use of arange result a is `a < N` or `a >= N` against a splat of ub. */
static bool compares_to_bound(const struct ir_func *f, ir_val a, ir_val ub) {
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++) {
      if (op->args[k] != a) continue;
      if ((op->code != IR_LT && op->code != IR_GE) || k != 0) return false;
      uint32_t d = ir_def_op(f, op->args[1]);
      if (!d || f->ops.v[d].code != IR_SPLAT || f->ops.v[d].args[0] != ub) return false;
    }
  }
  return true;
}

struct tile_region {
  uint32_t blk, k0, end;   /* the ops blk[k0 .. end) */
  uint32_t group[MAX_GROUP], ngroup;
  ir_val z, ub;            /* the slices' start (a constant 0) and the row's length */
  int64_t S;
};

/* Whether ops k0.. of block blk (from its first tile op to its end, before a yield without
 * values) form a one-tile row region (see above). */
static bool tile_region(const struct ir_func *f, uint32_t blk, struct tile_region *R) {
  const struct ir_block *b = &f->blocks.v[blk];
  uint32_t n = b->ops.n, end = n;
  if (!n) return false;
  const struct ir_op *last = &f->ops.v[b->ops.v[n - 1]];
  if (last->code == IR_YIELD) {
    if (last->nargs) return false;
    end = n - 1;
  }
  uint32_t k0 = 0;
  while (k0 < end && !ir_op_has_tile(f, &f->ops.v[b->ops.v[k0]])) k0++;
  if (k0 == end) return false;
  memset(R, 0, sizeof *R);
  R->blk = blk, R->k0 = k0, R->end = end;
  uint32_t others = 0; /* loads of other rows */
  for (uint32_t i = k0; i < end; i++) { /* the slices first: they give S and the bound */
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if ((op->code != IR_LOAD && op->code != IR_STORE) || !ir_op_has_tile(f, op)) continue;
    const struct ir_type *tt = ir_vtype(f, op->args[0]);
    int D = tt->rank - 1;
    int64_t v;
    if (tt->kind != IR_TY_TENSOR || D < 0 || op->nargs < 1u + (uint32_t)tt->rank || !IR_DIM_IS_SYM(tt->dims[D]) ||
        !ir_value_const_int(f, op->args[1 + D], &v) || v != 0)
      return false;
    if (!R->z) R->z = op->args[1 + D], R->ub = IR_DIM_SYM_VALUE(tt->dims[D]);
    const struct ir_type *vt = ir_vtype(f, op->code == IR_LOAD ? op->res : op->args[op->nargs - 1]);
    if (!R->S) R->S = vt->rank == 1 ? vt->dims[0] : 0;
    if (op->args[1 + D] != R->z || row_access(f, op, R->z, R->ub, R->S, 0) < 0) return false;
    bool off = rows_off(f, op);
    if (op->code == IR_STORE && !off) return false;
    if (!off) { /* in the shifted copy: shifted (probe=2) with shift=1, else element by element */
      others += op->code == IR_LOAD;
      continue;
    }
    if (R->ngroup == MAX_GROUP) return false;
    for (int d = 0; d < D; d++) { /* the row must be known in front of the region */
      uint32_t def = ir_def_op(f, op->args[1 + d]);
      if (def && f->ops.v[def].block == blk && ir_op_index(f, def) >= k0) return false;
    }
    R->group[R->ngroup++] = b->ops.v[i];
  }
  if (R->ngroup == 0 || R->S <= 0 || (!shifts(f) && R->ngroup <= others)) return false;
  /* the shifted copy and the one as written side by side cost registers: only tiles of at
   * most 16 elements per thread (of each CTA of a cluster, where cluster-rows splits the
   * row); at 32 and 64 (4096 and 8192 wide, 4 warps) ptxas went from 58 to 126 registers
   * and from none to 228-1220 bytes spilled */
  int64_t threads = ir_func_threads(f);
  if (R->S / (cluster_rows_size(f, R->S) * threads) > ONE_TILE_MAX) return false;
  for (uint32_t i = k0; i < end; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    uint16_t c = op->code;
    if (op->nregions) return false;
    bool tile = ir_op_has_tile(f, op);
    for (uint32_t k = 0; k < op->nres && tile; k++) { /* every tile one row */
      const struct ir_type *t = ir_vtype(f, op->res + k);
      if (t->kind == IR_TY_TILE && t->rank > 0 && (t->rank != 1 || t->dims[0] != R->S)) return false;
    }
    if (c == IR_LOAD || c == IR_STORE) continue; /* checked above, or a scalar access */
    if (c == IR_ARANGE) {
      if (!compares_to_bound(f, op->res, R->ub)) return false;
      continue;
    }
    if (!tile) {
      if (!(ir_ops[c].flags & OPF_PURE)) return false;
      continue;
    }
    if (!row_body_op(c)) return false; /* (aranges were checked above) */
  }
  return true;
}

/* `if N + p <= S { the region shifted } else { the region as written }`. */
static void shift_tile_region(struct ir_func *f, const struct tile_region *R) {
  uint32_t nops = R->end - R->k0;
  uint32_t *ops = ARENA_NEWN(f->arena, uint32_t, nops + 1);
  memcpy(ops, f->blocks.v[R->blk].ops.v + R->k0, sizeof *ops * nops);
  bool *grouped = ARENA_NEWN(f->arena, bool, nops + 1);
  for (uint32_t i = 0; i < nops; i++) {
    grouped[i] = false;
    for (uint32_t g = 0; g < R->ngroup; g++) grouped[i] |= ops[i] == R->group[g];
  }
  struct ir_builder b;
  ir_builder_before(&b, f, ops[0]);
  b.loc = f->ops.v[ops[0]].loc;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val zero = ir_const_int(&b, i32, 0);
  ir_val p = shift_of(&b, &f->ops.v[R->group[0]], zero);
  ir_val start = ir_binary(&b, IR_SUB, zero, p);
  ir_val fits = ir_binary(&b, IR_LE, ir_binary(&b, IR_ADD, R->ub, p), ir_const_int(&b, i32, R->S));
  uint32_t iff = ir_build_if(&b, fits, NULL, 0);
  uint32_t then_blk = f->ops.v[iff].region, else_blk = then_blk + 1;
  struct ir_builder eb, tb;
  ir_builder_at_end(&eb, f, else_blk);
  for (uint32_t i = 0; i < nops; i++) ir_op_move(&eb, ops[i]);
  eb.loc = b.loc;
  ir_build(&eb, IR_YIELD, NULL, 0, NULL, 0);
  ir_builder_at_end(&tb, f, then_blk);
  tb.loc = b.loc;
  struct ir_valmap m;
  ir_valmap_init(&m, f, f->arena);
  const struct ir_op *first = &f->ops.v[R->group[0]];
  uint32_t shifted[MAX_GROUP], nshifted = 0;
  for (uint32_t i = 0; i < nops; i++) {
    uint32_t c = ir_clone_op(&tb, ops[i], &m);
    struct ir_op *op = &f->ops.v[c];
    if ((op->code == IR_LOAD || op->code == IR_STORE) && ir_op_has_tile(f, op)) {
      /* a row of the group, or another tensor's (a norm's weights): moved the same way */
      ir_op_set_arg(f, c, (uint32_t)ir_vtype(f, op->args[0])->rank, start);
      op = &f->ops.v[c];
      if (grouped[i]) op->i[1] = 16, op->i[2] = !same_row(f, first, op);
      else if (op->code == IR_LOAD && shifts(f) && nshifted < MAX_GROUP) /* shifted (IR.md) */
        op->i[1] = 16, op->i[2] = shift_probe(f), shifted[nshifted++] = c;
    } else if (op->code == IR_ARANGE) { /* column indices: moved by p, the lanes in front given N */
      ir_val a = op->res;
      ir_type_id t = f->values.v[a].type;
      ir_val col = ir_binary(&tb, IR_SUB, a, ir_build1(&tb, IR_SPLAT, t, &p, 1));
      ir_val neg = ir_binary(&tb, IR_LT, col, ir_build1(&tb, IR_SPLAT, t, &zero, 1));
      ir_val sel[3] = {neg, ir_build1(&tb, IR_SPLAT, t, &R->ub, 1), col};
      ir_val clamped = ir_build1(&tb, IR_SELECT, t, sel, 3);
      ir_map_set(&m, f->ops.v[ops[i]].res, clamped); /* later clones use the clamped indices */
    }
  }
  ir_build(&tb, IR_YIELD, NULL, 0, NULL, 0);
  /* the shifted loads side by side where the first of them was (a norm's W and B: their
   * loads issued together, shift_others) */
  for (uint32_t k = 1; k < nshifted; k++) {
    const struct ir_block *tblk = &f->blocks.v[then_blk];
    uint32_t after = tblk->ops.v[ir_op_index(f, shifted[k - 1]) + 1]; /* (the yield at the latest) */
    if (after == shifted[k]) continue;
    struct ir_builder sb;
    ir_builder_before(&sb, f, after);
    ir_op_move(&sb, shifted[k]);
  }
}

void pass_row_align(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_sched_get(f->sched.rowalign, 1)) return;
  uint32_t loops[MAX_LOOPS], n = 0;
  ir_block_collect(f, IR_BODY_BLOCK, IR_FOR, loops, &n, MAX_LOOPS);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t group[MAX_GROUP], ngroup;
    if (!f->ops.v[loops[i]].block) continue;
    bool shift = false;
    if (!qualifies(f, loops[i], group, &ngroup, &shift, pc->scratch)) continue;
    align_loop(f, loops[i], group, ngroup, shift);
    pc->changed = true;
  }
  /* one-tile rows: the body and the branches of its ifs (not loop bodies) */
  uint32_t ifs[MAX_LOOPS], nif = 0, blks[2 * MAX_LOOPS + 1], nb = 0;
  ir_block_collect(f, IR_BODY_BLOCK, IR_IF, ifs, &nif, MAX_LOOPS);
  blks[nb++] = IR_BODY_BLOCK;
  for (uint32_t i = 0; i < nif; i++) {
    if (ir_op_in_loop(f, ifs[i])) continue;
    blks[nb++] = f->ops.v[ifs[i]].region;
    blks[nb++] = f->ops.v[ifs[i]].region + 1;
  }
  for (uint32_t i = 0; i < nb; i++) {
    struct tile_region R;
    if (!tile_region(f, blks[i], &R)) continue;
    shift_tile_region(f, &R);
    pc->changed = true;
  }
}
