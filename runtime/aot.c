/* aot.c - tile_emit_aot: kernels compiled ahead of time into C launchers (tilec aot).
 *
 * For each requested kernel the front end and generic passes run once; then, for each target
 * and argument specialization (aligned: 16-byte multiple strides and sizes, the common case;
 * unaligned: any), the GPU pipeline runs on a clone of the IR with the facts tile_emit
 * assumes (rt_gpu_emit_code), giving PTX and the launch parameters (threads, dynamic shared
 * memory, TMA descriptors, persistence). The caller's `assemble` may turn each PTX into a
 * cubin. The output is C text:
 *  - a header with the launcher prototypes, each documented with its parameters, and the
 *    tensor struct and status codes shared by all generated headers;
 *  - a source that embeds the images as byte arrays, declares the few Driver API entry
 *    points it calls (so no cuda.h is needed to build it; it links with -lcuda), carries a
 *    fixed prelude (the argument checks of runtime/launch.c, module loading per context,
 *    TMA encoding as runtime/gpu.c does it, the launch) and, per kernel, the launcher: it
 *    binds the tensors, evaluates the kernel's grid block translated to C (integer ops with
 *    the interpreter's wrapping semantics), packs the parameters in the codegen's order
 *    (cg.h: per tensor its pointer and strides, per shape symbol an i32, per scalar its
 *    value, then the TMA descriptors) and launches.
 * What the launcher passes is what rt_gpu_launch passes for arguments with the same facts:
 * tests/cli/aot.sh compares the two launches through the fake driver.
 *
 * Limits (reported as TILE_UNSUPPORTED): grids computed with float operations, and f16,
 * bf16 or fp8 scalar parameters (the launcher would have to round them). Not reported: the
 * code assumes short tiles (no long_tiles fact, which the JIT evaluates per launch from the
 * tiles' trip counts), so a causal kernel with heavy tiles of more than CG_WALK_MAX_TRIPS
 * steps keeps the persistent walk at 4 to 8 waves where the JIT launches a plain grid
 * (PERF.md 91: 7-9% slower there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "rt.h"

_Static_assert(CG_FEW_WAVES == 8 && CG_WALK_MIN_WAVES == 4, "the AOT launcher's persistent=2 rule writes 4 and 8 waves");

/* The fixed part of every generated source, after its #include of the header and a
 * `#define AOT_TMA 0|1` (whether any code uses TMA, which needs cuTensorMapEncodeTiled). */
