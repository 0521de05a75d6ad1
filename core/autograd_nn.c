/*
 * autograd_nn.c: the fused nn ops of autograd.h (embedding, linear,
 * layernorm, gelu, attention, cross-entropy): each validates its inputs, runs
 * the forward kernel of nn.h on contiguous copies and records a node whose
 * backward is the matching nn.h backward kernel, over tensors saved in the
 * node (node->sv) with sizes in node->dims.
 *
 * Non-goals: the kernels themselves (nn.c), the engine (autograd.c), rules
 * built from tensor ops (autograd_ops.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_impl.h"
#include "ckd.h"
#include "nn.h"
#include "system.h"

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

/* The backward of an op whose output is empty (an empty batch, or no
 * channels): nothing flows back, every input's gradient is zero. */
static int bw_zeros(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    (void)g;
    for (int i = 0; i < n->n_in; i++)
        if (n->need[i] && n->in[i] && !(gin[i] = zeros_like(n->in[i]))) return -1;
    return 0;
}

/* The product of t's sizes before its last dimension (the rows N of a
 * [...,C] input), computed without dividing by C (which may be 0) and
 * checked: -1 with an error when it passes XSA_MAX_NUMEL. */
static int64_t rows_of(const char *fn, const xsa_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim - 1; i++)
        if (xsa_ckd_mul_i64(n, t->shape[i], &n) || n > XSA_MAX_NUMEL) {
            char b[128];
            xsa_error("%s: input %s has too many rows", fn, xsa_shape_str(t->ndim, t->shape, b, sizeof b));
            return -1;
        }
    return n;
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
    /* no indices or no channels: an empty result (the indices still checked) */
    int empty = B == 0 || T == 0 || C == 0;
    if (!empty && (fits_int(fn, B) || fits_int(fn, T) || fits_int(fn, C) || (V > 0 && fits_int(fn, V))))
        return NULL;
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
    if (out && !empty)
        xsa_nn_embedding_forward(xsa_tensor_f32(out), xsa_tensor_i32(ic), xsa_tensor_f32(wc),
                                 xsa_tensor_f32(pc), (int)B, (int)T, (int)C);
    xsa_tensor *in[3] = {idx, wte, wpe};
    if (out && xsa_agi_any_needs(2, in + 1)) {
        node *nd = xsa_agi_node_new("EmbeddingBackward", empty ? bw_zeros : bw_embedding, 3, in);
        if (nd) {
            nd->need[0] = 0;
            nd->sv[0] = ic;
            ic = NULL;
            nd->dims[0] = (int)B, nd->dims[1] = (int)T, nd->dims[2] = (int)C;
        }
        out = xsa_agi_attach(out, nd, 0);
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

/* linear with no rows, no input or no output channels, as PyTorch: the
 * result is the bias broadcast over [...,OC] (zeros without one); only the
 * bias gets a gradient, the sum of g over the rows. node->start holds N. */
static int bw_linear_empty(node *n, xsa_tensor *g, xsa_tensor **gin)
{
    if (bw_zeros(n, g, gin) != 0) return -1;
    if (!n->need[2]) return 0;
    xsa_tensor_free(gin[2]);
    int64_t s2[2] = {n->start, n->in[2]->shape[0]};
    xsa_tensor *g2 = xsa_tensor_reshape(g, 2, s2);
    gin[2] = g2 ? xsa_tensor_reduce(XSA_SUM, g2, 0, 0) : NULL;
    xsa_tensor_free(g2);
    return gin[2] ? 0 : -1;
}

static xsa_tensor *linear_empty(xsa_tensor *x, xsa_tensor *w, xsa_tensor *b, int64_t N,
                                const int64_t *oshape)
{
    xsa_tensor *out = xsa_tensor_zeros(XSA_FLOAT32, x->ndim, oshape);
    if (out && b && xsa_tensor_numel(out) > 0 && xsa_tensor_binary_(XSA_ADD, out, b) != 0) {
        xsa_tensor_free(out);
        return NULL;
    }
    xsa_tensor *in[3] = {x, w, b};
    if (!out || !xsa_agi_any_needs(3, in)) return out;
    node *nd = xsa_agi_node_new("LinearBackward", bw_linear_empty, 3, in);
    if (nd) nd->start = N;
    return xsa_agi_attach(out, nd, 0);
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
    int64_t N = rows_of(fn, x);
    if (N < 0) return NULL;
    int64_t oshape[XSA_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof oshape);
    oshape[x->ndim - 1] = OC;
    if (N == 0 || C == 0 || OC == 0) return linear_empty(x, w, b, N, oshape);
    if (fits_int(fn, N) || fits_int(fn, C) || fits_int(fn, OC)) return NULL;
    xsa_tensor *xc = xsa_tensor_contiguous(x), *wc = xsa_tensor_contiguous(w);
    xsa_tensor *bc = b ? xsa_tensor_contiguous(b) : NULL;
    xsa_tensor *out = (xc && wc && (bc || !b)) ? xsa_tensor_new(XSA_FLOAT32, x->ndim, oshape) : NULL;
    if (out)
        xsa_nn_linear_forward(xsa_tensor_f32(out), xsa_tensor_f32(xc), xsa_tensor_f32(wc), fp(bc),
                              (int)N, (int)C, (int)OC);
    xsa_tensor *in[3] = {x, w, b};
    if (out && xsa_agi_any_needs(3, in)) {
        node *nd = xsa_agi_node_new("LinearBackward", bw_linear, 3, in);
        if (nd) {
            nd->sv[0] = xc, nd->sv[1] = wc;
            xc = wc = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)C, nd->dims[2] = (int)OC;
        }
        out = xsa_agi_attach(out, nd, 0);
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
    xsa_tensor *in[3] = {x, w, b};
    if (xsa_tensor_numel(x) == 0) { /* no rows or no channels: an empty result, as PyTorch */
        xsa_tensor *e = zeros_like(x);
        if (!e || !xsa_agi_any_needs(3, in)) return e;
        return xsa_agi_attach(e, xsa_agi_node_new("LayernormBackward", bw_zeros, 3, in), 0);
    }
    int64_t N = xsa_tensor_numel(x) / C; /* C >= 1: x is not empty */
    if (fits_int(fn, N) || fits_int(fn, C)) return NULL;
    xsa_tensor *xc = xsa_tensor_contiguous(x), *wc = xsa_tensor_contiguous(w);
    xsa_tensor *bc = xsa_tensor_contiguous(b);
    xsa_tensor *mean = xsa_tensor_new(XSA_FLOAT32, 1, &N), *rstd = xsa_tensor_new(XSA_FLOAT32, 1, &N);
    xsa_tensor *out = (xc && wc && bc && mean && rstd) ? zeros_like(x) : NULL;
    if (out)
        xsa_nn_layernorm_forward(xsa_tensor_f32(out), xsa_tensor_f32(mean), xsa_tensor_f32(rstd),
                                 xsa_tensor_f32(xc), xsa_tensor_f32(wc), xsa_tensor_f32(bc),
                                 (int)N, (int)C);
    if (out && xsa_agi_any_needs(3, in)) {
        node *nd = xsa_agi_node_new("LayernormBackward", bw_layernorm, 3, in);
        if (nd) {
            nd->sv[0] = xc, nd->sv[1] = wc, nd->sv[2] = mean, nd->sv[3] = rstd;
            xc = wc = mean = rstd = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)C;
        }
        out = xsa_agi_attach(out, nd, 0);
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
    if (out && xsa_agi_any_needs(1, &x)) {
        node *nd = xsa_agi_node_new("GeluBackward", bw_gelu, 1, &x);
        if (nd) {
            nd->sv[0] = xc;
            xc = NULL;
        }
        out = xsa_agi_attach(out, nd, 0);
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

/* The weights [B,NH,T,T] from the blocked kernel's saved statistics */
static xsa_tensor *weights(const xsa_tensor *qkv, const xsa_tensor *saved, const int64_t *ashape)
{
    xsa_tensor *w = xsa_tensor_new(XSA_FLOAT32, 4, ashape);
    if (w)
        xsa_nn_attention_weights(xsa_tensor_f32(w), xsa_tensor_f32(qkv), xsa_tensor_f32(saved),
                                 (int)ashape[0], (int)ashape[2], (int)(qkv->shape[2] / 3),
                                 (int)ashape[1]);
    return w;
}

/* Checks q, k, v (or a packed qkv alone, k and v NULL), the heads and
 * lambda; *C_out the channels of one of q, k, v. */
static int attention_check(const char *fn, const xsa_tensor *q, const xsa_tensor *k,
                           const xsa_tensor *v, int n_head, double lambda, int64_t *C_out)
{
    int packed = !k && !v;
    if (!packed && (!k || !v)) return xsa_error("%s: give q, k and v, or a packed qkv alone", fn);
    if (want_f32(fn, packed ? "qkv" : "q", q, 3)) return -1;
    if (!packed && (want_f32(fn, "k", k, 3) || want_f32(fn, "v", v, 3))) return -1;
    if (!packed && !xsa_tensor_same_shape(q, k)) return shape_err(fn, "q", q, "k", k);
    if (!packed && !xsa_tensor_same_shape(q, v)) return shape_err(fn, "q", q, "v", v);
    int64_t C = q->shape[2];
    if (packed) {
        if (C % 3 != 0) {
            char b[64];
            return xsa_error("%s: qkv %s: the last dimension must be 3*C", fn,
                             xsa_shape_str(q->ndim, q->shape, b, sizeof b));
        }
        C /= 3;
    }
    if (C == 0) {
        char b[64];
        return xsa_error("%s: %s %s has no channels (C = 0)", fn, packed ? "qkv" : "q",
                         xsa_shape_str(q->ndim, q->shape, b, sizeof b));
    }
    if (n_head < 1 || C % n_head != 0)
        return xsa_error("%s: %d heads do not divide C = %lld", fn, n_head, (long long)C);
    if (!isfinite(lambda)) return xsa_error("%s: lambda must be finite", fn);
    *C_out = C;
    return 0;
}

/* An empty batch (B or T = 0): empty results, and a backward of zeros for
 * the n_in inputs in. */
static xsa_tensor *attention_empty(int64_t B, int64_t T, int64_t C, int n_head, int n_in,
                                   xsa_tensor **in, xsa_tensor **att_out)
{
    int64_t os[3] = {B, T, C}, as[4] = {B, n_head, T, T};
    xsa_tensor *e = xsa_tensor_zeros(XSA_FLOAT32, 3, os);
    if (e && att_out && !(*att_out = xsa_tensor_zeros(XSA_FLOAT32, 4, as))) {
        xsa_tensor_free(e);
        return NULL;
    }
    if (!e || !xsa_agi_any_needs(n_in, in)) return e;
    e = xsa_agi_attach(e, xsa_agi_node_new("AttentionBackward", bw_zeros, n_in, in), 0);
    if (!e && att_out) {
        xsa_tensor_free(*att_out);
        *att_out = NULL;
    }
    return e;
}

/* The kernel's input: a packed qkv made contiguous, or q, k and v copied
 * side by side into a new [B,T,3C]. */
static xsa_tensor *attention_qkv(xsa_tensor *q, xsa_tensor *k, xsa_tensor *v, int packed,
                                 const int64_t *qshape, int64_t C)
{
    if (packed) return xsa_tensor_contiguous(q);
    xsa_tensor *qkv = xsa_tensor_new(XSA_FLOAT32, 3, qshape);
    xsa_tensor *parts[3] = {q, k, v};
    for (int i = 0; qkv && i < 3; i++) {
        xsa_tensor *dst = xsa_tensor_narrow(qkv, 2, i * C, C);
        if (!dst || xsa_tensor_copy_(dst, parts[i]) != 0) {
            xsa_tensor_free(qkv);
            qkv = NULL;
        }
        xsa_tensor_free(dst);
    }
    return qkv;
}

xsa_tensor *xsa_ag_attention(xsa_tensor *q, xsa_tensor *k, xsa_tensor *v, int n_head,
                             double lambda, double *probe, xsa_tensor **att_out)
{
    const char *fn = "attention";
    if (att_out) *att_out = NULL;
    int packed = !k && !v;
    int64_t C = 0;
    if (attention_check(fn, q, k, v, n_head, lambda, &C) != 0) return NULL;
    int64_t B = q->shape[0], T = q->shape[1];
    xsa_tensor *in[3] = {q, k, v};
    if (B == 0 || T == 0) return attention_empty(B, T, C, n_head, packed ? 1 : 3, in, att_out);
    if (fits_int(fn, B) || fits_int(fn, T) || fits_int(fn, 3 * C)) return NULL;
    int blocked = T > XSA_NN_ATTN_FULL_MAX; /* att: the blocked kernel's row statistics */
    if ((!blocked || att_out) && (double)B * n_head * T * T > (double)XSA_MAX_NUMEL)
        return xsa_error("%s: attention weights of %lld x %d x %lld x %lld are too large", fn,
                         (long long)B, n_head, (long long)T, (long long)T), NULL;
    int64_t qshape[3] = {B, T, 3 * C}, oshape[3] = {B, T, C}, ashape[4] = {B, n_head, T, T};
    xsa_tensor *qkv = attention_qkv(q, k, v, packed, qshape, C);
    xsa_tensor *out = qkv ? xsa_tensor_new(XSA_FLOAT32, 3, oshape) : NULL;
    int64_t saved = (int64_t)xsa_nn_attention_saved_floats((int)B, (int)T, (int)C, n_head);
    xsa_tensor *att = !out ? NULL : blocked ? xsa_tensor_new(XSA_FLOAT32, 1, &saved)
                                            : xsa_tensor_new(XSA_FLOAT32, 4, ashape);
    int want_y = lambda != 0.0 || blocked;
    xsa_tensor *y = (att && want_y) ? xsa_tensor_new(XSA_FLOAT32, 3, oshape) : NULL;
    if (!att || (want_y && !y)) {
        xsa_tensor_free(out);
        out = NULL;
    }
    if (out)
        xsa_nn_attention_forward(xsa_tensor_f32(out), fp(y), xsa_tensor_f32(att),
                                 xsa_tensor_f32(qkv), (int)B, (int)T, (int)C, n_head,
                                 (float)lambda, probe);
    if (out && att_out) *att_out = blocked ? weights(qkv, att, ashape) : xsa_tensor_clone(att);
    if (out && xsa_agi_any_needs(packed ? 1 : 3, in)) {
        node *nd = xsa_agi_node_new(lambda != 0.0 ? "XsaAttentionBackward" : "AttentionBackward",
                            bw_attention, packed ? 1 : 3, in);
        if (nd) {
            nd->sv[0] = qkv, nd->sv[1] = att, nd->sv[2] = y;
            qkv = att = y = NULL;
            nd->dims[0] = (int)B, nd->dims[1] = (int)T, nd->dims[2] = (int)C, nd->dims[3] = n_head;
            nd->lambda = (float)lambda;
        }
        out = xsa_agi_attach(out, nd, 0);
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
    if (targets->ndim != logits->ndim - 1 ||
        memcmp(targets->shape, logits->shape, sizeof(int64_t) * (size_t)targets->ndim) != 0) {
        char s1[128], s2[128], s3[128];
        return xsa_error("%s: logits %s need targets of shape %s (got %s)", fn,
                         xsa_shape_str(logits->ndim, logits->shape, s1, sizeof s1),
                         xsa_shape_str(logits->ndim - 1, logits->shape, s2, sizeof s2),
                         xsa_shape_str(targets->ndim, targets->shape, s3, sizeof s3)), NULL;
    }
    int64_t N = xsa_tensor_numel(targets); /* the rows, without dividing by V */
    if (N == 0) { /* the mean over no rows: NaN, as PyTorch */
        xsa_tensor *e = xsa_tensor_full(XSA_FLOAT32, 0, NULL, NAN);
        if (!e || !xsa_agi_any_needs(1, &logits)) return e;
        xsa_tensor *in0[2] = {logits, targets};
        node *nd = xsa_agi_node_new("CrossEntropyBackward", bw_zeros, 2, in0);
        if (nd) nd->need[1] = 0;
        return xsa_agi_attach(e, nd, 0);
    }
    if (V == 0) {
        char s1[128];
        return xsa_error("%s: logits %s have no classes (V = 0)", fn,
                         xsa_shape_str(logits->ndim, logits->shape, s1, sizeof s1)), NULL;
    }
    if (fits_int(fn, N) || fits_int(fn, V)) return NULL;
    xsa_tensor *lc = xsa_tensor_contiguous(logits), *tc = xsa_tensor_contiguous(targets);
    int64_t pshape[2] = {N, V};
    int needs = xsa_agi_any_needs(1, &logits);
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
        node *nd = xsa_agi_node_new("CrossEntropyBackward", bw_cross_entropy, 2, in);
        if (nd) {
            nd->need[1] = 0;
            nd->sv[0] = probs, nd->sv[1] = pscale, nd->sv[2] = tc;
            probs = pscale = tc = NULL;
            nd->dims[0] = (int)N, nd->dims[1] = (int)V;
        }
        out = xsa_agi_attach(out, nd, 0);
    }
    xsa_tensor_free(lc);
    xsa_tensor_free(tc);
    xsa_tensor_free(probs);
    xsa_tensor_free(pscale);
    return out;
}
