/* verify.c - structural and typing invariants of Tile IR.
 *
 * Runs after every pass in debug and test builds (QBE's ssacheck). It checks:
 *  - structure: each op sits in the block that it records, terminators end their blocks
 *    (YIELD ends for/if regions, GRID ends the grid block), operand and result counts;
 *  - scoping: every operand is defined before its use in the same block or an enclosing
 *    one; grid-block values never reach the body;
 *  - types: per-op rules (elementwise operands agree, dot shapes chain, loads/stores index
 *    every tensor dimension, loop-carried and branch results match their yields);
 *  - stages (ir.h): GPU ops only in GPU IR, a layout on every tile of GPU IR, offsets on
 *    every shared-memory allocation once allocated;
 *  - the Hopper rules: operands of the shared-memory, mbarrier and TMA ops come from their
 *    allocations, constant slots and phases are in range, TMA boxes fit their buffers; an
 *    in-flight (pending) wgmma accumulator is used only by another async wgmma, a wait or a
 *    yield; inside warp_specialize only named barriers of the role's threads, no tile
 *    computed outside the role, and register budgets that fit the multiprocessor.
 * Every failure names the op (its opcode, and "file:line:col: error: " from its location
 * when the function has a file: the .tile statement or the line of the IR text) and the
 * pass that ran last; verification continues so that one run reports every broken
 * invariant.                                                                             */
#include <math.h>
#include <string.h>

#include "eval.h"
#include "ir.h"
#include "layout.h"

struct verifier {
  const struct ir_func *f;
  const char *after;
  struct strbuf *err;
  uint8_t *defined; /* value -> visible at this point */
  uint8_t *pending; /* value -> an in-flight wgmma accumulator (see pending_values) */
  uint8_t *outside; /* value -> defined outside the warp_specialize op being verified */
  int nerrors;
  uint8_t *known;   /* value -> folds to the constant kval[value] (see fold_values) */
  ir_scalar *kval;
  bool in_grid;
  uint32_t ws;      /* the warp_specialize op whose region is being verified (0: none) */
  int role;         /* 0: producer region, 1: consumer region */
  struct arena *scratch;
};

/* "file:line:col: error: ir verifier (after pass P): @kernel" for something at loc. */
static void start(struct verifier *v, struct ir_loc loc) {
  if (v->f->file && loc.line) sb_printf(v->err, "%s:%u:%u: error: ", v->f->file, loc.line, loc.col);
  sb_puts(v->err, "ir verifier");
  if (v->after) sb_printf(v->err, " (after pass %s)", v->after);
  sb_printf(v->err, ": @%s", v->f->name);
}

/* A broken rule of the function as a whole (reported at its header). */
/* The message after its location: ": " fmt "\n". */
static void finish(struct verifier *v, const char *fmt, va_list ap) {
  sb_puts(v->err, ": ");
  sb_vprintf(v->err, fmt, ap);
  sb_putc(v->err, '\n');
}

static void TL_PRINTF(2, 3) bad_func(struct verifier *v, const char *fmt, ...) {
  if (v->nerrors++ >= 20) return;
  start(v, v->f->loc);
  va_list ap;
  va_start(ap, fmt);
  finish(v, fmt, ap);
  va_end(ap);
}

static void TL_PRINTF(3, 4) bad(struct verifier *v, uint32_t op, const char *fmt, ...) {
  if (v->nerrors++ >= 20) return;
  const struct ir_op *o = &v->f->ops.v[op];
  start(v, o->loc);
  sb_printf(v->err, ": op %u '%s'", op, ir_ops[o->code].name);
  if (o->loc.line && !v->f->file) sb_printf(v->err, " (line %u)", o->loc.line);
  va_list ap;
  va_start(ap, fmt);
  finish(v, fmt, ap);
  va_end(ap);
}

static const struct ir_type *vt(struct verifier *v, ir_val x) { return ir_vtype(v->f, x); }

static bool same_shape(const struct ir_type *a, const struct ir_type *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static bool is_tile(const struct ir_type *t) { return t->kind == IR_TY_TILE; }
static bool is_int_scalar(const struct ir_type *t) {
  return ir_type_is_scalar(t) && ir_dtype_is_int(t->dtype);
}

static void check_elementwise(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  const struct ir_type *r = vt(v, op->res);
  ir_opcode c = op->code;
  if (!is_tile(r)) {
    bad(v, id, "result is not a tile or scalar");
    return;
  }
  for (uint32_t k = 0; k < op->nargs; k++) {
    const struct ir_type *a = vt(v, op->args[k]);
    if (!is_tile(a) || !same_shape(a, r)) {
      bad(v, id, "operand %u shape differs from the result shape", k);
      return;
    }
    if (a->layout != r->layout) {
      bad(v, id, "operand %u layout #%u differs from the result layout #%u", k, a->layout, r->layout);
      return;
    }
  }
  const struct ir_type *a0 = vt(v, op->args[0]);
  enum ir_dtype_class cls = ir_dtype_class(a0->dtype);
  switch (c) {
  case IR_CAST:
    return;
  case IR_SELECT:
    if (a0->dtype != DT_BOOL) bad(v, id, "select condition must be bool");
    if (vt(v, op->args[1])->dtype != r->dtype || vt(v, op->args[2])->dtype != r->dtype)
      bad(v, id, "select operands must have the result's element type");
    return;
  case IR_EQ: case IR_NE: case IR_LT: case IR_LE: case IR_GT: case IR_GE:
    if (r->dtype != DT_BOOL) bad(v, id, "comparison result must be bool");
    if (vt(v, op->args[1])->dtype != a0->dtype) bad(v, id, "comparison operands differ in type");
    return;
  default:
    break;
  }
  for (uint32_t k = 0; k < op->nargs; k++)
    if (vt(v, op->args[k])->dtype != r->dtype) {
      bad(v, id, "operand %u element type %s differs from the result's %s", k,
          ir_dtype_name(vt(v, op->args[k])->dtype), ir_dtype_name(r->dtype));
      return;
    }
  switch (c) {
  case IR_EXP: case IR_EXP2: case IR_LOG: case IR_LOG2: case IR_SQRT: case IR_RSQRT:
  case IR_TANH: case IR_ERF:
    if (cls != DTC_FLOAT) bad(v, id, "needs a float operand");
    break;
  case IR_AND: case IR_OR: case IR_XOR: case IR_NOT:
    if (cls != DTC_INT && cls != DTC_BOOL) bad(v, id, "needs int or bool operands");
    break;
  case IR_SHL: case IR_SHR: case IR_CTZ:
    if (cls != DTC_INT) bad(v, id, "needs int operands");
    break;
  case IR_MULHI:
    if (r->dtype != DT_U32) bad(v, id, "needs u32 operands");
    break;
  case IR_NEG: case IR_ABS: case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV: case IR_REM:
  case IR_MIN: case IR_MAX:
    if (cls != DTC_INT && cls != DTC_FLOAT) bad(v, id, "needs numeric operands");
    break;
  default:
    break;
  }
}

/* A store's, scatter's or atomic's predicate: bool, the value's shape and layout. */
static void check_predicate(struct verifier *v, uint32_t id, const struct ir_type *p, const struct ir_type *data) {
  if (!is_tile(p) || p->dtype != DT_BOOL || !same_shape(p, data) || p->layout != data->layout)
    bad(v, id, "the predicate must be a bool tile of the value's shape and layout");
}

/* gather, scatter, atomic: a tensor, one i32 index per dimension of the data's shape
 * (and layout), [a predicate,] the value. */
static void check_indexed(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  if (op->nargs < 1 || vt(v, op->args[0])->kind != IR_TY_TENSOR) {
    bad(v, id, "first operand is not a tensor parameter");
    return;
  }
  const struct ir_type *t = vt(v, op->args[0]);
  uint32_t want = 1 + (uint32_t)t->rank + (op->code != IR_GATHER);
  bool pred = op->code != IR_GATHER && op->nargs == want + 1;
  if (op->nargs != want && !pred) {
    bad(v, id, "expected %u operands for a rank-%d tensor, found %u", want, t->rank, op->nargs);
    return;
  }
  const struct ir_type *data = op->code == IR_GATHER ? vt(v, op->res) : vt(v, op->args[op->nargs - 1]);
  if (!is_tile(data)) {
    bad(v, id, "the data is not a tile or scalar");
    return;
  }
  if (data->dtype != t->dtype) bad(v, id, "tile element type differs from the tensor's");
  for (int d = 0; d < t->rank; d++) {
    const struct ir_type *x = vt(v, op->args[1 + d]);
    if (!is_tile(x) || x->dtype != DT_I32 || !same_shape(x, data) || x->layout != data->layout)
      bad(v, id, "index %d must be an i32 tile of the data's shape and layout", d);
  }
  if (pred) check_predicate(v, id, vt(v, op->args[op->nargs - 2]), data);
  if (op->code == IR_ATOMIC) {
    if (vt(v, op->res) != data) bad(v, id, "the result (the old values) must have the value's type");
    if (op->i[0] < 0 || op->i[0] > 2) bad(v, id, "atomic kind %lld is not 0 (add), 1 (max) or 2 (min)", (long long)op->i[0]);
    bool ok = data->dtype == DT_I32 || data->dtype == DT_U32 || data->dtype == DT_F32 ||
              ((data->dtype == DT_F16 || data->dtype == DT_BF16) && op->i[0] == 0);
    if (!ok) bad(v, id, "no atomic %s on %s", op->i[0] == 0 ? "add" : op->i[0] == 1 ? "max" : "min", ir_dtype_name((ir_dtype)data->dtype));
  }
  if (op->code != IR_GATHER) {
    struct ir_param *p = ir_param_of(v->f, op->args[0]);
    if (p && !p->is_out) bad(v, id, "write to tensor '%s', which is not 'out'", p->name);
  }
}

/* An integer or bool load reads its fill value as that type: an integer in range. */
static void check_fill(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  const struct ir_type *r = op->nres ? vt(v, op->res) : NULL;
  if (!r || ir_dtype_is_float((ir_dtype)r->dtype) || r->dtype == DT_NONE) return;
  double x = op->f, lo, hi;
  int bits = ir_dtype_bytes((ir_dtype)r->dtype) * 8;
  if (r->dtype == DT_BOOL) lo = 0, hi = 1;
  else if (ir_dtype_is_unsigned((ir_dtype)r->dtype)) lo = 0, hi = ldexp(1.0, bits) - 1;
  else lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1) - 1;
  if (!(x >= lo && x <= hi) || x != floor(x))
    bad(v, id, "fill %g is not a value of the %s result", x, ir_dtype_name((ir_dtype)r->dtype));
}

