/* test_fp16.c - tests of the numeric support code: fp16.h conversions, rng.h and ref.c.
 *
 * The f16 conversions are checked exhaustively where that is cheap (all 65536 bit patterns,
 * all 256 fp8 codes) and otherwise against an independent oracle: gcc's own _Float16
 * conversion, a rounding written with double-precision distances instead of bit tricks, or a
 * brute-force search for the nearest fp8 code. Random inputs are fresh on every run; the seed
 * is printed and TILE_TEST_SEED replays it. Loops count failures and assert once at the end,
 * naming the first failing input, so a broken conversion gives one readable message.
 * The reference implementations are checked on small cases worked out by hand.            */
#define _POSIX_C_SOURCE 200809L /* setenv and unsetenv for the seed override test */

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "ref.h"
#include "test_seed.h"

/* ---- helpers --------------------------------------------------------------------------- */

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

/* The bits of a float, or a canonical marker for any NaN, so NaNs compare equal. */
static uint32_t canon_bits(float f) { return isnan(f) ? 0x7fc00000u : tl_f32_bits(f); }

#if defined(__FLT16_MAX__)
#define HAVE_GCC_F16 1
__extension__ typedef _Float16 gcc_f16;

/* gcc's conversions, through volatile so they happen at run time in libgcc's soft-float. */
static uint16_t gcc_f32_to_f16(float f) {
  volatile float vf = f;
  gcc_f16 h = (gcc_f16)vf;
  uint16_t u;
  memcpy(&u, &h, sizeof u);
  return u;
}

static float gcc_f16_to_f32(uint16_t u) {
  gcc_f16 h;
  memcpy(&h, &u, sizeof h);
  volatile gcc_f16 vh = h;
  return (float)vh;
}

/* Compares tl_f32_to_f16 with gcc on x; NaN inputs only need a NaN result from both. */
static bool f16_agrees_with_gcc(float x) {
  uint16_t mine = tl_f32_to_f16(x), theirs = gcc_f32_to_f16(x);
  if (isnan(x)) return f16_is_nan(mine) && f16_is_nan(theirs);
  return mine == theirs;
}
#endif

/* An independent RNE to a float with the low `drop` mantissa bits cleared (drop = 16 is bf16,
 * 13 is tf32): it finds the two neighbouring grid points by truncation and compares distances
 * in double, where they are exact. A tie goes to the neighbour whose last kept bit is 0. The
 * neighbour above the largest finite value is 2^128, which stands for infinity. */
static float indep_round_drop(float x, int drop) {
  if (isnan(x) || isinf(x)) return x;
  uint32_t u = tl_f32_bits(x);
  uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  uint32_t unit = UINT32_C(1) << drop;
  uint32_t lo_bits = mag & ~(unit - 1), hi_bits = lo_bits + unit;
  double lo = tl_f32_from_bits(lo_bits);
  double hi = hi_bits >= 0x7f800000u ? ldexp(1.0, 128) : (double)tl_f32_from_bits(hi_bits);
  double ax = fabs((double)x);
  double dlo = ax - lo, dhi = hi - ax;
  uint32_t pick;
  if (dlo < dhi)
    pick = lo_bits;
  else if (dhi < dlo)
    pick = hi_bits;
  else
    pick = ((lo_bits >> drop) & 1) == 0 ? lo_bits : hi_bits;
  if (pick >= 0x7f800000u) pick = 0x7f800000u;
  return tl_f32_from_bits(sign | pick);
}

/* A random float whose unbiased exponent is uniform in [emin, emax], with a random mantissa
 * and sign: spreads samples over every binade of interest instead of over bit patterns. */
static float random_float_in_binades(struct rng *r, int emin, int emax) {
  uint32_t e = (uint32_t)(emin + (int)rng_below(r, (uint64_t)(emax - emin + 1)) + 127);
  uint32_t bits = (rng_u32(r) & 0x807fffffu) | (e << 23);
  return tl_f32_from_bits(bits);
}

/* Brute force: the fp8 code nearest to x among the non-negative finite codes (plus infinity
 * as a virtual code of value `inf_value`, if inf_code is non-zero), ties to the even code. */
static uint8_t nearest_fp8(float x, float (*decode)(uint8_t), uint8_t max_finite,
                           uint8_t inf_code, double inf_value) {
  double ax = fabs((double)x);
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c <= (inf_code ? inf_code : max_finite); c++) {
    double v = c == inf_code && inf_code ? inf_value : (double)decode((uint8_t)c);
    double dist = fabs(ax - v);
    if (dist < best_d || (dist == best_d && (c & 1) == 0)) {
      best = c;
      best_d = dist;
    }
  }
  return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

/* Checks RNE between every pair of consecutive non-negative codes c, c+1 up to `last`: the
 * exact midpoint goes to the even code and its float neighbours to the nearer code. Returns
 * the number of failures and the first failing input in *bad. */
