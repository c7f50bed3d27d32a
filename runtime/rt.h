/* rt.h - runtime internals shared by api.c, launch.c, gpu.c and mem.c.
 *
 * The context owns long-lived state (the CUDA driver table, the device, the kernel cache);
 * each kernel owns an arena holding its source, its generic IR and its specializations.
 * Errors are written with rt_error() into the context's message buffer; every API entry
 * point clears it first, so tile_errmsg always describes the latest call.              */
#ifndef TL_RT_H
#define TL_RT_H

#include "cache.h"
#include "cg.h"
#include "cudrv.h"
#include "driver.h"
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
  const char *errcode; /* the stable code of the last error (tile_errcode); NULL for none */
  char errbrief[512];  /* the last error in one line, without a location (for tables) */
  /* diagnostics of the last compile, in their own arena (reset per compile) */
  struct arena diag_arena;
  VEC(tile_diagnostic) diags;
  /* CUDA, loaded on first use */
  bool cuda_tried, cuda_ok;
  char cuda_err[1024];
  struct rt_cuda cuda;
  struct rt_cuda_device dev;
  char dev_arch[16];
  const struct tl_target *dev_target; /* the device's target (tl_target_for_cc) */
  bool verify_each;  /* verify the IR after every pass of every compile: Debug and sanitizer
                        builds, or TILE_VERIFY_EACH set when the context was created */
  /* in-memory kernel cache */
  struct arena cache_arena;
  VEC(struct tile_kernel *) kernels;
  char cache_dir[4096]; /* on-disk cache directory ("" = off) */
  /* tile_cache_status: why the cache is off, or the latest problem it met; and counters */
  char cache_status[512];
  tile_cache_stats cache_stats;
  /* best configurations found by tuning in this context (tune.c), in cache_arena */
  VEC(struct rt_tune_memo) tunes;
  /* repacking unaligned operands (repack.c): the scratch pool and the copy kernels by
   * [rank - 2][f16, bf16, f32] (entries of `kernels`, freed with them) */
  CUmemoryPool repack_pool;
  int repack_mode; /* TILE_REPACK (rt_repack_mode_from_env) */
  double autotune_budget_ms; /* TILE_AUTOTUNE_BUDGET_MS; 0: the tuner's default */
  struct tile_kernel *repack_kernels[2][3];
  /* kernels not yet freed; a destroyed context lives on until its last kernel is
   * released (tile_context_destroy) */
  unsigned live_kernels;
  bool destroyed;
  struct rt_trace *trace; /* profiler ranges and the trace file (trace.c); NULL: off */
};

/* ---- trace.c: profiler ranges (NVTX) and the Chrome trace file ----
 * rt_trace_begin returns the start time for rt_trace_end; both cost one test when tracing
 * is off. Names are "KERNEL [CONFIG] WHAT"; args_fmt formats extra JSON members
 * ("\"grid\":\"%u,%u,%u\""), or is NULL. */
tile_status rt_trace_open(tile_context *ctx, const char *path);
void rt_trace_close(tile_context *ctx);
double rt_trace_begin_(tile_context *ctx, const char *kernel, const char *config, const char *what);
void rt_trace_end_(tile_context *ctx, double t0, const char *cat, const char *kernel, const char *config,
                   const char *what, const char *args_fmt, ...) TL_PRINTF(7, 8);
void rt_trace_instant_(tile_context *ctx, const char *cat, const char *kernel, const char *config, const char *what,
                       const char *args_fmt, ...) TL_PRINTF(6, 7);
#define rt_trace_begin(ctx, kernel, config, what) ((ctx)->trace ? rt_trace_begin_(ctx, kernel, config, what) : 0.0)
#define rt_trace_end(ctx, ...) ((ctx)->trace ? rt_trace_end_(ctx, __VA_ARGS__) : (void)0)
#define rt_trace_instant(ctx, ...) ((ctx)->trace ? rt_trace_instant_(ctx, __VA_ARGS__) : (void)0)
/* pass_options.event for a compile of one kernel */
struct rt_trace_pass_ud {
  tile_context *ctx;
  const char *kernel, *config;
};
double rt_trace_pass(void *ud, const char *pass, bool begin, double t0_ms);

/* A tuning result remembered by the context: the hash of the tuning key and the winner. */
struct rt_tune_memo {
  uint8_t key[32];
  const char *best; /* "BM=128,BN=64" */
  double best_ms;
};

