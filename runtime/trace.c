/* trace.c - what the library tells profilers and trace viewers.
 *
 * NVTX: ranges in the domain "tile" around the front end and each pass of a compile, the
 * code generator, the driver's JIT, tuning trials and launches, named by kernel and
 * configuration ("gemm [BM=128,BN=256,...] launch"). Built when CMake found the NVTX v3
 * headers (TILE_HAVE_NVTX; they are header-only). A profiler attaches through
 * NVTX_INJECTION64_PATH (Nsight Systems and Nsight Compute set it); the names are formatted
 * only when that variable was set at context creation, so without a profiler a range costs
 * one branch on a context field.
 *
 * Trace file: tile_context_options.trace_path, else $TILE_TRACE, at context creation. The
 * same events in the Chrome trace event format (JSON: complete events "X" with their
 * duration, instants "i" for cache lookups), appended and flushed as they happen. The
 * format allows the array's closing bracket to be missing, so the file is readable
 * (chrome://tracing, ui.perfetto.dev) while the process runs and after it ends. Timestamps
 * are microseconds of the library's clock (compiler/util/clock.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "rt.h"

#ifdef TILE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

struct rt_trace {
  FILE *f;          /* the trace file, or NULL */
  bool nvtx;        /* a profiler was attached at context creation */
  bool first;       /* no event written yet */
  pthread_mutex_t mu;
  int pid;
#ifdef TILE_HAVE_NVTX
  nvtxDomainHandle_t domain;
#endif
};

tile_status rt_trace_open(tile_context *ctx, const char *path) {
  ctx->trace = NULL;
  if (!path) path = getenv("TILE_TRACE");
  bool nvtx = false;
#ifdef TILE_HAVE_NVTX
  const char *inj = getenv("NVTX_INJECTION64_PATH");
  nvtx = inj && *inj;
#endif
  if ((!path || !*path) && !nvtx) return TILE_OK;
  struct rt_trace *t = tl_malloc(&ctx->alloc, sizeof *t);
  if (!t) return rt_error(ctx, TILE_NOMEM, "out of memory");
  memset(t, 0, sizeof *t);
  t->nvtx = nvtx;
  t->first = true;
  t->pid = (int)getpid();
  pthread_mutex_init(&t->mu, NULL);
  if (path && *path) {
    t->f = fopen(path, "w");
    if (!t->f) {
      int e = errno;
      pthread_mutex_destroy(&t->mu);
      tl_free(t);
      return rt_error(ctx, TILE_IO, "trace file '%s': %s", path, strerror(e));
    }
    fputs("[\n", t->f);
    fflush(t->f);
  }
#ifdef TILE_HAVE_NVTX
  if (nvtx) t->domain = nvtxDomainCreateA("tile");
#endif
  ctx->trace = t;
  return TILE_OK;
}

void rt_trace_close(tile_context *ctx) {
  struct rt_trace *t = ctx->trace;
  if (!t) return;
  if (t->f) {
    fputs("]\n", t->f);
    fclose(t->f);
  }
#ifdef TILE_HAVE_NVTX
  if (t->domain) nvtxDomainDestroy(t->domain);
#endif
  pthread_mutex_destroy(&t->mu);
  tl_free(t);
  ctx->trace = NULL;
}

/* s as the inside of a JSON string */
static void put_json(FILE *f, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
}

static void name_of(char *buf, size_t cap, const char *kernel, const char *config, const char *what) {
  snprintf(buf, cap, "%s%s%s%s%s%s", kernel ? kernel : "", config && *config ? " [" : "", config ? config : "",
           config && *config ? "]" : "", kernel ? " " : "", what);
}

#ifdef TILE_HAVE_NVTX
/* A range (push) or a point (mark) named "KERNEL [CONFIG] WHAT" in the tile domain. */
static void nvtx_event(struct rt_trace *t, bool push, const char *kernel, const char *config, const char *what) {
  char name[512];
  name_of(name, sizeof name, kernel, config, what);
  nvtxEventAttributes_t ev;
  memset(&ev, 0, sizeof ev);
  ev.version = NVTX_VERSION;
  ev.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  ev.messageType = NVTX_MESSAGE_TYPE_ASCII;
  ev.message.ascii = name;
  if (push) nvtxDomainRangePushEx(t->domain, &ev);
  else nvtxDomainMarkEx(t->domain, &ev);
}
#endif

double rt_trace_begin_(tile_context *ctx, const char *kernel, const char *config, const char *what) {
#ifdef TILE_HAVE_NVTX
  if (ctx->trace->nvtx) nvtx_event(ctx->trace, true, kernel, config, what);
#else
  (void)kernel, (void)config, (void)what;
#endif
  return tl_now_ms();
}

static void write_event(struct rt_trace *t, char ph, double t0, double t1, const char *cat, const char *kernel,
                        const char *config, const char *what, const char *args) {
  char name[512];
  name_of(name, sizeof name, kernel, config, what);
  long tid = (long)syscall(SYS_gettid);
  pthread_mutex_lock(&t->mu);
  fprintf(t->f, "%s{\"name\":\"", t->first ? "" : ",\n");
  t->first = false;
  put_json(t->f, name);
  fprintf(t->f, "\",\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f,", cat, ph, t0 * 1e3);
  if (ph == 'X') fprintf(t->f, "\"dur\":%.3f,", (t1 - t0) * 1e3);
  else fputs("\"s\":\"t\",", t->f);
  fprintf(t->f, "\"pid\":%d,\"tid\":%ld,\"args\":{\"kernel\":\"", t->pid, tid);
  put_json(t->f, kernel);
  fputs("\",\"config\":\"", t->f);
  put_json(t->f, config);
  fputc('"', t->f);
  if (args && *args) fprintf(t->f, ",%s", args); /* already JSON members */
  fputs("}}", t->f);
  fflush(t->f);
  pthread_mutex_unlock(&t->mu);
}

void rt_trace_end_(tile_context *ctx, double t0, const char *cat, const char *kernel, const char *config,
                   const char *what, const char *args_fmt, ...) {
  struct rt_trace *t = ctx->trace;
#ifdef TILE_HAVE_NVTX
  if (t->nvtx) nvtxDomainRangePop(t->domain);
#endif
  if (!t->f) return;
  double t1 = tl_now_ms();
  char args[768] = "";
  va_list ap;
  va_start(ap, args_fmt);
  if (args_fmt) vsnprintf(args, sizeof args, args_fmt, ap);
  va_end(ap);
  write_event(t, 'X', t0, t1, cat, kernel, config, what, args);
}

void rt_trace_instant_(tile_context *ctx, const char *cat, const char *kernel, const char *config, const char *what,
                       const char *args_fmt, ...) {
  struct rt_trace *t = ctx->trace;
#ifdef TILE_HAVE_NVTX
  if (t->nvtx) nvtx_event(t, false, kernel, config, what);
#endif
  if (!t->f) return;
  char args[768] = "";
  va_list ap;
  va_start(ap, args_fmt);
  if (args_fmt) vsnprintf(args, sizeof args, args_fmt, ap);
  va_end(ap);
  double now = tl_now_ms();
  write_event(t, 'i', now, now, cat, kernel, config, what, args);
}

/* The pass manager's hook (pass_options.event): one range per pass. */
double rt_trace_pass(void *ud, const char *pass, bool begin, double t0_ms) {
  const struct rt_trace_pass_ud *p = ud;
  if (begin) return rt_trace_begin_(p->ctx, p->kernel, p->config, pass);
  rt_trace_end_(p->ctx, t0_ms, "pass", p->kernel, p->config, pass, NULL);
  return 0;
}
