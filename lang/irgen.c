/* irgen.c - lowering of one checked, specialized kernel to Tile IR.
 *
 * Sema has already decided every type, constant and branch; this file only follows those
 * decisions with the builder API of ir.h, so nothing here reports user errors (a surprise is
 * an internal error). What it does:
 *  - Parameters: tensors and scalars in source order, then one IR_PARAM_SHAPE i32 parameter
 *    per shape symbol in order of first appearance. A tensor's dims are constants or
 *    IR_DIM_SYM(shape value); since the shape values exist only after the user parameters,
 *    tensor types are filled in once all parameters are created.
 *  - The grid block computes the launch grid from the parameters (missing dims are 1) and
 *    ends with GRID; cdiv(a, b) becomes (a + b - 1) / b.
 *  - Constants become CONST ops of exactly the type their use needs (a weak literal next to an
 *    f16 tile becomes an f16 tile constant), so no cast or splat of a constant is emitted.
 *  - Elementwise ops get identical operand types: CAST for promotion, SPLAT for scalars,
 *    EXPAND_DIMS at axis 0 (rank alignment) then BROADCAST for shapes.
 *  - `var`s are SSA: each symbol holds its current value. A FOR carries every outer var its
 *    body assigns (sema collected them, nested loops and ifs included) as iter_args and yields
 *    their new values; a run-time IF yields them from both branches. Results rebind the vars.
 *  - Math on f16/bf16 computes in f32 (CAST, op, CAST back); sum of f16/bf16 casts to f32
 *    first; `a @ b` is DOT(a, b, zeros f32[M, N]). Composite functions expand: sigmoid(x) =
 *    1/(1+exp(-x)), relu(x) = max(x, 0), silu(x) = x*sigmoid(x), gelu = the tanh form (as x * sigmoid(2u)).
 *    rand/randn/randint expand to the ten rounds of Philox4x32 on u32 tiles (emit_rand).
 * Every op gets the source location of the AST node it comes from. */
#include <string.h>

#include "sema.h"

struct irgen {
  struct sema *s;
  struct lang_ctx *ctx;
  struct ir_func *f;
  struct ir_builder b;
  bool failed;
};

/* Ops take the location of their AST node; a binary operator's ops point at the operator. */
static void here(struct irgen *g, const struct ast_node *n) {
  const struct lang_loc *l = n->kind == AST_BINARY && n->loc2.line ? &n->loc2 : &n->loc;
  g->b.loc.line = l->line;
  g->b.loc.col = l->col;
}

static void internal(struct irgen *g, const struct ast_node *n, const char *what) {
  if (!g->failed) lang_internal_error(g->ctx, n->loc, "irgen: %s", what);
  g->failed = true;
}

static ir_type_id ty_of(struct irgen *g, const struct sty *t) {
  if (t->rank == 0) return ir_type_scalar(g->f, (ir_dtype)t->dt);
  return ir_type_tile(g->f, (ir_dtype)t->dt, t->rank, t->dims);
}

static struct sty scalar_sty(ir_dtype dt) {
  struct sty t;
  memset(&t, 0, sizeof t);
  t.kind = STY_VAL;
  t.dt = (uint8_t)dt;
  return t;
}

static struct sty with_dt(const struct sty *t, ir_dtype dt) {
  struct sty r = *t;
  r.dt = (uint8_t)dt;
  r.weak = 0;
  return r;
}

static ir_val emit_const(struct irgen *g, struct cval v, ir_dtype from, const struct sty *to) {
  struct cval c = sema_convert_const(v, from, (ir_dtype)to->dt);
  ir_type_id t = ty_of(g, to);
  if (ir_dtype_is_float((ir_dtype)to->dt)) return ir_const_float(&g->b, t, c.f);
  return ir_const_int(&g->b, t, c.i);
}

static ir_val const_num(struct irgen *g, double v, const struct sty *to) {
  struct cval c;
  memset(&c, 0, sizeof c);
  c.f = v;
  return emit_const(g, c, DT_F64, to);
}

/* Converts v of type `from` to type `to` (dtype first, on the smaller tile, then shape). */
static ir_val convert(struct irgen *g, ir_val v, const struct sty *from, const struct sty *to) {
  struct sty cur = *from;
  cur.weak = 0;
  if (cur.dt != to->dt) {
    cur.dt = to->dt;
    v = ir_build1(&g->b, IR_CAST, ty_of(g, &cur), &v, 1);
  }
  if (cur.rank == to->rank && memcmp(cur.dims, to->dims, sizeof(int32_t) * cur.rank) == 0) return v;
  if (cur.rank == 0) {
    struct sty t = *to;
    t.dt = cur.dt;
    return ir_build1(&g->b, IR_SPLAT, ty_of(g, &t), &v, 1);
  }
  while (cur.rank < to->rank) {
    memmove(cur.dims + 1, cur.dims, sizeof(int32_t) * cur.rank);
    cur.dims[0] = 1;
    cur.rank++;
    uint32_t op = ir_build(&g->b, IR_EXPAND_DIMS, &v, 1, (ir_type_id[]){ty_of(g, &cur)}, 1);
    ir_op(g->f, op)->i[0] = 0;
    v = ir_res(g->f, op, 0);
  }
  if (memcmp(cur.dims, to->dims, sizeof(int32_t) * cur.rank) != 0) {
    struct sty t = *to;
    t.dt = cur.dt;
    v = ir_build1(&g->b, IR_BROADCAST, ty_of(g, &t), &v, 1);
  }
  return v;
}

static ir_val lower(struct irgen *g, struct ast_node *n);

/* Lowers n converted to type `to`. Constants are emitted directly in that type. */
static ir_val lower_to(struct irgen *g, struct ast_node *n, const struct sty *to) {
  struct sema_info *i = sema_info(g->s, n);
  if (i->is_const && i->ty.kind == STY_VAL && i->ty.rank == 0) {
    here(g, n);
    return emit_const(g, i->cv, (ir_dtype)i->ty.dt, to);
  }
  ir_val v = lower(g, n);
  here(g, n);
  return convert(g, v, &i->ty, to);
}

static ir_val binary(struct irgen *g, ir_opcode code, ir_val x, ir_val y) {
  return ir_binary(&g->b, code, x, y);
}

ir_opcode lang_binary_opcode(enum ast_op op) {
  switch (op) {
  case OP_OR: case OP_BITOR: return IR_OR;
  case OP_AND: case OP_BITAND: return IR_AND;
  case OP_BITXOR: return IR_XOR;
  case OP_EQ: return IR_EQ;
  case OP_NE: return IR_NE;
  case OP_LT: return IR_LT;
  case OP_LE: return IR_LE;
  case OP_GT: return IR_GT;
  case OP_GE: return IR_GE;
  case OP_SHL: return IR_SHL;
  case OP_SHR: return IR_SHR;
  case OP_ADD: return IR_ADD;
  case OP_SUB: return IR_SUB;
  case OP_MUL: return IR_MUL;
  case OP_DIV: return IR_DIV;
  case OP_REM: return IR_REM;
  default: return IR_NONE;
  }
}

