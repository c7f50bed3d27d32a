/* interp.c - the CPU interpreter (see interp.h).
 *
 * Every IR value of the kernel gets a buffer of its type's element count, allocated once
 * per thread: tile shapes are compile-time constants, so a program instance runs without
 * allocating, and loop iterations overwrite the same buffers. Elements are ir_scalar
 * (a double holding a value rounded to the element type, or an int64), which keeps one
 * code path per op; the per-element semantics come from eval.c, shared with constant
 * folding. Common float ops have tight loops; the rest go through ir_eval_elem.
 *
 * Loops follow Python's range: step > 0 counts up while iv < ub, step < 0 counts down
 * while iv > ub, step == 0 runs no iteration (no input can hang the interpreter).       */
#include "interp.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp16.h"

/* The CTAs of one cluster (a kernel with cluster=C, interpreted): one host thread per
 * rank walks every program in the same order; cluster_reduce meets at the barrier. */
struct cluster_state {
  pthread_barrier_t bar;
  ir_scalar slot[8];
  bool fail;
};

struct frame {
  int rank;                  /* the CTA's rank in its cluster (cluster kernels) */
  struct cluster_state *cl;
  const struct ir_func *f;
  const struct interp_arg *args;
  ir_scalar **val;      /* value id -> its buffer */
  int64_t pid[3];
  const int64_t *grid;
  ir_scalar *tmp;       /* scratch for loop-carried copies */
  int64_t tmp_len;
  double *dot_tmp;      /* scratch for dot: one row of C and the B operand */
};

ir_scalar interp_load_elem(ir_dtype dt, const void *base, int64_t i) {
  ir_scalar r;
  switch (dt) {
  case DT_BOOL: r.i = ((const uint8_t *)base)[i] != 0; break;
  case DT_I8: r.i = ((const int8_t *)base)[i]; break;
  case DT_I16: r.i = ((const int16_t *)base)[i]; break;
  case DT_I32: r.i = ((const int32_t *)base)[i]; break;
  case DT_U32: r.i = ((const uint32_t *)base)[i]; break;
  case DT_I64: r.i = ((const int64_t *)base)[i]; break;
  case DT_F16: r.f = tl_f16_to_f32(((const uint16_t *)base)[i]); break;
  case DT_BF16: r.f = tl_bf16_to_f32(((const uint16_t *)base)[i]); break;
  case DT_F32: r.f = ((const float *)base)[i]; break;
  case DT_F64: r.f = ((const double *)base)[i]; break;
  case DT_F8E4M3: r.f = tl_e4m3_to_f32(((const uint8_t *)base)[i]); break;
  case DT_F8E5M2: r.f = tl_e5m2_to_f32(((const uint8_t *)base)[i]); break;
  default: r.i = 0;
  }
  return r;
}

void interp_store_elem(ir_dtype dt, void *base, int64_t i, ir_scalar v) {
  switch (dt) {
  case DT_BOOL: ((uint8_t *)base)[i] = v.i != 0; break;
  case DT_I8: ((int8_t *)base)[i] = (int8_t)v.i; break;
  case DT_I16: ((int16_t *)base)[i] = (int16_t)v.i; break;
  case DT_I32: ((int32_t *)base)[i] = (int32_t)v.i; break;
  case DT_U32: ((uint32_t *)base)[i] = (uint32_t)v.i; break;
  case DT_I64: ((int64_t *)base)[i] = v.i; break;
  case DT_F16: ((uint16_t *)base)[i] = tl_f32_to_f16((float)v.f); break;
  case DT_BF16: ((uint16_t *)base)[i] = tl_f32_to_bf16((float)v.f); break;
  case DT_F32: ((float *)base)[i] = (float)v.f; break;
  case DT_F64: ((double *)base)[i] = v.f; break;
  case DT_F8E4M3: ((uint8_t *)base)[i] = tl_f32_to_e4m3((float)v.f); break;
  case DT_F8E5M2: ((uint8_t *)base)[i] = tl_f32_to_e5m2((float)v.f); break;
  default: break;
  }
}

static const struct ir_type *vtype(struct frame *fr, ir_val v) { return ir_vtype(fr->f, v); }
static int64_t numel(struct frame *fr, ir_val v) { return ir_type_numel(vtype(fr, v)); }
static ir_scalar *V(struct frame *fr, ir_val v) { return fr->val[v]; }

static void exec_block(struct frame *fr, uint32_t blk);

/* Row-major strides of a tile type, in elements. */
static void dense_strides(const struct ir_type *t, int64_t *st) {
  int64_t s = 1;
  for (int i = t->rank; i-- > 0;) {
    st[i] = s;
    s *= t->dims[i];
  }
}

