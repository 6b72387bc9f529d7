/* gemm_bf16: the bfloat16 rung: C = A @ B on bfloat16 operands, each sum kept in float32 and rounded once.

   idea:     Sapphire Rapids and later Xeons have AMX: eight tile registers of 16 rows x 64 bytes and one
             instruction (TDPBF16PS) that multiplies a 16 x 32 bfloat16 tile by a 32 x 16 one into a 16 x 16
             float32 tile: 8192 multiply-adds, where an AVX-512 FMA does 16. The kernel keeps a 32 x 32 block
             of C in four tiles while it sums 8 tiles of K (256 columns of A, whose 32 x 256 block stays in
             the L1 across a panel of B), then parks the block in a float32 scratch until the next 8; B is
             packed panel by panel into "VNNI" tiles (a tile row holds rows k and k + 1 of 16 columns side
             by side, as TDPBF16PS reads them), laid out in the order the kernels read them; row-major A is
             read in place (tile rows are its rows). The last K block rounds C to bfloat16 (nearest even,
             NaN kept) in zmm registers on the way out.
   fixes:    a bfloat16 product in float32 (widen both operands, the float32 ladder, round) moves twice the
             bytes and runs at float32's speed; torch's bfloat16 matmul on such a CPU runs on AMX.
   measured: see benchmarks/results/gemm_bf16.md (the rung against torch's bfloat16 matmul, same CPU, each
             in its own process).

   Without AMX in the build (no __AMX_BF16__: every CPU but recent Xeons, and every SITP_ISA below native), or
   when Linux refuses this process the tile state, the product widens A and B to float32, runs the float32
   ladder's top rung and rounds: the same sums in another order. gemm_bf16_uses_amx() says which runs.
   AMX treats a subnormal bfloat16 operand as zero and flushes a subnormal sum to zero, as torch's AMX
   kernels do; the float32 path keeps them. */
#define _DEFAULT_SOURCE  /* syscall() */
#include "gemm_ladder.h"
#include "half.h"

int gemm_08_avx512(GEMM_PARAMS);

static i64 bf16_min(i64 x, i64 y) { return x < y ? x : y; }

/* The path every machine has: float32 copies of A and B (row-major), the top float32 rung, one rounding. */
static int widened(uint16_t *c, i64 ldc, const uint16_t *a, i64 rsa, i64 csa, const uint16_t *b, i64 rsb,
                   i64 csb, i64 M, i64 N, i64 K, int threads) {
  float *af = malloc((size_t)(M * K > 0 ? M * K : 1) * sizeof(float));
  float *bf = malloc((size_t)(K * N > 0 ? K * N : 1) * sizeof(float));
  float *cf = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof(float));
  int status = -1;
  if (af != NULL && bf != NULL && cf != NULL) {
    for (i64 i = 0; i < M; i++)
      for (i64 p = 0; p < K; p++) af[i * K + p] = bf16_to_f32(a[i * rsa + p * csa]);
    for (i64 p = 0; p < K; p++)
      for (i64 j = 0; j < N; j++) bf[p * N + j] = bf16_to_f32(b[p * rsb + j * csb]);
    status = gemm_08_avx512(cf, N, af, K, 1, bf, N, 1, M, N, K, 1.0f, 0.0f, threads);
    for (i64 i = 0; i < M && status == 0; i++)
      for (i64 j = 0; j < N; j++) c[i * ldc + j] = f32_to_bf16(cf[i * N + j]);
  }
  free(af);
  free(bf);
  free(cf);
  return status;
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BW__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TILE_ROWS 16        /* rows of a tile */
#define TILE_K 32           /* bfloat16 columns of an A tile: 64 bytes */
#define TILE_ELEMS 512      /* bfloat16 elements in one 16 x 64-byte tile */
#define NC 256              /* columns of B packed at a time: K x 256 bfloat16 stays in the L2 for K <= 2048 */
#define KC_TILES 8          /* K tiles summed before the next B sliver pair: A's 32 x 256 block stays in the L1 */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Linux gives a process the 8 KiB of tile state only when asked (once per process; every thread then has it). */
static int amx_permitted(void) {
  static int state = -1;  /* -1: not asked yet; a race only asks twice */
  if (state < 0) state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  return state;
}

