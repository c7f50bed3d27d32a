/* test_spec.c - GPU specializations without a GPU (runtime/gpu.c: spec_facts, uniform_ifs):
 * a top-level `if` whose condition the launch decides (shape parameters and constants only)
 * is folded into the specialization, so the PTX holds only the branch taken; the two
 * outcomes are two specializations with different keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "rt.h"
#include "testfiles.h"

static char mem[64]; /* nothing is launched */

static unsigned count(const char *text, const char *what) {
  unsigned n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* Whether two specializations have the same key (of the same length). */
static bool same_key(const struct rt_artifact *a, const struct rt_artifact *b) {
  return a->facts_len == b->facts_len && memcmp(a->facts, b->facts, a->facts_len) == 0;
}

/* The target the kernels below are compiled and built for (a test may switch it). */
static const char *arch = "sm_90a";

/* The specialization of k for arguments a[0..n) (nothing is launched). */
static struct rt_artifact build(tile_context *ctx, tile_kernel *k, const tile_arg *a, unsigned n) {
  TEST_ARENA(ar);
  struct rt_bound b;
  cr_assert_eq(rt_bind_args(ctx, k, a, n, &ar, &b), TILE_OK, "%s", tile_errmsg(ctx));
  struct rt_gpu_target t = {.smem_optin = 232448};
  snprintf(t.arch, sizeof t.arch, "%s", arch);
  struct rt_artifact art;
  cr_assert_eq(rt_gpu_build(k, &b, &t, &art), TILE_OK, "%s", tile_errmsg(ctx));
  arena_free(&ar);
  return art;
}

/* The PTX of softmax's specialization for rows of n elements (BN = 1024 on sm_90a). */
static struct rt_artifact build_softmax(tile_context *ctx, tile_kernel *k, int64_t n) {
  tile_arg a[2] = {tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){4, n}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){4, n}, NULL)};
  return build(ctx, k, a, 2);
}

/* lib/FILE's kernel compiled for sm_90a at the given defines, in a new context (*ctx). */
static tile_kernel *compile_sched(tile_context **ctx, const char *file, const char *kernel, const tile_define *d,
                                  unsigned nd, const char *schedule) {
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, ctx), TILE_OK);
  char path[1024];
  test_lib_path(path, sizeof path, file);
  tile_compile_options co = {.kernel = kernel, .defines = d, .ndefines = nd, .device = TILE_DEVICE_CUDA,
                             .arch = arch, .flags = TILE_FIXED_CONFIG, .schedule = schedule};
  tile_kernel *k = NULL;
  cr_assert_eq(tile_compile_file(*ctx, path, &co, &k), TILE_OK, "%s", tile_errmsg(*ctx));
  return k;
}

static tile_kernel *compile_sm90a(tile_context **ctx, const char *file, const char *kernel, const tile_define *d,
                                  unsigned nd) {
  return compile_sched(ctx, file, kernel, d, nd, NULL);
}

/* A kernel without products on sm_90a takes its warp index as tid / 32, not read back from
 * lane 0 as wgmma kernels do (swizzled_register_stores_go_in_pairs): LLVM then folds each
 * element's offset into one base address (softmax's looped form: 45 registers, not 88, and
 * 45% of the copy at 4096 x 50257 instead of 34%: PERF.md 96). A loop that counts down
 * (row-reverse) folds them too: its accesses index by the loop's 64-bit counter (cg_mem.c
 * index64); through a sign extension of its 32-bit value, 14 offsets. */
Test(spec, kernels_without_products_take_the_warp_index_directly) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "1024"}, {"NW", "4"}};
  /* (rowalign=0: the element form, whose per-element offsets this is about; rowcache=0:
   * the loops as written, without the row cache's fill loop) */
  tile_kernel *k = compile_sched(&ctx, "softmax.tile", "softmax", d, 3, "rowalign=0,rowcache=0");
  struct rt_artifact two = build_softmax(ctx, k, 50257);
  cr_expect(count(two.ptx, "shfl.sync.idx") == 0, "softmax reads its warp index back through a shuffle");
  cr_expect(count(two.ptx, "cvt.u64.u32") <= 5, "%u 64-bit element offsets (one base address expected)",
            count(two.ptx, "cvt.u64.u32"));
  rt_artifact_free(&two);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  /* the output loop walked from its end (row-reverse, PERF.md 102) takes one more: its
   * start; without it, 4 */
  k = compile_sched(&ctx, "softmax.tile", "softmax", d, 3, "rowalign=0,rowrev=0,rowcache=0");
  two = build_softmax(ctx, k, 50257);
  cr_expect(count(two.ptx, "cvt.u64.u32") <= 4, "%u 64-bit element offsets with rowrev=0", count(two.ptx, "cvt.u64.u32"));
  rt_artifact_free(&two);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A load whose 16-byte vectors may straddle the row's edge branches into a vector path and
 * an element path, joined as the loaded words (PERF.md 113): the vector path ends at its
 * ld.global.v4 (the branch to the join follows at once), and the halves are split off after
 * the join where they are used. Split before the join (8 movs per vector), every thread
 * waited for its load at the branch. Softmax's looped form on vocabulary rows (50257 f16,
 * BN = 4096 on 16 warps, without the row cache: both loops load from the tensor). */
