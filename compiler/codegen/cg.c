/* cg.c - LLVM IR generation for Tile IR with layouts, and PTX emission.
 *
 * Every tile value becomes an array of LLVM registers, one per register of its linear
 * layout (layout.h); register r of a thread holds the element at reg_coord(r) +
 * thread_coord(lane, warp). Scalars are one register held identically by every thread:
 * all control flow in Tile IR depends only on scalars, so it is uniform across the program
 * instance and barriers inside loops and branches are safe.
 *
 * Arithmetic on f16/bf16 computes in f32 and rounds once, which is what the interpreter
 * does, so GPU and reference differ only by the order of reductions and by the fast
 * transcendental approximations (exp/log via ex2.approx/lg2.approx, tanh and erf built
 * from exp2). Masked global accesses use predicated PTX (inline asm), the form that never
 * touches memory for masked-off elements. Layout changes, reductions across warps and the
 * FMA dot go through dynamic shared memory with a barrier before every reuse.
 *
 * The file is organised as: setup and helpers; values and thread coordinates; elementwise
 * ops; layout changes; reductions; dot; loads and stores; control flow; the driver.     */
#include "cg.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cg_internal.h"
#include "clock.h"
#include "layout.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_llvm(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

int cg_scalar_param_bytes(ir_dtype dt) {
  switch (dt) {
  case DT_I64:
  case DT_F64:
    return 8;
  default:
    return 4;
  }
}

/* ---- helpers ---- */

void cg_fail(struct cg *g, const char *fmt, ...) {
  if (!g->failed) {
    va_list ap;
    va_start(ap, fmt);
    sb_puts(g->err, "codegen: ");
    sb_vprintf(g->err, fmt, ap);
    sb_putc(g->err, '\n');
    va_end(ap);
  }
  g->failed = true;
}

LLVMValueRef cg_intrinsic(struct cg *g, const char *name, LLVMTypeRef *ovl, unsigned novl,
                          LLVMValueRef *args, unsigned nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (id && LLVMIntrinsicIsOverloaded(id) != (novl > 0)) id = 0; /* a misspelt overload */
  if (!id) {
    cg_fail(g, "unknown intrinsic %s", name);
    return LLVMGetUndef(g->i32);
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, ovl, novl);
  LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, id, ovl, novl);
  return LLVMBuildCall2(g->b, fty, fn, args, nargs, "");
}

LLVMValueRef cg_asm(struct cg *g, LLVMTypeRef ret, const char *text, const char *cons,
                    LLVMValueRef *args, unsigned nargs, bool side_effects) {
  LLVMTypeRef *at = ARENA_NEWN(g->arena, LLVMTypeRef, nargs + 1);
  for (unsigned i = 0; i < nargs; i++) at[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(ret, at, nargs, 0);
  LLVMValueRef ia = LLVMGetInlineAsm(fty, text, strlen(text), cons, strlen(cons), side_effects, 0,
                                     LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(g->b, fty, ia, args, nargs, "");
}

static LLVMValueRef sreg(struct cg *g, const char *name) {
  char buf[96];
  snprintf(buf, sizeof buf, "llvm.nvvm.read.ptx.sreg.%s", name);
  return cg_intrinsic(g, buf, NULL, 0, NULL, 0);
}

/* A barrier of the threads running the current code: every thread of the program, or the
 * named barrier of the current warp-specialized role (cg_async.c). */
void cg_barrier(struct cg *g) {
  if (g->bar_threads) {
    LLVMValueRef a[2] = {cg_i32(g, g->bar_id), cg_i32(g, g->bar_threads)};
    cg_intrinsic(g, "llvm.nvvm.barrier.cta.sync.aligned.count", NULL, 0, a, 2);
    return;
  }
  LLVMValueRef zero = LLVMConstInt(g->i32, 0, 0);
  cg_intrinsic(g, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, 0, &zero, 1);
}

LLVMValueRef cg_i32(struct cg *g, int64_t v) { return LLVMConstInt(g->i32, (unsigned long long)v, 1); }
LLVMValueRef cg_i64(struct cg *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

LLVMValueRef cg_scalar_i32(struct cg *g, ir_val v) {
  LLVMValueRef x = cg_val(g, v)->r[0];
  return !x || LLVMTypeOf(x) == g->i32 ? x : LLVMBuildIntCast2(g->b, x, g->i32, 1, "");
}

/* The register type of an element type. */
LLVMTypeRef cg_reg_type(struct cg *g, ir_dtype dt) {
  switch (dt) {
  case DT_BOOL: return g->i1;
  case DT_I8: return LLVMInt8TypeInContext(g->ctx);
  case DT_I16: return LLVMInt16TypeInContext(g->ctx);
  case DT_I32:
  case DT_U32: return g->i32;
  case DT_I64: return g->i64;
  case DT_F16: return g->f16;
  case DT_BF16: return g->bf16;
  case DT_F32: return g->f32;
  case DT_F64: return LLVMDoubleTypeInContext(g->ctx);
  case DT_F8E4M3:
  case DT_F8E5M2: return LLVMInt8TypeInContext(g->ctx);
  default: return g->i32;
  }
}

/* The integer type with an element's memory width (bool is a byte). */
LLVMTypeRef cg_mem_int_type(struct cg *g, ir_dtype dt) {
  return LLVMIntTypeInContext(g->ctx, (unsigned)(ir_dtype_bytes(dt) * 8));
}

/* ---- values ---- */

struct cgval *cg_val(struct cg *g, ir_val v) {
  struct cgval *cv = &g->vals[v];
  if (!cv->r) cg_fail(g, "value %%%u used before it was generated", v);
  return cv;
}

struct cgval *cg_new_val(struct cg *g, ir_val v, uint32_t n) {
  struct cgval *cv = &g->vals[v];
  cv->n = n;
  cv->r = ARENA_NEWN(g->arena, LLVMValueRef, n + 1);
  return cv;
}

bool cg_layout_of(struct cg *g, ir_val v, struct ll *out) {
  const struct ir_type *t = ir_vtype(g->f, v);
  if (!ll_of_type(g->f, t, g->f->warps, out)) {
    cg_fail(g, "value %%%u has no usable layout (#%u for a rank-%d tile)", v, t->layout, t->rank);
    memset(out, 0, sizeof *out);
    return false;
  }
  return true;
}

uint32_t cg_num_regs(struct cg *g, ir_val v) {
  const struct ir_type *t = ir_vtype(g->f, v);
  if (t->rank == 0) return 1;
  struct ll l;
  return cg_layout_of(g, v, &l) ? ll_num_regs(&l) : 1;
}

/* Thread part of the coordinates of layout l (i32 values), computed once per distinct
 * layout in the kernel's prologue. */
void cg_thread_coords(struct cg *g, const struct ll *l, LLVMValueRef *coord) {
  for (uint32_t i = 0; i < g->ncoord_cache; i++) {
    struct coord_cache *c = &g->coord_cache[i];
    if (memcmp(&c->l, l, sizeof *l) == 0) {
      for (int d = 0; d < l->rank; d++) coord[d] = c->coord[d];
      return;
    }
  }
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
  /* positioning before an instruction takes over its debug location: keep the op's */
  LLVMMetadataRef loc = LLVMGetCurrentDebugLocation2(g->b);
  LLVMPositionBuilderBefore(g->b, g->coord_point ? g->coord_point : g->prologue_end);
  for (int d = 0; d < l->rank; d++) {
    LLVMValueRef acc = cg_i32(g, 0);
    for (int k = 0; k < l->nlane; k++)
      if (l->lane[k][d]) {
        LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->lane, cg_i32(g, k), ""), cg_i32(g, 1), "");
        acc = LLVMBuildOr(g->b, acc, LLVMBuildMul(g->b, bit, cg_i32(g, l->lane[k][d]), ""), "");
      }
    for (int k = 0; k < l->nwarp; k++)
      if (l->warp[k][d]) {
        LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->warp, cg_i32(g, k), ""), cg_i32(g, 1), "");
        acc = LLVMBuildOr(g->b, acc, LLVMBuildMul(g->b, bit, cg_i32(g, l->warp[k][d]), ""), "");
      }
    coord[d] = acc;
  }
  LLVMPositionBuilderAtEnd(g->b, cur);
  LLVMSetCurrentDebugLocation2(g->b, loc);
  if (g->ncoord_cache < TL_ARRAY_LEN(g->coord_cache)) {
    struct coord_cache *c = &g->coord_cache[g->ncoord_cache++];
    c->l = *l;
    for (int d = 0; d < l->rank; d++) c->coord[d] = coord[d];
  }
}

