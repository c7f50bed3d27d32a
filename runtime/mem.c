/* mem.c - memory, synchronization and device-query helpers for tools, tests and examples.
 *
 * On the CPU device these are ordinary host allocations and copies, so a program written
 * against them runs unchanged on both devices; on CUDA they are thin checked wrappers of
 * the Driver API in the context's primary context.                                     */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static tile_status check_dev(tile_context *ctx, tile_device dev) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (dev == TILE_DEVICE_CPU) return TILE_OK;
  if (dev != TILE_DEVICE_CUDA) return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown device %d", (int)dev);
  return rt_cuda_ready(ctx) ? TILE_OK : TILE_NO_DRIVER;
}

static tile_status cuda_status(tile_context *ctx, int rc, const char *err) {
  if (rc == 0) return TILE_OK;
  return rt_error(ctx, TILE_CUDA, "%s", err);
}

/* Host blocks of tile_mem_alloc: 256-byte aligned (as device allocations are), from the
 * context's hook, which aligns to 16 only: the block is over-allocated, and where it starts
 * and how long it is are kept just before the aligned pointer. */
struct host_block {
  void *base;
  size_t size;
};
enum { HOST_ALIGN = 256 };

static void *host_alloc(tile_context *ctx, size_t bytes) {
  size_t size = ((bytes + HOST_ALIGN - 1) & ~(size_t)(HOST_ALIGN - 1)) + HOST_ALIGN + sizeof(struct host_block);
  char *base = tl_raw_alloc(&ctx->alloc, size);
  if (!base) return NULL;
  uintptr_t p = ((uintptr_t)base + sizeof(struct host_block) + HOST_ALIGN - 1) & ~(uintptr_t)(HOST_ALIGN - 1);
  struct host_block hb = {base, size};
  memcpy((char *)p - sizeof hb, &hb, sizeof hb);
  return (void *)p;
}

static void host_free(tile_context *ctx, void *p) {
  struct host_block hb;
  memcpy(&hb, (char *)p - sizeof hb, sizeof hb);
  tl_raw_free(&ctx->alloc, hb.base, hb.size);
}

tile_status rt_mem_alloc(tile_context *ctx, tile_device dev, size_t bytes, void **out) {
  tile_status st = check_dev(ctx, dev);
  if (st) return st;
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (bytes > SIZE_MAX - 1024) /* the rounding below would wrap to a small buffer */
    return rt_error(ctx, TILE_NOMEM, "out of memory: cannot allocate %zu bytes", bytes);
  if (dev == TILE_DEVICE_CPU) {
    *out = host_alloc(ctx, bytes);
    if (!*out) return rt_error(ctx, TILE_NOMEM, "out of memory: cannot allocate %zu bytes", bytes);
    return TILE_OK;
  }
  char err[512];
  CUdeviceptr p = 0;
  st = cuda_status(ctx, rt_cuda_alloc(&ctx->cuda, bytes ? bytes : 1, &p, err, sizeof err), err);
  *out = (void *)(uintptr_t)p;
  return st;
}

tile_status rt_mem_free(tile_context *ctx, tile_device dev, void *p) {
  if (!p) return TILE_OK;
  tile_status st = check_dev(ctx, dev);
  if (st) return st;
  if (dev == TILE_DEVICE_CPU) {
    host_free(ctx, p);
    return TILE_OK;
  }
  char err[512];
  return cuda_status(ctx, rt_cuda_free(&ctx->cuda, (CUdeviceptr)(uintptr_t)p, err, sizeof err), err);
}

/* Host to device (up) or device to host; on the CPU device both are memcpy. */
static tile_status mem_copy(tile_context *ctx, tile_device dev, void *dst, const void *src, size_t bytes, bool up) {
  tile_status st = check_dev(ctx, dev);
  if (st) return st;
  if (!bytes) return TILE_OK;
  if (!dst || !src) return rt_error(ctx, TILE_INVALID_ARGUMENT, "NULL pointer");
  if (dev == TILE_DEVICE_CPU) {
    memcpy(dst, src, bytes);
    return TILE_OK;
  }
  char err[512];
  int r = up ? rt_cuda_h2d(&ctx->cuda, (CUdeviceptr)(uintptr_t)dst, src, bytes, err, sizeof err)
             : rt_cuda_d2h(&ctx->cuda, dst, (CUdeviceptr)(uintptr_t)src, bytes, err, sizeof err);
  return cuda_status(ctx, r, err);
}

