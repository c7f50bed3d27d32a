/* canonicalize.c - rewrite ops into canonical forms.
 *
 * Needs: verified IR at any stage before layout assignment. Guarantees: the same function,
 * with these local rewrites applied until none applies (bounded):
 *
 *   splat(const c)                    -> const c : tile        (constants are uniform)
 *   broadcast/expand_dims/trans(const) -> const of the new shape
 *   broadcast(splat s)                -> splat s  : new shape
 *   expand_dims(splat s)              -> splat s  : new shape
 *   broadcast(x) : type(x)            -> x        (and cast(x) : type(x) -> x)
 *   trans(trans(x))                   -> x
 *   reshape/permute/split(const or splat) -> the const or splat of the new shape
 *   reshape(x) : type(x) -> x, reshape(reshape(x)) -> reshape(x)
 *   permute(x) {identity} -> x, permute(permute(x)) -> one permute, rank-2 permute -> trans
 *   split(join(a, b)) {half=0|1}      -> a | b
 *   join(split(x) {half=0}, split(x) {half=1}) -> x; join(c, c) of one constant -> c
 *   add(dot(a, b, 0), c)              -> dot(a, b, c)  (the dot has no other use)
 *   select(const c, a, b)             -> a or b
 *   if (const c) {...}                -> the taken branch, inlined
 *   x + 0, x - 0, x * 1, x / 1 (ints: also x * 0 -> 0), and constants moved to the right
 *   of commutative ops.
 *   x / splat(s) (f32, x a tile)     -> x * splat(1 / s): one division per program instead
 *   of one per element (a softmax's e / sum(e); at least as accurate as the GPU's division,
 *   which is within 2 ulp; f16 and bf16 keep the division, whose one rounding a product of
 *   two rounded values would double).
 *   x / P, x % P (integers; P a shape size with the pow2 fact, its splats and widening casts
 *   stripped):  s = ctz(P), m = P - 1; unsigned: x >> s, x & m; signed (truncating, the
 *   sign of x): q = (x + ((x >> (bits-1)) & m)) >> s, r = x - (q << s).
 *
 * Sketch:
 *   %z = const 0.0 : tile<64x64xf32>            %d = dot %a, %b, %acc : tile<64x64xf32>
 *   %d = dot %a, %b, %z : tile<64x64xf32>   =>
 *   %s = add %acc, %d : tile<64x64xf32>
 * Replaced ops are left without uses; DCE deletes them.
 *
 * Linear time per round: a rewrite that makes a new op (a constant, a splat, the fused dot)
 * turns the op into it in place (ir_op_rewrite), and one that replaces a value by another
 * records it in a forwarding map that the walk applies to each op's operands as it reaches
 * them (uses follow definitions), instead of rescanning the function for each rewrite.  */
#include <math.h>
#include <string.h>

#include "passes.h"

struct canon {
  struct pass_ctx *pc;
  uint32_t *uses;
  ir_val *fwd;  /* value -> the value that replaces it (0: none); values.n entries */
  uint32_t nfwd;
};

static struct ir_op *def(struct ir_func *f, ir_val v) {
  uint32_t d = ir_def_op(f, v);
  return d ? &f->ops.v[d] : NULL;
}

static bool is_const(struct ir_func *f, ir_val v) {
  struct ir_op *d = def(f, v);
  return d && d->code == IR_CONST;
}

/* true when v is a constant equal to k (ints and floats) */
static bool const_equals(struct ir_func *f, ir_val v, double k) {
  double x;
  return ir_value_const_float(f, v, &x) && x == k && !(k == 0 && signbit(x));
}

/* Turns op `id` into a constant with the value of constant c (of another shape). */
static void become_const(struct canon *c, uint32_t id, ir_val cv) {
  struct ir_func *f = c->pc->f;
  struct ir_op *src = def(f, cv);
  int64_t iv = src->i[0];
  double fv = src->f;
  ir_op_rewrite(f, id, IR_CONST, NULL, 0);
  f->ops.v[id].i[0] = iv;
  f->ops.v[id].f = fv;
  c->pc->changed = true;
}

static ir_val forwarded(const struct canon *c, ir_val v) {
  while (v < c->nfwd && c->fwd[v]) v = c->fwd[v];
  return v;
}

