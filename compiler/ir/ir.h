/* ir.h - Tile IR: the compiler's one intermediate representation.
 *
 * A kernel is an ir_func: SSA values of tile type (a compile-time shape and an element type;
 * rank 0 is a scalar), structured control flow (for with loop-carried values, if with
 * results), and two top-level blocks: the grid block, which computes the launch grid from
 * the scalar parameters on the host, and the body, which one program instance runs.
 *
 * Representation (after QBE): every entity lives in a per-function table and is named by a
 * small integer index, never a pointer, so a function is cheap to clone for autotuning
 * variants and prints deterministically. Values, ops and blocks are numbered from 1; index 0
 * means "none". An op's results are consecutive values; a block's arguments too.
 *
 * Layouts (how a tile is spread over the threads of a program instance) are part of a tile's
 * type, as in Triton's encodings; the interpreter ignores them, the GPU passes assign them.
 *
 * IR.md next to this file is the reference for the text form and each op's semantics.    */
#ifndef TL_IR_H
#define TL_IR_H

#include "target.h"
#include "util.h"

enum { IR_MAX_RANK = 4 };

typedef enum ir_dtype {
#define DT(id, name, bits, cls) DT_##id,
#include "dtype.def"
#undef DT
  DT__COUNT
} ir_dtype;

enum ir_dtype_class { DTC_NONE, DTC_BOOL, DTC_INT, DTC_FLOAT };

const char *ir_dtype_name(ir_dtype t);
int ir_dtype_bits(ir_dtype t);
int ir_dtype_bytes(ir_dtype t);
enum ir_dtype_class ir_dtype_class(ir_dtype t);
static inline bool ir_dtype_is_float(ir_dtype t) { return ir_dtype_class(t) == DTC_FLOAT; }
static inline bool ir_dtype_is_int(ir_dtype t) { return ir_dtype_class(t) == DTC_INT; }
/* The unsigned ints (u32): values are zero-extended in the interpreter's 64-bit scalars. */
static inline bool ir_dtype_is_unsigned(ir_dtype t) { return t == DT_U32; }
ir_dtype ir_dtype_from_name(const char *s, size_t n); /* DT_NONE if unknown */

typedef enum ir_opcode {
  IR_NONE,
#define OP(id, name, na, nr, ng, fl, i0, i1, i2, f, doc) IR_##id,
#include "ops.def"
#undef OP
  IR__COUNT
} ir_opcode;

enum {
  OPF_PURE = 1 << 0,
  OPF_ELEM = 1 << 1,
  OPF_COMM = 1 << 2,
  OPF_READ = 1 << 3,
  OPF_WRITE = 1 << 4,
  OPF_TERM = 1 << 5,
  OPF_GPU = 1 << 6,
};

struct ir_opinfo {
  const char *name;
  int nargs, nres, nregions;
  unsigned flags;
  const char *iattr[3];
  const char *fattr;
  const char *doc;
};
extern const struct ir_opinfo ir_ops[IR__COUNT];
ir_opcode ir_opcode_from_name(const char *s, size_t n); /* IR_NONE if unknown */

/* ---- types -------------------------------------------------------------------------------
 * Types are interned per function: equal types have equal ids, so comparison is ==.      */

typedef uint32_t ir_type_id;

enum ir_type_kind {
  IR_TY_VOID,
  IR_TY_TILE,   /* rank 0 = scalar */
  IR_TY_TENSOR, /* a kernel's tensor parameter: element type, rank, dims (see below) */
};

/* Tensor dimensions are either constants (>= 0) or shape symbols: IR_DIM_SYM(v) encodes the
 * shape value v (a kernel parameter holding the run-time size). */
#define IR_DIM_SYM(v) (-(int32_t)(v)-1)
#define IR_DIM_IS_SYM(d) ((d) < 0)
#define IR_DIM_SYM_VALUE(d) ((uint32_t)(-(d)-1))

struct ir_type {
  uint8_t kind;
  uint8_t dtype;
  uint8_t rank;
  uint8_t pad;
  uint16_t layout; /* index into ir_func.layouts; 0 = none assigned */
  uint16_t pad2;
  int32_t dims[IR_MAX_RANK];
};