static void check_memory(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  if (op->nargs < 1) {
    bad(v, id, "missing tensor operand");
    return;
  }
  const struct ir_type *t = vt(v, op->args[0]);
  if (t->kind != IR_TY_TENSOR) {
    bad(v, id, "first operand is not a tensor parameter");
    return;
  }
  uint32_t want = 1 + t->rank + (op->code == IR_STORE);
  bool pred = op->code == IR_STORE && op->nargs == want + 1;
  if (op->nargs != want && !pred) {
    bad(v, id, "expected %u operands for a rank-%d tensor, found %u", want, t->rank, op->nargs);
    return;
  }
  for (int d = 0; d < t->rank; d++)
    if (!is_int_scalar(vt(v, op->args[1 + d]))) bad(v, id, "index %d is not an integer scalar", d);
  uint64_t mask = (uint64_t)op->i[0];
  if (mask >> t->rank) {
    bad(v, id, "slice mask %llu names dimensions beyond rank %d", (unsigned long long)mask, t->rank);
    return;
  }
  const struct ir_type *tile = op->code == IR_LOAD ? vt(v, op->res) : vt(v, op->args[op->nargs - 1]);
  if (!is_tile(tile) || tile->rank != __builtin_popcountll(mask)) {
    bad(v, id, "tile rank must equal the number of sliced dimensions (%d)", __builtin_popcountll(mask));
    return;
  }
  if (tile->dtype != t->dtype) bad(v, id, "tile element type differs from the tensor's");
  if (op->i[1] && (op->i[1] != 16 || tile->rank != 1 || !(mask >> (t->rank - 1) & 1)))
    bad(v, id, "align=%lld: only 16, for a 1-d slice of the last dimension", (long long)op->i[1]);
  if (op->i[2] && (op->i[2] < 0 || op->i[2] > 3 || !op->i[1] || (op->i[2] >= 2 && op->code != IR_LOAD)))
    bad(v, id, "probe=%lld: only 1, or 2 or 3 on a load, with align", (long long)op->i[2]);
  if (pred) check_predicate(v, id, vt(v, op->args[op->nargs - 2]), tile);
  if (op->code == IR_STORE) {
    struct ir_param *p = ir_param_of(v->f, op->args[0]);
    if (p && !p->is_out) bad(v, id, "store to tensor '%s', which is not 'out'", p->name);
  }
}

static void check_region_end(struct verifier *v, uint32_t id, uint32_t blk, const ir_val *want,
                             uint32_t nwant, const char *what) {
  const struct ir_block *b = &v->f->blocks.v[blk];
  if (b->ops.n == 0 || v->f->ops.v[VEC_LAST(b->ops)].code != IR_YIELD) {
    bad(v, id, "%s does not end with yield", what);
    return;
  }
  const struct ir_op *y = &v->f->ops.v[VEC_LAST(b->ops)];
  if (y->nargs != nwant) {
    bad(v, id, "%s yields %u values, expected %u", what, y->nargs, nwant);
    return;
  }
  for (uint32_t i = 0; i < nwant; i++)
    if (v->f->values.v[y->args[i]].type != v->f->values.v[want[i]].type)
      bad(v, id, "%s yield %u has the wrong type", what, i);
}

/* ---- GPU ops ---- */

/* ---- constants as the generic passes see them ----
 * A rule about a constant operand (a slot in range, a phase parity of 0 or 1) must also hold
 * for operands that fold and canonicalize turn into constants, or a kernel the verifier
 * accepts (say with a slot `mul %one, %c32` in a two-slot buffer) would be rejected after
 * folding: an internal compiler error on input that was accepted. fold_values computes,
 * before verification, the uniform value every scalar or tile folds to, with the passes'
 * semantics: eval.c on constant operands (fold.c: elementwise ops, casts, min/max
 * reductions and scans), splat, broadcast, expand_dims and trans of a constant, and canonicalize.c's
 * select and if on a constant condition and integer x * 0. Values the passes leave
 * non-constant stay unknown (0 in known[]). */
static bool folded(const struct verifier *v, ir_val x, ir_scalar *out) {
  if (x == 0 || x >= v->f->values.n || !v->known[x]) return false;
  *out = v->kval[x];
  return true;
}

static void fold_block(struct verifier *v, uint32_t blk);

static void fold_op(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t r = 0; r < op->nregions; r++)
    if (op->region + r < f->blocks.n) fold_block(v, op->region + r);
  if (op->nres == 0 || op->res == 0 || op->res + op->nres > f->values.n) return;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (op->args[k] == 0 || op->args[k] >= f->values.n) return;
  const struct ir_type *rt = ir_vtype(f, op->res);
  ir_scalar a[3], r;
  switch (op->code) {
  case IR_CONST:
    if (ir_dtype_is_float(rt->dtype)) r.f = op->f;
    else r.i = op->i[0];
    break;
  case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_TRANS: case IR_REDUCE_MAX: case IR_REDUCE_MIN:
  case IR_SCAN_MAX: case IR_SCAN_MIN:
  case IR_RESHAPE: case IR_PERMUTE: case IR_SPLIT:
    if (op->nargs != 1 || !folded(v, op->args[0], &r)) return;
    break;
  case IR_JOIN: /* canonicalize folds a join of two equal constants */
    if (op->nargs != 2 || !folded(v, op->args[0], &r) || !folded(v, op->args[1], &a[0]) ||
        memcmp(&r, &a[0], sizeof r) != 0)
      return;
    break;
  case IR_CAST:
    if (op->nargs != 1 || !folded(v, op->args[0], &a[0])) return;
    r = ir_eval_cast(ir_vtype(f, op->args[0])->dtype, rt->dtype, a[0]);
    break;
  case IR_SELECT:
    if (op->nargs != 3 || !folded(v, op->args[0], &a[0]) || !folded(v, op->args[a[0].i ? 1 : 2], &r)) return;
    break;
  case IR_IF: {
    if (op->nargs != 1 || !folded(v, op->args[0], &a[0])) return;
    uint32_t blk = op->region + (a[0].i ? 0 : 1);
    if (op->nregions != 2 || blk >= f->blocks.n || !f->blocks.v[blk].ops.n) return;
    const struct ir_op *y = &f->ops.v[VEC_LAST(f->blocks.v[blk].ops)];
    for (uint32_t k = 0; y->code == IR_YIELD && k < op->nres && k < y->nargs; k++)
      if (folded(v, y->args[k], &r)) {
        v->known[op->res + k] = 1;
        v->kval[op->res + k] = r;
      }
    return;
  }
  default: {
    if (!(ir_ops[op->code].flags & OPF_ELEM) || op->nargs == 0 || op->nargs > 3 || op->nres != 1) return;
    ir_dtype in = ir_vtype(f, op->args[0])->dtype;
    bool all = true;
    for (uint32_t k = 0; k < op->nargs; k++) all &= folded(v, op->args[k], &a[k]);
    if (all) {
      if (!ir_eval_elem((ir_opcode)op->code, in, a, &r)) return;
    } else if (op->code == IR_MUL && op->nargs == 2 && ir_dtype_is_int(in) &&
               ((folded(v, op->args[0], &a[0]) && a[0].i == 0) || (folded(v, op->args[1], &a[1]) && a[1].i == 0))) {
      r.i = 0; /* canonicalize: integer x * 0 -> 0 */
    } else {
      return;
    }
    break;
  }
  }
  v->known[op->res] = 1;
  v->kval[op->res] = r;
}

