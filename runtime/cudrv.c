/* cudrv.c - the CUDA Driver API layer: loading libcuda, translating CUresult, and thin helpers
 * for devices, modules, launches, memory, streams and events (see cudrv.h).
 *
 * Design choices:
 *  - Every helper calls one driver function and turns a failure into a one-line message that
 *    names the call and its key arguments ("cuMemAlloc(1048576 bytes): CUDA_ERROR_... (...)"),
 *    so callers can pass the text straight to the user.
 *  - Function pointers come from dlopen/dlsym/cuGetProcAddress as void *. ISO C has no
 *    conversion between object and function pointers, so they are copied with memcpy into
 *    the typed fields; POSIX guarantees the two have the same representation (checked by a
 *    static assertion below).
 *  - Nothing here keeps state outside struct rt_cuda and the caller's structs.
 *  - This file depends only on libc and libdl, so small tools can link it alone.
 */
#include "cudrv.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define RT_CUDA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RT_CUDA_PRINTF(f, a)
#endif

_Static_assert(sizeof(void *) == sizeof(CUresult (*)(void)),
               "function pointers must have the size of void * (POSIX dlsym)");
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(sizeof(CUmemPoolProps) == 88 && offsetof(CUmemPoolProps, maxSize) == 24, "CUmemPoolProps_v1 layout");

/* ---- Messages ---------------------------------------------------------------------------- */