/* ---- values, ops, blocks ------------------------------------------------------------------ */

typedef uint32_t ir_val;

enum ir_value_kind {
  IR_VAL_RESULT, /* result `index` of op `def` */
  IR_VAL_BLOCKARG, /* argument `index` of block `def` */
  IR_VAL_PARAM,  /* kernel parameter `index` (see ir_param) */
};

struct ir_value {
  ir_type_id type;
  uint32_t def;
  uint16_t index;
  uint8_t kind;
  uint8_t pad;
  const char *name; /* interned; printed as %name when set (parameters, shape symbols) */
};

/* Where an op (or a kernel) was written in ir_func.file: the statement of the .tile source
 * for IR from the front end, the op's line in the text for IR parsed from text. 0: unknown
 * (an op made by a pass carries the location of the op it was made from, when it has one). */
struct ir_loc {
  uint32_t line, col;
};

struct ir_op {
  uint16_t code;
  uint16_t nres;
  uint32_t nargs;
  ir_val *args;
  ir_val res;        /* first result value; results are res .. res+nres-1 */
  uint32_t block;    /* the block holding this op (0 once removed) */
  uint32_t region;   /* first of the op's regions (blocks region .. region+nregions-1) */
  uint16_t nregions;
  uint16_t pad;
  struct ir_loc loc;
  int64_t i[3];      /* integer attributes, named by ops.def */
  double f;          /* float attribute, named by ops.def; CONST keeps float values here */
};

struct ir_block {
  VEC(uint32_t) ops; /* op ids in program order */
  ir_val args;       /* first argument value; arguments are args .. args+nargs-1 */
  uint32_t nargs;
  uint32_t parent;   /* the op owning this block; 0 for the top-level blocks */
};

/* ---- layouts (assigned by the GPU passes) -------------------------------------------------
 * A layout says which thread of a program instance holds which element of a tile. Types
 * carry *encodings* that do not depend on the shape, as Triton's do, so elementwise ops,
 * broadcasts and expand_dims keep their operand's encoding; codegen derives from (encoding,
 * shape, warps) a linear layout over GF(2) (layout.h) that maps the bits of a register,
 * lane and warp index to tile coordinates.
 *
 *   BLOCKED  each thread holds size_per_thread contiguous elements per dimension; lanes and
 *            warps tile the rest in `order` (fastest dimension first); shapes larger than
 *            the CTA tile wrap into more registers, smaller ones replicate.
 *   SLICE    the result of reducing dimension `dim` of a value with layout `parent`.
 *   MMA      the mma.sync m16n8 accumulator, warps tiled warps_per_cta[0] x [1].
 *   DOT_OP   operand `op_idx` (0 = A, 1 = B) of a dot whose result has layout `parent`
 *            (MMA: the register fragments of mma.sync; BLOCKED: the FMA operand layout,
 *            each thread holding its rows of A / columns of B for every k).
 *   SHARED   shared memory: `vec` elements per swizzle unit, rows of `per_phase`, `max_phase`
 *            XOR phases, `order` fastest dimension first; with `panel`, the contiguous
 *            dimension is cut into panels of that many elements stored one after another
 *            (the layout wgmma expects for rows wider than 128 bytes).                      */

enum ir_layout_kind {
  IR_LAYOUT_NONE,
  IR_LAYOUT_BLOCKED,
  IR_LAYOUT_SLICE,
  IR_LAYOUT_MMA,
  IR_LAYOUT_DOT_OP,
  IR_LAYOUT_SHARED,
};

struct ir_layout {
  uint8_t kind;
  uint8_t rank;
  int8_t dim;      /* SLICE */
  int8_t op_idx;   /* DOT_OP */
  uint16_t parent; /* SLICE, DOT_OP */
  uint8_t k_width; /* DOT_OP: elements per thread along k that stay together */
  uint8_t pad;
  uint8_t size_per_thread[IR_MAX_RANK];
  uint8_t threads_per_warp[IR_MAX_RANK];
  uint8_t warps_per_cta[IR_MAX_RANK];
  uint8_t order[IR_MAX_RANK];
  uint8_t instr[3];                 /* MMA: m, n, k of the instruction (m = 64: wgmma) */
  uint8_t vec, per_phase, max_phase; /* SHARED */
  uint16_t panel;                   /* SHARED: elements per panel along the contiguous dim (0: one panel) */
};

