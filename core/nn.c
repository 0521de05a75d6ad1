/*
 * nn.c: the fused layer kernels declared in nn.h (shapes and conventions
 * there). Matrix products go through cblas_sgemm; the softmax over the
 * vocabulary is the only other hot loop (N*V elements per step), so it has an
 * AVX-512 exp and splits its rows over POSIX threads. Everything else is
 * plain loops: at the study's sizes they cost little next to the lm_head.
 *
 * Non-goals: strided inputs, float64, dropout, kernels for other layers.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
/* CPUs without AVX-512 (the Zen kernels' AMD EPYCs among them) still run
 * the softmax over the vocabulary in SIMD: scalar expf there was half of an
 * evaluation step. Only the hottest loops have this 8-lane path. */
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#define XSA_AVX2 1
#endif

#include "error.h"
#include "matmul_bf16.h"
#include "nn.h"
#include "system.h"
#include "vec.h"

/* ---- embedding ---------------------------------------------------------- */

void xsa_nn_embedding_forward(float *out, const int32_t *inp, const float *wte,
                              const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)inp[(size_t)b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
        }
}

void xsa_nn_embedding_backward(float *dwte, float *dwpe, const float *dout,
                               const int32_t *inp, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            if (dwte) {
                float *g = dwte + (size_t)inp[(size_t)b * T + t] * C;
                for (int c = 0; c < C; c++) g[c] += d[c];
            }
            if (dwpe) {
                float *g = dwpe + (size_t)t * C;
                for (int c = 0; c < C; c++) g[c] += d[c];
            }
        }
}

/* ---- linear ------------------------------------------------------------- */

void xsa_nn_linear_forward(float *out, const float *inp, const float *w,
                           const float *b, int N, int C, int OC)
{
    float beta = 0.0f;
    if (b) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C, 1.0f, inp, C, w, OC,
                beta, out, OC);
}

typedef struct {
    float *dw;
    const float *dout, *inp;
    int N, C, OC;
} linear_dw_job;

static void *linear_dw(void *arg)
{
    const linear_dw_job *j = arg;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, j->C, j->OC, j->N, 1.0f, j->inp, j->C,
                j->dout, j->OC, 1.0f, j->dw, j->OC);
    return NULL;
}

/* Products of at least this many multiply-adds run dinp's and dw's
 * products side by side when there are threads. Each product stays one
 * call on one thread (OpenBLAS's own threads would change its bits, see
 * system.c), so the bits are those of one thread. */
#define LINEAR_PAIR_MIN (1L << 20)

void xsa_nn_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC)
{
    linear_dw_job dj = {dw, dout, inp, N, C, OC};
    pthread_t tid;
    int pair = dinp && dw && (long)N * C * OC >= LINEAR_PAIR_MIN && xsa_threads() > 1 &&
               pthread_create(&tid, NULL, linear_dw, &dj) == 0;
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f, dout, OC, w, OC,
                    1.0f, dinp, C);
    if (dw && !pair) linear_dw(&dj);
    if (pair) pthread_join(tid, NULL);
    if (db)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) db[o] += d[o];
        }
}

/* ---- tied lm_head ------------------------------------------------------- */

void xsa_nn_lmhead_forward(float *logits, const float *inp, const float *wte,
                           int N, int C, int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, inp, C, wte, C, 0.0f,
                logits, V);
}

void xsa_nn_lmhead_backward(float *dinp, float *dwte, const float *dlogits,
                            const float *inp, const float *wte, int N, int C, int V)
{
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, dlogits, V, wte, C,
                    1.0f, dinp, C);
    if (dwte)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, dlogits, V, inp, C,
                    1.0f, dwte, C);
}

/* ---- layernorm ---------------------------------------------------------- */

void xsa_nn_layernorm_forward(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        double m = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            v += d * d;
        }
        v /= C;
        double r = 1.0 / sqrt(v + (double)XSA_NN_LN_EPS);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (float)((x[c] - m) * r) * w[c] + b[c];
        mean[n] = (float)m;
        rstd[n] = (float)r;
    }
}

void xsa_nn_layernorm_backward(float *dinp, float *dw, float *db,
                               const float *dout, const float *inp,
                               const float *w, const float *mean,
                               const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float m = mean[n], r = rstd[n];
        /* dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) */
        double dsum = 0.0, dnsum = 0.0;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * r;
            float dn = w[c] * d[c];
            dsum += dn;
            dnsum += (double)dn * norm;
        }
        float dmean = (float)(dsum / C), dnmean = (float)(dnsum / C);
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * r;
            if (db) db[c] += d[c];
            if (dw) dw[c] += norm * d[c];
            if (dinp) dinp[(size_t)n * C + c] += (w[c] * d[c] - dmean - norm * dnmean) * r;
        }
    }
}

/* ---- gelu (exact) ------------------------------------------------------- */

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794

/* exp(x), 16 lanes, for x <= 88 (results below e^-87 flush to about 0):
 * Cephes' expf reduction and polynomial, accurate to about 1 ulp. */
#if defined(__AVX512F__)
static inline __m512 exp512(__m512 x)
{
    /* operand order: a NaN x comes out as x, so NaN propagates */
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}
#endif

#if defined(XSA_AVX2)
/* exp256: exp512's reduction and polynomial on 8 lanes, with 2^n built in
 * the exponent field (n is within [-126, 127] after the clamps), so for
 * x <= 88 each lane equals exp512's. Operand order keeps NaN a NaN. */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x); /* above 88: e^88, not inf */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* lanes [0, w) set, for masked loads and stores of a tail */
static inline __m256i mask256(int w)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#if defined(__AVX512F__)
/* Phi(x) = 0.5 (1 + erf(x / sqrt 2)), the normal CDF, through
 * erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z = |x|/sqrt 2
 * (the Chebyshev fit of Numerical Recipes' erfcc: fractional error below
 * 1.2e-7 for every z >= 0, so Phi keeps its relative accuracy in the
 * negative tail, where 1 + erf would cancel). In float, the rounding of z^2
 * adds about 1.2e-7 z^2 relative error: measured max 1.8e-6 for gelu over
 * values above 1e-7 in magnitude (tests/test_nn.c). */
static inline __m512 phi512(__m512 x)
{
    __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps((float)INV_SQRT2));
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                             _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(0.17087277f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f));
    p = _mm512_fnmadd_ps(z, z, p);
    __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(t, exp512(p)), _mm512_set1_ps(0.5f));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(1.0f), half_erfc), half_erfc);
}
#endif

