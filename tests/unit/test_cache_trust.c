/* test_cache_trust.c - what the on-disk cache trusts (issue 19). The entry checksum is not
 * keyed, so anyone who can write an entry can make its checksum match: every stored part
 * is checked for what it claims to be before it is used. A module entry whose cubin is
 * not a sound ELF64 image for EM_CUDA (garbage, truncated, another machine, offsets past
 * its end), or whose PTX is not PTX text, is ignored, rebuilt and rewritten; the CUDA
 * paths run on the fake driver (tests/cli/fake_libcuda.c), which like the real one reads
 * an image by its header's offsets. The cache directory itself is trusted only when it is
 * this user's and nobody else can write it; a fresh one is created with mode 0700.       */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "tile.h"

static const char *const vscale_src = "kernel vscale<BN: 64 | 128 = 64>(X: f32[N], Y: out f32[N])\n"
                                      "  grid(cdiv(N, BN))\n"
                                      "{\n"
                                      "  let o = program_id(0) * BN;\n"
                                      "  Y[o : +BN] = X[o : +BN] * 2.0;\n"
                                      "}\n";

static char dir[64], logpath[128];

static void use_fake_driver(void) {
  snprintf(dir, sizeof dir, "/tmp/tile_trust_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(logpath, sizeof logpath, "%s.log", dir);
  setenv("TILE_LIBCUDA", TILE_FAKE_LIBCUDA, 1);
  setenv("FAKE_CUDA_LOG", logpath, 1);
  unsetenv("FAKE_CUDA_NO_LINK");
}

static void cleanup(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s' '%s'", dir, dir, logpath);
  cr_expect_eq(system(cmd), 0);
}

/* How often the fake driver logged `event` since the log was last cleared. */
static int logged(const char *event) {
  FILE *f = fopen(logpath, "r");
  if (!f) return 0;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strncmp(line, event, strlen(event)) == 0;
  fclose(f);
  return n;
}

static void clear_log(void) {
  FILE *f = fopen(logpath, "w");
  if (f) fclose(f);
}

/* Compiles and prepares vscale for the fake GPU in a fresh context (so that the in-memory
 * caches are empty); returns where the code came from (tile_kernel_stats.cache_hit). */
static char status[512]; /* tile_cache_status of the last compile_and_prepare */
static char path_used[512]; /* and its tile_cache_path */

/* Compiles and prepares vscale for the fake GPU in ctx; returns where the code came from
 * (tile_kernel_stats.cache_hit). */
static int prepare_in(tile_context *ctx, tile_cache_stats *stats) {
  tile_compile_options co = {.device = TILE_DEVICE_CUDA};
  tile_kernel *k = NULL;
  tile_status st = tile_compile_string(ctx, "vscale.tile", vscale_src, strlen(vscale_src), &co, &k);
  cr_assert_eq(st, TILE_OK, "%s: %s", tile_status_name(st), tile_errmsg(ctx));
  void *x = NULL, *y = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 4096, &x), TILE_OK, "%s", tile_errmsg(ctx));
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CUDA, 4096, &y), TILE_OK, "%s", tile_errmsg(ctx));
  int64_t n = 1000;
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 1, &n, NULL), tile_arg_tensor(y, TILE_F32, 1, &n, NULL)};
  st = tile_kernel_prepare(ctx, k, args, 2);
  cr_assert_eq(st, TILE_OK, "%s: %s", tile_status_name(st), tile_errmsg(ctx));
  tile_kernel_stats ks;
  cr_assert_eq(tile_kernel_get_stats(k, &ks), TILE_OK);
  /* the occupancy of the prepared specialization (the stand-in driver answers 1 block) */
  cr_expect_eq(ks.blocks_per_sm, 1);
  cr_expect_gt(ks.multiprocessors, 0);
  if (stats) cr_assert_eq(tile_cache_get_stats(ctx, stats), TILE_OK);
  snprintf(status, sizeof status, "%s", tile_cache_status(ctx));
  snprintf(path_used, sizeof path_used, "%s", tile_cache_path(ctx));
  tile_mem_free(ctx, TILE_DEVICE_CUDA, x);
  tile_mem_free(ctx, TILE_DEVICE_CUDA, y);
  tile_kernel_release(k);
  return ks.cache_hit;
}

