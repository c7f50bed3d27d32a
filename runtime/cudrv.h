/* cudrv.h - the runtime's layer over the CUDA Driver API (internal, not public API).
 *
 * Design choices:
 *  - libcuda is never linked: rt_cuda_load() dlopens it at run time, so the project builds and
 *    the CPU interpreter runs on machines without an NVIDIA driver, and a missing driver is an
 *    ordinary error with a clear message instead of a loader failure at program start.
 *  - <cuda.h> is not included, so no CUDA toolkit is needed to build. The few types and enum
 *    values we use are declared here; the values are part of the driver's stable ABI and are
 *    copied from cuda.h (see the note above the constants for how they were checked).
 *  - Entry points are resolved with cuGetProcAddress_v2 using the BASE name and one fixed ABI
 *    version (12000), which every driver >= 12.0 provides (gpu-facts.md section 5). Where
 *    cuGetProcAddress_v2 is absent (drivers older than 12.0) or does not know a name, the
 *    explicitly versioned symbol of the same ABI ("cuMemAlloc_v2", ...) is taken with dlsym.
 *  - The list of entry points is written once (RT_CUDA_ENTRY_POINTS below); the struct fields
 *    and the resolver both expand from it.
 *  - This is the one place where CUresult is translated: every rt_cuda_* function returns 0 on
 *    success and nonzero on failure, with a one-line message in the caller's buffer. Nothing
 *    here prints, exits or aborts. Failures the driver reported return the (positive) CUresult;
 *    failures detected here return a negative RT_CUDA_* code.
 *  - Contexts: only the device's PRIMARY context is used (retained, never cuCtxCreate'd), so a
 *    host program that also uses the CUDA runtime or PyTorch shares the same context.
 *  - Do not include this header and <cuda.h> in the same translation unit: the typedefs clash.
 */
#ifndef RT_CUDRV_H
#define RT_CUDRV_H

#ifdef __cuda_cuda_h__
#error "runtime/cudrv.h declares its own CUDA Driver API types; do not include <cuda.h> with it"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Driver API types ---------------------------------------------------------------------
 * Same sizes and calling convention as cuda.h on 64-bit Linux: CUresult and the attribute
 * enums are 4-byte ints, CUdeviceptr is a 64-bit integer, handles are opaque pointers (the
 * struct tags are the ones cuda.h uses).                                                      */

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUjit_option;
typedef int CUjitInputType;
typedef int CUpointer_attribute;
typedef int CUdriverProcAddressQueryResult;

/* The 128-byte TMA descriptor (cuda.h: CUtensorMap, CU_TENSOR_MAP_NUM_QWORDS = 16). CUDA 13.0
 * aligns it to 128 bytes (12.x used 64); the stricter alignment is valid for both. */
typedef struct CUtensorMap_st {
  _Alignas(128) uint64_t opaque[16];
} CUtensorMap;

/* ---- Driver API constants -----------------------------------------------------------------
 * Static check: every value below was copied from /usr/local/cuda/include/cuda.h of CUDA 13.0
 * (CUDA_VERSION 13000) from the enum named in each group's comment, and verified by compiling
 * a file that includes that cuda.h and _Static_asserts each name against the number written
 * here. These values are ABI: NVIDIA appends to the enums but never renumbers them.          */

/* enum cudaError_enum (CUresult) */
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_NOT_SUPPORTED = 801
};

/* enum CUdevice_attribute_enum */
enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
};

