/*
 * test_nn.c: finite-difference gradient checks of every kernel of nn.h
 * (core/nn.c and core/lmhead.c).
 *
 * Method: a scalar L = sum(r * out) with fixed random r (computed in double)
 * is differentiated by central differences (step H, float inputs perturbed in
 * place) and compared with the kernel's backward given dout = r. Tolerance:
 * max |numeric - analytic| <= TOL * max(1, max |analytic|) per gradient
 * (float32 forward; Richardson extrapolation of the central differences at
 * h = 1e-2 and h/2 cancels the h^2 term, so what remains is rounding, near
 * 1e-4; XSA's curvature near short value vectors needs that).
 * Also: accumulation semantics (backward adds), the cross-entropy value
 * against a double-precision reference, threaded vs single-threaded and
 * aliased cross-entropy, probe statistics on known cases. The engine's
 * threads and buffer pool: test_system.c.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../core/error.h"
#include "../core/gemm.h"
#include "../core/matmul_bf16.h"
#include "../core/nn.h"
#include "../core/system.h"
#include "check.h"

#define H 1e-2
#define TOL 2e-3

static unsigned long long rng_state = 88172645463325252ULL;
static double urand(void) /* [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static float *randv(size_t n, double scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)(urand() * scale);
    return p;
}
static float *zerov(size_t n) { return calloc(n, sizeof(float)); }
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* the current problem, set by each test */
static double (*loss_fn)(void);

static void fdcheck(const char *name, float *x, const float *g, size_t n)
{
    double maxerr = 0.0, maxg = 0.0;
    for (size_t i = 0; i < n; i++) {
        float save = x[i];
        double d[2];
        for (int k = 0; k < 2; k++) {
            double h = k ? H / 2 : H;
            x[i] = (float)(save + h);
            double hp = (double)x[i] - save; /* the step actually taken */
            double lp = loss_fn();
            x[i] = (float)(save - h);
            double hm = save - (double)x[i];
            double lm = loss_fn();
            d[k] = (lp - lm) / (hp + hm);
        }
        x[i] = save;
        loss_fn(); /* leave the outputs of the unperturbed inputs */
        double num = (4 * d[1] - d[0]) / 3;
        double err = fabs(num - g[i]);
        if (err > maxerr) maxerr = err;
        if (fabs(g[i]) > maxg) maxg = fabs(g[i]);
    }
    printf("  %-28s max |fd - grad| = %.3g (max |grad| %.3g)\n", name, maxerr, maxg);
    CHECK(maxerr <= TOL * fmax(1.0, maxg), "%s: finite differences differ by %g", name, maxerr);
    CHECK(maxg > 0.0, "%s: gradient is identically zero", name);
}

static double wsum(const float *out, const float *r, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * r[i];
    return s;
}

/* ---- embedding ---- */
enum { EB = 2, ET = 3, EC = 4, EV = 5 };
static int32_t e_inp[EB * ET] = {1, 4, 1, 0, 2, 4};
static float *e_wte, *e_wpe, *e_out, *e_r;
static double e_loss(void)
{
    xsa_nn_embedding_forward(e_out, e_inp, e_wte, e_wpe, EB, ET, EC);
    return wsum(e_out, e_r, EB * ET * EC);
}
static void test_embedding(void)
{
    e_wte = randv(EV * EC, 1);
    e_wpe = randv(ET * EC, 1);
    e_out = zerov(EB * ET * EC);
    e_r = randv(EB * ET * EC, 1);
    float *dwte = zerov(EV * EC), *dwpe = zerov(ET * EC);
    xsa_nn_embedding_backward(dwte, dwpe, e_r, e_inp, EB, ET, EC);
    loss_fn = e_loss;
    fdcheck("embedding dwte", e_wte, dwte, EV * EC);
    fdcheck("embedding dwpe", e_wpe, dwpe, ET * EC);
    free(e_wte); free(e_wpe); free(e_out); free(e_r); free(dwte); free(dwpe);
}

/* ---- linear ---- */
enum { LN_N = 5, LC = 4, LOC = 3 };
static float *l_x, *l_w, *l_b, *l_out, *l_r;
static double l_loss(void)
{
    xsa_nn_linear_forward(l_out, l_x, l_w, l_b, LN_N, LC, LOC);
    return wsum(l_out, l_r, LN_N * LOC);
}
static void test_linear(void)
{
    l_x = randv(LN_N * LC, 1);
    l_w = randv(LC * LOC, 1);
    l_b = randv(LOC, 1);
    l_out = zerov(LN_N * LOC);
    l_r = randv(LN_N * LOC, 1);
    float *dx = zerov(LN_N * LC), *dw = zerov(LC * LOC), *db = zerov(LOC);
    loss_fn = l_loss;
    l_loss();
    /* check the forward against a naive product */
    double maxe = 0.0;
    for (int n = 0; n < LN_N; n++)
        for (int o = 0; o < LOC; o++) {
            double s = l_b[o];
            for (int c = 0; c < LC; c++) s += (double)l_x[n * LC + c] * l_w[c * LOC + o];
            maxe = fmax(maxe, fabs(s - l_out[n * LOC + o]));
        }
    CHECK(maxe < 1e-5, "linear forward differs from naive by %g", maxe);
    xsa_nn_linear_backward(dx, dw, db, l_r, l_x, l_w, LN_N, LC, LOC);
    fdcheck("linear dinp", l_x, dx, LN_N * LC);
    fdcheck("linear dw", l_w, dw, LC * LOC);
    fdcheck("linear db", l_b, db, LOC);
    /* backward adds: a second call doubles the gradients */
    float db0 = db[1];
    xsa_nn_linear_backward(dx, dw, db, l_r, l_x, l_w, LN_N, LC, LOC);
    CHECK(fabsf(db[1] - 2 * db0) < 1e-6f, "linear backward does not accumulate");
    free(l_x); free(l_w); free(l_b); free(l_out); free(l_r); free(dx); free(dw); free(db);
}

/* The forward at sizes that run in two halves of the rows with oneDNN
 * (the second not on a 16-row boundary of the whole; and 2 x 32 rows,
 * which oneDNN's AVX2 kernels give other bits than one call of 64: the
 * halves must then run at one thread too) gives the bits of one thread,
 * with and without a bias (OpenBLAS keeps one call, so there the
 * comparison holds trivially), and on every backend the build has each
 * row is the product: against a double sum, within the standard bound of
 * a float sum of C + 1 terms, (C + 1) u sum |term|. */