static int check_fp8_midpoints(float (*decode)(uint8_t), uint8_t (*encode)(float), int last,
                               float *bad) {
  int fails = 0;
  for (int c = 0; c < last; c++) {
    for (int s = 0; s < 2; s++) {
      uint8_t sign = s ? 0x80 : 0;
      float lo = decode((uint8_t)(c | sign)), hi = decode((uint8_t)((c + 1) | sign));
      float mid = (lo + hi) / 2; /* exact: fp8 values have few bits */
      uint8_t even = (uint8_t)(((c & 1) ? c + 1 : c) | sign);
      float below = nextafterf(mid, lo), above = nextafterf(mid, hi);
      if (encode(mid) != even || encode(below) != (uint8_t)(c | sign) ||
          encode(above) != (uint8_t)((c + 1) | sign)) {
        if (!fails) *bad = mid;
        fails++;
      }
    }
  }
  return fails;
}

/* ---- f16 ------------------------------------------------------------------------------- */

Test(fp16, f16_decode_known_values) {
  cr_assert_eq(tl_f16_to_f32(0x3c00), 1.0f);
  cr_assert_eq(tl_f16_to_f32(0xc000), -2.0f);
  cr_assert_eq(tl_f16_to_f32(0x7bff), 65504.0f);
  cr_assert_eq(tl_f16_to_f32(0x0400), ldexpf(1.0f, -14));
  cr_assert_eq(tl_f16_to_f32(0x0001), ldexpf(1.0f, -24));
  cr_assert_eq(tl_f16_to_f32(0x03ff), ldexpf(1023.0f, -24));
  cr_assert_eq(tl_f16_to_f32(0x3555), 0.333251953125f);
  cr_assert(isinf(tl_f16_to_f32(0x7c00)) && tl_f16_to_f32(0x7c00) > 0);
  cr_assert(isinf(tl_f16_to_f32(0xfc00)) && tl_f16_to_f32(0xfc00) < 0);
  cr_assert(tl_f16_to_f32(0x8000) == 0.0f && signbit(tl_f16_to_f32(0x8000)));
  cr_assert(isnan(tl_f16_to_f32(0x7e00)) && isnan(tl_f16_to_f32(0x7c01)));
}

Test(fp16, f16_all_patterns_round_trip) {
  int fails = 0;
  unsigned first = 0;
  for (unsigned i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    float f = tl_f16_to_f32(h);
    uint16_t back = tl_f32_to_f16(f);
    bool ok;
    if (f16_is_nan(h)) {
      /* NaN stays NaN, keeps its sign, comes back quiet, and a quiet NaN is unchanged. */
      ok = isnan(f) && (tl_f32_bits(f) & 0x400000u) && f16_is_nan(back) && (back & 0x200u) &&
           (back & 0x8000u) == (h & 0x8000u) && (!(h & 0x200u) || back == h);
    } else {
      ok = back == h && !isnan(f);
    }
#ifdef HAVE_GCC_F16
    ok = ok && canon_bits(f) == canon_bits(gcc_f16_to_f32(h));
#endif
    if (!ok && fails++ == 0) first = i;
  }
  cr_assert_eq(fails, 0, "%d f16 patterns fail the round trip, first 0x%04x", fails, first);
}

Test(fp16, f32_to_f16_edge_cases) {
  /* Hand-computed expectations, independent of any other implementation. */
  const float t = ldexpf(1.0f, -24); /* smallest subnormal */
  struct {
    float x;
    uint16_t want;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {t, 0x0001},
      {t / 2, 0x0000},                           /* tie between 0 and t: 0 is even */
      {nextafterf(t / 2, 1.0f), 0x0001},         /* just above the tie */
      {3 * t / 2, 0x0002},                       /* tie between 1 and 2 units: 2 is even */
      {5 * t / 2, 0x0002},                       /* tie between 2 and 3 units: 2 is even */
      {ldexpf(1.0f, -14), 0x0400},               /* smallest normal */
      {ldexpf(1.0f, -14) - t / 2, 0x0400},       /* tie between 0x3ff and 0x400 */
      {nextafterf(ldexpf(1.0f, -14) - t / 2, 0.0f), 0x03ff},
      {1.0f + ldexpf(1.0f, -11), 0x3c00},        /* tie: 0x3c00 is even */
      {1.0f + 3 * ldexpf(1.0f, -11), 0x3c02},    /* tie: 0x3c02 is even */
      {65504.0f, 0x7bff},
      {65519.0f, 0x7bff},
      {nextafterf(65520.0f, 0.0f), 0x7bff},
      {65520.0f, 0x7c00},                        /* tie between 0x7bff and 2^16: overflow */
      {1e9f, 0x7c00},
      {FLT_MAX, 0x7c00},
      {-FLT_MAX, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {FLT_MIN, 0x0000},
      {-FLT_TRUE_MIN, 0x8000},
      {-65520.0f, 0xfc00},
      {-3 * t / 2, 0x8002},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = tl_f32_to_f16(cases[i].x);
    cr_assert_eq(got, cases[i].want, "tl_f32_to_f16(%a) = 0x%04x, want 0x%04x", (double)cases[i].x,
                 got, cases[i].want);
#ifdef HAVE_GCC_F16
    cr_assert(f16_agrees_with_gcc(cases[i].x), "gcc disagrees on %a", (double)cases[i].x);
#endif
  }
  /* NaNs, including signalling ones whose payload lies only in low bits, stay NaN. */
  uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fc01234u};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint16_t h = tl_f32_to_f16(tl_f32_from_bits(nans[i]));
    cr_assert(f16_is_nan(h) && (h & 0x200u), "NaN 0x%08x became 0x%04x", nans[i], h);
    cr_assert_eq(h >> 15, nans[i] >> 31, "NaN 0x%08x lost its sign", nans[i]);
  }
}

