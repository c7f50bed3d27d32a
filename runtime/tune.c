/* tune.c - the autotuner (tile_tune), TILE_AUTOTUNE kernels and TILE_AUTOCONFIG's choice.
 *
 * A search runs in these steps (tile.h describes what the caller sees):
 *   1. The kernel's compile-time parameters come from the front end (lang_kernel_info).
 *      Pinned are those the caller defines, dtype parameters naming a tensor's dtype and int
 *      parameters naming a tensor's fixed size (taken from the arguments); tuned are the
 *      other int parameters with two or more candidates (or the ones listed in
 *      tile_tune_options.params).
 *   2. The default configuration (pins only) is compiled on this thread and the arguments
 *      bound to it: that validates them and gives the tuning key. A result stored in the
 *      context or on disk for the key ends the call.
 *   3. The configurations (the default first, then the space in a fixed pseudo-random order,
 *      so that a search cut short by the budget samples the whole space) become jobs. Worker
 *      threads, each with a private context, run the front end (a violated `where`
 *      constraint prunes), and for CUDA the GPU passes, LLVM (a kernel over the device's
 *      shared memory prunes) and the driver's JIT to a cubin (cuLink, which is thread-safe).
 *      At most a window of jobs runs ahead of the consumer, bounding the memory held.
 *   4. This thread takes the jobs in order: compiles the front end again in the caller's
 *      context (sub-millisecond), loads the worker's cubin, launches once with the outputs
 *      poisoned (write-only outputs) or restored (outputs that are also read or alias
 *      another argument), compares the outputs with the reference (the default's, or the
 *      first configuration that ran), and times it with tile_bench. Configurations that
 *      use local memory (spills) are put off until the others are done.
 *   5. The winner is stored in the context and on disk (kind "tune"), and its cubin in the
 *      module cache, so the kernel compiled with the winning defines loads without a JIT.
 * The outputs are saved to device memory before step 4 and restored at the end.        */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "fp16.h"
#include "lang.h"
#include "passes.h"
#include "rng.h"
#include "rt.h"

enum { MAX_SPACE = 1000000 };

static const char *const outcome_names[] = {"timed", "pruned", "failed", "wrong", "skipped", "cached"};

TILE_API const char *tile_tune_outcome_name(tile_tune_outcome o) {
  return (unsigned)o < TL_ARRAY_LEN(outcome_names) ? outcome_names[o] : "?";
}

/* ---- the search space ---- */

struct tparam {
  const char *name;
  enum lang_cparam_kind kind;
  const char *def;    /* the default value as text */
  const char *pinned; /* the value when pinned, else NULL */
  bool tuned;
  const char **cand;  /* candidate values as text */
  uint32_t ncand;
};

static const char *cvalue_text(struct arena *a, const struct lang_cvalue *v) {
  switch (v->kind) {
  case LANG_CP_INT: return arena_printf(a, "%lld", (long long)v->i);
  case LANG_CP_BOOL: return v->i ? "true" : "false";
  case LANG_CP_STR: return v->s ? arena_strdup(a, v->s) : "";
  case LANG_CP_DTYPE: return ir_dtype_name(v->dt);
  }
  return "";
}

/* The value of `name` in a configuration text "A=1,B=2" (dflt if absent). */
static const char *config_value(struct arena *a, const char *config, const char *name, const char *dflt) {
  size_t n = strlen(name);
  for (const char *p = config; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') return arena_printf(a, "%.*s", (int)(len - n - 1), p + n + 1);
    p = e ? e + 1 : NULL;
  }
  return dflt;
}

static bool in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == ',') p++;
    const char *e = p;
    while (*e && *e != ',' && *e != ' ') e++;
    if ((size_t)(e - p) == n && strncmp(p, name, n) == 0) return true;
    p = e;
  }
  return false;
}

/* ---- the tuner's state ---- */

struct job {
  const char **vals;    /* values of the tuned parameters */
  char *text;           /* "BM=128,BN=64" */
  tile_define *defs;    /* pins + vals */
  unsigned ndefs;
  int state;            /* 0 pending, 1 running, 2 done */
  bool skipped;         /* not compiled: over the budget */
  tile_status st;       /* of the worker's compile */
  bool pruned;
  char *msg;            /* tl_malloc'd (NULL if that failed) */
  struct rt_artifact art;
  double compile_ms;
};

struct outbuf {
  unsigned arg;
  const char *name;
  char *data;       /* the argument's memory (device or host) */
  size_t bytes;     /* its span */
  size_t n;         /* elements in the span */
  tile_dtype dtype;
  bool poison;      /* write-only and not aliased: filled with 0xff before each check */
  void *backup;     /* device (or host) copy of the original contents */
  bool saved;       /* backup holds them */
  void *ref, *cur;  /* host copies: the reference's and the current configuration's */
  double ref_den;   /* sum of squares of the reference's finite elements */
};

struct tuner {
  tile_context *ctx;
  const char *name, *src;
  size_t len;
  tile_compile_options co;   /* kernel, device, arch, flags (defines per job) */
  const tile_arg *args;
  unsigned nargs;
  tile_tune_options to;
  struct rt_gpu_target target;
  struct arena *a;
  double t0, deadline;
  double trace_t;            /* the trace: when the current configuration's event began */
  /* parameters */
  struct tparam *p;
  uint32_t np;
  uint32_t *tuned;           /* indices into p */
  uint32_t ntuned;
  tile_define *pins;
  unsigned npins;
  /* jobs and workers */
  struct job *jobs;
  unsigned njobs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned next, consumed, window, nworkers;
  bool stop;
  /* outputs */
  struct outbuf *outs;
  unsigned nouts;
  float *f16_table;
  bool have_ref;
  const char *ref_text;
  /* results */
  VEC(tile_tune_config) rows;
  int best_row;
  double best_ms;
  unsigned best_job;
  tile_kernel *best_k;       /* its kernel, kept to store its code in the module cache */
  unsigned timed, pruned, failed, wrong, skipped;
  tile_status default_st; /* why the default configuration failed */
  unsigned *deferred;        /* configurations put off (spills), in the order met */
  bool nomem;                /* a host allocation failed: the search stops, TILE_NOMEM */
  bool worker_nomem;         /* (under mu) a worker could not make its context */
};


/* The strings of the result and of the jobs are tl_malloc blocks of the caller's context
 * (tile_tune_result_free releases them without it); NULL when out of memory. */
static char *xstrdup(struct tuner *T, const char *s) { return tl_strdup(&T->ctx->alloc, s); }

/* A configuration that the kernel's own rules or the device's limits exclude is pruned,
 * not failed: a violated `where` constraint, too many registers per thread for a tile, or
 * more shared memory than the device has (tile_errcode's codes). */
static bool is_pruned(tile_status st, const char *code) {
  if (!code) return false;
  if (st == TILE_COMPILE) return strcmp(code, "CONSTRAINT") == 0;
  return st == TILE_UNSUPPORTED && (strcmp(code, TL_CODE_SMEM) == 0 || strcmp(code, TL_CODE_REGISTERS) == 0);
}

/* ---- workers ---- */

static void run_job(struct tuner *T, tile_context *wctx, struct job *j) {
  double t0 = tl_now_ms();
  tile_compile_options co = T->co;
  co.defines = j->defs;
  co.ndefines = j->ndefs;
  co.flags = (co.flags & ~(unsigned)TILE_AUTOTUNE) | TILE_NO_CACHE;
  tile_kernel *k = NULL;
  tile_status st = rt_compile_string(wctx, T->name, T->src, T->len, &co, false, &k);
  if (st) {
    j->pruned = is_pruned(st, wctx->errcode);
  } else if (co.device == TILE_DEVICE_CUDA) {
    struct arena scratch;
    jmp_buf oom;
    arena_init(&scratch, &wctx->alloc, &oom);
    if (setjmp(oom)) {
      st = rt_error(wctx, TILE_NOMEM, "out of memory");
    } else {
      struct rt_bound b;
      st = rt_bind_args(wctx, k, T->args, T->nargs, &scratch, &b);
      if (!st) st = rt_gpu_build(k, &b, &T->target, &j->art);
      j->pruned = is_pruned(st, wctx->errcode);
    }
    arena_free(&scratch);
  }
  if (st) j->msg = xstrdup(T, wctx->errbrief[0] ? wctx->errbrief : "unknown error");
  j->st = st;
  rt_kernel_release(k);
  j->compile_ms = tl_now_ms() - t0;
}

/* Takes the next job if it may start; returns its index or -1 when there is none. */
static int claim(struct tuner *T, bool wait) {
  for (;;) {
    if (T->stop || T->next >= T->njobs) return -1;
    if (T->next < T->consumed + T->window) {
      T->jobs[T->next].state = 1;
      return (int)T->next++;
    }
    if (!wait) return -1;
    pthread_cond_wait(&T->cv, &T->mu);
  }
}

/* Runs job i (claimed, lock not held) unless the budget is spent. */
static void do_job(struct tuner *T, tile_context *wctx, unsigned i) {
  struct job *j = &T->jobs[i];
  if (i > 0 && tl_now_ms() > T->deadline) {
    j->skipped = true;
  } else if (!wctx) {
    j->st = TILE_NOMEM;
    j->msg = xstrdup(T, "out of memory");
  } else {
    run_job(T, wctx, j);
  }
}

static void *worker(void *arg) {
  struct tuner *T = arg;
  tile_context *wctx = NULL;
  tile_context_options o = {.cache_dir = "", .cpu_threads = 1, .alloc = T->ctx->alloc.fn, .alloc_ud = T->ctx->alloc.ud};
  rt_context_create(&o, &wctx);
  pthread_mutex_lock(&T->mu);
  if (!wctx) T->worker_nomem = true; /* even if it never takes a job: the call fails */
  for (;;) {
    int i = claim(T, true);
    if (i < 0) break;
    pthread_mutex_unlock(&T->mu);
    do_job(T, wctx, (unsigned)i);
    pthread_mutex_lock(&T->mu);
    T->jobs[i].state = 2;
    pthread_cond_broadcast(&T->cv);
  }
  pthread_mutex_unlock(&T->mu);
  rt_context_destroy(wctx);
  return NULL;
}

/* Waits until job i is done (running it here when no worker could be started). */
static void wait_job(struct tuner *T, unsigned i, tile_context *inline_ctx) {
  pthread_mutex_lock(&T->mu);
  T->consumed = i;
  pthread_cond_broadcast(&T->cv);
  while (T->jobs[i].state != 2) {
    if (T->nworkers == 0) {
      int c = claim(T, false);
      if (c >= 0) {
        pthread_mutex_unlock(&T->mu);
        do_job(T, inline_ctx, (unsigned)c);
        pthread_mutex_lock(&T->mu);
        T->jobs[c].state = 2;
        continue;
      }
    }
    pthread_cond_wait(&T->cv, &T->mu);
  }
  if (T->worker_nomem) T->nomem = true;
  pthread_mutex_unlock(&T->mu);
}

/* ---- memory of the outputs ---- */

