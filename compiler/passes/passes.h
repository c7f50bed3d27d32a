/* passes.h - the pass interface and the pipeline.
 *
 * Every pass has the signature `void pass_x(struct pass_ctx *)`, lives in its own file and
 * reports whether it changed the function through pc->changed. The pipeline (pipeline.c)
 * is one function holding the ordered list; it verifies the IR after each pass when asked,
 * calls the dump hook after the pass named by --dump-after, and times each pass.        */
#ifndef TL_PASSES_H
#define TL_PASSES_H

#include "clock.h"
#include "ir.h"

enum pass_id {
  PASS_NONE,
#define PASS(id, name, fn, doc) PASS_##id,
#include "passes.def"
#undef PASS
  PASS__COUNT
};

struct pass_ctx {
  struct ir_func *f;
  struct arena *scratch; /* reset after every pass */
  bool changed;
};

#define PASS(id, name, fn, doc) void fn(struct pass_ctx *pc);
#include "passes.def"
#undef PASS

/* row_align.c, also used by row_reverse.c: the last dimension of op's tensor when op is a
 * 1-d load or store along it at index iv, S elements long, its other indices defined
 * outside block body and the dimension's size ub (-1 otherwise); whether two accesses have
 * the same tensor and row indices. */
int row_access(const struct ir_func *f, const struct ir_op *op, ir_val iv, ir_val ub, int64_t S, uint32_t body);
bool same_row(const struct ir_func *f, const struct ir_op *x, const struct ir_op *y);
/* Whether an op of this code is row work the row passes move freely: elementwise, a
 * constant, a splat, an arange or a full reduction. */
bool row_body_op(uint16_t code);
/* Whether iv is one of access op's indices (its operands after the tensor). */
bool indexed_by(const struct ir_op *op, ir_val iv);

/* cluster_rows.c, also used by row_align.c: the CTAs per program that cluster-rows gives a
 * kernel whose row tiles are bn long (1: it keeps them in one CTA). */
int cluster_rows_size(const struct ir_func *f, int64_t bn);

const char *pass_name(enum pass_id p);
const char *pass_doc(enum pass_id p);
enum pass_id pass_from_name(const char *name); /* PASS_NONE if unknown */
/* "canonicalize, fold, ...": every pass name in table order, cut short to fit cap bytes. */
void pass_names_text(char *buf, size_t cap);

typedef void (*pass_dump_fn)(void *ud, const char *pass, const char *ir_text);

struct pass_options {
  bool verify_each;          /* run the verifier after every pass */
  const char *dump_after;    /* pass name, or "all"; NULL for none */
  pass_dump_fn dump;
  void *dump_ud;
  bool time;                 /* record per-pass times in times_ms */
  double times_ms[PASS__COUNT];
  uint32_t runs[PASS__COUNT];
  /* called before (begin) and after each pass, with the begin call's return value at the
   * end (a profiler range: the runtime's trace); NULL for none */
  double (*event)(void *ud, const char *pass, bool begin, double t0_ms);
  void *event_ud;
  /* stages outside the pass list, filled by their owners when `time` is set */
  double parse_ms, lower_ms, codegen_ms, emit_ms;
};

/* Runs one pass (with verification, dumping and timing per the options). Returns false if
 * verification failed; the message is in err. */
bool pass_run(enum pass_id p, struct ir_func *f, struct pass_options *o, struct strbuf *err);

/* The machine-independent pipeline: what the interpreter executes and what every target's
 * lowering starts from. */
bool pass_pipeline_generic(struct ir_func *f, struct pass_options *o, struct strbuf *err);

/* The GPU pipeline, after the generic one: layouts for the target's dot tier, then the
 * lowering passes of that tier, steered by the schedule options. Sets f's target. */
bool pass_pipeline_gpu(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                       struct pass_options *o, struct strbuf *err);

/* The box of a TMA copy of the slice `mask` of tensor parameter t into a single-slot
 * shared buffer of type buf (pipeline_loops.c): false when TMA cannot do that copy. */
bool pass_tma_box(struct ir_func *f, ir_val t, uint64_t mask, const struct ir_type *buf, struct ir_type *box);

/* The swizzled shared layout of a 2-d buffer for tile type t (smem_stage.c): 16-byte units
 * XORed with the row's phase, 128-byte panels for longer rows (wgmma's and TMA's forms). */
uint16_t pass_shared_layout(struct ir_func *f, const struct ir_type *t);

/* The loop whose loaded slices row-cache would keep for later loops over the same range
 * (row_cache.c), with those loads in loads[0..*nloads) (at most 4; loads may be NULL); 0
 * when none. On generic IR too: the runtime evaluates that loop's trip count for
 * f->cache_trips. */
enum { ROW_CACHE_MAX_LOADS = 4 }; /* the loads ir_row_cache_find names at most */
uint32_t ir_row_cache_find(const struct ir_func *f, uint32_t *loads, uint32_t *nloads);
/* Bytes of one chunk of the loads[0..n) ir_row_cache_find names. */
int64_t row_cache_chunk_bytes(const struct ir_func *f, const uint32_t *loads, uint32_t n);
/* The programs per multiprocessor row-cache's budget is sized for: occupancy asks for
 * them where the cache holds a row. */
enum { ROW_CACHE_PROGRAMS = 2 };
/* Whether a row of `bytes` fits row-cache's budget on target t (the shared memory shared
 * by ROW_CACHE_PROGRAMS programs). The runtime records trip counts in f->cache_trips only
 * for rows that fit. */
bool row_cache_fits(const struct tl_target *t, int64_t bytes);
/* Whether a cached row of `bytes` is so long that no program beyond ROW_CACHE_PROGRAMS
 * fits beside them on target t (the vocabulary row: each warp's waits then go uncovered by
 * other programs' warps; row-align and pipeline decide by it, PERF.md 119). */
bool row_cache_crowds(const struct tl_target *t, int64_t bytes);
/* Whether row-cache keeps a row of f in shared memory at this launch: the schedule allows
 * it (rowcache, on by default) and f->cache_trips is known. Row-reverse leaves such loops
 * as they are. */
bool row_cache_applies(const struct ir_func *f);

/* Whether generic IR f has a loop whose bounds depend on the program and whose body's
 * products pass the persistent pass's light work per iteration (persistent.c): the kernels
 * whose persistent form depends on the long_tiles fact, which the runtime therefore adds to
 * their specialization key (and no other kernel's). */
bool pass_long_tiles_matter(const struct ir_func *f, struct arena *scratch);

/* Runs a comma-separated list of pass names (tilec opt). Unknown names are errors. */
bool pass_run_list(const char *list, struct ir_func *f, struct pass_options *o, struct strbuf *err);


#endif
