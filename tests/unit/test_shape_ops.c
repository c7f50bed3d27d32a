/* test_shape_ops.c - reshape, permute, join and split on the GPU tier move no data: the layout
 * pass gives each a result layout that is its operand's relabeled (converting the operand
 * first where needed), and codegen renames registers (cg_gen_shape_op: ll_shape_view, then
 * ll_register_map). No GPU is needed to check that this renaming is right: for every thread
 * and result register, the element the register holds under the result layout must be the
 * one the op's semantics (NumPy's) put there, taken from the operand register codegen picks
 * under the operand layout. That check uses only linear-layout coordinates and the ops'
 * definitions, not the relabeling code it checks.
 *
 * Cases: many shapes (dims of 1 and 2, ranks 1 to 4), random reshape targets, every
 * permutation, join and split, 1 to 16 warps, 4- and 2-byte elements, operands in the
 * default load layout and in the mma.sync accumulator layout (a dot result). Each case is a
 * small kernel in IR text run through the layout pass for sm_80. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"
#include "layout.h"
#include "passes.h"
#include "rng.h"
#include "target.h"
#include "test_seed.h"

#include "fixture.h"

/* The coordinate register r of lane l in warp w holds (XOR of the bases of the set bits). */
static void coord_of(const struct ll *L, uint32_t r, uint32_t lane, uint32_t warp, int32_t *c) {
  memset(c, 0, sizeof(int32_t) * IR_MAX_RANK);
  for (int b = 0; b < L->nreg; b++)
    if (r >> b & 1)
      for (int d = 0; d < L->rank; d++) c[d] ^= L->reg[b][d];
  for (int b = 0; b < L->nlane; b++)
    if (lane >> b & 1)
      for (int d = 0; d < L->rank; d++) c[d] ^= L->lane[b][d];
  for (int b = 0; b < L->nwarp; b++)
    if (warp >> b & 1)
      for (int d = 0; d < L->rank; d++) c[d] ^= L->warp[b][d];
}

static int64_t flat_of(const int32_t *c, const int32_t *shape, int rank) {
  int64_t x = 0;
  for (int d = 0; d < rank; d++) x = x * shape[d] + c[d];
  return x;
}

/* Checks one shape op of a function after layout assignment; returns a message or NULL. */
static const char *check_op(struct fixture *fx, struct ir_func *f, const struct ir_op *op) {
  const struct ir_type *at = ir_vtype(f, op->args[0]), *rt = ir_vtype(f, op->res);
  struct ll src, dst, view;
  if (op->code == IR_JOIN && f->values.v[op->args[0]].type != f->values.v[op->args[1]].type)
    return "join operands in different layouts";
  if (!ll_of_type(f, at, f->warps, &src) || !ll_of_type(f, rt, f->warps, &dst)) return "no linear layout";
  uint32_t n = ll_num_regs(&src), nd = ll_num_regs(&dst);
  uint32_t *src_reg = ARENA_NEWN(&fx->a, uint32_t, 2 * n), *map = ARENA_NEWN(&fx->a, uint32_t, nd);
  if (!ll_shape_view(op->code, op->i[0], &src, rt->rank, rt->dims, &view, src_reg)) return "no view";
  if (!ll_register_map(&dst, &view, map)) return "result layout is not the operand's relabeled";
  int perm[IR_MAX_RANK] = {0};
  if (op->code == IR_PERMUTE && !ir_perm_decode(op->i[0], at->rank, perm)) return "bad perm";
  for (uint32_t w = 0; w < (uint32_t)f->warps; w++)
    for (uint32_t l = 0; l < 32; l++)
      for (uint32_t r = 0; r < nd; r++) {
        int32_t cd[IR_MAX_RANK], cs[IR_MAX_RANK];
        coord_of(&dst, r, l, w, cd);
        uint32_t k = src_reg[map[r]];
        bool from_b = k >= n;
        coord_of(&src, from_b ? k - n : k, l, w, cs);
        bool ok = true;
        switch (op->code) {
        case IR_RESHAPE:
          ok = flat_of(cd, rt->dims, rt->rank) == flat_of(cs, at->dims, at->rank);
          break;
        case IR_PERMUTE:
          for (int i = 0; i < rt->rank; i++) ok &= cd[i] == cs[perm[i]];
          break;
        case IR_JOIN:
          for (int i = 0; i < at->rank; i++) ok &= cd[i] == cs[i];
          ok &= cd[at->rank] == (from_b ? 1 : 0);
          break;
        case IR_SPLIT:
          for (int i = 0; i < rt->rank; i++) ok &= cd[i] == cs[i];
          ok &= !from_b && cs[rt->rank] == (int32_t)op->i[0];
          break;
        default:
          return "not a shape op";
        }
        if (!ok)
          return arena_printf(&fx->a, "warp %u lane %u register %u holds the wrong element", w, l, r);
      }
  return NULL;
}

