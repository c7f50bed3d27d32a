/* ir.c - Tile IR tables: dtypes and op info (expanded from the .def files), type and layout
 * interning, the builder, mutation helpers and the walker.
 *
 * Types and layouts are interned with a linear scan: a kernel has a few dozen distinct types,
 * so a hash table would cost more than it saves. Ops are never freed; removing an op unlinks
 * it from its block and leaves its slot in the table (ids stay stable for analyses).      */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  int bits;
  enum ir_dtype_class cls;
} dtype_info[DT__COUNT] = {
#define DT(id, name, bits, cls) {name, bits, cls},
#include "dtype.def"
#undef DT
};

const char *ir_dtype_name(ir_dtype t) { return t < DT__COUNT ? dtype_info[t].name : "?"; }
int ir_dtype_bits(ir_dtype t) { return t < DT__COUNT ? dtype_info[t].bits : 0; }
int ir_dtype_bytes(ir_dtype t) { return (ir_dtype_bits(t) + 7) / 8; }
enum ir_dtype_class ir_dtype_class(ir_dtype t) { return t < DT__COUNT ? dtype_info[t].cls : DTC_NONE; }

ir_dtype ir_dtype_from_name(const char *s, size_t n) {
  for (int i = 1; i < DT__COUNT; i++)
    if (strlen(dtype_info[i].name) == n && memcmp(dtype_info[i].name, s, n) == 0) return (ir_dtype)i;
  return DT_NONE;
}

const struct ir_opinfo ir_ops[IR__COUNT] = {
    [IR_NONE] = {"<none>", 0, 0, 0, 0, {NULL, NULL, NULL}, NULL, ""},
#define OP(id, name, na, nr, ng, fl, i0, i1, i2, f, doc) \
  [IR_##id] = {name, na, nr, ng, fl, {i0, i1, i2}, f, doc},
#include "ops.def"
#undef OP
};

ir_opcode ir_opcode_from_name(const char *s, size_t n) {
  for (int i = 1; i < IR__COUNT; i++)
    if (strlen(ir_ops[i].name) == n && memcmp(ir_ops[i].name, s, n) == 0) return (ir_opcode)i;
  return IR_NONE;
}

/* ---- functions ---- */

struct ir_func *ir_func_new(struct arena *a, struct strtab *strs, const char *name) {
  struct ir_func *f = ARENA_NEW(a, struct ir_func);
  f->arena = a;
  f->strs = strs;
  f->name = strtab_intern(strs, name, strlen(name));
  f->warps = 4;
  tl_schedule_default(&f->sched);
  struct ir_type none = {0};
  VEC_PUSH(a, f->types, none);
  struct ir_value nv = {0};
  VEC_PUSH(a, f->values, nv);
  struct ir_op nop = {0};
  VEC_PUSH(a, f->ops, nop);
  struct ir_block nb = {0};
  VEC_PUSH(a, f->blocks, nb);
  VEC_PUSH(a, f->blocks, nb); /* IR_GRID_BLOCK */
  VEC_PUSH(a, f->blocks, nb); /* IR_BODY_BLOCK */
  struct ir_layout nl = {0};
  VEC_PUSH(a, f->layouts, nl);
  return f;
}

#define CLONE_VEC(a, dst, src)                                  \
  do {                                                          \
    (dst).n = (dst).cap = (src).n;                              \
    (dst).v = arena_alloc((a), sizeof(*(src).v) * ((src).n + 1)); \
    if ((src).n) memcpy((dst).v, (src).v, sizeof(*(src).v) * (src).n); \
  } while (0)

struct ir_func *ir_func_clone(const struct ir_func *f, struct arena *a) {
  struct ir_func *g = ARENA_NEW(a, struct ir_func);
  *g = *f;
  g->arena = a;
  CLONE_VEC(a, g->types, f->types);
  CLONE_VEC(a, g->values, f->values);
  CLONE_VEC(a, g->ops, f->ops);
  CLONE_VEC(a, g->blocks, f->blocks);
  CLONE_VEC(a, g->layouts, f->layouts);
  CLONE_VEC(a, g->params, f->params);
  for (uint32_t i = 1; i < g->ops.n; i++) {
    struct ir_op *op = &g->ops.v[i];
    ir_val *args = ARENA_NEWN(a, ir_val, op->nargs + 1);
    if (op->nargs) memcpy(args, op->args, sizeof(ir_val) * op->nargs);
    op->args = args;
  }
  for (uint32_t i = 1; i < g->blocks.n; i++) CLONE_VEC(a, g->blocks.v[i].ops, f->blocks.v[i].ops);
  return g;
}

/* ---- types ---- */

ir_type_id ir_type_intern(struct ir_func *f, const struct ir_type *t) {
  struct ir_type k = {0};
  k.kind = t->kind;
  k.dtype = t->dtype;
  k.rank = t->rank;
  k.layout = t->layout;
  for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++) k.dims[i] = t->dims[i];
  for (uint32_t i = 1; i < f->types.n; i++)
    if (memcmp(&f->types.v[i], &k, sizeof k) == 0) return i;
  VEC_PUSH(f->arena, f->types, k);
  return f->types.n - 1;
}

