/* tilec - the tile compiler's command-line driver. It links only libtile.so's public API.
 *
 *   tilec FILE.tile [--emit=ast|ir|llvm|ptx] [-k KERNEL] [-D NAME=VALUE]... [-o OUT]
 *                   [--arch=sm_90a] [--dump-after=PASS|all] [--time-passes] [--verify-each]
 *   tilec opt FILE.ir [--passes=canonicalize,fold,...] [-o OUT]      (Tile IR in, IR out)
 *   tilec run FILE.tile [-k KERNEL] [-D ...] [--size NAME=N,...] [-a NAME=VALUE]...
 *                   [--device=cpu|cuda|auto] [--check] [--bench] [--flops=EXPR] [--seed=N]
 *                   [--autotune] [--fixed-config]
 *   tilec tune FILE.tile [-k KERNEL] [-D pins...] [--size ...] [-a ...] [--device=...]
 *                   [--budget=SECONDS] [--config-budget=MS] [--max-configs=N] [--threads=N]
 *                   [--params=A,B] [--force] [--no-store] [--flops=EXPR] [--reps=N] [--top=N]
 *   tilec aot FILE.tile [-k KERNEL[,KERNEL...]] [-D NAME=VALUE]... --arch=sm_90a[,sm_80...]
 *                   [--unaligned[=also]] [--schedule=...] [--no-cubin] [--ptxas=PATH]
 *                   [--name=SYMBOL] -o PREFIX            (writes PREFIX.h and PREFIX.c)
 *   tilec cache path | list | clear
 *   tilec cache bench FILE.tile [-k ...] [-D ...] [--size ...] [-a ...] [--reps=N]
 *
 * Exit status: 0 success, 1 the program has errors (diagnostics on stderr), a check failed
 * or the output could not be written, 2 bad usage (an unknown option, a value that is not
 * a number in the option's range, a --flops expression that does not parse, an -a for no
 * parameter of the kernel, sizes whose product overflows), 77 a requested device is
 * unavailable.                                                                            */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fp16.h"
#include "readfile.h"
#include "rng.h"
#include "tile.h"

enum { MAX_DEFINES = 64, MAX_SIZES = 32, MAX_ARGS = 32 };

struct options {
  const char *cmd;
  const char *file;
  const char *out;
  const char *kernel;
  const char *arch;
  const char *schedule;
  const char *dump_after;
  const char *passes;
  const char *flops;
  tile_emit_kind emit;
  bool time_passes, verify_each, check, bench, device_auto, unaligned;
  bool autotune, autoconfig, fixed_config, force, no_store, reps_set; /* run --autotune, --autoconfig,
                                                                     --fixed-config; tune --force, --no-store */
  bool unaligned_also, no_cubin;             /* aot --unaligned=also, --no-cubin */
  const char *symbol, *ptxas;                /* aot --name, --ptxas */
  double budget_s, config_budget_ms;
  int64_t max_configs, threads, top;
  const char *params;
  tile_device device;
  tile_define defines[MAX_DEFINES];
  unsigned ndefines;
  struct {
    char name[64];
    int64_t value;
  } sizes[MAX_SIZES];
  unsigned nsizes;
  struct {
    const char *name, *value; /* into argv */
  } scalars[MAX_ARGS];
  unsigned nscalars;
  int64_t seed;
  int64_t reps;
  const char *flops_origin; /* "--flops" or the source's line, for messages about it */
  const char *config;       /* "BM=128,D=64,...": the kernel's compile-time values, for --flops */
  struct rng rng;           /* the inputs' generator, seeded with --seed */
};

static void usage(FILE *f) {
  fputs("usage: tilec FILE.tile [--emit=ast|ir|llvm|ptx] [-k KERNEL] [-D NAME=VALUE]... [-o OUT]\n"
        "                   [--arch=sm_80|sm_86|sm_89|sm_90|sm_90a] [--schedule=KEY=V,...]\n"
        "                   [--dump-after=PASS|all]\n"
        "                   [--time-passes] [--verify-each] [--unaligned]\n"
        "       tilec opt FILE.ir [--passes=P1,P2,...] [-o OUT]\n"
        "       tilec run FILE.tile [-k KERNEL] [-D NAME=VALUE]... [--size NAME=N[,NAME=N...]]\n"
        "                   [-a NAME=VALUE]... [--device=auto|cpu|cuda] [--check] [--bench]\n"
        "                   [--flops=EXPR] [--seed=N] [--reps=N] [--autotune] [--fixed-config]\n"
        "       tilec tune FILE.tile [-k KERNEL] [-D NAME=VALUE]... [--size ...] [-a NAME=VALUE]...\n"
        "                   [--device=auto|cpu|cuda] [--budget=SECONDS] [--config-budget=MS]\n"
        "                   [--max-configs=N] [--threads=N] [--params=A,B] [--force] [--no-store]\n"
        "                   [--flops=EXPR] [--reps=N] [--top=N]\n"
        "       tilec aot FILE.tile [-k KERNEL[,KERNEL...]] [-D NAME=VALUE]... --arch=ARCH[,ARCH...]\n"
        "                   [--unaligned[=also]] [--schedule=KEY=V,...] [--no-cubin] [--ptxas=PATH]\n"
        "                   [--name=SYMBOL] -o PREFIX\n"
        "           writes PREFIX.h and PREFIX.c: the kernels' PTX per ARCH (and cubins, assembled by\n"
        "           ptxas: --ptxas, $PTXAS, /usr/local/cuda/bin/ptxas, PATH) and one typed launcher\n"
        "           per kernel, SYMBOL_KERNEL(stream, tensors..., scalars...), that checks its\n"
        "           arguments and launches through the CUDA driver: build it with cc and link\n"
        "           -lcuda, no LLVM or libtile needed. SYMBOL defaults to PREFIX's file name. The\n"
        "           code assumes 16-byte multiple strides and sizes; --unaligned drops that,\n"
        "           --unaligned=also embeds both and picks per launch.\n"
        "       tilec cache path|list|clear\n"
        "       tilec cache bench FILE.tile [-k KERNEL] [-D ...] [--size ...] [-a ...] [--reps=N]\n"
        "       tilec --version\n",
        f);
}

static int close_stdout(int rc);

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

/* ---- numbers on the command line ----
 * Every numeric option value goes through scan_int or scan_real: the whole text must be the
 * number (no sign where none is allowed, no trailing characters, no overflow) and it must
 * lie in the option's range. opt_int and opt_real turn a bad one into a usage error (exit
 * status 2) that names the option and the value. */

