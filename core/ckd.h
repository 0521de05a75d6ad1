/*
 * ckd.h: overflow-checked size arithmetic for sizes computed from
 * user-supplied numbers (shapes, counts, window ranges, buffer lengths).
 *
 * Each returns 0 and stores the exact result in *out, or returns nonzero on
 * overflow (then *out holds the wrapped value and must not be used). They
 * are __builtin_*_overflow (GCC >= 5, clang), so the check is the carry flag
 * and costs nothing next to the work a size leads to. Use them wherever a
 * product or sum of sizes could pass INT64_MAX / SIZE_MAX, and report the
 * overflow as a clear error naming the function and the numbers involved:
 *
 *   int64_t n;
 *   if (xsa_ckd_mul_i64(windows, seq_len + 1, &n) || n > n_tokens)
 *       return xsa_error("loader: ...");
 *
 * xsa_ceil_div_i64 is ceil(a / b) for a >= 0, b >= 1 without forming a+b-1
 * (which overflows when b is huge). Header only, for the core's own files
 * (xsa.h does not include it).
 */
#ifndef XSA_CKD_H
#define XSA_CKD_H

#include <stddef.h>
#include <stdint.h>

static inline int xsa_ckd_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static inline int xsa_ckd_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

static inline int xsa_ckd_sub_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_sub_overflow(a, b, out);
}

static inline int xsa_ckd_mul_size(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static inline int xsa_ckd_add_size(size_t a, size_t b, size_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

/* ceil(a / b) for a >= 0 and b >= 1 (no intermediate can overflow). */
static inline int64_t xsa_ceil_div_i64(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

#endif