static tile_status mem_copy(struct tuner *T, void *dst, const void *src, size_t bytes) {
  if (T->co.device == TILE_DEVICE_CPU) {
    memmove(dst, src, bytes);
    return TILE_OK;
  }
  char err[512];
  if (rt_cuda_d2d(&T->ctx->cuda, (CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, err, sizeof err))
    return rt_error(T->ctx, TILE_CUDA, "%s", err);
  return TILE_OK;
}

static tile_status sync_all(struct tuner *T) {
  return T->co.device == TILE_DEVICE_CPU ? TILE_OK : rt_synchronize(T->ctx, TILE_DEVICE_CUDA);
}

/* The span of a tensor argument in elements (0 when empty). */
static size_t span_elems(const tile_tensor *t) {
  bool contiguous = true;
  for (unsigned d = 0; d < t->rank; d++) contiguous &= t->strides[d] == 0;
  size_t n = 1, extent = 1;
  for (unsigned d = 0; d < t->rank && d < TILE_MAX_RANK; d++) {
    if (t->shape[d] <= 0) return 0;
    n *= (size_t)t->shape[d];
    if (!contiguous) extent += (size_t)(t->shape[d] - 1) * (size_t)t->strides[d];
  }
  return contiguous ? n : extent;
}

/* Finds the used outputs, saves them and decides how each is prepared before a check. */
static tile_status setup_outputs(struct tuner *T, tile_kernel *kdef) {
  T->outs = ARENA_NEWN(T->a, struct outbuf, T->nargs + 1);
  for (unsigned u = 0; u < kdef->nparams && u < T->nargs; u++) {
    const tile_param_info *pi = &kdef->params[u];
    const tile_arg *a = &T->args[u];
    if (!pi->is_tensor || !pi->is_output || !pi->is_used || a->kind != TILE_ARG_TENSOR || !a->u.tensor.data)
      continue;
    struct outbuf *o = &T->outs[T->nouts];
    o->arg = u;
    o->name = pi->name;
    o->data = a->u.tensor.data;
    o->dtype = a->u.tensor.dtype;
    o->n = span_elems(&a->u.tensor);
    o->bytes = o->n * rt_dtype_size(o->dtype);
    if (!o->bytes) continue;
    o->poison = !pi->is_read;
    for (unsigned v = 0; v < T->nargs; v++) { /* aliasing another tensor: restore, never poison */
      const tile_arg *b = &T->args[v];
      if (v == u || b->kind != TILE_ARG_TENSOR || !b->u.tensor.data) continue;
      char *lo = b->u.tensor.data;
      size_t bb = span_elems(&b->u.tensor) * rt_dtype_size(b->u.tensor.dtype);
      if (lo < o->data + o->bytes && o->data < lo + bb) o->poison = false;
    }
    T->nouts++;
  }
  tile_status st = sync_all(T); /* the caller's queued work on these buffers comes first */
  for (unsigned i = 0; i < T->nouts && !st; i++) {
    struct outbuf *o = &T->outs[i];
    st = rt_mem_alloc(T->ctx, T->co.device, o->bytes, &o->backup);
    if (st) {
      char why[512]; /* (rt_error writes the buffer tile_errmsg reads) */
      snprintf(why, sizeof why, "%.500s", T->ctx->errmsg);
      st = rt_error(T->ctx, st, "tuning needs %zu bytes of %s memory to save output '%s': %s", o->bytes,
                    T->co.device == TILE_DEVICE_CPU ? "host" : "device", o->name, why);
      break;
    }
    st = mem_copy(T, o->backup, o->data, o->bytes);
    o->saved = !st;
    o->ref = tl_malloc(&T->ctx->alloc, o->bytes);
    o->cur = tl_malloc(&T->ctx->alloc, o->bytes);
    if (!st && (!o->ref || !o->cur)) st = rt_error(T->ctx, TILE_NOMEM, "out of memory: %zu bytes for copies of the outputs", 2 * o->bytes);
    if (o->dtype == TILE_F16 && !T->f16_table && !st) {
      T->f16_table = tl_malloc(&T->ctx->alloc, sizeof(float) * 65536);
      if (!T->f16_table) st = rt_error(T->ctx, TILE_NOMEM, "out of memory");
      for (uint32_t h = 0; T->f16_table && h < 65536; h++) T->f16_table[h] = tl_f16_to_f32((uint16_t)h);
    }
  }
  if (!st) st = sync_all(T);
  return st;
}

/* Restores the outputs from their copies; frees everything. The message of the context is
 * kept: the calls below (public ones) clear it, and it may say why tuning failed. */
static void teardown_outputs(struct tuner *T) {
  char saved[RT_ERRMSG_SIZE];
  memcpy(saved, T->ctx->errmsg, sizeof saved);
  sync_all(T);
  for (unsigned i = 0; i < T->nouts; i++) {
    struct outbuf *o = &T->outs[i];
    if (o->saved) {
      mem_copy(T, o->data, o->backup, o->bytes);
      sync_all(T);
    }
    if (o->backup) rt_mem_free(T->ctx, T->co.device, o->backup);
    tl_free(o->ref);
    tl_free(o->cur);
  }
  sync_all(T);
  tl_free(T->f16_table);
  T->f16_table = NULL;
  memcpy(T->ctx->errmsg, saved, sizeof saved);
  T->nouts = 0;
}

static tile_status prepare_outputs(struct tuner *T) {
  tile_status st = sync_all(T);
  for (unsigned i = 0; i < T->nouts && !st; i++) {
    struct outbuf *o = &T->outs[i];
    st = o->poison ? rt_mem_fill(T->ctx, T->co.device, o->data, 0xff, o->bytes) : mem_copy(T, o->data, o->backup, o->bytes);
  }
  if (!st) st = sync_all(T);
  return st;
}

static double elem(const struct tuner *T, tile_dtype dt, const void *buf, size_t i) {
  switch (dt) {
  case TILE_F16: return T->f16_table[((const uint16_t *)buf)[i]];
  case TILE_BF16: return tl_f32_from_bits((uint32_t)((const uint16_t *)buf)[i] << 16);
  case TILE_F32: return ((const float *)buf)[i];
  case TILE_F64: return ((const double *)buf)[i];
  case TILE_F8E4M3: return tl_e4m3_to_f32(((const uint8_t *)buf)[i]);
  case TILE_F8E5M2: return tl_e5m2_to_f32(((const uint8_t *)buf)[i]);
  case TILE_I8: return ((const int8_t *)buf)[i];
  case TILE_I16: return ((const int16_t *)buf)[i];
  case TILE_I32: return ((const int32_t *)buf)[i];
  case TILE_U32: return ((const uint32_t *)buf)[i];
  case TILE_I64: return (double)((const int64_t *)buf)[i];
  case TILE_BOOL: return ((const uint8_t *)buf)[i];
  default: return 0;
  }
}

static double tolerance(tile_dtype dt) {
  switch (dt) {
  case TILE_F16: return 3e-3;
  case TILE_BF16: return 2e-2;
  case TILE_F32: return 1e-3;
  case TILE_F64: return 1e-9;
  case TILE_F8E4M3:
  case TILE_F8E5M2: return 1.25e-1;
  default: return 0; /* integers and bools: exact */
  }
}

/* Sum of squares of the reference's finite elements (the denominator of the error). */
static void reference_norms(struct tuner *T) {
  for (unsigned i = 0; i < T->nouts; i++) {
    struct outbuf *o = &T->outs[i];
    double den = 0;
    for (size_t e = 0; e < o->n; e++) {
      double r = elem(T, o->dtype, o->ref, e);
      if (isfinite(r)) den += r * r;
    }
    o->ref_den = den;
  }
}

/* Compares the current outputs with the reference. Returns true when they agree; *rel gets
 * the largest relative L2 difference and `why` the first disagreement. Blocks of bitwise
 * equal elements are skipped, so outputs of hundreds of MB compare in milliseconds when
 * they mostly agree. */
static bool compare_outputs(struct tuner *T, double *rel, char *why, size_t whylen) {
  *rel = 0;
  bool ok = true;
  enum { BLOCK = 64 };
  for (unsigned i = 0; i < T->nouts; i++) {
    struct outbuf *o = &T->outs[i];
    size_t eb = rt_dtype_size(o->dtype);
    const char *cur = o->cur, *ref = o->ref;
    double num = 0;
    size_t mismatch = 0;
    for (size_t b0 = 0; b0 < o->n; b0 += BLOCK) {
      size_t b1 = b0 + BLOCK < o->n ? b0 + BLOCK : o->n;
      if (memcmp(cur + b0 * eb, ref + b0 * eb, (b1 - b0) * eb) == 0) continue;
      for (size_t e = b0; e < b1; e++) {
        if (memcmp(cur + e * eb, ref + e * eb, eb) == 0) continue;
        double g = elem(T, o->dtype, cur, e), r = elem(T, o->dtype, ref, e);
        if (!isfinite(g) || !isfinite(r)) {
          mismatch += !(isnan(g) && isnan(r)) && g != r; /* NaN against NaN (any payload) agrees */
          continue;
        }
        num += (g - r) * (g - r);
      }
    }
    double e = o->ref_den > 0 ? sqrt(num / o->ref_den) : sqrt(num);
    if (e > *rel) *rel = e;
    double tol = tolerance(o->dtype);
    if (ok && (mismatch || e > tol)) {
      ok = false;
      if (mismatch)
        snprintf(why, whylen, "output '%s' differs from the reference (%s): %zu elements NaN or inf in one only",
                 o->name, T->ref_text, mismatch);
      else
        snprintf(why, whylen, "output '%s' differs from the reference (%s): relative error %.2e > %.0e", o->name,
                 T->ref_text, e, tol);
    }
  }
  return ok;
}

/* ---- evaluating one configuration (this thread) ---- */

enum eval_result { EV_DONE, EV_DEFER };

/* A row of the table for job j, with the first reason_len bytes of reason (NULL: none).
 * NULL when out of memory (T->nomem is set; nothing is left allocated): from here on the
 * search runs with other threads, so nothing jumps to the recovery point of tune_core. */
static tile_tune_config *new_row(struct tuner *T, struct job *j, tile_tune_outcome oc, const char *reason,
                                 size_t reason_len) {
  tile_tune_config row = {0};
  row.config = xstrdup(T, j->text ? j->text : "");
  row.outcome = oc;
  row.reason = reason ? tl_strndup(&T->ctx->alloc, reason, reason_len) : NULL;
  if (!row.config || (reason && !row.reason) || !VEC_TRY_RESERVE(T->a, T->rows, 1)) {
    tl_free(row.config);
    tl_free(row.reason);
    T->nomem = true;
    return NULL;
  }
  row.rel_err = -1;
  row.registers = row.local_bytes = -1;
  row.compile_ms = j->compile_ms;
  T->rows.v[T->rows.n++] = row;
  return &VEC_LAST(T->rows);
}

static enum eval_result evaluate(struct tuner *T, unsigned ji, bool may_defer) {
  struct job *j = &T->jobs[ji];
  tile_context *ctx = T->ctx;
  size_t rlen;
  const char *r;
  if (j->st == TILE_NOMEM) { /* host memory, not the configuration: the search stops */
    T->nomem = true;
    return EV_DONE;
  }
  if (j->st) {
    if (ji == 0) T->default_st = j->st;
    r = j->msg ? j->msg : "unknown error";
    rlen = strlen(r);
    new_row(T, j, j->pruned ? TILE_TUNE_PRUNED : TILE_TUNE_FAILED, r, rlen);
    if (j->pruned) T->pruned++;
    else T->failed++;
    return EV_DONE;
  }
  tile_compile_options co = T->co;
  co.defines = j->defs;
  co.ndefines = j->ndefs;
  co.flags = (co.flags & ~(unsigned)TILE_AUTOTUNE) | TILE_NO_CACHE;
  tile_kernel *k = NULL;
  tile_status st = rt_compile_string(ctx, T->name, T->src, T->len, &co, false, &k);
  if (!st && co.device == TILE_DEVICE_CUDA) {
    struct arena scratch;
    jmp_buf oom;
    arena_init(&scratch, &ctx->alloc, &oom);
    if (setjmp(oom)) {
      st = rt_error(ctx, TILE_NOMEM, "out of memory");
    } else {
      struct rt_bound b;
      st = rt_bind_args(ctx, k, T->args, T->nargs, &scratch, &b);
      if (!st) st = rt_gpu_adopt(ctx, k, &b, &j->art);
    }
    arena_free(&scratch);
  }
  if (!st) st = rt_kernel_prepare(ctx, k, T->args, T->nargs);
  tile_kernel_stats ks = {0};
  ks.registers = ks.local_bytes = -1;
  if (!st) rt_kernel_get_stats(k, &ks);
  if (!st && may_defer && ks.local_bytes > 0 && T->have_ref) {
    rt_kernel_release(k);
    return EV_DEFER; /* spills: timed after the others */
  }
  double rel = -1;
  char why[512] = "";
  bool wrong = false;
  if (!st) st = prepare_outputs(T);
  if (!st) st = rt_launch(ctx, k, T->args, T->nargs, &(tile_launch_options){T->to.stream});
  if (!st) st = sync_all(T);
  for (unsigned i = 0; i < T->nouts && !st; i++)
    st = rt_mem_download(ctx, T->co.device, T->outs[i].cur, T->outs[i].data, T->outs[i].bytes);
  if (!st) {
    if (T->have_ref) {
      wrong = !compare_outputs(T, &rel, why, sizeof why);
    } else { /* this one is the reference */
      for (unsigned i = 0; i < T->nouts; i++) {
        void *t = T->outs[i].ref;
        T->outs[i].ref = T->outs[i].cur;
        T->outs[i].cur = t;
      }
      T->have_ref = true;
      T->ref_text = arena_try_strdup(T->a, j->text);
      if (!T->ref_text) st = rt_error(ctx, TILE_NOMEM, "out of memory");
      reference_norms(T);
      rel = 0;
    }
  }
  tile_bench_result br = {0};
  if (!st && !wrong) {
    tile_bench_options bo = {.stream = T->to.stream, .warmup = T->to.warmup, .reps = T->to.reps,
                             .max_ms = T->to.config_budget_ms};
    st = rt_bench(ctx, k, T->args, T->nargs, &bo, &br);
  }
  if (st == TILE_NOMEM) { /* host memory, not the configuration: the search stops */
    T->nomem = true;
    rt_kernel_release(k);
    return EV_DONE;
  }
  tile_tune_config *row, lost; /* lost: where a row goes that could not be added */
  if (st && ji == 0) T->default_st = st;
  if (st) {
    r = ctx->errbrief[0] ? ctx->errbrief : "unknown error";
    rlen = strlen(r);
    row = new_row(T, j, TILE_TUNE_FAILED, r, rlen);
    T->failed++;
  } else if (wrong) {
    row = new_row(T, j, TILE_TUNE_WRONG, why, strlen(why));
    T->wrong++;
  } else {
    char note[128] = "";
    if (ks.local_bytes > 0)
      snprintf(note, sizeof note, "uses %d bytes of local memory per thread (register spills)", ks.local_bytes);
    if (ji == 0 && !strcmp(T->ref_text, j->text) && !note[0]) snprintf(note, sizeof note, "default (the reference)");
    else if (!strcmp(T->ref_text, j->text) && !note[0]) snprintf(note, sizeof note, "the reference (the default failed)");
    row = new_row(T, j, TILE_TUNE_TIMED, note[0] ? note : NULL, strlen(note));
    if (!row) row = &lost;
    row->median_ms = br.median_ms;
    row->min_ms = br.min_ms;
    T->timed++;
    if (!T->nomem && (T->best_row < 0 || br.median_ms < T->best_ms)) {
      T->best_row = (int)T->rows.n - 1;
      T->best_ms = br.median_ms;
      T->best_job = ji;
      rt_kernel_release(T->best_k);
      T->best_k = k;
      k = NULL; /* kept */
    }
  }
  if (!row) row = &lost;
  row->rel_err = rel;
  row->shared_bytes = ks.shared_bytes;
  row->registers = ks.registers;
  row->local_bytes = ks.local_bytes;
  rt_kernel_release(k);
  return EV_DONE;
}

/* ---- keys ---- */

static int pow2_align(uintptr_t x) {
  int a = 1;
  while (a < 16 && x % (uintptr_t)(a * 2) == 0) a *= 2;
  return a;
}

static int64_t bucket(int64_t v) {
  if (v < 128) return v;
  int64_t p = 128;
  while (p < v && p < ((int64_t)1 << 40)) p *= 2;
  return p;
}

/* The argument part of the tuning key, from a kernel's IR parameters and their binding:
 * per tensor its dtype, rank and alignment facts, per shape symbol its bucketed size. */
static void args_key(struct strbuf *sb, const struct ir_func *f, const struct rt_bound *b) {
  sb_puts(sb, "args=");
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind != IR_PARAM_TENSOR) continue;
    const struct interp_tensor *t = &b->iargs[i].tensor;
    const struct ir_type *ty = ir_vtype(f, p->value);
    sb_printf(sb, "%s:%s:%u", p->name, ir_dtype_name((ir_dtype)ty->dtype), (unsigned)ty->rank);
    if (!t->data) {
      sb_puts(sb, ":null;");
      continue;
    }
    int eb = ir_dtype_bytes((ir_dtype)ty->dtype);
    sb_printf(sb, ":a%d:", pow2_align((uintptr_t)t->data));
    for (int d = 0; d < t->rank; d++)
      sb_printf(sb, "%c", '0' + (t->strides[d] == 1) + 2 * (t->shape[d] <= 1 || (t->strides[d] * eb) % 16 == 0));
    sb_putc(sb, ';');
  }
  sb_puts(sb, "\nsizes=");
  bool first = true;
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind != IR_PARAM_SHAPE) continue;
    int64_t v = b->iargs[i].scalar.i;
    sb_printf(sb, "%s%s=%lld%s", first ? "" : ",", p->name, (long long)bucket(v), v % 16 == 0 ? "/16" : "");
    first = false;
  }
  sb_putc(sb, '\n');
}

