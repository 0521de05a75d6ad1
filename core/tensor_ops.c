/*
 * tensor_ops.c: element-wise ops with broadcasting, where/clamp,
 * reductions, softmax/log_softmax, matmul and allclose (see tensor.h).
 *
 * Element-wise kernels work on rows handed out by the strided iterator
 * (tensor_impl.h); a row whose operands are all unit-stride (or a broadcast
 * scalar) takes a plain loop the compiler vectorises. Float32 arithmetic is
 * done in float (as PyTorch does); int32 arithmetic in int64 and wrapped.
 * Non-goals: fusing, threading the element-wise loops, dtypes beyond
 * float32/int32.
 */
/* Vectorise with the dynamic cost model: -O2's very-cheap model skips
 * loops that need a runtime alias check, i.e. every kernel here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"
#include "tensor_impl.h"

static const char *binop_name(xsa_binop op)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                        "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "binary";
}

static const char *unop_name(xsa_unop op)
{
    static const char *const names[] = {"neg", "exp", "log", "sqrt", "tanh",
                                        "relu", "gelu", "abs", "sigmoid"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "unary";
}

static int is_cmp(xsa_binop op) { return op >= XSA_EQ && op <= XSA_GE; }

static float *fptr(const xsa_tensor *t, int64_t off)
{
    return (float *)t->storage->data + t->offset + off;
}

static int32_t *iptr(const xsa_tensor *t, int64_t off)
{
    return (int32_t *)t->storage->data + t->offset + off;
}

/* ---- float binary kernels: o[i] = a[i] OP b[i] over one row ------------ */

static inline float fmaxnan(float x, float y) { return (x != x || y != y) ? NAN : (x > y ? x : y); }
static inline float fminnan(float x, float y) { return (x != x || y != y) ? NAN : (x < y ? x : y); }

#define FROW(E)                                                                             \
    do {                                                                                    \
        if (sa == 1 && sb == 1 && so == 1) {                                                \
            for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; o[i] = (E); }       \
        } else if (sa == 1 && sb == 0 && so == 1) {                                         \
            const float y = b[0];                                                           \
            for (int64_t i = 0; i < n; i++) { float x = a[i]; o[i] = (E); }                \
        } else if (sa == 0 && sb == 1 && so == 1) {                                         \
            const float x = a[0];                                                           \
            for (int64_t i = 0; i < n; i++) { float y = b[i]; o[i] = (E); }                 \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                float x = a[i * sa], y = b[i * sb];                                         \
                o[i * so] = (E);                                                            \
            }                                                                               \
        }                                                                                   \
    } while (0)

static void frow(xsa_binop op, int64_t n, float *o, int64_t so, const float *a, int64_t sa,
                 const float *b, int64_t sb)
{
    switch (op) {
    case XSA_ADD: FROW(x + y); break;
    case XSA_SUB: FROW(x - y); break;
    case XSA_MUL: FROW(x * y); break;
    case XSA_DIV: FROW(x / y); break;
    case XSA_POW: FROW(powf(x, y)); break;
    case XSA_MAXIMUM: FROW(fmaxnan(x, y)); break;
    case XSA_MINIMUM: FROW(fminnan(x, y)); break;
    case XSA_EQ: FROW(x == y ? 1.0f : 0.0f); break;
    case XSA_NE: FROW(x != y ? 1.0f : 0.0f); break;
    case XSA_LT: FROW(x < y ? 1.0f : 0.0f); break;
    case XSA_LE: FROW(x <= y ? 1.0f : 0.0f); break;
    case XSA_GT: FROW(x > y ? 1.0f : 0.0f); break;
    case XSA_GE: FROW(x >= y ? 1.0f : 0.0f); break;
    }
}

/* int32 operands: arithmetic in int64, wrapped to int32 like PyTorch's;
 * comparisons produce 0/1 in the output's dtype. */
