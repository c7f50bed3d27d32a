/* sema.h - semantic analysis: the facts sema derives and irgen consumes.
 *
 * Design choices:
 *  - Two phases. At parse time sema_check_file evaluates file-level constants and checks
 *    kernel headers (compile-time parameters, parameter types, shape symbols); those facts do
 *    not depend on a specialization and are kept in struct sema_file. At lower time
 *    sema_kernel applies the overrides, evaluates `where` constraints, and checks the kernel
 *    body for that one specialization.
 *  - Per-specialization facts live in a side table indexed by AST node id (struct sema_info),
 *    never in the AST, so a parsed file can be specialized many times.
 *  - Types: a value is a scalar (rank 0) or a tile (rank 1..4, compile-time dims) of a dtype.
 *    Compile-time constants are scalars with a known value; literals and constants derived
 *    from them are "weak": in a mixed expression they adopt the other operand's dtype. An
 *    erroneous expression has type STY_ERROR, and every check is silent about such operands
 *    (poisoning), so one mistake gives one diagnostic.
 *  - Only the taken branch of an `if` with a constant condition is checked (and lowered). */
#ifndef TL_LANG_SEMA_H
#define TL_LANG_SEMA_H

#include "ast.h"

enum sty_kind {
  STY_ERROR,  /* poisoned: diagnostics were already given */
  STY_VAL,    /* a scalar or tile value */
  STY_STR,    /* a string constant (only for comparisons) */
  STY_DTYPE,  /* a dtype used as a value: f16, or a dtype parameter */
  STY_TENSOR, /* a tensor parameter (only subscripted or stored to) */
  STY_LIST,   /* a list literal [a, b] (only as a shape argument) */
  STY_VOID,   /* statements */
};

struct sty {
  uint8_t kind;
  uint8_t dt;   /* ir_dtype of the elements */
  uint8_t rank;
  uint8_t weak; /* a compile-time scalar that adopts the other operand's dtype */
  int32_t dims[IR_MAX_RANK];
};

/* A compile-time value; which field counts depends on the type: int and bool use i,
 * floats use f, strings s and dtypes dt. */
struct cval {
  int64_t i;
  double f;
  const char *s;
  ir_dtype dt;
};

enum sym_kind { SYM_CONST, SYM_CPARAM, SYM_TENSOR, SYM_SCALAR, SYM_SHAPE, SYM_LET, SYM_VAR, SYM_LOOP };

struct sema_sym {
  enum sym_kind kind;
  const char *name;
  struct lang_loc loc;     /* where it is declared */
  struct sty ty;           /* tensors: dt and rank; dims are fixed sizes or -1 (run-time) */
  bool is_const;
  struct cval cv;
  bool is_out;
  uint32_t index;          /* parameters: position in the list; shapes: order of appearance */
  struct sema_sym *dim_shape[IR_MAX_RANK]; /* tensors: the shape symbol of each run-time dim */
  uint32_t depth;          /* block nesting depth of the declaration */
  ir_val val;              /* irgen: the symbol's current IR value */
};

/* A tensor subscript entry: an i32 scalar index, `s : +N`, `:`, or an i32 tile of indices
 * (a gather/scatter subscript, NumPy's advanced indexing). */
enum { SLICE_INDEX, SLICE_RANGE, SLICE_FULL, SLICE_GATHER };
/* The most elements a tile may have (SPEC.md 15); larger ones are errors, not minutes in LLVM. */
enum { LANG_MAX_TILE_ELEMENTS = 1 << 20 };

/* What sema knows about one node under the current specialization. */
struct sema_info {
  struct sty ty;
  struct sty opnd;          /* BINARY: the common operand type (before a comparison) */
  bool is_const;
  struct cval cv;
  struct sema_sym *sym;     /* NAME: the symbol; LET/VAR/FOR: the declared symbol */
  int builtin;              /* CALL: enum builtin_id, -1 for casts, -2 for none */
  struct ast_node **args;   /* CALL: arguments bound to the builtin's parameter slots */
  int64_t attr;             /* CALL: axis, tf32, ...; INDEX of a tile: None positions mask */
  double fill;              /* CALL load / INDEX load: the fill value */
  int8_t taken;             /* IF: 1 then, 0 else, -1 decided at run time */
  bool is_load;             /* INDEX: a load from a tensor */
  bool gather;              /* INDEX on a tensor with a tile entry: per-element indices; opnd
                               is the broadcast shape of the index entries and attr the
                               position of its first dimension in the result */
  uint8_t kinds[IR_MAX_RANK]; /* INDEX on a tensor: SLICE_* per dimension */
  int32_t lens[IR_MAX_RANK];  /* INDEX on a tensor: slice lengths */
  VEC(struct sema_sym *) carried; /* FOR and run-time IF: the vars they update */
};