Test(spec, straddling_loads_join_as_words) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "4096"}, {"NW", "16"}};
  tile_kernel *k = compile_sched(&ctx, "softmax.tile", "softmax", d, 3, "rowcache=0");
  struct rt_artifact a = build_softmax(ctx, k, 50257);
  unsigned vec = 0, joined = 0;
  for (const char *p = strstr(a.ptx, "ld.global.v4.b32"); p; p = strstr(p + 1, "ld.global.v4.b32")) {
    vec++;
    /* the next instruction after the inline asm's closing brace and comment */
    const char *q = strchr(p, '}');
    q = q ? strchr(q + 1, '}') : NULL; /* (the asm block's own brace) */
    while (q && (*q == '}' || *q == '\n' || *q == '\t' || *q == ' ')) q++;
    while (q && strncmp(q, "//", 2) == 0) {
      q = strchr(q, '\n');
      while (q && (*q == '\n' || *q == '\t' || *q == ' ')) q++;
    }
    if (q && (strncmp(q, "bra", 3) == 0 || strncmp(q, "$L", 2) == 0)) joined++;
  }
  cr_expect(vec >= 2 && joined == vec, "%u of %u vector loads go straight to the join", joined, vec);
  rt_artifact_free(&a);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* Vector stores of f16 rounded from f32 round each pair into one register
 * (cvt.rn.f16x2.f32): softmax's looped form (N = 5120: the launch folds the one-tile
 * branch away) stores 8 elements per thread per chunk in one 16-byte store, 4 pairs; before,
 * 8 cvt.rn.f16.f32 and the packing by shifts (the output loop 91 -> 71 PTX instructions). */
Test(spec, rounded_pairs_are_stored_packed) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "1024"}, {"NW", "4"}};
  tile_kernel *k = compile_sm90a(&ctx, "softmax.tile", "softmax", d, 3);
  struct rt_artifact two = build_softmax(ctx, k, 5120); /* (rows on 16 bytes: no element path) */
  cr_expect(count(two.ptx, "cvt.rn.f16x2.f32") >= 4, "%u packed roundings", count(two.ptx, "cvt.rn.f16x2.f32"));
  cr_expect(count(two.ptx, "cvt.rn.f16.f32") == 0, "%u single roundings", count(two.ptx, "cvt.rn.f16.f32"));
  rt_artifact_free(&two);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A vocabulary row in one tile (softmax BN = 65536, 16 warps: 128 elements per thread) runs
 * as a cluster of 8 CTAs of 16 elements per thread each (cluster-rows, PERF.md 103): the
 * PTX asks for clusters of 8, takes the program index from %clusterid and the CTA's share
 * from %cluster_ctarank, and combines each of the two reductions through distributed
 * shared memory between cluster barriers; the launcher multiplies the grid by 8. The rows
 * (50257 f16) lie off 16 bytes: row-align's one-tile form shifts the tile (PERF.md 105).
 * cluster=4 asks for 4 CTAs (32 elements per thread); with cluster=1, none. */

Test(spec, vocabulary_rows_split_across_a_cluster) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "65536"}, {"NW", "16"}};
  tile_kernel *k = compile_sm90a(&ctx, "softmax.tile", "softmax", d, 3);
  struct rt_artifact row = build_softmax(ctx, k, 50257);
  cr_expect(strstr(row.ptx, ".reqnctapercluster 8, 1, 1") != NULL, "no cluster of 8");
  cr_expect(row.code.cluster == 8, "the launcher's cluster size is %u", (unsigned)row.code.cluster);
  cr_expect(count(row.ptx, "%clusterid.x") >= 1 && count(row.ptx, "%cluster_ctarank") >= 1,
            "program index or rank not from the cluster registers");
  /* two copies of the row's code: shifted to the 16-byte boundary in front of the row
   * (row-align's one-tile form, 16-byte vectors) and as written (for rows that then no
   * longer fit the tile) */
  cr_expect(count(row.ptx, "mapa.shared::cluster") == 32 && count(row.ptx, "st.shared::cluster") == 32,
            "%u remote slots written (2 reductions x 8 CTAs x 2 branches expected)", count(row.ptx, "st.shared::cluster"));
  cr_expect(count(row.ptx, "barrier.cluster.arrive") == 8 && count(row.ptx, "barrier.cluster.wait") == 8,
            "%u cluster barriers", count(row.ptx, "barrier.cluster.arrive"));
  cr_expect(count(row.ptx, "ld.global.v4") >= 1 && count(row.ptx, "st.global.v4") >= 1,
            "no 16-byte accesses in the shifted branch");
  cr_expect(count(row.ptx, "%ctaid.x") == 0, "the CTA index used as the program index");
  rt_artifact_free(&row);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  k = compile_sched(&ctx, "softmax.tile", "softmax", d, 3, "cluster=4");
  row = build_softmax(ctx, k, 50257);
  cr_expect(strstr(row.ptx, ".reqnctapercluster 4, 1, 1") != NULL && row.code.cluster == 4, "cluster=4: no cluster of 4");
  rt_artifact_free(&row);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  k = compile_sched(&ctx, "softmax.tile", "softmax", d, 3, "cluster=1");
  row = build_softmax(ctx, k, 50257);
  cr_expect(strstr(row.ptx, "cluster") == NULL && row.code.cluster <= 1, "cluster=1: a cluster");
  rt_artifact_free(&row);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(spec, launch_decided_branches_are_folded) {
  tile_context *ctx = NULL;
  tile_define d[2] = {{"T", "f16"}, {"BN", "1024"}};
  tile_kernel *k = compile_sm90a(&ctx, "softmax.tile", "softmax", d, 2);
  /* N <= BN: one pass (one load and one store per thread); N > BN: two passes over chunks */
  struct rt_artifact one = build_softmax(ctx, k, 1000), two = build_softmax(ctx, k, 5000),
                     one_b = build_softmax(ctx, k, 1016); /* (1000 and 1016: both not multiples of 16) */
  cr_expect(one.facts_len == two.facts_len && !same_key(&one, &two),
            "the two outcomes share a specialization key");
  cr_expect(same_key(&one, &one_b),
            "N = 1000 and N = 1016 (the same outcome) differ in key");
  unsigned l1 = count(one.ptx, "ld.global"), l2 = count(two.ptx, "ld.global");
  unsigned s1 = count(one.ptx, "st.global"), s2 = count(two.ptx, "st.global");
  cr_expect(l1 >= 1 && l2 > l1, "loads: one pass %u, two passes %u", l1, l2);
  cr_expect(s1 >= 1 && s2 >= 1, "stores: one pass %u, two passes %u", s1, s2);
  /* the looped form's loop is gone from the one-pass code, and vice versa its one-pass body */
  cr_expect(count(one.ptx, "bra") < count(two.ptx, "bra"), "branches: %u vs %u", count(one.ptx, "bra"),
            count(two.ptx, "bra"));
  rt_artifact_free(&one);
  rt_artifact_free(&two);
  rt_artifact_free(&one_b);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* Rows whose stride is a 16-byte multiple but whose length is not a multiple of 16
 * elements (50264 f16: 8 x 6283) move 16 bytes per access: only the thread holding the
 * vector that straddles the row's end goes one element at a time (cg_mem.c: a branch per
 * access). Before, the whole row went element by element in a layout built for vectors, 8
 * times the L1 and L2 requests (PERF.md 68: 22% of the copy bandwidth against 45% at 50257).
 * An odd length (50257: rows off 16 bytes) has vector accesses only because row-align starts
 * the loops at the 16-byte boundary in front of each row; without it (rowalign=0), none. */
