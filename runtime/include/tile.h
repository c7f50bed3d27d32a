/* tile.h - the public C API of the tile compiler (libtile.so).
 *
 * Compile .tile kernels (from a file or a string, with compile-time parameter overrides and
 * a target), inspect their parameters, and launch them on the CPU interpreter or a CUDA GPU
 * on the caller's stream. Everything the library does is reported through return codes and
 * messages: it never prints, never exits, and never aborts on bad input.
 *
 * Conventions (after SQLite and libuv):
 *  - Opaque handles with create/destroy; destroying NULL is a no-op.
 *  - Every fallible call returns a tile_status; TILE_OK is 0. The detailed message of the
 *    last failure on a context is tile_errmsg(ctx); tile_strerror(code) names the code.
 *  - A context is used by one thread at a time. Separate contexts are independent and may
 *    be used concurrently; kernels compiled in one context belong to it.
 *  - Source diagnostics are available structured (tile_diag_*) and rendered in the message.
 *
 * Quick use:
 *     tile_context *ctx; tile_kernel *k;
 *     tile_context_create(NULL, &ctx);
 *     tile_compile_options co = {.device = TILE_DEVICE_CUDA};
 *     tile_define d[] = {{"ACT", "gelu"}, {"HAS_BIAS", "true"}};
 *     co.defines = d; co.ndefines = 2;
 *     if (tile_compile_file(ctx, "lib/gemm.tile", &co, &k)) fprintf(stderr, "%s", tile_errmsg(ctx));
 *     tile_arg args[] = {tile_arg_tensor(a_ptr, TILE_F16, 2, (int64_t[]){M, K}, NULL), ...};
 *     tile_launch(ctx, k, args, n, &(tile_launch_options){.stream = my_stream});
 *     tile_kernel_release(k); tile_context_destroy(ctx);                                  */
#ifndef TILE_H
#define TILE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TILE_API __attribute__((visibility("default")))
#else
#define TILE_API
#endif

#define TILE_MAX_RANK 4
/* The largest source (a .tile file or Tile IR text) the compiler reads: a bigger file, a
 * directory or a device that never ends is refused with TILE_IO. */
#define TILE_MAX_SOURCE_BYTES (64u << 20)

/* ---- status codes ------------------------------------------------------------------------ */

#define TILE_STATUS_MAP(X)                                                       \
  X(OK, "success")                                                               \
  X(INVALID_ARGUMENT, "invalid argument")                                        \
  X(NOMEM, "out of memory")                                                      \
  X(IO, "a file could not be read or written")                                   \
  X(COMPILE, "the kernel source has errors")                                     \
  X(NOT_FOUND, "no such kernel or parameter")                                    \
  X(BAD_LAUNCH, "launch arguments rejected; nothing was launched")               \
  X(NO_DRIVER, "the CUDA driver is not available")                               \
  X(CUDA, "the CUDA driver reported an error")                                   \
  X(UNSUPPORTED, "not supported for this kernel, device or target")             \
  X(CACHE, "the on-disk cache could not be used")                                \
  X(INTERNAL, "internal compiler error")

typedef enum tile_status {
#define TILE_X(name, msg) TILE_##name,
  TILE_STATUS_MAP(TILE_X)
#undef TILE_X
  TILE_STATUS__COUNT
} tile_status;

/* A short description of a status code ("invalid argument"); never NULL. */
TILE_API const char *tile_strerror(tile_status s);
/* The name of a status code ("TILE_BAD_LAUNCH"); never NULL. */
TILE_API const char *tile_status_name(tile_status s);

/* ---- element types (the order mirrors the compiler's dtype table) ------------------------ */

typedef enum tile_dtype {
  TILE_DTYPE_NONE = 0,
  TILE_BOOL,
  TILE_I8,
  TILE_I16,
  TILE_I32,
  TILE_I64,
  TILE_F16,
  TILE_BF16,
  TILE_F32,
  TILE_F64,
  TILE_F8E4M3,
  TILE_F8E5M2,
  TILE_U32, /* added after the others: their values did not change */
  TILE_DTYPE__COUNT
} tile_dtype;

/* "f16", "bf16", ...; "?" for an invalid value. */
TILE_API const char *tile_dtype_name(tile_dtype t);
/* Size of one element in bytes (bool: 1). 0 for an invalid value. */
TILE_API size_t tile_dtype_size(tile_dtype t);

typedef enum tile_device {
  TILE_DEVICE_CPU = 0, /* the interpreter: the reference semantics, host pointers */
  TILE_DEVICE_CUDA = 1 /* an NVIDIA GPU through the Driver API, device pointers */
} tile_device;

/* ---- contexts ---------------------------------------------------------------------------- */

typedef struct tile_context tile_context;
typedef struct tile_kernel tile_kernel;

