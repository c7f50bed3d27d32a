/* test_repack.c - repacking unaligned dot operands (runtime/repack.c) without a GPU: the
 * aligned layout, the misalignment test, which parameters of the lib kernels qualify, and
 * the internal copy kernels run on the CPU interpreter against a plain C copy, from
 * misaligned, ragged sources into padded destinations whose padding must stay untouched. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_seed.h"
#include "rt.h"
#include "testfiles.h"

Test(repack, layout_pads_rows_to_16_bytes) {
  int64_t st[3];
  size_t bytes = 0;
  int64_t sh[2] = {4095, 4095}, s[2] = {4095, 1};
  cr_assert(rt_repack_layout(2, sh, s, 2, st, &bytes));
  cr_assert(st[0] == 4096 && st[1] == 1);
  cr_assert_eq(bytes, (size_t)4095 * 4096 * 2);
  int64_t sh2[2] = {33, 7}, s2[2] = {7, 1};
  cr_assert(rt_repack_layout(2, sh2, s2, 4, st, &bytes)); /* f32: 4 per 16 bytes */
  cr_assert(st[0] == 8 && st[1] == 1 && bytes == 33 * 8 * 4);
  int64_t sh3[3] = {3, 33, 7}, s3[3] = {1000, 7, 1};
  cr_assert(rt_repack_layout(3, sh3, s3, 2, st, &bytes)); /* f16: 8 per 16 bytes */
  cr_assert(st[0] == 33 * 8 && st[1] == 8 && st[2] == 1 && bytes == 3 * 33 * 8 * 2);
  int64_t col[2] = {1, 4095}; /* column-major: rows not contiguous */
  cr_assert_not(rt_repack_layout(2, sh, col, 2, st, &bytes));
  int64_t empty[2] = {0, 4095};
  cr_assert_not(rt_repack_layout(2, empty, s, 2, st, &bytes));
  int64_t sh1[1] = {4095}, s1[1] = {1};
  cr_assert_not(rt_repack_layout(1, sh1, s1, 2, st, &bytes));
}

Test(repack, misaligned) {
  int64_t sh[2] = {64, 4096}, s[2] = {4096, 1};
  cr_assert_not(rt_repack_misaligned(2, sh, s, 2, 256));
  cr_assert(rt_repack_misaligned(2, sh, s, 2, 258)); /* the base */
  int64_t s2[2] = {4095, 1};
  cr_assert(rt_repack_misaligned(2, sh, s2, 2, 256)); /* the row stride */
  int64_t one[2] = {1, 4095};
  cr_assert_not(rt_repack_misaligned(2, one, s2, 2, 256)); /* one row: its stride is unused */
  int64_t s4[2] = {4092, 1};
  cr_assert_not(rt_repack_misaligned(2, sh, s4, 4, 256)); /* f32: 16368 bytes */
}

static tile_kernel *compile_lib(tile_context *ctx, const char *file, const char *kernel) {
  char path[1024];
  test_lib_path(path, sizeof path, file);
  tile_compile_options co = {.kernel = kernel, .device = TILE_DEVICE_CPU};
  tile_kernel *k = NULL;
  cr_assert_eq(tile_compile_file(ctx, path, &co, &k), TILE_OK, "%s: %s", file, tile_errmsg(ctx));
  return k;
}

/* The names of the ir parameters rt_repack_operands picks, comma-separated. */
static void picked(tile_kernel *k, char *out, size_t cap) {
  uint64_t m = rt_repack_operands(k->ir);
  out[0] = 0;
  for (uint32_t i = 0; i < k->ir->params.n && i < 64; i++)
    if (m >> i & 1) {
      strncat(out, out[0] ? "," : "", cap - strlen(out) - 1);
      strncat(out, k->ir->params.v[i].name, cap - strlen(out) - 1);
    }
}

