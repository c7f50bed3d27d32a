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
 * fuzzing time goes to the back end. Build and run: README.md here. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static unsigned long runs, ptx[2]; /* inputs; those compiled to PTX for sm_80-89 and for sm_90/sm_90a */

static void report(void) {
  fprintf(stderr, NAME ": %lu inputs, %lu compiled to PTX (%lu for sm_80..sm_89, %lu for sm_90/sm_90a)\n", runs,
          ptx[0] + ptx[1], ptx[0], ptx[1]);
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
    for (char *p = line; *p && ndefs < MAX_DEFS;) {
      while (*p == ' ') p++;
      char *name = p;
      while (*p && *p != ' ' && *p != '=') p++;
      if (*p != '=') break;
      *p++ = 0;
      char *value = p;
      while (*p && *p != ' ') p++;
      if (*p) *p++ = 0;
      if (strcmp(name, "arch") == 0) co.arch = value;
      else if (strcmp(name, "kernel") == 0) co.kernel = value;
      else if (strcmp(name, "sched") == 0) co.schedule = value;
      else defs[ndefs++] = (tile_define){name, value};
    }
  }
  co.defines = defs;
  co.ndefines = ndefs;
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
#ifdef FUZZ_IR_INPUT
  eo.input_is_ir = 1; /* fuzz_ir_ptx: Tile IR text to PTX (tile_emit's IR input) */
#endif
  runs++;
  char *out = NULL;
  size_t len = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tile_status st = tile_emit(ctx, INPUT, (const char *)data, size, &co, &eo, &out, &len);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const char *msg = tile_errmsg(ctx);
  if (verbose)
    fprintf(stderr, NAME ": %s %s %s %.1f ms: %.*s\n", co.arch, co.kernel ? co.kernel : "-", tile_status_name(st),
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
            st ? (int)strcspn(msg, "\n") : 0, msg);
  switch (st) {
  case TILE_OK:
    if (verbose) fprintf(stderr, NAME ": %zu bytes of PTX\n", len);
    ptx[strncmp(co.arch, "sm_9", 4) == 0]++;
    if (!out || strlen(out) != len || !strstr(out, ".entry")) {
      fprintf(stderr, NAME ": %s: PTX without an entry:\n%s\n", co.arch, out ? out : "(null)");
      abort();
    }
    break;
  case TILE_COMPILE:
  case TILE_NOT_FOUND:
  case TILE_UNSUPPORTED:
  case TILE_INVALID_ARGUMENT:
    if (!msg[0]) {
      fprintf(stderr, NAME ": %s: %s without a message\n", co.arch, tile_status_name(st));
      abort();
    }
    break;
  default:
    fprintf(stderr, NAME ": %s: %s: %s\n", co.arch, tile_status_name(st), msg);
    abort();
  }
  tile_free(out);
  /* Only inputs that compiled join the corpus (-1: libFuzzer keeps it out even when it
   * reached new code): byte mutations break most kernels, and a corpus of the front end's
   * error paths (fuzz_frontend's job) would leave few mutants that reach codegen. */
  return st == TILE_OK ? 0 : -1;
}
