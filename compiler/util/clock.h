/* clock.h - the one monotonic clock: the library's pass and compile timings, the tools'
 * benchmarks and the tests all read time here (header-only, like readfile.h: tilec and the
 * benchmark tools link only the public API).                                           */
#ifndef TL_CLOCK_H
#define TL_CLOCK_H

#include <time.h>

/* Milliseconds on the monotonic clock; only differences between two readings mean anything. */
static inline double tl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#endif
