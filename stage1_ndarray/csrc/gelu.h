/* GELU, x * Phi(x) with Phi the standard normal CDF, and its slope Phi(x) + x * phi(x), one
   element at a time, for elementwise.c's U_GELU (and, once there is autograd, the slope for B_GELU_GRAD).

   Phi(x) = erfc(-x / sqrt 2) / 2 is accurate in both tails, where the textbook 0.5 * (1 + erf(x /
   sqrt 2)) cancels to 0 for x below about -5. float64 calls libm. float32 does not: glibc's erff
   costs about 16 ns an element here and does not vectorize, which made GELU and its gradient
   a sixth of a nanoGPT step. Its own branch-free erfc and exp below let GCC vectorize the loop:
     erfc(z), z >= 0: t * exp(-z^2 - 1.26551223 + t * P(t)), t = 1 / (1 + z / 2), the Chebyshev
       fit of Numerical Recipes (2nd ed., 6.2), relative error below 1.2e-7 for every z >= 0;
     exp(y): y = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite, ln2 split in two), e^r by its Taylor
       series to r^7 (relative error below 6e-9), 2^k written into the float's exponent bits.
   Together a few float32 roundings from the exact value (conformance checks it against float64). */
#ifndef GELU_H
#define GELU_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#define SQRT1_2 0.70710678118654752440     /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */

static inline float exp_lanes(float y) {
  y = y >= -87.0f ? y : -87.0f;  /* 2^k stays a normal float; NaN becomes -87 (no NaN to int) */
  y = y <= 88.0f ? y : 88.0f;
  const float round = 12582912.0f;                    /* 1.5 * 2^23: adding it rounds to an integer */
  float k = (y * 1.44269504f + round) - round;
  float r = (y - k * 0.693145751953125f) - k * 1.428606765330187e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120
            + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

static inline float erfc_lanes(float z) {  /* z >= 0 */
  float t = 1.0f / (1.0f + 0.5f * z);
  float q = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f
            + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  return t * exp_lanes(q - z * z);
}

static inline float normal_cdff(float x) {
  float half_tail = 0.5f * erfc_lanes(fabsf(x) * (float)SQRT1_2);  /* Phi(-|x|) */
  return x >= 0 ? 1.0f - half_tail : half_tail;
}

static inline double normal_cdf(double x) { return 0.5 * erfc(-x * SQRT1_2); }

static inline float geluf(float x) { return x * normal_cdff(x); }
static inline double gelu(double x) { return x * normal_cdf(x); }

static inline float gelu_slopef(float x) {
  return normal_cdff(x) + x * exp_lanes(-0.5f * x * x) * (float)INV_SQRT_2PI;
}
static inline double gelu_slope(double x) { return normal_cdf(x) + x * exp(-0.5 * x * x) * INV_SQRT_2PI; }

#endif
