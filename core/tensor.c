/*
 * tensor.c: tensor headers, element access, creation, views, the strided
 * iterator (tensor_impl.h) and copy/fill (see tensor.h for the contract).
 *
 * Not here: the buffers behind tensors and their reuse cache (storage.c), the
 * RNG and random tensors (rng.c), element-wise arithmetic (tensor_ops.c),
 * reductions, softmax and matmul (tensor_reduce.c), printing
 * (tensor_print.c). Refcounts are plain integers: the engine is driven from
 * one thread (BLAS threads never touch headers).
 */
/* see tensor_ops.c: -O2's very-cheap cost model skips most loops here */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "tensor.h"
#include "tensor_impl.h"

void (*xsa_tensor_grad_fn_release)(struct xsa_ag_node *node) = NULL;

/* ---- small shared helpers --------------------------------------------- */

size_t xsa_dtype_size(xsa_dtype dt)
{
    return dt == XSA_FLOAT32 || dt == XSA_INT32 ? 4 : 0;
}

const char *xsa_dtype_name(xsa_dtype dt)
{
    switch (dt) {
    case XSA_FLOAT32: return "float32";
    case XSA_INT32: return "int32";
    }
    return "invalid";
}

static int dtype_ok(const char *fn, xsa_dtype dt)
{
    if (dt != XSA_FLOAT32 && dt != XSA_INT32)
        return xsa_error("%s: invalid dtype %d", fn, (int)dt);
    return 0;
}

int xsa_tcheck(const char *fn, const xsa_tensor *t, const char *name)
{
    if (!t) return xsa_error("%s: argument %s is NULL", fn, name);
    return 0;
}

int xsa_normdim(const char *fn, int dim, int ndim)
{
    int d = dim < 0 ? dim + ndim : dim;
    if (ndim == 0 || d < 0 || d >= ndim) {
        if (ndim == 0)
            return xsa_error("%s: dim %d is out of range for a 0-d tensor", fn, dim);
        return xsa_error("%s: dim %d is out of range for %d dims (expected %d..%d)", fn,
                         dim, ndim, -ndim, ndim - 1);
    }
    return d;
}

/* Checks a shape and returns its element count, or -1. */
static int64_t shape_numel(const char *fn, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > XSA_MAX_DIMS) {
        xsa_error("%s: %d dims is not in [0, %d]", fn, ndim, XSA_MAX_DIMS);
        return -1;
    }
    if (ndim > 0 && !shape) {
        xsa_error("%s: shape is NULL", fn);
        return -1;
    }
    int64_t n = 1;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char buf[160];
            xsa_error("%s: negative size %lld in shape %s", fn, (long long)shape[i],
                      xsa_shape_str(ndim, shape, buf, sizeof buf));
            return -1;
        }
        if (shape[i] > XSA_MAX_NUMEL) {
            char buf[160];
            xsa_error("%s: shape %s has more than %lld elements", fn,
                      xsa_shape_str(ndim, shape, buf, sizeof buf), (long long)XSA_MAX_NUMEL);
            return -1;
        }
        if (shape[i] == 0) zero = 1;
    }
    if (zero) return 0;
    for (int i = 0; i < ndim; i++) {
        if (xsa_ckd_mul_i64(n, shape[i], &n) || n > XSA_MAX_NUMEL) {
            char buf[160];
            xsa_error("%s: shape %s has more than %lld elements", fn,
                      xsa_shape_str(ndim, shape, buf, sizeof buf), (long long)XSA_MAX_NUMEL);
            return -1;
        }
    }
    return n;
}

/* a * b, or INT64_MAX when that overflows: strides of an empty tensor may
 * be huge (they are never used to read) */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return xsa_ckd_mul_i64(a, b, &r) ? INT64_MAX : r;
}

static void contig_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        if (shape[i] > 1) s = mul_sat(s, shape[i]);
    }
}

/* The offset of element `index` along dim d of t: an overflow can only
 * happen in an empty tensor (saturated strides), whose offset is never
 * read, so it keeps t's own. */
static int64_t offset_at(const xsa_tensor *t, int d, int64_t index)
{
    int64_t step, off;
    if (xsa_ckd_mul_i64(index, t->stride[d], &step) || xsa_ckd_add_i64(t->offset, step, &off))
        return t->offset;
    return off;
}

static xsa_tensor *header_new(xsa_storage *s, xsa_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset)
{
    xsa_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->storage = s;
    xsa_storage_retain(s);
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->offset = offset;
    t->refcount = 1;
    return t;
}

