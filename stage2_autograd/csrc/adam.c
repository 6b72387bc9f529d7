/* One Adam/AdamW step for one parameter, in one pass: optim/__init__.py's Adam.step calls it.
   Written as tensor ops, a step makes 15 passes over every parameter and its three companions
   (gradient, first and second moments) and allocates a temporary for each; fused, it reads and
   writes each element once, in place. The arithmetic is the composite's, in the same order:

     p = p * decay                      AdamW: decay = 1 - lr * wd (1 for Adam)
     g = g + p * l2                     Adam's L2 weight decay (0 for AdamW)
     m = m * b1 + g * (1 - b1)
     v = v * b2 + g * g * (1 - b2)
     p = p - m * step / (sqrt(v) * inv_sqrt_bc2 + eps)    step = lr / (1 - b1^t), bc2 = 1 - b2^t

   p, m, v and g are contiguous, n elements of one float dtype; the scalars come as doubles and are
   rounded to that dtype first, as the composite's scalar operands are. */
#include "kernels.h"

#define ADAM_LOOP(T, SUF) do {                                                    \
    T *restrict P = (T *)p, *restrict M = (T *)m, *restrict V = (T *)v;           \
    const T *restrict G = (const T *)g;                                           \
    const T dc = (T)decay, l2_ = (T)l2, b1_ = (T)b1, c1 = (T)(1 - b1);            \
    const T b2_ = (T)b2, c2 = (T)(1 - b2), st = (T)step, ib = (T)inv_sqrt_bc2;    \
    const T ep = (T)eps;                                                          \
    for (i64 i = 0; i < n; i++) {                                                 \
      T pi = P[i] * dc, gi = G[i] + pi * l2_;                                     \
      T mi = M[i] * b1_ + gi * c1, vi = V[i] * b2_ + gi * gi * c2;                \
      M[i] = mi;                                                                  \
      V[i] = vi;                                                                  \
      P[i] = pi - mi * st / (sqrt##SUF(vi) * ib + ep);                            \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

int adam_step(int dtype, void *p, void *m, void *v, const void *g, i64 n, double decay, double l2,
              double b1, double b2, double step, double inv_sqrt_bc2, double eps) {
  switch (dtype) {
    case DT_FLOAT32: ADAM_LOOP(float, f);
    case DT_FLOAT64: ADAM_LOOP(double, );
  }
  return -1;
}
