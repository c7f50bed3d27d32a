/* fixture.h - an arena, a string table and an error buffer for tests of the IR and passes. */
#ifndef TL_TEST_FIXTURE_H
#define TL_TEST_FIXTURE_H

#include "util.h"

struct fixture {
  struct arena a;
  struct strtab s;
  struct strbuf err;
};

static inline void fx_init(struct fixture *fx) {
  arena_init(&fx->a, NULL, NULL);
  strtab_init(&fx->s, &fx->a);
  sb_init(&fx->err, &fx->a);
}

#endif
