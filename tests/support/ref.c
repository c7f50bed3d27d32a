/* ref.c - naive reference implementations for the tests and GPU check tools (see ref.h).
 *
 * Every function is a direct transcription of the formula in ref.h: sums are accumulated in
 * double, intermediate values stay in double, and each output is rounded to float once at the
 * end. Nothing here is tuned; clarity is the only goal.                                       */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- activations ---------------------------------------------------------------------- */

static double act_d(enum ref_act act, double x) {
  switch (act) {
  case REF_ACT_NONE:
    return x;
  case REF_ACT_RELU:
    return x > 0.0 ? x : 0.0;
  case REF_ACT_GELU_TANH: {
    const double sqrt_2_over_pi = 0.79788456080286535587989211986876;
    return 0.5 * x * (1.0 + tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
  }
  case REF_ACT_SILU:
    return x / (1.0 + exp(-x));
  case REF_ACT_SIGMOID:
    return 1.0 / (1.0 + exp(-x));
  }
  return x;
}

float ref_act_apply(enum ref_act act, float x) { return (float)act_d(act, (double)x); }

/* ---- GEMM ----------------------------------------------------------------------------- */

int ref_gemm(const struct ref_gemm_args *g) {
  size_t m = g->m, n = g->n, k = g->k;
  size_t lda = g->lda ? g->lda : k;
  size_t ldb = g->ldb ? g->ldb : (g->b_trans ? k : n);
  size_t ldc = g->ldc ? g->ldc : n;
  size_t ldc_in = g->ldc_in ? g->ldc_in : n;
  size_t ldr = g->ldr ? g->ldr : n;
  size_t batch = g->batch ? g->batch : 1;

  if (m == 0 || n == 0) return 0;
  if (!g->c) return -1;
  if (k > 0 && (!g->a || !g->b)) return -1;
  if (lda < k || ldb < (g->b_trans ? k : n) || ldc < n) return -1;
  if ((g->c_in && ldc_in < n) || (g->residual && ldr < n)) return -1;

  for (size_t p = 0; p < batch; p++) {
    const float *a = g->a ? g->a + p * g->stride_a : NULL;
    const float *b = g->b ? g->b + p * g->stride_b : NULL;
    const float *c_in = g->c_in ? g->c_in + p * g->stride_c_in : NULL;
    const float *bias = g->bias ? g->bias + p * g->stride_bias : NULL;
    const float *res = g->residual ? g->residual + p * g->stride_residual : NULL;
    float *c = g->c + p * g->stride_c;
    for (size_t i = 0; i < m; i++) {
      for (size_t j = 0; j < n; j++) {
        double acc = 0.0;
        for (size_t kk = 0; kk < k; kk++) {
          double b_kj = g->b_trans ? b[j * ldb + kk] : b[kk * ldb + j];
          acc += (double)a[i * lda + kk] * b_kj;
        }
        double v = (double)g->alpha * acc;
        if (c_in) v += (double)g->beta * c_in[i * ldc_in + j];
        if (bias) v += bias[j];
        v = act_d(g->act, v);
        if (res) v += res[i * ldr + j];
        c[i * ldc + j] = (float)v;
      }
    }
  }
  return 0;
}

void ref_matmul(size_t m, size_t n, size_t k, const float *a, const float *b, float *c) {
  struct ref_gemm_args g = {.m = m, .n = n, .k = k, .a = a, .b = b, .c = c, .alpha = 1.0f};
  (void)ref_gemm(&g);
}

/* ---- row-wise reductions -------------------------------------------------------------- */

void ref_softmax(size_t rows, size_t cols, const float *x, size_t ldx, float *y, size_t ldy) {
  if (ldx == 0) ldx = cols;
  if (ldy == 0) ldy = cols;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    double mx = -INFINITY;
    bool has_nan = false;
    for (size_t j = 0; j < cols; j++) {
      if (isnan(xr[j])) has_nan = true;
      if (xr[j] > mx) mx = xr[j];
    }
    if (has_nan || isinf(mx)) {
      for (size_t j = 0; j < cols; j++) yr[j] = NAN;
      continue;
    }
    double sum = 0.0;
    for (size_t j = 0; j < cols; j++) sum += exp((double)xr[j] - mx);
    for (size_t j = 0; j < cols; j++) yr[j] = (float)(exp((double)xr[j] - mx) / sum);
  }
}

void ref_layernorm(size_t rows, size_t cols, const float *x, const float *w, const float *b,
                   float eps, float *y, float *mean_out, float *rstd_out) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double sum = 0.0;
    for (size_t j = 0; j < cols; j++) sum += xr[j];
    double mean = cols ? sum / (double)cols : 0.0;
    double sq = 0.0;
    for (size_t j = 0; j < cols; j++) sq += ((double)xr[j] - mean) * ((double)xr[j] - mean);
    double var = cols ? sq / (double)cols : 0.0;
    double rstd = 1.0 / sqrt(var + (double)eps);
    for (size_t j = 0; j < cols; j++) {
      double v = ((double)xr[j] - mean) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = (float)v;
    }
    if (mean_out) mean_out[r] = (float)mean;
    if (rstd_out) rstd_out[r] = (float)rstd;
  }
}

void ref_rmsnorm(size_t rows, size_t cols, const float *x, const float *w, float eps, float *y,
                 float *rstd_out) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double sq = 0.0;
    for (size_t j = 0; j < cols; j++) sq += (double)xr[j] * xr[j];
    double ms = cols ? sq / (double)cols : 0.0;
    double rstd = 1.0 / sqrt(ms + (double)eps);
    for (size_t j = 0; j < cols; j++) {
      double v = (double)xr[j] * rstd;
      if (w) v *= w[j];
      yr[j] = (float)v;
    }
    if (rstd_out) rstd_out[r] = (float)rstd;
  }
}

