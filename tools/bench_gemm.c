/* bench_gemm - the library's GEMM (lib/gemm.tile, kernel `gemm`) against cuBLASLt, on the
 * same inputs, in one process: speed of both and agreement between them.
 *
 *   bench_gemm [--shapes LIST] [--dtypes LIST] [--epilogues LIST] [--our CFG]... [--quick]
 *              [--csv FILE] [--lib DIR] [--cublaslt PATH] [--seed N] [--samples N]
 *              [--budget-ms MS] [--max-reps N] [--selftest] [--help]
 *
 *   --shapes   comma-separated MxNxK or S (= SxSxS); default: 4096, 8192, 4095, 8192x8192x4095,
 *              16x8192x8192, 64x8192x8192, 1000, 2048
 *   --dtypes   f16, bf16, tf32 (f32 inputs, TF32 tensor cores; also spelled f32). Default:
 *              f16 and bf16 everywhere, plus tf32 for 4096x4096x4096.
 *   --epilogues  none, bias_gelu (also "gelu"). Default: both.
 *   --our CFG  tile configuration of our kernel, e.g. BM=128,BN=256,BK=64,NW=8,STAGES=4
 *              (keys BM BN BK STAGES NW GROUP_M; "default" = lib/gemm.tile's defaults), and
 *              SCHED=ws=0+persistent=0 for schedule options (tile.h; '+' separates them),
 *              AUTO=0 for TILE_FIXED_CONFIG (the compiled configuration at every shape;
 *              without AUTO=0 the unpinned parameters are chosen per shape, TILE_AUTOCONFIG,
 *              the library's default; AUTO=1 says so explicitly).
 *              Repeat --our to compare several configurations (up to 8) in one run.
 *   --form F   gemm (default), linear (X @ W.T), bmm_shared (shapes BxMxNxK, one B), swiglu
 *              (silu(X @ W1.T) * (X @ W3.T)): see `forms` below for the kernels and their
 *              cuBLASLt equivalents
 *   --arch A   compile our kernels for target A (e.g. sm_80: its PTX runs on Hopper too)
 *   --quick    fewer timed runs (warm-up 3, at most 10 runs, 200 ms per measurement)
 *   --csv FILE also write every row as CSV (written as rows complete)
 *   --lib DIR  where gemm.tile is: --lib, $TILE_LIB_DIR, ./lib, <exe dir>/../lib
 *   --cublaslt PATH   the cuBLASLt library (else $BENCH_CUBLASLT, then the usual names)
 *   --selftest no GPU needed: runs our GEMM on the CPU interpreter against a host reference
 *              (checks this tool's inputs, conversions and references), and loads cuBLASLt
 *              and builds every descriptor this tool uses (checks its declarations). Exit 0/1.
 *   --dry-run-cpu  a test of this tool without a GPU: the whole benchmark loop on the CPU
 *              interpreter, a naive host GEMM standing in for cuBLASLt and a host clock for
 *              the timings (use tiny --shapes; the numbers mean nothing).
 *
 * What one row does, for one (shape, dtype, epilogue):
 *   inputs   A[M,K], B[K,N], bias[N]: uniform in [-1, 1), rounded to the dtype, generated on
 *            the host (compiler/util/rng.h, --seed) and uploaded once per (shape, dtype);
 *   ours     C = A @ B (epilogue none), or C = gelu_tanh(A @ B + bias) (ACT=gelu,
 *            HAS_BIAS=true), row-major;
 *   cuBLASLt computes the same row-major product as the column-major C^T = B^T A^T: its
 *            "A" operand is our B viewed column-major (N x K, ld N), its "B" operand is our
 *            A (K x M, ld K), D is N x M with ld N, no transposes; epilogue
 *            CUBLASLT_EPILOGUE_GELU_BIAS with the bias pointer (bias length = D's rows = N);
 *            CUBLAS_COMPUTE_32F (32F_FAST_TF32 for tf32), f32 alpha = 1, beta = 0; 32 MiB of
 *            workspace; the first algorithm of cublasLtMatmulAlgoGetHeuristic;
 *   checks   both outputs are poisoned (all bits set: NaN) before the checked launch. Then:
 *            relative L2 error ||ours - cuBLASLt|| / ||cuBLASLt|| over the whole matrix
 *            (< 5e-3 f16 and tf32, < 1e-2 bf16; NaN fails), and each of the two against a
 *            float64 host reference at --samples random elements (default 256, corners
 *            included), same tolerance; after timing, our output is downloaded again and
 *            must be bitwise the same (a changing result means a race);
 *   timing   the same method for both: warm-up launches, then every timed launch is
 *            preceded by a 256 MiB memset of a scratch buffer (which flushes the 60 MB L2
 *            and hides the host's launch overhead) and bracketed by CUDA events; the
 *            median of up to 50 runs (at least 20 unless one measurement would pass 1 s).
 *            We flush rather than rotate input sets. TFLOP/s = 2*M*N*K / median time.
 *
 * Output: one line per row as it completes, then a table (shape, dtype, epilogue, ours and
 * cuBLASLt TFLOP/s, ratio, relative L2 error ours vs cuBLASLt, max |diff| / max |cuBLASLt|,
 * sampled errors against the host reference, our configuration, registers / local bytes).
 *
 * cuBLASLt is loaded at run time with dlopen, and its few types and constants are declared
 * below (no CUDA header is needed to build). CUDA events and the memset come from the
 * driver through runtime/cudrv.c, compiled into this tool.
 *
 * Exit status: 0 every check passed; 1 a check failed or an error occurred; 2 bad usage;
 * 3 cuBLASLt could not be loaded (our kernel was still run and checked against the host
 * reference); 77 no CUDA GPU (skipped).                                                    */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudrv.h"
#include "rng.h"
#include "tile.h"
#include "bench_util.h"

/* ---- cuBLASLt declarations ------------------------------------------------------------------
 * Numeric values copied from the CUDA 13.0 toolkit headers on the build machine
 * (/usr/local/cuda/include: cublas_api.h of cuBLAS 13.1.0.3, cublasLt.h, library_types.h) and
 * checked by compiling a file that includes cublasLt.h and _Static_asserts each value below and
 * the size and layout of cublasLtMatmulHeuristicResult_t (96 bytes, state at offset 72). These
 * are ABI: cuBLAS 12 has the same values. All enums are 4-byte ints.                        */
