/* fp8_codegen.c - the code generator's fp8 conversions (cg_f8_to_f32, cg_f32_to_f8 in
 * compiler/codegen/cg.c, which the GPU runs) built into a host function, compiled for this
 * machine by LLVM's MCJIT and run against the reference conversions of compiler/util/fp16.h
 * (what the CPU interpreter uses): every one of the 256 codes of each format widened, and
 * 2^24 float bit patterns narrowed (every sign, exponent and top-15 mantissa bits, plus low
 * bits that decide ties and rounding, and the specials). A mismatch prints the input and
 * both results and fails. No GPU is needed; ctest runs it as cli-less `host_fp8_codegen`.
 *   fp8_codegen            (exit 0: all equal) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>

#include "cg_internal.h"
#include "fp16.h"

/* The libcall LLVM emits for half -> float on a host without F16C; MCJIT finds it in this
 * program (linked with exported symbols). */
__extension__ typedef _Float16 host_half;
float __extendhfsf2(host_half h) __attribute__((used, visibility("default")));
float __extendhfsf2(host_half h) {
  uint16_t b;
  memcpy(&b, &h, sizeof b);
  return tl_f16_to_f32(b);
}

typedef float (*widen_fn)(uint8_t);
typedef uint8_t (*narrow_fn)(float);

static LLVMValueRef build(struct cg *g, const char *name, bool widen, ir_dtype dt) {
  LLVMTypeRef param = widen ? g->i8 : g->f32, ret = widen ? g->f32 : g->i8;
  LLVMValueRef fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(ret, &param, 1, 0));
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  LLVMValueRef x = LLVMGetParam(fn, 0);
  LLVMBuildRet(g->b, widen ? cg_f8_to_f32(g, x, dt) : cg_f32_to_f8(g, x, dt));
  return fn;
}

static int same_float(float a, float b) { return (a != a && b != b) || tl_f32_bits(a) == tl_f32_bits(b); }

int main(void) {
  LLVMLinkInMCJIT();
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  struct arena arena;
  arena_init(&arena, NULL, NULL);
  struct cg g;
  memset(&g, 0, sizeof g);
  g.arena = &arena;
  g.ctx = LLVMContextCreate();
  g.mod = LLVMModuleCreateWithNameInContext("fp8", g.ctx);
  g.b = LLVMCreateBuilderInContext(g.ctx);
  g.i1 = LLVMInt1TypeInContext(g.ctx);
  g.i8 = LLVMInt8TypeInContext(g.ctx);
  g.i16 = LLVMInt16TypeInContext(g.ctx);
  g.i32 = LLVMInt32TypeInContext(g.ctx);
  g.i64 = LLVMInt64TypeInContext(g.ctx);
  g.f16 = LLVMHalfTypeInContext(g.ctx);
  g.bf16 = LLVMBFloatTypeInContext(g.ctx);
  g.f32 = LLVMFloatTypeInContext(g.ctx);
  const char *names[4] = {"e4m3_to_f32", "e5m2_to_f32", "f32_to_e4m3", "f32_to_e5m2"};
  build(&g, names[0], true, DT_F8E4M3);
  build(&g, names[1], true, DT_F8E5M2);
  build(&g, names[2], false, DT_F8E4M3);
  build(&g, names[3], false, DT_F8E5M2);
  char *msg = NULL;
  if (g.failed || LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &msg)) {
    fprintf(stderr, "fp8_codegen: invalid module: %s\n", msg ? msg : "codegen failed");
    return 1;
  }
  LLVMDisposeMessage(msg);
  LLVMExecutionEngineRef ee;
  if (LLVMCreateExecutionEngineForModule(&ee, g.mod, &msg)) {
    fprintf(stderr, "fp8_codegen: no JIT: %s\n", msg);
    return 1;
  }
  widen_fn w4 = (widen_fn)(uintptr_t)LLVMGetFunctionAddress(ee, names[0]);
  widen_fn w5 = (widen_fn)(uintptr_t)LLVMGetFunctionAddress(ee, names[1]);
  narrow_fn n4 = (narrow_fn)(uintptr_t)LLVMGetFunctionAddress(ee, names[2]);
  narrow_fn n5 = (narrow_fn)(uintptr_t)LLVMGetFunctionAddress(ee, names[3]);
  long bad = 0;
  for (int c = 0; c < 256; c++) {
    float a = w4((uint8_t)c), b = tl_e4m3_to_f32((uint8_t)c);
    if (!same_float(a, b) && bad++ < 10) printf("e4m3 0x%02x: codegen %a, reference %a\n", c, a, b);
    a = w5((uint8_t)c), b = tl_e5m2_to_f32((uint8_t)c);
    if (!same_float(a, b) && bad++ < 10) printf("e5m2 0x%02x: codegen %a, reference %a\n", c, a, b);
  }
  /* narrowing: the top 16 bits exhaustively (sign, exponent, 7 mantissa bits) with low bits
   * around the rounding points of both formats (bit 20: E4M3's half ulp; bit 21: E5M2's) */
  static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  long n = 0;
  for (uint32_t hi = 0; hi < 0x10000; hi++)
    for (uint32_t l = 0; l < sizeof lows / sizeof lows[0]; l++)
      for (uint32_t mid = 0; mid < 4; mid++) {
        uint32_t bits = hi << 16 | lows[l];
        if (mid) bits = (bits & ~0x00300000u) | (mid << 20); /* both tie bits in every state */
        float f = tl_f32_from_bits(bits);
        uint8_t a = n4(f), b = tl_f32_to_e4m3(f);
        if (a != b && bad++ < 10) printf("f32 0x%08" PRIx32 " (%a) to e4m3: codegen 0x%02x, reference 0x%02x\n", bits, f, a, b);
        a = n5(f), b = tl_f32_to_e5m2(f);
        if (a != b && bad++ < 10) printf("f32 0x%08" PRIx32 " (%a) to e5m2: codegen 0x%02x, reference 0x%02x\n", bits, f, a, b);
        n++;
      }
  printf("fp8_codegen: 512 codes widened, %ld floats narrowed to both formats, %ld mismatches\n", n, bad);
  LLVMDisposeExecutionEngine(ee);
  LLVMDisposeBuilder(g.b);
  LLVMContextDispose(g.ctx);
  arena_free(&arena);
  return bad != 0;
}
