/* cuda_smoke.c - a standalone check of the CUDA Driver API layer (runtime/cudrv.c) on a real GPU.
 *
 * It loads the driver, prints what it knows about the device, JIT-compiles a small hand-written
 * PTX module (sm_80, so it runs on Ampere and Hopper), runs an axpy kernel on random inputs and
 * compares with a CPU computation, exercises streams, events, module globals, pointer queries
 * and the error paths (bad PTX with its JIT log, a missing kernel name, a launch with too many
 * threads), and times 100 launches with events. One "PASS name" / "FAIL name" line per check;
 * "INFO" lines carry facts.
 *
 * Exit status: 0 when every check passed, 1 when one failed, 77 (the automake "skipped" code)
 * when the machine has no CUDA driver or no GPU.
 *
 * Build: cc -std=c17 -O2 -I runtime tools/cuda_smoke.c runtime/cudrv.c -ldl -o cuda_smoke
 * Run:   ./cuda_smoke [device ordinal]
 *
 * Design choices: it links nothing but cudrv.c and libdl (no libm, no CUDA toolkit), so it can
 * be built on the GPU machine with a bare C compiler. CUDA_CACHE_DISABLE=1 is set (unless the
 * caller set it) so the JIT really runs and its info log and wall time are shown.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L   /* setenv */
#endif

#include "cudrv.h"
#include "rng.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_SKIP 77

/* Elements of the axpy test: deliberately not a multiple of the block size, so the bounds
 * check in the kernel matters; GUARD extra words after the output must stay untouched. */
#define N_ELEMS 1000003u
#define GUARD 64u
#define BLOCK 256u
#define TIMED_LAUNCHES 100

/* Two kernels and one module-scope variable, written for PTX ISA 7.0 / sm_80.
 * smoke_axpy: c[i] = alpha * a[i] + b[i] for i < n, with one fused multiply-add.
 * smoke_count: every thread adds 1 to smoke_counter. */
static const char smoke_ptx[] =
  ".version 7.0\n"
  ".target sm_80\n"
  ".address_size 64\n"
  "\n"
  ".visible .global .align 4 .u32 smoke_counter;\n"
  "\n"
  ".visible .entry smoke_axpy(\n"
  "    .param .u64 smoke_axpy_a,\n"
  "    .param .u64 smoke_axpy_b,\n"
  "    .param .u64 smoke_axpy_c,\n"
  "    .param .f32 smoke_axpy_alpha,\n"
  "    .param .u32 smoke_axpy_n\n"
  ")\n"
  ".maxntid 256, 1, 1\n"
  "{\n"
  "    .reg .pred %p<2>;\n"
  "    .reg .b32 %r<6>;\n"
  "    .reg .f32 %f<5>;\n"
  "    .reg .b64 %rd<11>;\n"
  "\n"
  "    ld.param.u64 %rd1, [smoke_axpy_a];\n"
  "    ld.param.u64 %rd2, [smoke_axpy_b];\n"
  "    ld.param.u64 %rd3, [smoke_axpy_c];\n"
  "    ld.param.f32 %f1, [smoke_axpy_alpha];\n"
  "    ld.param.u32 %r1, [smoke_axpy_n];\n"
  "    mov.u32 %r2, %ctaid.x;\n"
  "    mov.u32 %r3, %ntid.x;\n"
  "    mov.u32 %r4, %tid.x;\n"
  "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
  "    setp.ge.u32 %p1, %r5, %r1;\n"
  "    @%p1 bra DONE;\n"
  "    cvta.to.global.u64 %rd4, %rd1;\n"
  "    cvta.to.global.u64 %rd5, %rd2;\n"
  "    cvta.to.global.u64 %rd6, %rd3;\n"
  "    mul.wide.u32 %rd7, %r5, 4;\n"
  "    add.s64 %rd8, %rd4, %rd7;\n"
  "    add.s64 %rd9, %rd5, %rd7;\n"
  "    add.s64 %rd10, %rd6, %rd7;\n"
  "    ld.global.f32 %f2, [%rd8];\n"
  "    ld.global.f32 %f3, [%rd9];\n"
  "    fma.rn.f32 %f4, %f1, %f2, %f3;\n"
  "    st.global.f32 [%rd10], %f4;\n"
  "DONE:\n"
  "    ret;\n"
  "}\n"
  "\n"
  ".visible .entry smoke_count()\n"
  "{\n"
  "    .reg .b32 %r<2>;\n"
  "\n"
  "    atom.global.add.u32 %r1, [smoke_counter], 1;\n"
  "    ret;\n"
  "}\n";