enum {
  LT_STATUS_SUCCESS = 0,              /* cublasStatus_t CUBLAS_STATUS_SUCCESS */
  LT_OP_N = 0,                        /* cublasOperation_t CUBLAS_OP_N */
  LT_OP_T = 1,                        /* CUBLAS_OP_T */
  LT_COMPUTE_32F = 68,                /* cublasComputeType_t CUBLAS_COMPUTE_32F */
  LT_COMPUTE_32F_FAST_TF32 = 77,      /* CUBLAS_COMPUTE_32F_FAST_TF32 */
  LT_R_32F = 0,                       /* cudaDataType CUDA_R_32F */
  LT_R_16F = 2,                       /* CUDA_R_16F */
  LT_R_16BF = 14,                     /* CUDA_R_16BF */
  LT_DESC_TRANSA = 3,                 /* CUBLASLT_MATMUL_DESC_TRANSA (int32_t) */
  LT_DESC_TRANSB = 4,                 /* CUBLASLT_MATMUL_DESC_TRANSB (int32_t) */
  LT_DESC_EPILOGUE = 7,               /* CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t) */
  LT_DESC_BIAS_POINTER = 8,           /* CUBLASLT_MATMUL_DESC_BIAS_POINTER (const void *) */
  LT_EPILOGUE_DEFAULT = 1,            /* CUBLASLT_EPILOGUE_DEFAULT */
  LT_EPILOGUE_GELU_BIAS = 36,         /* CUBLASLT_EPILOGUE_GELU_BIAS = GELU (32) | BIAS (4) */
  LT_PREF_MAX_WORKSPACE_BYTES = 1     /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64_t) */
};
typedef struct cublasLtContext *lt_handle;          /* cublasLtHandle_t */
typedef struct lt_matmul_desc_st *lt_matmul_desc;   /* cublasLtMatmulDesc_t */
typedef struct lt_layout_st *lt_layout;             /* cublasLtMatrixLayout_t */
typedef struct lt_pref_st *lt_pref;                 /* cublasLtMatmulPreference_t */
typedef struct {
  uint64_t data[8];
} lt_algo; /* cublasLtMatmulAlgo_t */
typedef struct {
  lt_algo algo;
  size_t workspace_size;
  int state; /* cublasStatus_t */
  float waves_count;
  int reserved[4];
} lt_heuristic; /* cublasLtMatmulHeuristicResult_t */
_Static_assert(sizeof(lt_heuristic) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym needs function pointers of pointer size");

struct lt_api {
  void *lib;
  char path[512];
  size_t (*GetVersion)(void);
  const char *(*GetStatusName)(int);
  int (*Create)(lt_handle *);
  int (*Destroy)(lt_handle);
  int (*MatmulDescCreate)(lt_matmul_desc *, int compute_type, int scale_type);
  int (*MatmulDescDestroy)(lt_matmul_desc);
  int (*MatmulDescSetAttribute)(lt_matmul_desc, int attr, const void *buf, size_t bytes);
  int (*MatrixLayoutCreate)(lt_layout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
  int (*MatrixLayoutDestroy)(lt_layout);
  int (*MatmulPreferenceCreate)(lt_pref *);
  int (*MatmulPreferenceDestroy)(lt_pref);
  int (*MatmulPreferenceSetAttribute)(lt_pref, int attr, const void *buf, size_t bytes);
  int (*MatmulAlgoGetHeuristic)(lt_handle, lt_matmul_desc, lt_layout a, lt_layout b, lt_layout c,
                                lt_layout d, lt_pref, int requested, lt_heuristic *results,
                                int *returned);
  int (*Matmul)(lt_handle, lt_matmul_desc, const void *alpha, const void *a, lt_layout adesc,
                const void *b, lt_layout bdesc, const void *beta, const void *c, lt_layout cdesc,
                void *d, lt_layout ddesc, const lt_algo *algo, void *workspace,
                size_t workspace_bytes, CUstream stream);
};

static const char *lt_status_str(const struct lt_api *lt, int st) {
  static char buf[96];
  const char *name = lt->GetStatusName ? lt->GetStatusName(st) : NULL;
  snprintf(buf, sizeof buf, "%s (%d)", name ? name : "cublasStatus", st);
  return buf;
}

static int lt_sym(void *lib, const char *name, void *field, char *err, size_t errlen) {
  void *p = dlsym(lib, name);
  if (!p) {
    snprintf(err, errlen, "symbol %s not found", name);
    return -1;
  }
  memcpy(field, &p, sizeof p); /* POSIX: function and object pointers share a representation */
  return 0;
}

/* Opens cuBLASLt: `explicit_path` if given, else $BENCH_CUBLASLT, else the usual names. */
static int lt_load(struct lt_api *lt, const char *explicit_path, char *err, size_t errlen) {
  memset(lt, 0, sizeof *lt);
  static const char *names[] = {
      "libcublasLt.so.13",
      "libcublasLt.so.12",
      "libcublasLt.so",
      "/usr/local/cuda/lib64/libcublasLt.so.13",
      "/usr/local/cuda/lib64/libcublasLt.so.12",
      "/usr/local/cuda/lib64/libcublasLt.so",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.12",
      "/usr/lib/x86_64-linux-gnu/libcublasLt.so.13",
      "/usr/lib/x86_64-linux-gnu/libcublasLt.so.12",
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.13",
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
  };
  const char *env = getenv("BENCH_CUBLASLT");
  const char *only = explicit_path ? explicit_path : (env && env[0] ? env : NULL);
  char tried[2048] = "";
  size_t n = only ? 1 : sizeof names / sizeof names[0];
  for (size_t i = 0; i < n && !lt->lib; i++) {
    const char *p = only ? only : names[i];
    lt->lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (lt->lib) {
      snprintf(lt->path, sizeof lt->path, "%s", p);
    } else {
      const char *e = dlerror();
      size_t used = strlen(tried);
      if (used + 8 < sizeof tried)
        snprintf(tried + used, sizeof tried - used, "\n    %s: %s", p, e ? e : "?");
    }
  }
  if (!lt->lib) {
    snprintf(err, errlen, "cannot dlopen cuBLASLt; tried:%s", tried);
    return -1;
  }
  int rc = 0;
  rc |= lt_sym(lt->lib, "cublasLtGetVersion", &lt->GetVersion, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtCreate", &lt->Create, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtDestroy", &lt->Destroy, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulDescCreate", &lt->MatmulDescCreate, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulDescDestroy", &lt->MatmulDescDestroy, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulDescSetAttribute", &lt->MatmulDescSetAttribute, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatrixLayoutCreate", &lt->MatrixLayoutCreate, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatrixLayoutDestroy", &lt->MatrixLayoutDestroy, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulPreferenceCreate", &lt->MatmulPreferenceCreate, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulPreferenceDestroy", &lt->MatmulPreferenceDestroy, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulPreferenceSetAttribute", &lt->MatmulPreferenceSetAttribute,
               err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmulAlgoGetHeuristic", &lt->MatmulAlgoGetHeuristic, err, errlen);
  rc |= lt_sym(lt->lib, "cublasLtMatmul", &lt->Matmul, err, errlen);
  if (rc) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", err);
    snprintf(err, errlen, "%s: %s", lt->path, msg);
    dlclose(lt->lib);
    lt->lib = NULL;
    return -1;
  }
  void *p = dlsym(lt->lib, "cublasLtGetStatusName"); /* optional: only for messages */
  if (p) memcpy(&lt->GetStatusName, &p, sizeof p);
  return 0;
}

/* ---- element types ---------------------------------------------------------------------- */

enum { DT_F16, DT_BF16, DT_TF32, DT__COUNT };
static const struct dtype_info {
  const char *name;
  tile_dtype tile;
  int lt_type, lt_compute;
  size_t size;
  double tol; /* relative L2 error allowed, against cuBLASLt and against the host reference */
} dtypes[DT__COUNT] = {
    {"f16", TILE_F16, LT_R_16F, LT_COMPUTE_32F, 2, 5e-3},
    {"bf16", TILE_BF16, LT_R_16BF, LT_COMPUTE_32F, 2, 1e-2},
    {"tf32", TILE_F32, LT_R_32F, LT_COMPUTE_32F_FAST_TF32, 4, 5e-3},
};

enum { EPI_NONE, EPI_BIAS_GELU, EPI__COUNT };
static const char *epi_names[EPI__COUNT] = {"none", "bias_gelu"};

/* The forms of product measured (--form), each a kernel of lib/ against its cuBLASLt
 * equivalent:
 *   gemm        C = A[M,K] @ B[K,N] (+ bias, GELU)     lib/gemm.tile gemm      NN GEMM
 *   linear      Y = X[M,K] @ W[N,K].T (nn.Linear)      lib/linear.tile linear  TN GEMM
 *   bmm_shared  C[b] = A[b] @ B for a batch, one B     lib/gemm.tile bmm_shared  one NN GEMM of
 *               (shapes BxMxNxK)                                                 B*M rows
 *   swiglu      Y = silu(X @ W1.T) * (X @ W3.T)        lib/linear.tile swiglu  one TN GEMM of
 *               (W1, W3: [N,K]; 4MNK flops)                                      X @ [W1; W3].T
 * For swiglu the cuBLASLt row computes both products (M x 2N) but not the elementwise
 * silu(g) * u, so the comparison favours cuBLASLt; its output is checked against its own
 * host reference and ours against ours (the outputs differ). */
enum { FORM_GEMM, FORM_LINEAR, FORM_BMM_SHARED, FORM_SWIGLU, FORM__COUNT };
static const struct form_info {
  const char *name, *file, *kernel;
  int weights; /* N x K matrices in the B buffer */
} forms[FORM__COUNT] = {
    {"gemm", "gemm.tile", "gemm", 1},
    {"linear", "linear.tile", "linear", 1},
    {"bmm_shared", "gemm.tile", "bmm_shared", 1},
    {"swiglu", "linear.tile", "swiglu", 2},
};

static uint16_t bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}
static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE binary16, round to nearest even, with subnormals, infinities and NaN. */
static uint16_t f16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
  if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal or 0 */
    float a;
    memcpy(&a, &ax, sizeof a);
    return (uint16_t)(sign | (uint16_t)lrintf(a * 16777216.0f)); /* units of 2^-24; exact
                                                      scaling; 1024 encodes 2^-14 correctly */
  }
  uint32_t h = ((((ax >> 23) - 127u + 15u) << 10) | ((ax >> 13) & 0x3ffu));
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry moves into the exponent */
  return (uint16_t)(sign | h);
}
static float f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0) {
    float f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  if (e == 31)
    u = sign | 0x7f800000u | (m << 13);
  else
    u = sign | ((e - 15u + 127u) << 23) | (m << 13);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline double load_elem(int dt, const void *buf, size_t i) {
  if (dt == DT_F16) return f16_to_float(((const uint16_t *)buf)[i]);
  if (dt == DT_BF16) return bf16_to_float(((const uint16_t *)buf)[i]);
  return ((const float *)buf)[i];
}

/* Uniform in [-1, 1), rounded to the dtype (compiler/util/rng.h). */
static void fill_random(int dt, void *buf, size_t n, uint64_t seed) {
  struct rng r;
  rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) {
    float f = rng_uniform(&r, -1.0f, 1.0f);
    if (dt == DT_F16)
      ((uint16_t *)buf)[i] = f16_from_float(f);
    else if (dt == DT_BF16)
      ((uint16_t *)buf)[i] = bf16_from_float(f);
    else
      ((float *)buf)[i] = f;
  }
}

/* The tanh form of GELU, as the library's gelu() and (by PyTorch's use of it for
 * approximate="tanh") cuBLASLt's GELU epilogue compute it. */
static double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* ---- options ---------------------------------------------------------------------------- */

enum { MAX_SHAPES = 64, MAX_CFGS = 8, MAX_CFG_DEFS = 8, MAX_REPS = 50 };

struct shape {
  int64_t M, N, K, B; /* B: the batch (bmm_shared; 1 otherwise) */
};
static const struct shape default_shapes[] = {
    {4096, 4096, 4096, 1}, {8192, 8192, 8192, 1},  {4095, 4095, 4095, 1}, {8192, 8192, 4095, 1},
    {16, 8192, 8192, 1},   {64, 8192, 8192, 1},    {1000, 1000, 1000, 1}, {2048, 2048, 2048, 1},
};

struct our_cfg {
  char text[256];  /* as given ("default" for none) */
  char store[256]; /* split copy the defines point into */
  char sched[128]; /* SCHED=...: tile_compile_options.schedule with '+' for ',' ("" = none) */
  int autoconfig; /* AUTO=1: TILE_AUTOCONFIG, AUTO=0: TILE_FIXED_CONFIG, -1 (unset): the default */
  tile_define defs[MAX_CFG_DEFS];
  unsigned ndefs;
};

struct options {
  struct shape shapes[MAX_SHAPES];
  int nshapes;
  bool dtype_on[DT__COUNT];
  bool dtypes_given;
  bool epi_on[EPI__COUNT];
  struct our_cfg cfgs[MAX_CFGS];
  int ncfgs;
  bool quick, selftest, dry_run_cpu;
  int form;
  const char *arch; /* --arch: compile our kernels for this target (sm_80 PTX runs on Hopper) */
  const char *csv, *lib, *cublaslt;
  uint64_t seed;
  int samples;
  double budget_ms;
  int max_reps, min_reps, warmup;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_gemm [--shapes LIST] [--dtypes f16,bf16,tf32] [--epilogues none,bias_gelu]\n"
          "                  [--our BM=..,BN=..,BK=..,STAGES=..,NW=..,GROUP_M=..|default]...\n"
          "                  [--form gemm|linear|bmm_shared|swiglu] [--arch sm_XX]\n"
          "                  [--quick] [--csv FILE] [--lib DIR] [--cublaslt PATH] [--seed N]\n"
          "                  [--samples N] [--budget-ms MS] [--max-reps N] [--selftest]\n"
          "  LIST: comma-separated MxNxK, BxMxNxK (bmm_shared) or S (= SxSxS). See the comment at the top of\n"
          "  tools/bench_gemm.c for what is measured and how.\n");
}

static bool parse_shape(const char *tok, struct shape *s) {
  long long a = 0, b = 0, c = 0;
  char extra;
  long long d = 0;
  int n = sscanf(tok, "%lldx%lldx%lldx%lld%c", &a, &b, &c, &d, &extra);
  if (n == 4 && a > 0 && b > 0 && c > 0 && d > 0) { /* BxMxNxK */
    *s = (struct shape){b, c, d, a};
    return true;
  }
  n = sscanf(tok, "%lldx%lldx%lld%c", &a, &b, &c, &extra);
  if (n == 3 && a > 0 && b > 0 && c > 0) {
    *s = (struct shape){a, b, c, 1};
    return true;
  }
  n = sscanf(tok, "%lld%c", &a, &extra);
  if (n == 1 && a > 0) {
    *s = (struct shape){a, a, a, 1};
    return true;
  }
  return false;
}