/* enum CUfunction_attribute_enum */
enum {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

/* enum CUjit_option_enum */
enum {
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_TARGET = 9,
  CU_JIT_LOG_VERBOSE = 12,
  CU_JIT_GENERATE_LINE_INFO = 13 /* keep the PTX's .loc lines: profilers map SASS to .tile lines */
};

/* enum CUjit_target_enum: the accelerated ("a") targets are CU_COMPUTE_ACCELERATED_TARGET_BASE
 * (0x10000) + the compute capability (cuda.h of CUDA 12.x; not part of the 13.0 check above) */
enum {
  CU_TARGET_COMPUTE_90A = 0x10000 + 90
};

/* enum CUjitInputType_enum */
enum {
  CU_JIT_INPUT_CUBIN = 0,
  CU_JIT_INPUT_PTX = 1
};

/* enum CUevent_flags_enum */
enum {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2
};

/* enum CUstream_flags_enum */
enum {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1
};

/* enum CUdriverProcAddress_flags_enum and enum CUdriverProcAddressQueryResult_enum */
enum {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

/* enum CUpointer_attribute_enum */
enum {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
};

/* enum CUmemorytype_enum */
enum {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04
};

/* enum CUmemPool_attribute_enum, CUmemAllocationType_enum, CUmemLocationType_enum and
 * CUstreamCaptureStatus_enum */
enum {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEM_ALLOCATION_TYPE_PINNED = 1,
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
  CU_STREAM_CAPTURE_STATUS_NONE = 0
};

/* cuda.h: CUmemPoolProps_v1 (88 bytes; the reserved bytes must be zero). */
typedef struct CUmemPoolProps_st {
  int allocType;
  int handleTypes;
  struct {
    int type;
    int id;
  } location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

/* cuda.h: CUlaunchAttribute (72 bytes: the id padded to 8, a 64-byte value union) and
 * CUlaunchConfig, for cuLaunchKernelEx; only the attribute this runtime sets is named. */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct CUlaunchAttribute_st {
  int id;
  char pad[4];
  union {
    char pad[64];
    int programmaticStreamSerializationAllowed;
  } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

/* ---- Status codes of this layer -------------------------------------------------------------
 * A failing rt_cuda_* function returns a positive CUresult when the driver reported the error,
 * or one of these negative codes when the failure was found here.                            */
enum {
  RT_CUDA_FAILED = -1,    /* bad argument, missing entry point, driver not loaded, ... */
  RT_CUDA_NO_DRIVER = -2, /* rt_cuda_load could not dlopen the library */
  RT_CUDA_NOMEM = -3      /* the caller's allocation function failed */
};

/* The ABI version asked of cuGetProcAddress for every entry point (CUDA 12.0). */
#define RT_CUDA_ABI_VERSION 12000

/* ---- Entry points -------------------------------------------------------------------------
 * X(name, fallback symbol, required, parameter list)
 *  - name: the base name given to cuGetProcAddress_v2 and the field name in struct rt_cuda.
 *  - fallback symbol: the exported name of the same ABI, used with dlsym when
 *    cuGetProcAddress_v2 is missing or does not return the entry point.
 *  - required: 0 for entry points that old drivers lack; those are left NULL.
 *  - parameter list: the signature of the 12000 ABI (cudaTypedefs.h PFN_<name>_v<N> with the
 *    highest N <= 12000). Note that cuCtxSynchronize_v13000 takes a context; the 12000 ABI
 *    of cuCtxSynchronize takes none.
 * cuGetProcAddress_v2 itself is looked up with dlsym and kept apart (struct rt_cuda).        */
#define RT_CUDA_ENTRY_POINTS(X)                                                                  \
  X(cuGetErrorName, "cuGetErrorName", 1, (CUresult error, const char **str))                     \
  X(cuGetErrorString, "cuGetErrorString", 1, (CUresult error, const char **str))                 \
  X(cuInit, "cuInit", 1, (unsigned int flags))                                                   \
  X(cuDriverGetVersion, "cuDriverGetVersion", 1, (int *version))                                 \
  X(cuDeviceGet, "cuDeviceGet", 1, (CUdevice *device, int ordinal))                             \
  X(cuDeviceGetCount, "cuDeviceGetCount", 1, (int *count))                                       \
  X(cuDeviceGetName, "cuDeviceGetName", 1, (char *name, int len, CUdevice dev))                  \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 1,                                             \
    (int *value, CUdevice_attribute attrib, CUdevice dev))                                       \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1, (CUcontext *ctx, CUdevice dev))    \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 1, (CUdevice dev))                \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 1, (CUcontext ctx))                                      \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", 1, (CUcontext *ctx))                                    \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 1, (CUcontext ctx))                                 \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 1, (CUcontext *ctx))                                 \
  X(cuCtxSynchronize, "cuCtxSynchronize", 1, (void))                                             \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", 1,                                                 \
    (CUmodule *module, const void *image, unsigned int num_options, CUjit_option *options,      \
     void **option_values))                                                                      \
  X(cuModuleUnload, "cuModuleUnload", 1, (CUmodule module))                                      \
  X(cuModuleGetFunction, "cuModuleGetFunction", 1,                                               \
    (CUfunction *func, CUmodule module, const char *name))                                      \
  X(cuModuleGetGlobal, "cuModuleGetGlobal_v2", 1,                                                \
    (CUdeviceptr *ptr, size_t *bytes, CUmodule module, const char *name))                       \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", 1,                                                 \
    (int *value, CUfunction_attribute attrib, CUfunction func))                                  \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", 1,                                                 \
    (CUfunction func, CUfunction_attribute attrib, int value))                                   \
  X(cuLaunchKernel, "cuLaunchKernel", 1,                                                         \
    (CUfunction func, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,             \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int smem_bytes,  \
     CUstream stream, void **params, void **extra))                                              \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", 0,                                                     \
    (const CUlaunchConfig *config, CUfunction func, void **params, void **extra))               \
  X(cuMemAlloc, "cuMemAlloc_v2", 1, (CUdeviceptr *ptr, size_t bytes))                           \
  X(cuMemFree, "cuMemFree_v2", 1, (CUdeviceptr ptr))                                             \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", 1, (CUdeviceptr dst, const void *src, size_t bytes))        \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", 1, (void *dst, CUdeviceptr src, size_t bytes))              \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", 1, (CUdeviceptr dst, CUdeviceptr src, size_t bytes))        \
  X(cuMemsetD8, "cuMemsetD8_v2", 1, (CUdeviceptr dst, unsigned char value, size_t count))        \
  X(cuMemsetD32Async, "cuMemsetD32Async", 1,                                                     \
    (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream))                        \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1,                                                \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                           \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1,                                                \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                                 \
  X(cuMemPoolCreate, "cuMemPoolCreate", 0, (CUmemoryPool *pool, const CUmemPoolProps *props))   \
  X(cuMemPoolDestroy, "cuMemPoolDestroy", 0, (CUmemoryPool pool))                                \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 0, (CUmemoryPool pool, int attr, void *value)) \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0,                                       \
    (CUdeviceptr *ptr, size_t bytes, CUmemoryPool pool, CUstream stream))                        \
  X(cuMemFreeAsync, "cuMemFreeAsync", 0, (CUdeviceptr ptr, CUstream stream))                     \
  X(cuStreamIsCapturing, "cuStreamIsCapturing", 0, (CUstream stream, int *status))               \
  X(cuStreamCreate, "cuStreamCreate", 1, (CUstream *stream, unsigned int flags))                \
  X(cuStreamDestroy, "cuStreamDestroy_v2", 1, (CUstream stream))                                 \
  X(cuStreamSynchronize, "cuStreamSynchronize", 1, (CUstream stream))                            \
  X(cuEventCreate, "cuEventCreate", 1, (CUevent *event, unsigned int flags))                    \
  X(cuEventRecord, "cuEventRecord", 1, (CUevent event, CUstream stream))                         \
  X(cuEventSynchronize, "cuEventSynchronize", 1, (CUevent event))                                \
  X(cuEventElapsedTime, "cuEventElapsedTime", 1, (float *ms, CUevent start, CUevent end))        \
  X(cuEventDestroy, "cuEventDestroy_v2", 1, (CUevent event))                                     \
  X(cuPointerGetAttribute, "cuPointerGetAttribute", 1,                                           \
    (void *data, CUpointer_attribute attrib, CUdeviceptr ptr))                                   \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",  \
    1, (int *blocks, CUfunction func, int block_threads, size_t dynamic_smem_bytes))             \
  X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", 0,                                         \
    (CUtensorMap *map, int data_type, uint32_t rank, void *global_address,                      \
     const uint64_t *global_dim, const uint64_t *global_strides, const uint32_t *box_dim,        \
     const uint32_t *element_strides, int interleave, int swizzle, int l2_promotion,             \
     int oob_fill))                                                                              \
  X(cuLinkCreate, "cuLinkCreate_v2", 0,                                                          \
    (unsigned int num_options, CUjit_option *options, void **option_values,                     \
     CUlinkState *state))                                                                        \
  X(cuLinkAddData, "cuLinkAddData_v2", 0,                                                        \
    (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,          \
     unsigned int num_options, CUjit_option *options, void **option_values))                     \
  X(cuLinkComplete, "cuLinkComplete", 0, (CUlinkState state, void **cubin, size_t *size))       \
  X(cuLinkDestroy, "cuLinkDestroy", 0, (CUlinkState state))

