/*
 * bench.h: what every benchmark program (tests/bench_*.c) times with: a
 * monotonic clock and the median of a set of samples. Header-only, for
 * tests/ alone (the core has its own clock in system.h).
 *
 * Also the benchmarks' batch of random tokens (bench_batch).
 *
 * Not here: the limits a time is compared against (peak.h), printing.
 */
#ifndef XSA_TESTS_BENCH_H
#define XSA_TESTS_BENCH_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/rng.h"

/* Seconds on CLOCK_MONOTONIC: immune to the wall clock being set. */
static inline double bench_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (the mean of the middle two when n is even), NaN
 * for n < 1; v keeps its order (a caller may still print the samples). */
static inline double bench_median(const double *v, int n)
{
    if (n < 1) return NAN;
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c) return NAN;
    memcpy(c, v, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, bench_cmp);
    double r = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return r;
}

/* The smallest of v[0..n) (the best run: load only ever adds time), NaN for n < 1. */
static inline double bench_min(const double *v, int n)
{
    double m = n > 0 ? v[0] : NAN;
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

/* N random token ids and N targets below vocab, seed 1 (every benchmark
 * the same batch); the caller frees both. -1 when out of memory. */
static inline int bench_batch(int N, int vocab, int32_t **in, int32_t **tg)
{
    *in = malloc(sizeof(int32_t) * (size_t)N);
    *tg = malloc(sizeof(int32_t) * (size_t)N);
    if (!*in || !*tg) return -1;
    xsa_rng g;
    xsa_rng_seed(&g, 1);
    for (int i = 0; i < N; i++) {
        (*in)[i] = (int32_t)xsa_rng_int(&g, 0, vocab);
        (*tg)[i] = (int32_t)xsa_rng_int(&g, 0, vocab);
    }
    return 0;
}

#endif