/* Writes a message into err (when there is room) and returns code. */
RT_CUDA_PRINTF(4, 5)
static int fail(int code, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* The length of the NUL-terminated string in a buffer of size n (strnlen is POSIX, not C). */
static size_t bounded_len(const char *s, size_t n) {
  const char *end = memchr(s, '\0', n);
  return end ? (size_t)(end - s) : n;
}

/* Appends to the message already in err, truncating at errlen. */
RT_CUDA_PRINTF(3, 4)
static void append(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  size_t used = bounded_len(err, errlen);
  if (used + 1 >= errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + used, errlen - used, fmt, ap);
  va_end(ap);
}

/* Appends a multi-line JIT log to err as one line: line breaks become " | ", blank lines
 * and trailing white space are dropped. */
static void append_log_one_line(char *err, size_t errlen, const char *log) {
  if (!err || !errlen) return;
  size_t used = bounded_len(err, errlen);
  int need_sep = 0;
  for (const char *p = log; *p && used + 1 < errlen;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    size_t trimmed = n;
    while (trimmed > 0 && (p[trimmed - 1] == '\r' || p[trimmed - 1] == ' ' ||
                           p[trimmed - 1] == '\t'))
      trimmed--;
    if (trimmed > 0) {
      int w = snprintf(err + used, errlen - used, "%s%.*s", need_sep ? " | " : "",
                       (int)(trimmed > INT_MAX ? INT_MAX : trimmed), p);
      if (w < 0) break;
      used += (size_t)w;
      if (used >= errlen) break;
      need_sep = 1;
    }
    p += n;
    if (*p == '\n') p++;
  }
}

int rt_cuda_check(const struct rt_cuda *cu, CUresult r, const char *what, char *err,
                  size_t errlen) {
  if (r == CUDA_SUCCESS) return 0;
  const char *name = NULL, *desc = NULL;
  if (cu && cu->cuGetErrorName && cu->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (cu && cu->cuGetErrorString && cu->cuGetErrorString(r, &desc) != CUDA_SUCCESS) desc = NULL;
  char code[32];
  if (!name) {
    snprintf(code, sizeof code, "CUDA error %d", r);
    name = code;
  }
  fail(r, err, errlen, "%s%s%s (%s)", what ? what : "", what ? ": " : "", name,
       desc ? desc : "no description");
  return r;
}

/* Fails unless rt_cuda_load has succeeded on cu. */
static int require_loaded(const struct rt_cuda *cu, char *err, size_t errlen) {
  if (cu && cu->lib) return 0;
  return fail(RT_CUDA_FAILED, err, errlen, "the CUDA driver is not loaded (rt_cuda_load)");
}

#define REQUIRE_LOADED(cu)                                \
  do {                                                    \
    int loaded_rc_ = require_loaded((cu), err, errlen);   \
    if (loaded_rc_) return loaded_rc_;                    \
  } while (0)

/* ---- Loading ---------------------------------------------------------------------------- */

/* Finds one entry point: through cuGetProcAddress_v2 with the base name and the fixed ABI
 * version when the driver has it, else (or when that fails) through dlsym with the versioned
 * name of the same ABI. Returns NULL when neither knows it. */
static void *resolve(const struct rt_cuda *cu, const char *name, const char *fallback) {
  void *fn = NULL;
  if (cu->cuGetProcAddress) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cu->cuGetProcAddress(name, &fn, RT_CUDA_ABI_VERSION,
                                      CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) fn = NULL;
  }
  if (!fn) fn = dlsym(cu->lib, fallback);
  return fn;
}

int rt_cuda_load(struct rt_cuda *cu, char *err, size_t errlen) {
  if (!cu) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_load: no struct rt_cuda given");
  memset(cu, 0, sizeof *cu);

  const char *env = getenv("TILE_LIBCUDA");
  const char *path = env && *env ? env : "libcuda.so.1";
  snprintf(cu->lib_path, sizeof cu->lib_path, "%s", path);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    fail(RT_CUDA_NO_DRIVER, err, errlen,
         "cannot load the CUDA driver (%s%s): %s; is an NVIDIA driver installed?", cu->lib_path,
         env && *env ? ", from TILE_LIBCUDA" : "", why ? why : "dlopen failed");
    memset(cu, 0, sizeof *cu);
    return RT_CUDA_NO_DRIVER;
  }
  cu->lib = lib;

  void *gp = dlsym(lib, "cuGetProcAddress_v2");   /* exported by drivers >= 12.0 */
  memcpy(&cu->cuGetProcAddress, &gp, sizeof gp);
  cu->via_getproc = gp != NULL;

  /* Resolve every entry point; remember the first required one that is missing. */
  const char *missing = NULL;
  void *fn;
#define RT_CUDA_RESOLVE(name, fallback, required, params) \
  fn = resolve(cu, #name, fallback);                      \
  if (!fn && (required) && !missing) missing = #name;     \
  memcpy(&cu->name, &fn, sizeof fn);
  RT_CUDA_ENTRY_POINTS(RT_CUDA_RESOLVE)
#undef RT_CUDA_RESOLVE

  int rc = 0;
  if (cu->cuDriverGetVersion && cu->cuDriverGetVersion(&cu->driver_version) != CUDA_SUCCESS)
    cu->driver_version = 0;
  if (missing && cu->driver_version > 0) {
    rc = fail(RT_CUDA_FAILED, err, errlen,
              "the CUDA driver (%s, version %d.%d) has no entry point %s; the NVIDIA driver is "
              "too old, update it",
              cu->lib_path, cu->driver_version / 1000, cu->driver_version % 1000 / 10, missing);
  } else if (missing) {
    rc = fail(RT_CUDA_FAILED, err, errlen,
              "%s has no entry point %s; is it the NVIDIA CUDA driver library (libcuda.so.1)?",
              cu->lib_path, missing);
  } else {
    CUresult r = cu->cuInit(0);
    if (r != CUDA_SUCCESS) {
      rt_cuda_check(cu, r, "cuInit(0)", err, errlen);
      append(err, errlen, " [driver %s, version %d.%d]", cu->lib_path, cu->driver_version / 1000,
             cu->driver_version % 1000 / 10);
      rc = r;
    }
  }
  if (rc) {
    dlclose(lib);
    memset(cu, 0, sizeof *cu);
  }
  return rc;
}

void rt_cuda_unload(struct rt_cuda *cu) {
  if (!cu) return;
  if (cu->lib) dlclose(cu->lib);
  memset(cu, 0, sizeof *cu);
}

/* ---- Devices ---------------------------------------------------------------------------- */

int rt_cuda_device_count(const struct rt_cuda *cu, int *count, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!count) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_device_count: count is NULL");
  *count = 0;
  return rt_cuda_check(cu, cu->cuDeviceGetCount(count), "cuDeviceGetCount", err, errlen);
}