/* The signature of cuGetProcAddress_v2 (cudaTypedefs.h PFN_cuGetProcAddress_v12000). */
typedef CUresult (*rt_cuda_getproc_fn)(const char *symbol, void **fn, int cuda_version,
                                       uint64_t flags, CUdriverProcAddressQueryResult *status);

/* A loaded driver. Fill it with rt_cuda_load; it is read-only afterwards, so several threads
 * may share it. The fields named after driver functions may be called directly by code that
 * needs something the helpers below do not offer; optional ones (cuTensorMapEncodeTiled) are
 * NULL when the driver lacks them. */
struct rt_cuda {
  void *lib;                     /* dlopen handle; NULL when not loaded */
  char lib_path[256];            /* the name given to dlopen, for messages */
  int driver_version;            /* cuDriverGetVersion: 1000 * major + 10 * minor */
  int via_getproc;               /* 1 when entry points came from cuGetProcAddress_v2 */
  rt_cuda_getproc_fn cuGetProcAddress; /* the _v2 entry point; NULL on drivers < 12.0 */
#define RT_CUDA_FIELD(name, fallback, required, params) CUresult (*name) params;
  RT_CUDA_ENTRY_POINTS(RT_CUDA_FIELD)
#undef RT_CUDA_FIELD
};

/* ---- Loading and errors ------------------------------------------------------------------ */

