/* transpose.c - compute a chain of elementwise ops transposed when only its transposes
 * are used.
 *
 * Needs: verified generic IR (no layouts). Guarantees: the same results; for every group
 * of rank-2 values computed by elementwise ops from products (a "chain") whose every use
 * outside the group is a `trans`, and where that rewrite needs fewer new transposes than
 * it removes, the group is computed transposed and the `trans` ops read it directly:
 *
 *   trans(a @ b)            -> trans(b) @ trans(a)       (operand transposes are free: a
 *                                                         dot reads its operands from
 *                                                         shared memory either way)
 *   trans(f(x, y))          -> f(trans(x), trans(y))     (f elementwise, select, cast)
 *   trans(broadcast(x))     -> broadcast(trans(x))       (x a row or column)
 *   trans(expand_dims(v, axis)) -> expand_dims(v, 1 - axis)
 *   trans(const), trans(splat) -> the constant or splat of the swapped shape
 *   trans(trans(x))         -> x
 *   trans(if c {yield x} else {yield y}) -> the if yielding trans(x), trans(y) too (one
 *                                           rank-2 result: a mask applied in some steps)
 *
 * Why: attention's backward writes P = softmax(Q K^T) and needs P^T as the left operand of
 * dV += P^T dO (and dS^T of dK += dS^T Q). Transposing a product's result in registers
 * costs a round trip through shared memory and a barrier per iteration; computing
 * S^T = K Q^T instead leaves P^T in the accumulator's registers, where the next product
 * takes it as its register operand (FlashAttention-2 and -3's backward do this by hand).
 *
 *   %s  = dot %q, %kt, %z      : tile<32x64xf32>           %qt = trans %q : tile<128x32>
 *   %p  = exp2 %s              : tile<32x64xf32>    =>     %st = dot %k, %qt, %zt : tile<64x32>
 *   %pt = trans %p             : tile<64x32xf32>           %pt = exp2 %st : tile<64x32>
 *   (%kt = trans %k)
 * A value other than a product, constant or broadcast row/column that the group reads
 * (a loaded tile, a loop-carried value) needs a new trans (one that is a product's operand
 * costs nothing), and so does a group value that a product outside the group reads as an
 * operand (dS of FlashAttention-2's dQ += dS K: it goes through shared memory either way);
 * the rewrite is made only when those are fewer than the trans ops it removes. Old ops are
 * left without uses; DCE deletes them.                                                  */
#include <string.h>

#include "passes.h"

enum { MAX_IFS = 16 };

struct tp {
  struct ir_func *f;
  uint32_t nops;       /* ops before the pass (cand, comp index them) */
  uint32_t *use_start; /* uses of value v: use_op[use_start[v] .. use_start[v+1]) */
  uint32_t *use_op;
  uint8_t *cand;       /* op -> 1 while it is in a chain */
  uint32_t *comp;      /* op -> its chain's number (cand ops only) */
  ir_val *memo;        /* value -> its transpose, once built */
  uint32_t nvalues;
  uint32_t ifs[MAX_IFS][2]; /* if ops rebuilt with a transposed result: old, new (the old
                             * one's result is replaced and the op removed at the end) */
  uint32_t nifs;
};

static bool is_rank2_tile(const struct ir_func *f, ir_val v) {
  const struct ir_type *ty = ir_vtype(f, v);
  return ty->kind == IR_TY_TILE && ty->rank == 2;
}

/* Rebuilt for free from its operand (a constant, a splat, a row or column broadcast). */
static bool cheap(const struct tp *t, ir_val v) {
  uint32_t d = ir_def_op(t->f, v);
  if (!d) return false;
  const struct ir_op *op = ir_op(t->f, d);
  switch (op->code) {
  case IR_CONST: case IR_SPLAT: case IR_TRANS: return true;
  case IR_EXPAND_DIMS: return ir_vtype(t->f, op->args[0])->rank == 1;
  case IR_BROADCAST: return ir_vtype(t->f, op->args[0])->rank == 2 && cheap(t, op->args[0]);
  default: return false;
  }
}

static bool chain_op(const struct ir_func *f, const struct ir_op *op) {
  if (!op->block || op->nres != 1) return false;
  if (!is_rank2_tile(f, op->res)) return false;
  if (op->code == IR_IF) return op->nregions == 2;
  if (op->nregions) return false;
  if (op->code == IR_BROADCAST) return is_rank2_tile(f, op->args[0]); /* a row or column */
  return op->code == IR_DOT || (ir_ops[op->code].flags & OPF_ELEM);
}

/* The value region r of if op `id` yields (its one result). */
static ir_val yielded(const struct ir_func *f, uint32_t id, uint32_t r) {
  const struct ir_block *b = &f->blocks.v[f->ops.v[id].region + r];
  return f->ops.v[VEC_LAST(b->ops)].args[0];
}