void xsa_nn_gelu_forward(float *out, const float *inp, size_t count)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= count; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(x, phi512(x)));
    }
#endif
    /* Phi(x) = erfc(-x/sqrt 2)/2: no cancellation in the negative tail as
     * with (1 + erf)/2 */
    for (; i < count; i++) {
        float x = inp[i];
        out[i] = x * 0.5f * erfcf(-x * (float)INV_SQRT2);
    }
}

void xsa_nn_gelu_backward(float *dinp, const float *inp, const float *dout, size_t count)
{
    size_t i = 0;
#if defined(__AVX512F__)
    /* gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi) */
    for (; i + 16 <= count; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        __m512 pdf = _mm512_mul_ps(
            exp512(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f))),
            _mm512_set1_ps((float)INV_SQRT2PI));
        __m512 d = _mm512_fmadd_ps(x, pdf, phi512(x));
        _mm512_storeu_ps(dinp + i,
                         _mm512_fmadd_ps(_mm512_loadu_ps(dout + i), d, _mm512_loadu_ps(dinp + i)));
    }
#endif
    for (; i < count; i++) {
        float x = inp[i];
        float cdf = 0.5f * erfcf(-x * (float)INV_SQRT2);
        float pdf = (float)INV_SQRT2PI * expf(-0.5f * x * x);
        dinp[i] += dout[i] * (cdf + x * pdf);
    }
}

/* ---- residual ----------------------------------------------------------- */

void xsa_nn_residual_forward(float *out, const float *a, const float *b, size_t count)
{
    for (size_t i = 0; i < count; i++) out[i] = a[i] + b[i];
}

void xsa_nn_residual_backward(float *da, float *db, const float *dout, size_t count)
{
    if (da)
        for (size_t i = 0; i < count; i++) da[i] += dout[i];
    if (db)
        for (size_t i = 0; i < count; i++) db[i] += dout[i];
}

/* ---- attention ---------------------------------------------------------- */

#define VN_EPS 1e-12f
#define COS_EPS 1e-8

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    double den = sqrt(aa) * sqrt(bb);
    return ab / (den > COS_EPS ? den : COS_EPS);
}

/* Probe statistics from the saved tensors of one forward (see nn.h). */
static void attention_probe(double *probe, const float *out, const float *y,
                            const float *att, const float *qkv, int B, int T,
                            int C, int NH)
{
    int HS = C / NH, C3 = 3 * C;
    for (int h = 0; h < NH; h++) {
        double vc = 0.0, sa = 0.0, pre = 0.0, post = 0.0, pre1 = 0.0, post1 = 0.0;
        for (int b = 0; b < B; b++) {
            const float *base = qkv + (size_t)b * T * C3 + 2 * C + h * HS;
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    if (i != j) vc += cosine(base + (size_t)i * C3, base + (size_t)j * C3, HS);
            for (int t = 0; t < T; t++) {
                const float *v = base + (size_t)t * C3;
                size_t o = ((size_t)b * T + t) * C + h * HS;
                double cp = cosine(y + o, v, HS), cz = cosine(out + o, v, HS);
                sa += att[(((size_t)b * NH + h) * T + t) * T + t];
                pre += cp;
                post += cz;
                if (t > 0) {
                    pre1 += cp;
                    post1 += cz;
                }
            }
        }
        double *p = probe + (size_t)h * XSA_NN_PROBE_N;
        double nt = (double)B * T, nt1 = (double)B * (T - 1);
        p[XSA_NN_PROBE_VALUE_COS] = T > 1 ? vc / (nt * (T - 1)) : 0.0;
        p[XSA_NN_PROBE_SELF_ATTN] = sa / nt;
        p[XSA_NN_PROBE_PRE_COS] = pre / nt;
        p[XSA_NN_PROBE_POST_COS] = post / nt;
        p[XSA_NN_PROBE_PRE_COS1] = T > 1 ? pre1 / nt1 : 0.0;
        p[XSA_NN_PROBE_POST_COS1] = T > 1 ? post1 / nt1 : 0.0;
    }
}

void xsa_nn_xsa_project(float *z, const float *y, const float *v, int HS, float lambda)
{
    float nv = sqrtf(dot(v, v, HS));
    float r = 1.0f / (nv > VN_EPS ? nv : VN_EPS);
    float s = dot(y, v, HS) * r;
    float f = lambda * s * r;
    for (int i = 0; i < HS; i++) z[i] = y[i] - f * v[i];
}

void xsa_nn_attention_forward(float *out, float *y, float *att, const float *qkv,
                              int B, int T, int C, int NH, float lambda,
                              double *probe)
{
    int HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    int xsa = lambda != 0.0f;
    float *ydst = xsa ? y : out;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float mx = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * HS;
                    float s = dot(q, k, HS) * scale;
                    a[t2] = s;
                    if (s > mx) mx = s;
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    a[t2] = expf(a[t2] - mx);
                    sum += a[t2];
                }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float *yo = ydst + ((size_t)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) yo[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++)
                    axpy(yo, a[t2], qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * HS, HS);
                if (xsa)
                    xsa_nn_xsa_project(out + ((size_t)b * T + t) * C + h * HS, yo,
                                       qkv + ((size_t)b * T + t) * C3 + 2 * C + h * HS, HS, lambda);
            }
    if (probe) attention_probe(probe, out, ydst, att, qkv, B, T, C, NH);
}

size_t xsa_nn_attention_scratch_floats(int B, int T, int C, int NH)
{
    (void)NH;
    return (size_t)B * T * C + (size_t)T;
}

