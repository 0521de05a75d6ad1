/*
 * test_autograd.c: finite-difference checks of every differentiable op of
 * autograd.h, plus the engine's rules (accumulation, broadcasting, no_grad,
 * in-place refusal, freed graphs, xsa_ag_attach_custom). The check itself
 * is tests/gradcheck.h; the GPT model's loss node is test_autograd_gpt.c.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/xsa.h"
#include "check.h"
#include "gradcheck.h"

/* ---- forward closures ----------------------------------------------- */

typedef struct {
    int op;
    double s;
    int rev;
    int dim, keepdim;
} opargs;

static xsa_tensor *f_binary(xsa_tensor **in, const void *a)
{
    return xsa_ag_binary(((const opargs *)a)->op, in[0], in[1]);
}
static xsa_tensor *f_binary_scalar(xsa_tensor **in, const void *a)
{
    const opargs *o = a;
    return xsa_ag_binary_scalar(o->op, in[0], o->s, o->rev);
}
static xsa_tensor *f_unary(xsa_tensor **in, const void *a)
{
    return xsa_ag_unary(((const opargs *)a)->op, in[0]);
}
static xsa_tensor *f_reduce(xsa_tensor **in, const void *a)
{
    const opargs *o = a;
    return xsa_ag_reduce(o->op, in[0], o->dim, o->keepdim);
}
static xsa_tensor *f_softmax(xsa_tensor **in, const void *a)
{
    const opargs *o = a;
    return o->op ? xsa_ag_log_softmax(in[0], o->dim) : xsa_ag_softmax(in[0], o->dim);
}
static xsa_tensor *f_matmul(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_matmul(in[0], in[1]);
}
static xsa_tensor *f_where(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_where(in[2], in[0], in[1]);
}
static xsa_tensor *f_clamp(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_clamp(in[0], -0.5, 0.7);
}
/* a chain of views ending in a product so each view's backward matters */
static xsa_tensor *f_views(xsa_tensor **in, const void *a)
{
    int k = ((const opargs *)a)->op;
    xsa_tensor *t = in[0], *v = NULL;
    int64_t s6[2] = {6, 4}, s3[3] = {2, 3, 4}, e[3] = {2, 2, 3};
    int perm[3] = {2, 0, 1};
    switch (k) {
    case 0: v = xsa_ag_view(t, 2, s6); break;
    case 1: v = xsa_ag_transpose(t, 0, 2); break;
    case 2: v = xsa_ag_permute(t, perm); break;
    case 3: v = xsa_ag_narrow(t, 1, 1, 2); break;
    case 4: v = xsa_ag_select(t, 1, 2); break;
    case 5: v = xsa_ag_unsqueeze(t, 1); break;
    case 6: {
        xsa_tensor *u = xsa_ag_unsqueeze(t, 0);
        v = xsa_ag_squeeze(u, 0);
        xsa_tensor_free(u);
        break;
    }
    case 7: {
        xsa_tensor *tr = xsa_ag_transpose(t, 1, 2);
        v = xsa_ag_reshape(tr, 3, s3);
        xsa_tensor_free(tr);
        break;
    }
    case 8: {
        xsa_tensor *tr = xsa_ag_transpose(t, 0, 1);
        v = xsa_ag_contiguous(tr);
        xsa_tensor_free(tr);
        break;
    }
    case 9: { /* [1,3,1] expanded to [2,3,3] */
        xsa_tensor *n1 = xsa_ag_narrow(t, 0, 0, 1);
        xsa_tensor *n2 = xsa_ag_narrow(n1, 2, 1, 1);
        int64_t es[3] = {2, 3, 3};
        v = xsa_ag_expand(n2, 3, es);
        xsa_tensor_free(n1);
        xsa_tensor_free(n2);
        (void)e;
        break;
    }
    case 10: v = xsa_ag_clone(t); break;
    case 11: {
        xsa_tensor *parts[3] = {t, t, t};
        v = xsa_ag_cat(3, parts, 1);
        break;
    }
    }
    if (!v) return NULL;
    xsa_tensor *r = xsa_ag_binary(XSA_MUL, v, v); /* nonlinear: the backward must route right */
    xsa_tensor_free(v);
    return r;
}

static xsa_tensor *f_embedding(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_embedding(in[2], in[0], in[1]);
}
static xsa_tensor *f_linear(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_linear(in[0], in[1], in[2]);
}
static xsa_tensor *f_layernorm(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_layernorm(in[0], in[1], in[2]);
}
static xsa_tensor *f_gelu(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_gelu(in[0]);
}
static xsa_tensor *f_attention(xsa_tensor **in, const void *a)
{
    const opargs *o = a;
    if (o->op) return xsa_ag_attention(in[0], NULL, NULL, 2, o->s, NULL, NULL);
    return xsa_ag_attention(in[0], in[1], in[2], 2, o->s, NULL, NULL);
}
static xsa_tensor *f_cross_entropy(xsa_tensor **in, const void *a)
{
    (void)a;
    return xsa_ag_cross_entropy(in[0], in[1]);
}