static void linear_threads_at(int N, int C, int OC)
{
    float *x = randv((size_t)N * C, 1), *w = randv((size_t)C * OC, 1), *b = randv(OC, 1);
    float *o1 = zerov((size_t)N * OC), *o2 = zerov((size_t)N * OC);
    const char *names[] = {"openblas", "dnnl"};
    int threads = xsa_threads();
    for (int k = 0; k < 2; k++) {
        if (k == 1 && !xsa_gemm_has_dnnl()) continue;
        CHECK(xsa_gemm_set(names[k]) == 0, "gemm_set %s: %s", names[k], xsa_last_error());
        for (int wb = 0; wb < 2; wb++) {
            xsa_set_threads(1);
            xsa_nn_linear_forward(o1, x, w, wb ? b : NULL, N, C, OC);
            xsa_set_threads(2);
            xsa_nn_linear_forward(o2, x, w, wb ? b : NULL, N, C, OC);
            CHECK(memcmp(o1, o2, sizeof(float) * N * OC) == 0,
                  "%s linear forward %d x %d x %d (bias %d): 2 threads differ from 1", names[k], N, C, OC, wb);
            double worst = 0.0; /* the largest error as a fraction of its bound */
            for (int n = 0; n < N; n++)
                for (int q = 0; q < OC; q++) {
                    double s = wb ? b[q] : 0.0, a = fabs(s);
                    for (int c = 0; c < C; c++) {
                        s += (double)x[n * C + c] * w[c * OC + q];
                        a += fabs((double)x[n * C + c] * w[c * OC + q]);
                    }
                    worst = fmax(worst, fabs(s - o2[n * OC + q]) / ((C + 1) * 0x1p-24 * a));
                }
            CHECK(worst <= 1.0, "%s linear forward (bias %d): error %.3g of its bound", names[k], wb, worst);
        }
    }
    xsa_gemm_set("default");
    xsa_set_threads(threads);
    free(x); free(w); free(b); free(o1); free(o2);
}

static void test_linear_threads(void)
{
    linear_threads_at(100, 128, 160);
    linear_threads_at(64, 64, 256);
}

/* ---- lm_head ---- */
enum { HN = 4, HC = 3, HV = 6 };
static float *h_x, *h_w, *h_out, *h_r;
static double h_loss(void)
{
    xsa_nn_lmhead_forward(h_out, h_x, h_w, HN, HC, HV);
    return wsum(h_out, h_r, HN * HV);
}
static void test_lmhead(void)
{
    h_x = randv(HN * HC, 1);
    h_w = randv(HV * HC, 1);
    h_out = zerov(HN * HV);
    h_r = randv(HN * HV, 1);
    float *dx = zerov(HN * HC), *dw = zerov(HV * HC);
    xsa_nn_lmhead_backward(dx, dw, h_r, h_x, h_w, HN, HC, HV);
    loss_fn = h_loss;
    fdcheck("lmhead dinp", h_x, dx, HN * HC);
    fdcheck("lmhead dwte", h_w, dw, HV * HC);
    free(h_x); free(h_w); free(h_out); free(h_r); free(dx); free(dw);
}

/* ---- layernorm ---- */
enum { NN_ = 3, NC = 7 };
static float *n_x, *n_w, *n_b, *n_out, *n_r, n_mean[NN_], n_rstd[NN_];
static double n_loss(void)
{
    xsa_nn_layernorm_forward(n_out, n_mean, n_rstd, n_x, n_w, n_b, NN_, NC);
    return wsum(n_out, n_r, NN_ * NC);
}
static void test_layernorm(void)
{
    n_x = randv(NN_ * NC, 2);
    n_w = randv(NC, 1);
    n_b = randv(NC, 1);
    n_out = zerov(NN_ * NC);
    n_r = randv(NN_ * NC, 1);
    float *dx = zerov(NN_ * NC), *dw = zerov(NC), *db = zerov(NC);
    loss_fn = n_loss;
    n_loss();
    /* the output row has mean b-weighted... check normalisation directly */
    double m = 0, v = 0;
    for (int c = 0; c < NC; c++) m += n_x[c];
    m /= NC;
    for (int c = 0; c < NC; c++) v += (n_x[c] - m) * (n_x[c] - m);
    v /= NC;
    double want = (n_x[2] - m) / sqrt(v + 1e-5) * n_w[2] + n_b[2];
    CHECK_NEAR(n_out[2], want, 1e-5, "layernorm value");
    xsa_nn_layernorm_backward(dx, dw, db, n_r, n_x, n_w, n_mean, n_rstd, NN_, NC);
    fdcheck("layernorm dinp", n_x, dx, NN_ * NC);
    fdcheck("layernorm dw", n_w, dw, NC);
    fdcheck("layernorm db", n_b, db, NC);
    free(n_x); free(n_w); free(n_b); free(n_out); free(n_r); free(dx); free(dw); free(db);
}

/* The layer norm one row at a time, as nn.c computed it before its rows
 * went side by side: nn.c promises these bits, whatever the row count and
 * on every vector width. */
static void ln_rows_reference(float *out, float *mean, float *rstd, float *dx, float *dw,
                              float *db, const float *x, const float *w, const float *b,
                              const float *d, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C;
        double s = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) s += xn[c];
        double m = s / C;
        for (int c = 0; c < C; c++) v += (xn[c] - m) * (xn[c] - m);
        double r = 1.0 / sqrt(v / C + (double)XSA_NN_LN_EPS);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (float)((xn[c] - m) * r) * w[c] + b[c];
        mean[n] = (float)m;
        rstd[n] = (float)r;
    }
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C, *dn = d + (size_t)n * C;
        double dsum = 0.0, dnsum = 0.0;
        for (int c = 0; c < C; c++) {
            float norm = (xn[c] - mean[n]) * rstd[n], g = w[c] * dn[c];
            dsum += g;
            dnsum += (double)g * norm;
        }
        float dmean = (float)(dsum / C), dnmean = (float)(dnsum / C);
        for (int c = 0; c < C; c++) {
            float norm = (xn[c] - mean[n]) * rstd[n];
            db[c] += dn[c];
            dw[c] += norm * dn[c];
            dx[(size_t)n * C + c] += (w[c] * dn[c] - dmean - norm * dnmean) * rstd[n];
        }
    }
}

/* Rows in groups of 8 and the rest, columns in whole vectors and a tail:
 * every output bit-equal to the one-row reference */