xsa_tensor *xsa_talloc(const char *fn, xsa_dtype dt, int ndim, const int64_t *shape, int zero)
{
    if (dtype_ok(fn, dt) < 0) return NULL;
    int64_t n = shape_numel(fn, ndim, shape);
    if (n < 0) return NULL;
    size_t nbytes = (size_t)n * xsa_dtype_size(dt);
    xsa_storage *s = xsa_storage_alloc(nbytes, zero);
    if (!s) {
        xsa_error("%s: out of memory allocating %zu bytes", fn, nbytes);
        return NULL;
    }
    int64_t stride[XSA_MAX_DIMS];
    contig_strides(ndim, shape, stride);
    xsa_tensor *t = header_new(s, dt, ndim, shape, stride, 0);
    xsa_storage_free(s); /* the header holds the only reference now */
    if (!t) xsa_error("%s: out of memory", fn);
    return t;
}

/* A new header over t's storage (views). */
static xsa_tensor *view_of(const char *fn, const xsa_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *stride, int64_t offset)
{
    xsa_tensor *v = header_new(t->storage, t->dtype, ndim, shape, stride, offset);
    if (!v) xsa_error("%s: out of memory", fn);
    return v;
}

double xsa_tload(const xsa_tensor *t, int64_t off)
{
    if (t->dtype == XSA_FLOAT32) return ((const float *)t->storage->data)[t->offset + off];
    return ((const int32_t *)t->storage->data)[t->offset + off];
}

int32_t xsa_to_i32(double v)
{
    if (v != v) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}

/* Values stored into int32 by fill/full/set must be representable. */
static int i32_value_ok(const char *fn, double v)
{
    if (!(v >= -2147483648.0 && v <= 2147483647.0))
        return xsa_error("%s: value %g does not fit int32", fn, v);
    return 0;
}

/* ---- lifetime --------------------------------------------------------- */

xsa_tensor *xsa_tensor_new(xsa_dtype dt, int ndim, const int64_t *shape)
{
    return xsa_talloc("tensor_new", dt, ndim, shape, 1);
}

xsa_tensor *xsa_tensor_from_storage(xsa_storage *s, xsa_dtype dt, int ndim,
                                    const int64_t *shape, int64_t offset)
{
    const char *fn = "from_storage";
    if (!s) {
        xsa_error("%s: storage is NULL", fn);
        return NULL;
    }
    if (dtype_ok(fn, dt) < 0) return NULL;
    int64_t n = shape_numel(fn, ndim, shape);
    if (n < 0) return NULL;
    int64_t cap = (int64_t)(s->nbytes / xsa_dtype_size(dt));
    if (offset < 0 || offset > cap || n > cap - offset) {
        char buf[160];
        xsa_error("%s: shape %s (%lld elements) at offset %lld does not fit a storage of %lld "
                  "elements", fn, xsa_shape_str(ndim, shape, buf, sizeof buf), (long long)n,
                  (long long)offset, (long long)cap);
        return NULL;
    }
    int64_t stride[XSA_MAX_DIMS];
    contig_strides(ndim, shape, stride);
    xsa_tensor *t = header_new(s, dt, ndim, shape, stride, offset);
    if (!t) xsa_error("%s: out of memory", fn);
    return t;
}

void xsa_tensor_retain(xsa_tensor *t)
{
    if (t) t->refcount++;
}

void xsa_tensor_free(xsa_tensor *t)
{
    if (!t || --t->refcount > 0) return;
    if (t->grad_fn && xsa_tensor_grad_fn_release) xsa_tensor_grad_fn_release(t->grad_fn);
    xsa_tensor_free(t->grad);
    xsa_storage_free(t->storage);
    free(t);
}

/* ---- facts ------------------------------------------------------------ */

int64_t xsa_tensor_numel(const xsa_tensor *t)
{
    if (!t) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) return 0; /* before any product can overflow */
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int xsa_tensor_is_contiguous(const xsa_tensor *t)
{
    if (!t) return 0;
    if (xsa_tensor_numel(t) == 0) return 1;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

float *xsa_tensor_f32(const xsa_tensor *t)
{
    if (!t) {
        xsa_error("f32: tensor is NULL");
        return NULL;
    }
    if (t->dtype != XSA_FLOAT32) {
        xsa_error("f32: tensor is %s, not float32", xsa_dtype_name(t->dtype));
        return NULL;
    }
    return (float *)t->storage->data + t->offset;
}

int32_t *xsa_tensor_i32(const xsa_tensor *t)
{
    if (!t) {
        xsa_error("i32: tensor is NULL");
        return NULL;
    }
    if (t->dtype != XSA_INT32) {
        xsa_error("i32: tensor is %s, not int32", xsa_dtype_name(t->dtype));
        return NULL;
    }
    return (int32_t *)t->storage->data + t->offset;
}

char *xsa_shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    if (!buf || n == 0) return buf;
    size_t len = 0;
    buf[0] = '\0';
    int w = snprintf(buf, n, "[");
    if (w > 0) len = (size_t)w < n ? (size_t)w : n - 1;
    for (int i = 0; i < ndim && shape && len + 1 < n; i++) {
        w = snprintf(buf + len, n - len, i ? ",%lld" : "%lld", (long long)shape[i]);
        if (w < 0) break;
        len += (size_t)w < n - len ? (size_t)w : n - len - 1;
    }
    if (len + 1 < n) {
        buf[len++] = ']';
        buf[len] = '\0';
    }
    return buf;
}

