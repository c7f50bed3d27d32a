/* lang.c - the front end's entry points (lang.h): context, parse, kernel descriptions and
 * lowering of one specialization.
 *
 * lang_parse scans and parses a buffer into an AST, then runs the parse-time declaration
 * checks (file constants, kernel headers), so lang_kernel_info can describe every kernel's
 * parameters to the runtime and the autotuner before anything is specialized.
 *
 * lang_lower picks the kernel, specializes it with the overrides, checks it and lowers it to
 * Tile IR, then runs the IR verifier: IR that fails verification is an internal error, never
 * handed on. A file with syntax errors is still checked (more diagnostics in one run) but
 * never lowered; names that may be missing because of a syntax error are not reported. */
#include <string.h>

#include "lex.h"
#include "sema.h"

struct lang_ctx *lang_ctx_new(struct arena *a, struct strtab *strs) {
  struct lang_ctx *c = ARENA_NEW(a, struct lang_ctx);
  c->arena = a;
  c->strs = strs;
  return c;
}

struct ast_file *lang_parse(struct lang_ctx *c, const char *filename, const char *src,
                            size_t len) {
  struct ast_file *f = ARENA_NEW(c->arena, struct ast_file);
  f->name = arena_strdup(c->arena, filename ? filename : "<input>");
  if (!src) len = 0;
  /* The diagnostics engine quotes source lines, so it keeps its own copy of the text. */
  char *copy = arena_strndup(c->arena, src ? src : "", len);
  f->file = lang_add_source(c, f->name, copy, len);

  uint32_t errors_before = c->nerrors;
  struct lex_state lex;
  memset(&lex, 0, sizeof lex);
  lex.ctx = c;
  lex.strs = c->strs;
  lex.file = f->file;
  lex.line = 1;
  lex.col = 1;
  struct ast_builder b = {c, f, false};
  if (len > UINT32_MAX / 2) {
    lang_error(c, lang_loc_none(f->file), D_NESTING, "the file is too large (at most 2 GiB)");
  } else {
    lex_run_parser(&lex, &b, copy, len);
  }
  f->syntax_errors = c->nerrors - errors_before;
  sema_check_file(c, f);
  return f;
}

uint32_t lang_kernel_count(const struct ast_file *f) {
  return f && f->decls ? f->decls->kernels.n : 0;
}

const struct lang_kernel_info *lang_kernel_info(const struct ast_file *f, uint32_t i) {
  if (!f || !f->decls || i >= f->decls->kernels.n) return NULL;
  return &f->decls->kernels.v[i].info;
}

/* "a, b, c" for messages. */
static const char *kernel_names(struct lang_ctx *c, const struct sema_file *d) {
  struct strbuf sb;
  sb_init(&sb, c->arena);
  for (uint32_t i = 0; i < d->kernels.n; i++) {
    if (i) sb_puts(&sb, ", ");
    sb_puts(&sb, d->kernels.v[i].k->name);
  }
  return sb_str(&sb);
}

struct ir_func *lang_lower(struct lang_ctx *c, struct ast_file *f, const char *kernel,
                           const struct lang_define *defs, uint32_t ndefs) {
  if (!f || !f->decls) return NULL;
  struct sema_file *d = f->decls;
  struct lang_loc nowhere = lang_loc_none(f->file);
  if (d->kernels.n == 0) {
    if (f->syntax_errors == 0) lang_error(c, nowhere, D_NO_KERNEL, "the file defines no kernel");
    return NULL;
  }
  struct sema_kernel_decl *kd = NULL;
  if (!kernel) {
    if (d->kernels.n > 1) {
      lang_error(c, nowhere, D_AMBIGUOUS_KERNEL, "the file has kernels %s; choose one with -k",
                 kernel_names(c, d));
      return NULL;
    }
    kd = &d->kernels.v[0];
  } else {
    for (uint32_t i = 0; i < d->kernels.n; i++)
      if (strcmp(d->kernels.v[i].k->name, kernel) == 0) kd = &d->kernels.v[i];
    if (!kd) {
      lang_error(c, nowhere, D_UNKNOWN_KERNEL, "no kernel named `%s` (the file has: %s)", kernel,
                 kernel_names(c, d));
      return NULL;
    }
  }
  if (!kd->ok) return NULL; /* its header had errors, already reported by lang_parse */

  uint32_t errors_before = c->nerrors;
  struct sema s;
  bool ok = sema_kernel(&s, c, f, kd, defs, ndefs);
  if (!ok || c->nerrors != errors_before || f->syntax_errors || d->errors) return NULL;

  struct ir_func *fn = irgen_kernel(&s);
  if (!fn) return NULL;
  struct strbuf err;
  sb_init(&err, c->arena);
  if (!ir_verify(fn, "irgen", &err)) {
    lang_internal_error(c, kd->node->loc2, "the IR generated for kernel `%s` fails verification:\n%s",
                        kd->k->name, sb_str(&err));
    return NULL;
  }
  return fn;
}
