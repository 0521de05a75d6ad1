/*
 * test_simd.c: the SIMD vocabulary (core/simd.h) and the kernels written over
 * it, at the ISA this build targets. `make test` also builds it for the
 * narrower ISAs the CPU runs (build-isa-avx2, build-isa-c), so each check
 * below holds on every path.
 *
 * Method: each vector operation against the scalar C operation per lane,
 * bit for bit; then the kernels against scalar models of what their vector
 * path computes, bit for bit. Where two vector paths must agree (vf_exp,
 * the lm_head's block statistics, AdamW) both are checked against the same
 * scalar model, so they agree with each other. Not here: accuracy against
 * double references (test_nn.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/gemm.h"
#include "../core/matmul_bf16.h"
#include "../core/nn.h"
#include "../core/optim.h"
#include "../core/system.h"
#include "../core/simd.h"
#include "../core/tensor.h"
#include "../core/vec.h"
#include "check.h"

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;
static float frand(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---- the operations, lane by lane ----------------------------------------- */

/* each operation against the scalar one, lane by lane; the multiply-add's rounding */
static void ops_lanes(void)
{
    float a[VF_W], b[VF_W], c[VF_W], o[VF_W];
    int bad = 0;
    for (int rep = 0; rep < 2000; rep++) {
        for (int i = 0; i < VF_W; i++) {
            a[i] = frand(-100, 100);
            b[i] = frand(-3, 3);
            c[i] = frand(0, 50);
        }
        if (rep == 0) a[0] = -0.0f;
        vf va = vf_load(a), vb = vf_load(b), vc = vf_load(c);
#define LANES(expr, ref)                                                      \
    do {                                                                      \
        vf_store(o, (expr));                                                  \
        for (int i = 0; i < VF_W; i++) bad += !same(o[i], (ref));             \
    } while (0)
        LANES(vf_add(va, vb), a[i] + b[i]);
        LANES(vf_sub(va, vb), a[i] - b[i]);
        LANES(vf_mul(va, vb), a[i] * b[i]);
        LANES(vf_div(va, vb), a[i] / b[i]);
        LANES(vf_sqrt(vc), sqrtf(c[i]));
        LANES(vf_abs(va), fabsf(a[i]));
        LANES(vf_max(va, vb), a[i] > b[i] ? a[i] : b[i]);
        LANES(vf_min(va, vb), a[i] < b[i] ? a[i] : b[i]);
        LANES(vf_round(vb), nearbyintf(b[i]));
        LANES(vf_scale2(vb, vf_round(va)), ldexpf(b[i], (int)nearbyintf(a[i])));
        /* the vector multiply-add is the tails' sf_fmadd: fused where the
         * ISA has FMA, two roundings in plain C */
        LANES(vf_fmadd(va, vb, vc), sf_fmadd(a[i], b[i], c[i]));
        LANES(vf_fnmadd(va, vb, vc), sf_fmadd(-a[i], b[i], c[i]));
        LANES(vf_select(vf_lt(va, vf_zero()), vb, vc), a[i] < 0 ? b[i] : c[i]);
#undef LANES
    }
    CHECK(bad == 0, "%d lanes differ from the scalar operation", bad);
    /* a vector ISA's multiply-add rounds once: (1+u)(1-u) - 1 = -u^2 exactly */
    float f;
    vf_store(o, vf_fmadd(vf_set1(1.0f + 0x1p-23f), vf_set1(1.0f - 0x1p-23f), vf_set1(-1.0f)));
    f = o[0];
    CHECK(XSA_SIMD ? same(f, -0x1p-46f) : same(f, 0.0f), "multiply-add rounding: %a", f);
}

/* masks: lanes [0, n) read, the others read 0 and are left unwritten */
static void ops_masks(void)
{
    float o[VF_W];
    for (int n = 1; n <= VF_W; n++) {
        float src[VF_W], dst[VF_W];
        for (int i = 0; i < VF_W; i++) {
            src[i] = (float)(i + 1);
            dst[i] = -7.0f;
        }
        vmask k = vf_mask(n);
        vf_store(o, vf_load_mask(k, src));
        vf_store_mask(dst, k, vf_add(vf_load_mask(k, src), vf_set1(0.5f)));
        int ok = 1;
        for (int i = 0; i < VF_W; i++) {
            ok &= same(o[i], i < n ? src[i] : 0.0f);
            ok &= same(dst[i], i < n ? src[i] + 0.5f : -7.0f);
        }
        CHECK(ok, "masked load/store of %d lanes", n);
        uint16_t h[VF_W];
        for (int i = 0; i < VF_W; i++) h[i] = 0xBEEF;
        vf_store_bf16_mask(h, k, vf_load(src));
        ok = 1;
        for (int i = 0; i < VF_W; i++) ok &= h[i] == (i < n ? sf_to_bf16(src[i]) : 0xBEEF);
        CHECK(ok, "bf16 store of %d lanes", n);
    }
}