/* The facts of args_key as a 64-bit FNV-1a hash (an in-memory key, computed per launch). */
static uint64_t args_key_fast(const struct ir_func *f, const struct rt_bound *b) {
  uint64_t x = 14695981039346656037ull;
#define MIX(v) (x = (x ^ (uint64_t)(v)) * 1099511628211ull)
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_SHAPE) {
      int64_t v = b->iargs[i].scalar.i;
      MIX(bucket(v));
      MIX(v % 16 == 0);
      continue;
    }
    if (p->kind != IR_PARAM_TENSOR) continue;
    const struct interp_tensor *t = &b->iargs[i].tensor;
    if (!t->data) {
      MIX(0xffu);
      continue;
    }
    int eb = ir_dtype_bytes((ir_dtype)ir_vtype(f, p->value)->dtype);
    MIX(pow2_align((uintptr_t)t->data));
    for (int d = 0; d < t->rank; d++)
      MIX((t->strides[d] == 1) + 2 * (t->shape[d] <= 1 || (t->strides[d] * eb) % 16 == 0));
  }
#undef MIX
  return x;
}

/* ---- the search ---- */

static void fill_defines(struct tuner *T, struct job *j) {
  j->ndefs = T->npins + T->ntuned;
  j->defs = ARENA_NEWN(T->a, tile_define, j->ndefs + 1);
  for (unsigned i = 0; i < T->npins; i++) j->defs[i] = T->pins[i];
  struct strbuf sb;
  sb_init(&sb, T->a);
  for (uint32_t t = 0; t < T->ntuned; t++) {
    j->defs[T->npins + t] = (tile_define){T->p[T->tuned[t]].name, j->vals[t]};
    sb_printf(&sb, "%s%s=%s", t ? "," : "", T->p[T->tuned[t]].name, j->vals[t]);
  }
  j->text = (char *)sb_str(&sb);
}

/* The jobs: the default configuration first, then the space in a fixed pseudo-random order,
 * at most max_configs in all. */
static tile_status make_jobs(struct tuner *T, uint64_t seed) {
  uint64_t total = 1;
  for (uint32_t t = 0; t < T->ntuned; t++) {
    total *= T->p[T->tuned[t]].ncand;
    if (total > MAX_SPACE)
      return rt_error(T->ctx, TILE_UNSUPPORTED,
                      "the search space has more than %d configurations: pin some parameters with defines "
                      "or name fewer in tile_tune_options.params",
                      MAX_SPACE);
  }
  uint32_t *order = ARENA_NEWN(T->a, uint32_t, total + 1);
  for (uint64_t i = 0; i < total; i++) order[i] = (uint32_t)i;
  for (uint64_t i = total; i > 1; i--) {
    uint64_t r = rng_splitmix64(&seed) % i; /* the same order as before rng.h */
    uint32_t x = order[i - 1];
    order[i - 1] = order[r];
    order[r] = x;
  }
  unsigned cap = (unsigned)total + 1;
  if (T->to.max_configs && T->to.max_configs < cap) cap = T->to.max_configs;
  T->jobs = ARENA_NEWN(T->a, struct job, cap + 1);
  T->deferred = ARENA_NEWN(T->a, unsigned, cap + 1);
  /* the default */
  struct job *j0 = &T->jobs[0];
  j0->vals = ARENA_NEWN(T->a, const char *, T->ntuned + 1);
  for (uint32_t t = 0; t < T->ntuned; t++) j0->vals[t] = T->p[T->tuned[t]].def;
  fill_defines(T, j0);
  T->njobs = 1;
  bool default_in_space = false;
  for (uint64_t i = 0; i < total && T->njobs < cap; i++) {
    struct job *j = &T->jobs[T->njobs];
    j->vals = ARENA_NEWN(T->a, const char *, T->ntuned + 1);
    uint64_t x = order[i];
    bool is_default = true;
    for (uint32_t t = T->ntuned; t-- > 0;) {
      const struct tparam *p = &T->p[T->tuned[t]];
      j->vals[t] = p->cand[x % p->ncand];
      x /= p->ncand;
      is_default &= strcmp(j->vals[t], j0->vals[t]) == 0;
    }
    if (is_default) {
      default_in_space = true;
      continue;
    }
    fill_defines(T, j);
    T->njobs++;
  }
  /* the configurations max_configs left out (the default counts once) */
  bool def_in = default_in_space;
  for (uint32_t t = 0; t < T->ntuned && !def_in; t++) { /* not met in the loop: is it a candidate? */
    const struct tparam *p = &T->p[T->tuned[t]];
    bool found = false;
    for (uint32_t c = 0; c < p->ncand; c++) found |= strcmp(p->cand[c], j0->vals[t]) == 0;
    if (!found) break;
    if (t == T->ntuned - 1) def_in = true;
  }
  if (T->ntuned == 0) def_in = true;
  uint64_t all = total + (def_in ? 0 : 1);
  T->skipped += (unsigned)(all > T->njobs ? all - T->njobs : 0);
  return TILE_OK;
}

