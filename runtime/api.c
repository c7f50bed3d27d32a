/* api.c - contexts, errors, diagnostics, compiling, kernel introspection and tile_emit.
 *
 * Compiling runs the front end and the machine-independent pipeline once per (source,
 * kernel, overrides, device, arch, flags); the result is cached in the context by a hash of
 * all of these and the compiler version. Target code for CUDA is generated later, per
 * argument specialization (gpu.c). Allocation failure anywhere below an entry point
 * longjmps back to it (util.h) and becomes TILE_NOMEM with nothing leaked: all compile
 * memory lives in the kernel's arena.                                                    */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "driver.h"
#include "lang.h"
#include "passes.h"
#include "rt.h"

_Static_assert(TILE_F16 == (int)DT_F16 && TILE_BF16 == (int)DT_BF16 && TILE_F32 == (int)DT_F32 &&
                   TILE_I32 == (int)DT_I32 && TILE_BOOL == (int)DT_BOOL &&
                   TILE_F8E5M2 == (int)DT_F8E5M2 && TILE_DTYPE__COUNT == (int)DT__COUNT,
               "tile_dtype must mirror dtype.def");

static const char *const status_msg[] = {
#define TILE_X(name, msg) msg,
    TILE_STATUS_MAP(TILE_X)
#undef TILE_X
};
static const char *const status_names[] = {
#define TILE_X(name, msg) "TILE_" #name,
    TILE_STATUS_MAP(TILE_X)
#undef TILE_X
};

TILE_API const char *tile_strerror(tile_status s) {
  return (unsigned)s < TILE_STATUS__COUNT ? status_msg[s] : "unknown status";
}
TILE_API const char *tile_status_name(tile_status s) {
  return (unsigned)s < TILE_STATUS__COUNT ? status_names[s] : "TILE_UNKNOWN";
}
const char * rt_dtype_name(tile_dtype t) {
  return (unsigned)t < TILE_DTYPE__COUNT && t != TILE_DTYPE_NONE ? ir_dtype_name((ir_dtype)t) : "?";
}
size_t rt_dtype_size(tile_dtype t) {
  return (unsigned)t < TILE_DTYPE__COUNT && t != TILE_DTYPE_NONE ? (size_t)ir_dtype_bytes((ir_dtype)t) : 0;
}
const char * rt_version(void) { return "tile " TILE_VERSION " (LLVM " TILE_LLVM_VERSION ")"; }

void rt_clear_error(tile_context *ctx) {
  if (!ctx) return;
  ctx->errmsg[0] = 0;
  ctx->errbrief[0] = 0;
  ctx->errcode = NULL;
}

/* errbrief: brief, or else the first line of the message */
static void set_brief(tile_context *ctx, const char *brief) {
  const char *p = brief ? brief : ctx->errmsg;
  size_t n = strcspn(p, "\n");
  if (n >= sizeof ctx->errbrief) n = sizeof ctx->errbrief - 1;
  memcpy(ctx->errbrief, p, n);
  ctx->errbrief[n] = 0;
}

tile_status rt_fail(tile_context *ctx, enum tl_result r, struct tl_error *e) {
  static const tile_status map[] = {
      [TL_OK] = TILE_OK,
      [TL_ERR_PROGRAM] = TILE_COMPILE,
      [TL_ERR_NOT_FOUND] = TILE_NOT_FOUND,
      [TL_ERR_ARGUMENT] = TILE_INVALID_ARGUMENT,
      [TL_ERR_UNSUPPORTED] = TILE_UNSUPPORTED,
      [TL_ERR_INTERNAL] = TILE_INTERNAL,
  };
  tile_status st = rt_error(ctx, map[r], "%s", sb_str(&e->msg));
  if (ctx) {
    ctx->errcode = e->code;
    set_brief(ctx, e->brief);
  }
  return st;
}

tile_status rt_error_code(tile_context *ctx, tile_status st, const char *code, const char *fmt, ...) {
  if (!ctx) return st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
  va_end(ap);
  ctx->errcode = code;
  set_brief(ctx, NULL);
  return st;
}

tile_status rt_error(tile_context *ctx, tile_status st, const char *fmt, ...) {
  if (!ctx) return st;
  ctx->errcode = NULL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
  va_end(ap);
  set_brief(ctx, NULL);
  return st;
}

TILE_API const char *tile_errmsg(const tile_context *ctx) { return ctx ? ctx->errmsg : "no context"; }
TILE_API const char *tile_errcode(const tile_context *ctx) { return ctx && ctx->errcode ? ctx->errcode : ""; }

/* ---- contexts ---- */

