/* repack.c - unaligned Tensor Core operands copied to aligned scratch before a launch.
 *
 * A matrix whose rows do not start on 16-byte boundaries (a 4095-wide f16 matrix: rows
 * 8190 bytes apart) cannot be staged with 16-byte cp.async or TMA, so its specialization
 * copies element by element; on an H200 that runs a 4095^3 GEMM at half the speed of the
 * aligned kernel. When such a tensor is a dot operand loaded in a loop, every element is
 * read many times (once per program along the other dimension), so copying it once into a
 * buffer with 16-byte-aligned rows and running the aligned specialization is cheaper: the
 * copy costs one read and one write of the tensor at memory bandwidth.
 *
 * The plan, per launch of a CUDA kernel (rt_repack_plan):
 *   - which parameters: read-only tensors that feed a dot from a load inside a loop
 *     (found once per kernel in its generic IR), of rank 2 or 3 with contiguous rows (the
 *     last dimension's stride 1), whose base or a stride is not a multiple of 16 bytes;
 *   - when (TILE_REPACK unset or "auto"): the tensor holds at least RT_REPACK_MIN_BYTES
 *     (below that a copy launch costs more than it saves); "1" repacks every candidate, "0"
 *     none; TILE_NO_REPACK in the compile flags turns it off for a kernel. On an H200 the
 *     repacked GEMM was faster for every shape measured, down to 511^3 and 33x4095x4095
 *     (PERF.md 19), so there is no condition on the grid. Never while the stream is being
 *     captured into a CUDA graph (the scratch's allocation would become part of the
 *     caller's graph).
 * The copy (rt_repack_launch): scratch from the context's memory pool in stream order, one
 * launch of an internal tile kernel per tensor (compiled by this compiler like any other;
 * its loads cannot be vectorized, so the layout pass gives them one element per thread and
 * a warp's accesses are coalesced), then the kernel with the aligned arguments, then the
 * scratch freed in stream order. The pool keeps freed memory for the next launch. Without
 * pools in the driver, or without memory for a copy, the tensor is used as it is.
 * tile_kernel_prepare builds the copy kernels and the aligned specialization (the same
 * function with placeholders for the scratch). (cuMemcpy2DAsync was measured as the copy too: 4095^3 GEMM 333
 * TFLOP/s against 375 with the tile kernel; PERF.md 19.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rt.h"

/* Internal copy kernels: Y = X for a matrix and for a batch of matrices. */
static const char repack_src[] =
    "kernel repack2<T: f16 | bf16 | f32 = f16, BR: 32 = 32, BC: 256 = 256>\n"
    "    (X: T[R, C], Y: out T[R, C])\n"
    "  grid(cdiv(R, BR) * cdiv(C, BC))\n"
    "  warps(4)\n"
    "{\n"
    "  let nc = cdiv(C, BC);\n"
    "  let r0 = (program_id(0) / nc) * BR;\n"
    "  let c0 = (program_id(0) % nc) * BC;\n"
    "  Y[r0 : +BR, c0 : +BC] = X[r0 : +BR, c0 : +BC];\n"
    "}\n"
    "kernel repack3<T: f16 | bf16 | f32 = f16, BR: 32 = 32, BC: 256 = 256>\n"
    "    (X: T[NB, R, C], Y: out T[NB, R, C])\n"
    "  grid(cdiv(R, BR) * cdiv(C, BC), NB)\n"
    "  warps(4)\n"
    "{\n"
    "  let nc = cdiv(C, BC);\n"
    "  let r0 = (program_id(0) / nc) * BR;\n"
    "  let c0 = (program_id(0) % nc) * BC;\n"
    "  let b = program_id(1);\n"
    "  Y[b, r0 : +BR, c0 : +BC] = X[b, r0 : +BR, c0 : +BC];\n"
    "}\n";

bool rt_repack_layout(int rank, const int64_t *shape, const int64_t *strides, int eb, int64_t *out_strides,
                      size_t *bytes) {
  if (rank < 2 || rank > 3 || eb <= 0 || eb > 16) return false;
  int c = rank - 1, o = rank - 2;
  if (strides[c] != 1 && shape[c] > 1) return false; /* rows must be contiguous */
  int64_t per16 = 16 / eb;
  int64_t pitch = (shape[c] + per16 - 1) / per16 * per16;
  int64_t batch = rank == 3 ? shape[0] : 1;
  if (pitch <= 0 || shape[o] <= 0 || batch <= 0) return false;
  out_strides[c] = 1;
  out_strides[o] = pitch;
  if (rank == 3) out_strides[0] = pitch * shape[o];
  *bytes = (size_t)batch * (size_t)shape[o] * (size_t)pitch * (size_t)eb;
  return true;
}