static ir_val zeros_f32(struct irgen *g, int32_t m, int32_t n) {
  struct sty t = scalar_sty(DT_F32);
  t.rank = 2;
  t.dims[0] = m;
  t.dims[1] = n;
  return ir_const_float(&g->b, ty_of(g, &t), 0.0);
}

static ir_val emit_dot(struct irgen *g, struct ast_node *n, ir_val a, ir_val b, int64_t tf32) {
  const struct ir_type *ta = ir_vtype(g->f, a), *tb = ir_vtype(g->f, b);
  here(g, n);
  ir_val acc = zeros_f32(g, ta->dims[0], tb->dims[1]);
  ir_val args[3] = {a, b, acc};
  uint32_t op = ir_build(&g->b, IR_DOT, args, 3, &g->f->values.v[acc].type, 1);
  ir_op(g->f, op)->i[0] = tf32;
  return ir_res(g->f, op, 0);
}

/* The index operands and slice mask of a tensor subscript. */
static void lower_indices(struct irgen *g, struct ast_node *idx, ir_val *args, int64_t *mask) {
  struct sema_info *i = sema_info(g->s, idx);
  struct sema_sym *t = sema_info(g->s, idx->a)->sym;
  struct sty i32 = scalar_sty(DT_I32);
  args[0] = t->val;
  *mask = 0;
  for (uint32_t d = 0; d < idx->list.n; d++) {
    struct ast_node *e = idx->list.v[d];
    switch (i->kinds[d]) {
    case SLICE_INDEX: args[1 + d] = lower_to(g, e, &i32); break;
    case SLICE_RANGE:
      args[1 + d] = lower_to(g, e->a, &i32);
      *mask |= (int64_t)1 << d;
      break;
    default:
      here(g, e);
      args[1 + d] = ir_const_int(&g->b, ty_of(g, &i32), 0);
      *mask |= (int64_t)1 << d;
      break;
    }
  }
}

/* v (type vt, rank k) placed at dimensions pos .. pos+k-1 of shape `to` and broadcast. */
static ir_val place(struct irgen *g, ir_val v, const struct sty *vt, int pos, const struct sty *to) {
  struct sty cur = *vt;
  cur.weak = 0;
  while (cur.rank < to->rank - pos) { /* trailing size-1 dimensions */
    cur.dims[cur.rank] = 1;
    cur.rank++;
    uint32_t op = ir_build(&g->b, IR_EXPAND_DIMS, &v, 1, (ir_type_id[]){ty_of(g, &cur)}, 1);
    ir_op(g->f, op)->i[0] = cur.rank - 1;
    v = ir_res(g->f, op, 0);
  }
  struct sty t = *to;
  t.dt = cur.dt;
  return convert(g, v, &cur, &t); /* leading ones, then the broadcast */
}

/* The per-element index tiles of a tensor subscript: one i32 tile of the result's shape
 * per tensor dimension. For a gather subscript (sema's gather_shape) index tiles broadcast
 * to the index shape B and sit at B's position; a slice `s : +N` is s + arange(N) at its
 * own position; a scalar index is splat. A plain slice subscript (an atomic's) has no B. */
static void lower_gather_indices(struct irgen *g, struct ast_node *idx, ir_val *args) {
  struct sema_info *i = sema_info(g->s, idx);
  struct sema_sym *t = sema_info(g->s, idx->a)->sym;
  struct sty rt = i->ty, i32 = scalar_sty(DT_I32);
  rt.dt = DT_I32;
  rt.weak = 0;
  struct sty b = i->gather ? i->opnd : i32;
  int bpos = i->gather ? (int)i->attr : 0, slice_pos = 0;
  args[0] = t->val;
  for (uint32_t d = 0; d < idx->list.n; d++) {
    struct ast_node *e = idx->list.v[d];
    switch (i->kinds[d]) {
    case SLICE_INDEX:
      args[1 + d] = lower_to(g, e, &rt); /* a scalar: splat */
      break;
    case SLICE_GATHER: {
      struct sty bt = b;
      bt.dt = DT_I32;
      ir_val v = lower_to(g, e, &bt);
      here(g, e);
      args[1 + d] = place(g, v, &bt, bpos, &rt);
      break;
    }
    default: {
      /* slices: the result position skips B when B comes before */
      int pos = slice_pos < bpos ? slice_pos : slice_pos + b.rank;
      slice_pos++;
      int32_t len = i->lens[d];
      struct sty at = i32;
      at.rank = 1;
      at.dims[0] = len;
      ir_val start = i->kinds[d] == SLICE_RANGE ? lower_to(g, e->a, &at) : 0;
      here(g, e);
      ir_val v = ir_build1(&g->b, IR_ARANGE, ty_of(g, &at), NULL, 0);
      if (start) v = binary(g, IR_ADD, v, start);
      args[1 + d] = place(g, v, &at, pos, &rt);
      break;
    }
    }
  }
}

static ir_val emit_load(struct irgen *g, struct ast_node *idx, const ir_val *args, int64_t mask,
                        double fill) {
  struct sema_info *i = sema_info(g->s, idx);
  here(g, idx);
  ir_type_id t = ty_of(g, &i->ty);
  uint32_t op = ir_build(&g->b, IR_LOAD, args, idx->list.n + 1, &t, 1);
  ir_op(g->f, op)->i[0] = mask;
  ir_op(g->f, op)->f = fill;
  return ir_res(g->f, op, 0);
}

static ir_val emit_gather(struct irgen *g, struct ast_node *idx, const ir_val *args, double fill) {
  struct sema_info *i = sema_info(g->s, idx);
  here(g, idx);
  ir_type_id t = ty_of(g, &i->ty);
  uint32_t op = ir_build(&g->b, IR_GATHER, args, idx->list.n + 1, &t, 1);
  ir_op(g->f, op)->f = fill;
  return ir_res(g->f, op, 0);
}

static ir_val load_slice(struct irgen *g, struct ast_node *idx, double fill) {
  ir_val args[IR_MAX_RANK + 2];
  int64_t mask;
  if (sema_info(g->s, idx)->gather) {
    lower_gather_indices(g, idx, args);
    return emit_gather(g, idx, args, fill);
  }
  lower_indices(g, idx, args, &mask);
  return emit_load(g, idx, args, mask, fill);
}

/* The bool predicate mask= of an access of type t (broadcast to its shape), or 0. */
static ir_val lower_mask(struct irgen *g, struct ast_node *m, const struct sty *t) {
  if (!m) return 0;
  struct sty bt = with_dt(t, DT_BOOL);
  return lower_to(g, m, &bt);
}

/* load(T[...], fill?, mask?): where the mask is false the fill value, whether or not the
 * element is inside the tensor (the load itself may read it: that is harmless, it is in
 * bounds or masked already). */
