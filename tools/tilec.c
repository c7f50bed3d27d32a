/* tilec - the tile compiler's command-line driver. It links only libtile.so's public API.
 *
 *   tilec FILE.tile [--emit=ast|ir|llvm|ptx] [-k KERNEL] [-D NAME=VALUE]... [-o OUT]
 *                   [--arch=sm_90a] [--dump-after=PASS|all] [--time-passes] [--verify-each]
 *   tilec opt FILE.ir [--passes=canonicalize,fold,...] [-o OUT]      (Tile IR in, IR out)
 *   tilec run FILE.tile [-k KERNEL] [-D ...] [--size NAME=N,...] [-a NAME=VALUE]...
 *                   [--device=cpu|cuda|auto] [--check] [--bench] [--flops=EXPR] [--seed=N]
 *
 * Exit status: 0 success, 1 the program has errors (diagnostics on stderr) or a check
 * failed, 2 bad usage, 77 a requested device is unavailable.                            */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fp16.h"
#include "tile.h"

enum { MAX_DEFINES = 64, MAX_SIZES = 32, MAX_ARGS = 32 };

struct options {
  const char *cmd;
  const char *file;
  const char *out;
  const char *kernel;
  const char *arch;
  const char *dump_after;
  const char *passes;
  const char *flops;
  tile_emit_kind emit;
  bool time_passes, verify_each, check, bench, device_auto, unaligned;
  tile_device device;
  tile_define defines[MAX_DEFINES];
  unsigned ndefines;
  struct {
    char name[64];
    int64_t value;
  } sizes[MAX_SIZES];
  unsigned nsizes;
  struct {
    char name[64];
    char value[64];
  } scalars[MAX_ARGS];
  unsigned nscalars;
  uint64_t seed;
  int reps;
};

static void usage(FILE *f) {
  fputs("usage: tilec FILE.tile [--emit=ast|ir|llvm|ptx] [-k KERNEL] [-D NAME=VALUE]... [-o OUT]\n"
        "                   [--arch=sm_80|sm_86|sm_89|sm_90|sm_90a] [--dump-after=PASS|all]\n"
        "                   [--time-passes] [--verify-each] [--unaligned]\n"
        "       tilec opt FILE.ir [--passes=P1,P2,...] [-o OUT]\n"
        "       tilec run FILE.tile [-k KERNEL] [-D NAME=VALUE]... [--size NAME=N[,NAME=N...]]\n"
        "                   [-a NAME=VALUE]... [--device=auto|cpu|cuda] [--check] [--bench]\n"
        "                   [--flops=EXPR] [--seed=N] [--reps=N]\n"
        "       tilec --version\n",
        f);
}

static int die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("tilec: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  usage(stderr);
  return 2;
}

static char *read_all(const char *path, size_t *len) {
  FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!fp) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    n += fread(buf + n, 1, cap - n, fp);
    if (n < cap) break;
    char *nb = realloc(buf, cap * 2 + 1);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  if (fp != stdin) fclose(fp);
  if (buf) buf[n] = 0;
  *len = n;
  return buf;
}

static void report(void *ud, const char *title, const char *text) {
  (void)ud;
  fprintf(stderr, "// ----- %s -----\n%s", title, text);
}

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* "NAME=VALUE" into two pointers (the string is modified) */
static bool split_eq(char *s, const char **name, const char **value) {
  char *eq = strchr(s, '=');
  if (!eq || eq == s) return false;
  *eq = 0;
  *name = s;
  *value = eq + 1;
  return true;
}

static int parse_sizes(struct options *o, char *list) {
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    const char *n, *v;
    if (!split_eq(tok, &n, &v)) return die_usage("bad --size entry '%s' (want NAME=N)", tok);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || x < 0) return die_usage("bad size '%s' for %s", v, n);
    if (o->nsizes == MAX_SIZES) return die_usage("too many sizes");
    snprintf(o->sizes[o->nsizes].name, sizeof o->sizes[0].name, "%s", n);
    o->sizes[o->nsizes++].value = x;
  }
  return 0;
}