/* Opens the driver library (the environment variable TILE_LIBCUDA if set and non-empty, else
 * "libcuda.so.1"), resolves every entry point and calls cuInit(0). On failure *cu is left
 * zeroed (nothing to unload) and err says why; RT_CUDA_NO_DRIVER means the library could not
 * be opened at all, CUDA_ERROR_NO_DEVICE that the driver is there but sees no GPU. */
int rt_cuda_load(struct rt_cuda *cu, char *err, size_t errlen);

/* Closes the library and zeroes *cu. A NULL or never-loaded cu is a no-op. Modules, memory and
 * contexts must have been released before. */
void rt_cuda_unload(struct rt_cuda *cu);

/* Translates a CUresult: returns 0 when r is CUDA_SUCCESS, otherwise writes
 * "<what>: CUDA_ERROR_NAME (description)" into err and returns r. what may be NULL. */
int rt_cuda_check(const struct rt_cuda *cu, CUresult r, const char *what, char *err,
                  size_t errlen);

/* ---- Devices and the primary context ----------------------------------------------------- */

/* Facts about one device, filled by rt_cuda_device_open. Sizes are in bytes, clocks in kHz
 * (0 when the driver no longer reports them). */
struct rt_cuda_device {
  int ordinal;
  CUdevice dev;
  CUcontext ctx;                 /* the retained primary context */
  CUcontext prev_ctx;            /* the context current before open; close restores it */
  char name[256];
  int driver_version;            /* 1000 * major + 10 * minor */
  int cc_major, cc_minor;        /* compute capability, e.g. 9.0 for H100/H200 */
  int sm_count;
  int max_threads_per_block;
  int smem_per_block_optin;      /* the most dynamic + static smem a block may opt in to */
  int smem_per_sm;
  int regs_per_sm;               /* 32-bit registers */
  int l2_bytes;
  int clock_khz;                 /* SM clock */
  int mem_clock_khz;             /* peak memory clock */
  int bus_width_bits;            /* global memory bus width */
};

