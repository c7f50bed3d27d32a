/* api.c - contexts, errors, diagnostics, compiling, kernel introspection and tile_emit.
 *
 * Compiling runs the front end and the machine-independent pipeline once per (source,
 * kernel, overrides, device, arch, flags); the result is cached in the context by a hash of
 * all of these and the compiler version. Target code for CUDA is generated later, per
 * argument specialization (gpu.c). Allocation failure anywhere below an entry point
 * longjmps back to it (util.h) and becomes TILE_NOMEM with nothing leaked: all compile
 * memory lives in the kernel's arena.                                                    */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "lang.h"
#include "readfile.h"
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
TILE_API const char *tile_dtype_name(tile_dtype t) {
  return (unsigned)t < TILE_DTYPE__COUNT && t != TILE_DTYPE_NONE ? ir_dtype_name((ir_dtype)t) : "?";
}
TILE_API size_t tile_dtype_size(tile_dtype t) {
  return (unsigned)t < TILE_DTYPE__COUNT && t != TILE_DTYPE_NONE ? (size_t)ir_dtype_bytes((ir_dtype)t) : 0;
}
TILE_API const char *tile_version(void) { return "tile " TILE_VERSION " (LLVM " TILE_LLVM_VERSION ")"; }

void rt_clear_error(tile_context *ctx) {
  if (ctx) ctx->errmsg[0] = 0;
}

tile_status rt_error(tile_context *ctx, tile_status st, const char *fmt, ...) {
  if (!ctx) return st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
  va_end(ap);
  return st;
}

TILE_API const char *tile_errmsg(const tile_context *ctx) { return ctx ? ctx->errmsg : "no context"; }

/* ---- contexts ---- */

