/*
 * simd.h: the core's one SIMD vocabulary. A float vector `vf` of VF_W lanes,
 * a lane mask `vmask`, and the few operations the kernels use, mapped once
 * for each instruction set the build can target: AVX-512 (16 lanes), AVX2
 * with FMA (8 lanes) and plain C (1 lane). The kernels of nn.c, lmhead.c,
 * lmhead_packed.c (decoding's lm_head), vec.h, optim.c and matmul_bf16.c
 * are written once against these names and test no ISA.
 * Private to the core; not installed.
 *
 * Determinism is the contract: each operation is one IEEE operation per
 * lane (correctly rounded: add, sub, mul, div, sqrt, and the multiply-add,
 * fused on the vector ISAs), so a lane computes exactly what the same
 * scalar operations compute, and the only things that differ between ISAs
 * are named here: the lane count, whether the multiply-add is fused (not
 * in plain C: a multiply, then an add, as the plain loops always were), the
 * horizontal sums (vf_hsum, vf_hmax), where reductions put their tail
 * (VF_FOLD_TAIL), and which kernels have a vector path at all (XSA_SIMD,
 * XSA_SIMD_GELU, XSA_SIMD_BF16). Each of those reproduces what that ISA's
 * path computed before the vocabulary existed, so runs keep their bits.
 *
 * Two kinds of kernel use it:
 *  - exact ones (AdamW, axpy, a scaled copy): the vector body is the scalar
 *    body, so they run it at every width, the plain C build included (one
 *    lane: vf is a float and each operation is the C operator).
 *  - ones whose vector path is its own algorithm (the polynomial exp, float
 *    partial sums): they run it only when XSA_SIMD is 1, and their scalar
 *    loop is both the plain C path and the vector paths' tail.
 *
 * Double vectors (vd, VD_W = 4 lanes, XSA_SIMD_F64) exist on the vector
 * ISAs only, for kernels that compute in double and round to float once
 * (rng_normal.c's normals); the plain C build leaves those to libm. They
 * are 256 bits on AVX-512 builds too: every AVX-512 CPU runs AVX2 + FMA,
 * so the one mapping is the one tested everywhere.
 *
 * Non-goals: integer arithmetic beyond the bf16 rounding and the double
 * exponent fields,
 * runtime dispatch (a build targets one ISA; `make test` builds the others),
 * other architectures (an ARM mapping would be one more block here).
 */
#ifndef XSA_SIMD_H
#define XSA_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

/* For kernel bodies inlined with a constant argument, so that their
 * per-group state stays in registers (lmhead.c's softmax statistics,
 * nn.c's layer norm rows) */
#if defined(__GNUC__)
#define XSA_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define XSA_ALWAYS_INLINE static inline
#endif

/* float to bf16, rounding to nearest even (no NaN case: the callers'
 * values are exponentials); the vector paths' bf16 stores do the same
 * integer arithmetic per lane */
static inline uint16_t sf_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- AVX-512: 16 lanes, k-register masks ---------------------------------- */
#if defined(__AVX512F__)

#define XSA_SIMD 1
#define VF_W 16
/* reductions fold a partial vector into the accumulators under a mask
 * before the horizontal sum */
#define VF_FOLD_TAIL 1
/* the GELU's erfc polynomial and bf16 exponentials have a vector path here */
#define XSA_SIMD_GELU 1
#define XSA_SIMD_BF16 1

typedef __m512 vf;
typedef __mmask16 vmask;