/* the bf16 stores, unmasked and for normal lanes; bf16 rounding */
static void ops_bf16(void)
{
    /* the unmasked bf16 store: every lane as sf_to_bf16, ties (both ways),
     * a denormal, a value that rounds up into the next binade, and the
     * largest finite float (which rounds to infinity's bits), written
     * exactly VF_W elements */
    {
        const float cases[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-140f, 0x1.ffffp-1f,
                               -2.5f, 3.4028235e38f, 0.0f, -0x1p-130f};
        float src[VF_W];
        uint16_t h[VF_W + 1];
        for (int i = 0; i < VF_W; i++) src[i] = cases[i % 8] * (i < 8 ? 1.0f : 0.75f);
        h[VF_W] = 0xBEEF;
        vf_store_bf16(h, vf_load(src));
        int ok = h[VF_W] == 0xBEEF;
        for (int i = 0; i < VF_W; i++) ok &= h[i] == sf_to_bf16(src[i]);
        CHECK(ok, "bf16 store of all lanes");
    }
    /* the store for normal lanes and zeros (the hardware's conversion where
     * the CPU has avx512_bf16): the bits of sf_to_bf16 for 100,000 values
     * across the normal range, both signs, ties included (mantissas with
     * only their low 16 bits random) */
    {
        uint32_t st = 12345;
        int ok = 1;
        for (int r = 0; r < 100000 / VF_W; r++) {
            float src[VF_W];
            uint16_t h[VF_W + 1];
            for (int i = 0; i < VF_W; i++) {
                st = st * 1664525u + 1013904223u;
                uint32_t e = 1 + (st >> 8) % 254, sign = (st >> 4) & 1u, m = st >> 9;
                uint32_t bits = sign << 31 | e << 23 | (r % 3 ? m : (m & 0x7f0000u) | 0x8000u);
                memcpy(&src[i], &bits, sizeof bits);
            }
            if (r < 2) src[0] = r ? -0.0f : 0.0f;
            h[VF_W] = 0xBEEF;
            vf_store_bf16_normal(h, vf_load(src));
            ok &= h[VF_W] == 0xBEEF;
            for (int i = 0; i < VF_W; i++) ok &= h[i] == sf_to_bf16(src[i]);
        }
        CHECK(ok, "bf16 store of normal lanes");
    }
    /* bf16: round to nearest, ties to even */
    CHECK(sf_to_bf16(1.0f) == 0x3F80 && sf_to_bf16(1.0f + 0x1p-8f) == 0x3F80 &&
              sf_to_bf16(1.0f + 0x1p-8f + 0x1p-9f) == 0x3F81 && sf_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82,
          "bf16 rounding");
}

/* horizontal max over every lane; the sum of exactly representable
 * values does not depend on its order */
static void ops_horizontal(void)
{
    float a[VF_W];
    for (int i = 0; i < VF_W; i++) a[i] = (float)((i * 7) % VF_W) - 3.0f;
    CHECK(vf_hmax(vf_load(a)) == (float)(VF_W - 1) - 3.0f, "hmax");
    float want = 0;
    for (int i = 0; i < VF_W; i++) want += a[i];
    CHECK(vf_hsum(vf_load(a)) == want, "hsum");
}

static void test_ops(void)
{
    ops_lanes();
    ops_masks();
    ops_bf16();
    ops_horizontal();
}

/* ---- exp: every vector path computes the same scalar formula --------------- */

/* vf_exp's operations on one float, with the tails' multiply-add */
static float ref_exp(float x)
{
    x = -87.0f > x ? -87.0f : x;
    x = 88.0f < x ? 88.0f : x;
    float n = nearbyintf(x * 1.44269504088896341f);
    float r = sf_fmadd(-n, 0.693359375f, x);
    r = sf_fmadd(-n, -2.12194440e-4f, r);
    float p = 1.9875691500E-4f;
    p = sf_fmadd(p, r, 1.3981999507E-3f);
    p = sf_fmadd(p, r, 8.3334519073E-3f);
    p = sf_fmadd(p, r, 4.1665795894E-2f);
    p = sf_fmadd(p, r, 1.6666665459E-1f);
    p = sf_fmadd(p, r, 5.0000001201E-1f);
    p = sf_fmadd(p, r * r, r + 1.0f);
    return n == n ? ldexpf(p, (int)n) : p; /* (int)NaN is undefined */
}

