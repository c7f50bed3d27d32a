/* gpu.c - the CUDA side of the runtime: driver start-up, per-specialization code
 * generation and module loading, argument packing, launching and event timing.
 *
 * A kernel's generic IR is compiled to target code once per specialization: the facts
 * about its arguments that change the generated code (each tensor's base alignment, which
 * strides are 1 or 16-byte multiples, which sizes are multiples of 16). The facts are the
 * key of the kernel's specialization list, as Triton's are; a 4095-wide matrix gets a
 * variant with narrow accesses, a 4096-wide one the vectorized variant.
 *
 * The driver is loaded on first use (a context works without one); the device's primary
 * context is retained so that a host program using the CUDA runtime or PyTorch shares it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cg.h"
#include "driver.h"
#include "passes.h"
#include "rt.h"
#include "smem.h"

bool rt_cuda_ready(tile_context *ctx) {
  char err[1024];
  if (!ctx->cuda_tried) {
    ctx->cuda_tried = true;
    int rc = rt_cuda_load(&ctx->cuda, err, sizeof err);
    if (rc == 0) rc = rt_cuda_device_open(&ctx->cuda, ctx->cuda_ordinal, &ctx->dev, err, sizeof err);
    if (rc == 0 && ctx->dev.cc_major < 8) {
      snprintf(err, sizeof err, "device %d (%s) has compute capability %d.%d; sm_80 or newer is required",
               ctx->cuda_ordinal, ctx->dev.name, ctx->dev.cc_major, ctx->dev.cc_minor);
      rc = -1;
    }
    ctx->cuda_ok = rc == 0;
    if (ctx->cuda_ok) {
      ctx->dev_target = tl_target_for_cc(ctx->dev.cc_major, ctx->dev.cc_minor);
      snprintf(ctx->dev_arch, sizeof ctx->dev_arch, "%s", ctx->dev_target->name);
    }
    else
      snprintf(ctx->cuda_err, sizeof ctx->cuda_err, "%s", err);
  }
  if (!ctx->cuda_ok) snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", ctx->cuda_err);
  return ctx->cuda_ok;
}


/* ---- specialization facts ---- */

static int pow2_align(uint64_t x) {
  int a = 1;
  while (a < 16 && x % (uint64_t)(a * 2) == 0) a *= 2;
  return a;
}

enum { MAX_UNIFORM_IFS = 8, MAX_UNIFORM_VALS = 256 };

/* Scalars a launch decides: values computed by scalar elementwise ops, casts and selects
 * from constants and shape parameters alone. */
struct uniform {
  ir_val kv[MAX_UNIFORM_VALS];
  ir_scalar ks[MAX_UNIFORM_VALS];
  unsigned n;
};

/* Whether every operand of op is decided by the launch (a[] receives them). */
static bool uniform_args(const struct ir_func *f, const struct rt_bound *b, const struct uniform *u,
                         const struct ir_op *op, ir_scalar a[3]) {
  if (op->nargs > 3) return false;
  for (uint32_t k = 0; k < op->nargs; k++) {
    const struct ir_value *v = &f->values.v[op->args[k]];
    if (v->kind == IR_VAL_PARAM) {
      if (f->params.v[v->index].kind != IR_PARAM_SHAPE) return false;
      a[k] = b->iargs[v->index].scalar;
      continue;
    }
    bool known = false;
    for (unsigned j = u->n; j-- > 0 && !known;)
      if (u->kv[j] == op->args[k]) a[k] = u->ks[j], known = true;
    if (!known) return false;
  }
  return true;
}

/* op's scalar result from its operands a[] (constants, casts, selects and elementwise ops). */
static bool scalar_eval(const struct ir_func *f, const struct ir_op *op, const ir_scalar *a, ir_scalar *r) {
  if (op->nres != 1 || !ir_type_is_scalar(ir_vtype(f, op->res))) return false;
  ir_dtype rdt = (ir_dtype)ir_vtype(f, op->res)->dtype;
  *r = (ir_scalar){0};
  if (op->code == IR_CONST) {
    if (ir_dtype_is_float(rdt)) r->f = op->f;
    else r->i = op->i[0];
  } else if (op->code == IR_CAST) {
    *r = ir_eval_cast((ir_dtype)ir_vtype(f, op->args[0])->dtype, rdt, a[0]);
  } else if (op->code == IR_SELECT) {
    *r = a[0].i ? a[1] : a[2];
  } else if (!(ir_ops[op->code].flags & OPF_ELEM) || !op->nargs ||
             !ir_eval_elem((ir_opcode)op->code, (ir_dtype)ir_vtype(f, op->args[0])->dtype, a, r)) {
    return false;
  }
  return true;
}

/* Records op's result when it is a scalar the launch decides (its operands a[] are). */
static void uniform_eval(const struct ir_func *f, struct uniform *u, const struct ir_op *op, const ir_scalar *a) {
  ir_scalar r;
  if (u->n == MAX_UNIFORM_VALS || !scalar_eval(f, op, a, &r)) return;
  u->kv[u->n] = op->res;
  u->ks[u->n++] = r;
}

/* The top-level ifs of f's body whose condition the launch decides (struct uniform: `if N
 * <= BN` choosing between a one-pass and a looped form of a row kernel). Returns their
 * number (at most MAX_UNIFORM_IFS) and sets bit i of *bits when the i-th one's condition
 * holds. apply: each such condition becomes a constant, so that the code of the branch not
 * taken (and the registers it would hold) goes (the generic pipeline; fold_decided). */
static unsigned uniform_ifs(struct ir_func *f, const struct rt_bound *b, uint8_t *bits, bool apply) {
  struct uniform u;
  u.n = 0;
  unsigned nifs = 0;
  *bits = 0;
  if (f->stage != IR_STAGE_GENERIC) return 0; /* GPU IR given as text: compiled as it is */
  const struct ir_block *body = &f->blocks.v[IR_BODY_BLOCK];
  /* every launch's path: most kernels have no top-level if, and then nothing is evaluated */
  uint32_t last_if = body->ops.n;
  while (last_if > 0 && f->ops.v[body->ops.v[last_if - 1]].code != IR_IF) last_if--;
  for (uint32_t i = 0; i < last_if && nifs < MAX_UNIFORM_IFS; i++) {
    uint32_t id = body->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    ir_scalar a[3] = {{0}, {0}, {0}};
    if (!uniform_args(f, b, &u, op, a)) continue;
    if (op->code != IR_IF) {
      uniform_eval(f, &u, op, a);
      continue;
    }
    if (!op->nargs) continue;
    if (a[0].i) *bits |= (uint8_t)(1u << nifs);
    nifs++;
    if (apply) {
      struct ir_builder bb;
      ir_builder_before(&bb, f, id);
      ir_val c = ir_const_int(&bb, f->values.v[f->ops.v[id].args[0]].type, a[0].i != 0);
      ir_val args[1] = {c};
      ir_op_set_args(f, id, args, 1);
    }
  }
  return nifs;
}

/* The trip count of for op `op` when u and the launch decide its bounds, 1 otherwise. */
static double loop_trips(const struct ir_func *f, const struct rt_bound *b, const struct uniform *u,
                         const struct ir_op *op) {
  ir_scalar a[3] = {{0}, {0}, {0}};
  struct ir_op bounds = *op;
  bounds.nargs = 3;
  if (op->nargs < 3 || !uniform_args(f, b, u, &bounds, a) || a[2].i <= 0) return 1;
  return a[1].i > a[0].i ? (double)((a[1].i - a[0].i + a[2].i - 1) / a[2].i) : 0;
}

/* Adds to e the global bytes that block blk's loads and gathers read when run `trips`
 * times (loops with bounds the launch decides run their trip count; others once; both
 * branches of an if count), and the largest tile any op there produces. */