/* ---- kernel parameters ------------------------------------------------------------------ */

enum ir_param_kind { IR_PARAM_TENSOR, IR_PARAM_SCALAR, IR_PARAM_SHAPE };

/* Facts about a tensor argument known at specialization time (part of the cache key). */
struct ir_tensor_facts {
  uint8_t align;                /* base address alignment in bytes (1..16) */
  uint8_t stride1[IR_MAX_RANK]; /* 1: stride is known to be 1 (contiguous dimension) */
  uint8_t div16[IR_MAX_RANK];   /* 1: stride * elem bytes is a multiple of 16 */
  uint8_t span31;               /* 1: every element lies fewer than 2^31 elements past the base
                                 * (non-negative strides): a flat element index fits in i32 */
};

struct ir_param {
  const char *name;
  uint8_t kind;
  uint8_t is_out;   /* tensors: written by the kernel */
  uint8_t used;     /* set by passes: still referenced after specialization */
  uint8_t div16;    /* shapes: the size is known to be a multiple of 16 */
  uint8_t pow2;     /* shapes: the size is known to be a power of two (a specialization fact) */
  uint8_t divisor;  /* shapes, set by DCE: an integer division or remainder divides by it */
  ir_val value;
  struct ir_tensor_facts facts;
  uint32_t source_index; /* position among the user-visible parameters (shapes: UINT32_MAX) */
};

struct ir_func {
  struct arena *arena;
  struct strtab *strs;
  const char *name;
  const char *file;              /* interned: the file that loc and the ops' locs refer to, or NULL */
  struct ir_loc loc;             /* the kernel's header */
  int warps;                     /* warps of the tile layouts (with roles: of the consumers) */
  int threads;                   /* threads per program instance; 0 = 32 * warps (see below) */
  const struct tl_target *target; /* the GPU target once lowered for one (NULL: generic IR) */
  struct tl_schedule sched;      /* schedule options of the Hopper tier (target.h) */
  uint8_t stage;                 /* enum ir_stage: which ops may appear */
  uint8_t persistent;            /* the body walks tiles in a loop; the runtime sizes the grid
                                  * (2: a walk only for grids of a few waves; cg.h) */
  uint8_t grid_dep;              /* programmatic dependent launch (grid-dep pass): the program
                                  * waits at entry for the previous kernel in the stream to
                                  * complete and lets the next one launch early */
  uint8_t cluster;               /* > 1: each program runs as this many CTAs of one cluster
                                  * (cluster-rows pass; the runtime launches grid x times it) */
  uint16_t cache_trips;          /* a specialization fact: the trip count of the loops whose
                                  * re-read slices row-cache keeps in shared memory (0: none) */
  bool long_tiles;               /* a specialization fact: the heaviest of the first and last
                                  * tiles runs more than CG_WALK_MAX_TRIPS iterations of its
                                  * innermost loops (the persistent pass: no walk) */
  VEC(struct ir_type) types;     /* [0] unused */
  VEC(struct ir_value) values;   /* [0] unused */
  VEC(struct ir_op) ops;         /* [0] unused */
  VEC(struct ir_block) blocks;   /* [0] unused; [1] grid block; [2] body */
  VEC(struct ir_layout) layouts; /* [0] unused */
  VEC(struct ir_param) params;
};

enum { IR_GRID_BLOCK = 1, IR_BODY_BLOCK = 2 };

/* Stages of a function. Generic IR is what the front end produces and the interpreter runs;
 * GPU IR has layouts on every tile and may hold the ops flagged OPF_GPU (ops.def); after
 * the smem-alloc pass every shared-memory allocation carries its byte offset. The verifier
 * checks each stage's rules, and the pipeline advances the stage. With warp specialization
 * (a warp_specialize op) `threads` counts the producer warps too: 32 * warps + 32 *
 * producer_warps; the layouts describe the consumers' warps.                            */
