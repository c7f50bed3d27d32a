/* test_target.c - the target table and the schedule options (compiler/target). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "target.h"
#include "testfiles.h"
#include "tile.h"

Test(target, table_rows_and_features) {
  const struct tl_target *a = tl_target_find("sm_80"), *h = tl_target_find("sm_90a"), *p = tl_target_find("sm_90");
  cr_assert(a && h && p);
  cr_assert_eq(a->sm, 80);
  cr_assert(tl_has(a, TL_FEAT_MMA_SYNC));
  cr_assert(!tl_has(a, TL_FEAT_TMA) && !tl_has(a, TL_FEAT_WGMMA));
  cr_assert(tl_has(p, TL_FEAT_TMA) && !tl_has(p, TL_FEAT_WGMMA) && !tl_has(p, TL_FEAT_SETMAXNREG));
  cr_assert(tl_has(h, TL_FEAT_WGMMA | TL_FEAT_SETMAXNREG | TL_FEAT_TMA));
  cr_assert_eq(h->smem_optin, 232448u);
  cr_assert_str_eq(h->ptx_features, "+ptx80");
  cr_assert(h->arch_specific && !p->arch_specific);
  cr_assert_null(tl_target_find("sm_75"));
  cr_assert_null(tl_target_find("sm_90a "));
  cr_assert_null(tl_target_find(NULL));
  cr_assert(!tl_has(NULL, TL_FEAT_MMA_SYNC));
}

Test(target, for_compute_capability) {
  cr_assert_str_eq(tl_target_for_cc(9, 0)->name, "sm_90a");
  cr_assert_str_eq(tl_target_for_cc(10, 0)->name, "sm_90"); /* newer GPUs run sm_90 PTX */
  cr_assert_str_eq(tl_target_for_cc(8, 9)->name, "sm_89");
  cr_assert_str_eq(tl_target_for_cc(8, 6)->name, "sm_86");
  cr_assert_str_eq(tl_target_for_cc(8, 0)->name, "sm_80");
}

Test(target, schedule_parse_and_format) {
  struct tl_schedule s;
  char err[256], buf[128];
  cr_assert(tl_schedule_parse(NULL, &s, err, sizeof err));
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(tl_sched_get(s.ws, 1), 1);
  cr_assert_eq(tl_sched_get(s.gather, 1), 1);
  cr_assert_eq(tl_sched_get(s.prefetch, 1), 1);
  cr_assert(tl_schedule_parse("prefetch=0", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.prefetch, 0);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "prefetch=0");
  /* rowfill: the chunks row-cache's fill loop keeps in flight, 1..16 */
  cr_assert(tl_schedule_parse("rowfill=8", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.rowfill, 8);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "rowfill=8");
  cr_assert(!tl_schedule_parse("rowfill=17", &s, err, sizeof err));
  /* shift takes 2 too (shifted loads reading only their words) */
  cr_assert(tl_schedule_parse("shift=2", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.shift, 2);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "shift=2");
  cr_assert(!tl_schedule_parse("shift=3", &s, err, sizeof err));
  cr_assert(strstr(err, "0, 1 or 2") != NULL, "%s", err);
  /* rowslots: the most chunks row-cache keeps, 1..127 */
  cr_assert(tl_schedule_parse("rowslots=12,rowfill=4", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.rowslots, 12);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "rowfill=4,rowslots=12");
  cr_assert(!tl_schedule_parse("rowslots=0", &s, err, sizeof err));
  cr_assert(strstr(err, "1..127") != NULL, "%s", err);
  cr_assert(!tl_schedule_parse("rowslots=128", &s, err, sizeof err));
  /* prefetch is a distance in iterations, 0..4 */
  cr_assert(tl_schedule_parse("prefetch=3", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.prefetch, 3);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "prefetch=3");
  cr_assert(!tl_schedule_parse("prefetch=5", &s, err, sizeof err));
  cr_assert(strstr(err, "0..4") != NULL, "%s", err);
  cr_assert_eq(tl_sched_get(s.handoff, 1), 1);
  cr_assert(tl_schedule_parse("handoff=0", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.handoff, 0);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "handoff=0");
  cr_assert_eq(tl_sched_get(s.elide, 1), 1);
  cr_assert(tl_schedule_parse("elide=0", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.elide, 0);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "elide=0");
  cr_assert(tl_schedule_parse("occupancy=4,pdl=0", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.occupancy, 4);
  cr_assert_eq(s.pdl, 0);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "pdl=0,occupancy=4");
  cr_assert(tl_schedule_parse("ws=0,persistent=on,gather=0,regs=24/240", &s, err, sizeof err), "%s", err);
  cr_assert_eq(s.ws, 0);
  cr_assert_eq(s.persistent, 1);
  cr_assert_eq(s.gather, 0);
  cr_assert_eq(s.producer_regs, 24);
  cr_assert_eq(s.consumer_regs, 240);
  tl_schedule_format(&s, buf, sizeof buf);
  cr_assert_str_eq(buf, "ws=0,persistent=1,gather=0,regs=24/240");
  /* the canonical text parses back to the same options */
  struct tl_schedule t;
  cr_assert(tl_schedule_parse(buf, &t, err, sizeof err));
  cr_assert_eq(memcmp(&s, &t, sizeof s), 0);
}