/* Stores the number of CUDA devices in *count. */
int rt_cuda_device_count(const struct rt_cuda *cu, int *count, char *err, size_t errlen);

/* Gets device `ordinal`, retains its primary context (the one the CUDA runtime and PyTorch
 * use; never a private cuCtxCreate context), makes it current on the calling thread and
 * fills *out. Every successful open needs one rt_cuda_device_close. */
int rt_cuda_device_open(const struct rt_cuda *cu, int ordinal, struct rt_cuda_device *out,
                        char *err, size_t errlen);

/* Releases the primary context retained by open. If that context is still current on this
 * thread, the context that was current before open is made current again (which is the same
 * context when a host framework had already set it). */
int rt_cuda_device_close(const struct rt_cuda *cu, struct rt_cuda_device *dev, char *err,
                         size_t errlen);

/* Waits for all work in the current context (cuCtxSynchronize). */
int rt_cuda_ctx_sync(const struct rt_cuda *cu, char *err, size_t errlen);

/* ---- Modules and functions ------------------------------------------------------------------ */

/* Loads a module from memory: image is NUL-terminated PTX text or a cubin/fatbin image.
 * The PTX is JIT-compiled with optimisation level 4 and a verbose log. info_log (may be NULL)
 * receives the JIT info log, e.g. ptxas register and spill counts per entry; jit_ms (may be
 * NULL) receives the JIT wall time. On failure err holds the CUresult and the JIT error log
 * on the same line (its line breaks replaced by " | "). The driver caches JIT results: on a
 * cache hit the info log is empty and the time is 0; set CUDA_CACHE_DISABLE=1 to see them. */
int rt_cuda_module_load(const struct rt_cuda *cu, const void *image, CUmodule *mod,
                        char *info_log, size_t info_len, char *err, size_t errlen,
                        float *jit_ms);

/* Compiles PTX text (ptx_len bytes, without the terminating NUL) to a cubin for the current
 * context's device with the driver's linker (cuLinkCreate / cuLinkAddData / cuLinkComplete),
 * with the JIT options rt_cuda_module_load uses, and CU_JIT_TARGET = jit_target when it is not
 * 0 (0: the target of the current context). On success *cubin is a copy of the image that
 * rt_cuda_module_load loads without running the JIT again, allocated by alloc(alloc_ud,
 * bytes) (NULL alloc: malloc); the caller frees it. RT_CUDA_NOMEM when alloc fails.
 * info_log (may be NULL) gets the JIT info log. Returns RT_CUDA_FAILED with a message when
 * the driver lacks the cuLink entry points (they are optional). Several threads may link at
 * once, each with the context current. */
int rt_cuda_link_ptx(const struct rt_cuda *cu, const char *ptx, size_t ptx_len, int jit_target,
                     void *(*alloc)(void *ud, size_t bytes), void *alloc_ud, void **cubin, size_t *cubin_len,
                     char *info_log, size_t info_len, char *err, size_t errlen);

/* Unloads a module; a NULL module is a no-op. */
int rt_cuda_module_unload(const struct rt_cuda *cu, CUmodule mod, char *err, size_t errlen);