/* The allocation hook (after Lua's lua_Alloc): one function for every host allocation the
 * library makes for a context.
 *   ptr == NULL:        allocate new_size bytes (old_size is 0);
 *   new_size == 0:      free ptr, a block of old_size bytes, and return NULL;
 *   otherwise:          resize ptr from old_size to new_size bytes (as realloc).
 * It returns NULL when it cannot allocate (then ptr is left as it was); the call that needed
 * the memory fails with TILE_NOMEM, frees what it had allocated and leaves the context
 * usable. Blocks must be aligned as malloc's (16 bytes). old_size is always the size the
 * block was allocated with. It is called from several threads at once (the interpreter's,
 * with cpu_threads != 1, and the tuner's compile threads), so it must be thread-safe.
 *
 * Everything goes through it: the context and kernel handles, the compiler's arenas (AST,
 * IR, passes), string buffers, source files read by tile_compile_file, the on-disk cache's
 * buffers, generated code, the interpreter's buffers, the tuner's tables and copies, the
 * memory of tile_mem_alloc(TILE_DEVICE_CPU), and what is handed to the caller (tile_emit's
 * text, tile_tune_result's contents, released by tile_free and tile_tune_result_free
 * through the hook they came from, which must therefore outlive them). Not hooked: LLVM's
 * own C++ allocations during code generation (LLVM offers no hook), the CUDA driver's, and
 * the C library's internal ones (thread creation, dlopen, opendir, qsort's scratch). */
typedef void *(*tile_alloc_fn)(void *ud, void *ptr, size_t old_size, size_t new_size);

typedef struct tile_context_options {
  int cuda_device;     /* CUDA device ordinal (default 0) */
  int cpu_threads;     /* interpreter threads; 0 = one per available core */
  const char *cache_dir; /* on-disk cache directory; NULL = $TILE_CACHE_DIR if set, else
                            $XDG_CACHE_HOME/tile, else ~/.cache/tile; "" = off (see below).
                            It must belong to this user (geteuid) and be writable by nobody
                            else (no mode bit of 022; a symbolic link to it must be this
                            user's too); a missing one is created, with its missing parents,
                            with mode 0700. Otherwise the context works without the on-disk
                            cache (as with "") and tile_cache_status says why. */
  tile_alloc_fn alloc;   /* host memory (see tile_alloc_fn); NULL = malloc, realloc, free */
  void *alloc_ud;        /* passed to alloc */
  const char *trace_path; /* a Chrome/Perfetto trace file (JSON) of this context's compiles
                            (front end, each pass, code generation, the driver's JIT), cache
                            lookups, tuning trials and launches, each named by kernel and
                            configuration; NULL = $TILE_TRACE if set, else none. A file that
                            cannot be created fails tile_context_create with TILE_IO. The
                            same events are NVTX ranges (domain "tile") when a profiler
                            (Nsight Systems, Nsight Compute) is attached at creation. */
} tile_context_options;

/* Creates a context. opts may be NULL for defaults. The CUDA driver is loaded lazily, on
 * the first CUDA compile or memory call, so a context works where no driver exists.
 *
 * The environment is read here, once (TILE_LIBCUDA: when the driver is first loaded):
 *   TILE_CACHE_DIR, XDG_CACHE_HOME, HOME   the cache directory (cache_dir NULL)
 *   TILE_REPACK=0|1|auto                   repacking of unaligned operands (tile_launch;
 *                                          also off|on, false|true; other values: auto)
 *   TILE_AUTOTUNE_BUDGET_MS=ms             the time budget of TILE_AUTOTUNE's tuning
 *   TILE_VERIFY_EACH (any value)           as the TILE_VERIFY_EACH flag on every compile
 *   TILE_LIBCUDA=path                      the driver library to load (else libcuda.so.1)
 *   TILE_TRACE=file.json                   the trace file (trace_path NULL)
 *   NVTX_INJECTION64_PATH                  set by profilers: NVTX ranges are emitted
 * No environment variable changes the generated code: that is what the compile options
 * (arch, schedule, flags) are for. */
TILE_API tile_status tile_context_create(const tile_context_options *opts, tile_context **out);
/* Destroys a context. Kernels the caller still holds stay valid for tile_kernel_release
 * and the introspection calls (tile_kernel_name, tile_kernel_param, ...); the context's
 * memory and its CUDA context are freed when the last of them is released. Nothing else
 * may be called with the context, or launch its kernels, after this. */
TILE_API void tile_context_destroy(tile_context *ctx);

/* The message of the last failed call on ctx ("" when none). Valid until the next call. */
TILE_API const char *tile_errmsg(const tile_context *ctx);
/* A stable code for the kind of the last failure, for programs that react to it ("" when
 * there is none to give): for a compile error, the code of its first error diagnostic
 * ("CONSTRAINT": the options violate a `where` clause); "REGISTER_LIMIT": a tile needs more
 * registers per thread than a kernel may use; "SMEM_LIMIT": more shared memory than the
 * device allows; "UNSUPPORTED_DTYPE": a dtype the target's code generator cannot handle
 * yet (fp8 on CUDA); "IR_INVALID": textual IR that does not parse or verify; "INTERNAL": a
 * bug in the compiler. Valid until the next call. */
