/*
 * test_attention.c: the blocked attention kernel (core/attention_blocked.c)
 * against a double-precision reference, with a tolerance derived per
 * element; XSA's gradient by finite differences; 1 and 2 threads to the
 * bit; the probe's self-attention and the recomputed weights. Shapes
 * straddle the blocks (64): T = 1, a block and one, several blocks and a
 * ragged tail, a head size that is not a multiple of the vector width;
 * T just above XSA_NN_ATTN_FULL_MAX through nn.h's dispatch, the shorter
 * ones through the kernel itself. `make test` runs it on the AVX2 and plain
 * C paths too (ISA_TESTS).
 *
 * The bound (u = 2^-24, g(n) = n u / (1 - n u)), first order in u, for
 * row i of a head, scores s_ij = fl(fl(q_i.k_j) * scale):
 *   score error      E_ij <= scale g(HS) sum_d |q_id k_jd| + u |s_ij|
 *   weight, relative r_i  <= 2 max_j E_ij             (s_ij and the max / lse)
 *                            + u (2 max_j |s_ij - lse_i| + 2 |lse_i|)
 *                            + u (T + 2 T / 64 + 16)   (row sum, rescalings,
 *                                                       exp within 4 ulp)
 *   Y_id             <= (r_i + g(T + 4)) sum_j a_ij |v_jd|
 *   dP_ij = dY_i.v_j <= g(HS) sum_d |dY_id v_jd|
 *   D_i = dY_i.Y_i   <= g(HS) sum_d |dY_id Y_id| + sum_d |dY_id| bY_id
 *   dS_ij            <= scale (r_i a_ij |dP_ij - D_i| + a_ij (bdP + bD_i))
 *                       + g(3) |dS_ij|
 *   dV_jd            <= sum_i (r_i + g(T)) a_ij |dY_id|
 *   dQ_id, dK_jd     <= sum bdS |k_jd| (|q_id|) + g(T) sum |dS k| (|dS q|)
 * The check allows twice the bound: the factor covers the second-order
 * terms dropped above, which are below u times the first-order ones.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/attention_impl.h"
#include "../core/nn.h"
#include "../core/system.h"
#include "check.h"

#define U 5.9604644775390625e-8 /* 2^-24 */
#define BLK 64                  /* the kernel's block (attention_blocked.c) */

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
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
static double g(double n) { return n * U / (1.0 - n * U); }

typedef struct {
    int B, T, C, NH, direct; /* direct: the blocked kernel called below the threshold */
} shape;

static void forward(const shape *s, float *out, float *y, float *saved, const float *qkv, float lambda)
{
    if (s->direct)
        xsa_nn_attention_blocked_forward(lambda != 0.0f ? &xsa_attention_xsa : &xsa_attention_sa, lambda,
                                         out, y, saved, qkv, s->B, s->T, s->C, s->NH);
    else xsa_nn_attention_forward(out, y, saved, qkv, s->B, s->T, s->C, s->NH, lambda, NULL);
}
static void backward(const shape *s, float *dqkv, float *scr, const float *dout, const float *qkv,
                     const float *saved, const float *y, float lambda)
{
    if (s->direct)
        xsa_nn_attention_blocked_backward(lambda != 0.0f ? &xsa_attention_xsa : &xsa_attention_sa, lambda,
                                          dqkv, scr, dout, qkv, saved, y, s->B, s->T, s->C, s->NH);
    else
        xsa_nn_attention_backward(dqkv, scr, dout, qkv, saved, y, s->B, s->T, s->C, s->NH, lambda);
}
static size_t saved_floats(const shape *s)
{
    return s->direct ? xsa_nn_attention_blocked_saved_floats(s->B, s->T, s->C, s->NH)
                     : xsa_nn_attention_saved_floats(s->B, s->T, s->C, s->NH);
}
static size_t scratch_floats(const shape *s)
{
    return s->direct ? xsa_nn_attention_blocked_scratch_floats(s->B, s->T, s->C, s->NH)
                     : xsa_nn_attention_scratch_floats(s->B, s->T, s->C, s->NH);
}

