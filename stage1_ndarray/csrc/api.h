/* The C kernels' interface: the only declarations Python sees (cffi reads this file as its cdef).
   Conventions (llm.c style): outputs first, then inputs, then sizes. Shapes and strides are in
   elements, not bytes; every pointer already points at the tensor's first element (offset applied).
   An output is always a fresh contiguous buffer unless the kernel takes its strides.
   Python validates everything before calling: kernels never check, print or exit.
   Kernels that dispatch on (op, dtype) return 0, or -1 for a combination Python should never send;
   Python checks every status (device.py's check). */

enum dtype_code { DT_BOOL, DT_INT32, DT_INT64, DT_FLOAT32, DT_FLOAT64, DT_INT8, DT_INT16, DT_UINT8, DT_UINT16,
                  DT_UINT32, DT_UINT64, DT_FLOAT16, DT_BFLOAT16 };

/* The op codes (OP_NEG, OP_ADD, OP_REDUCE_MAX, ...) are `enum op`, which ckernels.py generates
   from ops.py, the one op table, into ops.h and into this interface. */

/* elementwise.c: out (contiguous, shape) = op(a[, b]) over an N-d strided walk.
   Comparisons write bool (uint8); every other op writes the input dtype. OP_GELU takes floats
   only (gelu.h). */
int unary(int op, int dtype, void *out, const void *a,
          int ndim, const int64_t *shape, const int64_t *sa);
int binary(int op, int dtype, void *out, const void *a, const void *b,
           int ndim, const int64_t *shape, const int64_t *sa, const int64_t *sb);
int where(int itemsize, void *out, const uint8_t *cond, const void *a, const void *b,
          int ndim, const int64_t *shape, const int64_t *sc, const int64_t *sa, const int64_t *sb);
int cast(int to, int from, void *out, const void *a,
         int ndim, const int64_t *shape, const int64_t *sa);

/* reduce.c: the input is viewed as (O, R, I) with strides (so, sr, si); the output is (O, I).
   cumsum's output is (O, R, I), contiguous. */
int reduce(int op, int dtype, void *out, const void *a,
           int64_t O, int64_t R, int64_t I, int64_t so, int64_t sr, int64_t si);
int arg_reduce(int op, int dtype, int64_t *out, const void *a,
               int64_t O, int64_t R, int64_t I, int64_t so, int64_t sr, int64_t si);
int cumsum(int dtype, void *out, const void *a,
           int64_t O, int64_t R, int64_t I, int64_t so, int64_t sr, int64_t si);

/* copy.c: byte-level kernels that only care about the element size (1, 2, 4 or 8). */
int copy_strided(int itemsize, void *out, const int64_t *so, const void *a, const int64_t *sa,
                 int ndim, const int64_t *shape);
int gather(int itemsize, void *out, const void *a, const int64_t *offsets, int64_t nb,
           int ndim, const int64_t *shape, const int64_t *sa);
int fill(int itemsize, void *out, int64_t n, uint64_t pattern);
void iota(int64_t *out, int64_t n);

/* random.c: counter-based uniform [0, 1): element i of a draw is a hash of (seed, counter + i). */
int rand_uniform(int dtype, void *out, int64_t n, uint64_t seed, uint64_t counter);

/* gemm.c: out (batch, M, N) = a (batch, M, K) @ b (batch, K, N), all contiguous row-major. */
int matmul(int dtype, void *out, const void *a, const void *b,
           int64_t batch, int64_t M, int64_t N, int64_t K);

/* gemm_NN_idea.c: the float32 GEMM ladder, C = alpha * A @ B + beta * C with strided A and B,
   one rung per file and one signature for all (GEMM_PARAMS in gemm_ladder.h); ckernels.py
   declares each rung from its file name. gemm_ladder.c says what the build holds and runs a
   rung over a batch. */
int gemm_has_openmp(void);
int gemm_has_avx2_fma(void);
int gemm_has_avx512(void);
typedef int (*gemm_rung)(float *c, int64_t ldc, const float *a, int64_t rsa, int64_t csa, const float *b,
                         int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                         int threads);
/* out (count, M, N) contiguous; product z reads A at a + a_off[z], B at b + b_off[z] (gemm_ladder.c). */
int gemm_batched(gemm_rung rung, int64_t count, float *out, const float *a, const int64_t *a_off, int64_t rsa,
                 int64_t csa, const float *b, const int64_t *b_off, int64_t rsb, int64_t csb, int64_t M, int64_t N,
                 int64_t K, int outer_threads, int inner_threads);

/* gemm_bf16.c: the bfloat16 rung, C (bfloat16 bits) = A @ B with float32 sums, strided A and B (AMX tiles
   where the build and Linux allow, else the float32 ladder on widened copies), and its batched driver. */
int gemm_bf16_uses_amx(void);
int gemm_bf16(uint16_t *c, int64_t ldc, const uint16_t *a, int64_t rsa, int64_t csa, const uint16_t *b,
              int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, int threads);
int gemm_bf16_batched(int64_t count, uint16_t *out, const uint16_t *a, const int64_t *a_off, int64_t rsa,
                      int64_t csa, const uint16_t *b, const int64_t *b_off, int64_t rsb, int64_t csb, int64_t M,
                      int64_t N, int64_t K, int outer_threads, int inner_threads);

/* solve.c: solves a (n, n) @ x = b (n, nrhs) in place (a is destroyed, b becomes x).
   Returns 1 when a is singular. */
int solve(int dtype, void *a, void *b, int64_t n, int64_t nrhs);

/* threads.c: the thread count of the OpenMP loops (the elementwise libm loops); the GEMM rungs take
   theirs as an argument. Both come from the one setting in threads.py. */
void set_num_threads(int n);

/* memory.c: keep freed blocks in the process (glibc's mallopt); buffer.py calls it once. */
void keep_freed_memory(void);