static void put_tile(struct strbuf *sb, const int32_t *dims, int rank, const char *dt) {
  sb_puts(sb, "tile<");
  for (int d = 0; d < rank; d++) sb_printf(sb, "%dx", dims[d]);
  sb_printf(sb, "%s>", dt);
}

struct tcase {
  int rank;
  int32_t dims[IR_MAX_RANK];
};

/* Builds a kernel that loads (or, with dot, computes) a [dims] tile, applies `body` (ops
 * numbered from %10 on, the operand %5 and a second operand %6 of the same type), and stores
 * `store`; runs the layout pass; checks every shape op. */
static int run_case(struct fixture *fx, int warps, const char *dt, const struct tcase *c, bool dot, const char *body,
                    const char *store_val, const int32_t *sdims, int srank, const char *sdt) {
  struct strbuf sb;
  sb_init(&sb, &fx->a);
  int R = dot ? 2 : c->rank;
  sb_printf(&sb, "kernel @k(%%X: tensor<%s[", dt);
  for (int d = 0; d < R; d++) sb_printf(&sb, "%s%d", d ? ", " : "", c->dims[d]);
  sb_printf(&sb, "]>, %%Y: out tensor<%s[", sdt);
  for (int d = 0; d < srank; d++) sb_printf(&sb, "%s%d", d ? ", " : "", sdims[d]);
  sb_printf(&sb, "]>) warps=%d target=sm_80 {\ngrid:\n  %%0 = const 1 : i32\n  grid %%0, %%0, %%0\nbody:\n", warps);
  sb_puts(&sb, "  %1 = const 0 : i32\n");
  int mask = (1 << R) - 1, smask = (1 << srank) - 1;
  if (dot) { /* an f16 [M, 32] @ [32, N] product: an mma.sync accumulator */
    sb_printf(&sb, "  %%2 = load %%X[%%1, %%1] {mask=3} : tile<%dx32xf16>\n", c->dims[0]);
    sb_printf(&sb, "  %%3 = load %%X[%%1, %%1] {mask=3} : tile<32x%dxf16>\n", c->dims[1]);
    sb_printf(&sb, "  %%4 = const 0.0 : tile<%dx%dxf32>\n", c->dims[0], c->dims[1]);
    sb_printf(&sb, "  %%5 = dot %%2, %%3, %%4 : tile<%dx%dxf32>\n", c->dims[0], c->dims[1]);
    sb_printf(&sb, "  %%6 = mul %%5, %%5 : tile<%dx%dxf32>\n", c->dims[0], c->dims[1]);
  } else {
    sb_printf(&sb, "  %%5 = load %%X%s {mask=%d} : ", R == 1 ? "[%1]" : R == 2 ? "[%1, %1]" : R == 3 ? "[%1, %1, %1]" : "[%1, %1, %1, %1]", mask);
    put_tile(&sb, c->dims, c->rank, dt);
    sb_printf(&sb, "\n  %%6 = load %%X%s {mask=%d} : ", R == 1 ? "[%1]" : R == 2 ? "[%1, %1]" : R == 3 ? "[%1, %1, %1]" : "[%1, %1, %1, %1]", mask);
    put_tile(&sb, c->dims, c->rank, dt);
    sb_puts(&sb, "\n");
  }
  sb_puts(&sb, body);
  sb_printf(&sb, "  store %%Y%s, %s {mask=%d}\n}\n",
            srank == 1 ? "[%1]" : srank == 2 ? "[%1, %1]" : srank == 3 ? "[%1, %1, %1]" : "[%1, %1, %1, %1]", store_val, smask);
  const char *text = sb_str(&sb);
  struct ir_module m;
  sb_init(&fx->err, &fx->a);
  cr_assert(ir_parse("case.ir", text, strlen(text), &fx->a, &fx->s, &m, &fx->err), "%s\n%s", sb_str(&fx->err), text);
  struct ir_func *f = m.funcs.v[0];
  struct pass_options po = {.verify_each = true};
  cr_assert(pass_run_list("layout", f, &po, &fx->err), "%s\n%s", sb_str(&fx->err), text);
  int checked = 0;
  for (uint32_t i = 1; i < f->ops.n; i++) {
    const struct ir_op *op = &f->ops.v[i];
    if (!op->block || (op->code != IR_RESHAPE && op->code != IR_PERMUTE && op->code != IR_JOIN && op->code != IR_SPLIT))
      continue;
    const char *why = check_op(fx, f, op);
    if (why) {
      struct strbuf out;
      sb_init(&out, &fx->a);
      ir_print_func(&out, f, 0);
      cr_assert_fail("%s: op %u '%s': %s\n%s", sb_str(&fx->err), i, ir_ops[op->code].name, why, sb_str(&out));
    }
    checked++;
  }
  return checked;
}