static ir_val lower_load_call(struct irgen *g, struct ast_node *n, struct sema_info *i, struct ast_node **args) {
  ir_val x = load_slice(g, args[0], i->fill);
  if (!args[2]) return x;
  struct sty vt = i->ty;
  vt.weak = 0;
  ir_val m = lower_mask(g, args[2], &vt);
  here(g, n);
  ir_val fill = const_num(g, i->fill, &vt);
  ir_val sel[3] = {m, x, fill};
  return ir_build1(&g->b, IR_SELECT, ty_of(g, &vt), sel, 3);
}

/* A write of v (already of the subscript's type) to the tensor subscript `target`, where
 * pred (0: everywhere) holds: store, or scatter for a gather subscript. */
static void emit_write(struct irgen *g, struct ast_node *target, ir_val v, ir_val pred) {
  struct sema_info *ti = sema_info(g->s, target);
  ir_val args[IR_MAX_RANK + 3];
  int64_t mask = 0;
  if (ti->gather)
    lower_gather_indices(g, target, args);
  else
    lower_indices(g, target, args, &mask);
  uint32_t nargs = target->list.n + 1;
  if (pred) args[nargs++] = pred;
  args[nargs++] = v;
  here(g, target);
  uint32_t op = ir_build(&g->b, ti->gather ? IR_SCATTER : IR_STORE, args, nargs, NULL, 0);
  ir_op(g->f, op)->i[0] = mask;
}

/* store(T[...], value, mask?) */
static void lower_store_call(struct irgen *g, struct ast_node **args) {
  struct sema_info *ti = sema_info(g->s, args[0]);
  struct sty slice = ti->ty;
  slice.weak = 0;
  ir_val v = lower_to(g, args[1], &slice);
  ir_val m = lower_mask(g, args[2], &slice);
  emit_write(g, args[0], v, m);
}

/* atomic_add/max/min(T[...], value, mask?): the old values */
static ir_val lower_atomic(struct irgen *g, struct ast_node *n, enum builtin_id b, struct ast_node **args) {
  struct sema_info *ti = sema_info(g->s, args[0]);
  struct sty slice = ti->ty;
  slice.weak = 0;
  ir_val v = lower_to(g, args[1], &slice);
  ir_val m = lower_mask(g, args[2], &slice);
  ir_val a[IR_MAX_RANK + 3];
  lower_gather_indices(g, args[0], a); /* a slice too is addressed element by element */
  uint32_t nargs = args[0]->list.n + 1;
  if (m) a[nargs++] = m;
  a[nargs++] = v;
  here(g, n);
  uint32_t op = ir_build(&g->b, IR_ATOMIC, a, nargs, (ir_type_id[]){ty_of(g, &slice)}, 1);
  ir_op(g->f, op)->i[0] = b == BI_ATOMIC_ADD ? 0 : b == BI_ATOMIC_MAX ? 1 : 2;
  return ir_res(g->f, op, 0);
}

/* A unary math function on x of type t (float; f16/bf16 compute in f32). */
static ir_val emit_math(struct irgen *g, struct ast_node *n, enum builtin_id b, ir_val x,
                        const struct sty *t) {
  here(g, n);
  ir_dtype dt = (ir_dtype)t->dt;
  if (b == BI_ABS) return ir_unary(&g->b, IR_ABS, x);
  if (b == BI_RELU) return binary(g, IR_MAX, x, const_num(g, 0.0, t));
  bool widen = dt == DT_F16 || dt == DT_BF16;
  struct sty ct = widen ? with_dt(t, DT_F32) : *t;
  if (widen) x = convert(g, x, t, &ct);
  ir_val r;
  switch (b) {
  case BI_EXP: r = ir_unary(&g->b, IR_EXP, x); break;
  case BI_EXP2: r = ir_unary(&g->b, IR_EXP2, x); break;
  case BI_LOG: r = ir_unary(&g->b, IR_LOG, x); break;
  case BI_LOG2: r = ir_unary(&g->b, IR_LOG2, x); break;
  case BI_SQRT: r = ir_unary(&g->b, IR_SQRT, x); break;
  case BI_RSQRT: r = ir_unary(&g->b, IR_RSQRT, x); break;
  case BI_TANH: r = ir_unary(&g->b, IR_TANH, x); break;
  case BI_ERF: r = ir_unary(&g->b, IR_ERF, x); break;
  case BI_SIGMOID:
  case BI_SILU: {
    ir_val e = ir_unary(&g->b, IR_EXP, ir_unary(&g->b, IR_NEG, x));
    ir_val one = const_num(g, 1.0, &ct);
    r = binary(g, IR_DIV, one, binary(g, IR_ADD, one, e));
    if (b == BI_SILU) r = binary(g, IR_MUL, x, r);
    break;
  }
  case BI_GELU: {
    /* 0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 * x^3), computed as the equal
     * x * sigmoid(2u) = x / (1 + exp2(x * (c1 + c2 * x^2))) with c1 = -2 sqrt(2/pi) log2(e),
     * c2 = 0.044715 c1: one exp2 and one reciprocal, no cancellation in 1 + tanh for
     * negative x (the tanh form costs twice the instructions in a GEMM epilogue) */
    const double c1 = LANG_GELU_C1, c2 = LANG_GELU_C2;
    ir_val x2 = binary(g, IR_MUL, x, x);
    ir_val poly = binary(g, IR_ADD, const_num(g, c1, &ct), binary(g, IR_MUL, const_num(g, c2, &ct), x2));
    ir_val e = ir_unary(&g->b, IR_EXP2, binary(g, IR_MUL, x, poly));
    ir_val one = const_num(g, 1.0, &ct);
    r = binary(g, IR_MUL, x, binary(g, IR_DIV, one, binary(g, IR_ADD, one, e)));
    break;
  }
  default:
    internal(g, n, "unknown math builtin");
    return x;
  }
  if (widen) r = convert(g, r, &ct, t);
  return r;
}

static ir_val emit_reduce(struct irgen *g, struct ast_node *n, enum builtin_id b, ir_val x,
                          struct sty t, int64_t axis) {
  ir_opcode code = b == BI_SUM ? IR_REDUCE_SUM : b == BI_MAX ? IR_REDUCE_MAX : IR_REDUCE_MIN;
  here(g, n);
  if (b == BI_SUM && (t.dt == DT_F16 || t.dt == DT_BF16)) {
    struct sty w = with_dt(&t, DT_F32);
    x = convert(g, x, &t, &w);
    t = w;
  }
  /* axis < 0: reduce everything, innermost axis first. */
  do {
    int64_t a = axis >= 0 ? axis : t.rank - 1;
    for (int d = (int)a; d + 1 < t.rank; d++) t.dims[d] = t.dims[d + 1];
    t.rank--;
    t.dims[t.rank] = 0;
    ir_type_id rt = ty_of(g, &t);
    uint32_t op = ir_build(&g->b, code, &x, 1, &rt, 1);
    ir_op(g->f, op)->i[0] = a;
    x = ir_res(g->f, op, 0);
  } while (axis < 0 && t.rank > 0);
  return x;
}