ir_type_id ir_type_void(struct ir_func *f) {
  struct ir_type t = {.kind = IR_TY_VOID};
  return ir_type_intern(f, &t);
}

ir_type_id ir_type_scalar(struct ir_func *f, ir_dtype dt) {
  struct ir_type t = {.kind = IR_TY_TILE, .dtype = (uint8_t)dt};
  return ir_type_intern(f, &t);
}

ir_type_id ir_type_tile(struct ir_func *f, ir_dtype dt, int rank, const int32_t *dims) {
  struct ir_type t = {.kind = IR_TY_TILE, .dtype = (uint8_t)dt, .rank = (uint8_t)rank};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return ir_type_intern(f, &t);
}

ir_type_id ir_type_tensor(struct ir_func *f, ir_dtype dt, int rank, const int32_t *dims) {
  struct ir_type t = {.kind = IR_TY_TENSOR, .dtype = (uint8_t)dt, .rank = (uint8_t)rank};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return ir_type_intern(f, &t);
}

ir_type_id ir_type_with_dtype(struct ir_func *f, ir_type_id id, ir_dtype dt) {
  struct ir_type t = f->types.v[id];
  t.dtype = (uint8_t)dt;
  return ir_type_intern(f, &t);
}

int64_t ir_type_numel(const struct ir_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

bool ir_type_is_scalar(const struct ir_type *t) { return t->kind == IR_TY_TILE && t->rank == 0; }

uint16_t ir_layout_intern(struct ir_func *f, const struct ir_layout *l) {
  for (uint32_t i = 1; i < f->layouts.n; i++)
    if (memcmp(&f->layouts.v[i], l, sizeof *l) == 0) return (uint16_t)i;
  VEC_PUSH(f->arena, f->layouts, *l);
  return (uint16_t)(f->layouts.n - 1);
}

/* ---- values and parameters ---- */

static ir_val new_value(struct ir_func *f, ir_type_id type, enum ir_value_kind kind, uint32_t def,
                        uint32_t index) {
  struct ir_value v = {.type = type, .def = def, .index = (uint16_t)index, .kind = (uint8_t)kind};
  VEC_PUSH(f->arena, f->values, v);
  return f->values.n - 1;
}

ir_val ir_add_param(struct ir_func *f, const char *name, enum ir_param_kind kind, ir_type_id type,
                    bool is_out) {
  struct ir_param p = {0};
  p.name = strtab_intern(f->strs, name, strlen(name));
  p.kind = (uint8_t)kind;
  p.is_out = is_out;
  p.used = 1;
  p.source_index = UINT32_MAX;
  p.facts.align = 1;
  p.value = new_value(f, type, IR_VAL_PARAM, 0, f->params.n);
  f->values.v[p.value].name = p.name;
  VEC_PUSH(f->arena, f->params, p);
  return p.value;
}

struct ir_param *ir_param_of(const struct ir_func *f, ir_val v) {
  if (v == 0 || v >= f->values.n || f->values.v[v].kind != IR_VAL_PARAM) return NULL;
  return &f->params.v[f->values.v[v].index];
}

ir_val ir_divisor_source(const struct ir_func *f, ir_val v) {
  for (;;) {
    uint32_t d = ir_def_op(f, v);
    if (!d) return v;
    const struct ir_op *op = &f->ops.v[d];
    if (op->code == IR_SPLAT) {
      v = op->args[0];
      continue;
    }
    /* an integer cast that keeps every bit of a positive size (i32 -> i64, i32 -> u32) */
    ir_dtype from = (ir_dtype)ir_vtype(f, op->args[0])->dtype, to = (ir_dtype)ir_vtype(f, v)->dtype;
    if (op->code == IR_CAST && !ir_dtype_is_float(from) && !ir_dtype_is_float(to) && from != DT_BOOL &&
        ir_dtype_bits(to) >= ir_dtype_bits(from)) {
      v = op->args[0];
      continue;
    }
    return v;
  }
}

ir_val ir_block_add_arg(struct ir_func *f, uint32_t blk, ir_type_id type) {
  struct ir_block *b = &f->blocks.v[blk];
  /* block arguments must be consecutive values: allowed only while no value was created
   * after this block's last argument. Builders add all arguments right after creation. */
  ir_val v = new_value(f, type, IR_VAL_BLOCKARG, blk, b->nargs);
  b = &f->blocks.v[blk];
  if (b->nargs == 0) b->args = v;
  b->nargs++;
  return v;
}

uint32_t ir_def_op(const struct ir_func *f, ir_val v) {
  const struct ir_value *val = &f->values.v[v];
  return val->kind == IR_VAL_RESULT ? val->def : 0;
}

bool ir_defined_within(const struct ir_func *f, ir_val v, uint32_t blk) {
  const struct ir_value *val = &f->values.v[v];
  uint32_t b = val->kind == IR_VAL_RESULT ? f->ops.v[val->def].block : val->kind == IR_VAL_BLOCKARG ? val->def : 0;
  while (b) {
    if (b == blk) return true;
    uint32_t parent = f->blocks.v[b].parent;
    b = parent ? f->ops.v[parent].block : 0;
  }
  return false;
}

bool ir_op_writes_tensor(const struct ir_func *f, uint32_t id, ir_val t) {
  const struct ir_op *op = &f->ops.v[id];
  if ((ir_ops[op->code].flags & OPF_WRITE) && op->nargs && op->args[0] == t) return true;
  for (uint32_t r = 0; r < op->nregions; r++)
    if (ir_block_writes_tensor(f, op->region + r, t)) return true;
  return false;
}

bool ir_block_writes_tensor(const struct ir_func *f, uint32_t blk, ir_val t) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++)
    if (ir_op_writes_tensor(f, b->ops.v[i], t)) return true;
  return false;
}