static void exec_elementwise(struct frame *fr, const struct ir_op *op) {
  int64_t n = numel(fr, op->res);
  ir_scalar *r = V(fr, op->res);
  ir_dtype dt = vtype(fr, op->args[0])->dtype;
  ir_dtype rdt = vtype(fr, op->res)->dtype;
  const ir_scalar *a = V(fr, op->args[0]);
  const ir_scalar *b = op->nargs > 1 ? V(fr, op->args[1]) : NULL;
  if (op->code == IR_CAST) {
    for (int64_t i = 0; i < n; i++) r[i] = ir_eval_cast(dt, rdt, a[i]);
    return;
  }
  if (op->code == IR_SELECT) {
    const ir_scalar *c = a, *x = V(fr, op->args[1]), *y = V(fr, op->args[2]);
    for (int64_t i = 0; i < n; i++) r[i] = c[i].i ? x[i] : y[i];
    return;
  }
  if (dt == DT_F32) {
    /* the common f32 cases without per-element dispatch */
    switch (op->code) {
    case IR_ADD: for (int64_t i = 0; i < n; i++) r[i].f = (double)(float)(a[i].f + b[i].f); return;
    case IR_SUB: for (int64_t i = 0; i < n; i++) r[i].f = (double)(float)(a[i].f - b[i].f); return;
    case IR_MUL: for (int64_t i = 0; i < n; i++) r[i].f = (double)(float)(a[i].f * b[i].f); return;
    case IR_DIV: for (int64_t i = 0; i < n; i++) r[i].f = (double)(float)(a[i].f / b[i].f); return;
    case IR_EXP2: for (int64_t i = 0; i < n; i++) r[i].f = (double)(float)exp2(a[i].f); return;
    default: break;
    }
  }
  ir_scalar args[2];
  for (int64_t i = 0; i < n; i++) {
    args[0] = a[i];
    if (b) args[1] = b[i];
    ir_eval_elem((ir_opcode)op->code, dt, args, &r[i]);
  }
}

/* The result's elements in row-major order, each read from the operand at offset
 * sum idx[d] * st[d] (strides in elements, per result dimension). */
static void strided_gather(struct frame *fr, const struct ir_op *op, const int64_t *st) {
  const struct ir_type *rt = vtype(fr, op->res);
  int64_t n = ir_type_numel(rt);
  const ir_scalar *a = V(fr, op->args[0]);
  ir_scalar *r = V(fr, op->res);
  int64_t idx[IR_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t src = 0;
    for (int d = 0; d < rt->rank; d++) src += idx[d] * st[d];
    r[i] = a[src];
    for (int d = rt->rank; d-- > 0;) {
      if (++idx[d] < rt->dims[d]) break;
      idx[d] = 0;
    }
  }
}

static void exec_broadcast(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]);
  int64_t ast[IR_MAX_RANK];
  dense_strides(at, ast);
  for (int i = 0; i < at->rank; i++)
    if (at->dims[i] == 1) ast[i] = 0;
  strided_gather(fr, op, ast);
}

static void exec_trans(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]);
  int64_t R = at->dims[0], C = at->dims[1];
  const ir_scalar *a = V(fr, op->args[0]);
  ir_scalar *r = V(fr, op->res);
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) r[j * R + i] = a[i * C + j];
}

/* permute: result element at index idx is the operand's at the coordinates whose
 * dimension perm[i] is idx[i] (the operand's strides taken in the result's order). */
static void exec_permute(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]), *rt = vtype(fr, op->res);
  int perm[IR_MAX_RANK];
  int64_t ast[IR_MAX_RANK], st[IR_MAX_RANK];
  if (!ir_perm_decode(op->i[0], at->rank, perm)) return; /* the verifier refuses it */
  dense_strides(at, ast);
  for (int i = 0; i < rt->rank; i++) st[i] = ast[perm[i]];
  strided_gather(fr, op, st);
}

/* join interleaves (the new last dimension is the fastest); split takes every other
 * element. Row-major buffers make both one strided copy. */
static void exec_join(struct frame *fr, const struct ir_op *op) {
  int64_t n = numel(fr, op->args[0]);
  const ir_scalar *a = V(fr, op->args[0]), *b = V(fr, op->args[1]);
  ir_scalar *r = V(fr, op->res);
  for (int64_t i = 0; i < n; i++) {
    r[2 * i] = a[i];
    r[2 * i + 1] = b[i];
  }
}

static void exec_split(struct frame *fr, const struct ir_op *op) {
  int64_t n = numel(fr, op->res), half = op->i[0] != 0;
  const ir_scalar *a = V(fr, op->args[0]);
  ir_scalar *r = V(fr, op->res);
  for (int64_t i = 0; i < n; i++) r[i] = a[2 * i + half];
}