static void test_layernorm_rows(void)
{
    int shapes[][2] = {{19, 40}, {8, 16}, {5, 128}, {33, 7}};
    for (int s = 0; s < 4; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t nc = (size_t)N * C;
        float *x = randv(nc, 3), *w = randv(C, 1), *b = randv(C, 1), *d = randv(nc, 1);
        float *o[2] = {zerov(nc), zerov(nc)}, *dx[2] = {randv(nc, 1), zerov(nc)};
        float *dw[2] = {randv(C, 1), zerov(C)}, *db[2] = {randv(C, 1), zerov(C)};
        float *mean[2] = {zerov(N), zerov(N)}, *rstd[2] = {zerov(N), zerov(N)};
        memcpy(dx[1], dx[0], nc * sizeof(float));
        memcpy(dw[1], dw[0], C * sizeof(float));
        memcpy(db[1], db[0], C * sizeof(float));
        for (size_t i = 0; i < nc; i += 5) x[i] += 40.0f; /* rows with a large mean */
        xsa_nn_layernorm_forward(o[0], mean[0], rstd[0], x, w, b, N, C);
        xsa_nn_layernorm_backward(dx[0], dw[0], db[0], d, x, w, mean[0], rstd[0], N, C);
        ln_rows_reference(o[1], mean[1], rstd[1], dx[1], dw[1], db[1], x, w, b, d, N, C);
        CHECK(memcmp(o[0], o[1], nc * sizeof(float)) == 0 && memcmp(mean[0], mean[1], N * sizeof(float)) == 0 &&
                  memcmp(rstd[0], rstd[1], N * sizeof(float)) == 0,
              "layernorm forward %d x %d: not the one-row reference's bits", N, C);
        CHECK(memcmp(dx[0], dx[1], nc * sizeof(float)) == 0 && memcmp(dw[0], dw[1], C * sizeof(float)) == 0 &&
                  memcmp(db[0], db[1], C * sizeof(float)) == 0,
              "layernorm backward %d x %d: not the one-row reference's bits", N, C);
        free(x); free(w); free(b); free(d);
        for (int k = 0; k < 2; k++) {
            free(o[k]); free(dx[k]); free(dw[k]); free(db[k]); free(mean[k]); free(rstd[k]);
        }
    }
}

/* ---- gelu, residual ---- */
enum { GN = 11 };
static float *g_x, *g_out, *g_r, *g_b;
static double g_loss(void)
{
    xsa_nn_gelu_forward(g_out, g_x, GN);
    return wsum(g_out, g_r, GN);
}
static double res_loss(void)
{
    xsa_nn_residual_forward(g_out, g_x, g_b, GN);
    return wsum(g_out, g_r, GN);
}
static void test_gelu_residual(void)
{
    g_x = randv(GN, 3);
    g_b = randv(GN, 1);
    g_out = zerov(GN);
    g_r = randv(GN, 1);
    float *dx = zerov(GN), *db = zerov(GN);
    float one = 1.0f, o1;
    xsa_nn_gelu_forward(&o1, &one, 1);
    CHECK_NEAR(o1, 0.8413447460685429, 1e-6, "gelu(1) exact erf form");
    xsa_nn_gelu_backward(dx, g_x, g_r, GN);
    loss_fn = g_loss;
    fdcheck("gelu dinp", g_x, dx, GN);
    memset(dx, 0, GN * sizeof(float));
    xsa_nn_residual_backward(dx, db, g_r, GN);
    loss_fn = res_loss;
    fdcheck("residual da", g_x, dx, GN);
    fdcheck("residual db", g_b, db, GN);
    free(g_x); free(g_b); free(g_out); free(g_r); free(dx); free(db);
}

/* ---- attention ---- */
enum { AB = 2, AT = 5, AC = 6, ANH = 2 };
static float *a_qkv, *a_out, *a_y, *a_att, *a_r;
static float a_lambda;
static double a_loss(void)
{
    xsa_nn_attention_forward(a_out, a_y, a_att, a_qkv, AB, AT, AC, ANH, a_lambda, NULL);
    return wsum(a_out, a_r, AB * AT * AC);
}
static void test_attention(float lambda, const char *name)
{
    a_lambda = lambda;
    a_qkv = randv(AB * AT * 3 * AC, 1);
    a_out = zerov(AB * AT * AC);
    a_y = zerov(AB * AT * AC);
    a_att = zerov(AB * ANH * AT * AT);
    a_r = randv(AB * AT * AC, 1);
    float *dqkv = zerov(AB * AT * 3 * AC);
    float *scratch = zerov(xsa_nn_attention_scratch_floats(AB, AT, AC, ANH));
    loss_fn = a_loss;
    a_loss();
    xsa_nn_attention_backward(dqkv, scratch, a_r, a_qkv, a_att, lambda != 0 ? a_y : NULL, AB, AT,
                              AC, ANH, lambda);
    fdcheck(name, a_qkv, dqkv, AB * AT * 3 * AC);
    /* causal rows sum to one, upper triangle zero */
    double worst = 0.0;
    for (int r = 0; r < AB * ANH * AT; r++) {
        double s = 0;
        for (int t2 = 0; t2 < AT; t2++) s += a_att[r * AT + t2];
        worst = fmax(worst, fabs(s - 1));
    }
    CHECK(worst < 1e-6, "attention rows sum to 1 (off by %g)", worst);
    CHECK(a_att[1] == 0.0f, "causal mask");
    /* with lambda = 1, z is orthogonal to v */
    if (lambda == 1.0f) {
        double m = 0;
        for (int b = 0; b < AB; b++)
            for (int t = 0; t < AT; t++)
                for (int h = 0; h < ANH; h++) {
                    int hs = AC / ANH;
                    double d = 0;
                    for (int i = 0; i < hs; i++)
                        d += (double)a_out[(b * AT + t) * AC + h * hs + i] *
                             a_qkv[(b * AT + t) * 3 * AC + 2 * AC + h * hs + i];
                    m = fmax(m, fabs(d));
                }
        CHECK(m < 1e-5, "xsa lambda 1: z . v = %g", m);
    }
    free(a_qkv); free(a_out); free(a_y); free(a_att); free(a_r); free(dqkv); free(scratch);
}

/* Above the size where attention splits the batch over two threads (an odd
 * B: uneven halves), forward and backward give the bits of one thread; the
 * backward adds into a dqkv that is not zero. The finite-difference checks
 * above run the one-thread path. */
static void test_attention_threads(float lambda)
{
    enum { B = 3, T = 128, C = 64, NH = 4 };
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = randv(nq, 1), *dout = randv(no, 1), *d0 = randv(nq, 1);
    float *out[2], *y[2], *att[2], *dq[2], *sc[2];
    int threads = xsa_threads();
    for (int k = 0; k < 2; k++) {
        out[k] = zerov(no); y[k] = zerov(no); att[k] = zerov(na);
        dq[k] = malloc(nq * sizeof(float));
        memcpy(dq[k], d0, nq * sizeof(float));
        sc[k] = zerov(xsa_nn_attention_scratch_floats(B, T, C, NH));
        xsa_set_threads(k + 1);
        xsa_nn_attention_forward(out[k], y[k], att[k], qkv, B, T, C, NH, lambda, NULL);
        xsa_nn_attention_backward(dq[k], sc[k], dout, qkv, att[k], lambda != 0 ? y[k] : NULL, B, T, C,
                                  NH, lambda);
    }
    xsa_set_threads(threads);
    CHECK(memcmp(out[0], out[1], no * sizeof(float)) == 0 && memcmp(y[0], y[1], no * sizeof(float)) == 0 &&
              memcmp(att[0], att[1], na * sizeof(float)) == 0,
          "attention forward (lambda %g): 2 threads differ from 1", lambda);
    CHECK(memcmp(dq[0], dq[1], nq * sizeof(float)) == 0,
          "attention backward (lambda %g): 2 threads differ from 1", lambda);
    for (int k = 0; k < 2; k++) {
        free(out[k]); free(y[k]); free(att[k]); free(dq[k]); free(sc[k]);
    }
    free(qkv); free(dout); free(d0);
}