/* The attributes rt_cuda_device_open reads. The clock rates are optional because recent
 * CUDA releases deprecate them; a device that no longer reports them gets 0. */
static const struct {
  CUdevice_attribute attr;
  size_t offset;
  int optional;
  const char *what;
} device_attrs[] = {
  {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(struct rt_cuda_device, cc_major), 0,
   "COMPUTE_CAPABILITY_MAJOR"},
  {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(struct rt_cuda_device, cc_minor), 0,
   "COMPUTE_CAPABILITY_MINOR"},
  {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(struct rt_cuda_device, sm_count), 0,
   "MULTIPROCESSOR_COUNT"},
  {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
   offsetof(struct rt_cuda_device, max_threads_per_block), 0, "MAX_THREADS_PER_BLOCK"},
  {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
   offsetof(struct rt_cuda_device, smem_per_block_optin), 0, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
  {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
   offsetof(struct rt_cuda_device, smem_per_sm), 0, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"},
  {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
   offsetof(struct rt_cuda_device, regs_per_sm), 0, "MAX_REGISTERS_PER_MULTIPROCESSOR"},
  {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(struct rt_cuda_device, l2_bytes), 0,
   "L2_CACHE_SIZE"},
  {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, offsetof(struct rt_cuda_device, bus_width_bits),
   0, "GLOBAL_MEMORY_BUS_WIDTH"},
  {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, offsetof(struct rt_cuda_device, clock_khz), 1, "CLOCK_RATE"},
  {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, offsetof(struct rt_cuda_device, mem_clock_khz), 1,
   "MEMORY_CLOCK_RATE"},
};

int rt_cuda_device_open(const struct rt_cuda *cu, int ordinal, struct rt_cuda_device *out,
                        char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!out) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_device_open: out is NULL");
  memset(out, 0, sizeof *out);
  out->ordinal = ordinal;
  out->driver_version = cu->driver_version;

  int count = 0;
  CUresult r = cu->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, "cuDeviceGetCount", err, errlen);
  if (ordinal < 0 || ordinal >= count)
    return fail(RT_CUDA_FAILED, err, errlen, "CUDA device %d does not exist (%d device%s found)",
                ordinal, count, count == 1 ? "" : "s");

  char what[96];
  snprintf(what, sizeof what, "cuDeviceGet(%d)", ordinal);
  r = cu->cuDeviceGet(&out->dev, ordinal);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, what, err, errlen);
  r = cu->cuDeviceGetName(out->name, (int)sizeof out->name, out->dev);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, "cuDeviceGetName", err, errlen);
  out->name[sizeof out->name - 1] = '\0';

  for (size_t i = 0; i < sizeof device_attrs / sizeof device_attrs[0]; i++) {
    int value = 0;
    r = cu->cuDeviceGetAttribute(&value, device_attrs[i].attr, out->dev);
    if (r != CUDA_SUCCESS) {
      if (device_attrs[i].optional) continue;
      snprintf(what, sizeof what, "cuDeviceGetAttribute(%s)", device_attrs[i].what);
      return rt_cuda_check(cu, r, what, err, errlen);
    }
    memcpy((char *)out + device_attrs[i].offset, &value, sizeof value);
  }

  /* Remember what was current so close can restore it; then bind the primary context. */
  r = cu->cuCtxGetCurrent(&out->prev_ctx);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, "cuCtxGetCurrent", err, errlen);
  snprintf(what, sizeof what, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
  r = cu->cuDevicePrimaryCtxRetain(&out->ctx, out->dev);
  if (r != CUDA_SUCCESS) {
    out->ctx = NULL;
    return rt_cuda_check(cu, r, what, err, errlen);
  }
  r = cu->cuCtxSetCurrent(out->ctx);
  if (r != CUDA_SUCCESS) {
    rt_cuda_check(cu, r, "cuCtxSetCurrent(primary context)", err, errlen);
    cu->cuDevicePrimaryCtxRelease(out->dev);
    out->ctx = NULL;
    return r;
  }
  return 0;
}