static int64_t iop(xsa_binop op, int64_t x, int64_t y)
{
    switch (op) {
    case XSA_ADD: return x + y;
    case XSA_SUB: return x - y;
    case XSA_MUL: return x * y;
    case XSA_MAXIMUM: return x > y ? x : y;
    case XSA_MINIMUM: return x < y ? x : y;
    case XSA_EQ: return x == y;
    case XSA_NE: return x != y;
    case XSA_LT: return x < y;
    case XSA_LE: return x <= y;
    case XSA_GT: return x > y;
    case XSA_GE: return x >= y;
    default: return 0; /* DIV/POW never reach the int path */
    }
}

static int32_t wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

static void irow(xsa_binop op, int64_t n, void *o, xsa_dtype odt, int64_t so, const int32_t *a,
                 int64_t sa, const int32_t *b, int64_t sb)
{
    if (odt == XSA_INT32) {
        int32_t *p = o;
        if (op == XSA_ADD && sa == 1 && sb == 1 && so == 1) {
            for (int64_t i = 0; i < n; i++) p[i] = wrap32((int64_t)a[i] + b[i]);
            return;
        }
        for (int64_t i = 0; i < n; i++) p[i * so] = wrap32(iop(op, a[i * sa], b[i * sb]));
    } else {
        float *p = o;
        for (int64_t i = 0; i < n; i++) p[i * so] = (float)iop(op, a[i * sa], b[i * sb]);
    }
}

/* An operand whose innermost stride (laid over `shape`) is neither 0 nor 1
 * would be read with a large stride in every row; a contiguous copy made
 * by the tiled copy_ first is cheaper for anything but small tensors.
 * Returns a new reference (t itself, retained, when it reads well). */
static xsa_tensor *tame(const xsa_tensor *t, int ndim, const int64_t *shape)
{
    int64_t st[XSA_MAX_DIMS];
    xsa_bstrides(t, ndim, shape, st);
    int64_t inner = 0;
    for (int i = ndim - 1; i >= 0; i--)
        if (shape[i] != 1) {
            inner = st[i];
            break;
        }
    if (inner == 0 || inner == 1 || xsa_tensor_numel(t) < 4096) {
        xsa_tensor_retain((xsa_tensor *)t);
        return (xsa_tensor *)t;
    }
    return xsa_tensor_clone(t);
}

/* Runs out = a op b (shapes already broadcast to out's; out may be a). a and
 * b are both float32 or both int32; out is float32 for the float path. */
static void binary_run(xsa_binop op, xsa_tensor *out, const xsa_tensor *a, const xsa_tensor *b)
{
    int64_t n = xsa_tensor_numel(out);
    if (out != a) {
        xsa_tensor *ta = tame(a, out->ndim, out->shape);
        xsa_tensor *tb = ta ? tame(b, out->ndim, out->shape) : NULL;
        if (tb && (ta != a || tb != b)) {
            binary_run(op, out, ta, tb);
            xsa_tensor_free(ta);
            xsa_tensor_free(tb);
            return;
        }
        xsa_tensor_free(ta);
        xsa_tensor_free(tb); /* on a failed copy, fall through to the strided walk */
    }
    if (a->dtype == XSA_FLOAT32 && xsa_tensor_is_contiguous(out) && xsa_tensor_is_contiguous(a) &&
        xsa_tensor_is_contiguous(b) && xsa_tensor_same_shape(a, out) &&
        xsa_tensor_same_shape(b, out)) {
        frow(op, n, fptr(out, 0), 1, fptr(a, 0), 1, fptr(b, 0), 1);
        return;
    }
    int64_t st[3][XSA_MAX_DIMS];
    memcpy(st[0], out->stride, sizeof st[0]);
    xsa_bstrides(a, out->ndim, out->shape, st[1]);
    xsa_bstrides(b, out->ndim, out->shape, st[2]);
    xsa_sit it;
    xsa_sit_init(&it, 3, out->ndim, out->shape, st);
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
        if (a->dtype == XSA_FLOAT32)
            frow(op, it.n, fptr(out, it.off[0]), it.inner[0], fptr(a, it.off[1]), it.inner[1],
                 fptr(b, it.off[2]), it.inner[2]);
        else
            irow(op, it.n,
                 out->dtype == XSA_FLOAT32 ? (void *)fptr(out, it.off[0]) : (void *)iptr(out, it.off[0]),
                 out->dtype, it.inner[0], iptr(a, it.off[1]), it.inner[1], iptr(b, it.off[2]),
                 it.inner[2]);
    }
}