static const char *tile_str(struct fixture *fx, const int32_t *dims, int rank, const char *dt) {
  struct strbuf sb;
  sb_init(&sb, &fx->a);
  put_tile(&sb, dims, rank, dt);
  return sb_str(&sb);
}

static int log2_of(int64_t x) {
  int b = 0;
  while (x > 1) x >>= 1, b++;
  return b;
}

/* A random shape of `bits` total bits and rank 1..4. */
static int random_shape(struct rng *rng, int bits, int32_t *dims) {
  int rank = 1 + (int)(rng_below(rng, 4));
  for (int d = 0; d < rank; d++) dims[d] = 1;
  for (int b = 0; b < bits; b++) dims[rng_below(rng, (uint64_t)rank)] *= 2;
  return rank;
}

Test(shape_ops, relabel_every_register_correctly) {
  static const struct tcase shapes[] = {
      {2, {64, 64}}, {2, {32, 8}}, {2, {1, 64}},  {2, {2, 2}},     {3, {4, 1, 8}}, {3, {16, 4, 2}},
      {1, {128}},    {2, {8, 2}},  {3, {2, 32, 2}}, {1, {2}},      {2, {128, 2}},  {4, {2, 4, 8, 2}},
      {2, {256, 32}}, {3, {1, 1, 1}}, {2, {16, 1}},
  };
  static const int warps[] = {1, 2, 4, 8, 16};
  static const char *dts[] = {"f32", "f16"};
  struct rng rng;
  rng_seed(&rng, rng_test_seed("shape_ops"));
  int total = 0;
  for (size_t wi = 0; wi < TL_ARRAY_LEN(warps); wi++)
    for (size_t di = 0; di < TL_ARRAY_LEN(dts); di++)
      for (size_t si = 0; si < TL_ARRAY_LEN(shapes); si++) {
        struct fixture fx;
        fx_init(&fx);
        const struct tcase *c = &shapes[si];
        const char *dt = dts[di];
        int64_t numel = 1;
        for (int d = 0; d < c->rank; d++) numel *= c->dims[d];
        const char *ty = tile_str(&fx, c->dims, c->rank, dt);
        /* reshape to random shapes, then back */
        for (int t = 0; t < 4; t++) {
          int32_t rd[IR_MAX_RANK];
          int rr = random_shape(&rng, log2_of(numel), rd);
          const char *body = arena_printf(&fx.a, "  %%10 = reshape %%5 : %s\n  %%11 = reshape %%10 : %s\n",
                                          tile_str(&fx, rd, rr, dt), ty);
          total += run_case(&fx, warps[wi], dt, c, false, body, "%11", c->dims, c->rank, dt);
        }
        /* every permutation (with rank >= 2) */
        int nperm = c->rank == 2 ? 2 : c->rank == 3 ? 6 : c->rank == 4 ? 24 : 0;
        for (int k = 1; k < nperm; k++) {
          int pool[IR_MAX_RANK] = {0, 1, 2, 3}, p[IR_MAX_RANK], np = c->rank, code = k, fact = nperm;
          int32_t pd[IR_MAX_RANK];
          for (int i = 0; i < c->rank; i++) {
            fact /= c->rank - i;
            int pick = code / fact;
            code %= fact;
            p[i] = pool[pick];
            memmove(pool + pick, pool + pick + 1, sizeof(int) * (size_t)(np - pick - 1));
            np--;
            pd[i] = c->dims[p[i]];
          }
          const char *body = arena_printf(&fx.a, "  %%10 = permute %%5 {perm=%lld} : %s\n",
                                          (long long)ir_perm_encode(p, c->rank), tile_str(&fx, pd, c->rank, dt));
          total += run_case(&fx, warps[wi], dt, c, false, body, "%10", pd, c->rank, dt);
        }
        /* join, then split the result back; split of a tile whose last dimension is 2 */
        if (c->rank <= 3) {
          int32_t jd[IR_MAX_RANK];
          memcpy(jd, c->dims, sizeof jd);
          jd[c->rank] = 2;
          const char *body = arena_printf(&fx.a,
                                          "  %%10 = join %%5, %%6 : %s\n  %%11 = split %%10 {half=1} : %s\n"
                                          "  %%12 = add %%11, %%5 : %s\n",
                                          tile_str(&fx, jd, c->rank + 1, dt), ty, ty);
          total += run_case(&fx, warps[wi], dt, c, false, body, "%12", c->dims, c->rank, dt);
          body = arena_printf(&fx.a, "  %%10 = join %%5, %%6 : %s\n", tile_str(&fx, jd, c->rank + 1, dt));
          total += run_case(&fx, warps[wi], dt, c, false, body, "%10", jd, c->rank + 1, dt);
        }
        if (c->rank >= 2 && c->dims[c->rank - 1] == 2) {
          for (int h = 0; h < 2; h++) {
            const char *body = arena_printf(&fx.a, "  %%10 = split %%5 {half=%d} : %s\n", h,
                                            tile_str(&fx, c->dims, c->rank - 1, dt));
            total += run_case(&fx, warps[wi], dt, c, false, body, "%10", c->dims, c->rank - 1, dt);
          }
        }
        /* split after a reshape to [..., 2]: the interleaved-pairs pattern */
        if (numel >= 4) {
          int32_t sd[2] = {(int32_t)(numel / 2), 2};
          const char *body = arena_printf(&fx.a, "  %%10 = reshape %%5 : %s\n  %%11 = split %%10 {half=0} : %s\n",
                                          tile_str(&fx, sd, 2, dt), tile_str(&fx, sd, 1, dt));
          total += run_case(&fx, warps[wi], dt, c, false, body, "%11", sd, 1, dt);
        }
        arena_free(&fx.a);
      }
  /* operands in the mma.sync accumulator layout */
  static const struct tcase mma[] = {{2, {64, 64}}, {2, {16, 32}}, {2, {128, 64}}, {2, {32, 16}}};
  for (size_t wi = 0; wi < 4; wi++)
    for (size_t si = 0; si < TL_ARRAY_LEN(mma); si++) {
      struct fixture fx;
      fx_init(&fx);
      const struct tcase *c = &mma[si];
      int32_t d3[3] = {c->dims[0], c->dims[1] / 2, 2}, j3[3] = {c->dims[0], c->dims[1], 2};
      int32_t t2[2] = {c->dims[1], c->dims[0]}, h2[2] = {c->dims[0], c->dims[1] / 2};
      const char *f32t = tile_str(&fx, c->dims, 2, "f32");
      const char *body = arena_printf(
          &fx.a,
          "  %%10 = reshape %%5 : %s\n  %%11 = split %%10 {half=1} : %s\n  %%12 = join %%5, %%6 : %s\n"
          "  %%13 = split %%12 {half=0} : %s\n  %%14 = permute %%13 {perm=10} : %s\n  %%15 = permute %%14 {perm=10} : %s\n"
          "  %%16 = add %%15, %%5 : %s\n",
          tile_str(&fx, d3, 3, "f32"), tile_str(&fx, h2, 2, "f32"), tile_str(&fx, j3, 3, "f32"), f32t,
          tile_str(&fx, t2, 2, "f32"), f32t, f32t);
      total += run_case(&fx, warps[wi], "f16", c, true, body, "%16", c->dims, 2, "f32");
      body = arena_printf(&fx.a, "  %%10 = reshape %%5 : %s\n  %%11 = split %%10 {half=1} : %s\n",
                          tile_str(&fx, d3, 3, "f32"), tile_str(&fx, h2, 2, "f32"));
      total += run_case(&fx, warps[wi], "f16", c, true, body, "%11", h2, 2, "f32");
      arena_free(&fx.a);
    }
  cr_assert(total > 1000, "only %d shape ops checked", total);
}
