/* sema_call.c - calls: builtins, casts and their argument binding.
 *
 * Each builtin has a signature string in BUILTINS (sema.h), e.g. "x, y?, axis?": parameter
 * names in order, `?` marking optional ones. Arguments bind positionally first, then by name;
 * an unknown or repeated name, a missing required argument or too many positional ones is
 * reported naming the builtin and listing its parameters. The bound arguments are kept in
 * the call's sema_info (args[slot]) so irgen reads them by slot, not by position.
 *
 * Function names and value names live apart: `sum(x)` calls the builtin even where a local
 * named `sum` is in scope. A call whose callee is a dtype (`f16(x)`, or `T(x)` for a dtype
 * parameter T) is a conversion.
 *
 * Calls on compile-time constants fold (cdiv, min, max, the math functions, casts), so they
 * can size tiles and appear in `where` constraints and file constants. */
#include <math.h>
#include <string.h>

#include "eval.h"
#include "sema.h"

const char *const builtin_names[BI__COUNT] = {
#define X(id, name, sig) name,
    BUILTINS(X)
#undef X
};

const char *const builtin_sigs[BI__COUNT] = {
#define X(id, name, sig) sig,
    BUILTINS(X)
#undef X
};

struct sig {
  const char *names[MAX_BUILTIN_ARGS];
  bool optional[MAX_BUILTIN_ARGS];
  int n, required;
};

static void parse_sig(struct sema *s, const char *text, struct sig *sig) {
  memset(sig, 0, sizeof *sig);
  const char *p = text;
  while (*p && sig->n < MAX_BUILTIN_ARGS) {
    while (*p == ' ' || *p == ',') p++;
    const char *start = p;
    while (*p && *p != ',' && *p != '?') p++;
    sig->names[sig->n] = strtab_intern(s->ctx->strs, start, (size_t)(p - start));
    if (*p == '?') {
      sig->optional[sig->n] = true;
      p++;
    } else {
      sig->required++;
    }
    sig->n++;
  }
}

/* Binds the call's arguments to the signature's slots. */
static bool bind_args(struct sema *s, struct ast_node *n, const char *fname, const char *sigtext,
                      struct ast_node **slots) {
  struct sig sig;
  parse_sig(s, sigtext, &sig);
  int npos = 0;
  bool ok = true;
  for (uint32_t k = 0; k < n->list.n; k++) {
    struct ast_node *arg = n->list.v[k];
    if (arg->kind != AST_NAMED_ARG) {
      if (npos < sig.n && !slots[npos]) slots[npos] = arg;
      else if (npos >= sig.n) {
        ok = lang_error(s->ctx, arg->loc, D_ARG_COUNT, "%s() takes at most %d argument%s (%s), found %u",
                        fname, sig.n, sig.n == 1 ? "" : "s", sigtext, n->list.n);
        return false;
      }
      npos++;
      continue;
    }
    int slot = -1;
    for (int q = 0; q < sig.n; q++)
      if (sig.names[q] == arg->name) slot = q;
    if (slot < 0) {
      ok = lang_error(s->ctx, arg->loc2, D_ARG_NAME, "%s() has no argument named `%s`; its arguments are (%s)",
                      fname, arg->name, sigtext);
      continue;
    }
    if (slots[slot]) {
      ok = lang_error(s->ctx, arg->loc2, D_ARG_NAME, "argument `%s` of %s() is given twice", arg->name,
                      fname);
      continue;
    }
    slots[slot] = arg->a;
  }
  if (!ok) return false;
  for (int q = 0; q < sig.n; q++)
    if (!sig.optional[q] && !slots[q])
      return lang_error(s->ctx, n->loc, D_ARG_COUNT, "%s() needs argument `%s`: %s(%s)", fname,
                        sig.names[q], fname, sigtext);
  return true;
}

static struct sema_info *poison(struct sema_info *i) {
  i->ty.kind = STY_ERROR;
  i->is_const = false;
  return i;
}

static bool is_err(const struct sema_info *i) { return i->ty.kind == STY_ERROR; }

static bool value_arg(struct sema *s, struct ast_node *n, const char *fname, const char *arg,
                      struct sema_info **out) {
  struct sema_info *i = sema_expr(s, n);
  *out = i;
  if (is_err(i)) return false;
  if (i->ty.kind != STY_VAL)
    return lang_error(s->ctx, n->loc, D_ARG_TYPE, "argument `%s` of %s() must be a value, found %s", arg,
                      fname, sty_str(s, &i->ty));
  return true;
}

static double eval1(ir_opcode op, ir_dtype dt, double x) {
  ir_scalar a = {.f = x}, r;
  return ir_eval_elem(op, dt, &a, &r) ? r.f : x;
}

static double eval2(ir_opcode op, ir_dtype dt, double x, double y) {
  ir_scalar a[2] = {{.f = x}, {.f = y}}, r;
  return ir_eval_elem(op, dt, a, &r) ? r.f : x;
}

/* A math builtin on a float constant: the IR ops that irgen.c's emit_math emits for it, in
 * the same order and precision (f16 and bf16 compute in f32), each evaluated by
 * ir_eval_elem, so that a folded call equals the computed one. */
