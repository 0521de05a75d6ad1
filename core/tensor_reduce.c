/*
 * tensor_reduce.c: the ops that combine values along a dimension:
 * reductions (sum, mean, max, min, argmax, argmin, var), softmax and
 * log_softmax, and matmul through xsa_sgemm (see tensor.h, gemm.h).
 *
 * Inputs are made contiguous and seen as [outer, n, inner] around the
 * reduced dimension; sums accumulate in double in a fixed order, and when the
 * dimension is not the last the kernels sweep whole rows of the [n, inner]
 * block (reduce_cols, softmax_cols) so reads stay sequential. matmul hands
 * sgemm each operand in place when its strides fit a BLAS layout (transposed
 * views included) and a contiguous copy otherwise.
 * Not here: element-wise ops, where/clamp, allclose (tensor_ops.c).
 * Non-goals: matmul shapes other than [M,K]x[K,N], [B,M,K]x[B,K,N] and
 * [B,M,K]x[K,N]; int32 matmul; threading the reductions.
 */
/* see tensor_ops.c: -O2's very-cheap cost model skips most loops here */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "gemm.h"
#include "tensor.h"
#include "tensor_impl.h"

/* ---- reductions ------------------------------------------------------- */

static const char *redop_name(xsa_redop op)
{
    static const char *const names[] = {"sum", "mean", "max", "min", "argmax", "argmin", "var"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "reduce";
}

/* Reduces n values x[0], x[s], ... ; writes value (or index for arg ops). */
static double reduce_run(xsa_redop op, const float *x, int64_t n, int64_t s, int64_t *arg)
{
    switch (op) {
    case XSA_SUM:
    case XSA_MEAN:
    case XSA_VAR: {
        /* four accumulators: independent adds pipeline, the order is fixed */
        double acc[4] = {0, 0, 0, 0};
        int64_t i = 0;
        if (s == 1)
            for (; i + 4 <= n; i += 4) {
                acc[0] += x[i];
                acc[1] += x[i + 1];
                acc[2] += x[i + 2];
                acc[3] += x[i + 3];
            }
        for (; i < n; i++) acc[0] += x[i * s];
        double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        if (op == XSA_SUM) return sum;
        double mean = sum / (double)n;
        if (op == XSA_MEAN) return mean;
        double ss = 0.0;
        for (i = 0; i < n; i++) {
            double d = x[i * s] - mean;
            ss += d * d;
        }
        return ss / (double)(n - 1);
    }
    case XSA_MAX:
    case XSA_MIN:
    case XSA_ARGMAX:
    case XSA_ARGMIN: {
        /* NaN wins (PyTorch propagates it); ties keep the first index */
        int want_max = op == XSA_MAX || op == XSA_ARGMAX;
        float best = x[0];
        int64_t bi = 0;
        for (int64_t i = 1; i < n && best == best; i++) {
            float v = x[i * s];
            if (v != v || (want_max ? v > best : v < best)) {
                best = v;
                bi = i;
            }
        }
        if (arg) *arg = bi;
        return best;
    }
    }
    return 0;
}

/* Reduces each column j of an [n, inner] row-major block into po[j] (or
 * the index into pi[j]); acc and idx are scratch of `inner` entries. */
static void reduce_cols(xsa_redop op, const float *x, int64_t n, int64_t inner, double *acc,
                        int64_t *idx, float *po, int32_t *pi)
{
    if (op == XSA_SUM || op == XSA_MEAN || op == XSA_VAR) {
        for (int64_t j = 0; j < inner; j++) acc[j] = 0.0;
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) acc[j] += x[k * inner + j];
        if (op != XSA_VAR) {
            for (int64_t j = 0; j < inner; j++)
                po[j] = (float)(op == XSA_MEAN ? acc[j] / (double)n : acc[j]);
            return;
        }
        for (int64_t j = 0; j < inner; j++) acc[j] /= (double)n; /* means */
        double *ss = malloc((size_t)inner * sizeof *ss);
        if (!ss) { /* fall back to a strided pass per column */
            for (int64_t j = 0; j < inner; j++) po[j] = (float)reduce_run(op, x + j, n, inner, NULL);
            return;
        }
        for (int64_t j = 0; j < inner; j++) ss[j] = 0.0;
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) {
                double d = x[k * inner + j] - acc[j];
                ss[j] += d * d;
            }
        for (int64_t j = 0; j < inner; j++) po[j] = (float)(ss[j] / (double)(n - 1));
        free(ss);
        return;
    }
    /* max/min/arg: NaN wins and sticks (first NaN's index); ties keep the
     * first index */
    int want_max = op == XSA_MAX || op == XSA_ARGMAX;
    for (int64_t j = 0; j < inner; j++) {
        acc[j] = x[j];
        idx[j] = 0;
    }
    for (int64_t k = 1; k < n; k++)
        for (int64_t j = 0; j < inner; j++) {
            double v = x[k * inner + j], b = acc[j];
            if (b == b && (v != v || (want_max ? v > b : v < b))) {
                acc[j] = v;
                idx[j] = k;
            }
        }
    for (int64_t j = 0; j < inner; j++) {
        if (pi) pi[j] = (int32_t)idx[j];
        else po[j] = (float)acc[j];
    }
}