bool ir_op_uses(const struct ir_func *f, uint32_t id, ir_val v) {
  const struct ir_op *op = &f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++)
    if (op->args[k] == v) return true;
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++)
      if (ir_op_uses(f, b->ops.v[i], v)) return true;
  }
  return false;
}

uint32_t ir_op_index(const struct ir_func *f, uint32_t id) {
  const struct ir_block *b = &f->blocks.v[f->ops.v[id].block];
  uint32_t i = 0;
  while (i < b->ops.n && b->ops.v[i] != id) i++;
  return i;
}

uint32_t ir_op_next(const struct ir_func *f, uint32_t id) {
  const struct ir_block *b = &f->blocks.v[f->ops.v[id].block];
  uint32_t i = ir_op_index(f, id);
  return i + 1 < b->ops.n ? b->ops.v[i + 1] : 0;
}

bool ir_block_has_op(const struct ir_func *f, uint32_t blk, const uint16_t *codes, uint32_t n) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t c = 0; c < n; c++)
      if (op->code == codes[c]) return true;
    for (uint32_t r = 0; r < op->nregions; r++)
      if (ir_block_has_op(f, op->region + r, codes, n)) return true;
  }
  return false;
}

void ir_block_collect(const struct ir_func *f, uint32_t blk, uint16_t code, uint32_t *out, uint32_t *n, uint32_t cap) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == code && *n < cap) out[(*n)++] = b->ops.v[i];
    for (uint32_t r = 0; r < op->nregions; r++) ir_block_collect(f, op->region + r, code, out, n, cap);
  }
}

