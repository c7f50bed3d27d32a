/* sema_decl.c - declarations: file-level constants, kernel headers and specialization.
 *
 * At parse time (sema_check_file) every file constant is evaluated in file order (a constant
 * may use the ones before it), and every kernel header is checked once with its default
 * compile-time values: candidate lists, parameter dtypes, `out`, dimensions and shape
 * symbols. The facts that do not depend on a specialization (kinds, defaults, candidates,
 * parameter text) become the lang_kernel_info the runtime and the tuner read.
 *
 * At lower time sema_apply_defines turns the -D overrides into compile-time values and
 * sema_header declares the kernel's names again under those values, so dimensions and dtypes
 * that come from compile-time parameters take the overridden values.
 *
 * A dimension written as a name is, in order: an int compile-time parameter or file constant
 * (a fixed size, checked at launch), or else a shape symbol (a run-time size; the same symbol
 * in several places states that those sizes are equal). A name that is already something
 * else (a parameter, a string parameter) cannot be a dimension. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "sema.h"
#include "target.h"

static bool lang_dtype_name(const char *s, ir_dtype *out) {
  static const ir_dtype names[] = {DT_F32, DT_F16, DT_BF16, DT_I32, DT_U32, DT_BOOL,
                                   DT_I64, DT_I8,  DT_F8E4M3, DT_F8E5M2};
  for (size_t i = 0; i < TL_ARRAY_LEN(names); i++)
    if (strcmp(s, ir_dtype_name(names[i])) == 0) {
      *out = names[i];
      return true;
    }
  return false;
}

static const char *kind_name(enum lang_cparam_kind k) {
  switch (k) {
  case LANG_CP_INT: return "an int";
  case LANG_CP_BOOL: return "a bool";
  case LANG_CP_STR: return "a string";
  case LANG_CP_DTYPE: return "a dtype";
  }
  return "?";
}

/* Reads one candidate or default value. Returns false (after a diagnostic) if it is not a
 * literal of a supported kind. */
static bool cparam_value(struct lang_ctx *c, struct ast_node *n, struct lang_cvalue *v) {
  memset(v, 0, sizeof *v);
  switch (n->kind) {
  case AST_INT:
    if (n->ival > INT32_MAX)
      return lang_error(c, n->loc, D_INT_OVERFLOW,
                        "an int compile-time parameter is an i32: %lld does not fit (the largest is "
                        "2147483647)",
                        (long long)n->ival);
    v->kind = LANG_CP_INT;
    v->i = n->ival;
    return true;
  case AST_UNARY:
    if (n->a->kind == AST_INT) {
      v->kind = LANG_CP_INT;
      v->i = -n->a->ival;
      return true;
    }
    if (n->a->kind == AST_ERROR) return false;
    /* a negative float */
    /* fallthrough */
  case AST_FLOAT:
    return lang_error(c, n->loc, D_CPARAM_FLOAT,
                      "compile-time parameters are ints, bools, strings or dtypes; for a float "
                      "use a run-time scalar parameter (e.g. `eps: f32`) or a file constant");
  case AST_BOOL: v->kind = LANG_CP_BOOL; v->i = n->ival; return true;
  case AST_STRING: v->kind = LANG_CP_STR; v->s = n->sval; return true;
  case AST_DTYPE: v->kind = LANG_CP_DTYPE; v->dt = n->dt; return true;
  case AST_NAME:
    return lang_error(c, n->loc, D_UNKNOWN_DTYPE,
                      "unknown dtype `%s` (candidate values are literals: integers, true/false, "
                      "strings or the dtypes f32, f16, bf16, i32, u32, bool, i64, i8, f8e4m3, f8e5m2)",
                      n->name);
  default: return false;
  }
}

static const char *cvalue_text(struct lang_ctx *c, const struct lang_cvalue *v) {
  switch (v->kind) {
  case LANG_CP_INT: return arena_printf(c->arena, "%lld", (long long)v->i);
  case LANG_CP_BOOL: return v->i ? "true" : "false";
  case LANG_CP_STR: return arena_printf(c->arena, "\"%s\"", v->s);
  case LANG_CP_DTYPE: return ir_dtype_name(v->dt);
  }
  return "?";
}

