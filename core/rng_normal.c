/*
 * rng_normal.c: xsa_rng_normal_fill, many normals of rng.h's stream at
 * once, bit for bit what xsa_rng_normal gives one at a time: the model's
 * initialisation draws millions (6.8M at the default size), and libm's
 * log, sin and cos were most of xsa_gpt_new's time.
 *
 * How. The uniforms are drawn in the stream's order (xoshiro is cheap);
 * then, VD_W pairs at a time (simd.h's double vectors), a vector log and
 * sincos compute y = r cos th * std and r sin th * std in double. y is not
 * libm's double, but both are within E |y| of the exact value, and the
 * caller keeps only (float)y: when y - E|y| and y + E|y| round to the same
 * float, so does everything between them, libm's result included (rounding
 * is monotonic). The few pairs where they do not (about 3 in 10^7, near a
 * float rounding midpoint) are recomputed by the scalar path, which is
 * rng.h's formula with libm itself (rng_impl.h). The generator's state,
 * the spare included, ends as the scalar calls would leave it.
 *
 * E, relative, against the exact value of sqrt(-2 ln u1) cos(th) std for
 * the double inputs u1, th = fl(2 pi u2) (the same double on both paths)
 * and std; u = 2^-53, a relative ulp is at most 2u:
 *  - libm (glibc's manual: log, sin, cos at most 1 ulp on x86-64): log
 *    1 ulp, halved by the square root, + the square root's rounding u +
 *    cos or sin 1 ulp + the two products' roundings 2u  = 6u;
 *  - the kernels here: vd_log is fdlibm's e_log.c in IEEE operations,
 *    < 1 ulp as fdlibm documents, halved: u; vd_sincos below: the
 *    reduction's two roundings 2u relative to x (the Cody-Waite remainder
 *    is 4e-49, against |x| >= 6.1e-17, the closest a double in [0, 2 pi]
 *    comes to a multiple of pi/2), the polynomial 2^-58, the evaluation
 *    about 1.5u: at most 4u for sin and for cos; + u + 2u for the
 *    square root and products  = 8u;
 *  - together 14u = 7 * 2^-52 < 2^-49 (second-order terms are far below).
 * The check uses E = 2^-46: 8x that, so that a bound missed by a factor
 * of a few still holds, and the check's own roundings (|y| E is exact,
 * y -+ |y| E rounds by at most u|y|) stay inside. The fallback rate is
 * about 2E / 2^-23.5 = 3.4e-7 per value. tests/test_rng_normal.c measures
 * the kernels against glibc over the hard regions (u1 near 1 and tiny, th
 * near the zeros of sin and cos) and holds them to the 14u above.
 * y == 0 (u1 = 1: r is -0 or +0) always takes the scalar path, and so do
 * stds whose products could leave the normal range.
 *
 * Not here: the generator and the one-at-a-time normal (rng.c). Non-goals:
 * xsa_tensor_randn (mean + std n is another rounding; it stays scalar), an
 * 8-lane AVX-512 path (VD_W is 4 on every vector build; see simd.h).
 */
#include <stdint.h>

#include "rng.h"
#include "rng_impl.h"
#include "simd.h"

#define FILL_E 0x1p-46
/* pairs drawn per block: their uniforms stay in L1 */
#define BLOCK 256

double xsa_rng_normal_bound(void) { return FILL_E; }

#if XSA_SIMD_F64

/* log(x) for x in (0, 1] (positive normal x): fdlibm's e_log.c. x =
 * 2^k (1 + f) with 1 + f in [0.7071, 1.4142), s = f / (2 + f), log(1 + f)
 * = f - (f^2/2 - s (f^2/2 + R(s^2))), R's coefficients fdlibm's (its
 * error < 2^-58.45 on |s| <= 0.1716); k ln 2 in two parts. */