static void test_exp(void)
{
    float x[VF_W], o[VF_W];
    long bad = 0, n = 0;
    double worst = 0;
    /* a dense sweep of [-100, 90] and every float bit pattern at a stride */
    for (long s = 0; s < 400000 + (1L << 20); s += VF_W) {
        for (int i = 0; i < VF_W; i++) {
            long t = s + i;
            if (t < 400000) {
                x[i] = -100.0f + 190.0f * (float)t / 400000.0f;
            } else {
                uint32_t u = (uint32_t)(t - 400000) * 4093u;
                memcpy(&x[i], &u, sizeof u);
            }
        }
        vf_store(o, vf_exp(vf_load(x)));
        for (int i = 0; i < VF_W; i++, n++) {
            float r = ref_exp(x[i]);
            if (!same(o[i], r) && !(isnan(o[i]) && isnan(r))) bad++;
            if (x[i] >= -80 && x[i] <= 80) {
                double e = fabs(o[i] - exp(x[i])) / exp(x[i]);
                if (e > worst) worst = e;
            }
        }
    }
    printf("  vf_exp (VF_W %d): %ld values, max relative error %.3g in [-80, 80]\n", VF_W, n, worst);
    CHECK(bad == 0, "vf_exp differs from its scalar formula at %ld of %ld values", bad, n);
    CHECK(worst < 3e-7, "vf_exp relative error %g", worst);
    float in[3] = {NAN, -INFINITY, 0.0f}, out[3];
    for (int i = 0; i < 3; i++) {
        float v[VF_W];
        for (int k = 0; k < VF_W; k++) v[k] = in[i];
        vf_store(v, vf_exp(vf_load(v)));
        out[i] = v[0];
    }
    CHECK(isnan(out[0]) && out[1] >= 0 && out[1] < 1e-37f && out[2] == 1.0f, "exp(NaN, -inf, 0): %g %g %g",
          out[0], out[1], out[2]);
}

/* ---- dot and axpy ---------------------------------------------------------- */

static void test_dot_axpy(void)
{
    float a[77], b[77], y[77], y0[77];
    for (int i = 0; i < 77; i++) {
        a[i] = frand(-1, 1);
        b[i] = frand(-1, 1);
        y0[i] = frand(-1, 1);
    }
    int bad = 0;
    for (int n = 0; n <= 77; n++) {
        memcpy(y, y0, sizeof y);
        axpy(y, 0.37f, a, n);
        for (int i = 0; i < 77; i++) bad += !same(y[i], i < n ? sf_fmadd(0.37f, a[i], y0[i]) : y0[i]);
        /* dot: VF_W partial sums, then the horizontal sum, then the tail;
         * a sum of one vector's lanes is order-free here (VF_W == 1, or
         * the values below) */
        float s = 0;
        for (int i = 0; i < n; i++) s = sf_fmadd(a[i], b[i], s);
        if (VF_W == 1) bad += !same(dot(a, b, n), s);
        CHECK(fabsf(dot(a, b, n) - s) <= 1e-5f, "dot n=%d: %g vs %g", n, dot(a, b, n), s);
    }
    CHECK(bad == 0, "axpy (and the one-lane dot): %d values differ", bad);
    /* integers: every order of the sum is exact */
    for (int i = 0; i < 77; i++) {
        a[i] = (float)(i % 5);
        b[i] = (float)(i % 3 + 1);
    }
    double want = 0;
    for (int n = 0; n <= 77; n++) {
        if (n > 0) want += (double)a[n - 1] * b[n - 1];
        CHECK(dot(a, b, n) == (float)want, "dot of integers, n=%d", n);
    }
}

/* vec.h's row updates: each element the scalar expression (the product
 * rounded, then the add or subtract), at every n, full vectors and tails,
 * and nothing past n written */