/* A tile seen as [outer, len, inner] around axis ax. */
static void around_axis(const struct ir_type *t, int ax, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  *len = t->dims[ax];
  for (int i = 0; i < ax; i++) *outer *= t->dims[i];
  for (int i = ax + 1; i < t->rank; i++) *inner *= t->dims[i];
}

static void exec_reduce(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]);
  int ax = (int)op->i[0];
  int64_t outer, inner, len;
  around_axis(at, ax, &outer, &len, &inner);
  const ir_scalar *a = V(fr, op->args[0]);
  ir_scalar *r = V(fr, op->res);
  bool isf = ir_dtype_is_float(at->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      const ir_scalar *p = a + o * len * inner + in;
      ir_scalar acc = p[0];
      for (int64_t k = 1; k < len; k++) {
        ir_scalar x = p[k * inner], args[2] = {acc, x};
        ir_opcode code = op->code == IR_REDUCE_SUM ? IR_ADD : op->code == IR_REDUCE_MAX ? IR_MAX : IR_MIN;
        if (isf && code == IR_ADD)
          acc.f = ir_round_float(at->dtype, acc.f + x.f);
        else
          ir_eval_elem(code, at->dtype, args, &acc);
      }
      r[o * inner + in] = acc;
    }
}

/* Inclusive scans: each line along the axis combined in order (from its end with reverse),
 * rounding to the element type after every step, as exec_reduce does. */
static void exec_scan(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]);
  int ax = (int)op->i[0];
  bool rev = op->i[1] != 0;
  int64_t outer, inner, len;
  around_axis(at, ax, &outer, &len, &inner);
  const ir_scalar *a = V(fr, op->args[0]);
  ir_scalar *r = V(fr, op->res);
  bool isf = ir_dtype_is_float(at->dtype);
  ir_opcode code = op->code == IR_SCAN_SUM ? IR_ADD : op->code == IR_SCAN_PROD ? IR_MUL
                   : op->code == IR_SCAN_MAX ? IR_MAX : IR_MIN;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in;
      ir_scalar acc = {0};
      for (int64_t k = 0; k < len; k++) {
        int64_t e = base + (rev ? len - 1 - k : k) * inner;
        ir_scalar x = a[e], args[2] = {acc, x};
        if (k == 0)
          acc = x;
        else if (isf && (code == IR_ADD || code == IR_MUL))
          acc.f = ir_round_float(at->dtype, code == IR_ADD ? acc.f + x.f : acc.f * x.f);
        else
          ir_eval_elem(code, at->dtype, args, &acc);
        r[e] = acc;
      }
    }
}

static void exec_dot(struct frame *fr, const struct ir_op *op) {
  const struct ir_type *at = vtype(fr, op->args[0]), *bt = vtype(fr, op->args[1]);
  const struct ir_type *ct = vtype(fr, op->args[2]);
  int64_t M = at->dims[0], K = at->dims[1], N = bt->dims[1];
  const ir_scalar *a = V(fr, op->args[0]), *b = V(fr, op->args[1]), *c = V(fr, op->args[2]);
  ir_scalar *r = V(fr, op->res);
  bool tf32 = op->i[0] && at->dtype == DT_F32;
  /* accumulate each output element in double from the accumulator's value, then round
   * once: the reference result that Tensor Core and FMA orderings are compared against */
  double *row = fr->dot_tmp, *bcol = fr->dot_tmp + N;
  for (int64_t k = 0; k < K * N; k++) bcol[k] = tf32 ? (double)tl_round_tf32_rna((float)b[k].f) : b[k].f;
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) row[j] = c[i * N + j].f;
    for (int64_t k = 0; k < K; k++) {
      double x = tf32 ? (double)tl_round_tf32_rna((float)a[i * K + k].f) : a[i * K + k].f;
      if (x == 0) continue;
      const double *bk = bcol + k * N;
      for (int64_t j = 0; j < N; j++) row[j] += x * bk[j];
    }
    for (int64_t j = 0; j < N; j++) r[i * N + j].f = ir_round_float(ct->dtype, row[j]);
  }
}

/* Loads and stores: tile element e maps to tensor coordinates idx[d] (+ its coordinate in
 * the tile for sliced dimensions); out-of-bounds elements read `fill` / are skipped. */