/* float32 version of t (a new reference; t itself retained if already float). */
static xsa_tensor *as_float(const xsa_tensor *t)
{
    if (t->dtype == XSA_FLOAT32) {
        xsa_tensor_retain((xsa_tensor *)t);
        return (xsa_tensor *)t;
    }
    return xsa_tensor_to_dtype(t, XSA_FLOAT32);
}

static int binop_ok(const char *fn, xsa_binop op)
{
    if ((unsigned)op > XSA_GE) return xsa_error("%s: invalid op %d", fn, (int)op);
    return 0;
}

xsa_tensor *xsa_tensor_binary(xsa_binop op, const xsa_tensor *a, const xsa_tensor *b)
{
    const char *fn = binop_name(op);
    if (binop_ok(fn, op) < 0 || xsa_tcheck(fn, a, "a") < 0 || xsa_tcheck(fn, b, "b") < 0)
        return NULL;
    int on;
    int64_t os[XSA_MAX_DIMS];
    if (xsa_bshape(fn, a->ndim, a->shape, b->ndim, b->shape, &on, os) < 0) return NULL;
    int ints = a->dtype == XSA_INT32 && b->dtype == XSA_INT32 && op != XSA_DIV && op != XSA_POW;
    xsa_dtype odt = (ints && !is_cmp(op)) ? XSA_INT32 : XSA_FLOAT32;
    xsa_tensor *out = xsa_talloc(fn, odt, on, os, 0);
    if (!out) return NULL;
    if (ints) {
        binary_run(op, out, a, b);
        return out;
    }
    xsa_tensor *fa = as_float(a), *fb = fa ? as_float(b) : NULL;
    if (!fb) {
        xsa_tensor_free(fa);
        xsa_tensor_free(out);
        return NULL;
    }
    binary_run(op, out, fa, fb);
    xsa_tensor_free(fa);
    xsa_tensor_free(fb);
    return out;
}

/* A 0-d tensor holding s: int32 when a is int32 and s is a representable
 * integer (so int + 2 stays int), else float32. */
static xsa_tensor *scalar_for(const char *fn, const xsa_tensor *a, double s)
{
    int as_int = a->dtype == XSA_INT32 && s == floor(s) && s >= -2147483648.0 && s <= 2147483647.0;
    xsa_tensor *t = xsa_talloc(fn, as_int ? XSA_INT32 : XSA_FLOAT32, 0, NULL, 0);
    if (!t) return NULL;
    if (as_int) *iptr(t, 0) = (int32_t)s;
    else *fptr(t, 0) = (float)s;
    return t;
}

xsa_tensor *xsa_tensor_binary_scalar(xsa_binop op, const xsa_tensor *a, double s, int reversed)
{
    const char *fn = binop_name(op);
    if (binop_ok(fn, op) < 0 || xsa_tcheck(fn, a, "a") < 0) return NULL;
    xsa_tensor *st = scalar_for(fn, a, s);
    if (!st) return NULL;
    xsa_tensor *out = reversed ? xsa_tensor_binary(op, st, a) : xsa_tensor_binary(op, a, st);
    xsa_tensor_free(st);
    return out;
}