tile_status rt_context_create(const tile_context_options *opts, tile_context **out) {
  if (!out) return TILE_INVALID_ARGUMENT;
  *out = NULL;
  struct tl_alloc alloc = tl_default_alloc;
  if (opts && opts->alloc) alloc = (struct tl_alloc){opts->alloc, opts->alloc_ud, 0};
  tile_context *ctx = tl_calloc(&alloc, 1, sizeof *ctx);
  if (!ctx) return TILE_NOMEM;
  ctx->alloc = alloc;
  if (opts) {
    ctx->cpu_threads = opts->cpu_threads;
    ctx->cuda_ordinal = opts->cuda_device;
  }
  arena_init(&ctx->diag_arena, &ctx->alloc, NULL);
  arena_init(&ctx->cache_arena, &ctx->alloc, NULL);
  /* the option, else $TILE_CACHE_DIR, else the XDG cache directory; "" = off */
  if (!rt_cache_resolve_dir(opts ? opts->cache_dir : NULL, ctx->cache_dir, sizeof ctx->cache_dir))
    rt_cache_note(ctx, "the on-disk cache is off: the path of its directory is longer than %zu bytes",
                  sizeof ctx->cache_dir - 1);
  /* the environment is read here, once: a context's behaviour never changes after this */
  ctx->repack_mode = rt_repack_mode_from_env();
  const char *budget = getenv("TILE_AUTOTUNE_BUDGET_MS");
  ctx->autotune_budget_ms = budget ? strtod(budget, NULL) : 0;
  if (!(ctx->autotune_budget_ms > 0 && ctx->autotune_budget_ms < 1e9)) ctx->autotune_budget_ms = 0;
  /* Debug and sanitizer builds verify after every pass (TILE_VERIFY_EACH_DEFAULT, set by
   * CMake); elsewhere the environment turns it on, read once here */
#ifdef TILE_VERIFY_EACH_DEFAULT
  ctx->verify_each = true;
#else
  ctx->verify_each = getenv("TILE_VERIFY_EACH") != NULL;
#endif
  /* a directory that exists must be trusted (cache.h); one that does not is checked when a
   * store creates it, and again by every load and store */
  char why[sizeof ctx->cache_status - 64];
  if (ctx->cache_dir[0] && rt_cache_dir_check(ctx->cache_dir, why, sizeof why) < 0) {
    rt_cache_note(ctx, "the on-disk cache is off: %s", why);
    ctx->cache_dir[0] = 0;
  }
  /* profiler ranges and the trace file (trace.c): a trace file that cannot be created fails
   * the context (TILE_IO), rather than a run that was asked to be traced going untraced */
  tile_status st = rt_trace_open(ctx, opts ? opts->trace_path : NULL);
  if (st) {
    arena_free(&ctx->diag_arena);
    arena_free(&ctx->cache_arena);
    tl_free(ctx);
    return st;
  }
  *out = ctx;
  return TILE_OK;
}

static void context_free(tile_context *ctx) {
  if (ctx->cuda_ok) {
    char err[256];
    rt_repack_release(ctx);
    rt_cuda_device_close(&ctx->cuda, &ctx->dev, err, sizeof err);
  }
  if (ctx->cuda_tried) rt_cuda_unload(&ctx->cuda);
  rt_trace_close(ctx);
  arena_free(&ctx->diag_arena);
  arena_free(&ctx->cache_arena);
  tl_free(ctx);
}

static void kernel_free(tile_kernel *k) {
  tile_context *ctx = k->ctx;
  rt_autotune_release(k); /* the tuned kernels it launches */
  if (ctx->cuda_ok) {
    char err[256];
    for (uint32_t i = 0; i < k->specs.n; i++)
      if (k->specs.v[i].module) rt_cuda_module_unload(&ctx->cuda, k->specs.v[i].module, err, sizeof err);
  }
  arena_free(&k->arena);
  tl_free(k);
  if (--ctx->live_kernels == 0 && ctx->destroyed) context_free(ctx);
}

/* Every reference is counted: the caller's, the in-memory cache's (one per entry of
 * ctx->kernels), a TILE_AUTOTUNE kernel's on each tuned kernel, the repack slots'. The
 * context drops its own references here; kernels the caller still holds keep it (and
 * its CUDA context) alive until they are released. */
void rt_context_destroy(tile_context *ctx) {
  if (!ctx || ctx->destroyed) return;
  ctx->destroyed = true;
  ctx->live_kernels++; /* hold the context while the references below are dropped */
  for (int r = 0; r < 2; r++)
    for (int d = 0; d < 3; d++) {
      rt_kernel_release(ctx->repack_kernels[r][d]);
      ctx->repack_kernels[r][d] = NULL;
    }
  for (uint32_t i = 0; i < ctx->kernels.n; i++) rt_kernel_release(ctx->kernels.v[i]);
  ctx->kernels.n = 0;
  if (--ctx->live_kernels == 0) context_free(ctx);
}