/* The same in a fresh context (so that the in-memory caches are empty) with cache_dir. */
static int compile_and_prepare_in(const char *cache_dir, tile_cache_stats *stats) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = cache_dir, .cpu_threads = 1};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  int hit = prepare_in(ctx, stats);
  tile_context_destroy(ctx);
  return hit;
}

static int compile_and_prepare(tile_cache_stats *stats) { return compile_and_prepare_in(dir, stats); }

/* The path of the one module entry in dir. */
static void module_entry(char *out, size_t cap) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d)))
    if (strncmp(de->d_name, "mod-", 4) == 0) {
      snprintf(out, cap, "%s/%s", dir, de->d_name);
      n++;
    }
  closedir(d);
  cr_assert_eq(n, 1, "one module entry (found %d)", n);
}

struct stored {
  char *key;
  size_t key_len;
  void *part[3];
  size_t len[3];
};

/* Reads the module entry (meta text, PTX, cubin). */
static void read_entry(struct stored *s) {
  char path[512];
  module_entry(path, sizeof path);
  struct rt_cache_entry e;
  const char *key;
  size_t klen;
  char why[128];
  cr_assert_eq(rt_cache_read_file(NULL, path, &e, &key, &klen, why, sizeof why), RT_CACHE_HIT, "%s", why);
  cr_assert_eq(e.nparts, 3);
  s->key = malloc(klen);
  memcpy(s->key, key, klen);
  s->key_len = klen;
  for (int i = 0; i < 3; i++) {
    s->len[i] = e.parts[i].len;
    s->part[i] = malloc(s->len[i] + 1);
    memcpy(s->part[i], e.parts[i].data, s->len[i]);
  }
  rt_cache_entry_free(&e);
}

static void free_entry(struct stored *s) {
  free(s->key);
  for (int i = 0; i < 3; i++) free(s->part[i]);
}

/* Rewrites the entry with part `which` replaced: a well-formed entry with a valid checksum,
 * as anyone who can write to the directory can make. */