TILE_API const char *tile_errcode(const tile_context *ctx);

/* Library and LLVM versions, e.g. "tile 0.1.0 (LLVM 22.1.8)". */
TILE_API const char *tile_version(void);

/* ---- diagnostics of the last compile ----------------------------------------------------- */

typedef enum tile_severity { TILE_SEV_ERROR, TILE_SEV_WARNING, TILE_SEV_NOTE } tile_severity;

typedef struct tile_diagnostic {
  tile_severity severity;
  const char *file;
  unsigned line, col, len; /* 1-based; len = columns underlined */
  const char *message;
  const char *code; /* what kind of error, stable across versions: the name of the check
                       that failed ("CONSTRAINT" for a `where` clause, "UNDECLARED", ...;
                       lang/diag.def lists them); test this, not the message text */
} tile_diagnostic;

TILE_API unsigned tile_diag_count(const tile_context *ctx);
TILE_API tile_status tile_diag_get(const tile_context *ctx, unsigned i, tile_diagnostic *out);

/* ---- compiling --------------------------------------------------------------------------- */

typedef struct tile_define {
  const char *name;  /* a compile-time parameter, e.g. "BM" */
  const char *value; /* its value as text: "128", "true", "bf16", "gelu" */
} tile_define;

enum tile_compile_flags {
  TILE_VERIFY_EACH = 1u << 0, /* run the IR verifier after every pass */
  TILE_NO_CACHE = 1u << 1,    /* bypass the in-memory and on-disk caches */
  TILE_SOURCE_IR = 1u << 2,   /* the source is Tile IR text (tilec --emit=ir output) */
  TILE_AUTOTUNE = 1u << 3,    /* CUDA: the first launch for a new tuning key (see tile_tune)
                                 tunes the compile-time parameters the caller did not pin,
                                 with default tile_tune_options, and every launch runs the
                                 best configuration. The tuned choice is kept in memory and on
                                 disk, so later launches and processes do not time anything.
                                 The launch's output tensors are saved before tuning and
                                 restored before the real launch. CPU: no effect. */
  TILE_AUTOCONFIG = 1u << 5,  /* CUDA, the default (unless TILE_FIXED_CONFIG, TILE_AUTOTUNE
                                 or TILE_SOURCE_IR is given): each launch runs a configuration
                                 chosen for its shape bucket without timing anything. The
                                 parameters the caller did not pin start at their defaults;
                                 tile sizes shrink where a tile overhangs the problem (16 rows
                                 in a 128-row tile) and while the grid has fewer programs than
                                 the device has multiprocessors (a 16x8192 product in 128x256
                                 tiles: 32 programs), the warp count shrinking with them; a
                                 grid of at most one program per multiprocessor then deepens
                                 its pipeline (longer K steps, more stages) into the shared
                                 memory; a row read once where a width holds it, and long
                                 rows walked in chunks get wider chunks on more warps. The
                                 default configuration runs where its grid fills half the
                                 device or more. CPU: no effect. */
  TILE_FIXED_CONFIG = 1u << 6, /* CUDA: every launch runs the configuration the kernel was
                                 compiled with (no TILE_AUTOCONFIG choice). */
  TILE_NO_REPACK = 1u << 4,   /* CUDA: never copy unaligned dot operands to aligned scratch
                                 before a launch (see tile_launch) */
};

typedef struct tile_compile_options {
  const char *kernel;         /* which kernel of the file; NULL = the only one */
  const tile_define *defines; /* compile-time parameter overrides */
  unsigned ndefines;
  tile_device device;
  const char *arch; /* CUDA target: "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a";
                       NULL = the current GPU's (sm_90a on Hopper) */
  unsigned flags;   /* tile_compile_flags */
  /* CUDA: options of the Hopper schedule, "key=value,..." (NULL or "" = the compiler's
   * choice, the fast one). Each names a part of the sm_90a schedule that can be switched
   * off to measure what it buys, or a budget:
   *   wgmma=0        no warpgroup MMA (mma.sync instead)
   *   tma=0          pipelined loops copy with cp.async instead of TMA + mbarrier rings
   *   ws=0           no warp specialization (no producer warpgroup)
   *   persistent=0   one program per tile instead of one per multiprocessor
   *   wait=0         wgmma waits for its own group (no overlap with the next stage's)
   *   gather=0       (every target) gathered Tensor Core operands loaded into registers and
   *                  stored to shared memory, instead of cp.async copies that loops pipeline
   *   prefetch=1     (every target) loops without copies or products load the next
   *                  iteration's tiles one iteration ahead into registers, and pipelined
   *                  loops load their copies' addresses (a block table) one iteration
   *                  before the copies (off by default)
   *   overlap=1      chains of two products (attention): the second product of one
   *                  iteration runs during the next one's elementwise work (off by default)
   *   pingpong=0     consumer warpgroups do not take turns issuing the products of such
   *                  chains (the turns are on by default with two or more warpgroups)
   *   handoff=0      a warpgroup hands its turn on once its products have completed
   *                  (by default: once the last one is issued)
   *   once=0         tiles stored once into a Tensor Core operand buffer (attention's Q)
   *                  are loaded by the consumers, not copied by the producer's TMA
   *   regs=P/C       setmaxnreg budgets of the producer and consumer warpgroups
   * An unknown key or value is a TILE_INVALID_ARGUMENT error. Part of every cache key. */
  const char *schedule;
} tile_compile_options;

