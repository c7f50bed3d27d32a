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
 *   add(dot(a, b, 0), c)              -> dot(a, b, c)  (the dot has no other use)
 *   select(const c, a, b)             -> a or b
 *   if (const c) {...}                -> the taken branch, inlined
 *   x + 0, x - 0, x * 1, x / 1 (ints: also x * 0 -> 0), and constants moved to the right
 *   of commutative ops.
 *
 * Sketch:
 *   %z = const 0.0 : tile<64x64xf32>            %d = dot %a, %b, %acc : tile<64x64xf32>
 *   %d = dot %a, %b, %z : tile<64x64xf32>   =>
 *   %s = add %acc, %d : tile<64x64xf32>
 * Replaced ops are left without uses; DCE deletes them.                                   */
#include <math.h>
#include <string.h>

#include "passes.h"

struct canon {
  struct pass_ctx *pc;
  uint32_t *uses;
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

static ir_val clone_const(struct ir_func *f, uint32_t before, ir_val c, ir_type_id type) {
  struct ir_builder b;
  ir_builder_before(&b, f, before);
  struct ir_op *src = def(f, c);
  int64_t iv = src->i[0];
  double fv = src->f;
  uint32_t op = ir_build(&b, IR_CONST, NULL, 0, &type, 1);
  f->ops.v[op].i[0] = iv;
  f->ops.v[op].f = fv;
  return f->ops.v[op].res;
}

static void replace(struct canon *c, ir_val from, ir_val to) {
  ir_replace_uses(c->pc->f, from, to);
  c->pc->changed = true;
}

/* Moves the ops of region `blk` (except its yield) before op `before`, then replaces the
 * results of `before` with the yielded values. */
static void inline_region(struct canon *c, uint32_t ifop, uint32_t blk) {
  struct ir_func *f = c->pc->f;
  struct ir_block *b = &f->blocks.v[blk];
  uint32_t target = f->ops.v[ifop].block;
  for (uint32_t i = 0; i + 1 < b->ops.n; i++) {
    uint32_t op = b->ops.v[i];
    struct ir_block *tb = &f->blocks.v[target];
    VEC_RESERVE(f->arena, tb->ops, 1);
    uint32_t pos = 0;
    while (tb->ops.v[pos] != ifop) pos++;
    memmove(&tb->ops.v[pos + 1], &tb->ops.v[pos], sizeof(uint32_t) * (tb->ops.n - pos));
    tb->ops.v[pos] = op;
    tb->ops.n++;
    f->ops.v[op].block = target;
  }
  struct ir_op *y = &f->ops.v[VEC_LAST(b->ops)];
  struct ir_op *o = &f->ops.v[ifop];
  for (uint32_t i = 0; i < o->nres; i++) ir_replace_uses(f, o->res + i, y->args[i]);
  b->ops.n = 0;
  ir_op_remove(f, ifop);
  c->pc->changed = true;
}

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct canon *c = ud;
  struct ir_op *op = &f->ops.v[id];
  if (!op->block) return;
  ir_type_id rt = op->nres ? f->values.v[op->res].type : 0;

  switch (op->code) {
  case IR_SPLAT:
    if (is_const(f, op->args[0])) replace(c, op->res, clone_const(f, id, op->args[0], rt));
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
      replace(c, op->res, clone_const(f, id, a, rt));
      return;
    }
    struct ir_op *d = def(f, a);
    if (d && d->code == IR_SPLAT && op->code != IR_TRANS) {
      struct ir_builder b;
      ir_builder_before(&b, f, id);
      replace(c, op->res, ir_build1(&b, IR_SPLAT, rt, &d->args[0], 1));
      return;
    }
    if (d && d->code == IR_TRANS && op->code == IR_TRANS) replace(c, op->res, d->args[0]);
    return;
  }
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
        uint32_t dot_id = ir_def_op(f, dv);
        ir_val args[3] = {d->args[0], d->args[1], other};
        /* the new dot must sit after `other` is defined: build it at the add's position */
        struct ir_builder b;
        ir_builder_before(&b, f, id);
        ir_val nd = ir_build1(&b, IR_DOT, rt, args, 3);
        f->ops.v[ir_def_op(f, nd)].i[0] = f->ops.v[dot_id].i[0];
        replace(c, op->res, nd);
        c->uses[dv] = 0;
        ir_op_remove(f, id); /* the add is dead; left in place it would match again */
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
    return;
  default:
    return;
  }
}

void pass_canonicalize(struct pass_ctx *pc) {
  struct canon c = {pc, NULL};
  bool any = false;
  for (int round = 0; round < 8; round++) {
    pc->changed = false;
    c.uses = ir_use_counts(pc->f, pc->scratch);
    ir_walk(pc->f, IR_GRID_BLOCK, visit, &c);
    ir_walk(pc->f, IR_BODY_BLOCK, visit, &c);
    any |= pc->changed;
    if (!pc->changed) break;
  }
  pc->changed = any;
}