/* ---- diagnostics ---- */

TILE_API unsigned tile_diag_count(const tile_context *ctx) { return ctx ? ctx->diags.n : 0; }

TILE_API tile_status tile_diag_get(const tile_context *ctx, unsigned i, tile_diagnostic *out) {
  if (!ctx || !out || i >= ctx->diags.n) return TILE_INVALID_ARGUMENT;
  *out = ctx->diags.v[i];
  return TILE_OK;
}

/* Copies the diagnostics of a compile into the context (which outlives the compile's
 * arena). The context's arena has no recovery point of its own: a failed allocation jumps
 * to the compile's, `recover` (the kernel's arena). */
static void copy_diags(tile_context *ctx, const struct lang_ctx *lc, struct arena *recover) {
  for (uint32_t i = 0; i < lang_diag_count(lc); i++) {
    const struct lang_diag *d = lang_diag_get(lc, i);
    tile_diagnostic td = {
        .severity = d->severity == LANG_ERROR ? TILE_SEV_ERROR
                    : d->severity == LANG_WARNING ? TILE_SEV_WARNING
                                                  : TILE_SEV_NOTE,
        .file = arena_try_strdup(&ctx->diag_arena, d->file ? d->file : ""),
        .line = d->line,
        .col = d->col,
        .len = d->len,
        .message = arena_try_strdup(&ctx->diag_arena, d->message ? d->message : ""),
        .code = d->code,
    };
    if (!td.file || !td.message || !VEC_TRY_RESERVE(&ctx->diag_arena, ctx->diags, 1)) arena_oom(recover);
    ctx->diags.v[ctx->diags.n++] = td;
  }
}

static void reset_diags(tile_context *ctx) {
  arena_free(&ctx->diag_arena);
  memset(&ctx->diags, 0, sizeof ctx->diags);
}

/* ---- compiling ---- */

/* One field of the compile key: its length, then its bytes, so that fields cannot run into
 * each other. */
static void hash_str(rt_hasher *h, const char *s, size_t n) {
  uint64_t len = n;
  rt_hasher_update(h, &len, sizeof len);
  rt_hasher_update(h, s, n);
}

/* The in-memory compile cache's key: a strong hash, because a kernel found under it is
 * returned without comparing anything else. */
static void compile_key(uint8_t key[RT_HASH_LEN], const char *name, const char *src, size_t len,
                        const tile_compile_options *co, const char *arch, const char *sched) {
  rt_hasher hasher, *h = &hasher;
  rt_hasher_init(h);
  hash_str(h, TILE_VERSION, strlen(TILE_VERSION));
  hash_str(h, name, strlen(name));
  hash_str(h, src, len);
  const char *kn = co->kernel ? co->kernel : "";
  hash_str(h, kn, strlen(kn) + 1);
  for (unsigned i = 0; i < co->ndefines; i++) {
    const char *n = co->defines[i].name ? co->defines[i].name : "";
    const char *v = co->defines[i].value ? co->defines[i].value : "";
    hash_str(h, n, strlen(n) + 1);
    hash_str(h, v, strlen(v) + 1);
  }
  char extra[256];
  int m = snprintf(extra, sizeof extra, "%d|%s|%u|%s", (int)co->device, arch, co->flags, sched);
  hash_str(h, extra, (size_t)m);
  rt_hasher_final(h, key);
}

