/* cg_mem.c - global loads and stores of tensor slices.
 *
 * Element (tile coordinate c) of a slice of tensor T maps to tensor coordinate
 * start[d] + c[j] for sliced dimensions and index[d] for the others, at element offset
 * sum_d coord[d] * stride[d] (64-bit). It is accessed only when every coordinate is within
 * [0, size[d]): masked loads read the fill value and masked stores do nothing, using
 * predicated PTX (`@p ld.global`) so no out-of-bounds address is ever dereferenced.
 *
 * Vector accesses: when the layout gives a thread v consecutive elements along the tile's
 * last dimension, that dimension is contiguous in memory (stride 1), every other stride and
 * the base are aligned to the vector's bytes and the slice start is a multiple of v (from a
 * small divisibility analysis of the index expression), the v elements move as one 4-, 8-
 * or 16-byte access with one predicate. When the size is not known to be a multiple of v
 * (a 4100-wide row: its last vector straddles the edge), the access branches once per
 * op: a thread whose vectors are each wholly inside or wholly outside (all but the thread
 * at the edge) takes the vector accesses, the other moves its elements one at a time.
 *
 * A tile known at compile time to lie inside the tensor (constant starts and sizes) is
 * accessed without predicates. (A branch at run time on whether the tile is inside, so
 * that a row kernel's chunks but the last go without predicates, measured slower on the
 * default row kernels and the one-pass rows: PERF.md 71.)
 *
 * Stores from a Tensor Core accumulator (a GEMM's or attention's epilogue) go through
 * shared memory when the blocked layout is better for the tensor: 16-byte stores instead of
 * the accumulator's 4-byte pairs, or, on rows off 16 bytes, a warp's 32 elements
 * consecutive instead of spread over 8 rows (staged_store). On an H200 that took the
 * 4096^3 f16 GEMM from 499 to 544 TFLOP/s and 4095^3 from 377 to 437 (PERF.md 20).       */
#include <stdio.h>
#include <string.h>

#include "cg_internal.h"

/* The largest power of two known to divide scalar value v (capped at 2^30). */
static int64_t divisibility(struct cg *g, ir_val v, int depth);
int64_t cg_divisibility(struct cg *g, ir_val v) { return divisibility(g, v, 0); }

static int64_t divisibility(struct cg *g, ir_val v, int depth) {
  const int64_t cap = (int64_t)1 << 30;
  struct ir_func *f = g->f;
  if (depth > 32) return 1;
  const struct ir_value *val = &f->values.v[v];
  if (val->kind == IR_VAL_PARAM) {
    const struct ir_param *p = &f->params.v[val->index];
    return p->kind == IR_PARAM_SHAPE && p->div16 ? 16 : 1;
  }
  if (val->kind == IR_VAL_BLOCKARG) {
    const struct ir_block *b = &f->blocks.v[val->def];
    const struct ir_op *owner = &f->ops.v[b->parent];
    if (b->parent && owner->code == IR_FOR && val->index == 0) {
      int64_t a = divisibility(g, owner->args[0], depth + 1), s = divisibility(g, owner->args[2], depth + 1);
      return a < s ? a : s;
    }
    return 1;
  }
  const struct ir_op *op = &f->ops.v[val->def];
  switch (op->code) {
  case IR_CONST: {
    int64_t c = op->i[0];
    if (c == 0) return cap;
    if (c < 0) c = -c;
    int64_t d = c & -c;
    return d > cap ? cap : d;
  }
  case IR_MUL: {
    int64_t d = divisibility(g, op->args[0], depth + 1) * divisibility(g, op->args[1], depth + 1);
    return d > cap ? cap : d;
  }
  case IR_SHL: {
    int64_t s;
    if (ir_value_const_int(f, op->args[1], &s) && s >= 0 && s < 30) {
      int64_t d = divisibility(g, op->args[0], depth + 1) << s;
      return d > cap ? cap : d;
    }
    return 1;
  }
  case IR_ADD:
  case IR_SUB:
  case IR_MIN:
  case IR_MAX: {
    int64_t a = divisibility(g, op->args[0], depth + 1), b = divisibility(g, op->args[1], depth + 1);
    return a < b ? a : b;
  }
  default:
    return 1;
  }
}

struct access {
  const struct ir_op *op;
  const struct ir_param *param;
  struct cg_tensor *t;
  int rank;               /* tensor rank */
  uint64_t mask;
  int tdim[IR_MAX_RANK];  /* tensor dim -> tile dim, or -1 */
  LLVMValueRef start[IR_MAX_RANK]; /* i64 */
  LLVMValueRef size[IR_MAX_RANK];  /* i64 */
  ir_dtype dt;
  struct ll l;            /* tile layout (rank 0: scalar) */
  int tile_rank;
  uint32_t nregs;
  int vec;                /* elements per access */
  bool straddle;          /* a vector may straddle the edge (the size is not a multiple of vec) */
  bool inside;            /* the whole tile is known to be in bounds: no predicates */
  bool probe;             /* vectors only where the tile's first element is 16-byte aligned at run time */
  bool shifted;           /* probe=2: each run read as the two aligned blocks around it (load_shifted) */
  bool exact;             /* probe=3: shifted, reading only the words it needs (load_exact) */
};

static LLVMValueRef dim_size(struct cg *g, const struct ir_type *tt, int d) {
  if (!IR_DIM_IS_SYM(tt->dims[d])) return cg_i64(g, tt->dims[d]);
  struct cgval *sv = cg_val(g, IR_DIM_SYM_VALUE(tt->dims[d]));
  return LLVMBuildSExt(g->b, sv->r[0], g->i64, "");
}

int cg_contiguous_run(const struct ll *l, int rank, int eb) {
  int last = rank - 1, v = 1;
  for (int b = 0; b < l->nreg && v * 2 * eb <= 16; b++) {
    bool next = l->reg[b][last] == v;
    for (int d = 0; d < rank; d++)
      if (d != last && l->reg[b][d]) next = false;
    if (!next) break;
    v *= 2;
  }
  return v;
}

/* Index v as i64: a loop's variable is its 64-bit counter (cg_gen_for: the register is its
 * truncation, equal to it in every iteration), so that LLVM sees the loop's addresses as
 * recurrences, whichever way the loop counts (row-reverse's loops count down); any other
 * index is sign-extended. */
static LLVMValueRef index64(struct cg *g, ir_val v, LLVMValueRef r) {
  const struct ir_value *val = &g->f->values.v[v];
  if (val->kind == IR_VAL_BLOCKARG && val->index == 0) {
    uint32_t owner = g->f->blocks.v[val->def].parent;
    if (owner && g->f->ops.v[owner].code == IR_FOR && LLVMIsATruncInst(r) &&
        LLVMTypeOf(LLVMGetOperand(r, 0)) == g->i64)
      return LLVMGetOperand(r, 0);
  }
  return LLVMBuildSExt(g->b, r, g->i64, "");
}

static bool setup_access(struct cg *g, const struct ir_op *op, ir_val tile, const struct ll *layout,
                         struct access *x) {
  struct ir_func *f = g->f;
  memset(x, 0, sizeof *x);
  x->op = op;
  const struct ir_value *tv = &f->values.v[op->args[0]];
  x->param = &f->params.v[tv->index];
  x->t = &g->tensors[tv->index];
  const struct ir_type *tt = ir_vtype(f, op->args[0]);
  x->rank = tt->rank;
  x->mask = (uint64_t)op->i[0];
  x->dt = (ir_dtype)tt->dtype;
  for (int d = 0, j = 0; d < x->rank; d++) {
    x->tdim[d] = (x->mask >> d & 1) ? j++ : -1;
    struct cgval *s = cg_val(g, op->args[1 + d]);
    if (g->failed) return false;
    x->start[d] = index64(g, op->args[1 + d], s->r[0]);
    x->size[d] = dim_size(g, tt, d);
  }
  const struct ir_type *vt = ir_vtype(f, tile);
  x->tile_rank = vt->rank;
  if (vt->rank > 0) {
    if (layout)
      x->l = *layout;
    else if (!cg_layout_of(g, tile, &x->l))
      return false;
    x->nregs = ll_num_regs(&x->l);
  } else {
    x->nregs = 1;
  }
  /* vector width */
  x->vec = 1;
  int eb = ir_dtype_bytes(x->dt);
  int last = vt->rank - 1;
  int D = -1;
  for (int d = 0; d < x->rank; d++)
    if (x->tdim[d] == last && last >= 0) D = d;
  if (D < 0 || !x->param->facts.stride1[D] || eb > 8 || x->dt == DT_BOOL) return true;
  int v = cg_contiguous_run(&x->l, vt->rank, eb);
  /* align: row-align placed the slice's first element at a 16-byte boundary (IR.md) */
  bool placed = op->i[1] >= v * eb && x->param->facts.align >= v * eb;
  if (op->i[2] >= 2) { /* shifted: whole 32-bit words, runs of 4 bytes or more (IR.md) */
    if (v * eb >= 4 && eb <= 4 && op->code == IR_LOAD && vt->rank == 1)
      x->vec = v, x->shifted = true, x->exact = op->i[2] == 3 && v * eb <= 16;
    return true;
  }
  if (v == 1 || (!placed && !ir_facts_allow_vector(x->param, tt, D, v * eb))) return true;
  if (!placed && divisibility(g, op->args[1 + D], 0) % v) return true;
  if (IR_DIM_IS_SYM(tt->dims[D])) {
    const struct ir_param *sp = ir_param_of(f, IR_DIM_SYM_VALUE(tt->dims[D]));
    x->straddle = !sp || !sp->div16 || 16 % v;
  } else {
    x->straddle = tt->dims[D] % v != 0;
  }
  x->vec = v;
  x->probe = placed && op->i[2];
  return true;
}

/* Starts `if (the tile's first element is 16-byte aligned) {vectors} else {elements}` for
 * an access with probe=1 (row-align: another tensor's row expected to agree with the one
 * the loop was aligned to): the builder is left in the vector block; returns the element
 * block and sets *join. The test is the same in every thread. */