/* An integer, decimal or hexadecimal with 0x (never octal: 010 is ten), in [lo, hi]. */
static bool scan_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  if (!text || !*text || isspace((unsigned char)*text)) return false;
  const char *digits = text + (*text == '-' || *text == '+');
  bool hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, hex ? 16 : 10);
  if (*end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* A real number in [lo, hi] (strtod's syntax; NaN never fits). */
static bool scan_real(const char *text, double lo, double hi, double *out) {
  if (!text || !*text || isspace((unsigned char)*text)) return false;
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (*end || (errno == ERANGE && fabs(v) > 1) || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

static int opt_int(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out) {
  if (scan_int(text, lo, hi, out)) return 0;
  return die_usage("%s: bad value '%s' (want an integer in %lld..%lld)", opt, text ? text : "", (long long)lo,
                   (long long)hi);
}

static int opt_real(const char *opt, const char *text, double lo, double hi, double *out) {
  if (scan_real(text, lo, hi, out)) return 0;
  return die_usage("%s: bad value '%s' (want a number in %g..%g)", opt, text ? text : "", lo, hi);
}

static bool is_ir_path(const char *path) {
  size_t n = strlen(path);
  return n > 3 && strcmp(path + n - 3, ".ir") == 0;
}

/* The whole file ("-": standard input), NUL-terminated; NULL after printing why. */
static char *read_source(const char *path, size_t *len) {
  errno = 0;
  FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "tilec: cannot read '%s': %s\n", path, strerror(errno ? errno : EIO));
    return NULL;
  }
  char *buf = tl_read_stream(fp, TILE_MAX_SOURCE_BYTES, len);
  int e = errno;
  if (fp != stdin) fclose(fp);
  if (!buf)
    fprintf(stderr, "tilec: cannot read '%s': %s\n", path,
            e == EFBIG ? "larger than 64 MiB (TILE_MAX_SOURCE_BYTES)" : strerror(e ? e : EIO));
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

/* "NAME=N,NAME=N,...": --size, or the source's `//! sizes` line (origin names which, for
 * messages). Sizes are shape symbols, i32 values in the kernel, so at most INT32_MAX. */
static int parse_sizes(struct options *o, char *list, const char *origin) {
  char *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const char *n, *v;
    if (!split_eq(tok, &n, &v)) return die_usage("%s: bad entry '%s' (want NAME=N)", origin, tok);
    if (strlen(n) >= sizeof o->sizes[0].name) return die_usage("%s: name '%s' is too long", origin, n);
    int64_t x;
    char what[96];
    snprintf(what, sizeof what, "%s %s", origin, n);
    int rc = opt_int(what, v, 0, INT32_MAX, &x);
    if (rc) return rc;
    if (o->nsizes == MAX_SIZES) return die_usage("%s: more than %d sizes", origin, MAX_SIZES);
    snprintf(o->sizes[o->nsizes].name, sizeof o->sizes[0].name, "%s", n);
    o->sizes[o->nsizes++].value = x;
  }
  return 0;
}

static bool flops_check_syntax(const char *e, const char **where);

static int parse_args(int argc, char **argv, struct options *o) {
  int i = 1;
  o->emit = TILE_EMIT_IR;
  o->device_auto = true;
  o->seed = (int64_t)(((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20)) & INT64_MAX);
  o->reps = 50;
  if (i < argc && (strcmp(argv[i], "run") == 0 || strcmp(argv[i], "opt") == 0 || strcmp(argv[i], "tune") == 0 ||
                   strcmp(argv[i], "aot") == 0))
    o->cmd = argv[i++];
  int rc;
  for (; i < argc; i++) {
    char *a = argv[i];
    const char *n, *v;
#define NEXT() (i + 1 < argc ? argv[++i] : NULL)
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(close_stdout(0));
    } else if (strcmp(a, "--version") == 0) {
      printf("%s\n", tile_version());
      exit(close_stdout(0));
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
    } else if (starts(a, "--schedule=")) {
      o->schedule = a + 11;
    } else if (starts(a, "--dump-after=")) {
      o->dump_after = a + 13;
    } else if (strcmp(a, "--time-passes") == 0) {
      o->time_passes = true;
    } else if (strcmp(a, "--verify-each") == 0) {
      o->verify_each = true;
    } else if (strcmp(a, "--unaligned") == 0) {
      o->unaligned = true;
    } else if (strcmp(a, "--unaligned=also") == 0) {
      o->unaligned_also = true;
    } else if (strcmp(a, "--no-cubin") == 0) {
      o->no_cubin = true;
    } else if (starts(a, "--name=")) {
      o->symbol = a + 7;
    } else if (starts(a, "--ptxas=")) {
      o->ptxas = a + 8;
    } else if (starts(a, "--passes=")) {
      o->passes = a + 9;
    } else if (strcmp(a, "--size") == 0 || starts(a, "--size=")) {
      char *s = a[6] == '=' ? a + 7 : NEXT();
      if (!s) return die_usage("--size needs NAME=N,...");
      if ((rc = parse_sizes(o, s, "--size"))) return rc;
    } else if (strcmp(a, "-a") == 0 || starts(a, "--arg=")) {
      char *s = a[1] == 'a' ? NEXT() : a + 6;
      if (!s || !split_eq(s, &n, &v)) return die_usage("-a needs NAME=VALUE");
      if (o->nscalars == MAX_ARGS) return die_usage("more than %d -a", MAX_ARGS);
      o->scalars[o->nscalars].name = n;
      o->scalars[o->nscalars++].value = v;
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
      const char *where;
      o->flops = a + 8;
      o->flops_origin = "--flops";
      if (!flops_check_syntax(o->flops, &where))
        return die_usage("--flops: bad expression '%s' (unexpected '%s')", o->flops, *where ? where : "end");
    } else if (starts(a, "--seed=")) {
      if ((rc = opt_int("--seed", a + 7, 0, INT64_MAX, &o->seed))) return rc;
    } else if (starts(a, "--reps=")) {
      if ((rc = opt_int("--reps", a + 7, 1, 1000000, &o->reps))) return rc;
      o->reps_set = true;
    } else if (strcmp(a, "--autoconfig") == 0) {
      o->autoconfig = true;
    } else if (strcmp(a, "--fixed-config") == 0) {
      o->fixed_config = true;
    } else if (strcmp(a, "--autotune") == 0) {
      o->autotune = true;
    } else if (strcmp(a, "--force") == 0) {
      o->force = true;
    } else if (strcmp(a, "--no-store") == 0) {
      o->no_store = true;
    } else if (starts(a, "--budget=")) {
      if ((rc = opt_real("--budget", a + 9, 0.001, 1e7, &o->budget_s))) return rc;
    } else if (starts(a, "--config-budget=")) {
      if ((rc = opt_real("--config-budget", a + 16, 0.001, 1e9, &o->config_budget_ms))) return rc;
    } else if (starts(a, "--max-configs=")) {
      if ((rc = opt_int("--max-configs", a + 14, 0, UINT32_MAX, &o->max_configs))) return rc;
    } else if (starts(a, "--threads=")) {
      if ((rc = opt_int("--threads", a + 10, 0, 1024, &o->threads))) return rc;
    } else if (starts(a, "--params=")) {
      o->params = a + 9;
    } else if (starts(a, "--top=")) {
      if ((rc = opt_int("--top", a + 6, 0, INT32_MAX, &o->top))) return rc;
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

/* ---- output ----
 * Output goes to -o FILE or to standard output, and a write that fails is an error like any
 * other (exit status 1, "cannot write 'FILE': why"). A regular file, or a new one, is
 * written to a temporary file next to it that is renamed over it once everything is
 * written, so a full disk leaves the old file as it was and no partial one; a device, a pipe
 * or a symbolic link (-o /dev/stdout) is written in place. Standard output is checked once,
 * at exit (close_stdout), which also covers what run, tune and cache print.             */

static int write_error(const char *path, int e) {
  fprintf(stderr, "tilec: cannot write '%s': %s\n", path, strerror(e ? e : EIO));
  return 1;
}

/* Writes text to f and flushes it; false with errno set when a write fails. */
static bool write_all(FILE *f, const char *text, size_t len) {
  errno = 0;
  if (len && fwrite(text, 1, len, f) != len) return false;
  return fflush(f) == 0 && !ferror(f);
}

/* Writes f (opened by the caller) and closes it; 0, or errno of the first failure. */
static int write_close(FILE *f, const char *text, size_t len) {
  int e = write_all(f, text, len) ? 0 : (errno ? errno : EIO);
  if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
  return e;
}

static int write_file(const char *path, const char *text, size_t len) {
  struct stat st;
  bool exists = lstat(path, &st) == 0;
  if (!exists || S_ISREG(st.st_mode)) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return write_error(path, ENOMEM);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp-XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
      mode_t mode;
      if (exists) {
        mode = st.st_mode & 07777;
      } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
      }
      FILE *f = fchmod(fd, mode) == 0 ? fdopen(fd, "wb") : NULL;
      int e = f ? write_close(f, text, len) : errno;
      if (!f) close(fd);
      if (!e && rename(tmp, path) != 0) e = errno;
      if (e) unlink(tmp);
      free(tmp);
      return e ? write_error(path, e) : 0;
    }
    free(tmp); /* no temporary file here (a directory we may not write): write in place */
  }
  FILE *f = fopen(path, "wb");
  if (!f) return write_error(path, errno);
  int e = write_close(f, text, len);
  if (e && !exists) unlink(path);
  return e ? write_error(path, e) : 0;
}

static int write_out(const struct options *o, const char *text, size_t len) {
  if (o->out && strcmp(o->out, "-") != 0) return write_file(o->out, text, len);
  return write_all(stdout, text, len) ? 0 : write_error("<stdout>", errno);
}

/* The exit status after flushing standard output: 1 with a message when something written
 * to it was lost (rc stays when it already says that something failed). */
static int close_stdout(int rc) {
  errno = 0;
  int e = fflush(stdout) != 0 || ferror(stdout) ? (errno ? errno : EIO) : 0;
  if (fclose(stdout) != 0 && !e) e = errno ? errno : EIO;
  return e && rc == 0 ? write_error("<stdout>", e) : rc;
}

static int compile_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char *src = read_source(o->file, &len);
  if (!src) return 1;
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, TILE_DEVICE_CPU, o->arch,
                             o->verify_each ? TILE_VERIFY_EACH : 0u, o->schedule};
  tile_emit_options eo = {0};
  eo.what = o->emit;
  bool is_ir = o->cmd && strcmp(o->cmd, "opt") == 0;
  if (is_ir_path(o->file)) is_ir = true;
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
    return st == TILE_NO_DRIVER ? 77 : st == TILE_INVALID_ARGUMENT ? 2 : 1;
  }
  int rc = write_out(o, out, out_len);
  tile_free(out);
  return rc;
}