/* A TILE_AUTOTUNE kernel's choice for one tuning key: the tuned kernel it launches. */
struct rt_autotuned {
  uint8_t key[32];           /* hash of the argument part of the tuning key */
  struct tile_kernel *child; /* holds a reference; NULL: tuning failed, use the kernel itself */
};

/* The last tensor map encoded for one of a specialization's TMA descriptors, and the
 * tensor it describes: a launch with the same tensor reuses it. */
struct rt_tmap_cache {
  bool valid;
  uint64_t data;
  int64_t shape[IR_MAX_RANK], strides[IR_MAX_RANK];
  uint64_t map[16]; /* the CUtensorMap's bytes */
};

/* What the launcher needs to know about generated code besides the module: the TMA
 * descriptors it takes and whether it is persistent (cg.h). */
struct rt_code_info {
  struct cg_tmap tmaps[CG_MAX_TMAPS];
  unsigned ntmaps;
  uint8_t persistent; /* cg_result.persistent */
  bool whole_program; /* loaded as PTX by the driver's whole-program JIT, never linked (cg.h) */
  bool grid_dep;      /* launched with programmatic stream serialization (cg.h) */
  uint8_t cluster;    /* CTAs per program (cg.h; 1: none) */
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
  int occupancy;     /* blocks per multiprocessor (persistent grids) */
  struct rt_code_info code;
  struct rt_tmap_cache maps[CG_MAX_TMAPS];
  double compile_ms;
  bool cache_hit;
};

struct tile_kernel {
  int refs;
  tile_context *ctx;
  uint8_t key[RT_HASH_LEN]; /* source + options hash (the in-memory cache key) */
  struct arena arena;
  struct strtab strs;
  tile_device device;
  char arch[16];           /* the target's name ("" on the CPU) */
  const struct tl_target *target; /* NULL on the CPU */
  struct tl_schedule sched;
  char sched_text[128];     /* the schedule's canonical text (cache keys, recompiles) */
  unsigned flags;
  const char *name;
  const char *config;     /* "BM=128,BN=64" */
  const char *src;        /* a copy of the source, for target code generation */
  size_t src_len;
  const char *filename;
  struct ir_func *ir;     /* generic IR after the machine-independent pipeline */
  uint32_t cache_loop;    /* ir's loop whose trip count is a fact (row-cache; 0: none) */
  int64_t cache_chunk;    /* bytes of one chunk of the loads row-cache would keep from it */
  bool long_tiles_matter; /* pass_long_tiles_matter: the long_tiles fact joins each launch's
                           * key (rt_tile_trips) */
  tile_param_info *params; /* user-visible parameters (tensors and scalars) */
  uint32_t *param_ir;     /* user parameter i -> index in ir->params */
  unsigned nparams;
  VEC(struct rt_spec) specs;
  tile_kernel_stats stats;
  uintptr_t checked_ptrs[16];   /* device pointers already verified (launch fast path) */
  unsigned next_checked;
  /* for tuning and the on-disk cache (set by compile_new) */
  const char *kernel_opt;   /* tile_compile_options.kernel as given (NULL: the only one) */
  tile_define *defines;     /* the defines it was compiled with, copied */
  unsigned ndefines;
  uint8_t src_hash[32];     /* BLAKE3 of src (gpu.c computes it on first use) */
  bool src_hashed;
  VEC(struct rt_autotuned) tuned; /* TILE_AUTOTUNE, TILE_AUTOCONFIG: the choice per tuning key */
  const char *last_config;  /* tile_kernel_tuned_config */
  uint64_t dot_operands;    /* repack.c: ir params loaded in a loop into a dot (bit per param) */
  bool dot_operands_known;
};

void rt_clear_error(tile_context *ctx);
tile_status rt_error(tile_context *ctx, tile_status st, const char *fmt, ...) TL_PRINTF(3, 4);
/* rt_error with a stable code (tile_errcode): a TL_CODE_* name (driver.h) */
tile_status rt_error_code(tile_context *ctx, tile_status st, const char *code, const char *fmt, ...)
    TL_PRINTF(4, 5);
/* A failure of a compiler stage (driver.h): its message and code, as a tile_status. */
tile_status rt_fail(tile_context *ctx, enum tl_result r, struct tl_error *e);
/* Records a problem of the on-disk cache for tile_cache_status (never printed). */
void rt_cache_note(tile_context *ctx, const char *fmt, ...) TL_PRINTF(2, 3);
/* The whole file at path (at most TILE_MAX_SOURCE_BYTES), NUL-terminated, from tl_malloc
 * with ctx's hook (*len bytes); NULL on failure, with errno set: ENOMEM, EISDIR, EFBIG or
 * what the system said. Read with open/read: no stdio buffer is allocated behind the hook. */
