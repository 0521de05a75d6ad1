/*
 * autograd_ops.c: the backward rules of the plain tensor ops (tensor.h):
 * element-wise binary and unary ops, reductions, softmax, matmul, where,
 * clamp, views and cat. Each xsa_ag_* here runs the tensor op, then records a
 * node through autograd_impl.h when an input needs a gradient.
 *
 * Formulas are written with tensor ops on plain (unrecorded) tensors; the
 * engine (autograd.c) sums each input gradient back to the input's shape, so
 * a rule may return a broadcast-shaped gradient.
 *
 * Non-goals: the engine itself (autograd.c), the fused nn ops with
 * hand-written kernels (autograd_nn.c), gradients of the comparisons, argmax
 * and int32 results (never recorded).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_impl.h"
#include "ckd.h"
#include "nn.h"

/* ---- helpers for backward formulas ------------------------------------ */

static int normdim(int d, int ndim) { return d < 0 ? d + ndim : d; }

/* A scope of temporaries freed together; keeps the formulas short. */
typedef struct {
    xsa_tensor *t[24];
    int n;
    int failed;
} scope;

static xsa_tensor *keep(scope *sc, xsa_tensor *t)
{
    if (!t) {
        sc->failed = 1;
        return NULL;
    }
    assert(sc->n < 24); /* formulas here use at most a dozen */
    sc->t[sc->n++] = t;
    return t;
}

static void scope_end(scope *sc)
{
    for (int i = 0; i < sc->n; i++) xsa_tensor_free(sc->t[i]);
    sc->n = 0;
}

/* Each takes possibly-NULL operands (an earlier step failed) so formulas nest;
 * results live in the scope. */
static xsa_tensor *bin_(scope *sc, xsa_binop op, xsa_tensor *a, xsa_tensor *b)
{
    if (!a || !b) {
        sc->failed = 1;
        return NULL;
    }
    return keep(sc, xsa_tensor_binary(op, a, b));
}

static xsa_tensor *bins_(scope *sc, xsa_binop op, xsa_tensor *a, double s)
{
    if (!a) {
        sc->failed = 1;
        return NULL;
    }
    return keep(sc, xsa_tensor_binary_scalar(op, a, s, 0));
}

static xsa_tensor *un_(scope *sc, xsa_unop op, xsa_tensor *a)
{
    if (!a) {
        sc->failed = 1;
        return NULL;
    }
    return keep(sc, xsa_tensor_unary(op, a));
}

#define BIN(op, a, b) bin_(&sc, op, a, b)
#define BINS(op, a, s) bins_(&sc, op, a, s)
#define UN(op, a) un_(&sc, op, a)
/* hands a kept temporary over as a result (retained, the scope drops its own) */
static xsa_tensor *give(xsa_tensor *t)
{
    if (t) xsa_tensor_retain(t);
    return t;
}

/* ---- binary ------------------------------------------------------------ */