static void test_binary(void)
{
    static const char *names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1};
    for (int op = XSA_ADD; op <= XSA_MINIMUM; op++) {
        /* same shape, then broadcast [2,3] op [3], then [2,1] op [2,3] */
        for (int form = 0; form < 3; form++) {
            int pos = op == XSA_POW || op == XSA_DIV;
            xsa_tensor *in[2];
            in[0] = randn_away(2, form == 2 ? s21 : s23, pos);
            in[1] = randn_away(form == 1 ? 1 : 2, form == 1 ? s3 : s23, pos);
            if (op == XSA_POW) { /* exponents of either sign, base > 0 */
                float *p = xsa_tensor_f32(in[1]);
                for (int64_t i = 0; i < xsa_tensor_numel(in[1]); i++) p[i] = p[i] - 1.2f;
            }
            rg(in[0]);
            rg(in[1]);
            opargs o = {.op = op};
            char nm[64];
            snprintf(nm, sizeof nm, "%s/%d", names[op], form);
            gradcheck(nm, 2, in, f_binary, &o, 1e-3, 1e-2, 2e-3);
            free_all(2, in);
        }
        for (int rev = 0; rev < 2; rev++) {
            xsa_tensor *in[1] = {randn_away(2, s23, op == XSA_POW || (op == XSA_DIV && rev))};
            rg(in[0]);
            opargs o = {.op = op, .s = op == XSA_POW ? (rev ? 1.7 : 2.5) : 0.8, .rev = rev};
            char nm[64];
            snprintf(nm, sizeof nm, "%s_scalar/%d", names[op], rev);
            gradcheck(nm, 1, in, f_binary_scalar, &o, 1e-3, 1e-2, 2e-3);
            free_all(1, in);
        }
    }
    /* comparisons never record a node */
    int64_t s[1] = {3};
    xsa_tensor *a = randn(1, s);
    rg(a);
    xsa_tensor *c = xsa_ag_binary_scalar(XSA_GT, a, 0.0, 0);
    CHECK(c && !c->grad_fn && !c->requires_grad, "comparison records no node");
    xsa_tensor_free(c);
    xsa_tensor_free(a);
}

static void test_unary(void)
{
    static const char *names[] = {"neg", "exp", "log", "sqrt", "tanh", "relu", "gelu", "abs", "sigmoid"};
    int64_t s[2] = {3, 4};
    for (int op = XSA_NEG; op <= XSA_SIGMOID; op++) {
        xsa_tensor *in[1] = {randn_away(2, s, op == XSA_LOG || op == XSA_SQRT)};
        rg(in[0]);
        opargs o = {.op = op};
        gradcheck(names[op], 1, in, f_unary, &o, 1e-3, 1e-2, 2e-3);
        free_all(1, in);
    }
    /* the GELU unary op and xsa_ag_gelu are one kernel pair (nn.h): the same
     * values and gradients, bit for bit, into the tails */
    int64_t gs[1] = {40};
    xsa_rng own; /* its own stream: the later checks keep their inputs */
    xsa_rng_seed(&own, 99);
    xsa_tensor *x1 = xsa_tensor_randn(&own, 1, gs, 0.0, 4.0);
    xsa_tensor_f32(x1)[0] = -10.0f;
    xsa_tensor *x2 = xsa_tensor_clone(x1);
    rg(x1);
    rg(x2);
    xsa_tensor *y1 = xsa_ag_unary(XSA_GELU, x1), *y2 = xsa_ag_gelu(x2);
    xsa_tensor *w = xsa_tensor_randn(&own, 1, gs, 0.0, 1.0);
    int ok = y1 && y2 && xsa_tensor_allclose(y1, y2, 0, 0) == 1 && xsa_ag_backward(y1, w, 0) == 0 &&
             xsa_ag_backward(y2, w, 0) == 0 && xsa_tensor_allclose(x1->grad, x2->grad, 0, 0) == 1;
    CHECK(ok, "unary GELU = nn gelu, values and gradients: %s", xsa_last_error());
    CHECK(y1 && xsa_tensor_f32(y1)[0] < 0.0f, "gelu(-10) = -7.6e-23, not 0 (%g)",
          y1 ? (double)xsa_tensor_f32(y1)[0] : 0.0);
    xsa_tensor_free(y1);
    xsa_tensor_free(y2);
    xsa_tensor_free(w);
    xsa_tensor_free(x1);
    xsa_tensor_free(x2);
}

static void test_reduce(void)
{
    static const char *names[] = {"sum", "mean", "max", "min", "", "", "var"};
    int ops[5] = {XSA_SUM, XSA_MEAN, XSA_MAX, XSA_MIN, XSA_VAR};
    int64_t s[3] = {2, 3, 4};
    for (int k = 0; k < 5; k++) {
        int dims[4] = {XSA_ALL_DIMS, 0, 1, -1};
        for (int d = 0; d < 4; d++)
            for (int keep = 0; keep < 2; keep++) {
                xsa_tensor *in[1] = {randn(3, s)};
                rg(in[0]);
                opargs o = {.op = ops[k], .dim = dims[d], .keepdim = keep};
                char nm[64];
                snprintf(nm, sizeof nm, "%s/dim%d/keep%d", names[ops[k]], dims[d], keep);
                gradcheck(nm, 1, in, f_reduce, &o, 1e-3, 1e-2, 2e-3);
                free_all(1, in);
            }
    }
    xsa_tensor *a = randn(3, s);
    rg(a);
    xsa_tensor *am = xsa_ag_reduce(XSA_ARGMAX, a, 1, 0);
    CHECK(am && !am->grad_fn, "argmax records no node");
    xsa_tensor_free(am);
    xsa_tensor_free(a);
}