/* The if op whose region ends with yield op u, when u is such a yield (else 0). */
static uint32_t yield_owner(const struct ir_func *f, uint32_t u) {
  const struct ir_op *op = ir_op(f, u);
  if (op->code != IR_YIELD) return 0;
  uint32_t owner = f->blocks.v[op->block].parent;
  return owner && f->ops.v[owner].code == IR_IF ? owner : 0;
}

/* Marks the chain behind value v (the operand of a trans): elementwise ops back to the
 * products, constants and loads they start from. */
static void mark(struct tp *t, ir_val v) {
  uint32_t d = ir_def_op(t->f, v);
  if (!d || t->cand[d] || !chain_op(t->f, ir_op(t->f, d))) return;
  t->cand[d] = 1;
  const struct ir_op *op = ir_op(t->f, d);
  if (op->code == IR_DOT) {
    mark(t, op->args[2]);
    return;
  }
  if (op->code == IR_IF) {
    for (uint32_t r = 0; r < 2; r++) mark(t, yielded(t->f, d, r));
    return;
  }
  for (uint32_t k = 0; k < op->nargs; k++)
    if (is_rank2_tile(t->f, op->args[k])) mark(t, op->args[k]);
}

/* A product outside the chains reading v as its left or right operand: computing v
 * transposed costs a trans there (a round trip through shared memory). */
static bool operand_use(const struct tp *t, uint32_t u, ir_val v) {
  const struct ir_op *op = ir_op(t->f, u);
  return op->code == IR_DOT && !t->cand[u] && (op->args[0] == v || op->args[1] == v) && op->args[2] != v;
}

/* Whether use `u` of a chain value v keeps it in the chain. */
static bool use_ok(const struct tp *t, uint32_t u, ir_val v) {
  const struct ir_op *op = ir_op(t->f, u);
  if (op->code == IR_TRANS || operand_use(t, u, v)) return true;
  uint32_t owner = yield_owner(t->f, u);
  if (owner) return t->cand[owner] && op->nargs == 1;
  if (!t->cand[u]) return false;
  if (op->code == IR_DOT) return op->args[2] == v && op->args[0] != v && op->args[1] != v;
  return true;
}

static void uses_build(struct tp *t, struct arena *a) {
  struct ir_func *f = t->f;
  uint32_t nv = t->nvalues;
  t->use_start = arena_alloc(a, (nv + 2) * sizeof *t->use_start);
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++) t->use_start[op->args[k] + 1]++;
  }
  for (uint32_t v = 1; v <= nv; v++) t->use_start[v] += t->use_start[v - 1];
  t->use_start[nv + 1] = t->use_start[nv];
  uint32_t *fill = arena_alloc(a, (nv + 1) * sizeof *fill);
  t->use_op = arena_alloc(a, (t->use_start[nv] + 1) * sizeof *t->use_op);
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++) {
      ir_val v = op->args[k];
      t->use_op[t->use_start[v] + fill[v]++] = i;
    }
  }
}

/* Numbers the chains: cand ops joined by a value one defines and the other uses. */
static void label(struct tp *t, uint32_t op, uint32_t c, uint32_t *stack, uint32_t cap) {
  uint32_t n = 0;
  t->comp[op] = c;
  stack[n++] = op;
  while (n) {
    uint32_t id = stack[--n];
    const struct ir_op *o = ir_op(t->f, id);
    ir_val ins[3 + 2];
    uint32_t nin = 0;
    for (uint32_t k = 0; k < o->nargs && k < 3; k++) ins[nin++] = o->args[k];
    if (o->code == IR_IF)
      for (uint32_t r = 0; r < 2; r++) ins[nin++] = yielded(t->f, id, r);
    for (uint32_t k = 0; k < nin; k++) { /* operands' definitions (an if's: what it yields) */
      uint32_t d = ir_def_op(t->f, ins[k]);
      if (d && t->cand[d] && !t->comp[d] && n < cap) {
        t->comp[d] = c;
        stack[n++] = d;
      }
    }
    for (uint32_t j = t->use_start[o->res]; j < t->use_start[o->res + 1]; j++) { /* users */
      uint32_t u = t->use_op[j];
      if (yield_owner(t->f, u)) u = yield_owner(t->f, u); /* a yield's user: its if */
      if (t->cand[u] && !t->comp[u] && n < cap) {
        t->comp[u] = c;
        stack[n++] = u;
      }
    }
  }
}

static ir_type_id swapped(struct ir_func *f, ir_val v) {
  const struct ir_type *ty = ir_vtype(f, v);
  int32_t dims[2] = {ty->dims[1], ty->dims[0]};
  return ir_type_tile(f, ty->dtype, 2, dims);
}