/* The user-visible parameter table and the config string. */
static void describe_kernel(tile_kernel *k, const struct lang_kernel_info *ki, const struct lang_define *defs,
                            uint32_t nd) {
  struct ir_func *f = k->ir;
  unsigned n = 0;
  for (uint32_t i = 0; i < f->params.n; i++) n += f->params.v[i].kind != IR_PARAM_SHAPE;
  k->nparams = n;
  k->params = ARENA_NEWN(&k->arena, tile_param_info, n + 1);
  k->param_ir = ARENA_NEWN(&k->arena, uint32_t, n + 1);
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_SHAPE) continue;
    uint32_t u = p->source_index < n ? p->source_index : 0;
    tile_param_info *pi = &k->params[u];
    k->param_ir[u] = i;
    const struct ir_type *t = ir_vtype(f, p->value);
    pi->name = p->name;
    pi->is_tensor = p->kind == IR_PARAM_TENSOR;
    pi->is_output = p->is_out;
    pi->is_used = p->used;
    pi->dtype = (tile_dtype)t->dtype;
    pi->rank = pi->is_tensor ? t->rank : 0;
    for (uint32_t o = 1; o < f->ops.n && pi->is_tensor; o++) {
      /* read, or written only in part (what is not written keeps its contents) */
      const struct ir_op *op = &f->ops.v[o];
      bool partial = op->code == IR_SCATTER || op->code == IR_ATOMIC || op->code == IR_GATHER ||
                     (op->code == IR_STORE && op->nargs == (uint32_t)t->rank + 3);
      if (op->block && (op->code == IR_LOAD || partial) && op->args[0] == p->value) pi->is_read = 1;
    }
    for (unsigned d = 0; d < pi->rank; d++) {
      if (IR_DIM_IS_SYM(t->dims[d])) {
        pi->dim_symbol[d] = f->values.v[IR_DIM_SYM_VALUE(t->dims[d])].name;
        pi->dim_size[d] = -1;
      } else {
        pi->dim_size[d] = t->dims[d];
      }
    }
  }
  struct strbuf sb;
  sb_init(&sb, &k->arena);
  for (uint32_t i = 0; ki && i < ki->ncparams; i++) {
    const struct lang_cparam_info *cp = &ki->cparams[i];
    const char *val = NULL;
    for (unsigned d = 0; d < nd; d++) /* the caller's, then the target's `defaults` that applied */
      if (defs[d].name && strcmp(defs[d].name, cp->name) == 0) val = defs[d].value;
    if (i) sb_putc(&sb, ',');
    sb_printf(&sb, "%s=", cp->name);
    if (val) {
      sb_puts(&sb, val);
    } else {
      switch (cp->kind) {
      case LANG_CP_INT: sb_printf(&sb, "%lld", (long long)cp->def.i); break;
      case LANG_CP_BOOL: sb_puts(&sb, cp->def.i ? "true" : "false"); break;
      case LANG_CP_STR: sb_puts(&sb, cp->def.s ? cp->def.s : ""); break;
      case LANG_CP_DTYPE: sb_puts(&sb, ir_dtype_name(cp->def.dt)); break;
      }
    }
  }
  k->config = sb_str(&sb);
}

/* The front end and the generic pipeline (compiler/driver) into k. On failure the
 * context's message, code and diagnostics are set. */
static tile_status front_end(tile_context *ctx, tile_kernel *k, const tile_compile_options *co, bool diags,
                             struct pass_options *po) {
  struct lang_define *defs = ARENA_NEWN(&k->arena, struct lang_define, co->ndefines + 1);
  for (unsigned i = 0; i < co->ndefines; i++) {
    defs[i].name = co->defines[i].name;
    defs[i].value = co->defines[i].value;
  }
  struct tl_source s = {k->filename, k->src, k->src_len, (co->flags & TILE_SOURCE_IR) != 0, co->kernel, defs,
                        co->ndefines, k->target ? k->target->name : NULL};
  struct tl_front_result fr;
  struct tl_error e;
  sb_init(&e.msg, &k->arena);
  const char *who = co->kernel ? co->kernel : k->filename;
  struct rt_trace_pass_ud tp = {ctx, who, NULL};
  if (ctx->trace && !po->event) {
    po->event = rt_trace_pass;
    po->event_ud = &tp;
  }
  double t0 = rt_trace_begin(ctx, who, NULL, "front end");
  enum tl_result r = tl_front_end(&s, &k->arena, &k->strs, po, &fr, &e);
  rt_trace_end(ctx, t0, "compile", who, NULL, "front end", "\"file\":\"%s\",\"ok\":%s",
               k->filename ? k->filename : "", r ? "false" : "true");
  if (po->event_ud == &tp) po->event = NULL, po->event_ud = NULL;
  if (fr.lang && diags) copy_diags(ctx, fr.lang, &k->arena); /* errors, or warnings on success */
  if (r) return rt_fail(ctx, r, &e);
  k->ir = fr.f;
  k->name = fr.f->name;
  /* row-cache's candidate, found once: its trip count joins each launch's key */
  uint32_t loads[ROW_CACHE_MAX_LOADS], nloads;
  if (k->target && tl_sched_get(k->sched.rowcache, 1)) {
    k->cache_loop = ir_row_cache_find(k->ir, loads, &nloads);
    if (k->cache_loop) k->cache_chunk = row_cache_chunk_bytes(k->ir, loads, nloads);
  }
  /* tiles of unequal work: whether the longest runs many steps decides the persistent walk
   * (the long_tiles fact; persistent=1 walks regardless; only targets with warp roles) */
  if (k->target && tl_has(k->target, TL_FEAT_SETMAXNREG) && tl_sched_get(k->sched.persistent, 2) == 2)
    k->long_tiles_matter = pass_long_tiles_matter(k->ir, &k->arena);
  describe_kernel(k, fr.info, fr.defines, fr.ndefines);
  return TILE_OK;
}