static void fold_block(struct verifier *v, uint32_t blk) {
  const struct ir_block *b = &v->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++)
    if (b->ops.v[i] && b->ops.v[i] < v->f->ops.n) fold_op(v, b->ops.v[i]);
}

static bool folded_int(const struct verifier *v, ir_val x, int64_t *out) {
  ir_scalar s;
  if (!folded(v, x, &s) || ir_dtype_is_float(vt((struct verifier *)v, x)->dtype)) return false;
  *out = s.i;
  return true;
}

static uint32_t def_code(struct verifier *v, ir_val x) {
  uint32_t d = ir_def_op(v->f, x);
  return d ? v->f->ops.v[d].code : IR_NONE;
}

/* A slot operand of a buffer or barrier array with `n` entries: an integer scalar, in range
 * when it folds to a constant. */
static void check_slot(struct verifier *v, uint32_t id, ir_val slot, int64_t n, const char *what) {
  if (!is_int_scalar(vt(v, slot))) {
    bad(v, id, "%s slot is not an integer scalar", what);
    return;
  }
  int64_t c;
  if (folded_int(v, slot, &c) && (c < 0 || c >= n))
    bad(v, id, "%s slot %lld is out of range (%lld slots)", what, (long long)c, (long long)n);
}

static int64_t buffer_slots(const struct ir_type *t) { return t->rank == 3 ? t->dims[0] : 1; }

static bool check_buffer(struct verifier *v, uint32_t id, ir_val buf, ir_val slot) {
  const struct ir_type *t = vt(v, buf);
  const struct ir_layout *l = &v->f->layouts.v[t->layout];
  if (def_code(v, buf) != IR_LOCAL_ALLOC || l->kind != IR_LAYOUT_SHARED) {
    bad(v, id, "buffer operand is not a local_alloc");
    return false;
  }
  if (t->rank < 2 || t->rank > 3) return false; /* reported at the local_alloc; callers index its last two dims */
  check_slot(v, id, slot, buffer_slots(t), "buffer");
  return true;
}

static bool check_mbar(struct verifier *v, uint32_t id, ir_val bar, ir_val slot) {
  if (def_code(v, bar) != IR_MBAR_ALLOC) {
    bad(v, id, "barrier operand is not an mbar_alloc");
    return false;
  }
  check_slot(v, id, slot, vt(v, bar)->dims[0], "mbarrier");
  return true;
}

/* tma_desc: the box is the result shape, one entry per tensor dimension. */
static void check_tma_desc(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  const struct ir_type *t = vt(v, op->args[0]), *r = vt(v, op->res);
  if (t->kind != IR_TY_TENSOR || !ir_param_of(v->f, op->args[0])) {
    bad(v, id, "tma_desc describes a tensor parameter");
    return;
  }
  const struct ir_layout *l = &v->f->layouts.v[r->layout];
  if (r->rank != t->rank || r->dtype != t->dtype || l->kind != IR_LAYOUT_SHARED) {
    bad(v, id, "the box must have the tensor's rank and element type and a shared layout");
    return;
  }
  for (int d = 0; d < r->rank; d++)
    if (r->dims[d] < 1 || r->dims[d] > 256) bad(v, id, "box dimension %d is %d (TMA allows 1..256)", d, r->dims[d]);
  int inner = r->dims[r->rank - 1] * ir_dtype_bytes(r->dtype);
  if (inner % 16) bad(v, id, "the box's rows are %d bytes, not a multiple of 16", inner);
  if (l->max_phase > 1 && inner > 128) bad(v, id, "a swizzled box row is %d bytes (at most 128)", inner);
  if (op->i[0] != 0 && op->i[0] != 1) bad(v, id, "flat must be 0 or 1");
  if (op->i[0] != 1) return;
  /* a flat map: 1-d over the tensor's memory, so its elements must be addressable by an i32
   * offset from a 16-byte aligned base along a unit last stride */
  const struct ir_param *p = ir_param_of(v->f, op->args[0]);
  if (!p->facts.stride1[t->rank - 1] || p->facts.align < 16 || !p->facts.span31)
    bad(v, id, "a flat tma_desc needs a unit last stride, a 16-byte aligned base and span31 (the tensor's facts)");
  for (int d = 0; d < r->rank - 1; d++)
    if (r->dims[d] != 1) bad(v, id, "a flat box spans %d along dimension %d (1 but the last)", r->dims[d], d);
  if (l->max_phase > 1) bad(v, id, "a flat box is not swizzled");
}

/* tma_load buf, slot, bar, barslot, desc, idx... and tma_reduce buf, slot, desc, idx...: the
 * boxes of desc tile buf's slot. */
static void check_tma_copy(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  bool load = op->code == IR_TMA_LOAD;
  uint32_t di = load ? 4 : 2; /* the tma_desc operand */
  const char *name = ir_ops[op->code].name;
  if (op->nargs < di + 2) {
    bad(v, id, "%s needs buf, slot, %sdesc and the indices", name, load ? "bar, barslot, " : "");
    return;
  }
  bool ok = check_buffer(v, id, op->args[0], op->args[1]);
  if (load) ok &= check_mbar(v, id, op->args[2], op->args[3]);
  uint32_t dd = ir_def_op(v->f, op->args[di]);
  if (!dd || v->f->ops.v[dd].code != IR_TMA_DESC) {
    bad(v, id, "operand %u is not a tma_desc", di);
    return;
  }
  if (!ok) return;
  const struct ir_type *box = vt(v, op->args[di]), *buf = vt(v, op->args[0]);
  if ((int)op->nargs != (int)di + 1 + box->rank) {
    bad(v, id, "expected %d indices for a rank-%d tensor", box->rank, box->rank);
    return;
  }
  for (uint32_t k = di + 1; k < op->nargs; k++)
    if (!is_int_scalar(vt(v, op->args[k]))) bad(v, id, "index %u is not an integer scalar", k - di - 1);
  uint64_t mask = (uint64_t)op->i[0];
  int rows = buf->dims[buf->rank - 2], cols = buf->dims[buf->rank - 1];
  int nsl = __builtin_popcountll(mask);
  /* two sliced dimensions (rows and columns), or one into a one-row buffer (a 1-d slice) */
  if (mask >> box->rank || (nsl != 2 && (nsl != 1 || rows != 1))) {
    bad(v, id, "the mask must slice two dimensions of the rank-%d tensor (one for a one-row buffer)", box->rank);
    return;
  }
  int sliced[2] = {-1, -1}, n = nsl == 1; /* a 1-d slice: its one dimension is the columns */
  for (int d = 0; d < box->rank; d++) {
    if (mask >> d & 1) sliced[n++] = d;
    else if (box->dims[d] != 1) bad(v, id, "the box spans %d along dropped dimension %d", box->dims[d], d);
  }
  if (v->f->ops.v[dd].i[0] == 1 && (nsl != 1 || !(mask >> (box->rank - 1) & 1) || !load))
    bad(v, id, "a flat tma_desc loads 1-d slices of the last dimension only");
  int brows = sliced[0] < 0 ? 1 : box->dims[sliced[0]];
  if (brows != rows || cols % box->dims[sliced[1]] || box->dtype != buf->dtype)
    bad(v, id, "boxes of %dx%d do not tile the %dx%d buffer", brows, box->dims[sliced[1]], rows, cols);
  if (!load && box->dtype != DT_F32) bad(v, id, "tma_reduce adds f32 only");
}