static bool parse_cfg(const char *text, struct our_cfg *c) {
  static const char *allowed[] = {"BM", "BN", "BK", "STAGES", "NW", "GROUP_M"};
  memset(c, 0, sizeof *c);
  c->autoconfig = -1;
  snprintf(c->text, sizeof c->text, "%s", text);
  if (strcmp(text, "default") == 0 || text[0] == 0) return true;
  snprintf(c->store, sizeof c->store, "%s", text);
  char *save = NULL;
  for (char *tok = strtok_r(c->store, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok || !eq[1]) {
      fprintf(stderr, "bench_gemm: --our: '%s' is not NAME=VALUE\n", tok);
      return false;
    }
    *eq = 0;
    if (strcmp(tok, "AUTO") == 0) { /* TILE_AUTOCONFIG */
      c->autoconfig = strcmp(eq + 1, "0") != 0 ? 1 : 0;
      continue;
    }
    if (strcmp(tok, "SCHED") == 0) { /* schedule options, '+' between them */
      snprintf(c->sched, sizeof c->sched, "%s", eq + 1);
      for (char *q = c->sched; *q; q++)
        if (*q == '+') *q = ',';
      continue;
    }
    bool ok = false;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) ok |= strcmp(tok, allowed[i]) == 0;
    if (!ok) {
      fprintf(stderr, "bench_gemm: --our: %s cannot be set (allowed: BM BN BK STAGES NW GROUP_M;"
                      " T, TF32, ACT and HAS_BIAS follow the row)\n", tok);
      return false;
    }
    if (c->ndefs == MAX_CFG_DEFS) {
      fprintf(stderr, "bench_gemm: --our: too many values\n");
      return false;
    }
    c->defs[c->ndefs].name = tok;
    c->defs[c->ndefs++].value = eq + 1;
  }
  return true;
}

/* Returns 0 ok, 2 usage error, 1 --help printed. */
static int parse_args(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->samples = 256;
  o->epi_on[EPI_NONE] = o->epi_on[EPI_BIAS_GELU] = true;
  o->dtype_on[DT_F16] = o->dtype_on[DT_BF16] = o->dtype_on[DT_TF32] = true;
  double budget = -1;
  int max_reps = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    const char *eq = strchr(a, '=');
    char name[64];
    if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) {
      memcpy(name, a, (size_t)(eq - a));
      name[eq - a] = 0;
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
    }
    bool takes = !strcmp(name, "--shapes") || !strcmp(name, "--dtypes") || !strcmp(name, "--epilogues") ||
                 !strcmp(name, "--form") || !strcmp(name, "--arch") ||
                 !strcmp(name, "--our") || !strcmp(name, "--csv") || !strcmp(name, "--lib") ||
                 !strcmp(name, "--cublaslt") || !strcmp(name, "--seed") || !strcmp(name, "--samples") ||
                 !strcmp(name, "--budget-ms") || !strcmp(name, "--max-reps");
    if (takes && !val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "bench_gemm: %s needs a value\n", name);
        return 2;
      }
      val = argv[++i];
    } else if (!takes && val) {
      fprintf(stderr, "bench_gemm: %s takes no value\n", name);
      return 2;
    }
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(name, "--quick")) {
      o->quick = true;
    } else if (!strcmp(name, "--selftest")) {
      o->selftest = true;
    } else if (!strcmp(name, "--dry-run-cpu")) {
      o->dry_run_cpu = true;
    } else if (!strcmp(name, "--shapes")) {
      char buf[2048], *save = NULL;
      snprintf(buf, sizeof buf, "%s", val);
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nshapes == MAX_SHAPES) {
          fprintf(stderr, "bench_gemm: too many shapes\n");
          return 2;
        }
        if (!parse_shape(t, &o->shapes[o->nshapes])) {
          fprintf(stderr, "bench_gemm: --shapes: '%s' is not MxNxK or S\n", t);
          return 2;
        }
        o->nshapes++;
      }
    } else if (!strcmp(name, "--dtypes")) {
      char buf[256], *save = NULL;
      snprintf(buf, sizeof buf, "%s", val);
      memset(o->dtype_on, 0, sizeof o->dtype_on);
      o->dtypes_given = true;
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "f16")) o->dtype_on[DT_F16] = true;
        else if (!strcmp(t, "bf16")) o->dtype_on[DT_BF16] = true;
        else if (!strcmp(t, "tf32") || !strcmp(t, "f32")) o->dtype_on[DT_TF32] = true;
        else {
          fprintf(stderr, "bench_gemm: --dtypes: unknown '%s' (f16, bf16, tf32)\n", t);
          return 2;
        }
      }
    } else if (!strcmp(name, "--epilogues")) {
      char buf[256], *save = NULL;
      snprintf(buf, sizeof buf, "%s", val);
      memset(o->epi_on, 0, sizeof o->epi_on);
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "none")) o->epi_on[EPI_NONE] = true;
        else if (!strcmp(t, "bias_gelu") || !strcmp(t, "gelu") || !strcmp(t, "bias+gelu"))
          o->epi_on[EPI_BIAS_GELU] = true;
        else {
          fprintf(stderr, "bench_gemm: --epilogues: unknown '%s' (none, bias_gelu)\n", t);
          return 2;
        }
      }
    } else if (!strcmp(name, "--our")) {
      if (o->ncfgs == MAX_CFGS) {
        fprintf(stderr, "bench_gemm: at most %d --our\n", MAX_CFGS);
        return 2;
      }
      if (!parse_cfg(val, &o->cfgs[o->ncfgs])) return 2;
      o->ncfgs++;
    } else if (!strcmp(name, "--form")) {
      o->form = -1;
      for (int f = 0; f < FORM__COUNT; f++)
        if (!strcmp(val, forms[f].name)) o->form = f;
      if (o->form < 0) {
        fprintf(stderr, "bench_gemm: --form: unknown '%s' (gemm, linear, bmm_shared, swiglu)\n", val);
        return 2;
      }
    } else if (!strcmp(name, "--arch")) {
      o->arch = val;
    } else if (!strcmp(name, "--csv")) {
      o->csv = val;
    } else if (!strcmp(name, "--lib")) {
      o->lib = val;
    } else if (!strcmp(name, "--cublaslt")) {
      o->cublaslt = val;
    } else if (!strcmp(name, "--seed")) {
      o->seed = strtoull(val, NULL, 0);
    } else if (!strcmp(name, "--samples")) {
      o->samples = atoi(val);
      if (o->samples < 4 || o->samples > 100000) {
        fprintf(stderr, "bench_gemm: --samples must be in 4..100000\n");
        return 2;
      }
    } else if (!strcmp(name, "--budget-ms")) {
      budget = atof(val);
      if (!(budget > 0)) {
        fprintf(stderr, "bench_gemm: --budget-ms must be > 0\n");
        return 2;
      }
    } else if (!strcmp(name, "--max-reps")) {
      max_reps = atoi(val);
      if (max_reps < 1 || max_reps > MAX_REPS) {
        fprintf(stderr, "bench_gemm: --max-reps must be in 1..%d\n", MAX_REPS);
        return 2;
      }
    } else {
      fprintf(stderr, "bench_gemm: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!o->epi_on[EPI_NONE] && !o->epi_on[EPI_BIAS_GELU]) {
    fprintf(stderr, "bench_gemm: --epilogues selects nothing\n");
    return 2;
  }
  if (o->ncfgs == 0) parse_cfg("default", &o->cfgs[o->ncfgs++]);
  if (o->form != FORM_GEMM) { /* the other forms: no fused epilogue, no tf32 */
    o->epi_on[EPI_BIAS_GELU] = false;
    o->epi_on[EPI_NONE] = true;
    o->dtype_on[DT_TF32] = false;
  }
  o->warmup = o->quick ? 3 : 10;
  o->max_reps = o->quick ? 10 : MAX_REPS;
  o->min_reps = o->quick ? 5 : 20;
  o->budget_ms = o->quick ? 200 : 1000;
  if (budget > 0) o->budget_ms = budget;
  if (max_reps > 0) o->max_reps = max_reps;
  if (o->min_reps > o->max_reps) o->min_reps = o->max_reps;
  return 0;
}

/* ---- compiling our kernel ----------------------------------------------------------------- */

struct kcache_entry {
  int dt, epi, cfg;
  tile_device dev;
  tile_kernel *k;
  char err[1024];
};
enum { MAX_KERNELS = DT__COUNT * EPI__COUNT * MAX_CFGS * 2 };
static struct kcache_entry kcache[MAX_KERNELS];
static int nkcache;

/* Compiles (once) gemm for a dtype, an epilogue and a configuration. NULL on failure, with
 * the message in *msg. */
static tile_kernel *get_kernel(tile_context *ctx, const char *path, tile_device dev, int form, const char *arch,
                               int dt, int epi, const struct our_cfg *cfg, int cfg_index, const char **msg) {
  for (int i = 0; i < nkcache; i++) {
    struct kcache_entry *e = &kcache[i];
    if (e->dt == dt && e->epi == epi && e->cfg == cfg_index && e->dev == dev) {
      *msg = e->err;
      return e->k;
    }
  }
  struct kcache_entry *e = &kcache[nkcache++];
  memset(e, 0, sizeof *e);
  e->dt = dt;
  e->epi = epi;
  e->cfg = cfg_index;
  e->dev = dev;
  tile_define defs[4 + MAX_CFG_DEFS];
  unsigned nd = 0;
  defs[nd++] = (tile_define){"T", dt == DT_F16 ? "f16" : dt == DT_BF16 ? "bf16" : "f32"};
  if (form == FORM_GEMM) {
    defs[nd++] = (tile_define){"TF32", dt == DT_TF32 ? "true" : "false"};
    defs[nd++] = (tile_define){"ACT", epi == EPI_BIAS_GELU ? "gelu" : "none"};
    defs[nd++] = (tile_define){"HAS_BIAS", epi == EPI_BIAS_GELU ? "true" : "false"};
  }
  for (unsigned i = 0; i < cfg->ndefs; i++) defs[nd++] = cfg->defs[i];
  tile_compile_options co = {0};
  co.kernel = forms[form].kernel;
  if (dev == TILE_DEVICE_CUDA) co.arch = arch;
  co.defines = defs;
  co.ndefines = nd;
  co.device = dev;
  co.schedule = cfg->sched[0] ? cfg->sched : NULL;
  if (cfg->autoconfig == 1) co.flags |= TILE_AUTOCONFIG;
  if (cfg->autoconfig == 0) co.flags |= TILE_FIXED_CONFIG;
  tile_status st = tile_compile_file(ctx, path, &co, &e->k);
  if (st) {
    snprintf(e->err, sizeof e->err, "compiling %s [%s, %s, %s]: %s: %s", forms[form].kernel, dtypes[dt].name,
             epi_names[epi], cfg->text, tile_status_name(st), tile_errmsg(ctx));
    e->k = NULL;
  }
  *msg = e->err;
  return e->k;
}