static void test_row_updates(void)
{
    float x[77], y0[77], y[77];
    for (int i = 0; i < 77; i++) {
        x[i] = frand(-3, 3);
        y0[i] = frand(-3, 3);
    }
    volatile float a = 0.8137f; /* no constant folding of the reference */
    int bad = 0;
    for (int n = 0; n <= 77; n++)
        for (int op = 0; op < 3; op++) {
            memcpy(y, y0, sizeof y);
            if (op == 0) row_scale(y, a, x, n);
            else row_add_scaled(y, a, x, n, op == 2);
            for (int i = 0; i < 77; i++) {
                float p = a * x[i], want = i >= n ? y0[i] : op == 0 ? p : op == 1 ? y0[i] + p : y0[i] - p;
                bad += !same(y[i], want);
            }
        }
    float f[77];
    for (int i = 0; i < 77; i++) f[i] = frand(-2, 2);
    for (int n = 0; n <= 77; n++)
        for (int add = 0; add < 2; add++) {
            memcpy(y, y0, sizeof y);
            row_mul(y, f, x, n, add);
            for (int i = 0; i < 77; i++) {
                float p = f[i] * x[i];
                bad += !same(y[i], i >= n ? y0[i] : add ? y0[i] + p : p);
            }
        }
    CHECK(bad == 0, "row_scale, row_add_scaled, row_mul: %d values differ from the scalar expressions", bad);
}

/* ---- AdamW: the same weights at every width -------------------------------- */

/* n values (full vectors and a tail at every width) on `threads` threads:
 * at (1 << 20) + 53 and 2 threads the update runs in two halves (optim.c),
 * whose every lane must still be the scalar formula */
static void test_adamw_n(int n, int threads)
{
    int64_t shape[1] = {n};
    xsa_tensor *p = xsa_tensor_zeros(XSA_FLOAT32, 1, shape);
    xsa_tensor *g = xsa_tensor_zeros(XSA_FLOAT32, 1, shape);
    float *rw = malloc(sizeof(float) * n), *rm = calloc(n, sizeof(float)), *rv = calloc(n, sizeof(float));
    CHECK(p && g && rw && rm && rv, "tensors");
    if (!p || !g || !rw || !rm || !rv) return;
    int had = xsa_threads();
    xsa_set_threads(threads);
    p->grad = g;
    float *w = xsa_tensor_f32(p), *gd = xsa_tensor_f32(g);
    for (int i = 0; i < n; i++) rw[i] = w[i] = frand(-1, 1);
    xsa_adamw *o = xsa_adamw_new(1, &p, 1e-2, 0.9, 0.999, 1e-8, 0.1);
    CHECK(o != NULL, "adamw_new");
    long bad = 0;
    for (int t = 1; t <= 4; t++) {
        for (int i = 0; i < n; i++) gd[i] = frand(-2, 2);
        if (xsa_adamw_step(o) != 0) bad++;
        /* optim.h's formula in float, each operation rounded */
        float decay = (float)(1.0 - 1e-2 * 0.1), a1 = (float)(1.0 - 0.9), b2 = (float)0.999,
              a2 = (float)(1.0 - 0.999);
        float step = (float)(1e-2 / (1.0 - pow(0.9, t))), bc2 = (float)sqrt(1.0 - pow(0.999, t));
        for (int i = 0; i < n; i++) {
            float gk = gd[i], wk = rw[i] * decay;
            rm[i] = rm[i] + a1 * (gk - rm[i]);
            rv[i] = rv[i] * b2 + a2 * gk * gk;
            float den = sqrtf(rv[i]) / bc2 + (float)1e-8;
            rw[i] = wk - step * (rm[i] / den);
        }
        for (int i = 0; i < n; i++) bad += !same(w[i], rw[i]) || !same(o->m[0][i], rm[i]) || !same(o->v[0][i], rv[i]);
    }
    CHECK(bad == 0, "adamw, %d values, %d threads: %ld values differ from the scalar formula", n, threads, bad);
    xsa_set_threads(had);
    xsa_adamw_free(o);
    xsa_tensor_free(p); /* frees its grad */
    free(rw); free(rm); free(rv);
}

static void test_adamw(void)
{
    test_adamw_n(53, 1);
    test_adamw_n((1 << 20) + 53, 2);
}

/* ---- float32 to bf16 in two halves ------------------------------------------ */

/* From 1M values the conversion runs in two halves on two threads; the
 * halves meet on a 64-value boundary, so 2 threads give 1 thread's bits,
 * NaNs with a payload only in the low bits included (the vector path and the
 * scalar tail treat those differently, so a shifted boundary would show). */