static inline vd vd_log(vd x)
{
    vd k = vd_getexp(x), m = vd_getmant(x);
    /* fdlibm's switch to the lower binade: mantissa high word >= 0x6a09c */
    vd up = vd_ge(m, vd_set1(0x1.6a09cp+0));
    m = vd_select(up, vd_mul(m, vd_set1(0.5)), m);
    k = vd_select(up, vd_add(k, vd_set1(1.0)), k);
    vd f = vd_sub(m, vd_set1(1.0));
    vd s = vd_div(f, vd_add(vd_set1(2.0), f));
    vd z = vd_mul(s, s), w = vd_mul(z, z);
    vd t1 = vd_add(vd_set1(3.999999999940941908e-01),
                   vd_mul(w, vd_add(vd_set1(2.222219843214978396e-01),
                                    vd_mul(w, vd_set1(1.531383769920937332e-01)))));
    t1 = vd_mul(w, t1);
    vd t2 = vd_add(vd_set1(2.857142874366239149e-01),
                   vd_mul(w, vd_add(vd_set1(1.818357216161805012e-01),
                                    vd_mul(w, vd_set1(1.479819860511658591e-01)))));
    t2 = vd_mul(z, vd_add(vd_set1(6.666666666666735130e-01), vd_mul(w, t2)));
    vd R = vd_add(t2, t1);
    vd hfsq = vd_mul(vd_mul(vd_set1(0.5), f), f);
    vd lo = vd_add(vd_mul(s, vd_add(hfsq, R)), vd_mul(k, vd_set1(1.90821492927058770002e-10)));
    return vd_sub(vd_mul(k, vd_set1(6.93147180369123816490e-01)), vd_sub(vd_sub(hfsq, lo), f));
}

/* sin and cos of th in [0, 2 pi]: x = th - k pi/2 (Cody-Waite, pi/2 in
 * three doubles: the first product is exact, x is within 2 roundings),
 * fdlibm's k_sin / k_cos polynomials on |x| <= pi/4 (+ a rounding), the
 * cosine's 1 - z/2 split exactly (Fast2Sum), then the quadrant. */
static inline void vd_sincos(vd th, vd *sn, vd *cs)
{
    vd k = vd_round(vd_mul(th, vd_set1(6.36619772367581382433e-01)));
    vd x = vd_fnmadd(k, vd_set1(1.5707963267948966), th);
    x = vd_fnmadd(k, vd_set1(6.123233995736766e-17), x);
    x = vd_fnmadd(k, vd_set1(-1.4973849048591698e-33), x);
    vd z = vd_mul(x, x);
    vd r = vd_add(vd_set1(2.75573137070700676789e-06),
                  vd_mul(z, vd_add(vd_set1(-2.50507602534068634195e-08),
                                   vd_mul(z, vd_set1(1.58969099521155010221e-10)))));
    r = vd_add(vd_set1(-1.98412698298579493134e-04), vd_mul(z, r));
    r = vd_add(vd_set1(8.33333333332248946124e-03), vd_mul(z, r));
    r = vd_add(vd_set1(-1.66666666666666324348e-01), vd_mul(z, r));
    vd s = vd_add(x, vd_mul(vd_mul(z, x), r));
    vd q = vd_mul(z, vd_set1(-1.13596475577881948265e-11));
    q = vd_add(vd_set1(2.08757232129817482790e-09), q);
    q = vd_add(vd_set1(-2.75573143513906633035e-07), vd_mul(z, q));
    q = vd_add(vd_set1(2.48015872894767294178e-05), vd_mul(z, q));
    q = vd_add(vd_set1(-1.38888888888741095749e-03), vd_mul(z, q));
    q = vd_mul(vd_mul(z, z), vd_add(vd_set1(4.16666666666666019037e-02), vd_mul(z, q)));
    vd hz = vd_mul(vd_set1(0.5), z), w = vd_sub(vd_set1(1.0), hz);
    vd c = vd_add(w, vd_add(vd_sub(vd_sub(vd_set1(1.0), w), hz), q));
    /* k in 0..4: sin(x + k pi/2) is s, c, -s, -c; cos is c, -s, -c, s */
    vd k1 = vd_eq(k, vd_set1(1.0)), k2 = vd_eq(k, vd_set1(2.0)), k3 = vd_eq(k, vd_set1(3.0));
    vd odd = vd_or(k1, k3);
    vd ss = vd_select(odd, c, s), cc = vd_select(odd, s, c);
    *sn = vd_select(vd_or(k2, k3), vd_neg(ss), ss);
    *cs = vd_select(vd_or(k1, k2), vd_neg(cc), cc);
}

int xsa_rng_vlog(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i + VD_W <= n; i += VD_W) vd_store(y + i, vd_log(vd_load(x + i)));
    return 0;
}

int xsa_rng_vsincos(const double *th, double *s, double *c, size_t n)
{
    for (size_t i = 0; i + VD_W <= n; i += VD_W) {
        vd vs, vc;
        vd_sincos(vd_load(th + i), &vs, &vc);
        vd_store(s + i, vs);
        vd_store(c + i, vc);
    }
    return 0;
}

