/*
 * vec.h: the two head-size loops of attention and its softmax row, shared
 * by the training kernels (nn.c) and incremental decoding (kv_cache.c) so
 * that both sum in the same order (cached decoding then matches a full
 * forward); and the
 * row updates of the lm_head (lmhead.c). Private to the core; not
 * installed.
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

/* One row of causal softmax attention, written once for the full kernel
 * (nn.c) and cached decoding (kv_cache.c), so that both compute the same
 * bits: a[0..n) = softmax(scale q.k_j) over the n keys at k + j*ks, then
 * y[0..HS) = sum_j a_j v_j with v_j at v + j*vs. */
static inline void attention_row(float *a, float *y, const float *q, const float *k, size_t ks,
                                 const float *v, size_t vs, int n, int HS, float scale)
{
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        float s = dot(q, k + (size_t)j * ks, HS) * scale;
        a[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        a[j] = expf(a[j] - mx);
        sum += a[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) a[j] *= inv;
    for (int i = 0; i < HS; i++) y[i] = 0.0f;
    for (int j = 0; j < n; j++) axpy(y, a[j], v + (size_t)j * vs, HS);
}

/* Row updates, exact at every width (simd.h): each lane is the scalar
 * expression, a multiply and then an add or subtract, never fused, and the
 * plain C build runs the same loop one lane at a time. At -O2 GCC left
 * these loops scalar (a run-time trip count, pointers that may alias);
 * as scalar loops they were 4% of a bf16 training step's samples. The
 * tail is one masked vector. */

/* y[0..n) = a * x[0..n) */
static inline void row_scale(float *y, float a, const float *x, int n)
{
    vf va = vf_set1(a);
    int i = 0;
    for (; i + VF_W <= n; i += VF_W) vf_store(y + i, vf_mul(va, vf_load(x + i)));
    if (i < n) {
        vmask k = vf_mask(n - i);
        vf_store_mask(y + i, k, vf_mul(va, vf_load_mask(k, x + i)));
    }
}

/* y[0..n) += a * x[0..n) (sub: -=), the product rounded first */
static inline void row_add_scaled(float *y, float a, const float *x, int n, int sub)
{
    vf va = vf_set1(a);
    int i = 0;
    for (; i + VF_W <= n; i += VF_W) {
        vf p = vf_mul(va, vf_load(x + i)), vy = vf_load(y + i);
        vf_store(y + i, sub ? vf_sub(vy, p) : vf_add(vy, p));
    }
    if (i < n) {
        vmask k = vf_mask(n - i);
        vf p = vf_mul(va, vf_load_mask(k, x + i)), vy = vf_load_mask(k, y + i);
        vf_store_mask(y + i, k, sub ? vf_sub(vy, p) : vf_add(vy, p));
    }
}

/* y[0..n) = f[0..n) * x[0..n), or with add y += f * x, the product
 * rounded first */
static inline void row_mul(float *y, const float *f, const float *x, int n, int add)
{
    int i = 0;
    for (; i + VF_W <= n; i += VF_W) {
        vf p = vf_mul(vf_load(f + i), vf_load(x + i));
        vf_store(y + i, add ? vf_add(vf_load(y + i), p) : p);
    }
    if (i < n) {
        vmask k = vf_mask(n - i);
        vf p = vf_mul(vf_load_mask(k, f + i), vf_load_mask(k, x + i));
        vf_store_mask(y + i, k, add ? vf_add(vf_load_mask(k, y + i), p) : p);
    }
}

#endif