#ifdef HAVE_GCC_F16
Test(fp16, f32_to_f16_midpoints_match_gcc) {
  /* Every pair of consecutive f16 values, both signs: the midpoint and its f32 neighbours. */
  int fails = 0;
  float first = 0;
  for (unsigned h = 0; h < 0x7c00; h++) {
    float lo = tl_f16_to_f32((uint16_t)h);
    float hi = h == 0x7bff ? 65536.0f : tl_f16_to_f32((uint16_t)(h + 1));
    float mid = (lo + hi) / 2;
    float xs[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
    uint16_t want[3] = {(uint16_t)(h + (h & 1)), (uint16_t)h, (uint16_t)(h + 1)};
    for (int s = 0; s < 2; s++) {
      for (int i = 0; i < 3; i++) {
        float x = s ? -xs[i] : xs[i];
        uint16_t w = (uint16_t)(want[i] | (s ? 0x8000u : 0));
        if ((tl_f32_to_f16(x) != w || !f16_agrees_with_gcc(x)) && fails++ == 0) first = x;
      }
    }
  }
  cr_assert_eq(fails, 0, "%d midpoint conversions wrong, first %a", fails, (double)first);
}

Test(fp16, f32_to_f16_random_match_gcc) {
  struct rng r;
  rng_seed(&r, rng_test_seed("fp16::f32_to_f16_random_match_gcc"));
  int fails = 0;
  float first = 0;
  for (int i = 0; i < (1 << 20); i++) {
    float a = tl_f32_from_bits(rng_u32(&r));           /* any bit pattern */
    float b = random_float_in_binades(&r, -27, 16);     /* the f16 range and just around it */
    float c = rng_normal(&r);
    float xs[3] = {a, b, c};
    for (int j = 0; j < 3; j++) {
      bool ok = f16_agrees_with_gcc(xs[j]);
      if (!isnan(xs[j])) ok = ok && tl_round_f16(xs[j]) == (float)(gcc_f16)xs[j];
      if (!ok && fails++ == 0) first = xs[j];
    }
  }
  cr_assert_eq(fails, 0, "%d random conversions disagree with gcc, first %a", fails,
               (double)first);
}
#endif

/* ---- bf16 and tf32 --------------------------------------------------------------------- */

Test(fp16, bf16_known_values) {
  cr_assert_eq(tl_f32_to_bf16(1.0f), 0x3f80);
  cr_assert_eq(tl_bf16_to_f32(0x3f80), 1.0f);
  cr_assert_eq(tl_bf16_to_f32(0xc040), -3.0f);
  cr_assert_eq(tl_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);     /* tie: even is below */
  cr_assert_eq(tl_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82); /* tie: even is above */
  cr_assert_eq(tl_f32_to_bf16(nextafterf(1.0f + ldexpf(1.0f, -8), 2.0f)), 0x3f81);
  cr_assert_eq(tl_f32_to_bf16(FLT_MAX), 0x7f80);                     /* rounds up to inf */
  cr_assert_eq(tl_f32_to_bf16(tl_f32_from_bits(0x7f7f7fffu)), 0x7f7f);
  cr_assert_eq(tl_f32_to_bf16(tl_f32_from_bits(0x00008000u)), 0x0000); /* subnormal tie */
  cr_assert_eq(tl_f32_to_bf16(tl_f32_from_bits(0x00018000u)), 0x0002);
  cr_assert_eq(tl_f32_to_bf16(-INFINITY), 0xff80);
  /* Truncating a signalling NaN whose payload is in the low half would give infinity. */
  uint16_t n = tl_f32_to_bf16(tl_f32_from_bits(0x7f800001u));
  cr_assert((n & 0x7f80u) == 0x7f80u && (n & 0x7fu) != 0 && (n & 0x40u), "got 0x%04x", n);
  cr_assert(isnan(tl_bf16_to_f32(0x7f81)) && (tl_f32_bits(tl_bf16_to_f32(0x7f81)) & 0x400000u),
            "a signalling bf16 NaN must widen to a quiet f32 NaN");
  cr_assert(isnan(tl_round_bf16(NAN)));
}

Test(fp16, bf16_and_tf32_match_independent_rounding) {
  struct rng r;
  rng_seed(&r, rng_test_seed("fp16::bf16_and_tf32_match_independent_rounding"));
  int fails = 0;
  float first = 0;
  for (int i = 0; i < (1 << 19); i++) {
    /* A random finite base, then the low bits set to the exact tie, around it, or random. */
    uint32_t base;
    do base = rng_u32(&r);
    while ((base & 0x7f800000u) == 0x7f800000u);
    uint32_t lows16[5] = {0x8000u, 0x7fffu, 0x8001u, 0x0000u, rng_u32(&r) & 0xffffu};
    uint32_t lows13[5] = {0x1000u, 0x0fffu, 0x1001u, 0x0000u, rng_u32(&r) & 0x1fffu};
    for (int j = 0; j < 5; j++) {
      float xb = tl_f32_from_bits((base & 0xffff0000u) | lows16[j]);
      float xt = tl_f32_from_bits((base & 0xffffe000u) | lows13[j]);
      bool ok = canon_bits(tl_round_bf16(xb)) == canon_bits(indep_round_drop(xb, 16)) &&
                tl_f32_to_bf16(xb) == tl_f32_bits(indep_round_drop(xb, 16)) >> 16;
      if (!ok && fails++ == 0) first = xb;
      ok = canon_bits(tl_round_tf32(xt)) == canon_bits(indep_round_drop(xt, 13));
      if (!ok && fails++ == 0) first = xt;
    }
  }
  cr_assert_eq(fails, 0, "%d roundings disagree with the independent version, first %a", fails,
               (double)first);
}

Test(fp16, tf32_known_values) {
  float u = ldexpf(1.0f, -10); /* tf32 ulp at 1 */
  cr_assert_eq(tl_round_tf32(1.0f + u / 2), 1.0f);            /* tie to even: down */
  cr_assert_eq(tl_round_tf32(1.0f + 3 * u / 2), 1.0f + 2 * u); /* tie to even: up */
  cr_assert_eq(tl_round_tf32(nextafterf(1.0f + u / 2, 2.0f)), 1.0f + u);
  cr_assert_eq(tl_round_tf32(-(1.0f + 3 * u / 2)), -(1.0f + 2 * u));
  cr_assert_eq(tl_round_tf32_rna(1.0f + u / 2), 1.0f + u);    /* tie away from zero */
  cr_assert_eq(tl_round_tf32_rna(nextafterf(1.0f + u / 2, 0.0f)), 1.0f);
  cr_assert_eq(tl_round_tf32(1.0f / 3), tl_f32_from_bits(0x3eaaa000u));
  cr_assert(isinf(tl_round_tf32(FLT_MAX)));
  cr_assert_eq(tl_round_tf32(tl_f32_from_bits(0x7f7fefffu)), tl_f32_from_bits(0x7f7fe000u));
  cr_assert(isinf(tl_round_tf32(-INFINITY)) && tl_round_tf32(-INFINITY) < 0);
  cr_assert(isnan(tl_round_tf32(tl_f32_from_bits(0x7f800001u))));
  cr_assert(isnan(tl_round_tf32_rna(tl_f32_from_bits(0x7f800001u))));
  cr_assert_eq(tl_f32_bits(tl_round_tf32(1.2345678f)) & 0x1fffu, 0u);
}

/* ---- fp8 ------------------------------------------------------------------------------- */

Test(fp16, e4m3_all_codes) {
  cr_assert_eq(tl_e4m3_to_f32(0x7e), 448.0f);
  cr_assert_eq(tl_e4m3_to_f32(0xfe), -448.0f);
  cr_assert_eq(tl_e4m3_to_f32(0x38), 1.0f);
  cr_assert_eq(tl_e4m3_to_f32(0x01), ldexpf(1.0f, -9));
  cr_assert_eq(tl_e4m3_to_f32(0x07), ldexpf(7.0f, -9));
  cr_assert_eq(tl_e4m3_to_f32(0x08), ldexpf(1.0f, -6));
  cr_assert_eq(tl_e4m3_to_f32(0x78), 256.0f); /* exponent field 15 is finite in E4M3FN */
  cr_assert(signbit(tl_e4m3_to_f32(0x80)) && tl_e4m3_to_f32(0x80) == 0.0f);
  float prev = -1.0f;
  for (int c = 0; c < 256; c++) {
    float f = tl_e4m3_to_f32((uint8_t)c);
    uint8_t back = tl_f32_to_e4m3(f);
    if ((c & 0x7f) == 0x7f) {
      cr_assert(isnan(f), "code 0x%02x should be NaN", c);
      cr_assert_eq(back, c, "NaN code 0x%02x came back as 0x%02x", c, back);
    } else {
      cr_assert(!isnan(f) && !isinf(f), "code 0x%02x should be finite", c);
      cr_assert_eq(back, c, "code 0x%02x (%g) came back as 0x%02x", c, (double)f, back);
    }
    if (c < 0x7f) {
      cr_assert(f > prev || c == 0, "codes must increase: 0x%02x", c);
      prev = f;
    }
  }
}

Test(fp16, e4m3_rounding_and_saturation) {
  float bad = 0;
  int fails = check_fp8_midpoints(tl_e4m3_to_f32, tl_f32_to_e4m3, 0x7e, &bad);
  cr_assert_eq(fails, 0, "%d e4m3 midpoint roundings wrong, first %a", fails, (double)bad);
  cr_assert_eq(tl_f32_to_e4m3(464.0f), 0x7e); /* would-be tie with 480: saturates */
  cr_assert_eq(tl_f32_to_e4m3(479.0f), 0x7e);
  cr_assert_eq(tl_f32_to_e4m3(1e6f), 0x7e);
  cr_assert_eq(tl_f32_to_e4m3(FLT_MAX), 0x7e);
  cr_assert_eq(tl_f32_to_e4m3(INFINITY), 0x7e);
  cr_assert_eq(tl_f32_to_e4m3(-INFINITY), 0xfe);
  cr_assert_eq(tl_f32_to_e4m3(NAN), 0x7f);
  cr_assert_eq(tl_f32_to_e4m3(-NAN), 0xff);
  cr_assert_eq(tl_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00); /* tie between 0 and 2^-9 */
  cr_assert_eq(tl_f32_to_e4m3(nextafterf(ldexpf(1.0f, -10), 1.0f)), 0x01);
  cr_assert_eq(tl_f32_to_e4m3(-ldexpf(3.0f, -10)), 0x82); /* tie between 1 and 2 units */
  cr_assert_eq(tl_f32_to_e4m3(1e-30f), 0x00);
  cr_assert_eq(tl_f32_to_e4m3(-FLT_TRUE_MIN), 0x80);

  struct rng r;
  rng_seed(&r, rng_test_seed("fp16::e4m3_rounding_and_saturation"));
  fails = 0;
  for (int i = 0; i < 20000; i++) {
    float x = random_float_in_binades(&r, -12, 10);
    if (tl_f32_to_e4m3(x) != nearest_fp8(x, tl_e4m3_to_f32, 0x7e, 0, 0.0) && fails++ == 0)
      bad = x;
  }
  cr_assert_eq(fails, 0, "%d e4m3 conversions are not the nearest code, first %a", fails,
               (double)bad);
}

Test(fp16, e5m2_all_codes) {
  cr_assert_eq(tl_e5m2_to_f32(0x7b), 57344.0f);
  cr_assert_eq(tl_e5m2_to_f32(0x3c), 1.0f);
  cr_assert_eq(tl_e5m2_to_f32(0x01), ldexpf(1.0f, -16));
  cr_assert(isinf(tl_e5m2_to_f32(0x7c)) && isinf(tl_e5m2_to_f32(0xfc)));
  for (int c = 0; c < 256; c++) {
    float f = tl_e5m2_to_f32((uint8_t)c);
    /* E5M2 is the top byte of an f16, so both decoders must agree. */
    cr_assert_eq(canon_bits(f), canon_bits(tl_f16_to_f32((uint16_t)(c << 8))), "code 0x%02x", c);
    uint8_t back = tl_f32_to_e5m2(f);
    if ((c & 0x7f) > 0x7c) {
      cr_assert(isnan(f) && (back & 0x7f) > 0x7c && (back & 0x80) == (c & 0x80),
                "NaN code 0x%02x came back as 0x%02x", c, back);
    } else {
      cr_assert_eq(back, c, "code 0x%02x (%g) came back as 0x%02x", c, (double)f, back);
    }
  }
}

Test(fp16, e5m2_rounding_and_overflow) {
  float bad = 0;
  int fails = check_fp8_midpoints(tl_e5m2_to_f32, tl_f32_to_e5m2, 0x7b, &bad);
  cr_assert_eq(fails, 0, "%d e5m2 midpoint roundings wrong, first %a", fails, (double)bad);
  cr_assert_eq(tl_f32_to_e5m2(61440.0f), 0x7c); /* tie between 0x7b (odd) and 2^16: inf */
  cr_assert_eq(tl_f32_to_e5m2(nextafterf(61440.0f, 0.0f)), 0x7b);
  cr_assert_eq(tl_f32_to_e5m2(-1e6f), 0xfc);
  cr_assert_eq(tl_f32_to_e5m2_sat(61440.0f), 0x7b);
  cr_assert_eq(tl_f32_to_e5m2_sat(-INFINITY), 0xfb);
  cr_assert_eq(tl_f32_to_e5m2_sat(1.0f), 0x3c);
  cr_assert(isnan(tl_e5m2_to_f32(tl_f32_to_e5m2(NAN))));
  cr_assert(isnan(tl_e5m2_to_f32(tl_f32_to_e5m2_sat(NAN))));
  cr_assert_eq(tl_f32_to_e5m2(ldexpf(1.0f, -17)), 0x00); /* tie between 0 and 2^-16 */

  struct rng r;
  rng_seed(&r, rng_test_seed("fp16::e5m2_rounding_and_overflow"));
  fails = 0;
  for (int i = 0; i < 20000; i++) {
    float x = random_float_in_binades(&r, -19, 16);
    if (tl_f32_to_e5m2(x) != nearest_fp8(x, tl_e5m2_to_f32, 0x7b, 0x7c, 65536.0) &&
        fails++ == 0)
      bad = x;
  }
  cr_assert_eq(fails, 0, "%d e5m2 conversions are not the nearest code, first %a", fails,
               (double)bad);
}

/* ---- rng ------------------------------------------------------------------------------- */

Test(rng, deterministic_and_in_range) {
  struct rng a, b, c;
  rng_seed(&a, 42);
  rng_seed(&b, 42);
  rng_seed(&c, 43);
  int same_as_other_seed = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t x = rng_u64(&a);
    cr_assert_eq(x, rng_u64(&b));
    if (x == rng_u64(&c)) same_as_other_seed++;
  }
  cr_assert_lt(same_as_other_seed, 2);

  double sum = 0, sumsq = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    float u = rng_uniform(&a, -2.0f, 3.0f);
    cr_assert(u >= -2.0f && u < 3.0f, "uniform sample %g out of range", (double)u);
    uint64_t k = rng_below(&a, 7);
    cr_assert_lt(k, 7u);
    double g = rng_normal(&a);
    sum += g;
    sumsq += g * g;
  }
  double mean = sum / n, var = sumsq / n - mean * mean;
  cr_assert(fabs(mean) < 0.02 && fabs(var - 1.0) < 0.02, "normal mean %g var %g", mean, var);
  cr_assert_eq(rng_uniform(&a, 1.0f, 1.0f), 1.0f);
}