/* Compiles a kernel from a .tile file (opts may be NULL: the only kernel, on the CPU).
 * The front end and the generic passes run here; for CUDA, target code is generated per
 * argument specialization (alignment, contiguity, divisibility) on first launch or by
 * tile_kernel_prepare, and cached. Kernels are reference-counted: release each once. */
TILE_API tile_status tile_compile_file(tile_context *ctx, const char *path,
                                       const tile_compile_options *opts, tile_kernel **out);
/* The same from source text; `name` is the file name used in diagnostics. */
TILE_API tile_status tile_compile_string(tile_context *ctx, const char *name, const char *src,
                                         size_t len, const tile_compile_options *opts,
                                         tile_kernel **out);
TILE_API void tile_kernel_release(tile_kernel *k);

/* ---- kernel introspection ---------------------------------------------------------------- */

typedef struct tile_param_info {
  const char *name;
  int is_tensor;
  int is_output;  /* tensors the kernel writes */
  int is_used;    /* 0: unused after specialization; a NULL data pointer is accepted */
  int is_read;    /* the kernel loads from this tensor (inputs; outputs it also reads), or
                     writes it only in part (masked stores, scatters, atomics) */
  tile_dtype dtype;
  unsigned rank;
  const char *dim_symbol[TILE_MAX_RANK]; /* shape name ("M"), or NULL for a fixed size */
  int64_t dim_size[TILE_MAX_RANK];       /* fixed size, or -1 for a symbol */
} tile_param_info;

TILE_API const char *tile_kernel_name(const tile_kernel *k);
TILE_API unsigned tile_kernel_param_count(const tile_kernel *k);
TILE_API tile_status tile_kernel_param(const tile_kernel *k, unsigned i, tile_param_info *out);
/* Index of the parameter called `name`, or -1. */
TILE_API int tile_kernel_param_index(const tile_kernel *k, const char *name);
/* The compile-time parameters after specialization, as "BM=128,BN=128,...". */
TILE_API const char *tile_kernel_config(const tile_kernel *k);
/* The configuration the last launch, prepare or bench actually ran: for a kernel compiled
 * with TILE_AUTOTUNE, the tuned one (until then NULL); with TILE_AUTOCONFIG (the CUDA
 * default), the one chosen for the last launch's shape; otherwise (and before a launch)
 * tile_kernel_config(k). */
TILE_API const char *tile_kernel_tuned_config(const tile_kernel *k);

/* ---- arguments and launching ------------------------------------------------------------- */

typedef struct tile_tensor {
  void *data;       /* host pointer (CPU) or device pointer (CUDA) */
  tile_dtype dtype;
  unsigned rank;
  int64_t shape[TILE_MAX_RANK];
  int64_t strides[TILE_MAX_RANK]; /* in elements; all zero = contiguous row-major */
} tile_tensor;

typedef enum tile_arg_kind { TILE_ARG_TENSOR = 1, TILE_ARG_INT, TILE_ARG_FLOAT } tile_arg_kind;

typedef struct tile_arg {
  tile_arg_kind kind;
  union {
    tile_tensor tensor;
    int64_t i; /* for i32/i64/bool scalar parameters */
    double f;  /* for float scalar parameters */
  } u;
} tile_arg;

/* Argument constructors. `strides` may be NULL for contiguous row-major. */
static inline tile_arg tile_arg_tensor(void *data, tile_dtype dtype, unsigned rank,
                                       const int64_t *shape, const int64_t *strides) {
  tile_arg a;
  unsigned i;
  a.kind = TILE_ARG_TENSOR;
  a.u.tensor.data = data;
  a.u.tensor.dtype = dtype;
  a.u.tensor.rank = rank;
  for (i = 0; i < TILE_MAX_RANK; i++) {
    a.u.tensor.shape[i] = (i < rank && shape) ? shape[i] : 0;
    a.u.tensor.strides[i] = (i < rank && strides) ? strides[i] : 0;
  }
  return a;
}
static inline tile_arg tile_arg_int(int64_t v) {
  tile_arg a;
  a.kind = TILE_ARG_INT;
  a.u.i = v;
  return a;
}
static inline tile_arg tile_arg_float(double v) {
  tile_arg a;
  a.kind = TILE_ARG_FLOAT;
  a.u.f = v;
  return a;
}

typedef struct tile_launch_options {
  void *stream; /* CUstream of the caller (NULL = the legacy default stream); CPU: ignored */
} tile_launch_options;