void xsa_nn_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, const float *y,
                               int B, int T, int C, int NH, float lambda)
{
    int HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    const float *dy = dout;
    float *datt = scratch + (size_t)B * T * C;
    if (lambda != 0.0f) {
        /* Through the projection: with s = Y.Vn, g = dZ.Vn,
         *   dY  = dZ - lambda g Vn
         *   dVn = -lambda (s dZ + g Y)
         *   dV  = (dVn - (dVn.Vn) Vn) / |V|   (or dVn / eps when |V| <= eps) */
        float *dyw = scratch;
        for (size_t bt = 0; bt < (size_t)B * T; bt++)
            for (int h = 0; h < NH; h++) {
                const float *v = qkv + bt * C3 + 2 * C + h * HS;
                float *dv = dqkv + bt * C3 + 2 * C + h * HS;
                const float *yy = y + bt * C + h * HS;
                const float *dz = dout + bt * C + h * HS;
                float *dyo = dyw + bt * C + h * HS;
                float nv = sqrtf(dot(v, v, HS));
                float r = 1.0f / (nv > VN_EPS ? nv : VN_EPS);
                float s = dot(yy, v, HS) * r, g = dot(dz, v, HS) * r;
                float dvn_vn = 0.0f;
                for (int i = 0; i < HS; i++) {
                    float vn = v[i] * r;
                    dyo[i] = dz[i] - lambda * g * vn;
                    dvn_vn += -lambda * (s * dz[i] + g * yy[i]) * vn;
                }
                int normal = nv > VN_EPS;
                for (int i = 0; i < HS; i++) {
                    float vn = v[i] * r;
                    float dvn = -lambda * (s * dz[i] + g * yy[i]);
                    dv[i] += normal ? (dvn - dvn_vn * vn) * r : dvn * r;
                }
            }
        dy = dyw;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *dyt = dy + ((size_t)b * T + t) * C + h * HS;
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    size_t row = ((size_t)b * T + t2) * C3;
                    const float *v = qkv + row + 2 * C + h * HS;
                    float *dv = dqkv + row + 2 * C + h * HS;
                    datt[t2] = dot(dyt, v, HS);
                    sum += a[t2] * datt[t2];
                    axpy(dv, a[t2], dyt, HS);
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    size_t row = ((size_t)b * T + t2) * C3;
                    const float *k = qkv + row + C + h * HS;
                    float *dk = dqkv + row + C + h * HS;
                    float dpre = a[t2] * (datt[t2] - sum) * scale;
                    axpy(dq, dpre, k, HS);
                    axpy(dk, dpre, q, HS);
                }
            }
}

/* ---- cross-entropy ------------------------------------------------------ */

/* One row: returns log(sum exp(l - max)) + max, and writes the unnormalised
 * exponentials to pr (may alias l) when non-NULL; *ssum gets their sum. */
static double row_lse(const float *l, float *pr, int V, double *ssum)
{
    float mx = -INFINITY;
    int i = 0;
#if defined(__AVX512F__)
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (; i + 16 <= V; i += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(l + i));
    mx = _mm512_reduce_max_ps(vm);
#elif defined(XSA_AVX2)
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= V; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(l + i));
    {
        float lanes[8];
        _mm256_storeu_ps(lanes, vm);
        for (int k = 0; k < 8; k++)
            if (lanes[k] > mx) mx = lanes[k];
    }
#endif
    for (; i < V; i++)
        if (l[i] > mx) mx = l[i];
    double sum = 0.0;
    i = 0;
#if defined(__AVX512F__)
    __m512 vmx = _mm512_set1_ps(mx), acc = _mm512_setzero_ps();
    for (; i + 16 <= V; i += 16) {
        __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(l + i), vmx));
        if (pr) _mm512_storeu_ps(pr + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    {
        float lanes[16];
        _mm512_storeu_ps(lanes, acc);
        for (int k = 0; k < 16; k++) sum += lanes[k];
    }
#elif defined(XSA_AVX2)
    __m256 vmx = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    for (; i + 8 <= V; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(l + i), vmx));
        if (pr) _mm256_storeu_ps(pr + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    {
        float lanes[8];
        _mm256_storeu_ps(lanes, acc);
        for (int k = 0; k < 8; k++) sum += lanes[k];
    }
#endif
    for (; i < V; i++) {
        float e = expf(l[i] - mx);
        if (pr) pr[i] = e;
        sum += e;
    }
    *ssum = sum;
    return log(sum) + mx;
}

#define CE_LOSS_ROWS 64 /* task 0: rows per partial sum of the losses */

typedef struct {
    int task; /* ce_rows: 0 forward, 1 backward; 2: a block of the fused lm_head (ce_block) */
    int r0, r1, V, N;
    const float *logits;
    float *probs, *pscale, *losses, *dlogits;
    const float *cprobs, *cpscale;
    const int32_t *targets;
    float dloss;
    double total;
    double *btot; /* task 0: per CE_LOSS_ROWS rows, their sum (with threads) */
    /* task 2 */
    float *chunk;      /* the block's logits lb[V][N] in (V rows of the vocabulary) */
    uint16_t *chunk16; /* the exponentials as bf16 here [V][N] (when non-NULL) */
    int grad;          /* write the exponentials (in place when chunk16 is NULL) */
    int v0;            /* the block's first row of the vocabulary */
    float *bmax, *lt;  /* per column: the block's maximum; the target's logit */
    double *bsum;      /* per column: the block's sum of exp(l - max) */
} ce_job;

/* Task 2: columns r0..r1 of one block of the transposed logits, lb[V][N]
 * (rows v0..v0+V of the vocabulary; the chunk's N rows of the batch are its
 * columns), just computed and still in cache. Per column: the block's
 * maximum m and sum of exp(l - m) (float over 64 rows, then double), and
 * the target's logit when the target falls in the block; with grad also the
 * exponentials exp(l - m), in place or as bf16 into chunk16. The caller
 * joins the blocks' (m, sum) into the log-sum-exp; each block's
 * exponentials then need one factor per column, exp(m - lse). */
#define CE_COL_BLOCKS 8 /* 16-column blocks processed together (128 columns) */