int xsa_tensor_same_shape(const xsa_tensor *a, const xsa_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* ---- element access --------------------------------------------------- */

static int64_t elem_off(const char *fn, const xsa_tensor *t, const int64_t *index)
{
    if (xsa_tcheck(fn, t, "t") < 0) return -1;
    if (t->ndim > 0 && !index) {
        xsa_error("%s: index is NULL", fn);
        return -1;
    }
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i]) {
            xsa_error("%s: index %lld out of range for dimension %d of size %lld", fn,
                      (long long)index[i], i, (long long)t->shape[i]);
            return -1;
        }
        off += index[i] * t->stride[i];
    }
    return off;
}

int xsa_tensor_get(const xsa_tensor *t, const int64_t *index, double *out)
{
    int64_t off = elem_off("get", t, index);
    if (off < 0) return -1;
    if (!out) return xsa_error("get: out is NULL");
    *out = xsa_tload(t, off);
    return 0;
}

int xsa_tensor_set(xsa_tensor *t, const int64_t *index, double value)
{
    int64_t off = elem_off("set", t, index);
    if (off < 0) return -1;
    if (t->dtype == XSA_INT32 && i32_value_ok("set", value) < 0) return -1;
    xsa_storage_bump_version(t->storage);
    if (t->dtype == XSA_FLOAT32) {
        ((float *)t->storage->data)[t->offset + off] = (float)value;
    } else {
        ((int32_t *)t->storage->data)[t->offset + off] = (int32_t)value;
    }
    return 0;
}

/* ---- creation --------------------------------------------------------- */

static void fill_contig(xsa_tensor *t, double v)
{
    int64_t n = xsa_tensor_numel(t);
    /* zeros (every zero_grad: 30 MB a training step of the study's model)
     * through memset, whose large-size path streams past the caches: 0.3
     * ms where the element loop, which GCC's -O2 leaves scalar, took 2.5 in
     * the step. All-zero bytes are +0.0f and int32 0; -0.0 takes the loop. */
    if (v == 0.0 && !signbit(v)) {
        size_t es = xsa_dtype_size(t->dtype);
        memset((char *)t->storage->data + (size_t)t->offset * es, 0, (size_t)n * es);
        return;
    }
    if (t->dtype == XSA_FLOAT32) {
        float *p = (float *)t->storage->data + t->offset, f = (float)v;
        for (int64_t i = 0; i < n; i++) p[i] = f;
    } else {
        int32_t *p = (int32_t *)t->storage->data + t->offset, x = xsa_to_i32(v);
        for (int64_t i = 0; i < n; i++) p[i] = x;
    }
}

xsa_tensor *xsa_tensor_zeros(xsa_dtype dt, int ndim, const int64_t *shape)
{
    return xsa_talloc("zeros", dt, ndim, shape, 1);
}

xsa_tensor *xsa_tensor_full(xsa_dtype dt, int ndim, const int64_t *shape, double v)
{
    if (dt == XSA_INT32 && i32_value_ok("full", v) < 0) return NULL;
    xsa_tensor *t = xsa_talloc("full", dt, ndim, shape, 0);
    if (t) fill_contig(t, v);
    return t;
}

xsa_tensor *xsa_tensor_ones(xsa_dtype dt, int ndim, const int64_t *shape)
{
    xsa_tensor *t = xsa_talloc("ones", dt, ndim, shape, 0);
    if (t) fill_contig(t, 1.0);
    return t;
}

