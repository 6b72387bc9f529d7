/* The two half types as 16-bit storage: each converts to float exactly and back from float by
   rounding to nearest even. Kernels never compute in them; they widen to float, compute, and
   narrow once on store. Conversions from double or from an integer go through float first, as
   torch's do, so that both libraries round the same way.
   Both conversions are integer arithmetic on the bits, the same on every instruction set (gcc 12's
   _Float16 with AVX512-FP16 folded a float -> _Float16 -> float round trip away in a vectorized loop),
   written without branches: every case is computed and a select keeps the one that applies, which
   gcc turns into vector blends, so a loop of conversions vectorizes. */
#include <stdint.h>
#include <string.h>

static inline float bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof f);
  return u;
}

/* x >> shift (1 <= shift <= 24), rounded to nearest even on the bits shifted out: adding just under
   half of the last kept bit's weight, plus one more when the kept part is odd, carries into the kept
   part exactly when the rest is above half, or half and the kept part odd. (x < 2^31 here.) */
static inline uint32_t shift_rne(uint32_t x, uint32_t shift) {
  return (x + ((1u << (shift - 1)) - 1u) + ((x >> shift) & 1u)) >> shift;
}

/* float16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits; below 2^-14 subnormals count
   units of 2^-24. Its exponent and mantissa bits, moved to float's places, read as a float 2^-112
   times the value (a subnormal half as a subnormal float too): one exact multiply rebiases it. The
   all-ones exponent (inf, NaN) then takes float's all-ones exponent. */
static inline float f16_to_f32(uint16_t h) {
  float magnitude = bits_to_f32((uint32_t)(h & 0x7fffu) << 13) * 0x1p112f;
  uint32_t special = (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u;
  return bits_to_f32(f32_to_bits(magnitude) | special | ((uint32_t)(h & 0x8000u) << 16));
}

static inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t e = a >> 23, at_least = e > 102u ? e : 102u, clamped = at_least < 112u ? at_least : 112u;
  uint32_t normal = shift_rne(a - (112u << 23), 13);                            /* rebias 127 -> 15 */
  uint32_t subnormal = shift_rne((a & 0x7fffffu) | 0x800000u, 126u - clamped);  /* units of 2^-24 */
  uint32_t r = a >= 0x38800000u ? normal : subnormal;
  r = a >= 0x477ff000u ? 0x7c00u : r;      /* 65520 and up round to inf */
  r = a > 0x7f800000u ? 0x7e00u : r;       /* NaN: quiet */
  r &= 0u - (uint32_t)(a >= 0x33000000u);  /* at most 2^-25: to zero (a mask: a third select made gcc branch) */
  return (uint16_t)(sign | r);
}

/* bfloat16 is the top half of a float: same exponent, 7 bits of mantissa instead of 23. A NaN
   becomes the canonical quiet NaN, since rounding its payload could make it inf. */
static inline float bf16_to_f32(uint16_t bits) {
  return bits_to_f32((uint32_t)bits << 16);
}

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f), a = u & 0x7fffffffu;
  return a > 0x7f800000u ? 0x7fc0 : (uint16_t)(((u >> 16) & 0x8000u) | shift_rne(a, 16));
}
