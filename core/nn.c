/*
 * nn.c: the fused layer kernels declared in nn.h (shapes and conventions
 * there), up to the last layer norm: embedding, linear, layer norm, GELU,
 * residual, attention. Matrix products go through xsa_sgemm (gemm.h); the
 * head-size loops of attention (vec.h) and the GELU (AVX-512) are
 * vectorised over simd.h; the rest are plain loops, which at the study's
 * sizes cost little next to the lm_head. The tied lm_head and its loss,
 * the hottest loop outside the products, are lmhead.c's. With two threads
 * (xsa_threads), attention and, on oneDNN, the linear forward run their
 * rows in two halves, with the bits of one thread (below).
 *
 * Non-goals: strided inputs, float64, dropout, kernels for other layers.
 */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "nn.h"
#include "simd.h"
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

typedef struct {
    float *out;
    const float *inp, *w, *b;
    int N, C, OC;
} linear_fw_job;

static void *linear_rows(void *arg)
{
    const linear_fw_job *j = arg;
    float beta = 0.0f;
    if (j->b) {
        for (int n = 0; n < j->N; n++) memcpy(j->out + (size_t)n * j->OC, j->b, (size_t)j->OC * sizeof(float));
        beta = 1.0f;
    }
    xsa_sgemm(0, 0, j->N, j->OC, j->C, 1.0f, j->inp, j->C, j->w, j->OC, beta, j->out, j->OC);
    return NULL;
}

/* Products of at least this many multiply-adds run on two threads, each its
 * own call: dinp's and dw's products side by side in the backward, and in
 * the forward the two halves of the rows. Each product stays one call on
 * one thread (OpenBLAS's own threads would change its bits, see system.c).
 * The row halves only with oneDNN: dnnl_sgemm gives each row the same bits
 * whatever the row count (test_nn checks it); OpenBLAS does not (measured:
 * a split changed the bits of every shape of the study's blocks), so it
 * keeps one call. */
#define LINEAR_PAIR_MIN (1L << 20)

void xsa_nn_linear_forward(float *out, const float *inp, const float *w,
                           const float *b, int N, int C, int OC)
{
    int h = (N / 2 + 15) / 16 * 16;
    linear_fw_job halves[2] = {{out, inp, w, b, h, C, OC},
                               {out + (size_t)h * OC, inp + (size_t)h * C, w, b, N - h, C, OC}};
    linear_fw_job whole = {out, inp, w, b, N, C, OC};
    if (h > 0 && h < N && (long)N * C * OC >= LINEAR_PAIR_MIN && xsa_threads() > 1 &&
        xsa_gemm_get() == XSA_GEMM_DNNL)
        xsa_run_split(halves, sizeof halves[0], 2, linear_rows);
    else
        linear_rows(&whole);
}

/* The backward's two products, dinp's and dw's, side by side: job k runs
 * product k (each one call on one thread, as in the forward). */
typedef struct {
    int which; /* 0: dinp, 1: dw */
    float *dinp, *dw;
    const float *dout, *inp, *w;
    int N, C, OC;
} linear_bw_job;

static void *linear_bw(void *arg)
{
    const linear_bw_job *j = arg;
    if (j->which == 0)
        xsa_sgemm(0, 1, j->N, j->C, j->OC, 1.0f, j->dout, j->OC, j->w, j->OC, 1.0f, j->dinp, j->C);
    else
        xsa_sgemm(1, 0, j->C, j->OC, j->N, 1.0f, j->inp, j->C, j->dout, j->OC, 1.0f, j->dw, j->OC);
    return NULL;
}

void xsa_nn_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC)
{
    linear_bw_job jobs[2] = {{0, dinp, dw, dout, inp, w, N, C, OC}};
    jobs[1] = jobs[0];
    jobs[1].which = 1;
    if (dinp && dw && (long)N * C * OC >= LINEAR_PAIR_MIN && xsa_threads() > 1) {
        xsa_run_split(jobs, sizeof jobs[0], 2, linear_bw);
    } else {
        if (dinp) linear_bw(&jobs[0]);
        if (dw) linear_bw(&jobs[1]);
    }
    if (db)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) db[o] += d[o];
        }
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

/* Phi(x) = 0.5 (1 + erf(x / sqrt 2)), the normal CDF, through
 * erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z = |x|/sqrt 2
 * (the Chebyshev fit of Numerical Recipes' erfcc: fractional error below
 * 1.2e-7 for every z >= 0, so Phi keeps its relative accuracy in the
 * negative tail, where 1 + erf would cancel). In float, the rounding of z^2
 * adds about 1.2e-7 z^2 relative error: measured max 1.8e-6 for gelu over
 * values above 1e-7 in magnitude (tests/test_nn.c). The vector path where
 * XSA_SIMD_GELU (simd.h); the scalar loops use libm's erfcf. */
static inline vf phi_v(vf x)
{
    vf z = vf_mul(vf_abs(x), vf_set1((float)INV_SQRT2));
    vf t = vf_div(vf_set1(1.0f), vf_fmadd(z, vf_set1(0.5f), vf_set1(1.0f)));
    vf p = vf_set1(0.17087277f);
    p = vf_fmadd(p, t, vf_set1(-0.82215223f));
    p = vf_fmadd(p, t, vf_set1(1.48851587f));
    p = vf_fmadd(p, t, vf_set1(-1.13520398f));
    p = vf_fmadd(p, t, vf_set1(0.27886807f));
    p = vf_fmadd(p, t, vf_set1(-0.18628806f));
    p = vf_fmadd(p, t, vf_set1(0.09678418f));
    p = vf_fmadd(p, t, vf_set1(0.37409196f));
    p = vf_fmadd(p, t, vf_set1(1.00002368f));
    p = vf_fmadd(p, t, vf_set1(-1.26551223f));
    p = vf_fnmadd(z, z, p);
    vf half_erfc = vf_mul(vf_mul(t, vf_exp(p)), vf_set1(0.5f));
    return vf_select(vf_lt(x, vf_zero()), half_erfc, vf_sub(vf_set1(1.0f), half_erfc));
}