static LLVMBasicBlockRef probe_branch(struct cg *g, struct access *x, LLVMBasicBlockRef *join) {
  LLVMValueRef o = cg_i64(g, 0);
  for (int d = 0; d < x->rank; d++) o = LLVMBuildAdd(g->b, o, LLVMBuildMul(g->b, x->start[d], x->t->stride[d], ""), "");
  LLVMValueRef byte_off = LLVMBuildMul(g->b, o, cg_i64(g, ir_dtype_bytes(x->dt)), "");
  LLVMValueRef a = LLVMBuildPtrToInt(g->b, LLVMBuildGEP2(g->b, g->i8, x->t->ptr, &byte_off, 1, ""), g->i64, "");
  LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, a, cg_i64(g, 15), ""), cg_i64(g, 0), "");
  LLVMBasicBlockRef vec = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.aligned");
  LLVMBasicBlockRef elem = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.unaligned");
  *join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.probed");
  LLVMBuildCondBr(g->b, ok, vec, elem);
  LLVMPositionBuilderAtEnd(g->b, vec);
  return elem;
}

/* Whether each of this thread's vectors of x is wholly inside or wholly outside the tensor
 * (i1): its first and last elements are both in bounds or both not. */
static LLVMValueRef vectors_whole(struct cg *g, struct access *x);

/* `if (whole) {vec_name} else {mem.elem}`, the builder left in the first; returns the
 * second and sets *join. */
static LLVMBasicBlockRef whole_branch(struct cg *g, LLVMValueRef whole, const char *vec_name, LLVMBasicBlockRef *join) {
  LLVMBasicBlockRef vec = LLVMAppendBasicBlockInContext(g->ctx, g->fn, vec_name);
  LLVMBasicBlockRef elem = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.elem");
  *join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.end");
  LLVMBuildCondBr(g->b, whole, vec, elem);
  LLVMPositionBuilderAtEnd(g->b, vec);
  return elem;
}

/* Starts `if (whole) {vector accesses} else {one element at a time}` for an access whose
 * vectors may straddle the edge: the builder is left in the vector block; returns the
 * element block and sets *join. */
static LLVMBasicBlockRef straddle_branch(struct cg *g, struct access *x, LLVMBasicBlockRef *join) {
  return whole_branch(g, vectors_whole(g, x), "mem.vec", join);
}

/* Element offset (i64) and in-bounds predicate (i1) of register r. */
static void element_address(struct cg *g, struct access *x, uint32_t r, LLVMValueRef *off, LLVMValueRef *inb) {
  LLVMValueRef c[IR_MAX_RANK];
  if (x->tile_rank > 0) cg_coords(g, &x->l, r, c);
  LLVMValueRef o = cg_i64(g, 0), ok = LLVMConstInt(g->i1, 1, 0);
  for (int d = 0; d < x->rank; d++) {
    LLVMValueRef coord = x->start[d];
    if (x->tdim[d] >= 0)
      coord = LLVMBuildAdd(g->b, coord, LLVMBuildZExt(g->b, c[x->tdim[d]], g->i64, ""), "");
    /* 0 <= coord < size as one unsigned comparison */
    ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULT, coord, x->size[d], ""), "");
    o = LLVMBuildAdd(g->b, o, LLVMBuildMul(g->b, coord, x->t->stride[d], ""), "");
  }
  *off = o;
  *inb = x->inside ? LLVMConstInt(g->i1, 1, 0) : ok;
}

/* Whether the whole tile of x lies inside the tensor (i1, the same in every thread): every
 * sliced dimension's [start, start + extent) and every indexed coordinate in [0, size). */
static LLVMValueRef tile_inside(struct cg *g, struct access *x) {
  const struct ir_type *vt = ir_vtype(g->f, x->op->code == IR_LOAD ? x->op->res : x->op->args[x->op->nargs - 1]);
  LLVMValueRef ok = LLVMConstInt(g->i1, 1, 0), zero = cg_i64(g, 0);
  for (int d = 0; d < x->rank; d++) {
    LLVMValueRef lo = LLVMBuildICmp(g->b, LLVMIntSGE, x->start[d], zero, "");
    LLVMValueRef end = x->start[d];
    LLVMIntPredicate hi_pred = LLVMIntSLT;
    if (x->tdim[d] >= 0) {
      end = LLVMBuildAdd(g->b, x->start[d], cg_i64(g, vt->rank > 0 ? vt->dims[x->tdim[d]] : 1), "");
      hi_pred = LLVMIntSLE;
    }
    ok = LLVMBuildAnd(g->b, ok, LLVMBuildAnd(g->b, lo, LLVMBuildICmp(g->b, hi_pred, end, x->size[d], ""), ""), "");
  }
  return ok;
}

/* Sets x->inside when the whole tile is known at compile time to be in bounds. */
static void static_inside(struct cg *g, struct access *x) {
  if (x->tile_rank == 0) return;
  LLVMValueRef in = tile_inside(g, x);
  x->inside = LLVMIsAConstantInt(in) && LLVMConstIntGetZExtValue(in) != 0;
}

static LLVMValueRef vectors_whole(struct cg *g, struct access *x) {
  LLVMValueRef whole = LLVMConstInt(g->i1, 1, 0);
  for (uint32_t r0 = 0; r0 < x->nregs; r0 += (uint32_t)x->vec) {
    LLVMValueRef off, first, last;
    element_address(g, x, r0, &off, &first);
    element_address(g, x, r0 + (uint32_t)x->vec - 1, &off, &last);
    whole = LLVMBuildAnd(g->b, whole, LLVMBuildICmp(g->b, LLVMIntEQ, first, last, ""), "");
  }
  return whole;
}

/* The global address (i64) of element `off` of a tensor of dt at ptr. */
static LLVMValueRef elem_address(struct cg *g, LLVMValueRef ptr, ir_dtype dt, LLVMValueRef off) {
  LLVMValueRef byte_off = LLVMBuildMul(g->b, off, cg_i64(g, ir_dtype_bytes(dt)), "");
  LLVMValueRef p = LLVMBuildGEP2(g->b, g->i8, ptr, &byte_off, 1, "");
  return LLVMBuildPtrToInt(g->b, p, g->i64, "");
}

static LLVMValueRef address(struct cg *g, struct access *x, LLVMValueRef off) { return elem_address(g, x->t->ptr, x->dt, off); }

/* The bits of one element as an integer of its memory width. */
static LLVMValueRef to_bits(struct cg *g, LLVMValueRef v, ir_dtype dt) {
  if (dt == DT_BOOL) return LLVMBuildZExt(g->b, v, g->i16, "");
  if (ir_dtype_is_float(dt) && dt != DT_F8E4M3 && dt != DT_F8E5M2)
    return LLVMBuildBitCast(g->b, v, cg_mem_int_type(g, dt), "");
  if (ir_dtype_bytes(dt) == 1) return LLVMBuildZExt(g->b, v, g->i16, "");
  return v;
}

static LLVMValueRef from_bits(struct cg *g, LLVMValueRef bits, ir_dtype dt) {
  if (dt == DT_BOOL) return LLVMBuildICmp(g->b, LLVMIntNE, bits, LLVMConstInt(LLVMTypeOf(bits), 0, 0), "");
  if (ir_dtype_bytes(dt) == 1) return LLVMBuildTrunc(g->b, bits, g->i8, "");
  if (ir_dtype_is_float(dt)) return LLVMBuildBitCast(g->b, bits, cg_reg_type(g, dt), "");
  return bits;
}

/* The word size of a vector access of `total` bits to elements of `bits`: 32-bit words,
 * fewer bits when the whole access is smaller, and whole elements when those are wider
 * (two i64 are one ld.v2.b64; 32-bit words would hold half an element each). */
static int word_bits(int bits, int total) { return bits > 32 ? bits : total >= 32 ? 32 : total; }

/* PTX register class and constraint letter for an integer of `bits` (bytes are held in
 * 16-bit registers). */
static const char *cons_of(int bits) { return bits <= 16 ? "h" : bits == 32 ? "r" : "l"; }

/* Whether predicate pred (i1) is the constant true: the access needs no predicate. */
static bool always(LLVMValueRef pred) { return LLVMIsAConstantInt(pred) && LLVMConstIntGetZExtValue(pred) != 0; }

/* One element of dt at addr where pred (i1) holds, else the fill (its bits). */
static LLVMValueRef load_elem(struct cg *g, ir_dtype dt, LLVMValueRef addr, LLVMValueRef pred, LLVMValueRef fill_bits) {
  int bits = ir_dtype_bytes(dt) * 8, rbits = bits < 16 ? 16 : bits;
  char text[256], cons[32];
  LLVMTypeRef rt0 = LLVMIntTypeInContext(g->ctx, (unsigned)rbits);
  if (always(pred)) {
    snprintf(text, sizeof text, "ld.global.%s%d $0, [$1];", bits == 8 ? "u" : "b", bits);
    snprintf(cons, sizeof cons, "=%s,l", cons_of(rbits));
    return from_bits(g, cg_asm(g, rt0, text, cons, &addr, 1, true), dt);
  }
  snprintf(text, sizeof text,
           "{\n .reg .pred p;\n setp.ne.b32 p, $2, 0;\n mov.b%d $0, $3;\n @p ld.global.%s%d $0, [$1];\n}", rbits,
           bits == 8 ? "u" : "b", bits);
  snprintf(cons, sizeof cons, "=%s,l,r,%s", cons_of(rbits), cons_of(rbits));
  LLVMTypeRef rt = LLVMIntTypeInContext(g->ctx, (unsigned)rbits);
  LLVMValueRef fb = LLVMTypeOf(fill_bits) == rt ? fill_bits : LLVMBuildZExt(g->b, fill_bits, rt, "");
  LLVMValueRef args[3] = {addr, LLVMBuildZExt(g->b, pred, g->i32, ""), fb};
  return from_bits(g, cg_asm(g, rt, text, cons, args, 3, true), dt);
}

/* Stores one element (a register of dt) at addr where pred (i1) holds. */
static void store_elem(struct cg *g, ir_dtype dt, LLVMValueRef addr, LLVMValueRef v, LLVMValueRef pred) {
  int bits = ir_dtype_bytes(dt) * 8, rbits = bits < 16 ? 16 : bits;
  char text[256], cons[32];
  if (LLVMIsAConstantInt(pred) && !LLVMConstIntGetZExtValue(pred)) return; /* never */
  snprintf(text, sizeof text,
           always(pred) ? "st.global.%s%d [$0], $1;"
                        : "{\n .reg .pred p;\n setp.ne.b32 p, $2, 0;\n @p st.global.%s%d [$0], $1;\n}",
           bits == 8 ? "u" : "b", bits);
  snprintf(cons, sizeof cons, "l,%s,r", cons_of(rbits));
  LLVMTypeRef rt = LLVMIntTypeInContext(g->ctx, (unsigned)rbits);
  LLVMValueRef b = to_bits(g, v, dt);
  if (LLVMTypeOf(b) != rt) b = LLVMBuildZExt(g->b, b, rt, "");
  LLVMValueRef args[3] = {addr, b, LLVMBuildZExt(g->b, pred, g->i32, "")};
  cg_asm(g, LLVMVoidTypeInContext(g->ctx), text, cons, args, 3, true);
}