static void estimate_block(const struct ir_func *f, const struct rt_bound *b, struct uniform *u, uint32_t blk,
                           double trips, struct rt_estimate *e) {
  const struct ir_block *bl = &f->blocks.v[blk];
  for (uint32_t i = 0; i < bl->ops.n; i++) {
    uint32_t id = bl->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    ir_scalar a[3] = {{0}, {0}, {0}};
    bool known = op->code != IR_FOR && uniform_args(f, b, u, op, a);
    for (uint32_t r = 0; r < op->nres; r++) {
      const struct ir_type *t = ir_vtype(f, op->res + r);
      if (t->kind == IR_TY_TILE && ir_type_numel(t) > e->largest_tile) e->largest_tile = ir_type_numel(t);
    }
    if ((op->code == IR_LOAD || op->code == IR_GATHER) && op->nres) {
      const struct ir_type *t = ir_vtype(f, op->res);
      e->load_bytes += trips * (double)ir_type_numel(t) * ir_dtype_bytes((ir_dtype)t->dtype);
    }
    if (op->code == IR_FOR) {
      ir_scalar lim[3] = {{0}, {0}, {0}};
      struct ir_op bounds = *op;
      bounds.nargs = 3;
      double n = loop_trips(f, b, u, op);
      if (op->nargs >= 3 && uniform_args(f, b, u, &bounds, lim) && lim[2].i > 0 && n > 0 &&
          (e->min_trips == 0 || (int64_t)n < e->min_trips))
        e->min_trips = (int64_t)n;
      estimate_block(f, b, u, op->region, trips * n, e);
      continue;
    }
    for (uint32_t r = 0; r < op->nregions; r++) estimate_block(f, b, u, op->region + r, trips, e);
    if (known) uniform_eval(f, u, op, a);
  }
}

/* Value v when the launch decides it (a shape size, a constant, or scalar ops of those, at
 * most `depth` deep). */
static bool uniform_value(const struct ir_func *f, const struct rt_bound *b, ir_val v, int depth, ir_scalar *out) {
  const struct ir_value *val = &f->values.v[v];
  if (val->kind == IR_VAL_PARAM) {
    if (f->params.v[val->index].kind != IR_PARAM_SHAPE) return false;
    *out = b->iargs[val->index].scalar;
    return true;
  }
  uint32_t d = ir_def_op(f, v);
  if (!d || depth == 0) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (op->nargs > 3 || op->nregions) return false;
  ir_scalar a[3] = {{0}, {0}, {0}};
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!uniform_value(f, b, op->args[k], depth - 1, &a[k])) return false;
  return scalar_eval(f, op, a, out);
}

/* The trip count of loop `loop` when the launch decides its bounds (0 otherwise). */
static int64_t uniform_trips(const struct ir_func *f, const struct rt_bound *b, uint32_t loop) {
  ir_scalar lb, ub, step;
  const struct ir_op *op = &f->ops.v[loop];
  if (op->code != IR_FOR || !uniform_value(f, b, op->args[0], 8, &lb) || !uniform_value(f, b, op->args[1], 8, &ub) ||
      !uniform_value(f, b, op->args[2], 8, &step) || step.i <= 0 || ub.i <= lb.i)
    return 0;
  return (ub.i - lb.i + step.i - 1) / step.i;
}

/* The iterations of the innermost loops in block blk run `mult` times (the block's own when
 * it holds no loop: *loops stays false), each loop's trip count from the scalars that the
 * launch and the program's coordinates decide (u); a loop whose bounds are not decided
 * counts once, an if its heavier branch. */
static double block_trips(const struct ir_func *f, const struct rt_bound *b, struct uniform *u, uint32_t blk,
                          const int64_t pid[3], double mult, bool *loops) {
  const struct ir_block *bl = &f->blocks.v[blk];
  double total = 0;
  *loops = false;
  for (uint32_t i = 0; i < bl->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[bl->ops.v[i]];
    ir_scalar a[3] = {{0}, {0}, {0}};
    if (op->code == IR_PROGRAM_ID || op->code == IR_NUM_PROGRAMS) {
      int ax = (int)op->i[0] & 3;
      if (u->n == MAX_UNIFORM_VALS || ax > 2) continue;
      u->kv[u->n] = op->res;
      u->ks[u->n] = (ir_scalar){0};
      u->ks[u->n++].i = op->code == IR_PROGRAM_ID ? pid[ax] : b->grid[ax];
      continue;
    }
    if (op->code == IR_FOR) {
      bool inner;
      double t = block_trips(f, b, u, op->region, pid, mult * loop_trips(f, b, u, op), &inner);
      total += t;
      *loops = true;
      continue;
    }
    if (op->nregions) {
      double most = 0;
      bool any = false;
      for (uint32_t r = 0; r < op->nregions; r++) {
        bool inner;
        double t = block_trips(f, b, u, op->region + r, pid, mult, &inner);
        if (inner && t > most) most = t;
        any |= inner;
      }
      if (any) total += most, *loops = true;
      continue;
    }
    /* only scalars can decide a bound: tile ops are not looked up */
    if (op->nres == 1 && ir_type_is_scalar(ir_vtype(f, op->res)) && uniform_args(f, b, u, op, a)) uniform_eval(f, u, op, a);
  }
  return *loops ? total : mult;
}

double rt_tile_trips(const struct ir_func *f, const struct rt_bound *b, const int64_t pid[3]) {
  struct uniform u;
  u.n = 0;
  bool loops;
  return block_trips(f, b, &u, IR_BODY_BLOCK, pid, 1, &loops);
}

/* The elements from tensor x's base to its last one, inclusive (1 when it is empty); -1 when
 * a stride is negative. */
int64_t rt_tensor_span(const struct interp_tensor *x) {
  int64_t span = 1;
  for (int d = 0; d < x->rank; d++) {
    if (x->shape[d] <= 0) return 1;
    if (x->strides[d] < 0) return -1;
    if (x->shape[d] > 1 && x->strides[d] > (INT64_MAX - span) / (x->shape[d] - 1)) return INT64_MAX;
    span += (x->shape[d] - 1) * x->strides[d];
  }
  return span;
}

/* Fills the facts of every tensor and shape parameter of `f` from the bound arguments and
 * encodes them into key, with the conditions the launch decides (uniform_ifs) and the trip
 * count of the loops row-cache would cache (cache_loop: an op of f, or 0). */
static uint32_t spec_facts(struct ir_func *f, const struct rt_bound *b, const tile_kernel *k, uint8_t *key, uint32_t cap,
                           bool apply) {
  uint32_t cache_loop = k->cache_loop;
  uint32_t n = 0;
  uint8_t taken;
  unsigned nifs = uniform_ifs(f, b, &taken, apply);
  if (nifs) key[n++] = (uint8_t)(0x80u | nifs), key[n++] = taken;
  for (uint32_t i = 0; i < f->params.n && n + 12 < cap; i++) {
    struct ir_param *p = &f->params.v[i];
    const struct interp_arg *a = &b->iargs[i];
    if (p->kind == IR_PARAM_TENSOR) {
      const struct interp_tensor *t = &a->tensor;
      int eb = ir_dtype_bytes((ir_dtype)ir_vtype(f, p->value)->dtype);
      struct ir_tensor_facts fa = {0};
      fa.align = (uint8_t)(t->data ? pow2_align((uint64_t)(uintptr_t)t->data) : 16);
      uint8_t bits = 0;
      for (int d = 0; d < t->rank; d++) {
        bool size1 = t->shape[d] <= 1;
        fa.stride1[d] = t->strides[d] == 1;
        fa.div16[d] = size1 || (t->strides[d] * eb) % 16 == 0;
        bits |= (uint8_t)((fa.stride1[d] ? 1 : 0) << (2 * d));
        bits |= (uint8_t)((fa.div16[d] ? 2 : 0) << (2 * d));
      }
      int64_t span = rt_tensor_span(t);
      fa.span31 = span > 0 && span <= INT32_MAX;
      if (apply) p->facts = fa;
      key[n++] = (uint8_t)(fa.align | fa.span31 << 7);
      key[n++] = bits;
    } else if (p->kind == IR_PARAM_SHAPE) {
      int64_t v = a->scalar.i;
      uint8_t d16 = v % 16 == 0;
      /* a divisor's size is specialized on being a power of two (canonicalize: shifts) */
      uint8_t p2 = p->divisor && v > 0 && (v & (v - 1)) == 0;
      if (apply) p->div16 = d16, p->pow2 = p2;
      key[n++] = (uint8_t)(d16 | p2 << 1);
    }
  }
  if (k->long_tiles_matter && n + 1 <= cap) {
    /* the heavier of the first and the last tile (a causal kernel deals its tiles longest
     * first, or last) */
    int64_t first[3] = {0, 0, 0}, last[3] = {b->grid[0] - 1, b->grid[1] - 1, b->grid[2] - 1};
    double t0 = rt_tile_trips(f, b, first), t1 = rt_tile_trips(f, b, last);
    uint8_t lt = (t0 > t1 ? t0 : t1) > CG_WALK_MAX_TRIPS;
    key[n++] = (uint8_t)(0x40u | lt);
    if (apply) f->long_tiles = lt;
  }
  if (cache_loop && n + 2 <= cap) { /* last: key[0]'s high bit marks decided conditions */
    int64_t trips = uniform_trips(f, b, cache_loop);
    if (trips > 65535 || !row_cache_fits(k->target, trips * k->cache_chunk)) trips = 0; /* (no cache: 0) */
    key[n++] = (uint8_t)(trips & 0xff), key[n++] = (uint8_t)(trips >> 8);
    if (apply) f->cache_trips = (uint16_t)trips;
  }
  return n;
}

