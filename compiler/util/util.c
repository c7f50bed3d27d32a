/* util.c - arenas, growable arrays, string builders, interning, pointer maps and hashing.
 *
 * The arena hands out memory from chunks obtained through the allocation hook; a request
 * larger than a chunk gets a chunk of its own. Nothing is freed individually.            */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *default_realloc(void *ud, void *p, size_t old, size_t n) {
  (void)ud;
  (void)old;
  if (n == 0) {
    free(p);
    return NULL;
  }
  return realloc(p, n);
}

const struct tl_alloc tl_default_alloc = {default_realloc, NULL, 0};

void *tl_raw_alloc(const struct tl_alloc *a, size_t n) {
  if (!a) a = &tl_default_alloc;
  return n ? a->fn(a->ud, NULL, 0, n) : NULL;
}
void *tl_raw_realloc(const struct tl_alloc *a, void *p, size_t old, size_t n) {
  if (!a) a = &tl_default_alloc;
  return a->fn(a->ud, p, old, n);
}
void tl_raw_free(const struct tl_alloc *a, void *p, size_t n) {
  if (!a) a = &tl_default_alloc;
  if (p) a->fn(a->ud, p, n, 0);
}

/* ---- blocks with a header ---- */

struct block_header {
  tl_realloc_fn fn;
  void *ud;
  size_t size; /* of the whole block, header included */
  size_t pad;
};
_Static_assert(sizeof(struct block_header) == 32, "keeps the 16-byte alignment of the hook's blocks");

void *tl_malloc(const struct tl_alloc *a, size_t n) {
  if (!a) a = &tl_default_alloc;
  if (n > SIZE_MAX - sizeof(struct block_header)) return NULL;
  size_t size = sizeof(struct block_header) + n;
  struct block_header *h = a->fn(a->ud, NULL, 0, size);
  if (!h) return NULL;
  h->fn = a->fn;
  h->ud = a->ud;
  h->size = size;
  h->pad = 0;
  return h + 1;
}

void *tl_calloc(const struct tl_alloc *a, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) return NULL;
  void *p = tl_malloc(a, n);
  if (p) memset(p, 0, n);
  return p;
}