xsa_tensor *xsa_tensor_arange(xsa_dtype dt, double start, double stop, double step)
{
    const char *fn = "arange";
    if (dtype_ok(fn, dt) < 0) return NULL;
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step)) {
        xsa_error("%s: start %g, stop %g and step %g must be finite", fn, start, stop, step);
        return NULL;
    }
    if (step == 0) {
        xsa_error("%s: step must be nonzero", fn);
        return NULL;
    }
    double cnt = ceil((stop - start) / step);
    if (cnt < 0) {
        xsa_error("%s: step %g goes away from stop (start %g, stop %g)", fn, step, start, stop);
        return NULL;
    }
    if (cnt > (double)XSA_MAX_NUMEL) {
        xsa_error("%s: %g elements is more than %lld", fn, cnt, (long long)XSA_MAX_NUMEL);
        return NULL;
    }
    int64_t n = (int64_t)cnt;
    if (dt == XSA_INT32 && n > 0 &&
        (i32_value_ok(fn, start) < 0 || i32_value_ok(fn, start + (double)(n - 1) * step) < 0))
        return NULL;
    xsa_tensor *t = xsa_talloc(fn, dt, 1, &n, 0);
    if (!t) return NULL;
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        if (dt == XSA_FLOAT32)
            ((float *)t->storage->data)[i] = (float)v;
        else
            ((int32_t *)t->storage->data)[i] = (int32_t)v;
    }
    return t;
}

xsa_tensor *xsa_tensor_clone(const xsa_tensor *t)
{
    if (xsa_tcheck("clone", t, "t") < 0) return NULL;
    xsa_tensor *c = xsa_talloc("clone", t->dtype, t->ndim, t->shape, 0);
    if (!c) return NULL;
    if (xsa_tensor_copy_(c, t) < 0) {
        xsa_tensor_free(c);
        return NULL;
    }
    return c;
}

xsa_tensor *xsa_tensor_to_dtype(const xsa_tensor *t, xsa_dtype dt)
{
    if (xsa_tcheck("to_dtype", t, "t") < 0) return NULL;
    xsa_tensor *c = xsa_talloc("to_dtype", dt, t->ndim, t->shape, 0);
    if (!c) return NULL;
    if (xsa_tensor_copy_(c, t) < 0) {
        xsa_tensor_free(c);
        return NULL;
    }
    return c;
}

/* ---- views ------------------------------------------------------------ */

/* Resolves one -1 in shape against numel; writes the result to out. */
static int infer_shape(const char *fn, const xsa_tensor *t, int ndim, const int64_t *shape,
                       int64_t *out)
{
    if (ndim < 0 || ndim > XSA_MAX_DIMS)
        return xsa_error("%s: %d dims is not in [0, %d]", fn, ndim, XSA_MAX_DIMS);
    if (ndim > 0 && !shape) return xsa_error("%s: shape is NULL", fn);
    int infer = -1;
    int64_t known = 1;
    char buf[160];
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0)
                return xsa_error("%s: only one dimension can be -1 in %s", fn,
                                 xsa_shape_str(ndim, shape, buf, sizeof buf));
            infer = i;
        } else if (shape[i] < 0) {
            return xsa_error("%s: negative size %lld in shape %s", fn, (long long)shape[i],
                             xsa_shape_str(ndim, shape, buf, sizeof buf));
        } else {
            if (shape[i] > XSA_MAX_NUMEL || (shape[i] && known > XSA_MAX_NUMEL / shape[i]))
                return xsa_error("%s: shape %s is too large", fn,
                                 xsa_shape_str(ndim, shape, buf, sizeof buf));
            known *= shape[i];
        }
    }
    int64_t n = xsa_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known != 0)
            return xsa_error("%s: shape %s is invalid for a tensor of %lld elements", fn,
                             xsa_shape_str(ndim, shape, buf, sizeof buf), (long long)n);
        out[infer] = n / known;
    } else if (known != n) {
        return xsa_error("%s: shape %s is invalid for a tensor of %lld elements", fn,
                         xsa_shape_str(ndim, shape, buf, sizeof buf), (long long)n);
    }
    return 0;
}