/* Every later use of `from` reads `to` (applied by visit as the walk reaches each op). */
static void replace(struct canon *c, ir_val from, ir_val to) {
  if (from < c->nfwd) c->fwd[from] = forwarded(c, to);
  c->pc->changed = true;
}

/* Moves the ops of region `blk` (except its yield) before op `before`, then replaces the
 * results of `before` with the yielded values. */
static void inline_region(struct canon *c, uint32_t ifop, uint32_t blk) {
  struct ir_func *f = c->pc->f;
  struct ir_block *b = &f->blocks.v[blk];
  uint32_t target = f->ops.v[ifop].block, moved = b->ops.n - 1;
  struct ir_block *tb = &f->blocks.v[target];
  uint32_t pos = 0;
  while (tb->ops.v[pos] != ifop) pos++;
  /* the region's ops (all but its yield) take the if's place */
  VEC_RESERVE(f->arena, tb->ops, moved);
  memmove(&tb->ops.v[pos + moved], &tb->ops.v[pos + 1], sizeof(uint32_t) * (tb->ops.n - pos - 1));
  for (uint32_t i = 0; i < moved; i++) {
    tb->ops.v[pos + i] = b->ops.v[i];
    f->ops.v[b->ops.v[i]].block = target;
  }
  tb->ops.n += moved - 1;
  struct ir_op *y = &f->ops.v[VEC_LAST(b->ops)];
  struct ir_op *o = &f->ops.v[ifop];
  for (uint32_t i = 0; i < o->nres; i++) replace(c, o->res + i, forwarded(c, y->args[i]));
  b->ops.n = 0;
  o->block = 0; /* unlinked above */
  c->pc->changed = true;
}

static bool same_const(struct ir_func *f, ir_val x, ir_val y) {
  struct ir_op *a = def(f, x), *b = def(f, y);
  return a && b && a->code == IR_CONST && b->code == IR_CONST && a->i[0] == b->i[0] &&
         memcmp(&a->f, &b->f, sizeof a->f) == 0;
}

/* x / P or x % P (op `id`, integers) where P is a shape size known to be a power of two:
 * shifts and masks in place of a division by a value known only at launch (about twenty
 * instructions on the GPU). The new ops go before `id`, which becomes the last of them. */
static bool pow2_division(struct canon *c, uint32_t id) {
  struct ir_func *f = c->pc->f;
  struct ir_op *op = &f->ops.v[id];
  ir_val x = op->args[0], y = op->args[1];
  ir_dtype dt = (ir_dtype)ir_vtype(f, x)->dtype;
  if (ir_dtype_is_float(dt) || dt == DT_BOOL) return false;
  ir_val ps = ir_divisor_source(f, y);
  struct ir_param *p = ir_param_of(f, ps);
  if (!p || p->kind != IR_PARAM_SHAPE || !p->pow2) return false;
  bool rem = op->code == IR_REM;
  ir_type_id st = ir_type_scalar(f, dt), xt = f->values.v[x].type;
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  b.loc = f->ops.v[id].loc;
  ir_val pv = ps;
  if (ir_vtype(f, ps)->dtype != dt) pv = ir_build1(&b, IR_CAST, st, &pv, 1);
  ir_val s = ir_unary(&b, IR_CTZ, pv), m = ir_binary(&b, IR_SUB, pv, ir_const_int(&b, st, 1));
  if (ir_vtype(f, x)->rank > 0) {
    s = ir_build1(&b, IR_SPLAT, xt, &s, 1);
    m = ir_build1(&b, IR_SPLAT, xt, &m, 1);
  }
  ir_val last[2];
  ir_opcode code;
  if (ir_dtype_is_unsigned(dt)) {
    code = rem ? IR_AND : IR_SHR; /* shr on unsigned is logical */
    last[0] = x, last[1] = rem ? m : s;
  } else {
    ir_val sign = ir_binary(&b, IR_SHR, x, ir_const_int(&b, xt, ir_dtype_bits(dt) - 1));
    ir_val q = ir_binary(&b, IR_ADD, x, ir_binary(&b, IR_AND, sign, m));
    if (rem) {
      q = ir_binary(&b, IR_SHL, ir_binary(&b, IR_SHR, q, s), s);
      code = IR_SUB, last[0] = x, last[1] = q;
    } else {
      code = IR_SHR, last[0] = q, last[1] = s;
    }
  }
  ir_op_rewrite(f, id, code, last, 2);
  c->pc->changed = true;
  return true;
}