bool ir_reads_unwritten(const struct ir_func *f, uint32_t id, uint32_t blk) {
  const struct ir_op *op = &f->ops.v[id];
  return (op->code == IR_LOAD || op->code == IR_GATHER) && !ir_block_writes_tensor(f, blk, op->args[0]);
}

ir_val ir_view_source(const struct ir_func *f, ir_val v) {
  for (uint32_t d; (d = ir_def_op(f, v));) {
    uint16_t c = f->ops.v[d].code;
    if (c != IR_CAST && c != IR_TRANS && c != IR_CONVERT_LAYOUT) break;
    v = f->ops.v[d].args[0];
  }
  return v;
}

bool ir_facts_allow_vector(const struct ir_param *p, const struct ir_type *tt, int d, int bytes) {
  if (!p->facts.stride1[d] || p->facts.align < bytes) return false;
  for (int o = 0; o < tt->rank; o++)
    if (o != d && !p->facts.div16[o] && !(!IR_DIM_IS_SYM(tt->dims[o]) && tt->dims[o] == 1)) return false;
  return true;
}

int64_t ir_perm_encode(const int *perm, int rank) {
  int64_t code = 0;
  for (int i = 0; i < rank; i++) code = code * 10 + perm[i];
  return code;
}

bool ir_perm_decode(int64_t code, int rank, int *perm) {
  if (code < 0 || rank < 1 || rank > IR_MAX_RANK) return false;
  unsigned seen = 0;
  for (int i = rank; i-- > 0;) {
    perm[i] = (int)(code % 10);
    code /= 10;
    if (perm[i] >= rank || (seen >> perm[i] & 1)) return false;
    seen |= 1u << perm[i];
  }
  return code == 0;
}

bool ir_value_const_int(const struct ir_func *f, ir_val v, int64_t *out) {
  uint32_t op = ir_def_op(f, v);
  if (!op || f->ops.v[op].code != IR_CONST) return false;
  const struct ir_type *t = ir_vtype(f, v);
  if (ir_dtype_is_float(t->dtype)) return false;
  *out = f->ops.v[op].i[0];
  return true;
}

bool ir_value_const_float(const struct ir_func *f, ir_val v, double *out) {
  uint32_t op = ir_def_op(f, v);
  if (!op || f->ops.v[op].code != IR_CONST) return false;
  const struct ir_type *t = ir_vtype(f, v);
  *out = ir_dtype_is_float(t->dtype) ? f->ops.v[op].f : (double)f->ops.v[op].i[0];
  return true;
}

/* ---- the builder ---- */

void ir_builder_at_end(struct ir_builder *b, struct ir_func *f, uint32_t block) {
  b->f = f;
  b->block = block;
  b->before = 0;
  b->loc = (struct ir_loc){0, 0};
}

void ir_builder_before(struct ir_builder *b, struct ir_func *f, uint32_t op) {
  b->f = f;
  b->block = f->ops.v[op].block;
  b->before = op;
  b->loc = f->ops.v[op].loc;
}