/* The words of `wbits` that hold a vector of v elements of dt (their count). */
static int vec_words(ir_dtype dt, int v, int *wbits) {
  int bits = ir_dtype_bytes(dt) * 8;
  *wbits = word_bits(bits, v * bits);
  return v * bits / *wbits;
}

/* The elements of w words of a vector of dt (`v` elements in all) into out[0..v-1]. */
static void split_words(struct cg *g, ir_dtype dt, int v, const LLVMValueRef *words, LLVMValueRef *out) {
  int bits = ir_dtype_bytes(dt) * 8;
  int wbits, w = vec_words(dt, v, &wbits), per_word = wbits / bits;
  LLVMTypeRef wt = LLVMIntTypeInContext(g->ctx, (unsigned)wbits);
  for (int i = 0; i < w; i++)
    for (int e = 0; e < per_word; e++) {
      LLVMValueRef eb_bits = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, words[i], LLVMConstInt(wt, (unsigned)(e * bits), 0), ""),
                                            LLVMIntTypeInContext(g->ctx, (unsigned)bits), "");
      out[i * per_word + e] = from_bits(g, eb_bits, dt);
    }
}

/* Elements in[0..v-1] of dt packed into the words split_words takes apart (words[]). */
static void pack_words(struct cg *g, ir_dtype dt, int v, const LLVMValueRef *in, LLVMValueRef *words) {
  int bits = ir_dtype_bytes(dt) * 8;
  int wbits, w = vec_words(dt, v, &wbits), per_word = wbits / bits;
  LLVMTypeRef wt = LLVMIntTypeInContext(g->ctx, (unsigned)wbits), et = LLVMIntTypeInContext(g->ctx, (unsigned)bits);
  for (int i = 0; i < w; i++) {
    LLVMValueRef word = LLVMConstInt(wt, 0, 0);
    for (int e = 0; e < per_word; e++) {
      LLVMValueRef b = to_bits(g, in[i * per_word + e], dt);
      if (LLVMTypeOf(b) != et) b = LLVMBuildTrunc(g->b, b, et, ""); /* (bytes travel in i16) */
      if (wt != et) b = LLVMBuildShl(g->b, LLVMBuildZExt(g->b, b, wt, ""), LLVMConstInt(wt, (unsigned)(e * bits), 0), "");
      word = e ? LLVMBuildOr(g->b, word, b, "") : b;
    }
    words[i] = word;
  }
}

/* v consecutive elements of dt at addr as one predicated access (fill where pred is
 * false): w words of `wbits` into words[0..w-1], as the instruction returns them. */
static void load_vec_words(struct cg *g, ir_dtype dt, int v, LLVMValueRef addr, LLVMValueRef pred,
                           LLVMValueRef fill_bits, LLVMValueRef *words) {
  int bits = ir_dtype_bytes(dt) * 8;
  int wbits, w = vec_words(dt, v, &wbits), per_word = wbits / bits;
  LLVMTypeRef wt = LLVMIntTypeInContext(g->ctx, (unsigned)wbits);
  LLVMValueRef fw = LLVMConstInt(wt, 0, 0);
  for (int e = 0; e < per_word; e++)
    fw = LLVMBuildOr(g->b, fw, LLVMBuildShl(g->b, LLVMBuildZExt(g->b, fill_bits, wt, ""), LLVMConstInt(wt, (unsigned)(e * bits), 0), ""), "");
  char text[512], cons[128], dst[64];
  const char *cw = cons_of(wbits);
  int n = 0;
  for (int i = 0; i < w; i++) n += snprintf(dst + n, sizeof dst - (size_t)n, "%s$%d", i ? ", " : "", i);
  bool pl = !always(pred); /* predicated, with the fill where it is off */
  n = pl ? snprintf(text, sizeof text, "{\n .reg .pred p;\n setp.ne.b32 p, $%d, 0;\n", w + 1) : 0;
  for (int i = 0; i < w && pl; i++) n += snprintf(text + n, sizeof text - (size_t)n, " mov.b%d $%d, $%d;\n", wbits, i, w + 2);
  snprintf(text + n, sizeof text - (size_t)n, "%sld.global%s.b%d %s%s%s, [$%d];%s", pl ? " @p " : "",
           w == 1 ? "" : w == 2 ? ".v2" : ".v4", wbits, w > 1 ? "{" : "", dst, w > 1 ? "}" : "", w, pl ? "\n}" : "");
  n = 0;
  for (int i = 0; i < w; i++) n += snprintf(cons + n, sizeof cons - (size_t)n, "=%s,", cw);
  snprintf(cons + n, sizeof cons - (size_t)n, "l,r,%s", cw);
  LLVMTypeRef rt = wt;
  if (w > 1) {
    LLVMTypeRef ts[4] = {wt, wt, wt, wt};
    rt = LLVMStructTypeInContext(g->ctx, ts, (unsigned)w, 0);
  }
  LLVMValueRef args[3] = {addr, LLVMBuildZExt(g->b, pred, g->i32, ""), fw};
  LLVMValueRef res = cg_asm(g, rt, text, cons, args, 3, true);
  for (int i = 0; i < w; i++) words[i] = w > 1 ? LLVMBuildExtractValue(g->b, res, (unsigned)i, "") : res;
}

/* The same access's elements into out[0..v-1]. */
static void load_vec(struct cg *g, ir_dtype dt, int v, LLVMValueRef addr, LLVMValueRef pred, LLVMValueRef fill_bits,
                     LLVMValueRef *out) {
  LLVMValueRef words[8];
  load_vec_words(g, dt, v, addr, pred, fill_bits, words);
  split_words(g, dt, v, words, out);
}

/* ---- shifted loads (probe=2, IR.md) ----
 * A slice whose first element lies off its 16-byte boundary by an amount only known at run
 * time, the same for every thread (a norm's weights W[c : +BN] in a loop row-align started
 * at the row's boundary, c = k * BN - p): each thread's run of v elements (vb = v * eb
 * bytes) is read as the two vb-aligned blocks it straddles, `ld.v4` at A - s and A - s + vb
 * with s = A mod vb (the second only when s > 0), and its words are funnelled out of the
 * eight: word j is bytes s + 4j .. s + 4j + 3 of the pair, a select by s / 4 and a funnel
 * shift by 8 (s mod 4) bits (one prmt.b32.f4e). The blocks must lie inside the slice's row: a thread whose
 * blocks reach in front of it or past its end (the row's first and last runs) moves its
 * elements one at a time, as at an edge (the paths joined as words). The funnel waits until
 * the load's first use (cg_funnel_before); a loop that carries such a load (prefetch=D) carries
 * its blocks and offsets instead of its elements (struct raw_runs, cg_gen_for), so that the
 * load issued for a later iteration is funnelled there, not at the yield. */

/* The coordinate (i64) of register r's element along the tensor's dimension D (the tile's
 * last). */
static LLVMValueRef last_coord(struct cg *g, struct access *x, uint32_t r, int *D) {
  LLVMValueRef c[IR_MAX_RANK];
  cg_coords(g, &x->l, r, c);
  for (int d = 0; d < x->rank; d++)
    if (x->tdim[d] == x->tile_rank - 1) *D = d;
  return LLVMBuildAdd(g->b, x->start[*D], LLVMBuildZExt(g->b, c[x->tile_rank - 1], g->i64, ""), "");
}

/* Starts `if (each of this thread's runs and the blocks around it inside) {shifted
 * vectors} else {elements}`: the builder is left in the vector block; returns the element
 * block and sets *join. */
static LLVMBasicBlockRef shifted_branch(struct cg *g, struct access *x, LLVMBasicBlockRef *join) {
  int eb = ir_dtype_bytes(x->dt), vb = x->vec * eb;
  LLVMValueRef whole = LLVMConstInt(g->i1, 1, 0), zero = cg_i64(g, 0);
  for (uint32_t r0 = 0; r0 < x->nregs; r0 += (uint32_t)x->vec) {
    LLVMValueRef off, first, last;
    element_address(g, x, r0 + (uint32_t)x->vec - 1, &off, &last);
    element_address(g, x, r0, &off, &first);
    int D = 0;
    LLVMValueRef c = last_coord(g, x, r0, &D);
    LLVMValueRef s = LLVMBuildAnd(g->b, address(g, x, off), cg_i64(g, vb - 1), "");
    LLVMValueRef q = LLVMBuildUDiv(g->b, s, cg_i64(g, eb), ""); /* elements in front of the run in its block */
    LLVMValueRef lo = LLVMBuildSub(g->b, c, q, "");
    LLVMValueRef front = LLVMBuildICmp(g->b, LLVMIntSGE, lo, zero, "");
    LLVMValueRef end = LLVMBuildAdd(g->b, lo, cg_i64(g, 2 * x->vec), "");
    LLVMValueRef back = LLVMBuildOr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, s, zero, ""),
                                    LLVMBuildICmp(g->b, LLVMIntSLE, end, x->size[D], ""), "");
    whole = LLVMBuildAnd(g->b, whole, LLVMBuildAnd(g->b, LLVMBuildAnd(g->b, first, last, ""),
                                                   LLVMBuildAnd(g->b, front, back, ""), ""), "");
  }
  return whole_branch(g, whole, "mem.shifted", join);
}

/* The two blocks around the run at addr (i64; both inside, shifted_branch) as 2 wn words
 * into w[], and the run's byte offset in the first (i32) into *s32. */
