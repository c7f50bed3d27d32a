/* fake_libcuda.c - a stand-in for libcuda.so.1 that lets the runtime's CUDA paths run on a
 * machine without a GPU (tests/cli/fake_gpu.sh builds it and points TILE_LIBCUDA at it).
 *
 * It exports, under their versioned names, the Driver API entry points runtime/cudrv.c
 * resolves (no cuGetProcAddress_v2, so the dlsym fallback is used), and behaves like one
 * "Fake H200" (compute capability 9.0, 227 KiB of opt-in shared memory):
 *  - memory is host memory (cuMemAlloc = aligned_alloc); copies and fills are memcpy/memset;
 *  - a module loads from PTX text (".version" and ".entry" required: logged as "jit") or from
 *    a fake cubin (logged as "load-cubin"): an ELF64 image for EM_CUDA whose one PROGBITS
 *    section holds "FAKECUBIN\n" + PTX; cuLink* turns PTX into such a cubin (logged as
 *    "link"); FAKE_CUDA_NO_LINK=1 makes cuLinkCreate fail. Like the real driver, the loader
 *    is given no length: it trusts the ELF header's offsets and reads every section it
 *    names (so an image whose header lies makes it read past the buffer, which AddressSanitizer
 *    reports);
 *  - cuLaunchKernel checks its configuration and runs nothing; every launch advances a
 *    virtual clock by a cost derived from the kernel's PTX, so configurations time
 *    differently and event timing is deterministic;
 *  - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT on a thread where none
 *    is current (the per-thread current context is tracked), which checks that threads
 *    building code make the context current first.
 * FAKE_CUDA_LOG=FILE appends one line per jit, link, load-cubin and launch (a launch with
 * programmatic stream serialization, cuLaunchKernelEx, is preceded by "pdl NAME"). A launch line is
 *   launch NAME grid=X,Y,Z block=T smem=BYTES code=HASH params=N args=A,B,...
 * with the kernel's parameters read as its PTX declares them (.ptr: "p", or "null" for 0;
 * integers in decimal, floats with %g, a 128-byte TMA descriptor as "tmap"), so that tests
 * can compare what two launchers pass (tests/cli/aot.sh). FAKE_CUDA_CC=MAJOR.MINOR changes
 * the device's compute capability (default 9.0).
 * Built with -DFAKE_CUDA_PTXAS_MAIN it is instead a stand-in for ptxas: `fake_ptxas
 * -arch=sm_XX -o OUT IN.ptx` writes the fake cubin of the PTX.                        */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
  OK = 0,
  INVALID_VALUE = 1,
  NOT_INITIALIZED = 3,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  INVALID_PTX = 218,
  NOT_FOUND = 500,
  NOT_SUPPORTED = 801
};

#define API __attribute__((visibility("default")))

static int ctx_token;
static void *const primary = &ctx_token;
static __thread void *current;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double clock_ms;
static int inited;

static void logf_(const char *fmt, ...) {
  const char *path = getenv("FAKE_CUDA_LOG");
  if (!path || !*path) return;
  pthread_mutex_lock(&mu);
  FILE *f = fopen(path, "a");
  if (f) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
  }
  pthread_mutex_unlock(&mu);
}

/* ---- errors, init, devices ---- */

