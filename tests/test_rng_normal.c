/*
 * test_rng_normal.c: xsa_rng_normal_fill (core/rng_normal.c) against the
 * scalar stream it replaces, and its vector kernels against glibc.
 *
 * Method: (1) every float the fill writes is compared, bit for bit, with
 * (float)(xsa_rng_normal(g) * std) from a twin generator, over tens of
 * millions of draws, several seeds and stds (the model's 0.02 and
 * 0.02 / sqrt(2 n_layer) among them), in calls of assorted lengths so that
 * the spare crosses calls as it crosses the model's tensors; the
 * generators must end in the same state. The fallback is forced (e = 1)
 * and checked the same way; its natural rate is printed. (2) the vector
 * log and sincos against glibc over dense sweeps of the hard regions (u1
 * near 1 and tiny, the binade switch; th near the zeros of sin and cos,
 * the quadrant switches, tiny th) and random inputs, held to the bounds
 * rng_normal.c derives (u = 2^-53): log 4u, sin and cos 6u, the pair's
 * y = sqrt(-2 log u1) cos th std 14u; the fill's E = 2^-46 must cover
 * that with room. Without double vectors (the plain C build) (2) is
 * skipped and (1) checks the scalar path.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/rng.h"
#include "../core/rng_impl.h"
#include "../core/simd.h"
#include "check.h"

#define U 0x1p-53

static int same_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int same_state(const xsa_rng *a, const xsa_rng *b)
{
    return memcmp(a->s, b->s, sizeof a->s) == 0 && a->has_spare == b->has_spare &&
           (!a->has_spare || same_d(a->spare, b->spare));
}

/* Fills total values in calls of lengths from lens (cycled) with the fill,
 * and the same with the scalar stream; returns the mismatching values and
 * adds the pairs sent to the fallback to *fell. */
static size_t stream(uint64_t seed, double std, size_t total, const size_t *lens, int nlens,
                     double e, size_t *fell, int *state_ok)
{
    float *a = malloc(total * sizeof *a), *b = malloc(total * sizeof *b);
    if (!a || !b) {
        free(a), free(b);
        return total;
    }
    xsa_rng g, h;
    xsa_rng_seed(&g, seed);
    xsa_rng_seed(&h, seed);
    size_t at = 0, bad = 0;
    for (int k = 0; at < total; k = (k + 1) % nlens) {
        size_t n = lens[k] < total - at ? lens[k] : total - at;
        *fell += xsa_rng_normal_fill_e(&g, a + at, n, std, e);
        for (size_t i = 0; i < n; i++) b[at + i] = (float)(xsa_rng_normal(&h) * std);
        at += n;
    }
    for (size_t i = 0; i < total; i++) bad += !same_f(a[i], b[i]);
    *state_ok = same_state(&g, &h);
    free(a), free(b);
    return bad;
}

static void test_bits(void)
{
    /* 0.02 and 0.02 / sqrt(2 n_layer) for n_layer 1..12 are the model's */
    const double stds[] = {0.02, 0.02 / sqrt(2.0), 0.02 / sqrt(4.0), 0.02 / sqrt(6.0),
                           0.02 / sqrt(8.0), 0.02 / sqrt(12.0), 0.02 / sqrt(24.0), 1.0, 3.7,
                           1e-3, 0x1p-520};
    const uint64_t seeds[] = {0, 1, 42, 1234, 0x9e3779b97f4a7c15ULL};
    const size_t lens[] = {6432896, 1, 8192, 0, 7, 384, 49152, 2, 9, 1537, 131, 65536, 3, 8};
    size_t draws = 0, fell = 0, pairs = 0;
    int ns = (int)(sizeof stds / sizeof stds[0]);
    for (int si = 0; si < (int)(sizeof seeds / sizeof seeds[0]); si++)
        for (int k = 0; k < ns; k++) {
            /* the first std gets the long run, the rest a shorter one */
            size_t total = k == 0 ? 8000000 : 600000;
            int ok = 0;
            size_t bad = stream(seeds[si] + (uint64_t)k, stds[k], total, k == 0 ? lens : lens + 1,
                                k == 0 ? 14 : 13, xsa_rng_normal_bound(), &fell, &ok);
            CHECK(bad == 0 && ok, "seed %llu std %g: %zu of %zu floats differ, state %s",
                  (unsigned long long)seeds[si], stds[k], bad, total, ok ? "same" : "differs");
            draws += total;
            if (stds[k] > 0x1p-500) pairs += total / 2;
        }
    printf("  %zu draws bit for bit; the fallback recomputed %zu pairs (%.2g per pair)\n", draws,
           fell, pairs ? (double)fell / (double)pairs : 0.0);
    /* forced: every pair through the fallback, still the same bits */
    size_t forced = 0;
    int ok = 0;
    size_t bad = stream(7, 0.02, 200001, lens + 2, 12, 1.0, &forced, &ok);
    CHECK(bad == 0 && ok, "forced fallback: %zu floats differ", bad);
#if XSA_SIMD_F64
    CHECK(forced >= 90000u, "forced fallback ran %zu times", forced);
#endif
    /* a nonpositive std and an empty fill take the scalar path */
    size_t unused = 0;
    bad = stream(9, 0.0, 1001, lens + 4, 3, xsa_rng_normal_bound(), &unused, &ok);
    CHECK(bad == 0 && ok, "std 0: %zu floats differ", bad);
}

