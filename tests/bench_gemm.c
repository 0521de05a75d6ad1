/*
 * bench_gemm.c: the GEMM probe. For each distinct matrix product of the
 * float32 training step (the default model, V=50257, C=128, 2 layers, at
 * bench_step's two shapes, N = B*T = 1024 and 2048 rows), OpenBLAS's
 * cblas_sgemm (with the kernel it picked) against oneDNN's float32
 * dnnl_sgemm when this build has oneDNN (optional: without it the probe
 * times OpenBLAS alone and says so). Measures the two libraries directly,
 * whichever xsa_sgemm (core/gemm.h) runs; changes nothing the engine runs.
 *
 * The products, as core/nn.c calls them (xsa_nn_lmhead_rows and _vblock
 * give the chunks and blocks):
 *  - the lm_head by chunks of n rows and blocks of nv vocabulary rows:
 *    forward E[nv,n] = W[nv,C] X[n,C]^T, dX[n,C] = E^T W, dW[nv,C] (+)= E X;
 *    every distinct (n, nv) with how many times a step calls it;
 *  - the same three over the whole vocabulary (inner or outer dimension
 *    50,257), which the step does not call but a different blocking would;
 *  - each block's linear layers (C -> 3C, C -> C, C -> 4C, 4C -> C):
 *    forward, dinp and dw, 2 layers.
 * Each product on one thread for both libraries (the engine runs whole
 * products on its own threads, OpenBLAS on one: core/system.c), the two
 * interleaved call by call (alternating which goes first) so load hits both
 * alike; medians, and the best of each too: on a loaded machine other
 * processes only add time, so the two ratios bracket the answer, and a
 * product is called for one library only when both ratios agree ("load"
 * otherwise). Prints GFLOP/s, the ratios and which is faster for each, and
 * the step's GEMM time (calls x median) with OpenBLAS alone, oneDNN alone
 * and the faster library for each product. The results of the two are
 * compared once per product (a wrong transposition would show).
 *
 * Usage: bench_gemm [reps]   (default 9; the whole-vocabulary ones 5)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "bench.h"
#include "../core/xsa.h"
#include "peak.h"

#ifdef XSA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
/* libgomp comes with libdnnl (its OpenMP runtime), as in core/matmul_bf16.c */
extern void omp_set_num_threads(int n) __attribute__((weak));
#endif

/* sorts v */
/* one product: row-major C[M,N] = op(A) op(B) + beta C, as cblas_sgemm */
typedef struct {
    const char *what;
    int ta, tb, M, N, K;
    float beta;
    int calls; /* per training step; 0: not a product the step calls */
} product;

static int lda_of(const product *p) { return p->ta ? p->M : p->K; }
static int ldb_of(const product *p) { return p->tb ? p->K : p->N; }

static void run_blas(const product *p, const float *A, const float *B, float *C)
{
    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans,
                p->M, p->N, p->K, 1.0f, A, lda_of(p), B, ldb_of(p), p->beta, C, p->N);
}

#ifdef XSA_HAVE_DNNL
static int run_dnnl(const product *p, const float *A, const float *B, float *C)
{
    return dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->M, p->N, p->K, 1.0f, A, lda_of(p), B,
                      ldb_of(p), p->beta, C, p->N) == dnnl_success ? 0 : -1;
}
#endif

static float *buf_a, *buf_b, *buf_c, *buf_d;

/* the step's GEMM time: calls x median, and calls x best (steadier under load) */
typedef struct {
    double blas, dnnl, faster;
} sums;

static void sum_add(sums *s, int calls, double b, double d)
{
    s->blas += calls * b;
    s->dnnl += calls * d;
    s->faster += calls * (d > 0 && d < b ? d : b);
}

/* times one product; returns OpenBLAS's median ms (and oneDNN's in *dn, 0
 * without) and adds both medians to med and both bests to best */