/* ---- attention ------------------------------------------------------------------------ */

int ref_attention(size_t batch, size_t hq, size_t hkv, size_t nq, size_t nk, size_t d,
                  const float *q, const float *k, const float *v, float scale, bool causal,
                  float *o, float *lse) {
  if (hkv == 0 || hq % hkv != 0) return -1;
  if (batch == 0 || hq == 0 || nq == 0) return 0;
  if (!o || (d > 0 && !q) || (nk > 0 && d > 0 && (!k || !v))) return -1;

  size_t group = hq / hkv;                                     /* query heads per kv head */
  double *s = malloc((nk ? nk : 1) * sizeof *s);               /* one row of scores */
  double *acc = malloc((d ? d : 1) * sizeof *acc);             /* one row of output */
  if (!s || !acc) {
    free(s);
    free(acc);
    return -1;
  }

  for (size_t bi = 0; bi < batch; bi++) {
    for (size_t h = 0; h < hq; h++) {
      size_t hk = h / group;
      const float *qh = q + (bi * hq + h) * nq * d;
      const float *kh = k + (bi * hkv + hk) * nk * d;
      const float *vh = v + (bi * hkv + hk) * nk * d;
      float *oh = o + (bi * hq + h) * nq * d;
      for (size_t i = 0; i < nq; i++) {
        /* Scores of the visible keys, and their maximum. */
        double mx = -INFINITY;
        size_t visible = 0;
        for (size_t j = 0; j < nk; j++) {
          if (causal && j > i) break; /* keys are visited in order, so the rest are masked */
          double dot = 0.0;
          for (size_t t = 0; t < d; t++) dot += (double)qh[i * d + t] * kh[j * d + t];
          s[j] = (double)scale * dot;
          if (s[j] > mx) mx = s[j];
          visible = j + 1;
        }
        if (visible == 0) {
          for (size_t t = 0; t < d; t++) oh[i * d + t] = 0.0f;
          if (lse) lse[(bi * hq + h) * nq + i] = -INFINITY;
          continue;
        }
        /* Softmax weights and the weighted sum of the value rows. */
        double sum = 0.0;
        for (size_t t = 0; t < d; t++) acc[t] = 0.0;
        for (size_t j = 0; j < visible; j++) {
          double p = exp(s[j] - mx);
          sum += p;
          for (size_t t = 0; t < d; t++) acc[t] += p * vh[j * d + t];
        }
        for (size_t t = 0; t < d; t++) oh[i * d + t] = (float)(acc[t] / sum);
        if (lse) lse[(bi * hq + h) * nq + i] = (float)(mx + log(sum));
      }
    }
  }
  free(s);
  free(acc);
  return 0;
}

/* ---- comparison ----------------------------------------------------------------------- */

struct ref_cmp ref_compare(const float *got, const float *want, size_t n, double atol,
                           double rtol) {
  struct ref_cmp c = {0.0, 0.0, 0.0, 0, 0, 0};
  double worst_key = -1.0, worst_diff = -1.0;
  double num = 0.0, den = 0.0; /* squared norms of got - want and of want */

  for (size_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    double diff, key;
    bool bad;
    if (isnan(g) || isnan(w)) {
      bad = !(isnan(g) && isnan(w));
      if (bad) c.n_nan++;
      diff = bad ? INFINITY : 0.0;
      key = diff;
    } else if (isinf(g) || isinf(w)) {
      bad = g != w;
      diff = bad ? INFINITY : 0.0;
      key = diff;
    } else {
      diff = fabs(g - w);
      double tol = atol + rtol * fabs(w);
      bad = diff > tol;
      key = tol > 0.0 ? diff / tol : (diff > 0.0 ? INFINITY : 0.0);
      double rel = w != 0.0 ? diff / fabs(w) : (diff > 0.0 ? INFINITY : 0.0);
      if (rel > c.max_rel) c.max_rel = rel;
      num += diff * diff;
      den += w * w;
    }
    if (bad) c.n_bad++;
    if (diff > c.max_abs) c.max_abs = diff;
    if (bad && isinf(diff)) c.max_rel = INFINITY;
    if (key > worst_key || (key == worst_key && diff > worst_diff)) {
      worst_key = key;
      worst_diff = diff;
      c.worst = i;
    }
  }
  if (den > 0.0)
    c.rel_l2 = sqrt(num) / sqrt(den);
  else
    c.rel_l2 = num > 0.0 ? INFINITY : 0.0;
  return c;
}

int ref_cmp_format(char *buf, size_t cap, const struct ref_cmp *c, size_t n, const float *got,
                   const float *want) {
  if (got && want && n > 0)
    return snprintf(buf, cap,
                    "bad %zu/%zu nan %zu max_abs %.3e max_rel %.3e rel_l2 %.3e worst [%zu] got "
                    "%.9g want %.9g",
                    c->n_bad, n, c->n_nan, c->max_abs, c->max_rel, c->rel_l2, c->worst,
                    (double)got[c->worst], (double)want[c->worst]);
  return snprintf(buf, cap, "bad %zu/%zu nan %zu max_abs %.3e max_rel %.3e rel_l2 %.3e worst [%zu]",
                  c->n_bad, n, c->n_nan, c->max_abs, c->max_rel, c->rel_l2, c->worst);
}