/* Compiles f (already specialized: its facts set) for the target into PTX in arena a. IR
 * that is already GPU IR (textual input at a later stage) goes straight to codegen. */
static tile_status compile_ptx(tile_context *ctx, struct ir_func *f, const struct tl_target *target,
                               const struct tl_schedule *sched, enum cg_output out, struct pass_options *po,
                               struct arena *a, struct cg_result *res) {
  struct tl_error e;
  sb_init(&e.msg, a);
  enum tl_result r = tl_compile_gpu(f, target, sched, out, po, a, res, &e);
  return r ? rt_fail(ctx, r, &e) : TILE_OK;
}

tile_status rt_gpu_emit_code(tile_context *ctx, struct ir_func *f, const struct tl_target *target,
                             const struct tl_schedule *sched, enum cg_output out, bool assume_unaligned,
                             struct pass_options *po, struct arena *a, struct cg_result *res) {
  if (f->stage != IR_STAGE_GENERIC) target = f->target; /* GPU IR names its own target */
  /* ahead of time the arguments are unknown: assume the common case (16-byte aligned
   * bases, contiguous rows, 16-byte multiple strides and sizes); assume_unaligned drops
   * the strides and sizes (a 4095-wide matrix), not the bases' alignment. The launchers
   * of tilec aot check exactly these facts (aot.c). */
  tl_assume_common_facts(f, assume_unaligned);
  return compile_ptx(ctx, f, target, sched, out, po, a, res);
}

tile_status rt_gpu_emit(tile_context *ctx, struct ir_func *f, const struct tl_target *target,
                        const struct tl_schedule *sched, tile_emit_kind what, const tile_emit_options *eo,
                        struct pass_options *po, struct strbuf *out) {
  struct cg_result res;
  tile_status st = rt_gpu_emit_code(ctx, f, target, sched, what == TILE_EMIT_LLVM ? CG_OUT_LLVM : CG_OUT_PTX,
                                    eo->assume_unaligned != 0, po, out->arena, &res);
  if (st) return st;
  sb_putn(out, res.text, res.len);
  return TILE_OK;
}

static tile_status load_spec(tile_context *ctx, tile_kernel *k, const struct rt_artifact *a, struct rt_spec *sp);

/* The in-memory list first (every launch's path); then the on-disk module cache (a hit
 * skips the GPU passes, LLVM and the driver's JIT: the stored cubin is loaded); then a
 * build, stored on disk for the next process. With the disk cache off (or TILE_NO_CACHE)
 * the PTX is loaded directly, as before the cache existed. */
static struct rt_spec *find_or_build_spec(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                                          tile_status *st) {
  uint8_t key[64];
  /* the key first, without touching the IR: this is every launch's path, so it must cost
   * microseconds (cloning the kernel's IR here made small launches measurably slower) */
  uint32_t klen = spec_facts(k->ir, b, k, key, sizeof key, false);
  for (uint32_t i = 0; i < k->specs.n; i++)
    if (k->specs.v[i].facts_len == klen && memcmp(k->specs.v[i].facts, key, klen) == 0) {
      *st = TILE_OK;
      return &k->specs.v[i];
    }
  /* room for the new entry first, so that nothing built or loaded below can be lost to a
   * failed allocation (k's arena has no recovery point here) */
  if (!VEC_TRY_RESERVE(&k->arena, k->specs, 1)) {
    *st = rt_error(ctx, TILE_NOMEM, "out of memory");
    return NULL;
  }
  double t0 = tl_now_ms();
  double tr0 = rt_trace_begin(ctx, k->name, k->config, "compile");
  bool disk = !(k->flags & TILE_NO_CACHE) && ctx->cache_dir[0];
  struct rt_gpu_target t;
  rt_gpu_target_of(ctx, disk, &t);
  struct rt_artifact art;
  struct rt_spec sp;
  *st = rt_gpu_build(k, b, &t, &art);
  if (!*st) *st = load_spec(ctx, k, &art, &sp);
  if (*st && art.from_disk) { /* a stored image the driver refuses: build it afresh */
    ctx->cache_stats.rejected++;
    rt_cache_note(ctx, "a module of '%s' from the cache was refused by the driver (%s); rebuilt", k->name, ctx->errmsg);
    rt_artifact_free(&art);
    t.cache_dir = NULL;
    *st = rt_gpu_build(k, b, &t, &art);
    if (!*st) *st = load_spec(ctx, k, &art, &sp);
  } else {
    rt_gpu_cache_outcome(ctx, &art);
  }
  if (!*st && disk && !art.from_disk) rt_gpu_store(ctx, k, &art);
  sp.cache_hit = art.from_disk;
  rt_artifact_free(&art);
  rt_trace_end(ctx, tr0, "compile", k->name, k->config, "compile", "\"target\":\"%s\",\"from_disk_cache\":%s,\"ok\":%s",
               k->target ? k->target->name : "", sp.cache_hit && !*st ? "true" : "false", *st ? "false" : "true");
  if (*st) return NULL;
  sp.compile_ms = tl_now_ms() - t0;
  VEC_PUSH(&k->arena, k->specs, sp); /* reserved above: allocates nothing */
  return &VEC_LAST(k->specs);
}

/* Device-side argument checks: alignment to the element size and device residency. */
static tile_status check_device_args(tile_context *ctx, tile_kernel *k, const struct rt_bound *b) {
  struct ir_func *f = k->ir;
  for (unsigned u = 0; u < k->nparams; u++) {
    const struct ir_param *p = &f->params.v[k->param_ir[u]];
    if (p->kind != IR_PARAM_TENSOR) continue;
    const struct interp_tensor *t = &b->iargs[k->param_ir[u]].tensor;
    if (!t->data) continue;
    uintptr_t addr = (uintptr_t)t->data;
    int eb = ir_dtype_bytes(t->dtype);
    if (addr % (uintptr_t)eb)
      return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): pointer %p is not aligned to %d bytes", u,
                      p->name, t->data, eb);
    /* the residency check costs a driver call; pointers seen in the previous launch of
     * this kernel were already checked */
    bool seen = false;
    for (unsigned c = 0; c < TL_ARRAY_LEN(k->checked_ptrs); c++) seen |= k->checked_ptrs[c] == addr;
    if (seen) continue;
    int is_dev = 0, ordinal = -1;
    char err[512];
    if (rt_cuda_pointer_info(&ctx->cuda, (CUdeviceptr)addr, &is_dev, &ordinal, err, sizeof err) == 0 &&
        (!is_dev || (ordinal >= 0 && ordinal != ctx->cuda_ordinal)))
      return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): %p is not memory of CUDA device %d%s", u,
                      p->name, t->data, ctx->cuda_ordinal, is_dev ? "" : " (a host pointer?)");
    k->checked_ptrs[k->next_checked++ % TL_ARRAY_LEN(k->checked_ptrs)] = addr;
  }
  return TILE_OK;
}