Test(spec, vectors_straddling_the_edge) {
  tile_context *ctx = NULL;
  tile_define d[2] = {{"T", "f16"}, {"BN", "1024"}};
  tile_kernel *k = compile_sm90a(&ctx, "softmax.tile", "softmax", d, 2);
  struct rt_artifact even = build_softmax(ctx, k, 50264), odd = build_softmax(ctx, k, 50257),
                     one = build_softmax(ctx, k, 1000);
  cr_expect(count(even.ptx, "ld.global.v4") >= 2 && count(even.ptx, "st.global.v4") >= 1,
            "50264: 16-byte loads %u, stores %u", count(even.ptx, "ld.global.v4"), count(even.ptx, "st.global.v4"));
  cr_expect(count(even.ptx, "ld.global.b16") >= 8, "50264: no element loads for the edge (%u)",
            count(even.ptx, "ld.global.b16"));
  cr_expect(count(one.ptx, "ld.global.v4") >= 1 && count(one.ptx, "st.global.v4") >= 1,
            "1000 (one pass): 16-byte loads %u, stores %u", count(one.ptx, "ld.global.v4"),
            count(one.ptx, "st.global.v4"));
  cr_expect(count(odd.ptx, "ld.global.v4") >= 2 && count(odd.ptx, "st.global.v4") >= 1,
            "50257 (row-align): 16-byte loads %u, stores %u", count(odd.ptx, "ld.global.v4"),
            count(odd.ptx, "st.global.v4"));
  tile_context *ctx0 = NULL;
  tile_kernel *k0 = compile_sched(&ctx0, "softmax.tile", "softmax", d, 2, "rowalign=0");
  struct rt_artifact odd0 = build_softmax(ctx0, k0, 50257);
  cr_expect(count(odd0.ptx, "ld.global.v") == 0 && count(odd0.ptx, "st.global.v") == 0,
            "50257 with rowalign=0: vector accesses on rows off 16 bytes");
  rt_artifact_free(&odd0);
  tile_kernel_release(k0);
  tile_context_destroy(ctx0);
  rt_artifact_free(&even);
  rt_artifact_free(&odd);
  rt_artifact_free(&one);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A tile known at compile time to lie inside its tensor (fixed sizes, constant starts) is
 * loaded and stored without predicates (cg_mem.c: static_inside); a tile over a size known
 * only at launch keeps them. */
Test(spec, tiles_known_inside_have_no_predicates) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  static const char src[] =
      "kernel fixed(X: f32[64, 64], Y: out f32[64, 64]) grid(1) warps(4) {\n"
      "  Y[0 : +64, 0 : +64] = X[0 : +64, 0 : +64] * 2.0;\n}\n"
      "kernel ragged(X: f32[M, 64], Y: out f32[M, 64]) grid(1) warps(4) {\n"
      "  Y[0 : +64, 0 : +64] = X[0 : +64, 0 : +64] * 2.0;\n}\n";
  tile_kernel *k[2] = {NULL, NULL};
  const char *names[2] = {"fixed", "ragged"};
  unsigned preds[2];
  for (int i = 0; i < 2; i++) {
    tile_compile_options co = {.kernel = names[i], .device = TILE_DEVICE_CUDA, .arch = "sm_90a", .flags = TILE_FIXED_CONFIG};
    cr_assert_eq(tile_compile_string(ctx, "fixed.tile", src, sizeof src - 1, &co, &k[i]), TILE_OK, "%s", tile_errmsg(ctx));
    int64_t rows = i ? 50 : 64;
    tile_arg a[2] = {tile_arg_tensor(mem, TILE_F32, 2, (int64_t[]){rows, 64}, NULL),
                     tile_arg_tensor(mem, TILE_F32, 2, (int64_t[]){rows, 64}, NULL)};
    struct rt_artifact art = build(ctx, k[i], a, 2);
    cr_expect(count(art.ptx, "ld.global.v4") >= 1 && count(art.ptx, "st.global.v4") >= 1, "%s: no 16-byte accesses",
              names[i]);
    preds[i] = count(art.ptx, "@p ld.global") + count(art.ptx, "@p st.global");
    rt_artifact_free(&art);
    tile_kernel_release(k[i]);
  }
  cr_expect(preds[0] == 0, "fixed sizes: %u predicated accesses", preds[0]);
  cr_expect(preds[1] > 0, "rows known at launch: no predicated access (the test no longer sees them)");
  tile_context_destroy(ctx);
}

/* The occupancy pass on a launch's specialization: layernorm over rows that fit one tile
 * (the loop form folded away) asks ptxas for four 4-warp programs per multiprocessor; with
 * 16384-wide tiles (128 registers per thread) kept in one CTA (cluster=1) it asks for
 * nothing (PERF.md 73). By default such a row is split across a cluster of 8 CTAs (16
 * elements per thread each; cluster-rows, PERF.md 103), which the cap then applies to. */
static struct rt_artifact build_layernorm(tile_context *ctx, tile_kernel *k, int64_t n) {
  tile_arg a[7] = {tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){4, n}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 1, (int64_t[]){n}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 1, (int64_t[]){n}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){4, n}, NULL),
                   tile_arg_tensor(mem, TILE_F32, 1, (int64_t[]){4}, NULL),
                   tile_arg_tensor(mem, TILE_F32, 1, (int64_t[]){4}, NULL),
                   tile_arg_float(1e-5)};
  return build(ctx, k, a, 7);
}