static void exec_memory(struct frame *fr, const struct ir_op *op) {
  const struct ir_func *f = fr->f;
  const struct ir_param *p = ir_param_of(f, op->args[0]);
  const struct interp_tensor *t = &fr->args[f->values.v[op->args[0]].index].tensor;
  (void)p;
  int rank = t->rank;
  uint64_t mask = (uint64_t)op->i[0];
  int64_t start[IR_MAX_RANK];
  for (int d = 0; d < rank; d++) start[d] = V(fr, op->args[1 + d])[0].i;
  bool store = op->code == IR_STORE;
  ir_val tv = store ? op->args[op->nargs - 1] : op->res;
  const struct ir_type *tt = vtype(fr, tv);
  int64_t n = ir_type_numel(tt);
  ir_scalar *buf = V(fr, tv);
  const ir_scalar *pred = store && op->nargs == (uint32_t)rank + 3 ? V(fr, op->args[op->nargs - 2]) : NULL;
  /* tile dim j corresponds to the j-th sliced tensor dim */
  int tdim_of[IR_MAX_RANK];
  for (int d = 0, j = 0; d < rank; d++) tdim_of[d] = (mask >> d & 1) ? j++ : -1;
  ir_scalar fill;
  if (ir_dtype_is_float(tt->dtype))
    fill.f = ir_round_float(tt->dtype, op->f);
  else
    fill.i = ir_wrap_int(tt->dtype, (int64_t)op->f);
  /* an indexed dimension out of range masks the whole tile */
  bool all_out = false;
  for (int d = 0; d < rank; d++)
    if (tdim_of[d] < 0 && (start[d] < 0 || start[d] >= t->shape[d])) all_out = true;
  int64_t tidx[IR_MAX_RANK] = {0};
  for (int64_t e = 0; e < n; e++) {
    bool in = !all_out;
    int64_t off = 0;
    for (int d = 0; d < rank && in; d++) {
      int64_t c = start[d] + (tdim_of[d] >= 0 ? tidx[tdim_of[d]] : 0);
      if (c < 0 || c >= t->shape[d]) in = false;
      off += c * t->strides[d];
    }
    if (store) {
      if (in && (!pred || pred[e].i)) interp_store_elem(t->dtype, t->data, off, buf[e]);
    } else {
      buf[e] = in ? interp_load_elem(t->dtype, t->data, off) : fill;
      if (in && t->dtype != tt->dtype) buf[e] = ir_eval_cast(t->dtype, tt->dtype, buf[e]);
    }
    for (int j = tt->rank; j-- > 0;) {
      if (++tidx[j] < tt->dims[j]) break;
      tidx[j] = 0;
    }
  }
}

/* The float order of max/min as the GPU's integer atomics see it: non-negative floats
 * compare as signed integers, negative ones as unsigned integers in reverse. */
static bool float_bits_greater(uint32_t a, uint32_t b) {
  bool na = a >> 31, nb = b >> 31;
  if (na != nb) return nb;
  return na ? a < b : a > b;
}

/* One atomic read-modify-write of element `off`; returns the old value. Program instances
 * run on several host threads, so every update is a compare-and-swap on the element's bits
 * (the same result as the GPU's one-element atomics, in some order). */