Test(target, schedule_errors) {
  struct tl_schedule s;
  char err[256];
  cr_assert(!tl_schedule_parse("warp=0", &s, err, sizeof err));
  cr_assert(strstr(err, "unknown option 'warp'"), "%s", err);
  cr_assert(!tl_schedule_parse("ws=2", &s, err, sizeof err));
  cr_assert(strstr(err, "bad value '2' for 'ws'"), "%s", err);
  cr_assert(!tl_schedule_parse("regs=20/240", &s, err, sizeof err));
  cr_assert(strstr(err, "multiples of 8"), "%s", err);
  cr_assert(!tl_schedule_parse("occupancy=0", &s, err, sizeof err));
  cr_assert(strstr(err, "expected 1..32"), "%s", err);
  cr_assert(!tl_schedule_parse("occupancy=4x", &s, err, sizeof err));
  cr_assert(!tl_schedule_parse("ws", &s, err, sizeof err));
  cr_assert(strstr(err, "expected key=value"), "%s", err);
  cr_assert(!tl_schedule_parse("ws=0,,tma=0", &s, err, sizeof err));
}

/* Line information: every lib kernel's PTX maps its instructions to .tile lines (.file and
 * .loc directives naming the source file, lines within it), with no `.target ..., debug`
 * (that would make ptxas compile without optimization). */
Test(line_info, ptx_has_loc_lines_of_the_tile_source) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  const char *src = "kernel k(X: f32[N], Y: out f32[N]) grid(cdiv(N, 64)) {\n"
                    "  let i = program_id(0) * 64;\n"
                    "  let x = X[i : +64];\n"
                    "  Y[i : +64] = exp(x) * 2.0;\n"
                    "}\n";
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int a = 0; a < 2; a++) {
    char *ptx = NULL;
    cr_assert_eq(test_emit_ptx(ctx, "dir/k.tile", src, archs[a], 0, &ptx), TILE_OK, "%s", tile_errmsg(ctx));
    cr_expect(strstr(ptx, ".file\t1 \"dir/k.tile\""), "%s: no .file directive for the source", archs[a]);
    int lines[8] = {0};
    for (const char *p = ptx; (p = strstr(p, ".loc\t1 ")); p++) {
      int line = atoi(p + 7);
      if (line >= 0 && line < 8) lines[line]++;
    }
    cr_expect(lines[3] > 0 && lines[4] > 0, "%s: no .loc for the load (line 3) or the store (line 4)", archs[a]);
    const char *target = strstr(ptx, ".target");
    cr_assert(target);
    cr_expect(strncmp(target + strcspn(target, ",\n"), ", debug", 7) != 0, "%s: a debug target", archs[a]);
    tile_free(ptx);
  }
  tile_context_destroy(ctx);
}

/* The epilogue's global stores carry the store statement's line: positioning the builder
 * before an earlier instruction (hoisted thread coordinates) took over that instruction's
 * line, the loop's, for everything generated after it. */