Test(spec, memory_bound_rows_ask_for_four_programs) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "8192"}, {"NW", "4"}};
  tile_kernel *k = compile_sm90a(&ctx, "layernorm.tile", "layernorm", d, 3);
  struct rt_artifact row = build_layernorm(ctx, k, 8192);
  cr_expect(strstr(row.ptx, ".minnctapersm 4") != NULL, "8192-wide rows: no .minnctapersm 4 in the PTX");
  rt_artifact_free(&row);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  d[1].value = "16384";
  k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, "cluster=1");
  struct rt_artifact wide = build_layernorm(ctx, k, 16000);
  cr_expect(strstr(wide.ptx, ".minnctapersm") == NULL, "16384-wide tiles: a register cap");
  cr_expect(strstr(wide.ptx, ".reqnctapercluster") == NULL, "cluster=1: a cluster");
  rt_artifact_free(&wide);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  k = compile_sm90a(&ctx, "layernorm.tile", "layernorm", d, 3);
  struct rt_artifact split = build_layernorm(ctx, k, 16000);
  cr_expect(strstr(split.ptx, ".reqnctapercluster 8, 1, 1") != NULL, "16384-wide tiles of 4 warps: no cluster of 8");
  cr_expect(strstr(split.ptx, ".minnctapersm") != NULL, "a cluster's share of the row: no register cap");
  rt_artifact_free(&split);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* attention_bwd_fused at head dim 128 (bf16), B=1, H=HKV=2, N=NK=n; LSE with the given strides
 * (NULL: contiguous). */
static struct rt_artifact build_bwd_fused_d(tile_context *ctx, tile_kernel *k, int64_t n, int64_t D,
                                           const int64_t *lse_strides) {
  const int64_t B = 1, H = 2;
  tile_arg a[10] = {tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_F32, 3, (int64_t[]){B, H, n}, lse_strides),
                    tile_arg_tensor(mem, TILE_F32, 3, (int64_t[]){B, H, n}, NULL),
                    tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_BF16, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_tensor(mem, TILE_F32, 4, (int64_t[]){B, H, n, D}, NULL),
                    tile_arg_float(0.088)};
  return build(ctx, k, a, 10);
}

static struct rt_artifact build_bwd_fused(tile_context *ctx, tile_kernel *k, int64_t n, const int64_t *lse_strides) {
  return build_bwd_fused_d(ctx, k, n, 128, lse_strides);
}

/* Register tiles written to swizzled shared memory (PERF.md 79): the fused backward at head
 * dim 128 stores dS (bf16) as pairs in 32-bit accesses and dQ's partial sums (f32) as pairs
 * in 64-bit ones, never one 16-bit element at a time, and a wgmma kernel reads its warp
 * index back from lane 0 (shfl.sync.idx) so that warp-derived descriptors are uniform. */
