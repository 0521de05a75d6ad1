/*
 * bench_matmul.c: GFLOP/s of xsa_tensor_matmul against a direct cblas_sgemm
 * on the same operand buffers, for the two shapes the GPT model spends its
 * time in: [1024x128]x[128x4096] (MLP-sized) and [1024x128]x[128x50257]
 * (the vocabulary projection, B*T = 1024 rows at batch 16, seq_len 64).
 * Median of 9 timed repetitions after 2 warm-ups. Run by `make bench`
 * (tests/bench.sh); OPENBLAS_CORETYPE on the command line picks the kernel.
 * The API figure includes allocating its output, as a caller pays it.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "../core/gemm.h"
#include "../core/system.h"
#include "../core/tensor.h"

#define REPS 9
#define WARM 2

static int bench(int64_t M, int64_t K, int64_t N)
{
    xsa_rng g;
    xsa_rng_seed(&g, 1);
    xsa_tensor *a = xsa_tensor_randn(&g, 2, (int64_t[]){M, K}, 0, 1);
    xsa_tensor *b = xsa_tensor_randn(&g, 2, (int64_t[]){K, N}, 0, 1);
    float *c = malloc(sizeof(float) * (size_t)(M * N));
    if (!a || !b || !c) {
        fprintf(stderr, "bench_matmul: %s\n", c ? xsa_last_error() : "out of memory");
        return 1;
    }
    double t_api[REPS], t_blas[REPS];
    for (int r = -WARM; r < REPS; r++) {
        double t0 = bench_seconds();
        xsa_tensor *out = xsa_tensor_matmul(a, b);
        double t1 = bench_seconds();
        if (!out) {
            fprintf(stderr, "bench_matmul: %s\n", xsa_last_error());
            return 1;
        }
        xsa_tensor_free(out);
        double t2 = bench_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                    xsa_tensor_f32(a), (int)K, xsa_tensor_f32(b), (int)N, 0.0f, c, (int)N);
        double t3 = bench_seconds();
        if (r >= 0) {
            t_api[r] = t1 - t0;
            t_blas[r] = t3 - t2;
        }
    }
    double flop = 2.0 * (double)M * (double)N * (double)K;
    printf("matmul %lldx%lldx%lld: api (%s) %.1f GFLOP/s, cblas %.1f GFLOP/s (core %s, %d threads)\n",
           (long long)M, (long long)K, (long long)N, xsa_gemm_describe(), flop / bench_median(t_api, REPS) * 1e-9,
           flop / bench_median(t_blas, REPS) * 1e-9, xsa_blas_corename(), xsa_threads());
    free(c);
    xsa_tensor_free(a);
    xsa_tensor_free(b);
    return 0;
}

int main(void)
{
    int rc = bench(1024, 128, 4096);
    rc |= bench(1024, 128, 50257);
    return rc;
}
