/* cg_async.c - the Hopper asynchronous ops: mbarriers, TMA loads, wgmma waits, named
 * barriers and the warp-specialized roles. Each op is translated as the IR says; the
 * schedule (which stage, which phase, who waits for what) was decided by the passes.
 *
 * Who executes what. Tile IR is SPMD over the threads of a program instance (or of one role
 * inside warp_specialize). Ops that one thread performs on behalf of all (mbar_expect_tx,
 * tma_load, the initialization in mbar_alloc) run on the current role's leader: thread 0
 * of the program, lane 0 of the producer warp, thread 0 of the consumers. mbar_wait is
 * executed by every thread of the role (each spins on the phase bit). mbar_arrive {per=n}
 * arrives once per n threads of the role (thread 0 of each group of n).
 *
 * Roles. warp_specialize becomes a branch on the warpgroup index: warpgroup 0 is the
 * producer (setmaxnreg.dec, then only its first warp runs the producer region), the others
 * the consumers (setmaxnreg.inc; warps renumbered from 0, so the tile layouts of the kernel
 * apply unchanged). Both arms are one if/else, as ptxas requires for setmaxnreg to apply.
 * Inside a role, barriers are named barriers over the role's threads (cg_barrier).       */
#include <stdio.h>
#include <string.h>

#include "cg_internal.h"

static LLVMValueRef mbar_ptr(struct cg *g, ir_val bar, ir_val slot) {
  LLVMValueRef off = cg_val(g, bar)->r[0];
  LLVMValueRef s = cg_scalar_i32(g, slot);
  return cg_smem_at(g, LLVMBuildAdd(g->b, off, LLVMBuildMul(g->b, s, cg_i32(g, 8), ""), ""));
}

/* Runs the code that `emit` generates only where cond holds. */
static LLVMBasicBlockRef begin_if(struct cg *g, LLVMValueRef cond, const char *name) {
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
  LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "cont");
  LLVMBuildCondBr(g->b, cond, then, cont);
  LLVMPositionBuilderAtEnd(g->b, then);
  return cont;
}

static void end_if(struct cg *g, LLVMBasicBlockRef cont) {
  LLVMBuildBr(g->b, cont);
  LLVMPositionBuilderAtEnd(g->b, cont);
}

void cg_gen_mbar_alloc(struct cg *g, const struct ir_op *op) {
  int n = ir_vtype(g->f, op->res)->dims[0];
  LLVMValueRef off = cg_i32(g, op->i[1]);
  cg_new_val(g, op->res, 1)->r[0] = off;
  /* one thread initializes; the fence makes the initialization visible to the async proxy
   * (TMA completes on these barriers); a barrier op follows in the IR */
  LLVMBasicBlockRef cont = begin_if(g, g->leader, "mbar.init");
  for (int s = 0; s < n; s++) {
    LLVMValueRef a[2] = {cg_smem_at(g, cg_i32(g, op->i[1] + 8 * s)), cg_i32(g, op->i[0])};
    cg_intrinsic(g, "llvm.nvvm.mbarrier.init.shared", NULL, 0, a, 2);
  }
  cg_intrinsic(g, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
  end_if(g, cont);
}

void cg_gen_mbar_wait(struct cg *g, const struct ir_op *op) {
  LLVMValueRef p = mbar_ptr(g, op->args[0], op->args[1]);
  LLVMValueRef phase = cg_scalar_i32(g, op->args[2]);
  if (g->failed) return;
  /* try_wait may give up after a time-out: loop until the phase has completed */
  LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mbar.wait");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mbar.done");
  LLVMBuildBr(g->b, spin);
  LLVMPositionBuilderAtEnd(g->b, spin);
  LLVMValueRef a[2] = {p, phase};
  LLVMValueRef ok = cg_intrinsic(g, "llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta", NULL, 0, a, 2);
  LLVMBuildCondBr(g->b, ok, done, spin);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* One arrival per `per` threads (thread 0 of each group), only where the optional predicate
 * holds: a predicated instruction, no branch (branches next to in-flight wgmma groups make
 * ptxas serialize them). */
void cg_gen_mbar_arrive(struct cg *g, const struct ir_op *op) {
  LLVMValueRef p = mbar_ptr(g, op->args[0], op->args[1]);
  LLVMValueRef pred = op->nargs > 2 ? cg_val(g, op->args[2])->r[0] : LLVMConstInt(g->i1, 1, 0);
  if (g->failed) return;
  int per = (int)op->i[0];
  if (per > 1) {
    LLVMValueRef first = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, g->role_tid, cg_i32(g, per - 1), ""),
                                       cg_i32(g, 0), "");
    pred = LLVMBuildAnd(g->b, pred, first, "");
  }
  LLVMValueRef a[2] = {LLVMBuildPtrToInt(g->b, p, g->i64, ""), LLVMBuildZExt(g->b, pred, g->i32, "")};
  cg_asm(g, LLVMVoidTypeInContext(g->ctx),
         "{\n.reg .pred p;\n.reg .b64 st;\nsetp.ne.b32 p, $1, 0;\n@p mbarrier.arrive.shared.b64 st, [$0];\n}", "l,r", a, 2,
         true);
}

