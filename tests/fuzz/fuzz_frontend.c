/* fuzz_frontend.c - libFuzzer target for the whole front end.
 *
 * Each input is a .tile file. It is parsed, its AST printed, every kernel lowered (with the
 * defaults, and once more with overrides taken from the first line when it starts with
 * "//!", e.g. "//! BM=64 T=bf16"), and the diagnostics rendered. All memory lives in one
 * arena that is freed after each input, so a leak or a use after free shows up at once under
 * AddressSanitizer. The front end must never crash, hang, or trip a sanitizer on any input.
 * Build and run: see README.md next to this file. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "define_line.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct arena a;
  arena_init(&a, NULL, NULL);
  struct strtab st;
  strtab_init(&st, &a);
  struct lang_ctx *c = lang_ctx_new(&a, &st);
  struct ast_file *f = lang_parse(c, "fuzz.tile", (const char *)data, size);

  struct strbuf sb;
  sb_init(&sb, &a);
  lang_print_ast(&sb, f);

  /* Overrides from a first line "//! NAME=VALUE ...". */
  struct lang_define defs[8];
  uint32_t ndefs = 0;
  if (size > 4 && memcmp(data, "//!", 3) == 0) {
    const char *end = memchr(data, '\n', size);
    size_t n = end ? (size_t)(end - (const char *)data) : size;
    char *line = arena_strndup(&a, (const char *)data + 3, n - 3);
    char *p = line, *name, *value;
    while (ndefs < 8 && fuzz_next_define(&p, &name, &value)) {
      defs[ndefs].name = name;
      defs[ndefs].value = value;
      ndefs++;
    }
  }

  uint32_t nk = lang_kernel_count(f);
  for (uint32_t k = 0; k < nk; k++) {
    const struct lang_kernel_info *info = lang_kernel_info(f, k);
    struct ir_func *fn = lang_lower(c, f, info->name, NULL, 0);
    if (fn) ir_print_func(&sb, fn, 0);
    if (ndefs) {
      fn = lang_lower(c, f, info->name, defs, ndefs);
      if (fn) ir_print_func(&sb, fn, 0);
    }
  }
  if (nk != 1) lang_lower(c, f, NULL, NULL, 0);
  (void)lang_diag_text(c);
  /* Internal errors are compiler bugs: make the fuzzer stop on them. */
  for (uint32_t i = 0; i < lang_diag_count(c); i++)
    if (lang_diag_id(c, i) == D_INTERNAL) __builtin_trap();
  arena_free(&a);
  return 0;
}
