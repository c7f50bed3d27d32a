/* row_reverse.c - a loop that reads a row again walks it from its end.
 *
 * A row kernel written the obvious way reads a long row twice: softmax's first loop keeps a
 * running maximum and sum, its second writes the output; a norm sums squares, then scales.
 * Between a chunk's first read and its second, the first loop reads the rest of the row, so
 * each chunk is reused at a distance of a whole row, and when the rows in flight on the
 * device outgrow L2 (4096 x 50257 f16: 100 KB per row, some 500 rows in flight) the second
 * loop finds none of them there and reads the row from DRAM again (PERF.md 100: 1.5 rows
 * moved per row read). Walked from its end, the second loop first reads the chunks the
 * first loop read last: the reuse distance of the last chunk is nothing, that of the first
 * two rows' worth, so what L2 holds of each row is found there whatever the number of rows
 * in flight.
 *
 * Needs: generic IR (before layout), after row-align, whose loops it may reverse.
 *
 * Guarantees: a loop L `for %c = %lb to %ub step S` (S a positive constant) is walked from
 * its last chunk to its first when
 *   - its iterations are independent: it carries nothing, its body is straight-line
 *     elementwise work, reductions and loads and stores, every store and every load at %c
 *     is a 1-d slice `T[..., %c : +S]` along a tensor's last dimension of size %ub with its
 *     other indices fixed for the loop (row_access: iteration k touches only the columns of
 *     its own chunk), the other loads have indices fixed for the loop and are of tensors
 *     the loop does not store (they read the same values in any order);
 *   - an earlier loop of the same block over the same %ub and S loads the same row of a
 *     tensor that L loads (same_row), and the last such loop walks forward (a third loop
 *     over the row, after a reversed second, stays forward);
 *   - the schedule allows it (rowrev=1, the default) and the row cache does not keep the
 *     row at this launch (row_cache_applies: it reads the later loops from shared memory,
 *     matched by their ranges);
 *   - its start is a constant or row-align's shifted start. It becomes
 *     %t = (%ub - %lb + S - 1) / S           the trip count
 *     %last = %lb + (%t - 1) * S             the last chunk's start
 *     for %c = %last to %lb - 1 step -S { ... the body, unchanged ... }
 * (an IR loop with a negative step counts down while %c > its bound; codegen runs the
 * variable in 64 bits, so LLVM still sees each address as the previous one minus S
 * elements: computed as %last - %i * S from an ascending %i, every element of the element
 * form took its own 64-bit offset, 14 zero-extensions against 7).
 * The same chunks are computed with the same values, so every result is what the loop as
 * written gives (tensors written under one name and read under another are taken to be
 * the same elements or disjoint ones, as everywhere in the compiler). */
#include "passes.h"

enum { MAX_LOOPS = 32 };

/* Whether loop's iterations are independent (see the top); its row loads go in rows. */
static bool independent(const struct ir_func *f, uint32_t loop, int64_t *step) {
  const struct ir_op *lp = &f->ops.v[loop];
  int64_t S;
  if (lp->nres || lp->nargs < 3 || !ir_value_const_int(f, lp->args[2], &S) || S <= 0 ||
      ir_vtype(f, lp->args[0])->dtype != DT_I32)
    return false;
  const struct ir_block *body = &f->blocks.v[lp->region];
  ir_val iv = body->args, ub = lp->args[1];
  for (uint32_t i = 0; i < body->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[body->ops.v[i]];
    uint16_t c = op->code;
    if (op->nregions) return false;
    if (c == IR_LOAD || c == IR_STORE) {
      if (indexed_by(op, iv) || c == IR_STORE) {
        if (row_access(f, op, iv, ub, S, lp->region) < 0) return false;
        continue;
      }
      for (uint32_t k = 1; k < op->nargs; k++)
        if (ir_defined_within(f, op->args[k], lp->region)) return false;
      for (uint32_t j = 0; j < body->ops.n; j++) { /* not a tensor the loop writes */
        const struct ir_op *s = &f->ops.v[body->ops.v[j]];
        if (s->code == IR_STORE && s->args[0] == op->args[0]) return false;
      }
      continue;
    }
    if (!row_body_op(c) && c != IR_YIELD) return false;
  }
  *step = S;
  return true;
}

/* Each loop's range as written (its bound and constant step, 0 if not: a reversed loop's
 * operands no longer say it) and whether it was reversed. */
struct walk {
  uint32_t loop;
  ir_val ub;
  int64_t step;
  bool reversed;
};

