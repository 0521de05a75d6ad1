/*
 * tensor_ops.c: element-wise ops with broadcasting (binary, scalar and
 * in-place forms, unary), where/clamp and allclose (see tensor.h).
 *
 * Element-wise kernels work on rows handed out by the strided iterator
 * (tensor_impl.h); a row whose operands are all unit-stride (or a broadcast
 * scalar) takes a plain loop the compiler vectorises. Float32 arithmetic is
 * done in float (as PyTorch does); int32 arithmetic in int64 and wrapped.
 * Not here: reductions, softmax and matmul (tensor_reduce.c).
 * Non-goals: fusing, threading the element-wise loops, dtypes beyond
 * float32/int32.
 */
/* Vectorise with the dynamic cost model: -O2's very-cheap model skips
 * loops that need a runtime alias check, i.e. every kernel here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
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
        frow(op, n, xsa_fptr(out, 0), 1, xsa_fptr(a, 0), 1, xsa_fptr(b, 0), 1);
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
            frow(op, it.n, xsa_fptr(out, it.off[0]), it.inner[0], xsa_fptr(a, it.off[1]), it.inner[1],
                 xsa_fptr(b, it.off[2]), it.inner[2]);
        else
            irow(op, it.n,
                 out->dtype == XSA_FLOAT32 ? (void *)xsa_fptr(out, it.off[0]) : (void *)xsa_iptr(out, it.off[0]),
                 out->dtype, it.inner[0], xsa_iptr(a, it.off[1]), it.inner[1], xsa_iptr(b, it.off[2]),
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
    if (as_int) *xsa_iptr(t, 0) = (int32_t)s;
    else *xsa_fptr(t, 0) = (float)s;
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
    xsa_storage_bump_version(a->storage);
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
    case XSA_GELU: break; /* never here: gelu_run */
    case XSA_ABS: UROW(fabsf(x)); break;
    case XSA_SIGMOID: UROW(1.0f / (1.0f + expf(-x))); break;
    }
}

/* GELU has one kernel in the core, the model's (xsa_nn_gelu_forward: exact
 * erf GELU through erfc, vectorised, accurate into the negative tail where
 * 0.5 x (1 + erf(x / sqrt 2)) cancels to 0); it wants contiguous arrays.
 * out is contiguous (fresh) or is a itself (the in-place form). */
static int gelu_run(xsa_tensor *out, const xsa_tensor *a)
{
    xsa_tensor *ac = xsa_tensor_contiguous((xsa_tensor *)a);
    if (!ac) return -1;
    int64_t n = xsa_tensor_numel(out);
    if (xsa_tensor_is_contiguous(out)) {
        xsa_nn_gelu_forward(xsa_fptr(out, 0), xsa_fptr(ac, 0), (size_t)n);
        xsa_tensor_free(ac);
        return 0;
    }
    /* a strided in-place target (out == a): ac is a private copy; gelu it
     * in place and copy it back */
    xsa_nn_gelu_forward(xsa_fptr(ac, 0), xsa_fptr(ac, 0), (size_t)n);
    int rc = xsa_tensor_copy_(out, ac);
    xsa_tensor_free(ac);
    return rc;
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
        urow(op, xsa_tensor_numel(out), xsa_fptr(out, 0), 1, xsa_fptr(a, 0), 1);
        return;
    }
    int64_t st[2][XSA_MAX_DIMS];
    memcpy(st[0], out->stride, sizeof st[0]);
    memcpy(st[1], a->stride, sizeof st[1]);
    xsa_sit it;
    xsa_sit_init(&it, 2, out->ndim, out->shape, st);
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it))
        urow(op, it.n, xsa_fptr(out, it.off[0]), it.inner[0], xsa_fptr(a, it.off[1]), it.inner[1]);
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
    if (out && op == XSA_GELU && gelu_run(out, fa) != 0) {
        xsa_tensor_free(out);
        out = NULL;
    } else if (out && op != XSA_GELU) {
        unary_run(op, out, fa);
    }
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
    xsa_storage_bump_version(a->storage);
    if (op == XSA_GELU) return gelu_run(a, a);
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
            float *o = xsa_fptr(out, it.off[0]);
            const float *c = xsa_fptr(cond, it.off[1]), *x = xsa_fptr(a, it.off[2]), *y = xsa_fptr(b, it.off[3]);
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
                *xsa_fptr(out, it.off[0] + i * it.inner[0]) = src->dtype == XSA_FLOAT32
                                                              ? *xsa_fptr(src, off)
                                                              : (float)*xsa_iptr(src, off);
            else
                *xsa_iptr(out, it.off[0] + i * it.inner[0]) = *xsa_iptr(src, off);
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
            float *o = xsa_fptr(out, it.off[0]);
            const float *x = xsa_fptr(a, it.off[1]);
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
            int32_t *o = xsa_iptr(out, it.off[0]);
            const int32_t *x = xsa_iptr(a, it.off[1]);
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