void cg_gen_mbar_expect_tx(struct cg *g, const struct ir_op *op) {
  LLVMValueRef p = mbar_ptr(g, op->args[0], op->args[1]);
  if (g->failed) return;
  LLVMBasicBlockRef cont = begin_if(g, g->leader, "mbar.expect");
  LLVMValueRef a[2] = {p, cg_i32(g, op->i[0])};
  cg_intrinsic(g, "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta", NULL, 0, a, 2);
  end_if(g, cont);
}

void cg_gen_tma_desc(struct cg *g, const struct ir_op *op) {
  uint32_t id = (uint32_t)(op - g->f->ops.v);
  cg_new_val(g, op->res, 1)->r[0] = g->desc_param[id];
}

/* A TMA copy between a buffer's slot and a tensor slice, by boxes of the tensor map: the
 * buffer's columns in panels of the box's width, stored one after another. */
struct tma_copy {
  int rank, rows, inner, eb, panels;
  LLVMValueRef slot_base, desc, idx[IR_MAX_RANK];
};

/* From op's operands: buf, slot at 0 and 1, the tma_desc at di, the indices after it. */
static bool tma_copy_of(struct cg *g, const struct ir_op *op, uint32_t di, struct tma_copy *c) {
  const struct ir_type *bt = ir_vtype(g->f, op->args[0]), *box = ir_vtype(g->f, op->args[di]);
  c->rank = box->rank;
  c->eb = ir_dtype_bytes((ir_dtype)bt->dtype);
  c->rows = bt->dims[bt->rank - 2];
  c->inner = box->dims[c->rank - 1];
  int cols = bt->dims[bt->rank - 1];
  c->panels = cols / c->inner;
  LLVMValueRef base = cg_val(g, op->args[0])->r[0];
  LLVMValueRef slot = cg_scalar_i32(g, op->args[1]);
  c->desc = cg_val(g, op->args[di])->r[0];
  for (int d = 0; d < c->rank; d++) c->idx[d] = cg_scalar_i32(g, op->args[di + 1 + d]);
  if (g->failed) return false;
  const struct ir_op *desc = &g->f->ops.v[ir_def_op(g->f, op->args[di])];
  if (desc->i[0] == 1) { /* flat: one coordinate, the slice start's element offset */
    const struct cg_tensor *t = &g->tensors[ir_param_of(g->f, desc->args[0]) - g->f->params.v];
    LLVMValueRef off = cg_i64(g, 0);
    for (int d = 0; d < c->rank; d++)
      off = LLVMBuildAdd(g->b, off, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, c->idx[d], g->i64, ""), t->stride[d], ""), "");
    c->idx[0] = LLVMBuildTrunc(g->b, off, g->i32, ""); /* span31: in range for every element */
    c->rank = 1;
  }
  c->slot_base = LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, slot, cg_i32(g, c->rows * cols * c->eb), ""), "");
  return true;
}