static void test_softmax_matmul(void)
{
    int64_t s[3] = {2, 3, 5};
    for (int lg = 0; lg < 2; lg++)
        for (int d = -1; d < 2; d++) {
            xsa_tensor *in[1] = {randn(3, s)};
            rg(in[0]);
            opargs o = {.op = lg, .dim = d};
            gradcheck(lg ? "log_softmax" : "softmax", 1, in, f_softmax, &o, 1e-3, 1e-2, 2e-3);
            free_all(1, in);
        }
    int64_t a2[2] = {3, 4}, b2[2] = {4, 5}, a3[3] = {2, 3, 4}, b3[3] = {2, 4, 5};
    const int64_t *as[3] = {a2, a3, a3}, *bs[3] = {b2, b3, b2};
    int an[3] = {2, 3, 3}, bn[3] = {2, 3, 2};
    for (int k = 0; k < 3; k++) {
        xsa_tensor *in[2] = {randn(an[k], as[k]), randn(bn[k], bs[k])};
        rg(in[0]);
        rg(in[1]);
        gradcheck("matmul", 2, in, f_matmul, NULL, 1e-3, 1e-2, 2e-3);
        free_all(2, in);
    }
    /* a transposed (strided) operand */
    int64_t bt[2] = {5, 4};
    xsa_tensor *b0 = randn(2, bt);
    rg(b0);
    xsa_tensor *in[2] = {randn(2, a2), NULL};
    rg(in[0]);
    xsa_ag_set_enabled(0);
    xsa_tensor *btr = xsa_tensor_transpose(b0, 0, 1);
    xsa_ag_set_enabled(1);
    rg(btr);
    in[1] = btr;
    gradcheck("matmul strided", 2, in, f_matmul, NULL, 1e-3, 1e-2, 2e-3);
    free_all(2, in);
    xsa_tensor_free(b0);
}

static void test_views_where_clamp(void)
{
    static const char *names[] = {"view", "transpose", "permute", "narrow", "select", "unsqueeze",
                                  "squeeze", "reshape", "contiguous", "expand", "clone", "cat"};
    int64_t s[3] = {2, 3, 4};
    for (int k = 0; k <= 11; k++) {
        xsa_tensor *in[1] = {randn(3, s)};
        rg(in[0]);
        opargs o = {.op = k};
        gradcheck(names[k], 1, in, f_views, &o, 1e-3, 1e-2, 2e-3);
        free_all(1, in);
    }
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    xsa_tensor *in[3] = {randn(2, s23), randn(1, s3), NULL};
    xsa_tensor *c = randn(2, s23);
    in[2] = xsa_tensor_binary_scalar(XSA_GT, c, 0.0, 0);
    xsa_tensor_free(c);
    rg(in[0]);
    rg(in[1]);
    gradcheck("where", 3, in, f_where, NULL, 1e-3, 1e-2, 2e-3);
    free_all(3, in);
    xsa_tensor *cl[1] = {randn(2, s23)};
    rg(cl[0]);
    gradcheck("clamp", 1, cl, f_clamp, NULL, 1e-3, 1e-2, 2e-3);
    free_all(1, cl);
}

static void test_nn(void)
{
    int64_t wte_s[2] = {7, 4}, wpe_s[2] = {5, 4}, idx_s[2] = {2, 3};
    xsa_tensor *in[3] = {randn(2, wte_s), randn(2, wpe_s), xsa_tensor_randint(&rng, 0, 7, 2, idx_s)};
    rg(in[0]);
    rg(in[1]);
    gradcheck("nn.embedding", 3, in, f_embedding, NULL, 1e-2, 1e-2, 2e-3);
    free_all(3, in);

    int64_t x_s[3] = {2, 3, 4}, w_s[2] = {4, 5}, b_s[1] = {5};
    xsa_tensor *li[3] = {randn(3, x_s), randn(2, w_s), randn(1, b_s)};
    for (int i = 0; i < 3; i++) rg(li[i]);
    gradcheck("nn.linear", 3, li, f_linear, NULL, 1e-2, 1e-2, 2e-3);
    free_all(3, li);

    int64_t c_s[1] = {4};
    xsa_tensor *ln[3] = {randn(3, x_s), randn(1, c_s), randn(1, c_s)};
    for (int i = 0; i < 3; i++) rg(ln[i]);
    gradcheck("nn.layernorm", 3, ln, f_layernorm, NULL, 1e-2, 2e-2, 5e-3);
    free_all(3, ln);

    xsa_tensor *ge[1] = {randn(3, x_s)};
    rg(ge[0]);
    gradcheck("nn.gelu", 1, ge, f_gelu, NULL, 1e-2, 1e-2, 2e-3);
    free_all(1, ge);

    double lambdas[3] = {0.0, 0.5, 1.0};
    int64_t q_s[3] = {2, 3, 4}, qkv_s[3] = {2, 3, 12};
    for (int l = 0; l < 3; l++) {
        xsa_tensor *at[3] = {randn(3, q_s), randn(3, q_s), randn(3, q_s)};
        for (int i = 0; i < 3; i++) rg(at[i]);
        opargs o = {.op = 0, .s = lambdas[l]};
        char nm[64];
        snprintf(nm, sizeof nm, "nn.attention q,k,v lambda %g", lambdas[l]);
        gradcheck(nm, 3, at, f_attention, &o, 1e-2, 2e-2, 5e-3);
        free_all(3, at);
        xsa_tensor *pk[1] = {randn(3, qkv_s)};
        rg(pk[0]);
        o.op = 1;
        snprintf(nm, sizeof nm, "nn.attention qkv lambda %g", lambdas[l]);
        gradcheck(nm, 1, pk, f_attention, &o, 1e-2, 2e-2, 5e-3);
        free_all(1, pk);
    }

    int64_t lg_s[3] = {2, 3, 6}, tg_s[2] = {2, 3};
    xsa_tensor *ce[2] = {randn(3, lg_s), xsa_tensor_randint(&rng, 0, 6, 2, tg_s)};
    rg(ce[0]);
    gradcheck("nn.cross_entropy", 2, ce, f_cross_entropy, NULL, 1e-2, 1e-2, 1e-3);
    /* the loss value against log_softmax */
    xsa_tensor *loss = xsa_ag_cross_entropy(ce[0], ce[1]);
    xsa_tensor *ls = xsa_tensor_log_softmax(ce[0], -1);
    double want = 0;
    for (int64_t i = 0; i < 6; i++) {
        int64_t ix[3] = {i / 3, i % 3, xsa_tensor_i32(ce[1])[i]};
        double v;
        xsa_tensor_get(ls, ix, &v);
        want -= v / 6;
    }
    CHECK_NEAR(xsa_tensor_f32(loss)[0], want, 1e-5, "cross_entropy value");
    xsa_tensor_free(loss);
    xsa_tensor_free(ls);
    /* bad inputs are errors, not crashes */
    xsa_tensor_i32(ce[1])[0] = 6;
    CHECK(xsa_ag_cross_entropy(ce[0], ce[1]) == NULL && strstr(xsa_last_error(), "out of range"),
          "target out of range: %s", xsa_last_error());
    CHECK(xsa_ag_linear(ce[0], ce[0], NULL) == NULL && strstr(xsa_last_error(), "linear"),
          "linear shapes: %s", xsa_last_error());
    CHECK(xsa_ag_attention(ce[0], NULL, NULL, 4, 1.0, NULL, NULL) == NULL,
          "attention bad heads: %s", xsa_last_error());
    free_all(2, ce);
}