static double probe(const product *p, int reps, double *dn, sums *med, sums *best)
{
    double flop = 2.0 * p->M * p->N * p->K, tb[16];
#ifdef XSA_HAVE_DNNL
    double td[16];
#endif
    size_t nc = (size_t)p->M * p->N;
    *dn = 0;
    /* a warm-up of each, from the same C, and their results compared */
    memset(buf_c, 0, nc * sizeof(float));
    run_blas(p, buf_a, buf_b, buf_c);
#ifdef XSA_HAVE_DNNL
    memset(buf_d, 0, nc * sizeof(float));
    if (run_dnnl(p, buf_a, buf_b, buf_d) != 0) {
        printf("  %s: dnnl_sgemm failed\n", p->what);
        return 0;
    }
    double md = 0, mc = 0;
    for (size_t i = 0; i < nc; i++) {
        double d = fabs((double)buf_c[i] - buf_d[i]), c = fabs((double)buf_c[i]);
        if (d > md) md = d;
        if (c > mc) mc = c;
    }
    if (md > 1e-4 * mc) printf("  %s: oneDNN and OpenBLAS differ (max %.3g, largest element %.3g)\n", p->what, md, mc);
#endif
    for (int r = 0; r < reps; r++) {
        int dn_first = r & 1;
        double t0, t1;
#ifdef XSA_HAVE_DNNL
        if (dn_first) {
            t0 = (1e3 * bench_seconds());
            run_dnnl(p, buf_a, buf_b, buf_d);
            td[r] = (1e3 * bench_seconds()) - t0;
        }
#endif
        t0 = (1e3 * bench_seconds());
        run_blas(p, buf_a, buf_b, buf_c);
        t1 = (1e3 * bench_seconds());
        tb[r] = t1 - t0;
#ifdef XSA_HAVE_DNNL
        if (!dn_first) {
            t0 = (1e3 * bench_seconds());
            run_dnnl(p, buf_a, buf_b, buf_d);
            td[r] = (1e3 * bench_seconds()) - t0;
        }
#endif
        (void)dn_first;
    }
    double mb = bench_median(tb, reps);
    printf("  %-34s %5d x %5d x %5d %c%c %3d  OpenBLAS %7.2f ms %6.1f GFLOP/s", p->what, p->M, p->N, p->K,
           p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->calls, mb, flop / mb * 1e-6);
#ifdef XSA_HAVE_DNNL
    *dn = bench_median(td, reps);
    double rm = *dn / mb, rb = bench_min(td, reps) / bench_min(tb, reps);
    if (med) sum_add(med, p->calls, mb, *dn);
    if (best) sum_add(best, p->calls, bench_min(tb, reps), bench_min(td, reps));
    printf("  oneDNN %7.2f ms %6.1f GFLOP/s  oneDNN/OpenBLAS %.2f (best %.2f)  %s", *dn, flop / *dn * 1e-6, rm,
           rb, rm < 1 && rb < 1 ? "oneDNN" : rm > 1 && rb > 1 ? "OpenBLAS" : "load");
#else
    if (med) sum_add(med, p->calls, mb, 0);
    if (best) sum_add(best, p->calls, bench_min(tb, reps), 0);
#endif
    printf("\n");
    return mb;
}

