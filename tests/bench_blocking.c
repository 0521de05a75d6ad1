/*
 * bench_blocking.c: the lm_head's blocking (rows per chunk, vocabulary rows
 * per block) measured on this machine, the rule against the blockings it
 * replaced or might replace: the training step (forward and backward) and the
 * evaluation step of the study's model, in one process, the blockings
 * alternated round by round so that the machine's drift and other load
 * hit them alike. Medians over the rounds of each round's best step; the
 * ratio to the rule (below 1: faster than the rule), and how far each
 * blocking's loss and wte's gradient are from the rule's (another blocking
 * sums the softmax in another order: the last bits move, nothing more).
 *
 *   bench_blocking [--rounds K] [--precision f32|bf16] [--batch B --seq T]
 *
 * Not a test: prints numbers (make bench runs it at 16 x 64 and 8 x 256).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../core/matmul_bf16.h"
#include "../core/xsa.h"
#include "peak.h"

static void die(const char *what)
{
    fprintf(stderr, "bench_blocking: %s: %s\n", what, xsa_last_error());
    exit(1);
}

typedef struct {
    const char *name;
    int rows, vblock; /* 0: the rule */
} blocking;

#define MAX_ROUNDS 64

/* Vocabulary rows of a block of about `bytes` of float32 logits for
 * chunks of R rows, as xsa_nn_lmhead_vblock rounds its own rule. */
static int block_rows(long bytes, int R)
{
    long vb = bytes / (R * (long)sizeof(float)) / 64 * 64;
    return vb < 64 ? 64 : (int)vb;
}

/* 0 when the options parse and are in range, else -1 */
static int parse_args(int argc, char **argv, int *B, int *T, int *rounds, int *bf16)
{
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        if (!strcmp(a, "--batch")) *B = atoi(v);
        else if (!strcmp(a, "--seq")) *T = atoi(v);
        else if (!strcmp(a, "--rounds")) *rounds = atoi(v);
        else if (!strcmp(a, "--precision") && (!strcmp(v, "f32") || !strcmp(v, "bf16"))) *bf16 = !strcmp(v, "bf16");
        else return -1;
    }
    return *B < 1 || *T < 1 || *rounds < 1 || *rounds > MAX_ROUNDS ? -1 : 0;
}

/* the best of 3 train steps (forward and backward) and of 2 eval steps, in ms */
static void best_steps(xsa_gpt *m, const int32_t *in, const int32_t *tg, int B, int T, double *train,
                       double *eval, float *loss)
{
    double bt = INFINITY, be = INFINITY;
    float eloss;
    for (int s = 0; s < 3; s++) { /* the first may page in a new scratch */
        xsa_gpt_zero_grad(m);
        double t0 = bench_seconds();
        if (xsa_gpt_forward(m, in, tg, B, T, loss) != 0 || xsa_gpt_backward(m, 1.0f) != 0) die("step");
        double t = bench_seconds() - t0;
        if (t < bt) bt = t;
    }
    for (int s = 0; s < 2; s++) {
        double t0 = bench_seconds();
        if (xsa_gpt_eval_loss(m, in, tg, B, T, &eloss) != 0) die("eval");
        double t = bench_seconds() - t0;
        if (t < be) be = t;
    }
    *train = 1e3 * bt;
    *eval = 1e3 * be;
}

/* normwise: elements near 0 (cancellation) make elementwise ratios meaningless */
static double grad_diff(const float *gk, const float *g0, size_t nw)
{
    double dmax = 0.0, gmax = 0.0;
    for (size_t i = 0; i < nw; i++) {
        double d = fabs((double)gk[i] - g0[i]);
        if (d > dmax) dmax = d;
        if (fabs(g0[i]) > gmax) gmax = fabs(g0[i]);
    }
    return gmax > 0.0 ? dmax / gmax : dmax;
}