Test(repack, operands_of_the_lib_kernels) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  char names[256];
  struct {
    const char *file, *kernel, *want;
  } cases[] = {
      {"gemm.tile", "gemm", "A,B"},      /* not C, bias or R */
      {"gemm.tile", "bmm", "A,B"},
      {"attention.tile", "attention", "K,V"}, /* Q is loaded once, outside the loop */
      {"softmax.tile", "softmax", ""},   /* no dot */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tile_kernel *k = compile_lib(ctx, cases[i].file, cases[i].kernel);
    picked(k, names, sizeof names);
    cr_expect_str_eq(names, cases[i].want, "%s", cases[i].kernel);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

/* Runs a copy kernel on the interpreter: X (rank 2 or 3, shape sh, row stride rs, batch
 * stride bs, starting one element into its buffer) to Y with the layout rt_repack_layout
 * gives; checks every element and that the padding still holds the sentinel. */
static void copy_case(struct rng *r, const char *kernel, const char *dt, int eb, int rank, const int64_t *sh,
                      int64_t rs, int64_t bs) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_define def = {"T", dt};
  tile_compile_options co = {.kernel = kernel, .defines = &def, .ndefines = 1, .device = TILE_DEVICE_CPU};
  tile_kernel *k = NULL;
  const char *src = rt_repack_source();
  cr_assert_eq(tile_compile_string(ctx, "<repack>", src, strlen(src), &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  int64_t nb = rank == 3 ? sh[0] : 1, rows = sh[rank - 2], cols = sh[rank - 1];
  int64_t xs[3] = {0}, ys[3] = {0};
  xs[rank - 1] = 1;
  xs[rank - 2] = rs;
  if (rank == 3) xs[0] = bs;
  size_t ybytes = 0;
  cr_assert(rt_repack_layout(rank, sh, xs, eb, ys, &ybytes));
  cr_assert_eq(ys[rank - 2] * eb % 16, 0);
  size_t xn = (size_t)((nb - 1) * (rank == 3 ? bs : 0) + (rows - 1) * rs + cols + 1);
  uint8_t *x = malloc(xn * (size_t)eb), *y = malloc(ybytes);
  for (size_t i = 0; i < xn * (size_t)eb; i += 2) { /* finite values: exponents below all-ones */
    uint16_t v = (uint16_t)rng_u64(r) & 0x7bff;
    memcpy(x + i, &v, 2);
  }
  memset(y, 0xa5, ybytes);
  tile_arg args[2] = {{.kind = TILE_ARG_TENSOR}, {.kind = TILE_ARG_TENSOR}};
  args[0].u.tensor = (tile_tensor){.data = x + eb, .dtype = eb == 2 ? (strcmp(dt, "f16") ? TILE_BF16 : TILE_F16) : TILE_F32, .rank = (unsigned)rank};
  args[1].u.tensor = args[0].u.tensor;
  args[1].u.tensor.data = y;
  for (int d = 0; d < rank; d++) {
    args[0].u.tensor.shape[d] = args[1].u.tensor.shape[d] = sh[d];
    args[0].u.tensor.strides[d] = xs[d];
    args[1].u.tensor.strides[d] = ys[d];
  }
  cr_assert_eq(tile_launch(ctx, k, args, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < ys[rank - 2]; j++) {
        const uint8_t *got = y + (size_t)((rank == 3 ? b * ys[0] : 0) + i * ys[rank - 2] + j) * (size_t)eb;
        if (j < cols) {
          const uint8_t *want = x + eb + (size_t)(b * (rank == 3 ? bs : 0) + i * rs + j) * (size_t)eb;
          cr_assert(memcmp(got, want, (size_t)eb) == 0, "%s %s: element (%lld, %lld, %lld) differs", kernel, dt,
                    (long long)b, (long long)i, (long long)j);
        } else {
          for (int e = 0; e < eb; e++)
            cr_assert_eq(got[e], 0xa5, "%s %s: padding (%lld, %lld, %lld) was written", kernel, dt, (long long)b,
                         (long long)i, (long long)j);
        }
      }
  free(x);
  free(y);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(repack, copy_kernels_on_the_interpreter) {
  struct rng r;
  rng_seed(&r, rng_test_seed("repack.copy_kernels"));
  int64_t a[2] = {33, 4095}, b[2] = {7, 1}, c[2] = {1, 33}, d[3] = {3, 33, 7}, e[3] = {2, 1, 4095};
  copy_case(&r, "repack2", "f16", 2, 2, a, 4095, 0);
  copy_case(&r, "repack2", "bf16", 2, 2, b, 3, 0); /* stride above the width */
  copy_case(&r, "repack2", "f32", 4, 2, c, 33, 0);
  copy_case(&r, "repack3", "f16", 2, 3, d, 9, 1000);
  copy_case(&r, "repack3", "f32", 4, 3, e, 4095, 4097);
}