/* "BM=128,BN=128,BK=32,STAGES=3,NW=4,GROUP_M=8,..." -> "128x128x32 s3 w4 g8". */
static void short_config(const char *full, char *out, size_t cap) {
  const char *keys[] = {"BM", "BN", "BK", "STAGES", "NW", "GROUP_M"};
  char v[6][16] = {"?", "?", "?", "?", "?", "?"};
  for (int i = 0; i < 6; i++) {
    size_t kl = strlen(keys[i]);
    for (const char *p = full; p && *p;) {
      if (strncmp(p, keys[i], kl) == 0 && p[kl] == '=') {
        const char *q = p + kl + 1;
        size_t n = strcspn(q, ",");
        if (n >= sizeof v[i]) n = sizeof v[i] - 1;
        memcpy(v[i], q, n);
        v[i][n] = 0;
        break;
      }
      p = strchr(p, ',');
      if (p) p++;
    }
  }
  snprintf(out, cap, "%.6sx%.6sx%.6s s%.6s w%.6s g%.6s", v[0], v[1], v[2], v[3], v[4], v[5]);
}

/* The arguments of the form's kernel; returns their number. */
static unsigned make_args(tile_arg args[7], int form, int dt, int64_t Bt, int64_t M, int64_t N, int64_t K, void *a,
                          void *b, void *c, void *bias, int epi) {
  tile_dtype t = dtypes[dt].tile;
  switch (form) {
  case FORM_LINEAR:
    args[0] = tile_arg_tensor(a, t, 2, (int64_t[]){M, K}, NULL);
    args[1] = tile_arg_tensor(b, t, 2, (int64_t[]){N, K}, NULL);
    args[2] = tile_arg_tensor(epi == EPI_BIAS_GELU ? bias : NULL, t, 1, (int64_t[]){N}, NULL);
    args[3] = tile_arg_tensor(c, t, 2, (int64_t[]){M, N}, NULL);
    return 4;
  case FORM_BMM_SHARED:
    args[0] = tile_arg_tensor(a, t, 3, (int64_t[]){Bt, M, K}, NULL);
    args[1] = tile_arg_tensor(b, t, 2, (int64_t[]){K, N}, NULL);
    args[2] = tile_arg_tensor(c, t, 3, (int64_t[]){Bt, M, N}, NULL);
    return 3;
  case FORM_SWIGLU:
    args[0] = tile_arg_tensor(a, t, 2, (int64_t[]){M, K}, NULL);
    args[1] = tile_arg_tensor(b, t, 2, (int64_t[]){N, K}, NULL);
    args[2] = tile_arg_tensor((char *)b + (size_t)(N * K) * dtypes[dt].size, t, 2, (int64_t[]){N, K}, NULL);
    args[3] = tile_arg_tensor(c, t, 2, (int64_t[]){M, N}, NULL);
    return 4;
  default:
    break;
  }
  args[0] = tile_arg_tensor(a, t, 2, (int64_t[]){M, K}, NULL);
  args[1] = tile_arg_tensor(b, t, 2, (int64_t[]){K, N}, NULL);
  args[2] = tile_arg_tensor(c, t, 2, (int64_t[]){M, N}, NULL);
  args[3] = tile_arg_tensor(epi == EPI_BIAS_GELU ? bias : NULL, t, 1, (int64_t[]){N}, NULL);
  args[4] = tile_arg_tensor(NULL, t, 2, (int64_t[]){M, N}, NULL); /* R: unused */
  args[5] = tile_arg_float(1.0);                                  /* alpha: unused */
  args[6] = tile_arg_float(0.0);                                  /* beta: unused */
  return 7;
}

/* ---- references and comparisons ----------------------------------------------------------- */

/* Host float64 reference of element (i, j) of the form's output (rows of a batch are
 * consecutive: bmm_shared is a GEMM of B*M rows). */
static double ref_elem(int form, int dt, const void *A, const void *B, const void *bias, int epi, int64_t N,
                       int64_t K, int64_t i, int64_t j) {
  double acc = 0, up = 0;
  switch (form) {
  case FORM_LINEAR:
    for (int64_t p = 0; p < K; p++)
      acc += load_elem(dt, A, (size_t)(i * K + p)) * load_elem(dt, B, (size_t)(j * K + p));
    break;
  case FORM_SWIGLU:
    for (int64_t p = 0; p < K; p++) {
      double x = load_elem(dt, A, (size_t)(i * K + p));
      acc += x * load_elem(dt, B, (size_t)(j * K + p));
      up += x * load_elem(dt, B, (size_t)((N + j) * K + p));
    }
    return acc / (1 + exp(-acc)) * up;
  default:
    for (int64_t p = 0; p < K; p++)
      acc += load_elem(dt, A, (size_t)(i * K + p)) * load_elem(dt, B, (size_t)(p * N + j));
  }
  if (epi == EPI_BIAS_GELU) acc = gelu_tanh(acc + load_elem(dt, bias, (size_t)j));
  return acc;
}

/* Relative L2 error of C against the host reference at `samples` elements (the four corners
 * and random ones). A NaN or infinity gives +inf. */
static double sampled_error(int form, int dt, const void *A, const void *B, const void *bias, int epi,
                            const void *C, int64_t M, int64_t N, int64_t K, int samples,
                            uint64_t seed) {
  struct rng r;
  rng_seed(&r, seed ^ 0xabcdefull);
  double e2 = 0, r2 = 0;
  for (int t = 0; t < samples; t++) {
    int64_t i, j;
    if (t < 4) {
      i = (t & 1) ? M - 1 : 0;
      j = (t & 2) ? N - 1 : 0;
    } else {
      i = (int64_t)rng_below(&r, (uint64_t)M);
      j = (int64_t)rng_below(&r, (uint64_t)N);
    }
    double want = ref_elem(form, dt, A, B, bias, epi, N, K, i, j);
    double got = load_elem(dt, C, (size_t)(i * N + j));
    if (!isfinite(got)) return INFINITY;
    e2 += (got - want) * (got - want);
    r2 += want * want;
  }
  return sqrt(e2 / (r2 > 0 ? r2 : 1));
}

struct cmp_result {
  double rel_l2, max_rel; /* ||x - y|| / ||y||, max |x - y| / max |y| */
  size_t nonfinite_x, nonfinite_y;
};

static void compare_full(int dt, const void *x, const void *y, size_t n, struct cmp_result *r) {
  double e2 = 0, r2 = 0, emax = 0, ymax = 0;
  memset(r, 0, sizeof *r);
  for (size_t i = 0; i < n; i++) {
    double a = load_elem(dt, x, i), b = load_elem(dt, y, i);
    bool fa = isfinite(a), fb = isfinite(b);
    if (!fa) r->nonfinite_x++;
    if (!fb) r->nonfinite_y++;
    if (!fa || !fb) continue;
    double d = fabs(a - b);
    e2 += d * d;
    r2 += b * b;
    if (d > emax) emax = d;
    if (fabs(b) > ymax) ymax = fabs(b);
  }
  r->rel_l2 = (r->nonfinite_x || r->nonfinite_y) ? INFINITY : sqrt(e2 / (r2 > 0 ? r2 : 1));
  r->max_rel = (r->nonfinite_x || r->nonfinite_y) ? INFINITY : emax / (ymax > 0 ? ymax : 1);
}

/* ---- timing ------------------------------------------------------------------------------- */

struct timer {
  bool host; /* --dry-run-cpu: a host clock, no events and no flush */
  struct rt_cuda *cu;
  CUevent ev[2 * MAX_REPS + 2];
  int nev;
  CUdeviceptr flush;
  size_t flush_bytes;
  CUstream stream;
  int warmup, max_reps, min_reps;
  double budget_ms;
};

typedef int (*launch_fn)(void *ud, char *err, size_t errlen);

struct timing {
  double median_ms, min_ms;
  int reps;
};

/* Times fn as described at the top of the file. Returns 0 or nonzero with err set. */
static int time_launches(struct timer *tm, launch_fn fn, void *ud, struct timing *out, char *err,
                         size_t errlen) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < tm->warmup; i++)
    if (fn(ud, err, errlen)) return 1;
  double t[MAX_REPS];
  if (tm->host) {
    double start = tl_now_ms();
    int n = 0;
    while (n < tm->max_reps && (n < tm->min_reps || tl_now_ms() - start < tm->budget_ms)) {
      double t0 = tl_now_ms();
      if (fn(ud, err, errlen)) return 1;
      t[n++] = tl_now_ms() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    out->median_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    out->min_ms = t[0];
    out->reps = n;
    return 0;
  }
  if (rt_cuda_stream_sync(tm->cu, tm->stream, err, errlen)) return 1;
  /* estimate one run (flushed, like the timed ones) to fit the budget */
  float est = 0;
  if (rt_cuda_memset32_async(tm->cu, tm->flush, 0x3f800000u, tm->flush_bytes / 4, tm->stream, err, errlen) ||
      rt_cuda_event_record(tm->cu, tm->ev[0], tm->stream, err, errlen) || fn(ud, err, errlen) ||
      rt_cuda_event_record(tm->cu, tm->ev[1], tm->stream, err, errlen) ||
      rt_cuda_event_elapsed(tm->cu, tm->ev[0], tm->ev[1], &est, err, errlen))
    return 1;
  double per = (est > 0.001f ? est : 0.001) + 0.1; /* + the flush */
  int reps = (int)(tm->budget_ms / per);
  if (reps < tm->min_reps) reps = tm->min_reps;
  if (reps > tm->max_reps) reps = tm->max_reps;
  if (reps < 1) reps = 1;
  for (int i = 0; i < reps; i++) {
    if (rt_cuda_memset32_async(tm->cu, tm->flush, (uint32_t)i, tm->flush_bytes / 4, tm->stream, err, errlen) ||
        rt_cuda_event_record(tm->cu, tm->ev[2 * i], tm->stream, err, errlen) || fn(ud, err, errlen) ||
        rt_cuda_event_record(tm->cu, tm->ev[2 * i + 1], tm->stream, err, errlen))
      return 1;
  }
  if (rt_cuda_stream_sync(tm->cu, tm->stream, err, errlen)) return 1;
  for (int i = 0; i < reps; i++) {
    float ms = 0;
    if (rt_cuda_event_elapsed(tm->cu, tm->ev[2 * i], tm->ev[2 * i + 1], &ms, err, errlen)) return 1;
    t[i] = ms;
  }
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  out->median_ms = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  out->min_ms = t[0];
  out->reps = reps;
  return 0;
}

