/* launch.c - argument checking, binding and launching (both devices), and tile_bench.
 *
 * The same checks run for the CPU and the GPU, before anything is launched: the argument
 * count and kinds, each tensor's dtype, rank, non-negative sizes and strides, sizes fixed by
 * the kernel, the equalities stated by shared shape names, NULL data pointers (allowed only
 * for parameters unused after specialization) and, for CUDA, pointer alignment and that the
 * pointer is device memory. Every message names the argument by position and name.      */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "rt.h"

static const char *kind_name(tile_arg_kind k) {
  switch (k) {
  case TILE_ARG_TENSOR: return "a tensor";
  case TILE_ARG_INT: return "an integer";
  case TILE_ARG_FLOAT: return "a float";
  default: return "an invalid argument kind";
  }
}

tile_status rt_bind_args(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         struct arena *scratch, struct rt_bound *out) {
  struct ir_func *f = k->ir;
  if (nargs != k->nparams) {
    char list[512] = "";
    size_t n = 0;
    for (unsigned i = 0; i < k->nparams && n < sizeof list - 64; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", k->params[i].name);
    return rt_error(ctx, TILE_BAD_LAUNCH, "kernel '%s' takes %u arguments (%s), got %u", k->name,
                    k->nparams, list, nargs);
  }
  if (nargs && !args) return rt_error(ctx, TILE_BAD_LAUNCH, "args is NULL");
  struct interp_arg *ia = ARENA_NEWN(scratch, struct interp_arg, f->params.n + 1);
  /* which user argument first bound each shape symbol, and to which size */
  int64_t *sym_size = ARENA_NEWN(scratch, int64_t, f->params.n + 1);
  int *sym_from = ARENA_NEWN(scratch, int, f->params.n + 1);
  int *sym_dim = ARENA_NEWN(scratch, int, f->params.n + 1);
  for (uint32_t i = 0; i < f->params.n; i++) sym_from[i] = -1;

  for (unsigned u = 0; u < nargs; u++) {
    const tile_param_info *pi = &k->params[u];
    const struct ir_param *p = &f->params.v[k->param_ir[u]];
    const tile_arg *a = &args[u];
    struct interp_arg *dst = &ia[k->param_ir[u]];
    if (pi->is_tensor) {
      if (a->kind != TILE_ARG_TENSOR)
        return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): expected a %s tensor, got %s", u,
                        pi->name, rt_dtype_name(pi->dtype), kind_name(a->kind));
      const tile_tensor *t = &a->u.tensor;
      if (!t->data && p->used)
        return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): data pointer is NULL", u, pi->name);
      if (t->dtype != pi->dtype)
        return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): expected dtype %s, got %s", u,
                        pi->name, rt_dtype_name(pi->dtype), rt_dtype_name(t->dtype));
      if (t->rank != pi->rank)
        return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): expected rank %u, got %u", u,
                        pi->name, pi->rank, t->rank);
      if (!t->data) continue; /* unused and absent: no shape facts from it */
      bool contiguous = true;
      for (unsigned d = 0; d < t->rank; d++) contiguous &= t->strides[d] == 0;
      int64_t expect = 1;
      for (unsigned d = t->rank; d-- > 0;) {
        int64_t s = t->shape[d];
        if (s < 0 || s > INT32_MAX)
          return rt_error(ctx, TILE_BAD_LAUNCH,
                          "argument %u ('%s'): dimension %u has size %lld (must be 0..%d)", u,
                          pi->name, d, (long long)s, INT32_MAX);
        if (!contiguous && t->strides[d] < 0)
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): stride %u is negative (%lld)",
                          u, pi->name, d, (long long)t->strides[d]);
        dst->tensor.shape[d] = s;
        dst->tensor.strides[d] = contiguous ? expect : t->strides[d];
        if (__builtin_mul_overflow(expect, s ? s : 1, &expect))
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): the number of elements overflows 64 bits", u,
                          pi->name);
      }
      /* the farthest element, sum (shape - 1) * stride, and its byte offset must fit:
       * a wrapped offset would address memory outside the tensor */
      int64_t last = 0, term, bytes;
      bool empty = false;
      for (unsigned d = 0; d < t->rank; d++) empty |= t->shape[d] == 0;
      for (unsigned d = 0; d < t->rank && !empty; d++)
        if (__builtin_mul_overflow(t->shape[d] - 1, dst->tensor.strides[d], &term) ||
            __builtin_add_overflow(last, term, &last))
          last = INT64_MAX;
      if (!empty && (last == INT64_MAX || __builtin_mul_overflow(last + 1, (int64_t)rt_dtype_size(t->dtype), &bytes)))
        return rt_error(ctx, TILE_BAD_LAUNCH,
                        "argument %u ('%s'): shape x strides addresses beyond 2^63 bytes (the strides are too large)", u,
                        pi->name);
      dst->tensor.data = t->data;
      dst->tensor.dtype = (ir_dtype)t->dtype;
      dst->tensor.rank = (int)t->rank;
      for (unsigned d = 0; d < t->rank; d++) {
        int64_t s = t->shape[d];
        if (pi->dim_size[d] >= 0) {
          if (s != pi->dim_size[d])
            return rt_error(ctx, TILE_BAD_LAUNCH,
                            "argument %u ('%s'): dimension %u must be %lld, got %lld", u, pi->name,
                            d, (long long)pi->dim_size[d], (long long)s);
          continue;
        }
        const struct ir_type *ty = ir_vtype(f, p->value);
        uint32_t sv = IR_DIM_SYM_VALUE(ty->dims[d]);
        uint32_t si = f->values.v[sv].index;
        if (sym_from[si] < 0) {
          sym_from[si] = (int)u;
          sym_dim[si] = (int)d;
          sym_size[si] = s;
        } else if (sym_size[si] != s) {
          return rt_error(ctx, TILE_BAD_LAUNCH,
                          "argument %u ('%s'): dimension %u (%s) is %lld, but argument %d ('%s') "
                          "has %s = %lld",
                          u, pi->name, d, pi->dim_symbol[d], (long long)s, sym_from[si],
                          k->params[sym_from[si]].name, pi->dim_symbol[d], (long long)sym_size[si]);
        }
      }
    } else {
      ir_dtype dt = (ir_dtype)pi->dtype;
      if (ir_dtype_is_float(dt)) {
        if (a->kind == TILE_ARG_FLOAT)
          dst->scalar.f = ir_round_float(dt, a->u.f);
        else if (a->kind == TILE_ARG_INT)
          dst->scalar.f = ir_round_float(dt, (double)a->u.i);
        else
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): expected a %s scalar, got %s",
                          u, pi->name, rt_dtype_name(pi->dtype), kind_name(a->kind));
      } else {
        if (a->kind != TILE_ARG_INT)
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): expected an %s scalar, got %s",
                          u, pi->name, rt_dtype_name(pi->dtype), kind_name(a->kind));
        int64_t v = a->u.i;
        if (dt == DT_I32 && (v < INT32_MIN || v > INT32_MAX))
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): %lld does not fit in i32", u,
                          pi->name, (long long)v);
        if (dt == DT_U32 && (v < 0 || v > UINT32_MAX))
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): %lld does not fit in u32 (0 .. 4294967295)",
                          u, pi->name, (long long)v);
        if (dt == DT_BOOL && v != 0 && v != 1)
          return rt_error(ctx, TILE_BAD_LAUNCH, "argument %u ('%s'): a bool must be 0 or 1, got %lld",
                          u, pi->name, (long long)v);
        dst->scalar.i = ir_wrap_int(dt, v);
      }
    }
  }
  /* shape symbols */
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind != IR_PARAM_SHAPE) continue;
    if (sym_from[i] < 0)
      return rt_error(ctx, TILE_BAD_LAUNCH,
                      "the size '%s' is not given: every tensor that has it was passed as NULL",
                      p->name);
    ia[i].scalar.i = sym_size[i];
  }
  if (!interp_grid(f, ia, out->grid, &ctx->alloc)) return rt_error(ctx, TILE_NOMEM, "out of memory");
  out->repacked = 0;
  for (int d = 0; d < 3; d++)
    if (out->grid[d] < 0 || out->grid[d] > INT32_MAX)
      return rt_error(ctx, TILE_BAD_LAUNCH, "grid dimension %d evaluates to %lld for these sizes", d,
                      (long long)out->grid[d]);
  out->iargs = ia;
  return TILE_OK;
}