static void block_insert(struct ir_func *f, uint32_t blk, uint32_t before, uint32_t op) {
  struct ir_block *b = &f->blocks.v[blk];
  VEC_RESERVE(f->arena, b->ops, 1);
  uint32_t pos = b->ops.n;
  if (before) {
    for (uint32_t i = 0; i < b->ops.n; i++)
      if (b->ops.v[i] == before) {
        pos = i;
        break;
      }
  }
  memmove(&b->ops.v[pos + 1], &b->ops.v[pos], sizeof(uint32_t) * (b->ops.n - pos));
  b->ops.v[pos] = op;
  b->ops.n++;
  f->ops.v[op].block = blk;
}

uint32_t ir_build(struct ir_builder *b, ir_opcode code, const ir_val *args, uint32_t nargs,
                  const ir_type_id *res_types, uint32_t nres) {
  struct ir_func *f = b->f;
  struct ir_op op = {0};
  op.code = (uint16_t)code;
  op.nargs = nargs;
  op.args = ARENA_NEWN(f->arena, ir_val, nargs + 1);
  if (nargs) memcpy(op.args, args, sizeof(ir_val) * nargs);
  op.loc = b->loc;
  VEC_PUSH(f->arena, f->ops, op);
  uint32_t id = f->ops.n - 1;
  for (uint32_t i = 0; i < nres; i++) {
    ir_val v = new_value(f, res_types[i], IR_VAL_RESULT, id, i);
    if (i == 0) f->ops.v[id].res = v;
  }
  f->ops.v[id].nres = (uint16_t)nres;
  int nregions = ir_ops[code].nregions;
  if (nregions > 0) {
    struct ir_block nb = {0};
    nb.parent = id;
    f->ops.v[id].region = f->blocks.n;
    f->ops.v[id].nregions = (uint16_t)nregions;
    for (int i = 0; i < nregions; i++) VEC_PUSH(f->arena, f->blocks, nb);
  }
  block_insert(f, b->block, b->before, id);
  return id;
}

ir_val ir_build1(struct ir_builder *b, ir_opcode code, ir_type_id type, const ir_val *args,
                 uint32_t nargs) {
  uint32_t op = ir_build(b, code, args, nargs, &type, 1);
  return b->f->ops.v[op].res;
}

ir_val ir_const_int(struct ir_builder *b, ir_type_id type, int64_t v) {
  uint32_t op = ir_build(b, IR_CONST, NULL, 0, &type, 1);
  struct ir_op *o = &b->f->ops.v[op];
  if (ir_dtype_is_float(ir_type(b->f, type)->dtype))
    o->f = (double)v;
  else
    o->i[0] = v;
  return o->res;
}

ir_val ir_const_float(struct ir_builder *b, ir_type_id type, double v) {
  uint32_t op = ir_build(b, IR_CONST, NULL, 0, &type, 1);
  struct ir_op *o = &b->f->ops.v[op];
  if (ir_dtype_is_float(ir_type(b->f, type)->dtype))
    o->f = v;
  else
    o->i[0] = (int64_t)v;
  return o->res;
}

static bool is_compare(ir_opcode c) {
  return c == IR_EQ || c == IR_NE || c == IR_LT || c == IR_LE || c == IR_GT || c == IR_GE;
}

ir_val ir_binary(struct ir_builder *b, ir_opcode code, ir_val x, ir_val y) {
  ir_type_id t = b->f->values.v[x].type;
  if (is_compare(code)) t = ir_type_with_dtype(b->f, t, DT_BOOL);
  ir_val args[2] = {x, y};
  return ir_build1(b, code, t, args, 2);
}

ir_val ir_unary(struct ir_builder *b, ir_opcode code, ir_val x) {
  return ir_build1(b, code, b->f->values.v[x].type, &x, 1);
}