int rt_cuda_device_close(const struct rt_cuda *cu, struct rt_cuda_device *dev, char *err,
                         size_t errlen) {
  if (!dev || !dev->ctx) return 0;
  REQUIRE_LOADED(cu);
  int rc = 0;
  CUcontext current = NULL;
  if (cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == dev->ctx &&
      dev->prev_ctx != dev->ctx) {
    CUresult r = cu->cuCtxSetCurrent(dev->prev_ctx);
    if (r != CUDA_SUCCESS) rc = rt_cuda_check(cu, r, "cuCtxSetCurrent(previous context)", err,
                                              errlen);
  }
  CUresult r = cu->cuDevicePrimaryCtxRelease(dev->dev);
  if (r != CUDA_SUCCESS && !rc) rc = rt_cuda_check(cu, r, "cuDevicePrimaryCtxRelease", err, errlen);
  dev->ctx = NULL;
  dev->prev_ctx = NULL;
  return rc;
}

int rt_cuda_ctx_sync(const struct rt_cuda *cu, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuCtxSynchronize(), "cuCtxSynchronize", err, errlen);
}

/* ---- Modules and functions ----------------------------------------------------------------- */

/* The JIT options of a module load or a PTX link: the verbose info log (into the caller's
 * buffer, or a scratch one), our error log for the message, -O4, and one last option that
 * differs (the wall time out, or the target). Scalar values travel cast to void *; the
 * driver writes the OUT values (bytes of log written, wall time) back into their slots. */
enum { JIT_NOPT = 8 };
struct jit_opts {
  char scratch_info[1024];
  char error_log[16384];
  char *ilog;
  size_t ilen;
  CUjit_option options[JIT_NOPT];
  void *values[JIT_NOPT];
};

static void jit_opts_init(struct jit_opts *j, char *info_log, size_t info_len, CUjit_option last,
                          void *last_value) {
  j->ilog = info_log && info_len ? info_log : j->scratch_info;
  j->ilen = info_log && info_len ? info_len : sizeof j->scratch_info;
  if (j->ilen > UINT_MAX) j->ilen = UINT_MAX;
  j->ilog[0] = '\0';
  j->error_log[0] = '\0';
  const CUjit_option o[JIT_NOPT] = {CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                    CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                    CU_JIT_LOG_VERBOSE,      CU_JIT_OPTIMIZATION_LEVEL,
                                    CU_JIT_GENERATE_LINE_INFO, last};
  void *const v[JIT_NOPT] = {j->ilog,
                             (void *)(uintptr_t)j->ilen,
                             j->error_log,
                             (void *)(uintptr_t)sizeof j->error_log,
                             (void *)(uintptr_t)1,
                             (void *)(uintptr_t)4,
                             (void *)(uintptr_t)1, /* line information (no effect on the code) */
                             last_value};
  memcpy(j->options, o, sizeof o);
  memcpy(j->values, v, sizeof v);
}

/* Terminates both logs at the length the driver reported, whether or not it counted the NUL. */
static void jit_opts_finish(struct jit_opts *j) {
  size_t info_used = (unsigned)(uintptr_t)j->values[1];
  size_t error_used = (unsigned)(uintptr_t)j->values[3];
  j->ilog[info_used < j->ilen ? info_used : j->ilen - 1] = '\0';
  j->error_log[error_used < sizeof j->error_log ? error_used : sizeof j->error_log - 1] = '\0';
}

static int jit_fail(const struct rt_cuda *cu, CUresult r, const char *what, const struct jit_opts *j, char *err,
                    size_t errlen) {
  rt_cuda_check(cu, r, what, err, errlen);
  if (j->error_log[0]) {
    append(err, errlen, ": ");
    append_log_one_line(err, errlen, j->error_log);
  }
  return r;
}

