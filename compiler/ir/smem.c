/* smem.c - shared-memory liveness (smem.h). */
#include "smem.h"

static uint32_t number_ops(const struct ir_func *f, uint32_t blk, uint32_t pos, uint32_t *first, uint32_t *last) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    uint32_t id = b->ops.v[i];
    first[id] = pos++;
    const struct ir_op *op = &f->ops.v[id];
    for (uint32_t r = 0; r < op->nregions; r++) pos = number_ops(f, op->region + r, pos, first, last);
    last[id] = pos - 1; /* an op with regions spans them */
  }
  return pos;
}

int64_t ir_smem_offset(const struct ir_func *f, uint32_t op) {
  const struct ir_op *o = &f->ops.v[op];
  return o->code == IR_MBAR_ALLOC ? o->i[1] : o->i[0];
}

bool ir_smem_writes(const struct ir_func *f, uint32_t op, ir_val buf) {
  const struct ir_op *w = &f->ops.v[op];
  return (w->code == IR_ASYNC_COPY || w->code == IR_LOCAL_STORE || w->code == IR_TMA_LOAD) && w->nargs && w->args[0] == buf;
}

uint32_t ir_smem_load_at_dot(const struct ir_func *f, uint32_t load, const uint32_t *uses) {
  const struct ir_op *op = &f->ops.v[load];
  if (!op->block || op->code != IR_LOCAL_LOAD || uses[op->res] != 1) return 0;
  const struct ir_type *rt = ir_vtype(f, op->res);
  if (f->layouts.v[rt->layout].kind != IR_LAYOUT_DOT_OP || ir_dtype_bytes((ir_dtype)rt->dtype) != 2) return 0;
  const struct ir_block *b = &f->blocks.v[op->block];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *d = &f->ops.v[b->ops.v[i]];
    if (d->code == IR_DOT && (d->args[0] == op->res || d->args[1] == op->res)) return b->ops.v[i];
  }
  return 0;
}

void ir_smem_liveness(const struct ir_func *f, struct arena *a, struct ir_smem_plan *out) {
  uint32_t *first = ARENA_NEWN(a, uint32_t, f->ops.n + 1);
  uint32_t *last = ARENA_NEWN(a, uint32_t, f->ops.n + 1);
  uint32_t end_of_body = number_ops(f, IR_BODY_BLOCK, 1, first, last);
  struct ir_smem_interval *iv = ARENA_NEWN(a, struct ir_smem_interval, f->ops.n + 1);
  uint32_t *index = ARENA_NEWN(a, uint32_t, f->values.n + 1); /* alloc result -> interval + 1 */
  uint32_t n = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || (op->code != IR_LOCAL_ALLOC && op->code != IR_MBAR_ALLOC)) continue;
    const struct ir_type *t = ir_vtype(f, op->res);
    struct ir_smem_interval *x = &iv[n];
    x->op = i;
    x->start = x->end = first[i];
    x->bytes = (unsigned)(ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype));
    /* swizzle atoms (8 rows of up to 128 bytes) and TMA boxes need 1024-byte alignment */
    x->align = op->code == IR_MBAR_ALLOC ? 8 : 1024;
    x->offset = (unsigned)ir_smem_offset(f, i);
    if (op->code == IR_MBAR_ALLOC) x->end = end_of_body;
    index[op->res] = ++n;
  }
  /* sort by start position (ops ids are not in program order after rewrites) */
  for (uint32_t i = 1; i < n; i++)
    for (uint32_t j = i; j > 0 && iv[j - 1].start > iv[j].start; j--) {
      struct ir_smem_interval t = iv[j];
      iv[j] = iv[j - 1];
      iv[j - 1] = t;
    }
  for (uint32_t j = 0; j < n; j++) index[f->ops.v[iv[j].op].res] = j + 1;
  /* last uses, extended to the end of every enclosing loop that started after the
   * allocation; a load that its dot may perform (ir_smem_load_at_dot) uses the buffer
   * until that dot */
  uint32_t *uses = ir_use_counts(f, a);
  for (uint32_t u = 1; u < f->ops.n; u++) {
    const struct ir_op *op = &f->ops.v[u];
    if (!op->block) continue;
    uint32_t at_dot = ir_smem_load_at_dot(f, u, uses);
    for (uint32_t k = 0; k < op->nargs; k++) {
      uint32_t j = op->args[k] < f->values.n ? index[op->args[k]] : 0;
      if (!j--) continue;
      uint32_t end = at_dot && first[at_dot] > first[u] ? first[at_dot] : first[u];
      for (uint32_t b = op->block; b;) {
        uint32_t parent = f->blocks.v[b].parent;
        if (!parent) break;
        if (f->ops.v[parent].code == IR_FOR && last[parent] > end && first[parent] > iv[j].start) end = last[parent];
        b = f->ops.v[parent].block;
      }
      if (end > iv[j].end) iv[j].end = end;
    }
  }
  out->pos = first;
  out->last = last;
  out->iv = iv;
  out->n = n;
}

unsigned ir_smem_top(const struct ir_smem_plan *p) {
  unsigned top = 0;
  for (uint32_t j = 0; j < p->n; j++)
    if (p->iv[j].offset + p->iv[j].bytes > top) top = p->iv[j].offset + p->iv[j].bytes;
  return top;
}

unsigned ir_smem_live_top(const struct ir_smem_plan *p, uint32_t op) {
  unsigned top = 0;
  uint32_t pos = p->pos[op];
  for (uint32_t j = 0; j < p->n; j++) {
    const struct ir_smem_interval *x = &p->iv[j];
    if (x->start <= pos && pos <= x->end && x->offset + x->bytes > top) top = x->offset + x->bytes;
  }
  return top;
}

void ir_role_barrier(const struct ir_func *f, uint32_t blk, int *id, int *threads) {
  *id = 0;
  *threads = 0;
  for (uint32_t b = blk; b;) {
    uint32_t parent = f->blocks.v[b].parent;
    if (!parent) return;
    const struct ir_op *op = &f->ops.v[parent];
    if (op->code == IR_WARP_SPECIALIZE) {
      bool consumer = b == op->region + 1;
      *id = consumer ? 1 : 2;
      *threads = consumer ? 32 * f->warps : 32;
      return;
    }
    b = op->block;
  }
}