struct sema_cparam {
  struct ast_node *node;
  const char *name;
  enum lang_cparam_kind kind;
  struct lang_cvalue def;
  VEC(struct lang_cvalue) cands;
  bool ok;
};

struct sema_kernel_decl {
  struct ast_node *node;
  struct ast_kernel *k;
  VEC(struct sema_cparam) cparams;
  VEC(struct lang_target_default) tdefaults;
  struct lang_kernel_info info;
  bool ok;
};

struct sema_file {
  VEC(struct sema_sym *) consts;
  VEC(struct sema_kernel_decl) kernels;
  uint32_t errors; /* declaration errors */
};

/* The state of one specialization + check of one kernel. */
struct sema {
  struct lang_ctx *ctx;
  struct ast_file *file;
  struct sema_kernel_decl *kd;
  struct sema_info *info;   /* [file->nnodes] */
  VEC(struct sema_sym *) scope; /* the visible symbols, innermost last */
  VEC(uint32_t) shadow;         /* [i]: 1 + index of the entry that scope.v[i] hides, or 0 */
  VEC(uint32_t) marks;          /* scope starts */
  struct ptrmap names;          /* interned name -> 1 + index of its innermost entry, or 0 */
  VEC(struct sema_info *) constructs; /* enclosing FOR / run-time IF, for carried vars */
  VEC(uint32_t) construct_depth;
  VEC(struct sema_sym *) cparams;  /* this specialization's values */
  VEC(struct sema_sym *) params;   /* tensor and scalar parameters in order */
  VEC(struct sema_sym *) shapes;   /* shape symbols in order of first appearance */
  struct ast_node *grid[3];
  uint32_t ngrid;
  int warps;
  bool in_grid;        /* checking grid(...): host-side scalars only */
  uint32_t loops;      /* for loops around the statement being checked */
  bool quiet_undeclared; /* the file had syntax errors: names may be missing for that reason */
  struct ast_node *split_call; /* the split() call a `let (a, b) = split(x)` binds (split's only place) */
};

/* Parse-time checks of the file's declarations; fills f->decls. */
void sema_check_file(struct lang_ctx *c, struct ast_file *f);

/* Specializes and checks kernel kd. Returns false on error. */
bool sema_kernel(struct sema *s, struct lang_ctx *c, struct ast_file *f,
                 struct sema_kernel_decl *kd, const struct lang_define *defs, uint32_t ndefs);

/* Internal steps shared by sema.c and sema_decl.c. */
void sema_begin(struct sema *s, struct lang_ctx *c, struct ast_file *f);
/* Applies -D overrides to the compile-time parameters (sema_decl.c). */
bool sema_apply_defines(struct sema *s, const struct lang_define *defs, uint32_t ndefs);
/* Declares the kernel's compile-time parameters, parameters and shape symbols under the
 * current compile-time values (sema_decl.c). */
bool sema_header(struct sema *s);
void sema_scope_push(struct sema *s);
/* Makes sym visible in the innermost scope without the checks of sema_declare. */
void sema_scope_add(struct sema *s, struct sema_sym *sym);
/* Empties every scope. */
void sema_scope_reset(struct sema *s);
void sema_declare(struct sema *s, struct sema_sym *sym);
struct sema_sym *sema_new_sym(struct sema *s, enum sym_kind kind, const char *name,
                              struct lang_loc loc);
struct sema_sym *sema_lookup(struct sema *s, const char *name);
bool sema_check_dot(struct sema *s, struct sema_info *a, struct sema_info *b, struct lang_loc loc,
                    const char *what, struct sty *out);

/* Lowers a checked kernel (irgen.c). Returns NULL after an internal error. */
struct ir_func *irgen_kernel(struct sema *s);

static inline struct sema_info *sema_info(struct sema *s, const struct ast_node *n) {
  return &s->info[n->id];
}

/* ---- shared helpers (sema.c) ---- */

bool sty_is_float(const struct sty *t);
bool sty_same(const struct sty *a, const struct sty *b);
const char *sty_str(struct sema *s, const struct sty *t);
/* The dtype a weak value of dtype `weak` takes next to a strong dtype `other`. */
ir_dtype sema_adopt(ir_dtype weak, ir_dtype other);
/* Converts a constant of dtype `from` to dtype `to`. */
struct cval sema_convert_const(struct cval v, ir_dtype from, ir_dtype to);
/* Whether a weak constant may become dtype `to` (a u32 constant above 2^31-1 is no i32). */
bool sema_weak_fits(const struct sema_info *i, ir_dtype to);
/* An i32 scalar or tile, or a weak int constant that fits i32 (indices, range bounds, grid). */
bool sema_is_i32(const struct sema_info *i);

