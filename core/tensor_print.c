/*
 * tensor_print.c: xsa_tensor_format, text like PyTorch's repr with its
 * default print options (precision 4, threshold 1000, edgeitems 3,
 * linewidth 80): the same choice between "1.", "1.2346" and "1.2346e+00"
 * styles, the same column widths, line wrapping and "..." elision, so a
 * tensor prints as torch prints the same values. Differences: the dtype
 * suffix reads "dtype=int32" (not "dtype=torch.int32").
 * Non-goals: print options, complex or half dtypes.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"
#include "tensor_impl.h"

#define PRECISION 4
#define THRESHOLD 1000
#define EDGE 3
#define LINEWIDTH 80

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_spaces(sbuf *b, int n)
{
    for (int i = 0; i < n; i++) sb_add(b, " ", 1);
}

typedef struct {
    int is_float, int_mode, sci_mode, width;
} fmt;

/* Python's str.format of a double: non-finite values read nan/inf/-inf. */
static int fmt_num(char *buf, size_t n, const char *spec, double v)
{
    if (isnan(v)) return snprintf(buf, n, "nan");
    if (isinf(v)) return snprintf(buf, n, v < 0 ? "-inf" : "inf");
    return snprintf(buf, n, spec, v);
}

/* The text of one value, without padding. */
static void value_str(const fmt *f, double v, char *buf, size_t n)
{
    if (!f->is_float) {
        snprintf(buf, n, "%lld", (long long)v);
    } else if (f->sci_mode) {
        fmt_num(buf, n, "%.4e", v);
    } else if (f->int_mode) {
        fmt_num(buf, n, "%.0f", v);
        if (isfinite(v)) strncat(buf, ".", n - strlen(buf) - 1);
    } else {
        fmt_num(buf, n, "%.4f", v);
    }
}

/* Visits the values shown (all, or the edges of each dimension when
 * summarising) in order. */
typedef void (*visit_fn)(void *ctx, double v);

static void walk(const xsa_tensor *t, int d, int64_t off, int summarize, visit_fn fn, void *ctx)
{
    if (d == t->ndim) {
        fn(ctx, xsa_tload(t, off));
        return;
    }
    int64_t n = t->shape[d];
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
        walk(t, d + 1, off + i * t->stride[d], summarize, fn, ctx);
    }
}

typedef struct {
    int is_float;
    int any;            /* nonzero finite seen */
    int all_int;
    double amin, amax;  /* of |v| over nonzero finite values */
    int int_width;
} scan;

static void scan_one(void *ctx, double v)
{
    scan *s = ctx;
    if (!s->is_float) {
        char buf[32];
        int w = snprintf(buf, sizeof buf, "%lld", (long long)v);
        if (w > s->int_width) s->int_width = w;
        return;
    }
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (!s->any) {
        s->any = 1;
        s->amin = s->amax = a;
    } else {
        if (a < s->amin) s->amin = a;
        if (a > s->amax) s->amax = a;
    }
    if (v != ceil(v)) s->all_int = 0;
}

/* Second pass: the widest value text among nonzero finite values. */
static void widen_one(void *ctx, double v)
{
    fmt *f = ctx;
    if (!isfinite(v) || v == 0) return;
    char buf[64];
    value_str(f, v, buf, sizeof buf);
    int w = (int)strlen(buf);
    if (w > f->width) f->width = w;
}

static fmt make_fmt(const xsa_tensor *t, int summarize)
{
    fmt f = {t->dtype == XSA_FLOAT32, 1, 0, 1};
    scan s = {f.is_float, 0, 1, 0, 0, 1};
    walk(t, 0, 0, summarize, scan_one, &s);
    if (!f.is_float) {
        f.width = s.int_width;
        return f;
    }
    if (!s.any) return f;
    f.int_mode = s.all_int;
    if (f.int_mode)
        f.sci_mode = s.amax / s.amin > 1000.0 || s.amax > 1.0e8;
    else
        f.sci_mode = s.amax / s.amin > 1000.0 || s.amax > 1.0e8 || s.amin < 1.0e-4;
    walk(t, 0, 0, summarize, widen_one, &f);
    return f;
}

static void emit_value(sbuf *b, const fmt *f, double v)
{
    char buf[64];
    value_str(f, v, buf, sizeof buf);
    int len = (int)strlen(buf);
    if (len < f->width) sb_spaces(b, f->width - len);
    sb_str(b, buf);
}

