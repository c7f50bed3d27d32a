/* mem_order.c - a program sees its own earlier writes: barriers between a write of a tensor
 * and a later read of it by the same program instance.
 *
 * Needs: GPU IR (layouts assigned). Guarantees: between a store or scatter of tensor T and
 * a later load, gather or atomic of T in program order (including the next iteration of a
 * loop), and between an atomic on T and a later load or gather of T, there is a `barrier`
 * (every thread of the program meets; bar.sync also orders their global memory accesses),
 * because the element written by one thread may be read by another under the layouts.
 * Atomics after atomics need none (each is one indivisible update). Kernels that never read
 * back what they wrote, every library kernel, are unchanged; so is a load of exactly the
 * slice that was stored, in the same layout (`Y[i : +BN] += v` in a loop): each thread then
 * reads the elements it wrote itself. Runs before smem-stage, so
 * staging sees the barriers, and before warp-specialize, which makes the consumer's
 * barriers named ones.
 *
 *   store %Y[%i], %v                     store %Y[%i], %v
 *   %w = load %Y[%j]            =>       barrier
 *                                        %w = load %Y[%j]                               */
#include <string.h>

#include "passes.h"

enum { PLAIN = 1, ATOMIC = 2 }; /* per tensor parameter: written since the last barrier by */
enum { MIXED = UINT32_MAX };     /* several different stores */

/* Per tensor: how it was written since the last barrier, and by which store (its op id,
 * when all those writes were one and the same store op, else MIXED). */
struct state {
  uint8_t *how;
  uint32_t *store;
};

struct order {
  struct ir_func *f;
  uint32_t ntensors;
  struct arena *scratch;
  bool changed;
};

static struct state fresh(struct order *O, const struct state *from) {
  struct state d = {ARENA_NEWN(O->scratch, uint8_t, O->ntensors + 1), ARENA_NEWN(O->scratch, uint32_t, O->ntensors + 1)};
  if (from) {
    memcpy(d.how, from->how, O->ntensors + 1);
    memcpy(d.store, from->store, sizeof(uint32_t) * (O->ntensors + 1));
  }
  return d;
}

/* Memory ops a and b (a load or an unpredicated store each) access the same elements in
 * the same threads: the same tensor, indices and slice mask, and a tile of one type
 * (layout included). */
static bool same_slice(const struct ir_func *f, uint32_t a, uint32_t b) {
  if (a == MIXED || b == MIXED) return false;
  const struct ir_op *x = &f->ops.v[a], *y = &f->ops.v[b];
  uint32_t rank = (uint32_t)ir_vtype(f, x->args[0])->rank;
  for (int k = 0; k < 2; k++) {
    const struct ir_op *o = k ? y : x;
    if (!(o->code == IR_LOAD && o->nargs == rank + 1) && !(o->code == IR_STORE && o->nargs == rank + 2)) return false;
  }
  if (x->i[0] != y->i[0]) return false;
  for (uint32_t k = 0; k <= rank; k++)
    if (x->args[k] != y->args[k]) return false;
  ir_type_id tx = f->values.v[x->code == IR_LOAD ? x->res : x->args[rank + 1]].type;
  ir_type_id ty = f->values.v[y->code == IR_LOAD ? y->res : y->args[rank + 1]].type;
  /* an mma accumulator may be stored through shared memory by other threads (cg_mem.c) */
  const struct ir_type *t = &f->types.v[tx];
  return tx == ty && (t->rank == 0 || f->layouts.v[t->layout].kind != IR_LAYOUT_MMA);
}

static void note_store(const struct ir_func *f, struct state *st, uint32_t t, uint32_t op) {
  st->store[t] = (st->how[t] & PLAIN) && st->store[t] != op && !same_slice(f, st->store[t], op) ? MIXED : op;
}

static void merge(struct order *O, struct state *into, const struct state *from) {
  for (uint32_t i = 0; i <= O->ntensors; i++) {
    if (from->how[i] & PLAIN) note_store(O->f, into, i, from->store[i]);
    into->how[i] |= from->how[i];
  }
}

/* The parameter index of a memory op's tensor, and what the op does to it. */
static bool access(const struct ir_func *f, const struct ir_op *op, uint32_t *t, bool *reads, uint8_t *writes) {
  switch (op->code) {
  case IR_LOAD: case IR_GATHER: *reads = true, *writes = 0; break;
  case IR_STORE: case IR_SCATTER: *reads = false, *writes = PLAIN; break;
  case IR_ATOMIC: *reads = true, *writes = ATOMIC; break;
  default: return false;
  }
  *t = f->values.v[op->args[0]].index;
  return true;
}

/* Every tensor a block writes (recursively), into w. */
static void block_writes(struct order *O, uint32_t blk, struct state *w) {
  const struct ir_block *b = &O->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &O->f->ops.v[b->ops.v[i]];
    uint32_t t;
    bool r;
    uint8_t wr;
    if (access(O->f, op, &t, &r, &wr) && t <= O->ntensors) {
      if (wr & PLAIN) note_store(O->f, w, t, b->ops.v[i]);
      w->how[t] |= wr;
    }
    for (uint32_t k = 0; k < op->nregions; k++) block_writes(O, op->region + k, w);
  }
}

/* Walks block blk with `dirty` (tensors written since the last barrier) and updates it to
 * the state at the block's end. */
static void walk(struct order *O, uint32_t blk, struct state *dirty) {
  struct ir_func *f = O->f;
  for (uint32_t i = 0; i < f->blocks.v[blk].ops.n; i++) {
    uint32_t id = f->blocks.v[blk].ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    uint32_t t;
    bool reads;
    uint8_t writes;
    if (access(f, op, &t, &reads, &writes) && t <= O->ntensors) {
      uint8_t need = op->code == IR_ATOMIC ? PLAIN : PLAIN | ATOMIC;
      bool own = dirty->how[t] == PLAIN && same_slice(f, dirty->store[t], id);
      if (reads && (dirty->how[t] & need) && !own) {
        struct ir_builder b;
        ir_builder_before(&b, f, id);
        ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
        memset(dirty->how, 0, O->ntensors + 1);
        O->changed = true;
        i++; /* the barrier took this position */
        op = &f->ops.v[id];
      }
      if (writes & PLAIN) note_store(f, dirty, t, id);
      dirty->how[t] |= writes;
      continue;
    }
    if (op->code == IR_FOR) {
      /* the body's reads also follow its own writes of the previous iteration */
      uint32_t body = op->region;
      struct state in = fresh(O, dirty);
      block_writes(O, body, &in);
      walk(O, body, &in);
      merge(O, dirty, &in); /* after the loop: the body's end, or the entry if it never ran */
    } else if (op->code == IR_IF) {
      uint32_t region = op->region;
      struct state other = fresh(O, dirty);
      walk(O, region, dirty);
      walk(O, region + 1, &other);
      merge(O, dirty, &other);
    }
  }
}

void pass_mem_order(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  struct order O = {f, f->params.n, pc->scratch, false};
  struct state dirty = fresh(&O, NULL);
  walk(&O, IR_BODY_BLOCK, &dirty);
  pc->changed = O.changed;
}