static void ce_block(ce_job *j)
{
    int n = j->N, V = j->V, v0 = j->v0;
    float *et = j->chunk;
    for (int c = j->r0; c < j->r1; c++) {
        int t = j->targets[c];
        if (t >= v0 && t < v0 + V) j->lt[c] = et[(size_t)(t - v0) * n + c];
    }
    /* groups of up to CE_COL_BLOCKS blocks of 16 columns; each pass goes
     * down the rows of the block once for the whole group (128 columns of
     * a few thousand rows: in L2) */
    for (int g0 = j->r0; g0 < j->r1; g0 += 16 * CE_COL_BLOCKS) {
        int g1 = j->r1 - g0 < 16 * CE_COL_BLOCKS ? j->r1 : g0 + 16 * CE_COL_BLOCKS;
        float *mxs = j->bmax + g0;
        double *sums = j->bsum + g0;
#if defined(__AVX512F__)
        int nb = (g1 - g0 + 15) / 16;
        __mmask16 km[CE_COL_BLOCKS];
        __m512 mx[CE_COL_BLOCKS], acc[CE_COL_BLOCKS];
        __m512d s0[CE_COL_BLOCKS], s1[CE_COL_BLOCKS];
        for (int b = 0; b < nb; b++) {
            int w = g1 - (g0 + 16 * b) < 16 ? g1 - (g0 + 16 * b) : 16;
            km[b] = (__mmask16)(w == 16 ? 0xffffu : (1u << w) - 1u);
            mx[b] = _mm512_set1_ps(-INFINITY);
            s0[b] = s1[b] = _mm512_setzero_pd();
        }
        for (int v = 0; v < V; v++) {
            const float *row = et + (size_t)v * n + g0;
            for (int b = 0; b < nb; b++)
                mx[b] = _mm512_max_ps(mx[b], _mm512_maskz_loadu_ps(km[b], row + 16 * b));
        }
        for (int va = 0; va < V; va += 64) {
            int vz = V - va < 64 ? V : va + 64;
            for (int b = 0; b < nb; b++) acc[b] = _mm512_setzero_ps();
            for (int v = va; v < vz; v++) {
                float *row = et + (size_t)v * n + g0;
                for (int b = 0; b < nb; b++) {
                    __m512 e = _mm512_maskz_mov_ps(
                        km[b], exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(km[b], row + 16 * b), mx[b])));
                    if (j->grad) {
                        if (j->chunk16) {
                            __m512i u = _mm512_castps_si512(e);
                            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
                            u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
                            _mm256_mask_storeu_epi16(j->chunk16 + (size_t)v * n + g0 + 16 * b, km[b],
                                                     _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
                        } else {
                            _mm512_mask_storeu_ps(row + 16 * b, km[b], e);
                        }
                    }
                    acc[b] = _mm512_add_ps(acc[b], e);
                }
            }
            for (int b = 0; b < nb; b++) {
                s0[b] = _mm512_add_pd(s0[b], _mm512_cvtps_pd(_mm512_castps512_ps256(acc[b])));
                s1[b] = _mm512_add_pd(s1[b], _mm512_cvtps_pd(_mm256_castpd_ps(
                                                 _mm512_extractf64x4_pd(_mm512_castps_pd(acc[b]), 1))));
            }
        }
        for (int b = 0; b < nb; b++) {
            float mt[16];
            double st[16];
            _mm512_storeu_ps(mt, mx[b]);
            _mm512_storeu_pd(st, s0[b]);
            _mm512_storeu_pd(st + 8, s1[b]);
            for (int i = 0; i < 16 && g0 + 16 * b + i < g1; i++) {
                mxs[16 * b + i] = mt[i];
                sums[16 * b + i] = st[i];
            }
        }
#else
#if defined(XSA_AVX2)
        /* the same per column as the 16-lane path (exp256 = exp512, float
         * sums over 64 rows, then double), 64 columns at a time so the
         * maxima and sums stay in the 16 registers; bf16 exponentials
         * (AVX-512 machines only) take the plain loop below */
        if (!j->chunk16) {
            for (int h0 = g0; h0 < g1; h0 += 64) {
                int h1 = g1 - h0 < 64 ? g1 : h0 + 64, nb = (h1 - h0 + 7) / 8;
                __m256i km[8];
                __m256 mx[8], acc[8];
                __m256d s0[8], s1[8];
                for (int b = 0; b < nb; b++) {
                    km[b] = mask256(h1 - (h0 + 8 * b));
                    mx[b] = _mm256_set1_ps(-INFINITY);
                    s0[b] = s1[b] = _mm256_setzero_pd();
                }
                for (int v = 0; v < V; v++) {
                    const float *row = et + (size_t)v * n + h0;
                    for (int b = 0; b < nb; b++)
                        mx[b] = _mm256_max_ps(mx[b], _mm256_maskload_ps(row + 8 * b, km[b]));
                }
                for (int va = 0; va < V; va += 64) {
                    int vz = V - va < 64 ? V : va + 64;
                    for (int b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();
                    for (int v = va; v < vz; v++) {
                        float *row = et + (size_t)v * n + h0;
                        for (int b = 0; b < nb; b++) {
                            __m256 e = _mm256_and_ps(
                                _mm256_castsi256_ps(km[b]),
                                exp256(_mm256_sub_ps(_mm256_maskload_ps(row + 8 * b, km[b]), mx[b])));
                            if (j->grad) _mm256_maskstore_ps(row + 8 * b, km[b], e);
                            acc[b] = _mm256_add_ps(acc[b], e);
                        }
                    }
                    for (int b = 0; b < nb; b++) {
                        s0[b] = _mm256_add_pd(s0[b], _mm256_cvtps_pd(_mm256_castps256_ps128(acc[b])));
                        s1[b] = _mm256_add_pd(s1[b], _mm256_cvtps_pd(_mm256_extractf128_ps(acc[b], 1)));
                    }
                }
                for (int b = 0; b < nb; b++) {
                    float mt[8];
                    double st[8];
                    _mm256_storeu_ps(mt, mx[b]);
                    _mm256_storeu_pd(st, s0[b]);
                    _mm256_storeu_pd(st + 4, s1[b]);
                    for (int i = 0; i < 8 && h0 + 8 * b + i < h1; i++) {
                        mxs[h0 - g0 + 8 * b + i] = mt[i];
                        sums[h0 - g0 + 8 * b + i] = st[i];
                    }
                }
            }
            continue;
        }
#endif
        for (int i = 0; i < g1 - g0; i++) {
            mxs[i] = -INFINITY;
            sums[i] = 0.0;
        }
        for (int v = 0; v < V; v++) {
            const float *row = et + (size_t)v * n + g0;
            for (int i = 0; i < g1 - g0; i++)
                if (row[i] > mxs[i]) mxs[i] = row[i];
        }
        for (int v = 0; v < V; v++) {
            float *row = et + (size_t)v * n + g0;
            for (int i = 0; i < g1 - g0; i++) {
                float e = expf(row[i] - mxs[i]);
                if (j->grad) {
                    if (j->chunk16) {
                        uint32_t u;
                        memcpy(&u, &e, sizeof u);
                        u += 0x7fffu + ((u >> 16) & 1u);
                        j->chunk16[(size_t)v * n + g0 + i] = (uint16_t)(u >> 16);
                    } else {
                        row[i] = e;
                    }
                }
                sums[i] += e;
            }
        }
#endif
    }
}