static ir_scalar atomic_update(ir_dtype dt, void *base, int64_t off, int kind, ir_scalar v) {
  ir_scalar old;
  if (dt == DT_I32) {
    int32_t *p = (int32_t *)base + off, x = (int32_t)v.i;
    int32_t cur = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
    do {
      nv = kind == 0 ? (int32_t)((uint32_t)cur + (uint32_t)x) : kind == 1 ? (cur > x ? cur : x) : (cur < x ? cur : x);
    } while (!__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    old.i = cur;
    return old;
  }
  if (dt == DT_U32) {
    uint32_t *p = (uint32_t *)base + off, x = (uint32_t)v.i, cur = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
    do {
      nv = kind == 0 ? cur + x : kind == 1 ? (cur > x ? cur : x) : (cur < x ? cur : x);
    } while (!__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    old.i = cur;
    return old;
  }
  if (dt == DT_F32) {
    uint32_t *p = (uint32_t *)base + off, cur = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
    float xf = (float)v.f;
    uint32_t xb;
    memcpy(&xb, &xf, 4);
    do {
      float cf;
      memcpy(&cf, &cur, 4);
      if (kind == 0) {
        float sum = cf + xf;
        memcpy(&nv, &sum, 4);
      } else {
        nv = (kind == 1) == float_bits_greater(xb, cur) ? xb : cur;
      }
    } while (!__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    float of;
    memcpy(&of, &cur, 4);
    old.f = of;
    return old;
  }
  /* f16 / bf16: add only */
  uint16_t *p = (uint16_t *)base + off, cur = __atomic_load_n(p, __ATOMIC_RELAXED), nv;
  do {
    float cf = dt == DT_F16 ? tl_f16_to_f32(cur) : tl_bf16_to_f32(cur);
    float sum = cf + (float)v.f;
    nv = dt == DT_F16 ? tl_f32_to_f16(sum) : tl_f32_to_bf16(sum);
  } while (!__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  old.f = dt == DT_F16 ? tl_f16_to_f32(cur) : tl_bf16_to_f32(cur);
  return old;
}

/* gather, scatter, atomic: element e at coordinates (idx0[e], idx1[e], ...). */
static void exec_indexed(struct frame *fr, const struct ir_op *op) {
  const struct ir_func *f = fr->f;
  const struct interp_tensor *t = &fr->args[f->values.v[op->args[0]].index].tensor;
  int rank = t->rank;
  bool gather = op->code == IR_GATHER;
  ir_val dv = gather ? op->res : op->args[op->nargs - 1];
  const struct ir_type *dt = vtype(fr, dv);
  int64_t n = ir_type_numel(dt);
  const ir_scalar *pred = !gather && op->nargs == (uint32_t)rank + 3 ? V(fr, op->args[op->nargs - 2]) : NULL;
  ir_scalar *data = V(fr, dv), *res = op->code == IR_ATOMIC ? V(fr, op->res) : NULL;
  ir_scalar fill;
  if (ir_dtype_is_float(dt->dtype))
    fill.f = ir_round_float(dt->dtype, op->f);
  else
    fill.i = ir_wrap_int(dt->dtype, (int64_t)op->f);
  for (int64_t e = 0; e < n; e++) {
    bool in = true;
    int64_t off = 0;
    for (int d = 0; d < rank && in; d++) {
      int64_t c = V(fr, op->args[1 + d])[e].i;
      if (c < 0 || c >= t->shape[d]) in = false;
      off += c * t->strides[d];
    }
    if (gather) {
      data[e] = in ? interp_load_elem(t->dtype, t->data, off) : fill;
      continue;
    }
    bool write = in && (!pred || pred[e].i);
    if (op->code == IR_SCATTER) {
      if (write) interp_store_elem(t->dtype, t->data, off, data[e]);
      continue;
    }
    /* atomic: a NaN value changes nothing under max and min (the GPU skips it too) */
    if (write && op->i[0] != 0 && ir_dtype_is_float(dt->dtype) && isnan(data[e].f)) write = false;
    if (write)
      res[e] = atomic_update(t->dtype, t->data, off, (int)op->i[0], data[e]);
    else if (ir_dtype_is_float(dt->dtype))
      res[e].f = 0;
    else
      res[e].i = 0;
  }
}

static void copy_value(struct frame *fr, ir_val dst, ir_val src) {
  if (dst == src) return;
  memcpy(V(fr, dst), V(fr, src), sizeof(ir_scalar) * (size_t)numel(fr, dst));
}

static void exec_for(struct frame *fr, const struct ir_op *op) {
  const struct ir_func *f = fr->f;
  const struct ir_block *body = &f->blocks.v[op->region];
  int64_t lb = V(fr, op->args[0])[0].i, ub = V(fr, op->args[1])[0].i, step = V(fr, op->args[2])[0].i;
  uint32_t nc = op->nargs - 3;
  for (uint32_t k = 0; k < nc; k++) copy_value(fr, body->args + 1 + k, op->args[3 + k]);
  if (step != 0) {
    /* bounds are at most 64-bit values of the index type; iv + step is computed so that it
     * cannot overflow (i32 bounds always fit, i64 bounds stop at the last in-range value) */
    for (int64_t iv = lb; step > 0 ? iv < ub : iv > ub;) {
      V(fr, body->args)[0].i = iv;
      exec_block(fr, op->region);
      const struct ir_op *y = &f->ops.v[VEC_LAST(body->ops)];
      /* yields may permute the carried values: stage them through scratch */
      int64_t off = 0;
      for (uint32_t k = 0; k < nc; k++) {
        int64_t m = numel(fr, y->args[k]);
        memcpy(fr->tmp + off, V(fr, y->args[k]), sizeof(ir_scalar) * (size_t)m);
        off += m;
      }
      off = 0;
      for (uint32_t k = 0; k < nc; k++) {
        int64_t m = numel(fr, body->args + 1 + k);
        memcpy(V(fr, body->args + 1 + k), fr->tmp + off, sizeof(ir_scalar) * (size_t)m);
        off += m;
      }
      if ((step > 0 && iv > INT64_MAX - step) || (step < 0 && iv < INT64_MIN - step)) break;
      iv += step;
    }
  }
  for (uint32_t k = 0; k < nc; k++) copy_value(fr, op->res + k, body->args + 1 + k);
}

static void exec_op(struct frame *fr, uint32_t id) {
  const struct ir_func *f = fr->f;
  const struct ir_op *op = &f->ops.v[id];
  switch (op->code) {
  case IR_CONST: {
    int64_t n = numel(fr, op->res);
    ir_scalar v, *r = V(fr, op->res);
    if (ir_dtype_is_float(vtype(fr, op->res)->dtype))
      v.f = op->f;
    else
      v.i = op->i[0];
    for (int64_t i = 0; i < n; i++) r[i] = v;
    return;
  }
  case IR_ARANGE: {
    int64_t n = numel(fr, op->res);
    for (int64_t i = 0; i < n; i++) V(fr, op->res)[i].i = i;
    return;
  }
  case IR_PROGRAM_ID:
    V(fr, op->res)[0].i = fr->pid[op->i[0]];
    return;
  case IR_NUM_PROGRAMS:
    V(fr, op->res)[0].i = fr->grid[op->i[0]];
    return;
  case IR_SPLAT: {
    int64_t n = numel(fr, op->res);
    ir_scalar v = V(fr, op->args[0])[0];
    for (int64_t i = 0; i < n; i++) V(fr, op->res)[i] = v;
    return;
  }
  case IR_BROADCAST:
    exec_broadcast(fr, op);
    return;
  case IR_EXPAND_DIMS:
    copy_value(fr, op->res, op->args[0]);
    return;
  case IR_TRANS:
    exec_trans(fr, op);
    return;
  case IR_RESHAPE: /* row-major buffers: the same elements in the same order */
    copy_value(fr, op->res, op->args[0]);
    return;
  case IR_PERMUTE:
    exec_permute(fr, op);
    return;
  case IR_JOIN:
    exec_join(fr, op);
    return;
  case IR_SPLIT:
    exec_split(fr, op);
    return;
  case IR_REDUCE_SUM:
  case IR_REDUCE_MAX:
  case IR_REDUCE_MIN:
    exec_reduce(fr, op);
    return;
  case IR_SCAN_SUM:
  case IR_SCAN_PROD:
  case IR_SCAN_MAX:
  case IR_SCAN_MIN:
    exec_scan(fr, op);
    return;
  case IR_DOT:
    exec_dot(fr, op);
    return;
  case IR_LOAD:
  case IR_STORE:
    exec_memory(fr, op);
    return;
  case IR_GATHER:
  case IR_SCATTER:
  case IR_ATOMIC:
    exec_indexed(fr, op);
    return;
  case IR_ALIGN_SHIFT: { /* the host address of the element, as the GPU's */
    const struct interp_tensor *t = &fr->args[f->values.v[op->args[0]].index].tensor;
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) off += V(fr, op->args[1 + d])[0].i * t->strides[d];
    int eb = ir_dtype_bytes((ir_dtype)t->dtype);
    uintptr_t a = (uintptr_t)t->data + (uintptr_t)(off * eb);
    V(fr, op->res)[0].i = (int64_t)(a % (uintptr_t)op->i[0]) / eb;
    return;
  }
  case IR_FOR:
    exec_for(fr, op);
    return;
  case IR_CLUSTER_RANK:
    V(fr, op->res)[0].i = fr->rank;
    return;
  case IR_CLUSTER_REDUCE: { /* every rank's value, combined in rank order as on the GPU */
    ir_dtype dt = (ir_dtype)ir_vtype(f, op->res)->dtype;
    fr->cl->slot[fr->rank] = V(fr, op->args[0])[0];
    pthread_barrier_wait(&fr->cl->bar);
    ir_scalar acc = fr->cl->slot[0];
    ir_opcode e = ir_cluster_combine(op->i[0]);
    for (int r = 1; r < f->cluster; r++) {
      ir_scalar a[2] = {acc, fr->cl->slot[r]};
      ir_eval_elem(e, dt, a, &acc);
    }
    pthread_barrier_wait(&fr->cl->bar); /* every rank has read the slots */
    V(fr, op->res)[0] = acc;
    return;
  }
  case IR_IF: {
    bool c = V(fr, op->args[0])[0].i != 0;
    uint32_t blk = op->region + (c ? 0 : 1);
    exec_block(fr, blk);
    const struct ir_op *y = &f->ops.v[VEC_LAST(f->blocks.v[blk].ops)];
    for (uint32_t k = 0; k < op->nres; k++) copy_value(fr, op->res + k, y->args[k]);
    return;
  }
  case IR_YIELD:
  case IR_GRID:
    return;
  default:
    if (ir_ops[op->code].flags & OPF_ELEM) exec_elementwise(fr, op);
    return;
  }
}

static void exec_block(struct frame *fr, uint32_t blk) {
  const struct ir_block *b = &fr->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) exec_op(fr, b->ops.v[i]);
}

/* Allocates one buffer per value (tensors get none) plus the loop scratch. */
static bool frame_init(struct frame *fr, const struct ir_func *f, const struct interp_arg *args,
                       const struct tl_alloc *alloc, ir_scalar **storage, size_t *bytes) {
  fr->f = f;
  fr->args = args;
  int64_t total = 0, maxfor = 0;
  for (uint32_t v = 1; v < f->values.n; v++) {
    const struct ir_type *t = ir_vtype(f, v);
    if (t->kind == IR_TY_TILE) total += ir_type_numel(t);
  }
  int64_t maxdot = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (op->code == IR_DOT) {
      const struct ir_type *bt = ir_vtype(f, op->args[1]);
      maxdot = TL_MAX(maxdot, (int64_t)bt->dims[1] * (bt->dims[0] + 1));
    }
    if (op->code != IR_FOR) continue;
    int64_t s = 0;
    for (uint32_t k = 0; k < op->nres; k++) s += ir_type_numel(ir_vtype(f, op->res + k));
    maxfor = TL_MAX(maxfor, s);
  }
  size_t nbytes = sizeof(ir_scalar) * (size_t)(total + maxfor + maxdot + 1) +
                  sizeof(ir_scalar *) * f->values.n;
  char *mem = tl_raw_alloc(alloc, nbytes);
  if (!mem) return false;
  memset(mem, 0, nbytes);
  fr->val = (ir_scalar **)mem;
  ir_scalar *p = (ir_scalar *)(mem + sizeof(ir_scalar *) * f->values.n);
  for (uint32_t v = 1; v < f->values.n; v++) {
    const struct ir_type *t = ir_vtype(f, v);
    if (t->kind != IR_TY_TILE) continue;
    fr->val[v] = p;
    p += ir_type_numel(t);
  }
  fr->tmp = p;
  fr->tmp_len = maxfor;
  fr->dot_tmp = (double *)(p + maxfor);
  /* scalar and shape parameters */
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *par = &f->params.v[i];
    if (par->kind != IR_PARAM_TENSOR) fr->val[par->value][0] = args[i].scalar;
  }
  *storage = (ir_scalar *)mem;
  *bytes = nbytes;
  return true;
}