Test(rng, seed_override) {
  const char *old = getenv("TILE_TEST_SEED");
  char *saved = old ? strdup(old) : NULL;
  setenv("TILE_TEST_SEED", "0x1234abcd", 1);
  uint64_t s = rng_fresh_seed();
  setenv("TILE_TEST_SEED", "777", 1);
  uint64_t t = rng_fresh_seed();
  if (saved) {
    setenv("TILE_TEST_SEED", saved, 1);
    free(saved);
  } else {
    unsetenv("TILE_TEST_SEED");
  }
  cr_assert_eq(s, UINT64_C(0x1234abcd));
  cr_assert_eq(t, UINT64_C(777));
}

/* ---- references ------------------------------------------------------------------------ */

Test(ref, activations) {
  cr_assert_eq(ref_act_apply(REF_ACT_NONE, -1.5f), -1.5f);
  cr_assert_eq(ref_act_apply(REF_ACT_RELU, -1.5f), 0.0f);
  cr_assert_eq(ref_act_apply(REF_ACT_RELU, 2.5f), 2.5f);
  cr_assert_eq(ref_act_apply(REF_ACT_SIGMOID, 0.0f), 0.5f);
  cr_assert_float_eq(ref_act_apply(REF_ACT_SIGMOID, 2.0f), 0.8807970779778823f, 1e-7);
  cr_assert_float_eq(ref_act_apply(REF_ACT_SILU, 1.0f), 0.7310585786300049f, 1e-7);
  cr_assert_eq(ref_act_apply(REF_ACT_GELU_TANH, 0.0f), 0.0f);
  /* 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411919906082768 */
  cr_assert_float_eq(ref_act_apply(REF_ACT_GELU_TANH, 1.0f), 0.8411919906082768f, 1e-7);
  cr_assert_float_eq(ref_act_apply(REF_ACT_GELU_TANH, -1.0f), -0.15880800939172324f, 1e-7);
  cr_assert_eq(ref_act_apply(REF_ACT_GELU_TANH, 20.0f), 20.0f);
}

