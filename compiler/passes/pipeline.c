/* pipeline.c - the pass table and the pipelines, written out as flat ordered lists.
 *
 * Ordering constraints are stated where the list is: a reader should be able to see why
 * each pass runs where it does without reading the passes.                            */
#include <stdio.h>
#include <string.h>

#include "passes.h"

static const struct {
  const char *name;
  void (*fn)(struct pass_ctx *);
  const char *doc;
} pass_table[PASS__COUNT] = {
    [PASS_NONE] = {"none", NULL, ""},
#define PASS(id, name, fn, doc) [PASS_##id] = {name, fn, doc},
#include "passes.def"
#undef PASS
};

const char *pass_name(enum pass_id p) { return p < PASS__COUNT ? pass_table[p].name : "?"; }
const char *pass_doc(enum pass_id p) { return p < PASS__COUNT ? pass_table[p].doc : "?"; }

enum pass_id pass_from_name(const char *name) {
  for (int i = 1; i < PASS__COUNT; i++)
    if (strcmp(pass_table[i].name, name) == 0) return (enum pass_id)i;
  return PASS_NONE;
}

void pass_names_text(char *buf, size_t cap) {
  size_t n = 0;
  if (cap) buf[0] = 0;
  for (int i = 1; i < PASS__COUNT && n < cap; i++) {
    int w = snprintf(buf + n, cap - n, "%s%s", i > 1 ? ", " : "", pass_table[i].name);
    if (w < 0) break;
    n += (size_t)w;
  }
}

bool pass_run(enum pass_id p, struct ir_func *f, struct pass_options *o, struct strbuf *err) {
  struct arena scratch;
  arena_init_child(&scratch, f->arena);
  struct pass_ctx pc = {f, &scratch, false};
  double t0 = o && o->time ? tl_now_ms() : 0;
  double ev0 = o && o->event ? o->event(o->event_ud, pass_table[p].name, true, 0) : 0;
  pass_table[p].fn(&pc);
  if (o && o->event) o->event(o->event_ud, pass_table[p].name, false, ev0);
  arena_free(&scratch);
  if (o && o->time) {
    o->times_ms[p] += tl_now_ms() - t0;
    o->runs[p]++;
  }
  if (o && o->verify_each && !ir_verify(f, pass_table[p].name, err)) return false;
  if (o && o->dump && o->dump_after &&
      (strcmp(o->dump_after, "all") == 0 || strcmp(o->dump_after, pass_table[p].name) == 0)) {
    struct arena pa;
    arena_init_child(&pa, f->arena);
    struct strbuf sb;
    sb_init(&sb, &pa);
    ir_print_func(&sb, f, 0);
    o->dump(o->dump_ud, pass_table[p].name, sb_str(&sb));
    arena_free(&pa);
  }
  return true;
}

bool pass_pipeline_generic(struct ir_func *f, struct pass_options *o, struct strbuf *err) {
  /* canonicalize first: it turns irgen's verbose forms (splat of a constant, broadcast to
   * the same shape, acc + a @ b) into the shapes fold and CSE recognise. */
  if (!pass_run(PASS_CANONICALIZE, f, o, err)) return false;
  /* fold after canonicalize so constant splats are CONST tiles; a second canonicalize
   * catches patterns exposed by folding (a select on a now-constant condition, if on a
   * constant). */
  if (!pass_run(PASS_FOLD, f, o, err)) return false;
  if (!pass_run(PASS_CANONICALIZE, f, o, err)) return false;
  /* on the canonical forms (trans(trans(x)) gone, constants folded), before CSE and DCE,
   * which merge the rebuilt broadcasts and delete the chains it leaves unused */
  if (!pass_run(PASS_TRANSPOSE, f, o, err)) return false;
  /* after canonicalize and fold, which leave the index arithmetic between two loops as
   * the plain scalar ops it checks for */
  if (!pass_run(PASS_FLATTEN, f, o, err)) return false;
  /* CSE before DCE: merging duplicates leaves dead copies for DCE to remove. */
  if (!pass_run(PASS_CSE, f, o, err)) return false;
  /* DCE last: it also records which parameters are still used after specialization, which
   * the launcher needs (an unused tensor may be passed as NULL). */
  if (!pass_run(PASS_DCE, f, o, err)) return false;
  return true;
}