/* tma_reduce, bulk_wait: bulk groups exist on the target. */
static void check_bulk_groups(struct verifier *v, uint32_t id) {
  const struct tl_target *t = v->f->target;
  if (!tl_has(t, TL_FEAT_BULK_GROUP))
    bad(v, id, "bulk groups need PTX 8.0 (the target's is %d.%d)", t->ptx_version / 10, t->ptx_version % 10);
}

static void check_gpu_op(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_type *r = op->nres ? vt(v, op->res) : NULL;
  switch (op->code) {
  case IR_LOCAL_ALLOC:
    if (!r->layout || f->layouts.v[r->layout].kind != IR_LAYOUT_SHARED || r->rank < 2 || r->rank > 3)
      bad(v, id, "a buffer is a rank-2 or rank-3 tile with a shared layout");
    break;
  case IR_LOCAL_STORE:
  case IR_LOCAL_LOAD:
    check_buffer(v, id, op->args[0], op->args[1]);
    break;
  case IR_ASYNC_COPY: {
    if (op->nargs < 3) {
      bad(v, id, "async_copy takes a buffer, a slot, a tensor parameter and one index per tensor dimension");
      break;
    }
    check_buffer(v, id, op->args[0], op->args[1]);
    /* async_copy %buf, %slot, %T, %i0, ...: one integer index per tensor dimension, the
     * mask naming sliced dimensions only, the buffer of the tensor's element type */
    const struct ir_type *t = vt(v, op->args[2]), *buf = vt(v, op->args[0]);
    if (t->kind != IR_TY_TENSOR || op->nargs != 3u + (uint32_t)t->rank) {
      bad(v, id, "async_copy takes a buffer, a slot, a tensor parameter and one index per tensor dimension");
      break;
    }
    if (buf->dtype != t->dtype) bad(v, id, "the buffer's element type differs from the tensor's");
    if (op->i[0] == 0) {
      /* the gather form: one i32 index tile per tensor dimension, all of one type whose
       * shape is the buffer's (rows x cols) and whose layout says which thread copies what */
      const struct ir_type *x0 = vt(v, op->args[3]);
      int br = buf->rank;
      if (!is_tile(x0) || x0->rank != 2 || x0->dtype != DT_I32 || !x0->layout || x0->dims[0] != buf->dims[br - 2] ||
          x0->dims[1] != buf->dims[br - 1]) {
        bad(v, id, "a gathering async_copy (mask 0) takes i32 index tiles of the buffer's %dx%d shape",
            buf->dims[br - 2], buf->dims[br - 1]);
        break;
      }
      for (uint32_t k = 4; k < op->nargs; k++)
        if (f->values.v[op->args[k]].type != f->values.v[op->args[3]].type)
          bad(v, id, "index %u's type differs from index 0's (a gathering async_copy's indices share one type)", k - 3);
      break;
    }
    for (uint32_t k = 3; k < op->nargs; k++)
      if (!is_int_scalar(vt(v, op->args[k]))) bad(v, id, "index %u is not an integer scalar", k - 3);
    if ((uint64_t)op->i[0] >> t->rank) bad(v, id, "slice mask %lld names dimensions beyond rank %d", (long long)op->i[0], t->rank);
    else if (__builtin_popcountll((uint64_t)op->i[0]) != 2) bad(v, id, "async_copy copies a 2-d slice (its mask names 2 dimensions)");
    break;
  }
  case IR_WGMMA: {
    if (op->nargs != 5 || op->nres != 1) break; /* reported by the operand count check */
    const struct ir_type *a = vt(v, op->args[0]);
    if (a->layout && a->layout < f->layouts.n && f->layouts.v[a->layout].kind == IR_LAYOUT_SHARED)
      check_buffer(v, id, op->args[0], op->args[1]);
    else if (a->kind != IR_TY_TILE || a->rank != 2 || !a->layout || a->layout >= f->layouts.n ||
             f->layouts.v[a->layout].kind != IR_LAYOUT_DOT_OP || f->layouts.v[a->layout].op_idx != 0 ||
             a->dtype != vt(v, op->args[2])->dtype)
      bad(v, id, "operand A is neither a shared buffer nor a rank-2 register tile in a dot_op<op=0> layout of B's element type");
    check_buffer(v, id, op->args[2], op->args[3]);
    if (!r || f->values.v[op->args[4]].type != f->values.v[op->res].type || r->rank != 2 || r->dtype != DT_F32 ||
        !r->layout || r->layout >= f->layouts.n || f->layouts.v[r->layout].kind != IR_LAYOUT_MMA)
      bad(v, id, "the accumulator and the result must be one rank-2 f32 tile type in an mma layout");
    else if (f->layouts.v[r->layout].instr[0] != 64)
      bad(v, id, "the accumulator's mma layout has m=%d instructions, not wgmma's 64", f->layouts.v[r->layout].instr[0]);
    if (op->i[1] && f->sched.wgmma == 0) bad(v, id, "async wgmma although the schedule forbids wgmma");
    break;
  }
  case IR_WGMMA_WAIT:
    if (op->nres != op->nargs) bad(v, id, "wgmma_wait has %u results for %u operands", op->nres, op->nargs);
    if (op->nargs == 0) bad(v, id, "wgmma_wait names no accumulator to wait for"); /* (codegen ties them) */
    for (uint32_t k = 0; k < op->nargs; k++) {
      const struct ir_type *a = vt(v, op->args[k]);
      if (!is_tile(a) || a->dtype != DT_F32) bad(v, id, "wgmma_wait operand %u is not an f32 accumulator tile", k);
    }
    for (uint32_t k = 0; k < op->nargs && k < op->nres; k++)
      if (f->values.v[op->res + k].type != f->values.v[op->args[k]].type) bad(v, id, "result %u changes type", k);
    if (op->i[0] < 0 || op->i[0] > 7) bad(v, id, "pending must be 0..7");
    break;
  case IR_MBAR_ALLOC:
    if (!r || r->rank != 1 || r->dtype != DT_I64 || r->dims[0] < 1) bad(v, id, "mbarriers are a tile<n x i64>");
    if (op->i[0] < 1 || op->i[0] > 1024) bad(v, id, "count %lld is not in 1..1024", (long long)op->i[0]);
    break;
  case IR_MBAR_WAIT: {
    check_mbar(v, id, op->args[0], op->args[1]);
    int64_t c;
    if (!is_int_scalar(vt(v, op->args[2]))) bad(v, id, "the phase is not an integer scalar");
    else if (folded_int(v, op->args[2], &c) && c != 0 && c != 1) bad(v, id, "the phase parity is %lld", (long long)c);
    break;
  }
  case IR_MBAR_ARRIVE:
    if (op->nargs != 2 && op->nargs != 3) {
      bad(v, id, "mbar_arrive takes bar, slot and an optional predicate");
      break;
    }
    check_mbar(v, id, op->args[0], op->args[1]);
    if (op->nargs == 3 && (!ir_type_is_scalar(vt(v, op->args[2])) || vt(v, op->args[2])->dtype != DT_BOOL))
      bad(v, id, "the predicate is not a bool scalar");
    if (op->i[0] != 1 && op->i[0] != 32 && op->i[0] != 128) bad(v, id, "per must be 1, 32 or 128 threads");
    break;
  case IR_MBAR_EXPECT_TX:
    check_mbar(v, id, op->args[0], op->args[1]);
    if (op->i[0] <= 0 || op->i[0] >= (1 << 20)) bad(v, id, "bytes %lld out of range", (long long)op->i[0]);
    break;
  case IR_TMA_DESC:
    check_tma_desc(v, id);
    break;
  case IR_TMA_LOAD:
  case IR_TMA_REDUCE:
    check_tma_copy(v, id);
    if (!tl_has(f->target, TL_FEAT_TMA)) bad(v, id, "the target has no TMA");
    else if (op->code == IR_TMA_REDUCE) check_bulk_groups(v, id);
    break;
  case IR_BULK_WAIT:
    for (uint32_t k = 0; k < op->nargs; k++) {
      const struct ir_type *t = vt(v, op->args[k]);
      if (t->kind != IR_TY_TILE || !t->layout || f->layouts.v[t->layout].kind != IR_LAYOUT_SHARED)
        bad(v, id, "operand %u is not a shared-memory buffer", k);
    }
    if (op->i[0] < 0 || op->i[0] > 7) bad(v, id, "pending=%lld out of 0..7", (long long)op->i[0]);
    if (!tl_has(f->target, TL_FEAT_TMA)) bad(v, id, "the target has no bulk copies");
    else check_bulk_groups(v, id);
    break;
  case IR_BARRIER:
    if (op->i[1] == 0 && op->i[0] != 0) bad(v, id, "a barrier of every thread is barrier 0");
    if (op->i[1] != 0 && (op->i[0] < 1 || op->i[0] > 15 || op->i[1] % 32 || op->i[1] > ir_func_threads(f)))
      bad(v, id, "named barrier %lld over %lld threads", (long long)op->i[0], (long long)op->i[1]);
    if (v->ws && op->i[1] == 0) bad(v, id, "a barrier of every thread inside a role of warp_specialize");
    if (v->ws && v->role == 1 && op->i[1] != 32 * f->warps)
      bad(v, id, "a consumer barrier must count the %d consumer threads", 32 * f->warps);
    break;
  case IR_TURN_WAIT:
  case IR_TURN_PASS: {
    long long base = (long long)op->i[0], g = (long long)op->i[1];
    if (!v->ws || v->role != 1) bad(v, id, "a turn outside the consumer role of warp_specialize");
    else if (g < 2 || 4 * g != f->warps) bad(v, id, "groups=%lld, but the consumer has %d warpgroups", g, f->warps / 4);
    if (base < 3 || base + g - 1 > 15) bad(v, id, "turn barriers %lld..%lld outside 3..15", base, base + g - 1);
    if (op->code == IR_TURN_PASS && (op->i[2] < 0 || op->i[2] > 2)) bad(v, id, "who=%lld out of range", (long long)op->i[2]);
    break;
  }
  case IR_WARP_SPECIALIZE: {
    int64_t pw = op->i[0], pr = op->i[1], cr = op->i[2]; /* any values the text gave */
    if (op->block != IR_BODY_BLOCK) bad(v, id, "warp_specialize must be at the top level of the body");
    if (pw != 4 || f->warps % 4) {
      bad(v, id, "roles are whole warpgroups (producer_warps=4, warps a multiple of 4)");
      break;
    }
    if (ir_func_threads(f) != 32 * (f->warps + (int)pw))
      bad(v, id, "threads=%d, expected 32 * (warps + producer_warps) = %d", ir_func_threads(f),
          32 * (f->warps + (int)pw));
    if (pr < 24 || pr > 256 || pr % 8 || cr < 24 || cr > 256 || cr % 8) {
      bad(v, id, "register budgets must be multiples of 8 in 24..256");
      break;
    }
    unsigned held = f->target ? tl_block_regs(f->target, (unsigned)ir_func_threads(f)) : 0;
    if (f->target && 32 * pw * pr + 32 * f->warps * cr > (int64_t)held)
      bad(v, id, "registers %d x %d + %d x %d exceed the %u a block of %d threads holds", 32 * (int)pw, (int)pr,
          32 * f->warps, (int)cr, held, ir_func_threads(f));
    if (!tl_has(f->target, TL_FEAT_SETMAXNREG)) bad(v, id, "the target has no setmaxnreg");
    break;
  }
  default:
    break;
  }
}

