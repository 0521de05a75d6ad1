/*
 * bench_step.c: time of one training step (forward + backward + AdamW) of
 * the study's default model (V=50257, C=128, 2 layers, 2 heads) at B=16,
 * T=64, for SA and XSA: median of 20 steps after 3 warm-up steps, the share
 * of the step spent in GEMMs (measured by timing the same GEMM calls alone),
 * the XSA overhead (SA and XSA steps interleaved so outside load hits both
 * alike), a per-phase breakdown and the vocabulary cross-entropy alone. Not a test: prints numbers.
 * Usage: bench_step [steps] [B] [T]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "../core/xsa.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    xsa_gpt *m;
    xsa_adamw *o;
    double *st, *f, *b, *op;
    float loss;
} runner;

static void runner_init(runner *r, xsa_gpt *m, int steps)
{
    int nt = xsa_gpt_num_tensors(m);
    xsa_tensor **ps = malloc((size_t)nt * sizeof *ps);
    for (int i = 0; i < nt; i++) ps[i] = xsa_gpt_param(m, i);
    r->m = m;
    r->o = xsa_adamw_new(nt, ps, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    free(ps);
    r->st = malloc(sizeof(double) * (size_t)steps);
    r->f = malloc(sizeof(double) * (size_t)steps);
    r->b = malloc(sizeof(double) * (size_t)steps);
    r->op = malloc(sizeof(double) * (size_t)steps);
}

static void runner_step(runner *r, const int32_t *in, const int32_t *tg, int B, int T, int s)
{
    double t0 = now_ms();
    if (xsa_gpt_forward(r->m, in, tg, B, T, &r->loss) != 0) {
        fprintf(stderr, "%s\n", xsa_last_error());
        exit(1);
    }
    double t1 = now_ms();
    xsa_gpt_zero_grad(r->m);
    xsa_gpt_backward(r->m, 1.0f);
    double t2 = now_ms();
    xsa_adamw_step(r->o);
    double t3 = now_ms();
    if (s >= 0) {
        r->st[s] = t3 - t0;
        r->f[s] = t1 - t0;
        r->b[s] = t2 - t1;
        r->op[s] = t3 - t2;
    }
}

static void runner_report(runner *r, const char *name, int steps, int N, double gm)
{
    double st = median(r->st, steps);
    printf("step %s: %.1f ms (median of %d), tokens/s %.0f, gemm share %.0f%% "
           "(fwd %.1f, bwd %.1f, adamw %.1f ms; final loss %.4f)\n",
           name, st, steps, N / (st / 1e3), 100 * gm / st, median(r->f, steps),
           median(r->b, steps), median(r->op, steps), r->loss);
}

static void runner_free(runner *r)
{
    xsa_adamw_free(r->o);
    free(r->st); free(r->f); free(r->b); free(r->op);
}

/* The cross-entropy over the vocabulary alone (forward + backward). */
static double ce_ms(int N, int V, int threads, int reps)
{
    float *lg = malloc(sizeof(float) * (size_t)N * V), *pr = malloc(sizeof(float) * (size_t)N * V);
    float *ps = malloc(sizeof(float) * (size_t)N);
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)N);
    for (size_t i = 0; i < (size_t)N * V; i++) lg[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    for (int i = 0; i < N; i++) tg[i] = i % V;
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int s = -1; s < reps; s++) {
        double t0 = now_ms();
        xsa_nn_crossentropy_forward(pr, ps, NULL, lg, tg, N, V, threads);
        xsa_nn_crossentropy_backward(pr, pr, ps, tg, 1.0f, N, V, threads);
        if (s >= 0) v[s] = now_ms() - t0;
    }
    double r = median(v, reps);
    free(lg); free(pr); free(ps); free(tg); free(v);
    return r;
}