/* A builder placed right after v's definition (a block argument: at its block's start). */
static void after_def(struct tp *t, struct ir_builder *b, ir_val v) {
  struct ir_func *f = t->f;
  uint32_t d = ir_def_op(t->f, v);
  if (d) {
    uint32_t next = ir_op_next(f, d);
    if (next)
      ir_builder_before(b, f, next);
    else
      ir_builder_at_end(b, f, f->ops.v[d].block);
    b->loc = f->ops.v[d].loc;
    return;
  }
  uint32_t blk = f->values.v[v].def;
  struct ir_block *bk = ir_block(f, blk);
  if (bk->ops.n)
    ir_builder_before(b, f, bk->ops.v[0]);
  else
    ir_builder_at_end(b, f, blk);
}

static ir_val tv(struct tp *t, ir_val v);

/* The transpose of chain if `id`'s result: each region's yielded value transposed (built
 * where that value is) and yielded too, by a new if that takes over the regions. */
static ir_val transpose_if(struct tp *t, uint32_t id) {
  struct ir_func *f = t->f;
  ir_val x[2];
  for (uint32_t r = 0; r < 2; r++) x[r] = tv(t, yielded(f, id, r));
  struct ir_builder b;
  ir_builder_before(&b, f, id);
  b.loc = f->ops.v[id].loc;
  ir_type_id types[2] = {f->values.v[f->ops.v[id].res].type, swapped(f, f->ops.v[id].res)};
  uint32_t ni = ir_build_if(&b, f->ops.v[id].args[0], types, 2);
  for (uint32_t r = 0; r < 2; r++) {
    uint32_t nb = f->ops.v[ni].region + r;
    ir_move_ops(f, f->ops.v[id].region + r, nb);
    uint32_t y = VEC_LAST(f->blocks.v[nb].ops);
    ir_op_set_args(f, y, (ir_val[]){f->ops.v[y].args[0], x[r]}, 2);
  }
  t->ifs[t->nifs][0] = id;
  t->ifs[t->nifs++][1] = ni;
  return ir_res(f, ni, 1);
}

/* The transpose of rank-2 value v, built once. */
static ir_val tv(struct tp *t, ir_val v) {
  struct ir_func *f = t->f;
  if (v < t->nvalues && t->memo[v]) return t->memo[v];
  uint32_t d = ir_def_op(t->f, v);
  ir_val r;
  struct ir_builder b;
  if (d && d < t->nops && t->cand[d] && f->ops.v[d].code == IR_IF) {
    r = transpose_if(t, d);
  } else if (d && f->ops.v[d].code == IR_TRANS) {
    r = f->ops.v[d].args[0];
  } else if (d && ((d < t->nops && t->cand[d]) || cheap(t, v))) {
    struct ir_op op = f->ops.v[d]; /* copy: building may grow f->ops */
    ir_val args[3];
    uint32_t na = op.nargs;
    if (op.code == IR_DOT) {
      args[0] = tv(t, op.args[1]);
      args[1] = tv(t, op.args[0]);
      args[2] = tv(t, op.args[2]);
    } else if (op.code == IR_EXPAND_DIMS || op.code == IR_SPLAT || op.code == IR_CONST) {
      for (uint32_t k = 0; k < na; k++) args[k] = op.args[k];
    } else {
      for (uint32_t k = 0; k < na; k++)
        args[k] = is_rank2_tile(f, op.args[k]) ? tv(t, op.args[k]) : op.args[k];
    }
    after_def(t, &b, v);
    ir_type_id ty = swapped(f, v);
    uint32_t id = ir_build(&b, (ir_opcode)op.code, args, na, &ty, 1);
    memcpy(f->ops.v[id].i, op.i, sizeof op.i);
    f->ops.v[id].f = op.f;
    if (op.code == IR_EXPAND_DIMS) f->ops.v[id].i[0] = 1 - op.i[0];
    r = ir_res(f, id, 0);
  } else {
    after_def(t, &b, v);
    r = ir_build1(&b, IR_TRANS, swapped(f, v), &v, 1);
  }
  if (v < t->nvalues) t->memo[v] = r;
  return r;
}

/* New transposes a chain needs: the distinct values its elementwise ops read that are
 * neither in a chain nor rebuilt for free (a product's operands cost nothing), and its
 * values that products outside it read as operands. */