/* Checks the arguments against the kernel's parameters (count, kinds, dtypes, ranks, shape
 * relations, fixed sizes, NULL or misaligned pointers, pointers of another device) and, if
 * they pass, launches the kernel (CPU: runs it to completion). On TILE_BAD_LAUNCH the
 * message names the offending argument and nothing was launched. opts may be NULL.
 *
 * CUDA, repacking: a read-only matrix (rank 2 or 3, contiguous rows) of 256 KiB or more
 * that the kernel loads inside a loop into a dot operand, and whose base or row stride is
 * not a multiple of 16 bytes (a 4095-wide f16 matrix), is first copied on the same stream
 * into scratch with 16-byte-aligned rows, and the kernel runs on the copy with 16-byte
 * vector accesses (twice as fast for a 4095^3 GEMM on an H200, copies included). The
 * scratch comes from a stream-ordered memory pool of the context, which keeps up to 1 GiB
 * of it for later launches until tile_context_destroy. Not done while the stream is
 * being captured into a CUDA graph. TILE_NO_REPACK (compile flag) turns it off for a
 * kernel; the environment variable TILE_REPACK=0 / 1 turns it off / on for every
 * candidate whatever its size. */
TILE_API tile_status tile_launch(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                 unsigned nargs, const tile_launch_options *opts);

/* Generates and loads target code for the specialization these arguments select, without
 * launching (CUDA; a no-op on the CPU). Timing this measures a cold compile. */
TILE_API tile_status tile_kernel_prepare(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                         unsigned nargs);

/* Launch geometry and resources of the specialization last prepared or launched. */
typedef struct tile_kernel_stats {
  unsigned grid[3];
  unsigned threads;
  unsigned shared_bytes;
  int registers;      /* -1 when unknown (CPU) */
  int local_bytes;    /* spills and stack; -1 when unknown */
  double compile_ms;  /* front end + passes + codegen + driver load of that specialization */
  int cache_hit;      /* where the specialization came from: 0 = compiled now, 1 = this
                         kernel's in-memory cache, 2 = the on-disk cache (loaded now) */
  unsigned repacked;  /* bit i: parameter i was copied to aligned scratch first (see
                         tile_launch; parameters 0-31) */
  int blocks_per_sm;  /* programs of this specialization that fit on one multiprocessor at
                         once (registers, shared memory, threads); -1 when unknown (CPU) */
  int multiprocessors; /* the device's multiprocessors; -1 on the CPU. Their product is how
                          many programs run at once: size split-K or split-KV grids by it */
} tile_kernel_stats;
TILE_API tile_status tile_kernel_get_stats(const tile_kernel *k, tile_kernel_stats *out);

/* ---- ahead-of-time output (tilec) ------------------------------------------------------- */

typedef enum tile_emit_kind {
  TILE_EMIT_AST,  /* the parsed program */
  TILE_EMIT_IR,   /* Tile IR after the generic pipeline */
  TILE_EMIT_LLVM, /* LLVM IR for the target, after optimization */
  TILE_EMIT_PTX   /* PTX for the target */
} tile_emit_kind;

typedef void (*tile_text_fn)(void *ud, const char *title, const char *text);

typedef struct tile_emit_options {
  tile_emit_kind what;
  int input_is_ir;         /* the source is Tile IR text, not .tile source */
  const char *passes;      /* IR input: comma-separated passes to run instead of the pipeline */
  const char *dump_after;  /* a pass name or "all": IR after it goes to `report` */
  int time_passes;         /* a timing table goes to `report` */
  tile_text_fn report;     /* receives dumps and tables; NULL = discard */
  void *report_ud;
  /* Tensor facts for the specialization (CUDA): bases 16-byte aligned and the last
   * dimension contiguous always; strides divisible by 16 bytes and sizes by 16 unless
   * assume_unaligned (the specialization of a 4095-wide matrix). */
  int assume_unaligned;
} tile_emit_options;

/* Compiles to text. *out is allocated by the library through the context's hook: free it
 * with tile_free (never free()), also after the context is destroyed. */
TILE_API tile_status tile_emit(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *co, const tile_emit_options *eo,
                               char **out, size_t *out_len);
/* Frees what tile_emit returned; NULL is a no-op. */
TILE_API void tile_free(void *p);

/* ---- ahead-of-time C launchers (tilec aot) ----------------------------------------------
 * tile_emit_aot compiles kernels for one or more targets and writes a C header and a C
 * source that embed the PTX (and, through `assemble`, cubins) and define one typed launcher
 * per kernel. The generated files need only a C compiler and the CUDA driver (-lcuda); no
 * LLVM and no libtile at run time. The header documents the launcher; in short:
 *   int SYMBOL_KERNEL(void *stream, const tile_aot_tensor *A, ..., float alpha, ...);
 * checks the arguments as tile_launch does (shape relations, fixed sizes, NULL pointers)
 * plus the facts the code was specialized for, loads the module once per CUDA context
 * (the cubin for the device's compute capability when there is one, else the PTX),
 * computes the grid from the sizes and launches on `stream` in the calling thread's current
 * context; it returns TILE_AOT_OK (0) or an error code with SYMBOL_errmsg() saying why. */