TILE_API tile_status tile_mem_upload(tile_context *ctx, tile_device dev, void *dst, const void *src,
                                     size_t bytes) {
  return mem_copy(ctx, dev, dst, src, bytes, true);
}

tile_status rt_mem_download(tile_context *ctx, tile_device dev, void *dst,
                                       const void *src, size_t bytes) {
  return mem_copy(ctx, dev, dst, src, bytes, false);
}

tile_status rt_mem_fill(tile_context *ctx, tile_device dev, void *dst, uint8_t byte,
                                   size_t bytes) {
  tile_status st = check_dev(ctx, dev);
  if (st) return st;
  if (!bytes) return TILE_OK;
  if (!dst) return rt_error(ctx, TILE_INVALID_ARGUMENT, "NULL pointer");
  if (dev == TILE_DEVICE_CPU) {
    memset(dst, byte, bytes);
    return TILE_OK;
  }
  char err[512];
  return cuda_status(ctx, rt_cuda_memset8(&ctx->cuda, (CUdeviceptr)(uintptr_t)dst, byte, bytes, err, sizeof err), err);
}

tile_status rt_synchronize(tile_context *ctx, tile_device dev) {
  tile_status st = check_dev(ctx, dev);
  if (st || dev == TILE_DEVICE_CPU) return st;
  char err[512];
  return cuda_status(ctx, rt_cuda_ctx_sync(&ctx->cuda, err, sizeof err), err);
}

TILE_API tile_status tile_device_query(tile_context *ctx, tile_device dev, tile_device_info *out) {
  tile_status st = check_dev(ctx, dev);
  if (st) return st;
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  if (dev == TILE_DEVICE_CPU) {
    snprintf(out->name, sizeof out->name, "CPU interpreter");
    out->arch = "cpu";
    return TILE_OK;
  }
  snprintf(out->name, sizeof out->name, "%s", ctx->dev.name);
  out->cc_major = ctx->dev.cc_major;
  out->cc_minor = ctx->dev.cc_minor;
  out->sm_count = ctx->dev.sm_count;
  out->smem_per_block_optin = ctx->dev.smem_per_block_optin;
  out->driver_version = ctx->dev.driver_version;
  out->arch = ctx->dev_arch;
  const struct tl_target *t = ctx->dev_target;
  out->clock_mhz = ctx->dev.clock_khz / 1000;
  double ghz_sms = ctx->dev.clock_khz * 1e-6 * ctx->dev.sm_count;
  if (t) {
    out->peak_tc_f16_tflops = ghz_sms * t->tc_f16_flop_clk * 1e-3;
    out->peak_f32_tflops = ghz_sms * t->f32_flop_clk * 1e-3;
  }
  out->peak_mem_gbps = ctx->dev.mem_clock_khz * 1e3 * 2.0 * (ctx->dev.bus_width_bits / 8.0) * 1e-9;
  return TILE_OK;
}

TILE_API tile_status tile_mem_alloc(tile_context *ctx, tile_device dev, size_t bytes, void **out) {
  return rt_mem_alloc(ctx, dev, bytes, out);
}

TILE_API tile_status tile_mem_free(tile_context *ctx, tile_device dev, void *p) {
  return rt_mem_free(ctx, dev, p);
}

TILE_API tile_status tile_mem_download(tile_context *ctx, tile_device dev, void *dst,
                                       const void *src, size_t bytes) {
  return rt_mem_download(ctx, dev, dst, src, bytes);
}

TILE_API tile_status tile_mem_fill(tile_context *ctx, tile_device dev, void *dst, uint8_t byte,
                                   size_t bytes) {
  return rt_mem_fill(ctx, dev, dst, byte, bytes);
}

TILE_API tile_status tile_synchronize(tile_context *ctx, tile_device dev) {
  return rt_synchronize(ctx, dev);
}
