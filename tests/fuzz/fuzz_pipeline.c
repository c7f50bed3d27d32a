/* fuzz_pipeline.c - libFuzzer target for the whole compiler, .tile source to PTX.
 *
 * Each input is a .tile file compiled through the public API (tile_emit, TILE_EMIT_PTX, no
 * GPU needed): front end, generic passes, the GPU passes of the target, LLVM IR, LLVM's
 * optimizer and the NVPTX back end. The IR verifier runs after every pass.
 *
 * A first line "//! NAME=VALUE ..." gives compile-time parameter overrides (as in
 * fuzz_frontend), plus three keys of the harness:
 *   arch=sm_80|sm_86|sm_89|sm_90|sm_90a   the target; without it, sm_90a when the input's
 *                                         length is odd and sm_80 when it is even
 *   kernel=NAME                           which kernel of the file (-k)
 *   sched=KEY=V,...                       tile_compile_options.schedule (e.g. sched=ws=0,tma=0)
 * Ordinary errors (TILE_COMPILE, TILE_NOT_FOUND, TILE_UNSUPPORTED, TILE_INVALID_ARGUMENT for a
 * bad schedule) are fine, but must come with a message. An internal compiler error, any other
 * status, an empty message, or PTX without an entry are failures (abort()), as are crashes,
 * hangs and sanitizer reports. Only inputs that compile to PTX are kept in the corpus, and
 * tile_mutator.h mutates tokens and the first line as well as bytes, so that most of the
 * fuzzing time goes to the back end; kernels that would keep LLVM busy for seconds are
 * skipped (llvm_cost). Build and run: README.md here. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "define_line.h"
#include "tile.h"

#ifdef FUZZ_IR_INPUT
#define NAME "fuzz_ir_ptx"
#define INPUT "fuzz.ir"
#else
#define NAME "fuzz_pipeline"
#define INPUT "fuzz.tile"
#include "tile_mutator.h" /* token-level mutations, so that more mutants compile */
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tile_context *ctx;
static int verbose; /* FUZZ_VERBOSE=1: one line per input (arch, status, message or PTX size) */
static unsigned long runs, ptx[2], skipped; /* inputs; compiled to PTX for sm_80-89, sm_90/sm_90a; too costly */

static void report(void) {
  fprintf(stderr, NAME ": %lu inputs, %lu compiled to PTX (%lu for sm_80..sm_89, %lu for sm_90/sm_90a), %lu skipped as too costly for LLVM\n",
          runs, ptx[0] + ptx[1], ptx[0], ptx[1], skipped);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("TILE_CACHE_DIR", "", 1); /* no on-disk cache */
  verbose = getenv("FUZZ_VERBOSE") != NULL;
  if (tile_context_create(NULL, &ctx) != TILE_OK) abort();
  atexit(report);
  return 0;
}

enum { MAX_DEFS = 16 };

/* The result of a tile_emit: an ordinary error with a message, or PTX with an entry;
 * anything else aborts. */
static void check(tile_status st, const char *arch, const char *out, size_t len, double ms) {
  const char *msg = tile_errmsg(ctx);
  if (verbose)
    fprintf(stderr, NAME ": %s %s %.1f ms: %.*s\n", arch, tile_status_name(st), ms, st ? (int)strcspn(msg, "\n") : 0,
            msg);
  switch (st) {
  case TILE_OK:
    if (verbose && out) fprintf(stderr, NAME ": %zu bytes of PTX\n", len);
    if (out && (strlen(out) != len || !strstr(out, ".entry"))) {
      fprintf(stderr, NAME ": %s: PTX without an entry:\n%s\n", arch, out);
      abort();
    }
    return;
  case TILE_COMPILE:
  case TILE_NOT_FOUND:
  case TILE_UNSUPPORTED:
  case TILE_INVALID_ARGUMENT:
    if (!msg[0]) {
      fprintf(stderr, NAME ": %s: %s without a message\n", arch, tile_status_name(st));
      abort();
    }
    return;
  default:
    fprintf(stderr, NAME ": %s: %s: %s\n", arch, tile_status_name(st), msg);
    abort();
  }
}