/* The reference of one head: weights a[T,T], their bound r[T], in double */
typedef struct {
    double *a, *r;
    const float *q, *k, *v; /* rows of stride 3C */
    int T, HS, C3;
    double scale;
} head_ref;

static void ref_weights(head_ref *h)
{
    int T = h->T, HS = h->HS, C3 = h->C3;
    for (int i = 0; i < T; i++) {
        double *a = h->a + (size_t)i * T, emax = 0.0, mx = -INFINITY, l = 0.0;
        for (int j = 0; j <= i; j++) {
            double s = 0.0, sa = 0.0;
            for (int d = 0; d < HS; d++) {
                double p = (double)h->q[(size_t)i * C3 + d] * h->k[(size_t)j * C3 + d];
                s += p;
                sa += fabs(p);
            }
            a[j] = s * h->scale;
            emax = fmax(emax, h->scale * g(HS) * sa + U * fabs(a[j]));
            mx = fmax(mx, a[j]);
        }
        for (int j = 0; j <= i; j++) l += exp(a[j] - mx);
        double lse = mx + log(l), dmax = 0.0;
        for (int j = 0; j <= i; j++) {
            dmax = fmax(dmax, fabs(a[j] - lse));
            a[j] = exp(a[j] - lse);
        }
        for (int j = i + 1; j < T; j++) a[j] = 0.0;
        h->r[i] = 2 * emax + U * (2 * dmax + 2 * fabs(lse)) + U * (T + 2.0 * T / BLK + 16);
    }
}

/* worst |got - want| / bound over n values, and whether any exceeds 2x */
typedef struct {
    double worst;
    int bad;
} ratio;
static void take(ratio *r, double got, double want, double bound)
{
    double e = fabs(got - want), q = e / (bound > 0 ? bound : 1e-300);
    if (e > 2 * bound) r->bad++;
    if (q > r->worst && isfinite(q)) r->worst = q;
    if (!isfinite(got)) r->bad++;
}

/* Forward Y and SA's backward of one head against the reference; dY = dout */
static void check_head(head_ref *h, const float *yk, const float *dy, int C, const float *dq,
                       ratio *ry, ratio *rd)
{
    int T = h->T, HS = h->HS, C3 = h->C3;
    double *dS = malloc(sizeof(double) * (size_t)T * T);
    double *bS = malloc(sizeof(double) * (size_t)T * T);
    for (int i = 0; i < T; i++) {
        const double *a = h->a + (size_t)i * T;
        double D = 0.0, bD = 0.0;
        for (int d = 0; d < HS; d++) {
            double yr = 0.0, by = 0.0;
            for (int j = 0; j <= i; j++) {
                yr += a[j] * h->v[(size_t)j * C3 + d];
                by += a[j] * fabs(h->v[(size_t)j * C3 + d]);
            }
            by *= h->r[i] + g(T + 4);
            take(ry, yk[(size_t)i * C + d], yr, by);
            double yd = dy[(size_t)i * C + d];
            D += yd * yr;
            bD += g(HS) * fabs(yd * yk[(size_t)i * C + d]) + fabs(yd) * by;
        }
        for (int j = 0; j <= i; j++) {
            double p = 0.0, bp = 0.0;
            for (int d = 0; d < HS; d++) {
                double t = (double)dy[(size_t)i * C + d] * h->v[(size_t)j * C3 + d];
                p += t;
                bp += g(HS) * fabs(t);
            }
            dS[(size_t)i * T + j] = a[j] * (p - D) * h->scale;
            bS[(size_t)i * T + j] = h->scale * (h->r[i] * a[j] * fabs(p - D) + a[j] * (bp + bD)) +
                                    g(3) * fabs(dS[(size_t)i * T + j]);
        }
    }
    for (int t = 0; t < T; t++)
        for (int d = 0; d < HS; d++) {
            double q = 0, bq = 0, k = 0, bk = 0, v = 0, bv = 0;
            for (int j = 0; j <= t; j++) { /* dQ_t = sum_j dS_tj k_j */
                double kk = h->k[(size_t)j * C3 + d], ds = dS[(size_t)t * T + j];
                q += ds * kk;
                bq += bS[(size_t)t * T + j] * fabs(kk) + g(T) * fabs(ds * kk);
            }
            for (int i = t; i < T; i++) { /* dK_t, dV_t: sums over the rows that see t */
                double qq = h->q[(size_t)i * C3 + d], ds = dS[(size_t)i * T + t];
                double a = h->a[(size_t)i * T + t], yd = dy[(size_t)i * C + d];
                k += ds * qq;
                bk += bS[(size_t)i * T + t] * fabs(qq) + g(T) * fabs(ds * qq);
                v += a * yd;
                bv += (h->r[i] + g(T)) * a * fabs(yd);
            }
            take(rd, dq[(size_t)t * C3 + d], q, bq);
            take(rd, dq[(size_t)t * C3 + C3 / 3 + d], k, bk);
            take(rd, dq[(size_t)t * C3 + 2 * (C3 / 3) + d], v, bv);
        }
    free(dS); free(bS);
}