/* Whether wait op `w` ({pending=n}) completes value a: a is the result of an async wgmma
 * earlier in the wait's block with at least n async wgmma issued between them (groups
 * complete in order, so the n newest may stay in flight). */
static bool completed_by(const struct ir_func *f, uint32_t w, ir_val a) {
  uint32_t d = ir_def_op(f, a);
  if (!d || f->ops.v[d].code != IR_WGMMA || !f->ops.v[d].i[1] || f->ops.v[d].block != f->ops.v[w].block) return false;
  const struct ir_block *b = &f->blocks.v[f->ops.v[w].block];
  int64_t later = -1;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (b->ops.v[i] == d) later = 0;
    else if (b->ops.v[i] == w) return later >= f->ops.v[w].i[0];
    else if (later >= 0 && op->code == IR_WGMMA && op->i[1]) later++;
    else if (later >= 0 && op->nregions) { /* groups issued in nested blocks: not counted */
      static const uint16_t wgmma[1] = {IR_WGMMA};
      for (uint32_t r = 0; r < op->nregions; r++)
        if (ir_block_has_op(f, op->region + r, wgmma, 1)) return false;
    }
  }
  return false;
}

/* Which values are in-flight wgmma accumulators: results of async wgmma and of waits with
 * pending > 0, and what loops and branches carry from them (to a fixed point). */
static void pending_values(struct verifier *v) {
  const struct ir_func *f = v->f;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t id = 1; id < f->ops.n; id++) {
      const struct ir_op *op = &f->ops.v[id];
      if (!op->block) continue;
      if (op->code == IR_WGMMA && op->i[1] && !v->pending[op->res]) changed = true, v->pending[op->res] = 1;
      if (op->code == IR_WGMMA_WAIT && op->i[0] > 0)
        for (uint32_t k = 0; k < op->nres && k < op->nargs; k++)
          if (!v->pending[op->res + k] && !completed_by(f, id, op->args[k]))
            changed = true, v->pending[op->res + k] = 1;
      if (op->code != IR_FOR && op->code != IR_IF) continue;
      for (uint32_t g = 0; g < op->nregions; g++) {
        const struct ir_block *b = &f->blocks.v[op->region + g];
        if (!b->ops.n) continue;
        const struct ir_op *y = &f->ops.v[VEC_LAST(b->ops)];
        if (y->code != IR_YIELD) continue;
        for (uint32_t k = 0; k < y->nargs && k < op->nres; k++) {
          if (y->args[k] >= f->values.n || !v->pending[y->args[k]]) continue;
          if (!v->pending[op->res + k]) changed = true, v->pending[op->res + k] = 1;
          if (op->code == IR_FOR && !v->pending[b->args + 1 + k]) changed = true, v->pending[b->args + 1 + k] = 1;
        }
      }
    }
  }
}

/* A pending operand is legal only as the accumulator of an async wgmma, in a wait or in a
 * yield (which makes the carried value pending too). */
static void check_pending_uses(struct verifier *v, uint32_t id) {
  const struct ir_op *op = &v->f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++) {
    ir_val a = op->args[k];
    if (a >= v->f->values.n || !v->pending[a]) continue;
    bool ok = op->code == IR_WGMMA_WAIT || op->code == IR_YIELD || (op->code == IR_WGMMA && op->i[1] && k == 4);
    if (!ok) bad(v, id, "operand %u is an in-flight wgmma accumulator (wait for it first)", k);
  }
  if (op->code == IR_WGMMA_WAIT)
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] < v->f->values.n && !v->pending[op->args[k]]) bad(v, id, "operand %u is not in flight", k);
}

/* GPU IR: reshape, permute, join and split move no data (codegen renames registers), so the
 * result's layout must hold in each thread the elements the op puts there from the
 * operand's registers of that thread (layout.h: ll_shape_view). */
static void check_shape_op_layouts(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_type *a = vt(v, op->args[0]), *r = vt(v, op->res);
  struct ll src, dst, view;
  if (a->kind != IR_TY_TILE || r->kind != IR_TY_TILE || !a->layout || !r->layout || a->rank < 1 || r->rank < 1 ||
      !ll_of_type(f, a, f->warps, &src) || !ll_of_type(f, r, f->warps, &dst))
    return; /* the type rules report these */
  uint32_t *map = ARENA_NEWN(v->scratch, uint32_t, ll_num_regs(&dst));
  if (!ll_shape_view(op->code, op->i[0], &src, r->rank, r->dims, &view, NULL) || !ll_register_map(&dst, &view, map))
    bad(v, id, "the result's layout is not the operand's relabeled: this op cannot move data between threads");
}