/* probe on a case with known answers: T = 1 (a token attends only to itself) */
static void test_probe(void)
{
    enum { PB = 1, PT = 1, PC = 4, PNH = 2 };
    float qkv[PT * 3 * PC] = {1, 2, 3, 4, 0.5f, -1, 2, 1, 3, 0, -2, 1};
    float out[PC], y[PC], att[PNH];
    double pr[PNH * XSA_NN_PROBE_N];
    xsa_nn_attention_forward(out, y, att, qkv, PB, PT, PC, PNH, 0.0f, pr);
    CHECK_NEAR(pr[XSA_NN_PROBE_SELF_ATTN], 1.0, 1e-7, "probe self attention, T=1");
    CHECK_NEAR(pr[XSA_NN_PROBE_PRE_COS], 1.0, 1e-6, "probe pre cos, T=1 (y = v)");
    CHECK_NEAR(pr[XSA_NN_PROBE_POST_COS], 1.0, 1e-6, "probe post cos SA, T=1");
    xsa_nn_attention_forward(out, y, att, qkv, PB, PT, PC, PNH, 0.5f, pr);
    CHECK_NEAR(pr[XSA_NN_PROBE_POST_COS], 1.0, 1e-6, "probe post cos lambda .5 (z = v/2)");
    CHECK_NEAR(out[0], 1.5, 1e-6, "xsa lambda .5 halves y = v at T=1");

    /* larger random case: value cosine against a direct double computation */
    enum { QB = 2, QT = 4, QC = 6, QNH = 3 };
    float *q = randv(QB * QT * 3 * QC, 1), *o = zerov(QB * QT * QC), *yy = zerov(QB * QT * QC);
    float *at = zerov(QB * QNH * QT * QT);
    double p2[QNH * XSA_NN_PROBE_N];
    xsa_nn_attention_forward(o, yy, at, q, QB, QT, QC, QNH, 1.0f, p2);
    int hs = QC / QNH;
    for (int h = 0; h < QNH; h++) {
        double s = 0;
        for (int b = 0; b < QB; b++)
            for (int i = 0; i < QT; i++)
                for (int j = 0; j < QT; j++) {
                    if (i == j) continue;
                    const float *vi = q + (b * QT + i) * 3 * QC + 2 * QC + h * hs;
                    const float *vj = q + (b * QT + j) * 3 * QC + 2 * QC + h * hs;
                    double ab = 0, aa = 0, bb = 0;
                    for (int k = 0; k < hs; k++) {
                        ab += (double)vi[k] * vj[k];
                        aa += (double)vi[k] * vi[k];
                        bb += (double)vj[k] * vj[k];
                    }
                    s += ab / sqrt(aa * bb);
                }
        s /= QB * QT * (QT - 1);
        CHECK_NEAR(p2[h * XSA_NN_PROBE_N + XSA_NN_PROBE_VALUE_COS], s, 1e-9, "probe value cos");
        CHECK(fabs(p2[h * XSA_NN_PROBE_N + XSA_NN_PROBE_POST_COS1]) < 1e-5,
              "probe post cos after full XSA is ~0");
    }
    free(q); free(o); free(yy); free(at);
}

/* ---- cross-entropy ---- */
enum { CN = 3, CV = 37 };
static float *c_logits;
static int32_t c_tg[CN] = {0, 36, 17};
static double c_loss(void)
{
    return xsa_nn_crossentropy_forward(NULL, NULL, NULL, c_logits, c_tg, CN, CV, 1);
}
static void test_crossentropy(void)
{
    c_logits = randv(CN * CV, 4);
    /* value against double precision */
    double want = 0;
    for (int n = 0; n < CN; n++) {
        double mx = -1e30, s = 0;
        for (int v = 0; v < CV; v++) mx = fmax(mx, c_logits[n * CV + v]);
        for (int v = 0; v < CV; v++) s += exp(c_logits[n * CV + v] - mx);
        want += log(s) + mx - c_logits[n * CV + c_tg[n]];
    }
    want /= CN;
    CHECK_NEAR(c_loss(), want, 1e-6, "cross-entropy value");
    float *probs = zerov(CN * CV), pscale[CN], *dl = zerov(CN * CV);
    xsa_nn_crossentropy_forward(probs, pscale, NULL, c_logits, c_tg, CN, CV, 1);
    xsa_nn_crossentropy_backward(dl, probs, pscale, c_tg, 1.0f, CN, CV, 1);
    loss_fn = c_loss;
    fdcheck("crossentropy dlogits", c_logits, dl, CN * CV);
    free(c_logits); free(probs); free(dl);

    /* big enough to use threads: same results as one thread, and in place */
    int N = 40, V = 50257;
    float *lg = randv((size_t)N * V, 8), *lg2 = malloc((size_t)N * V * sizeof(float));
    memcpy(lg2, lg, (size_t)N * V * sizeof(float));
    int32_t *tg = malloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tg[n] = (n * 7919) % V;
    float *pr1 = zerov((size_t)N * V), *ps1 = zerov(N), *ps2 = zerov(N), *ls = zerov(N);
    double l1 = xsa_nn_crossentropy_forward(pr1, ps1, ls, lg, tg, N, V, 1);
    double l2 = xsa_nn_crossentropy_forward(lg2, ps2, NULL, lg2, tg, N, V, 2); /* aliased */
    CHECK(fabs(l1 - l2) < 1e-12, "threaded/aliased loss %.17g vs %.17g", l1, l2);
    double lsum = 0, want2 = 0;
    for (int n = 0; n < N; n++) {
        lsum += ls[n];
        double mx = -1e30, s = 0;
        const float *r = lg + (size_t)n * V;
        for (int v = 0; v < V; v++) mx = fmax(mx, r[v]);
        for (int v = 0; v < V; v++) s += exp(r[v] - mx);
        want2 += log(s) + mx - r[tg[n]];
    }
    CHECK_NEAR(l1, want2 / N, 1e-6, "vocab-sized cross-entropy vs double reference");
    CHECK_NEAR(lsum / N, l1, 1e-6, "per-row losses average to the loss");
    xsa_nn_crossentropy_backward(pr1, pr1, ps1, tg, 2.0f, N, V, 1);
    xsa_nn_crossentropy_backward(lg2, lg2, ps2, tg, 2.0f, N, V, 2);
    double md = 0, rowsum = 0;
    for (size_t i = 0; i < (size_t)N * V; i++) md = fmax(md, fabs(pr1[i] - lg2[i]));
    for (int v = 0; v < V; v++) rowsum += pr1[v];
    CHECK(md == 0.0, "threaded backward differs by %g", md);
    CHECK(fabs(rowsum) < 1e-6, "dlogits rows sum to 0 (%g)", rowsum);
    free(lg); free(lg2); free(tg); free(pr1); free(ps1); free(ps2); free(ls);
}