uint32_t ir_build_for(struct ir_builder *b, ir_val lb, ir_val ub, ir_val step, const ir_val *inits,
                      uint32_t ninits) {
  struct ir_func *f = b->f;
  struct arena *a = f->arena;
  ir_val *args = ARENA_NEWN(a, ir_val, ninits + 3);
  ir_type_id *types = ARENA_NEWN(a, ir_type_id, ninits + 1);
  args[0] = lb;
  args[1] = ub;
  args[2] = step;
  for (uint32_t i = 0; i < ninits; i++) {
    args[3 + i] = inits[i];
    types[i] = f->values.v[inits[i]].type;
  }
  uint32_t op = ir_build(b, IR_FOR, args, ninits + 3, types, ninits);
  uint32_t body = f->ops.v[op].region;
  ir_block_add_arg(f, body, f->values.v[lb].type);
  for (uint32_t i = 0; i < ninits; i++) ir_block_add_arg(f, body, types[i]);
  return op;
}

uint32_t ir_for_add_carried(struct ir_func *f, uint32_t loop, const ir_val *inits, uint32_t n) {
  const struct ir_op *lp = &f->ops.v[loop];
  uint32_t nc = lp->nargs - 3, body = lp->region;
  ir_val *all = ARENA_NEWN(f->arena, ir_val, nc + n + 1);
  for (uint32_t k = 0; k < nc; k++) all[k] = lp->args[3 + k];
  for (uint32_t k = 0; k < n; k++) all[nc + k] = inits[k];
  struct ir_builder b;
  ir_builder_before(&b, f, loop);
  b.loc = lp->loc;
  uint32_t nl = ir_build_for(&b, lp->args[0], lp->args[1], lp->args[2], all, nc + n);
  lp = &f->ops.v[loop];
  memcpy(f->ops.v[nl].i, lp->i, sizeof lp->i);
  uint32_t nbody = f->ops.v[nl].region;
  ir_val base = f->blocks.v[nbody].args;
  ir_move_ops(f, body, nbody);
  for (uint32_t k = 0; k <= nc; k++) ir_replace_uses(f, f->blocks.v[body].args + k, base + k);
  for (uint32_t k = 0; k < nc; k++) ir_replace_uses(f, f->ops.v[loop].res + k, f->ops.v[nl].res + k);
  ir_op_remove(f, loop);
  return nl;
}

void ir_move_ops(struct ir_func *f, uint32_t from, uint32_t to) {
  f->blocks.v[to].ops = f->blocks.v[from].ops;
  memset(&f->blocks.v[from].ops, 0, sizeof f->blocks.v[from].ops);
  for (uint32_t i = 0; i < f->blocks.v[to].ops.n; i++) f->ops.v[f->blocks.v[to].ops.v[i]].block = to;
}

uint32_t ir_build_if(struct ir_builder *b, ir_val cond, const ir_type_id *types, uint32_t ntypes) {
  return ir_build(b, IR_IF, &cond, 1, types, ntypes);
}

/* ---- mutation ---- */

static void replace_in_block(struct ir_func *f, uint32_t blk, ir_val from, ir_val to) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] == from) op->args[k] = to;
    for (uint32_t r = 0; r < op->nregions; r++) replace_in_block(f, op->region + r, from, to);
  }
}

void ir_replace_uses(struct ir_func *f, ir_val from, ir_val to) {
  replace_in_block(f, IR_GRID_BLOCK, from, to);
  replace_in_block(f, IR_BODY_BLOCK, from, to);
}

void ir_wrap_uses(struct ir_func *f, ir_val from, ir_val to) {
  ir_replace_uses(f, from, to);
  uint32_t d = ir_def_op(f, to);
  const struct ir_op *o = &f->ops.v[d];
  ir_val *na = ARENA_NEWN(f->arena, ir_val, o->nargs + 1);
  for (uint32_t k = 0; k < o->nargs; k++) na[k] = o->args[k] == to ? from : o->args[k];
  f->ops.v[d].args = na; /* (a fresh array: another op may share the old one) */
}