/* Shared checks of the in-place forms; returns b prepared for the kernel
 * (same dtype as a, not overlapping a unless it is a itself), or NULL. */
static xsa_tensor *inplace_prep(const char *fn, xsa_binop op, xsa_tensor *a, const xsa_tensor *b)
{
    int on;
    int64_t os[XSA_MAX_DIMS];
    if (xsa_bshape(fn, a->ndim, a->shape, b->ndim, b->shape, &on, os) < 0) return NULL;
    int fits = on == a->ndim;
    for (int i = 0; fits && i < on; i++) fits = os[i] == a->shape[i];
    if (!fits) {
        char b1[160], b2[160];
        xsa_error("%s: shape %s does not broadcast to the in-place shape %s", fn,
                  xsa_shape_str(b->ndim, b->shape, b1, sizeof b1),
                  xsa_shape_str(a->ndim, a->shape, b2, sizeof b2));
        return NULL;
    }
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] > 1 && a->stride[i] == 0) {
            xsa_error("%s: cannot write in place to an expanded tensor (dimension %d has stride 0)",
                      fn, i);
            return NULL;
        }
    if (a->dtype == XSA_INT32 && (b->dtype == XSA_FLOAT32 || op == XSA_DIV || op == XSA_POW)) {
        xsa_error("%s: an int32 tensor cannot hold the float32 result in place", fn);
        return NULL;
    }
    int same_view = b == a || (b->storage == a->storage && b->offset == a->offset &&
                               xsa_tensor_same_shape(a, b) &&
                               memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim) == 0);
    if (b->dtype != a->dtype) return xsa_tensor_to_dtype(b, a->dtype);
    if (b->storage == a->storage && !same_view) return xsa_tensor_clone(b);
    xsa_tensor_retain((xsa_tensor *)b);
    return (xsa_tensor *)b;
}

int xsa_tensor_binary_(xsa_binop op, xsa_tensor *a, const xsa_tensor *b)
{
    const char *fn = binop_name(op);
    if (binop_ok(fn, op) < 0 || xsa_tcheck(fn, a, "a") < 0 || xsa_tcheck(fn, b, "b") < 0)
        return -1;
    xsa_tensor *pb = inplace_prep(fn, op, a, b);
    if (!pb) return -1;
    binary_run(op, a, a, pb);
    xsa_tensor_free(pb);
    return 0;
}

int xsa_tensor_binary_scalar_(xsa_binop op, xsa_tensor *a, double s)
{
    const char *fn = binop_name(op);
    if (binop_ok(fn, op) < 0 || xsa_tcheck(fn, a, "a") < 0) return -1;
    xsa_tensor *st = scalar_for(fn, a, s);
    if (!st) return -1;
    int rc = xsa_tensor_binary_(op, a, st);
    xsa_tensor_free(st);
    return rc;
}

/* ---- unary ------------------------------------------------------------ */

#define UROW(E)                                                                  \
    do {                                                                         \
        if (sa == 1 && so == 1) {                                                \
            for (int64_t i = 0; i < n; i++) { float x = a[i]; o[i] = (E); }      \
        } else {                                                                 \
            for (int64_t i = 0; i < n; i++) { float x = a[i * sa]; o[i * so] = (E); } \
        }                                                                        \
    } while (0)

static void urow(xsa_unop op, int64_t n, float *o, int64_t so, const float *a, int64_t sa)
{
    switch (op) {
    case XSA_NEG: UROW(-x); break;
    case XSA_EXP: UROW(expf(x)); break;
    case XSA_LOG: UROW(logf(x)); break;
    case XSA_SQRT: UROW(sqrtf(x)); break;
    case XSA_TANH: UROW(tanhf(x)); break;
    case XSA_RELU: UROW(x < 0.0f ? 0.0f : x); break;
    case XSA_GELU: UROW(0.5f * x * (1.0f + erff(x * 0.70710678118654752440f))); break;
    case XSA_ABS: UROW(fabsf(x)); break;
    case XSA_SIGMOID: UROW(1.0f / (1.0f + expf(-x))); break;
    }
}