char *rt_read_file(tile_context *ctx, const char *path, size_t *len);

/* ---- launching (launch.c) ---- */

struct rt_bound {
  struct interp_arg *iargs; /* one per ir param (shapes filled from tensors) */
  int64_t grid[3];
  unsigned repacked;        /* bit i: user parameter i is a repacked copy (repack.c) */
};

/* Validates args against k's parameters and binds them: tensors, scalars and shape
 * symbols, then evaluates the grid. Errors name the argument; nothing is launched. */
tile_status rt_bind_args(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         struct arena *scratch, struct rt_bound *out);

/* ---- CUDA (gpu.c) ---- */

/* The programs a persistent grid of `tiles` tiles launches with `slots` program slots on the
 * device: persistent=1 min(tiles, slots); persistent=2 (cg.h) the same for one wave or
 * CG_WALK_MIN_WAVES to CG_FEW_WAVES waves, one program per tile otherwise. */
uint64_t rt_persistent_programs(uint64_t tiles, uint64_t slots, int persistent);

/* The iterations of f's innermost loops in the program at grid coordinates pid[] (loops
 * whose bounds the launch and pid[] do not decide count once; an if, its heavier branch). */
double rt_tile_trips(const struct ir_func *f, const struct rt_bound *b, const int64_t pid[3]);

/* Loads the driver and opens the device once; false (with the message set) if unavailable. */
bool rt_cuda_ready(tile_context *ctx);
tile_status rt_gpu_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                          void *stream, bool launch);
/* Builds and loads the specialization for b without the device-side argument checks (for
 * arguments the runtime made itself: repack.c's placeholders of its scratch). */
tile_status rt_gpu_prepare_spec(tile_context *ctx, tile_kernel *k, const struct rt_bound *b);
/* The launch itself, without repacking (repack.c calls it with the repacked arguments). */
tile_status rt_gpu_launch_direct(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                                 void *stream, bool launch);
/* Generates PTX for the kernel's IR with the given facts: used by tile_emit. */
struct pass_options;
tile_status rt_gpu_emit(tile_context *ctx, struct ir_func *f, const struct tl_target *target,
                        const struct tl_schedule *sched, tile_emit_kind what, const tile_emit_options *eo,
                        struct pass_options *po, struct strbuf *out);
/* The target code of f for ahead-of-time output (tile_emit, tile_emit_aot): f's facts are
 * set to the common case (16-byte aligned bases, contiguous rows; 16-byte multiple strides
 * and sizes unless assume_unaligned), then it is compiled in place into res (text in a). */
tile_status rt_gpu_emit_code(tile_context *ctx, struct ir_func *f, const struct tl_target *target,
                             const struct tl_schedule *sched, enum cg_output out, bool assume_unaligned,
                             struct pass_options *po, struct arena *a, struct cg_result *res);
/* The CUtensorMapDataType of an element type (TMA descriptors; aot.c writes it into code). */
int rt_tmap_dtype(ir_dtype dt);
/* The elements from a tensor's base to its last one, inclusive (1 when empty; -1 when a
 * stride is negative). */
int64_t rt_tensor_span(const struct interp_tensor *x);
/* Times `o->reps` launches with device events into t[], setting *n. */
tile_status rt_gpu_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                         const tile_bench_options *o, double *t, int *n);

/* ---- building specializations off the main thread (gpu.c; used by tune.c) ---- */

/* What code generation and the module cache key need to know about the target, copied from
 * the context that will load the code, so that other threads can build for it. */
struct rt_gpu_target {
  char arch[16];                /* the device's; a kernel is built for its own k->arch */
  char device_name[256];
  int driver_version;
  int smem_optin;               /* the device's opt-in shared memory per block; 0 = unknown */
  const struct rt_cuda *cuda;   /* for linking PTX to a cubin; NULL = PTX only */
  CUcontext cuctx;              /* made current on the building thread when linking */
  const char *cache_dir;        /* on-disk module cache to consult ("" or NULL = none) */
  const char *dump_after;       /* internal tools (tests/host/spec_ptx.c): a pass name or "all" */
  pass_dump_fn dump;            /* receives the specialization's IR after it; NULL = none */
  void *dump_ud;
};