static void load_shifted(struct cg *g, struct access *x, LLVMValueRef addr, LLVMValueRef *w, LLVMValueRef *s32) {
  int eb = ir_dtype_bytes(x->dt), vb = x->vec * eb, wn = vb / 4;
  LLVMValueRef s = LLVMBuildAnd(g->b, addr, cg_i64(g, vb - 1), "");
  LLVMValueRef a0 = LLVMBuildSub(g->b, addr, s, "");
  LLVMValueRef a1 = LLVMBuildAdd(g->b, a0, cg_i64(g, vb), "");
  LLVMValueRef zero_bits = LLVMConstInt(cg_mem_int_type(g, x->dt), 0, 0);
  LLVMValueRef s0 = LLVMBuildICmp(g->b, LLVMIntNE, s, cg_i64(g, 0), "");
  /* v elements of eb bytes are wn 32-bit words (word_bits) */
  load_vec_words(g, x->dt, x->vec, a0, LLVMConstInt(g->i1, 1, 0), zero_bits, w);
  load_vec_words(g, x->dt, x->vec, a1, s0, zero_bits, w + wn);
  *s32 = LLVMBuildTrunc(g->b, s, g->i32, "");
}

/* probe=3: the wn + 1 words from the one holding the run's first byte into u[], and the
 * run's byte offset in its first block into *s32. The word offset s / 4 is the same in
 * every thread (a uniform switch): each case reads the words it needs of the first block
 * and of the second (only when s > 0), one 4-byte load each, so a run takes wn + 1
 * registers where load_shifted's two blocks take 2 wn, and its funnel is a byte shift of
 * neighbouring words without selects. */
static void load_exact(struct cg *g, struct access *x, LLVMValueRef addr, LLVMValueRef *u, LLVMValueRef *s32) {
  int eb = ir_dtype_bytes(x->dt), vb = x->vec * eb, wn = vb / 4;
  LLVMValueRef s = LLVMBuildAnd(g->b, addr, cg_i64(g, vb - 1), "");
  LLVMValueRef a0 = LLVMBuildSub(g->b, addr, s, "");
  LLVMValueRef s0 = LLVMBuildICmp(g->b, LLVMIntNE, s, cg_i64(g, 0), "");
  LLVMValueRef ws = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, s, cg_i64(g, 2), ""), g->i32, "");
  LLVMValueRef zero = LLVMConstInt(g->i32, 0, 0), on = LLVMConstInt(g->i1, 1, 0);
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.exact.end"), ends[4];
  LLVMBasicBlockRef cases[4] = {NULL, NULL, NULL, NULL};
  for (int k = 0; k < wn; k++) cases[k] = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mem.exact");
  LLVMValueRef sw = LLVMBuildSwitch(g->b, ws, cases[0], (unsigned)wn - 1);
  for (int k = 1; k < wn; k++) LLVMAddCase(sw, cg_i32(g, k), cases[k]);
  LLVMValueRef got[4][5];
  for (int k = 0; k < wn; k++) {
    LLVMPositionBuilderAtEnd(g->b, cases[k]);
    /* words k .. wn - 1 of the first block, then 0 .. k of the second */
    int n = 0;
    for (int blk = 0; blk < 2; blk++) {
      int o = blk ? 0 : k, end = blk ? k + 1 : wn;
      for (; o < end; o++, n++) { /* (a word at a time: a vector's registers would have to be
                                     * consecutive, and the cases' words land in different
                                     * ones, so ptxas would copy them at the join, waiting) */
        LLVMValueRef at = LLVMBuildAdd(g->b, a0, cg_i64(g, blk * vb + 4 * o), "");
        load_vec_words(g, DT_I32, 1, at, blk ? s0 : on, zero, got[k] + n);
      }
    }
    ends[k] = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, join);
  }
  LLVMPositionBuilderAtEnd(g->b, join);
  for (int j = 0; j <= wn; j++) {
    u[j] = LLVMBuildPhi(g->b, g->i32, "");
    LLVMValueRef vals[4];
    for (int k = 0; k < wn; k++) vals[k] = got[k][j];
    LLVMAddIncoming(u[j], vals, ends, (unsigned)wn);
  }
  *s32 = LLVMBuildTrunc(g->b, s, g->i32, "");
}

/* load_exact's wn + 1 words u[] as the run's wn words: each a byte shift (s32 mod 4) of a
 * word and the next. */
static void funnel_exact(struct cg *g, int wn, const LLVMValueRef *u, LLVMValueRef s32, LLVMValueRef *words) {
  LLVMValueRef bs = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, s32, cg_i32(g, 3), ""), cg_i32(g, 3), "");
  for (int j = 0; j < wn; j++) {
    LLVMValueRef a[3] = {u[j + 1], u[j], bs};
    words[j] = cg_intrinsic(g, "llvm.fshr", &g->i32, 1, a, 3);
  }
}

/* The run's wn words out of the 2 wn of its blocks (w[]), s32 bytes into the first: after
 * the join, just before the load's first use (cg_funnel_before), not where it is loaded,
 * where the thread would wait for it before issuing the next load's branch. */
static void funnel_words(struct cg *g, int wn, const LLVMValueRef *w, LLVMValueRef s32, LLVMValueRef *words) {
  LLVMValueRef ws = LLVMBuildLShr(g->b, s32, cg_i32(g, 2), "");
  LLVMValueRef bs = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, s32, cg_i32(g, 3), ""), cg_i32(g, 3), "");
  /* u[k] = w[k + ws] for k = 0 .. wn, one select per bit of ws */
  LLVMValueRef u[8];
  int n = 2 * wn;
  memcpy(u, w, sizeof *u * (size_t)n);
  for (int step = 1; step < wn; step *= 2) {
    LLVMValueRef bit = LLVMBuildICmp(g->b, LLVMIntNE, LLVMBuildAnd(g->b, ws, cg_i32(g, step), ""), cg_i32(g, 0), "");
    for (int k = 0; k + step < n; k++) u[k] = LLVMBuildSelect(g->b, bit, u[k + step], u[k], "");
    n -= step;
  }
  for (int j = 0; j < wn; j++) { /* bytes bs / 8 .. of u[j + 1]:u[j] (a byte shift: prmt.b32.f4e) */
    LLVMValueRef a[3] = {u[j + 1], u[j], bs};
    words[j] = cg_intrinsic(g, "llvm.fshr", &g->i32, 1, a, 3);
  }
}

/* x's registers into outr[0..nregs). */
static void load_regs(struct cg *g, struct access *xp, LLVMValueRef fill_bits, LLVMValueRef *outr);

/* The shifted runs loaded so far, funnelled out of their blocks (their registers set). */
static void flush_funnels(struct cg *g) {
  for (uint32_t i = 0; i < g->funnels.n; i++) {
    const struct pending_funnel *pf = &g->funnels.v[i];
    int wbits, wn = vec_words(pf->dt, pf->vec, &wbits);
    LLVMValueRef fw[8];
    if (pf->exact) funnel_exact(g, wn, pf->words, pf->s32, fw);
    else funnel_words(g, wn, pf->words, pf->s32, fw);
    split_words(g, pf->dt, pf->vec, fw, pf->out);
  }
  g->funnels.n = 0;
}

void cg_gen_load(struct cg *g, const struct ir_op *op) {
  struct access x;
  if (!setup_access(g, op, op->res, NULL, &x)) return;
  struct cgval *out = cg_new_val(g, op->res, x.nregs);
  LLVMValueRef fill = cg_cast(g, cg_const(g, DT_F64, 0, op->f), DT_F64, x.dt);
  if (!ir_dtype_is_float(x.dt)) fill = cg_const(g, x.dt, (int64_t)op->f, 0);
  static_inside(g, &x);
  load_regs(g, &x, to_bits(g, fill, x.dt), out->r);
}

/* Whether op id, or an op in its regions, uses a pending funnel's value. */
static bool uses_pending(struct cg *g, uint32_t id, int depth) {
  if (depth > 8) return true; /* (deeper than regions nest in practice: flush) */
  const struct ir_op *op = &g->f->ops.v[id];
  for (uint32_t k = 0; k < op->nargs; k++)
    for (uint32_t i = 0; i < g->funnels.n; i++)
      if (g->funnels.v[i].val == op->args[k]) return true;
  for (uint32_t r = 0; r < op->nregions; r++) {
    const struct ir_block *b = &g->f->blocks.v[op->region + r];
    for (uint32_t i = 0; i < b->ops.n; i++)
      if (uses_pending(g, b->ops.v[i], depth + 1)) return true;
  }
  return false;
}

const struct raw_runs *cg_raw_runs(struct cg *g, ir_val v) {
  for (uint32_t i = 0; i < g->raws.n; i++)
    if (g->raws.v[i].val == v) return &g->raws.v[i];
  return NULL;
}

void cg_raw_pending(struct cg *g, const struct raw_runs *rr, ir_val v, uint32_t blk, LLVMValueRef *out) {
  struct raw_runs r = *rr;
  r.val = v;
  VEC_PUSH(g->arena, g->raws, r);
  for (uint32_t i = 0; i < r.n; i++) {
    struct pending_funnel pf = {v, blk, r.dt, r.vec, r.words + i * (uint32_t)r.per, r.s32[i], r.exact, out + i * (uint32_t)r.vec};
    VEC_PUSH(g->arena, g->funnels, pf);
  }
}

void cg_raw_pack(struct cg *g, const struct raw_runs *shape, const LLVMValueRef *regs, LLVMValueRef *words,
                 LLVMValueRef *s32) {
  uint32_t wn = (uint32_t)shape->wn, per = (uint32_t)shape->per;
  for (uint32_t i = 0; i < shape->n; i++) {
    pack_words(g, shape->dt, shape->vec, regs + i * (uint32_t)shape->vec, words + i * per);
    for (uint32_t j = wn; j < per; j++) words[i * per + j] = cg_i32(g, 0);
    s32[i] = cg_i32(g, 0);
  }
}

void cg_funnel_before(struct cg *g, uint32_t id) {
  /* (every pending run is of one block: each block's ops flush them by its yield) */
  if (g->funnels.n == 0 || g->f->ops.v[id].block != g->funnels.v[0].blk) return;
  uint16_t c = g->f->ops.v[id].code;
  /* (a yield or a loop carries registers; other region ops, a row-cache read's `if`, are
   * generated with the funnels still pending when they do not use them) */
  if (c == IR_YIELD || c == IR_FOR || c == IR_WARP_SPECIALIZE || uses_pending(g, id, 0)) flush_funnels(g);
}