/* Turns PTX into a device image for `arch` (tilec runs ptxas). On success returns 0 and sets
 * *image / *image_len to memory the callback owns, valid until its next call or until
 * tile_emit_aot returns; on failure returns nonzero with a message in err. */
typedef int (*tile_assemble_fn)(void *ud, const char *arch, const char *ptx, size_t ptx_len,
                                const void **image, size_t *image_len, char *err, size_t errlen);

enum tile_aot_specialization {
  TILE_AOT_ALIGNED = 1u << 0,   /* strides (but the last, which is 1) and every size a multiple
                                   of 16 bytes / 16: the fast code, as tile_emit by default */
  TILE_AOT_UNALIGNED = 1u << 1, /* any strides and sizes (as tile_emit's assume_unaligned) */
};

typedef struct tile_aot_options {
  const char *const *kernels; /* the kernels to emit; nkernels 0 = tile_compile_options.kernel
                                 (NULL: the file's only kernel) */
  unsigned nkernels;
  const char *const *archs;   /* targets ("sm_90a", "sm_80", ...), at least one; each gets its
                                 own PTX and launch parameters, and a cubin with `assemble` */
  unsigned narchs;
  unsigned specializations;   /* tile_aot_specialization bits; 0 = TILE_AOT_ALIGNED. With both,
                                 each launch picks the aligned code when its arguments allow */
  const char *symbol;         /* C prefix of every generated name (a C identifier) */
  const char *header_name;    /* what the source #includes, e.g. "gemm_aot.h" */
  tile_assemble_fn assemble;  /* NULL: PTX only (the driver compiles it on first load) */
  void *assemble_ud;
} tile_aot_options;

/* Compiles the kernels of `src` (tile_compile_options: defines, schedule, flags; its device
 * and arch are ignored) and writes the generated header and source. Both are allocated
 * through the context's hook: free them with tile_free. */
TILE_API tile_status tile_emit_aot(tile_context *ctx, const char *name, const char *src, size_t len,
                                   const tile_compile_options *co, const tile_aot_options *ao,
                                   char **header, size_t *header_len, char **source,
                                   size_t *source_len);

/* ---- device memory and timing helpers (for tools, tests and examples) --------------------
 * On TILE_DEVICE_CPU these are plain host memory operations, so a program can be written
 * once for both devices (tile_mem_alloc's host blocks, 256-byte aligned, come from the
 * context's hook: free them with tile_mem_free on the same context). */

TILE_API tile_status tile_mem_alloc(tile_context *ctx, tile_device dev, size_t bytes, void **out);
TILE_API tile_status tile_mem_free(tile_context *ctx, tile_device dev, void *p);
TILE_API tile_status tile_mem_upload(tile_context *ctx, tile_device dev, void *dst, const void *src,
                                     size_t bytes);
TILE_API tile_status tile_mem_download(tile_context *ctx, tile_device dev, void *dst,
                                       const void *src, size_t bytes);
TILE_API tile_status tile_mem_fill(tile_context *ctx, tile_device dev, void *dst, uint8_t byte,
                                   size_t bytes);
TILE_API tile_status tile_synchronize(tile_context *ctx, tile_device dev);

typedef struct tile_device_info {
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  int smem_per_block_optin;
  int driver_version;
  const char *arch; /* the compile target chosen for it, e.g. "sm_90a" */
  /* Peaks that benchmarks report percentages of (0 when unknown): the maximum SM clock the
   * driver reports times the multiprocessors times the target table's per-clock throughput,
   * and the memory clock times the bus width (double data rate). Theoretical: sustained
   * clocks under load are lower, and a device-to-device copy reaches about 90% of the
   * bandwidth figure. */
  int clock_mhz;                /* maximum SM clock */
  double peak_tc_f16_tflops;    /* dense f16/bf16 Tensor Core FLOP/s (f32 accumulation) */
  double peak_f32_tflops;       /* f32 FMA on the CUDA cores */
  double peak_mem_gbps;         /* memory bandwidth, GB/s */
} tile_device_info;
TILE_API tile_status tile_device_query(tile_context *ctx, tile_device dev, tile_device_info *out);

typedef struct tile_bench_options {
  void *stream;
  int warmup;       /* launches before timing (default 10) */
  int reps;         /* timed launches (default 50) */
  double max_ms;    /* stop repeating after this much time (default 2000) */
  size_t flush_l2_bytes; /* clear this many bytes of cache between runs (0 = no) */
} tile_bench_options;

typedef struct tile_bench_result {
  double median_ms, min_ms, mean_ms;
  int reps;
} tile_bench_result;

/* Times repeated launches with device events (CUDA) or a host clock (CPU). */
TILE_API tile_status tile_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args,
                                unsigned nargs, const tile_bench_options *opts,
                                tile_bench_result *out);

