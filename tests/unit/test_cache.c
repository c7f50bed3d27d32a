/* test_cache.c - the on-disk cache (runtime/cache.c): entries round-trip; a truncated,
 * byte-flipped, foreign, mismatched-key or empty file, a directory or a link in an entry's
 * place are never trusted and are replaced by the next store; a writer killed between
 * writing and renaming leaves a cache that still works (its temporary file is ignored and
 * removed by tile_cache_clear); concurrent writers of one key all succeed and leave one
 * complete entry; random damage never crashes a reader; the directory's resolution; the
 * compiler identity; tile_cache_list and tile_cache_clear.                              */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "rng.h"
#include "tile.h"

static char *make_dir(void) {
  char tmpl[] = "/tmp/tile_cache_test_XXXXXX";
  char *d = mkdtemp(tmpl);
  cr_assert_not_null(d);
  return strdup(d);
}

static void remove_dir(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
  cr_expect_eq(system(cmd), 0);
}

static const char key[] = "tile-module 1\nkernel=gemm\nconfig=BM=128\narch=sm_90a\n";
static const char key2[] = "tile-module 1\nkernel=gemm\nconfig=BM=64\narch=sm_90a\n";

static void entry_path(const char *dir, const char *k, char *out, size_t cap) {
  char name[RT_CACHE_NAME_MAX];
  rt_cache_file_name("mod", k, strlen(k), name);
  snprintf(out, cap, "%s/%s", dir, name);
}

static int store3(const char *dir, const char *k, const char *a, const char *b, size_t clen) {
  static char big[1 << 16];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (char)(i * 7 + 3);
  struct rt_cache_part parts[3] = {{a, strlen(a)}, {b, strlen(b)}, {big, clen}};
  char err[512];
  int rc = rt_cache_store(dir, "mod", k, strlen(k), parts, 3, err, sizeof err);
  return rc;
}

static enum rt_cache_result load(const char *dir, const char *k, struct rt_cache_entry *e) {
  char why[256];
  return rt_cache_load(NULL, dir, "mod", k, strlen(k), e, why, sizeof why);
}

