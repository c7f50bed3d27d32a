/* print.c - the text form of Tile IR (see IR.md).
 *
 * Values without a name print as %N, numbered in the order the printer first defines them,
 * so printing is deterministic and independent of table indices: print -> parse -> print
 * gives the same text. Floats print in the shortest form that reads back to the same
 * double. Attributes print as {name=value} using the names in ops.def; `fill`, `stages`
 * and `tf32` are omitted when zero.                                                        */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct printer {
  struct strbuf *sb;
  const struct ir_func *f;
  uint32_t *num; /* value -> printed number + 1 (0: not yet numbered) */
  uint32_t next;
  unsigned flags;
};

void ir_print_float(struct strbuf *sb, double v);

void ir_print_float(struct strbuf *sb, double v) {
  if (isnan(v)) {
    sb_puts(sb, "nan");
    return;
  }
  if (isinf(v)) {
    sb_puts(sb, v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  sb_puts(sb, buf);
  if (!strpbrk(buf, ".e")) sb_puts(sb, ".0");
}

static void print_value(struct printer *p, ir_val v) {
  const struct ir_value *val = &p->f->values.v[v];
  if (val->name) {
    sb_printf(p->sb, "%%%s", val->name);
    return;
  }
  if (!p->num[v]) p->num[v] = ++p->next;
  sb_printf(p->sb, "%%%u", p->num[v] - 1);
}

static void print_type(struct printer *p, ir_type_id id) {
  const struct ir_type *t = &p->f->types.v[id];
  struct strbuf *sb = p->sb;
  switch (t->kind) {
  case IR_TY_VOID:
    sb_puts(sb, "void");
    return;
  case IR_TY_TENSOR:
    sb_printf(sb, "tensor<%s[", ir_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
      if (i) sb_puts(sb, ", ");
      if (IR_DIM_IS_SYM(t->dims[i]))
        print_value(p, IR_DIM_SYM_VALUE(t->dims[i]));
      else
        sb_printf(sb, "%d", t->dims[i]);
    }
    sb_puts(sb, "]>");
    return;
  case IR_TY_TILE:
    if (t->rank == 0 && !t->layout) {
      sb_puts(sb, ir_dtype_name(t->dtype));
      return;
    }
    sb_puts(sb, "tile<");
    for (int i = 0; i < t->rank; i++) sb_printf(sb, "%dx", t->dims[i]);
    sb_puts(sb, ir_dtype_name(t->dtype));
    if (t->layout) sb_printf(sb, ", #%u", t->layout);
    sb_puts(sb, ">");
    return;
  default:
    sb_puts(sb, "<bad type>");
  }
}

static void indent(struct printer *p, int depth) {
  for (int i = 0; i < depth; i++) sb_puts(p->sb, "  ");
}

static bool omit_when_zero(const char *name) {
  static const char *const names[] = {"fill", "stages", "tf32", "id", "threads", "async", "depth", "reverse", "flat", "align", "probe", "unroll"};
  for (size_t i = 0; i < TL_ARRAY_LEN(names); i++)
    if (strcmp(name, names[i]) == 0) return true;
  return false;
}

static void print_attrs(struct printer *p, const struct ir_op *op) {
  const struct ir_opinfo *info = &ir_ops[op->code];
  bool first = true;
  for (int k = 0; k < 3; k++) {
    const char *name = info->iattr[k];
    if (!name || (omit_when_zero(name) && op->i[k] == 0)) continue;
    /* shared-memory offsets exist from the smem-alloc pass on */
    if (strcmp(name, "offset") == 0 && p->f->stage < IR_STAGE_ALLOCATED) continue;
    sb_puts(p->sb, first ? " {" : ", ");
    first = false;
    sb_printf(p->sb, "%s=%lld", name, (long long)op->i[k]);
  }
  if (info->fattr && !(omit_when_zero(info->fattr) && op->f == 0 && !signbit(op->f))) {
    sb_puts(p->sb, first ? " {" : ", ");
    first = false;
    sb_printf(p->sb, "%s=", info->fattr);
    ir_print_float(p->sb, op->f);
  }
  if (!first) sb_puts(p->sb, "}");
}

static void print_block(struct printer *p, uint32_t blk, int depth);

/* `first { region 0 } second { region 1 }` (if/else, the two roles of warp_specialize). */
static void print_two_regions(struct printer *p, const struct ir_op *op, int depth, const char *first,
                              const char *second) {
  sb_printf(p->sb, "%s {\n", first);
  print_block(p, op->region, depth + 1);
  indent(p, depth);
  sb_printf(p->sb, "} %s {\n", second);
  print_block(p, op->region + 1, depth + 1);
  indent(p, depth);
  sb_puts(p->sb, "}");
}

static void print_args(struct printer *p, const ir_val *args, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (i) sb_puts(p->sb, ", ");
    print_value(p, args[i]);
  }
}

static void print_result_types(struct printer *p, const struct ir_op *op) {
  if (!op->nres) return;
  sb_puts(p->sb, " -> (");
  for (uint32_t i = 0; i < op->nres; i++) {
    if (i) sb_puts(p->sb, ", ");
    print_type(p, p->f->values.v[op->res + i].type);
  }
  sb_puts(p->sb, ")");
}

static void print_op(struct printer *p, uint32_t id, int depth) {
  const struct ir_op *op = &p->f->ops.v[id];
  const struct ir_func *f = p->f;
  struct strbuf *sb = p->sb;
  indent(p, depth);
  for (uint32_t i = 0; i < op->nres; i++) {
    if (i) sb_puts(sb, ", ");
    print_value(p, op->res + i);
  }
  if (op->nres) sb_puts(sb, " = ");
  sb_puts(sb, ir_ops[op->code].name);

  switch (op->code) {
  case IR_CONST: {
    const struct ir_type *t = ir_vtype(f, op->res);
    sb_putc(sb, ' ');
    if (ir_dtype_is_float(t->dtype))
      ir_print_float(sb, op->f);
    else if (t->dtype == DT_BOOL)
      sb_puts(sb, op->i[0] ? "true" : "false");
    else
      sb_printf(sb, "%lld", (long long)op->i[0]);
    sb_puts(sb, " : ");
    print_type(p, f->values.v[op->res].type);
    break;
  }
  case IR_LOAD:
  case IR_STORE: {
    uint32_t nidx = ir_vtype(f, op->args[0])->rank;
    sb_putc(sb, ' ');
    print_value(p, op->args[0]);
    sb_putc(sb, '[');
    print_args(p, op->args + 1, nidx);
    sb_putc(sb, ']');
    for (uint32_t k = nidx + 1; op->code == IR_STORE && k < op->nargs; k++) { /* [pred,] value */
      sb_puts(sb, ", ");
      print_value(p, op->args[k]);
    }
    print_attrs(p, op);
    if (op->nres == 1) {
      sb_puts(sb, " : ");
      print_type(p, f->values.v[op->res].type);
    }
    break;
  }
  case IR_FOR: {
    const struct ir_block *body = &f->blocks.v[op->region];
    sb_putc(sb, ' ');
    print_value(p, body->args);
    sb_puts(sb, " = ");
    print_value(p, op->args[0]);
    sb_puts(sb, " to ");
    print_value(p, op->args[1]);
    sb_puts(sb, " step ");
    print_value(p, op->args[2]);
    if (op->nargs > 3) {
      sb_puts(sb, " iter(");
      for (uint32_t i = 3; i < op->nargs; i++) {
        if (i > 3) sb_puts(sb, ", ");
        print_value(p, body->args + (i - 2));
        sb_puts(sb, " = ");
        print_value(p, op->args[i]);
      }
      sb_puts(sb, ")");
    }
    print_attrs(p, op);
    print_result_types(p, op);
    sb_puts(sb, " {\n");
    print_block(p, op->region, depth + 1);
    indent(p, depth);
    sb_puts(sb, "}");
    break;
  }
  case IR_IF:
    sb_putc(sb, ' ');
    print_value(p, op->args[0]);
    print_result_types(p, op);
    print_two_regions(p, op, depth, "", "else");
    break;
  case IR_WARP_SPECIALIZE:
    print_attrs(p, op);
    print_two_regions(p, op, depth, " producer", "consumer");
    break;
  default:
    if (op->nargs) sb_putc(sb, ' ');
    print_args(p, op->args, op->nargs);
    print_attrs(p, op);
    if (op->nres == 1 && ir_ops[op->code].nres == 1) { /* (wgmma_wait's types are its operands') */
      sb_puts(sb, " : ");
      print_type(p, f->values.v[op->res].type);
    }
  }
  sb_putc(sb, '\n');
}

static void print_block(struct printer *p, uint32_t blk, int depth) {
  const struct ir_block *b = &p->f->blocks.v[blk];
  for (uint32_t i = 0; i < b->ops.n; i++) print_op(p, b->ops.v[i], depth);
}

static void print_facts(struct printer *p, const struct ir_param *par, int rank) {
  const struct ir_tensor_facts *fa = &par->facts;
  bool any = fa->align > 1;
  for (int i = 0; i < rank; i++) any |= fa->stride1[i] || fa->div16[i];
  if (!any) return;
  sb_printf(p->sb, " {align=%d, stride=[", fa->align);
  for (int i = 0; i < rank; i++)
    sb_printf(p->sb, "%s%s", i ? ", " : "", fa->stride1[i] ? "1" : fa->div16[i] ? "div16" : "?");
  sb_puts(p->sb, fa->span31 ? "], span31}" : "]}");
}

static void print_list(struct strbuf *sb, const char *name, const uint8_t *v, int n) {
  sb_printf(sb, "%s=[", name);
  for (int i = 0; i < n; i++) sb_printf(sb, "%s%d", i ? "," : "", v[i]);
  sb_puts(sb, "]");
}

void ir_print_layout(struct strbuf *sb, const struct ir_func *f, uint32_t i) {
  const struct ir_layout *l = &f->layouts.v[i];
  sb_printf(sb, "  #%u = ", i);
  switch (l->kind) {
  case IR_LAYOUT_BLOCKED:
    sb_puts(sb, "blocked<");
    print_list(sb, "spt", l->size_per_thread, l->rank);
    sb_puts(sb, ", ");
    print_list(sb, "tpw", l->threads_per_warp, l->rank);
    sb_puts(sb, ", ");
    print_list(sb, "wpc", l->warps_per_cta, l->rank);
    sb_puts(sb, ", ");
    print_list(sb, "order", l->order, l->rank);
    break;
  case IR_LAYOUT_SLICE:
    sb_printf(sb, "slice<dim=%d, parent=#%u", l->dim, l->parent);
    break;
  case IR_LAYOUT_MMA:
    sb_puts(sb, "mma<");
    print_list(sb, "wpc", l->warps_per_cta, 2);
    sb_puts(sb, ", ");
    print_list(sb, "instr", l->instr, 3);
    break;
  case IR_LAYOUT_DOT_OP:
    sb_printf(sb, "dot_op<op=%d, parent=#%u, kwidth=%d", l->op_idx, l->parent, l->k_width);
    break;
  case IR_LAYOUT_SHARED:
    sb_printf(sb, "shared<vec=%d, per_phase=%d, max_phase=%d, ", l->vec, l->per_phase, l->max_phase);
    print_list(sb, "order", l->order, l->rank);
    if (l->panel) sb_printf(sb, ", panel=%d", l->panel);
    break;
  default:
    sb_printf(sb, "invalid<%d", l->kind);
  }
  sb_puts(sb, ">\n");
}

void ir_print_func(struct strbuf *sb, const struct ir_func *f, unsigned flags) {
  struct arena scratch;
  arena_init_child(&scratch, sb->arena);
  struct printer p = {sb, f, ARENA_NEWN(&scratch, uint32_t, f->values.n + 1), 0, flags};

  sb_printf(sb, "kernel @%s(", f->name);
  bool first = true;
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *par = &f->params.v[i];
    if (par->kind == IR_PARAM_SHAPE) continue;
    if (!first) sb_puts(sb, ", ");
    first = false;
    print_value(&p, par->value);
    sb_puts(sb, ": ");
    if (par->is_out) sb_puts(sb, "out ");
    print_type(&p, f->values.v[par->value].type);
    if (par->kind == IR_PARAM_TENSOR)
      print_facts(&p, par, ir_vtype(f, par->value)->rank);
  }
  sb_printf(sb, ") warps=%d", f->warps);
  if (f->threads) sb_printf(sb, " threads=%d", f->threads);
  if (f->target) sb_printf(sb, " target=%s", f->target->name);
  char sched[128];
  tl_schedule_format(&f->sched, sched, sizeof sched);
  if (sched[0]) sb_printf(sb, " sched(%s)", sched);
  if (f->stage == IR_STAGE_GPU) sb_puts(sb, " stage=gpu");
  if (f->stage == IR_STAGE_ALLOCATED) sb_puts(sb, " stage=allocated");
  if (f->persistent) sb_puts(sb, f->persistent == 2 ? " persistent(few)" : " persistent");
  if (f->grid_dep) sb_puts(sb, " grid_dep");
  if (f->cluster > 1) sb_printf(sb, " cluster=%u", (unsigned)f->cluster);
  if (f->cache_trips) sb_printf(sb, " cache_trips=%u", (unsigned)f->cache_trips);
  if (f->long_tiles) sb_puts(sb, " long_tiles");
  for (int fact = 0; fact < 2; fact++) { /* div16(%M, ...) pow2(%P, ...): the shape facts */
    first = true;
    for (uint32_t i = 0; i < f->params.n; i++) {
      const struct ir_param *q = &f->params.v[i];
      if (q->kind != IR_PARAM_SHAPE || !(fact ? q->pow2 : q->div16)) continue;
      sb_puts(sb, first ? (fact ? " pow2(" : " div16(") : ", ");
      first = false;
      print_value(&p, q->value);
    }
    if (!first) sb_puts(sb, ")");
  }
  sb_puts(sb, " {\n");
  for (uint32_t i = 1; i < f->layouts.n; i++) ir_print_layout(sb, f, i);
  sb_puts(sb, "grid:\n");
  print_block(&p, IR_GRID_BLOCK, 1);
  sb_puts(sb, "body:\n");
  print_block(&p, IR_BODY_BLOCK, 1);
  sb_puts(sb, "}\n");
  arena_free(&scratch);
}

void ir_print_module(struct strbuf *sb, const struct ir_module *m, unsigned flags) {
  for (uint32_t i = 0; i < m->funcs.n; i++) {
    if (i) sb_putc(sb, '\n');
    ir_print_func(sb, m->funcs.v[i], flags);
  }
}