static tile_status launch(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                          void *stream, bool run) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (!k) return rt_error(ctx, TILE_INVALID_ARGUMENT, "kernel is NULL");
  if (k->ctx != ctx) return rt_error(ctx, TILE_INVALID_ARGUMENT, "kernel belongs to another context");
  struct arena scratch;
  jmp_buf oom;
  arena_init(&scratch, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&scratch);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  struct rt_bound b;
  tile_status st = rt_bind_args(ctx, k, args, nargs, &scratch, &b);
  if (st == TILE_OK) {
    if (k->device == TILE_DEVICE_CPU) {
      k->stats.grid[0] = (unsigned)b.grid[0];
      k->stats.grid[1] = (unsigned)b.grid[1];
      k->stats.grid[2] = (unsigned)b.grid[2];
      k->stats.threads = 1;
      k->stats.registers = k->stats.local_bytes = -1;
      k->stats.blocks_per_sm = k->stats.multiprocessors = -1;
      k->stats.repacked = 0;
      if (run) {
        struct strbuf err;
        sb_init(&err, &scratch);
        double t0 = rt_trace_begin(ctx, k->name, k->config, "run (interpreter)");
        if (!interp_run(k->ir, b.iargs, b.grid, ctx->cpu_threads, &ctx->alloc, &err))
          st = rt_error(ctx, TILE_NOMEM, "%s", sb_str(&err));
        rt_trace_end(ctx, t0, "launch", k->name, k->config, "run (interpreter)", "\"grid\":\"%lld,%lld,%lld\"",
                     (long long)b.grid[0], (long long)b.grid[1], (long long)b.grid[2]);
      }
    } else {
      st = rt_gpu_launch(ctx, k, &b, stream, run);
    }
  }
  arena_free(&scratch);
  return st;
}

