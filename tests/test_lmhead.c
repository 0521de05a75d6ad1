/*
 * test_lmhead.c: the bits of the chunked lm_head + cross-entropy
 * (xsa_nn_lmhead_ce, core/lmhead.c), float32 and bf16, at 1 and 2 threads,
 * against a reference written from the order of operations it documents:
 * per chunk of rows and vocabulary block, the block's product, its maximum
 * and sum of exponentials (in float over 64 rows per column, those sums in
 * double, on the vector paths; each exponential in double in plain C), the
 * blocks joined in double, the factors rounded to float, dinp as the sum
 * over blocks in block order of factor x product (each product rounded
 * before its add) less g wte[target], dwte's products accumulated chunk by
 * chunk, then g x_i subtracted from the targets' rows in i order.
 *
 * test_nn checks the same function against an unfused two-step reference
 * within derived tolerances; those cannot see a change of the last bits,
 * and the study's records are reproducible only while those bits hold
 * (an exact refactor must keep them). The reference uses the same
 * primitives as the engine, each tested on its own: xsa_sgemm and the
 * bf16 products on one thread (test_gemm, test_nn), vf_exp (test_simd),
 * xsa_bf16_from_f32 and sf_to_bf16 (the inputs keep every exponential a normal
 * float: vcvtneps2bf16 would flush subnormals). Built for every SIMD path
 * the CPU can run (ISA_TESTS), whose exponentials differ.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/gemm.h"
#include "../core/matmul_bf16.h"
#include "../core/nn.h"
#include "../core/simd.h"
#include "../core/system.h"
#include "../core/xsa.h"
#include "check.h"

static float frand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 40) / (double)(1ULL << 24) - 0.5);
}

static float *randv(size_t n, float scale, unsigned long long seed)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = scale * frand(&seed);
    return v;
}

typedef struct {
    int N, C, V, R, VB;
    const float *x, *w;
    const int32_t *tg;
    xsa_bf16_mm *mm;    /* NULL: float32 */
    const uint16_t *w16; /* bf16 wte */
} lm_case;

/* the exponential of one float as a lane of the vector path computes it */
static float lane_exp(float x)
{
#if XSA_SIMD
    float o[VF_W];
    vf_store(o, vf_exp(vf_set1(x)));
    return o[0];
#else
    return expf(x);
#endif
}

static int product_failures; /* the reference's bf16 products that failed */

static void bf16_product(const lm_case *k, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, int acc, float *C, int ldc)
{
    if (xsa_bf16_gemm_on(k->mm, 1, 1, ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc) != 0 && !product_failures++)
        printf("  the reference's bf16 product: %s\n", xsa_last_error());
}

/* lb[nv][n] = w_b x^T, the block's logits transposed */
static void logits(const lm_case *k, float *lb, const uint16_t *x16, const float *x, int v0, int nv, int n)
{
    if (k->mm)
        bf16_product(k, 0, 1, nv, n, k->C, k->w16 + (size_t)v0 * k->C, k->C, x16, k->C, 0, lb, n);
    else
        xsa_sgemm(0, 1, nv, n, k->C, 1.0f, k->w + (size_t)v0 * k->C, k->C, x, k->C, 0.0f, lb, n);
}

/* Column c of a block: its maximum, its exponentials (into lb, or e16 in
 * bf16) and their sum. */
static void column_stats(const lm_case *k, float *lb, uint16_t *e16, int nv, int n, int c, float *mx,
                         double *sum)
{
    int vec = XSA_SIMD && (!k->mm || XSA_SIMD_BF16);
    float m = -INFINITY;
    for (int v = 0; v < nv; v++) m = fmaxf(m, lb[(size_t)v * n + c]);
    double s = 0.0;
    float part = 0.0f;
    for (int v = 0; v < nv; v++) {
        float l = lb[(size_t)v * n + c], e = vec ? lane_exp(l - m) : expf(l - m);
        if (k->mm) e16[(size_t)v * n + c] = sf_to_bf16(e);
        else lb[(size_t)v * n + c] = e;
        if (!vec) {
            s += e;
            continue;
        }
        part += e;
        if ((v + 1) % 64 == 0 || v == nv - 1) {
            s += part;
            part = 0.0f;
        }
    }
    *mx = m;
    *sum = s;
}