Test(ref, gemm_2x2) {
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, bt[4] = {5, 7, 6, 8};
  const float want[4] = {19, 22, 43, 50};
  float c[4] = {0};
  ref_matmul(2, 2, 2, a, b, c);
  for (int i = 0; i < 4; i++) cr_assert_eq(c[i], want[i], "c[%d] = %g", i, (double)c[i]);

  float ct[4] = {0};
  struct ref_gemm_args g = {.m = 2, .n = 2, .k = 2, .a = a, .b = bt, .b_trans = true, .c = ct,
                            .alpha = 1.0f};
  cr_assert_eq(ref_gemm(&g), 0);
  for (int i = 0; i < 4; i++) cr_assert_eq(ct[i], want[i], "b_trans c[%d] = %g", i, (double)ct[i]);
}

Test(ref, gemm_epilogue) {
  /* 2 * A B + 0.5 Cin + bias = [[-61, 47], [-11, 105]]; relu; + residual 1. */
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  const float cin[4] = {2, 4, 6, 8}, bias[2] = {-100, 1}, res[4] = {1, 1, 1, 1};
  const float want[4] = {1, 48, 1, 106};
  float c[4];
  struct ref_gemm_args g = {.m = 2, .n = 2, .k = 2, .a = a, .b = b, .c_in = cin, .bias = bias,
                            .residual = res, .c = c, .alpha = 2.0f, .beta = 0.5f,
                            .act = REF_ACT_RELU};
  cr_assert_eq(ref_gemm(&g), 0);
  for (int i = 0; i < 4; i++) cr_assert_eq(c[i], want[i], "c[%d] = %g", i, (double)c[i]);

  /* In place: c_in and c the same array. */
  float cc[4] = {2, 4, 6, 8};
  g.c_in = cc;
  g.c = cc;
  cr_assert_eq(ref_gemm(&g), 0);
  for (int i = 0; i < 4; i++) cr_assert_eq(cc[i], want[i], "in place c[%d] = %g", i, (double)cc[i]);
}

