/* define_line.h - the first line "//! NAME=VALUE ..." of a fuzz input, read by the front-end
 * and pipeline targets (the seeds carry their compile-time settings there). */
#ifndef TILE_FUZZ_DEFINE_LINE_H
#define TILE_FUZZ_DEFINE_LINE_H

#include <stdbool.h>

/* The next NAME=VALUE of the line at *p, both NUL-terminated in place; false at the end of
 * the line or at a word without '='. */
static inline bool fuzz_next_define(char **p, char **name, char **value) {
  char *q = *p;
  while (*q == ' ') q++;
  *name = q;
  while (*q && *q != ' ' && *q != '=') q++;
  if (*q != '=') return false;
  *q++ = 0;
  *value = q;
  while (*q && *q != ' ') q++;
  if (*q) *q++ = 0;
  *p = q;
  return true;
}

#endif