static void test_bf16_convert_threads(void)
{
    size_t n = ((size_t)1 << 20) + 37;
    float *src = malloc(n * sizeof(float));
    uint16_t *h1 = malloc(n * sizeof(uint16_t)), *h2 = malloc(n * sizeof(uint16_t));
    CHECK(src && h1 && h2, "buffers");
    if (!src || !h1 || !h2) return;
    uint32_t nan_low = 0x7f800001u;
    for (size_t i = 0; i < n; i++) src[i] = frand(-4, 4);
    for (size_t i = 0; i < n; i += 4099) memcpy(src + i, &nan_low, sizeof nan_low);
    for (size_t i = n / 2 - 80; i < n / 2 + 80; i++) memcpy(src + i, &nan_low, sizeof nan_low);
    memcpy(src + n - 1, &nan_low, sizeof nan_low);
    int had = xsa_threads();
    xsa_set_threads(1);
    xsa_bf16_from_f32(h1, src, n);
    xsa_set_threads(2);
    xsa_bf16_from_f32(h2, src, n);
    xsa_set_threads(had);
    CHECK(memcmp(h1, h2, n * sizeof(uint16_t)) == 0, "bf16 conversion: 2 threads differ from 1");
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (src[i] == src[i]) bad += h2[i] != sf_to_bf16(src[i]);
    CHECK(bad == 0, "bf16 conversion: %ld values not rounded to nearest even", bad);
    CHECK((h2[n - 1] & 0x7f80u) == 0x7f80u && (h2[n - 1] & 0x7fu), "a NaN in the scalar tail stays a NaN");
    free(src); free(h1); free(h2);
}

/* ---- the cross-entropy backward's scaled copy ------------------------------ */

static void test_ce_backward(void)
{
    enum { N = 3, V = 45 };
    float pr[N * V], ps[N], d[N * V];
    int32_t tg[N] = {0, 44, 17};
    for (int i = 0; i < N * V; i++) pr[i] = frand(0, 1);
    for (int n = 0; n < N; n++) ps[n] = frand(0.01f, 0.1f);
    xsa_nn_crossentropy_backward(d, pr, ps, tg, 1.5f, N, V, 1);
    int bad = 0;
    float g = 1.5f / (float)N;
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) {
            float want = pr[n * V + v] * (ps[n] * g);
            if (v == tg[n]) want -= g;
            bad += !same(d[n * V + v], want);
        }
    CHECK(bad == 0, "crossentropy backward: %d values differ", bad);
}

/* ---- the lm_head's block statistics: one algorithm on every vector path ----
 * With one block of the vocabulary and the loss per row, loss = log(sum) +
 * max - logit[target], where the vector paths sum exp(l - max) per column
 * in float over 64 rows, those sums in double (whatever VF_W), and plain C
 * adds libm's expf in double. The logits come from the same xsa_sgemm
 * call as the kernel's (gemm.h: the same library, so the same bits), so the model below must give the kernel's bits. */
static void test_lmhead_block(void)
{
    enum { N = 37, C = 24, V = 200 };
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * V * C);
    float *lb = malloc(sizeof(float) * V * N), losses[N];
    int32_t tg[N];
    for (int i = 0; i < N * C; i++) x[i] = frand(-1, 1);
    for (int i = 0; i < V * C; i++) w[i] = frand(-1, 1);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 37) % V);
    CHECK(xsa_nn_lmhead_vblock(N, V) == V, "one block");
    size_t ns = xsa_nn_lmhead_ce_scratch_floats(N, C, V, N, 0, 1);
    float *scr = calloc(ns, sizeof(float));
    double loss = 0;
    CHECK(xsa_nn_lmhead_ce(&loss, NULL, NULL, losses, scr, x, w, tg, N, C, V, N, 1, NULL) == 0,
          "lmhead_ce");
    xsa_sgemm(0, 1, V, N, C, 1.0f, w, C, x, C, 0.0f, lb, N);
    int bad = 0;
    for (int c = 0; c < N; c++) {
        float m = -INFINITY;
        for (int v = 0; v < V; v++)
            if (XSA_SIMD ? !(m > lb[v * N + c]) : lb[v * N + c] > m) m = lb[v * N + c];
        double s = 0;
        float acc = 0;
        for (int v = 0; v < V; v++) {
            if (XSA_SIMD) {
                acc += ref_exp(lb[v * N + c] - m);
                if (v % 64 == 63 || v == V - 1) {
                    s += acc;
                    acc = 0;
                }
            } else {
                s += expf(lb[v * N + c] - m);
            }
        }
        double l = (log(s) + m) - lb[tg[c] * N + c];
        bad += !same(losses[c], (float)l);
    }
    CHECK(bad == 0, "lm_head block statistics: %d of %d rows' losses differ from the model", bad, N);
    free(x);
    free(w);
    free(lb);
    free(scr);
}

