/* cache.c - the on-disk cache: entry files (see cache.h for the guarantees), the cache
 * directory, the compiler identity used in keys, and the public tile_cache_* functions.
 *
 * Entry file layout (all integers little-endian):
 *
 *   off  0  magic "TILECACH"
 *   off  8  u32 format version (RT_CACHE_FORMAT)
 *   off 12  u32 number of parts (<= RT_CACHE_MAX_PARTS)
 *   off 16  u64 key length
 *   off 24  u64 part lengths [RT_CACHE_MAX_PARTS] (unused ones 0)
 *   off 56  u8  checksum[32] = BLAKE3(bytes [0, 56) || bytes [88, end))
 *   off 88  key text, then the parts in order
 *
 * The file must be exactly as long as the header says; the checksum covers every other
 * byte, so a torn write, a truncation, a flipped byte or a file of another program is
 * detected, and the key comparison catches a (practically impossible) name collision. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "llvm-c/blake3.h"
#include "rt.h"

enum {
  RT_CACHE_FORMAT = 1,
  HDR_MAGIC = 0,
  HDR_VERSION = 8,
  HDR_NPARTS = 12,
  HDR_KEYLEN = 16,
  HDR_PARTLEN = 24,
  HDR_SUM = 56,
  HDR_SIZE = 88
};
static const char magic[8] = {'T', 'I', 'L', 'E', 'C', 'A', 'C', 'H'};
#define RT_CACHE_MAX_FILE ((uint64_t)1 << 30) /* larger files are not ours */

_Static_assert(HDR_PARTLEN + 8 * RT_CACHE_MAX_PARTS == HDR_SUM, "header layout");
_Static_assert(HDR_SUM + RT_HASH_LEN == HDR_SIZE, "header layout");

/* ---- hashing ---- */

_Static_assert(sizeof(llvm_blake3_hasher) <= sizeof(rt_hasher) && _Alignof(llvm_blake3_hasher) <= 16,
               "rt_hasher holds an llvm_blake3_hasher");

void rt_hasher_init(rt_hasher *h) { llvm_blake3_hasher_init((llvm_blake3_hasher *)h->state); }
void rt_hasher_update(rt_hasher *h, const void *p, size_t n) {
  llvm_blake3_hasher_update((llvm_blake3_hasher *)h->state, p, n);
}
void rt_hasher_final(rt_hasher *h, uint8_t out[RT_HASH_LEN]) {
  llvm_blake3_hasher_finalize((llvm_blake3_hasher *)h->state, out, RT_HASH_LEN);
}

void rt_hash(const void *p, size_t n, uint8_t out[RT_HASH_LEN]) {
  llvm_blake3_hasher h;
  llvm_blake3_hasher_init(&h);
  llvm_blake3_hasher_update(&h, p, n);
  llvm_blake3_hasher_finalize(&h, out, RT_HASH_LEN);
}

void rt_hex(const uint8_t *h, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[h[i] >> 4];
    out[2 * i + 1] = digits[h[i] & 15];
  }
  out[2 * n] = 0;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* ---- the compiler identity ---- */

static pthread_once_t id_once = PTHREAD_ONCE_INIT;
static char id_text[256];

struct build_id_search {
  uintptr_t addr;
  char hex[2 * 64 + 1];
};

/* dl_iterate_phdr callback: in the object whose loaded segments hold `addr`, finds the
 * NT_GNU_BUILD_ID note. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct build_id_search *s = data;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph->p_memsz) mine = true;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const uint8_t *p = (const uint8_t *)((uintptr_t)info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_memsz;
    while (left >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) nh;
      memcpy(&nh, p, sizeof nh);
      size_t namesz = ((size_t)nh.n_namesz + 3) & ~(size_t)3, descsz = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
      size_t total = sizeof nh + namesz + descsz;
      if (total > left) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(p + sizeof nh, "GNU", 4) == 0 &&
          nh.n_descsz > 0 && nh.n_descsz <= 64) {
        rt_hex(p + sizeof nh + namesz, nh.n_descsz, s->hex);
        return 1;
      }
      p += total;
      left -= total;
    }
  }
  return 1; /* our object, but no build id */
}