static void progress(struct tuner *T, unsigned i) {
  if (T->ctx->trace && T->rows.n) { /* one event per configuration, since the previous one */
    const tile_tune_config *r = &VEC_LAST(T->rows);
    rt_trace_end(T->ctx, T->trace_t, "tune", T->co.kernel ? T->co.kernel : T->name, r->config, "tune trial",
                 "\"outcome\":\"%s\",\"median_ms\":%.6f,\"compile_ms\":%.3f,\"rel_err\":%.3g",
                 (unsigned)r->outcome < TL_ARRAY_LEN(outcome_names) ? outcome_names[r->outcome] : "?", r->median_ms, r->compile_ms, r->rel_err);
    T->trace_t = tl_now_ms();
  }
  if (!T->to.progress || !T->rows.n) return;
  tile_tune_progress pr = {i + 1, T->njobs, &VEC_LAST(T->rows),
                           T->best_row >= 0 ? T->rows.v[T->best_row].config : NULL, T->best_ms, tl_now_ms() - T->t0};
  T->to.progress(T->to.progress_ud, &pr);
}

static unsigned default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 2) return 1;
  return (unsigned)(n - 1 > 32 ? 32 : n - 1);
}

static void run_search(struct tuner *T) {
  /* threads < 0: none; every job is compiled on this thread, in order (wait_job) */
  unsigned nthreads = T->to.threads > 0 ? (unsigned)T->to.threads : T->to.threads < 0 ? 0 : default_threads();
  if (nthreads > 32) nthreads = 32;
  if (nthreads > T->njobs) nthreads = T->njobs;
  T->window = 2 * nthreads + 2;
  pthread_mutex_init(&T->mu, NULL);
  pthread_cond_init(&T->cv, NULL);
  pthread_t tid[32];
  for (unsigned i = 0; i < nthreads; i++)
    if (pthread_create(&tid[T->nworkers], NULL, worker, T) == 0) T->nworkers++;
  tile_context *inline_ctx = NULL;
  if (T->nworkers == 0) {
    tile_context_options o = {.cache_dir = "", .cpu_threads = 1, .alloc = T->ctx->alloc.fn, .alloc_ud = T->ctx->alloc.ud};
    if (rt_context_create(&o, &inline_ctx)) T->nomem = true;
  }

  unsigned *deferred = T->deferred, ndeferred = 0;
  for (unsigned i = 0; i < T->njobs && !T->nomem; i++) {
    wait_job(T, i, inline_ctx);
    struct job *j = &T->jobs[i];
    if (j->skipped || (i > 0 && tl_now_ms() > T->deadline)) {
      T->skipped++;
    } else if (evaluate(T, i, true) == EV_DEFER) {
      deferred[ndeferred++] = i; /* its code is kept for later */
      continue;
    } else {
      progress(T, i);
    }
    if (T->best_row < 0 || i != T->best_job) rt_artifact_free(&j->art);
  }
  for (unsigned d = 0; d < ndeferred && !T->nomem; d++) {
    struct job *j = &T->jobs[deferred[d]];
    if (tl_now_ms() > T->deadline) {
      static const char why[] = "uses local memory (register spills), so it was put off, and the time budget ran out";
      new_row(T, j, TILE_TUNE_SKIPPED, why, sizeof why - 1);
      T->skipped++;
    } else {
      evaluate(T, deferred[d], false);
      progress(T, deferred[d]);
    }
    if (T->best_row < 0 || deferred[d] != T->best_job) rt_artifact_free(&j->art);
  }

  pthread_mutex_lock(&T->mu);
  T->stop = true;
  pthread_cond_broadcast(&T->cv);
  pthread_mutex_unlock(&T->mu);
  for (unsigned i = 0; i < T->nworkers; i++) pthread_join(tid[i], NULL);
  if (T->worker_nomem) T->nomem = true;
  pthread_mutex_destroy(&T->mu);
  pthread_cond_destroy(&T->cv);
  rt_context_destroy(inline_ctx);
  for (unsigned i = 0; i < T->njobs; i++) { /* what the loops above did not reach */
    if (!T->nomem && T->best_row >= 0 && i == T->best_job) continue;
    rt_artifact_free(&T->jobs[i].art);
  }
  for (unsigned i = 0; i < T->njobs; i++) tl_free(T->jobs[i].msg);
}

/* ---- stored results ---- */

static const struct rt_tune_memo *memo_find(tile_context *ctx, const uint8_t key[32]) {
  for (uint32_t i = 0; i < ctx->tunes.n; i++)
    if (memcmp(ctx->tunes.v[i].key, key, 32) == 0) return &ctx->tunes.v[i];
  return NULL;
}

/* Remembers the best configuration for a key in the context; false when out of memory (the
 * context's arena has no recovery point: nothing is changed then). */
static bool memo_put(tile_context *ctx, const uint8_t key[32], const char *best, double ms) {
  const char *copy = arena_try_strdup(&ctx->cache_arena, best);
  if (!copy) return false;
  for (uint32_t i = 0; i < ctx->tunes.n; i++)
    if (memcmp(ctx->tunes.v[i].key, key, 32) == 0) {
      ctx->tunes.v[i].best = copy;
      ctx->tunes.v[i].best_ms = ms;
      return true;
    }
  if (!VEC_TRY_RESERVE(&ctx->cache_arena, ctx->tunes, 1)) return false;
  struct rt_tune_memo m;
  memcpy(m.key, key, 32);
  m.best = copy;
  m.best_ms = ms;
  ctx->tunes.v[ctx->tunes.n++] = m;
  return true;
}

/* A stored best must name exactly the tuned parameters, each with one of its candidate
 * values: a result from a damaged or planted entry ("BM=7", a huge number) is not used. */
static bool valid_best(const struct tuner *T, const char *best) {
  if (strlen(best) > 4096) return false;
  const char *p = best;
  for (uint32_t t = 0; t < T->ntuned; t++) {
    const struct tparam *tp = &T->p[T->tuned[t]];
    size_t n = strlen(tp->name);
    if (t && *p++ != ',') return false;
    if (strncmp(p, tp->name, n) != 0 || p[n] != '=') return false;
    p += n + 1;
    size_t v = strcspn(p, ",");
    if (v == 0) return false;
    bool candidate = false;
    for (uint32_t c = 0; c < tp->ncand && !candidate; c++)
      candidate = strlen(tp->cand[c]) == v && strncmp(tp->cand[c], p, v) == 0;
    if (!candidate) return false;
    p += v;
  }
  return *p == 0;
}

/* ---- the result ---- */

/* The winner and its defines into out (tl_malloc'd: the caller frees out on failure). */
static tile_status fill_result(struct tuner *T, const char *best, double best_ms, tile_tune_result *out) {
  out->best = xstrdup(T, best);
  out->best_ms = best_ms;
  /* defines: pins, then the winner's values */
  unsigned n = T->npins + T->ntuned;
  out->defines = tl_calloc(&T->ctx->alloc, n + 1, sizeof *out->defines);
  if (!out->best || !out->defines) return rt_error(T->ctx, TILE_NOMEM, "out of memory");
  bool lost = false;
  for (unsigned i = 0; i < T->npins; i++) {
    out->defines[i].name = xstrdup(T, T->pins[i].name);
    out->defines[i].value = xstrdup(T, T->pins[i].value);
    lost |= !out->defines[i].name || !out->defines[i].value;
  }
  out->ndefines = T->npins;
  if (lost) return rt_error(T->ctx, TILE_NOMEM, "out of memory");
  const char *p = best;
  for (uint32_t t = 0; t < T->ntuned && *p; t++) {
    const char *eq = strchr(p, '=');
    if (!eq) break;
    size_t vl = strcspn(eq + 1, ",");
    char *name = tl_strndup(&T->ctx->alloc, p, (size_t)(eq - p)), *val = tl_strndup(&T->ctx->alloc, eq + 1, vl);
    if (!name || !val) {
      tl_free(name);
      tl_free(val);
      return rt_error(T->ctx, TILE_NOMEM, "out of memory");
    }
    out->defines[out->ndefines].name = name;
    out->defines[out->ndefines].value = val;
    out->ndefines++;
    p = eq + 1 + vl;
    if (*p == ',') p++;
  }
  return TILE_OK;
}

void rt_tune_result_free(tile_tune_result *r) {
  if (!r) return;
  tl_free(r->best);
  for (unsigned i = 0; r->defines && i < r->ndefines; i++) {
    tl_free((char *)r->defines[i].name);
    tl_free((char *)r->defines[i].value);
  }
  tl_free(r->defines);
  for (unsigned i = 0; r->configs && i < r->nconfigs; i++) {
    tl_free(r->configs[i].config);
    tl_free(r->configs[i].reason);
  }
  tl_free(r->configs);
  memset(r, 0, sizeof *r);
}

/* ---- tile_tune ---- */

/* Reads the kernel's compile-time parameters and decides which are pinned and which tuned.
 * TILE_COMPILE or TILE_NOT_FOUND when the source does not parse or has no such kernel (the
 * caller compiles it to report the error properly). */