xsa_tensor *xsa_tensor_view(xsa_tensor *t, int ndim, const int64_t *shape)
{
    const char *fn = "view";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int64_t ns[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    if (infer_shape(fn, t, ndim, shape, ns) < 0) return NULL;
    if (!xsa_tensor_is_contiguous(t)) {
        char b1[160], b2[160];
        xsa_error("%s: tensor of shape %s with strides %s is not contiguous (use reshape)", fn,
                  xsa_shape_str(t->ndim, t->shape, b1, sizeof b1),
                  xsa_shape_str(t->ndim, t->stride, b2, sizeof b2));
        return NULL;
    }
    contig_strides(ndim, ns, st);
    return view_of(fn, t, ndim, ns, st, t->offset);
}

/* Strides that let `t` be seen with shape ns without copying, or -1 (the
 * chunk-matching rule PyTorch's view uses: each run of old dims that is
 * contiguous in memory must be split exactly by a run of new dims). */
static int view_strides(const xsa_tensor *t, int nd, const int64_t *ns, int64_t *out)
{
    if (xsa_tensor_numel(t) == 0 || t->ndim == 0) {
        contig_strides(nd, ns, out);
        return 0;
    }
    int vd = nd - 1;
    int64_t base = t->stride[t->ndim - 1], tn = 1, vn = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tn *= t->shape[td];
        if (td == 0 || (t->shape[td - 1] != 1 && t->stride[td - 1] != tn * base)) {
            while (vd >= 0 && (vn < tn || ns[vd] == 1)) {
                out[vd] = vn * base;
                vn *= ns[vd];
                vd--;
            }
            if (vn != tn) return -1;
            if (td > 0) {
                base = t->stride[td - 1];
                tn = 1;
                vn = 1;
            }
        }
    }
    return vd == -1 ? 0 : -1;
}

xsa_tensor *xsa_tensor_reshape(xsa_tensor *t, int ndim, const int64_t *shape)
{
    const char *fn = "reshape";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int64_t ns[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    if (infer_shape(fn, t, ndim, shape, ns) < 0) return NULL;
    if (view_strides(t, ndim, ns, st) == 0) return view_of(fn, t, ndim, ns, st, t->offset);
    xsa_tensor *c = xsa_tensor_clone(t);
    if (!c) return NULL;
    xsa_tensor *v = view_of(fn, c, ndim, ns, (contig_strides(ndim, ns, st), st), 0);
    xsa_tensor_free(c);
    return v;
}

xsa_tensor *xsa_tensor_transpose(xsa_tensor *t, int d0, int d1)
{
    const char *fn = "transpose";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int a = xsa_normdim(fn, d0, t->ndim), b = a < 0 ? -1 : xsa_normdim(fn, d1, t->ndim);
    if (a < 0 || b < 0) return NULL;
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    memcpy(st, t->stride, sizeof st);
    sh[a] = t->shape[b];
    sh[b] = t->shape[a];
    st[a] = t->stride[b];
    st[b] = t->stride[a];
    return view_of(fn, t, t->ndim, sh, st, t->offset);
}

xsa_tensor *xsa_tensor_permute(xsa_tensor *t, const int *perm)
{
    const char *fn = "permute";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    if (t->ndim > 0 && !perm) {
        xsa_error("%s: perm is NULL", fn);
        return NULL;
    }
    int seen[XSA_MAX_DIMS] = {0};
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        int d = xsa_normdim(fn, perm[i], t->ndim);
        if (d < 0) return NULL;
        if (seen[d]) {
            xsa_error("%s: dim %d appears twice in the permutation", fn, perm[i]);
            return NULL;
        }
        seen[d] = 1;
        sh[i] = t->shape[d];
        st[i] = t->stride[d];
    }
    return view_of(fn, t, t->ndim, sh, st, t->offset);
}

xsa_tensor *xsa_tensor_narrow(xsa_tensor *t, int dim, int64_t start, int64_t len)
{
    const char *fn = "narrow";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int d = xsa_normdim(fn, dim, t->ndim);
    if (d < 0) return NULL;
    int64_t size = t->shape[d];
    if (start < 0 || start > size || len < 0 || len > size - start) {
        xsa_error("%s: start %lld and length %lld are out of range for dimension %d of size %lld",
                  fn, (long long)start, (long long)len, d, (long long)size);
        return NULL;
    }
    int64_t sh[XSA_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    sh[d] = len;
    return view_of(fn, t, t->ndim, sh, t->stride, len ? offset_at(t, d, start) : t->offset);
}

xsa_tensor *xsa_tensor_select(xsa_tensor *t, int dim, int64_t index)
{
    const char *fn = "select";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int d = xsa_normdim(fn, dim, t->ndim);
    if (d < 0) return NULL;
    if (index < 0 || index >= t->shape[d]) {
        xsa_error("%s: index %lld out of range for dimension %d of size %lld", fn,
                  (long long)index, d, (long long)t->shape[d]);
        return NULL;
    }
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d) continue;
        sh[k] = t->shape[i];
        st[k++] = t->stride[i];
    }
    return view_of(fn, t, t->ndim - 1, sh, st, offset_at(t, d, index));
}

