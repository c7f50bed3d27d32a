/* ast.c - AST construction (called by the grammar's actions) and the AST printer.
 *
 * The constructors are the only code the parser's actions run: they allocate a node in the
 * context's arena, number it, and compute its nesting depth. Exceeding AST_MAX_DEPTH reports
 * one error per file and yields an ERROR node, which keeps every later recursive walk
 * (printer, sema, irgen) within a bounded stack on adversarial input.
 *
 * The printer writes one node per line, indented two spaces per level, as
 * `Kind attributes @line:col`. Child roles that are not obvious from the kind are labelled
 * with a line of their own ("default:", "grid:", ...). The format is golden-tested and meant
 * to stay stable: change it only together with tests/golden/ast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

const char *const ast_kind_names[AST__COUNT] = {
#define AST(id, name, doc) name,
#include "ast.def"
#undef AST
};

const char *const ast_op_texts[OP__COUNT] = {
#define OPER(id, text, cls) text,
#include "ast.def"
#undef OPER
};

const enum ast_op_class ast_op_classes[OP__COUNT] = {
#define OPER(id, text, cls) OPC_##cls,
#include "ast.def"
#undef OPER
};

struct ast_node *ast_new(struct ast_builder *b, enum ast_kind kind, struct lang_loc loc) {
  struct ast_node *n = ARENA_NEW(b->ctx->arena, struct ast_node);
  n->kind = kind;
  n->loc = loc;
  n->id = b->file->nnodes++;
  n->depth = 1;
  return n;
}

static void take_depth(struct ast_node *n, const struct ast_node *child) {
  if (child && child->depth + 1 > n->depth) n->depth = (uint16_t)TL_MIN(child->depth + 1, 60000);
}

struct ast_node *ast_done(struct ast_builder *b, struct ast_node *n) {
  if (n->depth <= AST_MAX_DEPTH) return n;
  if (!b->depth_reported) {
    b->depth_reported = true;
    lang_error(b->ctx, n->loc, D_NESTING,
               "this is nested too deeply (more than %d levels of expressions or blocks)",
               AST_MAX_DEPTH);
  }
  return ast_new(b, AST_ERROR, n->loc);
}

struct ast_node *ast_leaf_int(struct ast_builder *b, int64_t v, struct lang_loc loc) {
  /* The scanner passes INT64_MIN for a literal it has already reported as out of range
   * (hex literals may be negative: 0xFFFFFFFF is -1). */
  if (v == INT64_MIN) return ast_new(b, AST_ERROR, loc);
  struct ast_node *n = ast_new(b, AST_INT, loc);
  n->ival = v;
  return n;
}

struct ast_node *ast_leaf_name(struct ast_builder *b, const char *name, struct lang_loc loc) {
  struct ast_node *n = ast_new(b, AST_NAME, loc);
  n->name = name;
  return n;
}

struct ast_node *ast_node1(struct ast_builder *b, enum ast_kind kind, struct ast_node *a,
                           struct lang_loc loc) {
  struct ast_node *n = ast_new(b, kind, loc);
  n->a = a;
  take_depth(n, a);
  return ast_done(b, n);
}

struct ast_node *ast_node2(struct ast_builder *b, enum ast_kind kind, enum ast_op op,
                           struct ast_node *a, struct ast_node *x, struct lang_loc loc) {
  struct ast_node *n = ast_new(b, kind, loc);
  n->op = op;
  n->a = a;
  n->b = x;
  take_depth(n, a);
  take_depth(n, x);
  return ast_done(b, n);
}

struct ast_node *ast_node3(struct ast_builder *b, enum ast_kind kind, struct ast_node *a,
                           struct ast_node *x, struct ast_node *y, struct lang_loc loc) {
  struct ast_node *n = ast_new(b, kind, loc);
  n->a = a;
  n->b = x;
  n->c = y;
  take_depth(n, a);
  take_depth(n, x);
  take_depth(n, y);
  return ast_done(b, n);
}

struct ast_node *ast_append(struct ast_builder *b, struct ast_node *n, struct ast_node *child) {
  if (!child) return n;
  VEC_PUSH(b->ctx->arena, n->list, child);
  take_depth(n, child);
  return n;
}

struct ast_kernel *ast_kernel_new(struct ast_builder *b) {
  return ARENA_NEW(b->ctx->arena, struct ast_kernel);
}

/* ---- printer ---- */

static void indent(struct strbuf *sb, int level) {
  for (int i = 0; i < level; i++) sb_puts(sb, "  ");
}

static void put_loc(struct strbuf *sb, struct lang_loc loc) {
  sb_printf(sb, " @%u:%u\n", loc.line, loc.col);
}

static void put_string(struct strbuf *sb, const char *s) {
  sb_putc(sb, '"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      sb_printf(sb, "\\%c", ch);
    else if (ch < 32 || ch >= 127)
      sb_printf(sb, "\\x%02x", ch);
    else
      sb_putc(sb, (char)ch);
  }
  sb_putc(sb, '"');
}

static void put_float(struct strbuf *sb, double v) {
  if (isinf(v)) {
    sb_puts(sb, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", v);
  /* Prefer the shortest representation that reads back exactly. */
  for (int prec = 1; prec <= 17; prec++) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v) {
      snprintf(buf, sizeof buf, "%s", tmp);
      break;
    }
  }
  sb_puts(sb, buf);
  if (!strpbrk(buf, ".eEn")) sb_puts(sb, ".0");
}