enum ir_stage { IR_STAGE_GENERIC, IR_STAGE_GPU, IR_STAGE_ALLOCATED };
static inline int ir_func_threads(const struct ir_func *f) { return f->threads ? f->threads : 32 * f->warps; }
/* Whether dots may use wgmma: the target has it and the schedule does not forbid it. */
static inline bool ir_func_wgmma(const struct ir_func *f) {
  return tl_has(f->target, TL_FEAT_WGMMA) && f->sched.wgmma != 0;
}

/* ---- construction ---- */

struct ir_func *ir_func_new(struct arena *a, struct strtab *strs, const char *name);
struct ir_func *ir_func_clone(const struct ir_func *f, struct arena *a);

ir_type_id ir_type_intern(struct ir_func *f, const struct ir_type *t);
ir_type_id ir_type_scalar(struct ir_func *f, ir_dtype dt);
ir_type_id ir_type_tile(struct ir_func *f, ir_dtype dt, int rank, const int32_t *dims);
ir_type_id ir_type_tensor(struct ir_func *f, ir_dtype dt, int rank, const int32_t *dims);
ir_type_id ir_type_with_dtype(struct ir_func *f, ir_type_id t, ir_dtype dt);
ir_type_id ir_type_void(struct ir_func *f);
uint16_t ir_layout_intern(struct ir_func *f, const struct ir_layout *l);

static inline const struct ir_type *ir_type(const struct ir_func *f, ir_type_id t) {
  return &f->types.v[t];
}
static inline const struct ir_type *ir_vtype(const struct ir_func *f, ir_val v) {
  return &f->types.v[f->values.v[v].type];
}
static inline struct ir_op *ir_op(const struct ir_func *f, uint32_t op) { return &f->ops.v[op]; }
static inline struct ir_block *ir_block(const struct ir_func *f, uint32_t b) {
  return &f->blocks.v[b];
}
int64_t ir_type_numel(const struct ir_type *t);
bool ir_type_is_scalar(const struct ir_type *t);

/* Parameters: tensors and scalars in user order, then shape symbols (created on first use). */
ir_val ir_add_param(struct ir_func *f, const char *name, enum ir_param_kind kind, ir_type_id type,
                    bool is_out);
struct ir_param *ir_param_of(const struct ir_func *f, ir_val v); /* NULL if not a parameter */
/* An integer divisor v with the splats and integer casts that produced it stripped (the
 * shape size behind `pos / PAGE`). */
ir_val ir_divisor_source(const struct ir_func *f, ir_val v);

/* A builder inserts ops into a block, before op `before` (0 = at the end). */
struct ir_builder {
  struct ir_func *f;
  uint32_t block;
  uint32_t before;
  struct ir_loc loc;
};

void ir_builder_at_end(struct ir_builder *b, struct ir_func *f, uint32_t block);
void ir_builder_before(struct ir_builder *b, struct ir_func *f, uint32_t op);
void ir_builder_after(struct ir_builder *b, struct ir_func *f, uint32_t op); /* (and op's location) */

/* Creates an op with `nres` results of the given types and `nregions` empty blocks, inserts
 * it at the builder's position and returns its id. */
uint32_t ir_build(struct ir_builder *b, ir_opcode code, const ir_val *args, uint32_t nargs,
                  const ir_type_id *res_types, uint32_t nres);
/* Convenience forms for single-result ops. */
ir_val ir_build1(struct ir_builder *b, ir_opcode code, ir_type_id type, const ir_val *args,
                 uint32_t nargs);
ir_val ir_const_int(struct ir_builder *b, ir_type_id type, int64_t v);
ir_val ir_const_float(struct ir_builder *b, ir_type_id type, double v);
ir_val ir_binary(struct ir_builder *b, ir_opcode code, ir_val x, ir_val y); /* type of x (cmp: bool) */
ir_val ir_unary(struct ir_builder *b, ir_opcode code, ir_val x);

/* Adds an argument to block `blk` and returns it. */
ir_val ir_block_add_arg(struct ir_func *f, uint32_t blk, ir_type_id type);

/* for: args = lb, ub, step, inits...; results = carried values; body block args = iv, carried. */
uint32_t ir_build_for(struct ir_builder *b, ir_val lb, ir_val ub, ir_val step, const ir_val *inits,
                      uint32_t ninits);