Test(ref, gemm_batched_padded) {
  /* Two batches of padded 2x2 A (lda 3): I and 2I; B shared (stride 0); C padded (ldc 3). */
  const float a[12] = {1, 0, -9, 0, 1, -9, /* batch 1: */ 2, 0, -9, 0, 2, -9};
  const float b[4] = {1, 2, 3, 4};
  float c[12];
  for (int i = 0; i < 12; i++) c[i] = 99.0f;
  struct ref_gemm_args g = {.m = 2, .n = 2, .k = 2, .a = a, .lda = 3, .b = b, .c = c, .ldc = 3,
                            .alpha = 1.0f, .batch = 2, .stride_a = 6, .stride_b = 0,
                            .stride_c = 6};
  cr_assert_eq(ref_gemm(&g), 0);
  const float want[12] = {1, 2, 99, 3, 4, 99, 2, 4, 99, 6, 8, 99};
  for (int i = 0; i < 12; i++) cr_assert_eq(c[i], want[i], "c[%d] = %g", i, (double)c[i]);

  /* A leading dimension too small for its row is rejected without writing. */
  g.lda = 1;
  c[0] = 123.0f;
  cr_assert_eq(ref_gemm(&g), -1);
  cr_assert_eq(c[0], 123.0f);
}

Test(ref, softmax) {
  const float ln3 = (float)log(3.0);
  float x[6] = {0.0f, ln3, 1000.0f, 1000.0f + ln3, -INFINITY, -INFINITY};
  float y[6];
  ref_softmax(3, 2, x, 0, y, 0);
  cr_assert_float_eq(y[0], 0.25f, 1e-6);
  cr_assert_float_eq(y[1], 0.75f, 1e-6);
  cr_assert_float_eq(y[2], 0.25f, 1e-4); /* stable: no overflow at 1000; ulp(1000) blurs ln 3 */
  cr_assert_float_eq(y[3], 0.75f, 1e-4);
  cr_assert(isnan(y[4]) && isnan(y[5]), "a row of -inf is NaN, as in torch");

  /* Strided and in place: a 2x2 block inside rows of 3. */
  float z[6] = {0.0f, ln3, 7.0f, 1.0f, 1.0f, 7.0f};
  ref_softmax(2, 2, z, 3, z, 3);
  cr_assert_float_eq(z[0], 0.25f, 1e-6);
  cr_assert_float_eq(z[1], 0.75f, 1e-6);
  cr_assert_eq(z[2], 7.0f);
  cr_assert_eq(z[3], 0.5f);
  cr_assert_eq(z[4], 0.5f);
}