static tile_status plan_params(struct tuner *T, const tile_compile_options *uco, bool *front_end_error) {
  tile_context *ctx = T->ctx;
  *front_end_error = false;
  if (!(T->co.flags & TILE_SOURCE_IR)) {
    struct strtab *strs = ARENA_NEW(T->a, struct strtab);
    strtab_init(strs, T->a);
    struct tl_source ts = {T->name, T->src, T->len, false, NULL, NULL, 0, NULL};
    struct lang_ctx *lc;
    struct ast_file *ast;
    struct tl_error e;
    sb_init(&e.msg, T->a);
    if (tl_parse_ast(&ts, T->a, strs, &lc, &ast, &e)) {
      *front_end_error = true;
      return TILE_COMPILE;
    }
    const struct lang_kernel_info *ki = NULL;
    uint32_t nk = lang_kernel_count(ast);
    for (uint32_t i = 0; i < nk; i++) {
      const struct lang_kernel_info *x = lang_kernel_info(ast, i);
      if (uco->kernel ? strcmp(x->name, uco->kernel) == 0 : nk == 1) ki = x;
    }
    if (!ki) {
      *front_end_error = true;
      return TILE_NOT_FOUND;
    }
    T->np = ki->ncparams;
    T->p = ARENA_NEWN(T->a, struct tparam, T->np + 1);
    for (uint32_t i = 0; i < T->np; i++) {
      const struct lang_cparam_info *cp = &ki->cparams[i];
      struct tparam *p = &T->p[i];
      p->name = arena_strdup(T->a, cp->name);
      p->kind = cp->kind;
      p->def = cvalue_text(T->a, &cp->def); /* (the plain default; see tune_core for the target's) */
      p->ncand = cp->ncands;
      p->cand = ARENA_NEWN(T->a, const char *, cp->ncands + 1);
      for (uint32_t c = 0; c < cp->ncands; c++) p->cand[c] = cvalue_text(T->a, &cp->cands[c]);
      for (unsigned d = 0; d < uco->ndefines; d++)
        if (uco->defines[d].name && strcmp(uco->defines[d].name, p->name) == 0) p->pinned = uco->defines[d].value;
    }
    /* values the arguments fix: a dtype parameter used as a tensor's dtype, an int parameter
     * used as a tensor's fixed size */
    for (uint32_t u = 0; u < ki->nparams && u < T->nargs; u++) {
      const struct lang_param_info *pi = &ki->params[u];
      const tile_arg *a = &T->args[u];
      if (!pi->is_tensor || a->kind != TILE_ARG_TENSOR) continue;
      for (uint32_t i = 0; i < T->np; i++) {
        struct tparam *p = &T->p[i];
        if (p->pinned) continue;
        if (p->kind == LANG_CP_DTYPE && pi->dtype && strcmp(pi->dtype, p->name) == 0 &&
            a->u.tensor.dtype > TILE_DTYPE_NONE && a->u.tensor.dtype < TILE_DTYPE__COUNT)
          p->pinned = rt_dtype_name(a->u.tensor.dtype);
        for (uint32_t d = 0; d < pi->rank && d < a->u.tensor.rank && !p->pinned; d++)
          if (p->kind == LANG_CP_INT && pi->dims[d] && strcmp(pi->dims[d], p->name) == 0)
            p->pinned = arena_printf(T->a, "%lld", (long long)a->u.tensor.shape[d]);
      }
    }
  }
  /* which are tuned */
  const char *list = T->to.params;
  for (const char *q = list; q && *q;) { /* every listed name must be a free parameter */
    while (*q == ' ' || *q == ',') q++;
    size_t n = strcspn(q, ", ");
    if (!n) break;
    const struct tparam *hit = NULL;
    for (uint32_t i = 0; i < T->np; i++)
      if (strlen(T->p[i].name) == n && strncmp(T->p[i].name, q, n) == 0) hit = &T->p[i];
    if (!hit)
      return rt_error(ctx, TILE_NOT_FOUND, "tile_tune_options.params: the kernel has no compile-time parameter '%.*s'",
                      (int)n, q);
    if (hit->pinned)
      return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_tune_options.params: '%s' is fixed (%s=%s) and cannot be tuned",
                      hit->name, hit->name, hit->pinned);
    if (hit->ncand < 2)
      return rt_error(ctx, TILE_INVALID_ARGUMENT, "tile_tune_options.params: '%s' has no candidate values to try",
                      hit->name);
    q += n;
  }
  T->tuned = ARENA_NEWN(T->a, uint32_t, T->np + 1);
  for (uint32_t i = 0; i < T->np; i++) {
    struct tparam *p = &T->p[i];
    p->tuned = !p->pinned && (list ? in_list(list, p->name) : p->kind == LANG_CP_INT && p->ncand >= 2);
    if (p->tuned) T->tuned[T->ntuned++] = i;
  }
  /* the pins: every define of the caller, then the values taken from the arguments */
  T->pins = ARENA_NEWN(T->a, tile_define, uco->ndefines + T->np + 1);
  for (unsigned d = 0; d < uco->ndefines; d++) T->pins[T->npins++] = uco->defines[d];
  for (uint32_t i = 0; i < T->np; i++) {
    bool user = false;
    for (unsigned d = 0; d < uco->ndefines; d++)
      user |= uco->defines[d].name && strcmp(uco->defines[d].name, T->p[i].name) == 0;
    if (T->p[i].pinned && !user) T->pins[T->npins++] = (tile_define){T->p[i].name, T->p[i].pinned};
  }
  return TILE_OK;
}

/* The tuning key: what the best configuration depends on. */
static const char *tune_key(struct tuner *T, tile_kernel *kdef, const struct rt_bound *b) {
  tile_context *ctx = T->ctx;
  uint8_t h[RT_HASH_LEN];
  char hex[2 * RT_HASH_LEN + 1];
  rt_hash(T->src, T->len, h);
  rt_hex(h, RT_HASH_LEN, hex);
  struct strbuf sb;
  sb_init(&sb, T->a);
  sb_printf(&sb, "tile-tune 1\ncompiler=%s\nsource=%s\nkernel=%s\nsource_ir=%d\npins=", rt_compiler_id(), hex,
            kdef->name, (T->co.flags & TILE_SOURCE_IR) ? 1 : 0);
  bool first = true;
  for (uint32_t i = 0; i < T->np; i++) {
    if (T->p[i].tuned) continue;
    sb_printf(&sb, "%s%s=%s", first ? "" : ",", T->p[i].name, T->p[i].pinned ? T->p[i].pinned : T->p[i].def);
    first = false;
  }
  sb_puts(&sb, "\ntuned=");
  for (uint32_t t = 0; t < T->ntuned; t++) sb_printf(&sb, "%s%s", t ? "," : "", T->p[T->tuned[t]].name);
  if (T->co.device == TILE_DEVICE_CUDA)
    sb_printf(&sb, "\ndevice=%s\narch=%s\ndriver=%d\n", ctx->dev.name, kdef->arch, ctx->dev.driver_version);
  else
    sb_puts(&sb, "\ndevice=CPU interpreter\narch=cpu\ndriver=0\n");
  args_key(&sb, kdef->ir, b);
  return sb_str(&sb);
}

/* Moves the rows into out->configs (tl_malloc'd, as tile_tune_result_free expects). */
static tile_status copy_rows(struct tuner *T, tile_tune_result *out) {
  out->configs = tl_calloc(&T->ctx->alloc, T->rows.n + 1, sizeof *out->configs);
  if (!out->configs) return rt_error(T->ctx, TILE_NOMEM, "out of memory");
  memcpy(out->configs, T->rows.v, sizeof *out->configs * T->rows.n);
  out->nconfigs = T->rows.n;
  T->rows.n = 0;
  return TILE_OK;
}

static void drop_rows(struct tuner *T) {
  for (uint32_t i = 0; i < T->rows.n; i++) {
    tl_free(T->rows.v[i].config);
    tl_free(T->rows.v[i].reason);
  }
  T->rows.n = 0;
}

/* A stored result for the key, from the context or the disk. Runs under tune_core's
 * recovery point (T->a): out of memory jumps there, which frees out. */
static bool lookup_stored(struct tuner *T, const char *key, const uint8_t h[32], tile_tune_result *out) {
  tile_context *ctx = T->ctx;
  const struct rt_tune_memo *m = memo_find(ctx, h);
  const char *best = NULL;
  double ms = 0;
  if (m && valid_best(T, m->best)) {
    best = m->best;
    ms = m->best_ms;
    out->from_cache = 1;
  } else {
    char why[200] = "";
    struct rt_cache_entry e;
    enum rt_cache_result r = rt_cache_load(&ctx->alloc, ctx->cache_dir, "tune", key, strlen(key), &e, why, sizeof why);
    if (r == RT_CACHE_NOMEM) arena_oom(T->a);
    if (r == RT_CACHE_HIT) {
      /* a well-framed entry is not yet a sound one (cache.h): every part is checked */
      char *b = NULL;
      if (e.nparts != 2 || e.parts[0].len >= 4096 || e.parts[1].len >= 256) {
        snprintf(why, sizeof why, "not a tuning result (%u parts)", e.nparts);
      } else if (!(b = arena_try_alloc(T->a, e.parts[0].len + 1))) {
        rt_cache_entry_free(&e);
        arena_oom(T->a);
      } else {
        memcpy(b, e.parts[0].data, e.parts[0].len);
        char meta[256];
        memcpy(meta, e.parts[1].data, e.parts[1].len);
        meta[e.parts[1].len] = 0;
        if (strlen(b) != e.parts[0].len || !valid_best(T, b)) {
          snprintf(why, sizeof why, "the stored configuration is not one of this kernel's");
        } else if (strlen(meta) != e.parts[1].len || sscanf(meta, "best_ms=%lf", &ms) != 1 || !(ms >= 0)) {
          snprintf(why, sizeof why, "bad metadata");
        } else {
          best = b;
          out->from_cache = 2;
          ctx->cache_stats.loaded++;
        }
      }
      rt_cache_entry_free(&e);
    }
    if (r != RT_CACHE_MISS && !best) {
      ctx->cache_stats.rejected++;
      rt_cache_note(ctx, "the stored tuning result of '%s' was ignored (%s); tuned again", T->name, why[0] ? why : "unreadable");
    }
    if (best && !memo_put(ctx, h, best, ms)) arena_oom(T->a);
  }
  if (!best) return false;
  if (fill_result(T, best, ms, out)) arena_oom(T->a);
  struct job j = {.text = (char *)best, .compile_ms = 0};
  const char *why = out->from_cache == 1 ? "tuned earlier in this context" : "tuned earlier (on-disk cache)";
  tile_tune_config *row = new_row(T, &j, TILE_TUNE_CACHED, why, strlen(why));
  if (!row) arena_oom(T->a);
  row->median_ms = row->min_ms = ms;
  if (copy_rows(T, out)) arena_oom(T->a);
  return true;
}

