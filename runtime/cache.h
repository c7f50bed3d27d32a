/* cache.h - the on-disk cache (runtime/cache.c): content hashing, entry files written
 * atomically and verified on every read, and the compiler's identity for cache keys.
 *
 * An entry is one file named <kind>-<hex BLAKE3 of kind and key> in the cache directory. It
 * holds a header (magic, format version, lengths, a BLAKE3 checksum of everything else), the
 * full key text and up to RT_CACHE_MAX_PARTS payloads. A file is trusted only when all of
 * these check out and its key equals the one asked for; anything else (truncated, torn,
 * corrupted, foreign, a directory, a link) is a miss and is replaced by the next store.
 * The checksum is unkeyed (it catches accidents, not attackers): the users of an entry
 * check each part for what it claims to be (rt_cubin_check, rt_ptx_check) before use.
 * Stores write a temporary file in the same directory (mkstemp), fsync it and rename() it
 * over the entry, so readers see the old file or the new one, never a mixture; several
 * processes storing the same key all succeed (the last rename wins). Nothing here keeps
 * state except the compiler identity, computed once; every function may be called from
 * any thread.                                                                           */
#ifndef TL_CACHE_H
#define TL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { RT_HASH_LEN = 32, RT_CACHE_MAX_PARTS = 4, RT_CACHE_NAME_MAX = 80 };

/* The strong hash, for everything that identifies content (cache keys, the in-memory
 * compile cache, tuning keys): BLAKE3 (LLVM's copy) of n bytes. Hash tables use the fast
 * tl_hash_bytes (util.h) instead. */
void rt_hash(const void *p, size_t n, uint8_t out[RT_HASH_LEN]);

/* The same hash fed in pieces: rt_hasher_final gives rt_hash of the concatenation of every
 * update. The state is storage for LLVM's hasher, so that callers need not include LLVM. */
typedef struct rt_hasher {
  _Alignas(16) unsigned char state[1920];
} rt_hasher;
void rt_hasher_init(rt_hasher *h);
void rt_hasher_update(rt_hasher *h, const void *p, size_t n);
void rt_hasher_final(rt_hasher *h, uint8_t out[RT_HASH_LEN]);
/* Lower-case hex of n bytes into out (2n + 1 bytes). */
void rt_hex(const uint8_t *h, size_t n, char *out);

/* The compiler's identity for cache keys: the version string and the GNU build id of the
 * object holding this code (libtile.so, or the executable it is linked into), so that any
 * rebuild with changed code invalidates every entry. Never NULL. */
const char *rt_compiler_id(void);

/* The cache directory for a context into buf: `opt` when not NULL, else $TILE_CACHE_DIR
 * when set, else $XDG_CACHE_HOME/tile, else $HOME/.cache/tile; "" (off) when none applies.
 * false (and "") when the path does not fit in cap bytes. */
bool rt_cache_resolve_dir(const char *opt, char *buf, size_t cap);

/* Whether dir may hold the cache: 0 when it is a directory owned by this user (geteuid)
 * that neither group nor others can write; 1 when it does not exist; -1 (with the reason in
 * `why`) when it is anything else: another user's, group- or world-writable (mode & 022),
 * not a directory, or a symbolic link that is not this user's (a link of this user's is
 * followed and the directory it names is checked). Only the directory itself is checked,
 * not its parents. The loads and stores below check it every time, so a directory that
 * appears after a context was created (made by someone else) is refused too. */
int rt_cache_dir_check(const char *dir, char *why, size_t whylen);

struct rt_cache_part {
  const void *data;
  size_t len;
};

struct tl_alloc;

/* A verified entry: parts point into buf (tl_malloc'd with the hook given to the load). */
struct rt_cache_entry {
  void *buf;
  size_t size;
  struct rt_cache_part parts[RT_CACHE_MAX_PARTS];
  unsigned nparts;
};

enum rt_cache_result {
  RT_CACHE_HIT,  /* verified; *out filled */
  RT_CACHE_MISS, /* no entry */
  RT_CACHE_BAD,  /* something is there but failed verification (why says what) */
  RT_CACHE_NOMEM /* the hook could not allocate the buffer to read it into */
};

/* The entry file name for (kind, key): "<kind>-<64 hex digits>". */
void rt_cache_file_name(const char *kind, const char *key, size_t key_len,
                        char out[RT_CACHE_NAME_MAX]);

/* Looks up (kind, key) in dir, reading with the hook `alloc` (NULL: libc). Never trusts what
 * it cannot verify; never crashes on any file content. `why` (may be NULL) says why an entry
 * was rejected. */
enum rt_cache_result rt_cache_load(const struct tl_alloc *alloc, const char *dir, const char *kind, const char *key,
                                   size_t key_len, struct rt_cache_entry *out, char *why, size_t whylen);
void rt_cache_entry_free(struct rt_cache_entry *e);

/* Stores (kind, key) -> parts atomically (creating dir and its missing parents with mode
 * 0700 if needed; refused unless rt_cache_dir_check accepts dir afterwards). 0 on success; otherwise
 * -1 with a message in err, and nothing but possibly a stray temporary file is left (it is
 * never read as an entry; rt_cache_clear removes it). TILE_CACHE_TEST_DELAY_MS (test hook)
 * sleeps that long between writing the temporary file and renaming it. */
int rt_cache_store(const char *dir, const char *kind, const char *key, size_t key_len,
                   const struct rt_cache_part *parts, unsigned nparts, char *err, size_t errlen);

/* Verifies a whole file's framing (not its key); on success the key text and parts are
 * returned in *out. For listings. */
enum rt_cache_result rt_cache_read_file(const struct tl_alloc *alloc, const char *path, struct rt_cache_entry *out,
                                        const char **key, size_t *key_len, char *why, size_t whylen);

/* ---- checks of what an entry holds ----
 * The checksum of an entry is not keyed: whoever can write the directory can plant an entry
 * that passes it. So the parts are checked for what they claim to be before they are used.
 * Both functions return true when the part is sound, else false with the reason in `why`. */

/* A cubin is handed to the driver with no length: the driver trusts its ELF header. It must
 * be an ELF64 little-endian image for EM_CUDA (190) with a 64-byte header, and every table
 * and section its headers name (section and program headers, section contents) must lie
 * within its `len` bytes. */
bool rt_cubin_check(const void *p, size_t len, char *why, size_t whylen);
/* PTX text (without its terminating NUL): not empty, no NUL inside (the driver reads it as
 * a C string), and a .version and a .target directive. */
bool rt_ptx_check(const void *p, size_t len, char *why, size_t whylen);

/* Which cache file a directory entry name is: "module", "tune", "temp" (a temporary file of
 * an interrupted store) or NULL (not ours; left alone). */
const char *rt_cache_classify(const char *name);

#endif