/* The warp index, tid / 32. In wgmma kernels it is read back from lane 0 of the warp: the
 * same value, which ptxas then knows to be the same in every lane, so that what derives
 * from it alone (a warp's wgmma descriptors) goes to uniform registers instead of one
 * register per thread each (attention_bwd_fused kept dQ's B descriptors in registers and
 * spilled them, PERF.md 79). Only in kernels with wgmma ops: in mma.sync kernels the
 * registers measured no better and some spilled (tests/cli/ptxas.sh), and in kernels
 * without products the opaque warp index keeps LLVM from folding each element's offset
 * into one base address (softmax at 4096 x 50257: 45 -> 88 registers, 45% -> 34% of the
 * copy; PERF.md 96). */
static LLVMValueRef warp_index(struct cg *g, LLVMValueRef tid) {
  LLVMValueRef w = LLVMBuildLShr(g->b, tid, cg_i32(g, 5), "warp");
  if (!g->has_wgmma) return w;
  LLVMValueRef args[4] = {cg_i32(g, -1), w, cg_i32(g, 0), cg_i32(g, 31)};
  return cg_intrinsic(g, "llvm.nvvm.shfl.sync.idx.i32", NULL, 0, args, 4);
}

/* Thread coordinates computed from here on go before `before` (which must dominate the
 * rest of the kernel; NULL: at the current position), from a fresh read of the thread
 * index that LLVM cannot merge with the first. At the entry of a top-level loop after the
 * first (attention's boundary loop kept the main loop's coordinates alive and spilled
 * 12-16 bytes at head dim 128) and after every top-level loop (what follows it, the next
 * loop's pipeline prologue and masks or the epilogue, does not keep the prologue's alive
 * through it: PERF.md 17). */
void cg_fresh_thread_coords(struct cg *g, LLVMValueRef before) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
  LLVMMetadataRef loc = LLVMGetCurrentDebugLocation2(g->b); /* see cg_thread_coords */
  if (before) LLVMPositionBuilderBefore(g->b, before);
  LLVMValueRef tid = cg_asm(g, g->i32, "mov.u32 $0, %tid.x;", "=r", NULL, 0, true);
  g->lane = LLVMBuildAnd(g->b, tid, cg_i32(g, 31), "lane");
  g->warp = warp_index(g, tid);
  if (g->warp_base) g->warp = LLVMBuildSub(g->b, g->warp, cg_i32(g, g->warp_base), "warp"); /* a role's warps */
  if (before) LLVMPositionBuilderAtEnd(g->b, cur);
  else before = LLVMBuildAdd(g->b, g->warp, cg_i32(g, 0), "coords"); /* a place to put them before */
  LLVMSetCurrentDebugLocation2(g->b, loc);
  g->coord_point = before;
  g->ncoord_cache = 0;
}

/* Full coordinates (i32) of register r of a value with layout l. */
void cg_coords(struct cg *g, const struct ll *l, uint32_t r, LLVMValueRef *coord) {
  LLVMValueRef th[IR_MAX_RANK];
  int32_t rc[IR_MAX_RANK];
  cg_thread_coords(g, l, th);
  ll_reg_coord(l, r, rc);
  for (int d = 0; d < l->rank; d++) coord[d] = rc[d] ? LLVMBuildOr(g->b, th[d], cg_i32(g, rc[d]), "") : th[d];
}

/* ---- elementwise ---- */

/* ---- fp8 (storage types: i8 registers), converted exactly as compiler/util/fp16.h does ----
 * Widening goes through f16, which holds every E4M3 and E5M2 value: an E5M2 byte is the top
 * byte of its f16; an E4M3 byte's magnitude shifted into an f16's exponent and mantissa is
 * the value scaled by 2^-8 (bias 7 against 15), which a multiplication by 256 undoes
 * exactly, subnormals included. Narrowing rounds to nearest even: normal results by adding
 * a rounding bias below the kept mantissa bits, subnormal ones by rounding |x| scaled to
 * units of the smallest subnormal. E4M3 saturates to +-448 (infinity too) and has one NaN
 * code; E5M2 overflows to infinity. */
static LLVMValueRef fconst(struct cg *g, double x);

LLVMValueRef cg_f8_to_f32(struct cg *g, LLVMValueRef v, ir_dtype dt) {
  LLVMValueRef c = LLVMBuildZExt(g->b, v, g->i16, "");
  if (dt == DT_F8E5M2)
    return LLVMBuildFPExt(g->b, LLVMBuildBitCast(g->b, LLVMBuildShl(g->b, c, LLVMConstInt(g->i16, 8, 0), ""), g->f16, ""),
                          g->f32, "");
  LLVMValueRef mag = LLVMBuildAnd(g->b, c, LLVMConstInt(g->i16, 0x7f, 0), "");
  LLVMValueRef sign = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, c, LLVMConstInt(g->i16, 0x80, 0), ""), LLVMConstInt(g->i16, 8, 0), "");
  LLVMValueRef h = LLVMBuildOr(g->b, sign, LLVMBuildShl(g->b, mag, LLVMConstInt(g->i16, 7, 0), ""), "");
  LLVMValueRef x = LLVMBuildFMul(g->b, LLVMBuildFPExt(g->b, LLVMBuildBitCast(g->b, h, g->f16, ""), g->f32, ""),
                                 fconst(g, 256.0), "");
  LLVMValueRef nan = LLVMBuildICmp(g->b, LLVMIntEQ, mag, LLVMConstInt(g->i16, 0x7f, 0), "");
  return LLVMBuildSelect(g->b, nan, fconst(g, NAN), x, "");
}

LLVMValueRef cg_f32_to_f8(struct cg *g, LLVMValueRef x, ir_dtype dt) {
  bool e4 = dt == DT_F8E4M3;
  int keep = e4 ? 3 : 2, drop = 23 - keep, rebias = e4 ? 127 - 7 : 127 - 15;
  uint32_t min_normal = e4 ? 0x3c800000u /* 2^-6 */ : 0x38800000u /* 2^-14 */;
  double sub_scale = e4 ? 512.0 /* 2^9 */ : 65536.0 /* 2^16 */;
  LLVMTypeRef i32 = g->i32;
  LLVMValueRef u = LLVMBuildBitCast(g->b, x, i32, "");
  LLVMValueRef sign = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, u, cg_i32(g, 24), ""), cg_i32(g, 0x80), "");
  LLVMValueRef mag = LLVMBuildAnd(g->b, u, cg_i32(g, 0x7fffffff), "");
  /* normal: round the mantissa to `keep` bits (ties to even), rebias the exponent */
  LLVMValueRef lsb = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, mag, cg_i32(g, drop), ""), cg_i32(g, 1), "");
  LLVMValueRef r = LLVMBuildAdd(g->b, LLVMBuildAdd(g->b, mag, cg_i32(g, (1 << (drop - 1)) - 1), ""), lsb, "");
  LLVMValueRef normal = LLVMBuildSub(g->b, LLVMBuildLShr(g->b, r, cg_i32(g, drop), ""), cg_i32(g, rebias << keep), "");
  /* subnormal: |x| in units of the smallest subnormal, rounded to even */
  LLVMValueRef ax = LLVMBuildBitCast(g->b, mag, g->f32, "");
  LLVMTypeRef f32t = g->f32;
  LLVMValueRef sc = LLVMBuildFMul(g->b, ax, fconst(g, sub_scale), "");
  LLVMValueRef rn = cg_intrinsic(g, "llvm.rint", &f32t, 1, &sc, 1);
  LLVMValueRef sub = LLVMBuildFPToUI(g->b, rn, i32, "");
  LLVMValueRef small = LLVMBuildICmp(g->b, LLVMIntULT, mag, cg_i32(g, min_normal), "");
  LLVMValueRef code = LLVMBuildSelect(g->b, small, sub, normal, "");
  /* overflow (and infinity): E4M3 saturates at 0x7e (448), E5M2 becomes infinity (0x7c) */
  int top = e4 ? 0x7e : 0x7c;
  LLVMValueRef over = LLVMBuildICmp(g->b, LLVMIntUGT, code, cg_i32(g, top), "");
  code = LLVMBuildSelect(g->b, over, cg_i32(g, top), code, "");
  LLVMValueRef isnan = LLVMBuildICmp(g->b, LLVMIntUGT, mag, cg_i32(g, 0x7f800000), "");
  LLVMValueRef nan = e4 ? cg_i32(g, 0x7f)
                        : LLVMBuildOr(g->b, cg_i32(g, 0x7e),
                                      LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, mag, cg_i32(g, 21), ""), cg_i32(g, 3), ""), "");
  code = LLVMBuildSelect(g->b, isnan, nan, code, "");
  return LLVMBuildTrunc(g->b, LLVMBuildOr(g->b, sign, code, ""), g->i8, "");
}