static void unary_run(xsa_unop op, xsa_tensor *out, const xsa_tensor *a)
{
    if (out != a) {
        xsa_tensor *ta = tame(a, a->ndim, a->shape);
        if (ta && ta != a) {
            unary_run(op, out, ta);
            xsa_tensor_free(ta);
            return;
        }
        xsa_tensor_free(ta);
    }
    if (xsa_tensor_is_contiguous(out) && xsa_tensor_is_contiguous(a)) {
        urow(op, xsa_tensor_numel(out), fptr(out, 0), 1, fptr(a, 0), 1);
        return;
    }
    int64_t st[2][XSA_MAX_DIMS];
    memcpy(st[0], out->stride, sizeof st[0]);
    memcpy(st[1], a->stride, sizeof st[1]);
    xsa_sit it;
    xsa_sit_init(&it, 2, out->ndim, out->shape, st);
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it))
        urow(op, it.n, fptr(out, it.off[0]), it.inner[0], fptr(a, it.off[1]), it.inner[1]);
}

xsa_tensor *xsa_tensor_unary(xsa_unop op, const xsa_tensor *a)
{
    const char *fn = unop_name(op);
    if ((unsigned)op > XSA_SIGMOID) {
        xsa_error("unary: invalid op %d", (int)op);
        return NULL;
    }
    if (xsa_tcheck(fn, a, "a") < 0) return NULL;
    xsa_tensor *fa = as_float(a);
    if (!fa) return NULL;
    xsa_tensor *out = xsa_talloc(fn, XSA_FLOAT32, a->ndim, a->shape, 0);
    if (out) unary_run(op, out, fa);
    xsa_tensor_free(fa);
    return out;
}

int xsa_tensor_unary_(xsa_unop op, xsa_tensor *a)
{
    const char *fn = unop_name(op);
    if ((unsigned)op > XSA_SIGMOID) return xsa_error("unary_: invalid op %d", (int)op);
    if (xsa_tcheck(fn, a, "a") < 0) return -1;
    if (a->dtype != XSA_FLOAT32)
        return xsa_error("%s: in-place form needs a float32 tensor, not %s", fn,
                         xsa_dtype_name(a->dtype));
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] > 1 && a->stride[i] == 0)
            return xsa_error("%s: cannot write in place to an expanded tensor", fn);
    unary_run(op, a, a);
    return 0;
}

/* ---- where / clamp ---------------------------------------------------- */

