/*
 * vec.h: the two head-size loops of attention, shared by the training
 * kernels (nn.c) and incremental decoding (kv_cache.c) so that both sum in
 * the same order (cached decoding then matches a full forward). Private to
 * the core; not installed.
 */
#ifndef XSA_VEC_H
#define XSA_VEC_H

#include "simd.h"

/* The head-size loops of attention (n = HS), written once over simd.h:
 * VF_W lanes at a time; the tail is folded in under a mask (AVX-512) or
 * summed in scalar after the horizontal sum (AVX2); the plain C path is
 * the one-lane case.
 * At -O2 without -ffast-math GCC vectorizes neither (a float reduction, and
 * pointers that may alias), and they are most of attention's time. */
static inline float dot(const float *a, const float *b, int n)
{
    vf acc = vf_zero();
    int i = 0;
    for (; i + VF_W <= n; i += VF_W) acc = vf_fmadd(vf_load(a + i), vf_load(b + i), acc);
    if (VF_FOLD_TAIL && i < n) {
        vmask k = vf_mask(n - i);
        acc = vf_fmadd(vf_load_mask(k, a + i), vf_load_mask(k, b + i), acc);
        i = n;
    }
    float s = vf_hsum(acc);
    for (; i < n; i++) s = sf_fmadd(a[i], b[i], s);
    return s;
}

/* y[0..n) += w * x[0..n) */
static inline void axpy(float *y, float w, const float *x, int n)
{
    vf vw = vf_set1(w);
    int i = 0;
    for (; i + VF_W <= n; i += VF_W) vf_store(y + i, vf_fmadd(vw, vf_load(x + i), vf_load(y + i)));
    if (i < n) {
        vmask k = vf_mask(n - i);
        vf_store_mask(y + i, k, vf_fmadd(vw, vf_load_mask(k, x + i), vf_load_mask(k, y + i)));
    }
}

#endif