/* The target code of one specialization, before it is loaded. */
struct rt_artifact {
  uint8_t facts[64];
  uint32_t facts_len;
  char *ptx;          /* malloc'd, NUL-terminated */
  size_t ptx_len;
  void *cubin;        /* malloc'd driver image, or NULL */
  size_t cubin_len;
  unsigned threads, smem;
  struct rt_code_info code;
  double build_ms;
  bool from_disk;
  char cache_note[320]; /* why a module cache entry for it was ignored ("" if none) */
};
void rt_artifact_free(struct rt_artifact *a);

/* Fills t from ctx (CUDA must be ready). link: whether builds should produce a cubin. */
void rt_gpu_target_of(tile_context *ctx, bool link, struct rt_gpu_target *t);
/* Builds (or finds in t->cache_dir) the artifact of k's specialization for the bound
 * arguments. Touches only k, t (read-only) and its own memory, so threads may build for
 * their own kernels at once. Errors go to k's context: TILE_UNSUPPORTED when the kernel
 * needs more shared memory than t->smem_optin. */
tile_status rt_gpu_build(tile_kernel *k, const struct rt_bound *b, const struct rt_gpu_target *t,
                         struct rt_artifact *out);
/* Loads an artifact built for k and these arguments as k's specialization (main thread). */
tile_status rt_gpu_adopt(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                         const struct rt_artifact *a);
/* What one program of k's specialization for b does, from its generic IR with the launch's
 * decided branches folded: the global bytes its loads read (loops with launch-decided
 * bounds counted by their trips), its largest tile in elements, its warps, and the
 * launch-decided ifs (count, and the bits of those taken). With `lower`, the GPU passes run
 * too (no LLVM: milliseconds) and smem is the extent of the buffers and barriers they place
 * (not the scratch code generation adds for layout changes). */
struct rt_estimate {
  double load_bytes;
  int64_t largest_tile;
  int64_t min_trips; /* the fewest trips of a loop whose bounds the launch decides (0: none) */
  int warps;
  unsigned decided, taken;
  unsigned smem;
};
tile_status rt_gpu_estimate(tile_kernel *k, const struct rt_bound *b, bool lower, struct rt_estimate *e);
/* The device-side argument checks of a launch (alignment, residency), without compiling. */
tile_status rt_gpu_check_args(tile_context *ctx, tile_kernel *k, const struct rt_bound *b);
/* Writes an artifact of k to the context's on-disk module cache (best effort: a failure is
 * only counted and noted, tile_cache_status). */
void rt_gpu_store(tile_context *ctx, tile_kernel *k, const struct rt_artifact *a);
/* Counts and notes what a build found in the module cache: a used entry, or one ignored. */
void rt_gpu_cache_outcome(tile_context *ctx, const struct rt_artifact *a);

/* ---- repacking unaligned dot operands (repack.c) ---- */

enum {
  RT_REPACK_MAX = 4,                   /* tensors repacked per launch at most */
  RT_REPACK_MIN_BYTES = 256 << 10,     /* smaller tensors are not worth a copy launch */
};
#define RT_REPACK_POOL_KEEP ((uint64_t)1 << 30) /* freed scratch the pool keeps for reuse */

struct rt_repack_item {
  uint32_t param;                 /* ir parameter index */
  int64_t strides[IR_MAX_RANK];   /* of the aligned copy, in elements */
  size_t bytes;                   /* of the aligned copy */
};
struct rt_repack_plan {
  unsigned n;
  struct rt_repack_item v[RT_REPACK_MAX];
};

/* The strides of an aligned copy of a rank-2 or rank-3 tensor with contiguous rows (each
 * row padded to a multiple of 16 bytes) and its size; false when the rows are not
 * contiguous, the rank is not 2 or 3, or the tensor is empty. */
bool rt_repack_layout(int rank, const int64_t *shape, const int64_t *strides, int eb, int64_t *out_strides,
                      size_t *bytes);