void xsa_nn_gelu_forward(float *out, const float *inp, size_t count)
{
    size_t i = 0;
    for (; XSA_SIMD_GELU && i + VF_W <= count; i += VF_W) {
        vf x = vf_load(inp + i);
        vf_store(out + i, vf_mul(x, phi_v(x)));
    }
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
    /* gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi) */
    for (; XSA_SIMD_GELU && i + VF_W <= count; i += VF_W) {
        vf x = vf_load(inp + i);
        vf pdf = vf_mul(vf_exp(vf_mul(vf_mul(x, x), vf_set1(-0.5f))), vf_set1((float)INV_SQRT2PI));
        vf d = vf_fmadd(x, pdf, phi_v(x));
        vf_store(dinp + i, vf_fmadd(vf_load(dout + i), d, vf_load(dinp + i)));
    }
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

/* The attention's arguments, and the batch rows [b0, b1) one thread runs:
 * every value a batch row writes (its att rows, its y and out rows, its
 * columns of dqkv) is its own, so the rows split over two threads give the
 * bits of one. datt: this thread's T floats of the backward's scratch. */
typedef struct {
    float *out, *y, *att_out, *dqkv, *dyw, *datt;
    const float *qkv, *att, *dout, *ysaved;
    int B, T, C, NH, b0, b1;
    float lambda;
} attn_job;

/* At least this many query-key products (B T^2 NH / 2) before a second
 * thread pays for itself. */
#define ATTN_SPLIT_MIN (1L << 16)

/* Runs fn over batch rows [0, B/2) on this thread and [B/2, B) on another
 * when there are two threads, B >= 2 and the work is large enough. */
static void attn_run(attn_job *j, void *(*fn)(void *), float *datt2)
{
    attn_job halves[2] = {*j, *j};
    if (j->B >= 2 && (long)j->B * j->T * j->T * j->NH / 2 >= ATTN_SPLIT_MIN && xsa_threads() > 1) {
        halves[0].b1 = halves[1].b0 = j->B / 2;
        halves[1].datt = datt2;
        xsa_run_split(halves, sizeof halves[0], 2, fn);
    } else {
        fn(j);
    }
}

static void *attn_forward_rows(void *arg)
{
    const attn_job *j = arg;
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    const float *qkv = j->qkv;
    float scale = 1.0f / sqrtf((float)HS);
    int xsa = j->lambda != 0.0f;
    float *ydst = xsa ? j->y : j->out;
    for (int b = j->b0; b < j->b1; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                float *a = j->att_out + (((size_t)b * NH + h) * T + t) * T;
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
                    xsa_nn_xsa_project(j->out + ((size_t)b * T + t) * C + h * HS, yo,
                                       qkv + ((size_t)b * T + t) * C3 + 2 * C + h * HS, HS, j->lambda);
            }
    return NULL;
}

void xsa_nn_attention_forward(float *out, float *y, float *att, const float *qkv,
                              int B, int T, int C, int NH, float lambda,
                              double *probe)
{
    attn_job j = {.out = out, .y = y, .att_out = att, .qkv = qkv, .B = B, .T = T, .C = C, .NH = NH,
                  .b0 = 0, .b1 = B, .lambda = lambda};
    attn_run(&j, attn_forward_rows, NULL);
    if (probe) attention_probe(probe, out, lambda != 0.0f ? y : out, att, qkv, B, T, C, NH);
}

size_t xsa_nn_attention_scratch_floats(int B, int T, int C, int NH)
{
    (void)NH;
    return (size_t)B * T * C + 2 * (size_t)T; /* dY through the projection; datt per thread */
}

static void *attn_backward_rows(void *arg)
{
    const attn_job *j = arg;
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    const float *qkv = j->qkv, *dy = j->dout;
    float *dqkv = j->dqkv, *datt = j->datt, lambda = j->lambda;
    float scale = 1.0f / sqrtf((float)HS);
    if (lambda != 0.0f) {
        /* Through the projection: with s = Y.Vn, g = dZ.Vn,
         *   dY  = dZ - lambda g Vn
         *   dVn = -lambda (s dZ + g Y)
         *   dV  = (dVn - (dVn.Vn) Vn) / |V|   (or dVn / eps when |V| <= eps) */
        for (size_t bt = (size_t)j->b0 * T; bt < (size_t)j->b1 * T; bt++)
            for (int h = 0; h < NH; h++) {
                const float *v = qkv + bt * C3 + 2 * C + h * HS;
                float *dv = dqkv + bt * C3 + 2 * C + h * HS;
                const float *yy = j->ysaved + bt * C + h * HS;
                const float *dz = j->dout + bt * C + h * HS;
                float *dyo = j->dyw + bt * C + h * HS;
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
        dy = j->dyw;
    }
    for (int b = j->b0; b < j->b1; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *a = j->att + (((size_t)b * NH + h) * T + t) * T;
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
    return NULL;
}

void xsa_nn_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, const float *y,
                               int B, int T, int C, int NH, float lambda)
{
    float *datt = scratch + (size_t)B * T * C;
    attn_job j = {.dqkv = dqkv, .dyw = scratch, .datt = datt, .qkv = qkv, .dout = dout,
                  .ysaved = y, .att = att, .B = B, .T = T, .C = C, .NH = NH, .b0 = 0,
                  .b1 = B, .lambda = lambda};
    attn_run(&j, attn_backward_rows, datt + T);
}