/* cumsum/cumprod/cummax/cummin (check_scan): one scan op; f16/bf16 sums and products are
 * converted to f32 first (the result type sema gave). */
static ir_val emit_scan(struct irgen *g, struct ast_node *n, enum builtin_id b, ir_val x,
                        const struct sty *xt, const struct sema_info *i) {
  ir_opcode code = b == BI_CUMSUM ? IR_SCAN_SUM : b == BI_CUMPROD ? IR_SCAN_PROD
                   : b == BI_CUMMAX ? IR_SCAN_MAX : IR_SCAN_MIN;
  struct sty t = *xt;
  here(g, n);
  if (t.dt != i->ty.dt) {
    struct sty w = with_dt(&t, (ir_dtype)i->ty.dt);
    x = convert(g, x, &t, &w);
    t = w;
  }
  ir_type_id rt = ty_of(g, &t);
  uint32_t op = ir_build(&g->b, code, &x, 1, &rt, 1);
  ir_op(g->f, op)->i[0] = i->attr & (SEMA_SCAN_REVERSE - 1);
  ir_op(g->f, op)->i[1] = (i->attr & SEMA_SCAN_REVERSE) != 0;
  return ir_res(g->f, op, 0);
}

/* x with a unit dimension inserted at k (sema type *t updated). */
static ir_val expand_at(struct irgen *g, ir_val x, struct sty *t, int k) {
  memmove(t->dims + k + 1, t->dims + k, sizeof(int32_t) * (size_t)(t->rank - k));
  t->dims[k] = 1;
  t->rank++;
  ir_type_id ty = ty_of(g, t);
  uint32_t op = ir_build(&g->b, IR_EXPAND_DIMS, &x, 1, &ty, 1);
  ir_op(g->f, op)->i[0] = k;
  return ir_res(g->f, op, 0);
}

/* An i32 tile of shape xt holding each element's index along `axis`, or (axis < 0) its
 * row-major index in the whole tile. */
static ir_val index_tile(struct irgen *g, const struct sty *xt, int64_t axis) {
  struct sty full = *xt;
  full.dt = DT_I32;
  full.weak = 0;
  ir_val sum = 0;
  int64_t stride = 1;
  for (int d = full.rank - 1; d >= 0; d--) {
    if (axis >= 0 && d != axis) continue;
    struct sty a = full;
    a.rank = 1;
    a.dims[0] = full.dims[d];
    for (int e = 1; e < IR_MAX_RANK; e++) a.dims[e] = 0;
    ir_val v = ir_build1(&g->b, IR_ARANGE, ty_of(g, &a), NULL, 0);
    for (int e = 0; e < d; e++) v = expand_at(g, v, &a, e);      /* leading unit dims */
    while (a.rank < full.rank) v = expand_at(g, v, &a, a.rank);   /* trailing ones */
    v = convert(g, v, &a, &full);                                 /* broadcast */
    if (stride != 1) v = binary(g, IR_MUL, v, const_num(g, (double)stride, &full));
    sum = sum ? binary(g, IR_ADD, sum, v) : v;
    stride *= full.dims[d];
  }
  return sum;
}

/* argmax/argmin (check_argminmax): the extreme value along the axis, broadcast back, compared
 * with every element; the smallest index among the equal ones is the result (the axis length,
 * or the tile's size, where none is equal: NaN only). */
static ir_val emit_argminmax(struct irgen *g, struct ast_node *n, enum builtin_id b, ir_val x,
                             const struct sty *xt0, int64_t axis) {
  struct sty xt = *xt0;
  xt.weak = 0;
  if (axis < 0 && xt.rank == 1) axis = 0;
  ir_val m = emit_reduce(g, n, b == BI_ARGMAX ? BI_MAX : BI_MIN, x, xt, axis);
  struct sty mt = xt;
  if (axis >= 0) {
    for (int d = (int)axis; d + 1 < mt.rank; d++) mt.dims[d] = mt.dims[d + 1];
    mt.rank--;
    mt.dims[mt.rank] = 0;
    m = expand_at(g, m, &mt, (int)axis);
  } else {
    mt.rank = 0;
    memset(mt.dims, 0, sizeof mt.dims);
  }
  m = convert(g, m, &mt, &xt); /* broadcast (splat for a scalar) */
  ir_val eq = binary(g, IR_EQ, x, m);
  struct sty it = xt;
  it.dt = DT_I32;
  ir_val idx = index_tile(g, &xt, axis);
  int64_t none = axis >= 0 ? xt.dims[axis] : 1;
  if (axis < 0)
    for (int d = 0; d < xt.rank; d++) none *= xt.dims[d];
  ir_val sel[3] = {eq, idx, const_num(g, (double)none, &it)};
  ir_val cand = ir_build1(&g->b, IR_SELECT, ty_of(g, &it), sel, 3);
  return emit_reduce(g, n, BI_MIN, cand, it, axis);
}

/* ---- random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11), counter (offset, 0, 0, 0), key (seed, 0), lowered to u32 mul, mulhi,
 * xor and add so both GPU tiers and the interpreter compute it from the same ops. ---- */

static const uint32_t PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u; /* round multipliers */
static const uint32_t PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u; /* key increments: golden ratio, sqrt(3) - 1 */
enum { PHILOX_ROUNDS = 10 };

static ir_val u32_const(struct irgen *g, const struct sty *t, uint32_t v) {
  return ir_const_int(&g->b, ty_of(g, t), (int64_t)v);
}

/* A Philox word while the rounds are emitted: 0 while it is known to be zero, and a scalar
 * while it depends on the key only (the first rounds), so neither zeros nor key-only words
 * become tile ops: the tile part of the chain starts from the counter alone. */
struct pword {
  ir_val v;
  bool tile;
};

/* a OP b for OP in xor, mul, mulhi on words of the shapes above (ut: the tile type). */
static struct pword pword_op(struct irgen *g, ir_opcode code, struct pword a, struct pword b, const struct sty *ut) {
  struct sty us = scalar_sty(DT_U32);
  if (!a.v || !b.v) return code == IR_XOR ? (a.v ? a : b) : (struct pword){0, false};
  bool tile = a.tile || b.tile;
  if (tile && !a.tile) a.v = convert(g, a.v, &us, ut);
  if (tile && !b.tile) b.v = convert(g, b.v, &us, ut);
  return (struct pword){binary(g, code, a.v, b.v), tile};
}

static struct pword pword_const(struct irgen *g, uint32_t v) {
  struct sty us = scalar_sty(DT_U32);
  return (struct pword){v ? u32_const(g, &us, v) : 0, false};
}

/* The 4 output words of Philox4x32-10 for each element of ctr (u32, type ut) under the key
 * (seed, 0), seed a u32 scalar: each round is
 *   (c0, c1, c2, c3) <- (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0))
 * and the key (k0, k1) grows by (W0, W1) after each round, modulo 2^32. */