/* ---- builtins (sema_call.c) ---- */

#define BUILTINS(X)                                                        \
  X(PROGRAM_ID, "program_id", "axis")                                      \
  X(NUM_PROGRAMS, "num_programs", "axis")                                  \
  X(CDIV, "cdiv", "a, b")                                                  \
  X(MIN, "min", "x, y?, axis?")                                            \
  X(MAX, "max", "x, y?, axis?")                                            \
  X(SUM, "sum", "x, axis?")                                                \
  X(ARGMAX, "argmax", "x, axis?")                                          \
  X(ARGMIN, "argmin", "x, axis?")                                          \
  X(CUMSUM, "cumsum", "x, axis?, reverse?")                                \
  X(CUMPROD, "cumprod", "x, axis?, reverse?")                              \
  X(CUMMAX, "cummax", "x, axis?, reverse?")                                \
  X(CUMMIN, "cummin", "x, axis?, reverse?")                                \
  X(ABS, "abs", "x")                                                       \
  X(EXP, "exp", "x")                                                       \
  X(EXP2, "exp2", "x")                                                     \
  X(LOG, "log", "x")                                                       \
  X(LOG2, "log2", "x")                                                     \
  X(SQRT, "sqrt", "x")                                                     \
  X(RSQRT, "rsqrt", "x")                                                   \
  X(TANH, "tanh", "x")                                                     \
  X(ERF, "erf", "x")                                                       \
  X(SIGMOID, "sigmoid", "x")                                               \
  X(RELU, "relu", "x")                                                     \
  X(GELU, "gelu", "x")                                                     \
  X(SILU, "silu", "x")                                                     \
  X(WHERE, "where", "cond, x, y")                                          \
  X(ZEROS, "zeros", "shape, dtype?")                                       \
  X(FULL, "full", "shape, value, dtype?")                                  \
  X(ARANGE, "arange", "n")                                                 \
  X(TRANS, "trans", "x")                                                   \
  X(RESHAPE, "reshape", "x, shape")                                        \
  X(PERMUTE, "permute", "x, dims")                                         \
  X(JOIN, "join", "a, b")                                                  \
  X(SPLIT, "split", "x")                                                   \
  X(BROADCAST, "broadcast", "x, shape")                                    \
  X(LOAD, "load", "slice, fill?, mask?")                                   \
  X(STORE, "store", "slice, value, mask?")                                 \
  X(ATOMIC_ADD, "atomic_add", "slice, value, mask?")                       \
  X(ATOMIC_MAX, "atomic_max", "slice, value, mask?")                       \
  X(ATOMIC_MIN, "atomic_min", "slice, value, mask?")                       \
  X(DOT, "dot", "a, b, tf32?")                                             \
  X(RAND, "rand", "seed, offset")                                          \
  X(RANDN, "randn", "seed, offset")                                        \
  X(RANDINT, "randint", "seed, offset")

enum builtin_id {
#define X(id, name, sig) BI_##id,
  BUILTINS(X)
#undef X
  BI__COUNT
};

enum { BI_CAST = -1, BI_NONE = -2 };
enum { SEMA_SCAN_REVERSE = 1 << 8 }; /* sema_info.attr of a scan: the axis, | this for reverse */
enum { MAX_BUILTIN_ARGS = 4 };

extern const char *const builtin_names[BI__COUNT];
extern const char *const builtin_sigs[BI__COUNT];

/* Checks a CALL node. Returns its info. */
struct sema_info *sema_call(struct sema *s, struct ast_node *n);
/* Checks an expression (sema.c). */
struct sema_info *sema_expr(struct sema *s, struct ast_node *n);
/* Shape broadcasting; reports at loc and returns false when the shapes do not broadcast. */
bool sema_broadcast(struct sema *s, const struct sty *a, const struct sty *b, struct sty *out,
                    struct lang_loc loc, const char *what);
bool sema_check_tile_shape(struct sema *s, const struct sty *t, struct lang_loc loc);
/* "[64, 32]": the dims of a tile type, for messages. */
const char *sema_shape_str(struct sema *s, const struct sty *t);
/* The operand type of two values under promotion and broadcasting (what: for messages). */
bool sema_join(struct sema *s, struct sema_info *a, struct sema_info *b, struct sty *out,
               struct lang_loc loc, const char *what);
bool sema_need_const_int(struct sema *s, struct ast_node *n, const char *what, int64_t *out);
bool sema_supported(struct sema *s, const struct sty *t, struct lang_loc loc, const char *what);
bool sema_check_mask(struct sema *s, struct ast_node *m, const struct sty *to, const char *fname);
struct sema_info *sema_check_write_call(struct sema *s, struct ast_node *n, struct sema_info *i, int b,
                                        struct ast_node **args);

#endif
