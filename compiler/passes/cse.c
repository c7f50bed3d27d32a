/* cse.c - common subexpression elimination over structured control flow.
 *
 * Needs: verified IR. Guarantees: a pure op without regions that repeats an op available
 * at its position (same opcode, operands, attributes and result type, earlier in the same
 * block or in an enclosing block) is replaced by that op's result. Operands of commutative
 * ops compare as a sorted pair. Ops inside a loop body are compared with ops outside it, so
 * loop-invariant duplicates of outer values disappear too.
 *
 *   %1 = mul %a, %b : i32             %1 = mul %a, %b : i32
 *   %2 = mul %b, %a : i32      =>     %3 = add %1, %1 : i32
 *   %3 = add %1, %2 : i32                                                               */
#include <string.h>

#include "passes.h"

struct entry {
  uint64_t hash;
  uint32_t op;
};

struct cse {
  struct pass_ctx *pc;
  VEC(struct entry) avail;
};

static void key_args(const struct ir_op *op, ir_val out[3]) {
  for (uint32_t k = 0; k < op->nargs && k < 3; k++) out[k] = op->args[k];
  if ((ir_ops[op->code].flags & OPF_COMM) && op->nargs == 2 && out[0] > out[1]) {
    ir_val t = out[0];
    out[0] = out[1];
    out[1] = t;
  }
}

static uint64_t op_hash(struct ir_func *f, const struct ir_op *op) {
  ir_val a[3] = {0, 0, 0};
  key_args(op, a);
  uint64_t h = tl_hash_bytes(&op->code, sizeof op->code, op->nargs);
  h = tl_hash_bytes(a, sizeof a, h);
  for (uint32_t k = 3; k < op->nargs; k++) h = tl_hash_bytes(&op->args[k], sizeof(ir_val), h);
  h = tl_hash_bytes(op->i, sizeof op->i, h);
  h = tl_hash_bytes(&op->f, sizeof op->f, h);
  if (op->nres) h = tl_hash_bytes(&f->values.v[op->res].type, sizeof(ir_type_id), h);
  return h;
}

static bool op_equal(struct ir_func *f, const struct ir_op *x, const struct ir_op *y) {
  if (x->code != y->code || x->nargs != y->nargs || x->nres != y->nres) return false;
  if (memcmp(x->i, y->i, sizeof x->i) || memcmp(&x->f, &y->f, sizeof x->f)) return false;
  ir_val a[3] = {0, 0, 0}, b[3] = {0, 0, 0};
  key_args(x, a);
  key_args(y, b);
  if (memcmp(a, b, sizeof a)) return false;
  for (uint32_t k = 3; k < x->nargs; k++)
    if (x->args[k] != y->args[k]) return false;
  return !x->nres || f->values.v[x->res].type == f->values.v[y->res].type;
}

static void cse_block(struct cse *c, uint32_t blk) {
  struct ir_func *f = c->pc->f;
  uint32_t mark = c->avail.n;
  for (uint32_t i = 0; i < f->blocks.v[blk].ops.n; i++) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    if (op->nregions) {
      for (uint32_t r = 0; r < op->nregions; r++) cse_block(c, op->region + r);
      continue;
    }
    if (!(ir_ops[op->code].flags & OPF_PURE) || op->nres != 1) continue;
    uint64_t h = op_hash(f, op);
    uint32_t found = 0;
    for (uint32_t k = c->avail.n; k-- > 0;)
      if (c->avail.v[k].hash == h && op_equal(f, &f->ops.v[c->avail.v[k].op], op)) {
        found = c->avail.v[k].op;
        break;
      }
    if (found) {
      ir_replace_uses(f, op->res, f->ops.v[found].res);
      ir_op_remove(f, id);
      i--;
      c->pc->changed = true;
    } else {
      struct entry e = {h, id};
      VEC_PUSH(c->pc->scratch, c->avail, e);
    }
  }
  c->avail.n = mark;
}

void pass_cse(struct pass_ctx *pc) {
  struct cse c = {pc, {0}};
  cse_block(&c, IR_GRID_BLOCK);
  c.avail.n = 0;
  cse_block(&c, IR_BODY_BLOCK);
}