static void check_cparams(struct lang_ctx *c, struct sema_kernel_decl *kd) {
  struct ast_kernel *k = kd->k;
  for (uint32_t p = 0; p < k->cparams.n; p++) {
    struct ast_node *n = k->cparams.v[p];
    struct sema_cparam cp;
    memset(&cp, 0, sizeof cp);
    cp.node = n;
    cp.name = n->name;
    cp.ok = true;
    bool have_kind = false;
    struct ast_node *first = NULL;
    /* `NAME: bool`, `NAME: int`, `NAME: str` and `NAME: dtype` name the kind instead of
     * listing candidates. A bool parameter's candidates are false and true. */
    uint32_t start = 0;
    if (n->list.n == 1) {
      struct ast_node *only = n->list.v[0];
      static const char *const kinds[] = {"int", "bool", "str", "dtype"};
      int kind = -1;
      if (only->kind == AST_DTYPE && only->dt == DT_BOOL) kind = LANG_CP_BOOL;
      for (int q = 0; q < 4 && only->kind == AST_NAME; q++)
        if (strcmp(only->name, kinds[q]) == 0) kind = q;
      if (kind >= 0) {
        cp.kind = (enum lang_cparam_kind)kind;
        have_kind = true;
        first = only;
        start = 1;
        if (kind == LANG_CP_BOOL) {
          struct lang_cvalue f = {LANG_CP_BOOL, 0, NULL, DT_NONE}, t = {LANG_CP_BOOL, 1, NULL, DT_NONE};
          VEC_PUSH(c->arena, cp.cands, f);
          VEC_PUSH(c->arena, cp.cands, t);
        } else if (!n->a) {
          lang_error(c, n->loc2, D_CPARAM_KIND_MIX,
                     "`%s: %s` declares the kind only, so it needs a default: `%s: %s = ...`",
                     n->name, kinds[kind], n->name, kinds[kind]);
          cp.ok = false;
        }
      }
    }
    for (uint32_t v = start; v <= n->list.n; v++) {
      struct ast_node *vn = v < n->list.n ? n->list.v[v] : n->a;
      if (!vn) continue;
      struct lang_cvalue val;
      if (!cparam_value(c, vn, &val)) {
        cp.ok = false;
        continue;
      }
      if (!have_kind) {
        cp.kind = val.kind;
        have_kind = true;
        first = vn;
      } else if (val.kind != cp.kind) {
        if (start)
          lang_error(c, vn->loc, D_CPARAM_KIND_MIX, "`%s` is declared %s, but its default %s is %s",
                     n->name, lang_loc_text(c, first->loc), cvalue_text(c, &val), kind_name(val.kind));
        else
          lang_error(c, vn->loc, D_CPARAM_KIND_MIX,
                     "the values of `%s` must all be of one kind, but %s is %s and %s is %s",
                     n->name, cvalue_text(c, &val), kind_name(val.kind),
                     lang_loc_text(c, first->loc), kind_name(cp.kind));
        cp.ok = false;
        continue;
      }
      if (v < n->list.n)
        VEC_PUSH(c->arena, cp.cands, val);
      else
        cp.def = val;
    }
    if (!n->a && cp.cands.n) cp.def = cp.cands.v[0];
    if (!cp.ok) kd->ok = false;
    VEC_PUSH(c->arena, kd->cparams, cp);
  }
}

/* `defaults TARGET(NAME = VALUE, ...)`: a known target (one or more clauses each, numbered
 * in order per target), each NAME a compile-time parameter of the kernel (once per clause),
 * each VALUE of its kind. Any value of the kind is accepted, as for a define (the
 * candidates only guide the tuner). */
