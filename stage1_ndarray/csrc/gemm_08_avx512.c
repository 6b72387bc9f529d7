/* gemm_08_avx512: rung 07 for AVX-512: a 14 x 32 tile of C in zmm registers, its edges written through masks.

   idea:     the microkernel keeps a 14 x 32 block of C in 28 of the 32 zmm registers (07: 6 x 16 in 12 of 16
             ymm), so each k step is 2 loads of B, 14 broadcasts of A and 28 FMAs 16 lanes wide; a partial tile
             is written in place through column masks and a row count (07 computed it into a scratch tile and
             copied it out); the blocks are retuned for Zen 4: KC = 512 (a 64 KiB B sliver streams from L2 and
             the kernel's fixed cost per call is spread over twice the FMAs), MC = 224 (a 448 KiB A block in the
             1 MiB L2); and packing runs in zmm too: row-major A is transposed 16 x 16 in registers (0.5 -> 0.3
             ns an element), B is copied row by row (walking a sliver down 512 rows touched a new page a row).
   fixes:    07 on an AVX-512 machine. Zen 4 runs a 512-bit FMA as two 256-bit halves, so the FMA peak is
             AVX2's; what the wider registers buy is half the instructions, a tile twice as large for the
             same loads, and edges without the copy.
   measured: AMD EPYC Zen 4 (family 25 model 17, 2 cores; /proc/cpuinfo says "AMD EPYC"), each library
             in its own process, medians of 5 back-to-back runs of 20 calls: 1 thread 98 GFLOP/s at n=1024
             (106% of numpy/OpenBLAS; 07: 81, 87%), 100 at n=2048 (105%; 07: 80, 84%); 2 threads 195 at
             n=1024 (107%; 07: 156), 191 at n=2048 (103%; 07: 163). One core's FMA peak (benchmarks/peak.c)
             is ~115, so a product runs at ~87% of it. KC 384..640 x MC 168..336 measured within the noise
             of each other on 2 threads; the shared machine makes single runs swing by 10%.

   Built without AVX-512 (no __AVX512F__), gemm_08_avx512 simply calls gemm_07_tuned, so every machine
   has the same ladder and best() (the last rung) is 07's code under this name there;
   gemm_has_avx512() says which was built. Products of fewer than 14 rows always go to 07 (its flat path
   below 6 rows, its 6-row tile above): a 14-row tile would mostly multiply zeros. */
#include "gemm_ladder.h"

int gemm_07_tuned(GEMM_PARAMS);  /* the fallback without AVX-512, and the path for short products */

#ifdef __AVX512F__
#include <immintrin.h>

#define MR 14
#define NR 32
#ifndef KC
#define KC 512
#endif
#ifndef MC
#define MC 224
#endif
#ifndef NC
#define NC 4096
#endif

static i64 min64(i64 x, i64 y) { return x < y ? x : y; }
static i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

/* v[q] <- column q of the 16 x 16 block whose row r is v[r]: pairs of rows interleave, then pairs of pairs
   (each 128-bit lane then holds 4 rows of one column), then the lanes are gathered across registers. */
