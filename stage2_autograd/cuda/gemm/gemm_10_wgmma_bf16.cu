/* gemm_10_wgmma_bf16: Hopper's warpgroup MMA (wgmma) reading both operands from shared memory.

   idea:     on sm_90 one wgmma.mma_async instruction lets a warpgroup (4 warps, 128 threads)
             multiply a 64x16 tile of A by a 16x128 tile of B into a 64x128 FP32 accumulator, with
             A and B read by the tensor cores straight from shared memory through 64-bit matrix
             descriptors: no ldmatrix, no fragments in registers, and the instruction runs
             asynchronously while the warps go on. A block of 2 warpgroups owns a 128x128 tile of C;
             BK = 64, a three-stage cp.async pipeline (3 x 32 KiB of dynamic shared memory).
             Shared tiles use the 128-byte swizzle wgmma understands: rows of 128 bytes in atoms of
             8 rows, the 16-byte chunk c of row r stored at chunk c ^ (r % 8), so neither the copies
             in nor the tensor cores' reads hit the same bank twice. A is K-major (rows of k);
             B stays N-major as it is in memory (rows of n, the transpose flag set), split into two
             64-column halves.
   fixes:    09's mma.sync is a warp-wide synchronous instruction fed through registers by
             ldmatrix; on an H100 it reaches well under half of the tensor cores' peak.
   launch:   threads=256 bm=128 bn=128 smem=99328 arch=sm_90a precision=bf16
   measured: 343,299 GFLOP/s at n=4096 on NVIDIA H100 80GB HBM3, 52% of cuBLAS bf16 (2026-11-27)

   Not yet here (the next rungs): TMA tensor copies with an mbarrier instead of cp.async,
   warp specialisation (a producer warp feeding consumer warpgroups), clusters with multicast.

   Inputs: A and B hold bfloat16 bit patterns (unsigned short). Edges and alignment as in 09:
   16-byte cp.async for aligned, in-range groups of 8, element-wise stores with zeros otherwise.

   Signature (every rung): C (M, N) fp32 = alpha * A (M, K) @ B (K, N) + beta * C, all row-major;
   C is not read when beta == 0. Sizes are ints: the host keeps M*K, K*N and M*N below 2^31. */

#define BM 128
#define BN 128
#define BK 64
#define STAGES 3
#define THREADS 256
#define TILE_BYTES (BM * BK * 2)             /* 16 KiB for A, the same for B */
#define STAGE_BYTES (2 * TILE_BYTES)

typedef unsigned short bf16;

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  unsigned a;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(PENDING)); }

/* Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile whose rows are 128 bytes. */
__device__ __forceinline__ unsigned swizzle128(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

/* Eight bf16 of row-major p (rows, cols) from (r, c) to shared address dst (generic twin dst_ptr). */
__device__ __forceinline__ void copy8(unsigned dst, bf16 *dst_ptr, const bf16 *p, int r, int c, int rows,
                                      int cols, bool vec) {
  if (vec && r < rows && c + 7 < cols) {
    cp_async16(dst, p + r * cols + c);
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; j++) dst_ptr[j] = (r < rows && c + j < cols) ? p[r * cols + c + j] : (bf16)0;
}

/* A wgmma shared-memory descriptor: start address, leading and stride byte offsets (all >> 4),
   and the 128-byte swizzle mode (1 in bits 62-63). */
__device__ __forceinline__ unsigned long long descriptor(unsigned addr, unsigned lead, unsigned stride) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lead >> 4) << 16) |
         ((unsigned long long)(stride >> 4) << 32) | (1ull << 62);
}