API CUresult cuGetErrorName(CUresult e, const char **s) {
  *s = e == OK ? "CUDA_SUCCESS" : e == INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
       : e == INVALID_IMAGE                            ? "CUDA_ERROR_INVALID_IMAGE"
       : e == NOT_SUPPORTED                            ? "CUDA_ERROR_NOT_SUPPORTED"
                                                       : "CUDA_ERROR_FAKE";
  return OK;
}
API CUresult cuGetErrorString(CUresult e, const char **s) {
  *s = e == OK ? "no error" : "an error of the fake driver";
  return OK;
}
API CUresult cuInit(unsigned flags) {
  (void)flags;
  inited = 1;
  return OK;
}
API CUresult cuDriverGetVersion(int *v) {
  *v = 12080;
  return OK;
}
API CUresult cuDeviceGetCount(int *n) {
  *n = 1;
  return inited ? OK : NOT_INITIALIZED;
}
API CUresult cuDeviceGet(int *d, int ordinal) {
  if (ordinal != 0) return INVALID_DEVICE;
  *d = 0;
  return OK;
}
API CUresult cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  snprintf(name, (size_t)len, "Fake H200 (tests)");
  return OK;
}
/* The compute capability x 10: FAKE_CUDA_CC ("8.6"), else 9.0. */
static int fake_cc(void) {
  const char *s = getenv("FAKE_CUDA_CC");
  int major = 0, minor = 0;
  if (s && sscanf(s, "%d.%d", &major, &minor) == 2 && major > 0 && minor >= 0 && minor < 10) return major * 10 + minor;
  return 90;
}
API CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  switch (attr) {
  case 1: *v = 1024; break;        /* max threads per block */
  case 13: *v = 1980000; break;    /* clock */
  case 16: *v = 132; break;        /* SMs */
  case 36: *v = 3201000; break;    /* memory clock */
  case 37: *v = 6144; break;       /* bus width */
  case 38: *v = 50 << 20; break;   /* L2 */
  case 75: *v = fake_cc() / 10; break; /* cc major */
  case 76: *v = fake_cc() % 10; break; /* cc minor */
  case 81: *v = 233472; break;     /* smem per SM */
  case 82: *v = 65536; break;      /* regs per SM */
  case 97: *v = 232448; break;     /* opt-in smem per block */
  default: return INVALID_VALUE;
  }
  return OK;
}
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = primary;
  return OK;
}
API CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  (void)dev;
  return OK;
}
API CUresult cuCtxSetCurrent(void *ctx) {
  current = ctx;
  return OK;
}
API CUresult cuCtxGetCurrent(void **ctx) {
  *ctx = current;
  return OK;
}
API CUresult cuCtxPushCurrent_v2(void *ctx) {
  current = ctx;
  return OK;
}
API CUresult cuCtxPopCurrent_v2(void **ctx) {
  if (ctx) *ctx = current;
  current = NULL;
  return OK;
}
API CUresult cuCtxSynchronize(void) { return current ? OK : INVALID_CONTEXT; }
API CUresult cuCtxGetDevice(int *dev) {
  if (!current) return INVALID_CONTEXT;
  *dev = 0;
  return OK;
}

/* ---- memory ---- */

struct alloc {
  char *p;
  size_t n;
};
static struct alloc allocs[4096];
static int nallocs;

static int find_alloc(uint64_t p) {
  for (int i = 0; i < nallocs; i++)
    if (p >= (uint64_t)(uintptr_t)allocs[i].p && p < (uint64_t)(uintptr_t)allocs[i].p + allocs[i].n) return i;
  return -1;
}

API CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
  if (!current) return INVALID_CONTEXT;
  char *m = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!m) return 2;
  pthread_mutex_lock(&mu);
  if (nallocs == 4096) {
    pthread_mutex_unlock(&mu);
    free(m);
    return 2;
  }
  allocs[nallocs++] = (struct alloc){m, n};
  pthread_mutex_unlock(&mu);
  *p = (uint64_t)(uintptr_t)m;
  return OK;
}
API CUresult cuMemFree_v2(uint64_t p) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nallocs; i++)
    if ((uint64_t)(uintptr_t)allocs[i].p == p) {
      free(allocs[i].p);
      allocs[i] = allocs[--nallocs];
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return INVALID_VALUE;
}
static CUresult check_range(uint64_t p, size_t n) {
  pthread_mutex_lock(&mu);
  int i = find_alloc(p);
  int ok = i >= 0 && p + n <= (uint64_t)(uintptr_t)allocs[i].p + allocs[i].n;
  pthread_mutex_unlock(&mu);
  return ok || n == 0 ? OK : INVALID_VALUE;
}
API CUresult cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) {
  if (check_range(d, n)) return INVALID_VALUE;
  memcpy((void *)(uintptr_t)d, s, n);
  return OK;
}
API CUresult cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) {
  if (check_range(s, n)) return INVALID_VALUE;
  memcpy(d, (void *)(uintptr_t)s, n);
  return OK;
}
API CUresult cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
  if (check_range(d, n) || check_range(s, n)) return INVALID_VALUE;
  memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return OK;
}
API CUresult cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) {
  if (check_range(d, n)) return INVALID_VALUE;
  memset((void *)(uintptr_t)d, v, n);
  return OK;
}
API CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *s) {
  (void)s;
  if (check_range(d, 4 * n)) return INVALID_VALUE;
  for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)d + 4 * i, &v, 4);
  return OK;
}
API CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) {
  (void)st;
  return cuMemcpyHtoD_v2(d, s, n);
}
API CUresult cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) {
  (void)st;
  return cuMemcpyDtoH_v2(d, s, n);
}
API CUresult cuPointerGetAttribute(void *data, int attr, uint64_t p) {
  pthread_mutex_lock(&mu);
  int i = find_alloc(p);
  pthread_mutex_unlock(&mu);
  if (i < 0) return INVALID_VALUE;
  if (attr == 2) *(unsigned *)data = 2; /* device memory */
  else if (attr == 9) *(int *)data = 0;
  else return INVALID_VALUE;
  return OK;
}