/* bit i set when lane i's float is certain: y -+ e|y| round alike, y != 0 */
static inline int f32_certain(vd y, vd e)
{
    vd a = vd_abs(y), d = vd_mul(a, e);
    int ok = vd_f32_equal(vd_sub(y, d), vd_add(y, d));
    return ok & ~vd_bits(vd_lt(a, vd_set1(0x1p-900)));
}

/* np pairs (a multiple of VD_W) from the uniforms u1, u2 into p[0, 2 np) */
static size_t pairs(const double *u1, const double *u2, size_t np, float *p, double std, double e)
{
    size_t fell = 0;
    vd vstd = vd_set1(std), ve = vd_set1(e);
    for (size_t i = 0; i < np; i += VD_W) {
        vd r = vd_sqrt(vd_mul(vd_set1(-2.0), vd_log(vd_load(u1 + i))));
        vd s, c;
        vd_sincos(vd_mul(vd_set1(XSA_RNG_TWO_PI), vd_load(u2 + i)), &s, &c);
        vd yc = vd_mul(vd_mul(r, c), vstd), ys = vd_mul(vd_mul(r, s), vstd);
        vd_store_f32_zip(p + 2 * i, yc, ys);
        int bad = ~(f32_certain(yc, ve) & f32_certain(ys, ve)) & ((1 << VD_W) - 1);
        for (int l = 0; bad; l++, bad >>= 1) {
            if (!(bad & 1)) continue;
            double sp, cp = xsa_rng_box_muller(u1[i + l], u2[i + l], &sp);
            p[2 * (i + l)] = (float)(cp * std);
            p[2 * (i + l) + 1] = (float)(sp * std);
            fell++;
        }
    }
    return fell;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* rng.c's xsa_rng_next, on the state in registers */
static inline uint64_t next(uint64_t *s0, uint64_t *s1, uint64_t *s2, uint64_t *s3)
{
    uint64_t x = rotl(*s1 * 5, 7) * 9, t = *s1 << 17;
    *s2 ^= *s0;
    *s3 ^= *s1;
    *s1 ^= *s2;
    *s0 ^= *s3;
    *s2 ^= t;
    *s3 = rotl(*s3, 45);
    return x;
}

/* np pairs of uniforms as xsa_rng_normal draws them (xsa_rng_uniform) */
static void draw(uint64_t *st, double *u1, double *u2, size_t np)
{
    uint64_t s0 = st[0], s1 = st[1], s2 = st[2], s3 = st[3];
    for (size_t i = 0; i < np; i++) {
        u1[i] = 1.0 - (double)(next(&s0, &s1, &s2, &s3) >> 11) * 0x1.0p-53;
        u2[i] = (double)(next(&s0, &s1, &s2, &s3) >> 11) * 0x1.0p-53;
    }
    st[0] = s0, st[1] = s1, st[2] = s2, st[3] = s3;
}

/* Fills whole vectors of pairs; returns how many values it wrote. */
static size_t fill_vector(xsa_rng *g, float *p, size_t n, double std, double e, size_t *fell)
{
    double u1[BLOCK], u2[BLOCK];
    size_t done = 0, np = n / 2 / VD_W * VD_W;
    while (np > 0) {
        size_t b = np < BLOCK ? np : BLOCK;
        draw(g->s, u1, u2, b);
        *fell += pairs(u1, u2, b, p + done, std, e);
        done += 2 * b;
        np -= b;
    }
    return done;
}

#else

int xsa_rng_vlog(const double *x, double *y, size_t n)
{
    (void)x, (void)y, (void)n;
    return -1;
}

int xsa_rng_vsincos(const double *th, double *s, double *c, size_t n)
{
    (void)th, (void)s, (void)c, (void)n;
    return -1;
}

#endif

size_t xsa_rng_normal_fill_e(xsa_rng *g, float *p, size_t n, double std, double e)
{
    if (!g) g = xsa_rng_global();
    size_t i = 0, fell = 0;
    if (n > 0 && g->has_spare) {
        p[i++] = (float)(g->spare * std);
        g->has_spare = 0;
    }
#if XSA_SIMD_F64
    /* a normal is within [2^-90, 40]: y stays a normal double */
    if (std >= 0x1p-500 && std <= 0x1p500) i += fill_vector(g, p + i, n - i, std, e, &fell);
#else
    (void)e;
#endif
    for (; i < n; i++) p[i] = (float)(xsa_rng_normal(g) * std);
    return fell;
}

void xsa_rng_normal_fill(xsa_rng *g, float *p, size_t n, double std)
{
    xsa_rng_normal_fill_e(g, p, n, std, FILL_E);
}