tile_status rt_launch(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                 unsigned nargs, const tile_launch_options *opts) {
  return launch(ctx, k, args, nargs, opts ? opts->stream : NULL, true);
}

tile_status rt_kernel_prepare(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                         unsigned nargs) {
  return launch(ctx, k, args, nargs, NULL, false);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

tile_status rt_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                unsigned nargs, const tile_bench_options *opts,
                                tile_bench_result *out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  tile_bench_options o = {0};
  if (opts) o = *opts;
  if (o.warmup <= 0) o.warmup = 10;
  if (o.reps <= 0) o.reps = 50;
  if (o.max_ms <= 0) o.max_ms = 2000;
  if (!k) return rt_error(ctx, TILE_INVALID_ARGUMENT, "kernel is NULL");
  tile_launch_options lo = {o.stream};
  double *t = tl_malloc(&ctx->alloc, sizeof(double) * (size_t)o.reps);
  if (!t) return rt_error(ctx, TILE_NOMEM, "out of memory");
  tile_status st = TILE_OK;
  int n = 0;
  if (k->device == TILE_DEVICE_CPU) {
    int warm = o.warmup < 2 ? o.warmup : 2; /* the interpreter has nothing to warm up */
    for (int i = 0; i < warm && !st; i++) st = rt_launch(ctx, k, args, nargs, &lo);
    double start = tl_now_ms();
    while (!st && n < o.reps && (n < 3 || tl_now_ms() - start < o.max_ms)) {
      double t0 = tl_now_ms();
      st = rt_launch(ctx, k, args, nargs, &lo);
      t[n++] = tl_now_ms() - t0;
    }
  } else {
    st = rt_gpu_bench(ctx, k, args, nargs, &o, t, &n);
  }
  if (!st && n > 0) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    out->median_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    out->min_ms = t[0];
    out->mean_ms = sum / n;
    out->reps = n;
  }
  tl_free(t);
  return st;
}

TILE_API tile_status tile_launch(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                 unsigned nargs, const tile_launch_options *opts) {
  return rt_launch(ctx, k, args, nargs, opts);
}

TILE_API tile_status tile_kernel_prepare(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                         unsigned nargs) {
  return rt_kernel_prepare(ctx, k, args, nargs);
}

TILE_API tile_status tile_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                unsigned nargs, const tile_bench_options *opts,
                                tile_bench_result *out) {
  return rt_bench(ctx, k, args, nargs, opts, out);
}