/* ---- modules ---- */

struct function {
  struct module *m;
  struct function *next; /* the module's functions, freed with it */
  char name[256];
  double cost_ms;
  uint64_t code_hash; /* of the module's PTX */
  int dyn_smem;
  int nparams;
  char param_kind[512]; /* per parameter, from the PTX: p pointer, u/s 8-byte int, i 4-byte int,
                           f f32, d f64, t 128-byte block, ? other */
};
struct module {
  char *ptx;
  struct function *funcs;
};

static const char cubin_magic[] = "FAKECUBIN\n";

static int is_ptx(const char *s, size_t n) {
  return n > 0 && memmem(s, n, ".version", 8) && memmem(s, n, ".entry", 6);
}

/* ---- fake cubins: ELF64, little endian, EM_CUDA ----
 * [ELF header][payload: FAKECUBIN\n PTX NUL][section headers: null, PROGBITS(payload)] */
enum { EHDR = 64, SHDR = 64, EM_CUDA = 190 };

static void put16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* A fake cubin of the PTX; *size gets its length. */
static unsigned char *make_cubin(const char *ptx, size_t *size) {
  size_t n = strlen(ptx), payload = sizeof cubin_magic - 1 + n + 1;
  size_t shoff = (EHDR + payload + 7) & ~(size_t)7, total = shoff + 2 * SHDR;
  unsigned char *img = calloc(1, total);
  if (!img) return NULL;
  memcpy(img, "\x7f" "ELF", 4);
  img[4] = 2; /* ELFCLASS64 */
  img[5] = 1; /* little endian */
  img[6] = 1; /* EV_CURRENT */
  img[7] = 0x33; /* ELFOSABI_CUDA */
  put16(img + 16, 2); /* ET_EXEC */
  put16(img + 18, EM_CUDA);
  put32(img + 20, 1);
  put64(img + 40, shoff);
  put16(img + 52, EHDR);
  put16(img + 58, SHDR);
  put16(img + 60, 2);
  memcpy(img + EHDR, cubin_magic, sizeof cubin_magic - 1);
  memcpy(img + EHDR + sizeof cubin_magic - 1, ptx, n + 1);
  unsigned char *sh = img + shoff + SHDR; /* section 1 (section 0 is the null one) */
  put32(sh + 4, 1);                       /* SHT_PROGBITS */
  put64(sh + 24, EHDR);
  put64(sh + 32, payload);
  *size = total;
  return img;
}

/* The PTX inside a fake cubin, read as the driver reads an image: from its header's
 * offsets, without knowing the buffer's length. NULL if it is not one. */
static const char *cubin_ptx(const unsigned char *img) {
  if (get(img + 18, 2) != EM_CUDA || img[4] != 2 || img[5] != 1) return NULL;
  uint64_t shoff = get(img + 40, 8), shnum = get(img + 60, 2);
  const char *ptx = NULL;
  unsigned sum = 0;
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *sh = img + shoff + i * SHDR;
    uint64_t type = get(sh + 4, 4), off = get(sh + 24, 8), size = get(sh + 32, 8);
    if (type == 8) continue; /* SHT_NOBITS */
    for (uint64_t b = 0; b < size; b++) sum += img[off + b]; /* every byte, as a loader would */
    if (type == 1 && size > sizeof cubin_magic && memcmp(img + off, cubin_magic, sizeof cubin_magic - 1) == 0 &&
        img[off + size - 1] == 0)
      ptx = (const char *)img + off + sizeof cubin_magic - 1;
  }
  (void)sum;
  return ptx;
}

API CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned nopt, int *opts, void **vals) {
  if (!current) return INVALID_CONTEXT;
  const char *s = image;
  const char *ptx = NULL;
  if (memcmp(s, "\x7f" "ELF", 4) == 0) {
    ptx = cubin_ptx(image);
    if (!ptx) return INVALID_IMAGE;
    logf_("load-cubin");
  } else if (is_ptx(s, strlen(s))) {
    ptx = s;
    logf_("jit");
  } else {
    return INVALID_IMAGE;
  }
  for (unsigned i = 0; i < nopt; i++) /* logs: report nothing written */
    if (opts[i] == 4 || opts[i] == 6) vals[i] = (void *)(uintptr_t)0;
  struct module *m = calloc(1, sizeof *m);
  m->ptx = strdup(ptx);
  *mod = m;
  return OK;
}
API CUresult cuModuleUnload(void *mod) {
  struct module *m = mod;
  if (!m) return INVALID_VALUE;
  while (m->funcs) {
    struct function *f = m->funcs;
    m->funcs = f->next;
    free(f);
  }
  free(m->ptx);
  free(m);
  return OK;
}
API CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
  struct module *m = mod;
  char want[300];
  snprintf(want, sizeof want, ".entry %s(", name);
  if (!strstr(m->ptx, want)) {
    snprintf(want, sizeof want, ".entry %s", name);
    if (!strstr(m->ptx, want)) return NOT_FOUND;
  }
  struct function *f = calloc(1, sizeof *f);
  f->m = m;
  f->next = m->funcs;
  m->funcs = f;
  snprintf(f->name, sizeof f->name, "%s", name);
  uint64_t h = 1469598103934665603ull;
  for (const char *p = m->ptx; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  f->cost_ms = 0.05 + (double)(h % 1000) / 1000.0;
  f->code_hash = h;
  f->dyn_smem = 48 * 1024;
  /* the parameter list: ".param TYPE ... NAME" lines up to the entry's ")" */
  const char *p = strstr(m->ptx, want);
  const char *end = p ? strchr(p, ')') : NULL;
  while (p && end && (p = strstr(p, ".param")) && p < end && f->nparams < (int)sizeof f->param_kind - 1) {
    const char *eol = strpbrk(p, ",)");
    if (!eol) break;
    char decl[256];
    snprintf(decl, sizeof decl, "%.*s", (int)(eol - p), p);
    char kind = strstr(decl, ".ptr") ? 'p' : strstr(decl, "[128]") ? 't' : strstr(decl, ".u64") || strstr(decl, ".s64") || strstr(decl, ".b64") ? 'u'
                : strstr(decl, ".u32") || strstr(decl, ".s32") || strstr(decl, ".b32") ? 'i' : strstr(decl, ".f32") ? 'f'
                : strstr(decl, ".f64") ? 'd' : '?';
    f->param_kind[f->nparams++] = kind;
    p = eol;
  }
  *fn = f;
  return OK;
}
API CUresult cuModuleGetGlobal_v2(uint64_t *p, size_t *n, void *mod, const char *name) {
  (void)p, (void)n, (void)mod, (void)name;
  return NOT_FOUND;
}
API CUresult cuFuncGetAttribute(int *v, int attr, void *fn) {
  struct function *f = fn;
  switch (attr) {
  case 0: *v = 1024; break;
  case 1: *v = 0; break;
  case 3: *v = 0; break;
  case 4: *v = 96; break;
  case 8: *v = f->dyn_smem; break;
  default: return INVALID_VALUE;
  }
  return OK;
}
API CUresult cuFuncSetAttribute(void *fn, int attr, int v) {
  struct function *f = fn;
  if (attr != 8 || v < 0 || v > 232448) return INVALID_VALUE;
  f->dyn_smem = v;
  return OK;
}
API CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, void *stream, void **params, void **extra) {
  (void)stream, (void)params, (void)extra;
  struct function *f = fn;
  if (!current) return INVALID_CONTEXT;
  if (!f || !gx || !gy || !gz || gy > 65535 || gz > 65535 || bx * by * bz > 1024 || bx * by * bz == 0)
    return INVALID_VALUE;
  if ((int)smem > f->dyn_smem) return INVALID_VALUE;
  pthread_mutex_lock(&mu);
  clock_ms += f->cost_ms;
  pthread_mutex_unlock(&mu);
  /* every parameter is read as declared: a launcher that passes too few reads past its
   * array (AddressSanitizer reports it) and the values show in the log */
  char args[4096] = "";
  size_t n = 0;
  for (int i = 0; i < f->nparams && params && n < sizeof args - 64; i++) {
    const void *v = params[i];
    uint64_t u = 0;
    int32_t w = 0;
    float x = 0;
    double y = 0;
    const char *sep = i ? "," : "";
    switch (f->param_kind[i]) {
    case 'p': memcpy(&u, v, 8); n += (size_t)snprintf(args + n, sizeof args - n, "%s%s", sep, u ? "p" : "null"); break;
    case 'u': memcpy(&u, v, 8); n += (size_t)snprintf(args + n, sizeof args - n, "%s%lld", sep, (long long)u); break;
    case 'i': memcpy(&w, v, 4); n += (size_t)snprintf(args + n, sizeof args - n, "%s%d", sep, w); break;
    case 'f': memcpy(&x, v, 4); n += (size_t)snprintf(args + n, sizeof args - n, "%s%g", sep, (double)x); break;
    case 'd': memcpy(&y, v, 8); n += (size_t)snprintf(args + n, sizeof args - n, "%s%g", sep, y); break;
    case 't': {
      unsigned char map[128];
      memcpy(map, v, 128);
      n += (size_t)snprintf(args + n, sizeof args - n, "%stmap", sep);
      break;
    }
    default: n += (size_t)snprintf(args + n, sizeof args - n, "%s?", sep); break;
    }
  }
  logf_("launch %s grid=%u,%u,%u block=%u smem=%u code=%016llx params=%d args=%s", f->name, gx, gy, gz, bx * by * bz,
        smem, (unsigned long long)f->code_hash, f->nparams, args);
  return OK;
}
/* cuLaunchKernelEx: the configuration of cuLaunchKernel plus attributes; programmatic
 * stream serialization (attribute 6) is logged as "pdl NAME" before the launch line, any
 * other attribute refused. FAKE_CUDA_NO_PDL=1 refuses it (a driver without the feature). */