/* ---- tilec run ---- */

/* Inputs: floats uniform in [-1, 1), ints in [-32, 32), u32 any 32 bits, bools with
 * probability 1/2. */
static void fill_random(struct rng *r, void *buf, tile_dtype dt, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = rng_uniform(r, -1.0f, 1.0f);
    switch (dt) {
    case TILE_F32: ((float *)buf)[i] = x; break;
    case TILE_F16: ((uint16_t *)buf)[i] = tl_f32_to_f16(x); break;
    case TILE_BF16: ((uint16_t *)buf)[i] = tl_f32_to_bf16(x); break;
    case TILE_I32: ((int32_t *)buf)[i] = (int32_t)rng_below(r, 64) - 32; break;
    case TILE_U32: ((uint32_t *)buf)[i] = (uint32_t)(rng_u64(r) >> 32); break;
    case TILE_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(rng_u64(r) >> 63); break;
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
  case TILE_U32: return ((const uint32_t *)buf)[i];
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

static bool lookup_size(const struct options *o, const char *name, int64_t *v) {
  for (unsigned i = 0; i < o->nsizes; i++)
    if (strcmp(o->sizes[i].name, name) == 0) {
      *v = o->sizes[i].value;
      return true;
    }
  /* compile-time parameters (head dim D, ...) from the specialized kernel's config */
  size_t n = strlen(name);
  for (const char *p = o->config; p && *p;) {
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

/* ---- --flops: an arithmetic expression over the sizes ----
 *   sum := prod (('+' | '-') prod)*     prod := atom (('*' | '/') atom)*
 *   atom := NUMBER | NAME | '(' sum ')'
 * Names are the sizes and the kernel's compile-time parameters. The syntax is checked when
 * the option is read (a usage error); the value once the kernel is compiled, when an unknown
 * name, a division by zero or a result that is not a finite number is an error.          */
struct expr {
  const char *p;
  const struct options *o; /* NULL: check the syntax only (names count as 1, no division) */
  const char *syntax;      /* where the text stopped making sense, or NULL */
  char err[96];            /* the first error of the value, or "" */
};

static void ex_space(struct expr *x) {
  while (isspace((unsigned char)*x->p)) x->p++;
}

static double ex_bad_syntax(struct expr *x) {
  if (!x->syntax) x->syntax = x->p;
  return 0;
}

static double ex_sum(struct expr *x);

static double ex_atom(struct expr *x) {
  ex_space(x);
  if (*x->p == '(') {
    x->p++;
    double v = ex_sum(x);
    ex_space(x);
    if (x->syntax || *x->p != ')') return ex_bad_syntax(x);
    x->p++;
    return v;
  }
  if (isdigit((unsigned char)*x->p) || *x->p == '.') {
    char *end;
    double v = strtod(x->p, &end);
    if (end == x->p) return ex_bad_syntax(x);
    x->p = end;
    return v;
  }
  if (isalpha((unsigned char)*x->p) || *x->p == '_') {
    const char *s = x->p;
    while (isalnum((unsigned char)*x->p) || *x->p == '_') x->p++;
    if (!x->o) return 1;
    char name[64];
    int64_t v;
    snprintf(name, sizeof name, "%.*s", (int)(x->p - s), s);
    if ((size_t)(x->p - s) < sizeof name && lookup_size(x->o, name, &v)) return (double)v;
    if (!x->err[0]) snprintf(x->err, sizeof x->err, "unknown name '%s' (not a size)", name);
    return 0;
  }
  return ex_bad_syntax(x);
}

static double ex_prod(struct expr *x) {
  double v = ex_atom(x);
  for (;;) {
    ex_space(x);
    if (x->syntax) return 0;
    if (*x->p == '*') {
      x->p++;
      v *= ex_atom(x);
    } else if (*x->p == '/') {
      x->p++;
      double d = ex_atom(x);
      if (x->o && d == 0 && !x->syntax && !x->err[0]) snprintf(x->err, sizeof x->err, "division by zero");
      v = d != 0 ? v / d : 0;
    } else {
      return v;
    }
  }
}

static double ex_sum(struct expr *x) {
  double v = ex_prod(x);
  for (;;) {
    ex_space(x);
    if (x->syntax) return 0;
    if (*x->p == '+') x->p++, v += ex_prod(x);
    else if (*x->p == '-') x->p++, v -= ex_prod(x);
    else return v;
  }
}

/* True when e is a well-formed expression; otherwise *where is where it goes wrong. */
static bool flops_check_syntax(const char *e, const char **where) {
  struct expr x = {.p = e};
  ex_sum(&x);
  ex_space(&x);
  if (!x.syntax && *x.p) x.syntax = x.p;
  *where = x.syntax;
  return !x.syntax;
}

/* The value of the flops expression (o->flops, not NULL) for the compiled kernel; false
 * after printing why there is none. */
static bool flops_value(const struct options *o, double *out) {
  struct expr x = {.p = o->flops, .o = o};
  double v = ex_sum(&x);
  ex_space(&x);
  if (x.syntax || *x.p)
    snprintf(x.err, sizeof x.err, "bad expression (unexpected '%s')", *x.p ? x.p : "end");
  else if (!x.err[0] && !isfinite(v))
    snprintf(x.err, sizeof x.err, "the result is not a finite number");
  if (x.err[0]) {
    fprintf(stderr, "tilec: %s '%s': %s\n", o->flops_origin ? o->flops_origin : "--flops", o->flops, x.err);
    return false;
  }
  *out = v;
  return true;
}

/* Lines "//! key = value" at the top of a kernel file give defaults for run, tune and cache
 * bench; "//! KERNEL.key = value" gives one kernel of a multi-kernel file its own (it wins
 * over the plain key for that kernel: `//! bmm.flops = 2*BATCH*M*N*K`). */
static const char *meta_key(const char *src, const char *key, char *buf, size_t cap) {
  const char *p = src;
  size_t kl = strlen(key);
  while ((p = strstr(p, "//!"))) {
    p += 3;
    while (*p == ' ') p++;
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

static const char *meta(const char *src, const char *kernel, const char *key, char *buf, size_t cap) {
  if (kernel) {
    char qualified[160];
    snprintf(qualified, sizeof qualified, "%s.%s", kernel, key);
    if (meta_key(src, qualified, buf, cap)) return buf;
  }
  return meta_key(src, key, buf, cap);
}

/* The FLOP/s peak a kernel's figure is compared with (tile_device_info): the Tensor Core's
 * when an input is f16 or bf16, else the CUDA cores' f32 FMA rate. 0 when unknown. */
static double flop_peak(const tile_kernel *k, const tile_device_info *info, const char **what) {
  unsigned n = tile_kernel_param_count(k);
  for (unsigned i = 0; i < n; i++) {
    tile_param_info p;
    if (tile_kernel_param(k, i, &p) == TILE_OK && p.is_tensor && !p.is_output &&
        (p.dtype == TILE_F16 || p.dtype == TILE_BF16)) {
      *what = "f16 Tensor Core";
      return info->peak_tc_f16_tflops;
    }
  }
  *what = "f32";
  return info->peak_f32_tflops;
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

/* ---- shared by run, tune and cache bench: random arguments on the device ---- */

struct arg_set {
  tile_arg args[MAX_ARGS];
  struct run_buf bufs[MAX_ARGS];
  unsigned n;
  double bytes_moved;
};

/* Allocates and fills the arguments of k (sizes from --size or //! sizes, scalars from -a;
 * outputs that are not read are poisoned with NaN, so every element must be written); with
 * `show`, prints each tensor's shape. Returns 0, or the exit status after printing why not
 * (free_args releases what was allocated either way). */
static int make_args(tile_context *ctx, struct options *o, tile_kernel *k, tile_device dev, bool show,
                     struct arg_set *as) {
  memset(as, 0, sizeof *as);
  unsigned np = tile_kernel_param_count(k);
  if (np > MAX_ARGS) {
    fprintf(stderr, "tilec: too many parameters\n");
    return 1;
  }
  as->n = np;
  /* every -a names a scalar parameter of this kernel */
  for (unsigned s = 0; s < o->nscalars; s++) {
    char names[512] = "";
    size_t used = 0;
    bool found = false;
    for (unsigned i = 0; i < np && !found; i++) {
      tile_param_info pi;
      tile_kernel_param(k, i, &pi);
      if (pi.is_tensor) continue;
      found = strcmp(pi.name, o->scalars[s].name) == 0;
      if (used < sizeof names)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", pi.name);
    }
    if (!found) {
      fprintf(stderr, "tilec: -a %s=%s: kernel '%s' has no scalar parameter '%s' (%s%s)\n", o->scalars[s].name,
              o->scalars[s].value, tile_kernel_name(k), o->scalars[s].name, names[0] ? "its scalar parameters: " : "it has none",
              names);
      return 2;
    }
  }
  for (unsigned i = 0; i < as->n; i++) {
    tile_param_info pi;
    tile_kernel_param(k, i, &pi);
    if (!pi.is_tensor) {
      const char *val = NULL;
      for (unsigned s = 0; s < o->nscalars; s++)
        if (strcmp(o->scalars[s].name, pi.name) == 0) val = o->scalars[s].value;
      if (!val) {
        fprintf(stderr, "tilec: scalar parameter '%s' needs a value: -a %s=VALUE\n", pi.name, pi.name);
        return 2;
      }
      char what[80];
      snprintf(what, sizeof what, "-a %s", pi.name);
      int rc;
      if (pi.dtype == TILE_F32 || pi.dtype == TILE_F16 || pi.dtype == TILE_BF16 || pi.dtype == TILE_F64) {
        double x;
        if ((rc = opt_real(what, val, -INFINITY, INFINITY, &x))) return rc;
        as->args[i] = tile_arg_float(x);
      } else if (pi.dtype == TILE_BOOL) {
        int64_t x = strcmp(val, "true") == 0 ? 1 : strcmp(val, "false") == 0 ? 0 : -1;
        if (x < 0 && !scan_int(val, 0, 1, &x))
          return die_usage("%s: bad value '%s' (want true, false, 1 or 0)", what, val);
        as->args[i] = tile_arg_int(x);
      } else {
        int64_t x;
        bool i32 = pi.dtype == TILE_I32, u32 = pi.dtype == TILE_U32;
        if ((rc = opt_int(what, val, u32 ? 0 : i32 ? INT32_MIN : INT64_MIN, u32 ? UINT32_MAX : i32 ? INT32_MAX : INT64_MAX, &x)))
          return rc;
        as->args[i] = tile_arg_int(x);
      }
      continue;
    }
    int64_t shape[TILE_MAX_RANK], n = 1, bytes;
    bool overflow = false;
    for (unsigned d = 0; d < pi.rank; d++) {
      if (pi.dim_symbol[d]) {
        if (!lookup_size(o, pi.dim_symbol[d], &shape[d])) {
          fprintf(stderr, "tilec: size '%s' of '%s' is not given: --size %s=N\n", pi.dim_symbol[d], pi.name,
                  pi.dim_symbol[d]);
          return 2;
        }
      } else {
        shape[d] = pi.dim_size[d];
      }
      overflow |= __builtin_mul_overflow(n, shape[d], &n);
    }
    if (overflow || __builtin_mul_overflow(n, (int64_t)tile_dtype_size(pi.dtype), &bytes) || bytes == INT64_MAX) {
      fprintf(stderr, "tilec: --size: the size in bytes of tensor '%s' [", pi.name);
      for (unsigned d = 0; d < pi.rank; d++) fprintf(stderr, "%s%lld", d ? ", " : "", (long long)shape[d]);
      fprintf(stderr, "] %s overflows 64 bits\n", tile_dtype_name(pi.dtype));
      return 2;
    }
    if (show) {
      printf("  %-10s %s%s[", pi.name, pi.is_output ? "out " : "", tile_dtype_name(pi.dtype));
      for (unsigned d = 0; d < pi.rank; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
      printf("]\n");
    }
    struct run_buf *b = &as->bufs[i];
    b->n = (size_t)n;
    b->bytes = (size_t)bytes;
    b->host = malloc(b->bytes + 1);
    if (!b->host) {
      fprintf(stderr, "tilec: out of host memory\n");
      return 1;
    }
    if (pi.is_output && !pi.is_read)
      fill_nan(b->host, pi.dtype, b->n);
    else
      fill_random(&o->rng, b->host, pi.dtype, b->n);
    if (pi.is_used) as->bytes_moved += (double)b->bytes * (pi.is_output && pi.is_read ? 2 : 1);
    if (tile_mem_alloc(ctx, dev, b->bytes, &b->dev) || tile_mem_upload(ctx, dev, b->dev, b->host, b->bytes)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      return 1;
    }
    as->args[i] = tile_arg_tensor(b->dev, pi.dtype, pi.rank, shape, NULL);
  }
  return 0;
}

static void free_args(tile_context *ctx, tile_device dev, struct arg_set *as) {
  for (unsigned i = 0; i < as->n; i++) {
    tile_mem_free(ctx, dev, as->bufs[i].dev);
    free(as->bufs[i].host);
    free(as->bufs[i].ref);
  }
  memset(as, 0, sizeof *as);
}

/* The source's `//! sizes` and `//! flops` lines fill what the command line left open
 * (flops_buf, 256 bytes, holds the expression); the input generator is seeded. Returns 0
 * or the exit status after saying what is wrong with a `//! sizes` line. */
static int apply_meta(struct options *o, const char *src, char *flops_buf) {
  char mbuf[256];
  if (!o->nsizes && meta(src, o->kernel, "sizes", mbuf, sizeof mbuf)) {
    char origin[300];
    snprintf(origin, sizeof origin, "%s: //! sizes", o->file);
    int rc = parse_sizes(o, mbuf, origin);
    if (rc) return rc;
  }
  if (!o->flops && meta(src, o->kernel, "flops", flops_buf, 256)) {
    o->flops = flops_buf;
    o->flops_origin = "//! flops";
  }
  rng_seed(&o->rng, (uint64_t)o->seed);
  return 0;
}

/* The device to run on (--device, or auto: CUDA when usable); 77 when CUDA was asked for
 * and is not there. */
static int pick_device(tile_context *ctx, const struct options *o, tile_device *dev, tile_device_info *info) {
  *dev = o->device;
  if (o->device_auto) {
    *dev = tile_device_query(ctx, TILE_DEVICE_CUDA, info) == TILE_OK ? TILE_DEVICE_CUDA : TILE_DEVICE_CPU;
  } else if (*dev == TILE_DEVICE_CUDA && tile_device_query(ctx, *dev, info) != TILE_OK) {
    fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
    return 77;
  }
  if (*dev == TILE_DEVICE_CPU) tile_device_query(ctx, *dev, info);
  return 0;
}

/* What run, tune and cache bench do first: the source read, its //! lines applied, the
 * device picked (its start-up time in *driver_ms when asked). NULL with *rc set on failure. */
static char *open_for_run(tile_context *ctx, struct options *o, size_t *len, char *flops_buf, tile_device *dev,
                          tile_device_info *info, double *driver_ms, int *rc) {
  char *src = read_source(o->file, len);
  if (!src) {
    *rc = 1;
    return NULL;
  }
  if ((*rc = apply_meta(o, src, flops_buf))) {
    free(src);
    return NULL;
  }
  double t0 = tl_now_ms();
  *rc = pick_device(ctx, o, dev, info);
  if (driver_ms) *driver_ms = tl_now_ms() - t0;
  if (*rc) {
    free(src);
    return NULL;
  }
  return src;
}

/* Compile flags that follow from the input and the options: Tile IR input, --verify-each. */
static unsigned source_flags(const struct options *o) {
  return (o->verify_each ? TILE_VERIFY_EACH : 0u) | (is_ir_path(o->file) ? TILE_SOURCE_IR : 0u);
}

/* A configuration string "T=f16,BN=16,..." as defines (their text copied into buf);
 * returns how many (0 when cfg is empty or does not fit). */
static unsigned config_defines(const char *cfg, char *buf, size_t cap, tile_define *d, unsigned max) {
  if (!cfg || strlen(cfg) >= cap) return 0;
  strcpy(buf, cfg);
  unsigned n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
    if (!split_eq(tok, &d[n].name, &d[n].value)) return 0;
    n++;
  }
  return n;
}

static int run_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char fbuf[256];
  tile_device dev;
  tile_device_info info;
  int drc;
  char *src = open_for_run(ctx, o, &len, fbuf, &dev, &info, NULL, &drc);
  if (!src) return drc;

  unsigned flags = source_flags(o) | (o->autotune ? TILE_AUTOTUNE : 0u) | (o->autoconfig ? TILE_AUTOCONFIG : 0u) |
                   (o->fixed_config ? TILE_FIXED_CONFIG : 0u);
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, dev, o->arch, flags, o->schedule};
  tile_kernel *k = NULL, *kref = NULL;
  if (tile_compile_string(ctx, o->file, src, len, &co, &k)) {
    fprintf(stderr, "%s", tile_errmsg(ctx));
    free(src);
    return 1;
  }
  printf("kernel %s [%s] on %s\n", tile_kernel_name(k), tile_kernel_config(k), info.name);
  o->config = tile_kernel_config(k);
  struct arg_set as;
  int rc = make_args(ctx, o, k, dev, true, &as);
  unsigned np = as.n;
  tile_arg *args = as.args, rargs[MAX_ARGS];
  struct run_buf *bufs = as.bufs;
  double bytes_moved = as.bytes_moved;
  /* the reference's arguments: the same inputs on the host, its own copy of the outputs */
  for (unsigned i = 0; i < np && !rc; i++) {
    rargs[i] = args[i];
    if (args[i].kind != TILE_ARG_TENSOR) continue;
    struct run_buf *b = &bufs[i];
    rargs[i].u.tensor.data = b->host;
    tile_param_info pi;
    tile_kernel_param(k, i, &pi);
    if (!pi.is_output) continue;
    if (!(b->ref = malloc(b->bytes + 1))) {
      fprintf(stderr, "tilec: out of host memory\n");
      rc = 1;
      break;
    }
    memcpy(b->ref, b->host, b->bytes);
    rargs[i].u.tensor.data = b->ref;
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
      printf(", %u threads, %u B shared, %d registers, %d B local, %d per SM x %d SMs, compiled in %.1f ms%s",
             ks.threads, ks.shared_bytes, ks.registers, ks.local_bytes, ks.blocks_per_sm, ks.multiprocessors,
             ks.compile_ms, ks.cache_hit == 2 ? " (on-disk cache)" : ks.cache_hit ? " (cached)" : "");
    printf("\n");
    if (ks.repacked) {
      printf("  repacked to aligned rows first:");
      for (unsigned i = 0; i < 32 && i < tile_kernel_param_count(k); i++) {
        tile_param_info pi;
        if (ks.repacked >> i & 1 && tile_kernel_param(k, i, &pi) == TILE_OK) printf(" %s", pi.name);
      }
      printf("\n");
    }
    const char *ran = tile_kernel_tuned_config(k);
    if (ran && (o->autotune || o->autoconfig || (tile_kernel_config(k) && strcmp(ran, tile_kernel_config(k)))))
      printf("  %s [%s]\n", o->autotune ? "tuned" : "chosen for the shape", ran);
  }
  if (!rc && o->check && dev != TILE_DEVICE_CPU) {
    /* the reference runs the configuration the GPU ran (its target's defaults or the one
     * chosen for the shape, not the plain defaults): outputs such as a split-K or
     * flash-decoding kernel's partials depend on the tile sizes */
    const char *ran = tile_kernel_tuned_config(k);
    tile_define rdefs[MAX_DEFINES];
    char rbuf[1024];
    unsigned nr = config_defines(ran ? ran : tile_kernel_config(k), rbuf, sizeof rbuf, rdefs, MAX_DEFINES);
    tile_compile_options cc = co;
    cc.device = TILE_DEVICE_CPU;
    cc.arch = NULL;
    cc.flags = (cc.flags & ~(unsigned)(TILE_AUTOTUNE | TILE_AUTOCONFIG)) | TILE_FIXED_CONFIG; /* that one, as is */
    if (nr) cc.defines = rdefs, cc.ndefines = nr;
    if (tile_compile_string(ctx, o->file, src, len, &cc, &kref)) {
      fprintf(stderr, "%s", tile_errmsg(ctx));
      rc = 1;
    }
  }
  free(src);
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
      size_t nan = 0, inf = 0; /* NaNs anywhere; infinities that differ (equal ones match) */
      for (size_t e = 0; e < b->n; e++) {
        double g = elem_as_double(b->host, pi.dtype, e), r = elem_as_double(b->ref, pi.dtype, e);
        if (isnan(g) || isnan(r)) {
          nan++;
          continue;
        }
        if (isinf(g) || isinf(r)) {
          if (g != r) inf++;
          continue;
        }
        num += (g - r) * (g - r);
        den += r * r;
        if (fabs(g - r) > maxabs) maxabs = fabs(g - r);
      }
      double rel = den > 0 ? sqrt(num / den) : sqrt(num);
      double tol = tolerance_for(pi.dtype);
      bool ok = nan == 0 && inf == 0 && rel <= tol;
      printf("  check %-10s rel_l2=%.3e max_abs=%.3e nan=%zu tol=%.0e  %s", pi.name, rel, maxabs, nan, tol,
             ok ? "PASS" : "FAIL");
      if (inf) printf(" (%zu infinities differ)", inf);
      printf("\n");
      if (!ok) rc = 1;
    }
  }
  double flops = 0;
  bool have_flops = false;
  if (!rc && o->bench && o->flops) {
    have_flops = flops_value(o, &flops);
    if (!have_flops) rc = 1;
  }
  if (!rc && o->bench) {
    tile_bench_options bo = {0};
    bo.reps = (int)o->reps;
    tile_bench_result br;
    if (tile_bench(ctx, k, args, np, &bo, &br)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
    } else {
      double tflops = flops / (br.median_ms * 1e-3) / 1e12, gbps = bytes_moved / (br.median_ms * 1e-3) / 1e9;
      printf("  time median %.4f ms (min %.4f, %d runs)", br.median_ms, br.min_ms, br.reps);
      if (have_flops) printf(", %.2f TFLOP/s", tflops);
      printf(", %.1f GB/s", gbps);
      /* percentages of the device's peaks (all 0 on the interpreter: none printed) */
      const char *what = "";
      double peak = have_flops ? flop_peak(k, &info, &what) : 0;
      char pct[160] = "";
      int n = peak > 0 ? snprintf(pct, sizeof pct, "%.0f%% of the %s peak", 100 * tflops / peak, what) : 0;
      if (info.peak_mem_gbps > 0)
        snprintf(pct + n, sizeof pct - (size_t)n, "%s%.0f%% of memory bandwidth", n ? ", " : "",
                 100 * gbps / info.peak_mem_gbps);
      printf(pct[0] ? " (%s)\n" : "%s\n", pct);
    }
  }
  free_args(ctx, dev, &as);
  tile_kernel_release(k);
  tile_kernel_release(kref);
  if (!rc) printf("ok\n");
  return rc;
}

/* ---- tilec tune ---- */

struct tune_ui {
  bool tty;
  double flops; /* 0 when unknown */
};

static void tune_progress(void *ud, const tile_tune_progress *p) {
  struct tune_ui *ui = ud;
  const tile_tune_config *c = p->config;
  char what[64];
  if (c->outcome == TILE_TUNE_TIMED)
    snprintf(what, sizeof what, "%.4f ms", c->median_ms);
  else
    snprintf(what, sizeof what, "%s", tile_tune_outcome_name(c->outcome));
  if (ui->tty) {
    char best[96] = "-";
    if (p->best) snprintf(best, sizeof best, "%.4f ms [%.60s]", p->best_ms, p->best);
    fprintf(stderr, "\r\033[K[%u/%u] %.0fs  best %s  last [%s] %s", p->index, p->total, p->elapsed_ms / 1000, best,
            c->config ? c->config : "", what);
    fflush(stderr);
  } else {
    fprintf(stderr, "[%u/%u] %s: %s%s%s%s\n", p->index, p->total, c->config ? c->config : "", what, c->reason ? " (" : "",
            c->reason ? c->reason : "", c->reason ? ")" : "");
  }
}

static int row_order(const tile_tune_config *a, const tile_tune_config *b) {
  static const int rank[] = {[TILE_TUNE_CACHED] = 0, [TILE_TUNE_TIMED] = 1, [TILE_TUNE_WRONG] = 2,
                             [TILE_TUNE_FAILED] = 3, [TILE_TUNE_PRUNED] = 4, [TILE_TUNE_SKIPPED] = 5};
  if (rank[a->outcome] != rank[b->outcome]) return rank[a->outcome] - rank[b->outcome];
  if (a->outcome == TILE_TUNE_TIMED) return a->median_ms < b->median_ms ? -1 : a->median_ms > b->median_ms;
  return 0;
}

static int cmp_rows(const void *x, const void *y) {
  const tile_tune_config *const *a = x, *const *b = y;
  int r = row_order(*a, *b);
  return r ? r : (*a < *b ? -1 : *a > *b);
}

static int tune_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char fbuf[256];
  tile_device dev;
  tile_device_info info;
  int rc;
  char *src = open_for_run(ctx, o, &len, fbuf, &dev, &info, NULL, &rc);
  if (!src) return rc;
  unsigned flags = source_flags(o);
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, dev, o->arch, flags, o->schedule};
  tile_kernel *k = NULL;
  if (tile_compile_string(ctx, o->file, src, len, &co, &k)) {
    fprintf(stderr, "%s", tile_errmsg(ctx));
    free(src);
    return 1;
  }
  o->config = tile_kernel_config(k);
  struct arg_set as;
  rc = make_args(ctx, o, k, dev, false, &as);
  struct tune_ui ui = {.tty = isatty(fileno(stderr)) != 0};
  double flops = 0;
  if (!rc && o->flops) {
    if (flops_value(o, &flops)) ui.flops = flops;
    else rc = 1;
  }
  if (!rc) printf("tuning %s [%s] on %s\n", tile_kernel_name(k), tile_kernel_config(k), info.name);
  fflush(stdout);
  tile_tune_options to = {0};
  to.budget_ms = o->budget_s > 0 ? o->budget_s * 1000 : 0;
  to.config_budget_ms = o->config_budget_ms;
  to.max_configs = (unsigned)o->max_configs;
  to.threads = (int)o->threads;
  to.params = o->params;
  to.reps = o->reps_set ? (int)o->reps : 0;
  to.flags = (o->force ? TILE_TUNE_FORCE : 0u) | (o->no_store ? TILE_TUNE_NO_STORE : 0u);
  to.progress = tune_progress;
  to.progress_ud = &ui;
  tile_tune_result r;
  memset(&r, 0, sizeof r);
  tile_status st = TILE_OK;
  if (!rc) {
    st = tile_tune(ctx, o->file, src, len, &co, as.args, as.n, &to, &r);
    if (ui.tty) fprintf(stderr, "\r\033[K");
    if (st) {
      const char *m = tile_errmsg(ctx);
      fprintf(stderr, "tilec: %s%s", m, m[0] && m[strlen(m) - 1] == '\n' ? "" : "\n");
      rc = st == TILE_NO_DRIVER ? 77 : 1;
    }
  }
  if (!rc) {
    const tile_tune_config **rows = malloc(sizeof *rows * (r.nconfigs + 1));
    for (unsigned i = 0; rows && i < r.nconfigs; i++) rows[i] = &r.configs[i];
    if (rows) qsort(rows, r.nconfigs, sizeof *rows, cmp_rows);
    int w = 9;
    for (unsigned i = 0; i < r.nconfigs; i++)
      if (r.configs[i].config && (int)strlen(r.configs[i].config) > w) w = (int)strlen(r.configs[i].config);
    printf("%4s  %-*s %-8s %10s %9s %5s %9s %6s %9s %10s  %s\n", "#", w, "config", "result", "time ms",
           ui.flops ? "TFLOP/s" : "", "regs", "smem KiB", "local", "rel.err", "compile ms", "note");
    unsigned shown = o->top > 0 && (unsigned)o->top < r.nconfigs ? (unsigned)o->top : r.nconfigs;
    for (unsigned i = 0; rows && i < shown; i++) {
      const tile_tune_config *c = rows[i];
      char t[32] = "", tf[32] = "", rg[16] = "", sm[16] = "", lc[16] = "", re[16] = "", cm[16] = "";
      if (c->median_ms > 0) snprintf(t, sizeof t, "%.4f", c->median_ms);
      if (c->median_ms > 0 && ui.flops) snprintf(tf, sizeof tf, "%.1f", ui.flops / (c->median_ms * 1e-3) / 1e12);
      if (c->registers >= 0) snprintf(rg, sizeof rg, "%d", c->registers);
      if (c->shared_bytes) snprintf(sm, sizeof sm, "%.1f", c->shared_bytes / 1024.0);
      if (c->local_bytes >= 0) snprintf(lc, sizeof lc, "%d", c->local_bytes);
      if (c->rel_err >= 0) snprintf(re, sizeof re, "%.1e", c->rel_err);
      if (c->compile_ms > 0) snprintf(cm, sizeof cm, "%.1f", c->compile_ms);
      printf("%4u  %-*s %-8s %10s %9s %5s %9s %6s %9s %10s  %s\n", i + 1, w, c->config && c->config[0] ? c->config : "(default)",
             tile_tune_outcome_name(c->outcome), t, tf, rg, sm, lc, re, cm, c->reason ? c->reason : "");
    }
    if (shown < r.nconfigs) printf("      ... %u more rows (--top=0 shows all)\n", r.nconfigs - shown);
    free(rows);
    printf("best: %s  %.4f ms", r.best && r.best[0] ? r.best : "(default)", r.best_ms);
    if (ui.flops && r.best_ms > 0) printf(", %.1f TFLOP/s", ui.flops / (r.best_ms * 1e-3) / 1e12);
    if (r.best_ms > 0 && as.bytes_moved > 0) printf(", %.1f GB/s", as.bytes_moved / (r.best_ms * 1e-3) / 1e9);
    printf("%s\n", r.from_cache == 2 ? "  (stored result, from the on-disk cache; --force tunes again)"
                   : r.from_cache == 1 ? "  (stored result)" : "");
    if (!r.from_cache)
      printf("%u timed, %u pruned, %u failed, %u wrong, %u not tried; %.1f s\n", r.timed, r.pruned, r.failed, r.wrong,
             r.skipped, r.total_ms / 1000);
    printf("defines:");
    for (unsigned i = 0; i < r.ndefines; i++) printf(" -D %s=%s", r.defines[i].name, r.defines[i].value);
    printf("\ntuning key %s, cache %s\n", r.key, tile_cache_path(ctx)[0] ? tile_cache_path(ctx) : "(off)");
  }
  tile_tune_result_free(&r);
  free_args(ctx, dev, &as);
  tile_kernel_release(k);
  free(src);
  return rc;
}

/* ---- tilec aot ----
 * The library writes the C text (tile_emit_aot); tilec finds ptxas, assembles each PTX into a
 * cubin through the library's callback, and writes PREFIX.h and PREFIX.c. */

enum { MAX_AOT_LIST = 16 };

/* Splits a comma-separated list in place into at most MAX_AOT_LIST items; false if longer
 * or an item is empty. */
static bool split_list(char *text, const char **items, unsigned *n) {
  *n = 0;
  for (char *p = text;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = 0;
    if (!*p || *n == MAX_AOT_LIST) return false;
    items[(*n)++] = p;
    if (!comma) return true;
    p = comma + 1;
  }
}

static bool executable(const char *path) { return path && path[0] && access(path, X_OK) == 0; }

/* ptxas: --ptxas, $PTXAS, the CUDA toolkit's, PATH, or BUILD/ptxas/ptxas next to tilec
 * (tools/setup.sh fetches it there); NULL when there is none. */
static const char *find_ptxas(const struct options *o, char *buf, size_t len) {
  if (o->ptxas) return o->ptxas;
  const char *env = getenv("PTXAS");
  if (executable(env)) return env;
  if (executable("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n && (size_t)snprintf(buf, len, "%.*s/ptxas", (int)n, path) < len && executable(buf)) return buf;
    path = end ? end + 1 : NULL;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash && (size_t)snprintf(buf, len, "%.*s/ptxas/ptxas", (int)(slash - self), self) < len && executable(buf))
      return buf;
  }
  return NULL;
}

struct assembler {
  const char *ptxas;
  char dir[64]; /* a temporary directory for the PTX, the cubin and ptxas's messages */
  char *image;  /* the last cubin (handed to the library until the next call) */
};

static char *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = realloc(buf, 2 * cap + 1);
    if (!bigger) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger;
    cap *= 2;
  }
  bool bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* tile_assemble_fn: ptxas -arch=ARCH on the PTX (a whole-program compile, as the driver
 * loads it). */