static void emit_philox(struct irgen *g, ir_val seed, ir_val ctr, const struct sty *ut, ir_val out[4]) {
  struct sty us = scalar_sty(DT_U32);
  struct pword c[4] = {{ctr, ut->rank > 0}, {0, false}, {0, false}, {0, false}};
  struct pword m0 = pword_const(g, PHILOX_M0), m1 = pword_const(g, PHILOX_M1);
  for (uint32_t r = 0; r < PHILOX_ROUNDS; r++) {
    struct pword k0 = {r ? binary(g, IR_ADD, seed, u32_const(g, &us, r * PHILOX_W0)) : seed, false};
    struct pword k1 = pword_const(g, r * PHILOX_W1);
    struct pword hi0 = pword_op(g, IR_MULHI, c[0], m0, ut), lo0 = pword_op(g, IR_MUL, c[0], m0, ut);
    struct pword hi1 = pword_op(g, IR_MULHI, c[2], m1, ut), lo1 = pword_op(g, IR_MUL, c[2], m1, ut);
    c[0] = pword_op(g, IR_XOR, pword_op(g, IR_XOR, hi1, c[1], ut), k0, ut);
    c[1] = lo1;
    c[2] = pword_op(g, IR_XOR, pword_op(g, IR_XOR, hi0, c[3], ut), k1, ut);
    c[3] = lo0;
  }
  for (int w = 0; w < 4; w++) { /* ten rounds leave no word zero or key-only; kept general */
    if (!c[w].v) c[w].v = u32_const(g, &us, 0);
    out[w] = c[w].tile ? c[w].v : convert(g, c[w].v, &us, ut);
  }
}

/* A word's top 24 bits as an f32 in [0, 1): (w >> 8) * 2^-24, exact; plus `bias` (0 or 1)
 * ulps of 2^-24 before the scaling ((w >> 8) + 1 gives (0, 1]). */
static ir_val unit_f32(struct irgen *g, ir_val w, const struct sty *ut, const struct sty *ft, double bias) {
  ir_val top = binary(g, IR_SHR, w, u32_const(g, ut, 8));
  ir_val f = convert(g, top, ut, ft);
  if (bias != 0) f = binary(g, IR_ADD, f, const_num(g, bias, ft));
  return binary(g, IR_MUL, f, const_num(g, 0x1p-24, ft));
}

/* cos(2 pi u) for u in [0, 1) from f32 adds, multiplies and selects: with a = |u - 1/2| in
 * [0, 1/2], cos(2 pi u) = -cos(2 pi a); for a > 1/4 the reflection b = 1/2 - a gives
 * cos(2 pi a) = -cos(2 pi b), so only [0, pi/2] needs the Taylor polynomial up to x^12
 * (truncation error below 7e-9; every step up to here is exact). */
static ir_val cos_2pi(struct irgen *g, ir_val u, const struct sty *ft) {
  ir_val a = ir_unary(&g->b, IR_ABS, binary(g, IR_SUB, u, const_num(g, 0.5, ft)));
  ir_val far = binary(g, IR_GT, a, const_num(g, 0.25, ft));
  ir_val sel[3] = {far, binary(g, IR_SUB, const_num(g, 0.5, ft), a), a};
  ir_val b = ir_build1(&g->b, IR_SELECT, ty_of(g, ft), sel, 3);
  ir_val x = binary(g, IR_MUL, b, const_num(g, 6.283185307179586, ft));
  ir_val x2 = binary(g, IR_MUL, x, x);
  static const double coef[] = {1.0 / 479001600, -1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24, -0.5, 1.0};
  ir_val p = const_num(g, coef[0], ft);
  for (size_t k = 1; k < TL_ARRAY_LEN(coef); k++) p = binary(g, IR_ADD, binary(g, IR_MUL, p, x2), const_num(g, coef[k], ft));
  ir_val pick[3] = {far, p, ir_unary(&g->b, IR_NEG, p)};
  return ir_build1(&g->b, IR_SELECT, ty_of(g, ft), pick, 3);
}

/* rand, randn, randint (check_rand): Philox's first word w0 is randint's value and, through
 * unit_f32, rand's; randn is Box-Muller of the first two: sqrt(-2 ln u1) cos(2 pi u2) with
 * u1 = ((w0 >> 8) + 1) 2^-24 in (0, 1] and u2 = (w1 >> 8) 2^-24 in [0, 1). */
static ir_val emit_rand(struct irgen *g, struct ast_node *n, enum builtin_id b, struct ast_node **args,
                        const struct sty *rt) {
  struct sty us = scalar_sty(DT_U32), ut = with_dt(rt, DT_U32), ft = with_dt(rt, DT_F32);
  ir_val seed = lower_to(g, args[0], &us);
  ir_val ctr = lower_to(g, args[1], &ut);
  here(g, n);
  ir_val w[4];
  emit_philox(g, seed, ctr, &ut, w);
  if (b == BI_RANDINT) return w[0];
  if (b == BI_RAND) return unit_f32(g, w[0], &ut, &ft, 0);
  ir_val u1 = unit_f32(g, w[0], &ut, &ft, 1), u2 = unit_f32(g, w[1], &ut, &ft, 0);
  ir_val r = ir_unary(&g->b, IR_SQRT, binary(g, IR_MUL, const_num(g, -2.0, &ft), ir_unary(&g->b, IR_LOG, u1)));
  return binary(g, IR_MUL, r, cos_2pi(g, u2, &ft));
}