/* A kernel holding a copy of the source; NULL when out of memory. Its arena's recovery point
 * is `oom`, which the caller arms (setjmp) right after: nothing here jumps to it. */
static tile_kernel *kernel_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               jmp_buf *oom) {
  tile_kernel *k = tl_calloc(&ctx->alloc, 1, sizeof *k);
  if (!k) return NULL;
  k->ctx = ctx;
  k->refs = 1;
  ctx->live_kernels++;
  arena_init(&k->arena, &ctx->alloc, NULL);
  strtab_init(&k->strs, &k->arena);
  char *filename = arena_try_strdup(&k->arena, name);
  char *copy = arena_try_alloc(&k->arena, len + 1);
  if (!filename || !copy) {
    kernel_free(k);
    return NULL;
  }
  memcpy(copy, src, len);
  k->filename = filename;
  k->src = copy;
  k->src_len = len;
  k->arena.oom = oom;
  return k;
}

/* The target and schedule of a compile, from its options: the one place where an arch
 * name and the schedule text are parsed. CPU compiles have no target. */
static tile_status resolve_target(tile_context *ctx, const tile_compile_options *co, const struct tl_target **target,
                                  struct tl_schedule *sched) {
  *target = NULL;
  char msg[256];
  if (!tl_schedule_parse(co->schedule && co->schedule[0] ? co->schedule : NULL, sched, msg, sizeof msg))
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "%s", msg);
  if (co->device == TILE_DEVICE_CPU) return TILE_OK;
  if (co->device != TILE_DEVICE_CUDA)
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown device %d", (int)co->device);
  if (co->arch) {
    *target = tl_target_find(co->arch);
    if (!*target)
      return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown target architecture '%s' (known: %s)", co->arch,
                      tl_target_names());
    return TILE_OK;
  }
  if (!rt_cuda_ready(ctx)) return TILE_NO_DRIVER;
  *target = ctx->dev_target;
  return TILE_OK;
}

static tile_status compile_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *cop, const struct tl_target *target,
                               const struct tl_schedule *sched, const uint8_t *key, bool public,
                               tile_kernel **out);

/* public: the diagnostics of this compile replace those of the last (tile_diag_get);
 * internal compiles of candidates (the tuner's, the repack kernels, a TILE_AUTOTUNE
 * kernel's choice) leave them alone. */
static tile_status compile(tile_context *ctx, const char *name, const char *src, size_t len,
                           const tile_compile_options *opts, bool public, tile_kernel **out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  if (public) reset_diags(ctx);
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!src) return rt_error(ctx, TILE_INVALID_ARGUMENT, "source is NULL");
  tile_compile_options co = {0};
  if (opts) co = *opts;
  if (co.ndefines && !co.defines) return rt_error(ctx, TILE_INVALID_ARGUMENT, "defines is NULL");
  /* a configuration per shape bucket is the default of the public entry points; internal
   * compiles (candidates, chosen configurations) run as compiled */
  if (public && co.device == TILE_DEVICE_CUDA && !(co.flags & (TILE_AUTOTUNE | TILE_FIXED_CONFIG | TILE_SOURCE_IR)))
    co.flags |= TILE_AUTOCONFIG;
  if (co.flags & (TILE_FIXED_CONFIG | TILE_AUTOTUNE)) co.flags &= ~(unsigned)TILE_AUTOCONFIG;
  const struct tl_target *target;
  struct tl_schedule sched;
  tile_status st = resolve_target(ctx, &co, &target, &sched);
  if (st) return st;
  char sched_text[128];
  tl_schedule_format(&sched, sched_text, sizeof sched_text);

  uint8_t key[RT_HASH_LEN];
  compile_key(key, name, src, len, &co, target ? target->name : "", sched_text);
  if (!(co.flags & TILE_NO_CACHE))
    for (uint32_t i = 0; i < ctx->kernels.n; i++) {
      tile_kernel *c = ctx->kernels.v[i];
      if (memcmp(c->key, key, sizeof key) == 0) {
        c->refs++;
        *out = c;
        return TILE_OK;
      }
    }

  return compile_new(ctx, name, src, len, &co, target, &sched, key, public, out);
}

/* The part of compile() under the out-of-memory recovery point; kept in its own function
 * so that no local of the caller is live across setjmp. */