/* Replaces loop `loop` by one with `n` more carried values (initialized by inits) in the
 * same place: the body moves over, uses of the old block arguments and results are
 * redirected. The body's yield is unchanged: the caller appends the new yielded values.
 * Returns the new loop; its extra block arguments follow the old ones. */
uint32_t ir_for_add_carried(struct ir_func *f, uint32_t loop, const ir_val *inits, uint32_t n);
/* Moves block `from`'s ops (in order) to the empty block `to`; `from` is left empty. */
void ir_move_ops(struct ir_func *f, uint32_t from, uint32_t to);
/* if: results of the given types; regions: then, else (both possibly empty of ops). */
uint32_t ir_build_if(struct ir_builder *b, ir_val cond, const ir_type_id *types, uint32_t ntypes);

/* The elementwise op that combines two values of a cluster_reduce of this kind. */
static inline ir_opcode ir_cluster_combine(int64_t kind) { return kind == 0 ? IR_ADD : kind == 1 ? IR_MAX : IR_MIN; }

static inline ir_val ir_res(const struct ir_func *f, uint32_t op, uint32_t i) {
  return f->ops.v[op].res + i;
}
static inline uint32_t ir_region(const struct ir_func *f, uint32_t op, uint32_t i) {
  return f->ops.v[op].region + i;
}
/* The op defining v, or 0 for block arguments and parameters. */
uint32_t ir_def_op(const struct ir_func *f, ir_val v);
/* v with the casts, transposes and layout conversions that produced it stripped: the value
 * they start from (a dot operand back to the load that reads it). */
ir_val ir_view_source(const struct ir_func *f, ir_val v);
/* Whether the facts of tensor parameter p (of type tt) allow accesses of `bytes` bytes
 * along its dimension d: d contiguous, the base aligned to `bytes`, every other stride a
 * multiple of 16 bytes (or its dimension 1). The rest (the slice start and the size along
 * d) is the access's to check. */
bool ir_facts_allow_vector(const struct ir_param *p, const struct ir_type *tt, int d, int bytes);
/* Is v defined in block blk or in a block nested in it (an op result or a block argument)? */
bool ir_defined_within(const struct ir_func *f, ir_val v, uint32_t blk);
/* Whether op `id` (or an op of a block nested in it) writes tensor t; the same for the ops
 * of block blk. */
bool ir_op_writes_tensor(const struct ir_func *f, uint32_t id, ir_val t);
bool ir_block_writes_tensor(const struct ir_func *f, uint32_t blk, ir_val t);
/* Whether block blk (or a block nested in it) holds an op whose code is one of codes[0..n). */
bool ir_block_has_op(const struct ir_func *f, uint32_t blk, const uint16_t *codes, uint32_t n);
/* Whether op `id` (or an op nested in it) has v as an operand. */
bool ir_op_uses(const struct ir_func *f, uint32_t id, ir_val v);
/* The position of op `id` in its block (the block's op count when it is not there), and the
 * op after it (0 at the block's end). */
uint32_t ir_op_index(const struct ir_func *f, uint32_t id);
uint32_t ir_op_next(const struct ir_func *f, uint32_t id);
/* Appends to out[*n..cap) the ops of code `code` in block blk and the blocks nested in it,
 * outer before inner, in order. */
void ir_block_collect(const struct ir_func *f, uint32_t blk, uint16_t code, uint32_t *out, uint32_t *n, uint32_t cap);
/* Whether op `id` is a load or gather of a tensor that nothing in block blk writes: it may be
 * moved or repeated within blk (every load is bounds-checked). */
bool ir_reads_unwritten(const struct ir_func *f, uint32_t id, uint32_t blk);
/* Whether op sits in a loop body (at any depth). */
bool ir_op_in_loop(const struct ir_func *f, uint32_t op);
/* Whether op has an operand or a result that is a tile of rank >= 1. */
bool ir_op_has_tile(const struct ir_func *f, const struct ir_op *op);
/* Integer value of a CONST op's result (scalar or splat). */
bool ir_value_const_int(const struct ir_func *f, ir_val v, int64_t *out);
bool ir_value_const_float(const struct ir_func *f, ir_val v, double *out);
/* permute's `perm` attribute: the permutation's decimal digits, result dimension 0 first
 * ([2, 0, 1] is 201, [0, 2, 1] is 21). Decoding fails unless the value is a permutation
 * of 0 .. rank-1. */