static void load_regs(struct cg *g, struct access *xp, LLVMValueRef fill_bits, LLVMValueRef *outr) {
  struct access x = *xp;
  if (x.inside) x.straddle = false; /* a tile inside has no vector across the edge */
  if (x.vec > 1 && (x.probe || x.straddle || x.shifted)) {
    /* vectors where the run-time test holds (the tile on 16 bytes, then this thread's
     * vectors whole; for a shifted access, this thread's blocks inside), elements
     * elsewhere; the two joined */
    LLVMBasicBlockRef join, ends[2];
    LLVMBasicBlockRef elem = x.shifted ? shifted_branch(g, &x, &join)
                             : x.probe ? probe_branch(g, &x, &join)
                                       : straddle_branch(g, &x, &join);
    if (x.shifted) x.straddle = false; /* (the test covered the edge) */
    else if (x.probe) x.probe = false;
    else x.straddle = false;
    /* (a test left for the vector path, probe then straddle: it joins its own paths, so
     * this join takes elements) */
    bool words = !x.probe && !x.straddle, shifted = x.shifted;
    int vec = x.vec, wbits;
    uint32_t wn = (uint32_t)vec_words(x.dt, vec, &wbits), nvec = x.nregs / (uint32_t)vec;
    /* words joined per run (a shifted run's two blocks, or load_exact's wn + 1) */
    uint32_t per = shifted ? (x.exact ? wn + 1 : 2 * wn) : wn;
    LLVMValueRef *shift = shifted ? ARENA_NEWN(g->arena, LLVMValueRef, 2 * nvec) : NULL; /* s32 per run and path */
    LLVMValueRef *vregs = ARENA_NEWN(g->arena, LLVMValueRef, shifted ? nvec * per : x.nregs);
    LLVMValueRef *sregs = ARENA_NEWN(g->arena, LLVMValueRef, x.nregs);
    if (words) { /* the vectors' words as loaded (their elements are split off after the join) */
      for (uint32_t i = 0; i < nvec; i++) {
        LLVMValueRef off, inb;
        element_address(g, &x, i * (uint32_t)vec, &off, &inb);
        if (shifted && x.exact) load_exact(g, &x, address(g, &x, off), vregs + i * per, &shift[i]);
        else if (shifted) load_shifted(g, &x, address(g, &x, off), vregs + i * per, &shift[i]);
        else load_vec_words(g, x.dt, vec, address(g, &x, off), inb, fill_bits, vregs + i * per);
      }
    } else {
      load_regs(g, &x, fill_bits, vregs);
    }
    ends[0] = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, elem);
    x.vec = 1;
    x.shifted = false;
    load_regs(g, &x, fill_bits, sregs);
    /* joined as words: were the elements joined, each vector's elements would be split off
     * its words before the join, where the thread then waits for the load (and a load
     * issued an iteration ahead, the prefetch, would wait at once: PERF.md 113) */
    LLVMValueRef *swords = sregs;
    if (words) { /* (a shifted run's: its words, then zeros as the second block, at offset 0) */
      swords = ARENA_NEWN(g->arena, LLVMValueRef, nvec * per);
      for (uint32_t i = 0; i < nvec; i++) {
        pack_words(g, x.dt, vec, sregs + i * (uint32_t)vec, swords + i * per);
        for (uint32_t j = wn; j < per; j++) swords[i * per + j] = cg_i32(g, 0);
        if (shifted) shift[nvec + i] = cg_i32(g, 0);
      }
    }
    ends[1] = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    uint32_t nphi = words ? nvec * per : x.nregs;
    LLVMValueRef *joined = words ? ARENA_NEWN(g->arena, LLVMValueRef, nphi) : outr;
    for (uint32_t r = 0; r < nphi; r++) {
      joined[r] = LLVMBuildPhi(g->b, LLVMTypeOf(vregs[r]), "");
      LLVMValueRef vals[2] = {vregs[r], swords[r]};
      LLVMAddIncoming(joined[r], vals, ends, 2);
    }
    if (shifted && words) { /* funnelled where the load is first used (cg_funnel_before) */
      struct raw_runs rr = {x.op->res, x.dt, vec, (int)wn, (int)per, x.exact, nvec, joined, ARENA_NEWN(g->arena, LLVMValueRef, nvec)};
      for (uint32_t i = 0; i < nvec; i++) {
        LLVMValueRef vals[2] = {shift[i], shift[nvec + i]};
        rr.s32[i] = LLVMBuildPhi(g->b, g->i32, "");
        LLVMAddIncoming(rr.s32[i], vals, ends, 2);
      }
      cg_raw_pending(g, &rr, x.op->res, x.op->block, outr);
      return;
    }
    for (uint32_t i = 0; words && i < nvec; i++) split_words(g, x.dt, vec, joined + i * per, outr + i * (uint32_t)vec);
    return;
  }
  if (x.vec > 1) {
    for (uint32_t r0 = 0; r0 < x.nregs; r0 += (uint32_t)x.vec) {
      LLVMValueRef off, inb;
      element_address(g, &x, r0, &off, &inb);
      load_vec(g, x.dt, x.vec, address(g, &x, off), inb, fill_bits, outr + r0);
    }
    return;
  }
  for (uint32_t r = 0; r < x.nregs; r++) {
    LLVMValueRef off, inb;
    element_address(g, &x, r, &off, &inb);
    outr[r] = load_elem(g, x.dt, address(g, &x, off), inb, fill_bits);
  }
}

/* Stores registers r[] (x's layout order) with x's accesses, where pred[r] (i1 registers
 * in the same order; NULL: everywhere) holds. A vector whose predicates all hold is one
 * access; the elements of one where they differ are stored one at a time. */
/* Two f16 or bf16 elements just rounded from f32 (lo in the low half) as one i32, rounded
 * together (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32, the same rounding: one instruction where
 * two conversions and the packing took six); NULL when they are not such a pair. */
static LLVMValueRef rounded_pair(struct cg *g, ir_dtype dt, LLVMValueRef lo, LLVMValueRef hi) {
  if (!hi || (dt != DT_F16 && dt != DT_BF16) || !cg_rounded_pair(g, lo, hi)) return NULL;
  LLVMValueRef p = cg_pack_pair(g, lo, hi, dt == DT_BF16);
  return LLVMTypeOf(p) == g->i32 ? p : LLVMBuildBitCast(g->b, p, g->i32, "");
}

static void store_regs(struct cg *g, struct access *xp, LLVMValueRef *regs, LLVMValueRef *pred) {
  struct access x = *xp;
  int eb = ir_dtype_bytes(x.dt), bits = eb * 8;
  if (x.inside) x.straddle = false;
  if (x.vec > 1 && (x.probe || x.straddle)) {
    /* vectors where the run-time test holds (the tile on 16 bytes, then this thread's
     * vectors whole), elements elsewhere */
    LLVMBasicBlockRef join, elem = x.probe ? probe_branch(g, &x, &join) : straddle_branch(g, &x, &join);
    if (x.probe) x.probe = false;
    else x.straddle = false;
    store_regs(g, &x, regs, pred);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, elem);
    x.vec = 1;
    store_regs(g, &x, regs, pred);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    return;
  }
  if (x.vec > 1) {
    int total = x.vec * bits, wbits = word_bits(bits, total), w = total / wbits;
    int per_word = wbits / bits;
    LLVMTypeRef wt = LLVMIntTypeInContext(g->ctx, (unsigned)wbits);
    /* text[0]: predicated; text[1]: for vectors known to be in bounds (x.inside, no mask) */
    char text[2][512], cons[128];
    for (int t = 0; t < 2; t++) {
      int n = snprintf(text[t], sizeof text[t], t ? "st.global%s.b%d [$0], " : "{\n .reg .pred p;\n setp.ne.b32 p, $1, 0;\n @p st.global%s.b%d [$0], ",
                       w > 1 ? (w == 2 ? ".v2" : ".v4") : "", wbits);
      if (w > 1) n += snprintf(text[t] + n, sizeof text[t] - (size_t)n, "{");
      for (int i = 0; i < w; i++) n += snprintf(text[t] + n, sizeof text[t] - (size_t)n, "%s$%d", i ? ", " : "", i + 2);
      snprintf(text[t] + n, sizeof text[t] - (size_t)n, "%s;%s", w > 1 ? "}" : "", t ? "" : "\n}");
    }
    int n;
    n = snprintf(cons, sizeof cons, "l,r");
    for (int i = 0; i < w; i++) n += snprintf(cons + n, sizeof cons - (size_t)n, ",%s", cons_of(wbits));
    for (uint32_t r0 = 0; r0 < x.nregs; r0 += (uint32_t)x.vec) {
      LLVMValueRef off, inb, all = NULL;
      element_address(g, &x, r0, &off, &inb);
      if (pred) {
        all = pred[r0];
        for (int i = 1; i < x.vec; i++) all = LLVMBuildAnd(g->b, all, pred[r0 + (uint32_t)i], "");
        LLVMValueRef some = LLVMBuildAnd(g->b, inb, LLVMBuildNot(g->b, all, ""), "");
        for (int i = 0; i < x.vec; i++) {
          LLVMValueRef eoff = LLVMBuildAdd(g->b, off, cg_i64(g, i), ""); /* the run is contiguous */
          store_elem(g, x.dt, address(g, &x, eoff), regs[r0 + (uint32_t)i],
                     LLVMBuildAnd(g->b, some, pred[r0 + (uint32_t)i], ""));
        }
        inb = LLVMBuildAnd(g->b, inb, all, "");
      }
      LLVMValueRef args[6];
      args[0] = address(g, &x, off);
      args[1] = LLVMBuildZExt(g->b, inb, g->i32, "");
      for (int i = 0; i < w; i++) {
        LLVMValueRef word = LLVMConstInt(wt, 0, 0);
        for (int e = 0; e < per_word; e++) {
          LLVMValueRef lo = regs[r0 + (uint32_t)(i * per_word + e)], b;
          if ((b = rounded_pair(g, x.dt, lo, e + 1 < per_word ? regs[r0 + (uint32_t)(i * per_word + e + 1)] : NULL))) {
            word = LLVMBuildOr(g->b, word, LLVMBuildShl(g->b, LLVMBuildZExt(g->b, b, wt, ""), LLVMConstInt(wt, (unsigned)(e * bits), 0), ""), "");
            e++;
            continue;
          }
          b = to_bits(g, lo, x.dt);
          word = LLVMBuildOr(g->b, word, LLVMBuildShl(g->b, LLVMBuildZExt(g->b, b, wt, ""), LLVMConstInt(wt, (unsigned)(e * bits), 0), ""), "");
        }
        args[2 + i] = word;
      }
      cg_asm(g, LLVMVoidTypeInContext(g->ctx), text[always(inb)], cons, args, (unsigned)(2 + w), true);
    }
    return;
  }
  for (uint32_t r = 0; r < x.nregs; r++) {
    LLVMValueRef off, inb;
    element_address(g, &x, r, &off, &inb);
    if (pred) inb = LLVMBuildAnd(g->b, inb, pred[r], "");
    store_elem(g, x.dt, address(g, &x, off), regs[r], inb);
  }
}