/* The vectorised GELU (an erfc fit with fractional error < 1.2e-7) and its
 * derivative against double precision, over the range where it matters and
 * into the tails. */
static void test_gelu_accuracy(void)
{
    enum { GA = 4096 };
    float *x = malloc(GA * sizeof(float)), *y = malloc(GA * sizeof(float));
    float *one = malloc(GA * sizeof(float)), *d = calloc(GA, sizeof(float));
    for (int i = 0; i < GA; i++) {
        x[i] = (float)(-14.0 + 28.0 * i / (GA - 1));
        one[i] = 1.0f;
    }
    xsa_nn_gelu_forward(y, x, GA);
    xsa_nn_gelu_backward(d, x, one, GA);
    double worst = 0, worstd = 0, tail = 0, wx = 0;
    for (int i = 0; i < GA; i++) {
        double xv = x[i], cdf = 0.5 * erfc(-xv / sqrt(2.0));
        double ref = xv * cdf, dref = cdf + xv * exp(-0.5 * xv * xv) / sqrt(2 * M_PI);
        /* relative where gelu is not negligible; in the far negative tail
         * (|gelu| < 1e-7, x < -5.3) exp(-x^2/2) amplifies the rounding of x^2
         * by x^2, and an absolute 1e-12 is what matters there */
        double e = fabs(ref) > 1e-7 ? fabs(y[i] - ref) / fabs(ref) : fabs(y[i] - ref) / 1e-6 * 1e-6;
        if (fabs(ref) <= 1e-7) tail = fmax(tail, fabs(y[i] - ref));
        else if (e > worst) worst = e;
        /* gelu' is in [-0.17, 1.13] and crosses 0 at x = -0.75, where
         * Phi(x) and x phi(x) cancel: absolute error is the measure */
        double ed = fabs(d[i] - dref);
        if (fabs(dref) <= 1e-7) {
            tail = fmax(tail, fabs(d[i] - dref));
            ed = 0;
        }
        if (ed > worstd) {
            worstd = ed;
            wx = xv;
        }
    }
    printf("  gelu vs double over [-14,14] (relative where |value| > 1e-7): max err %.3g, "
           "derivative abs err %.3g (at x=%g); tails abs %.3g\n", worst, worstd, wx, tail);
    CHECK(tail < 1e-12, "gelu tails %g", tail);
    CHECK(worst < 2e-6, "gelu relative error %g", worst);
    CHECK(worstd < 3e-7, "gelu derivative absolute error %g", worstd);
    free(x); free(y); free(one); free(d);
}

/* A NaN logit must give a NaN loss (no clamp may swallow it). */
static void test_ce_nan(void)
{
    enum { V = 64 };
    float lg[2 * V];
    int32_t tg[2] = {3, 5};
    for (int i = 0; i < 2 * V; i++) lg[i] = (float)(i % 7) * 0.1f;
    lg[V + 17] = NAN;
    CHECK(isnan(xsa_nn_crossentropy_forward(NULL, NULL, NULL, lg, tg, 2, V, 1)), "NaN logit -> NaN loss");
    lg[V + 17] = 0.0f;
    CHECK(isfinite(xsa_nn_crossentropy_forward(NULL, NULL, NULL, lg, tg, 2, V, 1)), "finite loss");
}

/* The fused cross-entropy + lm_head backward equals the two-step path. */
static void test_lmhead_ce_fused(void)
{
    enum { FN = 7, FC = 5, FV = 300 };
    float *x = randv(FN * FC, 1), *w = randv(FV * FC, 1), *lg = zerov(FN * FV);
    float *pr = zerov(FN * FV), ps[FN], *dl = zerov(FN * FV);
    int32_t tg[FN] = {0, 299, 17, 17, 150, 3, 42};
    xsa_nn_lmhead_forward(lg, x, w, FN, FC, FV);
    xsa_nn_crossentropy_forward(pr, ps, NULL, lg, tg, FN, FV, 1);
    float *dx1 = randv(FN * FC, 1), *dw1 = randv(FV * FC, 1); /* nonzero: both must add */
    float *dx2 = malloc(FN * FC * sizeof(float)), *dw2 = malloc(FV * FC * sizeof(float));
    memcpy(dx2, dx1, FN * FC * sizeof(float));
    memcpy(dw2, dw1, FV * FC * sizeof(float));
    float *scratch = zerov(2 * FN * FC);
    xsa_nn_lmhead_ce_backward(dx1, dw1, scratch, pr, ps, tg, x, w, 1.5f, FN, FC, FV);
    xsa_nn_crossentropy_backward(dl, pr, ps, tg, 1.5f, FN, FV, 1);
    xsa_nn_lmhead_backward(dx2, dw2, dl, x, w, FN, FC, FV);
    double mx = 0, mw = 0;
    for (int i = 0; i < FN * FC; i++) mx = fmax(mx, fabs(dx1[i] - dx2[i]));
    for (int i = 0; i < FV * FC; i++) mw = fmax(mw, fabs(dw1[i] - dw2[i]));
    printf("  lmhead+CE fused vs two-step: dinp %.3g, dwte %.3g\n", mx, mw);
    CHECK(mx < 1e-6 && mw < 1e-6, "fused lm_head/CE backward differs (%g, %g)", mx, mw);
    free(x); free(w); free(lg); free(pr); free(dl); free(dx1); free(dw1); free(dx2); free(dw2);
    free(scratch);
}

/* The reference of the fused, chunked lm_head + CE: the unfused two-step
 * path (logits [N,V], softmax, dlogits, both backward products). */
static double lmhead_ce_ref(float *dx, float *dw, float *losses, const float *x, const float *w,
                            const int32_t *tg, int N, int C, int V)
{
    float *lg = zerov((size_t)N * V), *pr = zerov((size_t)N * V), *ps = zerov((size_t)N);
    xsa_nn_lmhead_forward(lg, x, w, N, C, V);
    double l = xsa_nn_crossentropy_forward(pr, ps, losses, lg, tg, N, V, 1);
    xsa_nn_crossentropy_backward(lg, pr, ps, tg, 1.0f, N, V, 1);
    memset(dx, 0, (size_t)N * C * sizeof(float));
    memset(dw, 0, (size_t)V * C * sizeof(float));
    xsa_nn_lmhead_backward(dx, dw, lg, x, w, N, C, V);
    free(lg); free(pr); free(ps);
    return l;
}

static double maxdiff(const float *a, const float *b, size_t n, double *maxb)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    if (maxb) *maxb = m;
    return d;
}