/* x / splat(s) for an f32 tile x (op `id`): x * splat(1 / s). */
static void reciprocal_of_splat(struct canon *c, uint32_t id) {
  struct ir_func *f = c->pc->f;
  struct ir_op *op = &f->ops.v[id];
  ir_val x = op->args[0];
  struct ir_op *d = def(f, op->args[1]);
  if (ir_vtype(f, x)->rank == 0 || ir_vtype(f, x)->dtype != DT_F32 || !d || d->code != IR_SPLAT) return;
  ir_val s = d->args[0];
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  b.loc = f->ops.v[id].loc;
  ir_val r = ir_binary(&b, IR_DIV, ir_const_float(&b, f->values.v[s].type, 1.0), s);
  ir_val args[2] = {x, ir_build1(&b, IR_SPLAT, f->values.v[x].type, &r, 1)};
  ir_op_rewrite(f, id, IR_MUL, args, 2);
  c->pc->changed = true;
}

/* reshape, permute, split and join: the rules listed at the top. */
static void visit_shape_op(struct canon *c, uint32_t id) {
  struct ir_func *f = c->pc->f;
  struct ir_op *op = &f->ops.v[id];
  ir_val a = op->args[0];
  struct ir_op *d = def(f, a);
  if (op->code == IR_JOIN) {
    ir_val b = op->args[1];
    struct ir_op *e = def(f, b);
    if (d && e && d->code == IR_SPLIT && e->code == IR_SPLIT && d->args[0] == e->args[0] && d->i[0] == 0 &&
        e->i[0] == 1)
      replace(c, op->res, d->args[0]);
    else if (same_const(f, a, b))
      become_const(c, id, a);
    else if (d && e && d->code == IR_SPLAT && e->code == IR_SPLAT && d->args[0] == e->args[0]) {
      ir_op_rewrite(f, id, IR_SPLAT, &d->args[0], 1);
      c->pc->changed = true;
    }
    return;
  }
  if (is_const(f, a)) {
    become_const(c, id, a);
    return;
  }
  if (d && d->code == IR_SPLAT) {
    ir_op_rewrite(f, id, IR_SPLAT, &d->args[0], 1);
    c->pc->changed = true;
    return;
  }
  switch (op->code) {
  case IR_RESHAPE:
    if (f->values.v[a].type == f->values.v[op->res].type) {
      replace(c, op->res, a);
    } else if (d && d->code == IR_RESHAPE) {
      ir_op_set_args(f, id, &d->args[0], 1);
      c->pc->changed = true;
    }
    return;
  case IR_PERMUTE: {
    int rank = ir_vtype(f, a)->rank, p[IR_MAX_RANK], q[IR_MAX_RANK];
    if (!ir_perm_decode(op->i[0], rank, p)) return;
    bool identity = true;
    for (int i = 0; i < rank; i++) identity &= p[i] == i;
    if (identity) {
      replace(c, op->res, a);
      return;
    }
    if (d && d->code == IR_PERMUTE && ir_perm_decode(d->i[0], rank, q)) {
      /* result dimension i is this operand's p[i], which is the inner operand's q[p[i]] */
      int r[IR_MAX_RANK];
      for (int i = 0; i < rank; i++) r[i] = q[p[i]];
      ir_op_set_args(f, id, &d->args[0], 1);
      f->ops.v[id].i[0] = ir_perm_encode(r, rank);
      c->pc->changed = true;
      return;
    }
    if (rank == 2) { /* [1, 0]: the transpose, which the dot-operand paths know */
      ir_op_rewrite(f, id, IR_TRANS, &a, 1);
      c->pc->changed = true;
    }
    return;
  }
  case IR_SPLIT:
    if (d && d->code == IR_JOIN) replace(c, op->res, d->args[op->i[0] ? 1 : 0]);
    return;
  default:
    return;
  }
}

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct canon *c = ud;
  struct ir_op *op = &f->ops.v[id];
  if (!op->block) return;
  for (uint32_t k = 0; k < op->nargs; k++) op->args[k] = forwarded(c, op->args[k]);
  ir_type_id rt = op->nres ? f->values.v[op->res].type : 0;

  switch (op->code) {
  case IR_SPLAT:
    if (is_const(f, op->args[0])) become_const(c, id, op->args[0]);
    return;
  case IR_BROADCAST:
  case IR_EXPAND_DIMS:
  case IR_TRANS:
  case IR_CAST: {
    ir_val a = op->args[0];
    /* same type means no change for broadcast and cast; a square trans still permutes */
    if (f->values.v[a].type == rt && (op->code == IR_BROADCAST || op->code == IR_CAST)) {
      replace(c, op->res, a);
      return;
    }
    if (op->code == IR_CAST) return; /* constant casts are fold's job */
    if (is_const(f, a)) {
      become_const(c, id, a);
      return;
    }
    struct ir_op *d = def(f, a);
    if (d && d->code == IR_SPLAT && op->code != IR_TRANS) {
      ir_op_rewrite(f, id, IR_SPLAT, &d->args[0], 1); /* splat s : the new shape */
      c->pc->changed = true;
      return;
    }
    if (d && d->code == IR_TRANS && op->code == IR_TRANS) replace(c, op->res, d->args[0]);
    return;
  }
  case IR_RESHAPE:
  case IR_PERMUTE:
  case IR_SPLIT:
  case IR_JOIN:
    visit_shape_op(c, id);
    return;
  case IR_SELECT: {
    int64_t cv;
    if (ir_value_const_int(f, op->args[0], &cv)) replace(c, op->res, cv ? op->args[1] : op->args[2]);
    return;
  }
  case IR_IF: {
    int64_t cv;
    if (ir_value_const_int(f, op->args[0], &cv)) inline_region(c, id, op->region + (cv ? 0 : 1));
    return;
  }
  default:
    break;
  }

  if (ir_ops[op->code].nargs != 2 || !(ir_ops[op->code].flags & OPF_ELEM)) return;
  ir_val x = op->args[0], y = op->args[1];
  /* constants to the right of commutative ops */
  if ((ir_ops[op->code].flags & OPF_COMM) && is_const(f, x) && !is_const(f, y)) {
    ir_val sw[2] = {y, x};
    ir_op_set_args(f, id, sw, 2);
    c->pc->changed = true;
    op = &f->ops.v[id];
    x = op->args[0];
    y = op->args[1];
  }
  bool isint = !ir_dtype_is_float(ir_vtype(f, x)->dtype);
  switch (op->code) {
  case IR_ADD: {
    /* acc + dot(a, b, 0) -> dot(a, b, acc) */
    for (int side = 0; side < 2; side++) {
      ir_val dv = side ? x : y, other = side ? y : x;
      struct ir_op *d = def(f, dv);
      if (d && d->code == IR_DOT && c->uses[dv] == 1 && const_equals(f, d->args[2], 0) &&
          f->values.v[other].type == f->values.v[dv].type) {
        ir_val args[3] = {d->args[0], d->args[1], other};
        int64_t tf32 = d->i[0];
        /* the new dot must sit after `other` is defined: the add becomes it, in place */
        ir_op_rewrite(f, id, IR_DOT, args, 3);
        f->ops.v[id].i[0] = tf32;
        c->uses[dv] = 0;
        c->pc->changed = true;
        return;
      }
    }
    if (isint && const_equals(f, y, 0)) replace(c, op->res, x);
    return;
  }
  case IR_SUB:
    if (isint && const_equals(f, y, 0)) replace(c, op->res, x);
    return;
  case IR_MUL:
    if (const_equals(f, y, 1))
      replace(c, op->res, x);
    else if (isint && const_equals(f, y, 0))
      replace(c, op->res, y);
    return;
  case IR_DIV:
    if (const_equals(f, y, 1)) replace(c, op->res, x);
    else if (isint) pow2_division(c, id);
    else reciprocal_of_splat(c, id);
    return;
  case IR_REM:
    if (isint) pow2_division(c, id);
    return;
  default:
    return;
  }
}

void pass_canonicalize(struct pass_ctx *pc) {
  struct canon c = {pc, NULL, NULL, 0};
  bool any = false;
  for (int round = 0; round < 8; round++) {
    pc->changed = false;
    c.uses = ir_use_counts(pc->f, pc->scratch);
    c.nfwd = pc->f->values.n; /* rewrites make no values */
    c.fwd = ARENA_NEWN(pc->scratch, ir_val, c.nfwd + 1);
    ir_walk(pc->f, IR_GRID_BLOCK, visit, &c);
    ir_walk(pc->f, IR_BODY_BLOCK, visit, &c);
    any |= pc->changed;
    if (!pc->changed) break;
  }
  pc->changed = any;
}
