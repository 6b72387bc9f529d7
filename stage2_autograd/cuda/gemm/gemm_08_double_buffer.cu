/* gemm_08_double_buffer: load the next tile with cp.async while computing on this one.

   idea:     several shared-memory buffers per operand (a pipeline of STAGES tiles). cp.async
             copies global memory straight into shared memory without passing through registers
             and without stalling the thread, so the copies of the next tiles are in flight while
             the FMAs of this one run; one __syncthreads per tile keeps a buffer from being
             refilled while it is read. cp.async cannot transpose, so A's tile stays row-major
             (padded by 4 floats a row, which keeps each row 16-byte aligned) and a thread reads
             4 k-values of A at once as a float4, keeping 07's 5 shared loads per 64 FMAs. Warp
             layout as in 07. Two stages are the classic double buffer; a sweep on an H100
             (benchmarks/gemm_sweep.py, 2026-11-27) put three stages of BK = 32 first: 78% of
             cuBLAS at n=4096 against 75% for two of BK = 16, and no warp or thread tile shape
             beat 64 x 32 and 4 x 4.
   fixes:    in 07 every tile load is a global -> register -> shared round trip that the warp waits
             for, then a barrier; with only a few warps per SM the load latency is exposed.
   launch:   threads=256 bm=128 bn=128 smem=104448 arch=sm_80 precision=fp32
   measured: 40,440 GFLOP/s at n=4096 on NVIDIA H100 80GB HBM3, 78% of cuBLAS fp32 (2026-11-27)

   Edges and alignment: a 16-byte cp.async is issued only for 16-byte aligned, in-range groups of
   four floats; otherwise four 4-byte copies with src-size 0 outside the matrix, which cp.async
   fills with zeros. Both paths use the same pipeline.

   Signature (every rung): C (M, N) fp32 = alpha * A (M, K) @ B (K, N) + beta * C, all row-major;
   C is not read when beta == 0. Sizes are ints: the host keeps M*K, K*N and M*N below 2^31. */

/* The tile shape and pipeline depth. Each is a macro a sweep can override (-DBK=16); the defaults
   give the launch line's smem: STAGES * (BM * (BK + APAD) + BK * BN) * 4 bytes. Eight warps tile the block's BM x BN as (BM / WM) x (BN / WN); inside a warp the
   32 lanes sit 4 x 8, each owning WMITER x WNITER sub-tiles of TM x 4 outputs, the sub-tiles WSUBM rows
   and 32 columns apart (so a quarter-warp's float4 reads of B cover 32 consecutive floats). */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef TM
#define TM 4
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2  /* blocks per SM the registers must leave room for: 2 caps a thread at 128 */
#endif
#define APAD 4
#define THREADS 256
#define WSUBM (4 * TM)
#define WMITER (WM / WSUBM)
#define WNITER (WN / 32)
#define A_STAGE (BM * (BK + APAD))  /* floats of one stage of A in shared memory */
#define B_STAGE (BK * BN)

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  unsigned a;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(PENDING)); }

/* Four floats of row-major p (rows, cols) from (r, c) into dst, zeros outside the matrix. */
__device__ __forceinline__ void copy4(float *dst, const float *p, int r, int c, int rows, int cols, bool vec) {
  if (vec && r < rows && c + 3 < cols) {
    cp_async16(dst, p + r * cols + c, 16);
    return;
  }
  for (int j = 0; j < 4; j++) {
    const bool in = r < rows && c + j < cols;
    cp_async4(dst + j, in ? p + r * cols + c + j : p, in ? 4 : 0);
  }
}

__device__ __forceinline__ bool aligned16(const void *p, int cols) {
  return cols % 4 == 0 && ((unsigned long long)p & 15) == 0;
}

