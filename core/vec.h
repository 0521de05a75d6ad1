/*
 * vec.h: the two head-size loops of attention, shared by the training
 * kernels (nn.c) and incremental decoding (kv_cache.c) so that both sum in
 * the same order (cached decoding then matches a full forward). Private to
 * the core; not installed.
 */
#ifndef XSA_VEC_H
#define XSA_VEC_H

#include <math.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

/* The head-size loops of attention (n = HS), 16 lanes with a masked tail
 * (8 lanes and a scalar tail with AVX2).
 * At -O2 without -ffast-math GCC vectorizes neither (a float reduction, and
 * pointers that may alias), and they are most of attention's time. */
static inline float dot(const float *a, const float *b, int n)
{
#if defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float s = _mm_cvtss_f32(h);
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
#else
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
#endif
}

/* y[0..n) += w * x[0..n) */
static inline void axpy(float *y, float w, const float *x, int n)
{
#if defined(__AVX512F__)
    __m512 vw = _mm512_set1_ps(w);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k,
                              _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(k, x + i),
                                              _mm512_maskz_loadu_ps(k, y + i)));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(w, x[i], y[i]);
#else
    for (int i = 0; i < n; i++) y[i] += w * x[i];
#endif
}

#endif