static void print_node(struct strbuf *sb, const struct ast_node *n, int level);

static void print_label(struct strbuf *sb, const char *label, int level) {
  indent(sb, level);
  sb_printf(sb, "%s:\n", label);
}

static void print_list(struct strbuf *sb, const ast_list *l, int level) {
  for (uint32_t i = 0; i < l->n; i++) print_node(sb, l->v[i], level);
}

static void print_kernel(struct strbuf *sb, const struct ast_node *n, int level) {
  const struct ast_kernel *k = n->k;
  indent(sb, level);
  sb_printf(sb, "Kernel %s", k->name);
  put_loc(sb, n->loc);
  if (k->cparams.n) {
    print_label(sb, "cparams", level + 1);
    print_list(sb, &k->cparams, level + 2);
  }
  if (k->params.n) {
    print_label(sb, "params", level + 1);
    print_list(sb, &k->params, level + 2);
  }
  print_label(sb, "grid", level + 1);
  print_list(sb, &k->grid, level + 2);
  if (k->warps) {
    print_label(sb, "warps", level + 1);
    print_node(sb, k->warps, level + 2);
  }
  if (k->where.n) {
    print_label(sb, "where", level + 1);
    print_list(sb, &k->where, level + 2);
  }
  if (k->tdefaults.n) {
    print_label(sb, "defaults", level + 1);
    print_list(sb, &k->tdefaults, level + 2);
  }
  print_label(sb, "body", level + 1);
  print_node(sb, k->body, level + 2);
}

static void print_node(struct strbuf *sb, const struct ast_node *n, int level) {
  if (!n) return;
  if (n->kind == AST_KERNEL) {
    print_kernel(sb, n, level);
    return;
  }
  indent(sb, level);
  sb_puts(sb, ast_kind_names[n->kind]);
  switch (n->kind) {
  case AST_CONST_DECL:
  case AST_CPARAM:
  case AST_TARGET_DEFAULTS:
  case AST_PARAM:
  case AST_LET:
  case AST_VAR:
  case AST_FOR:
  case AST_NAME:
  case AST_NAMED_ARG:
    sb_printf(sb, " %s", n->name);
    break;
  case AST_MEMBER:
    sb_printf(sb, " .%s", n->name);
    break;
  case AST_ASSIGN:
    sb_printf(sb, " %s", n->op == OP_NONE ? "=" : arena_printf(sb->arena, "%s=", ast_op_texts[n->op]));
    break;
  case AST_UNARY:
  case AST_BINARY:
    sb_printf(sb, " %s", ast_op_texts[n->op]);
    break;
  case AST_INT:
    sb_printf(sb, " %lld", (long long)n->ival);
    break;
  case AST_FLOAT:
    sb_putc(sb, ' ');
    put_float(sb, n->fval);
    break;
  case AST_BOOL:
    sb_puts(sb, n->ival ? " true" : " false");
    break;
  case AST_STRING:
    sb_putc(sb, ' ');
    put_string(sb, n->sval);
    break;
  case AST_DTYPE:
    sb_printf(sb, " %s", ir_dtype_name(n->dt));
    break;
  case AST_SLICE:
    sb_puts(sb, n->flag ? " start:+length" : " start:end");
    break;
  case AST_TYPE:
    if (n->flag) sb_puts(sb, " tensor");
    break;
  default:
    break;
  }
  put_loc(sb, n->loc);
  switch (n->kind) {
  case AST_CPARAM:
    if (n->list.n) {
      print_label(sb, "candidates", level + 1);
      print_list(sb, &n->list, level + 2);
    }
    if (n->a) {
      print_label(sb, "default", level + 1);
      print_node(sb, n->a, level + 2);
    }
    return;
  case AST_PARAM:
    if (n->b) {
      print_label(sb, "modifier", level + 1);
      print_node(sb, n->b, level + 2);
    }
    print_node(sb, n->a, level + 1);
    return;
  case AST_TYPE:
    print_node(sb, n->a, level + 1);
    if (n->list.n) {
      print_label(sb, "dims", level + 1);
      print_list(sb, &n->list, level + 2);
    }
    return;
  case AST_LET:
  case AST_VAR:
    if (n->a) {
      print_label(sb, "type", level + 1);
      print_node(sb, n->a, level + 2);
    }
    print_node(sb, n->b, level + 1);
    return;
  case AST_LET_TUPLE:
    print_label(sb, "names", level + 1);
    print_list(sb, &n->list, level + 2);
    print_node(sb, n->b, level + 1);
    return;
  case AST_IF:
    print_node(sb, n->a, level + 1);
    print_node(sb, n->b, level + 1);
    if (n->c) {
      print_label(sb, "else", level + 1);
      print_node(sb, n->c, level + 2);
    }
    return;
  case AST_CALL:
    print_node(sb, n->a, level + 1);
    if (n->list.n) {
      print_label(sb, "args", level + 1);
      print_list(sb, &n->list, level + 2);
    }
    return;
  default:
    print_node(sb, n->a, level + 1);
    print_node(sb, n->b, level + 1);
    print_node(sb, n->c, level + 1);
    print_list(sb, &n->list, level + 1);
    return;
  }
}

void lang_print_ast(struct strbuf *sb, const struct ast_file *f) {
  if (!f) return;
  sb_puts(sb, "File ");
  put_string(sb, f->name);
  sb_putc(sb, '\n');
  for (uint32_t i = 0; i < f->items.n; i++) print_node(sb, f->items.v[i], 1);
}