struct our_call {
  tile_context *ctx;
  tile_kernel *k;
  tile_arg args[7];
  unsigned nargs;
  tile_launch_options lo;
};
static int launch_ours(void *ud, char *err, size_t errlen) {
  struct our_call *c = ud;
  tile_status st = tile_launch(c->ctx, c->k, c->args, c->nargs, &c->lo);
  if (st) snprintf(err, errlen, "tile_launch: %s: %s", tile_status_name(st), tile_errmsg(c->ctx));
  return st != TILE_OK;
}

struct lt_call {
  const struct lt_api *lt;
  lt_handle h;
  lt_matmul_desc desc;
  lt_layout la, lb, lc;
  lt_algo algo;
  const void *a, *b; /* cuBLASLt's operands: our B, our A */
  void *d;
  void *ws;
  size_t ws_bytes;
  float alpha, beta;
  CUstream stream;
};
static int launch_lt(void *ud, char *err, size_t errlen) {
  struct lt_call *c = ud;
  int st = c->lt->Matmul(c->h, c->desc, &c->alpha, c->a, c->la, c->b, c->lb, &c->beta, c->d, c->lc,
                         c->d, c->lc, &c->algo, c->ws, c->ws_bytes, c->stream);
  if (st != LT_STATUS_SUCCESS) snprintf(err, errlen, "cublasLtMatmul: %s", lt_status_str(c->lt, st));
  return st != LT_STATUS_SUCCESS;
}

static void lt_call_destroy(struct lt_call *c) {
  if (!c->lt) return;
  if (c->desc) c->lt->MatmulDescDestroy(c->desc);
  if (c->la) c->lt->MatrixLayoutDestroy(c->la);
  if (c->lb) c->lt->MatrixLayoutDestroy(c->lb);
  if (c->lc) c->lt->MatrixLayoutDestroy(c->lc);
  c->desc = NULL;
  c->la = c->lb = c->lc = NULL;
}

/* Builds the descriptors for C[M,N] (row-major) = A[M,K] @ B[K,N] (+ bias, GELU) as the
 * column-major C^T = B^T A^T. With h == NULL it stops before the heuristic (--selftest).
 * Returns 0, or nonzero with err set (e.g. no algorithm for this case). */
/* tn: B is stored N x K (row-major W of nn.Linear): cuBLASLt's A operand is transposed. */
static int lt_setup(struct lt_call *c, const struct lt_api *lt, lt_handle h, int dt, int epi, bool tn,
                    int64_t M, int64_t N, int64_t K, const void *A, const void *B, const void *bias,
                    void *C, void *ws, size_t ws_bytes, CUstream stream, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  c->lt = lt;
  c->h = h;
  c->a = B;
  c->b = A;
  c->d = C;
  c->ws = ws;
  c->ws_bytes = ws_bytes;
  c->alpha = 1.0f;
  c->beta = 0.0f;
  c->stream = stream;
  int type = dtypes[dt].lt_type, st;
  int32_t op = LT_OP_N;
  uint32_t epilogue = epi == EPI_BIAS_GELU ? LT_EPILOGUE_GELU_BIAS : LT_EPILOGUE_DEFAULT;
#define LT_TRY(what, call)                                                                  \
  do {                                                                                      \
    if ((st = (call)) != LT_STATUS_SUCCESS) {                                               \
      snprintf(err, errlen, "%s: %s", what, lt_status_str(lt, st));                         \
      lt_call_destroy(c);                                                                   \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
  LT_TRY("cublasLtMatmulDescCreate", lt->MatmulDescCreate(&c->desc, dtypes[dt].lt_compute, LT_R_32F));
  int32_t opa = tn ? LT_OP_T : LT_OP_N;
  LT_TRY("set TRANSA", lt->MatmulDescSetAttribute(c->desc, LT_DESC_TRANSA, &opa, sizeof opa));
  LT_TRY("set TRANSB", lt->MatmulDescSetAttribute(c->desc, LT_DESC_TRANSB, &op, sizeof op));
  LT_TRY("set EPILOGUE", lt->MatmulDescSetAttribute(c->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (epi == EPI_BIAS_GELU)
    LT_TRY("set BIAS_POINTER", lt->MatmulDescSetAttribute(c->desc, LT_DESC_BIAS_POINTER, &bias, sizeof bias));
  /* column-major views: our B is N x K (ld N) (tn: K x N, ld K, transposed), our A is K x M
   * (ld K), C is N x M (ld N) */
  if (tn)
    LT_TRY("layout of B", lt->MatrixLayoutCreate(&c->la, type, (uint64_t)K, (uint64_t)N, K));
  else
    LT_TRY("layout of B", lt->MatrixLayoutCreate(&c->la, type, (uint64_t)N, (uint64_t)K, N));
  LT_TRY("layout of A", lt->MatrixLayoutCreate(&c->lb, type, (uint64_t)K, (uint64_t)M, K));
  LT_TRY("layout of C", lt->MatrixLayoutCreate(&c->lc, type, (uint64_t)N, (uint64_t)M, N));
  if (!h) return 0;
  lt_pref pref = NULL;
  uint64_t wsb = ws_bytes;
  LT_TRY("cublasLtMatmulPreferenceCreate", lt->MatmulPreferenceCreate(&pref));
  st = lt->MatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  lt_heuristic res[1];
  memset(res, 0, sizeof res);
  int got = 0;
  if (st == LT_STATUS_SUCCESS)
    st = lt->MatmulAlgoGetHeuristic(h, c->desc, c->la, c->lb, c->lc, c->lc, pref, 1, res, &got);
  lt->MatmulPreferenceDestroy(pref);
  LT_TRY("cublasLtMatmulAlgoGetHeuristic", st);
  if (got < 1 || res[0].state != LT_STATUS_SUCCESS) {
    snprintf(err, errlen, "cublasLtMatmulAlgoGetHeuristic returned no algorithm (%d, state %s)", got,
             lt_status_str(lt, res[0].state));
    lt_call_destroy(c);
    return 1;
  }
  c->algo = res[0].algo;
#undef LT_TRY
  return 0;
}

/* --dry-run-cpu: a naive host GEMM (same epilogue, output rounded to the dtype) standing in
 * for cuBLASLt; pointers are host memory there. */
struct host_call {
  int form, dt, epi;
  int64_t M, N, K;
  const void *A, *B, *bias;
  void *C;
};
static int launch_host(void *ud, char *err, size_t errlen) {
  (void)err, (void)errlen;
  struct host_call *c = ud;
  for (int64_t i = 0; i < c->M; i++)
    for (int64_t j = 0; j < c->N; j++) {
      double v = ref_elem(c->form, c->dt, c->A, c->B, c->bias, c->epi, c->N, c->K, i, j);
      size_t at = (size_t)(i * c->N + j);
      if (c->dt == DT_F16) ((uint16_t *)c->C)[at] = f16_from_float((float)v);
      else if (c->dt == DT_BF16) ((uint16_t *)c->C)[at] = bf16_from_float((float)v);
      else ((float *)c->C)[at] = (float)v;
    }
  return 0;
}

/* ---- rows and output ---------------------------------------------------------------------- */

struct row {
  int64_t M, N, K, B;
  int form, dt, epi, cfg;
  char config[64], config_full[512];
  double ours_ms, lt_ms;
  int ours_reps, lt_reps;
  double rel_l2, max_rel, ref_ours, ref_lt;
  int regs, local_bytes;
  bool lt_ok, ours_ok, fail;
  char note[1024];
};

static struct row *rows;
static int nrows, caprows;

static struct row *new_row(void) {
  if (nrows == caprows) {
    int cap = caprows ? 2 * caprows : 64;
    struct row *r = realloc(rows, (size_t)cap * sizeof *r);
    if (!r) return NULL;
    rows = r;
    caprows = cap;
  }
  struct row *r = &rows[nrows++];
  memset(r, 0, sizeof *r);
  r->rel_l2 = r->max_rel = r->ref_ours = r->ref_lt = NAN;
  r->regs = r->local_bytes = -1;
  return r;
}

static double tflops(const struct row *r, double ms) {
  double flops = 2.0 * (double)r->B * (double)r->M * (double)r->N * (double)r->K * forms[r->form].weights;
  return ms > 0 ? flops / (ms * 1e-3) / 1e12 : NAN;
}

static void fmt_num(char *buf, size_t cap, const char *fmt_kind, double v) {
  if (isnan(v))
    snprintf(buf, cap, "n/a");
  else if (!strcmp(fmt_kind, "e"))
    snprintf(buf, cap, "%.2e", v);
  else if (!strcmp(fmt_kind, "3"))
    snprintf(buf, cap, "%.3f", v);
  else
    snprintf(buf, cap, "%.1f", v);
}

/* The device's dense f16 Tensor Core peak (tile_device_info; TF32 runs at half of it on
 * A100 and H100), for the "% peak" column; 0 when unknown. */
static double peak_f16_tflops;

static void print_row(FILE *f, const struct row *r) {
  char shape[48], t1[16], t2[16], ratio[16], e1[16], e2[16], e3[16], e4[16], rl[24], pk[16];
  if (r->B > 1)
    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)r->B, (long long)r->M, (long long)r->N,
             (long long)r->K);
  else
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)r->M, (long long)r->N, (long long)r->K);
  double to = r->ours_ok ? tflops(r, r->ours_ms) : NAN, tl = r->lt_ok ? tflops(r, r->lt_ms) : NAN;
  fmt_num(t1, sizeof t1, "1", to);
  fmt_num(t2, sizeof t2, "1", tl);
  double peak = peak_f16_tflops * (dtypes[r->dt].tile == TILE_F32 ? 0.5 : 1.0);
  fmt_num(pk, sizeof pk, "1", peak > 0 ? 100 * to / peak : NAN);
  fmt_num(ratio, sizeof ratio, "3", (r->ours_ok && r->lt_ok) ? r->lt_ms / r->ours_ms : NAN);
  fmt_num(e1, sizeof e1, "e", r->rel_l2);
  fmt_num(e2, sizeof e2, "e", r->max_rel);
  fmt_num(e3, sizeof e3, "e", r->ref_ours);
  fmt_num(e4, sizeof e4, "e", r->ref_lt);
  if (r->regs >= 0)
    snprintf(rl, sizeof rl, "%d/%d", r->regs, r->local_bytes);
  else
    snprintf(rl, sizeof rl, "n/a");
  fprintf(f, "%-16s %-5s %-9s %8s %6s %9s %7s %9s %9s %9s %9s  %-22s %-8s %s%s%s\n", shape,
          dtypes[r->dt].name, epi_names[r->epi], t1, pk, t2, ratio, e1, e2, e3, e4, r->config, rl,
          r->fail ? "FAIL" : "ok", r->note[0] ? ": " : "", r->note);
}

