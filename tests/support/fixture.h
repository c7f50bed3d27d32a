/* fixture.h - an arena, a string table and an error buffer for tests of the IR and passes. */
#ifndef TL_TEST_FIXTURE_H
#define TL_TEST_FIXTURE_H

#include "util.h"

struct fixture {
  struct arena a;
  struct strtab s;
  struct strbuf err;
};

/* Declares arena `a` whose running out of memory fails the test (a macro: the setjmp must be
 * in the frame that uses the arena). */
#define TEST_ARENA(a)                                                                                    \
  struct arena a;                                                                                        \
  jmp_buf a##_oom;                                                                                       \
  arena_init(&a, NULL, &a##_oom);                                                                        \
  if (setjmp(a##_oom)) cr_assert_fail("out of memory")

static inline void fx_init(struct fixture *fx) {
  arena_init(&fx->a, NULL, NULL);
  strtab_init(&fx->s, &fx->a);
  sb_init(&fx->err, &fx->a);
}

#endif