/* A 2-d tile in an mma accumulator layout is stored through shared memory when the blocked
 * layout reached that way stores more elements per access, or the same one element per
 * access coalesced (a warp's 32 elements consecutive, where the accumulator layout's are
 * spread over 8 rows): the registers go to a scratch tile whose rows are padded by 16
 * bytes (the accumulator's 8 rows x 4 lanes then fall in 32 different banks), and come back
 * in the blocked layout, 16 bytes per thread per row segment. Only at the top level (the
 * barriers need every thread) and when the scratch fits the target's shared memory above
 * the buffers still live at the store (after a GEMM's main loop none are: the scratch
 * reuses the pipeline's buffers, cg_scratch_at). */
/* The access of store op to `value` in the default blocked layout for elem_bytes-sized
 * vectors (16: one element per thread). */
static bool blocked_access(struct cg *g, const struct ir_op *op, ir_val value, int elem_bytes, struct access *x) {
  const struct ir_type *vt = ir_vtype(g->f, value);
  struct ir_layout e = ll_default_blocked(vt->rank, vt->dims, g->f->warps, elem_bytes);
  struct ll l;
  if (!ll_build(g->f, ir_layout_intern(g->f, &e), vt->rank, vt->dims, g->f->warps, &l) ||
      !setup_access(g, op, value, &l, x))
    return false;
  static_inside(g, x);
  return true;
}

/* Pointer to element c of the staging tile (rows `pitch` elements apart). */
static LLVMValueRef staged_at(struct cg *g, const LLVMValueRef *c, int32_t pitch, int eb) {
  LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, c[0], cg_i32(g, pitch), ""), c[1], "");
  return cg_smem_ptr(g, LLVMBuildMul(g->b, idx, cg_i32(g, eb), ""));
}

/* Pointer to register r's element of layout l in the staging tile whose register 0 (the
 * thread's element) is at `base`: the register part of a coordinate adds to the thread part
 * (layout.h), so each access is the thread's pointer plus a constant, which the access
 * folds ([R + imm]); formed from each register's coordinates, every register kept an
 * address of its own, live across the loops the store follows. */
static LLVMValueRef staged_reg(struct cg *g, const struct ll *l, uint32_t r, LLVMValueRef base, int32_t pitch, int eb) {
  int32_t rc[IR_MAX_RANK];
  ll_reg_coord(l, r, rc);
  LLVMValueRef k = cg_i32(g, (rc[0] * pitch + rc[1]) * eb);
  return LLVMBuildGEP2(g->b, g->i8, base, &k, 1, "");
}

static LLVMValueRef staged_base(struct cg *g, const struct ll *l, int32_t pitch, int eb) {
  LLVMValueRef c[IR_MAX_RANK];
  cg_coords(g, l, 0, c);
  return staged_at(g, c, pitch, eb);
}

/* pred (0: none) is the store's predicate, in the value's layout: it goes through shared
 * memory too, one byte per element after the values. */
static bool staged_store(struct cg *g, const struct ir_op *op, ir_val value, ir_val pred, struct access *direct) {
  struct ir_func *f = g->f;
  const struct ir_type *vt = ir_vtype(f, value);
  if (vt->rank != 2 || !vt->layout || f->layouts.v[vt->layout].kind != IR_LAYOUT_MMA) return false;
  if (!cg_uniform_block(g, op->block) || direct->dt == DT_BOOL) return false;
  int eb = ir_dtype_bytes(direct->dt);
  int32_t rows = vt->dims[0], cols = vt->dims[1], pitch = cols + 16 / eb;
  unsigned vbytes = (unsigned)(rows * pitch * eb), bytes = vbytes + (pred ? (unsigned)(rows * cols) : 0);
  if (g->smem_scratch + bytes > g->target->smem_optin) return false;
  /* the blocked layout: 16-byte vectors if the tensor allows them, else one element */
  struct access x;
  if (!blocked_access(g, op, value, eb, &x)) return false;
  if (x.vec == 1 && !blocked_access(g, op, value, 16, &x)) return false;
  bool wider = x.vec > direct->vec, coalesced = x.vec == 1 && direct->vec == 1;
  if (!wider && !coalesced) return false;
  struct cgval *v = cg_val(g, value), *pv = pred ? cg_val(g, pred) : NULL;
  if (g->failed) return false;
  cg_smem_reserve(g, bytes);
  /* registers to shared memory, runs of consecutive columns as one access */
  const struct ll *src = &direct->l;
  int run = cg_contiguous_run(src, 2, eb);
  LLVMTypeRef it = cg_mem_int_type(g, direct->dt);
  cg_barrier(g);
  LLVMValueRef sbase = staged_base(g, src, pitch, eb);
  for (uint32_t r0 = 0; r0 < direct->nregs; r0 += (uint32_t)run) {
    LLVMValueRef ptr = staged_reg(g, src, r0, sbase, pitch, eb), val;
    /* (1-byte elements are i8 registers already; to_bits widens them for global stores) */
    if (run == 1) {
      val = eb == 1 ? v->r[r0] : to_bits(g, v->r[r0], direct->dt);
    } else {
      val = LLVMGetUndef(LLVMVectorType(it, (unsigned)run));
      for (int i = 0; i < run; i++) {
        LLVMValueRef e = v->r[r0 + (uint32_t)i];
        val = LLVMBuildInsertElement(g->b, val, eb == 1 ? e : to_bits(g, e, direct->dt), cg_i32(g, i), "");
      }
    }
    LLVMValueRef st = LLVMBuildStore(g->b, val, ptr);
    LLVMSetAlignment(st, (unsigned)(run * eb));
  }
  for (uint32_t r = 0; pv && r < direct->nregs; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, src, r, c);
    cg_smem_store_elem(g, pv->r[r], DT_BOOL, cg_linear_index(g, c, vt->dims, 2), vbytes);
  }
  cg_barrier(g);
  /* back in the blocked layout, x.vec elements per access */
  LLVMValueRef *regs = ARENA_NEWN(g->arena, LLVMValueRef, x.nregs);
  LLVMValueRef lbase = staged_base(g, &x.l, pitch, eb);
  for (uint32_t r0 = 0; r0 < x.nregs; r0 += (uint32_t)x.vec) {
    LLVMTypeRef lt = x.vec == 1 ? it : LLVMVectorType(it, (unsigned)x.vec);
    LLVMValueRef ld = LLVMBuildLoad2(g->b, lt, staged_reg(g, &x.l, r0, lbase, pitch, eb), "");
    LLVMSetAlignment(ld, (unsigned)(x.vec * eb));
    for (int i = 0; i < x.vec; i++) {
      LLVMValueRef bitsv = x.vec == 1 ? ld : LLVMBuildExtractElement(g->b, ld, cg_i32(g, i), "");
      regs[r0 + (uint32_t)i] = eb == 1 ? bitsv : from_bits(g, bitsv, direct->dt);
    }
  }
  LLVMValueRef *preds = pv ? ARENA_NEWN(g->arena, LLVMValueRef, x.nregs) : NULL;
  for (uint32_t r = 0; preds && r < x.nregs; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, &x.l, r, c);
    preds[r] = cg_smem_load_elem(g, DT_BOOL, cg_linear_index(g, c, vt->dims, 2), vbytes);
  }
  store_regs(g, &x, regs, preds);
  return true;
}

void cg_gen_store(struct cg *g, const struct ir_op *op) {
  ir_val value = op->args[op->nargs - 1];
  struct access x;
  if (!setup_access(g, op, value, NULL, &x)) return;
  static_inside(g, &x);
  /* a predicate (store %T[..], %pred, %v) is in the value's layout */
  bool has_pred = op->nargs == (uint32_t)x.rank + 3;
  if (staged_store(g, op, value, has_pred ? op->args[op->nargs - 2] : 0, &x) || g->failed) return;
  struct cgval *v = cg_val(g, value);
  struct cgval *p = has_pred ? cg_val(g, op->args[op->nargs - 2]) : NULL;
  if (g->failed) return;
  store_regs(g, &x, v->r, p ? p->r : NULL);
}

/* ---- gather, scatter, atomic: per-element indices ----
 * Every operand tile shares the data's layout, so register r of each index tile is the
 * coordinate of register r of the data. Elements a layout replicates (zero basis vectors:
 * the same element in several registers, lanes or warps) are written once, by the thread
 * and register whose replicated bits are zero; an atomic's old values are then handed to
 * the replicas through shared memory. */

struct indexed {
  const struct ir_param *param;
  struct cg_tensor *t;
  int rank;
  ir_dtype dt;
  LLVMValueRef size[IR_MAX_RANK]; /* i64 */
  struct cgval *idx[IR_MAX_RANK];
  struct ll l;
  int data_rank;
  uint32_t nregs;
};

static bool setup_indexed(struct cg *g, const struct ir_op *op, ir_val data, struct indexed *x) {
  struct ir_func *f = g->f;
  memset(x, 0, sizeof *x);
  const struct ir_value *tv = &f->values.v[op->args[0]];
  x->param = &f->params.v[tv->index];
  x->t = &g->tensors[tv->index];
  const struct ir_type *tt = ir_vtype(f, op->args[0]);
  x->rank = tt->rank;
  x->dt = (ir_dtype)tt->dtype;
  for (int d = 0; d < x->rank; d++) {
    x->idx[d] = cg_val(g, op->args[1 + d]);
    if (g->failed) return false;
    x->size[d] = dim_size(g, tt, d);
  }
  const struct ir_type *dt = ir_vtype(f, data);
  x->data_rank = dt->rank;
  x->nregs = 1;
  if (dt->rank > 0) {
    if (!cg_layout_of(g, data, &x->l)) return false;
    x->nregs = ll_num_regs(&x->l);
  }
  return true;
}