/* ---- on-disk cache -----------------------------------------------------------------------
 * One directory (tile_context_options.cache_dir) holds, per CUDA specialization, the PTX and
 * the driver's compiled image (so a later process skips the front end's GPU passes, LLVM and
 * the driver's JIT), and, per tuning key, the best configuration found by tile_tune. Keys
 * include the compiler's version and build id, the kernel source, its resolved compile-time
 * parameters, the argument facts, the target, the GPU's name and the driver version, so an
 * entry is never used for anything it was not made for. Entries are written atomically
 * (temporary file + rename) and verified on every read (magic, format version, full key,
 * lengths, checksum), and so is every part before it is used: the checksum is not keyed, so
 * it proves nothing against whoever can write the directory; a stored cubin must be a sound
 * ELF64 image for EM_CUDA whose headers stay within its length (the driver is handed no
 * length), the PTX must be PTX text, the metadata must fit the kernel. An entry that fails
 * any check is ignored, rebuilt and rewritten (tile_cache_status says why). Several
 * threads and processes may share a directory. A store that fails (read-only disk, no space)
 * does not fail the compile or launch that caused it. */

/* The cache directory of ctx ("" when the on-disk cache is off). Never NULL. */
TILE_API const char *tile_cache_path(const tile_context *ctx);

/* Why the on-disk cache of ctx is off although a directory was configured (the directory
 * was refused: see tile_context_options.cache_dir), or else the latest problem the cache
 * met: an entry that failed a check and was ignored (it is rebuilt and rewritten), a store
 * that failed. "" when there is nothing to report. Never NULL; the library never prints it. */
TILE_API const char *tile_cache_status(const tile_context *ctx);

typedef struct tile_cache_stats {
  unsigned loaded;       /* entries read and used (compiled modules and tuning results) */
  unsigned rejected;     /* entries that failed a check and were ignored (then rebuilt and
                            rewritten): damaged, planted, or code the driver refused */
  unsigned stored;       /* entries written */
  unsigned store_failed; /* stores that failed (read-only disk, no space, refused directory) */
} tile_cache_stats;

/* The on-disk cache's counters for ctx since it was created. */
TILE_API tile_status tile_cache_get_stats(const tile_context *ctx, tile_cache_stats *out);

typedef struct tile_cache_entry {
  const char *file;    /* the file name inside the cache directory */
  const char *kind;    /* "module", "tune", or "temp" (a temporary file left by a store that
                          was interrupted; never read, removed by tile_cache_clear) */
  uint64_t bytes;
  int64_t mtime;       /* seconds since the epoch */
  int valid;           /* 1 when the file passes every check (it would be used) */
  const char *summary; /* kernel, configuration and target, or why it is invalid */
} tile_cache_entry;
typedef void (*tile_cache_fn)(void *ud, const tile_cache_entry *e);

/* Calls fn for each file of the cache directory that belongs to the cache (other files are
 * left alone). The entry's strings are valid during the call only. */
TILE_API tile_status tile_cache_list(tile_context *ctx, tile_cache_fn fn, void *ud);
/* Removes every cache file (entries and temporary files; nothing else) from the directory.
 * *removed (may be NULL) gets how many. Safe while other processes use the cache: they
 * see misses and recompile. */
TILE_API tile_status tile_cache_clear(tile_context *ctx, unsigned *removed);

/* ---- autotuning --------------------------------------------------------------------------
 * The search space is the product of the candidate sets of the kernel's int compile-time
 * parameters (`BM: 64 | 128 = 128`), minus the parameters the caller pins with defines and
 * those fixed by the arguments (a dtype parameter used as a tensor's dtype, an int parameter
 * used as a tensor's fixed size, like attention's D). bool, str and dtype parameters change
 * what the kernel computes and are not tuned unless named in tile_tune_options.params.
 * Configurations that violate the kernel's `where` constraints, or need more shared memory
 * than the device allows, are pruned before the driver sees them; the others are compiled
 * in parallel on host threads, then each is launched once and its outputs compared with
 * those of the default configuration (relative L2 error at most 3e-3 for f16, 2e-2 for bf16,
 * 1e-3 for f32, exact for integers; NaN where the other has none fails), and timed with
 * device events (median of repeated launches after warm-up). Configurations that spill
 * registers to local memory are timed last. A configuration that fails to compile, load or
 * launch, or gives a different answer, is skipped with its reason; the search goes on.
 *
 * The tuning key: the kernel source and name, the pinned values, the dtypes, ranks and
 * alignment facts of the tensors, each shape symbol's size bucketed (exact below 128, else
 * the next power of two) and whether it is a multiple of 16, the GPU's name and target, the
 * driver and compiler versions. The best configuration is stored per key in the context
 * and in the on-disk cache; a later call with the same key returns it without timing.
 *
 * The arguments are those of a launch. Inputs are not modified. Output tensors are
 * overwritten while tuning and restored afterwards (from a device copy; that memory must be
 * available). Launches go to opts->stream.                                              */