/* Panel p's shared address; its coordinates, innermost first (the tensor's last dimension
 * is TMA's dimension 0), in coord[0 .. rank). */
static LLVMValueRef tma_panel(struct cg *g, const struct tma_copy *c, int p, LLVMValueRef *coord) {
  for (int d = c->rank - 1, k = 0; d >= 0; d--, k++)
    coord[k] = d == c->rank - 1 && p ? LLVMBuildAdd(g->b, c->idx[d], cg_i32(g, p * c->inner), "") : c->idx[d];
  return cg_smem_at(g, LLVMBuildAdd(g->b, c->slot_base, cg_i32(g, p * c->rows * c->inner * c->eb), ""));
}

/* tma_load buf, slot, bar, barslot, desc, idx...: one bulk tensor copy per panel. */
void cg_gen_tma_load(struct cg *g, const struct ir_op *op) {
  struct tma_copy c;
  LLVMValueRef bar = mbar_ptr(g, op->args[2], op->args[3]);
  if (!tma_copy_of(g, op, 4, &c)) return;
  LLVMBasicBlockRef cont = begin_if(g, g->leader, "tma.load");
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.g2s.tile.%dd", c.rank);
  LLVMTypeRef p7 = LLVMPointerTypeInContext(g->ctx, 7);
  for (int p = 0; p < c.panels; p++) {
    LLVMValueRef args[3 + IR_MAX_RANK + 5];
    args[0] = LLVMBuildAddrSpaceCast(g->b, tma_panel(g, &c, p, args + 3), p7, "");
    args[1] = bar;
    args[2] = c.desc;
    unsigned n = 3 + (unsigned)c.rank;
    args[n++] = LLVMConstInt(g->i16, 0, 0); /* no multicast */
    args[n++] = cg_i64(g, 0);               /* no cache hint */
    args[n++] = LLVMConstInt(g->i1, 0, 0);
    args[n++] = LLVMConstInt(g->i1, 0, 0);
    args[n++] = cg_i32(g, 0); /* cta_group: none */
    cg_intrinsic(g, name, NULL, 0, args, n);
  }
  end_if(g, cont);
}

/* tma_reduce buf, slot, desc, idx...: one bulk tensor reduce-add per panel, committed as one
 * bulk group of the leader, which alone may wait for it (bulk_wait). */
void cg_gen_tma_reduce(struct cg *g, const struct ir_op *op) {
  struct tma_copy c;
  if (!tma_copy_of(g, op, 2, &c)) return;
  LLVMBasicBlockRef cont = begin_if(g, g->leader, "tma.reduce");
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.reduce.add.tile.%dd", c.rank);
  for (int p = 0; p < c.panels; p++) {
    LLVMValueRef args[2 + IR_MAX_RANK + 2];
    args[0] = tma_panel(g, &c, p, args + 2);
    args[1] = c.desc;
    unsigned n = 2 + (unsigned)c.rank;
    args[n++] = cg_i64(g, 0); /* no cache hint */
    args[n++] = LLVMConstInt(g->i1, 0, 0);
    cg_intrinsic(g, name, NULL, 0, args, n);
  }
  cg_intrinsic(g, "llvm.nvvm.cp.async.bulk.commit.group", NULL, 0, NULL, 0);
  end_if(g, cont);
}

/* bulk_wait {pending=n}: the leader's bulk groups, all but n, have read their buffers. */
void cg_gen_bulk_wait(struct cg *g, const struct ir_op *op) {
  if (g->failed) return;
  LLVMBasicBlockRef cont = begin_if(g, g->leader, "bulk.wait");
  LLVMValueRef n = cg_i32(g, op->i[0]);
  cg_intrinsic(g, "llvm.nvvm.cp.async.bulk.wait.group.read", NULL, 0, &n, 1);
  end_if(g, cont);
}