static double fold_math(enum builtin_id b, ir_dtype dt, double x) {
  if (b == BI_ABS) return eval1(IR_ABS, dt, x);
  if (b == BI_RELU) return eval2(IR_MAX, dt, x, 0.0);
  ir_dtype ct = dt == DT_F16 || dt == DT_BF16 ? DT_F32 : dt;
  double r;
  switch (b) {
  case BI_EXP: r = eval1(IR_EXP, ct, x); break;
  case BI_EXP2: r = eval1(IR_EXP2, ct, x); break;
  case BI_LOG: r = eval1(IR_LOG, ct, x); break;
  case BI_LOG2: r = eval1(IR_LOG2, ct, x); break;
  case BI_SQRT: r = eval1(IR_SQRT, ct, x); break;
  case BI_RSQRT: r = eval1(IR_RSQRT, ct, x); break;
  case BI_TANH: r = eval1(IR_TANH, ct, x); break;
  case BI_ERF: r = eval1(IR_ERF, ct, x); break;
  case BI_SIGMOID:
  case BI_SILU: {
    double e = eval1(IR_EXP, ct, eval1(IR_NEG, ct, x));
    r = eval2(IR_DIV, ct, 1.0, eval2(IR_ADD, ct, 1.0, e));
    if (b == BI_SILU) r = eval2(IR_MUL, ct, x, r);
    break;
  }
  case BI_GELU: {
    double x2 = eval2(IR_MUL, ct, x, x);
    double poly = eval2(IR_ADD, ct, ir_round_float(ct, LANG_GELU_C1),
                        eval2(IR_MUL, ct, ir_round_float(ct, LANG_GELU_C2), x2));
    double e = eval1(IR_EXP2, ct, eval2(IR_MUL, ct, x, poly));
    r = eval2(IR_MUL, ct, x, eval2(IR_DIV, ct, 1.0, eval2(IR_ADD, ct, 1.0, e)));
    break;
  }
  default: return x;
  }
  return ir_round_float(dt, r);
}

static struct sema_info *check_math(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct sema_info *x;
  if (!value_arg(s, args[0], fname, "x", &x)) return poison(i);
  if (!sema_supported(s, &x->ty, n->loc, fname)) return poison(i);
  bool int_ok = b == BI_ABS || b == BI_RELU;
  struct sty t = x->ty;
  if (t.dt == DT_BOOL || (!int_ok && ir_dtype_is_int((ir_dtype)t.dt) && !t.weak)) {
    lang_error(s->ctx, args[0]->loc, D_ARG_TYPE, "%s() needs a %s argument, found %s%s", fname,
               int_ok ? "numeric" : "float", sty_str(s, &t),
               int_ok ? "" : "; convert it first, e.g. f32(x)");
    return poison(i);
  }
  if (!int_ok && ir_dtype_is_int((ir_dtype)t.dt)) t.dt = DT_F32; /* a weak int literal */
  i->ty = t;
  if (x->is_const) {
    i->is_const = true;
    if (ir_dtype_is_int((ir_dtype)t.dt)) {
      i->cv.i = b == BI_ABS ? (x->cv.i < 0 ? -x->cv.i : x->cv.i) : (x->cv.i > 0 ? x->cv.i : 0);
      if (i->cv.i > INT32_MAX && !ir_dtype_is_unsigned((ir_dtype)t.dt)) {
        lang_error(s->ctx, n->loc, D_INT_OVERFLOW, "integer overflow: abs(%lld) does not fit in i32",
                   (long long)x->cv.i);
        return poison(i);
      }
    } else {
      double v = ir_dtype_is_int((ir_dtype)x->ty.dt) ? (double)x->cv.i : x->cv.f;
      i->cv.f = fold_math(b, (ir_dtype)t.dt, ir_round_float((ir_dtype)t.dt, v));
    }
  }
  return i;
}

static bool check_axis(struct sema *s, struct ast_node *an, const char *fname, const struct sty *t,
                       const char *what, int64_t *axis) {
  int64_t a = 0;
  if (!sema_need_const_int(s, an, what, &a)) return false;
  if (a < -(int64_t)t->rank || a >= t->rank)
    return lang_error(s->ctx, an->loc, D_AXIS,
                      "axis %lld is out of range for %s() of %s: valid axes are %d .. %d", (long long)a,
                      fname, sty_str(s, t), -(int)t->rank, t->rank - 1);
  *axis = a < 0 ? a + t->rank : a;
  return true;
}

/* The tile x reduced along `axis` (NULL: over every axis, to a scalar) into a result of dtype
 * dt: the checks a reduction's operand takes (no grid, a supported non-bool tile), and i's
 * type and attr (the axis, or -1). `what` ends the message for a scalar operand. */
static struct sema_info *reduce_tile(struct sema *s, struct ast_node *n, struct sema_info *i, const char *fname,
                                     struct sema_info *x, struct ast_node *xn, struct ast_node *axis, ir_dtype dt,
                                     const char *what) {
  if (s->in_grid) {
    lang_error(s->ctx, n->loc, D_GRID_VALUE, "%s() reductions cannot be used in grid(...)", fname);
    return poison(i);
  }
  if (!sema_supported(s, &x->ty, n->loc, fname)) return poison(i);
  if (x->ty.rank == 0) {
    lang_error(s->ctx, xn->loc, D_ARG_TYPE, "%s() %s, found the scalar %s", fname, what, sty_str(s, &x->ty));
    return poison(i);
  }
  if (x->ty.dt == DT_BOOL) {
    lang_error(s->ctx, xn->loc, D_ARG_TYPE,
               "%s() of bool values is not supported; convert first, e.g. %s(i32(mask))", fname, fname);
    return poison(i);
  }
  struct sty t = x->ty;
  t.dt = (uint8_t)dt;
  if (axis) {
    int64_t a = 0;
    if (!check_axis(s, axis, fname, &x->ty, "a reduction axis", &a)) return poison(i);
    for (int d = (int)a; d + 1 < t.rank; d++) t.dims[d] = t.dims[d + 1];
    t.rank--;
    t.dims[t.rank] = 0;
    i->attr = a;
  } else {
    t.rank = 0;
    memset(t.dims, 0, sizeof t.dims);
    i->attr = -1;
  }
  i->ty = t;
  return i;
}