static const char *const prelude[] = {
    "#include <pthread.h>",
    "#include <stdarg.h>",
    "#include <stdint.h>",
    "#include <stdio.h>",
    "#include <string.h>",
    "",
    "/* ---- the CUDA Driver API: declared here, so no cuda.h is needed; link with -lcuda ---- */",
    "typedef int aot_CUresult;",
    "typedef int aot_CUdevice;",
    "typedef struct CUctx_st *aot_CUcontext;",
    "typedef struct CUmod_st *aot_CUmodule;",
    "typedef struct CUfunc_st *aot_CUfunction;",
    "typedef struct CUstream_st *aot_CUstream;",
    "aot_CUresult cuCtxGetCurrent(aot_CUcontext *ctx);",
    "aot_CUresult cuCtxGetDevice(aot_CUdevice *dev);",
    "aot_CUresult cuDeviceGetAttribute(int *value, int attribute, aot_CUdevice dev);",
    "aot_CUresult cuModuleLoadDataEx(aot_CUmodule *module, const void *image, unsigned noptions, int *options,",
    "                                void **values);",
    "aot_CUresult cuModuleGetFunction(aot_CUfunction *fn, aot_CUmodule module, const char *name);",
    "aot_CUresult cuModuleUnload(aot_CUmodule module);",
    "aot_CUresult cuFuncSetAttribute(aot_CUfunction fn, int attribute, int value);",
    "aot_CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, aot_CUfunction fn, int threads, size_t smem);",
    "aot_CUresult cuLaunchKernel(aot_CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,",
    "                            unsigned bz, unsigned smem, aot_CUstream stream, void **params, void **extra);",
    "aot_CUresult cuGetErrorName(aot_CUresult error, const char **name);",
    "#if AOT_TMA",
    "aot_CUresult cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *address, const uint64_t *dims,",
    "                                    const uint64_t *strides, const uint32_t *box, const uint32_t *elem_strides,",
    "                                    int interleave, int swizzle, int l2_promotion, int oob_fill);",
    "#endif",
    "enum {",
    "  AOT_ATTR_SM_COUNT = 16,      /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */",
    "  AOT_ATTR_CC_MAJOR = 75,      /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */",
    "  AOT_ATTR_CC_MINOR = 76,      /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */",
    "  AOT_FUNC_MAX_DYNAMIC_SMEM = 8, /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */",
    "  AOT_JIT_ERROR_LOG = 5,       /* CU_JIT_ERROR_LOG_BUFFER */",
    "  AOT_JIT_ERROR_LOG_SIZE = 6,  /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */",
    "  AOT_MAX_LOADED = 64          /* contexts x argument kinds one kernel keeps modules for */",
    "};",
    "",
    "/* ---- errors: a code returned, the message kept per thread ---- */",
    "",
    "static _Thread_local char aot_message[1024];",
    "",
    "static int aot_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));",
    "static int aot_fail(int status, const char *fmt, ...) {",
    "  va_list ap;",
    "  va_start(ap, fmt);",
    "  vsnprintf(aot_message, sizeof aot_message, fmt, ap);",
    "  va_end(ap);",
    "  return status;",
    "}",
    "",
    "static int aot_cuda_fail(aot_CUresult r, const char *kernel, const char *what, const char *log) {",
    "  const char *name = NULL;",
    "  if (cuGetErrorName(r, &name) != 0 || !name) name = \"an unknown CUresult\";",
    "  return aot_fail(TILE_AOT_CUDA, \"%s: %s failed: %s (%d)%s%s\", kernel, what, name, (int)r, log && *log ? \": \" : \"\",",
    "                  log ? log : \"\");",
    "}",
    "",
    "/* ---- what the generated tables describe ---- */",
    "",
    "struct aot_tensor_param {",
    "  const char *name;",
    "  unsigned position;   /* the launcher's argument (0: the first after the stream) */",
    "  int rank, elem_bytes, used;",
    "  int sym[4];          /* the shape symbol of each dimension (index into the kernel's), -1: fixed */",
    "  int64_t size[4];     /* the fixed sizes */",
    "};",
    "",
    "struct aot_bound {",
    "  void *data;",
    "  int64_t shape[4], strides[4]; /* strides in elements, never all zero once bound */",
    "};",
    "",
    "struct aot_tmap {",
    "  unsigned tensor; /* index of the tensor among the kernel's tensors */",
    "  int rank, dtype; /* CUtensorMapDataType */",
    "  uint32_t box[4]; /* tensor order, outermost first */",
    "  int swizzle;     /* bytes: 0, 32, 64 or 128 */",
    "};",
    "",
    "struct aot_variant {",
    "  const char *arch;",
    "  int sm, arch_specific; /* compute capability x 10; \"a\" code runs on exactly that one */",
    "  int aligned;           /* compiled for 16-byte multiple strides and sizes (else for any) */",
    "  const unsigned char *ptx; /* NUL-terminated */",
    "  const unsigned char *cubin; /* NULL: none */",
    "  size_t cubin_len;",
    "  unsigned threads, smem; /* per block; smem is dynamic shared memory */",
    "  int persistent;         /* the grid is as many blocks as fit at once (tiles loop inside); 2: only",
    "                           * for at most 8 waves of those, one block per tile beyond */",
    "  int cluster;            /* > 1: each program is a cluster of this many blocks (grid x times it) */",
    "  unsigned ntmaps;",
    "  struct aot_tmap tmaps[8];",
    "};",
    "",
    "struct aot_loaded {",
    "  aot_CUcontext ctx;",
    "  int request_aligned; /* the arguments it was chosen for */",
    "  const struct aot_variant *v;",
    "  aot_CUmodule module;",
    "  aot_CUfunction fn;",
    "  unsigned slots; /* persistent code: blocks that fit on the device at once */",
    "};",
    "",
    "struct aot_kernel {",
    "  const char *name;",
    "  const struct aot_variant *variants;",
    "  unsigned nvariants;",
    "  pthread_mutex_t mu; /* guards loaded */",
    "  unsigned nloaded;",
    "  struct aot_loaded loaded[AOT_MAX_LOADED];",
    "};",
    "",
    "/* ---- argument checks, as tile_launch's (runtime/launch.c) ---- */",
    "",
    "/* Binds tensor argument `t` of parameter `p` into b: sizes in range, non-negative strides",
    " * (all zero: contiguous), no 64-bit overflow, fixed sizes, one value per shape symbol, the",
    " * 16-byte aligned base and contiguous last dimension all generated code assumes. Clears",
    " * *aligned (with the reason in why) when the tensor breaks a fact of the aligned code. */",
    "static int aot_bind(const char *kernel, const struct aot_tensor_param *all, unsigned index, const void *arg,",
    "                    struct aot_bound *b, int64_t *sym, int *sym_from, const char *const *sym_names, int *aligned,",
    "                    char *why, size_t whylen) {",
    "  const struct aot_tensor_param *p = &all[index];",
    "  const tile_aot_tensor *t = arg;",
    "  memset(b, 0, sizeof *b);",
    "  if (!t || !t->data) {",
    "    if (p->used)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): data pointer is NULL\", kernel, p->position, p->name);",
    "    return TILE_AOT_OK; /* unused and absent: no shape facts from it */",
    "  }",
    "  int contiguous = 1;",
    "  for (int d = 0; d < p->rank; d++) contiguous &= t->strides[d] == 0;",
    "  int64_t expect = 1;",
    "  for (int d = p->rank; d-- > 0;) {",
    "    int64_t s = t->shape[d];",
    "    if (s < 0 || s > INT32_MAX)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): dimension %d has size %lld (must be 0..%d)\", kernel,",
    "                      p->position, p->name, d, (long long)s, INT32_MAX);",
    "    if (!contiguous && t->strides[d] < 0)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): stride %d is negative (%lld)\", kernel, p->position,",
    "                      p->name, d, (long long)t->strides[d]);",
    "    b->shape[d] = s;",
    "    b->strides[d] = contiguous ? expect : t->strides[d];",
    "    if (__builtin_mul_overflow(expect, s ? s : 1, &expect))",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): the number of elements overflows 64 bits\", kernel,",
    "                      p->position, p->name);",
    "  }",
    "  int64_t last = 0, term, bytes;",
    "  int empty = 0;",
    "  for (int d = 0; d < p->rank; d++) empty |= b->shape[d] == 0;",
    "  for (int d = 0; d < p->rank && !empty; d++)",
    "    if (__builtin_mul_overflow(b->shape[d] - 1, b->strides[d], &term) || __builtin_add_overflow(last, term, &last))",
    "      last = INT64_MAX;",
    "  if (!empty && (last == INT64_MAX || __builtin_mul_overflow(last + 1, (int64_t)p->elem_bytes, &bytes)))",
    "    return aot_fail(TILE_AOT_BAD_LAUNCH,",
    "                    \"%s: argument %u ('%s'): shape x strides addresses beyond 2^63 bytes (the strides are too large)\",",
    "                    kernel, p->position, p->name);",
    "  b->data = t->data;",
    "  for (int d = 0; d < p->rank; d++) {",
    "    int64_t s = b->shape[d];",
    "    int y = p->sym[d];",
    "    if (y < 0) {",
    "      if (s != p->size[d])",
    "        return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): dimension %d must be %lld, got %lld\", kernel,",
    "                        p->position, p->name, d, (long long)p->size[d], (long long)s);",
    "    } else if (sym_from[y] < 0) {",
    "      sym_from[y] = (int)index;",
    "      sym[y] = s;",
    "    } else if (sym[y] != s) {",
    "      const struct aot_tensor_param *q = &all[sym_from[y]];",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): dimension %d (%s) is %lld, but argument %u ('%s') has %s = %lld\",",
    "                      kernel, p->position, p->name, d, sym_names[y], (long long)s, q->position, q->name, sym_names[y],",
    "                      (long long)sym[y]);",
    "    }",
    "  }",
    "  if ((uintptr_t)t->data % 16)",
    "    return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): pointer %p is not 16-byte aligned (the generated code needs it)\",",
    "                    kernel, p->position, p->name, t->data);",
    "  int r = p->rank - 1;",
    "  if (r >= 0 && b->shape[r] > 1 && b->strides[r] != 1)",
    "    return aot_fail(TILE_AOT_BAD_LAUNCH,",
    "                    \"%s: argument %u ('%s'): the last dimension has stride %lld; the generated code needs it contiguous (1)\",",
    "                    kernel, p->position, p->name, (long long)b->strides[r]);",
    "  for (int d = 0; d < r && *aligned; d++)",
    "    if (b->shape[d] > 1 && (b->strides[d] * p->elem_bytes) % 16) {",
    "      *aligned = 0;",
    "      snprintf(why, whylen, \"argument %u ('%s'): stride %d (%lld elements) is not a multiple of 16 bytes\", p->position,",
    "               p->name, d, (long long)b->strides[d]);",
    "    }",
    "  return TILE_AOT_OK;",
    "}",
    "",
    "/* Every shape symbol must be given by some tensor; the aligned code needs multiples of 16. */",
    "static int aot_check_symbols(const char *kernel, unsigned nsym, const int64_t *sym, const int *sym_from,",
    "                             const char *const *sym_names, int *aligned, char *why, size_t whylen) {",
    "  for (unsigned y = 0; y < nsym; y++) {",
    "    if (sym_from[y] < 0)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: the size '%s' is not given: every tensor that has it was passed as NULL\",",
    "                      kernel, sym_names[y]);",
    "    if (*aligned && sym[y] % 16) {",
    "      *aligned = 0;",
    "      snprintf(why, whylen, \"the size %s = %lld is not a multiple of 16\", sym_names[y], (long long)sym[y]);",
    "    }",
    "  }",
    "  return TILE_AOT_OK;",
    "}",
    "",
    "/* ---- modules ---- */",
    "",
    "static int aot_runs_on(const struct aot_variant *v, int cc) { return v->arch_specific ? cc == v->sm : cc >= v->sm; }",
    "",
    "/* The loaded code of k for the calling thread's current context and arguments that are",
    " * (or are not) aligned: loaded on first use. The variant is the best one the device runs:",
    " * aligned code when the arguments allow it, then \"a\" code for exactly this device, then the",
    " * newest target; its cubin when built for this device's major version and a minor one not",
    " * above the device's, else (or when the driver refuses the cubin) its PTX. */",
    "static int aot_module(struct aot_kernel *k, int aligned, const char *why, struct aot_loaded *out) {",
    "  aot_CUcontext ctx = NULL;",
    "  aot_CUresult r = cuCtxGetCurrent(&ctx);",
    "  if (r) return aot_cuda_fail(r, k->name, \"cuCtxGetCurrent\", NULL);",
    "  if (!ctx)",
    "    return aot_fail(TILE_AOT_CUDA, \"%s: no CUDA context is current in this thread (make one current first: \"",
    "                    \"cuCtxSetCurrent, or any CUDA runtime call)\", k->name);",
    "  pthread_mutex_lock(&k->mu);",
    "  for (unsigned i = 0; i < k->nloaded; i++)",
    "    if (k->loaded[i].ctx == ctx && k->loaded[i].request_aligned == aligned) {",
    "      *out = k->loaded[i];",
    "      pthread_mutex_unlock(&k->mu);",
    "      return TILE_AOT_OK;",
    "    }",
    "  int st = TILE_AOT_OK, major = 0, minor = 0;",
    "  aot_CUdevice dev = 0;",
    "  struct aot_loaded l;",
    "  memset(&l, 0, sizeof l);",
    "  l.ctx = ctx;",
    "  l.request_aligned = aligned;",
    "  if ((r = cuCtxGetDevice(&dev)) || (r = cuDeviceGetAttribute(&major, AOT_ATTR_CC_MAJOR, dev)) ||",
    "      (r = cuDeviceGetAttribute(&minor, AOT_ATTR_CC_MINOR, dev))) {",
    "    st = aot_cuda_fail(r, k->name, \"querying the device\", NULL);",
    "    goto done;",
    "  }",
    "  int cc = major * 10 + minor, best_score = -1, any = 0;",
    "  for (unsigned i = 0; i < k->nvariants; i++) {",
    "    const struct aot_variant *v = &k->variants[i];",
    "    if (!aot_runs_on(v, cc)) continue;",
    "    any = 1;",
    "    if (v->aligned && !aligned) continue;",
    "    int score = (v->aligned == aligned) * 10000 + v->sm * 2 + v->arch_specific;",
    "    if (score > best_score) best_score = score, l.v = v;",
    "  }",
    "  if (!l.v) {",
    "    char archs[256] = \"\";",
    "    size_t n = 0;",
    "    for (unsigned i = 0; i < k->nvariants && n < sizeof archs - 32; i++)",
    "      n += (size_t)snprintf(archs + n, sizeof archs - n, \"%s%s%s\", i ? \", \" : \"\", k->variants[i].arch,",
    "                            k->variants[i].aligned ? \"\" : \" (unaligned)\");",
    "    if (any)",
    "      st = aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: %s; the code was generated for aligned arguments only (tilec aot --unaligned=also adds code for any)\",",
    "                    k->name, why);",
    "    else",
    "      st = aot_fail(TILE_AOT_NO_CODE, \"%s: no code for compute capability %d.%d (generated for %s)\", k->name, major, minor,",
    "                    archs);",
    "    goto done;",
    "  }",
    "  char log[2048] = \"\";",
    "  int opts[2] = {AOT_JIT_ERROR_LOG, AOT_JIT_ERROR_LOG_SIZE};",
    "  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};",
    "  const struct aot_variant *v = l.v;",
    "  int cubin_fits = v->cubin && (v->arch_specific ? cc == v->sm : cc / 10 == v->sm / 10 && cc >= v->sm);",
    "  r = cubin_fits ? cuModuleLoadDataEx(&l.module, v->cubin, 2, opts, vals) : 1;",
    "  if (r) {",
    "    log[0] = 0;",
    "    vals[1] = (void *)(uintptr_t)sizeof log;",
    "    l.module = NULL;",
    "    r = cuModuleLoadDataEx(&l.module, v->ptx, 2, opts, vals);",
    "  }",
    "  if (r) {",
    "    log[sizeof log - 1] = 0;",
    "    st = aot_cuda_fail(r, k->name, \"loading the module\", log);",
    "    goto done;",
    "  }",
    "  if ((r = cuModuleGetFunction(&l.fn, l.module, k->name))) {",
    "    st = aot_cuda_fail(r, k->name, \"cuModuleGetFunction\", NULL);",
    "  } else if (v->smem > 48 * 1024 && (r = cuFuncSetAttribute(l.fn, AOT_FUNC_MAX_DYNAMIC_SMEM, (int)v->smem))) {",
    "    st = aot_cuda_fail(r, k->name, \"allowing its dynamic shared memory\", NULL);",
    "  } else if (k->nloaded == AOT_MAX_LOADED) {",
    "    st = aot_fail(TILE_AOT_CUDA, \"%s: loaded in more than %d contexts\", k->name, AOT_MAX_LOADED);",
    "  }",
    "  if (st) {",
    "    cuModuleUnload(l.module);",
    "    goto done;",
    "  }",
    "  if (v->persistent) {",
    "    int sms = 0, occupancy = 0;",
    "    if (cuDeviceGetAttribute(&sms, AOT_ATTR_SM_COUNT, dev) || sms < 1) sms = 1;",
    "    if (cuOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, l.fn, (int)v->threads, v->smem) || occupancy < 1)",
    "      occupancy = 1;",
    "    l.slots = (unsigned)sms * (unsigned)occupancy;",
    "  }",
    "  k->loaded[k->nloaded++] = l;",
    "  *out = l;",
    "done:",
    "  pthread_mutex_unlock(&k->mu);",
    "  return st;",
    "}",
    "",
    "/* Unloads k's modules of the calling thread's current context. */",
    "static void aot_unload(struct aot_kernel *k) {",
    "  aot_CUcontext ctx = NULL;",
    "  if (cuCtxGetCurrent(&ctx) || !ctx) return;",
    "  pthread_mutex_lock(&k->mu);",
    "  for (unsigned i = 0; i < k->nloaded;)",
    "    if (k->loaded[i].ctx == ctx) {",
    "      cuModuleUnload(k->loaded[i].module);",
    "      k->loaded[i] = k->loaded[--k->nloaded];",
    "    } else {",
    "      i++;",
    "    }",
    "  pthread_mutex_unlock(&k->mu);",
    "}",
    "",
    "#if AOT_TMA",
    "/* The TMA descriptor of map t over tensor x into out, as the runtime encodes it (runtime/gpu.c:",
    " * dimension 0 innermost, strides in bytes, out-of-bounds elements read as zeros). */",
    "static int aot_encode_tmap(const char *kernel, const struct aot_tensor_param *p, const struct aot_tmap *t,",
    "                           const struct aot_bound *x, void *out) {",
    "  uint64_t dim[4], stride[4];",
    "  uint32_t box[4], es[4];",
    "  int rank = t->rank;",
    "  for (int j = 0; j < rank; j++) {",
    "    int d = rank - 1 - j;",
    "    dim[j] = x->shape[d] > 0 ? (uint64_t)x->shape[d] : 1;",
    "    box[j] = t->box[d];",
    "    es[j] = 1;",
    "    if (j == 0) continue;",
    "    int64_t s = x->strides[d] * p->elem_bytes;",
    "    if (x->shape[d] <= 1)",
    "      s = (int64_t)(((j == 1 ? dim[0] * (uint64_t)p->elem_bytes : stride[j - 2] * dim[j - 1]) + 15) & ~15ull);",
    "    if (s <= 0 || s % 16)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): stride %d (%lld elements) is not a positive multiple of 16 bytes (TMA)\",",
    "                      kernel, p->position, p->name, d, (long long)x->strides[d]);",
    "    stride[j - 1] = (uint64_t)s;",
    "  }",
    "  int swizzle = t->swizzle == 128 ? 3 : t->swizzle == 64 ? 2 : t->swizzle == 32 ? 1 : 0;",
    "  aot_CUresult r = cuTensorMapEncodeTiled(out, t->dtype, (uint32_t)rank, x->data, dim, stride, box, es, 0, swizzle, 2, 0);",
    "  if (r) {",
    "    char what[128];",
    "    snprintf(what, sizeof what, \"cuTensorMapEncodeTiled for '%s'\", p->name);",
    "    return aot_cuda_fail(r, kernel, what, NULL);",
    "  }",
    "  return TILE_AOT_OK;",
    "}",
    "#endif",
    "",
    "/* ---- launching ---- */",
    "",
    "/* Launches k with the packed parameters (n of them; room for the TMA descriptors after) on",
    " * the grid the kernel's grid expression gave, after the checks of the runtime's launch. */",
    "static int aot_run(struct aot_kernel *k, const struct aot_tensor_param *tp, const struct aot_bound *t, int aligned,",
    "                   const char *why, const int64_t grid[3], void *stream, void **params, unsigned n) {",
    "  int unaligned_code = 0;",
    "  for (unsigned i = 0; i < k->nvariants; i++) unaligned_code |= !k->variants[i].aligned;",
    "  if (!aligned && !unaligned_code)",
    "    return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: %s; the code was generated for aligned arguments only (tilec aot --unaligned=also adds code for any)\",",
    "                    k->name, why);",
    "  for (int d = 0; d < 3; d++)",
    "    if (grid[d] < 0 || grid[d] > (d == 0 ? INT32_MAX : 65535))",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: grid dimension %d is %lld for these sizes (the CUDA limit is %d)\", k->name,",
    "                      d, (long long)grid[d], d == 0 ? INT32_MAX : 65535);",
    "  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return TILE_AOT_OK;",
    "  struct aot_loaded l;",
    "  memset(&l, 0, sizeof l);",
    "  int st = aot_module(k, aligned, why, &l);",
    "  if (st) return st;",
    "#if AOT_TMA",
    "  _Alignas(128) unsigned char maps[8][128];",
    "  for (unsigned i = 0; i < l.v->ntmaps; i++) {",
    "    const struct aot_tmap *m = &l.v->tmaps[i];",
    "    if ((st = aot_encode_tmap(k->name, &tp[m->tensor], m, &t[m->tensor], maps[i]))) return st;",
    "    params[n++] = maps[i];",
    "  }",
    "#else",
    "  (void)tp, (void)t, (void)n;",
    "#endif",
    "  unsigned g[3] = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]};",
    "  if (l.v->cluster > 1) {",
    "    if ((uint64_t)grid[0] * (uint64_t)l.v->cluster > 0x7fffffff)",
    "      return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: grid x of %lld programs of %d blocks each is above the CUDA limit\", k->name, (long long)grid[0], l.v->cluster);",
    "    g[0] *= (unsigned)l.v->cluster;",
    "  }",
    "  if (l.v->persistent) {",
    "    uint64_t tiles = (uint64_t)grid[0] * (uint64_t)grid[1] * (uint64_t)grid[2];",
    "    uint64_t s = l.slots;",
    "    uint64_t slots = l.v->persistent == 2 && (tiles > 8 * s || (tiles > s && tiles < 4 * s)) && tiles <= 0x7fffffff ? tiles : s;",
    "    g[0] = (unsigned)(tiles < slots ? tiles : slots);",
    "    g[1] = g[2] = 1;",
    "  }",
    "  aot_CUresult r = cuLaunchKernel(l.fn, g[0], g[1], g[2], l.v->threads, 1, 1, l.v->smem, (aot_CUstream)stream, params, NULL);",
    "  if (r) return aot_cuda_fail(r, k->name, \"cuLaunchKernel\", NULL);",
    "  return TILE_AOT_OK;",
    "}",
    "",
    "/* ---- the grid expression's integer semantics (compiler/ir/eval.c) ---- */",
    "",
    "static inline int64_t aot_wrap(int bits, int64_t x) {",
    "  switch (bits) {",
    "  case 1: return x != 0;",
    "  case 8: return (int8_t)(uint8_t)(uint64_t)x;",
    "  case 16: return (int16_t)(uint16_t)(uint64_t)x;",
    "  case 32: return (int32_t)(uint32_t)(uint64_t)x;",
    "  default: return x;",
    "  }",
    "}",
    "static inline int64_t aot_div(int64_t a, int64_t b) { return b == 0 ? 0 : (a == INT64_MIN && b == -1) ? a : a / b; }",
    "static inline int64_t aot_rem(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }",
};