int64_t ir_perm_encode(const int *perm, int rank);
bool ir_perm_decode(int64_t code, int rank, int *perm);

/* ---- mutation ---- */

void ir_replace_uses(struct ir_func *f, ir_val from, ir_val to);
/* The same, except in the op defining `to`, which computes it from `from` (x -> f(x)). */
void ir_wrap_uses(struct ir_func *f, ir_val from, ir_val to);
void ir_op_remove(struct ir_func *f, uint32_t op); /* unlinks it from its block (not its regions' ops) */
/* Unlinks op and marks every op nested in its regions removed too (block = 0), so that
 * scans over f->ops skip them. */
void ir_op_erase(struct ir_func *f, uint32_t op);
/* Moves op (with its regions) to the builder's position. */
void ir_op_move(struct ir_builder *b, uint32_t op);

/* A value map for cloning: to[v] replaces v (0: v itself). Sized for the values that exist
 * when it is made; values created later map to themselves. */
struct ir_valmap {
  ir_val *to;
  uint32_t n;
};
void ir_valmap_init(struct ir_valmap *m, const struct ir_func *f, struct arena *a);
static inline ir_val ir_mapped(const struct ir_valmap *m, ir_val v) { return v < m->n && m->to[v] ? m->to[v] : v; }
static inline void ir_map_set(struct ir_valmap *m, ir_val from, ir_val to) {
  if (from < m->n) m->to[from] = to;
}
/* Clones op (operands through m, regions recursively) at the builder; maps its results
 * (and its regions' block arguments) in m. Returns the new op. */
uint32_t ir_clone_op(struct ir_builder *b, uint32_t op, struct ir_valmap *m);
void ir_op_set_args(struct ir_func *f, uint32_t op, const ir_val *args, uint32_t nargs);
void ir_op_set_arg(struct ir_func *f, uint32_t op, uint32_t k, ir_val v); /* operand k := v */
/* Turns op, an op with one result and no regions, into `code` with these operands and no
 * attributes, in place: its result value (so every use), its position and its location
 * stay. A rewrite that would build the new op in front of the old one, redirect the uses
 * and unlink the old op costs O(1) this way instead of scans of the block and function. */
void ir_op_rewrite(struct ir_func *f, uint32_t op, ir_opcode code, const ir_val *args, uint32_t nargs);
/* Use counts of every value, recomputed on demand (an analysis, not cached state). */
uint32_t *ir_use_counts(const struct ir_func *f, struct arena *scratch);

/* ---- walking ---- */

typedef void (*ir_walk_fn)(struct ir_func *f, uint32_t op, void *ud);
/* Visits every op of block `blk` and, recursively, of its ops' regions, in program order
 * (an op before the ops of its regions). Safe against removal of the visited op. */
void ir_walk(struct ir_func *f, uint32_t blk, ir_walk_fn fn, void *ud);

/* ---- text form ---------------------------------------------------------------------------- */

struct ir_module {
  VEC(struct ir_func *) funcs;
};

/* flags: none are defined yet (pass 0) */
void ir_print_func(struct strbuf *sb, const struct ir_func *f, unsigned flags);
void ir_print_layout(struct strbuf *sb, const struct ir_func *f, uint32_t layout);
void ir_print_module(struct strbuf *sb, const struct ir_module *m, unsigned flags);

/* Parses the text form. On error returns false and writes "file:line:col: error: ..."
 * into err. Each function's file is `filename` and each op's loc its position in the text,
 * so that the verifier can point at it. */
bool ir_parse(const char *filename, const char *text, size_t len, struct arena *a,
              struct strtab *strs, struct ir_module *out, struct strbuf *err);

/* ---- verification ---------------------------------------------------------------------- */

/* Checks structural and typing invariants; on failure appends messages naming the op (and
 * `after`, the pass that ran last, when given) to err and returns false. A message about an
 * op with a location starts "file:line:col: error: " (the file and the op's position). */
bool ir_verify(const struct ir_func *f, const char *after, struct strbuf *err);

#endif