static void plant(const struct stored *good, int which, const void *data, size_t len) {
  struct rt_cache_part parts[3];
  for (int i = 0; i < 3; i++) parts[i] = (struct rt_cache_part){good->part[i], good->len[i]};
  parts[which] = (struct rt_cache_part){data, len};
  char err[256];
  cr_assert_eq(rt_cache_store(dir, "mod", good->key, good->key_len, parts, 3, err, sizeof err), 0, "%s", err);
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A damaged part is ignored: the code is built again (linked) and the entry rewritten. */
static void expect_rebuilt(const struct stored *good, const char *what, const char *why_has) {
  clear_log();
  tile_cache_stats cs;
  int hit = compile_and_prepare(&cs);
  cr_expect_eq(hit, 0, "%s: the planted entry was used (cache_hit %d)", what, hit);
  cr_expect_eq(logged("link"), 1, "%s: not rebuilt", what);
  cr_expect_eq(cs.rejected, 1, "%s: %u entries rejected", what, cs.rejected);
  cr_expect_eq(cs.stored, 1, "%s: %u entries stored", what, cs.stored);
  struct stored now;
  read_entry(&now);
  cr_expect(now.len[2] == good->len[2] && memcmp(now.part[2], good->part[2], good->len[2]) == 0,
            "%s: the entry was not rewritten", what);
  cr_expect(now.len[1] == good->len[1] && memcmp(now.part[1], good->part[1], good->len[1]) == 0,
            "%s: the PTX was not rewritten", what);
  free_entry(&now);
  cr_expect(strstr(status, why_has) && strstr(status, "ignored"), "%s: tile_cache_status says '%s'", what, status);
}

Test(cache_trust, damaged_cubin_and_ptx_are_rebuilt, .init = use_fake_driver, .fini = cleanup) {
  clear_log();
  cr_assert_eq(compile_and_prepare(NULL), 0, "cold: compiled");
  cr_assert_eq(logged("link"), 1);
  clear_log();
  cr_assert_eq(compile_and_prepare(NULL), 2, "warm: from the on-disk cache");
  cr_assert_eq(logged("link"), 0);
  cr_assert_eq(logged("load-cubin"), 1);
  struct stored good;
  read_entry(&good);
  const unsigned char *cubin = good.part[2];
  size_t n = good.len[2];
  cr_assert(n > 64 && memcmp(cubin, "\x7f" "ELF", 4) == 0, "the stored cubin is an ELF image");
  unsigned char *bad = malloc(n + 64);

  /* garbage */
  for (size_t i = 0; i < n; i++) bad[i] = (unsigned char)(i * 37 + 11);
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "garbage cubin", "ELF");
  /* truncated: the section headers are past the end */
  plant(&good, 2, cubin, n / 2);
  expect_rebuilt(&good, "truncated cubin", "section");
  /* another machine (EM_X86_64) */
  memcpy(bad, cubin, n);
  bad[18] = 62;
  bad[19] = 0;
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "x86-64 ELF", "machine");
  /* 32-bit class, big endian */
  memcpy(bad, cubin, n);
  bad[4] = 1;
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "ELFCLASS32", "class");
  memcpy(bad, cubin, n);
  bad[5] = 2;
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "big endian", "endian");
  /* a section header table far past the end (the driver would read gigabytes away) */
  memcpy(bad, cubin, n);
  put64(bad + 40, (uint64_t)1 << 40);
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "e_shoff out of range", "section");
  /* a section whose contents lie past the end */
  memcpy(bad, cubin, n);
  uint64_t shoff = 0;
  for (int i = 0; i < 8; i++) shoff |= (uint64_t)cubin[40 + i] << (8 * i);
  put64(bad + shoff + 64 + 32, (uint64_t)n * 4); /* section 1's sh_size */
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "section past the end", "section");
  /* a program header table past the end */
  memcpy(bad, cubin, n);
  put64(bad + 32, n - 8); /* e_phoff */
  bad[54] = 56;           /* e_phentsize */
  bad[56] = 2;            /* e_phnum */
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "program headers past the end", "program");
  /* a header size that is not ELF64's */
  memcpy(bad, cubin, n);
  bad[52] = 200;
  plant(&good, 2, bad, n);
  expect_rebuilt(&good, "e_ehsize", "header size");
  /* shorter than an ELF header */
  plant(&good, 2, cubin, 20);
  expect_rebuilt(&good, "20-byte cubin", "short");
  /* PTX with a NUL inside (the driver would read a shorter text) and PTX that is not PTX */
  memcpy(bad, good.part[1], 40);
  bad[20] = 0;
  plant(&good, 1, bad, 40);
  expect_rebuilt(&good, "PTX with a NUL", "PTX");
  plant(&good, 1, "this is not PTX at all", 22);
  expect_rebuilt(&good, "not PTX", "PTX");

  /* and the intact entry is used again */
  clear_log();
  cr_expect_eq(compile_and_prepare(NULL), 2);
  cr_expect_eq(logged("link"), 0);
  free(bad);
  free_entry(&good);
}

/* ptxas: $PTXAS, the CUDA toolkit's, the one tools/setup.sh fetches, or PATH's; NULL if none. */
static const char *find_ptxas(void) {
  static char path[1024];
  const char *env = getenv("PTXAS");
  const char *cands[] = {env ? env : "", "/usr/local/cuda/bin/ptxas", TILE_BINARY_DIR "/ptxas/ptxas"};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
    if (cands[i][0] && access(cands[i], X_OK) == 0) return cands[i];
  FILE *p = popen("command -v ptxas 2>/dev/null", "r");
  if (!p) return NULL;
  bool found = fgets(path, sizeof path, p) != NULL;
  pclose(p);
  path[strcspn(path, "\n")] = 0;
  return found && path[0] ? path : NULL;
}