/* One compiled variant of a kernel: a target and a specialization. */
struct aot_variant {
  const struct tl_target *target;
  bool aligned;
  struct cg_result res;
  const void *cubin; /* in the scratch arena; NULL: none */
  size_t cubin_len;
};

struct aot_kernel {
  tile_kernel *k;
  const char *fn;          /* the launcher: SYMBOL_KERNEL */
  const char **arg_names;  /* per user parameter: its C name */
  struct aot_variant *variants;
  unsigned nvariants;
  uint32_t *sym_of;        /* ir param index -> shape symbol index, or UINT32_MAX */
  unsigned nsyms;
  unsigned *tensor_of;     /* user parameter -> index among the tensors, or UINT_MAX */
  unsigned ntensors;
};

static bool is_c_keyword(const char *s) {
  static const char *const words[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
      "true", "false", "stream", "main", "errno", "NULL"};
  for (size_t i = 0; i < TL_ARRAY_LEN(words); i++)
    if (strcmp(s, words[i]) == 0) return true;
  return s[0] == '_' || strncmp(s, "aot_", 4) == 0;
}

/* A parameter's name as a C identifier that cannot collide with the launcher's own. */
static const char *c_name(struct arena *a, const char *name) {
  return is_c_keyword(name) ? arena_printf(a, "%s_", name) : name;
}