bool rt_repack_misaligned(int rank, const int64_t *shape, const int64_t *strides, int eb, uintptr_t addr) {
  if (addr % 16) return true;
  for (int d = 0; d < rank; d++)
    if (shape[d] > 1 && strides[d] != 1 && (strides[d] * eb) % 16 != 0) return true;
  return false;
}

static bool inside_loop(const struct ir_func *f, const struct ir_op *op) {
  for (uint32_t b = op->block; b;) {
    uint32_t parent = f->blocks.v[b].parent;
    if (!parent) return false;
    if (f->ops.v[parent].code == IR_FOR) return true;
    b = f->ops.v[parent].block;
  }
  return false;
}

uint64_t rt_repack_operands(const struct ir_func *f) {
  uint64_t mask = 0;
  for (uint32_t id = 1; id < f->ops.n; id++) {
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_DOT || !op->block) continue;
    for (int a = 0; a < 2; a++) { /* a, b (args[2] is the accumulator) */
      const struct ir_value *x = &f->values.v[ir_view_source(f, op->args[a])];
      if (x->kind != IR_VAL_RESULT) continue;
      const struct ir_op *ld = &f->ops.v[x->def];
      if (ld->code != IR_LOAD || !inside_loop(f, ld)) continue;
      const struct ir_value *t = &f->values.v[ld->args[0]];
      if (t->kind == IR_VAL_PARAM && t->index < 64) mask |= 1ull << t->index;
    }
  }
  return mask;
}

/* TILE_REPACK: 0/off/false/no never, 1/on/true/yes/always always; unset, empty, "auto" or
 * anything else: auto (an unknown word must not turn repacking on, as "off" once did). */
int rt_repack_mode_from_env(void) {
  const char *e = getenv("TILE_REPACK");
  if (!e) return RT_REPACK_AUTO;
  static const char *const never[] = {"0", "off", "false", "no"}, *const always[] = {"1", "on", "true", "yes", "always"};
  for (size_t i = 0; i < TL_ARRAY_LEN(never); i++)
    if (strcasecmp(e, never[i]) == 0) return RT_REPACK_NEVER;
  for (size_t i = 0; i < TL_ARRAY_LEN(always); i++)
    if (strcasecmp(e, always[i]) == 0) return RT_REPACK_ALWAYS;
  return RT_REPACK_AUTO;
}

bool rt_repack_plan(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                    struct rt_repack_plan *plan) {
  plan->n = 0;
  int mode = ctx->repack_mode;
  if (mode == RT_REPACK_NEVER || (k->flags & TILE_NO_REPACK) || k->device != TILE_DEVICE_CUDA) return false;
  if (!k->dot_operands_known) {
    k->dot_operands = rt_repack_operands(k->ir);
    k->dot_operands_known = true;
  }
  if (!k->dot_operands) return false;
  const struct ir_func *f = k->ir;
  for (uint32_t i = 0; i < f->params.n && i < 64 && plan->n < RT_REPACK_MAX; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (!(k->dot_operands >> i & 1) || p->kind != IR_PARAM_TENSOR || p->is_out) continue;
    const struct interp_tensor *t = &b->iargs[i].tensor;
    int eb = ir_dtype_bytes(t->dtype);
    if (!t->data || (t->dtype != DT_F16 && t->dtype != DT_BF16 && t->dtype != DT_F32)) continue;
    if (!rt_repack_misaligned(t->rank, t->shape, t->strides, eb, (uintptr_t)t->data)) continue;
    struct rt_repack_item *it = &plan->v[plan->n];
    if (!rt_repack_layout(t->rank, t->shape, t->strides, eb, it->strides, &it->bytes)) continue;
    if (t->rank == 3 && t->shape[0] > 65535) continue;
    if (mode == RT_REPACK_AUTO && it->bytes < RT_REPACK_MIN_BYTES) continue;
    it->param = i;
    plan->n++;
  }
  if (!plan->n) return false;
  int capturing = 0;
  char err[256];
  if (rt_cuda_stream_capturing(&ctx->cuda, (CUstream)stream, &capturing, err, sizeof err) || capturing)
    plan->n = 0;
  return plan->n > 0;
}

/* The context's copy kernel for this rank and dtype, compiled on first use. */
static tile_status copy_kernel(tile_context *ctx, int rank, ir_dtype dt, tile_kernel **out) {
  int di = dt == DT_F16 ? 0 : dt == DT_BF16 ? 1 : 2;
  tile_kernel **slot = &ctx->repack_kernels[rank - 2][di];
  if (*slot) {
    *out = *slot;
    return TILE_OK;
  }
  tile_define def = {"T", di == 0 ? "f16" : di == 1 ? "bf16" : "f32"};
  tile_compile_options co = {rank == 2 ? "repack2" : "repack3", &def, 1, TILE_DEVICE_CUDA, NULL, 0, NULL};
  tile_status st = rt_compile_string(ctx, "<repack>", repack_src, sizeof repack_src - 1, &co, false, slot);
  if (st) return st;
  *out = *slot;
  return TILE_OK;
}