/* Chunked and fused (float32) against the two-step path: every chunking
 * (a tail chunk, one chunk, chunks of 16), 1 and 2 threads, odd sizes.
 * Chunks of 1024 rows split the vocabulary into blocks of 1024 (4 MB of
 * logits each): three blocks of 3001, two of 1500; with inputs scaled by
 * 60 the logits spread over hundreds, so whole blocks underflow against
 * the row's maximum (their factors e^(m_b - lse) are 0). */
/* The blocking set in-process (xsa_nn_lmhead_set_blocking, as
 * bench_blocking alternates it): blocks of 64 rows of the vocabulary and
 * a ragged last one, chunks of 48 rows, still the two-step reference's
 * loss and gradients; the text names it; negatives are refused. */
static void test_lmhead_blocking(void)
{
    enum { BN = 100, BC = 16, BV = 1000 };
    float *x = randv(BN * BC, 2), *w = randv(BV * BC, 1), *dx = zerov(BN * BC), *dw = zerov(BV * BC);
    float *rx = zerov(BN * BC), *rw = zerov(BV * BC);
    int32_t tg[BN];
    for (int i = 0; i < BN; i++) tg[i] = (int32_t)((i * 7919 + 3) % BV);
    double want = lmhead_ce_ref(rx, rw, NULL, x, w, tg, BN, BC, BV), got = 0;
    CHECK(xsa_nn_lmhead_set_blocking(48, 64) == 0, "set_blocking");
    int R = xsa_nn_lmhead_rows(BN, BV, 0);
    CHECK(R == 48 && xsa_nn_lmhead_vblock(R, BV) == 64, "the set blocking is used: %d x %d", R,
          xsa_nn_lmhead_vblock(R, BV));
    CHECK(strcmp(xsa_nn_lmhead_describe(), "chunks of 48 rows (set), blocks of 64 rows (set)") == 0, "%s",
          xsa_nn_lmhead_describe());
    float *scr = zerov(xsa_nn_lmhead_ce_scratch_floats(BN, BC, BV, R, 0, 2));
    CHECK(xsa_nn_lmhead_ce(&got, dx, dw, NULL, scr, x, w, tg, BN, BC, BV, R, 2, NULL) == 0, "lmhead_ce");
    double mb, mbw, ddx = maxdiff(dx, rx, BN * BC, &mb), ddw = maxdiff(dw, rw, BV * BC, &mbw);
    CHECK(fabs(got - want) <= 1e-6 * fabs(want), "loss %.9g vs %.9g", got, want);
    CHECK(ddx <= 1e-5 * mb && ddw <= 1e-5 * mbw, "dinp %g (max %g), dwte %g (max %g)", ddx, mb, ddw, mbw);
    CHECK(xsa_nn_lmhead_set_blocking(-1, 0) != 0 && strstr(xsa_last_error(), "must be >= 0"), "negative rows: %s",
          xsa_last_error());
    CHECK(xsa_nn_lmhead_set_blocking(0, 0) == 0 && xsa_nn_lmhead_rows(1 << 20, 50257, 0) == 384 &&
              xsa_nn_lmhead_vblock(384, 50257) == 2688,
          "back to the rule: 384 rows of GPT-2's vocabulary, blocks of 2688");
    CHECK(strcmp(xsa_nn_lmhead_describe(), "chunks of 80 MB (bf16 104), blocks of 4 MB") == 0, "%s",
          xsa_nn_lmhead_describe());
    free(x); free(w); free(dx); free(dw); free(rx); free(rw); free(scr);
}

/* xsa_nn_lmhead_ce_defer against xsa_nn_lmhead_ce's loss, dinp and dwte
 * (want_*): the loss and dinp complete on return, dwte once the tail is
 * finished, all to the bit, whether the other threads were started on it
 * (they take blocks in turn) or the finish runs it all. While they run the
 * caller counts its threads less theirs, or more as they finish (the
 * lending itself: test_threads_lend); once they have no block left it
 * counts them all. A dropped tail is no longer pending and gives its
 * threads back. */
static void check_tail(int N, int C, int V, int R, int threads, const float *x, const float *w,
                       const int32_t *tg, const xsa_nn_bf16 *bf, double want, const float *want_dx,
                       const float *want_dw)
{
    size_t nd = (size_t)N * C * sizeof(float), nw = (size_t)V * C * sizeof(float);
    int had = xsa_threads();
    xsa_set_threads(threads);
    xsa_nn_lmhead_tail *t = xsa_nn_lmhead_tail_new();
    for (int how = 0; how < 3; how++) { /* started, finished alone, dropped */
        float *dx = randv((size_t)N * C, 1), *dw = randv((size_t)V * C, 1);
        float *scr = zerov(xsa_nn_lmhead_ce_scratch_floats(N, C, V, R, bf != NULL, threads));
        double got = 0;
        CHECK(t && xsa_nn_lmhead_ce_defer(&got, dx, dw, NULL, scr, x, w, tg, N, C, V, R, threads, bf, t) == 0,
              "defer: %s", xsa_last_error());
        CHECK(xsa_nn_lmhead_tail_pending(t), "a chunk is left");
        CHECK(got == want && memcmp(dx, want_dx, nd) == 0, "loss and dinp complete before the tail (%d threads)",
              threads);
        CHECK(memcmp(dw, want_dw, nw) != 0, "dwte incomplete before the tail");
        /* the threads with blocks of their own (lmhead.c) but the caller's are lent */
        int VB = xsa_nn_lmhead_vblock(R < N ? R : N, V), nblk = (V + VB - 1) / VB;
        int lent = (threads < nblk ? threads : nblk) - 1;
        float *dst = randv((size_t)V * C, 1), *dst0 = malloc(nw);
        memcpy(dst0, dst, nw);
        if (how != 1) xsa_nn_lmhead_tail_start(t, dst, 0.75f);
        int now = xsa_threads();
        CHECK(now >= (how != 1 ? threads - lent : threads) && now <= threads,
              "%d threads, %d blocks: %d while the tail runs", threads, nblk, now);
        /* started: the other threads take every block while this one waits,
         * then count again (at most 10 s) */
        if (how == 0) {
            for (double t0 = now_s(); xsa_threads() < threads && now_s() - t0 < 10;) sched_yield();
            CHECK(xsa_threads() == threads, "the tail's threads, done, count again: %d of %d", xsa_threads(),
                  threads);
        }
        if (how == 2) {
            xsa_nn_lmhead_tail_drop(t);
            CHECK(!xsa_nn_lmhead_tail_pending(t) && xsa_nn_lmhead_tail_finish(t) == 0, "dropped: nothing left");
        } else {
            CHECK(xsa_nn_lmhead_tail_finish(t) == 0 && !xsa_nn_lmhead_tail_pending(t), "finish: %s",
                  xsa_last_error());
            CHECK(memcmp(dw, want_dw, nw) == 0, "dwte bits after the tail (%d threads, %s)", threads,
                  how ? "finished alone" : "started");
            /* started: dst += 0.75 dwte, one fused multiply-add each; alone: no dst */
            for (size_t i = 0; i < (size_t)V * C && !how; i++) dst0[i] = fmaf(0.75f, want_dw[i], dst0[i]);
            CHECK(memcmp(dst, dst0, nw) == 0, "dst after the tail (%d threads, %s)", threads,
                  how ? "untouched" : "dwte added");
        }
        CHECK(xsa_threads() == threads, "threads given back: %d of %d", xsa_threads(), threads);
        free(dx); free(dw); free(scr); free(dst); free(dst0);
    }
    xsa_nn_lmhead_tail_free(t);
    xsa_set_threads(had);
}