/* int32 input, exactly: sums in int64 (exact for any 2^32 values), the
 * mean and variance in double, comparisons on the integers. One column of
 * n values x[0], x[s], ... (int32 reductions are rare: no row sweeps). */
static void reduce_i32(xsa_redop op, const int32_t *x, int64_t n, int64_t s, float *po,
                       int32_t *pi)
{
    if (op == XSA_SUM || op == XSA_MEAN || op == XSA_VAR) {
        int64_t sum = 0;
        for (int64_t i = 0; i < n; i++) sum += x[i * s];
        double mean = (double)sum / (double)n;
        if (op == XSA_SUM) {
            *po = (float)sum;
        } else if (op == XSA_MEAN) {
            *po = (float)mean;
        } else {
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (x[i * s] - mean) * (x[i * s] - mean);
            *po = (float)(ss / (double)(n - 1));
        }
        return;
    }
    int want_max = op == XSA_MAX || op == XSA_ARGMAX;
    int32_t best = x[0];
    int64_t bi = 0;
    for (int64_t i = 1; i < n; i++) {
        int32_t v = x[i * s];
        if (want_max ? v > best : v < best) {
            best = v;
            bi = i;
        }
    }
    if (pi) *pi = (int32_t)bi;
    else *po = (float)best;
}

/* Reduces the contiguous x, seen as [outer, n, inner], into out; -1 when
 * out of memory (the caller says so, after freeing). */
static int reduce_blocks(xsa_redop op, const xsa_tensor *x, xsa_tensor *out, int64_t outer,
                         int64_t n, int64_t inner)
{
    int argop = op == XSA_ARGMAX || op == XSA_ARGMIN;
    const float *px = x->dtype == XSA_FLOAT32 ? xsa_fptr(x, 0) : NULL;
    float *po = out->dtype == XSA_FLOAT32 ? xsa_fptr(out, 0) : NULL;
    int32_t *pi = out->dtype == XSA_INT32 ? xsa_iptr(out, 0) : NULL;
    if (x->dtype == XSA_INT32 && n > 0) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < inner; j++)
                reduce_i32(op, xsa_iptr(x, o * n * inner + j), n, inner, po ? po + o * inner + j : NULL,
                           pi ? pi + o * inner + j : NULL);
    } else if (n == 0) {
        int64_t m = xsa_tensor_numel(out);
        for (int64_t i = 0; i < m; i++) po[i] = op == XSA_SUM ? 0.0f : NAN;
    } else if (inner > 1) {
        /* sweep whole rows of the [n, inner] block: reads stay sequential */
        double *acc = malloc((size_t)inner * (sizeof(double) + sizeof(int64_t)));
        if (!acc) return -1;
        int64_t *idx = (int64_t *)(acc + inner);
        for (int64_t o = 0; o < outer; o++)
            reduce_cols(op, px + o * n * inner, n, inner, acc, idx,
                        po ? po + o * inner : NULL, pi ? pi + o * inner : NULL);
        free(acc);
    } else {
        for (int64_t o = 0; o < outer; o++) {
            int64_t arg = 0;
            double v = reduce_run(op, px + o * n, n, 1, &arg);
            if (argop) pi[o] = (int32_t)arg;
            else po[o] = (float)v;
        }
    }
    return 0;
}

