/* sema.c - semantic analysis of expressions and statements, and the per-specialization
 * driver (sema_kernel). Declarations checked at parse time are in sema_decl.c, builtin
 * calls in sema_call.c.
 *
 * Typing rules (lang/SPEC.md states them for users):
 *  - Promotion of two strong dtypes: equal -> that dtype; two different floats -> f32; a
 *    float with an int or bool -> the float; an int with a bool -> the int.
 *  - Weak values (literals, compile-time constants) adopt the other operand's dtype when
 *    that loses nothing (a weak int next to f16 becomes f16); a weak float next to an int
 *    gives f32. Weak with weak promotes as above and stays weak.
 *  - Shapes broadcast as in numpy: right-aligned, size-1 dimensions stretch, scalars fit any
 *    tile. Every tile dimension is a power of two and the rank is at most 4.
 *  - i32 and u32 do not mix: two strong ones are an error (convert one), a weak int adopts
 *    u32 with its 32-bit pattern (-1 and 0xFFFFFFFF are 4294967295), and a decimal literal
 *    above 2147483647 is a weak u32 that may not become an i32.
 *  - Compile-time constants are folded here, with i32 (u32) overflow and division by zero
 *    reported; float constants are rounded to their dtype after each operation.
 *
 * Anti-cascade: every check first asks whether an operand is already poisoned (STY_ERROR)
 * and stays silent if so; the node that failed becomes STY_ERROR itself. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp16.h"
#include "eval.h"
#include "sema.h"

/* ---- types ---- */

static struct sty sty_of(enum sty_kind k) {
  struct sty t;
  memset(&t, 0, sizeof t);
  t.kind = (uint8_t)k;
  return t;
}

static struct sty sty_scalar(ir_dtype dt) {
  struct sty t = sty_of(STY_VAL);
  t.dt = (uint8_t)dt;
  return t;
}

bool sty_is_float(const struct sty *t) { return ir_dtype_is_float((ir_dtype)t->dt); }

