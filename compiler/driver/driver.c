/* driver.c - the compiler's stages from source to PTX (driver.h). */
#include "driver.h"

#include "smem.h"

#include <stdio.h>
#include <string.h>

static enum tl_result fail(struct tl_error *e, enum tl_result r, const char *code, const char *fmt, ...)
    TL_PRINTF(4, 5);

static enum tl_result fail(struct tl_error *e, enum tl_result r, const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&e->msg, fmt, ap);
  va_end(ap);
  e->code = code;
  e->brief = NULL;
  return r;
}

/* An error of the front end: its rendered diagnostics, and the code of the first error. */
static enum tl_result lang_fail(struct tl_error *e, enum tl_result r, const struct lang_ctx *lc) {
  const struct lang_diag *first = NULL;
  for (uint32_t i = 0; i < lang_diag_count(lc) && !first; i++)
    if (lang_diag_get(lc, i)->severity == LANG_ERROR) first = lang_diag_get(lc, i);
  fail(e, r, first ? first->code : TL_CODE_INTERNAL, "%s", lang_diag_text(lc));
  e->brief = first ? first->message : NULL;
  return r;
}

static enum tl_result ir_front_end(const struct tl_source *s, struct arena *a, struct strtab *strs,
                                   struct pass_options *po, struct tl_front_result *out, struct tl_error *e) {
  struct strbuf err;
  sb_init(&err, a);
  struct ir_module m;
  if (!ir_parse(s->name, s->text, s->len, a, strs, &m, &err))
    return fail(e, TL_ERR_PROGRAM, TL_CODE_IR, "%s", sb_str(&err));
  struct ir_func *f = NULL;
  for (uint32_t i = 0; i < m.funcs.n && !f; i++)
    if (!s->kernel || strcmp(m.funcs.v[i]->name, s->kernel) == 0) f = m.funcs.v[i];
  if (!f) return fail(e, TL_ERR_NOT_FOUND, "UNKNOWN_KERNEL", "%s: no kernel '%s'", s->name, s->kernel ? s->kernel : "");
  if (!ir_verify(f, NULL, &err)) return fail(e, TL_ERR_PROGRAM, TL_CODE_IR, "%s", sb_str(&err));
  if (!pass_pipeline_generic(f, po, &err))
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  out->f = f;
  return TL_OK;
}

static const struct lang_kernel_info *find_info(const struct ast_file *ast, const char *name) {
  for (uint32_t i = 0; ast && i < lang_kernel_count(ast); i++) {
    const struct lang_kernel_info *ki = lang_kernel_info(ast, i);
    if (strcmp(ki->name, name) == 0) return ki;
  }
  return NULL;
}

/* Whether lowering failed and every error was a violated `where` constraint. */
static bool only_constraints_failed(const struct lang_ctx *lc) {
  uint32_t errors = 0;
  for (uint32_t i = 0; i < lang_diag_count(lc); i++) {
    const struct lang_diag *d = lang_diag_get(lc, i);
    if (d->severity != LANG_ERROR) continue;
    if (!d->code || strcmp(d->code, "CONSTRAINT") != 0) return false;
    errors++;
  }
  return errors > 0;
}

/* Whether lowered IR f (a copy of it, in a) fits the shared memory of target t with the
 * default schedule and the common facts (tl_assume_common_facts). A failure to lower
 * counts as fitting: it is reported when the kernel itself is compiled. */
static bool fits_shared_memory(const struct ir_func *f0, const struct tl_target *t, struct arena *a) {
  if (!t || !t->smem_optin) return true;
  struct ir_func *f = ir_func_clone(f0, a);
  tl_assume_common_facts(f, false);
  struct pass_options po = {0};
  struct tl_error e;
  sb_init(&e.msg, a);
  struct tl_schedule sched;
  tl_schedule_default(&sched);
  if (!pass_pipeline_generic(f, &po, &e.msg) || tl_gpu_lower(f, t, &sched, &po, &e) != TL_OK) return true;
  struct ir_smem_plan plan;
  ir_smem_liveness(f, a, &plan);
  return ir_smem_top(&plan) <= t->smem_optin;
}