static bool is_identifier(const char *s) {
  if (!s || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) return false;
  return true;
}

/* A byte array definition; nul: a terminating 0 after the data. */
static void emit_bytes(struct strbuf *sb, const char *name, const unsigned char *p, size_t n, bool nul) {
  sb_printf(sb, "static _Alignas(64) const unsigned char %s[%zu] = {", name, n + (nul ? 1 : 0));
  for (size_t i = 0; i < n; i++) sb_printf(sb, "%s%u,", i % 24 ? "" : "\n  ", p[i]);
  sb_puts(sb, nul ? "\n  0};\n" : "\n};\n");
}

static const char *scalar_c_type(ir_dtype dt) {
  switch (dt) {
  case DT_I64: return "int64_t";
  case DT_F64: return "double";
  case DT_F32: return "float";
  case DT_BOOL: return "int";
  case DT_U32: return "uint32_t";
  default: return "int32_t"; /* i8, i16, i32 */
  }
}

/* The C expression of a value of the grid block. */
static const char *grid_operand(struct arena *a, const struct aot_kernel *ak, ir_val v) {
  const struct ir_func *f = ak->k->ir;
  const struct ir_value *val = &f->values.v[v];
  if (val->kind != IR_VAL_PARAM) return arena_printf(a, "v%u", (unsigned)v);
  const struct ir_param *p = &f->params.v[val->index];
  if (p->kind == IR_PARAM_SHAPE) return arena_printf(a, "aot_sym[%u]", ak->sym_of[val->index]);
  return arena_printf(a, "(int64_t)%s", ak->arg_names[p->source_index]);
}

/* The dtypes the grid translation handles: the signed ints and bool (aot_wrap sign-extends;
 * u32 grid arithmetic stays with the interpreter and the JIT path). */
static bool aot_grid_dtype(ir_dtype dt) { return !ir_dtype_is_float(dt) && !ir_dtype_is_unsigned(dt); }

/* Translates the ops of grid block `blk` to C statements (the interpreter's eval_grid_block
 * and ir_eval_elem, for integers). False with a message for what it cannot translate. */