/* wgmma_wait: wgmma.wait_group n, with the accumulators passed through it (tied operands)
 * so that nothing reads them before the wait or holds copies across it. One asm statement
 * ties at most WAIT_REGS registers; more (two 256x256 f32 accumulators on 4 warps are 1024)
 * go through several statements of the same wait, of which all but the first return at
 * once (at most n groups are still pending when the first returns). */
enum { WAIT_REGS = 512 };

void cg_gen_wgmma_wait(struct cg *g, const struct ir_op *op) {
  uint32_t total = 0;
  for (uint32_t k = 0; k < op->nargs; k++) total += cg_val(g, op->args[k])->n;
  if (g->failed) return;
  if (total == 0) {
    cg_fail(g, "wgmma_wait over no registers");
    return;
  }
  LLVMValueRef *regs = ARENA_NEWN(g->arena, LLVMValueRef, total);
  uint32_t n = 0;
  for (uint32_t k = 0; k < op->nargs; k++) {
    struct cgval *v = cg_val(g, op->args[k]);
    for (uint32_t r = 0; r < v->n; r++) {
      regs[n++] = v->r[r];
      if (LLVMTypeOf(v->r[r]) != g->f32) {
        cg_fail(g, "wgmma_wait: accumulators are f32");
        return;
      }
    }
  }
  char *text = arena_alloc(g->arena, 64), *cons = arena_alloc(g->arena, 16 * WAIT_REGS + 16);
  snprintf(text, 64, "wgmma.wait_group.sync.aligned %d;", (int)op->i[0]);
  LLVMTypeRef *ft = ARENA_NEWN(g->arena, LLVMTypeRef, WAIT_REGS);
  for (uint32_t i = 0; i < WAIT_REGS; i++) ft[i] = g->f32;
  for (uint32_t c0 = 0; c0 < total; c0 += WAIT_REGS) {
    uint32_t cnt = TL_MIN(total - c0, (uint32_t)WAIT_REGS);
    int cn = 0;
    for (uint32_t i = 0; i < cnt; i++) cn += snprintf(cons + cn, 16, "=f,");
    for (uint32_t i = 0; i < cnt; i++) cn += snprintf(cons + cn, 16, "%u%s", i, i + 1 < cnt ? "," : "");
    LLVMTypeRef rt = LLVMStructTypeInContext(g->ctx, ft, cnt, 0);
    LLVMValueRef res = cg_asm(g, rt, text, cons, regs + c0, cnt, true);
    for (uint32_t i = 0; i < cnt; i++) regs[c0 + i] = LLVMBuildExtractValue(g->b, res, i, "");
  }
  n = 0;
  for (uint32_t k = 0; k < op->nargs; k++) {
    uint32_t nr = cg_val(g, op->args[k])->n;
    struct cgval *out = cg_new_val(g, op->res + k, nr);
    for (uint32_t r = 0; r < nr; r++) out->r[r] = regs[n++];
  }
}

void cg_gen_barrier(struct cg *g, const struct ir_op *op) {
  if (op->i[1] == 0) {
    cg_barrier(g);
    return;
  }
  LLVMValueRef a[2] = {cg_i32(g, op->i[0]), cg_i32(g, op->i[1])};
  cg_intrinsic(g, "llvm.nvvm.barrier.cta.sync.aligned.count", NULL, 0, a, 2);
}

/* turn_wait / turn_pass (pingpong pass): consumer warpgroup w waits at named barrier
 * id + w; passing arrives at the next warpgroup's. The passes of only some warpgroups
 * (who != 0) are predicated in the asm, not branched around: ptxas serializes wgmma near
 * branches (C7515). */