xsa_tensor *xsa_tensor_unsqueeze(xsa_tensor *t, int dim)
{
    const char *fn = "unsqueeze";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    if (t->ndim >= XSA_MAX_DIMS) {
        xsa_error("%s: tensor already has the maximum of %d dims", fn, XSA_MAX_DIMS);
        return NULL;
    }
    int d = dim < 0 ? dim + t->ndim + 1 : dim;
    if (d < 0 || d > t->ndim) {
        xsa_error("%s: dim %d is out of range for %d dims (expected %d..%d)", fn, dim,
                  t->ndim, -t->ndim - 1, t->ndim);
        return NULL;
    }
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= t->ndim; i++) {
        if (i == d) {
            sh[i] = 1;
            st[i] = d < t->ndim ? mul_sat(t->shape[d], t->stride[d]) : 1;
        } else {
            sh[i] = t->shape[k];
            st[i] = t->stride[k++];
        }
    }
    return view_of(fn, t, t->ndim + 1, sh, st, t->offset);
}

xsa_tensor *xsa_tensor_squeeze(xsa_tensor *t, int dim)
{
    const char *fn = "squeeze";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    int k = 0;
    if (dim == XSA_ALL_DIMS) {
        for (int i = 0; i < t->ndim; i++) {
            if (t->shape[i] == 1) continue;
            sh[k] = t->shape[i];
            st[k++] = t->stride[i];
        }
        return view_of(fn, t, k, sh, st, t->offset);
    }
    int d = xsa_normdim(fn, dim, t->ndim);
    if (d < 0) return NULL;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d && t->shape[i] == 1) continue; /* size != 1: a no-op, as PyTorch */
        sh[k] = t->shape[i];
        st[k++] = t->stride[i];
    }
    return view_of(fn, t, k, sh, st, t->offset);
}

xsa_tensor *xsa_tensor_expand(xsa_tensor *t, int ndim, const int64_t *shape)
{
    const char *fn = "expand";
    if (xsa_tcheck(fn, t, "t") < 0) return NULL;
    if (ndim < t->ndim || ndim > XSA_MAX_DIMS || (ndim > 0 && !shape)) {
        xsa_error("%s: %d dims cannot expand a tensor of %d dims", fn, ndim, t->ndim);
        return NULL;
    }
    int64_t sh[XSA_MAX_DIMS], st[XSA_MAX_DIMS];
    int lead = ndim - t->ndim;
    char b1[160], b2[160];
    for (int i = 0; i < ndim; i++) {
        int64_t want = shape[i];
        if (i < lead) {
            if (want < 0) goto bad;
            sh[i] = want;
            st[i] = 0;
            continue;
        }
        int64_t have = t->shape[i - lead];
        if (want == -1) want = have;
        if (want == have) {
            sh[i] = have;
            st[i] = t->stride[i - lead];
        } else if (have == 1 && want >= 0) {
            sh[i] = want;
            st[i] = 0;
        } else {
            goto bad;
        }
    }
    if (shape_numel(fn, ndim, sh) < 0) return NULL;
    return view_of(fn, t, ndim, sh, st, t->offset);
bad:
    xsa_error("%s: shape %s cannot expand to %s", fn, xsa_shape_str(t->ndim, t->shape, b1, sizeof b1),
              xsa_shape_str(ndim, shape, b2, sizeof b2));
    return NULL;
}

xsa_tensor *xsa_tensor_contiguous(xsa_tensor *t)
{
    if (xsa_tcheck("contiguous", t, "t") < 0) return NULL;
    if (xsa_tensor_is_contiguous(t)) {
        xsa_tensor_retain(t);
        return t;
    }
    return xsa_tensor_clone(t);
}

/* ---- strided iteration ------------------------------------------------- */

void xsa_bstrides(const xsa_tensor *t, int ndim, const int64_t *shape, int64_t *out)
{
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        if (i < lead) {
            out[i] = 0;
        } else {
            int64_t s = t->shape[i - lead];
            out[i] = (s == 1 && shape[i] != 1) ? 0 : t->stride[i - lead];
        }
    }
}

int xsa_bshape(const char *fn, int an, const int64_t *as, int bn, const int64_t *bs, int *on,
               int64_t *os)
{
    int n = an > bn ? an : bn;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - an), ib = i - (n - bn);
        int64_t x = ia >= 0 ? as[ia] : 1, y = ib >= 0 ? bs[ib] : 1;
        if (x == y || y == 1) {
            os[i] = x;
        } else if (x == 1) {
            os[i] = y;
        } else {
            char b1[160], b2[160];
            return xsa_error("%s: shapes %s and %s do not broadcast", fn,
                             xsa_shape_str(an, as, b1, sizeof b1),
                             xsa_shape_str(bn, bs, b2, sizeof b2));
        }
    }
    *on = n;
    return 0;
}