/* Syntactically broken PTX: the JIT must reject it and its log must reach the message. */
static const char bad_ptx[] =
  ".version 7.0\n"
  ".target sm_80\n"
  ".address_size 64\n"
  "\n"
  ".visible .entry smoke_broken()\n"
  "{\n"
  "    bogus.op;\n"
  "    ret;\n"
  "}\n";

static int n_pass, n_fail;

static void report(const char *name, int ok) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
  if (ok)
    n_pass++;
  else
    n_fail++;
}

/* Reports a failed call with its message; returns 1 when rc is nonzero. */
static int failed(int rc, const char *step, const char *err) {
  if (!rc) return 0;
  printf("FAIL %s: %s\n", step, err);
  n_fail++;
  return 1;
}


static double absd(double x) { return x < 0 ? -x : x; }

/* Compares c with alpha * a + b. The GPU does one fused multiply-add in float; the reference
 * is computed in double, so the tolerance is a few float ulps of the operands' magnitude.
 * Also checks that the GUARD words after c[n) still hold the 0xFFFFFFFF fill. */
static int check_axpy(const float *c, const float *a, const float *b, float alpha, unsigned n,
                      const char *what) {
  int bad = 0;
  for (unsigned i = 0; i < n; i++) {
    double ref = (double)alpha * a[i] + b[i];
    double tol = 1e-6 * (absd((double)alpha * a[i]) + absd(b[i])) + 1e-30;
    double diff = absd((double)c[i] - ref);
    if (!(diff <= tol)) {   /* also catches NaN */
      if (bad < 5) printf("  %s: c[%u] = %.9g, want %.9g\n", what, i, (double)c[i], ref);
      bad++;
    }
  }
  for (unsigned i = n; i < n + GUARD; i++) {
    uint32_t word;
    memcpy(&word, &c[i], sizeof word);
    if (word != 0xFFFFFFFFu) {
      if (bad < 5) printf("  %s: guard word %u overwritten (0x%08x)\n", what, i - n, word);
      bad++;
    }
  }
  if (bad) printf("  %s: %d mismatches\n", what, bad);
  return bad == 0;
}

static int cmp_float(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return (a > b) - (a < b);
}

/* Prints the first lines of a JIT log, indented. */
static void print_log(const char *title, const char *log, int max_lines) {
  if (!log[0]) {
    printf("INFO %s: empty (a JIT cache hit gives an empty log)\n", title);
    return;
  }
  printf("INFO %s:\n", title);
  int lines = 0;
  for (const char *p = log; *p && lines < max_lines; lines++) {
    const char *end = strchr(p, '\n');
    int len = end ? (int)(end - p) : (int)strlen(p);
    printf("  | %.*s\n", len, p);
    p += len;
    if (*p == '\n') p++;
  }
}