static int parse_args(int argc, char **argv, struct options *o) {
  int i = 1;
  o->emit = TILE_EMIT_IR;
  o->device_auto = true;
  o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  o->reps = 50;
  if (i < argc && (strcmp(argv[i], "run") == 0 || strcmp(argv[i], "opt") == 0)) o->cmd = argv[i++];
  for (; i < argc; i++) {
    char *a = argv[i];
    const char *n, *v;
#define NEXT() (i + 1 < argc ? argv[++i] : NULL)
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--version") == 0) {
      printf("%s\n", tile_version());
      exit(0);
    } else if (starts(a, "--emit=")) {
      const char *e = a + 7;
      if (strcmp(e, "ast") == 0) o->emit = TILE_EMIT_AST;
      else if (strcmp(e, "ir") == 0) o->emit = TILE_EMIT_IR;
      else if (strcmp(e, "llvm") == 0) o->emit = TILE_EMIT_LLVM;
      else if (strcmp(e, "ptx") == 0) o->emit = TILE_EMIT_PTX;
      else return die_usage("unknown --emit value '%s'", e);
    } else if (strcmp(a, "-k") == 0 || strcmp(a, "--kernel") == 0) {
      if (!(o->kernel = NEXT())) return die_usage("-k needs a kernel name");
    } else if (starts(a, "--kernel=")) {
      o->kernel = a + 9;
    } else if (strcmp(a, "-o") == 0) {
      if (!(o->out = NEXT())) return die_usage("-o needs a file");
    } else if (starts(a, "-D")) {
      char *d = a[2] ? a + 2 : NEXT();
      if (!d || !split_eq(d, &n, &v)) return die_usage("-D needs NAME=VALUE");
      if (o->ndefines == MAX_DEFINES) return die_usage("too many -D");
      o->defines[o->ndefines++] = (tile_define){n, v};
    } else if (starts(a, "--arch=")) {
      o->arch = a + 7;
    } else if (starts(a, "--dump-after=")) {
      o->dump_after = a + 13;
    } else if (strcmp(a, "--time-passes") == 0) {
      o->time_passes = true;
    } else if (strcmp(a, "--verify-each") == 0) {
      o->verify_each = true;
    } else if (strcmp(a, "--unaligned") == 0) {
      o->unaligned = true;
    } else if (starts(a, "--passes=")) {
      o->passes = a + 9;
    } else if (strcmp(a, "--size") == 0 || starts(a, "--size=")) {
      char *s = a[6] == '=' ? a + 7 : NEXT();
      if (!s) return die_usage("--size needs NAME=N,...");
      int rc = parse_sizes(o, s);
      if (rc) return rc;
    } else if (strcmp(a, "-a") == 0 || starts(a, "--arg=")) {
      char *s = a[1] == 'a' ? NEXT() : a + 6;
      if (!s || !split_eq(s, &n, &v)) return die_usage("-a needs NAME=VALUE");
      if (o->nscalars == MAX_ARGS) return die_usage("too many -a");
      snprintf(o->scalars[o->nscalars].name, 64, "%s", n);
      snprintf(o->scalars[o->nscalars++].value, 64, "%s", v);
    } else if (starts(a, "--device=")) {
      const char *d = a + 9;
      o->device_auto = strcmp(d, "auto") == 0;
      if (strcmp(d, "cpu") == 0) o->device = TILE_DEVICE_CPU;
      else if (strcmp(d, "cuda") == 0 || strcmp(d, "gpu") == 0) o->device = TILE_DEVICE_CUDA;
      else if (!o->device_auto) return die_usage("unknown device '%s'", d);
    } else if (strcmp(a, "--check") == 0) {
      o->check = true;
    } else if (strcmp(a, "--bench") == 0) {
      o->bench = true;
    } else if (starts(a, "--flops=")) {
      o->flops = a + 8;
    } else if (starts(a, "--seed=")) {
      o->seed = strtoull(a + 7, NULL, 0);
    } else if (starts(a, "--reps=")) {
      o->reps = atoi(a + 7);
    } else if (a[0] == '-' && a[1]) {
      return die_usage("unknown option '%s'", a);
    } else if (!o->file) {
      o->file = a;
    } else {
      return die_usage("more than one input file");
    }
#undef NEXT
  }
  if (!o->file) return die_usage("no input file");
  return 0;
}

static int write_out(const struct options *o, const char *text, size_t len) {
  FILE *f = o->out && strcmp(o->out, "-") ? fopen(o->out, "wb") : stdout;
  if (!f) {
    fprintf(stderr, "tilec: cannot write '%s': %s\n", o->out, strerror(errno));
    return 1;
  }
  fwrite(text, 1, len, f);
  if (f != stdout) fclose(f);
  return 0;
}

