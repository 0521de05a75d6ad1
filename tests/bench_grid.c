/*
 * bench_grid.c: one shape of the grid of issue 38 (batch x seq_len, layers
 * x width) against its limit: the median training step (forward, backward,
 * AdamW) of one XSA model (lambda 1, heads of 64, vocabulary 50257) over
 * the step's matrix FLOPs (peak_step_flops, causal attention at half) at
 * the float32 peak, and the process's peak RSS. make bench runs it once per
 * shape, each a process of its own so the RSS is the shape's.
 *
 *   bench_grid --batch B --seq T --layers L --width C [--steps N]
 *              [--seconds S] [--peak-f32 GFLOPS]
 *
 * Goals (issue 38): a step at most 1.4x its limit on an AVX-512 machine,
 * 1.3 times that (1.82x) where the CPU has AVX2 at most, or make bench
 * ISA=avx2 holds the run to it (XSA_PEAK_ISA, peak.h); peak RSS under 1,200 MB at 1 x 4096, 6 x 384. Printed
 * as "met" or "NOT met". Without --peak-f32 the peak is measured here
 * (peak.h). Not a test: prints numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "../core/xsa.h"
#include "peak.h"

static void die(const char *what)
{
    fprintf(stderr, "bench_grid: %s: %s\n", what, xsa_last_error());
    exit(1);
}

static int arg_int(const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == 0 || *end != 0 || x < 1 || x > 1 << 20) {
        fprintf(stderr, "bench_grid: %s is not a size\n", v);
        exit(2);
    }
    return (int)x;
}

/* median milliseconds of at least `steps` training steps after one warm-up,
 * and of as many more (63 at most) as fit in `seconds`: a median of three
 * short steps moved by 15% from one run to the next under load */
static double step_ms(xsa_gpt *m, xsa_adamw *o, const int32_t *in, const int32_t *tg, int B, int T,
                      int *steps, double seconds)
{
    double t[64], spent = 0;
    int n = 0;
    for (int s = 0; s < 64 && (s <= *steps || spent < seconds); s++) {
        double t0 = bench_seconds();
        float loss;
        xsa_adamw_zero_grad(o);
        if (xsa_gpt_forward(m, in, tg, B, T, &loss) != 0) die("forward");
        if (xsa_gpt_backward(m, 1.0f) != 0) die("backward");
        xsa_adamw_step(o);
        double dt = bench_seconds() - t0;
        if (s > 0) t[n++] = 1e3 * dt, spent += dt;
    }
    *steps = n;
    return bench_median(t, n);
}

static double arg_seconds(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == 0 || *end != 0 || !(x >= 0 && x <= 600)) {
        fprintf(stderr, "bench_grid: --seconds %s is not a number of seconds from 0 to 600\n", v);
        exit(2);
    }
    return x;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_grid --batch B --seq T --layers L --width C (a multiple of 64) "
                    "[--steps N (at least N, default 3)] [--seconds S (steps until S seconds, default 4, "
                    "63 steps at most)] [--peak-f32 GFLOPS]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int B = 0, T = 0, L = 0, C = 0, steps = 3;
    double peak = 0, seconds = 4;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--batch")) B = arg_int(v);
        else if (!strcmp(a, "--seq")) T = arg_int(v);
        else if (!strcmp(a, "--layers")) L = arg_int(v);
        else if (!strcmp(a, "--width")) C = arg_int(v);
        else if (!strcmp(a, "--steps")) steps = arg_int(v) > 63 ? 63 : arg_int(v);
        else if (!strcmp(a, "--seconds")) seconds = arg_seconds(v);
        else if (!strcmp(a, "--peak-f32")) peak = atof(v);
        else if (!strcmp(a, "--peak-bf16")) ; /* make bench's PEAK_STEP may carry it */
        else usage();
    }
    if (!B || !T || !L || !C || C % 64 != 0) usage();
    if (peak <= 0) peak = peak_f32(xsa_threads(), 20).gflops;
    const char *isa = getenv("XSA_PEAK_ISA");
    __builtin_cpu_init();
    int avx2 = !__builtin_cpu_supports("avx512f") || (isa && !strcmp(isa, "avx2"));
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.n_layer = L, c.d_model = C, c.n_head = C / 64, c.seq_len = T;
    c.attention = XSA_ATTN_XSA, c.lambda = 1.0;
    xsa_gpt *m = xsa_gpt_new(&c);
    if (!m) die("model");
    int nt = xsa_gpt_num_tensors(m);
    xsa_tensor **ps = malloc((size_t)nt * sizeof *ps);
    for (int i = 0; ps && i < nt; i++) ps[i] = xsa_gpt_param(m, i);
    xsa_adamw *o = ps ? xsa_adamw_new(nt, ps, 1e-3, 0.9, 0.999, 1e-8, 0.01) : NULL;
    free(ps);
    int32_t *in, *tg;
    if (!o || bench_batch(B * T, c.vocab, &in, &tg) != 0) die("out of memory");
    double ms = step_ms(m, o, in, tg, B, T, &steps, seconds);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = ru.ru_maxrss / 1024.0, lim = peak_step_flops(B, T, C, c.vocab, L, 1) / (peak * 1e6);
    double goal = avx2 ? 1.4 * 1.3 : 1.4;
    int big = B == 1 && T == 4096 && L == 6 && C == 384;
    printf("grid %d x %d, %d x %d: step %.1f ms (median of %d), limit %.1f ms at %.1f GFLOP/s, "
           "%.2fx the limit (goal <= %.2fx: %s); peak RSS %.0f MB", B, T, L, C, ms, steps, lim, peak,
           ms / lim, goal, ms / lim <= goal ? "met" : "NOT met", rss);
    if (big) printf(" (goal < 1200 MB: %s)", rss < 1200 ? "met" : "NOT met");
    printf("; %d threads, load %s\n", xsa_threads(), peak_load());
    xsa_adamw_free(o);
    xsa_gpt_free(m);
    free(in), free(tg);
    return 0;
}
