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
 *   %3 = add %1, %2 : i32
 *
 * Linear time: the available ops are a scoped hash table (a stack of entries, each chained
 * to the previous entry of its bucket; leaving a block pops its entries and restores the
 * bucket heads, so what a block makes available is visible only in it and in the regions
 * nested in it). At most one equal op is ever visible, because a duplicate is replaced
 * instead of entered. A replaced value is recorded in a map and every later operand is
 * rewritten through it as the walk reaches it (uses follow definitions in structured SSA),
 * and removed ops are dropped while each block is compacted in place, so the pass never
 * rescans the function per replacement.                                                  */
#include <string.h>

#include "passes.h"

struct entry {
  uint64_t hash;
  uint32_t op;
  uint32_t next; /* the entry that headed this bucket before (0: none) */
};

struct cse {
  struct pass_ctx *pc;
  struct entry *stack; /* [0] unused */
  uint32_t n;          /* entries in use, stack[1 .. n-1] */
  uint32_t *heads;     /* bucket -> top entry (0: empty) */
  uint32_t mask;       /* buckets - 1 */
  ir_val *repl;        /* value -> the value replacing it (0: none) */
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

/* The visible op equal to op (hash h), or 0. */
static uint32_t find(struct cse *c, const struct ir_op *op, uint64_t h) {
  struct ir_func *f = c->pc->f;
  for (uint32_t e = c->heads[h & c->mask]; e; e = c->stack[e].next)
    if (c->stack[e].hash == h && op_equal(f, &f->ops.v[c->stack[e].op], op)) return c->stack[e].op;
  return 0;
}

static void enter(struct cse *c, uint32_t op, uint64_t h) {
  uint32_t e = c->n++;
  c->stack[e] = (struct entry){h, op, c->heads[h & c->mask]};
  c->heads[h & c->mask] = e;
}

/* Pops the entries above mark (the newest first, so each bucket gets its old head back). */
static void leave(struct cse *c, uint32_t mark) {
  while (c->n > mark) {
    const struct entry *e = &c->stack[--c->n];
    c->heads[e->hash & c->mask] = e->next;
  }
}

static void cse_block(struct cse *c, uint32_t blk) {
  struct ir_func *f = c->pc->f;
  uint32_t mark = c->n, kept = 0;
  for (uint32_t i = 0; i < f->blocks.v[blk].ops.n; i++) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    struct ir_op *op = &f->ops.v[id];
    for (uint32_t k = 0; k < op->nargs; k++)
      if (c->repl[op->args[k]]) op->args[k] = c->repl[op->args[k]];
    f->blocks.v[blk].ops.v[kept++] = id;
    if (op->nregions) {
      for (uint32_t r = 0; r < op->nregions; r++) cse_block(c, op->region + r);
      continue;
    }
    if (!(ir_ops[op->code].flags & OPF_PURE) || op->nres != 1) continue;
    uint64_t h = op_hash(f, op);
    uint32_t found = find(c, op, h);
    if (found) {
      c->repl[op->res] = f->ops.v[found].res;
      op->block = 0; /* removed (ir_op_remove, without its search of the block) */
      kept--;
      c->pc->changed = true;
    } else {
      enter(c, id, h);
    }
  }
  f->blocks.v[blk].ops.n = kept;
  leave(c, mark);
}

void pass_cse(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct cse c = {.pc = pc, .n = 1};
  uint32_t buckets = 64;
  while (buckets < f->ops.n) buckets *= 2;
  c.mask = buckets - 1;
  c.heads = ARENA_NEWN(pc->scratch, uint32_t, buckets);
  c.stack = ARENA_NEWN(pc->scratch, struct entry, f->ops.n + 1);
  c.repl = ARENA_NEWN(pc->scratch, ir_val, f->values.n + 1);
  cse_block(&c, IR_GRID_BLOCK);
  cse_block(&c, IR_BODY_BLOCK);
}