static int compile_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char *src = read_all(o->file, &len);
  if (!src) {
    fprintf(stderr, "tilec: cannot read '%s': %s\n", o->file, strerror(errno));
    return 1;
  }
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, TILE_DEVICE_CPU, o->arch,
                             o->verify_each ? TILE_VERIFY_EACH : 0u};
  tile_emit_options eo = {0};
  eo.what = o->emit;
  bool is_ir = o->cmd && strcmp(o->cmd, "opt") == 0;
  size_t fl = strlen(o->file);
  if (fl > 3 && strcmp(o->file + fl - 3, ".ir") == 0) is_ir = true;
  eo.input_is_ir = is_ir;
  if (is_ir && o->cmd && strcmp(o->cmd, "opt") == 0 && eo.what != TILE_EMIT_LLVM && eo.what != TILE_EMIT_PTX)
    eo.what = TILE_EMIT_IR;
  eo.passes = o->passes;
  eo.dump_after = o->dump_after;
  eo.time_passes = o->time_passes;
  eo.assume_unaligned = o->unaligned;
  eo.report = report;
  char *out = NULL;
  size_t out_len = 0;
  tile_status st = tile_emit(ctx, o->file, src, len, &co, &eo, &out, &out_len);
  free(src);
  if (st != TILE_OK) {
    const char *m = tile_errmsg(ctx);
    fprintf(stderr, "%s%s", m, m[0] && m[strlen(m) - 1] == '\n' ? "" : "\n");
    return st == TILE_NO_DRIVER ? 77 : st == TILE_INVALID_ARGUMENT || st == TILE_UNSUPPORTED ? 2 : 1;
  }
  int rc = write_out(o, out, out_len);
  tile_free(out);
  return rc;
}

/* ---- tilec run ---- */

static uint64_t rng_state;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void fill_random(void *buf, tile_dtype dt, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = (float)(urand() * 2 - 1);
    switch (dt) {
    case TILE_F32: ((float *)buf)[i] = x; break;
    case TILE_F16: ((uint16_t *)buf)[i] = tl_f32_to_f16(x); break;
    case TILE_BF16: ((uint16_t *)buf)[i] = tl_f32_to_bf16(x); break;
    case TILE_I32: ((int32_t *)buf)[i] = (int32_t)(urand() * 64) - 32; break;
    case TILE_BOOL: ((uint8_t *)buf)[i] = urand() < 0.5; break;
    default: memset((char *)buf + i * tile_dtype_size(dt), 0, tile_dtype_size(dt)); break;
    }
  }
}

static double elem_as_double(const void *buf, tile_dtype dt, size_t i) {
  switch (dt) {
  case TILE_F32: return ((const float *)buf)[i];
  case TILE_F16: return tl_f16_to_f32(((const uint16_t *)buf)[i]);
  case TILE_BF16: return tl_bf16_to_f32(((const uint16_t *)buf)[i]);
  case TILE_I32: return ((const int32_t *)buf)[i];
  case TILE_BOOL: return ((const uint8_t *)buf)[i];
  default: return 0;
  }
}

static void fill_nan(void *buf, tile_dtype dt, size_t n) {
  if (dt == TILE_F32)
    for (size_t i = 0; i < n; i++) ((float *)buf)[i] = NAN;
  else if (dt == TILE_F16)
    for (size_t i = 0; i < n; i++) ((uint16_t *)buf)[i] = 0x7e00;
  else if (dt == TILE_BF16)
    for (size_t i = 0; i < n; i++) ((uint16_t *)buf)[i] = 0x7fc0;
  else
    memset(buf, 0x5a, n * tile_dtype_size(dt)); /* a recognisable pattern for ints */
}

static const char *config_text; /* "BM=128,D=64,...": compile-time values for --flops */

static bool lookup_size(const struct options *o, const char *name, int64_t *v) {
  for (unsigned i = 0; i < o->nsizes; i++)
    if (strcmp(o->sizes[i].name, name) == 0) {
      *v = o->sizes[i].value;
      return true;
    }
  /* compile-time parameters (head dim D, ...) from the specialized kernel's config */
  size_t n = strlen(name);
  for (const char *p = config_text; p && *p;) {
    if (strncmp(p, name, n) == 0 && p[n] == '=') {
      char *end;
      long long x = strtoll(p + n + 1, &end, 10);
      if (end != p + n + 1) {
        *v = x;
        return true;
      }
    }
    p = strchr(p, ',');
    if (p) p++;
  }
  return false;
}