/* The grid block holds only scalar ops (the verifier ensures it), so it is evaluated here
 * with one ir_scalar per value and no tile buffers: this runs on every launch. */
static ir_scalar grid_value(const struct ir_func *f, const struct interp_arg *args, const ir_scalar *vals, ir_val v) {
  const struct ir_value *val = &f->values.v[v];
  if (val->kind == IR_VAL_PARAM) return args[val->index].scalar;
  return vals[v];
}

static void eval_grid_block(const struct ir_func *f, const struct interp_arg *args, ir_scalar *vals, uint32_t blk) {
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    ir_scalar a[3] = {{0}, {0}, {0}}, r = {0};
    for (uint32_t k = 0; k < op->nargs && k < 3; k++) a[k] = grid_value(f, args, vals, op->args[k]);
    if (op->code == IR_CONST) {
      if (ir_dtype_is_float(ir_vtype(f, op->res)->dtype))
        r.f = op->f;
      else
        r.i = op->i[0];
    } else if (op->code == IR_CAST) {
      r = ir_eval_cast((ir_dtype)ir_vtype(f, op->args[0])->dtype, (ir_dtype)ir_vtype(f, op->res)->dtype, a[0]);
    } else if (op->code == IR_SELECT) {
      r = a[0].i ? a[1] : a[2];
    } else if (op->code == IR_IF) {
      uint32_t region = op->region + (a[0].i ? 0 : 1);
      eval_grid_block(f, args, vals, region);
      const struct ir_block *rb = &f->blocks.v[region];
      const struct ir_op *y = &f->ops.v[VEC_LAST(rb->ops)];
      for (uint32_t k = 0; k < op->nres; k++) vals[op->res + k] = grid_value(f, args, vals, y->args[k]);
      continue;
    } else if (ir_ops[op->code].flags & OPF_ELEM) {
      ir_eval_elem((ir_opcode)op->code, (ir_dtype)ir_vtype(f, op->args[0])->dtype, a, &r);
    } else {
      continue; /* grid, yield */
    }
    if (op->nres) vals[op->res] = r;
  }
}

