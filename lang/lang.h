/* lang.h - the front end's entry points: parse a .tile file, describe its kernels, and
 * specialize + check + lower one kernel to Tile IR.
 *
 * A lang_ctx is one compilation session: it owns nothing but borrows an arena (all AST, IR
 * and diagnostics live there) and a string table. Diagnostics accumulate in the context;
 * nothing is printed. Errors are user errors with a source location; internal invariants
 * are checked with assert-like internal errors that are reported as such.              */
#ifndef TL_LANG_H
#define TL_LANG_H

#include "ir.h"

struct lang_ctx;
struct ast_file;

enum lang_severity { LANG_ERROR, LANG_WARNING, LANG_NOTE };

struct lang_diag {
  enum lang_severity severity;
  const char *file;
  uint32_t line, col; /* 1-based */
  uint32_t len;       /* length of the underlined span, >= 1 */
  const char *message;
  const char *code; /* the diag.def name of the diagnostic ("CONSTRAINT"); stable */
};

struct lang_ctx *lang_ctx_new(struct arena *a, struct strtab *strs);

/* Parses a whole file. Returns the (possibly partial) AST; check lang_error_count. */
struct ast_file *lang_parse(struct lang_ctx *c, const char *filename, const char *src, size_t len);

uint32_t lang_error_count(const struct lang_ctx *c);
uint32_t lang_diag_count(const struct lang_ctx *c);
const struct lang_diag *lang_diag_get(const struct lang_ctx *c, uint32_t i);
/* All diagnostics so far, rendered as "file:line:col: error: message", the source line and a
 * caret line under the span, one block per diagnostic. Never NULL. */
const char *lang_diag_text(const struct lang_ctx *c);

/* The AST in a readable, stable indented form (tilec --emit=ast). */
void lang_print_ast(struct strbuf *sb, const struct ast_file *f);

/* ---- kernels and their parameters, as declared (before specialization) ---- */

enum lang_cparam_kind { LANG_CP_INT, LANG_CP_BOOL, LANG_CP_STR, LANG_CP_DTYPE };

struct lang_cvalue {
  enum lang_cparam_kind kind;
  int64_t i;       /* INT and BOOL */
  const char *s;   /* STR (interned, without quotes) */
  ir_dtype dt;     /* DTYPE */
};

struct lang_cparam_info {
  const char *name;
  enum lang_cparam_kind kind;
  struct lang_cvalue def;
  const struct lang_cvalue *cands; /* the candidate set for the autotuner (may be empty) */
  uint32_t ncands;
};

struct lang_param_info {
  const char *name;
  bool is_tensor;
  bool is_out;
  const char *dtype;   /* text as written: "f16" or a dtype parameter's name */
  uint32_t rank;       /* 0 for scalars */
  const char *dims[IR_MAX_RANK]; /* text as written: a shape name or a number or a const name */
};

/* One entry of a `defaults TARGET(NAME = VALUE, ...)` clause: on that target, the default of
 * compile-time parameter NAME is VALUE (as define text). A target may have several clauses,
 * tried in order (clause 0, 1, ...): the first whose values satisfy the kernel's `where`
 * constraints is used. */
struct lang_target_default {
  const char *target;
  const char *name;
  const char *value;
  uint32_t clause;
};

struct lang_kernel_info {
  const char *name;
  uint32_t line, col;
  const struct lang_cparam_info *cparams;
  uint32_t ncparams;
  const struct lang_target_default *tdefaults;
  uint32_t ntdefaults;
  const struct lang_param_info *params;
  uint32_t nparams;
};

uint32_t lang_kernel_count(const struct ast_file *f);
const struct lang_kernel_info *lang_kernel_info(const struct ast_file *f, uint32_t i);

/* A compile-time parameter override, as text: "128", "true", "bf16", "gelu". */
struct lang_define {
  const char *name;
  const char *value;
};

/* Specializes kernel `kernel` (NULL: the file's only kernel; an error if there are several)
 * with the overrides, runs semantic analysis and lowers it to Tile IR allocated in the
 * context's arena. Returns NULL on error (diagnostics in the context). An unknown override
 * name, a value of the wrong kind or a violated `where` constraint is an error. */
struct ir_func *lang_lower(struct lang_ctx *c, struct ast_file *f, const char *kernel,
                           const struct lang_define *defs, uint32_t ndefs);

#endif