/* The tile configuration ldtilecfg reads: palette 1, and every tile 16 rows of 64 bytes. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

static void configure_tiles(void) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = TILE_ROWS;
  }
  _tile_loadconfig(&cfg);
}

/* ap <- A's 16-row sliver s (rows 16s ..) as kb_count tiles of 16 rows x 32 columns, zero past M and K, written
   tile by tile (one stream of stores). A tile row of row-major A is one 64-byte load (masked at the end of K);
   any other layout is read element by element. */
static void pack_a_sliver(i64 s, i64 M, i64 K, i64 kb_count, const uint16_t *a, i64 rsa, i64 csa,
                          uint16_t *restrict ap) {
  for (i64 kb = 0; kb < kb_count; kb++)
    for (i64 r = 0; r < TILE_ROWS; r++) {
      const i64 i = s * TILE_ROWS + r, p0 = kb * TILE_K, live = i < M ? bf16_min(TILE_K, K - p0) : 0;
      uint16_t *row = ap + kb * TILE_ELEMS + r * TILE_K;
      if (csa == 1) {
        const __mmask32 mask = live >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << live) - 1);
        _mm512_store_si512(row, _mm512_maskz_loadu_epi16(mask, a + i * rsa + p0));
      } else {
        for (i64 q = 0; q < TILE_K; q++) row[q] = q < live ? a[i * rsa + (p0 + q) * csa] : 0;
      }
    }
}

/* Where packed B keeps the tile of K tile kb and 16-column sliver s (in tiles from bp): in the order the kernels
   read them, K blocks of KC_TILES tiles, then sliver pairs, then K tiles, then the pair's two slivers, so that
   every row of A walks the panel front to back (the prefetchers follow one stream). */
static i64 b_tile(i64 kb, i64 s, i64 pairs, i64 kb_count) {
  const i64 block = kb / KC_TILES, in_block = kb % KC_TILES, len = bf16_min(KC_TILES, kb_count - block * KC_TILES);
  return block * KC_TILES * pairs * 2 + ((s / 2) * len + in_block) * 2 + s % 2;
}

/* bp <- B[32 kb_lo : 32 kb_hi, j0 : j0 + 16 * slivers] in tiles of 16 columns (b_tile's order), VNNI order inside:
   row r of the tile holds, for each of its 16 columns j, B[32kb + 2r, j] then B[32kb + 2r + 1, j]; zero past N
   and K. Row-major B is read two rows at a time, left to right (16 columns of each, masked at the end of N,
   interleaved by one permute); walking down one sliver instead would touch a new page every row or two. */
static void pack_b(i64 kb_lo, i64 kb_hi, i64 j0, i64 slivers, i64 N, i64 K, i64 kb_count, const uint16_t *b,
                   i64 rsb, i64 csb, uint16_t *restrict bp) {
  uint16_t order[32];  /* lane 2q takes lane q of the first row, lane 2q + 1 lane q of the second (lane 16 + q) */
  for (int q = 0; q < 16; q++) {
    order[2 * q] = (uint16_t)q;
    order[2 * q + 1] = (uint16_t)(16 + q);
  }
  const __m512i interleave = _mm512_loadu_si512(order);
  for (i64 kb = kb_lo; kb < kb_hi; kb++)
    for (i64 r = 0; r < TILE_ROWS; r++) {
      const i64 p = kb * TILE_K + 2 * r;
      for (i64 s = 0; s < slivers; s++) {
        uint16_t *row = bp + b_tile(kb, s, slivers / 2, kb_count) * TILE_ELEMS + r * 32;
        const i64 j = j0 + 16 * s, live = N - j < 0 ? 0 : bf16_min(16, N - j);
        if (csb == 1) {
          const __mmask16 mask = live >= 16 ? 0xFFFF : (__mmask16)((1u << live) - 1);
          const __m256i even = p < K ? _mm256_maskz_loadu_epi16(mask, b + p * rsb + j) : _mm256_setzero_si256();
          const __m256i odd = p + 1 < K ? _mm256_maskz_loadu_epi16(mask, b + (p + 1) * rsb + j)
                                        : _mm256_setzero_si256();
          const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
          _mm512_store_si512(row, _mm512_permutexvar_epi16(interleave, both));
        } else {
          for (i64 q = 0; q < 16; q++)
            for (i64 h = 0; h < 2; h++)
              row[2 * q + h] = p + h < K && q < live ? b[(p + h) * rsb + (j + q) * csb] : 0;
        }
      }
    }
}