static bool emit_grid_block(struct strbuf *sb, struct arena *a, const struct aot_kernel *ak, uint32_t blk, int indent,
                            char *err, size_t errlen) {
  const struct ir_func *f = ak->k->ir;
  const struct ir_block *b = &f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[b->ops.v[i]];
    if (op->code == IR_GRID || op->code == IR_YIELD) continue;
    if (op->nres != 1 && op->code != IR_IF) goto unsupported;
    for (uint32_t r = 0; r < op->nres; r++)
      if (!aot_grid_dtype((ir_dtype)ir_vtype(f, op->res + r)->dtype)) goto unsupported;
    const char *x[3] = {"0", "0", "0"};
    for (uint32_t k = 0; k < op->nargs && k < 3; k++) {
      if (!aot_grid_dtype((ir_dtype)ir_vtype(f, op->args[k])->dtype)) goto unsupported;
      x[k] = grid_operand(a, ak, op->args[k]);
    }
    int bits = ir_vtype(f, op->res)->dtype == DT_BOOL ? 1 : ir_dtype_bits((ir_dtype)ir_vtype(f, op->res)->dtype);
    int abits = op->nargs ? ir_dtype_bits((ir_dtype)ir_vtype(f, op->args[0])->dtype) : 64;
    bool abool = op->nargs && ir_vtype(f, op->args[0])->dtype == DT_BOOL;
    const char *e = NULL;
    switch (op->code) {
    case IR_CONST: e = arena_printf(a, "INT64_C(%lld)", (long long)op->i[0]); break;
    case IR_CAST: e = x[0]; break; /* int to int: wrapped below */
    case IR_SELECT: e = arena_printf(a, "%s ? %s : %s", x[0], x[1], x[2]); break;
    case IR_NEG: e = arena_printf(a, "(int64_t)(0 - (uint64_t)%s)", x[0]); break;
    case IR_NOT: e = abool ? arena_printf(a, "!%s", x[0]) : arena_printf(a, "~%s", x[0]); break;
    case IR_ABS: e = arena_printf(a, "%s < 0 ? (int64_t)(0 - (uint64_t)%s) : %s", x[0], x[0], x[0]); break;
    case IR_ADD: e = arena_printf(a, "(int64_t)((uint64_t)%s + (uint64_t)%s)", x[0], x[1]); break;
    case IR_SUB: e = arena_printf(a, "(int64_t)((uint64_t)%s - (uint64_t)%s)", x[0], x[1]); break;
    case IR_MUL: e = arena_printf(a, "(int64_t)((uint64_t)%s * (uint64_t)%s)", x[0], x[1]); break;
    case IR_DIV: e = arena_printf(a, "aot_div(%s, %s)", x[0], x[1]); break;
    case IR_REM: e = arena_printf(a, "aot_rem(%s, %s)", x[0], x[1]); break;
    case IR_MIN: e = arena_printf(a, "%s < %s ? %s : %s", x[0], x[1], x[0], x[1]); break;
    case IR_MAX: e = arena_printf(a, "%s > %s ? %s : %s", x[0], x[1], x[0], x[1]); break;
    case IR_AND: e = arena_printf(a, "%s & %s", x[0], x[1]); break;
    case IR_OR: e = arena_printf(a, "%s | %s", x[0], x[1]); break;
    case IR_XOR: e = arena_printf(a, "%s ^ %s", x[0], x[1]); break;
    case IR_SHL:
      e = arena_printf(a, "(int64_t)((uint64_t)%s << ((uint64_t)%s & %d))", x[0], x[1], (abool ? 1 : abits) - 1);
      break;
    case IR_SHR: e = arena_printf(a, "%s >> ((uint64_t)%s & %d)", x[0], x[1], (abool ? 1 : abits) - 1); break;
    case IR_EQ: e = arena_printf(a, "%s == %s", x[0], x[1]); break;
    case IR_NE: e = arena_printf(a, "%s != %s", x[0], x[1]); break;
    case IR_LT: e = arena_printf(a, "%s < %s", x[0], x[1]); break;
    case IR_LE: e = arena_printf(a, "%s <= %s", x[0], x[1]); break;
    case IR_GT: e = arena_printf(a, "%s > %s", x[0], x[1]); break;
    case IR_GE: e = arena_printf(a, "%s >= %s", x[0], x[1]); break;
    case IR_IF: {
      for (uint32_t r = 0; r < op->nres; r++) sb_printf(sb, "%*sint64_t v%u = 0;\n", indent, "", (unsigned)(op->res + r));
      for (int side = 0; side < 2; side++) {
        if (side == 0) sb_printf(sb, "%*sif (%s) {\n", indent, "", x[0]);
        else sb_printf(sb, "%*s} else {\n", indent, "");
        uint32_t region = op->region + (uint32_t)side;
        if (!emit_grid_block(sb, a, ak, region, indent + 2, err, errlen)) return false;
        const struct ir_block *rb = &f->blocks.v[region];
        if (op->nres && !rb->ops.n) goto unsupported;
        const struct ir_op *y = rb->ops.n ? &f->ops.v[VEC_LAST(rb->ops)] : NULL;
        for (uint32_t r = 0; r < op->nres; r++)
          sb_printf(sb, "%*sv%u = %s;\n", indent + 2, "", (unsigned)(op->res + r), grid_operand(a, ak, y->args[r]));
      }
      sb_printf(sb, "%*s}\n", indent, "");
      continue;
    }
    default: goto unsupported;
    }
    bool compare = op->code >= IR_EQ && op->code <= IR_GE;
    if (compare || bits >= 64) sb_printf(sb, "%*sint64_t v%u = %s;\n", indent, "", (unsigned)op->res, e);
    else sb_printf(sb, "%*sint64_t v%u = aot_wrap(%d, %s);\n", indent, "", (unsigned)op->res, bits, e);
    continue;
  unsupported:
    snprintf(err, errlen, "the grid of '%s' uses '%s' on %s values: tilec aot translates integer grid expressions only",
             ak->k->name, ir_ops[op->code].name, op->nres ? ir_dtype_name((ir_dtype)ir_vtype(f, op->res)->dtype) : "no");
    return false;
  }
  return true;
}

/* "A: f16[M, K]" for the documentation of the launcher. */
static const char *param_text(struct arena *a, const tile_param_info *pi) {
  struct strbuf sb;
  sb_init(&sb, a);
  sb_printf(&sb, "%s: %s%s", pi->name, pi->is_output ? "out " : "", ir_dtype_name((ir_dtype)pi->dtype));
  if (pi->is_tensor) {
    sb_putc(&sb, '[');
    for (unsigned d = 0; d < pi->rank; d++) {
      if (d) sb_puts(&sb, ", ");
      if (pi->dim_symbol[d]) sb_puts(&sb, pi->dim_symbol[d]);
      else sb_printf(&sb, "%lld", (long long)pi->dim_size[d]);
    }
    sb_putc(&sb, ']');
  }
  return sb_str(&sb);
}

/* The launcher's prototype (without the final ';' or body). */
static void emit_prototype(struct strbuf *sb, const struct aot_kernel *ak) {
  const tile_kernel *k = ak->k;
  sb_printf(sb, "int %s(void *stream", ak->fn);
  for (unsigned u = 0; u < k->nparams; u++) {
    const tile_param_info *pi = &k->params[u];
    if (pi->is_tensor) sb_printf(sb, ",\n    const tile_aot_tensor *%s", ak->arg_names[u]);
    else sb_printf(sb, ",\n    %s %s", scalar_c_type((ir_dtype)pi->dtype), ak->arg_names[u]);
  }
  sb_putc(sb, ')');
}