static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
/* lanes [0, n) set, 0 < n <= VF_W */
static inline vmask vf_mask(int n) { return (vmask)(n >= 16 ? 0xffffu : (1u << n) - 1u); }
/* masked-off lanes read as 0 and are not written */
static inline vf vf_load_mask(vmask k, const float *p) { return _mm512_maskz_loadu_ps(k, p); }
static inline void vf_store_mask(float *p, vmask k, vf v) { _mm512_mask_storeu_ps(p, k, v); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_sqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf vf_abs(vf a) { return _mm512_abs_ps(a); }
/* a * b + c and c - a * b, one rounding */
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vf_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
/* x86's max/min: the second operand when either is NaN */
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); }
/* to the nearest integer, ties to even */
static inline vf vf_round(vf a)
{
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* p * 2^n for integer-valued n with 2^n a normal float (|n| <= 126) */
static inline vf vf_scale2(vf p, vf n) { return _mm512_scalef_ps(p, n); }
static inline vmask vf_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
/* k ? a : b per lane */
static inline vf vf_select(vmask k, vf a, vf b) { return _mm512_mask_blend_ps(k, b, a); }
static inline float vf_hsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float vf_hmax(vf a) { return _mm512_reduce_max_ps(a); }
/* sf_to_bf16 of the lanes of k */
static inline void vf_store_bf16_mask(uint16_t *p, vmask k, vf v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    _mm256_mask_storeu_epi16(p, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
}
/* the same for all lanes: narrowed in a register, then one plain store (the
 * masked narrowing store, vpmovdw to memory, is slow on Zen 4 and 5:
 * measured, 18% of block_vec's samples in a bf16 step waited on it) */
static inline void vf_store_bf16(uint16_t *p, vf v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
}
/* the same for lanes that are normal floats or zeros (the softmax's
 * exponentials: vf_exp keeps 2^n normal), where the CPU has avx512_bf16:
 * one vcvtneps2bf16, which rounds to nearest even as sf_to_bf16 does but
 * flushes subnormals to zero, hence only for such lanes (measured: the bf16
 * softmax statistics, ce_block, in 0.87 of their time) */
static inline void vf_store_bf16_normal(uint16_t *p, vf v)
{
#if defined(__AVX512BF16__)
    _mm256_storeu_si256((__m256i *)(void *)p, (__m256i)_mm512_cvtneps_pbh(v));
#else
    vf_store_bf16(p, v);
#endif
}
/* the scalar multiply-add of the vector paths' scalar tails */
static inline float sf_fmadd(float a, float b, float c) { return fmaf(a, b, c); }

/* ---- AVX2 + FMA: 8 lanes, masks as all-ones lanes ------------------------- */
#elif defined(__AVX2__) && defined(__FMA__)

#define XSA_SIMD 1
#define VF_W 8
/* reductions take the horizontal sum of the whole vectors, then their tail
 * in scalar (the order this path has always had) */
#define VF_FOLD_TAIL 0
/* AVX2 builds compute the GELU with libm's erfcf and bf16 exponentials in
 * the scalar loop: a vector path would change their bits */
#define XSA_SIMD_GELU 0
#define XSA_SIMD_BF16 0

typedef __m256 vf;
typedef __m256i vmask;

static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_set1(float x) { return _mm256_set1_ps(x); }
static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vmask vf_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf vf_load_mask(vmask k, const float *p) { return _mm256_maskload_ps(p, k); }
static inline void vf_store_mask(float *p, vmask k, vf v) { _mm256_maskstore_ps(p, k, v); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_sqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf vf_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vf_fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vf_round(vf a)
{
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* 2^n built in the exponent field: exact, the same as AVX-512's scalef for
 * |n| <= 126 */
static inline vf vf_scale2(vf p, vf n)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
static inline vmask vf_lt(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
static inline vf vf_select(vmask k, vf a, vf b) { return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(k)); }
static inline float vf_hsum(vf a)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
static inline float vf_hmax(vf a)
{
    float lanes[8], mx = -INFINITY;
    _mm256_storeu_ps(lanes, a);
    for (int k = 0; k < 8; k++)
        if (lanes[k] > mx) mx = lanes[k];
    return mx;
}
static inline void vf_store_bf16_mask(uint16_t *p, vmask k, vf v)
{
    float x[8];
    int32_t on[8];
    _mm256_storeu_ps(x, v);
    _mm256_storeu_si256((__m256i *)(void *)on, k);
    for (int i = 0; i < 8; i++)
        if (on[i]) p[i] = sf_to_bf16(x[i]);
}
static inline void vf_store_bf16(uint16_t *p, vf v)
{
    float x[8];
    _mm256_storeu_ps(x, v);
    for (int i = 0; i < 8; i++) p[i] = sf_to_bf16(x[i]);
}
static inline void vf_store_bf16_normal(uint16_t *p, vf v) { vf_store_bf16(p, v); }
static inline float sf_fmadd(float a, float b, float c) { return fmaf(a, b, c); }

/* ---- plain C: one lane, each operation the C operator --------------------- */
#else

#define XSA_SIMD 0
#define VF_W 1
#define VF_FOLD_TAIL 0
#define XSA_SIMD_GELU 0
#define XSA_SIMD_BF16 0

typedef float vf;
typedef int vmask;

static inline vf vf_zero(void) { return 0.0f; }
static inline vf vf_set1(float x) { return x; }
static inline vf vf_load(const float *p) { return *p; }
static inline void vf_store(float *p, vf v) { *p = v; }
static inline vmask vf_mask(int n) { return n > 0; }
static inline vf vf_load_mask(vmask k, const float *p) { return k ? *p : 0.0f; }
static inline void vf_store_mask(float *p, vmask k, vf v)
{
    if (k) *p = v;
}
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_div(vf a, vf b) { return a / b; }
static inline vf vf_sqrt(vf a) { return sqrtf(a); }
static inline vf vf_abs(vf a) { return fabsf(a); }
/* no FMA unit on the x86-64 baseline: multiply, then add (two roundings,
 * what the plain C loops have always computed; -std=c11 keeps the
 * compiler from contracting them) */
static inline vf vf_fmadd(vf a, vf b, vf c) { return a * b + c; }
static inline vf vf_fnmadd(vf a, vf b, vf c) { return c - a * b; }
static inline vf vf_max(vf a, vf b) { return a > b ? a : b; }
static inline vf vf_min(vf a, vf b) { return a < b ? a : b; }
static inline vf vf_round(vf a) { return nearbyintf(a); }
/* a NaN n comes with a NaN p; converting it to int would be undefined */
static inline vf vf_scale2(vf p, vf n) { return n == n ? ldexpf(p, (int)n) : p; }
static inline vmask vf_lt(vf a, vf b) { return a < b; }
static inline vf vf_select(vmask k, vf a, vf b) { return k ? a : b; }
static inline float vf_hsum(vf a) { return a; }
static inline float vf_hmax(vf a) { return a; }
static inline void vf_store_bf16_mask(uint16_t *p, vmask k, vf v)
{
    if (k) *p = sf_to_bf16(v);
}
static inline void vf_store_bf16(uint16_t *p, vf v) { *p = sf_to_bf16(v); }
static inline void vf_store_bf16_normal(uint16_t *p, vf v) { *p = sf_to_bf16(v); }
static inline float sf_fmadd(float a, float b, float c) { return a * b + c; }

#endif

/* ---- double vectors: 4 lanes on AVX2 and AVX-512 builds -------------------- */
#if defined(__AVX2__) && defined(__FMA__)

#define XSA_SIMD_F64 1
#define VD_W 4

typedef __m256d vd;

static inline vd vd_set1(double x) { return _mm256_set1_pd(x); }
static inline vd vd_load(const double *p) { return _mm256_loadu_pd(p); }
static inline void vd_store(double *p, vd v) { _mm256_storeu_pd(p, v); }
static inline vd vd_add(vd a, vd b) { return _mm256_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
static inline vd vd_div(vd a, vd b) { return _mm256_div_pd(a, b); }
static inline vd vd_sqrt(vd a) { return _mm256_sqrt_pd(a); }
static inline vd vd_abs(vd a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
static inline vd vd_neg(vd a) { return _mm256_xor_pd(_mm256_set1_pd(-0.0), a); }
/* c - a * b, one rounding */
static inline vd vd_fnmadd(vd a, vd b, vd c) { return _mm256_fnmadd_pd(a, b, c); }
static inline vd vd_round(vd a)
{
    return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* lane masks are all-ones lanes; k ? a : b per lane */
static inline vd vd_eq(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
static inline vd vd_ge(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_GE_OQ); }
static inline vd vd_lt(vd a, vd b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
static inline vd vd_or(vd a, vd b) { return _mm256_or_pd(a, b); }
static inline vd vd_select(vd k, vd a, vd b) { return _mm256_blendv_pd(b, a, k); }
/* bit i set when lane i of the mask is */
static inline int vd_bits(vd k) { return _mm256_movemask_pd(k); }
/* for positive normal x = m 2^e, m in [1, 2): e (exact, as a double) and m */
static inline vd vd_getexp(vd x)
{
    __m256i b = _mm256_srli_epi64(_mm256_castpd_si256(x), 52);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x4330000000000000LL)); /* 2^52 + e + 1023 */
    return _mm256_sub_pd(_mm256_castsi256_pd(b), _mm256_set1_pd(0x1p52 + 1023.0));
}
static inline vd vd_getmant(vd x)
{
    __m256i b = _mm256_and_si256(_mm256_castpd_si256(x), _mm256_set1_epi64x(0x000fffffffffffffLL));
    return _mm256_castsi256_pd(_mm256_or_si256(b, _mm256_set1_epi64x(0x3ff0000000000000LL)));
}
/* bit i set when (float)a_i == (float)b_i, each rounded as C's (float) */
static inline int vd_f32_equal(vd a, vd b)
{
    return _mm_movemask_ps(_mm_cmpeq_ps(_mm256_cvtpd_ps(a), _mm256_cvtpd_ps(b)));
}
/* p[2i] = (float)a_i, p[2i + 1] = (float)b_i */
static inline void vd_store_f32_zip(float *p, vd a, vd b)
{
    __m128 fa = _mm256_cvtpd_ps(a), fb = _mm256_cvtpd_ps(b);
    _mm_storeu_ps(p, _mm_unpacklo_ps(fa, fb));
    _mm_storeu_ps(p + 4, _mm_unpackhi_ps(fa, fb));
}

#else
#define XSA_SIMD_F64 0
#endif

/* ---- written once over the vocabulary ------------------------------------- */

/* exp(x) per lane, for the kernels' arguments (x <= 88; they pass x <= 0
 * or a little above): Cephes' expf reduction and polynomial, accurate to
 * about 1 ulp; below e^-87 results flush to about 0, above 88 they are
 * e^88. Operand order keeps a NaN a NaN (vf_max/vf_min return their
 * second operand then). The vector paths only: the plain C path uses
 * libm's expf, and so do the vector paths' scalar tails. */
static inline vf vf_exp(vf x)
{
    x = vf_max(vf_set1(-87.0f), x);
    x = vf_min(vf_set1(88.0f), x); /* keeps 2^n a normal float */
    vf n = vf_round(vf_mul(x, vf_set1(1.44269504088896341f)));
    vf r = vf_fnmadd(n, vf_set1(0.693359375f), x);
    r = vf_fnmadd(n, vf_set1(-2.12194440e-4f), r);
    vf p = vf_set1(1.9875691500E-4f);
    p = vf_fmadd(p, r, vf_set1(1.3981999507E-3f));
    p = vf_fmadd(p, r, vf_set1(8.3334519073E-3f));
    p = vf_fmadd(p, r, vf_set1(4.1665795894E-2f));
    p = vf_fmadd(p, r, vf_set1(1.6666665459E-1f));
    p = vf_fmadd(p, r, vf_set1(5.0000001201E-1f));
    vf r2 = vf_mul(r, r);
    p = vf_fmadd(p, r2, vf_add(r, vf_set1(1.0f)));
    return vf_scale2(p, n);
}

#endif