Test(line_info, epilogue_stores_carry_their_own_line) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  const char *src = "kernel mm(A: f16[M, K], B: f16[K, N], C: out f16[M, N]) grid(cdiv(M, 128), cdiv(N, 128)) {\n"
                    "  let m0 = program_id(0) * 128;\n"
                    "  let n0 = program_id(1) * 128;\n"
                    "  var acc = zeros([128, 128], f32);\n"
                    "  for k in range(0, K, 32, stages=3) {\n"
                    "    acc += A[m0 : +128, k : +32] @ B[k : +32, n0 : +128];\n"
                    "  }\n"
                    "  C[m0 : +128, n0 : +128] = f16(acc);\n"
                    "}\n";
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int a = 0; a < 2; a++) {
    char *ptx = NULL;
    cr_assert_eq(test_emit_ptx(ctx, "mm.tile", src, archs[a], 0, &ptx), TILE_OK, "%s", tile_errmsg(ctx));
    int line = 0, stores = 0, wrong = 0;
    for (const char *p = ptx; *p;) {
      const char *eol = strchr(p, '\n');
      size_t n = eol ? (size_t)(eol - p) : strlen(p);
      const char *loc = strstr(p, ".loc\t1 ");
      if (loc && loc < p + n) line = atoi(loc + 7);
      const char *st = strstr(p, "st.global");
      if (st && st < p + n) {
        stores++;
        wrong += line != 8;
      }
      p += n + (eol ? 1 : 0);
    }
    cr_expect(stores > 0, "%s: no global stores", archs[a]);
    cr_expect_eq(wrong, 0, "%s: %d of %d global stores not on line 8", archs[a], wrong, stores);
    tile_free(ptx);
  }
  tile_context_destroy(ctx);
}

/* Buffers beyond the target's shared memory: refused after the GPU passes and before LLVM
 * (TILE_UNSUPPORTED, code SMEM_LIMIT, at the pipelined loop), as the launch refuses such a
 * kernel; the same kernel with fewer stages, or for a target with more shared memory, emits
 * PTX. 16 stages of a 64x64 and a 64x128 f16 tile: 16 x 24 KiB = 384 KiB. */
Test(target, buffers_beyond_shared_memory_are_refused_before_codegen) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  char src[1024];
  static const char *const head = "kernel mm(A: f16[M, K], B: f16[K, N], C: out f16[M, N]) grid(cdiv(M, 64), cdiv(N, 128)) {\n"
                                  "  let m0 = program_id(0) * 64;\n"
                                  "  let n0 = program_id(1) * 128;\n"
                                  "  var acc = zeros([64, 128], f32);\n"
                                  "  for k in range(0, K, 64, stages=",
                          *const tail = ") {\n"
                                  "    acc += A[m0 : +64, k : +64] @ B[k : +64, n0 : +128];\n"
                                  "  }\n"
                                  "  C[m0 : +64, n0 : +128] = f16(acc);\n"
                                  "}\n";
  const char *archs[] = {"sm_80", "sm_86", "sm_90a"};
  for (int a = 0; a < 3; a++) {
    char *ptx = NULL;
    snprintf(src, sizeof src, "%s%d%s", head, 16, tail);
    cr_expect_eq(test_emit_ptx(ctx, "mm.tile", src, archs[a], 0, &ptx), TILE_UNSUPPORTED, "%s: 16 stages", archs[a]);
    cr_expect_null(ptx);
    const char *msg = tile_errmsg(ctx);
    cr_expect(strstr(msg, "mm.tile:5:3: error: kernel 'mm' needs ") && strstr(msg, "(this loop keeps 16 stages)") &&
                  strstr(msg, archs[a]),
              "%s", msg);
    cr_expect_str_eq(tile_errcode(ctx), "SMEM_LIMIT");
    snprintf(src, sizeof src, "%s%d%s", head, 3, tail); /* 72 KiB */
    cr_expect_eq(test_emit_ptx(ctx, "mm.tile", src, archs[a], 0, &ptx), TILE_OK, "%s: %s", archs[a], tile_errmsg(ctx));
    tile_free(ptx);
  }
  tile_context_destroy(ctx);
}