static void check_tdefaults(struct lang_ctx *c, struct sema_kernel_decl *kd) {
  struct ast_kernel *k = kd->k;
  for (uint32_t t = 0; t < k->tdefaults.n; t++) {
    struct ast_node *tn = k->tdefaults.v[t];
    bool ok = true;
    if (!tl_target_find(tn->name)) {
      lang_error(c, tn->loc2, D_TARGET_DEFAULTS, "`defaults %s(...)`: unknown target `%s` (the targets are %s)", tn->name,
                 tn->name, tl_target_names());
      ok = false;
    }
    uint32_t clause = 0;
    for (uint32_t u = 0; u < t; u++) clause += strcmp(k->tdefaults.v[u]->name, tn->name) == 0;
    for (uint32_t e = 0; e < tn->list.n; e++) {
      struct ast_node *en = tn->list.v[e];
      const struct sema_cparam *cp = NULL;
      for (uint32_t p = 0; p < kd->cparams.n; p++)
        if (strcmp(kd->cparams.v[p].name, en->name) == 0) cp = &kd->cparams.v[p];
      bool twice = false;
      for (uint32_t f = 0; f < e; f++) twice |= strcmp(tn->list.v[f]->name, en->name) == 0;
      struct lang_cvalue val;
      if (!cp) {
        lang_error(c, en->loc2, D_TARGET_DEFAULTS, "`defaults %s(...)`: kernel `%s` has no compile-time parameter `%s`",
                   tn->name, k->name, en->name);
      } else if (twice) {
        lang_error(c, en->loc2, D_TARGET_DEFAULTS, "`defaults %s(...)` gives `%s` twice", tn->name, en->name);
      } else if (!cparam_value(c, en->a, &val)) {
        /* (reported) */
      } else if (val.kind != cp->kind) {
        lang_error(c, en->a->loc, D_TARGET_DEFAULTS, "`%s` is %s, but `defaults %s(...)` gives it %s, %s", en->name,
                   kind_name(cp->kind), tn->name, cvalue_text(c, &val), kind_name(val.kind));
      } else if (ok) {
        /* as define text: a string without its quotes, as tile_kernel_config shows it */
        struct lang_target_default d = {tn->name, en->name, val.kind == LANG_CP_STR ? val.s : cvalue_text(c, &val), clause};
        VEC_PUSH(c->arena, kd->tdefaults, d);
        continue;
      }
      kd->ok = false;
    }
    if (!ok) kd->ok = false;
  }
}

/* Whether another kernel of the file has a compile-time parameter `name`: a define meant for
 * that kernel is then no error for this one (one set of -D settings serves a multi-kernel
 * file); a name no kernel declares still is (a typo must not pass unnoticed). */
static bool other_kernel_has(struct sema *s, const char *name) {
  const struct sema_file *d = s->file ? s->file->decls : NULL;
  for (uint32_t i = 0; d && i < d->kernels.n; i++) {
    const struct sema_kernel_decl *o = &d->kernels.v[i];
    if (o == s->kd) continue;
    for (uint32_t p = 0; p < o->cparams.n; p++)
      if (strcmp(o->cparams.v[p].name, name) == 0) return true;
  }
  return false;
}