static int bw_binary(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *a = n->in[0], *b = n->in[1];
    switch ((xsa_binop)n->op) {
    case XSA_ADD:
        if (n->need[0]) gin[0] = give(g);
        if (n->need[1]) gin[1] = give(g);
        break;
    case XSA_SUB:
        if (n->need[0]) gin[0] = give(g);
        if (n->need[1]) gin[1] = give(UN(XSA_NEG, g));
        break;
    case XSA_MUL:
        if (n->need[0]) gin[0] = give(BIN(XSA_MUL, g, b));
        if (n->need[1]) gin[1] = give(BIN(XSA_MUL, g, a));
        break;
    case XSA_DIV:
        if (n->need[0]) gin[0] = give(BIN(XSA_DIV, g, b));
        if (n->need[1]) { /* -g a / b^2 */
            xsa_tensor *t = BIN(XSA_DIV, BIN(XSA_MUL, g, a), BIN(XSA_MUL, b, b));
            gin[1] = give(UN(XSA_NEG, t));
        }
        break;
    case XSA_POW:
        if (n->need[0]) { /* g b a^(b-1) */
            xsa_tensor *p = BIN(XSA_POW, a, BINS(XSA_SUB, b, 1.0));
            gin[0] = give(BIN(XSA_MUL, BIN(XSA_MUL, g, b), p));
        }
        if (n->need[1]) { /* g a^b log a, taken as 0 where a == 0 */
            xsa_tensor *t = BIN(XSA_MUL, BIN(XSA_MUL, g, n->out), UN(XSA_LOG, a));
            xsa_tensor *z = keep(&sc, xsa_tensor_zeros(XSA_FLOAT32, 0, NULL));
            xsa_tensor *m = BINS(XSA_EQ, a, 0.0);
            gin[1] = (t && z && m) ? xsa_tensor_where(m, z, t) : NULL;
            if (!gin[1]) sc.failed = 1;
        }
        break;
    case XSA_MAXIMUM:
    case XSA_MINIMUM: { /* mask = (a wins) + 0.5 (tie) */
        xsa_binop win = n->op == XSA_MAXIMUM ? XSA_GT : XSA_LT;
        xsa_tensor *m = BIN(XSA_ADD, BIN(win, a, b), BINS(XSA_MUL, BIN(XSA_EQ, a, b), 0.5));
        xsa_tensor *ga = BIN(XSA_MUL, g, m);
        if (n->need[0]) gin[0] = give(ga);
        if (n->need[1]) gin[1] = give(BIN(XSA_SUB, g, ga));
        break;
    }
    default:
        sc.failed = 1;
        xsa_error("backward: binary op %d is not differentiable", n->op);
    }
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

static const char *binop_name(xsa_binop op)
{
    switch (op) {
    case XSA_ADD: return "AddBackward";
    case XSA_SUB: return "SubBackward";
    case XSA_MUL: return "MulBackward";
    case XSA_DIV: return "DivBackward";
    case XSA_POW: return "PowBackward";
    case XSA_MAXIMUM: return "MaximumBackward";
    case XSA_MINIMUM: return "MinimumBackward";
    default: return "BinaryBackward";
    }
}

static int binop_diff(xsa_binop op) { return op <= XSA_MINIMUM; }

xsa_tensor *xsa_ag_binary(xsa_binop op, xsa_tensor *a, xsa_tensor *b)
{
    xsa_tensor *out = xsa_tensor_binary(op, a, b);
    xsa_tensor *in[2] = {a, b};
    if (!out || !binop_diff(op) || out->dtype != XSA_FLOAT32 || !xsa_agi_any_needs(2, in)) return out;
    node *nd = xsa_agi_node_new(binop_name(op), bw_binary, 2, in);
    if (nd) {
        nd->op = op;
        /* the values bw_binary reads: bit 0 a, bit 1 b */
        unsigned ga = nd->need[0] ? 1u : 0u, gb = nd->need[1] ? 1u : 0u;
        switch (op) {
        case XSA_MUL: nd->saved_in = (ga << 1) | gb; break;
        case XSA_DIV: nd->saved_in = (ga << 1) | (gb ? 3u : 0u); break;
        case XSA_POW: nd->saved_in = (ga ? 3u : 0u) | gb; break;
        case XSA_MAXIMUM:
        case XSA_MINIMUM: nd->saved_in = 3u; break;
        default: break; /* ADD, SUB: no values */
        }
    }
    return xsa_agi_attach(out, nd, op == XSA_POW);
}

static int bw_binary_scalar(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *a = n->in[0];
    double s = n->s;
    xsa_tensor *r = NULL;
    switch ((xsa_binop)n->op) {
    case XSA_ADD: r = give(g); break;
    case XSA_SUB: r = n->reversed ? give(UN(XSA_NEG, g)) : give(g); break;
    case XSA_MUL: r = give(BINS(XSA_MUL, g, s)); break;
    case XSA_DIV:
        if (!n->reversed) r = give(BINS(XSA_DIV, g, s));
        else /* d(s/a) = -s/a^2 */
            r = give(BINS(XSA_MUL, BIN(XSA_DIV, g, BIN(XSA_MUL, a, a)), -s));
        break;
    case XSA_POW:
        if (!n->reversed) /* d(a^s) = s a^(s-1) */
            r = give(BINS(XSA_MUL, BIN(XSA_MUL, g, BINS(XSA_POW, a, s - 1.0)), s));
        else /* d(s^a) = s^a log s */
            r = give(BINS(XSA_MUL, BIN(XSA_MUL, g, n->out), log(s)));
        break;
    case XSA_MAXIMUM:
    case XSA_MINIMUM: {
        xsa_binop win = n->op == XSA_MAXIMUM ? XSA_GT : XSA_LT;
        xsa_tensor *m = BIN(XSA_ADD, BINS(win, a, s), BINS(XSA_MUL, BINS(XSA_EQ, a, s), 0.5));
        r = give(BIN(XSA_MUL, g, m));
        break;
    }
    default:
        sc.failed = 1;
        xsa_error("backward: binary op %d is not differentiable", n->op);
    }
    gin[0] = r;
    int failed = sc.failed || !r;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_binary_scalar(xsa_binop op, xsa_tensor *a, double s, int reversed)
{
    xsa_tensor *out = xsa_tensor_binary_scalar(op, a, s, reversed);
    if (!out || !binop_diff(op) || out->dtype != XSA_FLOAT32 || !xsa_agi_any_needs(1, &a)) return out;
    node *nd = xsa_agi_node_new(binop_name(op), bw_binary_scalar, 1, &a);
    if (nd) {
        nd->op = op;
        nd->s = s;
        nd->reversed = reversed;
        nd->saved_in = (op == XSA_DIV && reversed) || (op == XSA_POW && !reversed) ||
                       op == XSA_MAXIMUM || op == XSA_MINIMUM;
    }
    return xsa_agi_attach(out, nd, op == XSA_POW && reversed);
}

/* ---- unary: element loops over contiguous copies (one pass, no temporaries
 * per formula term) --------------------------------------------------- */

static xsa_tensor *contig_f32(xsa_tensor *t)
{
    if (t->dtype != XSA_FLOAT32) return xsa_tensor_to_dtype(t, XSA_FLOAT32);
    return xsa_tensor_contiguous(t);
}

static int bw_unary(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *a = contig_f32(n->in[0]);
    xsa_tensor *y = n->out ? contig_f32(n->out) : NULL;
    xsa_tensor *gc = contig_f32(g);
    xsa_tensor *r = xsa_tensor_new(XSA_FLOAT32, n->in[0]->ndim, n->in[0]->shape);
    int rc = -1;
    if (!a || !gc || !r || (n->out && !y)) goto done;
    if (xsa_tensor_numel(gc) != xsa_tensor_numel(r)) {
        xsa_error("backward: %s got a gradient of the wrong size", n->name);
        goto done;
    }
    const float *x = xsa_tensor_f32(a), *gy = xsa_tensor_f32(gc);
    const float *yy = y ? xsa_tensor_f32(y) : NULL;
    float *gx = xsa_tensor_f32(r);
    int64_t N = xsa_tensor_numel(r);
    if (n->op == XSA_GELU) /* the forward's kernel pair (nn.h); r is zeros, it adds */
        xsa_nn_gelu_backward(gx, x, gy, (size_t)N);
    for (int64_t i = 0; i < N && n->op != XSA_GELU; i++) {
        double xi = x[i], gi = gy[i], d = 0.0;
        switch ((xsa_unop)n->op) {
        case XSA_NEG: d = -1.0; break;
        case XSA_EXP: d = yy[i]; break;
        case XSA_LOG: d = 1.0 / xi; break;
        case XSA_SQRT: d = 0.5 / yy[i]; break;
        case XSA_TANH: d = 1.0 - (double)yy[i] * yy[i]; break;
        case XSA_RELU: d = xi > 0.0 ? 1.0 : 0.0; break;
        case XSA_GELU: break; /* above */
        case XSA_ABS: d = xi > 0.0 ? 1.0 : (xi < 0.0 ? -1.0 : 0.0); break;
        case XSA_SIGMOID: d = (double)yy[i] * (1.0 - yy[i]); break;
        }
        gx[i] = (float)(gi * d);
    }
    gin[0] = r;
    r = NULL;
    rc = 0;
done:
    xsa_tensor_free(a);
    xsa_tensor_free(y);
    xsa_tensor_free(gc);
    xsa_tensor_free(r);
    return rc;
}

static const char *unop_name(xsa_unop op)
{
    static const char *names[] = {"NegBackward", "ExpBackward", "LogBackward",
                                  "SqrtBackward", "TanhBackward", "ReluBackward",
                                  "GeluBackward", "AbsBackward", "SigmoidBackward"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "UnaryBackward";
}

xsa_tensor *xsa_ag_unary(xsa_unop op, xsa_tensor *a)
{
    xsa_tensor *out = xsa_tensor_unary(op, a);
    if (!out || !xsa_agi_any_needs(1, &a)) return out;
    node *nd = xsa_agi_node_new(unop_name(op), bw_unary, 1, &a);
    /* the derivative comes from the result (save) or from the input */
    int save = op == XSA_EXP || op == XSA_SQRT || op == XSA_TANH || op == XSA_SIGMOID;
    if (nd) {
        nd->op = op;
        nd->saved_in = !save && op != XSA_NEG;
    }
    return xsa_agi_attach(out, nd, save);
}

/* ---- reductions ------------------------------------------------------- */

/* g (shaped like the reduction's result) made broadcastable against the input:
 * the reduced dimension put back as size 1. Owned. */
static xsa_tensor *regrow(node *n, xsa_tensor *g)
{
    if (n->dim == XSA_ALL_DIMS || n->keepdim) {
        xsa_tensor_retain(g);
        return g;
    }
    return xsa_tensor_unsqueeze(g, n->dim);
}

static int bw_reduce(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *a = n->in[0];
    int64_t cnt = n->dim == XSA_ALL_DIMS ? xsa_tensor_numel(a) : a->shape[n->dim];
    xsa_tensor *gu = keep(&sc, regrow(n, g));
    /* a tensor of a's shape, zero, to broadcast gu against */
    xsa_tensor *r = NULL;
    switch ((xsa_redop)n->op) {
    case XSA_SUM:
        r = gu ? xsa_tensor_expand(gu, a->ndim, a->shape) : NULL;
        break;
    case XSA_MEAN: {
        xsa_tensor *e = BINS(XSA_DIV, gu, (double)cnt);
        r = e ? xsa_tensor_expand(e, a->ndim, a->shape) : NULL;
        break;
    }
    case XSA_MAX:
    case XSA_MIN: { /* shared evenly among the elements equal to the extreme */
        xsa_tensor *yu = keep(&sc, regrow(n, n->out));
        xsa_tensor *m = BIN(XSA_EQ, a, yu);
        xsa_tensor *c = m ? keep(&sc, xsa_tensor_reduce(XSA_SUM, m, n->dim, 1)) : NULL;
        r = give(BIN(XSA_MUL, m, BIN(XSA_DIV, gu, c)));
        break;
    }
    case XSA_VAR: { /* 2 (a - mean) / (n - 1) */
        xsa_tensor *mu = keep(&sc, xsa_tensor_reduce(XSA_MEAN, a, n->dim, 1));
        xsa_tensor *d = BIN(XSA_SUB, a, mu);
        r = give(BIN(XSA_MUL, BINS(XSA_MUL, d, 2.0 / (double)(cnt - 1)), gu));
        break;
    }
    default:
        xsa_error("backward: reduction %d is not differentiable", n->op);
    }
    int failed = sc.failed || !r;
    scope_end(&sc);
    if (failed) {
        xsa_tensor_free(r);
        return -1;
    }
    gin[0] = r;
    return 0;
}

xsa_tensor *xsa_ag_reduce(xsa_redop op, xsa_tensor *a, int dim, int keepdim)
{
    xsa_tensor *out = xsa_tensor_reduce(op, a, dim, keepdim);
    if (!out || op == XSA_ARGMAX || op == XSA_ARGMIN || !xsa_agi_any_needs(1, &a)) return out;
    static const char *names[] = {"SumBackward", "MeanBackward", "MaxBackward",
                                  "MinBackward", "", "", "VarBackward"};
    node *nd = xsa_agi_node_new(names[op], bw_reduce, 1, &a);
    if (nd) {
        nd->op = op;
        nd->dim = dim == XSA_ALL_DIMS ? dim : normdim(dim, a->ndim);
        nd->keepdim = keepdim;
        nd->saved_in = op == XSA_MAX || op == XSA_MIN || op == XSA_VAR;
    }
    return xsa_agi_attach(out, nd, op == XSA_MAX || op == XSA_MIN);
}

/* ---- softmax ------------------------------------------------------------ */

static int bw_softmax(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *y = n->out;
    if (n->op == 0) { /* softmax: y (g - sum(g y)) */
        xsa_tensor *gy = BIN(XSA_MUL, g, y);
        xsa_tensor *s = gy ? keep(&sc, xsa_tensor_reduce(XSA_SUM, gy, n->dim, 1)) : NULL;
        gin[0] = give(BIN(XSA_SUB, gy, BIN(XSA_MUL, y, s)));
    } else { /* log_softmax: g - exp(y) sum(g) */
        xsa_tensor *s = keep(&sc, xsa_tensor_reduce(XSA_SUM, g, n->dim, 1));
        gin[0] = give(BIN(XSA_SUB, g, BIN(XSA_MUL, UN(XSA_EXP, y), s)));
    }
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_softmax(xsa_tensor *a, int dim)
{
    xsa_tensor *out = xsa_tensor_softmax(a, dim);
    if (!out || !xsa_agi_any_needs(1, &a)) return out;
    node *nd = xsa_agi_node_new("SoftmaxBackward", bw_softmax, 1, &a);
    if (nd) nd->dim = normdim(dim, a->ndim);
    return xsa_agi_attach(out, nd, 1);
}

xsa_tensor *xsa_ag_log_softmax(xsa_tensor *a, int dim)
{
    xsa_tensor *out = xsa_tensor_log_softmax(a, dim);
    if (!out || !xsa_agi_any_needs(1, &a)) return out;
    node *nd = xsa_agi_node_new("LogSoftmaxBackward", bw_softmax, 1, &a);
    if (nd) {
        nd->op = 1;
        nd->dim = normdim(dim, a->ndim);
    }
    return xsa_agi_attach(out, nd, 1);
}

/* ---- matmul: [M,K]x[K,N], [B,M,K]x[B,K,N], [B,M,K]x[K,N] ------------------ */

static int bw_matmul(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *a = n->in[0], *b = n->in[1];
    int last = b->ndim - 1;
    if (n->need[0]) { /* g b^T */
        xsa_tensor *bt = keep(&sc, xsa_tensor_transpose(b, last - 1, last));
        gin[0] = bt ? xsa_tensor_matmul(g, bt) : NULL;
        if (!gin[0]) sc.failed = 1;
    }
    if (n->need[1] && !sc.failed) {
        xsa_tensor *aa = a, *gg = g;
        if (xsa_tensor_numel(a) == 0 || xsa_tensor_numel(g) == 0) { /* K or B*M*N is 0 */
            gin[1] = xsa_tensor_zeros(XSA_FLOAT32, b->ndim, b->shape);
            if (!gin[1]) sc.failed = 1;
            goto done;
        }
        if (a->ndim == 3 && b->ndim == 2) { /* sum over the batch: fold it into M */
            /* products of the sizes of non-empty tensors: no overflow */
            int64_t s1[2] = {a->shape[0] * a->shape[1], a->shape[2]};
            int64_t s2[2] = {g->shape[0] * g->shape[1], g->shape[2]};
            aa = keep(&sc, xsa_tensor_reshape(a, 2, s1));
            gg = keep(&sc, xsa_tensor_reshape(g, 2, s2));
        }
        xsa_tensor *at = aa ? keep(&sc, xsa_tensor_transpose(aa, aa->ndim - 2, aa->ndim - 1)) : NULL;
        gin[1] = (at && gg) ? xsa_tensor_matmul(at, gg) : NULL;
        if (!gin[1]) sc.failed = 1;
    }
done:;
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_matmul(xsa_tensor *a, xsa_tensor *b)
{
    xsa_tensor *out = xsa_tensor_matmul(a, b);
    xsa_tensor *in[2] = {a, b};
    if (!out || !xsa_agi_any_needs(2, in)) return out;
    node *nd = xsa_agi_node_new("MatmulBackward", bw_matmul, 2, in);
    if (nd) nd->saved_in = (nd->need[0] ? 2u : 0u) | (nd->need[1] ? 1u : 0u); /* g b^T, a^T g */
    return xsa_agi_attach(out, nd, 0);
}

/* ---- where, clamp, clone ------------------------------------------------ */

static int bw_where(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *z = keep(&sc, xsa_tensor_zeros(XSA_FLOAT32, 0, NULL));
    if (z && n->need[1] && !(gin[1] = xsa_tensor_where(n->in[0], g, z))) sc.failed = 1;
    if (z && n->need[2] && !(gin[2] = xsa_tensor_where(n->in[0], z, g))) sc.failed = 1;
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_where(xsa_tensor *cond, xsa_tensor *a, xsa_tensor *b)
{
    xsa_tensor *out = xsa_tensor_where(cond, a, b);
    xsa_tensor *in[3] = {cond, a, b};
    if (!out || out->dtype != XSA_FLOAT32 || !xsa_agi_any_needs(2, in + 1)) return out;
    node *nd = xsa_agi_node_new("WhereBackward", bw_where, 3, in);
    if (nd) {
        nd->need[0] = 0;
        nd->saved_in = 1u; /* cond */
    }
    return xsa_agi_attach(out, nd, 0);
}

static int bw_clamp(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    scope sc = {0};
    xsa_tensor *a = n->in[0];
    xsa_tensor *m = BIN(XSA_MUL, BINS(XSA_GE, a, n->lo), BINS(XSA_LE, a, n->hi));
    gin[0] = give(BIN(XSA_MUL, g, m));
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_clamp(xsa_tensor *a, double lo, double hi)
{
    xsa_tensor *out = xsa_tensor_clamp(a, lo, hi);
    if (!out || out->dtype != XSA_FLOAT32 || !xsa_agi_any_needs(1, &a)) return out;
    node *nd = xsa_agi_node_new("ClampBackward", bw_clamp, 1, &a);
    if (nd) {
        nd->lo = lo;
        nd->hi = hi;
        nd->saved_in = 1u;
    }
    return xsa_agi_attach(out, nd, 0);
}

static int bw_identity(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    (void)n;
    xsa_tensor_retain(g);
    gin[0] = g;
    return 0;
}

xsa_tensor *xsa_ag_clone(xsa_tensor *t)
{
    xsa_tensor *out = xsa_tensor_clone(t);
    if (!out || !xsa_agi_any_needs(1, &t)) return out;
    return xsa_agi_attach(out, xsa_agi_node_new("CloneBackward", bw_identity, 1, &t), 0);
}

/* ---- views -------------------------------------------------------------- */

static int bw_reshape(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    gin[0] = xsa_tensor_reshape(g, n->in[0]->ndim, n->in[0]->shape);
    return gin[0] ? 0 : -1;
}

static int bw_transpose(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    gin[0] = xsa_tensor_transpose(g, n->perm[0], n->perm[1]);
    return gin[0] ? 0 : -1;
}

static int bw_permute(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    int inv[XSA_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[n->perm[i]] = i;
    gin[0] = xsa_tensor_permute(g, inv);
    return gin[0] ? 0 : -1;
}

/* narrow and select: the gradient lands in a zero tensor of the input's shape */
static int bw_slice(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *a = n->in[0];
    xsa_tensor *z = xsa_tensor_zeros(XSA_FLOAT32, a->ndim, a->shape);
    if (!z) return -1;
    xsa_tensor *v = n->op == 0 ? xsa_tensor_narrow(z, n->dim, n->start, g->ndim ? g->shape[n->dim] : 1)
                               : xsa_tensor_select(z, n->dim, n->start);
    if (!v || xsa_tensor_copy_(v, g) != 0) {
        xsa_tensor_free(v);
        xsa_tensor_free(z);
        return -1;
    }
    xsa_tensor_free(v);
    gin[0] = z;
    return 0;
}

static xsa_tensor *view_node(xsa_tensor *out, xsa_tensor *t, const char *name, bwd_fn bw)
{
    if (!out || !xsa_agi_any_needs(1, &t)) return out;
    return xsa_agi_attach(out, xsa_agi_node_new(name, bw, 1, &t), 0);
}

xsa_tensor *xsa_ag_view(xsa_tensor *t, int ndim, const int64_t *shape)
{
    return view_node(xsa_tensor_view(t, ndim, shape), t, "ViewBackward", bw_reshape);
}

xsa_tensor *xsa_ag_reshape(xsa_tensor *t, int ndim, const int64_t *shape)
{
    return view_node(xsa_tensor_reshape(t, ndim, shape), t, "ReshapeBackward", bw_reshape);
}

xsa_tensor *xsa_ag_unsqueeze(xsa_tensor *t, int dim)
{
    return view_node(xsa_tensor_unsqueeze(t, dim), t, "UnsqueezeBackward", bw_reshape);
}

xsa_tensor *xsa_ag_squeeze(xsa_tensor *t, int dim)
{
    return view_node(xsa_tensor_squeeze(t, dim), t, "SqueezeBackward", bw_reshape);
}

xsa_tensor *xsa_ag_contiguous(xsa_tensor *t)
{
    return view_node(xsa_tensor_contiguous(t), t, "ContiguousBackward", bw_identity);
}

/* expand: the engine's sum back to the input shape is the whole backward */
xsa_tensor *xsa_ag_expand(xsa_tensor *t, int ndim, const int64_t *shape)
{
    return view_node(xsa_tensor_expand(t, ndim, shape), t, "ExpandBackward", bw_identity);
}

xsa_tensor *xsa_ag_transpose(xsa_tensor *t, int d0, int d1)
{
    xsa_tensor *out = view_node(xsa_tensor_transpose(t, d0, d1), t, "TransposeBackward", bw_transpose);
    if (out && out->grad_fn && out->grad_fn->backward == bw_transpose) {
        out->grad_fn->perm[0] = normdim(d0, t->ndim);
        out->grad_fn->perm[1] = normdim(d1, t->ndim);
    }
    return out;
}

xsa_tensor *xsa_ag_permute(xsa_tensor *t, const int *perm)
{
    xsa_tensor *out = view_node(xsa_tensor_permute(t, perm), t, "PermuteBackward", bw_permute);
    if (out && out->grad_fn && out->grad_fn->backward == bw_permute)
        for (int i = 0; i < t->ndim; i++) out->grad_fn->perm[i] = normdim(perm[i], t->ndim);
    return out;
}

xsa_tensor *xsa_ag_narrow(xsa_tensor *t, int dim, int64_t start, int64_t len)
{
    xsa_tensor *out = view_node(xsa_tensor_narrow(t, dim, start, len), t, "NarrowBackward", bw_slice);
    if (out && out->grad_fn && out->grad_fn->backward == bw_slice) {
        out->grad_fn->op = 0;
        out->grad_fn->dim = normdim(dim, t->ndim);
        out->grad_fn->start = start;
    }
    return out;
}

xsa_tensor *xsa_ag_select(xsa_tensor *t, int dim, int64_t index)
{
    xsa_tensor *out = view_node(xsa_tensor_select(t, dim, index), t, "SelectBackward", bw_slice);
    if (out && out->grad_fn && out->grad_fn->backward == bw_slice) {
        int d = normdim(dim, t->ndim);
        out->grad_fn->op = 1;
        out->grad_fn->dim = d;
        out->grad_fn->start = index < 0 ? index + t->shape[d] : index;
    }
    return out;
}

/* ---- cat ------------------------------------------------------------------ */

static int bw_cat(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t len = n->in[i]->shape[n->dim];
        if (n->need[i] && !(gin[i] = xsa_tensor_narrow(g, n->dim, off, len))) return -1;
        off += len;
    }
    return 0;
}

/* The gradient graph of a cat of n > 0 tensors into out along d: one
 * CatBackward node when n <= XSA_AG_MAX_INPUTS, else a tree built bottom up
 * (a loop, no recursion): each group of up to 8 consecutive items becomes a
 * narrow view of out over the group's range carrying the group's node, and
 * the views are grouped again until at most 8 remain for out's own node.
 * The views are never read (bw_cat needs only shapes), so nothing is
 * copied: n inputs cost about n/7 nodes and headers, depth log8(n). */
static xsa_tensor *cat_graph(xsa_tensor *out, int n, xsa_tensor *const *ts, int d)
{
    const int K = XSA_AG_MAX_INPUTS;
    int cnt = n, owned = 0;
    xsa_tensor **items = (xsa_tensor **)ts; /* the current level; level 0 is borrowed */
    int64_t *off = malloc(sizeof *off * (size_t)n); /* each item's start along d */
    int ok = off != NULL;
    if (!ok) xsa_error("cat: out of memory for the gradient graph");
    if (ok) {
        int64_t o = 0;
        for (int i = 0; i < n; i++) {
            off[i] = o;
            o += ts[i]->shape[d];
        }
    }
    while (ok && cnt > K) {
        int m = (cnt + K - 1) / K, built = 0;
        xsa_tensor **made = malloc(sizeof *made * (size_t)m);
        if (!made) {
            xsa_error("cat: out of memory for the gradient graph");
            ok = 0;
            break;
        }
        for (int j = 0; j < m; j++) {
            int g = j * K, k = cnt - g < K ? cnt - g : K;
            int64_t len = off[g + k - 1] + items[g + k - 1]->shape[d] - off[g];
            xsa_tensor *v = xsa_tensor_narrow(out, d, off[g], len);
            if (v && xsa_agi_any_needs(k, items + g)) {
                node *nd = xsa_agi_node_new("CatBackward", bw_cat, k, items + g);
                if (nd) nd->dim = d;
                v = xsa_agi_attach(v, nd, 0);
            }
            if (!v) {
                ok = 0;
                break;
            }
            made[built++] = v;
            off[j] = off[g]; /* j <= g: later groups read only indices past g */
        }
        if (owned) {
            for (int i = 0; i < cnt; i++) xsa_tensor_free(items[i]);
            free(items);
        }
        items = made;
        owned = 1;
        cnt = built;
    }
    node *nd = NULL;
    if (ok) {
        nd = xsa_agi_node_new("CatBackward", bw_cat, cnt, items);
        if (nd) nd->dim = d;
    }
    if (owned) {
        for (int i = 0; i < cnt; i++) xsa_tensor_free(items[i]);
        free(items);
    }
    free(off);
    return xsa_agi_attach(out, nd, 0); /* frees out when nd is NULL */
}

xsa_tensor *xsa_ag_cat(int n, xsa_tensor *const *ts, int dim)
{
    const char *fn = "cat";
    if (n < 1 || !ts) return xsa_error("%s: no tensors to concatenate", fn), NULL;
    for (int i = 0; i < n; i++)
        if (!ts[i]) return xsa_error("%s: tensor %d is missing", fn, i + 1), NULL;
    const xsa_tensor *t0 = ts[0];
    if (t0->ndim < 1) return xsa_error("%s: 0-d tensors cannot be concatenated", fn), NULL;
    int d = normdim(dim, t0->ndim);
    if (d < 0 || d >= t0->ndim)
        return xsa_error("%s: dim %d out of range for %d dims", fn, dim, t0->ndim), NULL;
    int64_t shape[XSA_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const xsa_tensor *t = ts[i];
        int ok = t->ndim == t0->ndim && t->dtype == t0->dtype;
        for (int k = 0; ok && k < t0->ndim; k++) ok = k == d || t->shape[k] == t0->shape[k];
        if (!ok) {
            char b1[128], b2[128];
            return xsa_error("%s: tensor %d %s (%s) does not fit tensor 1 %s (%s) "
                             "outside the joined dimension", fn, i + 1,
                             xsa_shape_str(t->ndim, t->shape, b1, sizeof b1), xsa_dtype_name(t->dtype),
                             xsa_shape_str(t0->ndim, t0->shape, b2, sizeof b2),
                             xsa_dtype_name(t0->dtype)), NULL;
        }
        if (xsa_ckd_add_i64(shape[d], t->shape[d], &shape[d]) || shape[d] > XSA_MAX_NUMEL)
            return xsa_error("%s: the joined dimension %d grows past %lld at tensor %d", fn, d,
                             (long long)XSA_MAX_NUMEL, i + 1), NULL;
    }
    xsa_tensor *out = xsa_tensor_new(t0->dtype, t0->ndim, shape);
    int64_t off = 0;
    for (int i = 0; out && i < n; i++) {
        xsa_tensor *v = xsa_tensor_narrow(out, d, off, ts[i]->shape[d]);
        if (!v || xsa_tensor_copy_(v, ts[i]) != 0) {
            xsa_tensor_free(out);
            out = NULL;
        }
        xsa_tensor_free(v);
        off += ts[i]->shape[d];
    }
    if (!out || !xsa_agi_any_needs(n, ts)) return out;
    return cat_graph(out, n, ts, d);
}