static void ce_rows(ce_job *j)
{
    size_t V = (size_t)j->V;
    if (j->task == 0) {
        /* summed per CE_LOSS_ROWS rows, then those sums in order: the same
         * whatever the threads (each takes whole blocks of rows) */
        double total = 0.0;
        for (int b0 = j->r0; b0 < j->r1; b0 += CE_LOSS_ROWS) {
            int b1 = j->r1 - b0 < CE_LOSS_ROWS ? j->r1 : b0 + CE_LOSS_ROWS;
            double bt = 0.0;
            for (int n = b0; n < b1; n++) {
                const float *l = j->logits + n * V;
                float lt = l[j->targets[n]]; /* read before pr may overwrite it */
                double sum;
                double lse = row_lse(l, j->probs ? j->probs + n * V : NULL, j->V, &sum);
                double loss = lse - lt;
                if (j->pscale) j->pscale[n] = (float)(1.0 / sum);
                if (j->losses) j->losses[n] = (float)loss;
                bt += loss;
            }
            if (j->btot) j->btot[b0 / CE_LOSS_ROWS] = bt;
            total += bt;
        }
        j->total = total;
    } else {
        float g = j->dloss / (float)j->N;
        for (int n = j->r0; n < j->r1; n++) {
            const float *p = j->cprobs + n * V;
            float *d = j->dlogits + n * V;
            float s = j->cpscale[n] * g;
            size_t i = 0;
#if defined(__AVX512F__)
            __m512 vs = _mm512_set1_ps(s);
            for (; i + 16 <= V; i += 16)
                _mm512_storeu_ps(d + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), vs));
#endif
            for (; i < V; i++) d[i] = p[i] * s;
            d[j->targets[n]] -= g;
        }
    }
}

static void *ce_thread(void *arg)
{
    ce_rows(arg);
    return NULL;
}

#define CE_MAX_THREADS 16

/* Splits rows [0,N) over up to nthreads threads (the caller's thread takes
 * the first share); falls back to one thread if creation fails. Rows are
 * independent except in task 0's sum, which goes by fixed blocks of rows
 * (whole blocks per thread, the blocks' sums added in order), so no task's
 * result depends on the threads. */
static double ce_run(ce_job *proto, int nthreads)
{
    int N = proto->N;
    if (nthreads > CE_MAX_THREADS) nthreads = CE_MAX_THREADS;
    if ((size_t)N * proto->V < ((size_t)1 << 20) || nthreads > N) nthreads = 1;
    if (proto->task == 0 && !proto->btot) nthreads = 1;
    if (nthreads < 1) nthreads = 1;
    ce_job jobs[CE_MAX_THREADS];
    pthread_t tid[CE_MAX_THREADS];
    int started[CE_MAX_THREADS] = {0};
    for (int k = 0; k < nthreads; k++) {
        jobs[k] = *proto;
        jobs[k].r0 = (int)((long)N * k / nthreads);
        jobs[k].r1 = (int)((long)N * (k + 1) / nthreads);
        if (proto->task == 0) { /* whole blocks of the loss's sum per thread */
            int rb = CE_LOSS_ROWS;
            jobs[k].r0 = k == 0 ? 0 : (jobs[k].r0 + rb - 1) / rb * rb;
            jobs[k].r1 = k == nthreads - 1 ? N : (jobs[k].r1 + rb - 1) / rb * rb;
            if (jobs[k].r1 > N) jobs[k].r1 = N;
            if (jobs[k].r0 > jobs[k].r1) jobs[k].r0 = jobs[k].r1;
        }
        jobs[k].total = 0.0;
    }
    for (int k = 1; k < nthreads; k++)
        started[k] = pthread_create(&tid[k], NULL, ce_thread, &jobs[k]) == 0;
    ce_rows(&jobs[0]);
    for (int k = 1; k < nthreads; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            ce_rows(&jobs[k]);
    }
    if (nthreads == 1) return jobs[0].total; /* the blocks' sums, in order */
    double total = 0.0;
    if (proto->task == 0)
        for (int b = 0; b < (N + CE_LOSS_ROWS - 1) / CE_LOSS_ROWS; b++) total += proto->btot[b];
    return total;
}

double xsa_nn_crossentropy_forward(float *probs, float *pscale, float *losses,
                                   const float *logits, const int32_t *targets,
                                   int N, int V, int nthreads)
{
    ce_job j = {0};
    j.task = 0;
    j.N = N;
    j.V = V;
    j.logits = logits;
    j.probs = probs;
    j.pscale = pscale;
    j.losses = losses;
    j.targets = targets;
    /* the blocks' sums for threads (without them: one thread, same sum) */
    j.btot = nthreads > 1 ? malloc(((size_t)N / CE_LOSS_ROWS + 1) * sizeof(double)) : NULL;
    double total = ce_run(&j, nthreads);
    free(j.btot);
    return total / N;
}

void xsa_nn_crossentropy_backward(float *dlogits, const float *probs,
                                  const float *pscale, const int32_t *targets,
                                  float dloss, int N, int V, int nthreads)
{
    ce_job j = {0};
    j.task = 1;
    j.N = N;
    j.V = V;
    j.cprobs = probs;
    j.dlogits = dlogits;
    j.cpscale = pscale;
    j.targets = targets;
    j.dloss = dloss;
    ce_run(&j, nthreads);
}

/* ---- fused cross-entropy + lm_head backward ------------------------------ */

void xsa_nn_lmhead_ce_backward(float *dinp, float *dwte, float *scratch,
                               const float *probs, const float *pscale,
                               const int32_t *targets, const float *inp,
                               const float *wte, float dloss, int N, int C, int V)
{
    float g = dloss / (float)N;
    float *t1 = scratch, *t2 = scratch + (size_t)N * C;
    if (dinp) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, probs, V, wte, C,
                    0.0f, t1, C);
        for (int n = 0; n < N; n++) {
            float s = pscale[n] * g;
            const float *r = t1 + (size_t)n * C, *w = wte + (size_t)targets[n] * C;
            float *d = dinp + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += s * r[c] - g * w[c];
        }
    }
    if (dwte) {
        for (int n = 0; n < N; n++) {
            float s = pscale[n] * g;
            const float *x = inp + (size_t)n * C;
            float *r = t2 + (size_t)n * C;
            for (int c = 0; c < C; c++) r[c] = x[c] * s;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, probs, V, t2, C, 1.0f,
                    dwte, C);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C;
            float *d = dwte + (size_t)targets[n] * C;
            for (int c = 0; c < C; c++) d[c] -= g * x[c];
        }
    }
}