bool sema_apply_defines(struct sema *s, const struct lang_define *defs, uint32_t ndefs) {
  struct lang_ctx *c = s->ctx;
  struct sema_kernel_decl *kd = s->kd;
  s->cparams.n = 0;
  for (uint32_t p = 0; p < kd->cparams.n; p++) {
    struct sema_cparam *cp = &kd->cparams.v[p];
    struct sema_sym *sym = sema_new_sym(s, SYM_CPARAM, cp->name, cp->node->loc2);
    sym->is_const = true;
    sym->index = p;
    sym->cv.i = cp->def.i;
    sym->cv.s = cp->def.s;
    sym->cv.dt = cp->def.dt;
    VEC_PUSH(c->arena, s->cparams, sym);
  }
  bool ok = true;
  struct lang_loc cmdline = lang_loc_none(UINT32_MAX);
  for (uint32_t d = 0; d < ndefs; d++) {
    const char *name = defs[d].name ? defs[d].name : "";
    const char *text = defs[d].value ? defs[d].value : "";
    uint32_t p = 0;
    while (p < kd->cparams.n && strcmp(kd->cparams.v[p].name, name) != 0) p++;
    if (p == kd->cparams.n && other_kernel_has(s, name)) continue;
    if (p == kd->cparams.n) {
      struct strbuf names;
      sb_init(&names, c->arena);
      for (uint32_t q = 0; q < kd->cparams.n; q++)
        sb_printf(&names, "%s%s", q ? ", " : "", kd->cparams.v[q].name);
      ok = lang_error(c, cmdline, D_OVERRIDE_UNKNOWN,
                      "-D %s=%s: kernel `%s` has no compile-time parameter `%s` (it has: %s)", name,
                      text, kd->k->name, name, kd->cparams.n ? sb_str(&names) : "none");
      continue;
    }
    struct sema_cparam *cp = &kd->cparams.v[p];
    struct sema_sym *sym = s->cparams.v[p];
    bool good = false;
    switch (cp->kind) {
    case LANG_CP_INT: {
      char *end = NULL;
      const char *digits = text[0] == '-' ? text + 1 : text;
      bool hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
      long long v = strtoll(text, &end, hex ? 16 : 10);
      good = *text && end && *end == 0 && v >= INT32_MIN && v <= INT32_MAX;
      if (good) sym->cv.i = v;
      break;
    }
    case LANG_CP_BOOL:
      if (!strcmp(text, "true") || !strcmp(text, "1")) good = true, sym->cv.i = 1;
      if (!strcmp(text, "false") || !strcmp(text, "0")) good = true, sym->cv.i = 0;
      break;
    case LANG_CP_STR: {
      size_t n = strlen(text);
      if (n >= 2 && text[0] == '"' && text[n - 1] == '"')
        sym->cv.s = strtab_intern(c->strs, text + 1, n - 2);
      else
        sym->cv.s = strtab_intern(c->strs, text, n);
      good = true;
      break;
    }
    case LANG_CP_DTYPE: good = lang_dtype_name(text, &sym->cv.dt); break;
    }
    if (!good) {
      static const char *const expect[] = {"an integer (i32)", "true, false, 1 or 0",
                                           "a string", "a dtype (f32, f16, bf16, i32, u32, bool, "
                                                       "i64, i8, f8e4m3, f8e5m2)"};
      ok = lang_error(c, cmdline, D_OVERRIDE_VALUE, "-D %s=%s: `%s` is %s parameter; expected %s",
                      name, text, name, kind_name(cp->kind), expect[cp->kind]);
      lang_note(c, cp->node->loc2, "`%s` is declared here", name);
    }
  }
  for (uint32_t p = 0; p < kd->cparams.n; p++) {
    struct sema_sym *sym = s->cparams.v[p];
    switch (kd->cparams.v[p].kind) {
    case LANG_CP_INT: sym->ty.kind = STY_VAL; sym->ty.dt = DT_I32; sym->ty.weak = 1; break;
    case LANG_CP_BOOL: sym->ty.kind = STY_VAL; sym->ty.dt = DT_BOOL; sym->ty.weak = 1; break;
    case LANG_CP_STR: sym->ty.kind = STY_STR; break;
    case LANG_CP_DTYPE: sym->ty.kind = STY_DTYPE; break;
    }
    if (!kd->cparams.v[p].ok) sym->ty.kind = STY_ERROR;
  }
  return ok;
}

static bool is_arith(ir_dtype dt) {
  return dt == DT_F32 || dt == DT_F16 || dt == DT_BF16 || dt == DT_I32 || dt == DT_U32 || dt == DT_BOOL;
}