xsa_tensor *xsa_tensor_where(const xsa_tensor *cond, const xsa_tensor *a, const xsa_tensor *b)
{
    const char *fn = "where";
    if (xsa_tcheck(fn, cond, "cond") < 0 || xsa_tcheck(fn, a, "a") < 0 ||
        xsa_tcheck(fn, b, "b") < 0)
        return NULL;
    int n1, on;
    int64_t s1[XSA_MAX_DIMS], os[XSA_MAX_DIMS];
    if (xsa_bshape(fn, cond->ndim, cond->shape, a->ndim, a->shape, &n1, s1) < 0 ||
        xsa_bshape(fn, n1, s1, b->ndim, b->shape, &on, os) < 0)
        return NULL;
    xsa_dtype odt = (a->dtype == XSA_INT32 && b->dtype == XSA_INT32) ? XSA_INT32 : XSA_FLOAT32;
    xsa_tensor *out = xsa_talloc(fn, odt, on, os, 0);
    if (!out) return NULL;
    int64_t st[4][XSA_MAX_DIMS];
    memcpy(st[0], out->stride, sizeof st[0]);
    xsa_bstrides(cond, on, os, st[1]);
    xsa_bstrides(a, on, os, st[2]);
    xsa_bstrides(b, on, os, st[3]);
    xsa_sit it;
    xsa_sit_init(&it, 4, on, os, st);
    if (odt == XSA_FLOAT32 && cond->dtype == XSA_FLOAT32 && a->dtype == XSA_FLOAT32 &&
        b->dtype == XSA_FLOAT32) {
        int64_t so = it.inner[0], sc = it.inner[1], sa = it.inner[2], sb = it.inner[3];
        for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
            float *o = fptr(out, it.off[0]);
            const float *c = fptr(cond, it.off[1]), *x = fptr(a, it.off[2]), *y = fptr(b, it.off[3]);
            if (so == 1 && sc == 1 && sa == 1 && sb == 1)
                for (int64_t i = 0; i < it.n; i++) o[i] = c[i] != 0.0f ? x[i] : y[i];
            else
                for (int64_t i = 0; i < it.n; i++) o[i * so] = c[i * sc] != 0.0f ? x[i * sa] : y[i * sb];
        }
        return out;
    }
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
        for (int64_t i = 0; i < it.n; i++) {
            double c = xsa_tload(cond, it.off[1] + i * it.inner[1]);
            const xsa_tensor *src = c != 0 ? a : b;
            int64_t off = c != 0 ? it.off[2] + i * it.inner[2] : it.off[3] + i * it.inner[3];
            if (odt == XSA_FLOAT32)
                *fptr(out, it.off[0] + i * it.inner[0]) = src->dtype == XSA_FLOAT32
                                                              ? *fptr(src, off)
                                                              : (float)*iptr(src, off);
            else
                *iptr(out, it.off[0] + i * it.inner[0]) = *iptr(src, off);
        }
    }
    return out;
}

