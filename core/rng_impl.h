/*
 * rng_impl.h: what rng.c and rng_normal.c share, and what the tests reach
 * of the batched normals. Private to the core; not installed.
 */
#ifndef XSA_RNG_IMPL_H
#define XSA_RNG_IMPL_H

#include <math.h>
#include <stddef.h>

#include "rng.h"

#define XSA_RNG_TWO_PI 6.283185307179586476925286766559

/* One Box-Muller pair from u1 in (0, 1] and u2 in [0, 1) with libm's log,
 * sqrt, sin and cos: the stream of rng.h. xsa_rng_normal and the batched
 * fill's fallback both compute it here, so they cannot drift apart. */
static inline double xsa_rng_box_muller(double u1, double u2, double *sin_part)
{
    double r = sqrt(-2.0 * log(u1));
    double th = XSA_RNG_TWO_PI * u2;
    *sin_part = r * sin(th);
    return r * cos(th);
}

/* xsa_rng_normal_fill with the relative bound e of its rounding check
 * (rng_normal.c derives the one it uses); returns how many pairs the
 * check sent back to the scalar path. A larger e sends more (e >= 1: all). */
size_t xsa_rng_normal_fill_e(xsa_rng *g, float *p, size_t n, double std, double e);
/* The vector kernels, for the error tests: y = log(x) for x in (0, 1]; s, c
 * = sin(th), cos(th) for th in [0, 2 pi]; n a multiple of 4. Return 0, or
 * -1 when the build has no double vectors (simd.h's XSA_SIMD_F64). */
int xsa_rng_vlog(const double *x, double *y, size_t n);
int xsa_rng_vsincos(const double *th, double *s, double *c, size_t n);
/* the relative bound the fill uses */
double xsa_rng_normal_bound(void);

#endif