static LLVMValueRef to_f32(struct cg *g, LLVMValueRef v, ir_dtype dt) {
  if (dt == DT_F32) return v;
  if (dt == DT_F8E4M3 || dt == DT_F8E5M2) return cg_f8_to_f32(g, v, dt);
  return LLVMBuildFPExt(g->b, v, g->f32, "");
}

static LLVMValueRef from_f32(struct cg *g, LLVMValueRef v, ir_dtype dt) {
  if (dt == DT_F32) return v;
  if (dt == DT_F8E4M3 || dt == DT_F8E5M2) return cg_f32_to_f8(g, v, dt);
  return LLVMBuildFPTrunc(g->b, v, cg_reg_type(g, dt), "");
}

static LLVMValueRef fconst(struct cg *g, double x) { return LLVMConstReal(g->f32, x); }

/* exp2 as ex2.approx.ftz: without .ftz ptxas wraps MUFU.EX2 in a denormal fix-up
 * (compare, scale, select) that costs more than the instruction itself; results below
 * 2^-126 become 0, which no softmax or activation can tell apart. */
static LLVMValueRef exp2f_(struct cg *g, LLVMValueRef x) {
  LLVMTypeRef t = g->f32;
  return cg_intrinsic(g, "llvm.nvvm.ex2.approx.ftz", &t, 1, &x, 1);
}

/* Float arithmetic may contract a * b + c into one fma, as nvcc does by default: one
 * rounding instead of two, and half the instructions in softmax-style code. */
static LLVMValueRef contract(LLVMValueRef v) {
  if (LLVMIsAInstruction(v)) LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
  return v;
}
static LLVMValueRef f_mul(struct cg *g, LLVMValueRef a, LLVMValueRef b) { return contract(LLVMBuildFMul(g->b, a, b, "")); }
static LLVMValueRef f_add(struct cg *g, LLVMValueRef a, LLVMValueRef b) { return contract(LLVMBuildFAdd(g->b, a, b, "")); }
static LLVMValueRef f_sub(struct cg *g, LLVMValueRef a, LLVMValueRef b) { return contract(LLVMBuildFSub(g->b, a, b, "")); }
static LLVMValueRef fdiv_fast(struct cg *g, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef d = LLVMBuildFDiv(g->b, a, b, "");
  LLVMSetFastMathFlags(d, LLVMFastMathAllowReciprocal | LLVMFastMathApproxFunc);
  return d;
}

static LLVMValueRef fabs_(struct cg *g, LLVMValueRef x) {
  LLVMTypeRef t = g->f32;
  return cg_intrinsic(g, "llvm.fabs", &t, 1, &x, 1);
}

static LLVMValueRef copysign_(struct cg *g, LLVMValueRef mag, LLVMValueRef sgn) {
  LLVMTypeRef t = g->f32;
  LLVMValueRef a[2] = {mag, sgn};
  return cg_intrinsic(g, "llvm.copysign", &t, 1, a, 2);
}

/* tanh(x) = sign(x) (1 - 2 / (2^(2|x| log2 e) + 1)): absolute error ~1e-7, no overflow
 * (2^large = inf gives exactly 1). */
static LLVMValueRef tanh_f32(struct cg *g, LLVMValueRef x) {
  LLVMValueRef e = exp2f_(g, f_mul(g, fabs_(g, x), fconst(g, 2.0 * 1.4426950408889634)));
  LLVMValueRef t = f_sub(g, fconst(g, 1.0), fdiv_fast(g, fconst(g, 2.0), f_add(g, e, fconst(g, 1.0))));
  return copysign_(g, t, x);
}

/* erf via erfc(|x|) = t exp(-x^2 + P(t)), t = 1/(1 + |x|/2) (Numerical Recipes' Chebyshev
 * fit, fractional error below 1.2e-7), computed with exp2. */
static LLVMValueRef erf_f32(struct cg *g, LLVMValueRef x) {
  static const double c[10] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                               0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  LLVMValueRef z = fabs_(g, x);
  LLVMValueRef t = fdiv_fast(g, fconst(g, 1.0), f_add(g, fconst(g, 1.0), f_mul(g, fconst(g, 0.5), z)));
  LLVMValueRef p = fconst(g, c[9]);
  for (int i = 8; i >= 0; i--) p = f_add(g, f_mul(g, p, t), fconst(g, c[i]));
  LLVMValueRef arg = f_add(g, f_mul(g, LLVMBuildFNeg(g->b, z, ""), z), p);
  LLVMValueRef erfc = f_mul(g, t, exp2f_(g, f_mul(g, arg, fconst(g, 1.4426950408889634))));
  return copysign_(g, f_sub(g, fconst(g, 1.0), erfc), x);
}

static LLVMValueRef emit_float_op(struct cg *g, ir_opcode op, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef t = g->f32;
  LLVMValueRef args[2] = {a, b};
  switch (op) {
  case IR_NEG: return LLVMBuildFNeg(g->b, a, "");
  case IR_ABS: return fabs_(g, a);
  case IR_EXP: return exp2f_(g, f_mul(g, a, fconst(g, 1.4426950408889634)));
  case IR_EXP2: return exp2f_(g, a);
  case IR_LOG2: return cg_intrinsic(g, "llvm.nvvm.lg2.approx.ftz.f", NULL, 0, &a, 1);
  case IR_LOG: return f_mul(g, cg_intrinsic(g, "llvm.nvvm.lg2.approx.ftz.f", NULL, 0, &a, 1), fconst(g, 0.6931471805599453));
  case IR_SQRT: return cg_intrinsic(g, "llvm.sqrt", &t, 1, &a, 1);
  case IR_RSQRT: return cg_intrinsic(g, "llvm.nvvm.rsqrt.approx.f", NULL, 0, &a, 1);
  case IR_TANH: return tanh_f32(g, a);
  case IR_ERF: return erf_f32(g, a);
  case IR_ADD: return f_add(g, a, b);
  case IR_SUB: return f_sub(g, a, b);
  case IR_MUL: return f_mul(g, a, b);
  case IR_DIV: return cg_intrinsic(g, "llvm.nvvm.div.full", NULL, 0, args, 2); /* div.full.f32: within 2 ulp */
  case IR_REM: return LLVMBuildFRem(g->b, a, b, "");
  case IR_MIN: return cg_intrinsic(g, "llvm.minnum", &t, 1, args, 2);
  case IR_MAX: return cg_intrinsic(g, "llvm.maxnum", &t, 1, args, 2);
  case IR_EQ: return LLVMBuildFCmp(g->b, LLVMRealOEQ, a, b, "");
  case IR_NE: return LLVMBuildFCmp(g->b, LLVMRealUNE, a, b, "");
  case IR_LT: return LLVMBuildFCmp(g->b, LLVMRealOLT, a, b, "");
  case IR_LE: return LLVMBuildFCmp(g->b, LLVMRealOLE, a, b, "");
  case IR_GT: return LLVMBuildFCmp(g->b, LLVMRealOGT, a, b, "");
  case IR_GE: return LLVMBuildFCmp(g->b, LLVMRealOGE, a, b, "");
  default:
    cg_fail(g, "float op %s not supported", ir_ops[op].name);
    return a;
  }
}