static tile_status compile_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *cop, const struct tl_target *target,
                               const struct tl_schedule *sched, const uint8_t *key, bool public,
                               tile_kernel **out) {
  tile_compile_options co = *cop;
  tile_status st;
  jmp_buf oom;
  tile_kernel *volatile k = kernel_new(ctx, name, src, len, &oom);
  if (!k) return rt_error(ctx, TILE_NOMEM, "out of memory");
  if (setjmp(oom)) {
    kernel_free(k);
    return rt_error(ctx, TILE_NOMEM, "out of memory while compiling '%s'", name);
  }
  k->device = co.device;
  k->flags = co.flags;
  k->target = target;
  k->sched = *sched;
  snprintf(k->arch, sizeof k->arch, "%s", target ? target->name : "");
  tl_schedule_format(sched, k->sched_text, sizeof k->sched_text);
  memcpy(k->key, key, RT_HASH_LEN);
  /* the compile options, for TILE_AUTOTUNE (defines are checked for NULL by front_end) */
  k->kernel_opt = co.kernel ? arena_strdup(&k->arena, co.kernel) : NULL;
  k->defines = ARENA_NEWN(&k->arena, tile_define, co.ndefines + 1);
  for (unsigned i = 0; i < co.ndefines; i++) {
    k->defines[i].name = co.defines[i].name ? arena_strdup(&k->arena, co.defines[i].name) : NULL;
    k->defines[i].value = co.defines[i].value ? arena_strdup(&k->arena, co.defines[i].value) : NULL;
  }
  k->ndefines = co.ndefines;
  struct pass_options po = {0};
  po.verify_each = (co.flags & TILE_VERIFY_EACH) || ctx->verify_each;
  if (po.verify_each) k->flags |= TILE_VERIFY_EACH; /* the GPU pipeline too */
  st = front_end(ctx, k, &co, public, &po);
  k->arena.oom = NULL; /* the jmp_buf dies with this frame */
  if (st) {
    kernel_free(k);
    return st;
  }
  if (!(co.flags & TILE_NO_CACHE)) {
    if (!VEC_TRY_RESERVE(&ctx->cache_arena, ctx->kernels, 1)) {
      kernel_free(k);
      return rt_error(ctx, TILE_NOMEM, "out of memory while compiling '%s'", name);
    }
    ctx->kernels.v[ctx->kernels.n++] = k;
    k->refs++; /* the cache's reference */
  }
  *out = k;
  return TILE_OK;
}

TILE_API tile_status tile_compile_string(tile_context *ctx, const char *name, const char *src,
                                         size_t len, const tile_compile_options *opts,
                                         tile_kernel **out) {
  if (ctx) rt_clear_error(ctx);
  return compile(ctx, name ? name : "<string>", src, len, opts, true, out);
}

tile_status rt_compile_string(tile_context *ctx, const char *name, const char *src, size_t len,
                              const tile_compile_options *opts, bool diags, tile_kernel **out) {
  return compile(ctx, name, src, len, opts, diags, out);
}

