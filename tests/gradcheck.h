/*
 * gradcheck.h: the finite-difference gradient check of the autograd tests
 * (test_autograd.c, test_autograd_gpt.c), included by each: a test file
 * of its own rng and helpers, one definition.
 *
 * The check: out = f(inputs) through the xsa_ag_* ops; backward with
 * grad_out = W (a fixed random tensor shaped like out) gives the analytic
 * J^T W; the numeric one is (L(x+h) - L(x-h)) / 2h per input element, with
 * L = sum(out * W) accumulated in double so float32 rounding of the sum does
 * not swamp the difference.
 */
#ifndef XSA_TESTS_GRADCHECK_H
#define XSA_TESTS_GRADCHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/xsa.h"
#include "check.h"

typedef xsa_tensor *(*fwd)(xsa_tensor **in, const void *arg);

static xsa_rng rng;

static inline xsa_tensor *randn(int ndim, const int64_t *shape)
{
    return xsa_tensor_randn(&rng, ndim, shape, 0.0, 1.0);
}

/* values pushed away from 0 (kinks of abs/relu; log/sqrt/pow domains when
 * positive is set) */
static inline xsa_tensor *randn_away(int ndim, const int64_t *shape, int positive)
{
    xsa_tensor *t = randn(ndim, shape);
    float *p = xsa_tensor_f32(t);
    for (int64_t i = 0; i < xsa_tensor_numel(t); i++) {
        float a = fabsf(p[i]) + 0.3f;
        p[i] = positive ? a : (p[i] < 0 ? -a : a);
    }
    return t;
}

static inline double wsum(const xsa_tensor *out, const xsa_tensor *w)
{
    xsa_tensor *oc = xsa_tensor_contiguous((xsa_tensor *)out);
    const float *o = xsa_tensor_f32(oc), *ww = xsa_tensor_f32(w);
    double s = 0;
    for (int64_t i = 0; i < xsa_tensor_numel(oc); i++) s += (double)o[i] * ww[i];
    xsa_tensor_free(oc);
    return s;
}

/* Compares analytic and numeric gradients of every input that requires grad. */
static inline void gradcheck(const char *name, int n, xsa_tensor **in, fwd f, const void *arg,
                      double h, double rtol, double atol)
{
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) xsa_ag_zero_grad(in[i]);
    xsa_tensor *out = f(in, arg);
    CHECK(out != NULL, "%s: forward failed: %s", name, xsa_last_error());
    if (!out) return;
    CHECK(out->grad_fn != NULL, "%s: no grad_fn recorded", name);
    xsa_tensor *w = randn(out->ndim, out->shape);
    int rc = xsa_ag_backward(out, w, 0);
    CHECK(rc == 0, "%s: backward failed: %s", name, xsa_last_error());
    xsa_tensor_free(out);
    int prev = xsa_ag_set_enabled(0);
    for (int i = 0; i < n && rc == 0; i++) {
        if (!in[i] || !in[i]->requires_grad) continue;
        CHECK(in[i]->grad != NULL, "%s: input %d got no gradient", name, i);
        if (!in[i]->grad) continue;
        CHECK(xsa_tensor_same_shape(in[i]->grad, in[i]), "%s: grad %d has the wrong shape", name, i);
        int bad = 0;
        for (int64_t j = 0; j < xsa_tensor_numel(in[i]); j++) {
            /* logical element j (inputs may be strided views) */
            int64_t ix[XSA_MAX_DIMS], r = j;
            for (int d = in[i]->ndim - 1; d >= 0; d--) {
                ix[d] = r % in[i]->shape[d];
                r /= in[i]->shape[d];
            }
            double x0d, g;
            xsa_tensor_get(in[i], ix, &x0d);
            xsa_tensor_get(in[i]->grad, ix, &g);
            float x0 = (float)x0d, xp = (float)(x0 + h), xm = (float)(x0 - h);
            xsa_tensor_set(in[i], ix, xp);
            xsa_tensor *o1 = f(in, arg);
            xsa_tensor_set(in[i], ix, xm);
            xsa_tensor *o2 = f(in, arg);
            xsa_tensor_set(in[i], ix, x0);
            double num = (wsum(o1, w) - wsum(o2, w)) / ((double)xp - (double)xm);
            xsa_tensor_free(o1);
            xsa_tensor_free(o2);
            double err = fabs(num - g);
            if (err > atol + rtol * fabs(num) && bad++ < 3)
                printf("  %s: input %d element %lld: analytic %.6g numeric %.6g\n", name, i,
                       (long long)j, g, num);
        }
        CHECK(bad == 0, "%s: %d gradient elements of input %d off", name, bad, i);
    }
    xsa_ag_set_enabled(prev);
    xsa_tensor_free(w);
}

static inline void rg(xsa_tensor *t) { xsa_ag_set_requires_grad(t, 1); }

static inline void free_all(int n, xsa_tensor **t)
{
    for (int i = 0; i < n; i++) xsa_tensor_free(t[i]);
}

#endif