static void print_header(FILE *f) {
  fprintf(f, "%-16s %-5s %-9s %8s %6s %9s %7s %9s %9s %9s %9s  %-22s %-8s %s\n", "shape MxNxK", "dtype",
          "epilogue", "ours", "ours", "cuBLASLt", "ours/", "relL2", "maxdiff/", "ref_err", "ref_err",
          "our config", "regs/", "status");
  fprintf(f, "%-16s %-5s %-9s %8s %6s %9s %7s %9s %9s %9s %9s  %-22s %-8s\n", "", "", "", "TFLOP/s", "%peak",
          "TFLOP/s", "cuBLAS", "vs cuBLAS", "max|cuB|", "ours", "cuBLASLt", "BMxBNxBK stages warps group",
          "local B");
}

static void csv_row(FILE *f, const struct row *r) {
  if (!f) return;
  char note[1024];
  size_t j = 0;
  for (size_t i = 0; r->note[i] && j + 2 < sizeof note; i++) note[j++] = r->note[i] == '"' ? '\'' : r->note[i];
  note[j] = 0;
  fprintf(f, "%lld,%lld,%lld,%s,%s,\"%s\",%.6f,%.3f,%d,%.6f,%.3f,%d,%.5f,%.3e,%.3e,%.3e,%.3e,%d,%d,%s,\"%s\"\n",
          (long long)r->M, (long long)r->N, (long long)r->K, dtypes[r->dt].name, epi_names[r->epi],
          r->config_full, r->ours_ok ? r->ours_ms : NAN, r->ours_ok ? tflops(r, r->ours_ms) : NAN,
          r->ours_reps, r->lt_ok ? r->lt_ms : NAN, r->lt_ok ? tflops(r, r->lt_ms) : NAN, r->lt_reps,
          (r->ours_ok && r->lt_ok) ? r->lt_ms / r->ours_ms : NAN, r->rel_l2, r->max_rel, r->ref_ours,
          r->ref_lt, r->regs, r->local_bytes, r->fail ? "FAIL" : "ok", note);
  fflush(f);
}

static void note_add(struct row *r, const char *msg) {
  size_t used = strlen(r->note);
  snprintf(r->note + used, sizeof r->note - used, "%s%s", used ? "; " : "", msg);
}

/* ---- the CPU self-test -------------------------------------------------------------------- */

/* Our GEMM on the interpreter against the host reference (every element), and cuBLASLt's
 * descriptors built without a GPU. Returns the number of failures. */
static int selftest(tile_context *ctx, const char *path, const struct options *o) {
  int fails = 0;
  static const struct shape sh[] = {{37, 45, 29, 1}, {64, 32, 48, 2}};
  int form = o->form;
  /* conversions: every f16 and bf16 value must survive float and back (NaN stays NaN) */
  for (uint32_t h = 0; h < 65536; h++) {
    float f = f16_to_float((uint16_t)h), g = bf16_to_float((uint16_t)h);
    uint16_t h2 = f16_from_float(f), g2 = bf16_from_float(g);
    if (isnan(f) ? !isnan(f16_to_float(h2)) : h2 != h) {
      printf("selftest: f16 round trip of 0x%04x gave 0x%04x\n", (unsigned)h, (unsigned)h2);
      fails++;
      break;
    }
    if (isnan(g) ? !isnan(bf16_to_float(g2)) : g2 != h) {
      printf("selftest: bf16 round trip of 0x%04x gave 0x%04x\n", (unsigned)h, (unsigned)g2);
      fails++;
      break;
    }
  }
  /* rounding between representable values: halfway cases go to even */
  if (f16_from_float(1.0f + 1.0f / 2048) != 0x3c00 || f16_from_float(1.0f + 3.0f / 2048) != 0x3c02 ||
      f16_from_float(65520.0f) != 0x7c00 || f16_from_float(65519.0f) != 0x7bff ||
      f16_from_float(ldexpf(1.0f, -25)) != 0 || f16_from_float(ldexpf(3.0f, -25)) != 2 ||
      bf16_from_float(1.0f + 1.0f / 256) != 0x3f80 || bf16_from_float(1.0f + 3.0f / 256) != 0x3f82) {
    printf("selftest: rounding of halfway cases is wrong\n");
    fails++;
  }
  printf("selftest: f16/bf16 conversions %s\n", fails ? "FAIL" : "ok");

  for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++)
    for (int dt = 0; dt < DT__COUNT; dt++)
      for (int epi = 0; epi < EPI__COUNT; epi++)
        for (int ci = 0; ci < o->ncfgs; ci++) {
          if (!o->dtype_on[dt] || !o->epi_on[epi]) continue;
          int64_t Bt = form == FORM_BMM_SHARED ? sh[si].B : 1;
          int64_t M = sh[si].M, N = sh[si].N, K = sh[si].K, MR = Bt * M; /* rows of the output */
          size_t es = dtypes[dt].size;
          const char *msg = "";
          tile_kernel *k = get_kernel(ctx, path, TILE_DEVICE_CPU, form, NULL, dt, epi, &o->cfgs[ci], ci, &msg);
          if (!k) {
            printf("selftest: %s\n", msg);
            fails++;
            continue;
          }
          size_t nbw = (size_t)(K * N) * (size_t)forms[form].weights;
          void *A = malloc((size_t)(MR * K) * es), *B = malloc(nbw * es), *bias = malloc((size_t)N * es),
               *C = malloc((size_t)(MR * N) * es);
          if (!A || !B || !bias || !C) {
            printf("selftest: out of memory\n");
            free(A), free(B), free(bias), free(C);
            return fails + 1;
          }
          fill_random(dt, A, (size_t)(MR * K), o->seed * 31 + si * 7 + 1);
          fill_random(dt, B, nbw, o->seed * 31 + si * 7 + 2);
          fill_random(dt, bias, (size_t)N, o->seed * 31 + si * 7 + 3);
          memset(C, 0xff, (size_t)(MR * N) * es);
          tile_arg args[7];
          unsigned na = make_args(args, form, dt, Bt, M, N, K, A, B, C, bias, epi);
          tile_status st = tile_launch(ctx, k, args, na, NULL);
          double e2 = 0, r2 = 0;
          size_t bad = 0;
          if (!st) {
            for (int64_t i = 0; i < MR; i++)
              for (int64_t j = 0; j < N; j++) {
                double want = ref_elem(form, dt, A, B, bias, epi, N, K, i, j);
                double got = load_elem(dt, C, (size_t)(i * N + j));
                if (!isfinite(got)) {
                  bad++;
                  continue;
                }
                e2 += (got - want) * (got - want);
                r2 += want * want;
              }
          }
          double rel = sqrt(e2 / (r2 > 0 ? r2 : 1));
          bool ok = !st && !bad && rel < dtypes[dt].tol;
          /* the sampled check the GPU path uses must agree with the full one */
          double samp = st ? NAN : sampled_error(form, dt, A, B, bias, epi, C, MR, N, K, 64, o->seed);
          if (!st && !bad && !(samp < dtypes[dt].tol)) ok = false;
          tile_kernel_stats ks;
          memset(&ks, 0, sizeof ks);
          tile_kernel_get_stats(k, &ks);
          printf("selftest: cpu %s %lldx%lldx%lldx%lld %-4s %-9s [%s] rel err %.2e (sampled %.2e)"
                 " grid %ux%ux%u: %s%s%s\n",
                 forms[form].name, (long long)Bt, (long long)M, (long long)N, (long long)K, dtypes[dt].name, epi_names[epi], o->cfgs[ci].text,
                 rel, samp, ks.grid[0], ks.grid[1], ks.grid[2], ok ? "ok" : "FAIL",
                 st ? " launch: " : "", st ? tile_errmsg(ctx) : "");
          if (bad) printf("selftest:   %zu elements unwritten or not finite\n", bad);
          fails += !ok;
          free(A), free(B), free(bias), free(C);
        }

  /* cuBLASLt: load it and build every descriptor the GPU path builds (no handle needed) */
  struct lt_api lt;
  char err[2048];
  if (lt_load(&lt, o->cublaslt, err, sizeof err)) {
    printf("selftest: cuBLASLt not loadable here (not counted as a failure): %s\n", err);
  } else {
    size_t v = lt.GetVersion();
    printf("selftest: cuBLASLt %zu from %s\n", v, lt.path);
    int lt_fails = 0;
    for (int dt = 0; dt < DT__COUNT; dt++)
      for (int epi = 0; epi < EPI__COUNT; epi++) {
        struct lt_call c;
        int dummy;
        if (lt_setup(&c, &lt, NULL, dt, epi, form == FORM_LINEAR || form == FORM_SWIGLU, 4095, 8192, 1000, &dummy,
                     &dummy, &dummy, &dummy, NULL, 0, NULL, err, sizeof err)) {
          printf("selftest: cuBLASLt descriptors for %s %s: %s\n", dtypes[dt].name, epi_names[epi], err);
          lt_fails++;
        }
        lt_call_destroy(&c);
      }
    lt_pref pref = NULL;
    uint64_t wsb = 32u << 20;
    int st = lt.MatmulPreferenceCreate(&pref);
    if (st == LT_STATUS_SUCCESS)
      st = lt.MatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (pref) lt.MatmulPreferenceDestroy(pref);
    if (st != LT_STATUS_SUCCESS) {
      printf("selftest: cuBLASLt preference: %s\n", lt_status_str(&lt, st));
      lt_fails++;
    }
    lt_handle h = NULL;
    st = lt.Create(&h);
    printf("selftest: cublasLtCreate without a GPU: %s (informational)\n", lt_status_str(&lt, st));
    if (st == LT_STATUS_SUCCESS && h) lt.Destroy(h);
    printf("selftest: cuBLASLt descriptors and attributes %s\n", lt_fails ? "FAIL" : "ok");
    fails += lt_fails;
    dlclose(lt.lib);
  }
  return fails;
}

