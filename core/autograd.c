/*
 * autograd.c: reverse-mode differentiation over the tensor ops of tensor.h.
 *
 * Each xsa_ag_* op computes the tensor op and, when grad mode is on and an
 * input requires grad, hangs a node on the result (result->grad_fn). A node
 * owns references to its inputs (that is how the graph is linked: input ->
 * input->grad_fn -> its inputs ...) and, when its backward needs the result's
 * values, an alias of the result that carries no grad_fn (so no node ever
 * refers to its own output and reference counts have no cycles).
 *
 * xsa_ag_backward orders the nodes reachable from the output by a depth-first
 * post-order (reversed, it is a topological order: every node runs after all
 * of its consumers), accumulates each node's output gradient, runs its
 * backward and hands each input gradient, summed back to the input's shape
 * when the forward broadcast, either to the input's node or, for a leaf, adds
 * it into leaf->grad.
 *
 * Non-goals: higher-order gradients (backward ops are not recorded), version
 * counters for in-place edits of saved tensors (in-place ops on tensors that
 * need a gradient are refused instead), threads (grad mode and the release
 * list are thread-local; a graph belongs to one thread).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "nn.h"
#include "system.h"

struct xsa_ag_node;
typedef struct xsa_ag_node node;
typedef int (*bwd_fn)(node *n, xsa_tensor *g, xsa_tensor **gin);

struct xsa_ag_node {
    long refcount;
    const char *name;
    bwd_fn backward;
    int n_in;
    xsa_tensor *in[XSA_AG_MAX_INPUTS];   /* owned, may be NULL */
    int need[XSA_AG_MAX_INPUTS];         /* input i wants a gradient */
    xsa_tensor *out;                     /* alias of the result's values or NULL */
    xsa_tensor *sv[4];                   /* other saved tensors (fused ops) */
    int out_ndim;
    int64_t out_shape[XSA_MAX_DIMS];
    /* op arguments */
    int op, dim, keepdim, reversed;
    double s, lo, hi;
    int perm[XSA_MAX_DIMS];
    int64_t start;
    int dims[4];                         /* fused ops: B, T, C, ... */
    float lambda;
    /* custom nodes */
    xsa_ag_custom_fn cfn;
    void *ctx;
    void (*ctx_free)(void *);
    /* backward bookkeeping */
    xsa_tensor *gacc;                    /* gradient of the result so far */
    unsigned long mark;
    int released;                        /* buffers freed after a backward */
    node *next_free;
};

static _Thread_local int grad_enabled = 1;
static _Thread_local unsigned long epoch;
static _Thread_local node *pending;
static _Thread_local int releasing;

int xsa_ag_set_enabled(int enabled)
{
    int prev = grad_enabled;
    grad_enabled = enabled ? 1 : 0;
    return prev;
}

int xsa_ag_is_enabled(void) { return grad_enabled; }

int xsa_ag_requires_grad(const xsa_tensor *t)
{
    return t && (t->requires_grad || t->grad_fn != NULL);
}

const char *xsa_ag_grad_fn_name(const xsa_tensor *t)
{
    return (t && t->grad_fn) ? t->grad_fn->name : NULL;
}

int xsa_ag_set_requires_grad(xsa_tensor *t, int requires_grad)
{
    if (!t) return xsa_error("requires_grad: no tensor");
    if (t->grad_fn)
        return xsa_error("requires_grad: only leaf tensors can be changed; "
                         "use detach() for a tensor computed by an op");
    if (requires_grad && t->dtype != XSA_FLOAT32)
        return xsa_error("requires_grad: only float32 tensors can require "
                         "gradients (got %s)", xsa_dtype_name(t->dtype));
    t->requires_grad = requires_grad ? 1 : 0;
    return 0;
}

int xsa_ag_check_inplace(const xsa_tensor *t, const char *op)
{
    if (grad_enabled && xsa_ag_requires_grad(t))
        return xsa_error("%s: in-place operation on a tensor that requires "
                         "grad (use xsa.no_grad, or detach())", op);
    return 0;
}

int xsa_ag_zero_grad(xsa_tensor *t)
{
    if (!t) return xsa_error("zero_grad: no tensor");
    if (t->grad) return xsa_tensor_fill_(t->grad, 0.0);
    return 0;
}

/* A header over t's storage with t's shape and strides and no graph. */
static xsa_tensor *alias(xsa_tensor *t)
{
    xsa_tensor *a = xsa_tensor_expand(t, t->ndim, t->shape);
    if (a) {
        a->requires_grad = 0;
        a->grad_fn = NULL;
        a->grad = NULL;
    }
    return a;
}

xsa_tensor *xsa_ag_detach(xsa_tensor *t)
{
    if (!t) {
        xsa_error("detach: no tensor");
        return NULL;
    }
    return alias(t);
}

/* ---- node lifetime ---------------------------------------------------- */

/* Drops what a node holds (inputs, saved values, context), keeping the node. */
static void drop_buffers(node *n)
{
    for (int i = 0; i < n->n_in; i++) {
        xsa_tensor_free(n->in[i]);
        n->in[i] = NULL;
    }
    xsa_tensor_free(n->out);
    n->out = NULL;
    for (int i = 0; i < 4; i++) {
        xsa_tensor_free(n->sv[i]);
        n->sv[i] = NULL;
    }
    xsa_tensor_free(n->gacc);
    n->gacc = NULL;
    if (n->ctx_free && n->ctx) n->ctx_free(n->ctx);
    n->ctx = NULL;
    n->released = 1;
}

/*
 * Freeing a node frees its inputs, which may free their nodes, and so on up a
 * graph thousands of ops deep. A thread-local worklist turns that recursion
 * into a loop: a nested release only queues its node.
 */