static void init_compiler_id(void) {
  struct build_id_search s = {.addr = (uintptr_t)(void *)&id_once, .hex = ""};
  dl_iterate_phdr(find_build_id, &s);
  if (s.hex[0])
    snprintf(id_text, sizeof id_text, "%s build %s", rt_version(), s.hex);
  else /* no build id: the time this file was compiled is the best we have */
    snprintf(id_text, sizeof id_text, "%s built %s %s", rt_version(), __DATE__, __TIME__);
}

const char *rt_compiler_id(void) {
  pthread_once(&id_once, init_compiler_id);
  return id_text;
}

/* ---- the directory ---- */

bool rt_cache_resolve_dir(const char *opt, char *buf, size_t cap) {
  const char *env = getenv("TILE_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (opt)
    n = snprintf(buf, cap, "%s", opt);
  else if (env)
    n = snprintf(buf, cap, "%s", env);
  else if (xdg && xdg[0] == '/')
    n = snprintf(buf, cap, "%s/tile", xdg);
  else if (home && home[0])
    n = snprintf(buf, cap, "%s/.cache/tile", home);
  else
    n = snprintf(buf, cap, "%s", "");
  if (n < 0 || (size_t)n >= cap) {
    buf[0] = 0;
    return false;
  }
  return true;
}

int rt_cache_dir_check(const char *dir, char *why, size_t whylen) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno == ENOENT) return 1;
    snprintf(why, whylen, "'%s': %s", dir, strerror(errno));
    return -1;
  }
  uid_t me = geteuid();
  if (S_ISLNK(st.st_mode)) {
    /* another user's link could be pointed anywhere at any time */
    if (st.st_uid != me) {
      snprintf(why, whylen, "'%s' is a symbolic link owned by uid %u, not by this user (uid %u)", dir,
               (unsigned)st.st_uid, (unsigned)me);
      return -1;
    }
    if (stat(dir, &st) != 0) {
      snprintf(why, whylen, "'%s' is a symbolic link to nothing usable: %s", dir, strerror(errno));
      return -1;
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, whylen, "'%s' is not a directory", dir);
    return -1;
  }
  if (st.st_uid != me) {
    snprintf(why, whylen, "'%s' is owned by uid %u, not by this user (uid %u)", dir, (unsigned)st.st_uid, (unsigned)me);
    return -1;
  }
  if (st.st_mode & 022) {
    snprintf(why, whylen, "'%s' is writable by %s (mode %04o): others could plant entries", dir,
             (st.st_mode & 002) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
    return -1;
  }
  return 0;
}

/* mkdir -p with mode 0700 for what it creates. */
static int make_dirs(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) return -1;
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != 0) continue;
    char c = path[i];
    path[i] = 0;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    path[i] = c;
  }
  return 0;
}

/* ---- entries ---- */

void rt_cache_file_name(const char *kind, const char *key, size_t key_len, char out[RT_CACHE_NAME_MAX]) {
  llvm_blake3_hasher h;
  llvm_blake3_hasher_init(&h);
  llvm_blake3_hasher_update(&h, kind, strlen(kind) + 1);
  llvm_blake3_hasher_update(&h, key, key_len);
  uint8_t d[RT_HASH_LEN];
  llvm_blake3_hasher_finalize(&h, d, sizeof d);
  char hex[2 * RT_HASH_LEN + 1];
  rt_hex(d, sizeof d, hex);
  snprintf(out, RT_CACHE_NAME_MAX, "%s-%s", kind, hex);
}

static void checksum(const uint8_t *file, size_t size, uint8_t out[RT_HASH_LEN]) {
  llvm_blake3_hasher h;
  llvm_blake3_hasher_init(&h);
  llvm_blake3_hasher_update(&h, file, HDR_SUM);
  llvm_blake3_hasher_update(&h, file + HDR_SIZE, size - HDR_SIZE);
  llvm_blake3_hasher_finalize(&h, out, RT_HASH_LEN);
}

static enum rt_cache_result reject(char *why, size_t whylen, const char *msg) {
  if (why && whylen) snprintf(why, whylen, "%s", msg);
  return RT_CACHE_BAD;
}

