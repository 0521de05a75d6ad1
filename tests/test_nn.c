/*
 * test_nn.c: finite-difference gradient checks of every kernel in core/nn.c.
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
 * aliased cross-entropy, probe statistics on known cases.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/nn.h"
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

int main(void)
{
    test_lmhead_ce_fused();
    test_gelu_accuracy();
    test_ce_nan();
    test_embedding();
    test_linear();
    test_lmhead();
    test_layernorm();
    test_gelu_residual();
    test_attention(0.0f, "attention SA dqkv");
    test_attention(1.0f, "attention XSA l=1 dqkv");
    test_attention(0.5f, "attention XSA l=.5 dqkv");
    test_attention(-0.7f, "attention XSA l=-.7 dqkv");
    test_attention(1.8f, "attention XSA l=1.8 dqkv");
    test_probe();
    test_crossentropy();
    return check_done("test_nn");
}