/* The defines, then clause `clause` of the kernel's `defaults` for s->target for the
 * parameters they leave open. False when the target has no such clause. */
static bool with_target_defaults(const struct tl_source *s, const struct ast_file *ast, struct arena *a, uint32_t clause,
                                 const struct lang_define **defs, uint32_t *n) {
  const struct lang_kernel_info *ki = NULL;
  if (!s->target) return false;
  if (s->kernel) ki = find_info(ast, s->kernel);
  else if (lang_kernel_count(ast) == 1) ki = lang_kernel_info(ast, 0);
  if (!ki || !ki->ntdefaults) return false;
  struct lang_define *out = ARENA_NEWN(a, struct lang_define, s->ndefines + ki->ntdefaults + 1);
  uint32_t m = 0;
  bool found = false;
  for (uint32_t i = 0; i < s->ndefines; i++) out[m++] = s->defines[i];
  for (uint32_t t = 0; t < ki->ntdefaults; t++) {
    const struct lang_target_default *d = &ki->tdefaults[t];
    if (strcmp(d->target, s->target) != 0 || d->clause != clause) continue;
    found = true;
    bool given = false;
    for (uint32_t i = 0; i < s->ndefines && !given; i++) given = strcmp(s->defines[i].name, d->name) == 0;
    if (!given) out[m++] = (struct lang_define){d->name, d->value};
  }
  if (!found) return false;
  *defs = out;
  *n = m;
  return true;
}

enum tl_result tl_front_end(const struct tl_source *s, struct arena *a, struct strtab *strs,
                            struct pass_options *po, struct tl_front_result *out, struct tl_error *e) {
  memset(out, 0, sizeof *out);
  e->code = e->brief = NULL;
  for (uint32_t i = 0; i < s->ndefines; i++)
    if (!s->defines[i].name || !s->defines[i].value)
      return fail(e, TL_ERR_ARGUMENT, "BAD_DEFINE", "define %u has a NULL name or value", i);
  if (s->is_ir) return ir_front_end(s, a, strs, po, out, e);
  double t0 = tl_now_ms();
  struct lang_ctx *lc = lang_ctx_new(a, strs);
  out->lang = lc;
  struct ast_file *ast = lang_parse(lc, s->name, s->text, s->len);
  if (po) po->parse_ms += tl_now_ms() - t0;
  if (lang_error_count(lc) || !ast) return lang_fail(e, TL_ERR_PROGRAM, lc);
  t0 = tl_now_ms();
  /* the target's `defaults` clauses in order, the first whose values satisfy the kernel's
   * `where` constraints (a tile that fits this head dimension) and whose kernel fits the
   * target's shared memory, else the plain defaults; each attempt in a fresh context */
  const struct lang_define *defs = s->defines;
  uint32_t ndefs = s->ndefines;
  struct ir_func *f = NULL;
  for (uint32_t clause = 0;; clause++) {
    defs = s->defines;
    ndefs = s->ndefines;
    bool tried = with_target_defaults(s, ast, a, clause, &defs, &ndefs); /* else the plain defaults */
    if (clause) {
      lc = lang_ctx_new(a, strs);
      out->lang = lc;
      ast = lang_parse(lc, s->name, s->text, s->len);
      if (!ast || lang_error_count(lc)) {
        f = NULL;
        break;
      }
    }
    f = lang_lower(lc, ast, s->kernel, defs, ndefs);
    if (!tried) break;
    bool ok = f && !lang_error_count(lc);
    if (ok ? fits_shared_memory(f, tl_target_find(s->target), a) : !only_constraints_failed(lc)) break;
  }
  if (po) po->lower_ms += tl_now_ms() - t0;
  if (!f || lang_error_count(lc))
    return lang_fail(e, s->kernel && !find_info(ast, s->kernel) ? TL_ERR_NOT_FOUND : TL_ERR_PROGRAM, lc);
  struct strbuf err;
  sb_init(&err, a);
  if (!ir_verify(f, "irgen", &err) || !pass_pipeline_generic(f, po, &err))
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  out->f = f;
  out->info = find_info(ast, f->name);
  out->defines = defs;
  out->ndefines = ndefs;
  return TL_OK;
}