bool pass_pipeline_gpu(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                       struct pass_options *o, struct strbuf *err) {
  f->target = target;
  f->sched = *sched;
  /* before layout, which gives the loads it aligns 16-byte vectors per thread */
  if (!pass_run(PASS_ROW_ALIGN, f, o, err)) return false;
  /* after row-align, which aligns the loops as written; before layout (scalar ops only) */
  if (!pass_run(PASS_ROW_REVERSE, f, o, err)) return false;
  /* after both (they match the slices as written); before layout, which then lays out
   * each CTA's share of the row */
  if (!pass_run(PASS_CLUSTER_ROWS, f, o, err)) return false;
  /* layout assignment needs the generic pipeline's output: constants folded and dead
   * values gone, so no layout (and no conversion) is spent on them. */
  if (!pass_run(PASS_LAYOUT, f, o, err)) return false;
  /* layout assignment inserts conversions and re-created constants: merge duplicates and
   * delete what is dead before deciding what to stage */
  if (!pass_run(PASS_CSE, f, o, err)) return false;
  if (!pass_run(PASS_DCE, f, o, err)) return false;
  /* hoisting before staging: a conversion of a loop-invariant tile (attention's Q) must be
   * outside the loop when smem-stage decides between async copies and a register store */
  if (!pass_run(PASS_LICM, f, o, err)) return false;
  /* conversions hoisted out of two loops (attention's two key ranges) become identical
   * neighbours: merge them so the operand is staged once */
  if (!pass_run(PASS_CSE, f, o, err)) return false;
  /* a row read twice kept in shared memory: on the merged bounds and indices (cse), before
   * mem-order, which then sees the later loops read the buffer, not the tensor */
  if (!pass_run(PASS_ROW_CACHE, f, o, err)) return false;
  /* a program reads back its own writes only after a barrier; before staging, which must
   * not move a load across one, and before warp specialization, which names them */
  if (!pass_run(PASS_MEM_ORDER, f, o, err)) return false;
  if (tl_has(target, TL_FEAT_MMA_SYNC)) {
    if (!pass_run(PASS_SMEM_STAGE, f, o, err)) return false;
    /* after smem-stage, like it a staging through shared memory; before wgmma-async, which
     * then makes the store of a product's result wait for it, and before warp
     * specialization, which names its barriers */
    if (!pass_run(PASS_BULK_REDUCE, f, o, err)) return false;
    /* pipelining needs smem-stage's copy groups; it multi-buffers them per loop, as TMA
     * rings where the target and the copies allow */
    if (!pass_run(PASS_PIPELINE, f, o, err)) return false;
    if (ir_func_wgmma(f)) {
      /* the Hopper schedule, in this order: async wgmma moves each stage's release behind
       * the next stage's issue; warp specialization then takes the fills (which wait on
       * those releases) into a producer role; persistence wraps each role in a tile loop */
      if (!pass_run(PASS_WGMMA_ASYNC, f, o, err)) return false;
      if (!pass_run(PASS_WARP_SPECIALIZE, f, o, err)) return false;
      /* on the roles as warp specialization leaves them (one ring loop each, whose ring
       * positions index the writer's slots), before persistence wraps them */
      if (!pass_run(PASS_BULK_WRITER, f, o, err)) return false;
      if (!pass_run(PASS_PERSISTENT, f, o, err)) return false;
      /* after warp specialization: it rotates fill-free loops (the consumer's) */
      if (!pass_run(PASS_WGMMA_OVERLAP, f, o, err)) return false;
      /* last: it cuts the consumer's loops (rotated or not) at their elementwise part */
      if (!pass_run(PASS_PINGPONG, f, o, err)) return false;
    }
    if (!pass_run(PASS_CSE, f, o, err)) return false;
    if (!pass_run(PASS_DCE, f, o, err)) return false;
  }
  /* after warp specialization (kernels with roles keep their register budgets) */
  if (!pass_run(PASS_OCCUPANCY, f, o, err)) return false;
  /* independent of the others: the launch relation to the neighbouring kernels */
  if (!pass_run(PASS_GRID_DEP, f, o, err)) return false;
  /* after every pass that places barriers and async ops, before allocation (which adds
   * the barriers its reuse of memory needs) */
  if (!pass_run(PASS_BARRIER_ELIDE, f, o, err)) return false;
  /* allocation last: every buffer and barrier exists and no later pass moves one */
  if (!pass_run(PASS_SMEM_ALLOC, f, o, err)) return false;
  return true;
}

bool pass_run_list(const char *list, struct ir_func *f, struct pass_options *o, struct strbuf *err) {
  const char *s = list;
  while (*s) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    char name[64];
    if (n == 0 || n >= sizeof name) {
      sb_printf(err, "bad pass list '%s'\n", list);
      return false;
    }
    memcpy(name, s, n);
    name[n] = 0;
    enum pass_id p = pass_from_name(name);
    if (p == PASS_NONE) {
      char names[512];
      pass_names_text(names, sizeof names);
      sb_printf(err, "unknown pass '%s'; the passes are %s\n", name, names);
      return false;
    }
    if (!pass_run(p, f, o, err)) return false;
    s += n;
    if (*s == ',') s++;
  }
  return true;
}