void ir_op_remove(struct ir_func *f, uint32_t op) {
  struct ir_op *o = &f->ops.v[op];
  if (!o->block) return;
  struct ir_block *b = &f->blocks.v[o->block];
  for (uint32_t i = 0; i < b->ops.n; i++)
    if (b->ops.v[i] == op) {
      memmove(&b->ops.v[i], &b->ops.v[i + 1], sizeof(uint32_t) * (b->ops.n - i - 1));
      b->ops.n--;
      break;
    }
  o->block = 0;
}

static void erase_block(struct ir_func *f, uint32_t blk) {
  struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    struct ir_op *o = &f->ops.v[b->ops.v[i]];
    for (uint32_t r = 0; r < o->nregions; r++) erase_block(f, o->region + r);
    o->block = 0;
  }
  b->ops.n = 0;
}

void ir_op_erase(struct ir_func *f, uint32_t op) {
  struct ir_op *o = &f->ops.v[op];
  for (uint32_t r = 0; r < o->nregions; r++) erase_block(f, o->region + r);
  ir_op_remove(f, op);
}

void ir_op_move(struct ir_builder *b, uint32_t op) {
  ir_op_remove(b->f, op);
  block_insert(b->f, b->block, b->before, op);
}

void ir_valmap_init(struct ir_valmap *m, const struct ir_func *f, struct arena *a) {
  m->n = f->values.n;
  m->to = ARENA_NEWN(a, ir_val, m->n + 1);
}

uint32_t ir_clone_op(struct ir_builder *b, uint32_t op, struct ir_valmap *m) {
  struct ir_func *f = b->f;
  struct ir_op src = f->ops.v[op];
  ir_val *args = ARENA_NEWN(f->arena, ir_val, src.nargs + 1);
  for (uint32_t k = 0; k < src.nargs; k++) args[k] = ir_mapped(m, src.args[k]);
  ir_type_id *types = ARENA_NEWN(f->arena, ir_type_id, src.nres + 1);
  for (uint32_t r = 0; r < src.nres; r++) types[r] = f->values.v[src.res + r].type;
  uint32_t id = ir_build(b, (ir_opcode)src.code, args, src.nargs, types, src.nres);
  struct ir_op *n = &f->ops.v[id];
  memcpy(n->i, src.i, sizeof src.i);
  n->f = src.f;
  n->loc = src.loc;
  for (uint32_t r = 0; r < src.nres; r++) ir_map_set(m, src.res + r, n->res + r);
  for (uint32_t g = 0; g < src.nregions; g++) {
    uint32_t from = src.region + g, to = f->ops.v[id].region + g;
    const struct ir_block *fb = &f->blocks.v[from];
    uint32_t nargs = fb->nargs;
    for (uint32_t k = 0; k < nargs; k++) {
      ir_val a = ir_block_add_arg(f, to, f->values.v[f->blocks.v[from].args + k].type);
      ir_map_set(m, f->blocks.v[from].args + k, a);
    }
    struct ir_builder inner;
    ir_builder_at_end(&inner, f, to);
    inner.loc = b->loc;
    for (uint32_t i = 0; i < f->blocks.v[from].ops.n; i++) ir_clone_op(&inner, f->blocks.v[from].ops.v[i], m);
  }
  return id;
}

void ir_op_set_args(struct ir_func *f, uint32_t op, const ir_val *args, uint32_t nargs) {
  struct ir_op *o = &f->ops.v[op];
  ir_val *na = ARENA_NEWN(f->arena, ir_val, nargs + 1);
  if (nargs) memcpy(na, args, sizeof(ir_val) * nargs);
  o->args = na;
  o->nargs = nargs;
}