/* Evaluates an arithmetic expression over the --size names (for --flops). */
static const char *ex_p;
static const struct options *ex_o;
static bool ex_ok;
static double ex_sum(void);
static double ex_atom(void) {
  while (isspace((unsigned char)*ex_p)) ex_p++;
  if (*ex_p == '(') {
    ex_p++;
    double v = ex_sum();
    while (isspace((unsigned char)*ex_p)) ex_p++;
    if (*ex_p == ')') ex_p++;
    else ex_ok = false;
    return v;
  }
  if (isdigit((unsigned char)*ex_p) || *ex_p == '.') return strtod(ex_p, (char **)&ex_p);
  if (isalpha((unsigned char)*ex_p) || *ex_p == '_') {
    char name[64];
    size_t n = 0;
    while ((isalnum((unsigned char)*ex_p) || *ex_p == '_') && n < 63) name[n++] = *ex_p++;
    name[n] = 0;
    int64_t v;
    if (lookup_size(ex_o, name, &v)) return (double)v;
    ex_ok = false;
    return 0;
  }
  ex_ok = false;
  return 0;
}
static double ex_prod(void) {
  double v = ex_atom();
  for (;;) {
    while (isspace((unsigned char)*ex_p)) ex_p++;
    if (*ex_p == '*') ex_p++, v *= ex_atom();
    else if (*ex_p == '/') ex_p++, v /= ex_atom();
    else return v;
  }
}
static double ex_sum(void) {
  double v = ex_prod();
  for (;;) {
    while (isspace((unsigned char)*ex_p)) ex_p++;
    if (*ex_p == '+') ex_p++, v += ex_prod();
    else if (*ex_p == '-') ex_p++, v -= ex_prod();
    else return v;
  }
}
static bool eval_expr(const struct options *o, const char *e, double *out) {
  ex_p = e;
  ex_o = o;
  ex_ok = true;
  *out = ex_sum();
  while (isspace((unsigned char)*ex_p)) ex_p++;
  return ex_ok && *ex_p == 0;
}

/* Lines "//! key = value" at the top of a lib kernel give defaults for run. */
static const char *meta(const char *src, const char *key, char *buf, size_t cap) {
  const char *p = src;
  while ((p = strstr(p, "//!"))) {
    p += 3;
    while (*p == ' ') p++;
    size_t kl = strlen(key);
    if (strncmp(p, key, kl) == 0) {
      const char *q = p + kl;
      while (*q == ' ') q++;
      if (*q == '=') {
        q++;
        while (*q == ' ') q++;
        size_t n = 0;
        while (q[n] && q[n] != '\n' && n + 1 < cap) n++;
        memcpy(buf, q, n);
        buf[n] = 0;
        return buf;
      }
    }
  }
  return NULL;
}

static double tolerance_for(tile_dtype dt) {
  switch (dt) {
  case TILE_F16: return 3e-3;
  case TILE_BF16: return 2e-2;
  case TILE_F32: return 1e-3; /* GPU exp2/rcp approximations and tf32 where opted in */
  default: return 0;
  }
}

struct run_buf {
  void *host;     /* inputs as generated; outputs as downloaded from the device */
  void *ref;      /* outputs from the CPU reference */
  void *dev;      /* device copy */
  size_t n, bytes;
};