static void emit_header_kernel(struct strbuf *sb, struct arena *a, const struct aot_kernel *ak, const char *file) {
  const tile_kernel *k = ak->k;
  sb_printf(sb, "/* %s [%s] from %s\n *   (", k->name, k->config ? k->config : "", file);
  for (unsigned u = 0; u < k->nparams; u++)
    sb_printf(sb, "%s%s%s", u ? ", " : "", param_text(a, &k->params[u]), k->params[u].is_used ? "" : " (unused)");
  sb_puts(sb, ")\n * code:");
  for (unsigned i = 0; i < ak->nvariants; i++) {
    const struct aot_variant *v = &ak->variants[i];
    sb_printf(sb, "%s %s %s (%s, %u threads, %u bytes of shared memory%s%s)", i ? "," : "", v->target->name,
              v->aligned ? "aligned" : "unaligned", v->cubin ? "cubin and PTX" : "PTX", v->res.threads,
              v->res.smem_bytes, v->res.persistent ? ", persistent" : "", v->res.ntmaps ? ", TMA" : "");
  }
  bool any_aligned = false, any_unaligned = false;
  for (unsigned i = 0; i < ak->nvariants; i++) {
    any_aligned |= ak->variants[i].aligned;
    any_unaligned |= !ak->variants[i].aligned;
  }
  sb_puts(sb, "\n * Tensors: device pointers, 16-byte aligned, the last dimension contiguous; strides in elements\n"
              " * (all zero: contiguous row-major). Unused tensors may be NULL.");
  if (!any_unaligned)
    sb_puts(sb, " This code is specialized for the other\n * strides being multiples of 16 bytes and every size a "
                "multiple of 16 (tilec aot --unaligned=also\n * adds code without these assumptions).");
  else if (any_aligned)
    sb_puts(sb, " Arguments whose strides are multiples of\n * 16 bytes and whose sizes are multiples of 16 run the "
                "aligned code; others the unaligned code.");
  sb_puts(sb, "\n * Returns TILE_AOT_OK, or a status with the reason in the errmsg function of this file;\n"
              " * on an error nothing was launched. */\n");
  emit_prototype(sb, ak);
  sb_puts(sb, ";\n\n");
}

/* The launcher: tables, checks, grid, parameter packing, launch. */
static bool emit_launcher(struct strbuf *sb, struct arena *a, const struct aot_kernel *ak, unsigned index, char *err,
                          size_t errlen) {
  const tile_kernel *k = ak->k;
  const struct ir_func *f = k->ir;
  /* the variants */
  for (unsigned i = 0; i < ak->nvariants; i++) {
    const struct aot_variant *v = &ak->variants[i];
    emit_bytes(sb, arena_printf(a, "aot_k%u_v%u_ptx", index, i), (const unsigned char *)v->res.text, v->res.len, true);
    if (v->cubin) emit_bytes(sb, arena_printf(a, "aot_k%u_v%u_cubin", index, i), v->cubin, v->cubin_len, false);
  }
  sb_printf(sb, "static const struct aot_variant aot_k%u_variants[%u] = {\n", index, ak->nvariants);
  for (unsigned i = 0; i < ak->nvariants; i++) {
    const struct aot_variant *v = &ak->variants[i];
    sb_printf(sb, "  {\"%s\", %d, %d, %d, aot_k%u_v%u_ptx, ", v->target->name, v->target->sm,
              v->target->arch_specific ? 1 : 0, v->aligned ? 1 : 0, index, i);
    if (v->cubin) sb_printf(sb, "aot_k%u_v%u_cubin, sizeof aot_k%u_v%u_cubin, ", index, i, index, i);
    else sb_puts(sb, "NULL, 0, ");
    sb_printf(sb, "%u, %u, %d, %d, %u, {", v->res.threads, v->res.smem_bytes, (int)v->res.persistent,
              v->res.cluster > 1 ? (int)v->res.cluster : 1, v->res.ntmaps);
    for (unsigned m = 0; m < v->res.ntmaps; m++) {
      /* never flat: a flat map needs the span31 fact, which the assumed facts never give */
      const struct cg_tmap *t = &v->res.tmaps[m];
      unsigned u = f->params.v[t->param].source_index;
      sb_printf(sb, "%s{%u, %d, %d, {%u, %u, %u, %u}, %d}", m ? ", " : "", ak->tensor_of[u], t->rank,
                rt_tmap_dtype((ir_dtype)t->dtype), t->box[0], t->box[1], t->box[2], t->box[3], t->swizzle);
    }
    sb_puts(sb, v->res.ntmaps ? "}},\n" : "{0}}},\n");
  }
  sb_puts(sb, "};\n");
  sb_printf(sb, "static struct aot_kernel aot_k%u = {\"%s\", aot_k%u_variants, %u, PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};\n\n",
            index, k->name, index, ak->nvariants);

  emit_prototype(sb, ak);
  sb_puts(sb, " {\n");
  /* tensor descriptions */
  unsigned nt = ak->ntensors ? ak->ntensors : 1, ns = ak->nsyms ? ak->nsyms : 1;
  sb_printf(sb, "  static const struct aot_tensor_param aot_tp[%u] = {\n", nt);
  for (unsigned u = 0; u < k->nparams; u++) {
    const tile_param_info *pi = &k->params[u];
    if (!pi->is_tensor) continue;
    const struct ir_param *p = &f->params.v[k->param_ir[u]];
    const struct ir_type *ty = ir_vtype(f, p->value);
    sb_printf(sb, "    {\"%s\", %u, %u, %d, %d, {", pi->name, u, pi->rank, ir_dtype_bytes((ir_dtype)pi->dtype),
              pi->is_used ? 1 : 0);
    for (unsigned d = 0; d < 4; d++) {
      int sym = -1;
      if (d < pi->rank && pi->dim_size[d] < 0) sym = (int)ak->sym_of[f->values.v[IR_DIM_SYM_VALUE(ty->dims[d])].index];
      sb_printf(sb, "%s%d", d ? ", " : "", sym);
    }
    sb_puts(sb, "}, {");
    for (unsigned d = 0; d < 4; d++)
      sb_printf(sb, "%s%lld", d ? ", " : "", (long long)(d < pi->rank && pi->dim_size[d] >= 0 ? pi->dim_size[d] : 0));
    sb_puts(sb, "}},\n");
  }
  if (!ak->ntensors) sb_puts(sb, "    {0}\n");
  sb_puts(sb, "  };\n");
  sb_printf(sb, "  static const char *const aot_sym_names[%u] = {", ns);
  unsigned y = 0;
  for (uint32_t i = 0; i < f->params.n; i++)
    if (f->params.v[i].kind == IR_PARAM_SHAPE) sb_printf(sb, "%s\"%s\"", y++ ? ", " : "", f->params.v[i].name);
  if (!ak->nsyms) sb_puts(sb, "NULL");
  sb_puts(sb, "};\n");
  sb_printf(sb, "  const void *const aot_args[%u] = {", nt);
  unsigned j = 0;
  for (unsigned u = 0; u < k->nparams; u++)
    if (k->params[u].is_tensor) sb_printf(sb, "%s%s", j++ ? ", " : "", ak->arg_names[u]);
  if (!ak->ntensors) sb_puts(sb, "NULL");
  sb_puts(sb, "};\n");
  sb_printf(sb, "  struct aot_bound aot_t[%u];\n  int64_t aot_sym[%u] = {0};\n  int aot_sym_from[%u];\n", nt, ns, ns);
  sb_printf(sb, "  int aot_aligned = 1, aot_st;\n  char aot_why[256] = \"\";\n");
  sb_printf(sb, "  for (unsigned i = 0; i < %u; i++) aot_sym_from[i] = -1;\n", ns);
  sb_printf(sb, "  for (unsigned i = 0; i < %u; i++)\n", ak->ntensors);
  sb_printf(sb, "    if ((aot_st = aot_bind(\"%s\", aot_tp, i, aot_args[i], &aot_t[i], aot_sym, aot_sym_from, aot_sym_names,\n"
                "                           &aot_aligned, aot_why, sizeof aot_why)))\n      return aot_st;\n", k->name);
  sb_printf(sb, "  if ((aot_st = aot_check_symbols(\"%s\", %u, aot_sym, aot_sym_from, aot_sym_names, &aot_aligned, aot_why,\n"
                "                                 sizeof aot_why)))\n    return aot_st;\n", k->name, ak->nsyms);
  for (unsigned u = 0; u < k->nparams; u++)
    if (!k->params[u].is_tensor && k->params[u].dtype == TILE_BOOL)
      sb_printf(sb, "  if (%s != 0 && %s != 1)\n    return aot_fail(TILE_AOT_BAD_LAUNCH, \"%s: argument %u ('%s'): a bool "
                    "must be 0 or 1, got %%d\", %s);\n", ak->arg_names[u], ak->arg_names[u], k->name, u,
                k->params[u].name, ak->arg_names[u]);
  /* the grid */
  sb_puts(sb, "  int64_t aot_grid[3] = {0, 0, 0};\n  {\n");
  if (!emit_grid_block(sb, a, ak, IR_GRID_BLOCK, 4, err, errlen)) return false;
  const struct ir_block *g = &f->blocks.v[IR_GRID_BLOCK];
  if (g->ops.n) {
    const struct ir_op *op = &f->ops.v[VEC_LAST(g->ops)];
    for (uint32_t d = 0; d < 3 && d < op->nargs; d++)
      sb_printf(sb, "    aot_grid[%u] = %s;\n", d, grid_operand(a, ak, op->args[d]));
  }
  sb_puts(sb, "  }\n");
  /* the parameters, in the code's order (cg.h) */
  unsigned nslots = 0;
  for (uint32_t i = 0; i < f->params.n; i++)
    nslots += f->params.v[i].kind == IR_PARAM_TENSOR ? 1u + (unsigned)ir_vtype(f, f->params.v[i].value)->rank : 1u;
  sb_printf(sb, "  uint64_t aot_slot[%u];\n  void *aot_param[%u];\n", nslots ? nslots : 1, nslots + CG_MAX_TMAPS);
  unsigned n = 0;
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_TENSOR) {
      unsigned t = ak->tensor_of[p->source_index];
      sb_printf(sb, "  aot_slot[%u] = (uint64_t)(uintptr_t)aot_t[%u].data;\n", n++, t);
      for (int d = 0; d < ir_vtype(f, p->value)->rank; d++)
        sb_printf(sb, "  aot_slot[%u] = (uint64_t)aot_t[%u].strides[%d];\n", n++, t, d);
      continue;
    }
    ir_dtype dt = (ir_dtype)ir_vtype(f, p->value)->dtype;
    const char *v = p->kind == IR_PARAM_SHAPE ? arena_printf(a, "aot_sym[%u]", ak->sym_of[i]) : ak->arg_names[p->source_index];
    if (p->kind == IR_PARAM_SHAPE || dt == DT_I32 || dt == DT_BOOL)
      sb_printf(sb, "  { int32_t x = (int32_t)%s; memcpy(&aot_slot[%u], &x, 4); }\n", v, n);
    else if (dt == DT_U32)
      sb_printf(sb, "  { uint32_t x = %s; memcpy(&aot_slot[%u], &x, 4); }\n", v, n);
    else if (dt == DT_I8 || dt == DT_I16)
      sb_printf(sb, "  { int32_t x = (int32_t)aot_wrap(%d, %s); memcpy(&aot_slot[%u], &x, 4); }\n", ir_dtype_bits(dt), v, n);
    else if (dt == DT_I64)
      sb_printf(sb, "  { int64_t x = %s; memcpy(&aot_slot[%u], &x, 8); }\n", v, n);
    else if (dt == DT_F64)
      sb_printf(sb, "  { double x = %s; memcpy(&aot_slot[%u], &x, 8); }\n", v, n);
    else
      sb_printf(sb, "  { float x = %s; memcpy(&aot_slot[%u], &x, 4); }\n", v, n);
    n++;
  }
  sb_printf(sb, "  for (unsigned i = 0; i < %u; i++) aot_param[i] = &aot_slot[i];\n", n);
  sb_printf(sb, "  return aot_run(&aot_k%u, aot_tp, aot_t, aot_aligned, aot_why, aot_grid, stream, aot_param, %u);\n}\n\n",
            index, n);
  return true;
}