tile_status rt_gpu_check_args(tile_context *ctx, tile_kernel *k, const struct rt_bound *b) {
  return check_device_args(ctx, k, b);
}

struct packed {
  void *ptrs[256 + CG_MAX_TMAPS];
  uint64_t storage[256];
  CUtensorMap maps[CG_MAX_TMAPS]; /* 128-byte aligned, as the driver reads them */
  unsigned n;
};

/* CUtensorMapDataType of an element type (fp8 travels as bytes). */
int rt_tmap_dtype(ir_dtype dt) {
  switch (dt) {
  case DT_F16: return 6;   /* CU_TENSOR_MAP_DATA_TYPE_FLOAT16 */
  case DT_BF16: return 9;  /* BFLOAT16 */
  case DT_F32: return 7;   /* FLOAT32 */
  case DT_I32: return 3;   /* INT32 */
  case DT_U32: return 2;   /* UINT32 */
  case DT_I16: return 1;   /* UINT16 */
  default: return 0;       /* UINT8: i8, fp8 */
  }
}

/* Encodes the tensor map of descriptor t for tensor x into out (cuTensorMapEncodeTiled:
 * dimension 0 is the innermost; strides in bytes for dimensions 1 and up; out-of-bounds
 * elements read as zeros). */
static tile_status encode_tmap(tile_context *ctx, tile_kernel *k, const struct cg_tmap *t,
                               const struct interp_tensor *x, uint64_t out[16]) {
  const struct ir_param *p = &k->ir->params.v[t->param];
  if (!ctx->cuda.cuTensorMapEncodeTiled)
    return rt_error(ctx, TILE_UNSUPPORTED, "'%s': the driver has no cuTensorMapEncodeTiled (TMA)", p->name);
  int rank = t->rank, eb = ir_dtype_bytes((ir_dtype)t->dtype);
  uint64_t dim[IR_MAX_RANK], stride[IR_MAX_RANK];
  uint32_t box[IR_MAX_RANK], es[IR_MAX_RANK];
  if (t->flat) { /* 1-d over the elements from the base to the last (the span31 fact) */
    dim[0] = (uint64_t)rt_tensor_span(x);
    box[0] = t->box[rank - 1];
    es[0] = 1;
    rank = 1;
  }
  for (int j = 0; j < rank && !t->flat; j++) {
    int d = rank - 1 - j;
    dim[j] = x->shape[d] > 0 ? (uint64_t)x->shape[d] : 1; /* an empty dimension is never read */
    box[j] = t->box[d];
    es[j] = 1;
    if (j == 0) continue;
    int64_t s = x->strides[d] * eb;
    /* a dimension of size 1 is never stepped: any stride the driver accepts will do */
    if (x->shape[d] <= 1) s = (int64_t)(((j == 1 ? dim[0] * (uint64_t)eb : stride[j - 2] * dim[j - 1]) + 15) & ~15ull);
    if (s <= 0 || s % 16)
      return rt_error(ctx, TILE_BAD_LAUNCH, "argument '%s': stride %lld of dimension %d is not a positive multiple of 16 bytes (TMA)",
                      p->name, (long long)x->strides[d], d);
    stride[j - 1] = (uint64_t)s;
  }
  int swz = t->swizzle == 128 ? 3 : t->swizzle == 64 ? 2 : t->swizzle == 32 ? 1 : 0;
  CUtensorMap map;
  CUresult r = ctx->cuda.cuTensorMapEncodeTiled(&map, rt_tmap_dtype((ir_dtype)t->dtype), (uint32_t)rank, x->data, dim,
                                                stride, box, es, 0 /* no interleave */, swz, 2 /* L2 128B */,
                                                0 /* zeros out of bounds */);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    if (ctx->cuda.cuGetErrorName) ctx->cuda.cuGetErrorName(r, &name);
    return rt_error(ctx, TILE_BAD_LAUNCH, "argument '%s': cuTensorMapEncodeTiled failed (%s) for a %d-d box", p->name,
                    name ? name : "?", rank);
  }
  memcpy(out, &map, 128);
  return TILE_OK;
}

/* Packs the arguments in the codegen's parameter convention (cg.h): the regular
 * parameters, then the tensor maps of the specialization's TMA descriptors (cached per
 * tensor). */
static tile_status pack_args(tile_context *ctx, tile_kernel *k, struct rt_spec *sp, const struct rt_bound *b,
                             struct packed *pk) {
  struct ir_func *f = k->ir;
  pk->n = 0;
  for (uint32_t i = 0; i < f->params.n && pk->n < TL_MAX_PARAM_SLOTS; i++) { /* the front end's limit */
    const struct ir_param *p = &f->params.v[i];
    const struct interp_arg *a = &b->iargs[i];
    uint64_t *slot = &pk->storage[pk->n];
    if (p->kind == IR_PARAM_TENSOR) {
      *slot = (uint64_t)(uintptr_t)a->tensor.data;
      pk->ptrs[pk->n] = slot;
      pk->n++;
      for (int d = 0; d < ir_vtype(f, p->value)->rank; d++) {
        pk->storage[pk->n] = (uint64_t)a->tensor.strides[d];
        pk->ptrs[pk->n] = &pk->storage[pk->n];
        pk->n++;
      }
      continue;
    }
    ir_dtype dt = (ir_dtype)ir_vtype(f, p->value)->dtype;
    if (p->kind == IR_PARAM_SHAPE || dt == DT_I32 || dt == DT_U32 || dt == DT_BOOL || dt == DT_I8 || dt == DT_I16) {
      uint32_t v = (uint32_t)a->scalar.i; /* the low 32 bits: i32 and u32 alike */
      memcpy(slot, &v, 4);
    } else if (dt == DT_I64) {
      memcpy(slot, &a->scalar.i, 8);
    } else if (dt == DT_F64) {
      memcpy(slot, &a->scalar.f, 8);
    } else {
      float v = (float)a->scalar.f;
      memcpy(slot, &v, 4);
    }
    pk->ptrs[pk->n] = slot;
    pk->n++;
  }
  for (unsigned i = 0; sp && i < sp->code.ntmaps; i++) {
    const struct cg_tmap *t = &sp->code.tmaps[i];
    const struct interp_tensor *x = &b->iargs[t->param].tensor;
    struct rt_tmap_cache *c = &sp->maps[i];
    bool hit = c->valid && c->data == (uint64_t)(uintptr_t)x->data;
    for (int d = 0; hit && d < t->rank; d++) hit = c->shape[d] == x->shape[d] && c->strides[d] == x->strides[d];
    if (!hit) {
      tile_status st = encode_tmap(ctx, k, t, x, c->map);
      if (st) {
        c->valid = false;
        return st;
      }
      c->valid = true;
      c->data = (uint64_t)(uintptr_t)x->data;
      for (int d = 0; d < t->rank; d++) c->shape[d] = x->shape[d], c->strides[d] = x->strides[d];
    }
    memcpy(&pk->maps[i], c->map, 128);
    pk->ptrs[pk->n++] = &pk->maps[i];
  }
  return TILE_OK;
}

uint64_t rt_persistent_programs(uint64_t tiles, uint64_t slots, int persistent) {
  /* persistent=2: beyond a few waves, or one to a few tiles per program, one program per tile
   * (the hardware scheduler balances) */
  if (persistent == 2 && (tiles > CG_FEW_WAVES * slots || (tiles > slots && tiles < CG_WALK_MIN_WAVES * slots)) &&
      tiles <= INT32_MAX)
    slots = tiles;
  return tiles < slots ? tiles : slots;
}

/* The launch grid: the kernel's, or for a persistent kernel as many programs as fit on
 * the device at once (never more than there are tiles), along x. */