int rt_cuda_module_load(const struct rt_cuda *cu, const void *image, CUmodule *mod,
                        char *info_log, size_t info_len, char *err, size_t errlen,
                        float *jit_ms) {
  REQUIRE_LOADED(cu);
  if (jit_ms) *jit_ms = 0.0f;
  if (info_log && info_len) info_log[0] = '\0';
  if (!image || !mod)
    return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_module_load: image or module is NULL");
  *mod = NULL;

  struct jit_opts j;
  jit_opts_init(&j, info_log, info_len, CU_JIT_WALL_TIME, NULL);
  CUresult r = cu->cuModuleLoadDataEx(mod, image, JIT_NOPT, j.options, j.values);
  jit_opts_finish(&j);
  if (jit_ms) memcpy(jit_ms, &j.values[6], sizeof *jit_ms);
  if (r != CUDA_SUCCESS) {
    *mod = NULL;
    return jit_fail(cu, r, "cuModuleLoadDataEx", &j, err, errlen);
  }
  return 0;
}

int rt_cuda_link_ptx(const struct rt_cuda *cu, const char *ptx, size_t ptx_len, int jit_target,
                     void *(*alloc)(void *ud, size_t bytes), void *alloc_ud, void **cubin, size_t *cubin_len,
                     char *info_log, size_t info_len, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (cubin) *cubin = NULL;
  if (cubin_len) *cubin_len = 0;
  if (info_log && info_len) info_log[0] = '\0';
  if (!ptx || !cubin || !cubin_len)
    return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_link_ptx: ptx or output is NULL");
  if (!cu->cuLinkCreate || !cu->cuLinkAddData || !cu->cuLinkComplete || !cu->cuLinkDestroy)
    return fail(RT_CUDA_FAILED, err, errlen, "the CUDA driver has no cuLink entry points");

  /* the same options as rt_cuda_module_load; j outlives the link state that points into it */
  struct jit_opts j;
  jit_opts_init(&j, info_log, info_len, CU_JIT_TARGET, (void *)(uintptr_t)(unsigned)jit_target);
  unsigned nopt = JIT_NOPT - (jit_target ? 0 : 1);
  CUlinkState state = NULL;
  CUresult r = cu->cuLinkCreate(nopt, j.options, j.values, &state);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, "cuLinkCreate", err, errlen);
  /* the PTX is passed with its terminating NUL, as the driver expects for text input */
  const char *what = "cuLinkAddData(PTX)";
  r = cu->cuLinkAddData(state, CU_JIT_INPUT_PTX, (void *)(uintptr_t)ptx, ptx_len + 1, "tile.ptx", 0, NULL,
                        NULL);
  void *image = NULL;
  size_t size = 0;
  if (r == CUDA_SUCCESS) {
    what = "cuLinkComplete";
    r = cu->cuLinkComplete(state, &image, &size);
  }
  if (r == CUDA_SUCCESS && (!image || size == 0)) {
    cu->cuLinkDestroy(state);
    return fail(RT_CUDA_FAILED, err, errlen, "cuLinkComplete returned an empty image");
  }
  if (r == CUDA_SUCCESS) {
    *cubin = alloc ? alloc(alloc_ud, size) : malloc(size);
    if (*cubin) {
      memcpy(*cubin, image, size);
      *cubin_len = size;
    }
  }
  jit_opts_finish(&j);
  cu->cuLinkDestroy(state); /* frees image */
  if (r != CUDA_SUCCESS) return jit_fail(cu, r, what, &j, err, errlen);
  if (!*cubin) return fail(RT_CUDA_NOMEM, err, errlen, "rt_cuda_link_ptx: out of memory (%zu bytes)", size);
  return 0;
}

int rt_cuda_module_unload(const struct rt_cuda *cu, CUmodule mod, char *err, size_t errlen) {
  if (!mod) return 0;
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuModuleUnload(mod), "cuModuleUnload", err, errlen);
}