static void test_lmhead_ce_chunked(void)
{
    struct { int N, C, V, rows, threads; double xscale; } cs[] = {
        {37, 24, 301, 16, 1, 2}, {37, 24, 301, 64, 2, 2}, {37, 24, 301, 1000, 1, 2},
        {100, 16, 4099, 48, 2, 2}, {64, 32, 50, 16, 2, 2}, {1, 8, 7, 16, 1, 2},
        {1100, 8, 3001, 1024, 2, 2}, {1030, 8, 1500, 1024, 1, 60}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        int N = cs[k].N, C = cs[k].C, V = cs[k].V, R = cs[k].rows;
        float *x = randv((size_t)N * C, cs[k].xscale), *w = randv((size_t)V * C, 1);
        int32_t *tg = malloc(sizeof(int32_t) * (size_t)N);
        for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 7919 + 3) % V);
        float *dx = randv((size_t)N * C, 1), *dw = randv((size_t)V * C, 1); /* written, not added */
        float *rx = zerov((size_t)N * C), *rw = zerov((size_t)V * C);
        float *ls = zerov((size_t)N), *rl = zerov((size_t)N), *evl = zerov((size_t)N);
        float *scr = zerov(xsa_nn_lmhead_ce_scratch_floats(N, C, V, R, 0, cs[k].threads));
        double want = lmhead_ce_ref(rx, rw, rl, x, w, tg, N, C, V), got = 0, ev = 0;
        CHECK(xsa_nn_lmhead_ce(&got, dx, dw, ls, scr, x, w, tg, N, C, V, R, cs[k].threads, NULL) == 0,
              "lmhead_ce");
        CHECK(xsa_nn_lmhead_ce(&ev, NULL, NULL, evl, scr, x, w, tg, N, C, V, R, cs[k].threads, NULL) == 0,
              "lmhead_ce eval");
        double mb, mbw, ddx = maxdiff(dx, rx, (size_t)N * C, &mb), ddw = maxdiff(dw, rw, (size_t)V * C, &mbw);
        double dl = maxdiff(ls, rl, (size_t)N, NULL);
        printf("  lmhead_ce chunked N=%d V=%d rows=%d: loss %.2g, losses %.2g, dinp %.2g (max %.2g), "
               "dwte %.2g (max %.2g)\n", N, V, R, fabs(got - want), dl, ddx, mb, ddw, mbw);
        CHECK(fabs(got - want) <= 1e-6 * fabs(want), "loss %.9g vs %.9g", got, want);
        CHECK(ev == got, "the loss without gradient differs: %.9g vs %.9g", ev, got);
        CHECK(dl <= 1e-5 * fmax(1.0, fabs(want)), "per-row losses differ by %g", dl);
        CHECK(maxdiff(evl, ls, (size_t)N, NULL) == 0, "per-row losses without gradient differ");
        CHECK(ddx <= 1e-5 * mb, "dinp differs by %g (max %g)", ddx, mb);
        CHECK(ddw <= 1e-5 * mbw, "dwte differs by %g (max %g)", ddw, mbw);
        /* the same bits on 3 threads (the blocks of the vocabulary over
         * other threads, the sum over blocks still in block order) */
        float *dx3 = zerov((size_t)N * C), *dw3 = zerov((size_t)V * C), *ls3 = zerov((size_t)N);
        float *scr3 = zerov(xsa_nn_lmhead_ce_scratch_floats(N, C, V, R, 0, 3));
        double got3 = 0, ev3 = 0;
        CHECK(xsa_nn_lmhead_ce(&got3, dx3, dw3, ls3, scr3, x, w, tg, N, C, V, R, 3, NULL) == 0, "3 threads");
        CHECK(xsa_nn_lmhead_ce(&ev3, NULL, NULL, NULL, scr3, x, w, tg, N, C, V, R, 3, NULL) == 0, "3 threads");
        CHECK(got3 == got && ev3 == ev, "loss at 3 threads %.17g vs %.17g at %d", got3, got, cs[k].threads);
        CHECK(memcmp(dx3, dx, (size_t)N * C * sizeof(float)) == 0, "dinp bits at 3 threads");
        CHECK(memcmp(dw3, dw, (size_t)V * C * sizeof(float)) == 0, "dwte bits at 3 threads");
        CHECK(memcmp(ls3, ls, (size_t)N * sizeof(float)) == 0, "per-row losses at 3 threads");
        free(dx3); free(dw3); free(ls3); free(scr3);
        for (int t = 1; t <= 3; t++) check_tail(N, C, V, R, t, x, w, tg, NULL, got, dx, dw);
        free(x); free(w); free(tg); free(dx); free(dw); free(rx); free(rw); free(ls); free(rl);
        free(evl); free(scr);
    }
}

/* bf16 products (when this build and CPU have them) against float32, with
 * tolerances derived from the rounding: bf16 keeps 8 significant bits, so
 * each rounded factor is within u = 2^-9 relative, a product of two within
 * 2u, and a sum of such products within 2u of the sum of |terms| (plus
 * float32 accumulation, negligible). Logit l_rv: |dl| <= 2u sum_c |x_rc w_vc|
 * =: L. The loss and log-softmax move by at most 2 max L; a probability by a
 * factor within exp(+-2 max L) ~ 1 +- 2 max L. dinp_r = sum_v p_rv w_v - w_t,
 * with p and w rounded: |d| <= (2u + 2 max L) sum_v p_rv |w_v|; dwte likewise
 * with the rows x_r (rounded, after scaling) for w_v. */
static void lmhead_ce_bf16_case(int N, int C, int V, int R);