int main(int argc, char **argv)
{
    int B = 16, T = 64, rounds = 7, bf16 = 0;
    if (parse_args(argc, argv, &B, &T, &rounds, &bf16) != 0) {
        fprintf(stderr, "usage: bench_blocking [--rounds K (1-%d)] [--precision f32|bf16] [--batch B] [--seq T]\n",
                MAX_ROUNDS);
        return 2;
    }
    xsa_gpt_config c;
    xsa_gpt_config_default(&c);
    c.seq_len = T;
    if (bf16) {
        if (xsa_bf16_check() != 0 || !xsa_bf16_built()) {
            printf("bench_blocking: bf16 skipped (%s)\n", xsa_last_error());
            return 0;
        }
        c.precision = XSA_PREC_BF16;
    }
    /* the rule; float32's before 2026-12-02 (chunks of 40 MB of
     * exponentials: 192 rows); blocks of 1.5 MB (in a 1 MB L2 or near it)
     * and of 16 MB; chunks of 1024 rows */
    int N = B * T, rule_rows = xsa_nn_lmhead_rows(N, c.vocab, bf16); /* the rows of this batch's chunks */
    blocking bl[] = {{"the rule", 0, 0},
                     {bf16 ? "chunks of 256 rows" : "before: chunks of 192 rows", bf16 ? 256 : 192, 0},
                     {"blocks of 1.5 MB", 0, block_rows(3L << 19, rule_rows)},
                     {"blocks of 16 MB", 0, block_rows(16L << 20, rule_rows)},
                     {"chunks of 1024 rows", 1024, 0}};
    int nb = (int)(sizeof bl / sizeof bl[0]);
    int32_t *in, *tg;
    if (bench_batch(N, c.vocab, &in, &tg) != 0) die("out of memory");
    xsa_gpt *m = xsa_gpt_new(&c);
    if (!m) die("model");
    printf("bench_blocking: V=%d C=%d, batch %dx%d, %s; CPU %s; OpenBLAS %s; float32 GEMM %s; %d threads; "
           "load average %s\n", c.vocab, c.d_model, B, T, bf16 ? "bf16 lm_head" : "float32", peak_cpu_model(),
           xsa_blas_corename(), xsa_gemm_describe(), xsa_threads(), peak_load());
    printf("the rule: %s\n", xsa_nn_lmhead_describe());
    double tr[8][MAX_ROUNDS], ev[8][MAX_ROUNDS], gdiff[8] = {0};
    float loss[8];
    xsa_tensor *wte = xsa_gpt_param(m, 0); /* wte: its gradient is the lm_head's and the embedding's */
    size_t nw = (size_t)xsa_tensor_numel(wte);
    float *g0 = malloc(nw * sizeof *g0);
    if (!g0 || !wte->grad) die("wte gradient");
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nb; k++) {
            if (xsa_nn_lmhead_set_blocking(bl[k].rows, bl[k].vblock) != 0) die("blocking");
            best_steps(m, in, tg, B, T, &tr[k][r], &ev[k][r], &loss[k]);
            const float *gk = xsa_tensor_f32(wte->grad); /* the last train step's */
            if (r == 0 && k == 0) memcpy(g0, gk, nw * sizeof *g0);
            if (r == 0 && k > 0) gdiff[k] = grad_diff(gk, g0, nw);
        }
    double t0 = bench_median(tr[0], rounds), e0 = bench_median(ev[0], rounds);
    for (int k = 0; k < nb; k++) {
        if (xsa_nn_lmhead_set_blocking(bl[k].rows, bl[k].vblock) != 0) die("blocking");
        int R = xsa_nn_lmhead_rows(N, c.vocab, bf16), VB = xsa_nn_lmhead_vblock(R, c.vocab);
        double tk = bench_median(tr[k], rounds), ek = bench_median(ev[k], rounds);
        printf("%-26s %4d rows x %5d: train %7.1f ms (%.2f of the rule)  eval %6.1f ms (%.2f)  "
               "loss - the rule's %+.1e, wte's gradient %.1e of its largest\n",
               bl[k].name, R, VB, tk, tk / t0, ek, ek / e0, (double)loss[k] - loss[0], gdiff[k]);
    }
    printf("medians of %d rounds of each round's best of 3 train (forward + backward) and 2 eval steps; "
           "load average at the end %s\n", rounds, peak_load());
    xsa_gpt_free(m);
    free(g0);
    free(in);
    free(tg);
    return 0;
}