/* ---- fused nn ops on empty batches and size-0 dimensions -----------------
 * Each used to divide by a size that may be 0 (SIGFPE, even inside a Lua
 * pcall); now the result is PyTorch's (an empty tensor, the bias, NaN) or a
 * clear error, and the backward gives zero (or the bias') gradients. */

static xsa_tensor *leafz(int ndim, const int64_t *shape)
{
    xsa_tensor *t = xsa_tensor_ones(XSA_FLOAT32, ndim, shape);
    rg(t);
    return t;
}

/* sum(out) backward; 1 when it ran */
static int back_sum(xsa_tensor *out)
{
    xsa_tensor *s = xsa_ag_reduce(XSA_SUM, out, XSA_ALL_DIMS, 0);
    int ok = s && xsa_ag_backward(s, NULL, 0) == 0;
    xsa_tensor_free(s);
    return ok;
}

static int all_zero(const xsa_tensor *t)
{
    if (!t) return 0;
    for (int64_t i = 0; i < xsa_tensor_numel(t); i++)
        if (xsa_tensor_f32(t)[i] != 0.0f) return 0;
    return 1;
}

/* linear: no input channels (out = the bias on every row, db = rows), an
 * empty batch ([0,3], db = 0) */
static void empty_linear(void)
{
    int64_t x20[2] = {2, 0}, w03[2] = {0, 3}, b3[1] = {3}, x04[2] = {0, 4}, w43[2] = {4, 3};
    xsa_tensor *x = leafz(2, x20), *w = leafz(2, w03), *b = leafz(1, b3);
    xsa_tensor_f32(b)[1] = 2.0f;
    xsa_tensor *y = xsa_ag_linear(x, w, b);
    CHECK(y && y->shape[0] == 2 && y->shape[1] == 3 && xsa_tensor_f32(y)[4] == 2.0f,
          "linear C=0 is the bias: %s", xsa_last_error());
    CHECK(y && back_sum(y) && xsa_tensor_f32(b->grad)[0] == 2.0f && xsa_tensor_numel(w->grad) == 0,
          "linear C=0 backward: db = number of rows: %s", xsa_last_error());
    free_all(3, (xsa_tensor *[]){y, x, w});
    x = leafz(2, x04), w = leafz(2, w43);
    xsa_ag_zero_grad(b);
    y = xsa_ag_linear(x, w, b);
    CHECK(y && y->shape[0] == 0 && y->shape[1] == 3, "linear N=0: %s", xsa_last_error());
    CHECK(y && back_sum(y) && all_zero(w->grad) && all_zero(b->grad), "linear N=0 backward: %s",
          xsa_last_error());
    free_all(4, (xsa_tensor *[]){y, x, w, b});
}

/* layernorm over 0 channels, and of 0 rows; gelu of nothing */
static void empty_layernorm_gelu(void)
{
    int64_t x20[2] = {2, 0}, x04[2] = {0, 4}, c0[1] = {0}, c4[1] = {4};
    xsa_tensor *ln[3] = {leafz(2, x20), leafz(1, c0), leafz(1, c0)};
    xsa_tensor *y = xsa_ag_layernorm(ln[0], ln[1], ln[2]);
    CHECK(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 0 && back_sum(y),
          "layernorm C=0: empty result and backward: %s", xsa_last_error());
    xsa_tensor_free(y);
    free_all(3, ln);
    xsa_tensor *ln2[3] = {leafz(2, x04), leafz(1, c4), leafz(1, c4)};
    y = xsa_ag_layernorm(ln2[0], ln2[1], ln2[2]);
    CHECK(y && y->shape[0] == 0 && back_sum(y) && all_zero(ln2[1]->grad) && all_zero(ln2[2]->grad),
          "layernorm N=0: %s", xsa_last_error());
    xsa_tensor_free(y);
    free_all(3, ln2);

    xsa_tensor *g0 = leafz(2, x04);
    y = xsa_ag_gelu(g0);
    CHECK(y && xsa_tensor_numel(y) == 0 && back_sum(y), "gelu of an empty tensor: %s", xsa_last_error());
    free_all(2, (xsa_tensor *[]){y, g0});
}

