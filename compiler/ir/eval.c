/* eval.c - one-element semantics of the elementwise ops (see eval.h).
 *
 * Float ops compute in double and round once to the element type. For +, -, *, / and sqrt
 * this equals computing in the element type directly (double has more than twice the
 * precision of f32), and for the transcendental functions it gives the correctly rounded
 * reference that GPU approximations are compared against. Integer ops compute in 64 bits
 * and wrap; division and remainder by zero give 0 rather than trapping, and INT_MIN / -1
 * wraps, so no input can crash the interpreter or the folder. u32 values are held
 * zero-extended (0 .. 2^32-1), so the same 64-bit division, remainder, >>, comparisons and
 * min/max are the unsigned ones, and ir_wrap_int reduces results modulo 2^32.        */
#include "eval.h"

#include <math.h>

#include "fp16.h"

double ir_round_float(ir_dtype dt, double x) {
  switch (dt) {
  case DT_F64:
    return x;
  case DT_F32:
    return (double)(float)x;
  case DT_F16:
    return (double)tl_round_f16((float)x);
  case DT_BF16:
    return (double)tl_round_bf16((float)x);
  case DT_F8E4M3:
    return (double)tl_e4m3_to_f32(tl_f32_to_e4m3((float)x));
  case DT_F8E5M2:
    return (double)tl_e5m2_to_f32(tl_f32_to_e5m2((float)x));
  default:
    return x;
  }
}

int64_t ir_wrap_int(ir_dtype dt, int64_t x) {
  switch (dt) {
  case DT_BOOL:
    return x != 0;
  case DT_I8:
    return (int8_t)(uint8_t)(uint64_t)x;
  case DT_I16:
    return (int16_t)(uint16_t)(uint64_t)x;
  case DT_I32:
    return (int32_t)(uint32_t)(uint64_t)x;
  case DT_U32:
    return (int64_t)(uint32_t)(uint64_t)x;
  default:
    return x;
  }
}

static int64_t int_min_of(ir_dtype dt) {
  switch (dt) {
  case DT_I8: return INT8_MIN;
  case DT_I16: return INT16_MIN;
  case DT_I32: return INT32_MIN;
  case DT_U32: return 0;
  default: return INT64_MIN;
  }
}

static int64_t int_max_of(ir_dtype dt) {
  switch (dt) {
  case DT_I8: return INT8_MAX;
  case DT_I16: return INT16_MAX;
  case DT_I32: return INT32_MAX;
  case DT_U32: return UINT32_MAX;
  default: return INT64_MAX;
  }
}

ir_scalar ir_eval_cast(ir_dtype from, ir_dtype to, ir_scalar x) {
  ir_scalar r;
  bool ffrom = ir_dtype_is_float(from), fto = ir_dtype_is_float(to);
  if (to == DT_BOOL) {
    r.i = ffrom ? (x.f != 0) : (x.i != 0);
  } else if (fto) {
    r.f = ir_round_float(to, ffrom ? x.f : (double)x.i);
  } else if (ffrom) {
    double v = x.f;
    if (isnan(v))
      r.i = 0;
    else if (v <= (double)int_min_of(to))
      r.i = int_min_of(to);
    else if (v >= (double)int_max_of(to))
      r.i = int_max_of(to);
    else
      r.i = (int64_t)trunc(v);
  } else {
    r.i = ir_wrap_int(to, x.i);
  }
  return r;
}

static double fmin_nan(double a, double b) {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  return a < b ? a : b;
}

static double fmax_nan(double a, double b) {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  return a > b ? a : b;
}

static bool eval_float(ir_opcode op, ir_dtype dt, const ir_scalar *x, ir_scalar *out) {
  double a = x[0].f, b = 0, r;
  if (ir_ops[op].nargs == 2) b = x[1].f;
  switch (op) {
  case IR_NEG: r = -a; break;
  case IR_ABS: r = fabs(a); break;
  case IR_EXP: r = exp(a); break;
  case IR_EXP2: r = exp2(a); break;
  case IR_LOG: r = log(a); break;
  case IR_LOG2: r = log2(a); break;
  case IR_SQRT: r = sqrt(a); break;
  case IR_RSQRT: r = 1.0 / sqrt(a); break;
  case IR_TANH: r = tanh(a); break;
  case IR_ERF: r = erf(a); break;
  case IR_ADD: r = a + b; break;
  case IR_SUB: r = a - b; break;
  case IR_MUL: r = a * b; break;
  case IR_DIV: r = a / b; break;
  case IR_REM: r = fmod(a, b); break;
  case IR_MIN: r = fmin_nan(a, b); break;
  case IR_MAX: r = fmax_nan(a, b); break;
  case IR_EQ: out->i = a == b; return true;
  case IR_NE: out->i = a != b; return true;
  case IR_LT: out->i = a < b; return true;
  case IR_LE: out->i = a <= b; return true;
  case IR_GT: out->i = a > b; return true;
  case IR_GE: out->i = a >= b; return true;
  default: return false;
  }
  out->f = ir_round_float(dt, r);
  return true;
}

static bool eval_int(ir_opcode op, ir_dtype dt, const ir_scalar *x, ir_scalar *out) {
  int64_t a = x[0].i, b = 0, r;
  int bits = dt == DT_BOOL ? 1 : ir_dtype_bits(dt);
  if (ir_ops[op].nargs == 2) b = x[1].i;
  /* arithmetic in uint64 so that overflow wraps instead of being undefined */
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case IR_NEG: r = (int64_t)(0 - ua); break;
  case IR_NOT: r = dt == DT_BOOL ? !a : ~a; break;
  case IR_ABS: r = a < 0 ? (int64_t)(0 - ua) : a; break;
  case IR_ADD: r = (int64_t)(ua + ub); break;
  case IR_SUB: r = (int64_t)(ua - ub); break;
  case IR_MUL: r = (int64_t)(ua * ub); break;
  case IR_MULHI: r = (int64_t)(((uint64_t)(uint32_t)ua * (uint32_t)ub) >> 32); break; /* u32 */
  case IR_DIV: r = b == 0 ? 0 : (a == INT64_MIN && b == -1) ? a : a / b; break;
  case IR_REM: r = b == 0 ? 0 : (b == -1) ? 0 : a % b; break;
  case IR_MIN: r = a < b ? a : b; break;
  case IR_MAX: r = a > b ? a : b; break;
  case IR_AND: r = a & b; break;
  case IR_OR: r = a | b; break;
  case IR_XOR: r = a ^ b; break;
  case IR_SHL: r = (int64_t)(ua << ((uint64_t)b & (uint64_t)(bits - 1))); break;
  case IR_SHR: r = a >> ((uint64_t)b & (uint64_t)(bits - 1)); break;
  case IR_CTZ: {
    uint64_t m = bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
    r = (ua & m) ? __builtin_ctzll(ua & m) : bits;
    break;
  }
  case IR_EQ: out->i = a == b; return true;
  case IR_NE: out->i = a != b; return true;
  case IR_LT: out->i = a < b; return true;
  case IR_LE: out->i = a <= b; return true;
  case IR_GT: out->i = a > b; return true;
  case IR_GE: out->i = a >= b; return true;
  default: return false;
  }
  out->i = ir_wrap_int(dt, r);
  return true;
}

bool ir_eval_elem(ir_opcode op, ir_dtype dt, const ir_scalar *args, ir_scalar *out) {
  if (ir_dtype_is_float(dt)) return eval_float(op, dt, args, out);
  return eval_int(op, dt, args, out);
}
