/* The two half types as 16-bit storage: each converts to float exactly and back from float by
   rounding to nearest even. Kernels never compute in them; they widen to float, compute, and
   narrow once on store. Conversions from double or from an integer go through float first, as
   torch's do, so that both libraries round the same way.
   Both conversions are integer arithmetic on the bits, the same on every instruction set (gcc 12's
   _Float16 with AVX512-FP16 folded a float -> _Float16 -> float round trip away in a vectorized loop). */
#include <stdint.h>
#include <string.h>

static inline float bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* x >> shift, rounded to nearest even on the bits shifted out. */
static inline uint32_t shift_rne(uint32_t x, int shift) {
  uint32_t kept = x >> shift, rest = x & ((1u << shift) - 1), half = 1u << (shift - 1);
  return kept + ((rest > half) | ((rest == half) & kept & 1u));
}

/* float16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits; below 2^-14 subnormals count
   units of 2^-24. */
static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_to_f32(sign | 0x7f800000u | (m << 13));     /* inf, NaN */
  if (e != 0) return bits_to_f32(sign | ((e + 112) << 23) | (m << 13));  /* rebias 15 -> 127 */
  float v = (float)m * 0x1p-24f;                                          /* zero, subnormals: exact */
  return sign ? -v : v;
}

static inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);                 /* NaN: quiet */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                /* 65520 and up round to inf */
  if (a >= 0x38800000u) return (uint16_t)(sign | shift_rne(a - (112u << 23), 13));  /* normal */
  if (a < 0x33000000u) return (uint16_t)sign;                             /* at most 2^-25: to zero */
  uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;               /* subnormal: units of 2^-24 */
  return (uint16_t)(sign | shift_rne(mant, (int)(126 - e)));
}

/* bfloat16 is the top half of a float: same exponent, 7 bits of mantissa instead of 23. A NaN
   becomes the canonical quiet NaN, since rounding its payload could make it inf. */
static inline float bf16_to_f32(uint16_t bits) {
  return bits_to_f32((uint32_t)bits << 16);
}

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return (uint16_t)shift_rne(u, 16);
}