xsa_tensor *xsa_tensor_reduce(xsa_redop op, const xsa_tensor *a, int dim, int keepdim)
{
    const char *fn = redop_name(op);
    if ((unsigned)op > XSA_VAR) {
        xsa_error("reduce: invalid op %d", (int)op);
        return NULL;
    }
    if (xsa_tcheck(fn, a, "a") < 0) return NULL;
    int argop = op == XSA_ARGMAX || op == XSA_ARGMIN;
    xsa_dtype odt = argop ? XSA_INT32 : XSA_FLOAT32;
    int d = -1;
    if (dim != XSA_ALL_DIMS) {
        if (a->ndim == 0 && (dim == 0 || dim == -1)) {
            dim = XSA_ALL_DIMS; /* a 0-d tensor reduces over itself, as in PyTorch */
        } else {
            d = xsa_normdim(fn, dim, a->ndim);
            if (d < 0) return NULL;
        }
    }
    int64_t n = d < 0 ? xsa_tensor_numel(a) : a->shape[d];
    if (n == 0 && op != XSA_SUM && op != XSA_MEAN) {
        xsa_error("%s: cannot reduce over an empty dimension", fn);
        return NULL;
    }
    int64_t os[XSA_MAX_DIMS];
    int on = 0;
    if (d >= 0)
        for (int i = 0; i < a->ndim; i++) {
            if (i != d) os[on++] = a->shape[i];
            else if (keepdim) os[on++] = 1;
        }
    xsa_tensor *out = xsa_talloc(fn, odt, on, os, 0);
    if (!out) return NULL;
    /* contiguous input seen as [outer, n, inner] */
    xsa_tensor *x = xsa_tensor_contiguous((xsa_tensor *)a);
    if (!x) {
        xsa_tensor_free(out);
        return NULL;
    }
    int64_t outer = 1, inner = 1;
    if (d >= 0 && xsa_tensor_numel(a) == 0) { /* the products below could overflow */
        outer = n == 0 ? xsa_tensor_numel(out) : 0;
    } else if (d >= 0) {
        for (int i = 0; i < d; i++) outer *= a->shape[i];
        for (int i = d + 1; i < a->ndim; i++) inner *= a->shape[i];
    }
    if (reduce_blocks(op, x, out, outer, n, inner) != 0) {
        xsa_tensor_free(x);
        xsa_tensor_free(out);
        xsa_error("%s: out of memory", fn);
        return NULL;
    }
    xsa_tensor_free(x);
    return out;
}

/* ---- softmax ---------------------------------------------------------- */

/* e^x for x <= 0 in float, vectorisable (the softmax kernels need nothing
 * else): Cody-Waite reduction by ln 2 and a degree-6 polynomial; relative
 * error below 3e-7 for x >= -87.3, exactly 0 below (e^-inf = 0 for masked
 * entries), NaN passes through. */
static inline float exp_neg(float x)
{
    float xc = x > -87.33f ? x : -87.33f;
    xc = xc < 0.0f ? xc : 0.0f;
    float t = xc * 1.44269504088896341f;
    float nf = (t + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - nf * 0.693145751953125f;
    r = r - nf * 1.428606765330187e-06f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union {
        int32_t i;
        float f;
    } u;
    u.i = ((int32_t)nf + 127) << 23;
    float y = p * u.f;
    y = x < -87.33f ? 0.0f : y;
    return x != x ? x : y;
}

/* softmax (or log_softmax) of one contiguous row of n values, max
 * subtracted; the sum of exponentials accumulates in double. A NaN or +inf
 * anywhere, or a row of -inf, gives NaN as in PyTorch. */
static void softmax_row(int log_form, const float *x, float *y, int64_t n)
{
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++) y[i] = exp_neg(x[i] - m);
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += y[i + k];
    for (; i < n; i++) acc[0] += y[i];
    double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    if (log_form) {
        float lse = (float)log(sum);
        for (i = 0; i < n; i++) y[i] = (x[i] - m) - lse;
    } else {
        float inv = (float)(1.0 / sum);
        for (i = 0; i < n; i++) y[i] *= inv;
    }
}

/* The same over the columns of an [n, inner] block (softmax along a
 * dimension that is not the last), sweeping whole rows. m and s are
 * scratch of `inner` entries. */
static void softmax_cols(int log_form, const float *x, float *y, int64_t n, int64_t inner,
                         float *m, double *s)
{
    for (int64_t j = 0; j < inner; j++) {
        m[j] = x[j];
        s[j] = 0.0;
    }
    for (int64_t k = 1; k < n; k++)
        for (int64_t j = 0; j < inner; j++) m[j] = x[k * inner + j] > m[j] ? x[k * inner + j] : m[j];
    for (int64_t k = 0; k < n; k++)
        for (int64_t j = 0; j < inner; j++) {
            float e = exp_neg(x[k * inner + j] - m[j]);
            y[k * inner + j] = e;
            s[j] += e;
        }
    if (log_form) {
        for (int64_t j = 0; j < inner; j++) s[j] = log(s[j]);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++)
                y[k * inner + j] = (x[k * inner + j] - m[j]) - (float)s[j];
    } else {
        for (int64_t j = 0; j < inner; j++) m[j] = (float)(1.0 / s[j]);
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < inner; j++) y[k * inner + j] *= m[j];
    }
}