/* The dtype named by a parameter's type: a dtype keyword or a dtype parameter. */
static bool param_dtype(struct sema *s, struct ast_node *t, ir_dtype *out) {
  if (t->kind == AST_DTYPE) {
    *out = t->dt;
    return true;
  }
  if (t->kind != AST_NAME) return false;
  struct sema_sym *sym = sema_lookup(s, t->name);
  if (sym && sym->ty.kind == STY_DTYPE) {
    *out = sym->cv.dt;
    return true;
  }
  if (sym && sym->ty.kind == STY_ERROR) return false;
  if (sym && sym->kind == SYM_CPARAM)
    return lang_error(s->ctx, t->loc, D_UNKNOWN_DTYPE,
                      "`%s` is a compile-time parameter but not a dtype (its values are not dtypes)",
                      t->name);
  return lang_error(s->ctx, t->loc, D_UNKNOWN_DTYPE,
                    "unknown dtype `%s` (dtypes: f32, f16, bf16, i32, u32, bool; storage only: i64, i8, "
                    "f8e4m3, f8e5m2; or a dtype parameter)",
                    t->name);
}

static bool tensor_dims(struct sema *s, struct ast_node *pn, struct sema_sym *sym) {
  struct ast_node *t = pn->a;
  bool ok = true;
  if (t->list.n > IR_MAX_RANK)
    return lang_error(s->ctx, t->loc, D_TENSOR_RANK, "tensor `%s` has %u dimensions; at most 4 are supported",
                      sym->name, t->list.n);
  sym->ty.rank = (uint8_t)t->list.n;
  for (uint32_t d = 0; d < t->list.n; d++) {
    struct ast_node *dn = t->list.v[d];
    sym->ty.dims[d] = -1;
    if (dn->kind == AST_INT && dn->ival <= INT32_MAX) {
      sym->ty.dims[d] = (int32_t)dn->ival;
      continue;
    }
    if (dn->kind != AST_NAME) {
      /* a constant expression (`D / 2`, `BM * 2`): compile-time parameters and constants
       * only; a shape symbol in it is a run-time value, which sema_need_const_int refuses */
      int64_t v;
      char what[96];
      snprintf(what, sizeof what, "dimension %u of `%s`", d + 1, sym->name);
      if (!sema_need_const_int(s, dn, what, &v)) {
        ok = false;
        continue;
      }
      if (v < 0 || v > INT32_MAX) {
        ok = lang_error(s->ctx, dn->loc, D_BAD_DIM, "dimension %u of `%s` is %lld; %s", d + 1, sym->name,
                        (long long)v, v < 0 ? "sizes cannot be negative" : "the largest size is 2147483647");
        continue;
      }
      sym->ty.dims[d] = (int32_t)v;
      continue;
    }
    struct sema_sym *o = sema_lookup(s, dn->name);
    if (!o) {
      struct sema_sym *shape = sema_new_sym(s, SYM_SHAPE, dn->name, dn->loc);
      shape->ty.kind = STY_VAL;
      shape->ty.dt = DT_I32;
      shape->index = s->shapes.n;
      sema_declare(s, shape);
      VEC_PUSH(s->ctx->arena, s->shapes, shape);
      sym->dim_shape[d] = shape;
      continue;
    }
    switch (o->kind) {
    case SYM_SHAPE: sym->dim_shape[d] = o; continue;
    case SYM_CONST:
    case SYM_CPARAM:
      if (o->ty.kind == STY_ERROR) {
        ok = false;
        continue;
      }
      if (o->ty.kind == STY_VAL && ir_dtype_is_int((ir_dtype)o->ty.dt)) {
        if (o->cv.i < 0)
          ok = lang_error(s->ctx, dn->loc, D_BAD_DIM, "dimension `%s` of `%s` is %lld; sizes cannot be negative",
                          dn->name, sym->name, (long long)o->cv.i);
        sym->ty.dims[d] = (int32_t)o->cv.i;
        continue;
      }
      ok = lang_error(s->ctx, dn->loc, D_BAD_DIM,
                      "`%s` is a %s %s, not an int, so it cannot be a dimension", dn->name,
                      o->ty.kind == STY_STR ? "string" : o->ty.kind == STY_DTYPE ? "dtype" : ir_dtype_name((ir_dtype)o->ty.dt),
                      o->kind == SYM_CONST ? "constant" : "parameter");
      continue;
    default:
      ok = lang_error(s->ctx, dn->loc, D_SHAPE_SYMBOL,
                      "`%s` is a %s parameter, so it cannot also be a dimension; give the shape "
                      "symbol another name (shape symbols are i32 values in the body)",
                      dn->name, o->kind == SYM_TENSOR ? "tensor" : "scalar");
      if (o->loc.line) lang_note(s->ctx, o->loc, "`%s` is declared here", o->name);
      continue;
    }
  }
  return ok;
}