/* Bit i: ir parameter i is a tensor loaded inside a loop into a dot operand. */
uint64_t rt_repack_operands(const struct ir_func *f);
/* The source of the internal copy kernels (repack2, repack3; T = f16, bf16 or f32). */
const char *rt_repack_source(void);
/* Whether the base or a stride (of a dimension longer than 1) is off 16 bytes. */
bool rt_repack_misaligned(int rank, const int64_t *shape, const int64_t *strides, int eb, uintptr_t addr);
/* Which tensors of this launch to repack (see repack.c); false when none. */
bool rt_repack_plan(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                    struct rt_repack_plan *plan);
/* Checks the arguments, copies the planned tensors to scratch, launches k on the copies and
 * frees the scratch, all in stream order. Not launching (tile_kernel_prepare): builds the
 * copy kernels' and k's specializations for the repacked arguments instead, so that the
 * first launch compiles nothing (TILE_AUTOTUNE kernels: k's own for b, as without
 * repacking). */
tile_status rt_repack_launch(tile_context *ctx, tile_kernel *k, const struct rt_bound *b,
                             const struct rt_repack_plan *plan, void *stream, bool launch);
/* TILE_REPACK (repack.c): RT_REPACK_NEVER for 0/off/false/no, RT_REPACK_ALWAYS for
 * 1/on/true/yes/always, else RT_REPACK_AUTO; read once, at context creation. */
enum { RT_REPACK_AUTO, RT_REPACK_NEVER, RT_REPACK_ALWAYS };
int rt_repack_mode_from_env(void);
/* Destroys the scratch pool (context destruction). */
void rt_repack_release(tile_context *ctx);

/* ---- tuning (tune.c) ---- */

/* TILE_AUTOTUNE and TILE_AUTOCONFIG: the kernel to run for these bound arguments of k (k
 * itself when tuning failed or the default configuration is the choice); tunes, or chooses
 * by the grid (tune.c), on the first use of a tuning key. */
tile_status rt_autotune_pick(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                             tile_kernel **out);
/* Launches (or prepares) `run`, the kernel rt_autotune_pick chose for k, with k's bound
 * arguments; k's stats then describe that launch. */
tile_status rt_autotune_launch(tile_context *ctx, tile_kernel *k, tile_kernel *run, const struct rt_bound *b,
                               void *stream, bool launch);
/* TILE_AUTOCONFIG's choice for bound arguments b (args: the same as tile_args) on a device
 * of `sms` multiprocessors: the defines of the configuration to run, pins first (*n = 0:
 * k's own configuration). Allocates from a (whose oom jumps); the front end only. */
void rt_autoconfig_choose(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, const tile_arg *args, int sms,
                          struct arena *a, tile_define **defs, unsigned *n);
/* Releases what a kernel holds for TILE_AUTOTUNE (api.c: kernel_free). */
void rt_autotune_release(tile_kernel *k);


/* ---- the API's work, for internal callers ----
 * The public entry points (tile_*) are thin wrappers over these; code inside the library
 * calls these instead, so that a nested call never resets the caller's error state or
 * diagnostics (tests/cli/api_internal.sh checks that no tile_* entry point is called
 * from inside). rt_compile_string reports diagnostics only when asked (diags). */
tile_status rt_compile_string(tile_context *ctx, const char *name, const char *src, size_t len,
                              const tile_compile_options *opts, bool diags, tile_kernel **out);
tile_status rt_kernel_get_stats(const tile_kernel *k, tile_kernel_stats *out);
tile_status rt_launch(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                      const tile_launch_options *opts);
tile_status rt_kernel_prepare(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs);
tile_status rt_bench(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned nargs,
                     const tile_bench_options *opts, tile_bench_result *out);
const char *rt_cache_path(const tile_context *ctx);
void rt_tune_result_free(tile_tune_result *r);
tile_status rt_mem_alloc(tile_context *ctx, tile_device dev, size_t bytes, void **out);
tile_status rt_mem_free(tile_context *ctx, tile_device dev, void *p);
tile_status rt_mem_download(tile_context *ctx, tile_device dev, void *dst, const void *src, size_t bytes);
tile_status rt_mem_fill(tile_context *ctx, tile_device dev, void *dst, uint8_t byte, size_t bytes);
tile_status rt_synchronize(tile_context *ctx, tile_device dev);
void rt_kernel_release(tile_kernel *k);
tile_status rt_context_create(const tile_context_options *opts, tile_context **out);
void rt_context_destroy(tile_context *ctx);
const char *rt_version(void);
const char *rt_dtype_name(tile_dtype t);
size_t rt_dtype_size(tile_dtype t);
tile_status rt_tune(tile_context *ctx, const char *name, const char *src, size_t len, const tile_compile_options *co,
                    const tile_arg *args, unsigned nargs, const tile_tune_options *topts, tile_tune_result *out);

#endif