typedef enum tile_tune_outcome {
  TILE_TUNE_TIMED = 0, /* compiled, checked and timed */
  TILE_TUNE_PRUNED,    /* rejected before timing: a `where` constraint, shared memory */
  TILE_TUNE_FAILED,    /* compile, load or launch error, or out of memory */
  TILE_TUNE_WRONG,     /* its output differs from the reference configuration's */
  TILE_TUNE_SKIPPED,   /* not tried: the time budget or max_configs ran out */
  TILE_TUNE_CACHED     /* the stored best of an earlier tuning (nothing was timed) */
} tile_tune_outcome;

/* "timed", "pruned", "failed", "wrong", "skipped", "cached". */
TILE_API const char *tile_tune_outcome_name(tile_tune_outcome o);

typedef struct tile_tune_config {
  char *config;       /* the tuned parameters' values, "BM=128,BN=64,BK=32" */
  tile_tune_outcome outcome;
  char *reason;       /* why it was not timed (or a note, e.g. spills); NULL if none */
  double median_ms;   /* TIMED/CACHED: the launch time; else 0 */
  double min_ms;
  double rel_err;     /* relative L2 difference from the reference output; -1 unchecked */
  double compile_ms;  /* front end + GPU passes + LLVM + driver JIT (host threads) */
  unsigned shared_bytes;
  int registers, local_bytes; /* -1 when unknown */
} tile_tune_config;

typedef struct tile_tune_result {
  char *best;           /* the winner's tuned values, "BM=128,BN=256,..." */
  tile_define *defines; /* the caller's defines, the values fixed by the arguments and the
                           winner's: pass these as tile_compile_options.defines */
  unsigned ndefines;
  double best_ms;       /* the winner's median time */
  tile_tune_config *configs; /* the configurations tried, in order; configs[0] is the default
                                (the reference). Those never reached (budget, max_configs) are
                                only counted in `skipped`. A reused result has one row, CACHED. */
  unsigned nconfigs;
  unsigned timed;       /* configurations timed by this call: 0 when a stored result was used */
  unsigned pruned, failed, wrong, skipped;
  int from_cache;       /* 0 = tuned now, 1 = this context's memory, 2 = the on-disk cache */
  char key[65];         /* the tuning key's hash (hex) */
  double total_ms;      /* the wall time of the call */
} tile_tune_result;

typedef struct tile_tune_progress {
  unsigned index, total;          /* configuration `index` (1-based) of `total` */
  const tile_tune_config *config; /* the one just finished */
  const char *best;               /* best so far (NULL before the first) */
  double best_ms;
  double elapsed_ms;
} tile_tune_progress;
typedef void (*tile_tune_progress_fn)(void *ud, const tile_tune_progress *p);

enum tile_tune_flags {
  TILE_TUNE_FORCE = 1u << 0,   /* tune even if a stored result exists (and replace it) */
  TILE_TUNE_NO_STORE = 1u << 1 /* keep the result out of the context and the disk */
};                             /* (TILE_NO_CACHE in the compile options implies both) */

typedef struct tile_tune_options {
  double budget_ms;        /* the whole search, compiles included (default 120000); the
                              default configuration is always evaluated */
  double config_budget_ms; /* timed launches of one configuration (default 300) */
  int warmup;              /* launches before timing (default 3) */
  int reps;                /* timed launches, median taken (default 25; at least 5 run) */
  int threads;             /* compile threads (0 = cores - 1, at most 32; negative: none,
                              every configuration is compiled on the calling thread) */
  unsigned max_configs;    /* try at most this many (0 = the whole space) */
  const char *params;      /* comma-separated names to tune instead of the default choice */
  unsigned flags;          /* tile_tune_flags */
  void *stream;            /* CUstream for the launches (NULL = the legacy default stream) */
  tile_tune_progress_fn progress; /* called on the calling thread after each configuration */
  void *progress_ud;
} tile_tune_options;

/* Tunes the kernel of `src` (compiled with co: kernel, device, arch, flags, and defines that
 * pin parameters) for these launch arguments. topts may be NULL for defaults. On TILE_OK,
 * *out holds the winner and the table (free it with tile_tune_result_free); the failure of
 * individual configurations is reported there, not as an error. Errors: the default
 * configuration does not compile (TILE_COMPILE), the arguments are rejected
 * (TILE_BAD_LAUNCH), no configuration could be run (the status of the default's failure).
 * Tuning spawns host threads for compiling; ctx is used by the calling thread only. A host
 * allocation that fails makes the whole call fail with TILE_NOMEM (nothing is stored): it
 * says nothing about the configuration that met it. */
TILE_API tile_status tile_tune(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *co, const tile_arg *args, unsigned nargs,
                               const tile_tune_options *topts, tile_tune_result *out);
/* The same from a file. */
TILE_API tile_status tile_tune_file(tile_context *ctx, const char *path, const tile_compile_options *co,
                                    const tile_arg *args, unsigned nargs, const tile_tune_options *topts,
                                    tile_tune_result *out);
/* Frees what tile_tune put in *r and zeroes it; a zeroed or NULL r is a no-op. */
TILE_API void tile_tune_result_free(tile_tune_result *r);

#ifdef __cplusplus
}
#endif
#endif