char *tl_strndup(const struct tl_alloc *a, const char *s, size_t n) {
  char *d = tl_malloc(a, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *tl_strdup(const struct tl_alloc *a, const char *s) { return s ? tl_strndup(a, s, strlen(s)) : NULL; }

void tl_free(void *p) {
  if (!p) return;
  struct block_header *h = (struct block_header *)p - 1;
  h->fn(h->ud, h, h->size, 0);
}

/* ---- arenas ---- */

struct arena_chunk {
  struct arena_chunk *next;
  size_t size, used;
  struct arena_chunk *lent_prev, *lent_next; /* a child's chunk: in its root's `lent` list */
  _Alignas(16) unsigned char data[];
};

enum { CHUNK_SIZE = 64 * 1024 };

void arena_init(struct arena *a, const struct tl_alloc *alloc, jmp_buf *oom) {
  a->alloc = alloc ? *alloc : tl_default_alloc;
  a->head = NULL;
  a->oom = oom;
  a->total = 0;
  a->root = NULL;
  a->lent = NULL;
}

void arena_init_child(struct arena *a, struct arena *parent) {
  arena_init(a, &parent->alloc, parent->oom);
  a->root = parent->root ? parent->root : parent;
}

static void free_chunk(struct arena *a, struct arena_chunk *c) {
  tl_raw_free(&a->alloc, c, sizeof *c + c->size);
}

void arena_free(struct arena *a) {
  struct arena_chunk *c = a->head;
  while (c) {
    struct arena_chunk *next = c->next;
    if (a->root) { /* no longer the root's to free */
      if (c->lent_prev) c->lent_prev->lent_next = c->lent_next;
      else a->root->lent = c->lent_next;
      if (c->lent_next) c->lent_next->lent_prev = c->lent_prev;
    }
    free_chunk(a, c);
    c = next;
  }
  a->head = NULL;
  a->total = 0;
  /* the chunks of children that a failure jumped past (their arena_free never ran) */
  for (c = a->lent; c;) {
    struct arena_chunk *next = c->lent_next;
    free_chunk(a, c);
    c = next;
  }
  a->lent = NULL;
}

void arena_oom(struct arena *a) {
  if (a->oom) longjmp(*a->oom, 1);
  abort(); /* no recovery point armed: an internal error, never reached from the API */
}

void *arena_try_alloc(struct arena *a, size_t n) {
  if (n > SIZE_MAX / 2) return NULL;
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  struct arena_chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t chunk = a->alloc.chunk ? a->alloc.chunk : CHUNK_SIZE;
    size_t size = n > chunk / 2 ? n : chunk;
    struct arena_chunk *nc = tl_raw_alloc(&a->alloc, sizeof *nc + size);
    if (!nc) return NULL;
    nc->size = size;
    nc->used = 0;
    nc->lent_prev = nc->lent_next = NULL;
    if (a->root) { /* the root frees it if a failure jumps past this arena's owner */
      nc->lent_next = a->root->lent;
      if (nc->lent_next) nc->lent_next->lent_prev = nc;
      a->root->lent = nc;
    }
    a->total += size;
    if (c && n > chunk / 2) {
      /* a big block: keep the current chunk on top so its free space stays usable */
      nc->next = c->next;
      c->next = nc;
    } else {
      nc->next = c;
      a->head = nc;
    }
    c = nc;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

void *arena_alloc(struct arena *a, size_t n) {
  void *p = arena_try_alloc(a, n);
  if (!p) arena_oom(a);
  return p;
}

char *arena_try_strdup(struct arena *a, const char *s) {
  size_t n = strlen(s);
  char *d = arena_try_alloc(a, n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

void *arena_realloc(struct arena *a, void *p, size_t old, size_t n) {
  if (n <= old) return p;
  void *q = arena_alloc(a, n);
  if (p && old) memcpy(q, p, old);
  return q;
}

char *arena_strndup(struct arena *a, const char *s, size_t n) {
  char *d = arena_alloc(a, n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *arena_strdup(struct arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(struct arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = arena_alloc(a, (size_t)n + 1);
  vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

bool vec_try_grow_(struct arena *a, void **v, uint32_t *cap, size_t elem, uint32_t need) {
  uint32_t nc = *cap ? *cap * 2 : 8;
  while (nc < need) nc *= 2;
  void *q = arena_try_alloc(a, elem * nc);
  if (!q) return false;
  if (*v && *cap) memcpy(q, *v, elem * *cap);
  *v = q;
  *cap = nc;
  return true;
}

void vec_grow_(struct arena *a, void **v, uint32_t *cap, size_t elem, uint32_t need) {
  uint32_t nc = *cap ? *cap * 2 : 8;
  while (nc < need) nc *= 2;
  *v = arena_realloc(a, *v, elem * *cap, elem * nc);
  *cap = nc;
}

/* ---- string builder ---- */

void sb_init(struct strbuf *sb, struct arena *a) {
  sb->arena = a;
  sb->s = NULL;
  sb->len = sb->cap = 0;
}

static void sb_reserve(struct strbuf *sb, size_t k) {
  if (sb->len + k + 1 <= sb->cap) return;
  size_t nc = sb->cap ? sb->cap * 2 : 256;
  while (nc < sb->len + k + 1) nc *= 2;
  sb->s = arena_realloc(sb->arena, sb->s, sb->cap, nc);
  sb->cap = nc;
}

void sb_putn(struct strbuf *sb, const char *s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->s + sb->len, s, n);
  sb->len += n;
  sb->s[sb->len] = 0;
}

void sb_putc(struct strbuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(struct strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  sb_reserve(sb, (size_t)n);
  vsnprintf(sb->s + sb->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  sb->len += (size_t)n;
}

void sb_printf(struct strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

const char *sb_str(struct strbuf *sb) { return sb->s ? sb->s : ""; }

/* ---- interning: open addressing over string pointers ---- */

void strtab_init(struct strtab *t, struct arena *a) {
  t->arena = a;
  t->slots = NULL;
  t->n = t->cap = 0;
}

static uint32_t find_slot(const char **slots, uint32_t cap, const char *s, size_t n, uint64_t h) {
  uint32_t i = (uint32_t)h & (cap - 1);
  while (slots[i] && !(strncmp(slots[i], s, n) == 0 && slots[i][n] == 0)) i = (i + 1) & (cap - 1);
  return i;
}

const char *strtab_intern(struct strtab *t, const char *s, size_t n) {
  if (t->n * 2 >= t->cap) {
    uint32_t nc = t->cap ? t->cap * 2 : 64;
    const char **ns = ARENA_NEWN(t->arena, const char *, nc);
    for (uint32_t i = 0; i < t->cap; i++) {
      const char *e = t->slots[i];
      if (e) {
        size_t len = strlen(e);
        ns[find_slot(ns, nc, e, len, tl_hash_bytes(e, len, 0))] = e;
      }
    }
    t->slots = ns;
    t->cap = nc;
  }
  uint32_t i = find_slot(t->slots, t->cap, s, n, tl_hash_bytes(s, n, 0));
  if (!t->slots[i]) {
    t->slots[i] = arena_strndup(t->arena, s, n);
    t->n++;
  }
  return t->slots[i];
}

/* ---- pointer maps: open addressing, linear probing, at most half full ---- */

void ptrmap_init(struct ptrmap *m, struct arena *a) {
  m->arena = a;
  m->keys = NULL;
  m->vals = NULL;
  m->n = m->cap = 0;
}

static uint32_t ptrmap_find(const void *const *keys, uint32_t cap, const void *key) {
  uint32_t i = (uint32_t)tl_hash_bytes(&key, sizeof key, 0) & (cap - 1);
  while (keys[i] && keys[i] != key) i = (i + 1) & (cap - 1);
  return i;
}

uint32_t ptrmap_get(const struct ptrmap *m, const void *key) {
  if (!m->cap) return 0;
  uint32_t i = ptrmap_find(m->keys, m->cap, key);
  return m->keys[i] ? m->vals[i] : 0;
}

uint32_t *ptrmap_slot(struct ptrmap *m, const void *key) {
  if (2 * (m->n + 1) > m->cap) {
    uint32_t cap = m->cap ? 2 * m->cap : 64;
    const void **keys = ARENA_NEWN(m->arena, const void *, cap);
    uint32_t *vals = ARENA_NEWN(m->arena, uint32_t, cap);
    for (uint32_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        uint32_t j = ptrmap_find(keys, cap, m->keys[i]);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
      }
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
  }
  uint32_t i = ptrmap_find(m->keys, m->cap, key);
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->n++;
  }
  return &m->vals[i];
}

uint64_t tl_hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}
