/* fp16.h - conversions between float and the narrow floating-point formats (f16, bf16, tf32,
 * fp8 E4M3 and E5M2) for the CPU interpreter, the tests and the GPU check tools.
 *
 * Design choices:
 *  - Header-only and static inline, depending only on <stdint.h>, <string.h> and <math.h>, so
 *    any file can include it without linking anything.
 *  - Every conversion works on the bit patterns with integer arithmetic; no _Float16 or
 *    hardware conversion instruction is used, so results are identical on every compiler and
 *    host and do not depend on the floating-point environment.
 *  - Narrowing always rounds to nearest, ties to even (RNE), the IEEE default and what the GPU's
 *    cvt.rn instructions do. Subnormals of the narrow format are produced and read exactly.
 *  - NaN stays NaN and comes out quiet: the quiet bit is set and as much of the payload as fits
 *    is kept, so a quiet f16 NaN survives a round trip through f32 bit for bit. The sign is
 *    kept everywhere, including on zeros and NaNs.
 *  - f16, bf16 and E5M2 overflow to infinity as IEEE formats do. E4M3 (the OCP "FN" variant)
 *    has no infinity, so its conversion saturates: a finite value whose magnitude rounds above
 *    448, and infinity, become +-448, matching PTX cvt.rn.satfinite.e4m3x2.f32, which is
 *    the only float-to-E4M3 conversion the GPU offers. tl_f32_to_e5m2_sat is the matching
 *    saturating E5M2 conversion (cvt.rn.satfinite.e5m2x2.f32).
 *  - tf32 keeps f32's 8 exponent bits and 10 of its 23 mantissa bits. tl_round_tf32 rounds
 *    RNE (cvt.rn.tf32.f32); tl_round_tf32_rna rounds ties away from zero (cvt.rna.tf32.f32,
 *    the conversion most tf32 kernels use). A Tensor Core fed raw f32 bits ignores the low
 *    13 bits, i.e. truncates. The three differ by at most one tf32 ulp.
 */
#ifndef TL_FP16_H
#define TL_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- raw bit access ------------------------------------------------------------------- */

static inline uint32_t tl_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float tl_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- shared helpers (internal) -------------------------------------------------------- */

/* Shifts v right by s bits (0 <= s <= 31), rounding to nearest with ties to even. */
static inline uint32_t tl__shr_rne(uint32_t v, int s) {
  if (s <= 0) return v;
  uint32_t q = v >> s;
  uint32_t rem = v & ((UINT32_C(1) << s) - 1);
  uint32_t half = UINT32_C(1) << (s - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

/* Rounds the magnitude of a finite f32 (bits without the sign, below 0x7f800000) to a narrow
 * format with mbits mantissa bits and exponent bias `bias`, laid out IEEE-style (biased
 * exponent above the mantissa, exponent field 0 for subnormals). Returns the magnitude code,
 * which may exceed the format's largest finite code; the caller decides what overflow means.
 * The code is returned saturated at 0xffff, which is above every narrow format's range, so
 * huge inputs cannot wrap around. */
static inline uint32_t tl__narrow_mag(uint32_t mag, int mbits, int bias) {
  int e32 = (int)(mag >> 23);             /* biased f32 exponent, 0..254 */
  uint32_t man = mag & 0x7fffffu;         /* f32 mantissa without the implicit bit */
  int te = e32 - 127 + bias;              /* biased exponent in the narrow format */
  if (e32 == 0) te = 1 - 127 + bias;      /* f32 subnormal: exponent -126, no implicit bit */
  if (te >= 1 && e32 != 0) {
    /* Normal in the narrow format. Rounding the concatenated exponent and mantissa lets a
     * mantissa carry bump the exponent, which is exactly what the encoding needs. */
    if (te >= 0xffff >> mbits) return 0xffff;
    uint32_t combined = ((uint32_t)te << 23) | man;
    return tl__shr_rne(combined, 23 - mbits);
  }
  /* Subnormal in the narrow format (or an f32 subnormal, which is far smaller still).
   * The code counts units of the smallest subnormal, 2^(1 - bias - mbits), and the value is
   * sig * 2^(e - 23), so the code is sig shifted right by 23 - mbits + 1 - te. A result that
   * rounds up to 2^mbits is the smallest normal, which the encoding gets for free. */
  uint32_t sig = e32 != 0 ? (man | 0x800000u) : man;
  int s = 23 - mbits + 1 - te;
  if (s > 24) return 0; /* sig < 2^24 <= half a unit: rounds to zero */
  return tl__shr_rne(sig, s);
}

/* Builds an f32 from a narrow-format exponent field e and mantissa field m that encode a
 * finite number (normal when e > 0, subnormal when e == 0). Every such value is exact in f32. */
static inline float tl__widen(uint32_t sign32, uint32_t e, uint32_t m, int mbits, int bias) {
  if (e == 0) {
    if (m == 0) return tl_f32_from_bits(sign32);
    int ex = 1 - bias; /* subnormal: m * 2^(1 - bias - mbits); normalise the mantissa */
    while (!(m & (UINT32_C(1) << mbits))) {
      m <<= 1;
      ex--;
    }
    m &= (UINT32_C(1) << mbits) - 1;
    return tl_f32_from_bits(sign32 | ((uint32_t)(ex + 127) << 23) | (m << (23 - mbits)));
  }
  return tl_f32_from_bits(sign32 | ((uint32_t)((int)e - bias + 127) << 23) | (m << (23 - mbits)));
}

/* ---- f16 (IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits, bias 15) --------------- */

static inline float tl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) {
    if (m == 0) return tl_f32_from_bits(sign | 0x7f800000u);
    return tl_f32_from_bits(sign | 0x7fc00000u | (m << 13)); /* quiet NaN, payload kept */
  }
  return tl__widen(sign, e, m, 10, 15);
}

