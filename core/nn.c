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

#include "attention.h"
#include "attention_impl.h"
#include "gemm.h"
#include "nn.h"
#include "simd.h"
#include "system.h"
#include "vec.h"

/* ---- two halves ----------------------------------------------------------
 * The embedding and the GELU run in two halves (xsa_run_halves) when there
 * are two threads and enough work: at the study's sizes they were the
 * longest stretches of a training step on one thread (0.6-0.8 ms a GELU
 * at 2048 x 512). Each element's arithmetic is the same on either thread,
 * so the bits are one thread's. */
#define HALVES_MIN (1L << 16) /* elements (xsa_run_halves, system.h) */

/* ---- embedding ---------------------------------------------------------- */

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int32_t *inp;
    int T, C, r0, r1, c0, c1; /* rows [r0, r1) of B*T; columns [c0, c1) */
} emb_job;

static void *emb_forward_rows(void *arg)
{
    const emb_job *j = arg;
    int C = j->C;
    for (int r = j->r0; r < j->r1; r++) {
        float *o = j->out + (size_t)r * C;
        const float *te = j->wte + (size_t)j->inp[r] * C, *pe = j->wpe + (size_t)(r % j->T) * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
    return NULL;
}

/* Columns [c0, c1) of every row, the rows in order: a token's gradient row
 * takes its positions in the same order whatever the columns' split. */
static void *emb_backward_cols(void *arg)
{
    const emb_job *j = arg;
    int C = j->C;
    for (int r = j->r0; r < j->r1; r++) {
        const float *d = j->dout + (size_t)r * C;
        if (j->dwte) {
            float *g = j->dwte + (size_t)j->inp[r] * C;
            for (int c = j->c0; c < j->c1; c++) g[c] += d[c];
        }
        if (j->dwpe) {
            float *g = j->dwpe + (size_t)(r % j->T) * C;
            for (int c = j->c0; c < j->c1; c++) g[c] += d[c];
        }
    }
    return NULL;
}

void xsa_nn_embedding_forward(float *out, const int32_t *inp, const float *wte,
                              const float *wpe, int B, int T, int C)
{
    int N = B * T;
    emb_job j[2] = {{.out = out, .wte = wte, .wpe = wpe, .inp = inp, .T = T, .C = C, .r1 = N / 2}};
    j[1] = j[0];
    j[1].r0 = N / 2;
    j[1].r1 = N;
    xsa_run_halves(j, sizeof j[0], (long)N * C >= HALVES_MIN, emb_forward_rows);
}

void xsa_nn_embedding_backward(float *dwte, float *dwpe, const float *dout,
                               const int32_t *inp, int B, int T, int C)
{
    int N = B * T, h = C / 2 / 16 * 16;
    emb_job j[2] = {{.dwte = dwte, .dwpe = dwpe, .dout = dout, .inp = inp, .T = T, .C = C, .r1 = N, .c1 = h}};
    j[1] = j[0];
    j[1].c0 = h;
    j[1].c1 = C;
    xsa_run_halves(j, sizeof j[0], (long)N * C >= HALVES_MIN, emb_backward_cols);
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
 * The row halves only with oneDNN, and then at every thread count (one
 * after the other on one thread), so the calls, and with them the bits,
 * never depend on the thread count: neither library gives a row the same
 * bits at every row count (OpenBLAS: a split changed the bits of every
 * shape of the study's blocks; oneDNN's AVX2 kernels, on the Zen 3: 64
 * rows against 2 x 32 at N 256, K 64 changed 4 rows, and most splits of
 * under 160 rows change some), so OpenBLAS keeps one call. */
#define LINEAR_PAIR_MIN (1L << 20)

void xsa_nn_linear_forward(float *out, const float *inp, const float *w,
                           const float *b, int N, int C, int OC)
{
    int h = (N / 2 + 15) / 16 * 16;
    linear_fw_job halves[2] = {{out, inp, w, b, h, C, OC},
                               {out + (size_t)h * OC, inp + (size_t)h * C, w, b, N - h, C, OC}};
    linear_fw_job whole = {out, inp, w, b, N, C, OC};
    if (h > 0 && h < N && (long)N * C * OC >= LINEAR_PAIR_MIN && xsa_gemm_get() == XSA_GEMM_DNNL)
        xsa_run_halves(halves, sizeof halves[0], 1, linear_rows);
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

/* Each row's statistics are sums in double in column order, a chain of
 * dependent additions (4 cycles each): one row at a time, the chains were
 * most of the cost (0.54 ms forward, 0.51 backward at 2048 x 128 on Zen 5;
 * now 0.12 and 0.16, with the vector loops below). LN_ROWS rows go down
 * their columns side by side, each row's sum in the same order as alone:
 * the same bits, the chains overlapped. Inlined with g a constant for full
 * groups, with g = 1 for the rest. */
#define LN_ROWS 8

/* A row's output. The difference and its scaling are in double, which
 * simd.h does not have; runs of 16 columns with restrict operands are what
 * GCC's -O2 (its "very cheap" cost model) vectorises as they are. */
static void ln_out(float *restrict o, const float *restrict x, const float *restrict w,
                   const float *restrict b, double m, double r, int C)
{
    int c = 0;
    for (; c + 16 <= C; c += 16)
        for (int i = 0; i < 16; i++) o[c + i] = (float)((x[c + i] - m) * r) * w[c + i] + b[c + i];
    for (; c < C; c++) o[c] = (float)((x[c] - m) * r) * w[c] + b[c];
}

XSA_ALWAYS_INLINE void ln_forward_rows(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, int n0, int g, int C)
{
    double s[LN_ROWS] = {0}, v[LN_ROWS] = {0}, m[LN_ROWS], r[LN_ROWS];
    const float *x = inp + (size_t)n0 * C;
    for (int c = 0; c < C; c++)
        for (int k = 0; k < g; k++) s[k] += x[(size_t)k * C + c];
    for (int k = 0; k < g; k++) m[k] = s[k] / C;
    for (int c = 0; c < C; c++)
        for (int k = 0; k < g; k++) {
            double d = x[(size_t)k * C + c] - m[k];
            v[k] += d * d;
        }
    for (int k = 0; k < g; k++) {
        r[k] = 1.0 / sqrt(v[k] / C + (double)XSA_NN_LN_EPS);
        const float *xk = x + (size_t)k * C;
        ln_out(out + ((size_t)n0 + k) * C, xk, w, b, m[k], r[k], C);
        mean[n0 + k] = (float)m[k];
        rstd[n0 + k] = (float)r[k];
    }
}

void xsa_nn_layernorm_forward(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C)
{
    int n = 0;
    for (; n + LN_ROWS <= N; n += LN_ROWS) ln_forward_rows(out, mean, rstd, inp, w, b, n, LN_ROWS, C);
    for (; n < N; n++) ln_forward_rows(out, mean, rstd, inp, w, b, n, 1, C);
}

/* The backward's per-row updates: exact vector bodies (simd.h), each lane
 * the scalar operations in the scalar order, no multiply-add fused (at -O2
 * GCC left these loops scalar). */
static void ln_dw(float *dw, const float *x, const float *d, float m, float r, int C)
{
    int c = 0;
    vf vm = vf_set1(m), vr = vf_set1(r);
    for (; c + VF_W <= C; c += VF_W) {
        vf norm = vf_mul(vf_sub(vf_load(x + c), vm), vr);
        vf_store(dw + c, vf_add(vf_load(dw + c), vf_mul(norm, vf_load(d + c))));
    }
    for (; c < C; c++) dw[c] += ((x[c] - m) * r) * d[c];
}

static void ln_dinp(float *di, const float *x, const float *d, const float *w, float m, float r,
                    float dmean, float dnmean, int C)
{
    int c = 0;
    vf vm = vf_set1(m), vr = vf_set1(r), vdm = vf_set1(dmean), vdn = vf_set1(dnmean);
    for (; c + VF_W <= C; c += VF_W) {
        vf norm = vf_mul(vf_sub(vf_load(x + c), vm), vr);
        vf t = vf_sub(vf_sub(vf_mul(vf_load(w + c), vf_load(d + c)), vdm), vf_mul(norm, vdn));
        vf_store(di + c, vf_add(vf_load(di + c), vf_mul(t, vr)));
    }
    for (; c < C; c++) di[c] += (w[c] * d[c] - dmean - ((x[c] - m) * r) * dnmean) * r;
}

/* dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)); the
 * means' sums side by side over g rows as in the forward, then each row in
 * turn, so that dw and db take their rows in row order */
XSA_ALWAYS_INLINE void ln_backward_rows(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, const float *mean,
                                const float *rstd, int n0, int g, int C)
{
    double dsum[LN_ROWS] = {0}, dnsum[LN_ROWS] = {0};
    float mk[LN_ROWS], rk[LN_ROWS];
    const float *x = inp + (size_t)n0 * C, *d = dout + (size_t)n0 * C;
    for (int k = 0; k < g; k++) {
        mk[k] = mean[n0 + k];
        rk[k] = rstd[n0 + k];
    }
    for (int c = 0; c < C; c++)
        for (int k = 0; k < g; k++) {
            size_t i = (size_t)k * C + c;
            float norm = (x[i] - mk[k]) * rk[k];
            float dn = w[c] * d[i];
            dsum[k] += dn;
            dnsum[k] += (double)dn * norm;
        }
    for (int k = 0; k < g; k++) {
        const float *xk = x + (size_t)k * C, *dk = d + (size_t)k * C;
        float m = mk[k], r = rk[k];
        float dmean = (float)(dsum[k] / C), dnmean = (float)(dnsum[k] / C);
        if (db) row_add_scaled(db, 1.0f, dk, C, 0); /* 1 x d is d: db += d */
        if (dw) ln_dw(dw, xk, dk, m, r, C);
        if (dinp) ln_dinp(dinp + ((size_t)n0 + k) * C, xk, dk, w, m, r, dmean, dnmean, C);
    }
}

void xsa_nn_layernorm_backward(float *dinp, float *dw, float *db,
                               const float *dout, const float *inp,
                               const float *w, const float *mean,
                               const float *rstd, int N, int C)
{
    int n = 0;
    for (; n + LN_ROWS <= N; n += LN_ROWS)
        ln_backward_rows(dinp, dw, db, dout, inp, w, mean, rstd, n, LN_ROWS, C);
    for (; n < N; n++) ln_backward_rows(dinp, dw, db, dout, inp, w, mean, rstd, n, 1, C);
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

static void gelu_forward_run(float *out, const float *inp, size_t count)
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

static void gelu_backward_run(float *dinp, const float *inp, const float *dout, size_t count)
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

/* The halves split at a multiple of 64 elements, so that every element
 * takes the same path (vector body or scalar tail) as in one call. */
typedef struct {
    float *out;
    const float *inp, *dout; /* dout: the backward */
    size_t count;
} gelu_job;

static void *gelu_half(void *arg)
{
    const gelu_job *j = arg;
    if (j->dout) gelu_backward_run(j->out, j->inp, j->dout, j->count);
    else gelu_forward_run(j->out, j->inp, j->count);
    return NULL;
}

static void gelu_split(float *out, const float *inp, const float *dout, size_t count)
{
    size_t h = count / 2 / 64 * 64;
    gelu_job j[2] = {{out, inp, dout, h}, {out + h, inp + h, dout ? dout + h : NULL, count - h}};
    xsa_run_halves(j, sizeof j[0], count >= (size_t)HALVES_MIN, gelu_half);
}

void xsa_nn_gelu_forward(float *out, const float *inp, size_t count)
{
    gelu_split(out, inp, NULL, count);
}

void xsa_nn_gelu_backward(float *dinp, const float *inp, const float *dout, size_t count)
{
    gelu_split(dinp, inp, dout, count);
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
                sa += T > XSA_NN_ATTN_FULL_MAX
                          ? xsa_nn_attention_blocked_weight(qkv, att, b, h, t, t, T, C, NH)
                          : att[(((size_t)b * NH + h) * T + t) * T + t];
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

void xsa_nn_probe_post(double *probe, const float *z, const float *qkv, int B, int T, int C, int NH)
{
    int HS = C / NH, C3 = 3 * C;
    for (int h = 0; h < NH; h++) {
        double post = 0.0, post1 = 0.0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t o = ((size_t)b * T + t) * C + h * HS;
                double cz = cosine(z + o, qkv + ((size_t)b * T + t) * C3 + 2 * C + h * HS, HS);
                post += cz;
                if (t > 0) post1 += cz;
            }
        double *p = probe + (size_t)h * XSA_NN_PROBE_N;
        p[XSA_NN_PROBE_POST_COS] = post / ((double)B * T);
        p[XSA_NN_PROBE_POST_COS1] = T > 1 ? post1 / ((double)B * (T - 1)) : 0.0;
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
    const xsa_attention_variant *var;
    int B, T, C, NH, b0, b1;
    float lambda;
} attn_job;

/* At least this many query-key products (B T^2 NH / 2) before a second
 * thread pays for itself. */
#define ATTN_SPLIT_MIN (1L << 16)

/* Runs fn over batch rows [0, B/2) and [B/2, B), on two threads when
 * there are two, B >= 2 and the work is large enough (xsa_run_halves);
 * datt2: the second half's scratch row. */
static void attn_run(attn_job *j, void *(*fn)(void *), float *datt2)
{
    attn_job halves[2] = {*j, *j};
    halves[0].b1 = halves[1].b0 = j->B / 2;
    halves[1].datt = datt2;
    xsa_run_halves(halves, sizeof halves[0], j->B >= 2 && (long)j->B * j->T * j->T * j->NH / 2 >= ATTN_SPLIT_MIN,
                   fn);
}

static void *attn_forward_rows(void *arg)
{
    const attn_job *j = arg;
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    float *ydst = j->var->forward ? j->y : j->out;
    for (int b = j->b0; b < j->b1; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *base = j->qkv + (size_t)b * T * C3 + h * HS;
                float *a = j->att_out + (((size_t)b * NH + h) * T + t) * T;
                float *yo = ydst + ((size_t)b * T + t) * C + h * HS;
                attention_row(a, yo, base + (size_t)t * C3, base + C, C3, base + 2 * C, C3, t + 1, HS,
                              scale);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                if (j->var->forward)
                    j->var->forward(j->out + ((size_t)b * T + t) * C + h * HS, yo,
                                    base + (size_t)t * C3 + 2 * C, HS, j->lambda);
            }
    return NULL;
}

size_t xsa_nn_attention_saved_floats(int B, int T, int C, int NH)
{
    if (T > XSA_NN_ATTN_FULL_MAX) return xsa_nn_attention_blocked_saved_floats(B, T, C, NH);
    return (size_t)B * NH * T * T;
}

/* the variant nn.h's lambda names: 0 is SA */
static const xsa_attention_variant *by_lambda(float lambda)
{
    return lambda != 0.0f ? &xsa_attention_xsa : &xsa_attention_sa;
}

void xsa_nn_attention_forward_v(const xsa_attention_variant *v, float lambda, float *out, float *y,
                                float *att, const float *qkv, int B, int T, int C, int NH,
                                double *probe)
{
    if (T > XSA_NN_ATTN_FULL_MAX) {
        xsa_nn_attention_blocked_forward(v, lambda, out, y, att, qkv, B, T, C, NH);
        if (probe) attention_probe(probe, out, y, att, qkv, B, T, C, NH);
        return;
    }
    attn_job j = {.out = out, .y = y, .att_out = att, .qkv = qkv, .var = v, .B = B, .T = T, .C = C,
                  .NH = NH, .b0 = 0, .b1 = B, .lambda = lambda};
    attn_run(&j, attn_forward_rows, NULL);
    if (probe) attention_probe(probe, out, v->forward ? y : out, att, qkv, B, T, C, NH);
}

void xsa_nn_attention_forward(float *out, float *y, float *att, const float *qkv,
                              int B, int T, int C, int NH, float lambda,
                              double *probe)
{
    xsa_nn_attention_forward_v(by_lambda(lambda), lambda, out, y, att, qkv, B, T, C, NH, probe);
}

size_t xsa_nn_attention_scratch_floats(int B, int T, int C, int NH)
{
    if (T > XSA_NN_ATTN_FULL_MAX) return xsa_nn_attention_blocked_scratch_floats(B, T, C, NH);
    return (size_t)B * T * C + 2 * (size_t)T; /* dY through the projection; datt per thread */
}

/* XSA's projection backward over rows [r0, r1) of B*T (attention.h) */
void xsa_nn_xsa_project_backward(float *dyw, float *dqkv, const float *dz_all, const float *ysaved,
                                 const float *qkv, size_t r0, size_t r1, int C, int NH, float lambda)
{
    int HS = C / NH, C3 = 3 * C;
    /* Through the projection: with s = Y.Vn, g = dZ.Vn,
     *   dY  = dZ - lambda g Vn
     *   dVn = -lambda (s dZ + g Y)
     *   dV  = (dVn - (dVn.Vn) Vn) / |V|   (or dVn / eps when |V| <= eps) */
    for (size_t bt = r0; bt < r1; bt++)
        for (int h = 0; h < NH; h++) {
            const float *v = qkv + bt * C3 + 2 * C + h * HS;
            float *dv = dqkv + bt * C3 + 2 * C + h * HS;
            const float *yy = ysaved + bt * C + h * HS;
            const float *dz = dz_all + bt * C + h * HS;
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
}

static void *variant_backward_half(void *arg)
{
    const attn_job *j = arg;
    j->var->backward(j->dyw, j->dqkv, j->dout, j->ysaved, j->qkv, (size_t)j->b0, (size_t)j->b1, j->C,
                     j->NH, j->lambda);
    return NULL;
}

void xsa_attention_backward_split(const xsa_attention_variant *v, float lambda, float *dyw,
                                  float *dqkv, const float *dz, const float *y, const float *qkv,
                                  int N, int C, int NH)
{
    /* b0, b1: rows of N here; each row's arithmetic is the same in either half */
    attn_job j = {.dqkv = dqkv, .dyw = dyw, .qkv = qkv, .dout = dz, .ysaved = y, .var = v, .C = C,
                  .NH = NH, .lambda = lambda};
    attn_job halves[2] = {j, j};
    halves[0].b0 = 0, halves[0].b1 = halves[1].b0 = N / 2, halves[1].b1 = N;
    xsa_run_halves(halves, sizeof halves[0], (long)N * C >= HALVES_MIN, variant_backward_half);
}

static void *attn_backward_rows(void *arg)
{
    const attn_job *j = arg;
    int T = j->T, C = j->C, NH = j->NH, HS = C / NH, C3 = 3 * C;
    const float *qkv = j->qkv, *dy = j->dout;
    float *dqkv = j->dqkv, *datt = j->datt;
    float scale = 1.0f / sqrtf((float)HS);
    if (j->var->backward) {
        j->var->backward(j->dyw, dqkv, j->dout, j->ysaved, qkv, (size_t)j->b0 * T, (size_t)j->b1 * T, C,
                         NH, j->lambda);
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

void xsa_nn_attention_backward_v(const xsa_attention_variant *v, float lambda, float *dqkv,
                                 float *scratch, const float *dout, const float *qkv,
                                 const float *att, const float *y, int B, int T, int C, int NH)
{
    if (T > XSA_NN_ATTN_FULL_MAX) {
        xsa_nn_attention_blocked_backward(v, lambda, dqkv, scratch, dout, qkv, att, y, B, T, C, NH);
        return;
    }
    float *datt = scratch + (size_t)B * T * C;
    attn_job j = {.dqkv = dqkv, .dyw = scratch, .datt = datt, .qkv = qkv, .dout = dout,
                  .ysaved = y, .att = att, .var = v, .B = B, .T = T, .C = C, .NH = NH, .b0 = 0,
                  .b1 = B, .lambda = lambda};
    attn_run(&j, attn_backward_rows, datt + T);
}

void xsa_nn_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, const float *y,
                               int B, int T, int C, int NH, float lambda)
{
    xsa_nn_attention_backward_v(by_lambda(lambda), lambda, dqkv, scratch, dout, qkv, att, y, B, T, C,
                                NH);
}