/* argmax and argmin: the i32 index of the largest (smallest) element along axis, or of the
 * whole tile in row-major order without one. Ties go to the smallest index; NaN elements
 * are skipped as max and min skip them (a row of NaN only gives its length). */
static struct sema_info *check_argminmax(struct sema *s, struct ast_node *n, struct sema_info *i,
                                         enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct sema_info *x;
  if (!value_arg(s, args[0], fname, "x", &x)) return poison(i);
  reduce_tile(s, n, i, fname, x, args[0], args[1], DT_I32, "takes a tile");
  if (i->ty.kind != STY_ERROR) i->ty.weak = 0;
  return i;
}

/* rand, randn, randint: Philox4x32-10 of the counter (offset, 0, 0, 0) under the key
 * (seed, 0) (irgen.c emit_philox). seed is an i32 or u32 scalar, offset an i32 or u32 scalar
 * or tile; both are taken as u32 bit patterns. The result has offset's shape: f32 for rand
 * and randn, u32 for randint. Never a compile-time constant (the IR folder may still fold
 * a call on constants). */
static struct sema_info *check_rand(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct sema_info *seed, *off;
  bool oks = value_arg(s, args[0], fname, "seed", &seed), oko = value_arg(s, args[1], fname, "offset", &off);
  if (!oks || !oko) return poison(i);
  bool ok = true;
  ir_dtype sd = (ir_dtype)seed->ty.dt, od = (ir_dtype)off->ty.dt;
  if (seed->ty.rank != 0 || (sd != DT_I32 && sd != DT_U32))
    ok = lang_error(s->ctx, args[0]->loc, D_ARG_TYPE, "the seed of %s() must be an i32 or u32 scalar, found %s",
                    fname, sty_str(s, &seed->ty));
  if (od != DT_I32 && od != DT_U32)
    ok = lang_error(s->ctx, args[1]->loc, D_ARG_TYPE,
                    "the offset of %s() must be an i32 or u32 scalar or tile, found %s%s", fname,
                    sty_str(s, &off->ty), ir_dtype_is_float(od) ? "; convert it, e.g. u32(x)" : "");
  if (!ok) return poison(i);
  i->ty = off->ty;
  i->ty.dt = (uint8_t)(b == BI_RANDINT ? DT_U32 : DT_F32);
  i->ty.weak = 0;
  return i;
}

/* A compile-time bool argument (name= of fname()), such as dot's tf32 or a scan's reverse. */
static bool const_bool_arg(struct sema *s, struct ast_node *an, const char *fname, const char *name,
                           int64_t *out) {
  struct sema_info *bi = sema_expr(s, an);
  if (is_err(bi)) return false;
  if (bi->ty.kind != STY_VAL || bi->ty.rank || bi->ty.dt != DT_BOOL)
    return lang_error(s->ctx, an->loc, D_ARG_TYPE, "%s= of %s() must be a bool, found %s", name, fname,
                      sty_str(s, &bi->ty));
  if (!bi->is_const)
    return lang_error(s->ctx, an->loc, D_NOT_CONST, "%s= of %s() must be a compile-time constant", name, fname);
  *out = bi->cv.i;
  return true;
}

/* cumsum, cumprod, cummax and cummin: inclusive scans along one axis (the last by default)
 * of a tile of any rank, keeping its shape; reverse=true scans from the end. Sums and
 * products of f16/bf16 accumulate in f32 and return f32, as sum() does. attr: the axis,
 * plus SEMA_SCAN_REVERSE. */
static struct sema_info *check_scan(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct sema_info *x;
  if (!value_arg(s, args[0], fname, "x", &x)) return poison(i);
  if (!sema_supported(s, &x->ty, n->loc, fname)) return poison(i);
  if (x->ty.rank == 0) {
    lang_error(s->ctx, args[0]->loc, D_ARG_TYPE, "%s() scans a tile along an axis, found the scalar %s", fname,
               sty_str(s, &x->ty));
    return poison(i);
  }
  if (x->ty.dt == DT_BOOL) {
    lang_error(s->ctx, args[0]->loc, D_ARG_TYPE,
               "%s() of bool values is not supported; convert first, e.g. %s(i32(mask))", fname, fname);
    return poison(i);
  }
  int64_t a = x->ty.rank - 1;
  if (args[1] && !check_axis(s, args[1], fname, &x->ty, "a scan axis", &a)) return poison(i);
  int64_t rev = 0;
  if (args[2] && !const_bool_arg(s, args[2], fname, "reverse", &rev)) return poison(i);
  i->ty = x->ty;
  bool widen = (b == BI_CUMSUM || b == BI_CUMPROD) && (x->ty.dt == DT_F16 || x->ty.dt == DT_BF16);
  if (widen) i->ty.dt = DT_F32;
  i->attr = a | (rev ? SEMA_SCAN_REVERSE : 0);
  return i;
}