static ir_val lower_call(struct irgen *g, struct ast_node *n, struct sema_info *i) {
  struct ast_node **args = i->args;
  if (i->builtin == BI_CAST) {
    struct ast_node *xn = n->list.v[0];
    struct sema_info *xi = sema_info(g->s, xn);
    ir_val x = lower(g, xn);
    here(g, n);
    if (xi->ty.dt == i->ty.dt) return x;
    if (i->ty.dt == DT_BOOL) {
      struct sty xt = xi->ty;
      xt.weak = 0;
      return binary(g, IR_NE, x, const_num(g, 0.0, &xt));
    }
    return convert(g, x, &xi->ty, &i->ty);
  }
  enum builtin_id b = (enum builtin_id)i->builtin;
  switch (b) {
  case BI_PROGRAM_ID:
  case BI_NUM_PROGRAMS: {
    here(g, n);
    ir_type_id t = ir_type_scalar(g->f, DT_I32);
    uint32_t op = ir_build(&g->b, b == BI_PROGRAM_ID ? IR_PROGRAM_ID : IR_NUM_PROGRAMS, NULL, 0, &t, 1);
    ir_op(g->f, op)->i[0] = i->attr;
    return ir_res(g->f, op, 0);
  }
  case BI_CDIV: {
    ir_val a = lower_to(g, args[0], &i->opnd), d = lower_to(g, args[1], &i->opnd);
    here(g, n);
    ir_val one = const_num(g, 1.0, &i->opnd);
    return binary(g, IR_DIV, binary(g, IR_SUB, binary(g, IR_ADD, a, d), one), d);
  }
  case BI_MIN:
  case BI_MAX:
  case BI_SUM: {
    bool elementwise = b != BI_SUM && args[1];
    if (elementwise) {
      ir_val x = lower_to(g, args[0], &i->opnd), y = lower_to(g, args[1], &i->opnd);
      here(g, n);
      return binary(g, b == BI_MIN ? IR_MIN : IR_MAX, x, y);
    }
    struct sema_info *xi = sema_info(g->s, args[0]);
    ir_val x = lower(g, args[0]);
    return emit_reduce(g, n, b, x, xi->ty, i->attr);
  }
  case BI_ARGMAX:
  case BI_ARGMIN: {
    struct sema_info *xi = sema_info(g->s, args[0]);
    ir_val x = lower(g, args[0]);
    here(g, n);
    return emit_argminmax(g, n, b, x, &xi->ty, i->attr);
  }
  case BI_CUMSUM:
  case BI_CUMPROD:
  case BI_CUMMAX:
  case BI_CUMMIN: {
    struct sema_info *xi = sema_info(g->s, args[0]);
    ir_val x = lower(g, args[0]);
    return emit_scan(g, n, b, x, &xi->ty, i);
  }
  case BI_ABS: case BI_EXP: case BI_EXP2: case BI_LOG: case BI_LOG2: case BI_SQRT:
  case BI_RSQRT: case BI_TANH: case BI_ERF: case BI_SIGMOID: case BI_RELU: case BI_GELU:
  case BI_SILU: {
    ir_val x = lower_to(g, args[0], &i->ty);
    return emit_math(g, n, b, x, &i->ty);
  }
  case BI_WHERE: {
    struct sty ct = with_dt(&i->ty, DT_BOOL);
    struct sty vt = i->ty;
    vt.weak = 0;
    ir_val c = lower_to(g, args[0], &ct);
    ir_val x = lower_to(g, args[1], &vt), y = lower_to(g, args[2], &vt);
    here(g, n);
    ir_val sel[3] = {c, x, y};
    return ir_build1(&g->b, IR_SELECT, ty_of(g, &vt), sel, 3);
  }
  case BI_ZEROS:
    here(g, n);
    return const_num(g, 0.0, &i->ty);
  case BI_FULL: {
    struct sema_info *vi = sema_info(g->s, args[1]);
    if (vi->is_const) {
      here(g, n);
      return emit_const(g, vi->cv, (ir_dtype)vi->ty.dt, &i->ty);
    }
    return lower_to(g, args[1], &i->ty);
  }
  case BI_ARANGE:
    here(g, n);
    return ir_build1(&g->b, IR_ARANGE, ty_of(g, &i->ty), NULL, 0);
  case BI_TRANS: {
    ir_val x = lower(g, args[0]);
    here(g, n);
    return ir_build1(&g->b, IR_TRANS, ty_of(g, &i->ty), &x, 1);
  }
  case BI_RESHAPE: {
    ir_val x = lower(g, args[0]);
    here(g, n);
    return ir_build1(&g->b, IR_RESHAPE, ty_of(g, &i->ty), &x, 1);
  }
  case BI_PERMUTE: {
    ir_val x = lower(g, args[0]);
    here(g, n);
    ir_type_id rt = ty_of(g, &i->ty);
    uint32_t op = ir_build(&g->b, IR_PERMUTE, &x, 1, &rt, 1);
    ir_op(g->f, op)->i[0] = i->attr;
    return ir_res(g->f, op, 0);
  }
  case BI_JOIN: {
    ir_val ab[2] = {lower(g, args[0]), lower(g, args[1])};
    here(g, n);
    return ir_build1(&g->b, IR_JOIN, ty_of(g, &i->ty), ab, 2);
  }
  case BI_BROADCAST: /* expand_dims and broadcast, as implicit broadcasting makes them */
    return lower_to(g, args[0], &i->ty);
  case BI_LOAD: return lower_load_call(g, n, i, args);
  case BI_ATOMIC_ADD:
  case BI_ATOMIC_MAX:
  case BI_ATOMIC_MIN: return lower_atomic(g, n, (enum builtin_id)i->builtin, args);
  case BI_RAND:
  case BI_RANDN:
  case BI_RANDINT: return emit_rand(g, n, b, args, &i->ty);
  case BI_DOT: {
    ir_val a = lower(g, args[0]), c = lower(g, args[1]);
    return emit_dot(g, n, a, c, i->attr);
  }
  default: break;
  }
  internal(g, n, "unhandled builtin");
  return 0;
}

/* Lowers n to a value of its own type (sema's i->ty). */
static ir_val lower(struct irgen *g, struct ast_node *n) {
  struct sema_info *i = sema_info(g->s, n);
  if (g->failed) return 0;
  if (i->ty.kind != STY_VAL) {
    internal(g, n, "a non-value reached lowering");
    return 0;
  }
  if (i->is_const && i->ty.rank == 0) {
    here(g, n);
    return emit_const(g, i->cv, (ir_dtype)i->ty.dt, &i->ty);
  }
  switch (n->kind) {
  case AST_NAME:
    if (!i->sym || !i->sym->val) {
      internal(g, n, "a name without a value");
      return 0;
    }
    return i->sym->val;
  case AST_UNARY: {
    ir_val x = lower_to(g, n->a, &i->ty);
    here(g, n);
    return ir_unary(&g->b, n->op == OP_NEG ? IR_NEG : IR_NOT, x);
  }
  case AST_BINARY: {
    if (n->op == OP_MATMUL) {
      ir_val a = lower(g, n->a), b = lower(g, n->b);
      return emit_dot(g, n, a, b, 0);
    }
    ir_val x = lower_to(g, n->a, &i->opnd), y = lower_to(g, n->b, &i->opnd);
    here(g, n);
    return binary(g, lang_binary_opcode(n->op), x, y);
  }
  case AST_CALL: return lower_call(g, n, i);
  case AST_INDEX: {
    if (i->is_load) return load_slice(g, n, 0.0);
    struct sema_info *bi = sema_info(g->s, n->a);
    ir_val x = lower(g, n->a);
    here(g, n);
    struct sty cur = bi->ty;
    cur.weak = 0;
    for (int k = 0; k < i->ty.rank; k++) {
      if (!((i->attr >> k) & 1)) continue;
      memmove(cur.dims + k + 1, cur.dims + k, sizeof(int32_t) * (size_t)(cur.rank - k));
      cur.dims[k] = 1;
      cur.rank++;
      ir_type_id t = ty_of(g, &cur);
      uint32_t op = ir_build(&g->b, IR_EXPAND_DIMS, &x, 1, &t, 1);
      ir_op(g->f, op)->i[0] = k;
      x = ir_res(g->f, op, 0);
    }
    return x;
  }
  case AST_MEMBER: {
    ir_val x = lower(g, n->a);
    here(g, n);
    return ir_build1(&g->b, IR_TRANS, ty_of(g, &i->ty), &x, 1);
  }
  default:
    internal(g, n, "unexpected expression kind");
    return 0;
  }
}