/* Looks up the kernel (.entry) called name in mod. */
int rt_cuda_function(const struct rt_cuda *cu, CUmodule mod, const char *name, CUfunction *f,
                     char *err, size_t errlen);

/* Looks up the module-scope variable (.global / .const) called name; bytes may be NULL. */
int rt_cuda_module_global(const struct rt_cuda *cu, CUmodule mod, const char *name,
                          CUdeviceptr *ptr, size_t *bytes, char *err, size_t errlen);

/* What the driver reports about a compiled kernel. */
struct rt_cuda_func_attrs {
  int num_regs;                  /* registers per thread */
  int local_bytes;               /* local memory per thread; > 0 means spills or stack arrays */
  int max_threads;               /* the most threads per block it can launch with (.maxntid) */
  int static_smem;               /* statically declared shared memory */
  int max_dynamic_smem;          /* the current dynamic shared memory limit */
};

/* Fills *out with the attributes of f. */
int rt_cuda_func_attrs(const struct rt_cuda *cu, CUfunction f, struct rt_cuda_func_attrs *out,
                       char *err, size_t errlen);

/* Allows f to be launched with up to `bytes` of dynamic shared memory (needed above 48 KiB;
 * the limit is the device's smem_per_block_optin minus f's static shared memory). */
int rt_cuda_set_dynamic_smem(const struct rt_cuda *cu, CUfunction f, int bytes, char *err,
                             size_t errlen);

/* Stores in *blocks how many blocks of f fit on one SM with the given block size and dynamic
 * shared memory. */
int rt_cuda_occupancy(const struct rt_cuda *cu, CUfunction f, int block_threads,
                      size_t dynamic_smem, int *blocks, char *err, size_t errlen);

/* Launches f on stream (NULL: the legacy default stream). args[i] points at the value of the
 * i-th kernel parameter (for a CUtensorMap parameter, at the 128-byte struct). grid_dep:
 * with programmatic stream serialization (cuLaunchKernelEx; f's programs must wait with
 * griddepcontrol.wait before touching memory), when the driver has cuLaunchKernelEx; a
 * launch it refuses is made again without. Launch configuration errors are reported here
 * and do not poison the context; faults inside the kernel show up at the next
 * synchronising call. */
int rt_cuda_launch(const struct rt_cuda *cu, CUfunction f, const unsigned grid[3],
                   const unsigned block[3], unsigned smem_bytes, CUstream stream, void **args,
                   bool grid_dep, char *err, size_t errlen);

/* ---- Memory ----------------------------------------------------------------------------- */

/* Allocates bytes (> 0) of device memory in the current context. */
int rt_cuda_alloc(const struct rt_cuda *cu, size_t bytes, CUdeviceptr *ptr, char *err,
                  size_t errlen);

/* Frees device memory; 0 is a no-op. */
int rt_cuda_free(const struct rt_cuda *cu, CUdeviceptr ptr, char *err, size_t errlen);

/* Synchronous copies host -> device, device -> host and device -> device. */
int rt_cuda_h2d(const struct rt_cuda *cu, CUdeviceptr dst, const void *src, size_t bytes,
                char *err, size_t errlen);
int rt_cuda_d2h(const struct rt_cuda *cu, void *dst, CUdeviceptr src, size_t bytes, char *err,
                size_t errlen);
int rt_cuda_d2d(const struct rt_cuda *cu, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                char *err, size_t errlen);

/* Sets bytes bytes at dst to value. */
int rt_cuda_memset8(const struct rt_cuda *cu, CUdeviceptr dst, unsigned char value,
                    size_t bytes, char *err, size_t errlen);

/* Asynchronous copies and a 32-bit fill of count words, ordered on stream. The host buffer
 * must stay valid until the stream is synchronised (with pageable host memory the driver may
 * also block or stage the copy). */