bool sema_header(struct sema *s) {
  struct lang_ctx *c = s->ctx;
  struct ast_kernel *k = s->kd->k;
  uint32_t errors = c->nerrors;
  for (uint32_t p = 0; p < s->cparams.n; p++) sema_declare(s, s->cparams.v[p]);
  s->params.n = 0;
  s->shapes.n = 0;
  for (uint32_t p = 0; p < k->params.n; p++) {
    struct ast_node *pn = k->params.v[p];
    struct ast_node *t = pn->a;
    bool tensor = t->flag;
    struct sema_sym *sym = sema_new_sym(s, tensor ? SYM_TENSOR : SYM_SCALAR, pn->name, pn->loc2);
    sym->index = p;
    sym->ty.kind = tensor ? STY_TENSOR : STY_VAL;
    if (pn->b) {
      if (strcmp(pn->b->name, "out") != 0)
        lang_error(c, pn->b->loc, D_PARAM_MODIFIER,
                   "unknown parameter modifier `%s`; the only modifier is `out` (a tensor the "
                   "kernel writes)",
                   pn->b->name);
      else if (!tensor)
        lang_error(c, pn->b->loc, D_OUT_SCALAR,
                   "`out` applies to tensors only; scalar parameter `%s` is passed by value",
                   pn->name);
      sym->is_out = true;
    }
    ir_dtype dt = DT_NONE;
    if (!param_dtype(s, t->a, &dt)) {
      sym->ty.kind = STY_ERROR;
    } else if (!tensor && !is_arith(dt)) {
      lang_error(c, t->loc, D_SCALAR_DTYPE,
                 "scalar parameter `%s` has dtype %s; scalars must be f32, f16, bf16, i32, u32 or bool",
                 pn->name, ir_dtype_name(dt));
      sym->ty.kind = STY_ERROR;
    }
    sym->ty.dt = (uint8_t)dt;
    sema_declare(s, sym);
    VEC_PUSH(c->arena, s->params, sym);
  }
  uint32_t slots = 0;
  for (uint32_t p = 0; p < k->params.n; p++) {
    struct sema_sym *sym = s->params.v[p];
    if (sym->kind == SYM_TENSOR && !tensor_dims(s, k->params.v[p], sym)) sym->ty.kind = STY_ERROR;
    slots += sym->kind == SYM_TENSOR ? 1 + sym->ty.rank : 1;
  }
  slots += s->shapes.n;
  if (slots > TL_MAX_PARAM_SLOTS)
    lang_error(c, k->name_loc, D_PARAM_SLOTS,
               "kernel `%s` takes %u parameter slots (a tensor takes 1 + its rank, a scalar or shape "
               "symbol 1); at most %d can be passed",
               k->name, slots, TL_MAX_PARAM_SLOTS);
  return c->nerrors == errors;
}

/* ---- the file ---- */