/* cross-entropy: no classes is an error, no rows is NaN (mean of nothing) */
static void empty_cross_entropy(void)
{
    int64_t x20[2] = {2, 0}, t2[1] = {2}, t0[1] = {0}, l05[2] = {0, 5};
    xsa_tensor *lg = leafz(2, x20), *tg = xsa_tensor_zeros(XSA_INT32, 1, t2);
    CHECK(xsa_ag_cross_entropy(lg, tg) == NULL &&
          strstr(xsa_last_error(), "cross_entropy: logits [2,0] have no classes (V = 0)"),
          "cross_entropy V=0: %s", xsa_last_error());
    free_all(2, (xsa_tensor *[]){lg, tg});
    lg = leafz(2, l05), tg = xsa_tensor_zeros(XSA_INT32, 1, t0);
    xsa_tensor *y = xsa_ag_cross_entropy(lg, tg);
    CHECK(y && isnan(xsa_tensor_f32(y)[0]), "cross_entropy N=0 is NaN: %s", xsa_last_error());
    CHECK(y && xsa_ag_backward(y, NULL, 0) == 0 && lg->grad && xsa_tensor_numel(lg->grad) == 0,
          "cross_entropy N=0 backward: %s", xsa_last_error());
    free_all(3, (xsa_tensor *[]){y, lg, tg});
}

/* attention: C = 0 is an error whatever n_head; an empty batch is empty */
static void empty_attention(void)
{
    int64_t q120[3] = {1, 2, 0}, q026[3] = {0, 2, 6};
    xsa_tensor *q = leafz(3, q120);
    for (int nh = 0; nh <= 2; nh++)
        CHECK(xsa_ag_attention(q, NULL, NULL, nh, 0.0, NULL, NULL) == NULL &&
              strstr(xsa_last_error(), "attention: qkv [1,2,0] has no channels (C = 0)"),
              "attention C=0, %d heads: %s", nh, xsa_last_error());
    CHECK(xsa_ag_attention(q, q, q, 1, 0.0, NULL, NULL) == NULL && strstr(xsa_last_error(), "no channels"),
          "attention q,k,v C=0: %s", xsa_last_error());
    free_all(1, &q);
    q = leafz(3, q026);
    CHECK(xsa_ag_attention(q, NULL, NULL, 0, 0.0, NULL, NULL) == NULL &&
          strstr(xsa_last_error(), "0 heads do not divide C = 2"), "attention 0 heads: %s", xsa_last_error());
    xsa_tensor *att = NULL;
    xsa_tensor *y = xsa_ag_attention(q, NULL, NULL, 2, 1.0, NULL, &att);
    CHECK(y && y->shape[0] == 0 && y->shape[2] == 2 && att && att->ndim == 4 && att->shape[1] == 2,
          "attention B=0: %s", xsa_last_error());
    CHECK(y && back_sum(y) && q->grad && xsa_tensor_numel(q->grad) == 0, "attention B=0 backward: %s",
          xsa_last_error());
    free_all(3, (xsa_tensor *[]){att, y, q});
}

/* embedding: no indices, no channels, no rows to index */
static void empty_embedding(void)
{
    int64_t i0[1] = {0}, i2[1] = {2}, w40[2] = {4, 0}, w03b[2] = {0, 3}, w43[2] = {4, 3};
    xsa_tensor *idx = xsa_tensor_zeros(XSA_INT32, 1, i0), *wte = leafz(2, w43);
    xsa_tensor *y = xsa_ag_embedding(idx, wte, NULL);
    CHECK(y && y->shape[0] == 0 && y->shape[1] == 3 && back_sum(y) && all_zero(wte->grad),
          "embedding of no indices: %s", xsa_last_error());
    free_all(3, (xsa_tensor *[]){y, idx, wte});
    idx = xsa_tensor_zeros(XSA_INT32, 1, i2), wte = leafz(2, w40);
    y = xsa_ag_embedding(idx, wte, NULL);
    CHECK(y && y->shape[0] == 2 && y->shape[1] == 0 && back_sum(y), "embedding C=0: %s", xsa_last_error());
    free_all(2, (xsa_tensor *[]){y, wte});
    wte = leafz(2, w03b);
    CHECK(xsa_ag_embedding(idx, wte, NULL) == NULL && strstr(xsa_last_error(), "out of range for a table of 0 rows"),
          "embedding V=0: %s", xsa_last_error());
    free_all(2, (xsa_tensor *[]){wte, idx});
}

static void test_nn_empty(void)
{
    empty_linear();
    empty_layernorm_gelu();
    empty_cross_entropy();
    empty_attention();
    empty_embedding();
}

/* test_versions and its cases */
#include "autograd_versions.h"

