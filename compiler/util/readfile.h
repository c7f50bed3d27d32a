/* readfile.h - reading a whole source file, bounded, for tilec (header-only; tilec links
 * only the public API). The library reads through its allocation hook instead
 * (runtime/api.c: rt_read_file).
 *
 * A source larger than `limit` bytes, a directory or a device that never ends (/dev/zero)
 * is refused instead of read until memory runs out. On failure returns NULL with errno set:
 * EISDIR, EFBIG (over the limit), ENOMEM, or what the system said. The buffer is
 * NUL-terminated (len excludes the NUL) and malloc'd.                                 */
#ifndef TL_READFILE_H
#define TL_READFILE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline char *tl_read_stream(FILE *fp, size_t limit, size_t *len) {
  struct stat st;
  if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t want = cap - n;
    size_t got = fread(buf + n, 1, want, fp);
    n += got;
    if (got < want) break;
    if (n > limit) {
      free(buf);
      errno = EFBIG;
      return NULL;
    }
    char *nb = realloc(buf, cap * 2 + 1);
    if (!nb) {
      free(buf);
      errno = ENOMEM;
      return NULL;
    }
    buf = nb;
    cap *= 2;
  }
  if (!buf) {
    errno = ENOMEM;
    return NULL;
  }
  if (ferror(fp) || n > limit) {
    int e = ferror(fp) ? (errno ? errno : EIO) : EFBIG;
    free(buf);
    errno = e;
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static inline char *tl_read_file(const char *path, size_t limit, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = tl_read_stream(fp, limit, len);
  int e = errno;
  fclose(fp);
  errno = e;
  return buf;
}

#endif