Test(ref, layernorm_and_rmsnorm) {
  /* [1, 2, 3, 4]: mean 2.5, biased variance 1.25. */
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 2, 1, 1}, b[4] = {0, 0, 0, 1};
  float y[4], mean, rstd;
  ref_layernorm(1, 4, x, NULL, NULL, 0.0f, y, &mean, &rstd);
  double r = 1.0 / sqrt(1.25);
  cr_assert_float_eq(mean, 2.5f, 1e-7);
  cr_assert_float_eq(rstd, (float)r, 1e-6);
  const double centred[4] = {-1.5, -0.5, 0.5, 1.5};
  for (int i = 0; i < 4; i++) cr_assert_float_eq(y[i], (float)(centred[i] * r), 1e-6);

  ref_layernorm(1, 4, x, w, b, 1e-5f, y, NULL, NULL);
  double re = 1.0 / sqrt(1.25 + 1e-5);
  for (int i = 0; i < 4; i++)
    cr_assert_float_eq(y[i], (float)(centred[i] * re * w[i] + b[i]), 1e-6, "y[%d]", i);

  const float v[2] = {3, 4}, wv[2] = {1, -2};
  float yv[2], rs;
  ref_rmsnorm(1, 2, v, wv, 0.0f, yv, &rs); /* mean square 12.5 */
  cr_assert_float_eq(rs, (float)(1.0 / sqrt(12.5)), 1e-7);
  cr_assert_float_eq(yv[0], (float)(3.0 / sqrt(12.5)), 1e-6);
  cr_assert_float_eq(yv[1], (float)(-8.0 / sqrt(12.5)), 1e-6);
}

Test(ref, attention_single_key_gives_v) {
  struct rng r;
  rng_seed(&r, rng_test_seed("ref::attention_single_key_gives_v"));
  enum { NQ = 3, D = 4 };
  float q[NQ * D], k[D], v[D], o[NQ * D], lse[NQ];
  for (int i = 0; i < NQ * D; i++) q[i] = rng_normal(&r);
  for (int i = 0; i < D; i++) {
    k[i] = rng_normal(&r);
    v[i] = rng_normal(&r);
  }
  const float scale = 0.5f;
  cr_assert_eq(ref_attention(1, 1, 1, NQ, 1, D, q, k, v, scale, false, o, lse), 0);
  for (int i = 0; i < NQ; i++) {
    double dot = 0;
    for (int t = 0; t < D; t++) dot += (double)q[i * D + t] * k[t];
    cr_assert_float_eq(lse[i], (float)(scale * dot), 1e-5, "lse[%d]", i);
    for (int t = 0; t < D; t++) cr_assert_float_eq(o[i * D + t], v[t], 1e-6, "o[%d][%d]", i, t);
  }
}

Test(ref, attention_two_keys_by_hand) {
  /* Scores [0, ln 3] give weights [1/4, 3/4]: O = [4, 0]/4 + 3 [0, 8]/4 = [1, 6], LSE = ln 4. */
  const float q[2] = {1, 0}, k[4] = {0, 0, (float)log(3.0), 0}, v[4] = {4, 0, 0, 8};
  float o[2], lse;
  cr_assert_eq(ref_attention(1, 1, 1, 1, 2, 2, q, k, v, 1.0f, false, o, &lse), 0);
  cr_assert_float_eq(o[0], 1.0f, 1e-6);
  cr_assert_float_eq(o[1], 6.0f, 1e-6);
  cr_assert_float_eq(lse, (float)log(4.0), 1e-6);
}