int rt_cuda_function(const struct rt_cuda *cu, CUmodule mod, const char *name, CUfunction *f,
                     char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!mod || !name || !f)
    return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_function: module, name or f is NULL");
  *f = NULL;
  CUresult r = cu->cuModuleGetFunction(f, mod, name);
  if (r == CUDA_SUCCESS) return 0;
  char what[160];
  snprintf(what, sizeof what, "cuModuleGetFunction(\"%s\")", name);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_module_global(const struct rt_cuda *cu, CUmodule mod, const char *name,
                          CUdeviceptr *ptr, size_t *bytes, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!mod || !name || !ptr)
    return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_module_global: module, name or ptr is NULL");
  size_t size = 0;
  *ptr = 0;
  if (bytes) *bytes = 0;
  CUresult r = cu->cuModuleGetGlobal(ptr, &size, mod, name);
  if (r == CUDA_SUCCESS) {
    if (bytes) *bytes = size;
    return 0;
  }
  char what[160];
  snprintf(what, sizeof what, "cuModuleGetGlobal(\"%s\")", name);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_func_attrs(const struct rt_cuda *cu, CUfunction f, struct rt_cuda_func_attrs *out,
                       char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!f || !out) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_func_attrs: f or out is NULL");
  static const struct {
    CUfunction_attribute attr;
    size_t offset;
    const char *what;
  } attrs[] = {
    {CU_FUNC_ATTRIBUTE_NUM_REGS, offsetof(struct rt_cuda_func_attrs, num_regs), "NUM_REGS"},
    {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(struct rt_cuda_func_attrs, local_bytes),
     "LOCAL_SIZE_BYTES"},
    {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(struct rt_cuda_func_attrs, max_threads),
     "MAX_THREADS_PER_BLOCK"},
    {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(struct rt_cuda_func_attrs, static_smem),
     "SHARED_SIZE_BYTES"},
    {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
     offsetof(struct rt_cuda_func_attrs, max_dynamic_smem), "MAX_DYNAMIC_SHARED_SIZE_BYTES"},
  };
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    int value = 0;
    CUresult r = cu->cuFuncGetAttribute(&value, attrs[i].attr, f);
    if (r != CUDA_SUCCESS) {
      char what[96];
      snprintf(what, sizeof what, "cuFuncGetAttribute(%s)", attrs[i].what);
      return rt_cuda_check(cu, r, what, err, errlen);
    }
    memcpy((char *)out + attrs[i].offset, &value, sizeof value);
  }
  return 0;
}

int rt_cuda_set_dynamic_smem(const struct rt_cuda *cu, CUfunction f, int bytes, char *err,
                             size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!f) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_set_dynamic_smem: f is NULL");
  CUresult r = cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  if (r == CUDA_SUCCESS) return 0;
  char what[96];
  snprintf(what, sizeof what, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES = %d)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_occupancy(const struct rt_cuda *cu, CUfunction f, int block_threads,
                      size_t dynamic_smem, int *blocks, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!f || !blocks) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_occupancy: f or blocks is NULL");
  *blocks = 0;
  CUresult r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_threads,
                                                               dynamic_smem);
  if (r == CUDA_SUCCESS) return 0;
  char what[128];
  snprintf(what, sizeof what,
           "cuOccupancyMaxActiveBlocksPerMultiprocessor(%d threads, %zu bytes dynamic smem)",
           block_threads, dynamic_smem);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_launch(const struct rt_cuda *cu, CUfunction f, const unsigned grid[3],
                   const unsigned block[3], unsigned smem_bytes, CUstream stream, void **args,
                   bool grid_dep, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!f || !grid || !block)
    return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_launch: f, grid or block is NULL");
  if (grid_dep && cu->cuLaunchKernelEx) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes, stream, &attr, 1};
    if (cu->cuLaunchKernelEx(&cfg, f, args, NULL) == CUDA_SUCCESS) return 0;
    /* (a driver or stream state that refuses the attribute: the plain launch below reports
     * a configuration error the same way) */
  }
  CUresult r = cu->cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                  smem_bytes, stream, args, NULL);
  if (r == CUDA_SUCCESS) return 0;
  char what[160];
  snprintf(what, sizeof what, "cuLaunchKernel(grid %ux%ux%u, block %ux%ux%u, smem %u bytes)",
           grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

/* ---- Memory ----------------------------------------------------------------------------- */

int rt_cuda_alloc(const struct rt_cuda *cu, size_t bytes, CUdeviceptr *ptr, char *err,
                  size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!ptr) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_alloc: ptr is NULL");
  *ptr = 0;
  CUresult r = cu->cuMemAlloc(ptr, bytes);
  if (r == CUDA_SUCCESS) return 0;
  *ptr = 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_free(const struct rt_cuda *cu, CUdeviceptr ptr, char *err, size_t errlen) {
  if (!ptr) return 0;
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuMemFree(ptr), "cuMemFree", err, errlen);
}

