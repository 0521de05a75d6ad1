/*
 * rng.c: the xoshiro256** generator of rng.h (seeding, uniform, normal and
 * unbiased integer draws, the global generator) and the random tensors of
 * tensor.h (rand, randn, randint) filled from it. rng.h documents the exact
 * streams; changing any formula here changes every seeded result.
 *
 * Not here: the Lua generator object (lua/l_tensor.c). Non-goals:
 * cryptographic quality, thread safety of the global generator (the engine is
 * driven from one thread), jump-ahead or parallel streams.
 */
/* see tensor_ops.c: -O2's very-cheap cost model skips most loops here */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <math.h>
#include <stdint.h>

#include "rng.h"
#include "rng_impl.h"
#include "tensor.h"
#include "tensor_impl.h"

/* ---- random ----------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void xsa_rng_seed(xsa_rng *g, uint64_t seed)
{
    if (!g) g = xsa_rng_global();
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
    g->has_spare = 0;
    g->spare = 0.0;
}

xsa_rng *xsa_rng_global(void)
{
    static xsa_rng global;
    static int ready;
    if (!ready) {
        ready = 1;
        xsa_rng_seed(&global, 0);
    }
    return &global;
}

uint64_t xsa_rng_next(xsa_rng *g)
{
    if (!g) g = xsa_rng_global();
    uint64_t *s = g->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double xsa_rng_uniform(xsa_rng *g)
{
    return (double)(xsa_rng_next(g) >> 11) * 0x1.0p-53;
}

double xsa_rng_normal(xsa_rng *g)
{
    if (!g) g = xsa_rng_global();
    if (g->has_spare) {
        g->has_spare = 0;
        return g->spare;
    }
    /* u1 in (0, 1] keeps log finite */
    double u1 = 1.0 - xsa_rng_uniform(g);
    double u2 = xsa_rng_uniform(g);
    g->has_spare = 1;
    return xsa_rng_box_muller(u1, u2, &g->spare);
}

int64_t xsa_rng_int(xsa_rng *g, int64_t lo, int64_t hi)
{
    if (hi <= lo) {
        xsa_error("rng_int: empty range [%lld, %lld)", (long long)lo, (long long)hi);
        return lo;
    }
    uint64_t range = (uint64_t)hi - (uint64_t)lo;
    /* accept only draws >= 2^64 mod range, so every residue is equally likely */
    uint64_t threshold = (0 - range) % range;
    uint64_t r;
    do {
        r = xsa_rng_next(g);
    } while (r < threshold);
    return (int64_t)((uint64_t)lo + r % range);
}

xsa_tensor *xsa_tensor_rand(xsa_rng *g, int ndim, const int64_t *shape)
{
    xsa_tensor *t = xsa_talloc("rand", XSA_FLOAT32, ndim, shape, 0);
    if (!t) return NULL;
    float *p = t->storage->data;
    int64_t n = xsa_tensor_numel(t);
    /* 24 top bits: exactly representable in float, so 1.0f never appears */
    for (int64_t i = 0; i < n; i++) p[i] = (float)((double)(xsa_rng_next(g) >> 40) * 0x1.0p-24);
    return t;
}

xsa_tensor *xsa_tensor_randn(xsa_rng *g, int ndim, const int64_t *shape, double mean, double std)
{
    if (!isfinite(mean) || !isfinite(std) || std < 0) {
        xsa_error("randn: mean %g and std %g must be finite with std >= 0", mean, std);
        return NULL;
    }
    xsa_tensor *t = xsa_talloc("randn", XSA_FLOAT32, ndim, shape, 0);
    if (!t) return NULL;
    float *p = t->storage->data;
    int64_t n = xsa_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(mean + std * xsa_rng_normal(g));
    return t;
}

xsa_tensor *xsa_tensor_randint(xsa_rng *g, int64_t lo, int64_t hi, int ndim, const int64_t *shape)
{
    if (hi <= lo || lo < INT32_MIN || hi > (int64_t)INT32_MAX + 1) {
        xsa_error("randint: range [%lld, %lld) is empty or does not fit int32", (long long)lo,
                  (long long)hi);
        return NULL;
    }
    xsa_tensor *t = xsa_talloc("randint", XSA_INT32, ndim, shape, 0);
    if (!t) return NULL;
    int32_t *p = t->storage->data;
    int64_t n = xsa_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)xsa_rng_int(g, lo, hi);
    return t;
}