Test(ref, attention_causal_gqa) {
  /* hq 4, hkv 2: heads 0, 1 read kv head 0 and heads 2, 3 read kv head 1. Keys are zero, so
   * all visible scores are equal: query 0 sees key 0 (O = V[0], LSE = 0) and query 1 sees
   * both (O = mean of V[0] and V[1], LSE = ln 2). */
  enum { HQ = 4, HKV = 2, N = 2, D = 2 };
  float q[HQ * N * D], k[HKV * N * D] = {0}, o[HQ * N * D], lse[HQ * N];
  const float v[HKV * N * D] = {1, 2, 3, 4, /* kv head 1: */ 10, 20, 30, 40};
  for (int i = 0; i < HQ * N * D; i++) q[i] = (float)i;
  cr_assert_eq(ref_attention(1, HQ, HKV, N, N, D, q, k, v, 1.0f, true, o, lse), 0);
  for (int h = 0; h < HQ; h++) {
    const float *vh = v + (h / 2) * N * D;
    const float *oh = o + h * N * D;
    cr_assert_eq(oh[0], vh[0], "head %d", h);
    cr_assert_eq(oh[1], vh[1], "head %d", h);
    cr_assert_float_eq(oh[2], (vh[0] + vh[2]) / 2, 1e-6, "head %d", h);
    cr_assert_float_eq(oh[3], (vh[1] + vh[3]) / 2, 1e-6, "head %d", h);
    cr_assert_eq(lse[h * N], 0.0f);
    cr_assert_float_eq(lse[h * N + 1], (float)log(2.0), 1e-6);
  }
  /* Without the mask, query 0 also averages both keys. */
  cr_assert_eq(ref_attention(1, HQ, HKV, N, N, D, q, k, v, 1.0f, false, o, lse), 0);
  cr_assert_float_eq(o[0], 2.0f, 1e-6);
  cr_assert_eq(ref_attention(1, 3, 2, N, N, D, q, k, v, 1.0f, false, o, lse), -1);
}

Test(ref, attention_no_visible_key) {
  float q[2] = {1, 2}, o[2] = {5, 5}, lse = 0;
  cr_assert_eq(ref_attention(1, 1, 1, 1, 0, 2, q, NULL, NULL, 1.0f, true, o, &lse), 0);
  cr_assert_eq(o[0], 0.0f);
  cr_assert_eq(o[1], 0.0f);
  cr_assert(isinf(lse) && lse < 0);
}

Test(ref, compare) {
  const float want[3] = {1, 2, 5}, got[3] = {1, 2, 3};
  struct ref_cmp c = ref_compare(got, want, 3, 1e-3, 1e-3);
  cr_assert_eq(c.n_bad, 1u);
  cr_assert_eq(c.worst, 2u);
  cr_assert_eq(c.n_nan, 0u);
  cr_assert_float_eq(c.max_abs, 2.0, 1e-12);
  cr_assert_float_eq(c.max_rel, 0.4, 1e-12);
  cr_assert_float_eq(c.rel_l2, 2.0 / sqrt(30.0), 1e-12);
  char buf[256];
  ref_cmp_format(buf, sizeof buf, &c, 3, got, want);
  cr_assert(strstr(buf, "bad 1/3") && strstr(buf, "worst [2]") && strstr(buf, "want 5"), "%s",
            buf);

  /* The tolerance is inclusive: |1.25 - 1| = 0.25 passes atol 0.25 and fails 0.2499. */
  const float w1 = 1.0f, g1 = 1.25f;
  cr_assert_eq(ref_compare(&g1, &w1, 1, 0.25, 0.0).n_bad, 0u);
  cr_assert_eq(ref_compare(&g1, &w1, 1, 0.2499, 0.0).n_bad, 1u);
  cr_assert_eq(ref_compare(&g1, &w1, 1, 0.0, 0.25).n_bad, 0u);
  cr_assert_eq(ref_compare(&g1, &w1, 1, 0.0, 0.24).n_bad, 1u);

  /* NaN in both is equal; NaN on one side is bad; infinities must match exactly. */
  const float wn[5] = {NAN, 1, 1, INFINITY, INFINITY}, gn[5] = {NAN, NAN, 1, INFINITY, FLT_MAX};
  c = ref_compare(gn, wn, 5, 1e-3, 1e-3);
  cr_assert_eq(c.n_nan, 1u);
  cr_assert_eq(c.n_bad, 2u);
  cr_assert_eq(c.worst, 1u);
  cr_assert(isinf(c.max_abs));
  const float wi = -INFINITY, gi = INFINITY;
  cr_assert_eq(ref_compare(&gi, &wi, 1, 1e30, 1e30).n_bad, 1u);
  const float wz = 1, gz = NAN;
  cr_assert_eq(ref_compare(&wz, &gz, 1, 1e30, 1e30).n_nan, 1u); /* want NaN, got not */

  const float zeros[2] = {0, 0};
  c = ref_compare(zeros, zeros, 2, 0.0, 0.0);
  cr_assert_eq(c.n_bad, 0u);
  cr_assert_eq(c.rel_l2, 0.0);
  ref_cmp_format(buf, sizeof buf, &c, 2, NULL, NULL);
  cr_assert(strstr(buf, "bad 0/2") != NULL, "%s", buf);
}