/* ---- cat of many tensors, long chains, on a small stack -----------------
 * xsa_ag_cat of more than 8 tensors used to recurse once per 7 tensors
 * (100,000 tensors overflowed a small stack, and each level copied the
 * whole result again); its gradient graph is now a tree built in a loop. */

static void test_cat_many(void)
{
    /* 75 pieces of lengths 0..4 along dim 1, every third without a gradient */
    enum { NP = 75 };
    xsa_tensor *p[NP];
    int64_t total = 0;
    for (int i = 0; i < NP; i++) {
        int64_t sh[2] = {2, i % 5};
        p[i] = randn(2, sh);
        if (i % 3) rg(p[i]);
        total += i % 5;
    }
    xsa_tensor *c = xsa_ag_cat(NP, p, 1);
    CHECK(c && c->shape[0] == 2 && c->shape[1] == total, "cat of %d: %s", NP, xsa_last_error());
    int ok = 1;
    int64_t off = 0;
    for (int i = 0; c && i < NP; i++) {
        for (int64_t r = 0; r < 2; r++)
            for (int64_t k = 0; k < p[i]->shape[1]; k++) {
                double a, b;
                xsa_tensor_get(c, (int64_t[]){r, off + k}, &a);
                xsa_tensor_get(p[i], (int64_t[]){r, k}, &b);
                ok &= a == b;
            }
        off += p[i]->shape[1];
    }
    CHECK(ok, "cat of %d: values in order", NP);
    /* backward with a known grad_out: each input's gradient is its slice */
    xsa_tensor *w = c ? randn(2, c->shape) : NULL;
    CHECK(w && xsa_ag_backward(c, w, 0) == 0, "cat of %d backward: %s", NP, xsa_last_error());
    ok = 1;
    off = 0;
    for (int i = 0; w && i < NP; i++) {
        if (i % 3) {
            ok &= p[i]->grad != NULL;
            for (int64_t r = 0; ok && r < 2; r++)
                for (int64_t k = 0; k < p[i]->shape[1]; k++) {
                    double a, b;
                    xsa_tensor_get(p[i]->grad, (int64_t[]){r, k}, &a);
                    xsa_tensor_get(w, (int64_t[]){r, off + k}, &b);
                    ok &= a == b;
                }
        } else {
            ok &= p[i]->grad == NULL;
        }
        off += p[i]->shape[1];
    }
    CHECK(ok, "cat of %d: each gradient is its slice of grad_out", NP);
    CHECK(c && xsa_ag_grad_fn_name(c) && strcmp(xsa_ag_grad_fn_name(c), "CatBackward") == 0, "grad_fn");
    xsa_tensor_free(w);
    xsa_tensor_free(c);
    free_all(NP, p);
}

/* On a 256 KiB stack (1 MiB under the sanitizers): a cat of 100,000
 * tensors, and a chain of 100,000 cats, each with backward and release. */
typedef struct {
    int ok_many, ok_chain;
    char err[256];
} deep_result;

static void *deep_cat(void *arg)
{
    deep_result *res = arg;
    enum { N = 100000 };
    int64_t one = 1;
    xsa_tensor *w = xsa_tensor_ones(XSA_FLOAT32, 1, &one);
    rg(w);
    xsa_tensor **v = malloc(sizeof *v * N);
    for (int i = 0; i < N; i++) v[i] = xsa_ag_binary_scalar(XSA_MUL, w, (double)(i % 7), 0);
    xsa_tensor *c = xsa_ag_cat(N, v, 0);
    for (int i = 0; i < N; i++) xsa_tensor_free(v[i]);
    free(v);
    xsa_tensor *s = c ? xsa_ag_reduce(XSA_SUM, c, XSA_ALL_DIMS, 0) : NULL;
    double want = 0;
    for (int i = 0; i < N; i++) want += i % 7;
    res->ok_many = c && c->shape[0] == N && s && xsa_ag_backward(s, NULL, 0) == 0 &&
                   xsa_tensor_f32(w->grad)[0] == (float)want;
    if (!res->ok_many) snprintf(res->err, sizeof res->err, "%s", xsa_last_error());
    xsa_tensor_free(s);
    xsa_tensor_free(c);
    /* t = cat(t[0:1], w) 100,000 times: a graph 100,000 nodes deep */
    xsa_ag_zero_grad(w);
    xsa_tensor *t = xsa_ag_binary_scalar(XSA_MUL, w, 3.0, 0);
    for (int i = 0; t && i < N; i++) {
        xsa_tensor *head = xsa_ag_narrow(t, 0, 0, 1);
        xsa_tensor *parts[2] = {head, w};
        xsa_tensor *n = head ? xsa_ag_cat(2, parts, 0) : NULL;
        xsa_tensor_free(head);
        xsa_tensor_free(t);
        t = n;
    }
    s = t ? xsa_ag_reduce(XSA_SUM, t, XSA_ALL_DIMS, 0) : NULL;
    /* sum(t) = 3w + w */
    res->ok_chain = s && xsa_ag_backward(s, NULL, 0) == 0 && xsa_tensor_f32(w->grad)[0] == 4.0f;
    if (!res->ok_chain) snprintf(res->err, sizeof res->err, "%s", xsa_last_error());
    xsa_tensor_free(s);
    /* and a chain freed without any backward */
    xsa_tensor_free(t);
    t = xsa_ag_binary_scalar(XSA_MUL, w, 1.0, 0);
    for (int i = 0; t && i < N; i++) {
        xsa_tensor *parts[2] = {t, w};
        xsa_tensor *n = xsa_ag_cat(i % 2 ? 2 : 1, parts, 0);
        xsa_tensor *h = n ? xsa_ag_narrow(n, 0, 0, 1) : NULL;
        xsa_tensor_free(n);
        xsa_tensor_free(t);
        t = h;
    }
    res->ok_chain &= t != NULL;
    xsa_tensor_free(t);
    xsa_tensor_free(w);
    return NULL;
}