/* min, max and sum: elementwise (min/max with two values) or a reduction. */
static struct sema_info *check_minmax_sum(struct sema *s, struct ast_node *n, struct sema_info *i,
                                          enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct ast_node *y = b == BI_SUM ? NULL : args[1];
  struct ast_node *axis = b == BI_SUM ? args[1] : args[2];
  struct sema_info *x;
  if (y && axis) {
    lang_error(s->ctx, n->loc, D_ARG_COUNT,
               "%s() takes either a second value (elementwise) or axis= (a reduction), not both",
               fname);
    return poison(i);
  }
  if (!value_arg(s, args[0], fname, "x", &x)) {
    if (y) sema_expr(s, y);
    return poison(i);
  }
  if (y) {
    struct sema_info *yi;
    if (!value_arg(s, y, fname, "y", &yi)) return poison(i);
    struct sty t;
    if (!sema_join(s, x, yi, &t, n->loc, arena_printf(s->ctx->arena, "%s()", fname))) return poison(i);
    if (t.dt == DT_BOOL) {
      lang_error(s->ctx, n->loc, D_ARG_TYPE, "%s() needs numbers, found bool", fname);
      return poison(i);
    }
    i->ty = t;
    i->opnd = t;
    if (x->is_const && yi->is_const && t.rank == 0) {
      i->is_const = true;
      struct cval a = sema_convert_const(x->cv, (ir_dtype)x->ty.dt, (ir_dtype)t.dt);
      struct cval c = sema_convert_const(yi->cv, (ir_dtype)yi->ty.dt, (ir_dtype)t.dt);
      bool less = ir_dtype_is_float((ir_dtype)t.dt) ? a.f < c.f : a.i < c.i;
      i->cv = (b == BI_MIN) == less ? a : c;
      if (ir_dtype_is_float((ir_dtype)t.dt) && (isnan(a.f) || isnan(c.f))) i->cv = isnan(a.f) ? c : a;
    }
    return i;
  }
  ir_dtype dt = (ir_dtype)x->ty.dt;
  if (b == BI_SUM && (dt == DT_F16 || dt == DT_BF16)) dt = DT_F32;
  return reduce_tile(s, n, i, fname, x, args[0], axis, dt, "with one value reduces a tile");
}

static bool shape_arg(struct sema *s, struct ast_node *an, const char *fname, struct sty *t) {
  if (an->kind != AST_LIST) {
    struct sema_info *si = sema_expr(s, an);
    if (is_err(si)) return false;
    return lang_error(s->ctx, an->loc, D_ARG_TYPE,
                      "the shape of %s() must be a list of compile-time ints, like [BM, BN]", fname);
  }
  if (an->list.n > IR_MAX_RANK)
    return lang_error(s->ctx, an->loc, D_TILE_SHAPE, "tiles have at most 4 dimensions, this one would have %u",
                      an->list.n);
  t->rank = 0;
  for (uint32_t k = 0; k < an->list.n; k++) {
    int64_t d = 0;
    if (!sema_need_const_int(s, an->list.v[k], "a tile dimension", &d)) return false;
    t->dims[t->rank++] = (int32_t)TL_MAX(TL_MIN(d, INT32_MAX), INT32_MIN);
  }
  return sema_check_tile_shape(s, t, an->loc);
}

/* ---- shape manipulation: reshape, permute, join, split, broadcast ----
 * Tiles are register values, so these relabel coordinates; they take tiles (rank >= 1),
 * any dtype (no arithmetic happens), and give tiles of the same dtype. Shapes and dims are
 * lists of compile-time ints; shapes are powers of two as every tile's. */

static bool tile_arg(struct sema *s, struct ast_node *an, const char *fname, const char *arg,
                     struct sema_info **out) {
  if (!value_arg(s, an, fname, arg, out)) return false;
  if ((*out)->ty.rank == 0)
    return lang_error(s->ctx, an->loc, D_ARG_TYPE, "%s() takes a tile, found the scalar %s", fname,
                      sty_str(s, &(*out)->ty));
  return true;
}