/* Compiles kernel `name` (NULL: the only one) and its variants into ak. */
static tile_status build_kernel(tile_context *ctx, const char *file, const char *src, size_t len,
                                const tile_compile_options *copts, const char *name, const tile_aot_options *ao,
                                struct arena *a, struct aot_kernel *ak) {
  tile_compile_options co = *copts;
  co.kernel = name;
  co.device = TILE_DEVICE_CPU; /* the generic IR; targets come below */
  co.arch = NULL;
  co.flags = (co.flags | TILE_NO_CACHE | TILE_FIXED_CONFIG) & ~(unsigned)(TILE_AUTOTUNE | TILE_AUTOCONFIG);
  tile_status st = rt_compile_string(ctx, file, src, len, &co, true, &ak->k);
  if (st) return st;
  tile_kernel *k = ak->k;
  struct ir_func *f = k->ir;
  ak->fn = arena_printf(a, "%s_%s", ao->symbol, k->name);
  ak->arg_names = ARENA_NEWN(a, const char *, k->nparams + 1);
  ak->tensor_of = ARENA_NEWN(a, unsigned, k->nparams + 1);
  for (unsigned u = 0; u < k->nparams; u++) {
    const tile_param_info *pi = &k->params[u];
    ak->arg_names[u] = c_name(a, pi->name);
    ak->tensor_of[u] = pi->is_tensor ? ak->ntensors++ : UINT32_MAX;
    if (!pi->is_tensor && (pi->dtype == TILE_F16 || pi->dtype == TILE_BF16 || pi->dtype == TILE_F8E4M3 ||
                           pi->dtype == TILE_F8E5M2))
      return rt_error(ctx, TILE_UNSUPPORTED, "kernel '%s': scalar parameter '%s' is %s; tilec aot takes f32, f64 and "
                      "integer scalars only", k->name, pi->name, rt_dtype_name(pi->dtype));
  }
  ak->sym_of = ARENA_NEWN(a, uint32_t, f->params.n + 1);
  for (uint32_t i = 0; i < f->params.n; i++)
    ak->sym_of[i] = f->params.v[i].kind == IR_PARAM_SHAPE ? ak->nsyms++ : UINT32_MAX;
  unsigned specs = ao->specializations ? ao->specializations : TILE_AOT_ALIGNED;
  ak->variants = ARENA_NEWN(a, struct aot_variant, 2 * ao->narchs);
  for (unsigned i = 0; i < ao->narchs; i++) {
    const struct tl_target *target = tl_target_find(ao->archs[i]);
    if (!target)
      return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown target architecture '%s' (known: %s)", ao->archs[i],
                      tl_target_names());
    for (int aligned = 1; aligned >= 0; aligned--) {
      if (!(specs & (aligned ? TILE_AOT_ALIGNED : TILE_AOT_UNALIGNED))) continue;
      struct aot_variant *v = &ak->variants[ak->nvariants++];
      v->target = target;
      v->aligned = aligned;
      struct ir_func *clone = ir_func_clone(f, a);
      struct pass_options po = {0};
      po.verify_each = (k->flags & TILE_VERIFY_EACH) != 0;
      st = rt_gpu_emit_code(ctx, clone, target, &k->sched, CG_OUT_PTX, !aligned, &po, a, &v->res);
      if (st) return st;
      if (v->res.smem_bytes > target->smem_optin)
        return rt_error_code(ctx, TILE_UNSUPPORTED, TL_CODE_SMEM,
                             "needs %u bytes of shared memory per block; %s allows %u (kernel '%s' [%s])",
                             v->res.smem_bytes, target->name, target->smem_optin, k->name, k->config ? k->config : "");
      if (ao->assemble) {
        const void *image = NULL;
        size_t image_len = 0;
        char err[2048] = "";
        if (ao->assemble(ao->assemble_ud, target->name, v->res.text, v->res.len, &image, &image_len, err, sizeof err) ||
            !image || !image_len)
          return rt_error(ctx, TILE_COMPILE, "assembling the %s PTX of '%s' failed%s%s", target->name, k->name,
                          err[0] ? ": " : "", err);
        void *copy = arena_alloc(a, image_len);
        memcpy(copy, image, image_len);
        v->cubin = copy;
        v->cubin_len = image_len;
      }
    }
  }
  return TILE_OK;
}