Test(spec, swizzled_register_stores_go_in_pairs) {
  tile_context *ctx = NULL;
  tile_define d[2] = {{"T", "bf16"}, {"D", "128"}};
  tile_kernel *k = compile_sm90a(&ctx, "attention_bwd.tile", "attention_bwd_fused", d, 2);
  struct rt_artifact art = build_bwd_fused(ctx, k, 256, NULL);
  cr_expect(count(art.ptx, "st.shared.b16") == 0, "16-bit shared stores: %u", count(art.ptx, "st.shared.b16"));
  cr_expect(count(art.ptx, "st.shared.v2.b32") >= 16, "dQ's pairs: %u 64-bit shared stores",
            count(art.ptx, "st.shared.v2.b32"));
  cr_expect(count(art.ptx, "shfl.sync.idx") >= 1, "no warp index read back from lane 0");
  rt_artifact_free(&art);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* Rows of a tensor whose strides are not 16-byte multiples still join a ring with flatrows=1
 * (PERF.md 81; off by default until the H200's illegal instruction is understood):
 * at N = 77 the fused backward's LSE and delta ([B, H, N] f32) are copied by the producer
 * through flat (1-d) tensor maps, none loaded by the consumers themselves; an LSE whose
 * elements lie 2^31 or more past its base (no span31 fact) stays a consumer load. */
Test(spec, unaligned_rows_join_the_ring_through_flat_maps) {
  tile_context *ctx = NULL;
  tile_define d[2] = {{"T", "bf16"}, {"D", "128"}};
  tile_kernel *k = compile_sched(&ctx, "attention_bwd.tile", "attention_bwd_fused", d, 2, "flatrows=1");
  struct rt_artifact flat = build_bwd_fused(ctx, k, 77, NULL);
  cr_expect(count(flat.ptx, "cp.async.bulk.tensor.1d") == 2, "LSE and delta: %u 1-d tensor copies",
            count(flat.ptx, "cp.async.bulk.tensor.1d"));
  cr_expect(count(flat.ptx, "ld.global") == 0, "%u consumer loads", count(flat.ptx, "ld.global"));
  unsigned nflat = 0;
  for (unsigned i = 0; i < flat.code.ntmaps; i++) nflat += flat.code.tmaps[i].flat;
  cr_expect(nflat == 2, "%u flat maps", nflat);
  struct rt_artifact far = build_bwd_fused(ctx, k, 77, (int64_t[]){1ll << 32, (1ll << 31) + 1, 1});
  cr_expect(!same_key(&flat, &far), "span31 is not in the specialization key");
  cr_expect(count(far.ptx, "cp.async.bulk.tensor.1d") == 1, "delta only: %u 1-d tensor copies",
            count(far.ptx, "cp.async.bulk.tensor.1d"));
  cr_expect(count(far.ptx, "ld.global") > 0, "LSE past 2^31 elements copied flat");
  rt_artifact_free(&flat);
  rt_artifact_free(&far);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A division by a shape size specializes on whether that size is a power of two: paged
 * decode attention's `pos / PAGE` and `pos % PAGE` (the page and the slot of each key)
 * compile to shifts and masks for 16-token pages and stay divisions for 12-token ones; the
 * two are two specializations. */
static struct rt_artifact build_decode(tile_context *ctx, tile_kernel *k, int64_t page) {
  const int64_t B = 2, H = 8, HKV = 2, D = 128, NP = 64, MAXP = 32, S = 4;
  tile_arg a[8] = {tile_arg_tensor(mem, TILE_F16, 3, (int64_t[]){B, H, D}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 4, (int64_t[]){NP, page, HKV, D}, NULL),
                   tile_arg_tensor(mem, TILE_F16, 4, (int64_t[]){NP, page, HKV, D}, NULL),
                   tile_arg_tensor(mem, TILE_I32, 2, (int64_t[]){B, MAXP}, NULL),
                   tile_arg_tensor(mem, TILE_I32, 1, (int64_t[]){B}, NULL),
                   tile_arg_tensor(mem, TILE_F32, 4, (int64_t[]){B, H, S, D}, NULL),
                   tile_arg_tensor(mem, TILE_F32, 3, (int64_t[]){B, H, S}, NULL),
                   tile_arg_float(0.088)};
  return build(ctx, k, a, 8);
}

Test(spec, power_of_two_divisors_become_shifts) {
  tile_context *ctx = NULL;
  tile_define d[1] = {{"T", "f16"}};
  tile_kernel *k = compile_sm90a(&ctx, "decode_attention.tile", "decode_split", d, 1);
  struct rt_artifact p16 = build_decode(ctx, k, 16), p12 = build_decode(ctx, k, 12), p32 = build_decode(ctx, k, 32);
  cr_expect(p16.facts_len == p12.facts_len && !same_key(&p16, &p12),
            "PAGE = 16 and PAGE = 12 share a specialization key");
  cr_expect(same_key(&p16, &p32),
            "PAGE = 16 and PAGE = 32 (both powers of two) differ in key");
  unsigned d16 = count(p16.ptx, "div.s32") + count(p16.ptx, "rem.s32") + count(p16.ptx, "div.u32");
  unsigned d12 = count(p12.ptx, "div.s32") + count(p12.ptx, "rem.s32") + count(p12.ptx, "div.u32");
  cr_expect(d12 > 0, "PAGE = 12: no division left in the PTX (the test no longer sees it)");
  cr_expect(d16 < d12, "PAGE = 16: %u divisions, PAGE = 12: %u", d16, d12);
  rt_artifact_free(&p16);
  rt_artifact_free(&p12);
  rt_artifact_free(&p32);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A paged cache's K and V rows gathered into shared memory (decode_split: 16 keys of 256
 * bytes per step, one warp; pages of 8 keys, so each key finds its own page): with the
 * gather's row layout (gatherrows, the default) eight
 * lanes cover 128 bytes of a row, so each thread copies two chunks of each of four rows and
 * loads four block-table entries per step; with gatherrows=0 (sixteen lanes along a row)
 * it copies one chunk in each of eight rows and loads eight (13 against 25 loads of 32
 * bits in all: the lengths' and the loop's are the same). The copies are the same in
 * number either way. */
Test(spec, gathered_rows_share_their_index_work) {
  tile_context *ctx = NULL, *ctx0 = NULL;
  tile_define d[1] = {{"T", "f16"}};
  tile_kernel *k = compile_sm90a(&ctx, "decode_attention.tile", "decode_split", d, 1);
  tile_kernel *k0 = compile_sched(&ctx0, "decode_attention.tile", "decode_split", d, 1, "gatherrows=0");
  struct rt_artifact rows = build_decode(ctx, k, 8), lanes = build_decode(ctx0, k0, 8);
  unsigned t_rows = count(rows.ptx, "ld.global.b32"), t_lanes = count(lanes.ptx, "ld.global.b32");
  unsigned c_rows = count(rows.ptx, "cp.async.cg"), c_lanes = count(lanes.ptx, "cp.async.cg");
  cr_expect(c_rows > 0 && c_rows == c_lanes, "cp.async: %u with the row layout, %u without", c_rows, c_lanes);
  cr_expect(t_rows > 0 && t_rows + 8 <= t_lanes, /* K's and V's: four fewer each per step */ "block-table loads: %u with the row layout, %u without", t_rows,
            t_lanes);
  rt_artifact_free(&rows);
  rt_artifact_free(&lanes);
  tile_kernel_release(k);
  tile_kernel_release(k0);
  tile_context_destroy(ctx);
  tile_context_destroy(ctx0);
}

/* decode_split with pages that hold whole key blocks (PAGE = 16, a multiple of BN = 16: the
 * launch decides the branch) reads one block-table entry per step and slices the page; with
 * pages of 8 each key row loads its own entry. The copies are the same in number. */
Test(spec, key_blocks_within_a_page_read_one_table_entry) {
  tile_context *ctx = NULL;
  tile_define d[1] = {{"T", "f16"}};
  tile_kernel *k = compile_sm90a(&ctx, "decode_attention.tile", "decode_split", d, 1);
  struct rt_artifact whole = build_decode(ctx, k, 16), rows = build_decode(ctx, k, 8);
  cr_expect(!same_key(&whole, &rows), "PAGE = 16 and PAGE = 8 share a specialization key");
  unsigned t_whole = count(whole.ptx, "ld.global.b32"), t_rows = count(rows.ptx, "ld.global.b32");
  unsigned c_whole = count(whole.ptx, "cp.async.cg"), c_rows = count(rows.ptx, "cp.async.cg");
  cr_expect(c_whole > 0 && c_whole == c_rows, "cp.async: %u with whole blocks, %u without", c_whole, c_rows);
  cr_expect(t_whole > 0 && t_whole + 6 <= t_rows, "32-bit loads: %u with whole blocks, %u without", t_whole, t_rows);
  rt_artifact_free(&whole);
  rt_artifact_free(&rows);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A row read again by later loops is kept in shared memory (row-cache, on by default) for
 * the launch's trip count, a specialization fact: softmax at BN = 1024 stores each chunk of a 50257-element f16
 * row (50 chunks, 100 KB) and reads it back in the second pass; a
 * row whose chunks exceed the budget (half the shared memory) is read twice from global memory
 * as before. Rows of 5008 and 5104 elements (5 chunks each) share a key; 50000 (49) does not
 * share 50257's. */
Test(spec, rows_read_again_are_kept_in_shared_memory) {
  tile_context *ctx = NULL;
  tile_define d[2] = {{"T", "f16"}, {"BN", "1024"}};
  tile_kernel *k = compile_sched(&ctx, "softmax.tile", "softmax", d, 2, "rowcache=1");
  cr_assert(k->cache_loop != 0, "softmax's two passes are not a row-cache candidate");
  struct rt_artifact vocab = build_softmax(ctx, k, 50257), near = build_softmax(ctx, k, 50000),
                     huge = build_softmax(ctx, k, 300000), a = build_softmax(ctx, k, 5008),
                     b = build_softmax(ctx, k, 5104);
  cr_expect(vocab.facts_len == near.facts_len && !same_key(&vocab, &near),
            "50 and 49 chunks share a specialization key");
  cr_expect(same_key(&a, &b),
            "N = 5008 and N = 5104 (5 chunks each) differ in key");
  unsigned sv = count(vocab.ptx, "st.shared"), sh = count(huge.ptx, "st.shared");
  unsigned lv = count(vocab.ptx, "ld.shared"), lh = count(huge.ptx, "ld.shared");
  cr_expect(sv > sh, "shared stores: %u with the row cached, %u without", sv, sh);
  cr_expect(lv > lh, "shared loads: %u with the row cached, %u without", lv, lh);
  /* a row of whole 16-byte pieces (4096 x 50176) moves 16 bytes per shared access */
  struct rt_artifact even = build_softmax(ctx, k, 50176);
  cr_expect(count(even.ptx, "st.shared.v4") >= 1 && count(even.ptx, "ld.shared.v4") >= 2,
            "16-byte shared stores %u, loads %u", count(even.ptx, "st.shared.v4"), count(even.ptx, "ld.shared.v4"));
  rt_artifact_free(&even);
  rt_artifact_free(&vocab);
  rt_artifact_free(&near);
  rt_artifact_free(&huge);
  rt_artifact_free(&a);
  rt_artifact_free(&b);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  /* on by default (PERF.md 113); rowcache=0: no candidate, no trip count in the key */
  k = compile_sm90a(&ctx, "softmax.tile", "softmax", d, 2);
  cr_expect(k->cache_loop != 0, "row-cache is off by default");
  vocab = build_softmax(ctx, k, 50257);
  cr_expect(count(vocab.ptx, "st.shared") > sh, "the default keeps no row in shared memory");
  rt_artifact_free(&vocab);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  k = compile_sched(&ctx, "softmax.tile", "softmax", d, 2, "rowcache=0");
  cr_expect(k->cache_loop == 0, "rowcache=0 still finds a candidate");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* Layernorm on vocabulary rows (4096 x 50257 f16, BN = 4096 on 16 warps) with the schedule's
 * shift=1: both loops start at the row's 16-byte boundary (row-align), so the row cache
 * keeps the row for the output pass, and W[c] and B[c], off their own boundary there by the
 * row's shift, are read as shifted vectors (probe=2, PERF.md 115): two 16-byte loads around
 * each run and its words funnelled out (prmt.b32.f4e, 4 per run), with elements only at the
 * row's ends. The default does the same here, where the cache holds a row so long (104 KB)
 * that no third program fits (PERF.md 119); with shift=0, and by default on shorter rows
 * (8192 x 16385 at BN = 2048: 36 KB), the output pass keeps its start (X and Y against W
 * and B), reads X again from global memory and stores Y element by element. */
/* lib/layernorm.tile's arguments for an M x N f16 launch (the shapes live in l). */
struct ln_args {
  int64_t xs[2], n, m;
  tile_arg a[7];
};
static void layernorm_args(struct ln_args *l, int64_t M, int64_t N) {
  l->xs[0] = l->m = M, l->xs[1] = l->n = N;
  l->a[0] = tile_arg_tensor(mem, TILE_F16, 2, l->xs, NULL);
  l->a[1] = l->a[2] = tile_arg_tensor(mem, TILE_F16, 1, &l->n, NULL);
  l->a[3] = tile_arg_tensor(mem, TILE_F16, 2, l->xs, NULL);
  l->a[4] = l->a[5] = tile_arg_tensor(mem, TILE_F32, 1, &l->m, NULL);
  l->a[6] = tile_arg_float(1e-5);
}

Test(spec, norm_weights_off_the_row_shift_load_as_shifted_vectors) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "f16"}, {"BN", "4096"}, {"NW", "16"}};
  tile_kernel *k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, "shift=1");
  struct ln_args la;
  layernorm_args(&la, 4096, 50257);
  tile_arg *a = la.a;
  struct rt_artifact vocab = build(ctx, k, a, 7);
  unsigned funnels = count(vocab.ptx, "prmt.b32.f4e") + count(vocab.ptx, "shf.r.wrap");
  cr_expect(funnels >= 8, "%u funnelled words (W and B: 4 each)", funnels);
  /* the output pass's X from shared memory: its 16-byte shared loads next to the
   * statistics loop's */
  cr_expect(count(vocab.ptx, "ld.shared.v4") >= 8, "%u 16-byte shared loads", count(vocab.ptx, "ld.shared.v4"));
  cr_expect(count(vocab.ptx, "st.global.v4") >= 1, "Y stored without 16-byte vectors");
  rt_artifact_free(&vocab);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  /* the default at this row: the same */
  k = compile_sm90a(&ctx, "layernorm.tile", "layernorm", d, 3);
  vocab = build(ctx, k, a, 7);
  funnels = count(vocab.ptx, "prmt.b32.f4e") + count(vocab.ptx, "shf.r.wrap");
  cr_expect(funnels >= 8, "%u funnelled words by default at 50257", funnels);
  rt_artifact_free(&vocab);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  /* shift=0, and the default on a row of 16385 (BN = 2048, 8 warps): nothing funnelled */
  k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, "shift=0");
  vocab = build(ctx, k, a, 7);
  funnels = count(vocab.ptx, "prmt.b32.f4e") + count(vocab.ptx, "shf.r.wrap");
  cr_expect(funnels == 0, "%u funnelled words with shift=0", funnels);
  rt_artifact_free(&vocab);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  tile_define d2[3] = {{"T", "f16"}, {"BN", "2048"}, {"NW", "8"}};
  k = compile_sm90a(&ctx, "layernorm.tile", "layernorm", d2, 3);
  layernorm_args(&la, 8192, 16385);
  struct rt_artifact mid = build(ctx, k, la.a, 7);
  funnels = count(mid.ptx, "prmt.b32.f4e") + count(mid.ptx, "shf.r.wrap");
  cr_expect(funnels == 0, "%u funnelled words by default at 16385", funnels);
  rt_artifact_free(&mid);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* pfunroll=1 (PERF.md 120): layernorm's output pass at 4096 x 50264 loads W and B two chunks
 * ahead (the default beside a long row cache); without the unrolling each iteration copies
 * the carried words, and the copy of the newest waits for its load at the iteration's end.
 * Unrolled three times, the loop holds each of the two loads three times over; with the
 * shifted weights of 50257 (shift=1) the carried blocks are funnelled in the iteration that
 * uses them, so each unrolled copy funnels its own (at least 3 x 8 words). */
Test(spec, prefetching_loops_unroll_when_asked) {
  tile_define d[3] = {{"T", "f16"}, {"BN", "4096"}, {"NW", "16"}};
  struct ln_args la;
  unsigned loads[2], funnels[2];
  for (int u = 0; u < 2; u++) {
    tile_context *ctx = NULL;
    tile_kernel *k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, u ? "pfunroll=1" : NULL);
    layernorm_args(&la, 4096, 50264);
    struct rt_artifact a = build(ctx, k, la.a, 7);
    loads[u] = count(a.ptx, "ld.global.v4");
    rt_artifact_free(&a);
    tile_kernel_release(k);
    tile_context_destroy(ctx);
    k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, u ? "shift=1,prefetch=1,pfunroll=1" : "shift=1,prefetch=1");
    layernorm_args(&la, 4096, 50257);
    a = build(ctx, k, la.a, 7);
    funnels[u] = count(a.ptx, "prmt.b32.f4e") + count(a.ptx, "shf.r.wrap");
    rt_artifact_free(&a);
    tile_kernel_release(k);
    tile_context_destroy(ctx);
  }
  cr_expect(loads[1] >= loads[0] + 4, "16-byte loads: %u unrolled, %u not", loads[1], loads[0]);
  /* shift=2: each run reads only its words and the next (4-byte loads, one case per word
   * offset), then shifted by bytes */
  tile_context *ctx = NULL;
  tile_kernel *k = compile_sched(&ctx, "layernorm.tile", "layernorm", d, 3, "shift=2,prefetch=2,pfunroll=1");
  layernorm_args(&la, 4096, 50257);
  struct rt_artifact a = build(ctx, k, la.a, 7);
  cr_expect(count(a.ptx, "ld.global.b32") >= 2 * 4 * 5, "shift=2: %u 4-byte loads (W and B, 4 cases of 5 words)",
            count(a.ptx, "ld.global.b32"));
  cr_expect(count(a.ptx, "prmt.b32.f4e") + count(a.ptx, "shf.r.wrap") >= 8, "shift=2: no byte shifts");
  rt_artifact_free(&a);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  cr_expect(funnels[1] >= funnels[0] + 8, "funnelled words: %u unrolled, %u not", funnels[1], funnels[0]);
}