static int assemble_ptx(void *ud, const char *arch, const char *ptx, size_t ptx_len, const void **image,
                        size_t *image_len, char *err, size_t errlen) {
  struct assembler *as = ud;
  char in[128], out[128], log[128], archopt[64];
  snprintf(in, sizeof in, "%s/kernel.ptx", as->dir);
  snprintf(out, sizeof out, "%s/kernel.cubin", as->dir);
  snprintf(log, sizeof log, "%s/ptxas.log", as->dir);
  snprintf(archopt, sizeof archopt, "-arch=%s", arch);
  if (write_file(in, ptx, ptx_len)) {
    snprintf(err, errlen, "cannot write the PTX to %s", in);
    return 1;
  }
  unlink(out);
  pid_t pid = fork();
  if (pid == 0) {
    FILE *l = freopen(log, "w", stderr);
    if (l && dup2(fileno(stderr), 1) >= 0) execl(as->ptxas, as->ptxas, archopt, "-o", out, in, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    size_t n = 0;
    char *text = read_whole(log, &n);
    snprintf(err, errlen, "%s %s exited with status %d%s%s", as->ptxas, archopt,
             pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, text && n ? ":\n" : "", text ? text : "");
    free(text);
    return 1;
  }
  free(as->image);
  size_t n = 0;
  as->image = read_whole(out, &n);
  if (!as->image || !n) {
    snprintf(err, errlen, "%s wrote no cubin", as->ptxas);
    return 1;
  }
  *image = as->image;
  *image_len = n;
  return 0;
}

static int aot_cmd(tile_context *ctx, struct options *o) {
  if (!o->out || !o->out[0] || strcmp(o->out, "-") == 0)
    return die_usage("aot needs -o PREFIX (it writes PREFIX.h and PREFIX.c)");
  if (!o->arch) return die_usage("aot needs --arch=ARCH[,ARCH...] (e.g. --arch=sm_90a,sm_80)");
  if (o->unaligned && o->unaligned_also) return die_usage("--unaligned and --unaligned=also exclude each other");
  char arch_text[256], kernel_text[1024];
  const char *archs[MAX_AOT_LIST], *kernels[MAX_AOT_LIST];
  unsigned narchs = 0, nkernels = 0;
  if ((size_t)snprintf(arch_text, sizeof arch_text, "%s", o->arch) >= sizeof arch_text ||
      !split_list(arch_text, archs, &narchs))
    return die_usage("--arch: bad list '%s' (at most %d targets, comma-separated)", o->arch, MAX_AOT_LIST);
  if (o->kernel && ((size_t)snprintf(kernel_text, sizeof kernel_text, "%s", o->kernel) >= sizeof kernel_text ||
                    !split_list(kernel_text, kernels, &nkernels)))
    return die_usage("-k: bad list '%s' (at most %d kernels, comma-separated)", o->kernel, MAX_AOT_LIST);
  /* the C prefix: --name, else PREFIX's file name with other characters than [A-Za-z0-9_] as _ */
  const char *base = strrchr(o->out, '/') ? strrchr(o->out, '/') + 1 : o->out;
  if (!base[0]) return die_usage("-o '%s': PREFIX needs a file name", o->out);
  char symbol[128];
  if (o->symbol) {
    snprintf(symbol, sizeof symbol, "%s", o->symbol);
  } else {
    size_t n = 0;
    if (isdigit((unsigned char)base[0])) symbol[n++] = '_';
    for (const char *p = base; *p && n < sizeof symbol - 1; p++) symbol[n++] = isalnum((unsigned char)*p) ? *p : '_';
    symbol[n] = 0;
  }
  size_t plen = strlen(o->out);
  char *hpath = malloc(plen + 3), *cpath = malloc(plen + 3), *hname = malloc(strlen(base) + 3);
  if (!hpath || !cpath || !hname) {
    free(hpath), free(cpath), free(hname);
    fprintf(stderr, "tilec: out of memory\n");
    return 1;
  }
  sprintf(hpath, "%s.h", o->out);
  sprintf(cpath, "%s.c", o->out);
  sprintf(hname, "%s.h", base);

  struct assembler as = {0};
  char ptxas_buf[4096];
  if (!o->no_cubin) {
    as.ptxas = find_ptxas(o, ptxas_buf, sizeof ptxas_buf);
    if (!as.ptxas)
      fprintf(stderr, "tilec: note: no ptxas found (--ptxas, $PTXAS, /usr/local/cuda/bin/ptxas, PATH): "
                      "PTX only, the driver compiles it on first load\n");
    snprintf(as.dir, sizeof as.dir, "/tmp/tilec-aot-XXXXXX");
    if (as.ptxas && !mkdtemp(as.dir)) {
      fprintf(stderr, "tilec: cannot make a temporary directory: %s\n", strerror(errno));
      free(hpath), free(cpath), free(hname);
      return 1;
    }
  }
  size_t len;
  char *src = read_source(o->file, &len);
  int rc = 1;
  if (src) {
    tile_compile_options co = {NULL, o->defines, o->ndefines, TILE_DEVICE_CUDA, NULL,
                               o->verify_each ? TILE_VERIFY_EACH : 0u, o->schedule};
    if (is_ir_path(o->file)) co.flags |= TILE_SOURCE_IR;
    co.kernel = nkernels == 1 ? kernels[0] : NULL;
    tile_aot_options ao = {0};
    ao.kernels = kernels;
    ao.nkernels = nkernels;
    ao.archs = archs;
    ao.narchs = narchs;
    ao.specializations = o->unaligned ? TILE_AOT_UNALIGNED
                         : o->unaligned_also ? TILE_AOT_ALIGNED | TILE_AOT_UNALIGNED : TILE_AOT_ALIGNED;
    ao.symbol = symbol;
    ao.header_name = hname;
    if (as.ptxas) {
      ao.assemble = assemble_ptx;
      ao.assemble_ud = &as;
    }
    char *h = NULL, *c = NULL;
    size_t hlen = 0, clen = 0;
    tile_status st = tile_emit_aot(ctx, o->file, src, len, &co, &ao, &h, &hlen, &c, &clen);
    free(src);
    if (st != TILE_OK) {
      const char *m = tile_errmsg(ctx);
      fprintf(stderr, "%s%s", m, m[0] && m[strlen(m) - 1] == '\n' ? "" : "\n");
      rc = st == TILE_INVALID_ARGUMENT ? 2 : 1;
    } else {
      rc = write_file(hpath, h, hlen);
      if (!rc) rc = write_file(cpath, c, clen);
    }
    tile_free(h);
    tile_free(c);
  }
  if (as.ptxas) {
    char path[128];
    const char *files[] = {"kernel.ptx", "kernel.cubin", "ptxas.log"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", as.dir, files[i]);
      unlink(path);
    }
    rmdir(as.dir);
  }
  free(as.image);
  free(hpath), free(cpath), free(hname);
  return rc;
}

/* ---- tilec cache ---- */

static void list_entry(void *ud, const tile_cache_entry *e) {
  unsigned *n = ud;
  char when[32] = "";
  time_t t = (time_t)e->mtime;
  struct tm tmv;
  if (localtime_r(&t, &tmv)) strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tmv);
  char size[32];
  if (e->bytes >= 1 << 20)
    snprintf(size, sizeof size, "%.1f MiB", (double)e->bytes / (1 << 20));
  else
    snprintf(size, sizeof size, "%.1f KiB", (double)e->bytes / 1024);
  printf("%-6s %10s  %s  %s%s\n         %s\n", e->kind, size, when, e->valid ? "" : "INVALID ", e->summary, e->file);
  (*n)++;
}