/* Legal kernels can take LLVM many seconds: attention with D=128, BN=256 and one warp is
 * 90000 LLVM instructions and 10 s of O3 and PTX emission (20 s and more under ASan), which
 * the fuzzer would report as a hang. The harness skips such inputs (the library compiles
 * them; nothing is refused). The estimate, from the Tile IR text: the per-thread registers
 * of every op's result plus a 64th of the per-thread multiply-adds of every dot, plus the
 * square of the largest single value's per-thread registers over 50 (register allocation
 * and scheduling grow faster than linearly with one huge live tile: a 128x1024 f32
 * accumulator on 4 warps, 1024 registers per thread, costs 5900 by the linear terms but
 * took 9 s). Calibration (native compile times): that attention 14800 + 5200 (10 s), with
 * two warps 7400 + 1300 (2.7 s); the lib kernels' largest configurations at most 9400 + 1300
 * (attention D=256, BM=BN=128, 1.9 s), GEMM 256x256x128 3100 + 1300, softmax BN=4096 on one
 * warp 4500 + 320; two 256x256 accumulators on 4 warps 6000 + 5200 (5 s, skipped). A
 * pipelined loop copies its loads `stages` times over (the prologue's copies are one basic
 * block, and a copy of an unaligned tile is several instructions per element): each load
 * counts four times more per stage of the deepest loop. A 64x256 bf16 B tile copied
 * element by element (an unaligned column start) on two warps with stages=16 took LLVM's
 * PTX emission 177 s natively (a CI fuzz timeout, 2026-12-03): 4 x 15 x 272 by that term;
 * a GEMM 128x256x64 on 8 warps with 3 stages adds 4 x 2 x 96. Past about 1000 such
 * registers (loads x (stages - 1)) the time grows as their square: a 16x256 bf16 B tile
 * at an unaligned column on two warps with stages=16 (1980 by that product) took 13 s of
 * PTX emission natively, a third of it at stages=8 (924, 3.4 s) and at BN=128 (1020,
 * 3.8 s); 4 x 1980 alone stays under the limit, and under ASan it took more than 25 s (a
 * fuzz timeout, 2026-12-07), so the excess over 1024 counts squared / 100. The lib
 * kernels' deepest pipelines stay below the knee (attention D=256: 768). The results of
 * one region's products (a loop's accumulators) live together, and past 384 registers per
 * thread their sum's excess counts squared / 4: SwiGLU's two 256x256 f32 accumulators on
 * 8 warps (512; 7300 by the other terms) took 20 s of wgmma codegen natively and 5 s on
 * mma.sync (fuzz_pipeline, 2026-12-07), while attention D=256 on 4 warps (256 + 64) takes
 * 1.9 s. */
enum { MAX_COST = 11000 };