static void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; h++) {
      const __m512d lo = _mm512_castps_pd(t[i + h]), hi = _mm512_castps_pd(t[i + h + 2]);
      v[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
      v[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
    }
  for (int m = 0; m < 4; m++) {  /* v[4g + m], lane L: column 4L + m of rows 4g .. 4g + 3 */
    const __m512 x = _mm512_shuffle_f32x4(v[m], v[4 + m], 0x88), y = _mm512_shuffle_f32x4(v[m], v[4 + m], 0xdd);
    const __m512 z = _mm512_shuffle_f32x4(v[8 + m], v[12 + m], 0x88);
    const __m512 w = _mm512_shuffle_f32x4(v[8 + m], v[12 + m], 0xdd);
    t[m] = _mm512_shuffle_f32x4(x, z, 0x88);
    t[4 + m] = _mm512_shuffle_f32x4(y, w, 0x88);
    t[8 + m] = _mm512_shuffle_f32x4(x, z, 0xdd);
    t[12 + m] = _mm512_shuffle_f32x4(y, w, 0xdd);
  }
  for (int q = 0; q < 16; q++) v[q] = t[q];
}

/* ap <- A[0:mc, 0:kc] as MR-row slivers: sliver s holds A[s*MR + r, p] at s*MR*kc + p*MR + r; rows past mc are 0.
   Each column of a sliver (MR floats) is one masked store: A transposed has it contiguous (one masked load);
   row-major A is read 16 columns of each row at a time and transposed in registers. */
static void pack_a(i64 mc, i64 kc, const float *a, i64 rsa, i64 csa, float *restrict ap) {
  const __mmask16 all = (__mmask16)((1u << MR) - 1);
  for (i64 i0 = 0; i0 < mc; i0 += MR, ap += MR * kc) {
    const i64 mr = min64(MR, mc - i0);
    const __mmask16 live = (__mmask16)((1u << mr) - 1);
    const float *ai = a + i0 * rsa;
    i64 p = 0;
    if (rsa == 1) {
      for (; p < kc; p++) _mm512_mask_storeu_ps(ap + p * MR, all, _mm512_maskz_loadu_ps(live, ai + p * csa));
    } else if (csa == 1) {
      for (; p + 16 <= kc; p += 16) {
        __m512 v[16];
        for (int r = 0; r < 16; r++) v[r] = r < mr ? _mm512_loadu_ps(ai + r * rsa + p) : _mm512_setzero_ps();
        transpose16(v);
        for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(ap + (p + q) * MR, all, v[q]);
      }
    }
    for (; p < kc; p++)
      for (i64 r = 0; r < MR; r++) ap[p * MR + r] = r < mr ? ai[r * rsa + p * csa] : 0.0f;
  }
}

/* bp <- B[0:kc, j0:j1] as NR-column slivers: the sliver of column j holds B[p, j + q] at j*kc + p*NR + q, and
   columns past j1 are 0; j0 is a multiple of NR. Row-major B is copied row by row, each row's stretch left to
   right: walking one sliver down kc rows instead touches a new page on every row. */
static void pack_b(i64 kc, i64 j0, i64 j1, const float *b, i64 rsb, i64 csb, float *restrict bp) {
  if (csb == 1) {
    for (i64 p = 0; p < kc; p++)
      for (i64 j = j0; j < j1; j += NR) {
        const float *src = b + p * rsb + j;
        float *dst = bp + j * kc + p * NR;
        if (j + NR <= j1) {
          _mm512_store_ps(dst, _mm512_loadu_ps(src));
          _mm512_store_ps(dst + 16, _mm512_loadu_ps(src + 16));
        } else {
          for (i64 q = 0; q < NR; q++) dst[q] = j + q < j1 ? src[q] : 0.0f;
        }
      }
  } else {
    for (i64 j = j0; j < j1; j += NR)
      for (i64 p = 0; p < kc; p++)
        for (i64 q = 0; q < NR; q++) bp[j * kc + p * NR + q] = j + q < j1 ? b[p * rsb + (j + q) * csb] : 0.0f;
  }
}

/* C[0:mr, 0:nr] = alpha * (packed A sliver) @ (packed B sliver) + beta * C, mr <= MR and nr <= NR;
   acc[r][h] holds C[r, 16h : 16h + 16]. The column masks write a partial tile in place. */
static void kernel(i64 kc, float alpha, const float *ap, const float *bp, float beta, float *c, i64 ldc,
                   i64 mr, i64 nr) {
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) {
    if (r >= mr) break;
    __builtin_prefetch(c + r * ldc, 1);
    __builtin_prefetch(c + r * ldc + NR - 1, 1);
  }
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (i64 p = 0; p < kc; p++) {
    const __m512 b0 = _mm512_load_ps(bp + p * NR), b1 = _mm512_load_ps(bp + p * NR + 16);
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
      const __m512 ar = _mm512_set1_ps(ap[p * MR + r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) {
    if (r >= mr) break;
    float *cr = c + r * ldc;
    __m512 c0 = _mm512_mul_ps(va, acc[r][0]), c1 = _mm512_mul_ps(va, acc[r][1]);
    if (beta != 0.0f) {
      c0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), c0);
      c1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), c1);
    }
    _mm512_mask_storeu_ps(cr, m0, c0);
    _mm512_mask_storeu_ps(cr + 16, m1, c1);
  }
}