static void test_cat_deep(void)
{
#if defined(__SANITIZE_ADDRESS__)
    size_t stack = (size_t)1 << 20;
#else
    size_t stack = (size_t)256 << 10;
#endif
    pthread_attr_t attr;
    pthread_t th;
    deep_result res = {0};
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack);
    int started = pthread_create(&th, &attr, deep_cat, &res) == 0;
    CHECK(started, "thread with a small stack");
    if (started) pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    CHECK(res.ok_many, "cat of 100,000 tensors on a %zu KiB stack: %s", stack >> 10, res.err);
    CHECK(res.ok_chain, "a chain of 100,000 cats on a %zu KiB stack: %s", stack >> 10, res.err);
}

/* ---- engine rules ----------------------------------------------------- */

static int custom_calls;
static int custom_bw(void *ctx, const xsa_tensor *g, xsa_tensor **gin)
{
    double k = *(double *)ctx;
    custom_calls++;
    /* out = k * a (elementwise): grad a = k g */
    if (gin[0]) xsa_tensor_binary_(XSA_ADD, gin[0], g), xsa_tensor_binary_scalar_(XSA_MUL, gin[0], k);
    return 0;
}
static int custom_freed;
static void custom_free(void *ctx)
{
    custom_freed++;
    free(ctx);
}

static xsa_tensor *block_grad; /* n == 0 form: the fn owns the gradient */
static int custom_bw0(void *ctx, const xsa_tensor *g, xsa_tensor **gin)
{
    (void)ctx;
    (void)gin;
    return xsa_tensor_binary_(XSA_ADD, block_grad, g);
}

/* accumulation over backward calls, a tensor used twice, retain_graph, a
 * non-scalar output, no_grad and in-place (a: a [2,3] leaf) */
static void engine_backward(xsa_tensor *a)
{
    /* accumulation over two backward calls */
    for (int k = 0; k < 2; k++) {
        xsa_tensor *y = xsa_ag_binary_scalar(XSA_MUL, a, 3.0, 0);
        xsa_tensor *l = xsa_ag_reduce(XSA_SUM, y, XSA_ALL_DIMS, 0);
        CHECK(xsa_ag_backward(l, NULL, 0) == 0, "backward: %s", xsa_last_error());
        xsa_tensor_free(l);
        xsa_tensor_free(y);
    }
    CHECK_NEAR(xsa_tensor_f32(a->grad)[4], 6.0, 1e-6, "two backward calls accumulate");
    /* a tensor used twice: gradients of both uses add */
    xsa_ag_zero_grad(a);
    xsa_tensor *sq = xsa_ag_binary(XSA_MUL, a, a);
    xsa_tensor *l = xsa_ag_reduce(XSA_SUM, sq, XSA_ALL_DIMS, 0);
    xsa_ag_backward(l, NULL, 1);
    CHECK_NEAR(xsa_tensor_f32(a->grad)[2], 2.0 * xsa_tensor_f32(a)[2], 1e-5, "d(a*a) = 2a");
    /* retain_graph lets a second pass through; without it the graph is gone */
    CHECK(xsa_ag_backward(l, NULL, 0) == 0, "retained graph backward: %s", xsa_last_error());
    CHECK_NEAR(xsa_tensor_f32(a->grad)[2], 4.0 * xsa_tensor_f32(a)[2], 1e-5, "second pass adds");
    CHECK(xsa_ag_backward(l, NULL, 0) == -1 && strstr(xsa_last_error(), "already freed"),
          "third pass refused: %s", xsa_last_error());
    xsa_tensor_free(l);
    xsa_tensor_free(sq);
    /* non-scalar output needs a gradient */
    xsa_tensor *y = xsa_ag_unary(XSA_EXP, a);
    CHECK(xsa_ag_backward(y, NULL, 0) == -1 && strstr(xsa_last_error(), "backward"),
          "non-scalar backward refused: %s", xsa_last_error());
    xsa_tensor_free(y);
    /* no_grad: no node; in-place allowed there, refused outside */
    int prev = xsa_ag_set_enabled(0);
    CHECK(prev == 1 && !xsa_ag_is_enabled(), "grad mode off");
    y = xsa_ag_unary(XSA_EXP, a);
    CHECK(y && !y->grad_fn, "no node under no_grad");
    xsa_tensor_free(y);
    CHECK(xsa_ag_check_inplace(a, "add_") == 0, "in-place under no_grad is fine");
    xsa_ag_set_enabled(prev);
    CHECK(xsa_ag_check_inplace(a, "add_") == -1 && strstr(xsa_last_error(), "in-place"),
          "in-place on a leaf refused: %s", xsa_last_error());
}