static LLVMValueRef emit_int_op(struct cg *g, ir_opcode op, ir_dtype dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef t = LLVMTypeOf(a);
  unsigned bits = LLVMGetIntTypeWidth(t);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0), minus1 = LLVMConstAllOnes(t);
  LLVMValueRef args[2] = {a, b};
  /* bool compares as 0 < 1, u32 as unsigned: both use the unsigned predicates */
  bool uns = dt == DT_BOOL || ir_dtype_is_unsigned(dt);
  switch (op) {
  case IR_NEG: return LLVMBuildNeg(g->b, a, "");
  case IR_NOT: return LLVMBuildNot(g->b, a, "");
  case IR_ABS: {
    if (uns) return a;
    LLVMValueRef f = LLVMConstInt(g->i1, 0, 0);
    LLVMValueRef aa[2] = {a, f};
    return cg_intrinsic(g, "llvm.abs", &t, 1, aa, 2);
  }
  case IR_ADD: return LLVMBuildAdd(g->b, a, b, "");
  case IR_SUB: return LLVMBuildSub(g->b, a, b, "");
  case IR_MUL: return LLVMBuildMul(g->b, a, b, "");
  case IR_MULHI: { /* u32 (the verifier's rule): NVPTX selects mul.hi.u32 for this pattern */
    LLVMTypeRef w = LLVMIntTypeInContext(g->ctx, 2 * bits);
    LLVMValueRef p = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, a, w, ""), LLVMBuildZExt(g->b, b, w, ""), "");
    return LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p, LLVMConstInt(w, bits, 0), ""), t, "");
  }
  case IR_DIV:
  case IR_REM: {
    LLVMValueRef bz = LLVMBuildICmp(g->b, LLVMIntEQ, b, zero, "");
    if (uns) { /* x/0 = 0, x%0 = 0 */
      LLVMValueRef safe = LLVMBuildSelect(g->b, bz, one, b, "");
      LLVMValueRef q = op == IR_DIV ? LLVMBuildUDiv(g->b, a, safe, "") : LLVMBuildURem(g->b, a, safe, "");
      return LLVMBuildSelect(g->b, bz, zero, q, "");
    }
    /* x/0 = 0, x%0 = 0, MIN/-1 = MIN, x%-1 = 0: no trapping or undefined division */
    LLVMValueRef bm = LLVMBuildICmp(g->b, LLVMIntEQ, b, minus1, "");
    LLVMValueRef safe = LLVMBuildSelect(g->b, LLVMBuildOr(g->b, bz, bm, ""), one, b, "");
    LLVMValueRef q = op == IR_DIV ? LLVMBuildSDiv(g->b, a, safe, "") : LLVMBuildSRem(g->b, a, safe, "");
    LLVMValueRef special = op == IR_DIV ? LLVMBuildSelect(g->b, bz, zero, LLVMBuildNeg(g->b, a, ""), "") : zero;
    return LLVMBuildSelect(g->b, LLVMBuildOr(g->b, bz, bm, ""), special, q, "");
  }
  case IR_MIN: return cg_intrinsic(g, uns ? "llvm.umin" : "llvm.smin", &t, 1, args, 2);
  case IR_MAX: return cg_intrinsic(g, uns ? "llvm.umax" : "llvm.smax", &t, 1, args, 2);
  case IR_AND: return LLVMBuildAnd(g->b, a, b, "");
  case IR_OR: return LLVMBuildOr(g->b, a, b, "");
  case IR_XOR: return LLVMBuildXor(g->b, a, b, "");
  case IR_CTZ: {
    LLVMValueRef za[2] = {a, LLVMConstInt(g->i1, 0, 0)}; /* defined for 0: the bit width */
    return cg_intrinsic(g, "llvm.cttz", &t, 1, za, 2);
  }
  case IR_SHL: return LLVMBuildShl(g->b, a, LLVMBuildAnd(g->b, b, LLVMConstInt(t, bits - 1, 0), ""), "");
  case IR_SHR: {
    LLVMValueRef n = LLVMBuildAnd(g->b, b, LLVMConstInt(t, bits - 1, 0), "");
    return uns ? LLVMBuildLShr(g->b, a, n, "") : LLVMBuildAShr(g->b, a, n, "");
  }
  case IR_EQ: return LLVMBuildICmp(g->b, LLVMIntEQ, a, b, "");
  case IR_NE: return LLVMBuildICmp(g->b, LLVMIntNE, a, b, "");
  case IR_LT: return LLVMBuildICmp(g->b, uns ? LLVMIntULT : LLVMIntSLT, a, b, "");
  case IR_LE: return LLVMBuildICmp(g->b, uns ? LLVMIntULE : LLVMIntSLE, a, b, "");
  case IR_GT: return LLVMBuildICmp(g->b, uns ? LLVMIntUGT : LLVMIntSGT, a, b, "");
  case IR_GE: return LLVMBuildICmp(g->b, uns ? LLVMIntUGE : LLVMIntSGE, a, b, "");
  default:
    cg_fail(g, "integer op %s not supported", ir_ops[op].name);
    return a;
  }
}