static tile_status tune_core(tile_context *ctx, const char *name, const char *src, size_t len,
                             const tile_compile_options *uco_in, const tile_arg *args, unsigned nargs,
                             const tile_tune_options *to_in, tile_tune_result *out, bool diags) {
  memset(out, 0, sizeof *out);
  struct tuner T0;
  memset(&T0, 0, sizeof T0);
  struct tuner *volatile T = &T0;
  struct arena a;
  jmp_buf oom;
  arena_init(&a, &ctx->alloc, &oom);
  tile_kernel *volatile kdef = NULL;
  if (setjmp(oom)) {
    a.oom = NULL;
    drop_rows(T);
    rt_kernel_release(kdef);
    arena_free(&a);
    rt_tune_result_free(out);
    return rt_error(ctx, TILE_NOMEM, "out of memory while tuning");
  }
  tile_compile_options uco = {0};
  if (uco_in) uco = *uco_in;
  uco.flags = (uco.flags & ~(unsigned)(TILE_AUTOTUNE | TILE_AUTOCONFIG)) | TILE_FIXED_CONFIG; /* candidates as compiled */
  T->ctx = ctx;
  T->a = &a;
  T->name = name;
  T->src = src;
  T->len = len;
  T->args = args;
  T->nargs = nargs;
  T->best_row = -1;
  T->t0 = tl_now_ms();
  T->trace_t = T->t0;
  if (to_in) T->to = *to_in;
  if (uco.flags & TILE_NO_CACHE) T->to.flags |= TILE_TUNE_FORCE | TILE_TUNE_NO_STORE; /* no stored results */
  if (T->to.budget_ms <= 0) T->to.budget_ms = 120000;
  if (T->to.config_budget_ms <= 0) T->to.config_budget_ms = 300;
  if (T->to.warmup <= 0) T->to.warmup = 3;
  if (T->to.reps <= 0) T->to.reps = 25;
  T->deadline = T->t0 + T->to.budget_ms;
  T->co = uco;
  T->co.defines = NULL;
  T->co.ndefines = 0;
  tile_status st = TILE_OK;
  if (uco.ndefines && !uco.defines) st = rt_error(ctx, TILE_INVALID_ARGUMENT, "defines is NULL");
  if (!st && uco.device == TILE_DEVICE_CUDA && !rt_cuda_ready(ctx)) st = TILE_NO_DRIVER;
  if (!st && uco.device == TILE_DEVICE_CUDA && !uco.arch) T->co.arch = ctx->dev_arch;
  if (!st) {
    bool fe = false;
    st = plan_params(T, &uco, &fe);
    if (fe) { /* let the compiler say what is wrong */
      tile_kernel *k = NULL;
      tile_compile_options c = T->co;
      c.defines = uco.defines;
      c.ndefines = uco.ndefines;
      c.flags |= TILE_NO_CACHE;
      st = rt_compile_string(ctx, name, src, len, &c, diags, &k);
      rt_kernel_release(k);
      if (!st) st = rt_error(ctx, TILE_INTERNAL, "internal error: the kernel compiles but its parameters cannot be read");
    }
  }
  /* the default configuration: checks the pins and the arguments, and gives the key */
  struct rt_bound b;
  if (!st) {
    tile_compile_options c = T->co;
    c.defines = T->pins;
    c.ndefines = T->npins;
    c.flags |= TILE_NO_CACHE;
    tile_kernel *k = NULL;
    st = rt_compile_string(ctx, name, src, len, &c, diags, &k);
    kdef = k;
    /* the defaults as compiled: a target's `defaults` clause (unless it broke a constraint) */
    for (uint32_t i = 0; !st && i < T->np; i++) T->p[i].def = config_value(&a, kdef->config, T->p[i].name, T->p[i].def);
  }
  if (!st) st = rt_bind_args(ctx, kdef, args, nargs, &a, &b);
  if (!st && uco.device == TILE_DEVICE_CUDA) st = rt_gpu_check_args(ctx, kdef, &b);
  const char *key = NULL;
  uint8_t h[RT_HASH_LEN];
  if (!st) {
    key = tune_key(T, kdef, &b);
    rt_hash(key, strlen(key), h);
    rt_hex(h, RT_HASH_LEN, out->key);
    if (!(T->to.flags & TILE_TUNE_FORCE) && lookup_stored(T, key, h, out)) {
      rt_kernel_release(kdef);
      arena_free(&a);
      out->total_ms = tl_now_ms() - T->t0;
      rt_clear_error(ctx);
      return TILE_OK;
    }
  }
  if (!st) {
    /* the order is seeded by the key without its compiler line, so that it is the same
     * for every build of the library (the key itself changes with the build) */
    uint8_t hs[RT_HASH_LEN];
    const char *rest = strstr(key, "\nsource=");
    rt_hash(rest, strlen(rest), hs);
    st = make_jobs(T, (uint64_t)hs[0] | (uint64_t)hs[1] << 8 | (uint64_t)hs[2] << 16 | (uint64_t)hs[3] << 24);
  }
  if (!st && uco.device == TILE_DEVICE_CUDA) {
    rt_gpu_target_of(ctx, true, &T->target);
    snprintf(T->target.arch, sizeof T->target.arch, "%s", kdef->arch);
    if (uco.flags & TILE_NO_CACHE) T->target.cache_dir = NULL;
  }
  if (!st) st = setup_outputs(T, kdef);
  if (st) {
    teardown_outputs(T);
    rt_kernel_release(kdef);
    arena_free(&a);
    memset(out->key, 0, sizeof out->key);
    return st;
  }

  a.oom = NULL; /* from here other threads run: no longjmp past them (T->nomem instead) */
  run_search(T);
  teardown_outputs(T);
  tile_status first_st = T->default_st;
  if (T->nomem) {
    st = rt_error(ctx, TILE_NOMEM, "out of memory while tuning '%s'", kdef->name);
    drop_rows(T);
  } else if (T->best_row < 0) {
    const tile_tune_config *r0 = T->rows.n ? &T->rows.v[0] : NULL;
    st = rt_error(ctx, first_st ? first_st : TILE_INTERNAL, "tuning '%s': no configuration could be run; the default (%s): %s",
                  kdef->name, T->jobs[0].text, r0 && r0->reason ? r0->reason : "not run");
    drop_rows(T);
  } else {
    const char *best = arena_try_strdup(&a, T->rows.v[T->best_row].config);
    st = best ? fill_result(T, best, T->best_ms, out) : rt_error(ctx, TILE_NOMEM, "out of memory");
    if (!st && !(T->to.flags & TILE_TUNE_NO_STORE)) {
      if (!memo_put(ctx, h, best, T->best_ms)) {
        st = rt_error(ctx, TILE_NOMEM, "out of memory");
      } else if (!(uco.flags & TILE_NO_CACHE)) {
        char meta[96];
        int n = snprintf(meta, sizeof meta, "best_ms=%.9g\ntimed=%u\n", T->best_ms, T->timed);
        struct rt_cache_part parts[2] = {{best, strlen(best)}, {meta, (size_t)n}};
        char err[512];
        if (ctx->cache_dir[0]) { /* best effort: a failure is only noted */
          if (rt_cache_store(ctx->cache_dir, "tune", key, strlen(key), parts, 2, err, sizeof err) == 0) {
            ctx->cache_stats.stored++;
          } else {
            ctx->cache_stats.store_failed++;
            rt_cache_note(ctx, "%s", err);
          }
        }
        if (uco.device == TILE_DEVICE_CUDA && T->best_k) rt_gpu_store(ctx, T->best_k, &T->jobs[T->best_job].art);
      }
    }
    if (!st) st = copy_rows(T, out);
    if (st) drop_rows(T);
  }
  if (T->best_row >= 0 && !T->nomem) rt_artifact_free(&T->jobs[T->best_job].art);
  out->timed = T->timed;
  out->pruned = T->pruned;
  out->failed = T->failed;
  out->wrong = T->wrong;
  out->skipped = T->skipped;
  out->total_ms = tl_now_ms() - T->t0;
  rt_kernel_release(T->best_k);
  rt_kernel_release(kdef);
  arena_free(&a);
  if (st) {
    rt_tune_result_free(out);
    return st;
  }
  rt_clear_error(ctx);
  return TILE_OK;
}

tile_status rt_tune(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *co, const tile_arg *args, unsigned nargs,
                               const tile_tune_options *topts, tile_tune_result *out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  if (!src) return rt_error(ctx, TILE_INVALID_ARGUMENT, "source is NULL");
  if (nargs && !args) return rt_error(ctx, TILE_INVALID_ARGUMENT, "args is NULL");
  return tune_core(ctx, name ? name : "<string>", src, len, co, args, nargs, topts, out, true);
}