/* The innermost dimension: values packed into lines of LINEWIDTH. */
static void emit_vector(sbuf *b, const xsa_tensor *t, int64_t off, int indent, int summarize,
                        const fmt *f)
{
    int d = t->ndim - 1;
    int64_t n = t->shape[d];
    int elen = f->width + 2;
    int per_line = (LINEWIDTH - indent) / elen;
    if (per_line < 1) per_line = 1;
    sb_str(b, "[");
    int64_t k = 0; /* slots emitted so far */
    for (int64_t i = 0; i < n; i++) {
        int elide = summarize && n > 2 * EDGE && i == EDGE;
        if (k > 0) {
            if (k % per_line == 0) {
                sb_str(b, ",\n");
                sb_spaces(b, indent + 1);
            } else {
                sb_str(b, ", ");
            }
        }
        k++;
        if (elide) {
            sb_str(b, " ...");
            i = n - EDGE - 1;
            continue;
        }
        emit_value(b, f, xsa_tload(t, off + i * t->stride[d]));
    }
    sb_str(b, "]");
}

static void emit(sbuf *b, const xsa_tensor *t, int d, int64_t off, int indent, int summarize,
                 const fmt *f)
{
    if (d == t->ndim - 1) {
        emit_vector(b, t, off, indent, summarize, f);
        return;
    }
    int64_t n = t->shape[d];
    int rest = t->ndim - d; /* dims of this slice */
    sb_str(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_str(b, ",");
            for (int k = 0; k < rest - 1; k++) sb_str(b, "\n");
            sb_spaces(b, indent + 1);
        }
        if (summarize && n > 2 * EDGE && i == EDGE) {
            sb_str(b, "...");
            sb_str(b, ",");
            for (int k = 0; k < rest - 1; k++) sb_str(b, "\n");
            sb_spaces(b, indent + 1);
            i = n - EDGE;
        }
        emit(b, t, d + 1, off + i * t->stride[d], indent + 1, summarize, f);
    }
    sb_str(b, "]");
}

char *xsa_tensor_format(const xsa_tensor *t)
{
    if (xsa_tcheck("format", t, "t") < 0) return NULL;
    sbuf body = {0}, out = {0};
    int64_t numel = xsa_tensor_numel(t);
    int indent = 7; /* strlen("tensor(") */
    char suffix[2][256];
    int nsuf = 0;
    if (numel == 0) {
        sb_str(&body, "[]");
        if (t->ndim != 1) {
            /* 8 dims of at most 11 digits fit the 256-byte buffer */
            int len = snprintf(suffix[nsuf], sizeof suffix[nsuf], "size=(");
            for (int i = 0; i < t->ndim; i++)
                len += snprintf(suffix[nsuf] + len, sizeof suffix[nsuf] - (size_t)len,
                                i ? ", %lld" : "%lld", (long long)t->shape[i]);
            snprintf(suffix[nsuf] + len, sizeof suffix[nsuf] - (size_t)len, ")");
            nsuf++;
        }
    } else {
        int summarize = numel > THRESHOLD;
        fmt f = make_fmt(t, summarize);
        if (t->ndim == 0) {
            char buf[64];
            value_str(&f, xsa_tload(t, 0), buf, sizeof buf);
            sb_str(&body, buf);
        } else {
            emit(&body, t, 0, 0, indent, summarize, &f);
        }
    }
    if (t->dtype != XSA_FLOAT32) snprintf(suffix[nsuf++], sizeof suffix[0], "dtype=%s", xsa_dtype_name(t->dtype));
    sb_str(&out, "tensor(");
    if (body.p) sb_str(&out, body.p);
    /* PyTorch's rule for where a suffix goes: measured on the body alone */
    const char *nl = body.p ? strrchr(body.p, '\n') : NULL;
    size_t last = body.p ? (nl ? body.len - (size_t)(nl - body.p) + 1 : body.len + 2) : 2;
    for (int i = 0; i < nsuf; i++) {
        size_t sl = strlen(suffix[i]);
        if (last + sl + 2 > LINEWIDTH) {
            sb_str(&out, ",\n");
            sb_spaces(&out, indent);
            last = (size_t)indent + sl;
        } else {
            sb_str(&out, ", ");
            last += sl + 2;
        }
        sb_str(&out, suffix[i]);
    }
    sb_str(&out, ")");
    int oom = body.oom || out.oom;
    free(body.p);
    if (oom) {
        free(out.p);
        xsa_error("format: out of memory");
        return NULL;
    }
    return out.p;
}