static void launch_grid(tile_context *ctx, const struct rt_spec *sp, const struct rt_bound *b, unsigned grid[3]) {
  grid[0] = (unsigned)b->grid[0];
  grid[1] = (unsigned)b->grid[1];
  grid[2] = (unsigned)b->grid[2];
  if (sp->code.cluster > 1) grid[0] *= sp->code.cluster; /* each program is a cluster of CTAs */
  if (!sp->code.persistent) return;
  uint64_t tiles = (uint64_t)b->grid[0] * (uint64_t)b->grid[1] * (uint64_t)b->grid[2];
  uint64_t slots = (uint64_t)(ctx->dev.sm_count > 0 ? ctx->dev.sm_count : 1) * (uint64_t)(sp->occupancy > 0 ? sp->occupancy : 1);
  grid[0] = (unsigned)rt_persistent_programs(tiles, slots, sp->code.persistent);
  grid[1] = grid[2] = 1;
}

static tile_status prepare_checked(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, bool check,
                                   struct rt_spec **out) {
  if (!rt_cuda_ready(ctx)) return TILE_NO_DRIVER;
  tile_status st = check ? check_device_args(ctx, k, b) : TILE_OK;
  if (st) return st;
  for (int d = 0; d < 3; d++)
    if (b->grid[d] > (d == 0 ? INT32_MAX : 65535))
      return rt_error(ctx, TILE_BAD_LAUNCH, "grid dimension %d is %lld, above the CUDA limit of %d", d,
                      (long long)b->grid[d], d == 0 ? INT32_MAX : 65535);
  double t0 = tl_now_ms();
  uint32_t before = k->specs.n;
  struct rt_spec *sp = find_or_build_spec(ctx, k, b, &st);
  if (!sp) return st;
  k->stats.grid[0] = (unsigned)b->grid[0];
  k->stats.grid[1] = (unsigned)b->grid[1];
  k->stats.grid[2] = (unsigned)b->grid[2];
  k->stats.threads = sp->threads;
  k->stats.shared_bytes = sp->smem;
  k->stats.registers = sp->regs;
  k->stats.local_bytes = sp->local_bytes;
  k->stats.blocks_per_sm = sp->occupancy;
  k->stats.multiprocessors = ctx->dev.sm_count > 0 ? ctx->dev.sm_count : -1;
  k->stats.repacked = b->repacked;
  k->stats.cache_hit = k->specs.n == before ? 1 : sp->cache_hit ? 2 : 0;
  k->stats.compile_ms = k->stats.cache_hit == 1 ? tl_now_ms() - t0 : sp->compile_ms;
  k->last_config = k->config;
  *out = sp;
  return TILE_OK;
}

static tile_status prepare(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, struct rt_spec **out) {
  return prepare_checked(ctx, k, b, true, out);
}

tile_status rt_gpu_prepare_spec(tile_context *ctx, tile_kernel *k, const struct rt_bound *b) {
  struct rt_spec *sp;
  return prepare_checked(ctx, k, b, false, &sp);
}

tile_status rt_gpu_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                          bool launch) {
  struct rt_repack_plan plan;
  if (rt_cuda_ready(ctx) && rt_repack_plan(ctx, k, b, stream, &plan))
    return rt_repack_launch(ctx, k, b, &plan, stream, launch);
  return rt_gpu_launch_direct(ctx, k, b, stream, launch);
}

tile_status rt_gpu_launch_direct(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                                 bool launch) {
  if (k->flags & (TILE_AUTOTUNE | TILE_AUTOCONFIG)) { /* runs the kernel chosen for these arguments */
    tile_kernel *run = k;
    tile_status st = rt_autotune_pick(ctx, k, b, stream, &run);
    if (st || run != k) return st ? st : rt_autotune_launch(ctx, k, run, b, stream, launch);
    k->last_config = NULL; /* this shape runs k's own configuration (tile_kernel_tuned_config) */
  }
  struct rt_spec *sp;
  tile_status st = prepare(ctx, k, b, &sp);
  if (st || !launch) return st;
  if (b->grid[0] == 0 || b->grid[1] == 0 || b->grid[2] == 0) return TILE_OK;
  if (sp->code.cluster > 1 && (uint64_t)b->grid[0] * sp->code.cluster > INT32_MAX)
    return rt_error(ctx, TILE_BAD_LAUNCH, "grid dimension 0 is %lld programs of %u CTAs each (clusters), above the CUDA limit of %d CTAs",
                    (long long)b->grid[0], (unsigned)sp->code.cluster, INT32_MAX);
  struct packed pk;
  st = pack_args(ctx, k, sp, b, &pk);
  if (st) return st;
  unsigned grid[3];
  launch_grid(ctx, sp, b, grid);
  unsigned block[3] = {sp->threads, 1, 1};
  char err[1024];
  double tl = rt_trace_begin(ctx, k->name, k->config, "launch");
  int rc = rt_cuda_launch(&ctx->cuda, sp->func, grid, block, sp->smem, (CUstream)stream, pk.ptrs, sp->code.grid_dep,
                          err, sizeof err);
  rt_trace_end(ctx, tl, "launch", k->name, k->config, "launch",
               "\"grid\":\"%u,%u,%u\",\"threads\":%u,\"shared_bytes\":%u,\"stream\":\"%p\"", grid[0], grid[1],
               grid[2], block[0], sp->smem, stream);
  if (rc) return rt_error(ctx, TILE_CUDA, "launching '%s': %s", k->name, err);
  return TILE_OK;
}

/* One timed launch of rt_gpu_bench: the prepared specialization, or (plan) the repacking
 * path. Driver failures return nonzero with err; the repacking path's errors go to *st. */
static int enqueue(tile_context *ctx, tile_kernel *k, struct rt_spec *sp, const struct rt_repack_plan *plan,
                   const struct rt_bound *b, const unsigned grid[3], const unsigned block[3], CUstream s,
                   struct packed *pk, char *err, size_t errlen, tile_status *st) {
  if (plan) {
    *st = rt_repack_launch(ctx, k, b, plan, s, true);
    return 0;
  }
  return rt_cuda_launch(&ctx->cuda, sp->func, grid, block, sp->smem, s, pk->ptrs, sp->code.grid_dep, err, errlen);
}

tile_status rt_gpu_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         const tile_bench_options *o, double *t, int *n) {
  *n = 0;
  struct arena scratch;
  jmp_buf oom;
  arena_init(&scratch, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&scratch);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  struct rt_bound b;
  tile_status st = rt_bind_args(ctx, k, args, nargs, &scratch, &b);
  scratch.oom = NULL; /* nothing below allocates from it (no jump past the events below) */
  if (!st && (k->flags & (TILE_AUTOTUNE | TILE_AUTOCONFIG))) { /* times the chosen kernel */
    tile_kernel *run = k;
    st = rt_autotune_pick(ctx, k, &b, o->stream, &run);
    if (!st && run != k) {
      arena_free(&scratch);
      st = rt_gpu_bench(ctx, run, args, nargs, o, t, n);
      k->stats = run->stats;
      k->last_config = run->config;
      return st;
    }
  }
  /* with repacking, each timed launch is the copies and the kernel */
  struct rt_repack_plan plan;
  bool repack = !st && rt_cuda_ready(ctx) && rt_repack_plan(ctx, k, &b, o->stream, &plan);
  struct rt_spec *sp = NULL;
  if (!st && !repack) st = prepare(ctx, k, &b, &sp);
  if (st) {
    arena_free(&scratch);
    return st;
  }
  struct packed pk;
  if (sp) st = pack_args(ctx, k, sp, &b, &pk);
  if (st) {
    arena_free(&scratch);
    return st;
  }
  unsigned grid[3] = {(unsigned)b.grid[0], (unsigned)b.grid[1], (unsigned)b.grid[2]};
  if (sp) launch_grid(ctx, sp, &b, grid);
  unsigned block[3] = {sp ? sp->threads : 0, 1, 1};
  char err[1024];
  CUevent e0 = NULL, e1 = NULL;
  CUstream s = (CUstream)o->stream;
  int rc = rt_cuda_event_create(&ctx->cuda, 0, &e0, err, sizeof err);
  if (!rc) rc = rt_cuda_event_create(&ctx->cuda, 0, &e1, err, sizeof err);
  for (int i = 0; !rc && !st && i < o->warmup; i++)
    rc = enqueue(ctx, k, sp, repack ? &plan : NULL, &b, grid, block, s, &pk, err, sizeof err, &st);
  if (!rc) rc = rt_cuda_stream_sync(&ctx->cuda, s, err, sizeof err);
  double start = tl_now_ms();
  while (!rc && !st && *n < o->reps && (*n < 5 || tl_now_ms() - start < o->max_ms)) {
    rc = rt_cuda_event_record(&ctx->cuda, e0, s, err, sizeof err);
    if (!rc) rc = enqueue(ctx, k, sp, repack ? &plan : NULL, &b, grid, block, s, &pk, err, sizeof err, &st);
    if (st) break;
    if (!rc) rc = rt_cuda_event_record(&ctx->cuda, e1, s, err, sizeof err);
    float ms = 0;
    if (!rc) rc = rt_cuda_event_elapsed(&ctx->cuda, e0, e1, &ms, err, sizeof err);
    if (!rc) t[(*n)++] = ms;
  }
  rt_cuda_event_destroy(&ctx->cuda, e0, err, sizeof err);
  rt_cuda_event_destroy(&ctx->cuda, e1, err, sizeof err);
  arena_free(&scratch);
  if (st) return st;
  if (rc) return rt_error(ctx, TILE_CUDA, "benchmarking '%s': %s", k->name, err);
  return TILE_OK;
}

