/* rt.h - runtime internals shared by api.c, launch.c, gpu.c and mem.c.
 *
 * The context owns long-lived state (the CUDA driver table, the device, the kernel cache);
 * each kernel owns an arena holding its source, its generic IR and its specializations.
 * Errors are written with rt_error() into the context's message buffer; every API entry
 * point clears it first, so tile_errmsg always describes the latest call.              */
#ifndef TL_RT_H
#define TL_RT_H

#include "cudrv.h"
#include "interp.h"
#include "ir.h"
#include "tile.h"

enum { RT_ERRMSG_SIZE = 16384 };

struct rt_diag {
  tile_diagnostic d;
};

struct tile_context {
  struct tl_alloc alloc;
  int cpu_threads;
  int cuda_ordinal;
  char errmsg[RT_ERRMSG_SIZE];
  /* diagnostics of the last compile, in their own arena (reset per compile) */
  struct arena diag_arena;
  VEC(tile_diagnostic) diags;
  /* CUDA, loaded on first use */
  bool cuda_tried, cuda_ok;
  char cuda_err[1024];
  struct rt_cuda cuda;
  struct rt_cuda_device dev;
  char dev_arch[16];
  /* in-memory kernel cache */
  struct arena cache_arena;
  VEC(struct tile_kernel *) kernels;
  char *cache_dir; /* on-disk cache directory ("" = off) */
};

/* One compiled target specialization of a CUDA kernel. */
struct rt_spec {
  uint8_t facts[64]; /* the specialization key (see gpu.c: spec_key) */
  uint32_t facts_len;
  CUmodule module;
  CUfunction func;
  unsigned threads;
  unsigned smem;
  int regs, local_bytes;
  double compile_ms;
  bool cache_hit;
};

struct tile_kernel {
  int refs;
  tile_context *ctx;
  uint64_t key[2];        /* source + options hash (the in-memory cache key) */
  struct arena arena;
  struct strtab strs;
  tile_device device;
  char arch[16];
  unsigned flags;
  const char *name;
  const char *config;     /* "BM=128,BN=64" */
  const char *src;        /* a copy of the source, for target code generation */
  size_t src_len;
  const char *filename;
  struct ir_func *ir;     /* generic IR after the machine-independent pipeline */
  tile_param_info *params; /* user-visible parameters (tensors and scalars) */
  uint32_t *param_ir;     /* user parameter i -> index in ir->params */
  unsigned nparams;
  VEC(struct rt_spec) specs;
  tile_kernel_stats stats;
  uintptr_t checked_ptrs[16];   /* device pointers already verified (launch fast path) */
  unsigned next_checked;
};

void rt_clear_error(tile_context *ctx);
tile_status rt_error(tile_context *ctx, tile_status st, const char *fmt, ...) TL_PRINTF(3, 4);

/* ---- launching (launch.c) ---- */

struct rt_bound {
  struct interp_arg *iargs; /* one per ir param (shapes filled from tensors) */
  int64_t grid[3];
};

/* Validates args against k's parameters and binds them: tensors, scalars and shape
 * symbols, then evaluates the grid. Errors name the argument; nothing is launched. */
tile_status rt_bind_args(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         struct arena *scratch, struct rt_bound *out);

/* ---- CUDA (gpu.c) ---- */

/* Loads the driver and opens the device once; false (with the message set) if unavailable. */
bool rt_cuda_ready(tile_context *ctx);
tile_status rt_gpu_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                          void *stream, bool launch);
/* Generates PTX for the kernel's IR with the given facts: used by tile_emit. */
struct pass_options;
tile_status rt_gpu_emit(tile_context *ctx, struct ir_func *f, const char *arch, tile_emit_kind what,
                        const tile_emit_options *eo, struct pass_options *po, struct strbuf *out);
/* Times `o->reps` launches with device events into t[], setting *n. */
tile_status rt_gpu_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         const tile_bench_options *o, double *t, int *n);
/* "sm_90a" for the current device's compute capability. */
const char *rt_arch_for(int cc_major, int cc_minor);

#endif