static inline uint16_t tl_f32_to_f16(float f) {
  uint32_t u = tl_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((mag >> 13) & 0x3ffu)); /* NaN */
  if (mag == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);                        /* inf */
  uint32_t code = tl__narrow_mag(mag, 10, 15);
  if (code >= 0x7c00u) code = 0x7c00u; /* overflow to infinity */
  return (uint16_t)(sign | code);
}

static inline float tl_round_f16(float x) { return tl_f16_to_f32(tl_f32_to_f16(x)); }

/* ---- bf16 (the upper half of an f32: 1 sign, 8 exponent, 7 mantissa bits) ------------- */

static inline float tl_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u; /* make a signalling NaN quiet */
  return tl_f32_from_bits(u);
}

static inline uint16_t tl_f32_to_bf16(float f) {
  uint32_t u = tl_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  /* bf16 shares f32's exponent range, so rounding away the low 16 bits handles normals,
   * subnormals and overflow to infinity (a carry out of the largest finite value) at once. */
  return (uint16_t)tl__shr_rne(u, 16);
}

static inline float tl_round_bf16(float x) { return tl_bf16_to_f32(tl_f32_to_bf16(x)); }

/* ---- tf32 (f32 with only the top 10 mantissa bits kept; stored as an f32) -------------- */

static inline float tl_round_tf32(float x) {
  uint32_t u = tl_f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return tl_f32_from_bits((u | 0x00400000u) & ~0x1fffu);
  /* Same reasoning as bf16: a carry from the mantissa into the exponent is the right answer,
   * including the carry from the largest finite values into infinity. */
  return tl_f32_from_bits(tl__shr_rne(u, 13) << 13);
}

static inline float tl_round_tf32_rna(float x) {
  uint32_t u = tl_f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return tl_f32_from_bits((u | 0x00400000u) & ~0x1fffu);
  if ((u & 0x7fffffffu) == 0x7f800000u) return x;
  return tl_f32_from_bits((u + 0x1000u) & ~0x1fffu); /* add half a unit, then truncate */
}

/* ---- fp8 E4M3FN (OCP: 1 sign, 4 exponent, 3 mantissa bits, bias 7, no infinity) -------- */
/* Codes 0x7f and 0xff are NaN; every other code is finite, so the largest is 0x7e = 448. */

static inline float tl_e4m3_to_f32(uint8_t c) {
  uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  uint32_t e = (c >> 3) & 0xfu, m = c & 0x7u;
  if (e == 0xf && m == 0x7) return tl_f32_from_bits(sign | 0x7fc00000u);
  return tl__widen(sign, e, m, 3, 7);
}

static inline uint8_t tl_f32_to_e4m3(float f) {
  uint32_t u = tl_f32_bits(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint8_t)(sign | 0x7fu);  /* NaN */
  if (mag == 0x7f800000u) return (uint8_t)(sign | 0x7eu); /* infinity saturates */
  uint32_t code = tl__narrow_mag(mag, 3, 7);
  if (code > 0x7eu) code = 0x7eu; /* saturate: 0x7f would be NaN */
  return (uint8_t)(sign | code);
}

/* ---- fp8 E5M2 (1 sign, 5 exponent, 2 mantissa bits, bias 15: the top byte of an f16) --- */
/* 0x7c is infinity, 0x7d..0x7f are NaN, the largest finite value is 0x7b = 57344. */

static inline float tl_e5m2_to_f32(uint8_t c) {
  uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  uint32_t e = (c >> 2) & 0x1fu, m = c & 0x3u;
  if (e == 0x1f) {
    if (m == 0) return tl_f32_from_bits(sign | 0x7f800000u);
    return tl_f32_from_bits(sign | 0x7fc00000u | (m << 21));
  }
  return tl__widen(sign, e, m, 2, 15);
}

static inline uint8_t tl_f32_to_e5m2(float f) {
  uint32_t u = tl_f32_bits(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint8_t)(sign | 0x7eu | ((mag >> 21) & 0x3u)); /* NaN */
  if (mag == 0x7f800000u) return (uint8_t)(sign | 0x7cu);
  uint32_t code = tl__narrow_mag(mag, 2, 15);
  if (code >= 0x7cu) code = 0x7cu; /* overflow to infinity */
  return (uint8_t)(sign | code);
}

/* Like tl_f32_to_e5m2, but finite overflow and infinities become +-57344 (PTX satfinite). */
static inline uint8_t tl_f32_to_e5m2_sat(float f) {
  uint8_t c = tl_f32_to_e5m2(f);
  if ((c & 0x7fu) == 0x7cu) c = (uint8_t)((c & 0x80u) | 0x7bu);
  return c;
}

#endif /* TL_FP16_H */