int rt_cuda_h2d(const struct rt_cuda *cu, CUdeviceptr dst, const void *src, size_t bytes,
                char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemcpyHtoD(dst, src, bytes);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemcpyHtoD(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_d2h(const struct rt_cuda *cu, void *dst, CUdeviceptr src, size_t bytes, char *err,
                size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemcpyDtoH(dst, src, bytes);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemcpyDtoH(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_d2d(const struct rt_cuda *cu, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemcpyDtoD(dst, src, bytes);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemcpyDtoD(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_memset8(const struct rt_cuda *cu, CUdeviceptr dst, unsigned char value,
                    size_t bytes, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemsetD8(dst, value, bytes);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemsetD8(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_h2d_async(const struct rt_cuda *cu, CUdeviceptr dst, const void *src, size_t bytes,
                      CUstream stream, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemcpyHtoDAsync(dst, src, bytes, stream);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemcpyHtoDAsync(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_d2h_async(const struct rt_cuda *cu, void *dst, CUdeviceptr src, size_t bytes,
                      CUstream stream, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemcpyDtoHAsync(dst, src, bytes, stream);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemcpyDtoHAsync(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_memset32_async(const struct rt_cuda *cu, CUdeviceptr dst, uint32_t value,
                           size_t count, CUstream stream, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  CUresult r = cu->cuMemsetD32Async(dst, value, count, stream);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemsetD32Async(%zu words)", count);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_pointer_info(const struct rt_cuda *cu, CUdeviceptr p, int *is_device, int *ordinal,
                         char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!is_device) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_pointer_info: is_device is NULL");
  *is_device = 0;
  if (ordinal) *ordinal = -1;
  if (p == 0) return 0;

  /* The attribute is written as an unsigned int (CUmemorytype). A pointer the driver has
   * never seen (plain malloc or stack memory) gives CUDA_ERROR_INVALID_VALUE: that answers
   * the question (not device memory) rather than being a failure. */
  unsigned int type = 0;
  CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (r == CUDA_ERROR_INVALID_VALUE) return 0;
  if (r != CUDA_SUCCESS)
    return rt_cuda_check(cu, r, "cuPointerGetAttribute(MEMORY_TYPE)", err, errlen);
  *is_device = type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
  if (ordinal) {
    int o = -1;
    if (cu->cuPointerGetAttribute(&o, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS)
      *ordinal = o;
  }
  return 0;
}

/* ---- Streams and events ------------------------------------------------------------------- */

int rt_cuda_stream_create(const struct rt_cuda *cu, unsigned flags, CUstream *stream,
                          char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!stream) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_stream_create: stream is NULL");
  *stream = NULL;
  return rt_cuda_check(cu, cu->cuStreamCreate(stream, flags), "cuStreamCreate", err, errlen);
}

int rt_cuda_stream_destroy(const struct rt_cuda *cu, CUstream stream, char *err, size_t errlen) {
  if (!stream) return 0;
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuStreamDestroy(stream), "cuStreamDestroy", err, errlen);
}

int rt_cuda_stream_sync(const struct rt_cuda *cu, CUstream stream, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuStreamSynchronize(stream), "cuStreamSynchronize", err, errlen);
}

int rt_cuda_event_create(const struct rt_cuda *cu, unsigned flags, CUevent *event, char *err,
                         size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!event) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_event_create: event is NULL");
  *event = NULL;
  return rt_cuda_check(cu, cu->cuEventCreate(event, flags), "cuEventCreate", err, errlen);
}

int rt_cuda_event_record(const struct rt_cuda *cu, CUevent event, CUstream stream, char *err,
                         size_t errlen) {
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuEventRecord(event, stream), "cuEventRecord", err, errlen);
}

int rt_cuda_event_elapsed(const struct rt_cuda *cu, CUevent start, CUevent end, float *ms,
                          char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  if (!ms) return fail(RT_CUDA_FAILED, err, errlen, "rt_cuda_event_elapsed: ms is NULL");
  *ms = 0.0f;
  CUresult r = cu->cuEventSynchronize(end);
  if (r != CUDA_SUCCESS) return rt_cuda_check(cu, r, "cuEventSynchronize", err, errlen);
  return rt_cuda_check(cu, cu->cuEventElapsedTime(ms, start, end), "cuEventElapsedTime", err,
                       errlen);
}

int rt_cuda_event_destroy(const struct rt_cuda *cu, CUevent event, char *err, size_t errlen) {
  if (!event) return 0;
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuEventDestroy(event), "cuEventDestroy", err, errlen);
}

/* ---- stream-ordered memory ---- */

static int need(int present, const char *name, char *err, size_t errlen) {
  if (present) return 0;
  return fail(RT_CUDA_FAILED, err, errlen, "%s is not provided by this driver (needs CUDA 11.2 or newer)",
              name);
}

int rt_cuda_pool_create(const struct rt_cuda *cu, int ordinal, uint64_t keep_bytes,
                        CUmemoryPool *pool, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  *pool = NULL;
  if (need(cu->cuMemPoolCreate != NULL, "cuMemPoolCreate", err, errlen) ||
      need(cu->cuMemPoolSetAttribute != NULL, "cuMemPoolSetAttribute", err, errlen))
    return RT_CUDA_FAILED;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = ordinal;
  int rc = rt_cuda_check(cu, cu->cuMemPoolCreate(pool, &props), "cuMemPoolCreate", err, errlen);
  if (rc) return rc;
  uint64_t keep = keep_bytes;
  rc = rt_cuda_check(cu, cu->cuMemPoolSetAttribute(*pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     "cuMemPoolSetAttribute(release threshold)", err, errlen);
  if (rc) {
    cu->cuMemPoolDestroy(*pool);
    *pool = NULL;
  }
  return rc;
}

int rt_cuda_pool_destroy(const struct rt_cuda *cu, CUmemoryPool pool, char *err, size_t errlen) {
  if (!pool) return 0;
  REQUIRE_LOADED(cu);
  return rt_cuda_check(cu, cu->cuMemPoolDestroy(pool), "cuMemPoolDestroy", err, errlen);
}

int rt_cuda_pool_alloc(const struct rt_cuda *cu, CUmemoryPool pool, size_t bytes, CUstream stream,
                       CUdeviceptr *ptr, char *err, size_t errlen) {
  REQUIRE_LOADED(cu);
  *ptr = 0;
  if (need(cu->cuMemAllocFromPoolAsync != NULL, "cuMemAllocFromPoolAsync", err, errlen))
    return RT_CUDA_FAILED;
  CUresult r = cu->cuMemAllocFromPoolAsync(ptr, bytes, pool, stream);
  if (r == CUDA_SUCCESS) return 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemAllocFromPoolAsync(%zu bytes)", bytes);
  return rt_cuda_check(cu, r, what, err, errlen);
}

int rt_cuda_free_async(const struct rt_cuda *cu, CUdeviceptr ptr, CUstream stream, char *err,
                       size_t errlen) {
  if (!ptr) return 0;
  REQUIRE_LOADED(cu);
  if (need(cu->cuMemFreeAsync != NULL, "cuMemFreeAsync", err, errlen)) return RT_CUDA_FAILED;
  return rt_cuda_check(cu, cu->cuMemFreeAsync(ptr, stream), "cuMemFreeAsync", err, errlen);
}

int rt_cuda_stream_capturing(const struct rt_cuda *cu, CUstream stream, int *capturing, char *err,
                             size_t errlen) {
  REQUIRE_LOADED(cu);
  *capturing = 0;
  if (need(cu->cuStreamIsCapturing != NULL, "cuStreamIsCapturing", err, errlen))
    return RT_CUDA_FAILED;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  int rc = rt_cuda_check(cu, cu->cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing", err, errlen);
  *capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
  return rc;
}