LLVMValueRef cg_cast(struct cg *g, LLVMValueRef v, ir_dtype from, ir_dtype to) {
  if (from == to) return v;
  bool ff = ir_dtype_is_float(from), ft = ir_dtype_is_float(to);
  LLVMTypeRef tt = cg_reg_type(g, to);
  if (to == DT_BOOL) {
    if (ff) return LLVMBuildFCmp(g->b, LLVMRealUNE, to_f32(g, v, from), fconst(g, 0), "");
    return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  }
  if (ff && ft) {
    if (to == DT_F64) return LLVMBuildFPExt(g->b, v, tt, "");
    if (from == DT_F64) return from_f32(g, LLVMBuildFPTrunc(g->b, v, g->f32, ""), to);
    return from_f32(g, to_f32(g, v, from), to);
  }
  if (ff) {
    LLVMTypeRef ov[2] = {tt, g->f32};
    LLVMValueRef x = to_f32(g, v, from);
    /* saturating, NaN to 0: cvt.rzi.sat.{s32,u32}.f32 */
    return cg_intrinsic(g, ir_dtype_is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", ov, 2, &x, 1);
  }
  if (ft) {
    bool uns = from == DT_BOOL || ir_dtype_is_unsigned(from);
    LLVMValueRef x = uns ? LLVMBuildUIToFP(g->b, v, g->f32, "") : LLVMBuildSIToFP(g->b, v, g->f32, "");
    return to == DT_F64 ? LLVMBuildFPExt(g->b, x, tt, "") : from_f32(g, x, to);
  }
  unsigned fb = LLVMGetIntTypeWidth(LLVMTypeOf(v)), tb = LLVMGetIntTypeWidth(tt);
  if (fb == tb) return v;
  if (fb > tb) return LLVMBuildTrunc(g->b, v, tt, "");
  bool uns = from == DT_BOOL || ir_dtype_is_unsigned(from);
  return uns ? LLVMBuildZExt(g->b, v, tt, "") : LLVMBuildSExt(g->b, v, tt, "");
}

/* One element of an elementwise op (operands of dtype dt). */
LLVMValueRef cg_elem(struct cg *g, ir_opcode op, ir_dtype dt, LLVMValueRef a, LLVMValueRef b) {
  if (!ir_dtype_is_float(dt)) return emit_int_op(g, op, dt, a, b);
  if (dt == DT_F64) {
    /* f64 ops are rare: compute at f32 precision only where no f64 form is cheap */
    LLVMValueRef x = LLVMBuildFPTrunc(g->b, a, g->f32, ""), y = b ? LLVMBuildFPTrunc(g->b, b, g->f32, "") : NULL;
    LLVMValueRef r = emit_float_op(g, op, x, y);
    return LLVMTypeOf(r) == g->i1 ? r : LLVMBuildFPExt(g->b, r, cg_reg_type(g, DT_F64), "");
  }
  LLVMValueRef x = to_f32(g, a, dt), y = b ? to_f32(g, b, dt) : NULL;
  LLVMValueRef r = emit_float_op(g, op, x, y);
  if (LLVMTypeOf(r) == g->i1) return r;
  return from_f32(g, r, dt);
}

/* Is v the accumulator of a dot (mma.sync or wgmma) in block b? */
static bool acc_of_dot_in(const struct ir_func *f, const struct ir_block *b, ir_val v) {
  for (uint32_t i = 0; i < b->ops.n; i++) {
    const struct ir_op *u = &f->ops.v[b->ops.v[i]];
    if ((u->code == IR_DOT && u->args[2] == v) || (u->code == IR_WGMMA && u->args[4] == v)) return true;
  }
  return false;
}

/* Is v the accumulator of a dot in block blk, or carried by blk's loop to be one in the
 * next iteration (the rotated loop of the wgmma-overlap pass)? */
static bool feeds_dot_acc(struct cg *g, ir_val v, uint32_t blk) {
  const struct ir_func *f = g->f;
  const struct ir_block *b = &f->blocks.v[blk];
  if (acc_of_dot_in(f, b, v)) return true;
  uint32_t loop = b->parent;
  if (!b->ops.n || !loop || f->ops.v[loop].code != IR_FOR) return false;
  const struct ir_op *y = &f->ops.v[VEC_LAST(b->ops)];
  for (uint32_t k = 0; y->code == IR_YIELD && k < y->nargs; k++)
    if (y->args[k] == v && acc_of_dot_in(f, b, b->args + 1 + k)) return true;
  return false;
}

/* Rescale skip. An f32 accumulator multiplied by a broadcast factor right before a dot
 * accumulates into it (online softmax's acc * alpha[:, None]) is left alone by a warp whose
 * factors are all exactly 1: x * 1 == x for every float, so the result is bit for bit the
 * same, and a lazily moved running maximum (lib/attention.tile) makes that the usual case.
 * Cost: one compare per distinct factor register, a vote and a warp-uniform branch, against
 * one multiply per accumulator register (128 per thread at head dim 128). */
static bool gen_rescale_skip(struct cg *g, const struct ir_op *op, struct cgval *out) {
  uint32_t n = out->n;
  if (op->code != IR_MUL || ir_vtype(g->f, op->res)->dtype != DT_F32 || n < 32) return false;
  if (!feeds_dot_acc(g, op->res, op->block)) return false;
  for (int k = 0; k < 2; k++) {
    uint32_t d = ir_def_op(g->f, op->args[k]);
    if (!d || g->f->ops.v[d].code != IR_BROADCAST) continue;
    struct cgval *x = cg_val(g, op->args[1 - k]), *s = cg_val(g, op->args[k]);
    if (x->n != n || s->n != n) return false;
    /* the distinct factor registers: few per thread, or the skip does not pay */
    LLVMValueRef *fac = ARENA_NEWN(g->arena, LLVMValueRef, n);
    uint32_t nf = 0;
    for (uint32_t r = 0; r < n; r++) {
      uint32_t j = 0;
      while (j < nf && fac[j] != s->r[r]) j++;
      if (j == nf) fac[nf++] = s->r[r];
    }
    if (nf * 8 > n) return false;
    LLVMValueRef unit = NULL;
    for (uint32_t j = 0; j < nf; j++) {
      LLVMValueRef c = LLVMBuildFCmp(g->b, LLVMRealOEQ, fac[j], fconst(g, 1.0), "");
      unit = unit ? LLVMBuildAnd(g->b, unit, c, "") : c;
    }
    LLVMValueRef vargs[2] = {cg_i32(g, -1), unit};
    unit = cg_intrinsic(g, "llvm.nvvm.vote.all.sync", NULL, 0, vargs, 2);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef scale = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rescale");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rescale.end");
    LLVMBuildCondBr(g->b, unit, join, scale);
    LLVMPositionBuilderAtEnd(g->b, scale);
    LLVMValueRef *prod = ARENA_NEWN(g->arena, LLVMValueRef, n);
    for (uint32_t r = 0; r < n; r++) prod[r] = f_mul(g, x->r[r], s->r[r]);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    LLVMBasicBlockRef from[2] = {pre, scale};
    for (uint32_t r = 0; r < n; r++) {
      out->r[r] = LLVMBuildPhi(g->b, g->f32, "");
      LLVMValueRef v[2] = {x->r[r], prod[r]};
      LLVMAddIncoming(out->r[r], v, from, 2);
    }
    return true;
  }
  return false;
}

static void gen_elementwise(struct cg *g, const struct ir_op *op) {
  uint32_t n = cg_num_regs(g, op->res);
  struct cgval *out = cg_new_val(g, op->res, n);
  ir_dtype dt = ir_vtype(g->f, op->args[0])->dtype, rdt = ir_vtype(g->f, op->res)->dtype;
  struct cgval *a = cg_val(g, op->args[0]);
  struct cgval *b = op->nargs > 1 ? cg_val(g, op->args[1]) : NULL;
  struct cgval *c = op->nargs > 2 ? cg_val(g, op->args[2]) : NULL;
  if (!g->failed && gen_rescale_skip(g, op, out)) return;
  for (uint32_t r = 0; r < n && !g->failed; r++) {
    if (a->n != n || (b && b->n != n) || (c && c->n != n)) {
      cg_fail(g, "%s: operand register counts differ", ir_ops[op->code].name);
      return;
    }
    if (op->code == IR_CAST)
      out->r[r] = cg_cast(g, a->r[r], dt, rdt);
    else if (op->code == IR_SELECT)
      out->r[r] = LLVMBuildSelect(g->b, a->r[r], b->r[r], c->r[r], "");
    else
      out->r[r] = cg_elem(g, (ir_opcode)op->code, dt, a->r[r], b ? b->r[r] : NULL);
  }
}

LLVMValueRef cg_const(struct cg *g, ir_dtype dt, int64_t i, double f) {
  LLVMTypeRef t = cg_reg_type(g, dt);
  /* fp8 lives in i8 registers: the value's code, by the same conversion as a cast (folded) */
  if (dt == DT_F8E4M3 || dt == DT_F8E5M2) return cg_f32_to_f8(g, fconst(g, f), dt);
  if (ir_dtype_is_float(dt)) return LLVMConstReal(t, f);
  return LLVMConstInt(t, (unsigned long long)i, 1);
}

static uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static void gen_const(struct cg *g, const struct ir_op *op) {
  const struct ir_type *t = ir_vtype(g->f, op->res);
  uint32_t n = cg_num_regs(g, op->res);
  struct cgval *out = cg_new_val(g, op->res, n);
  LLVMValueRef c = cg_const(g, (ir_dtype)t->dtype, op->i[0], op->f);
  /* A wgmma accumulator's initial value is materialized by opaque moves: plain constants
   * LLVM rematerializes on the edge that skips a loop, and ptxas then finds accumulator
   * registers defined between a wgmma and its wait and serializes the whole pipeline
   * (C7515) */
  const struct ir_layout *l = &g->f->layouts.v[t->layout];
  if (t->layout && l->kind == IR_LAYOUT_MMA && l->instr[0] == 64 && t->dtype == DT_F32) {
    char text[64];
    snprintf(text, sizeof text, "mov.b32 $0, %u;", (unsigned)float_bits((float)op->f));
    for (uint32_t r = 0; r < n; r++) out->r[r] = cg_asm(g, g->f32, text, "=f", NULL, 0, true);
    return;
  }
  for (uint32_t r = 0; r < n; r++) out->r[r] = c;
}

static void gen_splat(struct cg *g, const struct ir_op *op) {
  uint32_t n = cg_num_regs(g, op->res);
  struct cgval *out = cg_new_val(g, op->res, n);
  LLVMValueRef s = cg_val(g, op->args[0])->r[0];
  for (uint32_t r = 0; r < n; r++) out->r[r] = s;
}

static void gen_arange(struct cg *g, const struct ir_op *op) {
  struct ll l;
  if (!cg_layout_of(g, op->res, &l)) return;
  uint32_t n = ll_num_regs(&l);
  struct cgval *out = cg_new_val(g, op->res, n);
  for (uint32_t r = 0; r < n; r++) {
    LLVMValueRef c[IR_MAX_RANK];
    cg_coords(g, &l, r, c);
    out->r[r] = c[0];
  }
}

/* ---- the driver ---- */

static LLVMTypeRef param_type(struct cg *g, const struct ir_param *p) {
  const struct ir_type *t = ir_vtype(g->f, p->value);
  if (p->kind == IR_PARAM_SHAPE) return g->i32;
  switch (t->dtype) {
  case DT_I64: return g->i64;
  case DT_F64: return LLVMDoubleTypeInContext(g->ctx);
  case DT_F16:
  case DT_BF16:
  case DT_F32: return g->f32;
  default: return g->i32;
  }
}