void xsa_ag_node_release(struct xsa_ag_node *n)
{
    if (!n || --n->refcount > 0) return;
    n->next_free = pending;
    pending = n;
    if (releasing) return;
    releasing = 1;
    while (pending) {
        node *x = pending;
        pending = x->next_free;
        drop_buffers(x);
        free(x);
    }
    releasing = 0;
}

static int any_needs(int n, xsa_tensor *const *in)
{
    if (!grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (xsa_ag_requires_grad(in[i])) return 1;
    return 0;
}

static node *node_new(const char *name, bwd_fn bw, int n, xsa_tensor *const *in)
{
    xsa_tensor_grad_fn_release = xsa_ag_node_release;
    node *nd = calloc(1, sizeof *nd);
    if (!nd) {
        xsa_error("%s: out of memory for the autograd node", name);
        return NULL;
    }
    nd->refcount = 1;
    nd->name = name;
    nd->backward = bw;
    nd->n_in = n;
    for (int i = 0; i < n; i++) {
        if (in[i]) {
            xsa_tensor_retain(in[i]);
            nd->in[i] = in[i];
            nd->need[i] = xsa_ag_requires_grad(in[i]);
        }
    }
    return nd;
}

/* Hangs nd on out (a fresh result). Returns out, or NULL after freeing both. */
static xsa_tensor *attach(xsa_tensor *out, node *nd, int save_out)
{
    if (!out || !nd) {
        xsa_tensor_free(out);
        if (nd) xsa_ag_node_release(nd);
        return NULL;
    }
    for (int i = 0; i < nd->n_in; i++) {
        if (nd->in[i] == out) { /* an identity (contiguous of a contiguous) */
            xsa_ag_node_release(nd);
            return out;
        }
    }
    if (save_out) {
        nd->out = alias(out);
        if (!nd->out) {
            xsa_ag_node_release(nd);
            xsa_tensor_free(out);
            return NULL;
        }
    }
    nd->out_ndim = out->ndim;
    memcpy(nd->out_shape, out->shape, sizeof out->shape);
    out->grad_fn = nd;
    return out;
}

/* ---- helpers for backward formulas ------------------------------------ */

static int normdim(int d, int ndim) { return d < 0 ? d + ndim : d; }

/* g summed over the dimensions a forward broadcast added or stretched, so it
 * has exactly `shape`. Owned result. */
static xsa_tensor *sum_to(xsa_tensor *g, int ndim, const int64_t *shape)
{
    xsa_tensor_retain(g);
    xsa_tensor *t = g;
    while (t && t->ndim > ndim) {
        xsa_tensor *r = xsa_tensor_reduce(XSA_SUM, t, 0, 0);
        xsa_tensor_free(t);
        t = r;
    }
    for (int d = 0; t && d < ndim; d++) {
        if (shape[d] == 1 && t->shape[d] != 1) {
            xsa_tensor *r = xsa_tensor_reduce(XSA_SUM, t, d, 1);
            xsa_tensor_free(t);
            t = r;
        }
    }
    if (t && (t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim) != 0)) {
        char b1[128], b2[128];
        xsa_error("backward: gradient of shape %s does not reduce to %s",
                  xsa_shape_str(t->ndim, t->shape, b1, sizeof b1),
                  xsa_shape_str(ndim, shape, b2, sizeof b2));
        xsa_tensor_free(t);
        return NULL;
    }
    return t;
}

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
    if (!out || !binop_diff(op) || out->dtype != XSA_FLOAT32 || !any_needs(2, in)) return out;
    node *nd = node_new(binop_name(op), bw_binary, 2, in);
    if (nd) nd->op = op;
    return attach(out, nd, op == XSA_POW);
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
    if (!out || !binop_diff(op) || out->dtype != XSA_FLOAT32 || !any_needs(1, &a)) return out;
    node *nd = node_new(binop_name(op), bw_binary_scalar, 1, &a);
    if (nd) {
        nd->op = op;
        nd->s = s;
        nd->reversed = reversed;
    }
    return attach(out, nd, op == XSA_POW && reversed);
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
    for (int64_t i = 0; i < N; i++) {
        double xi = x[i], gi = gy[i], d = 0.0;
        switch ((xsa_unop)n->op) {
        case XSA_NEG: d = -1.0; break;
        case XSA_EXP: d = yy[i]; break;
        case XSA_LOG: d = 1.0 / xi; break;
        case XSA_SQRT: d = 0.5 / yy[i]; break;
        case XSA_TANH: d = 1.0 - (double)yy[i] * yy[i]; break;
        case XSA_RELU: d = xi > 0.0 ? 1.0 : 0.0; break;
        case XSA_GELU: /* exact: Phi(x) + x phi(x), as tensor_ops' erf GELU */
            d = 0.5 * (1.0 + erf(xi * 0.7071067811865476)) +
                xi * 0.3989422804014327 * exp(-0.5 * xi * xi);
            break;
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
    if (!out || !any_needs(1, &a)) return out;
    node *nd = node_new(unop_name(op), bw_unary, 1, &a);
    if (nd) nd->op = op;
    int save = op == XSA_EXP || op == XSA_SQRT || op == XSA_TANH || op == XSA_SIGMOID;
    return attach(out, nd, save);
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
    if (!out || op == XSA_ARGMAX || op == XSA_ARGMIN || !any_needs(1, &a)) return out;
    static const char *names[] = {"SumBackward", "MeanBackward", "MaxBackward",
                                  "MinBackward", "", "", "VarBackward"};
    node *nd = node_new(names[op], bw_reduce, 1, &a);
    if (nd) {
        nd->op = op;
        nd->dim = dim == XSA_ALL_DIMS ? dim : normdim(dim, a->ndim);
        nd->keepdim = keepdim;
    }
    return attach(out, nd, op == XSA_MAX || op == XSA_MIN);
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
    if (!out || !any_needs(1, &a)) return out;
    node *nd = node_new("SoftmaxBackward", bw_softmax, 1, &a);
    if (nd) nd->dim = normdim(dim, a->ndim);
    return attach(out, nd, 1);
}

xsa_tensor *xsa_ag_log_softmax(xsa_tensor *a, int dim)
{
    xsa_tensor *out = xsa_tensor_log_softmax(a, dim);
    if (!out || !any_needs(1, &a)) return out;
    node *nd = node_new("LogSoftmaxBackward", bw_softmax, 1, &a);
    if (nd) {
        nd->op = 1;
        nd->dim = normdim(dim, a->ndim);
    }
    return attach(out, nd, 1);
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
        if (a->ndim == 3 && b->ndim == 2) { /* sum over the batch: fold it into M */
            int64_t s1[2] = {a->shape[0] * a->shape[1], a->shape[2]};
            int64_t s2[2] = {g->shape[0] * g->shape[1], g->shape[2]};
            aa = keep(&sc, xsa_tensor_reshape(a, 2, s1));
            gg = keep(&sc, xsa_tensor_reshape(g, 2, s2));
        }
        xsa_tensor *at = aa ? keep(&sc, xsa_tensor_transpose(aa, aa->ndim - 2, aa->ndim - 1)) : NULL;
        gin[1] = (at && gg) ? xsa_tensor_matmul(at, gg) : NULL;
        if (!gin[1]) sc.failed = 1;
    }
    int failed = sc.failed;
    scope_end(&sc);
    return failed ? -1 : 0;
}