struct fake_launch_attr {
  int id;
  char pad[4];
  union {
    char pad[64];
    int value;
  } v;
};
struct fake_launch_config {
  unsigned gx, gy, gz, bx, by, bz, smem;
  void *stream;
  struct fake_launch_attr *attrs;
  unsigned nattrs;
};
API CUresult cuLaunchKernelEx(const struct fake_launch_config *c, void *fn, void **params, void **extra) {
  if (!c || (c->nattrs && !c->attrs)) return INVALID_VALUE;
  bool pdl = false;
  for (unsigned i = 0; i < c->nattrs; i++) {
    if (c->attrs[i].id != 6 || getenv("FAKE_CUDA_NO_PDL")) return INVALID_VALUE;
    pdl = c->attrs[i].v.value != 0;
  }
  if (pdl && fn) logf_("pdl %s", ((struct function *)fn)->name);
  return cuLaunchKernel(fn, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params, extra);
}
API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *b, void *fn, int t, size_t s) {
  (void)fn, (void)t, (void)s;
  *b = 1;
  return OK;
}

/* TMA descriptors: checks what the real driver checks (rank, 16-byte aligned address and
 * strides, boxes of 1..256) and fills the 128 bytes with a recognizable pattern. */
API CUresult cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dim,
                                    const uint64_t *strides, const uint32_t *box, const uint32_t *es, int interleave,
                                    int swizzle, int l2, int oob) {
  (void)dtype, (void)interleave, (void)l2, (void)oob;
  if (!map || rank < 1 || rank > 5 || ((uintptr_t)addr & 15) || swizzle < 0 || swizzle > 3) return INVALID_VALUE;
  for (uint32_t i = 0; i < rank; i++) {
    if (!dim[i] || !box[i] || box[i] > 256 || es[i] != 1) return INVALID_VALUE;
    if (i + 1 < rank && (strides[i] % 16 || !strides[i])) return INVALID_VALUE;
  }
  memset(map, 0x7e, 128);
  logf_("tmap rank=%u", rank);
  return OK;
}

/* ---- the linker ---- */

struct link {
  char *ptx;
  char *image;
};

API CUresult cuLinkCreate_v2(unsigned n, int *opts, void **vals, void **state) {
  (void)n, (void)opts, (void)vals;
  if (!current) return INVALID_CONTEXT;
  const char *no = getenv("FAKE_CUDA_NO_LINK");
  if (no && *no == '1') return NOT_SUPPORTED;
  *state = calloc(1, sizeof(struct link));
  return OK;
}
API CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name, unsigned n,
                              int *opts, void **vals) {
  (void)name, (void)n, (void)opts, (void)vals;
  struct link *l = state;
  if (!current) return INVALID_CONTEXT;
  if (type != 1 || size == 0 || ((const char *)data)[size - 1] != 0 || !is_ptx(data, size - 1)) return INVALID_PTX;
  l->ptx = strdup(data);
  return OK;
}
API CUresult cuLinkComplete(void *state, void **cubin, size_t *size) {
  struct link *l = state;
  if (!current) return INVALID_CONTEXT;
  if (!l->ptx) return INVALID_VALUE;
  l->image = (char *)make_cubin(l->ptx, size);
  if (!l->image) return 2;
  *cubin = l->image;
  logf_("link");
  return OK;
}
API CUresult cuLinkDestroy(void *state) {
  struct link *l = state;
  if (!l) return INVALID_VALUE;
  free(l->ptx);
  free(l->image);
  free(l);
  return OK;
}

