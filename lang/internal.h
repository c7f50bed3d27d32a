/* internal.h - what the front end's files share and lang.h does not show: the context, source
 * locations and the diagnostics engine.
 *
 * Design choices:
 *  - A location is a byte range in one source file plus the line and column of its first
 *    byte. The parser uses it as its YYLTYPE, so every token and AST node carries one.
 *  - Diagnostics are recorded, never printed: each has a severity, a location, a message and
 *    an id from diag.def (the id lets the golden test prove that every diagnostic is tested).
 *  - User errors and internal errors take different paths: lang_error reports a problem with
 *    the program; lang_internal_error reports a bug in the compiler and is phrased as such.
 *  - After LANG_MAX_ERRORS errors the context records "too many errors" once and stops: the
 *    scanner then returns end of file and sema returns early, so bad input cannot produce
 *    unbounded output. */
#ifndef TL_LANG_INTERNAL_H
#define TL_LANG_INTERNAL_H

#include "lang.h"

enum { LANG_MAX_ERRORS = 50 };

/* A source range. file indexes lang_ctx.files; line and col are 1-based, col counts bytes.
 * line == 0 means "no location" (command-line overrides, whole-file errors). */
struct lang_loc {
  uint32_t file;
  uint32_t off, len;
  uint32_t line, col;
};

enum lang_diag_id {
#define DIAG(id, summary) D_##id,
#include "diag.def"
#undef DIAG
  D__COUNT
};

extern const char *const lang_diag_summaries[D__COUNT];

struct lang_source {
  const char *name;
  const char *text;
  size_t len;
  uint32_t *line_starts; /* computed on first use by the renderer */
  uint32_t nlines;
};

struct lang_diag_rec {
  struct lang_diag pub;
  enum lang_diag_id id;
  uint32_t file, off;
};

struct lang_ctx {
  struct arena *arena;
  struct strtab *strs;
  VEC(struct lang_source) files;
  VEC(struct lang_diag_rec) diags;
  uint32_t nerrors;
  bool stopped;    /* the error limit was reached */
  bool drop_notes; /* the last error was dropped, so its notes are too */
};

/* Reports a user error at loc. Returns false, so checks can `return lang_error(...)`. */
bool lang_error(struct lang_ctx *c, struct lang_loc loc, enum lang_diag_id id, const char *fmt, ...)
    TL_PRINTF(4, 5);
/* A note attached to the previous diagnostic (dropped if that one was dropped). */
void lang_note(struct lang_ctx *c, struct lang_loc loc, const char *fmt, ...) TL_PRINTF(3, 4);
/* Reports a compiler bug. The message says so; the program may well be valid. */
void lang_internal_error(struct lang_ctx *c, struct lang_loc loc, const char *fmt, ...)
    TL_PRINTF(3, 4);

/* The id of diagnostic i (for the golden test's coverage check). */
enum lang_diag_id lang_diag_id(const struct lang_ctx *c, uint32_t i);

/* Registers a source text for diagnostics; returns its file index. */
uint32_t lang_add_source(struct lang_ctx *c, const char *name, const char *text, size_t len);

/* The text of a located range (for messages that quote source, like constraints). */
const char *lang_loc_text(struct lang_ctx *c, struct lang_loc loc);

static inline struct lang_loc lang_loc_none(uint32_t file) {
  struct lang_loc l = {file, 0, 0, 0, 0};
  return l;
}

/* gelu(x) = x / (1 + exp2(x * (C1 + C2 * x^2))): the tanh approximation written with one
 * exp2 (irgen.c emit_math); constant folding evaluates the same steps. */
#define LANG_GELU_C1 (-2.0 * 0.7978845608028654 * 1.4426950408889634)
#define LANG_GELU_C2 (0.044715 * LANG_GELU_C1)

#endif