static uint32_t chain_cost(struct tp *t, uint32_t c, uint32_t *seen) {
  struct ir_func *f = t->f;
  uint32_t cost = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    if (!t->cand[i] || t->comp[i] != c) continue;
    const struct ir_op *op = &f->ops.v[i];
    for (uint32_t j = t->use_start[op->res]; j < t->use_start[op->res + 1]; j++)
      if (operand_use(t, t->use_op[j], op->res)) {
        cost++;
        break;
      }
    uint32_t first = op->code == IR_DOT ? 2 : 0;
    for (uint32_t k = first; k < op->nargs; k++) {
      ir_val a = op->args[k];
      uint32_t d = ir_def_op(t->f, a);
      if (!is_rank2_tile(f, a) || (d && t->cand[d]) || cheap(t, a) || seen[a] == c) continue;
      seen[a] = c; /* counted once per chain */
      cost++;
    }
  }
  return cost;
}

void pass_transpose(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (f->stage != IR_STAGE_GENERIC) return;
  struct tp t = {.f = f, .nvalues = f->values.n, .nops = f->ops.n};
  uint32_t nops = f->ops.n;
  t.cand = arena_alloc(pc->scratch, nops);
  bool any = false;
  for (uint32_t i = 1; i < nops; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (op->block && op->code == IR_TRANS && is_rank2_tile(f, op->args[0])) {
      mark(&t, op->args[0]);
      any = true;
    }
  }
  if (!any) return;
  uses_build(&t, pc->scratch);
  /* prune to a fixed point: a chain value with a use other than a trans or a chain op
   * (a product's operand, a store, a reduction, a yield) stays as it is */
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 1; i < nops; i++) {
      if (!t.cand[i]) continue;
      ir_val r = f->ops.v[i].res;
      for (uint32_t j = t.use_start[r]; j < t.use_start[r + 1]; j++)
        if (!use_ok(&t, t.use_op[j], r)) {
          t.cand[i] = 0;
          changed = true;
          break;
        }
    }
  }
  t.comp = arena_alloc(pc->scratch, nops * sizeof *t.comp);
  uint32_t *stack = arena_alloc(pc->scratch, nops * sizeof *stack);
  uint32_t nc = 0;
  for (uint32_t i = 1; i < nops; i++)
    if (t.cand[i] && !t.comp[i]) label(&t, i, ++nc, stack, nops);
  if (!nc) return;
  /* per chain: the trans ops it removes against the ones it adds */
  uint32_t *removed = arena_alloc(pc->scratch, (nc + 1) * sizeof *removed);
  for (uint32_t i = 1; i < nops; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->code != IR_TRANS) continue;
    uint32_t d = ir_def_op(f, op->args[0]);
    if (d && t.cand[d]) removed[t.comp[d]]++;
  }
  uint32_t *seen = arena_alloc(pc->scratch, t.nvalues * sizeof *seen);
  bool *take = arena_alloc(pc->scratch, (nc + 1) * sizeof *take);
  for (uint32_t c = 1; c <= nc; c++) take[c] = removed[c] > chain_cost(&t, c, seen);
  for (uint32_t i = 1; i < nops; i++) /* chains not taken are left alone */
    if (t.cand[i] && !take[t.comp[i]]) t.cand[i] = 0;
  uint32_t nif = 0; /* (at most MAX_IFS ifs rebuilt: a chain with more is left alone) */
  for (uint32_t i = 1; i < nops; i++) nif += t.cand[i] && f->ops.v[i].code == IR_IF;
  if (nif > MAX_IFS) return;
  t.memo = arena_alloc(pc->scratch, t.nvalues * sizeof *t.memo);
  for (uint32_t i = 1; i < nops; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->code != IR_TRANS) continue;
    ir_val x = op->args[0];
    uint32_t d = ir_def_op(f, x);
    if (!d || !t.cand[d]) continue;
    ir_replace_uses(f, ir_res(f, i, 0), tv(&t, x));
    pc->changed = true;
  }
  /* products outside the chains read a rewritten value through a trans of its transpose */
  for (uint32_t i = 1; i < nops; i++) {
    if (!t.cand[i]) continue;
    ir_val r = f->ops.v[i].res;
    ir_val back = 0;
    for (uint32_t j = t.use_start[r]; j < t.use_start[r + 1]; j++) {
      uint32_t u = t.use_op[j];
      if (!operand_use(&t, u, r)) continue;
      if (!back) {
        struct ir_builder b;
        ir_val x = tv(&t, r);
        after_def(&t, &b, x);
        back = ir_build1(&b, IR_TRANS, f->values.v[r].type, &x, 1);
      }
      for (uint32_t k = 0; k < 2; k++)
        if (f->ops.v[u].args[k] == r) f->ops.v[u].args[k] = back;
    }
  }
  for (uint32_t i = 0; i < t.nifs; i++) { /* the rebuilt ifs take the old ones' place */
    ir_replace_uses(f, ir_res(f, t.ifs[i][0], 0), ir_res(f, t.ifs[i][1], 0));
    ir_op_remove(f, t.ifs[i][0]);
  }
}