/* The tensor map of every tma_desc op, in op order (the order of the hidden parameters). */
static void collect_tmaps(struct cg *g, struct cg_result *res) {
  struct ir_func *f = g->f;
  res->ntmaps = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || op->code != IR_TMA_DESC) continue;
    if (res->ntmaps == CG_MAX_TMAPS) {
      cg_fail(g, "more than %d tensor maps", CG_MAX_TMAPS);
      return;
    }
    struct cg_tmap *t = &res->tmaps[res->ntmaps++];
    const struct ir_type *box = ir_vtype(f, op->res);
    const struct ir_layout *l = &f->layouts.v[box->layout];
    const struct ir_param *p = ir_param_of(f, op->args[0]);
    t->param = (uint32_t)(p - f->params.v);
    t->rank = box->rank;
    t->dtype = box->dtype;
    for (int d = 0; d < box->rank; d++) t->box[d] = (uint32_t)box->dims[d];
    t->swizzle = l->max_phase > 1 ? box->dims[box->rank - 1] * ir_dtype_bytes((ir_dtype)box->dtype) : 0;
    t->flat = op->i[0] == 1;
  }
}

static void setup_params(struct cg *g, LLVMValueRef fn) {
  struct ir_func *f = g->f;
  unsigned idx = 0;
  for (uint32_t i = 0; i < f->params.n; i++) {
    const struct ir_param *p = &f->params.v[i];
    const struct ir_type *t = ir_vtype(f, p->value);
    if (p->kind == IR_PARAM_TENSOR) {
      struct cg_tensor *ct = &g->tensors[i];
      ct->ptr = LLVMGetParam(fn, idx++);
      for (int d = 0; d < t->rank; d++) {
        ct->stride[d] = LLVMGetParam(fn, idx++);
        /* facts: a unit stride becomes a constant so address math folds */
        if (p->facts.stride1[d]) ct->stride[d] = cg_i64(g, 1);
      }
      continue;
    }
    struct cgval *cv = cg_new_val(g, p->value, 1);
    LLVMValueRef v = LLVMGetParam(fn, idx++);
    if (p->kind == IR_PARAM_SCALAR) {
      if (t->dtype == DT_BOOL) v = LLVMBuildICmp(g->b, LLVMIntNE, v, cg_i32(g, 0), "");
      else if (t->dtype == DT_F16 || t->dtype == DT_BF16) v = from_f32(g, v, (ir_dtype)t->dtype);
      else if (t->dtype == DT_I8 || t->dtype == DT_I16) v = LLVMBuildTrunc(g->b, v, cg_reg_type(g, (ir_dtype)t->dtype), "");
    }
    cv->r[0] = v;
  }
  /* the tensor maps, in op order after the regular parameters */
  g->desc_param = ARENA_NEWN(g->arena, LLVMValueRef, f->ops.n + 1);
  for (uint32_t i = 1; i < f->ops.n; i++)
    if (f->ops.v[i].block && f->ops.v[i].code == IR_TMA_DESC) g->desc_param[i] = LLVMGetParam(fn, idx++);
}

static LLVMValueRef make_kernel(struct cg *g, unsigned ntmaps) {
  struct ir_func *f = g->f;
  LLVMTypeRef types[256];
  unsigned n = 0;
  for (uint32_t i = 0; i < f->params.n && n < TL_MAX_PARAM_SLOTS; i++) { /* the front end's limit */
    const struct ir_param *p = &f->params.v[i];
    if (p->kind == IR_PARAM_TENSOR) {
      types[n++] = g->gptr;
      for (int d = 0; d < ir_vtype(f, p->value)->rank; d++) types[n++] = g->i64;
    } else {
      types[n++] = param_type(g, p);
    }
  }
  unsigned first_map = n;
  LLVMTypeRef generic = LLVMPointerTypeInContext(g->ctx, 0);
  for (unsigned i = 0; i < ntmaps; i++) types[n++] = generic;
  LLVMValueRef fn = LLVMAddFunction(g->mod, f->name, LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), types, n, 0));
  LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
  /* CUtensorMap: 128 bytes passed by value, 64-byte aligned, read in place (grid constant) */
  LLVMTypeRef map_ty = LLVMArrayType2(g->i8, 128);
  for (unsigned i = first_map; i < n; i++) {
    LLVMAddAttributeAtIndex(fn, i + 1, LLVMCreateTypeAttribute(g->ctx, LLVMGetEnumAttributeKindForName("byval", 5), map_ty));
    LLVMAddAttributeAtIndex(fn, i + 1, LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("align", 5), 64));
    LLVMAddAttributeAtIndex(fn, i + 1, LLVMCreateStringAttribute(g->ctx, "nvvm.grid_constant", 18, "", 0));
  }
  char nt[16];
  snprintf(nt, sizeof nt, "%d", ir_func_threads(f));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(g->ctx, "nvvm.maxntid", 12, nt, (unsigned)strlen(nt)));
  /* setmaxnreg needs a register cap at entry: one block per multiprocessor */
  bool roles = false;
  for (uint32_t i = 1; i < f->ops.n; i++) roles |= f->ops.v[i].block && f->ops.v[i].code == IR_WARP_SPECIALIZE;
  if (roles) LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateStringAttribute(g->ctx, "nvvm.minctasm", 13, "1", 1));
  else if (f->sched.occupancy > 0) { /* schedule occupancy=N: registers for N programs per multiprocessor */
    char mc[8];
    snprintf(mc, sizeof mc, "%d", f->sched.occupancy);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, "nvvm.minctasm", 13, mc, (unsigned)strlen(mc)));
  }
  if (f->cluster > 1) { /* .reqnctapercluster C, 1, 1: a plain launch runs clusters of C */
    char cd[16];
    snprintf(cd, sizeof cd, "%u,1,1", (unsigned)f->cluster);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, "nvvm.cluster_dim", 16, cd, (unsigned)strlen(cd)));
  }
  g->roles = roles;
  return fn;
}

static void gen_block(struct cg *g, uint32_t blk);