/* ---- statements ---- */

static void lower_block(struct irgen *g, struct ast_node *b);
static void lower_stmt(struct irgen *g, struct ast_node *n);

static void lower_store(struct irgen *g, struct ast_node *n) {
  struct ast_node *target = n->a;
  struct sema_info *ti = sema_info(g->s, target);
  struct sty slice = ti->ty;
  ir_val v;
  if (n->op == OP_NONE) {
    v = lower_to(g, n->b, &slice);
  } else {
    /* Read-modify-write: load the slice, combine, store it back. */
    struct sema_info *r = sema_info(g->s, n);
    ir_val cur = load_slice(g, target, 0.0);
    here(g, n);
    ir_val x = convert(g, cur, &slice, &r->opnd);
    ir_val y = lower_to(g, n->b, &r->opnd);
    here(g, n);
    ir_val z = binary(g, lang_binary_opcode(n->op), x, y);
    v = convert(g, z, &r->ty, &slice);
  }
  here(g, n);
  emit_write(g, target, v, 0);
}

static void lower_assign(struct irgen *g, struct ast_node *n) {
  if (n->a->kind == AST_INDEX) {
    lower_store(g, n);
    return;
  }
  struct sema_sym *sym = sema_info(g->s, n->a)->sym;
  if (n->op == OP_NONE) {
    sym->val = lower_to(g, n->b, &sym->ty);
    return;
  }
  struct sema_info *r = sema_info(g->s, n);
  here(g, n);
  ir_val x = convert(g, sym->val, &sym->ty, &r->opnd);
  ir_val y = lower_to(g, n->b, &r->opnd);
  here(g, n);
  ir_val z = binary(g, lang_binary_opcode(n->op), x, y);
  sym->val = convert(g, z, &r->ty, &sym->ty);
}

static void yield_carried(struct irgen *g, struct sema_info *ci) {
  ir_val *vals = ARENA_NEWN(g->ctx->arena, ir_val, ci->carried.n + 1);
  for (uint32_t k = 0; k < ci->carried.n; k++) vals[k] = ci->carried.v[k]->val;
  ir_build(&g->b, IR_YIELD, vals, ci->carried.n, NULL, 0);
}

static void lower_for(struct irgen *g, struct ast_node *n) {
  struct sema_info *fi = sema_info(g->s, n);
  struct ast_node *r = n->a;
  struct ast_node *pos[3] = {NULL, NULL, NULL};
  uint32_t npos = 0;
  for (uint32_t k = 0; k < r->list.n; k++)
    if (r->list.v[k]->kind != AST_NAMED_ARG && npos < 3) pos[npos++] = r->list.v[k];
  struct sty i32 = scalar_sty(DT_I32);
  ir_val lb, ub, step;
  if (npos == 1) {
    ub = lower_to(g, pos[0], &i32);
    here(g, n);
    lb = ir_const_int(&g->b, ty_of(g, &i32), 0);
  } else {
    lb = lower_to(g, pos[0], &i32);
    ub = lower_to(g, pos[1], &i32);
  }
  if (npos == 3) {
    step = lower_to(g, pos[2], &i32);
  } else {
    here(g, n);
    step = ir_const_int(&g->b, ty_of(g, &i32), 1);
  }
  uint32_t nc = fi->carried.n;
  ir_val *inits = ARENA_NEWN(g->ctx->arena, ir_val, nc + 1);
  for (uint32_t k = 0; k < nc; k++) inits[k] = fi->carried.v[k]->val;
  here(g, n);
  uint32_t op = ir_build_for(&g->b, lb, ub, step, inits, nc);
  ir_op(g->f, op)->i[0] = fi->attr;
  uint32_t body = ir_region(g->f, op, 0);
  struct ir_builder saved = g->b;
  ir_builder_at_end(&g->b, g->f, body);
  g->b.loc = saved.loc;
  ir_val arg0 = ir_block(g->f, body)->args;
  fi->sym->val = arg0;
  for (uint32_t k = 0; k < nc; k++) fi->carried.v[k]->val = arg0 + 1 + k;
  lower_block(g, n->b);
  here(g, n);
  yield_carried(g, fi);
  g->b = saved;
  for (uint32_t k = 0; k < nc; k++) fi->carried.v[k]->val = ir_res(g->f, op, k);
}

/* An if, with nothing after it to run inside its branches (see lower_seq). */
struct cont;
static void lower_if_cont(struct irgen *g, struct ast_node *n, const struct cont *k);

static void lower_stmt(struct irgen *g, struct ast_node *n) {
  if (g->failed) return;
  switch (n->kind) {
  case AST_LET:
  case AST_VAR: {
    struct sema_sym *sym = sema_info(g->s, n)->sym;
    if (sym->is_const) return;
    sym->val = lower_to(g, n->b, &sym->ty);
    return;
  }
  case AST_LET_TUPLE: { /* let (a, b) = split(x): one split op per half */
    struct sema_info *ci = sema_info(g->s, n->b);
    ir_val x = lower(g, ci->args[0]);
    here(g, n->b);
    for (uint32_t k = 0; k < n->list.n; k++) {
      struct sema_sym *sym = sema_info(g->s, n->list.v[k])->sym;
      ir_type_id t = ty_of(g, &sym->ty);
      uint32_t op = ir_build(&g->b, IR_SPLIT, &x, 1, &t, 1);
      ir_op(g->f, op)->i[0] = k;
      sym->val = ir_res(g->f, op, 0);
    }
    return;
  }
  case AST_ASSIGN: lower_assign(g, n); return;
  case AST_EXPR_STMT: { /* store(...) and atomics, the only expression statements sema lets through */
    struct sema_info *i = sema_info(g->s, n->a);
    if (i->builtin == BI_STORE)
      lower_store_call(g, i->args);
    else
      lower(g, n->a);
    return;
  }
  case AST_FOR: lower_for(g, n); return;
  case AST_IF: lower_if_cont(g, n, NULL); return;
  case AST_BLOCK: lower_block(g, n); return;
  default: internal(g, n, "unexpected statement kind"); return;
  }
}

static void lower_block(struct irgen *g, struct ast_node *b) {
  for (uint32_t k = 0; k < b->list.n && !g->failed; k++) lower_stmt(g, b->list.v[k]);
}

/* ---- return ----
 * `return` ends the program instance. There is no early exit in Tile IR, so what follows an
 * `if` that may return is lowered into the branches that may not: lower_seq lowers a block's
 * statements from `from` on, then its continuation (the rest of the enclosing blocks); at an
 * `if` that may return, each branch gets the continuation (a statement after it may thus be
 * lowered more than once, into different regions) and nothing is lowered after the if. Sema
 * refuses `return` inside loops and statements after a `return` in one block. */