static double reference(const lm_case *k, float *dx, float *dw, float *losses)
{
    int N = k->N, C = k->C, V = k->V, R = k->R, VB = k->VB, nblk = (V + VB - 1) / VB, bf = k->mm != NULL;
    float g = 1.0f / (float)N;
    float *lg = malloc(sizeof(float) * (size_t)V * R), *mx = malloc(sizeof(float) * (size_t)nblk * R);
    float *fac = malloc(sizeof(float) * (size_t)nblk * R), *lt = malloc(sizeof(float) * (size_t)R);
    float *dt = malloc(sizeof(float) * (size_t)nblk * R * C), *xs = malloc(sizeof(float) * (size_t)R * C);
    double *sm = malloc(sizeof(double) * (size_t)nblk * R), total = 0.0;
    uint16_t *e16 = malloc(2 * (size_t)V * R), *x16 = malloc(2 * (size_t)R * C), *xs16 = malloc(2 * (size_t)R * C);
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        const float *x = k->x + (size_t)r0 * C;
        const int32_t *tg = k->tg + r0;
        xsa_bf16_from_f32(x16, x, (size_t)n * C);
        for (int b = 0; b < nblk; b++) {
            int v0 = b * VB, nv = V - v0 < VB ? V - v0 : VB;
            float *lb = lg + (size_t)v0 * n;
            logits(k, lb, x16, x, v0, nv, n);
            for (int c = 0; c < n; c++)
                if (tg[c] >= v0 && tg[c] < v0 + nv) lt[c] = lb[(size_t)(tg[c] - v0) * n + c];
            for (int c = 0; c < n; c++)
                column_stats(k, lb, e16 + (size_t)v0 * n, nv, n, c, &mx[(size_t)b * R + c], &sm[(size_t)b * R + c]);
            float *d = dt + (size_t)b * R * C; /* bf16: [C,n]; float32: [n,C] */
            if (bf)
                bf16_product(k, 1, 0, C, n, nv, k->w16 + (size_t)v0 * C, C, e16 + (size_t)v0 * n, n, 0, d, n);
            else
                xsa_sgemm(1, 0, n, C, nv, 1.0f, lb, n, k->w + (size_t)v0 * C, C, 0.0f, d, C);
        }
        for (int i = 0; i < n; i++) {
            double M = -INFINITY, S = 0.0;
            for (int b = 0; b < nblk; b++) M = fmax(M, mx[(size_t)b * R + i]);
            for (int b = 0; b < nblk; b++) S += sm[(size_t)b * R + i] * exp(mx[(size_t)b * R + i] - M);
            double lse = log(S) + M, l = lse - lt[i];
            losses[r0 + i] = (float)l;
            total += l;
            for (int b = 0; b < nblk; b++) fac[(size_t)b * R + i] = (float)(g * exp(mx[(size_t)b * R + i] - lse));
        }
        for (int b = 0; b < nblk; b++) {
            int v0 = b * VB, nv = V - v0 < VB ? V - v0 : VB;
            for (int i = 0; i < n; i++)
                for (int c = 0; c < C; c++) xs[(size_t)i * C + c] = fac[(size_t)b * R + i] * x[(size_t)i * C + c];
            float *dwb = dw + (size_t)v0 * C;
            if (bf) {
                xsa_bf16_from_f32(xs16, xs, (size_t)n * C);
                bf16_product(k, 0, 0, nv, C, n, e16 + (size_t)v0 * n, n, xs16, C, r0 > 0, dwb, C);
            } else {
                xsa_sgemm(0, 0, nv, C, n, 1.0f, lg + (size_t)v0 * n, n, xs, C, r0 > 0 ? 1.0f : 0.0f, dwb, C);
            }
        }
        for (int i = 0; i < n; i++)
            for (int c = 0; c < C; c++) {
                float s = 0.0f;
                for (int b = 0; b < nblk; b++) {
                    const float *d = dt + (size_t)b * R * C;
                    float p = fac[(size_t)b * R + i] * (bf ? d[(size_t)c * n + i] : d[(size_t)i * C + c]);
                    s = b ? s + p : p;
                }
                dx[(size_t)(r0 + i) * C + c] = s - g * k->w[(size_t)tg[i] * C + c];
            }
    }
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) dw[(size_t)k->tg[i] * C + c] -= g * k->x[(size_t)i * C + c];
    free(lg); free(mx); free(fac); free(lt); free(dt); free(xs); free(sm); free(e16); free(x16); free(xs16);
    return total / N;
}

/* bits that differ between a and b, and the first index of one */
static size_t differ(const float *a, const float *b, size_t n, size_t *first)
{
    size_t d = 0;
    for (size_t i = n; i-- > 0;)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            d++;
            *first = i;
        }
    return d;
}