static void gen_op_at(struct cg *g, uint32_t id) {
  const struct ir_op *op = &g->f->ops.v[id];
  cg_scratch_at(g, id); /* where this op's scratch may start, if it needs any */
  /* deferred shared-memory stores of synchronous copies land before anything that orders
   * shared memory or leaves the current loop iteration */
  switch (op->code) {
  case IR_BARRIER: case IR_ASYNC_WAIT: case IR_FOR: case IR_IF: case IR_YIELD: case IR_WARP_SPECIALIZE:
  case IR_TURN_WAIT: case IR_TURN_PASS: case IR_MBAR_WAIT: case IR_MBAR_ARRIVE:
  case IR_CONVERT_LAYOUT: case IR_REDUCE_SUM: case IR_REDUCE_MAX: case IR_REDUCE_MIN:
  case IR_SCAN_SUM: case IR_SCAN_PROD: case IR_SCAN_MAX: case IR_SCAN_MIN:
  case IR_LOCAL_STORE: case IR_CLUSTER_REDUCE:
    cg_flush_stores(g);
    break;
  default:
    break;
  }
  switch (op->code) {
  case IR_CONST: gen_const(g, op); return;
  case IR_SPLAT: gen_splat(g, op); return;
  case IR_ARANGE: gen_arange(g, op); return;
  case IR_PROGRAM_ID:
    cg_new_val(g, op->res, 1)->r[0] = g->pid[op->i[0]];
    return;
  case IR_NUM_PROGRAMS:
    cg_new_val(g, op->res, 1)->r[0] = g->nprog[op->i[0]];
    return;
  case IR_BROADCAST:
  case IR_EXPAND_DIMS:
  case IR_CONVERT_LAYOUT:
  case IR_TRANS:
    cg_gen_relayout(g, op);
    return;
  case IR_RESHAPE:
  case IR_PERMUTE:
  case IR_JOIN:
  case IR_SPLIT:
    cg_gen_shape_op(g, op);
    return;
  case IR_REDUCE_SUM:
  case IR_REDUCE_MAX:
  case IR_REDUCE_MIN:
    cg_gen_reduce(g, op);
    return;
  case IR_SCAN_SUM:
  case IR_SCAN_PROD:
  case IR_SCAN_MAX:
  case IR_SCAN_MIN:
    cg_gen_scan(g, op);
    return;
  case IR_DOT:
    cg_gen_dot(g, op);
    return;
  case IR_LOAD:
    cg_gen_load(g, op);
    return;
  case IR_STORE:
    cg_gen_store(g, op);
    return;
  case IR_GATHER:
    cg_gen_gather(g, op);
    return;
  case IR_SCATTER:
    cg_gen_scatter(g, op);
    return;
  case IR_ATOMIC:
    cg_gen_atomic(g, op);
    return;
  case IR_FOR:
    cg_gen_for(g, id);
    return;
  case IR_IF:
    cg_gen_if(g, id);
    return;
  case IR_LOCAL_ALLOC:
    cg_gen_local_alloc(g, op);
    return;
  case IR_LOCAL_STORE:
    cg_gen_local_store(g, op);
    return;
  case IR_LOCAL_LOAD:
    cg_gen_local_load(g, op);
    return;
  case IR_ASYNC_COPY:
    cg_gen_async_copy(g, op);
    return;
  case IR_ASYNC_COMMIT:
    cg_intrinsic(g, "llvm.nvvm.cp.async.commit.group", NULL, 0, NULL, 0);
    return;
  case IR_ASYNC_WAIT: {
    LLVMValueRef n = cg_i32(g, op->i[0]);
    cg_intrinsic(g, "llvm.nvvm.cp.async.wait.group", NULL, 0, &n, 1);
    /* cp.async writes are generic-proxy writes; wgmma reads through the async proxy */
    if (g->async_reads) cg_intrinsic(g, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
    return;
  }
  case IR_WGMMA:
    cg_gen_wgmma(g, op);
    return;
  case IR_WGMMA_WAIT:
    cg_gen_wgmma_wait(g, op);
    return;
  case IR_BARRIER:
    cg_gen_barrier(g, op);
    return;
  case IR_TURN_WAIT:
  case IR_TURN_PASS:
    cg_gen_turn(g, op);
    return;
  case IR_MBAR_ALLOC:
    cg_gen_mbar_alloc(g, op);
    return;
  case IR_MBAR_WAIT:
    cg_gen_mbar_wait(g, op);
    return;
  case IR_MBAR_ARRIVE:
    cg_gen_mbar_arrive(g, op);
    return;
  case IR_MBAR_EXPECT_TX:
    cg_gen_mbar_expect_tx(g, op);
    return;
  case IR_ALIGN_SHIFT:
    cg_gen_align_shift(g, op);
    return;
  case IR_CLUSTER_RANK:
    cg_new_val(g, op->res, 1)->r[0] = sreg(g, "cluster.ctarank");
    return;
  case IR_CLUSTER_REDUCE:
    cg_gen_cluster_reduce(g, op);
    return;
  case IR_TMA_DESC:
    cg_gen_tma_desc(g, op);
    return;
  case IR_TMA_LOAD:
    cg_gen_tma_load(g, op);
    return;
  case IR_TMA_REDUCE:
    cg_gen_tma_reduce(g, op);
    return;
  case IR_BULK_WAIT:
    cg_gen_bulk_wait(g, op);
    return;
  case IR_WARP_SPECIALIZE:
    cg_gen_warp_specialize(g, id);
    return;
  case IR_YIELD:
  case IR_GRID:
    return;
  default:
    if (ir_ops[op->code].flags & OPF_ELEM) {
      gen_elementwise(g, op);
      return;
    }
    cg_fail(g, "op '%s' cannot be lowered", ir_ops[op->code].name);
  }
}

/* An op's instructions carry its source position (a DILocation in the kernel's subprogram):
 * the PTX gets .loc lines, so that profilers (Nsight Compute's source view) and
 * compute-sanitizer map machine code back to .tile lines. An op inside a region restores the
 * enclosing op's position afterwards. */
static void gen_op(struct cg *g, uint32_t id) {
  const struct ir_op *op = &g->f->ops.v[id];
  if (!g->scope || !op->loc.line) {
    gen_op_at(g, id);
    return;
  }
  LLVMMetadataRef outer = LLVMGetCurrentDebugLocation2(g->b);
  LLVMSetCurrentDebugLocation2(g->b, LLVMDIBuilderCreateDebugLocation(g->ctx, op->loc.line, op->loc.col, g->scope, NULL));
  gen_op_at(g, id);
  LLVMSetCurrentDebugLocation2(g->b, outer);
}

/* Line information: a compile unit of the kind that emits only .file/.loc directives
 * (DebugDirectivesOnly: no DWARF sections and no `.target ..., debug`, which would make
 * ptxas compile without optimization), and a subprogram for the kernel. */
static LLVMDIBuilderRef line_info_begin(struct cg *g, LLVMValueRef fn) {
  const char *path = g->f->file;
  if (!path || !*path) return NULL;
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  size_t dirlen = slash ? (size_t)(slash - path) : 0;
  LLVMDIBuilderRef dib = LLVMCreateDIBuilder(g->mod);
  LLVMMetadataRef file = LLVMDIBuilderCreateFile(dib, name, strlen(name), dirlen ? path : ".", dirlen ? dirlen : 1);
  LLVMMetadataRef cu = LLVMDIBuilderCreateCompileUnit(dib, LLVMDWARFSourceLanguageC, file, "tile", 4, 1, "", 0, 0, "", 0,
                                                      /* DICompileUnit::DebugDirectivesOnly: the C
                                                         enum stops before it; the value is cast */
                                                      (LLVMDWARFEmissionKind)(LLVMDWARFEmissionLineTablesOnly + 1),
                                                      0, 0, 0, "", 0, "", 0);
  (void)cu;
  LLVMMetadataRef fty = LLVMDIBuilderCreateSubroutineType(dib, file, NULL, 0, LLVMDIFlagZero);
  size_t nlen = 0;
  const char *fname = LLVMGetValueName2(fn, &nlen);
  unsigned line = g->f->loc.line ? g->f->loc.line : 1;
  g->scope = LLVMDIBuilderCreateFunction(dib, file, fname, nlen, fname, nlen, file, line, fty, 0, 1, line,
                                         LLVMDIFlagZero, 1);
  LLVMSetSubprogram(fn, g->scope);
  LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version", 18,
                    LLVMValueAsMetadata(LLVMConstInt(g->i32, LLVMDebugMetadataVersion(), 0)));
  return dib;
}

static void gen_block(struct cg *g, uint32_t blk) {
  const struct ir_block *b = &g->f->blocks.v[blk];
  bool after_loop = false; /* a top-level loop ended: its epilogue's coordinates are due */
  for (uint32_t i = 0; i < b->ops.n && !g->failed; i++) {
    uint16_t code = g->f->ops.v[b->ops.v[i]].code;
    cg_funnel_before(g, b->ops.v[i]);
    gen_op(g, b->ops.v[i]);
    if (g->failed) return;
    after_loop |= blk == IR_BODY_BLOCK && code == IR_FOR;
    /* What follows a top-level loop computes its thread coordinates afresh (PERF.md 17),
     * after the wgmma_waits that follow the loop: its last products may be in flight until
     * then, and ptxas serializes every wgmma of the kernel when coordinate arithmetic comes
     * before such a wait (C7514: a gathered product whose epilogue scatters its rows) */
    if (after_loop && (i + 1 == b->ops.n || g->f->ops.v[b->ops.v[i + 1]].code != IR_WGMMA_WAIT)) {
      after_loop = false;
      cg_fresh_thread_coords(g, NULL);
    }
  }
}

void cg_gen_region(struct cg *g, uint32_t blk) { gen_block(g, blk); }

bool cg_uniform_block(struct cg *g, uint32_t blk) {
  for (uint32_t b = blk; b;) {
    uint32_t parent = g->f->blocks.v[b].parent;
    if (!parent) return true;
    const struct ir_op *op = &g->f->ops.v[parent];
    /* if conditions are scalars, the same in every thread: both branches are uniform too */
    if (op->code != IR_FOR && op->code != IR_IF && op->code != IR_WARP_SPECIALIZE) return false;
    b = op->block;
  }
  return true;
}

/* Fails with an LLVM message, disposed of before the report (which may run out of memory
 * and jump away). */