TILE_API tile_status tile_context_create(const tile_context_options *opts, tile_context **out) {
  if (!out) return TILE_INVALID_ARGUMENT;
  *out = NULL;
  tile_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return TILE_NOMEM;
  ctx->alloc = tl_default_alloc;
  if (opts) {
    ctx->cpu_threads = opts->cpu_threads;
    ctx->cuda_ordinal = opts->cuda_device;
  }
  arena_init(&ctx->diag_arena, &ctx->alloc, NULL);
  arena_init(&ctx->cache_arena, &ctx->alloc, NULL);
  /* the option, else $TILE_CACHE_DIR, else the XDG cache directory; "" = off */
  ctx->cache_dir = rt_cache_resolve_dir(opts ? opts->cache_dir : NULL);
  ctx->repack_mode = rt_repack_mode_from_env();
  /* Debug and sanitizer builds verify after every pass (TILE_VERIFY_EACH_DEFAULT, set by
   * CMake); elsewhere the environment turns it on, read once here */
#ifdef TILE_VERIFY_EACH_DEFAULT
  ctx->verify_each = true;
#else
  ctx->verify_each = getenv("TILE_VERIFY_EACH") != NULL;
#endif
  if (!ctx->cache_dir) {
    free(ctx);
    return TILE_NOMEM;
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
  arena_free(&ctx->diag_arena);
  arena_free(&ctx->cache_arena);
  free(ctx->cache_dir);
  free(ctx);
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
  free(k);
  if (--ctx->live_kernels == 0 && ctx->destroyed) context_free(ctx);
}

/* Every reference is counted: the caller's, the in-memory cache's (one per entry of
 * ctx->kernels), a TILE_AUTOTUNE kernel's on each tuned kernel, the repack slots'. The
 * context drops its own references here; kernels the caller still holds keep it (and
 * its CUDA context) alive until they are released. */
TILE_API void tile_context_destroy(tile_context *ctx) {
  if (!ctx || ctx->destroyed) return;
  ctx->destroyed = true;
  ctx->live_kernels++; /* hold the context while the references below are dropped */
  for (int r = 0; r < 2; r++)
    for (int d = 0; d < 3; d++) {
      tile_kernel_release(ctx->repack_kernels[r][d]);
      ctx->repack_kernels[r][d] = NULL;
    }
  for (uint32_t i = 0; i < ctx->kernels.n; i++) tile_kernel_release(ctx->kernels.v[i]);
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

static void copy_diags(tile_context *ctx, const struct lang_ctx *lc) {
  for (uint32_t i = 0; i < lang_diag_count(lc); i++) {
    const struct lang_diag *d = lang_diag_get(lc, i);
    tile_diagnostic td = {
        .severity = d->severity == LANG_ERROR ? TILE_SEV_ERROR
                    : d->severity == LANG_WARNING ? TILE_SEV_WARNING
                                                  : TILE_SEV_NOTE,
        .file = arena_strdup(&ctx->diag_arena, d->file ? d->file : ""),
        .line = d->line,
        .col = d->col,
        .len = d->len,
        .message = arena_strdup(&ctx->diag_arena, d->message ? d->message : ""),
    };
    VEC_PUSH(&ctx->diag_arena, ctx->diags, td);
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
static void describe_kernel(tile_kernel *k, const struct lang_kernel_info *ki,
                            const tile_compile_options *co) {
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
    for (uint32_t o = 1; o < f->ops.n && pi->is_tensor; o++)
      if (f->ops.v[o].block && f->ops.v[o].code == IR_LOAD && f->ops.v[o].args[0] == p->value) pi->is_read = 1;
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
    for (unsigned d = 0; d < co->ndefines; d++)
      if (co->defines[d].name && strcmp(co->defines[d].name, cp->name) == 0) val = co->defines[d].value;
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

static const struct lang_kernel_info *find_info(const struct ast_file *ast, const char *name,
                                                const char *lowered) {
  for (uint32_t i = 0; i < lang_kernel_count(ast); i++) {
    const struct lang_kernel_info *ki = lang_kernel_info(ast, i);
    if (strcmp(ki->name, name ? name : lowered) == 0) return ki;
  }
  return NULL;
}

/* Runs the front end and the generic pipeline into k. On failure the context's message
 * and diagnostics are set. */
static tile_status ir_front_end(tile_context *ctx, tile_kernel *k, const tile_compile_options *co,
                                struct pass_options *po) {
  struct strbuf err;
  sb_init(&err, &k->arena);
  struct ir_module m;
  if (!ir_parse(k->filename, k->src, k->src_len, &k->arena, &k->strs, &m, &err))
    return rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
  struct ir_func *f = NULL;
  for (uint32_t i = 0; i < m.funcs.n; i++)
    if (!co->kernel || strcmp(m.funcs.v[i]->name, co->kernel) == 0) f = f ? f : m.funcs.v[i];
  if (!f) return rt_error(ctx, TILE_NOT_FOUND, "%s: no kernel '%s'", k->filename, co->kernel ? co->kernel : "");
  if (!ir_verify(f, NULL, &err)) return rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
  if (!pass_pipeline_generic(f, po, &err))
    return rt_error(ctx, TILE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  k->ir = f;
  k->name = f->name;
  describe_kernel(k, NULL, co);
  return TILE_OK;
}

static tile_status front_end(tile_context *ctx, tile_kernel *k, const tile_compile_options *co,
                             struct ast_file **ast_out, struct pass_options *po) {
  if (co->flags & TILE_SOURCE_IR) return ir_front_end(ctx, k, co, po);
  double t0 = tl_now_ms();
  struct lang_ctx *lc = lang_ctx_new(&k->arena, &k->strs);
  struct ast_file *ast = lang_parse(lc, k->filename, k->src, k->src_len);
  if (po) po->parse_ms += tl_now_ms() - t0;
  if (ast_out) *ast_out = ast;
  if (lang_error_count(lc) || !ast) {
    copy_diags(ctx, lc);
    return rt_error(ctx, TILE_COMPILE, "%s", lang_diag_text(lc));
  }
  struct lang_define *defs = ARENA_NEWN(&k->arena, struct lang_define, co->ndefines + 1);
  for (unsigned i = 0; i < co->ndefines; i++) {
    if (!co->defines[i].name || !co->defines[i].value)
      return rt_error(ctx, TILE_INVALID_ARGUMENT, "define %u has a NULL name or value", i);
    defs[i].name = co->defines[i].name;
    defs[i].value = co->defines[i].value;
  }
  t0 = tl_now_ms();
  struct ir_func *f = lang_lower(lc, ast, co->kernel, defs, co->ndefines);
  if (po) po->lower_ms += tl_now_ms() - t0;
  if (!f || lang_error_count(lc)) {
    copy_diags(ctx, lc);
    bool notfound = co->kernel && !find_info(ast, co->kernel, "");
    return rt_error(ctx, notfound ? TILE_NOT_FOUND : TILE_COMPILE, "%s", lang_diag_text(lc));
  }
  copy_diags(ctx, lc); /* warnings */
  struct strbuf err;
  sb_init(&err, &k->arena);
  if (!ir_verify(f, "irgen", &err))
    return rt_error(ctx, TILE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  if (!pass_pipeline_generic(f, po, &err))
    return rt_error(ctx, TILE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  k->ir = f;
  k->name = f->name;
  describe_kernel(k, find_info(ast, NULL, f->name), co);
  return TILE_OK;
}

static tile_kernel *kernel_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               jmp_buf *oom) {
  tile_kernel *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->ctx = ctx;
  k->refs = 1;
  ctx->live_kernels++;
  arena_init(&k->arena, &ctx->alloc, oom);
  strtab_init(&k->strs, &k->arena);
  k->filename = arena_strdup(&k->arena, name);
  char *copy = arena_alloc(&k->arena, len + 1);
  memcpy(copy, src, len);
  k->src = copy;
  k->src_len = len;
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
      return rt_error(ctx, TILE_UNSUPPORTED, "unknown target architecture '%s' (known: %s)", co->arch,
                      tl_target_names());
    return TILE_OK;
  }
  if (!rt_cuda_ready(ctx)) return TILE_NO_DRIVER;
  *target = ctx->dev_target;
  return TILE_OK;
}

static tile_status compile_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *cop, const struct tl_target *target,
                               const struct tl_schedule *sched, const uint8_t *key, tile_kernel **out);

static tile_status compile(tile_context *ctx, const char *name, const char *src, size_t len,
                           const tile_compile_options *opts, tile_kernel **out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  reset_diags(ctx);
  if (!out) return rt_error(ctx, TILE_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!src) return rt_error(ctx, TILE_INVALID_ARGUMENT, "source is NULL");
  tile_compile_options co = {0};
  if (opts) co = *opts;
  if (co.ndefines && !co.defines) return rt_error(ctx, TILE_INVALID_ARGUMENT, "defines is NULL");
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

  return compile_new(ctx, name, src, len, &co, target, &sched, key, out);
}

/* The part of compile() under the out-of-memory recovery point; kept in its own function
 * so that no local of the caller is live across setjmp. */
static tile_status compile_new(tile_context *ctx, const char *name, const char *src, size_t len,
                               const tile_compile_options *cop, const struct tl_target *target,
                               const struct tl_schedule *sched, const uint8_t *key, tile_kernel **out) {
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
  st = front_end(ctx, k, &co, NULL, &po);
  k->arena.oom = NULL; /* the jmp_buf dies with this frame */
  if (st) {
    kernel_free(k);
    return st;
  }
  if (!(co.flags & TILE_NO_CACHE)) {
    VEC_PUSH(&ctx->cache_arena, ctx->kernels, k);
    k->refs++; /* the cache's reference */
  }
  *out = k;
  return TILE_OK;
}

TILE_API tile_status tile_compile_string(tile_context *ctx, const char *name, const char *src,
                                         size_t len, const tile_compile_options *opts,
                                         tile_kernel **out) {
  return compile(ctx, name ? name : "<string>", src, len, opts, out);
}

char *rt_read_file(const char *path, size_t *len) { return tl_read_file(path, TILE_MAX_SOURCE_BYTES, len); }

TILE_API tile_status tile_compile_file(tile_context *ctx, const char *path,
                                       const tile_compile_options *opts, tile_kernel **out) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  reset_diags(ctx); /* a failed read leaves no diagnostics of an earlier compile behind */
  if (!path) return rt_error(ctx, TILE_INVALID_ARGUMENT, "path is NULL");
  size_t len = 0;
  errno = 0;
  char *src = rt_read_file(path, &len);
  if (!src)
    return rt_error(ctx, TILE_IO, "cannot read '%s': %s", path,
                    errno == EFBIG ? "larger than TILE_MAX_SOURCE_BYTES (64 MiB)" : strerror(errno ? errno : EIO));
  tile_status st = compile(ctx, path, src, len, opts, out);
  free(src);
  return st;
}

TILE_API void tile_kernel_release(tile_kernel *k) {
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

TILE_API tile_status tile_kernel_get_stats(const tile_kernel *k, tile_kernel_stats *out) {
  if (!k || !out) return TILE_INVALID_ARGUMENT;
  *out = k->stats;
  return TILE_OK;
}

/* ---- tile_emit ---- */

TILE_API void tile_free(void *p) { free(p); }

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
  struct strbuf sb, err;
  sb_init(&sb, &k->arena);
  sb_init(&err, &k->arena);
  double t0 = tl_now_ms();

  if (eo->input_is_ir) {
    struct ir_module m;
    if (!ir_parse(k->filename, src, len, &k->arena, &k->strs, &m, &err)) {
      st = rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
      goto done;
    }
    po.parse_ms = tl_now_ms() - t0;
    for (uint32_t i = 0; i < m.funcs.n; i++) {
      struct ir_func *f = m.funcs.v[i];
      if (!ir_verify(f, NULL, &err)) {
        st = rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
        goto done;
      }
      if (eo->passes && !pass_run_list(eo->passes, f, &po, &err)) {
        st = rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
        goto done;
      }
      if (eo->what == TILE_EMIT_IR) {
        if (i) sb_putc(&sb, '\n');
        ir_print_func(&sb, f, 0);
      } else {
        st = rt_gpu_emit(ctx, f, target, &sched, eo->what, eo, &po, &sb);
        if (st) goto done;
      }
    }
  } else if (eo->what == TILE_EMIT_AST) {
    struct lang_ctx *lc = lang_ctx_new(&k->arena, &k->strs);
    struct ast_file *ast = lang_parse(lc, k->filename, src, len);
    copy_diags(ctx, lc);
    if (lang_error_count(lc) || !ast) {
      st = rt_error(ctx, TILE_COMPILE, "%s", lang_diag_text(lc));
      goto done;
    }
    lang_print_ast(&sb, ast);
  } else {
    st = front_end(ctx, k, &co, NULL, &po);
    if (st) goto done;
    if (eo->what == TILE_EMIT_IR) {
      ir_print_func(&sb, k->ir, 0);
    } else {
      if (eo->passes && !pass_run_list(eo->passes, k->ir, &po, &err)) {
        st = rt_error(ctx, TILE_COMPILE, "%s", sb_str(&err));
        goto done;
      }
      st = rt_gpu_emit(ctx, k->ir, target, &sched, eo->what, eo, &po, &sb);
      if (st) goto done;
    }
  }
  report_times(eo, &po, &k->arena);
  *out = malloc(sb.len + 1);
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