/* SA forward and backward of shape s against the double reference */
static void test_reference(shape s)
{
    int B = s.B, T = s.T, C = s.C, NH = s.NH, HS = C / NH, C3 = 3 * C;
    size_t no = (size_t)B * T * C, nq = no * 3;
    float *qkv = randv(nq, 1.5), *dout = randv(no, 1.0), *out = zerov(no), *y = zerov(no);
    float *saved = zerov(saved_floats(&s)), *scr = zerov(scratch_floats(&s)), *dq = zerov(nq);
    forward(&s, out, y, saved, qkv, 0.0f);
    backward(&s, dq, scr, dout, qkv, saved, y, 0.0f);
    CHECK(memcmp(out, y, no * sizeof(float)) == 0, "SA T=%d: out is y", T);
    head_ref h = {malloc(sizeof(double) * (size_t)T * T), malloc(sizeof(double) * T), NULL, NULL,
                  NULL, T, HS, C3, 1.0f / sqrtf((float)HS)};
    ratio ry = {0, 0}, rd = {0, 0};
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < NH; hh++) {
            size_t o = (size_t)b * T * C3 + hh * HS;
            h.q = qkv + o, h.k = qkv + o + C, h.v = qkv + o + 2 * C;
            ref_weights(&h);
            size_t oy = (size_t)b * T * C + hh * HS;
            check_head(&h, y + oy, dout + oy, C, dq + o, &ry, &rd);
        }
    printf("  B=%d T=%d C=%d NH=%d%s: worst error / bound: y %.3g, dqkv %.3g\n", B, T, C, NH,
           s.direct ? " (kernel)" : "", ry.worst, rd.worst);
    CHECK(ry.bad == 0, "blocked forward T=%d: %d values outside twice the bound", T, ry.bad);
    CHECK(rd.bad == 0, "blocked backward T=%d: %d values outside twice the bound", T, rd.bad);
    free(h.a); free(h.r); free(qkv); free(dout); free(out); free(y); free(saved); free(scr); free(dq);
}

/* ---- XSA's gradient by finite differences, through the dispatch ---- */
static double loss_xsa(const shape *s, const float *qkv, const float *r, float *out, float *y,
                       float *saved, float lambda)
{
    forward(s, out, y, saved, qkv, lambda);
    double l = 0;
    for (size_t i = 0; i < (size_t)s->B * s->T * s->C; i++) l += (double)out[i] * r[i];
    return l;
}