/* rt_tile_trips on the generic IR: the causal fused backward (B=1, H=2, N = NK = 1024, BM =
 * 128 and BN = 128 at hd64 on sm_90a, longest first) runs 8 query blocks in its first tile
 * (key block 0) and 1 in its last (key block 7: queries 896-1023); an empty grid evaluates
 * without faulting. */
Test(spec, tile_trips_follow_the_program) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "bf16"}, {"D", "64"}, {"CAUSAL", "true"}};
  tile_kernel *k = compile_sm90a(&ctx, "attention_bwd.tile", "attention_bwd_fused", d, 3);
  for (int empty = 0; empty < 2; empty++) {
    const int64_t B = empty ? 0 : 1, H = 2, n = 1024, D = 64;
    int64_t x[4] = {B, H, n, D};
    tile_arg a[10] = {tile_arg_tensor(mem, TILE_BF16, 4, x, NULL), tile_arg_tensor(mem, TILE_BF16, 4, x, NULL),
                      tile_arg_tensor(mem, TILE_BF16, 4, x, NULL), tile_arg_tensor(mem, TILE_BF16, 4, x, NULL),
                      tile_arg_tensor(mem, TILE_F32, 3, x, NULL),  tile_arg_tensor(mem, TILE_F32, 3, x, NULL),
                      tile_arg_tensor(mem, TILE_BF16, 4, x, NULL), tile_arg_tensor(mem, TILE_BF16, 4, x, NULL),
                      tile_arg_tensor(mem, TILE_F32, 4, x, NULL),  tile_arg_float(0.088)};
    TEST_ARENA(ar);
    struct rt_bound b;
    cr_assert_eq(rt_bind_args(ctx, k, a, 10, &ar, &b), TILE_OK, "%s", tile_errmsg(ctx));
    int64_t first[3] = {0, 0, 0}, last[3] = {b.grid[0] - 1, b.grid[1] - 1, b.grid[2] - 1};
    double t0 = rt_tile_trips(k->ir, &b, first), t1 = rt_tile_trips(k->ir, &b, last);
    if (!empty) {
      cr_expect(t0 == 8, "first tile: %g steps", t0);
      cr_expect(t1 == 1, "last tile: %g steps", t1);
    }
    arena_free(&ar);
  }
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* lib/attention.tile's causal forward at head dim D built for N = 1024 and N = 4096 (B=1,
 * H=4): each one's code.persistent, and whether their specialization keys are the same. */