/* ---- fused and chunked: lm_head + cross-entropy (+ gradient) ------------- */

int xsa_nn_lmhead_rows(int N, int V, int bf16)
{
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("XSA_LMHEAD_ROWS");
        int v = e ? atoi(e) : 0;
        env = v > 0 ? v : 0;
    }
    int r = env;
    if (r == 0) {
        /* float32: about 40 MB of exponentials per chunk (192 rows of
         * GPT-2's vocabulary), what a paired run can afford; bf16, whose
         * oneDNN products gain most from long chunks, keeps them in bf16:
         * about 52 MB (512 rows) */
        long budget = bf16 ? 104L << 20 : 40L << 20;
        long want = budget / ((long)(V > 0 ? V : 1) * (long)sizeof(float));
        r = want < 64 ? 64 : want > 1024 ? 1024 : (int)want;
        r = r / 64 * 64; /* whole 16-column blocks, and chunks that divide 64 x 2^k rows */
    }
    return r < N ? r : N;
}

int xsa_nn_lmhead_vblock(int R, int V)
{
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("XSA_LMHEAD_VBLOCK");
        env = e && atoi(e) > 0 ? atoi(e) : 0;
    }
    long vb = env;
    if (vb == 0) {
        vb = (4L << 20) / ((long)(R > 0 ? R : 1) * (long)sizeof(float));
        vb = vb < 64 ? 64 : vb / 64 * 64;
    }
    return vb < V ? (int)vb : V;
}

/* The scratch, carved in one place for the size and the use. float32: the
 * exponentials in place of the logits, [V,R] (without a gradient each
 * thread uses one block of it), each block's product for dinp [nblk,R,C]
 * (summed in block order once the threads are done, so that the sum does
 * not depend on which thread ran which block) and per thread the rows
 * scaled by a block's factors [R,C]. bf16: the exponentials as bf16 [V,R],
 * and per thread its own block of logits and rows (each thread runs whole
 * blocks of the vocabulary, see lmhead_bf16). */
typedef struct {
    float *lb, *dt, *dx, *xs; /* [VB,R] logits of one block; [R,C] x 3 */
    uint16_t *xs16;           /* [R,C] */
} ce_own;

#define CE_MAX_OWN (CE_MAX_THREADS - 1) /* bf16 slot 0 stays oneDNN's threaded one */

typedef struct {
    float *et;       /* float32: [V,R] */
    float *dtb;      /* float32: [nblk,R,C] each block's e_b^T wte_b */
    float *xs[CE_MAX_THREADS]; /* float32: per thread [R,C] rows scaled by a block's factors */
    int nf32;        /* float32: threads (xs) */
    float *bmax, *fac, *lt; /* [nblk,R] maxima and factors; [R] target logits */
    double *bsum;    /* [nblk,R] */
    uint16_t *et16, *x16; /* bf16: the exponentials [V,R]; the rows */
    ce_own own[CE_MAX_OWN];
    int nown;
    size_t floats;
} ce_scratch;

static int ce_own_threads(int nthreads, int nblk)
{
    int t = nthreads < 1 ? 1 : nthreads > CE_MAX_OWN ? CE_MAX_OWN : nthreads;
    return t < nblk ? t : nblk;
}

static int ce_f32_threads(int nthreads, int nblk)
{
    int t = nthreads < 1 ? 1 : nthreads > CE_MAX_THREADS ? CE_MAX_THREADS : nthreads;
    return t < nblk ? t : nblk;
}

static ce_scratch ce_layout(float *s, int R, int C, int V, int bf16, int nthreads)
{
    int VB = xsa_nn_lmhead_vblock(R, V), nblk = (V + VB - 1) / VB;
    size_t RC = (size_t)R * C, off = 0;
    ce_scratch p;
    memset(&p, 0, sizeof p);
#define CE_TAKE(ptr, type, nfl)                                   \
    do {                                                          \
        ptr = s ? (type *)(void *)(s + off) : NULL;               \
        off += (nfl);                                             \
    } while (0)
    if (!bf16) {
        CE_TAKE(p.et, float, (size_t)V * R);
        CE_TAKE(p.dtb, float, (size_t)nblk * RC);
        p.nf32 = ce_f32_threads(nthreads, nblk);
        for (int k = 0; k < p.nf32; k++) CE_TAKE(p.xs[k], float, RC);
    }
    CE_TAKE(p.bmax, float, (size_t)nblk * R);
    CE_TAKE(p.fac, float, (size_t)nblk * R);
    CE_TAKE(p.lt, float, (size_t)R);
    off += off & 1; /* doubles on 8 bytes (the scratch itself is malloc'ed) */
    CE_TAKE(p.bsum, double, 2 * (size_t)nblk * R);
    if (bf16) {
        CE_TAKE(p.et16, uint16_t, ((size_t)V * R + 1) / 2);
        CE_TAKE(p.x16, uint16_t, (RC + 1) / 2);
        p.nown = ce_own_threads(nthreads, nblk);
        for (int k = 0; k < p.nown; k++) {
            CE_TAKE(p.own[k].lb, float, (size_t)VB * R);
            CE_TAKE(p.own[k].dt, float, RC);
            CE_TAKE(p.own[k].dx, float, RC);
            CE_TAKE(p.own[k].xs, float, RC);
            CE_TAKE(p.own[k].xs16, uint16_t, (RC + 1) / 2);
            off += off & 1;
        }
    }
#undef CE_TAKE
    p.floats = off;
    return p;
}

size_t xsa_nn_lmhead_ce_scratch_floats(int N, int C, int V, int rows, int bf16, int nthreads)
{
    return ce_layout(NULL, rows < N ? rows : N, C, V, bf16, nthreads).floats;
}

