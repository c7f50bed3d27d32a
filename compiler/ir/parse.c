/* parse.c - reads the text form of Tile IR written by print.c (grammar in IR.md).
 *
 * A hand-written scanner and recursive-descent parser: the IR grammar is small and regular,
 * and a test can start at any stage by feeding text here. Values must be defined before
 * use (structured SSA makes that always possible); %names and %numbers are looked up in a
 * per-function table. The first error stops the parse (IR text is machine-written; one
 * precise message is more useful than recovery).                                          */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "ir.h"

enum tok { T_EOF, T_IDENT, T_INT, T_FLOAT, T_VALUE, T_GLOBAL, T_PUNCT, T_ERR };

struct binding {
  const char *name; /* interned "%name" text without the % */
  ir_val value;
};

struct parser {
  const char *file, *src, *end, *p;
  uint32_t line, col;
  /* current token */
  enum tok tok;
  const char *ts;
  size_t tlen;
  uint32_t tline, tcol;
  struct arena *a;
  struct strtab *strs;
  struct strbuf *err;
  jmp_buf fail;
  struct ir_func *f;
  VEC(struct binding) binds; /* the visible names; scopes end by truncating it */
  struct ptrmap where;       /* name -> 1 + its index in binds (stale once truncated away) */
  int depth;                 /* regions being parsed, nested */
};

static void TL_PRINTF(2, 3) fail(struct parser *ps, const char *fmt, ...) {
  va_list ap;
  sb_printf(ps->err, "%s:%u:%u: error: ", ps->file, ps->tline, ps->tcol);
  va_start(ap, fmt);
  sb_vprintf(ps->err, fmt, ap);
  va_end(ap);
  sb_putc(ps->err, '\n');
  longjmp(ps->fail, 1);
}

static void skip_space(struct parser *ps) {
  for (;;) {
    while (ps->p < ps->end && isspace((unsigned char)*ps->p)) {
      if (*ps->p == '\n') {
        ps->line++;
        ps->col = 1;
      } else {
        ps->col++;
      }
      ps->p++;
    }
    if (ps->p + 1 < ps->end && ps->p[0] == '/' && ps->p[1] == '/') {
      while (ps->p < ps->end && *ps->p != '\n') ps->p++;
      continue;
    }
    break;
  }
}

static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.'; }