static int run_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char *src = read_all(o->file, &len);
  if (!src) {
    fprintf(stderr, "tilec: cannot read '%s': %s\n", o->file, strerror(errno));
    return 1;
  }
  char mbuf[256];
  if (!o->nsizes && meta(src, "sizes", mbuf, sizeof mbuf)) parse_sizes(o, mbuf);
  char fbuf[256];
  if (!o->flops && meta(src, "flops", fbuf, sizeof fbuf)) o->flops = fbuf;
  rng_state = o->seed ? o->seed : 0x9e3779b97f4a7c15ull;

  tile_device dev = o->device;
  tile_device_info info;
  if (o->device_auto) {
    dev = tile_device_query(ctx, TILE_DEVICE_CUDA, &info) == TILE_OK ? TILE_DEVICE_CUDA : TILE_DEVICE_CPU;
  } else if (dev == TILE_DEVICE_CUDA && tile_device_query(ctx, dev, &info) != TILE_OK) {
    fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
    free(src);
    return 77;
  }
  if (dev == TILE_DEVICE_CPU) tile_device_query(ctx, dev, &info);

  size_t fl = strlen(o->file);
  unsigned flags = (o->verify_each ? TILE_VERIFY_EACH : 0u) |
                   (fl > 3 && strcmp(o->file + fl - 3, ".ir") == 0 ? TILE_SOURCE_IR : 0u);
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, dev, o->arch, flags};
  tile_kernel *k = NULL, *kref = NULL;
  if (tile_compile_string(ctx, o->file, src, len, &co, &k)) {
    fprintf(stderr, "%s", tile_errmsg(ctx));
    free(src);
    return 1;
  }
  if (o->check && dev != TILE_DEVICE_CPU) {
    tile_compile_options cc = co;
    cc.device = TILE_DEVICE_CPU;
    cc.arch = NULL;
    if (tile_compile_string(ctx, o->file, src, len, &cc, &kref)) {
      fprintf(stderr, "%s", tile_errmsg(ctx));
      free(src);
      return 1;
    }
  }
  free(src);

  unsigned np = tile_kernel_param_count(k);
  tile_arg args[MAX_ARGS], rargs[MAX_ARGS];
  struct run_buf bufs[MAX_ARGS];
  memset(bufs, 0, sizeof bufs);
  if (np > MAX_ARGS) {
    fprintf(stderr, "tilec: too many parameters\n");
    return 1;
  }
  int rc = 0;
  double bytes_moved = 0;
  printf("kernel %s [%s] on %s\n", tile_kernel_name(k), tile_kernel_config(k), info.name);
  config_text = tile_kernel_config(k);
  for (unsigned i = 0; i < np && !rc; i++) {
    tile_param_info pi;
    tile_kernel_param(k, i, &pi);
    if (!pi.is_tensor) {
      const char *val = NULL;
      for (unsigned s = 0; s < o->nscalars; s++)
        if (strcmp(o->scalars[s].name, pi.name) == 0) val = o->scalars[s].value;
      if (!val) {
        fprintf(stderr, "tilec: scalar parameter '%s' needs a value: -a %s=VALUE\n", pi.name, pi.name);
        rc = 2;
        break;
      }
      if (pi.dtype == TILE_F32 || pi.dtype == TILE_F16 || pi.dtype == TILE_BF16)
        args[i] = tile_arg_float(strtod(val, NULL));
      else
        args[i] = tile_arg_int(strcmp(val, "true") == 0 ? 1 : strcmp(val, "false") == 0 ? 0 : strtoll(val, NULL, 0));
      rargs[i] = args[i];
      continue;
    }
    int64_t shape[TILE_MAX_RANK];
    size_t n = 1;
    printf("  %-10s %s%s[", pi.name, pi.is_output ? "out " : "", tile_dtype_name(pi.dtype));
    for (unsigned d = 0; d < pi.rank; d++) {
      if (pi.dim_symbol[d]) {
        if (!lookup_size(o, pi.dim_symbol[d], &shape[d])) {
          fprintf(stderr, "\ntilec: size '%s' of '%s' is not given: --size %s=N\n", pi.dim_symbol[d],
                  pi.name, pi.dim_symbol[d]);
          rc = 2;
          break;
        }
      } else {
        shape[d] = pi.dim_size[d];
      }
      printf("%s%lld", d ? ", " : "", (long long)shape[d]);
      n *= (size_t)shape[d];
    }
    if (rc) break;
    printf("]\n");
    struct run_buf *b = &bufs[i];
    b->n = n;
    b->bytes = n * tile_dtype_size(pi.dtype);
    b->host = malloc(b->bytes + 1);
    if (pi.is_output) b->ref = malloc(b->bytes + 1);
    if (!b->host || (pi.is_output && !b->ref)) {
      fprintf(stderr, "tilec: out of host memory\n");
      rc = 1;
      break;
    }
    if (pi.is_output && !pi.is_read)
      fill_nan(b->host, pi.dtype, n); /* poison: every element must be written */
    else
      fill_random(b->host, pi.dtype, n);
    if (pi.is_used) bytes_moved += (double)b->bytes * (pi.is_output && pi.is_read ? 2 : 1);
    if (tile_mem_alloc(ctx, dev, b->bytes, &b->dev) ||
        tile_mem_upload(ctx, dev, b->dev, b->host, b->bytes)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
      break;
    }
    args[i] = tile_arg_tensor(b->dev, pi.dtype, pi.rank, shape, NULL);
    rargs[i] = tile_arg_tensor(b->host, pi.dtype, pi.rank, shape, NULL);
    if (pi.is_output) {
      memcpy(b->ref, b->host, b->bytes);
      rargs[i].u.tensor.data = b->ref;
    }
  }
  if (!rc && tile_launch(ctx, k, args, np, NULL)) {
    fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
    rc = 1;
  }
  if (!rc && tile_synchronize(ctx, dev)) {
    fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
    rc = 1;
  }
  tile_kernel_stats ks;
  if (!rc && tile_kernel_get_stats(k, &ks) == TILE_OK) {
    printf("  grid %ux%ux%u", ks.grid[0], ks.grid[1], ks.grid[2]);
    if (dev == TILE_DEVICE_CUDA)
      printf(", %u threads, %u B shared, %d registers, %d B local, compiled in %.1f ms%s", ks.threads,
             ks.shared_bytes, ks.registers, ks.local_bytes, ks.compile_ms, ks.cache_hit ? " (cached)" : "");
    printf("\n");
  }
  if (!rc && o->check) {
    /* the reference: the CPU interpreter on the same inputs */
    tile_kernel *rk = kref ? kref : k;
    if (tile_launch(ctx, rk, rargs, np, NULL)) {
      fprintf(stderr, "tilec: reference run: %s\n", tile_errmsg(ctx));
      rc = 1;
    }
    for (unsigned i = 0; i < np && !rc; i++) {
      tile_param_info pi;
      tile_kernel_param(k, i, &pi);
      if (!pi.is_tensor || !pi.is_output || !pi.is_used) continue; /* unused outputs stay poisoned */
      struct run_buf *b = &bufs[i];
      if (tile_mem_download(ctx, dev, b->host, b->dev, b->bytes)) {
        fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
        rc = 1;
        break;
      }
      double num = 0, den = 0, maxabs = 0;
      size_t nan = 0;
      for (size_t e = 0; e < b->n; e++) {
        double g = elem_as_double(b->host, pi.dtype, e), r = elem_as_double(b->ref, pi.dtype, e);
        if (isnan(g) || isnan(r)) {
          nan++;
          continue;
        }
        num += (g - r) * (g - r);
        den += r * r;
        if (fabs(g - r) > maxabs) maxabs = fabs(g - r);
      }
      double rel = den > 0 ? sqrt(num / den) : sqrt(num);
      double tol = tolerance_for(pi.dtype);
      bool ok = nan == 0 && rel <= tol;
      printf("  check %-10s rel_l2=%.3e max_abs=%.3e nan=%zu tol=%.0e  %s\n", pi.name, rel, maxabs, nan,
             tol, ok ? "PASS" : "FAIL");
      if (!ok) rc = 1;
    }
  }
  if (!rc && o->bench) {
    tile_bench_options bo = {0};
    bo.reps = o->reps;
    tile_bench_result br;
    if (tile_bench(ctx, k, args, np, &bo, &br)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
    } else {
      printf("  time median %.4f ms (min %.4f, %d runs)", br.median_ms, br.min_ms, br.reps);
      double flops;
      if (o->flops && eval_expr(o, o->flops, &flops))
        printf(", %.2f TFLOP/s", flops / (br.median_ms * 1e-3) / 1e12);
      printf(", %.1f GB/s\n", bytes_moved / (br.median_ms * 1e-3) / 1e9);
    }
  }
  for (unsigned i = 0; i < np; i++) {
    tile_mem_free(ctx, dev, bufs[i].dev);
    free(bufs[i].host);
    free(bufs[i].ref);
  }
  tile_kernel_release(k);
  tile_kernel_release(kref);
  if (!rc) printf("ok\n");
  return rc;
}

int main(int argc, char **argv) {
  struct options o = {0};
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  tile_context *ctx;
  if (tile_context_create(NULL, &ctx)) {
    fprintf(stderr, "tilec: out of memory\n");
    return 1;
  }
  if (o.cmd && strcmp(o.cmd, "run") == 0)
    rc = run_cmd(ctx, &o);
  else
    rc = compile_cmd(ctx, &o);
  tile_context_destroy(ctx);
  return rc;
}