bool interp_grid(const struct ir_func *f, const struct interp_arg *args, int64_t grid[3],
                 const struct tl_alloc *alloc) {
  grid[0] = grid[1] = grid[2] = 0;
  ir_scalar small[256];
  size_t bytes = sizeof(ir_scalar) * f->values.n;
  ir_scalar *vals = f->values.n <= 256 ? small : tl_raw_alloc(alloc, bytes);
  if (!vals) return false;
  eval_grid_block(f, args, vals, IR_GRID_BLOCK);
  const struct ir_block *g = &f->blocks.v[IR_GRID_BLOCK];
  if (g->ops.n) {
    const struct ir_op *op = &f->ops.v[VEC_LAST(g->ops)];
    for (int i = 0; i < 3 && i < (int)op->nargs; i++) grid[i] = grid_value(f, args, vals, op->args[i]).i;
  }
  if (vals != small) tl_raw_free(alloc, vals, bytes);
  return true;
}

struct worker {
  const struct ir_func *f;
  const struct interp_arg *args;
  const int64_t *grid;
  int64_t first, last; /* linear program range [first, last) */
  const struct tl_alloc *alloc;
  bool ok;
  int rank;            /* cluster kernels: this thread's CTA rank */
  struct cluster_state *cl;
};

static void *run_programs(void *ud) {
  struct worker *w = ud;
  struct frame fr = {0};
  ir_scalar *mem = NULL;
  size_t bytes = 0;
  w->ok = frame_init(&fr, w->f, w->args, w->alloc, &mem, &bytes);
  if (w->cl) { /* the ranks agree to start only when every one has its buffers */
    if (!w->ok) w->cl->fail = true;
    pthread_barrier_wait(&w->cl->bar);
    if (w->cl->fail) {
      if (w->ok) tl_raw_free(w->alloc, mem, bytes);
      return NULL;
    }
  }
  if (!w->ok) return NULL;
  fr.grid = w->grid;
  fr.rank = w->rank;
  fr.cl = w->cl;
  for (int64_t lin = w->first; lin < w->last; lin++) {
    /* program 0 varies fastest along axis 0, as on the GPU */
    fr.pid[0] = lin % w->grid[0];
    fr.pid[1] = (lin / w->grid[0]) % w->grid[1];
    fr.pid[2] = lin / (w->grid[0] * w->grid[1]);
    exec_block(&fr, IR_BODY_BLOCK);
  }
  tl_raw_free(w->alloc, mem, bytes);
  return NULL;
}