/* Element offset (i64) and in-bounds predicate of register r. */
static void indexed_address(struct cg *g, struct indexed *x, uint32_t r, LLVMValueRef *addr, LLVMValueRef *inb) {
  LLVMValueRef o = cg_i64(g, 0), ok = LLVMConstInt(g->i1, 1, 0);
  for (int d = 0; d < x->rank; d++) {
    LLVMValueRef c = LLVMBuildSExt(g->b, x->idx[d]->r[r], g->i64, "");
    ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULT, c, x->size[d], ""), "");
    o = LLVMBuildAdd(g->b, o, LLVMBuildMul(g->b, c, x->t->stride[d], ""), "");
  }
  *addr = elem_address(g, x->t->ptr, x->dt, o);
  *inb = ok;
}

/* Masks of the replicated register, lane and warp bits of layout l (rank 0: every lane
 * and warp holds the value). */
static void replicated_bits(struct cg *g, const struct indexed *x, uint32_t *reg, uint32_t *lane, uint32_t *warp) {
  *reg = *lane = *warp = 0;
  if (x->data_rank == 0) {
    *lane = 31;
    *warp = (uint32_t)g->f->warps - 1;
    return;
  }
  const struct ll *l = &x->l;
  for (int i = 0; i < l->nreg; i++) {
    bool z = true;
    for (int d = 0; d < l->rank; d++) z = z && l->reg[i][d] == 0;
    if (z) *reg |= 1u << i;
  }
  for (int i = 0; i < l->nlane; i++) {
    bool z = true;
    for (int d = 0; d < l->rank; d++) z = z && l->lane[i][d] == 0;
    if (z) *lane |= 1u << i;
  }
  for (int i = 0; i < l->nwarp; i++) {
    bool z = true;
    for (int d = 0; d < l->rank; d++) z = z && l->warp[i][d] == 0;
    if (z) *warp |= 1u << i;
  }
}

/* i1: this thread is the one that writes its (replicated) elements */
static LLVMValueRef owner(struct cg *g, uint32_t lane_mask, uint32_t warp_mask) {
  LLVMValueRef own = LLVMConstInt(g->i1, 1, 0);
  if (lane_mask)
    own = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, g->lane, cg_i32(g, lane_mask), ""), cg_i32(g, 0), "");
  if (warp_mask)
    own = LLVMBuildAnd(g->b, own, LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, g->warp, cg_i32(g, warp_mask), ""),
                                                cg_i32(g, 0), ""), "");
  return own;
}

/* How an i32 index tile varies along one of its dimensions: not at all, by +1 per step
 * (with `div` dividing the value at every multiple of the run length), or otherwise. */
enum { ALONG_OTHER, ALONG_CONST, ALONG_UNIT };
struct along {
  int kind;
  int64_t div; /* ALONG_UNIT: the largest power of two known to divide the run starts' values */
};

static struct along along_dim(struct cg *g, ir_val v, int dim, int depth) {
  struct ir_func *f = g->f;
  struct along other = {ALONG_OTHER, 1};
  uint32_t d = ir_def_op(f, v);
  const struct ir_type *t = ir_vtype(f, v);
  if (!d || depth > 16 || t->rank == 0) return other;
  if (t->dims[dim] == 1) return (struct along){ALONG_CONST, 1};
  const struct ir_op *op = &f->ops.v[d];
  switch (op->code) {
  case IR_CONST:
  case IR_SPLAT:
    return (struct along){ALONG_CONST, 1};
  case IR_ARANGE:
    return (struct along){ALONG_UNIT, (int64_t)1 << 30}; /* runs start at multiples of their length */
  case IR_CONVERT_LAYOUT:
    return along_dim(g, op->args[0], dim, depth + 1);
  case IR_BROADCAST: {
    const struct ir_type *st = ir_vtype(f, op->args[0]);
    int sd = dim - (t->rank - st->rank);
    if (sd < 0 || st->dims[sd] == 1) return (struct along){ALONG_CONST, 1};
    return along_dim(g, op->args[0], sd, depth + 1);
  }
  case IR_EXPAND_DIMS: {
    int axis = (int)op->i[0];
    return dim == axis ? (struct along){ALONG_CONST, 1} : along_dim(g, op->args[0], dim > axis ? dim - 1 : dim, depth + 1);
  }
  case IR_ADD:
  case IR_SUB: {
    struct along a = along_dim(g, op->args[0], dim, depth + 1), b = along_dim(g, op->args[1], dim, depth + 1);
    if (a.kind == ALONG_CONST && b.kind == ALONG_CONST) return a;
    struct along u = a.kind == ALONG_UNIT ? a : b, c = a.kind == ALONG_UNIT ? b : a;
    if (u.kind != ALONG_UNIT || c.kind != ALONG_CONST || (op->code == IR_SUB && a.kind != ALONG_UNIT)) return other;
    /* the constant term's divisibility: a splat's scalar, or a uniform constant */
    ir_val cv = a.kind == ALONG_UNIT ? op->args[1] : op->args[0];
    uint32_t cd = ir_def_op(f, cv);
    int64_t div = 1;
    if (cd && f->ops.v[cd].code == IR_SPLAT) div = cg_divisibility(g, f->ops.v[cd].args[0]);
    else if (cd && f->ops.v[cd].code == IR_CONST) {
      int64_t k = f->ops.v[cd].i[0] < 0 ? -f->ops.v[cd].i[0] : f->ops.v[cd].i[0];
      div = k == 0 ? (int64_t)1 << 30 : k & -k;
    }
    u.div = u.div < div ? u.div : div;
    return u;
  }
  default:
    if ((ir_ops[op->code].flags & OPF_ELEM)) {
      for (uint32_t k = 0; k < op->nargs; k++)
        if (along_dim(g, op->args[k], dim, depth + 1).kind != ALONG_CONST) return other;
      return (struct along){ALONG_CONST, 1}; /* a function of values constant along dim */
    }
    return other;
  }
}

/* Elements per vector access of a gather: the layout gives a thread v consecutive elements
 * along the data's last dimension, the index of the tensor's contiguous dimension D grows
 * by one along it from a multiple of v, every other index is constant along it, and the
 * tensor's base, other strides and size along D allow v-element accesses (a vector then
 * lies wholly inside or outside the tensor). 1 when any of that is not known. */
static int gather_vector(struct cg *g, const struct ir_op *op, const struct indexed *x) {
  if (x->data_rank == 0 || x->dt == DT_BOOL) return 1;
  int eb = ir_dtype_bytes(x->dt), last = x->data_rank - 1;
  int v = cg_contiguous_run(&x->l, x->data_rank, eb);
  if (v == 1) return 1;
  const struct ir_type *tt = ir_vtype(g->f, op->args[0]);
  int D = -1;
  for (int d = 0; d < x->rank; d++) {
    struct along a = along_dim(g, op->args[1 + d], last, 0);
    if (a.kind == ALONG_UNIT && D < 0 && a.div % v == 0) {
      D = d;
    } else if (a.kind != ALONG_CONST) {
      return 1;
    }
  }
  if (D < 0 || !x->param->facts.stride1[D] || !ir_facts_allow_vector(x->param, tt, D, v * eb)) return 1;
  if (IR_DIM_IS_SYM(tt->dims[D])) {
    const struct ir_param *sp = ir_param_of(g->f, IR_DIM_SYM_VALUE(tt->dims[D]));
    if (!sp || !sp->div16 || 16 % v) return 1;
  } else if (tt->dims[D] % v) {
    return 1;
  }
  return v;
}

void cg_gen_gather(struct cg *g, const struct ir_op *op) {
  struct indexed x;
  if (!setup_indexed(g, op, op->res, &x)) return;
  struct cgval *out = cg_new_val(g, op->res, x.nregs);
  LLVMValueRef fill = ir_dtype_is_float(x.dt) ? cg_cast(g, cg_const(g, DT_F64, 0, op->f), DT_F64, x.dt)
                                              : cg_const(g, x.dt, (int64_t)op->f, 0);
  LLVMValueRef fill_bits = to_bits(g, fill, x.dt);
  int v = gather_vector(g, op, &x);
  if (v > 1) { /* one access per run: the run's first element decides for all */
    for (uint32_t r0 = 0; r0 < x.nregs; r0 += (uint32_t)v) {
      LLVMValueRef addr, inb;
      indexed_address(g, &x, r0, &addr, &inb);
      load_vec(g, x.dt, v, addr, inb, fill_bits, out->r + r0);
    }
    return;
  }
  for (uint32_t r = 0; r < x.nregs; r++) {
    LLVMValueRef addr, inb;
    indexed_address(g, &x, r, &addr, &inb);
    out->r[r] = load_elem(g, x.dt, addr, inb, fill_bits);
  }
}

/* The gather form of async_copy (async_copy %buf, %slot, %T, %idx... with mask 0): each
 * thread copies the elements that the index tiles' layout gives it, from the tensor at
 * those indices to dst(row, col), their place in the buffer. Where gather_vector finds runs
 * of 4, 8 or 16 bytes, each run is one cp.async (src-size 0 past the tensor's bounds: zero
 * filled, the address not read); otherwise the elements go through registers (loaded, zero
 * where out of bounds, and stored), the same bytes in shared memory. A run must also be
 * contiguous at its destination: at most max_run_bytes (the buffer's swizzle unit). */
