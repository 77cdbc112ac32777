// Internal to losses/: the matrix products of the simple RNN-T loss (rnnt_logprobs_cpu.cpp), written
// for its sizes: per item [S+1] x [C] x [T] with S + 1 ~ 50 and C, T in the hundreds, one item per
// thread. A BLAS copies both operands into its own layout first and cannot fold the elementwise
// factor that follows each gradient product into its output; these read the operands in place,
// register-blocked, and multiply the factor in as each output tile is stored. At these sizes
// OpenBLAS's sgemm ran at half to two thirds of their rate (docs/losses.md).
// float and double, each compiled for AVX-512, AVX2 + FMA and the baseline ISA (vector_math.h).
#pragma once
#include <cstdint>

namespace wavetrain::losses::detail {

// out[i][j] = sum_k a[i][k] * b[j][k] for i < M, j < N, k < K: a times b transposed, both with
// their rows contiguous along k. Row strides lda, ldb, ldo (in elements).
void matmul_nt(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* out,
               int64_t ldo);
void matmul_nt(int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b, int64_t ldb, double* out,
               int64_t ldo);

// out[i][j] = (sum_k a[i * a_row + k * a_col] * b[k][j]) * factor[i][j], i < M, j < N, k < K: a
// read through strides (so a or its transpose), b with its rows contiguous along j. factor is
// optional (nullptr: no factor); its row stride is ldf. out must not overlap a, b or factor.
void matmul_times(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_row, int64_t a_col, const float* b,
                  int64_t ldb, const float* factor, int64_t ldf, float* out, int64_t ldo);
void matmul_times(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_row, int64_t a_col, const double* b,
                  int64_t ldb, const double* factor, int64_t ldf, double* out, int64_t ldo);

}  // namespace wavetrain::losses::detail