static void kernel_info(struct lang_ctx *c, struct sema_kernel_decl *kd) {
  struct ast_kernel *k = kd->k;
  struct lang_kernel_info *info = &kd->info;
  info->name = k->name;
  info->line = k->name_loc.line;
  info->col = k->name_loc.col;
  struct lang_cparam_info *cps = ARENA_NEWN(c->arena, struct lang_cparam_info, kd->cparams.n + 1);
  for (uint32_t p = 0; p < kd->cparams.n; p++) {
    struct sema_cparam *cp = &kd->cparams.v[p];
    cps[p].name = cp->name;
    cps[p].kind = cp->kind;
    cps[p].def = cp->def;
    cps[p].cands = cp->cands.v;
    cps[p].ncands = cp->cands.n;
  }
  info->cparams = cps;
  info->ncparams = kd->cparams.n;
  info->tdefaults = kd->tdefaults.v;
  info->ntdefaults = kd->tdefaults.n;
  struct lang_param_info *ps = ARENA_NEWN(c->arena, struct lang_param_info, k->params.n + 1);
  for (uint32_t p = 0; p < k->params.n; p++) {
    struct ast_node *pn = k->params.v[p];
    ps[p].name = pn->name;
    ps[p].is_tensor = pn->a->flag;
    ps[p].is_out = pn->b && strcmp(pn->b->name, "out") == 0;
    ps[p].dtype = lang_loc_text(c, pn->a->a->loc);
    ps[p].rank = pn->a->flag ? TL_MIN(pn->a->list.n, (uint32_t)IR_MAX_RANK) : 0;
    for (uint32_t d = 0; d < ps[p].rank; d++) ps[p].dims[d] = lang_loc_text(c, pn->a->list.v[d]->loc);
  }
  info->params = ps;
  info->nparams = k->params.n;
}

static void reset_scopes(struct sema *s, struct sema_file *d) {
  sema_scope_reset(s);
  sema_scope_push(s);
  for (uint32_t k = 0; k < d->consts.n; k++) sema_scope_add(s, d->consts.v[k]);
  sema_scope_push(s);
}

void sema_check_file(struct lang_ctx *c, struct ast_file *f) {
  struct sema_file *d = ARENA_NEW(c->arena, struct sema_file);
  f->decls = d;
  uint32_t errors = c->nerrors;
  struct sema s;
  sema_begin(&s, c, f);
  sema_scope_push(&s);
  for (uint32_t it = 0; it < f->items.n && !c->stopped; it++) {
    struct ast_node *n = f->items.v[it];
    if (n->kind != AST_CONST_DECL) continue;
    struct sema_info *i = sema_expr(&s, n->a);
    struct sema_sym *sym = sema_new_sym(&s, SYM_CONST, n->name, n->loc2);
    sym->ty.kind = STY_ERROR;
    if (i->ty.kind != STY_ERROR) {
      if (!i->is_const || (i->ty.kind == STY_VAL && i->ty.rank)) {
        lang_error(c, n->a->loc, D_NOT_CONST,
                   "the value of constant `%s` must be a compile-time scalar, string or dtype",
                   n->name);
      } else {
        sym->ty = i->ty;
        sym->is_const = true;
        sym->cv = i->cv;
      }
    }
    sema_declare(&s, sym);
    VEC_PUSH(c->arena, d->consts, sym);
  }
  for (uint32_t it = 0; it < f->items.n && !c->stopped; it++) {
    struct ast_node *n = f->items.v[it];
    if (n->kind != AST_KERNEL) continue;
    uint32_t kerrors = c->nerrors;
    for (uint32_t o = 0; o < d->kernels.n; o++)
      if (d->kernels.v[o].k->name == n->k->name) {
        lang_error(c, n->loc2, D_DUP_KERNEL, "a kernel named `%s` is already defined", n->name);
        lang_note(c, d->kernels.v[o].k->name_loc, "the first `%s` is here", n->name);
        break;
      }
    struct sema_kernel_decl kd;
    memset(&kd, 0, sizeof kd);
    kd.node = n;
    kd.k = n->k;
    kd.ok = true;
    check_cparams(c, &kd);
    check_tdefaults(c, &kd);
    s.kd = &kd;
    reset_scopes(&s, d);
    sema_apply_defines(&s, NULL, 0);
    sema_header(&s);
    kd.ok = kd.ok && c->nerrors == kerrors;
    kernel_info(c, &kd);
    VEC_PUSH(c->arena, d->kernels, kd);
  }
  d->errors = c->nerrors - errors;
}
