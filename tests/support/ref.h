/* ref.h - naive reference implementations that tests and GPU check tools compare kernels with.
 *
 * Design choices:
 *  - Written to be obviously correct, not fast: plain loops that follow the mathematical
 *    definition, with every sum accumulated in double and the result rounded to float once.
 *  - Arrays are float and row-major. Inputs are assumed to be already rounded to the kernel's
 *    data type by the caller (see fp16.h), so the references model exact arithmetic on the
 *    values the kernel actually sees; rounding the outputs is also left to the caller.
 *  - Optional operands are NULL pointers. Functions that can be handed inconsistent shapes
 *    return 0 on success and -1 without writing anything when the arguments are invalid, so
 *    a bug in a test fails loudly instead of reading out of bounds.
 *  - ref_compare measures an output against a reference with the usual atol + rtol * |want|
 *    rule and reports enough (worst index, NaN count, relative L2 error) to explain a failure.
 */
#ifndef TL_TEST_REF_H
#define TL_TEST_REF_H

#include <stdbool.h>
#include <stddef.h>

/* ---- activations ---------------------------------------------------------------------- */

enum ref_act { REF_ACT_NONE, REF_ACT_RELU, REF_ACT_GELU_TANH, REF_ACT_SILU, REF_ACT_SIGMOID };

/* Applies an activation in double precision: relu max(x, 0); gelu with the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); silu x sigmoid(x); sigmoid 1 / (1 + e^-x). */
float ref_act_apply(enum ref_act act, float x);

/* ---- GEMM with epilogue --------------------------------------------------------------- */

/* For each batch index p and every element:
 *   C[m][n] = act(alpha * sum_k A[m][k] * B[k][n] + beta * Cin[m][n] + bias[n]) + residual[m][n]
 * where the beta, bias and residual terms are dropped when their pointer is NULL.
 * Leading dimensions are row strides in elements; 0 means the contiguous default (k for A,
 * n for B, or k when b_trans, n for c, c_in and residual). With b_trans, b holds B transposed,
 * an n x k matrix, so B[k][n] is b[n * ldb + k]. Batch strides are in elements and used
 * literally: a stride of 0 broadcasts that operand over the batch (bias is usually shared, so
 * stride_bias is normally 0). batch 0 is treated as 1.
 * alpha is used as given, so a zero-initialised struct multiplies by 0: set alpha = 1.
 * c may be the same array as c_in or residual if their leading dimensions are equal (each
 * element is read before it is written); it must not overlap a or b. */
struct ref_gemm_args {
  size_t m, n, k;
  const float *a;
  size_t lda;
  const float *b;
  size_t ldb;
  bool b_trans;
  const float *c_in; /* optional */
  size_t ldc_in;
  const float *bias; /* optional, length n */
  const float *residual; /* optional */
  size_t ldr;
  float *c;
  size_t ldc;
  float alpha, beta;
  enum ref_act act;
  size_t batch;
  size_t stride_a, stride_b, stride_c_in, stride_bias, stride_residual, stride_c;
};

/* Returns 0, or -1 (writing nothing) when a pointer that is needed is NULL or a leading
 * dimension is smaller than the row it must hold. */
int ref_gemm(const struct ref_gemm_args *g);

/* C = A B for contiguous A (m x k), B (k x n), C (m x n): the common case of ref_gemm. */
void ref_matmul(size_t m, size_t n, size_t k, const float *a, const float *b, float *c);

/* ---- row-wise reductions -------------------------------------------------------------- */

/* y[r][j] = exp(x[r][j] - max_r) / sum_j exp(x[r][j] - max_r) for each of rows rows of cols
 * elements, row strides ldx and ldy (0 means cols). y may be x when ldy == ldx. A row whose
 * maximum is -inf or +inf, or that contains NaN, comes out NaN, as torch.softmax gives. */
void ref_softmax(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy);

/* Layer normalisation over each contiguous row of cols elements, as torch.layer_norm:
 * mean = sum x / cols, var = sum (x - mean)^2 / cols (biased), rstd = 1 / sqrt(var + eps),
 * y = (x - mean) * rstd * w + b. w and b may be NULL (meaning 1 and 0); mean_out and
 * rstd_out (one float per row) may be NULL. y may be x. */
void ref_layernorm(size_t rows, size_t cols, const float *x, const float *w, const float *b,
                   float eps, float *y, float *mean_out, float *rstd_out);

/* RMS normalisation: rstd = 1 / sqrt(sum x^2 / cols + eps), y = x * rstd * w.
 * w may be NULL (meaning 1); rstd_out may be NULL. y may be x. */
void ref_rmsnorm(size_t rows, size_t cols, const float *x, const float *w, float eps, float *y,
                 float *rstd_out);

/* ---- attention ------------------------------------------------------------------------ */

/* Scaled dot-product attention. q and o are [batch, hq, nq, d], k and v [batch, hkv, nk, d],
 * all contiguous. hq must be a multiple of hkv (grouped-query attention: query head h reads
 * key/value head h / (hq / hkv)). Scores are s[i][j] = scale * dot(q[i], k[j]). With causal,
 * key j is visible to query i iff j <= i (top-left aligned, as PyTorch's is_causal).
 * lse, optional, is [batch, hq, nq]: the natural-log sum-exp of each row's visible scaled
 * scores (max included), so softmax(s)[j] = exp(s[j] - lse). A row with no visible key
 * gets o = 0 and lse = -inf. Returns 0, or -1 (writing nothing) if hkv is 0, hq is not a
 * multiple of hkv or a needed pointer is NULL. */
int ref_attention(size_t batch, size_t hq, size_t hkv, size_t nq, size_t nk, size_t d,
                  const float *q, const float *k, const float *v, float scale, bool causal,
                  float *o, float *lse);

/* ---- comparison ----------------------------------------------------------------------- */

/* The result of ref_compare. An element is bad when exactly one of got and want is NaN, when
 * either is infinite and they differ, or when |got - want| > atol + rtol * |want|; NaN in
 * both, and equal infinities, count as equal. n_nan counts the elements where exactly one
 * side is NaN. max_abs, max_rel and rel_l2 are taken over the elements where both values are
 * finite, except that a bad non-finite element sets max_abs and max_rel to infinity.
 * max_rel uses |got - want| / |want|, which is infinite where want is 0 and got is not.
 * rel_l2 = ||got - want||_2 / ||want||_2, 0 when both norms are 0 (infinite if only want's
 * is). worst is the index of the element furthest outside its tolerance, measured as
 * |got - want| / (atol + rtol * |want|) (0 if n is 0). */
struct ref_cmp {
  double max_abs, max_rel, rel_l2;
  size_t worst, n_nan, n_bad;
};

struct ref_cmp ref_compare(const float *got, const float *want, size_t n, double atol,
                           double rtol);

/* Formats a one-line summary of c (no trailing newline) into buf of size cap, like
 * "bad 3/1024 nan 0 max_abs 1.2e-03 max_rel 4.5e-02 rel_l2 1.1e-04 worst [17] got 1.25
 * want 1.2505". n is the element count given to ref_compare; got and want may be NULL, which
 * leaves out the worst element's values. Returns what snprintf returns. */
int ref_cmp_format(char *buf, size_t cap, const struct ref_cmp *c, size_t n, const float *got,
                   const float *want);

#endif /* TL_TEST_REF_H */
