/* smem_stage.c - Tensor Core operands through shared memory.
 *
 * Needs: layouts assigned (layout pass), loop invariants hoisted (licm). Guarantees: every
 * convert_layout into a dot operand layout that moves data between threads goes through a
 * swizzled shared-memory buffer and comes out with local_load (ldmatrix in codegen):
 *
 *   - a tile loaded from a tensor inside a loop, at a position that changes with the loop
 *     (a GEMM's A and B blocks, attention's K and V blocks), is copied asynchronously from
 *     global to shared memory (async_copy = cp.async, out-of-bounds elements zero-filled)
 *     into a buffer allocated before the loop; the pipeline pass then multi-buffers it;
 *   - anything else (attention's Q, loaded once) is stored from registers (local_store).
 *
 * A transpose feeding the conversion (q @ k.T) is absorbed: the buffer keeps the loaded
 * orientation and local_load reads it transposed. Conversions that are register renamings
 * (attention's P, whose accumulator layout is the next dot's A layout) are left alone.
 *
 *   %k = load %K[..] : tile<64x64xf16, #blocked>       %buf = local_alloc : tile<64x64xf16, #shared>
 *   %t = trans %k                                       for ... {
 *   %b = convert_layout %t : tile<64x64xf16, #dot_op>     barrier
 *                                              =>         async_copy %buf, %0, %K[..]
 *                                                         async_commit; async_wait {pending=0}
 *                                                         barrier
 *                                                         %b = local_load %buf, %0 {trans=1}   */
#include <string.h>

#include "layout.h"
#include "passes.h"

static const struct ir_type *T(struct ir_func *f, ir_val v) { return ir_vtype(f, v); }

/* The swizzled shared layout for a 2-d tile whose last dimension is contiguous, chosen so
 * that ldmatrix's eight 16-byte rows fall in eight different bank groups. */
static uint16_t shared_layout(struct ir_func *f, const struct ir_type *t) {
  int eb = ir_dtype_bytes(t->dtype);
  int row_bytes = t->dims[1] * eb;
  struct ir_layout l = {0};
  l.kind = IR_LAYOUT_SHARED;
  l.rank = 2;
  l.vec = (uint8_t)(16 / eb);
  l.per_phase = (uint8_t)(row_bytes >= 128 ? 1 : 128 / row_bytes);
  l.max_phase = (uint8_t)(8 / l.per_phase > 1 ? 8 / l.per_phase : 1);
  if (row_bytes < 16) l.vec = (uint8_t)t->dims[1], l.max_phase = 1;
  l.order[0] = 1;
  l.order[1] = 0;
  return ir_layout_intern(f, &l);
}

static bool defined_in(struct ir_func *f, ir_val v, uint32_t blk) {
  const struct ir_value *val = &f->values.v[v];
  uint32_t b = val->kind == IR_VAL_RESULT ? f->ops.v[val->def].block : val->kind == IR_VAL_BLOCKARG ? val->def : 0;
  while (b) {
    if (b == blk) return true;
    uint32_t parent = f->blocks.v[b].parent;
    b = parent ? f->ops.v[parent].block : 0;
  }
  return false;
}

void pass_smem_stage(struct pass_ctx *pc) {
  struct ir_func *f = pc->f;
  uint32_t nops = f->ops.n;
  for (uint32_t id = 1; id < nops; id++) {
    struct ir_op *op = &f->ops.v[id];
    if (!op->block || op->code != IR_CONVERT_LAYOUT) continue;
    const struct ir_type *rt = T(f, op->res);
    const struct ir_layout *dl = &f->layouts.v[rt->layout];
    if (dl->kind != IR_LAYOUT_DOT_OP || f->layouts.v[dl->parent].kind != IR_LAYOUT_MMA) continue;
    ir_val src = op->args[0];
    struct ll ls, ld;
    if (ll_of_type(f, T(f, src), f->warps, &ls) && ll_of_type(f, rt, f->warps, &ld)) {
      uint32_t map_storage[1u << LL_MAX_REG_BITS];
      if (ll_num_regs(&ld) <= TL_ARRAY_LEN(map_storage) && ll_register_map(&ld, &ls, map_storage)) continue;
    }
    /* find the root tile: a load, possibly under a transpose */
    int trans = 0;
    ir_val root = src;
    uint32_t d = ir_def_op(f, root);
    if (d && f->ops.v[d].code == IR_TRANS) {
      trans = 1;
      root = f->ops.v[d].args[0];
      d = ir_def_op(f, root);
    }
    const struct ir_type *tt = T(f, root);
    ir_type_id buf_type;
    {
      struct ir_type bt = *tt;
      bt.layout = shared_layout(f, tt);
      buf_type = ir_type_intern(f, &bt);
    }
    uint32_t blk = op->block;
    uint32_t loop = f->blocks.v[blk].parent;
    bool in_loop = loop && f->ops.v[loop].code == IR_FOR;
    bool async = false;
    if (d && f->ops.v[d].code == IR_LOAD && in_loop && f->ops.v[d].block == blk && f->ops.v[d].f == 0) {
      /* the load must move with the loop: some index defined inside the loop body */
      const struct ir_op *ld_op = &f->ops.v[d];
      for (uint32_t k = 1; k < ld_op->nargs; k++)
        if (defined_in(f, ld_op->args[k], blk)) async = true;
    }
    struct ir_builder b;
    ir_type_id i32 = ir_type_scalar(f, DT_I32);
    ir_val frag;
    if (async) {
      /* buffer before the loop */
      ir_builder_before(&b, f, loop);
      ir_val buf = ir_build1(&b, IR_LOCAL_ALLOC, buf_type, NULL, 0);
      /* copy at the load's position (the load's operands are available there) */
      ir_builder_before(&b, f, d);
      ir_val slot = ir_const_int(&b, i32, 0);
      ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
      const struct ir_op *lo = &f->ops.v[d];
      ir_val args[2 + 1 + IR_MAX_RANK];
      uint32_t n = 0;
      args[n++] = buf;
      args[n++] = slot;
      for (uint32_t k = 0; k < lo->nargs; k++) args[n++] = lo->args[k];
      uint32_t cp = ir_build(&b, IR_ASYNC_COPY, args, n, NULL, 0);
      f->ops.v[cp].i[0] = f->ops.v[d].i[0];
      ir_build(&b, IR_ASYNC_COMMIT, NULL, 0, NULL, 0);
      uint32_t w = ir_build(&b, IR_ASYNC_WAIT, NULL, 0, NULL, 0);
      f->ops.v[w].i[0] = 0;
      ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
      ir_builder_before(&b, f, id);
      ir_val la[2] = {buf, slot};
      frag = ir_build1(&b, IR_LOCAL_LOAD, f->values.v[op->res].type, la, 2);
    } else {
      ir_builder_before(&b, f, id);
      ir_val buf = ir_build1(&b, IR_LOCAL_ALLOC, buf_type, NULL, 0);
      ir_val slot = ir_const_int(&b, i32, 0);
      ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
      ir_val sa[3] = {buf, slot, root};
      ir_build(&b, IR_LOCAL_STORE, sa, 3, NULL, 0);
      ir_build(&b, IR_BARRIER, NULL, 0, NULL, 0);
      ir_val la[2] = {buf, slot};
      frag = ir_build1(&b, IR_LOCAL_LOAD, f->values.v[op->res].type, la, 2);
    }
    f->ops.v[ir_def_op(f, frag)].i[0] = trans;
    ir_replace_uses(f, f->ops.v[id].res, frag);
    ir_op_remove(f, id);
    pc->changed = true;
  }
}