/* d (64x128 fp32 per warpgroup) += A (64x16, K-major) @ B (16x128, N-major: trans-b = 1). */
__device__ __forceinline__ void wgmma_m64n128k16(float *d, unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
      "  {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
      "   %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,\n"
      "   %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,\n"
      "   %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},\n"
      "  %64, %65, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_10_wgmma_bf16(float *C, const bf16 *A, const bf16 *B,
                   int M, int N, int K, float alpha, float beta) {
  A += blockIdx.z * (size_t)M * K, B += blockIdx.z * (size_t)K * N, C += blockIdx.z * (size_t)M * N;  // matrix z of a batch
  extern __shared__ unsigned char smem_raw[];
  // Swizzle atoms must start on 1024-byte boundaries; the launch asks for 1 KiB of slack.
  const unsigned raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u;
  unsigned char *smem = smem_raw + (base - raw);
  const int t = threadIdx.x, wg = t / 128, warp = (t / 32) % 4, lane = t % 32;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool vecA = K % 8 == 0 && ((unsigned long long)A & 15) == 0;
  const bool vecB = N % 8 == 0 && ((unsigned long long)B & 15) == 0;
  const bool vecC = N % 2 == 0 && ((unsigned long long)C & 7) == 0;
  const int tiles = (K + BK - 1) / BK;

  // A tile: 128 rows of 64 k (8 chunks). B tile: two halves of 64 n, each 64 rows of k (8 chunks).
  auto load_tile = [&](int stage, int k0) {
    const unsigned a_off = stage * STAGE_BYTES, b_off = a_off + TILE_BYTES;
    for (int idx = t; idx < BM * BK / 8; idx += THREADS) {
      const int r = idx / 8, c = idx % 8;
      const unsigned off = a_off + swizzle128(r, c);
      copy8(base + off, (bf16 *)(smem + off), A, row0 + r, k0 + c * 8, M, K, vecA);
    }
    for (int idx = t; idx < BK * BN / 8; idx += THREADS) {
      const int r = idx / (BN / 8), c = idx % (BN / 8), half = c / 8;
      const unsigned off = b_off + half * TILE_BYTES / 2 + swizzle128(r, c % 8);
      copy8(base + off, (bf16 *)(smem + off), B, k0 + r, col0 + c * 8, K, N, vecB);
    }
  };

  float d[64];
#pragma unroll
  for (int i = 0; i < 64; i++) d[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tiles) load_tile(s, s * BK);
    cp_async_commit();  // one group per stage, empty or not, so the wait count below stays exact
  }
  for (int kt = 0; kt < tiles; kt++) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt have landed
    asm volatile("fence.proxy.async.shared::cta;");  // ... and are visible to the tensor cores' proxy
    __syncthreads();                                  // everyone's are; and stage (kt - 1) is free
    if (kt + STAGES - 1 < tiles) load_tile((kt + STAGES - 1) % STAGES, (kt + STAGES - 1) * BK);
    cp_async_commit();
    const unsigned a_tile = base + (kt % STAGES) * STAGE_BYTES + wg * (64 * 128);  // this warpgroup's 64 rows
    const unsigned b_tile = base + (kt % STAGES) * STAGE_BYTES + TILE_BYTES;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      // A: k16 is 32 bytes further along each swizzled row; 8-row atoms are 1024 bytes apart.
      // B: k16 is 16 rows (2 atoms) further; the two 64-column halves are TILE_BYTES / 2 apart.
      wgmma_m64n128k16(d, descriptor(a_tile + kk * 32, 16, 1024),
                       descriptor(b_tile + kk * 2048, TILE_BYTES / 2, 1024));
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  // Accumulator layout: warp w of the warpgroup holds rows 16w .. 16w + 15; for each 8-column
  // chunk j, lane (g = lane / 4, q = lane % 4) holds d[4j], d[4j + 1] at row g, columns 8j + 2q, +1
  // and d[4j + 2], d[4j + 3] at row g + 8.
  const int g = lane / 4, q = lane % 4;
  const int row = row0 + wg * 64 + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int col = col0 + j * 8 + 2 * q;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = row + 8 * h;
      if (r >= M) continue;
      float *c = C + r * N + col;
      const float x = alpha * d[4 * j + 2 * h], y = alpha * d[4 * j + 2 * h + 1];
      if (vecC && col + 1 < N) {
        float2 v = make_float2(x, y);
        if (beta != 0.0f) {
          const float2 old = *reinterpret_cast<const float2 *>(c);
          v.x += beta * old.x, v.y += beta * old.y;
        }
        *reinterpret_cast<float2 *>(c) = v;
      } else {
        if (col < N) c[0] = beta == 0.0f ? x : x + beta * c[0];
        if (col + 1 < N) c[1] = beta == 0.0f ? y : y + beta * c[1];
      }
    }
  }
}