TILE_API tile_status tile_tune_file(tile_context *ctx, const char *path, const tile_compile_options *co,
                                    const tile_arg *args, unsigned nargs, const tile_tune_options *topts,
                                    tile_tune_result *out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  if (!path) return rt_error(ctx, TILE_INVALID_ARGUMENT, "path is NULL");
  size_t n = 0;
  errno = 0;
  char *buf = rt_read_file(ctx, path, &n);
  if (!buf && errno == ENOMEM) return rt_error(ctx, TILE_NOMEM, "out of memory reading '%s'", path);
  if (!buf) return rt_error(ctx, TILE_IO, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
  tile_status st = rt_tune(ctx, path, buf, n, co, args, nargs, topts, out);
  tl_free(buf);
  return st;
}

/* ---- TILE_AUTOTUNE ---- */

/* The tile_args equivalent to a kernel's bound arguments (explicit strides). */
static tile_arg *args_of_bound(tile_kernel *k, const struct rt_bound *b, struct arena *a) {
  tile_arg *args = ARENA_NEWN(a, tile_arg, k->nparams + 1);
  for (unsigned u = 0; u < k->nparams; u++) {
    const tile_param_info *pi = &k->params[u];
    const struct interp_arg *ia = &b->iargs[k->param_ir[u]];
    if (pi->is_tensor) {
      const struct interp_tensor *t = &ia->tensor;
      int64_t shape[TILE_MAX_RANK] = {0}, strides[TILE_MAX_RANK] = {0};
      for (unsigned d = 0; d < pi->rank && d < TILE_MAX_RANK; d++) {
        shape[d] = t->data ? t->shape[d] : 0;
        strides[d] = t->data ? t->strides[d] : 0;
      }
      args[u] = tile_arg_tensor(t->data, pi->dtype, pi->rank, shape, strides);
    } else if (ir_dtype_is_float((ir_dtype)pi->dtype)) {
      args[u] = tile_arg_float(ia->scalar.f);
    } else {
      args[u] = tile_arg_int(ia->scalar.i);
    }
  }
  return args;
}

/* The compile options of kernel k (an AUTOTUNE or AUTOCONFIG kernel) with other defines,
 * without those two flags and with TILE_FIXED_CONFIG: how its choices are compiled. */
static tile_compile_options own_options(const tile_kernel *k, const tile_define *defs, unsigned n) {
  return (tile_compile_options){k->kernel_opt, defs, n, k->device, k->arch,
                                (k->flags & ~(unsigned)(TILE_AUTOTUNE | TILE_AUTOCONFIG)) | TILE_FIXED_CONFIG,
                                k->sched_text};
}

/* ---- TILE_AUTOCONFIG: a configuration per shape bucket, without timing ----
 *
 * The parameters the caller did not pin start at their defaults. A parameter is a tile
 * extent of the grid when its value changes the number of programs with every size at 4096
 * (the probe: large enough for tiles up to 2048, small enough for 32-bit grid arithmetic). Then, one step at a time (each to the next smaller candidate):
 *   1. a tile extent whose smaller value leaves the programs as they are overhangs the
 *      problem (a 128-row tile for 16 rows): it shrinks, which only removes padding;
 *   2. when the default grid has fewer programs than half the multiprocessors, then while
 *      it has fewer than 90% of them, the tile extent whose smaller value gives the most
 *      programs shrinks (on a tie the larger tile, so that tiles stay square).
 * Configurations the kernel's rules reject are skipped. The front end
 * alone decides this (no code generation, sub-millisecond per configuration). */

struct autocfg {
  struct tuner *T;
  const tile_kernel *k;
  const struct interp_arg *ia, *probe; /* the launch's arguments; the same with every size 4096 */
  const char **vals;                   /* the current value of each tuned parameter */
  bool nomem;                          /* a step ran out of memory: no choice is made */
};

static int64_t programs_of(tile_context *ctx, const struct ir_func *f, const struct interp_arg *ia) {
  int64_t g[3];
  if (!interp_grid(f, ia, g, &ctx->alloc) || g[0] < 0 || g[1] < 0 || g[2] < 0) return -1;
  return g[0] * g[1] * g[2];
}

/* The defines of the current configuration with tuned parameter t at v (t = -1: none). */
static tile_define *autocfg_defines(struct autocfg *A, int t, const char *v, unsigned *n) {
  struct tuner *T = A->T;
  tile_define *d = ARENA_NEWN(T->a, tile_define, T->npins + T->ntuned + 1);
  *n = 0;
  for (unsigned i = 0; i < T->npins; i++) d[(*n)++] = T->pins[i];
  for (uint32_t u = 0; u < T->ntuned; u++) d[(*n)++] = (tile_define){T->p[T->tuned[u]].name, (int)u == t ? v : A->vals[u]};
  return d;
}

/* The configuration with tuned parameter t at v (t = -1: the current one), compiled
 * without the caches; NULL when it does not compile or takes other parameters (running out
 * of memory is noted in A->nomem). */
static tile_kernel *autocfg_compile(struct autocfg *A, int t, const char *v) {
  struct tuner *T = A->T;
  tile_compile_options c = T->co;
  c.defines = autocfg_defines(A, t, v, &c.ndefines);
  c.flags |= TILE_NO_CACHE;
  tile_kernel *kc = NULL;
  tile_status st = rt_compile_string(T->ctx, T->name, T->src, T->len, &c, false, &kc);
  A->nomem |= st == TILE_NOMEM;
  rt_clear_error(T->ctx);
  if (!st && kc->ir->params.n != A->k->ir->params.n) {
    rt_kernel_release(kc);
    return NULL;
  }
  return st ? NULL : kc;
}

/* Programs with tuned parameter t at v, at the launch's sizes and at the probe's; false
 * when that configuration does not compile. */
static bool autocfg_try(struct autocfg *A, int t, const char *v, int64_t *real, int64_t *big) {
  tile_kernel *kc = autocfg_compile(A, t, v);
  bool ok = kc != NULL;
  if (ok) {
    *real = programs_of(A->T->ctx, kc->ir, A->ia);
    *big = programs_of(A->T->ctx, kc->ir, A->probe);
    ok = *real > 0 && *big > 0;
  }
  rt_kernel_release(kc);
  return ok;
}

/* Whether two compiles of a kernel compute the same products: the same ops, and every dot
 * with the same result tile. A parameter that changes only the dots' depth (the K step of a
 * reduction loop) or a loop's stages passes; one that changes the tiles the program computes
 * (a key block of attention: the scores, their softmax) does not. */
static bool same_products(const struct ir_func *a, const struct ir_func *b) {
  if (a->ops.n != b->ops.n) return false;
  for (uint32_t i = 1; i < a->ops.n; i++) {
    const struct ir_op *x = &a->ops.v[i], *y = &b->ops.v[i];
    if (x->code != y->code) return false;
    if (x->code != IR_DOT || !x->nres) continue;
    const struct ir_type *tx = ir_vtype(a, x->res), *ty = ir_vtype(b, y->res);
    if (tx->rank != ty->rank || memcmp(tx->dims, ty->dims, tx->rank * sizeof tx->dims[0])) return false;
  }
  return true;
}

/* Whether kc, a compile of A's kernel for the GPU, keeps the launch's grid (`programs` at
 * its sizes, `big` at the probe's), and then rt_gpu_estimate of it for the launch's
 * arguments (with its shared memory when `lower`); false when any of that fails (running
 * out of memory is noted in A->nomem). */
static bool autocfg_measure(struct autocfg *A, tile_kernel *kc, int64_t programs, int64_t big, bool lower,
                            struct rt_estimate *e) {
  struct tuner *T = A->T;
  if (!kc || !kc->target || programs_of(T->ctx, kc->ir, A->ia) != programs ||
      programs_of(T->ctx, kc->ir, A->probe) != big)
    return false;
  struct arena ba; /* the binding's, apart from T's: kc stays the caller's whatever happens */
  jmp_buf boom;
  tile_status st;
  struct rt_bound b;
  arena_init(&ba, &T->ctx->alloc, &boom);
  if (setjmp(boom)) st = TILE_NOMEM;
  else if (!(st = rt_bind_args(T->ctx, kc, T->args, A->k->nparams, &ba, &b))) st = rt_gpu_estimate(kc, &b, lower, e);
  arena_free(&ba);
  A->nomem |= st == TILE_NOMEM;
  rt_clear_error(T->ctx);
  return !st;
}

static bool is_integer(const char *s) {
  char *end;
  if (!*s) return false;
  (void)strtoll(s, &end, 10);
  return !*end;
}

/* The largest product (dot result) of f, in elements; 0 when f has no dot. */
static int64_t largest_product(const struct ir_func *f) {
  int64_t most = 0;
  for (uint32_t i = 1; i < f->ops.n; i++)
    if (f->ops.v[i].code == IR_DOT && f->ops.v[i].nres) {
      int64_t n = ir_type_numel(ir_vtype(f, f->ops.v[i].res));
      if (n > most) most = n;
    }
  return most;
}

/* Step 2b of TILE_AUTOCONFIG, after the tiles shrank: the warps shrink with them. A
 * parameter is the warp count when another of its values changes only the kernel's warps
 * (the same products, the same grid); it takes the smallest value that keeps the warps at
 * least in proportion to the largest product, from the kernel's own configuration (a
 * 128 x 256 tile on 8 warps: a 64 x 64 one on 1, i.e. the fewest there are). Fewer warps on
 * a small tile share its operands' loads among fewer copies. */
static bool fit_warps(struct autocfg *A, const tile_kernel *k0) {
  struct tuner *T = A->T;
  int64_t work0 = largest_product(k0->ir);
  if (!work0) return false;
  tile_kernel *ref = autocfg_compile(A, -1, NULL);
  if (!ref) return false;
  int64_t work = largest_product(ref->ir), programs = programs_of(T->ctx, ref->ir, A->ia);
  double want = (double)k0->ir->warps * (double)work / (double)work0; /* warps in proportion */
  bool changed = false;
  for (uint32_t t = 0; t < T->ntuned && !changed; t++) {
    const struct tparam *p = &T->p[T->tuned[t]];
    if (!is_integer(A->vals[t])) continue;
    const char *best = NULL;
    int best_warps = ref->ir->warps;
    for (uint32_t j = 0; j < p->ncand; j++) {
      if (!is_integer(p->cand[j]) || !strcmp(p->cand[j], A->vals[t])) continue;
      tile_kernel *kc = autocfg_compile(A, (int)t, p->cand[j]);
      if (kc && kc->ir->warps != ref->ir->warps && same_products(ref->ir, kc->ir) &&
          programs_of(T->ctx, kc->ir, A->ia) == programs && kc->ir->warps >= want && kc->ir->warps < best_warps)
        best = p->cand[j], best_warps = kc->ir->warps;
      rt_kernel_release(kc);
    }
    if (best) A->vals[t] = best, changed = true;
  }
  rt_kernel_release(ref);
  return changed;
}

/* Step 4 of TILE_AUTOCONFIG, for kernels with branches the launch decides (`if N <= BN`:
 * a row read once instead of in chunks): one parameter outside the tile extents takes the
 * value that changes which branches run and reads the fewest global bytes per program, at
 * most 80% of the current configuration's and with at most 64 elements per thread in its
 * largest tile. */
static bool fewest_bytes(struct autocfg *A, int64_t programs, int64_t big) {
  struct tuner *T = A->T;
  struct rt_estimate e0;
  tile_kernel *k0 = autocfg_compile(A, -1, NULL);
  bool ok = autocfg_measure(A, k0, programs, big, false, &e0);
  rt_kernel_release(k0);
  if (!ok || !e0.decided) return false;
  int best = -1;
  const char *bestv = NULL;
  double best_bytes = 0.8 * e0.load_bytes;
  for (uint32_t t = 0; t < T->ntuned; t++) {
    const struct tparam *p = &T->p[T->tuned[t]];
    if (!is_integer(A->vals[t])) continue;
    for (uint32_t j = 0; j < p->ncand; j++) {
      if (!is_integer(p->cand[j]) || !strcmp(p->cand[j], A->vals[t])) continue;
      struct rt_estimate e;
      tile_kernel *kc = autocfg_compile(A, (int)t, p->cand[j]);
      ok = autocfg_measure(A, kc, programs, big, false, &e);
      rt_kernel_release(kc);
      if (ok && e.decided == e0.decided && e.taken != e0.taken && e.largest_tile <= 64 * 32 * (int64_t)e.warps &&
          e.load_bytes < best_bytes)
        best = (int)t, bestv = p->cand[j], best_bytes = e.load_bytes;
    }
  }
  if (best < 0) return false;
  A->vals[best] = bestv;
  return true;
}

/* Step 3 of TILE_AUTOCONFIG: while some parameter outside the grid's tile extents, at its
 * next larger candidate, gives the program more shared memory without changing what it
 * computes (deeper stages, longer K steps: same_products) and stays within 90% of what the
 * target allows, the one that adds the least takes that value. */
static bool deepen(struct autocfg *A, int64_t programs, int64_t big) {
  struct tuner *T = A->T;
  tile_kernel *ref = autocfg_compile(A, -1, NULL);
  struct rt_estimate e;
  unsigned have = autocfg_measure(A, ref, programs, big, true, &e) ? e.smem : 0;
  unsigned limit = A->k->target->smem_optin / 10 * 9;
  bool changed = false;
  for (int step = 0; step < 16 && have; step++) {
    int best = -1;
    const char *bestv = NULL;
    unsigned best_bytes = 0;
    for (uint32_t t = 0; t < T->ntuned; t++) {
      const struct tparam *p = &T->p[T->tuned[t]];
      if (!is_integer(A->vals[t])) continue;
      long long now = strtoll(A->vals[t], NULL, 10);
      for (;;) { /* the next larger candidate that compiles and computes the same */
        const char *w = NULL;
        long long wv = 0;
        for (uint32_t c = 0; c < p->ncand; c++) {
          if (!is_integer(p->cand[c])) continue;
          long long x = strtoll(p->cand[c], NULL, 10);
          if (x > now && (!w || x < wv)) w = p->cand[c], wv = x;
        }
        if (!w) break;
        tile_kernel *kc = autocfg_compile(A, (int)t, w);
        unsigned bytes = kc && same_products(ref->ir, kc->ir) && autocfg_measure(A, kc, programs, big, true, &e)
                             ? e.smem : 0;
        rt_kernel_release(kc);
        if (!bytes) {
          now = wv;
          continue;
        }
        if (bytes > have && bytes <= limit && (best < 0 || bytes < best_bytes)) best = (int)t, bestv = w, best_bytes = bytes;
        break;
      }
    }
    if (best < 0) break;
    A->vals[best] = bestv;
    have = best_bytes;
    changed = true;
  }
  rt_kernel_release(ref);
  return changed;
}

/* Step 5 of TILE_AUTOCONFIG, for kernels without products whose launch walks a loop of at
 * least 16 chunks (the looped form of a row kernel, 4096 x 50257): wider chunks on more
 * warps, one or two parameters raised together, the widest tile that keeps the branches the
 * launch takes, at most the elements per thread of the current configuration and at least 8
 * chunks per loop. Measured on the H200 (PERF.md 101, f16, % of the copy): at 4096 x 50257
 * softmax / rmsnorm / layernorm 52 / 53 / 43 -> 54 / 56 / 46 (4096 on 16 warps instead of
 * 1024 on 4), at 8192 x 16385 54 / 55 / 48 -> 58 / 67 / 52 (2048 on 8); rows of 5 chunks
 * (4097) lose with wider ones and keep the defaults. */
static bool wider_chunks(struct autocfg *A, int64_t programs, int64_t big) {
  struct tuner *T = A->T;
  if (largest_product(A->k->ir)) return false;
  struct rt_estimate e0, e;
  tile_kernel *k0 = autocfg_compile(A, -1, NULL);
  bool ok = autocfg_measure(A, k0, programs, big, false, &e0);
  rt_kernel_release(k0);
  if (!ok || e0.min_trips < 16 || e0.warps <= 0) return false;
  int64_t per_thread = e0.largest_tile / (32 * (int64_t)e0.warps), best_tile = e0.largest_tile;
  int b1 = -1, b2 = -1;
  const char *v1 = NULL, *v2 = NULL;
  for (uint32_t t1 = 0; t1 < T->ntuned; t1++) {
    const struct tparam *p1 = &T->p[T->tuned[t1]];
    if (!is_integer(A->vals[t1])) continue;
    const char *save = A->vals[t1];
    for (uint32_t c1 = 0; c1 < p1->ncand; c1++) {
      if (!is_integer(p1->cand[c1]) || strtoll(p1->cand[c1], NULL, 10) <= strtoll(save, NULL, 10)) continue;
      A->vals[t1] = p1->cand[c1];
      for (int t2 = -1; t2 < (int)T->ntuned; t2++) { /* -1: t1 alone */
        if (t2 >= 0 && ((uint32_t)t2 <= t1 || !is_integer(A->vals[t2]))) continue;
        const struct tparam *p2 = t2 >= 0 ? &T->p[T->tuned[t2]] : NULL;
        for (uint32_t c2 = 0; c2 < (p2 ? p2->ncand : 1); c2++) {
          const char *w = p2 ? p2->cand[c2] : NULL;
          if (p2 && (!is_integer(w) || strtoll(w, NULL, 10) <= strtoll(A->vals[t2], NULL, 10))) continue;
          tile_kernel *kc = autocfg_compile(A, t2, w);
          ok = autocfg_measure(A, kc, programs, big, false, &e);
          rt_kernel_release(kc);
          if (ok && e.decided == e0.decided && e.taken == e0.taken && e.min_trips >= 8 && e.warps > 0 &&
              e.largest_tile <= per_thread * 32 * e.warps && e.largest_tile > best_tile)
            best_tile = e.largest_tile, b1 = (int)t1, v1 = p1->cand[c1], b2 = t2, v2 = w;
        }
      }
    }
    A->vals[t1] = save;
  }
  if (b1 < 0) return false;
  A->vals[b1] = v1;
  if (b2 >= 0) A->vals[b2] = v2;
  return true;
}

void rt_autoconfig_choose(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, const tile_arg *args, int sms,
                          struct arena *a, tile_define **defs, unsigned *n) {
  *defs = NULL;
  *n = 0;
  int64_t cur = programs_of(ctx, k->ir, b->iargs);
  if (sms <= 0 || cur <= 0 || (k->flags & TILE_SOURCE_IR)) return;
  bool grow_ok = 2 * cur < sms; /* a grid of half the device or more keeps its tiles' sizes */
  struct tuner T;
  memset(&T, 0, sizeof T);
  T.ctx = ctx;
  T.a = a;
  T.name = k->filename;
  T.src = k->src;
  T.len = k->src_len;
  T.args = args;
  T.nargs = k->nparams;
  tile_compile_options uco = own_options(k, k->defines, k->ndefines);
  T.co = uco;
  T.co.defines = NULL;
  T.co.ndefines = 0;
  bool fe;
  if (plan_params(&T, &uco, &fe) || !T.ntuned) {
    rt_clear_error(ctx);
    return;
  }
  uint32_t np = k->ir->params.n;
  struct interp_arg *probe = ARENA_NEWN(a, struct interp_arg, np + 1);
  for (uint32_t i = 0; i < np; i++) {
    probe[i] = b->iargs[i];
    if (k->ir->params.v[i].kind == IR_PARAM_SHAPE) probe[i].scalar.i = 4096;
  }
  struct autocfg A = {&T, k, b->iargs, probe, ARENA_NEWN(a, const char *, T.ntuned + 1), false};
  /* start from the configuration k was compiled with (its target's defaults, or the plain
   * ones where those broke a constraint) */
  for (uint32_t t = 0; t < T.ntuned; t++) A.vals[t] = config_value(a, k->config, T.p[T.tuned[t]].name, T.p[T.tuned[t]].def);
  int64_t big = programs_of(ctx, k->ir, probe);
  bool changed = false;
  for (int step = 0; step < 64 && big > 0; step++) {
    int pad = -1, grow = -1;
    const char *padv = NULL, *growv = NULL;
    int64_t pad_big = 0, grow_p = 0, grow_big = 0, grow_now = 0;
    for (uint32_t t = 0; t < T.ntuned; t++) {
      const struct tparam *p = &T.p[T.tuned[t]];
      long long cur_v = strtoll(A.vals[t], NULL, 10), now = cur_v;
      /* the next smaller candidate that compiles */
      for (;;) {
        const char *w = NULL;
        long long wv = 0;
        for (uint32_t c = 0; c < p->ncand; c++) {
          long long x = strtoll(p->cand[c], NULL, 10);
          if (x < now && (!w || x > wv)) w = p->cand[c], wv = x;
        }
        if (!w) break;
        int64_t P, Pb;
        if (!autocfg_try(&A, (int)t, w, &P, &Pb)) {
          now = wv; /* rejected by the kernel's rules: the next one down */
          continue;
        }
        if (Pb == big) break; /* not a tile extent of the grid */
        if (P == cur && pad < 0) pad = (int)t, padv = w, pad_big = Pb;
        else if (P > cur && (P > grow_p || (P == grow_p && cur_v > grow_now)))
          grow = (int)t, growv = w, grow_p = P, grow_big = Pb, grow_now = cur_v;
        break;
      }
    }
    if (pad >= 0) {
      A.vals[pad] = padv;
      big = pad_big;
    } else if (grow >= 0 && grow_ok && 10 * cur < 9 * (int64_t)sms) {
      A.vals[grow] = growv;
      cur = grow_p;
      big = grow_big;
    } else {
      break;
    }
    changed = true;
  }
  if (changed) fit_warps(&A, k);
  /* 3. a grid of at most one program per multiprocessor: nothing else hides a program's load
   *    latency, so its pipeline deepens into the shared memory it has to itself */
  if (k->target && cur <= sms && deepen(&A, cur, big)) changed = true;
  if (k->target && fewest_bytes(&A, cur, big)) changed = true;
  if (k->target && wider_chunks(&A, cur, big)) changed = true;
  if (A.nomem) arena_oom(a); /* not a choice to remember */
  if (changed) *defs = autocfg_defines(&A, -1, NULL, n);
}

/* TILE_AUTOCONFIG's kernel for bound arguments b: the chosen configuration, compiled and
 * prepared for the GPU (*child = NULL: the kernel's own configuration, or the choice failed
 * to build). */
static TL_NOINLINE tile_status autoconfig_child(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, tile_arg *args,
                                    struct arena *a, void *stream, tile_kernel **child) {
  *child = NULL;
  tile_define *defs;
  unsigned n;
  rt_autoconfig_choose(ctx, k, b, args, ctx->dev.sm_count, a, &defs, &n);
  if (!n) return TILE_OK;
  tile_compile_options co = own_options(k, defs, n);
  tile_status st = rt_compile_string(ctx, k->filename, k->src, k->src_len, &co, false, child);
  if (!st) st = rt_autotune_launch(ctx, k, *child, b, stream, false); /* builds the GPU code */
  if (st) { /* the choice does not build here: the kernel's own configuration runs */
    rt_kernel_release(*child);
    *child = NULL;
  }
  if (st == TILE_NOMEM) return st;
  rt_clear_error(ctx);
  return TILE_OK;
}

tile_status rt_autotune_pick(tile_context *ctx, tile_kernel *k, const struct rt_bound *b, void *stream,
                             tile_kernel **out) {
  *out = k;
  struct arena a;
  jmp_buf oom;
  arena_init(&a, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&a);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  uint8_t h[RT_HASH_LEN];
  if (k->flags & TILE_AUTOTUNE) { /* the key of the stored tuning results */
    struct strbuf sb;
    sb_init(&sb, &a);
    args_key(&sb, k->ir, b);
    rt_hash(sb_str(&sb), sb.len, h);
  } else { /* TILE_AUTOCONFIG (every launch by default): the same facts, without formatting */
    uint64_t x = args_key_fast(k->ir, b);
    memset(h, 0, sizeof h);
    memcpy(h, &x, sizeof x);
  }
  for (uint32_t i = 0; i < k->tuned.n; i++)
    if (memcmp(k->tuned.v[i].key, h, sizeof h) == 0) {
      if (k->tuned.v[i].child) *out = k->tuned.v[i].child;
      arena_free(&a);
      return TILE_OK;
    }
  /* a new tuning key: tune (or find the stored result), then compile the winner; room for
   * the choice first, so that the tuned kernel cannot be lost to a failed allocation */
  tile_arg *args = args_of_bound(k, b, &a);
  a.oom = NULL; /* nothing below allocates from it */
  if (!VEC_TRY_RESERVE(&k->arena, k->tuned, 1)) {
    arena_free(&a);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  tile_kernel *child = NULL;
  tile_status st;
  if (k->flags & TILE_AUTOTUNE) {
    tile_compile_options co = own_options(k, k->defines, k->ndefines);
    tile_tune_options to = {0};
    to.stream = stream;
    to.budget_ms = ctx->autotune_budget_ms;
    tile_tune_result r;
    st = tune_core(ctx, k->filename, k->src, k->src_len, &co, args, k->nparams, &to, &r, false);
    if (!st) {
      co.defines = r.defines;
      co.ndefines = r.ndefines;
      st = rt_compile_string(ctx, k->filename, k->src, k->src_len, &co, false, &child);
      if (st) child = NULL;
    }
    rt_tune_result_free(&r);
  } else {
    a.oom = &oom; /* the choice allocates from a (out of memory: back to the setjmp above) */
    st = autoconfig_child(ctx, k, b, args, &a, stream, &child);
    a.oom = NULL;
  }
  arena_free(&a);
  /* out of memory is not the kernel's failure: nothing is remembered, the launch fails */
  if (st == TILE_NOMEM) return st;
  struct rt_autotuned at;
  memcpy(at.key, h, sizeof h);
  at.child = child; /* NULL: tuning failed; k runs with its own configuration */
  VEC_PUSH(&k->arena, k->tuned, at); /* reserved above: allocates nothing */
  rt_clear_error(ctx);
  if (child) *out = child;
  return TILE_OK;
}

tile_status rt_autotune_launch(tile_context *ctx, tile_kernel *k, tile_kernel *run, const struct rt_bound *b,
                               void *stream, bool launch) {
  struct arena a;
  jmp_buf oom;
  arena_init(&a, &ctx->alloc, &oom);
  if (setjmp(oom)) {
    arena_free(&a);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  tile_arg *args = args_of_bound(k, b, &a);
  struct rt_bound b2;
  tile_status st = rt_bind_args(ctx, run, args, k->nparams, &a, &b2);
  a.oom = NULL; /* nothing below allocates from it */
  b2.repacked = b->repacked;
  if (!st) st = rt_gpu_launch(ctx, run, &b2, stream, launch);
  k->stats = run->stats;
  k->last_config = run->config;
  arena_free(&a);
  return st;
}

void rt_autotune_release(tile_kernel *k) {
  for (uint32_t i = 0; i < k->tuned.n; i++) rt_kernel_release(k->tuned.v[i].child);
  k->tuned.n = 0;
}

TILE_API void tile_tune_result_free(tile_tune_result *r) {
  rt_tune_result_free(r);
}

TILE_API tile_status tile_tune(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *co, const tile_arg *args, unsigned nargs,
                               const tile_tune_options *topts, tile_tune_result *out) {
  return rt_tune(ctx, name, src, len, co, args, nargs, topts, out);
}