static void expect_valid(const char *dir, const char *k) {
  struct rt_cache_entry e;
  cr_assert_eq(load(dir, k, &e), RT_CACHE_HIT);
  cr_assert_eq(e.nparts, 3);
  cr_expect_eq(e.parts[0].len, 11);
  cr_expect_eq(memcmp(e.parts[0].data, "threads=128", 11), 0);
  cr_expect_eq(e.parts[2].len, 5000);
  rt_cache_entry_free(&e);
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  if (n) cr_assert_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

static void *read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(*n + 1);
  cr_assert_eq(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

static unsigned count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  unsigned n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

Test(cache, round_trip) {
  char *dir = make_dir();
  char sub[600];
  snprintf(sub, sizeof sub, "%s/a/b", dir); /* created on the first store */
  struct rt_cache_entry e;
  cr_expect_eq(load(sub, key, &e), RT_CACHE_MISS);
  cr_assert_eq(store3(sub, key, "threads=128", "ptx text", 5000), 0);
  expect_valid(sub, key);
  cr_expect_eq(load(sub, key2, &e), RT_CACHE_MISS, "another key");
  cr_expect_eq(rt_cache_load(NULL, sub, "tune", key, strlen(key), &e, NULL, 0), RT_CACHE_MISS, "another kind");
  /* overwriting replaces */
  cr_assert_eq(store3(sub, key, "threads=128", "other ptx", 5000), 0);
  cr_assert_eq(load(sub, key, &e), RT_CACHE_HIT);
  cr_expect_eq(e.parts[1].len, 9);
  rt_cache_entry_free(&e);
  /* empty parts and no parts */
  struct rt_cache_part none[1] = {{"", 0}};
  cr_assert_eq(rt_cache_store(sub, "tune", key2, strlen(key2), none, 1, NULL, 0), 0);
  cr_assert_eq(rt_cache_load(NULL, sub, "tune", key2, strlen(key2), &e, NULL, 0), RT_CACHE_HIT);
  cr_expect_eq(e.nparts, 1);
  cr_expect_eq(e.parts[0].len, 0);
  rt_cache_entry_free(&e);
  /* "" is off: nothing stored, nothing found */
  cr_expect_eq(store3("", key, "threads=128", "x", 1), 0);
  cr_expect_eq(load("", key, &e), RT_CACHE_MISS);
  cr_expect_eq(count_files(sub, ".tmp-"), 0, "no temporary file is left behind");
  remove_dir(dir);
  free(dir);
}

Test(cache, damaged_entries_are_never_trusted) {
  char *dir = make_dir();
  char path[1024], path2[1024];
  entry_path(dir, key, path, sizeof path);
  entry_path(dir, key2, path2, sizeof path2);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0);
  size_t n;
  unsigned char *good = read_bytes(path, &n);
  struct rt_cache_entry e;
  char why[256];

  /* truncated at every interesting length */
  size_t cuts[] = {0, 1, 7, 8, 40, 87, 88, 89, 100, n / 2, n - 5001, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    write_bytes(path, good, cuts[i]);
    cr_expect_eq(rt_cache_load(NULL, dir, "mod", key, strlen(key), &e, why, sizeof why), RT_CACHE_BAD, "cut at %zu", cuts[i]);
    cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0, "rebuilt after the cut at %zu", cuts[i]);
    expect_valid(dir, key);
  }
  /* trailing garbage */
  unsigned char *longer = malloc(n + 3);
  memcpy(longer, good, n);
  memcpy(longer + n, "abc", 3);
  write_bytes(path, longer, n + 3);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
  free(longer);

  /* one flipped bit anywhere: header, checksum, key, payload */
  unsigned char *bad = malloc(n);
  for (size_t pos = 0; pos < n; pos += (pos < 200 ? 1 : 97)) {
    memcpy(bad, good, n);
    bad[pos] ^= 0x10;
    write_bytes(path, bad, n);
    cr_assert_eq(rt_cache_load(NULL, dir, "mod", key, strlen(key), &e, why, sizeof why), RT_CACHE_BAD, "flip at %zu", pos);
  }
  free(bad);

  /* a foreign file with our name */
  const char *foreign = "#!/bin/sh\necho this is not a cache entry, but long enough to have a header........\n"
                        "...........................................................................\n";
  write_bytes(path, foreign, strlen(foreign));
  cr_expect_eq(rt_cache_load(NULL, dir, "mod", key, strlen(key), &e, why, sizeof why), RT_CACHE_BAD);
  cr_expect(strstr(why, "magic"), "%s", why);

  /* a valid entry of another key under this key's name */
  cr_assert_eq(store3(dir, key2, "threads=128", "ptx text", 5000), 0);
  size_t n2;
  void *other = read_bytes(path2, &n2);
  write_bytes(path, other, n2);
  cr_expect_eq(rt_cache_load(NULL, dir, "mod", key, strlen(key), &e, why, sizeof why), RT_CACHE_BAD);
  cr_expect(strstr(why, "another key"), "%s", why);
  free(other);
  expect_valid(dir, key2);

  /* a zero-length file */
  write_bytes(path, "", 0);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0);
  expect_valid(dir, key);

  /* an empty directory where the file should be: removed and replaced */
  unlink(path);
  cr_assert_eq(mkdir(path, 0700), 0);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0);
  expect_valid(dir, key);
  /* a directory that is not empty cannot be replaced: the store fails cleanly */
  unlink(path);
  cr_assert_eq(mkdir(path, 0700), 0);
  char inner[1200];
  snprintf(inner, sizeof inner, "%s/x", path);
  write_bytes(inner, "x", 1);
  char err[512];
  struct rt_cache_part parts[1] = {{"x", 1}};
  cr_expect_neq(rt_cache_store(dir, "mod", key, strlen(key), parts, 1, err, sizeof err), 0);
  cr_expect(strstr(err, "cannot rename"), "%s", err);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
  cr_expect_eq(count_files(dir, ".tmp-"), 0, "the failed store removed its temporary file");
  unlink(inner);
  rmdir(path);

  /* a symbolic link to a valid entry is not followed */
  cr_assert_eq(symlink(path2, path), 0);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0, "the link is replaced, not its target");
  expect_valid(dir, key);
  expect_valid(dir, key2);

  /* an unreadable file */
  if (geteuid() != 0) {
    chmod(path, 0);
    cr_expect_eq(load(dir, key, &e), RT_CACHE_BAD);
    chmod(path, 0600);
  }
  free(good);
  remove_dir(dir);
  free(dir);
}

/* Random damage: whatever the bytes, a reader returns HIT only for the intact file. */
Test(cache, random_damage_never_crashes) {
  char *dir = make_dir();
  char path[1024];
  entry_path(dir, key, path, sizeof path);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 300), 0);
  size_t n;
  unsigned char *good = read_bytes(path, &n);
  unsigned char *buf = malloc(n + 512);
  struct rng damage;
  rng_seed(&damage, 0x243f6a8885a308d3ull); /* fixed: the same damage every run */
  for (int it = 0; it < 400; it++) {
    uint64_t s = rng_u64(&damage);
    size_t len;
    if (it % 4 == 0) { /* pure noise of a random length, sometimes with our magic */
      len = (size_t)(s % (n + 256));
      for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)((s >> (i % 56)) + i * 131);
      if (len >= 8 && it % 8 == 0) memcpy(buf, "TILECACH", 8);
    } else { /* the real entry with a few random bytes changed and maybe cut */
      memcpy(buf, good, n);
      len = n;
      int flips = 1 + (int)(s % 4);
      for (int f = 0; f < flips; f++) {
        s = rng_u64(&damage);
        size_t at = (size_t)(s % n);
        unsigned char v = (unsigned char)(s >> 40);
        if (v == buf[at]) v ^= 1;
        buf[at] = v;
      }
      if (it % 3 == 0) len = (size_t)(s % n);
    }
    write_bytes(path, buf, len);
    struct rt_cache_entry e;
    enum rt_cache_result r = load(dir, key, &e);
    cr_assert_neq(r, RT_CACHE_HIT, "iteration %d: a damaged file was trusted", it);
  }
  free(buf);
  free(good);
  remove_dir(dir);
  free(dir);
}