int rt_cuda_h2d_async(const struct rt_cuda *cu, CUdeviceptr dst, const void *src, size_t bytes,
                      CUstream stream, char *err, size_t errlen);
int rt_cuda_d2h_async(const struct rt_cuda *cu, void *dst, CUdeviceptr src, size_t bytes,
                      CUstream stream, char *err, size_t errlen);
int rt_cuda_memset32_async(const struct rt_cuda *cu, CUdeviceptr dst, uint32_t value,
                           size_t count, CUstream stream, char *err, size_t errlen);

/* Tells whether p is memory a kernel can dereference: *is_device is 1 for device (and
 * managed) allocations, 0 for host memory, including host pointers the driver has never seen
 * (that is not a failure). *ordinal (may be NULL) gets the owning device, or -1. Needs a
 * current context. Used to check pointer arguments before a launch. */
int rt_cuda_pointer_info(const struct rt_cuda *cu, CUdeviceptr p, int *is_device, int *ordinal,
                         char *err, size_t errlen);

/* ---- Streams and events ------------------------------------------------------------------- */

/* Creates a stream; flags is CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING. */
int rt_cuda_stream_create(const struct rt_cuda *cu, unsigned flags, CUstream *stream,
                          char *err, size_t errlen);

/* Destroys a stream; NULL is a no-op. Work already queued still completes. */
int rt_cuda_stream_destroy(const struct rt_cuda *cu, CUstream stream, char *err, size_t errlen);

/* Waits until all work queued on stream has finished. */
int rt_cuda_stream_sync(const struct rt_cuda *cu, CUstream stream, char *err, size_t errlen);

/* Creates an event; flags combine CU_EVENT_* (CU_EVENT_DEFAULT for timing). */
int rt_cuda_event_create(const struct rt_cuda *cu, unsigned flags, CUevent *event, char *err,
                         size_t errlen);

/* Records event on stream. */
int rt_cuda_event_record(const struct rt_cuda *cu, CUevent event, CUstream stream, char *err,
                         size_t errlen);

/* Waits for end to complete, then stores the milliseconds between start and end in *ms
 * (resolution about 0.5 microseconds). */
int rt_cuda_event_elapsed(const struct rt_cuda *cu, CUevent start, CUevent end, float *ms,
                          char *err, size_t errlen);

/* Destroys an event; NULL is a no-op. */
int rt_cuda_event_destroy(const struct rt_cuda *cu, CUevent event, char *err, size_t errlen);

/* ---- Stream-ordered memory (a pool of the device's memory) --------------------------------- */

/* Creates a pool on device `ordinal` that keeps up to keep_bytes of freed memory for reuse
 * (instead of returning it to the system at each synchronization). Needs a driver >= 11.2. */
int rt_cuda_pool_create(const struct rt_cuda *cu, int ordinal, uint64_t keep_bytes,
                        CUmemoryPool *pool, char *err, size_t errlen);
/* Destroys a pool; its memory goes back once outstanding allocations are freed. NULL: no-op. */
int rt_cuda_pool_destroy(const struct rt_cuda *cu, CUmemoryPool pool, char *err, size_t errlen);
/* Allocates from pool in stream order (usable by work queued on stream after this call). */
int rt_cuda_pool_alloc(const struct rt_cuda *cu, CUmemoryPool pool, size_t bytes, CUstream stream,
                       CUdeviceptr *ptr, char *err, size_t errlen);
/* Frees in stream order: the memory is reused only after the work queued before it. */
int rt_cuda_free_async(const struct rt_cuda *cu, CUdeviceptr ptr, CUstream stream, char *err,
                       size_t errlen);
/* *capturing = whether stream is being captured into a CUDA graph. */
int rt_cuda_stream_capturing(const struct rt_cuda *cu, CUstream stream, int *capturing, char *err,
                             size_t errlen);

#endif /* RT_CUDRV_H */