/* ---- specializations built apart from loading them (the module cache and the tuner) ---- */

void rt_artifact_free(struct rt_artifact *a) {
  if (!a) return;
  tl_free(a->ptx);
  tl_free(a->cubin);
  memset(a, 0, sizeof *a);
}

void rt_gpu_target_of(tile_context *ctx, bool link, struct rt_gpu_target *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->arch, sizeof t->arch, "%s", ctx->dev_arch);
  snprintf(t->device_name, sizeof t->device_name, "%s", ctx->dev.name);
  t->driver_version = ctx->dev.driver_version;
  t->smem_optin = ctx->dev.smem_per_block_optin;
  t->cuda = link && ctx->cuda.cuLinkCreate ? &ctx->cuda : NULL;
  t->cuctx = ctx->dev.ctx;
  t->cache_dir = link ? ctx->cache_dir : NULL;
}

/* The text key of a specialization in the on-disk module cache: everything the target code
 * depends on. The compiler id includes the build id, so a rebuilt compiler never reuses. */
static const char *module_key(tile_kernel *k, const struct rt_gpu_target *t, const uint8_t *facts,
                              uint32_t nfacts, struct arena *a) {
  if (!k->src_hashed) {
    rt_hash(k->src, k->src_len, k->src_hash);
    k->src_hashed = true;
  }
  char src_hex[2 * RT_HASH_LEN + 1], facts_hex[2 * 64 + 1];
  rt_hex(k->src_hash, RT_HASH_LEN, src_hex);
  rt_hex(facts, nfacts < 64 ? nfacts : 64, facts_hex);
  return arena_printf(a,
                      "tile-module 1\ncompiler=%s\nsource=%s\nkernel=%s\nconfig=%s\nsource_ir=%d\n"
                      "facts=%s\narch=%s\nschedule=%s\ndevice=%s\ndriver=%d\n",
                      rt_compiler_id(), src_hex, k->name, k->config ? k->config : "",
                      (k->flags & TILE_SOURCE_IR) ? 1 : 0, facts_hex, k->arch, k->sched_text, t->device_name,
                      t->driver_version);
}


/* The code info as meta text: " persistent=P whole=W pdl=D cluster=C tmaps=N" then per map
 * " param/rank/dtype/box0,box1,box2,box3/swizzle". */
static int format_code_info(const struct rt_code_info *c, char *buf, size_t len) {
  int n = snprintf(buf, len, " persistent=%d whole=%d pdl=%d cluster=%d tmaps=%u", (int)c->persistent,
                   c->whole_program ? 1 : 0, c->grid_dep ? 1 : 0, c->cluster > 1 ? (int)c->cluster : 1, c->ntmaps);
  for (unsigned i = 0; i < c->ntmaps && n > 0 && (size_t)n < len; i++) {
    const struct cg_tmap *t = &c->tmaps[i];
    n += snprintf(buf + n, len - (size_t)n, " %u/%d/%d/%u,%u,%u,%u/%d/%d", t->param, t->rank, t->dtype, t->box[0],
                  t->box[1], t->box[2], t->box[3], t->swizzle, t->flat);
  }
  return n;
}

static bool parse_code_info(const char *s, const struct tile_kernel *k, struct rt_code_info *c) {
  memset(c, 0, sizeof *c);
  int p = 0, w = 0, gd = 0, cl = 0, n = 0;
  if (sscanf(s, " persistent=%d whole=%d pdl=%d cluster=%d tmaps=%u%n", &p, &w, &gd, &cl, &c->ntmaps, &n) != 5 ||
      c->ntmaps > CG_MAX_TMAPS || (cl != 1 && cl != 2 && cl != 4 && cl != 8))
    return false;
  c->cluster = (uint8_t)cl;
  c->persistent = (uint8_t)(p == 2 ? 2 : p != 0);
  c->whole_program = w != 0;
  c->grid_dep = gd != 0;
  s += n;
  for (unsigned i = 0; i < c->ntmaps; i++) {
    struct cg_tmap *t = &c->tmaps[i];
    if (sscanf(s, " %u/%d/%d/%u,%u,%u,%u/%d/%d%n", &t->param, &t->rank, &t->dtype, &t->box[0], &t->box[1], &t->box[2],
               &t->box[3], &t->swizzle, &t->flat, &n) != 9 ||
        (t->flat != 0 && t->flat != 1))
      return false;
    s += n;
    /* a stored entry must describe a tensor parameter of this kernel */
    if (t->param >= k->ir->params.n || k->ir->params.v[t->param].kind != IR_PARAM_TENSOR || t->rank < 1 ||
        t->rank > IR_MAX_RANK || t->rank != ir_vtype(k->ir, k->ir->params.v[t->param].value)->rank)
      return false;
    for (int d = 0; d < t->rank; d++)
      if (t->box[d] < 1 || t->box[d] > 256) return false;
  }
  return true;
}

/* An artifact from a module cache entry whose framing was verified: parts = meta text, PTX,
 * cubin. Each part is checked for what it claims to be (cache.h: the checksum proves
 * nothing against whoever can write the directory); false with the reason in `why`. */
static bool artifact_from_entry(const struct rt_cache_entry *e, const struct tile_kernel *k, struct rt_artifact *a,
                                char *why, size_t whylen, bool *nomem) {
  if (e->nparts != 3) {
    snprintf(why, whylen, "%u parts, not 3", e->nparts);
    return false;
  }
  if (e->parts[0].len >= 1024 || memchr(e->parts[0].data, 0, e->parts[0].len)) {
    snprintf(why, whylen, "metadata: not a line of text");
    return false;
  }
  char meta[1024];
  memcpy(meta, e->parts[0].data, e->parts[0].len);
  meta[e->parts[0].len] = 0;
  unsigned threads = 0, smem = 0;
  int used = 0;
  if (sscanf(meta, "threads=%u smem=%u%n", &threads, &smem, &used) != 2 || threads == 0 || threads > 1024 ||
      smem > (1u << 20) || !parse_code_info(meta + used, k, &a->code)) {
    snprintf(why, whylen, "metadata: not valid for this kernel");
    return false;
  }
  if (!rt_ptx_check(e->parts[1].data, e->parts[1].len, why, whylen)) return false;
  if (e->parts[2].len && !rt_cubin_check(e->parts[2].data, e->parts[2].len, why, whylen)) return false;
  const struct tl_alloc *alloc = &k->ctx->alloc;
  a->ptx = tl_malloc(alloc, e->parts[1].len + 1);
  a->cubin = e->parts[2].len ? tl_malloc(alloc, e->parts[2].len) : NULL;
  if (!a->ptx || (e->parts[2].len && !a->cubin)) {
    *nomem = true;
    return false;
  }
  memcpy(a->ptx, e->parts[1].data, e->parts[1].len);
  a->ptx[e->parts[1].len] = 0;
  a->ptx_len = e->parts[1].len;
  if (a->cubin) memcpy(a->cubin, e->parts[2].data, e->parts[2].len);
  a->cubin_len = e->parts[2].len;
  a->threads = threads;
  a->smem = smem;
  a->from_disk = true;
  return true;
}