/* The body of tile_emit_aot, under the scratch arena's recovery point. */
static tile_status emit_aot(tile_context *ctx, const char *name, const char *src, size_t len,
                            const tile_compile_options *co, const tile_aot_options *ao, struct arena *a,
                            struct aot_kernel *ks, unsigned nk, struct strbuf *h, struct strbuf *c) {
  tile_status st = TILE_OK;
  for (unsigned i = 0; i < nk && !st; i++)
    st = build_kernel(ctx, name, src, len, co, ao->nkernels ? ao->kernels[i] : co->kernel, ao, a, &ks[i]);
  if (st) return st;
  bool tma = false;
  for (unsigned i = 0; i < nk; i++)
    for (unsigned v = 0; v < ks[i].nvariants; v++) tma |= ks[i].variants[v].res.ntmaps > 0;
  for (unsigned i = 0; i < nk; i++)
    for (unsigned j = 0; j < i; j++)
      if (strcmp(ks[i].k->name, ks[j].k->name) == 0)
        return rt_error(ctx, TILE_INVALID_ARGUMENT, "kernel '%s' is asked for twice", ks[i].k->name);

  const char *sym = ao->symbol;
  char guard[128];
  size_t gl = 0;
  for (const char *p = sym; *p && gl < sizeof guard - 3; p++)
    guard[gl++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
  memcpy(guard + gl, "_H", 3);

  /* the header */
  sb_printf(h, "/* %s - generated by tilec aot (%s) from %s; do not edit.\n", ao->header_name, rt_version(), name);
  sb_puts(h, " *\n * Launchers of kernels compiled ahead of time. Build the generated .c with any C11 compiler\n"
             " * that has GCC's builtins (gcc, clang) and link the program with -lcuda; nothing else (no\n"
             " * LLVM, no libtile) is needed at run time. Each launcher runs in the calling thread's current\n"
             " * CUDA context; it loads its module there on first use (once per context: the cubin for the\n"
             " * device when there is one, else the PTX, which the driver compiles), checks the arguments as\n"
             " * tile_launch does, computes the grid from the sizes and enqueues the kernel on `stream`\n"
             " * (a CUstream; NULL: the legacy default stream). It is thread-safe. */\n");
  sb_printf(h, "#ifndef %s\n#define %s\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", guard, guard);
  sb_puts(h, "#ifndef TILE_AOT_COMMON\n#define TILE_AOT_COMMON\n"
             "/* A tensor argument: shared by every header tilec aot writes. */\n"
             "typedef struct tile_aot_tensor {\n"
             "  void *data;         /* device pointer */\n"
             "  int64_t shape[4];   /* sizes of the kernel's rank dimensions */\n"
             "  int64_t strides[4]; /* in elements; all zero = contiguous row-major */\n"
             "} tile_aot_tensor;\n"
             "enum tile_aot_status {\n"
             "  TILE_AOT_OK = 0,\n"
             "  TILE_AOT_BAD_LAUNCH = 1, /* arguments rejected (the message names the argument) */\n"
             "  TILE_AOT_NO_CODE = 2,    /* no code for this device's compute capability */\n"
             "  TILE_AOT_CUDA = 3        /* the driver failed (the message has its CUresult) */\n"
             "};\n#endif\n\n");
  for (unsigned i = 0; i < nk; i++) emit_header_kernel(h, a, &ks[i], name);
  sb_printf(h, "/* Why the last launcher call of this thread failed (\"\" if none has). */\n"
               "const char *%s_errmsg(void);\n"
               "/* Unloads the modules of this file's kernels from the current context (before destroying it). */\n"
               "void %s_unload(void);\n\n#ifdef __cplusplus\n}\n#endif\n#endif\n", sym, sym);

  /* the source */
  sb_printf(c, "/* generated by tilec aot (%s) from %s; do not edit. See %s. */\n", rt_version(), name, ao->header_name);
  sb_printf(c, "#include \"%s\"\n\n#define AOT_TMA %d\n", ao->header_name, tma ? 1 : 0);
  for (size_t i = 0; i < TL_ARRAY_LEN(prelude); i++) {
    sb_puts(c, prelude[i]);
    sb_putc(c, '\n');
  }
  sb_puts(c, "\n/* ---- the kernels ---- */\n\n");
  char err[512];
  for (unsigned i = 0; i < nk; i++)
    if (!emit_launcher(c, a, &ks[i], i, err, sizeof err)) return rt_error(ctx, TILE_UNSUPPORTED, "%s", err);
  sb_printf(c, "const char *%s_errmsg(void) { return aot_message; }\n\nvoid %s_unload(void) {\n", sym, sym);
  for (unsigned i = 0; i < nk; i++) sb_printf(c, "  aot_unload(&aot_k%u);\n", i);
  sb_puts(c, "}\n");
  return TILE_OK;
}

static char *copy_out(tile_context *ctx, struct strbuf *sb, size_t *len) {
  char *p = tl_malloc(&ctx->alloc, sb->len + 1);
  if (!p) return NULL;
  memcpy(p, sb_str(sb), sb->len + 1);
  if (len) *len = sb->len;
  return p;
}

/* tile_emit_aot after its checks: the scratch arena and its recovery point (in a function
 * of its own, so that none of the caller's locals is live across setjmp). */
static tile_status emit_aot_guarded(tile_context *ctx, const char *name, const char *src, size_t len,
                                    const tile_compile_options *co, const tile_aot_options *ao, char **header,
                                    size_t *header_len, char **source, size_t *source_len) {
  unsigned nk = ao->nkernels ? ao->nkernels : 1;
  struct arena a;
  jmp_buf oom;
  arena_init(&a, &ctx->alloc, &oom);
  struct aot_kernel *volatile ks = NULL;
  if (setjmp(oom)) {
    for (unsigned i = 0; ks && i < nk; i++) rt_kernel_release(ks[i].k);
    arena_free(&a);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  ks = ARENA_NEWN(&a, struct aot_kernel, nk);
  memset(ks, 0, sizeof(struct aot_kernel) * nk);
  struct strbuf h, c;
  sb_init(&h, &a);
  sb_init(&c, &a);
  tile_status st = emit_aot(ctx, name, src, len, co, ao, &a, ks, nk, &h, &c);
  if (!st) {
    *header = copy_out(ctx, &h, header_len);
    *source = copy_out(ctx, &c, source_len);
    if (!*header || !*source) {
      tl_free(*header);
      tl_free(*source);
      *header = *source = NULL;
      st = rt_error(ctx, TILE_NOMEM, "out of memory");
    }
  }
  a.oom = NULL;
  for (unsigned i = 0; i < nk; i++) rt_kernel_release(ks[i].k);
  arena_free(&a);
  return st;
}

TILE_API tile_status tile_emit_aot(tile_context *ctx, const char *name, const char *src, size_t len,
                                   const tile_compile_options *copts, const tile_aot_options *ao, char **header,
                                   size_t *header_len, char **source, size_t *source_len) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (!header || !source || !ao || !src)
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "header, source, options and the source text are required");
  *header = *source = NULL;
  if (!ao->narchs || !ao->archs) return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_aot_options: no target architecture");
  if (!is_identifier(ao->symbol))
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_aot_options.symbol '%s' is not a C identifier",
                    ao->symbol ? ao->symbol : "(null)");
  if (!ao->header_name || !ao->header_name[0] || strpbrk(ao->header_name, "\"\\\n"))
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_aot_options.header_name must be a file name to #include");
  if (ao->specializations & ~(unsigned)(TILE_AOT_ALIGNED | TILE_AOT_UNALIGNED))
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown tile_aot_options.specializations bits 0x%x", ao->specializations);
  if (ao->nkernels && !ao->kernels) return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_aot_options.kernels is NULL");
  tile_compile_options co = {0};
  if (copts) co = *copts;
  return emit_aot_guarded(ctx, name ? name : "<string>", src, len, &co, ao, header, header_len, source, source_len);
}