/* ---- (2) the kernels against glibc ---------------------------------------- */

/* |a - b| / |b| in units of u; 0 when both are equal */
static double rel_u(double a, double b)
{
    if (a == b) return 0.0;
    return fabs(a - b) / fabs(b) / U;
}

static double next_up(double x, int64_t j)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    b += j;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* the hard u1: near 1, tiny, around the binade switch and powers of 2;
 * then random ones; returns the count (a multiple of 4) */
static size_t hard_u1(double *x, size_t cap)
{
    size_t n = 0;
    for (int64_t j = 0; j < (1 << 20) && n < cap; j++) x[n++] = 1.0 - (double)j * U;
    for (int64_t j = 1; j <= (1 << 20) && n < cap; j++) x[n++] = (double)j * U;
    for (int b = 1; b <= 40; b++)
        for (int64_t j = -4096; j < 4096 && n < cap; j++) {
            x[n++] = next_up(ldexp(0x1.6a09cp+0, -b), j);
            x[n++] = next_up(ldexp(1.0, -b), j < 0 ? j : j + 1);
        }
    xsa_rng g;
    xsa_rng_seed(&g, 5);
    while (n < cap) x[n++] = 1.0 - xsa_rng_uniform(&g);
    return n / 4 * 4;
}

/* the hard th: around k pi/2 (zeros of sin and cos) and (2k+1) pi/4
 * (quadrant switches), tiny th; then random ones, all in [0, 2 pi] */
static size_t hard_th(double *t, size_t cap)
{
    size_t n = 0;
    for (int64_t j = 1; j <= (1 << 18) && n < cap; j++) t[n++] = XSA_RNG_TWO_PI * ((double)j * U);
    for (int k = 1; k <= 8; k++) {
        double c = (k % 2 == 0) ? (k / 2) * 1.57079632679489661923 : k * 0.785398163397448309616;
        for (int64_t j = -(1 << 17); j < (1 << 17) && n < cap; j++) {
            double v = next_up(c, j);
            if (v <= XSA_RNG_TWO_PI) t[n++] = v;
        }
    }
    xsa_rng g;
    xsa_rng_seed(&g, 6);
    while (n < cap) t[n++] = XSA_RNG_TWO_PI * xsa_rng_uniform(&g);
    return n / 4 * 4;
}

static void test_kernels(void)
{
    size_t cap = 1 << 23;
    double *x = malloc(cap * sizeof *x), *y = malloc(cap * sizeof *y);
    double *t = malloc(cap * sizeof *t), *s = malloc(cap * sizeof *s), *c = malloc(cap * sizeof *c);
    if (!x || !y || !t || !s || !c) {
        CHECK(0, "out of memory");
        goto done;
    }
    size_t nx = hard_u1(x, cap), nt = hard_th(t, cap);
    if (xsa_rng_vlog(x, y, nx) != 0 || xsa_rng_vsincos(t, s, c, nt) != 0) {
        printf("  no double vectors in this build: kernels not run\n");
        goto done;
    }
    double ml = 0, ms = 0, mc = 0, my = 0;
    for (size_t i = 0; i < nx; i++) /* log 1 must be +0, as glibc's */
        ml = fmax(ml, x[i] == 1.0 ? !same_d(y[i], 0.0) * 1e9 : rel_u(y[i], log(x[i])));
    for (size_t i = 0; i < nt; i++) {
        ms = fmax(ms, rel_u(s[i], sin(t[i])));
        mc = fmax(mc, rel_u(c[i], cos(t[i])));
    }
    /* the pairs as the fill forms them, every u1 with a hard or random th */
    for (size_t i = 0; i < nx; i++) {
        if (x[i] == 1.0) continue; /* y = 0: the fill's scalar path */
        size_t j = (i * 2654435761u) % nt;
        double r = sqrt(-2.0 * y[i]), std = 0.02;
        double yc = r * c[j] * std, ys = r * s[j] * std;
        double gr = sqrt(-2.0 * log(x[i]));
        my = fmax(my, fmax(rel_u(yc, gr * cos(t[j]) * std), rel_u(ys, gr * sin(t[j]) * std)));
    }
    printf("  vs glibc, max relative error in u = 2^-53 over %zu u1 and %zu th: log %.2f, "
           "sin %.2f, cos %.2f, the pair's y %.2f (E = 2^-46 = %.0fu)\n",
           nx, nt, ml, ms, mc, my, xsa_rng_normal_bound() / U);
    CHECK(ml <= 4.0, "log: %.3gu over the bound 4u", ml);
    CHECK(ms <= 6.0 && mc <= 6.0, "sin %.3gu, cos %.3gu over the bound 6u", ms, mc);
    CHECK(my <= 14.0, "y: %.3gu over the bound 14u", my);
    CHECK(14.0 * U * 4 <= xsa_rng_normal_bound(), "E leaves less than 4x room");
done:
    free(x), free(y), free(t), free(s), free(c);
}

int main(void)
{
    test_bits();
    test_kernels();
    return check_done("test_rng_normal");
}