static xsa_tensor *softmax_any(const char *fn, int log_form, const xsa_tensor *a, int dim)
{
    if (xsa_tcheck(fn, a, "a") < 0) return NULL;
    int d;
    if (a->ndim == 0 && (dim == 0 || dim == -1)) d = -1;
    else if ((d = xsa_normdim(fn, dim, a->ndim)) < 0) return NULL;
    xsa_tensor *x = a->dtype == XSA_FLOAT32 ? xsa_tensor_contiguous((xsa_tensor *)a)
                                            : xsa_tensor_to_dtype(a, XSA_FLOAT32);
    if (!x) return NULL;
    xsa_tensor *out = xsa_talloc(fn, XSA_FLOAT32, a->ndim, a->shape, 0);
    if (!out) {
        xsa_tensor_free(x);
        return NULL;
    }
    int64_t outer = 1, inner = 1, n = d < 0 ? 1 : a->shape[d];
    if (xsa_tensor_numel(a) == 0) {
        outer = 0;
    } else if (d >= 0) {
        for (int i = 0; i < d; i++) outer *= a->shape[i];
        for (int i = d + 1; i < a->ndim; i++) inner *= a->shape[i];
    }
    if (n > 0 && inner == 1) {
        for (int64_t o = 0; o < outer; o++) softmax_row(log_form, xsa_fptr(x, o * n), xsa_fptr(out, o * n), n);
    } else if (n > 0) {
        float *m = malloc((size_t)inner * (sizeof(float) + sizeof(double)) + sizeof(double));
        if (!m) {
            xsa_tensor_free(x);
            xsa_tensor_free(out);
            xsa_error("%s: out of memory", fn);
            return NULL;
        }
        double *sc = (double *)(void *)(m + inner + (inner & 1)); /* 8-byte aligned */
        for (int64_t o = 0; o < outer; o++)
            softmax_cols(log_form, xsa_fptr(x, o * n * inner), xsa_fptr(out, o * n * inner), n, inner, m, sc);
        free(m);
    }
    xsa_tensor_free(x);
    return out;
}

xsa_tensor *xsa_tensor_softmax(const xsa_tensor *a, int dim)
{
    return softmax_any("softmax", 0, a, dim);
}

xsa_tensor *xsa_tensor_log_softmax(const xsa_tensor *a, int dim)
{
    return softmax_any("log_softmax", 1, a, dim);
}

/* ---- matmul ----------------------------------------------------------- */

/* How cblas can read a [rows, cols] matrix with strides (rs, cs) in place:
 * row-major as is (NoTrans, ld = rs) or as the transpose of a row-major
 * [cols, rows] matrix (Trans, ld = cs). 0 when neither fits. */
static int mat_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                      CBLAS_TRANSPOSE *tr, int64_t *ld)
{
    int64_t c1 = cols > 1 ? cols : 1, r1 = rows > 1 ? rows : 1;
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= c1)) {
        *tr = CblasNoTrans;
        *ld = rows == 1 ? c1 : rs;
        return *ld < c1 ? 0 : 1;
    }
    if ((rows == 1 || rs == 1) && (cols == 1 || cs >= r1)) {
        *tr = CblasTrans;
        *ld = cols == 1 ? r1 : cs;
        return *ld < r1 ? 0 : 1;
    }
    return 0;
}

/* The operand (batched or not) ready for sgemm: t itself or a contiguous
 * copy, with its layout. */
static xsa_tensor *mat_prep(const xsa_tensor *t, CBLAS_TRANSPOSE *tr, int64_t *ld)
{
    int nd = t->ndim;
    int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
    if (mat_layout(rows, cols, t->stride[nd - 2], t->stride[nd - 1], tr, ld) && *ld <= INT_MAX) {
        xsa_tensor_retain((xsa_tensor *)t);
        return (xsa_tensor *)t;
    }
    xsa_tensor *c = xsa_tensor_clone(t);
    if (c) mat_layout(rows, cols, c->stride[nd - 2], c->stride[nd - 1], tr, ld);
    return c;
}