/* Reads a whole regular file (at most RT_CACHE_MAX_FILE bytes). */
static enum rt_cache_result read_whole(const struct tl_alloc *alloc, const char *path, void **buf, size_t *size,
                                       char *why, size_t whylen) {
  *buf = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return RT_CACHE_MISS;
    return reject(why, whylen, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return reject(why, whylen, "not a regular file");
  }
  if ((uint64_t)st.st_size < HDR_SIZE || (uint64_t)st.st_size > RT_CACHE_MAX_FILE) {
    close(fd);
    return reject(why, whylen, st.st_size < HDR_SIZE ? "shorter than a header" : "too large");
  }
  size_t n = (size_t)st.st_size;
  uint8_t *p = tl_malloc(alloc, n + 1);
  if (!p) {
    close(fd);
    if (why && whylen) snprintf(why, whylen, "out of memory");
    return RT_CACHE_NOMEM;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  /* a file that grew since fstat is not the file we measured */
  uint8_t extra;
  ssize_t more = got == n ? read(fd, &extra, 1) : 0;
  close(fd);
  if (got != n || more > 0) {
    tl_free(p);
    return reject(why, whylen, "changed while being read");
  }
  p[n] = 0;
  *buf = p;
  *size = n;
  return RT_CACHE_HIT;
}

/* Checks the framing of a file image; fills out's parts and the key span. */
static enum rt_cache_result parse(uint8_t *file, size_t size, struct rt_cache_entry *out, const char **key,
                                  size_t *key_len, char *why, size_t whylen) {
  if (memcmp(file + HDR_MAGIC, magic, sizeof magic) != 0) return reject(why, whylen, "foreign file (bad magic)");
  if (get_u32(file + HDR_VERSION) != RT_CACHE_FORMAT)
    return reject(why, whylen, "another format version");
  uint32_t nparts = get_u32(file + HDR_NPARTS);
  if (nparts > RT_CACHE_MAX_PARTS) return reject(why, whylen, "bad part count");
  uint64_t klen = get_u64(file + HDR_KEYLEN);
  uint64_t total = HDR_SIZE;
  if (klen > RT_CACHE_MAX_FILE) return reject(why, whylen, "bad key length");
  total += klen;
  uint64_t plen[RT_CACHE_MAX_PARTS];
  for (unsigned i = 0; i < RT_CACHE_MAX_PARTS; i++) {
    plen[i] = get_u64(file + HDR_PARTLEN + 8 * i);
    if (plen[i] > RT_CACHE_MAX_FILE || (i >= nparts && plen[i])) return reject(why, whylen, "bad part length");
    total += plen[i];
  }
  if (total != size) return reject(why, whylen, total > size ? "truncated" : "trailing bytes");
  uint8_t sum[RT_HASH_LEN];
  checksum(file, size, sum);
  if (memcmp(sum, file + HDR_SUM, RT_HASH_LEN) != 0) return reject(why, whylen, "checksum mismatch");
  size_t off = HDR_SIZE;
  *key = (const char *)file + off;
  *key_len = (size_t)klen;
  off += (size_t)klen;
  memset(out->parts, 0, sizeof out->parts);
  out->nparts = nparts;
  for (unsigned i = 0; i < nparts; i++) {
    out->parts[i].data = file + off;
    out->parts[i].len = (size_t)plen[i];
    off += (size_t)plen[i];
  }
  return RT_CACHE_HIT;
}

enum rt_cache_result rt_cache_read_file(const struct tl_alloc *alloc, const char *path, struct rt_cache_entry *out,
                                        const char **key, size_t *key_len, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (why && whylen) why[0] = 0;
  void *buf;
  size_t size;
  enum rt_cache_result r = read_whole(alloc, path, &buf, &size, why, whylen);
  if (r != RT_CACHE_HIT) return r;
  r = parse(buf, size, out, key, key_len, why, whylen);
  if (r != RT_CACHE_HIT) {
    tl_free(buf);
    memset(out, 0, sizeof *out);
    return r;
  }
  out->buf = buf;
  out->size = size;
  return RT_CACHE_HIT;
}

enum rt_cache_result rt_cache_load(const struct tl_alloc *alloc, const char *dir, const char *kind, const char *key,
                                   size_t key_len, struct rt_cache_entry *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (why && whylen) why[0] = 0;
  if (!dir || !dir[0]) return RT_CACHE_MISS;
  char reason[4200];
  int trust = rt_cache_dir_check(dir, reason, sizeof reason);
  if (trust > 0) return RT_CACHE_MISS;
  if (trust < 0) {
    if (why && whylen) snprintf(why, whylen, "the cache directory is refused: %s", reason);
    return RT_CACHE_BAD;
  }
  char name[RT_CACHE_NAME_MAX], path[4096 + RT_CACHE_NAME_MAX];
  rt_cache_file_name(kind, key, key_len, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const char *fkey;
  size_t fkey_len;
  enum rt_cache_result r = rt_cache_read_file(alloc, path, out, &fkey, &fkey_len, why, whylen);
  if (r != RT_CACHE_HIT) return r;
  if (fkey_len != key_len || memcmp(fkey, key, key_len) != 0) {
    rt_cache_entry_free(out);
    return reject(why, whylen, "another key under this name");
  }
  return RT_CACHE_HIT;
}

void rt_cache_entry_free(struct rt_cache_entry *e) {
  if (!e) return;
  tl_free(e->buf);
  memset(e, 0, sizeof *e);
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A test hook (tests/cli/cache_robust.sh, test_cache.c): widens the window between writing
 * an entry and renaming it into place. Not compiled into release packages (TILE_TEST_HOOKS
 * off, tools/carry.sh). */
static void test_delay(void) {
#ifdef TILE_TEST_HOOKS
  const char *d = getenv("TILE_CACHE_TEST_DELAY_MS");
  long ms = d ? strtol(d, NULL, 10) : 0;
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
#endif
}

static int store_fail(char *err, size_t errlen, const char *what, const char *path) {
  if (err && errlen) snprintf(err, errlen, "cache: %s '%s': %s", what, path, strerror(errno));
  return -1;
}

int rt_cache_store(const char *dir, const char *kind, const char *key, size_t key_len,
                   const struct rt_cache_part *parts, unsigned nparts, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!dir || !dir[0]) return 0;
  if (nparts > RT_CACHE_MAX_PARTS || strlen(dir) > 4000) {
    errno = EINVAL;
    return store_fail(err, errlen, "bad entry for", dir);
  }
  if (make_dirs(dir) != 0) return store_fail(err, errlen, "cannot create the directory", dir);
  char reason[4200];
  if (rt_cache_dir_check(dir, reason, sizeof reason) != 0) {
    if (err && errlen) snprintf(err, errlen, "cache: not stored: the cache directory is refused: %s", reason);
    return -1;
  }
  char name[RT_CACHE_NAME_MAX], path[4096 + RT_CACHE_NAME_MAX], tmp[4096 + RT_CACHE_NAME_MAX + 16];
  rt_cache_file_name(kind, key, key_len, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", dir, name);

  uint8_t hdr[HDR_SIZE];
  memset(hdr, 0, sizeof hdr);
  memcpy(hdr + HDR_MAGIC, magic, sizeof magic);
  put_u32(hdr + HDR_VERSION, RT_CACHE_FORMAT);
  put_u32(hdr + HDR_NPARTS, nparts);
  put_u64(hdr + HDR_KEYLEN, key_len);
  for (unsigned i = 0; i < nparts; i++) put_u64(hdr + HDR_PARTLEN + 8 * i, parts[i].len);
  llvm_blake3_hasher h;
  llvm_blake3_hasher_init(&h);
  llvm_blake3_hasher_update(&h, hdr, HDR_SUM);
  llvm_blake3_hasher_update(&h, key, key_len);
  for (unsigned i = 0; i < nparts; i++) llvm_blake3_hasher_update(&h, parts[i].data, parts[i].len);
  llvm_blake3_hasher_finalize(&h, hdr + HDR_SUM, RT_HASH_LEN);

  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return store_fail(err, errlen, "cannot create a temporary file in", dir);
  int bad = write_all(fd, hdr, sizeof hdr) || write_all(fd, key, key_len);
  for (unsigned i = 0; i < nparts && !bad; i++) bad = write_all(fd, parts[i].data, parts[i].len);
  if (!bad) bad = fsync(fd);
  if (close(fd) != 0) bad = 1;
  if (bad) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return store_fail(err, errlen, "cannot write", tmp);
  }
  test_delay();
  if (rename(tmp, path) != 0) {
    /* an empty directory (or another non-file) squatting on the name: remove and retry */
    if ((errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) && rmdir(path) == 0 && rename(tmp, path) == 0)
      goto renamed;
    int e = errno;
    unlink(tmp);
    errno = e;
    return store_fail(err, errlen, "cannot rename the entry to", path);
  }
renamed:;
  /* make the rename durable too (best effort) */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return 0;
}

/* ---- checks of what an entry holds ---- */

static bool check_fail(char *why, size_t whylen, const char *fmt, ...) TL_PRINTF(3, 4);
static bool check_fail(char *why, size_t whylen, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* Whether [off, off + count * size) lies within len bytes (no overflow: count and size are
 * at most 16 bits). */
static bool within(uint64_t off, uint64_t count, uint64_t size, size_t len) {
  return off <= len && count * size <= len - off;
}

enum {
  ELF_EHSIZE = 64,  /* sizeof(Elf64_Ehdr) */
  ELF_SHENTSIZE = 64, /* sizeof(Elf64_Shdr) */
  ELF_PHENTSIZE = 56, /* sizeof(Elf64_Phdr) */
  ELF_EM_CUDA = 190,
  ELF_SHT_NOBITS = 8,
  ELF_PN_XNUM = 0xffff,
  ELF_SHN_LORESERVE = 0xff00
};

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

bool rt_cubin_check(const void *data, size_t len, char *why, size_t whylen) {
  const uint8_t *p = data;
  if (!p || len < ELF_EHSIZE) return check_fail(why, whylen, "cubin: %zu bytes, shorter than an ELF header", len);
  if (len > RT_CACHE_MAX_FILE) return check_fail(why, whylen, "cubin: implausibly large (%zu bytes)", len);
  if (memcmp(p, "\x7f" "ELF", 4) != 0) return check_fail(why, whylen, "cubin: not an ELF image (bad magic)");
  if (p[4] != 2) return check_fail(why, whylen, "cubin: ELF class %u, not ELFCLASS64", p[4]);
  if (p[5] != 1) return check_fail(why, whylen, "cubin: ELF data encoding %u, not little endian", p[5]);
  if (get_u16(p + 18) != ELF_EM_CUDA)
    return check_fail(why, whylen, "cubin: ELF machine %u, not EM_CUDA (%d)", get_u16(p + 18), ELF_EM_CUDA);
  uint64_t phoff = get_u64(p + 32), shoff = get_u64(p + 40);
  unsigned ehsize = get_u16(p + 52), phentsize = get_u16(p + 54), phnum = get_u16(p + 56);
  unsigned shentsize = get_u16(p + 58), shnum = get_u16(p + 60), shstrndx = get_u16(p + 62);
  if (ehsize != ELF_EHSIZE) return check_fail(why, whylen, "cubin: ELF header size %u, not %d", ehsize, ELF_EHSIZE);
  /* the extended numbering (counts kept in section 0) is not used by cubins: refused */
  if (phnum == ELF_PN_XNUM || (shnum == 0 && shoff != 0) || shstrndx >= ELF_SHN_LORESERVE)
    return check_fail(why, whylen, "cubin: extended ELF section numbering");
  if (phnum && (phentsize != ELF_PHENTSIZE || !within(phoff, phnum, ELF_PHENTSIZE, len)))
    return check_fail(why, whylen, "cubin: the program header table (%u x %u bytes at %llu) is not within its %zu bytes",
                      phnum, phentsize, (unsigned long long)phoff, len);
  if (shnum && (shentsize != ELF_SHENTSIZE || !within(shoff, shnum, ELF_SHENTSIZE, len)))
    return check_fail(why, whylen, "cubin: the section header table (%u x %u bytes at %llu) is not within its %zu bytes",
                      shnum, shentsize, (unsigned long long)shoff, len);
  if (shstrndx && shstrndx >= shnum)
    return check_fail(why, whylen, "cubin: section name table %u of %u sections", shstrndx, shnum);
  for (unsigned i = 0; i < phnum; i++) {
    const uint8_t *ph = p + phoff + (uint64_t)i * ELF_PHENTSIZE;
    uint64_t off = get_u64(ph + 8), filesz = get_u64(ph + 32);
    if (off > len || filesz > len - off)
      return check_fail(why, whylen, "cubin: segment %u (%llu bytes at %llu) is not within its %zu bytes", i,
                        (unsigned long long)filesz, (unsigned long long)off, len);
  }
  for (unsigned i = 0; i < shnum; i++) {
    const uint8_t *sh = p + shoff + (uint64_t)i * ELF_SHENTSIZE;
    uint64_t off = get_u64(sh + 24), size = get_u64(sh + 32);
    if (get_u32(sh + 4) == ELF_SHT_NOBITS) continue; /* occupies no bytes of the file */
    if (off > len || size > len - off)
      return check_fail(why, whylen, "cubin: section %u (%llu bytes at %llu) is not within its %zu bytes", i,
                        (unsigned long long)size, (unsigned long long)off, len);
  }
  return true;
}

/* Whether the n bytes at p contain the NUL-free string s. */
static bool contains(const char *p, size_t n, const char *s) {
  size_t m = strlen(s);
  for (size_t i = 0; m <= n && i <= n - m; i++)
    if (p[i] == s[0] && memcmp(p + i, s, m) == 0) return true;
  return false;
}

bool rt_ptx_check(const void *data, size_t len, char *why, size_t whylen) {
  const char *p = data;
  if (!p || len == 0) return check_fail(why, whylen, "PTX: empty");
  if (len > RT_CACHE_MAX_FILE) return check_fail(why, whylen, "PTX: implausibly large (%zu bytes)", len);
  if (memchr(p, 0, len)) return check_fail(why, whylen, "PTX: a NUL byte inside the text");
  if (!contains(p, len, ".version") || !contains(p, len, ".target"))
    return check_fail(why, whylen, "PTX: no .version or .target directive");
  return true;
}

static bool all_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return s[n] == 0;
}

const char *rt_cache_classify(const char *name) {
  if (strncmp(name, "mod-", 4) == 0 && strlen(name) == 4 + 64 && all_hex(name + 4, 64)) return "module";
  if (strncmp(name, "tune-", 5) == 0 && strlen(name) == 5 + 64 && all_hex(name + 5, 64)) return "tune";
  if (strncmp(name, ".tmp-mod-", 9) == 0 || strncmp(name, ".tmp-tune-", 10) == 0) return "temp";
  return NULL;
}

/* ---- the public functions ---- */

const char *rt_cache_path(const tile_context *ctx) { return ctx ? ctx->cache_dir : ""; }

TILE_API const char *tile_cache_status(const tile_context *ctx) { return ctx ? ctx->cache_status : "no context"; }

TILE_API tile_status tile_cache_get_stats(const tile_context *ctx, tile_cache_stats *out) {
  if (!ctx || !out) return TILE_INVALID_ARGUMENT;
  *out = ctx->cache_stats;
  return TILE_OK;
}

void rt_cache_note(tile_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->cache_status, sizeof ctx->cache_status, fmt, ap);
  va_end(ap);
}

/* The value of "name=" on its own line of a key text, copied into buf. */
static const char *key_field(const char *key, size_t len, const char *name, char *buf, size_t cap) {
  size_t nl = strlen(name);
  for (size_t i = 0; i < len;) {
    size_t e = i;
    while (e < len && key[e] != '\n') e++;
    if (e - i > nl && memcmp(key + i, name, nl) == 0 && key[i + nl] == '=') {
      size_t n = e - i - nl - 1;
      if (n >= cap) n = cap - 1;
      memcpy(buf, key + i + nl + 1, n);
      buf[n] = 0;
      return buf;
    }
    i = e + 1;
  }
  return NULL;
}

/* What a load would refuse in the parts of a well-framed entry (the checks that do not need
 * the kernel): true, with the reason in why, when the entry would be ignored. */
static bool parts_unsound(const char *kind, struct rt_cache_entry *ce, char *why, size_t whylen) {
  bool ok = true;
  if (strcmp(kind, "module") == 0) {
    ok = ce->nparts == 3 && rt_ptx_check(ce->parts[1].data, ce->parts[1].len, why, whylen) &&
         (!ce->parts[2].len || rt_cubin_check(ce->parts[2].data, ce->parts[2].len, why, whylen));
    if (ce->nparts != 3) snprintf(why, whylen, "%u parts, not 3", ce->nparts);
  } else if (strcmp(kind, "tune") == 0 && ce->nparts != 2) {
    ok = false;
    snprintf(why, whylen, "%u parts, not 2", ce->nparts);
  }
  if (!ok) rt_cache_entry_free(ce);
  return !ok;
}

/* Opens the cache directory for listing: *d is NULL (and the status TILE_OK) when there is
 * no cache, or no directory yet. */
static tile_status open_cache_dir(tile_context *ctx, const char **dir, DIR **d) {
  *dir = rt_cache_path(ctx);
  *d = NULL;
  if (!(*dir)[0]) return TILE_OK;
  char why[4200];
  int trust = rt_cache_dir_check(*dir, why, sizeof why);
  if (trust > 0) return TILE_OK;
  if (trust < 0) return rt_error(ctx, TILE_CACHE, "the cache directory is refused: %s", why);
  *d = opendir(*dir);
  if (*d || errno == ENOENT) return TILE_OK;
  return rt_error(ctx, TILE_CACHE, "cannot read the cache directory '%s': %s", *dir, strerror(errno));
}

TILE_API tile_status tile_cache_list(tile_context *ctx, tile_cache_fn fn, void *ud) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (!fn) return rt_error(ctx, TILE_INVALID_ARGUMENT, "fn is NULL");
  const char *dir;
  DIR *d;
  tile_status os = open_cache_dir(ctx, &dir, &d);
  if (!d) return os;
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *kind = rt_cache_classify(de->d_name);
    if (!kind) continue;
    char path[4096 + 300];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    tile_cache_entry e = {.file = de->d_name, .kind = kind, .bytes = (uint64_t)st.st_size,
                          .mtime = (int64_t)st.st_mtime, .valid = 0, .summary = ""};
    char summary[1024] = "", why[128] = "";
    struct rt_cache_entry ce;
    enum rt_cache_result r;
    const char *key = NULL;
    size_t klen = 0;
    if (strcmp(kind, "temp") == 0) {
      snprintf(summary, sizeof summary, "temporary file of an interrupted store");
    } else if ((r = rt_cache_read_file(&ctx->alloc, path, &ce, &key, &klen, why, sizeof why)) == RT_CACHE_NOMEM) {
      closedir(d);
      return rt_error(ctx, TILE_NOMEM, "out of memory reading '%s'", path);
    } else if (r == RT_CACHE_HIT && !parts_unsound(kind, &ce, why, sizeof why)) {
      char v[4][256];
      const char *kn = key_field(key, klen, "kernel", v[0], sizeof v[0]);
      const char *cf = key_field(key, klen, strcmp(kind, "tune") == 0 ? "pins" : "config", v[1], sizeof v[1]);
      const char *ar = key_field(key, klen, "arch", v[2], sizeof v[2]);
      const char *sz = key_field(key, klen, "sizes", v[3], sizeof v[3]);
      int n = snprintf(summary, sizeof summary, "%s [%s] %s", kn ? kn : "?", cf ? cf : "", ar ? ar : "");
      if (sz && n > 0 && (size_t)n < sizeof summary) snprintf(summary + n, sizeof summary - (size_t)n, " sizes %s", sz);
      if (strcmp(kind, "module") == 0 && ce.nparts == 3) { /* whether a load skips the driver's JIT */
        n = (int)strlen(summary);
        snprintf(summary + n, sizeof summary - (size_t)n, ce.parts[2].len ? " (cubin)" : " (PTX only: JIT at load)");
      }
      if (strcmp(kind, "tune") == 0 && ce.nparts >= 1 && ce.parts[0].len < 400) {
        n = (int)strlen(summary);
        snprintf(summary + n, sizeof summary - (size_t)n, " -> %.*s", (int)ce.parts[0].len, (const char *)ce.parts[0].data);
      }
      e.valid = 1;
      rt_cache_entry_free(&ce);
    } else {
      snprintf(summary, sizeof summary, "invalid (%s): ignored and rebuilt", why[0] ? why : "unreadable");
    }
    e.summary = summary;
    fn(ud, &e);
  }
  closedir(d);
  return TILE_OK;
}

TILE_API tile_status tile_cache_clear(tile_context *ctx, unsigned *removed) {
  if (!ctx) return TILE_INVALID_ARGUMENT;
  rt_clear_error(ctx);
  if (removed) *removed = 0;
  const char *dir;
  DIR *d;
  tile_status os = open_cache_dir(ctx, &dir, &d);
  if (!d) return os;
  tile_status st = TILE_OK;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!rt_cache_classify(de->d_name)) continue; /* only our files are touched */
    char path[4096 + 300];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (unlink(path) == 0 || (errno == EISDIR && rmdir(path) == 0)) {
      if (removed) (*removed)++;
    } else if (errno != ENOENT && st == TILE_OK) {
      st = rt_error(ctx, TILE_CACHE, "cannot remove '%s': %s", path, strerror(errno));
    }
  }
  closedir(d);
  return st;
}

TILE_API const char * tile_cache_path(const tile_context *ctx) {
  return rt_cache_path(ctx);
}