/* The check accepts what NVIDIA's assembler makes (the driver's JIT makes the same ELF), and
 * refuses every truncation of it. */
Test(cache_trust, real_cubins_pass_the_check) {
  const char *ptxas = find_ptxas();
  if (!ptxas) cr_skip_test("no ptxas");
  char tmp[] = "/tmp/tile_cubin_XXXXXX";
  cr_assert_not_null(mkdtemp(tmp));
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  const char *arches[] = {"sm_80", "sm_90a"};
  for (int a = 0; a < 2; a++) {
    tile_compile_options co = {.arch = arches[a]};
    tile_emit_options eo = {.what = TILE_EMIT_PTX};
    char *ptx = NULL;
    size_t len = 0;
    cr_assert_eq(tile_emit(ctx, "vscale.tile", vscale_src, strlen(vscale_src), &co, &eo, &ptx, &len), TILE_OK, "%s",
                 tile_errmsg(ctx));
    cr_expect(rt_ptx_check(ptx, len, NULL, 0), "our PTX passes the PTX check");
    char ptx_path[128], cubin_path[128], cmd[2048];
    snprintf(ptx_path, sizeof ptx_path, "%s/k.ptx", tmp);
    snprintf(cubin_path, sizeof cubin_path, "%s/k.cubin", tmp);
    FILE *f = fopen(ptx_path, "w");
    cr_assert_not_null(f);
    fwrite(ptx, 1, len, f);
    fclose(f);
    tile_free(ptx);
    snprintf(cmd, sizeof cmd, "'%s' -arch=%s -o '%s' '%s'", ptxas, arches[a], cubin_path, ptx_path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    f = fopen(cubin_path, "rb");
    cr_assert_not_null(f);
    static unsigned char img[1 << 20];
    size_t n = fread(img, 1, sizeof img, f);
    fclose(f);
    char why[256] = "";
    cr_expect(rt_cubin_check(img, n, why, sizeof why), "%s: ptxas's cubin (%zu bytes) refused: %s", arches[a], n, why);
    for (size_t cut = 0; cut < n; cut += cut < 128 ? 1 : 61)
      cr_expect(!rt_cubin_check(img, cut, why, sizeof why), "%s: cut to %zu of %zu bytes accepted", arches[a], cut, n);
  }
  tile_context_destroy(ctx);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  cr_expect_eq(system(cmd), 0);
}

/* ---- the cache directory ---- */

static void expect_refused(const char *cache_dir, const char *what, const char *why_has) {
  clear_log();
  tile_cache_stats cs;
  int hit = compile_and_prepare_in(cache_dir, &cs);
  cr_expect_eq(hit, 0, "%s: an entry was loaded from it", what);
  /* (without the disk cache nothing is linked: the driver JIT-compiles the PTX at load) */
  cr_expect_eq(logged("link") + logged("jit"), 1, "%s: not compiled", what);
  cr_expect_str_eq(path_used, "", "%s: the cache is off", what);
  cr_expect_eq(cs.stored, 0, "%s: %u entries stored", what, cs.stored);
  cr_expect(strstr(status, cache_dir) && strstr(status, why_has), "%s: tile_cache_status says '%s'", what, status);
}

static void expect_used(const char *cache_dir, const char *what) {
  clear_log();
  int hit = compile_and_prepare_in(cache_dir, NULL);
  cr_expect_eq(hit, 2, "%s: the stored entry was not used", what);
  cr_expect_str_eq(path_used, cache_dir, "%s", what);
  cr_expect_str_eq(status, "", "%s: %s", what, status);
}

/* A cache directory that others can write was used: anyone could plant entries in it. */
Test(cache_trust, writable_directory_is_refused, .init = use_fake_driver, .fini = cleanup) {
  cr_assert_eq(compile_and_prepare(NULL), 0);
  expect_used(dir, "mode 0700");
  cr_assert_eq(chmod(dir, 0755), 0);
  expect_used(dir, "mode 0755");
  cr_assert_eq(chmod(dir, 0777), 0);
  expect_refused(dir, "mode 0777", "writable");
  cr_assert_eq(chmod(dir, 0720), 0);
  expect_refused(dir, "mode 0720", "writable");
  cr_assert_eq(chmod(dir, 0702), 0);
  expect_refused(dir, "mode 0702", "writable");
  cr_assert_eq(chmod(dir, 0700), 0);
  expect_used(dir, "mode 0700 again");
}

/* A cache directory of another user was used (root: one given to nobody; otherwise "/"). */
Test(cache_trust, foreign_directory_is_refused, .init = use_fake_driver, .fini = cleanup) {
  cr_assert_eq(compile_and_prepare(NULL), 0);
  if (geteuid() == 0) {
    cr_assert_eq(chown(dir, 65534, 65534), 0);
    expect_refused(dir, "owned by nobody", "owned by");
    cr_assert_eq(chown(dir, 0, 0), 0);
    expect_used(dir, "owned by root, as this process");
  } else {
    expect_refused("/", "the root directory", "owned by");
  }
  char file[128];
  snprintf(file, sizeof file, "%s/file", dir);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fclose(f);
  expect_refused(file, "a regular file", "not a directory");
}

/* A symbolic link to the directory is followed only when the link is this user's, and the
 * directory it names is checked. */
Test(cache_trust, linked_directory, .init = use_fake_driver, .fini = cleanup) {
  char real[128], link[128];
  snprintf(real, sizeof real, "%s/real", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  cr_assert_eq(mkdir(real, 0700), 0);
  cr_assert_eq(symlink(real, link), 0);
  cr_assert_eq(compile_and_prepare_in(link, NULL), 0);
  expect_used(link, "a link to a 0700 directory");
  cr_assert_eq(chmod(real, 0777), 0);
  expect_refused(link, "a link to a 0777 directory", "writable");
  cr_assert_eq(chmod(real, 0700), 0);
  if (geteuid() == 0) {
    cr_assert_eq(lchown(link, 65534, 65534), 0);
    expect_refused(link, "a link of another user", "owned by");
  }
}

/* The directories the library creates are 0700 whatever the umask; one that appears, made
 * by someone else, between the context's creation and the first store is refused then. */
Test(cache_trust, created_private, .init = use_fake_driver, .fini = cleanup) {
  char sub[128], leaf[160];
  snprintf(sub, sizeof sub, "%s/a", dir);
  snprintf(leaf, sizeof leaf, "%s/a/cache", dir);
  mode_t old = umask(0);
  cr_assert_eq(compile_and_prepare_in(leaf, NULL), 0);
  umask(old);
  struct stat st;
  cr_assert_eq(stat(sub, &st), 0);
  cr_expect_eq(st.st_mode & 07777, 0700, "parent created with mode %o", (unsigned)(st.st_mode & 07777));
  cr_expect_eq(st.st_uid, geteuid());
  cr_assert_eq(stat(leaf, &st), 0);
  cr_expect_eq(st.st_mode & 07777, 0700, "cache directory created with mode %o", (unsigned)(st.st_mode & 07777));
  expect_used(leaf, "the created directory");

  /* absent when the context is created, then made world-writable by someone */
  char late[160];
  snprintf(late, sizeof late, "%s/late", dir);
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = late, .cpu_threads = 1};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), late);
  cr_assert_eq(mkdir(late, 0777), 0);
  cr_assert_eq(chmod(late, 0777), 0);
  tile_cache_stats cs;
  cr_expect_eq(prepare_in(ctx, &cs), 0);
  cr_expect_eq(cs.stored, 0, "stored into a world-writable directory");
  cr_expect_eq(cs.store_failed, 1);
  cr_expect(strstr(status, "writable"), "%s", status);
  tile_context_destroy(ctx);
}