xsa_tensor *xsa_tensor_matmul(const xsa_tensor *a, const xsa_tensor *b)
{
    const char *fn = "matmul";
    if (xsa_tcheck(fn, a, "a") < 0 || xsa_tcheck(fn, b, "b") < 0) return NULL;
    if (xsa_gemm_init() != 0) return NULL; /* a bad XSA_GEMM is an error, not the default */
    char b1[160], b2[160];
    if (a->dtype != XSA_FLOAT32 || b->dtype != XSA_FLOAT32) {
        xsa_error("%s: operands must be float32 (got %s and %s)", fn, xsa_dtype_name(a->dtype),
                  xsa_dtype_name(b->dtype));
        return NULL;
    }
    int ok = (a->ndim == 2 && b->ndim == 2) || (a->ndim == 3 && (b->ndim == 2 || b->ndim == 3));
    if (!ok) {
        xsa_error("%s: operands of %d and %d dimensions: supported are [M,K]x[K,N], "
                  "[B,M,K]x[B,K,N] and [B,M,K]x[K,N] (got %s and %s)", fn, a->ndim, b->ndim,
                  xsa_shape_str(a->ndim, a->shape, b1, sizeof b1),
                  xsa_shape_str(b->ndim, b->shape, b2, sizeof b2));
        return NULL;
    }
    if (ok) {
        ok = a->shape[a->ndim - 1] == b->shape[b->ndim - 2];
        if (a->ndim == 3 && b->ndim == 3 && a->shape[0] != b->shape[0]) ok = 0;
    }
    if (!ok) {
        xsa_error("%s: shapes %s and %s do not align", fn,
                  xsa_shape_str(a->ndim, a->shape, b1, sizeof b1),
                  xsa_shape_str(b->ndim, b->shape, b2, sizeof b2));
        return NULL;
    }
    int64_t B = a->ndim == 3 ? a->shape[0] : 1;
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) {
        xsa_error("%s: shapes %s and %s exceed the BLAS integer range", fn,
                  xsa_shape_str(a->ndim, a->shape, b1, sizeof b1),
                  xsa_shape_str(b->ndim, b->shape, b2, sizeof b2));
        return NULL;
    }
    int64_t os[3] = {B, M, N};
    int empty = B == 0 || M == 0 || N == 0 || K == 0;
    /* sgemm with beta 0 writes every element: no need to zero the output */
    xsa_tensor *out = a->ndim == 3 ? xsa_talloc(fn, XSA_FLOAT32, 3, os, empty)
                                   : xsa_talloc(fn, XSA_FLOAT32, 2, os + 1, empty);
    if (!out || empty) return out; /* K == 0: zeros */
    CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    xsa_tensor *pa = mat_prep(a, &ta, &lda);
    xsa_tensor *pb = pa ? mat_prep(b, &tb, &ldb) : NULL;
    if (!pb) {
        xsa_tensor_free(pa);
        xsa_tensor_free(out);
        return NULL;
    }
    float *c = xsa_fptr(out, 0);
    /* [B,M,K]x[K,N] with A's rows evenly spaced across batches: one
     * [B*M,K]x[K,N] gemm (the linear-layer case) */
    if (pa->ndim == 3 && pb->ndim == 2 && ta == CblasNoTrans &&
        (B == 1 || M == 1 ? 1 : pa->stride[0] == M * lda) && B * M <= INT_MAX) {
        int64_t rows = B * M;
        int64_t ld = (B > 1 && M == 1) ? pa->stride[0] : lda;
        if (ld >= K) {
            xsa_sgemm(ta == CblasTrans, tb == CblasTrans, (int)rows, (int)N, (int)K, 1.0f,
                      xsa_fptr(pa, 0), (int)ld, xsa_fptr(pb, 0), (int)ldb, 0.0f, c, (int)N);
            xsa_tensor_free(pa);
            xsa_tensor_free(pb);
            return out;
        }
    }
    for (int64_t i = 0; i < B; i++) {
        const float *pA = xsa_fptr(pa, pa->ndim == 3 ? i * pa->stride[0] : 0);
        const float *pB = xsa_fptr(pb, pb->ndim == 3 ? i * pb->stride[0] : 0);
        xsa_sgemm(ta == CblasTrans, tb == CblasTrans, (int)M, (int)N, (int)K, 1.0f, pA, (int)lda,
                  pB, (int)ldb, 0.0f, c + i * M * N, (int)N);
    }
    xsa_tensor_free(pa);
    xsa_tensor_free(pb);
    return out;
}