static void test_lmhead_ce_bf16(void)
{
    if (xsa_bf16_check() != 0) {
        printf("  skip: bf16 lm_head (%s)\n", xsa_last_error());
        CHECK(xsa_bf16_mm_new() == NULL, "no bf16: creating a context must fail");
        return;
    }
    /* one block of the vocabulary; then chunks of 1024 rows, whose blocks
     * are 1024 rows of the vocabulary (three, the exponentials of each
     * scaled by its own factor) and a tail chunk */
    struct { int N, C, V, R; } cs[] = {{100, 64, 3001, 48}, {1100, 16, 3001, 1024}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        lmhead_ce_bf16_case(cs[k].N, cs[k].C, cs[k].V, cs[k].R);
}

/* the conversions: round to nearest even, exact back */
static void bf16_conversions(void)
{
    const double u = 1.0 / 512;
    float vals[5] = {1.0f, 1.00390625f, 1.01171875f, -3.14159f, 65504.0f};
    uint16_t h[5];
    float back[5];
    xsa_bf16_from_f32(h, vals, 5);
    xsa_bf16_to_f32(back, h, 5);
    CHECK(back[0] == 1.0f && back[1] == 1.0f && back[2] == 1.015625f, "bf16 rounding: %g %g %g",
          back[0], back[1], back[2]);
    CHECK(fabs(back[3] - vals[3]) <= u * fabs(vals[3]), "bf16 of -pi: %g", back[3]);
}

static void lmhead_ce_bf16_case(int N, int C, int V, int R)
{
    const double u = 1.0 / 512;
    float *x = randv((size_t)N * C, 2), *w = randv((size_t)V * C, 0.5);
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 7919 + 3) % V);
    uint16_t *w16 = malloc(sizeof(uint16_t) * (size_t)V * C);
    xsa_bf16_from_f32(w16, w, (size_t)V * C);
    xsa_bf16_mm *mm = xsa_bf16_mm_new();
    CHECK(mm != NULL, "bf16 context: %s", xsa_last_error());
    if (!mm) return;
    xsa_nn_bf16 bf = {mm, w16};
    float *dx = zerov((size_t)N * C), *dw = zerov((size_t)V * C), *rx = zerov((size_t)N * C);
    float *rw = zerov((size_t)V * C);
    float *scr = zerov(xsa_nn_lmhead_ce_scratch_floats(N, C, V, R, 1, 2));
    double want = lmhead_ce_ref(rx, rw, NULL, x, w, tg, N, C, V), got = 0;
    CHECK(xsa_nn_lmhead_ce(&got, dx, dw, NULL, scr, x, w, tg, N, C, V, R, 2, &bf) == 0, "bf16: %s",
          xsa_last_error());
    /* the bounds, from the data */
    double Lmax = 0;
    for (int r = 0; r < N; r++)
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += fabs((double)x[r * C + c] * w[(size_t)v * C + c]);
            if (2 * u * s > Lmax) Lmax = 2 * u * s;
        }
    double f = 2 * u + 2 * Lmax, worst_x = 0, worst_w = 0;
    float *lg = zerov((size_t)N * V), *pr = zerov((size_t)N * V), *ps = zerov((size_t)N);
    xsa_nn_lmhead_forward(lg, x, w, N, C, V);
    xsa_nn_crossentropy_forward(pr, ps, NULL, lg, tg, N, V, 1);
    int okx = 1, okw = 1;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            double b = 0;
            for (int v = 0; v < V; v++) b += pr[(size_t)r * V + v] * ps[r] * fabs(w[(size_t)v * C + c]);
            double e = fabs((double)dx[r * C + c] - rx[r * C + c]), tol = f * b + 1e-6;
            if (e > tol) okx = 0;
            if (e / tol > worst_x) worst_x = e / tol;
        }
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            double b = 0;
            for (int r = 0; r < N; r++) b += pr[(size_t)r * V + v] * ps[r] * fabs(x[r * C + c]) / N;
            double e = fabs((double)dw[(size_t)v * C + c] - rw[(size_t)v * C + c]), tol = f * b + 1e-7;
            if (e > tol) okw = 0;
            if (e / tol > worst_w) worst_w = e / tol;
        }
    double mbx, mbw, ax = maxdiff(dx, rx, (size_t)N * C, &mbx), aw = maxdiff(dw, rw, (size_t)V * C, &mbw);
    printf("  lmhead_ce bf16 vs float32, N=%d V=%d rows=%d: loss %.3g (bound %.3g); dinp %.2g of max %.2g (%.3f of the "
           "bound), dwte %.2g of max %.2g (%.3f of the bound)\n",
           N, V, R, fabs(got - want), 2 * Lmax, ax, mbx, worst_x, aw, mbw, worst_w);
    CHECK(fabs(got - want) <= 2 * Lmax, "bf16 loss %.9g vs %.9g (bound %g)", got, want, 2 * Lmax);
    CHECK(okx, "bf16 dinp beyond the rounding bound (%.2f x)", worst_x);
    CHECK(okw, "bf16 dwte beyond the rounding bound (%.2f x)", worst_w);
    /* the same bits on 1 and 3 threads: each block's products on one
     * thread, dinp summed over the blocks in block order */
    for (int t = 1; t <= 3; t += 2) {
        float *dxt = zerov((size_t)N * C), *dwt = zerov((size_t)V * C);
        float *st = zerov(xsa_nn_lmhead_ce_scratch_floats(N, C, V, R, 1, t));
        double gt = 0;
        CHECK(xsa_nn_lmhead_ce(&gt, dxt, dwt, NULL, st, x, w, tg, N, C, V, R, t, &bf) == 0, "bf16: %s",
              xsa_last_error());
        CHECK(gt == got, "bf16 loss on %d threads %.17g vs %.17g on 2", t, gt, got);
        CHECK(memcmp(dxt, dx, sizeof(float) * (size_t)N * C) == 0, "bf16 dinp bits, %d threads vs 2", t);
        CHECK(memcmp(dwt, dw, sizeof(float) * (size_t)V * C) == 0, "bf16 dwte bits, %d threads vs 2", t);
        free(dxt); free(dwt); free(st);
    }
    for (int t = 1; t <= 3; t++) check_tail(N, C, V, R, t, x, w, tg, &bf, got, dx, dw);
    bf16_conversions();
    xsa_bf16_mm_free(mm);
    free(x); free(w); free(w16); free(dx); free(dw); free(rx); free(rw); free(scr); free(lg); free(pr);
    free(ps); free(tg);
}

int main(void)
{
    test_lmhead_ce_fused();
    test_lmhead_ce_chunked();
    test_lmhead_blocking();
    test_lmhead_ce_bf16();
    test_gelu_accuracy();
    test_ce_nan();
    test_embedding();
    test_linear();
    test_linear_threads();
    test_lmhead();
    test_layernorm();
    test_layernorm_rows();
    test_gelu_residual();
    test_attention(0.0f, "attention SA dqkv");
    test_attention(1.0f, "attention XSA l=1 dqkv");
    test_attention(0.5f, "attention XSA l=.5 dqkv");
    test_attention(-0.7f, "attention XSA l=-.7 dqkv");
    test_attention(1.8f, "attention XSA l=1.8 dqkv");
    test_attention_threads(0.0f);
    test_attention_threads(0.5f);
    test_probe();
    test_crossentropy();
    return check_done("test_nn");
}