/* Stage rules for one op. */
static void check_stage(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_opinfo *info = &ir_ops[op->code];
  if ((info->flags & OPF_GPU) && f->stage == IR_STAGE_GENERIC) {
    bad(v, id, "a GPU op in generic IR (no layout pass has run)");
    return;
  }
  if (f->stage >= IR_STAGE_GPU && !v->in_grid)
    for (uint32_t r = 0; r < op->nres; r++) {
      const struct ir_type *t = vt(v, op->res + r);
      if (t->kind == IR_TY_TILE && t->rank > 0 && !t->layout && op->code != IR_MBAR_ALLOC)
        bad(v, id, "result %u has no layout in GPU IR", r);
      /* a distributed layout must describe the tile with the function's warps (codegen
       * builds it so); textual IR can name any */
      struct ll l;
      if (t->kind == IR_TY_TILE && t->rank > 0 && t->layout && t->layout < f->layouts.n &&
          f->layouts.v[t->layout].kind != IR_LAYOUT_SHARED && op->code != IR_MBAR_ALLOC &&
          !ll_of_type(f, t, f->warps, &l))
        bad(v, id, "result %u: layout #%u cannot describe a rank-%d tile of this shape with %d warps", r, t->layout,
            t->rank, f->warps);
    }
  /* the same for the values a region's block defines (a loop's carried values) */
  for (uint32_t rg = 0; f->stage >= IR_STAGE_GPU && !v->in_grid && rg < op->nregions; rg++) {
    const struct ir_block *b = &f->blocks.v[op->region + rg];
    for (uint32_t k = 0; k < b->nargs; k++) {
      const struct ir_type *t = vt(v, b->args + k);
      struct ll l;
      if (t->kind == IR_TY_TILE && t->rank > 0 &&
          (!t->layout || (t->layout < f->layouts.n && f->layouts.v[t->layout].kind != IR_LAYOUT_SHARED &&
                          !ll_of_type(f, t, f->warps, &l))))
        bad(v, id, "region %u argument %u has no usable layout in GPU IR", rg, k);
    }
  }
  if (f->stage >= IR_STAGE_GPU && op->nargs >= 1 && op->nres == 1 &&
      (op->code == IR_RESHAPE || op->code == IR_PERMUTE || op->code == IR_JOIN || op->code == IR_SPLIT))
    check_shape_op_layouts(v, id);
  /* a reduction keeps each thread's elements: its result is the operand's layout sliced
   * along the reduced axis (codegen finds each input register's place in the result so) */
  if (f->stage >= IR_STAGE_GPU && !v->in_grid && op->nargs == 1 && op->nres == 1 &&
      (op->code == IR_REDUCE_SUM || op->code == IR_REDUCE_MAX || op->code == IR_REDUCE_MIN)) {
    const struct ir_type *a = vt(v, op->args[0]), *r = vt(v, op->res);
    if (is_tile(a) && is_tile(r) && r->rank > 0 && r->layout && r->layout < f->layouts.n) {
      const struct ir_layout *rl = &f->layouts.v[r->layout];
      if (rl->kind != IR_LAYOUT_SLICE || rl->dim != op->i[0] || rl->parent != a->layout)
        bad(v, id, "the result's layout #%u is not the operand's layout #%u sliced along axis %lld", r->layout,
            a->layout, (long long)op->i[0]);
    }
  }
  if (f->stage >= IR_STAGE_ALLOCATED && (op->code == IR_LOCAL_ALLOC || op->code == IR_MBAR_ALLOC)) {
    int64_t off = op->code == IR_LOCAL_ALLOC ? op->i[0] : op->i[1];
    int64_t align = op->code == IR_LOCAL_ALLOC ? 128 : 8;
    /* (whether it fits the device is the runtime's check: an over-large configuration is
     * a resource error the tuner prunes, not broken IR) */
    if (off < 0 || off % align || off >= (1 << 24))
      bad(v, id, "offset %lld is not a %lld-byte aligned place in shared memory", (long long)off, (long long)align);
  }
}