/* rt_cuda_link_ptx's allocation of the image it returns: a tl_malloc block of the hook. */
static void *cubin_alloc(void *ud, size_t n) { return tl_malloc(ud, n); }

/* After spec_facts applied decided conditions (its key starts with their count) or a
 * divisor's power-of-two fact: the machine-independent pipeline again, which drops the
 * branches not taken and turns those divisions into shifts. */
static tile_status fold_decided(tile_context *ctx, struct ir_func *f, const uint8_t *facts, uint32_t n,
                                struct arena *a) {
  bool pow2 = false;
  for (uint32_t i = 0; i < f->params.n; i++) pow2 |= f->params.v[i].pow2;
  if (!pow2 && (!n || !(facts[0] & 0x80))) return TILE_OK;
  struct pass_options po = {0};
  struct strbuf err;
  sb_init(&err, a);
  if (!pass_pipeline_generic(f, &po, &err))
    return rt_error(ctx, TILE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  return TILE_OK;
}

/* A clone of k's generic IR in scratch, specialized for b: facts applied, the branches the
 * launch decides folded; facts[0..*nf) is its key. */
static tile_status specialize(tile_kernel *k, const struct rt_bound *b, struct arena *scratch, struct ir_func **f,
                              uint8_t facts[64], uint32_t *nf) {
  *f = ir_func_clone(k->ir, scratch);
  *nf = spec_facts(*f, b, k, facts, 64, true);
  return fold_decided(k->ctx, *f, facts, *nf, scratch);
}

tile_status rt_gpu_estimate(tile_kernel *k, const struct rt_bound *b, bool lower, struct rt_estimate *e) {
  tile_context *ctx = k->ctx;
  memset(e, 0, sizeof *e);
  if (lower && !k->target) return rt_error(ctx, TILE_INVALID_ARGUMENT, "kernel '%s' has no GPU target", k->name);
  struct arena scratch;
  jmp_buf oom;
  arena_init(&scratch, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&scratch);
    return rt_error(ctx, TILE_NOMEM, "out of memory while estimating '%s'", k->name);
  }
  struct ir_func *f;
  uint8_t facts[64];
  uint32_t nf;
  tile_status st = specialize(k, b, &scratch, &f, facts, &nf);
  if (nf && (facts[0] & 0x80)) e->decided = facts[0] & 0x7f, e->taken = facts[1];
  if (!st) {
    struct uniform u;
    u.n = 0;
    estimate_block(f, b, &u, IR_BODY_BLOCK, 1, e);
    e->warps = f->warps;
  }
  if (!st && lower) {
    struct pass_options po = {0};
    struct tl_error err;
    sb_init(&err.msg, &scratch);
    enum tl_result r = tl_gpu_lower(f, k->target, &k->sched, &po, &err);
    st = r ? rt_fail(ctx, r, &err) : TILE_OK;
  }
  if (!st && lower) {
    struct ir_smem_plan plan;
    ir_smem_liveness(f, &scratch, &plan);
    e->smem = ir_smem_top(&plan);
  }
  arena_free(&scratch);
  return st;
}

tile_status rt_gpu_build(tile_kernel *k, const struct rt_bound *b, const struct rt_gpu_target *t,
                         struct rt_artifact *out) {
  tile_context *ctx = k->ctx;
  memset(out, 0, sizeof *out);
  double t0 = tl_now_ms();
  struct arena scratch;
  jmp_buf oom;
  arena_init(&scratch, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&scratch);
    rt_artifact_free(out);
    return rt_error(ctx, TILE_NOMEM, "out of memory while compiling '%s'", k->name);
  }
  /* a new specialization: facts go on a clone so the generic IR stays untouched */
  struct ir_func *f = ir_func_clone(k->ir, &scratch);
  out->facts_len = spec_facts(f, b, k, out->facts, sizeof out->facts, true);
  const char *key = NULL;
  if (t->cache_dir && t->cache_dir[0]) {
    key = module_key(k, t, out->facts, out->facts_len, &scratch);
    struct rt_cache_entry e;
    char why[200] = "";
    enum rt_cache_result r = rt_cache_load(&ctx->alloc, t->cache_dir, "mod", key, strlen(key), &e, why, sizeof why);
    if (r == RT_CACHE_NOMEM) arena_oom(&scratch);
    rt_trace_instant(ctx, "cache", k->name, k->config, r == RT_CACHE_HIT ? "cache hit" : r == RT_CACHE_MISS ? "cache miss" : "cache entry ignored",
                     NULL);
    if (r == RT_CACHE_HIT) {
      bool nomem = false;
      bool ok = artifact_from_entry(&e, k, out, why, sizeof why, &nomem);
      rt_cache_entry_free(&e);
      if (nomem) arena_oom(&scratch); /* the handler frees the parts allocated so far */
      if (ok) {
        out->build_ms = tl_now_ms() - t0;
        arena_free(&scratch);
        return TILE_OK;
      }
      uint8_t facts[64];
      uint32_t nf = out->facts_len;
      memcpy(facts, out->facts, sizeof facts);
      rt_artifact_free(out); /* not usable: rebuilt below (and rewritten by the caller) */
      memcpy(out->facts, facts, sizeof facts);
      out->facts_len = nf;
    }
    if (r != RT_CACHE_MISS) { /* ignored: the caller notes why */
      char name[RT_CACHE_NAME_MAX];
      rt_cache_file_name("mod", key, strlen(key), name);
      snprintf(out->cache_note, sizeof out->cache_note, "entry %.16s... of '%s' ignored (%s); rebuilt", name, k->name,
               why[0] ? why : "unreadable");
    }
  }
  tile_status fst = fold_decided(ctx, f, out->facts, out->facts_len, &scratch);
  if (fst) {
    arena_free(&scratch);
    rt_artifact_free(out);
    return fst;
  }
  struct cg_result res;
  struct pass_options po = {0};
  po.verify_each = (k->flags & TILE_VERIFY_EACH) != 0;
  po.dump_after = t->dump_after, po.dump = t->dump, po.dump_ud = t->dump_ud;
  struct rt_trace_pass_ud tp = {ctx, k->name, k->config};
  if (ctx->trace) po.event = rt_trace_pass, po.event_ud = &tp;
  double tc = rt_trace_begin(ctx, k->name, k->config, "GPU passes and LLVM");
  tile_status st = compile_ptx(ctx, f, k->target, &k->sched, CG_OUT_PTX, &po, &scratch, &res);
  rt_trace_end(ctx, tc, "compile", k->name, k->config, "GPU passes and LLVM", "\"target\":\"%s\",\"ok\":%s",
               k->target ? k->target->name : "", st ? "false" : "true");
  if (!st && t->smem_optin > 0 && res.smem_bytes > (unsigned)t->smem_optin)
    st = rt_error_code(ctx, TILE_UNSUPPORTED, TL_CODE_SMEM,
                       "needs %u bytes of shared memory per block; %s allows %d (kernel '%s' [%s])",
                  res.smem_bytes, t->device_name[0] ? t->device_name : "the device", t->smem_optin, k->name,
                  k->config ? k->config : "");
  if (!st) {
    out->ptx = tl_malloc(&ctx->alloc, res.len + 1);
    if (!out->ptx) st = rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  if (st) {
    arena_free(&scratch);
    rt_artifact_free(out);
    return st;
  }
  memcpy(out->ptx, res.text, res.len);
  out->ptx[res.len] = 0;
  out->ptx_len = res.len;
  out->threads = res.threads;
  out->smem = res.smem_bytes;
  memcpy(out->code.tmaps, res.tmaps, sizeof res.tmaps);
  out->code.ntmaps = res.ntmaps;
  out->code.persistent = res.persistent;
  out->code.whole_program = res.whole_program;
  out->code.grid_dep = res.grid_dep;
  out->code.cluster = res.cluster;
  arena_free(&scratch);
  if (t->cuda && !out->code.whole_program) {
    /* the driver's JIT, here rather than at load time; on threads other than the one that
     * opened the device, the context must be made current first. (Not for code with
     * warp-specialized roles: the linker compiles PTX as relocatable code, which ignores
     * setmaxnreg (C7504); such code is loaded as PTX by cuModuleLoadDataEx, a whole-program
     * compile, and the driver's own cache keeps its cubin.) */
    CUcontext cur = NULL;
    char err[512];
    if (t->cuda->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && !cur && t->cuctx) t->cuda->cuCtxSetCurrent(t->cuctx);
    double tj = rt_trace_begin(ctx, k->name, k->config, "driver JIT");
    int rc = rt_cuda_link_ptx(t->cuda, out->ptx, out->ptx_len, 0, cubin_alloc, &ctx->alloc, &out->cubin,
                              &out->cubin_len, NULL, 0, err, sizeof err);
    if (rc && rc != RT_CUDA_NOMEM && k->target->arch_specific) /* in case the default target refuses sm_90a PTX */
      rc = rt_cuda_link_ptx(t->cuda, out->ptx, out->ptx_len, CU_TARGET_COMPUTE_90A, cubin_alloc, &ctx->alloc,
                            &out->cubin, &out->cubin_len, NULL, 0, err, sizeof err);
    rt_trace_end(ctx, tj, "compile", k->name, k->config, "driver JIT", "\"ptx_bytes\":%zu,\"ok\":%s", out->ptx_len,
                 rc ? "false" : "true");
    if (rc == RT_CUDA_NOMEM) {
      rt_artifact_free(out);
      return rt_error(ctx, TILE_NOMEM, "out of memory for the image of '%s'", k->name);
    }
    if (!rc && !rt_cubin_check(out->cubin, out->cubin_len, NULL, 0)) { /* one a later load would refuse */
      tl_free(out->cubin);
      rc = -1;
    }
    if (rc) { /* no cubin: loading the PTX runs the JIT (and reports any error properly) */
      out->cubin = NULL;
      out->cubin_len = 0;
    }
  }
  out->build_ms = tl_now_ms() - t0;
  return TILE_OK;
}