/* ---- streams and events ---- */

API CUresult cuStreamCreate(void **s, unsigned flags) {
  (void)flags;
  *s = malloc(1);
  return OK;
}
API CUresult cuStreamDestroy_v2(void *s) {
  free(s);
  return OK;
}
API CUresult cuStreamSynchronize(void *s) {
  (void)s;
  return current ? OK : INVALID_CONTEXT;
}
API CUresult cuEventCreate(void **e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof(double));
  return OK;
}
API CUresult cuEventRecord(void *e, void *s) {
  (void)s;
  pthread_mutex_lock(&mu);
  *(double *)e = clock_ms;
  pthread_mutex_unlock(&mu);
  return OK;
}
API CUresult cuEventSynchronize(void *e) {
  (void)e;
  return OK;
}
API CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
  *ms = (float)(*(double *)b - *(double *)a);
  return OK;
}
API CUresult cuEventDestroy_v2(void *e) {
  free(e);
  return OK;
}

/* ---- stream-ordered memory pools (host memory again) ----
 * FAKE_CUDA_NO_POOL=1: cuMemPoolCreate is not supported; FAKE_CUDA_POOL_OOM=1: allocations
 * from the pool fail; FAKE_CUDA_CAPTURING=1: every stream reports a graph capture.
 * Logged: "pool-create", "pool-alloc BYTES", "pool-free". */
static int pool_token;
API CUresult cuMemPoolCreate(void **pool, const void *props) {
  if (!current) return INVALID_CONTEXT;
  if (!props) return INVALID_VALUE;
  if (getenv("FAKE_CUDA_NO_POOL")) return NOT_SUPPORTED;
  *pool = &pool_token;
  logf_("pool-create");
  return OK;
}
API CUresult cuMemPoolDestroy(void *pool) { return pool == &pool_token ? OK : INVALID_VALUE; }
API CUresult cuMemPoolSetAttribute(void *pool, int attr, void *value) {
  return pool == &pool_token && attr == 4 && value ? OK : INVALID_VALUE;
}
API CUresult cuMemAllocFromPoolAsync(uint64_t *p, size_t n, void *pool, void *stream) {
  (void)stream;
  if (pool != &pool_token) return INVALID_VALUE;
  if (getenv("FAKE_CUDA_POOL_OOM")) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  CUresult r = cuMemAlloc_v2(p, n);
  if (r == OK) logf_("pool-alloc %zu", n);
  return r;
}
API CUresult cuMemFreeAsync(uint64_t p, void *stream) {
  (void)stream;
  CUresult r = cuMemFree_v2(p);
  if (r == OK) logf_("pool-free");
  return r;
}
API CUresult cuStreamIsCapturing(void *stream, int *status) {
  (void)stream;
  *status = getenv("FAKE_CUDA_CAPTURING") ? 1 : 0;
  return OK;
}

#ifdef FAKE_CUDA_PTXAS_MAIN
/* fake_ptxas -arch=sm_XX -o OUT IN.ptx: the fake cubin of IN (refuses text without an entry). */
int main(int argc, char **argv) {
  const char *out = NULL, *in = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
    else if (argv[i][0] != '-') in = argv[i];
  }
  FILE *f = in ? fopen(in, "rb") : NULL;
  if (!f || !out) {
    fprintf(stderr, "fake_ptxas: usage: fake_ptxas -arch=ARCH -o OUT IN.ptx\n");
    return 2;
  }
  static char ptx[16 << 20];
  size_t n = fread(ptx, 1, sizeof ptx - 1, f);
  fclose(f);
  ptx[n] = 0;
  if (!is_ptx(ptx, n)) {
    fprintf(stderr, "fake_ptxas: %s: not PTX with an entry\n", in);
    return 1;
  }
  size_t size = 0;
  unsigned char *img = make_cubin(ptx, &size);
  FILE *o = fopen(out, "wb");
  if (!img || !o || fwrite(img, 1, size, o) != size || fclose(o) != 0) {
    fprintf(stderr, "fake_ptxas: cannot write %s\n", out);
    return 1;
  }
  free(img);
  return 0;
}
#endif