static bool build_causal_forward(int64_t D, int persistent[2]) {
  tile_context *ctx = NULL;
  char dtext[8];
  snprintf(dtext, sizeof dtext, "%d", (int)D);
  tile_define d[3] = {{"T", "bf16"}, {"D", dtext}, {"CAUSAL", "true"}};
  tile_kernel *k = compile_sm90a(&ctx, "attention.tile", "attention", d, 3);
  struct rt_artifact art[2];
  for (int i = 0; i < 2; i++) {
    int64_t n = i ? 4096 : 1024, x[4] = {1, 4, n, D};
    tile_arg a[6] = {tile_arg_tensor(mem, TILE_BF16, 4, x, NULL), tile_arg_tensor(mem, TILE_BF16, 4, x, NULL),
                     tile_arg_tensor(mem, TILE_BF16, 4, x, NULL), tile_arg_tensor(mem, TILE_BF16, 4, x, NULL),
                     tile_arg_tensor(mem, TILE_F32, 3, x, NULL), tile_arg_float(0.088)};
    art[i] = build(ctx, k, a, 6);
    persistent[i] = art[i].code.persistent;
  }
  bool same = same_key(&art[0], &art[1]);
  rt_artifact_free(&art[0]);
  rt_artifact_free(&art[1]);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return same;
}