/* a preset gradient view receives the gradient in place */
static void engine_preset_grad(void)
{
    int64_t s[2] = {2, 3};
    int64_t bs[1] = {12};
    xsa_tensor *block = xsa_tensor_zeros(XSA_FLOAT32, 1, bs);
    xsa_tensor *gv = xsa_tensor_narrow(block, 0, 6, 6);
    int64_t s23[2] = {2, 3};
    xsa_tensor *gview = xsa_tensor_view(gv, 2, s23);
    xsa_tensor *p = randn(2, s);
    rg(p);
    p->grad = gview;
    xsa_tensor *ps = xsa_ag_reduce(XSA_SUM, p, XSA_ALL_DIMS, 0);
    xsa_ag_backward(ps, NULL, 0);
    CHECK(p->grad == gview && xsa_tensor_f32(block)[7] == 1.0f && xsa_tensor_f32(block)[0] == 0.0f,
          "gradient added into the preset view");
    xsa_tensor_free(ps);
    xsa_tensor_free(p);
    xsa_tensor_free(gv);
    xsa_tensor_free(block);
}

/* attach_custom with inputs (out = 2.5 a, then sum), with none (the fn owns
 * its gradient block), and a custom node released without backward */
static void engine_custom(xsa_tensor *a)
{
    int64_t s[2] = {2, 3};
    double *k = malloc(sizeof *k);
    *k = 2.5;
    xsa_ag_zero_grad(a);
    xsa_tensor *out;
    {
        int pg = xsa_ag_set_enabled(0);
        out = xsa_tensor_binary_scalar(XSA_MUL, a, 2.5, 0);
        xsa_ag_set_enabled(pg);
    }
    CHECK(xsa_ag_attach_custom(out, "times_k", 1, &a, custom_bw, k, custom_free) == 0,
          "attach_custom: %s", xsa_last_error());
    CHECK(strcmp(xsa_ag_grad_fn_name(out), "times_k") == 0, "custom node name");
    xsa_tensor *e = xsa_ag_unary(XSA_EXP, out); /* a regular op after the custom node */
    xsa_tensor *le = xsa_ag_reduce(XSA_SUM, e, XSA_ALL_DIMS, 0);
    CHECK(xsa_ag_backward(le, NULL, 0) == 0, "custom backward: %s", xsa_last_error());
    CHECK(custom_calls == 1 && custom_freed == 1, "custom fn ran once, ctx freed after backward");
    CHECK_NEAR(xsa_tensor_f32(a->grad)[1], 2.5 * exp(2.5 * xsa_tensor_f32(a)[1]), 1e-4,
               "custom gradient reaches the leaf");
    CHECK(xsa_ag_attach_custom(out, "again", 1, &a, custom_bw, NULL, NULL) == -1,
          "attach twice refused");
    xsa_tensor_free(le);
    xsa_tensor_free(e);
    xsa_tensor_free(out);

    /* n == 0: the fn owns its gradient block */
    block_grad = xsa_tensor_zeros(XSA_FLOAT32, 0, NULL);
    xsa_tensor *loss = xsa_tensor_full(XSA_FLOAT32, 0, NULL, 1.25);
    int *dummy = malloc(sizeof *dummy);
    CHECK(xsa_ag_attach_custom(loss, "gpt_loss", 0, NULL, custom_bw0, dummy, free) == 0,
          "attach n=0: %s", xsa_last_error());
    xsa_tensor *l2 = xsa_ag_binary_scalar(XSA_MUL, loss, 4.0, 0);
    CHECK(xsa_ag_backward(l2, NULL, 0) == 0, "n=0 backward: %s", xsa_last_error());
    CHECK_NEAR(xsa_tensor_f32(block_grad)[0], 4.0, 1e-6, "n=0 custom received grad_out");
    xsa_tensor_free(l2);
    xsa_tensor_free(loss);
    xsa_tensor_free(block_grad);
    /* a custom node released without backward frees its ctx */
    custom_freed = 0;
    k = malloc(sizeof *k);
    out = xsa_tensor_zeros(XSA_FLOAT32, 2, s);
    xsa_ag_attach_custom(out, "unused", 1, &a, custom_bw, k, custom_free);
    xsa_tensor_free(out);
    CHECK(custom_freed == 1, "ctx freed with the node");
}

/* a long chain releases without deep recursion */
static void engine_long_chain(void)
{
    int64_t s[2] = {2, 3};
    xsa_tensor *x = randn(2, s);
    rg(x);
    xsa_tensor *c = x;
    xsa_tensor_retain(c);
    for (int i = 0; i < 200000; i++) {
        xsa_tensor *n = xsa_ag_binary_scalar(XSA_ADD, c, 0.0, 0);
        xsa_tensor_free(c);
        c = n;
    }
    xsa_tensor *cs = xsa_ag_reduce(XSA_SUM, c, XSA_ALL_DIMS, 0);
    CHECK(xsa_ag_backward(cs, NULL, 0) == 0, "deep chain backward: %s", xsa_last_error());
    CHECK_NEAR(xsa_tensor_f32(x->grad)[0], 1.0, 1e-6, "deep chain gradient");
    xsa_tensor_free(cs);
    xsa_tensor_free(c);
    xsa_tensor_free(x);
}

static void test_engine(void)
{
    int64_t s[2] = {2, 3};
    xsa_tensor *a = randn(2, s);
    rg(a);
    engine_backward(a);
    engine_preset_grad();
    engine_custom(a);
    xsa_tensor_free(a);
    engine_long_chain();
}

int main(void)
{
    xsa_rng_seed(&rng, 1234);
    test_binary();
    test_unary();
    test_reduce();
    test_softmax_matmul();
    test_views_where_clamp();
    test_nn();
    test_nn_empty();
    test_versions();
    test_cat_many();
    test_cat_deep();
    test_engine();
    return check_done("test_autograd");
}
