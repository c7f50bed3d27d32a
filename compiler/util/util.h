/* util.h - memory, strings and small containers shared by every part of the compiler.
 *
 * Design choices:
 *  - All compiler memory comes from arenas (QBE's pools, one per compilation): the AST, the
 *    IR and every pass's scratch data are freed at once when the arena is destroyed, so the
 *    autotuner can compile thousands of variants in one process with flat memory.
 *  - One allocation hook (struct tl_alloc, the public tile_alloc_fn of a context) is the only
 *    way memory is obtained; tests pass a hook that fails the Nth allocation to check that
 *    every failure path is clean (tests/unit/test_alloc.c).
 *  - Allocation failure does not return NULL into the compiler: the arena longjmps to the
 *    jmp_buf armed by the API entry point (like Lua's luaD_throw), which reports
 *    TILE_ERR_NOMEM. Code below the API therefore never checks for NULL.
 *  - No mutable globals: everything hangs off explicit handles.
 */
#ifndef TL_UTIL_H
#define TL_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TL_NORETURN __attribute__((noreturn))
#define TL_UNUSED __attribute__((unused))
#define TL_NOINLINE __attribute__((noinline)) /* a frame of its own (no local live across a caller's setjmp) */
#else
#define TL_PRINTF(f, a)
#define TL_NORETURN
#define TL_UNUSED
#endif

#define TL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TL_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- the allocation hook ---------------------------------------------------------------- */

/* realloc-like: n == 0 frees p and returns NULL; otherwise returns NULL on failure. */
typedef void *(*tl_realloc_fn)(void *ud, void *p, size_t old_size, size_t n);

struct tl_alloc {
  tl_realloc_fn fn;
  void *ud;
  size_t chunk; /* the chunk size of the arenas made with this hook; 0 = 64 KiB. Tests make
                   it small, so that injected allocation failures reach more of the code */
};

/* The default hook: realloc/free from libc. */
extern const struct tl_alloc tl_default_alloc;

/* Raw blocks: the caller remembers the size. A NULL hook means tl_default_alloc. */
void *tl_raw_alloc(const struct tl_alloc *a, size_t n);             /* NULL on failure */
void *tl_raw_realloc(const struct tl_alloc *a, void *p, size_t old, size_t n);
void tl_raw_free(const struct tl_alloc *a, void *p, size_t n);

/* Blocks that remember their hook and size in a header before them (malloc-style), for
 * memory freed where neither is at hand: what tile_free and tile_tune_result_free release,
 * and the runtime's buffers of variable size. 16-byte aligned, as the hook's; NULL on
 * failure; tl_free(NULL) does nothing. */
void *tl_malloc(const struct tl_alloc *a, size_t n);
void *tl_calloc(const struct tl_alloc *a, size_t count, size_t size); /* zeroed */
char *tl_strdup(const struct tl_alloc *a, const char *s);
char *tl_strndup(const struct tl_alloc *a, const char *s, size_t n);
void tl_free(void *p);

/* ---- arenas ----------------------------------------------------------------------------- */

struct arena_chunk;

struct arena {
  struct tl_alloc alloc;
  struct arena_chunk *head;
  jmp_buf *oom;    /* where to jump when the hook fails; NULL = abort() (internal error) */
  size_t total;    /* bytes obtained from the hook, for statistics */
  struct arena *root;        /* a child arena: the root arena of its parent; else NULL */
  struct arena_chunk *lent;  /* a root: the chunks its children hold */
};

void arena_init(struct arena *a, const struct tl_alloc *alloc, jmp_buf *oom);
/* A scratch arena for the duration of a call (a pass, the verifier, the printer) that shares
 * parent's recovery point. Its chunks are also recorded in the root arena of parent, so that
 * when a failure jumps past the call (and its arena_free never runs), freeing the root frees
 * them too; a normal arena_free of the child gives them back at once. */
void arena_init_child(struct arena *a, struct arena *parent);
/* Releases every chunk (and, for a root, those its children still hold); a stays usable. */
void arena_free(struct arena *a);
void *arena_alloc(struct arena *a, size_t n);        /* zeroed, 16-byte aligned, never NULL */
/* The same, but NULL when the hook fails, whatever a->oom: for the long-lived arenas (the
 * context's, a compiled kernel's), which have no recovery point once their entry point has
 * returned. */