/* ---- bf16: each thread runs whole blocks of the vocabulary ---------------
 * oneDNN parallelises each product over its OpenMP threads, which meet at a
 * barrier when it ends: dozens of block-sized products per chunk then wait
 * on every thread dozens of times, and on a loaded machine each wait can
 * last a scheduler time slice (measured: a step 3x slower than with whole-
 * vocabulary products). So here thread k takes blocks k, k + T, ...: its
 * products run on one thread (its own oneDNN slot), its softmax right
 * after each, and the threads meet once per pass. */
typedef struct {
    const xsa_nn_bf16 *bf;
    int k, nth, phase;               /* blocks k, k + nth, ...; 0 forward, 1 backward */
    int n, C, V, VB, nblk, R, grad, acc;
    const float *x;
    const int32_t *targets;
    const uint16_t *x16;
    ce_scratch *p;
    float *dwte;
    int rc, blocks;
    char err[256];
} bf_job;

static void bf_pass(bf_job *j)
{
    ce_scratch *p = j->p;
    ce_own *o = &p->own[j->k];
    int n = j->n, C = j->C, slot = j->k + 1;
    j->blocks = 0;
    for (int b = j->k; b < j->nblk; b += j->nth) {
        int v0 = b * j->VB, nv = j->V - v0 < j->VB ? j->V - v0 : j->VB;
        const uint16_t *wb = j->bf->wte + (size_t)v0 * C, *eb = p->et16 + (size_t)v0 * n;
        if (j->phase == 0) {
            if (xsa_bf16_gemm_on(j->bf->mm, slot, 1, 0, 1, nv, n, C, wb, C, j->x16, C, 0, o->lb, n) != 0)
                goto fail;
            ce_job cj = {0};
            cj.task = 2;
            cj.r0 = 0;
            cj.r1 = n;
            cj.N = n;
            cj.V = nv;
            cj.v0 = v0;
            cj.chunk = o->lb;
            cj.chunk16 = j->grad ? p->et16 + (size_t)v0 * n : NULL;
            cj.grad = j->grad;
            cj.targets = j->targets;
            cj.bmax = p->bmax + (size_t)b * j->R;
            cj.bsum = p->bsum + (size_t)b * j->R;
            cj.lt = p->lt;
            ce_block(&cj);
        } else {
            if (xsa_bf16_gemm_on(j->bf->mm, slot, 1, 1, 0, n, C, nv, eb, n, wb, C, 0, o->dt, C) != 0)
                goto fail;
            const float *f = p->fac + (size_t)b * j->R;
            for (int i = 0; i < n; i++) {
                float sc = f[i];
                float *di = o->dx + (size_t)i * C, *xo = o->xs + (size_t)i * C;
                const float *ti = o->dt + (size_t)i * C, *xi = j->x + (size_t)i * C;
                if (j->blocks == 0)
                    for (int c = 0; c < C; c++) di[c] = sc * ti[c];
                else
                    for (int c = 0; c < C; c++) di[c] += sc * ti[c];
                for (int c = 0; c < C; c++) xo[c] = sc * xi[c];
            }
            xsa_bf16_from_f32(o->xs16, o->xs, (size_t)n * C);
            if (xsa_bf16_gemm_on(j->bf->mm, slot, 1, 0, 0, nv, C, n, eb, n, o->xs16, C, j->acc,
                                 j->dwte + (size_t)v0 * C, C) != 0)
                goto fail;
        }
        j->blocks++;
    }
    j->rc = 0;
    return;
fail:
    j->rc = -1;
    snprintf(j->err, sizeof j->err, "%s", xsa_last_error());
}

static void *bf_thread(void *arg)
{
    bf_pass(arg);
    return NULL;
}

/* One pass (forward or backward) of a chunk over all blocks, split over the
 * scratch's threads. 0, or -1 with an error. */
static int bf_run(bf_job *proto)
{
    int T = proto->p->nown;
    bf_job jobs[CE_MAX_OWN];
    pthread_t tid[CE_MAX_OWN];
    int started[CE_MAX_OWN] = {0};
    for (int k = 0; k < T; k++) {
        jobs[k] = *proto;
        jobs[k].k = k;
        jobs[k].nth = T;
    }
    for (int k = 1; k < T; k++) started[k] = pthread_create(&tid[k], NULL, bf_thread, &jobs[k]) == 0;
    bf_pass(&jobs[0]);
    for (int k = 1; k < T; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            bf_pass(&jobs[k]);
    }
    for (int k = 0; k < T; k++)
        if (jobs[k].rc != 0) return xsa_error("%s", jobs[k].err);
    return 0;
}

/* ---- float32: each thread runs whole blocks of the vocabulary ------------
 * Thread k takes blocks k, k + T, ...; each block's products run on that
 * thread alone (OpenBLAS stays on one thread, system.c), and every block
 * does the same arithmetic whatever thread runs it; what blocks share (the
 * sum over blocks of dinp) is added in block order after the pass. So the
 * bits do not depend on the thread count, and they are those of one
 * thread. */
typedef struct {
    int k, nth, phase; /* blocks k, k + nth, ...; 0 forward, 1 backward */
    int n, C, V, VB, nblk, R, grad, acc;
    const float *x, *wte;
    const int32_t *targets;
    ce_scratch *p;
    float *dwte;
} f32_job;

static void f32_pass(f32_job *j)
{
    ce_scratch *p = j->p;
    int n = j->n, C = j->C;
    for (int b = j->k; b < j->nblk; b += j->nth) {
        int v0 = b * j->VB, nv = j->V - v0 < j->VB ? j->V - v0 : j->VB;
        const float *wb = j->wte + (size_t)v0 * C;
        if (j->phase == 0) {
            /* the logits, transposed (lb[v][i] = wte[v] . x[i]: OpenBLAS
             * then packs wte as the cheap operand), then the block's
             * softmax statistics while it is in cache; the exponentials
             * stay in place for the gradient. Without one, thread k reuses
             * its slot k (k < nblk, and slot nblk - 1 only when each
             * thread has one block: its own) */
            float *lb = p->et + (size_t)(j->grad ? v0 : j->k * j->VB) * n;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nv, n, C, 1.0f, wb, C, j->x, C,
                        0.0f, lb, n);
            ce_job cj = {0};
            cj.task = 2;
            cj.r0 = 0;
            cj.r1 = n;
            cj.N = n;
            cj.V = nv;
            cj.v0 = v0;
            cj.chunk = lb;
            cj.grad = j->grad;
            cj.targets = j->targets;
            cj.bmax = p->bmax + (size_t)b * j->R;
            cj.bsum = p->bsum + (size_t)b * j->R;
            cj.lt = p->lt;
            ce_block(&cj);
        } else {
            /* e_b^T wte_b for dinp (scaled and summed after the pass), and
             * dwte_b (+)= e_b (fac_b x) */
            const float *eb = p->et + (size_t)v0 * n, *f = p->fac + (size_t)b * j->R;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, C, nv, 1.0f, eb, n, wb, C,
                        0.0f, p->dtb + (size_t)b * j->R * C, C);
            float *xs = p->xs[j->k];
            for (int i = 0; i < n; i++) {
                float sc = f[i], *xo = xs + (size_t)i * C;
                const float *xi = j->x + (size_t)i * C;
                for (int c = 0; c < C; c++) xo[c] = sc * xi[c];
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nv, C, n, 1.0f, eb, n, xs, C,
                        j->acc ? 1.0f : 0.0f, j->dwte + (size_t)v0 * C, C);
        }
    }
}