/* Whether the last earlier loop of w[at]'s block over the same bound and step that loads a
 * row w[at] loads walks it forward: then its last chunks are the ones L2 holds (after a
 * reversed one, the first chunks are). */
static bool reads_again(const struct ir_func *f, const struct walk *w, uint32_t at) {
  const struct ir_op *lp = &f->ops.v[w[at].loop];
  const struct ir_block *body = &f->blocks.v[lp->region];
  ir_val iv = body->args;
  for (uint32_t e = at; e-- > 0;) {
    const struct ir_op *ep = &f->ops.v[w[e].loop];
    if (ep->block != lp->block || w[e].ub != w[at].ub || w[e].step != w[at].step) continue;
    const struct ir_block *eb = &f->blocks.v[ep->region];
    for (uint32_t i = 0; i < body->ops.n; i++) {
      const struct ir_op *x = &f->ops.v[body->ops.v[i]];
      if (x->code != IR_LOAD || row_access(f, x, iv, w[at].ub, w[at].step, lp->region) < 0) continue;
      for (uint32_t j = 0; j < eb->ops.n; j++) {
        const struct ir_op *y = &f->ops.v[eb->ops.v[j]];
        if (y->code == IR_LOAD && row_access(f, y, eb->args, w[e].ub, w[e].step, ep->region) >= 0 && same_row(f, x, y))
          return !w[e].reversed;
      }
    }
  }
  return false;
}

/* Whether lb, a loop's start, is far enough from the i32 range's end that lb - 1 does not
 * wrap: a constant, or row-align's `0 - align_shift` (at most 15 elements in front of 0). */
static bool start_in_range(const struct ir_func *f, ir_val lb) {
  int64_t n;
  if (ir_value_const_int(f, lb, &n)) return n > INT32_MIN;
  uint32_t d = ir_def_op(f, lb);
  if (!d || f->ops.v[d].code != IR_SUB) return false;
  uint32_t s = ir_def_op(f, f->ops.v[d].args[1]);
  return ir_value_const_int(f, f->ops.v[d].args[0], &n) && n == 0 && s && f->ops.v[s].code == IR_ALIGN_SHIFT;
}

/* Walks loop from its last chunk: `for %c = %last to %lb - 1 step -S` (IR loops count down
 * while iv > ub); the variable still is the chunk's start, so the body is unchanged. */
static void reverse_loop(struct ir_func *f, uint32_t loop, int64_t S) {
  struct ir_builder b;
  ir_builder_before(&b, f, loop);
  b.loc = f->ops.v[loop].loc;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  ir_val lb = f->ops.v[loop].args[0], ub = f->ops.v[loop].args[1];
  ir_val one = ir_const_int(&b, i32, 1), step = ir_const_int(&b, i32, S);
  ir_val span = ir_binary(&b, IR_ADD, ir_binary(&b, IR_SUB, ub, lb), ir_const_int(&b, i32, S - 1));
  ir_val trips = ir_binary(&b, IR_DIV, span, step);
  ir_val last = ir_binary(&b, IR_ADD, lb, ir_binary(&b, IR_MUL, ir_binary(&b, IR_SUB, trips, one), step));
  ir_val end = ir_binary(&b, IR_SUB, lb, one), down = ir_const_int(&b, i32, -S);
  ir_op_set_arg(f, loop, 0, last);
  ir_op_set_arg(f, loop, 1, end);
  ir_op_set_arg(f, loop, 2, down);
}

void pass_row_reverse(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  if (!tl_sched_get(f->sched.rowrev, 1) || row_cache_applies(f)) return;
  uint32_t loops[MAX_LOOPS], n = 0;
  struct walk w[MAX_LOOPS];
  ir_block_collect(f, IR_BODY_BLOCK, IR_FOR, loops, &n, MAX_LOOPS);
  for (uint32_t i = 0; i < n; i++) {
    const struct ir_op *lp = &f->ops.v[loops[i]];
    w[i] = (struct walk){loops[i], lp->nargs >= 3 ? lp->args[1] : 0, 0, false};
    if (lp->nargs < 3 || !ir_value_const_int(f, lp->args[2], &w[i].step)) w[i].step = 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    int64_t S;
    if (!f->ops.v[loops[i]].block || !independent(f, loops[i], &S) || !start_in_range(f, f->ops.v[loops[i]].args[0]) ||
        !reads_again(f, w, i))
      continue;
    reverse_loop(f, loops[i], S);
    w[i].reversed = true;
    pc->changed = true;
  }
}