/* A writer killed between writing its temporary file and renaming it. */
Test(cache, killed_writer_leaves_a_working_cache) {
  char *dir = make_dir();
  cr_assert_eq(store3(dir, key2, "threads=128", "ptx text", 5000), 0); /* an older entry */
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    setenv("TILE_CACHE_TEST_DELAY_MS", "20000", 1);
    store3(dir, key, "threads=128", "ptx text", 5000);
    _exit(0);
  }
  /* wait for its temporary file (complete, fsync'd, not renamed), then kill it */
  for (int i = 0; i < 2000 && count_files(dir, ".tmp-") == 0; i++) usleep(5000);
  cr_assert_eq(count_files(dir, ".tmp-"), 1, "the writer's temporary file exists");
  usleep(20000);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_expect(WIFSIGNALED(status));

  struct rt_cache_entry e;
  cr_expect_eq(load(dir, key, &e), RT_CACHE_MISS, "the interrupted entry does not exist");
  expect_valid(dir, key2);
  /* the cache still works; the stray file is listed as temp and removed by clear */
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0);
  expect_valid(dir, key);
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = dir};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), dir);
  unsigned removed = 0;
  cr_assert_eq(tile_cache_clear(ctx, &removed), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(removed, 3, "two entries and the temporary file");
  cr_expect_eq(count_files(dir, ".tmp-"), 0);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_MISS);
  tile_context_destroy(ctx);

  /* a writer killed before it finished writing the temporary file: the same */
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s/.tmp-mod-deadbeef-XXXXXX", dir);
    int fd = mkstemp(tmp);
    if (fd >= 0 && write(fd, "TILECACH\1\0", 10) == 10) pause();
    _exit(1);
  }
  for (int i = 0; i < 2000 && count_files(dir, ".tmp-") == 0; i++) usleep(5000);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  cr_expect_eq(load(dir, key, &e), RT_CACHE_MISS);
  cr_assert_eq(store3(dir, key, "threads=128", "ptx text", 5000), 0);
  expect_valid(dir, key);
  remove_dir(dir);
  free(dir);
}