struct cont {
  struct ast_node *block;
  uint32_t from;
  const struct cont *next;
};

static bool may_return(const struct ast_node *n) {
  if (!n) return false;
  switch (n->kind) {
  case AST_RETURN: return true;
  case AST_IF: return may_return(n->b) || may_return(n->c);
  case AST_BLOCK:
    for (uint32_t k = 0; k < n->list.n; k++)
      if (may_return(n->list.v[k])) return true;
    return false;
  default: return false;
  }
}

static void lower_seq(struct irgen *g, struct ast_node *blk, uint32_t from, const struct cont *k);

/* A branch (a BLOCK, an else-IF, or NULL), then the continuation. */
static void lower_branch(struct irgen *g, struct ast_node *br, const struct cont *k) {
  if (!br) {
    if (k) lower_seq(g, k->block, k->from, k->next);
  } else if (br->kind == AST_BLOCK) {
    lower_seq(g, br, 0, k);
  } else { /* else if: a one-statement sequence */
    struct ast_node one = {.kind = AST_BLOCK};
    one.list.v = &br;
    one.list.n = 1;
    lower_seq(g, &one, 0, k);
  }
}

static void lower_if_cont(struct irgen *g, struct ast_node *n, const struct cont *k) {
  struct sema_info *ii = sema_info(g->s, n);
  if (ii->taken == 1 || ii->taken == 0) {
    lower_branch(g, ii->taken == 1 ? n->b : n->c, k);
    return;
  }
  struct sty b1 = scalar_sty(DT_BOOL);
  ir_val cond = lower_to(g, n->a, &b1);
  uint32_t nc = ii->carried.n;
  ir_type_id *types = ARENA_NEWN(g->ctx->arena, ir_type_id, nc + 1);
  ir_val *before = ARENA_NEWN(g->ctx->arena, ir_val, nc + 1);
  for (uint32_t i = 0; i < nc; i++) {
    before[i] = ii->carried.v[i]->val;
    types[i] = g->f->values.v[before[i]].type;
  }
  here(g, n);
  uint32_t op = ir_build_if(&g->b, cond, types, nc);
  struct ir_builder saved = g->b;
  for (uint32_t r = 0; r < 2 && !g->failed; r++) {
    ir_builder_at_end(&g->b, g->f, ir_region(g->f, op, r));
    g->b.loc = saved.loc;
    for (uint32_t i = 0; i < nc; i++) ii->carried.v[i]->val = before[i];
    lower_branch(g, r == 0 ? n->b : n->c, k);
    here(g, n);
    yield_carried(g, ii); /* what follows the if reads them (with a continuation, nothing does) */
  }
  g->b = saved;
  for (uint32_t i = 0; i < nc; i++) ii->carried.v[i]->val = ir_res(g->f, op, i);
}

static void lower_seq(struct irgen *g, struct ast_node *blk, uint32_t from, const struct cont *k) {
  for (uint32_t i = from; i < blk->list.n && !g->failed; i++) {
    struct ast_node *st = blk->list.v[i];
    if (st->kind == AST_RETURN) return; /* the rest of this block and the continuation: not run */
    if ((st->kind == AST_IF || st->kind == AST_BLOCK) && may_return(st)) {
      struct cont rest = {blk, i + 1, k};
      if (st->kind == AST_IF) lower_if_cont(g, st, &rest);
      else lower_seq(g, st, 0, &rest);
      return;
    }
    lower_stmt(g, st);
  }
  if (k && !g->failed) lower_seq(g, k->block, k->from, k->next);
}

/* ---- the kernel ---- */

static void lower_params(struct irgen *g) {
  struct sema *s = g->s;
  struct ir_func *f = g->f;
  for (uint32_t p = 0; p < s->params.n; p++) {
    struct sema_sym *sym = s->params.v[p];
    ir_val v;
    if (sym->kind == SYM_TENSOR) {
      int32_t dims[IR_MAX_RANK] = {0};
      v = ir_add_param(f, sym->name, IR_PARAM_TENSOR,
                       ir_type_tensor(f, (ir_dtype)sym->ty.dt, sym->ty.rank, dims), sym->is_out);
    } else {
      v = ir_add_param(f, sym->name, IR_PARAM_SCALAR, ir_type_scalar(f, (ir_dtype)sym->ty.dt), false);
    }
    ir_param_of(f, v)->source_index = sym->index;
    sym->val = v;
  }
  for (uint32_t k = 0; k < s->shapes.n; k++) {
    struct sema_sym *sym = s->shapes.v[k];
    sym->val = ir_add_param(f, sym->name, IR_PARAM_SHAPE, ir_type_scalar(f, DT_I32), false);
    ir_param_of(f, sym->val)->source_index = UINT32_MAX;
  }
  /* Now that the shape values exist, give each tensor its real type. */
  for (uint32_t p = 0; p < s->params.n; p++) {
    struct sema_sym *sym = s->params.v[p];
    if (sym->kind != SYM_TENSOR) continue;
    int32_t dims[IR_MAX_RANK] = {0};
    for (int d = 0; d < sym->ty.rank; d++)
      dims[d] = sym->dim_shape[d] ? IR_DIM_SYM(sym->dim_shape[d]->val) : sym->ty.dims[d];
    f->values.v[sym->val].type = ir_type_tensor(f, (ir_dtype)sym->ty.dt, sym->ty.rank, dims);
  }
}

struct ir_func *irgen_kernel(struct sema *s) {
  struct irgen g;
  memset(&g, 0, sizeof g);
  g.s = s;
  g.ctx = s->ctx;
  struct ast_kernel *k = s->kd->k;
  g.f = ir_func_new(s->ctx->arena, s->ctx->strs, k->name);
  g.f->file = strtab_intern(s->ctx->strs, s->file->name, strlen(s->file->name));
  g.f->loc = (struct ir_loc){s->kd->node->loc2.line, s->kd->node->loc2.col};
  g.f->warps = s->warps;
  lower_params(&g);

  ir_builder_at_end(&g.b, g.f, IR_GRID_BLOCK);
  struct sty i32 = scalar_sty(DT_I32);
  ir_val grid[3];
  for (uint32_t d = 0; d < 3; d++) {
    if (d < s->ngrid) {
      grid[d] = lower_to(&g, s->grid[d], &i32);
    } else {
      g.b.loc.line = k->grid_loc.line;
      g.b.loc.col = k->grid_loc.col;
      grid[d] = ir_const_int(&g.b, ty_of(&g, &i32), 1);
    }
  }
  g.b.loc.line = k->grid_loc.line;
  g.b.loc.col = k->grid_loc.col;
  ir_build(&g.b, IR_GRID, grid, 3, NULL, 0);

  ir_builder_at_end(&g.b, g.f, IR_BODY_BLOCK);
  lower_seq(&g, k->body, 0, NULL); /* lower_block, with `return` */
  return g.failed ? NULL : g.f;
}