int main(int argc, char **argv) {
  char err[2048];
  int device_ordinal = argc > 1 ? atoi(argv[1]) : 0;
  setenv("CUDA_CACHE_DISABLE", "1", 0);

  /* ---- driver and device ---- */
  struct rt_cuda cu;
  int rc = rt_cuda_load(&cu, err, sizeof err);
  if (rc == RT_CUDA_NO_DRIVER || rc == CUDA_ERROR_NO_DEVICE) {
    printf("SKIP cuda_smoke: %s\n", err);
    return EXIT_SKIP;
  }
  if (failed(rc, "load the CUDA driver", err)) return 1;
  report("driver loaded and cuInit(0) succeeded", 1);
  printf("INFO driver %s version %d.%d, entry points from %s, cuTensorMapEncodeTiled %s\n",
         cu.lib_path, cu.driver_version / 1000, cu.driver_version % 1000 / 10,
         cu.via_getproc ? "cuGetProcAddress_v2 (ABI 12000)" : "dlsym of versioned names",
         cu.cuTensorMapEncodeTiled ? "present" : "absent");

  int count = 0;
  if (failed(rt_cuda_device_count(&cu, &count, err, sizeof err), "count devices", err)) {
    rt_cuda_unload(&cu);
    return 1;
  }
  printf("INFO %d CUDA device%s\n", count, count == 1 ? "" : "s");

  struct rt_cuda_device dev;
  if (failed(rt_cuda_device_open(&cu, device_ordinal, &dev, err, sizeof err), "open device",
             err)) {
    rt_cuda_unload(&cu);
    return 1;
  }
  printf("INFO device %d: %s, cc %d.%d, %d SMs, max %d threads/block\n", dev.ordinal, dev.name,
         dev.cc_major, dev.cc_minor, dev.sm_count, dev.max_threads_per_block);
  printf("INFO smem/block opt-in %d B, smem/SM %d B, regs/SM %d, L2 %d B\n",
         dev.smem_per_block_optin, dev.smem_per_sm, dev.regs_per_sm, dev.l2_bytes);
  printf("INFO SM clock %d kHz, memory clock %d kHz, bus %d bits\n", dev.clock_khz,
         dev.mem_clock_khz, dev.bus_width_bits);
  report("device has compute capability >= 8.0 (needed by the sm_80 PTX)", dev.cc_major >= 8);
  {
    CUcontext current = NULL;
    CUresult r = cu.cuCtxGetCurrent(&current);
    report("the primary context is current after rt_cuda_device_open",
           r == CUDA_SUCCESS && current != NULL && current == dev.ctx);
  }

  /* Everything below is released at `done`; zero handles are no-ops there. */
  CUmodule mod = NULL;
  CUfunction f_axpy = NULL, f_count = NULL;
  CUdeviceptr d_a = 0, d_b = 0, d_b2 = 0, d_c = 0;
  CUstream stream = NULL;
  CUevent ev_start = NULL, ev_stop = NULL;
  float *h_a = NULL, *h_b = NULL, *h_c = NULL;
  size_t in_bytes = (size_t)N_ELEMS * sizeof(float);
  size_t out_bytes = (size_t)(N_ELEMS + GUARD) * sizeof(float);
  struct rt_cuda_func_attrs attrs;
  static char info_log[16384];
  float jit_ms = 0;

  /* The axpy launch: c = alpha * a + b over n elements, one thread per element. */
  float alpha = 1.75f;
  unsigned n = N_ELEMS;
  unsigned grid[3] = {(N_ELEMS + BLOCK - 1) / BLOCK, 1, 1}, block[3] = {BLOCK, 1, 1};
  void *args[] = {&d_a, &d_b, &d_c, &alpha, &n};

  /* ---- JIT error path ---- */
  {
    CUmodule bad_mod = NULL;
    rc = rt_cuda_module_load(&cu, bad_ptx, &bad_mod, NULL, 0, err, sizeof err, NULL);
    printf("INFO bad PTX -> %s\n", rc ? err : "(loaded?)");
    report("bad PTX fails with CUDA_ERROR_INVALID_PTX",
           rc == CUDA_ERROR_INVALID_PTX && bad_mod == NULL &&
             strstr(err, "CUDA_ERROR_INVALID_PTX") != NULL);
    report("the bad-PTX message carries the JIT error log on one line",
           rc != 0 && strstr(err, "ptxas") != NULL && strchr(err, '\n') == NULL);
    if (!rc) rt_cuda_module_unload(&cu, bad_mod, err, sizeof err);
  }

  /* ---- module, functions, attributes ---- */
  if (failed(rt_cuda_module_load(&cu, smoke_ptx, &mod, info_log, sizeof info_log, err,
                                 sizeof err, &jit_ms),
             "load the smoke PTX module", err))
    goto done;
  report("hand-written sm_80 PTX module loads", 1);
  printf("INFO JIT wall time %.1f ms\n", (double)jit_ms);
  print_log("JIT info log", info_log, 12);

  if (failed(rt_cuda_function(&cu, mod, "smoke_axpy", &f_axpy, err, sizeof err), "get smoke_axpy",
             err) ||
      failed(rt_cuda_function(&cu, mod, "smoke_count", &f_count, err, sizeof err),
             "get smoke_count", err))
    goto done;
  {
    CUfunction missing = NULL;
    rc = rt_cuda_function(&cu, mod, "no_such_kernel", &missing, err, sizeof err);
    printf("INFO missing kernel -> %s\n", rc ? err : "(found?)");
    report("a missing kernel name fails with CUDA_ERROR_NOT_FOUND and names the kernel",
           rc == CUDA_ERROR_NOT_FOUND && strstr(err, "no_such_kernel") != NULL);
  }

  if (failed(rt_cuda_func_attrs(&cu, f_axpy, &attrs, err, sizeof err), "smoke_axpy attributes",
             err))
    goto done;
  printf("INFO smoke_axpy: %d registers, %d B local, max %d threads, %d B static smem, "
         "%d B dynamic smem allowed\n",
         attrs.num_regs, attrs.local_bytes, attrs.max_threads, attrs.static_smem,
         attrs.max_dynamic_smem);
  report("smoke_axpy attributes: registers > 0, no local memory, .maxntid 256 honoured",
         attrs.num_regs > 0 && attrs.local_bytes == 0 && attrs.max_threads == 256);
  {
    int want = dev.smem_per_block_optin - attrs.static_smem;
    struct rt_cuda_func_attrs after;
    int ok = !failed(rt_cuda_set_dynamic_smem(&cu, f_axpy, want, err, sizeof err),
                     "set the dynamic smem limit", err) &&
             !failed(rt_cuda_func_attrs(&cu, f_axpy, &after, err, sizeof err),
                     "re-read attributes", err);
    report("dynamic shared memory limit raised to the opt-in maximum",
           ok && after.max_dynamic_smem == want);
    int blocks = 0;
    ok = !failed(rt_cuda_occupancy(&cu, f_axpy, (int)BLOCK, 0, &blocks, err, sizeof err),
                 "occupancy", err);
    printf("INFO occupancy of smoke_axpy at %u threads: %d blocks/SM\n", BLOCK, blocks);
    report("occupancy query gives >= 1 block per SM", ok && blocks >= 1);
  }

  /* ---- memory and the axpy kernel on the legacy default stream ---- */
  h_a = malloc(in_bytes);
  h_b = malloc(in_bytes);
  h_c = malloc(out_bytes);
  if (!h_a || !h_b || !h_c) {
    printf("FAIL host allocation of %zu bytes\n", 2 * in_bytes + out_bytes);
    n_fail++;
    goto done;
  }
  struct rng inputs; /* reproducible inputs, uniform in [-1, 1) (compiler/util/rng.h) */
  rng_seed(&inputs, 0x2545F491u);
  for (unsigned i = 0; i < N_ELEMS; i++) {
    h_a[i] = rng_uniform(&inputs, -1.0f, 1.0f);
    h_b[i] = rng_uniform(&inputs, -1.0f, 1.0f);
  }
  if (failed(rt_cuda_alloc(&cu, in_bytes, &d_a, err, sizeof err), "alloc a", err) ||
      failed(rt_cuda_alloc(&cu, in_bytes, &d_b, err, sizeof err), "alloc b", err) ||
      failed(rt_cuda_alloc(&cu, in_bytes, &d_b2, err, sizeof err), "alloc b2", err) ||
      failed(rt_cuda_alloc(&cu, out_bytes, &d_c, err, sizeof err), "alloc c", err) ||
      failed(rt_cuda_h2d(&cu, d_a, h_a, in_bytes, err, sizeof err), "copy a to the device", err) ||
      failed(rt_cuda_h2d(&cu, d_b, h_b, in_bytes, err, sizeof err), "copy b to the device", err) ||
      failed(rt_cuda_memset8(&cu, d_c, 0xFF, out_bytes, err, sizeof err), "fill c", err))
    goto done;

  {
    int is_dev = -1, ord = -2;
    int ok = !failed(rt_cuda_pointer_info(&cu, d_a, &is_dev, &ord, err, sizeof err),
                     "pointer info of device memory", err);
    report("pointer info: cuMemAlloc memory is device memory of this device",
           ok && is_dev == 1 && ord == dev.ordinal);
    ok = !failed(rt_cuda_pointer_info(&cu, (CUdeviceptr)(uintptr_t)h_a, &is_dev, &ord, err,
                                      sizeof err),
                 "pointer info of host memory", err);
    report("pointer info: malloc memory is not device memory and not an error",
           ok && is_dev == 0);
    ok = !failed(rt_cuda_pointer_info(&cu, 0, &is_dev, &ord, err, sizeof err),
                 "pointer info of NULL", err);
    report("pointer info: 0 is not device memory", ok && is_dev == 0 && ord == -1);
  }

  if (failed(rt_cuda_launch(&cu, f_axpy, grid, block, 0, NULL, args, false, err, sizeof err),
             "launch smoke_axpy", err) ||
      failed(rt_cuda_ctx_sync(&cu, err, sizeof err), "synchronise after smoke_axpy", err) ||
      failed(rt_cuda_d2h(&cu, h_c, d_c, out_bytes, err, sizeof err), "copy c to the host", err))
    goto done;
  report("smoke_axpy on random inputs matches the CPU (default stream, sync copies)",
         check_axpy(h_c, h_a, h_b, alpha, N_ELEMS, "axpy"));

  /* A launch the driver must refuse: 512 threads exceed the kernel's .maxntid 256. The error
   * comes from the launch call and leaves the context usable. */
  {
    unsigned big[3] = {BLOCK * 2, 1, 1};
    rc = rt_cuda_launch(&cu, f_axpy, grid, big, 0, NULL, args, false, err, sizeof err);
    printf("INFO over-sized launch -> %s\n", rc ? err : "(accepted?)");
    report("a block larger than .maxntid is refused at launch with CUDA_ERROR_INVALID_VALUE",
           rc == CUDA_ERROR_INVALID_VALUE);
    rc = rt_cuda_launch(&cu, f_axpy, grid, block, 0, NULL, args, false, err, sizeof err);
    if (!rc) rc = rt_cuda_ctx_sync(&cu, err, sizeof err);
    report("the context still works after the refused launch", !failed(rc, "relaunch", err));
  }

  /* ---- a second run on a created stream: d2d, async fill, launch, async copy back ---- */
  {
    float alpha2 = -0.5f;
    void *args2[] = {&d_a, &d_b2, &d_c, &alpha2, &n};
    int ok = !failed(rt_cuda_d2d(&cu, d_b2, d_a, in_bytes, err, sizeof err), "copy a to b2", err) &&
             !failed(rt_cuda_ctx_sync(&cu, err, sizeof err), "synchronise after d2d", err) &&
             !failed(rt_cuda_stream_create(&cu, CU_STREAM_DEFAULT, &stream, err, sizeof err),
                     "create a stream", err) &&
             !failed(rt_cuda_memset32_async(&cu, d_c, 0xFFFFFFFFu, N_ELEMS + GUARD, stream, err,
                                            sizeof err),
                     "async fill of c", err) &&
             !failed(rt_cuda_launch(&cu, f_axpy, grid, block, 0, stream, args2, false, err, sizeof err),
                     "launch smoke_axpy on the stream", err);
    if (ok) memset(h_c, 0, out_bytes);
    ok = ok &&
         !failed(rt_cuda_d2h_async(&cu, h_c, d_c, out_bytes, stream, err, sizeof err),
                 "async copy of c to the host", err) &&
         !failed(rt_cuda_stream_sync(&cu, stream, err, sizeof err), "synchronise the stream",
                 err);
    report("smoke_axpy on a stream (d2d, memset32 async, async copy back) matches the CPU",
           ok && check_axpy(h_c, h_a, h_a, alpha2, N_ELEMS, "axpy on stream"));
    /* h2d_async is exercised by restoring b2 = b through the stream. */
    ok = !failed(rt_cuda_h2d_async(&cu, d_b2, h_b, in_bytes, stream, err, sizeof err),
                 "async copy of b to b2", err) &&
         !failed(rt_cuda_stream_sync(&cu, stream, err, sizeof err), "synchronise the stream",
                 err) &&
         !failed(rt_cuda_d2h(&cu, h_c, d_b2, in_bytes, err, sizeof err), "copy b2 back", err);
    report("async host-to-device copy round-trips", ok && memcmp(h_c, h_b, in_bytes) == 0);
  }

  /* ---- module global and atomics ---- */
  {
    CUdeviceptr d_counter = 0;
    size_t counter_bytes = 0;
    uint32_t zero = 0, got = 0;
    unsigned cgrid[3] = {7, 1, 1}, cblock[3] = {96, 1, 1};
    int ok =
      !failed(rt_cuda_module_global(&cu, mod, "smoke_counter", &d_counter, &counter_bytes, err,
                                    sizeof err),
              "look up smoke_counter", err) &&
      !failed(rt_cuda_h2d(&cu, d_counter, &zero, sizeof zero, err, sizeof err), "zero the counter",
              err) &&
      !failed(rt_cuda_launch(&cu, f_count, cgrid, cblock, 0, NULL, NULL, false, err, sizeof err),
              "launch smoke_count", err) &&
      !failed(rt_cuda_d2h(&cu, &got, d_counter, sizeof got, err, sizeof err), "read the counter",
              err);
    if (ok) printf("INFO smoke_counter: %zu bytes, value %u after 7 x 96 threads\n",
                   counter_bytes, got);
    report("module global found (4 bytes) and counts 7 x 96 = 672 atomic adds",
           ok && counter_bytes == 4 && got == 672);
  }

  /* ---- timing: each of 100 launches bracketed by events; the median is reported ---- */
  {
    float samples[TIMED_LAUNCHES];
    int ok = !failed(rt_cuda_event_create(&cu, CU_EVENT_DEFAULT, &ev_start, err, sizeof err),
                     "create an event", err) &&
             !failed(rt_cuda_event_create(&cu, CU_EVENT_DEFAULT, &ev_stop, err, sizeof err),
                     "create an event", err);
    for (int i = 0; ok && i < TIMED_LAUNCHES; i++) {
      ok = !failed(rt_cuda_event_record(&cu, ev_start, NULL, err, sizeof err), "record start",
                   err) &&
           !failed(rt_cuda_launch(&cu, f_axpy, grid, block, 0, NULL, args, false, err, sizeof err),
                   "timed launch", err) &&
           !failed(rt_cuda_event_record(&cu, ev_stop, NULL, err, sizeof err), "record stop",
                   err) &&
           !failed(rt_cuda_event_elapsed(&cu, ev_start, ev_stop, &samples[i], err, sizeof err),
                   "elapsed time", err);
    }
    float batch_ms = 0;
    ok = ok && !failed(rt_cuda_event_record(&cu, ev_start, NULL, err, sizeof err), "record", err);
    for (int i = 0; ok && i < TIMED_LAUNCHES; i++)
      ok = !failed(rt_cuda_launch(&cu, f_axpy, grid, block, 0, NULL, args, false, err, sizeof err),
                   "batched launch", err);
    ok = ok && !failed(rt_cuda_event_record(&cu, ev_stop, NULL, err, sizeof err), "record", err) &&
         !failed(rt_cuda_event_elapsed(&cu, ev_start, ev_stop, &batch_ms, err, sizeof err),
                 "elapsed time", err);
    if (ok) {
      qsort(samples, TIMED_LAUNCHES, sizeof samples[0], cmp_float);
      double median_ms = ((double)samples[TIMED_LAUNCHES / 2 - 1] +
                          (double)samples[TIMED_LAUNCHES / 2]) / 2;
      double gbps = median_ms > 0 ? 3.0 * (double)in_bytes / (median_ms * 1e-3) / 1e9 : 0;
      printf("INFO smoke_axpy (%u elements): median %.3f us, min %.3f us, max %.3f us over %d "
             "launches (%.0f GB/s at the median); %d back-to-back launches %.3f ms\n",
             N_ELEMS, median_ms * 1e3, (double)samples[0] * 1e3,
             (double)samples[TIMED_LAUNCHES - 1] * 1e3, TIMED_LAUNCHES, gbps, TIMED_LAUNCHES,
             (double)batch_ms);
      ok = median_ms > 0 && batch_ms > 0;
    }
    report("event timing of 100 launches gives positive times", ok);
    /* The timed launches recomputed c = alpha * a + b; it must still be right. */
    ok = ok && !failed(rt_cuda_d2h(&cu, h_c, d_c, out_bytes, err, sizeof err), "copy c back", err);
    report("result after the timed launches is still correct",
           ok && check_axpy(h_c, h_a, h_b, alpha, N_ELEMS, "axpy after timing"));
  }

done:
  /* Release in reverse order; failures here are reported like any other check. */
  failed(rt_cuda_event_destroy(&cu, ev_start, err, sizeof err), "destroy event", err);
  failed(rt_cuda_event_destroy(&cu, ev_stop, err, sizeof err), "destroy event", err);
  failed(rt_cuda_stream_destroy(&cu, stream, err, sizeof err), "destroy stream", err);
  failed(rt_cuda_free(&cu, d_c, err, sizeof err), "free c", err);
  failed(rt_cuda_free(&cu, d_b2, err, sizeof err), "free b2", err);
  failed(rt_cuda_free(&cu, d_b, err, sizeof err), "free b", err);
  failed(rt_cuda_free(&cu, d_a, err, sizeof err), "free a", err);
  failed(rt_cuda_module_unload(&cu, mod, err, sizeof err), "unload module", err);
  failed(rt_cuda_device_close(&cu, &dev, err, sizeof err), "close device", err);
  rt_cuda_unload(&cu);
  free(h_a);
  free(h_b);
  free(h_c);
  printf("%s cuda_smoke: %d passed, %d failed\n", n_fail ? "FAIL" : "PASS", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