/* the double vectors (XSA_SIMD_F64), lane by lane against C on doubles */
static void test_vd_ops(void)
{
#if XSA_SIMD_F64
    double a[VD_W], b[VD_W], c[VD_W], o[VD_W];
    int bad = 0;
    for (int rep = 0; rep < 4000; rep++) {
        for (int i = 0; i < VD_W; i++) {
            double m = (double)frand(0.5f, 1.0f) + (double)frand(0, 1) * 0x1p-30;
            a[i] = ldexp(m, (int)frand(-60, 60));
            b[i] = (double)frand(-3, 3) + (double)frand(-1, 1) * 0x1p-35;
            c[i] = (double)frand(-50, 50);
        }
        vd va = vd_load(a), vb = vd_load(b), vc = vd_load(c);
#define DLANES(expr, ref)                                                      \
    do {                                                                       \
        vd_store(o, (expr));                                                   \
        for (int i = 0; i < VD_W; i++) bad += memcmp(&o[i], &(double){(ref)}, 8) != 0; \
    } while (0)
        DLANES(vd_add(va, vb), a[i] + b[i]);
        DLANES(vd_sub(va, vb), a[i] - b[i]);
        DLANES(vd_mul(va, vb), a[i] * b[i]);
        DLANES(vd_div(vb, va), b[i] / a[i]);
        DLANES(vd_sqrt(va), sqrt(a[i]));
        DLANES(vd_abs(vb), fabs(b[i]));
        DLANES(vd_neg(vb), -b[i]);
        DLANES(vd_fnmadd(va, vb, vc), fma(-a[i], b[i], c[i]));
        DLANES(vd_round(vc), nearbyint(c[i]));
        DLANES(vd_getexp(va), (double)(ilogb(a[i])));
        DLANES(vd_getmant(va), ldexp(a[i], -ilogb(a[i])));
        DLANES(vd_select(vd_ge(vb, vc), va, vc), b[i] >= c[i] ? a[i] : c[i]);
        DLANES(vd_select(vd_or(vd_lt(vb, vc), vd_eq(va, va)), va, vc), a[i]);
#undef DLANES
        float f[2 * VD_W];
        vd_store_f32_zip(f, va, vb);
        int eq = vd_f32_equal(va, vd_mul(va, vd_set1(1.0 + 0x1p-40)));
        for (int i = 0; i < VD_W; i++) {
            bad += !same(f[2 * i], (float)a[i]) || !same(f[2 * i + 1], (float)b[i]);
            bad += ((eq >> i) & 1) != ((float)a[i] == (float)(a[i] * (1.0 + 0x1p-40)));
        }
        bad += vd_bits(vd_lt(vb, vc)) != ((b[0] < c[0]) | (b[1] < c[1]) << 1 | (b[2] < c[2]) << 2 |
                                         (b[3] < c[3]) << 3);
    }
    /* across a float rounding midpoint: 1 + 2^-24 is one */
    double mid = 1.0 + 0x1p-24;
    CHECK(vd_f32_equal(vd_set1(mid - 0x1p-50), vd_set1(mid + 0x1p-50)) == 0, "midpoint straddled");
    CHECK(vd_f32_equal(vd_set1(mid - 0x1p-50), vd_set1(mid - 0x1p-52)) == 0xf, "same side");
    CHECK(bad == 0, "double vector operations: %d lanes differ from C", bad);
#endif
}

int main(void)
{
    printf("  simd.h: VF_W %d, XSA_SIMD %d, GELU %d, BF16 %d, F64 %d\n", VF_W, XSA_SIMD,
           XSA_SIMD_GELU, XSA_SIMD_BF16, XSA_SIMD_F64);
    test_ops();
    test_vd_ops();
    test_exp();
    test_dot_axpy();
    test_row_updates();
    test_adamw();
    test_bf16_convert_threads();
    test_ce_backward();
    test_lmhead_block();
    return check_done("test_simd");
}