static tile_arg tensor_arg(const struct interp_tensor *t, void *data, const int64_t *strides) {
  tile_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TILE_ARG_TENSOR;
  a.u.tensor.data = data;
  a.u.tensor.dtype = (tile_dtype)t->dtype;
  a.u.tensor.rank = (unsigned)t->rank;
  for (int d = 0; d < t->rank; d++) {
    a.u.tensor.shape[d] = t->shape[d];
    a.u.tensor.strides[d] = strides[d];
  }
  return a;
}

/* The tile_kernel_stats.repacked bit of ir parameter i. */
static unsigned repacked_bit(const tile_kernel *k, uint32_t i) {
  uint32_t u = k->ir->params.v[i].source_index;
  return u < 32 ? 1u << u : 0;
}

tile_status rt_repack_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                             const struct rt_repack_plan *plan, void *stream, bool launch) {
  tile_status st = rt_gpu_check_args(ctx, k, b);
  if (st) return st;
  /* a TILE_AUTOTUNE kernel times launches while it prepares: it gets the arguments as they
   * are, not placeholders */
  if (!launch && (k->flags & TILE_AUTOTUNE)) return rt_gpu_launch_direct(ctx, k, b, stream, false);
  char err[1024];
  if (launch && !ctx->repack_pool &&
      rt_cuda_pool_create(&ctx->cuda, ctx->cuda_ordinal, RT_REPACK_POOL_KEEP, &ctx->repack_pool, err, sizeof err))
    return rt_gpu_launch_direct(ctx, k, b, stream, true); /* no pools: launch as it is */
  struct arena a;
  jmp_buf oom;
  arena_init(&a, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&a);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  /* the bound arguments with the repacked tensors in place of the originals */
  struct rt_bound b2 = *b;
  uint32_t np = k->ir->params.n;
  b2.iargs = ARENA_NEWN(&a, struct interp_arg, np + 1);
  memcpy(b2.iargs, b->iargs, sizeof *b2.iargs * np);
  CUdeviceptr scratch[RT_REPACK_MAX] = {0};
  for (unsigned n = 0; n < plan->n && !st; n++) {
    const struct rt_repack_item *it = &plan->v[n];
    struct interp_tensor *t = &b2.iargs[it->param].tensor;
    tile_kernel *ck;
    st = copy_kernel(ctx, t->rank, t->dtype, &ck);
    if (st) break;
    /* launching: the copy goes to scratch from the pool (no memory: this tensor is used as
     * it is); preparing: to a placeholder with the scratch's alignment, never launched */
    CUdeviceptr dst = 256;
    if (launch) {
      if (rt_cuda_pool_alloc(&ctx->cuda, ctx->repack_pool, it->bytes, (CUstream)stream, &scratch[n], err, sizeof err))
        continue;
      dst = scratch[n];
    }
    tile_arg args[2] = {tensor_arg(t, t->data, t->strides), tensor_arg(t, (void *)(uintptr_t)dst, it->strides)};
    if (launch) {
      tile_launch_options lo = {stream};
      st = rt_launch(ctx, ck, args, 2, &lo);
    } else {
      struct rt_bound cb;
      st = rt_bind_args(ctx, ck, args, 2, &a, &cb);
      if (!st) st = rt_gpu_prepare_spec(ctx, ck, &cb);
    }
    if (st) break;
    b2.repacked |= repacked_bit(k, it->param);
    t->data = (void *)(uintptr_t)dst;
    memcpy(t->strides, it->strides, sizeof it->strides[0] * (size_t)t->rank);
  }
  if (!st) st = launch ? rt_gpu_launch_direct(ctx, k, &b2, stream, true) : rt_gpu_prepare_spec(ctx, k, &b2);
  for (unsigned i = 0; i < RT_REPACK_MAX; i++)
    if (scratch[i] && rt_cuda_free_async(&ctx->cuda, scratch[i], (CUstream)stream, err, sizeof err) && !st)
      st = rt_error(ctx, TILE_CUDA, "freeing repack scratch: %s", err);
  arena_free(&a);
  return st;
}

void rt_repack_release(tile_context *ctx) {
  char err[256];
  if (ctx->repack_pool) rt_cuda_pool_destroy(&ctx->cuda, ctx->repack_pool, err, sizeof err);
  ctx->repack_pool = NULL;
}

const char *rt_repack_source(void) { return repack_src; }
