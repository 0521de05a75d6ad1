/*
 * check_tensor.h: what the tests of the tensor layer (test_tensor.c,
 * test_tensor_ops.c) share on top of check.h: shape literals, element reads
 * through xsa_tensor_get, deterministic fills, and CHECK_ERR for an expected
 * failure with its message. Not a reference implementation: each test
 * computes its expected values itself.
 */
#ifndef XSA_CHECK_TENSOR_H
#define XSA_CHECK_TENSOR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../core/tensor.h"
#include "check.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})

/* element of t at a flat row-major index, read through xsa_tensor_get */
static inline double at(const xsa_tensor *t, int64_t flat)
{
    int64_t idx[XSA_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = flat % t->shape[d];
        flat /= t->shape[d];
    }
    double v = NAN;
    if (xsa_tensor_get(t, idx, &v) < 0) return NAN;
    return v;
}

static inline double at2(const xsa_tensor *t, int64_t i, int64_t j)
{
    double v = NAN;
    xsa_tensor_get(t, (int64_t[]){i, j}, &v);
    return v;
}

/* a tensor filled with distinct, non-integer values (deterministic) */
static inline xsa_tensor *seq(int ndim, const int64_t *shape, double scale, double shift)
{
    xsa_tensor *t = xsa_tensor_new(XSA_FLOAT32, ndim, shape);
    float *p = xsa_tensor_f32(t);
    int64_t n = xsa_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * sin(1.3 * (double)i + 0.7) + shift);
    return t;
}

static inline xsa_tensor *from_vals(xsa_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    xsa_tensor *t = xsa_tensor_new(dt, ndim, shape);
    for (int64_t i = 0; i < xsa_tensor_numel(t); i++) {
        if (dt == XSA_FLOAT32) xsa_tensor_f32(t)[i] = (float)v[i];
        else xsa_tensor_i32(t)[i] = (int32_t)v[i];
    }
    return t;
}

static inline int has(const char *msg, const char *sub) { return strstr(msg, sub) != NULL; }

#define CHECK_ERR(expr, sub)                                                          \
    do {                                                                              \
        xsa_clear_error();                                                            \
        int failed_ = (expr);                                                         \
        CHECK(failed_ && has(xsa_last_error(), sub), "%s: expected failure with '%s', got '%s'", \
              #expr, sub, xsa_last_error());                                          \
    } while (0)

#endif
