/* eval.h - the reference semantics of Tile IR's elementwise ops on one element.
 *
 * Constant folding and the CPU interpreter both call these, so the compiler can never fold
 * an expression to something the interpreter would not compute. Values travel as
 * ir_scalar: integers and bools in .i (i32 results are wrapped to 32 bits and sign-extended,
 * u32 ones zero-extended; bools are 0/1),
 * floats in .f as a double holding a value already rounded to the element type.       */
#ifndef TL_EVAL_H
#define TL_EVAL_H

#include "ir.h"

typedef union ir_scalar {
  int64_t i;
  double f;
} ir_scalar;

/* Rounds a double to the representable value of a float dtype (f32, f16, bf16, f8...). */
double ir_round_float(ir_dtype dt, double x);
/* Wraps an integer to the width of an int dtype (bool: x != 0). */
int64_t ir_wrap_int(ir_dtype dt, int64_t x);

/* Converts one element between dtypes: float->int truncates toward zero and saturates
 * (NaN gives 0); anything->bool is x != 0; rounding to nearest even for narrower floats. */
ir_scalar ir_eval_cast(ir_dtype from, ir_dtype to, ir_scalar x);

/* Evaluates a unary or binary elementwise op whose operands have element type `dt`
 * (comparisons return a bool in .i). Returns false for ops it does not handle. */
bool ir_eval_elem(ir_opcode op, ir_dtype dt, const ir_scalar *args, ir_scalar *out);

#endif
