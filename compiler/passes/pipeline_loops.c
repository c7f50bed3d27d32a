/* pipeline_loops.c - software pipelining of asynchronous copies over a loop (N stages).
 *
 * Needs: smem_stage's form, in which each staged tile of a loop body is
 *   barrier; async_copy %buf, %slot0, %T[idx...]; async_commit; async_wait 0; barrier
 * followed later by local_load %buf, %slot0. Guarantees, for a for loop with stages=S >= 2
 * whose copy indices are computed from the induction variable by pure ops: every buffer
 * gets S slots; a prologue issues the copies of iterations 0..S-2 into slots 0..S-2 (one
 * commit group per iteration); iteration i waits for its group (async_wait S-2), meets the
 * other threads (barrier: its data is visible, and everybody is done with the slot about
 * to be refilled), issues the copies of iteration i+S-1 into the slot read in iteration
 * i-1, and then computes on slot i mod S. Copies past the end of the loop read nothing:
 * their indices are out of bounds, so cp.async zero-fills. One barrier per iteration.
 *
 *   for %k = %lb to %ub step %s {             copies for %lb, %lb+%s, ... (S-1 groups)
 *     <copy group into slot 0>         =>     for %k ... iter(%rd = 0, %wr = S-1) {
 *     %a = local_load %buf, %0                  async_wait {pending=S-2}; barrier
 *     ...                                       copies for %k + (S-1)*%s into slot %wr
 *   }                                           %a = local_load %buf, %rd ...
 *                                               yield ..., (%rd+1) mod S, (%wr+1) mod S }
 *                                             async_wait {pending=0}                      */
#include <string.h>

#include "passes.h"

enum { MAX_COPIES = 16, MAX_CHAIN = 128 };

struct chain {
  uint32_t ops[MAX_CHAIN]; /* body ops computing copy indices from the induction variable, in order */
  uint32_t n;
};

/* Adds the ops that compute v inside the body (from the induction variable and values
 * defined outside) to the chain. False if v depends on anything else. */
static bool collect(struct ir_func *f, uint32_t body, ir_val iv, ir_val v, struct chain *c) {
  if (v == iv || !ir_defined_within(f, v, body)) return true;
  uint32_t d = ir_def_op(f, v);
  if (!d || f->ops.v[d].block != body) return false;
  const struct ir_op *op = &f->ops.v[d];
  if (!(ir_ops[op->code].flags & OPF_PURE) || op->nregions) return false;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->ops[i] == d) return true;
  for (uint32_t k = 0; k < op->nargs; k++)
    if (!collect(f, body, iv, op->args[k], c)) return false;
  if (c->n == MAX_CHAIN) return false;
  c->ops[c->n++] = d;
  return true;
}

struct valmap {
  ir_val from[MAX_CHAIN + 1], to[MAX_CHAIN + 1];
  uint32_t n;
};

static ir_val mapped(const struct valmap *m, ir_val v) {
  for (uint32_t i = 0; i < m->n; i++)
    if (m->from[i] == v) return m->to[i];
  return v;
}

/* Emits the chain with the induction variable replaced by `iv_value`, then the copies. */
static void emit_copies(struct ir_builder *b, const struct chain *c, ir_val iv, ir_val iv_value,
                        uint32_t *copies, uint32_t ncopies, ir_val slot) {
  struct ir_func *f = b->f;
  struct valmap m = {.n = 1};
  m.from[0] = iv;
  m.to[0] = iv_value;
  for (uint32_t i = 0; i < c->n; i++) {
    struct ir_op src = f->ops.v[c->ops[i]];
    ir_val args[8];
    for (uint32_t k = 0; k < src.nargs && k < 8; k++) args[k] = mapped(&m, src.args[k]);
    ir_type_id t = f->values.v[src.res].type;
    uint32_t op = ir_build(b, (ir_opcode)src.code, args, src.nargs, &t, 1);
    memcpy(f->ops.v[op].i, src.i, sizeof src.i);
    f->ops.v[op].f = src.f;
    m.from[m.n] = src.res;
    m.to[m.n] = f->ops.v[op].res;
    m.n++;
  }
  for (uint32_t i = 0; i < ncopies; i++) {
    struct ir_op src = f->ops.v[copies[i]];
    ir_val args[3 + IR_MAX_RANK];
    args[0] = src.args[0];
    args[1] = slot;
    for (uint32_t k = 2; k < src.nargs; k++) args[k] = mapped(&m, src.args[k]);
    uint32_t op = ir_build(b, IR_ASYNC_COPY, args, src.nargs, NULL, 0);
    f->ops.v[op].i[0] = src.i[0];
  }
  ir_build(b, IR_ASYNC_COMMIT, NULL, 0, NULL, 0);
}