__device__ __forceinline__ void store4(float *C, int row, int col, int M, int N, const float *acc,
                                       float alpha, float beta, bool vec) {
  if (row >= M) return;
  float *c = C + row * N + col;
  if (vec && col + 3 < N) {
    float4 v = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
    if (beta != 0.0f) {
      const float4 old = *reinterpret_cast<const float4 *>(c);
      v.x += beta * old.x, v.y += beta * old.y, v.z += beta * old.z, v.w += beta * old.w;
    }
    *reinterpret_cast<float4 *>(c) = v;
    return;
  }
  #pragma unroll
  for (int j = 0; j < 4; j++)
    if (col + j < N) c[j] = beta == 0.0f ? alpha * acc[j] : alpha * acc[j] + beta * c[j];
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_08_double_buffer(float *C, const float *A, const float *B,
                      int M, int N, int K, float alpha, float beta) {
  A += blockIdx.z * (size_t)M * K, B += blockIdx.z * (size_t)K * N, C += blockIdx.z * (size_t)M * N;  // matrix z of a batch
  extern __shared__ unsigned char smem_raw[];  // dynamic, 16-byte aligned: STAGES tiles of A, then of B
  float *smem = reinterpret_cast<float *>(smem_raw);
  float (*As)[BM][BK + APAD] = reinterpret_cast<float (*)[BM][BK + APAD]>(smem);
  float (*Bs)[BK][BN] = reinterpret_cast<float (*)[BK][BN]>(smem + STAGES * A_STAGE);
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool vecA = aligned16(A, K), vecB = aligned16(B, N), vecC = aligned16(C, N);
  const int wrow = (warp / (BN / WN)) * WM, wcol = (warp % (BN / WN)) * WN;
  const int lrow = (lane / 8) * TM, lcol = (lane % 8) * 4;
  const int tiles = (K + BK - 1) / BK;

  auto load_tile = [&](int kt) {  // tile kt into stage kt % STAGES, as one commit group (empty past the end)
    if (kt < tiles) {
      const int buf = kt % STAGES, k0 = kt * BK;
#pragma unroll
      for (int idx = t; idx < BM * BK / 4; idx += THREADS) {
        const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
        copy4(&As[buf][r][c], A, row0 + r, k0 + c, M, K, vecA);
      }
#pragma unroll
      for (int idx = t; idx < BK * BN / 4; idx += THREADS) {
        const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        copy4(&Bs[buf][r][c], B, k0 + r, col0 + c, K, N, vecB);
      }
    }
    cp_async_commit();
  };

  float acc[WMITER][WNITER][TM][4] = {{{{0.0f}}}};
  float regA[TM][4], regB[WNITER][4][4];
  for (int s = 0; s < STAGES - 1; s++) load_tile(s);
  for (int kt = 0; kt < tiles; kt++) {
    cp_async_wait<STAGES - 2>();  // all but the newest STAGES - 2 groups landed: tile kt is in
    __syncthreads();              // ... for every thread's copies, and everyone is done reading tile kt - 1
    load_tile(kt + STAGES - 1);   // into the stage tile kt - 1 used, overlapping the FMAs below
    const int buf = kt % STAGES;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 4) {
#pragma unroll
      for (int jt = 0; jt < WNITER; jt++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          *reinterpret_cast<float4 *>(regB[jt][k]) =
              *reinterpret_cast<const float4 *>(&Bs[buf][kk + k][wcol + jt * 32 + lcol]);
#pragma unroll
      for (int it = 0; it < WMITER; it++) {
#pragma unroll
        for (int i = 0; i < TM; i++)
          *reinterpret_cast<float4 *>(regA[i]) =
              *reinterpret_cast<const float4 *>(&As[buf][wrow + it * WSUBM + lrow + i][kk]);
#pragma unroll
        for (int jt = 0; jt < WNITER; jt++)
#pragma unroll
          for (int k = 0; k < 4; k++)
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
              for (int j = 0; j < 4; j++) acc[it][jt][i][j] += regA[i][k] * regB[jt][k][j];
      }
    }
  }
#pragma unroll
  for (int it = 0; it < WMITER; it++)
#pragma unroll
    for (int jt = 0; jt < WNITER; jt++)
#pragma unroll
      for (int i = 0; i < TM; i++)
        store4(C, row0 + wrow + it * WSUBM + lrow + i, col0 + wcol + jt * 32 + lcol, M, N, acc[it][jt][i], alpha,
               beta, vecC);
}