static void check_op_types(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_opinfo *info = &ir_ops[op->code];
  /* a wrong operand or result count is reported by verify_op; the rules below index them */
  if ((info->nargs >= 0 && op->nargs != (uint32_t)info->nargs) || (info->nres >= 0 && op->nres != (uint32_t)info->nres))
    return;
  if (info->flags & OPF_ELEM) {
    check_elementwise(v, id);
    return;
  }
  const struct ir_type *r = op->nres ? vt(v, op->res) : NULL;
  switch (op->code) {
  case IR_CONST:
    if (!is_tile(r)) bad(v, id, "constant must be a scalar or tile");
    break;
  case IR_ARANGE:
    if (!is_tile(r) || r->rank != 1 || r->dtype != DT_I32) bad(v, id, "arange gives a rank-1 i32 tile");
    break;
  case IR_PROGRAM_ID: case IR_NUM_PROGRAMS:
    if (!ir_type_is_scalar(r) || r->dtype != DT_I32) bad(v, id, "result must be an i32 scalar");
    if (op->i[0] < 0 || op->i[0] > 2) bad(v, id, "axis must be 0, 1 or 2");
    break;
  case IR_SPLAT: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!ir_type_is_scalar(a) || !is_tile(r) || a->dtype != r->dtype)
      bad(v, id, "splat takes a scalar to a tile of the same element type");
    break;
  }
  case IR_BROADCAST: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || !is_tile(r) || a->rank != r->rank || a->dtype != r->dtype) {
      bad(v, id, "broadcast keeps rank and element type");
      break;
    }
    for (int i = 0; i < a->rank; i++)
      if (a->dims[i] != r->dims[i] && a->dims[i] != 1) bad(v, id, "dimension %d is neither equal nor 1", i);
    break;
  }
  case IR_EXPAND_DIMS: {
    const struct ir_type *a = vt(v, op->args[0]);
    int64_t ax = op->i[0];
    if (!is_tile(a) || !is_tile(r) || r->rank != a->rank + 1 || ax < 0 || ax > a->rank ||
        r->dims[ax] != 1 || a->dtype != r->dtype) {
      bad(v, id, "bad expand_dims");
      break;
    }
    for (int i = 0, j = 0; i < r->rank; i++)
      if (i != ax && r->dims[i] != a->dims[j++]) bad(v, id, "expand_dims changes a dimension");
    break;
  }
  case IR_TRANS: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || a->rank != 2 || !is_tile(r) || r->rank != 2 || r->dims[0] != a->dims[1] ||
        r->dims[1] != a->dims[0] || a->dtype != r->dtype)
      bad(v, id, "trans takes [a,b] to [b,a]");
    break;
  }
  case IR_RESHAPE: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || !is_tile(r) || a->rank < 1 || r->rank < 1 || a->dtype != r->dtype ||
        ir_type_numel(a) != ir_type_numel(r))
      bad(v, id, "reshape keeps the element type and the number of elements of a tile");
    break;
  }
  case IR_PERMUTE: {
    const struct ir_type *a = vt(v, op->args[0]);
    int perm[IR_MAX_RANK];
    if (!is_tile(a) || !is_tile(r) || a->rank < 1 || r->rank != a->rank || a->dtype != r->dtype) {
      bad(v, id, "permute keeps the rank and element type of a tile");
      break;
    }
    if (!ir_perm_decode(op->i[0], a->rank, perm)) {
      bad(v, id, "perm=%lld is not a permutation of the %d dimensions", (long long)op->i[0], a->rank);
      break;
    }
    for (int i = 0; i < r->rank; i++)
      if (r->dims[i] != a->dims[perm[i]]) bad(v, id, "result dimension %d is not operand dimension %d", i, perm[i]);
    break;
  }
  case IR_JOIN: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (f->values.v[op->args[0]].type != f->values.v[op->args[1]].type) {
      bad(v, id, "join operands must have one type");
      break;
    }
    if (!is_tile(a) || a->rank < 1 || !is_tile(r) || r->rank != a->rank + 1 || r->dtype != a->dtype ||
        r->dims[a->rank] != 2 || memcmp(r->dims, a->dims, sizeof(int32_t) * a->rank) != 0)
      bad(v, id, "join takes two [d...] tiles to [d..., 2]");
    break;
  }
  case IR_SPLIT: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || a->rank < 2 || a->dims[a->rank - 1] != 2 || !is_tile(r) || r->rank != a->rank - 1 ||
        r->dtype != a->dtype || memcmp(r->dims, a->dims, sizeof(int32_t) * r->rank) != 0)
      bad(v, id, "split takes a [d..., 2] tile to [d...]");
    if (op->i[0] != 0 && op->i[0] != 1) bad(v, id, "half must be 0 or 1");
    break;
  }
  case IR_REDUCE_SUM: case IR_REDUCE_MAX: case IR_REDUCE_MIN: {
    const struct ir_type *a = vt(v, op->args[0]);
    int64_t ax = op->i[0];
    if (!is_tile(a) || a->rank < 1 || ax < 0 || ax >= a->rank || !is_tile(r) ||
        r->rank != a->rank - 1 || r->dtype != a->dtype) {
      bad(v, id, "bad reduction");
      break;
    }
    if (a->dtype == DT_BOOL) bad(v, id, "reduction of bool");
    for (int i = 0, j = 0; i < a->rank; i++)
      if (i != ax && a->dims[i] != r->dims[j++]) bad(v, id, "reduction changes a kept dimension");
    break;
  }
  case IR_SCAN_SUM: case IR_SCAN_PROD: case IR_SCAN_MAX: case IR_SCAN_MIN: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || a->rank < 1 || op->i[0] < 0 || op->i[0] >= a->rank) {
      bad(v, id, "bad scan: a tile of rank >= 1 and an axis within it");
      break;
    }
    if (f->values.v[op->res].type != f->values.v[op->args[0]].type)
      bad(v, id, "scan result type must equal the operand's");
    if (a->dtype == DT_BOOL) bad(v, id, "scan of bool");
    if (op->i[1] != 0 && op->i[1] != 1) bad(v, id, "reverse must be 0 or 1");
    break;
  }
  case IR_DOT: {
    const struct ir_type *a = vt(v, op->args[0]), *b = vt(v, op->args[1]), *c = vt(v, op->args[2]);
    if (a->rank != 2 || b->rank != 2 || c->rank != 2 || a->dims[1] != b->dims[0] ||
        c->dims[0] != a->dims[0] || c->dims[1] != b->dims[1]) {
      bad(v, id, "dot shapes do not chain: [M,K] @ [K,N] + [M,N]");
      break;
    }
    if (a->dtype != b->dtype) bad(v, id, "dot operands differ in element type");
    if (op->res && f->values.v[op->res].type != f->values.v[op->args[2]].type)
      bad(v, id, "dot result type must equal the accumulator's");
    if (!ir_dtype_is_float(c->dtype)) bad(v, id, "dot accumulator must be a float tile");
    /* Tensor Core dots: the operands in the accumulator's dot_op layouts, as the layout
     * pass makes them (codegen finds each fragment in the thread's registers by them) */
    if (f->stage >= IR_STAGE_GPU && r && r->layout && r->layout < f->layouts.n &&
        f->layouts.v[r->layout].kind == IR_LAYOUT_MMA)
      for (int k = 0; k < 2; k++) {
        const struct ir_type *x = k ? b : a;
        const struct ir_layout *l = x->layout < f->layouts.n ? &f->layouts.v[x->layout] : NULL;
        int kw = x->dtype == DT_F32 ? 1 : 2;
        if (!l || l->kind != IR_LAYOUT_DOT_OP || l->op_idx != k || l->parent != r->layout || l->k_width != kw)
          bad(v, id, "operand %d of a Tensor Core dot must have layout dot_op<op=%d, parent=#%u, kwidth=%d>", k, k,
              r->layout, kw);
      }
    break;
  }
  case IR_ALIGN_SHIFT: {
    const struct ir_type *t = op->nargs ? vt(v, op->args[0]) : NULL;
    if (!t || t->kind != IR_TY_TENSOR || !ir_param_of(v->f, op->args[0]) || op->nargs != 1u + (uint32_t)t->rank) {
      bad(v, id, "align_shift takes a tensor parameter and one index per dimension");
      break;
    }
    for (uint32_t k = 1; k < op->nargs; k++)
      if (!is_int_scalar(vt(v, op->args[k]))) bad(v, id, "index %u is not an integer scalar", k - 1);
    if (!ir_type_is_scalar(vt(v, op->res)) || vt(v, op->res)->dtype != DT_I32) bad(v, id, "align_shift gives an i32");
    if (op->i[0] != 16) bad(v, id, "bytes=%lld (16 only)", (long long)op->i[0]);
    break;
  }
  case IR_CLUSTER_RANK: case IR_CLUSTER_REDUCE: {
    const struct ir_type *rt = vt(v, op->res);
    if (v->f->cluster < 2) bad(v, id, "%s outside a function with cluster=C", ir_ops[op->code].name);
    if (op->code == IR_CLUSTER_RANK) {
      if (!ir_type_is_scalar(rt) || rt->dtype != DT_I32) bad(v, id, "cluster_rank gives an i32");
      break;
    }
    const struct ir_type *a = vt(v, op->args[0]);
    if (!ir_type_is_scalar(a) || (a->dtype != DT_F32 && a->dtype != DT_I32 && a->dtype != DT_U32) || rt != a)
      bad(v, id, "cluster_reduce takes and gives one 32-bit scalar type (f32, i32, u32)");
    if (op->i[0] < 0 || op->i[0] > 2) bad(v, id, "kind=%lld (0 sum, 1 max, 2 min)", (long long)op->i[0]);
    break;
  }
  case IR_LOAD: case IR_STORE:
    check_memory(v, id);
    if (op->code == IR_LOAD) check_fill(v, id);
    break;
  case IR_GATHER: case IR_SCATTER: case IR_ATOMIC:
    check_indexed(v, id);
    if (op->code == IR_GATHER) check_fill(v, id);
    break;
  case IR_FOR: {
    if (op->nargs < 3) {
      bad(v, id, "for needs lb, ub, step");
      break;
    }
    const struct ir_type *lb = vt(v, op->args[0]);
    if (!is_int_scalar(lb) || vt(v, op->args[1]) != lb || vt(v, op->args[2]) != lb)
      bad(v, id, "loop bounds and step must be integer scalars of one type");
    if (op->nres != op->nargs - 3) {
      bad(v, id, "for has %u results for %u carried values", op->nres, op->nargs - 3);
      break;
    }
    /* (the language's range() takes stages 0..16; the pipeline allocates one buffer each) */
    if (op->i[0] < 0 || op->i[0] > 16) bad(v, id, "stages=%lld out of range 0..16", (long long)op->i[0]);
    if (op->i[1] < 0 || op->i[1] > 16) bad(v, id, "depth=%lld out of range 0..16", (long long)op->i[1]);
    /* (a register prefetch of at most 4 iterations ahead, unrolled one more time) */
    if (op->i[2] < 0 || op->i[2] > 8) bad(v, id, "unroll=%lld out of range 0..8", (long long)op->i[2]);
    const struct ir_block *body = &f->blocks.v[op->region];
    if (body->nargs != op->nargs - 2) {
      bad(v, id, "for body has %u arguments, expected %u", body->nargs, op->nargs - 2);
      break;
    }
    if (f->values.v[body->args].type != f->values.v[op->args[0]].type)
      bad(v, id, "induction variable type differs from the bounds'");
    for (uint32_t i = 0; i < op->nres; i++) {
      ir_type_id t = f->values.v[op->args[3 + i]].type;
      if (f->values.v[op->res + i].type != t || f->values.v[body->args + 1 + i].type != t)
        bad(v, id, "carried value %u changes type", i);
    }
    ir_val want[256];
    uint32_t n = TL_MIN(op->nres, 256u);
    for (uint32_t i = 0; i < n; i++) want[i] = op->res + i;
    check_region_end(v, id, op->region, want, n, "for body");
    break;
  }
  case IR_IF: {
    const struct ir_type *c = vt(v, op->args[0]);
    if (!ir_type_is_scalar(c) || c->dtype != DT_BOOL) bad(v, id, "if condition must be a bool scalar");
    ir_val want[256];
    uint32_t n = TL_MIN((uint32_t)op->nres, 256u);
    for (uint32_t i = 0; i < n; i++) want[i] = op->res + i;
    check_region_end(v, id, op->region, want, n, "then branch");
    check_region_end(v, id, op->region + 1, want, n, "else branch");
    break;
  }
  case IR_CONVERT_LAYOUT: {
    const struct ir_type *a = vt(v, op->args[0]);
    if (!is_tile(a) || !same_shape(a, r) || a->dtype != r->dtype || !r->layout)
      bad(v, id, "convert_layout changes only the layout");
    break;
  }
  case IR_GRID:
    for (uint32_t k = 0; k < op->nargs; k++)
      if (!is_int_scalar(vt(v, op->args[k]))) bad(v, id, "grid sizes must be integer scalars");
    break;
  case IR_WARP_SPECIALIZE:
    check_gpu_op(v, id);
    check_region_end(v, id, op->region, NULL, 0, "producer region");
    check_region_end(v, id, op->region + 1, NULL, 0, "consumer region");
    break;
  default:
    if (info->flags & OPF_GPU) check_gpu_op(v, id);
    break;
  }
}

