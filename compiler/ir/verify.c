/* verify.c - structural and typing invariants of Tile IR.
 *
 * Runs after every pass in debug and test builds (QBE's ssacheck). It checks:
 *  - structure: each op sits in the block that it records, terminators end their blocks
 *    (YIELD ends for/if regions, GRID ends the grid block), operand and result counts;
 *  - scoping: every operand is defined before its use in the same block or an enclosing
 *    one; grid-block values never reach the body;
 *  - types: per-op rules (elementwise operands agree, dot shapes chain, loads/stores index
 *    every tensor dimension, loop-carried and branch results match their yields).
 * Every failure names the op (with its printed opcode and source line) and the pass that ran
 * last, and verification continues so that one run reports every broken invariant.       */
#include <string.h>

#include "ir.h"

struct verifier {
  const struct ir_func *f;
  const char *after;
  struct strbuf *err;
  uint8_t *defined; /* value -> visible at this point */
  int nerrors;
  bool in_grid;
};

static void TL_PRINTF(3, 4) bad(struct verifier *v, uint32_t op, const char *fmt, ...) {
  if (v->nerrors++ >= 20) return;
  const struct ir_op *o = &v->f->ops.v[op];
  sb_puts(v->err, "ir verifier");
  if (v->after) sb_printf(v->err, " (after pass %s)", v->after);
  sb_printf(v->err, ": @%s: op %u '%s'", v->f->name, op, ir_ops[o->code].name);
  if (o->loc.line) sb_printf(v->err, " (line %u)", o->loc.line);
  sb_puts(v->err, ": ");
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(v->err, fmt, ap);
  va_end(ap);
  sb_putc(v->err, '\n');
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
  case IR_SHL: case IR_SHR:
    if (cls != DTC_INT) bad(v, id, "needs int operands");
    break;
  case IR_NEG: case IR_ABS: case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV: case IR_REM:
  case IR_MIN: case IR_MAX:
    if (cls != DTC_INT && cls != DTC_FLOAT) bad(v, id, "needs numeric operands");
    break;
  default:
    break;
  }
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
  if (op->nargs != want) {
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

static void check_op_types(struct verifier *v, uint32_t id) {
  const struct ir_func *f = v->f;
  const struct ir_op *op = &f->ops.v[id];
  const struct ir_opinfo *info = &ir_ops[op->code];
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
    break;
  }
  case IR_LOAD: case IR_STORE:
    check_memory(v, id);
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
  default:
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
  }
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
  for (uint32_t r = 0; r < op->nregions; r++) verify_block(v, op->region + r, op->code);
  for (uint32_t r = 0; r < op->nres; r++) v->defined[op->res + r] = 1;
}

static void verify_block(struct verifier *v, uint32_t blk, uint32_t parent_code) {
  const struct ir_func *f = v->f;
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->nargs; i++) v->defined[b->args + i] = 1;
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    if (id == 0 || id >= f->ops.n) {
      sb_printf(v->err, "ir verifier: block %u holds invalid op id %u\n", blk, id);
      v->nerrors++;
      continue;
    }
    const struct ir_op *op = &f->ops.v[id];
    if (op->code == IR_YIELD && parent_code != IR_FOR && parent_code != IR_IF)
      bad(v, id, "yield outside a for or if");
    if (op->code == IR_GRID && blk != IR_GRID_BLOCK) bad(v, id, "grid outside the grid block");
    verify_op(v, blk, id, i + 1 == b->ops.n);
  }
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
  arena_init(&scratch, &f->arena->alloc, f->arena->oom);
  struct verifier v = {f, after, err, ARENA_NEWN(&scratch, uint8_t, f->values.n + 1), 0, false};
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->value && p->value < f->values.n) v.defined[p->value] = 1;
  }
  if (f->warps < 1 || f->warps > 32 || !tl_is_pow2(f->warps))
    sb_printf(err, "ir verifier: @%s: warps=%d is not a power of two in 1..32\n", f->name, f->warps),
        v.nerrors++;
  v.in_grid = true;
  verify_block(&v, IR_GRID_BLOCK, 0);
  const struct ir_block *g = &f->blocks.v[IR_GRID_BLOCK];
  if (g->ops.n == 0 || f->ops.v[VEC_LAST(g->ops)].code != IR_GRID)
    sb_printf(err, "ir verifier: @%s: the grid block does not end with 'grid'\n", f->name), v.nerrors++;
  v.in_grid = false;
  verify_block(&v, IR_BODY_BLOCK, 0);
  arena_free(&scratch);
  if (v.nerrors > 20) sb_printf(err, "ir verifier: ... %d more errors\n", v.nerrors - 20);
  return v.nerrors == 0;
}