bool sty_same(const struct sty *a, const struct sty *b) {
  if (a->kind != b->kind || a->dt != b->dt || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static void put_dims(struct strbuf *sb, const struct sty *t) {
  sb_putc(sb, '[');
  for (int i = 0; i < t->rank; i++) {
    if (i) sb_puts(sb, ", ");
    if (t->dims[i] < 0)
      sb_putc(sb, '?');
    else
      sb_printf(sb, "%d", t->dims[i]);
  }
  sb_putc(sb, ']');
}

const char *sty_str(struct sema *s, const struct sty *t) {
  struct strbuf sb;
  sb_init(&sb, s->ctx->arena);
  switch (t->kind) {
  case STY_VAL:
    sb_puts(&sb, ir_dtype_name((ir_dtype)t->dt));
    if (t->rank) put_dims(&sb, t);
    break;
  case STY_STR: sb_puts(&sb, "a string"); break;
  case STY_DTYPE: sb_puts(&sb, "a dtype"); break;
  case STY_TENSOR:
    sb_printf(&sb, "tensor %s", ir_dtype_name((ir_dtype)t->dt));
    put_dims(&sb, t);
    break;
  case STY_LIST: sb_puts(&sb, "a list"); break;
  default: sb_puts(&sb, "<error>"); break;
  }
  return sb_str(&sb);
}

static const char *shape_str(struct sema *s, const struct sty *t) {
  struct strbuf sb;
  sb_init(&sb, s->ctx->arena);
  put_dims(&sb, t);
  return sb_str(&sb);
}

const char *sema_shape_str(struct sema *s, const struct sty *t) { return shape_str(s, t); }

static bool arith_dtype(ir_dtype dt) {
  return dt == DT_F32 || dt == DT_F16 || dt == DT_BF16 || dt == DT_I32 || dt == DT_U32 || dt == DT_BOOL;
}

bool sema_supported(struct sema *s, const struct sty *t, struct lang_loc loc, const char *what) {
  if (t->kind != STY_VAL || arith_dtype((ir_dtype)t->dt)) return true;
  lang_error(s->ctx, loc, D_UNSUPPORTED_DTYPE,
             "%s on %s values is not supported yet (%s is a storage type: cast it first, "
             "e.g. f32(x))",
             what, ir_dtype_name((ir_dtype)t->dt), ir_dtype_name((ir_dtype)t->dt));
  return false;
}

ir_dtype sema_adopt(ir_dtype weak, ir_dtype other) {
  enum ir_dtype_class cw = ir_dtype_class(weak), co = ir_dtype_class(other);
  if (cw == co) return other;
  if (cw == DTC_INT && co == DTC_FLOAT) return other;
  if (cw == DTC_BOOL) return other;
  return weak; /* a weak float next to an int or bool stays f32; a weak int next to a bool, i32 */
}

static ir_dtype strong_join(ir_dtype a, ir_dtype b) {
  if (a == b) return a;
  enum ir_dtype_class ca = ir_dtype_class(a), cb = ir_dtype_class(b);
  if (ca == DTC_FLOAT && cb == DTC_FLOAT) return DT_F32;
  if (ca == DTC_FLOAT) return a;
  if (cb == DTC_FLOAT) return b;
  if (ca == DTC_INT && cb == DTC_INT) return a == DT_U32 || b == DT_U32 ? DT_U32 : a; /* weak ones only */
  if (ca == DTC_INT) return a;
  return b;
}

/* A weak int constant keeps its 32-bit pattern when it becomes a u32 (-1 is 4294967295), but
 * a u32 constant above the i32 maximum (the literal 4294967295, or u32 arithmetic on
 * constants) cannot become an i32: false for that. */
bool sema_weak_fits(const struct sema_info *i, ir_dtype to) {
  if (!i->ty.weak || !i->is_const || i->ty.dt != DT_U32) return true;
  return !(ir_dtype_is_int(to) && !ir_dtype_is_unsigned(to)) || i->cv.i <= INT32_MAX;
}

bool sema_is_i32(const struct sema_info *i) {
  return i->ty.dt == DT_I32 || (i->ty.weak && ir_dtype_is_int((ir_dtype)i->ty.dt) && sema_weak_fits(i, DT_I32));
}

/* Conversions of constants are the IR's (ir_eval_cast): what the interpreter and the GPU
 * compute (float to int saturates, NaN gives 0; ints wrap to their width). */
struct cval sema_convert_const(struct cval v, ir_dtype from, ir_dtype to) {
  struct cval r = v;
  enum ir_dtype_class ct = ir_dtype_class(to);
  if (ct != DTC_FLOAT && ct != DTC_BOOL && ct != DTC_INT) return r;
  ir_scalar x, y;
  if (ir_dtype_is_float(from))
    x.f = v.f;
  else
    x.i = v.i;
  y = ir_eval_cast(from, to, x);
  if (ct == DTC_FLOAT)
    r.f = y.f;
  else
    r.i = y.i;
  return r;
}

bool sema_check_tile_shape(struct sema *s, const struct sty *t, struct lang_loc loc) {
  if (t->kind != STY_VAL) return true;
  if (t->rank > IR_MAX_RANK)
    return lang_error(s->ctx, loc, D_TILE_SHAPE, "tiles have at most 4 dimensions, this one would have %d",
                      t->rank);
  int64_t numel = 1;
  for (int i = 0; i < t->rank; i++) {
    if (!tl_is_pow2(t->dims[i]))
      return lang_error(s->ctx, loc, D_TILE_SHAPE,
                        "tile dimensions must be powers of two, but dimension %d of %s is %d", i,
                        shape_str(s, t), t->dims[i]);
    numel *= t->dims[i];
  }
  if (numel > LANG_MAX_TILE_ELEMENTS)
    return lang_error(s->ctx, loc, D_TILE_SIZE, "a tile of %s has %lld elements; the limit is %d (2^20)",
                      shape_str(s, t), (long long)numel, LANG_MAX_TILE_ELEMENTS);
  return true;
}

bool sema_broadcast(struct sema *s, const struct sty *a, const struct sty *b, struct sty *out,
                    struct lang_loc loc, const char *what) {
  int rank = TL_MAX(a->rank, b->rank);
  out->rank = (uint8_t)rank;
  for (int i = 0; i < rank; i++) {
    int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
    int32_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return lang_error(s->ctx, loc, D_BROADCAST,
                        "shapes %s and %s do not broadcast in %s: dimension %d is %d in one and %d "
                        "in the other",
                        shape_str(s, a), shape_str(s, b), what, i, da, db);
    out->dims[i] = da == 1 ? db : da;
  }
  return true;
}

/* ---- values ---- */

static struct sema_info *poison(struct sema_info *i) {
  i->ty = sty_of(STY_ERROR);
  i->is_const = false;
  return i;
}

static bool is_err(const struct sema_info *i) { return i->ty.kind == STY_ERROR; }

/* Checks that i is a scalar or tile value; reports what it is otherwise. */
static bool need_value(struct sema *s, struct sema_info *i, struct ast_node *n) {
  switch (i->ty.kind) {
  case STY_VAL: return true;
  case STY_ERROR: return false;
  case STY_STR:
    return lang_error(s->ctx, n->loc, D_STRING_USE,
                      "a string can only be compared with `==` or `!=` to a string parameter");
  case STY_DTYPE:
    return lang_error(s->ctx, n->loc, D_DTYPE_USE,
                      "a dtype is not a value: call it to convert (`%s(x)`) or pass it as a dtype "
                      "argument",
                      lang_loc_text(s->ctx, n->loc));
  case STY_TENSOR:
    return lang_error(s->ctx, n->loc, D_TENSOR_VALUE,
                      "tensor `%s` is not a value: load a slice of it, e.g. %s[i : +N]",
                      lang_loc_text(s->ctx, n->loc), lang_loc_text(s->ctx, n->loc));
  case STY_LIST:
    return lang_error(s->ctx, n->loc, D_ARG_TYPE,
                      "a list like [a, b] can only be the shape argument of zeros(...) or full(...)");
  case STY_VOID:
    return lang_error(s->ctx, n->loc, D_VOID_VALUE, "store(...) gives no value; write it as a statement");
  default:
    return false;
  }
}

bool sema_join(struct sema *s, struct sema_info *a, struct sema_info *b, struct sty *out,
               struct lang_loc loc, const char *what) {
  if (!sema_supported(s, &a->ty, loc, what) || !sema_supported(s, &b->ty, loc, what)) return false;
  *out = sty_of(STY_VAL);
  ir_dtype da = (ir_dtype)a->ty.dt, db = (ir_dtype)b->ty.dt;
  if (a->ty.weak && b->ty.weak) {
    out->dt = (uint8_t)strong_join(da, db);
    out->weak = 1;
  } else if (a->ty.weak) {
    out->dt = (uint8_t)sema_adopt(da, db);
  } else if (b->ty.weak) {
    out->dt = (uint8_t)sema_adopt(db, da);
  } else {
    bool mixed = (da == DT_I32 && db == DT_U32) || (da == DT_U32 && db == DT_I32);
    if (mixed)
      return lang_error(s->ctx, loc, D_INT_SIGN,
                        "%s mixes i32 and u32 (%s and %s): convert one side, e.g. u32(x) or i32(x) "
                        "(both keep the 32-bit pattern)",
                        what, sty_str(s, &a->ty), sty_str(s, &b->ty));
    out->dt = (uint8_t)strong_join(da, db);
  }
  const struct sema_info *w = a->ty.weak ? a : b;
  if (!sema_weak_fits(w, (ir_dtype)out->dt))
    return lang_error(s->ctx, loc, D_INT_SIGN,
                      "%s: the u32 constant %lld does not fit in i32 (the other operand is %s); "
                      "convert it, e.g. u32(x), or write the constant as an i32",
                      what, (long long)w->cv.i, sty_str(s, a->ty.weak ? &b->ty : &a->ty));
  return sema_broadcast(s, &a->ty, &b->ty, out, loc, what);
}

bool sema_need_const_int(struct sema *s, struct ast_node *n, const char *what, int64_t *out) {
  struct sema_info *i = sema_expr(s, n);
  if (is_err(i)) return false;
  if (i->ty.kind != STY_VAL || i->ty.rank != 0 || ir_dtype_class((ir_dtype)i->ty.dt) != DTC_INT)
    return lang_error(s->ctx, n->loc, D_ARG_TYPE, "%s must be an integer, found %s", what,
                      sty_str(s, &i->ty));
  if (!i->is_const)
    return lang_error(s->ctx, n->loc, D_NOT_CONST,
                      "%s must be a compile-time constant, but this value is computed at run time",
                      what);
  *out = i->cv.i;
  return true;
}

/* ---- constant folding ---- */

static bool fits_i32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/* Folds a binary operation on constants of operand dtype dt with the IR's arithmetic
 * (ir_eval_elem), after the checks that make a constant expression an error rather than a
 * value: division by zero and i32 overflow. Returns false (with a diagnostic) for those. */
static bool fold_binary(struct sema *s, struct ast_node *n, enum ast_op op, ir_dtype dt,
                        struct cval a, struct cval b, struct cval *r) {
  memset(r, 0, sizeof *r);
  ir_opcode code = lang_binary_opcode(op);
  if (code == IR_NONE) return false;
  enum ir_dtype_class cls = ir_dtype_class(dt);
  if (cls == DTC_INT) {
    int64_t x = a.i, y = b.i, exact = 0;
    if ((op == OP_DIV || op == OP_REM) && y == 0)
      return lang_error(s->ctx, n->loc, D_DIV_ZERO, "integer %s by zero in a constant expression",
                        op == OP_DIV ? "division" : "remainder");
    if ((op == OP_DIV || op == OP_REM) && dt == DT_I32 && x == INT32_MIN && y == -1)
      return lang_error(s->ctx, n->loc, D_INT_OVERFLOW,
                        "integer overflow: %s does not fit in i32", lang_loc_text(s->ctx, n->loc));
    bool wide = op == OP_ADD || op == OP_SUB || op == OP_MUL;
    if (wide) {
      /* 32-bit operands: sums fit int64; a u32 product fits uint64 (both below 2^32) */
      uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
      uint64_t u = op == OP_ADD ? ux + uy : op == OP_SUB ? ux - uy : ux * uy;
      bool uns = dt == DT_U32, ok;
      if (uns) {
        ok = op == OP_SUB ? x >= y : u <= UINT32_MAX;
      } else {
        exact = op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y;
        ok = fits_i32(exact);
      }
      if (!ok && uns)
        return lang_error(s->ctx, n->loc, D_INT_OVERFLOW,
                          "integer overflow: %s = %s%llu does not fit in u32 (range 0 .. 4294967295)",
                          lang_loc_text(s->ctx, n->loc), op == OP_SUB ? "-" : "",
                          (unsigned long long)(op == OP_SUB ? uy - ux : u));
      if (!ok)
        return lang_error(s->ctx, n->loc, D_INT_OVERFLOW,
                          "integer overflow: %s = %lld does not fit in i32 (range -2147483648 .. "
                          "2147483647)",
                          lang_loc_text(s->ctx, n->loc), (long long)exact);
    }
  }
  ir_scalar args[2], res;
  if (cls == DTC_FLOAT) {
    args[0].f = a.f;
    args[1].f = b.f;
  } else {
    args[0].i = a.i;
    args[1].i = b.i;
  }
  if (!ir_eval_elem(code, dt, args, &res)) return false;
  if (cls == DTC_FLOAT && ast_op_classes[op] != OPC_CMP)
    r->f = res.f;
  else
    r->i = res.i;
  return true;
}

/* ---- scopes ----
 * The visible symbols are a stack (scope), cut into nested scopes by marks. Lookups do not
 * scan it: a hash table keyed by the interned name holds the innermost entry of each name,
 * and each entry remembers the entry of the same name it hides (shadow), so popping a
 * scope restores the names it declared. A kernel with 100k `let`s checks in linear time. */

static void scope_add(struct sema *s, struct sema_sym *sym) {
  if (!s->names.arena) ptrmap_init(&s->names, s->ctx->arena);
  uint32_t *top = ptrmap_slot(&s->names, sym->name);
  VEC_PUSH(s->ctx->arena, s->shadow, *top);
  VEC_PUSH(s->ctx->arena, s->scope, sym);
  *top = s->scope.n; /* 1 + its index */
}

/* Pops entries down to n, the newest first. */
static void scope_truncate(struct sema *s, uint32_t n) {
  while (s->scope.n > n) {
    uint32_t i = --s->scope.n;
    *ptrmap_slot(&s->names, s->scope.v[i]->name) = s->shadow.v[i];
  }
  s->shadow.n = n;
}

static void scope_push(struct sema *s) { VEC_PUSH(s->ctx->arena, s->marks, s->scope.n); }
static void scope_pop(struct sema *s) { scope_truncate(s, s->marks.v[--s->marks.n]); }

static struct sema_sym *lookup(struct sema *s, const char *name) {
  uint32_t top = ptrmap_get(&s->names, name);
  return top ? s->scope.v[top - 1] : NULL;
}

static const char *sym_what(const struct sema_sym *sym) {
  switch (sym->kind) {
  case SYM_CONST: return "a file-level constant";
  case SYM_CPARAM: return "a compile-time parameter";
  case SYM_TENSOR: return "a tensor parameter";
  case SYM_SCALAR: return "a scalar parameter";
  case SYM_SHAPE: return "a shape symbol";
  case SYM_LET: return "a `let`";
  case SYM_VAR: return "a `var`";
  case SYM_LOOP: return "a loop variable";
  }
  return "a name";
}

/* Declares sym in the innermost scope. A name may not be declared twice in one block, and
 * a local may not reuse the name of a constant, parameter or shape symbol (those live in
 * the two outermost scopes); a nested block may shadow an outer block's local. */
static void declare(struct sema *s, struct sema_sym *sym) {
  uint32_t top = s->marks.n ? s->marks.v[s->marks.n - 1] : 0;
  uint32_t kernel_end = s->marks.n > 2 ? s->marks.v[2] : s->scope.n;
  /* the outermost visible entry of this name that it may not hide: one in the same block,
   * or a constant, parameter or shape symbol */
  uint32_t clash = 0;
  for (uint32_t e = ptrmap_get(&s->names, sym->name); e; e = s->shadow.v[e - 1])
    if (!(e - 1 >= kernel_end && e - 1 < top)) clash = e;
  if (clash) {
    uint32_t i = clash - 1;
    struct sema_sym *o = s->scope.v[i];
    if (i >= top)
      lang_error(s->ctx, sym->loc, D_REDECLARED, "redeclaration of `%s` in the same scope",
                 sym->name);
    else
      lang_error(s->ctx, sym->loc, D_REDECLARED,
                 "`%s` is already declared as %s; choose another name", sym->name, sym_what(o));
    if (o->loc.line) lang_note(s->ctx, o->loc, "the previous declaration of `%s` is here", o->name);
  }
  sym->depth = s->marks.n;
  scope_add(s, sym);
}

static struct sema_sym *new_sym(struct sema *s, enum sym_kind kind, const char *name,
                                struct lang_loc loc) {
  struct sema_sym *sym = ARENA_NEW(s->ctx->arena, struct sema_sym);
  sym->kind = kind;
  sym->name = name;
  sym->loc = loc;
  return sym;
}

/* ---- expressions ---- */

static struct sema_info *check_name(struct sema *s, struct ast_node *n, struct sema_info *i) {
  struct sema_sym *sym = lookup(s, n->name);
  if (!sym) {
    if (!s->quiet_undeclared)
      lang_error(s->ctx, n->loc, D_UNDECLARED, "use of undeclared name `%s`", n->name);
    return poison(i);
  }
  i->sym = sym;
  i->ty = sym->ty;
  i->is_const = sym->is_const;
  i->cv = sym->cv;
  return i;
}

static bool is_bool(const struct sty *t) { return t->dt == DT_BOOL; }
static bool is_int(const struct sty *t) { return ir_dtype_is_int((ir_dtype)t->dt); }

static struct sema_info *check_unary(struct sema *s, struct ast_node *n, struct sema_info *i) {
  struct sema_info *a = sema_expr(s, n->a);
  if (!need_value(s, a, n->a)) return poison(i);
  const char *opname = ast_op_texts[n->op];
  if (!sema_supported(s, &a->ty, n->loc, opname)) return poison(i);
  bool ok = n->op == OP_NEG      ? !is_bool(&a->ty)
            : n->op == OP_NOT    ? is_bool(&a->ty)
                                 : is_bool(&a->ty) || is_int(&a->ty);
  if (!ok) {
    const char *need = n->op == OP_NEG ? "a number" : n->op == OP_NOT ? "a bool" : "an int or bool";
    lang_error(s->ctx, n->loc, D_OPERAND_TYPE, "unary `%s` needs %s, found %s%s", opname, need,
               sty_str(s, &a->ty),
               n->op == OP_NOT ? " (compare explicitly, e.g. x != 0)" : "");
    return poison(i);
  }
  i->ty = a->ty;
  if (a->is_const) {
    i->is_const = true;
    i->cv = a->cv;
    if (n->op == OP_NEG) {
      if (sty_is_float(&a->ty)) {
        i->cv.f = -a->cv.f;
      } else {
        bool uns = ir_dtype_is_unsigned((ir_dtype)a->ty.dt);
        if (uns ? a->cv.i != 0 : a->cv.i == INT32_MIN) {
          lang_error(s->ctx, n->loc, D_INT_OVERFLOW, "integer overflow: -(%lld) does not fit in %s",
                     (long long)a->cv.i, ir_dtype_name((ir_dtype)a->ty.dt));
          return poison(i);
        }
        i->cv.i = -a->cv.i;
      }
    } else if (n->op == OP_NOT) {
      i->cv.i = !a->cv.i;
    } else {
      i->cv.i = is_bool(&a->ty) ? !a->cv.i : ir_wrap_int((ir_dtype)a->ty.dt, ~a->cv.i);
    }
  }
  return i;
}

/* The result type of `a @ b` (also used by dot()). */
bool sema_check_dot(struct sema *s, struct sema_info *a, struct sema_info *b, struct lang_loc loc,
                    const char *what, struct sty *out) {
  if (a->ty.rank != 2 || b->ty.rank != 2)
    return lang_error(s->ctx, loc, D_DOT_SHAPE, "%s needs two 2-d tiles [M, K] and [K, N], found %s and %s",
                      what, sty_str(s, &a->ty), sty_str(s, &b->ty));
  if (a->ty.dt != b->ty.dt)
    return lang_error(s->ctx, loc, D_DOT_DTYPE,
                      "%s operands must have the same dtype, found %s and %s; convert one, e.g. "
                      "%s(x)",
                      what, ir_dtype_name((ir_dtype)a->ty.dt), ir_dtype_name((ir_dtype)b->ty.dt),
                      ir_dtype_name((ir_dtype)a->ty.dt));
  ir_dtype dt = (ir_dtype)a->ty.dt;
  if (dt != DT_F16 && dt != DT_BF16 && dt != DT_F32)
    return lang_error(s->ctx, loc, D_DOT_DTYPE, "%s supports f16, bf16 and f32 operands, found %s",
                      what, ir_dtype_name(dt));
  int32_t m = a->ty.dims[0], k = a->ty.dims[1], k2 = b->ty.dims[0], nn = b->ty.dims[1];
  if (k != k2)
    return lang_error(s->ctx, loc, D_DOT_SHAPE,
                      "%s shape mismatch: %s and %s; the inner dimensions %d and %d must be equal",
                      what, shape_str(s, &a->ty), shape_str(s, &b->ty), k, k2);
  /* the Tensor Core tile: m16n8k16, m16n8k8 for TF32 (f32 steps are 8 deep) */
  if (m < 16 || nn < 8 || k < (dt == DT_F32 ? 8 : 16))
    return lang_error(s->ctx, loc, D_DOT_SMALL,
                      "%s needs M of at least 16, N of at least 8 and K of at least %d (the %s "
                      "Tensor Core tile), found M=%d, N=%d, K=%d",
                      what, dt == DT_F32 ? 8 : 16, dt == DT_F32 ? "TF32" : "16-bit", m, nn, k);
  *out = sty_scalar(DT_F32);
  out->rank = 2;
  out->dims[0] = m;
  out->dims[1] = nn;
  return true;
}

/* Types a binary operation; i->opnd gets the common operand type. */
static bool type_binary(struct sema *s, struct ast_node *n, enum ast_op op, struct sema_info *a,
                        struct sema_info *b, struct sema_info *i) {
  enum ast_op_class cls = ast_op_classes[op];
  const char *opname = ast_op_texts[op];
  char what[32];
  snprintf(what, sizeof what, "`%s`", opname);
  struct lang_loc oploc = n->loc2.line ? n->loc2 : n->loc;

  /* Strings and dtypes only compare for equality, and only with their own kind. */
  if (cls == OPC_CMP && (a->ty.kind == STY_STR || b->ty.kind == STY_STR ||
                         a->ty.kind == STY_DTYPE || b->ty.kind == STY_DTYPE)) {
    if (is_err(a) || is_err(b)) return false;
    enum sty_kind k = (enum sty_kind)a->ty.kind;
    if (a->ty.kind != b->ty.kind || (op != OP_EQ && op != OP_NE)) {
      struct ast_node *bad = a->ty.kind == STY_STR || a->ty.kind == STY_DTYPE ? n->a : n->b;
      if (k == STY_STR || b->ty.kind == STY_STR)
        return lang_error(s->ctx, bad->loc, D_STRING_USE,
                          "a string can only be compared with `==` or `!=` to a string parameter");
      return lang_error(s->ctx, bad->loc, D_DTYPE_USE,
                        "a dtype can only be compared with `==` or `!=` to another dtype");
    }
    i->ty = sty_scalar(DT_BOOL);
    i->ty.weak = 1;
    i->is_const = true;
    bool eq = k == STY_STR ? a->cv.s == b->cv.s : a->cv.dt == b->cv.dt;
    i->cv.i = op == OP_EQ ? eq : !eq;
    return true;
  }
  bool oka = need_value(s, a, n->a), okb = need_value(s, b, n->b);
  if (!oka || !okb) return false;

  if (cls == OPC_MATMUL) {
    if (!sema_supported(s, &a->ty, oploc, what) || !sema_supported(s, &b->ty, oploc, what))
      return false;
    if (!sema_check_dot(s, a, b, oploc, what, &i->ty)) return false;
    i->opnd = a->ty;
    return true;
  }
  struct sty t;
  if (!sema_join(s, a, b, &t, oploc, what)) return false;
  i->opnd = t;
  ir_dtype dt = (ir_dtype)t.dt;
  switch (cls) {
  case OPC_LOGIC:
    if (dt != DT_BOOL)
      return lang_error(s->ctx, oploc, D_OPERAND_TYPE, "`%s` needs bool operands, found %s and %s",
                        opname, sty_str(s, &a->ty), sty_str(s, &b->ty));
    i->ty = t;
    break;
  case OPC_BIT:
  case OPC_SHIFT:
    if (ir_dtype_is_float(dt))
      return lang_error(s->ctx, oploc, D_OPERAND_TYPE, "`%s` needs int or bool operands, found %s and %s",
                        opname, sty_str(s, &a->ty), sty_str(s, &b->ty));
    i->ty = t;
    break;
  case OPC_CMP:
    i->ty = t;
    i->ty.dt = DT_BOOL;
    break;
  case OPC_ARITH:
    if (dt == DT_BOOL)
      return lang_error(s->ctx, oploc, D_OPERAND_TYPE,
                        "`%s` needs numbers, found %s and %s (use `||`, `&&` or `^` on bools)",
                        opname, sty_str(s, &a->ty), sty_str(s, &b->ty));
    i->ty = t;
    /* An integer division by a constant zero is certainly a mistake, even at run time. */
    if ((op == OP_DIV || op == OP_REM) && ir_dtype_is_int(dt) && b->is_const &&
        !sty_is_float(&b->ty) && b->cv.i == 0 && !a->is_const)
      return lang_error(s->ctx, n->b->loc, D_DIV_ZERO, "integer %s by zero",
                        op == OP_DIV ? "division" : "remainder");
    break;
  default:
    return false;
  }
  if (a->is_const && b->is_const && t.rank == 0) {
    struct cval ca = sema_convert_const(a->cv, (ir_dtype)a->ty.dt, dt);
    struct cval cb = sema_convert_const(b->cv, (ir_dtype)b->ty.dt, dt);
    if (!fold_binary(s, n, op, dt, ca, cb, &i->cv)) return false;
    i->is_const = true;
  }
  return true;
}

static struct sema_info *check_binary(struct sema *s, struct ast_node *n, struct sema_info *i) {
  struct sema_info *a = sema_expr(s, n->a);
  struct sema_info *b = sema_expr(s, n->b);
  if (!type_binary(s, n, n->op, a, b, i)) return poison(i);
  return i;
}

/* A subscript with tile entries (i->kinds SLICE_GATHER) follows NumPy's advanced
 * indexing: the index entries (tiles and scalar indices) broadcast to one shape B; when
 * they are adjacent, B takes their place among the slices' dimensions, otherwise it comes
 * first. `E[ids, 0 : +D]` with ids [BB] is [BB, D]; `X[r[:, None], c[None, :]]` is a
 * pointwise [BM, BN] gather. Replaces *r (the slices' dimensions) with the result shape. */
static bool gather_shape(struct sema *s, struct ast_node *n, struct sema_info *i, struct sty *r) {
  uint32_t rank = n->list.n;
  int first = -1, last = -1;
  bool any = false;
  for (uint32_t d = 0; d < rank; d++) {
    if (i->kinds[d] == SLICE_GATHER) any = true;
    if (i->kinds[d] == SLICE_INDEX || i->kinds[d] == SLICE_GATHER) {
      if (first < 0) first = (int)d;
      last = (int)d;
    }
  }
  i->gather = any;
  if (!any) return true;
  struct sty b = sty_scalar(DT_I32);
  for (uint32_t d = 0; d < rank; d++) {
    if (i->kinds[d] != SLICE_GATHER) continue;
    struct ast_node *e = n->list.v[d];
    struct sty t = sema_info(s, e)->ty, nb = b;
    if (!sema_broadcast(s, &b, &t, &nb, e->loc, "the index tiles of a gather")) return false;
    b = nb;
  }
  bool adjacent = true;
  for (int d = first; d <= last; d++)
    if (i->kinds[d] == SLICE_RANGE || i->kinds[d] == SLICE_FULL) adjacent = false;
  int pos = 0;
  if (adjacent)
    for (int d = 0; d < first; d++) pos += i->kinds[d] == SLICE_RANGE || i->kinds[d] == SLICE_FULL;
  struct sty out = *r;
  out.rank = 0;
  uint32_t k = 0; /* next slice dimension of *r */
  for (int j = 0; j < pos; j++) out.dims[out.rank++] = r->dims[k++];
  if (b.rank + r->rank > IR_MAX_RANK)
    return lang_error(s->ctx, n->loc, D_TILE_SHAPE,
                      "tiles have at most 4 dimensions; this gather's would have %d (%d from the index "
                      "tiles, %d from slices)",
                      b.rank + r->rank, b.rank, r->rank);
  for (int j = 0; j < b.rank; j++) out.dims[out.rank++] = b.dims[j];
  while (k < r->rank) out.dims[out.rank++] = r->dims[k++];
  i->opnd = b;
  i->attr = pos;
  *r = out;
  return true;
}

/* Subscripts of a tensor parameter: a load (or, for a store target, the slice written). */
static struct sema_info *check_tensor_index(struct sema *s, struct ast_node *n, struct sema_info *i,
                                            struct sema_info *base) {
  const struct sema_sym *t = base->sym;
  if (n->list.n != t->ty.rank) {
    lang_error(s->ctx, n->loc, D_SUBSCRIPT_COUNT,
               "tensor `%s` has %d dimension%s but the subscript has %u entr%s", t->name,
               t->ty.rank, t->ty.rank == 1 ? "" : "s", n->list.n, n->list.n == 1 ? "y" : "ies");
    return poison(i);
  }
  bool ok = true;
  struct sty r = sty_scalar((ir_dtype)t->ty.dt);
  for (uint32_t d = 0; d < n->list.n; d++) {
    struct ast_node *e = n->list.v[d];
    struct ast_node *start = NULL;
    switch (e->kind) {
    case AST_NONE:
      ok = lang_error(s->ctx, e->loc, D_SUBSCRIPT_KIND,
                      "`None` cannot subscript a tensor; it inserts a dimension into a tile value, "
                      "e.g. x[:, None]");
      continue;
    case AST_FULL_SLICE:
      if (t->ty.dims[d] < 0) {
        ok = lang_error(s->ctx, e->loc, D_FULL_SLICE_DYNAMIC,
                        "`:` needs a dimension of compile-time size, but dimension %u of `%s` has "
                        "the run-time size `%s`; load a slice `start : +N` instead",
                        d, t->name, t->dim_shape[d] ? t->dim_shape[d]->name : "?");
        continue;
      }
      i->kinds[d] = SLICE_FULL;
      i->lens[d] = t->ty.dims[d];
      r.dims[r.rank++] = t->ty.dims[d];
      continue;
    case AST_SLICE: {
      start = e->a;
      if (!e->flag) {
        sema_expr(s, e->a);
        sema_expr(s, e->b);
        ok = lang_error(s->ctx, e->loc, D_SLICE_LENGTH,
                        "slices are written `start : +length` with a compile-time length; "
                        "`start : end` is not supported");
        continue;
      }
      int64_t len = 0;
      struct sema_info *li = sema_expr(s, e->b);
      if (is_err(li)) {
        ok = false;
      } else if (li->ty.kind != STY_VAL || li->ty.rank || !is_int(&li->ty) || !li->is_const) {
        ok = lang_error(s->ctx, e->b->loc, D_SLICE_LENGTH,
                        "a slice length must be a compile-time integer, found %s%s",
                        sty_str(s, &li->ty), li->is_const ? "" : " computed at run time");
      } else if (!tl_is_pow2(len = li->cv.i)) {
        ok = lang_error(s->ctx, e->b->loc, D_SLICE_LENGTH,
                        "a slice length must be a power of two, found %lld", (long long)len);
      }
      i->kinds[d] = SLICE_RANGE;
      i->lens[d] = (int32_t)len;
      if (r.rank < IR_MAX_RANK) r.dims[r.rank] = (int32_t)len;
      r.rank++;
      break;
    }
    default:
      start = e;
      i->kinds[d] = SLICE_INDEX;
      break;
    }
    struct sema_info *si = sema_expr(s, start);
    if (is_err(si)) {
      ok = false;
    } else if (i->kinds[d] == SLICE_INDEX && si->ty.kind == STY_VAL && si->ty.rank > 0 && si->ty.dt == DT_I32) {
      i->kinds[d] = SLICE_GATHER; /* a tile of indices */
    } else if (si->ty.kind != STY_VAL || si->ty.rank != 0 ||
               !sema_is_i32(si)) {
      ok = lang_error(s->ctx, start->loc, D_INDEX_TYPE,
                      i->kinds[d] == SLICE_INDEX
                          ? "a tensor index must be an i32 scalar, or an i32 tile of indices (a gather), found %s"
                          : "a slice start must be an i32 scalar, found %s",
                      sty_str(s, &si->ty));
    }
  }
  if (!ok) return poison(i);
  if (!gather_shape(s, n, i, &r)) return poison(i);
  i->ty = r;
  i->is_load = true;
  if (!sema_check_tile_shape(s, &r, n->loc)) return poison(i);
  return i;
}

/* Subscripts of a tile value: only `:` (keep a dimension) and `None` (insert one). */
static struct sema_info *check_tile_index(struct sema *s, struct ast_node *n, struct sema_info *i,
                                          struct sema_info *base) {
  uint32_t keep = 0, rank = 0;
  int64_t nones = 0;
  for (uint32_t k = 0; k < n->list.n; k++) {
    struct ast_node *e = n->list.v[k];
    if (e->kind == AST_FULL_SLICE) {
      keep++;
    } else if (e->kind == AST_NONE) {
      nones |= (int64_t)1 << (rank < 62 ? rank : 62);
    } else {
      lang_error(s->ctx, e->loc, D_SUBSCRIPT_KIND,
                 "a tile value can only be subscripted with `:` and `None` (to insert a "
                 "dimension); to load elements, subscript a tensor parameter");
      return poison(i);
    }
    rank++;
  }
  if (keep != base->ty.rank) {
    lang_error(s->ctx, n->loc, D_SUBSCRIPT_COUNT,
               "the subscript keeps %u dimension%s with `:` but the value %s has %d", keep,
               keep == 1 ? "" : "s", sty_str(s, &base->ty), base->ty.rank);
    return poison(i);
  }
  if (rank > IR_MAX_RANK) {
    lang_error(s->ctx, n->loc, D_TILE_SHAPE, "tiles have at most 4 dimensions, this one would have %u",
               rank);
    return poison(i);
  }
  struct sty r = base->ty;
  r.rank = (uint8_t)rank;
  r.weak = 0;
  for (uint32_t k = 0, src = 0; k < rank; k++) r.dims[k] = (nones >> k) & 1 ? 1 : base->ty.dims[src++];
  i->ty = r;
  i->attr = nones;
  return i;
}

static struct sema_info *check_index(struct sema *s, struct ast_node *n, struct sema_info *i) {
  struct sema_info *base = sema_expr(s, n->a);
  if (s->in_grid && base->ty.kind == STY_TENSOR) {
    lang_error(s->ctx, n->loc, D_GRID_VALUE,
               "tensor data cannot be read in grid(...): the grid is computed on the host before "
               "launch");
    return poison(i);
  }
  if (base->ty.kind == STY_TENSOR && base->sym) return check_tensor_index(s, n, i, base);
  if (!need_value(s, base, n->a)) return poison(i);
  return check_tile_index(s, n, i, base);
}

static struct sema_info *check_member(struct sema *s, struct ast_node *n, struct sema_info *i) {
  struct sema_info *a = sema_expr(s, n->a);
  if (strcmp(n->name, "T") != 0) {
    lang_error(s->ctx, n->loc2, D_MEMBER, "unknown attribute `.%s`; the only attribute is `.T` (transpose)",
               n->name);
    return poison(i);
  }
  if (!need_value(s, a, n->a)) return poison(i);
  if (a->ty.rank != 2) {
    lang_error(s->ctx, n->loc, D_ARG_TYPE, "`.T` transposes a 2-d tile, found %s", sty_str(s, &a->ty));
    return poison(i);
  }
  i->ty = a->ty;
  i->ty.dims[0] = a->ty.dims[1];
  i->ty.dims[1] = a->ty.dims[0];
  return i;
}

struct sema_info *sema_expr(struct sema *s, struct ast_node *n) {
  struct sema_info *i = sema_info(s, n);
  memset(i, 0, sizeof *i);
  i->builtin = BI_NONE;
  switch (n->kind) {
  case AST_INT:
    i->ty = sty_scalar(n->ival > INT32_MAX ? DT_U32 : DT_I32); /* 2147483648 .. 4294967295: u32 */
    i->ty.weak = 1;
    i->is_const = true;
    i->cv.i = n->ival;
    return i;
  case AST_FLOAT:
  case AST_INF:
    i->ty = sty_scalar(DT_F32);
    i->ty.weak = 1;
    i->is_const = true;
    i->cv.f = n->kind == AST_INF ? INFINITY : n->fval;
    return i;
  case AST_BOOL:
    i->ty = sty_scalar(DT_BOOL);
    i->ty.weak = 1;
    i->is_const = true;
    i->cv.i = n->ival;
    return i;
  case AST_STRING:
    i->ty = sty_of(STY_STR);
    i->is_const = true;
    i->cv.s = n->sval;
    return i;
  case AST_DTYPE:
    i->ty = sty_of(STY_DTYPE);
    i->is_const = true;
    i->cv.dt = n->dt;
    return i;
  case AST_LIST:
    for (uint32_t k = 0; k < n->list.n; k++) sema_expr(s, n->list.v[k]);
    i->ty = sty_of(STY_LIST);
    return i;
  case AST_NAME: return check_name(s, n, i);
  case AST_UNARY: return check_unary(s, n, i);
  case AST_BINARY: return check_binary(s, n, i);
  case AST_CALL: return sema_call(s, n);
  case AST_INDEX: return check_index(s, n, i);
  case AST_MEMBER: return check_member(s, n, i);
  case AST_NONE:
    lang_error(s->ctx, n->loc, D_SUBSCRIPT_KIND, "`None` can only appear in a subscript, e.g. x[:, None]");
    return poison(i);
  case AST_ERROR: return poison(i);
  default:
    lang_internal_error(s->ctx, n->loc, "sema_expr: unexpected %s node", ast_kind_names[n->kind]);
    return poison(i);
  }
}

/* ---- statements ---- */

/* Whether a value of type `from` (its info) may be bound to a variable of type `to`: equal
 * types, or a weak scalar that converts without loss of kind (and splats to a tile). */
static bool assignable(const struct sema_info *from, const struct sty *to) {
  if (sty_same(&from->ty, to)) return true;
  if (from->ty.kind != STY_VAL || to->kind != STY_VAL || !from->ty.weak || from->ty.rank) return false;
  return sema_adopt((ir_dtype)from->ty.dt, (ir_dtype)to->dt) == to->dt && sema_weak_fits(from, (ir_dtype)to->dt);
}

/* Resolves a `let x: T[...]` annotation. */
static bool resolve_annotation(struct sema *s, struct ast_node *t, struct sty *out) {
  *out = sty_of(STY_VAL);
  struct sema_info *di = sema_expr(s, t->a);
  if (is_err(di)) return false;
  if (di->ty.kind != STY_DTYPE)
    return lang_error(s->ctx, t->a->loc, D_UNKNOWN_DTYPE, "unknown dtype `%s`",
                      lang_loc_text(s->ctx, t->a->loc));
  out->dt = (uint8_t)di->cv.dt;
  if (t->list.n > IR_MAX_RANK)
    return lang_error(s->ctx, t->loc, D_TILE_SHAPE, "tiles have at most 4 dimensions, this one would have %u",
                      t->list.n);
  for (uint32_t k = 0; k < t->list.n; k++) {
    int64_t d = 0;
    if (!sema_need_const_int(s, t->list.v[k], "a tile dimension", &d)) return false;
    out->dims[out->rank++] = (int32_t)TL_MAX(TL_MIN(d, INT32_MAX), INT32_MIN);
  }
  return sema_check_tile_shape(s, out, t->loc);
}

static void note_carried(struct sema *s, struct sema_sym *sym) {
  for (uint32_t k = 0; k < s->constructs.n; k++) {
    if (sym->depth >= s->construct_depth.v[k]) continue;
    struct sema_info *ci = s->constructs.v[k];
    bool seen = false;
    for (uint32_t j = 0; j < ci->carried.n; j++) seen |= ci->carried.v[j] == sym;
    if (!seen) VEC_PUSH(s->ctx->arena, ci->carried, sym);
  }
}

static void check_block(struct sema *s, struct ast_node *b);
static void check_stmt(struct sema *s, struct ast_node *n);

static void check_decl(struct sema *s, struct ast_node *n) {
  struct sema_info *i = sema_info(s, n);
  memset(i, 0, sizeof *i);
  struct sema_info *v = sema_expr(s, n->b);
  struct sema_sym *sym = new_sym(s, n->kind == AST_LET ? SYM_LET : SYM_VAR, n->name, n->loc2);
  sym->ty = sty_of(STY_ERROR);
  if (need_value(s, v, n->b)) {
    struct sty ty = v->ty;
    if (n->a) {
      struct sty ann;
      if (!resolve_annotation(s, n->a, &ann)) {
        ty = sty_of(STY_ERROR);
      } else if (!assignable(v, &ann)) {
        lang_error(s->ctx, n->b->loc, D_ASSIGN_TYPE, "`%s` is declared as %s but the value is %s",
                   n->name, sty_str(s, &ann), sty_str(s, &v->ty));
        ty = sty_of(STY_ERROR);
      } else {
        ty = ann;
        if (v->is_const && ann.rank == 0 && ann.kind == STY_VAL) {
          sym->is_const = n->kind == AST_LET;
          sym->cv = sema_convert_const(v->cv, (ir_dtype)v->ty.dt, (ir_dtype)ann.dt);
        }
      }
    } else if (n->kind == AST_LET) {
      sym->is_const = v->is_const;
      sym->cv = v->cv;
    } else {
      ty.weak = 0; /* a var has a fixed dtype: a weak initializer takes its own */
    }
    if (n->kind == AST_VAR) ty.weak = 0, sym->is_const = false;
    sym->ty = ty;
  }
  i->sym = sym;
  declare(s, sym);
}

/* `let (a, b) = split(x);`: split() is the one builtin that gives two tiles, and this is
 * the one place it may be called (sema.split_call lets check_split accept that call). */
static void check_let_tuple(struct sema *s, struct ast_node *n) {
  struct sema_info *i = sema_info(s, n);
  memset(i, 0, sizeof *i);
  struct ast_node *v = n->b;
  struct ast_node *saved = s->split_call;
  s->split_call = v->kind == AST_CALL ? v : NULL;
  struct sema_info *vi = sema_expr(s, v);
  s->split_call = saved;
  struct sty ty = sty_of(STY_ERROR);
  if (!is_err(vi)) {
    if (vi->builtin != BI_SPLIT)
      lang_error(s->ctx, v->loc, D_SPLIT, "`let (...)` binds the two tiles of split(x); this value is one %s",
                 sty_str(s, &vi->ty));
    else if (n->list.n != 2)
      lang_error(s->ctx, n->loc, D_SPLIT, "split() gives 2 tiles, but this `let` names %u", n->list.n);
    else
      ty = vi->ty;
  }
  for (uint32_t k = 0; k < n->list.n; k++) {
    struct ast_node *name = n->list.v[k];
    struct sema_sym *sym = new_sym(s, SYM_LET, name->name, name->loc);
    sym->ty = ty;
    struct sema_info *ni = sema_info(s, name);
    memset(ni, 0, sizeof *ni);
    ni->sym = sym;
    declare(s, sym);
  }
}

/* The value `vn` written to the tensor subscript `target` (info ti): the tensor is `out`
 * and the value broadcasts to the subscript's shape. n: the assignment (with its operator
 * for `+=`), or the store()/atomic call. Returns false after a diagnostic. */
static bool check_store_value(struct sema *s, struct ast_node *n, enum ast_op op, struct ast_node *target,
                              struct sema_info *ti, struct ast_node *vn, const char *verb) {
  struct sema_sym *t = sema_info(s, target->a)->sym;
  struct sema_info *v = sema_expr(s, vn);
  if (!t->is_out) {
    lang_error(s->ctx, target->loc, D_STORE_NOT_OUT,
               "cannot %s tensor `%s`: it is an input; declare it `%s: out %s[...]` to write it", verb,
               t->name, t->name, ir_dtype_name((ir_dtype)t->ty.dt));
    lang_note(s->ctx, t->loc, "`%s` is declared here", t->name);
    return false;
  }
  if (is_err(ti) || !need_value(s, v, vn)) return false;
  struct sty value = v->ty;
  if (op != OP_NONE) {
    struct sema_info *tmp = sema_info(s, n);
    memset(tmp, 0, sizeof *tmp);
    if (!type_binary(s, n, op, ti, v, tmp)) return false;
    value = tmp->ty;
  }
  if (!sema_supported(s, &value, n->loc, "storing")) return false;
  struct sty out;
  if (!sema_broadcast(s, &value, &ti->ty, &out, vn->loc, "a store")) return false;
  if (out.rank != ti->ty.rank || memcmp(out.dims, ti->ty.dims, sizeof(int32_t) * out.rank) != 0)
    return lang_error(s->ctx, vn->loc, D_BROADCAST,
                      "a value of shape %s cannot be stored into a slice of shape %s", shape_str(s, &value),
                      shape_str(s, &ti->ty));
  return true;
}

static void check_store(struct sema *s, struct ast_node *n, struct ast_node *target,
                        struct sema_info *ti) {
  check_store_value(s, n, n->op, target, ti, n->b, "store to");
}

/* mask=: a bool scalar or a bool tile that broadcasts to the access's shape `to`. */
bool sema_check_mask(struct sema *s, struct ast_node *m, const struct sty *to, const char *fname) {
  struct sema_info *mi = sema_expr(s, m);
  if (is_err(mi) || !need_value(s, mi, m)) return false;
  if (mi->ty.dt != DT_BOOL)
    return lang_error(s->ctx, m->loc, D_MASK, "the mask of %s() must be bool (a comparison such as `rows < n`), found %s",
                      fname, sty_str(s, &mi->ty));
  struct sty out;
  if (!sema_broadcast(s, &mi->ty, to, &out, m->loc, "a mask")) return false;
  if (out.rank != to->rank || memcmp(out.dims, to->dims, sizeof(int32_t) * out.rank) != 0)
    return lang_error(s->ctx, m->loc, D_MASK, "a mask of shape %s does not fit an access of shape %s",
                      shape_str(s, &mi->ty), shape_str(s, to));
  return true;
}

/* store(T[...], value, mask?) and atomic_add/max/min(T[...], value, mask?): the first
 * argument is a tensor subscript written to. store() is a statement (no value); an atomic
 * gives the old values. */
struct sema_info *sema_check_write_call(struct sema *s, struct ast_node *n, struct sema_info *i, int b,
                                        struct ast_node **args) {
  const char *fname = builtin_names[b];
  struct ast_node *target = args[0];
  struct sema_info *base = target->kind == AST_INDEX ? sema_expr(s, target->a) : NULL;
  if (!base || base->ty.kind != STY_TENSOR || !base->sym) {
    if (base && is_err(base)) return poison(i);
    struct sema_info *x = base ? sema_info(s, target) : sema_expr(s, target);
    lang_error(s->ctx, target->loc, D_ARG_TYPE, "%s() takes a tensor subscript like T[i : +N] first, found %s",
               fname, base ? "a subscript of a tile value" : sty_str(s, &x->ty));
    return poison(i);
  }
  struct sema_info *ti = sema_info(s, target);
  memset(ti, 0, sizeof *ti);
  check_tensor_index(s, target, ti, base);
  ti->is_load = false;
  if (!check_store_value(s, n, OP_NONE, target, ti, args[1], b == BI_STORE ? "store to" : "update"))
    return poison(i);
  if (args[2] && !sema_check_mask(s, args[2], &ti->ty, fname)) return poison(i);
  if (b == BI_STORE) {
    i->ty = sty_of(STY_VOID);
    return i;
  }
  ir_dtype dt = (ir_dtype)ti->ty.dt;
  bool ok = dt == DT_I32 || dt == DT_U32 || dt == DT_F32 || (b == BI_ATOMIC_ADD && (dt == DT_F16 || dt == DT_BF16));
  if (!ok)
    return lang_error(s->ctx, target->loc, D_ATOMIC_TYPE,
                      "%s() on a tensor of %s is not supported: atomics work on i32, u32 and f32%s", fname,
                      ir_dtype_name(dt), b == BI_ATOMIC_ADD ? " (add also on f16 and bf16)" : ""),
           poison(i);
  i->ty = ti->ty;
  i->ty.weak = 0;
  return i;
}

static void check_assign(struct sema *s, struct ast_node *n) {
  struct ast_node *target = n->a;
  if (target->kind == AST_INDEX) {
    struct sema_info *base = sema_expr(s, target->a);
    if (base->ty.kind == STY_TENSOR && base->sym) {
      struct sema_info *ti = sema_info(s, target);
      memset(ti, 0, sizeof *ti);
      check_tensor_index(s, target, ti, base);
      ti->is_load = false;
      check_store(s, n, target, ti);
      return;
    }
    if (!is_err(base))
      lang_error(s->ctx, target->loc, D_ASSIGN_TARGET,
                 "only tensor parameters can be stored to through a subscript; a tile value is "
                 "immutable, assign a new value to its `var` instead");
    sema_expr(s, n->b);
    return;
  }
  if (target->kind != AST_NAME) {
    if (target->kind != AST_ERROR)
      lang_error(s->ctx, target->loc, D_ASSIGN_TARGET,
                 "cannot assign to this expression; the left of `%s` must be a `var` or a tensor "
                 "slice",
                 n->op == OP_NONE ? "=" : arena_printf(s->ctx->arena, "%s=", ast_op_texts[n->op]));
    sema_expr(s, n->b);
    return;
  }
  struct sema_info *ti = sema_expr(s, target);
  struct sema_info *v = sema_expr(s, n->b);
  if (is_err(ti)) return;
  struct sema_sym *sym = ti->sym;
  if (sym->kind == SYM_TENSOR) {
    lang_error(s->ctx, target->loc, D_ASSIGN_TARGET,
               "cannot assign to tensor `%s` as a whole; store to a slice, e.g. %s[i : +N] = value",
               sym->name, sym->name);
    return;
  }
  if (sym->kind != SYM_VAR) {
    lang_error(s->ctx, target->loc, D_ASSIGN_IMMUTABLE,
               "cannot assign to `%s`: it is %s%s", sym->name, sym_what(sym),
               sym->kind == SYM_LET ? "; declare it with `var` to make it mutable" : "");
    if (sym->loc.line) lang_note(s->ctx, sym->loc, "`%s` is declared here", sym->name);
    return;
  }
  note_carried(s, sym);
  if (!need_value(s, v, n->b) || is_err(ti)) return;
  if (n->op == OP_NONE) {
    if (!assignable(v, &sym->ty))
      lang_error(s->ctx, n->b->loc, D_ASSIGN_TYPE,
                 "cannot assign %s to `%s` of type %s; a var keeps its dtype and shape%s",
                 sty_str(s, &v->ty), sym->name, sty_str(s, &sym->ty),
                 v->ty.dt != sym->ty.dt ? arena_printf(s->ctx->arena, " (convert with %s(...))",
                                                       ir_dtype_name((ir_dtype)sym->ty.dt))
                                        : "");
    return;
  }
  struct sema_info *r = sema_info(s, n);
  memset(r, 0, sizeof *r);
  if (!type_binary(s, n, n->op, ti, v, r)) return;
  if (!sty_same(&r->ty, &sym->ty))
    lang_error(s->ctx, n->loc2.line ? n->loc2 : n->loc, D_ASSIGN_TYPE,
               "`%s %s= ...` would change `%s` from %s to %s; a var keeps its dtype and shape",
               sym->name, ast_op_texts[n->op], sym->name, sty_str(s, &sym->ty), sty_str(s, &r->ty));
}

static bool is_range_bound(const struct sema_info *b) {
  return b->ty.kind == STY_VAL && b->ty.rank == 0 && sema_is_i32(b);
}

static void check_for(struct sema *s, struct ast_node *n) {
  struct sema_info *fi = sema_info(s, n);
  memset(fi, 0, sizeof *fi);
  struct ast_node *r = n->a;
  fi->attr = 0;
  if (r->kind != AST_CALL || r->a->kind != AST_NAME || strcmp(r->a->name, "range") != 0) {
    if (r->kind != AST_ERROR)
      lang_error(s->ctx, r->loc, D_RANGE, "a for loop runs over `range(...)`: for i in range(start, end, step)");
  } else {
    uint32_t npos = 0;
    for (uint32_t k = 0; k < r->list.n; k++) {
      struct ast_node *arg = r->list.v[k];
      if (arg->kind == AST_NAMED_ARG) {
        if (strcmp(arg->name, "stages") != 0) {
          lang_error(s->ctx, arg->loc2, D_ARG_NAME,
                     "range() has no argument named `%s`; its only named argument is `stages`",
                     arg->name);
          continue;
        }
        int64_t st = 0;
        if (!sema_need_const_int(s, arg->a, "`stages`", &st)) continue;
        if (st < 0 || st > 16)
          lang_error(s->ctx, arg->a->loc, D_RANGE, "`stages` must be between 0 and 16, found %lld",
                     (long long)st);
        else
          fi->attr = st > 1 ? st : 1; /* 0 and 1: no pipelining; no `stages=` (attr 0): the compiler picks */
        continue;
      }
      npos++;
      struct sema_info *b = sema_expr(s, arg);
      if (is_err(b)) continue;
      if (!is_range_bound(b)) {
        lang_error(s->ctx, arg->loc, D_RANGE, "range() bounds and step must be i32 scalars, found %s",
                   sty_str(s, &b->ty));
      } else if (npos == 3 && b->is_const && b->cv.i <= 0) {
        lang_error(s->ctx, arg->loc, D_RANGE, "the step of range() must be positive, found %lld",
                   (long long)b->cv.i);
      }
    }
    if (npos < 1 || npos > 3) {
      lang_error(s->ctx, r->loc, D_ARG_COUNT, "range() takes 1 to 3 positional arguments (end; start, "
                 "end; or start, end, step), found %u", npos);
    }
  }
  scope_push(s);
  struct sema_sym *iv = new_sym(s, SYM_LOOP, n->name, n->loc2);
  iv->ty = sty_scalar(DT_I32);
  declare(s, iv);
  fi->sym = iv;
  VEC_PUSH(s->ctx->arena, s->constructs, fi);
  VEC_PUSH(s->ctx->arena, s->construct_depth, s->marks.n);
  s->loops++;
  check_block(s, n->b);
  s->loops--;
  s->constructs.n--;
  s->construct_depth.n--;
  scope_pop(s);
}

static void check_else(struct sema *s, struct ast_node *e) {
  if (!e) return;
  if (e->kind == AST_IF)
    check_stmt(s, e);
  else
    check_block(s, e);
}

static void check_if(struct sema *s, struct ast_node *n) {
  struct sema_info *ii = sema_info(s, n);
  struct sema_info *c = sema_expr(s, n->a);
  /* sema_expr reset the condition's info; ii is a different slot. */
  memset(ii, 0, sizeof *ii);
  ii->taken = -1;
  bool ok = need_value(s, c, n->a);
  if (ok && c->ty.rank != 0) {
    lang_error(s->ctx, n->a->loc, D_COND_TYPE,
               "an if condition must be a scalar bool, found %s; use where(cond, a, b) to choose "
               "elementwise",
               sty_str(s, &c->ty));
    ok = false;
  } else if (ok && c->ty.dt != DT_BOOL) {
    lang_error(s->ctx, n->a->loc, D_COND_TYPE,
               "an if condition must be bool, found %s; compare explicitly, e.g. x != 0",
               sty_str(s, &c->ty));
    ok = false;
  }
  if (ok && c->is_const) {
    /* A constant condition: only the taken branch is checked and lowered. */
    ii->taken = c->cv.i ? 1 : 0;
    if (c->cv.i)
      check_block(s, n->b);
    else
      check_else(s, n->c);
    return;
  }
  VEC_PUSH(s->ctx->arena, s->constructs, ii);
  VEC_PUSH(s->ctx->arena, s->construct_depth, s->marks.n + 1);
  check_block(s, n->b);
  check_else(s, n->c);
  s->constructs.n--;
  s->construct_depth.n--;
}

static void check_stmt(struct sema *s, struct ast_node *n) {
  if (s->ctx->stopped) return;
  switch (n->kind) {
  case AST_LET:
  case AST_VAR: check_decl(s, n); return;
  case AST_LET_TUPLE: check_let_tuple(s, n); return;
  case AST_ASSIGN: check_assign(s, n); return;
  case AST_FOR: check_for(s, n); return;
  case AST_IF: check_if(s, n); return;
  case AST_EXPR_STMT: {
    struct sema_info *v = sema_expr(s, n->a);
    bool writes = n->a->kind == AST_CALL && (v->builtin == BI_STORE || v->builtin == BI_ATOMIC_ADD ||
                                             v->builtin == BI_ATOMIC_MAX || v->builtin == BI_ATOMIC_MIN);
    if (!is_err(v) && !writes)
      lang_error(s->ctx, n->a->loc, D_UNUSED_RESULT,
                 "expression result unused; a statement must assign, store, loop or branch");
    return;
  }
  case AST_ERROR: return;
  case AST_BLOCK: check_block(s, n); return;
  case AST_RETURN:
    /* ends the program instance; irgen moves what follows an `if` that may return into its
     * branches (lower_seq). Inside a loop that would need the loop to stop early. */
    if (s->loops)
      lang_error(s->ctx, n->loc, D_RETURN_IN_LOOP,
                 "`return` inside a for loop is not supported yet; end the loop with a condition instead");
    return;
  default:
    lang_internal_error(s->ctx, n->loc, "check_stmt: unexpected %s node", ast_kind_names[n->kind]);
  }
}

static void check_block(struct sema *s, struct ast_node *b) {
  scope_push(s);
  for (uint32_t k = 0; k < b->list.n && !s->ctx->stopped; k++) {
    if (b->list.v[k]->kind == AST_RETURN && k + 1 < b->list.n)
      lang_error(s->ctx, b->list.v[k + 1]->loc, D_UNREACHABLE,
                 "this statement follows a `return` in the same block: it never runs");
    check_stmt(s, b->list.v[k]);
  }
  scope_pop(s);
}

/* ---- the kernel ---- */

void sema_begin(struct sema *s, struct lang_ctx *c, struct ast_file *f) {
  memset(s, 0, sizeof *s);
  s->ctx = c;
  s->file = f;
  s->info = ARENA_NEWN(c->arena, struct sema_info, f->nnodes + 1);
  s->quiet_undeclared = f->syntax_errors > 0;
  s->warps = 4;
}


static const char *cvalue_str(struct sema *s, const struct sema_sym *p) {
  switch (p->ty.kind) {
  case STY_STR: return arena_printf(s->ctx->arena, "\"%s\"", p->cv.s);
  case STY_DTYPE: return ir_dtype_name(p->cv.dt);
  default:
    if (p->ty.dt == DT_BOOL) return p->cv.i ? "true" : "false";
    return arena_printf(s->ctx->arena, "%lld", (long long)p->cv.i);
  }
}

/* The compile-time parameters a constraint mentions, as "BM=256, BK=128". */
static void constraint_values(struct sema *s, struct ast_node *n, struct strbuf *sb, int *count) {
  if (!n) return;
  if (n->kind == AST_NAME) {
    struct sema_sym *sym = sema_info(s, n)->sym;
    if (sym && sym->kind == SYM_CPARAM) {
      const char *item = arena_printf(s->ctx->arena, "%s=%s", sym->name, cvalue_str(s, sym));
      if (sb->s && strstr(sb->s, item)) return;
      if ((*count)++) sb_puts(sb, ", ");
      sb_puts(sb, item);
    }
    return;
  }
  constraint_values(s, n->a, sb, count);
  constraint_values(s, n->b, sb, count);
  constraint_values(s, n->c, sb, count);
  for (uint32_t k = 0; k < n->list.n; k++) constraint_values(s, n->list.v[k], sb, count);
}

static void check_where(struct sema *s) {
  struct ast_kernel *k = s->kd->k;
  for (uint32_t w = 0; w < k->where.n; w++) {
    struct ast_node *e = k->where.v[w];
    struct sema_info *i = sema_expr(s, e);
    if (is_err(i)) continue;
    if (i->ty.kind != STY_VAL || i->ty.rank || i->ty.dt != DT_BOOL) {
      lang_error(s->ctx, e->loc, D_NOT_CONST, "a `where` constraint must be a compile-time bool, found %s",
                 sty_str(s, &i->ty));
      continue;
    }
    if (!i->is_const) {
      lang_error(s->ctx, e->loc, D_NOT_CONST,
                 "a `where` constraint must be a compile-time bool, but it depends on run-time values");
      continue;
    }
    if (!i->cv.i) {
      struct strbuf sb;
      sb_init(&sb, s->ctx->arena);
      int count = 0;
      constraint_values(s, e, &sb, &count);
      lang_error(s->ctx, e->loc, D_CONSTRAINT, "constraint `%s` is not satisfied%s%s%s",
                 lang_loc_text(s->ctx, e->loc), count ? " (" : "", sb_str(&sb), count ? ")" : "");
    }
  }
}

static void check_warps(struct sema *s) {
  struct ast_node *w = s->kd->k->warps;
  if (!w) return;
  int64_t v = 0;
  if (!sema_need_const_int(s, w, "warps(...)", &v)) return;
  if (v < 1 || v > 16 || !tl_is_pow2(v)) {
    lang_error(s->ctx, w->loc, D_WARPS, "warps must be a power of two between 1 and 16, found %lld",
               (long long)v);
    return;
  }
  s->warps = (int)v;
}

static void check_grid(struct sema *s) {
  struct ast_kernel *k = s->kd->k;
  s->in_grid = true;
  if (k->grid.n > 3)
    lang_error(s->ctx, k->grid.v[3]->loc, D_GRID_VALUE, "grid(...) takes 1 to 3 dimensions, found %u",
               k->grid.n);
  for (uint32_t g = 0; g < k->grid.n && g < 3; g++) {
    struct ast_node *e = k->grid.v[g];
    s->grid[s->ngrid++] = e;
    struct sema_info *i = sema_expr(s, e);
    if (!need_value(s, i, e)) continue;
    if (i->ty.rank != 0 || !sema_is_i32(i))
      lang_error(s->ctx, e->loc, D_GRID_VALUE, "a grid dimension must be an i32 scalar, found %s",
                 sty_str(s, &i->ty));
  }
  s->in_grid = false;
}


bool sema_kernel(struct sema *s, struct lang_ctx *c, struct ast_file *f,
                 struct sema_kernel_decl *kd, const struct lang_define *defs, uint32_t ndefs) {
  sema_begin(s, c, f);
  s->kd = kd;
  uint32_t errors = c->nerrors;
  scope_push(s);
  for (uint32_t k = 0; k < f->decls->consts.n; k++) scope_add(s, f->decls->consts.v[k]);
  scope_push(s);
  if (!sema_apply_defines(s, defs, ndefs)) return false;
  if (!sema_header(s)) return false;
  check_where(s);
  if (c->nerrors != errors) return false;
  check_warps(s);
  check_grid(s);
  check_block(s, kd->k->body);
  return c->nerrors == errors;
}

/* Scope access for sema_decl.c, which checks declarations with the same machinery. */
void sema_scope_push(struct sema *s) { scope_push(s); }
void sema_scope_add(struct sema *s, struct sema_sym *sym) { scope_add(s, sym); }
void sema_scope_reset(struct sema *s) {
  scope_truncate(s, 0);
  s->marks.n = 0;
}
void sema_declare(struct sema *s, struct sema_sym *sym) { declare(s, sym); }
struct sema_sym *sema_new_sym(struct sema *s, enum sym_kind kind, const char *name, struct lang_loc loc) {
  return new_sym(s, kind, name, loc);
}
struct sema_sym *sema_lookup(struct sema *s, const char *name) { return lookup(s, name); }