/* ---- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct options o;
  int pr = parse_args(argc, argv, &o);
  if (pr == 1) return 0;
  if (pr) return 2;

  char libdir[4096], path[4200];
  if (!find_lib(o.lib, libdir, sizeof libdir)) {
    fprintf(stderr, "bench_gemm: cannot find gemm.tile (looked in --lib, $TILE_LIB_DIR, ./lib and"
                    " <exe>/../lib); run from the repository root or pass --lib DIR\n");
    return 1;
  }
  snprintf(path, sizeof path, "%s/%s", libdir, forms[o.form].file);

  tile_context *ctx = NULL;
  if (tile_context_create(NULL, &ctx) != TILE_OK) {
    fprintf(stderr, "bench_gemm: cannot create a tile context\n");
    return 1;
  }
  printf("bench_gemm: %s; kernels from %s\n", tile_version(), path);

  if (o.selftest) {
    int f = selftest(ctx, path, &o);
    printf("selftest: %s (%d failure%s)\n", f ? "FAIL" : "PASS", f, f == 1 ? "" : "s");
    tile_context_destroy(ctx);
    return f ? 1 : 0;
  }

  tile_device_info info;
  const tile_device dev = o.dry_run_cpu ? TILE_DEVICE_CPU : TILE_DEVICE_CUDA;
  if (tile_device_query(ctx, dev, &info) != TILE_OK) {
    printf("bench_gemm: SKIP: no CUDA GPU available (%s)\n", tile_errmsg(ctx));
    tile_context_destroy(ctx);
    return 77;
  }
  if (o.dry_run_cpu)
    printf("bench_gemm: DRY RUN on the CPU interpreter: 'cuBLASLt' is a naive host GEMM, times are"
           " host-clock and meaningless\n");
  printf("device: %s, sm_%d%d, %d SMs, driver %d, target %s\n", info.name, info.cc_major, info.cc_minor,
         info.sm_count, info.driver_version, info.arch);
  peak_f16_tflops = info.peak_tc_f16_tflops;
  if (peak_f16_tflops > 0)
    printf("peaks: dense f16 Tensor Core %.0f TFLOP/s at %d MHz, memory %.0f GB/s (%%peak: ours against it;"
           " tf32 rows against half)\n", peak_f16_tflops, info.clock_mhz, info.peak_mem_gbps);

  int exit_code = 0;
  char err[4096];
  struct rt_cuda cu;
  struct rt_cuda_device cdev;
  bool cu_loaded = false, cdev_open = false;
  struct lt_api lt;
  memset(&lt, 0, sizeof lt);
  lt_handle lth = NULL;
  bool have_lt = false;
  void *d_ws = NULL, *d_flush = NULL;
  size_t ws_bytes = 32u << 20, flush_bytes = 256u << 20;
  struct timer tm;
  memset(&tm, 0, sizeof tm);
  FILE *csv = NULL;
  tile_status st;

  memset(&cu, 0, sizeof cu);
  if (o.dry_run_cpu) goto skip_cuda;
  /* our own handle on the driver, for events and the memset (same primary context) */
  if (rt_cuda_load(&cu, err, sizeof err)) {
    fprintf(stderr, "bench_gemm: loading the CUDA driver for events: %s\n", err);
    exit_code = 1;
    goto out;
  }
  cu_loaded = true;
  if (rt_cuda_device_open(&cu, 0, &cdev, err, sizeof err)) {
    fprintf(stderr, "bench_gemm: opening device 0: %s\n", err);
    exit_code = 1;
    goto out;
  }
  cdev_open = true;

  if (lt_load(&lt, o.cublaslt, err, sizeof err)) {
    fprintf(stderr, "bench_gemm: WARNING: %s\nbench_gemm: running our kernel alone (checked against"
                    " the host reference); exit status 3 at the end\n", err);
  } else {
    int s = lt.Create(&lth);
    if (s != LT_STATUS_SUCCESS) {
      fprintf(stderr, "bench_gemm: WARNING: cublasLtCreate: %s; running our kernel alone\n", lt_status_str(&lt, s));
      lth = NULL;
    } else {
      have_lt = true;
      printf("cuBLASLt: version %zu from %s\n", lt.GetVersion(), lt.path);
    }
  }

#define GTRY(what, call)                                                                     \
  do {                                                                                       \
    if ((st = (call)) != TILE_OK) {                                                          \
      fprintf(stderr, "bench_gemm: %s: %s: %s\n", what, tile_status_name(st), tile_errmsg(ctx)); \
      exit_code = 1;                                                                         \
      goto out;                                                                              \
    }                                                                                        \
  } while (0)

  GTRY("workspace", tile_mem_alloc(ctx, dev, ws_bytes, &d_ws));
  GTRY("L2 flush buffer", tile_mem_alloc(ctx, dev, flush_bytes, &d_flush));