xsa_tensor *xsa_tensor_clamp(const xsa_tensor *a, double lo, double hi)
{
    const char *fn = "clamp";
    if (xsa_tcheck(fn, a, "a") < 0) return NULL;
    if (lo != lo || hi != hi) {
        xsa_error("%s: bounds %g and %g must not be NaN (use -inf/inf for no bound)", fn, lo, hi);
        return NULL;
    }
    xsa_tensor *out = xsa_talloc(fn, a->dtype, a->ndim, a->shape, 0);
    if (!out) return NULL;
    int64_t st[2][XSA_MAX_DIMS];
    memcpy(st[0], out->stride, sizeof st[0]);
    memcpy(st[1], a->stride, sizeof st[1]);
    xsa_sit it;
    xsa_sit_init(&it, 2, a->ndim, a->shape, st);
    if (a->dtype == XSA_FLOAT32) {
        float flo = (float)lo, fhi = (float)hi;
        for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
            float *o = fptr(out, it.off[0]);
            const float *x = fptr(a, it.off[1]);
            for (int64_t i = 0; i < it.n; i++) {
                /* NaN fails both tests and passes through, as in PyTorch;
                 * lo > hi gives hi everywhere, also as PyTorch */
                float v = x[i * it.inner[1]];
                v = v < flo ? flo : v;
                v = v > fhi ? fhi : v;
                o[i * it.inner[0]] = v;
            }
        }
    } else {
        for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
            int32_t *o = iptr(out, it.off[0]);
            const int32_t *x = iptr(a, it.off[1]);
            for (int64_t i = 0; i < it.n; i++) {
                double v = x[i * it.inner[1]];
                v = v < lo ? ceil(lo) : v;
                v = v > hi ? floor(hi) : v;
                o[i * it.inner[0]] = xsa_to_i32(v);
            }
        }
    }
    return out;
}

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
    const float *px = x->dtype == XSA_FLOAT32 ? fptr(x, 0) : NULL;
    float *po = odt == XSA_FLOAT32 ? fptr(out, 0) : NULL;
    int32_t *pi = odt == XSA_INT32 ? iptr(out, 0) : NULL;
    if (x->dtype == XSA_INT32 && n > 0) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < inner; j++)
                reduce_i32(op, iptr(x, o * n * inner + j), n, inner, po ? po + o * inner + j : NULL,
                           pi ? pi + o * inner + j : NULL);
    } else if (n == 0) {
        int64_t m = xsa_tensor_numel(out);
        for (int64_t i = 0; i < m; i++) po[i] = op == XSA_SUM ? 0.0f : NAN;
    } else if (inner > 1) {
        /* sweep whole rows of the [n, inner] block: reads stay sequential */
        double *acc = malloc((size_t)inner * (sizeof(double) + sizeof(int64_t)));
        if (!acc) {
            xsa_tensor_free(x);
            xsa_tensor_free(out);
            xsa_error("%s: out of memory", fn);
            return NULL;
        }
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
        for (int64_t o = 0; o < outer; o++) softmax_row(log_form, fptr(x, o * n), fptr(out, o * n), n);
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
            softmax_cols(log_form, fptr(x, o * n * inner), fptr(out, o * n * inner), n, inner, m, sc);
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
    float *c = fptr(out, 0);
    /* [B,M,K]x[K,N] with A's rows evenly spaced across batches: one
     * [B*M,K]x[K,N] gemm (the linear-layer case) */
    if (pa->ndim == 3 && pb->ndim == 2 && ta == CblasNoTrans &&
        (B == 1 || M == 1 ? 1 : pa->stride[0] == M * lda) && B * M <= INT_MAX) {
        int64_t rows = B * M;
        int64_t ld = (B > 1 && M == 1) ? pa->stride[0] : lda;
        if (ld >= K) {
            cblas_sgemm(CblasRowMajor, ta, tb, (int)rows, (int)N, (int)K, 1.0f, fptr(pa, 0),
                        (int)ld, fptr(pb, 0), (int)ldb, 0.0f, c, (int)N);
            xsa_tensor_free(pa);
            xsa_tensor_free(pb);
            return out;
        }
    }
    for (int64_t i = 0; i < B; i++) {
        const float *pA = fptr(pa, pa->ndim == 3 ? i * pa->stride[0] : 0);
        const float *pB = fptr(pb, pb->ndim == 3 ? i * pb->stride[0] : 0);
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, pA, (int)lda, pB, (int)ldb,
                    0.0f, c + i * M * N, (int)N);
    }
    xsa_tensor_free(pa);
    xsa_tensor_free(pb);
    return out;
}

/* ---- allclose --------------------------------------------------------- */

int xsa_tensor_allclose(const xsa_tensor *a, const xsa_tensor *b, double rtol, double atol)
{
    const char *fn = "allclose";
    if (xsa_tcheck(fn, a, "a") < 0 || xsa_tcheck(fn, b, "b") < 0) return -1;
    if (!xsa_tensor_same_shape(a, b)) {
        char b1[160], b2[160];
        return xsa_error("%s: shapes %s and %s differ", fn,
                         xsa_shape_str(a->ndim, a->shape, b1, sizeof b1),
                         xsa_shape_str(b->ndim, b->shape, b2, sizeof b2));
    }
    if (!(rtol >= 0) || !(atol >= 0))
        return xsa_error("%s: rtol %g and atol %g must be >= 0", fn, rtol, atol);
    int64_t st[2][XSA_MAX_DIMS];
    memcpy(st[0], a->stride, sizeof st[0]);
    memcpy(st[1], b->stride, sizeof st[1]);
    xsa_sit it;
    xsa_sit_init(&it, 2, a->ndim, a->shape, st);
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it))
        for (int64_t i = 0; i < it.n; i++) {
            double x = xsa_tload(a, it.off[0] + i * it.inner[0]);
            double y = xsa_tload(b, it.off[1] + i * it.inner[1]);
            if (x == y) continue; /* equal infinities are close */
            if (!(fabs(x - y) <= atol + rtol * fabs(y))) return 0;
        }
    return 1;
}