/* 16 float32 sums rounded to bfloat16 (nearest even; a NaN becomes the quiet NaN): half.h's f32_to_bf16 on
   16 lanes. */
static __m256i round_to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x), mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(mag, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(mag, _mm512_set1_epi32(0x7fff)), odd), 16);
  r = _mm512_or_si512(r, _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}

/* Where the A tiles of one 16-row sliver are: tile kb at base + kb * step, its rows stride bytes apart (packed
   tiles, or row-major A itself). */
typedef struct {
  const uint16_t *base;
  i64 step, stride;
} Operand;

/* acc (a 32 x 32 float32 block) += A slivers (a0, a1) @ a sliver pair of B over K tiles [kb0, kb1), the pair's
   tiles at bp in b_tile's order: the four sums live in tile registers meanwhile (acc is not read when first).
   With c given, the block is then rounded into C[0:mr, 0:nr]. */
static void kernel(i64 kb0, i64 kb1, int first, const Operand *a0, const Operand *a1, const uint16_t *bp,
                   float *acc, uint16_t *c, i64 ldc, i64 mr, i64 nr) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(0, acc, 128);
    _tile_loadd(1, acc + 16, 128);
    _tile_loadd(2, acc + 16 * 32, 128);
    _tile_loadd(3, acc + 16 * 32 + 16, 128);
  }
  for (i64 kb = kb0; kb < kb1; kb++) {
    _tile_loadd(4, a0->base + kb * a0->step, a0->stride);
    _tile_loadd(5, a1->base + kb * a1->step, a1->stride);
    _tile_loadd(6, bp + (kb - kb0) * 2 * TILE_ELEMS, 64);
    _tile_loadd(7, bp + ((kb - kb0) * 2 + 1) * TILE_ELEMS, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  _tile_stored(2, acc + 16 * 32, 128);
  _tile_stored(3, acc + 16 * 32 + 16, 128);
  if (c == NULL) return;
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
  for (i64 r = 0; r < mr; r++) {
    _mm256_mask_storeu_epi16(c + r * ldc, m0, round_to_bf16(_mm512_load_ps(acc + r * 32)));
    _mm256_mask_storeu_epi16(c + r * ldc + 16, m1, round_to_bf16(_mm512_load_ps(acc + r * 32 + 16)));
  }
}

/* Sliver s of A: read in place when A is row-major, covers whole tiles there (K a multiple of 32, all 16 rows
   inside M) and its rows start on cache lines (a tile row straddling two lines loads at about 70% of the
   speed), else from its packed copy in ap (packed here when pack is set). */
static Operand a_sliver(i64 s, int pack, i64 M, i64 K, i64 kb_count, const uint16_t *a, i64 rsa, i64 csa,
                        uint16_t *ap) {
  const int aligned = (uintptr_t)a % 64 == 0 && rsa % TILE_K == 0;
  if (csa == 1 && aligned && K % TILE_K == 0 && (s + 1) * TILE_ROWS <= M)
    return (Operand){a + s * TILE_ROWS * rsa, TILE_K, rsa * (i64)sizeof(uint16_t)};
  uint16_t *mine = ap + s * kb_count * TILE_ELEMS;
  if (pack) pack_a_sliver(s, M, K, kb_count, a, rsa, csa, mine);
  return (Operand){mine, TILE_ELEMS, 64};
}

static int on_tiles(uint16_t *c, i64 ldc, const uint16_t *a, i64 rsa, i64 csa, const uint16_t *b, i64 rsb,
                    i64 csb, i64 M, i64 N, i64 K, int threads) {
  const int nt = threads > 1 ? threads : 1;
  const i64 kb_count = (K + TILE_K - 1) / TILE_K, a_slivers = (M + 31) / 32 * 2, pairs = a_slivers / 2;
  const size_t sliver_bytes = (size_t)kb_count * TILE_ELEMS * sizeof(uint16_t);
  uint16_t *ap = aligned_alloc(64, (size_t)a_slivers * sliver_bytes);
  uint16_t *bp = aligned_alloc(64, (size_t)(NC / 16) * sliver_bytes);
  float *acc = aligned_alloc(64, (size_t)nt * 32 * NC * sizeof(float));
  if (ap == NULL || bp == NULL || acc == NULL) {
    free(ap);
    free(bp);
    free(acc);
    return -1;
  }
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    configure_tiles();
    const int me = gemm_thread_id();
    float *my_acc = acc + (size_t)me * 32 * NC;
#pragma omp for schedule(static)
    for (i64 s = 0; s < a_slivers; s++) a_sliver(s, 1, M, K, kb_count, a, rsa, csa, ap);
    for (i64 jc = 0; jc < N; jc += NC) {
      const i64 nc = bf16_min(NC, N - jc), b_slivers = (nc + 31) / 32 * 2;
#pragma omp barrier
      pack_b(me * kb_count / nt, (me + 1) * kb_count / nt, jc, b_slivers, N, K, kb_count, b, rsb, csb, bp);
#pragma omp barrier
#pragma omp for schedule(static)
      for (i64 pair = 0; pair < pairs; pair++) {
        const Operand a0 = a_sliver(2 * pair, 0, M, K, kb_count, a, rsa, csa, ap);
        const Operand a1 = a_sliver(2 * pair + 1, 0, M, K, kb_count, a, rsa, csa, ap);
        for (i64 kb0 = 0; kb0 < kb_count; kb0 += KC_TILES) {
          const i64 kb1 = bf16_min(kb0 + KC_TILES, kb_count);
          for (i64 s = 0; s < b_slivers; s += 2) {
            const uint16_t *pair_tiles = bp + b_tile(kb0, s, b_slivers / 2, kb_count) * TILE_ELEMS;
            uint16_t *out = kb1 == kb_count ? c + 32 * pair * ldc + jc + 16 * s : NULL;
            kernel(kb0, kb1, kb0 == 0, &a0, &a1, pair_tiles, my_acc + 16 * s * 32, out, ldc, bf16_min(32, M - 32 * pair),
                   bf16_min(32, nc - 16 * s));
          }
        }
      }
    }
    _tile_release();
  }
  free(ap);
  free(bp);
  free(acc);
  return 0;
}