char *rt_read_file(tile_context *ctx, const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) st.st_mode = 0; /* unknown: read as a stream */
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    errno = EISDIR;
    return NULL;
  }
  /* the size of a regular file is a hint; devices and pipes grow the buffer as they go */
  size_t cap = S_ISREG(st.st_mode) && st.st_size >= 0 && (uint64_t)st.st_size < TILE_MAX_SOURCE_BYTES
                   ? (size_t)st.st_size + 1
                   : (size_t)1 << 16;
  size_t n = 0;
  char *buf = tl_malloc(&ctx->alloc, cap + 1);
  int err = buf ? 0 : ENOMEM;
  while (!err) {
    if (n == cap) { /* grown up to one byte over the limit, which proves it too long */
      if (n > TILE_MAX_SOURCE_BYTES) {
        err = EFBIG;
        break;
      }
      size_t nc = 2 * cap < (size_t)TILE_MAX_SOURCE_BYTES + 1 ? 2 * cap : (size_t)TILE_MAX_SOURCE_BYTES + 1;
      char *nb = tl_malloc(&ctx->alloc, nc + 1);
      if (!nb) {
        err = ENOMEM;
        break;
      }
      memcpy(nb, buf, n);
      tl_free(buf);
      buf = nb;
      cap = nc;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno ? errno : EIO;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (!err && n > TILE_MAX_SOURCE_BYTES) err = EFBIG;
  if (err) {
    tl_free(buf);
    errno = err;
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

TILE_API tile_status tile_compile_file(tile_context *ctx, const char *path,
                                       const tile_compile_options *opts, tile_kernel **out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  reset_diags(ctx); /* a failed read leaves no diagnostics of an earlier compile behind */
  if (!path) return rt_error(ctx, TILE_INVALID_ARGUMENT, "path is NULL");
  size_t len = 0;
  errno = 0;
  char *src = rt_read_file(ctx, path, &len);
  if (!src && errno == ENOMEM) return rt_error(ctx, TILE_NOMEM, "out of memory reading '%s'", path);
  if (!src)
    return rt_error(ctx, TILE_IO, "cannot read '%s': %s", path,
                    errno == EFBIG ? "larger than TILE_MAX_SOURCE_BYTES (64 MiB)" : strerror(errno ? errno : EIO));
  tile_status st = compile(ctx, path, src, len, opts, true, out);
  tl_free(src);
  return st;
}

void rt_kernel_release(tile_kernel *k) {
  if (!k) return;
  if (--k->refs > 0) return;
  kernel_free(k);
}

/* ---- introspection ---- */

TILE_API const char *tile_kernel_name(const tile_kernel *k) { return k ? k->name : NULL; }
TILE_API unsigned tile_kernel_param_count(const tile_kernel *k) { return k ? k->nparams : 0; }
TILE_API const char *tile_kernel_config(const tile_kernel *k) { return k ? k->config : NULL; }
TILE_API const char *tile_kernel_tuned_config(const tile_kernel *k) {
  if (!k) return NULL;
  if (k->last_config) return k->last_config;
  return k->flags & TILE_AUTOTUNE ? NULL : k->config;
}

TILE_API tile_status tile_kernel_param(const tile_kernel *k, unsigned i, tile_param_info *out) {
  if (!k || !out || i >= k->nparams) return TILE_INVALID_ARGUMENT;
  *out = k->params[i];
  return TILE_OK;
}

TILE_API int tile_kernel_param_index(const tile_kernel *k, const char *name) {
  if (!k || !name) return -1;
  for (unsigned i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].name, name) == 0) return (int)i;
  return -1;
}

tile_status rt_kernel_get_stats(const tile_kernel *k, tile_kernel_stats *out) {
  if (!k || !out) return TILE_INVALID_ARGUMENT;
  *out = k->stats;
  return TILE_OK;
}

/* ---- tile_emit ---- */

TILE_API void tile_free(void *p) { tl_free(p); }

struct report {
  const tile_emit_options *eo;
};

static void dump_hook(void *ud, const char *pass, const char *text) {
  const tile_emit_options *eo = ud;
  if (!eo->report) return;
  char title[96];
  snprintf(title, sizeof title, "IR after %s", pass);
  eo->report(eo->report_ud, title, text);
}

static void report_times(const tile_emit_options *eo, const struct pass_options *po, struct arena *a) {
  if (!eo->report || !eo->time_passes) return;
  struct strbuf sb;
  sb_init(&sb, a);
  double total = 0;
  struct {
    const char *label;
    double ms;
  } front[] = {{"parse", po->parse_ms}, {"sema + irgen", po->lower_ms}};
  for (size_t i = 0; i < TL_ARRAY_LEN(front); i++) {
    sb_printf(&sb, "  %-28s %10.3f ms\n", front[i].label, front[i].ms);
    total += front[i].ms;
  }
  for (int p = 1; p < PASS__COUNT; p++)
    if (po->runs[p]) {
      char label[64];
      snprintf(label, sizeof label, "%s (x%u)", pass_name((enum pass_id)p), po->runs[p]);
      sb_printf(&sb, "  %-28s %10.3f ms\n", label, po->times_ms[p]);
      total += po->times_ms[p];
    }
  if (po->codegen_ms > 0) {
    sb_printf(&sb, "  %-28s %10.3f ms\n", "llvm ir + O3", po->codegen_ms);
    total += po->codegen_ms;
  }
  if (po->emit_ms > 0) {
    sb_printf(&sb, "  %-28s %10.3f ms\n", "ptx emission", po->emit_ms);
    total += po->emit_ms;
  }
  sb_printf(&sb, "  %-28s %10.3f ms\n", "total", total);
  eo->report(eo->report_ud, "time-passes", sb_str(&sb));
}

TILE_API tile_status tile_emit(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *copts, const tile_emit_options *eo,
                               char **out, size_t *out_len) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  reset_diags(ctx);
  if (!out || !eo || !src) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out, options and source are required");
  *out = NULL;
  if (out_len) *out_len = 0;
  if ((unsigned)eo->what > TILE_EMIT_PTX)
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "unknown tile_emit_options.what %d", (int)eo->what);
  if (eo->dump_after && strcmp(eo->dump_after, "all") != 0 && pass_from_name(eo->dump_after) == PASS_NONE) {
    char names[512];
    pass_names_text(names, sizeof names);
    return rt_error(ctx, TILE_INVALID_ARGUMENT, "dump-after: unknown pass '%s' (the passes are %s; or all)",
                    eo->dump_after, names);
  }
  tile_compile_options co = {0};
  if (copts) co = *copts;
  if (eo->what == TILE_EMIT_LLVM || eo->what == TILE_EMIT_PTX) co.device = TILE_DEVICE_CUDA;
  const struct tl_target *target = NULL;
  struct tl_schedule sched;
  tile_status st = resolve_target(ctx, &co, &target, &sched);
  if (st) return st;
  jmp_buf oom;
  tile_kernel *k = kernel_new(ctx, name ? name : "<string>", src, len, &oom);
  if (!k) return rt_error(ctx, TILE_NOMEM, "out of memory");
  if (setjmp(oom)) {
    kernel_free(k);
    return rt_error(ctx, TILE_NOMEM, "out of memory");
  }
  struct pass_options po = {0};
  po.verify_each = (co.flags & TILE_VERIFY_EACH) || ctx->verify_each;
  po.dump_after = eo->dump_after;
  po.dump = dump_hook;
  po.dump_ud = (void *)eo;
  po.time = eo->time_passes != 0;
  struct strbuf sb;
  sb_init(&sb, &k->arena);
  double t0 = tl_now_ms();

  struct tl_error e;
  sb_init(&e.msg, &k->arena);
  enum tl_result r = TL_OK;
  if (eo->input_is_ir) {
    struct ir_module m;
    r = tl_parse_ir_module(k->filename, src, len, &k->arena, &k->strs, &m, &e);
    po.parse_ms = tl_now_ms() - t0;
    if (!r && m.funcs.n == 0 && eo->what != TILE_EMIT_IR) { /* code for nothing: say so */
      st = rt_error(ctx, TILE_NOT_FOUND, "%s: error: the IR defines no kernel", k->filename);
      goto done;
    }
    for (uint32_t i = 0; !r && i < m.funcs.n; i++) {
      struct ir_func *f = m.funcs.v[i];
      if (eo->passes) r = tl_run_passes(f, eo->passes, &po, &e);
      if (r) break;
      if (eo->what == TILE_EMIT_IR) {
        if (i) sb_putc(&sb, '\n');
        ir_print_func(&sb, f, 0);
      } else {
        st = rt_gpu_emit(ctx, f, target, &sched, eo->what, eo, &po, &sb);
        if (st) goto done;
      }
    }
  } else if (eo->what == TILE_EMIT_AST) {
    struct tl_source ts = {k->filename, src, len, false, NULL, NULL, 0, NULL};
    struct lang_ctx *lc;
    struct ast_file *ast;
    r = tl_parse_ast(&ts, &k->arena, &k->strs, &lc, &ast, &e);
    copy_diags(ctx, lc, &k->arena);
    if (!r) lang_print_ast(&sb, ast);
  } else {
    k->target = target; /* (its `defaults` clause) */
    st = front_end(ctx, k, &co, true, &po);
    if (st) goto done;
    if (eo->what == TILE_EMIT_IR) {
      ir_print_func(&sb, k->ir, 0);
    } else {
      if (eo->passes) r = tl_run_passes(k->ir, eo->passes, &po, &e);
      if (!r) st = rt_gpu_emit(ctx, k->ir, target, &sched, eo->what, eo, &po, &sb);
      if (st) goto done;
    }
  }
  if (r) {
    st = rt_fail(ctx, r, &e);
    goto done;
  }
  report_times(eo, &po, &k->arena);
  *out = tl_malloc(&ctx->alloc, sb.len + 1);
  if (!*out) {
    st = rt_error(ctx, TILE_NOMEM, "out of memory");
    goto done;
  }
  memcpy(*out, sb_str(&sb), sb.len + 1);
  if (out_len) *out_len = sb.len;
done:
  k->arena.oom = NULL;
  kernel_free(k);
  return st;
}

TILE_API tile_status tile_kernel_get_stats(const tile_kernel *k, tile_kernel_stats *out) {
  return rt_kernel_get_stats(k, out);
}

TILE_API void tile_kernel_release(tile_kernel *k) {
  rt_kernel_release(k);
}

TILE_API tile_status tile_context_create(const tile_context_options *opts, tile_context **out) {
  return rt_context_create(opts, out);
}

TILE_API void tile_context_destroy(tile_context *ctx) {
  rt_context_destroy(ctx);
}

TILE_API const char * tile_version(void) {
  return rt_version();
}

TILE_API const char * tile_dtype_name(tile_dtype t) {
  return rt_dtype_name(t);
}

TILE_API size_t tile_dtype_size(tile_dtype t) {
  return rt_dtype_size(t);
}