/* One fresh-process measurement for `cache bench`: prints one "probe ..." line. */
static int probe_cmd(tile_context *ctx, struct options *o) {
  size_t len;
  char fbuf[256];
  tile_device dev;
  tile_device_info info;
  double driver_ms;
  int rc;
  char *src = open_for_run(ctx, o, &len, fbuf, &dev, &info, &driver_ms, &rc);
  if (!src) return rc;
  tile_compile_options co = {o->kernel, o->defines, o->ndefines, dev, o->arch,
                             o->fixed_config ? TILE_FIXED_CONFIG : 0u, o->schedule};
  tile_kernel *k = NULL;
  double t1 = tl_now_ms();
  if (tile_compile_string(ctx, o->file, src, len, &co, &k)) {
    fprintf(stderr, "%s", tile_errmsg(ctx));
    free(src);
    return 1;
  }
  double compile_ms = tl_now_ms() - t1;
  o->config = tile_kernel_config(k);
  struct arg_set as;
  rc = make_args(ctx, o, k, dev, false, &as);
  double prepare_ms = 0;
  tile_kernel_stats ks = {0};
  if (!rc) {
    double t2 = tl_now_ms();
    if (tile_kernel_prepare(ctx, k, as.args, as.n)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
    }
    prepare_ms = tl_now_ms() - t2;
    tile_kernel_get_stats(k, &ks);
  }
  if (!rc)
    printf("probe driver_ms=%.3f compile_ms=%.3f prepare_ms=%.3f hit=%d device=%d\n", driver_ms, compile_ms,
           prepare_ms, ks.cache_hit, dev == TILE_DEVICE_CUDA);
  free_args(ctx, dev, &as);
  tile_kernel_release(k);
  free(src);
  return rc;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Cold and warm compile + prepare, each in a fresh process: the first with an empty cache
 * directory, the others reusing what it stored. */
static int bench_cmd(struct options *o, int argc, char **argv) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    fprintf(stderr, "tilec: cannot find this program (/proc/self/exe)\n");
    return 1;
  }
  exe[n] = 0;
  char dir[] = "/tmp/tile-cache-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "tilec: mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  setenv("TILE_CACHE_DIR", dir, 1);
  setenv("CUDA_CACHE_DISABLE", "1", 0); /* a cold start really compiles (the driver's own cache is off) */
  int reps = o->reps_set && o->reps > 1 ? (int)(o->reps < 100 ? o->reps : 100) : 6;
  char **cargv = calloc((size_t)argc + 4, sizeof *cargv);
  int cn = 0;
  cargv[cn++] = exe;
  cargv[cn++] = "cache";
  cargv[cn++] = "_probe";
  for (int i = 3; i < argc; i++)
    if (!starts(argv[i], "--reps=")) cargv[cn++] = argv[i];
  cargv[cn] = NULL;
  double total[100], drv[100];
  int hit[100], on_gpu = 0, rc = 0;
  printf("%-6s %12s %12s %12s %12s  %s\n", "run", "driver ms", "compile ms", "prepare ms", "total ms", "source");
  for (int r = 0; r < reps && !rc; r++) {
    int fd[2];
    if (pipe(fd)) {
      rc = 1;
      break;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fd[1], 1);
      close(fd[0]);
      close(fd[1]);
      execv(exe, cargv);
      _exit(127);
    }
    close(fd[1]);
    char out[4096];
    size_t got = 0;
    ssize_t m;
    while (got < sizeof out - 1 && (m = read(fd[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)m;
    out[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    double d = 0, c = 0, p = 0;
    int h = 0, g = 0;
    const char *line = strstr(out, "probe ");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line ||
        sscanf(line, "probe driver_ms=%lf compile_ms=%lf prepare_ms=%lf hit=%d device=%d", &d, &c, &p, &h, &g) != 5) {
      fprintf(stderr, "tilec: measurement %d failed:\n%s", r + 1, out);
      rc = WIFEXITED(status) && WEXITSTATUS(status) == 77 ? 77 : 1;
      break;
    }
    total[r] = c + p;
    drv[r] = d;
    hit[r] = h;
    on_gpu = g;
    printf("%-6s %12.2f %12.2f %12.2f %12.2f  %s\n", r == 0 ? "cold" : "warm", d, c, p, c + p,
           !g ? "CPU (no code generated)" : h == 2 ? "on-disk cache" : h == 1 ? "memory" : "compiled");
  }
  if (!rc && reps > 1) {
    double w[100];
    int nw = 0, hits = 0;
    for (int r = 1; r < reps; r++) {
      w[nw++] = total[r];
      hits += hit[r] == 2;
    }
    qsort(w, (size_t)nw, sizeof w[0], cmp_dbl);
    double med = nw % 2 ? w[nw / 2] : 0.5 * (w[nw / 2 - 1] + w[nw / 2]);
    qsort(drv, (size_t)reps, sizeof drv[0], cmp_dbl);
    printf("cold %.2f ms; warm median %.2f ms (min %.2f) over %d fresh processes, %d from the on-disk cache; "
           "driver start-up %.1f ms (not included)\n",
           total[0], med, w[0], nw, hits, drv[reps / 2]);
    if (on_gpu && hits != nw) {
      fprintf(stderr, "tilec: a warm run did not load from the on-disk cache\n");
      rc = 1;
    }
  }
  free(cargv);
  tile_context *ctx = NULL;
  tile_context_options co = {.cache_dir = dir};
  if (tile_context_create(&co, &ctx) == TILE_OK) {
    tile_cache_clear(ctx, NULL);
    tile_context_destroy(ctx);
  }
  rmdir(dir);
  return rc;
}

static int cache_cmd(int argc, char **argv) {
  const char *sub = argc > 2 ? argv[2] : "";
  tile_context *ctx = NULL;
  if (tile_context_create(NULL, &ctx)) {
    fprintf(stderr, "tilec: out of memory\n");
    return 1;
  }
  int rc = 0;
  if (tile_cache_status(ctx)[0] && strcmp(sub, "_probe") != 0) /* e.g. a refused directory */
    fprintf(stderr, "tilec: note: %s\n", tile_cache_status(ctx));
  if (strcmp(sub, "path") == 0) {
    printf("%s\n", tile_cache_path(ctx)[0] ? tile_cache_path(ctx) : "(the on-disk cache is off)");
  } else if (strcmp(sub, "list") == 0) {
    unsigned n = 0;
    if (tile_cache_list(ctx, list_entry, &n)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
    } else {
      printf("%u file%s in %s\n", n, n == 1 ? "" : "s", tile_cache_path(ctx)[0] ? tile_cache_path(ctx) : "(off)");
    }
  } else if (strcmp(sub, "clear") == 0) {
    unsigned n = 0;
    if (tile_cache_clear(ctx, &n)) {
      fprintf(stderr, "tilec: %s\n", tile_errmsg(ctx));
      rc = 1;
    }
    printf("removed %u file%s from %s\n", n, n == 1 ? "" : "s",
           tile_cache_path(ctx)[0] ? tile_cache_path(ctx) : "(off)");
  } else if (strcmp(sub, "bench") == 0 || strcmp(sub, "_probe") == 0) {
    struct options o = {0};
    char **orig = calloc((size_t)argc + 1, sizeof *orig); /* parse_args splits NAME=VALUE in place */
    for (int i = 0; orig && i < argc; i++) orig[i] = strdup(argv[i]);
    rc = orig ? parse_args(argc - 2, argv + 2, &o) : 1;
    if (!rc) rc = strcmp(sub, "bench") == 0 ? bench_cmd(&o, argc, orig) : probe_cmd(ctx, &o);
    for (int i = 0; orig && i < argc; i++) free(orig[i]);
    free(orig);
  } else {
    rc = die_usage("cache needs path, list, clear or bench");
  }
  tile_context_destroy(ctx);
  return rc;
}

int main(int argc, char **argv) {
  struct options o = {0};
  if (argc > 1 && strcmp(argv[1], "cache") == 0) return close_stdout(cache_cmd(argc, argv));
  int rc = parse_args(argc, argv, &o);
  if (rc) return close_stdout(rc);
  tile_context *ctx;
  if (tile_context_create(NULL, &ctx)) {
    fprintf(stderr, "tilec: out of memory\n");
    return 1;
  }
  if (o.cmd && strcmp(o.cmd, "aot") != 0 && tile_cache_status(ctx)[0]) /* run and tune use the on-disk cache */
    fprintf(stderr, "tilec: note: %s\n", tile_cache_status(ctx));
  if (o.cmd && strcmp(o.cmd, "run") == 0)
    rc = run_cmd(ctx, &o);
  else if (o.cmd && strcmp(o.cmd, "tune") == 0)
    rc = tune_cmd(ctx, &o);
  else if (o.cmd && strcmp(o.cmd, "aot") == 0)
    rc = aot_cmd(ctx, &o);
  else
    rc = compile_cmd(ctx, &o);
  tile_context_destroy(ctx);
  return close_stdout(rc);
}