/* One packed mc x kc block of A against one packed kc x nc panel of B: C[0:mc, 0:nc] = alpha * A @ B + beta * C. */
static void macro_kernel(i64 mc, i64 nc, i64 kc, float alpha, const float *ap, const float *bp, float beta,
                         float *c, i64 ldc) {
  for (i64 j = 0; j < nc; j += NR)
    for (i64 i = 0; i < mc; i += MR)
      kernel(kc, alpha, ap + i * kc, bp + j * kc, beta, c + i * ldc + j, ldc, min64(MR, mc - i), min64(NR, nc - j));
}

/* How many ic blocks: each at most MC rows, and a multiple of the thread count of them. */
static i64 block_count(i64 slivers, int nt) {
  const i64 per_block = MC / MR;
  return round_up((slivers + per_block - 1) / per_block, nt);
}

int gemm_08_avx512(GEMM_PARAMS) {
  if (M < MR) return gemm_07_tuned(c, ldc, a, rsa, csa, b, rsb, csb, M, N, K, alpha, beta, threads);
  if (N == 0) return 0;
  if (K == 0) {
    gemm_scale_c(c, ldc, M, N, beta);
    return 0;
  }
  const int nt = threads > 1 ? threads : 1;
  const i64 slivers = (M + MR - 1) / MR, blocks = block_count(slivers, nt);
  const i64 mcap = (slivers + blocks - 1) / blocks * MR;
  const i64 kcap = min64(KC, K), ncap = round_up(min64(NC, N), NR);
  float *ap = gemm_alloc(nt * mcap * kcap), *bp = gemm_alloc(kcap * ncap);
  if (ap == NULL || bp == NULL) {
    free(ap);
    free(bp);
    return -1;
  }
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *my_ap = ap + gemm_thread_id() * mcap * kcap;
    for (i64 jc = 0; jc < N; jc += NC) {
      const i64 nc = min64(NC, N - jc);
      for (i64 pc = 0; pc < K; pc += KC) {
        const i64 kc = min64(KC, K - pc);
        const float beta_here = pc == 0 ? beta : 1.0f;  /* later k blocks accumulate */
        const i64 bslivers = (nc + NR - 1) / NR;
#pragma omp for schedule(static)
        for (int part = 0; part < nt; part++)  /* each thread packs a stretch of whole slivers */
          pack_b(kc, part * bslivers / nt * NR, min64((part + 1) * bslivers / nt * NR, nc), b + pc * rsb + jc * csb,
                 rsb, csb, bp);
#pragma omp for schedule(static)
        for (i64 blk = 0; blk < blocks; blk++) {
          const i64 ic = blk * slivers / blocks * MR, mc = min64((blk + 1) * slivers / blocks * MR, M) - ic;
          if (mc <= 0) continue;
          pack_a(mc, kc, a + ic * rsa + pc * csa, rsa, csa, my_ap);
          macro_kernel(mc, nc, kc, alpha, my_ap, bp, beta_here, c + ic * ldc + jc, ldc);
        }
      }
    }
  }
  free(ap);
  free(bp);
  return 0;
}
#else
int gemm_08_avx512(GEMM_PARAMS) {
  return gemm_07_tuned(c, ldc, a, rsa, csa, b, rsb, csb, M, N, K, alpha, beta, threads);
}
#endif