static void test_fd(float lambda)
{
    shape s = {1, XSA_NN_ATTN_FULL_MAX + 1, 4, 2, 0};
    size_t no = (size_t)s.B * s.T * s.C, nq = 3 * no;
    float *qkv = randv(nq, 1.0), *r = randv(no, 1.0), *out = zerov(no), *y = zerov(no);
    float *saved = zerov(saved_floats(&s)), *scr = zerov(scratch_floats(&s)), *dq = zerov(nq);
    loss_xsa(&s, qkv, r, out, y, saved, lambda);
    backward(&s, dq, scr, r, qkv, saved, y, lambda);
    /* Richardson over h and h/2 (as test_nn.c): what remains is the
     * forward's rounding over the step, near 1e-4 at these sizes */
    double worst = 0.0, gmax = 0.0, hs = 1e-2;
    for (int n = 0; n < 200; n++) {
        size_t i = (size_t)((urand() + 1.0) / 2.0 * nq) % nq;
        float keep = qkv[i];
        double d[2];
        for (int k = 0; k < 2; k++) {
            double h = k ? hs / 2 : hs;
            qkv[i] = (float)(keep + h);
            double hp = (double)qkv[i] - keep, lp = loss_xsa(&s, qkv, r, out, y, saved, lambda);
            qkv[i] = (float)(keep - h);
            double hm = keep - (double)qkv[i], lm = loss_xsa(&s, qkv, r, out, y, saved, lambda);
            d[k] = (lp - lm) / (hp + hm);
        }
        qkv[i] = keep;
        double num = (4 * d[1] - d[0]) / 3;
        worst = fmax(worst, fabs(num - dq[i]));
        gmax = fmax(gmax, fabs(dq[i]));
    }
    printf("  XSA lambda %g T=%d: max |fd - grad| %.3g (max |grad| %.3g)\n", lambda, s.T, worst, gmax);
    CHECK(worst <= 2e-3 * fmax(1.0, gmax), "blocked XSA lambda %g: finite differences differ by %g",
          lambda, worst);
    CHECK(gmax > 0.0, "blocked XSA gradient is zero");
    free(qkv); free(r); free(out); free(y); free(saved); free(scr); free(dq);
}

/* ---- threads: the units split in halves give the bits of one thread ---- */
static void test_threads(shape s, float lambda)
{
    size_t no = (size_t)s.B * s.T * s.C, nq = 3 * no, ns = saved_floats(&s);
    float *qkv = randv(nq, 1.0), *dout = randv(no, 1.0), *d0 = randv(nq, 1.0);
    float *out[2], *y[2], *sv[2], *dq[2];
    int threads = xsa_threads();
    for (int k = 0; k < 2; k++) {
        out[k] = zerov(no), y[k] = zerov(no), sv[k] = zerov(ns), dq[k] = malloc(nq * sizeof(float));
        memcpy(dq[k], d0, nq * sizeof(float));
        float *scr = zerov(scratch_floats(&s));
        xsa_set_threads(k + 1);
        forward(&s, out[k], y[k], sv[k], qkv, lambda);
        backward(&s, dq[k], scr, dout, qkv, sv[k], y[k], lambda);
        free(scr);
    }
    xsa_set_threads(threads);
    size_t nl = (size_t)s.B * s.NH * s.T; /* the log-sum-exps; the rest is working space */
    CHECK(memcmp(out[0], out[1], no * sizeof(float)) == 0 && memcmp(y[0], y[1], no * sizeof(float)) == 0 &&
              memcmp(sv[0], sv[1], nl * sizeof(float)) == 0,
          "blocked forward B=%d NH=%d lambda %g: 2 threads differ from 1", s.B, s.NH, lambda);
    CHECK(memcmp(dq[0], dq[1], nq * sizeof(float)) == 0,
          "blocked backward B=%d NH=%d lambda %g: 2 threads differ from 1", s.B, s.NH, lambda);
    for (int k = 0; k < 2; k++) {
        free(out[k]); free(y[k]); free(sv[k]); free(dq[k]);
    }
    free(qkv); free(dout); free(d0);
}