void cg_gather_to_shared(struct cg *g, const struct ir_op *op, int max_run_bytes, cg_dst_fn dst, void *ud) {
  struct ir_op view = *op; /* as a gather: the tensor, then the index tiles */
  view.args = op->args + 2;
  view.nargs = op->nargs - 2;
  struct indexed x;
  if (!setup_indexed(g, &view, view.args[1], &x)) return;
  if (x.data_rank != 2) {
    cg_fail(g, "a gathering async_copy needs rank-2 index tiles");
    return;
  }
  int eb = ir_dtype_bytes(x.dt), v = gather_vector(g, &view, &x), bytes = v * eb;
  LLVMTypeRef gptr = LLVMTypeOf(x.t->ptr);
  if ((bytes == 4 || bytes == 8 || bytes == 16) && bytes <= max_run_bytes) {
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.cp.async.%s.shared.global.%d.s", bytes == 16 ? "cg" : "ca", bytes);
    for (uint32_t r0 = 0; r0 < x.nregs; r0 += (uint32_t)v) {
      LLVMValueRef addr, inb, c[2];
      indexed_address(g, &x, r0, &addr, &inb);
      cg_coords(g, &x.l, r0, c);
      LLVMValueRef args[3] = {dst(g, ud, c[0], c[1]), LLVMBuildIntToPtr(g->b, addr, gptr, ""),
                              LLVMBuildSelect(g->b, inb, cg_i32(g, bytes), cg_i32(g, 0), "")};
      cg_intrinsic(g, name, NULL, 0, args, 3);
    }
    return;
  }
  LLVMValueRef zero = LLVMConstInt(LLVMIntTypeInContext(g->ctx, (unsigned)(eb * 8)), 0, 0);
  for (uint32_t r = 0; r < x.nregs; r++) {
    LLVMValueRef addr, inb, c[2];
    indexed_address(g, &x, r, &addr, &inb);
    LLVMValueRef bits = to_bits(g, load_elem(g, x.dt, addr, inb, zero), x.dt);
    cg_coords(g, &x.l, r, c);
    LLVMValueRef st = LLVMBuildStore(g->b, bits, dst(g, ud, c[0], c[1]));
    LLVMSetAlignment(st, (unsigned)eb);
  }
  /* ordinary stores read by wgmma (the async proxy) need a proxy fence before the barrier */
  if (g->async_reads) cg_intrinsic(g, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
}

/* The address of register r's element and whether this thread writes it: inside the
 * tensor, the owner of a replicated element, and where the predicate p (if any) holds. */
static LLVMValueRef write_address(struct cg *g, struct indexed *x, uint32_t r, LLVMValueRef own, struct cgval *p,
                                  LLVMValueRef *addr) {
  LLVMValueRef inb;
  indexed_address(g, x, r, addr, &inb);
  inb = LLVMBuildAnd(g->b, inb, own, "");
  return p ? LLVMBuildAnd(g->b, inb, p->r[r], "") : inb;
}

void cg_gen_scatter(struct cg *g, const struct ir_op *op) {
  struct indexed x;
  if (!setup_indexed(g, op, op->args[op->nargs - 1], &x)) return;
  struct cgval *v = cg_val(g, op->args[op->nargs - 1]);
  struct cgval *p = op->nargs == (uint32_t)x.rank + 3 ? cg_val(g, op->args[op->nargs - 2]) : NULL;
  if (g->failed) return;
  uint32_t rm, lm, wm;
  replicated_bits(g, &x, &rm, &lm, &wm);
  LLVMValueRef own = owner(g, lm, wm);
  for (uint32_t r = 0; r < x.nregs; r++) {
    if (r & rm) continue;
    LLVMValueRef addr, inb = write_address(g, &x, r, own, p, &addr);
    store_elem(g, x.dt, addr, v->r[r], inb);
  }
}

static bool value_used(struct cg *g, ir_val v) {
  for (uint32_t o = 1; o < g->f->ops.n; o++) {
    const struct ir_op *op = &g->f->ops.v[o];
    if (!op->block) continue;
    for (uint32_t k = 0; k < op->nargs; k++)
      if (op->args[k] == v) return true;
  }
  return false;
}

/* One atomic on the bits `b` (i32 or i16) at addr where pred holds; returns the old bits
 * (0 where it did not run) or NULL for a reduction (red) whose result nobody reads. */
static LLVMValueRef atomic_elem(struct cg *g, const char *op_type, int bits, LLVMValueRef addr, LLVMValueRef b,
                                LLVMValueRef pred, bool want_old) {
  char text[256], cons[32];
  const char *c = cons_of(bits);
  LLVMTypeRef rt = LLVMIntTypeInContext(g->ctx, (unsigned)bits);
  LLVMValueRef args[3] = {addr, b, LLVMBuildZExt(g->b, pred, g->i32, "")};
  if (!want_old) {
    snprintf(text, sizeof text, "{\n .reg .pred p;\n setp.ne.b32 p, $2, 0;\n @p red.global.%s [$0], $1;\n}", op_type);
    snprintf(cons, sizeof cons, "l,%s,r", c);
    cg_asm(g, LLVMVoidTypeInContext(g->ctx), text, cons, args, 3, true);
    return NULL;
  }
  snprintf(text, sizeof text,
           "{\n .reg .pred p;\n setp.ne.b32 p, $3, 0;\n mov.b%d $0, 0;\n @p atom.global.%s $0, [$1], $2;\n}", bits,
           op_type);
  snprintf(cons, sizeof cons, "=%s,l,%s,r", c, c);
  return cg_asm(g, rt, text, cons, args, 3, true);
}

void cg_gen_atomic(struct cg *g, const struct ir_op *op) {
  ir_val value = op->args[op->nargs - 1];
  struct indexed x;
  if (!setup_indexed(g, op, value, &x)) return;
  struct cgval *v = cg_val(g, value);
  struct cgval *p = op->nargs == (uint32_t)x.rank + 3 ? cg_val(g, op->args[op->nargs - 2]) : NULL;
  if (g->failed) return;
  int kind = (int)op->i[0];
  bool want_old = value_used(g, op->res);
  uint32_t rm, lm, wm;
  replicated_bits(g, &x, &rm, &lm, &wm);
  LLVMValueRef own = owner(g, lm, wm);
  struct cgval *out = cg_new_val(g, op->res, x.nregs);
  int bits = ir_dtype_bytes(x.dt) * 8;
  for (uint32_t r = 0; r < x.nregs; r++) {
    if (r & rm) continue;
    LLVMValueRef addr, inb = write_address(g, &x, r, own, p, &addr);
    LLVMValueRef val = v->r[r], old = NULL;
    if (x.dt == DT_F32 && kind != 0) {
      /* float max/min as integer atomics: a non-negative float orders like its bits as a
       * signed integer, a negative one in reverse of its bits as an unsigned integer; NaN
       * values are skipped */
      LLVMValueRef nan = LLVMBuildFCmp(g->b, LLVMRealUNO, val, val, "");
      inb = LLVMBuildAnd(g->b, inb, LLVMBuildNot(g->b, nan, ""), "");
      LLVMValueRef b = LLVMBuildBitCast(g->b, val, g->i32, "");
      LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, b, cg_i32(g, 0), "");
      LLVMValueRef o1 = atomic_elem(g, kind == 1 ? "max.s32" : "min.s32", 32, addr, b,
                                    LLVMBuildAnd(g->b, inb, LLVMBuildNot(g->b, neg, ""), ""), want_old);
      LLVMValueRef o2 = atomic_elem(g, kind == 1 ? "min.u32" : "max.u32", 32, addr, b, LLVMBuildAnd(g->b, inb, neg, ""),
                                    want_old);
      if (want_old) old = LLVMBuildBitCast(g->b, LLVMBuildSelect(g->b, neg, o2, o1, ""), g->f32, "");
    } else {
      const char *ty = x.dt == DT_F32    ? (kind == 0 ? "add.f32" : NULL)
                       : x.dt == DT_F16  ? "add.noftz.f16"
                       : x.dt == DT_BF16 ? "add.noftz.bf16"
                       : kind == 0       ? "add.u32"
                       : x.dt == DT_U32  ? (kind == 1 ? "max.u32" : "min.u32")
                       : kind == 1       ? "max.s32"
                                         : "min.s32";
      LLVMValueRef ob = atomic_elem(g, ty, bits, addr, to_bits(g, val, x.dt), inb, want_old);
      if (want_old) old = from_bits(g, ob, x.dt);
    }
    out->r[r] = old;
  }
  if (!want_old) {
    for (uint32_t r = 0; r < x.nregs; r++) out->r[r] = LLVMGetUndef(cg_reg_type(g, x.dt));
    return;
  }
  for (uint32_t r = 0; r < x.nregs; r++)
    if (r & rm) out->r[r] = out->r[r & ~rm];
  if (!lm && !wm) return;
  /* the owners hand the old values to the threads that replicate them */
  const struct ir_type *vt = ir_vtype(g->f, value);
  int64_t numel = ir_type_numel(vt);
  cg_smem_reserve(g, (unsigned)(numel * cg_smem_elem_bytes(x.dt)));
  cg_barrier(g);
  for (uint32_t r = 0; r < x.nregs; r++) {
    if (r & rm) continue;
    LLVMValueRef c[IR_MAX_RANK], idx = cg_i32(g, 0);
    if (x.data_rank) {
      cg_coords(g, &x.l, r, c);
      idx = cg_linear_index(g, c, x.l.shape, x.l.rank);
    }
    /* only the owner stores: the others' registers hold nothing */
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "own"), join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "");
    LLVMMoveBasicBlockAfter(st, cur);
    LLVMMoveBasicBlockAfter(join, st);
    LLVMBuildCondBr(g->b, own, st, join);
    LLVMPositionBuilderAtEnd(g->b, st);
    cg_smem_store_elem(g, out->r[r], x.dt, idx, 0);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
  cg_barrier(g);
  for (uint32_t r = 0; r < x.nregs; r++) {
    LLVMValueRef c[IR_MAX_RANK], idx = cg_i32(g, 0);
    if (x.data_rank) {
      cg_coords(g, &x.l, r, c);
      idx = cg_linear_index(g, c, x.l.shape, x.l.rank);
    }
    out->r[r] = cg_smem_load_elem(g, x.dt, idx, 0);
  }
}

/* align_shift %T, %i... {bytes}: (address of T[i...] mod bytes) / element size. */
void cg_gen_align_shift(struct cg *g, const struct ir_op *op) {
  const struct ir_type *tt = ir_vtype(g->f, op->args[0]);
  const struct cg_tensor *t = &g->tensors[ir_param_of(g->f, op->args[0]) - g->f->params.v];
  int eb = ir_dtype_bytes((ir_dtype)tt->dtype);
  LLVMValueRef off = cg_i64(g, 0);
  for (int d = 0; d < tt->rank; d++) {
    LLVMValueRef i = cg_scalar_i32(g, op->args[1 + d]);
    if (g->failed) return;
    off = LLVMBuildAdd(g->b, off, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, i, g->i64, ""), t->stride[d], ""), "");
  }
  LLVMValueRef a = LLVMBuildAdd(g->b, LLVMBuildPtrToInt(g->b, t->ptr, g->i64, ""), LLVMBuildMul(g->b, off, cg_i64(g, eb), ""), "");
  a = LLVMBuildTrunc(g->b, LLVMBuildAnd(g->b, a, cg_i64(g, op->i[0] - 1), ""), g->i32, "");
  cg_new_val(g, op->res, 1)->r[0] = LLVMBuildUDiv(g->b, a, cg_i32(g, eb), "");
}