skip_cuda:
  tm.host = o.dry_run_cpu;
  tm.cu = &cu;
  tm.flush = (CUdeviceptr)(uintptr_t)d_flush;
  tm.flush_bytes = flush_bytes;
  tm.stream = NULL; /* the legacy default stream, for both libraries */
  tm.warmup = o.warmup;
  tm.max_reps = o.max_reps;
  tm.min_reps = o.min_reps;
  tm.budget_ms = o.budget_ms;
  for (tm.nev = 0; !tm.host && tm.nev < 2 * o.max_reps + 2; tm.nev++)
    if (rt_cuda_event_create(&cu, CU_EVENT_DEFAULT, &tm.ev[tm.nev], err, sizeof err)) {
      fprintf(stderr, "bench_gemm: %s\n", err);
      exit_code = 1;
      goto out;
    }
  if (tm.host)
    printf("timing: host clock (dry run), warm-up %d, up to %d runs, median\n", o.warmup, o.max_reps);
  else
    printf("timing: warm-up %d, then up to %d runs (at least %d unless past %.0f ms), each after a"
           " %zu MiB memset that flushes L2, CUDA events, median\n",
           o.warmup, o.max_reps, o.min_reps, o.budget_ms, flush_bytes >> 20);

  if (o.csv) {
    csv = fopen(o.csv, "w");
    if (!csv) {
      fprintf(stderr, "bench_gemm: cannot write %s\n", o.csv);
      exit_code = 1;
      goto out;
    }
    fprintf(csv, "M,N,K,dtype,epilogue,our_config,ours_ms,ours_tflops,ours_reps,cublaslt_ms,"
                 "cublaslt_tflops,cublaslt_reps,ours_over_cublaslt,rel_l2_vs_cublaslt,maxdiff_over_max,"
                 "ref_err_ours,ref_err_cublaslt,registers,local_bytes,status,note\n");
  }

  const struct shape *shapes = o.nshapes ? o.shapes : default_shapes;
  int nshapes = o.nshapes ? o.nshapes : (int)(sizeof default_shapes / sizeof default_shapes[0]);
  print_header(stdout);

  const int form = o.form;
  const bool tn = form == FORM_LINEAR || form == FORM_SWIGLU; /* weights stored [N, K] */
  for (int si = 0; si < nshapes; si++) {
    int64_t M = shapes[si].M, N = shapes[si].N, K = shapes[si].K;
    int64_t Bt = form == FORM_BMM_SHARED ? shapes[si].B : 1;
    /* the rows of our output, and the cuBLASLt equivalent: one GEMM of MR x NL x K */
    int64_t MR = Bt * M, NL = N * forms[form].weights;
    for (int dt = 0; dt < DT__COUNT; dt++) {
      if (!o.dtype_on[dt]) continue;
      /* tf32 by default only for 4096^3 (the brief's "one shape"); --dtypes selects it anywhere */
      if (dt == DT_TF32 && !o.dtypes_given && !(M == 4096 && N == 4096 && K == 4096)) continue;
      size_t es = dtypes[dt].size;
      size_t na = (size_t)(MR * K), nb = (size_t)(K * NL), nc = (size_t)(MR * N), nl = (size_t)(MR * NL);
      void *hA = malloc(na * es), *hB = malloc(nb * es), *hbias = malloc((size_t)N * es);
      void *hO = malloc(nc * es), *hL = malloc(nl * es), *hO2 = malloc(nc * es);
      void *dA = NULL, *dB = NULL, *dbias = NULL, *dO = NULL, *dL = NULL;
      bool fatal = false;
      if (!hA || !hB || !hbias || !hO || !hL || !hO2) {
        fprintf(stderr, "bench_gemm: out of host memory for %lldx%lldx%lld\n", (long long)M, (long long)N,
                (long long)K);
        exit_code = 1;
        fatal = true;
        goto next_dtype;
      }
      uint64_t seed = o.seed * 1000003ull + (uint64_t)si * 101 + (uint64_t)dt * 7;
      fill_random(dt, hA, na, seed + 1);
      fill_random(dt, hB, nb, seed + 2);
      fill_random(dt, hbias, (size_t)N, seed + 3);
      if ((st = tile_mem_alloc(ctx, dev, na * es, &dA)) ||
          (st = tile_mem_alloc(ctx, dev, nb * es, &dB)) ||
          (st = tile_mem_alloc(ctx, dev, (size_t)N * es, &dbias)) ||
          (st = tile_mem_alloc(ctx, dev, nc * es, &dO)) ||
          (st = tile_mem_alloc(ctx, dev, nl * es, &dL)) ||
          (st = tile_mem_upload(ctx, dev, dA, hA, na * es)) ||
          (st = tile_mem_upload(ctx, dev, dB, hB, nb * es)) ||
          (st = tile_mem_upload(ctx, dev, dbias, hbias, (size_t)N * es))) {
        fprintf(stderr, "bench_gemm: device buffers for %lldx%lldx%lld %s: %s: %s\n", (long long)M,
                (long long)N, (long long)K, dtypes[dt].name, tile_status_name(st), tile_errmsg(ctx));
        exit_code = 1;
        fatal = true;
        goto next_dtype;
      }

      for (int epi = 0; epi < EPI__COUNT && !fatal; epi++) {
        if (!o.epi_on[epi]) continue;
        /* cuBLASLt once per (shape, dtype, epilogue): check and time */
        bool lt_ok = false;
        double lt_ms = NAN, ref_lt = NAN;
        int lt_reps = 0;
        char lt_note[1024] = "";
        struct lt_call lc;
        memset(&lc, 0, sizeof lc);
        if (o.dry_run_cpu) {
          int lform = tn ? FORM_LINEAR : FORM_GEMM;
          struct host_call hc = {lform, dt, epi, MR, NL, K, hA, hB, hbias, hL};
          struct timing t;
          memset(hL, 0xff, nl * es);
          launch_host(&hc, err, sizeof err);
          ref_lt = sampled_error(lform, dt, hA, hB, hbias, epi, hL, MR, NL, K, o.samples, seed);
          if (time_launches(&tm, launch_host, &hc, &t, err, sizeof err) == 0) {
            lt_ok = true;
            lt_ms = t.median_ms;
            lt_reps = t.reps;
          }
        } else if (have_lt) {
          err[0] = 0;
          if (lt_setup(&lc, &lt, lth, dt, epi, tn, MR, NL, K, dA, dB, dbias, dL, d_ws, ws_bytes, NULL, err,
                       sizeof err)) {
            snprintf(lt_note, sizeof lt_note, "cuBLASLt n/a: %.900s", err);
          } else if (tile_mem_fill(ctx, dev, dL, 0xff, nl * es) || launch_lt(&lc, err, sizeof err) ||
                     tile_synchronize(ctx, dev) ||
                     tile_mem_download(ctx, dev, hL, dL, nl * es)) {
            snprintf(lt_note, sizeof lt_note, "cuBLASLt run failed: %.900s", err[0] ? err : tile_errmsg(ctx));
            fatal = strstr(lt_note, "CUDA_ERROR") != NULL; /* a fault poisons the context */
          } else {
            ref_lt = sampled_error(tn ? FORM_LINEAR : FORM_GEMM, dt, hA, hB, hbias, epi, hL, MR, NL, K, o.samples, seed);
            struct timing t;
            if (time_launches(&tm, launch_lt, &lc, &t, err, sizeof err)) {
              snprintf(lt_note, sizeof lt_note, "cuBLASLt timing failed: %.900s", err);
              fatal = strstr(err, "CUDA_ERROR") != NULL;
            } else {
              lt_ok = true;
              lt_ms = t.median_ms;
              lt_reps = t.reps;
            }
          }
          lt_call_destroy(&lc);
        }

        for (int ci = 0; ci < o.ncfgs && !fatal; ci++) {
          struct row *r = new_row();
          if (!r) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            exit_code = 1;
            fatal = true;
            break;
          }
          r->M = M, r->N = N, r->K = K, r->B = Bt, r->form = form, r->dt = dt, r->epi = epi, r->cfg = ci;
          r->lt_ok = lt_ok;
          r->lt_ms = lt_ms;
          r->lt_reps = lt_reps;
          r->ref_lt = ref_lt;
          snprintf(r->config, sizeof r->config, "%.63s", o.cfgs[ci].text);
          if (lt_note[0]) note_add(r, lt_note);
          if (lt_ok && !(ref_lt < dtypes[dt].tol)) {
            char m[160];
            snprintf(m, sizeof m, "cuBLASLt disagrees with the host reference (%.2e)", ref_lt);
            note_add(r, m);
            r->fail = true;
          }
          if (have_lt && !lt_ok && strstr(lt_note, "failed")) r->fail = true;

          const char *msg = "";
          tile_kernel *k = get_kernel(ctx, path, dev, form, o.arch, dt, epi, &o.cfgs[ci], ci, &msg);
          if (!k) {
            note_add(r, msg);
            r->fail = true;
            goto row_done;
          }
          snprintf(r->config_full, sizeof r->config_full, "%s", tile_kernel_config(k));
          short_config(r->config_full, r->config, sizeof r->config);
          if (o.cfgs[ci].sched[0]) {
            size_t cl = strlen(r->config);
            snprintf(r->config + cl, sizeof r->config - cl, " [%s]", o.cfgs[ci].sched);
          }
          struct our_call oc;
          memset(&oc, 0, sizeof oc);
          oc.ctx = ctx;
          oc.k = k;
          oc.lo.stream = NULL;
          oc.nargs = make_args(oc.args, form, dt, Bt, M, N, K, dA, dB, dO, dbias, epi);
          if ((st = tile_mem_fill(ctx, dev, dO, 0xff, nc * es))) {
            note_add(r, tile_errmsg(ctx));
            r->fail = true;
            goto row_done;
          }
          if (launch_ours(&oc, err, sizeof err)) {
            note_add(r, err);
            r->fail = true;
            fatal = strstr(err, "CUDA_ERROR") != NULL;
            goto row_done;
          }
          if ((st = tile_synchronize(ctx, dev)) ||
              (st = tile_mem_download(ctx, dev, hO, dO, nc * es))) {
            char m[1200];
            snprintf(m, sizeof m, "our kernel failed: %s: %s", tile_status_name(st), tile_errmsg(ctx));
            note_add(r, m);
            r->fail = true;
            fatal = true; /* an error in the kernel poisons the context */
            goto row_done;
          }
          tile_kernel_stats ks;
          if (tile_kernel_get_stats(k, &ks) == TILE_OK) {
            r->regs = ks.registers;
            r->local_bytes = ks.local_bytes;
          }
          r->ref_ours = sampled_error(form, dt, hA, hB, hbias, epi, hO, MR, N, K, o.samples, seed);
          if (!(r->ref_ours < dtypes[dt].tol)) {
            char m[160];
            snprintf(m, sizeof m, "ours disagrees with the host reference (%.2e >= %.0e)", r->ref_ours,
                     dtypes[dt].tol);
            note_add(r, m);
            r->fail = true;
          }
          if (lt_ok && form != FORM_SWIGLU) { /* (swiglu: cuBLASLt computes the two products only) */
            struct cmp_result cr;
            compare_full(dt, hO, hL, nc, &cr);
            r->rel_l2 = cr.rel_l2;
            r->max_rel = cr.max_rel;
            if (cr.nonfinite_x || cr.nonfinite_y) {
              char m[200];
              snprintf(m, sizeof m, "non-finite (unwritten?) elements: ours %zu, cuBLASLt %zu", cr.nonfinite_x,
                       cr.nonfinite_y);
              note_add(r, m);
              r->fail = true;
            } else if (!(cr.rel_l2 < dtypes[dt].tol)) {
              char m[160];
              snprintf(m, sizeof m, "ours vs cuBLASLt %.2e >= %.0e", cr.rel_l2, dtypes[dt].tol);
              note_add(r, m);
              r->fail = true;
            }
          } else {
            /* no full comparison possible: at least every element must have been written */
            size_t nonfinite = 0;
            for (size_t i = 0; i < nc; i++) nonfinite += !isfinite(load_elem(dt, hO, i));
            if (nonfinite) {
              char m[120];
              snprintf(m, sizeof m, "%zu non-finite (unwritten?) elements in ours", nonfinite);
              note_add(r, m);
              r->fail = true;
            }
          }
          struct timing t;
          if (time_launches(&tm, launch_ours, &oc, &t, err, sizeof err)) {
            note_add(r, err);
            r->fail = true;
            fatal = strstr(err, "CUDA_ERROR") != NULL;
            goto row_done;
          }
          r->ours_ok = true;
          r->ours_ms = t.median_ms;
          r->ours_reps = t.reps;
          /* the many timed runs wrote C again: it must be bitwise what the first run wrote */
          if ((st = tile_mem_download(ctx, dev, hO2, dO, nc * es))) {
            note_add(r, tile_errmsg(ctx));
            r->fail = true;
            fatal = true;
          } else if (memcmp(hO, hO2, nc * es) != 0) {
            note_add(r, "our result changed between runs (race?)");
            r->fail = true;
          }
          if (o.cfgs[ci].autoconfig != 0 && tile_kernel_tuned_config(k) &&
              strcmp(tile_kernel_tuned_config(k), tile_kernel_config(k))) { /* what the launches ran */
            snprintf(r->config_full, sizeof r->config_full, "%s", tile_kernel_tuned_config(k));
            short_config(r->config_full, r->config, sizeof r->config);
            size_t cl = strlen(r->config);
            snprintf(r->config + cl, sizeof r->config - cl, " [auto]");
          }
        row_done:
          print_row(stdout, r);
          csv_row(csv, r);
          if (r->fail) exit_code = 1;
        }
        if (fatal) {
          fprintf(stderr, "bench_gemm: stopping: the CUDA context is unusable after the error above\n");
          exit_code = 1;
        }
      }
    next_dtype:
      tile_mem_free(ctx, dev, dA);
      tile_mem_free(ctx, dev, dB);
      tile_mem_free(ctx, dev, dbias);
      tile_mem_free(ctx, dev, dO);
      tile_mem_free(ctx, dev, dL);
      free(hA), free(hB), free(hbias), free(hO), free(hL), free(hO2);
      if (fatal) goto summary;
    }
  }

summary:
  printf("\n== bench_gemm summary (%s; TFLOP/s = 2MNK / median time; errors are relative L2 unless"
         " named; tolerance f16/tf32 5e-3, bf16 1e-2) ==\n", info.name);
  print_header(stdout);
  int nfail = 0;
  for (int i = 0; i < nrows; i++) {
    print_row(stdout, &rows[i]);
    nfail += rows[i].fail;
  }
  printf("%d row%s, %d failed%s\n", nrows, nrows == 1 ? "" : "s", nfail,
         (have_lt || o.dry_run_cpu) ? "" : "; cuBLASLt was NOT available: exit status 3");

out:
  if (csv) fclose(csv);
  for (int i = 0; i < tm.nev; i++) rt_cuda_event_destroy(&cu, tm.ev[i], err, sizeof err);
  if (d_ws) tile_mem_free(ctx, dev, d_ws);
  if (d_flush) tile_mem_free(ctx, dev, d_flush);
  if (lth) lt.Destroy(lth);
  for (int i = 0; i < nkcache; i++) tile_kernel_release(kcache[i].k);
  tile_context_destroy(ctx);
  if (cdev_open) rt_cuda_device_close(&cu, &cdev, err, sizeof err);
  if (cu_loaded) rt_cuda_unload(&cu);
  free(rows);
  if (exit_code == 0 && !have_lt && !o.dry_run_cpu) exit_code = 3;
  return exit_code;
#undef GTRY
}