void xsa_sit_init(xsa_sit *it, int nop, int ndim, const int64_t *shape,
                  int64_t strides[][XSA_MAX_DIMS])
{
    it->nop = nop;
    int nd = 0;
    int64_t rows = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) { /* nothing to visit; skip products that could overflow */
            it->nd = 1;
            it->shape[0] = 0;
            it->idx[0] = 0;
            it->rows = it->n = 0;
            for (int k = 0; k < nop; k++) it->off[k] = it->inner[k] = it->st[k][0] = 0;
            return;
        }
    /* drop size-1 dims, then merge neighbours contiguous for every operand */
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1) continue;
        if (nd > 0) {
            int merge = 1;
            for (int k = 0; k < nop; k++)
                if (it->st[k][nd - 1] != strides[k][i] * shape[i]) merge = 0;
            if (merge) {
                it->shape[nd - 1] *= shape[i];
                for (int k = 0; k < nop; k++) it->st[k][nd - 1] = strides[k][i];
                continue;
            }
        }
        it->shape[nd] = shape[i];
        for (int k = 0; k < nop; k++) it->st[k][nd] = strides[k][i];
        nd++;
    }
    if (nd == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nop; k++) it->st[k][0] = 0;
        nd = 1;
    }
    it->nd = nd;
    for (int i = 0; i < nd; i++) {
        it->idx[i] = 0;
        if (i < nd - 1) rows *= it->shape[i];
    }
    it->n = it->shape[nd - 1];
    it->rows = it->n == 0 ? 0 : rows;
    for (int k = 0; k < nop; k++) {
        it->off[k] = 0;
        it->inner[k] = it->st[k][nd - 1];
    }
}

void xsa_sit_next(xsa_sit *it)
{
    for (int d = it->nd - 2; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            for (int k = 0; k < it->nop; k++) it->off[k] += it->st[k][d];
            return;
        }
        it->idx[d] = 0;
        for (int k = 0; k < it->nop; k++) it->off[k] -= it->st[k][d] * (it->shape[d] - 1);
    }
}

/* ---- copy / fill ------------------------------------------------------ */

/* Writing through a view where two elements share memory (stride 0 on a
 * dim of size > 1, from expand) would make the result order-dependent. */
static int writable(const char *fn, const xsa_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1 && t->stride[i] == 0)
            return xsa_error("%s: cannot write to an expanded tensor (dimension %d has stride 0)",
                             fn, i);
    return 0;
}

/* A transposing copy (dst rows contiguous, src columns contiguous, 4-byte
 * elements) walked in TILE x TILE blocks so both sides stay in cache: a
 * row-by-row walk reads src with a large stride and ran ~10x slower. */
#define TILE 16
static void copy_tiled(const xsa_sit *it, uint32_t *d, const uint32_t *s)
{
    int nd = it->nd;
    int64_t R = it->shape[nd - 2], C = it->shape[nd - 1];
    int64_t dR = it->st[0][nd - 2], sC = it->st[1][nd - 1];
    int64_t ost[2][XSA_MAX_DIMS];
    for (int i = 0; i < nd - 2; i++) {
        ost[0][i] = it->st[0][i];
        ost[1][i] = it->st[1][i];
    }
    xsa_sit o;
    xsa_sit_init(&o, 2, nd - 2, it->shape, ost);
    for (int64_t r = 0; r < o.rows; r++, xsa_sit_next(&o))
        for (int64_t k = 0; k < o.n; k++) {
            uint32_t *dd = d + o.off[0] + k * o.inner[0];
            const uint32_t *ss = s + o.off[1] + k * o.inner[1];
            for (int64_t i0 = 0; i0 < R; i0 += TILE)
                for (int64_t j0 = 0; j0 < C; j0 += TILE) {
                    int64_t i1 = i0 + TILE < R ? i0 + TILE : R, j1 = j0 + TILE < C ? j0 + TILE : C;
                    for (int64_t i = i0; i < i1; i++)
                        for (int64_t j = j0; j < j1; j++) dd[i * dR + j] = ss[i + j * sC];
                }
        }
}

