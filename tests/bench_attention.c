/*
 * bench_attention.c: causal attention's forward + backward (nn.h) alone, at
 * head size 64 and 2 heads (the grid's 2 x 128 model's attention), batch 1,
 * T from 64 to 4096: the full kernel where nn.h runs it (T <=
 * XSA_NN_ATTN_FULL_MAX) beside the blocked kernel called directly, so the
 * threshold can be read off one run; above it the blocked kernel alone.
 *
 *   bench_attention [--peak-f32 GFLOPS] [--heads NH] [--reps N]
 *
 * FLOPs: forward and backward's matrix products, multiply-adds x 2,
 * causal at half: 6 T^2 HS per head (q k^T, a v; dP, dV, dQ, dK), not
 * counting the backward's recomputed scores. With --peak-f32 (make bench
 * gives bench_peak's) each time is also a fraction of that peak, and at
 * 4096 positions against issue 38's goal (at least 0.5 of the peak; 0.5 /
 * 1.3 where AVX2 is the widest path). Medians of N runs, XSA (lambda 1).
 * Not a test: prints numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../core/attention_impl.h"
#include "../core/nn.h"
#include "../core/system.h"

typedef struct {
    int B, T, C, NH, blocked;
    float *qkv, *out, *y, *saved, *dout, *dq, *scr;
} bufs;

static void run(bufs *b, double *fwd, double *bwd)
{
    double t0 = bench_seconds();
    if (b->blocked)
        xsa_nn_attention_blocked_forward(&xsa_attention_xsa, 1.0f, b->out, b->y, b->saved, b->qkv, b->B,
                                         b->T, b->C, b->NH);
    else
        xsa_nn_attention_forward(b->out, b->y, b->saved, b->qkv, b->B, b->T, b->C, b->NH, 1.0f, NULL);
    double t1 = bench_seconds();
    if (b->blocked)
        xsa_nn_attention_blocked_backward(&xsa_attention_xsa, 1.0f, b->dq, b->scr, b->dout, b->qkv,
                                          b->saved, b->y, b->B, b->T, b->C, b->NH);
    else
        xsa_nn_attention_backward(b->dq, b->scr, b->dout, b->qkv, b->saved, b->y, b->B, b->T, b->C,
                                  b->NH, 1.0f);
    *fwd = (t1 - t0) * 1e3;
    *bwd = (bench_seconds() - t1) * 1e3;
}

static float *filled(size_t n)
{
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_attention: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return p;
}

static void bench(int T, int NH, int blocked, int reps, double peak)
{
    bufs b = {1, T, 64 * NH, NH, blocked, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t no = (size_t)T * b.C;
    size_t ns = blocked ? xsa_nn_attention_blocked_saved_floats(1, T, b.C, NH)
                        : xsa_nn_attention_saved_floats(1, T, b.C, NH);
    size_t nc = blocked ? xsa_nn_attention_blocked_scratch_floats(1, T, b.C, NH)
                        : xsa_nn_attention_scratch_floats(1, T, b.C, NH);
    b.qkv = filled(3 * no), b.out = filled(no), b.y = filled(no), b.saved = filled(ns);
    b.dout = filled(no), b.dq = filled(3 * no), b.scr = filled(nc);
    double f[64], w[64], s[64];
    if (reps > 64) reps = 64;
    run(&b, &f[0], &w[0]); /* warm-up */
    for (int r = 0; r < reps; r++) {
        run(&b, &f[r], &w[r]);
        s[r] = f[r] + w[r];
    }
    double flops = 6.0 * T * (double)T * 64 * NH, ms = bench_median(s, reps);
    printf("T %5d %-7s fwd %8.2f ms  bwd %8.2f ms  fwd+bwd %8.2f ms  %6.1f GFLOP/s", T,
           blocked ? "blocked" : "full", bench_median(f, reps), bench_median(w, reps), ms,
           flops / (ms * 1e6));
    if (peak > 0) printf("  %.2f of the peak", flops / (ms * 1e6) / peak);
    if (peak > 0 && T == 4096) { /* issue 38: 50%, or 50% / 1.3 where AVX2 is the widest */
        const char *isa = getenv("XSA_PEAK_ISA");
        __builtin_cpu_init();
        double goal = !__builtin_cpu_supports("avx512f") || (isa && !strcmp(isa, "avx2")) ? 0.5 / 1.3 : 0.5;
        printf(" (goal >= %.2f: %s)", goal, flops / (ms * 1e6) / peak >= goal ? "met" : "NOT met");
    }
    printf("\n");
    free(b.qkv); free(b.out); free(b.y); free(b.saved); free(b.dout); free(b.dq); free(b.scr);
}

int main(int argc, char **argv)
{
    double peak = 0;
    int NH = 2, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--peak-f32")) peak = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) NH = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--peak-bf16")) NH = 0; /* unknown: the usage below */
    }
    if (NH < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_attention [--peak-f32 GFLOPS] [--heads NH] [--reps N]\n");
        return 2;
    }
    printf("bench_attention: batch 1, %d heads of 64, XSA, %d threads; median of %d\n", NH,
           xsa_threads(), reps);
    for (int T = 64; T <= 4096; T *= 2) {
        if (T <= XSA_NN_ATTN_FULL_MAX) bench(T, NH, 0, reps, peak);
        bench(T, NH, 1, T >= 2048 ? (reps + 1) / 2 : reps, peak);
    }
    return 0;
}