static bool fail_llvm(struct cg *g, const char *what, char *msg, bool error_message) {
  char text[2048];
  snprintf(text, sizeof text, "%s", msg ? msg : "");
  if (error_message) LLVMDisposeErrorMessage(msg);
  else LLVMDisposeMessage(msg);
  cg_fail(g, "internal error: %s: %s", what, text);
  return false;
}

static bool emit(struct cg *g, LLVMTargetMachineRef tm, enum cg_output out, struct cg_result *res) {
  char *msg = NULL;
  if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &msg)) return fail_llvm(g, "invalid LLVM module", msg, false);
  LLVMDisposeMessage(msg);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(g->mod, "default<O3>", tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) return fail_llvm(g, "LLVM passes failed", LLVMGetErrorMessage(e), true);
  double t1 = tl_now_ms();
  res->llvm_ms = t1 - g->t0;
  if (out == CG_OUT_LLVM) {
    char *s = LLVMPrintModuleToString(g->mod);
    res->len = strlen(s);
    char *t = arena_try_alloc(g->arena, res->len + 1);
    if (t) memcpy(t, s, res->len + 1);
    LLVMDisposeMessage(s);
    if (!t) arena_oom(g->arena); /* (after the string is disposed of) */
    res->text = t;
    return true;
  }
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, g->mod, LLVMAssemblyFile, &msg, &buf))
    return fail_llvm(g, "PTX emission failed", msg, false);
  size_t n = LLVMGetBufferSize(buf);
  char *t = arena_try_alloc(g->arena, n + 1); /* zeroed: NUL-terminated */
  if (t) memcpy(t, LLVMGetBufferStart(buf), n);
  LLVMDisposeMemoryBuffer(buf);
  if (!t) arena_oom(g->arena); /* (after the buffer is disposed of) */
  res->text = t;
  res->len = strlen(t);
  res->emit_ms = tl_now_ms() - t1;
  return true;
}

bool cg_compile(struct ir_func *f, enum cg_output out, struct arena *a, struct cg_result *res,
                struct strbuf *err) {
  memset(res, 0, sizeof *res);
  const struct tl_target *tgt = f->target;
  if (!tgt || f->stage != IR_STAGE_ALLOCATED) {
    sb_printf(err, "codegen: the function is not GPU IR with allocated shared memory\n");
    return false;
  }
  pthread_once(&init_once, init_llvm);
  struct cg g0, *g = &g0;
  memset(g, 0, sizeof *g);
  g->t0 = tl_now_ms();
  g->f = f;
  g->arena = a;
  g->err = err;
  g->target = tgt;
  g->vals = ARENA_NEWN(a, struct cgval, f->values.n + 1);
  for (uint32_t i = 1; i < f->ops.n; i++)
    if (f->ops.v[i].block && (f->ops.v[i].code == IR_WGMMA || f->ops.v[i].code == IR_TMA_REDUCE))
      g->async_reads = true;
  g->tensors = ARENA_NEWN(a, struct cg_tensor, f->params.n + 1);

  const char *triple = "nvptx64-nvidia-cuda";
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    sb_printf(err, "codegen: %s\n", msg ? msg : "no NVPTX target");
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, tgt->name, tgt->ptx_features, LLVMCodeGenLevelAggressive,
                                                    LLVMRelocDefault, LLVMCodeModelDefault);
  g->ctx = LLVMContextCreate();
  g->mod = LLVMModuleCreateWithNameInContext(f->name, g->ctx);
  LLVMSetTarget(g->mod, triple);
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(g->mod, dl);
  g->i1 = LLVMInt1TypeInContext(g->ctx);
  g->i8 = LLVMInt8TypeInContext(g->ctx);
  g->i16 = LLVMInt16TypeInContext(g->ctx);
  g->i32 = LLVMInt32TypeInContext(g->ctx);
  g->i64 = LLVMInt64TypeInContext(g->ctx);
  g->f16 = LLVMHalfTypeInContext(g->ctx);
  g->bf16 = LLVMBFloatTypeInContext(g->ctx);
  g->f32 = LLVMFloatTypeInContext(g->ctx);
  g->gptr = LLVMPointerTypeInContext(g->ctx, 1);
  g->sptr = LLVMPointerTypeInContext(g->ctx, 3);
  g->b = LLVMCreateBuilderInContext(g->ctx);

  /* From here LLVM objects are alive, which the arena's recovery point knows nothing of: an
   * allocation failure lands here first, disposes of them and goes on to that point. */
  jmp_buf oom;
  jmp_buf *outer = a->oom;
  a->oom = &oom;
  if (setjmp(oom)) {
    if (g->dib) LLVMDisposeDIBuilder(g->dib);
    LLVMDisposeBuilder(g->b);
    LLVMDisposeModule(g->mod);
    LLVMContextDispose(g->ctx);
    LLVMDisposeTargetData(dl);
    LLVMDisposeTargetMachine(tm);
    a->oom = outer;
    arena_oom(a);
  }

  collect_tmaps(g, res);
  res->persistent = f->persistent;
  res->cluster = f->cluster > 1 ? f->cluster : 1;
  res->grid_dep = f->grid_dep != 0;
  LLVMValueRef fn = make_kernel(g, res->ntmaps);
  g->fn = fn;
  LLVMTypeRef smem_ty = LLVMArrayType2(g->i8, 0);
  g->smem = LLVMAddGlobalInAddressSpace(g->mod, smem_ty, "__tile_smem", 3);
  LLVMSetLinkage(g->smem, LLVMExternalLinkage);
  LLVMSetAlignment(g->smem, 1024); /* swizzle atoms and TMA boxes start on 1024 bytes */

  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, fn, "body");
  LLVMPositionBuilderAtEnd(g->b, entry);
  /* programmatic dependent launch (grid-dep pass): before any memory access, wait for the
   * kernel before this one in the stream, then let the next one be scheduled */
  if (f->grid_dep)
    cg_asm(g, LLVMVoidTypeInContext(g->ctx), "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;",
           "~{memory}", NULL, 0, true);
  for (uint32_t i = 1; i < f->ops.n && !g->has_wgmma; i++) g->has_wgmma = f->ops.v[i].block && f->ops.v[i].code == IR_WGMMA;
  LLVMValueRef tid = sreg(g, "tid.x");
  g->role_tid = tid;
  g->leader = LLVMBuildICmp(g->b, LLVMIntEQ, tid, cg_i32(g, 0), "leader");
  g->lane = LLVMBuildAnd(g->b, tid, cg_i32(g, 31), "lane");
  g->warp = warp_index(g, tid);
  const char *axes[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; i++) {
    char nm[32];
    /* a program of C CTAs (cluster-rows): its index is its cluster's */
    snprintf(nm, sizeof nm, f->cluster > 1 && i == 0 ? "clusterid.%s" : "ctaid.%s", axes[i]);
    g->pid[i] = sreg(g, nm);
    snprintf(nm, sizeof nm, f->cluster > 1 && i == 0 ? "nclusterid.%s" : "nctaid.%s", axes[i]);
    g->nprog[i] = sreg(g, nm);
  }
  setup_params(g, fn);
  cg_plan_smem(g);
  cg_plan_lazy_loads(g);
  g->prologue_end = LLVMBuildBr(g->b, body);
  LLVMPositionBuilderAtEnd(g->b, body);
  g->dib = line_info_begin(g, fn);
  gen_block(g, IR_BODY_BLOCK);
  cg_flush_stores(g);
  if (!g->failed) LLVMBuildRetVoid(g->b);
  if (g->dib) {
    LLVMDIBuilderFinalize(g->dib);
    LLVMDisposeDIBuilder(g->dib);
    g->dib = NULL;
  }

  bool ok = !g->failed && emit(g, tm, out, res);
  res->threads = (unsigned)ir_func_threads(f);
  res->whole_program = g->roles || f->cluster > 1; /* (clusters: loaded by the JIT as a whole, never linked) */
  res->smem_bytes = g->smem_bytes;
  a->oom = outer;
  LLVMDisposeBuilder(g->b);
  LLVMDisposeModule(g->mod);
  LLVMContextDispose(g->ctx);
  LLVMDisposeTargetData(dl);
  LLVMDisposeTargetMachine(tm);
  return ok;
}