/* Loads an artifact: the cubin when there is one (no JIT), else (or if the driver refuses
 * the cubin) the PTX. */
static tile_status load_spec(tile_context *ctx, tile_kernel *k, const struct rt_artifact *a, struct rt_spec *sp) {
  memset(sp, 0, sizeof *sp);
  memcpy(sp->facts, a->facts, sizeof sp->facts);
  sp->facts_len = a->facts_len;
  char err[8192], info[4096];
  float jit_ms = 0;
  int rc = -1;
  /* the driver reads an image by its own header, given no length: only a checked one
   * (rt_cubin_check, also applied where artifacts are made) */
  if (a->cubin && rt_cubin_check(a->cubin, a->cubin_len, NULL, 0))
    rc = rt_cuda_module_load(&ctx->cuda, a->cubin, &sp->module, info, sizeof info, err, sizeof err, &jit_ms);
  if (rc) rc = rt_cuda_module_load(&ctx->cuda, a->ptx, &sp->module, info, sizeof info, err, sizeof err, &jit_ms);
  if (rc == 0) rc = rt_cuda_function(&ctx->cuda, sp->module, k->name, &sp->func, err, sizeof err);
  struct rt_cuda_func_attrs fa;
  if (rc == 0) rc = rt_cuda_func_attrs(&ctx->cuda, sp->func, &fa, err, sizeof err);
  if (rc == 0 && a->smem > 48 * 1024) rc = rt_cuda_set_dynamic_smem(&ctx->cuda, sp->func, (int)a->smem, err, sizeof err);
  if (rc) {
    if (sp->module) rt_cuda_module_unload(&ctx->cuda, sp->module, info, sizeof info);
    sp->module = NULL;
    return rt_error(ctx, TILE_CUDA, "loading kernel '%s': %s", k->name, err);
  }
  sp->threads = a->threads;
  sp->smem = a->smem;
  sp->code = a->code;
  /* every specialization: persistent grids size themselves by it, callers read it in the
   * stats (tile_kernel_stats.blocks_per_sm) */
  sp->occupancy = 1;
  if (rt_cuda_occupancy(&ctx->cuda, sp->func, (int)a->threads, a->smem, &sp->occupancy, err, sizeof err) ||
      sp->occupancy < 1)
    sp->occupancy = 1;
  sp->regs = fa.num_regs;
  sp->local_bytes = fa.local_bytes;
  return TILE_OK;
}

tile_status rt_gpu_adopt(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, const struct rt_artifact *a) {
  uint8_t key[64];
  uint32_t klen = spec_facts(k->ir, b, k, key, sizeof key, false);
  for (uint32_t i = 0; i < k->specs.n; i++)
    if (k->specs.v[i].facts_len == klen && memcmp(k->specs.v[i].facts, key, klen) == 0) return TILE_OK;
  if (klen != a->facts_len || memcmp(key, a->facts, klen) != 0)
    return rt_error(ctx, TILE_INTERNAL, "internal error: code of '%s' was built for other arguments", k->name);
  if (!VEC_TRY_RESERVE(&k->arena, k->specs, 1)) return rt_error(ctx, TILE_NOMEM, "out of memory");
  rt_gpu_cache_outcome(ctx, a);
  struct rt_spec sp;
  tile_status st = load_spec(ctx, k, a, &sp);
  if (st) return st;
  sp.compile_ms = a->build_ms;
  sp.cache_hit = a->from_disk;
  VEC_PUSH(&k->arena, k->specs, sp);
  return TILE_OK;
}

void rt_gpu_store(tile_context *ctx, tile_kernel *k, const struct rt_artifact *a) {
  if (!ctx->cache_dir[0] || !a->ptx) return;
  struct rt_gpu_target t;
  rt_gpu_target_of(ctx, true, &t);
  struct arena scratch;
  jmp_buf oom;
  arena_init(&scratch, &ctx->alloc, &oom);
  if (setjmp(oom)) { /* best effort: only noted */
    arena_free(&scratch);
    ctx->cache_stats.store_failed++;
    rt_cache_note(ctx, "cache: not stored: out of memory");
    return;
  }
  const char *key = module_key(k, &t, a->facts, a->facts_len, &scratch);
  scratch.oom = NULL;
  char meta[1024];
  int n = snprintf(meta, sizeof meta, "threads=%u smem=%u", a->threads, a->smem);
  n += format_code_info(&a->code, meta + n, sizeof meta - (size_t)n);
  struct rt_cache_part parts[3] = {{meta, (size_t)n}, {a->ptx, a->ptx_len}, {a->cubin, a->cubin ? a->cubin_len : 0}};
  char err[512];
  if (rt_cache_store(ctx->cache_dir, "mod", key, strlen(key), parts, 3, err, sizeof err) == 0) { /* best effort */
    ctx->cache_stats.stored++;
  } else {
    ctx->cache_stats.store_failed++;
    rt_cache_note(ctx, "%s", err);
  }
  arena_free(&scratch);
}

void rt_gpu_cache_outcome(tile_context *ctx, const struct rt_artifact *a) {
  if (a->from_disk) ctx->cache_stats.loaded++;
  if (a->cache_note[0]) {
    ctx->cache_stats.rejected++;
    rt_cache_note(ctx, "%s", a->cache_note);
  }
}