/* Several processes store the same key at once: all succeed; one complete entry remains. */
Test(cache, concurrent_writers_of_one_key) {
  char *dir = make_dir();
  enum { W = 8 };
  pid_t pids[W];
  for (int w = 0; w < W; w++) {
    pids[w] = fork();
    cr_assert_geq(pids[w], 0);
    if (pids[w] == 0) {
      setenv("TILE_CACHE_TEST_DELAY_MS", "30", 1); /* widen the window between write and rename */
      char ptx[64];
      snprintf(ptx, sizeof ptx, "ptx of writer %d", w);
      int rc = 0;
      for (int rep = 0; rep < 5 && !rc; rep++) rc = store3(dir, key, "threads=128", ptx, 5000 + (size_t)w);
      _exit(rc ? 1 : 0);
    }
  }
  for (int w = 0; w < W; w++) {
    int status = 0;
    waitpid(pids[w], &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", w);
  }
  struct rt_cache_entry e;
  cr_assert_eq(load(dir, key, &e), RT_CACHE_HIT);
  int writer = -1;
  cr_assert_eq(sscanf((const char *)e.parts[1].data, "ptx of writer %d", &writer), 1);
  cr_expect(writer >= 0 && writer < W);
  cr_expect_eq(e.parts[2].len, 5000 + (size_t)writer, "the parts of one writer, complete");
  rt_cache_entry_free(&e);
  cr_expect_eq(count_files(dir, ".tmp-"), 0);
  cr_expect_eq(count_files(dir, "mod-"), 1);
  remove_dir(dir);
  free(dir);
}

static int listed, listed_valid, listed_temp;
static void on_entry(void *ud, const tile_cache_entry *e) {
  (void)ud;
  listed++;
  listed_valid += e->valid;
  listed_temp += strcmp(e->kind, "temp") == 0;
  cr_expect_not_null(e->summary);
  cr_expect_gt(e->mtime, 0);
}

Test(cache, list_and_clear_touch_only_cache_files) {
  char *dir = make_dir();
  /* listed as valid: PTX text and no cubin (a module entry's parts are checked too) */
  cr_assert_eq(store3(dir, key, "threads=128", "//\n.version 8.7\n.target sm_90a\n", 0), 0);
  cr_assert_eq(store3(dir, key2, "threads=128", "ptx text", 5000), 0);
  char path[1024], other[1024], tmp[1024];
  entry_path(dir, key2, path, sizeof path);
  write_bytes(path, "garbage", 7); /* listed as invalid */
  snprintf(other, sizeof other, "%s/notes.txt", dir);
  write_bytes(other, "keep me", 7);
  snprintf(tmp, sizeof tmp, "%s/.tmp-mod-abc-123456", dir);
  write_bytes(tmp, "partial", 7);
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = dir};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  listed = listed_valid = listed_temp = 0;
  cr_assert_eq(tile_cache_list(ctx, on_entry, NULL), TILE_OK);
  cr_expect_eq(listed, 3);
  cr_expect_eq(listed_valid, 1);
  cr_expect_eq(listed_temp, 1);
  unsigned removed = 0;
  cr_assert_eq(tile_cache_clear(ctx, &removed), TILE_OK);
  cr_expect_eq(removed, 3);
  cr_expect_eq(access(other, F_OK), 0, "files that are not the cache's stay");
  listed = 0;
  cr_assert_eq(tile_cache_list(ctx, on_entry, NULL), TILE_OK);
  cr_expect_eq(listed, 0);
  tile_context_destroy(ctx);

  /* a missing directory lists nothing and clears nothing */
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/none", dir);
  o.cache_dir = missing;
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_expect_eq(tile_cache_list(ctx, on_entry, NULL), TILE_OK);
  cr_expect_eq(tile_cache_clear(ctx, &removed), TILE_OK);
  cr_expect_eq(removed, 0);
  tile_context_destroy(ctx);
  remove_dir(dir);
  free(dir);
}

Test(cache, directory_resolution) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = "/some/where"};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "/some/where");
  tile_context_destroy(ctx);
  o.cache_dir = "";
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "", "\"\" turns the cache off");
  tile_context_destroy(ctx);

  setenv("TILE_CACHE_DIR", "/from/env", 1);
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "/from/env");
  tile_context_destroy(ctx);
  setenv("TILE_CACHE_DIR", "", 1);
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "");
  tile_context_destroy(ctx);
  unsetenv("TILE_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "/xdg/tile");
  tile_context_destroy(ctx);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "/home/someone/.cache/tile");
  tile_context_destroy(ctx);
  unsetenv("HOME");
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_expect_str_eq(tile_cache_path(ctx), "", "no home: no cache");
  tile_context_destroy(ctx);
}

Test(cache, compiler_identity_and_hashing) {
  const char *id = rt_compiler_id();
  cr_expect(strstr(id, "tile ") == id, "%s", id);
  cr_expect(strstr(id, " build ") || strstr(id, " built "), "%s", id);
  cr_expect_eq(rt_compiler_id(), id, "computed once");
  uint8_t h[RT_HASH_LEN];
  char hex[2 * RT_HASH_LEN + 1];
  rt_hash("", 0, h); /* BLAKE3 of the empty input */
  rt_hex(h, RT_HASH_LEN, hex);
  cr_expect_str_eq(hex, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
  /* the incremental form gives the hash of the concatenation */
  static const char text[] = "kernel k(X: f32[N]) grid(1) { }";
  uint8_t one[RT_HASH_LEN], parts[RT_HASH_LEN];
  rt_hash(text, sizeof text - 1, one);
  rt_hasher hs;
  rt_hasher_init(&hs);
  rt_hasher_update(&hs, text, 7);
  rt_hasher_update(&hs, "", 0);
  rt_hasher_update(&hs, text + 7, sizeof text - 1 - 7);
  rt_hasher_final(&hs, parts);
  cr_expect_arr_eq(one, parts, RT_HASH_LEN);
  char n1[RT_CACHE_NAME_MAX], n2[RT_CACHE_NAME_MAX];
  rt_cache_file_name("mod", key, strlen(key), n1);
  rt_cache_file_name("tune", key, strlen(key), n2);
  cr_expect_str_eq(rt_cache_classify(n1), "module");
  cr_expect_str_eq(rt_cache_classify(n2), "tune");
  cr_expect_null(rt_cache_classify("mod-xyz"));
  cr_expect_null(rt_cache_classify("notes.txt"));
  cr_expect_str_eq(rt_cache_classify(".tmp-mod-abc-XXXXXX"), "temp");
}
