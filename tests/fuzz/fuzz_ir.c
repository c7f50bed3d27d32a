/* fuzz_ir.c - libFuzzer target for the textual Tile IR: parser, verifier, printer and the
 * generic pass pipeline.
 *
 * Each input is IR text (tilec --emit=ir output, or GPU IR as tilec --dump-after prints it).
 * It is parsed (ir_parse); each kernel that parses is verified, and for each one that
 * verifies:
 *  - round trip: printed, parsed again, verified again and printed again; the two texts
 *    must be equal (with and without `loc(line:col)`). The printer numbers unnamed values
 *    in print order and prints floats in their shortest exact form, so text that went
 *    through the printer once is a fixed point: the invariant is print(parse(print(x))) ==
 *    print(x), not print(parse(x)) == x (the input may spell values, spacing and floats any
 *    way the parser accepts);
 *  - the generic pipeline (canonicalize, fold, transpose, flatten, cse, dce) runs on it with the verifier after
 *    every pass, as tile_compile does for TILE_SOURCE_IR input: a pass that breaks a verified
 *    kernel is a compiler bug. Its output must round-trip too.
 * Everything lives in one arena freed per input, so leaks and uses after free show at once.
 * Crashes, hangs, sanitizer reports and the broken invariants above (abort()) are failures;
 * a parse or verification error is an ordinary outcome. Build and run: README.md here. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static TL_NORETURN void fail(const char *what, const char *a, const char *b) {
  fprintf(stderr, "fuzz_ir: %s\n", what);
  if (a) fprintf(stderr, "----- first\n%s\n", a);
  if (b) fprintf(stderr, "----- second\n%s\n", b);
  abort();
}

static const char *print(struct arena *a, const struct ir_func *f, unsigned flags) {
  struct strbuf sb;
  sb_init(&sb, a);
  ir_print_func(&sb, f, flags);
  return sb_str(&sb);
}

/* text (printer output of a verified kernel) must parse to one kernel that verifies and
 * prints back the same. */
static void round_trip(struct arena *a, struct strtab *st, const char *text, unsigned flags) {
  struct strbuf err;
  sb_init(&err, a);
  struct ir_module m;
  if (!ir_parse("printed.ir", text, strlen(text), a, st, &m, &err))
    fail("printed IR does not parse", text, sb_str(&err));
  if (m.funcs.n != 1) fail("printed IR does not hold one kernel", text, NULL);
  if (!ir_verify(m.funcs.v[0], NULL, &err)) fail("printed IR does not verify", text, sb_str(&err));
  const char *again = print(a, m.funcs.v[0], flags);
  if (strcmp(text, again) != 0) fail("print -> parse -> print changed the text", text, again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct arena a;
  arena_init(&a, NULL, NULL);
  struct strtab st;
  strtab_init(&st, &a);
  struct strbuf err;
  sb_init(&err, &a);
  struct ir_module m;
  if (ir_parse("fuzz.ir", (const char *)data, size, &a, &st, &m, &err)) {
    for (uint32_t i = 0; i < m.funcs.n; i++) {
      struct ir_func *f = m.funcs.v[i];
      if (!ir_verify(f, NULL, &err)) continue;
      const char *text = print(&a, f, 0);
      round_trip(&a, &st, text, 0);
      struct pass_options po = {.verify_each = true};
      struct strbuf perr;
      sb_init(&perr, &a);
      if (!pass_pipeline_generic(f, &po, &perr)) 
        fail("the generic pipeline broke a verified kernel", text, sb_str(&perr));
      round_trip(&a, &st, print(&a, f, 0), 0);
    }
  }
  arena_free(&a);
  return 0;
}