/* ---- the probe's self-attention and the recomputed weights ---- */
static void test_probe_weights(void)
{
    enum { B = 2, T = XSA_NN_ATTN_FULL_MAX + 9, C = 8, NH = 2, HS = C / NH, C3 = 3 * C };
    size_t no = (size_t)B * T * C;
    float *qkv = randv(3 * no, 1.5), *out = zerov(no), *y = zerov(no);
    float *sv = zerov(xsa_nn_attention_saved_floats(B, T, C, NH));
    float *w = zerov((size_t)B * NH * T * T);
    double pr[NH * XSA_NN_PROBE_N];
    xsa_nn_attention_forward(out, y, sv, qkv, B, T, C, NH, 1.0f, pr);
    xsa_nn_attention_weights(w, qkv, sv, B, T, C, NH);
    head_ref h = {malloc(sizeof(double) * T * T), malloc(sizeof(double) * T), NULL, NULL, NULL, T,
                  HS, C3, 1.0f / sqrtf((float)HS)};
    ratio rw = {0, 0};
    int upper = 0;
    for (int hh = 0; hh < NH; hh++) {
        double sa = 0.0, bsa = 0.0;
        for (int b = 0; b < B; b++) {
            size_t o = (size_t)b * T * C3 + hh * HS;
            h.q = qkv + o, h.k = qkv + o + C, h.v = qkv + o + 2 * C;
            ref_weights(&h);
            const float *wb = w + ((size_t)b * NH + hh) * T * T;
            for (int i = 0; i < T; i++) {
                for (int j = 0; j < T; j++) {
                    double a = h.a[(size_t)i * T + j];
                    if (j > i) upper += wb[(size_t)i * T + j] != 0.0f;
                    else take(&rw, wb[(size_t)i * T + j], a, h.r[i] * a + U);
                }
                sa += h.a[(size_t)i * T + i];
                bsa += h.r[i] * h.a[(size_t)i * T + i] + U;
            }
        }
        sa /= B * T, bsa /= B * T;
        CHECK(fabs(pr[hh * XSA_NN_PROBE_N + XSA_NN_PROBE_SELF_ATTN] - sa) <= 2 * bsa + 1e-15,
              "probe a_ii head %d: %.9g vs %.9g", hh, pr[hh * XSA_NN_PROBE_N + XSA_NN_PROBE_SELF_ATTN], sa);
    }
    CHECK(rw.bad == 0 && upper == 0, "recomputed weights: %d outside the bound, %d above the diagonal",
          rw.bad, upper);
    /* Z is the projection of the kernel's own Y, to the bit */
    int same = 1;
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int hh = 0; hh < NH; hh++) {
            float z[HS];
            xsa_nn_xsa_project(z, y + bt * C + hh * HS, qkv + bt * C3 + 2 * C + hh * HS, HS, 1.0f);
            same &= memcmp(z, out + bt * C + hh * HS, sizeof z) == 0;
        }
    CHECK(same, "blocked XSA: out is the projection of y");
    free(h.a); free(h.r); free(qkv); free(out); free(y); free(sv); free(w);
}

int main(void)
{
    int F = XSA_NN_ATTN_FULL_MAX;
    test_reference((shape){1, 1, 6, 2, 1});      /* one position */
    test_reference((shape){2, 65, 6, 2, 1});     /* a block and one; HS 3 */
    test_reference((shape){1, 130, 16, 1, 1});   /* HS 16: whole vectors */
    test_reference((shape){1, F + 1, 20, 2, 0}); /* just above the threshold; HS 10 */
    test_reference((shape){2, 300, 24, 3, 0});   /* a ragged tail; HS 8 */
    test_fd(0.0f);
    test_fd(1.0f);
    test_fd(-0.6f);
    test_threads((shape){1, 300, 24, 3, 0}, 0.0f); /* odd units: uneven halves */
    test_threads((shape){2, 270, 16, 2, 0}, 0.5f);
    test_probe_weights();
    return check_done("test_attention");
}
