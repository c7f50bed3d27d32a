/* spec_ptx.c - prints the PTX of one launch specialization of a kernel (its IR after a pass
 * with DUMP_AFTER=pass, on stderr), for reading and for nvdisasm's instruction counts:
 *   spec_ptx FILE KERNEL T BN NW SCHEDULE M N [ARGS]   (ARGS: see below; SCHEDULE "" = none) */
#include "rt.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dump_ir(void *ud, const char *pass, const char *ir) {
  (void)ud;
  fprintf(stderr, "// after %s\n%s", pass, ir);
}

int main(int argc, char **argv) {
  if (argc < 9) {
    fprintf(stderr, "usage: spec_ptx FILE KERNEL T BN NW SCHEDULE M N [ARGS]\n");
    return 2;
  }
  tile_context *ctx;
  tile_context_options o = {.cache_dir = ""};
  if (tile_context_create(&o, &ctx)) return 3;
  tile_define d[3] = {{"T", argv[3]}, {"BN", argv[4]}, {"NW", argv[5]}};
  tile_compile_options co = {.kernel = argv[2], .defines = d, .ndefines = 3, .device = TILE_DEVICE_CUDA,
                             .arch = "sm_90a", .flags = TILE_FIXED_CONFIG, .schedule = argv[6][0] ? argv[6] : NULL};
  tile_kernel *k;
  if (tile_compile_file(ctx, argv[1], &co, &k)) { fprintf(stderr, "%s\n", tile_errmsg(ctx)); return 4; }
  int64_t M = atoll(argv[7]), N = atoll(argv[8]);
  tile_dtype dt = !strcmp(argv[3], "f16") ? TILE_F16 : !strcmp(argv[3], "bf16") ? TILE_BF16 : TILE_F32;
  void *mem = (void *)(uintptr_t)0x10000000;
  /* the arguments, one letter each (default "22"): 2 an M x N tensor of T, 1 an N-vector
   * of T, m an M-vector of f32, s an f32 scalar */
  const char *sig = argc > 9 ? argv[9] : "22";
  tile_arg a[16];
  unsigned na = 0;
  for (const char *c = sig; *c && na < 16; c++) {
    if (*c == '2') a[na++] = tile_arg_tensor(mem, dt, 2, (int64_t[]){M, N}, NULL);
    else if (*c == '1') a[na++] = tile_arg_tensor(mem, dt, 1, (int64_t[]){N}, NULL);
    else if (*c == 'm') a[na++] = tile_arg_tensor(mem, TILE_F32, 1, (int64_t[]){M}, NULL);
    else if (*c == 's') a[na++] = tile_arg_float(1e-5);
  }
  struct rt_bound b;
  struct arena ar;
  jmp_buf oom;
  if (setjmp(oom)) return 7;
  arena_init(&ar, NULL, &oom);
  if (rt_bind_args(ctx, k, a, na, &ar, &b)) { fprintf(stderr, "%s\n", tile_errmsg(ctx)); return 5; }
  struct rt_gpu_target t = {.smem_optin = (int)tl_target_find("sm_90a")->smem_optin};
  strcpy(t.arch, "sm_90a");
  const char *dump = getenv("DUMP_AFTER");
  if (dump) t.dump_after = dump, t.dump = dump_ir;
  struct rt_artifact art;
  if (rt_gpu_build(k, &b, &t, &art)) { fprintf(stderr, "%s\n", tile_errmsg(ctx)); return 6; }
  fputs(art.ptx, stdout);
  return 0;
}