void ir_op_set_arg(struct ir_func *f, uint32_t op, uint32_t k, ir_val v) {
  const struct ir_op *o = &f->ops.v[op];
  ir_val *na = ARENA_NEWN(f->arena, ir_val, o->nargs + 1);
  memcpy(na, o->args, sizeof(ir_val) * o->nargs);
  na[k] = v;
  f->ops.v[op].args = na; /* (a fresh array: another op may share the old one) */
}

void ir_builder_after(struct ir_builder *b, struct ir_func *f, uint32_t op) {
  uint32_t next = ir_op_next(f, op);
  if (next) ir_builder_before(b, f, next);
  else ir_builder_at_end(b, f, f->ops.v[op].block);
  b->loc = f->ops.v[op].loc;
}

bool ir_op_in_loop(const struct ir_func *f, uint32_t op) {
  for (uint32_t b = f->ops.v[op].block; b && f->blocks.v[b].parent; b = f->ops.v[f->blocks.v[b].parent].block)
    if (f->ops.v[f->blocks.v[b].parent].code == IR_FOR) return true;
  return false;
}

bool ir_op_has_tile(const struct ir_func *f, const struct ir_op *op) {
  for (uint32_t k = 0; k < op->nargs; k++) {
    const struct ir_type *t = ir_vtype(f, op->args[k]);
    if (t->kind == IR_TY_TILE && t->rank > 0) return true;
  }
  for (uint32_t k = 0; k < op->nres; k++) {
    const struct ir_type *t = ir_vtype(f, op->res + k);
    if (t->kind == IR_TY_TILE && t->rank > 0) return true;
  }
  return false;
}

void ir_op_rewrite(struct ir_func *f, uint32_t op, ir_opcode code, const ir_val *args, uint32_t nargs) {
  ir_val copy[8];
  if (nargs > TL_ARRAY_LEN(copy)) abort(); /* internal error: rewrites make small ops */
  for (uint32_t k = 0; k < nargs; k++) copy[k] = args[k]; /* args may be op's own */
  struct ir_op *o = &f->ops.v[op];
  if (nargs > o->nargs) o->args = ARENA_NEWN(f->arena, ir_val, nargs + 1);
  for (uint32_t k = 0; k < nargs; k++) o->args[k] = copy[k];
  o->nargs = nargs;
  o->code = (uint16_t)code;
  memset(o->i, 0, sizeof o->i);
  o->f = 0;
}

static void count_uses(const struct ir_func *f, uint32_t blk, uint32_t *counts) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    for (uint32_t k = 0; k < op->nargs; k++) counts[op->args[k]]++;
    for (uint32_t r = 0; r < op->nregions; r++) count_uses(f, op->region + r, counts);
  }
}

uint32_t *ir_use_counts(const struct ir_func *f, struct arena *scratch) {
  uint32_t *counts = ARENA_NEWN(scratch, uint32_t, f->values.n + 1);
  count_uses(f, IR_GRID_BLOCK, counts);
  count_uses(f, IR_BODY_BLOCK, counts);
  return counts;
}

/* ---- walking ---- */

void ir_walk(struct ir_func *f, uint32_t blk, ir_walk_fn fn, void *ud) {
  /* Iterate by index and re-read the block each step: the callback may remove the current
   * op (then the next op slides into this index) or insert ops before it. */
  uint32_t i = 0;
  while (i < f->blocks.v[blk].ops.n) {
    uint32_t op = f->blocks.v[blk].ops.v[i];
    fn(f, op, ud);
    struct ir_block *b = &f->blocks.v[blk];
    /* find where `op` is now: if it was removed, continue at the same index (without a
     * search of the rest of the block, which would make a pass that removes many ops
     * quadratic) */
    if (f->ops.v[op].block != blk) continue;
    uint32_t j = i;
    while (j < b->ops.n && b->ops.v[j] != op) j++;
    if (j == b->ops.n) continue;
    struct ir_op *o = &f->ops.v[op];
    for (uint32_t r = 0; r < o->nregions; r++) ir_walk(f, o->region + r, fn, ud);
    i = j + 1;
  }
}
