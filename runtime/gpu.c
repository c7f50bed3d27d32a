/* gpu.c - the CUDA side of the runtime: driver start-up, per-specialization code
 * generation and module loading, launching and event timing.
 *
 * The driver is loaded on first use (a context works without one); the device's primary
 * context is retained so that a host program using the CUDA runtime or PyTorch shares it. */
#include <stdio.h>
#include <string.h>

#include "passes.h"
#include "rt.h"

const char *rt_arch_for(int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  if (cc_major >= 9) return "sm_90";
  if (cc_major == 8 && cc_minor >= 9) return "sm_89";
  if (cc_major == 8 && cc_minor >= 6) return "sm_86";
  return "sm_80";
}

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
    if (ctx->cuda_ok)
      snprintf(ctx->dev_arch, sizeof ctx->dev_arch, "%s", rt_arch_for(ctx->dev.cc_major, ctx->dev.cc_minor));
    else
      snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", err);
  }
  if (!ctx->cuda_ok && !ctx->errmsg[0])
    snprintf(ctx->errmsg, sizeof ctx->errmsg, "the CUDA driver is not available (see the first error)");
  return ctx->cuda_ok;
}

tile_status rt_gpu_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                          bool launch) {
  (void)k, (void)b, (void)stream, (void)launch;
  return rt_error(ctx, TILE_UNSUPPORTED, "the CUDA backend is not built yet");
}

tile_status rt_gpu_emit(tile_context *ctx, struct ir_func *f, const char *arch, tile_emit_kind what,
                        const tile_emit_options *eo, struct pass_options *po, struct strbuf *out) {
  (void)f, (void)arch, (void)what, (void)eo, (void)po, (void)out;
  return rt_error(ctx, TILE_UNSUPPORTED, "the CUDA backend is not built yet");
}

tile_status rt_gpu_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         const tile_bench_options *o, double *t, int *n) {
  (void)k, (void)args, (void)nargs, (void)o, (void)t;
  *n = 0;
  return rt_error(ctx, TILE_UNSUPPORTED, "the CUDA backend is not built yet");
}