static void next(struct parser *ps) {
  skip_space(ps);
  ps->ts = ps->p;
  ps->tline = ps->line;
  ps->tcol = ps->col;
  if (ps->p >= ps->end) {
    ps->tok = T_EOF;
    ps->tlen = 0;
    return;
  }
  char c = *ps->p;
  const char *s = ps->p;
  if (c == '%' || c == '@') {
    s++;
    while (s < ps->end && is_ident_char(*s)) s++;
    ps->tok = c == '%' ? T_VALUE : T_GLOBAL;
    if (s == ps->p + 1) fail(ps, "expected a name after '%c'", c);
  } else if (isalpha((unsigned char)c) || c == '_') {
    while (s < ps->end && (isalnum((unsigned char)*s) || *s == '_')) s++;
    ps->tok = T_IDENT;
  } else if (isdigit((unsigned char)c) || ((c == '-' || c == '+') && s + 1 < ps->end &&
                                           (isdigit((unsigned char)s[1]) || s[1] == 'i' || s[1] == 'n'))) {
    /* numbers, including -inf, nan handled as identifiers below */
    const char *q = s + 1;
    if (!isdigit((unsigned char)c) && !isdigit((unsigned char)s[1])) {
      while (q < ps->end && isalpha((unsigned char)*q)) q++; /* -inf / +inf */
      ps->tok = T_FLOAT;
      s = q;
    } else {
      bool flt = false;
      while (q < ps->end && (isalnum((unsigned char)*q) || *q == '.' ||
                             ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E')))) {
        if (*q == '.' || *q == 'e' || *q == 'E') flt = true;
        if (*q == 'x') break; /* tile<64x...> */
        q++;
      }
      ps->tok = flt ? T_FLOAT : T_INT;
      s = q;
    }
  } else if (c == '-' && s + 1 < ps->end && s[1] == '>') {
    s += 2;
    ps->tok = T_PUNCT;
  } else {
    s++;
    ps->tok = T_PUNCT;
  }
  ps->tlen = (size_t)(s - ps->p);
  ps->col += (uint32_t)ps->tlen;
  ps->p = s;
}

static bool is(struct parser *ps, const char *text) {
  return ps->tlen == strlen(text) && memcmp(ps->ts, text, ps->tlen) == 0 && ps->tok != T_EOF;
}

static bool accept(struct parser *ps, const char *text) {
  if (!is(ps, text)) return false;
  next(ps);
  return true;
}

static void expect(struct parser *ps, const char *text) {
  if (!accept(ps, text))
    fail(ps, "expected '%s', found '%.*s'", text, (int)(ps->tok == T_EOF ? 3 : ps->tlen),
         ps->tok == T_EOF ? "EOF" : ps->ts);
}

static int64_t parse_int(struct parser *ps) {
  if (ps->tok != T_INT) fail(ps, "expected an integer, found '%.*s'", (int)ps->tlen, ps->ts);
  char buf[64];
  size_t n = TL_MIN(ps->tlen, sizeof buf - 1);
  memcpy(buf, ps->ts, n);
  buf[n] = 0;
  char *endp;
  long long v = strtoll(buf, &endp, 10);
  if (*endp) fail(ps, "bad integer '%s'", buf);
  next(ps);
  return v;
}

static double parse_number(struct parser *ps) {
  char buf[64];
  size_t n = TL_MIN(ps->tlen, sizeof buf - 1);
  memcpy(buf, ps->ts, n);
  buf[n] = 0;
  double v;
  if (ps->tok == T_IDENT && strcmp(buf, "inf") == 0)
    v = INFINITY;
  else if (ps->tok == T_IDENT && strcmp(buf, "nan") == 0)
    v = NAN;
  else if (ps->tok == T_FLOAT && strcmp(buf, "-inf") == 0)
    v = -INFINITY;
  else if (ps->tok == T_FLOAT && strcmp(buf, "+inf") == 0)
    v = INFINITY;
  else if (ps->tok == T_INT || ps->tok == T_FLOAT) {
    char *endp;
    v = strtod(buf, &endp);
    if (*endp) fail(ps, "bad number '%s'", buf);
  } else
    fail(ps, "expected a number, found '%.*s'", (int)ps->tlen, ps->ts);
  next(ps);
  return v;
}

/* ---- values ---- */

static const char *value_key(struct parser *ps) {
  return strtab_intern(ps->strs, ps->ts + 1, ps->tlen - 1);
}

/* A name is bound at most once among the visible bindings (bind refuses a second), so the
 * newest binding of a name is the only one that can be visible. */
static ir_val lookup(struct parser *ps, const char *key) {
  uint32_t i = ptrmap_get(&ps->where, key);
  return i && i <= ps->binds.n && ps->binds.v[i - 1].name == key ? ps->binds.v[i - 1].value : 0;
}

static void push_binding(struct parser *ps, const char *key, ir_val v) {
  struct binding b = {key, v};
  VEC_PUSH(ps->a, ps->binds, b);
  *ptrmap_slot(&ps->where, key) = ps->binds.n;
}

static void bind(struct parser *ps, const char *key, ir_val v) {
  if (lookup(ps, key)) fail(ps, "value '%%%s' is defined twice", key);
  push_binding(ps, key, v);
  if (!isdigit((unsigned char)key[0])) ps->f->values.v[v].name = key;
}

static ir_val use_value(struct parser *ps) {
  if (ps->tok != T_VALUE) fail(ps, "expected a value, found '%.*s'", (int)ps->tlen, ps->ts);
  const char *key = value_key(ps);
  ir_val v = lookup(ps, key);
  if (!v) fail(ps, "use of undefined value '%%%s'", key);
  next(ps);
  return v;
}

/* ---- types ---- */

static ir_dtype parse_dtype_text(struct parser *ps, const char *s, size_t n) {
  ir_dtype dt = ir_dtype_from_name(s, n);
  if (dt == DT_NONE) fail(ps, "unknown element type '%.*s'", (int)n, s);
  return dt;
}

/* tile<64x32xf16[, #L]>: the dims and dtype are scanned character by character because
 * "64x32xf16" is not a sequence of ordinary tokens. */
static ir_type_id parse_tile_type(struct parser *ps) {
  /* current token is '<'; scan raw text after it */
  const char *s = ps->p;
  int32_t dims[IR_MAX_RANK];
  int rank = 0;
  while (s < ps->end && isspace((unsigned char)*s)) s++;
  while (s < ps->end && isdigit((unsigned char)*s)) {
    /* the text is not NUL-terminated: no strtol, which would read past its end */
    const char *d0 = s;
    int64_t d = 0;
    for (; s < ps->end && isdigit((unsigned char)*s); s++)
      if (d <= (1 << 24)) d = d * 10 + (*s - '0');
    if (rank == IR_MAX_RANK) fail(ps, "tile rank exceeds %d", IR_MAX_RANK);
    if (d <= 0 || d > (1 << 24)) fail(ps, "bad tile dimension %.*s", (int)TL_MIN(s - d0, 32), d0);
    dims[rank++] = (int32_t)d;
    if (s >= ps->end || *s != 'x') fail(ps, "expected 'x' in tile type");
    s++;
  }
  const char *dt0 = s;
  while (s < ps->end && isalnum((unsigned char)*s)) s++;
  ir_dtype dt = parse_dtype_text(ps, dt0, (size_t)(s - dt0));
  ps->col += (uint32_t)(s - ps->p);
  ps->p = s;
  next(ps);
  struct ir_type t = {.kind = IR_TY_TILE, .dtype = (uint8_t)dt, .rank = (uint8_t)rank};
  memcpy(t.dims, dims, sizeof(int32_t) * (size_t)rank);
  if (accept(ps, ",")) {
    expect(ps, "#");
    int64_t l = parse_int(ps);
    if (l <= 0 || (uint64_t)l >= ps->f->layouts.n) fail(ps, "unknown layout #%lld", (long long)l);
    t.layout = (uint16_t)l;
  }
  expect(ps, ">");
  return ir_type_intern(ps->f, &t);
}

static ir_type_id parse_type(struct parser *ps, bool in_param) {
  if (ps->tok != T_IDENT) fail(ps, "expected a type, found '%.*s'", (int)ps->tlen, ps->ts);
  if (is(ps, "tile")) {
    next(ps);
    if (!is(ps, "<")) fail(ps, "expected '<' after 'tile'");
    return parse_tile_type(ps);
  }
  if (is(ps, "tensor")) {
    if (!in_param) fail(ps, "tensor types appear only in kernel parameters");
    next(ps);
    expect(ps, "<");
    if (ps->tok != T_IDENT) fail(ps, "expected an element type");
    ir_dtype dt = parse_dtype_text(ps, ps->ts, ps->tlen);
    next(ps);
    expect(ps, "[");
    int32_t dims[IR_MAX_RANK];
    int rank = 0;
    do {
      if (rank == IR_MAX_RANK) fail(ps, "tensor rank exceeds %d", IR_MAX_RANK);
      if (ps->tok == T_VALUE) {
        const char *key = value_key(ps);
        ir_val v = lookup(ps, key);
        if (!v) {
          /* first appearance of a shape symbol defines it */
          v = ir_add_param(ps->f, key, IR_PARAM_SHAPE, ir_type_scalar(ps->f, DT_I32), false);
          push_binding(ps, key, v);
        } else if (!ir_param_of(ps->f, v) || ir_param_of(ps->f, v)->kind != IR_PARAM_SHAPE) {
          fail(ps, "'%%%s' is not a shape symbol", key);
        }
        dims[rank++] = IR_DIM_SYM(v);
        next(ps);
      } else {
        int64_t d = parse_int(ps);
        if (d < 0 || d > INT32_MAX) fail(ps, "bad tensor dimension");
        dims[rank++] = (int32_t)d;
      }
    } while (accept(ps, ","));
    expect(ps, "]");
    expect(ps, ">");
    return ir_type_tensor(ps->f, dt, rank, dims);
  }
  if (is(ps, "void")) {
    next(ps);
    return ir_type_void(ps->f);
  }
  ir_dtype dt = parse_dtype_text(ps, ps->ts, ps->tlen);
  next(ps);
  return ir_type_scalar(ps->f, dt);
}

/* ---- ops ---- */

/* true when the current '{' opens an attribute dictionary ("{name=") rather than a region */
static bool at_attr_dict(struct parser *ps) {
  if (!is(ps, "{")) return false;
  const char *q = ps->p;
  while (q < ps->end && isspace((unsigned char)*q)) q++;
  if (q >= ps->end || !(isalpha((unsigned char)*q) || *q == '_')) return false;
  while (q < ps->end && (isalnum((unsigned char)*q) || *q == '_')) q++;
  while (q < ps->end && (*q == ' ' || *q == '\t')) q++;
  return q < ps->end && *q == '=';
}

static void parse_attrs(struct parser *ps, struct ir_op *op) {
  if (!at_attr_dict(ps)) return;
  next(ps);
  const struct ir_opinfo *info = &ir_ops[op->code];
  do {
    if (ps->tok != T_IDENT) fail(ps, "expected an attribute name");
    bool found = false;
    for (int k = 0; k < 3 && !found; k++)
      if (info->iattr[k] && is(ps, info->iattr[k])) {
        next(ps);
        expect(ps, "=");
        op->i[k] = parse_int(ps);
        found = true;
      }
    if (!found && info->fattr && is(ps, info->fattr)) {
      next(ps);
      expect(ps, "=");
      op->f = parse_number(ps);
      found = true;
    }
    if (!found) fail(ps, "op '%s' has no attribute '%.*s'", info->name, (int)ps->tlen, ps->ts);
  } while (accept(ps, ","));
  expect(ps, "}");
}

struct pending {
  const char *names[64];
  uint32_t n;
};

static void bind_results(struct parser *ps, struct pending *pr, uint32_t op) {
  const struct ir_op *o = &ps->f->ops.v[op];
  if (pr->n != o->nres)
    fail(ps, "'%s' defines %u values but the text names %u", ir_ops[o->code].name, o->nres, pr->n);
  for (uint32_t i = 0; i < pr->n; i++) bind(ps, pr->names[i], o->res + i);
}

static void parse_block(struct parser *ps, uint32_t blk);

static void check_result_types(struct parser *ps, uint32_t op) {
  /* "-> (t, ...)" must match the op's result types */
  const struct ir_op *o = &ps->f->ops.v[op];
  if (!accept(ps, "->")) {
    if (o->nres) fail(ps, "expected '-> (types)' for an op with results");
    return;
  }
  expect(ps, "(");
  for (uint32_t i = 0; i < o->nres; i++) {
    if (i) expect(ps, ",");
    ir_type_id t = parse_type(ps, false);
    if (t != ps->f->values.v[o->res + i].type) fail(ps, "result %u type does not match", i);
  }
  expect(ps, ")");
}

static void parse_op(struct parser *ps, uint32_t blk) {
  struct ir_func *f = ps->f;
  struct ir_builder b;
  ir_builder_at_end(&b, f, blk);
  struct pending pr = {.n = 0};
  b.loc = (struct ir_loc){ps->tline, ps->tcol}; /* every op built here: where its text starts */
  if (ps->tok == T_VALUE) {
    do {
      if (ps->tok != T_VALUE) fail(ps, "expected a result name");
      if (pr.n == TL_ARRAY_LEN(pr.names)) fail(ps, "too many results");
      pr.names[pr.n++] = value_key(ps);
      next(ps);
    } while (accept(ps, ","));
    expect(ps, "=");
  }
  if (ps->tok != T_IDENT) fail(ps, "expected an op name, found '%.*s'", (int)ps->tlen, ps->ts);
  ir_opcode code = ir_opcode_from_name(ps->ts, ps->tlen);
  if (code == IR_NONE) fail(ps, "unknown op '%.*s'", (int)ps->tlen, ps->ts);
  const struct ir_opinfo *info = &ir_ops[code];
  uint32_t op_line = ps->tline;
  next(ps);

  ir_val args[256];
  uint32_t nargs = 0;
  struct ir_op attrs = {.code = (uint16_t)code};

  if (code == IR_FOR) {
    if (ps->tok != T_VALUE) fail(ps, "expected the induction variable");
    const char *iv = value_key(ps);
    next(ps);
    expect(ps, "=");
    args[0] = use_value(ps);
    expect(ps, "to");
    args[1] = use_value(ps);
    expect(ps, "step");
    args[2] = use_value(ps);
    nargs = 3;
    const char *carried[250];
    uint32_t ncarried = 0;
    if (accept(ps, "iter")) {
      expect(ps, "(");
      do {
        if (ps->tok != T_VALUE) fail(ps, "expected a loop-carried value name");
        if (ncarried == TL_ARRAY_LEN(carried)) fail(ps, "too many loop-carried values");
        carried[ncarried++] = value_key(ps);
        next(ps);
        expect(ps, "=");
        args[nargs++] = use_value(ps);
      } while (accept(ps, ","));
      expect(ps, ")");
    }
    parse_attrs(ps, &attrs);
    uint32_t op = ir_build_for(&b, args[0], args[1], args[2], args + 3, nargs - 3);
    memcpy(f->ops.v[op].i, attrs.i, sizeof attrs.i);
    check_result_types(ps, op);
    uint32_t body = f->ops.v[op].region;
    uint32_t mark = ps->binds.n;
    bind(ps, iv, f->blocks.v[body].args);
    for (uint32_t i = 0; i < ncarried; i++) bind(ps, carried[i], f->blocks.v[body].args + 1 + i);
    expect(ps, "{");
    parse_block(ps, body);
    expect(ps, "}");
    ps->binds.n = mark; /* block arguments and body values are not visible after the loop */
    bind_results(ps, &pr, op);
    return;
  }
  if (code == IR_IF) {
    ir_val cond = use_value(ps);
    ir_type_id types[64];
    uint32_t ntypes = 0;
    if (accept(ps, "->")) {
      expect(ps, "(");
      if (!is(ps, ")")) do {
          if (ntypes == TL_ARRAY_LEN(types)) fail(ps, "too many results");
          types[ntypes++] = parse_type(ps, false);
        } while (accept(ps, ","));
      expect(ps, ")");
    }
    uint32_t op = ir_build_if(&b, cond, types, ntypes);
    uint32_t mark = ps->binds.n;
    expect(ps, "{");
    parse_block(ps, f->ops.v[op].region);
    expect(ps, "}");
    ps->binds.n = mark;
    expect(ps, "else");
    expect(ps, "{");
    parse_block(ps, f->ops.v[op].region + 1);
    expect(ps, "}");
    ps->binds.n = mark;
    bind_results(ps, &pr, op);
    return;
  }

  if (code == IR_WARP_SPECIALIZE) {
    parse_attrs(ps, &attrs);
    uint32_t op = ir_build(&b, code, NULL, 0, NULL, 0);
    memcpy(f->ops.v[op].i, attrs.i, sizeof attrs.i);
    static const char *const names[2] = {"producer", "consumer"};
    for (uint32_t r = 0; r < 2; r++) {
      uint32_t mark = ps->binds.n;
      expect(ps, names[r]);
      expect(ps, "{");
      parse_block(ps, f->ops.v[op].region + r);
      expect(ps, "}");
      ps->binds.n = mark;
    }
    bind_results(ps, &pr, op);
    return;
  }

  ir_type_id rtype = 0;
  if (code == IR_CONST) {
    double fv = 0;
    int64_t iv = 0;
    bool isbool = false, isfloat = false;
    if (is(ps, "true") || is(ps, "false")) {
      iv = is(ps, "true");
      isbool = true;
      next(ps);
    } else if (ps->tok == T_INT) {
      iv = parse_int(ps);
      fv = (double)iv;
    } else {
      fv = parse_number(ps);
      isfloat = true;
    }
    expect(ps, ":");
    rtype = parse_type(ps, false);
    const struct ir_type *t = ir_type(f, rtype);
    if (isbool && t->dtype != DT_BOOL) fail(ps, "boolean constant of non-bool type");
    if (isfloat && !ir_dtype_is_float(t->dtype)) {
      /* an integer constant written as a float: it must be a whole number in range (the
       * conversion of inf, nan or 1e300 to int64 is undefined) */
      if (!(fv >= -0x1p63 && fv < 0x1p63) || fv != trunc(fv))
        fail(ps, "constant %g is not an integer of type %s", fv, ir_dtype_name((ir_dtype)t->dtype));
      iv = (int64_t)fv;
    }
    /* a constant holds a value of its type, as fold computes them (eval.c): an integer that
     * does not fit is an error, a float is rounded to the type */
    if (!ir_dtype_is_float(t->dtype) && ir_wrap_int((ir_dtype)t->dtype, iv) != iv)
      fail(ps, "constant %lld does not fit %s", (long long)iv, ir_dtype_name((ir_dtype)t->dtype));
    uint32_t op = ir_build(&b, IR_CONST, NULL, 0, &rtype, 1);
    if (ir_dtype_is_float(t->dtype))
      f->ops.v[op].f = ir_round_float((ir_dtype)t->dtype, fv);
    else
      f->ops.v[op].i[0] = iv;
    bind_results(ps, &pr, op);
    return;
  }
  if (code == IR_LOAD || code == IR_STORE) {
    args[nargs++] = use_value(ps);
    expect(ps, "[");
    if (!is(ps, "]")) do {
        if (nargs >= 200) fail(ps, "too many indices");
        args[nargs++] = use_value(ps);
      } while (accept(ps, ","));
    expect(ps, "]");
    if (code == IR_STORE) { /* [pred,] value */
      expect(ps, ",");
      args[nargs++] = use_value(ps);
      if (accept(ps, ",")) args[nargs++] = use_value(ps);
    }
  } else if (ps->tok == T_VALUE && info->nargs != 0 && ps->tline == op_line) {
    /* operands are on the op's line: `barrier` followed by `%5 = ...` has none */
    do {
      if (nargs == TL_ARRAY_LEN(args)) fail(ps, "too many operands");
      args[nargs++] = use_value(ps);
    } while (accept(ps, ","));
  }
  parse_attrs(ps, &attrs);
  uint32_t nres = info->nres < 0 ? 0 : (uint32_t)info->nres;
  ir_type_id rtypes[256];
  ir_type_id *rt = &rtype;
  if (nres == 1) {
    expect(ps, ":");
    rtype = parse_type(ps, false);
  } else if (code == IR_WGMMA_WAIT) { /* its results are its operands, once waited for */
    nres = nargs;
    for (uint32_t i = 0; i < nargs; i++) rtypes[i] = f->values.v[args[i]].type;
    rt = rtypes;
  }
  uint32_t op = ir_build(&b, code, args, nargs, rt, nres);
  memcpy(f->ops.v[op].i, attrs.i, sizeof attrs.i);
  f->ops.v[op].f = attrs.f;
  bind_results(ps, &pr, op);
}

/* Regions nest at most this deep: the parser, the verifier, the passes and codegen recurse
 * once per level (the front end allows 256 levels of blocks; the GPU passes add a few). */
enum { MAX_NESTING = 512 };

static void parse_block(struct parser *ps, uint32_t blk) {
  if (++ps->depth > MAX_NESTING) fail(ps, "regions are nested too deeply (more than %d levels)", MAX_NESTING);
  while (ps->tok != T_EOF && !is(ps, "}") && !is(ps, "body")) parse_op(ps, blk);
  ps->depth--;
}

static int parse_list(struct parser *ps, const char *name, uint8_t *out, int max) {
  expect(ps, name);
  expect(ps, "=");
  expect(ps, "[");
  int n = 0;
  do {
    if (n == max) fail(ps, "too many entries in '%s'", name);
    int64_t v = parse_int(ps);
    if (v < 0 || v > 255) fail(ps, "value %lld out of range in '%s'", (long long)v, name);
    out[n++] = (uint8_t)v;
  } while (accept(ps, ","));
  expect(ps, "]");
  return n;
}

static int64_t parse_kv(struct parser *ps, const char *name) {
  expect(ps, name);
  expect(ps, "=");
  if (accept(ps, "#")) return parse_int(ps);
  return parse_int(ps);
}

/* #N = blocked<spt=[..], tpw=[..], wpc=[..], order=[..]> | slice<dim=D, parent=#P> |
 *      mma<wpc=[a,b], instr=[m,n,k]> | dot_op<op=I, parent=#P, kwidth=K> |
 *      shared<vec=V, per_phase=P, max_phase=M, order=[..]> */
static void parse_layout(struct parser *ps) {
  struct ir_func *f = ps->f;
  expect(ps, "#");
  int64_t id = parse_int(ps);
  if (id != (int64_t)f->layouts.n) fail(ps, "layouts must be numbered in order (expected #%u)", f->layouts.n);
  expect(ps, "=");
  struct ir_layout l = {0};
  if (accept(ps, "blocked")) {
    l.kind = IR_LAYOUT_BLOCKED;
    expect(ps, "<");
    int r = parse_list(ps, "spt", l.size_per_thread, IR_MAX_RANK);
    expect(ps, ",");
    if (parse_list(ps, "tpw", l.threads_per_warp, IR_MAX_RANK) != r) fail(ps, "rank mismatch");
    expect(ps, ",");
    if (parse_list(ps, "wpc", l.warps_per_cta, IR_MAX_RANK) != r) fail(ps, "rank mismatch");
    expect(ps, ",");
    if (parse_list(ps, "order", l.order, IR_MAX_RANK) != r) fail(ps, "rank mismatch");
    l.rank = (uint8_t)r;
  } else if (accept(ps, "slice")) {
    l.kind = IR_LAYOUT_SLICE;
    expect(ps, "<");
    l.dim = (int8_t)parse_kv(ps, "dim");
    expect(ps, ",");
    l.parent = (uint16_t)parse_kv(ps, "parent");
  } else if (accept(ps, "mma")) {
    l.kind = IR_LAYOUT_MMA;
    expect(ps, "<");
    if (parse_list(ps, "wpc", l.warps_per_cta, 2) != 2) fail(ps, "mma needs two warp counts");
    expect(ps, ",");
    if (parse_list(ps, "instr", l.instr, 3) != 3) fail(ps, "mma needs m, n, k");
    l.rank = 2;
  } else if (accept(ps, "dot_op")) {
    l.kind = IR_LAYOUT_DOT_OP;
    expect(ps, "<");
    l.op_idx = (int8_t)parse_kv(ps, "op");
    expect(ps, ",");
    l.parent = (uint16_t)parse_kv(ps, "parent");
    expect(ps, ",");
    l.k_width = (uint8_t)parse_kv(ps, "kwidth");
    l.rank = 2;
  } else if (accept(ps, "shared")) {
    l.kind = IR_LAYOUT_SHARED;
    expect(ps, "<");
    l.vec = (uint8_t)parse_kv(ps, "vec");
    expect(ps, ",");
    l.per_phase = (uint8_t)parse_kv(ps, "per_phase");
    expect(ps, ",");
    l.max_phase = (uint8_t)parse_kv(ps, "max_phase");
    expect(ps, ",");
    l.rank = (uint8_t)parse_list(ps, "order", l.order, IR_MAX_RANK);
    if (accept(ps, ",")) l.panel = (uint16_t)parse_kv(ps, "panel");
    /* codegen splits rows into vec-element chunks and swizzles by phase: powers of two */
    if (!l.vec || (l.vec & (l.vec - 1)) || !l.per_phase || (l.per_phase & (l.per_phase - 1)) || !l.max_phase ||
        (l.max_phase & (l.max_phase - 1)) || (l.panel & (l.panel - 1)))
      fail(ps, "shared layout: vec, per_phase, max_phase (at least 1) and panel must be powers of two");
  } else {
    fail(ps, "unknown layout kind '%.*s'", (int)ps->tlen, ps->ts);
  }
  expect(ps, ">");
  if ((l.kind == IR_LAYOUT_SLICE || l.kind == IR_LAYOUT_DOT_OP) && (l.parent == 0 || l.parent >= f->layouts.n))
    fail(ps, "layout parent #%u is not defined", l.parent);
  if (l.kind == IR_LAYOUT_SLICE) l.rank = (uint8_t)(f->layouts.v[l.parent].rank - 1);
  VEC_PUSH(f->arena, f->layouts, l);
}

static void parse_func(struct parser *ps, struct ir_module *m) {
  struct ir_loc at = {ps->tline, ps->tcol};
  expect(ps, "kernel");
  if (ps->tok != T_GLOBAL) fail(ps, "expected '@name'");
  char *name = arena_strndup(ps->a, ps->ts + 1, ps->tlen - 1);
  next(ps);
  struct ir_func *f = ir_func_new(ps->a, ps->strs, name);
  f->file = strtab_intern(ps->strs, ps->file, strlen(ps->file));
  f->loc = at;
  ps->f = f;
  ps->binds.n = 0;
  expect(ps, "(");
  uint32_t user_index = 0;
  if (!is(ps, ")")) do {
      if (ps->tok != T_VALUE) fail(ps, "expected a parameter name");
      const char *key = value_key(ps);
      next(ps);
      expect(ps, ":");
      bool out = accept(ps, "out");
      ir_type_id t = parse_type(ps, true);
      bool tensor = ir_type(f, t)->kind == IR_TY_TENSOR;
      if (!tensor && !ir_type_is_scalar(ir_type(f, t))) fail(ps, "parameters are tensors or scalars");
      if (out && !tensor) fail(ps, "'out' applies to tensors only");
      ir_val v = ir_add_param(f, key, tensor ? IR_PARAM_TENSOR : IR_PARAM_SCALAR, t, out);
      struct ir_param *par = ir_param_of(f, v);
      par->source_index = user_index++;
      bind(ps, key, v);
      if (tensor && accept(ps, "{")) {
        expect(ps, "align");
        expect(ps, "=");
        par->facts.align = (uint8_t)parse_int(ps);
        expect(ps, ",");
        expect(ps, "stride");
        expect(ps, "=");
        expect(ps, "[");
        int rank = ir_type(f, t)->rank;
        for (int i = 0; i < rank; i++) {
          if (i) expect(ps, ",");
          if (ps->tok == T_INT && is(ps, "1")) {
            par->facts.stride1[i] = 1;
            next(ps);
          } else if (accept(ps, "div16")) {
            par->facts.div16[i] = 1;
          } else {
            expect(ps, "?");
          }
        }
        expect(ps, "]");
        if (accept(ps, ",")) {
          expect(ps, "span31");
          par->facts.span31 = 1;
        }
        expect(ps, "}");
      }
    } while (accept(ps, ","));
  expect(ps, ")");
  expect(ps, "warps");
  expect(ps, "=");
  int64_t w = parse_int(ps);
  if (w < 1 || w > 32) fail(ps, "bad warp count %lld", (long long)w);
  f->warps = (int)w;
  if (accept(ps, "threads")) {
    expect(ps, "=");
    int64_t t = parse_int(ps);
    if (t < 32 || t > 1024 || t % 32) fail(ps, "bad thread count %lld", (long long)t);
    f->threads = (int)t;
  }
  if (accept(ps, "target")) {
    expect(ps, "=");
    char buf[32];
    if (ps->tok != T_IDENT || ps->tlen >= sizeof buf) fail(ps, "expected a target such as sm_90a");
    memcpy(buf, ps->ts, ps->tlen);
    buf[ps->tlen] = 0;
    f->target = tl_target_find(buf);
    if (!f->target) fail(ps, "unknown target '%s' (known: %s)", buf, tl_target_names());
    next(ps);
  }
  if (is(ps, "sched") && ps->p < ps->end && *ps->p == '(') {
    /* sched(key=value,...): the raw text up to ')' is the schedule option syntax */
    const char *q = ps->p + 1, *e = q;
    while (e < ps->end && *e != ')' && *e != '\n') e++;
    if (e >= ps->end || *e != ')') fail(ps, "unterminated sched(...)");
    char text[128], msg[256];
    if ((size_t)(e - q) >= sizeof text) fail(ps, "sched(...) is too long");
    memcpy(text, q, (size_t)(e - q));
    text[e - q] = 0;
    if (!tl_schedule_parse(text, &f->sched, msg, sizeof msg)) fail(ps, "%s", msg);
    ps->col += (uint32_t)(e + 1 - ps->p);
    ps->p = e + 1;
    next(ps);
  }
  if (accept(ps, "stage")) {
    expect(ps, "=");
    if (!f->target) fail(ps, "a GPU stage needs a target");
    if (accept(ps, "gpu")) f->stage = IR_STAGE_GPU;
    else if (accept(ps, "allocated")) f->stage = IR_STAGE_ALLOCATED;
    else fail(ps, "expected stage=gpu or stage=allocated");
  }
  if (accept(ps, "persistent")) {
    f->persistent = 1;
    if (accept(ps, "(")) {
      if (!accept(ps, "few")) fail(ps, "expected persistent(few)");
      expect(ps, ")");
      f->persistent = 2;
    }
  }
  if (accept(ps, "grid_dep")) {
    if (!tl_has(f->target, TL_FEAT_GRID_DEP)) fail(ps, "grid_dep needs a target with griddepcontrol (sm_90 or newer)");
    f->grid_dep = 1;
  }
  if (accept(ps, "cluster")) {
    expect(ps, "=");
    int64_t c = parse_int(ps);
    if (c != 2 && c != 4 && c != 8) fail(ps, "cluster=%lld: expected 2, 4 or 8", (long long)c);
    if (!tl_has(f->target, TL_FEAT_CLUSTER)) fail(ps, "cluster needs a target with thread-block clusters (sm_90 or newer)");
    f->cluster = (uint8_t)c;
  }
  if (accept(ps, "cache_trips")) {
    expect(ps, "=");
    int64_t t = parse_int(ps);
    if (t < 1 || t > 65535) fail(ps, "cache_trips=%lld out of range (1..65535)", (long long)t);
    f->cache_trips = (uint16_t)t;
  }
  if (accept(ps, "long_tiles")) f->long_tiles = true;
  for (int fact = 0; fact < 2; fact++) { /* div16(%M, ...) pow2(%P, ...) */
    if (!accept(ps, fact ? "pow2" : "div16")) continue;
    expect(ps, "(");
    do {
      struct ir_param *par = ir_param_of(f, use_value(ps));
      if (!par || par->kind != IR_PARAM_SHAPE) fail(ps, "%s names shape symbols only", fact ? "pow2" : "div16");
      if (fact) par->pow2 = 1;
      else par->div16 = 1;
    } while (accept(ps, ","));
    expect(ps, ")");
  }
  expect(ps, "{");
  while (is(ps, "#")) parse_layout(ps);
  expect(ps, "grid");
  expect(ps, ":");
  uint32_t mark = ps->binds.n;
  parse_block(ps, IR_GRID_BLOCK);
  ps->binds.n = mark; /* grid values are not visible in the body */
  expect(ps, "body");
  expect(ps, ":");
  parse_block(ps, IR_BODY_BLOCK);
  expect(ps, "}");
  VEC_PUSH(ps->a, m->funcs, f);
}

bool ir_parse(const char *filename, const char *text, size_t len, struct arena *a,
              struct strtab *strs, struct ir_module *out, struct strbuf *err) {
  struct parser ps = {0};
  ps.file = filename;
  ps.src = ps.p = text;
  ps.end = text + len;
  ps.line = ps.col = 1;
  ps.a = a;
  ps.strs = strs;
  ps.err = err;
  ptrmap_init(&ps.where, a);
  memset(out, 0, sizeof *out);
  if (setjmp(ps.fail)) return false;
  next(&ps);
  while (ps.tok != T_EOF) parse_func(&ps, out);
  return true;
}