static void *f32_thread(void *arg)
{
    f32_pass(arg);
    return NULL;
}

/* One pass of a chunk over all blocks, split over the scratch's threads. */
static void f32_run(const f32_job *proto)
{
    int T = proto->p->nf32;
    f32_job jobs[CE_MAX_THREADS];
    pthread_t tid[CE_MAX_THREADS];
    int started[CE_MAX_THREADS] = {0};
    for (int k = 0; k < T; k++) {
        jobs[k] = *proto;
        jobs[k].k = k;
        jobs[k].nth = T;
    }
    for (int k = 1; k < T; k++) started[k] = pthread_create(&tid[k], NULL, f32_thread, &jobs[k]) == 0;
    f32_pass(&jobs[0]);
    for (int k = 1; k < T; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            f32_pass(&jobs[k]); /* no thread: here, into its own xs */
    }
}

int xsa_nn_lmhead_ce(double *loss, float *dinp, float *dwte, float *losses, float *scratch,
                     const float *inp, const float *wte, const int32_t *targets, int N, int C,
                     int V, int rows, int nthreads, const xsa_nn_bf16 *bf)
{
    int grad = dinp && dwte;
    int R = rows < N ? rows : N;
    int VB = xsa_nn_lmhead_vblock(R, V), nblk = (V + VB - 1) / VB;
    ce_scratch p = ce_layout(scratch, R, C, V, bf != NULL, nthreads);
    float g = 1.0f / (float)N;
    double total = 0.0;
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        const float *x = inp + (size_t)r0 * C;
        bf_job bj;
        memset(&bj, 0, sizeof bj);
        f32_job fj;
        memset(&fj, 0, sizeof fj);
        if (bf) {
            xsa_bf16_from_f32(p.x16, x, (size_t)n * C);
            bj.bf = bf;
            bj.n = n;
            bj.C = C;
            bj.V = V;
            bj.VB = VB;
            bj.nblk = nblk;
            bj.R = R;
            bj.grad = grad;
            bj.acc = r0 > 0;
            bj.x = x;
            bj.targets = targets + r0;
            bj.x16 = p.x16;
            bj.p = &p;
            bj.dwte = dwte;
            if (bf_run(&bj) != 0) return -1;
        } else {
            fj.n = n;
            fj.C = C;
            fj.V = V;
            fj.VB = VB;
            fj.nblk = nblk;
            fj.R = R;
            fj.grad = grad;
            fj.acc = r0 > 0;
            fj.x = x;
            fj.wte = wte;
            fj.targets = targets + r0;
            fj.p = &p;
            fj.dwte = dwte;
            f32_run(&fj);
        }
        /* join the blocks: lse = M + log sum_b s_b e^(m_b - M); block b's
         * probabilities are its exponentials times e^(m_b - lse) */
        for (int i = 0; i < n; i++) {
            double M = -INFINITY, S = 0.0;
            for (int b = 0; b < nblk; b++)
                if (p.bmax[(size_t)b * R + i] > M) M = p.bmax[(size_t)b * R + i];
            for (int b = 0; b < nblk; b++)
                S += p.bsum[(size_t)b * R + i] * exp(p.bmax[(size_t)b * R + i] - M);
            double lse = log(S) + M, l = lse - p.lt[i];
            if (losses) losses[r0 + i] = (float)l;
            total += l;
            if (grad)
                for (int b = 0; b < nblk; b++)
                    p.fac[(size_t)b * R + i] = (float)(g * exp(p.bmax[(size_t)b * R + i] - lse));
        }
        if (!grad) continue;
        /* per block: dinp rows += fac (e_b^T wte_b), dwte_b (+)= e_b (fac x) */
        float *d = dinp + (size_t)r0 * C;
        if (bf) {
            bj.phase = 1;
            if (bf_run(&bj) != 0) return -1;
            memset(d, 0, (size_t)n * C * sizeof(float));
            for (int k = 0; k < p.nown; k++) {
                const float *dk = p.own[k].dx;
                for (size_t i = 0; i < (size_t)n * C; i++) d[i] += dk[i];
            }
        } else {
            fj.phase = 1;
            f32_run(&fj);
            /* dinp rows = sum over the blocks, in block order, of fac_b e_b^T wte_b */
            for (int b = 0; b < nblk; b++) {
                const float *f = p.fac + (size_t)b * R, *t = p.dtb + (size_t)b * R * C;
                for (int i = 0; i < n; i++) {
                    float sc = f[i], *di = d + (size_t)i * C;
                    const float *ti = t + (size_t)i * C;
                    if (b == 0)
                        for (int c = 0; c < C; c++) di[c] = sc * ti[c];
                    else
                        for (int c = 0; c < C; c++) di[c] += sc * ti[c];
                }
            }
        }
        for (int i = 0; i < n; i++) {
            const float *w = wte + (size_t)targets[r0 + i] * C;
            float *di = d + (size_t)i * C;
            for (int c = 0; c < C; c++) di[c] -= g * w[c];
        }
    }
    if (grad)
        for (int i = 0; i < N; i++) {
            const float *xi = inp + (size_t)i * C;
            float *dw = dwte + (size_t)targets[i] * C;
            for (int c = 0; c < C; c++) dw[c] -= g * xi[c];
        }
    *loss = total / N;
    return 0;
}