enum tl_result tl_parse_ir_module(const char *name, const char *text, size_t len, struct arena *a,
                                  struct strtab *strs, struct ir_module *out, struct tl_error *e) {
  e->code = e->brief = NULL;
  struct strbuf err;
  sb_init(&err, a);
  if (!ir_parse(name, text, len, a, strs, out, &err)) return fail(e, TL_ERR_PROGRAM, TL_CODE_IR, "%s", sb_str(&err));
  for (uint32_t i = 0; i < out->funcs.n; i++)
    if (!ir_verify(out->funcs.v[i], NULL, &err)) return fail(e, TL_ERR_PROGRAM, TL_CODE_IR, "%s", sb_str(&err));
  return TL_OK;
}

enum tl_result tl_parse_ast(const struct tl_source *s, struct arena *a, struct strtab *strs,
                            struct lang_ctx **lang, struct ast_file **ast, struct tl_error *e) {
  e->code = e->brief = NULL;
  *lang = lang_ctx_new(a, strs);
  *ast = lang_parse(*lang, s->name, s->text, s->len);
  return lang_error_count(*lang) || !*ast ? lang_fail(e, TL_ERR_PROGRAM, *lang) : TL_OK;
}

enum tl_result tl_run_passes(struct ir_func *f, const char *list, struct pass_options *po, struct tl_error *e) {
  e->code = e->brief = NULL;
  struct strbuf err;
  sb_init(&err, e->msg.arena);
  if (!pass_run_list(list, f, po, &err)) return fail(e, TL_ERR_PROGRAM, TL_CODE_IR, "%s", sb_str(&err));
  return TL_OK;
}

void tl_assume_common_facts(struct ir_func *f, bool unaligned) {
  for (uint32_t i = 0; i < f->params.n; i++) {
    struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_TENSOR) {
      int rank = ir_vtype(f, p->value)->rank;
      p->facts.align = 16; /* any allocator's base pointers */
      for (int d = 0; d < rank; d++) {
        p->facts.stride1[d] = d == rank - 1;
        p->facts.div16[d] = !unaligned && d != rank - 1;
      }
    } else if (p->kind == IR_PARAM_SHAPE) {
      p->div16 = !unaligned;
    }
  }
}