static void remove_if(struct ir_func *f, uint32_t blk, int pos, ir_opcode code) {
  struct ir_block *b = &f->blocks.v[blk];
  if (pos < 0 || (uint32_t)pos >= b->ops.n) return;
  uint32_t id = b->ops.v[pos];
  if (f->ops.v[id].code == code) ir_op_remove(f, id);
}

static bool pipeline_loop(struct pass_ctx *pc, uint32_t loop) {
  struct ir_func *f = pc->f;
  int S = (int)f->ops.v[loop].i[0];
  if (S < 2) return false;
  uint32_t body = f->ops.v[loop].region;
  ir_val iv = f->blocks.v[body].args;
  uint32_t copies[MAX_COPIES], ncopies = 0;
  struct chain c = {.n = 0};
  struct ir_block *bb = &f->blocks.v[body];
  for (uint32_t i = 0; i < bb->ops.n; i++) {
    uint32_t id = bb->ops.v[i];
    const struct ir_op *op = &f->ops.v[id];
    if (op->code != IR_ASYNC_COPY) continue;
    int64_t slot;
    if (ir_defined_within(f, op->args[0], body) || !ir_value_const_int(f, op->args[1], &slot) || slot != 0) return false;
    for (uint32_t k = 3; k < op->nargs; k++)
      if (!collect(f, body, iv, op->args[k], &c)) return false;
    if (ncopies == MAX_COPIES) return false;
    copies[ncopies++] = id;
  }
  if (!ncopies) return false;

  struct ir_builder b;
  ir_type_id i32 = ir_type_scalar(f, DT_I32);
  /* S slots per buffer */
  for (uint32_t i = 0; i < ncopies; i++) {
    ir_val buf = f->ops.v[copies[i]].args[0];
    struct ir_type t = *ir_vtype(f, buf);
    if (t.rank == 2) {
      t.dims[2] = t.dims[1];
      t.dims[1] = t.dims[0];
      t.dims[0] = S;
      t.rank = 3;
      f->values.v[buf].type = ir_type_intern(f, &t);
    }
  }
  /* prologue: iterations 0 .. S-2 */
  const struct ir_op *lp = &f->ops.v[loop];
  ir_val lb = lp->args[0], step = lp->args[2];
  ir_type_id ivt = f->values.v[lb].type;
  ir_builder_before(&b, f, loop);
  for (int s = 0; s < S - 1; s++) {
    ir_val ivs = lb;
    if (s) {
      ir_val k = ir_const_int(&b, ivt, s);
      ivs = ir_binary(&b, IR_ADD, lb, ir_binary(&b, IR_MUL, k, step));
    }
    emit_copies(&b, &c, iv, ivs, copies, ncopies, ir_const_int(&b, i32, s));
  }
  /* the loop again, with two more carried values: the slot to read and the slot to fill */
  lp = &f->ops.v[loop];
  uint32_t nc = lp->nargs - 3;
  ir_val inits[256];
  if (nc + 2 > 256) return false;
  for (uint32_t k = 0; k < nc; k++) inits[k] = lp->args[3 + k];
  inits[nc] = ir_const_int(&b, i32, 0);
  inits[nc + 1] = ir_const_int(&b, i32, S - 1);
  lp = &f->ops.v[loop];
  uint32_t nl = ir_build_for(&b, lp->args[0], lp->args[1], lp->args[2], inits, nc + 2);
  lp = &f->ops.v[loop];
  f->ops.v[nl].i[0] = lp->i[0];
  f->ops.v[nl].loc = lp->loc;
  uint32_t nbody = f->ops.v[nl].region;
  ir_val nargs_base = f->blocks.v[nbody].args;
  /* move the body */
  f->blocks.v[nbody].ops = f->blocks.v[body].ops;
  memset(&f->blocks.v[body].ops, 0, sizeof f->blocks.v[body].ops);
  for (uint32_t i = 0; i < f->blocks.v[nbody].ops.n; i++) f->ops.v[f->blocks.v[nbody].ops.v[i]].block = nbody;
  for (uint32_t k = 0; k <= nc; k++) ir_replace_uses(f, f->blocks.v[body].args + k, nargs_base + k);
  for (uint32_t k = 0; k < nc; k++) ir_replace_uses(f, f->ops.v[loop].res + k, f->ops.v[nl].res + k);
  ir_val rd = nargs_base + 1 + nc, wr = nargs_base + 2 + nc;
  ir_val niv = nargs_base;
  /* drop the original copy groups: barrier, copy, commit, wait, barrier */
  for (uint32_t i = 0; i < ncopies; i++) {
    struct ir_block *nb = &f->blocks.v[nbody];
    int pos = 0;
    while ((uint32_t)pos < nb->ops.n && nb->ops.v[pos] != copies[i]) pos++;
    remove_if(f, nbody, pos + 3, IR_BARRIER);
    remove_if(f, nbody, pos + 2, IR_ASYNC_WAIT);
    remove_if(f, nbody, pos + 1, IR_ASYNC_COMMIT);
    ir_op_remove(f, copies[i]);
    remove_if(f, nbody, pos - 1, IR_BARRIER);
  }
  /* readers of the buffers (local_load, wgmma) read the current slot */
  for (uint32_t i = 1; i < f->ops.n; i++) {
    struct ir_op *op = &f->ops.v[i];
    if (!op->block || (op->code != IR_LOCAL_LOAD && op->code != IR_WGMMA) || !ir_defined_within(f, op->res, nbody))
      continue;
    ir_val a[5];
    memcpy(a, op->args, sizeof(ir_val) * op->nargs);
    bool changed = false;
    for (uint32_t k = 0; k < ncopies; k++) {
      ir_val buf = f->ops.v[copies[k]].args[0];
      if (a[0] == buf) a[1] = rd, changed = true;
      if (op->code == IR_WGMMA && a[2] == buf) a[3] = rd, changed = true;
    }
    if (changed) ir_op_set_args(f, i, a, op->nargs);
  }
  /* top of the body: wait, barrier, issue the copies of iteration i + S - 1 */
  struct ir_block *nb = &f->blocks.v[nbody];
  uint32_t first = nb->ops.v[0];
  ir_builder_before(&b, f, first);
  uint32_t w = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
  f->ops.v[w].i[0] = S - 2;
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  ir_val ahead = ir_binary(&b, IR_ADD, niv, ir_binary(&b, IR_MUL, ir_const_int(&b, ivt, S - 1), f->ops.v[nl].args[2]));
  /* the body's chain ops now read the new induction variable */
  emit_copies(&b, &c, niv, ahead, copies, ncopies, wr);
  /* yield: advance the slots */
  nb = &f->blocks.v[nbody];
  uint32_t yid = VEC_LAST(nb->ops);
  ir_builder_before(&b, f, yid);
  ir_val one = ir_const_int(&b, i32, 1), zero = ir_const_int(&b, i32, 0), sv = ir_const_int(&b, i32, S);
  ir_val rd1 = ir_binary(&b, IR_ADD, rd, one), wr1 = ir_binary(&b, IR_ADD, wr, one);
  ir_val args3[3];
  args3[0] = ir_binary(&b, IR_EQ, rd1, sv), args3[1] = zero, args3[2] = rd1;
  ir_val rdn = ir_build1(&b, IR_SELECT, i32, args3, 3);
  args3[0] = ir_binary(&b, IR_EQ, wr1, sv), args3[1] = zero, args3[2] = wr1;
  ir_val wrn = ir_build1(&b, IR_SELECT, i32, args3, 3);
  const struct ir_op *y = &f->ops.v[yid];
  ir_val yargs[256];
  for (uint32_t k = 0; k < y->nargs; k++) yargs[k] = y->args[k];
  yargs[nc] = rdn;
  yargs[nc + 1] = wrn;
  ir_op_set_args(f, yid, yargs, nc + 2);
  /* after the loop: drain */
  ir_op_remove(f, loop);
  struct ir_block *outer = &f->blocks.v[f->ops.v[nl].block];
  uint32_t pos = 0;
  while (outer->ops.v[pos] != nl) pos++;
  if (pos + 1 < outer->ops.n) {
    ir_builder_before(&b, f, outer->ops.v[pos + 1]);
  } else {
    ir_builder_at_end(&b, f, f->ops.v[nl].block);
  }
  uint32_t w0 = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
  f->ops.v[w0].i[0] = 0;
  /* the buffers may be reused by later allocations (smem is allocated by liveness): every
   * thread must be done reading them first */
  ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
  return true;
}

static void visit(struct ir_func *f, uint32_t id, void *ud) {
  struct pass_ctx *pc = ud;
  if (f->ops.v[id].code == IR_FOR && f->ops.v[id].block && pipeline_loop(pc, id)) pc->changed = true;
}

void pass_pipeline_loops(struct pass_ctx *pc) { ir_walk(pc->f, IR_BODY_BLOCK, visit, pc); }
