/*
 * autograd.c: the reverse-mode engine behind autograd.h: grad mode, nodes and
 * their lifetime, custom nodes, and the backward pass.
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
 * The backward rules live elsewhere: autograd_ops.c for the tensor ops,
 * autograd_nn.c for the fused nn ops; autograd_impl.h is what they share.
 *
 * Version counters (tensor.h): attach records the storage versions of what a
 * node's backward will read (the inputs marked in saved_in, the saved result,
 * the fused ops' sv); the backward pass compares them before running the
 * node and refuses, as PyTorch does, when one was modified in place since
 * (through a view, detach() or under no_grad: in-place ops on tensors that
 * require grad are refused outright).
 *
 * Non-goals: higher-order gradients (backward ops are not recorded),
 * recording in-place ops in the graph, threads (grad mode and the release
 * list are thread-local; a graph belongs to one thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_impl.h"

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

int xsa_agi_any_needs(int n, xsa_tensor *const *in)
{
    if (!grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (xsa_ag_requires_grad(in[i])) return 1;
    return 0;
}

node *xsa_agi_node_new(const char *name, bwd_fn bw, int n, xsa_tensor *const *in)
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
xsa_tensor *xsa_agi_attach(xsa_tensor *out, node *nd, int save_out)
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
    for (int i = 0; i < nd->n_in; i++) nd->in_ver[i] = xsa_tensor_version(nd->in[i]);
    nd->out_ver = xsa_tensor_version(nd->out);
    for (int i = 0; i < 4; i++) nd->sv_ver[i] = xsa_tensor_version(nd->sv[i]);
    nd->out_ndim = out->ndim;
    memcpy(nd->out_shape, out->shape, sizeof out->shape);
    out->grad_fn = nd;
    return out;
}

/* ---- version counters ------------------------------------------------------ */

static int modified(const node *n, const char *what, const xsa_tensor *t, uint64_t want)
{
    char b[128];
    return xsa_error("backward: one of the variables needed for gradient computation has "
                     "been modified by an inplace operation: %s %s of %s is at version %llu; "
                     "expected version %llu (it, or a view of it, was written in place after "
                     "the op; clone() it first)", what,
                     xsa_shape_str(t->ndim, t->shape, b, sizeof b), n->name,
                     (unsigned long long)xsa_tensor_version(t), (unsigned long long)want);
}

/* 0 when every value the backward of n reads is as it was at attach. */
static int check_versions(const node *n)
{
    char what[32];
    for (int i = 0; i < n->n_in && i < XSA_AG_MAX_INPUTS; i++)
        if ((n->saved_in >> i & 1u) && n->in[i] && xsa_tensor_version(n->in[i]) != n->in_ver[i]) {
            snprintf(what, sizeof what, "input %d", i + 1);
            return modified(n, what, n->in[i], n->in_ver[i]);
        }
    if (n->out && xsa_tensor_version(n->out) != n->out_ver) return modified(n, "the output", n->out, n->out_ver);
    for (int k = 0; k < 4; k++) {
        const xsa_tensor *s = n->sv[k];
        if (!s || xsa_tensor_version(s) == n->sv_ver[k]) continue;
        /* a saved contiguous input is usually the input itself: name it so */
        snprintf(what, sizeof what, "a saved tensor");
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] && n->in[i]->storage == s->storage) {
                snprintf(what, sizeof what, "input %d", i + 1);
                return modified(n, what, n->in[i], n->sv_ver[k]);
            }
        return modified(n, what, s, n->sv_ver[k]);
    }
    return 0;
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
    node *nd = xsa_agi_node_new(name ? name : "CustomBackward", bw_custom, n_inputs, inputs);
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
        rc = check_versions(n);
        if (rc == 0) rc = n->backward(n, g, gin);
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
