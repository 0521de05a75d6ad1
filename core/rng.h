/*
 * rng.h: the seeded, reproducible random generator of the core (tensor.h's
 * rand/randn/randint, the model's initialisation and the data loader's
 * shuffles draw from it).
 *
 * xoshiro256** seeded through splitmix64; normals by Box-Muller in double
 * precision. The same seed gives the same numbers on every machine. A NULL
 * generator means the global one (seeded with 0 at start). The exact
 * streams, so other implementations can reproduce them:
 *   seed:    s[0..3] = four successive splitmix64 outputs from x = seed
 *   uniform: (next >> 11) * 2^-53
 *   normal:  u1 = 1 - uniform, u2 = uniform, r = sqrt(-2 ln u1);
 *            returns r cos(2 pi u2) and keeps r sin(2 pi u2) as the spare
 *            (returned by the next call; reseeding drops it)
 *   int:     r = next until r >= 2^64 mod (hi - lo); lo + r mod (hi - lo)
 * rng_int with hi <= lo records an error (error.h) and returns lo.
 *
 * Example:
 *   xsa_rng g;
 *   xsa_rng_seed(&g, 42);
 *   double u = xsa_rng_uniform(&g);          // [0, 1)
 *   int64_t k = xsa_rng_int(&g, 0, 10);      // 0..9
 */
#ifndef XSA_RNG_H
#define XSA_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct xsa_rng {
    uint64_t s[4];
    int has_spare;
    double spare;
} xsa_rng;
void xsa_rng_seed(xsa_rng *g, uint64_t seed);
xsa_rng *xsa_rng_global(void);
uint64_t xsa_rng_next(xsa_rng *g);
double xsa_rng_uniform(xsa_rng *g);           /* [0, 1) with 53 bits */
double xsa_rng_normal(xsa_rng *g);            /* N(0, 1) */
int64_t xsa_rng_int(xsa_rng *g, int64_t lo, int64_t hi); /* [lo, hi), unbiased */
/* p[i] = (float)(xsa_rng_normal(g) * std) for i = 0..n-1 in order: the same
 * bits and the same generator state after (the spare included), several
 * times faster (vector log and sincos, checked; rng_normal.c) */
void xsa_rng_normal_fill(xsa_rng *g, float *p, size_t n, double std);

#endif
