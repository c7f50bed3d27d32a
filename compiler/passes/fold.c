/* fold.c - constant folding.
 *
 * Needs: verified IR. Guarantees: every elementwise op (casts included) whose operands are
 * all CONST, and every max/min reduction or scan of a CONST, is replaced by a CONST
 * computed with eval.c, the same one-element semantics the interpreter uses, so folding
 * never changes a result. Constants are uniform (a scalar, or a tile filled with one value),
 * so an op folds once, not per element. Sums of constant tiles (and running sums and
 * products) are not folded: the interpreter's order of f32 additions would round
 * differently from a multiplication.
 *
 *   %a = const 2 : i32
 *   %b = const 64 : i32          =>   %c = const 128 : i32
 *   %c = mul %a, %b : i32                                                               */
#include "eval.h"
#include "passes.h"

static bool const_value(struct ir_func *f, ir_val v, ir_scalar *out) {
  uint32_t d = ir_def_op(f, v);
  if (!d || f->ops.v[d].code != IR_CONST) return false;
  if (ir_dtype_is_float(ir_vtype(f, v)->dtype))
    out->f = f->ops.v[d].f;
  else
    out->i = f->ops.v[d].i[0];
  return true;
}

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct pass_ctx *pc = ud;
  struct ir_op *op = &f->ops.v[id];
  if (!op->block || op->nres != 1) return;
  bool elem = ir_ops[op->code].flags & OPF_ELEM;
  bool minmax = op->code == IR_REDUCE_MAX || op->code == IR_REDUCE_MIN || op->code == IR_SCAN_MAX ||
                op->code == IR_SCAN_MIN;
  if (!elem && !minmax) return;
  ir_scalar args[3], r;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!const_value(f, op->args[k], &args[k])) return;
  const struct ir_type *rt = ir_vtype(f, op->res);
  ir_dtype in = ir_vtype(f, op->args[0])->dtype;
  if (minmax) {
    r = args[0];
  } else if (op->code == IR_CAST) {
    r = ir_eval_cast(in, rt->dtype, args[0]);
  } else if (op->code == IR_SELECT) {
    r = args[0].i ? args[1] : args[2];
  } else if (!ir_eval_elem((ir_opcode)op->code, in, args, &r)) {
    return;
  }
  /* the op becomes the constant in place: its uses stay, nothing is searched */
  bool is_float = ir_dtype_is_float(rt->dtype);
  ir_op_rewrite(f, id, IR_CONST, NULL, 0);
  if (is_float)
    f->ops.v[id].f = r.f;
  else
    f->ops.v[id].i[0] = r.i;
  pc->changed = true;
}

void pass_fold(struct pass_ctx *pc) {
  ir_walk(pc->f, IR_GRID_BLOCK, visit, pc);
  ir_walk(pc->f, IR_BODY_BLOCK, visit, pc);
}
