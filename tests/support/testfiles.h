/* testfiles.h - the repository's files as the unit tests see them, and an IR fixture that
 * several tests share. */
#ifndef TL_TEST_FILES_H
#define TL_TEST_FILES_H

#include <stddef.h>

#include "tile.h"

/* The source tree: $TILE_SOURCE_DIR, else the directory the tests were configured from. */
const char *test_source_dir(void);
/* "<source>/lib/<file>" into buf. */
void test_lib_path(char *buf, size_t cap, const char *file);
/* The whole file, NUL-terminated, malloc'ed (*len bytes when len is not NULL); NULL when it
 * cannot be read. */
char *test_read_file(const char *path, size_t *len);

/* The PTX of .tile source `src` (named `name`) for a CUDA target (flags: tile_compile_flags)
 * in *out (tile_free it); the tile_emit status. */
tile_status test_emit_ptx(tile_context *ctx, const char *name, const char *src, const char *arch, unsigned flags,
                          char **out);

/* Tile IR text of a masked vector kernel, Z = s * X + Y over 64-element blocks, in the
 * printer's canonical form (it round-trips exactly). */
extern const char TEST_VADD_IR[];

#endif