void cg_gen_turn(struct cg *g, const struct ir_op *op) {
  int base = (int)op->i[0], groups = (int)op->i[1];
  LLVMValueRef wg = LLVMBuildLShr(g->b, g->role_tid, cg_i32(g, 7), "wg");
  if (op->code == IR_TURN_WAIT) {
    LLVMValueRef a[2] = {LLVMBuildAdd(g->b, wg, cg_i32(g, base), ""), cg_i32(g, 256)};
    cg_intrinsic(g, "llvm.nvvm.barrier.cta.sync.aligned.count", NULL, 0, a, 2);
    return;
  }
  LLVMValueRef nx = LLVMBuildAdd(g->b, wg, cg_i32(g, 1), "");
  nx = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, nx, cg_i32(g, groups), ""), cg_i32(g, 0), nx, "");
  LLVMValueRef id = LLVMBuildAdd(g->b, nx, cg_i32(g, base), "");
  if (op->i[2] == 0) {
    LLVMValueRef a[2] = {id, cg_i32(g, 256)};
    cg_intrinsic(g, "llvm.nvvm.barrier.cta.arrive.aligned.count", NULL, 0, a, 2);
    return;
  }
  LLVMValueRef last = LLVMBuildICmp(g->b, op->i[2] == 1 ? LLVMIntEQ : LLVMIntNE, wg, cg_i32(g, groups - 1), "");
  LLVMValueRef a[2] = {id, LLVMBuildZExt(g->b, last, g->i32, "")};
  cg_asm(g, LLVMVoidTypeInContext(g->ctx), "{ .reg .pred p; setp.ne.u32 p, $1, 0; @p bar.arrive $0, 256; }", "r,r", a, 2,
         true);
}

void cg_gen_warp_specialize(struct cg *g, uint32_t id) {
  const struct ir_op *op = &g->f->ops.v[id];
  int pw = (int)op->i[0], preg = (int)op->i[1], creg = (int)op->i[2];
  LLVMValueRef tid = cg_asm(g, g->i32, "mov.u32 $0, %tid.x;", "=r", NULL, 0, true);
  LLVMValueRef warp = LLVMBuildLShr(g->b, tid, cg_i32(g, 5), "");
  LLVMValueRef is_prod = LLVMBuildICmp(g->b, LLVMIntULT, warp, cg_i32(g, pw), "");
  LLVMBasicBlockRef prod = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "ws.producer");
  LLVMBasicBlockRef cons = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "ws.consumer");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "ws.end");
  LLVMBuildCondBr(g->b, is_prod, prod, cons);
  /* producer: give registers back, then its first warp runs the region */
  LLVMPositionBuilderAtEnd(g->b, prod);
  LLVMValueRef r = cg_i32(g, preg);
  cg_intrinsic(g, "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32", NULL, 0, &r, 1);
  LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "ws.producer.run");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, warp, cg_i32(g, 0), ""), run, join);
  LLVMPositionBuilderAtEnd(g->b, run);
  LLVMValueRef saved_leader = g->leader, saved_tid = g->role_tid;
  int saved_id = g->bar_id, saved_threads = g->bar_threads;
  LLVMValueRef lane = LLVMBuildAnd(g->b, tid, cg_i32(g, 31), "");
  g->leader = LLVMBuildICmp(g->b, LLVMIntEQ, lane, cg_i32(g, 0), "leader");
  g->role_tid = lane;
  g->bar_id = 2;
  g->bar_threads = 32;
  cg_gen_region(g, op->region);
  if (g->failed) return;
  LLVMBuildBr(g->b, join);
  /* consumers: take the registers, renumber the warps from 0 */
  LLVMPositionBuilderAtEnd(g->b, cons);
  r = cg_i32(g, creg);
  cg_intrinsic(g, "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32", NULL, 0, &r, 1);
  g->warp_base = pw;
  cg_fresh_thread_coords(g, NULL);
  g->role_tid = LLVMBuildSub(g->b, tid, cg_i32(g, 32 * pw), "");
  g->leader = LLVMBuildICmp(g->b, LLVMIntEQ, g->role_tid, cg_i32(g, 0), "leader");
  g->bar_id = 1;
  g->bar_threads = 32 * g->f->warps;
  cg_gen_region(g, op->region + 1);
  if (g->failed) return;
  cg_flush_stores(g);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  g->warp_base = 0;
  g->leader = saved_leader;
  g->role_tid = saved_tid;
  g->bar_id = saved_id;
  g->bar_threads = saved_threads;
}