/* Heavy tiles of unequal work are walked by persistent programs only when the longest runs
 * few steps (the long_tiles fact, CG_WALK_MAX_TRIPS; PERF.md 91): the causal fused backward
 * at hd64 deals its longest key block first, N / 128 query blocks, so N = 1024 (8 steps)
 * is persistent(few) and N = 4096 (32) a plain grid, two specializations; the forward's
 * hd128 causal row blocks likewise (8 key blocks at N = 1024, 32 at N = 4096). */
Test(spec, long_tiles_are_not_walked) {
  tile_context *ctx = NULL;
  tile_define d[3] = {{"T", "bf16"}, {"D", "64"}, {"CAUSAL", "true"}};
  tile_kernel *k = compile_sm90a(&ctx, "attention_bwd.tile", "attention_bwd_fused", d, 3);
  struct rt_artifact s = build_bwd_fused_d(ctx, k, 1024, 64, NULL), l = build_bwd_fused_d(ctx, k, 4096, 64, NULL);
  cr_expect_eq(s.code.persistent, 2, "8 steps: persistent=%d", (int)s.code.persistent);
  cr_expect_eq(l.code.persistent, 0, "32 steps: persistent=%d", (int)l.code.persistent);
  cr_expect(!same_key(&s, &l), "long_tiles is not in the specialization key");
  rt_artifact_free(&s);
  rt_artifact_free(&l);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  /* the forward, causal: hd128's key blocks are heavy (8 at N = 1024 walked, 32 at 4096 not);
   * hd64's light (walked whatever their number): no fact, one specialization */
  int p128[2], p64[2];
  cr_expect(!build_causal_forward(128, p128), "forward hd128: long_tiles is not in the key");
  cr_expect_eq(p128[0], 2, "forward, 8 key blocks: persistent=%d", p128[0]);
  cr_expect_eq(p128[1], 0, "forward, 32 key blocks: persistent=%d", p128[1]);
  cr_expect(build_causal_forward(64, p64), "hd64's light tiles got a long_tiles fact");
  cr_expect_eq(p64[1], 1, "hd64 causal at 64 key blocks: persistent=%d", p64[1]);
  /* without warp roles (sm_80) nothing is persistent: the backward's heavy steps get no
   * fact either, one specialization for 8 steps (N = 256) and 128 (N = 4096) */
  arch = "sm_80";
  tile_define d128[3] = {{"T", "bf16"}, {"D", "128"}, {"CAUSAL", "true"}};
  k = compile_sm90a(&ctx, "attention_bwd.tile", "attention_bwd_fused", d128, 3);
  s = build_bwd_fused_d(ctx, k, 256, 128, NULL); /* 8 query blocks of 32: short */
  l = build_bwd_fused_d(ctx, k, 4096, 128, NULL);
  cr_expect(same_key(&s, &l), "sm_80 got a long_tiles fact");
  cr_expect(!s.code.persistent && !l.code.persistent, "sm_80 persistent: %d %d", s.code.persistent, l.code.persistent);
  rt_artifact_free(&s);
  rt_artifact_free(&l);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  arch = "sm_90a";
}

/* Persistent grids: as many programs as fit (never more than the tiles); heavy tiles of
 * unequal work (persistent=2: hd128 causal attention) walk only grids of up to 8 waves and get
 * one program per tile beyond (PERF.md 62). */
Test(spec, persistent_grids_walk_few_waves_only) {
  cr_expect_eq(rt_persistent_programs(100, 132, 1), 100);
  cr_expect_eq(rt_persistent_programs(4096, 132, 1), 132);
  cr_expect_eq(rt_persistent_programs(1024, 132, 2), 132);      /* 7.8 waves: walked */
  cr_expect_eq(rt_persistent_programs(8 * 132, 132, 2), 132);   /* 8 waves: walked */
  cr_expect_eq(rt_persistent_programs(8 * 132 + 1, 132, 2), 8 * 132 + 1); /* one per tile */
  cr_expect_eq(rt_persistent_programs(4096, 132, 2), 4096);
  cr_expect_eq(rt_persistent_programs(100, 132, 2), 100);
  cr_expect_eq(rt_persistent_programs(256, 132, 2), 256);      /* 2 waves: one per tile */
  cr_expect_eq(rt_persistent_programs(4 * 132 - 1, 132, 2), 4 * 132 - 1);
  cr_expect_eq(rt_persistent_programs(4 * 132, 132, 2), 132);   /* 4 waves: walked */
}