xsa_tensor *xsa_ag_matmul(xsa_tensor *a, xsa_tensor *b)
{
    xsa_tensor *out = xsa_tensor_matmul(a, b);
    xsa_tensor *in[2] = {a, b};
    if (!out || !any_needs(2, in)) return out;
    return attach(out, node_new("MatmulBackward", bw_matmul, 2, in), 0);
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
    if (!out || out->dtype != XSA_FLOAT32 || !any_needs(2, in + 1)) return out;
    node *nd = node_new("WhereBackward", bw_where, 3, in);
    if (nd) nd->need[0] = 0;
    return attach(out, nd, 0);
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
    if (!out || out->dtype != XSA_FLOAT32 || !any_needs(1, &a)) return out;
    node *nd = node_new("ClampBackward", bw_clamp, 1, &a);
    if (nd) {
        nd->lo = lo;
        nd->hi = hi;
    }
    return attach(out, nd, 0);
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
    if (!out || !any_needs(1, &t)) return out;
    return attach(out, node_new("CloneBackward", bw_identity, 1, &t), 0);
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
    if (!out || !any_needs(1, &t)) return out;
    return attach(out, node_new(name, bw, 1, &t), 0);
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

xsa_tensor *xsa_ag_cat(int n, xsa_tensor *const *ts, int dim)
{
    const char *fn = "cat";
    if (n < 1 || !ts) return xsa_error("%s: no tensors to concatenate", fn), NULL;
    for (int i = 0; i < n; i++)
        if (!ts[i]) return xsa_error("%s: tensor %d is missing", fn, i + 1), NULL;
    if (n > XSA_AG_MAX_INPUTS) { /* a node holds at most 8 inputs: concatenate in groups */
        xsa_tensor *head = xsa_ag_cat(XSA_AG_MAX_INPUTS, ts, dim);
        if (!head) return NULL;
        xsa_tensor **rest = malloc(sizeof *rest * (size_t)(n - XSA_AG_MAX_INPUTS + 1));
        if (!rest) {
            xsa_tensor_free(head);
            return xsa_error("%s: out of memory", fn), NULL;
        }
        rest[0] = head;
        memcpy(rest + 1, ts + XSA_AG_MAX_INPUTS, sizeof *rest * (size_t)(n - XSA_AG_MAX_INPUTS));
        xsa_tensor *out = xsa_ag_cat(n - XSA_AG_MAX_INPUTS + 1, rest, dim);
        free(rest);
        xsa_tensor_free(head);
        return out;
    }
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
        shape[d] += t->shape[d];
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
    if (!out || !any_needs(n, ts)) return out;
    node *nd = node_new("CatBackward", bw_cat, n, ts);
    if (nd) nd->dim = d;
    return attach(out, nd, 0);
}

/* ---- custom nodes --------------------------------------------------------- */

static int bw_custom(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    for (int i = 0; i < n->n_in; i++) {
        if (!n->need[i]) continue;
        gin[i] = xsa_tensor_zeros(XSA_FLOAT32, n->in[i]->ndim, n->in[i]->shape);
        if (!gin[i]) return -1;
    }
    if (n->cfn(n->ctx, g, gin) != 0) {
        if (!xsa_last_error()[0]) xsa_error("backward: %s failed", n->name);
        return -1;
    }
    return 0;
}

int xsa_ag_attach_custom(xsa_tensor *out, const char *name, int n_inputs,
                         xsa_tensor *const *inputs, xsa_ag_custom_fn fn,
                         void *ctx, void (*ctx_free)(void *))
{
    const char *why = NULL;
    if (!out) why = "no output tensor";
    else if (!fn) why = "no backward function";
    else if (n_inputs < 0 || n_inputs > XSA_AG_MAX_INPUTS) why = "input count out of range";
    else if (n_inputs > 0 && !inputs) why = "no inputs";
    else if (out->grad_fn) why = "the tensor already has a grad_fn";
    else if (out->requires_grad) why = "the tensor is a leaf that requires grad";
    if (why) {
        if (ctx_free && ctx) ctx_free(ctx);
        return xsa_error("attach_custom(%s): %s", name ? name : "?", why);
    }
    node *nd = node_new(name ? name : "CustomBackward", bw_custom, n_inputs, inputs);
    if (!nd) {
        if (ctx_free && ctx) ctx_free(ctx);
        return -1;
    }
    nd->cfn = fn;
    nd->ctx = ctx;
    nd->ctx_free = ctx_free;
    nd->out_ndim = out->ndim;
    memcpy(nd->out_shape, out->shape, sizeof out->shape);
    out->grad_fn = nd;
    return 0;
}

/* ---- the engine ------------------------------------------------------------ */

/* Adds g into the leaf's gradient (allocated zero-filled on first use, or the
 * view of a gradient block the owner preset). */
static int accumulate_leaf(xsa_tensor *leaf, xsa_tensor *g)
{
    if (!leaf->grad) {
        leaf->grad = xsa_tensor_zeros(XSA_FLOAT32, leaf->ndim, leaf->shape);
        if (!leaf->grad) return -1;
    }
    return xsa_tensor_binary_(XSA_ADD, leaf->grad, g);
}

static int accumulate_node(node *n, xsa_tensor *g)
{
    if (!n->gacc) {
        xsa_tensor_retain(g);
        n->gacc = g;
        return 0;
    }
    xsa_tensor *s = xsa_tensor_binary(XSA_ADD, n->gacc, g);
    if (!s) return -1;
    xsa_tensor_free(n->gacc);
    n->gacc = s;
    return 0;
}

typedef struct {
    node **v;
    size_t n, cap;
} nodevec;

static int push(nodevec *nv, node *n)
{
    if (nv->n == nv->cap) {
        size_t cap = nv->cap ? nv->cap * 2 : 64;
        node **v = realloc(nv->v, cap * sizeof *v);
        if (!v) return xsa_error("backward: out of memory");
        nv->v = v;
        nv->cap = cap;
    }
    nv->v[nv->n++] = n;
    return 0;
}

/* Post-order of the nodes reachable from root; an explicit stack, so a graph
 * of any depth is fine. Each node in `order` holds one extra reference. */
typedef struct {
    node *n;
    int k; /* next input to look at */
} frame;

static int topo(node *root, nodevec *order)
{
    frame *st = NULL;
    size_t sn = 0, scap = 0;
    int rc = 0;
    epoch++;
    root->mark = epoch;
    node *todo = root;
    for (;;) {
        if (todo) {
            if (todo->released) {
                rc = xsa_error("backward: the graph behind this tensor was already "
                               "freed by a backward pass (pass retain_graph to "
                               "backward twice)");
                break;
            }
            if (sn == scap) {
                size_t cap = scap ? scap * 2 : 64;
                frame *f = realloc(st, cap * sizeof *f);
                if (!f) {
                    rc = xsa_error("backward: out of memory");
                    break;
                }
                st = f;
                scap = cap;
            }
            st[sn].n = todo;
            st[sn].k = 0;
            sn++;
            todo = NULL;
        }
        if (sn == 0) break;
        frame *f = &st[sn - 1];
        while (f->k < f->n->n_in && !todo) {
            int i = f->k++;
            xsa_tensor *in = f->n->in[i];
            if (f->n->need[i] && in && in->grad_fn && in->grad_fn->mark != epoch) {
                todo = in->grad_fn;
                todo->mark = epoch;
            }
        }
        if (!todo) {
            sn--;
            if (push(order, f->n)) {
                rc = -1;
                break;
            }
            f->n->refcount++;
        }
    }
    free(st);
    return rc;
}

int xsa_ag_backward(xsa_tensor *out, const xsa_tensor *grad_out, int retain_graph)
{
    if (!out) return xsa_error("backward: no tensor");
    if (!xsa_ag_requires_grad(out))
        return xsa_error("backward: the tensor does not require grad and has no grad_fn");
    xsa_tensor *g0;
    if (grad_out) {
        if (!xsa_tensor_same_shape(out, grad_out)) {
            char b1[128], b2[128];
            return xsa_error("backward: gradient of shape %s for a tensor of shape %s",
                             xsa_shape_str(grad_out->ndim, grad_out->shape, b1, sizeof b1),
                             xsa_shape_str(out->ndim, out->shape, b2, sizeof b2));
        }
        g0 = xsa_tensor_to_dtype(grad_out, XSA_FLOAT32);
    } else {
        if (xsa_tensor_numel(out) != 1) {
            char b[128];
            return xsa_error("backward: a gradient is needed for a tensor of shape %s "
                             "(only one-element outputs default to 1)",
                             xsa_shape_str(out->ndim, out->shape, b, sizeof b));
        }
        g0 = xsa_tensor_ones(XSA_FLOAT32, out->ndim, out->shape);
    }
    if (!g0) return -1;
    if (!out->grad_fn) { /* a leaf: its gradient is grad_out itself */
        int rc = accumulate_leaf(out, g0);
        xsa_tensor_free(g0);
        return rc;
    }
    /* backward ops build plain tensors, never graph */
    int prev = xsa_ag_set_enabled(0);
    nodevec order = {0};
    int rc = topo(out->grad_fn, &order);
    if (rc == 0) rc = accumulate_node(out->grad_fn, g0);
    xsa_tensor_free(g0);
    for (size_t k = order.n; rc == 0 && k-- > 0;) {
        node *n = order.v[k];
        xsa_tensor *g = n->gacc;
        if (!g) continue; /* no gradient reached it */
        n->gacc = NULL;
        xsa_tensor *gin[XSA_AG_MAX_INPUTS] = {0};
        rc = n->backward(n, g, gin);
        for (int i = 0; i < n->n_in; i++) {
            xsa_tensor *in = n->in[i];
            if (rc == 0 && gin[i] && n->need[i] && in) {
                xsa_tensor *r = sum_to(gin[i], in->ndim, in->shape);
                if (!r) rc = -1;
                else if (in->grad_fn) rc = accumulate_node(in->grad_fn, r);
                else if (in->requires_grad) rc = accumulate_leaf(in, r);
                xsa_tensor_free(r);
            }
            xsa_tensor_free(gin[i]);
        }
        xsa_tensor_free(g);
    }
    for (size_t k = 0; k < order.n; k++) {
        node *n = order.v[k];
        xsa_tensor_free(n->gacc);
        n->gacc = NULL;
        if (!retain_graph) drop_buffers(n);
    }
    for (size_t k = 0; k < order.n; k++) xsa_ag_node_release(order.v[k]);
    free(order.v);
    xsa_ag_set_enabled(prev);
    return rc;
}

/* ---- fused nn ops: autograd over the kernels of nn.h ---------------------
 * The kernels trust their inputs, so every check happens here. */

static int want_f32(const char *fn, const char *what, const xsa_tensor *t, int ndim)
{
    if (!t) return xsa_error("%s: %s is missing", fn, what);
    if (t->dtype != XSA_FLOAT32)
        return xsa_error("%s: %s must be float32 (got %s)", fn, what, xsa_dtype_name(t->dtype));
    if (ndim > 0 && t->ndim != ndim) {
        char b[128];
        return xsa_error("%s: %s must have %d dimensions (got shape %s)", fn, what, ndim,
                         xsa_shape_str(t->ndim, t->shape, b, sizeof b));
    }
    if (ndim < 0 && t->ndim < 1) return xsa_error("%s: %s must have at least one dimension", fn, what);
    return 0;
}

static int fits_int(const char *fn, int64_t v)
{
    if (v < 1 || v > INT32_MAX) return xsa_error("%s: size %lld out of range", fn, (long long)v);
    return 0;
}

static int shape_err(const char *fn, const char *a, const xsa_tensor *x, const char *b,
                     const xsa_tensor *y)
{
    char s1[128], s2[128];
    return xsa_error("%s: %s %s and %s %s do not match", fn, a,
                     xsa_shape_str(x->ndim, x->shape, s1, sizeof s1), b,
                     xsa_shape_str(y->ndim, y->shape, s2, sizeof s2));
}

static float *fp(xsa_tensor *t) { return t ? xsa_tensor_f32(t) : NULL; }

static xsa_tensor *zeros_like(const xsa_tensor *t)
{
    return xsa_tensor_zeros(XSA_FLOAT32, t->ndim, t->shape);
}

/* embedding: out[...,C] = wte[idx] (+ wpe[t] along the last index dim) */
static int bw_embedding(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *gc = xsa_tensor_contiguous(g);
    if (!gc) return -1;
    if (n->need[1] && !(gin[1] = zeros_like(n->in[1]))) goto fail;
    if (n->need[2] && !(gin[2] = zeros_like(n->in[2]))) goto fail;
    xsa_nn_embedding_backward(fp(gin[1]), fp(gin[2]), xsa_tensor_f32(gc),
                              xsa_tensor_i32(n->sv[0]), n->dims[0], n->dims[1], n->dims[2]);
    xsa_tensor_free(gc);
    return 0;
fail:
    xsa_tensor_free(gc);
    return -1;
}

xsa_tensor *xsa_ag_embedding(xsa_tensor *idx, xsa_tensor *wte, xsa_tensor *wpe)
{
    const char *fn = "embedding";
    if (!idx) return xsa_error("%s: indices are missing", fn), NULL;
    if (idx->dtype != XSA_INT32 || idx->ndim < 1 || idx->ndim > 2)
        return xsa_error("%s: indices must be int32 [T] or [B,T]", fn), NULL;
    if (want_f32(fn, "weight", wte, 2)) return NULL;
    int64_t B = idx->ndim == 2 ? idx->shape[0] : 1, T = idx->shape[idx->ndim - 1];
    int64_t V = wte->shape[0], C = wte->shape[1];
    if (fits_int(fn, B) || fits_int(fn, T) || fits_int(fn, C) || fits_int(fn, V)) return NULL;
    if (wpe) {
        if (want_f32(fn, "position weight", wpe, 2)) return NULL;
        if (wpe->shape[1] != C || wpe->shape[0] < T) {
            char s1[64], s2[64];
            xsa_error("%s: position weight %s needs at least %lld rows of %lld (weight %s)", fn,
                      xsa_shape_str(wpe->ndim, wpe->shape, s1, sizeof s1), (long long)T,
                      (long long)C, xsa_shape_str(wte->ndim, wte->shape, s2, sizeof s2));
            return NULL;
        }
    }
    xsa_tensor *ic = xsa_tensor_contiguous(idx), *wc = xsa_tensor_contiguous(wte);
    int64_t pshape[2] = {T, C};
    xsa_tensor *pc = wpe ? xsa_tensor_contiguous(wpe) : xsa_tensor_zeros(XSA_FLOAT32, 2, pshape);
    int64_t oshape[3] = {B, T, C};
    if (idx->ndim == 1) oshape[0] = T, oshape[1] = C;
    xsa_tensor *out = (ic && wc && pc) ? xsa_tensor_new(XSA_FLOAT32, idx->ndim + 1, oshape) : NULL;
    if (out) {
        const int32_t *ix = xsa_tensor_i32(ic);
        for (int64_t i = 0; i < B * T; i++)
            if (ix[i] < 0 || ix[i] >= V) {
                xsa_error("%s: index %d out of range for a table of %lld rows", fn, (int)ix[i],
                          (long long)V);
                xsa_tensor_free(out);
                out = NULL;
                break;
            }
    }
    if (out)
        xsa_nn_embedding_forward(xsa_tensor_f32(out), xsa_tensor_i32(ic), xsa_tensor_f32(wc),
                                 xsa_tensor_f32(pc), (int)B, (int)T, (int)C);
    xsa_tensor *in[3] = {idx, wte, wpe};
    if (out && any_needs(2, in + 1)) {
        node *nd = node_new("EmbeddingBackward", bw_embedding, 3, in);
        if (nd) {
            nd->need[0] = 0;
            nd->sv[0] = ic;
            ic = NULL;
            nd->dims[0] = (int)B, nd->dims[1] = (int)T, nd->dims[2] = (int)C;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(ic);
    xsa_tensor_free(wc);
    xsa_tensor_free(pc);
    return out;
}

/* The start of a fused op's backward: the output gradient made contiguous
 * and a zero gradient for each of the first k inputs that needs one. NULL
 * (nothing held) on failure. */
static xsa_tensor *fused_grads(node *n, xsa_tensor *g, xsa_tensor **gin, int k)
{
    xsa_tensor *gc = xsa_tensor_contiguous(g);
    if (!gc) return NULL;
    for (int i = 0; i < k; i++)
        if (n->need[i] && !(gin[i] = zeros_like(n->in[i]))) {
            xsa_tensor_free(gc);
            return NULL;
        }
    return gc;
}

/* linear: out[...,OC] = x[...,C] w[C,OC] + b[OC] */
static int bw_linear(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *gc = fused_grads(n, g, gin, 3);
    if (!gc) return -1;
    xsa_nn_linear_backward(fp(gin[0]), fp(gin[1]), fp(gin[2]), xsa_tensor_f32(gc),
                           xsa_tensor_f32(n->sv[0]), xsa_tensor_f32(n->sv[1]), n->dims[0],
                           n->dims[1], n->dims[2]);
    xsa_tensor_free(gc);
    return 0;
}

xsa_tensor *xsa_ag_linear(xsa_tensor *x, xsa_tensor *w, xsa_tensor *b)
{
    const char *fn = "linear";
    if (want_f32(fn, "input", x, -1) || want_f32(fn, "weight", w, 2)) return NULL;
    int64_t C = x->shape[x->ndim - 1], OC = w->shape[1];
    if (w->shape[0] != C) return shape_err(fn, "input", x, "weight [C,OC]", w), NULL;
    if (b) {
        if (want_f32(fn, "bias", b, 1)) return NULL;
        if (b->shape[0] != OC) return shape_err(fn, "weight", w, "bias", b), NULL;
    }
    int64_t N = xsa_tensor_numel(x) / C;
    if (fits_int(fn, N) || fits_int(fn, C) || fits_int(fn, OC)) return NULL;
    int64_t oshape[XSA_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof oshape);
    oshape[x->ndim - 1] = OC;
    xsa_tensor *xc = xsa_tensor_contiguous(x), *wc = xsa_tensor_contiguous(w);
    xsa_tensor *bc = b ? xsa_tensor_contiguous(b) : NULL;
    xsa_tensor *out = (xc && wc && (bc || !b)) ? xsa_tensor_new(XSA_FLOAT32, x->ndim, oshape) : NULL;
    if (out)
        xsa_nn_linear_forward(xsa_tensor_f32(out), xsa_tensor_f32(xc), xsa_tensor_f32(wc), fp(bc),
                              (int)N, (int)C, (int)OC);
    xsa_tensor *in[3] = {x, w, b};
    if (out && any_needs(3, in)) {
        node *nd = node_new("LinearBackward", bw_linear, 3, in);
        if (nd) {
            nd->sv[0] = xc, nd->sv[1] = wc;
            xc = wc = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)C, nd->dims[2] = (int)OC;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(xc);
    xsa_tensor_free(wc);
    xsa_tensor_free(bc);
    return out;
}

/* layernorm over the last dim: x[...,C], w[C], b[C] */
static int bw_layernorm(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *gc = fused_grads(n, g, gin, 3);
    if (!gc) return -1;
    xsa_nn_layernorm_backward(fp(gin[0]), fp(gin[1]), fp(gin[2]), xsa_tensor_f32(gc),
                              xsa_tensor_f32(n->sv[0]), xsa_tensor_f32(n->sv[1]),
                              xsa_tensor_f32(n->sv[2]), xsa_tensor_f32(n->sv[3]), n->dims[0],
                              n->dims[1]);
    xsa_tensor_free(gc);
    return 0;
}

xsa_tensor *xsa_ag_layernorm(xsa_tensor *x, xsa_tensor *w, xsa_tensor *b)
{
    const char *fn = "layernorm";
    if (want_f32(fn, "input", x, -1) || want_f32(fn, "weight", w, 1) || want_f32(fn, "bias", b, 1))
        return NULL;
    int64_t C = x->shape[x->ndim - 1];
    if (w->shape[0] != C) return shape_err(fn, "input", x, "weight", w), NULL;
    if (b->shape[0] != C) return shape_err(fn, "input", x, "bias", b), NULL;
    int64_t N = xsa_tensor_numel(x) / C;
    if (fits_int(fn, N) || fits_int(fn, C)) return NULL;
    xsa_tensor *xc = xsa_tensor_contiguous(x), *wc = xsa_tensor_contiguous(w);
    xsa_tensor *bc = xsa_tensor_contiguous(b);
    xsa_tensor *mean = xsa_tensor_new(XSA_FLOAT32, 1, &N), *rstd = xsa_tensor_new(XSA_FLOAT32, 1, &N);
    xsa_tensor *out = (xc && wc && bc && mean && rstd) ? zeros_like(x) : NULL;
    if (out)
        xsa_nn_layernorm_forward(xsa_tensor_f32(out), xsa_tensor_f32(mean), xsa_tensor_f32(rstd),
                                 xsa_tensor_f32(xc), xsa_tensor_f32(wc), xsa_tensor_f32(bc),
                                 (int)N, (int)C);
    xsa_tensor *in[3] = {x, w, b};
    if (out && any_needs(3, in)) {
        node *nd = node_new("LayernormBackward", bw_layernorm, 3, in);
        if (nd) {
            nd->sv[0] = xc, nd->sv[1] = wc, nd->sv[2] = mean, nd->sv[3] = rstd;
            xc = wc = mean = rstd = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)C;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(xc);
    xsa_tensor_free(wc);
    xsa_tensor_free(bc);
    xsa_tensor_free(mean);
    xsa_tensor_free(rstd);
    return out;
}

/* gelu, exact (erf), through the nn kernel */
static int bw_gelu(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    xsa_tensor *gc = xsa_tensor_contiguous(g);
    if (!gc || !(gin[0] = zeros_like(n->in[0]))) {
        xsa_tensor_free(gc);
        return -1;
    }
    xsa_nn_gelu_backward(xsa_tensor_f32(gin[0]), xsa_tensor_f32(n->sv[0]), xsa_tensor_f32(gc),
                         (size_t)xsa_tensor_numel(gc));
    xsa_tensor_free(gc);
    return 0;
}

xsa_tensor *xsa_ag_gelu(xsa_tensor *x)
{
    if (want_f32("gelu", "input", x, 0)) return NULL;
    xsa_tensor *xc = xsa_tensor_contiguous(x);
    xsa_tensor *out = xc ? zeros_like(x) : NULL;
    if (out) xsa_nn_gelu_forward(xsa_tensor_f32(out), xsa_tensor_f32(xc), (size_t)xsa_tensor_numel(x));
    if (out && any_needs(1, &x)) {
        node *nd = node_new("GeluBackward", bw_gelu, 1, &x);
        if (nd) {
            nd->sv[0] = xc;
            xc = NULL;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(xc);
    return out;
}

/* causal attention SA / XSA(lambda) over qkv[B,T,3C] (or q, k, v [B,T,C]) */
static int bw_attention(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    int B = n->dims[0], T = n->dims[1], C = n->dims[2], NH = n->dims[3];
    xsa_tensor *gc = xsa_tensor_contiguous(g);
    int64_t qshape[3] = {B, T, 3 * (int64_t)C};
    xsa_tensor *dqkv = gc ? xsa_tensor_zeros(XSA_FLOAT32, 3, qshape) : NULL;
    float *scratch = dqkv ? malloc(xsa_nn_attention_scratch_floats(B, T, C, NH) * sizeof(float)) : NULL;
    int rc = -1;
    if (!scratch) {
        if (dqkv) xsa_error("attention: out of memory for the backward scratch");
        goto done;
    }
    xsa_nn_attention_backward(xsa_tensor_f32(dqkv), scratch, xsa_tensor_f32(gc),
                              xsa_tensor_f32(n->sv[0]), xsa_tensor_f32(n->sv[1]), fp(n->sv[2]),
                              B, T, C, NH, n->lambda);
    rc = 0;
    if (n->n_in == 1) {
        gin[0] = dqkv;
        dqkv = NULL;
    } else {
        for (int i = 0; i < 3 && rc == 0; i++) {
            if (!n->need[i]) continue;
            xsa_tensor *v = xsa_tensor_narrow(dqkv, 2, (int64_t)i * C, C);
            gin[i] = v ? xsa_tensor_clone(v) : NULL;
            xsa_tensor_free(v);
            if (!gin[i]) rc = -1;
        }
    }
done:
    free(scratch);
    xsa_tensor_free(dqkv);
    xsa_tensor_free(gc);
    return rc;
}

xsa_tensor *xsa_ag_attention(xsa_tensor *q, xsa_tensor *k, xsa_tensor *v, int n_head,
                             double lambda, double *probe, xsa_tensor **att_out)
{
    const char *fn = "attention";
    if (att_out) *att_out = NULL;
    int packed = !k && !v;
    if (!packed && (!k || !v)) return xsa_error("%s: give q, k and v, or a packed qkv alone", fn), NULL;
    if (want_f32(fn, packed ? "qkv" : "q", q, 3)) return NULL;
    if (!packed && (want_f32(fn, "k", k, 3) || want_f32(fn, "v", v, 3))) return NULL;
    if (!packed && !xsa_tensor_same_shape(q, k)) return shape_err(fn, "q", q, "k", k), NULL;
    if (!packed && !xsa_tensor_same_shape(q, v)) return shape_err(fn, "q", q, "v", v), NULL;
    int64_t B = q->shape[0], T = q->shape[1], C = q->shape[2];
    if (packed) {
        if (C % 3 != 0) {
            char b[64];
            return xsa_error("%s: qkv %s: the last dimension must be 3*C", fn,
                             xsa_shape_str(q->ndim, q->shape, b, sizeof b)), NULL;
        }
        C /= 3;
    }
    if (fits_int(fn, B) || fits_int(fn, T) || fits_int(fn, 3 * C)) return NULL;
    if (n_head < 1 || C % n_head != 0)
        return xsa_error("%s: %d heads do not divide C = %lld", fn, n_head, (long long)C), NULL;
    if (!isfinite(lambda)) return xsa_error("%s: lambda must be finite", fn), NULL;
    if ((double)B * n_head * T * T > (double)XSA_MAX_NUMEL)
        return xsa_error("%s: attention weights of %lld x %d x %lld x %lld are too large", fn,
                         (long long)B, n_head, (long long)T, (long long)T), NULL;
    int64_t qshape[3] = {B, T, 3 * C}, oshape[3] = {B, T, C}, ashape[4] = {B, n_head, T, T};
    xsa_tensor *qkv = NULL;
    if (packed) {
        qkv = xsa_tensor_contiguous(q);
    } else {
        qkv = xsa_tensor_new(XSA_FLOAT32, 3, qshape);
        xsa_tensor *parts[3] = {q, k, v};
        for (int i = 0; qkv && i < 3; i++) {
            xsa_tensor *dst = xsa_tensor_narrow(qkv, 2, i * C, C);
            if (!dst || xsa_tensor_copy_(dst, parts[i]) != 0) {
                xsa_tensor_free(qkv);
                qkv = NULL;
            }
            xsa_tensor_free(dst);
        }
    }
    xsa_tensor *out = qkv ? xsa_tensor_new(XSA_FLOAT32, 3, oshape) : NULL;
    xsa_tensor *att = out ? xsa_tensor_new(XSA_FLOAT32, 4, ashape) : NULL;
    xsa_tensor *y = (att && lambda != 0.0) ? xsa_tensor_new(XSA_FLOAT32, 3, oshape) : NULL;
    if (!att || (lambda != 0.0 && !y)) {
        xsa_tensor_free(out);
        out = NULL;
    }
    if (out)
        xsa_nn_attention_forward(xsa_tensor_f32(out), fp(y), xsa_tensor_f32(att),
                                 xsa_tensor_f32(qkv), (int)B, (int)T, (int)C, n_head,
                                 (float)lambda, probe);
    if (out && att_out) *att_out = xsa_tensor_clone(att); /* the saved one stays private */
    xsa_tensor *in[3] = {q, k, v};
    if (out && any_needs(packed ? 1 : 3, in)) {
        node *nd = node_new(lambda != 0.0 ? "XsaAttentionBackward" : "AttentionBackward",
                            bw_attention, packed ? 1 : 3, in);
        if (nd) {
            nd->sv[0] = qkv, nd->sv[1] = att, nd->sv[2] = y;
            qkv = att = y = NULL;
            nd->dims[0] = (int)B, nd->dims[1] = (int)T, nd->dims[2] = (int)C, nd->dims[3] = n_head;
            nd->lambda = (float)lambda;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(qkv);
    xsa_tensor_free(att);
    xsa_tensor_free(y);
    if (!out && att_out) {
        xsa_tensor_free(*att_out);
        *att_out = NULL;
    }
    return out;
}

/* cross-entropy: mean over rows of -log softmax(logits)[target] */
static int bw_cross_entropy(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    double dloss;
    int64_t zero[XSA_MAX_DIMS] = {0};
    if (xsa_tensor_get(g, zero, &dloss) != 0) return -1;
    xsa_tensor *d = xsa_tensor_new(XSA_FLOAT32, n->in[0]->ndim, n->in[0]->shape);
    if (!d) return -1;
    xsa_nn_crossentropy_backward(xsa_tensor_f32(d), xsa_tensor_f32(n->sv[0]),
                                 xsa_tensor_f32(n->sv[1]), xsa_tensor_i32(n->sv[2]),
                                 (float)dloss, n->dims[0], n->dims[1], xsa_threads());
    gin[0] = d;
    return 0;
}

xsa_tensor *xsa_ag_cross_entropy(xsa_tensor *logits, xsa_tensor *targets)
{
    const char *fn = "cross_entropy";
    if (want_f32(fn, "logits", logits, -1)) return NULL;
    if (!targets || targets->dtype != XSA_INT32)
        return xsa_error("%s: targets must be an int32 tensor", fn), NULL;
    int64_t V = logits->shape[logits->ndim - 1];
    int64_t N = xsa_tensor_numel(logits) / V;
    if (targets->ndim != logits->ndim - 1 ||
        memcmp(targets->shape, logits->shape, sizeof(int64_t) * (size_t)targets->ndim) != 0) {
        char s1[128], s2[128], s3[128];
        return xsa_error("%s: logits %s need targets of shape %s (got %s)", fn,
                         xsa_shape_str(logits->ndim, logits->shape, s1, sizeof s1),
                         xsa_shape_str(logits->ndim - 1, logits->shape, s2, sizeof s2),
                         xsa_shape_str(targets->ndim, targets->shape, s3, sizeof s3)), NULL;
    }
    if (fits_int(fn, N) || fits_int(fn, V)) return NULL;
    xsa_tensor *lc = xsa_tensor_contiguous(logits), *tc = xsa_tensor_contiguous(targets);
    int64_t pshape[2] = {N, V};
    int needs = any_needs(1, &logits);
    xsa_tensor *probs = needs ? xsa_tensor_new(XSA_FLOAT32, 2, pshape) : NULL;
    xsa_tensor *pscale = needs ? xsa_tensor_new(XSA_FLOAT32, 1, &N) : NULL;
    xsa_tensor *out = NULL;
    if (lc && tc && (!needs || (probs && pscale))) {
        const int32_t *tg = xsa_tensor_i32(tc);
        int ok = 1;
        for (int64_t i = 0; i < N && ok; i++)
            if (tg[i] < 0 || tg[i] >= V) {
                xsa_error("%s: target %d out of range for %lld classes", fn, (int)tg[i], (long long)V);
                ok = 0;
            }
        if (ok) out = xsa_tensor_new(XSA_FLOAT32, 0, NULL);
    }
    if (out) {
        double loss = xsa_nn_crossentropy_forward(fp(probs), fp(pscale), NULL, xsa_tensor_f32(lc), xsa_tensor_i32(tc),
                                                  (int)N, (int)V, xsa_threads());
        xsa_tensor_f32(out)[0] = (float)loss;
    }
    xsa_tensor *in[2] = {logits, targets};
    if (out && needs) {
        node *nd = node_new("CrossEntropyBackward", bw_cross_entropy, 2, in);
        if (nd) {
            nd->need[1] = 0;
            nd->sv[0] = probs, nd->sv[1] = pscale, nd->sv[2] = tc;
            probs = pscale = tc = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)V;
        }
        out = attach(out, nd, 0);
    }
    xsa_tensor_free(lc);
    xsa_tensor_free(tc);
    xsa_tensor_free(probs);
    xsa_tensor_free(pscale);
    return out;
}