static double llvm_cost(const char *ir, size_t n) {
  enum { MAXV = 1 << 16 };
  static int32_t lastdim[MAXV]; /* numbered value -> the last dimension of its tile type */
  double cost = 0, maxregs = 0, loads = 0, products = 0, region_products = 0;
  int warps = 0, stages = 1;
  const char *end = ir + n;
  for (const char *line = ir; line < end;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    const char *p = line;
    while (p < eol && *p == ' ') p++;
    if (p < eol && *p == '}') region_products = 0; /* the products of one region live together */
    if (!warps) {
      const char *w = p;
      while (w + 6 < eol && memcmp(w, "warps=", 6) != 0) w++;
      if (w + 6 < eol) warps = atoi(w + 6);
      if (warps < 1 || warps > 32) warps = 0;
    }
    for (const char *q = p; q + 7 <= eol; q++) /* "for ... {stages=S" */
      if (memcmp(q, "stages=", 7) == 0) {
        int st = atoi(q + 7);
        if (st > stages && st <= 64) stages = st;
      }
    /* "%N = op args : tile<AxBx...xT>" */
    const char *ty = NULL;
    for (const char *q = p; q + 7 <= eol; q++)
      if (memcmp(q, ": tile<", 7) == 0) ty = q + 7;
    if (warps && ty && *p == '%' && eol[-1] == '>') {
      char *e;
      long v = strtol(p + 1, &e, 10);
      double numel = 1;
      long dims[4] = {0};
      int rank = 0;
      const char *q = ty;
      while (q < eol && *q >= '0' && *q <= '9' && rank < 4) {
        dims[rank] = strtol(q, (char **)&q, 10);
        numel *= (double)dims[rank++];
        if (q < eol && *q == 'x') q++;
      }
      int wide = q + 3 <= eol && (memcmp(q, "i64", 3) == 0 || memcmp(q, "f64", 3) == 0);
      double threads = 32.0 * warps, regs = numel * (wide ? 2 : 1) / threads;
      cost += regs;
      if (regs > maxregs) maxregs = regs;
      const char *o = p;
      while (o + 8 <= eol && memcmp(o, " = load ", 8) != 0) o++;
      if (o + 8 <= eol) loads += regs;
      if (e > p + 1 && v >= 0 && v < MAXV && rank) lastdim[v] = (int32_t)dims[rank - 1];
      const char *op = p;
      while (op + 8 <= eol && memcmp(op, " = ", 3) != 0) op++;
      if (op + 8 <= eol && memcmp(op, " = dot %", 8) == 0 && rank == 2) {
        long a = strtol(op + 8, NULL, 10);
        if (a >= 0 && a < MAXV) cost += numel * lastdim[a] / threads / 64;
        region_products += regs;
        if (region_products > products) products = region_products;
      }
    }
    line = eol + 1;
  }
  double staged = loads * (stages - 1), excess = staged > 1024 ? staged - 1024 : 0;
  double together = products > 384 ? products - 384 : 0;
  return cost + 4 * staged + excess * excess / 100 + maxregs * maxregs / 50 + together * together / 4;
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tile_define defs[MAX_DEFS];
  unsigned ndefs = 0;
  char line[512];
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .flags = TILE_VERIFY_EACH | TILE_NO_CACHE};
  co.arch = size % 2 ? "sm_90a" : "sm_80";
  if (size > 3 && memcmp(data, "//!", 3) == 0) {
    const char *end = memchr(data, '\n', size);
    size_t n = (end ? (size_t)(end - (const char *)data) : size) - 3;
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, data + 3, n);
    line[n] = 0;
    char *p = line, *name, *value;
    while (ndefs < MAX_DEFS && fuzz_next_define(&p, &name, &value)) {
      if (strcmp(name, "arch") == 0) co.arch = value;
      else if (strcmp(name, "kernel") == 0) co.kernel = value;
      else if (strcmp(name, "sched") == 0) co.schedule = value;
      else defs[ndefs++] = (tile_define){name, value};
    }
  }
  co.defines = defs;
  co.ndefines = ndefs;
  runs++;
  tile_status st;
#ifdef FUZZ_IR_INPUT
  char *irtext = malloc(size + 1); /* the input is the IR; NUL-terminated for strtol */
  if (!irtext) abort();
  memcpy(irtext, data, size);
  irtext[size] = 0;
  const char *ir = irtext;
  size_t ir_len = size;
#else
  /* the IR after the generic passes first: for the cost estimate (the front end again for
   * the PTX below costs a millisecond) */
  tile_emit_options ei = {.what = TILE_EMIT_IR};
  char *irtext = NULL;
  size_t ir_len = 0;
  st = tile_emit(ctx, INPUT, (const char *)data, size, &co, &ei, &irtext, &ir_len);
  if (st != TILE_OK) {
    check(st, co.arch, NULL, 0, 0);
    return -1;
  }
  const char *ir = irtext;
#endif
  double cost = llvm_cost(ir, ir_len);
#ifdef FUZZ_IR_INPUT
  free(irtext);
#else
  tile_free(irtext);
#endif
  if (cost > MAX_COST) { /* legal, but LLVM would take seconds: see llvm_cost */
    skipped++;
    if (verbose) fprintf(stderr, NAME ": %s: skipped, cost %.0f\n", co.arch, cost);
    return -1;
  }
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
#ifdef FUZZ_IR_INPUT
  eo.input_is_ir = 1; /* fuzz_ir_ptx: Tile IR text to PTX (tile_emit's IR input) */
#endif
  char *out = NULL;
  size_t len = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = tile_emit(ctx, INPUT, (const char *)data, size, &co, &eo, &out, &len);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (verbose) fprintf(stderr, NAME ": %s: cost %.0f\n", co.arch, cost);
  check(st, co.arch, out, len, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
  if (st == TILE_OK) ptx[strncmp(co.arch, "sm_9", 4) == 0]++;
  tile_free(out);
  /* Only inputs that compiled join the corpus (-1: libFuzzer keeps it out even when it
   * reached new code): byte mutations break most kernels, and a corpus of the front end's
   * error paths (fuzz_frontend's job) would leave few mutants that reach codegen. */
  return st == TILE_OK ? 0 : -1;
}