static void check_case(const char *what, const lm_case *k)
{
    size_t nx = (size_t)k->N * k->C, nw = (size_t)k->V * k->C, at = 0;
    float *rx = malloc(nx * sizeof(float)), *rw = malloc(nw * sizeof(float)), *rl = malloc(sizeof(float) * k->N);
    product_failures = 0;
    double want = reference(k, rx, rw, rl);
    CHECK(product_failures == 0, "%s: %d of the reference's products failed", what, product_failures);
    xsa_nn_bf16 bf = {k->mm, k->w16};
    for (int threads = 1; threads <= 2; threads++) {
        float *dx = randv(nx, 1.0f, 5), *dw = randv(nw, 1.0f, 6), *ls = randv((size_t)k->N, 1.0f, 7);
        float *scr = malloc(sizeof(float) * xsa_nn_lmhead_ce_scratch_floats(k->N, k->C, k->V, k->R, k->mm != NULL,
                                                                            threads));
        double got = 0;
        CHECK(xsa_nn_lmhead_ce(&got, dx, dw, ls, scr, k->x, k->w, k->tg, k->N, k->C, k->V, k->R, threads,
                               k->mm ? &bf : NULL) == 0, "%s: %s", what, xsa_last_error());
        size_t d;
        const char *th = threads > 1 ? "threads" : "thread";
        CHECK(memcmp(&got, &want, sizeof got) == 0, "%s, %d %s: loss %.17g, the order gives %.17g", what,
              threads, th, got, want);
        CHECK((d = differ(ls, rl, (size_t)k->N, &at)) == 0, "%s, %d %s: %zu row losses differ (row %zu)",
              what, threads, th, d, at);
        CHECK((d = differ(dx, rx, nx, &at)) == 0, "%s, %d %s: %zu of dinp's %zu differ (first [%zu]: %.9g, %.9g)",
              what, threads, th, d, nx, at, dx[at], rx[at]);
        CHECK((d = differ(dw, rw, nw, &at)) == 0, "%s, %d %s: %zu of dwte's %zu differ (first [%zu]: %.9g, %.9g)",
              what, threads, th, d, nw, at, dw[at], rw[at]);
        free(dx); free(dw); free(ls); free(scr);
    }
    free(rx); free(rw); free(rl);
}

/* x uniform in [-2, 2), wte in [-0.5, 0.5): a logit's standard deviation
 * is sqrt(C) / 3, about 4 at C = 128, so no logit lies 87 below its
 * block's maximum and every exponential is a normal float. */
static void run_shape(const char *what, int N, int C, int V, int R, int VB, xsa_bf16_mm *mm)
{
    float *x = randv((size_t)N * C, 4.0f, 101), *w = randv((size_t)V * C, 1.0f, 102);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(((long)i * 7919 + 13) % V);
    tg[N - 1] = tg[0]; /* a target twice: its row of dwte gets both subtractions */
    uint16_t *w16 = malloc(2 * (size_t)V * C);
    xsa_bf16_from_f32(w16, w, (size_t)V * C);
    lm_case k = {N, C, V, R, VB, x, w, tg, mm, w16};
    CHECK(xsa_nn_lmhead_vblock(R, V) == VB, "%s: blocks of %d rows, not %d", what, xsa_nn_lmhead_vblock(R, V), VB);
    check_case(what, &k);
    printf("  %s: loss, row losses, dinp and dwte\n", what);
    free(x); free(w); free(tg); free(w16);
}

static void test_shapes(xsa_bf16_mm *mm)
{
    const char *p = mm ? "bf16" : "float32";
    char what[96];
    /* chunks of 150, 150 and 37 rows (whole column groups and a masked
     * one); blocks of 232 rows (3 x 64 + 40) and a last of 72; C = 72,
     * not a whole number of vectors */
    CHECK(xsa_nn_lmhead_set_blocking(0, 232) == 0, "set_blocking");
    snprintf(what, sizeof what, "%s, 337 x 72, V 1000 in blocks of 232", p);
    run_shape(what, 337, 72, 1000, 150, 232, mm);
    /* the study's: GPT-2's vocabulary, C = 128, the rule's blocking (two
     * chunks, 19 blocks, a last of 1873 rows) */
    CHECK(xsa_nn_lmhead_set_blocking(0, 0) == 0, "set_blocking");
    int R = xsa_nn_lmhead_rows(1 << 20, 50257, mm != NULL);
    snprintf(what, sizeof what, "%s, the study's lm_head at %d rows (chunks of %d)", p, R + 128, R);
    run_shape(what, R + 128, 128, 50257, R, xsa_nn_lmhead_vblock(R, 50257), mm);
}

int main(void)
{
    test_shapes(NULL);
    if (xsa_bf16_check() == 0) {
        xsa_bf16_mm *mm = xsa_bf16_mm_new();
        CHECK(mm != NULL, "bf16 context: %s", xsa_last_error());
        if (mm) test_shapes(mm);
        xsa_bf16_mm_free(mm);
    } else {
        printf("  bf16: not here (%s)\n", xsa_last_error());
    }
    return check_done("test_lmhead");
}