/* The GEMMs of one step at these sizes, timed alone (same calls as nn.c). */
static double gemm_ms(int N, int C, int V, int L, int steps, double *lmhead)
{
    float *x = calloc((size_t)N * 4 * C, sizeof(float)), *w = calloc((size_t)V * C, sizeof(float));
    float *lg = calloc((size_t)N * V, sizeof(float)), *o = calloc((size_t)N * 4 * C, sizeof(float));
    float *w2 = calloc((size_t)4 * C * 4 * C, sizeof(float)), *dw = calloc((size_t)V * C, sizeof(float));
    for (size_t i = 0; i < (size_t)V * C; i++) w[i] = 0.01f * (float)(i % 7);
    double *v = malloc(sizeof(double) * (size_t)steps), *h = malloc(sizeof(double) * (size_t)steps);
    for (int s = -2; s < steps; s++) {
        double t0 = now_ms();
        /* lm_head forward and its two backward products */
        xsa_nn_lmhead_forward(lg, x, w, N, C, V);
        xsa_nn_lmhead_backward(o, dw, lg, x, w, N, C, V);
        double t1 = now_ms();
        for (int l = 0; l < L; l++) {
            int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
            for (int k = 0; k < 4; k++) {
                int ci = shapes[k][0], co = shapes[k][1];
                xsa_nn_linear_forward(o, x, w2, NULL, N, ci, co);
                xsa_nn_linear_backward(x, dw, NULL, o, x, w2, N, ci, co);
            }
        }
        double t2 = now_ms();
        if (s >= 0) {
            v[s] = t2 - t0;
            h[s] = t1 - t0;
        }
    }
    double r = median(v, steps);
    *lmhead = median(h, steps);
    free(x); free(w); free(lg); free(o); free(w2); free(dw); free(v); free(h);
    return r;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    int B = argc > 2 ? atoi(argv[2]) : 16;
    int T = argc > 3 ? atoi(argv[3]) : 64;
    if (steps < 1) steps = 20;
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    int N = B * T;
    int32_t *in = malloc(sizeof(int32_t) * (size_t)N), *tg = malloc(sizeof(int32_t) * (size_t)N);
    xsa_rng g;
    xsa_rng_seed(&g, 1);
    for (int i = 0; i < N; i++) {
        in[i] = (int32_t)xsa_rng_int(&g, 0, c.vocab);
        tg[i] = (int32_t)xsa_rng_int(&g, 0, c.vocab);
    }
    printf("bench_step: V=%d C=%d L=%d NH=%d B=%d T=%d, BLAS %s, %d threads\n", c.vocab,
           c.d_model, c.n_layer, c.n_head, B, T, xsa_blas_corename(), xsa_threads());
    xsa_gpt *sa = xsa_gpt_new(&c);
    xsa_gpt *xs = xsa_gpt_clone(sa, XSA_ATTN_XSA, 1.0);
    runner ra, rx;
    runner_init(&ra, sa, steps);
    runner_init(&rx, xs, steps);
    /* interleaved, so load from other processes hits both alike */
    for (int s = -3; s < steps; s++) {
        runner_step(&ra, in, tg, B, T, s);
        runner_step(&rx, in, tg, B, T, s);
    }
    double lm;
    double gm = gemm_ms(N, c.d_model, c.vocab, c.n_layer, steps, &lm);
    runner_report(&ra, "SA", steps, N, gm);
    runner_report(&rx, "XSA", steps, N, gm);
    double a = median(ra.st, steps), x = median(rx.st, steps);
    printf("gemm alone: %.1f ms per step (lm_head's three: %.1f ms)\n", gm, lm);
    printf("cross-entropy fwd+bwd over [%d,%d]: %.1f ms (1 thread), %.1f ms (2 threads)\n", N,
           c.vocab, ce_ms(N, c.vocab, 1, 5), ce_ms(N, c.vocab, 2, 5));
    printf("XSA overhead: %+.1f%%\n", 100 * (x - a) / a);
    runner_free(&ra);
    runner_free(&rx);
    xsa_gpt_free(sa);
    xsa_gpt_free(xs);
    free(in);
    free(tg);
    return 0;
}