static void verify_block(struct verifier *v, uint32_t blk, uint32_t parent_code);

static void verify_op(struct verifier *v, uint32_t blk, uint32_t id, bool last) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  if (op->code == IR_NONE || op->code >= IR__COUNT) {
    bad(v, id, "invalid opcode %u", op->code);
    return;
  }
  const struct ir_opinfo *info = &ir_ops[op->code];
  if (op->block != blk) bad(v, id, "op records block %u but sits in block %u", op->block, blk);
  if (info->nargs >= 0 && op->nargs != (uint32_t)info->nargs)
    bad(v, id, "expected %d operands, found %u", info->nargs, op->nargs);
  if (info->nres >= 0 && op->nres != (uint32_t)info->nres)
    bad(v, id, "expected %d results, found %u", info->nres, op->nres);
  if (op->nregions != (uint32_t)info->nregions) bad(v, id, "wrong number of regions");
  if ((info->flags & OPF_TERM) && !last) bad(v, id, "terminator in the middle of a block");
  if (v->in_grid && op->code != IR_GRID && op->code != IR_CONST && !(info->flags & OPF_ELEM) &&
      op->code != IR_IF && op->code != IR_YIELD)
    bad(v, id, "op not allowed in the grid block");
  for (uint32_t k = 0; k < op->nargs; k++) {
    ir_val a = op->args[k];
    if (a == 0 || a >= f->values.n) {
      bad(v, id, "operand %u is not a value", k);
      return;
    }
    if (!v->defined[a]) {
      bad(v, id, "operand %u is used before its definition or outside its scope", k);
      return;
    }
    /* a role renumbers its warps: a distributed tile computed before the split would be
     * held by the wrong threads */
    if (v->ws && v->outside[a]) {
      const struct ir_type *t = vt(v, a);
      const struct ir_layout *l = &f->layouts.v[t->layout];
      if (t->kind == IR_TY_TILE && t->rank > 0 && t->layout && l->kind != IR_LAYOUT_SHARED && op->code != IR_TMA_LOAD)
        bad(v, id, "operand %u is a tile computed outside the warp_specialize role", k);
    }
  }
  check_stage(v, id);
  check_pending_uses(v, id);
  for (uint32_t r = 0; r < op->nres; r++) {
    ir_val x = op->res + r;
    if (x >= f->values.n || f->values.v[x].def != id || f->values.v[x].kind != IR_VAL_RESULT) {
      bad(v, id, "result %u is not linked to this op", r);
      return;
    }
  }
  if (v->in_grid) {
    for (uint32_t r = 0; r < op->nres; r++)
      if (!ir_type_is_scalar(vt(v, op->res + r))) bad(v, id, "grid block values must be scalars");
  }
  check_op_types(v, id);
  if (op->code == IR_WARP_SPECIALIZE) {
    if (v->ws) bad(v, id, "nested warp_specialize");
    for (uint32_t x = 1; x < f->values.n; x++) v->outside[x] = v->defined[x];
    v->ws = id;
  }
  for (uint32_t r = 0; r < op->nregions; r++) {
    if (op->code == IR_WARP_SPECIALIZE) v->role = (int)r;
    verify_block(v, op->region + r, op->code);
  }
  if (op->code == IR_WARP_SPECIALIZE) v->ws = 0;
  for (uint32_t r = 0; r < op->nres; r++) v->defined[op->res + r] = 1;
}

static void verify_block(struct verifier *v, uint32_t blk, uint32_t parent_code) {
  const struct ir_func *f = v->f;
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->nargs; i++) v->defined[b->args + i] = 1;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    if (id == 0 || id >= f->ops.n) {
      bad_func(v, "block %u holds invalid op id %u", blk, id);
      continue;
    }
    const struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_YIELD && parent_code != IR_FOR && parent_code != IR_IF && parent_code != IR_WARP_SPECIALIZE)
      bad(v, id, "yield outside a for, if or warp_specialize");
    if (op->code == IR_GRID && blk != IR_GRID_BLOCK) bad(v, id, "grid outside the grid block");
    verify_op(v, blk, id, i + 1 == b->ops.n);
  }
  /* turns: each warpgroup's waits in this block have as many passes into its barrier
   * (warpgroup 0 gets the every-warpgroup passes and the last one's, the others the
   * every-warpgroup passes and those of all but the last) */
  int waits = 0, pass[3] = {0, 0, 0};
  uint32_t first = 0;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_TURN_WAIT) waits++;
    else if (op->code == IR_TURN_PASS && op->i[2] >= 0 && op->i[2] <= 2) pass[op->i[2]]++;
    else continue;
    if (!first) first = b->ops.v[i];
  }
  if (first && (waits != pass[0] + pass[1] || waits != pass[0] + pass[2]))
    bad(v, first, "unbalanced turns in this block: %d waits; passes %d (every warpgroup), %d (the last), %d (all but the last)",
        waits, pass[0], pass[1], pass[2]);
  /* leaving the block: its values go out of scope */
  for (uint32_t i = 0; i < b->nargs; i++) v->defined[b->args + i] = 0;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (b->ops.v[i] == 0 || b->ops.v[i] >= f->ops.n) continue;
    for (uint32_t r = 0; r < op->nres; r++) v->defined[op->res + r] = 0;
  }
}

bool ir_verify(const struct ir_func *f, const char *after, struct strbuf *err) {
  struct arena scratch;
  arena_init_child(&scratch, f->arena);
  struct verifier v = {f, after, err, ARENA_NEWN(&scratch, uint8_t, f->values.n + 1),
                       ARENA_NEWN(&scratch, uint8_t, f->values.n + 1), ARENA_NEWN(&scratch, uint8_t, f->values.n + 1),
                       0, ARENA_NEWN(&scratch, uint8_t, f->values.n + 1), ARENA_NEWN(&scratch, ir_scalar, f->values.n + 1),
                       false, 0, 0, &scratch};
  fold_block(&v, IR_GRID_BLOCK);
  fold_block(&v, IR_BODY_BLOCK);
  if (f->stage > IR_STAGE_GENERIC && !f->target) bad_func(&v, "GPU IR without a target");
  if (f->threads && (f->threads % 32 || f->threads > 1024 || f->threads < 32 * f->warps))
    bad_func(&v, "threads=%d for warps=%d", f->threads, f->warps);
  if (f->cluster > 1 && !tl_has(f->target, TL_FEAT_CLUSTER))
    bad_func(&v, "cluster=%u on a target without thread-block clusters (%s)", (unsigned)f->cluster,
             f->target ? f->target->name : "no target");
  pending_values(&v);
  unsigned slots = 0;
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->value && p->value < f->values.n) v.defined[p->value] = 1;
    slots += p->kind == IR_PARAM_TENSOR && p->value && p->value < f->values.n ? 1 + ir_vtype(f, p->value)->rank : 1;
  }
  if (slots > TL_MAX_PARAM_SLOTS)
    bad_func(&v, "the parameters take %u slots; at most %d can be passed", slots, TL_MAX_PARAM_SLOTS);
  if (f->warps < 1 || f->warps > 32 || !tl_is_pow2(f->warps))
    bad_func(&v, "warps=%d is not a power of two in 1..32", f->warps);
  v.in_grid = true;
  verify_block(&v, IR_GRID_BLOCK, 0);
  const struct ir_block *g = &f->blocks.v[IR_GRID_BLOCK];
  if (g->ops.n == 0 || f->ops.v[VEC_LAST(g->ops)].code != IR_GRID)
    bad_func(&v, "the grid block does not end with 'grid'");
  v.in_grid = false;
  verify_block(&v, IR_BODY_BLOCK, 0);
  arena_free(&scratch);
  if (v.nerrors > 20) sb_printf(err, "ir verifier: ... %d more errors\n", v.nerrors - 20);
  return v.nerrors == 0;
}