int gemm_bf16_uses_amx(void) {
  return amx_permitted();
}
#else
int gemm_bf16_uses_amx(void) {
  return 0;
}

static int on_tiles(uint16_t *c, i64 ldc, const uint16_t *a, i64 rsa, i64 csa, const uint16_t *b, i64 rsb,
                    i64 csb, i64 M, i64 N, i64 K, int threads) {
  return widened(c, ldc, a, rsa, csa, b, rsb, csb, M, N, K, threads);
}
#endif

/* C (M, N), row stride ldc, bfloat16 bits = A (M, K) @ B (K, N), any strides; 0, or -1 when out of memory. */
int gemm_bf16(uint16_t *c, i64 ldc, const uint16_t *a, i64 rsa, i64 csa, const uint16_t *b, i64 rsb, i64 csb,
              i64 M, i64 N, i64 K, int threads) {
  if (M == 0 || N == 0) return 0;
  if (K == 0) {
    for (i64 i = 0; i < M; i++) memset(c + i * ldc, 0, (size_t)N * sizeof(uint16_t));
    return 0;
  }
  if (gemm_bf16_uses_amx()) return on_tiles(c, ldc, a, rsa, csa, b, rsb, csb, M, N, K, threads);
  return widened(c, ldc, a, rsa, csa, b, rsb, csb, M, N, K, threads);
}

/* count products out[z] (M, N) = A_z @ B_z (gemm_batched's contract, bfloat16). */
int gemm_bf16_batched(i64 count, uint16_t *out, const uint16_t *a, const i64 *a_off, i64 rsa, i64 csa,
                      const uint16_t *b, const i64 *b_off, i64 rsb, i64 csb, i64 M, i64 N, i64 K,
                      int outer_threads, int inner_threads) {
  int failed = 0;
#pragma omp parallel for num_threads(outer_threads) if (outer_threads > 1) schedule(static) reduction(|:failed)
  for (i64 z = 0; z < count; z++)
    failed |= gemm_bf16(out + z * M * N, N, a + a_off[z], rsa, csa, b + b_off[z], rsb, csb, M, N, K,
                        inner_threads) != 0;
  return failed ? -1 : 0;
}