enum tl_result tl_gpu_lower(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                            struct pass_options *po, struct tl_error *e) {
  e->code = e->brief = NULL;
  struct strbuf err;
  sb_init(&err, e->msg.arena);
  /* IR text of a cluster kernel (cluster-rows' output) for a target without clusters */
  if (f->cluster > 1 && !tl_has(f->stage == IR_STAGE_GENERIC ? target : f->target, TL_FEAT_CLUSTER))
    return fail(e, TL_ERR_UNSUPPORTED, TL_CODE_IR,
                "%s: error: kernel '%s' runs its programs as clusters of %u CTAs (cluster=%u), which the target %s "
                "does not have (sm_90 or newer)",
                f->file ? f->file : f->name, f->name, (unsigned)f->cluster, (unsigned)f->cluster,
                target ? target->name : "?");
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || !op->nres) continue;
    const struct ir_type *t = ir_vtype(f, op->res);
    /* atomics the target's instruction set lacks */
    if (op->code == IR_ATOMIC && t->dtype == DT_BF16 && !tl_has(target, TL_FEAT_ATOM_BF16))
      return fail(e, TL_ERR_UNSUPPORTED, TL_CODE_DTYPE,
                  "%s:%u:%u: error: atomic add on bf16 needs sm_90 or newer, the target is %s (use f32 or f16; "
                  "kernel '%s')",
                  f->file ? f->file : f->name, op->loc.line, op->loc.col, target ? target->name : "?", f->name);
    /* a tile too large for the warps holding it: refused before LLVM unrolls it */
    if (f->stage != IR_STAGE_GENERIC) continue;
    int64_t per_thread = ir_type_numel(t) / (32 * f->warps);
    if (t->kind == IR_TY_TILE && t->rank > 0 && per_thread > TL_MAX_VALUE_REGS)
      return fail(e, TL_ERR_UNSUPPORTED, TL_CODE_REGISTERS,
                  "%s:%u:%u: error: a tile of %lld elements needs %lld registers per thread with %d warps (at "
                  "most %d): use more warps or a smaller tile (kernel '%s')",
                  f->file ? f->file : f->name, op->loc.line, op->loc.col, (long long)ir_type_numel(t),
                  (long long)per_thread, f->warps, TL_MAX_VALUE_REGS, f->name);
  }
  if (f->stage == IR_STAGE_GENERIC && !pass_pipeline_gpu(f, target, sched, po, &err))
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  if (f->stage == IR_STAGE_GPU && !pass_run(PASS_SMEM_ALLOC, f, po, &err)) /* GPU IR text, not yet placed */
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  if (!ir_verify(f, "gpu pipeline", &err))
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  return TL_OK;
}

enum tl_result tl_codegen(struct ir_func *f, enum cg_output out, struct pass_options *po, struct arena *a,
                          struct cg_result *res, struct tl_error *e) {
  e->code = e->brief = NULL;
  struct strbuf err;
  sb_init(&err, a);
  if (!cg_compile(f, out, a, res, &err))
    return fail(e, TL_ERR_INTERNAL, TL_CODE_INTERNAL, "internal compiler error: %s", sb_str(&err));
  if (po && po->time) {
    po->codegen_ms += res->llvm_ms;
    po->emit_ms += res->emit_ms;
  }
  return TL_OK;
}

enum tl_result tl_compile_gpu(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                              enum cg_output out, struct pass_options *po, struct arena *a, struct cg_result *res,
                              struct tl_error *e) {
  enum tl_result r = tl_gpu_lower(f, target, sched, po, e);
  if (r) return r;
  /* buffers that alone exceed the target's shared memory (codegen's scratch only adds to
   * them) make a kernel that can never launch: refused here, with the status the launch,
   * AOT and the tuner give one after code generation, before LLVM spends seconds on it (a
   * `stages=16` loop of element-wise copies: 17 s, PERF.md 106) */
  const struct tl_target *t = f->target ? f->target : target;
  if (t && t->smem_optin) {
    struct ir_smem_plan plan;
    ir_smem_liveness(f, a, &plan);
    unsigned top = ir_smem_top(&plan);
    if (top > t->smem_optin) {
      const struct ir_op *deepest = NULL; /* the loop with the most stages: where to look */
      for (uint32_t i = 1; i < f->ops.n; i++)
        if (f->ops.v[i].block && f->ops.v[i].code == IR_FOR && f->ops.v[i].i[0] > 1 &&
            (!deepest || f->ops.v[i].i[0] > deepest->i[0]))
          deepest = &f->ops.v[i];
      struct ir_loc l = deepest ? deepest->loc : f->loc;
      char stages[48] = "";
      if (deepest) snprintf(stages, sizeof stages, " (this loop keeps %lld stages)", (long long)deepest->i[0]);
      return fail(e, TL_ERR_UNSUPPORTED, TL_CODE_SMEM,
                  "%s:%u:%u: error: kernel '%s' needs %u bytes of shared memory per block for its buffers%s; %s "
                  "allows %u: fewer stages or smaller tiles fit",
                  f->file ? f->file : f->name, l.line, l.col, f->name, top, stages, t->name, t->smem_optin);
    }
  }
  return tl_codegen(f, out, po, a, res, e);
}