void *arena_try_alloc(struct arena *a, size_t n);
char *arena_try_strdup(struct arena *a, const char *s);
void *arena_realloc(struct arena *a, void *p, size_t old, size_t n);
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...) TL_PRINTF(2, 3);
TL_NORETURN void arena_oom(struct arena *a);

#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_NEWN(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n)))

/* ---- growable arrays in an arena ----------------------------------------------------------
 * A vector is three fields in a struct: T *v; uint32_t n, cap. VEC_PUSH grows it inside the
 * arena (old storage is abandoned to the arena; the waste is bounded by 2x).                */

#define VEC(T)       \
  struct {           \
    T *v;            \
    uint32_t n, cap; \
  }

void vec_grow_(struct arena *a, void **v, uint32_t *cap, size_t elem, uint32_t need);

/* false when out of memory (arena_try_alloc); the vector is unchanged then */
bool vec_try_grow_(struct arena *a, void **v, uint32_t *cap, size_t elem, uint32_t need);
#define VEC_TRY_RESERVE(a, vec, k)                                                                         \
  ((vec).n + (uint32_t)(k) <= (vec).cap ||                                                                 \
   vec_try_grow_((a), (void **)&(vec).v, &(vec).cap, sizeof(*(vec).v), (vec).n + (uint32_t)(k)))

#define VEC_RESERVE(a, vec, k)                                                              \
  do {                                                                                      \
    if ((vec).n + (uint32_t)(k) > (vec).cap)                                                \
      vec_grow_((a), (void **)&(vec).v, &(vec).cap, sizeof(*(vec).v), (vec).n + (uint32_t)(k)); \
  } while (0)
#define VEC_PUSH(a, vec, x)        \
  do {                             \
    VEC_RESERVE((a), (vec), 1);    \
    (vec).v[(vec).n++] = (x);      \
  } while (0)
#define VEC_LAST(vec) ((vec).v[(vec).n - 1])

/* ---- string builder --------------------------------------------------------------------- */

struct strbuf {
  struct arena *arena;
  char *s;
  size_t len, cap;
};

void sb_init(struct strbuf *sb, struct arena *a);
void sb_putc(struct strbuf *sb, char c);
void sb_puts(struct strbuf *sb, const char *s);
void sb_putn(struct strbuf *sb, const char *s, size_t n);
void sb_printf(struct strbuf *sb, const char *fmt, ...) TL_PRINTF(2, 3);
void sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap);
const char *sb_str(struct strbuf *sb); /* NUL-terminated, never NULL */

/* ---- interned strings ------------------------------------------------------------------
 * Equal strings get the same pointer, so names compare with ==.                            */

struct strtab {
  struct arena *arena;
  const char **slots;
  uint32_t n, cap;
};

void strtab_init(struct strtab *t, struct arena *a);
const char *strtab_intern(struct strtab *t, const char *s, size_t n);

/* ---- pointer maps ------------------------------------------------------------------------
 * An open-addressing hash table from pointers (interned names, usually) to uint32_t values,
 * 0 meaning "no value". Keys are never removed: setting a value to 0 is how a scoped user
 * (the front end's scopes, the IR parser's names) forgets one.                            */

struct ptrmap {
  struct arena *arena;
  const void **keys;
  uint32_t *vals;
  uint32_t n, cap;
};

void ptrmap_init(struct ptrmap *m, struct arena *a);
uint32_t ptrmap_get(const struct ptrmap *m, const void *key); /* 0 when absent */
uint32_t *ptrmap_slot(struct ptrmap *m, const void *key);     /* entered (value 0) when absent */

/* ---- hashing ----------------------------------------------------------------------------
 * The one fast hash, for hash tables (interning, CSE, the front end's scopes): FNV-1a over
 * the bytes, then a 64-bit finalizer (MurmurHash3's fmix64) so that the low bits, which
 * pick the bucket, depend on every input bit. Chain several calls through `seed`. Not for
 * identifying content: keys that stand for a kernel or a file use the strong hash of the
 * runtime (rt_hash in runtime/cache.h, BLAKE3).                                          */

uint64_t tl_hash_bytes(const void *p, size_t n, uint64_t seed);

/* ---- numbers ---------------------------------------------------------------------------- */

static inline bool tl_is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }
static inline int tl_log2(uint64_t x) { return x ? 63 - __builtin_clzll(x) : -1; }
static inline int64_t tl_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