/* A kernel whose programs are clusters of C CTAs (cluster-rows): C host threads, one per
 * rank, each running every program's CTA of its rank in order, meeting at cluster_reduce. */
static bool run_clusters(const struct ir_func *f, const struct interp_arg *args, const int64_t grid[3], int64_t total,
                         const struct tl_alloc *alloc, struct strbuf *err) {
  int C = f->cluster;
  struct cluster_state cl;
  memset(&cl, 0, sizeof cl);
  if (C > 8 || pthread_barrier_init(&cl.bar, NULL, (unsigned)C) != 0) {
    sb_puts(err, "the interpreter could not set up a cluster's threads");
    return false;
  }
  struct worker w[8];
  pthread_t tid[8];
  int started = 0;
  for (int r = 0; r < C; r++) w[r] = (struct worker){f, args, grid, 0, total, alloc, false, r, &cl};
  for (int r = 1; r < C; r++, started++)
    if (pthread_create(&tid[r], NULL, run_programs, &w[r]) != 0) break;
  bool ok = started == C - 1;
  if (ok) {
    run_programs(&w[0]);
    ok = w[0].ok;
  }
  for (int r = 1; r <= started; r++) pthread_join(tid[r], NULL), ok &= w[r].ok;
  pthread_barrier_destroy(&cl.bar);
  if (!ok) sb_puts(err, started == C - 1 ? "out of memory for the interpreter's buffers" : "the interpreter could not start a cluster's threads");
  return ok;
}

bool interp_run(const struct ir_func *f, const struct interp_arg *args, const int64_t grid[3],
                int threads, const struct tl_alloc *alloc, struct strbuf *err) {
  int64_t total = grid[0] * grid[1] * grid[2];
  if (total <= 0) return true;
  if (f->cluster > 1) return run_clusters(f, args, grid, total, alloc, err);
  if (threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  if (threads > 64) threads = 64;
  if (threads > total) threads = (int)total;
  struct worker w[64];
  pthread_t tid[64];
  bool started[64] = {0};
  for (int t = 0; t < threads; t++) {
    w[t] = (struct worker){f, args, grid, total * t / threads, total * (t + 1) / threads, alloc, false, 0, NULL};
    if (t > 0) started[t] = pthread_create(&tid[t], NULL, run_programs, &w[t]) == 0;
  }
  run_programs(&w[0]);
  bool ok = w[0].ok;
  for (int t = 1; t < threads; t++) {
    if (started[t]) {
      pthread_join(tid[t], NULL);
    } else {
      run_programs(&w[t]); /* thread creation failed: run its share here */
    }
    ok &= w[t].ok;
  }
  if (!ok) sb_puts(err, "out of memory for the interpreter's buffers");
  return ok;
}
