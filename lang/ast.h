/* ast.h - the abstract syntax tree of a .tile file.
 *
 * Design choices:
 *  - One node struct for every kind (a "fat node", as in chibicc): a kind, a location, a
 *    dense id and a few generic fields whose meaning per kind is listed in ast.def. Generic
 *    children keep the printer, the depth guard and the sema side tables uniform.
 *  - The AST is immutable after parsing. Sema keeps its per-specialization facts (types,
 *    constant values, resolved names) in side tables indexed by node id, so one parsed file
 *    can be specialized and lowered many times (the autotuner does exactly that).
 *  - Nodes record their nesting depth. A node deeper than AST_MAX_DEPTH is replaced by an
 *    ERROR node after one diagnostic, so every recursive walker is safe on any input.
 *  - Kernel headers are not expressions: struct ast_kernel holds them, hung off a KERNEL node. */
#ifndef TL_LANG_AST_H
#define TL_LANG_AST_H

#include "internal.h"

enum ast_kind {
#define AST(id, name, doc) AST_##id,
#include "ast.def"
#undef AST
  AST__COUNT
};

enum ast_op {
#define OPER(id, text, cls) OP_##id,
#include "ast.def"
#undef OPER
  OP__COUNT
};

enum ast_op_class { OPC_ASSIGNOP, OPC_LOGIC, OPC_BIT, OPC_CMP, OPC_SHIFT, OPC_ARITH, OPC_MATMUL, OPC_UNARY };

extern const char *const ast_kind_names[AST__COUNT];
extern const char *const ast_op_texts[OP__COUNT];
extern const enum ast_op_class ast_op_classes[OP__COUNT];

/* The IR opcode of a binary AST operator (IR_NONE for @ and assignments): what irgen
 * emits and what sema's constant folding evaluates (ir_eval_elem). */
ir_opcode lang_binary_opcode(enum ast_op op);

enum { AST_MAX_DEPTH = 256 };

typedef VEC(struct ast_node *) ast_list;

struct ast_kernel;

struct ast_node {
  enum ast_kind kind;
  enum ast_op op;
  struct lang_loc loc;
  struct lang_loc loc2; /* the operator of a BINARY or ASSIGN; the name of a declaration */
  uint32_t id;     /* dense per file, for sema's side tables */
  uint16_t depth;  /* 1 + the depth of the deepest child */
  uint8_t flag;
  ir_dtype dt;
  const char *name; /* interned */
  int64_t ival;
  double fval;
  const char *sval;
  struct ast_node *a, *b, *c;
  ast_list list;
  struct ast_kernel *k;
};

struct ast_kernel {
  const char *name;
  struct lang_loc name_loc;
  ast_list cparams; /* CPARAM nodes */
  ast_list params;  /* PARAM nodes */
  ast_list grid;    /* expressions, 1..3 */
  struct ast_node *warps; /* or NULL */
  ast_list where;   /* expressions */
  ast_list tdefaults; /* TARGET_DEFAULTS nodes */
  struct ast_node *body; /* BLOCK */
  struct lang_loc grid_loc;
};

struct sema_file; /* the declaration facts sema derives at parse time (sema.h) */

struct ast_file {
  const char *name;
  uint32_t file;    /* source index in the context */
  ast_list items;   /* CONST_DECL and KERNEL nodes in source order */
  uint32_t nnodes;
  uint32_t syntax_errors; /* errors reported while scanning and parsing this file */
  struct sema_file *decls;
};

/* The parser's builder state: the context, the file being built and the node counter. */
struct ast_builder {
  struct lang_ctx *ctx;
  struct ast_file *file;
  bool depth_reported;
};

struct ast_node *ast_new(struct ast_builder *b, enum ast_kind kind, struct lang_loc loc);
struct ast_node *ast_leaf_int(struct ast_builder *b, int64_t v, struct lang_loc loc);
struct ast_node *ast_leaf_name(struct ast_builder *b, const char *name, struct lang_loc loc);
struct ast_node *ast_node1(struct ast_builder *b, enum ast_kind kind, struct ast_node *a,
                           struct lang_loc loc);
struct ast_node *ast_node2(struct ast_builder *b, enum ast_kind kind, enum ast_op op,
                           struct ast_node *a, struct ast_node *x, struct lang_loc loc);
struct ast_node *ast_node3(struct ast_builder *b, enum ast_kind kind, struct ast_node *a,
                           struct ast_node *x, struct ast_node *y, struct lang_loc loc);
/* Appends to n->list (and updates n's depth); returns n. */
struct ast_node *ast_append(struct ast_builder *b, struct ast_node *n, struct ast_node *child);
/* Finishes a node built piecewise: checks its depth. Returns n or an ERROR node. */
struct ast_node *ast_done(struct ast_builder *b, struct ast_node *n);
struct ast_kernel *ast_kernel_new(struct ast_builder *b);

#endif