int xsa_tensor_copy_(xsa_tensor *dst, const xsa_tensor *src)
{
    const char *fn = "copy_";
    if (xsa_tcheck(fn, dst, "dst") < 0 || xsa_tcheck(fn, src, "src") < 0) return -1;
    int on;
    int64_t os[XSA_MAX_DIMS];
    if (xsa_bshape(fn, dst->ndim, dst->shape, src->ndim, src->shape, &on, os) < 0) return -1;
    for (int i = 0; i < on; i++) {
        if (on != dst->ndim || os[i] != dst->shape[i]) {
            char b1[160], b2[160];
            return xsa_error("%s: source shape %s does not broadcast to destination shape %s", fn,
                             xsa_shape_str(src->ndim, src->shape, b1, sizeof b1),
                             xsa_shape_str(dst->ndim, dst->shape, b2, sizeof b2));
        }
    }
    if (writable(fn, dst) < 0) return -1;
    /* overlapping source: copy it out first so the result is order-independent */
    xsa_tensor *tmp = NULL;
    if (src->storage == dst->storage && src != dst) {
        tmp = xsa_tensor_clone(src);
        if (!tmp) return -1;
        src = tmp;
    }
    xsa_storage_bump_version(dst->storage);
    int64_t st[2][XSA_MAX_DIMS];
    memcpy(st[0], dst->stride, sizeof st[0]);
    xsa_bstrides(src, dst->ndim, dst->shape, st[1]);
    xsa_sit it;
    xsa_sit_init(&it, 2, dst->ndim, dst->shape, st);
    char *db = (char *)dst->storage->data, *sb = (char *)src->storage->data;
    if (dst->dtype == src->dtype && it.nd >= 2 && it.inner[0] == 1 && it.inner[1] > 1 &&
        it.st[1][it.nd - 2] == 1) {
        copy_tiled(&it, (uint32_t *)db + dst->offset, (const uint32_t *)sb + src->offset);
        xsa_tensor_free(tmp);
        return 0;
    }
    int64_t n = it.n, so = it.inner[0], si = it.inner[1];
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
        if (dst->dtype == XSA_FLOAT32 && src->dtype == XSA_FLOAT32) {
            float *d = (float *)db + dst->offset + it.off[0];
            const float *s = (const float *)sb + src->offset + it.off[1];
            if (so == 1 && si == 1) memcpy(d, s, (size_t)n * sizeof *d);
            else if (so == 1 && si == 0) for (int64_t i = 0; i < n; i++) d[i] = s[0];
            else for (int64_t i = 0; i < n; i++) d[i * so] = s[i * si];
        } else if (dst->dtype == XSA_INT32 && src->dtype == XSA_INT32) {
            int32_t *d = (int32_t *)db + dst->offset + it.off[0];
            const int32_t *s = (const int32_t *)sb + src->offset + it.off[1];
            if (so == 1 && si == 1) memcpy(d, s, (size_t)n * sizeof *d);
            else for (int64_t i = 0; i < n; i++) d[i * so] = s[i * si];
        } else if (dst->dtype == XSA_FLOAT32) {
            float *d = (float *)db + dst->offset + it.off[0];
            const int32_t *s = (const int32_t *)sb + src->offset + it.off[1];
            for (int64_t i = 0; i < n; i++) d[i * so] = (float)s[i * si];
        } else {
            int32_t *d = (int32_t *)db + dst->offset + it.off[0];
            const float *s = (const float *)sb + src->offset + it.off[1];
            for (int64_t i = 0; i < n; i++) d[i * so] = xsa_to_i32(s[i * si]);
        }
    }
    xsa_tensor_free(tmp);
    return 0;
}

int xsa_tensor_fill_(xsa_tensor *dst, double v)
{
    const char *fn = "fill_";
    if (xsa_tcheck(fn, dst, "dst") < 0) return -1;
    if (dst->dtype == XSA_INT32 && i32_value_ok(fn, v) < 0) return -1;
    if (writable(fn, dst) < 0) return -1;
    xsa_storage_bump_version(dst->storage);
    if (xsa_tensor_is_contiguous(dst)) {
        fill_contig(dst, v);
        return 0;
    }
    int64_t st[1][XSA_MAX_DIMS];
    memcpy(st[0], dst->stride, sizeof st[0]);
    xsa_sit it;
    xsa_sit_init(&it, 1, dst->ndim, dst->shape, st);
    for (int64_t r = 0; r < it.rows; r++, xsa_sit_next(&it)) {
        if (dst->dtype == XSA_FLOAT32) {
            float *d = (float *)dst->storage->data + dst->offset + it.off[0], f = (float)v;
            for (int64_t i = 0; i < it.n; i++) d[i * it.inner[0]] = f;
        } else {
            int32_t *d = (int32_t *)dst->storage->data + dst->offset + it.off[0];
            for (int64_t i = 0; i < it.n; i++) d[i * it.inner[0]] = (int32_t)v;
        }
    }
    return 0;
}