static int64_t sty_numel(const struct sty *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

static struct sema_info *check_reshape(struct sema *s, struct ast_node *n, struct sema_info *i,
                                       struct ast_node **args) {
  struct sema_info *x;
  struct sty t;
  memset(&t, 0, sizeof t);
  t.kind = STY_VAL;
  bool okx = tile_arg(s, args[0], "reshape", "x", &x);
  bool oks = shape_arg(s, args[1], "reshape", &t);
  if (!okx || !oks) return poison(i);
  if (t.rank == 0) {
    lang_error(s->ctx, args[1]->loc, D_ARG_TYPE, "reshape() needs a shape of 1 to 4 dimensions, found []");
    return poison(i);
  }
  t.dt = x->ty.dt;
  if (sty_numel(&t) != sty_numel(&x->ty)) {
    lang_error(s->ctx, args[1]->loc, D_RESHAPE,
               "reshape() of %s to %s changes the number of elements from %lld to %lld", sty_str(s, &x->ty),
               sema_shape_str(s, &t), (long long)sty_numel(&x->ty), (long long)sty_numel(&t));
    return poison(i);
  }
  i->ty = t;
  return i;
}

static struct sema_info *check_permute(struct sema *s, struct ast_node *n, struct sema_info *i,
                                       struct ast_node **args) {
  struct sema_info *x;
  struct ast_node *dn = args[1];
  bool okx = tile_arg(s, args[0], "permute", "x", &x);
  if (dn->kind != AST_LIST) {
    struct sema_info *di = sema_expr(s, dn);
    if (!is_err(di))
      lang_error(s->ctx, dn->loc, D_ARG_TYPE,
                 "the dims of permute() must be a list of compile-time ints, like [1, 0, 2]");
    return poison(i);
  }
  int64_t v[IR_MAX_RANK + 1];
  bool ok = okx;
  for (uint32_t k = 0; k < dn->list.n; k++) {
    int64_t d = 0;
    if (!sema_need_const_int(s, dn->list.v[k], "a dimension of permute()", &d)) ok = false;
    if (k < IR_MAX_RANK + 1) v[k] = d;
  }
  if (!ok) return poison(i);
  int rank = x->ty.rank, perm[IR_MAX_RANK];
  bool valid = (int)dn->list.n == rank;
  unsigned seen = 0;
  for (int k = 0; valid && k < rank; k++) {
    int64_t d = v[k] < 0 ? v[k] + rank : v[k];
    valid = d >= 0 && d < rank && !(seen >> d & 1);
    if (valid) seen |= 1u << d, perm[k] = (int)d;
  }
  if (!valid) {
    lang_error(s->ctx, dn->loc, D_PERMUTE,
               "permute() of %s needs each of the dimensions 0 .. %d once (negative ones count from the "
               "end), found %s",
               sty_str(s, &x->ty), rank - 1, lang_loc_text(s->ctx, dn->loc));
    return poison(i);
  }
  i->ty = x->ty;
  i->ty.weak = 0;
  for (int k = 0; k < rank; k++) i->ty.dims[k] = x->ty.dims[perm[k]];
  i->attr = ir_perm_encode(perm, rank);
  return i;
}

static struct sema_info *check_join(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    struct ast_node **args) {
  struct sema_info *a, *b;
  bool oka = tile_arg(s, args[0], "join", "a", &a), okb = tile_arg(s, args[1], "join", "b", &b);
  if (!oka || !okb) return poison(i);
  if (a->ty.dt != b->ty.dt || a->ty.rank != b->ty.rank ||
      memcmp(a->ty.dims, b->ty.dims, sizeof(int32_t) * a->ty.rank) != 0) {
    lang_error(s->ctx, n->loc, D_JOIN, "join() needs two tiles of one shape and dtype, found %s and %s%s",
               sty_str(s, &a->ty), sty_str(s, &b->ty),
               a->ty.dt != b->ty.dt ? "; convert one, e.g. f32(x)" : "; broadcast one first, broadcast(x, [...])");
    return poison(i);
  }
  struct sty t = a->ty;
  t.weak = 0;
  t.dims[t.rank++] = 2;
  if (t.rank > IR_MAX_RANK) {
    lang_error(s->ctx, n->loc, D_TILE_SHAPE,
               "join() of %s would have %d dimensions; tiles have at most 4", sty_str(s, &a->ty), t.rank);
    return poison(i);
  }
  if (!sema_check_tile_shape(s, &t, n->loc)) return poison(i);
  i->ty = t;
  return i;
}

static struct sema_info *check_split(struct sema *s, struct ast_node *n, struct sema_info *i,
                                     struct ast_node **args) {
  struct sema_info *x;
  if (!tile_arg(s, args[0], "split", "x", &x)) return poison(i);
  if (s->split_call != n) {
    lang_error(s->ctx, n->loc, D_SPLIT,
               "split() gives two tiles; bind them with `let (a, b) = split(x);`");
    return poison(i);
  }
  if (x->ty.rank < 2 || x->ty.dims[x->ty.rank - 1] != 2) {
    lang_error(s->ctx, args[0]->loc, D_SPLIT,
               "split() needs a tile of rank 2 or more whose last dimension is 2, found %s%s", sty_str(s, &x->ty),
               x->ty.rank >= 1 && x->ty.dims[x->ty.rank - 1] > 2 ? "; reshape it first, e.g. reshape(x, [..., n / 2, 2])" : "");
    return poison(i);
  }
  i->ty = x->ty;
  i->ty.weak = 0;
  i->ty.dims[--i->ty.rank] = 0;
  return i;
}

/* NumPy's broadcast_to: x's shape aligned on the right with the target's, each of its
 * dimensions equal to the target's or 1; a scalar broadcasts to any shape. */
static struct sema_info *check_broadcast(struct sema *s, struct ast_node *n, struct sema_info *i,
                                         struct ast_node **args) {
  struct sema_info *x;
  struct sty t;
  memset(&t, 0, sizeof t);
  t.kind = STY_VAL;
  bool okx = value_arg(s, args[0], "broadcast", "x", &x);
  bool oks = shape_arg(s, args[1], "broadcast", &t);
  if (!okx || !oks) return poison(i);
  if (t.rank == 0) {
    lang_error(s->ctx, args[1]->loc, D_ARG_TYPE, "broadcast() needs a shape of 1 to 4 dimensions, found []");
    return poison(i);
  }
  bool ok = x->ty.rank <= t.rank;
  for (int d = 0; ok && d < x->ty.rank; d++) {
    int32_t xd = x->ty.dims[d], td = t.dims[d + t.rank - x->ty.rank];
    ok = xd == td || xd == 1;
  }
  if (!ok) {
    lang_error(s->ctx, n->loc, D_BROADCAST,
               "broadcast() cannot stretch %s to %s: aligned on the right, each dimension must equal the "
               "target's or be 1",
               sty_str(s, &x->ty), sema_shape_str(s, &t));
    return poison(i);
  }
  t.dt = x->ty.dt;
  i->ty = t;
  return i;
}

static bool dtype_arg(struct sema *s, struct ast_node *an, const char *fname, ir_dtype *dt) {
  struct sema_info *di = sema_expr(s, an);
  if (is_err(di)) return false;
  if (di->ty.kind != STY_DTYPE)
    return lang_error(s->ctx, an->loc, D_ARG_TYPE, "the dtype argument of %s() must be a dtype, found %s",
                      fname, sty_str(s, &di->ty));
  *dt = di->cv.dt;
  return true;
}

static struct sema_info *check_load(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    struct ast_node **args) {
  struct ast_node *slice = args[0];
  bool tensor_slice = false;
  if (slice->kind == AST_INDEX) {
    struct sema_info *base = sema_expr(s, slice->a);
    tensor_slice = base->ty.kind == STY_TENSOR;
    if (is_err(base)) return poison(i);
  }
  if (!tensor_slice) {
    struct sema_info *x = sema_expr(s, slice);
    if (!is_err(x))
      lang_error(s->ctx, slice->loc, D_ARG_TYPE, "load() takes a tensor slice like X[i : +N], found %s",
                 sty_str(s, &x->ty));
    return poison(i);
  }
  struct sema_info *li = sema_expr(s, slice);
  if (is_err(li)) return poison(i);
  i->ty = li->ty;
  i->fill = 0;
  if (args[2] && !sema_check_mask(s, args[2], &li->ty, "load")) return poison(i);
  if (!args[1]) return i;
  struct sema_info *fi = sema_expr(s, args[1]);
  if (is_err(fi)) return poison(i);
  if (fi->ty.kind != STY_VAL || fi->ty.rank) {
    lang_error(s->ctx, args[1]->loc, D_FILL, "the fill value of load() must be a scalar, found %s",
               sty_str(s, &fi->ty));
    return poison(i);
  }
  if (!fi->is_const) {
    lang_error(s->ctx, args[1]->loc, D_NOT_CONST,
               "the fill value of load() must be a compile-time constant, but this one is computed "
               "at run time");
    return poison(i);
  }
  double v = ir_dtype_is_float((ir_dtype)fi->ty.dt) ? fi->cv.f : (double)fi->cv.i;
  ir_dtype dt = (ir_dtype)li->ty.dt;
  bool fits = true;
  if (ir_dtype_is_int(dt))
    fits = isfinite(v) && v == floor(v) &&
           (dt == DT_U32 ? v >= 0 && v <= 4294967295.0 : v >= -2147483648.0 && v <= 2147483647.0);
  if (dt == DT_BOOL) fits = v == 0 || v == 1;
  if (!fits) {
    lang_error(s->ctx, args[1]->loc, D_FILL, "the fill value %s does not fit the tensor's dtype %s",
               lang_loc_text(s->ctx, args[1]->loc), ir_dtype_name(dt));
    return poison(i);
  }
  i->fill = v;
  return i;
}

static struct sema_info *check_builtin(struct sema *s, struct ast_node *n, struct sema_info *i,
                                       enum builtin_id b, struct ast_node **args) {
  const char *fname = builtin_names[b];
  if (s->in_grid && b != BI_CDIV && b != BI_MIN && b != BI_MAX) {
    lang_error(s->ctx, n->loc, D_GRID_VALUE,
               "%s() cannot be used in grid(...): the grid is computed on the host from shape "
               "symbols, scalar parameters and constants",
               fname);
    return poison(i);
  }
  switch (b) {
  case BI_PROGRAM_ID:
  case BI_NUM_PROGRAMS: {
    int64_t a = 0;
    if (!sema_need_const_int(s, args[0], "the axis", &a)) return poison(i);
    if (a < 0 || a > 2) {
      lang_error(s->ctx, args[0]->loc, D_AXIS, "the axis of %s() must be 0, 1 or 2, found %lld", fname,
                 (long long)a);
      return poison(i);
    }
    i->attr = a;
    i->ty.kind = STY_VAL;
    i->ty.dt = DT_I32;
    return i;
  }
  case BI_CDIV: {
    struct sema_info *a, *c;
    bool oka = value_arg(s, args[0], fname, "a", &a), okc = value_arg(s, args[1], fname, "b", &c);
    if (!oka || !okc) return poison(i);
    struct sty t;
    if (!sema_join(s, a, c, &t, n->loc, "cdiv()")) return poison(i);
    if (!ir_dtype_is_int((ir_dtype)t.dt)) {
      lang_error(s->ctx, n->loc, D_ARG_TYPE, "cdiv() needs integers, found %s and %s",
                 sty_str(s, &a->ty), sty_str(s, &c->ty));
      return poison(i);
    }
    i->ty = t;
    i->opnd = t;
    if (c->is_const && c->cv.i == 0) {
      lang_error(s->ctx, args[1]->loc, D_DIV_ZERO, "cdiv() by zero");
      return poison(i);
    }
    if (a->is_const && c->is_const && t.rank == 0) {
      struct cval ca = sema_convert_const(a->cv, (ir_dtype)a->ty.dt, (ir_dtype)t.dt);
      struct cval cc = sema_convert_const(c->cv, (ir_dtype)c->ty.dt, (ir_dtype)t.dt);
      int64_t sum = ca.i + cc.i - 1, v = sum / cc.i;
      bool uns = ir_dtype_is_unsigned((ir_dtype)t.dt);
      if (uns ? sum > UINT32_MAX : sum > INT32_MAX || sum < INT32_MIN) {
        lang_error(s->ctx, n->loc, D_INT_OVERFLOW, "integer overflow in cdiv(%lld, %lld)",
                   (long long)a->cv.i, (long long)c->cv.i);
        return poison(i);
      }
      i->is_const = true;
      i->cv.i = v;
    }
    return i;
  }
  case BI_MIN:
  case BI_MAX:
  case BI_SUM: return check_minmax_sum(s, n, i, b, args);
  case BI_ARGMAX:
  case BI_ARGMIN: return check_argminmax(s, n, i, b, args);
  case BI_RAND:
  case BI_RANDN:
  case BI_RANDINT: return check_rand(s, n, i, b, args);
  case BI_CUMSUM:
  case BI_CUMPROD:
  case BI_CUMMAX:
  case BI_CUMMIN: return check_scan(s, n, i, b, args);
  case BI_ABS: case BI_EXP: case BI_EXP2: case BI_LOG: case BI_LOG2: case BI_SQRT:
  case BI_RSQRT: case BI_TANH: case BI_ERF: case BI_SIGMOID: case BI_RELU: case BI_GELU:
  case BI_SILU:
    return check_math(s, n, i, b, args);
  case BI_WHERE: {
    struct sema_info *c, *x, *y;
    bool okc = value_arg(s, args[0], fname, "cond", &c);
    bool okx = value_arg(s, args[1], fname, "x", &x), oky = value_arg(s, args[2], fname, "y", &y);
    if (!okc || !okx || !oky) return poison(i);
    if (c->ty.dt != DT_BOOL) {
      lang_error(s->ctx, args[0]->loc, D_ARG_TYPE, "the condition of where() must be bool, found %s",
                 sty_str(s, &c->ty));
      return poison(i);
    }
    struct sty t, r;
    if (!sema_join(s, x, y, &t, n->loc, "where()")) return poison(i);
    if (!sema_broadcast(s, &c->ty, &t, &r, n->loc, "where()")) return poison(i);
    r.kind = STY_VAL;
    r.dt = t.dt;
    r.weak = t.weak;
    i->ty = r;
    i->opnd = r;
    if (c->is_const && x->is_const && y->is_const && r.rank == 0) {
      i->is_const = true;
      struct sema_info *pick = c->cv.i ? x : y;
      i->cv = sema_convert_const(pick->cv, (ir_dtype)pick->ty.dt, (ir_dtype)t.dt);
    }
    return i;
  }
  case BI_ZEROS:
  case BI_FULL: {
    struct sty t;
    memset(&t, 0, sizeof t);
    t.kind = STY_VAL;
    bool ok = shape_arg(s, args[0], fname, &t);
    ir_dtype dt = DT_F32;
    struct ast_node *dtn = b == BI_ZEROS ? args[1] : args[2];
    if (b == BI_FULL) {
      struct sema_info *v;
      if (!value_arg(s, args[1], fname, "value", &v)) return poison(i);
      if (v->ty.rank) {
        lang_error(s->ctx, args[1]->loc, D_ARG_TYPE, "the value of full() must be a scalar, found %s",
                   sty_str(s, &v->ty));
        return poison(i);
      }
      if (!sema_supported(s, &v->ty, n->loc, fname)) return poison(i);
      dt = (ir_dtype)v->ty.dt;
    }
    if (dtn && !dtype_arg(s, dtn, fname, &dt)) ok = false;
    if (!ok) return poison(i);
    t.dt = (uint8_t)dt;
    i->ty = t;
    return i;
  }
  case BI_ARANGE: {
    int64_t len = 0;
    if (!sema_need_const_int(s, args[0], "the length of arange()", &len)) return poison(i);
    struct sty t;
    memset(&t, 0, sizeof t);
    t.kind = STY_VAL;
    t.dt = DT_I32;
    t.rank = 1;
    t.dims[0] = (int32_t)TL_MAX(TL_MIN(len, INT32_MAX), INT32_MIN);
    if (!sema_check_tile_shape(s, &t, args[0]->loc)) return poison(i);
    i->ty = t;
    return i;
  }
  case BI_TRANS: {
    struct sema_info *x;
    if (!value_arg(s, args[0], fname, "x", &x)) return poison(i);
    if (x->ty.rank != 2) {
      lang_error(s->ctx, args[0]->loc, D_ARG_TYPE, "trans() transposes a 2-d tile, found %s",
                 sty_str(s, &x->ty));
      return poison(i);
    }
    i->ty = x->ty;
    i->ty.dims[0] = x->ty.dims[1];
    i->ty.dims[1] = x->ty.dims[0];
    return i;
  }
  case BI_RESHAPE: return check_reshape(s, n, i, args);
  case BI_PERMUTE: return check_permute(s, n, i, args);
  case BI_JOIN: return check_join(s, n, i, args);
  case BI_SPLIT: return check_split(s, n, i, args);
  case BI_BROADCAST: return check_broadcast(s, n, i, args);
  case BI_LOAD: return check_load(s, n, i, args);
  case BI_STORE:
  case BI_ATOMIC_ADD:
  case BI_ATOMIC_MAX:
  case BI_ATOMIC_MIN: return sema_check_write_call(s, n, i, b, args);
  case BI_DOT: {
    struct sema_info *a, *c;
    bool oka = value_arg(s, args[0], fname, "a", &a), okc = value_arg(s, args[1], fname, "b", &c);
    int64_t tf32 = 0;
    if (args[2] && !const_bool_arg(s, args[2], fname, "tf32", &tf32)) return poison(i);
    if (!oka || !okc) return poison(i);
    if (!sema_supported(s, &a->ty, n->loc, "dot()") || !sema_supported(s, &c->ty, n->loc, "dot()"))
      return poison(i);
    if (!sema_check_dot(s, a, c, n->loc, "dot()", &i->ty)) return poison(i);
    i->attr = tf32;
    return i;
  }
  default: break;
  }
  lang_internal_error(s->ctx, n->loc, "check_builtin: unhandled builtin %s", fname);
  return poison(i);
}

static struct sema_info *check_cast(struct sema *s, struct ast_node *n, struct sema_info *i,
                                    ir_dtype to) {
  const char *fname = ir_dtype_name(to);
  if (n->list.n != 1 || n->list.v[0]->kind == AST_NAMED_ARG) {
    for (uint32_t k = 0; k < n->list.n; k++) sema_expr(s, n->list.v[k]->kind == AST_NAMED_ARG ? n->list.v[k]->a : n->list.v[k]);
    lang_error(s->ctx, n->loc, D_ARG_COUNT, "the conversion %s(x) takes exactly one value, found %u argument%s",
               fname, n->list.n, n->list.n == 1 ? "" : "s");
    return poison(i);
  }
  struct sema_info *x;
  if (!value_arg(s, n->list.v[0], fname, "x", &x)) return poison(i);
  i->builtin = BI_CAST;
  i->ty = x->ty;
  i->ty.dt = (uint8_t)to;
  i->ty.weak = 0;
  i->cv.dt = to;
  if (x->is_const && x->ty.rank == 0 && (x->ty.dt == DT_BOOL || ir_dtype_is_int((ir_dtype)x->ty.dt) ||
                                         ir_dtype_is_float((ir_dtype)x->ty.dt))) {
    i->is_const = true;
    i->cv = sema_convert_const(x->cv, (ir_dtype)x->ty.dt, to);
    i->cv.dt = to;
  }
  return i;
}

struct sema_info *sema_call(struct sema *s, struct ast_node *n) {
  struct sema_info *i = sema_info(s, n);
  i->builtin = BI_NONE;
  struct ast_node *callee = n->a;
  if (callee->kind == AST_DTYPE) return check_cast(s, n, i, callee->dt);
  if (callee->kind != AST_NAME) {
    if (callee->kind != AST_ERROR)
      lang_error(s->ctx, callee->loc, D_UNKNOWN_FUNCTION,
                 "only builtins and dtypes can be called; this is not a function name");
    return poison(i);
  }
  struct sema_sym *sym = sema_lookup(s, callee->name);
  if (sym && sym->ty.kind == STY_DTYPE) {
    sema_info(s, callee)->sym = sym;
    return check_cast(s, n, i, sym->cv.dt);
  }
  int b = -1;
  for (int k = 0; k < BI__COUNT; k++)
    if (strcmp(builtin_names[k], callee->name) == 0) b = k;
  if (b < 0) {
    if (strcmp(callee->name, "range") == 0)
      lang_error(s->ctx, callee->loc, D_UNKNOWN_FUNCTION,
                 "range(...) can only be used in a for loop: for i in range(...)");
    else if (sym)
      lang_error(s->ctx, callee->loc, D_UNKNOWN_FUNCTION, "`%s` is %s, not a function", callee->name,
                 sym->kind == SYM_CPARAM || sym->kind == SYM_CONST ? "a constant" : "a value");
    else
      lang_error(s->ctx, callee->loc, D_UNKNOWN_FUNCTION, "unknown function `%s`", callee->name);
    for (uint32_t k = 0; k < n->list.n; k++)
      sema_expr(s, n->list.v[k]->kind == AST_NAMED_ARG ? n->list.v[k]->a : n->list.v[k]);
    return poison(i);
  }
  struct ast_node **slots = ARENA_NEWN(s->ctx->arena, struct ast_node *, MAX_BUILTIN_ARGS);
  if (!bind_args(s, n, builtin_names[b], builtin_sigs[b], slots)) return poison(i);
  i->builtin = b;
  i->args = slots;
  check_builtin(s, n, i, (enum builtin_id)b, slots);
  /* sema_expr of the arguments may not touch this node's info, but keep the binding even if
   * a nested check rewrote fields. */
  i->builtin = is_err(i) ? BI_NONE : b;
  i->args = slots;
  return i;
}