static void step_products(int rows, int reps)
{
    enum { C = 128, V = 50257, L = 2 };
    int R = xsa_nn_lmhead_rows(rows, V, 0), VB = xsa_nn_lmhead_vblock(R, V);
    int full_chunks = rows / R, tail_n = rows % R, full_blocks = V / VB, tail_v = V % VB;
    printf("N = %d rows: the lm_head in chunks of %d rows (%d%s) x blocks of %d vocabulary rows (%d%s)\n",
           rows, R, full_chunks, tail_n ? " and one of fewer" : "", VB, full_blocks, tail_v ? " and one of fewer" : "");
    printf("  %-34s %5s   %5s   %5s %2s %3s\n", "product", "M", "N", "K", "op", "calls");
    sums med = {0, 0, 0}, best = {0, 0, 0};
    int ns[2] = {R, tail_n}, nn[2] = {full_chunks, tail_n ? 1 : 0};
    int vs[2] = {VB, tail_v}, nvs[2] = {full_blocks, tail_v ? 1 : 0};
    char name[64];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int n = ns[a], nv = vs[b], calls = nn[a] * nvs[b];
            if (!calls) continue;
            product ps[3] = {{"lm_head forward E = W X^T", 0, 1, nv, n, C, 0.0f, calls},
                             {"lm_head dX = E^T W", 1, 0, n, C, nv, 0.0f, calls},
                             {"lm_head dW += E X", 0, 0, nv, C, n, 1.0f, calls}};
            for (int k = 0; k < 3; k++) {
                double d;
                probe(&ps[k], reps, &d, &med, &best);
            }
        }
    int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    for (int k = 0; k < 4; k++) {
        int ci = shapes[k][0], co = shapes[k][1];
        snprintf(name, sizeof name, "linear %d->%d forward", ci, co);
        product f = {name, 0, 0, rows, co, ci, 0.0f, L};
        double d;
        probe(&f, reps, &d, &med, &best);
        snprintf(name, sizeof name, "linear %d->%d dinp", ci, co);
        product di = {name, 0, 1, rows, ci, co, 1.0f, L};
        probe(&di, reps, &d, &med, &best);
        snprintf(name, sizeof name, "linear %d->%d dw", ci, co);
        product dw = {name, 1, 0, ci, co, rows, 1.0f, L};
        probe(&dw, reps, &d, &med, &best);
    }
    for (int k = 0; k < 2; k++) {
        const sums *x = k ? &best : &med;
        printf("N = %d: the step's GEMMs (calls x %s, one after another): OpenBLAS %.1f ms", rows,
               k ? "best" : "median", x->blas);
        if (x->dnnl > 0)
            printf(", oneDNN %.1f ms, the faster of the two for each product %.1f ms (%.2f of OpenBLAS's)", x->dnnl,
                   x->faster, x->faster / x->blas);
        printf("\n");
    }
    product whole[3] = {{"whole vocabulary: forward X W^T", 0, 1, rows, V, C, 0.0f, 0},
                        {"whole vocabulary: dX = dL W", 0, 0, rows, C, V, 0.0f, 0},
                        {"whole vocabulary: dW = dL^T X", 1, 0, V, C, rows, 0.0f, 0}};
    for (int k = 0; k < 3; k++) {
        double d;
        probe(&whole[k], reps < 5 ? reps : 5, &d, NULL, NULL);
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1) reps = 1;
    if (reps > 16) reps = 16;
#ifdef XSA_HAVE_DNNL
    if (omp_set_num_threads) omp_set_num_threads(1);
    const dnnl_version_t *v = dnnl_version();
    char dn[64];
    snprintf(dn, sizeof dn, "oneDNN %d.%d.%d dnnl_sgemm", v->major, v->minor, v->patch);
#else
    const char *dn = "no oneDNN in this build (OpenBLAS alone)";
#endif
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("bench_gemm: CPU %s; OpenBLAS kernel %s (OPENBLAS_CORETYPE %s; this CPU's best %s) against %s; "
           "one thread each; load average %s\n",
           peak_cpu_model(), xsa_blas_corename(), ct ? ct : "unset",
           xsa_cpu_best_coretype() ? xsa_cpu_best_coretype() : "none", dn, peak_load());
    printf("(op: A and B transposed or not; calls: per training step; medians of %d, interleaved)\n", reps);
    printf("the engine's float32 GEMM here: %s (XSA_GEMM %s; core/gemm.h)\n", xsa_gemm_describe(),
           getenv("XSA_GEMM") ? getenv("XSA_GEMM") : "unset");
    /* the largest operands: E of the whole vocabulary, [2048, 50257] */
    size_t big = (size_t)2048 * 50257;
    buf_a = malloc(big * sizeof(float));
    buf_b = malloc(big * sizeof(float));
    buf_c = malloc(big * sizeof(float));
    buf_d = malloc(big * sizeof(float));
    if (!buf_a || !buf_b || !buf_c || !buf_d) {
        printf("bench_gemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < big; i++) {
        buf_a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        buf_b[i] = (float)((i * 104729) % 997) / 997.0f - 0.5f;
    }
    memset(buf_c, 0, big * sizeof(float));
    memset(buf_d, 0, big * sizeof(float));
    step_products(1024, reps); /* bench_step 16 x 64 */
    step_products(2048, reps); /* bench_step 8 x 256 */
    printf("load average at the end: %s\n", peak_load());
    free(buf_a);
    free(buf_b);
    free(buf_c);
    free(buf_d);
    return 0;
}
